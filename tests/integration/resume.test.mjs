// SPDX-License-Identifier: MIT
// Resumability: SSE event ids "<stream>-<seq>", the 2025-11-25 priming event (with retry), GET +
// Last-Event-ID replaying exactly the named stream after that event and then going on live, 410
// for ids that name nothing replayable (malformed, foreign, evicted, trimmed, finished), 409 for a
// stream another connection reads, a plain GET re-attaching a dropped GET stream, the disconnect
// grace (no cancel while the client may come back; one "client disconnected" cancel when it does
// not), SSE polling (sse_close_after_ms), idle expiry of a session whose client left mid-call, and
// the official SDK client finding its way back through all of it by itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callTool, get, initSession, MATRIX_POOLED, parseEventId, pooledLabel, pooledSkip, post, reaped, request, resume, rpc, stdoutBlocked, waitFor, withGateway } from '../lib/gw.mjs';

const TOKEN = 'resume-test-token-0123456789abcdefghij';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
// The log's words for a dropped stream's call: a child-mode session counts its stream's requests,
// a pooled session's stream has one call.
const WAIT = MATRIX_POOLED ? 'its request waits' : '1 requests wait';
const CANCELLED = MATRIX_POOLED ? 'its request cancelled' : '1 requests cancelled';
// Why a test of the GET stream's share of a child's messages is skipped in the pooled run.
const GET_NOTES = 'a shared child\'s questions and notifications go on their call\'s stream, never the GET stream (pooled_resume re-attaches a pooled GET stream)';

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  await r.done();
  assert.equal(r.status, 200, r.text());
  return r.json();
}

/** The admin view's entry for stream `id` of session `sid` (undefined once the stream is gone). */
async function adminStream(gw, sid, id) {
  const a = await admin(gw);
  return a.sessions.find((s) => s.id === sid)?.streams.find((st) => st.id === id);
}

/** Starts a tools/call on its own POST stream; resolves once the child has read it. */
async function startCall(gw, sid, id, name, args, meta) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  const r = await post(gw, rpc('tools/call', params, id), { sid });
  assert.equal(r.status, 200, `${id}: HTTP ${r.status} ${r.text()}`);
  const seen = await waitFor(
    () => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === args.tag),
    5000, `child to read ${id}`);
  return { r, childId: seen.id };
}

/** Asserts the child read `marker` (sent after everything else): what came before is in its log. */
async function childCaughtUp(gw, sid, marker) {
  const { response } = await callTool(gw, sid, 'echo', { text: marker, tag: marker });
  assert.equal(textOf(response), marker);
  await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === marker), 5000, 'child caught up');
}

/** Asserts evs all belong to `stream` and number seq = from, from+1, ... without a gap. */
function assertRun(evs, stream, from, what) {
  evs.forEach((e, i) => {
    const p = parseEventId(e.id);
    assert.ok(p, `${what}: event ${i} has no <stream>-<seq> id: ${JSON.stringify(e)}`);
    assert.equal(p.stream, stream, `${what}: event ${i} (${e.id}) is from another stream`);
    assert.equal(p.seq, from + i, `${what}: event ${i} (${e.id}) out of sequence`);
  });
}

/** The priming event of a 2025-11-25 stream: an id, empty data, retry as configured. */
function assertPriming(ev, retry, what) {
  assert.ok(ev, `${what}: no event at all`);
  assert.equal(ev.data, '', `${what}: the first event is not a priming event: ${JSON.stringify(ev)}`);
  assert.equal(parseEventId(ev.id)?.seq, 1, `${what}: priming id ${ev.id}`);
  assert.equal(ev.retry, retry, `${what}: retry`);
}

/** Resumes with lastId and expects the refusal `status` with a JSON-RPC error body. */
async function refused(gw, sid, lastId, status) {
  const r = await resume(gw, sid, lastId);
  await r.done();
  assert.equal(r.status, status, `Last-Event-ID ${JSON.stringify(lastId)}: HTTP ${r.status} ${r.text()}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/);
  const j = r.json();
  assert.equal(j.jsonrpc, '2.0');
  assert.equal(j.id, null);
  assert.equal(j.error.code, -32600, r.text());
  return j;
}

const progressOf = (evs, token) => evs.filter((e) => e.json?.method === 'notifications/progress' && e.json.params.progressToken === token)
  .map((e) => e.json.params.progress);
const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

// --- event ids and priming -------------------------------------------------------------------

test('2025-11-25: every stream (POST and GET) starts with a priming event (id <stream>-1, retry), then numbered events; ids unique per session', async (t) => {
  await withGateway({ gateway: { sse_retry_ms: 1500 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    assert.equal(s.version, '2025-11-25');
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const slow = await callTool(gw, s.sid, 'slow', { steps: 3, interval_ms: 10 }, { meta: { progressToken: 'ids-1' } });
    const note = await callTool(gw, s.sid, 'notify', { text: 'to-the-get-stream' });
    const echo = await callTool(gw, s.sid, 'echo', { text: 'plain' });
    // A pooled session's notification goes on its call's stream: its GET stream has the priming event alone.
    if (MATRIX_POOLED) await waitFor(() => g.completeEvents().length === 1, 5000, 'GET priming');
    else await g.waitEvent((j) => j.params?.data === 'to-the-get-stream');
    const streams = { get: g, slow: slow.r, notify: note.r, echo: echo.r };
    const ids = [];
    const numbers = new Set();
    for (const [name, r] of Object.entries(streams)) {
      assert.match(r.text(), /^id: \d+-1\n/, `${name}: the priming event comes first`);
      const evs = r.completeEvents();
      assertPriming(evs[0], '1500', name);
      const stream = parseEventId(evs[0].id).stream;
      assertRun(evs, stream, 1, name);
      for (const e of evs.slice(1)) assert.ok(e.json, `${name}: a message event after the priming one: ${JSON.stringify(e)}`);
      numbers.add(stream);
      ids.push(...evs.map((e) => e.id));
    }
    assert.equal(numbers.size, 4, 'each stream has its own number');
    assert.equal(new Set(ids).size, ids.length, `ids unique across the session: ${ids}`);
    assert.deepEqual(progressOf(slow.events, 'ids-1'), [1, 2, 3]);
    assert.equal(textOf(slow.response), 'done after 3 steps');
    assert.equal(slow.events.at(-1).json.id, slow.response.id, 'the answer is the last event');
    assert.equal(textOf(note.response), 'ok');
    if (MATRIX_POOLED) assert.ok(note.events.some((e) => e.json?.params?.data === 'to-the-get-stream'), `the notification on its call's stream: ${note.r.text()}`);
    else assert.equal(note.events.length, 2, `the notification went to the GET stream only: ${note.r.text()}`);
    g.drop();
  });
});

test('older sessions (2025-06-18 asked, 2025-03-26 forced by the server) get event ids but no priming event', async (t) => {
  const servers = [
    { name: 'forced', path: '/mcp', args: ['--protocol-version', '2025-03-26'] },
    { name: 'plain', path: '/plain' },
  ];
  await withGateway({ servers }, async (gw) => {
    const cases = [
      { url: gw.url, ask: '2025-11-25', expect: '2025-03-26' },
      { url: `${gw.base}/plain`, ask: '2025-06-18', expect: '2025-06-18' },
    ];
    for (const { url, ask, expect } of cases) {
      const s = await initSession(gw, { version: ask, url });
      assert.equal(s.version, expect, 'the version the child chose applies');
      const g = await get(gw, { sid: s.sid, url });
      assert.equal(g.status, 200);
      const slow = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 2, interval_ms: 10 }, _meta: { progressToken: `old-${expect}` } }), { sid: s.sid, url });
      await slow.done();
      const note = await post(gw, rpc('tools/call', { name: 'notify', arguments: { text: `note-${expect}` } }), { sid: s.sid, url });
      await note.done();
      // A pooled session's GET stream gets nothing here (no priming, and the notification goes on its call's stream).
      if (!MATRIX_POOLED) await g.waitEvent((j) => j.params?.data === `note-${expect}`);
      else assert.ok(note.events().some((e) => e.json?.params?.data === `note-${expect}`), note.text());
      for (const [name, r] of Object.entries(MATRIX_POOLED ? { slow, notify: note } : { get: g, slow, notify: note })) {
        const what = `${expect} ${name}`;
        assert.doesNotMatch(r.text(), /^retry:/m, `${what}: no retry field`);
        const evs = r.completeEvents();
        assert.ok(evs.length > 0, what);
        assert.ok(evs.every((e) => e.json), `${what}: no priming (empty) event: ${r.text()}`);
        assertRun(evs, parseEventId(evs[0].id)?.stream, 1, what);
      }
      assert.deepEqual(progressOf(slow.events(), `old-${expect}`), [1, 2]);
      assert.equal(textOf(slow.events().at(-1).json), 'done after 2 steps');
      g.drop();
    }
  });
});

test('replay_buffer_bytes=0: no ids, no priming, nothing resumable; sse_retry_ms=0: priming without retry', async (t) => {
  await withGateway({ gateway: { replay_buffer_bytes: 0 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const g = await get(gw, { sid: s.sid });
    const slow = await callTool(gw, s.sid, 'slow', { steps: 2, interval_ms: 10 }, { meta: { progressToken: 'off' } });
    const note = await callTool(gw, s.sid, 'notify', { text: 'no-ids' });
    if (MATRIX_POOLED) assert.ok(note.events.some((e) => e.json?.params?.data === 'no-ids'), note.r.text()); // on its call's stream
    else await g.waitEvent((j) => j.params?.data === 'no-ids');
    for (const [name, r] of Object.entries({ get: g, slow: slow.r, notify: note.r })) {
      assert.doesNotMatch(r.text(), /^id:/m, `${name}: no id lines: ${r.text()}`);
      assert.doesNotMatch(r.text(), /^retry:/m, `${name}: no retry line`);
      assert.ok(r.completeEvents().every((e) => e.json), `${name}: no priming event`);
    }
    assert.deepEqual(progressOf(slow.events, 'off'), [1, 2]);
    assert.equal(textOf(slow.response), 'done after 2 steps');
    // Streams 1 (initialize), 2 (GET, once dropped), 3 and 4 (the calls): none can be resumed.
    g.drop();
    // A pooled GET stream with nothing to replay is let go at once: its connection's access line.
    await gw.waitLog(MATRIX_POOLED ? /method=GET path=\/mcp status=200 bytes=0 / : /client dropped GET stream 2: 0 requests cancelled/);
    for (const id of ['1-1', '2-1', '2-2', '3-1', '3-2', '4-1']) await refused(gw, s.sid, id, 410);
  });
  await withGateway({ gateway: { sse_retry_ms: 0 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r, response } = await callTool(gw, s.sid, 'echo', { text: 'no retry' });
    assert.equal(textOf(response), 'no retry');
    assert.doesNotMatch(r.text(), /^retry:/m);
    const evs = r.events();
    assertPriming(evs[0], undefined, 'sse_retry_ms=0');
    assertRun(evs, parseEventId(evs[0].id).stream, 1, 'sse_retry_ms=0');
  });
});

// --- drop and resume ---------------------------------------------------------------------------

for (const version of ['2025-11-25', '2025-06-18']) {
  test(`${version}: a POST stream dropped mid-call and resumed within disconnect_grace_ms gets the rest, the answer made while away included, and nothing is cancelled`, async (t) => {
    await withGateway({ gateway: { disconnect_grace_ms: 20000, admin_token: TOKEN } }, async (gw) => {
      const s = await initSession(gw, { version });
      const { r, childId } = await startCall(gw, s.sid, 'away-1', 'slow', { steps: 10, interval_ms: 100, tag: 'away-1' }, { progressToken: 'away' });
      await r.waitEvent((j) => j.method === 'notifications/progress');
      r.drop();
      const seen = r.completeEvents();
      const last = parseEventId(seen.at(-1).id);
      assert.ok(last, `an id to resume from: ${r.text()}`);
      await gw.waitLog(new RegExp(`client dropped POST stream ${last.stream}: ${WAIT} up to 20000 ms for a resume`));
      // The admin view lists no pooled session: there the resume may come before the answer or
      // after it (pooled_resume replays an answer made while away).
      if (!MATRIX_POOLED) {
        const away = await adminStream(gw, s.sid, last.stream);
        assert.equal(away.kind, 'post');
        assert.equal(away.attached, false, 'nobody reads it');
        assert.equal(away.awaiting, 1, 'its call is still waited for');
        assert.equal(away.ended, false);
        // The child answers while the client is away: the answer waits in the stream.
        const answered = await waitFor(async () => {
          const st = await adminStream(gw, s.sid, last.stream);
          return st?.ended && st.awaiting === 0 && st;
        }, 5000, 'the answer while away');
        assert.equal(answered.attached, false);
        assert.ok(answered.queued_bytes > 0, 'the answer is queued for a resume');
      }
      assert.deepEqual(childCancels(gw), [], 'no cancel while the client may come back');

      const back = await resume(gw, s.sid, seen.at(-1).id);
      assert.equal(back.status, 200, back.text());
      assert.match(back.headers['content-type'], /^text\/event-stream/);
      await back.done(5000);
      assert.ok(back.res.complete, 'the resumed response ends normally once the answer is sent');
      const evs = back.events();
      assertRun(evs, last.stream, last.seq + 1, 'resumed');
      assert.ok(evs.every((e) => e.json), 'no priming event on a resumed connection');
      const answer = evs.at(-1).json;
      assert.equal(answer.id, 'away-1', 'the client\'s own id');
      assert.equal(textOf(answer), 'done after 10 steps');
      assert.deepEqual([...progressOf(seen, 'away'), ...progressOf(evs, 'away')], range(1, 10), 'every progress exactly once');
      await gw.waitLog(new RegExp(`POST stream ${last.stream} resumed after event ${last.seq}`));
      if (!MATRIX_POOLED) {
        const after = await adminStream(gw, s.sid, last.stream);
        assert.ok(after === undefined || (after.attached === false && after.queued_bytes === 0), JSON.stringify(after));
      }
      await childCaughtUp(gw, s.sid, 'after-resume');
      assert.deepEqual(childCancels(gw), [], `the child never saw a cancel (child id ${childId})`);
      if (!MATRIX_POOLED) assert.equal((await admin(gw)).counters.cancels_to_child['client disconnected'], 0);
    });
  });
}

test('a resumed POST stream can be dropped and resumed again: every event arrives once, the answer on the last connection', async (t) => {
  await withGateway({ gateway: { disconnect_grace_ms: 20000 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r } = await startCall(gw, s.sid, 'hop', 'slow', { steps: 12, interval_ms: 60, tag: 'hop' }, { progressToken: 'hop' });
    let conn = r;
    const all = [];
    for (const [i, upTo] of [2, 5, 8].entries()) {
      await conn.waitEvent((j) => j.params?.progress >= upTo);
      conn.drop();
      all.push(...conn.completeEvents());
      const { stream } = parseEventId(all.at(-1).id);
      const drops = new RegExp(`client dropped POST stream ${stream}: ${WAIT}`, 'g');
      await waitFor(() => (gw.logs().match(drops) || []).length === i + 1, 5000, `drop ${i + 1} seen`);
      conn = await resume(gw, s.sid, all.at(-1).id);
      assert.equal(conn.status, 200, conn.text());
    }
    await conn.done(10000);
    all.push(...conn.events());
    assertRun(all, parseEventId(all[0].id).stream, 1, 'all connections together');
    assert.deepEqual(progressOf(all, 'hop'), range(1, 12));
    assert.equal(all.at(-1).json.id, 'hop');
    assert.equal(textOf(all.at(-1).json), 'done after 12 steps');
    assert.equal((gw.logs().match(/POST stream \d+ resumed after event/g) || []).length, 3);
    assert.deepEqual(childCancels(gw), []);
  });
});

test('resuming one POST stream replays only that stream: not the other call\'s, not the GET stream\'s notifications', async (t) => {
  await withGateway({ gateway: { disconnect_grace_ms: 20000 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const g = await get(gw, { sid: s.sid });
    await waitFor(() => g.completeEvents().length === 1, 5000, 'GET priming');
    const gStream = parseEventId(g.completeEvents()[0].id).stream;
    const a = await startCall(gw, s.sid, 'A', 'slow', { steps: 30, interval_ms: 50, tag: 'A' }, { progressToken: 'tok-A' });
    const b = await startCall(gw, s.sid, 'B', 'slow', { steps: 30, interval_ms: 50, tag: 'B' }, { progressToken: 'tok-B' });
    const n1 = await callTool(gw, s.sid, 'notify', { text: 'note-1' });
    assert.equal(textOf(n1.response), 'ok');
    // A pooled session's notification goes on its call's stream, the GET stream gets none.
    const NOTES = MATRIX_POOLED ? [] : ['note-1', 'note-2'];
    if (!MATRIX_POOLED) await g.waitEvent((j) => j.params?.data === 'note-1');
    await a.r.waitEvent((j) => j.params?.progress === 2);
    a.r.drop();
    const aSeen = a.r.completeEvents();
    const aStream = parseEventId(aSeen[0].id).stream;
    await gw.waitLog(new RegExp(`client dropped POST stream ${aStream}: ${WAIT}`));
    const n2 = await callTool(gw, s.sid, 'notify', { text: 'note-2' });
    assert.equal(textOf(n2.response), 'ok');
    if (!MATRIX_POOLED) await g.waitEvent((j) => j.params?.data === 'note-2');
    await b.r.waitEvent((j) => j.params?.progress === 5);

    // From the priming event: everything of A after it, then A live until its answer.
    const ra = await resume(gw, s.sid, aSeen[0].id);
    assert.equal(ra.status, 200, ra.text());
    await ra.done(10000);
    const evs = ra.events();
    assertRun(evs, aStream, 2, 'A resumed');
    assert.deepEqual(evs.slice(0, aSeen.length - 1).map((e) => e.data), aSeen.slice(1).map((e) => e.data), 'the replay is byte-identical');
    // A pooled session's log lines go on the stream of its oldest call at the child: A's.
    const sessionLog = (j) => MATRIX_POOLED && j.method === 'notifications/message' && /^note-/.test(j.params.data);
    for (const e of evs) {
      const j = e.json;
      assert.ok((j.method === 'notifications/progress' && j.params.progressToken === 'tok-A') || (isAnswer(j) && j.id === 'A') || sessionLog(j), `only A's events: ${e.data}`);
    }
    assert.deepEqual(progressOf(evs, 'tok-A'), range(1, 30));
    assert.equal(textOf(evs.at(-1).json), 'done after 30 steps');

    await b.r.done(10000);
    const bEvs = b.r.events();
    assertRun(bEvs, parseEventId(bEvs[0].id).stream, 1, 'B');
    assert.deepEqual(progressOf(bEvs, 'tok-B'), range(1, 30));
    assert.ok(!b.r.text().includes('tok-A') && !b.r.text().includes('note-'), 'B has only its own events');
    const gEvs = g.completeEvents();
    assertRun(gEvs, gStream, 1, 'GET');
    assert.deepEqual(gEvs.filter((e) => e.json).map((e) => e.json.params?.data), NOTES);
    assert.ok(!g.text().includes('tok-'), 'no progress on the GET stream');
    assert.deepEqual(childCancels(gw), []);
    g.drop();
  });
});

test('no resume within disconnect_grace_ms: the call is cancelled once, with "client disconnected", when the grace expires', async (t) => {
  await withGateway({ gateway: { disconnect_grace_ms: 600, admin_token: TOKEN } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r, childId } = await startCall(gw, s.sid, 'gone', 'slow', { steps: 200, interval_ms: 50, tag: 'gone' }, { progressToken: 'gone' });
    await r.waitEvent((j) => j.method === 'notifications/progress');
    const t0 = performance.now();
    r.drop();
    const lastId = r.completeEvents().at(-1).id;
    const { stream } = parseEventId(lastId);
    await gw.waitLog(new RegExp(`client dropped POST stream ${stream}: ${WAIT} up to 600 ms for a resume`));
    assert.deepEqual(childCancels(gw), [], 'nothing cancelled at the drop');
    await gw.waitLog(new RegExp(`no resume in time of POST stream ${stream}: ${CANCELLED}`), 5000);
    const c = await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
    const waited = performance.now() - t0;
    assert.ok(waited >= 550, `the cancel came ${waited.toFixed(0)} ms after the drop, before the grace ran out`);
    assert.deepEqual(c.params, { requestId: childId, reason: 'client disconnected' });
    await childCaughtUp(gw, s.sid, 'after-grace');
    assert.equal(childCancels(gw).length, 1, 'exactly one cancel');
    assert.equal((await admin(gw)).counters.cancels_to_child['client disconnected'], 1);
    await refused(gw, s.sid, lastId, 410);
  });
});

// --- refusals ----------------------------------------------------------------------------------

test('410 for a malformed id, a stream of another session, a stream that never was, a seq never reached, a finished stream; 409 while another connection reads the stream', async (t) => {
  await withGateway({}, async (gw) => {
    const s1 = await initSession(gw, { version: '2025-11-25' });
    const s2 = await initSession(gw, { version: '2025-11-25' });
    const done = await callTool(gw, s1.sid, 'echo', { text: 'finished' });
    assert.equal(textOf(done.response), 'finished');
    const dEvs = done.events;
    assert.equal(dEvs.length, 2, done.r.text());
    const dStream = parseEventId(dEvs[0].id).stream;

    for (const bad of ['abc', '12', '-3', `${dStream}-`, `${dStream}-0`, `0-1`, `${dStream}-x`, `${dStream}-1-1`, `${dStream}--1`, '18446744073709551616-1', `${dStream}-1x`]) {
      await refused(gw, s1.sid, bad, 410);
    }
    await refused(gw, s1.sid, '999999-1', 410);
    await refused(gw, s1.sid, `${dStream}-99`, 410);
    // A POST stream read to its end is forgotten at once (only a stream left unread is kept for
    // a resume): from its last event or an earlier one, nothing can be replayed.
    await refused(gw, s1.sid, dEvs.at(-1).id, 410);
    await refused(gw, s1.sid, dEvs[0].id, 410);

    // A stream of session 2, resumable there, is no stream of session 1.
    // (A pooled session's GET stream has its priming event alone: its notifications go on their call's stream.)
    const g2 = await get(gw, { sid: s2.sid });
    if (MATRIX_POOLED) await waitFor(() => g2.completeEvents().length === 1, 5000, 'GET priming');
    else {
      const n = await callTool(gw, s2.sid, 'notify', { text: 'for s2' });
      assert.equal(textOf(n.response), 'ok');
      await g2.waitEvent((j) => j.params?.data === 'for s2');
    }
    g2.drop();
    const g2Last = g2.completeEvents().at(-1).id;
    const who2 = MATRIX_POOLED ? pooledLabel(s2.sid) : reEscape(s2.sid);
    await gw.waitLog(new RegExp(`session=${who2} client dropped GET stream ${parseEventId(g2Last).stream}${MATRIX_POOLED ? ' \\(' : ': 0 requests cancelled'}`));
    await refused(gw, s1.sid, g2Last, 410);
    await refused(gw, s1.sid, g2.completeEvents()[0].id, 410);
    const own = await resume(gw, s2.sid, g2.completeEvents()[0].id);
    assert.equal(own.status, 200, 'resumable in its own session');
    if (!MATRIX_POOLED) await own.waitEvent((j) => j.params?.data === 'for s2');
    own.drop();

    // 409: the GET stream and a live POST stream, each while a connection reads it.
    const g1 = await get(gw, { sid: s1.sid });
    await waitFor(() => g1.completeEvents().length === 1, 5000, 'GET priming');
    const j = await refused(gw, s1.sid, g1.completeEvents()[0].id, 409);
    assert.match(j.error.message, /already being read/);
    const live = await startCall(gw, s1.sid, 'live', 'slow', { steps: 5, interval_ms: 50, tag: 'live' }, { progressToken: 'live' });
    await waitFor(() => live.r.completeEvents().length >= 1, 5000, 'live priming');
    await refused(gw, s1.sid, live.r.completeEvents()[0].id, 409);
    await live.r.done(5000);
    assert.equal(textOf(live.r.events().at(-1).json), 'done after 5 steps', 'the 409 did not disturb the reader');
    assert.deepEqual(progressOf(live.r.events(), 'live'), range(1, 5));

    // An unknown session is 404 before any Last-Event-ID is looked at.
    const r404 = await resume(gw, 'no-such-session', dEvs[0].id);
    await r404.done();
    assert.equal(r404.status, 404);
    assert.deepEqual(childCancels(gw), []);
    g1.drop();
  });
});

test('410 once the events after the id were evicted from a tiny replay_buffer_bytes; the newest id still resumes', async (t) => {
  await withGateway({ gateway: { replay_buffer_bytes: 2048, disconnect_grace_ms: 20000, admin_token: TOKEN, max_id_bytes: 1024 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const token = `big-${'x'.repeat(400)}`; // each progress event is about 550 bytes
    const { r } = await startCall(gw, s.sid, 'evict', 'slow', { steps: 20, interval_ms: 100, tag: 'evict' }, { progressToken: token });
    await r.waitEvent((j) => j.params?.progress === 6);
    r.drop();
    const seen = r.completeEvents();
    const last = parseEventId(seen.at(-1).id);
    await gw.waitLog(new RegExp(`client dropped POST stream ${last.stream}: ${WAIT}`));
    if (!MATRIX_POOLED) { // the admin view lists no pooled session
      const st = await adminStream(gw, s.sid, last.stream);
      assert.ok(st.replay_bytes > 0 && st.replay_bytes <= 2048, `replay history within the bound: ${JSON.stringify(st)}`);
    }
    const j = await refused(gw, s.sid, seen[0].id, 410);
    assert.match(j.error.message, /Last-Event-ID/);
    await refused(gw, s.sid, seen[1].id, 410);
    const back = await resume(gw, s.sid, seen.at(-1).id);
    assert.equal(back.status, 200, back.text());
    await back.done(10000);
    const evs = back.events();
    assertRun(evs, last.stream, last.seq + 1, 'resumed');
    assert.deepEqual([...progressOf(seen, token), ...progressOf(evs, token)], range(1, 20));
    assert.equal(evs.at(-1).json.id, 'evict');
    assert.equal(textOf(evs.at(-1).json), 'done after 20 steps');
    assert.deepEqual(childCancels(gw), []);
  });
});

test('410 for events trimmed while nobody read the stream (over stream_queue_bytes); the events still held resume', async (t) => {
  if (pooledSkip(t, 'the admin view\'s stream entries (the wait for the answer while away) list no pooled session; pooled_resume replays a pooled session\'s answer made while away')) return;
  const STEPS = 200;
  await withGateway({ gateway: { stream_queue_bytes: 65536, disconnect_grace_ms: 20000, admin_token: TOKEN, max_id_bytes: 2048 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const token = `trim-${'y'.repeat(1000)}`; // ~1.1 KB per progress event, ~220 KB in all
    const { r } = await startCall(gw, s.sid, 'trim', 'slow', { steps: STEPS, interval_ms: 5, tag: 'trim' }, { progressToken: token });
    await waitFor(() => r.completeEvents().length >= 1, 5000, 'priming');
    r.drop();
    const seen = r.completeEvents();
    const { stream } = parseEventId(seen[0].id);
    assert.ok(seen.length < 100, `dropped early (${seen.length} of ${STEPS + 2} events read)`);
    await gw.waitLog(new RegExp(`client dropped POST stream ${stream}: ${WAIT}`));
    const st = await waitFor(async () => {
      const x = await adminStream(gw, s.sid, stream);
      return x?.ended && x.awaiting === 0 && x;
    }, 10000, 'the answer while away');
    assert.ok(st.queued_bytes > 0 && st.queued_bytes <= 65536, `what nobody read was trimmed: ${JSON.stringify(st)}`);
    await refused(gw, s.sid, seen.at(-1).id, 410);
    // priming = 1, progress = 2..STEPS+1, the answer = STEPS+2: the tail is still held.
    const tail = await resume(gw, s.sid, `${stream}-${STEPS + 1}`);
    assert.equal(tail.status, 200, tail.text());
    await tail.done();
    const evs = tail.events();
    assert.equal(evs.length, 1, tail.text());
    assert.equal(evs[0].id, `${stream}-${STEPS + 2}`);
    assert.equal(evs[0].json.id, 'trim');
    assert.equal(textOf(evs[0].json), `done after ${STEPS} steps`);
    assert.deepEqual(childCancels(gw), []);
  });
});

// --- the GET stream ----------------------------------------------------------------------------

test('a dropped GET stream is re-attached by a plain GET: what was queued on it meanwhile arrives, nothing is replayed; a second plain GET is 409', async (t) => {
  if (pooledSkip(t, GET_NOTES)) return;
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const g1 = await get(gw, { sid: s.sid });
    await waitFor(() => g1.completeEvents().length === 1, 5000, 'GET priming');
    const busy = await get(gw, { sid: s.sid });
    await busy.done();
    assert.equal(busy.status, 409, 'a second GET while one is read');
    assert.equal(busy.json().error.code, -32600);
    // The child asks the client on the GET stream, then gives up after 500 ms: its cancel is
    // bound for the stream that carried the request, which is then nobody's.
    const cc = await post(gw, rpc('tools/call', { name: 'child_cancel', arguments: { delay_ms: 500 } }, 'cc-1'), { sid: s.sid });
    const ask = await g1.waitEvent((j) => j.method === 'sampling/createMessage');
    g1.drop();
    const g1Evs = g1.completeEvents();
    const last = parseEventId(g1Evs.at(-1).id);
    assert.equal(g1Evs.at(-1).json?.id, ask.json.id, 'the request was the last thing read');
    await gw.waitLog(new RegExp(`client dropped GET stream ${last.stream}: 0 requests cancelled`));
    const n = await callTool(gw, s.sid, 'notify', { text: 'while-away' });
    assert.equal(textOf(n.response), 'ok');
    await gw.waitLog(/child cancelled its sampling\/createMessage request/);
    await cc.done(5000);
    assert.equal(textOf(cc.events().map((e) => e.json).find(isAnswer)), 'gave up');

    const g2 = await get(gw, { sid: s.sid });
    assert.equal(g2.status, 200);
    const c = await g2.waitEvent((j) => j.method === 'notifications/cancelled');
    assert.equal(c.json.params.requestId, ask.json.id, 'the cancel names the request the client saw');
    const g2Evs = g2.completeEvents();
    assertRun(g2Evs, last.stream, last.seq + 1, 're-attached GET');
    assert.ok(g2Evs.every((e) => e.json && e.json.method !== 'sampling/createMessage'), `no priming, no replay: ${g2.text()}`);
    // The notification made while no GET was read was delivered exactly once (on the call's own stream).
    const copies = [n.r, g1, g2].flatMap((r) => r.completeEvents()).filter((e) => e.json?.params?.data === 'while-away');
    assert.equal(copies.length, 1, 'delivered exactly once');
    const again = await get(gw, { sid: s.sid });
    await again.done();
    assert.equal(again.status, 409, 'the re-attached GET stream is read');
    g2.drop();
  });
});

test('notifications that found no stream at all while the GET stream was dropped arrive when a plain GET re-attaches it', async (t) => {
  if (pooledSkip(t, 'blocks the session\'s child on its stdout with one unread stream, and reads the GET stream\'s share of its notifications: a slow reader never pauses a shared child, whose notifications go on their call\'s stream')) return;
  await withGateway({ gateway: { stream_queue_bytes: 65536 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const g1 = await get(gw, { sid: s.sid });
    await waitFor(() => g1.completeEvents().length === 1, 5000, 'GET priming');
    g1.drop();
    await gw.waitLog(/client dropped GET stream \d+: 0 requests cancelled/);
    // Keep the child from reading: a flood whose reader pauses blocks it on its stdout.
    const COUNT = 10000;
    const f = await startCall(gw, s.sid, 'flood-1', 'flood', { count: COUNT, bytes: 4000, tag: 'flood-1' });
    f.r.res.pause();
    const state = {};
    await waitFor(() => stdoutBlocked(s.pid, state), 20000, 'child blocked on its stdout');
    // A notify the child will only read once unblocked; its client leaves, and so does the flood's.
    const n = await post(gw, rpc('tools/call', { name: 'notify', arguments: { text: 'queued-while-away' } }, 'n-1'), { sid: s.sid });
    assert.equal(n.status, 200);
    n.drop();
    await gw.waitLog(/client dropped POST stream \d+: 1 requests cancelled/);
    f.r.drop();
    // The flood's answer and then the notify's answer come back late: by then the notification,
    // written before the notify's answer, has been routed (to no stream: nobody reads one).
    await waitFor(() => (gw.logs().match(/late answer for cancelled tools\/call dropped/g) || []).length === 2, 20000, 'both late answers');
    assert.ok(gw.childMessages().some((m) => m.params?.arguments?.text === 'queued-while-away'));

    const g2 = await get(gw, { sid: s.sid });
    assert.equal(g2.status, 200);
    const got = await waitFor(() => g2.completeEvents().find((e) => e.json?.params?.data === 'queued-while-away'), 5000,
      'the notification queued while no stream was read, on the re-attached GET stream');
    assert.equal(got.json.method, 'notifications/message');
    const evs = g2.completeEvents().filter((e) => e.json);
    assert.equal(evs.filter((e) => e.json.params?.data === 'queued-while-away').length, 1);
    const floods = evs.filter((e) => e.json.params?.logger === 'flood').map((e) => Number(/^(\d+) /.exec(e.json.params.data)[1]));
    assert.equal(floods.at(-1), COUNT, 'the newest flood notifications were kept, in order');
    for (let i = 1; i < floods.length; i++) assert.equal(floods[i], floods[i - 1] + 1, 'contiguous');
    g2.drop();
  });
});

// --- SSE polling -------------------------------------------------------------------------------

test('sse_close_after_ms (2025-11-25): the POST response ends early without the answer, the resume GET gets it and is not ended again; nothing is cancelled', async (t) => {
  await withGateway({ gateway: { sse_close_after_ms: 300, sse_retry_ms: 200 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r, childId } = await startCall(gw, s.sid, 'poll-1', 'echo', { text: 'polled', delay_ms: 2000, tag: 'poll-1' });
    const t0 = performance.now();
    await r.done(5000);
    const ranFor = performance.now() - t0;
    assert.ok(r.res.complete, 'the HTTP response ended normally (not cut)');
    assert.ok(r.text().endsWith('\n\n'), 'at an event boundary');
    const evs = r.events();
    assert.ok(!evs.some((e) => isAnswer(e.json)), `no answer on the POST: ${r.text()}`);
    assertPriming(evs[0], '200', 'polled POST');
    const { stream } = parseEventId(evs.at(-1).id);
    await gw.waitLog(new RegExp(`gateway ended the connection of POST stream ${stream}: ${WAIT} up to 1600 ms for a resume`));
    assert.ok(ranFor < 1800, `ended by the gateway long before the answer (${ranFor.toFixed(0)} ms)`);

    const g = await get(gw, { sid: s.sid });
    const back = await resume(gw, s.sid, evs.at(-1).id);
    assert.equal(back.status, 200, back.text());
    const t1 = performance.now();
    await back.done(5000);
    assert.ok(performance.now() - t1 > 600, 'the resumed connection outlived sse_close_after_ms');
    const bEvs = back.events();
    assertRun(bEvs, stream, evs.length + 1, 'resumed');
    assert.equal(bEvs.length, 1, back.text());
    assert.equal(bEvs[0].json.id, 'poll-1');
    assert.equal(textOf(bEvs[0].json), 'polled');
    assert.equal((gw.logs().match(/gateway ended the connection of POST stream/g) || []).length, 1, 'ended once');
    assert.ok(!g.ended, 'the GET stream is never polled away');
    await childCaughtUp(gw, s.sid, 'after-poll');
    assert.deepEqual(childCancels(gw), [], `the child never saw a cancel (child id ${childId})`);
    g.drop();

    // Older sessions are not polled: the answer comes on the POST itself.
    const old = await initSession(gw, { version: '2025-06-18' });
    const o = await callTool(gw, old.sid, 'echo', { text: 'not polled', delay_ms: 800 });
    assert.equal(textOf(o.response), 'not polled');
    assert.equal(o.events.length, 1);
  });
});

test('sse_close_after_ms without a resume: the call is cancelled with "client disconnected" after disconnect_grace_ms + 3*sse_retry_ms + 1000', async (t) => {
  await withGateway({ gateway: { sse_close_after_ms: 200, sse_retry_ms: 100 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r, childId } = await startCall(gw, s.sid, 'poll-gone', 'echo', { text: 'never read', delay_ms: 30000, tag: 'poll-gone' });
    await r.done(5000);
    const t0 = performance.now();
    const { stream } = parseEventId(r.events().at(-1).id);
    await gw.waitLog(new RegExp(`gateway ended the connection of POST stream ${stream}: ${WAIT} up to 1300 ms for a resume`));
    await gw.waitLog(new RegExp(`no resume in time of POST stream ${stream}: ${CANCELLED}`), 5000);
    assert.ok(performance.now() - t0 >= 1000, 'not before the wait ran out');
    const c = await waitFor(() => childCancels(gw)[0], 5000, 'the cancel at the child');
    assert.deepEqual(c.params, { requestId: childId, reason: 'client disconnected' });
    await childCaughtUp(gw, s.sid, 'after');
    assert.equal(childCancels(gw).length, 1);
  });
});

// --- idle expiry -------------------------------------------------------------------------------

test('expiry mid-call: with nobody reading, the session expires under a long grace; the child gets "session expired" before its stdin closes, is reaped; then 404', async (t) => {
  if (pooledSkip(t, 'a pooled session\'s expiry stops no child and is logged by its label; pooled_resume expires a pooled session with a stream kept for a resume')) return;
  await withGateway({ gateway: { disconnect_grace_ms: 60000, session_idle_timeout_s: 1 } }, async (gw) => {
    const s = await initSession(gw, { version: '2025-11-25' });
    const { r, childId } = await startCall(gw, s.sid, 'orphan', 'slow', { steps: 600, interval_ms: 50, tag: 'orphan' }, { progressToken: 'orphan' });
    await r.waitEvent((j) => j.method === 'notifications/progress');
    r.drop();
    const lastId = r.completeEvents().at(-1).id;
    const sidRe = reEscape(s.sid);
    await gw.waitLog(new RegExp(`session=${sidRe} client dropped POST stream \\d+: ${WAIT} up to 60000 ms`));
    await gw.waitLog(new RegExp(`session=${sidRe} session closed: session expired \\(1 in-flight requests cancelled\\)`), 6000);
    await waitFor(() => reaped(s.pid), 10000, 'child reaped');
    await gw.waitLog(new RegExp(`child ${s.pid} exited`));
    assert.deepEqual(childCancels(gw).map((m) => m.params), [{ requestId: childId, reason: 'session expired' }]);
    const logs = gw.logs();
    const cancelAt = logs.indexOf(`session=${s.sid} child stderr: mcp-example-server: cancelled ${childId} reason=session expired`);
    const eofAt = logs.indexOf(`session=${s.sid} child stderr: mcp-example-server: stdin closed, exiting`);
    assert.ok(cancelAt >= 0, 'the child read the cancel');
    assert.ok(eofAt > cancelAt, 'the cancel was read before stdin closed');
    assert.ok(!/reason="client disconnected"/.test(logs), 'the grace did not fire');
    const p = await post(gw, rpc('ping'), { sid: s.sid });
    await p.done();
    assert.equal(p.status, 404);
    const g = await resume(gw, s.sid, lastId);
    await g.done();
    assert.equal(g.status, 404);
  });
});

// --- the official SDK client -------------------------------------------------------------------

/** A response body that passes the first SSE event, then errors once `cutWhen` resolves. */
function cutAfterFirstEvent(body, cutWhen, onCut) {
  const reader = body.getReader();
  let held = new Uint8Array(0);
  let passed = false;
  return new ReadableStream({
    async pull(controller) {
      if (passed) {
        await cutWhen;
        await reader.cancel(); // closes the connection: the gateway sees the client go
        onCut();
        controller.error(new Error('connection cut by the test'));
        return;
      }
      const { value, done } = await reader.read();
      if (done) { controller.close(); return; }
      const buf = new Uint8Array(held.length + value.length);
      buf.set(held);
      buf.set(value, held.length);
      for (let i = 1; i < buf.length; i++) {
        if (buf[i - 1] === 10 && buf[i] === 10) {
          passed = true;
          controller.enqueue(buf.subarray(0, i + 1));
          return;
        }
      }
      held = buf;
    },
    cancel(reason) { return reader.cancel(reason); },
  }, { highWaterMark: 0 });
}

test('the SDK client resumes by itself: its POST stream of a slow call is cut after the first event, it reconnects with GET + Last-Event-ID, the call resolves, nothing is cancelled', async (t) => {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  await withGateway({ gateway: { disconnect_grace_ms: 10000, sse_retry_ms: 100 } }, async (gw) => {
    const log = [];
    let cut = false;
    let tokenSeen;
    const firstToken = new Promise((res) => { tokenSeen = res; });
    const deadline = (p, ms, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), ms).unref())]);
    const cuttingFetch = async (url, init = {}) => {
      const res = await fetch(url, init);
      const headers = new Headers(init.headers);
      log.push({ method: init.method, lastEventId: headers.get('last-event-id'), status: res.status });
      let msg;
      try { msg = init.method === 'POST' ? JSON.parse(init.body) : undefined; } catch { /* not JSON */ }
      if (cut || msg?.method !== 'tools/call' || !res.body) return res;
      cut = true;
      const body = cutAfterFirstEvent(res.body, deadline(firstToken, 5000, 'the SDK to take the first event id'), () => log.push({ cut: true }));
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
    const client = new Client({ name: 'resume-test', version: '1.0.0' }, { capabilities: {} });
    const errors = [];
    client.onerror = (e) => errors.push(String(e?.message ?? e));
    const transport = new StreamableHTTPClientTransport(new URL(gw.url), { fetch: cuttingFetch });
    await client.connect(transport);
    assert.equal(transport.protocolVersion, '2025-11-25');
    try {
      const tokens = [];
      const progress = [];
      const result = await client.callTool({ name: 'slow', arguments: { steps: 8, interval_ms: 100, tag: 'sdk' } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        onresumptiontoken: (t) => { tokens.push(t); tokenSeen(t); },
        timeout: 20000,
      });
      assert.equal(result.content[0].text, 'done after 8 steps');
      assert.deepEqual(progress, range(1, 8), 'every progress notification, once');
      assert.ok(log.some((e) => e.cut), 'the POST stream was cut');
      const first = parseEventId(tokens[0]);
      assert.equal(first?.seq, 1, `the priming id came first: ${tokens}`);
      assertRun(tokens.map((id) => ({ id })), first.stream, 1, 'resumption tokens');
      const resumes = log.filter((e) => e.method === 'GET' && e.lastEventId);
      assert.deepEqual(resumes, [{ method: 'GET', lastEventId: tokens[0], status: 200 }], JSON.stringify(log));
      await gw.waitLog(new RegExp(`client dropped POST stream ${first.stream}: ${WAIT} up to 10000 ms for a resume`));
      await gw.waitLog(new RegExp(`POST stream ${first.stream} resumed after event 1`));
      assert.ok(errors.some((e) => /SSE stream disconnected/.test(e)), `the SDK saw the cut: ${errors}`);
      const child = await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.tag === 'sdk'), 5000, 'the call at the child');
      assert.ok(Number.isInteger(child.id));
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'after', tag: 'after' } });
      assert.equal(echo.content[0].text, 'after');
      await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'after'), 5000, 'child caught up');
      assert.deepEqual(childCancels(gw), [], 'the child never saw a cancel');
    } finally {
      await client.close();
    }
  });
});
