// SPDX-License-Identifier: MIT
// stateless (2026-07-28) requests through several gateway instances behind Debian's real
// nginx, with the shipped deploy/nginx/mcp-gateway-instances.conf (only its ports and TLS lines
// replaced). Two gateways, instance_id g1 and g2, each in front of the example server (a legacy
// stdio server: each instance's pool bridges stateless requests to its children). A stateless request
// has no Mcp-Session-Id, so nginx sends it to upstream mcp_any, round-robin: both instances serve
// some, each request exactly one; a legacy session opened through nginx keeps landing on the
// instance whose id prefix it carries, between stateless requests that alternate; a stateless client that
// drops mid-call behind nginx (before any byte of its answer, or in the middle of its SSE stream)
// gets its request cancelled at the child at once, since nginx closes the upstream connection on a
// client abort; progress of a stateless request passes nginx as SSE events one by one; and when an
// instance stops, nginx sends every stateless request to the other one.
// Input rounds (a pool child's elicitation/create becomes input_required; the client's retry must
// reach the instance holding the child's call), both instances sharing one state_key_file: with
// the shipped round-robin mcp_any, a retry that lands on the other instance gets 400 -32602
// ("another gateway instance") while the holder keeps the call until input_hold_ms, then cancels
// it at its child; with the site's commented `hash $remote_addr consistent;` line enabled, every
// request of every round from one client address lands on one instance and the rounds complete.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';

import { callTool, initSession, metricSamples, request, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { withInstances as withNginxInstances } from '../lib/nginx.mjs';
import { scaled } from '../lib/timing.mjs';

const STATELESS = '2026-07-28';
const INSTANCES = ['g1', 'g2'];
const SID_RE = /^(g[12])\.[A-Za-z0-9_-]{22}$/;
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/**
 * withInstances of tests/lib/nginx.mjs (gateways g1 and g2 behind nginx with the instances site),
 * nginx's error log holding no alert, emerg or crit line once fn passed; opts: more options of it
 * (gateway keys, servers, site).
 */
const withInstances = (fn, opts = {}) => withNginxInstances(fn, { quietErrorLog: true, ...opts });

let nextId = 1;

/** The headers and body of a 2026-07-28 tools/call (the envelope and the mirrored headers). */
function statelessCall(name, args, { id = `m-${nextId++}`, meta = {} } = {}) {
  const body = {
    jsonrpc: '2.0', id, method: 'tools/call',
    params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': STATELESS, 'io.modelcontextprotocol/clientCapabilities': {}, ...meta } },
  };
  const headers = {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/call', 'Mcp-Name': name,
  };
  return { id, body, headers };
}

/** POSTs a stateless tools/call to url; resolves at the response headers (see request()). */
function statelessPost(url, name, args, opts) {
  const { id, body, headers } = statelessCall(name, args, opts);
  return request(url, { method: 'POST', headers, body }).then((r) => Object.assign(r, { id }));
}

/** A stateless echo through url: asserts a plain JSON answer with the text and no session id. */
async function statelessEcho(url, text) {
  const r = await statelessPost(url, 'echo', { text });
  const body = await r.done(scaled(10_000));
  assert.equal(r.status, 200, `stateless echo ${text}: HTTP ${r.status} ${body}`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `stateless echo ${text}: ${body}`);
  assert.equal(r.headers['mcp-session-id'], undefined, 'a 2026-07-28 answer opens no session');
  const j = JSON.parse(body);
  assert.equal(j.id, r.id, body);
  assert.equal(textOf(j), text, body);
  assert.equal(j.result.resultType, 'complete', body);
  return j;
}

/** The tools/call messages of one instance's children (session and pool children alike). */
const childCalls = (gw, name) => gw.childMessages().filter((m) => m.method === 'tools/call' && m.params?.name === name);

/** For each stateless echo text, the instance whose children received it: {text: [instances]}. */
function servedBy(gws, texts) {
  const at = Object.fromEntries(texts.map((t) => [t, []]));
  for (const [inst, gw] of Object.entries(gws)) {
    for (const m of childCalls(gw, 'echo')) if (m.params.arguments?.text in at) at[m.params.arguments.text].push(inst);
  }
  return at;
}

/** mcpgw_pool_requests_total (or another unlabelled sample) of one gateway's /metrics. */
function metric(gw, name) {
  return new Promise((resolve, reject) => {
    http.get(`${gw.base}/metrics`, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { b += d; });
      res.on('end', () => {
        const m = metricSamples(b); // a server's series summed over servers
        if (!(name in m)) reject(new Error(`${name} missing from ${gw.base}/metrics:\n${b}`));
        else resolve(m[name]);
      });
    }).on('error', reject);
  });
}

async function poolRequests(gws) {
  const out = {};
  for (const [inst, gw] of Object.entries(gws)) out[inst] = await metric(gw, 'mcpgw_pool_requests_total');
  return out;
}

test('stateless requests through nginx are answered, round-robin over both instances, each by one', async () => {
  await withInstances(async ({ gws, via }) => {
    const before = await poolRequests(gws);
    assert.deepEqual(before, { g1: 0, g2: 0 }, 'no stateless request yet');
    const N = 8;
    const texts = [];
    for (let i = 0; i < N; i++) {
      texts.push(`stateless ${i}`);
      await statelessEcho(via.url, texts[i]);
    }
    // Every request reached exactly one instance's children.
    const at = servedBy(gws, texts);
    for (const t of texts) assert.equal(at[t].length, 1, `"${t}" served by exactly one instance: ${JSON.stringify(at)}`);
    const perInst = Object.fromEntries(INSTANCES.map((inst) => [inst, texts.filter((t) => at[t][0] === inst).length]));
    // Both instances served some (round-robin spreads them; nothing pins a stateless request).
    for (const inst of INSTANCES) assert.ok(perInst[inst] >= 1, `instance ${inst} served some of the ${N}: ${JSON.stringify(at)}`);
    // Each gateway counted exactly the stateless requests its children saw.
    assert.deepEqual(await poolRequests(gws), perInst, 'mcpgw_pool_requests_total of each instance');
    // No session was opened anywhere.
    for (const gw of Object.values(gws)) assert.doesNotMatch(gw.logs(), /session created/);
  });
});

test('a legacy session opened through nginx keeps landing on its instance while stateless requests alternate', async () => {
  await withInstances(async ({ gws, via }) => {
    const s = await initSession(via);
    const m = SID_RE.exec(s.sid ?? '');
    assert.ok(m, `session id with an instance prefix: ${s.sid}`);
    const inst = m[1];
    const other = inst === 'g1' ? 'g2' : 'g1';
    await gws[inst].waitLog(new RegExp(`session=${escapeRe(s.sid)} session created`));
    const texts = [];
    for (let i = 0; i < 6; i++) {
      texts.push(`between ${i}`);
      await statelessEcho(via.url, texts[i]);
      const { r, response } = await callTool(via, s.sid, 'echo', { text: `session ${i}` }, { id: `leg-${i}`, ms: scaled(10_000) });
      assert.equal(r.status, 200, `tools/call in ${s.sid} through nginx: HTTP ${r.status} ${r.text()}`);
      assert.equal(textOf(response), `session ${i}`, r.text());
    }
    // The session's calls reached its own instance's children, never the other instance's.
    const sessionTexts = (gw) => childCalls(gw, 'echo').map((x) => x.params.arguments?.text).filter((t) => /^session \d$/.test(t));
    assert.deepEqual(sessionTexts(gws[inst]), [0, 1, 2, 3, 4, 5].map((i) => `session ${i}`), `the session's calls on ${inst}`);
    assert.deepEqual(sessionTexts(gws[other]), [], `none of the session's calls on ${other}`);
    assert.doesNotMatch(gws[other].logs(), new RegExp(escapeRe(s.sid)), `${other} never saw session ${s.sid}`);
    // Meanwhile the stateless requests went to both instances.
    const at = servedBy(gws, texts);
    for (const t of texts) assert.equal(at[t].length, 1, `"${t}" served by exactly one instance: ${JSON.stringify(at)}`);
    assert.deepEqual(new Set(texts.map((t) => at[t][0])), new Set(INSTANCES), `stateless requests on both instances: ${JSON.stringify(at)}`);
  });
});

/**
 * Waits until the tools/call `slow` with this `steps` marker reached a child of either instance;
 * returns {inst, msg} (msg.id is the id the gateway minted for it on that child).
 */
function waitCallAtChild(gws, steps, what) {
  return waitFor(() => {
    for (const [inst, gw] of Object.entries(gws)) {
      const msg = childCalls(gw, 'slow').find((x) => x.params.arguments?.steps === steps);
      if (msg) return { inst, msg };
    }
    return null;
  }, scaled(10_000), what);
}

/** Asserts the call is cancelled at its child for a client disconnect (child log and gateway log). */
async function assertCancelledAtChild(gws, { inst, msg }, what) {
  const gw = gws[inst];
  const cancel = await waitFor(() => gw.childMessages().find((x) => x.method === 'notifications/cancelled' && x.params?.requestId === msg.id),
    scaled(5000), `notifications/cancelled for ${what} at the child`);
  assert.equal(cancel.params.reason, 'client disconnected', JSON.stringify(cancel));
  await gw.waitLog(new RegExp(`cancel sent to child: method=tools/call child_id=${escapeRe(String(msg.id))} reason="client disconnected"`), scaled(5000));
  // The example child reports the cancel it honoured on its stderr, which the gateway logs.
  await gw.waitLog(new RegExp(`child stderr: mcp-example-server: cancelled ${escapeRe(String(msg.id))} reason=client disconnected`), scaled(5000));
}

test('a stateless client that drops mid-call behind nginx gets its request cancelled at the child', async () => {
  await withInstances(async ({ gws, via }) => {
    // 1. Before any byte of the answer (a plain JSON answer is still pending: no headers yet).
    const { body, headers } = statelessCall('slow', { steps: 100001, interval_ms: 100 });
    const payload = JSON.stringify(body);
    const u = new URL(via.url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent: false, headers: { ...headers, 'Content-Length': Buffer.byteLength(payload) } });
    let answered = null;
    req.on('response', (res) => { answered = res.statusCode; res.resume(); });
    req.on('error', () => {});
    req.end(payload);
    const pending = await waitCallAtChild(gws, 100001, 'the pending call at a child');
    assert.equal(answered, null, 'no answer (not even headers) before the drop');
    req.destroy();
    await assertCancelledAtChild(gws, pending, 'the pending call');

    // 2. In the middle of its SSE stream (progress already received through nginx).
    const r = await statelessPost(via.url, 'slow', { steps: 100002, interval_ms: 100 }, { meta: { progressToken: 'drop-pt' } });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] || '', /^text\/event-stream\b/);
    await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
    const streaming = await waitCallAtChild(gws, 100002, 'the streaming call at a child');
    r.drop();
    await assertCancelledAtChild(gws, streaming, 'the streaming call');

    // Both counted as client closes; the instances serve on.
    let closed = 0;
    for (const gw of Object.values(gws)) closed += await metric(gw, 'mcpgw_cancels_total{server="example",direction="to_child",reason="client_disconnected"}');
    assert.equal(closed, 2, 'mcpgw_cancels_total{reason="client_disconnected"} over both instances');
    for (let i = 0; i < 2; i++) await statelessEcho(via.url, `after the drops ${i}`);
  });
});

test('SSE progress of a stateless request passes nginx unbuffered: an event arrives before the answer', async () => {
  await withInstances(async ({ gws, via }) => {
    // Once per instance (round-robin: two requests in a row land on different instances).
    for (let k = 0; k < 2; k++) {
      const token = `pt-${k}`;
      const r = await statelessPost(via.url, 'slow', { steps: 3, interval_ms: 400 }, { meta: { progressToken: token } });
      assert.equal(r.status, 200, r.text());
      assert.match(r.headers['content-type'] || '', /^text\/event-stream\b/);
      const first = await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
      // The first progress event came through while the call was still running (two more steps).
      assert.equal(r.ended, false, 'the stream is still open at the first progress event');
      assert.equal(r.events().some((e) => isAnswer(e.json)), false, `no answer yet: ${r.text()}`);
      assert.equal(first.json.params.progressToken, token, 'the client\'s own progress token');
      await r.done(scaled(10_000));
      const msgs = r.events().map((e) => e.json);
      assert.deepEqual(msgs.map((j) => j?.method ?? (isAnswer(j) ? 'answer' : '?')),
        ['notifications/progress', 'notifications/progress', 'notifications/progress', 'answer'], r.text());
      const answer = msgs.at(-1);
      assert.equal(answer.id, r.id);
      assert.equal(textOf(answer), 'done after 3 steps', r.text());
    }
    for (const [inst, gw] of Object.entries(gws)) assert.equal(childCalls(gw, 'slow').length, 1, `one of the two streamed calls on ${inst}`);
  });
});

test('an instance stops: every stateless request through nginx goes to the other one, none fails', async () => {
  await withInstances(async ({ gws, via }) => {
    for (let i = 0; i < 2; i++) await statelessEcho(via.url, `before ${i}`);
    await gws.g1.stop();
    const texts = [];
    for (let i = 0; i < 6; i++) {
      texts.push(`after ${i}`);
      await statelessEcho(via.url, texts[i]);
    }
    const at = servedBy(gws, texts);
    assert.deepEqual(texts.map((t) => at[t]), texts.map(() => ['g2']), `served after g1 stopped: ${JSON.stringify(at)}`);
  });
});

// ---- input rounds across instances ----------------------------------------------------------------

const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const HOLD_MS = 2000;
const accept = (name) => ({ action: 'accept', content: { name } });

/** A file of 48 random bytes for state_key_file (both instances get the same one). */
function stateKeyFile() {
  const f = path.join(tmpdir('mcpgw-nginx-key-'), 'state.key');
  fs.writeFileSync(f, crypto.randomBytes(48), { mode: 0o600 }); // a secret: others may not read it
  return f;
}

/** withInstances options: one shared state_key_file, the example server with input_hold_ms. */
const roundOpts = (extra = {}) => ({
  gateway: { state_key_file: stateKeyFile() },
  servers: [{ name: 'example', path: '/mcp', extra: `input_hold_ms = ${HOLD_MS}` }],
  ...extra,
});

/** A 2026-07-28 tools/call of the example server's elicit, declaring elicitation. */
const elicitCall = (args) => statelessCall('elicit', args, { meta: { [CAPS]: { elicitation: {} } } });

/** The retry of call: a new id, the same params plus inputResponses and requestState. */
function retryCall(call, requestState, inputResponses) {
  const id = `m-${nextId++}`;
  const body = structuredClone(call.body);
  body.id = id;
  Object.assign(body.params, { inputResponses, requestState });
  return { id, body, headers: call.headers };
}

/** POSTs call through url and reads the whole answer: {status, text, msgs, answer}. */
async function exchange(url, call) {
  const r = await request(url, { method: 'POST', headers: call.headers, body: call.body });
  const text = await r.done(scaled(10_000));
  const json = /^application\/json\b/.test(r.headers['content-type'] || '');
  const msgs = json ? (text ? [JSON.parse(text)] : []) : r.events().map((e) => e.json).filter(Boolean);
  return { status: r.status, contentType: r.headers['content-type'] || '', text, msgs, answer: msgs.find(isAnswer) };
}

/** Asserts x is an input round answering call: its result ({inputRequests, requestState}). */
function assertRound(x, call, what) {
  assert.equal(x.status, 200, `${what}: HTTP ${x.status} ${x.text}`);
  assert.equal(x.answer?.id, call.id, `${what}: the request's own id: ${x.text}`);
  const res = x.answer.result;
  assert.equal(res?.resultType, 'input_required', `${what}: ${x.text}`);
  assert.match(res.requestState, /^mcpgw1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, `${what}: ${x.text}`);
  const keys = Object.keys(res.inputRequests ?? {});
  assert.equal(keys.length, 1, `${what}: one question: ${x.text}`);
  assert.equal(res.inputRequests[keys[0]].method, 'elicitation/create', `${what}: ${x.text}`);
  return res;
}

/** The answers to every question of a round (each accepted with "answer to <message>"). */
const answersTo = (res) => Object.fromEntries(Object.entries(res.inputRequests).map(([k, q]) => [k, accept(`answer to ${q.params.message}`)]));

/**
 * Per instance: requests its pool accepted (retries it took included), requestStates it refused,
 * and calls it holds. A request through nginx that reached an instance moves exactly one of the
 * first two counters there, and both are final once its answer has been read.
 */
async function tally(gws) {
  const out = {};
  for (const [inst, gw] of Object.entries(gws)) {
    out[inst] = {
      requests: await metric(gw, 'mcpgw_pool_requests_total'),
      refused: await metric(gw, 'mcpgw_pool_request_states_refused_total'),
      held: await metric(gw, 'mcpgw_pool_held_calls'),
    };
  }
  return out;
}

/** The one instance a request reached between two tallies (asserted: exactly one, once). */
function landedOn(before, after, what) {
  const seen = (t) => t.requests + t.refused;
  const hit = INSTANCES.filter((inst) => seen(after[inst]) !== seen(before[inst]));
  assert.equal(hit.length, 1, `${what} reached exactly one instance: ${JSON.stringify({ before, after })}`);
  assert.equal(seen(after[hit[0]]) - seen(before[hit[0]]), 1, `${what} reached ${hit[0]} once: ${JSON.stringify({ before, after })}`);
  return hit[0];
}

/** The gateway log time (ms) of the last line matching re (global, its first group the time). */
function lastLogTime(gw, re) {
  const all = [...gw.logs().matchAll(re)];
  assert.ok(all.length > 0, `${re} in the log`);
  return Date.parse(all.at(-1)[1]);
}

test('round-robin nginx, shared state_key_file: an input round\'s retry that lands on the other instance gets 400 -32602 ("another gateway instance"); the holder keeps the call until input_hold_ms, then cancels it at its child', async () => {
  await withInstances(async ({ gws, via }) => {
    const t0 = await tally(gws);
    assert.deepEqual(Object.values(t0).map((t) => t.requests + t.refused + t.held), [0, 0], 'nothing yet');
    // rounds = 16: a retry that reaches the holder answers its round and gets the next one, so
    // the call stays held and the retry can be sent again. Where each request went is not left to
    // nginx's round-robin order: each instance's pool counters (requests taken, states refused)
    // move for exactly the request that reached it, and they are read before and after each one.
    // The retry is sent until one has reached the other instance (at most 8 tries; round-robin
    // over two instances alternates, so the first or second does).
    const call = elicitCall({ message: 'roaming', rounds: 16 });
    let res = assertRound(await exchange(via.url, call), call, 'the call');
    let before = await tally(gws);
    const home = landedOn(t0, before, 'the call');
    const other = home === 'g1' ? 'g2' : 'g1';
    assert.equal(before[home].held, 1, `${home} holds the call`);
    assert.equal(before[other].held, 0, `${other} holds nothing`);
    const homeCall = childCalls(gws[home], 'elicit');
    assert.equal(homeCall.length, 1, `the call at ${home}'s child`);

    let refused = null;
    let taken = 0;
    for (let attempt = 0; attempt < 8 && !refused; attempt++) {
      const retry = retryCall(call, res.requestState, answersTo(res));
      const x = await exchange(via.url, retry);
      const after = await tally(gws);
      const inst = landedOn(before, after, `retry ${attempt + 1}`);
      if (inst === home) {
        // The holder took the answers; the child asked its next round.
        assert.equal(after[home].requests - before[home].requests, 1, `retry ${attempt + 1} taken by ${home}`);
        res = assertRound(x, retry, `retry ${attempt + 1} at ${home}`);
        taken++;
      } else {
        refused = { retry, x, before, after };
      }
      before = after;
    }
    assert.ok(refused, `a retry reached ${other} within 8 tries (${taken} taken by ${home})`);

    // The other instance refused it: 400, one JSON-RPC error with the retry's own id.
    const { retry, x } = refused;
    assert.equal(x.status, 400, `at ${other}: HTTP ${x.status} ${x.text}`);
    assert.match(x.contentType, /^application\/json\b/, x.text);
    assert.equal(x.msgs.length, 1, x.text);
    assert.equal(x.answer.id, retry.id, `the retry's own id: ${x.text}`);
    assert.equal(x.answer.error?.code, -32602, x.text);
    assert.equal(x.answer.result, undefined, x.text);
    assert.match(x.answer.error.message, /another gateway instance/, x.text);
    assert.equal(refused.after[other].refused - refused.before[other].refused, 1, `${other} counted the refused state`);
    assert.deepEqual(childCalls(gws[other], 'elicit'), [], `nothing of the call reached ${other}'s children`);
    // The holder still holds it; the other holds nothing.
    const now = await tally(gws);
    assert.equal(now[home].held, 1, `${home} still holds the call after the refusal`);
    assert.equal(now[other].held, 0, `${other} holds nothing`);

    // No retry comes: input_hold_ms after its last round the holder cancels the call at its child.
    const childId = homeCall[0].id;
    const cancel = await waitFor(() => gws[home].childMessages().find((m) => m.method === 'notifications/cancelled' && m.params?.requestId === childId),
      scaled(HOLD_MS + 10_000), `the cancel of the held call at ${home}'s child`);
    assert.equal(cancel.params.reason, 'input not provided in time', JSON.stringify(cancel));
    await waitFor(async () => (await metric(gws[home], 'mcpgw_pool_held_calls')) === 0, scaled(5000), `${home} holds nothing once the call ended`);
    assert.equal(await metric(gws[home], 'mcpgw_cancels_total{server="example",direction="to_child",reason="input_not_provided"}'), 1);
    assert.equal(await metric(gws[other], 'mcpgw_cancels_total{server="example",direction="to_child",reason="input_not_provided"}'), 0);
    // Not before input_hold_ms: the holder's own log times of its last round and of the cancel.
    const sent = lastLogTime(gws[home], /^(\S+) \S+ session=pool:example#\d+ tools\/call held: input round \d+ sent/gm);
    const cancelled = lastLogTime(gws[home], /^(\S+) \S+ session=pool:example#\d+ cancel sent to child: method=tools\/call .*reason="input not provided in time"/gm);
    assert.ok(cancelled - sent >= HOLD_MS - 5, `cancelled ${cancelled - sent} ms after the last round (input_hold_ms ${HOLD_MS})`);
    // The other instance never cancelled anything and holds nothing.
    assert.equal(await metric(gws[other], 'mcpgw_pool_held_calls'), 0);
    assert.doesNotMatch(gws[other].logs(), /cancel sent to child/);
  }, roundOpts());
});

/**
 * A copy of the shipped instances site with the commented `hash $remote_addr consistent;` line of
 * upstream mcp_any enabled (an absolute path for startNginx); throws when the shipped file has no
 * such line, or more than one: the site and the test disagree.
 */
function hashSite() {
  const shipped = path.join(process.env.GW_SOURCE_ROOT, 'deploy/nginx/mcp-gateway-instances.conf');
  const text = fs.readFileSync(shipped, 'utf8');
  const re = /^([ \t]*)#[ \t]*(hash \$remote_addr consistent;)[ \t]*$/gm;
  const n = [...text.matchAll(re)].length;
  if (n !== 1) throw new Error(`${shipped} has ${n} commented "# hash $remote_addr consistent;" lines, not 1`);
  const site = text.replace(re, '$1$2');
  if (!/^upstream mcp_any \{\n[ \t]*hash \$remote_addr consistent;$/m.test(site)) {
    throw new Error(`${shipped}: the hash line is not the first line of upstream mcp_any`);
  }
  const f = path.join(tmpdir('mcpgw-nginx-site-'), 'mcp-gateway-instances-hash.conf');
  fs.writeFileSync(f, site);
  return f;
}

test('nginx with `hash $remote_addr consistent;` in mcp_any: every request of every input round from one client address lands on one instance, and the rounds complete with the elicited content', async () => {
  await withInstances(async ({ gws, via }) => {
    let before = await tally(gws);
    let home = null;
    const ROUNDS = 2;
    for (let k = 0; k < 3; k++) {
      const message = `sticky ${k}`;
      const call = elicitCall({ message, rounds: ROUNDS });
      let leg = call;
      let x = await exchange(via.url, leg);
      const asked = [];
      for (let r = 1; r <= ROUNDS + 1; r++) {
        const after = await tally(gws);
        const inst = landedOn(before, after, `call ${k} leg ${r}`);
        home ??= inst;
        assert.equal(inst, home, `call ${k} leg ${r} on ${home}, like every request before it`);
        assert.equal(after[inst].requests - before[inst].requests, 1, `call ${k} leg ${r} taken, not refused`);
        before = after;
        if (r > ROUNDS) break;
        const res = assertRound(x, leg, `call ${k} round ${r}`);
        assert.equal(after[home].held, 1, `${home} holds call ${k} in round ${r}`);
        asked.push(...Object.values(res.inputRequests).map((q) => q.params.message));
        leg = retryCall(call, res.requestState, answersTo(res));
        x = await exchange(via.url, leg);
      }
      // The last retry got the tool's result: every answer, in order.
      assert.equal(x.status, 200, x.text);
      assert.equal(x.answer?.id, leg.id, x.text);
      assert.equal(x.answer.result?.resultType, 'complete', x.text);
      assert.equal(x.answer.result.isError, undefined, x.text);
      assert.deepEqual(asked, [1, 2].map((i) => `${message} #${i}.1`), 'one question per round');
      assert.deepEqual(JSON.parse(textOf(x.answer)), asked.map((q) => accept(`answer to ${q}`)), x.text);
      assert.equal(before[home].held, 0, `nothing held once call ${k} completed`);
    }
    const other = home === 'g1' ? 'g2' : 'g1';
    const end = await tally(gws);
    assert.deepEqual(end[home], { requests: 9, refused: 0, held: 0 }, `${home} took all 9 requests`);
    assert.deepEqual(end[other], { requests: 0, refused: 0, held: 0 }, `${other} got none`);
    assert.equal(childCalls(gws[home], 'elicit').length, 3, `the three calls at ${home}'s children`);
    assert.deepEqual(childCalls(gws[other], 'elicit'), [], `no call at ${other}'s children`);
  }, roundOpts({ site: hashSite() }));
});
