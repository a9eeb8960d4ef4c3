// SPDX-License-Identifier: MIT
// RFC 8693 token exchange for a session's child (token_exchange = on), against the real
// authorization server (tests/lib/oidc.mjs: oidc-provider with a token-exchange grant registered
// through its own API for extension grants). Two principals each read back, through the example
// server's env tool, only their own exchanged token, in the variable and in the file the
// variable + _FILE names (read by the child); the token is one the authorization server issued
// for the downstream resource and names the subject; the file is rewritten before expiry; a
// revoked subject token ends its session at the next renewal with a clear error (the stream's
// notification, the audit record), unless the client brought a newer token; a refused exchange is
// 403, a useless answer 502, an unreachable or silent token endpoint 503, within the timeout; the
// tokens appear nowhere (log, /admin, /metrics, --print-config, audit); the session's directory
// goes with it. Stateless requests run on their principal's own pool children, each started with
// that principal's exchanged token (variable and file, renewed before expiry); a refused exchange
// is 403 there too, and a revoked subject token stops that principal's children at the renewal.
// With sandbox = on, each boxed child (a session's, a principal's pool child) reads its token from
// the variable and from its file, sees the file renewed, and finds another principal's file
// absent from its view (the same read succeeds with the box off); a root gateway's file is open to
// a group of its owner's children alone.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { checkConfigText, EXAMPLE, GW_BIN, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { bearerInit, bearerPost, envOf } from '../lib/bearer.mjs';
import { startOidc } from '../lib/oidc.mjs';
import { V, mpost, msgsOf } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const PUBLIC_URL = 'https://mcp.test.example';
const API = 'https://api.test.example';
const ADMIN = 'a'.repeat(40);
const claimsOf = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url'));
const ROOT = process.getuid() === 0;
// The groups a root gateway gives its owners' token directories (src/core/sandbox.c).
const OWNER_GID_BASE = 0x7fff0000;

/** The env tool's text in a session, an error result's too: {text, isError}. */
async function envTool(gw, token, sid, args) {
  const r = await bearerPost(gw, '/mcp', rpc('tools/call', { name: 'env', arguments: args }), token, sid);
  const body = await r.done(scaled(20000));
  assert.equal(r.status, 200, body);
  const ans = r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
  assert.ok(ans?.result, body);
  return { text: ans.result.content[0].text, isError: !!ans.result.isError };
}

/** The same for a stateless call of token's principal (on its pool's child). */
async function slTool(gw, token, args, id = 1) {
  const msg = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'env', arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } };
  const r = await mpost(gw, msg, { path: '/mcp', bearer: token });
  const body = await r.done(scaled(20000));
  assert.equal(r.status, 200, body);
  const ans = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
  assert.ok(ans?.result, body);
  return { text: ans.result.content[0].text, isError: !!ans.result.isError };
}

/** A stateless env call of token's principal: the variable's value (or its file's); {status, body} when not 200. */
async function slEnv(gw, token, name, file = false, id = 1) {
  const msg = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'env', arguments: { name, file }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } };
  const r = await mpost(gw, msg, { path: '/mcp', bearer: token });
  const body = await r.done(scaled(20000));
  if (r.status !== 200) return { status: r.status, body, headers: r.headers, error: /^application\/json/.test(r.headers['content-type'] ?? '') ? JSON.parse(body).error : undefined };
  const ans = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
  if (ans?.error) return { status: 200, body, error: ans.error };
  return ans.result.isError ? null : ans.result.content[0].text;
}

async function admin(gw, p) {
  const r = await request(`${gw.base}${p}`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  return { status: r.status, text: await r.done() };
}

async function assertNowhere(gw, values, audit) {
  const view = await admin(gw, '/admin/inflight');
  const sessions = await admin(gw, '/admin/sessions');
  const metrics = await admin(gw, '/metrics');
  const printed = spawnSync(GW_BIN, ['--print-config', '--config', gw.conf], { encoding: 'utf8', timeout: 10000 });
  assert.equal(printed.status, 0, printed.stderr);
  const auditText = audit ? fs.readFileSync(audit, 'utf8') : '';
  for (const v of values) {
    assert.ok(!gw.logs().includes(v), 'a token in the log');
    assert.ok(!view.text.includes(v) && !sessions.text.includes(v), 'a token in /admin');
    assert.ok(!metrics.text.includes(v), 'a token in /metrics');
    assert.ok(!printed.stdout.includes(v), 'a token in --print-config');
    assert.ok(!auditText.includes(v), 'a token in the audit trail');
  }
  return printed.stdout;
}

/** A gateway in front of op with one token_exchange server at /mcp (more keys in extra). */
async function gateway(op, dir, { intro = false, extra = '', audit, resource = API, command, tmp = dir } = {}) {
  const secretFile = path.join(dir, 'exchange.secret');
  fs.writeFileSync(secretFile, `${op.exchangeClient.secret}\n`, { mode: 0o600 });
  const auth = { mode: 'jwt', public_url: PUBLIC_URL, issuer: op.issuer, tls_ca_file: op.caFile };
  if (intro) auth.introspection_credentials_file = op.writeCredentials();
  const server = [
    'token_exchange = on',
    `token_exchange_resource = ${resource}`,
    'token_exchange_scopes = repo, read:org',
    'token_exchange_env = DOWN_TOKEN',
    `token_exchange_client_id = ${op.exchangeClient.id}`,
    `token_exchange_client_secret_file = ${secretFile}`,
    extra,
  ].join('\n');
  return startGateway({
    gateway: { admin_token: ADMIN, ...(audit ? { audit_log: audit } : {}) },
    auth,
    env: { TMPDIR: tmp },
    servers: [{ name: 'gh', path: '/mcp', extra: server, ...(command ? { command } : {}) }],
  });
}

/** A session of who's token: the init's answer s, and its child's variable (env), file as read (file) and file's path (where). */
async function sessionToken(gw, token, who) {
  const s = await bearerInit(gw, '/mcp', token);
  assert.equal(s.status, 200, `${who}: ${s.body}`);
  const env = await envOf(gw, '/mcp', token, s.sid, 'DOWN_TOKEN');
  const file = await envOf(gw, '/mcp', token, s.sid, 'DOWN_TOKEN_FILE', true);
  const where = await envOf(gw, '/mcp', token, s.sid, 'DOWN_TOKEN_FILE');
  return { s, env, file, where };
}

/** The same for who's pool child (stateless): its variable, its file as read, its file's path. */
async function poolToken(gw, token, who) {
  const env = await slEnv(gw, token, 'DOWN_TOKEN');
  assert.equal(typeof env, 'string', `${who}: ${JSON.stringify(env)}`);
  const file = await slEnv(gw, token, 'DOWN_TOKEN_FILE', true);
  const where = await slEnv(gw, token, 'DOWN_TOKEN_FILE');
  return { env, file, where };
}

const tokenDirs = (dir) => fs.readdirSync(dir).filter((n) => n.startsWith('mcpgw-token-'));

test('token exchange: each principal\'s child gets its own exchanged token, in its environment and its 0600 file, renewed before expiry', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 4 } } });
  const dir = tmpdir('mcpgw-xchg-');
  const audit = path.join(dir, 'audit.log');
  let gw;
  try {
    gw = await gateway(op, dir, { extra: 'token_exchange_renew_before_s = 2', audit });
    const resource = `${PUBLIC_URL}/mcp`;
    const seen = {};
    for (const who of ['alice', 'bob']) {
      const token = await op.token({ resource, format: 'jwt', client: who });
      const { s, env, file, where } = await sessionToken(gw, token, who);
      assert.equal(file, env, `${who}: the file holds the token the environment has`);
      const c = claimsOf(env);
      assert.equal(c.aud, API, 'meant for the downstream API');
      assert.equal(c.subject, who, 'naming the subject');
      assert.equal(c.act.sub, 'mcp-gw-exchanger');
      assert.equal(c.scope, 'repo read:org');
      assert.notEqual(env, token, 'not the client\'s own token');
      const st = fs.statSync(where);
      assert.equal(st.mode & 0o777, 0o600, 'the file: 0600');
      assert.equal(fs.statSync(path.dirname(where)).mode & 0o777, 0o700, 'its directory: 0700');
      assert.equal(path.dirname(path.dirname(where)), dir, 'under TMPDIR');
      seen[who] = { token, sid: s.sid, env, where };
    }
    assert.notEqual(seen.alice.where, seen.bob.where, 'a directory per session');
    assert.notEqual(seen.alice.env, seen.bob.env);
    // Unboxed, a child reads what its uid may: bob's file too (sandbox = on hides it, below).
    const peek = await envTool(gw, seen.alice.token, seen.alice.sid, { path: seen.bob.where, file: true });
    assert.deepEqual(peek, { text: seen.bob.env, isError: false }, 'unboxed: another session\'s file is readable');
    // bob's session is not alice's: the same 404 as an unknown one.
    const cross = await envOf(gw, '/mcp', seen.bob.token, seen.alice.sid, 'DOWN_TOKEN');
    assert.equal(cross.status, 404, cross.body);
    // Renewed before expiry (4 s, renewed 2 s before): the file changes, still alice's, still valid.
    const renewed = await waitFor(async () => {
      const f = await envOf(gw, '/mcp', seen.alice.token, seen.alice.sid, 'DOWN_TOKEN_FILE', true);
      return f !== seen.alice.env ? f : null;
    }, scaled(15000), 'the token file rewritten');
    const rc = claimsOf(renewed);
    assert.equal(rc.subject, 'alice');
    assert.ok(rc.exp > claimsOf(seen.alice.env).exp, 'a later expiry');
    assert.ok(rc.exp * 1000 > Date.now(), 'rewritten before the old one expired, and valid');
    assert.equal(await envOf(gw, '/mcp', seen.alice.token, seen.alice.sid, 'DOWN_TOKEN'), seen.alice.env, 'the environment keeps the first');
    await gw.waitLog(/token for \[server:gh\] renewed/);
    // DELETE: the directory goes with the session.
    const del = await request(`${gw.base}/mcp`, { method: 'DELETE', headers: { Authorization: `Bearer ${seen.bob.token}`, 'Mcp-Session-Id': seen.bob.sid } });
    await del.done();
    assert.equal(del.status, 200);
    await waitFor(() => !fs.existsSync(path.dirname(seen.bob.where)), scaled(5000), 'bob\'s directory removed');
    const printed = await assertNowhere(gw, [seen.alice.env, seen.bob.env, renewed, op.exchangeClient.secret], audit);
    assert.match(printed, /^token_exchange = on$/m);
    await gw.stop();
    gw = null;
    assert.deepEqual(tokenDirs(dir), [], 'no directory left after a shutdown');
  } finally {
    await gw?.stop();
    await op.stop();
  }
});

test('token exchange, stateless: each principal\'s pool child gets its own exchanged token, in its environment and its 0600 file, renewed before expiry', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 4 } } });
  const dir = tmpdir('mcpgw-xchg-sl-');
  const audit = path.join(dir, 'audit.log');
  let gw;
  try {
    gw = await gateway(op, dir, { extra: 'token_exchange_renew_before_s = 2\npool_max_children = 4', audit });
    const resource = `${PUBLIC_URL}/mcp`;
    const seen = {};
    for (const who of ['alice', 'bob']) {
      const token = await op.token({ resource, format: 'jwt', client: who });
      const { env, file, where } = await poolToken(gw, token, who);
      assert.equal(file, env, `${who}: the file holds the token the environment has`);
      const c = claimsOf(env);
      assert.equal(c.aud, API, 'meant for the downstream API');
      assert.equal(c.subject, who, 'naming the subject: the principal\'s own child');
      assert.notEqual(env, token, 'not the client\'s own token');
      assert.equal(fs.statSync(where).mode & 0o777, 0o600, 'the file: 0600');
      assert.equal(fs.statSync(path.dirname(where)).mode & 0o777, 0o700, 'its directory: 0700');
      assert.equal(path.dirname(path.dirname(where)), dir, 'under TMPDIR');
      seen[who] = { token, env, where };
    }
    assert.notEqual(seen.alice.where, seen.bob.where, 'a directory per principal');
    // Renewed before expiry (4 s, renewed 2 s before): alice's file changes, still hers, still valid.
    const renewed = await waitFor(async () => {
      const f = await slEnv(gw, seen.alice.token, 'DOWN_TOKEN_FILE', true);
      return typeof f === 'string' && f !== seen.alice.env ? f : null;
    }, scaled(15000), 'the pool\'s token file rewritten');
    const rc = claimsOf(renewed);
    assert.equal(rc.subject, 'alice');
    assert.ok(rc.exp > claimsOf(seen.alice.env).exp, 'a later expiry');
    assert.ok(rc.exp * 1000 > Date.now(), 'rewritten before the old one expired, and valid');
    // Each principal's calls keep to their own children.
    for (let i = 0; i < 6; i++) {
      const who = i % 2 ? 'bob' : 'alice';
      const f = await slEnv(gw, seen[who].token, 'DOWN_TOKEN_FILE', true, 10 + i);
      assert.equal(claimsOf(f).subject, who);
    }
    await assertNowhere(gw, [seen.alice.env, seen.bob.env, renewed, op.exchangeClient.secret], audit);
    await gw.stop();
    gw = null;
    assert.deepEqual(tokenDirs(dir), [], 'no directory left after a shutdown');
  } finally {
    await gw?.stop();
    await op.stop();
  }
});

/**
 * The host's view of a boxed child's token file: a root gateway opens it to a group of its owner's
 * own (0750 and 0640, owned by root); an ordinary one's stays 0700 and 0600. The group, or null.
 */
function boxedModes(where) {
  const st = fs.statSync(where);
  const dst = fs.statSync(path.dirname(where));
  if (!ROOT) {
    assert.equal(st.mode & 0o777, 0o600, 'the file: 0600');
    assert.equal(dst.mode & 0o777, 0o700, 'its directory: 0700');
    return null;
  }
  assert.equal(st.mode & 0o777, 0o640, 'the file: 0640, for its children\'s group alone');
  assert.equal(dst.mode & 0o777, 0o750, 'its directory: 0750');
  assert.equal(st.uid, 0);
  assert.equal(st.gid, dst.gid);
  assert.ok(st.gid >= OWNER_GID_BASE, `a group of the reserved range: ${st.gid}`);
  return st.gid;
}

/**
 * A boxed test against an authorization server for alice and bob (JWTs for API, of 4 s):
 * body(op, dir, box) starts box.gw and returns the directory its tokens are kept in; then the
 * gateway stops (a clean exit) and no token directory may be left there. The gateway's log tail
 * is printed when it fails.
 */
async function boxedExchange(prefix, body) {
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 4 } } });
  const dir = tmpdir(prefix);
  const box = { gw: null };
  try {
    const tokensIn = await body(op, dir, box);
    await box.gw.stop();
    box.gw = null;
    assert.deepEqual(tokenDirs(tokensIn), [], 'no directory left after a shutdown');
  } catch (e) {
    if (box.gw) console.log(`gateway log (tail):\n${box.gw.logs().slice(-4000)}`);
    throw e;
  } finally {
    await box.gw?.stop({ expect: null });
    await op.stop();
  }
}

/** Neither boxed child sees the other principal's file nor its directory; read(me, path, id) is the env tool's {text, isError}. */
async function assertApart(seen, read) {
  for (const [me, other] of [['alice', 'bob'], ['bob', 'alice']]) {
    assert.deepEqual(await read(me, seen[other].where, 20), { text: '(unreadable: ENOENT)', isError: true }, `${me}'s child cannot see ${other}'s file`);
    assert.deepEqual(await read(me, path.dirname(seen[other].where), 21), { text: '(unreadable: ENOENT)', isError: true }, `nor ${other}'s directory`);
  }
}

/** Alice's renewed token, once readFile() (her boxed child reading its file) returns another than her first; asserted hers, later, in the same group. */
async function renewedInBox(alice, readFile, what) {
  const renewed = await waitFor(async () => {
    const f = await readFile();
    return typeof f === 'string' && f !== alice.env ? f : null;
  }, scaled(15000), what);
  assert.equal(claimsOf(renewed).subject, 'alice');
  assert.ok(claimsOf(renewed).exp > claimsOf(alice.env).exp, 'a later expiry');
  assert.equal(boxedModes(alice.where), alice.gid, 'the renewed file keeps its group');
  return renewed;
}

test('token exchange, sandbox = on: a boxed session child reads its own token (variable and file), sees it renewed, and cannot see another session\'s', () => boxedExchange('mcpgw-xchg-box-', async (op, dir, box) => {
  fs.chmodSync(dir, 0o755); // bound into the box: a root gateway's child runs as a uid of its own
  fs.writeFileSync(path.join(dir, 'public.txt'), 'public\n', { mode: 0o644 });
  // Where the tokens are kept lies in the bound directory: the box covers it, and shows each
  // child its own token's directory beneath the cover alone.
  const run = path.join(dir, 'run');
  fs.mkdirSync(run, { mode: 0o700 });
  const audit = path.join(dir, 'audit.log');
  const gw = box.gw = await gateway(op, dir, {
    tmp: run, command: EXAMPLE, audit,
    extra: ['token_exchange_renew_before_s = 2', 'sandbox = on', 'sandbox_network = none', `sandbox_read_only_paths = ${dir}`].join('\n'),
  });
  await gw.waitLog(/\[server:gh\] sandbox: namespaces/);
  const resource = `${PUBLIC_URL}/mcp`;
  const seen = {};
  for (const who of ['alice', 'bob']) {
    const token = await op.token({ resource, format: 'jwt', client: who });
    const { s, env, file, where } = await sessionToken(gw, token, who);
    assert.equal(typeof env, 'string', `${who}: ${JSON.stringify(env)}`);
    assert.equal(file, env, `${who}: the boxed child reads its file`);
    assert.equal(claimsOf(env).subject, who);
    assert.equal(path.dirname(path.dirname(where)), run, 'under TMPDIR');
    seen[who] = { token, sid: s.sid, env, where, gid: boxedModes(where) };
  }
  await gw.waitLog(/child stderr: mcp-example-server: ready \(pid 1\)/); // boxed: its PID namespace's first
  if (ROOT) assert.notEqual(seen.alice.gid, seen.bob.gid, 'a group per session');
  const read = (who, p) => envTool(gw, seen[who].token, seen[who].sid, { path: p, file: true });
  assert.deepEqual(await read('alice', path.join(dir, 'public.txt')), { text: 'public\n', isError: false }, 'the bound directory is in the view');
  await assertApart(seen, read);
  const secret = await read('alice', path.join(dir, 'exchange.secret'));
  assert.ok(!secret.text.includes(op.exchangeClient.secret), `the exchange client's secret is hidden: ${secret.text}`);
  // Renewed by rename into the bound directory: the boxed child reads the new file.
  const renewed = await renewedInBox(seen.alice, () => envOf(gw, '/mcp', seen.alice.token, seen.alice.sid, 'DOWN_TOKEN_FILE', true), 'the renewed file, read in the box');
  assert.equal(await envOf(gw, '/mcp', seen.alice.token, seen.alice.sid, 'DOWN_TOKEN'), seen.alice.env, 'the environment keeps the first');
  const del = await request(`${gw.base}/mcp`, { method: 'DELETE', headers: { Authorization: `Bearer ${seen.bob.token}`, 'Mcp-Session-Id': seen.bob.sid } });
  await del.done();
  assert.equal(del.status, 200);
  await waitFor(() => !fs.existsSync(path.dirname(seen.bob.where)), scaled(5000), 'bob\'s directory removed');
  await assertNowhere(gw, [seen.alice.env, seen.bob.env, renewed, op.exchangeClient.secret], audit);
  return run;
}));

test('token exchange, sandbox = on, stateless: each principal\'s boxed pool child reads its own token, sees it renewed, and cannot see another principal\'s', () => boxedExchange('mcpgw-xchg-slbox-', async (op, dir, box) => {
  const gw = box.gw = await gateway(op, dir, { command: EXAMPLE, extra: ['token_exchange_renew_before_s = 2', 'pool_max_children = 4', 'sandbox = on', 'sandbox_network = none'].join('\n') });
  const resource = `${PUBLIC_URL}/mcp`;
  const seen = {};
  for (const who of ['alice', 'bob']) {
    const token = await op.token({ resource, format: 'jwt', client: who });
    const { env, file, where } = await poolToken(gw, token, who);
    assert.equal(file, env, `${who}: the boxed pool child reads its file`);
    assert.equal(claimsOf(env).subject, who, 'the principal\'s own child');
    assert.equal(path.dirname(path.dirname(where)), dir, 'under TMPDIR');
    seen[who] = { token, env, where, gid: boxedModes(where) };
  }
  await gw.waitLog(/pool:gh#\d+ child stderr: mcp-example-server: ready \(pid 1\)/);
  if (ROOT) assert.notEqual(seen.alice.gid, seen.bob.gid, 'a group per principal');
  await assertApart(seen, (who, p, id) => slTool(gw, seen[who].token, { path: p, file: true }, id));
  const renewed = await renewedInBox(seen.alice, () => slEnv(gw, seen.alice.token, 'DOWN_TOKEN_FILE', true), 'the pool\'s renewed file, read in the box');
  for (let i = 0; i < 4; i++) {
    const who = i % 2 ? 'bob' : 'alice';
    assert.equal(claimsOf(await slEnv(gw, seen[who].token, 'DOWN_TOKEN_FILE', true, 30 + i)).subject, who);
  }
  await assertNowhere(gw, [seen.alice.env, seen.bob.env, renewed, op.exchangeClient.secret]);
  return dir;
}));

test('token exchange, stateless: a revoked subject token stops that principal\'s pool children at the renewal, with a clear error and an audit record', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 3 } } });
  const dir = tmpdir('mcpgw-xchg-slrev-');
  const audit = path.join(dir, 'audit.log');
  let gw;
  try {
    gw = await gateway(op, dir, { intro: true, extra: 'token_exchange_renew_before_s = 2', audit });
    const resource = `${PUBLIC_URL}/mcp`;
    const b1 = await op.token({ resource, format: 'opaque', client: 'bob' });
    assert.equal(claimsOf(await slEnv(gw, b1, 'DOWN_TOKEN')).subject, 'bob');
    const a1 = await op.token({ resource, format: 'opaque', client: 'alice' });
    assert.equal(claimsOf(await slEnv(gw, a1, 'DOWN_TOKEN')).subject, 'alice');
    const where = await slEnv(gw, a1, 'DOWN_TOKEN_FILE');
    // A call in flight on alice's child when her token is revoked: it ends with the reason.
    const slow = mpost(gw, { jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'slow', arguments: { steps: 200, interval_ms: 50 }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } }, { path: '/mcp', bearer: a1 });
    await waitFor(() => gw.childMessages().some((m) => m.id !== undefined && m.params?.name === 'slow'), scaled(5000), 'the slow call at alice\'s child');
    assert.equal(await op.revoke(a1), 200);
    await gw.waitLog(/pool gh: client_id:alice's children stop: the token for \[server:gh\] could not be renewed: the authorization server refused the exchange \(invalid_grant\)/, scaled(15000));
    const sr = await slow;
    await sr.done(scaled(15000));
    const ans = msgsOf(sr).find((j) => j && ('result' in j || 'error' in j));
    assert.ok(ans?.error, sr.text());
    assert.match(ans.error.message, /could not be renewed: the authorization server refused the exchange \(invalid_grant\)/);
    await waitFor(() => !fs.existsSync(path.dirname(where)), scaled(5000), 'alice\'s pool directory removed');
    const records = fs.readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const rec = records.find((r) => r.event === 'token_exchange');
    assert.ok(rec, 'an audit record says why');
    assert.equal(rec.principal, 'client_id:alice', JSON.stringify(rec));
    assert.match(JSON.stringify(rec), /could not be renewed: the authorization server refused the exchange \(invalid_grant\)/);
    // Her revoked token is refused (401, or 403 by the exchange while its introspection is cached);
    // bob's pool lives on, renewed.
    const after = await slEnv(gw, a1, 'DOWN_TOKEN');
    assert.ok(after.status === 401 || after.status === 403, JSON.stringify(after));
    const bobFirst = await slEnv(gw, b1, 'DOWN_TOKEN');
    await waitFor(async () => {
      const f = await slEnv(gw, b1, 'DOWN_TOKEN_FILE', true);
      return typeof f === 'string' && f !== bobFirst && claimsOf(f).subject === 'bob';
    }, scaled(15000), 'bob\'s token renewed');
  } finally {
    await gw?.stop();
    await op.stop();
  }
});

test('token exchange: a revoked subject token ends its session at the next renewal, with a clear error; a newer token keeps it', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 3 } } });
  const dir = tmpdir('mcpgw-xchg-rev-');
  const audit = path.join(dir, 'audit.log');
  let gw;
  try {
    gw = await gateway(op, dir, { intro: true, extra: 'token_exchange_renew_before_s = 2', audit });
    const resource = `${PUBLIC_URL}/mcp`;
    // bob refreshes his token before the first is revoked: renewals use the newest one seen.
    const b1 = await op.token({ resource, format: 'opaque', client: 'bob' });
    const bs = await bearerInit(gw, '/mcp', b1);
    assert.equal(bs.status, 200, bs.body);
    const b2 = await op.token({ resource, format: 'opaque', client: 'bob' });
    assert.ok(claimsOf(await envOf(gw, '/mcp', b2, bs.sid, 'DOWN_TOKEN')).subject === 'bob');
    assert.equal(await op.revoke(b1), 200);
    const a1 = await op.token({ resource, format: 'opaque', client: 'alice' });
    const as = await bearerInit(gw, '/mcp', a1);
    assert.equal(as.status, 200, as.body);
    const first = await envOf(gw, '/mcp', a1, as.sid, 'DOWN_TOKEN_FILE', true);
    const where = await envOf(gw, '/mcp', a1, as.sid, 'DOWN_TOKEN_FILE');
    const get = await request(`${gw.base}/mcp`, { method: 'GET', headers: { Accept: 'text/event-stream', Authorization: `Bearer ${a1}`, 'Mcp-Session-Id': as.sid, 'MCP-Protocol-Version': '2025-06-18' } });
    assert.equal(get.status, 200);
    assert.equal(await op.revoke(a1), 200);
    await get.done(scaled(15000)); // the session ended: its stream too
    const note = get.events().map((e) => e.json).find((j) => j?.method === 'notifications/message');
    assert.ok(note, get.text());
    assert.equal(note.params.level, 'error');
    assert.match(note.params.data, /token for \[server:gh\] could not be renewed: the authorization server refused the exchange \(invalid_grant\)/);
    await waitFor(() => !fs.existsSync(path.dirname(where)), scaled(5000), 'the directory removed');
    const after = await envOf(gw, '/mcp', a1, as.sid, 'DOWN_TOKEN');
    assert.ok(after.status === 404 || after.status === 401, JSON.stringify(after));
    const records = fs.readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const rec = records.find((r) => r.event === 'token_exchange');
    assert.ok(rec, 'an audit record says why');
    assert.match(JSON.stringify(rec), /could not be renewed: the authorization server refused the exchange \(invalid_grant\)/);
    assert.ok(records.some((r) => r.event === 'session_end' && JSON.stringify(r).includes('token_renewal')), 'session_end: token_renewal');
    // bob's session lives on: renewed with b2 after b1 was revoked.
    await waitFor(async () => (await envOf(gw, '/mcp', b2, bs.sid, 'DOWN_TOKEN_FILE', true)) !== null, scaled(5000));
    const bobNow = await envOf(gw, '/mcp', b2, bs.sid, 'DOWN_TOKEN_FILE', true);
    assert.equal(typeof bobNow, 'string', JSON.stringify(bobNow));
    await waitFor(async () => {
      const f = await envOf(gw, '/mcp', b2, bs.sid, 'DOWN_TOKEN_FILE', true);
      return typeof f === 'string' && claimsOf(f).exp * 1000 > Date.now() + 500 && f !== bobNow;
    }, scaled(15000), 'bob\'s token renewed after b1 was revoked');
    await assertNowhere(gw, [first], audit);
  } finally {
    await gw?.stop();
    await op.stop();
  }
});

test('token exchange at start: refused 403, a useless answer 502, unreachable or silent 503 within the timeout; no child', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 60 } } });
  const dir = tmpdir('mcpgw-xchg-fail-');
  const audit = path.join(dir, 'audit.log');
  const gws = [];
  try {
    const resource = `${PUBLIC_URL}/mcp`;
    const token = await op.token({ resource, format: 'jwt', client: 'alice' });
    const plain = await gateway(op, dir, { audit });
    gws.push(plain);
    const ok = await bearerInit(plain, '/mcp', token);
    assert.equal(ok.status, 200, `a known resource: ${ok.body}`);
    // Refused: the authorization server knows no such resource (400 invalid_target).
    const unknown = await gateway(op, dir, { resource: `${API}/unknown` });
    gws.push(unknown);
    const r403 = await bearerInit(unknown, '/mcp', token);
    assert.equal(r403.status, 403, r403.body);
    assert.equal(r403.error.code, -32600);
    assert.match(r403.error.message, /token exchange for this server failed: the authorization server refused the exchange \(invalid_target\)/);
    assert.deepEqual(unknown.childPids(), [], 'no child for a refused session');
    // A stateless request: the same 403, and no pool child starts without its token.
    const sl403 = await slEnv(unknown, token, 'DOWN_TOKEN');
    assert.equal(sl403.status, 403, JSON.stringify(sl403));
    assert.equal(sl403.error.code, -32600);
    assert.match(sl403.error.message, /token exchange for this server failed: the authorization server refused the exchange \(invalid_target\)/);
    assert.deepEqual(unknown.childPids(), [], 'no pool child for a refused exchange');
    // The 2024-11-05 transport (GET PATH/sse) exchanges first too: refused, or its session opens.
    const sse = (g) => request(`${g.base}/mcp/sse`, { method: 'GET', headers: { Accept: 'text/event-stream', Authorization: `Bearer ${token}` } });
    const s403 = await sse(unknown);
    const s403Body = await s403.done();
    assert.equal(s403.status, 403, s403Body);
    assert.match(JSON.parse(s403Body).error.message, /refused the exchange \(invalid_target\)/);
    const s200 = await sse(plain);
    assert.equal(s200.status, 200);
    const ep = await waitFor(() => s200.completeEvents().find((e) => e.event === 'endpoint'), scaled(5000), 'the endpoint event');
    assert.match(ep.data, /^messages\?sessionId=/);
    s200.req.destroy();
    // A useless answer: 502.
    op.fail('token', 500);
    const r502 = await bearerInit(plain, '/mcp', token);
    assert.equal(r502.status, 502, r502.body);
    assert.equal(r502.error.code, -32603);
    assert.match(r502.error.message, /the token endpoint answered HTTP status 500/);
    const sl502 = await slEnv(plain, token, 'DOWN_TOKEN');
    assert.equal(sl502.status, 502, JSON.stringify(sl502));
    assert.equal(sl502.error.code, -32603);
    op.fail('token', null);
    // Silent: no answer within token_exchange_timeout_ms: 503 with Retry-After, no hang.
    op.delay('token', scaled(20000));
    const t0 = Date.now();
    const r503 = await bearerInit(plain, '/mcp', token);
    assert.equal(r503.status, 503, r503.body);
    assert.equal(r503.headers['retry-after'], '1');
    assert.match(r503.error.message, /the token endpoint did not answer/);
    assert.ok(Date.now() - t0 < scaled(5000) + 5000, `bounded by the timeout: ${Date.now() - t0} ms`);
    const t1 = Date.now();
    const sl503 = await slEnv(plain, token, 'DOWN_TOKEN');
    assert.equal(sl503.status, 503, JSON.stringify(sl503));
    assert.equal(sl503.headers['retry-after'], '1');
    assert.equal(sl503.error.code, -32603);
    assert.match(sl503.error.message, /the token endpoint did not answer/);
    assert.ok(Date.now() - t1 < scaled(5000) + 5000, `bounded by the timeout: ${Date.now() - t1} ms`);
    op.delay('token', 0);
    // Unreachable: a configured endpoint nothing listens on.
    const closed = await gateway(op, dir, { extra: 'token_exchange_endpoint = https://127.0.0.1:1/token' });
    gws.push(closed);
    const r503b = await bearerInit(closed, '/mcp', token);
    assert.equal(r503b.status, 503, r503b.body);
    assert.equal(r503b.error.code, -32603);
    assert.match(r503b.error.message, /token exchange for this server failed: the token endpoint did not answer/);
    const records = fs.readFileSync(audit, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(records.some((r) => r.event === 'refused_exchange' && JSON.stringify(r).includes('502')), JSON.stringify(records));
  } finally {
    for (const g of gws) await g.stop();
    await op.stop();
  }
});

test('config: token exchange needs jwt, a target, a variable, the client, a safe secret; its keys need it on', () => {
  const dir = tmpdir('mcpgw-xchg-cfg-');
  const secret = path.join(dir, 'secret');
  fs.writeFileSync(secret, 's3cret\n', { mode: 0o600 });
  const jwks = path.join(dir, 'jwks.json');
  fs.writeFileSync(jwks, JSON.stringify({ keys: [] }));
  const jwt = `[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = https://issuer.example\n`;
  const jwtFile = `[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = http://issuer.example\njwks_file = ${jwks}\n`;
  const server = (extra) => `[server:gh]\npath = /mcp\ncommand = /bin/true\n${extra}\n`;
  const good = `token_exchange = on\ntoken_exchange_resource = ${API}\ntoken_exchange_env = GH_TOKEN\ntoken_exchange_client_id = gw\ntoken_exchange_client_secret_file = ${secret}`;
  const check = (name, ini) => checkConfigText(dir, name, ini);
  const bad = {
    'token_exchange: needs \\[auth\\] mode = jwt': server(good),
    'token_exchange_audience: or token_exchange_resource is required': jwt + server(good.replace(/token_exchange_resource = .*\n/, '')),
    'token_exchange_env: must name the child\'s variable': jwt + server(good.replace('GH_TOKEN', '1X')),
    'token_exchange_env: names a variable the gateway sets itself': jwt + server(good.replace('GH_TOKEN', 'MCPGW_SESSION_LABEL')),
    'token_exchange_client_id: is required': jwt + server(good.replace('token_exchange_client_id = gw\n', '')),
    'token_exchange_endpoint: must be an https:// URL': jwt + server(`${good}\ntoken_exchange_endpoint = http://as.example/token`),
    'token_exchange_endpoint: is required: \\[auth\\] issuer is no https:// URL': jwtFile + server(good),
    'token_exchange_scopes: needs token_exchange = on': jwt + server('token_exchange_scopes = a'),
    'pool_warm_children: must be 0 with env_from_claims, credentials_dir or token_exchange': jwt + server(`${good}\npool_warm_children = 1`),
    'token_exchange: must be off or on': jwt + server('token_exchange = yes'),
    'token_exchange_timeout_ms': jwt + server(`${good}\ntoken_exchange_timeout_ms = 10`),
  };
  let i = 0;
  for (const [want, ini] of Object.entries(bad)) {
    const r = check(`bad${i++}`, ini);
    assert.notEqual(r.status, 0, `${want}: ${r.out}`);
    assert.match(r.out, new RegExp(want), r.out);
  }
  fs.chmodSync(secret, 0o644);
  const open = check('open-secret', jwt + server(good));
  assert.notEqual(open.status, 0, open.out);
  assert.match(open.out, /token_exchange_client_secret_file: .*secret holds a secret and is readable by others/);
  assert.ok(!open.out.includes('s3cret'));
  fs.chmodSync(secret, 0o600);
  const r = check('good', jwt + server(good));
  assert.equal(r.status, 0, r.out);
  const boxed = check('good-boxed', jwt + server(`${good}\nsandbox = on`));
  assert.equal(boxed.status, 0, `token_exchange with sandbox = on: ${boxed.out}`);
  const printed = spawnSync(GW_BIN, ['--print-config', '-c', path.join(dir, 'good.ini')], { encoding: 'utf8', timeout: 10000 });
  assert.equal(printed.status, 0, printed.stderr);
  assert.ok(!printed.stdout.includes('s3cret'), 'the secret is not printed');
  assert.match(printed.stdout, /^token_exchange_client_secret_file = /m);
});

test('token exchange, child_sleep_after_s: a session\'s child that slept wakes with the newest exchanged token, in its variable and the same file', async () => {
  const op = await startOidc({ quiet: true, clients: ['alice'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 4 } } });
  const dir = tmpdir('mcpgw-xchg-sleep-');
  let gw;
  try {
    gw = await gateway(op, dir, { extra: 'token_exchange_renew_before_s = 2\nchild_sleep_after_s = 1' });
    const token = await op.token({ resource: `${PUBLIC_URL}/mcp`, format: 'jwt', client: 'alice' });
    const { s, env, where } = await sessionToken(gw, token, 'alice');
    const childOf = async () => JSON.parse((await admin(gw, '/admin/inflight')).text).sessions.find((x) => x.id === s.sid)?.child;
    await waitFor(async () => (await childOf()) === 'asleep', scaled(15000), 'the child to sleep');
    await gw.waitLog(/token for \[server:gh\] renewed/, scaled(15000));
    const renewed = fs.readFileSync(where, 'utf8').trim();
    assert.notEqual(renewed, env, 'renewed while the child slept');
    // The woken child: the renewed token in its variable, the same file.
    assert.equal(await envOf(gw, '/mcp', token, s.sid, 'DOWN_TOKEN_FILE'), where);
    const woke = await envOf(gw, '/mcp', token, s.sid, 'DOWN_TOKEN');
    assert.equal(await childOf(), 'running');
    assert.equal(claimsOf(woke).subject, 'alice');
    assert.ok(claimsOf(woke).exp >= claimsOf(renewed).exp, 'the newest token, not the one the first child had');
    assert.notEqual(woke, env);
    await gw.waitLog(new RegExp(`session=${s.sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} child woke in`), scaled(5000));
    await assertNowhere(gw, [env, renewed, woke]);
  } finally {
    await gw?.stop();
    await op.stop();
  }
});
