// SPDX-License-Identifier: MIT
// Several stateless revisions in one gateway: a stateless revision that behaves as 2026-07-28 is
// one row of the revision table (src/mcp/revision.c). Three servers in one gateway, each its own
// pool: the stateless fixture (tests/fixtures/modern_server.mjs) speaking 2026-07-28 only, the same
// fixture speaking 2026-07-28 and a made-up later revision 2099-01-01
// (STATELESS_FIXTURE_VERSIONS), and the example server (legacy: initialize, bridged by the
// gateway).
//   - the gateway as built (its table's one stateless row is 2026-07-28): both stateless pools
//     serve 2026-07-28; 2099-01-01 is refused by the gateway itself;
//   - mcp-gateway-stateless-row, the same gateway with the row 2099-01-01 added
//     (tests/fixtures/meson.build): its probe names 2099-01-01, which the 2026-07-28 child refuses
//     with its list; a 2099-01-01 request is served by the pool whose child speaks it and refused
//     with 400 -32022 listing 2026-07-28 by the other; 2026-07-28 is served by both; the legacy
//     pool serves both, and its server/discover (the gateway's answer) lists both.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { ACCEPT_BOTH, EXAMPLE, request, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const OLD = '2026-07-28';
const NEW = '2099-01-01';
const ROOT = process.env.GW_SOURCE_ROOT;
const FIXTURE = path.join(ROOT, 'tests/fixtures/modern_server.mjs');
const BIN_ROW = process.env.GW_BIN_STATELESS_ROW;

/** The stateless fixture speaking versions. */
const fixture = (versions) => `/usr/bin/env STATELESS_FIXTURE_VERSIONS=${versions.join(',')} ${process.execPath} ${FIXTURE}`;
const SERVERS = [
  { name: 'old', path: '/old', command: fixture([OLD]) },
  { name: 'both', path: '/both', command: fixture([OLD, NEW]) },
  { name: 'legacy', path: '/legacy' },
];

/** A stateless request of revision version to path: {status, msgs, answer}. */
async function call(gw, p, version, method, params = {}, id = 1) {
  const headers = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': version, 'Mcp-Method': method };
  if (params.name !== undefined) headers['Mcp-Name'] = params.name;
  const body = {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} } },
  };
  const r = await request(`${gw.base}${p}`, { method: 'POST', headers, body });
  await r.done(scaled(20000));
  const msgs = /^application\/json/.test(r.headers['content-type'] ?? '') ? [JSON.parse(r.text())] : r.events().map((e) => e.json).filter(Boolean);
  return { status: r.status, msgs, answer: msgs.find((j) => j && ('result' in j || 'error' in j)) };
}

/** tools/call echo in version at p: served (200, the text echoed). */
async function served(gw, p, version) {
  const text = `${p} ${version}`;
  const { status, answer } = await call(gw, p, version, 'tools/call', { name: 'echo', arguments: { text } });
  assert.equal(status, 200, `${version} at ${p}: ${JSON.stringify(answer)}`);
  assert.equal(answer?.result?.content?.[0]?.text, text, `${version} at ${p}: ${JSON.stringify(answer)}`);
}

/** tools/call echo in version at p: 400 -32022 listing supported. */
async function refused(gw, p, version, supported) {
  const { status, answer } = await call(gw, p, version, 'tools/call', { name: 'echo', arguments: { text: 'x' } });
  assert.equal(status, 400, `${version} at ${p}: ${JSON.stringify(answer)}`);
  assert.equal(answer?.error?.code, -32022, JSON.stringify(answer));
  assert.deepEqual(answer.error.data, { supported, requested: version });
}

test('a child of 2026-07-28 only beside one of both rows: both pools serve, in the gateway as built and in one that knows 2099-01-01', async () => {
  // As built: 2026-07-28 is the table's one stateless row.
  await withGateway({ servers: SERVERS }, async (gw) => {
    await served(gw, '/old', OLD);
    await served(gw, '/both', OLD);
    await served(gw, '/legacy', OLD);
    // A revision the gateway does not know is its own refusal, whatever the children speak.
    await refused(gw, '/both', NEW, [OLD]);
  });
  // With the row 2099-01-01 added.
  assert.ok(BIN_ROW && fs.existsSync(BIN_ROW), 'GW_BIN_STATELESS_ROW (meson test sets it)');
  await withGateway({ servers: SERVERS, bin: BIN_ROW }, async (gw) => {
    // The pool of the 2026-07-28 child: its probe (2099-01-01) was refused with its list.
    await served(gw, '/old', OLD);
    await refused(gw, '/old', NEW, [OLD]);
    assert.match(gw.logs(), /pool:old#\d+ server\/discover refused the probe's version: the server serves 2026-07-28/);
    // The pool of the child of both rows serves both.
    await served(gw, '/both', NEW);
    await served(gw, '/both', OLD);
    // Its server/discover is the child's own answer, forwarded.
    const own = await call(gw, '/both', NEW, 'server/discover');
    assert.deepEqual(own.answer?.result?.supportedVersions, [OLD, NEW], JSON.stringify(own.answer));
    // A legacy child, bridged by the gateway, speaks every stateless row the gateway knows.
    await served(gw, '/legacy', NEW);
    await served(gw, '/legacy', OLD);
    for (const v of [OLD, NEW]) {
      const d = await call(gw, '/legacy', v, 'server/discover');
      assert.equal(d.status, 200);
      assert.deepEqual(d.answer?.result?.supportedVersions, [OLD, NEW], JSON.stringify(d.answer));
    }
  });
});
