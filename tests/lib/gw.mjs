// SPDX-License-Identifier: MIT
// Helpers for integration tests: start the real gateway binary with a generated INI file in
// front of the real example server, speak HTTP/SSE to it over loopback, poll with deadlines.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// Files the tests write must not be writable by others, or the gateway refuses them (a file others
// may write could steer it): whatever umask the runner has, the usual one applies here.
process.umask(0o022);

export const GW_BIN = process.env.GW_BIN;
export const EXAMPLE = process.env.GW_EXAMPLE;
if (!GW_BIN || !EXAMPLE) throw new Error('GW_BIN and GW_EXAMPLE must be set (meson test sets them)');

export const ACCEPT_BOTH = 'application/json, text/event-stream';

/** The exit status gw.stop() asserts unless told otherwise: exit code 0, no signal. */
export const CLEAN_EXIT = Object.freeze({ code: 0, signal: null });

/**
 * A [server:NAME] entry running the reference @modelcontextprotocol/server-everything (pinned in
 * tests/package-lock.json) over stdio; throws when `npm ci` has not installed it.
 */
export function everythingServer({ name = 'everything', path: p = '/mcp', extra } = {}) {
  const root = process.env.GW_SOURCE_ROOT;
  if (!root) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
  const js = path.join(root, 'tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  if (!fs.existsSync(js)) throw new Error(`${js} missing: run \`npm ci\` in ${path.join(root, 'tests')} (tests/deps.sh does it)`);
  return { name, path: p, command: `${process.execPath} ${js} stdio`, ...(extra ? { extra } : {}) };
}

/** The samples of a Prometheus text from /metrics: {'name{labels}': value}. */
export function metricSamples(text) {
  const m = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    const key = line.slice(0, i);
    m[key] = Number(line.slice(i + 1));
    // Series of one server (server="..." first): their sum over servers, with the server label
    // left out, is a key too (tests that count over a gateway read that).
    const s = /^(\w+)\{server="[^"]*",?(.*)\}$/.exec(key);
    if (s) {
      const total = s[2] ? `${s[1]}{${s[2]}}` : s[1];
      m[total] = (m[total] ?? 0) + m[key];
    }
  }
  return m;
}

/**
 * Writes ini as dir/NAME.ini and runs `mcp-gateway -t -c` on it: {status, out} (stdout + stderr).
 */
export function checkConfigText(dir, name, ini) {
  const f = path.join(dir, `${name}.ini`);
  fs.writeFileSync(f, ini);
  const r = spawnSync(GW_BIN, ['-t', '-c', f], { encoding: 'utf8', timeout: 10000 });
  return { status: r.status, out: r.stdout + r.stderr };
}

// The directories tmpdir made, removed when this test process exits after passing (a failing
// one keeps them, with the gateways' and children's logs, to read).
const madeDirs = [];
process.on('exit', (code) => {
  if (code !== 0) return;
  for (const d of madeDirs) {
    try { fs.rmSync(d, { recursive: true, force: true }); } catch { /* a file another user made, say */ }
  }
});

export function tmpdir(prefix = 'mcpgw-') {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  madeDirs.push(d);
  return d;
}

/** Polls fn() until it returns a truthy value or the deadline passes (then throws). */
export async function waitFor(fn, ms = 5000, what = 'condition') {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function iniQuote(s) { return s; }

/**
 * The configuration matrix (tests/integration/meson.build runs some suites again with these set):
 * GW_MATRIX_GATEWAY and GW_MATRIX_SERVER hold "key = value" settings, separated by ';', added to
 * [gateway] and to every [server:NAME] that does not set that key itself. So an optional timer or
 * limit (request_timeout_ms, a small stream_queue_bytes) is the ordinary case in those runs.
 */
const matrixSettings = (v) => (v ?? '').split(';').map((l) => l.trim()).filter(Boolean).map((l) => {
  const i = l.indexOf('=');
  if (i < 1) throw new Error(`a matrix setting is key = value: ${l}`);
  return [l.slice(0, i).trim(), l.slice(i + 1).trim()];
});
const MATRIX_GATEWAY = matrixSettings(process.env.GW_MATRIX_GATEWAY);
const MATRIX_SERVER = matrixSettings(process.env.GW_MATRIX_SERVER);

/**
 * The matrix run's [server:NAME] lines for a server whose own keys are `extra` (the ones it does
 * not set itself): for a test that writes a configuration file of its own (a reload's).
 */
export const matrixServerLines = (extra = '') => MATRIX_SERVER.filter(([k]) => !new RegExp(`^\\s*${k}\\s*=`, 'm').test(extra)).map(([k, v]) => `${k} = ${v}\n`).join('');

/**
 * The pooled matrix run (suite matrix, NAME@pooled): every server without a session_mode of its
 * own serves its legacy sessions pooled (no child per session).
 */
export const MATRIX_POOLED = MATRIX_SERVER.some(([k, v]) => k === 'session_mode' && v === 'pooled');

/**
 * In the pooled matrix run, marks test context t skipped with why (one line: what of child mode
 * the test checks) and returns true, so the test returns at once: `if (pooledSkip(t, '...')) return;`.
 * Elsewhere returns false. tests/README.md lists every such test.
 */
export function pooledSkip(t, why) {
  if (!MATRIX_POOLED) return false;
  t.skip(`pooled: ${why}`);
  return true;
}

/**
 * Starts a gateway. opts.gateway: extra [gateway] keys; opts.auth: [auth] keys; opts.servers: [{name, path, args,
 * command, env}] (default: one 'example' server at /mcp running the example server with
 * --log <dir>/child.log). Resolves once the gateway logs its listening address.
 */
export async function startGateway(opts = {}) {
  const dir = opts.dir ?? tmpdir(); // opts.dir: a directory of the test's own for gateway.ini
  const childLog = path.join(dir, 'child.log');
  // shutdown_drain_ms = 0: stop() ends what is in flight at once, as most tests expect; the
  // drain tests set it themselves.
  const g = { listen: '127.0.0.1:0', log_level: 'debug', shutdown_drain_ms: 0, ...(opts.gateway || {}) };
  for (const [k, v] of MATRIX_GATEWAY) if (!(k in g)) g[k] = v;
  let ini = '[gateway]\n';
  for (const [k, v] of Object.entries(g)) ini += `${k} = ${v}\n`;
  if (opts.auth) {
    ini += '[auth]\n';
    for (const [k, v] of Object.entries(opts.auth)) ini += `${k} = ${v}\n`;
  }
  const servers = opts.servers || [{ name: 'example', path: '/mcp' }];
  for (const s of servers) {
    ini += `[server:${s.name}]\n`;
    if (s.path) ini += `path = ${s.path}\n`;
    const cmd = s.command || [EXAMPLE, '--log', s.log || childLog, ...(s.args || [])].join(' ');
    ini += `command = ${iniQuote(cmd)}\n`;
    if (s.env) ini += `env = ${s.env}\n`;
    if (s.extra) ini += `${s.extra}\n`;
    ini += matrixServerLines(s.extra ?? '');
  }
  // opts.config: a configuration file of the test's own, passed to --config as given (relative to
  // opts.cwd), instead of the one written from opts.
  const conf = opts.config ?? path.join(dir, 'gateway.ini');
  if (!opts.config) fs.writeFileSync(conf, ini);
  // opts.nofile: soft and hard open-file limit (prlimit execs the gateway: same pid).
  // opts.bin: another build of the gateway (default GW_BIN).
  const bin = opts.bin ?? GW_BIN;
  // opts.fsize: the file size limit (RLIMIT_FSIZE) in bytes, soft and hard: a file at its limit.
  const limits = [];
  if (opts.nofile) limits.push(`--nofile=${opts.nofile}:${opts.nofile}`);
  if (opts.fsize) limits.push(`--fsize=${opts.fsize}:${opts.fsize}`);
  // opts.wrap: a command that execs the rest (setpriv to another user: the same pid).
  const argv = [...(opts.wrap ?? []), ...(limits.length ? ['prlimit', ...limits, bin] : [bin])];
  // opts.cwd: the gateway's working directory (default: the test's).
  const proc = spawn(argv[0], [...argv.slice(1), '--config', conf], { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...(opts.env || {}) } });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d.toString(); });
  proc.stdout.on('data', (d) => { stderr += d.toString(); });
  // With [gateway] log_file, the log is what the gateway wrote to stderr, then the file's lines.
  const logFile = g.log_file;
  const readLog = () => { try { return fs.readFileSync(logFile, 'utf8'); } catch { return ''; } };
  const logsNow = () => (logFile ? stderr + readLog() : stderr);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  // 'exit' may come before the last of stderr is read (a line written just before a fatal
  // signal): stop() also waits for the pipe's end, bounded (a child may hold it open).
  const drained = new Promise((resolve) => proc.stderr.on('close', resolve));
  // Bounded like every wait (scaled: an ASan build on a loaded runner starts slower); a gateway
  // that never listens is killed, or node would wait for it forever.
  const { scaled } = await import('./timing.mjs'); /* timing.mjs imports this module */
  let m;
  try {
    m = await waitFor(() => /listening on (\S+):(\d+)/.exec(logsNow()) || (proc.exitCode !== null && 'exit'), scaled(5000), 'gateway to listen');
  } catch (e) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    throw new Error(`${e.message}\n${logsNow()}`);
  }
  if (m === 'exit') throw new Error(`gateway exited early:\n${logsNow()}`);
  const host = m[1];
  const port = Number(m[2]);
  const gw = {
    dir, conf, proc, port, host, childLog, exited,
    base: `http://${host}:${port}`,
    url: `http://${host}:${port}${servers[0].path || '/mcp'}`,
    logs: logsNow,
    /** What the gateway wrote to stdout and stderr (with log_file: what it wrote before the file). */
    stderr: () => stderr,
    waitLog: (re, ms = 5000) => waitFor(() => re.exec(logsNow()), ms, `log ${re}`),
    /** Lines the example child received (its --log file). */
    /** Complete lines only: a last piece without its newline is still being written. */
    childLines: () => (fs.existsSync(childLog) ? fs.readFileSync(childLog, 'utf8').split('\n').slice(0, -1).filter(Boolean) : []),
    childMessages: () => gw.childLines().map((l) => { try { return JSON.parse(l); } catch { return { raw: l }; } }),
    /** pids of children the gateway spawned, from its log */
    childPids: () => [...logsNow().matchAll(/child=(\d+)/g)].map((x) => Number(x[1])),
    /**
     * Stops the gateway and ASSERTS how it exited, so no test can forget to:
     *   await gw.stop()                       SIGTERM; asserts exit status 0, no signal
     *   await gw.stop('SIGINT')               another signal; still asserts exit status 0
     *   await gw.stop('SIGKILL', { expect: { code: null, signal: 'SIGKILL' } })
     *                                         a different outcome, stated explicitly
     *   await gw.stop({ expect: null })       no assertion: only for cleanup on a path that is
     *                                         already failing (or already asserted the exit itself)
     *   await gw.stop({ signal, expect })     the same, both in one object
     * A gateway that has already exited is not signalled; its status is checked all the same.
     * Waits at most 15 s (then SIGKILL and throw). Returns {code, signal}; the assertion
     * message carries the tail of the gateway's log.
     */
    async stop(signal = 'SIGTERM', { expect = CLEAN_EXIT } = {}) {
      if (typeof signal === 'object' && signal !== null) ({ signal = 'SIGTERM', expect = CLEAN_EXIT } = signal);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const r = await Promise.race([exited, new Promise((res) => setTimeout(() => res(null), 15000).unref())]);
      if (r === null) { proc.kill('SIGKILL'); throw new Error(`gateway did not stop within 15 s; log (tail):\n${logsNow().slice(-4000)}`); }
      await Promise.race([drained, new Promise((res) => setTimeout(res, 2000).unref())]);
      if (expect !== null) assert.deepEqual(r, expect, `gateway exit status after ${signal}; log (tail):\n${logsNow().slice(-4000)}`);
      return r;
    },
  };
  return gw;
}

/**
 * Starts a gateway, runs fn(gw), always stops it; a clean exit is asserted when fn passed (when
 * it failed, its own error is reported and the log's tail printed).
 */
export async function withGateway(opts, fn) {
  const gw = await startGateway(opts);
  let ok = false;
  try {
    await fn(gw);
    ok = true;
  } finally {
    if (ok) await gw.stop();
    else {
      await gw.stop({ expect: null }).catch(() => {});
      console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    }
  }
}

/**
 * Runs fn() on a started gateway, then stops it asserting a clean exit, and returns what fn
 * returned; when fn or that stop fails, the gateway is stopped whatever its exit, the log's tail
 * printed, and the error rethrown. The caller's own cleanup goes in a finally around it.
 */
export async function stopAfter(gw, fn) {
  try {
    const out = await fn();
    await gw.stop();
    return out;
  } catch (e) {
    await gw.stop({ expect: null });
    console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    throw e;
  }
}

/** True once no process with this pid exists any more (not even a zombie: it was reaped). */
export const reaped = (pid) => !fs.existsSync(`/proc/${pid}`);

/**
 * Whether process pid is blocked on a full stdout pipe, with no write progress over ten
 * consecutive polls (state carries the count between polls: pass the same {} each time).
 */
export function stdoutBlocked(pid, state) {
  let wchan = '';
  let wchar = null;
  try {
    wchan = fs.readFileSync(`/proc/${pid}/wchan`, 'utf8').trim();
    wchar = /wchar:\s*(\d+)/.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? null;
  } catch { /* gone */ }
  state.stable = /pipe_write$/.test(wchan) && wchar !== null && wchar === (state.last ?? null) ? (state.stable ?? 0) + 1 : 0;
  state.last = wchar;
  return state.stable >= 10;
}

export function pidAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie still answers kill(0); check its state.
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(st);
  } catch {
    return false;
  }
}

/** Parses complete SSE events out of text: [{event, id, data, json}] (comments skipped). */
export function parseSse(text) {
  const out = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const ev = { event: 'message', data: '' };
    let hasData = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const k = i < 0 ? line : line.slice(0, i);
      const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (k === 'data') { ev.data += (hasData ? '\n' : '') + v; hasData = true; } else if (k === 'event') ev.event = v; else if (k === 'id') ev.id = v; else if (k === 'retry') ev.retry = v;
    }
    if (!hasData) continue;
    try { ev.json = JSON.parse(ev.data); } catch { /* not JSON */ }
    out.push(ev);
  }
  return out;
}

/** Like parseSse, but only events already terminated by a blank line (none half-received). */
export function parseSseComplete(text) {
  const end = text.lastIndexOf('\n\n');
  return end < 0 ? [] : parseSse(text.slice(0, end + 2));
}

/** Splits an SSE event id "<stream>-<seq>" into numbers; null when it is not of that form. */
export function parseEventId(id) {
  const m = /^(\d+)-(\d+)$/.exec(id ?? '');
  return m ? { stream: Number(m[1]), seq: Number(m[2]) } : null;
}

/**
 * Low-level request that exposes the live response: resolves at response headers with
 * {status, headers, res, req, text(), events(), waitEvent(pred, ms), end, drop()}.
 */
export function request(url, { method = 'POST', headers = {}, body, agent = false } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const h = { ...headers };
    if (payload !== undefined && h['Content-Length'] === undefined && !h['Transfer-Encoding']) h['Content-Length'] = Buffer.byteLength(payload);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h, agent });
    req.on('error', reject);
    req.on('response', (res) => {
      let buf = '';
      let ended = false;
      const waiters = [];
      const kick = () => { for (const w of waiters.splice(0)) w(); };
      res.setEncoding('utf8');
      res.on('data', (d) => { buf += d; kick(); });
      res.on('end', () => { ended = true; kick(); });
      res.on('error', () => { ended = true; kick(); });
      res.on('close', () => { ended = true; kick(); });
      const r = {
        status: res.statusCode,
        headers: res.headers,
        req,
        res,
        get ended() { return ended; },
        text: () => buf,
        events: () => parseSse(buf),
        /** the events received whole so far (a live stream may end in half an event) */
        completeEvents: () => parseSseComplete(buf),
        json: () => JSON.parse(buf),
        /** resolves when the body has ended (or rejects after ms) */
        async done(ms = 10000) {
          await waitFor(() => ended, ms, 'response end');
          return buf;
        },
        async waitEvent(pred, ms = 5000) {
          return waitFor(() => r.events().find((e) => e.json && pred(e.json)), ms, 'SSE event');
        },
        /** drops the connection abruptly (the client vanishes) */
        drop() { req.socket?.destroy(); res.destroy(); },
      };
      resolve(r);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** POST a JSON-RPC message with the usual MCP headers. */
export function post(gw, msg, { sid, headers = {}, url, agent } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'POST', headers: h, body: msg, agent });
}

/**
 * A POST of msg to gw's path p over a raw socket, in two steps: the head (the usual MCP headers,
 * then `headers`, Connection: close) goes now, the body when send() is called. done(ms) resolves,
 * once the gateway closed the connection (or ms passed), with {status, headers, text, answers}:
 * text is the body (de-chunked), answers the JSON-RPC answers in it (a JSON body, or SSE events).
 */
export function splitPost(gw, p, msg, headers = {}) {
  const body = JSON.stringify(msg);
  const h = { Host: `${gw.host}:${gw.port}`, 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...headers, 'Content-Length': Buffer.byteLength(body), Connection: 'close' };
  const sock = net.connect(gw.port, gw.host);
  let data = '';
  sock.setEncoding('utf8');
  sock.on('data', (d) => { data += d; });
  const closed = new Promise((res) => { sock.on('close', res); sock.on('error', res); });
  sock.write(`POST ${p} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
  return {
    send: () => sock.write(body),
    async done(ms = 10000) {
      let timer;
      await Promise.race([closed, new Promise((res) => { timer = setTimeout(res, ms); })]);
      clearTimeout(timer);
      sock.destroy();
      const i = data.indexOf('\r\n\r\n');
      assert.ok(i > 0, `a whole response head: ${JSON.stringify(data)}`);
      const lines = data.slice(0, i).split('\r\n');
      const rh = Object.fromEntries(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      let text = data.slice(i + 4);
      if (/chunked/i.test(rh['transfer-encoding'] ?? '')) {
        let out = '';
        for (let n, k = 0; (n = parseInt(text, 16)) > 0 && k < 100000; k++) {
          const at = text.indexOf('\r\n') + 2;
          out += text.slice(at, at + n);
          text = text.slice(at + n + 2);
        }
        text = out;
      }
      const answers = /^text\/event-stream/.test(rh['content-type'] ?? '')
        ? parseSse(text).map((e) => e.json).filter((j) => j && ('result' in j || 'error' in j))
        : text ? [JSON.parse(text)] : [];
      return { status: Number(lines[0].split(' ')[1]), headers: rh, text, answers };
    },
  };
}

export function get(gw, { sid, headers = {}, url } = {}) {
  const h = { Accept: 'text/event-stream', ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'GET', headers: h });
}

/** GET with Last-Event-ID: resumes the stream that event id names, after that event. */
export function resume(gw, sid, lastEventId, { headers = {}, url } = {}) {
  return get(gw, { sid, url, headers: { 'Last-Event-ID': lastEventId, ...headers } });
}

export function del(gw, { sid, headers = {}, url } = {}) {
  const h = { ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'DELETE', headers: h });
}

let nextId = 1;
export function rpc(method, params, id = nextId++) {
  const m = { jsonrpc: '2.0', id, method };
  if (params !== undefined) m.params = params;
  return m;
}

/** initialize + notifications/initialized; returns {sid, result, pid}. */
export async function initSession(gw, { version = '2025-06-18', url, capabilities = {}, headers = {} } = {}) {
  const r = await post(gw, rpc('initialize', { protocolVersion: version, capabilities, clientInfo: { name: 'it', version: '1' } }), { url, headers });
  if (r.status !== 200) throw new Error(`initialize: HTTP ${r.status} ${await r.done()}`);
  const sid = r.headers['mcp-session-id'];
  await r.done();
  const ev = r.events().find((e) => e.json && (e.json.result || e.json.error));
  if (!ev || !ev.json.result) throw new Error(`initialize failed: ${r.text()}`);
  const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, url, headers: { ...headers, 'MCP-Protocol-Version': ev.json.result.protocolVersion } });
  await n.done();
  if (n.status !== 202) throw new Error(`initialized: HTTP ${n.status}`);
  const m = new RegExp(`session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created: server=\\S+ child=(\\d+)`).exec(gw.logs());
  return { sid, result: ev.json.result, pid: m ? Number(m[1]) : poolChildOf(gw, sid), version: ev.json.result.protocolVersion };
}

/** The log label of a pooled session (its sealed id is never logged). */
export const pooledLabel = (sid) => `sealed:${crypto.createHash('sha256').update(sid).digest('hex').slice(0, 16)}`;

/**
 * The pid of the pool child that serves pooled session sid: the server's newest pool child still
 * running, when it has exactly one (pool_max_children = 1, as the pooled matrix run sets); else
 * undefined. What a test of a child-mode session reads as the session's child.
 */
export function poolChildOf(gw, sid) {
  if (!sid.startsWith('~')) return undefined;
  const logs = gw.logs();
  const srv = new RegExp(`session=${pooledLabel(sid)} pooled session created: server=(\\S+)`).exec(logs)?.[1];
  if (!srv) return undefined;
  const pids = [...logs.matchAll(new RegExp(`session=pool:${srv.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')}\\\\?#\\d+ pool child started: pid (\\d+)`, 'g'))]
    .map((x) => Number(x[1])).filter((pid) => pidAlive(pid));
  return pids.length === 1 ? pids[0] : undefined;
}

/** Calls a tool and waits for the whole SSE body; returns {r, events, response}. */
export async function callTool(gw, sid, name, args = {}, { id, meta, ms = 10000 } = {}) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  const r = await post(gw, rpc('tools/call', params, id), { sid });
  await r.done(ms);
  const events = r.events();
  return { r, events, response: events.map((e) => e.json).find((j) => j && ('result' in j || 'error' in j)) };
}
