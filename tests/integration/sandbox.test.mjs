// SPDX-License-Identifier: MIT
// The box around a child (sandbox = on), proven by a hostile child (tests/fixtures/box_hostile.c)
// run through the real gateway: every attempt is refused with the box on, and succeeds with it
// off (so each case can fail), while the gateway and another session go on serving.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, callTool, del, everythingServer, initSession, metricSamples, post, request, rpc, startGateway, stopAfter, tmpdir, waitFor } from '../lib/gw.mjs';
import { fdTargets } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const HOSTILE = process.env.GW_BOX_HOSTILE;
const ROOT = process.getuid() === 0;
// The kernel's Landlock ABI (0: none), asked by the hostile child run directly (not boxed).
const LANDLOCK = (() => {
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'try', arguments: { action: 'landlock_abi' } } };
  const r = spawnSync(HOSTILE, [], { input: `${JSON.stringify(call)}\n`, encoding: 'utf8', timeout: 10000 });
  return Number(/"ok:(\d+)"/.exec(r.stdout)[1]);
})();

/** The tool's text: "ok", "ok:TEXT", "err:ERRNO" or "sig:N"; with gw.headers (a bearer token) on the call. */
async function attempt(gw, sid, args) {
  const r = await post(gw, rpc('tools/call', { name: 'try', arguments: args }), { sid, headers: gw.headers ?? {} });
  await r.done(scaled(20000));
  const response = r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
  assert.ok(response?.result, `try ${JSON.stringify(args)}: HTTP ${r.status} ${r.text()}`);
  return response.result.content[0].text;
}

/**
 * A gateway fronting the hostile child with the box on or off, every attempt made, the texts
 * returned by case name. The directory S holds the gateway's own files (S/conf/gateway.ini, the
 * admin token, the bearer tokens file), a public file, and the writable directory S/rw; S is
 * bound into the box read-only, so what is hidden there is hidden by the box, not by the private
 * /tmp. The tokens file is readable by all (it holds digests, and the gateway allows it), so that
 * for a root gateway too it is the view that keeps it out, not the boxed child's own uid.
 */
async function scenario(box) {
  const s = tmpdir('mcpgw-box-');
  fs.chmodSync(s, 0o755); // a root gateway's boxed child runs as a uid of its own
  fs.mkdirSync(path.join(s, 'conf'), { mode: 0o755 });
  fs.mkdirSync(path.join(s, 'rw'), { mode: 0o777 });
  fs.chmodSync(path.join(s, 'rw'), 0o777);
  const adminToken = path.join(s, 'admin.token');
  fs.writeFileSync(adminToken, 'SECRET-ADMIN-TOKEN-0123456789abcdef\n', { mode: 0o600 });
  fs.writeFileSync(path.join(s, 'public.txt'), 'public\n', { mode: 0o644 });
  const tokensFile = path.join(s, 'tokens');
  const token = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(tokensFile, `# SECRET-TOKENS-FILE\nsha256:${crypto.createHash('sha256').update(token).digest('hex')} alice\n`, { mode: 0o644 });
  fs.chmodSync(tokensFile, 0o644);
  const other = net.createServer((c) => c.end()).listen(0, '127.0.0.1');
  await new Promise((r) => other.once('listening', r));
  const otherPort = other.address().port;
  const gw = await startGateway({
    dir: path.join(s, 'conf'),
    // From /tmp: a cwd that is /tmp (or /) must not bring the host's /tmp (or root) into the view.
    cwd: '/tmp',
    gateway: { admin_token_file: adminToken },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile },
    servers: [{
      name: 'hostile', path: '/mcp', command: HOSTILE,
      extra: [`sandbox = ${box ? 'on' : 'off'}`, 'sandbox_network = none',
        `sandbox_read_only_paths = ${s}`, `sandbox_writable_paths = ${path.join(s, 'rw')}`,
        'child_max_processes = 16', 'child_max_memory_bytes = 268435456',
        'child_max_file_bytes = 1048576', 'child_max_cpu_s = 1'].join('\n'),
    }],
  });
  const out = {};
  gw.headers = { Authorization: `Bearer ${token}` };
  try {
    await stopAfter(gw, async () => {
      if (box) await gw.waitLog(/\[server:hostile\] sandbox: namespaces user, mount, pid, ipc, uts, net/);
      const a = await initSession(gw, { headers: gw.headers });
      const b = await initSession(gw, { headers: gw.headers });
      const secret = `/tmp/mcpgw-box-${process.pid}-${box ? 'on' : 'off'}`;
      out.whoami = await attempt(gw, a.sid, { action: 'whoami' });
      out.config = await attempt(gw, a.sid, { action: 'read', path: path.join(s, 'conf', 'gateway.ini') });
      out.adminToken = await attempt(gw, a.sid, { action: 'read', path: adminToken });
      out.tokensFile = await attempt(gw, a.sid, { action: 'read', path: tokensFile });
      out.publicFile = await attempt(gw, a.sid, { action: 'read', path: path.join(s, 'public.txt') });
      out.listRoot = await attempt(gw, a.sid, { action: 'list', path: '/' });
      out.tmpWrite = await attempt(gw, a.sid, { action: 'write', path: secret, text: 'A-SECRET' });
      out.otherTmp = await attempt(gw, b.sid, { action: 'read', path: secret });
      out.connectGateway = await attempt(gw, a.sid, { action: 'connect', port: gw.port });
      out.connectOther = await attempt(gw, a.sid, { action: 'connect', port: otherPort });
      out.fork = await attempt(gw, a.sid, { action: 'fork', count: 64 });
      out.alloc = await attempt(gw, a.sid, { action: 'alloc', bytes: 1073741824 });
      out.bigFile = await attempt(gw, a.sid, { action: 'big_file', path: path.join(s, 'rw', 'big'), bytes: 4194304 });
      out.spin = await attempt(gw, a.sid, { action: 'spin', ms: 2500 });
      out.ptrace = await attempt(gw, a.sid, { action: 'ptrace' });
      out.mount = await attempt(gw, a.sid, { action: 'mount' });
      out.userns = await attempt(gw, a.sid, { action: 'userns' });
      out.module = await attempt(gw, a.sid, { action: 'module' });
      out.writeOutside = await attempt(gw, a.sid, { action: 'write', path: path.join(s, 'outside.txt'), text: 'x' });
      out.writeInside = await attempt(gw, a.sid, { action: 'write', path: path.join(s, 'rw', 'inside.txt'), text: 'x' });
      out.symlinkConfig = await attempt(gw, a.sid, { action: 'symlink', path: path.join(s, 'rw', 'l1'), target: path.join(s, 'conf', 'gateway.ini') });
      out.symlinkToken = await attempt(gw, a.sid, { action: 'symlink', path: path.join(s, 'rw', 'l2'), target: adminToken });
      out.symlinkTokens = await attempt(gw, a.sid, { action: 'symlink', path: path.join(s, 'rw', 'l3'), target: tokensFile });
      // What the mounts leave open and Landlock closes: executing what it wrote in /tmp, writing
      // to /proc (here its own name). A writable path keeps execute.
      out.execTmp = await attempt(gw, a.sid, { action: 'exec_copy', source: '/bin/true', path: `${secret}-true` });
      out.execWritable = await attempt(gw, a.sid, { action: 'exec_copy', source: '/bin/true', path: path.join(s, 'rw', 'true') });
      out.procWrite = await attempt(gw, a.sid, { action: 'write', path: '/proc/self/comm', text: 'renamed' });
      // The gateway and another session are unaffected: a third session, and the first two.
      const c = await initSession(gw, { headers: gw.headers });
      out.after = [await attempt(gw, c.sid, { action: 'whoami' }), await attempt(gw, a.sid, { action: 'whoami' }),
        await attempt(gw, b.sid, { action: 'whoami' })];
      const h = await request(`${gw.base}/healthz`, { method: 'GET' });
      out.health = h.status;
      await h.done();
    });
  } finally {
    other.close();
    fs.rmSync(s, { recursive: true, force: true });
    fs.rmSync(`/tmp/mcpgw-box-${process.pid}-${box ? 'on' : 'off'}`, { force: true });
    fs.rmSync(`/tmp/mcpgw-box-${process.pid}-${box ? 'on' : 'off'}-true`, { force: true });
  }
  return out;
}

test('sandbox = on: every attempt of the hostile child is refused, the gateway serves on', async () => {
  const r = await scenario(true);
  assert.match(r.whoami, /^ok:pid 1 uid /, 'the child is its own PID namespace\'s first process');
  assert.doesNotMatch(r.config, /\[gateway\]/, 'the gateway\'s configuration is not visible');
  assert.doesNotMatch(r.adminToken, /SECRET-ADMIN/, 'the admin token file is not visible');
  assert.doesNotMatch(r.tokensFile, /SECRET-TOKENS|sha256:/, 'the tokens file is not visible');
  assert.equal(r.publicFile, 'ok:public\n', 'a bound path is visible');
  assert.match(r.listRoot, /^ok:.*\busr,/, 'the view\'s root can be listed');
  assert.doesNotMatch(r.listRoot, /\b(root|home|boot|srv),/, 'and holds none of the host\'s other directories');
  assert.equal(r.tmpWrite, 'ok', 'its own /tmp is writable');
  assert.equal(r.otherTmp, 'err:ENOENT', 'another session\'s /tmp file is not there');
  assert.match(r.connectGateway, /^err:/, 'the gateway\'s port is not reachable');
  assert.match(r.connectOther, /^err:/, 'another loopback port is not reachable');
  assert.match(r.fork, /^err:EAGAIN after \d+$/, 'child_max_processes holds');
  assert.equal(r.alloc, 'err:ENOMEM', 'child_max_memory_bytes holds');
  assert.equal(r.bigFile, 'err:EFBIG', 'child_max_file_bytes holds');
  assert.match(r.spin, /^sig:(24|9)$/, 'child_max_cpu_s holds (SIGXCPU, then SIGKILL)');
  assert.equal(r.ptrace, 'err:EPERM', 'ptrace is refused');
  assert.equal(r.mount, 'err:EPERM', 'mount is refused');
  assert.equal(r.userns, 'err:EPERM', 'a user namespace inside is refused');
  assert.equal(r.module, 'err:EPERM', 'module calls are refused');
  assert.equal(r.writeOutside, 'err:EROFS', 'outside sandbox_writable_paths is read-only');
  assert.equal(r.writeInside, 'ok', 'sandbox_writable_paths is writable');
  assert.doesNotMatch(r.symlinkConfig, /\[gateway\]/, 'a symlink in a writable path leads nowhere');
  assert.doesNotMatch(r.symlinkToken, /SECRET-ADMIN/, 'a symlink to the admin token leads nowhere');
  assert.doesNotMatch(r.symlinkTokens, /SECRET-TOKENS|sha256:/, 'a symlink to the tokens file leads nowhere');
  if (LANDLOCK) {
    assert.equal(r.execTmp, 'err:EACCES', 'Landlock: what it wrote in /tmp does not execute');
    assert.equal(r.procWrite, 'err:EACCES', 'Landlock: /proc is read-only');
  }
  assert.equal(r.execWritable, 'ok', 'what it wrote in sandbox_writable_paths executes');
  assert.deepEqual(r.after.map((t) => t.startsWith('ok:pid 1 ')), [true, true, true]);
  assert.equal(r.health, 200);
});

test('sandbox = off: the same attempts succeed (the cases can fail)', async () => {
  const r = await scenario(false);
  assert.doesNotMatch(r.whoami, /^ok:pid 1 /);
  assert.match(r.config, /^ok:\[gateway\]/);
  assert.match(r.adminToken, /SECRET-ADMIN/);
  assert.match(r.tokensFile, /^ok:# SECRET-TOKENS-FILE\nsha256:/);
  assert.equal(r.publicFile, 'ok:public\n');
  assert.equal(r.otherTmp, 'ok:A-SECRET');
  assert.equal(r.connectGateway, 'ok');
  assert.equal(r.connectOther, 'ok');
  assert.equal(r.fork, 'ok:64');
  assert.equal(r.alloc, 'ok');
  assert.equal(r.bigFile, 'ok');
  assert.equal(r.spin, 'ok');
  assert.equal(r.ptrace, 'ok');
  assert.equal(r.mount, 'ok');
  assert.equal(r.userns, 'ok');
  // Only root may remove a module: for root the call gets past the missing filter to the kernel
  // (ENOENT, or ENOSYS where the kernel cannot unload modules).
  if (ROOT) assert.notEqual(r.module, 'err:EPERM');
  assert.equal(r.writeOutside, 'ok');
  assert.equal(r.writeInside, 'ok');
  assert.match(r.symlinkConfig, /^ok:\[gateway\]/);
  assert.match(r.symlinkToken, /SECRET-ADMIN/);
  assert.match(r.symlinkTokens, /SECRET-TOKENS/);
  assert.equal(r.execTmp, 'ok');
  assert.equal(r.execWritable, 'ok');
  assert.equal(r.procWrite, 'ok');
  assert.deepEqual(r.after.map((t) => t.startsWith('ok:')), [true, true, true]);
  assert.equal(r.health, 200);
});

test('--check-config says what the box applies, and a path that is not absolute is refused', async () => {
  const d = tmpdir();
  const conf = path.join(d, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[server:h]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\n`);
  let r = spawnSync(process.env.GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /\[server:h\] sandbox: namespaces user, mount, pid, ipc, uts; network: host; .*no_new_privs; seccomp: \d+ calls refused \(EPERM\), refusals (counted \(mcpgw_sandbox_refused_total\)|not counted \(the kernel gives no listener: [^)]*\)); Landlock: (ABI \d+ \(filesystem[^)]*\)|none \(the kernel offers none\)); cgroup: (none \(.+\)|per child under \S+: memory.max 0 B, pids.max 512 \(0: max\)); limits: /);
  // The ABI the kernel offers is the one applied, or none is said.
  assert.match(r.stdout, LANDLOCK ? new RegExp(`Landlock: ABI ${LANDLOCK} \\(filesystem${LANDLOCK >= 6 ? '; signals and abstract unix sockets scoped to the box' : ''}\\);`) : /Landlock: none/);
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[server:h]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\nsandbox_writable_paths = relative/dir\n`);
  r = spawnSync(process.env.GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /sandbox_writable_paths: relative\/dir: must be an absolute path/);
  for (const bad of ['/', '/tmp', '/proc/1', '/dev']) {
    fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[server:h]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\nsandbox_read_only_paths = ${bad}\n`);
    r = spawnSync(process.env.GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
    assert.equal(r.status, 1, bad);
    assert.match(r.stderr, /cannot be bound: \/, \/tmp, \/proc and \/dev are the box's own/, bad);
  }
  fs.rmSync(d, { recursive: true, force: true });
});

test('a kernel that refuses the box: --check-config and the start say which namespace, nothing runs unboxed', async () => {
  const d = tmpdir();
  fs.chmodSync(d, 0o755);
  const conf = path.join(d, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[server:h]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\n`, { mode: 0o644 });
  // In a user namespace of its own with no uid mapped, the kernel refuses the gateway a new one.
  for (const args of [['--check-config', '--config', conf], ['--config', conf]]) {
    const r = spawnSync('unshare', ['--user', process.env.GW_BIN, ...args], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 1, `${args}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout + r.stderr, /\[server:h\] sandbox = on: the kernel refuses a new user namespace: Operation not permitted \(/);
    assert.doesNotMatch(r.stdout + r.stderr, /listening on/);
  }
  fs.rmSync(d, { recursive: true, force: true });
});

test('pool children are boxed too: a stateless call through the pool runs in the box', async () => {
  const gw = await startGateway({ servers: [{ name: 'example', path: '/mcp', command: EXAMPLE, extra: 'sandbox = on\nsandbox_network = none' }] });
  await stopAfter(gw, async () => {
    const V = '2026-07-28';
    const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { text: 'boxed' }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } };
    const r = await post(gw, body, { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' } });
    await r.done(scaled(10000));
    const text = r.text();
    assert.match(text, /"text":"boxed"/, text);
    // The pool's child is its PID namespace's first process.
    await gw.waitLog(/pool:example#\d+ child stderr: mcp-example-server: ready \(pid 1\)/);
  });
});

/** The tool's text at server url (callTool posts to gw.url only). */
async function attemptAt(gw, url, sid, args, ms = scaled(20000)) {
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'try', arguments: args } };
  const r = await post(gw, call, { sid, url });
  await r.done(ms);
  const answer = r.events().map((e) => e.json).find((j) => j && 'result' in j);
  assert.ok(answer, `try ${JSON.stringify(args)}: ${r.text()}`);
  return answer.result.content[0].text;
}

/**
 * The gateway's open descriptors but its client connections (TCP sockets not listening), from
 * /proc: the descriptors are listed first, so a client socket among them is in the TCP table.
 */
function gatewayFdsButClients(pid) {
  const links = fdTargets(pid);
  const clients = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try { text = fs.readFileSync(table, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const col = line.trim().split(/\s+/);
      if (col.length > 9 && col[3] !== '0A') clients.add(col[9]); // st 0A: LISTEN; col 9: inode
    }
  }
  return links.filter((l) => { const m = /^socket:\[(\d+)\]$/.exec(l); return !m || !clients.has(m[1]); }).length;
}

/** The refusals counted for server, by system call, from a scrape. */
async function refused(gw, server) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  await r.done();
  const out = {};
  for (const [k, v] of Object.entries(metricSamples(r.text()))) {
    const m = /^mcpgw_sandbox_refused_total\{server="([^"]*)",syscall="([^"]*)"\}$/.exec(k);
    if (m && m[1] === server) out[m[2]] = v;
  }
  return out;
}

test('seccomp refusals are counted per server and system call, the caller still gets EPERM, the gateway serves on while a child loops on them', async (t) => {
  const gw = await startGateway({
    servers: [
      { name: 'hostile', path: '/mcp', command: HOSTILE, extra: 'sandbox = on\nsandbox_network = none\nchild_max_processes = 32' },
      { name: 'quiet', path: '/q', command: HOSTILE, extra: 'sandbox = on\nsandbox_network = none' },
    ],
  });
  try {
    const line = await gw.waitLog(/\[server:hostile\] sandbox: .*/);
    if (/refusals not counted/.test(line[0])) {
      await gw.stop();
      return t.skip(`the kernel gives no seccomp listener here: ${line[0]}`);
    }
    const qurl = `${gw.base}/q`;
    const a = await initSession(gw);
    const q = await initSession(gw, { url: qurl });
    const before = await attempt(gw, a.sid, { action: 'whoami' });
    assert.equal(await attempt(gw, a.sid, { action: 'ptrace' }), 'err:EPERM');
    assert.equal(await attempt(gw, a.sid, { action: 'mount' }), 'err:EPERM', 'unshare refused: EPERM');
    assert.equal(await attempt(gw, a.sid, { action: 'userns' }), 'err:EPERM');
    assert.equal(await attempt(gw, a.sid, { action: 'module' }), 'err:EPERM');
    assert.equal(await attempt(gw, a.sid, { action: 'whoami' }), before, 'the same child serves on: degraded, not killed');
    assert.match(await attemptAt(gw, qurl, q.sid, { action: 'whoami' }), /^ok:pid 1 /);
    // Each refusal once, under its server and system call (the mount case forks a child whose
    // unshare is refused, then its mount); the other server has none.
    assert.deepEqual(await refused(gw, 'hostile'), { ptrace: 1, unshare: 2, mount: 1, delete_module: 1 });
    assert.deepEqual(await refused(gw, 'quiet'), {});
    await gw.waitLog(/server hostile: child \d+: ptrace refused \(seccomp, EPERM\)/);
    // The scrape with the new series is valid exposition text (promtool: tests/deps.sh).
    const scrape = await request(`${gw.base}/metrics`, { method: 'GET' });
    await scrape.done();
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: scrape.text(), encoding: 'utf8' });
    assert.ok(!lint.error, `promtool missing (apt-get install prometheus): ${lint.error?.message}`);
    assert.equal(lint.status, 0, `promtool check metrics:\n${lint.stdout}${lint.stderr}`);

    // A child of hostile floods the gateway with refused calls from 8 processes for 3 s; the
    // other server's session, a second session of hostile and /healthz are answered meanwhile.
    const b = await initSession(gw);
    const flood = attempt(gw, a.sid, { action: 'refuse_flood', procs: 8, ms: 3000 });
    await waitFor(async () => ((await refused(gw, 'hostile')).delete_module ?? 0) > 100, scaled(10000), 'the flood under way');
    const lat = [];
    for (let i = 0; i < 10; i++) {
      let t0 = performance.now();
      assert.match(await attemptAt(gw, qurl, q.sid, { action: 'whoami' }, scaled(5000)), /^ok:pid 1 /);
      lat.push(performance.now() - t0);
      t0 = performance.now();
      assert.match(await attempt(gw, b.sid, { action: 'whoami' }), /^ok:pid 1 /);
      lat.push(performance.now() - t0);
      t0 = performance.now();
      const h = await request(`${gw.base}/healthz`, { method: 'GET' });
      await h.done();
      assert.equal(h.status, 200);
      lat.push(performance.now() - t0);
    }
    const text = await flood;
    const m = /^ok:(\d+)$/.exec(text);
    assert.ok(m, `the flood: every call answered EPERM: ${text}`);
    lat.sort((x, y) => x - y);
    t.diagnostic(`flood: ${m[1]} refused calls in 3 s; other requests meanwhile: median ${lat[15].toFixed(1)} ms, max ${lat.at(-1).toFixed(1)} ms`);
    assert.ok(lat.at(-1) < scaled(2000), `each other request answered within 2 s during the flood (max ${lat.at(-1)} ms)`);
    // Every EPERM the flood saw was the gateway's answer, counted once.
    assert.equal((await refused(gw, 'hostile')).delete_module, 1 + Number(m[1]));
    assert.deepEqual(await refused(gw, 'quiet'), {});
    assert.match(gw.logs(), /server hostile: \d+ seccomp refusals not logged \(rate limit\)/);
    assert.equal(await attempt(gw, a.sid, { action: 'whoami' }), before);

    // A session ended in the middle of a flood: its child dies with refused calls waiting for an
    // answer (ENOENT for the gateway), and its listener is closed with it (the gateway's
    // descriptors come back to what they were). Client connections are left out of the count:
    // the test's own come and go in their own time (one still closing would sit in the base).
    const fds = () => gatewayFdsButClients(gw.proc.pid);
    const base = await waitFor(() => { const a = fds(); return a === fds() && a; }, scaled(10000), 'a steady count of the gateway\'s descriptors');
    const c = await initSession(gw);
    const was = (await refused(gw, 'hostile')).delete_module;
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'try', arguments: { action: 'refuse_flood', procs: 8, ms: 60000 } } };
    const long = await post(gw, call, { sid: c.sid });
    await waitFor(async () => (await refused(gw, 'hostile')).delete_module > was + 100, scaled(10000), 'the second flood under way');
    const d = await del(gw, { sid: c.sid });
    await d.done();
    await long.done(scaled(10000));
    await waitFor(async () => (await fds()) === base, scaled(10000), `the gateway's descriptors back to ${base}`);
    assert.match(await attempt(gw, b.sid, { action: 'whoami' }), /^ok:pid 1 /);
    await gw.stop();
  } catch (e) {
    await gw.stop({ expect: null });
    console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    throw e;
  }
});

/**
 * With sandbox_network = host the child shares the host's network namespace, and so its abstract
 * unix sockets (named outside any filesystem): Landlock ABI 6 scopes them to the box. Without
 * sandbox_tcp_connect_ports TCP is not restricted by port (Landlock can only allow ports, and
 * allowing all but the gateway's costs too much per child; README says so): the gateway's own
 * port stays reachable, shown here so a change is seen.
 */
async function hostScenario(box) {
  const name = `mcpgw-ll-${process.pid}-${box ? 'on' : 'off'}`;
  const abstract = net.createServer((c) => c.end()).listen(`\0${name}`);
  await new Promise((r) => abstract.once('listening', r));
  const gw = await startGateway({
    servers: [{ name: 'hostile', path: '/mcp', command: HOSTILE, extra: `sandbox = ${box ? 'on' : 'off'}\nsandbox_network = host` }],
  });
  try {
    return await stopAfter(gw, async () => {
      const a = await initSession(gw);
      const out = {
        abstract: await attempt(gw, a.sid, { action: 'abstract', name }),
        connectGateway: await attempt(gw, a.sid, { action: 'connect', port: gw.port }),
      };
      return out;
    });
  } finally {
    abstract.close();
  }
}

test('sandbox_network = host: a host abstract unix socket is refused with Landlock ABI 6, reached with the box off', async (t) => {
  const off = await hostScenario(false);
  assert.equal(off.abstract, 'ok');
  assert.equal(off.connectGateway, 'ok');
  if (LANDLOCK < 6) return t.skip(`Landlock ABI ${LANDLOCK}: no scoping (ABI 6)`);
  const on = await hostScenario(true);
  assert.equal(on.abstract, 'err:EPERM', 'the abstract socket is outside the box\'s Landlock domain');
  assert.equal(on.connectGateway, 'ok', 'not covered without sandbox_tcp_connect_ports: TCP to the gateway\'s port with sandbox_network = host');
});

/**
 * sandbox_network = host with sandbox_tcp_connect_ports naming one loopback listener's port: the
 * child's TCP connect to the gateway's own port (which serves /admin and /metrics too: the
 * gateway has no other listener) and to a second loopback listener not listed is refused by
 * Landlock (EACCES), the listed one is reached; with the box off, the same keys, all three are.
 */
async function portsScenario(box) {
  const listen = () => new Promise((r) => { const srv = net.createServer((c) => c.end()).listen(0, '127.0.0.1', () => r(srv)); });
  const listed = await listen();
  const unlisted = await listen();
  const gw = await startGateway({
    servers: [{
      name: 'hostile', path: '/mcp', command: HOSTILE,
      extra: `sandbox = ${box ? 'on' : 'off'}\nsandbox_network = host\nsandbox_tcp_connect_ports = ${listed.address().port}`,
    }],
  });
  try {
    return await stopAfter(gw, async () => {
      if (box) await gw.waitLog(new RegExp(`\\[server:hostile\\] sandbox: .*; network: host; TCP connect: only to port ${listed.address().port} \\(Landlock\\);.*Landlock: ABI \\d+ \\(filesystem, TCP connect`));
      const a = await initSession(gw);
      const out = {
        gateway: await attempt(gw, a.sid, { action: 'connect', port: gw.port }),
        listed: await attempt(gw, a.sid, { action: 'connect', port: listed.address().port }),
        unlisted: await attempt(gw, a.sid, { action: 'connect', port: unlisted.address().port }),
      };
      const h = await request(`${gw.base}/healthz`, { method: 'GET' });
      out.health = h.status;
      await h.done();
      return out;
    });
  } finally {
    listed.close();
    unlisted.close();
  }
}

test('sandbox_network = host, sandbox_tcp_connect_ports: the gateway\'s port and an unlisted one refused (EACCES), the listed one reached; all reached with the box off', async (t) => {
  const off = await portsScenario(false);
  assert.deepEqual(off, { gateway: 'ok', listed: 'ok', unlisted: 'ok', health: 200 });
  if (LANDLOCK < 4) return t.skip(`Landlock ABI ${LANDLOCK}: no TCP rules (ABI 4); the refusal of the key is tested below`);
  const on = await portsScenario(true);
  assert.deepEqual(on, { gateway: 'err:EACCES', listed: 'ok', unlisted: 'err:EACCES', health: 200 });
});

test('sandbox_tcp_connect_ports: the gateway\'s own port, a port out of range, or a kernel without Landlock ABI 4 is refused', () => {
  const d = tmpdir();
  fs.chmodSync(d, 0o755);
  const conf = path.join(d, 'gateway.ini');
  const check = (listen, ports) => {
    fs.writeFileSync(conf, `[gateway]\nlisten = ${listen}\n[server:h]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\nsandbox_tcp_connect_ports = ${ports}\n`, { mode: 0o644 });
    return spawnSync(process.env.GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
  };
  let r = check('127.0.0.1:18931', '443, 18931');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /sandbox_tcp_connect_ports: 18931 is the gateway's own listen port: its children must not reach it/);
  for (const bad of ['0', '65536', 'https', '-1']) {
    r = check('127.0.0.1:18931', bad);
    assert.equal(r.status, 1, bad);
    assert.match(r.stderr, /sandbox_tcp_connect_ports: \S+: not a TCP port \(1 to 65535\)/, bad);
  }
  r = check('127.0.0.1:18931', Array.from({ length: 33 }, (_, i) => 1 + i).join(','));
  assert.equal(r.status, 1);
  assert.match(r.stderr, /sandbox_tcp_connect_ports: more than 32 ports/);
  r = check('127.0.0.1:18931', '443, 5432');
  if (LANDLOCK >= 4) {
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /; network: host; TCP connect: only to ports 443, 5432 \(Landlock\);/);
  } else {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /sandbox_tcp_connect_ports needs Landlock ABI 4 \(Linux 6\.7\) to be enforced; this kernel offers /);
  }
  fs.rmSync(d, { recursive: true, force: true });
});

test('server-everything from npm, boxed: a 2025-11-25 session and a stateless request are answered', async () => {
  const ev = everythingServer({});
  const js = fs.realpathSync(ev.command.split(' ')[1]);
  const modules = fs.realpathSync(path.join(process.env.GW_SOURCE_ROOT, 'tests/node_modules'));
  const gw = await startGateway({
    servers: [{
      name: 'everything', path: '/mcp', command: `${process.execPath} ${js} stdio`,
      // node reserves far more address space than it uses: no RLIMIT_AS.
      extra: `sandbox = on\nsandbox_network = none\nchild_max_memory_bytes = 0\nsandbox_read_only_paths = ${modules}`,
    }],
  });
  try {
    await gw.waitLog(/\[server:everything\] sandbox: namespaces/);
    const { sid, version } = await initSession(gw, { version: '2025-11-25' });
    assert.equal(version, '2025-11-25');
    const { response } = await callTool(gw, sid, 'echo', { message: 'boxed-legacy' }, { ms: scaled(20000) });
    assert.match(JSON.stringify(response?.result), /boxed-legacy/, JSON.stringify(response));
    const V = '2026-07-28';
    const body = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { message: 'boxed-stateless' }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } };
    const r = await post(gw, body, { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' } });
    await r.done(scaled(20000));
    assert.match(r.text(), /boxed-stateless/, r.text());
    await gw.stop();
  } catch (e) {
    await gw.stop({ expect: null });
    console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    throw e;
  }
});
