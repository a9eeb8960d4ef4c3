// SPDX-License-Identifier: MIT
// [auth]: who may use the gateway, and how much. JWT access tokens (RS256, ES256, EdDSA) checked
// against a JWK Set, opaque bearer tokens listed by hash, required scopes, the RFC 6750 / RFC 9728
// challenges and the protected resource metadata, sessions bound to their principal, SIGHUP
// reloads of the key and token files, what a child inherits, per-principal limits (sessions, a
// token bucket), slow clients (header and body deadlines) and the metrics that count all this.
// Keys and tokens are made here with node:crypto; the JWTs are assembled by hand.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ACCEPT_BOTH, EXAMPLE, GW_BIN, metricSamples, parseSse, pooledSkip, request, rpc, startGateway, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const PUBLIC_URL = 'https://mcp.test.example';
const ISSUER = 'https://issuer.test.example';
const META_PREFIX = '/.well-known/oauth-protected-resource';
const resourceOf = (p) => `${PUBLIC_URL}${p}`;
const metadataUrlOf = (p) => `${PUBLIC_URL}${META_PREFIX}${p}`;
const now = () => Math.floor(Date.now() / 1000);
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

// --- keys, JWKS, tokens -------------------------------------------------------------------------

const b64u = (b) => Buffer.from(b).toString('base64url');

function makeKey(type, kid) {
  const pair = type === 'rsa' ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })
    : type === 'ec' ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : crypto.generateKeyPairSync('ed25519');
  const alg = type === 'rsa' ? 'RS256' : type === 'ec' ? 'ES256' : 'EdDSA';
  const jwk = { ...pair.publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg };
  return { type, alg, kid, ...pair, jwk };
}

const KEYS = {
  rsa: makeKey('rsa', 'rsa-1'),
  ec: makeKey('ec', 'ec-1'),
  ed: makeKey('ed25519', 'ed-1'),
  rogue: makeKey('rsa', 'rsa-1'), // not in any JWKS, but claims the trusted key's kid
  rsa2: makeKey('rsa', 'rsa-2'), // the key a rotation brings in
};

function writeJwks(file, keys) {
  fs.writeFileSync(file, JSON.stringify({ keys: keys.map((k) => k.jwk) }));
}

/** The raw signature of data with key, as JWS wants it (ES256: r || s). */
function rawSign(key, data) {
  const d = Buffer.from(data);
  if (key.type === 'rsa') return crypto.sign('sha256', d, key.privateKey);
  if (key.type === 'ec') return crypto.sign('sha256', d, { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
  return crypto.sign(null, d, key.privateKey);
}

function claims(over = {}) {
  const t = now();
  const c = { iss: ISSUER, aud: resourceOf('/mcp'), sub: 'alice', iat: t, exp: t + 600, ...over };
  for (const [k, v] of Object.entries(c)) if (v === undefined) delete c[k];
  return c;
}

/**
 * A compact JWS. opts.key signs (its alg and kid go in the header unless opts.header overrides
 * them; a header value undefined removes it); opts.rawPayload: the payload's exact JSON text.
 */
function mint(payload = claims(), { key = KEYS.rsa, header = {}, rawPayload, sign } = {}) {
  const h = { alg: key.alg, typ: 'JWT', kid: key.kid, ...header };
  for (const [k, v] of Object.entries(h)) if (v === undefined) delete h[k];
  const input = `${b64u(JSON.stringify(h))}.${b64u(rawPayload ?? JSON.stringify(payload))}`;
  const sig = sign ? sign(input) : rawSign(key, input);
  return `${input}.${b64u(sig)}`;
}

/** tok with one bit of its signature flipped. */
function flipSig(tok) {
  const [h, p, s] = tok.split('.');
  const sig = Buffer.from(s, 'base64url');
  sig[Math.floor(sig.length / 2)] ^= 0x01;
  return `${h}.${p}.${b64u(sig)}`;
}

/** tok with its payload replaced (the signature kept). */
function swapPayload(tok, payload) {
  const [h, , s] = tok.split('.');
  return `${h}.${b64u(JSON.stringify(payload))}.${s}`;
}

const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const randomToken = (tag) => `${tag}-${crypto.randomBytes(18).toString('base64url')}`;

// --- HTTP helpers -------------------------------------------------------------------------------

const bearer = (token) => (token === undefined ? {} : { Authorization: `Bearer ${token}` });

function authPost(gw, msg, token, { sid, url, headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token), ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'POST', headers: h, body: msg });
}

function authGet(gw, token, { sid, url, headers = {} } = {}) {
  const h = { Accept: 'text/event-stream', ...bearer(token), ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'GET', headers: h });
}

function authDel(gw, token, { sid, url, headers = {} } = {}) {
  const h = { ...bearer(token), ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(url || gw.url, { method: 'DELETE', headers: h });
}

const initMsg = (id = 'init', version = '2025-06-18') => rpc('initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: 'auth-it', version: '1' } }, id);

/** initialize + notifications/initialized with token; {sid, pid}. */
async function initAuth(gw, token, { url, version } = {}) {
  const r = await authPost(gw, initMsg('init', version), token, { url });
  const body = await r.done();
  assert.equal(r.status, 200, `initialize: HTTP ${r.status} ${body}`);
  const sid = r.headers['mcp-session-id'];
  assert.ok(sid, 'Mcp-Session-Id');
  const ans = r.events().map((e) => e.json).find(isAnswer);
  assert.ok(ans?.result, `initialize result: ${body}`);
  const n = await authPost(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, token, { sid, url, headers: { 'MCP-Protocol-Version': ans.result.protocolVersion } });
  await n.done();
  assert.equal(n.status, 202, `initialized: ${n.text()}`);
  const m = new RegExp(`session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created: server=\\S+ child=(\\d+)`).exec(gw.logs());
  return { sid, pid: m ? Number(m[1]) : undefined };
}

/** A JSON-RPC request on a session with token; resolves to the answer (asserting HTTP 200). */
async function rpcAuth(gw, token, sid, method, params, { url } = {}) {
  const r = await authPost(gw, rpc(method, params), token, { sid, url });
  const body = await r.done();
  assert.equal(r.status, 200, `${method}: HTTP ${r.status} ${body}`);
  const ans = r.events().map((e) => e.json).find(isAnswer);
  assert.ok(ans, `${method} answered: ${body}`);
  return ans;
}

async function echo(gw, token, sid, text, opts) {
  const ans = await rpcAuth(gw, token, sid, 'tools/call', { name: 'echo', arguments: { text } }, opts);
  assert.equal(textOf(ans), text, JSON.stringify(ans));
}

/** The auth-params of a WWW-Authenticate Bearer challenge: {scheme, params}. */
function parseChallenge(v) {
  assert.ok(v, 'WWW-Authenticate present');
  const m = /^(\S+)\s+(.*)$/.exec(v);
  assert.ok(m, `challenge: ${v}`);
  const params = {};
  const rest = m[2];
  const re = /\s*([A-Za-z_]+)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
  let mm;
  while (re.lastIndex < rest.length && (mm = re.exec(rest)) !== null) params[mm[1]] = mm[2];
  assert.equal(re.lastIndex, rest.length, `challenge parses to its end: ${v}`);
  return { scheme: m[1], params };
}

/** Body is a JSON-RPC error with id null; returns it. */
function assertRpcError(r, text) {
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `Content-Type (${text})`);
  let body;
  assert.doesNotThrow(() => { body = JSON.parse(text); }, `JSON body: ${text}`);
  assert.equal(body.jsonrpc, '2.0', text);
  assert.equal(body.id, null, text);
  assert.equal(typeof body.error?.code, 'number', text);
  assert.equal(typeof body.error?.message, 'string', text);
  return body;
}

/**
 * r is a refusal: status, JSON-RPC error body, and a Bearer challenge naming resource_metadata
 * of serverPath; error: undefined (none), 'invalid_token' or 'insufficient_scope'; scope: the
 * expected scope= value (undefined: absent).
 */
async function assertRefused(r, { status = 401, error, scope, serverPath = '/mcp', what = '' } = {}) {
  const text = await r.done();
  assert.equal(r.status, status, `${what}: HTTP ${r.status} ${text}`);
  assertRpcError(r, text);
  const ch = parseChallenge(r.headers['www-authenticate']);
  assert.equal(ch.scheme, 'Bearer', what);
  assert.equal(ch.params.resource_metadata, metadataUrlOf(serverPath), `${what}: resource_metadata`);
  assert.equal(ch.params.error, error, `${what}: error= in ${r.headers['www-authenticate']}`);
  if (error) assert.ok(ch.params.error_description, `${what}: error_description in ${r.headers['www-authenticate']}`);
  else assert.equal(ch.params.error_description, undefined, what);
  assert.equal(ch.params.scope, scope, `${what}: scope= in ${r.headers['www-authenticate']}`);
  return ch;
}

async function fetchPath(gw, p, { method = 'GET', headers = {}, body } = {}) {
  const r = await request(`${gw.base}${p}`, { method, headers, body });
  await r.done();
  return r;
}

/** Samples of /metrics: {'name{labels}': value}. */
async function metrics(gw) {
  const r = await fetchPath(gw, '/metrics');
  assert.equal(r.status, 200, r.text());
  return metricSamples(r.text());
}

const countMatches = (text, re) => [...text.matchAll(new RegExp(re.source, 'g'))].length;
const waitLogCount = (gw, re, n, ms = scaled(5000)) => waitFor(() => countMatches(gw.logs(), re) >= n, ms, `${n}x log ${re}`);

/** Sends SIGHUP to the gateway (our child, by pid) and waits for the n-th reload line. */
async function reload(gw, n) {
  gw.proc.kill('SIGHUP');
  await waitLogCount(gw, /SIGHUP: configuration reloaded/, n);
}

// --- raw sockets --------------------------------------------------------------------------------

/** A raw loopback connection recording what it receives and when it closes. */
function rawConn(gw) {
  const sock = net.connect(gw.port, gw.host);
  const c = { sock, data: '', closedAt: null, t0: performance.now(), ended: false };
  sock.setEncoding('latin1');
  sock.on('data', (d) => { c.data += d; });
  sock.on('error', () => {});
  sock.on('end', () => { c.ended = true; c.closedAt ??= performance.now(); });
  sock.on('close', () => { c.closedAt = performance.now(); });
  c.connected = new Promise((res, rej) => { sock.once('connect', () => { c.t0 = performance.now(); res(); }); sock.once('error', rej); });
  c.closed = () => c.closedAt !== null || c.ended;
  return c;
}

/**
 * Writes text one byte every stepMs until the connection closes or the text runs out; resolves
 * with the milliseconds from `since` to the close (null when it never closed within maxMs).
 */
async function drip(c, text, stepMs, maxMs, since) {
  const end = performance.now() + maxMs;
  for (let i = 0; i < text.length && !c.closed() && performance.now() < end; i++) {
    c.sock.write(text[i]);
    await new Promise((r) => setTimeout(r, stepMs)); // the drip's pace (the test's condition)
  }
  await waitFor(() => c.closed() || performance.now() > end, maxMs + 1000, 'close or give up').catch(() => {});
  if (!c.closed()) return null;
  return (c.closedAt ?? performance.now()) - since;
}

// Slow-client deadline windows: a close must come no earlier than the deadline and no later than
// CLOSE_SLACK_MS after it: up to 1 s for the janitor tick, and 1.5 s for a loaded run, scaled
// (5.5 s in all under ASan). What a missing or broken deadline would give instead is far
// beyond that: a drip runs for 14 s or more (one byte per 100 ms), a stalled body and an idle
// keep-alive connection stay until connection_timeout_s (60 s).
const HEADER_TIMEOUT_MS = 1000;
const BODY_TIMEOUT_MS = 1000;
const CLOSE_SLACK_MS = 1000 + scaled(1500);

// =================================================================================================
// JWT mode: one gateway for the token checks (three servers: /mcp, /scoped, /two)
// =================================================================================================

describe('jwt mode', () => {
  let gw;
  let dir;
  const good = () => mint(claims());
  const bobToken = () => mint(claims({ sub: 'bob' }));

  before(async () => {
    dir = tmpdir('mcpgw-auth-');
    writeJwks(path.join(dir, 'jwks.json'), [KEYS.rsa, KEYS.ec, KEYS.ed]);
    gw = await startGateway({
      auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: path.join(dir, 'jwks.json'), clock_skew_s: 60 },
      servers: [
        { name: 'example', path: '/mcp' },
        { name: 'scoped', path: '/scoped', extra: 'required_scopes = mcp:tools' },
        { name: 'two', path: '/two', extra: 'required_scopes = mcp:tools, mcp:write' },
      ],
    });
  });

  after(async () => {
    if (gw) await gw.stop(); // asserts a clean exit
  });

  for (const k of ['rsa', 'ec', 'ed']) {
    test(`jwt: a valid ${KEYS[k].alg} token initializes, calls a tool; the session without a token is 401`, async () => {
      const tok = mint(claims({ sub: `user-${k}` }), { key: KEYS[k] });
      const { sid } = await initAuth(gw, tok);
      await echo(gw, tok, sid, `hello via ${KEYS[k].alg}`);
      // The same session, no token: every method on the endpoint is checked.
      await assertRefused(await authPost(gw, rpc('ping'), undefined, { sid }), { what: 'POST without token' });
      await assertRefused(await authGet(gw, undefined, { sid }), { what: 'GET without token' });
      await assertRefused(await authDel(gw, undefined, { sid }), { what: 'DELETE without token' });
      // A token of the same principal that has expired, or is for another audience, is refused
      // on the session too: every request is checked, not just initialize.
      const t = now();
      await assertRefused(await authPost(gw, rpc('ping'), mint(claims({ sub: `user-${k}`, exp: t - 3600, iat: t - 7200 }), { key: KEYS[k] }), { sid }), { error: 'invalid_token', what: 'expired token on the session' });
      await assertRefused(await authPost(gw, rpc('ping'), mint(claims({ sub: `user-${k}`, aud: resourceOf('/two') }), { key: KEYS[k] }), { sid }), { error: 'invalid_token', what: 'other audience on the session' });
      // ... and the session is still there for its owner.
      await echo(gw, tok, sid, 'still here');
      const d = await authDel(gw, tok, { sid });
      await d.done();
      assert.ok(d.status === 200 || d.status === 204, `DELETE: ${d.status} ${d.text()}`);
    });
  }

  test('jwt: a missing Authorization header or a non-Bearer scheme gets 401 without error=', async () => {
    const spawned = gw.childPids().length;
    for (const [what, headers, url] of [
      ['no header', {}],
      ['Basic', { Authorization: `Basic ${Buffer.from('alice:secret').toString('base64')}` }],
      ['Token scheme', { Authorization: `Token ${good()}` }],
      ['bare token', { Authorization: good() }],
      ['empty Bearer', { Authorization: 'Bearer ' }],
      ['token only in the query (access_token)', {}, `${gw.url}?access_token=${good()}`],
    ]) {
      const r = await authPost(gw, initMsg(), undefined, { headers, url });
      await assertRefused(r, { what });
      // No scope= when the server requires none, and the exact challenge otherwise.
      assert.equal(r.headers['www-authenticate'], `Bearer resource_metadata="${metadataUrlOf('/mcp')}"`, what);
    }
    assert.equal(gw.childPids().length, spawned, 'no child spawned for refused requests');
  });

  test('jwt: a lower-case "bearer" scheme is accepted (RFC 7235: case-insensitive)', async () => {
    const r = await authPost(gw, initMsg(), undefined, { headers: { Authorization: `bearer ${good()}` } });
    await r.done();
    assert.equal(r.status, 200, r.text());
    const d = await authDel(gw, good(), { sid: r.headers['mcp-session-id'] });
    await d.done();
  });

  test('jwt: bad tokens get 401 error="invalid_token" and spawn nothing', async () => {
    const t = now();
    const valid = good();
    const validEc = mint(claims(), { key: KEYS.ec });
    const validEd = mint(claims(), { key: KEYS.ed });
    const hmac = (secret) => (input) => crypto.createHmac('sha256', secret).update(input).digest();
    const spkiPem = KEYS.rsa.publicKey.export({ type: 'spki', format: 'pem' });
    const pkcs1Pem = KEYS.rsa.publicKey.export({ type: 'pkcs1', format: 'pem' });
    const nBytes = Buffer.from(KEYS.rsa.jwk.n, 'base64url');
    const [vh, vp] = valid.split('.');
    const cases = [
      ['expired (beyond clock_skew_s)', mint(claims({ exp: t - 120, iat: t - 720 }))],
      ['nbf in the future', mint(claims({ nbf: t + 600 }))],
      ['nbf not a number', mint(claims({ nbf: 'soon' }))],
      ['wrong aud', mint(claims({ aud: 'https://mcp.test.example/other' }))],
      ['aud of the bare public_url', mint(claims({ aud: PUBLIC_URL }))],
      ['aud of another server of this gateway', mint(claims({ aud: resourceOf('/scoped') }))],
      ['aud array without the resource', mint(claims({ aud: ['https://a.example/mcp', `${resourceOf('/mcp')}/`] }))],
      ['aud missing', mint(claims({ aud: undefined }))],
      ['wrong iss', mint(claims({ iss: 'https://evil.example' }))],
      ['iss with a trailing slash', mint(claims({ iss: `${ISSUER}/` }))],
      ['iss missing', mint(claims({ iss: undefined }))],
      ['tampered payload (RS256)', swapPayload(valid, claims({ sub: 'mallory' }))],
      ['tampered payload (ES256)', swapPayload(validEc, claims({ sub: 'mallory' }))],
      ['tampered payload (EdDSA)', swapPayload(validEd, claims({ sub: 'mallory' }))],
      ['flipped signature byte (RS256)', flipSig(valid)],
      ['flipped signature byte (ES256)', flipSig(validEc)],
      ['flipped signature byte (EdDSA)', flipSig(validEd)],
      ['signature removed', `${vh}.${vp}.`],
      ['signed by a key not in the JWKS (same kid)', mint(claims(), { key: KEYS.rogue })],
      ['signed by a key not in the JWKS (no kid)', mint(claims(), { key: KEYS.rogue, header: { kid: undefined } })],
      ['alg none, empty signature', `${b64u(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${vp}.`],
      ['alg "None", empty signature', `${b64u(JSON.stringify({ alg: 'None' }))}.${vp}.`],
      ['HS256 keyed with the RSA public key (SPKI PEM)', mint(claims(), { header: { alg: 'HS256' }, sign: hmac(spkiPem) })],
      ['HS256 keyed with the RSA public key (PKCS#1 PEM)', mint(claims(), { header: { alg: 'HS256' }, sign: hmac(pkcs1Pem) })],
      ['HS256 keyed with the JWK n bytes', mint(claims(), { header: { alg: 'HS256' }, sign: hmac(nBytes) })],
      ['HS256 keyed with the JWK n text', mint(claims(), { header: { alg: 'HS256', kid: undefined }, sign: hmac(KEYS.rsa.jwk.n) })],
      ['alg RS256 but an ES256 signature', mint(claims(), { key: KEYS.ec, header: { alg: 'RS256', kid: undefined } })],
      ['alg ES256 but an RS256 signature', mint(claims(), { key: KEYS.rsa, header: { alg: 'ES256', kid: undefined } })],
      ['ES256 with the RSA key\'s kid', mint(claims(), { key: KEYS.ec, header: { kid: 'rsa-1' } })],
      ['ES256 signature DER-encoded', mint(claims(), { key: KEYS.ec, sign: (i) => crypto.sign('sha256', Buffer.from(i), { key: KEYS.ec.privateKey, dsaEncoding: 'der' }) })],
      ['PS256 signature under alg RS256', mint(claims(), { sign: (i) => crypto.sign('sha256', Buffer.from(i), { key: KEYS.rsa.privateKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING }) })],
      ['alg PS256', mint(claims(), { header: { alg: 'PS256' }, sign: (i) => crypto.sign('sha256', Buffer.from(i), { key: KEYS.rsa.privateKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING }) })],
      ['missing exp', mint(claims({ exp: undefined }))],
      ['exp a string', mint(claims({ exp: String(t + 600) }))],
      ['missing sub', mint(claims({ sub: undefined }))],
      ['empty sub', mint(claims({ sub: '' }))],
      ['sub not a string', mint(claims({ sub: 42 }))],
      ['unknown kid', mint(claims(), { header: { kid: 'no-such-key' } })],
      ['crit header', mint(claims(), { header: { crit: ['exp'] } })],
      ['crit header (empty list)', mint(claims(), { header: { crit: [] } })],
      ['typ dpop+jwt', mint(claims(), { header: { typ: 'dpop+jwt' } })],
      ['two parts', `${vh}.${vp}`],
      ['four parts', `${valid}.${vp}`],
      ['one part', vh],
      ['garbage', 'not-a-jwt'],
      ['garbage with dots', '!!!.???.***'],
      ['header not JSON', `${b64u('{alg:RS256')}.${vp}.${valid.split('.')[2]}`],
      ['payload not JSON', mint(undefined, { rawPayload: '{"sub":' })],
      ['payload a JSON array', mint(undefined, { rawPayload: '[]' })],
      ['claims with duplicate keys', mint(undefined, { rawPayload: `{"iss":"${ISSUER}","aud":"${resourceOf('/mcp')}","sub":"alice","sub":"root","exp":${t + 600}}` })],
      ['base64 with padding', `${vh}=.${vp}.${valid.split('.')[2]}`],
    ];
    const spawned = gw.childPids().length;
    const m0 = await metrics(gw);
    for (const [what, tok] of cases) {
      const r = await authPost(gw, initMsg(), tok);
      await assertRefused(r, { error: 'invalid_token', what });
    }
    assert.equal(gw.childPids().length, spawned, 'no child spawned for refused tokens');
    const m1 = await metrics(gw);
    assert.equal(m1['mcpgw_auth_refused_total{reason="invalid"}'] - m0['mcpgw_auth_refused_total{reason="invalid"}'], cases.length, 'invalid refusals counted');
    // The gateway still serves the good token afterwards.
    const { sid } = await initAuth(gw, valid);
    await echo(gw, valid, sid, 'after the bad tokens');
    await (await authDel(gw, valid, { sid })).done();
  });

  test('jwt: accepted edge cases: exp 30 s ago within clock_skew_s, nbf 30 s ahead, aud array, typ at+jwt, no typ, no kid', async () => {
    const t = now();
    for (const [what, tok] of [
      ['exp 30 s in the past (clock_skew_s 60)', mint(claims({ exp: t - 30, iat: t - 630 }))],
      ['nbf 30 s in the future (clock_skew_s 60)', mint(claims({ nbf: t + 30 }))],
      ['aud array containing the resource', mint(claims({ aud: ['https://other.example', resourceOf('/mcp')] }))],
      ['typ at+jwt', mint(claims(), { header: { typ: 'at+jwt' } })],
      ['no typ', mint(claims(), { header: { typ: undefined } })],
      ['no kid (ES256)', mint(claims(), { key: KEYS.ec, header: { kid: undefined } })],
    ]) {
      const r = await authPost(gw, initMsg(), tok);
      const body = await r.done();
      assert.equal(r.status, 200, `${what}: HTTP ${r.status} ${body} ${r.headers['www-authenticate'] ?? ''}`);
      const d = await authDel(gw, tok, { sid: r.headers['mcp-session-id'] });
      await d.done();
      assert.ok(d.status < 300, `${what}: DELETE ${d.status}`);
    }
  });

  test('jwt: required_scopes: 403 insufficient_scope naming the scopes; scope and scp grant them', async () => {
    const aud = resourceOf('/scoped');
    const url = `${gw.base}/scoped`;
    // No token: 401 with scope= and no error.
    await assertRefused(await authPost(gw, initMsg(), undefined, { url }), { serverPath: '/scoped', scope: 'mcp:tools', what: 'no token' });
    // Valid token without the scope: 403.
    const m0 = await metrics(gw);
    for (const [what, c] of [
      ['no scope claim', claims({ aud })],
      ['other scopes', claims({ aud, scope: 'mcp:read mcp:toolsx' })],
      ['scope as a prefix', claims({ aud, scope: 'mcp:tool' })],
      ['scp array without it', claims({ aud, scp: ['mcp:read', 'tools'] })],
    ]) {
      const r = await authPost(gw, initMsg(), mint(c), { url });
      await assertRefused(r, { status: 403, error: 'insufficient_scope', scope: 'mcp:tools', serverPath: '/scoped', what });
    }
    const m1 = await metrics(gw);
    assert.equal(m1['mcpgw_auth_refused_total{reason="insufficient_scope"}'] - m0['mcpgw_auth_refused_total{reason="insufficient_scope"}'], 4);
    // Granted: scope string, scp array, scp string.
    for (const [what, c] of [
      ['scope "x mcp:tools"', claims({ aud, sub: 's1', scope: 'x mcp:tools' })],
      ['scp ["mcp:tools"]', claims({ aud, sub: 's2', scp: ['mcp:tools'] })],
      ['scp ["a", "mcp:tools"]', claims({ aud, sub: 's3', scp: ['a', 'mcp:tools'] })],
      ['scp "mcp:tools"', claims({ aud, sub: 's4', scp: 'mcp:tools' })],
    ]) {
      const tok = mint(c);
      const { sid } = await initAuth(gw, tok, { url });
      await echo(gw, tok, sid, what, { url });
      await (await authDel(gw, tok, { sid, url })).done();
    }
    // One token for two audiences, without the scope: fine on /mcp, 403 on /scoped, each time
    // (a verification remembered for one server says nothing about another).
    const both2 = mint(claims({ aud: [resourceOf('/mcp'), aud], sub: 's5' }));
    for (let i = 0; i < 2; i++) {
      const ok = await authPost(gw, initMsg(), both2);
      await ok.done();
      assert.equal(ok.status, 200, ok.text());
      await (await authDel(gw, both2, { sid: ok.headers['mcp-session-id'] })).done();
      await assertRefused(await authPost(gw, initMsg(), both2, { url }), { status: 403, error: 'insufficient_scope', scope: 'mcp:tools', serverPath: '/scoped', what: `two audiences, round ${i}` });
    }
    // Two required scopes: both must be granted.
    const url2 = `${gw.base}/two`;
    const aud2 = resourceOf('/two');
    await assertRefused(await authPost(gw, initMsg(), mint(claims({ aud: aud2, scope: 'mcp:tools' })), { url: url2 }),
      { status: 403, error: 'insufficient_scope', scope: 'mcp:tools mcp:write', serverPath: '/two', what: 'one of two scopes' });
    const both = mint(claims({ aud: aud2, scope: 'mcp:write mcp:tools' }));
    const { sid } = await initAuth(gw, both, { url: url2 });
    await echo(gw, both, sid, 'two scopes', { url: url2 });
    await (await authDel(gw, both, { sid, url: url2 })).done();
  });

  test('metadata: RFC 9728 documents at the path-inserted and root well-known URLs, matching the challenge', async () => {
    const expect = {
      '/mcp': { resource: resourceOf('/mcp'), authorization_servers: [ISSUER], bearer_methods_supported: ['header'] },
      '/scoped': { resource: resourceOf('/scoped'), authorization_servers: [ISSUER], scopes_supported: ['mcp:tools'], bearer_methods_supported: ['header'] },
      '/two': { resource: resourceOf('/two'), authorization_servers: [ISSUER], scopes_supported: ['mcp:tools', 'mcp:write'], bearer_methods_supported: ['header'] },
    };
    const docs = [[`${META_PREFIX}/mcp`, expect['/mcp']], [META_PREFIX, expect['/mcp']],
      [`${META_PREFIX}/scoped`, expect['/scoped']], [`${META_PREFIX}/two`, expect['/two']]];
    for (const [p, want] of docs) {
      for (const headers of [{}, { Authorization: 'Bearer not-a-valid-token' }, { Origin: 'https://elsewhere.example' }]) {
        const r = await fetchPath(gw, p, { headers });
        assert.equal(r.status, 200, `${p} ${JSON.stringify(headers)}: ${r.text()}`);
        assert.match(r.headers['content-type'] || '', /^application\/json\b/, p);
        assert.equal(r.headers['access-control-allow-origin'], '*', p);
        assert.deepEqual(JSON.parse(r.text()), want, p);
      }
    }
    // The challenge's resource_metadata path is the route serving that server's document.
    for (const sp of ['/mcp', '/scoped', '/two']) {
      const r = await authPost(gw, initMsg(), undefined, { url: `${gw.base}${sp}` });
      await r.done();
      const ch = parseChallenge(r.headers['www-authenticate']);
      const u = new URL(ch.params.resource_metadata);
      assert.equal(u.origin, PUBLIC_URL);
      const doc = await fetchPath(gw, u.pathname);
      assert.equal(doc.status, 200, `${u.pathname}: ${doc.text()}`);
      assert.equal(JSON.parse(doc.text()).resource, resourceOf(sp));
    }
    // Only GET (and HEAD); the Host rule still holds.
    const post = await fetchPath(gw, `${META_PREFIX}/mcp`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    assert.equal(post.status, 405, post.text());
    // A browser's CORS preflight (the SDK adds MCP-Protocol-Version) is answered.
    const pre = await fetchPath(gw, `${META_PREFIX}/mcp`, { method: 'OPTIONS', headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'mcp-protocol-version' } });
    assert.equal(pre.status, 204, pre.text());
    assert.equal(pre.headers['access-control-allow-origin'], '*');
    assert.match(pre.headers['access-control-allow-headers'], /mcp-protocol-version/i);
    const evil = await fetchPath(gw, `${META_PREFIX}/mcp`, { headers: { Host: 'evil.example' } });
    assert.equal(evil.status, 403, evil.text());
    // Paths that name no server are not found.
    for (const p of [`${META_PREFIX}/nope`, `${META_PREFIX}/mcp/sse`, `${META_PREFIX}x`]) {
      const r = await fetchPath(gw, p);
      assert.equal(r.status, 404, `${p}: ${r.status}`);
    }
  });

  test('owner binding: another principal gets 404 for a session on POST, GET, DELETE; the owner carries on', async () => {
    const a = good();
    const b = bobToken();
    const { sid } = await initAuth(gw, a);
    const p = await authPost(gw, rpc('ping'), b, { sid });
    const pt = await p.done();
    assert.equal(p.status, 404, pt);
    assertRpcError(p, pt);
    const tc = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'stolen' } }), b, { sid });
    await tc.done();
    assert.equal(tc.status, 404, tc.text());
    const g = await authGet(gw, b, { sid });
    const gt = await g.done();
    assert.equal(g.status, 404, gt);
    const d = await authDel(gw, b, { sid });
    const dt = await d.done();
    assert.equal(d.status, 404, dt);
    // A resume (Last-Event-ID) is the same GET: 404.
    const gr = await authGet(gw, b, { sid, headers: { 'Last-Event-ID': '1-1' } });
    await gr.done();
    assert.equal(gr.status, 404, gr.text());
    // The 404 says no more than an unknown session's would.
    const unknown = await authPost(gw, rpc('ping', undefined, 'u'), b, { sid: `${sid.slice(0, -4)}zzzz` });
    const ut = await unknown.done();
    assert.equal(unknown.status, 404, ut);
    assert.deepEqual(JSON.parse(pt).error, JSON.parse(ut).error, 'same 404 as an unknown session');
    assert.ok(!gw.childMessages().some((m) => m?.params?.arguments?.text === 'stolen'), 'the child never saw bob\'s call');
    // The owner: the session still works, its GET stream opens, DELETE ends it.
    await echo(gw, a, sid, 'mine');
    const ga = await authGet(gw, a, { sid });
    assert.equal(ga.status, 200, `owner GET: ${ga.status}`);
    ga.drop();
    const da = await authDel(gw, a, { sid });
    await da.done();
    assert.ok(da.status < 300, `owner DELETE: ${da.status} ${da.text()}`);
  });

  test('owner binding: a batch (2025-03-26) on another principal\'s session gets 404', async (t) => {
    const a = good();
    const b = bobToken();
    const { sid } = await initAuth(gw, a, { version: '2025-03-26' });
    const batch = [rpc('tools/call', { name: 'echo', arguments: { text: 'batch-stolen' } }, 'b1'), rpc('ping', undefined, 'b2')];
    const rb = await authPost(gw, batch, b, { sid, headers: { 'MCP-Protocol-Version': '2025-03-26' } });
    await rb.done();
    assert.equal(rb.status, 404, rb.text());
    const ra = await authPost(gw, batch.map((m, i) => ({ ...m, id: `a${i}`, ...(m.params?.arguments ? { params: { name: 'echo', arguments: { text: 'batch-mine' } } } : {}) })), a, { sid, headers: { 'MCP-Protocol-Version': '2025-03-26' } });
    await ra.done();
    assert.equal(ra.status, 200, ra.text());
    const answers = ra.events().map((e) => e.json).flat().filter(isAnswer);
    assert.equal(answers.length, 2, ra.text());
    assert.ok(!gw.childMessages().some((m) => m?.params?.arguments?.text === 'batch-stolen'));
    await (await authDel(gw, a, { sid })).done();
  });

  test('owner binding: the 2024-11-05 transport: /sse and /messages need a token, and another principal gets 404', async () => {
    const a = good();
    const b = bobToken();
    await assertRefused(await authGet(gw, undefined, { url: `${gw.url}/sse` }), { what: 'GET /mcp/sse without token' });
    await assertRefused(await authGet(gw, 'x.y.z', { url: `${gw.url}/sse` }), { error: 'invalid_token', what: 'GET /mcp/sse bad token' });
    const s = await authGet(gw, a, { url: `${gw.url}/sse` });
    try {
      assert.equal(s.status, 200);
      const ep = await waitFor(() => s.events().find((e) => e.event === 'endpoint'), 5000, 'endpoint event');
      const msgUrl = new URL(ep.data, `${gw.url}/sse`).toString();
      assert.match(msgUrl, /\/mcp\/messages\?sessionId=/);
      await assertRefused(await authPost(gw, initMsg('li'), undefined, { url: msgUrl }), { what: 'POST messages without token' });
      const rb = await authPost(gw, initMsg('li'), b, { url: msgUrl });
      const rbt = await rb.done();
      assert.equal(rb.status, 404, rbt);
      assertRpcError(rb, rbt);
      const ra = await authPost(gw, initMsg('li'), a, { url: msgUrl });
      await ra.done();
      assert.equal(ra.status, 202, ra.text());
      const ans = await s.waitEvent((j) => j.id === 'li' && isAnswer(j));
      assert.ok(ans.json.result, JSON.stringify(ans.json));
      const n = await authPost(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, a, { url: msgUrl });
      await n.done();
      assert.equal(n.status, 202);
      const rb2 = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'legacy-stolen' } }, 'lb'), b, { url: msgUrl });
      await rb2.done();
      assert.equal(rb2.status, 404, rb2.text());
      const ra2 = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'legacy-mine' } }, 'la'), a, { url: msgUrl });
      await ra2.done();
      assert.equal(ra2.status, 202, ra2.text());
      const e = await s.waitEvent((j) => j.id === 'la' && isAnswer(j));
      assert.equal(textOf(e.json), 'legacy-mine');
      assert.ok(!s.events().some((x) => x.json?.id === 'lb'));
    } finally {
      s.drop();
    }
  });

  test('sdk: the official client works through jwt auth; without a token it is refused; metadata discovery', async () => {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { discoverOAuthProtectedResourceMetadata } = await import('@modelcontextprotocol/sdk/client/auth.js');
    const tok = mint(claims({ sub: 'sdk-user' }), { key: KEYS.ed });
    const transport = new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { Authorization: `Bearer ${tok}` } } });
    const client = new Client({ name: 'auth-sdk', version: '1.0.0' }, { capabilities: {} });
    const errors = [];
    client.onerror = (e) => { errors.push(e); };
    await client.connect(transport);
    try {
      const tools = await client.listTools();
      assert.ok(tools.tools.some((t) => t.name === 'echo'));
      const res = await client.callTool({ name: 'echo', arguments: { text: 'sdk through auth' } });
      assert.equal(res.content[0].text, 'sdk through auth');
      // The SDK's GET stream carried the token too (no 401 refusal logged for it).
      await transport.terminateSession();
    } finally {
      await client.close();
    }
    assert.deepEqual(errors.filter((e) => /401|Unauthorized/.test(String(e))), []);

    const bare = new Client({ name: 'auth-sdk-bare', version: '1.0.0' }, { capabilities: {} });
    await assert.rejects(bare.connect(new StreamableHTTPClientTransport(new URL(gw.url))), /401|Unauthorized|auth/i);
    await bare.close().catch(() => {});

    // Path-aware discovery on the gateway's origin, then the root fallback for an unknown path.
    const md = await discoverOAuthProtectedResourceMetadata(new URL(gw.url));
    assert.equal(md.resource, resourceOf('/mcp'));
    assert.deepEqual(md.authorization_servers, [ISSUER]);
    const scoped = await discoverOAuthProtectedResourceMetadata(new URL(`${gw.base}/scoped`));
    assert.deepEqual(scoped.scopes_supported, ['mcp:tools']);
    const root = await discoverOAuthProtectedResourceMetadata(new URL(`${gw.base}/not-served`));
    assert.equal(root.resource, resourceOf('/mcp'));
  });

  test('metrics: refusals are counted by server and reason; principals are a gauge', async () => {
    const m0 = await metrics(gw);
    for (const k of ['missing', 'invalid', 'insufficient_scope']) assert.ok(`mcpgw_auth_refused_total{reason="${k}"}` in m0, `${k} series`);
    assert.ok('mcpgw_rate_limited_total' in m0);
    assert.ok('mcpgw_slow_clients_closed_total' in m0);
    assert.ok('mcpgw_principals' in m0);
    await (await authPost(gw, initMsg(), undefined)).done();
    await (await authGet(gw, undefined)).done();
    await (await authPost(gw, initMsg(), 'a.b.c')).done();
    await (await authPost(gw, initMsg(), mint(claims({ aud: resourceOf('/scoped') })), { url: `${gw.base}/scoped` })).done();
    const m1 = await metrics(gw);
    const d = (k) => m1[`mcpgw_auth_refused_total{reason="${k}"}`] - m0[`mcpgw_auth_refused_total{reason="${k}"}`];
    assert.equal(d('missing'), 2);
    assert.equal(d('invalid'), 1);
    assert.equal(d('insufficient_scope'), 1);
    // Each on the server whose endpoint refused it.
    const ds = (server, k) => m1[`mcpgw_auth_refused_total{server="${server}",reason="${k}"}`] - m0[`mcpgw_auth_refused_total{server="${server}",reason="${k}"}`];
    assert.deepEqual(['missing', 'invalid', 'insufficient_scope'].map((k) => ds('example', k)), [2, 1, 0], 'example\'s refusals');
    assert.deepEqual(['missing', 'invalid', 'insufficient_scope'].map((k) => ds('scoped', k)), [0, 0, 1], 'scoped\'s refusals');
    // Principals holding sessions are in the table: two new ones add (at least) two.
    const before0 = (await metrics(gw)).mcpgw_principals;
    const t1 = mint(claims({ sub: 'gauge-user-1' }));
    const t2 = mint(claims({ sub: 'gauge-user-2' }));
    const s1 = await initAuth(gw, t1);
    const s2 = await initAuth(gw, t2);
    await echo(gw, t1, s1.sid, 'interned: the same principal again');
    const m2 = await metrics(gw);
    assert.ok(m2.mcpgw_principals >= 2, `principals ${m2.mcpgw_principals}`);
    assert.ok(m2.mcpgw_principals <= before0 + 2, `principals ${before0} -> ${m2.mcpgw_principals}: one entry per principal`);
    await (await authDel(gw, t1, { sid: s1.sid })).done();
    await (await authDel(gw, t2, { sid: s2.sid })).done();
  });
});

// =================================================================================================
// mode none, configuration checks
// =================================================================================================

test('mode none: no token needed, and no metadata routes (404)', async () => {
  await withGateway({}, async (gw) => {
    const r = await authPost(gw, initMsg(), undefined);
    await r.done();
    assert.equal(r.status, 200, r.text());
    assert.equal(r.headers['www-authenticate'], undefined);
    for (const p of [`${META_PREFIX}/mcp`, META_PREFIX]) {
      const m = await fetchPath(gw, p);
      assert.equal(m.status, 404, `${p}: ${m.status} ${m.text()}`);
    }
    await (await authDel(gw, undefined, { sid: r.headers['mcp-session-id'] })).done();
  });
});

test('config: mode none refuses a non-loopback listen address; bearer/jwt need their keys', () => {
  const dir = tmpdir('mcpgw-auth-cfg-');
  const check = (name, ini) => {
    const f = path.join(dir, `${name}.ini`);
    fs.writeFileSync(f, ini);
    return spawnSync(GW_BIN, ['-t', '-c', f], { encoding: 'utf8', timeout: 10000 });
  };
  const server = `[server:example]\npath = /mcp\ncommand = ${EXAMPLE}\n`;
  const r1 = check('none-any', `[gateway]\nlisten = 0.0.0.0:0\n${server}`);
  assert.notEqual(r1.status, 0, `exit status: ${r1.stdout}${r1.stderr}`);
  assert.match(r1.stdout + r1.stderr, /mode: none needs a loopback listen address/);
  const r2 = check('none-explicit', `[gateway]\nlisten = 0.0.0.0:0\n[auth]\nmode = none\n${server}`);
  assert.notEqual(r2.status, 0);
  assert.match(r2.stdout + r2.stderr, /none needs a loopback listen address/);
  for (const listen of ['127.0.0.1:0', '[::1]:0', 'localhost:0', '127.0.0.2:0']) {
    const r = check(`none-lo-${listen.replace(/\W/g, '')}`, `[gateway]\nlisten = ${listen}\n${server}`);
    assert.equal(r.status, 0, `${listen}: ${r.stdout}${r.stderr}`);
  }
  const jwks = path.join(dir, 'jwks.json');
  writeJwks(jwks, [KEYS.rsa]);
  const r3 = check('jwt-any', `[gateway]\nlisten = 0.0.0.0:0\n[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = ${ISSUER}\njwks_file = ${jwks}\n${server}`);
  assert.equal(r3.status, 0, r3.stdout + r3.stderr);
  const r4 = check('jwt-no-public', `[gateway]\nlisten = 0.0.0.0:0\n[auth]\nmode = jwt\nissuer = ${ISSUER}\njwks_file = ${jwks}\n${server}`);
  assert.notEqual(r4.status, 0);
  assert.match(r4.stdout + r4.stderr, /public_url/);
  // A JWKS holding a private key, or only a too-small RSA key, is refused.
  const priv = path.join(dir, 'priv.json');
  fs.writeFileSync(priv, JSON.stringify({ keys: [{ ...KEYS.rsa.privateKey.export({ format: 'jwk' }), kid: 'p' }] }));
  const r5 = check('jwt-priv', `[gateway]\n[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = ${ISSUER}\njwks_file = ${priv}\n${server}`);
  assert.notEqual(r5.status, 0, r5.stdout + r5.stderr);
  const small = path.join(dir, 'small.json');
  const k1024 = crypto.generateKeyPairSync('rsa', { modulusLength: 1024 });
  fs.writeFileSync(small, JSON.stringify({ keys: [{ ...k1024.publicKey.export({ format: 'jwk' }), kid: 's' }] }));
  const r6 = check('jwt-small', `[gateway]\n[auth]\nmode = jwt\npublic_url = ${PUBLIC_URL}\nissuer = ${ISSUER}\njwks_file = ${small}\n${server}`);
  assert.notEqual(r6.status, 0, r6.stdout + r6.stderr);
});

// =================================================================================================
// bearer mode and SIGHUP reloads
// =================================================================================================

test('bearer: listed tokens work (with scopes), others get 401; SIGHUP adds and removes tokens', async () => {
  const dir = tmpdir('mcpgw-auth-bearer-');
  const tokensFile = path.join(dir, 'tokens');
  const t1 = randomToken('one');
  const t2 = randomToken('two');
  const t3 = randomToken('three');
  fs.writeFileSync(tokensFile, `# tokens\n\nsha256:${sha256hex(t1)} alice mcp:tools\n  # indented comment\nsha256:${sha256hex(t2)} bob\n`);
  await withGateway({
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile, authorization_servers: 'https://as1.example, https://as2.example' },
    servers: [{ name: 'example', path: '/mcp' }, { name: 'scoped', path: '/scoped', extra: 'required_scopes = mcp:tools' }],
  }, async (gw) => {
    const a = await initAuth(gw, t1);
    await echo(gw, t1, a.sid, 'bearer alice');
    const b = await initAuth(gw, t2);
    await echo(gw, t2, b.sid, 'bearer bob');
    for (const [what, tok] of [['wrong token', randomToken('one')], ['a hash, not the token', sha256hex(t1)], ['token plus a byte', `${t1}x`], ['token prefix', t1.slice(0, -1)]]) {
      await assertRefused(await authPost(gw, rpc('ping'), tok, { sid: a.sid }), { error: 'invalid_token', what });
    }
    // Scopes from the tokens file.
    const url = `${gw.base}/scoped`;
    const s = await initAuth(gw, t1, { url });
    await echo(gw, t1, s.sid, 'scoped alice', { url });
    await assertRefused(await authPost(gw, initMsg(), t2, { url }), { status: 403, error: 'insufficient_scope', scope: 'mcp:tools', serverPath: '/scoped', what: 'bob on /scoped' });
    // Metadata of bearer mode: the configured authorization servers.
    const md = await fetchPath(gw, `${META_PREFIX}/mcp`);
    assert.deepEqual(JSON.parse(md.text()), { resource: resourceOf('/mcp'), authorization_servers: ['https://as1.example', 'https://as2.example'], bearer_methods_supported: ['header'] });
    // Owner binding across bearer principals.
    const x = await authPost(gw, rpc('ping'), t2, { sid: a.sid });
    await x.done();
    assert.equal(x.status, 404, x.text());

    // Reload: t3 added (as carol), t2 removed.
    await assertRefused(await authPost(gw, initMsg(), t3), { error: 'invalid_token', what: 't3 before reload' });
    fs.writeFileSync(tokensFile, `sha256:${sha256hex(t1)} alice mcp:tools\nsha256:${sha256hex(t3)} carol\n`);
    await reload(gw, 1);
    const c = await initAuth(gw, t3);
    await echo(gw, t3, c.sid, 'carol after reload');
    await assertRefused(await authPost(gw, rpc('ping'), t2, { sid: b.sid }), { error: 'invalid_token', what: 'removed token on its own session' });
    await assertRefused(await authPost(gw, initMsg(), t2), { error: 'invalid_token', what: 'removed token' });
    await echo(gw, t1, a.sid, 'alice survives the reload');

    // A broken tokens file on SIGHUP: the running tokens stay, the error is logged.
    fs.writeFileSync(tokensFile, `sha256:${sha256hex(t1)} alice\nsha256:nothex carol\n`);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: .*tokens:2: .*; the running configuration stays/);
    await echo(gw, t3, c.sid, 'carol after a broken reload');
    await echo(gw, t1, s.sid, 'alice keeps her scope', { url });
    for (const sid of [a.sid, s.sid]) await (await authDel(gw, t1, { sid, url: sid === s.sid ? url : undefined })).done();
    await (await authDel(gw, t3, { sid: c.sid })).done();
  });
});

test('jwt: SIGHUP rotates the JWKS (new key in, old key out); a broken JWKS keeps the running keys', async () => {
  const dir = tmpdir('mcpgw-auth-rot-');
  const jwks = path.join(dir, 'jwks.json');
  writeJwks(jwks, [KEYS.rsa]);
  await withGateway({ auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: jwks } }, async (gw) => {
    const oldTok = mint(claims({ sub: 'rot' }), { key: KEYS.rsa });
    const newTok = mint(claims({ sub: 'rot' }), { key: KEYS.rsa2 });
    const s = await initAuth(gw, oldTok);
    await assertRefused(await authPost(gw, initMsg(), newTok), { error: 'invalid_token', what: 'new key before rotation' });
    writeJwks(jwks, [KEYS.rsa2, KEYS.ec]);
    await reload(gw, 1);
    // The same principal (sub) keeps its session with a token of the new key.
    await echo(gw, newTok, s.sid, 'rotated');
    await assertRefused(await authPost(gw, rpc('ping'), oldTok, { sid: s.sid }), { error: 'invalid_token', what: 'old key after rotation' });
    await assertRefused(await authPost(gw, initMsg(), oldTok), { error: 'invalid_token', what: 'old key, new session' });
    const ecTok = mint(claims({ sub: 'rot-ec' }), { key: KEYS.ec });
    const e = await initAuth(gw, ecTok);

    for (const [i, [what, text]] of [
      ['not JSON', '{"keys": ['],
      ['a private key', JSON.stringify({ keys: [{ ...KEYS.rsa.privateKey.export({ format: 'jwk' }), kid: 'x' }] })],
      ['no usable key', JSON.stringify({ keys: [{ kty: 'oct', k: 'AAAA' }] })],
      ['empty', ''],
    ].entries()) {
      fs.writeFileSync(jwks, text);
      gw.proc.kill('SIGHUP');
      await waitLogCount(gw, /SIGHUP: .*jwks\.json: .*; the running configuration stays/, i + 1);
      await echo(gw, newTok, s.sid, `still rotated after ${what}`);
      await assertRefused(await authPost(gw, initMsg(), oldTok), { error: 'invalid_token', what: `old key after broken JWKS (${what})` });
    }
    fs.rmSync(jwks);
    gw.proc.kill('SIGHUP');
    await waitLogCount(gw, /SIGHUP: .*jwks\.json: .*; the running configuration stays/, 5);
    await echo(gw, ecTok, e.sid, 'jwks file gone, keys stay');
    await (await authDel(gw, newTok, { sid: s.sid })).done();
    await (await authDel(gw, ecTok, { sid: e.sid })).done();
  });
});

test('jwt: an exp at the bottom of the int64 range is expired, not wrapped around', async () => {
  // now - exp overflows a signed 64-bit difference when exp is near INT64_MIN: the token must
  // still count as expired (it is 292 billion years old), however its issuer came to sign it.
  // Its own gateway: a build with UBSan stops at the overflow.
  const dir = tmpdir('mcpgw-auth-i64-');
  const jwks = path.join(dir, 'jwks.json');
  writeJwks(jwks, [KEYS.rsa]);
  await withGateway({ auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: jwks } }, async (gw) => {
    const accepted = [];
    for (const exp of ['-9223372036854775808', '-1e19', '-9223372036854775807', '-9000000000000000000']) {
      const raw = `{"iss":"${ISSUER}","aud":"${resourceOf('/mcp')}","sub":"alice","exp":${exp}}`;
      const r = await authPost(gw, initMsg(), mint(undefined, { rawPayload: raw })).catch((e) => ({ error: e }));
      if (r.error) { accepted.push(`exp ${exp}: ${r.error.message} (gateway exit ${gw.proc.exitCode ?? gw.proc.signalCode})`); break; }
      await r.done();
      const sid = r.headers['mcp-session-id'];
      if (sid) await (await authDel(gw, mint(claims()), { sid })).done();
      if (r.status !== 401) accepted.push(`exp ${exp}: HTTP ${r.status}`);
    }
    assert.deepEqual(accepted, [], `tokens expired long ago were accepted\n${gw.logs().split('\n').filter((l) => /runtime error|overflow/.test(l)).join('\n')}`);
  });
});

test('jwt: a token that expires while in use is refused from then on (clock_skew_s 0)', async () => {
  const dir = tmpdir('mcpgw-auth-exp-');
  const jwks = path.join(dir, 'jwks.json');
  writeJwks(jwks, [KEYS.ed]);
  await withGateway({ auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: jwks, clock_skew_s: 0 } }, async (gw) => {
    const t = now();
    const short = mint(claims({ sub: 'short', exp: t + 2 }), { key: KEYS.ed });
    const long = mint(claims({ sub: 'short', exp: t + 600 }), { key: KEYS.ed });
    const { sid } = await initAuth(gw, short);
    await echo(gw, short, sid, 'before expiry');
    // Polled until refused: a remembered verification must not outlive exp.
    const r = await waitFor(async () => {
      const p = await authPost(gw, rpc('ping'), short, { sid });
      await p.done();
      if (p.status === 200) { await new Promise((res) => setTimeout(res, 100)); return false; } // poll pace
      return p;
    }, scaled(8000), 'the short-lived token to be refused');
    assert.ok(now() > t + 2, 'refused only after exp');
    await assertRefused(r, { error: 'invalid_token', what: 'expired during use' });
    await echo(gw, long, sid, 'a fresh token of the same principal continues the session');
    await (await authDel(gw, long, { sid })).done();
  });
});

// =================================================================================================
// children
// =================================================================================================

test('child environment: only PATH, HOME, LANG, the server env and the gateway\'s MCPGW_SERVER and MCPGW_SESSION_LABEL (a label, never the id; a configured one is left out); the token never reaches the child', async (t) => {
  if (pooledSkip(t, 'one child per session (its environment names the session)')) return;
  const dir = tmpdir('mcpgw-auth-env-');
  const tokensFile = path.join(dir, 'tokens');
  const tok = randomToken('envsecret');
  fs.writeFileSync(tokensFile, `sha256:${sha256hex(tok)} envuser\n`);
  const env = {
    SECRET_FROM_GATEWAY: 'x',
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: process.env.LANG ?? 'C.UTF-8',
    MCP_TOKEN: tok, // even a token in the gateway's own environment stays there
  };
  await withGateway({
    env,
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', env: 'ONLY_THIS=1 MCPGW_SERVER=forged MCPGW_SESSION_LABEL=forged' }],
  }, async (gw) => {
    const { sid, pid } = await initAuth(gw, tok);
    assert.ok(pid, `child pid in the log:\n${gw.logs()}`);
    await echo(gw, tok, sid, 'env check');
    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
    const got = Object.fromEntries(environ.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const label = new RegExp(`session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created: .* label=([0-9a-f]{16})`).exec(gw.logs())?.[1];
    assert.ok(label, gw.logs());
    const want = { ONLY_THIS: '1', MCPGW_SERVER: 'example', MCPGW_SESSION_LABEL: label };
    for (const k of ['PATH', 'HOME', 'LANG']) if (env[k] !== undefined) want[k] = env[k];
    assert.deepEqual(got, want, `child environ: ${environ.join(' ')}`);
    assert.ok(!environ.join('\n').includes(sid), 'session id not in environ');
    assert.ok(!environ.join('\n').includes(tok), 'token not in environ');
    const lines = gw.childLines();
    assert.ok(lines.length >= 3, 'the child logged what it received');
    assert.ok(!lines.some((l) => l.includes(tok) || l.includes('Bearer') || /authorization/i.test(l)), 'token not in the child\'s input');
    await (await authDel(gw, tok, { sid })).done();
  });
});

// =================================================================================================
// limits: sessions per principal, slow clients, header size
// =================================================================================================

describe('limits (bearer)', { concurrency: true }, () => {
  let gw;
  const dir = tmpdir('mcpgw-auth-lim-');
  const tokensFile = path.join(dir, 'tokens');
  const T = { alice: randomToken('alice'), bob: randomToken('bob'), carol: randomToken('carol'), dave: randomToken('dave'), gina: randomToken('gina') };
  fs.writeFileSync(tokensFile, Object.entries(T).map(([n, t]) => `sha256:${sha256hex(t)} ${n}`).join('\n') + '\n');

  before(async () => {
    gw = await startGateway({
      gateway: { client_header_timeout_ms: HEADER_TIMEOUT_MS, client_body_timeout_ms: BODY_TIMEOUT_MS, connection_timeout_s: 60, max_header_bytes: 2048 },
      auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile, max_sessions_per_principal: 2 },
    });
  });

  after(async () => {
    if (gw) await gw.stop(); // asserts a clean exit
  });

  test('max_sessions_per_principal: the third initialize gets 429; others unaffected; DELETE frees a slot', async () => {
    const s1 = await initAuth(gw, T.alice);
    const s2 = await initAuth(gw, T.alice);
    const r = await authPost(gw, initMsg(), T.alice);
    const text = await r.done();
    assert.equal(r.status, 429, text);
    assertRpcError(r, text);
    assert.equal(r.headers['mcp-session-id'], undefined, 'no session for the refused initialize');
    const legacy = await authGet(gw, T.alice, { url: `${gw.url}/sse` });
    await legacy.done(scaled(5000)).catch(() => legacy.drop());
    assert.equal(legacy.status, 429, `legacy /sse beyond the cap: ${legacy.status}`);
    const b = await initAuth(gw, T.bob);
    await echo(gw, T.bob, b.sid, 'bob unaffected');
    await echo(gw, T.alice, s1.sid, 'alice sessions still work');
    const d = await authDel(gw, T.alice, { sid: s2.sid });
    await d.done();
    assert.ok(d.status < 300, `${d.status}`);
    const s3 = await initAuth(gw, T.alice);
    await echo(gw, T.alice, s3.sid, 'slot reused');
    for (const [tok, sid] of [[T.alice, s1.sid], [T.alice, s3.sid], [T.bob, b.sid]]) await (await authDel(gw, tok, { sid })).done();
  });

  test('max_header_bytes: request headers beyond it get 431, and the gateway keeps serving', async () => {
    for (const size of [3000, 12000, 40000]) {
      const r = await authPost(gw, initMsg(), T.dave, { headers: { 'X-Big': 'a'.repeat(size) } }).catch((e) => ({ error: e }));
      assert.ok(!r.error, `${size}: ${r.error}`);
      const text = await r.done();
      assert.equal(r.status, 431, `${size}-byte header: ${r.status} ${text}`);
    }
    // Many headers that add up.
    const many = {};
    for (let i = 0; i < 40; i++) many[`X-H${i}`] = 'b'.repeat(60);
    const r2 = await authPost(gw, initMsg(), T.dave, { headers: many });
    await r2.done();
    assert.equal(r2.status, 431, 'many headers');
    const s = await initAuth(gw, T.dave);
    await echo(gw, T.dave, s.sid, 'after 431');
    await (await authDel(gw, T.dave, { sid: s.sid })).done();
  });

  test('client_header_timeout_ms: headers dripped one byte per 100 ms are cut off in time', async () => {
    const m0 = await metrics(gw);
    const c = rawConn(gw);
    await c.connected;
    const line = 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n';
    c.sock.write(line);
    const since = c.t0;
    const took = await drip(c, `X-Drip: ${'d'.repeat(200)}\r\n\r\n`, 100, HEADER_TIMEOUT_MS + CLOSE_SLACK_MS + 1000, since);
    assert.ok(took !== null, 'the gateway closed the connection');
    assert.ok(took >= HEADER_TIMEOUT_MS - 50, `closed after ${took} ms: not before the deadline`);
    assert.ok(took <= HEADER_TIMEOUT_MS + CLOSE_SLACK_MS, `closed after ${took} ms`);
    c.sock.destroy();
    const m1 = await metrics(gw);
    assert.ok(m1.mcpgw_slow_clients_closed_total > m0.mcpgw_slow_clients_closed_total, 'slow_clients_closed counted');
    await gw.waitLog(/closing a slow client's connection: its request line and headers did not arrive in time/);
  });

  test('client_header_timeout_ms: a request line dripped from the connection start is cut off', async () => {
    const c = rawConn(gw);
    await c.connected;
    const took = await drip(c, `GET /healthz?${'q'.repeat(200)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`, 100, HEADER_TIMEOUT_MS + CLOSE_SLACK_MS + 1000, c.t0);
    assert.ok(took !== null, 'closed');
    assert.ok(took >= HEADER_TIMEOUT_MS - 50 && took <= HEADER_TIMEOUT_MS + CLOSE_SLACK_MS, `closed after ${took} ms`);
    assert.ok(!/HTTP\/1\.1 200/.test(c.data), 'no answer to the dripped request');
    c.sock.destroy();
  });

  test('client_body_timeout_ms: a body that stalls half-way is cut off', async () => {
    const body = JSON.stringify(initMsg());
    const c = rawConn(gw);
    await c.connected;
    c.sock.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${T.carol}\r\nContent-Type: application/json\r\n`
      + `Accept: ${ACCEPT_BOTH}\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, Math.floor(body.length / 2))}`);
    const since = performance.now();
    await waitFor(() => c.closed() || performance.now() - since > BODY_TIMEOUT_MS + CLOSE_SLACK_MS + 1000, BODY_TIMEOUT_MS + CLOSE_SLACK_MS + 3000, 'close');
    assert.ok(c.closed(), 'the gateway closed the stalled upload');
    const took = (c.closedAt ?? performance.now()) - since;
    assert.ok(took >= BODY_TIMEOUT_MS - 50 && took <= BODY_TIMEOUT_MS + CLOSE_SLACK_MS, `closed after ${took} ms`);
    assert.ok(!/mcp-session-id/i.test(c.data), 'no session was made');
    c.sock.destroy();
    await gw.waitLog(/closing a slow client's connection: its request body did not arrive in time/);
  });

  test('client_body_timeout_ms: a body dripped slowly (but steadily) is cut off at the deadline', async () => {
    const body = JSON.stringify(initMsg());
    const c = rawConn(gw);
    await c.connected;
    c.sock.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${T.carol}\r\nContent-Type: application/json\r\n`
      + `Accept: ${ACCEPT_BOTH}\r\nContent-Length: ${body.length}\r\n\r\n`);
    const since = performance.now();
    const took = await drip(c, body, 100, BODY_TIMEOUT_MS + CLOSE_SLACK_MS + 1000, since);
    assert.ok(took !== null, 'closed');
    assert.ok(took >= BODY_TIMEOUT_MS - 50 && took <= BODY_TIMEOUT_MS + CLOSE_SLACK_MS, `closed after ${took} ms`);
    c.sock.destroy();
  });

  test('responses are exempt: an SSE GET stream and a slow tools/call outlive both timeouts', async () => {
    const { sid } = await initAuth(gw, T.carol);
    const g = await authGet(gw, T.carol, { sid });
    assert.equal(g.status, 200);
    const opened = performance.now();
    // 30 x 100 ms = 3 s: past both 1 s deadlines and the janitor tick.
    const r = await authPost(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 30, interval_ms: 100 } }, 'slow-1'), T.carol, { sid });
    assert.equal(r.status, 200);
    await r.done(scaled(20000));
    const ans = r.events().map((e) => e.json).find(isAnswer);
    assert.ok(ans?.result, `slow call answered: ${r.text()}`);
    assert.ok(performance.now() - opened >= HEADER_TIMEOUT_MS + 1500, 'the call really outlived the deadlines');
    assert.equal(g.ended, false, 'the GET stream is still open');
    await echo(gw, T.carol, sid, 'session fine');
    g.drop();
    await (await authDel(gw, T.carol, { sid })).done();
  });

  /** A raw keep-alive POST of a ping on sid with token. */
  const rawPing = (sid, token, id) => {
    const body = JSON.stringify(rpc('ping', undefined, id));
    return `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n`
      + `Accept: ${ACCEPT_BOTH}\r\nMcp-Session-Id: ${sid}\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  const answered = (c, id) => c.data.includes(`"id":"${id}","result":{}`);

  test('idle keep-alive between requests is not cut by the header timeout', async () => {
    const { sid } = await initAuth(gw, T.gina);
    const c = rawConn(gw);
    await c.connected;
    c.sock.write(rawPing(sid, T.gina, 'ka-1'));
    await waitFor(() => answered(c, 'ka-1') || c.closed(), scaled(5000), 'first answer');
    assert.ok(!c.closed(), `open after the first answer: ${c.data}`);
    assert.doesNotMatch(c.data, /Connection: close/i);
    // The idle time itself is the condition under test.
    await new Promise((r) => setTimeout(r, HEADER_TIMEOUT_MS + 1500));
    assert.ok(!c.closed(), `closed while idle: ${c.data}`);
    c.sock.write(rawPing(sid, T.gina, 'ka-2'));
    await waitFor(() => answered(c, 'ka-2') || c.closed(), scaled(5000), 'second answer');
    assert.ok(answered(c, 'ka-2'), c.data);
    c.sock.destroy();
    await (await authDel(gw, T.gina, { sid })).done();
  });

  test('client_header_timeout_ms also bounds the next request on a kept-alive connection', async (t) => {
    const { sid } = await initAuth(gw, T.gina);
    const c = rawConn(gw);
    await c.connected;
    c.sock.write(rawPing(sid, T.gina, 'kd-1'));
    await waitFor(() => answered(c, 'kd-1') || c.closed(), scaled(5000), 'first answer');
    assert.ok(!c.closed(), `open after the first answer: ${c.data}`);
    // The second request, dripped one byte per 100 ms from its first byte: its request line must
    // not take longer than the header timeout either (else a keep-alive client drips forever,
    // each byte resetting connection_timeout_s).
    const since = performance.now();
    // A long request line (a padded query): at one byte per 100 ms it alone would take 10 s.
    const second = rawPing(sid, T.gina, 'kd-2').replace('POST /mcp HTTP/1.1', `POST /mcp?pad=${'q'.repeat(100)} HTTP/1.1`);
    const took = await drip(c, second, 100, HEADER_TIMEOUT_MS + CLOSE_SLACK_MS + 1000, since);
    c.sock.destroy();
    await (await authDel(gw, T.gina, { sid })).done();
    t.diagnostic(`second request dripped: closed after ${took} ms`);
    assert.ok(took !== null, `the gateway closed the connection of a dripped second request (still open after ${HEADER_TIMEOUT_MS + CLOSE_SLACK_MS + 1000} ms)`);
    assert.ok(took >= HEADER_TIMEOUT_MS - 50 && took <= HEADER_TIMEOUT_MS + CLOSE_SLACK_MS, `closed after ${took} ms`);
  });
});

describe('rate limit (bearer)', () => {
  let gw;
  const dir = tmpdir('mcpgw-auth-rate-');
  const tokensFile = path.join(dir, 'tokens');
  const T = { erin: randomToken('erin'), frank: randomToken('frank') };
  fs.writeFileSync(tokensFile, Object.entries(T).map(([n, t]) => `sha256:${sha256hex(t)} ${n}`).join('\n') + '\n');

  before(async () => {
    gw = await startGateway({ auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile, rate_limit_per_s: 2, rate_limit_burst: 6 } });
  });

  after(async () => {
    if (gw) await gw.stop(); // asserts a clean exit
  });

  test('rate_limit_per_s: beyond the burst 429 with Retry-After; others unaffected; the bucket refills', async () => {
    const m0 = await metrics(gw);
    const tFirst = performance.now(); // erin's bucket is full (6) before her first request
    const { sid } = await initAuth(gw, T.erin); // 2 requests of the 6
    const f = await initAuth(gw, T.frank);
    let ok = 0;
    let refused = null;
    // Each ping spends a token, each second brings 2: the pings outrun the refill unless one
    // takes 500 ms or more.
    for (let i = 0; i < 200 && !refused; i++) {
      const r = await authPost(gw, rpc('ping'), T.erin, { sid });
      const text = await r.done();
      if (r.status === 200) ok++;
      else refused = { r, text };
    }
    const elapsed = (performance.now() - tFirst) / 1000;
    assert.ok(refused, `a 429 came within 200 requests (${elapsed.toFixed(1)} s)`);
    // At least the burst's 4 left after initialize; at most those plus what 2/s refilled while
    // the test ran (and one for a token partly refilled).
    const most = 4 + Math.floor(2 * elapsed) + 1;
    assert.ok(ok >= 4 && ok <= most, `pings before the 429: ${ok}, expected 4 to ${most} (burst 6, 2 used by initialize, 2/s refill over ${elapsed.toFixed(2)} s)`);
    assert.equal(refused.r.status, 429, refused.text);
    assertRpcError(refused.r, refused.text);
    const ra = refused.r.headers['retry-after'];
    assert.match(ra ?? '', /^\d+$/, `Retry-After: ${ra}`);
    assert.ok(Number(ra) >= 1, `Retry-After ${ra}`);
    // GET and DELETE are counted too.
    const g = await authGet(gw, T.erin, { sid });
    await g.done(scaled(5000)).catch(() => g.drop());
    assert.equal(g.status, 429);
    // frank has his own bucket.
    await echo(gw, T.frank, f.sid, 'frank unaffected');
    // Erin recovers once her bucket refills (polled; each 429 costs nothing).
    const t0 = performance.now();
    await waitFor(async () => {
      const r = await authPost(gw, rpc('ping'), T.erin, { sid });
      await r.done();
      if (r.status === 200) return true;
      assert.equal(r.status, 429, r.text());
      await new Promise((res) => setTimeout(res, 100)); // poll pace
      return false;
    }, Number(ra) * 1000 + scaled(3000), 'the bucket to refill');
    assert.ok(performance.now() - t0 < Number(ra) * 1000 + scaled(3000));
    const m1 = await metrics(gw);
    assert.ok(m1.mcpgw_rate_limited_total - m0.mcpgw_rate_limited_total >= 2, 'rate_limited counted');
    // Wait for a token for each DELETE, by polling.
    for (const [tok, s] of [[T.erin, sid], [T.frank, f.sid]]) {
      await waitFor(async () => {
        const d = await authDel(gw, tok, { sid: s });
        await d.done();
        if (d.status !== 429) { assert.ok(d.status < 300, `${d.status}`); return true; }
        await new Promise((res) => setTimeout(res, 100));
        return false;
      }, 5000, 'DELETE past the rate limit');
    }
  });
});
