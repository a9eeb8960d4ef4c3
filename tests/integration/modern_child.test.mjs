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

import { post, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
  CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema, ToolListChangedNotificationSchema,
} = await import('@modelcontextprotocol/sdk/types.js');

const ROOT = process.env.GW_SOURCE_ROOT ?? '';
const STATELESS_JS = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
const node = process.execPath;

let gw;
let dir;
let cancelLog;

/** Writes a stdio child that answers server/discover with `discover` (a result or an error). */
function hostileChild(name, answer) {
  const file = path.join(dir, `${name}.mjs`);
  fs.writeFileSync(file, `
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  const out = m.method === 'server/discover' ? { jsonrpc: '2.0', id: m.id, ...${JSON.stringify(answer)} }
    : { jsonrpc: '2.0', id: m.id, error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2026-07-28'] } } };
  process.stdout.write(JSON.stringify(out) + '\\n');
});
rl.on('close', () => process.exit(0));
`);
  return `${node} ${file}`;
}

before(async () => {
  dir = tmpdir('mcpgw-modern-');
  cancelLog = path.join(dir, 'cancel.log');
  gw = await startGateway({
    dir,
    gateway: { disconnect_grace_ms: 0 },
    servers: [
      { name: 'stateless', path: '/mcp', command: `${node} ${STATELESS_JS}`, env: `STATELESS_CANCEL_LOG=${cancelLog}` },
      { name: 'direct', path: '/direct', command: `${node} ${STATELESS_JS}`, extra: 'era = stateless' },
      { name: 'nolist', path: '/nolist', command: hostileChild('nolist', { result: { supportedVersions: ['2099-01-01'], capabilities: {} } }) },
      { name: 'noresult', path: '/noresult', command: hostileChild('noresult', { result: 'not an object' }) },
      { name: 'legacyerr', path: '/legacyerr', command: hostileChild('legacyerr', { error: { code: -32601, message: 'Method not found' } }) },
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
    { capabilities: { sampling: {}, elicitation: { form: {} } } });
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
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }
});

const cancels = () => (fs.existsSync(cancelLog) ? fs.readFileSync(cancelLog, 'utf8').split('\n').filter((l) => l.startsWith('CANCELLED')) : []);

test("the client's cancel reaches the stateless child as notifications/cancelled", async () => {
  const { client, transport } = await connect(gw.url);
  try {
    const before = cancels().length;
    const ac = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: { ms: 60000 } }, undefined, { signal: ac.signal });
    await gw.waitLog(/request tools\/call forwarded as child id/);
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
    const headers = { 'Mcp-Session-Id': transport.sessionId, 'MCP-Protocol-Version': transport.protocolVersion ?? '2025-11-25' };
    const res = await post(gw, rpc('tools/call', { name: 'slow', arguments: { ms: 60000 } }), { headers });
    assert.equal(res.status, 200);
    await waitFor(() => (gw.logs().match(/request tools\/call forwarded as child id/g) ?? []).length >= 1, scaled(5000), 'the call to reach the child');
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
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed.push(1); });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  try {
    assert.equal(client.getServerCapabilities().tools.listChanged, true);
    await gw.waitLog(/subscriptions\/listen sent as child id/);
    const r = await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    assert.match(textOf(r), /test_toggled_tool added/);
    await waitFor(() => changed.length > 0, scaled(10000), 'notifications/tools/list_changed');
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
