// SPDX-License-Identifier: MIT
// The installed binary knows where it lives: the default --config is meson's
// prefix/sysconfdir/mcp-gateway/gateway.ini (Debian: /etc/mcp-gateway/gateway.ini), and
// --print-config prints the configuration as loaded, secrets redacted, in a form that loads back.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, tmpdir } from '../lib/gw.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
const run = (args, opts = {}) => spawnSync(GW_BIN, args, { encoding: 'utf8', cwd: ROOT, ...opts });

/** key = value pairs of one section of an INI text (comment lines skipped). */
function section(text, name) {
  const out = {};
  let cur = null;
  for (const line of text.split('\n')) {
    if (line.startsWith(';') || !line.trim()) continue;
    const h = /^\[(.+)\]$/.exec(line);
    if (h) { cur = h[1]; continue; }
    const kv = /^(\S+) =(?: (.*))?$/.exec(line);
    if (kv && cur === name) out[kv[1]] = kv[2] ?? '';
  }
  return out;
}

test('the default config compiled in is meson\'s sysconfdir one, and --version and --help name it', () => {
  const want = process.env.GW_DEFAULT_CONFIG;
  assert.ok(want && want.endsWith('/mcp-gateway/gateway.ini'), `GW_DEFAULT_CONFIG ${want}`);
  const v = run(['--version']);
  assert.equal(v.status, 0);
  assert.ok(v.stdout.includes(`default config ${want}`), v.stdout);
  const h = run(['--help']);
  assert.ok(h.stdout.includes(`default: ${want}`), h.stdout);
  assert.match(h.stdout, /--print-config/);
});

test('from the source tree with nothing installed, a bare start reads conf/gateway.ini', { skip: fs.existsSync(process.env.GW_DEFAULT_CONFIG) && 'a config is installed' }, () => {
  const r = run(['--check-config']);
  assert.equal(r.status, 0, r.stderr);
  // The box of the shipped example server (sandbox = on) is tried first, and its line printed.
  assert.match(r.stdout, /^ {2}\[server:example\] sandbox: namespaces user, mount, pid, ipc, uts; .*\nconf\/gateway\.ini: configuration OK/);
});

test('--print-config prints every key of every section, and its output loads back as the same configuration', () => {
  const dir = tmpdir('mcpgw-pcfg-');
  const conf = path.join(dir, 'in.ini');
  fs.writeFileSync(conf, [
    '[gateway]', 'listen = [::1]:0', 'max_sessions = 77', 'instance_id = gw7', 'log_level = debug',
    '[auth]', 'mode = none',
    '[server:alpha]', 'path = /a', 'command = /bin/cat "two words" it\\\'s', 'era = legacy', 'allowed_tools = echo, add',
    '[server:beta]', 'path = /b', 'command = /bin/cat', 'cache_scope = public',
  ].join('\n') + '\n', { mode: 0o600 });
  const p = run(['--print-config', '--config', conf]);
  assert.equal(p.status, 0, p.stderr);
  const keys = run(['--man', '5', path.join(process.env.GW_SOURCE_ROOT, 'src/config/options.md')]).stdout; // every key is in the man page: check each is printed
  for (const [sec, name] of [['gateway', 'gateway'], ['auth', 'auth'], ['server:alpha', 'server'], ['server:beta', 'server']]) {
    const got = section(p.stdout, sec);
    const want = [...keys.split(`.SH "[${name}`)[1].split('.SH')[0].matchAll(/^\.TP\n\.B (\S+)/gm)].map((m) => m[1].replaceAll('\\-', '-'));
    assert.ok(want.length > 5, `keys of [${name}] from the man page`);
    for (const k of want) assert.ok(k in got, `[${sec}] ${k} printed`);
  }
  const g = section(p.stdout, 'gateway');
  assert.equal(g.listen, '[::1]:0');
  assert.equal(g.max_sessions, '77');
  assert.equal(g.heartbeat_s, '15', 'a default is printed');
  const out = path.join(dir, 'out.ini');
  fs.writeFileSync(out, p.stdout, { mode: 0o600 });
  const c = run(['--check-config', '--config', out]);
  assert.equal(c.status, 0, c.stderr);
  const again = run(['--print-config', '--config', out]);
  assert.equal(again.status, 0, again.stderr);
  assert.equal(again.stdout.replace(/^;.*\n/m, ''), p.stdout.replace(/^;.*\n/m, ''), 'printed twice, the same');
  const a = section(again.stdout, 'server:alpha');
  assert.equal(a.command, "/bin/cat 'two words' 'it'\\''s'");
  assert.equal(a.era, 'legacy');
  assert.equal(a.allowed_tools, 'echo, add');
  assert.equal(section(again.stdout, 'server:beta').cache_scope, 'public');
  assert.equal(section(again.stdout, 'gateway').instance_id, 'gw7');
});

test('--print-config redacts admin_token and env values, shows *_file paths, not their contents', () => {
  const dir = tmpdir('mcpgw-pcfg-');
  const envFile = path.join(dir, 'server.env');
  fs.writeFileSync(envFile, 'FROM_FILE=filesecret_4f2a\n', { mode: 0o600 });
  const conf = path.join(dir, 'in.ini');
  fs.writeFileSync(conf, [
    '[gateway]', 'listen = 127.0.0.1:0', 'admin_token = AdminSecret_9c1d7e3b5a0f2468ace13579bdf02468',
    '[server:s]', 'command = /bin/cat', 'env = API_KEY=envsecret_77b1 OTHER=envsecret_88c2', `env_file = ${envFile}`,
  ].join('\n') + '\n', { mode: 0o600 });
  const p = run(['--print-config', '--config', conf]);
  assert.equal(p.status, 0, p.stderr);
  for (const secret of ['AdminSecret_9c1d', 'envsecret_77b1', 'envsecret_88c2', 'filesecret_4f2a'])
    assert.ok(!p.stdout.includes(secret), `${secret} is not printed`);
  assert.match(p.stdout, /^; admin_token = <redacted>$/m);
  assert.match(p.stdout, /^; env = .*API_KEY=<redacted>/m);
  assert.ok(p.stdout.includes(`env_file = ${envFile}\n`), 'the env_file path is printed');
  // It loads the way a start does: the same error for a bad file.
  fs.writeFileSync(conf, '[gateway]\nmax_sessions = 0\n[server:s]\ncommand = /bin/cat\n', { mode: 0o600 });
  const bad = run(['--print-config', '--config', conf]);
  const check = run(['--check-config', '--config', conf]);
  assert.equal(bad.status, 1);
  assert.equal(bad.stdout, '');
  assert.equal(bad.stderr, check.stderr);
});
