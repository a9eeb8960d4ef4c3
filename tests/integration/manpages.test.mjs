// SPDX-License-Identifier: MIT
// The man pages meson generated (the binary's hidden --man option), and the documents written from
// the same texts: mcp-gateway(8) says what --help says; mcp-gateway.ini(5), written from each key's
// prose (src/config/options.md) and the option table's facts, gives each key its default, bound,
// unit and text; README.md's option tables and conf/gateway.ini's key comments are byte for byte
// what `meson compile -C build docs` writes from the same two.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, tmpdir } from '../lib/gw.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
const BUILD = process.env.GW_BUILD_ROOT;
if (!ROOT || !BUILD) throw new Error('GW_SOURCE_ROOT and GW_BUILD_ROOT must be set (meson test sets them)');

const page = (name) => fs.readFileSync(path.join(BUILD, 'src', name), 'utf8');
const OPTIONS_MD = path.join(ROOT, 'src/config/options.md');
const REGENERATE = 'edit src/config/options.md (prose) or src/config/config_table.c (defaults, bounds), then run `meson compile -C build docs`';
const run = (...args) => {
  const r = spawnSync(GW_BIN, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `${GW_BIN} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
/** roff text back to plain text: escapes and fonts undone, the argument of .B/.BR kept, other requests dropped. */
const plain = (roff) => (Array.isArray(roff) ? roff : roff.split('\n'))
  .map((l) => (/^\.BR? /.test(l) ? l.replace(/^\.BR? /, '') : l))
  .filter((l) => !l.startsWith('.'))
  .map((l) => l.replaceAll('\\fB', '').replaceAll('\\fR', '').replaceAll('\\-', '-').replaceAll('\\e', '\\').replaceAll('\\&', ''));

/**
 * mcp-gateway.ini(5) entries: {section, key, def, bound, unit, doc} in page order; bound and unit
 * are null when the page gives none. An entry is ".TP", ".B KEY", then its lines up to the next
 * entry or section: "default: ...", "bound: ...", "unit: ...", and the text (its paragraphs).
 */
function iniEntries(roff) {
  const out = [];
  let section = null;
  let e = null;
  const lines = roff.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const sh = /^\.SH "\[(gateway|auth|server):?[A-Z]*\] SECTIONS?"$/.exec(lines[i]);
    if (sh) section = sh[1];
    if (lines[i].startsWith('.SH') || lines[i] === '.TP') e = null;
    if (lines[i] === '.TP' && lines[i + 1]?.startsWith('.B ')) {
      e = { section, key: plain([lines[++i]])[0], def: null, bound: null, unit: null, doc: '' };
      out.push(e);
      continue;
    }
    if (!e || lines[i].startsWith('.')) continue;
    const [text] = plain([lines[i]]);
    const m = /^(default|bound|unit): (.*)$/.exec(text);
    if (m && !e.doc) e[m[1] === 'default' ? 'def' : m[1]] = m[2];
    else e.doc += (e.doc ? ' ' : '') + text;
  }
  return out;
}

/**
 * conf/gateway.ini, key by key: {'gateway.listen': {value, set}}. `set`: the key's line is not
 * commented out.
 */
function confKeys(text) {
  const keys = {};
  let section = null;
  for (const line of text.split('\n')) {
    const sec = /^\[(gateway|auth|server)(:[^\]]*)?\]/.exec(line);
    if (sec) { section = sec[1]; continue; }
    const kv = /^(; )?([a-z_]+) =(?: (.*))?$/.exec(line);
    if (kv && section && !(`${section}.${kv[2]}` in keys)) keys[`${section}.${kv[2]}`] = { value: kv[3] ?? '', set: !kv[1] };
  }
  return keys;
}

/** What `meson compile -C build docs` writes for file (README.md, conf/gateway.ini) from its text now. */
const written = (what, file) => run('--man', what, OPTIONS_MD, file);

/** A copy of the file at rel with its first `from` made `to`, in a new directory. */
function editedCopy(rel, from, to) {
  const text = fs.readFileSync(path.join(ROOT, rel), 'utf8');
  assert.ok(text.includes(from), `${rel} has "${from}"`);
  const f = path.join(tmpdir('mcpgw-docs-'), path.basename(rel));
  fs.writeFileSync(f, text.replace(from, to));
  return f;
}

test('mcp-gateway(8) has the sections an operator looks for: endpoints, signals, exit status, files, examples', () => {
  const roff = page('mcp-gateway.8');
  const heads = [...roff.matchAll(/^\.SH "?([^"\n]+)"?$/gm)].map((m) => m[1]);
  for (const h of ['OPTIONS', 'ENDPOINTS', 'SIGNALS', 'EXIT STATUS', 'FILES', 'EXAMPLES'])
    assert.ok(heads.includes(h), `section ${h} (has ${heads.join(', ')})`);
  const body = (h) => plain(roff.split(/^\.SH "?/m).find((x) => x.startsWith(h)).split('\n').slice(1)).join('\n');
  for (const e of ['/healthz', '/readyz', '/metrics', '/admin/inflight', '/.well-known/oauth-protected-resource', 'PATH/sse'])
    assert.ok(body('ENDPOINTS').includes(e), `ENDPOINTS names ${e}`);
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'])
    assert.ok(body('SIGNALS').includes(sig), `SIGNALS names ${sig}`);
  for (const st of ['0', '1', '2']) assert.match(body('EXIT STATUS'), new RegExp(`^${st}$`, 'm'), `exit status ${st}`);
  for (const f of ['/etc/mcp-gateway/gateway.ini', 'tokens_file', 'admin_token_file', 'env_file'])
    assert.ok(body('FILES').includes(f), `FILES names ${f}`);
  assert.ok(body('EXAMPLES').includes('mcp-gateway --print-config'), 'EXAMPLES shows --print-config');
  // man(1) renders it without a warning (a line starting with "." would be a request).
  const r = spawnSync('man', ['--warnings', '-l', '-E', 'UTF-8', path.join(BUILD, 'src', 'mcp-gateway.8')], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '80' } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'no groff warning');
  assert.ok(r.stdout.includes('./build/src/mcp-gateway --config conf/gateway.ini'), 'the example command is rendered');
});

test('mcp-gateway(8) is what --man 8 writes, and says everything --help says', () => {
  const roff = page('mcp-gateway.8');
  assert.equal(roff, run('--man', '8'), 'the built page is stale');
  const man = plain(roff).join('\n');
  const help = run('--help');
  for (const line of help.split('\n').filter(Boolean)) {
    const opt = /^ {2}(\S.*?) {2,}(.*)$/.exec(line);
    const parts = opt ? [opt[1], opt[2]] : [line.replace(/^usage: /, '')];
    for (const p of parts) assert.ok(man.includes(p), `mcp-gateway.8 lacks --help's "${p}"`);
  }
});

test('mcp-gateway.ini(5) is what --man 5 writes from options.md, one entry per key, and man(1) renders it without a warning', () => {
  const roff = page('mcp-gateway.ini.5');
  assert.equal(roff, run('--man', '5', OPTIONS_MD), 'the built page is stale');
  const entries = iniEntries(roff);
  assert.ok(entries.length > 50, `only ${entries.length} entries parsed`);
  for (const e of entries) assert.ok(e.section, `${e.key} outside a section`);
  const r = spawnSync('man', ['--warnings', '-l', '-E', 'UTF-8', path.join(BUILD, 'src', 'mcp-gateway.ini.5')], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '80' } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'no groff warning');
  // A key's further paragraphs and examples are on the page (options.md's, not the summary's).
  assert.match(r.stdout, /^ +command = \/usr\/bin\/node\n +\/opt\/mcp\/servers\/filesystem\/dist\/index\.js$/m, 'the example of command is rendered as written');
  assert.match(r.stdout, /twice\s+this\s+plus\s+16\s+KiB/, 'max_header_bytes\' second paragraph');
});

test('--man 5 refuses an options.md that lacks a key of the table, has one it lacks, or has one twice', () => {
  const text = fs.readFileSync(OPTIONS_MD, 'utf8');
  const dir = tmpdir('mcpgw-options-');
  const cases = [
    ['lacks', text.replace('\n### heartbeat_s\n', '\n'), /lacks\.md: the option table's gateway\.heartbeat_s has no ### heartbeat_s under ## \[gateway\]/],
    ['unknown', text.replace('\n### path\n', '\n### heartbeat_ms\n\nEvery so often.\n\n### path\n'), /unknown\.md:\d+: ### heartbeat_ms: the option table \(config_table\.c\) has no such key in \[gateway\]/],
    ['twice', text.replace('\n### path\n', '\n### listen\n\nAgain.\n\n### path\n'), /twice\.md:\d+: ### listen twice in \[gateway\] \(first at line \d+\)/],
  ];
  for (const [name, md, why] of cases) {
    assert.notEqual(md, text, name);
    const f = path.join(dir, `${name}.md`);
    fs.writeFileSync(f, md);
    const r = spawnSync(GW_BIN, ['--man', '5', f], { encoding: 'utf8' });
    assert.equal(r.status, 1, `${name}: ${r.stderr}`);
    assert.equal(r.stdout, '', `${name}: no page`);
    assert.match(r.stderr, why, name);
  }
});

test('README.md\'s option tables are byte for byte what options.md and the option table make', () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme === written('readme', path.join(ROOT, 'README.md')), `README.md's Configuration tables differ from what they are written as: ${REGENERATE}`);
  assert.ok(readme.split('\n').length <= 300, 'README.md stays within 300 lines');
  // The comparison sees a word changed in a row: the copy is written back as it was.
  const edited = editedCopy('README.md', 'a larger one gets 413', 'a larger one gets 414');
  assert.notEqual(written('readme', edited), fs.readFileSync(edited, 'utf8'), 'an edited row is drift');
  assert.equal(written('readme', edited), readme, 'the written tables replace the edited ones');
});

test('conf/gateway.ini\'s comment above each key is byte for byte what options.md and the option table make', () => {
  const conf = fs.readFileSync(path.join(ROOT, 'conf/gateway.ini'), 'utf8');
  assert.ok(conf === written('conf', path.join(ROOT, 'conf/gateway.ini')), `conf/gateway.ini's key comments differ from what they are written as: ${REGENERATE}`);
  const edited = editedCopy('conf/gateway.ini', '; The largest request body; a larger one gets 413.', '; The largest request body; a larger one gets 414.');
  assert.notEqual(written('conf', edited), fs.readFileSync(edited, 'utf8'), 'an edited comment is drift');
  assert.equal(written('conf', edited), conf, 'the written comment replaces the edited one');
});

test('mcp-gateway.ini(5) gives each key its whole text: a default, its bound, a number\'s unit, and what it does', () => {
  const problems = [];
  for (const e of iniEntries(page('mcp-gateway.ini.5'))) {
    const id = `${e.section}.${e.key}`;
    if (!e.def) problems.push(`${id}: no default`);
    if (!e.bound) problems.push(`${id}: no bound`);
    if (!e.doc || e.doc.length < 12) problems.push(`${id}: no text (${e.doc})`);
    if (e.bound && /^\d+\.\.\d+$/.test(e.bound) && e.bound !== '0..1' && !e.unit) problems.push(`${id}: bound ${e.bound} without a unit`);
  }
  assert.deepEqual(problems, []);
});

// The shipped file boxes its example server (sandbox = on): the one key it sets off its default.
const CONF_OWN = { 'server.sandbox': 'on' };

test('conf/gateway.ini sets each key it sets to the default (only the example server\'s path and command, and sandbox = on, are its own)', () => {
  const conf = confKeys(fs.readFileSync(path.join(ROOT, 'conf/gateway.ini'), 'utf8'));
  const problems = [];
  for (const e of iniEntries(page('mcp-gateway.ini.5'))) {
    const id = `${e.section}.${e.key}`;
    const c = conf[id];
    if (!c) { problems.push(`${id}: not in conf/gateway.ini`); continue; }
    const def = e.def === '(empty)' || e.def === '(none)' ? '' : e.def;
    const want = CONF_OWN[id] ?? def;
    if (id in CONF_OWN && !c.set) problems.push(`${id}: commented out, the shipped file sets ${want}`);
    if (c.set && e.def !== '(none)' && c.value !== want) problems.push(`${id}: set to ${c.value}, ${id in CONF_OWN ? 'the shipped file sets' : 'the default is'} ${want}`);
  }
  assert.deepEqual(problems, []);
});

test('mcp-gateway(8): its synopsis names every way to run it, --import-mcp-json included', () => {
  const roff = page('mcp-gateway.8');
  const synopsis = plain(roff.split(/^\.SH "?/m).find((x) => x.startsWith('SYNOPSIS')).split('\n').slice(1)).join('\n');
  const help = run('--help');
  const longs = [...new Set([...help.matchAll(/^ {2}-\w, (--[a-z-]+)/gm)].map((m) => m[1]))];
  assert.ok(longs.length >= 6, `options in --help: ${longs}`);
  for (const o of longs) assert.ok(synopsis.includes(o), `the synopsis lacks ${o}: ${synopsis}`);
  assert.match(synopsis, /mcp-gateway --import-mcp-json FILE \[--env-dir DIR\]/);
});

test('mcp-gateway(8) FILES says true things of the files it names: the secrets others can read are refused, tokens_file is loaded', () => {
  const roff = page('mcp-gateway.8');
  const files = plain(roff.split(/^\.SH "?/m).find((x) => x.startsWith('FILES')).split('\n').slice(1)).join('\n');
  const refused = /^(.*)\nsecrets, each 0600 or 0640: a file others can read is refused\.$/m.exec(files);
  assert.ok(refused, files);
  assert.doesNotMatch(refused[1], /tokens_file|jwks_file/, 'tokens_file and jwks_file are not among the refused');
  assert.match(files, /tokens_file, jwks_file\ntoken digests and public keys: others may read them/);
  // As the page says: a tokens_file others can read loads (it holds SHA-256 digests, not tokens);
  // an admin_token_file others can read is refused.
  const dir = tmpdir('mcpgw-man-files-');
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `sha256:${'ab'.repeat(32)} alice\n`, { mode: 0o644 });
  fs.chmodSync(tokens, 0o644);
  const conf = path.join(dir, 'gw.ini');
  const server = '[server:x]\npath = /mcp\ncommand = /bin/true\n';
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n[auth]\nmode = bearer\npublic_url = https://mcp.example\ntokens_file = ${tokens}\n${server}`, { mode: 0o644 });
  fs.chmodSync(conf, 0o644);
  let r = spawnSync(GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const secret = path.join(dir, 'admin_token');
  fs.writeFileSync(secret, `${'t'.repeat(40)}\n`);
  fs.chmodSync(secret, 0o644);
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\nadmin_token_file = ${secret}\n${server}`);
  r = spawnSync(GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /readable by others: chmod 0640/);
});
