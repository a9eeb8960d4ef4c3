// SPDX-License-Identifier: MIT
// The cgroup v2 of each boxed child (src/core/cgroup.c), on the machine's real hierarchy. The
// test reads the layout itself (/proc/self/cgroup's "0::" line, the cgroup2 mount, the
// controllers offered there) and asserts what the gateway must then say and do:
// - where memory and pids are not offered to cgroup v2 (a hybrid layout binds them to v1), or no
//   delegated cgroup can be made for the gateway: the start line and --check-config say
//   `cgroup: none (WHY)` with that reason, and child_max_memory_cgroup_bytes is refused;
// - where they are offered and this test (as root) can make a delegated cgroup for the gateway
//   under its own: the gateway moves itself into its leaf, each boxed child gets memory.max and
//   pids.max, a child that forks past child_max_processes is refused, one that uses more memory
//   than child_max_memory_cgroup_bytes is ended by the OOM killer, the log says so, and the
//   gateway and another session serve on.
// The host's hierarchies are never changed beyond that one cgroup, removed at the end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, callTool, initSession, request, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const HOSTILE = process.env.GW_BOX_HOSTILE;
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const unescape = (s) => s.replace(/\\([0-3][0-7][0-7])/g, (_, o) => String.fromCharCode(parseInt(o, 8)));

/** The layout as a gateway started by this test finds it: { dir, cg, why } (why: a RegExp, or null). */
function layout() {
  const own = /^0::(\/.*)$/m.exec(fs.readFileSync('/proc/self/cgroup', 'utf8'));
  if (!own) return { why: /not cgroup v2 \(\/proc\/self\/cgroup has no unified "0::" line\)/ };
  const cg = own[1];
  let dir = null;
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [pre, post] = line.split(' - ');
    if (!post?.startsWith('cgroup2 ')) continue;
    const f = pre.split(' ');
    const root = unescape(f[3]), point = unescape(f[4]);
    const rn = root === '/' ? 0 : root.length;
    if (!cg.startsWith(root.slice(0, rn)) || (cg.length > rn && cg[rn] !== '/')) continue;
    const rest = cg.slice(rn) === '/' ? '' : cg.slice(rn);
    dir = point + rest;
    break;
  }
  if (dir === null) return { cg, why: new RegExp(`not cgroup v2 \\(no cgroup2 mount shows the gateway's cgroup ${esc(cg)}\\)`) };
  const ctl = fs.readFileSync(path.join(dir, 'cgroup.controllers'), 'utf8').trim();
  const missing = ['memory', 'pids'].filter((c) => !ctl.split(/\s+/).includes(c));
  if (missing.length) {
    return { dir, cg, why: new RegExp(`controllers? ${missing.join(', ')} not offered: ${esc(dir)}/cgroup.controllers lists "${esc(ctl)}"`) };
  }
  return { dir, cg, why: null };
}

const L = layout();

/**
 * Whether this test can give a gateway a delegated cgroup of its own: root, controllers offered,
 * memory and pids already enabled for the children of the test's own cgroup, and that cgroup
 * writable. Then SUB = DIR/mcpgw-test-PID, marked delegated as systemd's Delegate=yes marks it.
 */
function arrangeable() {
  if (L.why !== null || process.getuid() !== 0) return false;
  try {
    const sub = fs.readFileSync(path.join(L.dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
    fs.accessSync(L.dir, fs.constants.W_OK);
    return sub.includes('memory') && sub.includes('pids');
  } catch {
    return false;
  }
}

function boxedServer(extra = '') {
  return [{ name: 'hostile', path: '/mcp', command: HOSTILE, extra: `sandbox = on\nsandbox_network = none\nchild_max_memory_bytes = 0\nchild_max_processes = 16\n${extra}` }];
}

test('the start line and --check-config say which cgroup is in force, or none and why', async (t) => {
  if (arrangeable()) {
    t.skip('a delegated cgroup can be made here: the next test asserts the limits instead');
    return;
  }
  const gw = await startGateway({ servers: boxedServer() });
  try {
    const m = await gw.waitLog(/\[server:hostile\] sandbox: .*; cgroup: (.*); limits: /);
    assert.match(m[1], /^none \(/, 'nothing is claimed where nothing is applied');
    if (L.why) assert.match(m[1], L.why);
    else if (L.cg === '/') assert.match(m[1], /is the root cgroup, not one delegated to the gateway/);
    const a = await initSession(gw);
    const { response } = await callTool(gw, a.sid, 'try', { action: 'whoami' }, { ms: scaled(20000) });
    assert.match(response.result.content[0].text, /^ok:pid 1 /, 'the box runs without a cgroup');
    await gw.stop();
  } catch (e) {
    await gw.stop({ expect: null });
    console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    throw e;
  }
  const d = tmpdir();
  fs.chmodSync(d, 0o755);
  const conf = path.join(d, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[server:hostile]\npath = /mcp\ncommand = ${HOSTILE}\nsandbox = on\n`);
  let r = spawnSync(GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8', timeout: 20000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /\[server:hostile\] sandbox: .*; cgroup: none \(/);
  if (L.why) assert.match(r.stdout, L.why);
  // A memory cgroup limit without a cgroup: refused by --check-config and at start, saying why.
  fs.appendFileSync(conf, 'child_max_memory_cgroup_bytes = 67108864\n');
  for (const args of [['--check-config', '--config', conf], ['--config', conf]]) {
    r = spawnSync(GW_BIN, args, { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 1, `${args}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout + r.stderr, /\[server:hostile\] sandbox = on: child_max_memory_cgroup_bytes needs a delegated cgroup v2 with the memory and pids controllers, and there is none: /);
    if (L.why) assert.match(r.stdout + r.stderr, L.why);
    assert.doesNotMatch(r.stdout + r.stderr, /listening on/);
  }
  fs.rmSync(d, { recursive: true, force: true });
});

test('with a delegated cgroup: pids.max and memory.max hold per child, the gateway serves on', async (t) => {
  if (!arrangeable()) {
    t.skip(`no delegated cgroup v2 with memory and pids can be made here: ${L.why ?? 'not root, or the controllers are not enabled for this cgroup\'s children'}`);
    return;
  }
  const sub = path.join(L.dir, `mcpgw-test-${process.pid}`);
  fs.mkdirSync(sub);
  const d = tmpdir();
  let gw = null;
  try {
    const mark = spawnSync('python3', ['-c', 'import os,sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")', sub], { encoding: 'utf8' });
    assert.equal(mark.status, 0, `marking ${sub} delegated: ${mark.stderr}`);
    // The gateway starts in SUB (the wrapper moves itself there, then execs it: same pid).
    const wrapper = path.join(d, 'in-cgroup.sh');
    fs.writeFileSync(wrapper, `#!/bin/sh\necho $$ > '${sub}/cgroup.procs' || exit 1\nexec '${GW_BIN}' "$@"\n`, { mode: 0o755 });
    gw = await startGateway({ bin: wrapper, servers: boxedServer('child_max_memory_cgroup_bytes = 67108864') });
    await gw.waitLog(new RegExp(`\\[server:hostile\\] sandbox: .*; cgroup: per child under ${esc(sub)}: memory.max 67108864 B, pids.max 16 \\(0: max\\);`));
    assert.match(fs.readFileSync(`/proc/${gw.proc.pid}/cgroup`, 'utf8'), /^0::.*\/mcpgw-test-\d+\/gateway$/m, 'the gateway moved into its leaf');
    const a = await initSession(gw);
    const b = await initSession(gw);
    const boxes = () => fs.readdirSync(sub).filter((n) => n.startsWith('box-'));
    assert.equal(boxes().length, 2, 'a cgroup per child');
    for (const n of boxes()) {
      assert.equal(fs.readFileSync(path.join(sub, n, 'pids.max'), 'utf8').trim(), '16');
      assert.equal(fs.readFileSync(path.join(sub, n, 'memory.max'), 'utf8').trim(), '67108864');
    }
    // Past the process limit (RLIMIT_NPROC has the same value and may refuse first).
    let r = await callTool(gw, a.sid, 'try', { action: 'fork', count: 64 }, { ms: scaled(20000) });
    assert.match(r.response.result.content[0].text, /^err:EAGAIN after \d+$/);
    // Past memory.max: the OOM killer ends the whole child; the gateway says so.
    r = await callTool(gw, b.sid, 'try', { action: 'touch', bytes: 268435456 }, { ms: scaled(20000) });
    assert.ok(!r.response?.result || r.response.result.isError, `the child survived: ${JSON.stringify(r.response)}`);
    await gw.waitLog(/the kernel's OOM killer ended it \(its cgroup's memory.max/, scaled(10000));
    const h = await request(`${gw.base}/healthz`, { method: 'GET' });
    assert.equal(h.status, 200);
    await h.done();
    r = await callTool(gw, a.sid, 'try', { action: 'whoami' }, { ms: scaled(20000) });
    assert.match(r.response.result.content[0].text, /^ok:pid 1 /, 'the other session serves on');
    await waitFor(() => boxes().length === 1, scaled(5000), 'the OOM-killed child\'s cgroup removed');
    await gw.stop();
    await waitFor(() => boxes().length === 0, scaled(5000), 'every child\'s cgroup removed');
  } catch (e) {
    if (gw) {
      await gw.stop({ expect: null });
      console.log(`gateway log (tail):\n${gw.logs().slice(-4000)}`);
    }
    throw e;
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
    // Its processes are gone: the leaf, then SUB (rmdir refuses a cgroup with a process in it).
    for (const n of fs.existsSync(sub) ? fs.readdirSync(sub) : []) {
      const p = path.join(sub, n);
      if (fs.statSync(p).isDirectory()) { try { fs.rmdirSync(p); } catch { /* still busy: left */ } }
    }
    try { fs.rmdirSync(sub); } catch { /* still busy: left */ }
  }
});
