// SPDX-License-Identifier: MIT
// Bad input: every refused request gets the right HTTP status and a
// JSON-RPC error body, never spawns or leaves a child, and never takes the gateway down: after
// each one a normal request on the same gateway still works.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ACCEPT_BOTH, MATRIX_POOLED, callTool, del, get, initSession, pidAlive, post, request, rpc,
  startGateway, waitFor,
} from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';

/** Awaits the whole body and checks status, Content-Type and the JSON-RPC error shape. */
async function assertJsonError(r, status, code) {
  const text = await r.done();
  assert.equal(r.status, status, `HTTP status (body: ${text})`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, 'Content-Type');
  let body;
  assert.doesNotThrow(() => { body = JSON.parse(text); }, `body is JSON: ${text}`);
  assert.equal(body.jsonrpc, '2.0', text);
  assert.equal(typeof body.error, 'object', text);
  assert.equal(typeof body.error.code, 'number', text);
  assert.equal(typeof body.error.message, 'string', text);
  if (code !== undefined) assert.equal(body.error.code, code, text);
  return body;
}

/** The gateway is still up and serving: a ping on sid (or on a fresh session) is answered. */
async function assertServes(gw, sid) {
  assert.equal(gw.proc.exitCode, null, `gateway exited:\n${gw.logs()}`);
  assert.equal(gw.proc.signalCode, null, `gateway killed:\n${gw.logs()}`);
  if (!sid) ({ sid } = await initSession(gw));
  const r = await post(gw, rpc('ping', undefined, 'alive'), { sid });
  await r.done();
  assert.equal(r.status, 200, r.text());
  const ev = r.events().find((e) => e.json && e.json.id === 'alive');
  assert.ok(ev, `ping answered: ${r.text()}`);
  assert.deepEqual(ev.json.result, {});
}

/**
 * The sessions made so far, from the log: each one's child pid (a pooled session has none: its
 * label). What a refused request must not have made.
 */
const created = (gw) => (MATRIX_POOLED ? [...gw.logs().matchAll(/session=(\S+) pooled session created: /g)].map((m) => m[1]) : gw.childPids());

/** Live (non-zombie) processes whose parent is the gateway, read from /proc. */
const gatewayChildren = (gw) => kids(gw.proc.pid);

function initMsg(id = 'init') {
  return rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, id);
}

// --- Accept / Content-Type --------------------------------------------------------------------

test('POST without Accept -> 406', async () => {
  const gw = await startGateway();
  try {
    const r = await request(gw.url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: initMsg() });
    await assertJsonError(r, 406);
    assert.deepEqual(created(gw), []);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('POST with Accept missing text/event-stream -> 406', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    for (const accept of ['application/json', 'text/html', 'text/event-stream']) {
      const r = await post(gw, rpc('ping'), { sid: s.sid, headers: { Accept: accept } });
      await assertJsonError(r, 406);
    }
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('GET without text/event-stream in Accept -> 406', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const r = await get(gw, { sid: s.sid, headers: { Accept: 'application/json' } });
    await assertJsonError(r, 406);
    const r2 = await request(gw.url, { method: 'GET', headers: { 'Mcp-Session-Id': s.sid } });
    await assertJsonError(r2, 406);
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('POST with Content-Type text/plain -> 415', async () => {
  const gw = await startGateway();
  try {
    const r = await post(gw, initMsg(), { headers: { 'Content-Type': 'text/plain' } });
    await assertJsonError(r, 415);
    const r2 = await post(gw, initMsg(), { headers: { 'Content-Type': 'application/jsonx' } });
    await assertJsonError(r2, 415);
    assert.deepEqual(created(gw), []);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('Accept and Content-Type with parameters, q-values and wildcards are accepted', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const variants = [
      { Accept: 'application/json;q=0.9, text/event-stream;q=0.8', 'Content-Type': 'application/json; charset=utf-8' },
      { Accept: 'text/event-stream, application/json', 'Content-Type': 'Application/JSON' },
      { Accept: 'application/*, text/*', 'Content-Type': 'application/json;charset=UTF-8' },
    ];
    for (const headers of variants) {
      const r = await post(gw, rpc('ping', undefined, 'v'), { sid: s.sid, headers });
      await r.done();
      assert.equal(r.status, 200, `${JSON.stringify(headers)}: ${r.text()}`);
      assert.ok(r.events().some((e) => e.json?.id === 'v' && e.json.result), r.text());
    }
  } finally {
    await gw.stop();
  }
});

// --- JSON and JSON-RPC ------------------------------------------------------------------------

test('malformed JSON -> 400 with -32700', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    for (const body of ['{"jsonrpc":"2.0",', '{', 'not json', '{"jsonrpc":"2.0","id":1,"method":"ping"} x', '']) {
      const r = await post(gw, body, { sid: s.sid });
      await assertJsonError(r, 400, -32700);
    }
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

const notJsonRpc = {
  'missing jsonrpc': { id: 1, method: 'ping' },
  'jsonrpc "1.0"': { jsonrpc: '1.0', id: 1, method: 'ping' },
  'method not a string': { jsonrpc: '2.0', id: 1, method: 42 },
  'both result and error': { jsonrpc: '2.0', id: 1, result: {}, error: { code: 1, message: 'x' } },
  'a JSON string': 'just a string',
  'a JSON number': 7,
};
for (const [name, msg] of Object.entries(notJsonRpc)) {
  test(`valid JSON but not JSON-RPC (${name}) -> 400 -32600`, async () => {
    const gw = await startGateway();
    try {
      const s = await initSession(gw);
      const r = await post(gw, JSON.stringify(msg), { sid: s.sid });
      await assertJsonError(r, 400, -32600);
      await assertServes(gw, s.sid);
      // The invalid message never reached the child. The child logs each line before answering,
      // in the order received, so once the ping is answered every earlier line is in its log.
      const seen = gw.childMessages();
      // A pooled session's ping is the gateway's to answer: its child saw only the pool's handshake.
      const expected = MATRIX_POOLED ? ['server/discover', 'initialize', 'notifications/initialized'] : ['initialize', 'notifications/initialized', 'ping'];
      assert.deepEqual(seen.map((m) => m.method), expected, JSON.stringify(seen));
    } finally {
      await gw.stop();
    }
  });
}

test('a JSON array (batch) -> 400 -32600', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const r = await post(gw, [rpc('ping'), rpc('ping')], { sid: s.sid });
    await assertJsonError(r, 400, -32600);
    const r2 = await post(gw, [initMsg()]);
    await assertJsonError(r2, 400, -32600);
    assert.equal(created(gw).length, 1, 'the batched initialize spawned nothing');
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('NUL byte or invalid UTF-8 in the body -> 400 -32700', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const head = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"');
    const tail = Buffer.from('"}}');
    const bodies = {
      'NUL inside a string': Buffer.concat([head, Buffer.from([0]), tail]),
      'NUL after the value': Buffer.concat([head, tail, Buffer.from([0])]),
      'invalid byte 0xff': Buffer.concat([head, Buffer.from([0xff, 0xfe]), tail]),
      'overlong encoding': Buffer.concat([head, Buffer.from([0xc0, 0xaf]), tail]),
      'truncated sequence': Buffer.concat([head, Buffer.from([0xe2, 0x82]), tail]),
      'UTF-16 surrogate as UTF-8': Buffer.concat([head, Buffer.from([0xed, 0xa0, 0x80]), tail]),
    };
    for (const [name, body] of Object.entries(bodies)) {
      const r = await post(gw, body, { sid: s.sid });
      const text = await r.done();
      assert.equal(r.status, 400, `${name}: ${text}`);
      await assertJsonError(r, 400, -32700);
    }
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

// --- sessions ---------------------------------------------------------------------------------

test('missing Mcp-Session-Id on a non-initialize POST, on GET and on DELETE -> 400', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    await assertJsonError(await post(gw, rpc('tools/list')), 400);
    await assertJsonError(await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }), 400);
    await assertJsonError(await get(gw), 400);
    await assertJsonError(await del(gw), 400);
    assert.equal(created(gw).length, 1);
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('unknown session id -> 404 on POST, GET and DELETE', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const ids = ['AAAAAAAAAAAAAAAAAAAAAA', `${s.sid}x`, 'x'.repeat(300)];
    for (const sid of ids) {
      await assertJsonError(await post(gw, rpc('tools/list'), { sid }), 404);
      await assertJsonError(await get(gw, { sid }), 404);
      await assertJsonError(await del(gw, { sid }), 404);
    }
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('initialize carrying an existing session id -> 400, no second child', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    await assertJsonError(await post(gw, initMsg('again'), { sid: s.sid }), 400);
    assert.equal(created(gw).length, 1);
    assert.deepEqual(gatewayChildren(gw), [s.pid]);
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('unsupported MCP-Protocol-Version header -> 400', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    for (const v of ['1999-01-01', '2024-11-05', 'garbage']) {
      const r = await post(gw, rpc('tools/list'), { sid: s.sid, headers: { 'MCP-Protocol-Version': v } });
      await assertJsonError(r, 400);
    }
    const g = await get(gw, { sid: s.sid, headers: { 'MCP-Protocol-Version': '1999-01-01' } });
    await assertJsonError(g, 400);
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

// --- body size --------------------------------------------------------------------------------

/** A valid JSON-RPC request of exactly n bytes. */
function sizedPing(n) {
  const base = JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping', params: { pad: '' } });
  assert.ok(n >= base.length);
  const s = JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping', params: { pad: 'x'.repeat(n - base.length) } });
  assert.equal(Buffer.byteLength(s), n);
  return s;
}

test('a body of exactly max_body_bytes is accepted', async () => {
  const gw = await startGateway({ gateway: { max_body_bytes: 2048 } });
  try {
    const s = await initSession(gw);
    const r = await post(gw, sizedPing(2048), { sid: s.sid });
    await r.done();
    assert.equal(r.status, 200, r.text());
    assert.ok(r.events().some((e) => e.json?.id === 'big' && e.json.result), r.text());
  } finally {
    await gw.stop();
  }
});

test('body over max_body_bytes with Content-Length -> 413', async () => {
  const gw = await startGateway({ gateway: { max_body_bytes: 2048 } });
  try {
    const s = await initSession(gw);
    const before = gw.childLines().length;
    await assertJsonError(await post(gw, sizedPing(2049), { sid: s.sid }), 413);
    await assertJsonError(await post(gw, sizedPing(4096), { sid: s.sid }), 413);
    await assertServes(gw, s.sid);
    assert.ok(!gw.childLines().slice(before).some((l) => l.includes('"big"')), 'nothing oversized reached the child');
  } finally {
    await gw.stop();
  }
});

test('body over max_body_bytes with Transfer-Encoding: chunked -> 413', async () => {
  const gw = await startGateway({ gateway: { max_body_bytes: 2048 } });
  try {
    const s = await initSession(gw);
    const before = gw.childLines().length;
    const r = await request(gw.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Mcp-Session-Id': s.sid, 'Transfer-Encoding': 'chunked' },
      body: sizedPing(4096),
    });
    await assertJsonError(r, 413);
    // and an initialize over the limit spawns nothing
    const r2 = await request(gw.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Transfer-Encoding': 'chunked' },
      body: JSON.stringify({ ...initMsg(), params: { ...initMsg().params, pad: 'x'.repeat(4096) } }),
    });
    await assertJsonError(r2, 413);
    assert.equal(created(gw).length, 1);
    await assertServes(gw, s.sid);
    assert.ok(!gw.childLines().slice(before).some((l) => l.includes('"big"')), 'nothing oversized reached the child');
  } finally {
    await gw.stop();
  }
});

test('a small chunked body is accepted', async () => {
  const gw = await startGateway({ gateway: { max_body_bytes: 2048 } });
  try {
    const s = await initSession(gw);
    const r = await request(gw.url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Mcp-Session-Id': s.sid, 'Transfer-Encoding': 'chunked' },
      body: sizedPing(1000),
    });
    await r.done();
    assert.equal(r.status, 200, r.text());
    assert.ok(r.events().some((e) => e.json?.id === 'big' && e.json.result), r.text());
  } finally {
    await gw.stop();
  }
});

// --- Origin and Host --------------------------------------------------------------------------

test('foreign Origin -> 403 and no child spawned', async () => {
  const gw = await startGateway();
  try {
    const r = await post(gw, initMsg(), { headers: { Origin: 'http://evil.example' } });
    await assertJsonError(r, 403);
    for (const origin of ['http://localhost.evil.example:3000', 'https://localhost:3000', 'http://localhost:3000x', 'null']) {
      await assertJsonError(await post(gw, initMsg(), { headers: { Origin: origin } }), 403);
    }
    assert.deepEqual(created(gw), []);
    assert.deepEqual(gatewayChildren(gw), []);
    assert.deepEqual(gw.childLines(), [], 'the child log has no lines');
    assert.ok(!/session created/.test(gw.logs()));
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('foreign Origin on GET and DELETE of a live session -> 403, session untouched', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    await assertJsonError(await get(gw, { sid: s.sid, headers: { Origin: 'http://evil.example' } }), 403);
    await assertJsonError(await del(gw, { sid: s.sid, headers: { Origin: 'http://evil.example' } }), 403);
    assert.ok(pidAlive(s.pid));
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('allowed Origin http://localhost:3000 -> initialize OK', async () => {
  const gw = await startGateway();
  try {
    const r = await post(gw, initMsg(), { headers: { Origin: 'http://localhost:3000' } });
    await r.done();
    assert.equal(r.status, 200, r.text());
    assert.ok(r.headers['mcp-session-id']);
    assert.ok(r.events().some((e) => e.json?.id === 'init' && e.json.result), r.text());
    // later requests of that browser carry the same Origin
    const p = await post(gw, rpc('ping', undefined, 'o'), { sid: r.headers['mcp-session-id'], headers: { Origin: 'http://localhost:3000' } });
    await p.done();
    assert.equal(p.status, 200, p.text());
    await assertServes(gw, r.headers['mcp-session-id']);
    // the other default patterns, and a port-less origin
    for (const origin of ['http://127.0.0.1:8080', 'http://[::1]:5173', 'http://localhost']) {
      const o = await post(gw, initMsg(), { headers: { Origin: origin } });
      await o.done();
      assert.equal(o.status, 200, `${origin}: ${o.text()}`);
    }
  } finally {
    await gw.stop();
  }
});

test('an exactly listed origin (allowed_origins = http://localhost:3000) -> initialize OK', async () => {
  const gw = await startGateway({ gateway: { allowed_origins: 'http://localhost:3000' } });
  try {
    const r = await post(gw, initMsg(), { headers: { Origin: 'http://localhost:3000' } });
    await r.done();
    assert.equal(r.status, 200, r.text());
    await assertJsonError(await post(gw, initMsg(), { headers: { Origin: 'http://localhost:3001' } }), 403);
    assert.equal(created(gw).length, 1);
  } finally {
    await gw.stop();
  }
});

test('Host: evil.example.com -> 403 and no child spawned', async () => {
  const gw = await startGateway();
  try {
    for (const host of ['evil.example.com', `evil.example.com:${gw.port}`, `localhost.evil.example.com:${gw.port}`]) {
      await assertJsonError(await post(gw, initMsg(), { headers: { Host: host } }), 403);
    }
    assert.deepEqual(created(gw), []);
    assert.deepEqual(gatewayChildren(gw), []);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('Host localhost:PORT and 127.0.0.1:PORT are accepted', async () => {
  const gw = await startGateway();
  try {
    for (const host of [`localhost:${gw.port}`, `127.0.0.1:${gw.port}`, `LOCALHOST:${gw.port}`]) {
      const r = await post(gw, initMsg(), { headers: { Host: host } });
      await r.done();
      assert.equal(r.status, 200, `${host}: ${r.text()}`);
      assert.ok(r.events().some((e) => e.json?.id === 'init' && e.json.result), r.text());
    }
    await waitFor(() => created(gw).length === 3, 5000, 'three sessions in the log');
  } finally {
    await gw.stop();
  }
});

// --- limits and methods -----------------------------------------------------------------------

test('max_sessions=2: the third initialize -> 503 and only 2 children', async () => {
  const gw = await startGateway({ gateway: { max_sessions: 2 } });
  try {
    const a = await initSession(gw);
    const b = await initSession(gw);
    await assertJsonError(await post(gw, initMsg('third')), 503);
    assert.equal(created(gw).length, 2);
    assert.deepEqual(gatewayChildren(gw).sort(), [...new Set([a.pid, b.pid])].sort(), 'their children (a pooled session\'s: the pool\'s one)');
    await assertServes(gw, a.sid);
    await assertServes(gw, b.sid);
    // a freed slot can be used again
    const d = await del(gw, { sid: a.sid });
    await d.done();
    assert.equal(d.status, 200);
    const c = await initSession(gw);
    await assertServes(gw, c.sid);
  } finally {
    await gw.stop();
  }
});

test('PUT on the endpoint -> 405 with an Allow header', async () => {
  const gw = await startGateway();
  try {
    for (const method of ['PUT', 'PATCH']) {
      const r = await request(gw.url, { method, headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH }, body: initMsg() });
      await assertJsonError(r, 405);
      const allow = (r.headers.allow || '').split(',').map((x) => x.trim()).sort();
      assert.deepEqual(allow, ['DELETE', 'GET', 'POST'], `Allow: ${r.headers.allow}`);
    }
    assert.deepEqual(created(gw), []);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('unknown path -> 404 with a JSON-RPC error body', async () => {
  const gw = await startGateway();
  try {
    await assertJsonError(await post(gw, initMsg(), { url: `${gw.base}/nope` }), 404);
    await assertJsonError(await get(gw, { url: `${gw.base}/mcp/extra` }), 404);
    await assertJsonError(await request(`${gw.base}/`, { method: 'GET' }), 404);
    assert.deepEqual(created(gw), []);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});

test('a second GET stream on the same session -> 409', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const g1 = await get(gw, { sid: s.sid });
    assert.equal(g1.status, 200);
    assert.match(g1.headers['content-type'], /^text\/event-stream/);
    await assertJsonError(await get(gw, { sid: s.sid }), 409);
    assert.equal(g1.ended, false, 'the first stream stays open');
    await assertServes(gw, s.sid);
    g1.drop();
  } finally {
    await gw.stop();
  }
});

test('a request id already in flight -> 400, the first call still completes', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const first = callTool(gw, s.sid, 'slow', { steps: 5, interval_ms: 100 }, { id: 'same' });
    await waitFor(() => gw.childMessages().some((m) => m.method === 'tools/call' && m.params?.name === 'slow'), 5000, 'first call reached the child');
    const second = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'dup' } }, 'same'), { sid: s.sid });
    await assertJsonError(second, 400, -32600);
    const { response } = await first;
    assert.equal(response.id, 'same');
    assert.ok(response.result, JSON.stringify(response));
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.text === 'dup'), 'the duplicate never reached the child');
    // once answered, the id may be used again
    const again = await callTool(gw, s.sid, 'echo', { text: 'reuse' }, { id: 'same' });
    assert.equal(again.response.result.content[0].text, 'reuse');
  } finally {
    await gw.stop();
  }
});

// --- children that fail -----------------------------------------------------------------------

test('a server command that does not exist -> 500, no child, the next initialize works', async () => {
  const gw = await startGateway({
    servers: [
      { name: 'example', path: '/mcp' },
      { name: 'missing', path: '/missing', command: '/nonexistent/dir/mcp-server --flag' },
    ],
  });
  // A pooled initialize waits for the server's pool, which cannot start a child: 503, as for a
  // stateless request; a session's own child that cannot start is the spawn's 500.
  const status = MATRIX_POOLED ? 503 : 500;
  try {
    await assertJsonError(await post(gw, initMsg(), { url: `${gw.base}/missing` }), status);
    assert.deepEqual(created(gw), []);
    assert.deepEqual(gatewayChildren(gw), []);
    // a second try is refused the same way (nothing left half-created)
    await assertJsonError(await post(gw, initMsg(), { url: `${gw.base}/missing` }), status);
    const s = await initSession(gw);
    assert.ok(pidAlive(s.pid));
    assert.deepEqual(gatewayChildren(gw), [s.pid]);
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('a child that writes non-JSON to stdout: logged, skipped, the call answers ok', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const { r, response } = await callTool(gw, s.sid, 'garbage', {}, { id: 'g' });
    assert.equal(r.status, 200);
    assert.equal(response.id, 'g');
    assert.equal(response.result.content[0].text, 'ok');
    // A pool child's lines are logged under its tag, a session's child's under the session id.
    const who = MATRIX_POOLED ? 'pool:example\\\\?#\\d+' : s.sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    await gw.waitLog(new RegExp(`session=${who} .*not a JSON-RPC message`));
    assert.ok(pidAlive(s.pid));
    await assertServes(gw, s.sid);
  } finally {
    await gw.stop();
  }
});

test('a child line over max_message_bytes ends the session: error on the stream, then 404, child reaped', async () => {
  const gw = await startGateway({ gateway: { max_message_bytes: 65536 } });
  try {
    const s = await initSession(gw);
    const { r, response } = await callTool(gw, s.sid, 'large', { bytes: 200000 }, { id: 'big-1' });
    assert.equal(r.status, 200);
    assert.ok(response, `a JSON-RPC answer on the stream: ${r.text().slice(0, 500)}`);
    assert.equal(response.id, 'big-1');
    assert.ok(response.error, `an error, not the oversized result: ${JSON.stringify(response).slice(0, 300)}`);
    assert.equal(typeof response.error.code, 'number');
    assert.ok(r.text().length < 65536, 'the oversized line was not relayed');
    // A pooled session outlives the pool child that wrote it.
    if (MATRIX_POOLED) await assertServes(gw, s.sid);
    else await assertJsonError(await post(gw, rpc('ping'), { sid: s.sid }), 404);
    await waitFor(() => !pidAlive(s.pid), 8000, 'child reaped');
    await gw.waitLog(/over max_message_bytes/);
    await assertServes(gw);
  } finally {
    await gw.stop();
  }
});
