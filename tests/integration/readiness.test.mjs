// SPDX-License-Identifier: MIT
// Readiness and failing servers: a server whose child exits at once is restarted with backoff
// inside pool_max_restarts_per_min, its repeated log line is rate-limited with a count, and
// /readyz and /metrics (mcpgw_server_state, mcpgw_ready) name its state per server (503 when no
// server can serve); a session child that never
// answers initialize is stopped after init_timeout_ms (the client gets a JSON-RPC error); a drain
// does not wait for an initialize whose client left. Readiness is true: a server counts as able
// to serve only once a child of it started (asked about a server none of whose children started,
// its pool probes it with one child, even with pool_warm_children = 0 and no request), a missing
// command is broken at once; and systemd is
// told (Type=notify: READY=1, RELOADING=1, STOPPING=1, STATUS=) through a real notify socket.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { EXAMPLE, metricSamples, post, reaped, request, rpc, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { notifySink } from '../lib/notify.mjs';
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

/** mcpgw_server_state's five series of one server: {ok, failing, broken, drained, starting}. */
const STATES = ['ok', 'failing', 'broken', 'drained', 'starting'];
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
    const rz = await waitFor(async () => { const r = await readyz(gw); return r.body.servers?.[0]?.state === 'broken' ? r : null; }, scaled(20000), '/readyz: broken');
    assert.equal(rz.status, 503);
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

test('a session child that never answers initialize: the client gets a JSON-RPC error after init_timeout_ms, the child is reaped, /readyz says starting (no child of it ever started) and why', async (t) => {
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
    assert.equal(rz.status, 503, 'a server none of whose children ever started does not serve');
    assert.equal(rz.body.servers[0].state, 'starting');
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

// ---- readiness is true ---------------------------------------------------------------------------

/** The pids of name's pool children, from their start lines. */
const poolPids = (gw, name) => [...gw.logs().matchAll(new RegExp(`session=pool:${name}#\\d+ pool child started: pid (\\d+)`, 'g'))].map((m) => Number(m[1]));

test('a server whose command is missing is broken at once, before any request (the loader\'s cause as why, no path); a SIGHUP that fixes it makes it serve', async () => {
  const dir = tmpdir('mcpgw-ready-missing-');
  await withGateway({ servers: [{ name: 'nocmd', path: '/mcp', command: `${dir}/missing --flag` }] }, async (gw) => {
    const rz = await readyz(gw); // the first answer: no start had to fail first
    assert.equal(rz.status, 503);
    assert.equal(rz.body.reason, 'no server can serve');
    assert.equal(rz.body.servers[0].state, 'broken');
    assert.equal(rz.body.servers[0].why, 'command missing or not executable', 'the cause, no path: /readyz is public');
    const m = await metrics(gw);
    assert.deepEqual(statesOf(m, 'nocmd'), only('broken'));
    assert.equal(m.mcpgw_ready, 0);
    fs.writeFileSync(gw.conf, fs.readFileSync(gw.conf, 'utf8').replace(`${dir}/missing --flag`, EXAMPLE));
    gw.proc.kill('SIGHUP');
    const ok = await waitFor(async () => { const r = await readyz(gw); return r.status === 200 ? r : null; }, scaled(10000), '/readyz 200 after the fix');
    assert.equal(ok.body.servers[0].state, 'ok');
  });
});

test('a server whose child crashes at start does not count as able to serve from its first failure on (starting, with why), long before the restart budget is spent', async () => {
  // pool_max_restarts_per_min at its default (10): broken only after ten failures in a row.
  const servers = [{ name: 'crash', path: '/mcp', command: '/bin/sh -c "exit 3"' }];
  await withGateway({ servers }, async (gw) => {
    // No request: asking /readyz makes the pool's probe start a child, which fails.
    const rz = await waitFor(async () => {
      const r = await readyz(gw);
      return r.body.servers?.[0]?.why && !/no child of it has started yet/.test(r.body.servers[0].why) ? r : null;
    }, scaled(10000), 'a failed start in /readyz');
    assert.equal(rz.status, 503, JSON.stringify(rz.body));
    assert.ok(['starting', 'broken'].includes(rz.body.servers[0].state), JSON.stringify(rz.body));
    assert.equal((await metrics(gw)).mcpgw_ready, 0);
  });
});

test('with pool_warm_children = 0 and no request of either era, asking /readyz makes the pool probe the server with one child: starting (503) until it initialized, then ok (200); the probe then idles out and is not replaced', async () => {
  const servers = [{ name: 'example', path: '/mcp', args: ['--hold-init'], extra: 'pool_idle_timeout_s = 1' }];
  await withGateway({ servers }, async (gw) => {
    const before = await readyz(gw); // the first question: no child of the server ever started
    assert.equal(before.status, 503);
    assert.deepEqual(before.body.servers.map((x) => [x.name, x.state, x.why]), [['example', 'starting', 'no child of it has started yet']]);
    await gw.waitLog(/holding the initialize answer until SIGUSR1/, scaled(10000));
    const [pid] = poolPids(gw, 'example');
    assert.ok(pid > 0, 'the probe is a pool child');
    assert.equal((await readyz(gw)).status, 503, 'still starting while its initialize is held');
    assert.deepEqual(statesOf(await metrics(gw), 'example'), only('starting'));
    process.kill(pid, 'SIGUSR1'); // its initialize is answered
    const after = await waitFor(async () => { const r = await readyz(gw); return r.status === 200 ? r : null; }, scaled(10000), '/readyz 200');
    assert.equal(after.body.servers[0].state, 'ok');
    assert.deepEqual(statesOf(await metrics(gw), 'example'), only('ok'));
    await gw.waitLog(/pool child stopped: idle for pool_idle_timeout_s/, scaled(10000));
    await waitFor(() => reaped(pid), scaled(5000), `probe ${pid} reaped`);
    const last = await readyz(gw);
    assert.equal(last.status, 200, 'a server that served stays ok with no child');
    assert.equal(poolPids(gw, 'example').length, 1, 'the probe is not replaced once the server served');
  });
});

// ---- systemd (Type=notify) -----------------------------------------------------------------------

for (const abstract of [false, true]) {
  test(`systemd notify (${abstract ? 'abstract' : 'path'} socket): READY=1 once readiness has a verdict, RELOADING=1 with MONOTONIC_USEC then READY=1 around SIGHUP, STOPPING=1 on SIGTERM; children do not get NOTIFY_SOCKET`, async () => {
    const sink = await notifySink({ abstract });
    const servers = [{ name: 'example', path: '/mcp', args: ['--hold-init'] }];
    const gw = await startGateway({ servers, env: sink.env });
    let ok = false;
    try {
      // Listening, but the probe's initialize is held: no READY=1 yet.
      await gw.waitLog(/holding the initialize answer until SIGUSR1/, scaled(10000));
      const [pid] = poolPids(gw, 'example');
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      assert.ok(!env.some((e) => e.startsWith('NOTIFY_SOCKET=')), 'the child has no NOTIFY_SOCKET');
      assert.ok(!sink.messages().some((m) => m.READY === '1'), `READY=1 before readiness: ${sink.raw()}`);
      process.kill(pid, 'SIGUSR1');
      const ready = await sink.waitFor((m) => m.READY === '1', { what: 'READY=1' });
      assert.equal(ready.STATUS, 'ready: 1 of 1 servers serve');
      assert.equal((await readyz(gw)).status, 200, 'READY=1 when /readyz says 200');
      // A reload: RELOADING=1 stamped with CLOCK_MONOTONIC (node's hrtime), then READY=1.
      const n = sink.messages().length;
      const t0 = process.hrtime.bigint() / 1000n;
      gw.proc.kill('SIGHUP');
      const again = await sink.waitFor((m) => m.READY === '1', { from: n, what: 'READY=1 after SIGHUP' });
      const t1 = process.hrtime.bigint() / 1000n;
      const reloading = sink.messages().slice(n, again.index);
      assert.equal(reloading.length, 1, sink.raw().join('\n'));
      assert.equal(reloading[0].RELOADING, '1');
      const usec = BigInt(reloading[0].MONOTONIC_USEC);
      assert.ok(usec >= t0 && usec <= t1, `MONOTONIC_USEC ${usec} within [${t0}, ${t1}]`);
      await gw.waitLog(/SIGHUP: configuration reloaded/);
      // A refused file: reloading, then ready again with the running configuration.
      const m = sink.messages().length;
      fs.writeFileSync(gw.conf, `${fs.readFileSync(gw.conf, 'utf8')}\nno_such_key = 1\n`);
      gw.proc.kill('SIGHUP');
      await sink.waitFor((x) => x.READY === '1', { from: m + 1, what: 'READY=1 after a refused SIGHUP' });
      assert.equal(sink.messages()[m].RELOADING, '1');
      await gw.stop();
      const stopping = await sink.waitFor((x) => x.STOPPING === '1', { what: 'STOPPING=1' });
      assert.match(stopping.STATUS, /^stopping \(SIGTERM\)/);
      ok = true;
    } finally {
      if (!ok) { await gw.stop({ expect: null }).catch(() => {}); console.log(`notify: ${sink.raw().join('\n')}\nlog (tail):\n${gw.logs().slice(-4000)}`); }
      await sink.close();
    }
  });
}

test('systemd notify: a gateway whose only server is broken still says READY=1 (it runs, and /readyz says why), with a STATUS that says it cannot serve', async () => {
  const sink = await notifySink();
  const dir = tmpdir('mcpgw-ready-notify-');
  try {
    await withGateway({ servers: [{ name: 'nocmd', path: '/mcp', command: `${dir}/missing` }], env: sink.env }, async () => {
      const ready = await sink.waitFor((m) => m.READY === '1', { what: 'READY=1' });
      assert.equal(ready.STATUS, 'not ready: no server can serve (0 of 1 servers serve)');
    });
  } finally {
    await sink.close();
  }
});
