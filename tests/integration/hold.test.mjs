// SPDX-License-Identifier: MIT
// response_hold_ms: a POST's SSE stream is held back until its answer (one body with a
// Content-Length) unless a notification comes first or the hold runs out (a chunked stream,
// headers at once); 0 never holds; a client that drops its socket during the hold is seen at once
// (the child gets notifications/cancelled); held and one-shot answers work on a keep-alive socket.
//
// Time: response_hold_ms is at most 1000 ms (its config bound), so "at once" against "when the
// hold ran out" can be told apart by at most that much; the bounds below use the whole of it
// (a hold's timer never fires early, so a gateway that waits for it is never faster). Where the
// order of events says more than a clock, the example server is stepped instead: cancel_self
// answers only on SIGUSR1 (sending progress 0 at once when asked), so "the stream started
// before the answer" is an order, not a measurement. Deadlines scale (tests/lib/timing.mjs).
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';

import { ACCEPT_BOTH, initSession, MATRIX_POOLED, parseEventId, parseSse, parseSseComplete, pooledSkip, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');
/** The example server's "go": its cancel_self calls answer `released`. */
const go = (pid) => process.kill(pid, 'SIGUSR1');
/** The longest hold the configuration allows. */
const HOLD = 1000;

/**
 * POSTs msg and records when things arrived: tSent (request written), tHeaders (response
 * headers parsed), and every body chunk with its time, so eventTime(pred) tells when the first
 * complete SSE event matching pred had arrived. Returns at once with those fields live; `done`
 * resolves to the same object at the end of the body.
 */
function startTimed(gw, msg, { sid, version, agent = false, ms = scaled(15000) } = {}) {
  const u = new URL(gw.url);
  const body = JSON.stringify(msg);
  const headers = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Content-Length': Buffer.byteLength(body) };
  if (sid) headers['Mcp-Session-Id'] = sid;
  if (version) headers['MCP-Protocol-Version'] = version;
  const out = { tSent: 0, tHeaders: 0, tEnd: 0, text: '', marks: [] };
  out.eventTime = (pred) => out.marks.find((m) => parseSseComplete(out.text.slice(0, m.end)).some(pred))?.t;
  out.done = new Promise((resolve, reject) => {
    const timer = setTimeout(() => { req.destroy(); reject(new Error(`no complete response within ${ms} ms: ${out.text}`)); }, ms);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers, agent });
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    req.on('response', (res) => {
      out.tHeaders = performance.now();
      out.status = res.statusCode;
      out.headers = res.headers;
      out.rawHeaders = res.rawHeaders;
      out.socket = req.socket;
      out.localPort = req.socket?.localPort;
      res.setEncoding('utf8');
      res.on('data', (d) => { out.text += d; out.marks.push({ t: performance.now(), end: out.text.length }); });
      res.on('end', () => {
        clearTimeout(timer);
        out.tEnd = performance.now();
        out.events = parseSse(out.text);
        resolve(out);
      });
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
    });
    req.end(body);
    out.tSent = performance.now();
  });
  out.done.catch(() => {}); // handled by whoever awaits it; never an unhandled rejection meanwhile
  return out;
}

/** startTimed, resolving at the end of the body. */
const timedPost = (gw, msg, opts) => startTimed(gw, msg, opts).done;

/**
 * Asserts r was sent as one SSE body with a Content-Length (no chunking): text/event-stream, and
 * none of a stream's Cache-Control: no-cache and X-Accel-Buffering: no (nothing to hold back).
 */
function assertOneShot(r, what) {
  assert.equal(r.status, 200, `${what}: HTTP ${r.status} ${r.text}`);
  assert.equal(r.headers['transfer-encoding'], undefined, `${what}: no Transfer-Encoding expected: ${JSON.stringify(r.rawHeaders)}`);
  assert.ok(r.headers['content-length'] !== undefined, `${what}: Content-Length expected: ${JSON.stringify(r.rawHeaders)}`);
  assert.equal(Number(r.headers['content-length']), Buffer.byteLength(r.text), `${what}: Content-Length is the body's byte length`);
  assert.equal(r.headers['content-type'], 'text/event-stream', what);
  assert.equal(r.headers['cache-control'], undefined, what);
  assert.equal(r.headers['x-accel-buffering'], undefined, what);
  assert.ok(r.text.endsWith('\n\n'), `${what}: the body ends with a complete event: ${JSON.stringify(r.text)}`);
}

/** Asserts r was streamed: chunked, no Content-Length, the SSE headers. */
function assertChunked(r, what) {
  assert.equal(r.status, 200, `${what}: HTTP ${r.status} ${r.text}`);
  assert.equal(r.headers['transfer-encoding'], 'chunked', `${what}: chunked expected: ${JSON.stringify(r.rawHeaders)}`);
  assert.equal(r.headers['content-length'], undefined, `${what}: no Content-Length on a stream: ${JSON.stringify(r.rawHeaders)}`);
  assert.equal(r.headers['content-type'], 'text/event-stream', what);
  assert.equal(r.headers['cache-control'], 'no-cache', what);
  assert.equal(r.headers['x-accel-buffering'], 'no', what);
}

const initMsg = (version, id) => rpc('initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: 'hold-test', version: '1' } }, id);

/** An initialize (checked by check(r)) followed by notifications/initialized; returns the session id. */
async function openSession(gw, version, id, check) {
  const r = await timedPost(gw, initMsg(version, id));
  check(r);
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid, `initialize carries Mcp-Session-Id: ${JSON.stringify(r.rawHeaders)}`);
  const ans = r.events.map((e) => e.json).find(isAnswer);
  assert.equal(ans?.id, id, `initialize answered: ${r.text}`);
  assert.equal(ans.result?.protocolVersion, version, r.text);
  const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, headers: { 'MCP-Protocol-Version': version } });
  await n.done();
  assert.equal(n.status, 202);
  return { sid, init: r };
}

const echoCall = (id, text) => rpc('tools/call', { name: 'echo', arguments: { text } }, id);

// --- one body with a Content-Length ------------------------------------------------------------

test('2025-06-18: an initialize and a quick echo answered within the hold leave as one SSE body with a Content-Length', async (t) => {
  // A hold far longer than the answer takes: the answer ends it (and is not delayed by it).
  await withGateway({ gateway: { response_hold_ms: HOLD } }, async (gw) => {
    const { sid, init } = await openSession(gw, '2025-06-18', 'init-0618', (r) => assertOneShot(r, 'initialize'));
    assert.equal(init.events.length, 1, `exactly one event: ${init.text}`);
    assert.equal(init.events[0].event, 'message');
    // A pooled session's initialize is the gateway's answer on a stream that is never resumed: no id.
    assert.match(init.text, MATRIX_POOLED ? /^event: message\ndata: \{/ : /^id: \d+-1\nevent: message\ndata: \{/, `no priming event on 2025-06-18: ${JSON.stringify(init.text)}`);

    const r = await timedPost(gw, echoCall('echo-0618', 'hello hold'), { sid, version: '2025-06-18' });
    assertOneShot(r, 'echo');
    assert.equal(r.headers['mcp-session-id'], undefined, 'only a new session gets Mcp-Session-Id');
    assert.equal(r.events.length, 1, `exactly one event: ${r.text}`);
    const ev = r.events[0];
    assert.equal(ev.event, 'message');
    assert.equal(ev.json?.jsonrpc, '2.0');
    assert.equal(ev.json.id, 'echo-0618');
    assert.deepEqual(ev.json.result, { content: [{ type: 'text', text: 'hello hold' }] });
    assert.equal(parseEventId(ev.id)?.seq, 1, `an event id on 2025-06-18, no priming: ${ev.id}`);
    // A gateway that waits for the timer ends the body no sooner than HOLD after the request; an
    // answer that takes longer than HOLD would not leave as one body at all, so this bound asks
    // nothing of a slow run that the shape above does not.
    assert.ok(r.tEnd - r.tSent < HOLD, `the answer ended the ${HOLD} ms hold, not the timer: ${(r.tEnd - r.tSent).toFixed(1)} ms`);
  });
});

test('2025-11-25: a quick echo leaves as one Content-Length body: the priming event (id, retry, empty data), then the message', async (t) => {
  await withGateway({ gateway: { response_hold_ms: HOLD, sse_retry_ms: 1234 } }, async (gw) => {
    const { sid, init } = await openSession(gw, '2025-11-25', 'init-1125', (r) => assertOneShot(r, 'initialize'));
    assert.ok(isAnswer(init.events.at(-1)?.json), `initialize's answer is the last event: ${init.text}`);

    const r = await timedPost(gw, echoCall('echo-1125', 'primed'), { sid, version: '2025-11-25' });
    assertOneShot(r, 'echo');
    assert.equal(r.events.length, 2, `priming + message: ${r.text}`);
    const [prime, msg] = r.events;
    assert.match(r.text, /^id: \d+-1\nretry: 1234\ndata: ?\n\n/, `the body starts with the priming event: ${JSON.stringify(r.text)}`);
    assert.equal(prime.data, '', 'priming data is empty');
    assert.equal(prime.retry, '1234');
    const pid = parseEventId(prime.id);
    assert.equal(pid?.seq, 1, `priming id ${prime.id}`);
    assert.equal(msg.event, 'message');
    assert.deepEqual(parseEventId(msg.id), { stream: pid.stream, seq: 2 }, `message id ${msg.id} follows the priming id ${prime.id}`);
    assert.equal(msg.json?.id, 'echo-1125');
    assert.deepEqual(msg.json.result, { content: [{ type: 'text', text: 'primed' }] });
    // As above: the timer would end it no sooner than HOLD after the request.
    assert.ok(r.tEnd - r.tSent < HOLD, `the answer ended the ${HOLD} ms hold, not the timer: ${(r.tEnd - r.tSent).toFixed(1)} ms`);
  });
});

// --- streams that start before the answer ------------------------------------------------------

test('an answer slower than the hold: the stream starts chunked when the hold runs out, headers (and priming) well before the answer', async (t) => {
  await withGateway({ gateway: { response_hold_ms: 5 } }, async (gw) => {
    for (const version of ['2025-11-25', '2025-06-18']) {
      const s = await initSession(gw, { version });
      assert.equal(s.version, version);
      const id = `held-${version}`;
      // cancel_self, no progressToken: nothing at all comes from the child until SIGUSR1, so
      // whatever arrives before go() was sent because the hold ran out.
      const r = startTimed(gw, rpc('tools/call', { name: 'cancel_self', arguments: {} }, id), { sid: s.sid, version });
      await waitFor(() => r.tHeaders, scaled(5000), `${version}: headers while the answer is held back by the child`);
      if (version === '2025-11-25') await waitFor(() => r.eventTime((e) => e.data === '' && e.id !== undefined), scaled(5000), 'the priming event before the answer');
      const tGo = performance.now();
      assert.equal(r.tEnd, 0, 'the stream is still open');
      go(s.pid);
      await r.done;
      assertChunked(r, version);
      const ans = r.events.map((e) => e.json).find(isAnswer);
      assert.equal(ans?.id, id, r.text);
      assert.equal(textOf(ans), 'released');
      const tAnswer = r.eventTime((e) => e.json?.id === id);
      assert.ok(tAnswer >= tGo, 'the answer came after the release');
      if (version === '2025-11-25') {
        assert.equal(r.events.length, 2, `priming + answer: ${r.text}`);
        assert.equal(r.events[0].data, '', 'the priming event comes first');
        assert.ok(r.eventTime((e) => e.data === '' && e.id !== undefined) < tGo, 'the priming event came with the headers, before the release');
      } else {
        assert.equal(r.events.length, 1, `just the answer: ${r.text}`);
      }
    }
  });
});

test('a notification before the answer starts the stream at once (chunked), long before a 1000 ms hold runs out', async () => {
  await withGateway({ gateway: { response_hold_ms: HOLD } }, async (gw) => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const s = await initSession(gw, { version });
      const id = `prog-${version}`;
      const token = `tok-${version}`;
      // cancel_self sends progress 0 at once, then holds its answer until SIGUSR1.
      const params = { name: 'cancel_self', arguments: {}, _meta: { progressToken: token } };
      const r = startTimed(gw, rpc('tools/call', params, id), { sid: s.sid, version });
      const tFirst = await waitFor(() => r.eventTime((e) => e.json?.method === 'notifications/progress'), scaled(5000), `${version}: the progress before the answer`);
      const tGo = performance.now();
      go(s.pid);
      await r.done;
      assertChunked(r, version);
      const evs = r.events.filter((e) => e.json);
      const progress = evs.filter((e) => e.json.method === 'notifications/progress').map((e) => e.json.params);
      assert.deepEqual(progress.map((p) => p.progress), [0], r.text);
      assert.equal(progress[0].progressToken, token);
      assert.equal(evs.at(-1).json.id, id, 'the answer is the last event');
      assert.equal(textOf(evs.at(-1).json), 'released');
      const tAnswer = r.eventTime((e) => e.json?.id === id);
      const sinceSent = (t) => (t - r.tSent).toFixed(1);
      // The child sends the progress as it reads the call. A gateway that kept the stream until
      // the hold ran out would send headers and progress no sooner than HOLD after the request
      // (the longest hold there is, so the widest gap to tell the two apart).
      assert.ok(tFirst - r.tSent < HOLD, `${version}: first progress ${sinceSent(tFirst)} ms after the request, the hold is ${HOLD} ms`);
      assert.ok(r.tHeaders - r.tSent < HOLD, `${version}: headers ${sinceSent(r.tHeaders)} ms after the request, the hold is ${HOLD} ms`);
      assert.ok(r.tHeaders <= tFirst, 'headers before the first progress');
      assert.ok(tAnswer >= tGo, `${version}: the answer came after the release, the progress before it`);
    }
  });
});

test('response_hold_ms = 0: never held, even a quick answer (and initialize) is streamed chunked', async (t) => {
  await withGateway({ gateway: { response_hold_ms: 0 } }, async (gw) => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const { sid } = await openSession(gw, version, `init0-${version}`, (r) => assertChunked(r, `${version} initialize`));
      for (let i = 0; i < 3; i++) {
        const id = `echo0-${version}-${i}`;
        const r = await timedPost(gw, echoCall(id, `plain ${i}`), { sid, version });
        assertChunked(r, `${version} echo ${i}`);
        const ans = r.events.map((e) => e.json).find(isAnswer);
        assert.equal(ans?.id, id);
        assert.equal(textOf(ans), `plain ${i}`);
        assert.equal(r.events.length, version === '2025-11-25' ? 2 : 1, r.text);
      }
    }
  });
});

// --- a drop during the hold --------------------------------------------------------------------

/** Writes a raw HTTP/1.1 POST on a fresh socket; resolves once connected and written. */
function rawPost(gw, sid, msg) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify(msg);
    const sock = net.connect(gw.port, gw.host);
    const st = { sock, received: '', closed: false };
    sock.setEncoding('utf8');
    sock.on('data', (d) => { st.received += d; });
    sock.on('close', () => { st.closed = true; });
    sock.on('error', () => { /* the drop itself */ });
    sock.once('error', reject);
    sock.on('connect', () => {
      sock.off('error', reject);
      const head = [
        'POST /mcp HTTP/1.1',
        `Host: ${gw.host}:${gw.port}`,
        'Content-Type: application/json',
        `Accept: ${ACCEPT_BOTH}`,
        `Mcp-Session-Id: ${sid}`,
        'MCP-Protocol-Version: 2025-06-18',
        `Content-Length: ${Buffer.byteLength(body)}`,
        '', '',
      ].join('\r\n');
      sock.write(head + body, () => { st.tSent = performance.now(); resolve(st); });
    });
  });
}

test('a client that drops its socket during a 1000 ms hold is seen at once: the child gets notifications/cancelled, the session goes on', async (t) => {
  if (pooledSkip(t, 'reads a child-mode session\'s log of its stream (forwarded, http 200, dropped); a pooled session logs by its label')) return;
  await withGateway({ gateway: { response_hold_ms: HOLD } }, async (gw) => {
    const s = await initSession(gw);
    const sidRe = s.sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    const droppedRe = /client dropped POST stream \d+: 1 requests cancelled/;
    // A held stream's headers are logged ("http 200") when it starts, at the latest when the
    // hold runs out; a stream dropped during the hold never starts.
    const startedRe = new RegExp(`session=${sidRe} http 200\\b`);
    // FIN (destroy) and RST (resetAndDestroy): both must be seen while the request is held.
    const modes = [['destroy', (sock) => sock.destroy()]];
    if (typeof net.Socket.prototype.resetAndDestroy === 'function') modes.push(['reset', (sock) => sock.resetAndDestroy()]);
    // Where the drop was seen is read from the order of the gateway's log, not from a clock: seen
    // during the hold, the stream never started. A run so slow that the hold (1000 ms) ran out
    // before the gateway saw the drop proves nothing either way and is tried again; a gateway
    // that only notices a drop when it writes fails every attempt.
    const ATTEMPTS = 5;
    let drops = 0;
    for (const [mode, drop] of modes) {
      let seenInHold = false;
      for (let attempt = 1; attempt <= ATTEMPTS && !seenInHold; attempt++) {
        const tag = `held-${mode}-${attempt}`;
        const before = childCancels(gw).length;
        // cancel_self never answers by itself: only the drop can end this call.
        const c = await rawPost(gw, s.sid, rpc('tools/call', { name: 'cancel_self', arguments: { tag } }, tag));
        const seen = await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), scaled(5000), `the child to read ${tag}`);
        // The gateway holds the request from the moment it forwards it: drop now.
        const tDrop = performance.now();
        drop(c.sock);
        drops++;
        const cancel = await waitFor(() => childCancels(gw)[before], scaled(5000), `${mode}: the cancel at the child`);
        const tCancel = performance.now();
        assert.deepEqual(cancel.params, { requestId: seen.id, reason: 'client disconnected' });
        // The log from this request's forwarding on (earlier lines, such as the last echo's
        // "http 200", may reach the log after the client has its answer).
        const fwd = await gw.waitLog(new RegExp(`session=${sidRe} request tools/call forwarded as child id ${seen.id}\\b`), scaled(5000));
        const logFrom = fwd.index;
        await waitFor(() => droppedRe.test(gw.logs().slice(logFrom)), scaled(5000), `${mode}: the drop in the log`);
        const seg = gw.logs().slice(logFrom);
        const started = startedRe.exec(seg);
        seenInHold = !started || started.index > droppedRe.exec(seg).index;
        const when = `drop ${(tDrop - c.tSent).toFixed(1)} ms after the request, cancel at the child ${(tCancel - tDrop).toFixed(1)} ms after the drop`;
        if (seenInHold) {
          assert.equal(c.received, '', `${mode}: nothing (no headers) sent during the hold: ${JSON.stringify(c.received)}`);
          t.diagnostic(`${mode}: seen during the hold; ${when}`);
        } else {
          t.diagnostic(`${mode}, attempt ${attempt}: the hold ran out before the drop was seen (${when}); inconclusive`);
        }

        const e = await timedPost(gw, echoCall(`after-${tag}`, `alive after ${tag}`), { sid: s.sid, version: '2025-06-18' });
        assert.equal(textOf(e.events.map((x) => x.json).find(isAnswer)), `alive after ${tag}`);
        if (seenInHold) assertOneShot(e, `echo after the ${mode}`);
        assert.equal(childCancels(gw).length, before + 1, `${mode}: exactly one cancel`);
      }
      assert.ok(seenInHold, `${mode}: in ${ATTEMPTS} attempts the gateway never saw the drop during the ${HOLD} ms hold, only once the stream started (it must watch a held connection for a hang-up)`);
    }
    assert.equal((gw.logs().match(new RegExp(droppedRe.source, 'g')) || []).length, drops);
  });
});

// --- keep-alive ---------------------------------------------------------------------------------

test('keep-alive: 20 held echo calls in a row on one socket all answer as one-shot bodies; a streamed call between one-shots keeps the socket', async () => {
  await withGateway({ gateway: { response_hold_ms: HOLD } }, async (gw) => {
    const s = await initSession(gw);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const sockets = new Set();
      const ports = new Set();
      const t0 = performance.now();
      for (let i = 0; i < 20; i++) {
        const id = `ka-${i}`;
        const r = await timedPost(gw, echoCall(id, `keep ${i}`), { sid: s.sid, version: '2025-06-18', agent });
        assertOneShot(r, `call ${i}`);
        assert.notEqual(r.headers.connection, 'close', `call ${i}: the gateway keeps the connection: ${JSON.stringify(r.rawHeaders)}`);
        assert.equal(r.events.length, 1, r.text);
        assert.equal(r.events[0].json?.id, id);
        assert.equal(textOf(r.events[0].json), `keep ${i}`);
        sockets.add(r.socket);
        ports.add(r.localPort);
      }
      const took = performance.now() - t0;
      assert.equal(sockets.size, 1, `one socket for all 20 calls, saw ${sockets.size}`);
      assert.equal(ports.size, 1, `one local port, saw ${[...ports]}`);
      // Each answer ends its hold: 20 calls held to the end would take at least 20 x HOLD.
      assert.ok(took < 20 * HOLD, `20 calls took ${took.toFixed(0)} ms`);

      // A streamed (chunked) call, then a one-shot again, on the same socket. The answer is
      // released only once the progress has arrived: streamed for sure (a progress and an answer
      // that both came before the gateway resumed the connection could leave as one body).
      const p = startTimed(gw, rpc('tools/call', { name: 'cancel_self', arguments: {}, _meta: { progressToken: 'ka' } }, 'ka-held'), { sid: s.sid, version: '2025-06-18', agent });
      await waitFor(() => p.eventTime((e) => e.json?.method === 'notifications/progress'), scaled(5000), 'the progress');
      go(s.pid);
      await p.done;
      assertChunked(p, 'held call with progress');
      assert.equal(textOf(p.events.map((e) => e.json).find(isAnswer)), 'released');
      const q = await timedPost(gw, echoCall('ka-last', 'last'), { sid: s.sid, version: '2025-06-18', agent });
      assertOneShot(q, 'echo after the stream');
      assert.equal(textOf(q.events[0]?.json), 'last');
      sockets.add(p.socket).add(q.socket);
      ports.add(p.localPort).add(q.localPort);
      assert.equal(sockets.size, 1, 'still one socket');
      assert.equal(ports.size, 1, `still one local port, saw ${[...ports]}`);
    } finally {
      agent.destroy();
    }
  });
});
