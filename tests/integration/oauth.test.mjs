// SPDX-License-Identifier: MIT
// Keys and token answers from a real authorization server: oidc-provider (tests/lib/oidc.mjs) on
// loopback over HTTPS with a per-run CA, issuing client_credentials access tokens with RFC 8707
// resource indicators. The gateway finds its keys by discovery, fetches the JWK Set, keeps it by
// its caching headers, refetches it when a token names a new key (a rotation mid-test), keeps the
// last good set when a fetch fails, and checks opaque tokens by RFC 7662 introspection. A request
// waiting for the authorization server waits alone; one whose client leaves is dropped cleanly.
// A discovery document is bounded at 64 KiB; an introspected client_id is not a JWT's sub; a
// request whose body comes after a SIGHUP has its token judged again (and waits for it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';

import { ACCEPT_BOTH, metricSamples, request, rpc, splitPost, withGateway, waitFor } from '../lib/gw.mjs';
import { startOidc } from '../lib/oidc.mjs';
import { scaled } from '../lib/timing.mjs';

const PUBLIC_URL = 'https://mcp.test.example';
const RESOURCE = `${PUBLIC_URL}/mcp`;
const V = '2026-07-28';
const META = 'io.modelcontextprotocol/';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

// --- helpers -------------------------------------------------------------------------------------

function authPost(gw, msg, token, { sid, headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...headers };
  if (token !== undefined) h.Authorization = `Bearer ${token}`;
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(gw.url, { method: 'POST', headers: h, body: msg });
}

const initMsg = () => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'oauth-it', version: '1' } });

/** initialize + initialized with token: the session id. */
async function initAuth(gw, token) {
  const r = await authPost(gw, initMsg(), token);
  const body = await r.done(scaled(10000));
  assert.equal(r.status, 200, `initialize: HTTP ${r.status} ${body}`);
  const sid = r.headers['mcp-session-id'];
  const ans = r.events().map((e) => e.json).find(isAnswer);
  assert.ok(ans?.result, body);
  const n = await authPost(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, token, { sid, headers: { 'MCP-Protocol-Version': ans.result.protocolVersion } });
  await n.done();
  assert.equal(n.status, 202, n.text());
  return sid;
}

/** tools/call echo on a session with token; asserts the text comes back. */
async function echo(gw, token, sid, text) {
  const r = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text } }), token, { sid });
  const body = await r.done(scaled(10000));
  assert.equal(r.status, 200, `echo: HTTP ${r.status} ${body}`);
  assert.equal(textOf(r.events().map((e) => e.json).find(isAnswer)), text, body);
}

/** The status (and challenge) of an initialize with token. */
async function initStatus(gw, token) {
  const r = await authPost(gw, initMsg(), token);
  const body = await r.done(scaled(10000));
  return { status: r.status, body, challenge: r.headers['www-authenticate'] || '', retry: r.headers['retry-after'] };
}

async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  await r.done();
  assert.equal(r.status, 200);
  return metricSamples(r.text());
}

/** [auth] keys for op: keys by discovery (no jwks_file), trusted through op's CA. */
function authOf(op, more = {}) {
  return {
    mode: 'jwt', public_url: PUBLIC_URL, issuer: op.issuer, tls_ca_file: op.caFile,
    jwks_refetch_interval_ms: 200, ...more,
  };
}

/**
 * Waits until jwks_refetch_interval_ms (200 here) has passed since the gateway last fetched the
 * set (the time its log line carries): a new kid may refetch only then, by design.
 */
async function pastRefetchInterval(gw, ms = 200) {
  const lines = gw.logs().split('\n').filter((l) => /auth: (JWK Set|a token names a key)/.test(l));
  assert.ok(lines.length > 0, 'the gateway fetched the set');
  const at = Date.parse(lines[lines.length - 1].split(' ')[0]);
  await waitFor(() => Date.now() >= at + ms + 20, ms + 1000, 'the refetch interval');
}

async function withOidc(opts, fn) {
  const op = await startOidc({ quiet: true, ...opts });
  try {
    return await fn(op);
  } finally {
    await op.stop();
  }
}

// --- keys -----------------------------------------------------------------------------------------

test('jwt keys by discovery: RS256, ES256 and EdDSA tokens of the real issuer work; the JWK Set is fetched once and reused', async () => {
  await withOidc({}, async (op) => {
    await withGateway({ auth: authOf(op) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set \S+\/jwks: 3 keys/, scaled(10000));
      // RFC 8414 metadata first (oidc-provider serves it); no OpenID fallback needed.
      assert.equal(op.requests.oauthAuthorizationServer, 1, JSON.stringify(op.requests));
      assert.equal(op.requests.openidConfiguration, 0);
      assert.equal(op.requests.jwks, 1);
      for (const alg of ['RS256', 'ES256', 'EdDSA']) {
        const token = await op.token({ resource: RESOURCE, alg, scope: 'mcp:tools' });
        const sid = await initAuth(gw, token);
        await echo(gw, token, sid, `hello ${alg}`);
      }
      assert.equal(op.requests.jwks, 1, 'the set was reused');
      // A token the issuer minted for another resource is refused (RFC 8707 audience).
      const other = await op.token({ resource: 'https://other.test.example/mcp' });
      const r = await initStatus(gw, other);
      assert.equal(r.status, 401, r.body);
      assert.match(r.challenge, /error="invalid_token", error_description="the token's audience is not this server"/);
      const m = await metrics(gw);
      assert.equal(m.mcpgw_auth_fetches_total, 2, 'discovery and one JWK Set');
      assert.equal(m.mcpgw_auth_fetch_failures_total, 0);
      assert.equal(m.mcpgw_auth_jwks_keys, 3);
    });
  });
});

test('a key rotation mid-test: sessions opened before it keep working, tokens signed with the new key work after one refetch', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    await withGateway({ auth: authOf(op) }, async (gw) => {
      const before = await op.token({ resource: RESOURCE });
      const sid = await initAuth(gw, before);
      await echo(gw, before, sid, 'before the rotation');
      assert.equal(op.requests.jwks, 1);
      // The issuer drops its old key entirely.
      await pastRefetchInterval(gw);
      const { RS256: kid } = op.rotateKeys({ keepOld: false });
      assert.notEqual(kid, 'rs256-1');
      const after = await op.token({ resource: RESOURCE });
      assert.equal(JSON.parse(Buffer.from(after.split('.')[0], 'base64url')).kid, kid);
      // Several requests with the new kid at once: they wait for one refetch together.
      const sids = await Promise.all([1, 2, 3].map(() => initAuth(gw, after)));
      for (const s of sids) await echo(gw, after, s, 'after the rotation');
      assert.equal(op.requests.jwks, 2, `one refetch for the new kid: ${JSON.stringify(op.requests)}`);
      // The session opened before goes on with its old token (verified before the rotation).
      await echo(gw, before, sid, 'still here');
      await gw.waitLog(/a token names a key the JWK Set lacks: fetching \S+ again/);
      assert.equal((await metrics(gw)).mcpgw_auth_jwks_keys, 1);
    });
  });
});

test('tokens with a made-up kid refetch the JWK Set at most once per jwks_refetch_interval_ms and are refused', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    await withGateway({ auth: authOf(op, { jwks_refetch_interval_ms: 60000 }) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set/, scaled(10000));
      const good = await op.token({ resource: RESOURCE });
      const [h, p, s] = good.split('.');
      const header = JSON.parse(Buffer.from(h, 'base64url'));
      const forged = (i) => `${Buffer.from(JSON.stringify({ ...header, kid: `made-up-${i}` })).toString('base64url')}.${p}.${s}`;
      for (let i = 0; i < 5; i++) {
        const r = await initStatus(gw, forged(i));
        assert.equal(r.status, 401, r.body);
        assert.match(r.challenge, /does not verify with any key of the issuer's JWK Set/);
      }
      // The start fetched it less than a minute ago: no refetch at all.
      assert.equal(op.requests.jwks, 1, JSON.stringify(op.requests));
      assert.equal((await initStatus(gw, good)).status, 200);
    });
  });
});

test('a JWK Set that takes longer than jwks_refetch_interval_ms to come: a token with a made-up kid waits for one refetch and is refused (it does not wait for refetch after refetch)', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const SLOW = scaled(600); // each fetch of the set takes this long, past the 200 ms interval
    await withGateway({ auth: authOf(op, { fetch_timeout_ms: 10000 }) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set/, scaled(10000));
      const good = await op.token({ resource: RESOURCE });
      const [h, p, s] = good.split('.');
      const header = JSON.parse(Buffer.from(h, 'base64url'));
      const forged = `${Buffer.from(JSON.stringify({ ...header, kid: 'made-up-slow' })).toString('base64url')}.${p}.${s}`;
      await pastRefetchInterval(gw);
      op.delay('jwks', SLOW);
      const before = op.requests.jwks;
      const t0 = Date.now();
      const r = await initStatus(gw, forged);
      assert.equal(r.status, 401, r.body);
      assert.match(r.challenge, /does not verify with any key of the issuer's JWK Set/);
      assert.equal(op.requests.jwks - before, 1, `one refetch for the request, not one after another: ${JSON.stringify(op.requests)}`);
      assert.ok(Date.now() - t0 < 3 * SLOW, `refused after one slow fetch (${Date.now() - t0} ms)`);
      op.delay('jwks', 0);
      assert.equal((await initStatus(gw, good)).status, 200);
    });
  });
});

test('Cache-Control max-age bounds how long the set is kept: past it the old set serves while one refetch runs', async () => {
  await withOidc({ algs: ['ES256'] }, async (op) => {
    op.setCacheControl('jwks', 'max-age=1');
    await withGateway({ auth: authOf(op, { jwks_cache_min_s: 0, jwks_cache_max_s: 3600 }) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set \S+: 1 keys, kept 1 s/, scaled(10000));
      const token = await op.token({ resource: RESOURCE, alg: 'ES256' });
      const sid = await initAuth(gw, token);
      op.setCacheControl('jwks', 'max-age=600');
      // A new token after max-age: served at once with the old set, which a refetch replaces.
      await waitFor(async () => {
        const t = await op.token({ resource: RESOURCE, alg: 'ES256' });
        await echo(gw, t, sid, 'fresh token');
        return op.requests.jwks >= 2;
      }, scaled(10000), 'a refetch after max-age');
      await gw.waitLog(/auth: JWK Set \S+: 1 keys, kept 600 s/, scaled(10000));
      const before = op.requests.jwks;
      for (let i = 0; i < 3; i++) await echo(gw, await op.token({ resource: RESOURCE, alg: 'ES256' }), sid, `kept ${i}`);
      assert.equal(op.requests.jwks, before, 'kept for its new max-age');
    });
  });
});

test('a failing JWK Set endpoint: the last good set stays in use, the failure is logged and counted; it recovers', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    await withGateway({ auth: authOf(op) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set/, scaled(10000));
      const old = await op.token({ resource: RESOURCE });
      await pastRefetchInterval(gw);
      op.fail('jwks', 500);
      op.rotateKeys({ keepOld: true });
      const fresh = await op.token({ resource: RESOURCE });
      const r = await initStatus(gw, fresh);
      assert.equal(r.status, 401, `the new key could not be fetched: ${r.body}`);
      await gw.waitLog(/auth: JWK Set \S+: HTTP status 500; the last good set stays in use/);
      const m = await metrics(gw);
      assert.equal(m.mcpgw_auth_fetch_failures_total, 1);
      assert.equal(m.mcpgw_auth_jwks_keys, 1, 'the old set');
      // Tokens of the old key still work.
      const sid = await initAuth(gw, old);
      await echo(gw, old, sid, 'old key still trusted');
      // The endpoint recovers: after the interval the new kid refetches and works.
      op.fail('jwks', null);
      await waitFor(async () => (await initStatus(gw, fresh)).status === 200, scaled(10000), 'the new key after recovery');
      assert.equal((await metrics(gw)).mcpgw_auth_jwks_keys, 2);
    });
  });
});

test('an authorization server that cannot be reached: 503 with Retry-After (not 401); nothing blocks the gateway', async () => {
  // A port nothing listens on: take one, close it.
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const port = srv.address().port;
  await new Promise((r) => srv.close(r));
  const dir = fs.mkdtempSync('/tmp/mcpgw-oauth-');
  fs.writeFileSync(path.join(dir, 'ca.pem'), '');
  await withGateway({ auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: `https://127.0.0.1:${port}`, jwks_refetch_interval_ms: 60000 } }, async (gw) => {
    await gw.waitLog(/auth: discovery at \S+ failed/, scaled(10000));
    const r = await initStatus(gw, 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln');
    assert.equal(r.status, 503, r.body);
    assert.equal(r.retry, '1');
    assert.equal(JSON.parse(r.body).error.code, -32603);
    const h = await request(`${gw.base}/healthz`, { method: 'GET' });
    await h.done();
    assert.equal(h.status, 200);
    assert.ok((await metrics(gw)).mcpgw_auth_unavailable_total >= 1);
  });
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a request waiting for keys waits alone: others are served meanwhile; a client that leaves while waiting is dropped cleanly', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    op.delay('jwks', 1500);
    await withGateway({ auth: authOf(op, { fetch_timeout_ms: 10000 }) }, async (gw) => {
      const token = await op.token({ resource: RESOURCE });
      const t0 = Date.now();
      const waiting = authPost(gw, initMsg(), token);
      // One that leaves while waiting: a raw socket, closed once the gateway holds its request.
      const body = JSON.stringify(initMsg());
      const leaver = net.connect(gw.port, '127.0.0.1');
      leaver.on('error', () => {});
      leaver.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${gw.port}\r\nContent-Type: application/json\r\n`
        + `Accept: ${ACCEPT_BOTH}\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await waitFor(async () => (await metrics(gw)).mcpgw_auth_waits_total >= 2, scaled(5000), 'two requests waiting');
      leaver.destroy();
      // Meanwhile the gateway answers other requests at once.
      const h = await request(`${gw.base}/healthz`, { method: 'GET' });
      await h.done();
      assert.equal(h.status, 200);
      assert.ok(Date.now() - t0 < 1500, 'answered before the keys came');
      const r = await waiting;
      await r.done(scaled(10000));
      assert.equal(r.status, 200, r.text());
      assert.ok(Date.now() - t0 >= 1400, 'the waiting request was served after the keys');
      assert.equal(op.requests.jwks, 1);
    });
  });
});

test('a discovery document over 64 KiB is refused (503, logged); one of 64 KiB is used', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const doc = JSON.parse(await new Promise((resolve, reject) => {
      https.get(op.discoveryUrl, { ca: fs.readFileSync(op.caFile) }, (res) => {
        let b = '';
        res.on('data', (d) => { b += d; });
        res.on('end', () => resolve(b));
      }).on('error', reject);
    }));
    assert.equal(doc.issuer, op.issuer);
    const padded = (bytes) => {
      const text = JSON.stringify({ ...doc, x_padding: 'x'.repeat(bytes - JSON.stringify({ ...doc, x_padding: '' }).length) });
      assert.equal(text.length, bytes);
      return text;
    };
    op.serve('discovery', padded(64 * 1024 + 1));
    await withGateway({ auth: authOf(op) }, async (gw) => {
      const r = await initStatus(gw, await op.token({ resource: RESOURCE }));
      assert.equal(r.status, 503, r.body);
      await gw.waitLog(/auth: discovery at \S+openid-configuration failed: the answer exceeds its size bound/, scaled(10000));
      assert.doesNotMatch(gw.logs(), /auth: discovered/);
    });
    op.serve('discovery', padded(64 * 1024));
    await withGateway({ auth: authOf(op) }, async (gw) => {
      const r = await initStatus(gw, await op.token({ resource: RESOURCE }));
      assert.equal(r.status, 200, r.body);
      assert.match(gw.logs(), /auth: discovered jwks_uri/);
    });
  });
});

// --- introspection ------------------------------------------------------------------------------

test('opaque tokens: introspected at the discovered endpoint with the gateway\'s credentials; answers reused; inactive and foreign tokens refused', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    await withGateway({ auth: authOf(op, { introspection_credentials_file: cred }) }, async (gw) => {
      await gw.waitLog(/discovered jwks_uri \S+ introspection_endpoint \S+\/token\/introspection/, scaled(10000));
      const token = await op.token({ resource: RESOURCE, format: 'opaque', scope: 'mcp:tools' });
      assert.equal(token.split('.').length, 1, 'an opaque token');
      const sid = await initAuth(gw, token);
      for (let i = 0; i < 3; i++) await echo(gw, token, sid, `opaque ${i}`);
      assert.equal(op.requests.introspection, 1, 'one introspection, then the answer is reused');
      // The principal of a client_credentials token without sub: its client_id.
      assert.match(gw.logs(), /session=\S+ session created: server=example child=\d+ owner=client_id:mcp-client\b/);
      // A token the server never issued.
      let r = await initStatus(gw, 'not-a-token-at-all');
      assert.equal(r.status, 401);
      assert.match(r.challenge, /the token is not active \(introspection\)/);
      // A token for another resource.
      const other = await op.token({ resource: 'https://other.test.example/mcp', format: 'opaque' });
      r = await initStatus(gw, other);
      assert.equal(r.status, 401);
      assert.match(r.challenge, /the token's audience is not this server/);
      // JWTs of the same issuer still go by signature.
      op.setResource(RESOURCE, { format: 'jwt' });
      const jwt = await op.token({ resource: RESOURCE, format: 'jwt' });
      assert.equal(jwt.split('.').length, 3);
      assert.equal((await initStatus(gw, jwt)).status, 200);
      const m = await metrics(gw);
      assert.equal(m.mcpgw_auth_introspections_total, 3);
      assert.equal(m.mcpgw_auth_introspection_failures_total, 0);
    });
  });
});

test('a client_id is not a sub: an opaque token introspected as client_id mcp-client cannot use the session of the JWT whose sub is mcp-client', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    await withGateway({ auth: authOf(op, { introspection_credentials_file: cred }) }, async (gw) => {
      await gw.waitLog(/discovered jwks_uri \S+ introspection_endpoint/, scaled(10000));
      const jwt = await op.token({ resource: RESOURCE, format: 'jwt' });
      assert.equal(JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url')).sub, 'mcp-client');
      const sid = await initAuth(gw, jwt);
      const opaque = await op.token({ resource: RESOURCE, format: 'opaque', scope: 'mcp:tools' });
      assert.equal((await op.introspect(opaque)).client_id, 'mcp-client');
      const r = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'not yours' } }), opaque, { sid });
      const body = await r.done(scaled(10000));
      assert.equal(r.status, 404, `another principal's session: ${body}`);
      await echo(gw, jwt, sid, 'the owner carries on');
      await gw.waitLog(new RegExp(`session=${sid} session created: server=example child=\\d+ owner=sub:mcp-client\\b`));
      await initAuth(gw, opaque); // a session of its own
      await gw.waitLog(/session created: server=example child=\d+ owner=client_id:mcp-client\b/);
    });
  });
});

test('one client cannot keep introspection_max_pending full: past its quarter of it a new opaque token of that client gets 503, and another client\'s token is still introspected', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    // 8 in flight at most: 2 per client (X-Forwarded-For from the loopback proxy, trusted here,
    // names the client).
    await withGateway({ gateway: { trusted_proxies: '127.0.0.1, ::1' }, auth: authOf(op, { introspection_credentials_file: cred, introspection_max_pending: 8 }) }, async (gw) => {
      await gw.waitLog(/discovered jwks_uri \S+ introspection_endpoint/, scaled(10000));
      const SLOW = scaled(1500); // each introspection answer takes this long
      op.delay('introspection', SLOW);
      const from = (client) => ({ headers: { 'X-Forwarded-For': client } });
      // A client sends random opaque tokens, eight at once.
      const flood = [];
      for (let i = 0; i < 8; i++) flood.push(authPost(gw, initMsg(), `random-${i}-${Date.now()}`, from('192.0.2.66')));
      // Its third and later are refused at once; its first two wait for their answers.
      const quarter = /this client has a quarter of introspection_max_pending introspections in flight/g;
      await waitFor(() => (gw.logs().match(quarter) ?? []).length >= 6, scaled(5000), 'six of the flood refused');
      // Another client's real token is introspected meanwhile (before the flood's answers), and served.
      const token = await op.token({ resource: RESOURCE, format: 'opaque', scope: 'mcp:tools' });
      const r = await authPost(gw, initMsg(), token, from('192.0.2.10'));
      const body = await r.done(scaled(10000));
      assert.equal(r.status, 200, body);
      const statuses = [];
      for (const p of flood) {
        const f = await p;
        await f.done(scaled(10000));
        statuses.push(f.status);
      }
      assert.equal(statuses.filter((st) => st === 503).length, 6, `the flood's answers: ${statuses}`);
      assert.equal(statuses.filter((st) => st === 401).length, 2, `its two introspected tokens are not active: ${statuses}`);
      op.delay('introspection', 0);
    });
  });
});

test('by default no proxy is trusted: a local client that names a new X-Forwarded-For with each random token is still one client, and past its quarter of introspection_max_pending its new tokens get 503', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    await withGateway({ gateway: { log_level: 'info' }, auth: authOf(op, { introspection_credentials_file: cred, introspection_max_pending: 8 }) }, async (gw) => {
      await gw.waitLog(/discovered jwks_uri \S+ introspection_endpoint/, scaled(10000));
      op.delay('introspection', scaled(1500));
      const flood = [];
      for (let i = 0; i < 8; i++) flood.push(authPost(gw, initMsg(), `forged-${i}-${Date.now()}`, { headers: { 'X-Forwarded-For': `192.0.2.${100 + i}` } }));
      const statuses = [];
      for (const p of flood) {
        const f = await p;
        await f.done(scaled(10000));
        statuses.push(f.status);
      }
      assert.equal(statuses.filter((st) => st === 503).length, 6, `its quarter (2 of 8) introspected, the rest refused: ${statuses}`);
      assert.equal(statuses.filter((st) => st === 401).length, 2, `its two introspected tokens are not active: ${statuses}`);
      assert.equal((gw.logs().match(/this client has a quarter of introspection_max_pending introspections in flight/g) ?? []).length, 6, 'refused as one client');
      op.delay('introspection', 0);
    });
  });
});

test('a revoked opaque token is refused once its answer may no longer be reused (introspection_cache_max_s)', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    await withGateway({ auth: authOf(op, { introspection_credentials_file: cred, introspection_endpoint: op.introspectionUrl, introspection_cache_max_s: 1 }) }, async (gw) => {
      const token = await op.token({ resource: RESOURCE, format: 'opaque' });
      const sid = await initAuth(gw, token);
      assert.equal(await op.revoke(token), 200);
      await waitFor(async () => {
        const r = await authPost(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'x' } }), token, { sid });
        await r.done(scaled(10000));
        return r.status === 401;
      }, scaled(10000), 'the revoked token refused');
      assert.ok(op.requests.introspection >= 2);
    });
  });
});

test('an introspection endpoint that fails, or credentials it refuses: 503 with Retry-After, counted; no answer is remembered as active', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = path.join(op.dir, 'wrong.cred');
    fs.writeFileSync(cred, `${op.introspectionClient.id}:wrong-secret\n`, { mode: 0o600 });
    await withGateway({ auth: authOf(op, { introspection_credentials_file: cred }) }, async (gw) => {
      const token = await op.token({ resource: RESOURCE, format: 'opaque' });
      const r = await initStatus(gw, token);
      assert.equal(r.status, 503, r.body);
      assert.equal(r.retry, '1');
      await gw.waitLog(/auth: introspection at \S+ failed: HTTP status 401/);
      assert.equal((await metrics(gw)).mcpgw_auth_introspection_failures_total, 1);
    });
  });
});

test('SIGHUP keeps the fetched keys when the issuer is unchanged: no request waits after a reload', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    await withGateway({ auth: authOf(op) }, async (gw) => {
      await gw.waitLog(/auth: JWK Set/, scaled(10000));
      const token = await op.token({ resource: RESOURCE });
      await initAuth(gw, token);
      const conf = fs.readFileSync(gw.conf, 'utf8').replace('jwks_refetch_interval_ms = 200', 'jwks_refetch_interval_ms = 300');
      fs.writeFileSync(gw.conf, conf);
      gw.proc.kill('SIGHUP');
      await gw.waitLog(/SIGHUP: configuration reloaded/);
      const waitsBefore = (await metrics(gw)).mcpgw_auth_waits_total;
      await initAuth(gw, await op.token({ resource: RESOURCE }));
      assert.equal(op.requests.jwks, 1, 'no refetch after the reload');
      assert.equal((await metrics(gw)).mcpgw_auth_waits_total, waitsBefore, 'nothing waited');
    });
  });
});

test('SIGHUP between a request\'s head and its body: its opaque token is introspected again for the new configuration (the request waits, then is served)', async () => {
  await withOidc({ algs: ['RS256'] }, async (op) => {
    const cred = op.writeCredentials();
    await withGateway({ auth: authOf(op, { introspection_credentials_file: cred }) }, async (gw) => {
      await gw.waitLog(/discovered jwks_uri \S+ introspection_endpoint/, scaled(10000));
      const token = await op.token({ resource: RESOURCE, format: 'opaque', scope: 'mcp:tools' });
      const sid = await initAuth(gw, token);
      assert.equal(op.requests.introspection, 1);
      // The head of a call on the session, authenticated from the remembered answer; no body yet.
      const call = splitPost(gw, '/mcp', rpc('tools/call', { name: 'echo', arguments: { text: 'after the reload' } }, 'split'), {
        Authorization: `Bearer ${token}`, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18',
      });
      await waitFor(async () => (await metrics(gw)).mcpgw_http_requests_open >= 2, scaled(10000), 'the head read');
      const waits = (await metrics(gw)).mcpgw_auth_waits_total;
      gw.proc.kill('SIGHUP');
      await gw.waitLog(/SIGHUP: configuration reloaded/, scaled(10000));
      call.send();
      const r = await call.done(scaled(20000));
      assert.equal(r.status, 200, r.text);
      assert.equal(textOf(r.answers[0]), 'after the reload', r.text);
      assert.equal(op.requests.introspection, 2, 'introspected again: the reload dropped what the old configuration knew');
      assert.equal((await metrics(gw)).mcpgw_auth_waits_total, waits + 1, 'the body\'s request waited for it');
    });
  });
});

test('stateless requests are authenticated the same way (a pooled request with an issuer JWT)', async () => {
  await withOidc({ algs: ['EdDSA'] }, async (op) => {
    await withGateway({ auth: authOf(op) }, async (gw) => {
      const token = await op.token({ resource: RESOURCE, alg: 'EdDSA' });
      const msg = { jsonrpc: '2.0', id: 'm1', method: 'tools/call', params: { name: 'echo', arguments: { text: 'stateless' }, _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {}, [`${META}clientInfo`]: { name: 'oauth-it', version: '1' } } } };
      const headers = { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' };
      let r = await authPost(gw, msg, token, { headers });
      let body = await r.done(scaled(15000));
      assert.equal(r.status, 200, body);
      assert.equal(textOf(JSON.parse(body)), 'stateless');
      r = await authPost(gw, msg, undefined, { headers });
      body = await r.done();
      assert.equal(r.status, 401, body);
    });
  });
});
