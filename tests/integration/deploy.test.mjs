// SPDX-License-Identifier: MIT
// The deployment files agree with the shipped configuration: the systemd unit (valid for
// systemd-analyze verify, its fd limit and stop timeout sized for conf/gateway.ini,
// reload by SIGHUP after a config check, hardening present) and both nginx sites (body limit equal
// to max_body_bytes, read timeout far above the heartbeat). The nginx sites themselves run in
// nginx.test.mjs and instances.test.mjs. deploy/README.md, the operator's path, has the steps
// tests/package/run.sh walks.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, tmpdir } from '../lib/gw.mjs';

const root = process.env.GW_SOURCE_ROOT;
const read = (p) => fs.readFileSync(path.join(root, p), 'utf8');

/** key = value pairs of one INI section (comments and blank lines skipped). */
function iniSection(text, section) {
  const out = {};
  let cur = null;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[;#].*$/, '').trim();
    if (!line) continue;
    const h = /^\[(.+)\]$/.exec(line);
    if (h) { cur = h[1]; continue; }
    const kv = /^([^=]+?)\s*=\s*(.*)$/.exec(line);
    if (kv && cur === section) out[kv[1]] = kv[2];
  }
  return out;
}

/** Every value of each key of a systemd unit (keys may repeat). */
function unitKeys(text) {
  const out = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith('[')) continue;
    const i = line.indexOf('=');
    (out[line.slice(0, i)] ||= []).push(line.slice(i + 1));
  }
  return out;
}

const gwConf = iniSection(read('conf/gateway.ini'), 'gateway');
const unit = unitKeys(read('deploy/systemd/mcp-gateway.service'));
const num = (k) => {
  assert.ok(k in gwConf, `conf/gateway.ini sets ${k}`);
  return Number(gwConf[k]);
};

test('the shipped configuration passes --check-config, the command the unit runs before start and reload', () => {
  const r = spawnSync(GW_BIN, ['--check-config', '--config', path.join(root, 'conf/gateway.ini')], { encoding: 'utf8', cwd: root });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /configuration OK/);
  for (const k of ['ExecStartPre', 'ExecReload']) assert.ok(unit[k].some((v) => /mcp-gateway --check-config --config \S+/.test(v)), `${k} checks the file`);
  assert.ok(unit.ExecReload.some((v) => /kill -HUP \$MAINPID/.test(v)), 'reload is SIGHUP');
  // The gateway says READY=1, RELOADING=1 and STOPPING=1 itself (readiness.test.mjs).
  assert.deepEqual(unit.Type, ['notify'], 'Type=notify: systemctl start waits for READY=1');
  assert.deepEqual(unit.NotifyAccess, ['main'], 'only the gateway, not a child, may notify');
  assert.ok(unit.ExecStart.some((v) => /mcp-gateway --config \S+/.test(v)));
});

test('the unit is sized for the shipped configuration: fds per session and a stop timeout past drain and the child ladder', () => {
  const nofile = Number(unit.LimitNOFILE[0]);
  const need = 5 * num('max_sessions') + num('max_connections') + 64;
  assert.ok(nofile >= need, `LimitNOFILE ${nofile} < ${need}`);
  const stopMs = Number(/^(\d+)s?$/.exec(unit.TimeoutStopSec[0])[1]) * 1000;
  const ladder = num('shutdown_drain_ms') + num('child_stdin_grace_ms') + num('child_term_grace_ms') + 1000;
  assert.ok(stopMs >= ladder, `TimeoutStopSec ${stopMs} ms < ${ladder} ms`);
  assert.deepEqual(unit.KillMode, ['mixed'], 'SIGTERM goes to the gateway only; it stops its children itself');
});

test('the unit runs as a dedicated user with hardening', () => {
  assert.ok(unit.User && unit.User[0] !== 'root');
  const sysusers = read('deploy/systemd/mcp-gateway.sysusers');
  assert.match(sysusers, new RegExp(`^u ${unit.User[0]} `, 'm'), 'sysusers.d creates that user');
  for (const [k, v] of [['NoNewPrivileges', 'yes'], ['ProtectSystem', 'strict'], ['PrivateTmp', 'yes'], ['CapabilityBoundingSet', ''], ['RestrictSUIDSGID', 'yes']])
    assert.deepEqual(unit[k], [v], k);
});

test('the shipped file boxes its example server, and the unit allows the box exactly that (its namespaces, sethostname in its own); the unboxed drop-in refuses them again', () => {
  assert.equal(iniSection(read('conf/gateway.ini'), 'server:example').sandbox, 'on');
  for (const f of ['deploy/systemd/mcp-gateway.service', 'deploy/systemd/mcp-gateway@.service']) {
    const u = unitKeys(read(f));
    // cgroup and time namespaces stay refused: the box makes neither.
    assert.deepEqual(u.RestrictNamespaces, ['user mnt pid ipc uts net'], `${f}: RestrictNamespaces`);
    assert.deepEqual(u.ProtectHostname, ['no'], `${f}: ProtectHostname (yes refuses the box's sethostname)`);
  }
  const dropin = unitKeys(read('deploy/systemd/mcp-gateway-unboxed.conf'));
  assert.deepEqual(dropin, { RestrictNamespaces: ['yes'], ProtectHostname: ['yes'] }, 'the drop-in changes these two lines and nothing else');
  assert.match(read('deploy/debian/rules'), /install -D -m 0644 deploy\/systemd\/mcp-gateway-unboxed\.conf \$\(PKG\)\/usr\/share\/doc\/mcp-gateway\/examples\/systemd\/unboxed\.conf/);
});

// systemd-analyze is required (tests/deps.sh installs Debian's systemd package): without it this
// test fails rather than skips, since a skip would pass unseen. verify wants every Exec*= binary to
// exist, so a copy of the unit runs the built binary instead of /usr/local/bin/mcp-gateway.
test('systemd-analyze verify accepts the unit', () => {
  const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => fs.existsSync(p));
  assert.ok(analyze, 'systemd-analyze is not installed (tests/deps.sh installs the systemd package)');
  const dir = tmpdir('mcpgw-unit-');
  const orig = read('deploy/systemd/mcp-gateway.service');
  assert.match(orig, /^ExecStart=\/usr\/local\/bin\/mcp-gateway /m, 'the unit runs /usr/local/bin/mcp-gateway');
  const text = orig.replaceAll('/usr/local/bin/mcp-gateway', GW_BIN);
  const f = path.join(dir, 'mcp-gateway.service');
  fs.writeFileSync(f, text);
  // verify also runs man(1) for each Documentation=man: page: the pages meson built, on MANPATH.
  for (const [page, sec] of [['mcp-gateway.8', '8'], ['mcp-gateway.ini.5', '5']]) {
    fs.mkdirSync(path.join(dir, 'man', `man${sec}`), { recursive: true });
    fs.copyFileSync(path.join(process.env.GW_BUILD_ROOT, 'src', page), path.join(dir, 'man', `man${sec}`, page));
  }
  const env = { ...process.env, SYSTEMD_LOG_LEVEL: 'warning', MANPATH: path.join(dir, 'man') };
  const r = spawnSync(analyze, ['verify', f], { encoding: 'utf8', env });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.split('\n').filter((l) => l.includes('mcp-gateway.service')).join('\n'), '', 'no complaint about the unit');
  // The same check sees a fault (verify really parsed the file): a bad KillMode= is reported.
  const bad = path.join(dir, 'broken', 'mcp-gateway.service');
  fs.mkdirSync(path.dirname(bad));
  fs.writeFileSync(bad, text.replace(/^KillMode=.*$/m, 'KillMode=bogus'));
  const rb = spawnSync(analyze, ['verify', bad], { encoding: 'utf8', env });
  assert.match(rb.stderr, /mcp-gateway\.service:\d+: .*kill mode.*bogus/i, 'verify reports the bad KillMode=');
});

// The template unit: mcp-gateway@NAME runs /etc/mcp-gateway/NAME.ini, and is otherwise the unit
// above (same hardening, limits and stop ladder), so the checks above hold for it too.
test('the template unit mcp-gateway@.service is the unit with %i, and systemd-analyze verify accepts an instance of it', () => {
  const orig = read('deploy/systemd/mcp-gateway.service');
  const tmpl = read('deploy/systemd/mcp-gateway@.service');
  const t = unitKeys(tmpl);
  assert.ok(t.ExecStart.some((v) => v === '/usr/local/bin/mcp-gateway --config /etc/mcp-gateway/%i.ini'), 'ExecStart runs %i.ini');
  for (const k of ['ExecStartPre', 'ExecReload']) assert.ok(t[k].some((v) => v.endsWith('--check-config --config /etc/mcp-gateway/%i.ini')), `${k} checks %i.ini`);
  const same = (u) => Object.entries(u).filter(([k]) => !['Description', 'ExecStart', 'ExecStartPre', 'ExecReload', 'SyslogIdentifier', 'WorkingDirectory', 'StateDirectory'].includes(k));
  assert.deepEqual(same(t), same(unitKeys(orig)), 'every other key as in mcp-gateway.service');
  const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => fs.existsSync(p));
  assert.ok(analyze, 'systemd-analyze is not installed (tests/deps.sh installs the systemd package)');
  const dir = tmpdir('mcpgw-unit-');
  for (const [page, sec] of [['mcp-gateway.8', '8'], ['mcp-gateway.ini.5', '5']]) {
    fs.mkdirSync(path.join(dir, 'man', `man${sec}`), { recursive: true });
    fs.copyFileSync(path.join(process.env.GW_BUILD_ROOT, 'src', page), path.join(dir, 'man', `man${sec}`, page));
  }
  const env = { ...process.env, SYSTEMD_LOG_LEVEL: 'warning', MANPATH: path.join(dir, 'man') };
  const text = tmpl.replaceAll('/usr/local/bin/mcp-gateway', GW_BIN);
  fs.writeFileSync(path.join(dir, 'mcp-gateway@.service'), text);
  const r = spawnSync(analyze, ['verify', path.join(dir, 'mcp-gateway@test.service')], { encoding: 'utf8', env });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.split('\n').filter((l) => l.includes('mcp-gateway@')).join('\n'), '', 'no complaint about the unit');
  // verify really read the template: a bad KillMode= in it is reported for the instance.
  fs.mkdirSync(path.join(dir, 'broken'));
  fs.writeFileSync(path.join(dir, 'broken', 'mcp-gateway@.service'), text.replace(/^KillMode=.*$/m, 'KillMode=bogus'));
  const rb = spawnSync(analyze, ['verify', path.join(dir, 'broken', 'mcp-gateway@test.service')], { encoding: 'utf8', env });
  assert.match(rb.stderr, /mcp-gateway@\.service:\d+: .*kill mode.*bogus/i, 'verify reports the bad KillMode=');
});

test('both nginx sites take the bodies the gateway takes and outlast its heartbeats', () => {
  for (const site of ['deploy/nginx/mcp-gateway.conf', 'deploy/nginx/mcp-gateway-instances.conf']) {
    const text = read(site);
    const body = /client_max_body_size (\d+)m;/.exec(text);
    assert.ok(body, `${site}: client_max_body_size in MiB`);
    assert.equal(Number(body[1]) * 1024 * 1024, num('max_body_bytes'), `${site}: body limit = max_body_bytes`);
    const rt = /proxy_read_timeout (\d+)(s|m|h);/.exec(text);
    const secs = Number(rt[1]) * { s: 1, m: 60, h: 3600 }[rt[2]];
    assert.ok(secs >= 4 * num('heartbeat_s'), `${site}: read timeout ${secs} s vs heartbeat ${num('heartbeat_s')} s`);
    assert.match(text, /proxy_buffering off;/);
    assert.match(text, /proxy_http_version 1\.1;/);
  }
});

test('deploy/README.md is the operator\'s path that tests/package/run.sh walks: the same numbered steps, in order', () => {
  // The package test runs as root in CI only; this keeps the two in step on every run.
  const steps = [...read('deploy/README.md').matchAll(/^## (\d+)\. (.+)$/gm)].map((m) => Number(m[1]));
  assert.ok(steps.length >= 8, `deploy/README.md has ${steps.length} numbered steps`);
  assert.deepEqual(steps, steps.map((_, i) => i + 1), 'steps are numbered 1, 2, 3, ...');
  const walked = [...read('tests/package/run.sh').matchAll(/^step (\d+)\b/gm)].map((m) => Number(m[1]));
  assert.deepEqual(walked, steps, 'tests/package/run.sh walks each step of deploy/README.md, in order');
  // The commands the steps name are the shipped ones.
  const md = read('deploy/README.md');
  for (const s of ['sh deploy/debian/build.sh', 'dpkg -i', 'mcp-gateway --check-config', 'systemctl enable --now mcp-gateway',
    '/usr/share/doc/mcp-gateway/examples/mcp-gateway.conf', 'nginx -t && systemctl reload nginx', '/healthz', '/readyz',
    '/etc/logrotate.d/mcp-gateway', 'systemctl reload mcp-gateway', 'mcp-gateway@g1', 'mcp-gateway-instances.conf', 'dpkg --purge mcp-gateway'])
    assert.ok(md.includes(s), `deploy/README.md names ${s}`);
  for (const f of ['deploy/nginx/mcp-gateway.conf', 'deploy/nginx/mcp-gateway-instances.conf', 'deploy/debian/mcp-gateway.logrotate', 'deploy/systemd/mcp-gateway@.service'])
    assert.ok(fs.existsSync(path.join(root, f)), f);
});

// An upgrade restarts mcp-gateway.service (dh_installsystemd --restart-after-upgrade), but
// dh_installsystemd skips template units: the package's postinst restarts the template's running
// instances itself, one at a time, with the script the package installs (tests/package/run.sh
// runs it through an upgrade with two instances under a stream of new sessions).
test('an upgrade restarts the running instances of mcp-gateway@.service one at a time: postinst runs the installed restart-instances', () => {
  const postinst = read('deploy/debian/mcp-gateway.postinst');
  const call = /^if \[ "\$1" = configure \] && \[ -n "\$\{2:-\}" \] .*\/run\/systemd\/system.*\n\s*\/usr\/lib\/mcp-gateway\/restart-instances\b/m;
  assert.match(postinst, call, 'postinst runs restart-instances on an upgrade under systemd');
  assert.ok(postinst.indexOf('#DEBHELPER#') < postinst.search(call), 'after debhelper\'s snippets (daemon-reload, the main unit\'s restart)');
  assert.match(read('deploy/debian/rules'), /install -D -m 0755 deploy\/systemd\/mcp-gateway-restart-instances \$\(PKG\)\/usr\/lib\/mcp-gateway\/restart-instances/);
  const script = read('deploy/systemd/mcp-gateway-restart-instances');
  assert.match(script, /list-units --type=service --state=running .*'mcp-gateway@\*\.service'/, 'running instances only');
  assert.match(script, /\$invoke try-restart "\$unit"/, 'one try-restart per instance');
  assert.match(script, /until ready "\$host" "\$port"; do/, 'the next one once this one is ready');
  const sh = spawnSync('sh', ['-n', path.join(root, 'deploy/systemd/mcp-gateway-restart-instances')], { encoding: 'utf8' });
  assert.equal(sh.status, 0, sh.stderr);
  assert.ok(fs.statSync(path.join(root, 'deploy/systemd/mcp-gateway-restart-instances')).mode & 0o100, 'executable');
});
