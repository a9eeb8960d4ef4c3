// SPDX-License-Identifier: MIT
// The races of cancellation, driven deterministically through the example server, and the admin
// view that shows the in-flight table and its counters. The example server is stepped, not raced:
// stubborn with on_cancel answers exactly when it reads the cancel (so its answer is late for
// sure), cancel_self answers only when cancelled (or on SIGUSR1). Deadlines scale for a slow run
// (tests/lib/timing.mjs).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MATRIX_POOLED, callTool, del, get, initSession, pooledSkip, post, request, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const TOKEN = 'race-test-token-0123456789abcdefghij';

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  await r.done();
  assert.equal(r.status, 200, r.text());
  return r.json();
}

/** A gateway with the admin view on; gw.stop() (in withGateway) asserts a clean exit. */
const withGw = (fn, gateway = {}, servers) => withGateway({ gateway: { admin_token: TOKEN, ...gateway }, ...(servers ? { servers } : {}) }, fn);

/** Why a test of the admin view's sessions does not apply to a pooled session. */
const ADMIN_SESSIONS = 'reads the admin view\'s child-mode sessions, their entries and counters (a pooled session\'s calls are its pool child\'s entries)';

const cancel = (requestId, reason) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } });

test('a response that crosses a cancel is dropped and counted, delivered nowhere', async (t) => {
  if (pooledSkip(t, ADMIN_SESSIONS)) return;
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    // on_cancel: no timer; the child answers the moment it reads the cancel, so the answer is
    // late whatever the load (a delay_ms answer could beat a slow cancel and be delivered).
    const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { on_cancel: true } }, 'cross'), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.params?.name === 'stubborn'), scaled(5000), 'call at child');
    const c = await post(gw, cancel('cross', 'user abort'), { sid: s.sid });
    await c.done();
    assert.equal(c.status, 202);
    await r.done();
    assert.equal(r.events().length, 0, `the cancelled call's stream ends without a response: ${r.text()}`);
    // The child answers anyway (after reading the cancel); the gateway drops it.
    await gw.waitLog(new RegExp(`child stderr: mcp-example-server: stubborn: answering ${seen.id} anyway`), scaled(5000));
    await waitFor(async () => (await admin(gw)).counters.late_dropped === 1, scaled(5000), 'late answer dropped');
    const a = await admin(gw);
    assert.equal(a.counters.cancels_to_child.client, 1);
    const fwd = gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
    assert.equal(fwd.length, 1);
    assert.equal(fwd[0].params.requestId, seen.id);
    assert.equal(fwd[0].params.reason, 'user abort');
    assert.equal(g.events().length, 0, 'nothing leaked to the GET stream');
    assert.deepEqual(a.sessions[0].inflight, [], 'the entry is gone once the late answer came');
    g.drop();
  });
});

test('a cancel for a request that just finished is ignored: nothing reaches the child', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const { response } = await callTool(gw, s.sid, 'echo', { text: 'done' }, { id: 'fin' });
    assert.equal(response.result.content[0].text, 'done');
    const c = await post(gw, cancel('fin', 'too late'), { sid: s.sid });
    await c.done();
    assert.equal(c.status, 202);
    // A later request proves the cancel was processed before it (one loop, in order).
    await callTool(gw, s.sid, 'echo', { text: 'after' }, { id: 'after' });
    assert.equal(gw.childMessages().filter((m) => m.method === 'notifications/cancelled').length, 0);
    assert.equal((await admin(gw)).counters.cancels_to_child.client, 0);
  });
});

test('a disconnect while the response is being written cancels nothing and leaks nothing', async (t) => {
  if (pooledSkip(t, ADMIN_SESSIONS)) return;
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'large', arguments: { bytes: 20_000_000 } }, 'big'), { sid: s.sid });
    r.res.pause(); // stop reading: the 20 MB answer sits in the gateway's queue and socket buffers
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'large'), scaled(5000), 'call at child');
    // Answered: the entry has left the in-flight table; its stream now belongs to the HTTP side only.
    await waitFor(async () => (await admin(gw)).sessions[0].inflight.length === 0, scaled(10000), 'answer taken');
    assert.equal(r.ended, false, 'the client has not read the whole answer');
    r.drop();
    const a = await admin(gw);
    assert.deepEqual(a.sessions[0].inflight, []);
    assert.equal(a.counters.cancels_to_child['client disconnected'], 0, 'an answered request is not cancelled');
    assert.equal(gw.childMessages().filter((m) => m.method === 'notifications/cancelled').length, 0);
    const { response } = await callTool(gw, s.sid, 'echo', { text: 'alive' });
    assert.equal(response.result.content[0].text, 'alive');
  });
});

test('a child that answers after DELETE told it to stop: the answer reaches no one', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    // on_cancel: the child answers when it reads DELETE's cancel, never before it.
    const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { on_cancel: true } }, 'late'), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.params?.name === 'stubborn'), scaled(5000), 'call at child');
    const d = await del(gw, { sid: s.sid });
    await d.done();
    assert.equal(d.status, 200);
    await r.done();
    const msgs = r.events().map((e) => e.json);
    assert.equal(msgs.length, 1, r.text());
    assert.equal(msgs[0].id, 'late');
    assert.match(msgs[0].error.message, /session deleted/);
    const cancels = gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
    assert.equal(cancels.length, 1);
    assert.equal(cancels[0].params.reason, 'session deleted');
    // The stubborn child answers on a closed session: nothing is delivered; the session is gone.
    await gw.waitLog(new RegExp(`child stderr: mcp-example-server: stubborn: answering ${seen.id} anyway`), scaled(5000));
    if (!MATRIX_POOLED) await gw.waitLog(new RegExp(`child ${s.pid} exited`), scaled(10000)); // a pooled session stops no child
    const a = await admin(gw);
    assert.equal(a.sessions.length, 0);
    assert.equal(a.counters.cancels_to_child['session deleted'], 1);
  });
});

test('two cancels for the same request: the child gets exactly one', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    // cancel_self: only a cancel ends it, however long the test takes.
    const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: {} }, 'twice'), { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'cancel_self'), scaled(5000), 'call at child');
    for (let i = 0; i < 2; i++) {
      const c = await post(gw, cancel('twice', `attempt ${i}`), { sid: s.sid });
      await c.done();
      assert.equal(c.status, 202);
    }
    r.drop(); // and the client leaves too: still no second cancel
    await callTool(gw, s.sid, 'echo', { text: 'sync' });
    const cancels = gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
    assert.equal(cancels.length, 1);
    assert.equal(cancels[0].params.reason, 'attempt 0');
  });
});

test('admin view: in-flight entries with method, age, state, stream; refused without the token', async (t) => {
  if (pooledSkip(t, ADMIN_SESSIONS)) return;
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const noauth = await request(`${gw.base}/admin/inflight`, { method: 'GET' });
    await noauth.done();
    assert.equal(noauth.status, 401);
    assert.equal(noauth.headers['www-authenticate'], 'Bearer');
    const wrong = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}x` } });
    await wrong.done();
    assert.equal(wrong.status, 401);
    // cancel_self sends progress 0 at once and then waits for a cancel: in flight for as long as
    // the test needs.
    const tSent = performance.now();
    const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: {}, _meta: { progressToken: 'tok' } }, 'watched'), { sid: s.sid });
    await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
    // The progress came from the child, so the entry was in the table by now.
    const tSeen = performance.now();
    // The time in flight is what age_ms measures: let some pass (not a synchronisation).
    await new Promise((res) => setTimeout(res, 250));
    const tAsk = performance.now();
    const a = await admin(gw);
    const tGot = performance.now();
    assert.equal(a.sessions.length, 1);
    const sess = a.sessions[0];
    assert.equal(sess.id, s.sid);
    assert.equal(sess.child_pid, s.pid);
    assert.equal(sess.protocol_version, '2025-06-18');
    const e = sess.inflight.find((x) => x.id === 'watched');
    assert.ok(e, JSON.stringify(sess));
    assert.equal(e.direction, 'to_child');
    assert.equal(e.method, 'tools/call');
    assert.equal(e.state, 'forwarded');
    assert.equal(e.progress_token, 'tok');
    // age_ms: at least the time the test knows the entry existed (since tSeen; the snapshot is
    // taken after tAsk), at most the wall time since the request was sent (the snapshot is taken
    // before tGot); 1 ms either way for the gateway's whole milliseconds.
    assert.ok(Number.isInteger(e.age_ms), `age_ms ${e.age_ms}`);
    assert.ok(e.age_ms >= Math.floor(tAsk - tSeen) - 1, `age_ms ${e.age_ms}: in flight for at least ${(tAsk - tSeen).toFixed(1)} ms`);
    assert.ok(e.age_ms <= Math.ceil(tGot - tSent) + 1, `age_ms ${e.age_ms}: sent only ${(tGot - tSent).toFixed(1)} ms ago`);
    assert.ok(sess.streams.some((st) => st.id === e.stream && st.kind === 'post' && st.awaiting === 1));
    // A second look: the age grew by at least the time between the two snapshots.
    await new Promise((res) => setTimeout(res, 100));
    const tAsk2 = performance.now();
    const e2 = (await admin(gw)).sessions[0].inflight.find((x) => x.id === 'watched');
    assert.ok(e2.age_ms - e.age_ms >= Math.floor(tAsk2 - tGot) - 2, `age_ms ${e.age_ms} then ${e2.age_ms}, ${(tAsk2 - tGot).toFixed(1)} ms apart`);
    r.drop();
    await waitFor(async () => (await admin(gw)).counters.cancels_to_child['client disconnected'] === 1, scaled(5000), 'disconnect counted');
  });
});

test('admin view is off without admin_token', async () => {
  await withGateway({}, async (gw) => {
    const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
    await r.done();
    assert.equal(r.status, 404);
  });
});

test('request timeout: the child gets "request timed out", the client a -32603 error (not -32001)', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const t0 = performance.now();
    // cancel_self never answers by itself: only the timeout can end it.
    const { response } = await callTool(gw, s.sid, 'cancel_self', {}, { id: 'slowpoke', ms: scaled(10000) });
    const took = performance.now() - t0;
    assert.equal(response.id, 'slowpoke');
    assert.equal(response.error.code, -32603);
    assert.match(response.error.message, /timed out/);
    assert.ok(took >= 299, `timed out after ${took.toFixed(1)} ms, not before the 300 ms`);
    const c = await waitFor(() => gw.childMessages().find((m) => m.method === 'notifications/cancelled'), scaled(5000), 'cancel at child');
    assert.equal(c.params.reason, 'request timed out');
    if (!MATRIX_POOLED) assert.equal((await admin(gw)).counters.timeouts, 1); // the child-mode sessions' counter
  }, {}, [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }]);
});

test('progress restarts the timeout clock up to request_timeout_max_ms', async () => {
  const TIMEOUT = 1500;
  const MAX = 4000;
  await withGw(async (gw) => {
    const s = await initSession(gw);
    // 4 steps of 500 ms with progress, 2 s in all: past the 1.5 s timeout only because each
    // progress restarts its clock. A step may come up to 1 s late (a loaded runner) before the
    // clock would run out.
    const t0 = performance.now();
    const ok = await callTool(gw, s.sid, 'slow', { steps: 4, interval_ms: 500 }, { id: 'p-ok', meta: { progressToken: 1 }, ms: scaled(10000) });
    assert.equal(ok.response.result?.content[0].text, 'done after 4 steps', JSON.stringify(ok.response));
    assert.ok(performance.now() - t0 >= TIMEOUT, 'the call outlived request_timeout_ms');
    // 100 steps of 500 ms would take 50 s (and end in a result): the 4 s maximum ends it with an
    // error. The upper bound allows a slow run; without the cap the answer would be a result.
    const t1 = performance.now();
    const capped = await callTool(gw, s.sid, 'slow', { steps: 100, interval_ms: 500 }, { id: 'p-cap', meta: { progressToken: 2 }, ms: MAX + scaled(10000) });
    const took = performance.now() - t1;
    assert.equal(capped.response.error?.code, -32603, JSON.stringify(capped.response));
    assert.match(capped.response.error.message, /timed out/);
    assert.ok(took >= MAX - 1, `capped after ${took.toFixed(0)} ms: not before request_timeout_max_ms`);
    assert.ok(took < MAX + scaled(1500), `capped after ${took.toFixed(0)} ms: soon after request_timeout_max_ms`);
  }, {}, [{ name: 'example', path: '/mcp', extra: `request_timeout_ms = ${TIMEOUT}\nrequest_timeout_max_ms = ${MAX}` }]);
});
