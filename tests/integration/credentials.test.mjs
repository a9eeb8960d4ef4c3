// SPDX-License-Identifier: MIT
// Per-principal credentials of a session's child: env_from_claims (the verified token's claims
// into named variables) and credentials_dir (DIR/PRINCIPAL.env read at each session start), with
// credentials_missing. Two principals each read back only their own credentials through the
// example server's env tool; a missing or invalid claim, a missing or unsafe file get their
// configured answers; a changed file is read again by the next session; a stateless request runs
// on a pool child of its own principal (stateless_principals.test.mjs puts that under load); the
// values never appear in the log, /admin/inflight, /metrics or --print-config. The JWTs are signed here with node:crypto, as auth.test.mjs does,
// and come from the real authorization server (tests/lib/oidc.mjs), JWTs and opaque tokens.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { checkConfigText, EXAMPLE, GW_BIN, request, rpc, startGateway, tmpdir } from '../lib/gw.mjs';
import { bearerInit, bearerPost, envOf } from '../lib/bearer.mjs';
import { startOidc } from '../lib/oidc.mjs';
import { V, mpost, msgsOf } from '../lib/stateless.mjs';

const PUBLIC_URL = 'https://mcp.test.example';
const ISSUER = 'https://issuer.test.example';
const ADMIN = 'a'.repeat(40);
const b64u = (b) => Buffer.from(b).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const KEY = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const JWK = { ...KEY.publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' };

/** A JWT for server path p with the subject sub and extra claims. */
function mint(sub, extra = {}, p = '/mcp') {
  const t = now();
  const h = { alg: 'RS256', typ: 'JWT', kid: 'k1' };
  const c = { iss: ISSUER, aud: `${PUBLIC_URL}${p}`, sub, iat: t, exp: t + 600, ...extra };
  const input = `${b64u(JSON.stringify(h))}.${b64u(JSON.stringify(c))}`;
  return `${input}.${b64u(crypto.sign('sha256', Buffer.from(input), KEY.privateKey))}`;
}

const secret = (tag) => `${tag}-${crypto.randomBytes(12).toString('hex')}`;

async function admin(gw, p) {
  const r = await request(`${gw.base}${p}`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  return { status: r.status, text: await r.done() };
}

/** Every place a credential must never appear: the log, /admin/inflight, /metrics, --print-config. */
async function assertNowhere(gw, values) {
  const view = await admin(gw, '/admin/inflight');
  assert.equal(view.status, 200, view.text);
  const metrics = await admin(gw, '/metrics');
  const printed = spawnSync(GW_BIN, ['--print-config', '--config', gw.conf], { encoding: 'utf8', timeout: 10000 });
  assert.equal(printed.status, 0, printed.stderr);
  for (const v of values) {
    assert.ok(!gw.logs().includes(v), `a credential in the log: ${v}`);
    assert.ok(!view.text.includes(v), `a credential in /admin/inflight: ${v}`);
    assert.ok(!metrics.text.includes(v), `a credential in /metrics: ${v}`);
    assert.ok(!printed.stdout.includes(v), `a credential in --print-config: ${v}`);
  }
  return printed.stdout;
}

describe('per-principal credentials', () => {
  let gw;
  let dir;
  const S = {
    alice: secret('ghp-alice'), bob: secret('ghp-bob'), operator: secret('operator-key'),
    fileAlice: secret('file-alice'), fileAlice2: secret('file-alice-2'), fileBob: secret('file-bob'),
    fallback: secret('fallback'), both: secret('both-claim'), bothFile: secret('both-file'),
  };
  const fileOf = (sub) => path.join(dir, 'creds', `sub:${sub}.env`);
  const writeCreds = (sub, text, mode = 0o600) => { fs.writeFileSync(fileOf(sub), text, { mode }); fs.chmodSync(fileOf(sub), mode); };

  before(async () => {
    dir = tmpdir('mcpgw-creds-');
    fs.writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify({ keys: [JWK] }));
    fs.mkdirSync(path.join(dir, 'creds'), { mode: 0o700 });
    writeCreds('alice', `# alice's\nFILE_TOKEN=${S.fileAlice}\n`);
    writeCreds('bob', `FILE_TOKEN=${S.fileBob}\nGITHUB_TOKEN=${S.bothFile}\n`);
    const creds = path.join(dir, 'creds');
    gw = await startGateway({
      gateway: { admin_token: ADMIN },
      auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: path.join(dir, 'jwks.json') },
      servers: [
        { name: 'claims', path: '/mcp', env: `GITHUB_TOKEN=${S.operator}`, extra: 'env_from_claims = GITHUB_TOKEN=gh_token, ORG=org.login|none, NUM=n|, DOTTED=https://example.com/claims/key|-' },
        { name: 'files', path: '/files', env: `FILE_TOKEN=${S.fallback}`, extra: `credentials_dir = ${creds}` },
        { name: 'fallback', path: '/fallback', env: `FILE_TOKEN=${S.fallback}`, extra: `credentials_dir = ${creds}\ncredentials_missing = server_env` },
        { name: 'both', path: '/both', extra: `credentials_dir = ${creds}\nenv_from_claims = GITHUB_TOKEN=gh_token` },
      ],
    });
  });
  after(async () => { await gw?.stop(); });

  test('env_from_claims: each principal\'s child holds its own claims, over the server\'s env', async () => {
    const ta = mint('alice', { gh_token: S.alice, org: { login: 'acme' }, n: 42, 'https://example.com/claims/key': 'whole-name' });
    const tb = mint('bob', { gh_token: S.bob });
    const a = await bearerInit(gw, '/mcp', ta);
    const b = await bearerInit(gw, '/mcp', tb);
    assert.equal(a.status, 200, a.body);
    assert.equal(b.status, 200, b.body);
    assert.equal(await envOf(gw, '/mcp', ta, a.sid, 'GITHUB_TOKEN'), S.alice);
    assert.equal(await envOf(gw, '/mcp', tb, b.sid, 'GITHUB_TOKEN'), S.bob);
    assert.equal(await envOf(gw, '/mcp', ta, a.sid, 'ORG'), 'acme', 'a dotted path');
    assert.equal(await envOf(gw, '/mcp', tb, b.sid, 'ORG'), 'none', 'the default');
    assert.equal(await envOf(gw, '/mcp', ta, a.sid, 'NUM'), '42', 'an integer');
    assert.equal(await envOf(gw, '/mcp', tb, b.sid, 'NUM'), '', 'an empty default');
    assert.equal(await envOf(gw, '/mcp', ta, a.sid, 'DOTTED'), 'whole-name', 'a member named with dots, whole');
    assert.equal(await envOf(gw, '/mcp', tb, b.sid, 'DOTTED'), '-');
    // Alice's session refused to bob: the session is alice's alone.
    const cross = await bearerPost(gw, '/mcp', rpc('tools/call', { name: 'env', arguments: { name: 'GITHUB_TOKEN' } }), tb, a.sid);
    const crossBody = await cross.done();
    assert.equal(cross.status, 404, crossBody);
    assert.ok(!crossBody.includes(S.alice));
    await assertNowhere(gw, [S.alice, S.bob, S.operator]);
  });

  test('env_from_claims: a missing or invalid claim refuses initialize with 403 and names the claim', async () => {
    const before = gw.childPids().length;
    const cases = {
      missing: {},
      object: { gh_token: { v: 'x' } },
      newline: { gh_token: 'a\nb' },
      cr: { gh_token: 'a\rb' },
      real: { gh_token: 1.5 },
      long: { gh_token: 'x'.repeat(4097) },
    };
    for (const [what, extra] of Object.entries(cases)) {
      const r = await bearerInit(gw, '/mcp', mint(`carol-${what}`, extra));
      assert.equal(r.status, 403, `${what}: ${r.body}`);
      assert.equal(r.error?.code, -32600, `${what}: ${r.body}`);
      assert.match(r.error.message, /claim gh_token \(for GITHUB_TOKEN\)/, what);
    }
    const ok = await bearerInit(gw, '/mcp', mint('carol', { gh_token: 'y'.repeat(4096) }));
    assert.equal(ok.status, 200, `4096 bytes fit: ${ok.body}`);
    assert.equal(gw.childPids().length, before + 1, 'no child for a refused session');
  });

  test('stateless requests run on pool children of their own principal, with the credentials a session gets; none: 403', async () => {
    const msg = (name) => ({ jsonrpc: '2.0', id: 's1', method: 'tools/call', params: { name: 'env', arguments: { name }, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } } });
    /** A stateless env call on path p: {status, answer}. */
    const sv = async (p, token, name) => {
      const r = await mpost(gw, msg(name), { path: p, bearer: token });
      const body = await r.done();
      const answer = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
      assert.ok(answer, `${p}: ${r.status} ${body}`);
      return { status: r.status, answer, text: answer.result?.content?.[0]?.text };
    };
    const ta = mint('alice', { gh_token: S.alice });
    const tb = mint('bob', { gh_token: S.bob });
    for (let i = 0; i < 2; i++) {
      assert.equal((await sv('/mcp', ta, 'GITHUB_TOKEN')).text, S.alice, 'alice\'s claim, over the server\'s env');
      assert.equal((await sv('/mcp', tb, 'GITHUB_TOKEN')).text, S.bob);
    }
    assert.equal((await sv('/files', mint('alice', {}, '/files'), 'FILE_TOKEN')).text, S.fileAlice);
    assert.equal((await sv('/files', mint('bob', {}, '/files'), 'FILE_TOKEN')).text, S.fileBob);
    // What refuses a session refuses a stateless request: 403, and no child.
    const starts = () => (gw.logs().match(/pool child started/g) ?? []).length;
    const before = starts();
    const erin = await sv('/mcp', mint('erin', {}), 'GITHUB_TOKEN');
    assert.equal(erin.status, 403, JSON.stringify(erin.answer));
    assert.equal(erin.answer.error.code, -32600);
    assert.match(erin.answer.error.message, /claim gh_token \(for GITHUB_TOKEN\)/);
    const dave = await sv('/files', mint('dave', {}, '/files'), 'FILE_TOKEN');
    assert.equal(dave.status, 403, JSON.stringify(dave.answer));
    assert.equal(dave.answer.error.code, -32600);
    assert.match(dave.answer.error.message, /no credentials for this principal/);
    assert.equal(starts(), before, 'no pool child for a refused principal');
    // credentials_missing = server_env: dave's child has the server's environment, and is his alone.
    assert.equal((await sv('/fallback', mint('dave', {}, '/fallback'), 'FILE_TOKEN')).text, S.fallback);
    assert.equal((await sv('/fallback', mint('bob', {}, '/fallback'), 'FILE_TOKEN')).text, S.fileBob);
    const view = JSON.parse((await admin(gw, '/admin/inflight')).text);
    const fallback = view.pools.filter((p) => p.server === 'fallback' && !p.retired);
    assert.deepEqual(fallback.map((p) => p.principal).sort(), ['sub:bob', 'sub:dave'], JSON.stringify(fallback));
    for (const p of fallback) assert.equal(p.children.length, 1, JSON.stringify(p));
    assert.notEqual(fallback[0].children[0].pid, fallback[1].children[0].pid, 'each principal its own child');
    await assertNowhere(gw, [S.alice, S.bob, S.fileAlice, S.fileBob, S.fallback]);
  });

  test('credentials_dir: each principal\'s file, re-read at each session start; none: 403, or the server\'s env', async () => {
    const ta = mint('alice', {}, '/files');
    const tb = mint('bob', {}, '/files');
    const a1 = await bearerInit(gw, '/files', ta);
    const b1 = await bearerInit(gw, '/files', tb);
    assert.equal(a1.status, 200, a1.body);
    assert.equal(await envOf(gw, '/files', ta, a1.sid, 'FILE_TOKEN'), S.fileAlice);
    assert.equal(await envOf(gw, '/files', tb, b1.sid, 'FILE_TOKEN'), S.fileBob);
    writeCreds('alice', `FILE_TOKEN=${S.fileAlice2}\n`);
    const a2 = await bearerInit(gw, '/files', ta);
    assert.equal(await envOf(gw, '/files', ta, a2.sid, 'FILE_TOKEN'), S.fileAlice2, 'the new file');
    assert.equal(await envOf(gw, '/files', ta, a1.sid, 'FILE_TOKEN'), S.fileAlice, 'a running child keeps its own');
    // No file: refused, or (credentials_missing = server_env) the server's environment.
    const dave = await bearerInit(gw, '/files', mint('dave', {}, '/files'));
    assert.equal(dave.status, 403, dave.body);
    assert.equal(dave.error?.code, -32600);
    assert.match(dave.error.message, /no credentials for this principal/);
    for (const sub of ['../creds/sub:alice', 'a b', 'café']) {
      const r = await bearerInit(gw, '/files', mint(sub, {}, '/files'));
      assert.equal(r.status, 403, `${sub}: ${r.body}`);
      assert.match(r.error.message, /cannot name a file of credentials_dir/, sub);
    }
    const td = mint('dave', {}, '/fallback');
    const d2 = await bearerInit(gw, '/fallback', td);
    assert.equal(d2.status, 200, d2.body);
    assert.equal(await envOf(gw, '/fallback', td, d2.sid, 'FILE_TOKEN'), S.fallback);
    const tb2 = mint('bob', {}, '/fallback');
    const b2 = await bearerInit(gw, '/fallback', tb2);
    assert.equal(await envOf(gw, '/fallback', tb2, b2.sid, 'FILE_TOKEN'), S.fileBob, 'a file wins over the server\'s env');
    await assertNowhere(gw, [S.fileAlice, S.fileAlice2, S.fileBob, S.fallback]);
  });

  test('credentials_dir: a file others may read or write, or not a regular file, refuses the session (500), the log says why', async () => {
    const ta = mint('alice', {}, '/files');
    for (const mode of [0o644, 0o620]) {
      fs.chmodSync(fileOf('alice'), mode);
      const r = await bearerInit(gw, '/files', ta);
      assert.equal(r.status, 500, `${mode.toString(8)}: ${r.body}`);
      assert.match(r.error.message, /cannot be read/);
      assert.ok(!r.body.includes(dir), 'the path is not told to the client');
    }
    await gw.waitLog(/refused for sub:alice: \S+sub:alice\.env holds a secret and is readable by others/);
    await gw.waitLog(/refused for sub:alice: \S+sub:alice\.env is writable by its group/);
    fs.chmodSync(fileOf('alice'), 0o600);
    fs.writeFileSync(fileOf('alice'), 'not a pair\n');
    const bad = await bearerInit(gw, '/files', ta);
    assert.equal(bad.status, 500, bad.body);
    await gw.waitLog(/sub:alice\.env:1: must be NAME=VALUE/);
    writeCreds('alice', `FILE_TOKEN=${S.fileAlice}\n`);
    const ok = await bearerInit(gw, '/files', ta);
    assert.equal(ok.status, 200, ok.body);
  });

  test('both: the file and the claims, a name set by both is the claim\'s', async () => {
    const tb = mint('bob', { gh_token: S.both }, '/both');
    const b = await bearerInit(gw, '/both', tb);
    assert.equal(b.status, 200, b.body);
    assert.equal(await envOf(gw, '/both', tb, b.sid, 'GITHUB_TOKEN'), S.both);
    assert.equal(await envOf(gw, '/both', tb, b.sid, 'FILE_TOKEN'), S.fileBob);
    const printed = await assertNowhere(gw, [S.both, S.bothFile]);
    assert.match(printed, /^env_from_claims = GITHUB_TOKEN=gh_token$/m);
    assert.match(printed, /^; env_from_claims = GITHUB_TOKEN=gh_token, ORG=org\.login\|<redacted>, NUM=n\|<redacted>, DOTTED=https:\/\/example\.com\/claims\/key\|<redacted>$/m, 'defaults redacted');
    assert.match(printed, /^credentials_missing = server_env$/m);
  });
});

test('env_from_claims with the real authorization server: its JWTs and its introspection answers (opaque tokens), two principals', async () => {
  const down = { 'alice-client': secret('down-alice'), 'bob-client': secret('down-bob') };
  const extraClaims = (t) => (down[t.clientId] ? { downstream: down[t.clientId] } : undefined);
  const op = await startOidc({ quiet: true, clients: ['alice-client', 'bob-client', 'carol-client'], extraClaims });
  let gw;
  try {
    const cred = op.writeCredentials();
    gw = await startGateway({
      gateway: { admin_token: ADMIN },
      auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: op.issuer, tls_ca_file: op.caFile, introspection_credentials_file: cred },
      servers: [{ name: 'claims', path: '/mcp', extra: 'env_from_claims = DOWNSTREAM_TOKEN=downstream' }],
    });
    const resource = `${PUBLIC_URL}/mcp`;
    for (const format of ['jwt', 'opaque']) {
      const seen = {};
      for (const client of ['alice-client', 'bob-client']) {
        const token = await op.token({ resource, format, client });
        const s = await bearerInit(gw, '/mcp', token);
        assert.equal(s.status, 200, `${format} ${client}: ${s.body}`);
        seen[client] = await envOf(gw, '/mcp', token, s.sid, 'DOWNSTREAM_TOKEN');
      }
      assert.deepEqual(seen, down, `${format}: each child its own principal's claim`);
    }
    // A client whose tokens lack the claim: refused, whatever the format.
    for (const format of ['jwt', 'opaque']) {
      const r = await bearerInit(gw, '/mcp', await op.token({ resource, format, client: 'carol-client' }));
      assert.equal(r.status, 403, `${format}: ${r.body}`);
      assert.match(r.error.message, /claim downstream \(for DOWNSTREAM_TOKEN\)/);
    }
    await assertNowhere(gw, Object.values(down));
  } finally {
    await gw?.stop();
    await op.stop();
  }
});

test('config: what cannot work is refused at load', () => {
  const dir = tmpdir('mcpgw-creds-cfg-');
  const jwks = path.join(dir, 'jwks.json');
  fs.writeFileSync(jwks, JSON.stringify({ keys: [JWK] }));
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `sha256:${'0'.repeat(64)} alice\n`);
  const creds = path.join(dir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  const jwt = `[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = ${ISSUER}\njwks_file = ${jwks}\n`;
  const bearer = `[auth]\nmode = bearer\npublic_url = ${PUBLIC_URL}\ntokens_file = ${tokens}\n`;
  const server = (extra) => `[server:example]\npath = /mcp\ncommand = ${EXAMPLE}\n${extra}\n`;
  const check = (name, ini) => checkConfigText(dir, name, ini);
  const bad = {
    'env_from_claims: needs \\[auth\\] mode = jwt \\(a verified token\'s claims; mode bearer has no claims': bearer + server('env_from_claims = T=tok'),
    'env_from_claims: needs \\[auth\\] mode = jwt \\(a verified token\'s claims; mode none has no claims': server('env_from_claims = T=tok'),
    'names a variable the gateway sets itself': jwt + server('env_from_claims = MCPGW_SERVER=tok'),
    'sets a variable twice': jwt + server('env_from_claims = T=a, T=b'),
    'must be VAR=claim or VAR=claim\\|default': jwt + server('env_from_claims = T=a..b'),
    'credentials_dir: needs \\[auth\\] mode = bearer or jwt': server(`credentials_dir = ${creds}`),
    'No such file or directory': bearer + server(`credentials_dir = ${creds}-missing`),
    'pool_warm_children: must be 0 with env_from_claims, credentials_dir or token_exchange': bearer + server(`credentials_dir = ${creds}\npool_warm_children = 1`),
    'credentials_missing: must be refuse or server_env': bearer + server(`credentials_dir = ${creds}\ncredentials_missing = maybe`),
  };
  let i = 0;
  for (const [want, ini] of Object.entries(bad)) {
    const r = check(`bad${i++}`, ini);
    assert.notEqual(r.status, 0, `${want}: ${r.out}`);
    assert.match(r.out, new RegExp(want), r.out);
  }
  for (const [name, ini] of Object.entries({ bearer: bearer + server(`credentials_dir = ${creds}`), jwt: jwt + server(`credentials_dir = ${creds}\nenv_from_claims = T=a.b|x`) })) {
    const r = check(name, ini);
    assert.equal(r.status, 0, `${name}: ${r.out}`);
  }
  fs.chmodSync(creds, 0o770);
  const open = check('group-writable', bearer + server(`credentials_dir = ${creds}`));
  assert.notEqual(open.status, 0, open.out);
  assert.match(open.out, /creds is writable by its group/);
});
