// SPDX-License-Identifier: MIT
// A pool of 2026-07-28 children across a reload (SIGHUP), a drain (SIGTERM) and a broken verdict,
// seen from outside (HTTP, /metrics, the gateway's log):
//   - requests queued for a child that is still starting, when the pool is retired by SIGHUP (or
//     the gateway drains) and that start then fails or stalls: each gets a JSON-RPC error that
//     says why, at once; heartbeats while they wait; the old configuration is freed afterwards;
//   - a pool whose children serve no version the gateway serves (server/discover lists only an
//     unknown one) is not restarted outside pool_max_restarts_per_min, warm or not;
//   - /metrics while a retired pool lingers beside its successor: valid for Debian's promtool, and
//     no two samples with the same name and labels anywhere in it.
// The starting child is the example server with --hold-init (its initialize is never answered
// unless it gets SIGUSR1), so "still starting" holds as long as the test needs; nothing sleeps to
// synchronise, deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { EXAMPLE, metricSamples, pidAlive, post, reaped, request, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2026-07-28';
const HOSTILE = fileURLToPath(new URL('../fixtures/hostile.mjs', import.meta.url));
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/** A stateless request with the headers and _meta envelope it needs. */
function mpost(gw, method, params = {}, { id = 1, meta = {}, agent } = {}) {
  const body = {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, ...meta } },
  };
  const h = { 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  if (method === 'tools/call') h['Mcp-Name'] = params.name;
  return post(gw, body, { headers: h, agent });
}

/** Every JSON-RPC message of a response: one JSON object, or the SSE stream's events. */
function msgsOf(r) {
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) return r.text() ? [JSON.parse(r.text())] : [];
  return r.events().map((e) => e.json).filter(Boolean);
}

async function call(gw, name, args = {}, opts = {}) {
  const r = await mpost(gw, 'tools/call', { name, arguments: args }, opts);
  await r.done(scaled(10000));
  return { r, answer: msgsOf(r).find(isAnswer) };
}

/** promise, or a rejection after ms. */
function deadline(promise, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(t));
}

/** Pool children the gateway started for server `name`, from its log: [pid] in order. */
const poolPids = (gw, name = 'example') => [...gw.logs().matchAll(new RegExp(`session=pool:${name}#\\d+ pool child started: pid (\\d+)`, 'g'))].map((m) => Number(m[1]));
/** Requests the gateway queued for a starting child, from its log. */
const queuedCount = (gw) => (gw.logs().match(/pool example: tools\/call waits for a child to start/g) ?? []).length;

/** /metrics, the raw text. */
async function metricsText(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return text;
}

/** A [server:example] whose children hold their initialize answer until SIGUSR1. */
const holdingServer = (dir, extra) => ({ name: 'example', path: '/mcp', command: `sh -c 'exec ${EXAMPLE} --hold-init --log ${dir}/child-$$.log'`, extra });

/** Queues n tools/call requests (ids q1..qn) for a child still starting; resolves once all are queued. */
async function queue(gw, n) {
  const q = [];
  for (let i = 1; i <= n; i++) q.push(mpost(gw, 'tools/call', { name: 'echo', arguments: { text: `q${i}` } }, { id: `q${i}` }));
  await waitFor(() => queuedCount(gw) >= n, scaled(5000), `${n} requests queued`);
  return q;
}

/** An edit of the file that changes [server:name] (one more env variable): its pool is retired. */
const changeServer = (name) => (s) => s.replace(`[server:${name}]\n`, `[server:${name}]\nenv = MCPGW_TEST_RELOADED=1\n`);

/** Edits the file (by default not at all), then SIGHUP; resolves once the reload is logged. */
async function reload(gw, edit = (s) => s) {
  fs.writeFileSync(gw.conf, edit(fs.readFileSync(gw.conf, 'utf8')));
  gw.proc.kill('SIGHUP');
  await gw.waitLog(/SIGHUP: configuration reloaded/);
}

/** Each response of rs (ids q1..) ended with a -32603 error whose message matches re. */
async function assertFailed(rs, re) {
  for (const [i, r] of rs.entries()) {
    await r.done(scaled(5000));
    const a = msgsOf(r).find(isAnswer);
    assert.equal(a?.id, `q${i + 1}`, r.text());
    assert.equal(a.error?.code, -32603, r.text());
    assert.match(a.error.message, re);
  }
}

const freedRe = /configuration of \S+: no session uses it any more/;

// ---- 1. a retired pool's queue --------------------------------------------------------------------

test('SIGHUP, then the retired pool\'s starting child dies: its queued requests had heartbeats, then get an error that says why; the old configuration is freed', async () => {
  const dir = tmpdir('mcpgw-reload-');
  await withGateway({ gateway: { heartbeat_s: 1 }, servers: [holdingServer(dir, 'era = legacy\npool_max_children = 1')] }, async (gw) => {
    const q = await queue(gw, 2);
    const [pid] = poolPids(gw);
    await reload(gw, (s) => s.replace('--hold-init ', ''));
    // Waiting in the queue: heartbeats, as for any request in flight (the headers come with the first).
    const rs = await deadline(Promise.all(q), scaled(5000), 'the queued requests\' headers (a heartbeat)');
    for (const r of rs) {
      assert.match(r.headers['content-type'], /^text\/event-stream/);
      await waitFor(() => r.text().includes(': keep-alive'), scaled(5000), 'a heartbeat on a queued request');
      assert.ok(!r.ended, 'still queued');
    }
    process.kill(pid, 'SIGTERM'); // the start fails: no child of the old configuration will come
    await deadline(assertFailed(rs, /upstream server ended before it was ready.*configuration was reloaded: retry/), scaled(5000), 'the queued requests\' errors');
    await gw.waitLog(freedRe, scaled(5000));
    const n = await call(gw, 'echo', { text: 'new pool' }, { id: 'n' });
    assert.equal(textOf(n.answer), 'new pool', n.r.text());
  });
});

test('SIGHUP, then the retired pool\'s starting child never answers its initialize: its queued request gets an error after pool_start_timeout_ms', async () => {
  const dir = tmpdir('mcpgw-reload-');
  await withGateway({ servers: [holdingServer(dir, 'era = legacy\npool_max_children = 1\npool_start_timeout_ms = 1000')] }, async (gw) => {
    const q = await queue(gw, 1);
    await reload(gw, (s) => s.replace('--hold-init ', ''));
    // At most two start timeouts (one may pass before the reload: the pool then starts another).
    const [r] = await deadline(Promise.all(q), 2000 + scaled(5000), 'the queued request\'s answer');
    await deadline(assertFailed([r], /did not answer its initialize.*configuration was reloaded: retry/), scaled(5000), 'its error');
    await gw.waitLog(freedRe, scaled(5000));
    assert.deepEqual(kids(gw.proc.pid), [], 'the old children are gone');
  });
});

test('SIGTERM drain, then the starting child dies: the queued request gets its error at once, not after shutdown_drain_ms; exit 0', async () => {
  const dir = tmpdir('mcpgw-reload-');
  const gw = await startGateway({ gateway: { shutdown_drain_ms: 600000 }, servers: [holdingServer(dir, 'era = legacy\npool_max_children = 1')] });
  let ok = false;
  try {
    const q = await queue(gw, 1);
    const [pid] = poolPids(gw);
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/);
    process.kill(pid, 'SIGTERM');
    const [r] = await deadline(Promise.all(q), scaled(5000), 'the queued request\'s answer');
    await assertFailed([r], /upstream server ended before it was ready.*gateway shutting down/);
    await gw.waitLog(/drained: no request in flight/, scaled(5000));
    await gw.stop({ expect: { code: 0, signal: null } });
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(gw.logs().slice(-4000)); }
  }
});

// ---- 2. a broken pool ---------------------------------------------------------------------------

test('a pool whose server/discover lists only an unknown version: warm children are not restarted outside pool_max_restarts_per_min; requests get 503 saying why', async () => {
  const servers = [{ name: 'example', path: '/mcp', command: `${process.execPath} ${HOSTILE} discover-unknown`, extra: 'pool_warm_children = 2\npool_max_restarts_per_min = 2' }];
  await withGateway({ servers }, async (gw) => {
    await gw.waitLog(/server\/discover lists no version the gateway serves/, scaled(10000));
    // Watched for three seconds (a lower bound, not scaled): two warm starts, at most two restarts.
    const until = Date.now() + 3000;
    let started = 0;
    while (Date.now() < until) {
      started = metricSamples(await metricsText(gw))['mcpgw_pool_child_events_total{event="started"}'];
      assert.ok(started <= 4, `${started} starts in 3 s (pool_warm_children = 2, pool_max_restarts_per_min = 2)`);
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(poolPids(gw).length <= 4, `${poolPids(gw).length} children started`);
    await waitFor(() => kids(gw.proc.pid).length === 0, scaled(5000), 'no child kept for a pool that cannot serve');
    const r = await mpost(gw, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { id: 'b' });
    await r.done(scaled(5000));
    assert.equal(r.status, 503, r.text());
    assert.equal(r.json().id, 'b');
    assert.match(r.json().error?.message, /no protocol version this gateway serves/);
  });
});

// ---- 2b. the server's state is the new pool's ----------------------------------------------------

/** GET /readyz: {status, body}. */
async function readyz(gw) {
  const r = await request(`${gw.base}/readyz`, { method: 'GET' });
  const text = await r.done(scaled(5000));
  return { status: r.status, body: JSON.parse(text), text };
}

// A retired pool's children end what they were doing: a start of one of them that fails after
// the new pool's child started well says nothing about the new pool. With pool_max_restarts_per_min
// = 1, one failure counted for the server would make it broken, and /readyz 503.
for (const how of ['restart', 'reload']) {
  test(`${how === 'restart' ? 'POST /admin/servers/NAME/restart' : 'SIGHUP that changes the server'}: the retired pool's child that then fails its start does not change the server's state: /readyz stays 200, the server ok`, async () => {
    const dir = tmpdir('mcpgw-reload-');
    const admin = 'stateless-reload-admin-token-0123456789abcdef';
    const servers = [holdingServer(dir, 'era = legacy\npool_max_children = 1\npool_warm_children = 1\npool_max_restarts_per_min = 1')];
    await withGateway({ gateway: { admin_token: admin }, servers }, async (gw) => {
      // Signals go to a child once it holds its initialize: before its exec, sh would die of them.
      const holding = (n) => gw.waitLog(new RegExp(`pool:example#${n} child stderr: mcp-example-server: holding the initialize answer`), scaled(10000));
      const [old] = await waitFor(() => poolPids(gw).length === 1 && poolPids(gw), scaled(10000), 'the warm child (starting: its initialize is held)');
      await holding(1);
      if (how === 'restart') {
        const r = await request(`${gw.base}/admin/servers/example/restart`, { method: 'POST', headers: { Authorization: `Bearer ${admin}` } });
        const text = await r.done(scaled(5000));
        assert.equal(r.status, 200, text);
      } else {
        await reload(gw, changeServer('example'));
      }
      await gw.waitLog(/pool example: retired/, scaled(5000));
      const [, fresh] = await waitFor(() => poolPids(gw).length === 2 && poolPids(gw), scaled(10000), 'the new pool\'s child');
      await holding(2);
      process.kill(fresh, 'SIGUSR1'); // the new pool's child answers its initialize: it is ready
      await gw.waitLog(new RegExp(`pool:example#2 pool child ready`), scaled(10000));
      let rz = await readyz(gw);
      assert.equal(rz.status, 200, rz.text);
      process.kill(old, 'SIGTERM'); // the retired pool's child ends before it was ready
      await gw.waitLog(/pool:example#1 pool child ended/, scaled(10000));
      rz = await readyz(gw);
      assert.equal(rz.status, 200, `the new pool serves: ${rz.text}`);
      assert.equal(rz.body.servers.find((x) => x.name === 'example')?.state, 'ok', rz.text);
      const n = await call(gw, 'echo', { text: 'new pool' }, { id: 'n' });
      assert.equal(textOf(n.answer), 'new pool', n.r.text());
    });
  });
}

// ---- 3. /metrics through a reload ---------------------------------------------------------------

/** promtool from Debian's prometheus package (tests/deps.sh installs it): missing is a failure. */
function promtoolCheck(text) {
  const p = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.ok(!p.error, `promtool missing (apt-get install prometheus; tests/deps.sh): ${p.error?.message}`);
  assert.equal(p.status, 0, `promtool check metrics:\n${p.stdout}${p.stderr}`);
}

/** Samples that appear twice (same name, same labels in any order), over the whole text. */
function duplicateSeries(text) {
  const seen = new Set();
  const dups = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    assert.ok(m, `a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((x) => `${x[1]}=${x[2]}`).sort();
    const key = `${m[1]}{${labels.join(',')}}`;
    if (seen.has(key)) dups.push(key);
    seen.add(key);
  }
  return dups;
}

function assertValid(text, when) {
  promtoolCheck(text);
  assert.deepEqual(duplicateSeries(text), [], `duplicate series ${when}:\n${text}`);
}

test('/metrics while a retired pool lingers beside the new one: promtool accepts it, no duplicate series anywhere', async () => {
  const dir = tmpdir('mcpgw-reload-');
  const servers = [{ name: 'example', path: '/mcp', command: `sh -c 'exec ${EXAMPLE} --log ${dir}/child-$$.log'`, extra: 'pool_max_children = 1' }];
  await withGateway({ servers }, async (gw) => {
    assertValid(await metricsText(gw), 'at start');
    // A call held at the old pool's child keeps the retired pool alive.
    const h = await mpost(gw, 'tools/call', { name: 'cancel_self', arguments: { tag: 'h' } }, { id: 'h', meta: { progressToken: 'th' } });
    assert.equal(h.status, 200, h.text());
    await h.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    const [old] = poolPids(gw);
    await reload(gw, changeServer('example'));
    const n = await call(gw, 'echo', { text: 'new pool' }, { id: 'n' });
    assert.equal(textOf(n.answer), 'new pool', n.r.text());
    assert.equal(poolPids(gw).length, 2, 'a child for each pool');
    const text = await metricsText(gw);
    assertValid(text, 'while the retired pool lingers');
    const s = metricSamples(text);
    const ready = Object.entries(s).filter(([k]) => k.startsWith('mcpgw_pool_children{server=') && k.includes('state="ready"'));
    assert.equal(ready.reduce((sum, [, v]) => sum + v, 0), 2, `both pools' ready children counted: ${JSON.stringify(ready)}`);
    process.kill(old, 'SIGUSR1');
    await h.done(scaled(5000));
    await gw.waitLog(/pool example of an older configuration: ended/, scaled(10000));
    assertValid(await metricsText(gw), 'after the retired pool ended');
  });
});

// ---- 4. what a drain waits for -------------------------------------------------------------------

const CAPS = 'io.modelcontextprotocol/clientCapabilities';

/** A tools/call of the example server's elicit (rounds of one question); its input round's result. */
async function elicitRound(gw, id, params, { agent } = {}) {
  const r = await mpost(gw, 'tools/call', { name: 'elicit', ...params }, { id, agent, meta: { [CAPS]: { elicitation: {} } } });
  await r.done(scaled(10000));
  const a = msgsOf(r).find(isAnswer);
  assert.equal(r.status, 200, r.text());
  assert.equal(a?.id, id, r.text());
  return a;
}

test('a held call (input round) of a pool retired by SIGHUP: the client\'s retry goes on in it; during a drain too, and the drain ends once it is answered', async () => {
  const dir = tmpdir('mcpgw-reload-');
  const servers = [{ name: 'example', path: '/mcp', command: `sh -c 'exec ${EXAMPLE} --log ${dir}/child-$$.log'`, extra: 'era = legacy\npool_max_children = 1\ninput_hold_ms = 600000' }];
  const gw = await startGateway({ gateway: { shutdown_drain_ms: 600000 }, servers });
  let ok = false;
  try {
    const args = { arguments: { message: 'across a reload', rounds: 2 } };
    const first = await elicitRound(gw, 'e1', args);
    assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    await reload(gw, changeServer('example'));
    await gw.waitLog(/pool example: retired/, scaled(5000));
    // Each answer under the key its round asked it with (r1, then r2).
    const answer = (round, name) => Object.fromEntries(Object.keys(round.result.inputRequests).map((k) => [k, { action: 'accept', content: { name } }]));
    // The second round's connection stays open: the draining gateway's listener is closed, and
    // the last retry comes on it.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const second = await elicitRound(gw, 'e2', { ...args, inputResponses: answer(first, 'one'), requestState: first.result.requestState }, { agent });
    assert.equal(second.result?.resultType, 'input_required', `the retry went on in the retired pool: ${JSON.stringify(second)}`);
    await waitFor(() => Object.values(agent.freeSockets).flat().length === 1, scaled(5000), 'an idle connection');
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/);
    const last = await elicitRound(gw, 'e3', { ...args, inputResponses: answer(second, 'two'), requestState: second.result.requestState }, { agent });
    agent.destroy();
    assert.equal(last.result?.resultType, 'complete', `the drain serves the call it waits for: ${JSON.stringify(last)}`);
    assert.match(textOf(last), /one[\s\S]*two/);
    await gw.waitLog(/drained: no request in flight/, scaled(5000));
    await gw.stop({ expect: { code: 0, signal: null } });
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(gw.logs().slice(-4000)); }
  }
});

test('SIGTERM drain with a stateless child\'s subscriptions/listen open: the drain does not wait for the listen (it never ends by itself); the listen stream ends', async () => {
  const root = process.env.GW_SOURCE_ROOT;
  const servers = [{ name: 'stateless', path: '/mcp', command: `${process.execPath} ${root}/tests/fixtures/stateless_server.mjs`, extra: 'era = stateless\npool_max_children = 1' }];
  const gw = await startGateway({ gateway: { shutdown_drain_ms: 600000 }, servers });
  let ok = false;
  try {
    const l = await mpost(gw, 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { id: 'L' });
    assert.equal(l.status, 200, l.text());
    await l.waitEvent((j) => j.method === 'notifications/subscriptions/acknowledged', scaled(10000));
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/);
    await gw.waitLog(/drained: no request in flight/, scaled(5000));
    await l.done(scaled(10000));
    await gw.stop({ expect: { code: 0, signal: null } });
    ok = true;
  } finally {
    if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(gw.logs().slice(-4000)); }
  }
});

// ---- 5. a reload keeps what did not change ----------------------------------------------------

test('SIGHUP keeps the pool of a server whose section did not change (its children, a call in flight on them); a changed server\'s children are replaced; the old configuration is freed', async () => {
  const dir = tmpdir('mcpgw-reload-');
  const servers = [
    { name: 'keep', path: '/mcp', command: `sh -c 'exec ${EXAMPLE} --log ${dir}/keep-$$.log'`, extra: 'era = legacy\npool_max_children = 1\npool_warm_children = 1' },
    { name: 'change', path: '/change', command: `sh -c 'exec ${EXAMPLE} --log ${dir}/change-$$.log'`, extra: 'era = legacy\npool_max_children = 1\npool_warm_children = 1' },
  ];
  await withGateway({ servers }, async (gw) => {
    await waitFor(() => poolPids(gw, 'keep').length === 1 && poolPids(gw, 'change').length === 1, scaled(10000), 'a warm child of each server');
    const [keep] = poolPids(gw, 'keep');
    const [changed] = poolPids(gw, 'change');
    // A call in flight on keep's child, answered only when the child gets SIGUSR1.
    const h = await mpost(gw, 'tools/call', { name: 'cancel_self', arguments: { tag: 'h' } }, { id: 'h', meta: { progressToken: 'th' } });
    assert.equal(h.status, 200, h.text());
    await h.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));

    // The same file: nothing changed, every pool stays.
    await reload(gw);
    const m0 = metricSamples(await metricsText(gw)); // the reload's effect is there once it is logged
    assert.deepEqual([m0['mcpgw_pools_retired{server="keep"}'], m0['mcpgw_pools_retired{server="change"}']], [0, 0], 'no pool retired by an unchanged file');
    await gw.waitLog(/pool keep: server unchanged: its 1 children stay/, scaled(5000));
    await gw.waitLog(/pool change: server unchanged: its 1 children stay/, scaled(5000));
    await gw.waitLog(freedRe, scaled(5000)); // no pool holds the first configuration any more
    assert.doesNotMatch(gw.logs(), /pool child stopped: configuration reloaded/);
    assert.ok(!h.ended, 'the call is still in flight');

    // change's section changes: its pool is retired and its child replaced; keep's stays.
    await reload(gw, changeServer('change'));
    await waitFor(() => poolPids(gw, 'change').length === 2, scaled(10000), 'a new child for the changed server');
    await waitFor(() => reaped(changed), scaled(10000), `change's old child (pid ${changed}) stopped`);
    assert.match(gw.logs(), /pool keep: server unchanged: its 1 children stay[\s\S]*pool keep: server unchanged: its 1 children stay/, 'kept on the second reload too');
    await waitFor(() => (gw.logs().match(freedRe) ?? []).length >= 1 && /pool change of an older configuration: ended/.test(gw.logs()), scaled(10000), 'the changed server\'s old pool ended');
    await waitFor(() => [...gw.logs().matchAll(new RegExp(freedRe.source, 'g'))].length === 2, scaled(10000), 'the second configuration freed');

    assert.deepEqual(poolPids(gw, 'keep'), [keep], 'no new child for the unchanged server');
    assert.ok(pidAlive(keep), 'its child still runs');
    assert.ok(!h.ended, 'the call is still in flight');
    process.kill(keep, 'SIGUSR1');
    await h.done(scaled(5000));
    const a = msgsOf(h).find(isAnswer);
    assert.equal(a?.id, 'h', h.text());
    assert.equal(textOf(a), 'released', `the call completed on the kept child: ${h.text()}`);
    const n = await call(gw, 'echo', { text: 'kept pool' }, { id: 'n' });
    assert.equal(textOf(n.answer), 'kept pool', n.r.text());
    assert.deepEqual(poolPids(gw, 'keep'), [keep], 'served by the same child');
    const m = metricSamples(await metricsText(gw));
    assert.equal(m['mcpgw_pools_retired{server="keep"}'], 0);
    assert.equal(m['mcpgw_pools_retired{server="change"}'], 0);
  });
});
