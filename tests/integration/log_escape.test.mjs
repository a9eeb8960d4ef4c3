// SPDX-License-Identifier: MIT
// Nothing a client or a child sends can forge a log line or a journald priority. For each
// log_format (text, json, journal) the gateway runs at log_level = debug while CR, LF, `"`, `\`,
// NUL, `<0>`, escape and DEL bytes and invalid UTF-8 arrive through every route that reaches its
// log: the 2024-11-05 `?sessionId=` query parameter (URL-decoded by libmicrohttpd), the
// Mcp-Session-Id header (printable ASCII only), a JSON-RPC method name, request id, tool name and
// cancel reason, and a child's stderr lines. Then every line of the gateway's stderr must be one
// well-formed line of its format (JSON lines parse; journal lines start with exactly one <N>
// that is the line's level; text lines start with a timestamp and a level) with no control byte,
// the whole output must be valid UTF-8, and the hostile values must be there, escaped, and come
// back exactly once the format's escaping is undone.
//
// Under systemd (JOURNAL_STREAM names stderr) the journal format goes by the native protocol, to a
// real receiver here (tests/fixtures/journal_sink.c, named by MCPGW_JOURNAL_SOCKET): each entry
// keeps the line's text as MESSAGE and carries PRIORITY, SYSLOG_IDENTIFIER and the MCPGW_ fields
// (session, server, principal, request id...), and a hostile value stays inside its field.
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, GW_BIN, callTool, initSession, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const PRIO = { error: 3, warn: 4, info: 6, debug: 7 };
const LEVEL_OF_PRIO = Object.fromEntries(Object.entries(PRIO).map(([k, v]) => [v, k]));
const CUT = '\u2026[truncated]';

/** Undoes the text/journal escaping (\\ \n \r \t \xNN); any other backslash is an error. */
function unescape(s) {
  const parts = [];
  let i = 0;
  for (;;) {
    const j = s.indexOf('\\', i);
    parts.push(Buffer.from(s.slice(i, j === -1 ? undefined : j), 'utf8'));
    if (j === -1) break;
    const e = s[j + 1];
    if (e === '\\' || e === 'n' || e === 'r' || e === 't') {
      parts.push(Buffer.from(e === '\\' ? '\\' : e === 'n' ? '\n' : e === 'r' ? '\r' : '\t'));
      i = j + 2;
    } else {
      const m = /^x([0-9a-f]{2})/.exec(s.slice(j + 1, j + 4));
      assert.ok(m, `unknown escape at ${j} in ${JSON.stringify(s)}`);
      parts.push(Buffer.from([parseInt(m[1], 16)]));
      i = j + 4;
    }
  }
  return Buffer.concat(parts);
}

/**
 * Checks one line (without its newline) is well-formed in format; returns
 * {level, sid, msg, rawMsg} with sid and msg as strings (bytes decoded as UTF-8) and msgBytes.
 */
function parseLine(format, line) {
  assert.doesNotMatch(line, /[\x00-\x1f\x7f]/, `a control character in ${JSON.stringify(line)}`);
  if (format === 'json') {
    let o;
    assert.doesNotThrow(() => { o = JSON.parse(line); }, `not JSON: ${line}`);
    assert.equal(typeof o, 'object');
    if (o.type === 'access') {
      // An access line ([gateway] access_log unset: in this log): fields, no msg.
      assert.equal(o.level, 'info', line);
      for (const [k, v] of Object.entries(o)) assert.ok(typeof v === 'string' || typeof v === 'number', `${k} in ${line}`);
      return { level: o.level, sid: o.session, msg: '', rawMsg: '' };
    }
    // Fields some lines carry besides msg (which says the same in words).
    const FIELDS = ['server', 'child', 'principal', 'session_label', 'reason', 'method', 'exit_status', 'signal'];
    assert.deepEqual(Object.keys(o).filter((k) => !['ts', 'level', 'session', 'request_id', 'msg', ...FIELDS].includes(k)), [], line);
    for (const k of FIELDS) if (k in o) assert.ok(typeof o[k] === 'string' || Number.isInteger(o[k]), `${k} in ${line}`);
    if ('request_id' in o) assert.match(o.request_id, /^[A-Za-z0-9._:-]{1,64}$/, line);
    assert.match(o.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, line);
    assert.ok(o.level in PRIO, `level ${o.level}: ${line}`);
    assert.equal(typeof o.msg, 'string', line);
    if ('session' in o) assert.equal(typeof o.session, 'string', line);
    return { level: o.level, sid: o.session, msg: o.msg, rawMsg: o.msg };
  }
  assert.doesNotMatch(line, /[\u0080-\u009f]/, `a C1 control in ${JSON.stringify(line)}`);
  let m;
  let level;
  if (format === 'journal') {
    m = /^<([0-7])>(?!<)(?:session=(\S*) )?(.*)$/s.exec(line);
    assert.ok(m, `not one leading <N>: ${JSON.stringify(line)}`);
    level = LEVEL_OF_PRIO[m[1]];
    assert.ok(level, `priority <${m[1]}> is no level the gateway uses: ${line}`);
    m = [m[0], m[2], m[3]];
  } else {
    m = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (error|warn|info|debug) (?:session=(\S*) )?(.*)$/s.exec(line);
    assert.ok(m, `not "ts level [session=ID ]msg": ${JSON.stringify(line)}`);
    level = m[1];
    m = [m[0], m[2], m[3]];
  }
  // A line logged while a request is handled ends with its request id.
  const rid = / request_id=[A-Za-z0-9._:-]{1,64}$/.exec(m[2]);
  if (rid) m[2] = m[2].slice(0, rid.index);
  const msgBytes = unescape(m[2]);
  return {
    level,
    sid: m[1] === undefined ? undefined : unescape(m[1]).toString('utf8'),
    msg: msgBytes.toString('utf8'),
    msgBytes,
    rawMsg: m[2],
  };
}

/** The escaped form the gateway is expected to write for value (valid UTF-8) in format. */
function escaped(format, value, { sid = false } = {}) {
  if (format === 'json') {
    return JSON.stringify(value).slice(1, -1).replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }
  const b = Buffer.from(value, 'utf8');
  let o = '';
  const hex = (x) => `\\x${x.toString(16).padStart(2, '0')}`;
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c === 0x5c) o += '\\\\';
    else if (c === 0x0a) o += '\\n';
    else if (c === 0x0d) o += '\\r';
    else if (c === 0x09) o += '\\t';
    else if (c < 0x20 || c === 0x7f || (sid && c === 0x20)) o += hex(c);
    else if (c === 0xc2 && b[i + 1] >= 0x80 && b[i + 1] <= 0x9f) o += hex(c) + hex(b[++i]);
    else o += String.fromCharCode(c);
  }
  return Buffer.from(o, 'latin1').toString('utf8');
}

/** A child that answers the MCP handshake and writes hostile lines on stderr first. */
const NOISY_CHILD = `
import fs from 'node:fs';
const err = (...parts) => fs.writeSync(2, Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)))));
err('<0>noisy: forged emergency\\n');
err('noisy: cr\\rinside <3>x\\r\\n');
err('noisy: quote " backslash \\\\ brace "}\\n');
err('noisy: nul ', [0], ' <0>after the nul\\n');
err('noisy: esc \\x1b[31mred\\x1b[0m del \\x7f tab \\t bell \\x07 nel \\u0085\\n');
err('noisy: invalid ', [0xff, 0xfe, 0xc3], ' end\\n');
err('"}\\n{"ts":"x","level":"error","msg":"forged"}\\n');
err('noisy: long ', Buffer.alloc(3000, 1), '\\n');
let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  pending += d;
  let nl;
  while ((nl = pending.indexOf('\\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    let m;
    try { m = JSON.parse(line); } catch { continue; }
    if (m.id === undefined || m.method === undefined) continue;
    const reply = m.method === 'initialize'
      ? { result: { protocolVersion: m.params.protocolVersion, capabilities: {}, serverInfo: { name: 'noisy', version: '1' } } }
      : { error: { code: -32601, message: 'Method not found' } };
    fs.writeSync(1, JSON.stringify({ jsonrpc: '2.0', id: m.id, ...reply }) + '\\n');
  }
});
`;

/** The hostile values, and where each is expected to show. */
const LEGACY_SIDS = [
  { send: 'a\r\n<0>forged sid', want: 'a\r\n<0>forged sid' },
  { send: 'q"uote\\back', want: 'q"uote\\back' },
  { send: '<0>start', want: '<0>start' },
  { send: 'x\n{"level":"error"}', want: 'x\n{"level":"error"}' },
  { send: 'nul\0<0>after', want: 'nul' }, // %00 in the target: refused with 400 before any route runs
  { send: 'esc\x1b[2J del\x7f', want: 'esc\x1b[2J del\x7f' },
];
const HEADER_SID = 'q"uote\\back<0>x';
const METHOD = 'evil\r\n<0>forged "method" \\';
const REQUEST_ID = 'id\r\n<0>"\\';
const TOOL = 'tool\r\n<0>"\\';
const REASON = 'why\r"q"\\\n<0>forged reason';

for (const format of ['text', 'json', 'journal']) {
  test(`log_format = ${format}: every line is well-formed and every hostile value escaped`, async () => {
    const dir = tmpdir('mcpgw-logesc-');
    const noisy = path.join(dir, 'noisy.mjs');
    fs.writeFileSync(noisy, NOISY_CHILD);
    const gw = await startGateway({
      gateway: { log_format: format, log_level: 'debug', legacy_sse: 1 },
      servers: [
        { name: 'example', path: '/mcp' },
        { name: 'noisy', path: '/noisy', command: `${process.execPath} ${noisy}` },
      ],
    });
    // Raw bytes from here on (startGateway's own collector decodes chunks as UTF-8).
    const raw = [];
    gw.proc.stderr.on('data', (d) => raw.push(d));
    let ok = false;
    let sid;
    try {
      // 1. ?sessionId= of the 2024-11-05 message endpoint: any byte but NUL gets through decoding
      // (a NUL, %00, is refused with 400 before any route runs).
      for (const { send } of LEGACY_SIDS) {
        const r = await request(`${gw.base}/mcp/messages?sessionId=${encodeURIComponent(send)}`, {
          headers: { 'Content-Type': 'application/json' },
          body: rpc('ping', {}),
        });
        await r.done();
        // %00 anywhere in the request target is refused before routing.
        const want = send.includes('\0') ? 400 : 404;
        assert.equal(r.status, want, `sessionId ${JSON.stringify(send)}: HTTP ${r.status} ${r.text()}`);
      }
      // 2. Mcp-Session-Id: printable ASCII only, but ", \ and <0> are printable.
      const h = await post(gw, rpc('ping', {}), { sid: HEADER_SID });
      await h.done();
      assert.equal(h.status, 404);
      // 3. Method name, request id, tool name, cancel reason in a live session.
      const s = await initSession(gw);
      sid = s.sid;
      const m1 = await post(gw, { jsonrpc: '2.0', id: REQUEST_ID, method: METHOD }, { sid: s.sid });
      await m1.done();
      const m2 = await post(gw, { jsonrpc: '2.0', method: METHOD }, { sid: s.sid });
      await m2.done();
      const m3 = await post(gw, { jsonrpc: '2.0', id: 'nul', method: 'nul\u0000<0>after' }, { sid: s.sid });
      await m3.done();
      assert.equal(m3.status, 400, 'a method holding \\u0000 is refused (jsonrpc.c)');
      const t = await callTool(gw, s.sid, TOOL, {}, { id: REQUEST_ID });
      assert.ok(t.response, `an answer for the unknown tool: ${t.r.text()}`);
      const slow = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 50 } }, REQUEST_ID), { sid: s.sid });
      await waitFor(() => gw.childMessages().some((x) => x.params?.name === 'slow'), 5000, 'the slow call at the child');
      const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: REQUEST_ID, reason: REASON } }, { sid: s.sid });
      await c.done();
      assert.equal(c.status, 202);
      await slow.done();
      await gw.waitLog(/forged reason/);
      // 4. A child's stderr.
      const n = await initSession(gw, { url: `${gw.base}/noisy` });
      assert.ok(n.sid);
      // 10 lines: 8 writes, one holding two lines, and 3000 bytes logged in two pieces.
      const stderrLines = () => gw.logs().split('\n').filter((l) => l.includes(n.sid) && l.includes('child stderr: ')).length;
      await waitFor(() => stderrLines() >= 10, 5000, 'the noisy child\'s stderr lines');
      ok = true;
    } finally {
      const r = await gw.stop();
      if (ok) assert.deepEqual(r, { code: 0, signal: null }, 'gateway exit status');
      else console.log(`gateway log (tail):\n${gw.logs().slice(-6000)}`);
    }

    const out = gw.logs();
    assert.ok(out.endsWith('\n'), 'the log ends with a whole line');
    assert.doesNotThrow(() => new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(raw)), 'stderr is valid UTF-8');
    const lines = out.slice(0, -1).split('\n').map((l) => ({ l, p: parseLine(format, l) }));
    const find = (pred, what) => {
      const hit = lines.find(({ p }) => pred(p));
      assert.ok(hit, `${format}: no line with ${what}:\n${out.slice(-6000)}`);
      return hit;
    };
    // Nothing forged: no error line at all, no message that is only what a peer wrote.
    for (const { l, p } of lines) {
      assert.notEqual(p.level, 'error', `an error line: ${l}`);
      assert.ok(!/^(<\d>|\{|forged)/.test(p.msg), `a message that starts like a forged line: ${l}`);
    }

    // The escaped values are there, and read back exactly.
    const sidField = (v) => (format === 'json' ? `"session":"${escaped(format, v)}"` : `session=${escaped(format, v, { sid: true })} `);
    // (The NUL one never reaches the session lookup: refused with 400 before routing.)
    for (const { want } of [...LEGACY_SIDS.filter(({ send }) => !send.includes('\0')), { want: HEADER_SID }]) {
      const { l, p } = find((q) => q.sid === want && q.msg.startsWith('request refused: 404'), `session ${JSON.stringify(want)}`);
      assert.equal(p.level, 'info', l);
      if (format === 'journal') assert.ok(l.startsWith(`<6>${sidField(want)}`), l);
      else assert.ok(l.includes(sidField(want)), `${sidField(want)} in ${l}`);
    }
    find((p) => p.sid === sid && p.msg.includes(METHOD), 'the method name');
    assert.ok(out.includes(escaped(format, METHOD)), `the method, escaped: ${escaped(format, METHOD)}`);
    find((p) => p.msg.includes('reason=why\r"q"\\'), 'the cancel reason (child stderr)');
    find((p) => p.msg === 'child stderr: <0>forged reason', 'the second line of the reason');

    // The noisy child's stderr, line by line.
    const noisyLines = [
      'child stderr: <0>noisy: forged emergency',
      'child stderr: noisy: cr\rinside <3>x\r',
      'child stderr: noisy: quote " backslash \\ brace "}',
      'child stderr: noisy: nul ', // %.*s of the stderr line stops at its NUL (upstream.c)
      'child stderr: noisy: esc \x1b[31mred\x1b[0m del \x7f tab \t bell \x07 nel \u0085',
      'child stderr: "}',
      'child stderr: {"ts":"x","level":"error","msg":"forged"}',
    ];
    for (const want of noisyLines) {
      const { l, p } = find((q) => q.msg === want, JSON.stringify(want));
      assert.equal(p.level, 'info', l);
      assert.ok(p.sid, `child stderr with the session id: ${l}`);
      if (format === 'journal') assert.ok(l.startsWith('<6>session='), l);
    }
    for (const want of noisyLines) assert.ok(out.includes(escaped(format, want)), `escaped: ${escaped(format, want)}`);
    if (format === 'json') {
      find((p) => p.msg === 'child stderr: noisy: invalid \u00ff\u00fe\u00c3 end', 'invalid UTF-8 as Latin-1');
      assert.ok(out.includes('noisy: invalid \\u00ff\\u00fe\\u00c3 end'), 'invalid UTF-8, escaped');
    } else {
      const { p } = find((q) => q.msg.startsWith('child stderr: noisy: invalid '), 'invalid UTF-8');
      assert.deepEqual(p.msgBytes, Buffer.concat([Buffer.from('child stderr: noisy: invalid '), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from(' end')]));
      assert.ok(out.includes('noisy: invalid \\xff\\xfe\\xc3 end'), 'invalid UTF-8, escaped');
    }
    // The 3000-byte stderr line of \x01 arrives in pieces of up to 2047 bytes; escaped, the
    // first is longer than a log line: cut with the mark, never in the middle of an escape.
    const long = lines.filter(({ p }) => p.msg.startsWith('child stderr: noisy: long '));
    assert.ok(long.length >= 1, 'the long line');
    assert.ok(long[0].p.msg.endsWith(CUT), `cut with the mark: ${long[0].l.slice(-60)}`);
    assert.ok(Buffer.byteLength(long[0].l) + 1 <= 4096, `a line of ${Buffer.byteLength(long[0].l)} bytes`);
    assert.match(long[0].p.msg.slice('child stderr: noisy: long '.length, -CUT.length), /^\x01+$/);
    for (const { l } of lines) assert.ok(Buffer.byteLength(l) + 1 <= 4096, `a line of ${Buffer.byteLength(l)} bytes`);
  });
}


// ---- the journal's native protocol ---------------------------------------------------------------

/** A journal receiver at dir/journal.sock: {path, entries() (parsed so far), stop()}. */
async function journalSink(dir) {
  const sock = path.join(dir, 'journal.sock');
  const p = spawn(process.env.GW_JOURNAL_SINK, [sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d.toString('latin1'); });
  const exited = new Promise((res) => p.on('exit', res));
  await waitFor(() => fs.existsSync(sock) || p.exitCode !== null, scaled(5000), 'the journal receiver to bind');
  assert.equal(p.exitCode, null, 'the journal receiver runs');
  return {
    path: sock,
    entries: () => out.split('\n').slice(0, -1).map((l) => JSON.parse(l)),
    async stop() { p.kill('SIGTERM'); await exited; },
  };
}

/**
 * A gateway whose stderr is the file dir/stderr and JOURNAL_STREAM names it (as systemd names the
 * journal's stream), its journal socket at socket: {base, url, host, port, proc, stderr(), stop()}.
 * started: reads whether it listens (from the journal, or from stderr).
 */
async function journalGateway(dir, socket, started) {
  const conf = path.join(dir, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\nlog_format = journal\nlog_level = debug\nshutdown_drain_ms = 0\n[server:example]\npath = /mcp\ncommand = /bin/sh -c 'echo said-on-stderr >&2; exec ${EXAMPLE}'\n`);
  const errPath = path.join(dir, 'stderr');
  const fd = fs.openSync(errPath, 'a');
  const st = fs.fstatSync(fd);
  const env = { ...process.env, JOURNAL_STREAM: `${st.dev}:${st.ino}`, MCPGW_JOURNAL_SOCKET: socket };
  const proc = spawn(GW_BIN, ['--config', conf], { stdio: ['ignore', 'ignore', fd], env });
  fs.closeSync(fd);
  const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
  const stderr = () => fs.readFileSync(errPath, 'utf8');
  const m = await waitFor(() => started(stderr()) || (proc.exitCode !== null && 'exit'), scaled(5000), 'the gateway to listen');
  assert.notEqual(m, 'exit', `the gateway exited: ${stderr()}`);
  const [, host, port] = m;
  return {
    host, port: Number(port), proc, stderr, logs: stderr,
    base: `http://${host}:${port}`, url: `http://${host}:${port}/mcp`,
    async stop() {
      proc.kill('SIGTERM');
      assert.deepEqual(await exited, { code: 0, signal: null }, stderr());
    },
  };
}

test('log_format = journal on the journal\'s stream: entries go by the native protocol with PRIORITY, SYSLOG_IDENTIFIER and MCPGW_SESSION, _SERVER, _PRINCIPAL, _REQUEST_ID fields; MESSAGE is the line\'s text; a hostile value stays in its field; with no journal there, lines go to stderr', async () => {
  const dir = tmpdir('mcpgw-journal-');
  const sink = await journalSink(dir);
  const listening = (e) => /^listening on (\S+):(\d+)$/.exec(e.MESSAGE ?? '');
  let gw;
  try {
    gw = await journalGateway(dir, sink.path, () => sink.entries().map(listening).find(Boolean));
    const rid = 'journal-test-rid-1';
    const { sid } = await initSession(gw);
    // A tool name that tries to end its field and forge the next one.
    const hostile = 'x\nMCPGW_SERVER=forged\nPRIORITY=0';
    const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'hi' } }), { sid, headers: { 'MCP-Protocol-Version': '2025-06-18', 'X-Request-Id': rid } });
    await r.done(scaled(5000));
    const bad = await post(gw, rpc('tools/call', { name: hostile, arguments: {} }), { sid, headers: { 'MCP-Protocol-Version': '2025-06-18' } });
    await bad.done(scaled(5000));
    const access = (fn) => sink.entries().find((e) => /^access /.test(e.MESSAGE ?? '') && fn(e));
    await waitFor(() => access((e) => e.MCPGW_REQUEST_ID === rid) && access((e) => e.MCPGW_MCP_METHOD === 'tools/call' && e.MCPGW_REQUEST_ID !== rid), scaled(5000), 'both access entries');
    const all = sink.entries();
    for (const e of all) {
      assert.deepEqual(Object.keys(e).filter((k) => !/^(MESSAGE|PRIORITY|SYSLOG_IDENTIFIER|MCPGW_[A-Z0-9_]+)$/.test(k)), [], JSON.stringify(e));
      assert.match(e.PRIORITY, /^[3467]$/, JSON.stringify(e));
      assert.equal(e.SYSLOG_IDENTIFIER, 'mcp-gateway');
      assert.doesNotMatch(e.MESSAGE, /^</, 'no priority prefix in MESSAGE');
      for (const [k, v] of Object.entries(e)) assert.doesNotMatch(v, /[\x00-\x1f\x7f]/, `${k}: a control byte`);
      if (e.MCPGW_SERVER !== undefined) assert.equal(e.MCPGW_SERVER, 'example', JSON.stringify(e));
    }
    // The session's creation: its id, server, principal, child and label as fields; the text as
    // the journal format writes it on stderr.
    const created = all.find((e) => /session created/.test(e.MESSAGE));
    assert.ok(created, JSON.stringify(all.slice(0, 10)));
    assert.equal(created.PRIORITY, '6');
    assert.equal(created.MCPGW_SESSION, sid);
    assert.equal(created.MCPGW_SERVER, 'example');
    assert.equal(created.MCPGW_PRINCIPAL, 'address:127.0.0.1');
    assert.match(created.MCPGW_CHILD, /^\d+$/);
    assert.match(created.MCPGW_SESSION_LABEL, /^[0-9a-f]{16}$/);
    assert.match(created.MESSAGE, new RegExp(`^session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created: server=example child=${created.MCPGW_CHILD} `));
    // A child's stderr line: its session, server and pid.
    const said = await waitFor(() => sink.entries().find((e) => /child stderr: said-on-stderr$/.test(e.MESSAGE)), scaled(5000), 'the child\'s stderr line');
    assert.equal(said.MCPGW_SESSION, sid);
    assert.equal(said.MCPGW_SERVER, 'example');
    assert.equal(said.MCPGW_CHILD, created.MCPGW_CHILD);
    // Lines logged while a request is handled carry its request id; debug is priority 7.
    const during = all.filter((e) => e.MCPGW_REQUEST_ID === rid && !/^access /.test(e.MESSAGE));
    assert.ok(during.some((e) => e.PRIORITY === '7' && e.MCPGW_SESSION === sid), JSON.stringify(during));
    // The access entry: its fields by name.
    const a = access((e) => e.MCPGW_REQUEST_ID === rid);
    assert.equal(a.MCPGW_SESSION, sid);
    assert.equal(a.MCPGW_PRINCIPAL, 'address:127.0.0.1');
    assert.equal(a.MCPGW_STATUS, '200');
    assert.equal(a.MCPGW_CLIENT, '127.0.0.1');
    assert.equal(a.MCPGW_NAME, 'echo');
    // The hostile name (the access log keeps a name's JSON escapes as they came, then escapes
    // the backslash): inside its own field, nothing forged.
    const h = access((e) => e.MCPGW_MCP_METHOD === 'tools/call' && e.MCPGW_REQUEST_ID !== rid);
    assert.equal(h.MCPGW_NAME, 'x\\\\nMCPGW_SERVER=forged\\\\nPRIORITY=0');
    assert.equal(h.PRIORITY, '6');
    // Nothing of this went to stderr.
    assert.doesNotMatch(gw.stderr(), /listening on|session created|access /);
    await gw.stop();
    gw = null;

    // No journal at that path: the lines go to stderr, as the journal format writes them.
    const gone = path.join(dir, 'no-journal.sock');
    gw = await journalGateway(dir, gone, (t) => /^<6>listening on (\S+):(\d+)$/m.exec(t));
    await initSession(gw);
    await waitFor(() => /^<6>session=\S+ session created: server=example /m.test(gw.stderr()), scaled(5000), 'the line on stderr');
    await gw.stop();
    gw = null;
  } finally {
    if (gw) gw.proc.kill('SIGKILL');
    await sink.stop();
  }
});
