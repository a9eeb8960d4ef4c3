// SPDX-License-Identifier: MIT
// 2026-07-28 ("modern", stateless) requests through several gateway instances behind Debian's real
// nginx, with the shipped deploy/nginx/mcp-gateway-instances.conf (only its ports and TLS lines
// replaced). Two gateways, instance_id g1 and g2, each in front of the example server (a legacy
// stdio server: each instance's pool bridges modern requests to its children). A modern request
// has no Mcp-Session-Id, so nginx sends it to upstream mcp_any, round-robin: both instances serve
// some, each request exactly one; a legacy session opened through nginx keeps landing on the
// instance whose id prefix it carries, between modern requests that alternate; a modern client that
// drops mid-call behind nginx (before any byte of its answer, or in the middle of its SSE stream)
// gets its request cancelled at the child at once, since nginx closes the upstream connection on a
// client abort; progress of a modern request passes nginx as SSE events one by one; and when an
// instance stops, nginx sends every modern request to the other one.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';

import { callTool, initSession, request, startGateway, waitFor } from '../lib/gw.mjs';
import { withInstances as withNginxInstances } from '../lib/nginx.mjs';
import { scaled } from '../lib/timing.mjs';

const MODERN = '2026-07-28';
const INSTANCES = ['g1', 'g2'];
const SID_RE = /^(g[12])\.[A-Za-z0-9_-]{22}$/;
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/**
 * withInstances of tests/lib/nginx.mjs (gateways g1 and g2 behind nginx with the instances site),
 * nginx's error log holding no alert, emerg or crit line once fn passed.
 */
const withInstances = (fn) => withNginxInstances(fn, { quietErrorLog: true });

let nextId = 1;

/** The headers and body of a 2026-07-28 tools/call (the envelope and the mirrored headers). */
function modernCall(name, args, { id = `m-${nextId++}`, meta = {} } = {}) {
  const body = {
    jsonrpc: '2.0', id, method: 'tools/call',
    params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {}, ...meta } },
  };
  const headers = {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'tools/call', 'Mcp-Name': name,
  };
  return { id, body, headers };
}

/** POSTs a modern tools/call to url; resolves at the response headers (see request()). */
function modernPost(url, name, args, opts) {
  const { id, body, headers } = modernCall(name, args, opts);
  return request(url, { method: 'POST', headers, body }).then((r) => Object.assign(r, { id }));
}

/** A modern echo through url: asserts a plain JSON answer with the text and no session id. */
async function modernEcho(url, text) {
  const r = await modernPost(url, 'echo', { text });
  const body = await r.done(scaled(10_000));
  assert.equal(r.status, 200, `modern echo ${text}: HTTP ${r.status} ${body}`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `modern echo ${text}: ${body}`);
  assert.equal(r.headers['mcp-session-id'], undefined, 'a 2026-07-28 answer opens no session');
  const j = JSON.parse(body);
  assert.equal(j.id, r.id, body);
  assert.equal(textOf(j), text, body);
  assert.equal(j.result.resultType, 'complete', body);
  return j;
}

/** The tools/call messages of one instance's children (session and pool children alike). */
const childCalls = (gw, name) => gw.childMessages().filter((m) => m.method === 'tools/call' && m.params?.name === name);

/** For each modern echo text, the instance whose children received it: {text: [instances]}. */
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
        const m = new RegExp(`^${escapeRe(name)} (\\d+)$`, 'm').exec(b);
        if (!m) reject(new Error(`${name} missing from ${gw.base}/metrics:\n${b}`));
        else resolve(Number(m[1]));
      });
    }).on('error', reject);
  });
}

async function poolRequests(gws) {
  const out = {};
  for (const [inst, gw] of Object.entries(gws)) out[inst] = await metric(gw, 'mcpgw_pool_requests_total');
  return out;
}

test('2026-07-28 requests through nginx are answered, round-robin over both instances, each by one', async () => {
  await withInstances(async ({ gws, via }) => {
    const before = await poolRequests(gws);
    assert.deepEqual(before, { g1: 0, g2: 0 }, 'no modern request yet');
    const N = 8;
    const texts = [];
    for (let i = 0; i < N; i++) {
      texts.push(`modern ${i}`);
      await modernEcho(via.url, texts[i]);
    }
    // Every request reached exactly one instance's children.
    const at = servedBy(gws, texts);
    for (const t of texts) assert.equal(at[t].length, 1, `"${t}" served by exactly one instance: ${JSON.stringify(at)}`);
    const perInst = Object.fromEntries(INSTANCES.map((inst) => [inst, texts.filter((t) => at[t][0] === inst).length]));
    // Both instances served some (round-robin spreads them; nothing pins a modern request).
    for (const inst of INSTANCES) assert.ok(perInst[inst] >= 1, `instance ${inst} served some of the ${N}: ${JSON.stringify(at)}`);
    // Each gateway counted exactly the modern requests its children saw.
    assert.deepEqual(await poolRequests(gws), perInst, 'mcpgw_pool_requests_total of each instance');
    // No session was opened anywhere.
    for (const gw of Object.values(gws)) assert.doesNotMatch(gw.logs(), /session created/);
  });
});

test('a legacy session opened through nginx keeps landing on its instance while 2026-07-28 requests alternate', async () => {
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
      await modernEcho(via.url, texts[i]);
      const { r, response } = await callTool(via, s.sid, 'echo', { text: `session ${i}` }, { id: `leg-${i}`, ms: scaled(10_000) });
      assert.equal(r.status, 200, `tools/call in ${s.sid} through nginx: HTTP ${r.status} ${r.text()}`);
      assert.equal(textOf(response), `session ${i}`, r.text());
    }
    // The session's calls reached its own instance's children, never the other instance's.
    const sessionTexts = (gw) => childCalls(gw, 'echo').map((x) => x.params.arguments?.text).filter((t) => /^session \d$/.test(t));
    assert.deepEqual(sessionTexts(gws[inst]), [0, 1, 2, 3, 4, 5].map((i) => `session ${i}`), `the session's calls on ${inst}`);
    assert.deepEqual(sessionTexts(gws[other]), [], `none of the session's calls on ${other}`);
    assert.doesNotMatch(gws[other].logs(), new RegExp(escapeRe(s.sid)), `${other} never saw session ${s.sid}`);
    // Meanwhile the modern requests went to both instances.
    const at = servedBy(gws, texts);
    for (const t of texts) assert.equal(at[t].length, 1, `"${t}" served by exactly one instance: ${JSON.stringify(at)}`);
    assert.deepEqual(new Set(texts.map((t) => at[t][0])), new Set(INSTANCES), `modern requests on both instances: ${JSON.stringify(at)}`);
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

test('a 2026-07-28 client that drops mid-call behind nginx gets its request cancelled at the child', async () => {
  await withInstances(async ({ gws, via }) => {
    // 1. Before any byte of the answer (a plain JSON answer is still pending: no headers yet).
    const { body, headers } = modernCall('slow', { steps: 100001, interval_ms: 100 });
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
    const r = await modernPost(via.url, 'slow', { steps: 100002, interval_ms: 100 }, { meta: { progressToken: 'drop-pt' } });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] || '', /^text\/event-stream\b/);
    await r.waitEvent((j) => j.method === 'notifications/progress', scaled(5000));
    const streaming = await waitCallAtChild(gws, 100002, 'the streaming call at a child');
    r.drop();
    await assertCancelledAtChild(gws, streaming, 'the streaming call');

    // Both counted as client closes; the instances serve on.
    let closed = 0;
    for (const gw of Object.values(gws)) closed += await metric(gw, 'mcpgw_pool_cancels_total{reason="client_closed"}');
    assert.equal(closed, 2, 'mcpgw_pool_cancels_total{reason="client_closed"} over both instances');
    for (let i = 0; i < 2; i++) await modernEcho(via.url, `after the drops ${i}`);
  });
});

test('SSE progress of a 2026-07-28 request passes nginx unbuffered: an event arrives before the answer', async () => {
  await withInstances(async ({ gws, via }) => {
    // Once per instance (round-robin: two requests in a row land on different instances).
    for (let k = 0; k < 2; k++) {
      const token = `pt-${k}`;
      const r = await modernPost(via.url, 'slow', { steps: 3, interval_ms: 400 }, { meta: { progressToken: token } });
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

test('an instance stops: every 2026-07-28 request through nginx goes to the other one, none fails', async () => {
  await withInstances(async ({ gws, via }) => {
    for (let i = 0; i < 2; i++) await modernEcho(via.url, `before ${i}`);
    await gws.g1.stop();
    const texts = [];
    for (let i = 0; i < 6; i++) {
      texts.push(`after ${i}`);
      await modernEcho(via.url, texts[i]);
    }
    const at = servedBy(gws, texts);
    assert.deepEqual(texts.map((t) => at[t]), texts.map(() => ['g2']), `served after g1 stopped: ${JSON.stringify(at)}`);
  });
});
