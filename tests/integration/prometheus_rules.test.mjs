// SPDX-License-Identifier: MIT
// deploy/prometheus: the rules file is valid (promtool check rules), its unit tests pass (promtool
// test rules), and every series it reads is one a real gateway exposes, in a scrape that promtool
// check metrics accepts. promtool comes from Debian's prometheus package (tests/deps.sh): missing
// is a failure, not a skip.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { request, withGateway } from '../lib/gw.mjs';

const dir = path.join(process.env.GW_SOURCE_ROOT, 'deploy', 'prometheus');
const RULES = 'mcp-gateway.rules.yml';
const TESTS = 'mcp-gateway.rules.test.yml';

function promtool(args, input) {
  const p = spawnSync('promtool', args, { cwd: dir, input, encoding: 'utf8' });
  assert.ok(!p.error, `promtool missing (apt-get install prometheus; tests/deps.sh): ${p.error?.message}`);
  assert.equal(p.status, 0, `promtool ${args.join(' ')}:\n${p.stdout}${p.stderr}`);
  return p.stdout;
}

test('promtool check rules accepts deploy/prometheus/mcp-gateway.rules.yml', () => {
  assert.match(promtool(['check', 'rules', RULES]), /SUCCESS/);
});

test('promtool test rules: the alerts and recording rules behave as their unit tests say', () => {
  assert.match(promtool(['test', 'rules', TESTS]), /SUCCESS/);
});

test('every series the rules read is exposed by the gateway; its scrape passes promtool check metrics', async () => {
  const rules = fs.readFileSync(path.join(dir, RULES), 'utf8');
  const exprs = [...rules.matchAll(/^\s+expr: (>\n(?:\s{10,}.*\n)+|.*\n)/gm)].map((m) => m[1]).join('\n');
  const used = new Set([...exprs.matchAll(/(?<![:\w])((?:mcpgw|process)_[a-z_]+)(?![:\w])/g)].map((m) => m[1]));
  assert.ok(used.size >= 8, `the rules read the gateway's series: ${[...used]}`);
  await withGateway({ servers: [{ name: 'example', path: '/mcp' }, { name: 'other', path: '/other' }] }, async (gw) => {
    const r = await request(`${gw.base}/metrics`, { method: 'GET' });
    const text = await r.done();
    assert.equal(r.status, 200, text);
    promtool(['check', 'metrics'], text);
    for (const name of used) {
      const re = new RegExp(`^${name}(\\{[^}]*server="other"[^}]*\\}|\\{[^}]*\\}| )`, 'm');
      assert.match(text, re, `${name} (read by the rules) is in /metrics`);
    }
  });
});
