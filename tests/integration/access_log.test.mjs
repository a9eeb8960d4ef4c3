// SPDX-License-Identifier: MIT
// The access log: one line per HTTP request once it completes ([gateway] access_log,
// access_log_format), with the client (X-Forwarded-For's last entry only from a trusted_proxies
// peer), method, path, status, bytes, duration, MCP method and name, session, principal and the
// request id; X-Request-Id taken from the request when well-formed, else minted, and returned;
// the request id on the other lines logged while the request is handled; libmicrohttpd's
// messages without their newline.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { ACCEPT_BOTH, callTool, initSession, MATRIX_POOLED, pooledLabel, pooledSkip, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';

/** How a session is named on a log line: its id, or a pooled session's label (its id is a secret). */
const named = (sid) => (sid.startsWith('~') ? pooledLabel(sid) : sid);
/** A 2024-11-05 session's name on log lines: its id, or on a pooled server "sse:" and 16 hex digits of its SHA-256. */
const sseNamed = (sid) => (MATRIX_POOLED ? `sse:${crypto.createHash('sha256').update(sid).digest('hex').slice(0, 16)}` : sid);
import { scaled } from '../lib/timing.mjs';

const V = '2026-07-28';
const META = 'io.modelcontextprotocol/';

/** A 2026-07-28 tools/call of echo, with its mirrored headers. */
function statelessEcho(gw, text, headers = {}) {
  const msg = {
    jsonrpc: '2.0', id: 'm-1', method: 'tools/call',
    params: {
      name: 'echo', arguments: { text },
      _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {}, [`${META}clientInfo`]: { name: 'alog-it', version: '1' } },
    },
  };
  return request(gw.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo', ...headers },
    body: msg,
  });
}

/** The access lines of a log text, parsed: text "key=value" pairs ("-" absent) or JSON objects. */
function accessLines(text, format) {
  const out = [];
  for (const line of text.split('\n')) {
    if (format === 'json') {
      if (!line.startsWith('{')) continue;
      const o = JSON.parse(line);
      if (o.type === 'access') out.push(o);
      continue;
    }
    const m = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info access (.*)$/.exec(line);
    if (!m) continue;
    const o = {};
    for (const kv of m[1].split(' ')) {
      const i = kv.indexOf('=');
      const v = kv.slice(i + 1);
      if (v !== '-') o[kv.slice(0, i)] = ['status', 'bytes', 'duration_ms'].includes(kv.slice(0, i)) ? Number(v) : v;
    }
    out.push(o);
  }
  return out;
}

for (const format of ['text', 'json']) {
  test(`access lines (${format}): a session POST, a 2026-07-28 POST, GET /healthz and a 404, with their fields`, async () => {
    const dir = tmpdir('mcpgw-alog-');
    const file = path.join(dir, 'access.log');
    const gw = await startGateway({ gateway: { log_level: 'info', log_format: format, access_log: file, access_log_format: format } });
    try {
      const lines = () => accessLines(fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '', format);
      const { sid } = await initSession(gw);
      const { r } = await callTool(gw, sid, 'echo', { text: 'hi' });
      const rid = r.headers['x-request-id'];
      assert.match(rid ?? '', /^[0-9a-f]{16}$/, 'a minted request id returned');
      const call = await waitFor(() => lines().find((l) => l.mcp_method === 'tools/call' && l.session === named(sid)), 5000, 'the session POST\'s line');
      assert.equal(call.method, 'POST');
      assert.equal(call.path, '/mcp');
      assert.equal(call.status, 200);
      assert.equal(call.name, 'echo');
      assert.equal(call.client, '127.0.0.1');
      assert.equal(call.peer, '127.0.0.1');
      assert.equal(call.request_id, rid);
      assert.ok(call.bytes > 0, JSON.stringify(call));
      assert.ok(call.duration_ms >= 0 && call.duration_ms < 60000, JSON.stringify(call));
      assert.equal(call.principal, 'address:127.0.0.1', 'auth none: the client address is the principal');

      const m = await statelessEcho(gw, 'stateless', { 'X-Request-Id': 'edge-42.a:b_c' });
      const body = await m.done();
      assert.equal(m.status, 200, body);
      assert.equal(m.headers['x-request-id'], 'edge-42.a:b_c', 'a well-formed X-Request-Id is echoed');
      const ml = await waitFor(() => lines().find((l) => l.request_id === 'edge-42.a:b_c'), 5000, 'the 2026-07-28 POST\'s line');
      assert.equal(ml.mcp_method, 'tools/call');
      assert.equal(ml.name, 'echo');
      assert.equal(ml.status, 200);
      assert.equal(ml.bytes, Buffer.byteLength(body));
      assert.equal(ml.session, undefined);

      const h = await request(`${gw.base}/healthz`, { method: 'GET', headers: { 'X-Request-Id': 'bad id with spaces' } });
      await h.done();
      assert.match(h.headers['x-request-id'] ?? '', /^[0-9a-f]{16}$/, 'a malformed X-Request-Id is replaced');
      const hl = await waitFor(() => lines().find((l) => l.path === '/healthz'), 5000, '/healthz line');
      assert.equal(hl.method, 'GET');
      assert.equal(hl.status, 200);
      assert.equal(hl.request_id, h.headers['x-request-id']);
      assert.equal(hl.mcp_method, undefined);

      const nf = await request(`${gw.base}/nope`, { method: 'GET' });
      await nf.done();
      assert.equal(nf.status, 404);
      const nl = await waitFor(() => lines().find((l) => l.path === '/nope'), 5000, '404 line');
      assert.equal(nl.status, 404);
      assert.equal(nl.request_id, nf.headers['x-request-id']);
      // The access lines went to their own file, not the main log.
      assert.equal(accessLines(gw.logs(), format).length, 0, 'no access line in the main log');
    } finally {
      await gw.stop();
    }
  });
}

test('access_log unset: access lines in the main log at info; off: none', async () => {
  const gw = await startGateway({ gateway: { log_level: 'info' } });
  try {
    const h = await request(`${gw.base}/healthz`, { method: 'GET' });
    await h.done();
    await waitFor(() => accessLines(gw.logs(), 'text').find((l) => l.path === '/healthz'), 5000, 'access line in the main log');
  } finally {
    await gw.stop();
  }
  const off = await startGateway({ gateway: { log_level: 'info', access_log: 'off' } });
  try {
    const h = await request(`${off.base}/healthz`, { method: 'GET' });
    await h.done();
    const nf = await request(`${off.base}/nope`, { method: 'GET' });
    await nf.done();
    assert.equal(accessLines(off.logs(), 'text').length, 0, off.logs());
  } finally {
    await off.stop();
  }
});

test('X-Forwarded-For: its last entry is the client only when the peer is a trusted proxy; by default none is, and a local client that forges it is logged under its own address', async () => {
  for (const [trusted, want] of [[undefined, '127.0.0.1'], ['', '127.0.0.1'], ['127.0.0.1, ::1', '203.0.113.7'], ['10.0.0.0/8, ::1', '127.0.0.1'], ['127.0.0.0/8', '203.0.113.7']]) {
    const gateway = { log_level: 'info', log_format: 'json', access_log_format: 'json' };
    if (trusted !== undefined) gateway.trusted_proxies = trusted;
    const gw = await startGateway({ gateway });
    try {
      const h = await request(`${gw.base}/healthz`, { method: 'GET', headers: { 'X-Forwarded-For': '198.51.100.1, 203.0.113.7' } });
      await h.done();
      const l = await waitFor(() => accessLines(gw.logs(), 'json').find((x) => x.path === '/healthz'), 5000, 'access line');
      assert.equal(l.client, want, `trusted_proxies ${trusted}: ${JSON.stringify(l)}`);
      assert.equal(l.peer, '127.0.0.1');
    } finally {
      await gw.stop();
    }
  }
});

test('the request id is on the lines logged while the request is handled (session start, JSON field)', async () => {
  const gw = await startGateway({ gateway: { log_level: 'info', log_format: 'json' } });
  try {
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }), { headers: { 'X-Request-Id': 'init-req-1' } });
    await r.done();
    assert.equal(r.status, 200);
    const created = await waitFor(() => gw.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
      .find((o) => /session created/.test(o.msg ?? '')), 5000, 'session created line');
    assert.equal(created.request_id, 'init-req-1', JSON.stringify(created));
  } finally {
    await gw.stop();
  }
});

test('text lines logged during a request end with request_id=', async () => {
  const gw = await startGateway({ gateway: { log_level: 'info' } });
  try {
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }), { headers: { 'X-Request-Id': 'init-req-2' } });
    await r.done();
    await gw.waitLog(/session created: .* request_id=init-req-2$/m);
  } finally {
    await gw.stop();
  }
});

test('libmicrohttpd messages are logged without a literal \\n', async () => {
  const gw = await startGateway({ gateway: { log_level: 'debug' } });
  try {
    // A request line MHD refuses itself: it logs why.
    const net = await import('node:net');
    const sock = net.connect(gw.port, gw.host);
    sock.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n');
    await gw.waitLog(/libmicrohttpd: /);
    sock.destroy();
    for (const l of gw.logs().split('\n').filter((x) => x.includes('libmicrohttpd: ')))
      assert.doesNotMatch(l, /\\n( request_id=\S+)?$/, l);
  } finally {
    await gw.stop();
  }
});

test('JSON lines carry server, child, principal and reason as fields', async (t) => {
  if (pooledSkip(t, 'one child per session (the session created line names its child, which exits at DELETE)')) return;
  const gw = await startGateway({ gateway: { log_level: 'info', log_format: 'json' } });
  const objs = () => gw.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  try {
    const { sid } = await initSession(gw);
    const created = await waitFor(() => objs().find((o) => o.session === sid && /session created/.test(o.msg ?? '')), 5000, 'session created');
    assert.equal(created.server, 'example', JSON.stringify(created));
    assert.ok(Number.isInteger(created.child) && created.child > 0, JSON.stringify(created));
    assert.equal(created.principal, 'address:127.0.0.1', JSON.stringify(created));
    const d = await request(gw.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
    await d.done();
    const closed = await waitFor(() => objs().find((o) => o.session === sid && /session closed/.test(o.msg ?? '')), 5000, 'session closed');
    assert.equal(typeof closed.reason, 'string', JSON.stringify(closed));
    assert.equal(closed.server, 'example');
    const exited = await waitFor(() => objs().find((o) => o.child === created.child && /exited|killed/.test(o.msg ?? '')), 5000, 'child exit');
    assert.ok('exit_status' in exited || 'signal' in exited, JSON.stringify(exited));
  } finally {
    await gw.stop();
  }
});

test('SIGUSR1 reopens the access_log file after a rename, with no log_file set', async () => {
  const dir = tmpdir('mcpgw-alog-');
  const file = path.join(dir, 'access.log');
  const gw = await startGateway({ gateway: { log_level: 'info', access_log: file } });
  try {
    const hit = async (p) => { const r = await request(`${gw.base}${p}`, { method: 'GET' }); await r.done(); };
    await hit('/healthz');
    await waitFor(() => fs.existsSync(file) && /path=\/healthz/.test(fs.readFileSync(file, 'utf8')), 5000, 'first line');
    fs.renameSync(file, `${file}.1`);
    gw.proc.kill('SIGUSR1');
    // Each probe is logged once it completes; poll until one lands in the new file.
    await waitFor(async () => { await hit('/readyz'); return fs.existsSync(file) && /path=\/readyz/.test(fs.readFileSync(file, 'utf8')); }, scaled(5000), 'a line in the reopened file');
  } finally {
    await gw.stop();
  }
});

test('bearer auth: the access line names the principal; a refused request (401) has a line too', async () => {
  const crypto = await import('node:crypto');
  const dir = tmpdir('mcpgw-alog-');
  const tokensFile = path.join(dir, 'tokens');
  const token = crypto.randomBytes(24).toString('base64url');
  fs.writeFileSync(tokensFile, `sha256:${crypto.createHash('sha256').update(token).digest('hex')} alice\n`, { mode: 0o600 });
  const gw = await startGateway({ gateway: { log_level: 'info', log_format: 'json' }, auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile } });
  try {
    const init = () => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } });
    const no = await post(gw, init(), { headers: { 'X-Request-Id': 'no-token' } });
    await no.done();
    assert.equal(no.status, 401);
    const ok = await post(gw, init(), { headers: { Authorization: `Bearer ${token}`, 'X-Request-Id': 'with-token' } });
    await ok.done();
    assert.equal(ok.status, 200);
    const lines = () => accessLines(gw.logs(), 'json');
    const a = await waitFor(() => lines().find((l) => l.request_id === 'with-token'), scaled(5000), 'the served line');
    assert.equal(a.principal, 'alice', JSON.stringify(a));
    assert.equal(a.mcp_method, 'initialize');
    assert.equal(a.session, named(ok.headers['mcp-session-id']));
    const r = await waitFor(() => lines().find((l) => l.request_id === 'no-token'), scaled(5000), 'the refused line');
    assert.equal(r.status, 401);
    assert.equal(r.principal, undefined);
  } finally {
    await gw.stop();
  }
});

test('the 2024-11-05 transport: GET PATH/sse and POST PATH/messages get their lines', async () => {
  const gw = await startGateway({ gateway: { log_level: 'info', log_format: 'json' } });
  try {
    const s = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream' } });
    assert.equal(s.status, 200);
    const first = await waitFor(() => s.completeEvents()[0], scaled(5000), 'the endpoint event');
    const endpoint = new URL(first.data, `${gw.base}/mcp/sse`);
    const sid = endpoint.searchParams.get('sessionId');
    const p = await request(endpoint.href, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'legacy-post' }, body: rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'it', version: '1' } }) });
    await p.done();
    assert.equal(p.status, 202);
    const lines = () => accessLines(gw.logs(), 'json');
    const l = await waitFor(() => lines().find((x) => x.request_id === 'legacy-post'), scaled(5000), 'the legacy POST line');
    assert.equal(l.path, '/mcp/messages');
    assert.equal(l.status, 202);
    assert.equal(l.mcp_method, 'initialize');
    assert.equal(l.session, sseNamed(sid));
    s.drop();
    const g = await waitFor(() => lines().find((x) => x.path === '/mcp/sse'), scaled(5000), 'the SSE GET line once it ends');
    assert.equal(g.status, 200);
    assert.equal(g.session, sseNamed(sid));
    assert.ok(g.bytes > 0, JSON.stringify(g));
  } finally {
    await gw.stop();
  }
});
