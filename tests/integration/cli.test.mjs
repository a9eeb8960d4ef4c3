// SPDX-License-Identifier: MIT
// The binary's command line: --version, --help, --check-config on good and bad files, and a
// clean stop on SIGTERM/SIGINT with every child reaped.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, callTool, initSession, pidAlive, startGateway, waitFor, get } from '../lib/gw.mjs';

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
