// SPDX-License-Identifier: MIT
// Per-tool policy ([server:NAME] allowed_tools, denied_tools, tool_scopes): what each principal's
// tools/list shows and what its tools/call reaches, on a 2025-06-18 session, a 2025-03-26 batch,
// a 2024-11-05 HTTP+SSE session, stateless requests through the pool (the example server, a
// legacy child bridged; and the stateless fixture, whose own cacheScope "public" turns "private"),
// bearer tokens with scopes and JWTs whose scope/scp claims are remembered with them; a hidden
// tool's call never reaches the child and gets the unknown tool error (-32602); the log line and
// the counters; a server without a policy is untouched; --check-config names a bad entry; a
// request whose body comes after a SIGHUP is judged by the new tokens and policy.
//
// One gateway in bearer mode fronts the example server at /mcp with a policy, the same server at
// /open with none, and the stateless fixture at /stateless. The example child logs every line it
// receives (--log), which is how "never reaches the child" is checked.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  ACCEPT_BOTH, GW_BIN, MATRIX_POOLED, metricSamples, request, rpc, splitPost, startGateway, tmpdir,
  waitFor, withGateway,
} from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const PUBLIC_URL = 'https://mcp.policy.example';
const ISSUER = 'https://issuer.policy.example';
const V = '2026-07-28';
const META = 'io.modelcontextprotocol/';
const STATELESS_JS = path.join(process.env.GW_SOURCE_ROOT ?? '', 'tests/fixtures/stateless_server.mjs');
const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');

// Visible to everyone: echo, notify. slow needs tools.slow; large needs tools.large and
// tools.audit; crash is allowed and denied (deny wins); everything else is not allowed.
const POLICY = [
  'allowed_tools = echo, notify, slow, large, crash',
  'denied_tools = crash',
  'tool_scopes = slow:tools.slow, large:tools.large+tools.audit',
].join('\n');
const TOKENS = {
  bob: { token: `bob-${crypto.randomBytes(12).toString('hex')}`, scopes: [] },
  alice: { token: `alice-${crypto.randomBytes(12).toString('hex')}`, scopes: ['tools.slow'] },
  carol: { token: `carol-${crypto.randomBytes(12).toString('hex')}`, scopes: ['tools.slow', 'tools.large', 'tools.audit'] },
};
const SEES = {
  bob: ['echo', 'notify'],
  alice: ['echo', 'notify', 'slow'],
  carol: ['echo', 'large', 'notify', 'slow'],
};

let gw;
let childLog;

before(async () => {
  const dir = tmpdir('mcpgw-policy-');
  const tokensFile = path.join(dir, 'tokens');
  fs.writeFileSync(tokensFile, Object.entries(TOKENS)
    .map(([name, t]) => `sha256:${sha256hex(t.token)} ${name} ${t.scopes.join(' ')}\n`).join(''));
  childLog = path.join(dir, 'policy-child.log');
  gw = await startGateway({
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile },
    servers: [
      { name: 'example', path: '/mcp', log: childLog, extra: `${POLICY}\ncache_scope = public` },
      { name: 'open', path: '/open', log: path.join(dir, 'open-child.log') },
      { name: 'stateless', path: '/stateless', command: `${process.execPath} ${STATELESS_JS}`, extra: 'tool_scopes = test_*:tests' },
    ],
  });
});

after(async () => {
  await gw?.stop();
});

// --- helpers ------------------------------------------------------------------------------------

function bearerPost(who, msg, { sid, path: p = '/mcp', headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, Authorization: `Bearer ${TOKENS[who].token}`, ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  return request(`${gw.base}${p}`, { method: 'POST', headers: h, body: msg });
}

/** initialize + notifications/initialized as who; returns sid. */
async function open(who, { version = '2025-06-18', path: p = '/mcp' } = {}) {
  const r = await bearerPost(who, rpc('initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: 'policy-it', version: '1' } }), { path: p });
  const body = await r.done(scaled(10000));
  assert.equal(r.status, 200, `initialize as ${who}: ${body}`);
  const sid = r.headers['mcp-session-id'];
  assert.ok(r.events().map((e) => e.json).find(isAnswer)?.result, body);
  const n = await bearerPost(who, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, path: p });
  await n.done();
  assert.equal(n.status, 202);
  return sid;
}

/** One request on a session: the HTTP status and its answer (the stream must end). */
async function ask(who, sid, msg, { path: p = '/mcp' } = {}) {
  const r = await bearerPost(who, msg, { sid, path: p });
  const body = await r.done(scaled(10000));
  const answers = r.events().map((e) => e.json).filter(isAnswer);
  assert.equal(answers.length, 1, `one answer: ${body}`);
  return { status: r.status, answer: answers[0] };
}

const names = (answer) => answer.result.tools.map((t) => t.name).sort();

/** tools/call lines the child received for tool name (its --log file). */
function childCalls(file, name) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return {}; } })
    .filter((m) => m.method === 'tools/call' && m.params?.name === name);
}

function assertUnknownTool(answer, id, name) {
  assert.deepEqual(answer.id, id, JSON.stringify(answer));
  assert.equal(answer.error?.code, -32602, JSON.stringify(answer));
  assert.equal(answer.error?.message, `Unknown tool: ${name}`, JSON.stringify(answer));
  assert.equal(answer.result, undefined);
}

async function metrics() {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  const text = await r.done();
  assert.equal(r.status, 200, text);
  return { samples: metricSamples(text), text };
}

/** A stateless request as who; returns {status, body}. */
async function stateless(who, method, params = {}, { id = `m-${crypto.randomUUID()}`, path: p = '/mcp' } = {}) {
  const msg = { jsonrpc: '2.0', id, method, params: { ...params, _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {} } } };
  const headers = { 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  if (method === 'tools/call') headers['Mcp-Name'] = params.name;
  const r = await bearerPost(who, msg, { path: p, headers });
  const text = await r.done(scaled(20000));
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, text);
  const body = JSON.parse(text);
  assert.deepEqual(body.id, id, text);
  return { status: r.status, body };
}

// --- sessions -----------------------------------------------------------------------------------

test('a session: each principal\'s tools/list shows what its scopes allow; each kept tool passes whole', async () => {
  for (const who of Object.keys(TOKENS)) {
    const sid = await open(who);
    const { status, answer } = await ask(who, sid, rpc('tools/list', {}, `list-${who}`));
    assert.equal(status, 200);
    assert.equal(answer.id, `list-${who}`);
    assert.deepEqual(names(answer), SEES[who], who);
    const echo = answer.result.tools.find((t) => t.name === 'echo');
    assert.equal(echo.description, 'Returns the text, after delay_ms if given (cancellable).', 'a kept tool passes whole');
    assert.deepEqual(echo.inputSchema.required, ['text']);
  }
  // The same child's list without a policy.
  const sid = await open('bob', { path: '/open' });
  const { answer } = await ask('bob', sid, rpc('tools/list', {}), { path: '/open' });
  for (const t of ['crash', 'echo', 'elicit', 'large', 'slow']) assert.ok(names(answer).includes(t), t);
});

test('a session: a hidden tool\'s call never reaches the child and is answered as an unknown tool', async () => {
  const denied0 = (await metrics()).samples['mcpgw_policy_denied_total{server="example"}'] ?? 0;
  const sid = await open('bob');
  for (const [id, name] of [['c1', 'slow'], [42, 'crash'], ['c3', 'elicit'], ['c4', 'large']]) {
    const { status, answer } = await ask('bob', sid, rpc('tools/call', { name, arguments: {} }, id));
    assert.equal(status, 200);
    assertUnknownTool(answer, id, name);
  }
  // The reason and the principal are logged at debug (a pooled session's by its server's pool);
  // nothing went to the child.
  const who = MATRIX_POOLED ? 'pool example:' : `session=${esc(sid)}`;
  await gw.waitLog(new RegExp(`${who} tools/call of slow refused for bob: the token lacks a scope tool_scopes requires: tools\\.slow`));
  await gw.waitLog(new RegExp(`${who} tools/call of crash refused for bob: denied by denied_tools`));
  await gw.waitLog(new RegExp(`${who} tools/call of elicit refused for bob: not in allowed_tools`));
  // A visible tool works on the same session, and the session goes on.
  const ok = await ask('bob', sid, rpc('tools/call', { name: 'echo', arguments: { text: 'still here' } }, 'c5'));
  assert.equal(textOf(ok.answer), 'still here');
  for (const name of ['slow', 'crash', 'elicit', 'large']) assert.deepEqual(childCalls(childLog, name), [], name);
  assert.equal(childCalls(childLog, 'echo').filter((m) => m.params.arguments?.text === 'still here').length, 1);
  const denied1 = (await metrics()).samples['mcpgw_policy_denied_total{server="example"}'];
  assert.equal(denied1 - denied0, 4);
  // A tools/call without an id gets no answer, and does not reach the child either.
  const n = await bearerPost('bob', { jsonrpc: '2.0', method: 'tools/call', params: { name: 'crash', arguments: {} } }, { sid });
  await n.done();
  assert.equal(n.status, 202);
  // (A pooled session forwards no notification of the client's but a cancel: nothing to log.)
  if (!MATRIX_POOLED) await gw.waitLog(new RegExp(`session=${esc(sid)} tools/call without an id dropped \\(tool policy\\)`));
  const after = await ask('bob', sid, rpc('tools/call', { name: 'echo', arguments: { text: 'after' } }, 'c6'));
  assert.equal(textOf(after.answer), 'after');
  assert.deepEqual(childCalls(childLog, 'crash'), [], 'the child read the echo after it, but no crash');
});

test('a session: a scope shows a tool and lets its call through; the name is matched decoded', async () => {
  const sid = await open('alice');
  const { answer } = await ask('alice', sid, rpc('tools/call', { name: 'slow', arguments: { steps: 1, interval_ms: 1 } }, 's1'));
  assert.ok(answer.result, JSON.stringify(answer));
  assert.equal(childCalls(childLog, 'slow').length, 1);
  // "\u0063rash" is crash to the child as to the gateway: still denied.
  const r = await bearerPost('alice', `{"jsonrpc":"2.0","id":"s2","method":"tools/call","params":{"name":"\\u0063rash","arguments":{}}}`, { sid });
  await r.done();
  const a = r.events().map((e) => e.json).find(isAnswer);
  assertUnknownTool(a, 's2', 'crash');
  const carol = await open('carol');
  const big = await ask('carol', carol, rpc('tools/call', { name: 'large', arguments: { bytes: 10 } }, 'l1'));
  assert.equal(textOf(big.answer)?.length, 10);
});

test('a 2025-03-26 batch: the hidden call is answered in place, the others reach the child', async (t) => {
  const sid = await open('bob', { version: '2025-03-26' });
  const r = await bearerPost('bob', [
    rpc('tools/call', { name: 'slow', arguments: {} }, 'b1'),
    rpc('tools/call', { name: 'echo', arguments: { text: 'batched' } }, 'b2'),
    rpc('tools/list', {}, 'b3'),
  ], { sid });
  const body = await r.done(scaled(10000));
  assert.equal(r.status, 200, body);
  const answers = r.events().map((e) => e.json).filter(isAnswer);
  assert.equal(answers.length, 3, body);
  assertUnknownTool(answers.find((a) => a.id === 'b1'), 'b1', 'slow');
  assert.equal(textOf(answers.find((a) => a.id === 'b2')), 'batched');
  assert.deepEqual(names(answers.find((a) => a.id === 'b3')), SEES.bob);
  // A batch of only a hidden call: answered, and its stream ends.
  const r2 = await bearerPost('bob', [rpc('tools/call', { name: 'crash', arguments: {} }, 'b4')], { sid });
  await r2.done(scaled(10000));
  assertUnknownTool(r2.events().map((e) => e.json).find(isAnswer), 'b4', 'crash');
  assert.deepEqual(childCalls(childLog, 'crash'), []);
});

test('a 2024-11-05 HTTP+SSE session: tools/list filtered and a hidden call answered on the stream', async () => {
  const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${TOKENS.alice.token}` };
  const s = await request(`${gw.base}/mcp/sse`, { method: 'GET', headers });
  assert.equal(s.status, 200);
  const first = await waitFor(() => s.completeEvents()[0], scaled(5000), 'the endpoint event');
  assert.equal(first.event, 'endpoint');
  const endpoint = new URL(first.data, `${gw.base}/mcp/sse`).href;
  const messages = () => s.completeEvents().filter((e) => e.event === 'message').map((e) => e.json);
  const send = async (msg) => {
    const r = await request(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKENS.alice.token}` }, body: msg });
    await r.done();
    assert.equal(r.status, 202);
  };
  const answerTo = (id) => waitFor(() => messages().find((j) => isAnswer(j) && j.id === id), scaled(5000), `answer ${id}`);
  try {
    await send(rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'policy-it', version: '1' } }, 'i'));
    assert.ok((await answerTo('i')).result);
    await send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await send(rpc('tools/list', {}, 'l'));
    assert.deepEqual(names(await answerTo('l')), SEES.alice);
    const large0 = childCalls(childLog, 'large').length;
    await send(rpc('tools/call', { name: 'large', arguments: { bytes: 5 } }, 'x'));
    assertUnknownTool(await answerTo('x'), 'x', 'large');
    await send(rpc('tools/call', { name: 'echo', arguments: { text: 'sse' } }, 'e'));
    assert.equal(textOf(await answerTo('e')), 'sse');
    assert.equal(childCalls(childLog, 'large').length, large0, 'the hidden call never reached the child');
  } finally {
    s.drop();
  }
});

// --- stateless requests through the pool --------------------------------------------------------

test('2026-07-28 through the pool (a legacy child): lists per principal, private, and a hidden call is 400 -32602', async () => {
  const bob = await stateless('bob', 'tools/list');
  assert.equal(bob.status, 200);
  assert.deepEqual(names(bob.body), SEES.bob);
  assert.equal(bob.body.result.cacheScope, 'private', 'per-token lists are private, whatever cache_scope says');
  assert.equal(bob.body.result.resultType, 'complete');
  const carol = await stateless('carol', 'tools/list');
  assert.deepEqual(names(carol.body), SEES.carol);
  const hidden = await stateless('bob', 'tools/call', { name: 'slow', arguments: {} }, { id: 77 });
  assert.equal(hidden.status, 400, 'as the child\'s own -32602 would be');
  assertUnknownTool(hidden.body, 77, 'slow');
  const denied = await stateless('carol', 'tools/call', { name: 'crash', arguments: {} });
  assertUnknownTool(denied.body, denied.body.id, 'crash');
  const ok = await stateless('alice', 'tools/call', { name: 'slow', arguments: { steps: 1, interval_ms: 1 } });
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.ok(ok.body.result);
  assert.deepEqual(childCalls(childLog, 'crash'), []);
  await gw.waitLog(/pool example: tools\/call of slow refused for bob: the token lacks a scope tool_scopes requires: tools\.slow/);
  // A server without a policy is untouched: the example's full list, the INI's cacheScope.
  const open = await stateless('bob', 'tools/list', {}, { path: '/open' });
  assert.ok(names(open.body).includes('crash'));
  assert.equal(open.body.result.cacheScope, 'private');
});

test('2026-07-28 with a stateless child: its cacheScope "public" becomes "private" and scoped tools hide', async () => {
  const bob = await stateless('bob', 'tools/list', {}, { path: '/stateless' });
  assert.equal(bob.status, 200, JSON.stringify(bob.body));
  assert.deepEqual(names(bob.body), ['echo', 'slow'], 'test_* needs the scope tests');
  assert.equal(bob.body.result.cacheScope, 'private');
  assert.equal(bob.body.result.ttlMs, 60000, 'the child\'s own ttlMs passes');
  const hidden = await stateless('bob', 'tools/call', { name: 'test_simple_text', arguments: {} }, { path: '/stateless' });
  assertUnknownTool(hidden.body, hidden.body.id, 'test_simple_text');
  const echo = await stateless('bob', 'tools/call', { name: 'echo', arguments: { text: 'stateless' } }, { path: '/stateless' });
  assert.equal(textOf(echo.body), 'stateless');
});

test('/metrics: refusals and hidden tools counted per server; none for a server without a policy', async () => {
  const { samples, text } = await metrics();
  assert.match(text, /# TYPE mcpgw_policy_denied_total counter/);
  assert.match(text, /# TYPE mcpgw_policy_tools_hidden_total counter/);
  assert.ok(samples['mcpgw_policy_denied_total{server="example"}'] >= 1);
  assert.ok(samples['mcpgw_policy_tools_hidden_total{server="example"}'] >= 1);
  assert.equal(samples['mcpgw_policy_denied_total{server="open"}'], undefined);
});

// --- a reload between a request's head and its body ----------------------------------------------

test('SIGHUP between a request\'s head and its body: the request is judged by the new configuration (its tokens and tool policy)', async () => {
  const dir = tmpdir('mcpgw-policy-reload-');
  const tokensFile = path.join(dir, 'tokens');
  const T = { alice: `alice-${crypto.randomBytes(12).toString('hex')}`, bob: `bob-${crypto.randomBytes(12).toString('hex')}` };
  // alice holds both scopes, bob only the one the old policy asks for.
  fs.writeFileSync(tokensFile, `sha256:${sha256hex(T.alice)} alice tools.old tools.new\nsha256:${sha256hex(T.bob)} bob tools.old\n`);
  const opts = {
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', log: path.join(dir, 'child.log'), extra: 'era = legacy\ntool_scopes = echo:tools.old' }],
  };
  await withGateway(opts, async (g) => {
    const call = (who) => ({ jsonrpc: '2.0', id: `reload-${who}`, method: 'tools/call', params: { name: 'echo', arguments: { text: `hi ${who}` }, _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {} } } });
    const split = (who) => splitPost(g, '/mcp', call(who), {
      'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo', Authorization: `Bearer ${T[who]}`,
    });
    const reqs = { alice: split('alice'), bob: split('bob') };
    // Both heads are in (and authenticated) once /metrics counts them with itself.
    await waitFor(async () => {
      const r = await request(`${g.base}/metrics`, { method: 'GET' });
      return metricSamples(await r.done(scaled(5000))).mcpgw_http_requests_open >= 3;
    }, scaled(10000), 'both heads read');
    // The new policy asks for the other scope; the configuration the heads were read under is freed
    // at once (no session or pool uses it).
    fs.writeFileSync(g.conf, fs.readFileSync(g.conf, 'utf8').replace('tool_scopes = echo:tools.old', 'tool_scopes = echo:tools.new'));
    g.proc.kill('SIGHUP');
    await g.waitLog(/SIGHUP: configuration reloaded/, scaled(10000));
    for (const r of Object.values(reqs)) r.send();
    const alice = await reqs.alice.done(scaled(20000));
    assert.equal(alice.status, 200, alice.text);
    assert.equal(textOf(alice.answers[0]), 'hi alice', `tools.new grants echo now: ${alice.text}`);
    const bob = await reqs.bob.done(scaled(20000));
    assert.equal(bob.answers[0]?.error?.code, -32602, `tools.old no longer does: ${bob.text}`);
    assert.equal(bob.answers[0].error.message, 'Unknown tool: echo');
  });
});

test('SIGHUP between the head and the body of a call on a session opened two configurations ago: the call is judged, and answered', async () => {
  const dir = tmpdir('mcpgw-policy-reload-');
  const tokensFile = path.join(dir, 'tokens');
  const token = `alice-${crypto.randomBytes(12).toString('hex')}`;
  fs.writeFileSync(tokensFile, `sha256:${sha256hex(token)} alice tools.old\n`);
  const opts = {
    auth: { mode: 'bearer', public_url: PUBLIC_URL, tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', log: path.join(dir, 'child.log'), extra: 'tool_scopes = echo:tools.old' }],
  };
  await withGateway(opts, async (g) => {
    const auth = { Authorization: `Bearer ${token}` };
    const init = await request(g.url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...auth }, body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'policy-it', version: '1' } }) });
    await init.done(scaled(10000));
    assert.equal(init.status, 200, init.text());
    const sid = init.headers['mcp-session-id'];
    const reloads = () => [...g.logs().matchAll(/SIGHUP: configuration reloaded/g)].length;
    // The session keeps the first configuration; the second is the one the head is read under.
    g.proc.kill('SIGHUP');
    await waitFor(() => reloads() === 1, scaled(10000), 'the first reload');
    const call = splitPost(g, '/mcp', rpc('tools/call', { name: 'echo', arguments: { text: 'on the old session' } }, 'split'), {
      ...auth, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18',
    });
    await waitFor(async () => {
      const r = await request(`${g.base}/metrics`, { method: 'GET' });
      return metricSamples(await r.done(scaled(5000))).mcpgw_http_requests_open >= 2;
    }, scaled(10000), 'the head read');
    // The third: the second is freed at once (no session or pool uses it).
    g.proc.kill('SIGHUP');
    await waitFor(() => reloads() === 2, scaled(10000), 'the second reload');
    call.send();
    const r = await call.done(scaled(20000));
    assert.equal(r.status, 200, r.text);
    assert.equal(textOf(r.answers[0]), 'on the old session', r.text);
  });
});

// --- jwt: scopes from the scope or scp claim, remembered with the token --------------------------

test('jwt: the scope claim (or scp) decides, and a token remembered from an earlier request keeps its scopes', async () => {
  const dir = tmpdir('mcpgw-policy-jwt-');
  const pair = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwks = path.join(dir, 'jwks.json');
  fs.writeFileSync(jwks, JSON.stringify({ keys: [{ ...pair.publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'ES256' }] }));
  const b64u = (b) => Buffer.from(b).toString('base64url');
  const mint = (claims) => {
    const t = Math.floor(Date.now() / 1000);
    const input = `${b64u(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: 'k1' }))}.${b64u(JSON.stringify({ iss: ISSUER, aud: `${PUBLIC_URL}/mcp`, iat: t, exp: t + 600, ...claims }))}`;
    return `${input}.${b64u(crypto.sign('sha256', Buffer.from(input), { key: pair.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
  };
  await withGateway({
    auth: { mode: 'jwt', public_url: PUBLIC_URL, issuer: ISSUER, jwks_file: jwks },
    servers: [{ name: 'example', path: '/mcp', log: path.join(dir, 'child.log'), extra: POLICY }],
  }, async (g) => {
    const list = async (token) => {
      const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, Authorization: `Bearer ${token}`, 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/list' };
      const r = await request(g.url, { method: 'POST', headers: h, body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {} } } } });
      const text = await r.done(scaled(20000));
      assert.equal(r.status, 200, text);
      return JSON.parse(text).result.tools.map((t) => t.name).sort();
    };
    const scoped = mint({ sub: 'dave', scope: 'openid tools.slow' });
    assert.deepEqual(await list(scoped), SEES.alice);
    assert.deepEqual(await list(scoped), SEES.alice, 'the second time from the verified-token cache');
    assert.deepEqual(await list(mint({ sub: 'erin', scp: ['tools.large', 'tools.audit', 'tools.slow'] })), SEES.carol);
    assert.deepEqual(await list(mint({ sub: 'frank' })), SEES.bob, 'no scope claim: no scopes');
  });
});

// --- configuration ------------------------------------------------------------------------------

test('--check-config names the key and the bad entry', () => {
  const dir = tmpdir('mcpgw-policy-conf-');
  const cases = [
    ['tool_scopes = write_*:files.write, delete_*', /gateway\.ini:3: tool_scopes: delete_\* must be GLOB:SCOPE\[\+SCOPE\.\.\.\]/],
    ['allowed_tools = read_[a-z', /gateway\.ini:3: allowed_tools: read_\[a-z has a '\[' without its '\]'/],
    ['denied_tools = x, y\\', /gateway\.ini:3: denied_tools: y\\ ends in a lone backslash/],
  ];
  for (const [line, want] of cases) {
    const conf = path.join(dir, 'gateway.ini');
    fs.writeFileSync(conf, `[server:a]\ncommand = /bin/cat\n${line}\n`);
    const r = spawnSync(GW_BIN, ['--check-config', '--config', conf], { encoding: 'utf8' });
    assert.equal(r.status, 1, `${line}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr + r.stdout, want, line);
  }
});
