// SPDX-License-Identifier: MIT
// subscriptions/listen (MCP 2026-07-28) through the gateway.
// A legacy pool (tests/fixtures/listen_server.mjs, children initialized by the gateway) gets
// listen from the gateway itself (src/pool/pool_listen.c): the ack first, with the agreed subset (what
// was asked, as far as the child's initialize declared it) and _meta subscriptionId = the listen
// request's id; then the list changes and resource updates its children report, each carrying that
// id; the URIs subscribed at one child (resources/subscribe, reference-counted, unsubscribed when
// the last listener leaves, moved when the child ends); the graceful end at shutdown.
// A stateless pool (tests/fixtures/stateless_server.mjs) gets listen forwarded to a child, the child's
// subscription id mapped back to the client's. A pool the operator restarts, or a reload that
// changes its server retires, ends every listen (legacy or stateless) with an error asking to listen
// again, and its old children stop (by pid) and the pool goes (/admin/inflight, /metrics); a
// reload that leaves the server unchanged keeps its listeners.
// Proved with the official v2 client, @modelcontextprotocol/client 2.4.0 (Client.listen():
// McpSubscription {honoredFilter, close(), closed}; notifications reach the client-wide
// setNotificationHandler handlers, so a wire tap on its fetch shows which stream carried each),
// and in raw HTTP where exact bytes matter (the ack's subset, bad params, the end at shutdown).
// "Exactly once" and "nothing more" are proved with fences, never with sleeps: a later event on
// the same stream (SSE keeps order) or on another listener's stream must arrive first.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { ACCEPT_BOTH, metricSamples, reaped, request, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

// Resolved from tests/node_modules (this file lives in tests/integration); a missing package throws.
const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
const CLIENT_PKG = JSON.parse(fs.readFileSync(new URL('../node_modules/@modelcontextprotocol/client/package.json', import.meta.url), 'utf8'));
assert.equal(CLIENT_PKG.version, '2.4.0', 'the pinned v2 client (tests/package-lock.json)');
const SDK_PKG = JSON.parse(fs.readFileSync(new URL('../node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'));
assert.equal(SDK_PKG.version, '1.32.2', 'the pinned v1 SDK the listen fixture is built on');

const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
const FIXTURE = path.join(ROOT, 'tests/fixtures/listen_server.mjs');
const STATELESS_FIXTURE = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
for (const f of [FIXTURE, STATELESS_FIXTURE]) if (!fs.existsSync(f)) throw new Error(`${f} missing`);

const V = '2026-07-28';
const META = 'io.modelcontextprotocol/';
const SUB_ID = `${META}subscriptionId`;
const ADMIN_TOKEN = 'stateless-listen-admin-token-0123456789abcdef';
const PIN = { mode: { pin: V } };
const T = scaled(10000); // deadline of one wait
// A stateless request's response headers wait up to heartbeat_s for its answer; anything pushed
// before (the listen's ack) must start the stream at once. The gateways here set heartbeat_s far
// above ACK_MS, so an ack that waits for the heartbeat fails the deadline instead of passing late.
const HEARTBEAT_S = 60;
const ACK_MS = scaled(5000);

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// ---- Gateways ------------------------------------------------------------------------------

/** A [server:…] running listen_server.mjs; its subscribe log at `log`. */
function listenServer(log, { name = 'listen', path: p = '/mcp', caps, extra = 'pool_max_children = 1' } = {}) {
  const env = [`LISTEN_FIXTURE_LOG=${log}`];
  if (caps) env.push(`LISTEN_FIXTURE_CAPS=${caps}`);
  return { name, path: p, command: `${process.execPath} ${FIXTURE}`, env: env.join(' '), extra };
}

/**
 * Runs fn(gw, dir) against a gateway with opts.servers(dir); always stops it: a clean exit is
 * asserted when fn passed, and a failure carries the gateway's log tail.
 */
async function withGw(opts, fn) {
  const dir = tmpdir('mcpgw-listen-');
  const gw = await startGateway({ ...opts, servers: opts.servers(dir), gateway: { admin_token: ADMIN_TOKEN, heartbeat_s: HEARTBEAT_S, ...(opts.gateway || {}) } });
  try {
    await fn(gw, dir);
  } catch (e) {
    await gw.stop({ expect: null }).catch(() => {});
    if (e && typeof e === 'object') {
      try { e.message = `${e.message}\n--- gateway log (tail) ---\n${gw.logs().split('\n').slice(-60).join('\n')}`; } catch { /* read-only */ }
    }
    throw e;
  }
  if (gw.proc.exitCode === null && gw.proc.signalCode === null) await gw.stop();
}

/** The fixture's subscribe log: [{pid, method, uri}], complete lines only. */
function subLog(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => JSON.parse(l));
}
const subCount = (file, method, uri, pid) => subLog(file).filter((e) => e.method === method && e.uri === uri && (pid === undefined || e.pid === pid)).length;

/** The /admin/inflight entry of pool `name`. */
async function adminPool(gw, name) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await r.done();
  assert.equal(r.status, 200, text);
  const pool = JSON.parse(text).pools.find((p) => p.server === name);
  assert.ok(pool, `pool ${name} in ${text}`);
  return pool;
}

/** Pids of the pool children `name` has started, from the gateway's log. */
const poolPids = (gw, name) => [...gw.logs().matchAll(new RegExp(`session=pool:${esc(name)}#\\d+ pool child started: pid (\\d+)`, 'g'))].map((m) => Number(m[1]));

// ---- Raw HTTP ------------------------------------------------------------------------------

let nextId = 1;
/** A stateless request with the _meta envelope. */
function mreq(method, params = {}, id = `raw-${nextId++}`) {
  const _meta = { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {}, [`${META}clientInfo`]: { name: 'stateless-listen-it', version: '1' } };
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta } };
}

/** POSTs a stateless request with its mirrored headers to `p` (a path of gw). */
function mpost(gw, msg, p = '/mcp') {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': msg.method };
  if (msg.method === 'tools/call') h['Mcp-Name'] = msg.params.name;
  return request(`${gw.base}${p}`, { method: 'POST', headers: h, body: msg });
}

/**
 * One stateless request answered: the pool's child has started. A forwarded listen waits for its
 * child like any request, and a node child's start on a loaded runner is not what an ack's bound
 * is about.
 */
async function warm(gw) {
  const r = await mpost(gw, mreq('tools/list', {}, `warm-${nextId++}`));
  const text = await r.done(scaled(30000));
  assert.equal(r.status, 200, text);
}

/** Opens a listen in raw HTTP; resolves with the live response once the ack has arrived (within ACK_MS). */
async function rawListen(gw, notifications, { id = `L-${nextId++}`, p = '/mcp' } = {}) {
  const t0 = Date.now();
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ACK_MS); });
  const pending = mpost(gw, mreq('subscriptions/listen', { notifications }, id), p);
  const r = await Promise.race([pending, late]);
  clearTimeout(timer);
  if (r === null) {
    pending.then((x) => x.drop(), () => {});
    assert.fail(`listen ${id}: no response headers within ${ACK_MS} ms (heartbeat_s = ${HEARTBEAT_S}): the ack must start the stream at once`);
  }
  assert.equal(r.status, 200, `listen ${id}: HTTP ${r.status}`);
  assert.match(r.headers['content-type'] ?? '', /^text\/event-stream\b/, `listen ${id}: an SSE stream`);
  await waitFor(() => r.completeEvents().length > 0 || r.ended, Math.max(ACK_MS - (Date.now() - t0), 1), `the ack of listen ${id} within ${ACK_MS} ms`);
  const first = r.completeEvents()[0]?.json;
  assert.equal(first?.method, 'notifications/subscriptions/acknowledged', `listen ${id}: the first message is the ack: ${r.text()}`);
  assert.deepEqual(first.params._meta, { [SUB_ID]: id }, `listen ${id}: the ack names the listen request's id`);
  r.id = id;
  r.ack = first.params.notifications;
  /** The JSON-RPC messages received whole so far. */
  r.msgs = () => r.completeEvents().map((e) => e.json);
  return r;
}

/** The answer (result or error) to a tools/call, as one JSON object or in an SSE stream. */
async function rawAnswer(gw, name, args = {}, p = '/mcp') {
  const msg = mreq('tools/call', { name, arguments: args });
  const r = await mpost(gw, msg, p);
  const text = await r.done(T);
  const body = r.headers['content-type']?.startsWith('text/event-stream') ? r.events().map((e) => e.json).find((j) => j && j.id === msg.id) : JSON.parse(text);
  assert.ok(body, `${name}: an answer: HTTP ${r.status} ${text}`);
  return { status: r.status, body, text };
}

/** Calls a tool of the pool at `p`; returns the result's text (asserting there is a result). */
async function rawCall(gw, name, args = {}, p = '/mcp') {
  const { status, body, text } = await rawAnswer(gw, name, args, p);
  assert.equal(status, 200, `${name}: HTTP ${status} ${text}`);
  assert.ok(body.result, `${name}: a result: ${text}`);
  return textOf(body.result);
}

/** Notifications on a raw listen stream with this method (and uri), after the ack. */
const rawGot = (l, method, uri) => l.msgs().slice(1).filter((m) => m.method === method && (uri === undefined || m.params?.uri === uri));

// ---- The v2 client -------------------------------------------------------------------------

/** Parses complete SSE events out of buf; returns [messages, rest]. */
function sseTake(buf) {
  const out = [];
  const blocks = buf.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    if (data) { try { out.push(JSON.parse(data)); } catch { out.push({ unparsed: data }); } }
  }
  return [out, rest];
}

/**
 * A fetch for the transport that taps every response as it streams: each exchange is
 * {method, msg (the JSON body sent), status, type, messages (JSON-RPC messages received so far),
 * ended}. The body is teed: the transport reads one branch, the tap the other.
 */
function wire() {
  const log = [];
  const fetchImpl = async (url, init = {}) => {
    const e = { method: init.method ?? 'GET', msg: undefined, status: undefined, type: '', messages: [], ended: false };
    if (typeof init.body === 'string') { try { e.msg = JSON.parse(init.body); } catch { /* not JSON */ } }
    log.push(e);
    const res = await fetch(url, init);
    e.status = res.status;
    e.type = res.headers.get('content-type') ?? '';
    if (!res.body) { e.ended = true; return res; }
    const [mine, theirs] = res.body.tee();
    (async () => {
      const reader = mine.getReader();
      const dec = new TextDecoder();
      let buf = '';
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          if (e.type.startsWith('text/event-stream')) {
            const [msgs, rest] = sseTake(buf);
            e.messages.push(...msgs);
            buf = rest;
          }
        }
        if (!e.type.startsWith('text/event-stream') && buf.trim()) { try { e.messages.push(JSON.parse(buf)); } catch { /* not JSON */ } }
      } catch { e.aborted = true; } finally { e.ended = true; }
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return {
    log,
    fetch: fetchImpl,
    /** The exchange that carried the listen request with this id. */
    listen: (id) => log.find((x) => x.msg?.method === 'subscriptions/listen' && x.msg.id === id),
    /** Every message received, on any stream, with this method (and uri). */
    all: (method, uri) => log.flatMap((x) => x.messages.filter((m) => m.method === method && (uri === undefined || m.params?.uri === uri))),
  };
}

/**
 * A v2 client in 2026-07-28 mode on gw, with counting handlers: got.tools, got.prompts,
 * got.resources (list changes), got.updated (URIs of resource updates, in arrival order).
 */
async function v2(gw, name) {
  const w = wire();
  const client = new Client({ name, version: '1.0.0' }, { versionNegotiation: PIN });
  const got = { tools: 0, prompts: 0, resources: 0, updated: [] };
  client.setNotificationHandler('notifications/tools/list_changed', () => { got.tools++; });
  client.setNotificationHandler('notifications/prompts/list_changed', () => { got.prompts++; });
  client.setNotificationHandler('notifications/resources/list_changed', () => { got.resources++; });
  client.setNotificationHandler('notifications/resources/updated', (n) => { got.updated.push(n.params.uri); });
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { fetch: w.fetch }));
  /** Opens a listen; returns the McpSubscription with .id (the listen request's id) and .wire. */
  const listen = async (filter) => {
    const before = new Set(w.log);
    // timeout: how long listen() waits for the ack (else it rejects, RequestTimeout).
    const sub = await client.listen(filter, { timeout: ACK_MS });
    const ex = w.log.find((x) => !before.has(x) && x.msg?.method === 'subscriptions/listen');
    assert.ok(ex, 'the listen request on the wire');
    return { ...sub, id: ex.msg.id, wire: ex };
  };
  const call = async (tool, args = {}) => textOf(await client.callTool({ name: tool, arguments: args }));
  return { client, wire: w, got, listen, call, close: () => client.close().catch(() => {}) };
}

/** Asserts the listen stream's messages: the ack, then exactly `expect` ([method, uri?]), each with the listen's id. */
function assertStream(sub, expect, what) {
  const msgs = sub.wire.messages;
  assert.equal(sub.wire.status, 200, `${what}: HTTP status of the listen`);
  assert.match(sub.wire.type, /^text\/event-stream\b/, `${what}: the listen is an SSE stream`);
  assert.equal(msgs[0]?.method, 'notifications/subscriptions/acknowledged', `${what}: the ack first: ${JSON.stringify(msgs)}`);
  const rest = msgs.slice(1).map((m) => [m.method, ...(m.params?.uri !== undefined ? [m.params.uri] : [])]);
  assert.deepEqual(rest, expect, `${what}: what the listen stream carried after the ack`);
  for (const m of msgs) assert.equal(m.params?._meta?.[SUB_ID], sub.id, `${what}: ${m.method} carries the listen's subscriptionId: ${JSON.stringify(m)}`);
}

// ---- Tests: the v2 client against a legacy pool ---------------------------------------------

test('v2 client, legacy pool of one child: a list change and a resource update arrive once, on the listen stream, with its subscriptionId; nothing after close()', { timeout: scaled(90000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw, dir) => {
    const log = path.join(dir, 'subs.log');
    const a = await v2(gw, 'listen-a');
    const b = await v2(gw, 'listen-b');
    try {
      const sub = await a.listen({ toolsListChanged: true, resourceSubscriptions: ['test://a', 'test://b'] });
      assert.equal(typeof sub.id, 'string', 'the v2 client gives listen a string id');
      assert.deepEqual(sub.honoredFilter, { toolsListChanged: true, resourceSubscriptions: ['test://a', 'test://b'] }, 'honoredFilter: the ack\'s agreed subset');
      await waitFor(() => subCount(log, 'resources/subscribe', 'test://b') === 1, T, 'test://b subscribed at the child');
      assert.equal(subCount(log, 'resources/subscribe', 'test://a'), 1, 'test://a subscribed at the child once');

      assert.equal(await a.call('change_tools'), 'tools changed');
      assert.equal(await a.call('update', { uri: 'test://a' }), 'updated');
      // Fence: test://b's update comes after both on the same stream.
      assert.equal(await b.call('update', { uri: 'test://b' }), 'updated');
      await waitFor(() => a.got.updated.includes('test://b'), T, 'the fence (test://b updated) at the listener');
      assert.equal(a.got.tools, 1, 'the tools list change dispatched once');
      assert.deepEqual(a.got.updated, ['test://a', 'test://b'], 'each resource update dispatched once');
      assertStream(sub, [['notifications/tools/list_changed'], ['notifications/resources/updated', 'test://a'], ['notifications/resources/updated', 'test://b']], 'listener a');
      // On no other stream: the tool calls' answers carried their results only.
      assert.equal(a.wire.all('notifications/tools/list_changed').length, 1, 'the list change on one stream of client a');
      assert.equal(a.wire.all('notifications/resources/updated', 'test://a').length, 1, 'the update on one stream of client a');
      assert.deepEqual([...b.wire.all('notifications/tools/list_changed'), ...b.wire.all('notifications/resources/updated')], [], 'client b (no listen) got none');
      assert.deepEqual([b.got.tools, b.got.updated], [0, []], 'client b (no listen) dispatched none');

      let pool = await adminPool(gw, 'listen');
      assert.deepEqual([pool.listeners, pool.resource_subscriptions], [1, 2], '/admin/inflight: one listener, two URIs');

      await sub.close();
      assert.equal(await sub.closed, 'local', 'closed: local');
      // The gateway forgets the listener: the last one to name each URI unsubscribes it.
      await waitFor(() => subCount(log, 'resources/unsubscribe', 'test://a') === 1 && subCount(log, 'resources/unsubscribe', 'test://b') === 1, T, 'both URIs unsubscribed at the child');
      pool = await adminPool(gw, 'listen');
      assert.deepEqual([pool.listeners, pool.resource_subscriptions], [0, 0], '/admin/inflight after close()');
      const cancel = a.wire.log.find((x) => x.msg?.method === 'notifications/cancelled' && x.msg.params?.requestId === sub.id);
      assert.ok(cancel, 'close() also sends notifications/cancelled for the listen id');
      await waitFor(() => cancel.status !== undefined, T, 'the answer to notifications/cancelled');
      assert.equal(cancel.status, 202, 'a 2026-07-28 notification is answered 202');

      // Nothing more: a later list change reaches a new listener (the fence) but not the closed one.
      const sub2 = await b.listen({ toolsListChanged: true });
      assert.equal(await b.call('change_tools'), 'tools changed');
      await waitFor(() => b.got.tools === 1, T, 'the list change at the new listener');
      assert.equal(await a.call('update', { uri: 'test://a' }), 'not subscribed', 'test://a is no longer subscribed at the child');
      assert.equal(a.got.tools, 1, 'the closed listener got no later list change');
      assert.deepEqual(a.got.updated, ['test://a', 'test://b'], 'the closed listener got no later update');
      assert.equal(sub.wire.messages.length, 4, 'the closed listen stream carried nothing more');
      assert.ok(sub.wire.ended, 'the closed listen stream has ended');
      assertStream(sub2, [['notifications/tools/list_changed']], 'listener b');
      await sub2.close();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

test('v2 client: two listeners naming different URIs each get only their own URI\'s updates', { timeout: scaled(90000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw, dir) => {
    const log = path.join(dir, 'subs.log');
    const a = await v2(gw, 'listen-a');
    const b = await v2(gw, 'listen-b');
    try {
      const sa = await a.listen({ resourceSubscriptions: ['test://a'] });
      const sb = await b.listen({ resourceSubscriptions: ['test://b'] });
      // Each client's first listen: both carry the same id, kept apart by the gateway all the same.
      assert.equal(sa.id, sb.id, 'two v2 clients, the same listen id');
      assert.deepEqual(sa.honoredFilter, { resourceSubscriptions: ['test://a'] });
      assert.deepEqual(sb.honoredFilter, { resourceSubscriptions: ['test://b'] });
      await waitFor(() => subCount(log, 'resources/subscribe', 'test://a') === 1 && subCount(log, 'resources/subscribe', 'test://b') === 1, T, 'both URIs subscribed');

      assert.equal(await a.call('update', { uri: 'test://b' }), 'updated');
      assert.equal(await a.call('update', { uri: 'test://a' }), 'updated');
      assert.equal(await b.call('update', { uri: 'test://c' }), 'not subscribed', 'a URI nobody named is not subscribed at the child');
      // Fences: a second update of each listener's own URI, after the other's.
      assert.equal(await b.call('update', { uri: 'test://b' }), 'updated');
      assert.equal(await b.call('update', { uri: 'test://a' }), 'updated');
      await waitFor(() => a.got.updated.length >= 2 && b.got.updated.length >= 2, T, 'two updates at each listener');
      assert.deepEqual(a.got.updated, ['test://a', 'test://a'], 'listener a: test://a only, each once');
      assert.deepEqual(b.got.updated, ['test://b', 'test://b'], 'listener b: test://b only, each once');
      assertStream(sa, [['notifications/resources/updated', 'test://a'], ['notifications/resources/updated', 'test://a']], 'listener a');
      assertStream(sb, [['notifications/resources/updated', 'test://b'], ['notifications/resources/updated', 'test://b']], 'listener b');
      await sa.close();
      await sb.close();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

test('v2 client: a listener that asked only for tools gets no prompts change; one that asked for prompts does', { timeout: scaled(90000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw) => {
    const a = await v2(gw, 'listen-tools');
    const b = await v2(gw, 'listen-both');
    try {
      const sa = await a.listen({ toolsListChanged: true });
      const sb = await b.listen({ toolsListChanged: true, promptsListChanged: true });
      assert.deepEqual(sa.honoredFilter, { toolsListChanged: true });
      assert.deepEqual(sb.honoredFilter, { toolsListChanged: true, promptsListChanged: true });
      assert.equal(await a.call('change_prompts'), 'prompts changed');
      assert.equal(await a.call('change_resources'), 'resources changed');
      assert.equal(await a.call('change_tools'), 'tools changed'); // the fence
      await waitFor(() => a.got.tools === 1 && b.got.tools === 1, T, 'the tools change at both listeners');
      assert.deepEqual([a.got.tools, a.got.prompts, a.got.resources], [1, 0, 0], 'tools only');
      assert.deepEqual([b.got.tools, b.got.prompts, b.got.resources], [1, 1, 0], 'tools and prompts, each once; no resources change (not asked)');
      assertStream(sa, [['notifications/tools/list_changed']], 'the tools-only listener');
      assertStream(sb, [['notifications/prompts/list_changed'], ['notifications/tools/list_changed']], 'the tools-and-prompts listener');
      await sa.close();
      await sb.close();
    } finally {
      await a.close();
      await b.close();
    }
  });
});

// ---- Tests: raw HTTP ------------------------------------------------------------------------

test('raw: the ack starts the listen stream at once, whether the pool\'s child is starting or ready', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw) => {
    // The first request of a cold pool waits for its child; the listen then leaves the queue.
    const cold = await rawListen(gw, { toolsListChanged: true }, { id: 'cold' });
    assert.match(gw.logs(), /pool listen: subscriptions\/listen waits for a child to start/);
    // The child is ready: the listen is served in the request's own turn, before its stream is
    // handed to HTTP. rawListen fails if the headers wait for heartbeat_s (60 s here).
    const t0 = Date.now();
    const warm = await rawListen(gw, { toolsListChanged: true }, { id: 'warm' });
    const ms = Date.now() - t0;
    assert.ok(ms < ACK_MS, `the ack of a listen on a ready pool after ${ms} ms`);
    assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
    await waitFor(() => rawGot(cold, 'notifications/tools/list_changed').length === 1 && rawGot(warm, 'notifications/tools/list_changed').length === 1, T, 'the change at both');
    cold.drop();
    warm.drop();
  });
});

test('raw: the ack agrees to what was asked as far as the server declared it; what was left out never arrives', { timeout: scaled(90000) }, async () => {
  await withGw({
    servers: (dir) => [
      listenServer(path.join(dir, 'full.log'), { name: 'full', path: '/full' }),
      listenServer(path.join(dir, 'nosub.log'), { name: 'nosub', path: '/nosub', caps: 'tools,prompts,resources' }),
      listenServer(path.join(dir, 'narrow.log'), { name: 'narrow', path: '/narrow', caps: 'tools,subscribe' }),
    ],
  }, async (gw, dir) => {
    const all = { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true, resourceSubscriptions: ['test://a', 'test://b'] };
    const full = await rawListen(gw, all, { p: '/full' });
    assert.deepEqual(full.ack, all, 'a server that declared everything: all of it agreed');
    const numeric = await rawListen(gw, { toolsListChanged: false, promptsListChanged: true }, { p: '/full', id: 7 });
    assert.deepEqual(numeric.ack, { promptsListChanged: true }, 'false is not asking; a numeric id is kept as a number');
    const none = await rawListen(gw, {}, { p: '/full' });
    assert.deepEqual(none.ack, {}, 'nothing asked, nothing agreed');

    const nosub = await rawListen(gw, all, { p: '/nosub' });
    assert.deepEqual(nosub.ack, { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true }, 'no resources.subscribe declared: resourceSubscriptions left out');
    const narrow = await rawListen(gw, all, { p: '/narrow' });
    assert.deepEqual(narrow.ack, { toolsListChanged: true, resourceSubscriptions: ['test://a', 'test://b'] }, 'only tools.listChanged and resources.subscribe declared');

    // What was left out never arrives: the servers report it anyway, then a fence that was agreed.
    await waitFor(() => subCount(path.join(dir, 'narrow.log'), 'resources/subscribe', 'test://b') === 1, T, 'test://b subscribed at /narrow');
    assert.equal(await rawCall(gw, 'change_prompts', {}, '/narrow'), 'prompts changed');
    assert.equal(await rawCall(gw, 'change_resources', {}, '/narrow'), 'resources changed');
    assert.equal(await rawCall(gw, 'update', { uri: 'test://a' }, '/narrow'), 'updated');
    assert.equal(await rawCall(gw, 'change_tools', {}, '/narrow'), 'tools changed');
    await waitFor(() => rawGot(narrow, 'notifications/tools/list_changed').length === 1, T, 'the fence at /narrow');
    assert.deepEqual(narrow.msgs().slice(1).map((m) => [m.method, m.params]), [
      ['notifications/resources/updated', { uri: 'test://a', _meta: { [SUB_ID]: narrow.id } }],
      ['notifications/tools/list_changed', { _meta: { [SUB_ID]: narrow.id } }],
    ], '/narrow: only what was agreed, each once, with the subscriptionId');

    // /nosub: the URIs were never subscribed at its child.
    assert.equal(await rawCall(gw, 'change_tools', {}, '/nosub'), 'tools changed');
    await waitFor(() => rawGot(nosub, 'notifications/tools/list_changed').length === 1, T, 'the list change at /nosub');
    assert.equal(await rawCall(gw, 'update', { uri: 'test://a' }, '/nosub'), 'not subscribed', '/nosub: no resources/subscribe reached the child');
    assert.deepEqual(subLog(path.join(dir, 'nosub.log')), [], '/nosub: the child was sent no resources/subscribe');
    assert.equal((await adminPool(gw, 'nosub')).resource_subscriptions, 0, '/nosub: no resource subscriptions');

    // The numeric id on /full: a prompts change carries it as a number; the empty listener gets nothing.
    assert.equal(await rawCall(gw, 'change_prompts', {}, '/full'), 'prompts changed');
    await waitFor(() => rawGot(numeric, 'notifications/prompts/list_changed').length === 1 && rawGot(full, 'notifications/prompts/list_changed').length === 1, T, 'the prompts change at /full');
    assert.deepEqual(rawGot(numeric, 'notifications/prompts/list_changed')[0].params, { _meta: { [SUB_ID]: 7 } });
    assert.deepEqual(none.msgs().slice(1), [], 'the listener that asked for nothing got nothing');
    for (const l of [full, numeric, none, nosub, narrow]) l.drop();
  });
});

test('raw: two listeners of one URI: resources/subscribe reaches one child once; resources/unsubscribe only after both left', { timeout: scaled(90000) }, async () => {
  await withGw({ servers: (dir) => [{ ...listenServer(path.join(dir, 'subs.log'), { extra: 'pool_max_children = 2\npool_warm_children = 2' }) }] }, async (gw, dir) => {
    const log = path.join(dir, 'subs.log');
    await waitFor(() => (gw.logs().match(/session=pool:listen#\d+ pool child ready/g) ?? []).length === 2, T, 'two warm children');
    const pids = poolPids(gw, 'listen');
    assert.equal(pids.length, 2, 'two pool children');

    const l1 = await rawListen(gw, { resourceSubscriptions: ['test://a'] });
    const l2 = await rawListen(gw, { resourceSubscriptions: ['test://a', 'test://b'] });
    await waitFor(() => subCount(log, 'resources/subscribe', 'test://b') === 1, T, 'test://b subscribed');
    let pool = await adminPool(gw, 'listen');
    assert.deepEqual([pool.listeners, pool.resource_subscriptions], [2, 2], '/admin/inflight: two listeners, two URIs');

    // Fence on both children: two calls in flight at once go to different children (least busy
    // first); after both answers, anything the gateway wrote to either child before them is logged.
    const fence = async () => {
      const got = await Promise.all([rawCall(gw, 'wait', { ms: scaled(1000) }), rawCall(gw, 'wait', { ms: scaled(1000) })]);
      assert.deepEqual(new Set(got.map(Number)), new Set(pids), `the fence reached both children: ${got}`);
    };
    await fence();
    const subs = subLog(log).filter((e) => e.method === 'resources/subscribe');
    assert.deepEqual(subs.map((e) => e.uri).sort(), ['test://a', 'test://b'], 'each URI subscribed once, for two listeners of test://a');
    assert.ok(pids.includes(subs.find((e) => e.uri === 'test://a').pid), 'at a child of the pool');

    l1.drop();
    await waitFor(async () => (await adminPool(gw, 'listen')).listeners === 1, T, 'the first listener forgotten');
    await fence();
    pool = await adminPool(gw, 'listen');
    assert.deepEqual([pool.listeners, pool.resource_subscriptions], [1, 2], 'test://a still named by the second listener');
    assert.deepEqual(subLog(log).filter((e) => e.method === 'resources/unsubscribe'), [], 'no resources/unsubscribe while a listener names the URI');

    l2.drop();
    await waitFor(() => subCount(log, 'resources/unsubscribe', 'test://a') === 1 && subCount(log, 'resources/unsubscribe', 'test://b') === 1, T, 'both URIs unsubscribed after the last listener left');
    const sub = (uri) => subLog(log).find((e) => e.method === 'resources/subscribe' && e.uri === uri).pid;
    for (const uri of ['test://a', 'test://b']) assert.equal(subCount(log, 'resources/unsubscribe', uri, sub(uri)), 1, `${uri} unsubscribed at the child that held it`);
    pool = await adminPool(gw, 'listen');
    assert.deepEqual([pool.listeners, pool.resource_subscriptions], [0, 0], '/admin/inflight at the end');
  });
});

test('raw: bad params are refused 400 -32602 with the request\'s id; nothing reaches the child', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw, dir) => {
    const cases = [
      ['no notifications', {}],
      ['notifications null', { notifications: null }],
      ['notifications an array', { notifications: [] }],
      ['notifications a string', { notifications: 'tools' }],
      ['resourceSubscriptions not an array', { notifications: { resourceSubscriptions: 'test://a' } }],
      ['a URI not a string', { notifications: { toolsListChanged: true, resourceSubscriptions: ['test://a', 5] } }],
      ['an empty URI', { notifications: { resourceSubscriptions: [''] } }],
      ['257 URIs', { notifications: { resourceSubscriptions: Array.from({ length: 257 }, (_, i) => `test://many/${i}`) } }],
      ['a URI of 2049 bytes', { notifications: { resourceSubscriptions: [`test://${'x'.repeat(2049 - 7)}`] } }],
    ];
    for (const [i, [what, params]] of cases.entries()) {
      const id = i % 2 ? `bad-${i}` : i + 1; // numeric and string ids
      const r = await mpost(gw, mreq('subscriptions/listen', params, id));
      const text = await r.done(T);
      assert.equal(r.status, 400, `${what}: HTTP ${r.status} ${text}`);
      assert.match(r.headers['content-type'] ?? '', /^application\/json\b/, `${what}: one JSON object`);
      const body = JSON.parse(text);
      assert.equal(body.error?.code, -32602, `${what}: ${text}`);
      assert.deepEqual(body.id, id, `${what}: the request's id`);
    }
    // At the limits: 256 URIs of 2048 bytes each is served.
    const ok = await rawListen(gw, { resourceSubscriptions: Array.from({ length: 256 }, (_, i) => `test://${String(i).padStart(2048 - 7, '0')}`) });
    assert.equal(ok.ack.resourceSubscriptions.length, 256);
    const pool = await adminPool(gw, 'listen');
    assert.deepEqual([pool.listeners, pool.resource_subscriptions], [1, 256], 'only the good listen became a listener');
    await waitFor(() => subLog(path.join(dir, 'subs.log')).length === 256, T, '256 URIs subscribed');
    assert.ok(subLog(path.join(dir, 'subs.log')).every((e) => e.method === 'resources/subscribe' && e.uri.length === 2048), 'only the good listen\'s URIs reached the child');
    ok.drop();
  });
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`${signal}: every listener gets the graceful end (a complete result with its subscriptionId), the gateway exits 0`, { timeout: scaled(60000) }, async () => {
    await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw) => {
      const l1 = await rawListen(gw, { toolsListChanged: true }, { id: `end-${signal}` });
      const l2 = await rawListen(gw, { resourceSubscriptions: ['test://a'] }, { id: 42 });
      const c = await v2(gw, 'listen-shutdown');
      try {
        const sub = await c.listen({ toolsListChanged: true, resourceSubscriptions: ['test://b'] });
        assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
        await waitFor(() => rawGot(l1, 'notifications/tools/list_changed').length === 1 && c.got.tools === 1, T, 'the list change before shutdown');
        await gw.stop(signal); // asserts exit 0
        for (const l of [l1, l2]) {
          await l.done(T);
          const last = l.msgs().at(-1);
          assert.deepEqual(last, { jsonrpc: '2.0', id: l.id, result: { resultType: 'complete', _meta: { [SUB_ID]: l.id } } }, `listen ${l.id}: the graceful end last: ${l.text()}`);
          assert.equal(l.msgs().filter((m) => m.id !== undefined).length, 1, `listen ${l.id}: one result`);
        }
        assert.equal(await sub.closed, 'graceful', 'the v2 client sees the graceful end');
        const end = sub.wire.messages.at(-1);
        assert.deepEqual(end, { jsonrpc: '2.0', id: sub.id, result: { resultType: 'complete', _meta: { [SUB_ID]: sub.id } } });
      } finally {
        await c.close();
      }
    });
  });
}

// ---- Tests: a stateless pool -------------------------------------------------------------------

test('stateless pool: listen is forwarded; the ack and a list change carry the client\'s id; closing the stream cancels it at the child', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: () => [{ name: 'stateless', path: '/mcp', command: `${process.execPath} ${STATELESS_FIXTURE}`, extra: 'pool_max_children = 1' }] }, async (gw) => {
    await warm(gw);
    const l1 = await rawListen(gw, { toolsListChanged: true }, { id: 'stateless-listen' });
    const l2 = await rawListen(gw, { toolsListChanged: true, promptsListChanged: true }, { id: 99 });
    assert.deepEqual(l1.ack, { toolsListChanged: true }, 'the child\'s ack, passed through');
    assert.deepEqual(l2.ack, { toolsListChanged: true, promptsListChanged: true });
    // The requests the child works on (a cancelled one lingers a while as "cancelled").
    const inflight = async () => (await adminPool(gw, 'stateless')).children.flatMap((ch) => ch.inflight.filter((e) => e.state === 'forwarded').map((e) => e.method));
    assert.equal((await inflight()).filter((m) => m === 'subscriptions/listen').length, 2, 'both listens in flight at the child');

    assert.match(await rawCall(gw, 'test_trigger_tool_change'), /test_toggled_tool added/);
    await waitFor(() => rawGot(l1, 'notifications/tools/list_changed').length === 1 && rawGot(l2, 'notifications/tools/list_changed').length === 1, T, 'the list change at both listeners');
    assert.deepEqual(rawGot(l1, 'notifications/tools/list_changed')[0].params._meta[SUB_ID], 'stateless-listen', 'the client\'s string id');
    assert.deepEqual(rawGot(l2, 'notifications/tools/list_changed')[0].params._meta[SUB_ID], 99, 'the client\'s numeric id');

    l1.drop();
    await gw.waitLog(/cancel sent to child: method=subscriptions\/listen\b[^\n]*reason="client disconnected"/, T);
    await waitFor(async () => (await inflight()).filter((m) => m === 'subscriptions/listen').length === 1, T, 'the closed listen leaves the child\'s in-flight table');
    // The other listener goes on.
    assert.match(await rawCall(gw, 'test_trigger_prompt_change'), /test_toggled_prompt added/);
    await waitFor(() => rawGot(l2, 'notifications/prompts/list_changed').length === 1, T, 'the prompts change at the remaining listener');
    assert.equal(rawGot(l2, 'notifications/prompts/list_changed')[0].params._meta[SUB_ID], 99);
    l2.drop();
    await waitFor(async () => (await inflight()).length === 0, T, 'no listen left at the child');
  });
});

/** Every pool of server `name` in /admin/inflight (retired ones included). */
async function adminPools(gw, name) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await r.done();
  assert.equal(r.status, 200, text);
  return JSON.parse(text).pools.filter((p) => p.server === name);
}

/** /metrics as {series: value}. */
async function metricsOf(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await r.done();
  assert.equal(r.status, 200, text);
  return metricSamples(text);
}

// A stateless child's listen is a request in flight at that child, which never ends by itself: a
// pool retired by the operator's restart or by a reload that changed the server must end it (the
// listener gets the error deploy/README.md promises, its stream ends, the child is told), or the
// old child never idles, and the old pool (and after a reload the old configuration) is never freed.
for (const how of ['restart', 'reload']) {
  test(`stateless pool, ${how === 'restart' ? 'POST /admin/servers/NAME/restart' : 'SIGHUP that changes the server'}: an open listen gets an error saying to listen again and its stream ends; the old child is cancelled and stops; the old pool${how === 'reload' ? ' and configuration are' : ' is'} freed`, { timeout: scaled(60000) }, async () => {
    await withGw({ servers: () => [{ name: 'stateless', path: '/mcp', command: `${process.execPath} ${STATELESS_FIXTURE}`, extra: 'era = stateless\npool_max_children = 1' }] }, async (gw) => {
      await warm(gw);
      const l = await rawListen(gw, { toolsListChanged: true }, { id: `stateless-${how}` });
      const [old] = await waitFor(() => poolPids(gw, 'stateless').length === 1 && poolPids(gw, 'stateless'), T, 'the child\'s start line');
      if (how === 'restart') {
        const r = await request(`${gw.base}/admin/servers/stateless/restart`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
        const text = await r.done();
        assert.equal(r.status, 200, text);
        assert.equal(JSON.parse(text).children_replaced, 1);
      } else {
        fs.appendFileSync(gw.conf, 'env = STATELESS_RELOADED=1\n'); // the last section is the server's
        gw.proc.kill('SIGHUP');
        await gw.waitLog(/SIGHUP: configuration reloaded/, T);
      }
      await waitFor(() => l.ended, T, 'the listen stream ends');
      const end = l.msgs().find((m) => m.id === `stateless-${how}`);
      assert.equal(end?.error?.code, -32603, `the listener is told: ${l.text()}`);
      assert.match(end.error.message, how === 'restart' ? /server restarted by the operator: send subscriptions\/listen again/ : /configuration reloaded: send subscriptions\/listen again/);
      await gw.waitLog(how === 'restart' ? /cancel sent to child: method=subscriptions\/listen\b[^\n]*reason="ended by the operator"/ : /cancel sent to child: method=subscriptions\/listen\b[^\n]*reason="configuration reloaded"/, T);
      await waitFor(() => reaped(old), T, `the old child (pid ${old}) stopped and reaped`);
      await waitFor(async () => (await adminPools(gw, 'stateless')).every((p) => !p.retired), T, 'no retired pool left in /admin/inflight');
      await waitFor(async () => (await metricsOf(gw))['mcpgw_pools_retired{server="stateless"}'] === 0, T, 'mcpgw_pools_retired back to 0');
      if (how === 'reload') await gw.waitLog(/configuration of \S+: no session uses it any more/, T);
      const m = await metricsOf(gw);
      assert.equal(m[`mcpgw_cancels_total{server="stateless",direction="to_child",reason="${how === 'restart' ? 'admin' : 'reload'}"}`], 1, 'one cancel counted');
      const again = await rawListen(gw, { toolsListChanged: true }, { id: `after-${how}` });
      assert.match(await rawCall(gw, 'test_trigger_tool_change'), /test_toggled_tool added/);
      await waitFor(() => rawGot(again, 'notifications/tools/list_changed').length === 1, T, 'the change on the new listen');
      again.drop();
    });
  });
}

// ---- Tests: the child holding a subscription ends ------------------------------------------

/** Crashes the child holding test://a and checks the subscription and its updates move on. */
async function crashAndMove(gw, log, { l, c, sub }) {
  // The listens are acknowledged at once; the child logs the subscribe when it reads it.
  const first = await waitFor(() => subLog(log).find((e) => e.method === 'resources/subscribe' && e.uri === 'test://a'), T, 'test://a subscribed at a child');
  const crash = await rawAnswer(gw, 'crash');
  assert.equal(crash.body.error?.code, -32603, `the crashing call fails: ${crash.text}`);
  // No request after the crash: the gateway moves the subscription on its own.
  await waitFor(() => subLog(log).some((e) => e.method === 'resources/subscribe' && e.uri === 'test://a' && e.pid !== first.pid), T, 'test://a subscribed at a new child');
  const moved = subLog(log).filter((e) => e.method === 'resources/subscribe' && e.uri === 'test://a');
  assert.equal(moved.length, 2, `once at the new child: ${JSON.stringify(moved)}`);
  assert.ok(poolPids(gw, 'listen').includes(moved[1].pid), 'a child the pool started');
  assert.equal(await rawCall(gw, 'whoami'), String(moved[1].pid), 'the new child serves the pool');
  assert.equal(await rawCall(gw, 'update', { uri: 'test://a' }), 'updated');
  assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
  await waitFor(() => rawGot(l, 'notifications/tools/list_changed').length === 1 && c.got.tools === 1, T, 'the later events at both listeners');
  assert.deepEqual(l.msgs().slice(1).map((m) => [m.method, m.params]), [
    ['notifications/resources/updated', { uri: 'test://a', _meta: { [SUB_ID]: l.id } }],
    ['notifications/tools/list_changed', { _meta: { [SUB_ID]: l.id } }],
  ], 'the raw listener: the update and the change, once each, after the crash');
  assert.deepEqual(c.got.updated, ['test://a'], 'the v2 listener: the update once');
  assertStream(sub, [['notifications/resources/updated', 'test://a'], ['notifications/tools/list_changed']], 'the v2 listener');
  const pool = await adminPool(gw, 'listen');
  assert.deepEqual([pool.listeners, pool.resource_subscriptions], [2, 1], '/admin/inflight after the move');
}

test('the child holding a subscription crashes (pool_warm_children = 1): the subscription moves to the new child; updates still arrive', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'), { extra: 'pool_max_children = 1\npool_warm_children = 1' })] }, async (gw, dir) => {
    const log = path.join(dir, 'subs.log');
    const l = await rawListen(gw, { toolsListChanged: true, resourceSubscriptions: ['test://a'] });
    const c = await v2(gw, 'listen-crash');
    try {
      const sub = await c.listen({ toolsListChanged: true, resourceSubscriptions: ['test://a'] });
      await crashAndMove(gw, log, { l, c, sub });
      l.drop();
      await sub.close();
    } finally {
      await c.close();
    }
  });
});

test('the child holding a subscription crashes (no warm children): a child is started to hold it, without waiting for a request', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'), { extra: 'pool_max_children = 1' })] }, async (gw, dir) => {
    const log = path.join(dir, 'subs.log');
    const l = await rawListen(gw, { toolsListChanged: true, resourceSubscriptions: ['test://a'] });
    const c = await v2(gw, 'listen-crash');
    try {
      const sub = await c.listen({ toolsListChanged: true, resourceSubscriptions: ['test://a'] });
      await crashAndMove(gw, log, { l, c, sub });
      l.drop();
      await sub.close();
    } finally {
      await c.close();
    }
  });
});

test('SIGHUP: an unchanged server keeps its legacy listener (it hears the next change); once the server changes, the listener is ended with a JSON-RPC error that says to listen again (not left on the old pool to hear nothing); a new listen works on the new pool', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw) => {
    const l = await rawListen(gw, { toolsListChanged: true }, { id: 'before-reload' });
    gw.proc.kill('SIGHUP'); // the same file
    await gw.waitLog(/SIGHUP: configuration reloaded/, T);
    await gw.waitLog(/pool listen: server unchanged/, T);
    assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
    await waitFor(() => rawGot(l, 'notifications/tools/list_changed').length === 1, T, 'the change on the kept listen');
    assert.ok(!l.ended, 'the listen goes on');
    fs.appendFileSync(gw.conf, 'cache_ttl_ms = 4321\n'); // the last section is the server's: changed
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/pool listen: retired/, T);
    await waitFor(() => l.ended, T, 'the old listen stream ends');
    const end = l.msgs().find((m) => m.id === 'before-reload');
    assert.equal(end?.error?.code, -32603, l.text());
    assert.match(end.error.message, /configuration reloaded: send subscriptions\/listen again/);
    const again = await rawListen(gw, { toolsListChanged: true }, { id: 'after-reload' });
    assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
    await waitFor(() => rawGot(again, 'notifications/tools/list_changed').length === 1, T, 'the change on the new listen');
    again.drop();
  });
});

test('POST /admin/servers/NAME/restart: a legacy listener is ended with an error that says to listen again (a cancel with reason admin); a new listen works on the new pool\'s child', { timeout: scaled(60000) }, async () => {
  await withGw({ servers: (dir) => [listenServer(path.join(dir, 'subs.log'))] }, async (gw) => {
    const l = await rawListen(gw, { toolsListChanged: true }, { id: 'before-restart' });
    const [old] = await waitFor(() => poolPids(gw, 'listen').length === 1 && poolPids(gw, 'listen'), T, 'the child\'s start line');
    const r = await request(`${gw.base}/admin/servers/listen/restart`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    const text = await r.done();
    assert.equal(r.status, 200, text);
    assert.equal(JSON.parse(text).children_replaced, 1);
    await waitFor(() => l.ended, T, 'the old listen stream ends');
    const end = l.msgs().find((m) => m.id === 'before-restart');
    assert.equal(end?.error?.code, -32603, l.text());
    assert.match(end.error.message, /server restarted by the operator: send subscriptions\/listen again/);
    const again = await rawListen(gw, { toolsListChanged: true }, { id: 'after-restart' });
    assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
    await waitFor(() => rawGot(again, 'notifications/tools/list_changed').length === 1, T, 'the change on the new listen');
    await waitFor(() => poolPids(gw, 'listen').length === 2, T, 'the new child\'s start line');
    assert.notEqual(poolPids(gw, 'listen')[1], old);
    const m = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.match(await m.done(), /^mcpgw_cancels_total\{server="listen",direction="to_child",reason="admin"\} 1$/m);
    again.drop();
  });
});

// ---- Tests: a child's start ----------------------------------------------------------------

test('a new child\'s start-up burst of list_changed (before it is ready) reaches no listener; a change it reports once ready does, once', { timeout: scaled(60000) }, async () => {
  const servers = (dir) => [{ ...listenServer(path.join(dir, 'subs.log'), { extra: 'era = legacy\npool_max_children = 1' }), env: `LISTEN_FIXTURE_LOG=${path.join(dir, 'subs.log')} LISTEN_FIXTURE_STARTUP_BURST=1` }];
  await withGw({ servers }, async (gw) => {
    // The first child's burst came before any listener: nothing to say about it.
    const first = await rawCall(gw, 'whoami');
    const l = await rawListen(gw, { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true });
    assert.deepEqual(l.ack, { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true });
    const crash = await rawAnswer(gw, 'crash');
    assert.equal(crash.body.error?.code, -32603, crash.text);
    // The next request starts a second child, whose burst the gateway reads while it starts.
    const second = await rawCall(gw, 'whoami');
    assert.notEqual(second, first);
    assert.equal(poolPids(gw, 'listen').length, 2);
    // A fence: a change the ready child reports; SSE keeps order, so a burst event would be first.
    assert.equal(await rawCall(gw, 'change_tools'), 'tools changed');
    await waitFor(() => rawGot(l, 'notifications/tools/list_changed').length >= 1, T, 'the change at the listener');
    assert.deepEqual(l.msgs().slice(1).map((m) => m.method), ['notifications/tools/list_changed'], `only the change, once: ${l.text()}`);
    l.drop();
  });
});
