// SPDX-License-Identifier: MIT
// JSON-RPC batches in pooled sessions (session_mode = pooled, 2025-03-26): every element checked
// first (a bad one refuses the whole batch, 400, nothing reaches a child); each request then a
// call of its own, on whichever child the pool picks, its answer an event of the batch's one SSE
// stream under its own id, the stream ending after the last; an element that cannot be served
// (an id twice in the batch, no room at the pool) gets its own error event; a batch of notifications alone gets 202;
// the client's cancel of one element ends it alone; closing the stream cancels every call of the
// batch at its child (one still queued leaves the queue); DELETE ends its open calls with an
// error on its stream. Seen from outside: the client's answers, what the children read (--log).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { initSession, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2025-03-26';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const call = (id, name, args) => rpc('tools/call', { name, arguments: args }, id);
const pooled = (extra = 'pool_max_children = 1') => ({ servers: [{ name: 'example', path: '/mcp', extra: `session_mode = pooled\n${extra}` }] });
const answers = (r) => r.events().map((e) => e.json).filter(isAnswer);
const childCalls = (gw) => gw.childMessages().filter((m) => m.method === 'tools/call');

async function session(gw, version = V) {
  const s = await initSession(gw, { version });
  assert.match(s.sid, /^~1/, 'a pooled session');
  assert.equal(s.version, version);
  return s;
}

test('a batch of requests and a notification: one stream, an answer per request under its own id, from two children', async () => {
  await withGateway(pooled('pool_max_children = 2\npool_child_max_inflight = 1'), async (gw) => {
    const s = await session(gw);
    const r = await post(gw, [
      call('a', 'echo', { text: 'one', delay_ms: 300 }),
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      call(7, 'echo', { text: 'two' }),
      call('7', 'echo', { text: 'three' }),
      rpc('ping', {}, 'p'),
    ], { sid: s.sid });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/event-stream/);
    await r.done(scaled(10000));
    // "a" takes the first child (one call at a time), 7 waits for a second to start, and "7"
    // finds no room (the pool's queue holds one call a starting child will take): its own error.
    const byId = Object.fromEntries(answers(r).map((j) => [JSON.stringify(j.id), j.result?.content ? textOf(j) : j.result ?? j.error.code]));
    assert.deepEqual(byId, { '"a"': 'one', 7: 'two', '"7"': -32603, '"p"': {} }, r.text());
    assert.match(answers(r).find((j) => j.id === '7').error.message, /pool_child_max_inflight/);
    assert.equal(answers(r).length, 4, 'one answer each, and the stream ended after the last');
    assert.deepEqual(childCalls(gw).map((m) => m.params.arguments.text).sort(), ['one', 'two'], 'each request its own call');
    assert.equal(gw.childMessages().filter((m) => m.method === 'initialize').length, 2, 'two children served the batch');
    assert.ok(!gw.childMessages().some((m) => m.method === 'notifications/roots/list_changed'), 'a session\'s notification is no child\'s');
  });
});

test('a bad element refuses the whole batch; an id twice gets its own error; notifications alone get 202; later revisions get 400', async () => {
  await withGateway(pooled(), async (gw) => {
    const s = await session(gw);
    for (const [batch, re] of [
      [[call('ok', 'echo', { text: 'x' }), { jsonrpc: '2.0', id: 3 }], /batch element 1/],
      [[call('ok', 'echo', { text: 'x' }), rpc('initialize', { protocolVersion: V, capabilities: {}, clientInfo: { name: 'x', version: '1' } })], /initialize must not be part of a batch/],
      [[], /empty batch/],
    ]) {
      const r = await post(gw, batch, { sid: s.sid });
      await r.done();
      assert.equal(r.status, 400, JSON.stringify(batch));
      assert.match(r.text(), re);
    }
    assert.equal(childCalls(gw).length, 0, 'nothing of a refused batch reached a child');
    const d = await post(gw, [call('d', 'echo', { text: 'first' }), call('d', 'echo', { text: 'second' })], { sid: s.sid });
    assert.equal(d.status, 200);
    await d.done(scaled(5000));
    const got = answers(d);
    assert.equal(got.length, 2, d.text());
    assert.deepEqual(got.filter((j) => j.result).map(textOf), ['first']);
    assert.equal(got.find((j) => j.error)?.error.code, -32600);
    assert.deepEqual(childCalls(gw).map((m) => m.params.arguments.text), ['first'], 'the duplicate never reached a child');
    const n = await post(gw, [{ jsonrpc: '2.0', method: 'notifications/roots/list_changed' }], { sid: s.sid });
    await n.done();
    assert.equal(n.status, 202);
    assert.equal(n.text(), '');
    const later = await session(gw, '2025-06-18');
    const l = await post(gw, [call('x', 'echo', { text: 'x' })], { sid: later.sid });
    await l.done();
    assert.equal(l.status, 400);
    assert.match(l.text(), /2025-03-26/);
  });
});

test('a cancel of one element ends it alone; the stream ends after the last; a drop cancels every call of the batch at the child', async () => {
  await withGateway(pooled(), async (gw) => {
    const s = await session(gw);
    const r = await post(gw, [
      call('h1', 'cancel_self', { tag: 'h1' }),
      call('quick', 'echo', { text: 'q' }),
      call('h2', 'cancel_self', { tag: 'h2' }),
    ], { sid: s.sid });
    assert.equal(r.status, 200);
    await r.waitEvent((j) => j.id === 'quick', scaled(5000));
    const seen = async (tag) => waitFor(() => childCalls(gw).find((m) => m.params.arguments.tag === tag), scaled(5000), `${tag} at the child`);
    const h1 = await seen('h1');
    const h2 = await seen('h2');
    const cancel = async (id) => {
      const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'one of the batch' } }, { sid: s.sid });
      assert.equal(c.status, 202);
    };
    await cancel('h1');
    const cancels = () => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
    await waitFor(() => cancels().find((m) => m.params.requestId === h1.id), scaled(5000), 'h1\'s cancel at the child');
    assert.ok(!r.ended, 'h2 still open: the stream goes on');
    await cancel('h2');
    await r.done(scaled(5000));
    assert.deepEqual(answers(r).map((j) => j.id), ['quick'], 'the cancelled ones get no answer');
    assert.ok(cancels().find((m) => m.params.requestId === h2.id));
    // A second batch, dropped with two calls open: both cancelled at the child.
    const d = await post(gw, [call('d1', 'cancel_self', { tag: 'd1' }), call('d2', 'cancel_self', { tag: 'd2' })], { sid: s.sid });
    assert.equal(d.status, 200);
    const d1 = await seen('d1');
    const d2 = await seen('d2');
    d.drop();
    for (const m of [d1, d2]) {
      const c = await waitFor(() => cancels().find((x) => x.params.requestId === m.id), scaled(5000), 'a dropped batch call\'s cancel');
      assert.equal(c.params.reason, 'client disconnected');
    }
    await gw.waitLog(/client dropped a batch's stream: 2 requests cancelled/);
    const after = await post(gw, call('after', 'echo', { text: 'on' }), { sid: s.sid });
    await after.done(scaled(5000));
    assert.equal(textOf(answers(after)[0]), 'on', 'the session serves on');
  });
});

test('a batch with a call still queued: a drop takes it out of the queue; DELETE ends the batch\'s open calls with an error', async () => {
  // --hold-init: each child answers the gateway's initialize only at SIGUSR1, so the second child
  // stays starting and a call for it waits in the pool's queue for as long as the test wants.
  const opts = { servers: [{ name: 'example', path: '/mcp', args: ['--hold-init'], extra: 'session_mode = pooled\npool_max_children = 2\npool_child_max_inflight = 1' }] };
  await withGateway(opts, async (gw) => {
    const init = session(gw);
    const first = Number((await gw.waitLog(/pool child started: pid (\d+)/))[1]);
    // Its SIGUSR1 handler is in place once it holds the answer (a signal before would kill it).
    await gw.waitLog(/holding the initialize answer until SIGUSR1/, scaled(5000));
    process.kill(first, 'SIGUSR1');
    const s = await init;
    // q1 takes the first child; q2 waits in the queue for the second, which is held starting.
    const d = await post(gw, [call('q1', 'cancel_self', { tag: 'q1' }), call('q2', 'echo', { text: 'queued' })], { sid: s.sid });
    assert.equal(d.status, 200);
    const q1 = await waitFor(() => childCalls(gw).find((m) => m.params.arguments.tag === 'q1'), scaled(5000), 'q1 at the child');
    await gw.waitLog(/tools\/call waits for a child to start/);
    d.drop();
    await gw.waitLog(/client dropped a batch's stream: 2 requests cancelled/);
    await waitFor(() => gw.childMessages().find((m) => m.method === 'notifications/cancelled' && m.params.requestId === q1.id), scaled(5000), 'q1\'s cancel');
    // A next batch on the first child; DELETE ends its open call with an error on its stream.
    const b = await post(gw, [call('b1', 'cancel_self', { tag: 'b1' }), rpc('ping', {}, 'bp')], { sid: s.sid });
    assert.equal(b.status, 200);
    await b.waitEvent((j) => j.id === 'bp', scaled(5000));
    await waitFor(() => childCalls(gw).find((m) => m.params.arguments.tag === 'b1'), scaled(5000), 'b1 at the child');
    assert.ok(!childCalls(gw).some((m) => m.params.arguments.text === 'queued'), 'the dropped queued call never reached a child');
    const del = await fetch(gw.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': s.sid } });
    assert.equal(del.status, 200);
    await b.done(scaled(5000));
    const e = answers(b).find((j) => j.id === 'b1');
    assert.equal(e?.error?.code, -32603, b.text());
    assert.match(e.error.message, /session deleted/);
  });
});

test('a batch naming tasks (a 2025-11-25 feature): tasks/ methods are unknown there, a task-augmented request is an ordinary call', async () => {
  const opts = { servers: [{ name: 'example', path: '/mcp', args: ['--tasks'], extra: 'session_mode = pooled\npool_max_children = 1' }] };
  await withGateway(opts, async (gw) => {
    const s = await session(gw);
    const r = await post(gw, [
      rpc('tools/call', { name: 'echo', arguments: { text: 'as a task' }, task: { ttl: 60000 } }, 't1'),
      rpc('tasks/get', { taskId: 'task-1' }, 't2'),
      rpc('tasks/list', {}, 't3'),
    ], { sid: s.sid });
    assert.equal(r.status, 200);
    await r.done(scaled(10000));
    const byId = Object.fromEntries(answers(r).map((j) => [j.id, j]));
    assert.ok(isAnswer(byId.t1), r.text());
    assert.equal(byId.t2.error?.code, -32601, r.text());
    assert.equal(byId.t3.error?.code, -32601, r.text());
    // The session goes on: a call after it is answered.
    const after = await post(gw, call('n', 'echo', { text: 'after' }), { sid: s.sid });
    await after.done(scaled(5000));
    assert.equal(textOf(answers(after)[0]), 'after');
  });
});
