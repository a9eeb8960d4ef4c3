// SPDX-License-Identifier: MIT
// The input-round bridge (src/pool/pool_bridge.c): a legacy pool child that, while serving a
// 2026-07-28 tools/call, asks the client something (elicitation/create, sampling/createMessage,
// roots/list) makes the gateway answer that request with resultType input_required; the client's
// retry (new id, inputResponses, the same requestState) answers the child and the call goes on, on
// the retry's stream.
//   - the official v2 client (@modelcontextprotocol/client 2.4.0) against server-everything:
//     its elicitation, sampling and roots tools complete with the client handlers' data; and
//     against the example server's elicit with `rounds` (multi-round) and `parallel`;
//   - raw HTTP: the round's shape, several questions in one round, a retry that leaves one out
//     (asked again), /admin/inflight and the mcpgw_pool_* series;
//   - refusals (400, -32602, the request's own id, nothing reaches the child): a tampered MAC or
//     payload, a MAC or payload longer than any the gateway seals, an expired state, a replayed
//     one (while the call is held in a later round, and after it ended), another principal, tool
//     name, method or server, a state sealed by another gateway sharing state_key_file ("another
//     gateway instance") or by one with another key;
//   - drains (the operator's, and SIGTERM's): a forged requestState is a new request (503), a
//     genuine retry carries its call on;
//   - endings: no retry within input_hold_ms (the child gets notifications/cancelled and an error
//     for its open question), the retry's stream closed mid-call (cancelled at once), the child's
//     answer to its call arriving while the call is held (delivered on the retry);
//   - questions that are not bridged: a capability the request (or its retry) did not declare,
//     a question with two tools/call in flight on the child (attribution), each answered to the
//     child with -32601 and counted; the tool's own result reaches the client.
// What a child received is read from the example server's --log. Nothing sleeps to synchronise;
// deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ACCEPT_BOTH, everythingServer, request, startGateway, tmpdir, waitFor, withGateway, metricSamples } from '../lib/gw.mjs';
import { V, exchange, mpost, msgsOf } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

// Resolved from tests/node_modules; a missing package throws.
const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
const CLIENT_PKG = JSON.parse(fs.readFileSync(new URL('../node_modules/@modelcontextprotocol/client/package.json', import.meta.url), 'utf8'));
assert.equal(CLIENT_PKG.version, '2.4.0', 'the pinned v2 client (tests/package-lock.json)');

const META = 'io.modelcontextprotocol/';
const ADMIN = 'bridge-admin-token-0123456789abcdef';
const PUBLIC_URL = 'https://mcp.test.example';
const SHORT_HOLD_MS = 300;
const LONG_HOLD_MS = 120000;
const ELICIT = { elicitation: {} };
const ALL_CAPS = { elicitation: {}, sampling: {}, roots: {} };

const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const token = (tag) => `${tag}-${crypto.randomBytes(18).toString('base64url')}`;
const textOf = (j) => j?.result?.content?.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const accept = (name) => ({ action: 'accept', content: { name } });
let nextId = 1;

// ---- raw HTTP ----------------------------------------------------------------------------------

/** A stateless request with its _meta envelope (caps: the request's clientCapabilities). */
function mreq(method, params = {}, { id = `b-${nextId++}`, caps = ELICIT, meta = {} } = {}) {
  return {
    jsonrpc: '2.0', id, method,
    params: {
      ...params,
      _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: caps, [`${META}clientInfo`]: { name: 'stateless-bridge-it', version: '1' }, ...meta },
    },
  };
}

/** A tools/call of the example server's elicit. */
const elicit = (args = {}, opts = {}) => mreq('tools/call', { name: 'elicit', arguments: args }, opts);

/** The retry of msg: a new id, the same method and params, inputResponses and requestState (params.* may be overridden). */
function retryOf(msg, requestState, inputResponses, { id = `b-${nextId++}`, caps, meta, params = {} } = {}) {
  const p = { ...structuredClone(msg.params), inputResponses, requestState, ...params };
  if (caps !== undefined) p._meta[`${META}clientCapabilities`] = caps;
  if (meta !== undefined) Object.assign(p._meta, meta);
  return { jsonrpc: '2.0', id, method: msg.method, params: p };
}

/** A request answered with an input round: its result (status, id, shape checked). */
async function round(gw, msg, opts = {}) {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 200, x.r.text());
  assert.deepEqual(x.answer?.id, msg.id, `the request's own id: ${x.r.text()}`);
  const res = x.answer.result;
  assert.equal(res?.resultType, 'input_required', x.r.text());
  assert.equal(typeof res.inputRequests, 'object', x.r.text());
  assert.match(res.requestState, /^mcpgw1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, x.r.text());
  return res;
}

/** A request answered with a complete result: the answer message. */
async function complete(gw, msg, opts = {}) {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 200, x.r.text());
  assert.deepEqual(x.answer?.id, msg.id, `the request's own id: ${x.r.text()}`);
  assert.ok(x.answer.result, x.r.text());
  assert.notEqual(x.answer.result.resultType, 'input_required', x.r.text());
  return x.answer;
}

/** A retry refused for its requestState: 400, -32602, the request's own id; the message. */
async function refusedState(gw, msg, opts = {}, what = '') {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 400, `${what}: ${x.r.text()}`);
  assert.match(x.r.headers['content-type'] ?? '', /^application\/json\b/, what);
  assert.equal(x.msgs.length, 1, what);
  assert.deepEqual(x.answer.id, msg.id, `${what}: the request's own id`);
  assert.equal(x.answer.error?.code, -32602, `${what}: ${x.r.text()}`);
  assert.equal(x.answer.result, undefined, what);
  return x.answer.error.message;
}

/** /metrics as {'name{labels}': value} (with the admin token, which /metrics asks for once it is set). */
async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return metricSamples(text);
}
const M = {
  held: 'mcpgw_pool_held_calls',
  rounds: 'mcpgw_pool_input_rounds_total',
  bridged: 'mcpgw_pool_child_requests_total{outcome="bridged"}',
  refused: 'mcpgw_pool_child_requests_total{outcome="refused"}',
  statesRefused: 'mcpgw_pool_request_states_refused_total',
  cancels: (r) => `mcpgw_cancels_total{direction="to_child",reason="${r}"}`,
};
/** m1 - m0 for each key. */
const delta = (m0, m1, keys) => Object.fromEntries(keys.map((k) => [k, (m1[k] ?? 0) - (m0[k] ?? 0)]));

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return JSON.parse(text);
}

// ---- what the children received ------------------------------------------------------------------

/** Messages in a child log file ([] while it does not exist). */
function fileMsgs(f) {
  if (!fs.existsSync(f)) return [];
  return fs.readFileSync(f, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return { raw: l }; } });
}
/** A child's own start (the gateway's initialize) is not about any test's request. */
const startup = (m) => m.method === 'initialize' || m.method === 'notifications/initialized';
/** What children logging to f received after mark (an index), their own start left out. */
const since = (f, mark) => fileMsgs(f).slice(mark).filter((m) => !startup(m));
/** The tools/call a child received for arguments.message === tag. */
const callOf = (msgs, tag) => msgs.find((m) => m.method === 'tools/call' && m.params?.arguments?.message === tag);
/** Answers the children got to their own requests (ids s-N). */
const answersIn = (msgs) => msgs.filter((m) => m.method === undefined && typeof m.id === 'string' && m.id.startsWith('s-'));
const cancelsIn = (msgs) => msgs.filter((m) => m.method === 'notifications/cancelled');

/** A copy of the requestState with one character changed in the MAC (part 2) or the payload (part 1). */
function tamper(state, part) {
  const pieces = state.split('.'); // mcpgw1 . payload . mac
  const s = pieces[part];
  const i = Math.floor(s.length / 2);
  pieces[part] = s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  const out = pieces.join('.');
  assert.notEqual(out, state);
  return out;
}

// ---- the shared gateway: bearer auth, a state_key_file, two servers ---------------------------------

const T = { alice: token('alice'), bob: token('bob') };
let gw; // [server:example] at /mcp and [server:other] at /other, both the example server
let dir;
let keyFile;
let tokensFile;

before(async () => {
  dir = tmpdir('mcpgw-bridge-');
  keyFile = path.join(dir, 'state.key');
  fs.writeFileSync(keyFile, crypto.randomBytes(48), { mode: 0o600 }); // a secret: others may not read it
  tokensFile = path.join(dir, 'tokens');
  fs.writeFileSync(tokensFile, Object.entries(T).map(([n, t]) => `sha256:${sha256hex(t)} ${n}`).join('\n') + '\n');
  gw = await startGateway(sharedOpts(keyFile));
});

after(async () => {
  if (gw) await gw.stop(); // asserts a clean exit
});

/** The shared gateway's configuration (and that of a second instance with the same key file). */
function sharedOpts(key) {
  const srv = `era = legacy\npool_max_children = 4\ninput_hold_ms = ${LONG_HOLD_MS}`;
  return {
    gateway: { admin_token: ADMIN, state_key_file: key },
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', extra: srv }, { name: 'other', path: '/other', extra: srv }],
  };
}
const A = { bearer: T.alice };
const mark = () => fileMsgs(gw.childLog).length;

// ---- 1. the v2 client --------------------------------------------------------------------------

/** A v2 client pinned to 2026-07-28 declaring elicitation, sampling and roots, with a wire log. */
async function v2client(url, handlers) {
  const wire = [];
  const fetchImpl = async (u, init = {}) => {
    if (typeof init.body === 'string') { try { wire.push(JSON.parse(init.body)); } catch { /* not JSON */ } }
    return fetch(u, init);
  };
  const client = new Client({ name: 'stateless-bridge-it', version: '1.0.0' }, { versionNegotiation: { mode: { pin: V } }, capabilities: ALL_CAPS });
  for (const [method, fn] of Object.entries(handlers)) client.setRequestHandler(method, fn);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: fetchImpl }));
  return { client, wire, calls: () => wire.filter((m) => m.method === 'tools/call') };
}

test('v2 client, server-everything: trigger-elicitation-request, trigger-sampling-request and get-roots-list complete through input rounds with the handlers\' data', async () => {
  await withGateway({ servers: [everythingServer({ name: 'everything', extra: 'pool_max_children = 1' })] }, async (g) => {
    const seen = { elicitation: [], sampling: [], roots: 0 };
    const { client, wire, calls } = await v2client(g.url, {
      'elicitation/create': async (req) => {
        seen.elicitation.push(req.params);
        return { action: 'accept', content: { name: 'Ada Lovelace', check: true, email: 'ada@example.com' } };
      },
      'sampling/createMessage': async (req) => {
        seen.sampling.push(req.params);
        return { model: 'bridge-test-model', role: 'assistant', content: { type: 'text', text: `sampled: ${req.params.messages.at(-1).content.text}` } };
      },
      'roots/list': async () => {
        seen.roots++;
        return { roots: [{ uri: 'file:///tmp/bridge-root', name: 'bridge root' }] };
      },
    });
    try {
      assert.equal(wire.some((m) => m.method === 'initialize'), false, 'pinned 2026-07-28: no initialize from the client');
      // server-everything asks for roots by itself 350 ms after its initialize; with no request in
      // flight that question belongs to no one and is refused. Wait for it, so that it does not
      // land in the middle of a tool's rounds (it would, attributed to that call: see the test
      // "a child that answers its call while the call is held" below for what then goes wrong).
      await g.waitLog(/child request roots\/list answered with an error: not available: the gateway cannot tell/, scaled(10000));
      const m0 = await metrics(g);

      const el = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      assert.equal(el.isError, undefined, JSON.stringify(el));
      assert.ok(seen.elicitation.length >= 1, 'the elicitation handler ran');
      assert.equal(seen.elicitation[0].message, 'Please provide inputs for the following fields:');
      assert.ok(seen.elicitation[0].requestedSchema?.properties?.name, JSON.stringify(seen.elicitation[0]));
      const elText = textOf({ result: el });
      assert.match(elText, /User provided the requested information/);
      assert.match(elText, /- Name: Ada Lovelace/);
      assert.match(elText, /- Email: ada@example\.com/);
      assert.match(elText, /- Agreed to terms: true/);

      const prompt = `bridge prompt ${crypto.randomUUID()}`;
      const sa = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt, maxTokens: 77 } });
      assert.equal(sa.isError, undefined, JSON.stringify(sa));
      const mine = seen.sampling.find((p) => p.messages.at(-1).content.text.includes(prompt));
      assert.ok(mine, `the sampling handler saw the prompt: ${JSON.stringify(seen.sampling)}`);
      assert.equal(mine.maxTokens, 77);
      const saText = textOf({ result: sa });
      assert.match(saText, /bridge-test-model/);
      assert.ok(saText.includes(`sampled: Resource trigger-sampling-request context: ${prompt}`), saText);

      const ro = await client.callTool({ name: 'get-roots-list', arguments: {} });
      assert.equal(ro.isError, undefined, JSON.stringify(ro));
      assert.ok(seen.roots >= 1, 'the roots handler ran');
      const roText = textOf({ result: ro });
      assert.match(roText, /Current MCP Roots \(1 total\)/);
      assert.match(roText, /bridge root/);
      assert.match(roText, /URI: file:\/\/\/tmp\/bridge-root/);

      // On the wire: each tool was asked once, then retried with the round's answers and its
      // requestState, on a new id.
      for (const name of ['trigger-elicitation-request', 'trigger-sampling-request', 'get-roots-list']) {
        const legs = calls().filter((m) => m.params.name === name);
        assert.equal(legs.length, 2, `${name}: the call and its retry: ${JSON.stringify(legs)}`);
        assert.equal(legs[0].params.requestState, undefined);
        for (const retry of legs.slice(1)) {
          assert.match(retry.params.requestState, /^mcpgw1\./, name);
          assert.equal(typeof retry.params.inputResponses, 'object', name);
        }
        assert.equal(new Set(legs.map((m) => JSON.stringify(m.id))).size, legs.length, `${name}: every leg has its own id`);
      }
      const m1 = await metrics(g);
      assert.deepEqual(delta(m0, m1, [M.rounds, M.bridged, M.refused, M.statesRefused]), { [M.rounds]: 3, [M.bridged]: 3, [M.refused]: 0, [M.statesRefused]: 0 }, 'one round, one question per tool');
      assert.deepEqual([seen.elicitation.length, seen.sampling.length, seen.roots], [1, 1, 1], 'each handler ran once');
      assert.equal(m1[M.held], 0, 'nothing held once the calls completed');
    } finally {
      await client.close();
    }
  });
});

test('v2 client, example server: elicit with rounds = 3 takes three rounds, one question each; parallel = 2 puts two questions in each round; the final text has every answer', async () => {
  await withGateway({ servers: [{ name: 'example', path: '/mcp', extra: 'era = legacy\npool_max_children = 1' }] }, async (g) => {
    const asked = [];
    const { client, calls } = await v2client(g.url, {
      'elicitation/create': async (req) => {
        asked.push(req.params.message);
        return accept(`answer to ${req.params.message}`);
      },
    });
    try {
      const m0 = await metrics(g);
      const r = await client.callTool({ name: 'elicit', arguments: { message: 'seq', rounds: 3 } });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.deepEqual(asked, ['seq #1.1', 'seq #2.1', 'seq #3.1'], 'one question per round, each after the previous answer');
      assert.deepEqual(JSON.parse(textOf({ result: r })), asked.map((q) => accept(`answer to ${q}`)));
      let legs = calls().filter((m) => m.params.arguments.message === 'seq');
      assert.equal(legs.length, 4, 'the call and three retries');
      assert.deepEqual(legs.slice(1).map((m) => Object.keys(m.params.inputResponses)), [['r1'], ['r2'], ['r3']], 'each round has a new key');
      assert.equal(new Set(legs.slice(1).map((m) => m.params.requestState)).size, 3, 'each round has its own requestState');

      asked.length = 0;
      const p = await client.callTool({ name: 'elicit', arguments: { message: 'par', rounds: 2, parallel: 2 } });
      assert.equal(p.isError, undefined, JSON.stringify(p));
      assert.deepEqual([...asked].sort(), ['par #1.1', 'par #1.2', 'par #2.1', 'par #2.2']);
      assert.deepEqual(JSON.parse(textOf({ result: p })), ['par #1.1', 'par #1.2', 'par #2.1', 'par #2.2'].map((q) => accept(`answer to ${q}`)));
      legs = calls().filter((m) => m.params.arguments.message === 'par');
      assert.equal(legs.length, 3, 'two rounds of two questions: the call and two retries');
      assert.deepEqual(legs.slice(1).map((m) => Object.keys(m.params.inputResponses).sort()), [['r1', 'r2'], ['r3', 'r4']]);

      const m1 = await metrics(g);
      assert.deepEqual(delta(m0, m1, [M.rounds, M.bridged, M.refused]), { [M.rounds]: 5, [M.bridged]: 7, [M.refused]: 0 });
      assert.equal(m1[M.held], 0);
      // The child got every answer, each once.
      const answers = answersIn(g.childMessages());
      assert.equal(answers.length, 7, JSON.stringify(answers));
      assert.equal(new Set(answers.map((a) => a.id)).size, 7);
    } finally {
      await client.close();
    }
  });
});

// ---- 2. raw HTTP: rounds ---------------------------------------------------------------------------

test('raw: sampling, elicitation and roots each become an input round; held in /admin/inflight and mcpgw_pool_held_calls; the retry answers the child and completes on its own id', async () => {
  const cases = [
    { tool: 'sample', args: { prompt: 'raw sampling' }, method: 'sampling/createMessage', caps: { sampling: {} },
      answer: { model: 'm', role: 'assistant', content: { type: 'text', text: 'sampled raw' } }, text: 'sampled raw',
      params: (p) => assert.equal(p.messages[0].content.text, 'raw sampling') },
    { tool: 'elicit', args: { message: 'raw elicit' }, method: 'elicitation/create', caps: ELICIT,
      answer: accept('raw name'), text: JSON.stringify(accept('raw name')),
      params: (p) => { assert.equal(p.message, 'raw elicit'); assert.equal(p.requestedSchema.type, 'object'); } },
    { tool: 'roots', args: {}, method: 'roots/list', caps: { roots: {} },
      answer: { roots: [{ uri: 'file:///raw', name: 'raw' }] }, text: JSON.stringify({ roots: [{ uri: 'file:///raw', name: 'raw' }] }),
      params: (p) => assert.equal(p, undefined) },
  ];
  for (const c of cases) {
    const m0 = await metrics(gw);
    const n = mark();
    const msg = mreq('tools/call', { name: c.tool, arguments: c.args }, { caps: c.caps });
    const res = await round(gw, msg, A);
    assert.deepEqual(Object.keys(res.inputRequests), ['r1'], c.tool);
    assert.equal(res.inputRequests.r1.method, c.method);
    c.params(res.inputRequests.r1.params);
    // Held: in the admin view (under the request's id) and the gauge.
    const view = await admin(gw);
    const entries = view.pools.flatMap((p) => p.children.flatMap((ch) => ch.inflight));
    const held = entries.filter((e) => e.state === 'held' && e.id === msg.id);
    assert.equal(held.length, 1, JSON.stringify(view.pools));
    assert.equal(held[0].method, 'tools/call');
    assert.equal(held[0].input_rounds, 1);
    const m1 = await metrics(gw);
    assert.equal(m1[M.held] - m0[M.held], 1);
    assert.deepEqual(delta(m0, m1, [M.rounds, M.bridged]), { [M.rounds]: 1, [M.bridged]: 1 }, c.tool);
    // The child has its call and nothing else yet.
    assert.deepEqual(since(gw.childLog, n).map((m) => m.method), ['tools/call'], c.tool);

    const retry = retryOf(msg, res.requestState, { r1: c.answer });
    const done = await complete(gw, retry, A);
    assert.equal(textOf(done), c.text, c.tool);
    assert.equal(done.result.resultType, 'complete');
    const got = since(gw.childLog, n);
    assert.equal(got.length, 2, JSON.stringify(got));
    assert.deepEqual(got[1].result, c.answer, 'the client\'s answer is the result of the child\'s request');
    assert.match(got[1].id, /^s-\d+$/);
    const m2 = await metrics(gw);
    assert.equal(m2[M.held], m0[M.held]);
    assert.equal(m2[M.statesRefused], m0[M.statesRefused] ?? 0);
    const left = (await admin(gw)).pools.flatMap((p) => p.children.flatMap((ch) => ch.inflight));
    assert.ok(!left.some((e) => e.id === msg.id || e.id === retry.id), JSON.stringify(left));
  }
});

test('raw: two questions the child sends at once share one round (r1, r2); a retry answering only r1 is asked r2 again (a new round), then completes with both answers', async () => {
  const n = mark();
  const h0 = (await metrics(gw))[M.held];
  const msg = elicit({ message: 'pair', parallel: 2 });
  const res = await round(gw, msg, A);
  assert.deepEqual(Object.keys(res.inputRequests).sort(), ['r1', 'r2'], JSON.stringify(res));
  const byMsg = Object.fromEntries(Object.entries(res.inputRequests).map(([k, q]) => [q.params.message, k]));
  assert.deepEqual(Object.keys(byMsg).sort(), ['pair #1.1', 'pair #1.2']);
  for (const q of Object.values(res.inputRequests)) assert.equal(q.method, 'elicitation/create');

  // Only the first answered: that answer reaches the child; the second is asked again.
  const k1 = byMsg['pair #1.1'];
  const k2 = byMsg['pair #1.2'];
  const r1 = retryOf(msg, res.requestState, { [k1]: accept('first') });
  const again = await round(gw, r1, A);
  assert.deepEqual(Object.keys(again.inputRequests), [k2], 'only the unanswered question, under its key');
  assert.equal(again.inputRequests[k2].params.message, 'pair #1.2');
  assert.notEqual(again.requestState, res.requestState, 'a new round, a new requestState');
  // The answer went to the child before the new round left; the child logs it when it reads it.
  let answers = await waitFor(() => { const a = answersIn(since(gw.childLog, n)); return a.length > 0 && a; }, scaled(5000), 'the first answer at the child');
  assert.deepEqual(answers.map((a) => a.result), [accept('first')]);

  // A retry of the new round that answers nothing is asked again, too.
  const empty = await round(gw, retryOf(msg, again.requestState, {}), A);
  assert.deepEqual(Object.keys(empty.inputRequests), [k2]);
  const done = await complete(gw, retryOf(msg, empty.requestState, { [k2]: accept('second') }), A);
  assert.deepEqual(JSON.parse(textOf(done)), [accept('first'), accept('second')]);
  answers = answersIn(since(gw.childLog, n));
  assert.deepEqual(answers.map((a) => a.result), [accept('first'), accept('second')], 'each answer reached the child once');
  assert.equal((await metrics(gw))[M.held], h0);
});

test('raw: the held call goes on on the retry\'s stream: progress with the retry\'s token; closing that stream cancels the call at the child at once', async () => {
  const n = mark();
  const m0 = await metrics(gw);
  const msg = elicit({ message: 'drop-me', wait: true }, { meta: { progressToken: 'pt-first' } });
  const res = await round(gw, msg, A);
  const retry = retryOf(msg, res.requestState, { r1: accept('then wait') }, { meta: { progressToken: 'pt-retry' } });
  const r = await mpost(gw, retry, A);
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^text\/event-stream/);
  const ev = await r.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
  assert.equal(ev.json.params.progressToken, 'pt-retry', 'the retry\'s own progress token');
  assert.equal(ev.json.params.message, 'every answer is in');
  assert.equal((await metrics(gw))[M.held], m0[M.held], 'not held while it runs on the retry\'s stream');
  const call = callOf(since(gw.childLog, n), 'drop-me');
  assert.ok(call, 'the child got the call');
  r.drop();
  const cancel = await waitFor(() => cancelsIn(since(gw.childLog, n)).find((m) => m.params.requestId === call.id), scaled(5000), 'the cancel at the child');
  assert.equal(cancel.params.reason, 'client disconnected');
  const m1 = await metrics(gw);
  assert.equal(m1[M.cancels('client_disconnected')] - (m0[M.cancels('client_disconnected')] ?? 0), 1);
  assert.equal(m1[M.cancels('input_not_provided')], m0[M.cancels('input_not_provided')] ?? 0);
});

test('raw: a child that answers its call while the call is held (it gave up on its question) has that answer delivered on the retry', async () => {
  const n = mark();
  const h0 = (await metrics(gw))[M.held];
  const msg = mreq('tools/call', { name: 'child_cancel', arguments: { delay_ms: 200, ping: true } }, { caps: { sampling: {} } });
  const res = await round(gw, msg, A);
  assert.equal(res.inputRequests.r1?.method, 'sampling/createMessage', JSON.stringify(res));
  // The child cancels its question, answers its call ("gave up"), then pings: the ping's answer
  // at the child shows the gateway has read the call's answer, which came while it was held.
  await waitFor(() => since(gw.childLog, n).some((m) => typeof m.id === 'string' && m.id.startsWith('ping-') && m.result), scaled(10000), 'the child\'s ping answered');
  const x = await exchange(gw, retryOf(msg, res.requestState, { r1: { model: 'm', role: 'assistant', content: { type: 'text', text: 'too late' } } }), A);
  assert.equal(x.r.status, 200, `the retry gets the call's answer: ${x.r.text()}`);
  assert.equal(textOf(x.answer), 'gave up', x.r.text());
  assert.equal(x.answer.result.resultType, 'complete');
  assert.equal((await metrics(gw))[M.held], h0);
});

test('raw: a question the request did not declare the capability for is answered to the child with an error; so is one the retry no longer declares', async () => {
  // Undeclared on the first leg: the tool's own (error) result, no round.
  let n = mark();
  let m0 = await metrics(gw);
  const h0 = m0[M.held];
  const x = await exchange(gw, elicit({ message: 'undeclared' }, { caps: { sampling: {}, roots: {} } }), A);
  assert.equal(x.r.status, 200);
  assert.equal(x.msgs.length, 1, x.r.text());
  assert.equal(x.answer.result.resultType, 'complete', x.r.text());
  assert.equal(x.answer.result.isError, true);
  assert.match(textOf(x.answer), /^elicitation error: the client did not declare this capability/);
  let answers = answersIn(since(gw.childLog, n));
  assert.equal(answers.length, 1);
  assert.equal(answers[0].error?.code, -32601);
  let m1 = await metrics(gw);
  assert.deepEqual(delta(m0, m1, [M.refused, M.bridged, M.rounds]), { [M.refused]: 1, [M.bridged]: 0, [M.rounds]: 0 });

  // Declared on the call, not on its retry: the second round's question is refused.
  n = mark();
  m0 = m1;
  const msg = elicit({ message: 'caps-drop', rounds: 2 });
  const res = await round(gw, msg, A);
  const done = await complete(gw, retryOf(msg, res.requestState, { r1: accept('one') }, { caps: {} }), A);
  assert.equal(done.result.isError, true, JSON.stringify(done));
  assert.match(textOf(done), /^elicitation error: the client did not declare this capability/);
  answers = answersIn(since(gw.childLog, n));
  assert.deepEqual(answers[0].result, accept('one'));
  assert.equal(answers[1].error?.code, -32601);
  m1 = await metrics(gw);
  assert.deepEqual(delta(m0, m1, [M.refused, M.bridged, M.rounds]), { [M.refused]: 1, [M.bridged]: 1, [M.rounds]: 1 });
  assert.equal(m1[M.held], h0);
});

// ---- 3. refusals -------------------------------------------------------------------------------------

test('refused: a requestState with a changed character in its MAC or in its payload; 400 -32602, nothing reaches the child; the real one still works', async () => {
  const n = mark();
  const m0 = await metrics(gw);
  const msg = elicit({ message: 'tamper' });
  const res = await round(gw, msg, A);
  const upto = since(gw.childLog, n).length;
  for (const [what, part] of [['MAC', 2], ['payload', 1]]) {
    const why = await refusedState(gw, retryOf(msg, tamper(res.requestState, part), { r1: accept('forged') }), A, what);
    assert.match(why, /does not verify/, what);
  }
  // Also not a state at all, and one of ours with its MAC cut off.
  const cut = res.requestState.slice(0, res.requestState.lastIndexOf('.'));
  assert.match(await refusedState(gw, retryOf(msg, cut, { r1: accept('forged') }), A, 'no MAC'), /not one this gateway issued|does not verify/);
  const done = await complete(gw, retryOf(msg, res.requestState, { r1: accept('real') }), A);
  assert.deepEqual(JSON.parse(textOf(done)), accept('real'));
  const got = since(gw.childLog, n).slice(upto);
  assert.equal(got.length, 1, `only the real answer reached the child: ${JSON.stringify(got)}`);
  assert.deepEqual(got[0].result, accept('real'));
  const m1 = await metrics(gw);
  assert.equal(m1[M.statesRefused] - (m0[M.statesRefused] ?? 0), 3);
});

test('refused: a forged requestState whose MAC part decodes to 183 bytes (the MAC is 32) gets 400 -32602 before any call is looked up, and the gateway goes on', async () => {
  const n = mark();
  const msg = elicit({ message: 'oversized mac' });
  // As long as the gateway reads a requestState (255 characters): 2 of payload, 244 of "MAC".
  const forged = `mcpgw1.AA.${crypto.randomBytes(183).toString('base64url')}`;
  assert.equal(forged.length, 254);
  const why = await refusedState(gw, retryOf(msg, forged, { r1: accept('forged') }), A, 'oversized MAC');
  assert.match(why, /does not verify/);
  // Its payload part over-long instead (a 60-byte buffer): refused the same way.
  const long = `mcpgw1.${crypto.randomBytes(120).toString('base64url')}.${crypto.randomBytes(32).toString('base64url')}`;
  assert.match(await refusedState(gw, retryOf(msg, long, { r1: accept('forged') }), A, 'oversized payload'), /does not verify/);
  assert.equal(since(gw.childLog, n).filter((m) => m.method === 'tools/call').length, 0, 'nothing reached the child');
  const marker = await complete(gw, mreq('tools/call', { name: 'echo', arguments: { text: 'after the forged state' } }), A);
  assert.equal(textOf(marker), 'after the forged state');
});

test('refused: a replayed requestState, while the call is held in its next round and after it ended', async () => {
  const n = mark();
  const m0 = await metrics(gw);
  const msg = elicit({ message: 'replay', rounds: 2 });
  const first = await round(gw, msg, A);
  const retry1 = retryOf(msg, first.requestState, { r1: accept('one') });
  const second = await round(gw, retry1, A);
  assert.deepEqual(Object.keys(second.inputRequests), ['r2']);
  const entries = (await admin(gw)).pools.flatMap((p) => p.children.flatMap((ch) => ch.inflight));
  const held = entries.find((e) => e.id === retry1.id);
  assert.equal(held?.state, 'held', `held under the retry's id now: ${JSON.stringify(entries)}`);
  assert.equal(held.input_rounds, 2, 'the second round');
  assert.ok(!entries.some((e) => e.id === msg.id), 'no longer under the first id');
  // Round 1's state again, while the call waits in round 2 (once the child has read round 1's answer).
  await waitFor(() => answersIn(since(gw.childLog, n)).length === 1, scaled(5000), 'round 1\'s answer at the child');
  let upto = since(gw.childLog, n).length;
  const why1 = await refusedState(gw, retryOf(msg, first.requestState, { r1: accept('one again'), r2: accept('sneaked') }), A, 'replay in round 2');
  assert.match(why1, /already used/);
  const done = await complete(gw, retryOf(msg, second.requestState, { r2: accept('two') }), A);
  assert.deepEqual(JSON.parse(textOf(done)), [accept('one'), accept('two')]);
  let got = since(gw.childLog, n).slice(upto);
  assert.deepEqual(got.map((m) => m.result), [accept('two')], `only round 2's answer after the replay: ${JSON.stringify(got)}`);
  // Round 2's state again, after the call completed.
  upto = since(gw.childLog, n).length;
  const why2 = await refusedState(gw, retryOf(msg, second.requestState, { r2: accept('two again') }), A, 'replay after the end');
  assert.match(why2, /names no call held here/);
  const marker = await complete(gw, mreq('tools/call', { name: 'echo', arguments: { text: 'after replay' } }), A);
  assert.equal(textOf(marker), 'after replay');
  got = since(gw.childLog, n).slice(upto);
  assert.deepEqual(got.map((m) => m.method), ['tools/call'], `only the marker reached a child: ${JSON.stringify(got)}`);
  assert.equal(got[0].params.arguments.text, 'after replay');
  const m1 = await metrics(gw);
  assert.equal(m1[M.statesRefused] - (m0[M.statesRefused] ?? 0), 2);
});

test('refused: a requestState bound to another principal, tool name, method or server', async () => {
  const n = mark();
  const m0 = await metrics(gw);
  const msg = elicit({ message: 'bound' });
  const res = await round(gw, msg, A);
  const upto = since(gw.childLog, n).length;
  const ans = { r1: accept('stolen') };
  // bob with alice's state
  assert.match(await refusedState(gw, retryOf(msg, res.requestState, ans), { bearer: T.bob }, 'another principal'), /belongs to another request/);
  // another tool
  assert.match(await refusedState(gw, retryOf(msg, res.requestState, ans, { params: { name: 'echo', arguments: { text: 'x' } } }), A, 'another tool'), /belongs to another request/);
  // another method with the same name
  const asPrompt = { ...retryOf(msg, res.requestState, ans), method: 'prompts/get' };
  asPrompt.params = { ...asPrompt.params, arguments: {} };
  assert.match(await refusedState(gw, asPrompt, A, 'another method'), /belongs to another request/);
  // another server ([server:other], where no call is held)
  assert.match(await refusedState(gw, retryOf(msg, res.requestState, ans), { ...A, path: '/other' }, 'another server'), /names no call held here/);
  const done = await complete(gw, retryOf(msg, res.requestState, { r1: accept('alice') }), A);
  assert.deepEqual(JSON.parse(textOf(done)), accept('alice'));
  const got = since(gw.childLog, n).slice(upto);
  assert.deepEqual(got.map((m) => m.result), [accept('alice')], `only alice's answer reached the child: ${JSON.stringify(got)}`);
  const m1 = await metrics(gw);
  assert.equal(m1[M.statesRefused] - (m0[M.statesRefused] ?? 0), 4);
});

test('refused: a requestState at another gateway instance sharing state_key_file ("held by another gateway instance"), and at one with another key; the first instance still takes it', async () => {
  const n = mark();
  const msg = elicit({ message: 'elsewhere' });
  const res = await round(gw, msg, A);
  const other = path.join(dir, 'other.key');
  fs.writeFileSync(other, crypto.randomBytes(32), { mode: 0o600 }); // a secret: others may not read it
  for (const [what, key, re] of [['same key', keyFile, /another gateway instance/], ['another key', other, /does not verify/]]) {
    await withGateway(sharedOpts(key), async (g2) => {
      assert.notEqual(g2.childLog, gw.childLog);
      const m0 = await metrics(g2);
      const why = await refusedState(g2, retryOf(msg, res.requestState, { r1: accept(what) }), A, what);
      assert.match(why, re, what);
      assert.equal((await metrics(g2))[M.statesRefused] - (m0[M.statesRefused] ?? 0), 1, what);
      assert.deepEqual(fileMsgs(g2.childLog), [], `${what}: nothing reached a child of the other instance`);
    });
  }
  const upto = since(gw.childLog, n).length;
  assert.equal(upto, 1, 'the first instance\'s child has only the call');
  const done = await complete(gw, retryOf(msg, res.requestState, { r1: accept('home') }), A);
  assert.deepEqual(JSON.parse(textOf(done)), accept('home'));
  assert.deepEqual(since(gw.childLog, n).slice(upto).map((m) => m.result), [accept('home')]);
});

// A retry that carries on a held call is let through a drain (the operator's, or the gateway's own
// at SIGTERM): the drain waits for that call. Only a requestState the gateway sealed is such a
// retry: a forged one is a new request and gets the 503 every new request gets, verified first.
test('drains: a forged requestState (the gateway\'s prefix, a changed MAC) is a new request: 503 on a drained server and on a draining gateway, never let through as a retry; the genuine retry still completes its call', async () => {
  // Room for two more children: the asking child serves one request at a time (its held call).
  // Five children, so that the principal's share of held calls ((5 - 1) / 2 = 2) lets the two
  // warm-up calls in beside the held one.
  const servers = [{ name: 'example', path: '/mcp', extra: `era = legacy\npool_max_children = 5\ninput_hold_ms = ${LONG_HOLD_MS}` }];
  const g = await startGateway({ gateway: { admin_token: ADMIN, shutdown_drain_ms: 600000 }, servers });
  let ok = false;
  try {
    const adminPost = async (p) => {
      const r = await request(`${g.base}${p}`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN}` } });
      const text = await r.done(scaled(5000));
      assert.equal(r.status, 200, text);
    };
    /** A retry of msg refused as a new request: 503, -32603, its own id; the message. */
    const unavailable = async (msg, opts, what) => {
      const x = await exchange(g, msg, opts);
      assert.equal(x.r.status, 503, `${what}: ${x.r.text()}`);
      assert.deepEqual(x.answer?.id, msg.id, what);
      assert.equal(x.answer.error?.code, -32603, `${what}: ${x.r.text()}`);
      return x.answer.error.message;
    };
    const msg = elicit({ message: 'through a drain', rounds: 2 });
    const first = await round(g, msg);
    const answers = (res, name) => Object.fromEntries(Object.keys(res.inputRequests).map((k) => [k, accept(name)]));

    // The operator drains the server: new requests get 503; a forged retry is one of them.
    await adminPost('/admin/servers/example/drain');
    for (const part of [1, 2]) {
      const why = await unavailable(retryOf(msg, tamper(first.requestState, part), answers(first, 'forged')), {}, `drained, forged part ${part}`);
      assert.match(why, /server example is drained by the operator/);
    }
    // The genuine retry goes on through the drain.
    const second = await round(g, retryOf(msg, first.requestState, answers(first, 'one')));

    // SIGTERM: the gateway drains (it waits for the held call); its listener closes at once and
    // each answer closes its connection, so two connections are kept open first. On one, a forged
    // retry gets the shutdown's 503; on the other, the genuine one completes the call.
    await adminPost('/admin/servers/example/resume');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
    const via = async (m) => {
      const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': m.method, 'Mcp-Name': m.params.name };
      const r = await request(`${g.base}/mcp`, { method: 'POST', headers: h, body: m, agent });
      await r.done(scaled(10000));
      const msgs = msgsOf(r);
      return { r, answer: msgs.find((j) => j && ('result' in j || 'error' in j)) };
    };
    const warm = await Promise.all(['w1', 'w2'].map((t) => via(mreq('tools/call', { name: 'echo', arguments: { text: t } }))));
    assert.deepEqual(warm.map((x) => textOf(x.answer)), ['w1', 'w2']);
    await waitFor(() => Object.values(agent.freeSockets).flat().length === 2, scaled(5000), 'two idle kept-alive connections');
    g.proc.kill('SIGTERM');
    await g.waitLog(/SIGTERM: draining/, scaled(5000));
    const forged = retryOf(msg, tamper(second.requestState, 2), answers(second, 'forged'));
    const x = await via(forged);
    assert.equal(x.r.status, 503, `draining, forged: ${x.r.text()}`);
    assert.deepEqual(x.answer?.id, forged.id);
    assert.match(x.answer.error?.message ?? '', /gateway shutting down/, x.r.text());
    const last = await via(retryOf(msg, second.requestState, answers(second, 'two')));
    agent.destroy();
    assert.equal(last.r.status, 200, last.r.text());
    assert.equal(last.answer?.result?.resultType, 'complete', last.r.text());
    assert.match(textOf(last.answer), /one[\s\S]*two/);
    await g.waitLog(/drained: no request in flight/, scaled(5000));
    await g.stop({ expect: { code: 0, signal: null } });
    ok = true;
  } finally {
    if (!ok) { await g.stop({ expect: null }).catch(() => {}); console.log(g.logs().slice(-4000)); }
  }
});

// ---- 4. a short input_hold_ms: expiry, attribution ---------------------------------------------------

test('no retry within input_hold_ms: the child gets notifications/cancelled ("input not provided in time") and an error for its question; the late retry is refused as expired', async () => {
  const d = tmpdir('mcpgw-bridge-hold-');
  const log = path.join(d, 'child.log');
  await withGateway({ servers: [{ name: 'example', path: '/mcp', log, extra: `era = legacy\npool_max_children = 1\ninput_hold_ms = ${SHORT_HOLD_MS}` }] }, async (g) => {
    const m0 = await metrics(g);
    const msg = elicit({ message: 'never answered' });
    const res = await round(g, msg);
    const call = callOf(fileMsgs(log), 'never answered');
    assert.ok(call);
    // The hold ends by itself: cancel, then the open question's error answer.
    const ended = await waitFor(() => {
      const got = since(log, 0);
      const c = cancelsIn(got).find((m) => m.params.requestId === call.id);
      const a = answersIn(got);
      return c && a.length === 1 && { c, a: a[0] };
    }, scaled(10000), 'the cancel and the error answer at the child');
    assert.equal(ended.c.params.reason, 'input not provided in time');
    assert.equal(ended.a.error?.code, -32601, JSON.stringify(ended.a));
    assert.match(ended.a.error.message, /ended before it answered/);
    await waitFor(async () => (await metrics(g))[M.held] === 0, scaled(5000), 'held_calls back to 0');
    const m1 = await metrics(g);
    assert.equal(m1[M.cancels('input_not_provided')] - (m0[M.cancels('input_not_provided')] ?? 0), 1);
    // Not before input_hold_ms: the gateway's own log times (ms) of the round and of the cancel.
    const t = (re) => Date.parse(re.exec(g.logs())?.[1]);
    const sent = t(/^(\S+) \S+ session=pool:example#\d+ tools\/call held: input round 1 sent/m);
    const cancelled = t(/^(\S+) \S+ session=pool:example#\d+ cancel sent to child: method=tools\/call .*reason="input not provided in time"/m);
    assert.ok(cancelled - sent >= SHORT_HOLD_MS - 5, `cancelled ${cancelled - sent} ms after the round (input_hold_ms ${SHORT_HOLD_MS})`);

    // The state's own expiry has passed by now (sealed before the hold timer started).
    const upto = fileMsgs(log).length;
    const why = await refusedState(g, retryOf(msg, res.requestState, { r1: accept('too late') }), {}, 'expired');
    assert.match(why, /expired/);
    assert.equal((await metrics(g))[M.statesRefused] - (m0[M.statesRefused] ?? 0), 1);
    const marker = await complete(g, mreq('tools/call', { name: 'echo', arguments: { text: 'after expiry' } }));
    assert.equal(textOf(marker), 'after expiry');
    assert.deepEqual(since(log, upto).map((m) => m.method), ['tools/call'], 'only the marker reached the child');
  });
});

test('attribution: a question from a child with two tools/call in flight is answered to it with an error and counted; the asking call gets its own result; the child then serves one request at a time', async () => {
  const d = tmpdir('mcpgw-bridge-attr-');
  const log = path.join(d, 'child.log');
  await withGateway({ servers: [{ name: 'example', path: '/mcp', log, extra: 'era = legacy\npool_max_children = 1' }] }, async (g) => {
    const m0 = await metrics(g);
    // A call that stays in flight (cancel_self: until SIGUSR1 or a cancel); its progress shows the child has it.
    const waiting = await mpost(g, mreq('tools/call', { name: 'cancel_self', arguments: {} }, { id: 'waiting', meta: { progressToken: 'w' } }));
    assert.equal(waiting.status, 200);
    await waiting.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    const x = await exchange(g, elicit({ message: 'whose?' }, { id: 'asker' }));
    assert.equal(x.r.status, 200, x.r.text());
    assert.equal(x.msgs.length, 1, `no input round: ${x.r.text()}`);
    assert.equal(x.answer.id, 'asker');
    assert.equal(x.answer.result.isError, true);
    assert.match(textOf(x.answer), /^elicitation error: not available: the gateway cannot tell which client request this belongs to/);
    const answers = answersIn(fileMsgs(log));
    assert.equal(answers.length, 1);
    assert.equal(answers[0].error?.code, -32601);
    const m1 = await metrics(g);
    assert.deepEqual(delta(m0, m1, [M.refused, M.bridged, M.rounds]), { [M.refused]: 1, [M.bridged]: 0, [M.rounds]: 0 });
    // It asked once: while cancel_self runs, the one child takes no second request (429, pool full).
    const busy = await exchange(g, mreq('tools/call', { name: 'echo', arguments: { text: 'second' } }, { id: 'second' }));
    assert.equal(busy.r.status, 429, busy.r.text());
    assert.equal(busy.answer.id, 'second');
    assert.ok(!waiting.ended, 'the first call is still in flight');
    waiting.drop();
    await waitFor(() => cancelsIn(fileMsgs(log)).length === 1, scaled(5000), 'cancel_self cancelled');
  });
});

// ---- back-pressure on a shared child: stream_queue_bytes at its minimum ------------------------

/** POSTs msg on a raw socket that never reads its response: a client that stopped reading. */
async function unread(gw, msg, p = '/mcp') {
  const body = JSON.stringify(msg);
  const req = Buffer.from(`POST ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: ${ACCEPT_BOTH}\r\n`
    + `MCP-Protocol-Version: ${V}\r\nMcp-Method: tools/call\r\nMcp-Name: ${msg.params.name}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  // A node socket's receive buffer would grow to tcp_rmem's maximum (32 MiB on Debian 12) while
  // nothing reads it; the fixture's is fixed at a few KiB, so the gateway's writes stop at once.
  const client = process.env.GW_UNREAD_CLIENT;
  if (!client || !fs.existsSync(client)) throw new Error('GW_UNREAD_CLIENT (the unread-client fixture) is not built');
  const proc = spawn(client, [new URL(gw.base).port, String(req.length)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  proc.stdin.write(req);
  await waitFor(() => out.includes('sent') || proc.exitCode !== null, scaled(5000), 'unread-client sent its request');
  if (!out.includes('sent')) throw new Error(`unread-client: ${err}`);
  return { destroy: () => { proc.stdin.end(); proc.kill(); } };
}

const SMALL_QUEUE = 65536; // stream_queue_bytes at its minimum
const smallQueueGateway = (fn) => withGateway({
  gateway: { stream_queue_bytes: SMALL_QUEUE, max_message_bytes: 64 * 1024 * 1024 },
  servers: ['mcp', 'shared'].map((n) => ({ name: n, path: `/${n}`, extra: 'era = legacy\npool_max_children = 1\npool_child_max_inflight = 4' })),
}, fn);

test('an input round larger than stream_queue_bytes: the retry is answered (the child is not left paused, the call not freed under its stream)', async () => {
  await smallQueueGateway(async (g) => {
    const big = 'q'.repeat(3 * SMALL_QUEUE); // the child's question carries the message
    const msg = mreq('tools/call', { name: 'elicit', arguments: { message: big } });
    const res = await round(g, msg);
    assert.equal(res.inputRequests.r1.params.message, big);
    const done = await complete(g, retryOf(msg, res.requestState, { r1: accept('big') }));
    assert.equal(textOf(done), JSON.stringify(accept('big')));
    const after = await complete(g, mreq('tools/call', { name: 'echo', arguments: { text: 'after' } }));
    assert.equal(textOf(after), 'after');
  });
});

test('a shared child is never paused for one slow reader: a call whose answer its client does not read leaves the child serving the others', async () => {
  await smallQueueGateway(async (g) => {
    // On a child that never asked (so it serves several at once): a call that asked for log lines
    // gets 32 MiB of them (far more than the socket buffers take) while its client reads nothing.
    // They are its own (the one request in flight when they start); once its stream holds
    // stream_queue_bytes the rest are dropped, and the child is never paused for it.
    const flood = mreq('tools/call', { name: 'flood', arguments: { count: 32 * 1024, bytes: 1024 } }, { meta: { [`${META}logLevel`]: 'debug' } });
    const sock = await unread(g, flood, '/shared');
    try {
      await waitFor(() => fileMsgs(g.childLog).some((m) => m.method === 'tools/call' && m.params?.name === 'flood'), scaled(5000), 'the child read the flood call');
      // The stream's queue fills (its client reads nothing, and the socket buffers between hold a
      // few MiB at most: the client's is fixed small, the gateway's send buffer is bounded by
      // tcp_wmem) and the rest of the flood is dropped for it: a gateway that paused the child for
      // this reader would never drop one. Waited for before the calls below, so that the lines
      // are the flood's own: once another call is in flight on the child, its lines can no longer
      // be told apart and are dropped as unattributed instead.
      await waitFor(async () => (await metrics(g))['mcpgw_pool_messages_dropped_total{reason="slow_reader"}'] > 0, scaled(10000), 'the slow reader\'s log lines past its ceiling dropped');
      for (let i = 0; i < 3; i++) {
        const t0 = Date.now();
        const other = await complete(g, mreq('tools/call', { name: 'echo', arguments: { text: `other ${i}` } }), { path: '/shared' });
        assert.equal(textOf(other), `other ${i}`);
        assert.ok(Date.now() - t0 < scaled(5000), `answered while the slow reader waits (${Date.now() - t0} ms)`);
      }
    } finally {
      sock.destroy();
    }
  });
});

test('SIGHUP that changes the server while a call is held in an input round: the retry still completes it, on the old pool\'s child (held rounds stay on their pool until they end)', async () => {
  await withGateway({ servers: [{ name: 'example', path: '/mcp', extra: 'era = legacy\npool_max_children = 1' }] }, async (g) => {
    const msg = elicit({ message: 'across a reload' });
    const res = await round(g, msg);
    fs.appendFileSync(g.conf, 'cache_ttl_ms = 4321\n'); // the last section is the server's: its pool is retired
    g.proc.kill('SIGHUP');
    await g.waitLog(/SIGHUP: configuration reloaded/, scaled(5000));
    await g.waitLog(/pool example: retired/, scaled(5000));
    const done = await complete(g, retryOf(msg, res.requestState, { r1: accept('kept') }));
    assert.equal(textOf(done), JSON.stringify(accept('kept')));
    // New calls go to the new pool meanwhile.
    const fresh = await complete(g, mreq('tools/call', { name: 'echo', arguments: { text: 'new pool' } }));
    assert.equal(textOf(fresh), 'new pool');
  });
});

test('attribution counts every request in flight: a question the child asks while serving bob\'s resources/list does not go into alice\'s tools/call (refused to the child: the gateway cannot tell whose it is)', async () => {
  const ASKER = path.join(process.env.GW_SOURCE_ROOT, 'tests/fixtures/asker.mjs');
  await withGateway({ servers: [{ name: 'asker', path: '/mcp', command: `${process.execPath} ${ASKER}`, extra: 'era = legacy\npool_max_children = 1\npool_child_max_inflight = 4' }] }, async (g) => {
    // alice: a call that may take input, in flight (it answers when released).
    const alice = mpost(g, mreq('tools/call', { name: 'wait', arguments: {} }, { id: 'alice-wait' }));
    await g.waitLog(/asker: got tools\/call/, scaled(5000));
    // bob: a resources/list, during which the child asks the client something.
    const bob = await exchange(g, mreq('resources/list', {}, { id: 'bob-list' }));
    assert.equal(bob.r.status, 200, bob.r.text());
    assert.deepEqual(bob.answer.id, 'bob-list');
    assert.match(bob.answer.result?._meta?.asker ?? '', /not available: the gateway cannot tell which client request this belongs to/, bob.r.text());
    // alice's call got no round with bob's question: it completes when released.
    const pid = Number(/session=pool:asker\S* pool child started: pid (\d+)/.exec(g.logs())?.[1]);
    assert.ok(pid > 0, 'the child\'s pid in the log');
    process.kill(pid, 'SIGUSR1');
    const a = await alice;
    await a.done(scaled(10000));
    const answer = msgsOf(a).find((j) => j && ('result' in j || 'error' in j));
    assert.deepEqual(answer?.id, 'alice-wait', a.text());
    assert.equal(answer.result?.resultType, 'complete', `alice's call is not an input round: ${a.text()}`);
    assert.equal(textOf(answer), 'released');
  });
});

// ---- the fence behind a full stdin queue ------------------------------------------------------

const ASKER_FIXTURE = () => path.join(process.env.GW_SOURCE_ROOT, 'tests/fixtures/asker.mjs');
/** The asker fixture's pool child's pid, from the gateway's log. */
function askerPid(g) {
  const pid = Number(/session=pool:asker\S* pool child started: pid (\d+)/.exec(g.logs())?.[1]);
  assert.ok(pid > 0, 'the child\'s pid in the log');
  return pid;
}

test('a call cancelled while its child\'s stdin queue is full: the cancel and the fence\'s ping wait in the queue, the child reads them once it reads on, and the next request is served (the child is not left fenced for good)', async () => {
  // The child asks N questions at once and stops reading its stdin. The retries answer them with
  // lines of decreasing sizes, each at most twice the next (a retry body is below
  // stdin_queue_bytes, so the big ones take one retry each, the rest left for the next round):
  // the pipe and stdin_queue_bytes fill, and what room is left ends below the smallest answer
  // (41 bytes), which is less than a ping (42 or more) and a cancel. The last retry's client then
  // leaves: the cancel and the ping must still reach the child.
  const N = 15;
  const sizes = [32768, 32768, 32768, 32768, 32768, 16384, 8192, 4096, 2048, 1024, 512, 256, 128, 64, 0];
  assert.equal(sizes.length, N);
  const answer = (k, size) => {
    if (size === 0) return {};
    const base = `{"jsonrpc":"2.0","id":"m${k}","result":{"p":""}}\n`.length;
    return { p: 'x'.repeat(size - base) };
  };
  await withGateway({
    gateway: { stdin_queue_bytes: 65536, max_body_bytes: 64512 },
    servers: [{ name: 'asker', path: '/mcp', command: `${process.execPath} ${ASKER_FIXTURE()}`, extra: 'era = legacy\npool_max_children = 1\npool_child_max_inflight = 4' }],
  }, async (g) => {
    const msg = mreq('tools/call', { name: 'askmany', arguments: { n: N } }, { id: 'stall' });
    const res = await round(g, msg);
    assert.equal(Object.keys(res.inputRequests).length, N, 'the questions came in one round');
    await g.waitLog(/asker: stalled/, scaled(5000));
    const chunks = [[1], [2], [3], [4], [5], [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]];
    let state = res.requestState;
    for (const keys of chunks.slice(0, -1)) {
      const more = await round(g, retryOf(msg, state, Object.fromEntries(keys.map((k) => [`r${k}`, answer(k, sizes[k - 1])]))));
      state = more.requestState;
    }
    const last = chunks.at(-1);
    const retry = await mpost(g, retryOf(msg, state, Object.fromEntries(last.map((k) => [`r${k}`, answer(k, sizes[k - 1])]))));
    assert.equal(retry.status, 200);
    // The queue filled: the answers that found no room were not delivered.
    await g.waitLog(/the client's answer to elicitation\/create not delivered: child stdin full/, scaled(5000));
    await g.waitLog(/tools\/call resumed by the client's retry \(round 6\)/, scaled(5000));
    retry.drop(); // the client leaves: the call is cancelled at the child
    await g.waitLog(/cancel sent to child: method=tools\/call|cancel for tools\/call \(client disconnected\) not delivered/, scaled(5000));
    // A new request waits for the fence's ping to come back.
    const next = mpost(g, mreq('tools/call', { name: 'echo', arguments: {} }, { id: 'next' }));
    process.kill(askerPid(g), 'SIGUSR2'); // the child reads on
    await g.waitLog(/asker: got notifications\/cancelled/, scaled(5000));
    await g.waitLog(/asker: got ping/, scaled(5000));
    const r = await next;
    await r.done(scaled(10000));
    const got = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
    assert.deepEqual(got?.id, 'next', r.text());
    assert.equal(textOf(got), 'echo', r.text());
  });
});

test('a child that asked serves one request at a time only while a call that was in flight when it asked still is: then it takes pool_child_max_inflight at once again', async () => {
  const CAP = 4;
  await withGateway({ servers: [{ name: 'asker', path: '/mcp', command: `${process.execPath} ${ASKER_FIXTURE()}`, extra: `era = legacy\npool_max_children = 1\npool_child_max_inflight = ${CAP}` }] }, async (g) => {
    // A resources/list during which the child asks the client something (refused: it cannot take
    // input), then ends.
    const list = await exchange(g, mreq('resources/list', {}, { id: 'list' }));
    assert.equal(list.r.status, 200, list.r.text());
    assert.match(list.answer.result?._meta?.asker ?? '', /not available/, list.r.text());
    // Nothing of that question is outstanding: CAP calls at once reach the one child.
    // (Not waiting for a response's headers: a stream may send nothing before its first event.)
    const waits = [];
    for (let i = 0; i < CAP; i++) {
      waits.push(mpost(g, mreq('tools/call', { name: 'wait', arguments: {} }, { id: `wait-${i}` })));
      await waitFor(() => (g.logs().match(/asker: got tools\/call/g) ?? []).length === i + 1, scaled(5000), `wait-${i} at the child`);
    }
    process.kill(askerPid(g), 'SIGUSR1');
    for (const [i, p] of waits.entries()) {
      const w = await p;
      assert.equal(w.status, 200, `wait-${i}: ${w.text()}`);
      await w.done(scaled(10000));
      const got = msgsOf(w).find((j) => j && ('result' in j || 'error' in j));
      assert.deepEqual(got?.id, `wait-${i}`, w.text());
      assert.equal(textOf(got), 'released', w.text());
    }
  });
});
