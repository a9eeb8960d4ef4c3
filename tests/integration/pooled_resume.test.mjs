// SPDX-License-Identifier: MIT
// Resumable streams of pooled sessions (session_mode = pooled), at the instance that holds them,
// with a child-mode session's rules and keys: event ids "<stream>-<seq>", the 2025-11-25 priming
// event, GET + Last-Event-ID replaying the one stream it names after that event and going on live,
// 409 while another connection reads it, 410 for what cannot be replayed (malformed, unknown,
// finished), disconnect_grace_ms before a dropped call is cancelled at its child (and the cancel
// when the client does not come back), a plain GET reading on a dropped GET stream, SSE polling
// (sse_close_after_ms), idle expiry of a session whose streams are kept; across two instances
// sharing a key file, an id of the other instance's stream gets 410 and the next GET works.
// The example server's cancel_self answers only on SIGUSR1: calls stay in flight as long as a
// test wants, without a clock.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { get, initSession, parseEventId, post, request, resume, rpc, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const POOLED = 'session_mode = pooled\npool_max_children = 1';
const ADMIN = 'pooled-resume-admin-0123456789abcdef';
const LISTEN_FIXTURE = path.join(process.env.GW_SOURCE_ROOT ?? '.', 'tests/fixtures/listen_server.mjs');
const pooled = (gateway = {}) => ({ gateway, servers: [{ name: 'example', path: '/mcp', extra: POOLED }] });
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');

/** A cancel_self call (answers on SIGUSR1) with a progress token: resolves once its progress 0 came. */
async function heldCall(gw, sid, tag) {
  const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag }, _meta: { progressToken: `pt-${tag}` } }, `id-${tag}`), { sid });
  assert.equal(r.status, 200, r.text());
  await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
  await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), scaled(5000), 'child to read the call');
  return r;
}

/** Resumes with lastId and expects the refusal `status` with a JSON-RPC error body. */
async function refused(gw, sid, lastId, status) {
  const r = await resume(gw, sid, lastId);
  await r.done(scaled(5000));
  assert.equal(r.status, status, `Last-Event-ID ${JSON.stringify(lastId)}: HTTP ${r.status} ${r.text()}`);
  const j = r.json();
  assert.equal(j.error.code, -32600, r.text());
}

const release = (gw) => { for (const pid of kids(gw.proc.pid)) process.kill(pid, 'SIGUSR1'); };

test('2025-11-25: a pooled session\'s POST and GET streams start with a priming event and number their events; ids unique per session', async () => {
  await withGateway(pooled({ sse_retry_ms: 1500 }), async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    assert.match(s.sid, /^~1/);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const r = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 2, interval_ms: 1 }, _meta: { progressToken: 'p' } }), { sid: s.sid });
    await r.done(scaled(5000));
    await waitFor(() => g.completeEvents().length >= 1, scaled(5000), 'the GET stream\'s priming event');
    const streams = new Set();
    for (const [name, x] of [['POST', r], ['GET', g]]) {
      const evs = x.completeEvents();
      assert.equal(evs[0].data, '', `${name}: the priming event comes first: ${x.text()}`);
      assert.equal(evs[0].retry, '1500', `${name}: retry`);
      const first = parseEventId(evs[0].id);
      assert.equal(first?.seq, 1, `${name}: priming id ${evs[0].id}`);
      evs.forEach((e, i) => assert.deepEqual(parseEventId(e.id), { stream: first.stream, seq: i + 1 }, `${name}: event ${i}`));
      streams.add(first.stream);
    }
    assert.equal(streams.size, 2, 'each stream its own number');
    assert.ok(isAnswer(r.events().at(-1).json), 'the answer is the last event');
    g.drop();
  });
});

test('a dropped POST stream waits disconnect_grace_ms: GET + Last-Event-ID replays it after that event and goes on live; 409 while read, 410 once finished', async () => {
  await withGateway(pooled({ disconnect_grace_ms: 60000 }), async (gw) => {
    const s = await initSession(gw, { version: '2025-06-18' });
    const r = await heldCall(gw, s.sid, 'grace');
    const seen = r.completeEvents();
    const last = seen.at(-1).id;
    assert.ok(parseEventId(last), `an event id on a 2025-06-18 pooled stream: ${r.text()}`);
    r.drop();
    await gw.waitLog(/client dropped POST stream \d+: its request waits up to 60000 ms for a resume/, scaled(5000));
    const back = await resume(gw, s.sid, last);
    assert.equal(back.status, 200, back.text());
    await refused(gw, s.sid, last, 409); // another connection reads it
    release(gw);
    await back.done(scaled(5000));
    const evs = back.events();
    assert.ok(evs.every((e) => parseEventId(e.id)?.stream === parseEventId(last).stream), `only the named stream: ${back.text()}`);
    assert.equal(parseEventId(evs[0].id).seq, parseEventId(last).seq + 1, 'from the event after Last-Event-ID');
    assert.equal(textOf(evs.at(-1).json), 'released', 'the answer on the resumed stream');
    assert.equal(evs.at(-1).json.id, 'id-grace', 'with the client\'s own id');
    assert.equal(childCancels(gw).length, 0, 'nothing was cancelled: the client came back in time');
    await refused(gw, s.sid, last, 410); // finished: nothing more follows
    await refused(gw, s.sid, `${parseEventId(last).stream + 7}-1`, 410); // no such stream
    await refused(gw, s.sid, 'not-an-id', 410);
  });
});

test('an answer that came while the client was away is replayed; a client that does not come back gets its call cancelled when the grace ends', async () => {
  await withGateway(pooled({ disconnect_grace_ms: 400 }), async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    // Answered while away: kept for a resume (replay_max_age_s), the answer replayed.
    const a = await heldCall(gw, s.sid, 'away');
    const lastA = a.completeEvents().at(-1).id;
    a.drop();
    await gw.waitLog(/client dropped POST stream \d+: its request waits up to 400 ms/, scaled(5000));
    release(gw);
    const back = await resume(gw, s.sid, lastA);
    assert.equal(back.status, 200, back.text());
    await back.done(scaled(5000));
    assert.equal(textOf(back.events().at(-1).json), 'released', back.text());
    // Not back in time: one "client disconnected" cancel, after the grace (a lower bound: not scaled).
    const b = await heldCall(gw, s.sid, 'gone');
    const lastB = b.completeEvents().at(-1).id;
    const dropped = Date.now();
    b.drop();
    const c = await waitFor(() => childCancels(gw).find((m) => m.params?.reason === 'client disconnected'), scaled(5000), 'the cancel after the grace');
    assert.ok(Date.now() - dropped >= 390, 'not before disconnect_grace_ms');
    assert.equal(childCancels(gw).length, 1, `one cancel: ${JSON.stringify(c)}`);
    await gw.waitLog(/no resume in time of POST stream \d+: its request cancelled/, scaled(5000));
    await refused(gw, s.sid, lastB, 410); // dropped: nothing of it is kept
  });
});

test('streams kept for a resume are bounded: the newest max_inflight_per_session of them stay, an older one gets 410', async () => {
  await withGateway(pooled({ disconnect_grace_ms: 60000, max_inflight_per_session: 2, admin_token: ADMIN }), async (gw) => {
    const calls = async () => {
      const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
      return JSON.parse(await r.done(scaled(5000))).pooled_sessions[0].calls;
    };
    const s = await initSession(gw, { version: '2025-11-25' });
    const last = [];
    for (const tag of ['k1', 'k2']) {
      const r = await heldCall(gw, s.sid, tag);
      last.push(r.completeEvents().at(-1).id);
      r.drop();
    }
    await waitFor(() => (gw.logs().match(/client dropped POST stream \d+: its request waits/g) ?? []).length === 2, scaled(5000), 'both drops');
    release(gw); // both answered while their clients are away: each stream kept with its answer
    await waitFor(async () => (await calls()) === 0, scaled(5000), 'the two calls answered');
    const third = await heldCall(gw, s.sid, 'k3');
    last.push(third.completeEvents().at(-1).id);
    third.drop();
    release(gw);
    // Three streams answered and unread; at most two are kept: the oldest goes.
    const oldest = parseEventId(last[0]).stream;
    await gw.waitLog(new RegExp(`POST stream ${oldest} no longer kept for a resume`), scaled(10000));
    await refused(gw, s.sid, last[0], 410);
    for (const id of last.slice(1)) {
      const back = await resume(gw, s.sid, id);
      assert.equal(back.status, 200, back.text());
      await back.done(scaled(5000));
      assert.equal(textOf(back.events().at(-1).json), 'released', back.text());
    }
  });
});

test('disconnect_grace_ms = 0 (the default): a dropped POST stream is cancelled at once and cannot be resumed', async () => {
  await withGateway(pooled(), async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const r = await heldCall(gw, s.sid, 'now');
    const last = r.completeEvents().at(-1).id;
    r.drop();
    await waitFor(() => childCancels(gw).find((m) => m.params?.reason === 'client disconnected'), scaled(5000), 'the cancel at once');
    await refused(gw, s.sid, last, 410);
  });
});

test('SSE polling (2025-11-25, sse_close_after_ms): the gateway ends a waiting POST\'s connection; the client resumes it and gets the answer; nothing is cancelled', async () => {
  await withGateway(pooled({ sse_close_after_ms: 200, sse_retry_ms: 100 }), async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const r = await heldCall(gw, s.sid, 'poll');
    await r.done(scaled(5000)); // the gateway ended it between two events
    const last = r.completeEvents().at(-1).id;
    await gw.waitLog(/gateway ended the connection of POST stream \d+: its request waits up to \d+ ms for a resume/, scaled(5000));
    const back = await resume(gw, s.sid, last);
    assert.equal(back.status, 200);
    release(gw);
    await back.done(scaled(5000));
    assert.equal(textOf(back.events().at(-1).json), 'released', back.text());
    assert.equal(childCancels(gw).length, 0);
  });
});

test('a plain GET reads on a dropped GET stream: what came meanwhile is delivered; the session still expires at session_idle_timeout_s', async () => {
  const servers = [{ name: 'listen', path: '/mcp', command: `${process.execPath} ${LISTEN_FIXTURE}`, extra: POOLED }];
  await withGateway({ servers, gateway: { session_idle_timeout_s: 2 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-06-18' });
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const other = await get(gw, { sid: s.sid });
    await other.done(scaled(5000));
    assert.equal(other.status, 409, 'one GET stream is read at a time');
    g.drop();
    await gw.waitLog(/client dropped GET stream \d+ \(\d+ bytes unread kept for a resume\)/, scaled(5000));
    const r = await post(gw, rpc('tools/call', { name: 'change_tools', arguments: {} }), { sid: s.sid });
    await r.done(scaled(5000));
    const g2 = await get(gw, { sid: s.sid });
    assert.equal(g2.status, 200);
    await g2.waitEvent((j) => j.method === 'notifications/tools/list_changed', scaled(5000));
    g2.drop();
    // Nobody reads it now: the record and its kept stream go with the idle expiry.
    await gw.waitLog(/pooled session ended: session expired/, scaled(10000));
  });
});

const TOKEN = 'alice-token-0123456789abcdef';
function twoInstanceOpts(dir) {
  const kf = path.join(dir, 'session.keys');
  fs.writeFileSync(kf, `${crypto.randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const tf = path.join(dir, 'tokens');
  fs.writeFileSync(tf, `sha256:${crypto.createHash('sha256').update(TOKEN).digest('hex')} alice\n`, { mode: 0o600 });
  return (i) => ({
    dir: fs.mkdtempSync(path.join(dir, `g${i}-`)),
    gateway: { session_key_file: kf, instance_id: `g${i}`, disconnect_grace_ms: 60000 },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf },
    servers: [{ name: 'example', path: '/mcp', extra: POOLED }],
  });
}

test('two instances sharing a key file: a Last-Event-ID of the other instance\'s stream gets 410 (never this one\'s events); the next plain GET works', async () => {
  const dir = tmpdir();
  const opts = twoInstanceOpts(dir);
  const headers = { Authorization: `Bearer ${TOKEN}` };
  const a = await startGateway(opts(1));
  let b;
  try {
    b = await startGateway(opts(2));
    const s = await initSession(a, { version: '2025-11-25', headers });
    // A stream on a, dropped while its call waits: resumable at a.
    const r = await post(a, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'x' }, _meta: { progressToken: 'px' } }, 'x'), { sid: s.sid, headers });
    await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
    const last = r.completeEvents().at(-1).id;
    r.drop();
    await a.waitLog(/client dropped POST stream/, scaled(5000));
    // b holds streams of the same session too: none of them is a's.
    const gb = await get(b, { sid: s.sid, headers });
    assert.equal(gb.status, 200);
    await waitFor(() => gb.completeEvents().length >= 1, scaled(5000), 'b\'s priming event');
    assert.notEqual(parseEventId(gb.completeEvents()[0].id).stream, parseEventId(last).stream, 'stream numbers differ between instances');
    gb.drop();
    const atB = await resume(b, s.sid, last, { headers });
    await atB.done(scaled(5000));
    assert.equal(atB.status, 410, `a's stream cannot be replayed at b: ${atB.text()}`);
    assert.equal(atB.json().error.code, -32600);
    const g2 = await get(b, { sid: s.sid, headers });
    assert.equal(g2.status, 200, 'the next plain GET works');
    g2.drop();
    // At a, where it lived, the same id resumes it.
    const atA = await resume(a, s.sid, last, { headers });
    assert.equal(atA.status, 200, atA.text());
    for (const pid of kids(a.proc.pid)) process.kill(pid, 'SIGUSR1');
    await atA.done(scaled(5000));
    assert.equal(textOf(atA.events().at(-1).json), 'released', atA.text());
  } finally {
    await a.stop({ expect: null });
    if (b) await b.stop({ expect: null });
  }
});
