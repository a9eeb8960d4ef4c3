// SPDX-License-Identifier: MIT
// Interop in the stateless era: the official v2 TypeScript client, @modelcontextprotocol/client
// 2.4.0 (pinned in tests/package-lock.json), over its StreamableHTTPClientTransport, through the
// gateway to two upstreams, each behind its own gateway and a pool of at most 4 children:
//   - everything: the reference @modelcontextprotocol/server-everything (2025-era, initialize-
//     based: the gateway answers server/discover for it and stamps resultType / cache hints);
//   - stateless: tests/fixtures/stateless_server.mjs (2026-07-28 on the v2 server package;
//     STATELESS_FIXTURE_LEGACY=serve so that a 2025-era session can open on it too).
// Per upstream, in order: which era each negotiation mode ends in ({pin: '2026-07-28'} and 'auto'
// stateless, without a session; the default 'legacy' through a session), tools / resources / prompts
// in every mode, progress on the request's own stream, an AbortSignal reaching the child as a
// cancel, and 50 concurrent clients whose answers never cross. Raw HTTP rules of the era are
// stateless_http.test.mjs's, pool internals stateless_pool.test.mjs's.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { everythingServer, metricSamples, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

// Resolved from tests/node_modules (this file lives in tests/integration); a missing package throws.
const { Client, StreamableHTTPClientTransport, SdkError } = await import('@modelcontextprotocol/client');
const CLIENT_PKG = JSON.parse(fs.readFileSync(new URL('../node_modules/@modelcontextprotocol/client/package.json', import.meta.url), 'utf8'));
assert.equal(CLIENT_PKG.version, '2.4.0', 'the pinned v2 client (tests/package-lock.json)');

const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
const FIXTURE = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
if (!fs.existsSync(FIXTURE)) throw new Error(`${FIXTURE} missing`);
const EVERYTHING_DOCS = path.join(ROOT, 'tests/node_modules/@modelcontextprotocol/server-everything/dist/docs');

const STATELESS = '2026-07-28';
const PIN = { mode: { pin: STATELESS } };
const AUTO = { mode: 'auto' };
// The SDK's own name for the stateless era is 'modern' (its getProtocolEra()); eraOf says ours.
const eraOf = (client) => (client.getProtocolEra() === 'modern' ? 'stateless' : client.getProtocolEra());
const MODES = [
  { label: 'pinned 2026-07-28', negotiation: PIN, era: 'stateless' },
  { label: 'auto', negotiation: AUTO, era: 'stateless' },
  { label: 'default (legacy)', negotiation: undefined, era: 'legacy' },
];
const POOL_MAX = 4;
const POOL_INI = `pool_max_children = ${POOL_MAX}`;
const CLIENTS = 50;
const ROUNDS = 3;
const PARALLEL = 4;
const CACHEABLE = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

const rnd = (n) => 1 + Math.floor(Math.random() * n);
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');

/** Text content of a result (tools/call), joined. */
const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

/** Parses the SSE events of a response body into JSON-RPC messages. */
function sseMessages(body) {
  const out = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    if (!data) continue;
    try { out.push(JSON.parse(data)); } catch { /* not JSON */ }
  }
  return out;
}

/**
 * A fetch for the transport that records every exchange: the request (method, headers, JSON
 * body) and the response (status, content type, session id and, for POSTs, the JSON-RPC
 * messages of its body, read from a clone).
 */
function wire() {
  const log = [];
  const fetchImpl = async (url, init = {}) => {
    const e = { method: init.method ?? 'GET', headers: new Headers(init.headers), msg: undefined };
    if (typeof init.body === 'string') { try { e.msg = JSON.parse(init.body); } catch { /* not JSON */ } }
    log.push(e);
    const res = await fetch(url, init);
    e.status = res.status;
    e.type = res.headers.get('content-type') ?? '';
    e.sessionId = res.headers.get('mcp-session-id');
    if (e.method === 'POST' && res.body) {
      const clone = res.clone();
      e.messages = clone.text().then((t) => (e.type.startsWith('text/event-stream') ? sseMessages(t) : t ? [JSON.parse(t)] : []), () => null);
    }
    return res;
  };
  return {
    log,
    fetch: fetchImpl,
    /** The JSON-RPC requests sent, by method name. */
    requests: () => log.filter((e) => e.msg && !Array.isArray(e.msg) && e.msg.method !== undefined && e.msg.id !== undefined),
    methods: () => log.filter((e) => e.msg && !Array.isArray(e.msg) && e.msg.method).map((e) => e.msg.method),
  };
}

/** A connected v2 client; {client, transport, wire, connectMs}. */
async function connect(gw, negotiation, { name = 'stateless-sdk-it' } = {}) {
  const w = wire();
  const client = new Client({ name, version: '1.0.0' }, negotiation ? { versionNegotiation: negotiation } : {});
  const transport = new StreamableHTTPClientTransport(new URL(gw.url), { fetch: w.fetch });
  const t0 = Date.now();
  await client.connect(transport);
  return { client, transport, wire: w, connectMs: Date.now() - t0 };
}

/** One sample of the gateway's /metrics (0 when the series is absent). */
async function metric(gw, series) {
  const res = await fetch(`${gw.base}/metrics`);
  assert.equal(res.status, 200, '/metrics');
  const body = await res.text();
  const m = metricSamples(body); // a server's series summed over servers
  assert.ok(series in m, `${series} in /metrics`);
  return m[series];
}

const UPSTREAMS = [
  {
    name: 'everything',
    what: 'server-everything (2025-era child)',
    serverName: 'mcp-servers/everything',
    server: () => everythingServer({ name: 'everything', extra: POOL_INI }),
    tools: ['echo', 'get-sum', 'trigger-long-running-operation'],
    echo: (t) => ({ name: 'echo', arguments: { message: t } }),
    echoed: (t) => `Echo: ${t}`,
    async compute(client) {
      const a = rnd(1000);
      const b = rnd(1000);
      const r = await client.callTool({ name: 'get-sum', arguments: { a, b } });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.equal(textOf(r), `The sum of ${a} and ${b} is ${a + b}.`);
    },
    async resources(client) {
      const { resources } = await client.listResources();
      const doc = resources.find((r) => r.uri.startsWith('demo://resource/static/document/'));
      assert.ok(doc, `a static document among ${resources.map((r) => r.uri)}`);
      const file = decodeURIComponent(doc.uri.slice('demo://resource/static/document/'.length));
      const read = await client.readResource({ uri: doc.uri });
      assert.equal(read.contents.length, 1);
      assert.equal(read.contents[0].uri, doc.uri);
      assert.equal(read.contents[0].text, fs.readFileSync(path.join(EVERYTHING_DOCS, file), 'utf8'), 'the document as on disk');
      const id = rnd(100000);
      const dyn = await client.readResource({ uri: `demo://resource/dynamic/text/${id}` });
      assert.equal(dyn.contents[0].uri, `demo://resource/dynamic/text/${id}`);
      assert.ok(dyn.contents[0].text.startsWith(`Resource ${id}: `), dyn.contents[0].text);
    },
    async prompts(client) {
      const { prompts } = await client.listPrompts();
      for (const n of ['simple-prompt', 'args-prompt']) assert.ok(prompts.some((p) => p.name === n), `${n} in ${prompts.map((p) => p.name)}`);
      const city = `City-${randomUUID().slice(0, 8)}`;
      const p = await client.getPrompt({ name: 'args-prompt', arguments: { city } });
      assert.equal(p.messages.length, 1);
      assert.equal(p.messages[0].content.text, `What's weather in ${city}?`);
    },
    progressCall: (steps) => ({ name: 'trigger-long-running-operation', arguments: { duration: steps * 0.1, steps } }),
    progressExpected: (steps) => Array.from({ length: steps }, (_, i) => ({ progress: i + 1, total: steps })),
    progressText: (steps, r) => assert.equal(textOf(r), `Long running operation completed. Duration: ${steps * 0.1} seconds, Steps: ${steps}.`),
    // Ignores cancellation (it runs on, its late progress dropped by the gateway), but reports
    // progress every second: the first one proves the child is working on it.
    slowCall: { name: 'trigger-long-running-operation', arguments: { duration: 600, steps: 600 } },
    slowHasProgress: true,
  },
  {
    name: 'stateless',
    what: 'stateless_server.mjs (2026-07-28 child)',
    serverName: 'mcp-gateway-stateless-fixture',
    server: (dir) => ({
      name: 'stateless',
      path: '/mcp',
      command: `${process.execPath} ${FIXTURE}`,
      env: `STATELESS_CANCEL_LOG=${path.join(dir, 'cancel.log')} STATELESS_FIXTURE_LEGACY=serve`,
      extra: POOL_INI,
    }),
    tools: ['echo', 'slow', 'test_simple_text', 'test_tool_with_progress'],
    echo: (t) => ({ name: 'echo', arguments: { text: t } }),
    echoed: (t) => t,
    async compute(client) {
      const r = await client.callTool({ name: 'test_simple_text', arguments: {} });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.equal(textOf(r), 'This is a simple text response for testing.');
      const bad = await client.callTool({ name: 'test_error_handling', arguments: {} });
      assert.equal(bad.isError, true, 'an isError result passes as a result');
    },
    async resources(client) {
      const { resources } = await client.listResources();
      assert.ok(resources.some((r) => r.uri === 'test://static-text'), `test://static-text in ${resources.map((r) => r.uri)}`);
      const read = await client.readResource({ uri: 'test://static-text' });
      assert.deepEqual(read.contents, [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }]);
      const id = String(rnd(100000));
      const t = await client.readResource({ uri: `test://template/${id}/data` });
      assert.equal(t.contents[0].uri, `test://template/${id}/data`);
      assert.deepEqual(JSON.parse(t.contents[0].text), { id, templateTest: true, data: `Data for ID: ${id}` });
    },
    async prompts(client) {
      const { prompts } = await client.listPrompts();
      for (const n of ['test_simple_prompt', 'test_prompt_with_arguments']) assert.ok(prompts.some((p) => p.name === n), `${n} in ${prompts.map((p) => p.name)}`);
      const arg1 = `a-${randomUUID().slice(0, 8)}`;
      const arg2 = `b-${randomUUID().slice(0, 8)}`;
      const p = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1, arg2 } });
      assert.equal(p.messages.length, 1);
      assert.equal(p.messages[0].content.text, `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`);
    },
    progressCall: () => ({ name: 'test_tool_with_progress', arguments: {} }),
    progressExpected: () => [0, 50, 100].map((p) => ({ progress: p, total: 100, message: `step ${p}` })),
    progressText: (_steps, r) => assert.equal(textOf(r), 'progress reported'),
    slowCall: { name: 'slow', arguments: { ms: 600000 } },
    slowHasProgress: false,
  },
];

for (const up of UPSTREAMS) {
  // Each upstream's tests, hooks and gateway (the hooks run once for the file: both gateways
  // are up for every test; the names say which upstream).
  let gw;
  let dir;
  let calls = 0;
  let t0;
  const clients = [];

  /** A test whose failure carries the gateway log tail. */
  const step = (name, fn, opts = {}) => test(`${up.what}: ${name}`, { timeout: scaled(120000), ...opts }, async () => {
    try {
      await fn();
    } catch (e) {
      if (e && typeof e === 'object' && gw) {
        try { e.message = `${e.message}\n--- gateway log (tail) ---\n${gw.logs().split('\n').filter((l) => !/child stderr/.test(l)).slice(-80).join('\n')}`; } catch { /* read-only */ }
      }
      throw e;
    }
  });
  const open = async (negotiation, opts) => {
    const c = await connect(gw, negotiation, opts);
    clients.push(c);
    return c;
  };
  const poolTag = `session=pool:${up.name}#`;
  const poolChildren = () => new Set([...gw.logs().matchAll(new RegExp(`${esc(poolTag)}(\\d+) pool child started`, 'g'))].map((m) => m[1]));

  before(async () => {
    t0 = Date.now();
    dir = tmpdir('mcpgw-sdk2-');
    gw = await startGateway({ servers: [up.server(dir)] });
  });

  after(async () => {
    for (const c of clients) { try { await c.client.close(); } catch { /* already closed */ } }
    if (!gw) return;
    console.log(`stateless_sdk ${up.name}: ${calls} client calls (connects included) in ${Date.now() - t0} ms, ${poolChildren().size} pool children`);
    await gw.stop();
  });

  step('eras: {pin: 2026-07-28} and auto end stateless without a session; the default opens a session', async () => {
    const sessionsBefore = await metric(gw, 'mcpgw_sessions_created_total');
    const logBefore = gw.logs().length;
    for (const { label, negotiation } of MODES.filter((m) => m.era === 'stateless')) {
      const c = await open(negotiation);
      calls++;
      assert.equal(eraOf(c.client), 'stateless', `${label}: era`);
      assert.equal(c.client.getNegotiatedProtocolVersion(), STATELESS, `${label}: version`);
      assert.equal(c.transport.sessionId, undefined, `${label}: no session id`);
      const d = c.client.getDiscoverResult();
      assert.ok(d?.supportedVersions?.includes(STATELESS), `${label}: discover result ${JSON.stringify(d)}`);
      assert.equal(c.client.getServerVersion()?.name, up.serverName, `${label}: server identity`);
      const sent = c.wire.methods();
      assert.deepEqual(sent, ['server/discover'], `${label}: connect sends only the probe`);
      assert.ok(c.wire.log.every((e) => e.method === 'POST' && !e.headers.has('mcp-session-id') && e.sessionId === null), `${label}: no session header either way`);
      const probe = c.wire.log[0];
      assert.equal(probe.headers.get('mcp-protocol-version'), STATELESS);
      assert.equal(probe.msg.params._meta['io.modelcontextprotocol/protocolVersion'], STATELESS);
      assert.equal(probe.status, 200);
    }
    assert.equal(await metric(gw, 'mcpgw_sessions_created_total'), sessionsBefore, 'no session created by the stateless connects');
    assert.doesNotMatch(gw.logs().slice(logBefore), /session created/, 'no session in the log');
    assert.match(gw.logs(), new RegExp(`${esc(poolTag)}\\d+ pool child ready`), 'served by the pool');

    const legacy = await open(undefined);
    calls++;
    assert.equal(eraOf(legacy.client), 'legacy');
    assert.match(legacy.client.getNegotiatedProtocolVersion(), /^2025-/);
    assert.ok(legacy.transport.sessionId, 'Mcp-Session-Id received');
    assert.equal(legacy.wire.methods()[0], 'initialize');
    assert.ok(!legacy.wire.methods().includes('server/discover'), 'no probe in legacy mode');
    assert.equal(legacy.client.getServerVersion()?.name, up.serverName);
    assert.equal(await metric(gw, 'mcpgw_sessions_created_total'), sessionsBefore + 1, 'one session');
    await gw.waitLog(new RegExp(`session=${esc(legacy.transport.sessionId)} session created: server=${up.name} `));
    const word = randomUUID();
    const r = await legacy.client.callTool(up.echo(word));
    calls++;
    assert.equal(textOf(r), up.echoed(word));
    const sid = legacy.transport.sessionId;
    await legacy.transport.terminateSession();
    calls++;
    await gw.waitLog(new RegExp(`session=${esc(sid)} session closed: `), scaled(5000));
  });

  step('with a ready pool child, connecting (server/discover) takes no wait', async () => {
    // The pool has a ready child since the test above. For a 2025-era child the gateway answers
    // server/discover itself (from the child's initialize), for a 2026-07-28 one the child does:
    // either way nothing should wait for a timer (heartbeat_s is 15 s here).
    assert.match(gw.logs(), new RegExp(`${esc(poolTag)}\\d+ pool child ready`));
    const took = [];
    for (let i = 0; i < 3; i++) {
      const c = await open(i % 2 ? AUTO : PIN);
      calls++;
      assert.equal(eraOf(c.client), 'stateless');
      took.push(c.connectMs);
    }
    assert.ok(took.every((ms) => ms < scaled(2000)), `connect times ${took.join(', ')} ms (server/discover answered late)`);
  });

  step('tools, resources and prompts in every mode; stateless results carry resultType (and cache hints)', async () => {
    for (const { label, negotiation, era } of MODES) {
      const c = await open(negotiation);
      calls++;
      assert.equal(eraOf(c.client), era, label);
      const { tools } = await c.client.listTools();
      calls++;
      for (const n of up.tools) assert.ok(tools.some((t) => t.name === n), `${label}: tool ${n} in ${tools.map((t) => t.name)}`);
      const word = `${label} — ünïcødé ✓ ${randomUUID()}`;
      const r = await c.client.callTool(up.echo(word));
      calls++;
      assert.equal(r.isError, undefined, `${label}: ${JSON.stringify(r)}`);
      assert.equal(textOf(r), up.echoed(word), label);
      await up.compute(c.client);
      calls += 2;
      await up.resources(c.client);
      calls += 3;
      await up.prompts(c.client);
      calls += 2;
      if (era !== 'stateless') {
        assert.ok(c.transport.sessionId, `${label}: a session`);
        await c.transport.terminateSession();
        continue;
      }
      // What went over the wire: every request carried the era's _meta and headers, and every
      // answer is one result with resultType; the cacheable ones with ttlMs and cacheScope.
      const reqs = c.wire.requests();
      assert.ok(reqs.length >= 9, `${label}: ${reqs.length} requests`);
      for (const e of reqs) {
        const { method } = e.msg;
        assert.equal(e.headers.get('mcp-protocol-version'), STATELESS, `${label} ${method}: header`);
        assert.equal(e.headers.get('mcp-method'), method, `${label} ${method}: Mcp-Method`);
        assert.equal(e.msg.params?._meta?.['io.modelcontextprotocol/protocolVersion'], STATELESS, `${label} ${method}: _meta`);
        assert.equal(e.status, 200, `${label} ${method}: HTTP ${e.status}`);
        assert.equal(e.sessionId, null, `${label} ${method}: no session`);
        const msgs = await e.messages;
        assert.ok(Array.isArray(msgs), `${label} ${method}: body read`);
        const answers = msgs.filter((m) => 'result' in m || 'error' in m);
        assert.equal(answers.length, 1, `${label} ${method}: one answer in ${JSON.stringify(msgs).slice(0, 400)}`);
        assert.equal(answers[0].id, e.msg.id, `${label} ${method}: the request's own id`);
        const res = answers[0].result;
        assert.ok(res, `${label} ${method}: a result, not ${JSON.stringify(answers[0]).slice(0, 300)}`);
        assert.equal(res.resultType, 'complete', `${label} ${method}: resultType`);
        if (CACHEABLE.has(method) || method === 'server/discover') {
          assert.equal(typeof res.ttlMs, 'number', `${label} ${method}: ttlMs`);
          assert.ok(['private', 'public'].includes(res.cacheScope), `${label} ${method}: cacheScope ${res.cacheScope}`);
        }
        if (msgs.length === 1) assert.match(e.type, /^application\/json/, `${label} ${method}: a single answer is one JSON object`);
      }
      assert.ok(!c.wire.methods().includes('initialize'), `${label}: no initialize`);
    }
  });

  step('progress reaches onprogress on the request\'s own stream, two calls in parallel kept apart', async () => {
    for (const { label, negotiation } of MODES) {
      const c = await open(negotiation);
      calls++;
      const got = [[], []];
      const steps = [3, 5];
      const rs = await Promise.all(steps.map((s, i) => c.client.callTool(up.progressCall(s), { onprogress: (p) => got[i].push(p) })));
      calls += 2;
      for (let i = 0; i < 2; i++) {
        up.progressText(steps[i], rs[i]);
        assert.deepEqual(got[i], up.progressExpected(steps[i]), `${label}: call ${i} got exactly its own progress`);
      }
      if (eraOf(c.client) === 'stateless') {
        const calls2 = c.wire.requests().filter((e) => e.msg.method === 'tools/call');
        assert.equal(calls2.length, 2);
        for (const e of calls2) {
          assert.match(e.type, /^text\/event-stream/, `${label}: progress makes the answer a stream`);
          const msgs = await e.messages;
          const token = e.msg.params._meta.progressToken;
          assert.notEqual(token, undefined, 'the client asked for progress');
          const prog = msgs.filter((m) => m.method === 'notifications/progress');
          assert.ok(prog.length >= 3, `${label}: progress on the stream: ${JSON.stringify(msgs).slice(0, 300)}`);
          assert.ok(prog.every((m) => m.params.progressToken === token), `${label}: the client's own token restored`);
          const last = msgs.at(-1);
          assert.equal(last.id, e.msg.id, 'the answer ends the stream');
          assert.equal(last.result.resultType, 'complete');
        }
      } else {
        await c.transport.terminateSession();
      }
    }
  });

  step('an AbortSignal reaches the child as a cancel, promptly; the call rejects; the gateway serves on', async () => {
    for (const { label, negotiation } of MODES.filter((m) => m.era === 'stateless')) {
      const c = await open(negotiation);
      calls++;
      const cancelsBefore = [...gw.logs().matchAll(/cancel sent to child/g)].length;
      const inflightBefore = await metric(gw, 'mcpgw_pool_inflight_requests');
      const ac = new AbortController();
      let progressed = 0;
      const pending = c.client.callTool(up.slowCall, { signal: ac.signal, timeout: scaled(600000), ...(up.slowHasProgress ? { onprogress: () => { progressed++; } } : {}) });
      calls++;
      let settled = null;
      pending.then(() => { settled = 'resolved'; }, (e) => { settled = e; });
      // At the child: its first progress, or the gateway counting it in flight.
      if (up.slowHasProgress) await waitFor(() => progressed > 0 || settled, scaled(10000), 'the first progress of the slow call');
      else await waitFor(async () => settled || (await metric(gw, 'mcpgw_pool_inflight_requests')) > inflightBefore, scaled(10000), 'the slow call in flight');
      assert.equal(settled, null, `${label}: the slow call is still running`);
      const abortedAt = Date.now();
      ac.abort(new Error(`stateless_sdk abort ${label}`));
      const err = await waitFor(() => settled, scaled(2000), 'the aborted call to reject');
      assert.ok(err instanceof SdkError, `${label}: rejected with an SdkError, not ${err}`);
      assert.match(err.message, new RegExp(`stateless_sdk abort ${esc(label)}`), `${label}: the abort reason`);
      const m = await waitFor(() => {
        const all = [...gw.logs().matchAll(new RegExp(`${esc(poolTag)}\\d+ cancel sent to child: method=tools/call child_id=(\\d+) reason="([^"]*)"`, 'g'))];
        return all.length > cancelsBefore ? all.at(-1) : null;
      }, scaled(3000), 'the gateway to send the cancel');
      assert.equal(m[2], 'client disconnected', `${label}: the stream's close is the cancel`);
      if (up.name === 'stateless') {
        // The child itself saw it: the fixture logs the id it received (the gateway's minted one).
        const cancelLog = path.join(dir, 'cancel.log');
        await waitFor(() => fs.existsSync(cancelLog) && fs.readFileSync(cancelLog, 'utf8').split('\n').includes(`CANCELLED ${m[1]}`), scaled(3000), `CANCELLED ${m[1]} in the fixture's cancel log`);
      }
      const reachedMs = Date.now() - abortedAt;
      assert.ok(reachedMs < scaled(3000), `${label}: cancel took ${reachedMs} ms`);
      // The 2026 client does not POST notifications/cancelled: it closes the request's stream.
      assert.ok(!c.wire.methods().includes('notifications/cancelled'), `${label}: no cancel notification posted`);
      await waitFor(async () => (await metric(gw, 'mcpgw_pool_inflight_requests')) === inflightBefore, scaled(3000), 'the cancelled call out of the pool');
      // Serving on: the same client, then a new one.
      const word = randomUUID();
      assert.equal(textOf(await c.client.callTool(up.echo(word))), up.echoed(word));
      const fresh = await open(negotiation);
      assert.equal(textOf(await fresh.client.callTool(up.echo(`${word}-fresh`))), up.echoed(`${word}-fresh`));
      calls += 3;
    }
    assert.doesNotMatch(gw.logs(), /pool child ended/, 'no pool child failed');
  });

  step(`${CLIENTS} concurrent clients, ${ROUNDS}x${PARALLEL} parallel echo calls each: every answer is the caller's own`, async () => {
    const started = Date.now();
    const cs = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => open(i % 2 ? AUTO : PIN, { name: `stateless-sdk-c${i}` })));
    calls += CLIENTS;
    for (const c of cs) {
      assert.equal(eraOf(c.client), 'stateless');
      assert.equal(c.transport.sessionId, undefined);
    }
    const mismatches = [];
    let n = 0;
    await Promise.all(cs.map(async (c, i) => {
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(Array.from({ length: PARALLEL }, async (_, k) => {
          const word = `client ${i} round ${round} call ${k} ${randomUUID()}`;
          const r = await c.client.callTool(up.echo(word));
          n++;
          if (r.isError || textOf(r) !== up.echoed(word)) mismatches.push({ client: i, sent: word, got: r });
        }));
      }
    }));
    calls += n;
    assert.equal(n, CLIENTS * ROUNDS * PARALLEL);
    assert.deepEqual(mismatches.slice(0, 5), [], `${mismatches.length} answers not the caller's own`);
    const children = poolChildren();
    assert.ok(children.size <= POOL_MAX, `pool_max_children = ${POOL_MAX}: ${children.size} children started`);
    assert.ok(children.size >= 2, `the pool grew under load: ${children.size} children`);
    assert.doesNotMatch(gw.logs(), /pool child ended/, 'no child failed');
    console.log(`stateless_sdk ${up.name}: ${CLIENTS} clients, ${n} echo calls in ${Date.now() - started} ms over ${children.size} pool children`);
    await Promise.all(cs.map((c) => c.client.close()));
  });
}
