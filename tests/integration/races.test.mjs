// SPDX-License-Identifier: MIT
// The races of cancellation (issue 3, item 7), driven deterministically through the example
// server, and the admin view that shows the in-flight table and its counters (item 8).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callTool, del, get, initSession, post, request, rpc, startGateway, waitFor } from '../lib/gw.mjs';

const TOKEN = 'race-test-token-0123456789abcdefghij';

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  await r.done();
  assert.equal(r.status, 200, r.text());
  return r.json();
}

async function withGw(fn, gateway = {}) {
  const gw = await startGateway({ gateway: { admin_token: TOKEN, ...gateway } });
  try {
    await fn(gw);
  } finally {
    const r = await gw.stop();
    assert.deepEqual(r, { code: 0, signal: null }, gw.logs().slice(-3000));
  }
}

const cancel = (requestId, reason) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason } });

test('a response that crosses a cancel is dropped and counted, delivered nowhere', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { delay_ms: 300 } }, 'cross'), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.params?.name === 'stubborn'), 5000, 'call at child');
    const c = await post(gw, cancel('cross', 'user abort'), { sid: s.sid });
    await c.done();
    assert.equal(c.status, 202);
    await r.done();
    assert.equal(r.events().length, 0, `the cancelled call's stream ends without a response: ${r.text()}`);
    // The child answers anyway; the gateway drops it.
    await waitFor(async () => (await admin(gw)).counters.late_dropped === 1, 5000, 'late answer dropped');
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

test('a disconnect while the response is being written cancels nothing and leaks nothing', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'large', arguments: { bytes: 20_000_000 } }, 'big'), { sid: s.sid });
    r.res.pause(); // stop reading: the 20 MB answer sits in the gateway's queue and socket buffers
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'large'), 5000, 'call at child');
    // Answered: the entry has left the in-flight table; its stream now belongs to the HTTP side only.
    await waitFor(async () => (await admin(gw)).sessions[0].inflight.length === 0, 10000, 'answer taken');
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
    const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { delay_ms: 200 } }, 'late'), { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'stubborn'), 5000, 'call at child');
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
    const a = await admin(gw);
    assert.equal(a.sessions.length, 0);
    assert.equal(a.counters.cancels_to_child['session deleted'], 1);
  });
});

test('two cancels for the same request: the child gets exactly one', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 100 } }, 'twice'), { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'slow'), 5000, 'call at child');
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

test('admin view: in-flight entries with method, age, state, stream; refused without the token', async () => {
  await withGw(async (gw) => {
    const s = await initSession(gw);
    const noauth = await request(`${gw.base}/admin/inflight`, { method: 'GET' });
    await noauth.done();
    assert.equal(noauth.status, 401);
    assert.equal(noauth.headers['www-authenticate'], 'Bearer');
    const wrong = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}x` } });
    await wrong.done();
    assert.equal(wrong.status, 401);
    const r = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 100 }, _meta: { progressToken: 'tok' } }, 'watched'), { sid: s.sid });
    await r.waitEvent((j) => j.method === 'notifications/progress');
    const a = await admin(gw);
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
    assert.ok(e.age_ms >= 0);
    assert.ok(sess.streams.some((st) => st.id === e.stream && st.kind === 'post' && st.awaiting === 1));
    r.drop();
    await waitFor(async () => (await admin(gw)).counters.cancels_to_child['client disconnected'] === 1, 5000, 'disconnect counted');
  });
});

test('admin view is off without admin_token', async () => {
  const gw = await startGateway();
  try {
    const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
    await r.done();
    assert.equal(r.status, 404);
  } finally {
    await gw.stop();
  }
});

test('request timeout: the child gets "request timed out", the client a -32603 error (not -32001)', async () => {
  const gw2 = await startGateway({ gateway: { admin_token: TOKEN }, servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }] });
  try {
    const s = await initSession(gw2);
    const t0 = Date.now();
    const { response } = await callTool(gw2, s.sid, 'slow', { steps: 100, interval_ms: 100 }, { id: 'slowpoke' });
    assert.equal(response.id, 'slowpoke');
    assert.equal(response.error.code, -32603);
    assert.match(response.error.message, /timed out/);
    assert.ok(Date.now() - t0 >= 290);
    const c = await waitFor(() => gw2.childMessages().find((m) => m.method === 'notifications/cancelled'), 5000, 'cancel at child');
    assert.equal(c.params.reason, 'request timed out');
    assert.equal((await admin(gw2)).counters.timeouts, 1);
  } finally {
    assert.deepEqual(await gw2.stop(), { code: 0, signal: null });
  }
});

test('progress restarts the timeout clock up to request_timeout_max_ms', async () => {
  const gw = await startGateway({ gateway: { admin_token: TOKEN }, servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300\nrequest_timeout_max_ms = 1500' }] });
  try {
    const s = await initSession(gw);
    // 4 steps of 200 ms with progress: each step restarts the 300 ms clock, 800 ms in all.
    const ok = await callTool(gw, s.sid, 'slow', { steps: 4, interval_ms: 200 }, { id: 'p-ok', meta: { progressToken: 1 } });
    assert.equal(ok.response.result.content[0].text, 'done after 4 steps');
    // 20 steps of 200 ms would take 4 s: the 1.5 s maximum ends it.
    const t0 = Date.now();
    const capped = await callTool(gw, s.sid, 'slow', { steps: 20, interval_ms: 200 }, { id: 'p-cap', meta: { progressToken: 2 } });
    assert.equal(capped.response.error.code, -32603);
    const took = Date.now() - t0;
    assert.ok(took >= 1400 && took < 3900, `capped after ${took} ms`);
  } finally {
    assert.deepEqual(await gw.stop(), { code: 0, signal: null });
  }
});
