// SPDX-License-Identifier: MIT
// The binary's command line: --version, --help, --check-config on good and bad files, and a
// clean stop on SIGTERM/SIGINT with every child reaped; file modes and secret files; each
// server's command and cwd.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, GW_BIN, callTool, initSession, pidAlive, post, startGateway, stopAfter, tmpdir, waitFor, withGateway, get } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;

test('--version prints the version and exits 0', () => {
  const r = spawnSync(GW_BIN, ['--version'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^mcp-gateway \d+\.\d+\.\d+/);
});

test('--help lists every option', () => {
  const r = spawnSync(GW_BIN, ['--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0);
  for (const o of ['--config', '--check-config', '--version', '--help']) assert.ok(r.stdout.includes(o), o);
});

test('an unknown option is a usage error', () => {
  const r = spawnSync(GW_BIN, ['--no-such-option'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
});

test('--check-config accepts the shipped default config', () => {
  const r = spawnSync(GW_BIN, ['--check-config', '--config', path.join(ROOT, 'conf/gateway.ini')], { encoding: 'utf8', cwd: ROOT });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /configuration OK/);
});

// --- the shipped configuration, run from the tree ---------------------------------------------

/**
 * A copy of what the README's first command uses (./build/src/mcp-gateway --config
 * conf/gateway.ini, from the tree's root) in a directory every user may read: the binary, the
 * example server at its relative path, and conf/gateway.ini as shipped but for a free port.
 */
function shippedTree() {
  const t = tmpdir('mcpgw-shipped-');
  fs.chmodSync(t, 0o755); // an ordinary user's gateway, and a root gateway's boxed child, read it
  for (const [from, to] of [[GW_BIN, 'build/src/mcp-gateway'], [EXAMPLE, 'build/tests/fixtures/mcp-example-server']]) {
    fs.mkdirSync(path.dirname(path.join(t, to)), { recursive: true, mode: 0o755 });
    fs.copyFileSync(from, path.join(t, to));
    fs.chmodSync(path.join(t, to), 0o755);
  }
  const shipped = fs.readFileSync(path.join(ROOT, 'conf/gateway.ini'), 'utf8');
  assert.match(shipped, /^listen = 127\.0\.0\.1:8080$/m);
  assert.match(shipped, /^command = build\/tests\/fixtures\/mcp-example-server$/m);
  fs.mkdirSync(path.join(t, 'conf'), { mode: 0o755 });
  fs.writeFileSync(path.join(t, 'conf/gateway.ini'), shipped.replace(/^listen = 127\.0\.0\.1:8080$/m, 'listen = 127.0.0.1:0'), { mode: 0o644 });
  return t;
}

/** NSpid's last field (the pid in its own PID namespace) and the real uid of a process. */
function nsPidAndUid(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return { nspid: Number(/^NSpid:.*?(\d+)\s*$/m.exec(status)[1]), uid: Number(/^Uid:\s+(\d+)/m.exec(status)[1]) };
}

// The README's first command, as root and as an ordinary user (root's run also drops to nobody).
const RUNS = process.getuid() === 0
  ? [['root', [], 'one of a reserved range per child'], ['an ordinary user (nobody)', ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'], "the gateway's"]]
  : [['an ordinary user', [], "the gateway's"]];
for (const [who, wrap, uidText] of RUNS) {
  test(`the shipped conf/gateway.ini from the tree, as ${who}: its example server is boxed and answers a session's and a stateless tools/call`, async () => {
    const t = shippedTree();
    const gw = await startGateway({ dir: t, cwd: t, config: 'conf/gateway.ini', wrap });
    await stopAfter(gw, async () => {
      await gw.waitLog(new RegExp(`\\[server:example\\] sandbox: namespaces user, mount, pid, ipc, uts; network: host; .*uid: ${uidText};`));
      const s = await initSession(gw);
      const { response } = await callTool(gw, s.sid, 'echo', { text: 'boxed' }, { ms: scaled(10000) });
      assert.deepEqual(response?.result?.content, [{ type: 'text', text: 'boxed' }], JSON.stringify(response));
      // The session's child is its own PID namespace's first process, as a uid of its own (root)
      // or the gateway's.
      const child = nsPidAndUid(s.pid);
      assert.equal(child.nspid, 1, `child ${s.pid} in its own PID namespace`);
      if (process.getuid() === 0 && wrap.length === 0) assert.ok(child.uid >= 2147352576 && child.uid < 2147352576 + 65536, `uid ${child.uid} from the reserved range`);
      else assert.equal(child.uid, wrap.length ? 65534 : process.getuid());
      const V = '2026-07-28';
      const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { text: 'boxed stateless' }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } };
      const r = await post(gw, body, { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' } });
      await r.done(scaled(10000));
      assert.equal(r.status, 200, r.text());
      assert.match(r.text(), /"text":"boxed stateless"/);
      await gw.waitLog(/pool:example#\d+ child stderr: mcp-example-server: ready \(pid 1\)/);
    });
  });
}

test('a gateway started in a directory its boxes hide (a credentials_dir here; a packaged instance starts in its state directory) still boxes its children: they start at the view\'s root', async () => {
  const dir = tmpdir('mcpgw-cli-hiddencwd-');
  const creds = path.join(dir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  const cwd = path.join(creds, 'instance');
  fs.mkdirSync(cwd);
  const token = 'tok_hiddencwd_0123456789abcdef01234567';
  const sha = createHash('sha256').update(token).digest('hex');
  fs.writeFileSync(path.join(dir, 'tokens'), `sha256:${sha} alice\n`, { mode: 0o644 });
  const extra = `sandbox = on\ncredentials_dir = ${creds}\ncredentials_missing = server_env`;
  await withGateway({ dir, cwd, auth: { mode: 'bearer', public_url: 'http://127.0.0.1:1', tokens_file: path.join(dir, 'tokens') }, servers: [{ name: 'example', path: '/mcp', command: EXAMPLE, log: '/dev/stderr', extra }] }, async (gw) => {
    await initSession(gw, { headers: { Authorization: `Bearer ${token}` } });
    await gw.waitLog(/child stderr: mcp-example-server: ready \(pid 1\)/);
  });
});

test('--check-config rejects each bad file with file:line: key: reason', () => {
  const dir = path.join(ROOT, 'tests/conf');
  const bad = fs.readdirSync(dir).filter((f) => f.startsWith('bad_') || ['unknown_key.ini', 'long_line.ini', 'no_server.ini', 'dup_server.ini'].includes(f));
  assert.ok(bad.length >= 4, 'bad configs present');
  for (const f of bad) {
    const file = path.join(dir, f);
    const expect = /^; expect: (.*)$/m.exec(fs.readFileSync(file, 'utf8'));
    const r = spawnSync(GW_BIN, ['--check-config', '--config', file], { encoding: 'utf8' });
    assert.equal(r.status, 1, `${f} must be refused`);
    assert.match(r.stderr, /^\S+:\d+: \S+: .+/, `${f}: file:line: key: reason`);
    if (expect) assert.ok(r.stderr.trim().endsWith(expect[1].trim()), `${f}: got ${r.stderr}`);
  }
});

test('a missing config file is an error, not a crash', () => {
  const r = spawnSync(GW_BIN, ['--check-config', '--config', '/nonexistent/gateway.ini'], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /nonexistent/);
});

// --- file modes and the files that keep secrets out of the INI file ---------------------------

const TOKEN = 'tok_0123456789abcdef0123456789abcdef';
const checkFile = (f) => spawnSync(GW_BIN, ['--check-config', '--config', f], { encoding: 'utf8', timeout: 10000 });
function writeMode(f, text, mode) {
  fs.writeFileSync(f, text);
  fs.chmodSync(f, mode);
  return f;
}

test('--check-config: a config writable by its group, or a secret file readable by others, is refused with the chmod that fixes it; a readable config with secrets is warned about', () => {
  const dir = tmpdir('mcpgw-cli-modes-');
  const server = `[server:example]\npath = /mcp\ncommand = ${EXAMPLE}\n`;
  const base = `[gateway]\nlisten = 127.0.0.1:0\n${server}`;
  // The configuration: group-writable refused.
  const conf = writeMode(path.join(dir, 'gw.ini'), base, 0o664);
  let r = checkFile(conf);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.equal(r.stderr.trim(), `${conf}:0: -: ${conf} is writable by its group: chmod go-w ${conf}`);
  fs.chmodSync(conf, 0o644);
  r = checkFile(conf);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'no secrets: no warning');
  // admin_token in a file others may read: loaded, with a warning and its fix.
  writeMode(conf, base.replace('[gateway]\n', `[gateway]\nadmin_token = ${TOKEN}\n`), 0o644);
  r = checkFile(conf);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`warn ${conf} holds secrets .* readable by others: chmod 0640 ${conf}`));
  fs.chmodSync(conf, 0o640);
  r = checkFile(conf);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', '0640: no warning');
  // admin_token_file: readable by others refused, 0640 taken.
  const tok = writeMode(path.join(dir, 'admin_token'), `${TOKEN}\n`, 0o644);
  writeMode(conf, base.replace('[gateway]\n', `[gateway]\nadmin_token_file = ${tok}\n`), 0o644);
  r = checkFile(conf);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.equal(r.stderr.trim(), `${conf}:2: admin_token_file: ${tok} holds a secret and is readable by others: chmod 0640 ${tok}`);
  fs.chmodSync(tok, 0o640);
  r = checkFile(conf);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  // env_file: the same rules.
  const envf = writeMode(path.join(dir, 'example.env'), 'API_KEY=k\n', 0o604);
  writeMode(conf, `${base}env_file = ${envf}\n`, 0o644);
  r = checkFile(conf);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.equal(r.stderr.trim(), `${conf}:6: env_file: ${envf} holds a secret and is readable by others: chmod 0640 ${envf}`);
  fs.chmodSync(envf, 0o660);
  r = checkFile(conf);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /env_file: .* is writable by its group: chmod go-w /);
  fs.chmodSync(envf, 0o600);
  r = checkFile(conf);
  assert.equal(r.status, 0, r.stderr);
});

test('admin_token_file opens /admin/inflight with the token of its first line', async () => {
  const dir = tmpdir('mcpgw-cli-admintok-');
  const tok = writeMode(path.join(dir, 'admin_token'), `${TOKEN}\n`, 0o600);
  await withGateway({ gateway: { admin_token_file: tok } }, async (gw) => {
    const ok = await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.ok((await ok.json()).counters, 'the inflight document');
    const bad = await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${TOKEN}x` } });
    await bad.arrayBuffer();
    assert.notEqual(bad.status, 200);
  });
});

test('env_file reaches the child\'s environment, beside env', async () => {
  const dir = tmpdir('mcpgw-cli-envfile-');
  const envf = writeMode(path.join(dir, 'example.env'), '# a secret\nMY_SECRET=from the file\n', 0o600);
  const command = `/bin/sh -c 'echo "seen: MY_SECRET=$MY_SECRET PLAIN=$PLAIN" >&2; exec ${EXAMPLE}'`;
  await withGateway({ servers: [{ name: 'example', path: '/mcp', command, env: 'PLAIN=yes', extra: `env_file = ${envf}` }] }, async (gw) => {
    await initSession(gw);
    await gw.waitLog(/child stderr: seen: MY_SECRET=from the file PLAIN=yes/);
  });
});

// --- each server's command and cwd -------------------------------------------------------------

test('--check-config warns about a server whose command or cwd is missing, naming the section and the line, and exits 0: the gateway starts with it, and the other servers serve', () => {
  const dir = tmpdir('mcpgw-cli-cmd-');
  const notExec = writeMode(path.join(dir, 'not-exec'), '#!/bin/sh\n', 0o644);
  const cases = [
    [`command = ${dir}/missing --flag\n`, 5, `command: [server:bad] ${dir}/missing: No such file or directory`],
    [`command = ${EXAMPLE}\ncwd = ${dir}/nowhere\n`, 6, `cwd: [server:bad] ${dir}/nowhere: No such file or directory`],
    [`command = ${EXAMPLE}\ncwd = ${notExec}\n`, 6, `cwd: [server:bad] ${notExec}: is not a directory`],
    [`command = ${notExec}\n`, 5, `command: [server:bad] ${notExec}: is not executable (Permission denied)`],
    ['command = no-such-command-mcpgw\n', 5, 'command: [server:bad] no-such-command-mcpgw: not found in PATH'],
    [`command = ./not-exec\ncwd = ${dir}\n`, 5, `command: [server:bad] ${dir}/./not-exec: is not executable`],
  ];
  for (const [lines, line, want] of cases) {
    const conf = writeMode(path.join(dir, 'gw.ini'), `[gateway]\nlisten = 127.0.0.1:0\n[server:bad]\npath = /bad\n${lines}`, 0o644);
    const r = checkFile(conf);
    assert.equal(r.status, 0, `${lines}: ${r.stdout}${r.stderr}`);
    assert.ok(r.stderr.startsWith(`warning: ${conf}:${line}: ${want}`), `${lines}: got ${r.stderr}`);
    assert.match(r.stderr, /; its sessions will fail to start\n$/);
    assert.ok(r.stdout.startsWith(`${conf}: configuration OK (1 servers, 1 with a warning on stderr)\n`), r.stdout);
  }
  // With an error in the same file, the error decides: exit 1.
  const both = writeMode(path.join(dir, 'gw.ini'), `[gateway]\nlisten = 127.0.0.1:0\nno_such_key = 1\n[server:bad]\npath = /bad\ncommand = ${dir}/missing\n`, 0o644);
  const e = checkFile(both);
  assert.equal(e.status, 1, e.stdout + e.stderr);
  assert.match(e.stderr, /no_such_key/);
  // A name without '/' found in PATH, and a relative command found from cwd, are fine.
  fs.chmodSync(notExec, 0o755);
  for (const lines of ['command = sh -c true\n', `command = ./not-exec\ncwd = ${dir}\n`]) {
    const conf = writeMode(path.join(dir, 'gw.ini'), `[gateway]\nlisten = 127.0.0.1:0\n[server:ok]\npath = /ok\n${lines}`, 0o644);
    const r = checkFile(conf);
    assert.equal(r.status, 0, `${lines}: ${r.stderr}`);
    assert.equal(r.stderr, '', 'no warning');
  }
});

test('a server with a missing cwd: the start warns, initialize gets 500, the log names the server and blames cwd, not the command', async () => {
  const dir = tmpdir('mcpgw-cli-cwd-');
  const servers = [
    { name: 'example', path: '/mcp' },
    { name: 'nocwd', path: '/nocwd', command: EXAMPLE, extra: `cwd = ${dir}/nowhere` },
    { name: 'nocmd', path: '/nocmd', command: `${dir}/missing` },
  ];
  await withGateway({ servers }, async (gw) => {
    await gw.waitLog(/warn .*cwd: \[server:nocwd\] .*nowhere: No such file or directory; its sessions will fail to start/);
    await gw.waitLog(/warn .*command: \[server:nocmd\] .*missing: No such file or directory; its sessions will fail to start/);
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } } };
    let r = await post(gw, init, { url: `${gw.base}/nocwd` });
    await r.done();
    assert.equal(r.status, 500);
    assert.match(r.text(), /cwd not found/);
    await gw.waitLog(new RegExp(`server nocwd: cannot start a child: cwd ${dir}/nowhere: No such file or directory`));
    assert.doesNotMatch(gw.logs(), new RegExp(`spawn ${EXAMPLE}`), 'the binary, which exists, is not blamed');
    r = await post(gw, init, { url: `${gw.base}/nocmd` });
    await r.done();
    assert.equal(r.status, 500);
    assert.match(r.text(), /command not found/);
    await gw.waitLog(new RegExp(`server nocmd: cannot start a child: command ${dir}/missing: No such file or directory`));
    await initSession(gw); // the other server serves
  });
});

test('GET /healthz answers 200', async () => {
  const gw = await startGateway();
  try {
    const r = await get(gw, { url: `${gw.base}/healthz`, headers: { Accept: '*/*' } });
    await r.done();
    assert.equal(r.status, 200);
    assert.deepEqual(r.json(), { status: 'ok' });
  } finally {
    await gw.stop();
  }
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  test(`${sig} stops cleanly: exit 0 and every child reaped`, async () => {
    const gw = await startGateway();
    const a = await initSession(gw);
    const b = await initSession(gw);
    assert.ok(pidAlive(a.pid) && pidAlive(b.pid));
    await gw.stop(sig);
    await waitFor(() => !pidAlive(a.pid) && !pidAlive(b.pid), 5000, 'children gone');
  });
}

test('SIGTERM mid-call: the child sees the cancel, the client an error, exit 0', async () => {
  const gw = await startGateway();
  const s = await initSession(gw);
  const call = callTool(gw, s.sid, 'slow', { steps: 100, interval_ms: 100 }, { id: 'long-1' });
  await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'slow'), 5000, 'call reached child');
  await gw.stop('SIGTERM');
  const { response } = await call;
  assert.equal(response.id, 'long-1');
  assert.equal(response.error.code, -32603);
  assert.match(response.error.message, /shutting down/);
  const cancel = gw.childMessages().find((m) => m.method === 'notifications/cancelled');
  assert.ok(cancel, 'child received a cancel');
  assert.equal(cancel.params.reason, 'gateway shutting down');
  await waitFor(() => !pidAlive(s.pid), 5000, 'child gone');
});
