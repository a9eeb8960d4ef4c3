// SPDX-License-Identifier: MIT
// Signals an operator may send besides TERM, INT and HUP (operations.test.mjs has those), and
// [gateway] log_file: SIGUSR1 reopens the log file (logrotate renames it, then signals), SIGUSR2,
// SIGWINCH, SIGALRM and SIGPIPE are logged or ignored and end nothing, SIGQUIT stops like SIGTERM;
// every other signal it does not use is logged once and ignored (none ends or stops it), SIGABRT
// sent on purpose is logged before its core dump;
// and the Debian package's logrotate file, run by the real logrotate against a gateway.
// Each time the process lives on and a session opened before the signal still answers after it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, GW_BIN, callTool, initSession, pidAlive, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const read = (f) => { try { return fs.readFileSync(f, 'utf8'); } catch { return ''; } };

/** An echo in session sid answers with text. */
async function echoes(gw, sid, text) {
  const { response } = await callTool(gw, sid, 'echo', { text });
  assert.equal(response?.result?.content?.[0]?.text, text, JSON.stringify(response));
}

test('log_file: the log goes to the file (0640 at most); SIGUSR1 after a rename reopens it at its path; sessions survive', async () => {
  const dir = tmpdir('mcpgw-logfile-');
  const file = path.join(dir, 'gateway.log');
  const gw = await startGateway({ gateway: { log_file: file } });
  let ok = false;
  try {
    assert.match(read(file), /listening on /, 'the log is in the file');
    assert.doesNotMatch(gw.stderr(), /listening on /, 'not on stderr');
    const mode = fs.statSync(file).mode & 0o777;
    assert.equal(mode & 0o137, 0, `mode ${mode.toString(8)}: no one but the owner writes, no one else reads`);
    const s = await initSession(gw);
    await echoes(gw, s.sid, 'before');

    fs.renameSync(file, `${file}.1`);
    gw.proc.kill('SIGUSR1');
    await waitFor(() => /log file reopened/.test(read(file)), scaled(5000), 'a new file at the path with "log file reopened"');
    assert.ok(pidAlive(gw.proc.pid) && gw.proc.exitCode === null, 'the gateway lives');
    // New lines go to the new file; the renamed one gets none of them.
    await echoes(gw, s.sid, 'after');
    const s2 = await initSession(gw);
    await waitFor(() => read(file).includes(`session=${s2.sid} session created`), scaled(5000), 'the new session in the new file');
    assert.ok(!read(`${file}.1`).includes(s2.sid), 'the renamed file gets no new line');
    assert.match(read(`${file}.1`), /session created/, 'the renamed file kept the old lines');

    // A second USR1 without a rename: same file, appended to.
    const before = read(file).length;
    gw.proc.kill('SIGUSR1');
    await waitFor(() => (read(file).match(/log file reopened/g) || []).length === 2, scaled(5000), 'a second reopen');
    assert.ok(read(file).length > before);
    await echoes(gw, s.sid, 'again');
    ok = true;
  } finally {
    await gw.stop(ok ? undefined : { expect: null });
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}`);
  }
});

/** A FIFO at f (mkfifo(1)). */
function mkfifo(f) {
  const r = spawnSync('mkfifo', ['-m', '0600', f], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

/** A writer blocked in open() on FIFO f gets its reader (and goes on): the test never hangs. */
function releaseFifo(f) {
  try { fs.closeSync(fs.openSync(f, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)); } catch { /* not there */ }
}

test('SIGUSR1 when the paths of log_file and access_log come back as a symbolic link and a FIFO: each refused with its reason, lines stay in the files already open, the link\'s target is not written, the gateway does not block', async () => {
  const dir = tmpdir('mcpgw-logsafe-');
  const file = path.join(dir, 'gateway.log');
  const access = path.join(dir, 'access.log');
  const theirs = path.join(dir, 'someone-elses');
  fs.writeFileSync(theirs, 'theirs\n', { mode: 0o600 });
  const gw = await startGateway({ gateway: { log_file: file, access_log: access } });
  let ok = false;
  try {
    const s = await initSession(gw);
    fs.renameSync(file, `${file}.1`);
    fs.symlinkSync(theirs, file);
    fs.renameSync(access, `${access}.1`);
    mkfifo(access);
    gw.proc.kill('SIGUSR1');
    await waitFor(() => /SIGUSR1: log_file \S+: a symbolic link, not followed/.test(read(`${file}.1`)), scaled(5000), 'the refused log_file in the open log');
    assert.match(read(`${file}.1`), /SIGUSR1: access_log \S+access\.log: not a regular file \(a FIFO or a socket\); access lines stay in the file already open/);
    assert.match(read(`${file}.1`), /SIGUSR1: log_file \S+gateway\.log: a symbolic link, not followed: name the file itself; the log stays in the file already open/);
    await echoes(gw, s.sid, 'after the refused reopen');
    await waitFor(() => (read(`${access}.1`).match(/method=POST/g) ?? []).length >= 3, scaled(5000), 'access lines in the access log already open');
    assert.equal(read(theirs), 'theirs\n', 'the link\'s target is not written');
    // Back to files: the next SIGUSR1 reopens both.
    fs.unlinkSync(file);
    fs.unlinkSync(access);
    gw.proc.kill('SIGUSR1');
    await waitFor(() => /log file reopened/.test(read(file)), scaled(5000), 'the log reopened at its path');
    await echoes(gw, s.sid, 'reopened');
    await waitFor(() => /method=POST/.test(read(access)), scaled(5000), 'the access log reopened at its path');
    ok = true;
  } finally {
    releaseFifo(access);
    await gw.stop(ok ? undefined : { expect: null });
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}`);
  }
});

test('a log_file or access_log that is a symbolic link or a FIFO at start: the gateway exits 1 at once with the reason', () => {
  const dir = tmpdir('mcpgw-logsafe-');
  const theirs = path.join(dir, 'someone-elses');
  fs.writeFileSync(theirs, 'theirs\n', { mode: 0o600 });
  const link = path.join(dir, 'link.log');
  fs.symlinkSync(theirs, link);
  const fifo = path.join(dir, 'fifo.log');
  mkfifo(fifo);
  try {
    for (const [key, f, why] of [['log_file', link, 'a symbolic link, not followed'], ['log_file', fifo, 'not a regular file'], ['access_log', fifo, 'not a regular file'], ['log_file', '/dev/null', 'not a regular file']]) {
      const conf = path.join(dir, 'gw.ini');
      fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n${key} = ${f}\n[server:example]\npath = /mcp\ncommand = ${EXAMPLE}\n`);
      const r = spawnSync(GW_BIN, ['--config', conf], { encoding: 'utf8', timeout: scaled(10000), killSignal: 'SIGKILL' });
      assert.equal(r.error, undefined, `${key} = ${f}: the gateway did not exit (${r.error?.code})`);
      assert.equal(r.status, 1, `${key} = ${f}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`${key} ${f}: ${why}`), `${key} = ${f}: ${r.stderr}`);
    }
    assert.equal(read(theirs), 'theirs\n', 'the link\'s target is not written');
  } finally {
    releaseFifo(fifo);
  }
});

test('SIGUSR1 without log_file, SIGUSR2, SIGWINCH, SIGALRM, SIGPIPE: logged or ignored, the gateway and its sessions live; SIGQUIT stops like SIGTERM (exit 0)', async () => {
  const gw = await startGateway({});
  let ok = false;
  try {
    const s = await initSession(gw);
    const expectations = [
      ['SIGUSR1', /SIGUSR1: no log_file/],
      ['SIGUSR2', /SIGUSR2 ignored/],
      ['SIGWINCH', /SIGWINCH ignored/],
      ['SIGALRM', /SIGALRM ignored/],
      ['SIGPIPE', null],
    ];
    for (const [sig, re] of expectations) {
      gw.proc.kill(sig);
      const dead = () => gw.proc.exitCode !== null || gw.proc.signalCode !== null;
      const seen = await waitFor(() => (dead() ? 'dead' : !re || re.exec(gw.logs())), scaled(5000), `log ${re} after ${sig}`);
      assert.notEqual(seen, 'dead', `the gateway ended on ${sig}: ${gw.proc.signalCode ?? gw.proc.exitCode}`);
      await echoes(gw, s.sid, `after ${sig}`);
      assert.ok(gw.proc.exitCode === null && gw.proc.signalCode === null, `the gateway lives after ${sig}`);
    }
    ok = true;
  } finally {
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}`);
    await gw.stop(ok ? 'SIGQUIT' : { expect: null });
  }
  assert.match(gw.logs(), /shutting down \(SIGQUIT\)/);
});

// The logrotate file fails, rather than skips, without logrotate (tests/deps.sh installs it).
const LOGROTATE = ['/usr/sbin/logrotate', '/usr/bin/logrotate'].find((p) => fs.existsSync(p));

test('deploy/debian/mcp-gateway.logrotate, run by logrotate: the file is renamed, the gateway writes a new one at the path, sessions survive', async () => {
  assert.ok(LOGROTATE, 'logrotate is not installed (tests/deps.sh installs it)');
  const dir = tmpdir('mcpgw-logrotate-');
  const logs = path.join(dir, 'log');
  fs.mkdirSync(logs);
  const file = path.join(logs, 'gateway.log');
  const gw = await startGateway({ gateway: { log_file: file } });
  let ok = false;
  try {
    const s = await initSession(gw);
    // The shipped file with only its paths, its user and its kill line swapped.
    const user = os.userInfo().username;
    const group = spawnSync('id', ['-gn'], { encoding: 'utf8' }).stdout.trim();
    let conf = fs.readFileSync(path.join(process.env.GW_SOURCE_ROOT, 'deploy/debian/mcp-gateway.logrotate'), 'utf8');
    const swaps = [
      [/\/var\/log\/mcp-gateway\//g, `${logs}/`],
      [/\bsu mcp-gateway mcp-gateway\b/, `su ${user} ${group}`],
      [/\bcreate 0640 mcp-gateway mcp-gateway\b/, `create 0640 ${user} ${group}`],
      [/^\s*systemctl kill .*SIGUSR1.*$/m, `        kill -USR1 ${gw.proc.pid}`],
    ];
    for (const [re, to] of swaps) {
      assert.match(conf, re, `the logrotate file has ${re}`);
      conf = conf.replace(re, to);
    }
    const confPath = path.join(dir, 'logrotate.conf');
    fs.writeFileSync(confPath, conf, { mode: 0o644 });
    const r = spawnSync(LOGROTATE, ['-f', '-v', '-s', path.join(dir, 'state'), confPath], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 0, `logrotate: ${r.stdout}${r.stderr}`);
    assert.match(read(`${file}.1`), /session created/, 'the old lines are in gateway.log.1 (not compressed yet: delaycompress)');
    await waitFor(() => /log file reopened/.test(read(file)), scaled(5000), 'the gateway reopened gateway.log');
    await echoes(gw, s.sid, 'after logrotate');
    const s2 = await initSession(gw);
    await waitFor(() => read(file).includes(`session=${s2.sid} session created`), scaled(5000), 'new lines in the new file');
    ok = true;
  } finally {
    await gw.stop(ok ? undefined : { expect: null });
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}`);
  }
});

test('SIGHUP with another log_file moves the log there; one that cannot be opened leaves it where it is', async () => {
  const dir = tmpdir('mcpgw-logmove-');
  const a = path.join(dir, 'a.log');
  const b = path.join(dir, 'b.log');
  const gw = await startGateway({ gateway: { log_file: a } });
  let ok = false;
  try {
    const s = await initSession(gw);
    const ini = fs.readFileSync(gw.conf, 'utf8');
    fs.writeFileSync(gw.conf, ini.replace(`log_file = ${a}`, `log_file = ${b}`));
    gw.proc.kill('SIGHUP');
    await waitFor(() => /configuration reloaded/.test(read(b)), scaled(5000), 'the reload logged in b.log');
    assert.ok(read(a).includes(`SIGHUP: log_file changed: the log goes to ${b}`), 'a.log says where the log went');
    assert.ok(read(b).includes(`SIGHUP: the log goes here from now on (it went to ${a})`), 'b.log says where it came from');
    const bad = path.join(dir, 'no', 'such', 'dir', 'c.log');
    fs.writeFileSync(gw.conf, ini.replace(`log_file = ${a}`, `log_file = ${bad}`));
    gw.proc.kill('SIGHUP');
    await waitFor(() => (read(b).match(/configuration reloaded/g) || []).length === 2, scaled(5000), 'the second reload logged in b.log');
    assert.match(read(b), /SIGHUP: log_file .*c\.log: No such file or directory; the log stays in .*b\.log/);
    await echoes(gw, s.sid, 'after the moves');
    ok = true;
  } finally {
    await gw.stop(ok ? undefined : { expect: null });
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}\na: ${read(a).slice(-2000)}\nb: ${read(b).slice(-2000)}`);
  }
});

// ---- every other signal ------------------------------------------------------------------------

/** A field of /proc/PID/status as a number (hex masks: SigBlk, SigIgn) or the raw text. */
function procStatus(pid, key) {
  const m = new RegExp(`^${key}:\\s*(\\S+)`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? m[1] : null;
}
/** The process's state letter (/proc/PID/stat's third field): T while stopped. */
const procState = (pid) => /^\d+ \(.*\) (\S)/s.exec(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))[1];

// Signals node can send by name, and the real-time ones by number (glibc's SIGRTMIN is 34: 32 and
// 33 are its own, which no program can catch).
const STRAYS = ['SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGXFSZ', 'SIGXCPU', 'SIGSYS', 'SIGTRAP', 'SIGSTKFLT',
  'SIGURG', 'SIGVTALRM', 'SIGPROF', 'SIGIO', 'SIGPWR', 'SIGUSR2', 'SIGWINCH', 'SIGALRM'];
const RT = Array.from({ length: 64 - 34 + 1 }, (_, i) => [34 + i, `SIGRTMIN+${i}`]);

test('every signal the gateway does not use (job control, resource limits, SYS, TRAP, STKFLT, the real-time ones) is logged once and ignored: the gateway is neither ended nor stopped and its session answers; children start with none blocked or ignored', async () => {
  const gw = await startGateway({});
  let ok = false;
  try {
    const s = await initSession(gw);
    const pid = gw.proc.pid;
    const sent = [...STRAYS.map((n) => [n, n === 'SIGIO' ? 'SIGPOLL' : n]), ...RT];
    for (const [sig, name] of sent) {
      const re = new RegExp(`info ${name.replace('+', '\\+')} ignored`, 'g');
      if (typeof sig === 'number') { // node sends no real-time signal: kill(1) does
        const k = spawnSync('kill', [`-${sig}`, String(pid)], { encoding: 'utf8' });
        assert.equal(k.status, 0, k.stderr);
      } else {
        gw.proc.kill(sig);
      }
      const dead = () => gw.proc.exitCode !== null || gw.proc.signalCode !== null;
      const seen = await waitFor(() => (dead() ? 'dead' : re.test(gw.logs())), scaled(5000), `"${name} ignored" logged`);
      assert.notEqual(seen, 'dead', `the gateway ended on ${name}: ${gw.proc.signalCode ?? gw.proc.exitCode}`);
      assert.notEqual(procState(pid), 'T', `the gateway is stopped after ${name}`);
      await echoes(gw, s.sid, `after ${name}`);
    }
    // One line each (the same signal again within 10 s is counted on its next line, not written).
    for (const [, name] of sent) {
      const n = gw.logs().match(new RegExp(`info ${name.replace('+', '\\+')} ignored`, 'g')).length;
      assert.equal(n, 1, `${n} lines for ${name}`);
    }
    gw.proc.kill('SIGTSTP');
    await echoes(gw, s.sid, 'after a second SIGTSTP');
    assert.equal(gw.logs().match(/SIGTSTP ignored/g).length, 1, 'a repeat within 10 s writes no line');
    // The session's child: no signal blocked, none ignored but glibc's own two (32 and 33) and
    // SIGPIPE, which the example server ignores itself.
    assert.equal(BigInt(`0x${procStatus(s.pid, 'SigBlk')}`), 0n, 'the child blocks nothing');
    const own = (1n << 31n) | (1n << 32n) | (1n << 12n);
    assert.equal(BigInt(`0x${procStatus(s.pid, 'SigIgn')}`) & ~own, 0n, `the child ignores nothing: ${procStatus(s.pid, 'SigIgn')}`);
    ok = true;
  } finally {
    if (!ok) console.log(`log (tail):\n${gw.logs().slice(-4000)}`);
    await gw.stop(ok ? undefined : { expect: null });
  }
});

test('SIGABRT sent by kill (how one asks for a core dump, and what systemd\'s watchdog sends): one line in the log, then the default action', async () => {
  const gw = await startGateway({});
  // No core file in the test's directory: the gateway's core limit is 0 whatever it inherited.
  const r = spawnSync('prlimit', [`--pid=${gw.proc.pid}`, '--core=0:0'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  await gw.stop({ signal: 'SIGABRT', expect: { code: null, signal: 'SIGABRT' } });
  assert.match(gw.logs(), /error SIGABRT sent to the gateway: ending with its default action \(a core dump\)/);
});
