// SPDX-License-Identifier: MIT
// A real OAuth 2.0 / OpenID authorization server for the tests: oidc-provider (pinned in
// tests/package-lock.json), on loopback over HTTPS with a throwaway CA made per run by the
// openssl CLI (tests/deps.sh installs it). For the gateway's tests of JWKS fetching, discovery
// and RFC 7662 introspection. Imports nothing from gw.mjs (no GW_BIN needed). It runs in the
// test's own process (no child to reap): stop() closes its server.
//
// oidc-provider 9.x is the only maintained line; it states Node 22 LTS as its minimum and prints
// one "Unsupported runtime" WARNING to stderr when imported under Node 20 (stdout stays clean, so
// TAP is unaffected). Everything used here works on Node 20 (crypto.hash needs >= 20.12).
//
//   const op = await startOidc(opts)
//
// opts (all optional):
//   host           '127.0.0.1' (default) or '::1'; the port is chosen by the kernel
//   algs           signing algorithms with a key each: default ['RS256', 'ES256', 'EdDSA']
//   resources      { [resourceUri]: { format: 'jwt'|'opaque', scope: 'a b'|null, alg, ttl, audience } }
//                  resource servers known from the start (see token() below)
//   clients        ids of the clients that get tokens: default ['mcp-client']; in a
//                  client_credentials token `sub` is the client_id, so these are the principals
//   introspector   id of the client that may introspect (the gateway's): default 'mcp-gateway'
//   ttl            access token lifetime in s when the resource names none: default 600
//   quiet          false: oidc-provider's server errors are written to stderr (never stdout)
//   extraClaims    (t) => object|undefined, t = { clientId, kind, aud, scope }: claims added to
//                  every access token, JWT payload and introspection answer alike (oidc-provider's
//                  extraTokenClaims). E.g. (t) => ({ sub: t.clientId }) for an introspection
//                  answer with `sub`, as many servers give (oidc-provider alone does not).
//   exchanger      id of a client allowed the RFC 8693 token exchange grant (none by default).
//                  The grant is registered with oidc-provider's own API for extension grants
//                  (provider.registerGrantType). It takes subject_token_type
//                  urn:ietf:params:oauth:token-type:access_token and a subject token this
//                  server issued and still holds valid: an opaque one is looked up in its store
//                  (revoked or expired: gone), a JWT is verified with its keys and its exp. The
//                  target is `resource`, else `audience`: a resource server known by
//                  setResource (its format, ttl and alg apply), else 400 invalid_target. The
//                  issued token is a real ClientCredentials token of the exchanger whose extra
//                  claims name the subject: `subject` (the subject token's client_id) and
//                  `act: { sub: <exchanger> }`; its answer has issued_token_type and expires_in.
//                  Unknown or invalid subject: 400 invalid_grant.
//
// op:
//   issuer            'https://127.0.0.1:PORT', exactly the provider's issuer (no trailing /)
//   port, host, dir   dir: the tmp dir holding the CA and the credentials file (0700)
//   discoveryUrl      issuer + '/.well-known/openid-configuration'
//   oauthMetadataUrl  issuer + '/.well-known/oauth-authorization-server' (RFC 8414; served by
//                     oidc-provider 9 itself, same document). It has no
//                     introspection_endpoint_auth_methods_supported (RFC 8414 default:
//                     client_secret_basic); token_endpoint_auth_methods_supported applies.
//   jwksUri           issuer + '/jwks'
//   tokenUrl          issuer + '/token'
//   introspectionUrl  issuer + '/token/introspection' (the introspector authenticates with
//                     client_secret_basic, as every client here does)
//   revocationUrl     issuer + '/token/revocation'
//   caFile            PEM of the CA that signed the server certificate (0644; the CA key is
//                     deleted once the server certificate is signed). The server certificate
//                     has SAN IP:127.0.0.1, IP:::1, DNS:localhost; give caFile as libcurl's CAINFO.
//   caPem             its text (for node: https.request({ ca: op.caPem }))
//   introspectionClient  { id, secret }
//   exchangeClient    { id, secret } of opts.exchanger (undefined without it)
//   exchanges         live count of token exchanges answered 200
//   clients           { [id]: { id, secret } }: the token clients
//   writeCredentials(file = dir/introspection.cred, client = introspectionClient) -> file
//                     writes ONE line `client_id:client_secret\n`, mode 0600. Ids and secrets are
//                     [A-Za-z0-9_-] only, so no escaping is ever needed.
//   setResource(uri, { format, scope, alg, ttl, audience })  adds or changes a resource server
//   token({ resource, format, scope, alg, ttl, client }) -> Promise<string>
//                     an access token from a real client_credentials request (client_secret_basic)
//                     to the token endpoint with the RFC 8707 `resource` parameter. The resource's
//                     config decides the format and the scopes allowed: format/alg/ttl given here
//                     are first stored into it (setResource), format defaulting to 'jwt' and
//                     alg to 'RS256' (else algs[0]) for a resource not seen before. A resource
//                     whose scope is null (the default) grants whatever scope is asked; with a
//                     scope string, the
//                     granted scope is the requested scopes it lists (oidc-provider drops the
//                     others silently). Without `resource` you get an opaque token with no aud.
//                     Throws on an error response (the error JSON in the message).
//                     aud is the resource URI unless its config sets `audience`.
//   tokenResponse(same) -> { status, body, client }  the raw answer, for error cases (no throw)
//   introspect(token, { client = introspectionClient }) -> Promise<object>  RFC 7662 answer
//   revoke(token) -> Promise<number>          RFC 7009 by the client that got the token; status
//   rotateKeys({ keepOld = true, algs = all }) -> { [alg]: kid }
//                     new key per alg (kids 'rs256-2', 'es256-2', ...): tokens issued after it are
//                     signed with them; keepOld: the old public keys stay in the JWKS (after the
//                     new ones), else the JWKS has only the new ones. Same issuer, port, clients
//                     and token store (opaque tokens issued before stay introspectable).
//   kids              { [alg]: current signing kid }
//   jwks()            the public JWK Set as published (object)
//   requests          live counts: { jwks, discovery (both well-knowns), openidConfiguration,
//                     oauthAuthorizationServer, token, introspection, revocation, other,
//                     byPath: { [path]: n } }; resetRequests() zeroes them and empties log
//   log               [{ t, method, path, endpoint, status }] every request (status once answered;
//                     the first 10000 only)
//   fail(endpoint, status = 500)   answer that endpoint ('jwks', 'discovery', 'token',
//                     'introspection', 'revocation') with that status and a JSON error from now
//                     on; fail(endpoint, null) restores it. Counted in requests all the same.
//   setCacheControl(endpoint, value)  e.g. setCacheControl('jwks', 'max-age=60'); null: as
//                     oidc-provider sends it (no Cache-Control on /jwks and discovery)
//   delay(endpoint, ms)            hold that endpoint's answers ms before handling (0: off)
//   serve(endpoint, text)          answer that endpoint 200 with text (application/json) from
//                     now on, instead of oidc-provider; serve(endpoint, null) restores it
//   errors            server errors oidc-provider reported (should stay empty)
//   provider          the current oidc-provider instance (a new one after each rotateKeys())
//   stop()            closes the server and every connection (keep-alive ones too), removes dir;
//                     idempotent. Resolves once the port is free.
//
// What oidc-provider 9 issues for client_credentials with a resource indicator (observed):
//   JWT header  { alg: 'RS256'|'ES256'|'EdDSA', typ: 'at+jwt', kid }
//   JWT payload { jti, sub: <client_id>, iat, exp, scope (absent if none granted), client_id,
//                 iss: issuer, aud: <resource URI> (a string) }
//     (`sub` is the client_id: there is no end user in client_credentials.)
//   introspection of an opaque one: { active: true, client_id, exp, iat, iss, aud: <resource>,
//                 scope, token_type: 'Bearer' } and NO `sub` (oidc-provider sets sub only
//                 for tokens with an end user): the principal is `client_id`.
//   unknown, expired or revoked token: { active: false }. A JWT sent to introspection is
//   refused: HTTP 400 { error: 'unsupported_token_type' } (oidc-provider does not introspect
//   its structured tokens).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

const ALG_KEY = {
  RS256: { type: 'rsa', opts: { modulusLength: 2048 } },
  ES256: { type: 'ec', opts: { namedCurve: 'P-256' } },
  EdDSA: { type: 'ed25519', opts: {} },
};

const ENDPOINTS = {
  '/jwks': 'jwks',
  '/.well-known/openid-configuration': 'discovery',
  '/.well-known/oauth-authorization-server': 'discovery',
  '/token': 'token',
  '/token/introspection': 'introspection',
  '/token/revocation': 'revocation',
};

const LOG_MAX = 10000;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

function randomSecret() {
  return crypto.randomBytes(32).toString('base64url');
}

function openssl(args, cwd) {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    if (e.code === 'ENOENT') throw new Error('the openssl CLI is missing: tests/deps.sh installs it (Debian package openssl)');
    throw new Error(`openssl ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

/** A CA and a server certificate for loopback, in dir: ca.pem (0644), server.key (0600), server.pem. */
function makeCertificates(dir) {
  const days = '2';
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', days, '-subj', '/CN=mcp-gateway test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1'], dir);
  fs.writeFileSync(path.join(dir, 'server.ext'), [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost',
    'subjectKeyIdentifier=hash',
    'authorityKeyIdentifier=keyid',
    '',
  ].join('\n'));
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
    '-set_serial', `0x${crypto.randomBytes(8).toString('hex')}`, '-days', days,
    '-extfile', 'server.ext', '-out', 'server.pem'], dir);
  for (const f of ['ca.key', 'server.csr', 'server.ext']) fs.rmSync(path.join(dir, f), { force: true });
  fs.chmodSync(path.join(dir, 'ca.pem'), 0o644);
  fs.chmodSync(path.join(dir, 'server.pem'), 0o644);
  fs.chmodSync(path.join(dir, 'server.key'), 0o600);
  return {
    caFile: path.join(dir, 'ca.pem'),
    key: fs.readFileSync(path.join(dir, 'server.key')),
    cert: fs.readFileSync(path.join(dir, 'server.pem')),
  };
}

function makeSigningKey(alg, kid) {
  const k = ALG_KEY[alg];
  if (!k) throw new Error(`unsupported signing alg ${alg} (have ${Object.keys(ALG_KEY).join(', ')})`);
  const { privateKey } = crypto.generateKeyPairSync(k.type, k.opts);
  return { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
}

/** oidc-provider's storage interface, one store per harness (the package's own is process-wide). */
function adapterClass() {
  const store = new Map();
  const live = (e) => e && (e.exp === undefined || e.exp > Date.now());
  return class HarnessAdapter {
    constructor(model) { this.model = model; }
    key(id) { return `${this.model}:${id}`; }
    async upsert(id, payload, expiresIn) {
      store.set(this.key(id), { payload: structuredClone(payload), exp: expiresIn ? Date.now() + expiresIn * 1000 : undefined });
    }
    async find(id) {
      const e = store.get(this.key(id));
      if (!live(e)) { store.delete(this.key(id)); return undefined; }
      return structuredClone(e.payload);
    }
    async findByUid(uid) {
      for (const e of store.values()) if (live(e) && e.payload.uid === uid) return structuredClone(e.payload);
      return undefined;
    }
    async findByUserCode(code) {
      for (const e of store.values()) if (live(e) && e.payload.userCode === code) return structuredClone(e.payload);
      return undefined;
    }
    async consume(id) {
      const e = store.get(this.key(id));
      if (e) e.payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id) { store.delete(this.key(id)); }
    async revokeByGrantId(grantId) {
      for (const [k, e] of [...store]) if (e.payload.grantId === grantId) store.delete(k);
    }
  };
}

let ProviderClass;
let OidcErrors; // oidc-provider's error classes: a named export (Provider.errors is undefined in 9.x)
async function loadProvider() {
  if (!ProviderClass) {
    try {
      ({ default: ProviderClass, errors: OidcErrors } = await import('oidc-provider'));
    } catch (e) {
      throw new Error(`oidc-provider cannot be loaded (run \`npm ci\` in tests/; tests/deps.sh does it): ${e.message}`);
    }
  }
  return ProviderClass;
}

function request(url, { method = 'GET', headers = {}, body, ca }) {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, headers, ca, timeout: 10000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, body: json });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer within 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

const basic = (c) => `Basic ${Buffer.from(`${encodeURIComponent(c.id)}:${encodeURIComponent(c.secret)}`).toString('base64')}`;
const form = (o) => new URLSearchParams(Object.entries(o).filter(([, v]) => v !== undefined && v !== null)).toString();

export async function startOidc(opts = {}) {
  const Provider = await loadProvider();
  const {
    host = '127.0.0.1',
    algs = ['RS256', 'ES256', 'EdDSA'],
    clients: clientIds = ['mcp-client'],
    introspector = 'mcp-gateway',
    exchanger,
    ttl: defaultTtl = 600,
    quiet = false,
    extraClaims,
  } = opts;
  if (!algs.length) throw new Error('startOidc: algs must name at least one algorithm');
  const defaultAlg = algs.includes('RS256') ? 'RS256' : algs[0];
  if (host !== '127.0.0.1' && host !== '::1') throw new Error('startOidc: host must be 127.0.0.1 or ::1 (loopback only)');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgw-oidc-'));
  fs.chmodSync(dir, 0o700);
  let certs;
  try {
    certs = makeCertificates(dir);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const caPem = fs.readFileSync(certs.caFile, 'utf8');

  const clients = Object.fromEntries(clientIds.map((id) => [id, { id, secret: randomSecret() }]));
  const introspectionClient = { id: introspector, secret: randomSecret() };
  if (clients[introspector]) throw new Error('startOidc: the introspector must not also be a token client');
  const exchangeClient = exchanger ? { id: exchanger, secret: randomSecret() } : undefined;
  if (exchanger && (clients[exchanger] || exchanger === introspector)) throw new Error('startOidc: the exchanger must be a client of its own');
  const clientMetadata = [
    ...Object.values(clients).map((c) => ({
      client_id: c.id, client_secret: c.secret, grant_types: ['client_credentials'], response_types: [],
      redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic',
    })),
    {
      client_id: introspectionClient.id, client_secret: introspectionClient.secret, grant_types: [],
      response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic',
    },
    ...(exchangeClient ? [{
      client_id: exchangeClient.id, client_secret: exchangeClient.secret, grant_types: [TOKEN_EXCHANGE],
      response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic',
    }] : []),
  ];
  const exchanged = new WeakMap(); // issued token -> { subject, actor }: its extra claims
  let exchanges = 0;

  const resources = new Map();
  function setResource(uri, cfg = {}) {
    const cur = resources.get(uri) || { format: 'jwt', scope: null, alg: defaultAlg, ttl: undefined, audience: undefined };
    const next = { ...cur };
    for (const k of ['format', 'scope', 'alg', 'ttl', 'audience']) if (cfg[k] !== undefined) next[k] = cfg[k];
    if (!['jwt', 'opaque'].includes(next.format)) throw new Error(`resource ${uri}: format must be 'jwt' or 'opaque'`);
    if (next.format === 'jwt' && !kids[next.alg]) throw new Error(`resource ${uri}: no signing key for ${next.alg} (algs: ${Object.keys(kids).join(', ')})`);
    resources.set(uri, next);
    return next;
  }

  // Signing keys: private JWKs, the current ones first; kids[alg] signs.
  let generation = 1;
  const kids = {};
  let keys = algs.map((alg) => makeSigningKey(alg, `${alg.toLowerCase()}-${generation}`));
  for (const k of keys) kids[k.alg] = k.kid;
  for (const [uri, cfg] of Object.entries(opts.resources || {})) setResource(uri, cfg);

  const Adapter = adapterClass();
  const errors = [];
  const cookieKeys = [randomSecret()];
  let server;
  let issuer;
  let provider;
  let handler;

  function makeProvider() {
    const p = new Provider(issuer, {
      adapter: Adapter,
      clients: clientMetadata,
      jwks: { keys },
      cookies: { keys: cookieKeys },
      // Client metadata is checked against the keys: without an RS256 key the default fails.
      clientDefaults: { id_token_signed_response_alg: defaultAlg },
      clientBasedCORS: () => false,
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        introspection: {
          enabled: true,
          allowedPolicy: async (_ctx, client, token) => client.clientId === introspectionClient.id || client.clientId === token.clientId,
        },
        revocation: {
          enabled: true,
          allowedPolicy: async (_ctx, client, token) => client.clientId === token.clientId,
        },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => undefined,
          useGrantedResource: async () => false,
          getResourceServerInfo: async (ctx, indicator) => {
            const r = resources.get(indicator);
            if (!r) throw new OidcErrors.InvalidTarget(`unknown resource ${indicator}`);
            const info = {
              scope: r.scope ?? (ctx.oidc.params?.scope || ''),
              accessTokenFormat: r.format,
              accessTokenTTL: r.ttl ?? defaultTtl,
            };
            if (r.audience !== undefined) info.audience = r.audience;
            if (r.format === 'jwt') info.jwt = { sign: { alg: r.alg, kid: kids[r.alg] } };
            return info;
          },
        },
      },
      ttl: {
        AccessToken: defaultTtl,
        ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? defaultTtl,
        Grant: defaultTtl,
        Session: defaultTtl,
        Interaction: defaultTtl,
        IdToken: defaultTtl,
        RefreshToken: defaultTtl,
      },
      extraTokenClaims: async (_ctx, token) => {
        const x = exchanged.get(token);
        if (x) return { subject: x.subject, act: { sub: x.actor } };
        return extraClaims
          ? extraClaims({ clientId: token.clientId, kind: token.kind, aud: token.aud, scope: token.scope })
          : undefined;
      },
      findAccount: async () => undefined,
      renderError: async (ctx, out) => { ctx.type = 'json'; ctx.body = out; },
    });
    p.silent = true; // koa: no console.error of its own
    p.on('server_error', (_ctx, err) => {
      errors.push(err);
      if (!quiet) process.stderr.write(`oidc harness: oidc-provider server_error: ${err?.stack || err}\n`);
    });
    if (exchangeClient) {
      p.registerGrantType(TOKEN_EXCHANGE, (ctx) => tokenExchange(p, ctx),
        ['subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type', 'actor_token', 'actor_token_type'],
        ['audience', 'resource']);
    }
    provider = p;
    handler = p.callback();
  }

  /** The client_id a subject token this server issued names, or undefined (unknown, expired, revoked). */
  async function subjectOf(p, value) {
    if (typeof value !== 'string' || !value) return undefined;
    const parts = value.split('.');
    if (parts.length !== 3) {
      const t = await p.ClientCredentials.find(value);
      return t && !t.isExpired ? t.clientId : undefined;
    }
    let header;
    let claims;
    try {
      header = JSON.parse(Buffer.from(parts[0], 'base64url'));
      claims = JSON.parse(Buffer.from(parts[1], 'base64url'));
    } catch { return undefined; }
    const k = keys.find((x) => x.kid === header.kid && x.alg === header.alg);
    if (!k) return undefined;
    const pub = crypto.createPublicKey({ key: k, format: 'jwk' });
    const input = Buffer.from(`${parts[0]}.${parts[1]}`);
    const sig = Buffer.from(parts[2], 'base64url');
    const ok = header.alg === 'EdDSA' ? crypto.verify(null, input, pub, sig)
      : crypto.verify('sha256', input, header.alg === 'ES256' ? { key: pub, dsaEncoding: 'ieee-p1363' } : pub, sig);
    if (!ok || claims.iss !== issuer || !(claims.exp > Date.now() / 1000)) return undefined;
    return claims.client_id;
  }

  /** The RFC 8693 grant (registered with provider.registerGrantType). */
  async function tokenExchange(p, ctx) {
    const { params, client } = ctx.oidc;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new OidcErrors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
    }
    const subject = await subjectOf(p, params.subject_token);
    if (!subject) throw new OidcErrors.InvalidGrant('the subject token is not active');
    const target = params.resource || params.audience;
    const r = target && resources.get(target);
    if (!r) throw new OidcErrors.InvalidTarget(`unknown ${params.resource ? 'resource' : 'audience'}`);
    const token = new p.ClientCredentials({ client, scope: params.scope || undefined });
    token.resourceServer = {
      audience: r.audience ?? target,
      scope: r.scope ?? (params.scope || ''),
      accessTokenTTL: r.ttl ?? defaultTtl,
      accessTokenFormat: r.format,
      jwt: r.format === 'jwt' ? { sign: { alg: r.alg, kid: kids[r.alg] } } : undefined,
      identifier: () => target,
    };
    exchanged.set(token, { subject, actor: client.clientId });
    const value = await token.save();
    exchanges += 1;
    ctx.body = {
      access_token: value,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: 'Bearer',
      expires_in: token.expiration,
      scope: token.scope || undefined,
    };
  }

  const requests = {};
  function resetRequests() {
    for (const k of ['jwks', 'discovery', 'openidConfiguration', 'oauthAuthorizationServer', 'token', 'introspection', 'revocation', 'other']) requests[k] = 0;
    requests.byPath = {};
    log.length = 0;
  }
  const log = [];
  resetRequests();
  const failing = {};
  const cacheControl = {};
  const delays = {};
  const served = {};
  const sockets = new Set();

  function onRequest(req, res) {
    const p = new URL(req.url, 'https://x').pathname;
    const endpoint = ENDPOINTS[p] || 'other';
    requests[endpoint] += 1;
    if (p === '/.well-known/openid-configuration') requests.openidConfiguration += 1;
    if (p === '/.well-known/oauth-authorization-server') requests.oauthAuthorizationServer += 1;
    requests.byPath[p] = (requests.byPath[p] || 0) + 1;
    const entry = { t: Date.now(), method: req.method, path: p, endpoint, status: undefined };
    if (log.length < LOG_MAX) log.push(entry);
    res.on('finish', () => { entry.status = res.statusCode; });

    const go = () => {
      if (res.destroyed) return;
      if (failing[endpoint]) {
        req.resume();
        res.writeHead(failing[endpoint], { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify({ error: 'server_error', error_description: 'failure injected by the test harness' }));
        return;
      }
      if (served[endpoint] !== undefined) {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(served[endpoint]);
        return;
      }
      if (cacheControl[endpoint]) {
        const value = cacheControl[endpoint];
        const writeHead = res.writeHead;
        res.writeHead = function patched(...args) {
          if (!this.headersSent) this.setHeader('cache-control', value);
          return writeHead.apply(this, args);
        };
      }
      handler(req, res);
    };
    if (delays[endpoint]) setTimeout(go, delays[endpoint]).unref();
    else go();
  }

  server = https.createServer({ key: certs.key, cert: certs.cert }, onRequest);
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  server.on('tlsClientError', () => {}); // a client that does not trust the CA: its problem
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => { server.off('error', reject); resolve(); });
  });
  const { port } = server.address();
  issuer = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  try {
    makeProvider();
  } catch (e) {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }

  async function tokenResponse({ resource, format, scope, alg, ttl, client } = {}) {
    const c = clients[client || clientIds[0]];
    if (!c) throw new Error(`token: unknown client ${client} (have ${clientIds.join(', ')})`);
    if (resource !== undefined && (format !== undefined || alg !== undefined || ttl !== undefined || !resources.has(resource))) {
      setResource(resource, { format, alg, ttl });
    }
    const r = await request(`${issuer}/token`, {
      method: 'POST',
      ca: caPem,
      headers: { authorization: basic(c), 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form({ grant_type: 'client_credentials', scope, resource }),
    });
    return { status: r.status, body: r.body ?? r.text, client: c.id };
  }

  const owners = new Map(); // token -> client id, for revoke()

  const op = {
    issuer,
    host,
    port,
    dir,
    discoveryUrl: `${issuer}/.well-known/openid-configuration`,
    oauthMetadataUrl: `${issuer}/.well-known/oauth-authorization-server`,
    jwksUri: `${issuer}/jwks`,
    tokenUrl: `${issuer}/token`,
    introspectionUrl: `${issuer}/token/introspection`,
    revocationUrl: `${issuer}/token/revocation`,
    caFile: certs.caFile,
    caPem,
    introspectionClient,
    exchangeClient,
    get exchanges() { return exchanges; },
    clients,
    requests,
    log,
    errors,
    kids,
    get provider() { return provider; },
    resetRequests,
    setResource,
    writeCredentials(file = path.join(dir, 'introspection.cred'), client = introspectionClient) {
      fs.rmSync(file, { force: true });
      fs.writeFileSync(file, `${client.id}:${client.secret}\n`, { mode: 0o600 });
      fs.chmodSync(file, 0o600);
      return file;
    },
    tokenResponse,
    async token(o = {}) {
      const r = await tokenResponse(o);
      if (r.status !== 200 || typeof r.body?.access_token !== 'string') {
        throw new Error(`token endpoint answered ${r.status}: ${JSON.stringify(r.body)}`);
      }
      owners.set(r.body.access_token, r.client);
      return r.body.access_token;
    },
    async introspect(token, { client = introspectionClient, hint } = {}) {
      const r = await request(op.introspectionUrl, {
        method: 'POST',
        ca: caPem,
        headers: { authorization: basic(client), 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form({ token, token_type_hint: hint }),
      });
      if (r.status !== 200) throw new Error(`introspection answered ${r.status}: ${r.text}`);
      return r.body;
    },
    async revoke(token) {
      const c = clients[owners.get(token) || clientIds[0]];
      const r = await request(op.revocationUrl, {
        method: 'POST',
        ca: caPem,
        headers: { authorization: basic(c), 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ token, token_type_hint: 'access_token' }),
      });
      return r.status;
    },
    rotateKeys({ keepOld = true, algs: rotate = Object.keys(kids) } = {}) {
      generation += 1;
      const fresh = rotate.map((alg) => makeSigningKey(alg, `${alg.toLowerCase()}-${generation}`));
      const kept = keepOld ? keys : keys.filter((k) => !rotate.includes(k.alg));
      keys = [...fresh, ...kept];
      for (const k of fresh) kids[k.alg] = k.kid;
      makeProvider(); // the keystore is fixed at construction; same issuer, adapter and clients
      return { ...kids };
    },
    jwks() {
      return {
        keys: keys.map((k) => {
          const pub = crypto.createPublicKey({ key: k, format: 'jwk' }).export({ format: 'jwk' });
          return { ...pub, kid: k.kid, alg: k.alg, use: 'sig' };
        }),
      };
    },
    fail(endpoint, status = 500) {
      if (!Object.values(ENDPOINTS).includes(endpoint)) throw new Error(`fail: unknown endpoint ${endpoint}`);
      if (status === null || status === false) delete failing[endpoint];
      else failing[endpoint] = status;
    },
    setCacheControl(endpoint, value) {
      if (!Object.values(ENDPOINTS).includes(endpoint)) throw new Error(`setCacheControl: unknown endpoint ${endpoint}`);
      if (value === null || value === undefined) delete cacheControl[endpoint];
      else cacheControl[endpoint] = value;
    },
    delay(endpoint, ms) {
      if (!Object.values(ENDPOINTS).includes(endpoint)) throw new Error(`delay: unknown endpoint ${endpoint}`);
      if (ms) delays[endpoint] = ms;
      else delete delays[endpoint];
    },
    serve(endpoint, text) {
      if (!Object.values(ENDPOINTS).includes(endpoint)) throw new Error(`serve: unknown endpoint ${endpoint}`);
      if (text === null || text === undefined) delete served[endpoint];
      else served[endpoint] = text;
    },
    stopped: false,
    async stop() {
      if (op.stopped) return;
      op.stopped = true;
      const closed = new Promise((resolve) => server.close(() => resolve()));
      server.closeAllConnections?.();
      for (const s of sockets) s.destroy();
      await closed;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return op;
}
