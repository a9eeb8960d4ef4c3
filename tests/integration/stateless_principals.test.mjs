// SPDX-License-Identifier: MIT
// Stateless (2026-07-28) requests to servers with per-principal credentials: each principal's
// calls run on pool children started with that principal's credentials alone. Two principals
// (JWTs signed here with node:crypto, as credentials.test.mjs does) call two servers at once in a
// randomized interleaving (a seeded PRNG; every run prints its seed, and GW_PRINCIPALS_SEED
// replays it): one takes TOKEN from the token's claims (env_from_claims) with
// pool_max_children = 1, the other from DIR/PRINCIPAL.env (credentials_dir) with
// pool_max_children = 2, so that the least recently used idle child of the other principal is
// stopped over and over. Meanwhile ready pool children are killed (by pid, read from
// /admin/inflight and checked to be this gateway's own children). Every call asks the example
// server's env tool for TOKEN: an answer must be the caller's own value, never the other
// principal's nor the server's; a call cut by a kill, or refused while the pool is at its bound,
// is an error, never another principal's answer. Nothing sleeps: the killer waits for calls to
// complete between kills, with deadlines. A second test does the same with a token_exchange
// server (RFC 8693 against the real oidc-provider, tests/lib/oidc.mjs) with pool_max_children = 1:
// every answer's DOWN_TOKEN must be a token exchanged for the caller, never the other's.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { metricSamples, reaped, request, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { startOidc } from '../lib/oidc.mjs';
import { prng } from '../lib/prng.mjs';
import { kids } from '../lib/procs.mjs';
import { V, mpost, msgsOf } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const PUBLIC_URL = 'https://mcp.test.example';
const ISSUER = 'https://issuer.test.example';
const ADMIN = 'a'.repeat(40);
const KEY = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const JWK = { ...KEY.publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' };
const b64u = (b) => Buffer.from(b).toString('base64url');
const secret = (tag) => `${tag}-${crypto.randomBytes(12).toString('hex')}`;

/** A JWT for server path p with subject sub and extra claims. */
function mint(sub, extra, p) {
  const t = Math.floor(Date.now() / 1000);
  const h = { alg: 'RS256', typ: 'JWT', kid: 'k1' };
  const c = { iss: ISSUER, aud: `${PUBLIC_URL}${p}`, sub, iat: t, exp: t + 3600, ...extra };
  const input = `${b64u(JSON.stringify(h))}.${b64u(JSON.stringify(c))}`;
  return `${input}.${b64u(crypto.sign('sha256', Buffer.from(input), KEY.privateKey))}`;
}

const toolCall = (id, name, args) => ({
  jsonrpc: '2.0', id, method: 'tools/call',
  params: { name, arguments: args, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} } },
});

async function admin(gw, p) {
  const r = await request(`${gw.base}${p}`, { method: 'GET', headers: { Authorization: `Bearer ${ADMIN}` } });
  const text = await r.done(scaled(10000));
  assert.equal(r.status, 200, text);
  return text;
}

/**
 * Kills ready children of gw's principal pools (its own, by pid), one at a time while the workers
 * run: at most rounds, each after 4 more calls completed, until run.stop; each pid into kills.
 */
async function killer(gw, rounds, pick, run, kills) {
  for (let k = 0; k < rounds && !run.stop; k++) {
    const since = run.done;
    await waitFor(() => run.stop || run.done >= since + 4, scaled(60000), 'calls to complete between kills');
    if (run.stop) return;
    const view = JSON.parse(await admin(gw, '/admin/inflight'));
    const mine = new Set(kids(gw.proc.pid));
    const ready = view.pools.filter((p) => p.principal !== null).flatMap((p) => p.children.filter((c) => c.state === 'ready' && mine.has(c.pid)).map((c) => c.pid));
    if (ready.length === 0) continue;
    const pid = pick(ready);
    try { process.kill(pid, 'SIGKILL'); } catch { continue; }
    kills.push(pid);
    await waitFor(() => reaped(pid), scaled(10000), `killed child ${pid} reaped`);
  }
}

test('two principals, randomized, children killed: every pooled call runs in a child of its own principal', async () => {
  const seed = Number(process.env.GW_PRINCIPALS_SEED ?? crypto.randomInt(2 ** 31));
  const rnd = prng(seed);
  const pick = (arr) => arr[Math.floor(rnd() * arr.length)];
  const dir = tmpdir('mcpgw-pooluser-');
  fs.writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify({ keys: [JWK] }));
  const creds = path.join(dir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  const operator = secret('operator');
  const who = {
    alice: { claim: secret('claim-alice'), file: secret('file-alice') },
    bob: { claim: secret('claim-bob'), file: secret('file-bob') },
  };
  for (const [name, w] of Object.entries(who)) fs.writeFileSync(path.join(creds, `sub:${name}.env`), `TOKEN=${w.file}\n`, { mode: 0o600 });
  const limits = 'pool_max_restarts_per_min = 10000\npool_start_timeout_ms = 20000';
  const servers = {
    claims: { path: '/claims', bound: 1, extra: `env_from_claims = TOKEN=tok\npool_max_children = 1\npool_child_max_inflight = 2\n${limits}` },
    files: { path: '/files', bound: 2, extra: `credentials_dir = ${creds}\nera = legacy\npool_max_children = 2\npool_child_max_inflight = 1\n${limits}` },
  };
  const gw = await startGateway({
    gateway: { admin_token: ADMIN, log_level: 'info' },
    auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: path.join(dir, 'jwks.json') },
    servers: Object.entries(servers).map(([name, s]) => ({ name, path: s.path, env: `TOKEN=${operator}`, extra: s.extra })),
  });
  const tokens = {};
  for (const [name, w] of Object.entries(who))
    for (const s of Object.values(servers)) tokens[`${name}${s.path}`] = mint(name, { tok: w.claim }, s.path);
  const want = (name, srv) => (srv === 'claims' ? who[name].claim : who[name].file);
  const tally = {};
  const bad = [];
  const run = { done: 0, stop: false }; // calls completed; the workers are over
  let nextId = 1;
  const kills = [];
  try {
    /** One call of name to srv: its outcome tallied; an answer from another's child recorded. */
    async function one(name, srv) {
      const s = servers[srv];
      const slow = rnd() < 0.25;
      const id = nextId++;
      const msg = slow ? toolCall(id, 'slow', { steps: 1 + Math.floor(rnd() * 3), interval_ms: 5 + Math.floor(rnd() * 20) }) : toolCall(id, 'env', { name: 'TOKEN' });
      const r = await mpost(gw, msg, { path: s.path, bearer: tokens[`${name}${s.path}`] });
      await r.done(scaled(60000)); /* a call may wait for room, up to pool_start_timeout_ms */
      const answer = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
      const key = `${name}${s.path}`;
      tally[key] ??= { ok: 0, errors: 0, refused: 0 };
      if (r.status === 429 || r.status === 503) tally[key].refused++;
      else if (r.status !== 200) bad.push(`${key} #${id}: HTTP ${r.status} ${r.text()}`);
      else if (answer?.error) {
        if (answer.error.code !== -32603) bad.push(`${key} #${id}: ${JSON.stringify(answer.error)}`);
        tally[key].errors++;
      } else if (!slow) {
        const got = answer?.result?.content?.[0]?.text;
        if (got !== want(name, srv) || answer.result.isError) bad.push(`${key} #${id}: TOKEN is ${got === operator ? "the server's" : Object.entries(who).find(([, w]) => got === w.claim || got === w.file)?.[0] ?? JSON.stringify(answer)}`);
        else tally[key].ok++;
      }
      run.done++;
    }
    /** A client of name: calls in a row, each to a server the PRNG picks. */
    async function worker(name, n) {
      for (let i = 0; i < n; i++) await one(name, pick(Object.keys(servers)));
    }
    const workers = [];
    for (const name of Object.keys(who)) for (let w = 0; w < 3; w++) workers.push(worker(name, 24));
    const k = killer(gw, 12, pick, run, kills);
    await Promise.all(workers);
    run.stop = true;
    await k;
    const ctx = `seed ${seed} (GW_PRINCIPALS_SEED=${seed} replays it); tally ${JSON.stringify(tally)}; kills ${kills.length}`;
    assert.deepEqual(bad, [], `calls answered from another principal's child, or wrongly: ${ctx}`);
    for (const name of Object.keys(who))
      for (const s of Object.values(servers)) assert.ok((tally[`${name}${s.path}`]?.ok ?? 0) >= 1, `${name} on ${s.path}: no call verified; ${ctx}`);
    assert.ok(kills.length >= 1, `no child was killed; ${ctx}`);
    // The admin view names each pool's principal; /metrics counts, and no credential is shown.
    const view = await admin(gw, '/admin/inflight');
    for (const p of JSON.parse(view).pools) assert.ok(p.principal === null || ['sub:alice', 'sub:bob'].includes(p.principal), view);
    const metrics = await admin(gw, '/metrics');
    const m = metricSamples(metrics);
    assert.ok(m['mcpgw_pool_child_events_total{server="claims",event="principal_stopped"}'] >= 1, `the bound of 1 stopped the other's child: ${ctx}`);
    assert.ok('mcpgw_pool_principals{server="files"}' in m, 'the principals gauge');
    for (const v of [operator, ...Object.values(who).flatMap((w) => [w.claim, w.file])]) {
      assert.ok(!gw.logs().includes(v), `a credential in the log; ${ctx}`);
      assert.ok(!view.includes(v) && !metrics.includes(v), `a credential in /admin or /metrics; ${ctx}`);
    }
    console.log(`${ctx}; principal_stopped ${m['mcpgw_pool_child_events_total{event="principal_stopped"}']}`);
  } catch (e) {
    console.log(`seed ${seed}: GW_PRINCIPALS_SEED=${seed} replays this run`);
    throw e;
  } finally {
    run.stop = true;
    await gw.stop();
  }
});

test('token exchange, two principals, randomized, children killed: every pooled call runs in a child holding its own principal\'s token', async () => {
  const seed = Number(process.env.GW_PRINCIPALS_SEED ?? crypto.randomInt(2 ** 31));
  const rnd = prng(seed);
  const API = 'https://api.test.example';
  const op = await startOidc({ quiet: true, clients: ['alice', 'bob'], exchanger: 'mcp-gw-exchanger', resources: { [API]: { format: 'jwt', ttl: 600 } } });
  const dir = tmpdir('mcpgw-pooluser-xchg-');
  const secretFile = path.join(dir, 'exchange.secret');
  fs.writeFileSync(secretFile, `${op.exchangeClient.secret}\n`, { mode: 0o600 });
  const extra = [
    'token_exchange = on', `token_exchange_resource = ${API}`, 'token_exchange_env = DOWN_TOKEN',
    `token_exchange_client_id = ${op.exchangeClient.id}`, `token_exchange_client_secret_file = ${secretFile}`,
    'pool_max_children = 1', 'pool_child_max_inflight = 2', 'pool_max_restarts_per_min = 10000', 'pool_start_timeout_ms = 20000',
  ].join('\n');
  let gw;
  const bad = [];
  const tally = {};
  const kills = [];
  const seen = new Set();
  const run = { done: 0, stop: false }; // calls completed; the workers are over
  let nextId = 1;
  try {
    gw = await startGateway({
      gateway: { admin_token: ADMIN, log_level: 'info' },
      auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: op.issuer, tls_ca_file: op.caFile },
      env: { TMPDIR: dir },
      servers: [{ name: 'xchg', path: '/x', extra }],
    });
    const tokens = {};
    for (const name of ['alice', 'bob']) tokens[name] = await op.token({ resource: `${PUBLIC_URL}/x`, format: 'jwt', client: name });
    async function one(name) {
      const slow = rnd() < 0.25;
      const id = nextId++;
      const msg = slow ? toolCall(id, 'slow', { steps: 1 + Math.floor(rnd() * 3), interval_ms: 5 + Math.floor(rnd() * 20) }) : toolCall(id, 'env', { name: 'DOWN_TOKEN' });
      const r = await mpost(gw, msg, { path: '/x', bearer: tokens[name] });
      await r.done(scaled(60000));
      const answer = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
      tally[name] ??= { ok: 0, errors: 0, refused: 0 };
      if (r.status === 429 || r.status === 503) tally[name].refused++;
      else if (r.status !== 200) bad.push(`${name} #${id}: HTTP ${r.status} ${r.text()}`);
      else if (answer?.error) {
        if (answer.error.code !== -32603) bad.push(`${name} #${id}: ${JSON.stringify(answer.error)}`);
        tally[name].errors++;
      } else if (!slow) {
        const got = answer?.result?.content?.[0]?.text;
        let subject;
        try { subject = JSON.parse(Buffer.from(got.split('.')[1], 'base64url')).subject; } catch { subject = undefined; }
        if (answer.result.isError || subject !== name) bad.push(`${name} #${id}: DOWN_TOKEN is ${subject === undefined ? JSON.stringify(answer) : `${subject}'s`}`);
        else {
          tally[name].ok++;
          seen.add(got);
        }
      }
      run.done++;
    }
    async function worker(name, n) {
      for (let i = 0; i < n; i++) await one(name);
    }
    const workers = [];
    for (const name of ['alice', 'bob']) for (let w = 0; w < 2; w++) workers.push(worker(name, 16));
    const k = killer(gw, 8, (arr) => arr[Math.floor(rnd() * arr.length)], run, kills);
    await Promise.all(workers);
    run.stop = true;
    await k;
    const ctx = `seed ${seed} (GW_PRINCIPALS_SEED=${seed} replays it); tally ${JSON.stringify(tally)}; kills ${kills.length}`;
    assert.deepEqual(bad, [], `calls answered from another principal's child, or wrongly: ${ctx}`);
    for (const name of ['alice', 'bob']) assert.ok((tally[name]?.ok ?? 0) >= 1, `${name}: no call verified; ${ctx}`);
    assert.ok(kills.length >= 1, `no child was killed; ${ctx}`);
    const view = await admin(gw, '/admin/inflight');
    const metrics = await admin(gw, '/metrics');
    const m = metricSamples(metrics);
    assert.ok(m['mcpgw_pool_child_events_total{server="xchg",event="principal_stopped"}'] >= 1, `the bound of 1 stopped the other's child: ${ctx}`);
    for (const v of [...seen, op.exchangeClient.secret]) {
      assert.ok(!gw.logs().includes(v), `a token in the log; ${ctx}`);
      assert.ok(!view.includes(v) && !metrics.includes(v), `a token in /admin or /metrics; ${ctx}`);
    }
    console.log(ctx);
  } catch (e) {
    console.log(`seed ${seed}: GW_PRINCIPALS_SEED=${seed} replays this run`);
    throw e;
  } finally {
    run.stop = true;
    await gw?.stop();
    await op.stop();
  }
});
