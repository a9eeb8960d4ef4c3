// SPDX-License-Identifier: MIT
// Real legacy clients from npm (pinned in tests/package-lock.json) through the real gateway:
//   - mcp-remote (a stdio MCP server that proxies to a remote Streamable HTTP URL), driven over
//     its stdio by the SDK v1 stdio client, as a desktop client runs it;
//   - the Inspector CLI (@modelcontextprotocol/inspector-cli, its `--cli` mode: one method, one
//     process, the answer as JSON on stdout).
// Through a pooled server (session_mode = pooled) in front of server-everything: tools listed and
// echo called, two mcp-remote processes at once each get their own answers, the gateway's children
// stay the pool's, and a killed mcp-remote cancels its call at the child (client_disconnected).
// Through a pooled server in front of server-filesystem on a temporary directory: the SDK v1
// client (two sessions), mcp-remote and the Inspector CLI list and read its files, each session
// its own file, all on the pool's one child; a session whose client declares roots of its own
// changes nothing of the child's allowed directory.
// Through a child-mode server in front of a stateless-only child (tests/fixtures/stateless_server.mjs):
// mcp-remote's legacy session is served by the gateway's bridge; and through pooled servers in front
// of that fixture and of an ordinary v2-SDK server (tests/fixtures/v2_plain_server.mjs).
// Neither client reaches the network or opens a browser: the gateway has no [auth], so no OAuth
// flow starts; mcp-remote's HOME and MCP_REMOTE_CONFIG_DIR are a temporary directory.
// Every spawned process is ended by its PID in a finally; every wait polls with a deadline.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { everythingServer, metricSamples, request, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.env.GW_SOURCE_ROOT ?? '.';
const NM = path.join(ROOT, 'tests/node_modules');
const MCP_REMOTE = path.join(NM, 'mcp-remote/dist/proxy.js');
const INSPECTOR = path.join(NM, '@modelcontextprotocol/inspector-cli/build/cli.js');
const STATELESS_JS = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
const FILESYSTEM = path.join(NM, '@modelcontextprotocol/server-filesystem/dist/index.js');
const V2_PLAIN_JS = path.join(ROOT, 'tests/fixtures/v2_plain_server.mjs');
const ADMIN = 'real-clients-admin-token-0123456789abcdef';
const POOLED = 'session_mode = pooled\npool_max_children = 1';

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
const endPid = (pid) => { if (pid && alive(pid)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } };

async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const body = await r.done(scaled(5000));
  assert.equal(r.status, 200, body);
  return metricSamples(body);
}

/**
 * mcp-remote in front of url, connected to an SDK v1 Client over its stdio: {client, pid, stderr, close}.
 * http-only: the gateway's endpoint is Streamable HTTP (no fallback to the old SSE transport tried).
 */
async function mcpRemote(url, name) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const home = tmpdir('mcpgw-remote-');
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [MCP_REMOTE, url, '--allow-http', '--transport', 'http-only'],
    env: { PATH: process.env.PATH, HOME: home, MCP_REMOTE_CONFIG_DIR: home, BROWSER: 'false' },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d.toString(); });
  const client = new Client({ name, version: '1.0.0' });
  const out = { client, pid: null, stderr: () => stderr };
  out.close = async () => {
    await client.close().catch(() => {});
    endPid(out.pid);
  };
  try {
    await client.connect(transport);
  } catch (e) {
    out.pid = transport.pid;
    await out.close();
    throw new Error(`mcp-remote did not connect: ${e.message}; its stderr: ${JSON.stringify(stderr.slice(-2000))}`);
  }
  out.pid = transport.pid;
  return out;
}

/**
 * The Inspector CLI: one method against url; resolves {code, stdout, stderr, json}.
 * Its working directory is its own build directory: the CLI (build/index.js) looks for its
 * package.json with fs.existsSync("../package.json"), relative to the working directory, but
 * imports the path it found relative to its own file, so from any other directory (one whose parent
 * holds no package.json) it imports ../../package.json, which is not there in an npm install, and
 * exits 1 before it connects. The client's limitation, not the gateway's.
 */
function inspector(url, methodArgs) {
  const p = spawn(process.execPath, [INSPECTOR, '--cli', url, '--transport', 'http', ...methodArgs], {
    cwd: path.dirname(INSPECTOR),
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, HOME: tmpdir('mcpgw-inspector-') },
  });
  let stdout = '';
  let stderr = '';
  p.stdout.on('data', (d) => { stdout += d.toString(); });
  p.stderr.on('data', (d) => { stderr += d.toString(); });
  const done = new Promise((resolve) => p.on('close', (code) => {
    let json = null;
    try { json = JSON.parse(stdout); } catch { /* not JSON: the test reports stdout */ }
    resolve({ code, stdout, stderr, json });
  }));
  return { pid: p.pid, done };
}

async function runInspector(url, methodArgs) {
  const run = inspector(url, methodArgs);
  let timer;
  try {
    return await Promise.race([run.done, new Promise((_, rej) => { timer = setTimeout(() => rej(new Error('inspector CLI did not finish')), scaled(30000)); })]);
  } finally {
    clearTimeout(timer);
    endPid(run.pid);
  }
}

test('mcp-remote and the Inspector CLI through a pooled server in front of server-everything: tools, echo, two at once, no child per session', async () => {
  await withGateway({ servers: [everythingServer({ extra: POOLED })], gateway: { admin_token: ADMIN } }, async (gw) => {
    const remotes = [];
    try {
      remotes.push(await mcpRemote(gw.url, 'remote-a'));
      remotes.push(await mcpRemote(gw.url, 'remote-b'));
      const [a, b] = remotes;
      assert.equal(a.client.getServerVersion().name, 'mcp-servers/everything', 'serverInfo as the child gave it');
      const tools = (await a.client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('echo') && tools.includes('trigger-long-running-operation'), tools.join(','));
      // Both at once, interleaved: each process gets its own answers.
      const calls = [];
      for (let i = 0; i < 10; i++)
        for (const [who, r] of [['A', a], ['B', b]])
          calls.push(r.client.callTool({ name: 'echo', arguments: { message: `${who}-${i}` } }).then((res) => [who, i, text(res)]));
      for (const [who, i, t] of await Promise.all(calls)) assert.equal(t, `Echo: ${who}-${i}`);
      // The Inspector CLI, one process per method, each its own pooled session.
      const call = await runInspector(gw.url, ['--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'message=from-inspector']);
      assert.equal(call.code, 0, `inspector tools/call: ${JSON.stringify(call.stdout + call.stderr)}`);
      assert.equal(text(call.json), 'Echo: from-inspector');
      const list = await runInspector(gw.url, ['--method', 'tools/list']);
      assert.equal(list.code, 0, `inspector tools/list: ${JSON.stringify(list.stdout + list.stderr)}`);
      assert.ok(list.json.tools.some((t) => t.name === 'echo'));
      // Sessions are pooled: the pool's one child, whatever the number of sessions. Neither client
      // ends every session it opens: mcp-remote opens a second one of its own ("mcp-remote-fallback-
      // test", its check that Streamable HTTP works) and leaves it open, and the Inspector CLI
      // exits without a DELETE; such sessions stay until session_idle_timeout, and in pooled mode
      // they hold no process. So 2 sessions per mcp-remote and 1 per Inspector CLI run.
      const inits = gw.logs().split('\n').filter((l) => / access .*method=POST .*status=200 .*mcp_method=initialize /.test(l)).length;
      assert.equal(inits, 6, 'two initialize per mcp-remote, one per Inspector CLI run');
      const m = await metrics(gw);
      assert.equal(m['mcpgw_sessions{server="everything",mode="pooled"}'], inits, 'every session open, pooled');
      assert.equal(m['mcpgw_sessions{server="everything",mode="child"}'], 0);
      assert.equal(kids(gw.proc.pid).length, 1, 'one child for every session');
      assert.equal(gw.logs().match(/ child \d+ spawned: /g)?.length, 1, 'the gateway never started another child');
    } finally {
      for (const r of remotes) await r.close();
    }
  });
});

test('the SDK v1 client, mcp-remote and the Inspector CLI through a pooled server in front of server-filesystem: each lists and reads its own files, all on one child', async () => {
  assert.ok(fs.existsSync(FILESYSTEM), `${FILESYSTEM} missing: run \`npm ci\` in tests (tests/deps.sh does it)`);
  const dir = fs.realpathSync(tmpdir('mcpgw-fs-'));
  fs.mkdirSync(path.join(dir, 'sub'));
  for (const [f, body] of [['a.txt', 'alpha'], ['b.txt', 'beta'], ['sub/c.txt', 'gamma'], ['d.txt', 'delta']]) fs.writeFileSync(path.join(dir, f), body);
  const servers = [{ name: 'fs', path: '/mcp', command: `${process.execPath} ${FILESYSTEM} ${dir}`, extra: POOLED }];
  await withGateway({ servers, gateway: { admin_token: ADMIN } }, async (gw) => {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const clients = [];
    const remotes = [];
    try {
      // Two SDK sessions; the second declares roots of its own (another directory): the shared
      // child's allowed directory stays its command line's.
      for (const caps of [{}, { roots: { listChanged: true } }]) {
        const c = new Client({ name: `sdk-${clients.length}`, version: '1.0.0' }, { capabilities: caps });
        if (caps.roots) {
          const { ListRootsRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
          c.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: 'file:///tmp', name: 'elsewhere' }] }));
        }
        await c.connect(new StreamableHTTPClientTransport(new URL(gw.url)));
        clients.push(c);
      }
      const [a, b] = clients;
      assert.match(a.getServerVersion().name, /filesystem/, 'serverInfo as the child gave it');
      const tools = (await a.listTools()).tools.map((t) => t.name);
      for (const t of ['list_directory', 'read_text_file', 'list_allowed_directories']) assert.ok(tools.includes(t), tools.join(','));
      // Interleaved: each session reads its own files and gets its own contents.
      const reads = [];
      for (let i = 0; i < 5; i++)
        for (const [c, f, body] of [[a, 'a.txt', 'alpha'], [b, 'sub/c.txt', 'gamma']])
          reads.push(c.callTool({ name: 'read_text_file', arguments: { path: path.join(dir, f) } }).then((r) => assert.equal(text(r), body, `${f} read ${i}`)));
      await Promise.all(reads);
      const listing = text(await b.callTool({ name: 'list_directory', arguments: { path: dir } }));
      for (const e of ['[FILE] a.txt', '[FILE] b.txt', '[DIR] sub']) assert.ok(listing.includes(e), listing);
      assert.ok(text(await b.callTool({ name: 'list_allowed_directories', arguments: {} })).includes(dir), 'the child\'s own directory still');
      const outside = await a.callTool({ name: 'read_text_file', arguments: { path: '/etc/hostname' } });
      assert.equal(outside.isError, true, 'outside its directory: refused by the server');
      // mcp-remote over its stdio, and the Inspector CLI: the same files through their sessions.
      const r = await mcpRemote(gw.url, 'remote-fs');
      remotes.push(r);
      assert.equal(text(await r.client.callTool({ name: 'read_text_file', arguments: { path: path.join(dir, 'b.txt') } })), 'beta');
      assert.ok(text(await r.client.callTool({ name: 'list_directory', arguments: { path: path.join(dir, 'sub') } })).includes('[FILE] c.txt'));
      const list = await runInspector(gw.url, ['--method', 'tools/call', '--tool-name', 'list_directory', '--tool-arg', `path=${dir}`]);
      assert.equal(list.code, 0, `inspector list_directory: ${JSON.stringify(list.stdout + list.stderr)}`);
      assert.ok(text(list.json).includes('[FILE] d.txt'), text(list.json));
      const read = await runInspector(gw.url, ['--method', 'tools/call', '--tool-name', 'read_text_file', '--tool-arg', `path=${path.join(dir, 'd.txt')}`]);
      assert.equal(read.code, 0, `inspector read_text_file: ${JSON.stringify(read.stdout + read.stderr)}`);
      assert.equal(text(read.json), 'delta');
      // Every session pooled on the one child: 2 SDK, 2 of mcp-remote (its fallback test's and
      // its own), 2 Inspector CLI runs.
      const m = await metrics(gw);
      assert.equal(m['mcpgw_sessions{server="fs",mode="pooled"}'], 6);
      assert.equal(m['mcpgw_sessions{server="fs",mode="child"}'], 0);
      assert.equal(kids(gw.proc.pid).length, 1, 'one child for every session');
      assert.equal(gw.logs().match(/ child \d+ spawned: /g)?.length, 1, 'the gateway never started another child');
    } finally {
      for (const c of clients) await c.close().catch(() => {});
      for (const r of remotes) await r.close();
    }
  });
});

test('a killed mcp-remote cancels its call at the pooled child (client_disconnected)', async () => {
  await withGateway({ servers: [everythingServer({ extra: POOLED })], gateway: { admin_token: ADMIN } }, async (gw) => {
    const r = await mcpRemote(gw.url, 'remote-killed');
    try {
      let progressed = false;
      const call = r.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 60, steps: 120 } }, undefined, {
        onprogress: () => { progressed = true; },
        timeout: scaled(120000),
      });
      call.catch(() => {}); // it fails once mcp-remote is gone
      await waitFor(() => progressed, scaled(10000), 'progress of the long call through mcp-remote');
      const key = 'mcpgw_cancels_total{server="everything",direction="to_child",reason="client_disconnected"}';
      assert.equal((await metrics(gw))[key] ?? 0, 0);
      process.kill(r.pid, 'SIGKILL');
      await waitFor(async () => ((await metrics(gw))[key] ?? 0) === 1, scaled(10000), 'the gateway to cancel the call at the child');
      await gw.waitLog(/session=pool:everything#\d+ cancel sent to child: method=tools\/call child_id=\d+ reason="client disconnected"/, scaled(5000));
      assert.equal(kids(gw.proc.pid).length, 1, 'the pool child stays');
    } finally {
      await r.close();
    }
  });
});

test('mcp-remote through a child-mode server in front of a stateless-only child: its legacy session is bridged', async () => {
  const servers = [{ name: 'stateless', path: '/mcp', command: `${process.execPath} ${STATELESS_JS}` }];
  await withGateway({ servers }, async (gw) => {
    const r = await mcpRemote(gw.url, 'remote-stateless');
    try {
      const tools = (await r.client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('echo'), tools.join(','));
      const res = await r.client.callTool({ name: 'echo', arguments: { text: 'through the bridge' } });
      assert.equal(text(res), 'through the bridge');
    } finally {
      await r.close();
    }
  });
});

test('mcp-remote through pooled servers in front of stateless-only children (the fixture, a v2-SDK server): one child, two clients', async () => {
  const servers = [
    { name: 'stateless', path: '/mcp', command: `${process.execPath} ${STATELESS_JS}`, extra: POOLED },
    { name: 'v2plain', path: '/v2plain', command: `${process.execPath} ${V2_PLAIN_JS}`, extra: POOLED },
  ];
  await withGateway({ servers }, async (gw) => {
    const a = await mcpRemote(gw.url, 'remote-pooled-a');
    const b = await mcpRemote(`${gw.base}/v2plain`, 'remote-pooled-b');
    const c = await mcpRemote(gw.url, 'remote-pooled-c');
    try {
      const tools = (await a.client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('echo'), tools.join(','));
      const [ra, rc] = await Promise.all([
        a.client.callTool({ name: 'echo', arguments: { text: 'pooled a' } }),
        c.client.callTool({ name: 'echo', arguments: { text: 'pooled c' } }),
      ]);
      assert.equal(text(ra), 'pooled a');
      assert.equal(text(rc), 'pooled c');
      assert.equal(b.client.getServerVersion().name, 'v2-plain-server');
      assert.equal(text(await b.client.callTool({ name: 'greet', arguments: { name: 'Grace' } })), 'Hello, Grace');
      assert.equal((gw.logs().match(/session=pool:stateless#\d+ pool child started/g) ?? []).length, 1, 'one child for both sessions');
      assert.match(gw.logs(), /pooled session initialized: \S+, the children stateless/);
    } finally {
      await a.close();
      await b.close();
      await c.close();
    }
  });
});
