// SPDX-License-Identifier: MIT
// Per-principal limits as one mechanism of the server (src/mcp/quota.c), in both eras, seen from
// outside with the real gateway and real children:
//   - max_inflight_per_principal holds across the operator's restart of the pool (POST
//     /admin/servers/NAME/restart) and across a reload (SIGHUP): a principal with a call still in
//     flight in the retired pool gets 429 for a second one; another principal is served; once the
//     call ends, the principal is served again;
//   - the same limit counts a principal's session (2025-06-18) requests, across a reload and
//     together with its stateless requests to the same server;
//   - at the defaults, two principals that hold input rounds do not lock a third out of a legacy
//     pool (a child that asks serves one request at a time, so a held call takes a child);
//   - with [auth] mode = none the client's address (the access log's client) is the principal:
//     one client at its limit does not refuse another.
// Nothing sleeps to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { post, request, rpc, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { V, exchange, mpost } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const META = 'io.modelcontextprotocol/';
const ADMIN = 'principals-admin-token-0123456789abcdefgh';
const PUBLIC_URL = 'https://mcp.test.example';

const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const token = (tag) => `${tag}-${crypto.randomBytes(18).toString('base64url')}`;
const textOf = (j) => j?.result?.content?.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
let nextId = 1;

/** A stateless request with its _meta envelope. */
function mreq(method, params = {}, { id = `p-${nextId++}`, caps = {}, meta = {} } = {}) {
  return {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: caps, [`${META}clientInfo`]: { name: 'principals-it', version: '1' }, ...meta } },
  };
}
const echo = (text, opts) => mreq('tools/call', { name: 'echo', arguments: { text } }, opts);
const elicit = (message) => mreq('tools/call', { name: 'elicit', arguments: { message } }, { caps: { elicitation: {} } });

/** Principals in a tokens file; the gateway's [auth]. */
function principals(dir, names) {
  const T = Object.fromEntries(names.map((n) => [n, token(n)]));
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, Object.entries(T).map(([n, t]) => `sha256:${sha256hex(t)} ${n}`).join('\n') + '\n');
  return { T, auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: file } };
}

/** A 2026-07-28 cancel_self in flight at a child (its progress came): the live response. */
async function inFlight(gw, opts) {
  const id = `w-${nextId++}`;
  const r = await mpost(gw, mreq('tools/call', { name: 'cancel_self', arguments: {} }, { id, meta: { progressToken: id } }), opts);
  assert.equal(r.status, 200);
  await r.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
  return r;
}

/** A request refused for max_inflight_per_principal: 429, its own id, the key named. */
async function refusedInflight(gw, msg, opts) {
  const x = await exchange(gw, msg, opts);
  assert.equal(x.r.status, 429, x.r.text());
  assert.deepEqual(x.answer?.id, msg.id, x.r.text());
  assert.match(x.answer?.error?.message ?? '', /max_inflight_per_principal/, x.r.text());
}

/** A request served: 200 and echo's text. */
async function served(gw, text, opts) {
  const x = await exchange(gw, echo(text), opts);
  assert.equal(x.r.status, 200, x.r.text());
  assert.equal(textOf(x.answer), text, x.r.text());
}

async function restart(gw, name) {
  const r = await request(`${gw.base}/admin/servers/${name}/restart`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN}` } });
  const text = await r.done(scaled(10000));
  assert.equal(r.status, 200, text);
}

/** SIGHUP with the same file. */
async function reload(gw) {
  const n = (gw.logs().match(/SIGHUP: configuration reloaded/g) ?? []).length;
  gw.proc.kill('SIGHUP');
  await waitFor(() => (gw.logs().match(/SIGHUP: configuration reloaded/g) ?? []).length > n, scaled(10000), 'the reload');
}

test('2026-07-28: max_inflight_per_principal holds across the admin restart and SIGHUP (the old pool\'s call still counts); another principal is served', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-principals-pool-');
  const { T, auth } = principals(d, ['alice', 'bob']);
  const A = { bearer: T.alice };
  const B = { bearer: T.bob };
  const extra = 'era = legacy\nmax_inflight_per_principal = 1';
  await withGateway({ auth, gateway: { admin_token: ADMIN }, servers: [{ name: 'example', path: '/mcp', log: path.join(d, 'child.log'), extra }] }, async (g) => {
    const w = await inFlight(g, A);
    await refusedInflight(g, echo('second'), A);
    await restart(g, 'example');
    await refusedInflight(g, echo('after the restart'), A);
    await served(g, 'bob after the restart', B);
    await reload(g);
    await refusedInflight(g, echo('after the reload'), A);
    await served(g, 'bob after the reload', B);
    assert.equal(w.ended, false, 'the first call is still in flight in the retired pool');
    // Its end gives the count back: Alice is served again.
    w.drop();
    await waitFor(async () => (await exchange(g, echo('again'), A)).r.status === 200, scaled(10000), 'Alice served again');
  });
});

/** A session of the principal (bearer token tok): its id. */
async function session(gw, tok) {
  const headers = { Authorization: `Bearer ${tok}` };
  const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }), { headers });
  await r.done(scaled(10000));
  assert.equal(r.status, 200, r.text());
  const sid = r.headers['mcp-session-id'];
  const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, headers: { ...headers, 'MCP-Protocol-Version': '2025-06-18' } });
  await n.done(scaled(10000));
  return { sid, headers: { ...headers, 'MCP-Protocol-Version': '2025-06-18' } };
}

/** tools/call of name in session s: the live response. */
const sessionCall = (gw, s, name, args = {}, meta) => post(gw, rpc('tools/call', meta ? { name, arguments: args, _meta: meta } : { name, arguments: args }), { sid: s.sid, headers: s.headers });

test('sessions: max_inflight_per_principal counts a principal\'s session requests, across sessions, SIGHUP and the stateless era', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-principals-sessions-');
  const { T, auth } = principals(d, ['alice', 'bob']);
  const extra = 'max_inflight_per_principal = 1';
  await withGateway({ auth, gateway: { admin_token: ADMIN }, servers: [{ name: 'example', path: '/mcp', log: path.join(d, 'child.log'), extra }] }, async (g) => {
    const s1 = await session(g, T.alice);
    const w = await sessionCall(g, s1, 'cancel_self', {}, { progressToken: 'w1' });
    assert.equal(w.status, 200);
    await w.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    // A second session of hers, made after a reload: the call of the first still counts.
    await reload(g);
    const s2 = await session(g, T.alice);
    const x = await sessionCall(g, s2, 'echo', { text: 'second' });
    await x.done(scaled(10000));
    assert.equal(x.status, 429, x.text());
    assert.match(x.text(), /max_inflight_per_principal/);
    // And her stateless requests to the same server, across the pool's restart.
    await restart(g, 'example');
    await refusedInflight(g, echo('stateless'), { bearer: T.alice });
    const b = await session(g, T.bob);
    const y = await sessionCall(g, b, 'echo', { text: 'bob' });
    await y.done(scaled(10000));
    assert.equal(y.status, 200, y.text());
    w.drop();
    await waitFor(async () => {
      const z = await sessionCall(g, s2, 'echo', { text: 'again' });
      await z.done(scaled(10000));
      return z.status === 200;
    }, scaled(10000), 'Alice served again');
  });
});

test('defaults: two principals holding input rounds do not lock a third out of a legacy pool', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-principals-three-');
  const { T, auth } = principals(d, ['alice', 'bob', 'carol']);
  // pool_max_children at its default, written out: the pooled matrix run sets 1 where a server
  // does not, and the shares of held calls this test checks need the default's 4 children.
  await withGateway({ auth, servers: [{ name: 'example', path: '/mcp', log: path.join(d, 'child.log'), extra: 'pool_max_children = 4' }] }, async (g) => {
    // Alice and Bob each try to hold two calls at once (each waits for its client's input).
    const held = { alice: 0, bob: 0 };
    for (const who of ['alice', 'bob']) {
      for (let i = 0; i < 2; i++) {
        const x = await exchange(g, elicit(`${who} ${i}`), { bearer: T[who] });
        if (x.r.status === 200 && x.answer?.result?.resultType === 'input_required') held[who]++;
        else assert.equal(x.r.status, 429, x.r.text());
      }
      assert.ok(held[who] >= 1, `${who} holds a call`);
    }
    // Carol is served: a call of hers is taken (and may hold a round of her own).
    const c = await exchange(g, elicit('carol'), { bearer: T.carol });
    assert.equal(c.r.status, 200, `${c.r.text()} (held: ${JSON.stringify(held)})`);
    assert.equal(c.answer?.result?.resultType, 'input_required', c.r.text());
    await served(g, 'carol again', { bearer: T.carol });
  });
});

test('[auth] mode = none: the client address is the principal; one client at its limit does not refuse another', { timeout: scaled(60000) }, async () => {
  const d = tmpdir('mcpgw-principals-none-');
  const alog = path.join(d, 'access.log');
  const extra = 'max_inflight_per_principal = 1';
  const gateway = { trusted_proxies: '127.0.0.1', access_log: alog, access_log_format: 'json' };
  await withGateway({ gateway, servers: [{ name: 'example', path: '/mcp', log: path.join(d, 'child.log'), extra }] }, async (g) => {
    const one = { headers: { 'X-Forwarded-For': '198.51.100.1' } };
    const two = { headers: { 'X-Forwarded-For': '198.51.100.2' } };
    const w = await inFlight(g, one);
    await refusedInflight(g, echo('one again'), one);
    await served(g, 'two', two);
    const lines = await waitFor(() => {
      const l = fs.existsSync(alog) ? fs.readFileSync(alog, 'utf8').split('\n').filter(Boolean).map((x) => JSON.parse(x)) : [];
      return l.some((o) => o.principal === 'address:198.51.100.2') && l;
    }, scaled(5000), 'the access lines');
    assert.ok(lines.some((o) => o.principal === 'address:198.51.100.1' && o.status === 429), JSON.stringify(lines));
    w.drop();
  });
});
