// SPDX-License-Identifier: MIT
// The man pages meson generated (the binary's hidden --man option) against --help and the README:
// mcp-gateway(8) says what --help says, and mcp-gateway.ini(5), written from the option table,
// gives each key's default, bound, unit and text, and agrees with the README's Configuration
// tables and with conf/gateway.ini's comments on every key, default, bound and unit.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN } from '../lib/gw.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
const BUILD = process.env.GW_BUILD_ROOT;
if (!ROOT || !BUILD) throw new Error('GW_SOURCE_ROOT and GW_BUILD_ROOT must be set (meson test sets them)');

const page = (name) => fs.readFileSync(path.join(BUILD, 'src', name), 'utf8');
const run = (...args) => {
  const r = spawnSync(GW_BIN, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `${GW_BIN} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
/** roff text back to plain text: escapes undone, the argument of .B/.BR kept, other requests dropped. */
const plain = (roff) => (Array.isArray(roff) ? roff : roff.split('\n'))
  .map((l) => (/^\.BR? /.test(l) ? l.replace(/^\.BR? /, '') : l))
  .filter((l) => !l.startsWith('.'))
  .map((l) => l.replaceAll('\\-', '-').replaceAll('\\e', '\\').replaceAll('\\&', ''));

/**
 * mcp-gateway.ini(5) entries: {section, key, def, bound, unit, doc} in page order; bound and unit
 * are null when the page gives none. An entry is ".TP", ".B KEY", then its lines up to the next
 * entry or section: "default: ...", "bound: ...", "unit: ...", and the text.
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
 * conf/gateway.ini, key by key: {'gateway.listen': {value, set, comment}}. `set`: the key's line
 * is not commented out. `comment`: the ';' lines right above it, joined; keys on consecutive lines
 * share the comment above the first (jwks_cache_min_s, jwks_cache_max_s).
 */
function confKeys(text) {
  const keys = {};
  let section = null;
  let comment = [];
  let shared = null; // the comment of the key on the line above, for a key right below it
  for (const line of text.split('\n')) {
    const sec = /^\[(gateway|auth|server)(:[^\]]*)?\]/.exec(line);
    if (sec) { section = sec[1]; comment = []; shared = null; continue; }
    const kv = /^(; )?([a-z_]+) =(?: (.*))?$/.exec(line);
    if (kv && section) {
      const id = `${section}.${kv[2]}`;
      const c = comment.length ? comment.join(' ') : shared ?? '';
      if (!(id in keys)) keys[id] = { value: kv[3] ?? '', set: !kv[1], comment: c };
      shared = c;
      comment = [];
      continue;
    }
    if (line.startsWith(';')) { comment.push(line.replace(/^;\s?/, '')); shared = null; }
    else if (!/^\s/.test(line)) { comment = []; shared = null; } // a blank line ends a comment; continuation lines keep it
  }
  return keys;
}

/** The README's Configuration tables: {'gateway.listen': {def, bound}, ...}. */
function readmeRows() {
  const md = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const conf = md.slice(md.indexOf('\n## Configuration'), md.indexOf('\n## ', md.indexOf('\n## Configuration') + 1));
  const rows = {};
  let section = null;
  for (const line of conf.split('\n')) {
    const h = /^### `\[(gateway|auth|server)/.exec(line);
    if (h) section = h[1];
    const m = /^\| `([a-z_]+)` \| ([^|]*) \| ((?:[^|\\]|\\\|)*) \|(.*)\|\s*$/.exec(line);
    if (m && section) rows[`${section}.${m[1]}`] = { def: m[2], bound: m[3], text: m[4] };
  }
  return rows;
}

const UNITS = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };
/** "1,024–1 GiB" -> "1024..1073741824": the README's readable numbers, spelled as the page does. */
const normalize = (s) => s
  .replace(/(\d),(?=\d{3})/g, '$1')
  .replace(/(\d+) (KiB|MiB|GiB)/g, (_, n, u) => String(Number(n) * UNITS[u]))
  .replaceAll('–', '..');

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

test('mcp-gateway.ini(5) is what --man 5 writes, one entry per key of the option table', () => {
  const roff = page('mcp-gateway.ini.5');
  assert.equal(roff, run('--man', '5'), 'the built page is stale');
  const entries = iniEntries(roff);
  assert.ok(entries.length > 50, `only ${entries.length} entries parsed`);
  for (const e of entries) assert.ok(e.section, `${e.key} outside a section`);
});

test('the README tables agree with mcp-gateway.ini(5) on every key, default, bound and the facts its text states', () => {
  const rows = readmeRows();
  const entries = iniEntries(page('mcp-gateway.ini.5'));
  const problems = [];
  for (const e of entries) {
    const id = `${e.section}.${e.key}`;
    const row = rows[id];
    if (!row) { problems.push(`${id}: no README row`); continue; }
    if (e.def !== '(empty)' && e.def !== '(none)' && !row.def.includes(`\`${e.def}\``)) problems.push(`${id}: default ${e.def}, README says ${row.def}`);
    if (e.bound === null) continue;
    const enumValues = /^[a-z]+(, [a-z]+)+$/.test(e.bound) ? e.bound.split(', ') : null;
    if (enumValues) {
      for (const v of enumValues) if (!row.bound.includes(`\`${v}\``)) problems.push(`${id}: value ${v} not in README's ${row.bound}`);
      continue;
    }
    const [lo, hi] = /(\d+)\.\.(\d+)/.exec(e.bound).slice(1);
    const readme = normalize(row.bound);
    // A README bound may name another key for its upper end (pool_warm_children: 0–`pool_max_children`),
    // or, for a key that may be empty, the cross-check config.c adds, which the page's text states too
    // (admin_token: "empty or 32–256").
    const orEmpty = lo === '0' && new RegExp(`^empty or (\\d+\\.\\.${hi})\\b`).exec(readme);
    if (orEmpty && e.doc.includes(orEmpty[1])) continue;
    if (!readme.includes(`${lo}..${hi}`) && !new RegExp(`^${lo}\\.\\.\``).test(readme)) problems.push(`${id}: bound ${lo}..${hi}, README says ${row.bound}`);
  }
  for (const id of Object.keys(rows)) if (!entries.some((e) => `${e.section}.${e.key}` === id)) problems.push(`${id}: in the README, not in the page`);
  // The text: the facts the option table's text states are stated by the README's row too.
  for (const e of entries) {
    const row = rows[`${e.section}.${e.key}`];
    if (!row) continue;
    const said = `${row.def} ${row.bound} ${row.text}`.replace(/(\d),(\d{3})\b/g, '$1$2'); // 4,096 is 4096
    for (const fact of new Set(e.doc.match(FACTS) ?? [])) if (!said.includes(fact)) problems.push(`${e.section}.${e.key}: the page says ${fact}, the README's row does not`);
  }
  assert.deepEqual(problems, []);
});

test('mcp-gateway.ini(5) gives each key its whole text: a default, its bound, a number\'s unit, and what it does', () => {
  const problems = [];
  for (const e of iniEntries(page('mcp-gateway.ini.5'))) {
    const id = `${e.section}.${e.key}`;
    if (!e.def) problems.push(`${id}: no default`);
    if (!e.doc || e.doc.length < 12) problems.push(`${id}: no text (${e.doc})`);
    if (e.bound && /^\d+\.\.\d+$/.test(e.bound) && e.bound !== '0..1' && !e.unit) problems.push(`${id}: bound ${e.bound} without a unit`);
  }
  assert.deepEqual(problems, []);
});

const FACTS = /\d{4}-\d\d-\d\d|\b[a-z]+(?:_[a-z]+)+\b|\bSIG[A-Z0-9]+\b|\bRFC \d+\b|\b\d{2,}\b/g;
const UNIT_WORDS = { milliseconds: /\bmilliseconds\b/i, seconds: /\bseconds\b/i, bytes: /\bbytes\b/i, count: /\bcount\b/i, 'per second': /\bper second\b/i, 'per minute': /\bper minute\b/i };

test('conf/gateway.ini agrees with mcp-gateway.ini(5) on every key: its comment, default, bound and unit', () => {
  const conf = confKeys(fs.readFileSync(path.join(ROOT, 'conf/gateway.ini'), 'utf8'));
  const problems = [];
  for (const e of iniEntries(page('mcp-gateway.ini.5'))) {
    const id = `${e.section}.${e.key}`;
    const c = conf[id];
    if (!c) { problems.push(`${id}: not in conf/gateway.ini`); continue; }
    if (!c.comment.trim()) { problems.push(`${id}: no comment above it`); continue; }
    const def = e.def === '(empty)' || e.def === '(none)' ? '' : e.def;
    // A line that is set carries the default (the example server's command and path are the
    // file's own); a commented-out example with a default other than empty names that default.
    if (c.set && e.def !== '(none)' && c.value !== def) problems.push(`${id}: set to ${c.value}, the default is ${e.def}`);
    if (!c.set && def && !c.comment.includes(def)) problems.push(`${id}: commented out, its comment does not name the default ${def}`);
    if (e.bound) {
      const range = /(\d+)\.\.(\d+)/.exec(e.bound);
      if (range && !/^[a-z]+(, [a-z]+)+$/.test(e.bound)) {
        const [, lo, hi] = range;
        // The upper end may be another key (pool_warm_children: 0..pool_max_children).
        // A key that may also be empty states the bound it checks then (admin_token: 32..256).
        const orEmpty = lo === '0' && new RegExp(`\\bempty\\b.*\\b\\d+\\.\\.${hi}\\b`).test(c.comment);
        if (!orEmpty && !c.comment.includes(`${lo}..${hi}`) && !new RegExp(`\\b${lo}\\.\\.[a-z_]+`).test(c.comment)) problems.push(`${id}: bound ${lo}..${hi} not in its comment: ${c.comment}`);
      } else {
        for (const v of e.bound.split(', ')) if (!new RegExp(`\\b${v}\\b`).test(c.comment)) problems.push(`${id}: value ${v} not in its comment: ${c.comment}`);
      }
    }
    if (e.unit && !UNIT_WORDS[e.unit].test(c.comment)) problems.push(`${id}: unit ${e.unit} not in its comment: ${c.comment}`);
    // The text: the facts the page's text states (a status code, a signal, another key, a
    // revision, an RFC, a number) are stated by the comment too.
    for (const fact of new Set(e.doc.match(FACTS) ?? [])) if (!c.comment.includes(fact)) problems.push(`${id}: the page says ${fact}, its comment does not: ${c.comment}`);
  }
  for (const id of Object.keys(conf)) if (!iniEntries(page('mcp-gateway.ini.5')).some((e) => `${e.section}.${e.key}` === id)) problems.push(`${id}: in conf/gateway.ini, not in the option table`);
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgw-man-files-'));
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
