// SPDX-License-Identifier: MIT
// Each shipped nginx site (deploy/nginx/mcp-gateway.conf and mcp-gateway-instances.conf) with
// Debian's real nginx on loopback, reached the way clients reach it in production: by its public
// name (the site's server_name), which the gateways list in allowed_hosts as the README says. The
// probes (/healthz, /readyz) and MCP traffic (a legacy session's initialize and tools/call, a
// stateless request) pass through and are answered by the gateway; /metrics is not proxied
// (nginx answers 404 itself) and is scraped on the gateway's loopback listener.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ACCEPT_BOTH, request, rpc, startGateway, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';
import { startNginx, withInstances } from '../lib/nginx.mjs';

const PUBLIC = 'mcp.example.com'; // the server_name of both sites
const STATELESS = '2026-07-28';
const GATEWAY = { allowed_hosts: `${PUBLIC}, 127.0.0.1` };

/** A request to nginx naming the public host; resolves with {status, headers, body}. */
async function send(base, p, { method = 'GET', headers = {}, body } = {}) {
  const r = await request(`${base}${p}`, { method, headers: { Host: PUBLIC, ...headers }, body });
  const text = await r.done();
  return { status: r.status, headers: r.headers, body: text };
}

/** The JSON-RPC answer of a JSON or SSE body. */
function answerOf(res) {
  if (/^application\/json/.test(res.headers['content-type'] ?? '')) return JSON.parse(res.body);
  for (const block of res.body.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
    if (!data) continue;
    const j = JSON.parse(data);
    if ('result' in j || 'error' in j) return j;
  }
  return undefined;
}

/** Probes, /metrics, a legacy session and a stateless request through nginx at base. */
async function exercise(base, gateways) {
  await probes(base, gateways);
  await mcpThrough(base, '/mcp');
}

/** /healthz and /readyz pass nginx; /metrics does not (it is scraped on each gateway's listener). */
async function probes(base, gateways) {
  for (const p of ['/healthz', '/readyz']) {
    // /readyz: 503 "starting" until the probe its first question started is up.
    const r = p === '/readyz' ? await waitFor(async () => { const x = await send(base, p); return x.status === 200 ? x : null; }, scaled(10000), `${p} 200 through nginx`) : await send(base, p);
    assert.equal(r.status, 200, `GET ${p} through nginx: HTTP ${r.status} ${r.body}`);
  }
  // /metrics stays on the loopback listener: nginx answers 404 itself, nothing of the gateway's.
  const m = await send(base, '/metrics');
  assert.equal(m.status, 404, `GET /metrics through nginx: HTTP ${m.status}`);
  assert.doesNotMatch(m.body, /mcpgw_/);
  for (const gw of gateways) {
    // Each gateway's own /readyz: nginx may have asked only one of them, and the first question
    // is what starts a gateway's probe (mcpgw_ready is 0 until a child of its server started).
    await waitFor(async () => { const r = await request(`${gw.base}/readyz`, { method: 'GET' }); await r.done(); return r.status === 200; }, scaled(10000), `${gw.base}/readyz 200`);
    const direct = await request(`${gw.base}/metrics`, { method: 'GET' });
    const text = await direct.done();
    assert.equal(direct.status, 200, text);
    assert.match(text, /^mcpgw_ready 1$/m);
  }
}

/** A legacy session (initialize, initialized, tools/call) and a stateless request at base + p. */
async function mcpThrough(base, p) {
  // A legacy session: initialize, notifications/initialized, tools/call.
  const mcp = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH };
  const init = await send(base, p, {
    method: 'POST', headers: mcp,
    body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'i1'),
  });
  assert.equal(init.status, 200, `initialize at ${p} through nginx: ${init.body}`);
  const sid = init.headers['mcp-session-id'];
  assert.ok(sid, 'a session id');
  const version = answerOf(init).result.protocolVersion;
  const inSession = { ...mcp, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': version };
  const note = await send(base, p, { method: 'POST', headers: inSession, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
  assert.equal(note.status, 202, note.body);
  const call = await send(base, p, { method: 'POST', headers: inSession, body: rpc('tools/call', { name: 'echo', arguments: { text: 'legacy via nginx' } }, 'c1') });
  assert.equal(call.status, 200, call.body);
  assert.equal(answerOf(call)?.result?.content?.[0]?.text, 'legacy via nginx', call.body);
  // nginx's $request_id (32 hex digits; the gateway mints 16) reached the gateway, which returns it.
  assert.match(call.headers['x-request-id'] ?? '', /^[0-9a-f]{32}$/, 'the request id nginx made');

  // A stateless request: no session.
  const stateless = await send(base, p, {
    method: 'POST',
    headers: { ...mcp, 'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' },
    body: {
      jsonrpc: '2.0', id: 'm1', method: 'tools/call',
      params: { name: 'echo', arguments: { text: 'stateless via nginx' }, _meta: { 'io.modelcontextprotocol/protocolVersion': STATELESS, 'io.modelcontextprotocol/clientCapabilities': {} } },
    },
  });
  assert.equal(stateless.status, 200, stateless.body);
  assert.equal(stateless.headers['mcp-session-id'], undefined);
  assert.equal(answerOf(stateless)?.result?.content?.[0]?.text, 'stateless via nginx', stateless.body);
}

test('mcp-gateway.conf: probes, a legacy session and a stateless request pass nginx by the public name; /metrics is not proxied', async () => {
  const gw = await startGateway({ gateway: GATEWAY });
  let ng;
  let ok = false;
  try {
    ng = await startNginx({ gatewayPort: gw.port });
    await exercise(`http://127.0.0.1:${ng.port}`, [gw]);
    assert.doesNotMatch(gw.logs(), /not in \[gateway\] allowed_hosts/, 'no Host was refused');
    ok = true;
  } finally {
    if (!ok && ng) console.log(`nginx error log (tail):\n${ng.errorLog().slice(-3000)}\ngateway log (tail):\n${gw.logs().slice(-3000)}`);
    if (ng) await ng.stop();
    await gw.stop(ok ? undefined : { expect: null });
  }
});

test('mcp-gateway-instances.conf: probes, a legacy session and a stateless request pass nginx by the public name; /metrics is not proxied', async () => {
  await withInstances(async ({ gws, via }) => {
    await exercise(via.base, Object.values(gws));
    for (const gw of Object.values(gws)) assert.doesNotMatch(gw.logs(), /not in \[gateway\] allowed_hosts/, 'no Host was refused');
  }, { gateway: GATEWAY, quietErrorLog: true });
});

test('every location of both shipped sites passes Host to the gateway', async () => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  for (const site of ['mcp-gateway.conf', 'mcp-gateway-instances.conf']) {
    const text = fs.readFileSync(path.join(process.env.GW_SOURCE_ROOT, 'deploy/nginx', site), 'utf8');
    const blocks = [...text.matchAll(/^\s*location\s+([^{]+)\{([^}]*)\}/gm)];
    assert.ok(blocks.length >= 3, `${site}: locations found`);
    for (const [, where, body] of blocks) {
      if (!/proxy_pass/.test(body)) continue;
      assert.match(body, /proxy_set_header Host \$host;/, `${site}: location ${where.trim()} passes Host`);
      assert.match(body, /proxy_http_version 1\.1;/, `${site}: location ${where.trim()} speaks HTTP/1.1`);
    }
  }
});

// A second server at /mcp/NAME (the path --import-mcp-json gives each server it imports), beside
// the one at /mcp: each shipped site serves every path under its one prefix, so the new server is
// reached with no edit to the site.
const TWO = [{ name: 'example', path: '/mcp' }, { name: 'tools', path: '/mcp/tools' }];

test('mcp-gateway.conf: a server at /mcp/NAME is reached through nginx with the site as shipped', async () => {
  const gw = await startGateway({ gateway: GATEWAY, servers: TWO });
  let ng;
  let ok = false;
  try {
    ng = await startNginx({ gatewayPort: gw.port });
    const base = `http://127.0.0.1:${ng.port}`;
    await mcpThrough(base, '/mcp/tools');
    await mcpThrough(base, '/mcp');
    assert.match(gw.logs(), /server=tools/, 'the session at /mcp/tools is the server tools\'s');
    ok = true;
  } finally {
    if (!ok && ng) console.log(`nginx error log (tail):\n${ng.errorLog().slice(-3000)}\ngateway log (tail):\n${gw.logs().slice(-3000)}`);
    if (ng) await ng.stop();
    await gw.stop(ok ? undefined : { expect: null });
  }
});

test('mcp-gateway-instances.conf: a server at /mcp/NAME is reached through nginx with the site as shipped', async () => {
  await withInstances(async ({ via }) => {
    await mcpThrough(via.base, '/mcp/tools');
    await mcpThrough(via.base, '/mcp');
  }, { gateway: GATEWAY, servers: TWO, quietErrorLog: true });
});

/** A JSON-RPC error answered by nginx: the status, Content-Type application/json, an error object. */
async function jsonError(base, p, headers, status) {
  const r = await send(base, p, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...headers },
    body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'down'),
  });
  assert.equal(r.status, status, `POST ${p} with no gateway up: HTTP ${r.status} ${r.body}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json\b/, `POST ${p}: Content-Type ${r.headers['content-type']}: ${r.body}`);
  const j = JSON.parse(r.body);
  assert.equal(j.jsonrpc, '2.0', r.body);
  assert.ok(Number.isInteger(j.error?.code) && typeof j.error?.message === 'string', `a JSON-RPC error object: ${r.body}`);
}

test('mcp-gateway.conf: with no gateway up, an MCP client gets a JSON-RPC error (503, application/json), not an HTML page', async () => {
  const gw = await startGateway({ gateway: GATEWAY });
  const port = gw.port;
  await gw.stop(); // nothing listens on its port any more
  const ng = await startNginx({ gatewayPort: port });
  try {
    const base = `http://127.0.0.1:${ng.port}`;
    await jsonError(base, '/mcp', {}, 503);
    await jsonError(base, '/mcp/tools', {}, 503);
    await jsonError(base, '/mcp', { 'Mcp-Session-Id': 'x', 'MCP-Protocol-Version': '2025-06-18' }, 503);
  } finally {
    await ng.stop();
  }
});

test('mcp-gateway-instances.conf: with no instance up, a new session gets 503 and a session 404, each a JSON-RPC error', async () => {
  await withInstances(async ({ gws, via }) => {
    for (const gw of Object.values(gws)) await gw.stop();
    await jsonError(via.base, '/mcp', {}, 503);
    await jsonError(via.base, '/mcp/tools', {}, 503);
    await jsonError(via.base, '/mcp', { 'Mcp-Session-Id': 'g1.x', 'MCP-Protocol-Version': '2025-06-18' }, 404);
  }, { gateway: GATEWAY });
});
