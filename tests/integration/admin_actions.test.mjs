// SPDX-License-Identifier: MIT
// The operator's admin actions behind admin_token, seen from outside with real children (the
// example server, each child logging what it receives to its own file):
//   - the gate: no route without admin_token (404), 401 without or with a wrong token, 405 for
//     another method, 404 for an unknown session, server or verb; every outcome counted
//     (mcpgw_admin_actions_total) and logged with its fields (JSON log);
//   - POST /admin/sessions/ID/end: the request in flight is cancelled at the child ("ended by the
//     operator"), its client gets an error, the child is reaped, the session id is 404 after;
//   - POST /admin/servers/NAME/drain and resume: initialize and stateless requests get 503 with
//     Retry-After while an open session and a pool call in flight go on; /readyz names the server
//     drained and is 503 only once every server is; SIGHUP keeps the drain; resume serves again;
//   - POST /admin/servers/NAME/restart: the pool's children are replaced (new pids), the call in
//     flight on the old child is answered, the old child then stops; sessions are untouched; a
//     restart keeps the server's restart budget (restarts in a loop start no child once it is
//     spent).
// Calls that must stay in flight are cancel_self calls (they end by a cancel, or by SIGUSR1 to
// their child) with a progressToken, whose progress shows they reached the child. Nothing sleeps
// to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, initSession, metricSamples, pidAlive, post, reaped, request, rpc, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const TOKEN = 'admin-actions-token-0123456789abcdefgh';
const V = '2026-07-28';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;

/** The example server with its own --log file per child: <dir>/child-<pid>.log. */
const perChild = (dir) => `sh -c 'exec ${EXAMPLE} --log ${dir}/child-$$.log'`;
/** Messages the child pid received, from its own log. */
function childMsgs(dir, pid) {
  const f = path.join(dir, `child-${pid}.log`);
  if (!fs.existsSync(f)) return [];
  return fs.readFileSync(f, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return { raw: l }; } });
}

/** An admin request: {status, headers, body (parsed JSON, or null)}. */
async function admin(gw, p, { method = 'POST', token = TOKEN } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const r = await request(`${gw.base}${p}`, { method, headers });
  const text = await r.done(scaled(5000));
  let body = null;
  try { body = JSON.parse(text); } catch { /* HEAD, or not JSON */ }
  return { status: r.status, headers: r.headers, body, text };
}

async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return metricSamples(text);
}
const ACTIONS = (action, outcome) => `mcpgw_admin_actions_total{action="${action}",outcome="${outcome}"}`;

async function readyz(gw) {
  const r = await request(`${gw.base}/readyz`, { method: 'GET' });
  const text = await r.done(scaled(5000));
  return { status: r.status, body: JSON.parse(text) };
}
const stateOf = (rz, name) => rz.body.servers.find((s) => s.name === name)?.state;

/** A stateless request with the headers and _meta envelope it needs. */
function mpost(gw, method, params = {}, { id = 1, meta = {}, url } = {}) {
  const body = {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, ...meta } },
  };
  const headers = { 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  if (method === 'tools/call') headers['Mcp-Name'] = params.name;
  return post(gw, body, { headers, url });
}
function msgsOf(r) {
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) return r.text() ? [JSON.parse(r.text())] : [];
  return r.events().map((e) => e.json).filter(Boolean);
}
/** A whole 2026-07-28 tools/call: {r, answer}. */
async function mcall(gw, name, args, opts = {}) {
  const r = await mpost(gw, 'tools/call', { name, arguments: args }, opts);
  await r.done(scaled(10000));
  return { r, answer: msgsOf(r).find(isAnswer) };
}
/** A 2026-07-28 cancel_self call, resolved once its progress shows it reached its child. */
async function mheld(gw, id, { url } = {}) {
  const r = await mpost(gw, 'tools/call', { name: 'cancel_self', arguments: {} }, { id, url, meta: { progressToken: `t-${id}` } });
  assert.equal(r.status, 200, `held ${id}: HTTP ${r.status} ${r.text()}`);
  await r.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
  return r;
}

/** Pool children the gateway started for server name, from its log: their pids in order. */
const poolPids = (gw, name = 'example') => [...gw.logs().matchAll(new RegExp(`session=pool:${name}#\\d+ pool child started: pid (\\d+)`, 'g'))].map((m) => Number(m[1]));
/** The pids of the pool children /admin/inflight shows for server name (the pools not retired). */
async function livePoolPids(gw, name = 'example') {
  const v = await admin(gw, '/admin/inflight', { method: 'GET' });
  assert.equal(v.status, 200, v.text);
  return v.body.pools.filter((p) => p.server === name && !p.retired).flatMap((p) => p.children.map((c) => c.pid));
}

const initMsg = (id) => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, id);

// ---- the gate --------------------------------------------------------------------------------

test('without admin_token the admin actions do not exist: 404, nothing counted', async () => {
  await withGateway({}, async (gw) => {
    const { sid } = await initSession(gw);
    for (const p of [`/admin/sessions/${sid}/end`, '/admin/servers/example/drain', '/admin/servers/example/restart']) {
      const r = await admin(gw, p);
      assert.equal(r.status, 404, `${p}: ${r.text}`);
      assert.equal(r.body.error.message, 'Not found');
    }
    // The session is untouched.
    const again = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'still here' } }), { sid, headers: { 'MCP-Protocol-Version': '2025-06-18' } });
    await again.done(scaled(5000));
    assert.equal(textOf(again.events().map((e) => e.json).find(isAnswer)), 'still here');
    const rz = await readyz(gw);
    assert.equal(stateOf(rz, 'example'), 'ok');
    const m = await metrics(gw);
    assert.equal(m[ACTIONS('drain', 'ok')], 0);
    assert.equal(m[ACTIONS('end', 'ok')], 0);
  });
});

test('the gate: 401 without or with a wrong token, 405 for GET (Allow: POST), 404 for an unknown session, server or verb; counted and logged as JSON fields', async () => {
  await withGateway({ gateway: { admin_token: TOKEN, log_level: 'info', log_format: 'json' } }, async (gw) => {
    const objs = () => gw.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const none = await admin(gw, '/admin/servers/example/drain', { token: null });
    assert.equal(none.status, 401, none.text);
    assert.equal(none.headers['www-authenticate'], 'Bearer');
    const wrong = await admin(gw, '/admin/servers/example/drain', { token: TOKEN.replace(/.$/, 'X') });
    assert.equal(wrong.status, 401, wrong.text);
    const get = await admin(gw, '/admin/servers/example/drain', { method: 'GET' });
    assert.equal(get.status, 405, get.text);
    assert.equal(get.headers.allow, 'POST');
    const postView = await admin(gw, '/admin/inflight');
    assert.equal(postView.status, 405, postView.text);
    assert.equal(postView.headers.allow, 'GET, HEAD');
    const noSession = await admin(gw, '/admin/sessions/no-such-session/end');
    assert.equal(noSession.status, 404, noSession.text);
    assert.match(noSession.body.error.message, /no such session/);
    const noServer = await admin(gw, '/admin/servers/nope/drain');
    assert.equal(noServer.status, 404, noServer.text);
    assert.match(noServer.body.error.message, /no such server/);
    const noVerb = await admin(gw, '/admin/servers/example/explode');
    assert.equal(noVerb.status, 404, noVerb.text);
    // None of that drained anything (the first /readyz starts the probe: starting, then ok).
    assert.equal(await waitFor(async () => { const st = stateOf(await readyz(gw), 'example'); return st !== 'starting' && st; }, scaled(10000), 'a verdict'), 'ok');
    const m = await metrics(gw);
    assert.equal(m[ACTIONS('drain', 'refused')], 3, 'two 401s and a 405');
    assert.equal(m[ACTIONS('drain', 'not_found')], 1);
    assert.equal(m[ACTIONS('end', 'not_found')], 1);
    assert.equal(m[ACTIONS('drain', 'ok')], 0);
    const lines = await waitFor(() => { const l = objs().filter((o) => o.action); return l.length >= 5 && l; }, scaled(5000), 'five admin lines');
    assert.deepEqual(lines.map((o) => [o.level, o.action, o.target, o.outcome]), [
      ['info', 'drain', 'example', 'refused'],
      ['info', 'drain', 'example', 'refused'],
      ['info', 'drain', 'example', 'refused'],
      ['info', 'end', 'no-such-session', 'not_found'],
      ['info', 'drain', 'nope', 'not_found'],
    ]);
    assert.ok(lines.every((o) => o.peer === '127.0.0.1'), JSON.stringify(lines));
  });
});

// ---- ending a session ------------------------------------------------------------------------

test('POST /admin/sessions/ID/end: the call in flight is cancelled at the child and answered with an error, the child is reaped, the id is 404 after', async () => {
  const dir = tmpdir('mcpgw-admin-');
  const servers = [{ name: 'example', path: '/mcp', command: perChild(dir) }];
  await withGateway({ servers, gateway: { admin_token: TOKEN } }, async (gw) => {
    const s = await initSession(gw);
    const other = await initSession(gw);
    assert.ok(s.pid && other.pid, 'the session children\'s pids');
    const headers = { 'MCP-Protocol-Version': s.version };
    const h = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: {}, _meta: { progressToken: 'p-end' } }, 'in-flight'), { sid: s.sid, headers });
    assert.equal(h.status, 200, h.text());
    await h.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    const seen = childMsgs(dir, s.pid).find((m) => m.method === 'tools/call');
    assert.ok(seen, 'the child has the call');

    const r = await admin(gw, `/admin/sessions/${s.sid}/end`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { action: 'end', session: s.sid, server: 'example', state: 'ended', cancelled: 1 });
    // The client's call ends with an error saying why.
    await h.done(scaled(5000));
    const ans = h.events().map((e) => e.json).find(isAnswer);
    assert.equal(ans?.id, 'in-flight', h.text());
    assert.match(ans.error?.message ?? '', /ended by the operator/);
    // The child read a cancel for the id it saw, then was stopped.
    const cancel = await waitFor(() => childMsgs(dir, s.pid).find((m) => m.method === 'notifications/cancelled'), scaled(5000), 'the cancel at the child');
    assert.equal(cancel.params.requestId, seen.id);
    assert.equal(cancel.params.reason, 'ended by the operator');
    await waitFor(() => reaped(s.pid), scaled(10000), `session child ${s.pid} reaped`);
    // Its id is gone; the other session is untouched.
    const after = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'x' } }), { sid: s.sid, headers });
    await after.done(scaled(5000));
    assert.equal(after.status, 404, after.text());
    const fine = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'other' } }), { sid: other.sid, headers });
    await fine.done(scaled(5000));
    assert.equal(textOf(fine.events().map((e) => e.json).find(isAnswer)), 'other');
    assert.ok(pidAlive(other.pid));
    // Again: 404, counted apart.
    const twice = await admin(gw, `/admin/sessions/${s.sid}/end`);
    assert.equal(twice.status, 404, twice.text);
    const m = await metrics(gw);
    assert.equal(m['mcpgw_cancels_total{direction="to_child",reason="admin"}'], 1);
    assert.equal(m['mcpgw_sessions_closed_total{reason="admin"}'], 1);
    assert.equal(m['mcpgw_sessions_open'], 1);
    assert.equal(m[ACTIONS('end', 'ok')], 1);
    assert.equal(m[ACTIONS('end', 'not_found')], 1);
    assert.match(gw.logs(), new RegExp(`info admin action end ${s.sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} from 127\\.0\\.0\\.1: ok, 1 requests in flight cancelled`));
  });
});

// ---- drain and resume --------------------------------------------------------------------------

test('drain: initialize and stateless calls get 503 with Retry-After naming the server, an open session and a pool call in flight go on; /readyz says drained (503 only once every server is); resume serves again', async () => {
  const dir = tmpdir('mcpgw-admin-');
  const servers = [
    { name: 'example', path: '/mcp', command: perChild(dir) },
    { name: 'other', path: '/other', command: perChild(dir) },
  ];
  await withGateway({ servers, gateway: { admin_token: TOKEN } }, async (gw) => {
    const open = await initSession(gw);
    const headers = { 'MCP-Protocol-Version': open.version };
    const inflight = await mheld(gw, 'held-through');
    const [poolPid] = await waitFor(() => poolPids(gw).length === 1 && poolPids(gw), scaled(5000), 'the pool child\'s start line');

    const d = await admin(gw, '/admin/servers/example/drain');
    assert.equal(d.status, 200, d.text);
    assert.deepEqual(d.body, { action: 'drain', server: 'example', state: 'drained', changed: true });
    const d2 = await admin(gw, '/admin/servers/example/drain');
    assert.equal(d2.status, 200, d2.text);
    assert.deepEqual(d2.body, { action: 'drain', server: 'example', state: 'drained', changed: false });

    // New sessions: 503, Retry-After, a JSON-RPC error with the request's id naming the server.
    const init = await post(gw, initMsg('init-drained'));
    await init.done(scaled(5000));
    assert.equal(init.status, 503, init.text());
    assert.ok(Number(init.headers['retry-after']) > 0, `Retry-After: ${init.headers['retry-after']}`);
    assert.equal(init.json().id, 'init-drained');
    assert.match(init.json().error.message, /server example is drained by the operator/);
    // New stateless requests: the same.
    const m503 = await mcall(gw, 'echo', { text: 'refused' }, { id: 'stateless-drained' });
    assert.equal(m503.r.status, 503, m503.r.text());
    assert.ok(Number(m503.r.headers['retry-after']) > 0);
    assert.equal(m503.answer?.id, 'stateless-drained');
    assert.match(m503.answer.error.message, /server example is drained by the operator/);
    // The other server serves as before.
    const o = await mcall(gw, 'echo', { text: 'other serves' }, { id: 'o1', url: `${gw.base}/other` });
    assert.equal(textOf(o.answer), 'other serves');
    // The open session keeps working; the call in flight gets its answer.
    const s = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'open session' } }), { sid: open.sid, headers });
    await s.done(scaled(5000));
    assert.equal(textOf(s.events().map((e) => e.json).find(isAnswer)), 'open session');
    assert.ok(!inflight.ended, 'the pool call is still in flight');
    process.kill(poolPid, 'SIGUSR1');
    await inflight.done(scaled(5000));
    assert.equal(textOf(msgsOf(inflight).find(isAnswer)), 'released', inflight.text());

    // /readyz: one server drained is no reason for 503; every server drained is.
    let rz = await readyz(gw);
    assert.equal(rz.status, 200, JSON.stringify(rz.body));
    assert.equal(stateOf(rz, 'example'), 'drained');
    assert.match(rz.body.servers.find((x) => x.name === 'example').why, /drained by the operator/);
    assert.equal(stateOf(rz, 'other'), 'ok');
    let m = await metrics(gw);
    assert.equal(m['mcpgw_server_state{server="example",state="drained"}'], 1);
    assert.equal(m['mcpgw_server_state{server="example",state="ok"}'], 0);
    assert.equal(m['mcpgw_server_state{server="other",state="ok"}'], 1);
    assert.equal(m.mcpgw_ready, 1);
    assert.equal((await admin(gw, '/admin/servers/other/drain')).status, 200);
    rz = await readyz(gw);
    assert.equal(rz.status, 503, JSON.stringify(rz.body));
    assert.equal(rz.body.reason, 'no server can serve');
    assert.deepEqual(rz.body.servers.map((x) => x.state), ['drained', 'drained']);
    m = await metrics(gw);
    assert.equal(m['mcpgw_server_state{state="drained"}'], 2, 'both drained, summed over servers');
    assert.equal(m.mcpgw_ready, 0, 'mcpgw_ready agrees with /readyz');

    // Resume: served again.
    for (const name of ['example', 'other']) {
      const r = await admin(gw, `/admin/servers/${name}/resume`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, { action: 'resume', server: name, state: 'ok', changed: true });
    }
    rz = await readyz(gw);
    assert.equal(rz.status, 200);
    assert.deepEqual(rz.body.servers.map((x) => x.state), ['ok', 'ok']);
    const back = await initSession(gw);
    assert.ok(back.sid);
    const mb = await mcall(gw, 'echo', { text: 'stateless again' }, { id: 'm-again' });
    assert.equal(textOf(mb.answer), 'stateless again');
    m = await metrics(gw);
    assert.equal(m['mcpgw_server_state{state="ok"}'], 2);
    assert.equal(m.mcpgw_ready, 1);
    assert.equal(m[ACTIONS('drain', 'ok')], 3);
    assert.equal(m[ACTIONS('resume', 'ok')], 2);
  });
});

test('SIGHUP keeps a drained server drained (by its name); resume ends it', async () => {
  await withGateway({ gateway: { admin_token: TOKEN } }, async (gw) => {
    assert.equal((await admin(gw, '/admin/servers/example/drain')).status, 200);
    // A reload that changes the server's definition (its command's arguments).
    const conf = fs.readFileSync(gw.conf, 'utf8');
    const next = conf.replace(/^command = (.*)$/m, (_, c) => `command = ${c} --name reloaded`);
    assert.notEqual(next, conf);
    fs.writeFileSync(gw.conf, next);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/, scaled(5000));
    assert.equal(stateOf(await readyz(gw), 'example'), 'drained');
    const init = await post(gw, initMsg('after-hup'));
    await init.done(scaled(5000));
    assert.equal(init.status, 503, init.text());
    assert.match(init.json().error.message, /drained by the operator/);
    // No child of it ever started (a drained server gets no probe): resume says starting.
    const r = await admin(gw, '/admin/servers/example/resume');
    assert.deepEqual(r.body, { action: 'resume', server: 'example', state: 'starting', changed: true });
    const s = await initSession(gw);
    assert.equal(s.result.serverInfo.name, 'reloaded', 'a session of the reloaded definition');
  });
});

// ---- restart -----------------------------------------------------------------------------------

test('restart: the pool\'s children are replaced (new pids), a call in flight on the old child gets its answer, the old child then stops; a session is untouched', async () => {
  const dir = tmpdir('mcpgw-admin-');
  const servers = [
    { name: 'example', path: '/mcp', command: perChild(dir), extra: 'pool_warm_children = 1\npool_max_children = 2' },
    { name: 'idle', path: '/idle', command: perChild(dir) },
  ];
  await withGateway({ servers, gateway: { admin_token: TOKEN } }, async (gw) => {
    const session = await initSession(gw);
    const old = await waitFor(async () => { const p = await livePoolPids(gw); return p.length === 1 && p[0]; }, scaled(10000), 'the warm child');
    const h = await mheld(gw, 'across-restart');
    assert.ok(childMsgs(dir, old).some((m) => m.method === 'tools/call'), 'the call is at the old child');

    const r = await admin(gw, '/admin/servers/example/restart');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { action: 'restart', server: 'example', state: 'restarted', children_replaced: 1 });
    // A new child, and new requests go to it.
    const fresh = await waitFor(async () => { const p = await livePoolPids(gw); return p.length === 1 && p[0] !== old && p[0]; }, scaled(10000), 'a new pool child');
    const c = await mcall(gw, 'echo', { text: 'after restart' }, { id: 'after' });
    assert.equal(textOf(c.answer), 'after restart');
    assert.ok(childMsgs(dir, fresh).some((m) => m.params?.arguments?.text === 'after restart'), 'the new child served it');
    assert.ok(!childMsgs(dir, old).some((m) => m.params?.arguments?.text === 'after restart'), 'not the old one');
    // The old child finishes what it had, then stops.
    assert.ok(pidAlive(old), 'the old child stays while its call is in flight');
    assert.ok(!h.ended);
    process.kill(old, 'SIGUSR1');
    await h.done(scaled(5000));
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released', h.text());
    assert.ok(!childMsgs(dir, old).some((m) => m.method === 'notifications/cancelled'), 'nothing cancelled');
    await gw.waitLog(/pool child stopped: restarted by the operator/, scaled(10000));
    await waitFor(() => reaped(old), scaled(10000), `old child ${old} reaped`);
    // The session and its child are untouched.
    assert.ok(pidAlive(session.pid));
    const s = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'session' } }), { sid: session.sid, headers: { 'MCP-Protocol-Version': session.version } });
    await s.done(scaled(5000));
    assert.equal(textOf(s.events().map((e) => e.json).find(isAnswer)), 'session');
    // A server without a pool has nothing to replace; an unknown one is 404.
    const idle = await admin(gw, '/admin/servers/idle/restart');
    assert.deepEqual(idle.body, { action: 'restart', server: 'idle', state: 'restarted', children_replaced: 0 });
    assert.equal((await admin(gw, '/admin/servers/nope/restart')).status, 404);
    const m = await metrics(gw);
    assert.equal(m[ACTIONS('restart', 'ok')], 2);
    assert.equal(m[ACTIONS('restart', 'not_found')], 1);
  });
});

// ---- who holds what ----------------------------------------------------------------------------

/** The environment of process pid: {NAME: value}. */
function environOf(pid) {
  const env = {};
  for (const kv of fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').filter(Boolean)) {
    const i = kv.indexOf('=');
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return env;
}
/** The access log line of the request whose mcp_method and client are given: {key: value}. */
function accessLine(gw, mcpMethod, client) {
  for (const l of gw.logs().split('\n')) {
    if (!/ info access /.test(l)) continue;
    const f = Object.fromEntries([...l.matchAll(/ (\w+)=(\S+)/g)].map((m) => [m[1], m[2]]));
    if (f.mcp_method === mcpMethod && f.client === client) return f;
  }
  return null;
}
const utf8Len = (s) => Buffer.byteLength(s, 'utf8');

test('/admin/inflight says who holds each child: a session\'s mode, client address (as the access log names it), clientInfo (cut, escaped), creation time, owner and label; a pool call\'s principal, client, tool and start; each child\'s environment names its session or pool and server', async () => {
  // A trusted peer names the client by X-Forwarded-For, as nginx does: the view must show the
  // client the access log shows, not the socket's peer.
  await withGateway({ gateway: { admin_token: TOKEN, trusted_proxies: '127.0.0.1' } }, async (gw) => {
    const t0 = Date.now();
    // clientInfo is the client's own text: a control byte, a name longer than 128 bytes of
    // two-byte characters, a version of 500 bytes.
    const name = `cli\n\u0007${'ü'.repeat(100)}`;
    const init = rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name, version: 'v'.repeat(500) } }, 'init');
    const r = await post(gw, init, { headers: { 'X-Forwarded-For': '192.0.2.1, 203.0.113.7' } });
    await r.done(scaled(5000));
    assert.equal(r.status, 200, r.text());
    const sid = r.headers['mcp-session-id'];
    const view = await admin(gw, '/admin/inflight', { method: 'GET' });
    assert.equal(view.status, 200, view.text);
    const s = view.body.sessions.find((x) => x.id === sid);
    assert.ok(s, view.text);
    assert.equal(s.mode, 'child', 'a session with its own child process');
    const acc = accessLine(gw, 'initialize', '203.0.113.7');
    assert.ok(acc, `the access line of the initialize:\n${gw.logs()}`);
    assert.equal(s.client, acc.client);
    assert.equal(s.owner, acc.principal);
    // Cut to 128 bytes, never inside a character; the control byte kept and escaped (JSON).
    assert.equal(s.client_info.name, `cli\n\u0007${'ü'.repeat(61)}`);
    assert.ok(utf8Len(s.client_info.name) <= 128);
    assert.equal(s.client_info.version, 'v'.repeat(128));
    assert.match(s.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(Date.parse(s.created_at), s.created_unix_ms);
    assert.ok(s.created_unix_ms >= t0 - 1000 && s.created_unix_ms <= Date.now() + 1000, `created ${s.created_at}`);
    // The child's environment names its session by the label (not the id, which lets its
    // holder use the session) and its server.
    assert.match(s.label, /^[0-9a-f]{16}$/);
    assert.ok(s.child_pid > 0);
    const env = environOf(s.child_pid);
    assert.equal(env.MCPGW_SESSION_LABEL, s.label);
    assert.equal(env.MCPGW_SERVER, 'example');
    assert.ok(!Object.values(env).some((v) => v.includes(sid)), 'the session id is nowhere in the child\'s environment');
    assert.match(gw.logs(), new RegExp(`session created: server=example child=${s.child_pid} owner=\\S+ label=${s.label}`));

    // A session whose initialize has no clientInfo, from the socket's peer.
    const bare = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {} }, 'bare'));
    await bare.done(scaled(5000));
    const bareSid = bare.headers['mcp-session-id'];
    const v2 = await admin(gw, '/admin/inflight', { method: 'GET' });
    const b = v2.body.sessions.find((x) => x.id === bareSid);
    assert.equal(b.client_info, null);
    assert.equal(b.client, '127.0.0.1');
    assert.notEqual(b.label, s.label);

    // A stateless call in flight on a pool child: its caller beside its entry.
    const msg = rpc('tools/call', { name: 'cancel_self', arguments: {}, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, progressToken: 'who' } }, 'who');
    const h = await post(gw, msg, { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'cancel_self', 'X-Forwarded-For': '198.51.100.9' } });
    assert.equal(h.status, 200, h.text());
    await h.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    const v3 = await admin(gw, '/admin/inflight', { method: 'GET' });
    const child = v3.body.pools.find((p) => p.server === 'example' && !p.retired).children[0];
    const e = child.inflight.find((x) => x.id === 'who');
    assert.ok(e, v3.text);
    const pacc = accessLine(gw, 'tools/call', '198.51.100.9');
    assert.equal(e.client, '198.51.100.9');
    assert.equal(e.principal, 'address:198.51.100.9', 'without auth the client address is the principal');
    assert.equal(e.name, 'cancel_self');
    assert.equal(e.method, 'tools/call');
    assert.equal(Date.parse(e.started_at), e.started_unix_ms);
    assert.ok(e.started_unix_ms >= t0 - 1000 && e.started_unix_ms <= Date.now() + 1000, `started ${e.started_at}`);
    const penv = environOf(child.pid);
    assert.equal(penv.MCPGW_POOL, child.tag);
    assert.equal(penv.MCPGW_SERVER, 'example');
    assert.equal(penv.MCPGW_SESSION_LABEL, undefined);
    process.kill(child.pid, 'SIGUSR1');
    await h.done(scaled(5000));
    assert.equal(textOf(msgsOf(h).find(isAnswer)), 'released', h.text());
    assert.equal(pacc, null, 'the access line comes when the request ends');
    assert.equal(accessLine(gw, 'tools/call', '198.51.100.9')?.principal, e.principal);
  });
});

// The operator's restart is deliberate: it starts the new pool's children at once, without waiting
// out a backoff. The restart budget (pool_max_restarts_per_min) is the server's, not one pool's:
// restarts in a loop against a server whose children die at start must not start children faster
// than its own failures would (a hot loop of spawns).
test('restart of a server whose children die at start: the new pool keeps the server\'s restart budget; ten restarts in a row start no child once it is spent', async () => {
  const servers = [{ name: 'example', path: '/mcp', command: 'sh -c \'exit 3\'', extra: 'era = legacy\npool_warm_children = 1\npool_max_restarts_per_min = 2' }];
  await withGateway({ servers, gateway: { admin_token: TOKEN } }, async (gw) => {
    const started = async () => (await metrics(gw))['mcpgw_pool_child_events_total{server="example",event="started"}'] ?? 0;
    // The first start, its retry at once, one more after the backoff: then the budget is spent.
    await gw.waitLog(/pool example: not starting a child: pool_max_restarts_per_min reached/, scaled(10000));
    const before = await started();
    assert.equal(before, 3, 'a start and two restarts');
    for (let i = 0; i < 10; i++) {
      const r = await admin(gw, '/admin/servers/example/restart');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.state, 'restarted');
    }
    // Watched for two seconds (a lower bound, not scaled): long enough for the backoff's first
    // steps (0.5 s, 1 s), far shorter than the budget's minute.
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      assert.equal(await started(), before, 'no child started while the budget is spent');
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(poolPids(gw).length, before);
    const m = await metrics(gw);
    assert.equal(m[ACTIONS('restart', 'ok')], 10);
    // New requests are told why, as before the restarts.
    const c = await mcall(gw, 'echo', { text: 'x' }, { id: 'refused' });
    assert.equal(c.r.status, 503, c.r.text());
  });
});
