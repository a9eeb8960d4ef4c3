// SPDX-License-Identifier: MIT
// Routing both ways: client ids restored byte-exact and never shown to the child, responses and
// progress on the stream of their request, child notifications and requests on the GET stream
// (else the POST stream of a call, else a backlog for the next GET stream), client answers back
// to the child under its own id, child -> client cancels, and never one message on two streams.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { MATRIX_POOLED, callTool, get, initSession, poolChildOf, pooledSkip, post, rpc, startGateway, stdoutBlocked, waitFor, withGateway } from '../lib/gw.mjs';

/** The raw JSON text of a tools/call with the id written exactly as given. */
function rawCall(idText, name, args = {}, meta) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  return `{"jsonrpc":"2.0","id":${idText},"method":"tools/call","params":${JSON.stringify(params)}}`;
}

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/** Posts a client answer to a request the child sent; returns the HTTP status. */
async function answer(gw, sid, id, result) {
  const r = await post(gw, { jsonrpc: '2.0', id, result }, { sid });
  await r.done();
  return r.status;
}

/** Asserts that no message was delivered twice, on one stream or across several. */
function assertNoDuplicates(...streams) {
  const seen = new Map();
  for (const [i, s] of streams.entries()) {
    for (const e of s.events()) {
      assert.ok(!seen.has(e.data), `message on stream ${i} already seen on stream ${seen.get(e.data)}: ${e.data}`);
      seen.set(e.data, i);
    }
  }
}

/** Child-log lines that are responses to the child's own request id (e.g. "s-1"). */
const childAnswersTo = (gw, id) => gw.childMessages().filter((m) => m.id === id && ('result' in m || 'error' in m));

/** Waits until the child has read a tools/call carrying this marker text; returns it. */
const childCall = (gw, marker) => waitFor(
  () => gw.childMessages().find((m) => m.method === 'tools/call' && JSON.stringify(m.params).includes(marker)),
  5000, `child to receive the call ${marker}`);

/** The capabilities a client declares to be asked sampling, elicitation and roots questions. */
const ASKED = { capabilities: { sampling: {}, elicitation: {}, roots: {} } };
/** Why a test of the GET stream's share of a child's messages does not apply to a pooled session. */
const ON_CALL_STREAM = 'a shared child\'s notification or question goes on the stream of the call it is attributed to, never the GET stream';

/** The type of the id the gateway mints for a child's question (a pooled session's: a string). */
const MINTED = MATRIX_POOLED ? 'string' : 'number';

const ODD_IDS = [
  '"42"',
  '42',
  '123456789012345678901234567890',
  '"a\\u0062\\"c"',
  '-7',
  '1.5',
  '-0.25e2',
  '0',
];

test('client ids come back byte-exact: strings with escapes, huge, negative and fractional numbers', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    for (const [i, idText] of ODD_IDS.entries()) {
      const r = await post(gw, rawCall(idText, 'echo', { text: `odd-${i}` }), { sid: s.sid });
      assert.equal(r.status, 200, idText);
      await r.done();
      const evs = r.events();
      assert.equal(evs.length, 1, `${idText}: one event, got ${r.text()}`);
      assert.ok(evs[0].data.startsWith(`{"jsonrpc":"2.0","id":${idText},"result":`), `${idText}: got ${evs[0].data}`);
      assert.equal(textOf(evs[0].json), `odd-${i}`);
    }
  });
});

test('string "42" and number 42 in flight at once stay two distinct requests', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    // "42" waits at the child until SIGUSR1 (its progress shows it got there); 42 is sent, and
    // answered, while "42" is still in flight: both at once, whatever the machine's load.
    const str = await post(gw, rawCall('"42"', 'cancel_self', {}, { progressToken: 'str' }), { sid: s.sid });
    assert.equal(str.status, 200, str.text());
    await str.waitEvent((m) => m.method === 'notifications/progress', 10000);
    const num = await post(gw, rawCall('42', 'echo', { text: 'the number' }), { sid: s.sid });
    assert.equal(num.status, 200, 'the number id is not a duplicate of the string id');
    await num.done();
    assert.equal(num.events().length, 1, num.text());
    assert.ok(num.events()[0].data.includes('"id":42,'), num.text());
    assert.equal(textOf(num.events()[0].json), 'the number');
    assert.equal(str.events().filter((e) => isAnswer(e.json)).length, 0, `"42" is still in flight: ${str.text()}`);
    const child = poolChildOf(gw, s.sid) ?? Number(/session created: server=\S+ child=(\d+)/.exec(gw.logs())?.[1]);
    assert.ok(child > 0, 'the session\'s child');
    process.kill(child, 'SIGUSR1');
    await str.done();
    const answers = str.events().filter((e) => isAnswer(e.json));
    assert.equal(answers.length, 1, str.text());
    assert.ok(answers[0].data.includes('"id":"42",'), str.text());
    assert.equal(textOf(answers[0].json), 'released');
  });
});

test('the child sees gateway-minted integer ids, never the client\'s', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    for (const [i, idText] of ODD_IDS.entries()) {
      const r = await post(gw, rawCall(idText, 'echo', { text: `minted-${i}` }), { sid: s.sid });
      await r.done();
    }
    const calls = gw.childMessages().filter((m) => m.method === 'tools/call');
    assert.equal(calls.length, ODD_IDS.length);
    for (const c of calls) assert.ok(Number.isInteger(c.id) && c.id > 0, `child id ${JSON.stringify(c.id)}`);
    assert.equal(new Set(calls.map((c) => c.id)).size, calls.length, 'child ids are unique');
    const raw = gw.childLines().filter((l) => l.includes('"tools/call"'));
    for (const [i, idText] of ODD_IDS.entries()) {
      const line = raw.find((l) => l.includes(`minted-${i}`));
      assert.ok(line, `call ${i} reached the child`);
      assert.ok(!line.includes(`"id":${idText},`), `client id ${idText} leaked to the child: ${line}`);
    }
    assert.ok(!gw.childLines().some((l) => l.includes('123456789012345678901234567890')), 'the 30-digit id never reaches the child');
  });
});

test('two sessions using the same client id at once get only their own answers', async () => {
  await withGateway({}, async (gw) => {
    const a = await initSession(gw);
    const b = await initSession(gw);
    const ra = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'for-A', delay_ms: 500 } }, 7), { sid: a.sid });
    const rb = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'for-B', delay_ms: 500 } }, 7), { sid: b.sid });
    assert.equal(ra.events().length, 0, 'both were in flight at once');
    await Promise.all([ra.done(), rb.done()]);
    assert.equal(ra.events().length, 1, ra.text());
    assert.equal(rb.events().length, 1, rb.text());
    assert.equal(ra.events()[0].json.id, 7);
    assert.equal(rb.events()[0].json.id, 7);
    assert.equal(textOf(ra.events()[0].json), 'for-A');
    assert.equal(textOf(rb.events()[0].json), 'for-B');
    assert.ok(!ra.text().includes('for-B') && !rb.text().includes('for-A'), 'no cross-delivery');
  });
});

test('progress goes to its own call\'s POST stream, in order, before the response; not to another call nor GET', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const a = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 5, interval_ms: 40 }, _meta: { progressToken: 'tok-A' } }, 'call-A'), { sid: s.sid });
    const b = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 5, interval_ms: 40 }, _meta: { progressToken: 'tok-B' } }, 'call-B'), { sid: s.sid });
    await Promise.all([a.done(), b.done()]);
    for (const [r, token, id] of [[a, 'tok-A', 'call-A'], [b, 'tok-B', 'call-B']]) {
      const js = r.events().map((e) => e.json);
      assert.equal(js.length, 6, `${id}: 5 progress + 1 response, got ${r.text()}`);
      for (let i = 0; i < 5; i++) {
        assert.equal(js[i].method, 'notifications/progress', `${id} event ${i}`);
        assert.equal(js[i].params.progressToken, token, `${id} event ${i} token`);
        assert.equal(js[i].params.progress, i + 1, `${id} progress in order`);
      }
      assert.equal(js[5].id, id);
      assert.equal(textOf(js[5]), 'done after 5 steps');
    }
    // Anything routed to GET before now precedes this notification on that ordered stream (a
    // pooled session's goes on its call's stream: then the GET stream has had nothing at all).
    const n = await callTool(gw, s.sid, 'notify', { text: 'marker' });
    assert.equal(textOf(n.response), 'ok');
    if (MATRIX_POOLED) assert.equal(g.text(), '', `GET got: ${g.text()}`);
    else await g.waitEvent((j) => j.method === 'notifications/message' && j.params.data === 'marker');
    assert.ok(!g.events().some((e) => e.json?.method === 'notifications/progress'), `GET got progress: ${g.text()}`);
    assertNoDuplicates(g, a, b, n.r);
    g.drop();
  });
});

test('a progress token reused after its request was cancelled routes progress to the new request', async () => {
  // The spec only requires tokens to be unique among active requests; a cancelled one is not.
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const first = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 50 }, _meta: { progressToken: 'reused' } }, 'first'), { sid: s.sid });
    await first.waitEvent((j) => j.method === 'notifications/progress');
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'first', reason: 'user abort' } }, { sid: s.sid });
    await c.done();
    assert.equal(c.status, 202);
    await first.done();
    const { events, response } = await callTool(gw, s.sid, 'slow', { steps: 3, interval_ms: 20 }, { id: 'second', meta: { progressToken: 'reused' } });
    assert.equal(textOf(response), 'done after 3 steps');
    const progress = events.filter((e) => e.json?.method === 'notifications/progress').map((e) => e.json.params.progress);
    assert.deepEqual(progress, [1, 2, 3], 'the new request gets its progress');
  });
});

test('a child notification goes to the open GET stream and not to the POST stream', async (t) => {
  if (pooledSkip(t, ON_CALL_STREAM)) return;
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const { r, events, response } = await callTool(gw, s.sid, 'notify', { level: 'warning', text: 'to the GET stream' });
    assert.equal(textOf(response), 'ok');
    assert.equal(events.length, 1, `POST carries only the response: ${r.text()}`);
    const ev = await g.waitEvent((j) => j.method === 'notifications/message');
    assert.deepEqual(ev.json.params, { level: 'warning', data: 'to the GET stream' });
    assertNoDuplicates(g, r);
    g.drop();
  });
});

test('without a GET stream a child notification goes to the POST stream of the call, before its response', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const { r, events } = await callTool(gw, s.sid, 'notify', { text: 'to the POST stream' });
    const js = events.map((e) => e.json);
    assert.equal(js.length, 2, r.text());
    assert.equal(js[0].method, 'notifications/message');
    assert.equal(js[0].params.data, 'to the POST stream');
    assert.equal(textOf(js[1]), 'ok');
  });
});

test('notifications that arrive while no stream exists are delivered first on the next GET stream', async (t) => {
  if (pooledSkip(t, 'back-pressure of one session\'s stream never blocks a shared child')) return;
  // A flood on a POST stream whose client stops reading fills the stream queue, so the gateway
  // stops reading the child, which blocks on its stdout. The client then vanishes: the call is
  // cancelled, the gateway reads on, and the rest of the flood finds no stream at all.
  const COUNT = 20000;
  await withGateway({ gateway: { stream_queue_bytes: 65536 } }, async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'flood', arguments: { count: COUNT, bytes: 2000 } }), { sid: s.sid });
    r.res.pause();
    await childCall(gw, '"flood"');
    const state = { stable: 0, last: null };
    await waitFor(() => stdoutBlocked(s.pid, state), 20000, 'child blocked on its stdout');
    r.drop();
    await gw.waitLog(/late answer for cancelled tools\/call dropped/, 20000);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const last = await g.waitEvent((j) => j.method === 'notifications/message' && String(j.params.data).startsWith(`${COUNT} `), 5000);
    assert.ok(last);
    const nums = g.events().map((e) => {
      assert.equal(e.json?.method, 'notifications/message', e.data.slice(0, 200));
      return Number(/^(\d+) /.exec(e.json.params.data)[1]);
    });
    assert.ok(nums.length >= 1 && nums.length <= 256, `backlog is bounded: ${nums.length}`);
    for (let i = 1; i < nums.length; i++) assert.equal(nums[i], nums[i - 1] + 1, 'backlog in order, no gaps');
    assert.equal(nums.at(-1), COUNT);
    assert.ok(!g.events().some((e) => isAnswer(e.json)), 'the cancelled call\'s answer is not delivered');
    // Later notifications follow the backlog on the same stream.
    const n = await callTool(gw, s.sid, 'notify', { text: 'after the backlog' });
    assert.equal(textOf(n.response), 'ok');
    await g.waitEvent((j) => j.params?.data === 'after the backlog');
    assert.equal(g.events().at(-1).json.params.data, 'after the backlog');
    assert.equal(g.events().length, nums.length + 1);
    g.drop();
  });
});

test('a child request goes to the GET stream with a minted id; the client\'s answer reaches the child under its own id', async (t) => {
  if (pooledSkip(t, ON_CALL_STREAM)) return;
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, ASKED);
    const g = await get(gw, { sid: s.sid });
    const call = await post(gw, rpc('tools/call', { name: 'sample', arguments: { prompt: 'say hi' } }, 'ask-1'), { sid: s.sid });
    const req = await g.waitEvent((j) => j.method === 'sampling/createMessage');
    assert.equal(typeof req.json.id, MINTED, `minted id, got ${req.data}`);
    assert.ok(!req.data.includes('s-1'), 'the child\'s own id is not shown to the client');
    assert.equal(req.json.params.messages[0].content.text, 'say hi');
    const status = await answer(gw, s.sid, req.json.id, { role: 'assistant', content: { type: 'text', text: 'from client' }, model: 'm' });
    assert.equal(status, 202);
    await call.done();
    const js = call.events().map((e) => e.json);
    assert.equal(js.length, 1, `POST carries only the response: ${call.text()}`);
    assert.equal(js[0].id, 'ask-1');
    assert.equal(textOf(js[0]), 'from client');
    const seen = childAnswersTo(gw, 's-1');
    assert.equal(seen.length, 1, 'the child got the answer once, under its id "s-1"');
    assert.equal(seen[0].result.content.text, 'from client');
    assertNoDuplicates(g, call);
    g.drop();
  });
});

test('without a GET stream, elicitation reaches the client on the POST stream and its answer the child', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, ASKED);
    const call = await post(gw, rpc('tools/call', { name: 'elicit', arguments: { message: 'Name?' } }, 'el-1'), { sid: s.sid });
    const req = await call.waitEvent((j) => j.method === 'elicitation/create');
    assert.equal(typeof req.json.id, MINTED);
    assert.equal(req.json.params.message, 'Name?');
    const result = { action: 'accept', content: { name: 'Ada' } };
    assert.equal(await answer(gw, s.sid, req.json.id, result), 202);
    await call.done();
    const js = call.events().map((e) => e.json);
    assert.equal(js.length, 2, call.text());
    assert.equal(js[1].id, 'el-1');
    assert.deepEqual(JSON.parse(textOf(js[1])), result);
    const seen = childAnswersTo(gw, 's-1');
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0].result, result);
  });
});

test('without a GET stream, roots/list reaches the client on the POST stream and its answer the child', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, ASKED);
    const call = await post(gw, rpc('tools/call', { name: 'roots', arguments: {} }, 'roots-1'), { sid: s.sid });
    const req = await call.waitEvent((j) => j.method === 'roots/list');
    assert.equal(typeof req.json.id, MINTED);
    const result = { roots: [{ uri: 'file:///tmp/project', name: 'project' }] };
    assert.equal(await answer(gw, s.sid, req.json.id, result), 202);
    await call.done();
    const js = call.events().map((e) => e.json);
    assert.equal(js.length, 2, call.text());
    assert.equal(js[1].id, 'roots-1');
    assert.deepEqual(JSON.parse(textOf(js[1])), result);
    assert.deepEqual(childAnswersTo(gw, 's-1').map((m) => m.result), [result]);
  });
});

for (const where of ['GET', 'POST']) {
  test(`child -> client cancel arrives on the ${where} stream that carried the request; a late answer is dropped`, async (t) => {
    if (where === 'GET' && pooledSkip(t, ON_CALL_STREAM)) return;
    await withGateway({}, async (gw) => {
      const s = await initSession(gw, ASKED);
      const g = where === 'GET' ? await get(gw, { sid: s.sid }) : null;
      const call = await post(gw, rpc('tools/call', { name: 'child_cancel', arguments: { delay_ms: 200 } }, 'cc-1'), { sid: s.sid });
      const carrier = g || call;
      const req = await carrier.waitEvent((j) => j.method === 'sampling/createMessage');
      const cancel = await carrier.waitEvent((j) => j.method === 'notifications/cancelled');
      assert.equal(typeof req.json.id, MINTED);
      assert.equal(cancel.json.params.requestId, req.json.id, `requestId is the id the client saw: ${cancel.data}`);
      assert.equal(cancel.json.params.reason, 'child gave up');
      const order = carrier.events().map((e) => e.json?.method);
      assert.ok(order.indexOf('sampling/createMessage') < order.indexOf('notifications/cancelled'), `request before its cancel: ${order}`);
      assert.equal(carrier.events().filter((e) => e.json?.method === 'notifications/cancelled').length, 1, 'one cancel');
      await call.done();
      const resp = call.events().map((e) => e.json).find(isAnswer);
      assert.equal(resp.id, 'cc-1');
      assert.equal(textOf(resp), 'gave up');
      // The late answer: 202, and never forwarded.
      assert.equal(await answer(gw, s.sid, req.json.id, { role: 'assistant', content: { type: 'text', text: 'too late' }, model: 'm' }), 202);
      const after = await callTool(gw, s.sid, 'echo', { text: 'after the late answer' });
      assert.equal(textOf(after.response), 'after the late answer');
      await childCall(gw, 'after the late answer');
      assert.deepEqual(childAnswersTo(gw, 's-1'), [], 'the child never receives an answer to s-1');
      assert.ok(!gw.childLines().some((l) => l.includes('too late')));
      if (g) {
        assert.ok(!call.events().some((e) => e.json?.method), `POST carries only the response: ${call.text()}`);
        assertNoDuplicates(g, call, after.r);
        g.drop();
      } else {
        assertNoDuplicates(call, after.r);
      }
    });
  });
}
