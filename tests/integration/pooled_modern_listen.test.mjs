// SPDX-License-Identifier: MIT
// Pooled legacy sessions (session_mode = pooled) in front of children that speak only the
// stateless revision: their resources/subscribe and list changes, through the gateway's own
// subscriptions/listen at one child of the pool (src/pool/pool_session_listen.c). A child of the
// test's own (written below) declares tools list changes and resources.subscribe in its
// server/discover, logs every listen it is asked for and every end, and on a tools/call sends an
// update of a URI (touch) or a list change (change) on every listen open for it.
//
// Every server has one child (pool_max_children = 1): every session's subscriptions are one
// listen at it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { del, get, initSession, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const ROOT = process.env.GW_SOURCE_ROOT ?? '';
const STATELESS_JS = path.join(ROOT, 'tests/fixtures/stateless_server.mjs');
const node = process.execPath;
const POOLED = 'session_mode = pooled\npool_max_children = 1';

let gw;
let dir;
let listener;
let quota;
let refuser;
let warm;

/**
 * A stateless-only child: server/discover declares tools.listChanged and resources.subscribe;
 * each subscriptions/listen is acknowledged and logged (`LISTEN pid id notifications`), each
 * notifications/cancelled of one logged (`END pid id`); tools/call touch (arguments.uri) sends
 * notifications/resources/updated on every open listen naming it, change sends
 * notifications/tools/list_changed on every open listen asking for it (both with the listen's
 * id as _meta subscriptionId), and each answers how many listens it sent on.
 */
function listenerChild(name) {
  const file = path.join(dir, `${name}.mjs`);
  const log = path.join(dir, `${name}.log`);
  fs.writeFileSync(file, `
import fs from 'node:fs';
import readline from 'node:readline';
const rl = readline.createInterface({ input: process.stdin });
const listens = new Map();
const out = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
const note = (l) => fs.appendFileSync(${JSON.stringify(log)}, l + '\\n');
const sub = (id) => ({ 'io.modelcontextprotocol/subscriptionId': id });
rl.on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.method === 'notifications/cancelled') {
    if (listens.delete(m.params.requestId)) note('END ' + process.pid + ' ' + JSON.stringify(m.params.requestId));
    return;
  }
  if (m.id === undefined) return;
  if (m.method === 'server/discover') return out({ id: m.id, result: { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: { listChanged: true }, resources: { subscribe: true } }, _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'listener', version: '1' } } } });
  if (m.method === 'subscriptions/listen') {
    listens.set(m.id, m.params.notifications);
    note('LISTEN ' + process.pid + ' ' + JSON.stringify(m.id) + ' ' + JSON.stringify(m.params.notifications) + ' ' + JSON.stringify(m.params._meta ?? null) + ' ' + (process.env.WHO ?? '-'));
    if (process.env.LISTEN_REFUSE) {
      listens.delete(m.id);
      return out({ id: m.id, error: { code: -32602, message: 'no listens here' } });
    }
    return out({ method: 'notifications/subscriptions/acknowledged', params: { notifications: m.params.notifications, _meta: sub(m.id) } });
  }
  if (m.method === 'tools/call' && m.params.name === 'pid') return out({ id: m.id, result: { resultType: 'complete', content: [{ type: 'text', text: String(process.pid) }] } });
  if (m.method === 'tools/call') {
    let n = 0;
    for (const [id, want] of listens) {
      if (m.params.name === 'touch' && (want.resourceSubscriptions ?? []).includes(m.params.arguments.uri)) {
        n++;
        out({ method: 'notifications/resources/updated', params: { uri: m.params.arguments.uri, _meta: sub(id) } });
      }
      if (m.params.name === 'change' && want.toolsListChanged) {
        n++;
        out({ method: 'notifications/tools/list_changed', params: { _meta: sub(id) } });
      }
    }
    return out({ id: m.id, result: { resultType: 'complete', content: [{ type: 'text', text: String(n) }] } });
  }
  out({ id: m.id, error: { code: -32601, message: 'Method not found' } });
});
rl.on('close', () => process.exit(0));
`);
  return { command: `${node} ${file}`, log };
}

before(async () => {
  dir = tmpdir('mcpgw-pmlisten-');
  listener = listenerChild('listener');
  quota = listenerChild('quota');
  refuser = listenerChild('refuser');
  warm = listenerChild('warm');
  gw = await startGateway({
    dir,
    gateway: { disconnect_grace_ms: 0 },
    servers: [
      { name: 'listener', path: '/mcp', command: listener.command, extra: POOLED },
      { name: 'quota', path: '/quota', command: quota.command, extra: `${POOLED}\nera = stateless\nmax_listen_uris_per_principal = 2` },
      { name: 'stateless', path: '/stateless', command: `${node} ${STATELESS_JS}`, extra: POOLED },
      { name: 'refuser', path: '/refuser', command: refuser.command, env: 'LISTEN_REFUSE=1', extra: POOLED },
      { name: 'warm', path: '/warm', command: warm.command, extra: `${POOLED}\nera = stateless\npool_warm_children = 1` },
    ],
  });
});

after(async () => {
  if (gw) await gw.stop();
});

const msgs = (r) => r.events().map((e) => e.json).filter(Boolean);
const answerOf = (r) => msgs(r).find((j) => 'result' in j || 'error' in j);

/** A raw pooled session at p: its url, id, initialize result and a call helper. */
async function session(p) {
  const url = `${gw.base}${p}`;
  const { sid, version, result } = await initSession(gw, { url, version: '2025-11-25' });
  assert.ok(sid.startsWith('~'), 'a pooled (sealed) session id');
  const headers = { 'MCP-Protocol-Version': version };
  const call = async (method, params) => {
    const r = await post(gw, rpc(method, params), { url, sid, headers });
    await r.done(scaled(10000));
    return answerOf(r);
  };
  return { url, sid, result, headers, call };
}

/** The child's log of listens: [{kind, pid, id, what}]. */
function listens(log) {
  const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
  return text.split('\n').filter(Boolean).map((l) => {
    const [kind, pid, id, what, meta, who] = l.split(' ');
    return { kind, pid: Number(pid), id: JSON.parse(id), what: what ? JSON.parse(what) : null, meta: meta ? JSON.parse(meta) : null, who };
  });
}
/** The listen open at the child now (the last LISTEN not ENDed since), or undefined. */
function openListen(log) {
  const all = listens(log);
  const ended = new Set(all.filter((x) => x.kind === 'END').map((x) => `${x.pid} ${x.id}`));
  return all.filter((x) => x.kind === 'LISTEN' && !ended.has(`${x.pid} ${x.id}`)).at(-1);
}
const urisOf = (l) => [...(l?.what?.resourceSubscriptions ?? [])].sort();

const updates = (g) => msgs(g).filter((j) => j.method === 'notifications/resources/updated');
const changes = (g) => msgs(g).filter((j) => j.method === 'notifications/tools/list_changed');

test('resources/subscribe and list changes of pooled sessions: one listen at the stateless child, each update to its own sessions', async () => {
  const a = await session('/mcp');
  const b = await session('/mcp');
  const ga = await get(gw, { url: a.url, sid: a.sid, headers: a.headers });
  const gb = await get(gw, { url: b.url, sid: b.sid, headers: b.headers });
  assert.equal(ga.status, 200);
  assert.equal(gb.status, 200);
  // Served by the gateway (it was -32601 for a pooled session of a stateless-only child).
  const first = await a.call('resources/subscribe', { uri: 'test://x' });
  assert.deepEqual(first, { jsonrpc: '2.0', id: first.id, result: {} });
  assert.deepEqual((await b.call('resources/subscribe', { uri: 'test://y' })).result, {});
  // The initialize result declares what the children declared, which the gateway listens for.
  assert.deepEqual(a.result.capabilities.tools, { listChanged: true });
  assert.equal(a.result.capabilities.resources.subscribe, true);
  await waitFor(() => urisOf(openListen(listener.log)).join() === 'test://x,test://y', scaled(10000), 'one listen naming both URIs');
  const open = openListen(listener.log);
  assert.match(open.id, /^mcpgw-listen-\d+$/, "the gateway's own id");
  assert.equal(open.what.toolsListChanged, true, 'the list changes the child declared');
  assert.equal(open.meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28', 'the stateless envelope');
  // An update of x reaches a alone, of y b alone, as the legacy notification (no subscriptionId).
  assert.equal((await a.call('tools/call', { name: 'touch', arguments: { uri: 'test://x' } })).result.content[0].text, '1');
  await waitFor(() => updates(ga).length === 1, scaled(10000), "a's update");
  assert.equal((await b.call('tools/call', { name: 'touch', arguments: { uri: 'test://y' } })).result.content[0].text, '1');
  await waitFor(() => updates(gb).length === 1, scaled(10000), "b's update");
  assert.deepEqual(updates(ga), [{ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://x' } }]);
  assert.deepEqual(updates(gb), [{ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://y' } }]);
  // A list change reaches both sessions' GET streams, as the legacy notification.
  assert.equal((await a.call('tools/call', { name: 'change', arguments: {} })).result.content[0].text, '1');
  await waitFor(() => changes(ga).length === 1 && changes(gb).length === 1, scaled(10000), 'the list change on both GET streams');
  assert.deepEqual(changes(ga)[0], { jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  assert.ok(!ga.text().includes('subscriptionId') && !gb.text().includes('subscriptionId'), "the gateway's subscription id stays at the gateway");
  // A second session naming x adds nothing; the last one to give x back re-opens the listen without it.
  const before = openListen(listener.log).id;
  assert.deepEqual((await b.call('resources/subscribe', { uri: 'test://x' })).result, {});
  assert.deepEqual((await a.call('resources/unsubscribe', { uri: 'test://x' })).result, {});
  assert.equal(openListen(listener.log).id, before, 'x is still named (b): the listen stays');
  assert.deepEqual((await b.call('resources/unsubscribe', { uri: 'test://x' })).result, {});
  await waitFor(() => urisOf(openListen(listener.log)).join() === 'test://y', scaled(10000), 'a listen without x');
  assert.ok(listens(listener.log).some((x) => x.kind === 'END' && x.id === before), 'the old listen was ended at the child');
  assert.equal((await a.call('tools/call', { name: 'touch', arguments: { uri: 'test://x' } })).result.content[0].text, '0', 'no listen names x');
  assert.equal(updates(ga).length, 1);
  // The child ends (killed): the listen is opened at the next child, and updates flow again.
  const pid = openListen(listener.log).pid;
  process.kill(pid, 'SIGKILL');
  await waitFor(() => (openListen(listener.log)?.pid ?? pid) !== pid, scaled(15000), 'a listen at the next child');
  assert.deepEqual(urisOf(openListen(listener.log)), ['test://y']);
  assert.equal((await a.call('tools/call', { name: 'touch', arguments: { uri: 'test://y' } })).result.content[0].text, '1');
  await waitFor(() => updates(gb).length === 2, scaled(10000), "b's update from the new child");
  assert.equal(updates(ga).length, 1, 'a subscribed no y');
  // The session's end gives its URIs back: the listen goes on with the list changes alone.
  const last = openListen(listener.log).id;
  const gone = await del(gw, { url: b.url, sid: b.sid, headers: b.headers });
  await gone.done(scaled(5000));
  await waitFor(() => openListen(listener.log)?.id !== last && urisOf(openListen(listener.log)).length === 0, scaled(10000), 'a listen without URIs');
  ga.drop();
  gb.drop();
});

test('resources/subscribe is bounded per session (256) and by max_listen_uris_per_principal; refused where the children declare no subscribe', async () => {
  const q = await session('/quota');
  assert.equal(q.result.capabilities.resources.subscribe, true);
  assert.deepEqual((await q.call('resources/subscribe', { uri: 'test://1' })).result, {});
  assert.deepEqual((await q.call('resources/subscribe', { uri: 'test://2' })).result, {});
  const over = await q.call('resources/subscribe', { uri: 'test://3' });
  assert.equal(over.error?.code, -32602, JSON.stringify(over));
  assert.match(over.error.message, /max_listen_uris_per_principal/);
  await waitFor(() => urisOf(openListen(quota.log)).join() === 'test://1,test://2', scaled(10000), 'the quota pool listens for both');
  const bad = await q.call('resources/subscribe', { uri: 7 });
  assert.equal(bad.error?.code, -32602, JSON.stringify(bad));
  // 256 a session, whatever the principal's quota (1024 by default).
  const s = await session('/mcp');
  for (let i = 0; i < 256; i++) assert.deepEqual((await s.call('resources/subscribe', { uri: `test://many/${i}` })).result, {}, `subscription ${i}`);
  const more = await s.call('resources/subscribe', { uri: 'test://many/256' });
  assert.equal(more.error?.code, -32602, JSON.stringify(more));
  assert.match(more.error.message, /at most 256 a session/);
  await waitFor(() => urisOf(openListen(listener.log)).length === 256, scaled(20000), 'one listen naming the 256 URIs');
  const gone = await del(gw, { url: s.url, sid: s.sid, headers: s.headers });
  await gone.done(scaled(5000));
  await waitFor(() => urisOf(openListen(listener.log)).length === 0, scaled(10000), 'its URIs given back');
  // The stateless fixture declares no resources.subscribe: the initialize says so, subscribe is refused.
  const f = await session('/stateless');
  assert.deepEqual(f.result.capabilities.tools, { listChanged: true }, 'its list changes are listened for');
  assert.equal(f.result.capabilities.resources?.subscribe, undefined);
  const no = await f.call('resources/subscribe', { uri: 'test://static-text' });
  assert.equal(no.error?.code, -32601, JSON.stringify(no));
  assert.match(no.error.message, /do not declare resources\.subscribe/);
});

test('a list change of the stateless fixture (the v2 SDK) reaches a pooled session through the listen', async () => {
  const s = await session('/stateless');
  const g = await get(gw, { url: s.url, sid: s.sid, headers: s.headers });
  assert.equal(g.status, 200);
  await gw.waitLog(/session=pool:stateless#\d+ the gateway's subscriptions\/listen acknowledged/, scaled(10000));
  const r = await s.call('tools/call', { name: 'test_trigger_tool_change', arguments: {} });
  assert.match(JSON.stringify(r.result), /test_toggled_tool/);
  await waitFor(() => changes(g).length >= 1, scaled(10000), 'notifications/tools/list_changed');
  assert.deepEqual(changes(g)[0], { jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  g.drop();
});

test('a child that refuses the listen: logged, asked again after a backoff, never in a loop; sessions go on', async () => {
  const s = await session('/refuser');
  const refusals = () => (gw.logs().match(/session=pool:refuser#\d+ the child refused the gateway's subscriptions\/listen/g) ?? []).length;
  const asked = () => listens(refuser.log).filter((x) => x.kind === 'LISTEN').length;
  // The listen of the list changes alone, opened once the children's discover was read, refused
  // first (its answer may come after the session's initialize: the child reads it after).
  await waitFor(() => refusals() >= 1, scaled(10000), 'the first listen refused');
  const [r0, a0] = [refusals(), asked()];
  const t0 = Date.now();
  // The change opens it again at once; every other time is the sweep's, after a backoff that
  // doubles from 0.5 s with each refusal: of the next three at most two are spaced by less than
  // 2 s (at least 1 s and 2 s otherwise). A loop would have asked thousands of times meanwhile.
  assert.deepEqual((await s.call('resources/subscribe', { uri: 'test://r' })).result, {});
  await waitFor(() => refusals() >= r0 + 3, scaled(20000), 'the listen asked again after its backoff');
  assert.ok(Date.now() - t0 >= 1400, `the backoff spaced the retries: ${Date.now() - t0} ms`);
  assert.ok(asked() <= a0 + 4, `the child was asked ${asked() - a0} times`);
  assert.deepEqual(listens(refuser.log).at(-1).what.resourceSubscriptions, ['test://r'], 'each time with the URI');
  assert.equal((await s.call('tools/call', { name: 'pid', arguments: {} })).result.content[0].text.length > 0, true, 'the session goes on');
});

test('per-principal credentials: each principal\'s pool holds its own listen; nothing crosses; the operator\'s restart ends the old listens and opens new ones', async () => {
  const ADMIN = 'pooled-modern-listen-admin-0123456789abcdef';
  const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
  const bearer = (who) => ({ Authorization: `Bearer ${TOKENS[who]}` });
  const pdir = tmpdir('mcpgw-pmlisten-p-');
  const tf = path.join(pdir, 'tokens');
  fs.writeFileSync(tf, Object.entries(TOKENS).map(([n, t]) => `sha256:${crypto.createHash('sha256').update(t).digest('hex')} ${n}\n`).join(''), { mode: 0o600 });
  const creds = path.join(pdir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  for (const n of Object.keys(TOKENS)) fs.writeFileSync(path.join(creds, `${n}.env`), `WHO=${n}\n`, { mode: 0o600 });
  const child = listenerChild('principals');
  const pgw = await startGateway({
    dir: pdir,
    gateway: { admin_token: ADMIN, disconnect_grace_ms: 0 },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf },
    servers: [{ name: 'principals', path: '/mcp', command: child.command, extra: `session_mode = pooled\ncredentials_dir = ${creds}\npool_max_children = 4` }],
  });
  try {
    const open = async (who) => {
      const { sid, version, result } = await initSession(pgw, { headers: bearer(who), version: '2025-11-25' });
      const headers = { ...bearer(who), 'MCP-Protocol-Version': version };
      const call = async (method, params) => {
        const r = await post(pgw, rpc(method, params), { sid, headers });
        await r.done(scaled(10000));
        return answerOf(r);
      };
      const g = await get(pgw, { sid, headers });
      assert.equal(g.status, 200);
      return { sid, result, headers, call, g };
    };
    const a = await open('alice');
    const b = await open('bob');
    assert.equal(a.result.capabilities.resources.subscribe, true);
    assert.deepEqual((await a.call('resources/subscribe', { uri: 'test://p' })).result, {});
    assert.deepEqual((await b.call('resources/subscribe', { uri: 'test://p' })).result, {});
    const alicePid = Number((await a.call('tools/call', { name: 'pid', arguments: {} })).result.content[0].text);
    const bobPid = Number((await b.call('tools/call', { name: 'pid', arguments: {} })).result.content[0].text);
    assert.notEqual(alicePid, bobPid, 'each principal has a child of its own');
    const openAt = (pid) => listens(child.log).filter((x) => x.kind === 'LISTEN' && x.pid === pid).at(-1);
    await waitFor(() => urisOf(openAt(alicePid)).join() === 'test://p' && urisOf(openAt(bobPid)).join() === 'test://p', scaled(10000), 'a listen at each principal\'s child');
    assert.equal(openAt(alicePid).who, 'alice');
    assert.equal(openAt(bobPid).who, 'bob');
    // alice's child reports an update and a list change: only alice's session hears them.
    assert.equal((await a.call('tools/call', { name: 'touch', arguments: { uri: 'test://p' } })).result.content[0].text, '1');
    assert.equal((await a.call('tools/call', { name: 'change', arguments: {} })).result.content[0].text, '1');
    await waitFor(() => updates(a.g).length === 1 && changes(a.g).length === 1, scaled(10000), "alice's update and list change");
    assert.equal((await b.call('tools/call', { name: 'touch', arguments: { uri: 'test://p' } })).result.content[0].text, '1');
    await waitFor(() => updates(b.g).length === 1, scaled(10000), "bob's update");
    assert.equal(changes(b.g).length, 0, "alice's list change did not reach bob");
    assert.equal(updates(a.g).length, 1, "bob's update did not reach alice");
    // The operator's restart retires the pools: their listens end at the old children, and new
    // ones name the sessions' URIs at each principal's next child.
    const r = await request(`${pgw.base}/admin/servers/principals/restart`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN}` } });
    await r.done(scaled(5000));
    assert.equal(r.status, 200, r.text());
    const ended = () => new Set(listens(child.log).filter((x) => x.kind === 'END').map((x) => x.pid));
    await waitFor(() => ended().has(alicePid) && ended().has(bobPid), scaled(10000), 'the old listens ended at the old children');
    const alice2 = Number((await a.call('tools/call', { name: 'pid', arguments: {} })).result.content[0].text);
    const bob2 = Number((await b.call('tools/call', { name: 'pid', arguments: {} })).result.content[0].text);
    assert.ok(alice2 !== alicePid && bob2 !== bobPid, 'new children');
    await waitFor(() => urisOf(openAt(alice2)).join() === 'test://p' && urisOf(openAt(bob2)).join() === 'test://p', scaled(15000), 'new listens at the new children');
    assert.equal(openAt(alice2).who, 'alice');
    assert.equal((await b.call('tools/call', { name: 'touch', arguments: { uri: 'test://p' } })).result.content[0].text, '1');
    await waitFor(() => updates(b.g).length === 2, scaled(10000), "bob's update from his new child");
    assert.equal(updates(a.g).length, 1, 'nothing of bob\'s reached alice');
    a.g.drop();
    b.g.drop();
  } finally {
    await pgw.stop();
  }
});

test('era = stateless (no probe): the gateway asks a child\'s server/discover itself, so the listen opens before any session\'s initialize at this instance', async () => {
  // A session sealed at another instance subscribes here without an initialize here: what the
  // children declare must not wait for one.
  await waitFor(() => openListen(warm.log)?.what?.toolsListChanged === true, scaled(10000), 'the listen of a warm child, no session yet');
  assert.ok(!/session=sealed:\S+ pooled session created: server=warm/.test(gw.logs()), 'no session of that server yet');
  assert.match(gw.logs(), /session=pool:warm#\d+ server\/discover of the gateway's sent/);
  const s = await session('/warm');
  assert.deepEqual(s.result.capabilities.tools, { listChanged: true });
  assert.deepEqual((await s.call('resources/subscribe', { uri: 'test://w' })).result, {});
  await waitFor(() => urisOf(openListen(warm.log)).join() === 'test://w', scaled(10000), 'the URI named');
});
