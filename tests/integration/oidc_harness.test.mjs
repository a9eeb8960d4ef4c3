// SPDX-License-Identifier: MIT
// Self-test of tests/lib/oidc.mjs: the real authorization server (oidc-provider) on loopback over
// HTTPS that the JWKS, discovery and introspection tests of the gateway will use. Everything is
// checked from outside with plain node:https requests that trust only op.caFile; JWT signatures
// are verified here against the published JWK Set with node:crypto.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, test } from 'node:test';

import { startOidc } from '../lib/oidc.mjs';

const RESOURCE = 'http://127.0.0.1:4000/mcp';
const now = () => Math.floor(Date.now() / 1000);

let op;
let ca;

before(async () => {
  op = await startOidc();
  ca = fs.readFileSync(op.caFile);
});
after(async () => { await op?.stop(); });

/**
 * An HTTPS request trusting only the harness CA (trust: another CA's PEM, or 'system' for node's
 * default store); resolves {status, headers, text, json}.
 */
function req(url, { method = 'GET', headers = {}, body, trust = ca } = {}) {
  const tlsOpts = trust === 'system' ? {} : { ca: trust };
  return new Promise((resolve, reject) => {
    const r = https.request(url, { method, headers, ...tlsOpts, agent: false, timeout: 10000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    r.on('timeout', () => r.destroy(new Error(`${url}: no answer in 10 s`)));
    r.on('error', reject);
    r.end(body);
  });
}

const basicAuth = (id, secret) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
const FORM = 'application/x-www-form-urlencoded';

function introspectRaw(token, { id = op.introspectionClient.id, secret = op.introspectionClient.secret } = {}) {
  return req(op.introspectionUrl, {
    method: 'POST',
    headers: { authorization: basicAuth(id, secret), 'content-type': FORM, accept: 'application/json' },
    body: new URLSearchParams({ token }).toString(),
  });
}

function decodeJwt(jwt) {
  const parts = jwt.split('.');
  assert.equal(parts.length, 3, `not a compact JWS: ${jwt}`);
  const [header, payload] = parts.slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url')));
  return { header, payload, input: `${parts[0]}.${parts[1]}`, sig: Buffer.from(parts[2], 'base64url') };
}

/** Verifies jwt's signature with the key of its kid in jwks (as served); returns {header, payload}. */
function verifyJwt(jwt, jwks) {
  const d = decodeJwt(jwt);
  const jwk = jwks.keys.find((k) => k.kid === d.header.kid);
  assert.ok(jwk, `kid ${d.header.kid} not in the JWKS (${jwks.keys.map((k) => k.kid)})`);
  assert.equal(jwk.alg, d.header.alg);
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  const data = Buffer.from(d.input);
  const ok = d.header.alg === 'RS256' ? crypto.verify('sha256', data, key, d.sig)
    : d.header.alg === 'ES256' ? crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, d.sig)
      : d.header.alg === 'EdDSA' ? crypto.verify(null, data, key, d.sig)
        : assert.fail(`unexpected alg ${d.header.alg}`);
  assert.ok(ok, `signature of a ${d.header.alg} token does not verify with kid ${d.header.kid}`);
  return d;
}

async function fetchJwks() {
  const r = await req(op.jwksUri);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

test('caFile: a CA certificate that alone makes https://127.0.0.1:PORT trusted; key files private', async () => {
  assert.match(op.issuer, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(op.issuer, `https://127.0.0.1:${op.port}`);
  const x = new crypto.X509Certificate(ca);
  assert.equal(x.ca, true);
  const mode = (f) => fs.statSync(f).mode & 0o777;
  assert.equal(mode(op.caFile), 0o644);
  assert.equal(mode(op.dir), 0o700);
  for (const f of fs.readdirSync(op.dir)) {
    assert.equal(mode(`${op.dir}/${f}`) & 0o022, 0, `${f} is writable by others`);
    if (f.endsWith('.key')) assert.equal(mode(`${op.dir}/${f}`), 0o600, `${f} must be 0600`);
  }
  // The server certificate verifies against the CA for the IP (no servername: an IP has no SNI).
  const peer = await new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port: op.port, ca, servername: '' }, () => {
      const c = s.getPeerCertificate();
      s.end();
      resolve({ authorized: s.authorized, san: c.subjectaltname, issuer: c.issuer });
    });
    s.on('error', reject);
  });
  assert.equal(peer.authorized, true);
  assert.match(peer.san, /IP Address:127\.0\.0\.1/);
  const leaf = new crypto.X509Certificate(fs.readFileSync(`${op.dir}/server.pem`));
  assert.ok(leaf.checkIssued(x) && leaf.verify(x.publicKey), 'the server certificate is signed by caFile');
  assert.equal(leaf.ca, false);
  assert.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(fs.existsSync(`${op.dir}/ca.key`), false, 'the CA key is deleted once it signed');
  // Without the CA the same request is refused: the trust comes from caFile, not from the system.
  await assert.rejects(req(op.jwksUri, { trust: 'system' }), (e) => /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/.test(e.code));
});

test('discovery: openid-configuration and RFC 8414 oauth-authorization-server name the endpoints, counted per path', async () => {
  op.resetRequests();
  for (const [url, counter] of [[op.discoveryUrl, 'openidConfiguration'], [op.oauthMetadataUrl, 'oauthAuthorizationServer']]) {
    const r = await req(url);
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers['content-type'], /^application\/json/);
    const m = r.json;
    assert.equal(m.issuer, op.issuer);
    assert.equal(m.jwks_uri, op.jwksUri);
    assert.equal(m.token_endpoint, op.tokenUrl);
    assert.equal(m.introspection_endpoint, op.introspectionUrl);
    assert.equal(m.revocation_endpoint, op.revocationUrl);
    assert.ok(m.grant_types_supported.includes('client_credentials'), JSON.stringify(m.grant_types_supported));
    // No introspection_endpoint_auth_methods_supported: RFC 8414's default, client_secret_basic.
    assert.equal(m.introspection_endpoint_auth_methods_supported, undefined);
    assert.ok(m.token_endpoint_auth_methods_supported.includes('client_secret_basic'));
    assert.equal(op.requests[counter], 1);
  }
  assert.equal(op.requests.discovery, 2);
  assert.equal(op.requests.jwks, 0);
  assert.deepEqual(op.log.map((e) => [e.method, e.path, e.status]),
    [['GET', '/.well-known/openid-configuration', 200], ['GET', '/.well-known/oauth-authorization-server', 200]]);
});

test('jwks: public keys only, one per algorithm, kids as op.kids, counted', async () => {
  op.resetRequests();
  const r = await req(op.jwksUri);
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^application\/jwk-set\+json/);
  assert.equal(r.headers['cache-control'], undefined);
  const { keys } = r.json;
  assert.deepEqual(keys.map((k) => [k.alg, k.kid, k.use]).sort(),
    [['ES256', 'es256-1', 'sig'], ['EdDSA', 'eddsa-1', 'sig'], ['RS256', 'rs256-1', 'sig']]);
  assert.deepEqual(op.kids, { RS256: 'rs256-1', ES256: 'es256-1', EdDSA: 'eddsa-1' });
  for (const k of keys) {
    for (const priv of ['d', 'p', 'q', 'dp', 'dq', 'qi']) assert.equal(k[priv], undefined, `${k.kid} publishes ${priv}`);
  }
  assert.deepEqual(r.json, op.jwks());
  assert.equal(op.requests.jwks, 1);
  assert.equal(op.requests.byPath['/jwks'], 1);
});

test('jwt: RS256 access token for a resource: kid in the JWKS, signature, iss, aud = resource, scope, exp, sub = client_id', async () => {
  op.resetRequests();
  const t0 = now();
  const jwt = await op.token({ resource: RESOURCE, format: 'jwt', scope: 'mcp:read mcp:write' });
  assert.equal(op.requests.token, 1, 'one real request to the token endpoint');
  const { header, payload } = verifyJwt(jwt, await fetchJwks());
  assert.deepEqual(header, { alg: 'RS256', typ: 'at+jwt', kid: op.kids.RS256 });
  assert.equal(payload.iss, op.issuer);
  assert.equal(payload.aud, RESOURCE);
  assert.equal(payload.scope, 'mcp:read mcp:write');
  assert.equal(payload.sub, 'mcp-client');
  assert.equal(payload.client_id, 'mcp-client');
  assert.ok(payload.iat >= t0 - 1 && payload.iat <= now() + 1, `iat ${payload.iat}`);
  assert.equal(payload.exp - payload.iat, 600);
  assert.equal(typeof payload.jti, 'string');
});

test('jwt: ES256 and EdDSA resources get tokens signed with those keys; ttl is the resource\'s', async () => {
  const jwks = await fetchJwks();
  for (const [alg, res] of [['ES256', 'http://127.0.0.1:4000/es'], ['EdDSA', 'http://127.0.0.1:4000/ed']]) {
    const { header, payload } = verifyJwt(await op.token({ resource: res, alg, ttl: 120, scope: 'x' }), jwks);
    assert.equal(header.alg, alg);
    assert.equal(header.kid, op.kids[alg]);
    assert.equal(payload.aud, res);
    assert.equal(payload.exp - payload.iat, 120);
  }
});

test('scope: a resource server with a fixed scope grants only the requested scopes it lists', async () => {
  const res = 'http://127.0.0.1:4000/narrow';
  op.setResource(res, { format: 'jwt', scope: 'mcp:read mcp:write' });
  const a = decodeJwt(await op.token({ resource: res, scope: 'mcp:read mcp:admin' })).payload;
  assert.equal(a.scope, 'mcp:read');
  const b = decodeJwt(await op.token({ resource: res, scope: 'mcp:admin' })).payload;
  assert.equal(b.scope, undefined);
  const r = await op.tokenResponse({ scope: 'x' });
  assert.equal(r.status, 200, 'no resource: an opaque token without aud');
});

test('opaque: introspection by the credentials-file client answers active with scope, client_id, aud, exp; no sub', async () => {
  const res = 'http://127.0.0.1:4000/opaque';
  const t0 = now();
  const token = await op.token({ resource: res, format: 'opaque', scope: 'mcp:read' });
  assert.doesNotMatch(token, /\./, 'an opaque token is not a JWS');
  const file = op.writeCredentials();
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  const line = fs.readFileSync(file, 'utf8');
  assert.match(line, /^[A-Za-z0-9_-]+:[A-Za-z0-9_-]+\n$/);
  const [id, secret] = line.trim().split(':');
  assert.equal(id, op.introspectionClient.id);
  op.resetRequests();
  const r = await introspectRaw(token, { id, secret });
  assert.equal(r.status, 200, r.text);
  assert.equal(op.requests.introspection, 1);
  const j = r.json;
  assert.equal(j.active, true);
  assert.equal(j.scope, 'mcp:read');
  assert.equal(j.client_id, 'mcp-client');
  assert.equal(j.aud, res);
  assert.equal(j.iss, op.issuer);
  assert.equal(j.token_type, 'Bearer');
  assert.ok(j.exp >= t0 + 600 - 1 && j.exp <= now() + 600 + 1, `exp ${j.exp}`);
  assert.equal(j.sub, undefined, 'oidc-provider gives no sub for client_credentials');
  assert.deepEqual(await op.introspect(token), j);
});

test('introspection: bogus and revoked tokens are inactive, a wrong secret is 401, a JWT is 400', async () => {
  const bogus = await introspectRaw('not-a-token-this-server-issued');
  assert.equal(bogus.status, 200);
  assert.deepEqual(bogus.json, { active: false });

  const token = await op.token({ resource: 'http://127.0.0.1:4000/opaque', format: 'opaque', scope: 'mcp:read' });
  assert.equal((await op.introspect(token)).active, true);
  assert.equal(await op.revoke(token), 200);
  assert.deepEqual(await op.introspect(token), { active: false });

  const wrong = await introspectRaw(token, { secret: 'wrong' });
  assert.equal(wrong.status, 401, wrong.text);
  assert.equal(wrong.json.error, 'invalid_client');

  const jwt = await op.token({ resource: RESOURCE, scope: 'mcp:read' });
  const r = await introspectRaw(jwt);
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.error, 'unsupported_token_type');
});

test('fail() and setCacheControl(): JWKS 500 on demand, then served again; Cache-Control as set; all counted', async () => {
  op.resetRequests();
  op.setCacheControl('jwks', 'max-age=60');
  const a = await req(op.jwksUri);
  assert.equal(a.status, 200);
  assert.equal(a.headers['cache-control'], 'max-age=60');
  op.fail('jwks');
  const b = await req(op.jwksUri);
  assert.equal(b.status, 500);
  assert.equal(b.json.error, 'server_error');
  op.fail('jwks', null);
  op.setCacheControl('jwks', null);
  const c = await req(op.jwksUri);
  assert.equal(c.status, 200);
  assert.equal(c.headers['cache-control'], undefined);
  assert.deepEqual(c.json, a.json);
  assert.equal(op.requests.jwks, 3);
  assert.deepEqual(op.log.map((e) => e.status), [200, 500, 200]);
  op.fail('discovery', 503);
  assert.equal((await req(op.discoveryUrl)).status, 503);
  op.fail('discovery', null);
  assert.equal((await req(op.discoveryUrl)).status, 200);
  // delay(): the answer is held at least that long (a lower bound only: never flaky).
  op.delay('jwks', 300);
  const t0 = Date.now();
  assert.equal((await req(op.jwksUri)).status, 200);
  assert.ok(Date.now() - t0 >= 250, `answered after ${Date.now() - t0} ms`);
  op.delay('jwks', 0);
  assert.throws(() => op.fail('nope'), /unknown endpoint/);
});

test('rotateKeys: new kids sign new tokens, old keys kept or dropped from the JWKS; issuer, port and stored tokens unchanged', async () => {
  const before1 = await fetchJwks();
  const oldJwt = await op.token({ resource: RESOURCE, scope: 'mcp:read' });
  const opaque = await op.token({ resource: 'http://127.0.0.1:4000/opaque', format: 'opaque', scope: 'mcp:read' });
  const port = op.port;

  const kids = op.rotateKeys();
  assert.deepEqual(kids, { RS256: 'rs256-2', ES256: 'es256-2', EdDSA: 'eddsa-2' });
  const kept = await fetchJwks();
  assert.deepEqual(kept.keys.map((k) => k.kid), ['rs256-2', 'es256-2', 'eddsa-2', 'rs256-1', 'es256-1', 'eddsa-1']);
  const newJwt = await op.token({ resource: RESOURCE, scope: 'mcp:read' });
  assert.equal(verifyJwt(newJwt, kept).header.kid, 'rs256-2');
  assert.equal(verifyJwt(oldJwt, kept).header.kid, 'rs256-1', 'the old token still verifies while its key is kept');
  assert.throws(() => verifyJwt(newJwt, before1), /not in the JWKS/);
  assert.equal((await req(op.discoveryUrl)).json.issuer, op.issuer);
  assert.equal(op.port, port);
  assert.equal((await op.introspect(opaque)).active, true, 'tokens stored before a rotation stay valid');

  op.rotateKeys({ keepOld: false });
  const only = await fetchJwks();
  assert.deepEqual(only.keys.map((k) => k.kid).sort(), ['eddsa-3', 'es256-3', 'rs256-3']);
  assert.throws(() => verifyJwt(newJwt, only), /not in the JWKS/);
  assert.equal(decodeJwt(await op.token({ resource: RESOURCE, scope: 'mcp:read' })).header.kid, 'rs256-3');
  assert.equal(decodeJwt(await op.token({ resource: 'http://127.0.0.1:4000/es', scope: 'x' })).header.kid, 'es256-3');
  assert.deepEqual(op.errors, []);
});

test('a second harness: its own port, CA, keys and token store; extraClaims puts sub in introspection', async () => {
  const op2 = await startOidc({ algs: ['ES256'], clients: ['alice', 'bob'], extraClaims: (t) => ({ sub: t.clientId }) });
  try {
    assert.notEqual(op2.port, op.port);
    assert.notEqual(op2.caFile, op.caFile);
    const token = await op2.token({ client: 'bob', resource: RESOURCE, format: 'opaque', scope: 'mcp:read' });
    const j = await op2.introspect(token);
    assert.equal(j.active, true);
    assert.equal(j.sub, 'bob');
    assert.equal(j.client_id, 'bob');
    assert.deepEqual(await op.introspect(token), { active: false }, 'the first harness does not know it');
    const jwt = await op2.token({ client: 'alice', resource: 'http://127.0.0.1:4000/es2', alg: 'ES256' });
    const r = await req(op2.jwksUri, { trust: fs.readFileSync(op2.caFile) });
    assert.equal(verifyJwt(jwt, r.json).payload.sub, 'alice');
    await assert.rejects(req(op2.jwksUri), /certificate|issuer|signature/i, 'the first CA does not vouch for the second server');
  } finally {
    await op2.stop();
  }
});

test('stop(): closes kept-alive connections, frees the port, removes the tmp dir', async () => {
  // A keep-alive connection open across stop(): it must not hold the server up.
  const agent = new https.Agent({ keepAlive: true, ca });
  await new Promise((resolve, reject) => {
    https.get(op.jwksUri, { agent }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject);
  });
  const { port, dir } = op;
  await op.stop();
  await op.stop(); // idempotent
  agent.destroy();
  assert.equal(fs.existsSync(dir), false);
  await assert.rejects(req(`https://127.0.0.1:${port}/jwks`), (e) => e.code === 'ECONNREFUSED');
  const srv = net.createServer();
  await new Promise((resolve, reject) => { srv.once('error', reject); srv.listen(port, '127.0.0.1', resolve); });
  await new Promise((resolve) => srv.close(resolve));
});
