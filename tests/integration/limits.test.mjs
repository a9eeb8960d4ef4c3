// SPDX-License-Identifier: MIT
// Byte bounds on what a client controls (issue: a core no peer can crash): request ids and
// progress tokens are limited by max_id_bytes; cancelled requests that linger to catch a late
// answer count toward the in-flight table's ceiling (2 x max_inflight_per_session entries), so a
// client cancelling in a loop cannot grow it; the admin view stays a bounded, parseable document.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callTool, initSession, pooledSkip, post, request, rpc, waitFor, withGateway } from '../lib/gw.mjs';

const TOKEN = 'limits-admin-token-0123456789abcdef';

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  const body = await r.done();
  assert.equal(r.status, 200, body);
  return JSON.parse(body);
}

test('an id or progress token over max_id_bytes gets 400 -32600; at the limit it is served', async () => {
  await withGateway({ gateway: { max_id_bytes: 32 } }, async (gw) => {
    const { sid } = await initSession(gw);
    const atLimit = 'a'.repeat(30); // 32 bytes of JSON text with its quotes
    const ok = await callTool(gw, sid, 'echo', { text: 'x' }, { id: atLimit });
    assert.equal(ok.r.status, 200);
    assert.equal(ok.response.id, atLimit);
    for (const [what, msg] of [
      ['id', rpc('tools/call', { name: 'echo', arguments: { text: 'x' } }, 'b'.repeat(31))],
      ['number id', `{"jsonrpc":"2.0","id":${'1'.repeat(33)},"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`],
      ['progress token', rpc('tools/call', { name: 'echo', arguments: { text: 'x' }, _meta: { progressToken: 't'.repeat(40) } }, 7)],
    ]) {
      const r = await post(gw, msg, { sid });
      const body = await r.done();
      assert.equal(r.status, 400, `${what}: ${body}`);
      const e = JSON.parse(body);
      assert.equal(e.error.code, -32600, what);
      assert.match(e.error.message, /max_id_bytes/, what);
    }
    // Nothing of the refused requests reached the child.
    assert.ok(!gw.childLines().some((l) => l.includes('b'.repeat(31)) || l.includes('t'.repeat(40))));
  });
});

test('cancelled requests that linger count toward the table: 40 cancelled calls leave at most 2 x max_inflight entries, and new calls are still served', async (t) => {
  if (pooledSkip(t, 'reads the admin view\'s child-mode sessions and their entries (a pooled session\'s calls are its pool child\'s; 300 of them pass one child\'s pool_child_max_inflight)')) return;
  await withGateway({ gateway: { admin_token: TOKEN, max_inflight_per_session: 3 } }, async (gw) => {
    const { sid } = await initSession(gw);
    const big = 'z'.repeat(200);
    for (let i = 0; i < 40; i++) {
      const id = `${big}-${i}`;
      // stubborn without on_cancel answers long after its cancel: the entry lingers, cancelled.
      const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { delay_ms: 600000 } }, id), { sid });
      assert.equal(r.status, 200);
      const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } }, { sid });
      await c.done();
      assert.equal(c.status, 202);
      await r.done();
      const view = await admin(gw);
      const s = view.sessions.find((x) => x.id === sid);
      assert.ok(s.inflight.length <= 6, `round ${i}: ${s.inflight.length} entries in the table`);
    }
    const ok = await callTool(gw, sid, 'echo', { text: 'after' });
    assert.equal(ok.response.result.content[0].text, 'after');
  });
});

test('the admin view past its ceiling leaves whole sessions out and says so, and stays JSON', async (t) => {
  if (pooledSkip(t, 'reads the admin view\'s child-mode sessions and their entries (a pooled session\'s calls are its pool child\'s; 300 of them pass one child\'s pool_child_max_inflight)')) return;
  // One session holding 300 requests with 64 KiB ids (19 MiB of ids) passes the 16 MiB ceiling.
  await withGateway({
    gateway: { admin_token: TOKEN, max_id_bytes: 65536, max_inflight_per_session: 1024, max_body_bytes: 1048576, stdin_queue_bytes: 67108864 },
    // 300 requests of one principal in flight: past max_inflight_per_principal's default.
    servers: [{ name: 'example', path: '/mcp', extra: 'max_inflight_per_principal = 0' }],
  }, async (gw) => {
    const small = await initSession(gw);
    const { sid } = await initSession(gw);
    const open = [];
    for (let i = 0; i < 300; i++) {
      const id = `${String(i).padStart(4, '0')}${'i'.repeat(65520)}`;
      const r = await post(gw, rpc('tools/call', { name: 'stubborn', arguments: { delay_ms: 600000 } }, id), { sid });
      assert.equal(r.status, 200);
      open.push(r);
    }
    await waitFor(async () => (await admin(gw)).truncated === true, 10000, 'a truncated admin view');
    const view = await admin(gw);
    assert.equal(view.truncated, true);
    assert.ok(view.sessions_omitted >= 1);
    assert.equal(view.sessions.length + view.sessions_omitted, 2);
    assert.ok(!view.sessions.some((s) => s.id === sid), 'the huge session is left out whole');
    assert.equal(view.counters.sessions_open, 2);
    // The gateway goes on serving.
    const ok = await callTool(gw, small.sid, 'echo', { text: 'still' });
    assert.equal(ok.response.result.content[0].text, 'still');
    for (const r of open) r.drop();
  });
});
