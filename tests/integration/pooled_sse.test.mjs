// SPDX-License-Identifier: MIT
// The 2024-11-05 HTTP+SSE transport on a pooled server (session_mode = pooled): `GET PATH/sse`
// opens a session that owns no process; its one SSE stream carries the endpoint event and then
// everything that is the session's own (answers, progress, the child's questions, log lines it
// asked for); `POST PATH/messages?sessionId=` hands it one message (202), a call on the pool's
// child. Seen from outside: the gateway's children (/proc), what the example child received (its
// --log file), and what each session's stream carries.
//   - several sessions on one child (pool_max_children = 1), the same JSON-RPC ids interleaved:
//     each gets only its own answers, progress and questions; no child per session;
//   - version negotiation on this transport; the client's cancel and the child's, both ways;
//   - request_timeout_ms and shutdown end a call with an error on the stream, cancelled at the
//     child;
//   - a dropped SSE connection cancels every call of its session at the child ("client
//     disconnected"), a queued one leaves the queue, the session is gone (404), the shared child
//     and other sessions stay;
//   - sessions of one transport cannot be reached through the other (404);
//   - a hostile client: bad ids, another principal's id, floods past max_sessions,
//     max_sessions_per_principal and max_inflight_per_session;
//   - the SDK v1 SSEClientTransport (a real 2024-11-05 client) in front of server-everything.
// Nothing sleeps to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { everythingServer, del, get, initSession, post, request, rpc, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const POOLED = 'session_mode = pooled\npool_max_children = 1';
const ADMIN = 'pooled-sse-admin-token-0123456789abcdef';
const pooled = (extra = '', args) => ({ servers: [{ name: 'example', path: '/mcp', args, extra: `${POOLED}\n${extra}` }], gateway: { admin_token: ADMIN } });
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
const childCancelOf = (gw, childId) => childCancels(gw).find((m) => m.params?.requestId === childId);

async function admin(gw) {
  const r = await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${ADMIN}` } });
  assert.equal(r.status, 200);
  return r.json();
}

async function metric(gw, name, labels) {
  const text = await (await fetch(`${gw.base}/metrics`, { headers: { Authorization: `Bearer ${ADMIN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/**
 * GET PATH/sse; asserts the stream opens with the endpoint event (a reference relative to
 * PATH/sse) and returns {s, sid, endpoint, messages(), waitMsg(pred)}.
 */
async function openSse(gw, { prefix = '/mcp', headers = {} } = {}) {
  const sseUrl = `${gw.base}${prefix}/sse`;
  const s = await request(sseUrl, { method: 'GET', headers: { Accept: 'text/event-stream', ...headers } });
  if (s.status !== 200) throw new Error(`GET ${prefix}/sse: HTTP ${s.status} ${await s.done()}`);
  assert.match(s.headers['content-type'] || '', /^text\/event-stream\b/);
  const first = await waitFor(() => s.completeEvents()[0], scaled(5000), 'the endpoint event');
  assert.equal(first.event, 'endpoint', s.text());
  assert.match(first.data, /^messages\?sessionId=[A-Za-z0-9_.-]{22,}$/, 'a random id, relative to PATH/sse');
  const endpoint = new URL(first.data, sseUrl);
  assert.equal(endpoint.pathname, `${prefix}/messages`);
  const conn = {
    s,
    sid: endpoint.searchParams.get('sessionId'),
    endpoint: endpoint.href,
    messages: () => s.completeEvents().filter((e) => e.event === 'message').map((e) => e.json),
    waitMsg: (pred, ms = scaled(5000), what = 'a message on the SSE stream') => waitFor(() => conn.messages().find((j) => j && pred(j)), ms, what),
  };
  return conn;
}

/** POSTs one message (object or raw string) to the session's message endpoint; awaits the body. */
async function send(conn, msg, { headers = {}, url } = {}) {
  const r = await request(url || conn.endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: msg });
  await r.done(scaled(10000));
  return r;
}

async function send202(conn, msg, opts) {
  const r = await send(conn, msg, opts);
  assert.equal(r.status, 202, `POST ${typeof msg === 'string' ? msg : JSON.stringify(msg)}: HTTP ${r.status} ${r.text()}`);
  assert.equal(r.text(), 'Accepted');
  return r;
}

async function sseInit(conn, { version = '2024-11-05', id = 'init-1', capabilities = {}, headers } = {}) {
  await send202(conn, rpc('initialize', { protocolVersion: version, capabilities, clientInfo: { name: 'pooled-sse-it', version: '1' } }, id), { headers });
  const ans = await conn.waitMsg((j) => j.id === id && isAnswer(j), scaled(10000), 'the initialize answer');
  assert.ok(ans.result, `initialize answered: ${JSON.stringify(ans)}`);
  await send202(conn, { jsonrpc: '2.0', method: 'notifications/initialized' }, { headers });
  return ans.result;
}

async function sseCall(conn, id, name, args = {}, meta) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  await send202(conn, rpc('tools/call', params, id));
  return conn.waitMsg((j) => j.id === id && isAnswer(j), scaled(10000), `the answer to ${JSON.stringify(id)}`);
}

/** Resolves with the child-facing id once the child has read the tools/call tagged tag. */
const childIdOf = async (gw, tag) => (await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), scaled(5000), `the child to read ${tag}`)).id;

/** Awaits a refusal's whole body: its status and a JSON-RPC error. */
async function assertRefused(r, status, code = -32600) {
  const text = await r.done(scaled(10000));
  assert.equal(r.status, status, `HTTP status (body: ${text})`);
  const body = JSON.parse(text);
  assert.equal(body.error?.code, code, text);
  return body;
}

test('GET /mcp/sse on a pooled server opens a session with no process: several on one child, the same ids, each gets only its own answers', async () => {
  await withGateway(pooled(), async (gw) => {
    const conns = [];
    for (let i = 0; i < 4; i++) conns.push(await openSse(gw));
    assert.equal(new Set(conns.map((c) => c.sid)).size, 4, 'distinct ids');
    assert.equal(kids(gw.proc.pid).length, 0, 'no process for a session');
    for (const [i, c] of conns.entries()) await sseInit(c, { version: i % 2 ? '2025-06-18' : '2024-11-05', id: `init-${i}` });
    assert.equal(kids(gw.proc.pid).length, 1, 'one pool child for four sessions');
    assert.equal(gw.childMessages().filter((m) => m.method === 'initialize').length, 1, 'only the pool\'s own initialize reached the child');
    const calls = [];
    for (let k = 0; k < 10; k++)
      for (const [i, c] of conns.entries())
        calls.push(send202(c, rpc('tools/call', { name: 'echo', arguments: { text: `s${i}-${k}` } }, k)));
    await Promise.all(calls);
    for (const [i, c] of conns.entries()) {
      await waitFor(() => c.messages().filter(isAnswer).length === 11, scaled(10000), `session ${i}'s ten answers`);
      const answers = c.messages().filter((j) => isAnswer(j) && typeof j.id === 'number');
      assert.deepEqual(answers.map((j) => j.id).sort((x, y) => x - y), [...Array(10).keys()]);
      for (const j of answers) assert.equal(textOf(j), `s${i}-${j.id}`, `session ${i} gets its own answer to id ${j.id}`);
      assert.equal(c.s.ended, false, 'an answer does not end the session\'s stream');
    }
    // The admin view and the metrics count them as pooled sessions, with the pool's one child.
    const view = await admin(gw);
    assert.equal(view.pools.find((p) => p.server === 'example' && !p.retired).pooled_sessions, 4);
    assert.equal(view.pooled_sessions.length, 4);
    assert.ok(view.pooled_sessions.every((x) => x.mode === 'pooled' && x.get_stream === true && /^sse:[0-9a-f]{16}$/.test(x.label)), JSON.stringify(view.pooled_sessions));
    assert.equal(await metric(gw, 'mcpgw_sessions', ['server="example"', 'mode="pooled"']), 4);
    assert.ok(conns.every((c) => !gw.logs().includes(c.sid)), 'logs name a pooled session by its label, never by its id');
    assert.equal(kids(gw.proc.pid).length, 1);
    for (const c of conns) c.s.drop();
    await waitFor(async () => (await admin(gw)).pooled_sessions.length === 0, scaled(5000), 'every record gone with its connection');
    assert.equal(kids(gw.proc.pid).length, 1, 'the pool child stays');
  });
});

test('negotiation on the pooled 2024-11-05 transport: the client\'s version when the child speaks it or a later one, else the child\'s', async () => {
  await withGateway(pooled(), async (gw) => {
    for (const [asked, want] of [['2024-11-05', '2024-11-05'], ['2025-03-26', '2025-03-26'], ['2025-11-25', '2025-11-25'], ['2099-01-01', '2025-11-25']]) {
      const c = await openSse(gw);
      const r = await sseInit(c, { version: asked, id: `i-${asked}` });
      assert.equal(r.protocolVersion, want, `asked ${asked}`);
      assert.equal(r.serverInfo.name, 'mcp-example-server', 'serverInfo as the child gave it');
      assert.ok(r.capabilities.tools, 'capabilities as the child gave them');
      assert.equal(textOf(await sseCall(c, `e-${asked}`, 'echo', { text: asked })), asked);
      c.s.drop();
    }
    assert.equal(kids(gw.proc.pid).length, 1);
  });
  await withGateway(pooled('', ['--protocol-version', '2024-11-05']), async (gw) => {
    const c = await openSse(gw);
    assert.equal((await sseInit(c, { version: '2025-06-18' })).protocolVersion, '2024-11-05', 'a child that speaks only 2024-11-05: its version');
    c.s.drop();
  });
});

test('a pooled 2024-11-05 session in front of children that speak only the stateless revision: the version it asked, its own answers', async () => {
  const STATELESS_JS = path.join(process.env.GW_SOURCE_ROOT, 'tests/fixtures/stateless_server.mjs');
  await withGateway({ servers: [{ name: 'example', path: '/mcp', command: `${process.execPath} ${STATELESS_JS}`, extra: POOLED }], gateway: { admin_token: ADMIN } }, async (gw) => {
    const a = await openSse(gw);
    const b = await openSse(gw);
    assert.equal((await sseInit(a, { version: '2024-11-05' })).protocolVersion, '2024-11-05', 'the transport\'s own revision');
    assert.equal((await sseInit(b, { version: '2025-03-26' })).protocolVersion, '2025-03-26');
    await send202(a, rpc('tools/call', { name: 'echo', arguments: { text: 'from a' } }, 7));
    await send202(b, rpc('tools/call', { name: 'echo', arguments: { text: 'from b' } }, 7));
    assert.equal(textOf(await a.waitMsg((j) => j.id === 7 && isAnswer(j))), 'from a');
    assert.equal(textOf(await b.waitMsg((j) => j.id === 7 && isAnswer(j))), 'from b');
    assert.equal(kids(gw.proc.pid).length, 1, 'one child for both');
  });
});

test('progress, log lines and the child\'s questions reach only the session whose call they are; its answer goes back to the child', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await openSse(gw);
    const b = await openSse(gw);
    await sseInit(a, { capabilities: { sampling: {}, roots: {} } });
    await sseInit(b, { capabilities: { sampling: {}, roots: {} } });
    // Progress with the client's own token, on a's stream alone.
    const slow = await sseCall(a, 'slow-a', 'slow', { steps: 3, interval_ms: 10 }, { progressToken: 'pt-a' });
    assert.equal(textOf(slow), 'done after 3 steps');
    const progress = a.messages().filter((j) => j.method === 'notifications/progress');
    assert.deepEqual(progress.map((j) => [j.params.progressToken, j.params.progress]), [['pt-a', 1], ['pt-a', 2], ['pt-a', 3]]);
    // logging/setLevel is the session's own: b asked for debug, a for error.
    await send202(b, rpc('logging/setLevel', { level: 'debug' }, 'lvl'));
    assert.deepEqual((await b.waitMsg((j) => j.id === 'lvl' && isAnswer(j))).result, {});
    await send202(a, rpc('logging/setLevel', { level: 'error' }, 'lvl-a'));
    assert.deepEqual((await a.waitMsg((j) => j.id === 'lvl-a' && isAnswer(j))).result, {});
    assert.equal(textOf(await sseCall(b, 'n-b', 'notify', { level: 'warning', text: 'for b' })), 'ok');
    assert.ok(b.messages().some((j) => j.method === 'notifications/message' && j.params.data === 'for b'), 'b gets the log line of its call');
    assert.equal(textOf(await sseCall(a, 'n-a', 'notify', { level: 'warning', text: 'for a' })), 'ok');
    assert.equal(textOf(await sseCall(a, 'n-a2', 'notify', { level: 'error', text: 'for a at error' })), 'ok');
    assert.ok(a.messages().some((j) => j.method === 'notifications/message' && j.params.data === 'for a at error'), 'a gets its line at its level');
    // A question of the child's goes to a, under an id the gateway minted; a's answer reaches the tool.
    await send202(a, rpc('tools/call', { name: 'sample', arguments: { prompt: 'to a' } }, 'q-a'));
    const ask = await a.waitMsg((j) => j.method === 'sampling/createMessage', scaled(5000), 'the question on a\'s stream');
    assert.match(String(ask.id), /^mcpgw-ask-\d+$/);
    // The same answer from b names no question of b's: nothing reaches the child.
    await send202(b, { jsonrpc: '2.0', id: ask.id, result: { role: 'assistant', content: { type: 'text', text: 'from b' }, model: 'm' } });
    await send202(a, { jsonrpc: '2.0', id: ask.id, result: { role: 'assistant', content: { type: 'text', text: 'from a' }, model: 'm' } });
    const qa = await a.waitMsg((j) => j.id === 'q-a' && isAnswer(j));
    assert.equal(textOf(qa), 'from a');
    assert.ok(!gw.childMessages().some((m) => m.result?.content?.text === 'from b'), 'b\'s stray answer never reached the child');
    // The child's cancel of its own question reaches the client, under the id the client saw.
    await send202(b, rpc('tools/call', { name: 'child_cancel', arguments: { delay_ms: 50 } }, 'cc-b'));
    const bask = await b.waitMsg((j) => j.method === 'sampling/createMessage');
    const bc = await b.waitMsg((j) => j.method === 'notifications/cancelled');
    assert.equal(bc.params.requestId, bask.id);
    await b.waitMsg((j) => j.id === 'cc-b' && isAnswer(j));
    // Nothing of one session's on the other's stream.
    const own = (c, ids, token) => c.messages().every((j) => (isAnswer(j) ? ids.includes(j.id) : j.method === 'notifications/progress' ? j.params.progressToken === token : true));
    assert.ok(own(a, ['init-1', 'slow-a', 'lvl-a', 'n-a', 'n-a2', 'q-a'], 'pt-a'), JSON.stringify(a.messages()));
    assert.ok(own(b, ['init-1', 'lvl', 'n-b', 'cc-b'], null), JSON.stringify(b.messages()));
    assert.deepEqual(a.messages().filter((j) => j.method === 'notifications/message').map((j) => j.params.data), ['for a at error'], 'a: its own line at its level alone');
    assert.deepEqual(b.messages().filter((j) => j.method === 'notifications/message').map((j) => j.params.data), ['for b'], 'b: its own line alone');
    assert.ok(!b.messages().some((j) => j.method === 'sampling/createMessage' && /to a/.test(JSON.stringify(j.params))), 'a\'s question is not on b\'s stream');
    assert.ok(!a.messages().some((j) => j.method === 'notifications/cancelled'));
    assert.equal(kids(gw.proc.pid).length, 1);
    a.s.drop();
    b.s.drop();
  });
});

test('cancel both ways: the client\'s by its own id reaches the child under the child\'s id; the stream stays open', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await openSse(gw);
    const b = await openSse(gw);
    await sseInit(a);
    await sseInit(b);
    // The same id in both sessions, both in flight on the one child.
    await send202(a, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'a7' } }, 7));
    await send202(b, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'b7' } }, 7));
    const ida = await childIdOf(gw, 'a7');
    const idb = await childIdOf(gw, 'b7');
    await send202(a, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'changed my mind' } });
    const cn = await waitFor(() => childCancelOf(gw, ida), scaled(5000), 'the cancel at the child');
    assert.deepEqual(cn.params, { requestId: ida, reason: 'changed my mind' });
    assert.equal(childCancelOf(gw, idb), undefined, 'b\'s call with the same id is untouched');
    assert.equal(textOf(await sseCall(a, 'after', 'echo', { text: 'after cancel' })), 'after cancel');
    assert.ok(!a.messages().some((j) => j.id === 7), 'no answer to the cancelled call');
    assert.equal(a.s.ended, false);
    await send202(b, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } });
    await waitFor(() => childCancelOf(gw, idb), scaled(5000), 'b\'s cancel at the child');
    a.s.drop();
    b.s.drop();
  });
});

test('a dropped SSE connection cancels every call of its session at the child ("client disconnected"); the session is gone, the child and the other session stay', async () => {
  await withGateway(pooled('pool_child_max_inflight = 8'), async (gw) => {
    const a = await openSse(gw);
    const b = await openSse(gw);
    await sseInit(a);
    await sseInit(b);
    await send202(a, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'd1' } }, 'd1'));
    await send202(a, rpc('tools/call', { name: 'slow', arguments: { steps: 400, interval_ms: 50, tag: 'd2' } }, 2));
    await send202(b, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'keep' } }, 'keep'));
    const id1 = await childIdOf(gw, 'd1');
    const id2 = await childIdOf(gw, 'd2');
    const idk = await childIdOf(gw, 'keep');
    assert.equal(childCancels(gw).length, 0);
    assert.equal((await admin(gw)).pooled_sessions.find((x) => x.calls === 2)?.get_stream, true);
    a.s.drop();
    await waitFor(() => childCancelOf(gw, id1) && childCancelOf(gw, id2), scaled(5000), 'both calls cancelled at the child');
    for (const id of [id1, id2]) assert.deepEqual(childCancelOf(gw, id).params, { requestId: id, reason: 'client disconnected' });
    assert.equal(childCancelOf(gw, idk), undefined, 'the other session\'s call is untouched');
    await gw.waitLog(/session=sse:[0-9a-f]{16} pooled session ended: client disconnected/);
    await assertRefused(await send(a, rpc('tools/call', { name: 'echo', arguments: { text: 'late' } }, 'late')), 404);
    await assertRefused(await send(a, { jsonrpc: '2.0', method: 'notifications/initialized' }), 404);
    assert.equal((await admin(gw)).pooled_sessions.length, 1, 'the dropped session\'s record is gone');
    assert.equal(await metric(gw, 'mcpgw_cancels_total', ['server="example"', 'direction="to_child"', 'reason="client_disconnected"']), 2);
    assert.equal(kids(gw.proc.pid).length, 1, 'the shared child stays');
    assert.equal(b.s.ended, false);
    await send202(b, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'keep' } });
    assert.equal(textOf(await sseCall(b, 'b-after', 'echo', { text: 'b still served' })), 'b still served');
    // A drop while the initialize waits for no child: nothing reaches a child.
    const c = await openSse(gw);
    c.s.drop();
    await waitFor(async () => (await admin(gw)).pooled_sessions.length === 1, scaled(5000), 'the unused session gone with its connection');
    b.s.drop();
  });
});

test('request_timeout_ms: the client gets an error on the stream, the child the cancel; the stream stays open', async () => {
  await withGateway(pooled('request_timeout_ms = 400'), async (gw) => {
    const a = await openSse(gw);
    await sseInit(a);
    await send202(a, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'late' } }, 'late'));
    const id = await childIdOf(gw, 'late');
    assert.equal((await admin(gw)).pooled_sessions[0]?.calls, 1, 'a pooled session\'s call, in flight on the pool\'s child');
    const err = await a.waitMsg((j) => j.id === 'late' && isAnswer(j), scaled(5000), 'the timeout\'s error');
    assert.match(err.error?.message ?? '', /timed out/, JSON.stringify(err));
    await waitFor(() => childCancelOf(gw, id), scaled(5000), 'the cancel at the child');
    assert.equal(childCancelOf(gw, id).params.reason, 'request timed out');
    assert.equal(textOf(await sseCall(a, 'next', 'echo', { text: 'next' })), 'next');
    assert.equal(a.s.ended, false);
    a.s.drop();
  });
});

// A call queues in the pool while no child has room for it and one is starting: two children at
// most, one call each; the first child runs a cancel_self call, the second holds its initialize
// (--hold-init) until SIGUSR1, so the second call waits in the queue for as long as the test wants.
const QUEUEING = {
  servers: [{ name: 'example', path: '/mcp', args: ['--hold-init'], extra: 'session_mode = pooled\npool_max_children = 2\npool_child_max_inflight = 1' }],
  gateway: { admin_token: ADMIN },
};
const holdingNow = (gw) => gw.logs().match(/child stderr: mcp-example-server: holding the initialize answer until SIGUSR1/g)?.length ?? 0;

test('a dropped connection with a call in flight and one still queued: the first is cancelled at its child, the second leaves the queue and never reaches one', async () => {
  await withGateway(QUEUEING, async (gw) => {
    const a = await openSse(gw);
    await send202(a, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'q', version: '1' } }, 'init'));
    // SIGUSR1 only once the child holds its initialize: before its handler is set, it would end it.
    await waitFor(() => holdingNow(gw) === 1, scaled(5000), 'the first child to hold its initialize');
    const [first] = kids(gw.proc.pid);
    process.kill(first, 'SIGUSR1');
    await a.waitMsg((j) => j.id === 'init' && isAnswer(j), scaled(5000), 'the initialize answer');
    await send202(a, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'busy' } }, 1));
    const busy = await childIdOf(gw, 'busy');
    await send202(a, rpc('tools/call', { name: 'echo', arguments: { text: 'queued-call' } }, 2));
    await waitFor(async () => (await admin(gw)).pools.find((p) => p.server === 'example')?.queued === 1, scaled(5000), 'the call to queue');
    await waitFor(() => holdingNow(gw) === 2, scaled(5000), 'the second child to hold its initialize');
    const second = kids(gw.proc.pid).find((pid) => pid !== first);
    a.s.drop();
    await waitFor(() => childCancelOf(gw, busy), scaled(5000), 'the call in flight cancelled at its child');
    assert.equal(childCancelOf(gw, busy).params.reason, 'client disconnected');
    await waitFor(async () => (await admin(gw)).pools.find((p) => p.server === 'example')?.queued === 0, scaled(5000), 'the queue emptied');
    process.kill(second, 'SIGUSR1'); // the second child is ready: nothing waits for it
    const b = await openSse(gw);
    await sseInit(b);
    await send202(b, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'hold-first' } }, 'h'));
    await childIdOf(gw, 'hold-first');
    assert.equal(textOf(await sseCall(b, 'after', 'echo', { text: 'after' })), 'after');
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.text === 'after'), scaled(5000), 'the child to log the later call');
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.text === 'queued-call'), 'the queued call never reached a child');
    assert.equal(await metric(gw, 'mcpgw_cancels_total', ['server="example"', 'direction="to_child"', 'reason="client_disconnected"']), 2, 'the busy call and the queued one');
    b.s.drop();
  });
});

test('an open connection keeps its session past session_idle_timeout_s: the idle sweep ends only records nobody reads', async () => {
  await withGateway({ ...pooled(), gateway: { admin_token: ADMIN, session_idle_timeout_s: 1, heartbeat_s: 1 } }, async (gw) => {
    const conn = await openSse(gw);
    await sseInit(conn);
    // Three heartbeats a second apart: the once-a-second sweep has seen the session idle for
    // more than session_idle_timeout_s (no call since its initialize).
    await waitFor(() => (conn.s.text().match(/: keep-alive/g) || []).length >= 3, scaled(10000), 'three heartbeats');
    assert.doesNotMatch(gw.logs(), /pooled session ended/, 'not ended while its connection is open');
    await send202(conn, rpc('ping', {}, 'p-1'));
    assert.ok(isAnswer(await conn.waitMsg((j) => j.id === 'p-1')), 'the session still answers');
    conn.s.drop();
    await gw.waitLog(/pooled session ended: client disconnected/, scaled(5000));
  });
});

test('gateway shutdown with a call in flight: the child reads "gateway shutting down", the client an error on the stream, which ends; exit 0', async () => {
  const gw = await startGateway(pooled());
  let ok = false;
  try {
    const c = await openSse(gw);
    await sseInit(c);
    await send202(c, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'sd' } }, 'sd'));
    const id = await childIdOf(gw, 'sd');
    await gw.stop('SIGTERM');
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: id, reason: 'gateway shutting down' }]);
    await c.s.done(scaled(5000));
    const err = c.messages().find((j) => j?.id === 'sd' && isAnswer(j));
    assert.equal(err?.error?.code, -32603, c.s.text());
    assert.match(gw.logs(), /session=sse:[0-9a-f]{16} pooled session ended: gateway shutting down/);
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`); }
  }
});

test('sessions of one transport cannot be reached through the other: 404 both ways, nothing reaches the child', async () => {
  await withGateway(pooled(), async (gw) => {
    const s = await initSession(gw); // a Streamable HTTP pooled session (sealed id)
    assert.match(s.sid, /^~1/);
    const c = await openSse(gw);
    await sseInit(c);
    const echo = (tag) => rpc('tools/call', { name: 'echo', arguments: { text: tag, tag } }, tag);
    await assertRefused(await send(c, echo('cross-1'), { url: `${gw.base}/mcp/messages?sessionId=${encodeURIComponent(s.sid)}` }), 404);
    await assertRefused(await post(gw, echo('cross-2'), { sid: c.sid }), 404);
    await assertRefused(await get(gw, { sid: c.sid }), 404);
    await assertRefused(await del(gw, { sid: c.sid }), 404);
    assert.ok(!gw.childMessages().some((m) => /^cross-/.test(m.params?.arguments?.tag ?? '')), 'nothing crossed to the child');
    assert.equal(textOf(await sseCall(c, 'ok', 'echo', { text: 'sse ok' })), 'sse ok');
    const r = await post(gw, echo('streamable-ok'), { sid: s.sid });
    await r.done(scaled(5000));
    assert.equal(textOf(r.events().map((e) => e.json).find(isAnswer)), 'streamable-ok');
    assert.equal(c.s.ended, false);
    // Both are the pool's: its one child serves them, the admin view lists both as pooled.
    assert.equal(kids(gw.proc.pid).length, 1, 'one child for both sessions');
    assert.deepEqual((await admin(gw)).pooled_sessions.map((x) => x.label.replace(/:.*/, '')).sort(), ['sealed', 'sse']);
    c.s.drop();
  });
});

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
const bearer = (who) => ({ Authorization: `Bearer ${TOKENS[who]}` });
function tokensFile(dir) {
  const f = path.join(dir, 'tokens');
  const lines = Object.entries(TOKENS).map(([name, t]) => `sha256:${crypto.createHash('sha256').update(t).digest('hex')} ${name}`);
  fs.writeFileSync(f, `${lines.join('\n')}\n`, { mode: 0o600 });
  return f;
}

test('a hostile client: bad and foreign session ids are 404; floods past max_sessions, max_sessions_per_principal and max_inflight_per_session are refused', async () => {
  const dir = tmpdir();
  const servers = [
    { name: 'example', path: '/mcp', extra: POOLED },
    { name: 'other', path: '/other', log: path.join(dir, 'other.log'), extra: POOLED },
  ];
  await withGateway({ servers, gateway: { admin_token: ADMIN, max_sessions: 5, max_inflight_per_session: 2 }, auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile(dir), max_sessions_per_principal: 3 } }, async (gw) => {
    const a = await openSse(gw, { headers: bearer('alice') });
    await sseInit(a, { headers: bearer('alice') });
    const base = `${gw.base}/mcp/messages`;
    const ping = rpc('ping', undefined, 'refused');
    const as = (who, url) => ({ headers: bearer(who), url });
    // Without a token: 401. Unknown, cut, extended, too long: 404.
    assert.equal((await send(a, ping)).status, 401);
    for (const sid of ['nope', a.sid.slice(0, -1), `${a.sid}x`, 'A'.repeat(400), `~1${'A'.repeat(200)}`])
      await assertRefused(await send(a, ping, as('alice', `${base}?sessionId=${encodeURIComponent(sid)}`)), 404);
    await assertRefused(await send(a, ping, as('alice', base)), 400);
    // Another principal's session id, and the session's id on another server's endpoint: 404.
    await assertRefused(await send(a, rpc('tools/call', { name: 'echo', arguments: { text: 'x', tag: 'bob' } }, 'bob'), as('bob')), 404);
    await assertRefused(await send(a, ping, as('alice', `${gw.base}/other/messages?sessionId=${encodeURIComponent(a.sid)}`)), 404);
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.tag === 'bob'), 'nothing of bob\'s reached the child');
    // Before initialize (only ping), a second initialize, a batch: 400.
    const fresh = await openSse(gw, { headers: bearer('alice') });
    await assertRefused(await send(fresh, rpc('tools/list', {}, 'early'), { headers: bearer('alice') }), 400);
    await send202(fresh, rpc('ping', undefined, 'early-ping'), { headers: bearer('alice') });
    assert.deepEqual((await fresh.waitMsg((j) => j.id === 'early-ping')).result, {});
    await sseInit(fresh, { headers: bearer('alice') });
    await assertRefused(await send(fresh, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 'again'), { headers: bearer('alice') }), 400);
    await assertRefused(await send(fresh, [rpc('ping', undefined, 'b1')], { headers: bearer('alice') }), 400);
    // max_inflight_per_session (2): the third call in flight is 429 and never reaches the child.
    for (const tag of ['f1', 'f2']) await send202(fresh, rpc('tools/call', { name: 'cancel_self', arguments: { tag } }, tag), { headers: bearer('alice') });
    await childIdOf(gw, 'f2');
    await assertRefused(await send(fresh, rpc('tools/call', { name: 'echo', arguments: { text: 'f3', tag: 'f3' } }, 'f3'), { headers: bearer('alice') }), 429, -32603);
    assert.ok(!gw.childMessages().some((m) => m.params?.arguments?.tag === 'f3'));
    // max_sessions_per_principal (3): alice's fourth session is 429; bob may still open one.
    const third = await openSse(gw, { headers: bearer('alice') });
    const over = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream', ...bearer('alice') } });
    await assertRefused(over, 429, -32603);
    // max_sessions (5, both modes together): bob's second session fills it, his third is 503.
    const bob1 = await openSse(gw, { headers: bearer('bob') });
    const bob2 = await openSse(gw, { headers: bearer('bob') });
    const full = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream', ...bearer('bob') } });
    await assertRefused(full, 503, -32603);
    assert.equal(kids(gw.proc.pid).length, 1, 'five sessions, one child');
    // A flood of opened and dropped sessions gives everything back.
    for (const c of [third, bob1, bob2]) c.s.drop();
    for (let i = 0; i < 20; i++) (await openSse(gw, { headers: bearer('bob') })).s.drop();
    await waitFor(async () => (await admin(gw)).pooled_sessions.length === 2, scaled(5000), 'only alice\'s two sessions left');
    const again = await openSse(gw, { headers: bearer('bob') });
    assert.equal(kids(gw.proc.pid).length, 1);
    for (const c of [a, fresh, again]) c.s.drop();
    await waitFor(async () => (await admin(gw)).pooled_sessions.length === 0, scaled(5000), 'every record gone');
    assert.deepEqual(gw.logs().split('\n').filter((l) => l.includes(a.sid)), [], 'no log line holds a session id');
  });
});

test('the SDK v1 SSEClientTransport and server-everything through a pooled server: sessions share one child, each gets its own; an abort reaches the child; close ends the session', async () => {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
  const { CreateMessageRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  await withGateway({ servers: [everythingServer({ extra: POOLED })], gateway: { admin_token: ADMIN } }, async (gw) => {
    const clients = [];
    try {
      for (let i = 0; i < 3; i++) {
        const client = new Client({ name: `pooled-sse-${i}`, version: '1.0.0' }, { capabilities: { sampling: {} } });
        client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'm', role: 'assistant', content: { type: 'text', text: `sampled-${i}` } }));
        const transport = new SSEClientTransport(new URL(`${gw.base}/mcp/sse`));
        await client.connect(transport);
        assert.equal(client.getServerVersion().name, 'mcp-servers/everything');
        clients.push(client);
      }
      assert.equal(kids(gw.proc.pid).length, 1, 'one child for three sessions');
      const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
      // One call at a time, the sessions taking turns: server-everything asks roots/list now and
      // then, which leases the pool's one child to the call in flight (one at a time), and a
      // call that finds no room with no child to start is refused (429), not queued.
      for (let k = 0; k < 3; k++)
        for (const [i, client] of clients.entries())
          assert.equal(text(await client.callTool({ name: 'echo', arguments: { message: `${i}.${k}` } })), `Echo: ${i}.${k}`);
      const progress = [];
      const r = await clients[0].callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
      assert.match(text(r), /Long running operation completed/);
      assert.deepEqual(progress, [1, 2, 3].slice(0, progress.length));
      const sampled = await clients[1].callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'p', maxTokens: 5 } });
      assert.match(text(sampled), /sampled-1/, 'the question reached the session whose call asked it');
      const ac = new AbortController();
      const call = clients[2].callTool({ name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }, undefined, { signal: ac.signal, onprogress: () => ac.abort('stop') });
      await assert.rejects(call);
      await gw.waitLog(/client cancel forwarded: method=tools\/call child=pool:everything#\d+/, scaled(5000));
      assert.equal(text(await clients[2].callTool({ name: 'echo', arguments: { message: 'after abort' } })), 'Echo: after abort');
      // A call in flight when its client closes: cancelled at the child as the connection drops.
      const long = clients[0].callTool({ name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }).catch(() => 'closed');
      await waitFor(async () => (await admin(gw)).pooled_sessions.some((x) => x.calls === 1), scaled(5000), 'the long call in flight');
      await clients[0].close();
      assert.equal(await long, 'closed');
      await gw.waitLog(/pooled session ended: client disconnected/, scaled(5000));
      await waitFor(async () => (await metric(gw, 'mcpgw_cancels_total', ['server="everything"', 'direction="to_child"', 'reason="client_disconnected"'])) === 1, scaled(5000), 'the cancel counted');
    } finally {
      for (const client of clients) await client.close().catch(() => {});
    }
    await waitFor(async () => (await admin(gw)).pooled_sessions.length === 0, scaled(5000), 'every session gone with its connection');
    assert.equal(kids(gw.proc.pid).length, 1, 'the pool child stays');
  });
});
