// SPDX-License-Identifier: MIT
// The stateless (2026-07-28) front on the MCP endpoint, in raw HTTP: the era is judged per request
// (a legacy session keeps working beside stateless requests on the same path), every refusal of
// http_stateless.c with its status, its JSON-RPC code and the request's own id (batch and malformed
// bodies 400 -32600, _meta 400 -32602, mirrored headers 400 -32020, versions 400 -32022 with
// data.supported/requested, removed or unknown methods 404 -32601, a notification 202, GET and
// DELETE 405 with Allow: POST), the header rules (Mcp-Name plain and =?base64?…?=, blanks around
// values, names case-insensitive, values case-sensitive), the checks every request gets (Origin,
// Host, bearer auth, max_body_bytes), the answer as one JSON object (its status from its error
// code) or, when progress comes first, as an SSE stream with the client's own progress token,
// server/discover answered by the gateway for a legacy child and forwarded to a stateless one, the
// resultType/ttlMs/cacheScope stamps on a legacy child's results, and cancellation: a client that
// drops its connection while nothing is being written cancels at the child at once, and
// request_timeout_ms cancels with reason "request timed out".
// One gateway fronts the example server (legacy: the pool's server/discover probe gets -32601)
// at /mcp and /timed, and tests/fixtures/stateless_server.mjs (stateless) at /stateless. heartbeat_s is
// long, so a stateless request's answer is held (nothing written) until it comes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ACCEPT_BOTH, initSession, metricSamples, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2026-07-28';
const META = 'io.modelcontextprotocol/';
const STATELESS_JS = path.join(process.env.GW_SOURCE_ROOT ?? '', 'tests/fixtures/stateless_server.mjs');
const CACHE_TTL_MS = 45000;
const TIMEOUT_MS = 300;
const HEARTBEAT_S = 30;
const MAX_BODY = 8192;

const textOf = (j) => j?.result?.content?.[0]?.text;
const b64name = (s) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;
let nextId = 1;

/** A stateless request: params with the _meta envelope (meta: more keys; a key set to undefined is removed). */
function mreq(method, params = {}, { id = `m-${nextId++}`, meta = {} } = {}) {
  const m = {
    [`${META}protocolVersion`]: V,
    [`${META}clientCapabilities`]: {},
    [`${META}clientInfo`]: { name: 'stateless-http-it', version: '1' },
    ...(params._meta || {}),
    ...meta,
  };
  for (const [k, v] of Object.entries(m)) if (v === undefined) delete m[k];
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: m } };
}

/** The body field Mcp-Name mirrors for this method, or undefined. */
function nameOf(msg) {
  const p = msg.params || {};
  if (msg.method === 'tools/call' || msg.method === 'prompts/get') return p.name;
  if (msg.method === 'resources/read') return p.uri;
  if (/^tasks\/(get|update|cancel)$/.test(msg.method)) return p.taskId;
  return undefined;
}

/**
 * The mirrored headers msg calls for (a non-ASCII Mcp-Name in the base64 form), then `over`: a key
 * replaces the header of the same name whatever its case (so it may also change the name's case),
 * undefined drops it.
 */
function mheaders(msg, over = {}) {
  const h = { 'MCP-Protocol-Version': V, 'Mcp-Method': msg?.method };
  const name = msg ? nameOf(msg) : undefined;
  if (name !== undefined) h['Mcp-Name'] = /^[\x20-\x7e]*$/.test(name) ? name : b64name(name);
  for (const [k, v] of Object.entries(over)) {
    for (const old of Object.keys(h)) if (old.toLowerCase() === k.toLowerCase()) delete h[old];
    h[k] = v;
  }
  for (const [k, v] of Object.entries(h)) if (v === undefined) delete h[k];
  return h;
}

/** POSTs msg (or `body`, any text) with the usual headers and mheaders(msg, headers). */
function mpost(gw, msg, { headers = {}, url, body, path: p = '/mcp' } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...mheaders(msg, headers) };
  return request(url || `${gw.base}${p}`, { method: 'POST', headers: h, body: body ?? msg });
}

/** The whole response as one JSON object: asserts status, application/json and a JSON-RPC body. */
async function jsonAnswer(r, { status = 200, what = '' } = {}) {
  const text = await r.done(scaled(10000));
  assert.equal(r.status, status, `${what}: HTTP ${r.status} ${text}`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `${what}: Content-Type of ${text}`);
  assert.equal(r.headers['mcp-session-id'], undefined, `${what}: no session for a stateless request`);
  let body;
  assert.doesNotThrow(() => { body = JSON.parse(text); }, `${what}: one JSON object: ${text}`);
  assert.equal(body.jsonrpc, '2.0', `${what}: ${text}`);
  return body;
}

/** A refusal: the status, application/json, the JSON-RPC code and the request's id. */
async function refused(r, { status, code, id, what = '' }) {
  const body = await jsonAnswer(r, { status, what });
  assert.equal(body.error?.code, code, `${what}: code in ${JSON.stringify(body)}`);
  assert.equal(typeof body.error?.message, 'string', what);
  assert.deepEqual(body.id, id, `${what}: the request's id echoed`);
  assert.equal(body.result, undefined, what);
  return body;
}

/** A stateless call that must succeed: the answer object (id checked). */
async function mcall(gw, msg, opts = {}) {
  const body = await jsonAnswer(await mpost(gw, msg, opts), { what: `${msg.method} ${opts.path ?? '/mcp'}` });
  assert.deepEqual(body.id, msg.id, JSON.stringify(body));
  assert.ok(body.result, `${msg.method}: a result: ${JSON.stringify(body)}`);
  return body;
}

/** A counter of /metrics (labels as written there, e.g. 'direction="to_child",reason="timeout"'). */
async function metric(gw, name, labels) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  const text = await r.done();
  assert.equal(r.status, 200, text);
  const key = labels ? `${name}{${labels}}` : name;
  const m = metricSamples(text);
  assert.ok(key in m, `${key} in /metrics:\n${text}`);
  return m[key];
}

/** Lines of a file, complete ones only ([] while it does not exist). */
const fileLines = (f) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').slice(0, -1).filter(Boolean) : []);
const jsonLines = (f) => fileLines(f).map((l) => { try { return JSON.parse(l); } catch { return {}; } });

/**
 * A POST the test can drop before any response byte: resolves once the request is written, with
 * {req, response} (response: a promise of the http.IncomingMessage, or of null if none came).
 */
function openPost(url, headers, body) {
  const u = new URL(url);
  const payload = JSON.stringify(body);
  const req = http.request({
    host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent: false,
    headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Content-Length': Buffer.byteLength(payload), ...headers },
  });
  const response = new Promise((resolve) => {
    req.on('response', resolve);
    req.on('error', () => resolve(null));
    req.on('close', () => resolve(null));
  });
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.end(payload, () => resolve({ req, response }));
  });
}

// One gateway serves every test below (before/after): the example server twice and the stateless
// fixture.
let gw;
let dir;
let cancelLog;
let timedLog;
const childMsgs = () => gw.childMessages();

before(async () => {
  assert.ok(fs.existsSync(STATELESS_JS), `${STATELESS_JS} (GW_SOURCE_ROOT must be set)`);
  dir = tmpdir('mcpgw-stateless-http-');
  cancelLog = path.join(dir, 'stateless-cancel.log');
  timedLog = path.join(dir, 'timed.log');
  gw = await startGateway({
    gateway: { heartbeat_s: HEARTBEAT_S, max_body_bytes: MAX_BODY },
    servers: [
      { name: 'example', path: '/mcp', extra: `cache_ttl_ms = ${CACHE_TTL_MS}\ncache_scope = public` },
      { name: 'timed', path: '/timed', log: timedLog, extra: `request_timeout_ms = ${TIMEOUT_MS}` },
      { name: 'stateless', path: '/stateless', command: `${process.execPath} ${STATELESS_JS}`, env: `STATELESS_CANCEL_LOG=${cancelLog}` },
    ],
  });
});

after(async () => {
  if (gw) await gw.stop(); // asserts a clean exit
});

// --- the era, per request ----------------------------------------------------------------------

test('era per request: a legacy session and stateless requests share /mcp, each served in its own era', async () => {
  const s = await initSession(gw);
  assert.ok(s.sid, 'legacy initialize opened a session');
  const m1 = await mcall(gw, mreq('tools/call', { name: 'echo', arguments: { text: 'stateless one' } }));
  assert.equal(textOf(m1), 'stateless one');
  assert.equal(m1.result.resultType, 'complete');
  // The session goes on (an SSE body, legacy framing, no resultType added).
  const l = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'legacy one' } }, 'legacy-1'), { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
  await l.done();
  assert.equal(l.status, 200, l.text());
  assert.match(l.headers['content-type'], /^text\/event-stream/);
  const la = l.events().map((e) => e.json).find((j) => j && j.id === 'legacy-1');
  assert.equal(textOf(la), 'legacy one', l.text());
  assert.equal(la.result.resultType, undefined, 'a session\'s results are passed through');
  // A stateless request again, then a second legacy initialize: both eras keep working.
  const m2 = await mcall(gw, mreq('tools/list'));
  assert.ok(m2.result.tools.some((t) => t.name === 'echo'));
  const s2 = await initSession(gw);
  assert.notEqual(s2.sid, s.sid);
  // The stateless requests went to a pool child, not to the session's.
  const pool = /pool:example#\d+.*pool child started: pid (\d+)/.exec(gw.logs());
  assert.ok(pool, `pool child in the log:\n${gw.logs()}`);
  assert.notEqual(Number(pool[1]), s.pid, 'pool child is not the session child');
  // The pool's child is legacy: it got the probe, then an initialize from the gateway.
  const msgs = childMsgs();
  assert.ok(msgs.some((m) => m.method === 'server/discover' && typeof m.id === 'number'), 'probe seen');
  assert.ok(msgs.some((m) => m.method === 'initialize' && m.params?.clientInfo?.name === 'mcp-gateway'), 'gateway initialize seen');
});

// --- refusals ------------------------------------------------------------------------------------

test('400 -32600: a batch, a body that is no request, a response; 400 -32700 for unparsable JSON', async () => {
  const one = mreq('tools/list');
  await refused(await mpost(gw, one, { body: [one] }), { status: 400, code: -32600, id: null, what: 'batch' });
  await refused(await mpost(gw, null, { body: { jsonrpc: '2.0', id: 'r-1', result: {} }, headers: { 'Mcp-Method': undefined } }),
    { status: 400, code: -32600, id: null, what: 'a response with no request awaiting it' });
  await refused(await mpost(gw, null, { body: { jsonrpc: '1.0', id: 'bad-1', method: 'tools/list' }, headers: { 'Mcp-Method': 'tools/list' } }),
    { status: 400, code: -32600, id: null, what: 'jsonrpc 1.0' });
  await refused(await mpost(gw, null, { body: '{"jsonrpc":"2.0","id":1,', headers: { 'Mcp-Method': 'tools/list' } }),
    { status: 400, code: -32700, id: null, what: 'unparsable' });
});

test('202: a notification carrying the envelope, or the header only, goes nowhere', async () => {
  const before = childMsgs().length;
  for (const [what, body, headers] of [
    ['envelope', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'x', _meta: { [`${META}protocolVersion`]: V } } }, { 'Mcp-Method': 'notifications/cancelled' }],
    ['header only', { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'Mcp-Method': 'notifications/initialized' }],
  ]) {
    const r = await mpost(gw, null, { body, headers });
    const text = await r.done();
    assert.equal(r.status, 202, `${what}: ${r.status} ${text}`);
    assert.equal(text, '', what);
  }
  await mcall(gw, mreq('tools/list')); // anything sent to the child would be read before this
  assert.ok(!childMsgs().slice(before).some((m) => m.method === 'notifications/initialized' || (m.method === 'notifications/cancelled' && m.params?.requestId === 'x')),
    'no notification reached the child');
});

test('400 -32602: the envelope\'s protocolVersion, clientCapabilities and logLevel', async () => {
  let m = mreq('tools/list', {}, { meta: { [`${META}protocolVersion`]: undefined } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: m.id, what: 'no _meta protocolVersion (header says 2026-07-28)' });
  m = mreq('tools/list', {}, { meta: { [`${META}protocolVersion`]: 20260728 } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: m.id, what: 'protocolVersion not a string' });
  m = mreq('tools/list', {}, { meta: { [`${META}clientCapabilities`]: undefined } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: m.id, what: 'no clientCapabilities' });
  m = mreq('tools/list', {}, { meta: { [`${META}clientCapabilities`]: [] } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: m.id, what: 'clientCapabilities not an object' });
  m = mreq('tools/list', {}, { meta: { [`${META}logLevel`]: 'verbose' } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: m.id, what: 'logLevel not a level' });
  m = mreq('tools/list', {}, { meta: { [`${META}logLevel`]: 'warning' } });
  await mcall(gw, m); // a valid one passes
  // Numeric ids are echoed as numbers.
  m = mreq('tools/list', {}, { id: 4242, meta: { [`${META}clientCapabilities`]: undefined } });
  await refused(await mpost(gw, m), { status: 400, code: -32602, id: 4242, what: 'numeric id' });
});

test('400 -32020: MCP-Protocol-Version missing or unlike the envelope', async () => {
  let m = mreq('tools/list');
  await refused(await mpost(gw, m, { headers: { 'MCP-Protocol-Version': undefined } }), { status: 400, code: -32020, id: m.id, what: 'no header' });
  m = mreq('tools/list');
  await refused(await mpost(gw, m, { headers: { 'MCP-Protocol-Version': '2025-11-25' } }), { status: 400, code: -32020, id: m.id, what: 'legacy header, stateless envelope' });
  m = mreq('tools/list');
  await refused(await mpost(gw, m, { headers: { 'MCP-Protocol-Version': '2026-07-29' } }), { status: 400, code: -32020, id: m.id, what: 'another version' });
  m = mreq('tools/list');
  await refused(await mpost(gw, m, { headers: { 'MCP-Protocol-Version': '' } }), { status: 400, code: -32020, id: m.id, what: 'empty header' });
});

test('400 -32022: a version the gateway does not serve, with data.supported and data.requested', async () => {
  for (const ver of ['2099-01-01', '2025-06-18', 'not-a-version']) {
    const m = mreq('tools/list', {}, { meta: { [`${META}protocolVersion`]: ver } });
    const body = await refused(await mpost(gw, m, { headers: { 'MCP-Protocol-Version': ver } }), { status: 400, code: -32022, id: m.id, what: ver });
    assert.deepEqual(body.error.data, { supported: [V], requested: ver }, JSON.stringify(body));
  }
});

test('400 -32020: Mcp-Method missing, unlike the method, or of another case', async () => {
  for (const [what, value] of [['missing', undefined], ['another method', 'tools/call'], ['case differs', 'Tools/List'], ['empty', ''], ['a prefix', 'tools/lis']]) {
    const m = mreq('tools/list');
    await refused(await mpost(gw, m, { headers: { 'Mcp-Method': value } }), { status: 400, code: -32020, id: m.id, what: `Mcp-Method ${what}` });
  }
});

test('400 -32020: Mcp-Name missing or unlike params.name / params.uri / params.taskId', async () => {
  const cases = [
    ['tools/call', { name: 'echo', arguments: { text: 'x' } }, 'Echo'],
    ['prompts/get', { name: 'greet' }, 'greet2'],
    ['resources/read', { uri: 'example://hello' }, 'example://HELLO'],
    ['tasks/get', { taskId: 'task-1' }, 'task-2'],
    ['tasks/cancel', { taskId: 'task-1' }, 'task-1x'],
  ];
  for (const [method, params, wrong] of cases) {
    let m = mreq(method, params);
    await refused(await mpost(gw, m, { headers: { 'Mcp-Name': undefined } }), { status: 400, code: -32020, id: m.id, what: `${method}: no Mcp-Name` });
    m = mreq(method, params);
    await refused(await mpost(gw, m, { headers: { 'Mcp-Name': wrong } }), { status: 400, code: -32020, id: m.id, what: `${method}: Mcp-Name ${wrong}` });
  }
  // The body field itself missing: nothing to mirror.
  const m = mreq('tools/call', { arguments: {} });
  await refused(await mpost(gw, m, { headers: { 'Mcp-Name': 'echo' } }), { status: 400, code: -32020, id: m.id, what: 'tools/call without params.name' });
  // Methods without a name field do not need the header, and an extra one is not compared.
  await mcall(gw, mreq('tools/list'), { headers: { 'Mcp-Name': 'anything' } });
});

test('Mcp-Name: the =?base64?…?= form is decoded before comparing; malformed forms are refused', async () => {
  // ASCII through base64.
  const a = await mcall(gw, mreq('tools/call', { name: 'echo', arguments: { text: 'via base64' } }), { headers: { 'Mcp-Name': b64name('echo') } });
  assert.equal(textOf(a), 'via base64');
  // A non-ASCII uri: the header passes, the example child answers -32002 (no such resource) itself.
  const uri = 'example://héllo/日本/😀';
  const m = mreq('resources/read', { uri });
  assert.match(mheaders(m)['Mcp-Name'], /^=\?base64\?[A-Za-z0-9+/=]+\?=$/);
  const body = await refused(await mpost(gw, m), { status: 200, code: -32002, id: m.id, what: 'non-ASCII uri through base64 reaches the child' });
  assert.match(body.error.message, /not found/i);
  assert.ok(childMsgs().some((x) => x.method === 'resources/read' && x.params?.uri === uri), 'the child read the uri as sent');
  // Refused: the wrong name in base64, a bad alphabet, a bad length, the markers in another
  // case (then it is a plain value, unlike the name), a NUL inside, raw non-ASCII bytes.
  const bad = [
    ['wrong name', b64name('example://hello')],
    ['bad alphabet', '=?base64?ZX*obw==?='],
    ['bad length', '=?base64?ZXNob3?='],
    ['data after padding', '=?base64?ZQ==ZQ==?='],
    ['markers case', `=?BASE64?${Buffer.from(uri).toString('base64')}?=`],
    ['NUL inside', `=?base64?${Buffer.from('example://h\0').toString('base64')}?=`],
    ['raw latin-1', 'example://h\xe9llo'],
    ['unterminated', `=?base64?${Buffer.from(uri).toString('base64')}`],
  ];
  for (const [what, value] of bad) {
    const x = mreq('resources/read', { uri: what === 'raw latin-1' ? 'example://héllo' : uri });
    await refused(await mpost(gw, x, { headers: { 'Mcp-Name': value } }), { status: 400, code: -32020, id: x.id, what: `Mcp-Name ${what}` });
  }
  // A plain name that looks like base64 but is the name itself passes.
  const odd = mreq('resources/read', { uri: '=?base64?' });
  await refused(await mpost(gw, odd, { headers: { 'Mcp-Name': '=?base64?' } }), { status: 200, code: -32002, id: odd.id, what: 'plain "=?base64?"' });
});

test('header values: blanks around them are dropped; names are case-insensitive, values case-sensitive', async () => {
  const m = mreq('tools/call', { name: 'echo', arguments: { text: 'blanks' } });
  const a = await mcall(gw, m, { headers: { 'MCP-Protocol-Version': ` \t${V}\t `, 'Mcp-Method': '  tools/call ', 'Mcp-Name': '\techo  ' } });
  assert.equal(textOf(a), 'blanks');
  const b64 = mreq('tools/call', { name: 'echo', arguments: { text: 'blanks base64' } });
  assert.equal(textOf(await mcall(gw, b64, { headers: { 'Mcp-Name': ` ${b64name('echo')}\t` } })), 'blanks base64');
  // Inner blanks are part of the value.
  const inner = mreq('tools/call', { name: 'echo', arguments: { text: 'x' } });
  await refused(await mpost(gw, inner, { headers: { 'Mcp-Method': 'tools/ call' } }), { status: 400, code: -32020, id: inner.id, what: 'inner blank' });
  // Names in any case.
  for (const names of [['mcp-protocol-version', 'mcp-method', 'mcp-name'], ['MCP-PROTOCOL-VERSION', 'MCP-METHOD', 'MCP-NAME'], ['mCp-PrOtOcOl-VeRsIoN', 'mCP-meTHod', 'MCP-name']]) {
    const x = mreq('tools/call', { name: 'echo', arguments: { text: names[1] } });
    const a2 = await mcall(gw, x, { headers: { [names[0]]: V, [names[1]]: 'tools/call', [names[2]]: 'echo' } });
    assert.equal(textOf(a2), names[1], names.join(' '));
  }
  // Values in another case are other values.
  for (const [what, headers] of [['Mcp-Method', { 'Mcp-Method': 'TOOLS/CALL' }], ['Mcp-Name', { 'Mcp-Name': 'ECHO' }]]) {
    const x = mreq('tools/call', { name: 'echo', arguments: { text: 'x' } });
    await refused(await mpost(gw, x, { headers }), { status: 400, code: -32020, id: x.id, what: `${what} upper case` });
  }
});

test('404 -32601: methods the revision removed, and methods a legacy child cannot serve', async () => {
  for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'tasks/list', 'tasks/result', 'roots/list', 'sampling/createMessage', 'elicitation/create']) {
    const params = method === 'initialize' ? { protocolVersion: V, capabilities: {}, clientInfo: { name: 'x', version: '1' } } : {};
    const m = mreq(method, params);
    await refused(await mpost(gw, m), { status: 404, code: -32601, id: m.id, what: `removed ${method}` });
  }
  // Not core, so a legacy child has none of them.
  for (const method of ['no/such/method', 'tasks/get']) {
    const m = mreq(method, method === 'tasks/get' ? { taskId: 't' } : {});
    await refused(await mpost(gw, m), { status: 404, code: -32601, id: m.id, what: `${method} on a legacy pool` });
  }
  // subscriptions/listen is the gateway's own for a legacy pool: without params.notifications, -32602.
  const l = mreq('subscriptions/listen', {});
  await refused(await mpost(gw, l), { status: 400, code: -32602, id: l.id, what: 'a listen without notifications' });
  assert.ok(!childMsgs().some((x) => x.method === 'no/such/method'), 'not forwarded');
});

test('400 -32600: an id or a progress token longer than max_id_bytes', async () => {
  let m = mreq('tools/list', {}, { id: 'i'.repeat(300) });
  await refused(await mpost(gw, m), { status: 400, code: -32600, id: m.id, what: 'long id' });
  m = mreq('tools/list', { _meta: { progressToken: 'p'.repeat(300) } });
  await refused(await mpost(gw, m), { status: 400, code: -32600, id: m.id, what: 'long progress token' });
});

test('GET and DELETE of a stateless client: 405 with Allow: POST', async () => {
  for (const method of ['GET', 'DELETE']) {
    for (const p of ['/mcp', '/stateless']) {
      const r = await request(`${gw.base}${p}`, { method, headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': V } });
      const body = await refused(r, { status: 405, code: -32600, id: null, what: `${method} ${p}` });
      assert.equal(r.headers.allow, 'POST', `${method} ${p}: Allow`);
      assert.ok(body.error.message.length > 0);
    }
    // A version no legacy revision has is stateless too; a legacy one is not (no session: 400).
    const r2 = await request(`${gw.base}/mcp`, { method, headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': '2099-01-01' } });
    await r2.done();
    assert.equal(r2.status, 405, `${method} 2099-01-01`);
    const r3 = await request(`${gw.base}/mcp`, { method, headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': '2025-11-25' } });
    await r3.done();
    assert.notEqual(r3.status, 405, `${method} with a legacy version is a legacy request`);
  }
});

test('Origin and Host are checked for stateless requests: 403', async () => {
  let m = mreq('tools/list');
  let r = await mpost(gw, m, { headers: { Origin: 'http://evil.example' } });
  let text = await r.done();
  assert.equal(r.status, 403, text);
  m = mreq('tools/list');
  r = await mpost(gw, m, { headers: { Host: 'evil.example' } });
  text = await r.done();
  assert.equal(r.status, 403, text);
  // A listed origin passes.
  await mcall(gw, mreq('tools/list'), { headers: { Origin: `http://localhost:${gw.port}` } });
  // The 405 of a stateless GET comes after them.
  r = await request(`${gw.base}/mcp`, { method: 'GET', headers: { 'MCP-Protocol-Version': V, Origin: 'http://evil.example' } });
  await r.done();
  assert.equal(r.status, 403, 'GET with a foreign Origin');
});

test('a body over max_body_bytes: 413 (by Content-Length, and chunked)', async () => {
  const m = mreq('tools/call', { name: 'echo', arguments: { text: 'x'.repeat(MAX_BODY + 100) } });
  let r = await mpost(gw, m);
  let text = await r.done();
  assert.equal(r.status, 413, text);
  assert.equal(JSON.parse(text).error.code, -32600, text);
  const payload = JSON.stringify(m);
  r = await request(`${gw.base}/mcp`, {
    method: 'POST', body: payload,
    headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Transfer-Encoding': 'chunked', ...mheaders(m) },
  });
  text = await r.done();
  assert.equal(r.status, 413, `chunked: ${text}`);
  // Just under the limit passes.
  const ok = mreq('tools/call', { name: 'echo', arguments: { text: '' } });
  ok.params.arguments.text = 'y'.repeat(MAX_BODY - JSON.stringify(ok).length - 1);
  assert.equal(textOf(await mcall(gw, ok)).length, ok.params.arguments.text.length);
});

// --- answers -------------------------------------------------------------------------------------

test('a single answer is one JSON object: 200 for results and most errors, 400 for -32602/-32021, 404 for a child\'s -32601', async () => {
  const m = mreq('tools/call', { name: 'echo', arguments: { text: 'one object' } });
  const r = await mpost(gw, m);
  const body = await jsonAnswer(r, { what: 'echo' });
  assert.equal(body.id, m.id);
  assert.equal(textOf(body), 'one object');
  assert.ok(!/^(event|data):/m.test(r.text()), 'no SSE framing');
  assert.equal(r.headers['content-length'], String(Buffer.byteLength(r.text())), 'one body with its length');
  // The example child's own errors: -32602 (unknown tool) is 400, -32002 (no resource) 200.
  const u = mreq('tools/call', { name: 'no_such_tool', arguments: {} });
  await refused(await mpost(gw, u), { status: 400, code: -32602, id: u.id, what: 'unknown tool (child\'s -32602)' });
  const nr = mreq('resources/read', { uri: 'example://nope' });
  await refused(await mpost(gw, nr), { status: 200, code: -32002, id: nr.id, what: 'unknown resource (child\'s -32002)' });
  // The stateless child answers an unknown method -32601 itself: 404.
  const x = mreq('no/such/method', {}, { id: 77 });
  await refused(await mpost(gw, x, { path: '/stateless' }), { status: 404, code: -32601, id: 77, what: 'stateless child\'s -32601' });
  // -32021 (the request's own clientCapabilities lack sampling) is 400; declared, the same
  // call gets its input_required round: each request's capabilities reach the child.
  const c = mreq('tools/call', { name: 'test_missing_capability', arguments: {} });
  const cb = await refused(await mpost(gw, c, { path: '/stateless' }), { status: 400, code: -32021, id: c.id, what: 'missing capability' });
  assert.deepEqual(cb.error.data?.requiredCapabilities, { sampling: {} }, JSON.stringify(cb));
  const c2 = mreq('tools/call', { name: 'test_missing_capability', arguments: {} }, { meta: { [`${META}clientCapabilities`]: { sampling: {} } } });
  const ir = await mcall(gw, c2, { path: '/stateless' });
  assert.equal(ir.result.resultType, 'input_required', JSON.stringify(ir));
  assert.ok(ir.result.inputRequests?.summary, JSON.stringify(ir));
  // ... and its tool error result is a 200 result.
  const e = await mcall(gw, mreq('tools/call', { name: 'test_error_handling', arguments: {} }), { path: '/stateless' });
  assert.equal(e.result.isError, true);
});

test('progress first: an SSE stream (X-Accel-Buffering: no), progress with the client\'s own token, then the answer', async () => {
  const token = `client-token-${crypto.randomUUID()}`;
  const m = mreq('tools/call', { name: 'slow', arguments: { steps: 3, interval_ms: 30 }, _meta: { progressToken: token } });
  const r = await mpost(gw, m);
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^text\/event-stream/);
  assert.equal(r.headers['x-accel-buffering'], 'no');
  assert.equal(r.headers['mcp-session-id'], undefined);
  await r.done(scaled(10000));
  const msgs = r.events().map((e) => e.json);
  assert.equal(msgs.length, 4, r.text());
  for (const [i, p] of msgs.slice(0, 3).entries()) {
    assert.equal(p.method, 'notifications/progress', JSON.stringify(p));
    assert.equal(p.params.progressToken, token, 'the client\'s token, not the child\'s');
    assert.equal(p.params.progress, i + 1);
  }
  const ans = msgs[3];
  assert.equal(ans.id, m.id);
  assert.equal(textOf(ans), 'done after 3 steps', JSON.stringify(ans));
  assert.equal(ans.result.resultType, 'complete');
  // The child saw a token the gateway minted: the number it also got as the id.
  const seen = childMsgs().find((x) => x.method === 'tools/call' && x.params?.name === 'slow' && x.params?._meta?.progressToken !== undefined && typeof x.id === 'number' && x.params.arguments?.interval_ms === 30);
  assert.ok(seen, 'child read the call');
  assert.equal(seen.params._meta.progressToken, seen.id, JSON.stringify(seen));
  assert.ok(!JSON.stringify(childMsgs()).includes(token), 'the client\'s token never reached the child');
  // A numeric client token, on the stateless child.
  const m2 = mreq('tools/call', { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 9 } }, { id: 'stateless-progress' });
  const r2 = await mpost(gw, m2, { path: '/stateless' });
  assert.match(r2.headers['content-type'], /^text\/event-stream/);
  assert.equal(r2.headers['x-accel-buffering'], 'no');
  await r2.done(scaled(10000));
  const ev = r2.events().map((e) => e.json);
  const progress = ev.filter((j) => j.method === 'notifications/progress');
  assert.deepEqual(progress.map((p) => [p.params.progressToken, p.params.progress]), [[9, 0], [9, 50], [9, 100]], r2.text());
  assert.equal(ev.at(-1).id, 'stateless-progress');
  assert.equal(ev.at(-1).result.resultType, 'complete');
});

test('server/discover of a legacy child: answered by the gateway from its initialize', async () => {
  await mcall(gw, mreq('tools/list')); // the pool exists, its child probed and initialized
  const before = childMsgs().filter((x) => x.method === 'server/discover').length;
  const m = mreq('server/discover', {}, { id: 'disc-1' });
  // The gateway has the answer at once: it must not wait out the hold (heartbeat_s) that
  // lets a child's answer leave as one JSON object.
  const t0 = performance.now();
  const r = await Promise.race([mpost(gw, m), new Promise((res) => setTimeout(res, scaled(2000), null))]);
  assert.ok(r !== null, `server/discover of a legacy child not answered within ${scaled(2000)} ms (held ${HEARTBEAT_S} s?)`);
  const body = await jsonAnswer(r, { what: 'server/discover' });
  assert.ok(performance.now() - t0 < scaled(2000));
  assert.equal(body.id, 'disc-1');
  const res = body.result;
  assert.deepEqual(res.supportedVersions, [V]);
  assert.equal(res.resultType, 'complete');
  assert.equal(res.ttlMs, CACHE_TTL_MS);
  assert.equal(res.cacheScope, 'public');
  assert.deepEqual(res._meta?.[`${META}serverInfo`], { name: 'mcp-example-server', version: '0.1.0' }, JSON.stringify(res));
  for (const k of ['tools', 'resources', 'prompts']) assert.ok(res.capabilities?.[k], `capabilities.${k}: ${JSON.stringify(res)}`);
  assert.equal(res.capabilities.tasks, undefined);
  // Not forwarded: the child's only server/discover is the gateway's probe.
  await mcall(gw, mreq('server/discover', {}, { id: 2 }));
  assert.equal(childMsgs().filter((x) => x.method === 'server/discover').length, before);
  assert.equal(before, 1, 'one probe per pool');
});

test('server/discover of a stateless child: forwarded, its own answer', async () => {
  const body = await mcall(gw, mreq('server/discover', {}, { id: 5 }), { path: '/stateless' });
  const res = body.result;
  assert.ok(res.supportedVersions.includes(V), JSON.stringify(res));
  assert.equal(res.resultType, 'complete');
  assert.equal(res._meta?.[`${META}serverInfo`]?.name, 'mcp-gateway-stateless-fixture', JSON.stringify(res));
  assert.equal(body.id, 5);
  assert.match(gw.logs(), /pool:stateless#\d+.*serves 2026-07-28/);
});

test('a legacy child\'s results: resultType "complete"; ttlMs and cacheScope (the INI\'s) on cacheable ones', async () => {
  for (const [method, params] of [['tools/list', {}], ['prompts/list', {}], ['resources/list', {}], ['resources/read', { uri: 'example://hello' }]]) {
    const { result } = await mcall(gw, mreq(method, params));
    assert.equal(result.resultType, 'complete', `${method}: ${JSON.stringify(result)}`);
    assert.equal(result.ttlMs, CACHE_TTL_MS, method);
    assert.equal(result.cacheScope, 'public', method);
  }
  for (const [method, params] of [['tools/call', { name: 'echo', arguments: { text: 'e' } }], ['prompts/get', { name: 'greet', arguments: { name: 'Ann' } }]]) {
    const { result } = await mcall(gw, mreq(method, params));
    assert.equal(result.resultType, 'complete', `${method}: ${JSON.stringify(result)}`);
    assert.equal(result.ttlMs, undefined, `${method} is not cacheable`);
    assert.equal(result.cacheScope, undefined, `${method} is not cacheable`);
  }
  // A stateless child's own hints are kept.
  const { result } = await mcall(gw, mreq('tools/list'), { path: '/stateless' });
  assert.equal(result.ttlMs, 60000);
  assert.equal(result.cacheScope, 'public');
  const rr = await mcall(gw, mreq('resources/read', { uri: 'test://static-text' }), { path: '/stateless' });
  assert.equal(rr.result.ttlMs, 5000);
  assert.equal(rr.result.cacheScope, 'private');
});

test('Mcp-Name through base64 to the stateless child: a non-ASCII template uri is served', async () => {
  const uri = 'test://template/日本/data';
  const m = mreq('resources/read', { uri });
  assert.match(mheaders(m)['Mcp-Name'], /^=\?base64\?/);
  const { result } = await mcall(gw, m, { path: '/stateless' });
  const data = JSON.parse(result.contents[0].text);
  assert.equal(data.templateTest, true, JSON.stringify(result));
  assert.equal(decodeURIComponent(data.id), '日本', JSON.stringify(result));
  // The same uri, its header unlike it: refused before the child.
  const bad = mreq('resources/read', { uri });
  await refused(await mpost(gw, bad, { path: '/stateless', headers: { 'Mcp-Name': b64name('test://template/日本/dat') } }),
    { status: 400, code: -32020, id: bad.id, what: 'base64 of another uri' });
});

// --- cancellation ----------------------------------------------------------------------------------

test('a client that drops a legacy-child call (nothing written): notifications/cancelled for the child\'s id at once', async () => {
  const before = await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="client_disconnected"');
  const tag = `drop-${crypto.randomUUID()}`;
  const m = mreq('tools/call', { name: 'echo', arguments: { text: tag, delay_ms: 60000 } });
  const { req, response } = await openPost(`${gw.base}/mcp`, mheaders(m), m);
  const seen = await waitFor(() => childMsgs().find((x) => x.method === 'tools/call' && x.params?.arguments?.text === tag), scaled(5000), 'child to read the call');
  assert.equal(typeof seen.id, 'number', 'a minted id');
  const t0 = performance.now();
  req.destroy();
  const c = await waitFor(() => childMsgs().find((x) => x.method === 'notifications/cancelled' && x.params?.requestId === seen.id), scaled(3000), 'cancel at the child');
  const ms = performance.now() - t0;
  assert.ok(ms < scaled(1000), `cancel after ${ms.toFixed(0)} ms (heartbeat ${HEARTBEAT_S} s: not found by a write)`);
  assert.equal(c.params.reason, 'client disconnected');
  assert.equal(await response, null, 'no response was ever started');
  await waitFor(async () => (await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="client_disconnected"')) === before + 1, scaled(2000), 'client_disconnected counted');
  // Exactly one cancel for it.
  await mcall(gw, mreq('tools/list'));
  assert.equal(childMsgs().filter((x) => x.method === 'notifications/cancelled' && x.params?.requestId === seen.id).length, 1);
});

test('a client that drops a stateless-child call: the fixture\'s slow is cancelled under the child-facing id', async () => {
  const before = await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="client_disconnected"');
  const m = mreq('tools/call', { name: 'slow', arguments: { ms: 60000 } });
  await mcall(gw, mreq('tools/list'), { path: '/stateless' }); // its child is up and ready
  assert.equal(await metric(gw, 'mcpgw_pool_inflight_requests'), 0);
  const { req, response } = await openPost(`${gw.base}/stateless`, mheaders(m), m);
  // In flight: written to the child's stdin, which reads it before anything sent later.
  await waitFor(async () => (await metric(gw, 'mcpgw_pool_inflight_requests')) === 1, scaled(5000), 'the call in flight');
  await new Promise((r) => setTimeout(r, 100));
  const t0 = performance.now();
  req.destroy();
  const sent = await gw.waitLog(/pool:stateless#\d+ .*cancel sent to child: method=tools\/call child_id=(\d+) reason="client disconnected"/, scaled(3000));
  const line = await waitFor(() => fileLines(cancelLog).find((l) => l === `CANCELLED ${sent[1]}`), scaled(5000), `CANCELLED ${sent[1]} in ${cancelLog}`);
  const ms = performance.now() - t0;
  assert.ok(line);
  assert.ok(ms < scaled(2000), `cancelled after ${ms.toFixed(0)} ms`);
  assert.equal(await response, null, 'no response was ever started');
  await waitFor(async () => (await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="client_disconnected"')) === before + 1, scaled(2000), 'client_disconnected counted');
});

test('request_timeout_ms: a JSON-RPC error to the client, a cancel at the child with reason "request timed out"', async () => {
  const before = await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="timeout"');
  const tag = `timeout-${crypto.randomUUID()}`;
  const m = mreq('tools/call', { name: 'echo', arguments: { text: tag, delay_ms: 60000 } });
  const t0 = performance.now();
  const r = await mpost(gw, m, { path: '/timed' });
  const body = await refused(r, { status: 200, code: -32603, id: m.id, what: 'timed out' });
  const ms = performance.now() - t0;
  assert.ok(ms >= TIMEOUT_MS - 5, `answered after ${ms.toFixed(0)} ms, not before the timeout`);
  assert.match(body.error.message, /timed out/);
  const msgs = () => jsonLines(timedLog);
  const seen = msgs().find((x) => x.method === 'tools/call' && x.params?.arguments?.text === tag);
  assert.ok(seen, 'the timed child read the call');
  const c = await waitFor(() => msgs().find((x) => x.method === 'notifications/cancelled' && x.params?.requestId === seen.id), scaled(3000), 'cancel at the child');
  assert.equal(c.params.reason, 'request timed out');
  assert.equal(await metric(gw, 'mcpgw_cancels_total', 'direction="to_child",reason="timeout"'), before + 1);
});

// =================================================================================================
// bearer auth applies to stateless requests
// =================================================================================================

test('bearer auth: a stateless request without a valid token gets 401 with a challenge; with one it is served', async () => {
  const dir = tmpdir('mcpgw-stateless-auth-');
  const tokensFile = path.join(dir, 'tokens');
  const token = crypto.randomBytes(24).toString('base64url');
  fs.writeFileSync(tokensFile, `sha256:${crypto.createHash('sha256').update(token).digest('hex')} stateless-user\n`);
  const gw = await startGateway({ auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile } });
  let ok = false;
  try {
    for (const [what, headers] of [['no token', {}], ['wrong token', { Authorization: `Bearer ${token}x` }], ['not bearer', { Authorization: `Basic ${token}` }]]) {
      const m = mreq('tools/list');
      const r = await mpost(gw, m, { headers });
      const text = await r.done();
      assert.equal(r.status, 401, `${what}: ${text}`);
      assert.match(r.headers['www-authenticate'] || '', /^Bearer /, what);
      assert.match(r.headers['content-type'] || '', /^application\/json\b/, what);
      assert.equal(typeof JSON.parse(text).error.code, 'number', text);
    }
    // Auth comes before the 405 of a stateless GET.
    const g = await request(gw.url, { method: 'GET', headers: { 'MCP-Protocol-Version': V } });
    await g.done();
    assert.equal(g.status, 401, 'GET without a token');
    const m = mreq('tools/call', { name: 'echo', arguments: { text: 'authorized' } });
    const body = await jsonAnswer(await mpost(gw, m, { headers: { Authorization: `Bearer ${token}` } }), { what: 'with the token' });
    assert.equal(textOf(body), 'authorized');
    ok = true;
  } finally {
    await gw.stop(ok ? undefined : { expect: null });
  }
});
