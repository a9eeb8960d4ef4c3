// SPDX-License-Identifier: MIT
// Cancellation through the in-flight table: a client cancel reaches the child under the child's id
// and ends the call's stream; late answers are dropped; stray cancels are ignored; initialize is
// never cancelled; a dropped POST stream cancels exactly its own requests; DELETE, idle expiry and
// a crashing child each end in-flight calls correctly; no synthesized cancel is sent twice.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { EXAMPLE, callTool, del, get, initSession, post, reaped, rpc, startGateway, stdoutBlocked, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/** Starts a tools/call on its own POST stream; resolves once the child has read it. */
async function startCall(gw, sid, id, name, args) {
  const r = await post(gw, rpc('tools/call', { name, arguments: args }, id), { sid });
  assert.equal(r.status, 200, `${id}: ${r.status}`);
  const seen = await waitFor(
    () => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === args.tag && args.tag !== undefined),
    5000, `child to read ${id}`);
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
  await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === marker), 5000, 'child caught up');
}

/** Polls as fast as the event loop allows (for latency measurements); resolves with ms since t0. */
async function pollFast(t0, fn, ms, what) {
  for (;;) {
    if (fn()) return performance.now() - t0;
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

const SLOW = (tag, steps = 100) => ({ steps, interval_ms: 50, tag });

test('a client cancel is 202, reaches the child under the child\'s id with the reason, and ends the stream without a response', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const { r, childId } = await startCall(gw, s.sid, 'c-1', 'slow', SLOW('c-1'));
    assert.equal(typeof childId, 'number');
    assert.equal(await cancel(gw, s.sid, { requestId: 'c-1', reason: 'user abort' }), 202);
    const c = await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
    assert.deepEqual(c.params, { requestId: childId, reason: 'user abort' });
    await r.done(5000);
    assert.ok(!r.events().some((e) => isAnswer(e.json)), `no response on the cancelled call's stream: ${r.text()}`);
    await gw.waitLog(/child stderr: mcp-example-server: cancelled \d+ reason=user abort/);
    await childCaughtUp(gw, s.sid, 'after');
    assert.equal(childCancels(gw).length, 1, 'exactly one cancel');
  });
});

test('the child\'s late response to a cancelled call is dropped, not delivered', async () => {
  // Every example tool honours a cancel it reads in time, so the child is kept from reading it:
  // a flood whose reader pauses blocks the child on its stdout (back-pressure); the cancel waits
  // in its stdin while it finishes the flood and answers.
  const COUNT = 20000;
  await withGateway({ gateway: { stream_queue_bytes: 65536 } }, async (gw) => {
    const s = await initSession(gw);
    const { r, childId } = await startCall(gw, s.sid, 'late-1', 'flood', { count: COUNT, bytes: 2000, tag: 'late-1' });
    r.res.pause();
    const state = { stable: 0, last: null };
    await waitFor(() => stdoutBlocked(s.pid, state), 20000, 'child blocked on its stdout');
    assert.equal(await cancel(gw, s.sid, { requestId: 'late-1', reason: 'user abort' }), 202);
    await gw.waitLog(/late answer for cancelled tools\/call dropped/, 20000);
    // The child answered before it read the cancel: the answer really was late.
    await gw.waitLog(new RegExp(`ignoring cancel for unknown request ${childId}\\b`));
    r.res.resume();
    await r.done(20000);
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

test('initialize is never cancelled', async () => {
  // A child that takes a moment to start keeps initialize in flight while the cancel arrives.
  const dir = tmpdir('mcpgw-init-');
  const log = `${dir}/child.log`;
  const command = `/bin/sh -c 'sleep 1; exec ${EXAMPLE} --log ${log}'`;
  await withGateway({ servers: [{ name: 'slowstart', path: '/mcp', command }] }, async (gw) => {
    const init = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init-1'));
    assert.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'];
    assert.ok(sid, 'session id in the headers, before the result');
    assert.equal(await cancel(gw, sid, { requestId: 'init-1', reason: 'impatient' }), 202);
    assert.ok(!init.events().some((e) => isAnswer(e.json)), 'initialize was still in flight when cancelled');
    await init.done(10000);
    const res = init.events().map((e) => e.json).find(isAnswer);
    assert.ok(res?.result, `initialize answered: ${init.text()}`);
    assert.equal(res.id, 'init-1');
    await gw.waitLog(/cancel of initialize ignored/);
    const lines = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid });
    await n.done();
    const { response } = await callTool(gw, sid, 'echo', { text: 'works' });
    assert.equal(textOf(response), 'works');
    await waitFor(() => lines().some((m) => m.method === 'tools/call'), 5000);
    assert.ok(!lines().some((m) => m.method === 'notifications/cancelled'), 'the child never saw a cancel');
  });
});

test('dropping the initialize stream sends no cancel; the session still initializes', async () => {
  const dir = tmpdir('mcpgw-init-');
  const log = `${dir}/child.log`;
  const command = `/bin/sh -c 'sleep 1; exec ${EXAMPLE} --log ${log}'`;
  await withGateway({ servers: [{ name: 'slowstart', path: '/mcp', command }] }, async (gw) => {
    const init = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init-2'));
    assert.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'];
    init.drop();
    await gw.waitLog(/client dropped POST stream \d+: 0 requests cancelled/);
    await gw.waitLog(/session initialized/, 10000);
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid });
    await n.done();
    assert.equal(n.status, 202);
    const { response } = await callTool(gw, sid, 'echo', { text: 'works' });
    assert.equal(textOf(response), 'works');
    const lines = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.ok(lines.some((m) => m.method === 'tools/call'));
    assert.ok(!lines.some((m) => m.method === 'notifications/cancelled'), 'the child never saw a cancel');
  });
});

test('dropping one of two POST streams cancels only its call, once, with "client disconnected"', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const a = await startCall(gw, s.sid, 'drop-me', 'slow', SLOW('drop-me', 20));
    const b = await startCall(gw, s.sid, 'keep-me', 'slow', SLOW('keep-me', 20));
    const t0 = performance.now();
    a.r.drop();
    const t = await pollFast(t0, () => childCancels(gw).length > 0, 5000, 'cancel in the child log');
    console.log(`drop -> cancel in the child's log: ${t.toFixed(3)} ms (drop() call to the first poll that sees it)`);
    await b.r.done(10000);
    const resp = b.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'keep-me');
    assert.equal(textOf(resp), 'done after 20 steps');
    const cs = childCancels(gw);
    assert.equal(cs.length, 1, 'exactly one cancel');
    assert.deepEqual(cs[0].params, { requestId: a.childId, reason: 'client disconnected' });
    await gw.waitLog(/client dropped POST stream \d+: 1 requests cancelled/);
  });
});

test('drop -> cancel latency over 20 drops (diagnostic; each drop gives exactly one cancel)', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const times = [];
    for (let i = 0; i < 20; i++) {
      const c = await startCall(gw, s.sid, `lat-${i}`, 'slow', SLOW(`lat-${i}`));
      const before = childCancels(gw).length;
      const t0 = performance.now();
      c.r.drop();
      times.push(await pollFast(t0, () => childCancels(gw).length > before, 5000, 'cancel in the child log'));
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
    const c = await startCall(gw, s.sid, 'survivor', 'slow', SLOW('survivor', 10));
    g.drop();
    await gw.waitLog(/client dropped GET stream \d+: 0 requests cancelled/);
    await c.r.done(10000);
    assert.equal(textOf(c.r.events().map((e) => e.json).find(isAnswer)), 'done after 10 steps');
    assert.deepEqual(childCancels(gw), []);
  });
});

test('after a drop the session keeps working: new calls, a new GET stream, child requests', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'gone', 'slow', SLOW('gone'));
    c.r.drop();
    await waitFor(() => childCancels(gw).length === 1, 5000, 'the cancel');
    const e = await callTool(gw, s.sid, 'echo', { text: 'alive' });
    assert.equal(textOf(e.response), 'alive');
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200, 'a GET stream opens');
    const call = await post(gw, rpc('tools/call', { name: 'sample', arguments: {} }, 'after-drop'), { sid: s.sid });
    const req = await g.waitEvent((j) => j.method === 'sampling/createMessage');
    const a = await post(gw, { jsonrpc: '2.0', id: req.json.id, result: { role: 'assistant', content: { type: 'text', text: 'answered' }, model: 'm' } }, { sid: s.sid });
    await a.done();
    assert.equal(a.status, 202);
    await call.done();
    assert.equal(textOf(call.events().map((x) => x.json).find(isAnswer)), 'answered');
    assert.equal(childCancels(gw).length, 1, 'no further cancels');
    g.drop();
  });
});

test('DELETE mid-call: the child gets "session deleted" before it exits, the client an error, the child is reaped', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'doomed', 'slow', SLOW('doomed'));
    const d = await del(gw, { sid: s.sid });
    await d.done();
    assert.equal(d.status, 200);
    await c.r.done(5000);
    const resp = c.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'doomed');
    assert.equal(resp.error.code, -32603);
    assert.match(resp.error.message, /session deleted/);
    await waitFor(() => reaped(s.pid), 5000, 'child reaped');
    await gw.waitLog(new RegExp(`child ${s.pid} exited`));
    // The child logged it, so it read it while alive; and the gateway sent it before closing stdin.
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: c.childId, reason: 'session deleted' }]);
    await gw.waitLog(new RegExp(`cancelled ${c.childId} reason=session deleted`));
    const logs = gw.logs();
    assert.ok(logs.indexOf('reason="session deleted"') < logs.indexOf(`child ${s.pid} exited`), 'cancel logged before the exit');
  });
});

test('idle expiry does not close a session while a call is in flight', async () => {
  await withGateway({ gateway: { session_idle_timeout_s: 1 } }, async (gw) => {
    const s = await initSession(gw);
    const { response } = await callTool(gw, s.sid, 'slow', { steps: 30, interval_ms: 100 }, { id: 'long', ms: 10000 });
    assert.equal(textOf(response), 'done after 30 steps', JSON.stringify(response));
    assert.ok(!/session expired/.test(gw.logs()), 'no expiry during the call');
    assert.deepEqual(childCancels(gw), []);
    // Positive control: once idle, it does expire.
    await gw.waitLog(/session closed: session expired/, 5000);
    const r = await post(gw, rpc('ping'), { sid: s.sid });
    await r.done();
    assert.equal(r.status, 404);
  });
});

test('a child crash mid-call: every in-flight call gets an error, no cancel is sent', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const c = await startCall(gw, s.sid, 'victim', 'slow', SLOW('victim'));
    const crash = await callTool(gw, s.sid, 'crash', {}, { id: 'crasher' });
    assert.equal(crash.response.error.code, -32603);
    await c.r.done(5000);
    const resp = c.r.events().map((e) => e.json).find(isAnswer);
    assert.equal(resp.id, 'victim');
    assert.equal(resp.error.code, -32603);
    assert.match(resp.error.message, /session ended: child (exited|closed its stdout)/);
    await waitFor(() => reaped(s.pid), 5000, 'child reaped');
    assert.deepEqual(childCancels(gw), []);
    assert.ok(!/cancel sent to child/.test(gw.logs()));
  });
});

test('every synthesized cancel is sent at most once (client cancel, drop, DELETE on the same session)', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const a = await startCall(gw, s.sid, 'A', 'slow', SLOW('A'));
    const b = await startCall(gw, s.sid, 'B', 'slow', SLOW('B'));
    const c = await startCall(gw, s.sid, 'C', 'slow', SLOW('C'));
    assert.equal(await cancel(gw, s.sid, { requestId: 'A', reason: 'user abort' }), 202);
    assert.equal(await cancel(gw, s.sid, { requestId: 'A', reason: 'user abort again' }), 202);
    await a.r.done(5000);
    a.r.drop();
    b.r.drop();
    await waitFor(() => childCancels(gw).some((m) => m.params.requestId === b.childId), 5000, 'cancel of B');
    const d = await del(gw, { sid: s.sid });
    await d.done();
    await c.r.done(5000);
    await waitFor(() => reaped(s.pid), 5000, 'child reaped');
    const per = new Map();
    for (const m of childCancels(gw)) per.set(m.params.requestId, [...(per.get(m.params.requestId) || []), m.params.reason]);
    assert.deepEqual(Object.fromEntries(per), {
      [a.childId]: ['user abort'],
      [b.childId]: ['client disconnected'],
      [c.childId]: ['session deleted'],
    });
  });
});
