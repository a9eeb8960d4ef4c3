// SPDX-License-Identifier: MIT
// The authorization server of the benchmark's auth scenarios (run.mjs starts it, once per run, as
// its own process, so that its CPU is not the gateway's): HTTPS on 127.0.0.1, port 0, with the
// certificate run.mjs made with the openssl CLI. Usage: node authserver.mjs CONFIG.json, where
// CONFIG holds { key, cert (PEM files), jwks (a JWK Set file), opaque (a file of "Bearer TOKEN"
// lines: the active opaque tokens), client_id, client_secret, aud, sub, scope }. Prints
// {"port":N} on stdout once it listens; ends on SIGTERM or when its stdin closes.
//   GET  /.well-known/openid-configuration   issuer, jwks_uri, introspection_endpoint
//   GET  /jwks                               the JWK Set, Cache-Control: max-age=3600
//   POST /introspect                         RFC 7662 (HTTP Basic client authentication)
//   GET  /bench/stats                        counts of what it served, for run.mjs
// Anything else (RFC 8414's /.well-known/oauth-authorization-server among them) gets 404, so the
// gateway's discovery falls back to the OpenID Connect document, as with an OIDC-only issuer.
import fs from 'node:fs';
import https from 'node:https';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const active = new Set(fs.readFileSync(cfg.opaque, 'utf8').split('\n').filter(Boolean).map((l) => l.replace(/^Bearer /, '')));
const jwks = fs.readFileSync(cfg.jwks);
const basic = `Basic ${Buffer.from(`${encodeURIComponent(cfg.client_id)}:${encodeURIComponent(cfg.client_secret)}`).toString('base64')}`;
const stats = { discovery: 0, jwks: 0, introspections: 0, active: 0, inactive: 0, unauthorized: 0, not_found: 0, connections: 0 };
let issuer = '';

function send(res, status, body, headers = {}) {
  const data = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': data.length, ...headers });
  res.end(data);
}

const server = https.createServer({ key: fs.readFileSync(cfg.key), cert: fs.readFileSync(cfg.cert), keepAliveTimeout: 60000 }, (req, res) => {
  const url = req.url.split('?')[0];
  if (req.method === 'GET' && url === '/.well-known/openid-configuration') {
    stats.discovery++;
    return send(res, 200, {
      issuer, jwks_uri: `${issuer}/jwks`, introspection_endpoint: `${issuer}/introspect`,
      token_endpoint: `${issuer}/token`, response_types_supported: ['code'], subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
    });
  }
  if (req.method === 'GET' && url === '/jwks') {
    stats.jwks++;
    return send(res, 200, jwks, { 'Content-Type': 'application/jwk-set+json', 'Cache-Control': 'max-age=3600' });
  }
  if (req.method === 'GET' && url === '/bench/stats') return send(res, 200, stats);
  if (req.method === 'POST' && url === '/introspect') {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      stats.introspections++;
      if (req.headers.authorization !== basic) {
        stats.unauthorized++;
        return send(res, 401, { error: 'invalid_client' }, { 'WWW-Authenticate': 'Basic realm="bench"' });
      }
      const token = new URLSearchParams(Buffer.concat(chunks).toString()).get('token');
      if (!active.has(token)) {
        stats.inactive++;
        return send(res, 200, { active: false });
      }
      stats.active++;
      const now = Math.floor(Date.now() / 1000);
      return send(res, 200, {
        active: true, sub: cfg.sub, scope: cfg.scope, client_id: cfg.client_id, token_type: 'Bearer',
        exp: now + 3600, iat: now, aud: cfg.aud, iss: issuer,
      }, { 'Cache-Control': 'no-store' });
    });
    return undefined;
  }
  stats.not_found++;
  return send(res, 404, { error: 'not found' });
});
server.on('connection', () => { stats.connections++; });
server.listen(0, '127.0.0.1', () => {
  issuer = `https://127.0.0.1:${server.address().port}`;
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
const end = () => { server.close(); server.closeAllConnections?.(); process.exit(0); };
process.on('SIGTERM', end);
process.stdin.on('end', end);
process.stdin.resume();
