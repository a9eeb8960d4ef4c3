// SPDX-License-Identifier: MIT
// A legacy session (initialize, Mcp-Session-Id) in front of a child that speaks only the stateless
// revision 2026-07-28 (tests/fixtures/stateless_server.mjs, which refuses initialize with -32022):
// the gateway probes the child with server/discover once its initialize is refused, answers the
// client's initialize from the discover result, sends every request with the stateless _meta
// envelope, and turns the child's input_required rounds into the legacy client's elicitation and
// sampling requests. Driven by the official SDK v1 client (@modelcontextprotocol/sdk 1.32.2).
//
// Also: a server with era = stateless (no initialize is sent: the probe goes first), and a child
// whose discover answer is hostile (no stateless version, no result object): the session is
// refused with a JSON-RPC error, as before.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { initSession, post, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema,
} = await import('@modelcontextprotocol/sdk/types.js');

const ROOT = process.env.GW_SOURCE_ROOT ?? '';
const STATELESS_JS = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
const V2_PLAIN_JS = path.join(ROOT, 'tests/fixtures/v2_plain_server.mjs');
const node = process.execPath;

let gw;
let dir;
let cancelLog;

/** Writes a stdio child that answers server/discover with `discover` (a result or an error). */
function hostileChild(name, answer, initError = { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } }) {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, `
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  const out = m.method === 'server/discover' ? { jsonrpc: '2.0', id: m.id, ...${JSON.stringify(answer)} }
    : { jsonrpc: '2.0', id: m.id, error: ${JSON.stringify(initError)} };
  process.stdout.write(JSON.stringify(out) + '\\n');
});
rl.on('close', () => process.exit(0));
`);
  return `${node} ${file}`;
}

/**
 * A stateless child that answers server/discover as a stateless server and each tools/call by its
 * tool's name with a hostile input_required result; initialize is refused with -32022.
 */
function scriptedChild(name) {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, `
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
const ask = { method: 'elicitation/create', params: { message: 'again?', requestedSchema: { type: 'object', properties: {} } } };
const results = {
  not_object: { resultType: 'input_required', inputRequests: 5 },
  bad_method: { resultType: 'input_required', inputRequests: { k: { method: 'tools/call', params: {} } } },
  too_many: { resultType: 'input_required', inputRequests: Object.fromEntries(Array.from({ length: 9 }, (_, i) => ['k' + i, ask])) },
  neither: { resultType: 'input_required' },
  endless: { resultType: 'input_required', inputRequests: { k: ask }, requestState: 'x' },
};
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  let out;
  if (m.method === 'server/discover') out = { result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {} }, _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'scripted', version: '1' } } } };
  else if (m.method === 'tools/call' && m.params.name === 'asks_directly') {
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: 'child-1', method: 'roots/list' }) + '\\n');
    out = { result: { resultType: 'complete', content: [{ type: 'text', text: 'done' }] } };
  } else if (m.method === 'tools/call') out = { result: results[m.params.name] ?? { resultType: 'complete', content: [] } };
  else if (m.method === 'subscriptions/listen') return;
  else out = { error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } } };
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, ...out }) + '\\n');
});
rl.on('close', () => process.exit(0));
`);
  return `${node} ${file}`;
}

/**
 * A stateless child that declares resources.subscribe: it acknowledges each subscriptions/listen,
 * and a tools/call of `touch` (arguments.uri) sends notifications/resources/updated on every listen
 * open for that URI; a listen's notifications/cancelled ends it. It logs each listen's URIs and
 * end to the file at LISTEN_LOG.
 */
function subscriberChild(name) {
  const file = path.join(dir, `${name}.mjs`);
  const log = path.join(dir, `${name}.log`);
  fs.writeFileSync(file, `
import fs from 'node:fs';
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
const listens = new Map();
const out = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.method === 'notifications/cancelled') {
    if (listens.delete(m.params.requestId)) fs.appendFileSync(${JSON.stringify(log)}, 'END ' + m.params.requestId + '\\n');
    return;
  }
  if (m.id === undefined) return;
  if (m.method === 'server/discover') return out({ id: m.id, result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {}, resources: { subscribe: true } }, _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'subscriber', version: '1' } } } });
  if (m.method === 'subscriptions/listen') {
    const uris = m.params.notifications.resourceSubscriptions ?? [];
    listens.set(m.id, uris);
    fs.appendFileSync(${JSON.stringify(log)}, 'LISTEN ' + m.id + ' ' + JSON.stringify(uris) + '\\n');
    return out({ method: 'notifications/subscriptions/acknowledged', params: { notifications: m.params.notifications, _meta: { 'io.modelcontextprotocol/subscriptionId': m.id } } });
  }
  if (m.method === 'tools/call') {
    for (const [id, uris] of listens) {
      if (uris.includes(m.params.arguments.uri)) out({ method: 'notifications/resources/updated', params: { uri: m.params.arguments.uri, _meta: { 'io.modelcontextprotocol/subscriptionId': id } } });
    }
    return out({ id: m.id, result: { resultType: 'complete', content: [{ type: 'text', text: 'touched' }] } });
  }
  out({ id: m.id, error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } } });
});
rl.on('close', () => process.exit(0));
`);
  return { command: `${node} ${file}`, log };
}
let subscriber;

before(async () => {
  dir = tmpdir('mcpgw-modern-');
  cancelLog = path.join(dir, 'cancel.log');
  subscriber = subscriberChild('subscriber');
  gw = await startGateway({
    dir,
    gateway: { disconnect_grace_ms: 0 },
    servers: [
      { name: 'stateless', path: '/mcp', command: `${node} ${STATELESS_JS}`, env: `STATELESS_CANCEL_LOG=${cancelLog}` },
      { name: 'held', path: '/held', command: `${node} ${STATELESS_JS}`, extra: 'input_hold_ms = 300' },
      { name: 'subscriber', path: '/subscriber', command: subscriber.command },
      { name: 'scripted', path: '/scripted', command: scriptedChild('scripted') },
      { name: 'v2plain', path: '/v2plain', command: `${node} ${V2_PLAIN_JS}` },
      { name: 'direct', path: '/direct', command: `${node} ${STATELESS_JS}`, extra: 'era = stateless' },
      { name: 'nolist', path: '/nolist', command: hostileChild('nolist', { result: { supportedVersions: ['2099-01-01'], capabilities: {} } }) },
      { name: 'noresult', path: '/noresult', command: hostileChild('noresult', { result: 'not an object' }) },
      { name: 'legacyerr', path: '/legacyerr', command: hostileChild('legacyerr', { error: { code: -32601, message: 'Method not found' } }) },
      { name: 'plainerr', path: '/plainerr', command: hostileChild('plainerr', { result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: {} } }, { code: -32602, message: 'Bad initialize', data: { supported: ['2025-06-18'] } }) },
      { name: 'badcaps', path: '/badcaps', command: hostileChild('badcaps', { result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: 5, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: 3 }, extensions: { x: {} }, tasks: {} }, _meta: { 'io.modelcontextprotocol/serverInfo': 7 } } }) },
    ],
  });
});

after(async () => {
  if (gw) await gw.stop();
});

/** An SDK v1 client connected to url, with sampling and elicitation handlers. */
async function connect(url, seen = {}) {
  const client = new Client({ name: 'modern-child-test', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: {} } });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///tmp/modern-root', name: 'root' }] }));
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    (seen.elicit ??= []).push(req.params);
    return { action: 'accept', content: { name: 'Ada', color: 'green', ok: true } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    (seen.sampling ??= []).push(req.params);
    return { role: 'assistant', model: 'test-model', content: { type: 'text', text: 'Paris' } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

const textOf = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

test('a stateless-only child serves a legacy session: initialize, tools/list, tools/call', async () => {
  const { client, transport } = await connect(gw.url);
  try {
    assert.equal(client.getServerVersion().name, 'mcp-gateway-stateless-fixture');
    assert.ok(client.getServerCapabilities().tools, 'tools capability carried over');
    assert.ok(transport.sessionId, 'a session id');
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'echo'));
    const r = await client.callTool({ name: 'echo', arguments: { text: 'through a stateless child' } });
    assert.equal(textOf(r), 'through a stateless child');
    await client.ping();
    await client.setLoggingLevel('info');
    await assert.rejects(client.subscribeResource({ uri: 'test://static-text' }), /not available/);
    assert.match(gw.logs(), /child refused initialize: probing it with server\/discover/);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('input rounds: elicitation, sampling and a multi-round call answered by the client', async () => {
  const seen = {};
  const { client, transport } = await connect(gw.url, seen);
  try {
    const e = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
    assert.equal(textOf(e), 'Hello, Ada!');
    assert.equal(seen.elicit.length, 1);
    const s = await client.callTool({ name: 'test_input_required_result_sampling', arguments: {} });
    assert.equal(textOf(s), 'The model answered: Paris');
    assert.equal(seen.sampling.length, 1);
    const m = await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} });
    assert.equal(textOf(m), 'Ada likes green');
    assert.equal(seen.elicit.length, 3, 'two more elicitation rounds');
    const r = await client.callTool({ name: 'test_input_required_result_list_roots', arguments: {} });
    assert.equal(textOf(r), 'Roots: file:///tmp/modern-root');
    const all = await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} });
    assert.equal(textOf(all), 'name=Ada; greeting=Paris; roots=1', 'three questions in one round, with requestState');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

/** How many tools/call requests the gateway has forwarded to a child so far (all sessions). */
const forwarded = () => (gw.logs().match(/request tools\/call forwarded as child id/g) ?? []).length;
const cancels = () => (fs.existsSync(cancelLog) ? fs.readFileSync(cancelLog, 'utf8').split('\n').filter((l) => l.startsWith('CANCELLED')) : []);

test("the client's cancel reaches the stateless child as notifications/cancelled", async () => {
  const { client, transport } = await connect(gw.url);
  try {
    const before = cancels().length;
    const sent = forwarded();
    const ac = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { ms: 60000 } }, undefined, { signal: ac.signal });
    // The cancel must come after the call reached the child (the two travel on separate POSTs).
    await waitFor(() => forwarded() > sent, scaled(5000), 'the call to reach the child');
    ac.abort();
    await assert.rejects(call);
    await waitFor(() => cancels().length > before, scaled(10000), 'the child to log the cancel');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('a dropped connection cancels its request at the stateless child', async () => {
  const { client, transport } = await connect(gw.url);
  try {
    const before = cancels().length;
    const sent = forwarded();
    const headers = { 'Mcp-Session-Id': transport.sessionId, 'MCP-Protocol-Version': transport.protocolVersion ?? '2025-11-25' };
    const res = await post(gw, rpc('tools/call', { name: 'slow', arguments: { ms: 60000 } }), { headers });
    assert.equal(res.status, 200);
    await waitFor(() => forwarded() > sent, scaled(5000), 'the call to reach the child');
    res.drop();
    await waitFor(() => cancels().length > before, scaled(10000), 'the child to log the cancel of the dropped call');
    assert.match(gw.logs(), /disconnected|requests cancelled/);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test("list changes and log messages reach the legacy client's GET stream", async () => {
  const { client, transport } = await connect(gw.url);
  const changed = [];
  const logs = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => { changed.push(n.params?._meta ?? null); });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  try {
    assert.equal(client.getServerCapabilities().tools.listChanged, true);
    await gw.waitLog(/subscriptions\/listen sent as child id/);
    const r = await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    assert.match(textOf(r), /test_toggled_tool added/);
    await waitFor(() => changed.length > 0, scaled(10000), 'notifications/tools/list_changed');
    assert.deepEqual(changed, changed.map(() => null), 'the list change without the listen\'s subscriptionId (the gateway\'s)');
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'test_toggled_tool'));
    await client.setLoggingLevel('info');
    await client.callTool({ name: 'test_logging_tool', arguments: {} });
    await waitFor(() => logs.length >= 2, scaled(10000), 'the log messages at info and above');
    assert.deepEqual(logs.map((l) => l.level), ['info', 'warning'], 'logLevel info: no debug line');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

test('an ordinary v2-SDK server made stateless-only (serveStdio legacy: reject) behind a legacy session', async () => {
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

test('era = stateless: the probe goes first, no initialize reaches the child', async () => {
  const { client, transport } = await connect(`${gw.base}/direct`);
  try {
    const r = await client.callTool({ name: 'echo', arguments: { text: 'direct' } });
    assert.equal(textOf(r), 'direct');
    const mine = gw.logs().split('\n').filter((l) => l.includes(transport.sessionId));
    assert.ok(mine.some((l) => /server\/discover sent to the child/.test(l)), 'probed');
    assert.ok(!mine.some((l) => /refused initialize/.test(l)), 'no initialize was sent');
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

for (const [name, re] of [
  ['nolist', /Unsupported protocol version/],
  ['noresult', /Unsupported protocol version/],
  ['legacyerr', /Unsupported protocol version/],
]) {
  test(`a hostile or legacy discover answer (${name}): the session is refused with the child's error`, async () => {
    const res = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } }), { url: `${gw.base}/${name}` });
    const body = await res.done(scaled(10000));
    assert.match(body, re);
    assert.match(body, /"code":-32022/);
    assert.doesNotMatch(body, /"result"/);
  });
}

test("a legacy child's own refusal of initialize reaches the client at once: no probe", async () => {
  const res = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } }), { url: `${gw.base}/plainerr` });
  const body = await res.done(scaled(10000));
  assert.match(body, /Bad initialize/);
  assert.match(body, /"code":-32602/);
  const sid = res.headers['mcp-session-id'];
  const mine = gw.logs().split('\n').filter((l) => sid && l.includes(sid));
  assert.ok(mine.length > 0 && !mine.some((l) => /server\/discover/.test(l)), 'not probed');
});

test('a discover result with malformed capabilities and serverInfo: only what is well formed reaches the client', async () => {
  const { client, transport } = await connect(`${gw.base}/badcaps`);
  try {
    assert.deepEqual(client.getServerVersion(), { name: 'badcaps', version: '' });
    const caps = client.getServerCapabilities();
    assert.equal(caps.tools, undefined, 'a capability that is not an object is left out');
    assert.deepEqual(caps.prompts, { listChanged: true }, 'carried: the gateway listens for it');
    assert.deepEqual(caps.resources, { subscribe: true }, 'listChanged that is not true is left out');
    assert.equal(caps.extensions, undefined);
    assert.equal(caps.tasks, undefined);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

/** A raw session at path (no SDK): its id and the headers its requests carry. */
async function rawSession(p, capabilities) {
  const url = `${gw.base}${p}`;
  const { sid, version } = await initSession(gw, { url, capabilities, version: '2025-11-25' });
  return { url, sid, headers: { 'MCP-Protocol-Version': version } };
}

test("each session's own capabilities go to the stateless child: without sampling, the child says it needs it", async () => {
  const bare = await rawSession('/mcp', {});
  const r = await post(gw, rpc('tools/call', { name: 'test_missing_capability', arguments: {} }), { url: bare.url, sid: bare.sid, headers: bare.headers });
  await r.done(scaled(10000));
  const answer = r.events().map((e) => e.json).find((j) => j && (j.result || j.error));
  assert.equal(answer.error?.code, -32021, r.text());
  const asker = await rawSession('/mcp', { sampling: {} });
  const r2 = await post(gw, rpc('tools/call', { name: 'test_missing_capability', arguments: {} }), { url: asker.url, sid: asker.sid, headers: asker.headers });
  const ev = await r2.waitEvent((j) => j.method === 'sampling/createMessage', scaled(10000));
  assert.ok(ev, 'with sampling declared, the child asks');
  r2.drop();
});

test('a client that never answers the round: the request ends after input_hold_ms', async () => {
  const s = await rawSession('/held', { elicitation: {} });
  const t0 = Date.now();
  const r = await post(gw, rpc('tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }), { url: s.url, sid: s.sid, headers: s.headers });
  await r.waitEvent((j) => j.method === 'elicitation/create', scaled(10000));
  await r.done(scaled(10000));
  const answer = r.events().map((e) => e.json).find((j) => j && (j.result || j.error));
  assert.match(answer.error?.message ?? '', /timed out/);
  assert.ok(Date.now() - t0 >= 300);
});

test("a client's error answer to a question ends the request with an error", async () => {
  const s = await rawSession('/mcp', { sampling: {} });
  const r = await post(gw, rpc('tools/call', { name: 'test_input_required_result_sampling', arguments: {} }), { url: s.url, sid: s.sid, headers: s.headers });
  const ev = await r.waitEvent((j) => j.method === 'sampling/createMessage', scaled(10000));
  const q = r.events().map((e) => e.json).find((j) => j && j.method === 'sampling/createMessage');
  assert.ok(ev && q);
  const a = await post(gw, { jsonrpc: '2.0', id: q.id, error: { code: -1, message: 'User rejected sampling' } }, { url: s.url, sid: s.sid, headers: s.headers });
  assert.equal(a.status, 202);
  await r.done(scaled(10000));
  const answer = r.events().map((e) => e.json).find((j) => j && (j.result || j.error));
  assert.match(answer.error?.message ?? '', /answered the server's sampling\/createMessage with an error/);
});

for (const [tool, re] of [
  ['not_object', /malformed/],
  ['bad_method', /unknown kind/],
  ['too_many', /malformed/],
  ['neither', /malformed/],
  ['endless', /too many rounds/],
]) {
  test(`a hostile input_required result (${tool}) ends the request with an error`, async () => {
    const s = await rawSession('/scripted', { elicitation: {} });
    const r = await post(gw, rpc('tools/call', { name: tool, arguments: {} }), { url: s.url, sid: s.sid, headers: s.headers });
    // Answer every question at once (the endless child asks again each round).
    const answered = new Set();
    const deadline = Date.now() + scaled(10000);
    while (!r.ended && Date.now() < deadline) {
      for (const q of r.events().map((e) => e.json).filter((j) => j && j.method === 'elicitation/create' && !answered.has(j.id))) {
        answered.add(q.id);
        await post(gw, { jsonrpc: '2.0', id: q.id, result: { action: 'accept', content: {} } }, { url: s.url, sid: s.sid, headers: s.headers });
      }
      await new Promise((res) => setTimeout(res, 10));
    }
    await r.done(scaled(10000));
    const answer = r.events().map((e) => e.json).find((j) => j && (j.result || j.error));
    assert.match(answer.error?.message ?? '', re, r.text());
    const ok = await post(gw, rpc('tools/call', { name: 'fine', arguments: {} }), { url: s.url, sid: s.sid, headers: s.headers });
    await ok.done(scaled(10000));
    assert.ok(ok.events().some((e) => e.json?.result), 'the session serves on');
  });
}

test('a request the stateless child sends (it must not) is dropped, never passed to the client', async () => {
  const s = await rawSession('/scripted', { roots: {} });
  const r = await post(gw, rpc('tools/call', { name: 'asks_directly', arguments: {} }), { url: s.url, sid: s.sid, headers: s.headers });
  await r.done(scaled(10000));
  const msgs = r.events().map((e) => e.json).filter(Boolean);
  assert.ok(msgs.some((j) => j.result), r.text());
  assert.ok(!msgs.some((j) => j.method === 'roots/list'), 'the child\'s request did not reach the client');
  await gw.waitLog(/a request from a stateless server \(dropped\)/);
});

test('the 2024-11-05 HTTP+SSE transport in front of a stateless child', async () => {
  const { SSEClientTransport } = await import('@modelcontextprotocol/sdk/client/sse.js');
  const client = new Client({ name: 'modern-child-sse', version: '1.0.0' }, { capabilities: {} });
  const transport = new SSEClientTransport(new URL(`${gw.url}/sse`));
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion().name, 'mcp-gateway-stateless-fixture');
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'old transport' } })), 'old transport');
  } finally {
    await client.close();
  }
});

test('resources/subscribe through the listen: updates reach the client, unsubscribe and DELETE end the listen', async () => {
  const { client, transport } = await connect(`${gw.base}/subscriber`);
  const updated = [];
  const metas = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); metas.push(n.params._meta ?? null); });
  const listenLog = () => (fs.existsSync(subscriber.log) ? fs.readFileSync(subscriber.log, 'utf8') : '');
  try {
    assert.equal(client.getServerCapabilities().resources.subscribe, true);
    await client.subscribeResource({ uri: 'test://a' });
    await waitFor(() => /LISTEN \d+ \["test:\/\/a"\]/.test(listenLog()), scaled(5000), 'a listen for test://a');
    await client.callTool({ name: 'touch', arguments: { uri: 'test://a' } });
    await waitFor(() => updated.includes('test://a'), scaled(10000), 'notifications/resources/updated');
    await client.subscribeResource({ uri: 'test://b' });
    await waitFor(() => /LISTEN \d+ \["test:\/\/a","test:\/\/b"\]/.test(listenLog()), scaled(5000), 'a listen for both');
    assert.match(listenLog(), /END \d+/, 'the first listen ended');
    await client.unsubscribeResource({ uri: 'test://a' });
    await waitFor(() => /LISTEN \d+ \["test:\/\/b"\]/.test(listenLog()), scaled(5000), 'a listen for test://b alone');
    await client.callTool({ name: 'touch', arguments: { uri: 'test://a' } });
    await client.callTool({ name: 'touch', arguments: { uri: 'test://b' } });
    await waitFor(() => updated.includes('test://b'), scaled(10000), 'the update of test://b');
    assert.deepEqual(updated, ['test://a', 'test://b'], 'no update of test://a after its unsubscribe');
    assert.deepEqual(metas, [null, null], 'updates without the listen\'s subscriptionId (the gateway\'s)');
    const ends = (listenLog().match(/END/g) ?? []).length;
    await transport.terminateSession();
    await waitFor(() => (listenLog().match(/END/g) ?? []).length > ends, scaled(5000), 'the last listen ended with the session');
  } finally {
    await client.close();
  }
});
