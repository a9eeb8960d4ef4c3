// SPDX-License-Identifier: MIT
// Pooled legacy sessions (session_mode = pooled) in front of children that speak only the
// stateless revision 2026-07-28: the project's stateless-only fixture (tests/fixtures/
// stateless_server.mjs, found by the pool's probe or declared with era = stateless) and an
// ordinary v2-SDK server from npm (tests/fixtures/v2_plain_server.mjs), through the SDK v1 client
// and raw sessions. The gateway answers initialize from a child's server/discover, sends every
// request with the session's own stateless _meta envelope, and turns input_required rounds into
// the session's client requests on the call's stream, then retries with the answers.
//
// Every server has one child (pool_max_children = 1): sessions with different capabilities share
// it, and each gets only its own questions, answers and capabilities' consequences.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { initSession, metricSamples, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');

const ROOT = process.env.GW_SOURCE_ROOT ?? '';
const STATELESS_JS = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
const V2_PLAIN_JS = path.join(ROOT, 'tests/fixtures/v2_plain_server.mjs');
const node = process.execPath;
const POOLED = 'session_mode = pooled\npool_max_children = 1';
const ADMIN = 'pooled-modern-admin-token-0123456789abcdef';

let gw;
let dir;
let cancelLog;

/**
 * A stateless child that asks for elicitation on every tools/call whatever the request's
 * capabilities (a server that does not honour them), and logs each request's _meta envelope.
 */
function careless(name) {
  const file = path.join(dir, `${name}.mjs`);
  const log = path.join(dir, `${name}.log`);
  fs.writeFileSync(file, `
import fs from 'node:fs';
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
const out = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify({ method: m.method, meta: m.params?._meta ?? null }) + '\\n');
  if (m.method === 'server/discover') return out({ id: m.id, result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {} }, _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'careless', version: '1' } } } });
  if (m.method === 'tools/call') {
    if (m.params.inputResponses) return out({ id: m.id, result: { resultType: 'complete', content: [{ type: 'text', text: 'got ' + JSON.stringify(m.params.inputResponses) + ' state ' + m.params.requestState }] } });
    return out({ id: m.id, result: { resultType: 'input_required', inputRequests: { q: { method: 'elicitation/create', params: { message: 'who?', requestedSchema: { type: 'object', properties: {} } } } }, requestState: 'st-1' } });
  }
  out({ id: m.id, error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } } });
});
rl.on('close', () => process.exit(0));
`);
  return { command: `${node} ${file}`, log };
}
let carelessChild;

before(async () => {
  dir = tmpdir('mcpgw-pmodern-');
  cancelLog = path.join(dir, 'cancel.log');
  carelessChild = careless('careless');
  gw = await startGateway({
    dir,
    gateway: { admin_token: ADMIN, disconnect_grace_ms: 0 },
    servers: [
      { name: 'stateless', path: '/mcp', command: `${node} ${STATELESS_JS}`, env: `STATELESS_CANCEL_LOG=${cancelLog}`, extra: POOLED },
      { name: 'direct', path: '/direct', command: `${node} ${STATELESS_JS}`, extra: `${POOLED}\nera = stateless` },
      { name: 'held', path: '/held', command: `${node} ${STATELESS_JS}`, extra: `${POOLED}\ninput_hold_ms = 300` },
      { name: 'v2plain', path: '/v2plain', command: `${node} ${V2_PLAIN_JS}`, extra: POOLED },
      { name: 'careless', path: '/careless', command: carelessChild.command, extra: POOLED },
    ],
  });
});

after(async () => {
  if (gw) await gw.stop();
});

/** An SDK v1 client connected to url with the capabilities caps (handlers for each). */
async function connect(url, seen = {}, caps = { sampling: {}, elicitation: { form: {} }, roots: {} }) {
  const client = new Client({ name: 'pooled-modern-test', version: '1.0.0' }, { capabilities: caps });
  if (caps.roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///tmp/pooled-root', name: 'root' }] }));
  if (caps.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      (seen.elicit ??= []).push(req.params);
      return { action: 'accept', content: { name: 'Ada', color: 'green', ok: true } };
    });
  }
  if (caps.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      (seen.sampling ??= []).push(req.params);
      return { role: 'assistant', model: 'test-model', content: { type: 'text', text: 'Paris' } };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

const textOf = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const msgs = (r) => r.events().map((e) => e.json).filter(Boolean);
const answerOf = (r) => msgs(r).find((j) => 'result' in j || 'error' in j);
/** Pool children the gateway started for server name (its log). */
const started = (name) => (gw.logs().match(new RegExp(`session=pool:${name}#\\d+ pool child started`, 'g')) ?? []).length;

async function metrics() {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const body = await r.done(scaled(5000));
  assert.equal(r.status, 200, body);
  return metricSamples(body);
}

/** A raw pooled session at p with capabilities: its url, id and headers. */
async function rawSession(p, capabilities) {
  const url = `${gw.base}${p}`;
  const { sid, version, result } = await initSession(gw, { url, capabilities, version: '2025-11-25' });
  assert.ok(sid.startsWith('~'), 'a pooled (sealed) session id');
  return { url, sid, result, headers: { 'MCP-Protocol-Version': version } };
}
const postIn = (s, msg) => post(gw, msg, { url: s.url, sid: s.sid, headers: s.headers });

test('the SDK v1 client through a pooled server whose child is stateless-only (found by the probe): initialize, tools, input rounds', async () => {
  const seen = {};
  const { client, transport } = await connect(gw.url, seen);
  try {
    assert.equal(client.getServerVersion().name, 'mcp-gateway-stateless-fixture');
    assert.ok(client.getServerCapabilities().tools, 'tools capability carried over');
    assert.equal(client.getServerCapabilities().tools.listChanged, true, "the child's list changes, through the pool's listen");
    assert.ok(transport.sessionId.startsWith('~'), 'a pooled session');
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'echo'));
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'pooled and stateless' } })), 'pooled and stateless');
    await client.ping();
    await client.setLoggingLevel('info');
    await assert.rejects(client.subscribeResource({ uri: 'test://static-text' }), /do not declare resources\.subscribe/);
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} })), 'Hello, Ada!');
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_sampling', arguments: {} })), 'The model answered: Paris');
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} })), 'Ada likes green');
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_list_roots', arguments: {} })), 'Roots: file:///tmp/pooled-root');
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} })), 'name=Ada; greeting=Paris; roots=1');
    assert.equal(seen.elicit.length, 4);
    assert.equal(seen.sampling.length, 2);
    assert.match(gw.logs(), /pooled session initialized: \S+, the children stateless/);
    assert.equal(started('stateless'), 1, 'one child for every session');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('era = stateless with session_mode = pooled: accepted, no initialize reaches the child', async () => {
  const { client, transport } = await connect(`${gw.base}/direct`);
  try {
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'direct' } })), 'direct');
    assert.ok(!/session=pool:direct#\d+ .*initialize sent/.test(gw.logs()), 'the pool sent no initialize');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('an ordinary v2-SDK server (legacy: reject) behind pooled sessions', async () => {
  const seen = {};
  const { client, transport } = await connect(`${gw.base}/v2plain`, seen);
  try {
    assert.equal(client.getServerVersion().name, 'v2-plain-server');
    assert.equal(textOf(await client.callTool({ name: 'greet', arguments: { name: 'Grace' } })), 'Hello, Grace');
    assert.equal(textOf(await client.callTool({ name: 'ask_name', arguments: {} })), 'Hello, Ada');
    assert.equal(seen.elicit.length, 1);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('two sessions with different capabilities on one child: each its own envelope, questions and answers', async () => {
  const a = await rawSession('/mcp', { elicitation: {} });
  const b = await rawSession('/mcp', { sampling: {} });
  // The child decides by the envelope's capabilities: without sampling it refuses (-32021).
  const ra = await postIn(a, rpc('tools/call', { name: 'test_missing_capability', arguments: {} }));
  await ra.done(scaled(10000));
  assert.equal(answerOf(ra)?.error?.code, -32021, ra.text());
  // Both at once: a's elicitation and b's sampling, on the same child.
  const qa = await postIn(a, rpc('tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }));
  const qb = await postIn(b, rpc('tools/call', { name: 'test_missing_capability', arguments: {} }));
  const ea = await qa.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
  const eb = await qb.waitEvent((j) => j.method === 'sampling/createMessage', scaled(10000));
  assert.ok(ea && eb, `${qa.text()} ${qb.text()}`);
  const askA = msgs(qa).find((j) => j.method === 'elicitation/create');
  const askB = msgs(qb).find((j) => j.method === 'sampling/createMessage');
  assert.match(String(askA.id), /^mcpgw-ask-\d+$/);
  assert.ok(!msgs(qa).some((j) => j.method === 'sampling/createMessage'), "a sees none of b's questions");
  assert.ok(!msgs(qb).some((j) => j.method === 'elicitation/create'), "b sees none of a's questions");
  // b answers with a's question's id in its own session first: it is no question of b's ... unless
  // b has one of that number, so answer b's own first, then a's.
  assert.equal((await postIn(b, { jsonrpc: '2.0', id: askB.id, result: { role: 'assistant', model: 'm', content: { type: 'text', text: 'Sunny' } } })).status, 202);
  assert.equal((await postIn(a, { jsonrpc: '2.0', id: askA.id, result: { action: 'accept', content: { name: 'Ada' } } })).status, 202);
  await qa.done(scaled(10000));
  await qb.done(scaled(10000));
  assert.match(JSON.stringify(answerOf(qa).result), /Hello, Ada!/, qa.text());
  assert.match(JSON.stringify(answerOf(qb).result), /Sunny/, qb.text());
  assert.ok(!qa.text().includes('Sunny') && !qb.text().includes('Hello, Ada'), 'no answer crossed');
  assert.equal(started('stateless'), 1, 'one child served both');
});

test("the session's own capabilities and clientInfo go in every request's envelope", async () => {
  const s = await rawSession('/careless', { roots: {} });
  const r = await postIn(s, rpc('tools/call', { name: 'x', arguments: {} }));
  await r.done(scaled(10000));
  // The careless child asks for elicitation, which this client did not declare: an error.
  assert.match(answerOf(r)?.error?.message ?? '', /elicitation\/create, which the client did not declare at initialize/, r.text());
  assert.ok(!msgs(r).some((j) => j.method === 'elicitation/create'), 'the question is not sent');
  const sent = fs.readFileSync(carelessChild.log, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const call = sent.filter((m) => m.method === 'tools/call').at(-1);
  assert.deepEqual(call.meta['io.modelcontextprotocol/clientCapabilities'], { roots: {} });
  assert.deepEqual(call.meta['io.modelcontextprotocol/clientInfo'], { name: 'it', version: '1' });
  assert.equal(call.meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
  assert.equal(s.result.serverInfo.name, 'careless');
  // A legacy request may not carry the stateless revision's own members.
  const bad = await postIn(s, rpc('tools/call', { name: 'x', arguments: {}, _meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } } }));
  await bad.done(scaled(10000));
  assert.equal(answerOf(bad)?.error?.code, -32602, bad.text());
  // With elicitation declared, the round goes to the client and the retry carries the answer.
  const e = await rawSession('/careless', { elicitation: {} });
  const q = await postIn(e, rpc('tools/call', { name: 'x', arguments: {} }));
  await q.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
  const ask = msgs(q).find((j) => j.method === 'elicitation/create');
  assert.equal((await postIn(e, { jsonrpc: '2.0', id: ask.id, result: { action: 'decline' } })).status, 202);
  await q.done(scaled(10000));
  assert.match(JSON.stringify(answerOf(q).result), /got \{\\"q\\":\{\\"action\\":\\"decline\\"\}\} state st-1/, q.text());
});

const cancels = () => (fs.existsSync(cancelLog) ? fs.readFileSync(cancelLog, 'utf8').split('\n').filter((l) => l.startsWith('CANCELLED')) : []);
const inflight = async (name) => (await metrics())[`mcpgw_pool_inflight_requests{server="${name}"}`] ?? 0;

test('a dropped stream cancels its call at the stateless child', async () => {
  const s = await rawSession('/mcp', {});
  const before = cancels().length;
  const r = await postIn(s, rpc('tools/call', { name: 'slow', arguments: { ms: 60000 } }));
  assert.equal(r.status, 200);
  await waitFor(async () => (await inflight('stateless')) >= 1, scaled(10000), 'the call to reach the child');
  r.drop();
  await waitFor(() => cancels().length > before, scaled(10000), 'the child to log the cancel of the dropped call');
  await waitFor(async () => (await inflight('stateless')) === 0, scaled(10000), 'nothing left in flight');
});

test("the client's notifications/cancelled reaches the stateless child (SDK v1 abort)", async () => {
  const { client, transport } = await connect(gw.url);
  try {
    const before = cancels().length;
    const ac = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { ms: 60000 } }, undefined, { signal: ac.signal });
    await waitFor(async () => (await inflight('stateless')) >= 1, scaled(10000), 'the call to reach the child');
    ac.abort();
    await assert.rejects(call);
    await waitFor(() => cancels().length > before, scaled(10000), 'the child to log the cancel');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('a round the client never answers ends after input_hold_ms; an error answer ends it too', async () => {
  const h = await rawSession('/held', { elicitation: {} });
  const t0 = Date.now();
  const r = await postIn(h, rpc('tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }));
  await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
  await r.done(scaled(10000));
  assert.match(answerOf(r)?.error?.message ?? '', /timed out/, r.text());
  assert.ok(Date.now() - t0 >= 300);
  const s = await rawSession('/mcp', { sampling: {} });
  const q = await postIn(s, rpc('tools/call', { name: 'test_input_required_result_sampling', arguments: {} }));
  await q.waitEvent((j) => j.method === 'sampling/createMessage', scaled(10000));
  const ask = msgs(q).find((j) => j.method === 'sampling/createMessage');
  assert.equal((await postIn(s, { jsonrpc: '2.0', id: ask.id, error: { code: -1, message: 'User rejected sampling' } })).status, 202);
  await q.done(scaled(10000));
  assert.match(answerOf(q)?.error?.message ?? '', /answered the server's sampling\/createMessage with an error/);
});

test("a client's cancel between rounds ends the call there: nothing is at the child", async () => {
  const s = await rawSession('/mcp', { elicitation: {} });
  const id = 'between-rounds';
  const r = await postIn(s, rpc('tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }, id));
  await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
  const c = await postIn(s, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'changed my mind' } });
  assert.equal(c.status, 202);
  await r.done(scaled(10000));
  assert.equal(answerOf(r), undefined, 'the stream ends without a response');
  // The session goes on.
  const e = await postIn(s, rpc('tools/call', { name: 'echo', arguments: { text: 'still here' } }));
  await e.done(scaled(10000));
  assert.match(JSON.stringify(answerOf(e).result), /still here/);
});

test('a session taken up after a restart (same session_key_file): the capabilities its sealed id names, no clientInfo; rounds go on', async () => {
  const kdir = tmpdir('mcpgw-pmodern-key-');
  const kf = path.join(kdir, 'session.keys');
  fs.writeFileSync(kf, `${crypto.randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const child = careless('careless-restart');
  const opts = () => ({ dir: fs.mkdtempSync(path.join(kdir, 'g-')), gateway: { session_key_file: kf }, servers: [{ name: 'careless', path: '/mcp', command: child.command, extra: POOLED }] });
  const envelopes = () => fs.readFileSync(child.log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((m) => m.method === 'tools/call').map((m) => m.meta);
  const a = await startGateway(opts());
  let sid;
  let headers;
  try {
    const s = await initSession(a, { capabilities: { elicitation: {}, experimental: { x: {} } }, version: '2025-11-25' });
    sid = s.sid;
    headers = { 'MCP-Protocol-Version': s.version };
    const r = await post(a, rpc('tools/call', { name: 'x', arguments: {} }), { sid, headers });
    await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
    r.drop();
    assert.deepEqual(envelopes().at(-1)['io.modelcontextprotocol/clientCapabilities'], { elicitation: {}, experimental: { x: {} } }, 'its own, as declared');
  } finally {
    await a.stop();
  }
  const a2 = await startGateway(opts());
  try {
    const r = await post(a2, rpc('tools/call', { name: 'x', arguments: {} }), { sid, headers });
    assert.equal(r.status, 200, r.text());
    await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
    const meta = envelopes().at(-1);
    assert.deepEqual(meta['io.modelcontextprotocol/clientCapabilities'], { elicitation: {} }, 'what the sealed flags name');
    assert.equal(meta['io.modelcontextprotocol/clientInfo'], undefined);
    const ask = msgs(r).find((j) => j.method === 'elicitation/create');
    assert.equal((await post(a2, { jsonrpc: '2.0', id: ask.id, result: { action: 'cancel' } }, { sid, headers })).status, 202);
    await r.done(scaled(10000));
    assert.match(JSON.stringify(answerOf(r).result), /state st-1/, r.text());
  } finally {
    await a2.stop();
  }
});

test('trace_context = propagate: the trace and the envelope both reach the stateless child, in one _meta', async () => {
  const tdir = tmpdir('mcpgw-pmodern-trace-');
  const child = careless('careless-trace');
  const tgw = await startGateway({ dir: tdir, gateway: { trace_context: 'propagate' }, servers: [{ name: 'careless', path: '/mcp', command: child.command, extra: POOLED }] });
  try {
    const s = await initSession(tgw, { capabilities: { elicitation: {} }, version: '2025-11-25' });
    const headers = { 'MCP-Protocol-Version': s.version };
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    for (const meta of [{ traceparent: tp, progressToken: 'p1' }, undefined]) {
      const params = { name: 'x', arguments: {} };
      if (meta) params._meta = meta;
      const r = await post(tgw, rpc('tools/call', params), { sid: s.sid, headers: meta ? headers : { ...headers, traceparent: tp } });
      await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
      r.drop();
      const got = fs.readFileSync(child.log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((m) => m.method === 'tools/call').at(-1).meta;
      assert.match(got.traceparent ?? '', /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/, JSON.stringify(got));
      assert.notEqual(got.traceparent, tp, "the gateway's own span");
      assert.deepEqual(got['io.modelcontextprotocol/clientCapabilities'], { elicitation: {} });
      if (meta) assert.notEqual(got.progressToken, undefined, 'the progress token, minted');
    }
  } finally {
    await tgw.stop();
  }
});
