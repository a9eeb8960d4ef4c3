// SPDX-License-Identifier: MIT
// JSON-RPC batches, which exist only in protocol revision 2025-03-26:
// a batch of requests and notifications in one POST is answered on one SSE stream, one event per
// request with the client's own ids; a batch of notifications and responses gets 202; every
// element is checked before anything is forwarded; sessions on later revisions get 400 -32600; a
// 2025-03-26 child may write a batch line, whose elements are routed one by one.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { initSession, MATRIX_POOLED, metricSamples, pooledSkip, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const call = (id, name, args) => rpc('tools/call', { name, arguments: args }, id);
const V = '2025-03-26';

async function postBatch(gw, sid, batch, headers = {}) {
  const r = await post(gw, batch, { sid, headers });
  await r.done();
  return r;
}

test('a batch of requests and a notification: one SSE stream, an answer per request under its own id', async (t) => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    assert.equal(s.version, V);
    const r = await postBatch(gw, s.sid, [
      call('a', 'echo', { text: 'one', delay_ms: 50 }),
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      call(7, 'echo', { text: 'two' }),
      call('7', 'echo', { text: 'three' }),
    ]);
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/event-stream/);
    const answers = r.events().map((e) => e.json).filter(isAnswer);
    assert.equal(answers.length, 3, r.text());
    const byId = new Map(answers.map((j) => [JSON.stringify(j.id), textOf(j)]));
    assert.deepEqual(Object.fromEntries(byId), { '"a"': 'one', 7: 'two', '"7"': 'three' });
    // The child got each element as its own line, the notification included (a pooled session's
    // notification is no shared child's: it stays at the gateway).
    if (MATRIX_POOLED) assert.ok(!gw.childMessages().some((m) => m.method === 'notifications/roots/list_changed'));
    else await waitFor(() => gw.childMessages().some((m) => m.method === 'notifications/roots/list_changed'), 5000, 'notification at the child');
    assert.equal(gw.childMessages().filter((m) => m.method === 'tools/call').length, 3);
  });
});

test('a batch of notifications and responses gets 202 with no body, and reaches the child', async (t) => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const slow = await post(gw, call('long', 'echo', { text: 'x', delay_ms: 30000 }), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.delay_ms === 30000), 5000, 'call at the child');
    const r = await postBatch(gw, s.sid, [
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'long', reason: 'batched cancel' } },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
    ]);
    assert.equal(r.status, 202);
    assert.equal(r.text(), '');
    const c = await waitFor(() => gw.childMessages().find((m) => m.method === 'notifications/cancelled'), 5000, 'cancel at the child');
    assert.deepEqual(c.params, { requestId: seen.id, reason: 'batched cancel' });
    await slow.done(5000);
    assert.ok(!slow.events().some((e) => isAnswer(e.json)), 'the cancelled call gets no answer');
  });
});

test('a duplicate id inside a batch gets its own error; the rest is answered', async (t) => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const r = await postBatch(gw, s.sid, [call(1, 'echo', { text: 'first', delay_ms: 100 }), call(1, 'echo', { text: 'second' })]);
    assert.equal(r.status, 200);
    const answers = r.events().map((e) => e.json).filter(isAnswer);
    assert.equal(answers.length, 2, r.text());
    assert.ok(answers.some((j) => textOf(j) === 'first'));
    const err = answers.find((j) => j.error);
    assert.equal(err.id, 1);
    assert.equal(err.error.code, -32600);
    assert.match(err.error.message, MATRIX_POOLED ? /the same id as an earlier request of this batch/ : /already in flight/);
    assert.equal(gw.childMessages().filter((m) => m.method === 'tools/call').length, 1, 'the duplicate never reached the child');
  });
});

test('bad batches are refused whole with 400 before anything is forwarded', async (t) => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const cases = [
      [[], -32600, /empty batch/],
      [[call(1, 'echo', { text: 'never' }), 42], -32600, /batch element 1: not an object/],
      [[call(2, 'echo', { text: 'never' }), { jsonrpc: '1.0', id: 3, method: 'ping' }], -32600, /batch element 1/],
      [[call(4, 'echo', { text: 'never' }), [call(5, 'ping', {})]], -32600, /batch inside a batch/],
      [[rpc('initialize', { protocolVersion: V, capabilities: {}, clientInfo: { name: 'x', version: '1' } }, 6)], -32600, /initialize must not be part of a batch/],
      [Array.from({ length: 257 }, () => ({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' })), -32600, /at most 256/],
    ];
    for (const [body, code, re] of cases) {
      const r = await postBatch(gw, s.sid, body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${r.text()}`);
      assert.equal(r.json().error.code, code);
      assert.match(r.json().error.message, re);
    }
    assert.equal(gw.childMessages().filter((m) => m.params?.arguments?.text === 'never').length, 0, 'nothing of a refused batch was forwarded');
    assert.equal(gw.childMessages().filter((m) => m.method === 'notifications/roots/list_changed').length, 0);
    // Without a session a batch is refused too (initialize, the only request without one, is never batched).
    const r = await postBatch(gw, undefined, [call(9, 'echo', { text: 'never' })]);
    assert.equal(r.status, 400);
  });
});

test('sessions on 2025-06-18 and 2025-11-25 refuse batches with 400 -32600', async (t) => {
  await withGateway({}, async (gw) => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const s = await initSession(gw, { version });
      assert.equal(s.version, version);
      const r = await postBatch(gw, s.sid, [call(1, 'echo', { text: 'never' })], { 'MCP-Protocol-Version': version });
      assert.equal(r.status, 400);
      assert.equal(r.json().error.code, -32600);
      assert.match(r.json().error.message, /2025-03-26/);
    }
    assert.equal(gw.childMessages().filter((m) => m.params?.arguments?.text === 'never').length, 0);
  });
});

test('a 2025-03-26 child writing a batch line: each element is routed (notifications and the answer)', async (t) => {
  if (pooledSkip(t, 'a pool child speaks the revision of the pool\'s own handshake, not the session\'s 2025-03-26: its batch line is invalid (next test)')) return;
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const r = await post(gw, call('b1', 'batch', { count: 3 }), { sid: s.sid });
    await r.done();
    const evs = r.events().map((e) => e.json).filter(Boolean);
    assert.deepEqual(evs.filter((j) => j.method === 'notifications/message').map((j) => j.params.data), [1, 2, 3]);
    const ans = evs.find(isAnswer);
    assert.equal(ans.id, 'b1');
    assert.equal(textOf(ans), 'batched');
  });
});

test('a child batch on a later revision is an invalid line: skipped and counted, the session lives', async (t) => {
  await withGateway({ gateway: { admin_token: 'a'.repeat(32) } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-06-18' });
    const r = await post(gw, call('b2', 'batch', { count: 1 }), { sid: s.sid });
    await gw.waitLog(/child wrote a line that is not a JSON-RPC message \(batch\)/);
    r.drop();
    const adm = await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${'a'.repeat(32)}` } });
    if (MATRIX_POOLED) { // the pool's counter: a pooled session is no admin view's session
      const m = metricSamples(await (await fetch(`${gw.base}/metrics`, { headers: { Authorization: `Bearer ${'a'.repeat(32)}` } })).text());
      assert.equal(m['mcpgw_pool_messages_dropped_total{reason="invalid"}'], 1);
    } else assert.equal((await adm.json()).counters.child_lines_invalid, 1);
    const ok = await post(gw, call('after', 'echo', { text: 'alive' }), { sid: s.sid });
    await ok.done();
    assert.equal(textOf(ok.events().map((e) => e.json).find(isAnswer)), 'alive');
  });
});
