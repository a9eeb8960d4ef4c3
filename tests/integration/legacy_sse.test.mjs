// SPDX-License-Identifier: MIT
// The 2024-11-05 HTTP+SSE transport beside each endpoint PATH: `GET PATH/sse` opens a session
// whose first SSE event names the message endpoint (`messages?sessionId=…`, relative to
// PATH/sse); `POST PATH/messages?sessionId=…` takes one JSON-RPC message and answers 202, and
// everything for the client (answers, progress, the child's requests and notifications) travels
// on the SSE stream as `event: message`. The SSE connection is the session: dropping it cancels
// what is in flight at the child (reason "client disconnected", the child's own ids) before the
// child's stdin closes, and the session is gone. Raw HTTP first, then the official SDK client's
// SSEClientTransport in front of server-everything and of the example server.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  EXAMPLE, callTool, del, everythingServer, get, initSession, parseSse, pidAlive, post, reaped, request, rpc, startGateway, tmpdir, waitFor,
  withGateway,
} from '../lib/gw.mjs';


// Resolved from tests/node_modules (this file lives in tests/integration).
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
const { CreateMessageRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
const FORCE_2024 = [{ name: 'example', path: '/mcp', args: ['--protocol-version', '2024-11-05'] }];

/**
 * The fetch an SDK SSEClientTransport POSTs with, counting POSTs not yet answered: the SDK
 * resolves a call on its answer from the SSE stream, before the POST that carried the request
 * (or a cancel) has its 202, and its close() aborts every POST still open and reports each as
 * an error. So a test waits for `open() === 0` before it closes, which also checks that the
 * gateway answered every POST, and reads each body whole so that the abort finds nothing open.
 */
function countedFetch() {
  let open = 0;
  const statuses = [];
  const f = async (url, init) => {
    if (init?.method !== 'POST') return fetch(url, init); // the SSE stream itself, unless given its own
    open++;
    try {
      const res = await fetch(url, { ...init, signal: undefined });
      const body = await res.arrayBuffer();
      statuses.push(res.status);
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      open--;
    }
  };
  return { fetch: f, open: () => open, statuses };
}

/**
 * The SDK's onerror reports that are not its own late-progress race: it reports as an unknown
 * token each progress notification that arrives after it dropped the call's handler (on the
 * answer, or on an abort before the gateway had the cancel). `late` lists those notifications
 * as the wire has them; a report is excused only when it names one of them.
 */
function unexcused(errors, late) {
  const key = (n) => JSON.stringify([n.method, n.params?.progressToken, n.params?.progress, n.params?.total]);
  const excused = new Set(late.map(key));
  const UNKNOWN = 'Received a progress notification for an unknown token: ';
  return errors.map((e) => String(e?.message ?? e)).filter((m) => {
    if (!m.startsWith(UNKNOWN)) return true;
    try { return !excused.has(key(JSON.parse(m.slice(UNKNOWN.length)))); } catch { return true; }
  });
}

/**
 * The progress of a call the SDK aborted on its first progress notification, as the wire has it:
 * all of one token, after the first, and no answer to it on the wire.
 */
function lateAfterAbort(onWire, total) {
  const aborted = onWire.filter((j) => j.method === 'notifications/progress' && j.params.total === total);
  assert.ok(aborted.length >= 1, 'the aborted call\'s first progress is on the wire');
  assert.ok(aborted.every((j) => j.params.progressToken === aborted[0].params.progressToken));
  assert.ok(!onWire.some((j) => isAnswer(j) && j.id === aborted[0].params.progressToken), 'no answer to the aborted call');
  return aborted.slice(1);
}

/** A fetch for an SDK transport's SSE stream that keeps what arrives: {fetch, text()}. */
function teeWire() {
  let wire = '';
  const f = async (url, init) => {
    const res = await fetch(url, init);
    if (!res.body) return res;
    const [mine, theirs] = res.body.tee();
    (async () => {
      const dec = new TextDecoder();
      try { for await (const chunk of mine) wire += dec.decode(chunk, { stream: true }); } catch { /* aborted at close */ }
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: f, text: () => wire };
}

/** Awaits the whole body; checks status, Content-Type and the JSON-RPC error shape. */
async function assertJsonError(r, status, code = -32600) {
  const text = await r.done();
  assert.equal(r.status, status, `HTTP status (body: ${text})`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `Content-Type (body: ${text})`);
  let body;
  assert.doesNotThrow(() => { body = JSON.parse(text); }, `body is JSON: ${text}`);
  assert.equal(body.jsonrpc, '2.0', text);
  assert.equal(body.id, null, text);
  assert.equal(body.error?.code, code, text);
  assert.equal(typeof body.error.message, 'string', text);
  return body;
}

/**
 * GET PATH/sse; asserts the stream opens with the endpoint event and returns the connection:
 * {s, endpoint (absolute URL), sid, pid, messages(), waitMsg(pred)}.
 */
async function openLegacy(gw, { prefix = '/mcp', headers = {} } = {}) {
  const dirPath = prefix.replace(/\/$/, ''); // PATH without a trailing slash
  const sseUrl = `${gw.base}${dirPath}/sse`;
  const s = await request(sseUrl, { method: 'GET', headers: { Accept: 'text/event-stream', ...headers } });
  if (s.status !== 200) throw new Error(`GET ${prefix}/sse: HTTP ${s.status} ${await s.done()}`);
  assert.match(s.headers['content-type'] || '', /^text\/event-stream\b/);
  const first = await waitFor(() => s.completeEvents()[0], 5000, 'the endpoint event');
  assert.equal(first.event, 'endpoint', `first event: ${s.text()}`);
  assert.match(first.data, /^messages\?sessionId=[A-Za-z0-9_.-]+$/, 'a reference relative to PATH/sse');
  const endpoint = new URL(first.data, sseUrl);
  assert.equal(endpoint.origin, new URL(gw.base).origin);
  assert.equal(endpoint.pathname, `${dirPath}/messages`);
  const sid = endpoint.searchParams.get('sessionId');
  const m = await gw.waitLog(new RegExp(`session=${esc(sid)} session created: server=\\S+ child=(\\d+)`));
  const conn = {
    s,
    sid,
    pid: Number(m[1]),
    endpoint: endpoint.href,
    /** JSON messages received whole on the stream so far (the endpoint event excluded). */
    messages: () => s.completeEvents().filter((e) => e.event === 'message').map((e) => e.json),
    waitMsg: (pred, ms = 5000, what = 'a message on the SSE stream') => waitFor(() => conn.messages().find((j) => j && pred(j)), ms, what),
  };
  return conn;
}

/** POSTs one message (object or raw string) to the connection's message endpoint; awaits the body. */
async function send(conn, msg, { headers = {}, url } = {}) {
  const r = await request(url || conn.endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: msg });
  await r.done();
  return r;
}

async function send202(conn, msg, opts) {
  const r = await send(conn, msg, opts);
  assert.equal(r.status, 202, `POST ${typeof msg === 'string' ? msg : JSON.stringify(msg)}: HTTP ${r.status} ${r.text()}`);
  assert.equal(r.text(), 'Accepted');
  return r;
}

/** initialize + notifications/initialized over the legacy transport; returns the result. */
async function legacyInit(conn, { version = '2024-11-05', id = 'init-1', capabilities = {} } = {}) {
  await send202(conn, rpc('initialize', { protocolVersion: version, capabilities, clientInfo: { name: 'legacy-it', version: '1' } }, id));
  const ans = await conn.waitMsg((j) => j.id === id && isAnswer(j), 5000, 'the initialize answer');
  assert.ok(ans.result, `initialize answered: ${JSON.stringify(ans)}`);
  await send202(conn, { jsonrpc: '2.0', method: 'notifications/initialized' });
  return ans.result;
}

/** POSTs a tools/call and waits for its answer on the SSE stream. */
async function legacyCall(conn, id, name, args = {}, meta) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  await send202(conn, rpc('tools/call', params, id));
  return conn.waitMsg((j) => j.id === id && isAnswer(j), 10000, `the answer to ${JSON.stringify(id)}`);
}

/** Resolves with the child-facing id once the child has read the tools/call tagged `tag`. */
async function childIdOf(gw, tag) {
  const m = await waitFor(() => gw.childMessages().find((x) => x.method === 'tools/call' && x.params?.arguments?.tag === tag), 5000, `child to read ${tag}`);
  return m.id;
}

const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');

/** The raw SSE blocks of the stream: every one must be `event: endpoint` (first) or `event: message`. */
function assertFraming(conn) {
  const text = conn.s.text();
  const blocks = text.slice(0, text.lastIndexOf('\n\n')).split('\n\n').filter((b) => b.split('\n').some((l) => !l.startsWith(':')));
  assert.ok(blocks.length >= 2, text);
  blocks.forEach((b, i) => {
    const lines = b.split('\n').filter((l) => !l.startsWith(':') && !l.startsWith('id:'));
    assert.equal(lines.length, 2, `one event line and one data line: ${JSON.stringify(b)}`);
    assert.equal(lines[0], i === 0 ? 'event: endpoint' : 'event: message', JSON.stringify(b));
    assert.match(lines[1], /^data: /);
  });
}

// --- the endpoint event and the session --------------------------------------------------------

test('GET /mcp/sse: 200 SSE, the endpoint event first with a relative reference to /mcp/messages, one child spawned', async () => {
  await withGateway({}, async (gw) => {
    const c = await openLegacy(gw);
    assert.ok(pidAlive(c.pid), 'the child runs');
    assert.deepEqual(gw.childPids(), [c.pid], 'exactly one child for the one session');
    assert.equal(c.s.completeEvents().length, 1, 'nothing but the endpoint event before any message');
    assert.equal(c.s.headers['mcp-session-id'], undefined, 'no Streamable HTTP session header');
    // A second GET is a second session with its own child and its own id.
    const c2 = await openLegacy(gw);
    assert.notEqual(c2.sid, c.sid);
    assert.notEqual(c2.pid, c.pid);
    c2.s.drop();
    await waitFor(() => reaped(c2.pid), 10000, `child ${c2.pid} reaped`);
    assert.ok(pidAlive(c.pid), 'the first session is untouched');
    assert.equal(c.s.ended, false);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, `child ${c.pid} reaped`);
  });
});

test('each server has its own PATH/sse and PATH/messages; a session answers only on its own server', async () => {
  const dir = tmpdir('mcpgw-legacy-');
  const servers = [{ name: 'a', path: '/mcp' }, { name: 'b', path: '/tools/v2', log: path.join(dir, 'b.log') }, { name: 'c', path: '/api/', log: path.join(dir, 'c.log') }];
  await withGateway({ servers }, async (gw) => {
    // A PATH with a trailing slash: /api/sse, and the reference resolves to /api/messages.
    const t = await openLegacy(gw, { prefix: '/api/' });
    assert.match(gw.logs(), new RegExp(`session=${esc(t.sid)} session created: server=c `));
    await legacyInit(t);
    assert.equal(textOf(await legacyCall(t, 'on-c', 'echo', { text: 'from c' })), 'from c');
    t.s.drop();
    await waitFor(() => reaped(t.pid), 10000, 'child of c reaped');
    const a = await openLegacy(gw, { prefix: '/mcp' });
    const b = await openLegacy(gw, { prefix: '/tools/v2' });
    assert.match(gw.logs(), new RegExp(`session=${esc(b.sid)} session created: server=b `));
    assert.match(gw.logs(), new RegExp(`session=${esc(a.sid)} session created: server=a `));
    await legacyInit(b);
    const ans = await legacyCall(b, 'on-b', 'echo', { text: 'from b' });
    assert.equal(textOf(ans), 'from b');
    // a's session id on b's message endpoint, and the reverse: unknown there.
    await assertJsonError(await send(a, rpc('ping', undefined, 'x'), { url: `${gw.base}/tools/v2/messages?sessionId=${encodeURIComponent(a.sid)}` }), 404);
    await assertJsonError(await send(b, rpc('ping', undefined, 'y'), { url: `${gw.base}/mcp/messages?sessionId=${encodeURIComponent(b.sid)}` }), 404);
    assert.ok(!gw.childMessages().some((m) => m.id === 'x' || m.id === 'y'));
    a.s.drop();
    b.s.drop();
    await waitFor(() => reaped(a.pid) && reaped(b.pid), 10000, 'both children reaped');
  });
});

// --- raw end to end ----------------------------------------------------------------------------

test('raw end to end with a 2024-11-05 child: initialize, initialized 202, calls answered on the stream with the client\'s exact ids', async () => {
  await withGateway({ servers: FORCE_2024 }, async (gw) => {
    const c = await openLegacy(gw);
    const result = await legacyInit(c, { version: '2024-11-05', id: 'init-str' });
    assert.equal(result.protocolVersion, '2024-11-05');
    assert.equal(result.serverInfo.name, 'mcp-example-server');
    await gw.waitLog(new RegExp(`session=${esc(c.sid)} session initialized: protocol 2024-11-05`));
    // The child saw initialize under a gateway-minted id, and then the initialized notification.
    await waitFor(() => gw.childMessages().some((m) => m.method === 'notifications/initialized'), 5000, 'initialized at the child');
    const init = gw.childMessages().find((m) => m.method === 'initialize');
    assert.equal(typeof init.id, 'number', 'the child sees a minted id');
    assert.equal(init.params.protocolVersion, '2024-11-05');

    // A string id and a number id come back exactly, as string and number.
    const a = await legacyCall(c, 'e-1', 'echo', { text: 'string id' });
    assert.equal(a.id, 'e-1');
    assert.equal(textOf(a), 'string id');
    const b = await legacyCall(c, 7, 'echo', { text: 'number id' });
    assert.equal(b.id, 7);
    assert.equal(textOf(b), 'number id');
    // "7" (a string) is a different id from 7.
    const b2 = await legacyCall(c, '7', 'echo', { text: 'string seven' });
    assert.equal(b2.id, '7');
    assert.equal(textOf(b2), 'string seven');
    assert.ok(c.s.text().includes('"id":"e-1"') && c.s.text().includes('"id":7,') && c.s.text().includes('"id":"7"'), c.s.text());
    // A 30-digit id survives byte for byte.
    const big = '123456789012345678901234567890';
    await send202(c, `{"jsonrpc":"2.0","id":${big},"method":"tools/call","params":{"name":"echo","arguments":{"text":"big id"}}}`);
    await waitFor(() => c.s.text().includes(`"id":${big},`), 5000, 'the 30-digit id on the stream');
    // A POST carrying MCP-Protocol-Version 2024-11-05 (as the SDK sends) is accepted.
    await send202(c, rpc('tools/call', { name: 'echo', arguments: { text: 'with header' } }, 'hdr'), { headers: { 'MCP-Protocol-Version': '2024-11-05' } });
    assert.equal(textOf(await c.waitMsg((j) => j.id === 'hdr' && isAnswer(j))), 'with header');
    // tools/list and ping are requests like any other.
    await send202(c, rpc('tools/list', undefined, 'tl'));
    const tl = await c.waitMsg((j) => j.id === 'tl' && isAnswer(j));
    assert.ok(tl.result.tools.some((t) => t.name === 'slow'));
    await send202(c, rpc('ping', undefined, 'p'));
    assert.deepEqual((await c.waitMsg((j) => j.id === 'p' && isAnswer(j))).result, {});

    // The child never saw a client id; each was minted.
    const calls = gw.childMessages().filter((m) => m.method === 'tools/call');
    assert.equal(calls.length, 5);
    assert.ok(calls.every((m) => typeof m.id === 'number' && m.id < 1000), JSON.stringify(calls.map((m) => m.id)));
    assert.equal(new Set(calls.map((m) => m.id)).size, calls.length, 'distinct minted ids');
    assertFraming(c);
    assert.equal(c.s.ended, false, 'the stream stays open');
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('plain negotiation on the legacy transport: the child answers the client\'s version (2024-11-05 or newer)', async () => {
  await withGateway({}, async (gw) => {
    for (const version of ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']) {
      const c = await openLegacy(gw);
      const result = await legacyInit(c, { version, id: `init-${version}` });
      assert.equal(result.protocolVersion, version);
      await gw.waitLog(new RegExp(`session=${esc(c.sid)} session initialized: protocol ${esc(version)}`));
      const a = await legacyCall(c, `call-${version}`, 'echo', { text: version });
      assert.equal(textOf(a), version);
      c.s.drop();
      await waitFor(() => reaped(c.pid), 10000, `child of ${version} reaped`);
    }
  });
});

test('progress of a slow call with a progressToken travels on the SSE stream before its answer', async () => {
  await withGateway({ servers: FORCE_2024 }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    const ans = await legacyCall(c, 'slow-1', 'slow', { steps: 4, interval_ms: 20 }, { progressToken: 'pt-1' });
    assert.equal(textOf(ans), 'done after 4 steps');
    const msgs = c.messages();
    const progress = msgs.filter((j) => j.method === 'notifications/progress');
    assert.deepEqual(progress.map((j) => j.params.progressToken), ['pt-1', 'pt-1', 'pt-1', 'pt-1']);
    assert.deepEqual(progress.map((j) => j.params.progress), [1, 2, 3, 4]);
    assert.ok(progress.every((j) => j.params.total === 4));
    const lastProgress = msgs.findLastIndex((j) => j.method === 'notifications/progress');
    const answerAt = msgs.findIndex((j) => j.id === 'slow-1' && isAnswer(j));
    assert.ok(answerAt > 0 && lastProgress < answerAt, `progress before the answer: ${JSON.stringify(msgs)}`);
    // A numeric token comes back as a number.
    await legacyCall(c, 'slow-2', 'slow', { steps: 2, interval_ms: 10 }, { progressToken: 42 });
    assert.deepEqual(c.messages().filter((j) => j.method === 'notifications/progress' && j.params.progressToken === 42).map((j) => j.params.progress), [1, 2]);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('a child negotiating a version nobody serves ends the legacy session with an error on the stream', async () => {
  await withGateway({ servers: [{ name: 'example', path: '/mcp', args: ['--protocol-version', '2099-01-01'] }] }, async (gw) => {
    const c = await openLegacy(gw);
    await send202(c, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 'init-bad'));
    const err = await c.waitMsg((j) => j.id === 'init-bad' && isAnswer(j), 5000, 'the initialize error');
    assert.equal(err.error?.code, -32603, JSON.stringify(err));
    await c.s.done(5000);
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
    await assertJsonError(await send(c, { jsonrpc: '2.0', method: 'notifications/initialized' }), 404);
  });
});

test('2024-11-05 stays a legacy-only version: a Streamable HTTP session whose child picks it is refused', async () => {
  await withGateway({ servers: FORCE_2024 }, async (gw) => {
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 'init-s'));
    assert.equal(r.status, 200);
    await r.done();
    const ans = r.events().map((e) => e.json).find(isAnswer);
    assert.equal(ans?.id, 'init-s', r.text());
    assert.equal(ans.error?.code, -32603, r.text());
    await gw.waitLog(/session closed: unsupported protocol version/);
    // The same child is fine behind the legacy transport.
    const c = await openLegacy(gw);
    assert.equal((await legacyInit(c)).protocolVersion, '2024-11-05');
    c.s.drop();
    await waitFor(() => gw.childPids().every(reaped), 10000, 'children reaped');
  });
});

// --- errors ------------------------------------------------------------------------------------

test('POST /mcp/messages refusals: 400 without sessionId, 404 for unknown ids, 415, 413, 400 for a batch and bad JSON', async () => {
  await withGateway({ gateway: { max_body_bytes: 2048 } }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    const base = `${gw.base}/mcp/messages`;
    const ping = rpc('ping', undefined, 'refused');
    // sessionId missing or empty
    await assertJsonError(await send(c, ping, { url: base }), 400);
    await assertJsonError(await send(c, ping, { url: `${base}?sessionId=` }), 400);
    await assertJsonError(await send(c, ping, { url: `${base}?other=${encodeURIComponent(c.sid)}` }), 400);
    // unknown ids, including one far too long to be a session id
    await assertJsonError(await send(c, ping, { url: `${base}?sessionId=nope` }), 404);
    await assertJsonError(await send(c, ping, { url: `${base}?sessionId=${'A'.repeat(400)}` }), 404);
    await assertJsonError(await send(c, ping, { url: `${base}?sessionId=${encodeURIComponent(c.sid)}x` }), 404);
    // Content-Type
    await assertJsonError(await send(c, ping, { headers: { 'Content-Type': 'text/plain' } }), 415);
    const noCt = await request(c.endpoint, { method: 'POST', headers: {}, body: ping });
    await assertJsonError(noCt, 415);
    // over max_body_bytes, announced and chunked
    const big = JSON.stringify({ ...rpc('ping', undefined, 'big'), params: { pad: 'x'.repeat(3000) } });
    await assertJsonError(await send(c, big), 413);
    await assertJsonError(await send(c, big, { headers: { 'Transfer-Encoding': 'chunked' } }), 413);
    // a batch, an empty batch, malformed JSON, not JSON-RPC
    await assertJsonError(await send(c, [rpc('ping', undefined, 'b1'), rpc('ping', undefined, 'b2')]), 400, -32600);
    await assertJsonError(await send(c, '[]'), 400, -32600);
    await assertJsonError(await send(c, '{"jsonrpc":"2.0","id":1,'), 400, -32700);
    await assertJsonError(await send(c, '{"id":1,"method":"ping"}'), 400, -32600);
    // Nothing refused reached the child; the session still works.
    const ok = await legacyCall(c, 'after-refusals', 'echo', { text: 'still fine' });
    assert.equal(textOf(ok), 'still fine');
    const seen = gw.childMessages();
    assert.ok(!seen.some((m) => ['refused', 'big', 'b1', 'b2'].includes(m.id) || m.method === 'ping'), JSON.stringify(seen));
    assert.deepEqual(gw.childPids(), [c.pid], 'no other child');
    assert.equal(c.s.ended, false);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('a second initialize is 400; a duplicate in-flight id is 400 and the first call still completes', async () => {
  await withGateway({}, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c, { id: 'i1' });
    await assertJsonError(await send(c, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 'i2')), 400);
    assert.equal(gw.childMessages().filter((m) => m.method === 'initialize').length, 1, 'one initialize at the child');
    await send202(c, rpc('tools/call', { name: 'slow', arguments: { steps: 10, interval_ms: 60, tag: 'dup' } }, 'dup'));
    await childIdOf(gw, 'dup');
    await assertJsonError(await send(c, rpc('tools/call', { name: 'echo', arguments: { text: 'second', tag: 'dup2' } }, 'dup')), 400);
    const first = await c.waitMsg((j) => j.id === 'dup' && isAnswer(j), 10000);
    assert.equal(textOf(first), 'done after 10 steps');
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.tag === 'dup2'), 'the duplicate never reached the child');
    assert.equal(c.messages().filter((j) => j.id === 'dup').length, 1, 'one answer for the id');
    // Once answered, the id may be used again.
    await send202(c, rpc('tools/call', { name: 'echo', arguments: { text: 'reused' } }, 'dup'));
    await c.waitMsg((j) => j.id === 'dup' && textOf(j) === 'reused', 5000, 'the answer to the reused id');
    assert.equal(c.messages().filter((j) => j.id === 'dup').length, 2);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('wrong methods are 405 with Allow: GET on /mcp/sse and Allow: POST on /mcp/messages', async () => {
  await withGateway({}, async (gw) => {
    const c = await openLegacy(gw);
    for (const method of ['POST', 'DELETE', 'PUT', 'PATCH']) {
      const r = await request(`${gw.base}/mcp/sse`, { method, headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' }, body: '{}' });
      await assertJsonError(r, 405);
      assert.equal(r.headers.allow, 'GET', `${method} /mcp/sse`);
    }
    for (const method of ['GET', 'DELETE', 'PUT']) {
      const r = await request(c.endpoint, { method, headers: { Accept: 'text/event-stream' } });
      await assertJsonError(r, 405);
      assert.equal(r.headers.allow, 'POST', `${method} /mcp/messages`);
    }
    assert.deepEqual(gw.childPids(), [c.pid], 'no other session was created');
    // A DELETE on the message endpoint did not end the session.
    await legacyInit(c);
    assert.equal(textOf(await legacyCall(c, 'alive', 'echo', { text: 'alive' })), 'alive');
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('GET /mcp/sse with an Accept that excludes text/event-stream is 406 and spawns nothing; no Accept or */* is fine', async () => {
  await withGateway({}, async (gw) => {
    for (const accept of ['application/json', 'text/html']) {
      await assertJsonError(await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: accept } }), 406);
    }
    assert.deepEqual(gw.childPids(), []);
    for (const headers of [{ Accept: '*/*' }, { Accept: 'text/event-stream;q=0.9, application/json' }]) {
      const c = await openLegacy(gw, { headers });
      c.s.drop();
      await waitFor(() => reaped(c.pid), 10000, 'child reaped');
    }
    const s = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: {} });
    assert.equal(s.status, 200, 'no Accept header at all');
    const ev = await waitFor(() => s.completeEvents()[0], 5000, 'endpoint event');
    assert.equal(ev.event, 'endpoint');
    s.drop();
    const pids = await waitFor(() => gw.childPids().length === 3 && gw.childPids(), 5000, 'the third session in the log');
    await waitFor(() => pids.every(reaped), 10000, 'every child reaped');
  });
});

test('Streamable HTTP and legacy sessions cannot reach each other', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await openLegacy(gw);
    await legacyInit(c);
    // A Streamable HTTP session id on the legacy message endpoint.
    await assertJsonError(await send(c, rpc('tools/call', { name: 'echo', arguments: { text: 'x', tag: 'cross-1' } }, 'cross-1'), { url: `${gw.base}/mcp/messages?sessionId=${encodeURIComponent(s.sid)}` }), 404);
    // The legacy session id as Mcp-Session-Id: POST, GET and DELETE on /mcp.
    await assertJsonError(await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'x', tag: 'cross-2' } }, 'cross-2'), { sid: c.sid }), 404);
    await assertJsonError(await get(gw, { sid: c.sid }), 404);
    await assertJsonError(await del(gw, { sid: c.sid }), 404);
    assert.ok(!gw.childMessages().some((m) => /^cross-/.test(m.params?.arguments?.tag ?? '')), 'nothing crossed to a child');
    // Both sessions still work, each on its own transport.
    assert.equal(textOf(await legacyCall(c, 'l', 'echo', { text: 'legacy ok' })), 'legacy ok');
    assert.equal((await callTool(gw, s.sid, 'echo', { text: 'streamable ok' })).response.result.content[0].text, 'streamable ok');
    assert.ok(pidAlive(c.pid) && pidAlive(s.pid));
    assert.equal(c.s.ended, false);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'legacy child reaped');
    assert.ok(pidAlive(s.pid), 'the Streamable HTTP session is untouched');
  });
});

// --- the SSE connection is the session ---------------------------------------------------------

test('dropping the SSE connection mid-call: the child reads "client disconnected" cancels under its ids before stdin closes; reaped; later POSTs 404', async () => {
  const token = 'legacy-admin-token-0123456789abcdef';
  const admin = async (gw) => {
    const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${token}` } });
    await r.done();
    assert.equal(r.status, 200, r.text());
    return r.json();
  };
  await withGateway({ gateway: { admin_token: token, child_stdin_grace_ms: 10000 } }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await send202(c, rpc('tools/call', { name: 'slow', arguments: { steps: 200, interval_ms: 50, tag: 'd1' } }, 'd1'));
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'd2' } }, 2));
    const id1 = await childIdOf(gw, 'd1');
    const id2 = await childIdOf(gw, 'd2');
    assert.equal(childCancels(gw).length, 0);
    const view = (await admin(gw)).sessions.find((x) => x.id === c.sid);
    assert.equal(view?.child_pid, c.pid);
    assert.equal(view.protocol_version, '2024-11-05');
    assert.deepEqual(view.inflight.map((e) => [e.id, e.gateway_id]).sort(), [['d1', id1], [2, id2]].sort());
    c.s.drop();
    await waitFor(() => childCancels(gw).length === 2, 5000, 'two cancels at the child');
    assert.deepEqual(childCancels(gw).map((m) => m.params).sort((x, y) => x.requestId - y.requestId),
      [{ requestId: id1, reason: 'client disconnected' }, { requestId: id2, reason: 'client disconnected' }].sort((x, y) => x.requestId - y.requestId));
    await waitFor(() => reaped(c.pid), 10000, `child ${c.pid} reaped`);
    // The child handled both cancels, and only then saw its stdin close (its stderr is in order).
    const logs = await gw.waitLog(new RegExp(`session=${esc(c.sid)} child stderr: mcp-example-server: stdin closed, exiting`)).then(() => gw.logs());
    const at = (re) => { const m = re.exec(logs); assert.ok(m, `log ${re}`); return m.index; };
    const eof = at(new RegExp(`session=${esc(c.sid)} child stderr: mcp-example-server: stdin closed, exiting`));
    for (const id of [id1, id2]) {
      assert.ok(at(new RegExp(`session=${esc(c.sid)} cancel sent to child: method=tools/call child_id=${id} reason="client disconnected"`)) < eof);
      assert.ok(at(new RegExp(`session=${esc(c.sid)} child stderr: mcp-example-server: cancelled ${id} reason=client disconnected`)) < eof,
        `cancel of ${id} handled before stdin closed`);
    }
    assert.match(logs, new RegExp(`session=${esc(c.sid)} session closed: client disconnected \\(2 in-flight requests cancelled\\)`));
    // The child left on stdin EOF, before any signal. The gateway logs the exit when it reaps; the
    // log pipe may be read after the pid is gone, so the line is waited for.
    await gw.waitLog(new RegExp(`child ${c.pid} exited with status 0`));
    assert.doesNotMatch(gw.logs(), new RegExp(`child ${c.pid} (exited with status [1-9]|killed by signal)`));
    // The cancels were the last lines it read.
    assert.deepEqual(gw.childMessages().slice(-2).map((m) => m.method), ['notifications/cancelled', 'notifications/cancelled']);
    // The session is gone.
    await assertJsonError(await send(c, rpc('tools/call', { name: 'echo', arguments: { text: 'too late' } }, 'late')), 404);
    await assertJsonError(await send(c, { jsonrpc: '2.0', method: 'notifications/initialized' }), 404);
    assert.equal(childCancels(gw).length, 2, 'no further cancels');
    const after = await admin(gw);
    assert.deepEqual(after.sessions, []);
    assert.equal(after.counters.cancels_to_child['client disconnected'], 2);
  });
});

test('dropping the SSE connection while initialize is in flight cancels nothing; the child still stops', async () => {
  const dir = tmpdir('mcpgw-legacy-init-');
  const log = path.join(dir, 'child.log');
  const command = `/bin/sh -c 'sleep 1; exec ${EXAMPLE} --log ${log}'`;
  // A long stdin grace: the child must get to read its stdin after the late start.
  await withGateway({ gateway: { child_stdin_grace_ms: 10000 }, servers: [{ name: 'slowstart', path: '/mcp', command }] }, async (gw) => {
    const c = await openLegacy(gw);
    await send202(c, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 'init-drop'));
    assert.ok(!c.messages().some(isAnswer), 'initialize still in flight');
    c.s.drop();
    await gw.waitLog(new RegExp(`session=${esc(c.sid)} session closed: client disconnected \\(0 in-flight requests cancelled\\)`));
    await waitFor(() => reaped(c.pid), 10000, `child ${c.pid} reaped`);
    const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
    assert.deepEqual(lines.map((m) => m.method), ['initialize'], 'the child read initialize and no cancel');
    await assertJsonError(await send(c, { jsonrpc: '2.0', method: 'notifications/initialized' }), 404);
  });
});

test('a client cancel is forwarded under the child\'s id; the stream stays open and the next call works', async () => {
  await withGateway({}, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await send202(c, rpc('tools/call', { name: 'slow', arguments: { steps: 200, interval_ms: 50, tag: 'c1' } }, 'c1'), {});
    const id1 = await childIdOf(gw, 'c1');
    await send202(c, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1', reason: 'user abort' } });
    const cn = await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
    assert.deepEqual(cn.params, { requestId: id1, reason: 'user abort' });
    await gw.waitLog(new RegExp(`session=${esc(c.sid)} client cancel forwarded: method=tools/call child_id=${id1}\\b`));
    // A number id too.
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'c2' } }, 99));
    const id2 = await childIdOf(gw, 'c2');
    await send202(c, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99, reason: 'numeric' } });
    await waitFor(() => childCancels(gw).length === 2, 5000, 'the second cancel');
    assert.deepEqual(childCancels(gw)[1].params, { requestId: id2, reason: 'numeric' });
    // A cancel for an unknown id is 202 and goes nowhere.
    await send202(c, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody', reason: 'stray' } });
    const next = await legacyCall(c, 'c3', 'echo', { text: 'next call' });
    assert.equal(textOf(next), 'next call');
    assert.equal(c.s.ended, false, 'the SSE stream stays open');
    assert.ok(!c.messages().some((j) => isAnswer(j) && (j.id === 'c1' || j.id === 99)), 'no answer for the cancelled calls');
    assert.equal(childCancels(gw).length, 2, 'the stray cancel was not forwarded');
    assert.ok(pidAlive(c.pid));
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
    assert.equal(childCancels(gw).length, 2, 'nothing left in flight to cancel on the drop');
  });
});

test('request_timeout_ms on a legacy session: the child reads "request timed out", the client an error on the stream, which stays open', async () => {
  await withGateway({ servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }] }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 't1' } }, 't1'));
    const id = await childIdOf(gw, 't1');
    const err = await c.waitMsg((j) => j.id === 't1' && isAnswer(j), 5000, 'the timeout error');
    assert.equal(err.error?.code, -32603, JSON.stringify(err));
    await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: id, reason: 'request timed out' }]);
    assert.equal(c.s.ended, false, 'the session stream stays open');
    assert.equal(textOf(await legacyCall(c, 't2', 'echo', { text: 'after timeout' })), 'after timeout');
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

// --- child requests and notifications ----------------------------------------------------------

test('child requests go out on the SSE stream; the client\'s POSTed answers reach the child under its own ids', async () => {
  await withGateway({ servers: FORCE_2024 }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c, { capabilities: { sampling: {}, roots: { listChanged: true } } });
    // sampling
    await send202(c, rpc('tools/call', { name: 'sample', arguments: { prompt: 'legacy prompt' } }, 'samp-1'));
    const req = await c.waitMsg((j) => j.method === 'sampling/createMessage', 5000, 'sampling request on the stream');
    assert.equal(typeof req.id, 'number', 'a gateway-minted id');
    assert.equal(req.params.messages[0].content.text, 'legacy prompt');
    await send202(c, { jsonrpc: '2.0', id: req.id, result: { role: 'assistant', content: { type: 'text', text: 'sampled via legacy' }, model: 'm' } });
    const ans = await c.waitMsg((j) => j.id === 'samp-1' && isAnswer(j), 5000, 'the sample tool answer');
    assert.equal(textOf(ans), 'sampled via legacy');
    const resp = gw.childMessages().find((m) => !m.method && m.result?.content?.text === 'sampled via legacy');
    assert.ok(resp, 'the child read the answer');
    assert.match(String(resp.id), /^s-\d+$/, `the child's own id restored: ${JSON.stringify(resp.id)}`);
    assert.equal(typeof resp.id, 'string');
    // roots
    await send202(c, rpc('tools/call', { name: 'roots', arguments: {} }, 'roots-1'));
    const rr = await c.waitMsg((j) => j.method === 'roots/list', 5000, 'roots/list on the stream');
    await send202(c, { jsonrpc: '2.0', id: rr.id, result: { roots: [{ uri: 'file:///tmp/legacy', name: 'legacy' }] } });
    const rans = await c.waitMsg((j) => j.id === 'roots-1' && isAnswer(j));
    assert.deepEqual(JSON.parse(textOf(rans)), { roots: [{ uri: 'file:///tmp/legacy', name: 'legacy' }] });
    // an error answer reaches the child as an error
    await send202(c, rpc('tools/call', { name: 'sample', arguments: {} }, 'samp-2'));
    const req2 = await c.waitMsg((j) => j.method === 'sampling/createMessage' && j.id !== req.id, 5000, 'second sampling request');
    await send202(c, { jsonrpc: '2.0', id: req2.id, error: { code: -1, message: 'user declined' } });
    const ans2 = await c.waitMsg((j) => j.id === 'samp-2' && isAnswer(j));
    assert.equal(textOf(ans2), 'sampling error: user declined');
    assert.equal(ans2.result.isError, true);
    // an answer to an id the gateway never sent is 202 and goes nowhere
    await send202(c, { jsonrpc: '2.0', id: 987654, result: {} });
    // a child notification (notifications/message) on the stream, before the call's answer
    const n = await legacyCall(c, 'n-1', 'notify', { level: 'warning', text: 'hello legacy' });
    assert.equal(textOf(n), 'ok');
    const note = c.messages().find((j) => j.method === 'notifications/message' && j.params.data === 'hello legacy');
    assert.deepEqual(note?.params, { level: 'warning', data: 'hello legacy' });
    assert.ok(!gw.childMessages().some((m) => m.id === 987654), 'the stray answer never reached the child');
    assertFraming(c);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

test('a child that crashes ends the session: its in-flight call gets a JSON-RPC error, the stream ends, POSTs 404', async () => {
  await withGateway({}, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await send202(c, rpc('tools/call', { name: 'crash', arguments: {} }, 'boom'));
    const err = await c.waitMsg((j) => j.id === 'boom' && isAnswer(j), 5000, 'the error for the crashed call');
    assert.equal(err.error?.code, -32603, JSON.stringify(err));
    assert.match(err.error.message, /^session ended: child (exited|closed its stdout)/);
    await c.s.done(5000);
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
    await assertJsonError(await send(c, rpc('ping', undefined, 'after-crash')), 404);
  });
});

test('gateway shutdown with a legacy call in flight: the child reads "gateway shutting down", the client an error, exit 0', async () => {
  const gw = await startGateway({});
  let ok = false;
  try {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'sd' } }, 'sd'));
    const id = await childIdOf(gw, 'sd');
    await gw.stop('SIGTERM');
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: id, reason: 'gateway shutting down' }]);
    await c.s.done(5000);
    const err = c.messages().find((j) => j?.id === 'sd' && isAnswer(j));
    assert.equal(err?.error?.code, -32603, c.s.text());
    assert.ok(reaped(c.pid), 'the gateway reaped its child before exiting');
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`); }
  }
});

// --- configuration and access rules ------------------------------------------------------------

test('an open legacy stream keeps its session from idle expiry and gets heartbeats; an idle Streamable HTTP session beside it expires', async () => {
  await withGateway({ gateway: { session_idle_timeout_s: 1, heartbeat_s: 1 } }, async (gw) => {
    const idle = await initSession(gw);
    const c = await openLegacy(gw);
    await legacyInit(c);
    await gw.waitLog(new RegExp(`session=${esc(idle.sid)} session closed: session expired`), 6000);
    const beats = () => (c.s.text().match(/^: keep-alive$/gm) || []).length;
    const seen = beats();
    await waitFor(() => beats() >= seen + 2, 5000, 'two more heartbeats on the legacy stream');
    assert.ok(!new RegExp(`session=${esc(c.sid)} session closed`).test(gw.logs()), 'the legacy session was not expired');
    assert.equal(c.s.ended, false);
    assert.deepEqual(c.s.completeEvents().map((e) => e.event), ['endpoint', 'message'], 'heartbeats are comments, not events');
    assert.equal(textOf(await legacyCall(c, 'still', 'echo', { text: 'still here' })), 'still here');
    c.s.drop();
    await waitFor(() => reaped(c.pid) && reaped(idle.pid), 10000, 'both children reaped');
  });
});

test('limits apply to legacy sessions: max_sessions -> 503 on GET /mcp/sse, max_inflight_per_session -> 429 on POST', async () => {
  await withGateway({ gateway: { max_sessions: 1, max_inflight_per_session: 1 } }, async (gw) => {
    const c = await openLegacy(gw);
    await legacyInit(c);
    await assertJsonError(await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream' } }), 503, -32603);
    assert.deepEqual(gw.childPids(), [c.pid], 'no second child');
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'hold' } }, 'hold'));
    await childIdOf(gw, 'hold');
    await assertJsonError(await send(c, rpc('tools/call', { name: 'echo', arguments: { text: 'x', tag: 'over' } }, 'over')), 429, -32603);
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.tag === 'over'));
    await send202(c, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'hold', reason: 'make room' } });
    await waitFor(() => childCancels(gw).length === 1, 5000, 'the cancel');
    assert.equal(textOf(await legacyCall(c, 'fits', 'echo', { text: 'fits' })), 'fits');
    // The slot is free again once the first session is gone.
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
    const c2 = await openLegacy(gw);
    await legacyInit(c2);
    c2.s.drop();
    await waitFor(() => reaped(c2.pid), 10000, 'second child reaped');
  });
});

test('legacy_sse = 0: /mcp/sse and /mcp/messages are 404 and spawn nothing; /mcp still works', async () => {
  await withGateway({ gateway: { legacy_sse: 0 } }, async (gw) => {
    await assertJsonError(await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream' } }), 404);
    await assertJsonError(await request(`${gw.base}/mcp/messages?sessionId=abc`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: rpc('ping') }), 404);
    await assertJsonError(await request(`${gw.base}/mcp/messages`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: rpc('ping') }), 404);
    assert.deepEqual(gw.childPids(), [], 'no child spawned');
    const s = await initSession(gw);
    assert.equal((await callTool(gw, s.sid, 'echo', { text: 'streamable only' })).response.result.content[0].text, 'streamable only');
    // Not even an existing session's id opens the legacy message path.
    await assertJsonError(await request(`${gw.base}/mcp/messages?sessionId=${encodeURIComponent(s.sid)}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: rpc('ping') }), 404);
    await gw.waitLog(new RegExp(`session=${esc(s.sid)} session created`));
    assert.equal(gw.childPids().length, 1, 'only the Streamable HTTP session spawned a child');
  });
});

test('Host not allowed, or a foreign Origin: 403 on /mcp/sse (nothing spawned) and on /mcp/messages (nothing forwarded)', async () => {
  await withGateway({}, async (gw) => {
    for (const headers of [{ Host: 'evil.example' }, { Host: `evil.example:${gw.port}` }, { Origin: 'http://evil.example' }]) {
      const r = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream', ...headers } });
      const body = await assertJsonError(r, 403);
      assert.match(body.error.message, headers.Host ? /Host/ : /Origin/);
    }
    assert.deepEqual(gw.childPids(), [], 'no child spawned');
    const c = await openLegacy(gw, { headers: { Origin: 'http://localhost:3000' } });
    await legacyInit(c);
    for (const headers of [{ Host: 'evil.example' }, { Origin: 'http://evil.example' }]) {
      const body = await assertJsonError(await send(c, rpc('tools/call', { name: 'echo', arguments: { text: 'x', tag: 'forbidden' } }, 'forbidden'), { headers }), 403);
      assert.match(body.error.message, headers.Host ? /Host/ : /Origin/);
    }
    // An allowed Origin and Host localhost:PORT pass.
    assert.equal(textOf(await legacyCall(c, 'allowed', 'echo', { text: 'allowed' })), 'allowed');
    await send202(c, rpc('tools/call', { name: 'echo', arguments: { text: 'via localhost' } }, 'lh'), { headers: { Host: `localhost:${gw.port}`, Origin: 'http://127.0.0.1:9' } });
    assert.equal(textOf(await c.waitMsg((j) => j.id === 'lh' && isAnswer(j))), 'via localhost');
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.tag === 'forbidden'), 'nothing forbidden reached the child');
    assert.deepEqual(gw.childPids(), [c.pid]);
    c.s.drop();
    await waitFor(() => reaped(c.pid), 10000, 'child reaped');
  });
});

// --- the official SDK client ---------------------------------------------------------------------

test('SDK SSEClientTransport -> server-everything: tools, progress, sampling, abort, close reaps the child', async () => {
  await withGateway({ servers: [everythingServer()] }, async (gw) => {
    const errors = [];
    const sampled = [];
    const client = new Client({ name: 'legacy-sse-interop', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      sampled.push(req.params);
      return { model: 'legacy-model', role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text: 'sampled over HTTP+SSE' } };
    });
    client.onerror = (e) => { errors.push(e); };
    // The SSE stream as received on the wire, teed off the transport's own fetch.
    const tee = teeWire();
    let wire = '';
    const posts = countedFetch();
    const transport = new SSEClientTransport(new URL(`${gw.base}/mcp/sse`), { eventSourceInit: { fetch: tee.fetch }, fetch: posts.fetch });
    let closed = false;
    try {
      await client.connect(transport);
      wire = tee.text();
      assert.match(wire, /^event: endpoint\ndata: messages\?sessionId=[A-Za-z0-9_.-]+\n\n/);
      const [pid] = await waitFor(() => gw.childPids().length > 0 && gw.childPids(), 5000, 'the session in the log');
      assert.equal(gw.childPids().length, 1, 'one child for the one session');
      assert.equal(client.getServerVersion().name, 'mcp-servers/everything');
      await gw.waitLog(/session initialized: protocol \S+/);

      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const n of ['echo', 'trigger-long-running-operation', 'trigger-sampling-request']) assert.ok(names.includes(n), `tool ${n} in ${names}`);

      const echo = await client.callTool({ name: 'echo', arguments: { message: 'over HTTP+SSE — ✓' } });
      assert.equal(echo.content[0].text, 'Echo: over HTTP+SSE — ✓');

      const progress = [];
      const lr = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, { onprogress: (p) => progress.push(p) });
      assert.match(lr.content[0].text, /Long running operation completed/);
      // On the wire all three progress notifications precede the answer, and none follows it.
      // The SDK dispatches notifications a microtask late but answers at once (and then drops the
      // progress handler), so those that arrive in the same chunk as the answer never reach
      // onprogress: it sees a prefix of them, and the SDK reports each of the rest (below).
      wire = tee.text();
      const onWire = parseSse(wire).map((e) => e.json).filter(Boolean);
      const answerAt = onWire.findIndex((j) => isAnswer(j) && /Long running operation completed/.test(JSON.stringify(j.result)));
      assert.ok(answerAt > 0, wire);
      const lrId = onWire[answerAt].id;
      const lrProgress = onWire.filter((j) => j.method === 'notifications/progress' && j.params.progressToken === lrId);
      assert.deepEqual(lrProgress.map((j) => j.params.progress), [1, 2, 3], wire);
      assert.ok(lrProgress.every((j) => onWire.indexOf(j) < answerAt), `no progress after the answer: ${wire}`);
      assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3].slice(0, progress.length));
      assert.ok(progress.every((p) => p.total === 3));
      const lrDropped = lrProgress.slice(progress.length);

      const sr = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'legacy prompt', maxTokens: 20 } });
      assert.equal(sampled.length, 1);
      assert.match(sampled[0].messages[0].content.text, /legacy prompt/);
      assert.ok(sr.content[0].text.includes('sampled over HTTP+SSE'), sr.content[0].text);

      const ac = new AbortController();
      const seen = [];
      const call = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }, undefined, {
        signal: ac.signal,
        onprogress: (p) => { seen.push(p); if (seen.length === 1) ac.abort('legacy abort'); },
      });
      await assert.rejects(call, (e) => /legacy abort/.test(String(e?.message ?? e)));
      await gw.waitLog(/client cancel forwarded: method=tools\/call child_id=\d+/);
      const after = await client.callTool({ name: 'echo', arguments: { message: 'after abort' } });
      assert.equal(after.content[0].text, 'Echo: after abort');

      await waitFor(() => posts.open() === 0, 10000, 'a 202 for every POST');
      assert.ok(posts.statuses.every((st) => st === 202), `POST statuses ${posts.statuses}`);
      await client.close();
      closed = true;
      await gw.waitLog(/session closed: client disconnected \(0 in-flight requests cancelled\)/);
      await waitFor(() => reaped(pid), 10000, `child ${pid} reaped`);
      // The SDK reports as an error each progress notification it could not deliver: those of
      // the first call that came in the answer's chunk (above), and those of the aborted call
      // that were on the wire after the first one, on which it aborted (the child had not read
      // the cancel yet). Nothing else, and only notifications that are on the wire as reported.
      wire = tee.text();
      const late = [...lrDropped, ...lateAfterAbort(parseSse(wire).map((e) => e.json).filter(Boolean), 40)];
      assert.deepEqual(unexcused(errors, late), [], `errors ${errors}; wire:\n${wire}`);
      assert.equal(gw.childPids().length, 1, 'the SDK did not reconnect (no second session)');
    } finally {
      if (!closed) await client.close().catch(() => {});
    }
  });
});

test('SDK SSEClientTransport -> example server at 2024-11-05: the abort reaches the child under its id; close stops the child', async () => {
  await withGateway({ servers: FORCE_2024 }, async (gw) => {
    const errors = [];
    const client = new Client({ name: 'legacy-sse-interop', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'm', role: 'assistant', content: { type: 'text', text: 'sdk sampled' } }));
    client.onerror = (e) => { errors.push(e); };
    const tee = teeWire();
    const posts = countedFetch();
    const transport = new SSEClientTransport(new URL(`${gw.base}/mcp/sse`), { eventSourceInit: { fetch: tee.fetch }, fetch: posts.fetch });
    let closed = false;
    try {
      await client.connect(transport);
      const [pid] = await waitFor(() => gw.childPids().length > 0 && gw.childPids(), 5000, 'the session in the log');
      assert.equal(client.getServerVersion().name, 'mcp-example-server');
      await gw.waitLog(/session initialized: protocol 2024-11-05/);
      const init = gw.childMessages().find((m) => m.method === 'initialize');
      assert.ok(init, 'the child read initialize');

      const s = await client.callTool({ name: 'sample', arguments: { prompt: 'p' } });
      assert.equal(s.content[0].text, 'sdk sampled');

      const ac = new AbortController();
      const seen = [];
      const call = client.callTool({ name: 'slow', arguments: { steps: 200, interval_ms: 50, tag: 'sdk-abort' } }, undefined, {
        signal: ac.signal,
        onprogress: (p) => { seen.push(p); if (seen.length === 1) ac.abort('sdk abort'); },
      });
      await assert.rejects(call, (e) => /sdk abort/.test(String(e?.message ?? e)));
      const childId = await childIdOf(gw, 'sdk-abort');
      const cn = await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
      assert.deepEqual(cn.params, { requestId: childId, reason: 'sdk abort' });

      const e = await client.callTool({ name: 'echo', arguments: { text: 'after abort' } });
      assert.equal(e.content[0].text, 'after abort');
      await waitFor(() => posts.open() === 0, 10000, 'a 202 for every POST');
      assert.ok(posts.statuses.every((st) => st === 202), `POST statuses ${posts.statuses}`);
      await client.close();
      closed = true;
      await waitFor(() => reaped(pid), 10000, `child ${pid} reaped`);
      await gw.waitLog(/child stderr: mcp-example-server: stdin closed, exiting/);
      assert.equal(childCancels(gw).length, 1, 'nothing was in flight at close');
      // The progress the child sent after the first, before it read the cancel, is the SDK's race.
      const late = lateAfterAbort(parseSse(tee.text()).map((j) => j.json).filter(Boolean), 200);
      assert.deepEqual(unexcused(errors, late), [], `errors ${errors}; wire:\n${tee.text()}`);
    } finally {
      if (!closed) await client.close().catch(() => {});
    }
  });
});
