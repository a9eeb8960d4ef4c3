// SPDX-License-Identifier: MIT
// The pool that serves stateless (2026-07-28) requests, seen from outside: over HTTP,
// through each pool child's own record of what it received (the example server's --log, one file
// per child: the command is `sh -c 'exec mcp-example-server --log <dir>/child-$$.log'`, so the
// file is named by the child's pid), /metrics (mcpgw_pool_*) and /proc (the gateway's children).
//   - era: a legacy child is probed once with server/discover, then initialized once; era = legacy
//     skips the probe; a stateless child (tests/fixtures/stateless_server.mjs, its stdin recorded by tee)
//     is never sent initialize, and era = stateless forwards server/discover;
//   - minted ids and progress tokens: two clients with the same id and token on one child;
//   - growth, spread, 429, warm children, idle stop;
//   - a child that dies mid-call, a child that keeps dying (restart budget, then 503);
//   - attribution: log lines, the child's own requests;
//   - SIGTERM drain, SIGINT, SIGHUP with a changed command;
//   - a legacy session beside the pool;
//   - what the gateway adds to a result (resultType; ttlMs and cacheScope when cacheable), spliced
//     into a child's own text, empty objects included (tests/fixtures/raw_results.mjs, each era).
// Calls that must still be in flight when a test acts are cancel_self calls (they end only by a
// cancel or SIGUSR1 to their child) with a progressToken: their progress 0 shows they are under
// way. Nothing sleeps to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, GW_BIN, del, initSession, pidAlive, post, reaped, request, startGateway, tmpdir, waitFor, withGateway, metricSamples } from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2026-07-28';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

const FIXTURE = (() => {
  const root = process.env.GW_SOURCE_ROOT;
  if (!root) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
  const f = path.join(root, 'tests/fixtures/stateless_server.mjs');
  if (!fs.existsSync(path.join(root, 'tests/node_modules/@modelcontextprotocol/server'))) throw new Error('tests/node_modules/@modelcontextprotocol/server missing: run `npm ci` in tests/');
  return f;
})();

// ---- commands ------------------------------------------------------------------------------

/** The example server with its own --log file per child: <dir>/<prefix>-<pid>.log. */
const perChild = (dir, args = [], prefix = 'child') => `sh -c 'exec ${EXAMPLE} --log ${dir}/${prefix}-$$.log ${args.join(' ')}'`;
/** The stateless fixture, what it reads on stdin recorded in <dir>/in-<sh pid>.log. */
const statelessFixture = (dir) => `sh -c 'tee -a ${dir}/in-$$.log | ${process.execPath} ${FIXTURE}'`;

/** Messages a child (by pid) received, from its own log. */
function childMsgs(dir, pid, prefix = 'child') {
  const f = path.join(dir, `${prefix}-${pid}.log`);
  if (!fs.existsSync(f)) return [];
  return fs.readFileSync(f, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return { raw: l }; } });
}
const methodsOf = (msgs) => msgs.filter((m) => m.method).map((m) => m.method);
/**
 * What a statelessFixture child received (its tee's log), once that holds at least n requests and
 * notifications: tee writes the child's pipe before its log, so an answer can be back before the
 * line that asked for it is in the log.
 */
const teeMsgs = (dir, pid, n) => waitFor(() => {
  const m = childMsgs(dir, pid, 'in');
  return methodsOf(m).length >= n && m;
}, scaled(5000), `${n} messages in the child's tee log`);
const count = (arr, x) => arr.filter((y) => y === x).length;

// ---- processes -----------------------------------------------------------------------------

/** Pool children the gateway started for server `name`, from its log: [{no, pid}] in order. */
const poolStarts = (gw, name = 'example') => [...gw.logs().matchAll(new RegExp(`session=pool:${name}#(\\d+) pool child started: pid (\\d+)`, 'g'))]
  .map((m) => ({ no: Number(m[1]), pid: Number(m[2]) }));
const poolPids = (gw, name) => poolStarts(gw, name).map((s) => s.pid);
/** The pids of the first n pool children (waits for their start lines: the log is a pipe, read apart from HTTP). */
const nPids = (gw, n, name) => waitFor(() => poolPids(gw, name).length >= n && poolPids(gw, name).slice(0, n), scaled(5000), `${n} pool children in the log`);

// ---- HTTP ----------------------------------------------------------------------------------

/** A stateless request with the headers and _meta envelope it needs. */
function mpost(gw, method, params = {}, { id = 1, meta = {}, url, headers = {}, agent } = {}) {
  const body = {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, ...meta } },
  };
  const h = { 'MCP-Protocol-Version': V, 'Mcp-Method': method, ...headers };
  if (method === 'tools/call' || method === 'prompts/get') h['Mcp-Name'] = params.name;
  if (method === 'resources/read') h['Mcp-Name'] = params.uri;
  return post(gw, body, { headers: h, url, agent });
}

/** Every JSON-RPC message of a response: one JSON object, or the SSE stream's events. */
function msgsOf(r) {
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) return r.text() ? [JSON.parse(r.text())] : [];
  return r.events().map((e) => e.json).filter(Boolean);
}

/** A whole tools/call: {r, msgs, answer}. */
async function call(gw, name, args = {}, opts = {}) {
  const r = await mpost(gw, 'tools/call', { name, arguments: args }, opts);
  await r.done(opts.ms ?? scaled(10000));
  const msgs = msgsOf(r);
  return { r, msgs, answer: msgs.find(isAnswer) };
}

/**
 * A cancel_self call that stays in flight (until SIGUSR1 to its child or a cancel): resolves once
 * its progress 0 is on its stream, i.e. once the child has read it.
 */
async function held(gw, id, token, { tag = String(id), meta = {}, url } = {}) {
  const r = await mpost(gw, 'tools/call', { name: 'cancel_self', arguments: { tag } }, { id, url, meta: { progressToken: token, ...meta } });
  assert.equal(r.status, 200, `held ${id}: HTTP ${r.status} ${r.text()}`);
  assert.match(r.headers['content-type'], /^text\/event-stream/);
  await r.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
  return r;
}

/** /metrics as {'name{labels}': value}. */
async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return metricSamples(text);
}
const M = {
  ready: (s = 'example') => `mcpgw_pool_children{server="${s}",state="ready"}`,
  starting: (s = 'example') => `mcpgw_pool_children{server="${s}",state="starting"}`,
  inflight: 'mcpgw_pool_inflight_requests',
  requests: 'mcpgw_pool_requests_total',
  answered: 'mcpgw_pool_request_duration_seconds_count',
  cancels: (r) => `mcpgw_cancels_total{direction="to_child",reason="${r}"}`,
  dropped: (r) => `mcpgw_pool_messages_dropped_total{reason="${r}"}`,
  refused: 'mcpgw_pool_child_requests_total{outcome="refused"}',
  events: (e) => `mcpgw_pool_child_events_total{event="${e}"}`,
};
const metricIs = async (gw, key, want) => (await metrics(gw))[key] === want;

const go = (pid) => process.kill(pid, 'SIGUSR1');

/** promise, or a rejection after ms. */
function deadline(promise, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(t));
}

/** A [server:example] at /mcp whose children each log to their own file in dir. */
const exampleServer = (dir, extra, args = []) => ({ name: 'example', path: '/mcp', command: perChild(dir, args), extra });

// ---- 1. era ----------------------------------------------------------------------------------

test('era auto, legacy server: the first child is probed with server/discover once, then initialized once; later children are only initialized', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 2')] }, async (gw) => {
    assert.deepEqual(kids(gw.proc.pid), [], 'no child before the first stateless request (pool_warm_children = 0)');
    const first = await call(gw, 'echo', { text: 'one' });
    assert.equal(first.r.status, 200);
    assert.deepEqual(first.answer, { jsonrpc: '2.0', id: 1, result: { resultType: 'complete', content: [{ type: 'text', text: 'one' }] } });
    await gw.waitLog(/server\/discover refused: the server is legacy/);
    const [p1] = await nPids(gw, 1);
    assert.deepEqual(kids(gw.proc.pid), [p1]);
    // A second child: while the first is busy, a request makes the pool grow (that request
    // still goes to the first child, which has room); the next one goes to the new idle child.
    const h = await held(gw, 'h1', 'tok-h1');
    const second = await call(gw, 'echo', { text: 'two' }, { id: 2 });
    assert.equal(textOf(second.answer), 'two');
    await waitFor(async () => (await metrics(gw))[M.ready()] === 2, scaled(10000), 'the second child ready');
    const [, p2] = await nPids(gw, 2);
    const third = await call(gw, 'echo', { text: 'three' }, { id: 3 });
    assert.equal(textOf(third.answer), 'three');
    assert.equal(poolPids(gw).length, 2, 'pool_max_children = 2');
    assert.deepEqual(kids(gw.proc.pid), [p1, p2].sort((x, y) => x - y));
    go(p1);
    await h.done(scaled(5000));
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released');
    // The client's own server/discover is answered by the gateway, never forwarded to a legacy child.
    const d = await mpost(gw, 'server/discover', {}, { id: 'd1' });
    await d.done(scaled(5000));
    const disc = msgsOf(d).find(isAnswer);
    assert.ok(disc?.result?.supportedVersions?.includes(V), JSON.stringify(disc));
    const m1 = methodsOf(childMsgs(dir, p1));
    const m2 = methodsOf(childMsgs(dir, p2));
    assert.deepEqual(m1.slice(0, 3), ['server/discover', 'initialize', 'notifications/initialized'], `first child: ${m1}`);
    assert.equal(count(m1, 'server/discover'), 1, `first child probed once: ${m1}`);
    assert.equal(count(m1, 'initialize'), 1);
    assert.equal(count(m1, 'notifications/initialized'), 1);
    assert.deepEqual(m2.slice(0, 2), ['initialize', 'notifications/initialized'], `second child: ${m2}`);
    assert.equal(count(m2, 'server/discover'), 0, 'the verdict holds for the pool: no second probe');
    assert.equal(count(m2, 'initialize'), 1);
    assert.equal(count(m1, 'tools/call'), 3, 'one, the held call and two on the first child');
    assert.equal(count(m2, 'tools/call'), 1, 'three on the second');
    // The gateway's initialize is its own: a legacy revision, its own clientInfo.
    const init = childMsgs(dir, p1).find((m) => m.method === 'initialize');
    assert.equal(init.params.clientInfo.name, 'mcp-gateway');
    const mt = await metrics(gw);
    assert.equal(mt[M.ready()], 2);
    assert.equal(mt[M.events('started')], 2);
    assert.equal(mt[M.events('failed')], 0);
  });
});

test('server/discover on a legacy pool is answered from the initialize result at once (not after a heartbeat period)', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ gateway: { heartbeat_s: 60 }, servers: [exampleServer(dir, 'era = legacy\ncache_ttl_ms = 1234\ncache_scope = public')] }, async (gw) => {
    const warm = await call(gw, 'echo', { text: 'warm' });
    assert.equal(textOf(warm.answer), 'warm');
    // heartbeat_s = 60: an answer held for a heartbeat period would miss this deadline.
    const d = await deadline(mpost(gw, 'server/discover', {}, { id: 7 }), scaled(5000), 'the server/discover answer\'s headers');
    await d.done(scaled(5000));
    assert.equal(d.status, 200);
    assert.match(d.headers['content-type'], /^application\/json/);
    const j = d.json();
    assert.equal(j.id, 7);
    assert.deepEqual(j.result.supportedVersions, [V]);
    assert.equal(j.result.resultType, 'complete');
    assert.equal(j.result.ttlMs, 1234);
    assert.equal(j.result.cacheScope, 'public');
    assert.deepEqual(Object.keys(j.result.capabilities).sort(), ['logging', 'prompts', 'resources', 'tools']);
    const [pid] = await nPids(gw, 1);
    assert.equal(count(methodsOf(childMsgs(dir, pid)), 'server/discover'), 0, 'not forwarded');
  });
});

test('era = legacy: no probe, initialize and notifications/initialized once; cacheable results get ttlMs and cacheScope', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'era = legacy\ncache_ttl_ms = 5000')] }, async (gw) => {
    const r = await mpost(gw, 'tools/list', {}, { id: 'tl' });
    await r.done(scaled(10000));
    const a = msgsOf(r).find(isAnswer);
    assert.equal(a.id, 'tl');
    assert.ok(a.result.tools.some((t) => t.name === 'echo'));
    assert.equal(a.result.resultType, 'complete');
    assert.equal(a.result.ttlMs, 5000);
    assert.equal(a.result.cacheScope, 'private');
    const e = await call(gw, 'echo', { text: 'x' }, { id: 2 });
    assert.equal(e.answer.result.ttlMs, undefined, 'tools/call is not cacheable');
    const [pid] = await nPids(gw, 1);
    const m = methodsOf(childMsgs(dir, pid));
    assert.deepEqual(m, ['initialize', 'notifications/initialized', 'tools/list', 'tools/call']);
    assert.doesNotMatch(gw.logs(), /server\/discover probe sent/);
  });
});

/** The answer of r (a JSON body or an SSE event) as the gateway wrote it, parsed: it must be valid JSON. */
function answerJson(r, what) {
  const raw = /^application\/json/.test(r.headers['content-type'] ?? '') ? [r.text()] : r.events().map((e) => e.data);
  const texts = raw.filter((t) => /"(result|error)"/.test(t));
  assert.equal(texts.length, 1, `${what}: one answer in ${r.text()}`);
  try {
    return JSON.parse(texts[0]);
  } catch (e) {
    assert.fail(`${what}: the answer is not JSON (${e.message}): ${texts[0]}`);
  }
}

for (const era of ['legacy', 'stateless']) {
  test(`era = ${era}: a child's empty result ({}, { }) and a non-empty one get resultType (and ttlMs, cacheScope when cacheable) as valid JSON`, async () => {
    const cmd = `${process.execPath} ${path.join(process.env.GW_SOURCE_ROOT, 'tests/fixtures/raw_results.mjs')}`;
    await withGateway({ servers: [{ name: 'raw', path: '/mcp', command: cmd, extra: `era = ${era}\ncache_ttl_ms = 4321` }] }, async (gw) => {
      const CACHE = { resultType: 'complete', ttlMs: 4321, cacheScope: 'private' };
      const cases = [
        ['tools/call', { name: 'empty' }, { resultType: 'complete' }],
        ['tools/call', { name: 'blank' }, { resultType: 'complete' }],
        ['tools/call', { name: 'full' }, { content: [{ type: 'text', text: 'full' }], resultType: 'complete' }],
        ['prompts/list', {}, CACHE],
        ['resources/templates/list', {}, CACHE],
        ['resources/list', {}, { resources: [], ...CACHE }],
      ];
      for (const [i, [method, params, want]] of cases.entries()) {
        const what = `${era} ${method} ${params.name ?? ''}`;
        const r = await mpost(gw, method, params, { id: `e-${i}` });
        await r.done(scaled(10000));
        assert.equal(r.status, 200, `${what}: ${r.text()}`);
        const a = answerJson(r, what);
        assert.equal(a.id, `e-${i}`, what);
        assert.deepEqual(a.result, want, what);
      }
    });
  });
}

test('era auto, stateless server: the probe finds 2026-07-28; initialize is never sent; requests reach the child with minted ids', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [{ name: 'stateless', path: '/mcp', command: statelessFixture(dir) }] }, async (gw) => {
    const e = await call(gw, 'echo', { text: 'stateless hello' }, { id: 'm-1', ms: scaled(20000) });
    assert.equal(e.r.status, 200, e.r.text());
    assert.equal(e.answer.id, 'm-1');
    assert.equal(textOf(e.answer), 'stateless hello');
    await gw.waitLog(/session=pool:stateless#1 server\/discover answered: the server serves 2026-07-28/);
    await gw.waitLog(/session=pool:stateless#1 pool child ready \(2026-07-28\)/);
    const d = await mpost(gw, 'server/discover', {}, { id: 'd' });
    await d.done(scaled(10000));
    assert.ok(msgsOf(d).find(isAnswer)?.result?.supportedVersions?.includes(V), d.text());
    const [pid] = await nPids(gw, 1, 'stateless');
    const seen = await teeMsgs(dir, pid, 3);
    const m = methodsOf(seen);
    assert.equal(count(m, 'initialize'), 0, `never initialize: ${m}`);
    assert.equal(count(m, 'notifications/initialized'), 0);
    assert.deepEqual(m, ['server/discover', 'tools/call', 'server/discover'], 'the probe, then both requests forwarded (stateless)');
    const ids = seen.filter((x) => x.method).map((x) => x.id);
    assert.ok(ids.every((i) => typeof i === 'number'), `minted numeric ids: ${ids}`);
    assert.equal(new Set(ids).size, 3);
    assert.equal(seen[1].params._meta['io.modelcontextprotocol/protocolVersion'], V, 'the request\'s own _meta goes with it');
  });
});

test('era = stateless: no probe, the client\'s server/discover is forwarded to the child', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [{ name: 'stateless', path: '/mcp', command: statelessFixture(dir), extra: 'era = stateless' }] }, async (gw) => {
    const d = await mpost(gw, 'server/discover', {}, { id: 'disc' });
    await d.done(scaled(20000));
    const a = msgsOf(d).find(isAnswer);
    assert.equal(a.id, 'disc');
    assert.ok(a.result.supportedVersions.includes(V));
    const [pid] = await nPids(gw, 1, 'stateless');
    const seen = await teeMsgs(dir, pid, 1);
    assert.deepEqual(methodsOf(seen), ['server/discover'], 'only the client\'s request, no probe and no initialize');
    assert.equal(typeof seen[0].id, 'number');
    assert.doesNotMatch(gw.logs(), /server\/discover probe sent/);
  });
});

// ---- 2. minted ids and tokens ------------------------------------------------------------------

// The era's deprecated spelling: read as stateless for one release after the rename.
const DEPRECATED_ERA = 'modern';

test(`era = ${DEPRECATED_ERA}, the deprecated spelling, is era = stateless; --check-config, the start and each SIGHUP warn once with file:line and the new spelling`, async () => {
  const dir = tmpdir('mcpgw-pool-');
  const servers = [{ name: 'stateless', path: '/mcp', command: statelessFixture(dir), extra: `era = ${DEPRECATED_ERA}` }];
  await withGateway({ servers }, async (gw) => {
    const line = fs.readFileSync(gw.conf, 'utf8').split('\n').indexOf(`era = ${DEPRECATED_ERA}`) + 1;
    assert.ok(line > 0, 'the era line is in the file');
    const want = `${gw.conf}:${line}: era = ${DEPRECATED_ERA} is deprecated and will be refused by the next release: write era = stateless`;
    const times = () => gw.logs().split(want).length - 1;
    const check = spawnSync(GW_BIN, ['--check-config', '--config', gw.conf], { encoding: 'utf8', timeout: 10000 });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    assert.equal(check.stderr, `warning: ${want}\n`, 'the one warning of --check-config');
    assert.match(check.stdout, /\(era stateless, /, '--check-config names the era by its name');
    assert.equal(times(), 1, `one warning at start:\n${gw.logs()}`);
    const d = await mpost(gw, 'server/discover', {}, { id: 'disc' });
    await d.done(scaled(20000));
    assert.ok(msgsOf(d).find(isAnswer)?.result?.supportedVersions?.includes(V), 'the child\'s own discover result');
    const [pid] = await nPids(gw, 1, 'stateless');
    assert.deepEqual(methodsOf(await teeMsgs(dir, pid, 1)), ['server/discover'], 'no probe and no initialize: the era is stateless');
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/, scaled(5000));
    assert.equal(times(), 2, 'one more warning on the reload');
  });
});

test('two clients with the same id and progress token on one child: each gets its own progress and answer; the child sees distinct numbers', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 1')] }, async (gw) => {
    // A: held on the child (id 1, token "t"); B: slow with the same id and token, while A is in flight.
    const a = await held(gw, 1, 't', { tag: 'A' });
    const b = await call(gw, 'slow', { steps: 3, interval_ms: 20, tag: 'B' }, { id: 1, meta: { progressToken: 't' } });
    assert.equal(b.answer.id, 1);
    assert.equal(textOf(b.answer), 'done after 3 steps');
    const bProg = b.msgs.filter((m) => m.method === 'notifications/progress');
    assert.deepEqual(bProg.map((m) => [m.params.progressToken, m.params.progress, m.params.message]), [['t', 1, 'step 1'], ['t', 2, 'step 2'], ['t', 3, 'step 3']]);
    assert.ok(!a.ended, 'A still in flight');
    const [pid] = await nPids(gw, 1);
    assert.equal(poolPids(gw).length, 1);
    go(pid);
    await a.done(scaled(5000));
    const am = msgsOf(a);
    assert.deepEqual(am.filter((m) => m.method === 'notifications/progress').map((m) => [m.params.progressToken, m.params.progress, m.params.message]),
      [['t', 0, 'waiting for SIGUSR1 or a cancel']], 'A: only its own progress');
    assert.deepEqual(am.find(isAnswer), { jsonrpc: '2.0', id: 1, result: { resultType: 'complete', content: [{ type: 'text', text: 'released' }] } });
    assert.equal(am.length, 2);
    assert.equal(b.msgs.length, 4, 'B: its three steps and its answer, nothing of A');
    const calls = childMsgs(dir, pid).filter((m) => m.method === 'tools/call');
    assert.equal(calls.length, 2);
    const [ca, cb] = [calls.find((c) => c.params.arguments.tag === 'A'), calls.find((c) => c.params.arguments.tag === 'B')];
    for (const c of [ca, cb]) {
      assert.equal(typeof c.id, 'number');
      assert.equal(c.params._meta.progressToken, c.id, 'the token the child sees is the minted number');
    }
    assert.notEqual(ca.id, cb.id);
  });
});

// ---- cancels: the client leaves, a timeout -----------------------------------------------------

test('closing the response stream cancels the call at its child at once (minted id, "client disconnected"); request_timeout_ms cancels with an error answer', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const tdir = tmpdir('mcpgw-pool-timed-');
  const servers = [exampleServer(dir, 'pool_max_children = 1'), { name: 'timed', path: '/timed', command: perChild(tdir), extra: 'request_timeout_ms = 300' }];
  await withGateway({ servers }, async (gw) => {
    const h = await held(gw, 'bye', 'tb');
    const [pid] = await nPids(gw, 1);
    const callId = childMsgs(dir, pid).find((m) => m.method === 'tools/call').id;
    h.drop();
    const c = await waitFor(() => childMsgs(dir, pid).find((m) => m.method === 'notifications/cancelled'), scaled(5000), 'the cancel at the child');
    assert.deepEqual(c.params, { requestId: callId, reason: 'client disconnected' });
    await gw.waitLog(new RegExp(`session=pool:example#1 cancel sent to child: method=tools/call child_id=${callId} reason="client disconnected"`));
    await waitFor(async () => (await metrics(gw))[M.inflight] === 0, scaled(5000), 'nothing in flight');
    const m1 = await metrics(gw);
    assert.equal(m1[M.cancels('client_disconnected')], 1);
    assert.ok(pidAlive(pid), 'the child stays');
    const after = await call(gw, 'echo', { text: 'same child' }, { id: 'after' });
    assert.equal(textOf(after.answer), 'same child');
    assert.equal(poolPids(gw, 'example').length, 1);

    // request_timeout_ms (a lower bound: the answer comes no sooner).
    const t0 = Date.now();
    const t = await held(gw, 'slowpoke', 'ts', { url: `${gw.base}/timed` });
    await t.done(scaled(5000));
    assert.ok(Date.now() - t0 >= 300, 'not before request_timeout_ms');
    const ans = msgsOf(t).find(isAnswer);
    assert.equal(ans?.id, 'slowpoke', t.text());
    assert.equal(ans.error?.code, -32603);
    assert.match(ans.error.message, /timed out/);
    const [tpid] = await nPids(gw, 1, 'timed');
    const tId = childMsgs(tdir, tpid).find((m) => m.method === 'tools/call').id;
    const tc = await waitFor(() => childMsgs(tdir, tpid).find((m) => m.method === 'notifications/cancelled'), scaled(5000), 'the timeout\'s cancel at the child');
    assert.deepEqual(tc.params, { requestId: tId, reason: 'request timed out' });
    const m2 = await metrics(gw);
    assert.equal(m2[M.cancels('timeout')], 1);
    assert.equal(m2[M.cancels('client_disconnected')], 1);
  });
});

test('request_timeout_ms on calls that are answered at once: no timer outlives its answer (the gateway lives past the deadline, nothing is cancelled, the child is untouched)', async () => {
  const tdir = tmpdir('mcpgw-pool-answered-');
  const TIMEOUT = scaled(300);
  const servers = [{ name: 'timed', path: '/timed', command: perChild(tdir), extra: `request_timeout_ms = ${TIMEOUT}` }];
  await withGateway({ servers }, async (gw) => {
    const url = `${gw.base}/timed`;
    const t0 = Date.now();
    for (let i = 0; i < 4; i++) {
      const c = await call(gw, 'echo', { text: `answered ${i}` }, { id: `a${i}`, url });
      assert.equal(textOf(c.answer), `answered ${i}`, c.r.text());
    }
    const list = await mpost(gw, 'tools/list', {}, { id: 'l', url });
    await list.done(scaled(5000));
    assert.equal(list.status, 200, list.text());
    const [pid] = await nPids(gw, 1, 'timed');
    // Past every deadline the answered calls had (3 x request_timeout_ms): an armed timer would
    // have fired on its freed entry by then (SIGSEGV in the plain build, ASan's report).
    await waitFor(async () => {
      const r = await request(`${gw.base}/healthz`, { method: 'GET' });
      await r.done(scaled(2000));
      assert.equal(r.status, 200);
      return Date.now() - t0 >= 3 * TIMEOUT;
    }, scaled(10000), 'three request_timeout_ms past the answers');
    const m = await metrics(gw);
    assert.equal(m[M.cancels('timeout')] ?? 0, 0, 'no answered call timed out');
    assert.equal(m[M.inflight], 0);
    assert.equal(childMsgs(tdir, pid).filter((x) => x.method === 'notifications/cancelled').length, 0, 'no cancel reached the child');
    const after = await call(gw, 'echo', { text: 'still here' }, { id: 'after', url });
    assert.equal(textOf(after.answer), 'still here');
  });
});

test('a stateless child: closing the stream of its slow call cancels it there (the fixture logs CANCELLED with the minted id)', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const cancelLog = path.join(dir, 'cancel.log');
  await withGateway({ servers: [{ name: 'stateless', path: '/mcp', command: statelessFixture(dir), env: `STATELESS_CANCEL_LOG=${cancelLog}`, extra: 'era = stateless' }] }, async (gw) => {
    const r = await mpost(gw, 'tools/call', { name: 'slow', arguments: { ms: 600000 } }, { id: 's' });
    const [pid] = await nPids(gw, 1, 'stateless');
    const seen = await waitFor(() => childMsgs(dir, pid, 'in').find((m) => m.method === 'tools/call'), scaled(20000), 'the call at the child');
    assert.equal(typeof seen.id, 'number');
    r.drop();
    await waitFor(() => fs.existsSync(cancelLog) && fs.readFileSync(cancelLog, 'utf8').includes('\n'), scaled(10000), 'CANCELLED in the fixture\'s log');
    assert.equal(fs.readFileSync(cancelLog, 'utf8'), `CANCELLED ${seen.id}\n`);
    const c = await waitFor(() => childMsgs(dir, pid, 'in').find((m) => m.method === 'notifications/cancelled'), scaled(5000), 'the cancel in the tee\'s log');
    assert.deepEqual(c.params, { requestId: seen.id, reason: 'client disconnected' });
    const e = await call(gw, 'echo', { text: 'still here' }, { id: 'e', ms: scaled(10000) });
    assert.equal(textOf(e.answer), 'still here');
  });
});

// ---- 3. growth, spread, 429, warm and idle children -----------------------------------------

test('warm children before any request; growth up to pool_max_children; 429 when full; an extra idle child is stopped and reaped, the warm ones stay', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const extra = 'pool_max_children = 3\npool_warm_children = 2\npool_child_max_inflight = 2\npool_idle_timeout_s = 1';
  await withGateway({ servers: [exampleServer(dir, extra)] }, async (gw) => {
    await waitFor(async () => (await metrics(gw))[M.ready()] === 2, scaled(10000), 'two warm children ready');
    const m0 = await metrics(gw);
    assert.equal(m0[M.requests], 0, 'before any request');
    const warm = await nPids(gw, 2);
    assert.equal(warm.length, 2);
    assert.deepEqual(kids(gw.proc.pid), [...warm].sort((x, y) => x - y));
    for (const pid of warm) assert.equal(count(methodsOf(childMsgs(dir, pid)), 'initialize'), 1, `warm child ${pid} initialized`);

    const streams = [];
    const maxKids = { n: 0 };
    for (let i = 1; i <= 6; i++) {
      streams.push(await held(gw, i, `tok-${i}`, { tag: `r${i}` }));
      maxKids.n = Math.max(maxKids.n, kids(gw.proc.pid).length);
    }
    const full = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'one too many' } }, { id: 7 });
    await full.done(scaled(5000));
    assert.equal(full.status, 429, full.text());
    assert.match(full.headers['content-type'], /^application\/json/);
    const fj = full.json();
    assert.equal(fj.id, 7);
    assert.equal(fj.jsonrpc, '2.0');
    assert.equal(typeof fj.error?.code, 'number');

    const pids = await nPids(gw, 3);
    assert.equal(poolPids(gw).length, 3, 'grew to pool_max_children, never more');
    assert.ok(maxKids.n <= 3, `at most 3 children at once: ${maxKids.n}`);
    assert.deepEqual(kids(gw.proc.pid), [...pids].sort((x, y) => x - y));
    const perChildCalls = pids.map((pid) => childMsgs(dir, pid).filter((m) => m.method === 'tools/call').map((m) => m.params.arguments.tag));
    assert.deepEqual(perChildCalls.map((c) => c.length), [2, 2, 2], `spread over the three children: ${JSON.stringify(perChildCalls)}`);
    assert.deepEqual(perChildCalls.flat().sort(), ['r1', 'r2', 'r3', 'r4', 'r5', 'r6'], 'the 429 request reached no child');
    const m1 = await metrics(gw);
    assert.equal(m1[M.ready()], 3);
    assert.equal(m1[M.inflight], 6);
    assert.equal(m1[M.requests], 6);
    assert.equal(m1[M.answered], 0, 'none answered yet (the histogram counts answers)');
    assert.equal(m1[M.events('started')], 3);

    for (const pid of pids) go(pid);
    for (const [i, r] of streams.entries()) {
      await r.done(scaled(5000));
      const a = msgsOf(r).find(isAnswer);
      assert.equal(a.id, i + 1);
      assert.equal(textOf(a), 'released');
    }
    // Idle for pool_idle_timeout_s: the one child beyond the warm ones goes, and is reaped.
    await gw.waitLog(/pool child stopped: idle for pool_idle_timeout_s/, scaled(10000));
    const stopped = await waitFor(() => { const x = pids.filter((p) => reaped(p)); return x.length > 0 && x; }, scaled(5000), 'the idle child reaped');
    assert.equal(stopped.length, 1);
    const left = pids.filter((p) => !stopped.includes(p));
    // The warm ones stay: watched over more than two idle periods (a lower bound, not scaled).
    const until = Date.now() + 2500;
    while (Date.now() < until) {
      assert.ok(left.every(pidAlive), 'the warm children stay');
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(kids(gw.proc.pid), left.sort((x, y) => x - y));
    const m2 = await metrics(gw);
    assert.equal(m2[M.events('idle_stopped')], 1);
    assert.equal(m2[M.answered], 6, 'the six answers in mcpgw_pool_request_duration_seconds; not the 429');
    assert.equal(m2['mcpgw_pool_request_duration_seconds_bucket{le="+Inf"}'], 6);
    assert.equal(m2[M.ready()], 2);
    assert.equal(m2[M.inflight], 0);
    assert.equal(m2[M.events('failed')], 0);
  });
});

// ---- 4. children that die ------------------------------------------------------------------------

test('a child that dies mid-call: every request in flight on it gets a JSON-RPC error; the child is replaced', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 1')] }, async (gw) => {
    const a = await held(gw, 'a', 'ta');
    const b = await held(gw, 'b', 'tb');
    const [old] = await nPids(gw, 1);
    const crash = await call(gw, 'crash', {}, { id: 'c' });
    for (const [r, id] of [[a, 'a'], [b, 'b']]) {
      await r.done(scaled(5000));
      const ans = msgsOf(r).find(isAnswer);
      assert.equal(ans?.id, id, r.text());
      assert.equal(ans.error?.code, -32603);
      assert.match(ans.error.message, /upstream server ended/);
    }
    assert.equal(crash.answer?.id, 'c', crash.r.text());
    assert.equal(crash.answer.error?.code, -32603);
    assert.match(crash.answer.error.message, /upstream server ended/);
    await waitFor(() => reaped(old), scaled(5000), 'the dead child reaped');
    const mt = await metrics(gw);
    assert.equal(mt[M.events('failed')], 1);
    assert.equal(mt[M.cancels('child_ended')], 3);
    assert.equal(mt[M.inflight], 0);
    const next = await call(gw, 'echo', { text: 'after the crash' }, { id: 'n' });
    assert.equal(textOf(next.answer), 'after the crash');
    const pids = await nPids(gw, 2);
    assert.equal(poolPids(gw).length, 2, 'a new child');
    assert.notEqual(pids[1], old);
    assert.deepEqual(kids(gw.proc.pid), [pids[1]]);
    assert.equal(count(methodsOf(childMsgs(dir, pids[1])), 'initialize'), 1, 'the new child was initialized');
  });
});

test('a child that keeps dying is restarted with backoff, at most pool_max_restarts_per_min times, then 503; other servers keep working', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const okDir = tmpdir('mcpgw-pool-ok-');
  const servers = [
    { name: 'dying', path: '/mcp', command: perChild(dir, ['--exit-after', '1']), extra: 'pool_max_restarts_per_min = 2' },
    { name: 'ok', path: '/ok', command: perChild(okDir) },
  ];
  await withGateway({ servers }, async (gw) => {
    const first = await call(gw, 'echo', { text: 'x' }, { id: 'f', ms: scaled(20000) });
    assert.equal(first.answer?.id, 'f', `${first.r.status} ${first.r.text()}`);
    assert.equal(first.answer.error?.code, -32603, first.r.text());
    // Restarts back off (0.5 s, then 1 s): requests in between get 503 without a start; keep
    // asking until the budget is spent.
    const spent = /pool dying: not starting a child: pool_max_restarts_per_min reached/;
    await waitFor(async () => {
      if (spent.test(gw.logs())) return true;
      const r = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'again' } }, { id: 'again' });
      await r.done(scaled(5000));
      return false;
    }, scaled(20000), 'the restart budget spent');
    const starts = poolStarts(gw, 'dying');
    assert.equal(starts.length, 3, `one start and two restarts: ${JSON.stringify(starts)}`);
    for (const s of starts) {
      await waitFor(() => reaped(s.pid), scaled(5000), `child ${s.pid} reaped`);
      assert.deepEqual(methodsOf(childMsgs(dir, s.pid)), ['server/discover'], 'each child read one message and exited');
    }
    for (let i = 0; i < 3; i++) {
      const r = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'y' } }, { id: `u${i}` });
      await r.done(scaled(5000));
      assert.equal(r.status, 503, r.text());
      assert.equal(r.json().id, `u${i}`);
      assert.equal(typeof r.json().error?.code, 'number');
    }
    assert.equal(poolStarts(gw, 'dying').length, 3, 'no further start');
    const mt = await metrics(gw);
    // dying's own series: /metrics started ok's probe (no child of ok had started yet).
    const dying = (e) => `mcpgw_pool_child_events_total{server="dying",event="${e}"}`;
    assert.equal(mt[dying('started')], 3);
    assert.equal(mt[dying('failed')], 3);
    assert.ok(mt[dying('refused_restart')] >= 3, `refused_restart ${mt[dying('refused_restart')]}`);
    assert.equal(mt[M.ready('dying')], 0);
    const ok = await call(gw, 'echo', { text: 'fine' }, { url: `${gw.base}/ok` });
    assert.equal(textOf(ok.answer), 'fine');
    assert.equal(kids(gw.proc.pid).length, 1);
  });
});

// ---- 5. attribution -----------------------------------------------------------------------

test('a log line reaches the one request in flight that asked for its level; otherwise it is dropped and counted', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 1')] }, async (gw) => {
    const LL = 'io.modelcontextprotocol/logLevel';
    const m0 = await metrics(gw);
    // Asked for info and up; the line is a warning: delivered, on an SSE stream before the answer.
    const w = await call(gw, 'notify', { level: 'warning', text: 'heads up' }, { id: 'w', meta: { [LL]: 'info' } });
    assert.match(w.r.headers['content-type'], /^text\/event-stream/);
    assert.deepEqual(w.msgs, [
      { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'warning', data: 'heads up' } },
      { jsonrpc: '2.0', id: 'w', result: { resultType: 'complete', content: [{ type: 'text', text: 'ok' }] } },
    ]);
    // Exactly at the level asked: delivered.
    const eq = await call(gw, 'notify', { level: 'notice', text: 'same level' }, { id: 'eq', meta: { [LL]: 'notice' } });
    assert.deepEqual(eq.msgs.filter((m) => m.method).map((m) => m.params.data), ['same level']);
    // Below the level asked, or no level asked: dropped (log_level).
    const lo = await call(gw, 'notify', { level: 'debug', text: 'too chatty' }, { id: 'lo', meta: { [LL]: 'info' } });
    const none = await call(gw, 'notify', { level: 'emergency', text: 'nobody asked' }, { id: 'none' });
    for (const x of [lo, none]) {
      assert.match(x.r.headers['content-type'], /^application\/json/, 'the answer alone');
      assert.equal(x.msgs.length, 1);
      assert.equal(textOf(x.answer), 'ok');
    }
    const m1 = await metrics(gw);
    assert.equal(m1[M.dropped('log_level')] - m0[M.dropped('log_level')], 2);
    assert.equal(m1[M.dropped('unattributed')] - m0[M.dropped('unattributed')], 0);
    // Two requests in flight on the child: whose line it is cannot be known: dropped (unattributed).
    const h = await held(gw, 'h', 'th', { meta: { [LL]: 'debug' } });
    const two = await call(gw, 'notify', { level: 'error', text: 'whose?' }, { id: 'two', meta: { [LL]: 'debug' } });
    assert.deepEqual(two.msgs, [{ jsonrpc: '2.0', id: 'two', result: { resultType: 'complete', content: [{ type: 'text', text: 'ok' }] } }]);
    const m2 = await metrics(gw);
    assert.equal(m2[M.dropped('unattributed')] - m1[M.dropped('unattributed')], 1);
    assert.equal(m2[M.dropped('log_level')], m1[M.dropped('log_level')]);
    const [pid] = await nPids(gw, 1);
    assert.equal(poolPids(gw).length, 1, 'one child served all of them');
    go(pid);
    await h.done(scaled(5000));
    assert.ok(!msgsOf(h).some((m) => m.method === 'notifications/message'), `the held request got no log line: ${h.text()}`);
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released');
  });
});

test('the child\'s sampling, elicitation and roots requests, for a request that declared none of these capabilities, are answered with an error; the tool call completes; nothing reaches the client', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 1')] }, async (gw) => {
    const m0 = await metrics(gw);
    // Declared, they become input rounds (stateless_bridge.test.mjs); undeclared, never.
    const caps = { 'io.modelcontextprotocol/clientCapabilities': {} };
    const cases = [['sample', 'sampling', 'sampling/createMessage'], ['elicit', 'elicitation', 'elicitation/create'], ['roots', 'roots', 'roots/list']];
    for (const [tool, what] of cases) {
      const r = await call(gw, tool, {}, { id: tool, meta: caps });
      assert.equal(r.r.status, 200);
      assert.equal(r.msgs.length, 1, `the answer alone, no request of the child: ${r.r.text()}`);
      assert.equal(r.answer.id, tool);
      assert.equal(r.answer.result?.isError, true, r.r.text());
      assert.match(textOf(r.answer), new RegExp(`^${what} error: `));
    }
    const m1 = await metrics(gw);
    assert.equal(m1[M.refused] - m0[M.refused], 3);
    // The child got an error (-32601) for each of its requests, under its own ids.
    const [pid] = await nPids(gw, 1);
    const answers = childMsgs(dir, pid).filter((m) => !m.method && 'id' in m);
    assert.equal(answers.length, 3, JSON.stringify(answers));
    for (const a of answers) assert.equal(a.error?.code, -32601);
    assert.equal(new Set(answers.map((a) => a.id)).size, 3);
  });
});

// ---- 6. shutdown, drain, reload -----------------------------------------------------------------

test('SIGTERM with shutdown_drain_ms: a pool request in flight finishes; new connections refused, new requests on open ones get 503; children reaped, exit 0', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const gw = await startGateway({ gateway: { shutdown_drain_ms: 60000 }, servers: [exampleServer(dir, 'pool_max_children = 1')] });
  let ok = false;
  // A connection opened before the drain (its listener closes): the late request goes on it.
  const agent = new http.Agent({ keepAlive: true });
  try {
    const warm = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'warm' } }, { id: 'warm', agent });
    await warm.done(scaled(5000));
    assert.equal(warm.status, 200, warm.text());
    await waitFor(() => Object.values(agent.freeSockets).flat().length === 1, scaled(5000), 'an idle connection');
    const h = await held(gw, 'drain-me', 'td');
    const [pid] = await nPids(gw, 1);
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/);
    await gw.waitLog(/listener closed/);
    await assert.rejects(mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'refused' } }, { id: 'refused' }), { code: 'ECONNREFUSED' });
    const late = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'late' } }, { id: 'late', agent });
    await late.done(scaled(5000));
    assert.equal(late.status, 503, late.text());
    assert.equal(late.headers.connection, 'close', 'the answer closes its connection');
    assert.equal(late.json().id, 'late');
    assert.ok(pidAlive(pid) && !h.ended, 'the request in flight is still running');
    go(pid);
    await h.done(scaled(5000));
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released', h.text());
    await gw.stop({ expect: { code: 0, signal: null } });
    assert.match(gw.logs(), /drained: no request in flight/);
    assert.ok(reaped(pid), 'the pool child was reaped');
    assert.ok(!childMsgs(dir, pid).some((m) => m.method === 'notifications/cancelled'), 'nothing cancelled');
    ok = true;
  } finally {
    agent.destroy();
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(gw.logs().slice(-4000)); }
  }
});

test('SIGINT with pool requests in flight (streaming or still held): each is answered with an error and cancelled at its child; every child reaped; exit 0', async () => {
  const dir = tmpdir('mcpgw-pool-');
  const gw = await startGateway({ servers: [exampleServer(dir, 'pool_max_children = 2\npool_warm_children = 2')] });
  let ok = false;
  try {
    await waitFor(async () => (await metrics(gw))[M.ready()] === 2, scaled(10000), 'two warm children');
    const a = await held(gw, 'a', 'ta');
    const b = await held(gw, 'b', 'tb');
    // q: in flight with nothing sent back yet (its response still held, not yet a stream).
    const q = mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'quiet', delay_ms: 600000, tag: 'q' } }, { id: 'q' });
    const pids = await nPids(gw, 2);
    assert.equal(poolPids(gw).length, 2);
    await waitFor(() => pids.some((pid) => childMsgs(dir, pid).some((m) => m.params?.arguments?.tag === 'q')), scaled(5000), 'q at its child');
    await gw.stop('SIGINT');
    for (const pid of pids) assert.ok(reaped(pid), `pool child ${pid} reaped`);
    const qr = await q;
    await qr.done(scaled(5000));
    for (const [r, id] of [[a, 'a'], [b, 'b'], [qr, 'q']]) {
      await r.done(scaled(5000));
      const ans = msgsOf(r).find(isAnswer);
      assert.equal(ans?.id, id, `an answer for ${id}: ${r.text()}`);
      assert.equal(ans.error?.code, -32603);
    }
    // Each child read a cancel for every call it had, reason "gateway shutting down".
    for (const pid of pids) {
      const msgs = childMsgs(dir, pid);
      const callIds = msgs.filter((m) => m.method === 'tools/call').map((m) => m.id).sort();
      const cancelled = msgs.filter((m) => m.method === 'notifications/cancelled');
      assert.deepEqual(cancelled.map((m) => m.params.requestId).sort(), callIds, `child ${pid}`);
      assert.ok(cancelled.every((m) => m.params.reason === 'gateway shutting down'));
    }
    assert.equal(pids.reduce((n, pid) => n + childMsgs(dir, pid).filter((m) => m.method === 'tools/call').length, 0), 3);
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(gw.logs().slice(-4000)); }
  }
});

test('SIGHUP with a changed command: new requests go to a new pool; the old child ends once idle', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir, 'pool_max_children = 1')] }, async (gw) => {
    const h = await held(gw, 'old', 'to');
    const [old] = await nPids(gw, 1);
    const conf = fs.readFileSync(gw.conf, 'utf8');
    const next = conf.replace(`--log ${dir}/child-$$.log`, () => `--name reloaded --log ${dir}/new-$$.log`);
    assert.notEqual(next, conf);
    fs.writeFileSync(gw.conf, next);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/);
    const r = await call(gw, 'echo', { text: 'new pool' }, { id: 'n' });
    assert.equal(textOf(r.answer), 'new pool');
    const pids = await nPids(gw, 2);
    assert.equal(poolPids(gw).length, 2, 'a new child for the new pool');
    const fresh = pids[1];
    assert.deepEqual(methodsOf(childMsgs(dir, fresh, 'new')).slice(-1), ['tools/call'], 'the request went to the new command');
    assert.equal(childMsgs(dir, old).filter((m) => m.method === 'tools/call').length, 1, 'the old child got nothing new');
    assert.ok(pidAlive(old), 'the old child stays while its request is in flight');
    assert.deepEqual(kids(gw.proc.pid), [old, fresh].sort((x, y) => x - y));
    go(old);
    await h.done(scaled(5000));
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released');
    await gw.waitLog(/pool child stopped: configuration reloaded/, scaled(10000));
    await waitFor(() => reaped(old), scaled(5000), 'the old child reaped');
    assert.deepEqual(kids(gw.proc.pid), [fresh]);
    const again = await call(gw, 'echo', { text: 'still new' }, { id: 'n2' });
    assert.equal(textOf(again.answer), 'still new');
    assert.equal(poolPids(gw).length, 2);
  });
});

// ---- 7. legacy sessions beside the pool ---------------------------------------------------------

test('a legacy session and the pool on one server: distinct children; DELETE of the session leaves the pool alone', async () => {
  const dir = tmpdir('mcpgw-pool-');
  await withGateway({ servers: [exampleServer(dir)] }, async (gw) => {
    const s = await initSession(gw);
    assert.ok(s.pid, 'the session child\'s pid from the log');
    const m = await call(gw, 'echo', { text: 'pooled' });
    assert.equal(textOf(m.answer), 'pooled');
    const [pool] = await nPids(gw, 1);
    assert.notEqual(pool, s.pid);
    assert.deepEqual(kids(gw.proc.pid), [s.pid, pool].sort((x, y) => x - y));
    // The session's child saw the client's initialize, the pool's the gateway's own.
    assert.equal(childMsgs(dir, s.pid).find((x) => x.method === 'initialize').params.clientInfo.name, 'it');
    assert.equal(childMsgs(dir, pool).find((x) => x.method === 'initialize').params.clientInfo.name, 'mcp-gateway');
    const d = await del(gw, { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
    await d.done(scaled(5000));
    assert.ok(d.status === 200 || d.status === 204, `DELETE: ${d.status}`);
    await waitFor(() => reaped(s.pid), scaled(5000), 'the session child reaped');
    assert.ok(pidAlive(pool), 'the pool child lives on');
    assert.deepEqual(kids(gw.proc.pid), [pool]);
    const again = await call(gw, 'echo', { text: 'pooled again' }, { id: 2 });
    assert.equal(textOf(again.answer), 'pooled again');
    assert.equal(poolPids(gw).length, 1, 'the same pool child');
    assert.equal(childMsgs(dir, pool).filter((x) => x.method === 'tools/call').length, 2);
    const mt = await metrics(gw);
    assert.equal(mt[M.ready()], 1);
    assert.equal(mt[M.events('started')], 1);
  });
});
