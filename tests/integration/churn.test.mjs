// SPDX-License-Identifier: MIT
// Resource hygiene under churn: thousands of sessions created and ended in a loop (each with its
// own child) leave the gateway's fd count, child count and RSS back where they started. The loop
// is bounded in count (GW_CHURN_SESSIONS, default 10000) and in time; the figures are reported
// with t.diagnostic so they appear in the TAP output.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { test } from 'node:test';

import { ACCEPT_BOTH, EXAMPLE, MATRIX_POOLED, metricSamples, request, rpc, startGateway, waitFor } from '../lib/gw.mjs';

const TOKEN = 'churn-test-token-0123456789abcdefghij';
const WARMUP = 200;
const SESSIONS = Number(process.env.GW_CHURN_SESSIONS || 10000);
const WORKERS = Number(process.env.GW_CHURN_WORKERS || 8);
const SLOW_EVERY = 25; // i % 50 === 25: DELETE while a slow tool call is in flight
const GET_EVERY = 50; // i % 50 === 0: the client drops an open GET stream, then DELETE
// Plain build only (ASan's quarantine dominates its RSS). Measured: 24..380 KiB after 3000 to
// 10000 sessions, most of it in the first thousand; 2 MiB still catches ~200 B kept per session.
const RSS_GROWTH_MAX_KIB = 2048;
const SESSION_MS = 30000; // one session, all its requests
const CHURN_MS = 240000; // the whole loop (measured: ~10 s plain, ~35 s ASan on 2 cores)
const SETTLE_MS = 30000; // children reaped and fds closed after a phase (stop ladder: 2 s + 3 s)

assert.ok(Number.isInteger(SESSIONS) && SESSIONS > 0, `GW_CHURN_SESSIONS=${process.env.GW_CHURN_SESSIONS}`);
assert.ok(Number.isInteger(WORKERS) && WORKERS > 0, `GW_CHURN_WORKERS=${process.env.GW_CHURN_WORKERS}`);

// --- /proc readings of the gateway -------------------------------------------------------------

const fdCount = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;

/** The gateway's sockets, as their /proc links (socket:[inode]). */
function socketLinks(pid) {
  const out = new Set();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let l;
    try { l = fs.readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
    if (l.startsWith('socket:')) out.add(l);
  }
  return out;
}

function fdList(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try { return `${fd}->${fs.readlinkSync(`/proc/${pid}/fd/${fd}`)}`; } catch { return `${fd}->?`; }
  }).join(' ');
}

/** Processes whose parent is pid (zombies included: they count until the gateway reaps them). */
function childCount(pid) {
  let n = 0;
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let st;
    try { st = fs.readFileSync(`/proc/${e}/stat`, 'utf8'); } catch { continue; }
    if (Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === pid) n++;
  }
  return n;
}

const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const isAsan = (pid) => /libasan|libclang_rt\.asan/.test(fs.readFileSync(`/proc/${pid}/maps`, 'utf8'));
const mib = (kib) => `${(kib / 1024).toFixed(1)} MiB`;

// --- HTTP over a keep-alive agent ----------------------------------------------------------------

/** Rejects when p has not settled within ms (a hung request fails the test instead of hanging it). */
function bounded(p, ms, what) {
  let timer;
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no end within ${ms} ms`)), ms); });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

function send(gw, agent, method, { sid, version, body, accept = ACCEPT_BOTH } = {}) {
  const headers = { Accept: accept };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (sid) headers['Mcp-Session-Id'] = sid;
  if (version) headers['MCP-Protocol-Version'] = version;
  return request(gw.url, { method, headers, body, agent });
}

/** Resolves at the end of r's body; event-driven (r.done() polls every 10 ms: four polls a session). */
function ended(r, ms = 10000) {
  if (r.ended) return Promise.resolve(r.text());
  const end = new Promise((resolve) => { for (const ev of ['end', 'close', 'error']) r.res.once(ev, () => resolve(r.text())); });
  return bounded(end, ms, 'response end');
}

const answerTo = (r, id) => r.events().map((e) => e.json).find((j) => j && j.id === id && ('result' in j || 'error' in j));

async function openSession(gw, agent, i) {
  const id = `init-${i}`;
  const r = await send(gw, agent, 'POST', { body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'churn', version: '1' } }, id) });
  await ended(r);
  assert.equal(r.status, 200, `initialize ${i}: ${r.text()}`);
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid, `initialize ${i}: no Mcp-Session-Id`);
  const ans = answerTo(r, id);
  assert.ok(ans?.result, `initialize ${i}: ${r.text()}`);
  const version = ans.result.protocolVersion;
  const n = await send(gw, agent, 'POST', { sid, version, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
  await ended(n);
  assert.equal(n.status, 202, `initialized ${i}: ${n.text()}`);
  return { sid, version };
}

async function echo(gw, agent, s, i) {
  const id = `echo-${i}`;
  const text = `churn ${i}`;
  const r = await send(gw, agent, 'POST', { ...s, body: rpc('tools/call', { name: 'echo', arguments: { text } }, id) });
  await ended(r);
  assert.equal(r.status, 200, `echo ${i}: ${r.text()}`);
  assert.equal(answerTo(r, id)?.result?.content?.[0]?.text, text, `echo ${i}: ${r.text()}`);
}

async function remove(gw, agent, s, i) {
  const d = await send(gw, agent, 'DELETE', { sid: s.sid, version: s.version, accept: '*/*' });
  await ended(d);
  assert.equal(d.status, 200, `DELETE ${i}: ${d.text()}`);
}

/** One session: initialize, an echo checked for its answer, then one of three endings. */
async function oneSession(gw, agent, i) {
  const s = await openSession(gw, agent, i);
  await echo(gw, agent, s, i);
  if (i % GET_EVERY === 0) {
    // The client vanishes from an open GET stream, then ends the session.
    const g = await send(gw, agent, 'GET', { sid: s.sid, version: s.version, accept: 'text/event-stream' });
    assert.equal(g.status, 200, `GET ${i}: ${g.text()}`);
    g.drop();
    await remove(gw, agent, s, i);
  } else if (i % GET_EVERY === SLOW_EVERY) {
    // DELETE while a slow call is in flight at the child (its progress proves it got there):
    // the call's stream ends with an error answer.
    const id = `slow-${i}`;
    const r = await send(gw, agent, 'POST', { ...s, body: rpc('tools/call', { name: 'slow', arguments: { steps: 100000, interval_ms: 10 }, _meta: { progressToken: id } }, id) });
    assert.equal(r.status, 200, `slow ${i}: ${r.text()}`);
    await r.waitEvent((m) => m.method === 'notifications/progress' && m.params?.progressToken === id, 10000);
    await remove(gw, agent, s, i);
    await ended(r);
    const ans = answerTo(r, id);
    assert.equal(typeof ans?.error?.code, 'number', `slow ${i} ends with an error answer: ${r.text().slice(-500)}`);
  } else {
    await remove(gw, agent, s, i);
  }
}

/** Runs sessions [from, to) on WORKERS workers, each on a keep-alive agent; onDone per session. */
async function churn(gw, from, to, onDone = () => {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 * WORKERS + 2 });
  const deadline = Date.now() + CHURN_MS;
  let next = from;
  const worker = async () => {
    for (let i = next++; i < to; i = next++) {
      if (Date.now() > deadline) throw new Error(`churn: still at session ${i} after ${CHURN_MS} ms`);
      await bounded(oneSession(gw, agent, i), SESSION_MS, `session ${i}`);
      onDone(i);
    }
  };
  try {
    await Promise.all(Array.from({ length: WORKERS }, worker));
  } finally {
    agent.destroy(); // closes the idle keep-alive connections: the gateway's fds for them go too
  }
}

/** The children an idle gateway keeps: none, or (the pooled matrix run) the pool's one. */
const IDLE_CHILDREN = MATRIX_POOLED ? 1 : 0;

async function openSessions(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  await ended(r);
  assert.equal(r.status, 200, r.text());
  return metricSamples(r.text()).mcpgw_sessions_open;
}

async function adminCounters(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  await ended(r);
  assert.equal(r.status, 200, r.text());
  return r.json().counters;
}

test(`churn: ${SESSIONS} sessions created and ended leave fds, children and RSS where they started`, async (t) => {
  const gw = await startGateway({
    gateway: { admin_token: TOKEN, log_level: 'info' },
    // No --log (10k children appending to one file). An ASan-built child's exit-time leak check
    // (LeakSanitizer stops the world) more than doubles its cost; its leaks are not the subject
    // here, the gateway's are (the variable means nothing to a plain build).
    servers: [{ name: 'example', path: '/mcp', command: EXAMPLE, env: 'ASAN_OPTIONS=detect_leaks=0' }],
  });
  const pid = gw.proc.pid;
  let ok = false;
  try {
    await gw.waitLog(/ started \(/); // logged after "listening on", once MHD's epoll fd exists
    const asan = isAsan(pid);
    const startFds = fdCount(pid);
    const startSockets = socketLinks(pid);
    // Idle: no socket but those it started with (the listeners, its stdio), so no client's
    // connection left open. The closes after agent.destroy() reach the gateway in their own time.
    const noClientSockets = () => [...socketLinks(pid)].every((l) => startSockets.has(l));

    // Warm-up: allocator pools and MHD's connection structures primed, then everything settled.
    await churn(gw, 0, WARMUP);
    const warmedAt = Date.now();
    // (A pooled server's pool child, started by the warm-up, stays: it is in the baseline.)
    const idleFds = MATRIX_POOLED
      ? await waitFor(() => childCount(pid) === IDLE_CHILDREN && noClientSockets() && fdCount(pid), SETTLE_MS,
        'the pool child and no client connection').catch((e) => {
        throw new Error(`${e.message}: children ${childCount(pid)}, fds ${fdList(pid)}`);
      })
      : startFds;
    await waitFor(() => childCount(pid) === IDLE_CHILDREN && fdCount(pid) === idleFds, SETTLE_MS,
      `${IDLE_CHILDREN} children and the fds of an idle gateway (${idleFds}) after the warm-up`).catch((e) => {
      throw new Error(`${e.message}: children ${childCount(pid)}, fds ${fdList(pid)}`);
    });
    const idleAfterMs = Date.now() - warmedAt;
    const base = { fds: fdCount(pid), children: childCount(pid), rss: rssKiB(pid) };

    // Churn, with a reading every tenth of the way so a creep shows in the report.
    const marks = [];
    const step = Math.max(1, Math.floor(SESSIONS / 10));
    let done = 0;
    const t0 = Date.now();
    await churn(gw, WARMUP, WARMUP + SESSIONS, () => {
      if (++done % step === 0) marks.push(`${done}: fds ${fdCount(pid)} children ${childCount(pid)} rss ${mib(rssKiB(pid))}`);
    });
    const secs = (Date.now() - t0) / 1000;

    const c = await adminCounters(gw);
    // Settled, or not by the deadline: the figures are reported either way, then asserted.
    const settled = await waitFor(() => childCount(pid) === IDLE_CHILDREN && fdCount(pid) === base.fds, SETTLE_MS,
      'settled').then(() => true, () => false);
    const end = { fds: fdCount(pid), children: childCount(pid), rss: rssKiB(pid) };

    t.diagnostic(`build: ${asan ? 'AddressSanitizer' : 'plain'}; ${SESSIONS} sessions (+${WARMUP} warm-up), ${WORKERS} workers, every ${GET_EVERY}th drops a GET stream, every ${GET_EVERY}th (offset ${SLOW_EVERY}) is deleted with a slow call in flight`);
    t.diagnostic(`elapsed ${secs.toFixed(1)} s, ${(SESSIONS / secs).toFixed(0)} sessions/s`);
    t.diagnostic(`idle ${idleAfterMs} ms after the warm-up's last session`);
    t.diagnostic(`baseline: fds ${base.fds}, children ${base.children}, rss ${base.rss} KiB (${mib(base.rss)})`);
    t.diagnostic(`end:      fds ${end.fds}, children ${end.children}, rss ${end.rss} KiB (${mib(end.rss)}), growth ${end.rss - base.rss} KiB`);
    for (const m of marks) t.diagnostic(`after ${m}`);
    t.diagnostic(`counters: ${JSON.stringify(c)}`);

    // The admin view's counters are child-mode sessions'; /metrics counts both modes open.
    if (!MATRIX_POOLED) {
      assert.equal(c.sessions_created, WARMUP + SESSIONS, 'sessions created');
      assert.equal(c.sessions_closed, WARMUP + SESSIONS, 'sessions closed');
      assert.equal(c.sessions_open, 0, 'sessions open');
    }
    assert.equal(await openSessions(gw), 0, 'sessions open');
    assert.ok(settled, `within ${SETTLE_MS} ms of the last session: children ${end.children} (want ${IDLE_CHILDREN}), fds ${end.fds} (want ${base.fds}): ${fdList(pid)}`);
    assert.equal(end.children, IDLE_CHILDREN);
    assert.equal(end.fds, base.fds);
    if (!asan) {
      assert.ok(end.rss - base.rss <= RSS_GROWTH_MAX_KIB,
        `RSS grew by ${end.rss - base.rss} KiB (${base.rss} -> ${end.rss}), more than ${RSS_GROWTH_MAX_KIB} KiB`);
    }
    ok = true;
  } finally {
    if (ok) await gw.stop();
    else {
      await gw.stop({ expect: null }).catch(() => {});
      console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    }
  }
});
