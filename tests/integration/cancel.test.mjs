// SPDX-License-Identifier: MIT
// Cancellation through the in-flight table: a client cancel reaches the child under the child's id
// and ends the call's stream; late answers are dropped; stray cancels are ignored; initialize is
// never cancelled; a dropped POST stream cancels exactly its own requests; DELETE, idle expiry and
// a crashing child each end in-flight calls correctly; no synthesized cancel is sent twice.
// The example server is stepped, not raced: a call that must still be running when the test acts
// is a cancel_self (it ends only by a cancel, or answers `released` on SIGUSR1), and
// --hold-init keeps initialize in flight until SIGUSR1. Deadlines scale for a slow run.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MATRIX_POOLED, callTool, del, get, initSession, pooledSkip, post, reaped, rpc, stdoutBlocked, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/** Starts a tools/call on its own POST stream; resolves once the child has read it. */
async function startCall(gw, sid, id, name, args) {
  const r = await post(gw, rpc('tools/call', { name, arguments: args }, id), { sid });
  assert.equal(r.status, 200, `${id}: ${r.status}`);
  const seen = await waitFor(
    () => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === args.tag && args.tag !== undefined),
    scaled(5000), `child to read ${id}`);
  return { r, childId: seen.id };
}

/** Posts a notifications/cancelled with the given params; returns the HTTP status. */
async function cancel(gw, sid, params) {
  const msg = { jsonrpc: '2.0', method: 'notifications/cancelled' };
  if (params !== undefined) msg.params = params;
  const r = await post(gw, msg, { sid });
  await r.done();
  return r.status;
}

const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');

/** Asserts the child read `marker` (sent after everything else): what came before is in its log. */
async function childCaughtUp(gw, sid, marker) {
  const { response } = await callTool(gw, sid, 'echo', { text: marker, tag: marker });
  assert.equal(textOf(response), marker);
  await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === marker), scaled(5000), 'child caught up');
}

/** The example server's "go": its cancel_self calls answer `released`, a held initialize goes. */
const go = (pid) => process.kill(pid, 'SIGUSR1');

/** Polls as fast as the event loop allows (for latency measurements); resolves with ms since t0. */
async function pollFast(t0, fn, ms, what) {
  for (;;) {
    if (fn()) return performance.now() - t0;
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** cancel_self arguments: a call that runs until it is cancelled (or released by go()). */
const HELD = (tag) => ({ tag });
/** Why a test of the child's own initialize does not apply to a pooled session. */
const GATEWAY_INIT = 'initialize is answered by the gateway from the pool\'s handshake, never in flight at a child';
const initMsg = (id) => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, id);

test('a client cancel is 202, reaches the child under the child\'s id with the reason, and ends the stream without a response', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const { r, childId } = await startCall(gw, s.sid, 'c-1', 'cancel_self', HELD('c-1'));
    assert.equal(typeof childId, 'number');
    assert.equal(await cancel(gw, s.sid, { requestId: 'c-1', reason: 'user abort' }), 202);
    const c = await waitFor(() => childCancels(gw)[0], scaled(5000), 'the cancel at the child');
    assert.deepEqual(c.params, { requestId: childId, reason: 'user abort' });
    await r.done(scaled(5000));
    assert.ok(!r.events().some((e) => isAnswer(e.json)), `no response on the cancelled call's stream: ${r.text()}`);
    await gw.waitLog(/child stderr: mcp-example-server: cancelled \d+ reason=user abort/);
    await childCaughtUp(gw, s.sid, 'after');
    assert.equal(childCancels(gw).length, 1, 'exactly one cancel');
  });
});

test('the child\'s late response to a cancelled call is dropped, not delivered', async (t) => {
  if (pooledSkip(t, 'back-pressure of one session\'s stream never blocks a shared child')) return;
  // Every example tool honours a cancel it reads in time, so the child is kept from reading it:
  // a flood whose reader pauses blocks the child on its stdout (back-pressure); the cancel waits
  // in its stdin while it finishes the flood and answers.
  const COUNT = 20000;
  await withGateway({ gateway: { stream_queue_bytes: 65536 } }, async (gw) => {
    const s = await initSession(gw);
    const { r, childId } = await startCall(gw, s.sid, 'late-1', 'flood', { count: COUNT, bytes: 2000, tag: 'late-1' });
    r.res.pause();
    const state = { stable: 0, last: null };
    await waitFor(() => stdoutBlocked(s.pid, state), scaled(20000), 'child blocked on its stdout');
    assert.equal(await cancel(gw, s.sid, { requestId: 'late-1', reason: 'user abort' }), 202);
    await gw.waitLog(/late answer for cancelled tools\/call dropped/, scaled(20000));
    // The child answered before it read the cancel: the answer really was late.
    await gw.waitLog(new RegExp(`ignoring cancel for unknown request ${childId}\\b`), scaled(5000));
    r.res.resume();
    await r.done(scaled(20000));
    const evs = r.events();
    assert.ok(evs.every((e) => e.json?.method === 'notifications/message'), 'nothing but notifications');
    assert.ok(!evs.some((e) => isAnswer(e.json)), 'the late response is not delivered');
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: childId, reason: 'user abort' }]);
    const again = await callTool(gw, s.sid, 'echo', { text: 'still fine' });
    assert.equal(textOf(again.response), 'still fine');
  });
});

test('cancels for unknown ids, finished requests and malformed cancels are 202 and never reach the child', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const done = await callTool(gw, s.sid, 'echo', { text: 'finished' }, { id: 'fin-1' });
    assert.equal(textOf(done.response), 'finished');
    const cases = [
      { requestId: 'no-such-id', reason: 'unknown' },
      { requestId: 999999, reason: 'unknown number' },
      { requestId: 'fin-1', reason: 'finished' },
      { requestId: 2, reason: 'the child-facing id of fin-1 is not a client id' },
      { reason: 'no requestId' },
      { requestId: null },
      {},
      undefined,
    ];
    for (const p of cases) assert.equal(await cancel(gw, s.sid, p), 202, JSON.stringify(p));
    await childCaughtUp(gw, s.sid, 'marker');
    assert.deepEqual(childCancels(gw), [], 'nothing forwarded');
  });
});

/** A server whose child holds its initialize answer until go(pid). */
const HELD_INIT = { servers: [{ name: 'held', path: '/mcp', args: ['--hold-init'] }] };
const holding = /child stderr: mcp-example-server: holding the initialize answer until SIGUSR1/;

test('initialize is never cancelled', async (t) => {
  if (pooledSkip(t, GATEWAY_INIT)) return;
  // --hold-init: the child has read initialize and holds its answer until SIGUSR1, so the cancel
  // surely arrives while initialize is in flight.
  await withGateway(HELD_INIT, async (gw) => {
    const init = await post(gw, initMsg('init-1'));
    assert.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'];
    assert.ok(sid, 'session id in the headers, before the result');
    await gw.waitLog(holding, scaled(5000));
    assert.equal(await cancel(gw, sid, { requestId: 'init-1', reason: 'impatient' }), 202);
    await gw.waitLog(/cancel of initialize ignored/, scaled(5000));
    assert.ok(!init.events().some((e) => isAnswer(e.json)), 'initialize was still in flight when cancelled');
    const [pid] = gw.childPids();
    go(pid);
    await init.done(scaled(10000));
    const res = init.events().map((e) => e.json).find(isAnswer);
    assert.ok(res?.result, `initialize answered: ${init.text()}`);
    assert.equal(res.id, 'init-1');
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid });
    await n.done();
    const { response } = await callTool(gw, sid, 'echo', { text: 'works' });
    assert.equal(textOf(response), 'works');
    // The child reads in order: the call came after anything the cancel could have become.
    await waitFor(() => gw.childMessages().some((m) => m.method === 'tools/call'), scaled(5000));
    assert.ok(!gw.childMessages().some((m) => m.method === 'notifications/cancelled'), 'the child never saw a cancel');
  });
});

test('dropping the initialize stream sends no cancel; the session still initializes', async (t) => {
  if (pooledSkip(t, GATEWAY_INIT)) return;
  await withGateway(HELD_INIT, async (gw) => {
    const init = await post(gw, initMsg('init-2'));
    assert.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'];
    // Dropped while the child holds the answer: initialize is surely still in flight.
    await gw.waitLog(holding, scaled(5000));
    init.drop();
    await gw.waitLog(/client dropped POST stream \d+: 0 requests cancelled/, scaled(5000));
    assert.doesNotMatch(gw.logs(), /session initialized/, 'the drop came before the answer');
    const [pid] = gw.childPids();
    go(pid);
    await gw.waitLog(/session initialized/, scaled(10000));
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid });
    await n.done();
    assert.equal(n.status, 202);
    const { response } = await callTool(gw, sid, 'echo', { text: 'works' });
    assert.equal(textOf(response), 'works');
    const lines = gw.childMessages();
    assert.ok(lines.some((m) => m.method === 'tools/call'));
    assert.ok(!lines.some((m) => m.method === 'notifications/cancelled'), 'the child never saw a cancel');
  });
});

test('dropping one of two POST streams cancels only its call, once, with "client disconnected"', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    // Both run until the test says: neither can end on its own before the drop.
    const a = await startCall(gw, s.sid, 'drop-me', 'cancel_self', HELD('drop-me'));
    const b = await startCall(gw, s.sid, 'keep-me', 'cancel_self', HELD('keep-me'));
    const t0 = performance.now();
    a.r.drop();
    const t = await pollFast(t0, () => childCancels(gw).length > 0, scaled(5000), 'cancel in the child log');
    console.log(`drop -> cancel in the child's log: ${t.toFixed(3)} ms (drop() call to the first poll that sees it)`);
    assert.equal(b.r.ended, false, 'the other call is still running');
    go(s.pid);
    await b.r.done(scaled(10000));
    const resp = b.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'keep-me');
    assert.equal(textOf(resp), 'released');
    const cs = childCancels(gw);
    assert.equal(cs.length, 1, 'exactly one cancel');
    assert.deepEqual(cs[0].params, { requestId: a.childId, reason: 'client disconnected' });
    if (!MATRIX_POOLED) await gw.waitLog(/client dropped POST stream \d+: 1 requests cancelled/);
  });
});

test('drop -> cancel latency over 20 drops (diagnostic; each drop gives exactly one cancel)', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const times = [];
    for (let i = 0; i < 20; i++) {
      const c = await startCall(gw, s.sid, `lat-${i}`, 'cancel_self', HELD(`lat-${i}`));
      const before = childCancels(gw).length;
      const t0 = performance.now();
      c.r.drop();
      times.push(await pollFast(t0, () => childCancels(gw).length > before, scaled(5000), 'cancel in the child log'));
      const cs = childCancels(gw);
      assert.equal(cs.length, i + 1);
      assert.deepEqual(cs.at(-1).params, { requestId: c.childId, reason: 'client disconnected' });
    }
    times.sort((x, y) => x - y);
    console.log(`drop -> cancel over ${times.length} drops: median ${times[times.length >> 1].toFixed(3)} ms, worst ${times.at(-1).toFixed(3)} ms, best ${times[0].toFixed(3)} ms`);
  });
});

test('dropping the GET stream cancels nothing; a concurrent call completes', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    // The call runs until released, so it is surely in flight when the GET stream goes.
    const c = await startCall(gw, s.sid, 'survivor', 'cancel_self', HELD('survivor'));
    g.drop();
    if (MATRIX_POOLED) {
      // A pooled session logs no drop: its one GET stream is gone once another opens (409 before).
      const g2 = await waitFor(async () => { const r = await get(gw, { sid: s.sid }); if (r.status === 200) return r; r.drop(); return null; }, scaled(5000), 'the dropped GET stream gone');
      g2.drop();
    } else await gw.waitLog(/client dropped GET stream \d+: 0 requests cancelled/, scaled(5000));
    assert.equal(c.r.ended, false, 'the call is still running');
    go(s.pid);
    await c.r.done(scaled(10000));
    assert.equal(textOf(c.r.events().map((e) => e.json).find(isAnswer)), 'released');
    assert.deepEqual(childCancels(gw), []);
  });
});

test('after a drop the session keeps working: new calls, a new GET stream, child requests', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { capabilities: { sampling: {} } });
    const c = await startCall(gw, s.sid, 'gone', 'cancel_self', HELD('gone'));
    c.r.drop();
    await waitFor(() => childCancels(gw).length === 1, scaled(5000), 'the cancel');
    const e = await callTool(gw, s.sid, 'echo', { text: 'alive' });
    assert.equal(textOf(e.response), 'alive');
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200, 'a GET stream opens');
    const call = await post(gw, rpc('tools/call', { name: 'sample', arguments: {} }, 'after-drop'), { sid: s.sid });
    // A pooled session's question goes on the stream of the call that asked it.
    const req = await (MATRIX_POOLED ? call : g).waitEvent((j) => j.method === 'sampling/createMessage', scaled(5000));
    const a = await post(gw, { jsonrpc: '2.0', id: req.json.id, result: { role: 'assistant', content: { type: 'text', text: 'answered' }, model: 'm' } }, { sid: s.sid });
    await a.done();
    assert.equal(a.status, 202);
    await call.done(scaled(10000));
    assert.equal(textOf(call.events().map((x) => x.json).find(isAnswer)), 'answered');
    assert.equal(childCancels(gw).length, 1, 'no further cancels');
    g.drop();
  });
});

test('DELETE mid-call: the child gets "session deleted" before it exits, the client an error, the child is reaped', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'doomed', 'cancel_self', HELD('doomed'));
    const d = await del(gw, { sid: s.sid });
    await d.done();
    assert.equal(d.status, 200);
    await c.r.done(scaled(5000));
    const resp = c.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'doomed');
    assert.equal(resp.error.code, -32603);
    assert.match(resp.error.message, /session deleted/);
    // A pooled session has no child to stop: the shared one gets the cancel and serves on.
    if (MATRIX_POOLED) await waitFor(() => childCancels(gw).length === 1, scaled(5000), 'the cancel at the child');
    else {
      await waitFor(() => reaped(s.pid), scaled(5000), 'child reaped');
      await gw.waitLog(new RegExp(`child ${s.pid} exited`), scaled(5000));
    }
    // The child logged it, so it read it while alive; and the gateway sent it before closing stdin.
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: c.childId, reason: 'session deleted' }]);
    await gw.waitLog(new RegExp(`cancelled ${c.childId} reason=session deleted`), scaled(5000));
    const logs = gw.logs();
    if (!MATRIX_POOLED) assert.ok(logs.indexOf('reason="session deleted"') < logs.indexOf(`child ${s.pid} exited`), 'cancel logged before the exit');
  });
});

test('idle expiry does not close a session while a call is in flight', async () => {
  await withGateway({ gateway: { session_idle_timeout_s: 1 } }, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'long', 'cancel_self', HELD('long'));
    // A silent call outlives the 1 s idle timeout and several janitor ticks (one a second): the
    // time passing is the condition under test, not a synchronisation.
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(c.r.ended, false, 'the call is still running');
    go(s.pid);
    await c.r.done(scaled(5000));
    assert.equal(textOf(c.r.events().map((e) => e.json).find(isAnswer)), 'released', c.r.text());
    assert.ok(!/session expired/.test(gw.logs()), 'no expiry during the call');
    assert.deepEqual(childCancels(gw), []);
    // Positive control: once idle, it does expire (1 s, then the next tick): a pooled session's
    // record here ends (its sealed id opens until session_max_age_s), a child-mode one is gone.
    if (MATRIX_POOLED) {
      await gw.waitLog(/pooled session ended: session expired/, scaled(5000));
      return;
    }
    await gw.waitLog(/session closed: session expired/, scaled(5000));
    const r = await post(gw, rpc('ping'), { sid: s.sid });
    await r.done();
    assert.equal(r.status, 404);
  });
});

test('a child crash mid-call: every in-flight call gets an error, no cancel is sent', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'victim', 'cancel_self', HELD('victim'));
    const crash = await callTool(gw, s.sid, 'crash', {}, { id: 'crasher', ms: scaled(10000) });
    assert.equal(crash.response.error.code, -32603);
    await c.r.done(scaled(5000));
    const resp = c.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'victim');
    assert.equal(resp.error.code, -32603);
    // A pooled session's call ends with its shared child, the session goes on.
    assert.match(resp.error.message, MATRIX_POOLED ? /upstream server ended: child (exited|closed its stdout)/ : /session ended: child (exited|closed its stdout)/);
    await waitFor(() => reaped(s.pid), scaled(5000), 'child reaped');
    assert.deepEqual(childCancels(gw), []);
    assert.ok(!/cancel sent to child/.test(gw.logs()));
  });
});

test('every synthesized cancel is sent at most once (client cancel, drop, DELETE on the same session)', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const a = await startCall(gw, s.sid, 'A', 'cancel_self', HELD('A'));
    const b = await startCall(gw, s.sid, 'B', 'cancel_self', HELD('B'));
    const c = await startCall(gw, s.sid, 'C', 'cancel_self', HELD('C'));
    assert.equal(await cancel(gw, s.sid, { requestId: 'A', reason: 'user abort' }), 202);
    assert.equal(await cancel(gw, s.sid, { requestId: 'A', reason: 'user abort again' }), 202);
    await a.r.done(scaled(5000));
    a.r.drop();
    b.r.drop();
    await waitFor(() => childCancels(gw).some((m) => m.params.requestId === b.childId), scaled(5000), 'cancel of B');
    const d = await del(gw, { sid: s.sid });
    await d.done();
    await c.r.done(scaled(5000));
    if (MATRIX_POOLED) await waitFor(() => childCancels(gw).some((m) => m.params.requestId === c.childId), scaled(5000), 'cancel of C');
    else await waitFor(() => reaped(s.pid), scaled(5000), 'child reaped');
    const per = new Map();
    for (const m of childCancels(gw)) per.set(m.params.requestId, [...(per.get(m.params.requestId) || []), m.params.reason]);
    assert.deepEqual(Object.fromEntries(per), {
      [a.childId]: ['user abort'],
      [b.childId]: ['client disconnected'],
      [c.childId]: ['session deleted'],
    });
  });
});
