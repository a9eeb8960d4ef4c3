// SPDX-License-Identifier: MIT
// Readiness and failing servers: a server whose child exits at once is restarted with backoff
// inside pool_max_restarts_per_min, its repeated log line is rate-limited with a count, and
// /readyz and /metrics (mcpgw_server_state, mcpgw_ready) name its state per server (503 when no
// server can serve); a session child that never
// answers initialize is stopped after init_timeout_ms (the client gets a JSON-RPC error); a drain
// does not wait for an initialize whose client left.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { metricSamples, post, reaped, request, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const initMsg = (id) => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, id);
const isAnswer = (j) => j && ('result' in j || 'error' in j);

/** GET /readyz: {status, body}. */
async function readyz(gw) {
  const r = await request(`${gw.base}/readyz`, { method: 'GET' });
  await r.done();
  assert.match(r.headers['content-type'] || '', /^application\/json/);
  return { status: r.status, body: r.json() };
}

/** GET /metrics (loopback, no admin_token): its samples by series. */
async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  await r.done();
  assert.equal(r.status, 200, r.text());
  return metricSamples(r.text());
}

/** mcpgw_server_state's four series of one server: {ok, failing, broken, drained}. */
const STATES = ['ok', 'failing', 'broken', 'drained'];
const statesOf = (m, server) => Object.fromEntries(STATES.map((s) => [s, m[`mcpgw_server_state{server="${server}",state="${s}"}`]]));
const only = (state) => Object.fromEntries(STATES.map((s) => [s, s === state ? 1 : 0]));

/** The times (ms since the epoch, from the log's timestamps) at which pool children of name started. */
function startTimes(gw, name) {
  const re = new RegExp(`^(\\S+Z) info session=pool:${name}#\\d+ pool child started`, 'gm');
  return [...gw.logs().matchAll(re)].map((m) => Date.parse(m[1]));
}

// A command that exits at once: each child dies before it answers anything.
const DEAD = { name: 'dead', path: '/dead', command: '/bin/sh -c "exit 3"', extra: 'pool_warm_children = 1\npool_max_restarts_per_min = 3' };

test('a server whose child exits at once: restarts back off inside the budget, the repeated line is rate-limited, /readyz 503 naming it broken', async (t) => {
  await withGateway({ servers: [DEAD] }, async (gw) => {
    // One start and at most three restarts (the budget), spread out by the backoff.
    const rz = await waitFor(async () => { const r = await readyz(gw); return r.status === 503 ? r : null; }, scaled(20000), '/readyz 503');
    assert.equal(rz.body.ready, false);
    assert.equal(rz.body.reason, 'no server can serve');
    assert.equal(rz.body.servers.length, 1);
    assert.equal(rz.body.servers[0].name, 'dead');
    assert.equal(rz.body.servers[0].state, 'broken');
    assert.match(rz.body.servers[0].why, /./);
    // /metrics says the same: the server's state, and not ready.
    const m = await metrics(gw);
    assert.deepEqual(statesOf(m, 'dead'), only('broken'));
    assert.equal(m.mcpgw_ready, 0, 'mcpgw_ready agrees with /readyz');
    // Once the budget is spent, each tick's refusal is one line, then one with the count.
    const line = await gw.waitLog(/pool dead: not starting a child: pool_max_restarts_per_min reached \((\d+) more like this in the last (\d+) s\)/, scaled(30000));
    assert.ok(Number(line[1]) >= 1, line[0]);
    const starts = startTimes(gw, 'dead');
    t.diagnostic(`start times (ms after the first): ${starts.map((x) => x - starts[0]).join(', ')}`);
    assert.equal(starts.length, 4, `one start and three restarts: ${starts.length}`);
    // Backoff: the first failure is retried at once (a child lost while it started costs the
    // requests waiting for it nothing), then 500 ms after the second, 1000 ms after the third.
    assert.ok(starts[2] - starts[1] >= 450, `third start ${starts[2] - starts[1]} ms after the second`);
    assert.ok(starts[3] - starts[2] >= 950, `fourth start ${starts[3] - starts[2]} ms after the third`);
    const refusals = [...gw.logs().matchAll(/pool dead: not starting a child/g)].length;
    assert.ok(refusals <= 3, `${refusals} refusal lines`);
  });
});

test('/readyz: 200 while another server is fine, its JSON naming the failing one', async () => {
  const servers = [DEAD, { name: 'fine', path: '/mcp' }];
  await withGateway({ servers }, async (gw) => {
    const rz = await waitFor(async () => {
      const r = await readyz(gw);
      return r.body.servers?.find((s) => s.name === 'dead')?.state === 'broken' ? r : null;
    }, scaled(20000), 'dead broken in /readyz');
    assert.equal(rz.status, 200);
    assert.equal(rz.body.ready, true);
    assert.deepEqual(rz.body.servers.map((s) => [s.name, s.state]), [['dead', 'broken'], ['fine', 'ok']]);
    const m = await metrics(gw);
    assert.deepEqual(statesOf(m, 'dead'), only('broken'));
    assert.deepEqual(statesOf(m, 'fine'), only('ok'));
    assert.equal(m.mcpgw_ready, 1);
  });
});

test('a session child that never answers initialize: the client gets a JSON-RPC error after init_timeout_ms, the child is reaped, /readyz says failing', async (t) => {
  const INIT_MS = 300;
  const servers = [{ name: 'held', path: '/mcp', args: ['--hold-init'], extra: `init_timeout_ms = ${INIT_MS}` }];
  await withGateway({ servers }, async (gw) => {
    const t0 = performance.now();
    const init = await post(gw, initMsg('init-t'));
    assert.equal(init.status, 200);
    await init.done(scaled(10000));
    const took = performance.now() - t0;
    t.diagnostic(`initialize answered after ${took.toFixed(0)} ms`);
    const res = init.events().map((e) => e.json).find(isAnswer) ?? (init.text().startsWith('{') ? init.json() : null);
    assert.equal(res?.id, 'init-t', init.text());
    assert.equal(res.error?.code, -32603, init.text());
    assert.match(res.error.message, /timed out/);
    assert.ok(took >= INIT_MS - 10, `answered after ${took.toFixed(0)} ms`);
    const [pid] = gw.childPids();
    await waitFor(() => reaped(pid), scaled(5000), `child ${pid} reaped`);
    const rz = await readyz(gw);
    assert.equal(rz.body.servers[0].state, 'failing');
    assert.match(rz.body.servers[0].why, /initialize timed out/);
  });
});

test('a drain does not wait for an initialize whose client left', async () => {
  const DRAIN = 60000;
  const servers = [{ name: 'held', path: '/mcp', args: ['--hold-init'] }];
  await withGateway({ servers, gateway: { shutdown_drain_ms: DRAIN } }, async (gw) => {
    const init = await post(gw, initMsg('init-d'));
    assert.equal(init.status, 200);
    await gw.waitLog(/holding the initialize answer until SIGUSR1/, scaled(5000));
    init.drop();
    await gw.waitLog(/client dropped POST stream \d+/, scaled(5000));
    const t0 = performance.now();
    gw.proc.kill('SIGTERM');
    let timer;
    const r = await Promise.race([gw.exited, new Promise((res) => { timer = setTimeout(() => res(null), scaled(5000)); })]);
    clearTimeout(timer);
    assert.ok(r !== null, `no exit within ${scaled(5000)} ms of SIGTERM (drain ${DRAIN} ms)`);
    assert.deepEqual(r, { code: 0, signal: null });
    assert.match(gw.logs(), /shutting down \(drained: no request in flight\)/);
    const [pid] = gw.childPids();
    await waitFor(() => reaped(pid), scaled(5000), `child ${pid} reaped`);
    assert.ok(performance.now() - t0 < DRAIN);
  });
});
