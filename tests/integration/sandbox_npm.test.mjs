// SPDX-License-Identifier: MIT
// A real server from npm, boxed (sandbox = on) through the real gateway in both eras:
// @modelcontextprotocol/server-filesystem (pinned in tests/package-lock.json), given the two bound
// directories and also the whole filesystem ("/"), so that what it reaches is what the box shows
// and nothing else: it refuses no path itself. A
// directory bound by sandbox_writable_paths is listed, read and written; one bound by
// sandbox_read_only_paths is read and refuses a write; the gateway's configuration, another
// test's directory and /etc/shadow are out of reach. With the box off the same calls reach them
// all, so each case can fail.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { callTool, initSession, post, startGateway, stopAfter, tmpdir } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.getuid() === 0;
const STATELESS = '2026-07-28';
const LEGACY = '2025-11-25';

/** The server-filesystem entry point (installed by `npm ci` in tests/, tests/deps.sh). */
function filesystemJs() {
  const js = path.join(process.env.GW_SOURCE_ROOT, 'tests/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
  if (!fs.existsSync(js)) throw new Error(`${js} missing: run \`npm ci\` in tests/ (tests/deps.sh does it)`);
  return fs.realpathSync(js);
}

/** A tool result as text: "ok:TEXT" or "error:TEXT" (isError, or a JSON-RPC error). */
function resultText(response) {
  if (response?.error) return `error:${response.error.message}`;
  assert.ok(response?.result, JSON.stringify(response));
  const text = (response.result.content ?? []).map((c) => c.text ?? '').join('\n');
  return `${response.result.isError ? 'error' : 'ok'}:${text}`;
}

/** One era's client: call(name, args) resolves to resultText of the answer. */
async function client(gw, era) {
  if (era === LEGACY) {
    const { sid, version } = await initSession(gw, { version: LEGACY });
    assert.equal(version, LEGACY);
    return async (name, args) => resultText((await callTool(gw, sid, name, args, { ms: scaled(20000) })).response);
  }
  let id = 100;
  return async (name, args) => {
    const body = { jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': STATELESS, 'io.modelcontextprotocol/clientCapabilities': {} } } };
    const r = await post(gw, body, { headers: { 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/call', 'Mcp-Name': name } });
    await r.done(scaled(20000));
    assert.equal(r.status, 200, r.text());
    const answer = /json/.test(r.headers['content-type'] ?? '') ? r.json() : r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
    return resultText(answer);
  };
}

/**
 * server-filesystem behind a gateway with the box on or off; the texts of every call, by era.
 * The directory S holds the gateway's configuration (S/conf), the writable directory S/rw, the
 * read-only one S/ro, and S/other, a directory of another test that nothing binds.
 */
async function scenario(box) {
  const s = tmpdir('mcpgw-boxfs-');
  fs.chmodSync(s, 0o755); // a root gateway's boxed child runs as a uid of its own
  const rw = path.join(s, 'rw');
  const ro = path.join(s, 'ro');
  const other = path.join(s, 'other');
  for (const d of ['conf', 'ro', 'other']) fs.mkdirSync(path.join(s, d), { mode: 0o755 });
  fs.mkdirSync(rw);
  fs.chmodSync(rw, 0o777);
  fs.writeFileSync(path.join(rw, 'hello.txt'), 'hello-rw\n', { mode: 0o644 });
  fs.writeFileSync(path.join(ro, 'readme.txt'), 'read-only-content\n', { mode: 0o644 });
  fs.writeFileSync(path.join(other, 'secret.txt'), 'OTHER-TEST-SECRET\n', { mode: 0o644 });
  const modules = fs.realpathSync(path.join(process.env.GW_SOURCE_ROOT, 'tests/node_modules'));
  const gw = await startGateway({
    dir: path.join(s, 'conf'),
    servers: [{
      name: 'filesystem', path: '/mcp', command: `${process.execPath} ${filesystemJs()} ${rw} ${ro} /`,
      // node reserves far more address space than it uses: no RLIMIT_AS (the default).
      extra: [`sandbox = ${box ? 'on' : 'off'}`, 'sandbox_network = none',
        `sandbox_read_only_paths = ${modules}, ${ro}`, `sandbox_writable_paths = ${rw}`].join('\n'),
    }],
  });
  const out = {};
  try {
    await stopAfter(gw, async () => {
      if (box) await gw.waitLog(/\[server:filesystem\] sandbox: namespaces user, mount, pid, ipc, uts, net/);
      for (const era of [LEGACY, STATELESS]) {
        const call = await client(gw, era);
        const tag = era === LEGACY ? 'legacy' : 'stateless';
        const o = {};
        o.list = await call('list_directory', { path: rw });
        o.readRw = await call('read_text_file', { path: path.join(rw, 'hello.txt') });
        o.write = await call('write_file', { path: path.join(rw, `${tag}.txt`), content: `written-${tag}` });
        o.written = fs.existsSync(path.join(rw, `${tag}.txt`)) ? fs.readFileSync(path.join(rw, `${tag}.txt`), 'utf8') : null;
        o.readBack = await call('read_text_file', { path: path.join(rw, `${tag}.txt`) });
        o.readRo = await call('read_text_file', { path: path.join(ro, 'readme.txt') });
        o.writeRo = await call('write_file', { path: path.join(ro, `${tag}.txt`), content: 'x' });
        o.writtenRo = fs.existsSync(path.join(ro, `${tag}.txt`));
        o.config = await call('read_text_file', { path: gw.conf });
        o.other = await call('read_text_file', { path: path.join(other, 'secret.txt') });
        o.shadow = await call('read_text_file', { path: '/etc/shadow' });
        out[tag] = o;
      }
    });
  } finally {
    fs.rmSync(s, { recursive: true, force: true });
  }
  return out;
}

test('server-filesystem from npm, boxed: the bound directories serve, nothing else is reached, in both eras', async () => {
  const r = await scenario(true);
  for (const [tag, o] of Object.entries(r)) {
    assert.match(o.list, /^ok:.*\[FILE\] hello\.txt/s, `${tag}: the writable directory is listed`);
    assert.equal(o.readRw, 'ok:hello-rw\n', `${tag}: a file of the writable directory is read`);
    assert.match(o.write, /^ok:/, `${tag}: a file is written in the writable directory`);
    assert.equal(o.written, `written-${tag}`, `${tag}: the gateway's host sees the written file`);
    assert.equal(o.readBack, `ok:written-${tag}`, `${tag}: and the box reads it back`);
    assert.equal(o.readRo, 'ok:read-only-content\n', `${tag}: the read-only directory is read`);
    assert.match(o.writeRo, /^error:.*(EROFS|read-only file system)/i, `${tag}: a write in the read-only directory is refused`);
    assert.equal(o.writtenRo, false, `${tag}: nothing was written there`);
    assert.match(o.config, /^error:/, `${tag}: the gateway's configuration is not visible`);
    assert.doesNotMatch(o.config, /\[gateway\]|\[server:/);
    assert.match(o.other, /^error:/, `${tag}: another test's directory is not in the view`);
    assert.doesNotMatch(o.other, /OTHER-TEST-SECRET/);
    assert.match(o.shadow, /^error:/, `${tag}: /etc/shadow is not readable`);
  }
});

test('server-filesystem from npm, not boxed: the same calls reach all of it (the cases can fail)', async () => {
  const r = await scenario(false);
  for (const [tag, o] of Object.entries(r)) {
    assert.match(o.list, /^ok:.*\[FILE\] hello\.txt/s, tag);
    assert.equal(o.written, `written-${tag}`, tag);
    assert.match(o.writeRo, /^ok:/, tag);
    assert.equal(o.writtenRo, true, tag);
    assert.match(o.config, /^ok:\[gateway\]/, tag);
    assert.equal(o.other, 'ok:OTHER-TEST-SECRET\n', tag);
    // Only root reads /etc/shadow (0640 root:shadow) at all.
    if (ROOT) assert.match(o.shadow, /^ok:root:/, tag);
  }
});
