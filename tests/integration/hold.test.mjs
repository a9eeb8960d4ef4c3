// SPDX-License-Identifier: MIT
// response_hold_ms: a POST's SSE stream is held back until its answer (one body with a
// Content-Length) unless a notification comes first or the hold runs out (a chunked stream,
// headers at once); 0 never holds; a client that drops its socket during the hold is seen at once
// (the child gets notifications/cancelled); held and one-shot answers work on a keep-alive socket.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';

import { ACCEPT_BOTH, initSession, parseEventId, parseSse, parseSseComplete, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';

const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');

/**
 * POSTs msg and records when things arrived: tSent (request written), tHeaders (response
 * headers parsed), and every body chunk with its time, so eventTime(pred) tells when the first
 * complete SSE event matching pred had arrived. Resolves at the end of the body.
 */
function timedPost(gw, msg, { sid, version, agent = false, ms = 15000 } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(gw.url);
    const body = JSON.stringify(msg);
    const headers = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Content-Length': Buffer.byteLength(body) };
    if (sid) headers['Mcp-Session-Id'] = sid;
    if (version) headers['MCP-Protocol-Version'] = version;
    const out = { tSent: 0, tHeaders: 0, tEnd: 0, text: '', marks: [] };
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
        out.eventTime = (pred) => out.marks.find((m) => parseSseComplete(out.text.slice(0, m.end)).some(pred))?.t;
        resolve(out);
      });
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
    });
    req.end(body);
    out.tSent = performance.now();
  });
}

/** Asserts r was sent as one SSE body with a Content-Length (no chunking) and the SSE headers. */
function assertOneShot(r, what) {
  assert.equal(r.status, 200, `${what}: HTTP ${r.status} ${r.text}`);
  assert.equal(r.headers['transfer-encoding'], undefined, `${what}: no Transfer-Encoding expected: ${JSON.stringify(r.rawHeaders)}`);
  assert.ok(r.headers['content-length'] !== undefined, `${what}: Content-Length expected: ${JSON.stringify(r.rawHeaders)}`);
  assert.equal(Number(r.headers['content-length']), Buffer.byteLength(r.text), `${what}: Content-Length is the body's byte length`);
  assert.equal(r.headers['content-type'], 'text/event-stream', what);
  assert.equal(r.headers['cache-control'], 'no-cache', what);
  assert.equal(r.headers['x-accel-buffering'], 'no', what);
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

test('2025-06-18: an initialize and a quick echo answered within the hold leave as one SSE body with a Content-Length', async () => {
  // A hold far longer than the answer takes: the answer ends it (and is not delayed by it).
  await withGateway({ gateway: { response_hold_ms: 1000 } }, async (gw) => {
    const { sid, init } = await openSession(gw, '2025-06-18', 'init-0618', (r) => assertOneShot(r, 'initialize'));
    assert.equal(init.events.length, 1, `exactly one event: ${init.text}`);
    assert.equal(init.events[0].event, 'message');
    assert.match(init.text, /^id: \d+-1\nevent: message\ndata: \{/, `no priming event on 2025-06-18: ${JSON.stringify(init.text)}`);

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
    assert.ok(r.tEnd - r.tSent < 500, `the answer ended the 1000 ms hold, not the timer: ${(r.tEnd - r.tSent).toFixed(1)} ms`);
  });
});

test('2025-11-25: a quick echo leaves as one Content-Length body: the priming event (id, retry, empty data), then the message', async () => {
  await withGateway({ gateway: { response_hold_ms: 1000, sse_retry_ms: 1234 } }, async (gw) => {
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
    assert.ok(r.tEnd - r.tSent < 500, `the answer ended the 1000 ms hold, not the timer: ${(r.tEnd - r.tSent).toFixed(1)} ms`);
  });
});

// --- streams that start before the answer ------------------------------------------------------

test('an answer slower than the hold: the stream starts chunked when the hold runs out, headers (and priming) well before the answer', async () => {
  await withGateway({ gateway: { response_hold_ms: 5 } }, async (gw) => {
    for (const version of ['2025-11-25', '2025-06-18']) {
      const s = await initSession(gw, { version });
      assert.equal(s.version, version);
      const id = `slow-${version}`;
      // 3 x 100 ms, no progressToken: nothing is sent before the answer.
      const r = await timedPost(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 3, interval_ms: 100 } }, id), { sid: s.sid, version });
      assertChunked(r, version);
      const ans = r.events.map((e) => e.json).find(isAnswer);
      assert.equal(ans?.id, id, r.text);
      assert.equal(textOf(ans), 'done after 3 steps');
      const tAnswer = r.eventTime((e) => e.json?.id === id);
      assert.ok(tAnswer !== undefined, 'the answer arrived');
      const gap = tAnswer - r.tHeaders;
      assert.ok(gap >= 150, `${version}: headers ${gap.toFixed(1)} ms before the answer; expected them at once when the 5 ms hold ran out`);
      if (version === '2025-11-25') {
        assert.equal(r.events.length, 2, `priming + answer: ${r.text}`);
        assert.equal(r.events[0].data, '', 'the priming event comes first');
        const tPrime = r.eventTime((e) => e.data === '' && e.id !== undefined);
        assert.ok(tPrime !== undefined, 'the priming event arrived');
        assert.ok(tAnswer - tPrime >= 150, `priming ${(tAnswer - tPrime).toFixed(1)} ms before the answer; expected it with the headers`);
      } else {
        assert.equal(r.events.length, 1, `just the answer: ${r.text}`);
      }
    }
  });
});

test('a notification before the answer starts the stream at once (chunked), long before a 1000 ms hold runs out', async () => {
  await withGateway({ gateway: { response_hold_ms: 1000 } }, async (gw) => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      const s = await initSession(gw, { version });
      const id = `prog-${version}`;
      const token = `tok-${version}`;
      const params = { name: 'slow', arguments: { steps: 12, interval_ms: 100 }, _meta: { progressToken: token } };
      const r = await timedPost(gw, rpc('tools/call', params, id), { sid: s.sid, version });
      assertChunked(r, version);
      const evs = r.events.filter((e) => e.json);
      const progress = evs.filter((e) => e.json.method === 'notifications/progress').map((e) => e.json.params);
      assert.deepEqual(progress.map((p) => p.progress), Array.from({ length: 12 }, (_, i) => i + 1), r.text);
      assert.ok(progress.every((p) => p.progressToken === token));
      assert.equal(evs.at(-1).json.id, id, 'the answer is the last event');
      assert.equal(textOf(evs.at(-1).json), 'done after 12 steps');
      const tFirst = r.eventTime((e) => e.json?.method === 'notifications/progress');
      const tAnswer = r.eventTime((e) => e.json?.id === id);
      const sinceSent = (t) => (t - r.tSent).toFixed(1);
      // The first progress is sent ~100 ms after the call; held to the end it would come at ~1000 ms.
      assert.ok(tFirst - r.tSent < 700, `${version}: first progress ${sinceSent(tFirst)} ms after the request, the hold is 1000 ms`);
      assert.ok(r.tHeaders - r.tSent < 700, `${version}: headers ${sinceSent(r.tHeaders)} ms after the request, the hold is 1000 ms`);
      assert.ok(r.tHeaders <= tFirst, 'headers before the first progress');
      assert.ok(tAnswer - tFirst >= 500, `${version}: the first progress ${(tAnswer - tFirst).toFixed(1)} ms before the answer`);
    }
  });
});

test('response_hold_ms = 0: never held, even a quick answer (and initialize) is streamed chunked', async () => {
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

test('a client that drops its socket during a 1000 ms hold is seen at once: the child gets notifications/cancelled, the session goes on', async () => {
  await withGateway({ gateway: { response_hold_ms: 1000 } }, async (gw) => {
    const s = await initSession(gw);
    // FIN (destroy) and RST (resetAndDestroy): both must be seen while the request is held.
    const modes = [['destroy', (sock) => sock.destroy()]];
    if (typeof net.Socket.prototype.resetAndDestroy === 'function') modes.push(['reset', (sock) => sock.resetAndDestroy()]);
    for (const [mode, drop] of modes) {
      const tag = `held-${mode}`;
      const before = childCancels(gw).length;
      const c = await rawPost(gw, s.sid, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 50, tag } }, tag));
      const seen = await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), 5000, `the child to read ${tag}`);
      // The request is held by now (the gateway holds it as it forwards it); drop ~100 ms in.
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(c.received, '', `${mode}: nothing (no headers) sent during the hold: ${JSON.stringify(c.received)}`);
      assert.equal(c.closed, false, `${mode}: the gateway left the connection open`);
      const tDrop = performance.now();
      assert.ok(tDrop - c.tSent < 500, `${mode}: the drop came ${(tDrop - c.tSent).toFixed(1)} ms into the 1000 ms hold (too late to tell a prompt cancel from the hold running out)`);
      drop(c.sock);
      // Without the hang-up watch the drop would only be noticed when the hold ends (1000 ms
      // after the request): the cancel must come well before that.
      const limit = Math.min(800, c.tSent + 900 - tDrop);
      const cancel = await waitFor(() => childCancels(gw)[before], limit, `${mode}: the cancel at the child within ${limit.toFixed(0)} ms of the drop`);
      const tCancel = performance.now();
      assert.deepEqual(cancel.params, { requestId: seen.id, reason: 'client disconnected' });
      console.log(`${mode}: drop -> cancel at the child ${(tCancel - tDrop).toFixed(1)} ms (${(tCancel - c.tSent).toFixed(1)} ms after the request)`);
      await gw.waitLog(/client dropped POST stream \d+: 1 requests cancelled/);

      const e = await timedPost(gw, echoCall(`after-${mode}`, `alive after ${mode}`), { sid: s.sid, version: '2025-06-18' });
      assertOneShot(e, `echo after the ${mode}`);
      assert.equal(textOf(e.events[0]?.json), `alive after ${mode}`);
      assert.equal(childCancels(gw).length, before + 1, `${mode}: exactly one cancel`);
    }
    assert.equal((gw.logs().match(/client dropped POST stream \d+: 1 requests cancelled/g) || []).length, modes.length);
  });
});

// --- keep-alive ---------------------------------------------------------------------------------

test('keep-alive: 20 held echo calls in a row on one socket all answer as one-shot bodies; a streamed call between one-shots keeps the socket', async () => {
  await withGateway({ gateway: { response_hold_ms: 1000 } }, async (gw) => {
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
      // Each answer ends its hold: 20 calls held to the end would take 20 s.
      assert.ok(took < 10000, `20 calls took ${took.toFixed(0)} ms`);

      // A streamed (chunked) call, then a one-shot again, on the same socket.
      const p = await timedPost(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 2, interval_ms: 20 }, _meta: { progressToken: 'ka' } }, 'ka-slow'), { sid: s.sid, version: '2025-06-18', agent });
      assertChunked(p, 'slow with progress');
      assert.equal(textOf(p.events.map((e) => e.json).find(isAnswer)), 'done after 2 steps');
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
