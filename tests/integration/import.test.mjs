// SPDX-License-Identifier: MIT
// --import-mcp-json: the [server:NAME] sections printed for Claude Desktop, VS Code and Cursor
// files pass --check-config; a child started from them gets exactly the JSON's argv and env;
// env goes to new 0600 files with --env-dir (never over one that is there: a file, a link, a FIFO;
// inline with a warning without); a cwd too long for one INI line is refused; skipped entries are
// named with their reason; a bad file exits 1.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, GW_BIN, initSession, tmpdir, waitFor } from '../lib/gw.mjs';

/** Writes obj as FILE in dir and runs --import-mcp-json on it (plus extra arguments). */
function importJson(dir, file, obj, extra = []) {
  const f = path.join(dir, file);
  fs.writeFileSync(f, typeof obj === 'string' ? obj : JSON.stringify(obj, null, 2));
  return spawnSync(GW_BIN, ['--import-mcp-json', f, ...extra], { encoding: 'utf8' });
}

/** --check-config on [gateway] plus the printed sections: {status, stdout, stderr}. */
function checkConfig(dir, sections) {
  const conf = path.join(dir, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n${sections}`, { mode: 0o600 });
  return spawnSync(GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
}

// Arguments a shell or an INI file would mangle if they were not quoted right.
const HOSTILE = ['/Users/me/My Documents', "it's", 'a "quoted" word', 'back\\slash\\', '$HOME `id` $(id)',
  'semi ; colon;', '#hash', ';semi', '[server:x]', '', 'tab\there', ' lead and trail ', 'café'];

test('Claude Desktop: npx servers with path args and env keys', () => {
  const dir = tmpdir('mcpgw-import-');
  const r = importJson(dir, 'claude_desktop_config.json', {
    mcpServers: {
      filesystem: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/Users/me/Desktop', '/Users/me/My Documents'] },
      github: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'], env: { GITHUB_PERSONAL_ACCESS_TOKEN: 'ghp_secret value;#' } },
    },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^\[server:filesystem\]\npath = \/mcp\/filesystem\ncommand = npx -y @modelcontextprotocol\/server-filesystem \/Users\/me\/Desktop '\/Users\/me\/My Documents'$/m);
  assert.match(r.stdout, /^\[server:github\]\npath = \/mcp\/github\n/m);
  // A ';' after a blank would start an INI comment: such a word is written with backslashes.
  assert.match(r.stdout, /^env = GITHUB_PERSONAL_ACCESS_TOKEN=ghp_secret\\ value\\;\\#$/m);
  assert.match(r.stderr, /github: env written inline .* use --env-dir DIR/);
});

test('VS Code: stdio, an ${input:...} env and an http entry; the output passes --check-config', () => {
  const dir = tmpdir('mcpgw-import-');
  const r = importJson(dir, 'mcp.json', {
    inputs: [{ type: 'promptString', id: 'api-key', description: 'API key', password: true }],
    servers: {
      example: { type: 'stdio', command: EXAMPLE, args: HOSTILE, env: { LOG_LEVEL: 'debug' } },
      perplexity: { type: 'stdio', command: 'npx', args: ['-y', 'server-perplexity-ask'], env: { PERPLEXITY_API_KEY: '${input:api-key}' } },
      github: { type: 'http', url: 'https://api.githubcopilot.com/mcp/' },
    },
  }, ['--env-dir', dir]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^perplexity: skipped: env PERPLEXITY_API_KEY uses \$\{input:api-key\}, which cannot be resolved/m);
  assert.match(r.stderr, /^github: skipped: remote \(http\)/m);
  assert.doesNotMatch(r.stdout, /perplexity|github/);
  const envFile = path.join(fs.realpathSync(dir), 'example.env');
  assert.ok(r.stdout.includes(`env_file = ${envFile}\n`), r.stdout);
  assert.equal(fs.statSync(envFile).mode & 0o777, 0o600);
  assert.equal(fs.readFileSync(envFile, 'utf8'), 'LOG_LEVEL=debug\n');
  const c = checkConfig(dir, r.stdout);
  assert.equal(c.status, 0, c.stderr + c.stdout);
});

test('--env-dir never overwrites: an existing NAME.env (a file, a link, a FIFO) skips the entry with the reason, at once, and is left as it was', () => {
  const dir = fs.realpathSync(tmpdir('mcpgw-import-'));
  const theirs = path.join(dir, 'theirs');
  fs.writeFileSync(theirs, 'KEEP=me\n', { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'kept.env'), 'OLD=value\n', { mode: 0o600 });
  fs.symlinkSync(theirs, path.join(dir, 'linked.env'));
  const fifo = path.join(dir, 'piped.env');
  assert.equal(spawnSync('mkfifo', ['-m', '0600', fifo]).status, 0);
  const f = path.join(dir, 'mcp.json');
  const env = { TOKEN: 'new' };
  fs.writeFileSync(f, JSON.stringify({ mcpServers: { kept: { command: EXAMPLE, env }, linked: { command: EXAMPLE, env }, piped: { command: EXAMPLE, env }, fresh: { command: EXAMPLE, env } } }));
  // A writer's open() of a FIFO waits for a reader: the time bound catches a gateway that waits.
  const r = spawnSync(GW_BIN, ['--import-mcp-json', f, '--env-dir', dir], { encoding: 'utf8', timeout: 10000, killSignal: 'SIGKILL' });
  try { fs.closeSync(fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)); } catch { /* gone */ }
  assert.equal(r.error, undefined, `the import did not end: ${r.error?.code}`);
  assert.equal(r.status, 0, r.stderr);
  for (const name of ['kept', 'linked', 'piped']) {
    assert.ok(r.stderr.includes(`${name}: skipped: ${path.join(dir, `${name}.env`)} exists already, and is not overwritten`), r.stderr);
    assert.doesNotMatch(r.stdout, new RegExp(`\\[server:${name}\\]`));
  }
  assert.equal(fs.readFileSync(path.join(dir, 'kept.env'), 'utf8'), 'OLD=value\n');
  assert.equal(fs.readFileSync(theirs, 'utf8'), 'KEEP=me\n', 'the link\'s target is not written');
  assert.ok(fs.lstatSync(fifo).isFIFO());
  assert.ok(r.stdout.includes(`env_file = ${path.join(dir, 'fresh.env')}\n`), r.stdout);
  assert.equal(fs.readFileSync(path.join(dir, 'fresh.env'), 'utf8'), 'TOKEN=new\n');
  const c = checkConfig(dir, r.stdout);
  assert.equal(c.status, 0, c.stderr + c.stdout);
});

test('a cwd too long for one INI line skips its entry with the reason; the longest that fits is written and loads', () => {
  const dir = tmpdir('mcpgw-import-');
  // "cwd = " and the path on one line of at most 198 bytes (the INI reader's): 192 fit, 193 do not.
  const deep = (n) => `/${'d'.repeat(n - 1)}`;
  const r = importJson(dir, 'mcp.json', { mcpServers: { fits: { command: EXAMPLE, cwd: deep(192) }, long: { command: EXAMPLE, cwd: deep(193) } } });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^long: skipped: cwd is 193 bytes, longer than the 192 an INI line holds after "cwd = "/m);
  assert.doesNotMatch(r.stdout, /\[server:long\]/);
  assert.ok(r.stdout.includes(`cwd = ${deep(192)}\n`), r.stdout);
  const c = checkConfig(dir, r.stdout);
  // The directory does not exist: a warning about it, not a refusal of the line.
  assert.doesNotMatch(c.stderr + c.stdout, /line too long/);
});

test('Cursor: a url entry is skipped, disabled and unknown-field entries named, odd names renamed', () => {
  const dir = tmpdir('mcpgw-import-');
  const r = importJson(dir, 'mcp.json', {
    mcpServers: {
      'my tools': { command: '/bin/echo', args: ['hi'] },
      remote: { url: 'https://mcp.example.com/sse' },
      off: { command: '/bin/echo', disabled: true },
      odd: { command: '/bin/echo', autoApprove: ['x'] },
    },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^my tools: imported as \[server:my-tools\]/m);
  assert.match(r.stderr, /^remote: skipped: remote \(url\)/m);
  assert.match(r.stderr, /^off: skipped: disabled/m);
  assert.match(r.stderr, /^odd: skipped: unknown field "autoApprove"/m);
  assert.equal(r.stdout, '\n[server:my-tools]\npath = /mcp/my-tools\ncommand = /bin/echo hi\n');
  const c = checkConfig(dir, r.stdout);
  assert.equal(c.status, 0, c.stderr + c.stdout);
});

test('a bad file, or one with nothing to import, exits 1', () => {
  const dir = tmpdir('mcpgw-import-');
  for (const bad of ['not json', '[]', '{"mcpServers": []}', '{"other": {}}', '{"mcpServers": {"r": {"url": "https://x"}}}']) {
    const r = importJson(dir, 'bad.json', bad);
    assert.equal(r.status, 1, `${bad}: ${r.stderr}`);
    assert.equal(r.stdout, '');
  }
  const r = spawnSync(GW_BIN, ['--import-mcp-json', path.join(dir, 'missing.json')], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /missing\.json: No such file/);
});

test('a child started from the imported section gets exactly the JSON argv and env', async () => {
  const dir = tmpdir('mcpgw-import-');
  const out = path.join(dir, 'argv');
  // The child records its argv (NUL separated) and one env value, then becomes the example server.
  // (A word must fit on one INI line: the paths come through env.)
  const script = `printf '%s\\0' "$@" > "$OUT"; printf '%s' "$SECRET" > "$OUT.env"; exec "$EXAMPLE"`;
  const secret = "s3cr;et 'x' \"y\" $z #w";
  const env = { SECRET: secret, OUT: out, EXAMPLE };
  const r = importJson(dir, 'claude.json', { mcpServers: { rec: { command: '/bin/sh', args: ['-c', script, 'sh', ...HOSTILE], env } } }, ['--env-dir', dir]);
  assert.equal(r.status, 0, r.stderr);
  const conf = path.join(dir, 'gateway.ini');
  fs.writeFileSync(conf, `[gateway]\nlisten = 127.0.0.1:0\n${r.stdout}`, { mode: 0o600 });
  const proc = spawn(GW_BIN, ['--config', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  try {
    const m = await waitFor(() => /listening on (\S+):(\d+)/.exec(log) || (proc.exitCode !== null && 'exit'), 5000, 'gateway to listen');
    assert.notEqual(m, 'exit', log);
    await initSession({ url: `http://${m[1]}:${m[2]}/mcp/rec`, logs: () => log });
    await waitFor(() => fs.existsSync(`${out}.env`), 5000, 'child to record its argv');
    assert.deepEqual(fs.readFileSync(out, 'utf8').split('\0').slice(0, -1), HOSTILE);
    assert.equal(fs.readFileSync(`${out}.env`, 'utf8'), secret);
  } finally {
    proc.kill('SIGTERM');
    await waitFor(() => proc.exitCode !== null || proc.signalCode !== null, 15000, 'gateway to stop');
  }
});
