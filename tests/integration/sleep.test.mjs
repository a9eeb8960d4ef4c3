// SPDX-License-Identifier: MIT
// Sleeping children (child_sleep_after_s): a quiet session's child is stopped and the session
// stays; its next request starts the child again, replays the session's own initialize and
// notifications/initialized, and is answered as if nothing happened. Requests that come while it
// wakes wait in order; a cancel of one removes it; DELETE during a wake ends it; a woken child
// that fails, stays silent past request_timeout_ms, or negotiates another version ends the session
// with an error and a log line. Sessions with state a new child would not have, or an open stream,
// never sleep. Every wait polls /admin/inflight, /metrics or the log with a deadline.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  EXAMPLE, callTool, del, get, initSession, metricSamples, post, reaped, request, rpc, startGateway,
  stopAfter, tmpdir, waitFor,
} from '../lib/gw.mjs';
import { fdTargets } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const TOKEN = 'sleep-admin-token-0123456789abcdef';

async function admin(gw) {
  const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return JSON.parse(text);
}
async function view(gw, sid) {
  return (await admin(gw)).sessions.find((s) => s.id === sid);
}
async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
  const text = await r.done(scaled(5000));
  assert.equal(r.status, 200, text);
  return metricSamples(text);
}
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
/** The pids the session's woken children were started as, from the log. */
const wakePids = (gw, sid) => [...gw.logs().matchAll(new RegExp(`session=${esc(sid)} child wakes: started as (\\d+)`, 'g'))].map((m) => Number(m[1]));
/**
 * The same once the log (read through a pipe, so behind the HTTP answers) names at least n of
 * them.
 */
const woken = (gw, sid, n = 1) => waitFor(() => (wakePids(gw, sid).length >= n ? wakePids(gw, sid) : null), scaled(5000), `${n} wake(s) in the log`);
const logged = (gw, re) => gw.waitLog(re, scaled(5000));
/** The pid the session's first child was started as, from the log. */
const createdPid = async (gw, sid) => Number((await logged(gw, new RegExp(`session=${esc(sid)} session created: server=\\S+ child=(\\d+)`)))[1]);
/**
 * Waits until the session's n-th child (--hold-init) holds its initialize: its SIGUSR1 handler is
 * in place (a SIGUSR1 before it would end the child).
 */
const holding = (gw, sid, n) => waitFor(() => [...gw.logs().matchAll(new RegExp(`session=${esc(sid)} child stderr: mcp-example-server: holding the initialize answer`, 'g'))].length >= n, scaled(10000), `child ${n} holding its initialize`);
/** initSession, with the child's pid waited for in the log. */
async function init(gw, opts) {
  const s = await initSession(gw, opts);
  return { ...s, pid: await createdPid(gw, s.sid) };
}
/** Waits until the session's child sleeps: the admin view says so and the old child is reaped. */
async function asleep(gw, sid, pid) {
  await waitFor(async () => (await view(gw, sid))?.child === 'asleep', scaled(10000), 'the child to sleep');
  await waitFor(() => reaped(pid), scaled(10000), `child ${pid} reaped`);
}
const initializes = (gw) => gw.childMessages().filter((m) => m.method === 'initialize');

function gateway(extra, opts = {}) {
  return startGateway({
    gateway: { admin_token: TOKEN, ...(opts.gateway ?? {}) },
    servers: [{ name: 'example', path: '/mcp', ...(opts.server ?? {}), extra: ['child_sleep_after_s = 1', ...extra].join('\n') }],
    ...(opts.dir ? { dir: opts.dir } : {}),
  });
}

/** A POSTed request, resolved once the gateway took it (the response's headers came). */
async function send(gw, sid, id, method, params) {
  const r = await post(gw, rpc(method, params, id), { sid });
  assert.equal(r.status, 200, `${id}: HTTP ${r.status}`);
  return r;
}
const answerOf = (r, id) => r.events().map((e) => e.json).find((j) => j && j.id === id && ('result' in j || 'error' in j));

test('a quiet child sleeps (its process and descriptors gone, the session kept); the next tools/call wakes it transparently, the child seeing the client\'s own initialize again', async () => {
  const gw = await gateway([]);
  await stopAfter(gw, async () => {
    const { sid, pid } = await init(gw, { version: '2025-06-18' });
    // The child's pipes (its stdin, stdout and stderr: the gateway holds their other ends) and its
    // pidfd, open in the gateway while it runs.
    const childFds = [0, 1, 2].map((fd) => fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
    assert.ok(childFds.every((t) => t.startsWith('pipe:')), JSON.stringify(childFds));
    assert.ok(childFds.every((t) => fdTargets(gw.proc.pid).includes(t)), 'the gateway holds the child\'s pipes');
    assert.ok(fdTargets(gw.proc.pid).includes('anon_inode:[pidfd]'));
    assert.ok(pid > 0);
    const first = await callTool(gw, sid, 'echo', { text: 'before' });
    assert.equal(first.response.result.content[0].text, 'before');
    await asleep(gw, sid, pid);
    const v = await view(gw, sid);
    assert.equal(v.child_pid, 0);
    assert.equal(v.state, 'ready');
    // A sleeping session holds no descriptor of a child: its pipes and its pidfd are closed.
    await waitFor(() => {
      const now = fdTargets(gw.proc.pid);
      return !childFds.some((t) => now.includes(t)) && !now.includes('anon_inode:[pidfd]');
    }, scaled(5000), `the child's descriptors ${childFds} closed`);
    let m = await metrics(gw);
    assert.equal(m['mcpgw_child_sleeps_total{server="example"}'], 1);
    assert.equal(m['mcpgw_sessions_asleep{server="example"}'], 1);
    assert.equal(m['mcpgw_sessions_open{server="example"}'], 1);
    await logged(gw, new RegExp(`session=${esc(sid)} child ${pid} sleeps: quiet for \\d+ s`));

    const after = await callTool(gw, sid, 'echo', { text: 'after' });
    assert.equal(after.r.status, 200);
    assert.equal(after.response.result.content[0].text, 'after', JSON.stringify(after.events));
    const [wpid] = await woken(gw, sid);
    assert.ok(wpid > 0 && wpid !== pid);
    assert.equal((await view(gw, sid)).child, 'running');
    assert.equal((await view(gw, sid)).child_pid, wpid);
    // The child saw the client's own initialize twice (the second with the gateway's id), then
    // notifications/initialized, then the call.
    const msgs = gw.childMessages();
    const inits = msgs.filter((x) => x.method === 'initialize');
    assert.equal(inits.length, 2);
    assert.deepEqual(inits[1].params, inits[0].params);
    assert.notEqual(inits[1].id, inits[0].id);
    const i = msgs.indexOf(inits[1]);
    assert.equal(msgs[i + 1].method, 'notifications/initialized');
    assert.equal(msgs[i + 2].method, 'tools/call');
    assert.equal(msgs[i + 2].params.arguments.text, 'after');
    await logged(gw, new RegExp(`session=${esc(sid)} child woke in [0-9.]+ ms: initialize replayed, 1 waiting line\\(s\\) sent`));
    m = await metrics(gw);
    assert.equal(m['mcpgw_child_wakes_total{server="example"}'], 1);
    assert.equal(m['mcpgw_child_wake_duration_seconds_count{server="example"}'], 1);
    assert.ok(m['mcpgw_child_wake_duration_seconds_sum{server="example"}'] > 0);
    assert.equal(m['mcpgw_sessions_asleep{server="example"}'], 0);
    assert.equal(m['mcpgw_child_wake_failures_total{server="example"}'], 0);
    // It sleeps again, and wakes again.
    await asleep(gw, sid, wpid);
    const third = await callTool(gw, sid, 'echo', { text: 'again' });
    assert.equal(third.response.result.content[0].text, 'again');
    assert.equal(initializes(gw).length, 3);
    // DELETE of a sleeping session: 200, no child to stop.
    await asleep(gw, sid, (await woken(gw, sid, 2))[1]);
    const d = await del(gw, { sid });
    await d.done();
    assert.equal(d.status, 200);
    const gone = await post(gw, rpc('ping'), { sid });
    await gone.done();
    assert.equal(gone.status, 404);
  });
});

test('requests that arrive while the child wakes wait and are sent in order; a cancel of a waiting one removes it; the wake is bounded by request_timeout_ms', async () => {
  const gw = await gateway(['request_timeout_ms = 60000'], { server: { args: ['--hold-init'] } });
  await stopAfter(gw, async () => {
    const r0 = await post(gw, rpc('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const sid = r0.headers['mcp-session-id'];
    const pid = await createdPid(gw, sid);
    await holding(gw, sid, 1);
    process.kill(pid, 'SIGUSR1'); // releases the first initialize
    await r0.done(scaled(10000));
    assert.equal(answerOf(r0, 'init').result.protocolVersion, '2025-11-25');
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid });
    await n.done();
    await asleep(gw, sid, pid);

    // The woken child holds the replayed initialize until SIGUSR1: the wake is under way.
    const a = await send(gw, sid, 'a', 'tools/call', { name: 'echo', arguments: { text: 'A' } });
    const [wpid] = await woken(gw, sid);
    assert.equal((await view(gw, sid)).child, 'waking');
    const b = await send(gw, sid, 'b', 'tools/call', { name: 'echo', arguments: { text: 'B' } });
    const c = await send(gw, sid, 'c', 'tools/call', { name: 'echo', arguments: { text: 'C' } });
    const cancel = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'b', reason: 'changed my mind' } }, { sid });
    await cancel.done();
    assert.equal(cancel.status, 202);
    await b.done(scaled(5000)); // the cancelled request's stream ends without an answer
    assert.equal(answerOf(b, 'b'), undefined);
    const held = await view(gw, sid);
    assert.deepEqual(held.inflight.filter((p) => p.state === 'forwarded').map((p) => p.method).sort(), ['initialize', 'tools/call', 'tools/call']);
    // Nothing but the replayed initialize reached the child yet.
    await waitFor(() => initializes(gw).length === 2, scaled(5000), 'the replayed initialize');
    assert.equal(gw.childMessages().at(-1).method, 'initialize');
    await holding(gw, sid, 2);
    process.kill(wpid, 'SIGUSR1');
    await a.done(scaled(10000));
    await c.done(scaled(10000));
    assert.equal(answerOf(a, 'a').result.content[0].text, 'A');
    assert.equal(answerOf(c, 'c').result.content[0].text, 'C');
    const msgs = gw.childMessages();
    const tail = msgs.slice(msgs.findLastIndex((x) => x.method === 'initialize'));
    assert.deepEqual(tail.map((m) => m.method ?? 'answer'), ['initialize', 'notifications/initialized', 'tools/call', 'tools/call']);
    assert.deepEqual(tail.slice(2).map((m) => m.params.arguments.text), ['A', 'C']);
    await logged(gw, new RegExp(`session=${esc(sid)} child woke in [0-9.]+ ms: initialize replayed, 2 waiting line\\(s\\) sent, 1 dropped`));
  });
});

test('the replayed initialize of a waking child is the gateway\'s: it does not count toward max_inflight_per_session', async () => {
  const gw = await gateway([], { server: { args: ['--hold-init'] }, gateway: { max_inflight_per_session: 2 } });
  await stopAfter(gw, async () => {
    const r0 = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const sid = r0.headers['mcp-session-id'];
    const pid = await createdPid(gw, sid);
    await holding(gw, sid, 1);
    process.kill(pid, 'SIGUSR1');
    await r0.done(scaled(10000));
    await asleep(gw, sid, pid);
    // Two requests of the client's own while the woken child holds the replayed initialize: both
    // are taken (the limit is 2); a third is one too many.
    const a = await send(gw, sid, 'a', 'tools/call', { name: 'echo', arguments: { text: 'A' } });
    const [wpid] = await woken(gw, sid);
    const b = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'B' } }, 'b'), { sid });
    assert.equal(b.status, 200, `the second request during the wake: HTTP ${b.status} ${await (b.status === 200 ? '' : b.done())}`);
    const c = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'C' } }, 'c'), { sid });
    await c.done(scaled(5000));
    assert.equal(c.status, 429, c.text());
    await holding(gw, sid, 2);
    process.kill(wpid, 'SIGUSR1');
    await a.done(scaled(10000));
    await b.done(scaled(10000));
    assert.equal(answerOf(a, 'a').result.content[0].text, 'A');
    assert.equal(answerOf(b, 'b').result.content[0].text, 'B');
  });
});

test('the lines that wait for a waking child are bounded by stdin_queue_bytes: past it a request gets 503 and the session goes on', async () => {
  const gw = await gateway([], { server: { args: ['--hold-init'] }, gateway: { stdin_queue_bytes: 65536, max_body_bytes: 64512 } });
  await stopAfter(gw, async () => {
    const r0 = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const sid = r0.headers['mcp-session-id'];
    const pid = await createdPid(gw, sid);
    await holding(gw, sid, 1);
    process.kill(pid, 'SIGUSR1');
    await r0.done(scaled(10000));
    await asleep(gw, sid, pid);
    const big = 'x'.repeat(40000);
    const a = await send(gw, sid, 'a', 'tools/call', { name: 'echo', arguments: { text: big } });
    const [wpid] = await woken(gw, sid);
    const b = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: big } }, 'b'), { sid });
    await b.done(scaled(5000));
    assert.equal(b.status, 503, b.text());
    await holding(gw, sid, 2);
    process.kill(wpid, 'SIGUSR1');
    await a.done(scaled(10000));
    assert.equal(answerOf(a, 'a').result.content[0].text, big);
    const c = await callTool(gw, sid, 'echo', { text: 'after' });
    assert.equal(c.response.result.content[0].text, 'after');
  });
});

test('DELETE while the child wakes ends the session: the waiting request gets an error, the woken child is stopped', async () => {
  const gw = await gateway([], { server: { args: ['--hold-init'] } });
  await stopAfter(gw, async () => {
    const r0 = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const sid = r0.headers['mcp-session-id'];
    const pid = await createdPid(gw, sid);
    await holding(gw, sid, 1);
    process.kill(pid, 'SIGUSR1');
    await r0.done(scaled(10000));
    await asleep(gw, sid, pid);
    const a = await send(gw, sid, 'a', 'tools/call', { name: 'echo', arguments: { text: 'A' } });
    const [wpid] = await woken(gw, sid);
    const d = await del(gw, { sid });
    await d.done();
    assert.equal(d.status, 200);
    await a.done(scaled(5000));
    assert.match(answerOf(a, 'a').error.message, /session ended: session deleted/);
    await waitFor(() => reaped(wpid), scaled(10000), 'the woken child stopped');
    const m = await metrics(gw);
    assert.equal(m['mcpgw_child_wake_failures_total{server="example"}'], 0);
    assert.equal(m['mcpgw_sessions_closed_total{server="example",reason="deleted"}'], 1);
    assert.equal(initializes(gw).length, 2, 'the replayed initialize reached the woken child');
    assert.ok(!gw.childMessages().some((x) => x.method === 'tools/call'), 'the waiting call never reached a child');
  });
});

test('a woken child that never answers initialize: the wake ends at request_timeout_ms, the session with it', async () => {
  const gw = await gateway(['request_timeout_ms = 1500'], { server: { args: ['--hold-init'] } });
  await stopAfter(gw, async () => {
    const r0 = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const sid = r0.headers['mcp-session-id'];
    const pid = await createdPid(gw, sid);
    await holding(gw, sid, 1);
    process.kill(pid, 'SIGUSR1');
    await r0.done(scaled(10000));
    await asleep(gw, sid, pid);
    const t0 = Date.now();
    const a = await send(gw, sid, 'a', 'tools/call', { name: 'echo', arguments: { text: 'A' } });
    await a.done(scaled(15000));
    assert.ok(Date.now() - t0 >= 1400, `the wake waited ${Date.now() - t0} ms`);
    assert.match(answerOf(a, 'a').error.message, /the woken child did not answer initialize in time/);
    await logged(gw, new RegExp(`session=${esc(sid)} session closed: the woken child did not answer initialize in time`));
    const m = await metrics(gw);
    assert.equal(m['mcpgw_child_wake_failures_total{server="example"}'], 1);
    assert.equal(m['mcpgw_sessions_open{server="example"}'], 0);
    const gone = await post(gw, rpc('ping'), { sid });
    await gone.done();
    assert.equal(gone.status, 404);
  });
});

/** A command that runs the example server, or (once `marker` exists) what `then` says. */
function wrapper(dir, then) {
  const script = path.join(dir, 'child.sh');
  const log = path.join(dir, 'child.log');
  fs.writeFileSync(script, `#!/bin/sh\nif [ -e ${dir}/marker ]; then ${then}; fi\nexec ${EXAMPLE} --log ${log}\n`, { mode: 0o755 });
  return script;
}

for (const [what, then, why, failure] of [
  ['exits before it answers', 'exit 3', /upstream ended/, /session closed: /],
  ['answers the replayed initialize with another protocol version', `exec ${EXAMPLE} --protocol-version 2025-03-26`, /the woken child negotiated another protocol version than the session's \(session 2025-06-18, child 2025-03-26\)/, /session closed: the woken child negotiated another protocol version/],
]) {
  test(`a woken child that ${what}: the session ends cleanly, the waiting request gets an error, a log line says why`, async () => {
    const dir = tmpdir('mcpgw-sleep-');
    const gw = await gateway([], { dir, server: { command: wrapper(dir, then) } });
    await stopAfter(gw, async () => {
      const { sid, pid } = await init(gw, { version: '2025-06-18' });
      await asleep(gw, sid, pid);
      fs.writeFileSync(path.join(dir, 'marker'), '');
      const { r, response } = await callTool(gw, sid, 'echo', { text: 'A' });
      assert.equal(r.status, 200);
      assert.match(response.error.message, /^session ended: /);
      await logged(gw, why);
      await logged(gw, failure);
      const m = await metrics(gw);
      assert.equal(m['mcpgw_child_wake_failures_total{server="example"}'], 1);
      assert.equal(m['mcpgw_child_wakes_total{server="example"}'], 0);
      const gone = await post(gw, rpc('ping'), { sid });
      await gone.done();
      assert.equal(gone.status, 404);
      for (const p of await woken(gw, sid)) await waitFor(() => reaped(p), scaled(10000), `woken child ${p} reaped`);
    });
  });
}

test('never asleep: a session that set a log level or subscribed, or with a GET stream open; a GET alone does not wake a sleeping one', async () => {
  const gw = await gateway([]);
  await stopAfter(gw, async () => {
    const level = await init(gw);
    const lr = await post(gw, rpc('logging/setLevel', { level: 'debug' }), { sid: level.sid });
    await lr.done();
    const sub = await init(gw);
    const sr = await post(gw, rpc('resources/subscribe', { uri: 'example://static' }), { sid: sub.sid });
    await sr.done();
    const streaming = await init(gw);
    const g = await get(gw, { sid: streaming.sid });
    assert.equal(g.status, 200);
    // The control session became quiet last: once it sleeps, the others have been quiet longer.
    const control = await init(gw);
    await asleep(gw, control.sid, control.pid);
    for (const s of [level, sub, streaming]) assert.equal((await view(gw, s.sid)).child, 'running', s.sid);
    g.drop();
    // A GET on the sleeping session is served and does not wake it.
    const g2 = await get(gw, { sid: control.sid });
    assert.equal(g2.status, 200);
    assert.equal((await view(gw, control.sid)).child, 'asleep');
    assert.equal(wakePids(gw, control.sid).length, 0);
    g2.drop();
  });
});

test('sandbox = on: the woken child is boxed as the first one was', async () => {
  const dir = tmpdir('mcpgw-sleep-box-');
  fs.chmodSync(dir, 0o777);
  // A root gateway gives each boxed child a uid of its own: the woken one appends to the same log.
  fs.writeFileSync(path.join(dir, 'child.log'), '', { mode: 0o666 });
  fs.chmodSync(path.join(dir, 'child.log'), 0o666);
  const gw = await gateway(['sandbox = on', 'sandbox_network = none', `sandbox_writable_paths = ${dir}`, 'request_timeout_ms = 30000'], { dir });
  await stopAfter(gw, async () => {
    const { sid, pid } = await init(gw);
    const env0 = await callTool(gw, sid, 'env', { name: 'MCPGW_SESSION_LABEL' });
    await asleep(gw, sid, pid);
    const env1 = await callTool(gw, sid, 'env', { name: 'MCPGW_SESSION_LABEL' });
    assert.deepEqual(env1.response.result, env0.response.result);
    const [wpid] = await woken(gw, sid);
    // Its own PID namespace, as the first child's: pid 1 inside.
    const ns = (p) => fs.readlinkSync(`/proc/${p}/ns/pid`);
    assert.notEqual(ns(wpid), ns(process.pid));
    assert.match(fs.readFileSync(`/proc/${wpid}/status`, 'utf8'), /NSpid:\s+\d+\s+1\b/);
    assert.equal(initializes(gw).length, 2);
  });
});

test('credentials_dir: the woken child gets the credentials its session started with (a changed file is not read again), shown nowhere', async () => {
  const dir = tmpdir('mcpgw-sleep-creds-');
  const creds = path.join(dir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  const first = `first-${crypto.randomBytes(12).toString('hex')}`;
  const later = `later-${crypto.randomBytes(12).toString('hex')}`;
  fs.writeFileSync(path.join(creds, 'alice.env'), `FILE_TOKEN=${first}\n`, { mode: 0o600 });
  const token = crypto.randomBytes(24).toString('hex');
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `sha256:${crypto.createHash('sha256').update(token).digest('hex')} alice\n`, { mode: 0o600 });
  const headers = { Authorization: `Bearer ${token}` };
  const gw = await startGateway({
    dir,
    gateway: { admin_token: TOKEN },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokens },
    servers: [{ name: 'example', path: '/mcp', extra: ['child_sleep_after_s = 1', `credentials_dir = ${creds}`].join('\n') }],
  });
  const envOf = async (sid) => {
    const r = await post(gw, rpc('tools/call', { name: 'env', arguments: { name: 'FILE_TOKEN' } }), { sid, headers });
    await r.done(scaled(10000));
    return r.events().map((e) => e.json).find((j) => j && 'result' in j)?.result.content[0].text;
  };
  await stopAfter(gw, async () => {
    const { sid, pid } = await init(gw, { headers });
    assert.equal(await envOf(sid), first);
    await asleep(gw, sid, pid);
    fs.writeFileSync(path.join(creds, 'alice.env'), `FILE_TOKEN=${later}\n`, { mode: 0o600 });
    assert.equal(await envOf(sid), first, 'the woken child has the session\'s own credentials');
    assert.equal((await woken(gw, sid)).length, 1);
    const v = JSON.stringify(await admin(gw));
    const m = await request(`${gw.base}/metrics`, { method: 'GET', headers: { Authorization: `Bearer ${TOKEN}` } });
    const mt = await m.done();
    for (const x of [first, later]) {
      assert.ok(!gw.logs().includes(x), 'a credential in the log');
      assert.ok(!v.includes(x), 'a credential in /admin/inflight');
      assert.ok(!mt.includes(x), 'a credential in /metrics');
    }
  });
});

test('a session in front of a stateless-only child never sleeps (a wake would replay the initialize it refuses), while a legacy one beside it does', async () => {
  const STATELESS_JS = path.join(process.env.GW_SOURCE_ROOT ?? '', 'tests/fixtures/stateless_server.mjs');
  const gw = await startGateway({
    gateway: { admin_token: TOKEN },
    servers: [
      { name: 'stateless', path: '/stateless', command: `${process.execPath} ${STATELESS_JS}`, extra: 'child_sleep_after_s = 1' },
      { name: 'example', path: '/mcp', extra: 'child_sleep_after_s = 1' },
    ],
  });
  await stopAfter(gw, async () => {
    // The stateless session first: it is quiet at least as long as the legacy one, so the sweep
    // that puts the legacy child to sleep would have put it to sleep too.
    const url = `${gw.base}/stateless`;
    const st = await initSession(gw, { url });
    const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'hi' } }, 7), { sid: st.sid, url });
    await r.done(scaled(10000));
    assert.equal(answerOf(r, 7)?.result?.content?.[0]?.text, 'hi', r.text());
    const ex = await init(gw, { version: '2025-06-18', url: `${gw.base}/mcp` });
    await asleep(gw, ex.sid, ex.pid);
    const v = await view(gw, st.sid);
    assert.equal(v.child, 'running');
    assert.ok(v.child_pid > 0);
    const m = await metrics(gw);
    assert.equal(m['mcpgw_child_sleeps_total{server="stateless"}'] ?? 0, 0);
    const again = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'again' } }, 8), { sid: st.sid, url });
    await again.done(scaled(10000));
    assert.equal(answerOf(again, 8)?.result?.content?.[0]?.text, 'again', again.text());
  });
});
