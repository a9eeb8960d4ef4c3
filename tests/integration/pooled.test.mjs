// SPDX-License-Identifier: MIT
// Pooled legacy sessions (session_mode = pooled): a legacy session that owns no child. Seen from
// outside: the gateway's children (/proc), what the example server's children received (their
// --log files), and what each session's client gets back.
//   - initialize answered by the gateway from the pool's handshake, no process per session;
//     session_mode = child unchanged beside it;
//   - two sessions on one child, the same JSON-RPC ids, interleaved: each gets its own answers;
//   - cancels: the client's by its own id, a dropped stream, DELETE, request_timeout_ms; a
//     client cancel or DELETE of a call still queued in the pool (it never reaches a child);
//   - progress on the request's own stream; logging/setLevel per session;
//   - the child's questions to the one session whose call asked; what pooled mode refuses
//     (a question it cannot attribute or not declared) and the
//     configurations it refuses; idle expiry, max_sessions and max_sessions_per_principal count
//     pooled sessions; the tool policy; subscriptions and list changes; the SDK v1 client.
// Nothing sleeps to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, checkConfigText, del, everythingServer, get, initSession, metricSamples, post, rpc, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';

const LISTEN_FIXTURE = path.join(process.env.GW_SOURCE_ROOT ?? '.', 'tests/fixtures/listen_server.mjs');
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const POOLED = 'session_mode = pooled\npool_max_children = 1';
const ADMIN = 'pooled-admin-token-0123456789abcdef';
const pooled = (extra = '') => ({ servers: [{ name: 'example', path: '/mcp', extra: `${POOLED}\n${extra}` }] });
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const answerOf = (r) => r.events().map((e) => e.json).find(isAnswer);

async function pooledSession(gw, version = '2025-06-18') {
  const s = await initSession(gw, { version });
  assert.match(s.sid, /^~1[A-Za-z0-9_-]{150,254}$/, 'a pooled session id: sealed, no instance prefix');
  return s;
}

/** A call that runs until cancelled, with a progress token: resolves once its progress 0 came. */
async function heldCall(gw, sid, id, tag) {
  const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag }, _meta: { progressToken: `pt-${tag}` } }, id), { sid });
  assert.equal(r.status, 200);
  const prog = await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
  assert.equal(prog.json.params.progressToken, `pt-${tag}`, 'progress with the client\'s own token');
  const seen = await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), scaled(5000), 'child to read the call');
  return { r, childId: seen.id };
}

const childCancelOf = (gw, childId) => gw.childMessages().find((m) => m.method === 'notifications/cancelled' && m.params?.requestId === childId);

test('initialize is answered from the pool\'s handshake: one child serves many sessions; child mode beside it is unchanged', async () => {
  const servers = [
    { name: 'example', path: '/mcp', extra: POOLED },
    { name: 'child', path: '/child', log: `${tmpdir()}/child.log` },
  ];
  await withGateway({ servers, gateway: { admin_token: ADMIN } }, async (gw) => {
    const sessions = [];
    for (let i = 0; i < 6; i++) sessions.push(await pooledSession(gw, i % 2 ? '2025-03-26' : '2025-11-25'));
    assert.equal(kids(gw.proc.pid).length, 1, 'one pool child for six sessions');
    const init = sessions[0].result;
    assert.equal(init.protocolVersion, '2025-11-25', 'the client\'s version, which the gateway serves');
    assert.equal(sessions[1].result.protocolVersion, '2025-03-26');
    assert.equal(init.serverInfo.name, 'mcp-example-server', 'serverInfo as the child gave it');
    assert.ok(init.capabilities.tools && init.capabilities.logging, 'capabilities as the child gave them');
    const odd = await initSession(gw, { version: '2099-01-01' });
    assert.equal(odd.result.protocolVersion, '2025-11-25', 'an unknown version: the latest');
    // The admin view counts them with the server's pool (no child of their own).
    const view = await (await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${ADMIN}` } })).json();
    assert.equal(view.pools.find((p) => p.server === 'example' && !p.retired).pooled_sessions, 7);
    // No initialize of a session reached the child: only the pool's own.
    assert.equal(gw.childMessages().filter((m) => m.method === 'initialize').length, 1);
    // session_mode = child (the default) on the other server: a child per session, as before.
    const before = kids(gw.proc.pid).length;
    const c = await initSession(gw, { url: `${gw.base}/child` });
    assert.doesNotMatch(c.sid, /~/);
    assert.equal(kids(gw.proc.pid).length, before + 1, 'child mode spawns its child');
    // A pooled id is never another server's.
    const r = await post(gw, rpc('tools/list', {}), { sid: sessions[0].sid, url: `${gw.base}/child` });
    assert.equal(r.status, 404);
  });
});

test('two sessions on one child, the same ids, interleaved: each gets its own answers', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await pooledSession(gw);
    const b = await pooledSession(gw);
    const calls = [];
    for (let i = 0; i < 20; i++)
      for (const [who, s] of [['A', a], ['B', b]])
        calls.push(post(gw, rpc('tools/call', { name: 'echo', arguments: { text: `${who}-${i}` } }, i), { sid: s.sid }).then(async (r) => { await r.done(scaled(10000)); return { who, i, j: answerOf(r) }; }));
    for (const { who, i, j } of await Promise.all(calls)) {
      assert.equal(j.id, i, 'the client\'s own id');
      assert.equal(textOf(j), `${who}-${i}`, `${who} gets its own answer to id ${i}`);
      assert.equal(j.result.resultType, undefined, 'a legacy result is not stamped');
    }
    assert.equal(kids(gw.proc.pid).length, 1);
  });
});

test('a client cancel by its own id reaches the child under the child\'s id; the stream ends without a response', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await pooledSession(gw);
    const b = await pooledSession(gw);
    const held = await heldCall(gw, a.sid, 7, 'a7');
    const other = await heldCall(gw, b.sid, 7, 'b7'); // the same id in the other session
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'no' } }, { sid: a.sid });
    assert.equal(c.status, 202);
    await held.r.done(scaled(5000));
    assert.equal(answerOf(held.r), undefined, 'no response after the client\'s cancel');
    await waitFor(() => childCancelOf(gw, held.childId), scaled(5000), 'the child to get the cancel');
    assert.equal(childCancelOf(gw, other.childId), undefined, 'the other session\'s call is untouched');
    assert.equal(other.r.ended, false);
    await del(gw, { sid: b.sid });
  });
});

test('a dropped stream, DELETE and request_timeout_ms each cancel the call at the child', async () => {
  await withGateway(pooled('request_timeout_ms = 400'), async (gw) => {
    const a = await pooledSession(gw);
    const dropped = await heldCall(gw, a.sid, 1, 'drop');
    dropped.r.drop();
    await waitFor(() => childCancelOf(gw, dropped.childId), scaled(5000), 'cancel on drop');
    const timed = await heldCall(gw, a.sid, 2, 'late');
    await timed.r.done(scaled(5000));
    assert.match(answerOf(timed.r).error.message, /timed out/);
    await waitFor(() => childCancelOf(gw, timed.childId), scaled(5000), 'cancel on timeout');
  });
  await withGateway(pooled(), async (gw) => {
    const a = await pooledSession(gw);
    const x = await heldCall(gw, a.sid, 1, 'x');
    const y = await heldCall(gw, a.sid, 2, 'y');
    const d = await del(gw, { sid: a.sid });
    assert.equal(d.status, 200);
    await waitFor(() => childCancelOf(gw, x.childId) && childCancelOf(gw, y.childId), scaled(5000), 'every call cancelled by DELETE');
    await x.r.done(scaled(5000));
    const gone = await post(gw, rpc('tools/list', {}), { sid: a.sid });
    assert.equal(gone.status, 404, 'the session is gone');
    assert.equal(kids(gw.proc.pid).length, 1, 'the shared child stays');
  });
});

// A call queues in the pool while no child has room for it and one is starting: two children at
// most, one call each; the first child runs a cancel_self call, the second holds its initialize
// (--hold-init) until SIGUSR1, so the second call waits in the queue for as long as the test wants.
const QUEUEING = {
  servers: [{ name: 'example', path: '/mcp', args: ['--hold-init'], extra: 'session_mode = pooled\npool_max_children = 2\npool_child_max_inflight = 1\nmax_inflight_per_principal = 2' }],
  gateway: { admin_token: ADMIN },
};
const holdingNow = (gw) => gw.logs().match(/child stderr: mcp-example-server: holding the initialize answer until SIGUSR1/g)?.length ?? 0;
const queuedNow = async (gw) => (await (await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${ADMIN}` } })).json()).pools.find((p) => p.server === 'example' && !p.retired)?.queued;
const metricOf = async (gw, name, labels) => {
  const text = await (await fetch(`${gw.base}/metrics`, { headers: { Authorization: `Bearer ${ADMIN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

/** A session, its call in flight on the first child (busy), and a call (tools/call echo, id 2) queued behind the second child's start. */
async function queuedCall(gw) {
  const init = initSession(gw); // answered once the first child is ready
  // SIGUSR1 only once the child holds its initialize: before its handler is set, it would end it.
  await waitFor(() => holdingNow(gw) === 1, scaled(5000), 'the first child to hold its initialize');
  const [first] = kids(gw.proc.pid);
  process.kill(first, 'SIGUSR1');
  const a = await init;
  const busy = await heldCall(gw, a.sid, 1, 'busy');
  const queued = post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'queued-call' } }, 2), { sid: a.sid });
  await waitFor(async () => (await queuedNow(gw)) === 1, scaled(5000), 'the call to queue');
  await waitFor(() => holdingNow(gw) === 2, scaled(5000), 'the second child to hold its initialize');
  const second = kids(gw.proc.pid).find((pid) => pid !== first);
  return { a, busy, queued, second };
}
const reachedChild = (gw) => gw.childMessages().some((m) => m.params?.arguments?.text === 'queued-call');

test('a client cancel of a call still queued in the pool: it leaves the queue, no child ever gets it, its stream ends without a response', async () => {
  await withGateway(QUEUEING, async (gw) => {
    const { a, busy, queued, second } = await queuedCall(gw);
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'no' } }, { sid: a.sid });
    assert.equal(c.status, 202);
    process.kill(second, 'SIGUSR1'); // the second child is ready: what still waits goes to it
    const q = await queued;
    await q.done(scaled(5000));
    assert.equal(answerOf(q), undefined, `no response to a cancelled call: ${q.text()}`);
    assert.equal(await queuedNow(gw), 0, 'the queue is empty');
    // The second child is idle: a call now goes to it and is answered; had the cancelled call
    // reached it, it would have come first (the child reads in order).
    const after = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'after' } }, 3), { sid: a.sid });
    await after.done(scaled(5000));
    assert.equal(textOf(answerOf(after)), 'after', after.text());
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.text === 'after'), scaled(5000), 'the child to log the later call');
    assert.ok(!reachedChild(gw), 'the cancelled call never reached a child');
    assert.equal(busy.r.ended, false, 'the session\'s other call is untouched');
    // Counted once as a client cancel; its max_inflight_per_principal count given back once: with
    // the busy call in flight, one more fits (2), and the next is refused.
    assert.equal(await metricOf(gw, 'mcpgw_cancels_total', ['server="example"', 'direction="to_child"', 'reason="client"']), 1);
    const third = await heldCall(gw, a.sid, 4, 'third');
    const over = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'over' } }, 5), { sid: a.sid });
    await over.done(scaled(5000));
    assert.equal(over.status, 429, over.text());
    assert.match(over.text(), /max_inflight_per_principal/);
    await del(gw, { sid: a.sid });
    await busy.r.done(scaled(5000));
    await third.r.done(scaled(5000));
    await waitFor(async () => (await metricOf(gw, 'mcpgw_inflight_requests', ['direction="to_child"'])) === 0, scaled(5000), 'nothing in flight');
  });
});

test('DELETE of a session whose call is queued: the call ends with an error, no child ever gets it; a session with a call does not expire', async () => {
  await withGateway({ ...QUEUEING, gateway: { ...QUEUEING.gateway, session_idle_timeout_s: 1 } }, async (gw) => {
    const { a, busy, queued, second } = await queuedCall(gw);
    // Idle expiry passes over a session while it has a call (queued or in flight).
    const label = `sealed:${crypto.createHash('sha256').update(a.sid).digest('hex').slice(0, 16)}`;
    const t0 = Date.now();
    await waitFor(() => Date.now() - t0 > 2500, scaled(5000), 'past the idle timeout');
    assert.doesNotMatch(gw.logs(), new RegExp(`session=${label} pooled session ended`), 'a session with calls does not expire');
    assert.equal(await queuedNow(gw), 1, 'still queued');
    const d = await del(gw, { sid: a.sid });
    assert.equal(d.status, 200);
    const q = await queued;
    await q.done(scaled(5000));
    assert.match(answerOf(q)?.error?.message ?? '', /session/, `the queued call's error: ${q.text()}`);
    assert.equal(answerOf(q).id, 2, 'under the client\'s id');
    await busy.r.done(scaled(5000));
    assert.equal(await queuedNow(gw), 0);
    process.kill(second, 'SIGUSR1');
    // The second child is ready and idle; a new session's call reaches it, and the deleted
    // session's queued call never did.
    const b = await initSession(gw);
    const after = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'after' } }, 3), { sid: b.sid });
    await after.done(scaled(5000));
    assert.equal(textOf(answerOf(after)), 'after', after.text());
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.text === 'after'), scaled(5000), 'the child to log the later call');
    assert.ok(!reachedChild(gw), 'the deleted session\'s queued call never reached a child');
    assert.equal(await metricOf(gw, 'mcpgw_cancels_total', ['server="example"', 'direction="to_child"', 'reason="deleted"']), 2, 'the busy call and the queued one');
  });
});

test('logging/setLevel is the session\'s own: the gateway filters each session\'s log lines', async () => {
  await withGateway(pooled(), async (gw) => {
    const quiet = await pooledSession(gw);
    const loud = await pooledSession(gw);
    const lv = await post(gw, rpc('logging/setLevel', { level: 'error' }), { sid: quiet.sid });
    await lv.done();
    assert.deepEqual(answerOf(lv).result, {});
    const bad = await post(gw, rpc('logging/setLevel', { level: 'loud' }), { sid: quiet.sid });
    await bad.done();
    assert.equal(answerOf(bad).error.code, -32602);
    for (const [s, want] of [[quiet, 0], [loud, 1]]) {
      const r = await post(gw, rpc('tools/call', { name: 'notify', arguments: { level: 'info', text: 'hello' } }), { sid: s.sid });
      await r.done(scaled(5000));
      assert.equal(r.events().filter((e) => e.json?.method === 'notifications/message').length, want);
      assert.equal(textOf(answerOf(r)), 'ok');
    }
    // The shared child runs at the most verbose level a session asked: error, then debug.
    const levels = () => gw.childMessages().filter((m) => m.method === 'logging/setLevel').map((m) => m.params.level);
    assert.deepEqual(levels(), ['error']);
    const dbg = await post(gw, rpc('logging/setLevel', { level: 'debug' }), { sid: loud.sid });
    await dbg.done();
    await waitFor(() => levels().length === 2, scaled(5000), 'the child to run at debug');
    assert.deepEqual(levels(), ['error', 'debug']);
    // quiet still gets only its own level's lines; loud now every line.
    const r = await post(gw, rpc('tools/call', { name: 'notify', arguments: { level: 'warning', text: 'w' } }), { sid: quiet.sid });
    await r.done(scaled(5000));
    assert.equal(r.events().filter((e) => e.json?.method === 'notifications/message').length, 0);
  });
});

test('a child\'s log line goes to the session whose calls are all that is in flight on its child, never to another session', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await pooledSession(gw);
    const b = await pooledSession(gw);
    const logsOf = (r) => r.events().filter((e) => e.json?.method === 'notifications/message').map((e) => e.json.params.data);
    const dropped = () => metricOf(gw, 'mcpgw_pool_messages_dropped_total', ['server="example"', 'reason="unattributed"']);
    // Two calls of a on the one child: a line written meanwhile is a's, on its oldest call's stream.
    const held = await heldCall(gw, a.sid, 10, 'a-held');
    const n = await post(gw, rpc('tools/call', { name: 'notify', arguments: { level: 'info', text: 'mine' } }, 11), { sid: a.sid });
    await n.done(scaled(5000));
    assert.equal(textOf(answerOf(n)), 'ok');
    await waitFor(() => logsOf(held.r).length === 1, scaled(5000), 'a\'s line on its held call\'s stream');
    assert.deepEqual(logsOf(held.r).concat(logsOf(n)), ['mine'], 'once, to a');
    const before = await dropped();
    // b's call beside a's: the child's line could be either's, so it is nobody's.
    const m = await post(gw, rpc('tools/call', { name: 'notify', arguments: { level: 'info', text: 'whose' } }, 12), { sid: b.sid });
    await m.done(scaled(5000));
    assert.equal(textOf(answerOf(m)), 'ok');
    assert.deepEqual(logsOf(m), [], 'not to b');
    assert.equal(await dropped(), before + 1, 'dropped and counted');
    assert.deepEqual(logsOf(held.r), ['mine'], 'nor to a');
    held.r.drop();
  });
});

test('what pooled mode does not serve is refused with a clear error', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await pooledSession(gw, '2025-03-26');
    for (const m of ['tasks/unknown', 'server/discover']) {
      const r = await post(gw, rpc(m, { uri: 'x://y' }), { sid: a.sid });
      await r.done();
      assert.equal(answerOf(r).error.code, -32601);
    }
    // A question its client did not declare the capability for: the child gets an error.
    const q = await post(gw, rpc('tools/call', { name: 'sample', arguments: { prompt: 'p' } }), { sid: a.sid });
    await q.done(scaled(5000));
    assert.ok(!q.events().some((e) => e.json?.method === 'sampling/createMessage'));
    assert.ok(isAnswer(answerOf(q)));
    await gw.waitLog(/sampling\/createMessage answered with an error: the client did not declare this capability at initialize/);
    const g = await get(gw, { sid: a.sid });
    assert.equal(g.status, 200, 'the GET stream opens');
    const g2 = await get(gw, { sid: a.sid });
    assert.equal(g2.status, 409, 'one GET stream per session');
    g.drop();
    g2.drop();
  });
  const dir = tmpdir();
  for (const [extra, re] of [['token_exchange = on\ntoken_exchange_audience = a\ntoken_exchange_client_id = c', /session_mode|token_exchange/]]) {
    const r = checkConfigText(dir, 'bad', `[gateway]\nlisten = 127.0.0.1:0\n[server:x]\npath = /mcp\ncommand = ${EXAMPLE}\nsession_mode = pooled\n${extra}\n`);
    assert.notEqual(r.status, 0, r.out);
    assert.match(r.out, re);
  }
});

test('mcpgw_sessions_open counts pooled sessions beside child-mode ones', async () => {
  const servers = [
    { name: 'example', path: '/mcp', extra: POOLED },
    { name: 'child', path: '/child', log: `${tmpdir()}/child.log` },
  ];
  await withGateway({ servers, gateway: { admin_token: ADMIN } }, async (gw) => {
    await pooledSession(gw);
    await pooledSession(gw);
    await initSession(gw, { url: `${gw.base}/child` });
    const m = metricSamples(await (await fetch(`${gw.base}/metrics`, { headers: { Authorization: `Bearer ${ADMIN}` } })).text());
    assert.equal(m['mcpgw_sessions_open{server="example"}'], 2, 'pooled sessions are open sessions');
    assert.equal(m['mcpgw_sessions{server="example",mode="pooled"}'], 2);
    assert.equal(m['mcpgw_sessions_open{server="child"}'], 1);
    assert.equal(m.mcpgw_sessions_open, 3);
  });
});

test('--check-config says a pooled server\'s legacy sessions are pooled', () => {
  const dir = tmpdir();
  const r = checkConfigText(dir, 'modes', `[gateway]\nlisten = 127.0.0.1:0\n[server:x]\npath = /mcp\ncommand = ${EXAMPLE}\nsession_mode = pooled\n[server:y]\npath = /y\ncommand = ${EXAMPLE}\n`);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /\n {2}\[server:x\] \/mcp: pooled legacy sessions and stateless \(2026-07-28\) requests on a pool of 0\.\.4 children /);
  assert.match(r.out, /\n {2}\[server:y\] \/y: stateless pool \(2026-07-28\) of 0\.\.4 children /);
});

test('the open-file warning at start counts no descriptor for a pooled session, of either transport', async () => {
  // 300 descriptors: a session of its own child would take 4 (4,000 for max_sessions); a pooled
  // one none, beside 16 connections and the pool's children. A 2024-11-05 session (legacy_sse)
  // is on the pool too: its one stream is a connection.
  const limits = { max_sessions: 1000, max_connections: 16 };
  for (const [legacy_sse, warned] of [[0, false], [1, false]]) {
    await withGateway({ ...pooled(), nofile: 300, gateway: { ...limits, legacy_sse } }, async (gw) => {
      const s = await pooledSession(gw);
      assert.ok(s.sid);
      assert.equal(/open-file limit 300 is below/.test(gw.logs()), warned, `legacy_sse = ${legacy_sse}: ${gw.logs().split('\n').find((l) => /open-file/.test(l))}`);
    });
  }
  await withGateway({ nofile: 300, gateway: limits }, async (gw) => {
    assert.match(gw.logs(), /open-file limit 300 is below the 4\d{3} that max_sessions = 1000 and max_connections = 16 may use/);
  });
});

test('a pooled session\'s initialize is the gateway\'s: it counts toward no max_inflight_per_principal, as in child mode', async () => {
  await withGateway(pooled('max_inflight_per_principal = 1'), async (gw) => {
    const a = await pooledSession(gw);
    const held = await heldCall(gw, a.sid, 'h', 'held');
    // The principal (the client's address) has its one request in flight: a new session is
    // still made; its first call is the one too many.
    const b = await pooledSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'b' } }), { sid: b.sid });
    await r.done(scaled(5000));
    assert.equal(r.status, 429, r.text());
    assert.match(r.text(), /max_inflight_per_principal/);
    held.r.drop();
    await waitFor(async () => {
      const x = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'b' } }), { sid: b.sid });
      await x.done(scaled(5000));
      return x.status === 200 && textOf(answerOf(x)) === 'b';
    }, scaled(5000), 'b served once a\'s call is gone');
  });
});

test('/readyz and mcpgw_ready count pooled sessions toward max_sessions, as new sessions are refused', async () => {
  await withGateway({ ...pooled(), gateway: { max_sessions: 2, admin_token: ADMIN } }, async (gw) => {
    const ready = async () => {
      const r = await fetch(`${gw.base}/readyz`);
      return { status: r.status, body: await r.json() };
    };
    const a = await pooledSession(gw);
    assert.equal((await ready()).status, 200);
    await pooledSession(gw);
    const full = await ready();
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.equal(full.body.reason, 'max_sessions reached');
    const m = metricSamples(await (await fetch(`${gw.base}/metrics`, { headers: { Authorization: `Bearer ${ADMIN}` } })).text());
    assert.equal(m.mcpgw_ready, 0);
    const d = await del(gw, { sid: a.sid });
    await d.done();
    assert.equal(d.status, 200);
    assert.equal((await ready()).status, 200, 'room again after a DELETE');
  });
});

test('a forgotten pooled session\'s record expires, its sealed id still opens; max_sessions counts pooled sessions', async () => {
  await withGateway({ ...pooled(), gateway: { session_idle_timeout_s: 1, max_sessions: 2 } }, async (gw) => {
    const a = await pooledSession(gw);
    await pooledSession(gw);
    const full = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }));
    await full.done();
    assert.equal(full.status, 503);
    // Nothing touches it (a request would keep it): the end of its record here is logged, by
    // its label (a sealed id is never logged).
    const label = `sealed:${crypto.createHash('sha256').update(a.sid).digest('hex').slice(0, 16)}`;
    await gw.waitLog(new RegExp(`session=${label} pooled session ended`), scaled(8000));
    assert.ok(!gw.logs().includes(a.sid), 'the sealed id is in no log line');
    // Its id still opens (session_max_age_s): the session is taken up again with fresh local
    // state, counted by max_sessions as before.
    const r = await post(gw, rpc('ping'), { sid: a.sid });
    await r.done();
    assert.equal(r.status, 200, r.text());
    await gw.waitLog(new RegExp(`session=${label} pooled session taken up here`));
    await pooledSession(gw);
    const over = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }));
    await over.done();
    assert.equal(over.status, 503, 'a taken-up session counts toward max_sessions');
  });
});

test('a child\'s question reaches the one session whose call asked it, and its answer goes back; an unattributable one is refused', async () => {
  await withGateway(pooled(), async (gw) => {
    const caps = { sampling: {}, roots: {} };
    const a = await initSession(gw, { capabilities: caps });
    const b = await initSession(gw, { capabilities: caps });
    const g = await get(gw, { sid: b.sid }); // b's GET stream must carry nothing of a's
    assert.equal(g.status, 200);
    const r = await post(gw, rpc('tools/call', { name: 'sample', arguments: { prompt: 'hi' } }, 5), { sid: a.sid });
    const ask = await r.waitEvent((j) => j.method === 'sampling/createMessage', scaled(5000));
    assert.match(String(ask.json.id), /^mcpgw-ask-\d+$/, 'an id the gateway minted');
    const childAsk = await waitFor(() => gw.childMessages().length && gw.logs().match(/child request sampling\/createMessage sent to the session's client/), scaled(5000), 'the question to be sent');
    assert.ok(childAsk);
    const ans = await post(gw, { jsonrpc: '2.0', id: ask.json.id, result: { role: 'assistant', content: { type: 'text', text: 'from-a' }, model: 'm' } }, { sid: a.sid });
    assert.equal(ans.status, 202);
    await r.done(scaled(5000));
    assert.match(JSON.stringify(answerOf(r).result), /from-a/, 'the tool got a\'s answer');
    // The same answer from b's session names no question of b's: dropped, nothing reaches the child.
    const stray = await post(gw, { jsonrpc: '2.0', id: ask.json.id, result: {} }, { sid: b.sid });
    assert.equal(stray.status, 202);
    // Two calls in flight on the one child: a question cannot be attributed, the child gets an error.
    const held = await heldCall(gw, b.sid, 9, 'b9');
    const q = await post(gw, rpc('tools/call', { name: 'roots', arguments: {} }, 6), { sid: a.sid });
    await q.done(scaled(5000));
    assert.ok(!q.events().some((e) => e.json?.method === 'roots/list'));
    await gw.waitLog(/roots\/list answered with an error: not available: the gateway cannot tell which client request/);
    assert.ok(!g.events().some((e) => e.json?.method), 'b\'s GET stream saw nothing');
    assert.ok(!held.r.events().some((e) => e.json?.method === 'roots/list'));
    g.drop();
    await del(gw, { sid: b.sid });
  });
});

test('the child\'s cancel of its own question reaches the session\'s client', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await initSession(gw, { capabilities: { sampling: {} } });
    const r = await post(gw, rpc('tools/call', { name: 'child_cancel', arguments: { delay_ms: 50 } }, 3), { sid: a.sid });
    const ask = await r.waitEvent((j) => j.method === 'sampling/createMessage', scaled(5000));
    const c = await r.waitEvent((j) => j.method === 'notifications/cancelled', scaled(5000));
    assert.equal(c.json.params.requestId, ask.json.id, 'the cancel names the id the client saw');
    await r.done(scaled(5000));
    assert.ok(isAnswer(answerOf(r)));
  });
});

test('subscriptions are each session\'s own, placed once at the child and counted; list changes reach every session', async () => {
  const dir = tmpdir();
  const log = path.join(dir, 'subs.log');
  const servers = [{ name: 'listen', path: '/mcp', command: `${process.execPath} ${LISTEN_FIXTURE}`, env: `LISTEN_FIXTURE_LOG=${log}`, extra: POOLED }];
  const subs = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  await withGateway({ servers }, async (gw) => {
    const [a, b, c] = [await initSession(gw), await initSession(gw), await initSession(gw)];
    assert.equal(a.result.capabilities.resources.subscribe, true, 'subscribe is served');
    const gets = {};
    for (const [k, s] of [['a', a], ['b', b], ['c', c]]) gets[k] = await get(gw, { sid: s.sid });
    const call = async (s, method, params) => { const r = await post(gw, rpc(method, params), { sid: s.sid }); await r.done(scaled(5000)); return answerOf(r); };
    assert.deepEqual((await call(a, 'resources/subscribe', { uri: 'test://a' })).result, {});
    await call(b, 'resources/subscribe', { uri: 'test://a' });
    await call(b, 'resources/subscribe', { uri: 'test://b' });
    await waitFor(() => subs().length === 2, scaled(5000), 'two subscriptions at the child');
    assert.deepEqual(subs().map((x) => `${x.method} ${x.uri}`).sort(), ['resources/subscribe test://a', 'resources/subscribe test://b']);
    const updates = (k) => gets[k].events().filter((e) => e.json?.method === 'notifications/resources/updated').map((e) => e.json.params.uri);
    await call(a, 'tools/call', { name: 'update', arguments: { uri: 'test://a' } });
    await call(a, 'tools/call', { name: 'update', arguments: { uri: 'test://b' } });
    await waitFor(() => updates('b').length === 2 && updates('a').length === 1, scaled(5000), 'the updates');
    assert.deepEqual(updates('a'), ['test://a'], 'a hears only what it subscribed');
    assert.deepEqual(updates('b').sort(), ['test://a', 'test://b']);
    assert.deepEqual(updates('c'), []);
    await call(a, 'resources/unsubscribe', { uri: 'test://a' });
    assert.equal(subs().length, 2, 'b still holds test://a: nothing sent to the child');
    await call(b, 'resources/unsubscribe', { uri: 'test://a' });
    await waitFor(() => subs().length === 3, scaled(5000), 'the last one unsubscribes');
    assert.equal(subs()[2].method, 'resources/unsubscribe');
    await call(c, 'tools/call', { name: 'change_tools', arguments: {} });
    for (const k of ['a', 'b', 'c'])
      await waitFor(() => gets[k].events().some((e) => e.json?.method === 'notifications/tools/list_changed'), scaled(5000), `${k} to hear the list change`);
    for (const k of ['a', 'b', 'c']) gets[k].drop();
    await del(gw, { sid: b.sid }); // its last subscription goes with it
    await waitFor(() => subs().length === 4, scaled(5000), 'DELETE unsubscribes what only it held');
  });
});

test('the SDK v1 client and server-everything through a pooled server: sessions share one child, each gets its own', async () => {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { CreateMessageRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  await withGateway({ servers: [everythingServer({ extra: POOLED })] }, async (gw) => {
    const clients = [];
    for (let i = 0; i < 3; i++) {
      const client = new Client({ name: `pooled-${i}`, version: '1.0.0' }, { capabilities: { sampling: {} } });
      client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'm', role: 'assistant', content: { type: 'text', text: `sampled-${i}` } }));
      const transport = new StreamableHTTPClientTransport(new URL(gw.url));
      await client.connect(transport);
      assert.match(transport.sessionId, /^~/);
      assert.equal(client.getServerVersion().name, 'mcp-servers/everything');
      assert.ok(client.getInstructions(), 'instructions as the child gave them');
      clients.push({ client, transport });
    }
    assert.equal(kids(gw.proc.pid).length, 1, 'one child for three sessions');
    const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    const echoes = await Promise.all(clients.flatMap(({ client }, i) => [0, 1, 2].map((k) => client.callTool({ name: 'echo', arguments: { message: `${i}.${k}` } }).then((r) => [i, k, text(r)]))));
    for (const [i, k, t] of echoes) assert.equal(t, `Echo: ${i}.${k}`);
    const progress = [];
    const r = await clients[0].client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    assert.match(text(r), /Long running operation completed/);
    assert.deepEqual(progress, [1, 2, 3]);
    const sampled = await clients[1].client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'p', maxTokens: 5 } });
    assert.match(text(sampled), /sampled-1/, 'the question reached the session whose call asked it');
    await clients[2].client.setLoggingLevel('debug');
    const ac = new AbortController();
    const call = clients[2].client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }, undefined, { signal: ac.signal, onprogress: () => ac.abort('stop') });
    await assert.rejects(call);
    await gw.waitLog(/client cancel forwarded: method=tools\/call child=pool:everything#\d+/, scaled(5000));
    for (const { client, transport } of clients) {
      await transport.terminateSession();
      await client.close();
    }
    assert.equal(kids(gw.proc.pid).length, 1, 'the pool child stays');
  });
});

test('a pooled session\'s tools/list and tools/call follow the tool policy; its principal\'s session limit counts pooled sessions', async () => {
  await withGateway({ ...pooled('denied_tools = crash'), gateway: { max_sessions: 100 } }, async (gw) => {
    const a = await pooledSession(gw);
    const l = await post(gw, rpc('tools/list', {}), { sid: a.sid });
    await l.done(scaled(5000));
    const names = answerOf(l).result.tools.map((t) => t.name);
    assert.ok(names.includes('echo') && !names.includes('crash'), 'the denied tool is hidden');
    const c = await post(gw, rpc('tools/call', { name: 'crash', arguments: {} }), { sid: a.sid });
    await c.done(scaled(5000));
    assert.equal(answerOf(c).error.code, -32602);
    assert.match(answerOf(c).error.message, /Unknown tool: crash/);
    assert.equal(kids(gw.proc.pid).length, 1, 'the child was never asked (it would have exited)');
  });
  await withGateway({ ...pooled(), auth: { max_sessions_per_principal: 2 } }, async (gw) => {
    await pooledSession(gw);
    await pooledSession(gw);
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }));
    await r.done();
    assert.equal(r.status, 429);
    assert.match(r.text(), /max_sessions_per_principal/);
  });
});
