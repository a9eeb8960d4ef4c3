// SPDX-License-Identifier: MIT
// Per-principal limits of a pool (src/pool/pool_caps.c) and the fixed end of a held call's hold
// (src/pool/pool_bridge.c), with two principals (bearer tokens from a tokens file):
//   - a held call's retry that answers nothing is asked again, but its hold still ends
//     input_hold_ms after the round that first asked (the client cannot keep the call, nor the
//     child a legacy server leases to it, by retrying);
//   - max_held_per_principal: past it a request that may ask gets 429 naming the key; another
//     principal is still served by the children left;
//   - max_inflight_per_principal: likewise for requests in flight;
//   - max_listens_per_principal and max_listen_uris_per_principal (legacy listens, served by the
//     gateway): 429, and a JSON-RPC error for a listen naming too many URIs.
// The gateway's own log times (ms) tell when it sent a round and a cancel. Nothing sleeps to
// synchronise; deadlines scale for a slow (ASan) run; the lower bound of a hold never does.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { ACCEPT_BOTH, request, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { V, exchange, mpost, msgsOf } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
const LISTEN_FIXTURE = path.join(ROOT, 'tests/fixtures/listen_server.mjs');

const META = 'io.modelcontextprotocol/';
const ELICIT = { elicitation: {} };
const PUBLIC_URL = 'https://mcp.test.example';

const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const token = (tag) => `${tag}-${crypto.randomBytes(18).toString('base64url')}`;
const textOf = (j) => j?.result?.content?.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
let nextId = 1;

/** A stateless request with its _meta envelope. */
function mreq(method, params = {}, { id = `c-${nextId++}`, caps = ELICIT, meta = {} } = {}) {
  return {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: caps, [`${META}clientInfo`]: { name: 'stateless-caps-it', version: '1' }, ...meta } },
  };
}
const elicit = (message, opts) => mreq('tools/call', { name: 'elicit', arguments: { message } }, opts);
const echo = (text, opts) => mreq('tools/call', { name: 'echo', arguments: { text } }, opts);

/** The retry of msg: a new id, inputResponses and requestState. */
function retryOf(msg, requestState, inputResponses) {
  return { jsonrpc: '2.0', id: `c-${nextId++}`, method: msg.method, params: { ...structuredClone(msg.params), inputResponses, requestState } };
}

/** An input round's result (checked). */
async function round(gw, msg, opts) {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 200, x.r.text());
  assert.equal(x.answer?.result?.resultType, 'input_required', x.r.text());
  return x.answer.result;
}

/** A request refused for a per-principal limit: 429, the request's own id, the key named. */
async function refusedFor(gw, msg, key, opts) {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 429, x.r.text());
  assert.deepEqual(x.answer?.id, msg.id, x.r.text());
  assert.ok(x.answer.error, x.r.text());
  assert.match(x.answer.error.message, new RegExp(key), x.r.text());
}

/** Two principals in a tokens file; the gateway's [auth]. */
function principals(dir) {
  const T = { alice: token('alice'), bob: token('bob') };
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, Object.entries(T).map(([n, t]) => `sha256:${sha256hex(t)} ${n}`).join('\n') + '\n');
  return { T, auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: file } };
}

/** ms of the gateway log line matched by re (its first capture: the line's time stamp). */
const logTimes = (g, re) => [...g.logs().matchAll(re)].map((m) => Date.parse(m[1]));

test('held calls: retries that answer nothing do not extend the hold (it ends input_hold_ms after the first round); past max_held_per_principal 429; another principal is served', { timeout: scaled(120000) }, async () => {
  const HOLD = 2000;
  const d = tmpdir('mcpgw-caps-held-');
  const { T, auth } = principals(d);
  const log = path.join(d, 'child.log');
  // Five children: a principal may hold at most (pool_max_children - 1) / 2 of them.
  const extra = `era = legacy\npool_max_children = 5\ninput_hold_ms = ${HOLD}\nmax_held_per_principal = 2`;
  await withGateway({ auth, servers: [{ name: 'example', path: '/mcp', log, extra }] }, async (g) => {
    const A = { bearer: T.alice };
    const B = { bearer: T.bob };
    const held = [];
    for (const tag of ['a1', 'a2']) {
      const msg = elicit(tag);
      held.push({ msg, state: (await round(g, msg, A)).requestState, rounds: 1 });
    }
    // Alice is at her limit: a third call that may ask is refused; Bob is served by another child.
    await refusedFor(g, elicit('a3'), 'max_held_per_principal', A);
    const b = await exchange(g, echo('bob served'), B);
    assert.equal(b.r.status, 200, b.r.text());
    assert.equal(textOf(b.answer), 'bob served');
    assert.equal((await round(g, elicit('b1'), B)).resultType, 'input_required', 'Bob may hold a call of his own');

    // Alice retries both with nothing answered, over and over: each retry is asked again (a new
    // round) until the hold that began with round 1 is over; then the retry is refused.
    const deadline = Date.now() + scaled(3 * HOLD + 10000);
    while (held.some((h) => !h.ended)) {
      assert.ok(Date.now() < deadline, `held calls still held ${scaled(3 * HOLD + 10000)} ms later (rounds: ${held.map((h) => h.rounds)})`);
      for (const h of held.filter((x) => !x.ended)) {
        const x = await exchange(g, retryOf(h.msg, h.state, {}), A);
        if (x.r.status === 400) { h.ended = x.answer.error.message; continue; }
        assert.equal(x.r.status, 200, x.r.text());
        assert.equal(x.answer?.result?.resultType, 'input_required', x.r.text());
        h.state = x.answer.result.requestState;
        h.rounds++;
      }
      await new Promise((r) => setTimeout(r, 200)); // the client's retry pace, not a synchronisation
    }
    for (const h of held) assert.ok(h.rounds >= 2, `re-asked at least once (${h.rounds} rounds)`);
    // From the gateway's log: each call's cancel came input_hold_ms after its round 1.
    const cancelRe = /^(\S+) \S+ session=pool:example#\d+ cancel sent to child: method=tools\/call .*reason="input not provided in time"/mg;
    const cancels = await waitFor(() => { const t = logTimes(g, cancelRe); return t.length >= 2 && t; }, scaled(5000), 'both cancels logged');
    const firsts = logTimes(g, /^(\S+) \S+ session=pool:example#\d+ tools\/call held: input round 1 sent/mg);
    // In the order of their rounds: Alice's two, then (no later) Bob's, which nobody retried.
    for (let i = 0; i < 2; i++) {
      const took = cancels[i] - firsts[i];
      assert.ok(took >= HOLD - 5 && took <= HOLD + scaled(1000), `hold ended ${took} ms after round 1 (input_hold_ms ${HOLD})`);
    }
    // Her calls are gone: she may hold calls again (once their children's fences came back:
    // until then a child whose call was cancelled takes no request, and the pool is full).
    const again = await waitFor(async () => {
      const x = await exchange(g, elicit('a4'), A);
      if (x.r.status === 429) { assert.doesNotMatch(x.answer.error.message, /per_principal/); return false; }
      return x;
    }, scaled(10000), 'Alice served again');
    assert.equal(again.answer?.result?.resultType, 'input_required', again.r.text());
  });
});

test('max_inflight_per_principal: past it 429 naming the key; another principal is served', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-caps-inflight-');
  const { T, auth } = principals(d);
  const extra = 'era = legacy\npool_max_children = 1\nmax_inflight_per_principal = 2';
  await withGateway({ auth, servers: [{ name: 'example', path: '/mcp', log: path.join(d, 'child.log'), extra }] }, async (g) => {
    const A = { bearer: T.alice };
    const waiting = [];
    for (const id of ['w1', 'w2']) {
      const r = await mpost(g, mreq('tools/call', { name: 'cancel_self', arguments: {} }, { id, caps: {}, meta: { progressToken: id } }), A);
      assert.equal(r.status, 200);
      await r.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
      waiting.push(r);
    }
    await refusedFor(g, echo('third', { caps: {} }), 'max_inflight_per_principal', A);
    const b = await exchange(g, echo('bob served', { caps: {} }), { bearer: T.bob });
    assert.equal(b.r.status, 200, b.r.text());
    assert.equal(textOf(b.answer), 'bob served');
    // Once one of hers ends, Alice has room again.
    waiting[0].drop();
    await waitFor(async () => (await exchange(g, echo('again', { caps: {} }), A)).r.status === 200, scaled(10000), 'room for Alice again');
    waiting[1].drop();
  });
});

// ---- legacy listens (served by the gateway) ----------------------------------------------------

const ADMIN = 'stateless-caps-admin-token-0123456789abcdef';

/** A [server:listen] running listen_server.mjs (subscribe log at log). */
function listenServer(log, extra) {
  return { name: 'listen', path: '/mcp', command: `${process.execPath} ${LISTEN_FIXTURE}`, env: `LISTEN_FIXTURE_LOG=${log}`, extra: `era = legacy\npool_max_children = 1\n${extra}` };
}

/** A listen: its live response once the ack came, or the refusal ({r, answer}) when it was refused. */
async function listen(gw, notifications, opts = {}) {
  const msg = mreq('subscriptions/listen', { notifications }, { caps: {} });
  const r = await mpost(gw, msg, opts);
  if (r.status !== 200) {
    await r.done(scaled(10000));
    return { refused: true, r, answer: msgsOf(r).find((j) => j && 'error' in j) };
  }
  await waitFor(() => r.completeEvents().length > 0 || r.ended, scaled(10000), `the ack of ${msg.id}`);
  const first = r.completeEvents()[0]?.json;
  if (first?.method !== 'notifications/subscriptions/acknowledged') return { refused: true, r, answer: first };
  r.id = msg.id;
  r.msgs = () => r.completeEvents().map((e) => e.json);
  return r;
}

async function adminPool(gw, name) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const text = await r.done(scaled(10000));
  assert.equal(r.status, 200, text);
  return JSON.parse(text).pools.find((p) => p.server === name);
}

test('listens: past max_listens_per_principal 429, past max_listen_uris_per_principal a JSON-RPC error naming the key; another principal is not affected', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-caps-listens-');
  const { T, auth } = principals(d);
  const A = { bearer: T.alice };
  const B = { bearer: T.bob };
  const extra = 'max_listens_per_principal = 2\nmax_listen_uris_per_principal = 3';
  await withGateway({ auth, gateway: { heartbeat_s: 60 }, servers: [listenServer(path.join(d, 'subs.log'), extra)] }, async (g) => {
    const l1 = await listen(g, { toolsListChanged: true, resourceSubscriptions: ['test://a', 'test://b'] }, A);
    assert.ok(!l1.refused, JSON.stringify(l1.answer));
    // Two more URIs would make four: an error, and no listener.
    const over = await listen(g, { resourceSubscriptions: ['test://a', 'test://c'] }, A);
    assert.ok(over.refused, 'a listen past max_listen_uris_per_principal is refused');
    assert.equal(over.answer?.error?.code, -32602, over.r.text());
    assert.match(over.answer.error.message, /max_listen_uris_per_principal/);
    const l2 = await listen(g, { toolsListChanged: true }, A);
    assert.ok(!l2.refused, JSON.stringify(l2.answer));
    const third = await listen(g, { toolsListChanged: true }, A);
    assert.ok(third.refused);
    assert.equal(third.r.status, 429, third.r.text());
    assert.match(third.answer?.error?.message ?? '', /max_listens_per_principal/, third.r.text());
    // Bob has limits of his own.
    const b = await listen(g, { resourceSubscriptions: ['test://a', 'test://b', 'test://c'] }, B);
    assert.ok(!b.refused, JSON.stringify(b.answer));
    // Alice's first listen closed: its URIs and its place are hers again.
    l1.drop();
    const again = await waitFor(async () => { const x = await listen(g, { resourceSubscriptions: ['test://a', 'test://b', 'test://c'] }, A); return !x.refused && x; }, scaled(10000), 'Alice may listen again');
    for (const x of [again, l2, b]) x.drop();
  });
});

test('a legacy listener that does not read: past stream_queue_bytes its listen ends with a JSON-RPC error (fell behind); the gateway stays small', { timeout: scaled(120000) }, async () => {
  const d = tmpdir('mcpgw-caps-behind-');
  const COUNT = 200000;
  await withGateway({ gateway: { heartbeat_s: 60, stream_queue_bytes: 65536 }, servers: [listenServer(path.join(d, 'subs.log'), '')] }, async (g) => {
    const l = await listen(g, { toolsListChanged: true });
    assert.ok(!l.refused, JSON.stringify(l.answer));
    l.res.pause(); // reads nothing more: the socket's buffers fill, then the gateway's queue
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${g.proc.pid}/status`, 'utf8'))[1]) * 1024;
    const rss0 = rss();
    const msg = mreq('tools/call', { name: 'flood', arguments: { count: COUNT } }, { caps: {} });
    const r = await mpost(g, msg);
    await r.done(scaled(60000));
    assert.equal(textOf(msgsOf(r).find((j) => j?.result)), `flooded ${COUNT}`, r.text());
    const grew = rss() - rss0;
    console.log(`# RSS grew ${(grew / 1048576).toFixed(1)} MiB over ${COUNT} notifications to a listener that does not read`);
    l.res.resume();
    await l.done(scaled(30000));
    const msgs = l.msgs();
    const last = msgs[msgs.length - 1];
    assert.deepEqual(last?.id, l.id, `the listen's own answer ends the stream: ${JSON.stringify(last)}`);
    assert.equal(last.error?.code, -32603, JSON.stringify(last));
    assert.match(last.error.message, /fell behind/);
    assert.ok(msgs.length < COUNT, `notifications after the listen ended were not kept (${msgs.length})`);
    // The pool took no harm: another listen works.
    const l2 = await listen(g, { toolsListChanged: true });
    assert.ok(!l2.refused);
    l2.drop();
  });
});

test('96 listens of 256 URIs each open and close while /healthz keeps answering (each probe within 2 s)', { timeout: scaled(300000) }, async () => {
  const d = tmpdir('mcpgw-caps-many-');
  const LISTENS = 96;
  const URIS = 256;
  const PROBE_MS = 2000; // generous: an event loop stalled by a linear search takes far longer
  const extra = 'max_listens_per_principal = 0\nmax_listen_uris_per_principal = 0';
  await withGateway({ gateway: { heartbeat_s: 60, admin_token: ADMIN }, servers: [listenServer(path.join(d, 'subs.log'), extra)] }, async (g) => {
    let stop = false;
    let worst = 0;
    let probes = 0;
    const prober = (async () => {
      while (!stop) {
        const t0 = Date.now();
        const r = await request(`${g.base}/healthz`, { method: 'GET', headers: { Accept: '*/*' } });
        await r.done(PROBE_MS * 5);
        const took = Date.now() - t0;
        assert.equal(r.status, 200);
        worst = Math.max(worst, took);
        probes++;
        assert.ok(took <= PROBE_MS, `/healthz took ${took} ms`);
        await new Promise((res) => setTimeout(res, 50)); // probe pace, not a synchronisation
      }
    })();
    try {
      const t0 = Date.now();
      const ls = [];
      for (let i = 0; i < LISTENS; i++) {
        const l = await listen(g, { resourceSubscriptions: Array.from({ length: URIS }, (_, j) => `test://many/${i}/${j}`) });
        assert.ok(!l.refused, JSON.stringify(l.answer));
        ls.push(l);
      }
      await waitFor(async () => (await adminPool(g, 'listen')).resource_subscriptions === LISTENS * URIS, scaled(60000), 'every URI subscribed');
      const opened = Date.now() - t0;
      for (const l of ls) l.drop();
      await waitFor(async () => { const p = await adminPool(g, 'listen'); return p.listeners === 0 && p.resource_subscriptions === 0; }, scaled(60000), 'every listener gone');
      console.log(`# ${LISTENS} x ${URIS} URIs: opened in ${opened} ms, all closed ${Date.now() - t0} ms after the start; /healthz worst ${worst} ms over ${probes} probes`);
    } finally {
      stop = true;
      await prober;
    }
  });
});

test('a subscription whose send failed (the child\'s stdin full) is not taken as placed: it reaches the child once the child reads again', { timeout: scaled(120000) }, async () => {
  const d = tmpdir('mcpgw-caps-stdin-');
  const log = path.join(d, 'subs.log');
  const LISTENS = 4;
  const URIS = 256; // 4 x 256 x ~2 KB of resources/subscribe: more than stdin_queue_bytes and the pipe
  const gateway = { heartbeat_s: 60, max_body_bytes: 1048576, stdin_queue_bytes: 1048576 + 1024 };
  await withGateway({ gateway, servers: [listenServer(log, '')] }, async (g) => {
    const call = async (name, args) => {
      const r = await mpost(g, mreq('tools/call', { name, arguments: args }, { caps: {} }));
      await r.done(scaled(10000));
      return textOf(msgsOf(r).find((j) => j?.result));
    };
    assert.equal(await call('stall_stdin', { ms: scaled(3000) }), 'stalled');
    const ls = [];
    for (let i = 0; i < LISTENS; i++) {
      const l = await listen(g, { resourceSubscriptions: Array.from({ length: URIS }, (_, j) => `test://s/${i}/${j}/${'x'.repeat(2000)}`) });
      assert.ok(!l.refused, JSON.stringify(l.answer));
      ls.push(l);
    }
    assert.match(g.logs(), /resources\/subscribe not delivered: child stdin full/, 'the child\'s stdin filled up (else this test proves nothing)');
    const subscribed = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter((x) => x.includes('"resources/subscribe"')).length : 0);
    await waitFor(() => subscribed() === LISTENS * URIS, scaled(30000), `all ${LISTENS * URIS} URIs subscribed at the child`);
    for (const l of ls) l.drop();
  });
});
