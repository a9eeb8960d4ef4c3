// SPDX-License-Identifier: MIT
// Operating the gateway: GET /metrics (Prometheus text format, access rules, counters that move
// with real traffic), GET /readyz, draining on SIGTERM (finish in flight, deadline, second signal),
// reloading the configuration on SIGHUP (old sessions keep their definition, new ones use the new
// one, an invalid file changes nothing, listen stays), and a gateway killed with SIGKILL leaving
// no child behind.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { callTool, del, EXAMPLE, MATRIX_POOLED, GW_BIN, initSession, matrixServerLines, pidAlive, pooledSkip, post, reaped, request, rpc, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { V, mpost, msgsOf } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const TOKEN = 'ops-test-token-0123456789abcdefghijkl';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

// --- small helpers -----------------------------------------------------------------------------

/** A plain HTTP request to the gateway (not an MCP endpoint); the body is read to the end. */
async function fetchPath(gw, p, { method = 'GET', headers = {}, body, agent } = {}) {
  const r = await request(`${gw.base}${p}`, { method, headers, body, agent });
  await r.done();
  return r;
}

/**
 * An http.Agent holding n idle keep-alive connections to gw, opened now (a ping in session s on
 * each; /healthz would not do: an answer before the request's end closes its connection): once
 * the gateway drains, its listener is closed and only connections opened before reach it.
 */
async function keptConnections(gw, s, n) {
  const agent = new http.Agent({ keepAlive: true });
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': s.sid, 'MCP-Protocol-Version': s.version };
  const rs = await Promise.all(Array.from({ length: n }, (_, i) => request(gw.url, { headers, agent, body: rpc('ping', undefined, `keep-${i}`) })));
  for (const r of rs) {
    await r.done();
    assert.equal(r.status, 200, r.text());
  }
  // A socket goes back to the agent's free list just after its response ended.
  await waitFor(() => Object.values(agent.freeSockets).flat().length === n, scaled(5000), `${n} idle connections`);
  return agent;
}

/** Resolves once a new connection to gw is refused (the listener is closed), or throws. */
function assertRefused(gw) {
  return new Promise((resolve, reject) => {
    const c = net.connect(gw.port, gw.host);
    c.on('connect', () => { c.destroy(); reject(new Error(`${gw.base}: a new connection was accepted while draining`)); });
    c.on('error', (e) => (e.code === 'ECONNREFUSED' ? resolve() : reject(e)));
  });
}

/** The gateway's exit within ms (it must exit by itself), or throws. */
async function exitWithin(gw, ms) {
  let t;
  const r = await Promise.race([gw.exited, new Promise((res) => { t = setTimeout(() => res(null), ms); })]);
  clearTimeout(t);
  if (r === null) throw new Error(`gateway did not exit by itself within ${ms} ms`);
  return r;
}

const countMatches = (text, re) => [...text.matchAll(new RegExp(re.source, 'g'))].length;

/** Waits for the n-th occurrence of re in the gateway log. */
const waitLogCount = (gw, re, n, ms = scaled(5000)) => waitFor(() => countMatches(gw.logs(), re) >= n, ms, `${n}x log ${re}`);

/**
 * Starts a cancel_self tools/call on its own POST stream: it runs until cancelled, or until
 * go(pid) makes it answer `released`. Resolves once the child has read it.
 */
async function startHeld(gw, sid, tag, { url } = {}) {
  const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag } }, tag), { sid, url });
  assert.equal(r.status, 200, `${tag}: HTTP ${r.status} ${r.text()}`);
  const seen = await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.arguments?.tag === tag), scaled(5000), `child to read ${tag}`);
  return { r, childId: seen.id };
}

/** The example server's "go": its cancel_self calls answer `released`. */
const go = (pid) => process.kill(pid, 'SIGUSR1');

function readJsonLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => {
    try { return JSON.parse(l); } catch { return { raw: l }; }
  });
}

/** INI text in the harness's format (so a rewritten gw.conf looks like the one it started with). */
function iniText(gateway, servers) {
  const g = { listen: '127.0.0.1:0', log_level: 'debug', shutdown_drain_ms: 0, ...gateway };
  let ini = '[gateway]\n';
  for (const [k, v] of Object.entries(g)) ini += `${k} = ${v}\n`;
  for (const s of servers) {
    ini += `[server:${s.name}]\n`;
    if (s.path) ini += `path = ${s.path}\n`;
    ini += `command = ${s.command}\n`;
    if (s.env) ini += `env = ${s.env}\n`;
    ini += matrixServerLines(); // as startGateway writes them: a reload keeps the matrix's mode
  }
  return ini;
}

/** Why a test of the figures of sessions with a child of their own does not apply pooled. */
const CHILD_FIGURES = 'checks the figures of sessions with a child of their own (spawns, sessions_created_total, mode child, mcpgw_inflight_requests); pooled tests a pooled server\'s';

const exampleCmd = (log, ...args) => [EXAMPLE, '--log', log, ...args].join(' ');

function environOf(pid) {
  return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
}

function statOf(pid) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return { state: f[0], ppid: Number(f[1]) };
  } catch {
    return null;
  }
}

/** Gone, or a zombie nobody has reaped yet: either way no longer running. */
const dead = (pid) => !pidAlive(pid) && (statOf(pid) === null || statOf(pid).state === 'Z');

/** Whether process pid ignores signal number sig (SigIgn of /proc/PID/status). */
function sigIgnored(pid, sig) {
  const m = /SigIgn:\s*([0-9a-f]+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return (BigInt(`0x${m[1]}`) & (1n << BigInt(sig - 1))) !== 0n;
}

/** Pids whose parent is pid (from /proc). */
function childrenOf(pid) {
  const out = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    if (statOf(Number(e))?.ppid === pid) out.push(Number(e));
  }
  return out;
}

// --- Prometheus text format ------------------------------------------------------------------

const HIST_SUFFIXES = ['_bucket', '_sum', '_count'];

/**
 * Parses text format 0.0.4 strictly: every line is # HELP, # TYPE or a sample of a family whose
 * HELP and TYPE came first. Returns {families: Map(name -> {help, type}), samples: [{name, labels,
 * value}], get(name, labels)}.
 */
function parseProm(text) {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  const families = new Map();
  const samples = [];
  const byKey = new Map();
  const lines = text.split('\n').slice(0, -1);
  for (const line of lines) {
    let m;
    if ((m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$/.exec(line))) {
      assert.ok(!families.get(m[1])?.help, `one HELP for ${m[1]}`);
      families.set(m[1], { ...(families.get(m[1]) || {}), help: m[2] });
      continue;
    }
    if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      assert.ok(families.get(m[1])?.help, `HELP before TYPE for ${m[1]}`);
      assert.ok(!families.get(m[1]).type, `one TYPE for ${m[1]}`);
      families.get(m[1]).type = m[2];
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, valueText] = m;
    const labels = {};
    if (labelText !== undefined) {
      const lre = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y;
      let pos = 0;
      while (pos < labelText.length) {
        lre.lastIndex = pos;
        const lm = lre.exec(labelText);
        assert.ok(lm, `labels of ${JSON.stringify(line)}`);
        labels[lm[1]] = lm[2];
        pos = lre.lastIndex;
      }
    }
    const value = valueText === '+Inf' ? Infinity : Number(valueText);
    assert.ok(!Number.isNaN(value), `a number: ${JSON.stringify(line)}`);
    let fam = families.get(name);
    if (!fam) {
      const suf = HIST_SUFFIXES.find((s) => name.endsWith(s));
      fam = suf && families.get(name.slice(0, -suf.length));
      assert.ok(fam?.type === 'histogram', `${name} belongs to a family announced before it`);
    }
    assert.ok(fam.help && fam.type, `HELP and TYPE before the samples of ${name}`);
    const key = promKey(name, labels);
    assert.ok(!byKey.has(key), `one sample ${key}`);
    byKey.set(key, value);
    samples.push({ name, labels, value });
  }
  return {
    families,
    samples,
    text,
    /**
     * The value of one sample; throws when the series is missing. Without a server label, a
     * family of per-server series gives its sum over the servers.
     */
    get(name, labels = {}) {
      const k = promKey(name, labels);
      if (byKey.has(k) || 'server' in labels) {
        assert.ok(byKey.has(k), `series ${k} present`);
        return byKey.get(k);
      }
      const want = Object.keys(labels).length + 1;
      const of = samples.filter((s) => s.name === name && 'server' in s.labels && Object.keys(s.labels).length === want
        && Object.entries(labels).every(([l, v]) => s.labels[l] === v));
      assert.ok(of.length > 0, `series ${k} present (or per server)`);
      return of.reduce((sum, s) => sum + s.value, 0);
    },
  };
}

function promKey(name, labels) {
  const ks = Object.keys(labels).sort();
  return ks.length ? `${name}{${ks.map((k) => `${k}="${labels[k]}"`).join(',')}}` : name;
}

/** GET /metrics (asserting 200 and the text format's content type) and parse it. */
async function metrics(gw, headers = {}, { agent } = {}) {
  const r = await fetchPath(gw, '/metrics', { headers, agent });
  assert.equal(r.status, 200, r.text());
  assert.match(r.headers['content-type'], /^text\/plain/);
  assert.match(r.headers['content-type'], /version=0\.0\.4/);
  return parseProm(r.text());
}

/** The label sets each family must expose, and its type. */
const LABELS = (key, values) => values.map((v) => ({ [key]: v }));
const CLOSE_REASONS = ['deleted', 'expired', 'client_disconnected', 'child_exited', 'shutdown', 'other', 'admin', 'token_renewal'];
const CLASSES = ['initialize', 'ping', 'tools', 'resources', 'prompts', 'completion', 'logging', 'tasks', 'sampling', 'elicitation', 'roots', 'other'];
const CANCEL_REASONS = ['client', 'client_disconnected', 'timeout', 'deleted', 'expired', 'shutdown', 'reload', 'input_not_provided', 'child_ended', 'admin', 'other'];
const PER_SERVER = (servers) => servers.map((server) => ({ server }));
const BY_SERVER = (key, values) => (servers) => servers.flatMap((server) => values.map((v) => ({ server, [key]: v })));
const VERSION = /mcp-gateway (\S+)/.exec(execFileSync(GW_BIN, ['--version'], { encoding: 'utf8' }))[1];
// [type, label sets (or a function of the configured servers; null: a histogram, 'server': one
// histogram per server), whether the value may be fractional]
const FAMILIES = {
  mcpgw_build_info: ['gauge', [{ version: VERSION }]],
  process_cpu_seconds_total: ['counter', [{}], 'float'],
  process_resident_memory_bytes: ['gauge', [{}]],
  process_open_fds: ['gauge', [{}]],
  process_start_time_seconds: ['gauge', [{}]],
  mcpgw_config_last_reload_successful: ['gauge', [{}]],
  mcpgw_config_last_reload_success_timestamp_seconds: ['gauge', [{}]],
  mcpgw_sessions_open: ['gauge', PER_SERVER],
  // Sessions open by mode: every mode of every configured server from the start.
  mcpgw_sessions: ['gauge', BY_SERVER('mode', ['child', 'pooled'])],
  mcpgw_sessions_created_total: ['counter', PER_SERVER],
  mcpgw_sessions_closed_total: ['counter', BY_SERVER('reason', CLOSE_REASONS)],
  mcpgw_children_running: ['gauge', PER_SERVER],
  mcpgw_children_spawned_total: ['counter', PER_SERVER],
  mcpgw_children_spawn_failures_total: ['counter', PER_SERVER],
  mcpgw_children_exited_total: ['counter', BY_SERVER('status', ['exit_zero', 'exit_nonzero', 'signal'])],
  mcpgw_children_resident_memory_bytes: ['gauge', PER_SERVER],
  // The box's seccomp refusals: a (server, syscall) series appears with its first refusal.
  mcpgw_sandbox_refused_total: ['counter', []],
  mcpgw_inflight_requests: ['gauge', BY_SERVER('direction', ['to_child', 'to_client'])],
  mcpgw_requests_total: ['counter', (servers) => servers.flatMap((server) => ['to_child', 'to_client'].flatMap((d) => CLASSES.map((c) => ({ server, direction: d, class: c }))))],
  // One series per configured server for each reason (both eras): a function of the servers.
  mcpgw_cancels_total: ['counter', (servers) => servers.flatMap((server) => [...CANCEL_REASONS.map((r) => ({ server, direction: 'to_child', reason: r })), { server, direction: 'to_client', reason: 'child' }])],
  mcpgw_late_messages_dropped_total: ['counter', PER_SERVER],
  mcpgw_request_timeouts_total: ['counter', PER_SERVER],
  mcpgw_child_lines_invalid_total: ['counter', PER_SERVER],
  mcpgw_notifications_dropped_total: ['counter', PER_SERVER],
  mcpgw_child_stdin_bytes_total: ['counter', PER_SERVER],
  mcpgw_child_stdout_bytes_total: ['counter', PER_SERVER],
  mcpgw_request_duration_seconds: ['histogram', 'server'],
  mcpgw_spawn_duration_seconds: ['histogram', 'server'],
  mcpgw_sessions_asleep: ['gauge', PER_SERVER],
  mcpgw_child_sleeps_total: ['counter', PER_SERVER],
  mcpgw_child_wakes_total: ['counter', PER_SERVER],
  mcpgw_child_wake_failures_total: ['counter', PER_SERVER],
  mcpgw_child_wake_duration_seconds: ['histogram', 'server'],
  mcpgw_server_state: ['gauge', BY_SERVER('state', ['ok', 'failing', 'broken', 'drained', 'starting'])],
  mcpgw_ready: ['gauge', [{}]],
  mcpgw_http_requests_open: ['gauge', [{}]],
  mcpgw_http_connections_parked: ['gauge', [{}]],
  mcpgw_http_responses_total: ['counter', LABELS('code', ['1xx', '2xx', '3xx', '4xx', '5xx'])],
  mcpgw_http_received_bytes_total: ['counter', [{}]],
  mcpgw_http_sent_bytes_total: ['counter', [{}]],
  mcpgw_auth_refused_total: ['counter', BY_SERVER('reason', ['missing', 'invalid', 'insufficient_scope'])],
  mcpgw_auth_unavailable_total: ['counter', [{}]],
  mcpgw_auth_waits_total: ['counter', [{}]],
  mcpgw_auth_fetches_total: ['counter', [{}]],
  mcpgw_auth_fetch_failures_total: ['counter', [{}]],
  mcpgw_auth_jwks_keys: ['gauge', [{}]],
  mcpgw_auth_introspections_total: ['counter', [{}]],
  mcpgw_auth_introspection_failures_total: ['counter', [{}]],
  mcpgw_rate_limited_total: ['counter', [{}]],
  mcpgw_slow_clients_closed_total: ['counter', [{}]],
  mcpgw_http_host_refused_total: ['counter', [{}]],
  mcpgw_principals: ['gauge', [{}]],
  // The stateless pools: every configured server's series from the start.
  mcpgw_pool_children: ['gauge', BY_SERVER('state', ['ready', 'starting'])],
  mcpgw_pools_retired: ['gauge', PER_SERVER],
  mcpgw_pool_inflight_requests: ['gauge', PER_SERVER],
  mcpgw_pool_requests_total: ['counter', PER_SERVER],
  mcpgw_pool_messages_dropped_total: ['counter', BY_SERVER('reason', ['late', 'slow_reader', 'unattributed', 'log_level', 'invalid'])],
  mcpgw_pool_child_requests_total: ['counter', BY_SERVER('outcome', ['bridged', 'refused'])],
  mcpgw_pool_input_rounds_total: ['counter', PER_SERVER],
  mcpgw_pool_held_calls: ['gauge', PER_SERVER],
  mcpgw_pool_request_states_refused_total: ['counter', PER_SERVER],
  mcpgw_pool_child_events_total: ['counter', BY_SERVER('event', ['started', 'start_failed', 'failed', 'idle_stopped', 'refused_restart', 'principal_stopped'])],
  mcpgw_pool_principals: ['gauge', PER_SERVER],
  mcpgw_pool_request_duration_seconds: ['histogram', 'server'],
  // The per-tool policy: a server's series appear with its first event (no policy in these tests).
  mcpgw_policy_denied_total: ['counter', []],
  mcpgw_audit_records_total: ['counter', [{}]],
  mcpgw_audit_write_failures_total: ['counter', [{}]],
  mcpgw_policy_tools_hidden_total: ['counter', []],
  // The admin actions (admin_actions.test.mjs): every action and outcome from the start.
  mcpgw_admin_actions_total: ['counter', ['end', 'drain', 'resume', 'restart'].flatMap((action) => ['ok', 'not_found', 'refused'].map((outcome) => ({ action, outcome })))],
};

/** Every family with HELP, TYPE and its series (for the configured servers); histograms consistent. */
function checkShape(m, servers = ['example']) {
  for (const [name, [type, sets, float]] of Object.entries(FAMILIES)) {
    const f = m.families.get(name);
    assert.ok(f, `family ${name} present`);
    assert.ok(f.help.length > 0, `${name} has a HELP text`);
    assert.equal(f.type, type, `TYPE of ${name}`);
    if (sets === null || sets === 'server') {
      const per = sets === 'server' ? servers.map((server) => ({ server })) : [{}];
      for (const l of per) checkHistogram(m, name, l);
      const series = new Set(m.samples.filter((s) => s.name === `${name}_count`).map((s) => promKey(name, s.labels)));
      assert.deepEqual([...series].sort(), per.map((l) => promKey(name, l)).sort(), `exactly the expected series of ${name}`);
      continue;
    }
    const labelSets = typeof sets === 'function' ? sets(servers) : sets;
    for (const l of labelSets) {
      const v = m.get(name, l);
      assert.ok((float ? Number.isFinite(v) : Number.isInteger(v)) && v >= 0, `${promKey(name, l)} = ${v}`);
    }
    const n = m.samples.filter((s) => s.name === name).length;
    assert.equal(n, labelSets.length, `exactly the expected series of ${name}`);
  }
  for (const s of m.samples) {
    const fam = m.families.has(s.name) ? s.name : s.name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(fam in FAMILIES, `no unexpected family: ${s.name}`);
  }
}

/** _bucket{le} cumulative and non-decreasing with increasing le (up to 300 s), +Inf == _count, _sum >= 0. */
function checkHistogram(m, name, labels = {}) {
  const own = (s) => Object.entries(labels).every(([l, v]) => s.labels[l] === v);
  const buckets = m.samples.filter((s) => s.name === `${name}_bucket` && own(s));
  assert.ok(buckets.length >= 2, `${name} has buckets`);
  assert.equal(buckets.at(-1).labels.le, '+Inf', `${name}: +Inf is the last bucket`);
  assert.equal(buckets.at(-2).labels.le, '300', `${name}: the last finite bucket is 300 s`);
  let lastLe = -Infinity;
  let lastV = 0;
  for (const b of buckets) {
    assert.deepEqual(Object.keys(b.labels), [...Object.keys(labels), 'le']);
    const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    assert.ok(!Number.isNaN(le) && le > lastLe, `${name}: le increasing (${b.labels.le})`);
    assert.ok(b.value >= lastV, `${name}: cumulative buckets never decrease (le=${b.labels.le})`);
    lastLe = le;
    lastV = b.value;
  }
  const count = m.get(`${name}_count`, labels);
  const sum = m.get(`${name}_sum`, labels);
  assert.equal(m.get(`${name}_bucket`, { ...labels, le: '+Inf' }), count, `${name}: +Inf bucket == _count`);
  assert.ok(sum >= 0 && Number.isFinite(sum), `${name}_sum = ${sum}`);
  if (count === 0) assert.equal(sum, 0);
  return { count, sum };
}

// --- /metrics: format and access ---------------------------------------------------------------

test('GET /metrics: text format 0.0.4 with # HELP and # TYPE for every family; loopback without admin_token; POST -> 405', async () => {
  await withGateway({}, async (gw) => {
    const m = await metrics(gw);
    checkShape(m);
    // a fresh gateway
    assert.equal(m.get('mcpgw_sessions_open'), 0);
    assert.equal(m.get('mcpgw_sessions', { mode: 'child' }), 0);
    assert.equal(m.get('mcpgw_sessions_created_total'), 0);
    assert.equal(m.get('mcpgw_children_running'), 0);
    // No child of its server has started yet (a scrape starts none): not counted as able to serve.
    assert.equal(m.get('mcpgw_server_state', { server: 'example', state: 'starting' }), 1);
    assert.equal(m.get('mcpgw_ready'), 0);
    assert.equal(m.get('mcpgw_request_duration_seconds_count'), 0);
    assert.equal(m.get('mcpgw_spawn_duration_seconds_count'), 0);
    const r = await fetchPath(gw, '/metrics');
    assert.equal(r.headers['cache-control'], 'no-store');
    const p = await fetchPath(gw, '/metrics', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x' });
    assert.equal(p.status, 405, p.text());
    assert.equal(p.headers.allow, 'GET, HEAD');
    const d = await fetchPath(gw, '/metrics', { method: 'DELETE' });
    assert.equal(d.status, 405, d.text());
    // the probes take GET and HEAD only, like /metrics
    for (const probe of ['/healthz', '/readyz']) {
      for (const method of ['POST', 'DELETE']) {
        const x = await fetchPath(gw, probe, { method });
        assert.equal(x.status, 405, `${method} ${probe}: ${x.text()}`);
        assert.equal(x.headers.allow, 'GET, HEAD');
        assert.equal(JSON.parse(x.text()).error.code, -32600);
      }
      // /readyz: 503 "starting" until the probe its first question started is up.
      await waitFor(async () => (await fetchPath(gw, probe, { method: 'HEAD' })).status === 200, scaled(10000), `HEAD ${probe} 200`);
    }
    // a bearer token is not needed (and not checked) while admin_token is empty
    const t = await fetchPath(gw, '/metrics', { headers: { Authorization: 'Bearer whatever' } });
    assert.equal(t.status, 200);
  });
});

test('a refused Host: 403, logged at warn with the value and allowed_hosts for the first ten only, then counted; a reload logs again', async () => {
  await withGateway({}, async (gw) => {
    const m0 = await metrics(gw);
    const mcp = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    const N = 14;
    for (let i = 0; i < N; i++) {
      // Probes and the MCP endpoint alike (they check Host in different places).
      const r = i % 2
        ? await fetchPath(gw, '/healthz', { headers: { Host: `bad-${i}.example` } })
        : await fetchPath(gw, '/mcp', { method: 'POST', headers: { ...mcp, Host: `bad-${i}.example:443` }, body: rpc('ping', {}) });
      assert.equal(r.status, 403, r.text());
      assert.match(r.text(), /Host not allowed/);
    }
    const logs = gw.logs();
    for (let i = 0; i < N; i++) {
      const re = new RegExp(`^\\S+ warn refused Host "bad-${i}\\.example(:443)?".*allowed_hosts`, 'm');
      if (i < 10) assert.match(logs, re, `refusal ${i} logged`);
      else assert.doesNotMatch(logs, re, `refusal ${i} only counted`);
    }
    assert.equal(countMatches(logs, /refused Host "/), 10, 'ten refusals logged');
    assert.match(logs, /further refused Hosts are counted \(mcpgw_http_host_refused_total\)/);
    const m1 = await metrics(gw);
    assert.equal(m1.get('mcpgw_http_host_refused_total') - m0.get('mcpgw_http_host_refused_total'), N);

    // After a reload (allowed_hosts may have changed), refusals are logged again.
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/configuration reloaded/, scaled(5000));
    const long = 'x'.repeat(3000);
    const r = await fetchPath(gw, '/readyz', { headers: { Host: long } });
    assert.equal(r.status, 403);
    const line = await gw.waitLog(/^.* refused Host "x+.*$/m, scaled(5000));
    assert.ok(line[0].length < 600, `the value is cut: ${line[0].length} bytes`);
  });
});

test('GET /metrics with admin_token: 401 without or with a wrong bearer token, 200 with it; POST with it -> 405', async () => {
  await withGateway({ gateway: { admin_token: TOKEN } }, async (gw) => {
    const none = await fetchPath(gw, '/metrics');
    assert.equal(none.status, 401, none.text());
    assert.match(none.headers['www-authenticate'] || '', /^Bearer/);
    assert.ok(!/mcpgw_/.test(none.text()), 'no metrics in the refusal');
    for (const auth of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, 'Bearer ', TOKEN, `Basic ${TOKEN}`, `Bearer ${TOKEN.toUpperCase()}`]) {
      const r = await fetchPath(gw, '/metrics', { headers: { Authorization: auth } });
      assert.equal(r.status, 401, `Authorization: ${auth}`);
    }
    const ok = await metrics(gw, { Authorization: `Bearer ${TOKEN}` });
    checkShape(ok);
    const lower = await fetchPath(gw, '/metrics', { headers: { Authorization: `bearer ${TOKEN}` } });
    assert.equal(lower.status, 200, 'the scheme is case-insensitive');
    const p = await fetchPath(gw, '/metrics', { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` }, body: '' });
    assert.equal(p.status, 405, p.text());
    const p2 = await fetchPath(gw, '/metrics', { method: 'POST', body: '' });
    assert.equal(p2.status, 401, 'POST without the token is refused before the method is looked at');
  });
});

// --- /metrics: values that move with traffic ---------------------------------------------------

test('metrics follow real traffic: sessions, tools calls, in-flight gauge, a client cancel, DELETE, histograms, bytes', async (t) => {
  if (pooledSkip(t, CHILD_FIGURES)) return;
  await withGateway({}, async (gw) => {
    const m0 = await metrics(gw);
    checkShape(m0);
    const a = await initSession(gw);
    const b = await initSession(gw);
    const m1 = await metrics(gw);
    checkShape(m1);
    assert.equal(m1.get('mcpgw_sessions_open'), 2);
    assert.equal(m1.get('mcpgw_sessions', { mode: 'child' }), 2, 'each session with a child of its own');
    assert.equal(m1.get('mcpgw_sessions_created_total'), 2);
    assert.equal(m1.get('mcpgw_children_running'), 2);
    assert.equal(m1.get('mcpgw_children_spawned_total'), 2);
    assert.equal(m1.get('mcpgw_children_spawn_failures_total'), 0);
    assert.equal(m1.get('mcpgw_spawn_duration_seconds_count'), 2);
    assert.ok(m1.get('mcpgw_spawn_duration_seconds_sum') > 0, 'spawning took some time');
    assert.equal(m1.get('mcpgw_requests_total', { direction: 'to_child', class: 'initialize' }), 2);
    assert.equal(m1.get('mcpgw_request_duration_seconds_count'), 2, 'two initialize answered');
    assert.ok(m1.get('mcpgw_child_stdin_bytes_total') > 0);
    assert.ok(m1.get('mcpgw_child_stdout_bytes_total') > 0);
    assert.ok(m1.get('mcpgw_http_received_bytes_total') > m0.get('mcpgw_http_received_bytes_total'));
    assert.ok(m1.get('mcpgw_http_sent_bytes_total') > m0.get('mcpgw_http_sent_bytes_total'));
    // 2 initialize (200), 2 initialized (202), 1 /metrics (200) at least
    assert.ok(m1.get('mcpgw_http_responses_total', { code: '2xx' }) >= 5, m1.text);

    for (let i = 0; i < 3; i++) {
      const { response } = await callTool(gw, a.sid, 'echo', { text: `e${i}` });
      assert.equal(textOf(response), `e${i}`);
    }
    const m2 = await metrics(gw);
    checkShape(m2);
    assert.equal(m2.get('mcpgw_requests_total', { direction: 'to_child', class: 'tools' }), 3);
    assert.equal(m2.get('mcpgw_request_duration_seconds_count'), 5, '2 initialize + 3 echo answered');
    assert.ok(m2.get('mcpgw_request_duration_seconds_sum') > m1.get('mcpgw_request_duration_seconds_sum'));
    assert.ok(m2.get('mcpgw_child_stdin_bytes_total') > m1.get('mcpgw_child_stdin_bytes_total'));
    assert.ok(m2.get('mcpgw_child_stdout_bytes_total') > m1.get('mcpgw_child_stdout_bytes_total'));
    assert.equal(m2.get('mcpgw_inflight_requests', { direction: 'to_child' }), 0);

    // one call in flight (cancel_self: until cancelled), then cancelled by the client
    const { r: slow } = await startHeld(gw, b.sid, 'ops-slow');
    const m3 = await metrics(gw);
    assert.equal(m3.get('mcpgw_inflight_requests', { direction: 'to_child' }), 1, 'the slow call is in flight');
    assert.equal(m3.get('mcpgw_inflight_requests', { direction: 'to_client' }), 0);
    assert.equal(m3.get('mcpgw_requests_total', { direction: 'to_child', class: 'tools' }), 4);
    assert.ok(m3.get('mcpgw_http_requests_open') >= 2, 'the slow call\'s stream and this scrape are open HTTP requests');
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'ops-slow', reason: 'user abort' } }, { sid: b.sid });
    await c.done();
    assert.equal(c.status, 202);
    await slow.done(scaled(5000));
    assert.ok(!slow.events().some((e) => isAnswer(e.json)), slow.text());
    await waitFor(() => gw.childMessages().some((x) => x.method === 'notifications/cancelled'), scaled(5000), 'the cancel at the child');
    // back to the scrape itself once the cancelled call's request has finished
    await waitFor(async () => (await metrics(gw)).get('mcpgw_http_requests_open') === 1, scaled(5000), 'only the scrape open');
    const m4 = await metrics(gw);
    checkShape(m4);
    assert.equal(m4.get('mcpgw_inflight_requests', { direction: 'to_child' }), 0, 'nothing in flight after the cancel');
    assert.equal(m4.get('mcpgw_cancels_total', { server: 'example', direction: 'to_child', reason: 'client' }), 1);
    for (const reason of CANCEL_REASONS.slice(1)) assert.equal(m4.get('mcpgw_cancels_total', { server: 'example', direction: 'to_child', reason }), 0, reason);
    assert.equal(m4.get('mcpgw_request_duration_seconds_count'), 5, 'a cancelled call is not an answered one');
    assert.equal(m4.get('mcpgw_request_timeouts_total'), 0);
    assert.equal(m4.get('mcpgw_child_lines_invalid_total'), 0);
    assert.equal(m4.get('mcpgw_requests_total', { direction: 'to_child', class: 'ping' }), 0);

    // a ping and a resources/list move their classes
    const ping = await post(gw, rpc('ping', undefined, 'p1'), { sid: b.sid });
    await ping.done();
    const rl = await post(gw, rpc('resources/list', {}, 'r1'), { sid: b.sid });
    await rl.done();
    const nf = await fetchPath(gw, '/no-such-endpoint');
    assert.equal(nf.status, 404);

    // DELETE one session
    const d = await del(gw, { sid: a.sid });
    await d.done();
    assert.equal(d.status, 200);
    await waitFor(async () => (await metrics(gw)).get('mcpgw_children_running') === 1, scaled(8000), 'the deleted session\'s child reaped');
    const m5 = await metrics(gw);
    checkShape(m5);
    assert.equal(m5.get('mcpgw_sessions_open'), 1);
    assert.equal(m5.get('mcpgw_sessions', { mode: 'child' }), 1);
    assert.equal(m5.get('mcpgw_sessions_created_total'), 2);
    assert.equal(m5.get('mcpgw_sessions_closed_total', { reason: 'deleted' }), 1);
    for (const reason of CLOSE_REASONS.filter((x) => x !== 'deleted')) assert.equal(m5.get('mcpgw_sessions_closed_total', { reason }), 0, reason);
    assert.equal(m5.get('mcpgw_children_exited_total', { status: 'exit_zero' }), 1, 'the example server exits 0 on stdin EOF');
    assert.equal(m5.get('mcpgw_children_exited_total', { status: 'exit_nonzero' }), 0);
    assert.equal(m5.get('mcpgw_children_exited_total', { status: 'signal' }), 0);
    assert.equal(m5.get('mcpgw_requests_total', { direction: 'to_child', class: 'ping' }), 1);
    assert.equal(m5.get('mcpgw_requests_total', { direction: 'to_child', class: 'resources' }), 1);
    assert.equal(m5.get('mcpgw_requests_total', { direction: 'to_child', class: 'tools' }), 4);
    assert.equal(m5.get('mcpgw_requests_total', { direction: 'to_child', class: 'initialize' }), 2);
    assert.equal(m5.get('mcpgw_request_duration_seconds_count'), 7, '+ ping + resources/list');
    assert.ok(m5.get('mcpgw_http_responses_total', { code: '4xx' }) >= 1, 'the 404');
    assert.equal(m5.get('mcpgw_http_responses_total', { code: '5xx' }), 0);
    for (const k of ['mcpgw_http_received_bytes_total', 'mcpgw_http_sent_bytes_total', 'mcpgw_child_stdin_bytes_total', 'mcpgw_child_stdout_bytes_total']) {
      assert.ok(m5.get(k) >= m4.get(k), `${k} never decreases`);
    }
    // counters never go down across all snapshots
    const snaps = [m0, m1, m2, m3, m4, m5];
    for (const s of m5.samples) {
      const type = m5.families.get(s.name)?.type ?? 'histogram';
      if (type === 'gauge') continue;
      for (let i = 1; i < snaps.length; i++) {
        const prev = snaps[i - 1].samples.find((x) => x.name === s.name && promKey(x.name, x.labels) === promKey(s.name, s.labels));
        const cur = snaps[i].samples.find((x) => x.name === s.name && promKey(x.name, x.labels) === promKey(s.name, s.labels));
        assert.ok(cur.value >= prev.value, `${promKey(s.name, s.labels)} never decreases (${prev.value} -> ${cur.value})`);
      }
    }
    // the remaining session still answers
    assert.equal(textOf((await callTool(gw, b.sid, 'echo', { text: 'b' })).response), 'b');
  });
});

test('metrics: a child killed from outside counts as exited by a signal and closes its session as child_exited', async (t) => {
  if (pooledSkip(t, 'one child per session (killed from outside, it ends its session)')) return;
  await withGateway({}, async (gw) => {
    const a = await initSession(gw);
    const b = await initSession(gw);
    assert.ok(a.pid && pidAlive(a.pid));
    process.kill(a.pid, 'SIGKILL');
    await waitFor(async () => {
      const m = await metrics(gw);
      return m.get('mcpgw_children_exited_total', { status: 'signal' }) === 1 && m.get('mcpgw_sessions_closed_total', { reason: 'child_exited' }) === 1;
    }, scaled(8000), 'the killed child in the metrics');
    const m = await metrics(gw);
    checkShape(m);
    assert.equal(m.get('mcpgw_sessions_open'), 1);
    assert.equal(m.get('mcpgw_children_running'), 1);
    assert.equal(m.get('mcpgw_children_exited_total', { status: 'exit_zero' }), 0);
    assert.equal(m.get('mcpgw_children_exited_total', { status: 'exit_nonzero' }), 0);
    assert.equal(m.get('mcpgw_sessions_closed_total', { reason: 'deleted' }), 0);
    const ping = await post(gw, rpc('ping'), { sid: a.sid });
    await ping.done();
    assert.equal(ping.status, 404, 'the session of the killed child is gone');
    assert.equal(textOf((await callTool(gw, b.sid, 'echo', { text: 'alive' })).response), 'alive');
  });
});

test('metrics: a server whose command does not exist counts a spawn failure, not a session', async (t) => {
  if (pooledSkip(t, CHILD_FIGURES)) return;
  await withGateway({ servers: [{ name: 'example', path: '/mcp' }, { name: 'bad', path: '/bad', command: '/nonexistent/x' }] }, async (gw) => {
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'bad-init'), { url: `${gw.base}/bad` });
    await r.done();
    assert.ok(r.status >= 500, `initialize on /bad: HTTP ${r.status} ${r.text()}`);
    assert.ok(!r.headers['mcp-session-id'], 'no session id');
    const m = await metrics(gw);
    checkShape(m, ['example', 'bad']);
    assert.equal(m.get('mcpgw_children_spawn_failures_total'), 1);
    assert.equal(m.get('mcpgw_children_spawn_failures_total', { server: 'bad' }), 1, 'the failure is bad\'s');
    assert.equal(m.get('mcpgw_children_spawn_failures_total', { server: 'example' }), 0);
    assert.equal(m.get('mcpgw_children_spawned_total'), 0);
    assert.equal(m.get('mcpgw_sessions_created_total'), 0);
    assert.equal(m.get('mcpgw_sessions_open'), 0);
    assert.equal(m.get('mcpgw_children_running'), 0);
    assert.equal(m.get('mcpgw_spawn_duration_seconds_count'), 1, 'the failed attempt is timed too');
    assert.equal(m.get('mcpgw_http_responses_total', { code: '5xx' }), 1);
    // the good server is unaffected
    const s = await initSession(gw);
    assert.equal(textOf((await callTool(gw, s.sid, 'echo', { text: 'ok' })).response), 'ok');
    const m2 = await metrics(gw);
    checkShape(m2, ['example', 'bad']);
    assert.equal(m2.get('mcpgw_children_spawned_total'), 1);
    assert.equal(m2.get('mcpgw_children_spawn_failures_total'), 1);
    assert.equal(m2.get('mcpgw_sessions_created_total'), 1);
    // each figure on its server
    const of = (name, server, labels = {}) => m2.get(name, { server, ...labels });
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_children_spawned_total', x)), [1, 0]);
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_sessions_created_total', x)), [1, 0]);
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_sessions_open', x)), [1, 0]);
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_children_running', x)), [1, 0]);
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_requests_total', x, { direction: 'to_child', class: 'tools' })), [1, 0]);
    assert.deepEqual(['example', 'bad'].map((x) => of('mcpgw_request_duration_seconds_count', x)), [2, 0], 'initialize and the call');
    assert.equal(of('mcpgw_children_resident_memory_bytes', 'bad'), 0);
    // the live child's resident memory, as /proc says (within what it may have grown since)
    const rss = Number(fs.readFileSync(`/proc/${s.pid}/statm`, 'utf8').split(' ')[1]) * 4096;
    const seen = of('mcpgw_children_resident_memory_bytes', 'example');
    assert.ok(seen > 0 && seen > rss / 4 && seen < rss * 4, `children's memory ${seen} vs ${rss} in /proc`);
    // the gateway's own process
    assert.ok(m2.get('process_resident_memory_bytes') > 1 << 20, 'the gateway has some memory');
    assert.ok(m2.get('process_open_fds') >= 4, 'listener, epoll, the child\'s pipes');
    assert.ok(m2.get('process_cpu_seconds_total') >= 0);
  });
});

/** A stateless request (no session: a pool child of the server at path serves it). */
const statelessCall = (gw, path, name, args, id) => mpost(gw, {
  jsonrpc: '2.0', id, method: 'tools/call',
  params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'ops-it', version: '1' } } },
}, { path });

test('metrics: every figure of one server is on its own series: traffic to one server moves its series, not the other\'s (sessions, children, pools)', async (t) => {
  if (pooledSkip(t, CHILD_FIGURES)) return;
  const servers = ['example', 'other'];
  await withGateway({
    servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }, { name: 'other', path: '/other' }],
  }, async (gw) => {
    const m0 = await metrics(gw);
    checkShape(m0, servers);
    /** name{server, ...labels} of each server, in the order of servers. */
    const each = (m, name, labels = {}) => servers.map((server) => m.get(name, { server, ...labels }));

    // Sessions: traffic to example only.
    const a = await initSession(gw);
    assert.equal(textOf((await callTool(gw, a.sid, 'echo', { text: 'a' })).response), 'a');
    assert.equal(textOf((await callTool(gw, a.sid, 'garbage', {})).response), 'ok');
    // stubborn answers after 1 s whatever happens: request_timeout_ms (300) ends it first, then its
    // answer comes late and is dropped.
    const timedOut = await callTool(gw, a.sid, 'stubborn', { delay_ms: 1000 });
    assert.ok(timedOut.response?.error, 'the request timed out at the gateway');
    await waitFor(async () => (await metrics(gw)).get('mcpgw_late_messages_dropped_total', { server: 'example' }) === 1, scaled(5000), 'the late answer dropped');
    const { r: held } = await startHeld(gw, a.sid, 'per-server-held');
    const m1 = await metrics(gw);
    checkShape(m1, servers);
    assert.deepEqual(each(m1, 'mcpgw_inflight_requests', { direction: 'to_child' }), [1, 0], 'the held call is example\'s');
    assert.deepEqual(each(m1, 'mcpgw_inflight_requests', { direction: 'to_client' }), [0, 0]);
    assert.deepEqual(each(m1, 'mcpgw_request_timeouts_total'), [1, 0]);
    assert.deepEqual(each(m1, 'mcpgw_late_messages_dropped_total'), [1, 0]);
    assert.deepEqual(each(m1, 'mcpgw_child_lines_invalid_total'), [1, 0]);
    assert.deepEqual(each(m1, 'mcpgw_notifications_dropped_total'), [0, 0]);
    assert.deepEqual(each(m1, 'mcpgw_spawn_duration_seconds_count'), [1, 0]);
    assert.ok(m1.get('mcpgw_spawn_duration_seconds_sum', { server: 'example' }) > 0);
    const [inA, inB] = each(m1, 'mcpgw_child_stdin_bytes_total');
    const [outA, outB] = each(m1, 'mcpgw_child_stdout_bytes_total');
    assert.ok(inA > 0 && outA > 0, `example's child bytes moved (${inA}, ${outA})`);
    assert.deepEqual([inB, outB], [0, 0], 'no bytes for other, which had no traffic');

    // Then traffic to other only: its series move, example's stay.
    go(a.pid);
    await held.done(scaled(5000));
    const m2a = await metrics(gw);
    const b = await initSession(gw, { url: `${gw.base}/other` });
    const eb = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'b' } }), { sid: b.sid, url: `${gw.base}/other` });
    await eb.done(scaled(10000));
    assert.equal(textOf(eb.events().map((e) => e.json).find(isAnswer)), 'b', eb.text());
    const m2 = await metrics(gw);
    checkShape(m2, servers);
    assert.deepEqual(each(m2, 'mcpgw_spawn_duration_seconds_count'), [1, 1]);
    assert.deepEqual(each(m2, 'mcpgw_inflight_requests', { direction: 'to_child' }), [0, 0]);
    assert.ok(m2.get('mcpgw_child_stdin_bytes_total', { server: 'other' }) > 0, 'other\'s stdin bytes moved');
    assert.ok(m2.get('mcpgw_child_stdout_bytes_total', { server: 'other' }) > 0, 'other\'s stdout bytes moved');
    for (const k of ['mcpgw_child_stdin_bytes_total', 'mcpgw_child_stdout_bytes_total']) {
      assert.equal(m2.get(k, { server: 'example' }), m2a.get(k, { server: 'example' }), `${k}: example's did not move with other's traffic`);
    }
    assert.deepEqual(each(m2, 'mcpgw_request_timeouts_total'), [1, 0]);
    assert.deepEqual(each(m2, 'mcpgw_child_lines_invalid_total'), [1, 0]);

    // The stateless pools: a call to other's pool starts its child; a log line nobody asked for
    // is dropped (log_level) on other; a call held in flight there is other's.
    const r = await statelessCall(gw, '/other', 'notify', { level: 'info', text: 'unasked' }, 'p-notify');
    await r.done(scaled(10000));
    assert.equal(textOf(msgsOf(r).find(isAnswer)), 'ok', r.text());
    const slow = statelessCall(gw, '/other', 'cancel_self', {}, 'p-held');
    slow.then((x) => x.done(scaled(30000))).catch(() => {}); // ended by the gateway's stop
    await waitFor(async () => (await metrics(gw)).get('mcpgw_pool_inflight_requests', { server: 'other' }) === 1, scaled(10000), 'the pool call in flight');
    const m3 = await metrics(gw);
    checkShape(m3, servers);
    assert.deepEqual(each(m3, 'mcpgw_pool_inflight_requests'), [0, 1]);
    assert.deepEqual(each(m3, 'mcpgw_pool_child_events_total', { event: 'started' }), [0, 1]);
    assert.deepEqual(each(m3, 'mcpgw_pool_messages_dropped_total', { reason: 'log_level' }), [0, 1]);
    assert.deepEqual(each(m3, 'mcpgw_pool_held_calls'), [0, 0]);
    assert.deepEqual(each(m3, 'mcpgw_pools_retired'), [0, 0]);
    assert.ok(m3.get('mcpgw_child_stdin_bytes_total', { server: 'other' }) > m2.get('mcpgw_child_stdin_bytes_total', { server: 'other' }), 'the pool child\'s bytes are other\'s');
    assert.equal(m3.get('mcpgw_child_stdin_bytes_total', { server: 'example' }), m2.get('mcpgw_child_stdin_bytes_total', { server: 'example' }));
    assert.deepEqual(each(m3, 'mcpgw_spawn_duration_seconds_count'), [1, 1], 'a pool child is not a session\'s spawn');
  });
});

test('metrics: a server a SIGHUP removes keeps its series: its counters where they were, its gauges at 0 once what it had ended', async (t) => {
  if (pooledSkip(t, CHILD_FIGURES)) return;
  const servers = ['example', 'gone'];
  await withGateway({ servers: [{ name: 'example', path: '/mcp' }, { name: 'gone', path: '/gone' }] }, async (gw) => {
    const url = `${gw.base}/gone`;
    const s = await initSession(gw, { url });
    const e = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'g' } }), { sid: s.sid, url });
    await e.done(scaled(10000));
    assert.equal(textOf(e.events().map((x) => x.json).find(isAnswer)), 'g', e.text());
    const pr = await statelessCall(gw, '/gone', 'echo', { text: 'pooled' }, 'p-gone');
    await pr.done(scaled(10000));
    assert.equal(textOf(msgsOf(pr).find(isAnswer)), 'pooled', pr.text());
    const m0 = await metrics(gw);
    checkShape(m0, servers);
    const counters = ['mcpgw_child_stdin_bytes_total', 'mcpgw_child_stdout_bytes_total', 'mcpgw_spawn_duration_seconds_count', 'mcpgw_sessions_created_total', 'mcpgw_pool_requests_total'];
    for (const k of counters) assert.ok(m0.get(k, { server: 'gone' }) > 0, `${k}{server="gone"} moved`);
    assert.equal(m0.get('mcpgw_pool_child_events_total', { server: 'gone', event: 'started' }), 1);

    // Its session ends first (once the server is gone, no path reaches it); its pool retires.
    const d = await del(gw, { sid: s.sid, url });
    await d.done();
    assert.equal(d.status, 200);
    fs.writeFileSync(gw.conf, iniText({}, [{ name: 'example', path: '/mcp', command: exampleCmd(gw.childLog) }]));
    gw.proc.kill('SIGHUP');
    await waitLogCount(gw, /SIGHUP: configuration reloaded from \S+ \(1 servers\)/, 1);
    await waitFor(async () => {
      const m = await metrics(gw);
      return m.get('mcpgw_children_running', { server: 'gone' }) === 0 && m.get('mcpgw_pools_retired', { server: 'gone' }) === 0;
    }, scaled(10000), 'gone\'s session and retired pool ended');
    const m1 = await metrics(gw);
    checkShape(m1, servers); // every family still has gone's series
    for (const k of counters) assert.equal(m1.get(k, { server: 'gone' }), m0.get(k, { server: 'gone' }), `${k}{server="gone"} kept`);
    assert.equal(m1.get('mcpgw_pool_child_events_total', { server: 'gone', event: 'started' }), 1);
    for (const k of ['mcpgw_sessions_open', 'mcpgw_pool_inflight_requests', 'mcpgw_pool_held_calls']) assert.equal(m1.get(k, { server: 'gone' }), 0, k);
    assert.equal(m1.get('mcpgw_inflight_requests', { server: 'gone', direction: 'to_child' }), 0);
    assert.equal(m1.get('mcpgw_pool_children', { server: 'gone', state: 'ready' }), 0);
  });
});

// --- /readyz -----------------------------------------------------------------------------------

test('/readyz: 200 {"ready":true,"servers":[...]}; 503 "max_sessions reached" with max_sessions sessions open; 200 again after a DELETE', async () => {
  await withGateway({ gateway: { max_sessions: 2 } }, async (gw) => {
    const ready = async () => {
      const r = await fetchPath(gw, '/readyz');
      assert.match(r.headers['content-type'] || '', /^application\/json/);
      return { status: r.status, body: r.json() };
    };
    // The first question starts the server's probe (no child of it has started yet): starting, 503.
    assert.deepEqual(await ready(), { status: 503, body: { ready: false, reason: 'no server can serve', servers: [{ name: 'example', state: 'starting', why: 'no child of it has started yet' }] } });
    await waitFor(async () => (await ready()).status === 200, scaled(10000), 'the probe up: /readyz 200');
    assert.deepEqual(await ready(), { status: 200, body: { ready: true, servers: [{ name: 'example', state: 'ok', why: '' }] } });
    const a = await initSession(gw);
    assert.deepEqual(await ready(), { status: 200, body: { ready: true, servers: [{ name: 'example', state: 'ok', why: '' }] } });
    const b = await initSession(gw);
    assert.deepEqual(await ready(), { status: 503, body: { ready: false, reason: 'max_sessions reached', servers: [{ name: 'example', state: 'ok', why: '' }] } });
    assert.equal((await metrics(gw)).get('mcpgw_ready'), 0);
    const h = await fetchPath(gw, '/healthz');
    assert.equal(h.status, 200, 'still healthy');
    const third = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'third'));
    await third.done();
    assert.equal(third.status, 503, third.text());
    assert.equal(textOf((await callTool(gw, b.sid, 'echo', { text: 'full but serving' })).response), 'full but serving');
    const d = await del(gw, { sid: a.sid });
    await d.done();
    assert.equal(d.status, 200);
    assert.deepEqual(await ready(), { status: 200, body: { ready: true, servers: [{ name: 'example', state: 'ok', why: '' }] } });
    assert.equal((await metrics(gw)).get('mcpgw_ready'), 1);
    await initSession(gw);
    assert.equal((await ready()).status, 503);
  });
});

test('out of file descriptors: a warning at start, 503 "out of file descriptors" for new sessions, sessions still served, and a DELETE makes room again', async (t) => {
  if (pooledSkip(t, 'a session holds its child\'s descriptors (a pooled one none: pooled tests the warning)')) return;
  // 40 descriptors: the gateway's own (std streams, epoll, signalfd, listener, MHD's epoll) take
  // about 8, each session 4 (child stdin, stdout, stderr, pidfd) and a connection 1.
  await withGateway({ nofile: 40, gateway: { max_sessions: 100, max_connections: 16 } }, async (gw) => {
    await gw.waitLog(/open-file limit 40 is below the \d+ that max_sessions = 100 and max_connections = 16 may use/);
    const sessions = [];
    let refused = null;
    for (let i = 0; i < 20 && refused === null; i++) {
      const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, `fd${i}`));
      await r.done();
      if (r.status === 200) sessions.push(r.headers['mcp-session-id']);
      else refused = r;
    }
    assert.ok(refused, `no refusal after ${sessions.length} sessions`);
    assert.ok(sessions.length >= 3, `only ${sessions.length} sessions before the refusal`);
    assert.equal(refused.status, 503, refused.text());
    assert.equal(refused.json().error.message, 'out of file descriptors');
    await gw.waitLog(/new session refused: out of file descriptors/);
    // Every session opened still answers, and a DELETE frees room for a new one.
    for (const sid of sessions) {
      await post(gw, rpc('notifications/initialized'), { sid }).then((r) => r.done());
      assert.equal(textOf((await callTool(gw, sid, 'echo', { text: sid })).response), sid);
    }
    const d = await del(gw, { sid: sessions.pop() });
    await d.done();
    assert.equal(d.status, 200);
    const again = await waitFor(async () => {
      const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }));
      await r.done();
      return r.status === 200 ? r : null;
    }, scaled(5000), 'a new session after the DELETE');
    assert.ok(again.headers['mcp-session-id']);
  });
});

// --- drain on SIGTERM --------------------------------------------------------------------------

test('SIGTERM drains: the listener closes at once; on open connections 503 for new sessions, a session\'s requests still served, each answer closing its connection; the call in flight finishes uncancelled, then exit 0 by itself', async (t) => {
  if (pooledSkip(t, CHILD_FIGURES)) return;
  // A drain far longer than any run takes: exiting because the call finished, not because the
  // drain ran out, is told apart by the log line and by exiting within scaled(5000) ms (at most
  // 15 s under ASan) of the answer.
  const DRAIN = 60000;
  await withGateway({ gateway: { shutdown_drain_ms: DRAIN } }, async (gw) => {
    const s = await initSession(gw);
    // cancel_self runs until released: everything below happens while it is in flight.
    const { r: held } = await startHeld(gw, s.sid, 'drain-held');
    // One connection for each request below: each answer while draining closes its connection.
    const agent = await keptConnections(gw, s, 7);
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/, scaled(5000));
    assert.match(gw.logs(), new RegExp(`SIGTERM: draining: no new sessions or requests; 1 requests in flight get up to ${DRAIN} ms`));
    await gw.waitLog(/listener closed: new connections are refused/, scaled(5000));
    await assertRefused(gw);
    const closes = (r) => assert.equal(r.headers.connection, 'close', `Connection: close while draining (HTTP ${r.status})`);

    const rz = await fetchPath(gw, '/readyz', { agent });
    assert.equal(rz.status, 503);
    assert.deepEqual(rz.json(), { ready: false, reason: 'draining', servers: [{ name: 'example', state: 'ok', why: '' }] });
    closes(rz);
    const hz = await fetchPath(gw, '/healthz', { agent });
    assert.equal(hz.status, 200, 'healthy while draining');
    closes(hz);
    const m = await metrics(gw, {}, { agent });
    assert.equal(m.get('mcpgw_ready'), 0);
    assert.equal(m.get('mcpgw_inflight_requests', { direction: 'to_child' }), 1);

    const mcp = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    const init = await request(gw.url, { headers: mcp, agent, body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'late-init') });
    await init.done();
    assert.equal(init.status, 503, init.text());
    closes(init);
    assert.ok(!init.headers['mcp-session-id'], 'no session while draining');
    const ie = JSON.parse(init.text());
    assert.equal(ie.jsonrpc, '2.0');
    assert.equal(typeof ie.error?.code, 'number', init.text());
    assert.match(ie.error.message, /shutting down/i);

    // A request of an open session is served: the session ends with the drain, not before.
    const inSession = { ...mcp, 'Mcp-Session-Id': s.sid, 'MCP-Protocol-Version': s.version };
    const call = await request(gw.url, { headers: inSession, agent, body: rpc('tools/call', { name: 'echo', arguments: { text: 'while draining' } }, 'late-call') });
    await call.done();
    assert.equal(call.status, 200, call.text());
    closes(call);
    assert.equal(textOf(call.events().map((e) => e.json).find(isAnswer)), 'while draining', call.text());

    const n = await request(gw.url, { headers: inSession, agent, body: { jsonrpc: '2.0', method: 'notifications/roots/list_changed' } });
    assert.equal(await n.done(), '');
    assert.equal(n.status, 202, 'a notification is still accepted');
    const unk = await request(gw.url, { headers: inSession, agent, body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody', reason: 'x' } } });
    await unk.done();
    assert.equal(unk.status, 202);
    agent.destroy();
    await waitFor(() => gw.childMessages().some((x) => x.method === 'notifications/roots/list_changed'), scaled(5000), 'the notification at the child');
    assert.ok(!held.ended, 'all of that happened while the call was still running');
    assert.equal(gw.proc.exitCode, null, 'the gateway waits for the call');

    go(s.pid);
    await held.done(scaled(5000));
    const res = held.events().map((e) => e.json).find(isAnswer);
    assert.ok(res?.result, `the call answered with its result: ${held.text()}`);
    assert.equal(res.id, 'drain-held');
    assert.equal(textOf(res), 'released');
    assert.ok(!gw.childMessages().some((x) => x.method === 'notifications/cancelled'), 'the child saw no cancel');

    const r = await exitWithin(gw, scaled(5000));
    assert.deepEqual(r, { code: 0, signal: null }, gw.logs().slice(-3000));
    assert.match(gw.logs(), /shutting down \(drained: no request in flight\)/);
    for (const pid of gw.childPids()) assert.ok(reaped(pid), `child ${pid} reaped`);
    assert.equal(gw.childPids().length, 1);
  });
});

test('SIGTERM drain deadline: a call still running after shutdown_drain_ms is cancelled ("gateway shutting down"), then exit 0', async (t) => {
  const DRAIN = 500;
  await withGateway({ gateway: { shutdown_drain_ms: DRAIN } }, async (gw) => {
    const s = await initSession(gw);
    // cancel_self never answers by itself: a gateway that waited for it would never exit.
    const { r: held, childId } = await startHeld(gw, s.sid, 'deadline-held');
    const t0 = performance.now();
    gw.proc.kill('SIGTERM');
    await gw.waitLog(/SIGTERM: draining/, scaled(5000));
    // The drain, then the cancel, the child's exit on stdin EOF and the gateway's own; a slow
    // run gets scaled(4000) ms for those.
    const r = await exitWithin(gw, DRAIN + scaled(4000));
    const took = performance.now() - t0;
    assert.deepEqual(r, { code: 0, signal: null }, gw.logs().slice(-3000));
    assert.ok(took >= DRAIN - 10, `waited for the drain time (${took.toFixed(0)} ms; 10 ms for timer granularity)`);
    assert.match(gw.logs(), /shutting down \(shutdown_drain_ms passed: cancelling what is still in flight\)/);
    const cancels = gw.childMessages().filter((x) => x.method === 'notifications/cancelled');
    assert.deepEqual(cancels.map((x) => x.params), [{ requestId: childId, reason: 'gateway shutting down' }]);
    await held.done(scaled(5000));
    const res = held.events().map((e) => e.json).find(isAnswer);
    assert.ok(!res?.result, `no result for the cancelled call: ${held.text()}`);
    if (res) assert.equal(typeof res.error?.code, 'number', held.text());
    t.diagnostic(`exit ${took.toFixed(0)} ms after SIGTERM; the client's stream: ${res ? `error ${JSON.stringify(res.error)}` : 'ended without an answer'}`);
    for (const pid of gw.childPids()) assert.ok(reaped(pid), `child ${pid} reaped`);
  });
});

for (const second of ['SIGINT', 'SIGTERM']) {
  test(`a ${second} while draining stops at once: the call in flight is cancelled ("gateway shutting down"), exit 0`, async (t) => {
    // At once, against a 60 s drain and a call that never ends by itself: scaled(5000) ms (15 s
    // under ASan) leaves the gap explicit.
    await withGateway({ gateway: { shutdown_drain_ms: 60000 } }, async (gw) => {
      const s = await initSession(gw);
      const { r: held, childId } = await startHeld(gw, s.sid, 'second-held');
      gw.proc.kill('SIGTERM');
      await gw.waitLog(/SIGTERM: draining/, scaled(5000));
      await gw.waitLog(/listener closed/, scaled(5000));
      await assertRefused(gw);
      const t0 = performance.now();
      gw.proc.kill(second);
      const r = await exitWithin(gw, scaled(5000));
      t.diagnostic(`exit ${(performance.now() - t0).toFixed(0)} ms after the ${second}`);
      assert.deepEqual(r, { code: 0, signal: null }, gw.logs().slice(-3000));
      assert.match(gw.logs(), new RegExp(`shutting down \\(${second}\\)`));
      const cancels = gw.childMessages().filter((x) => x.method === 'notifications/cancelled');
      assert.deepEqual(cancels.map((x) => x.params), [{ requestId: childId, reason: 'gateway shutting down' }]);
      await held.done(scaled(5000));
      assert.ok(!held.events().some((e) => e.json?.result), `no result: ${held.text()}`);
      for (const pid of gw.childPids()) assert.ok(reaped(pid), `child ${pid} reaped`);
    });
  });
}

// --- reload on SIGHUP --------------------------------------------------------------------------

test('SIGHUP reload: old sessions keep their definition and child, new sessions use the new one; a moved and an added server; an invalid file changes nothing', async (t) => {
  if (pooledSkip(t, 'old sessions keep their own child and definition across a reload (a pooled session\'s calls go to the pool of the new one)')) return;
  const d = tmpdir('mcpgw-reload-');
  const log = (n) => path.join(d, `${n}.log`);
  const v1 = [
    { name: 'A', path: '/a', command: exampleCmd(log('a1'), '--name', 'A-v1') },
    { name: 'B', path: '/b', command: exampleCmd(log('b'), '--name', 'B') },
  ];
  const v2 = [
    { name: 'A', path: '/a', command: exampleCmd(log('a2'), '--name', 'A-v2'), env: 'MARK=v2' },
    { name: 'B', path: '/b2', command: exampleCmd(log('b'), '--name', 'B') },
    { name: 'C', path: '/c', command: exampleCmd(log('c'), '--name', 'C') },
  ];
  await withGateway({ servers: v1 }, async (gw) => {
    const at = (p) => `${gw.base}${p}`;
    const echo = async (sid, text, url) => {
      const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text } }), { sid, url });
      await r.done();
      assert.equal(r.status, 200, r.text());
      return textOf(r.events().map((e) => e.json).find(isAnswer));
    };
    const initStatus = async (url) => {
      const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }), { url });
      await r.done();
      return r.status;
    };
    assert.ok(fs.readFileSync(gw.conf, 'utf8').includes('/a'), 'the harness wrote the file the gateway reads');
    const old = await initSession(gw, { url: at('/a') });
    assert.equal(old.result.serverInfo.name, 'A-v1');
    assert.ok(old.pid && pidAlive(old.pid));
    assert.ok(!environOf(old.pid).some((e) => e.startsWith('MARK=')));
    const oldB = await initSession(gw, { url: at('/b') });
    assert.equal(oldB.result.serverInfo.name, 'B');
    const m0 = await metrics(gw);
    checkShape(m0, ['A', 'B']);
    assert.equal(m0.get('mcpgw_config_last_reload_successful'), 1, 'the start counts as a good load');
    const started = m0.get('process_start_time_seconds');
    assert.ok(Math.abs(started - Date.now() / 1000) < 120, `process_start_time_seconds ${started} is about now`);
    assert.equal(m0.get('mcpgw_config_last_reload_success_timestamp_seconds'), started);
    assert.equal(m0.get('mcpgw_sessions_created_total', { server: 'A' }), 1);

    // v2: A changed (name, log, env), B moved, C added
    fs.writeFileSync(gw.conf, iniText({}, v2));
    gw.proc.kill('SIGHUP');
    await waitLogCount(gw, /SIGHUP: configuration reloaded from \S+ \(3 servers\)/, 1);
    assert.ok(!/take effect at the next start/.test(gw.logs()), 'an unchanged listen logs no warning');
    const m1 = await metrics(gw);
    checkShape(m1, ['A', 'B', 'C']); // C's series from the reload on, A's and B's kept
    assert.equal(m1.get('mcpgw_config_last_reload_successful'), 1);
    const reloadedAt = m1.get('mcpgw_config_last_reload_success_timestamp_seconds');
    assert.ok(reloadedAt >= started && Math.abs(reloadedAt - Date.now() / 1000) < 60, `reloaded at ${reloadedAt}`);
    assert.equal(m1.get('mcpgw_sessions_created_total', { server: 'A' }), 1, 'kept over the reload');
    assert.equal(m1.get('mcpgw_sessions_open', { server: 'B' }), 1);

    // the old session on A: same child, still served, still the old definition
    assert.equal(await echo(old.sid, 'old still works', at('/a')), 'old still works');
    assert.ok(pidAlive(old.pid), 'the old child still runs');
    assert.equal(countMatches(gw.logs(), new RegExp(`session=${old.sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created`)), 1, 'not restarted');
    await waitFor(() => readJsonLines(log('a1')).some((x) => x.params?.arguments?.text === 'old still works'), scaled(5000), 'the old child (a1.log) served it');
    assert.ok(!readJsonLines(log('a2')).length, 'nothing started from v2 yet');

    // a new session on A: the new definition
    const fresh = await initSession(gw, { url: at('/a') });
    assert.equal(fresh.result.serverInfo.name, 'A-v2');
    assert.notEqual(fresh.pid, old.pid);
    assert.ok(environOf(fresh.pid).includes('MARK=v2'), 'env = MARK=v2 applied');
    assert.ok(!environOf(old.pid).some((e) => e.startsWith('MARK=')), 'the old child keeps its environment');
    assert.equal(await echo(fresh.sid, 'fresh', at('/a')), 'fresh');
    await waitFor(() => readJsonLines(log('a2')).some((x) => x.params?.arguments?.text === 'fresh'), scaled(5000), 'the new child logs to a2.log');

    // B moved: its old path is gone for new sessions, the new one works; C works
    assert.equal(await initStatus(at('/b')), 404, 'B\'s old path is gone');
    const b2 = await initSession(gw, { url: at('/b2') });
    assert.equal(b2.result.serverInfo.name, 'B');
    assert.equal(await echo(b2.sid, 'b2', at('/b2')), 'b2');
    const c = await initSession(gw, { url: at('/c') });
    assert.equal(c.result.serverInfo.name, 'C');
    assert.equal(await echo(c.sid, 'c', at('/c')), 'c');
    // The B session opened under v1 follows its server (a server is its name) to the new path,
    // on its old definition and child; the old path names no server any more.
    const oldBPing = await post(gw, rpc('ping'), { sid: oldB.sid, url: at('/b') });
    await oldBPing.done();
    assert.equal(oldBPing.status, 404, 'the old path is gone');
    assert.equal(await echo(oldB.sid, 'old b at b2', at('/b2')), 'old b at b2');
    assert.ok(pidAlive(oldB.pid), 'the same child');

    // invalid files: the running (v2) configuration stays
    const invalid = [
      `${iniText({}, v2)}[server:D\ncommand = ${EXAMPLE}\n`, // unclosed section
      iniText({ no_such_key: 1 }, v2), // unknown key
      iniText({}, [{ name: 'A', path: '/a', command: exampleCmd(log('a3'), '--name', 'A-v3') }, { name: 'A', path: '/a3', command: EXAMPLE }]), // duplicate server
    ];
    for (let i = 0; i < invalid.length; i++) {
      fs.writeFileSync(gw.conf, invalid[i]);
      gw.proc.kill('SIGHUP');
      await waitLogCount(gw, /SIGHUP: .*the running configuration stays/, i + 1);
    }
    assert.equal(countMatches(gw.logs(), /SIGHUP: configuration reloaded/), 1, 'no invalid file was taken');
    const m2 = await metrics(gw);
    assert.equal(m2.get('mcpgw_config_last_reload_successful'), 0, 'the last reload failed');
    assert.equal(m2.get('mcpgw_config_last_reload_success_timestamp_seconds'), reloadedAt, 'the last good one stays');
    assert.equal(m2.get('mcpgw_sessions_created_total', { server: 'A' }), 2, 'A: the old and the fresh session');
    assert.equal(m2.get('mcpgw_sessions_created_total', { server: 'C' }), 1);
    assert.equal(await echo(old.sid, 'old after invalid', at('/a')), 'old after invalid');
    assert.equal(await echo(fresh.sid, 'fresh after invalid', at('/a')), 'fresh after invalid');
    const fresh2 = await initSession(gw, { url: at('/a') });
    assert.equal(fresh2.result.serverInfo.name, 'A-v2', 'new sessions still use v2');
    assert.ok(environOf(fresh2.pid).includes('MARK=v2'));
    assert.equal(await initStatus(at('/b')), 404);
    assert.equal(await initStatus(at('/a3')), 404);
    assert.equal(await echo((await initSession(gw, { url: at('/b2') })).sid, 'b2 again', at('/b2')), 'b2 again');
    assert.equal(await echo((await initSession(gw, { url: at('/c') })).sid, 'c again', at('/c')), 'c again');
    assert.ok(!fs.existsSync(log('a3')));

    // the old A session ends normally; the gateway keeps serving
    const dr = await del(gw, { sid: old.sid, url: at('/a') });
    await dr.done();
    assert.equal(dr.status, 200);
    await waitFor(() => !pidAlive(old.pid), scaled(8000), 'the old A child gone');
    assert.equal(await echo(fresh.sid, 'after delete', at('/a')), 'after delete');
    const fresh3 = await initSession(gw, { url: at('/a') });
    assert.equal(fresh3.result.serverInfo.name, 'A-v2');

    // a good reload again: successful again
    fs.writeFileSync(gw.conf, iniText({}, v2));
    gw.proc.kill('SIGHUP');
    await waitLogCount(gw, /SIGHUP: configuration reloaded from \S+ \(3 servers\)/, 2);
    const m3 = await metrics(gw);
    assert.equal(m3.get('mcpgw_config_last_reload_successful'), 1);
    assert.ok(m3.get('mcpgw_config_last_reload_success_timestamp_seconds') >= reloadedAt);
    assert.equal(m3.get('mcpgw_sessions_closed_total', { server: 'A', reason: 'deleted' }), 1);
  });
});

test('SIGHUP reload frees the retired configuration once its last session is deleted', async (t) => {
  if (pooledSkip(t, 'old sessions keep their own child and definition across a reload (a pooled session\'s calls go to the pool of the new one)')) return;
  const d = tmpdir('mcpgw-reload-');
  const v1 = [{ name: 'A', path: '/mcp', command: exampleCmd(path.join(d, 'a1.log'), '--name', 'A-v1') }];
  const v2 = [{ name: 'A', path: '/mcp', command: exampleCmd(path.join(d, 'a2.log'), '--name', 'A-v2') }];
  await withGateway({ servers: v1 }, async (gw) => {
    const old = await initSession(gw);
    fs.writeFileSync(gw.conf, iniText({}, v2));
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/);
    const fresh = await initSession(gw);
    assert.equal(fresh.result.serverInfo.name, 'A-v2');
    // Two janitor ticks pass with the old session open: v1 stays.
    const ticks = countMatches(gw.logs(), /no session uses it any more/);
    assert.equal(ticks, 0);
    // The time passing is the condition under test (no tick frees a configuration in use), not a
    // synchronisation: the janitor runs once a second.
    await new Promise((res) => setTimeout(res, 2200));
    assert.equal(countMatches(gw.logs(), /no session uses it any more/), 0, 'in use: not freed');
    assert.equal(textOf((await callTool(gw, old.sid, 'echo', { text: 'v1 in use' })).response), 'v1 in use');
    const dr = await del(gw, { sid: old.sid });
    await dr.done();
    assert.equal(dr.status, 200);
    await gw.waitLog(/configuration of \S+: no session uses it any more/, scaled(3000));
    // keeps serving after the free (ASan would catch a use of the freed definition)
    assert.equal(textOf((await callTool(gw, fresh.sid, 'echo', { text: 'after free' })).response), 'after free');
    const again = await initSession(gw);
    assert.equal(again.result.serverInfo.name, 'A-v2');
    assert.equal(textOf((await callTool(gw, again.sid, 'echo', { text: 'new after free' })).response), 'new after free');
    assert.equal(countMatches(gw.logs(), /no session uses it any more/), 1);
    await waitFor(() => !pidAlive(old.pid), scaled(8000), 'old child gone');
  });
});

test('SIGHUP with a changed listen: a warning, the reload applies the rest, the gateway keeps its port', async () => {
  // a port nothing listens on (found by binding and releasing it)
  const free = await new Promise((res, rej) => {
    const srv = net.createServer();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => res(port)); });
  });
  const d = tmpdir('mcpgw-reload-');
  await withGateway({ servers: [{ name: 'A', path: '/mcp', command: exampleCmd(path.join(d, 'a1.log'), '--name', 'A-v1') }] }, async (gw) => {
    const old = await initSession(gw);
    fs.writeFileSync(gw.conf, iniText({ listen: `127.0.0.1:${free}` }, [{ name: 'A', path: '/mcp', command: exampleCmd(path.join(d, 'a2.log'), '--name', 'A-v2') }]));
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/);
    assert.match(gw.logs(), /SIGHUP: listen, max_connections, connection_timeout_s and max_header_bytes take effect at the next start; the running values stay/);
    const fresh = await initSession(gw);
    assert.equal(fresh.result.serverInfo.name, 'A-v2', 'the rest of the file applied');
    assert.equal(textOf((await callTool(gw, old.sid, 'echo', { text: 'same port' })).response), 'same port');
    const refused = await new Promise((res) => {
      const s = net.connect(free, '127.0.0.1');
      s.on('connect', () => { s.destroy(); res(false); });
      s.on('error', (e) => res(e.code === 'ECONNREFUSED'));
    });
    assert.ok(refused, `nothing listens on the new port ${free}`);
    assert.equal((await fetchPath(gw, '/healthz')).status, 200);
  });
});

// --- SIGKILL of the gateway --------------------------------------------------------------------

test('SIGKILL of the gateway leaves no child running: busy, idle, SIGTERM-ignoring and shell children all die', async () => {
  const d = tmpdir('mcpgw-kill-');
  const gw = await startGateway({
    servers: [
      { name: 'example', path: '/mcp' },
      // ignores SIGTERM and stays up after stdin EOF: only the parent-death signal ends it
      { name: 'stubborn', path: '/stubborn', command: exampleCmd(path.join(d, 'stubborn.log'), '--ignore-sigterm', '--no-stdin-exit') },
      // not an MCP server at all: never answers initialize, ignores TERM and HUP, never reads stdin
      { name: 'shell', path: '/shell', command: `/bin/sh -c 'trap "" TERM HUP; while :; do sleep 1; done'` },
    ],
  });
  let ok = false;
  try {
    const a = await initSession(gw);
    const b = await initSession(gw);
    const st = await initSession(gw, { url: `${gw.base}/stubborn` });
    const { r: slow } = await startHeld(gw, a.sid, 'kill-held');
    // SIGTERM is ignored by the stubborn child (bit 15 of SigIgn)
    assert.ok(sigIgnored(st.pid, 15), 'the stubborn child ignores SIGTERM');

    // the shell child: initialize stays unanswered, but the child exists
    const shInit = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'sh-init'), { url: `${gw.base}/shell` });
    assert.equal(shInit.status, 200);
    // (Pooled: the shell is the server's pool child, started for the session's initialize.)
    const shM = await gw.waitLog(MATRIX_POOLED ? /session=pool:shell\\?#\d+ pool child started: pid (\d+)/ : /session created: server=shell child=(\d+)/, scaled(5000));
    const shPid = Number(shM[1]);
    const grandchildren = await waitFor(() => { const c = childrenOf(shPid); return c.length ? c : null; }, scaled(5000), 'the shell\'s sleep');
    await waitFor(() => sigIgnored(shPid, 15) && sigIgnored(shPid, 1), scaled(5000), 'the shell\'s trap in place');

    const pids = [a.pid, b.pid, st.pid, shPid];
    const spawned = MATRIX_POOLED ? [...gw.logs().matchAll(/pool child started: pid (\d+)/g)].map((m) => Number(m[1])) : gw.childPids();
    assert.deepEqual([...new Set(spawned)].sort(), [...new Set(pids)].sort());
    for (const pid of pids) {
      assert.ok(pidAlive(pid), `${pid} alive before`);
      assert.equal(statOf(pid).ppid, gw.proc.pid, `${pid} is the gateway's child`);
    }
    assert.ok(!slow.ended);

    gw.proc.kill('SIGKILL');
    const r = await exitWithin(gw, scaled(5000));
    assert.deepEqual(r, { code: null, signal: 'SIGKILL' });
    // The parent-death signal ends them at once; a child without it would stay forever (the
    // stubborn one ignores SIGTERM and stdin EOF, the shell never reads stdin).
    await waitFor(() => pids.every(dead), scaled(5000), `every child gone: ${pids.map((p) => `${p}:${statOf(p)?.state ?? 'gone'}`).join(' ')}`);
    // the shell's sleep is not the gateway's child: no parent-death signal, but it ends within a second
    await waitFor(() => grandchildren.every(dead), scaled(5000), 'the shell\'s sleep ends');
    await slow.done(scaled(5000)).catch(() => {});
    assert.ok(slow.ended, 'the held call\'s stream ended with the gateway');
    await shInit.done(scaled(5000)).catch(() => {});
    ok = true;
  } finally {
    if (ok) {
      await gw.stop({ expect: { code: null, signal: 'SIGKILL' } });
    } else {
      await gw.stop({ signal: 'SIGKILL', expect: null }).catch(() => {});
      console.log(gw.logs().slice(-4000));
    }
  }
});
