// SPDX-License-Identifier: MIT
// Sealed pooled sessions across instances ([gateway] session_key_file, session_mode = pooled): two
// gateways given the same key file serve each other's sessions (the id carries what initialize
// fixed; an instance that never saw the session takes it up with fresh local state), a restart
// loses none, a rotation by SIGHUP keeps old sessions and a bad file on reload keeps the keys; a
// stolen id without its principal's token, a forged, cut or other key's id, and a DELETEd one
// answer 404; what cannot travel (a GET stream's resume) gets the spec's answer and the next GET
// works; logs, the access log and /admin name a sealed session by its label, never by its id.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { del, get, initSession, metricSamples, post, request, resume, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { haveNginx, withInstances } from '../lib/nginx.mjs';
import { scaled } from '../lib/timing.mjs';

const POOLED = 'session_mode = pooled';
const textOf = (j) => j?.result?.content?.[0]?.text;
const newKey = () => crypto.randomBytes(32).toString('hex');

function keyFile(dir, keys, name = 'session.keys') {
  const f = path.join(dir, name);
  fs.writeFileSync(f, `# session keys\n${keys.join('\n')}\n`, { mode: 0o600 });
  fs.chmodSync(f, 0o600);
  return f;
}

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
function tokensFile(dir) {
  const f = path.join(dir, 'tokens');
  const lines = Object.entries(TOKENS).map(([name, t]) => `sha256:${crypto.createHash('sha256').update(t).digest('hex')} ${name}`);
  fs.writeFileSync(f, `${lines.join('\n')}\n`, { mode: 0o600 });
  return f;
}
const bearer = (who) => ({ Authorization: `Bearer ${TOKENS[who]}` });

/** Two gateways on loopback with the same session key file (and token file). */
async function twoInstances(dir, keys, fn, { gateway = {} } = {}) {
  const kf = keyFile(dir, keys);
  const tf = tokensFile(dir);
  const opts = (i) => ({
    dir: fs.mkdtempSync(path.join(dir, `g${i}-`)),
    gateway: { session_key_file: kf, instance_id: `g${i}`, ...gateway },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf },
    servers: [{ name: 'example', path: '/mcp', extra: POOLED }],
  });
  const a = await startGateway(opts(1));
  let b;
  try {
    b = await startGateway(opts(2));
    await fn({ a, b, kf });
  } finally {
    await a.stop({ expect: null });
    if (b) await b.stop({ expect: null });
  }
}

async function echo(gw, sid, text, who = 'alice') {
  const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text } }), { sid, headers: bearer(who) });
  await r.done(10000);
  return { status: r.status, answer: r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j)), text: r.text() };
}

async function status(p) {
  const r = await p;
  await r.done();
  return r.status;
}

test('a sealed pooled session is served by either instance; a restart of both loses none; logs never hold the id', async () => {
  const dir = tmpdir();
  await twoInstances(dir, [newKey()], async ({ a, b }) => {
    const s = await initSession(a, { headers: bearer('alice'), capabilities: { sampling: {} } });
    assert.match(s.sid, /^~1[A-Za-z0-9_-]{150,254}$/, 'a sealed id, no instance prefix');
    const one = await echo(a, s.sid, 'on a');
    assert.equal(one.status, 200, one.text);
    assert.equal(textOf(one.answer), 'on a');
    // b never saw the session: it opens the id, checks the principal and the server, and serves it.
    const two = await echo(b, s.sid, 'on b');
    assert.equal(two.status, 200, two.text);
    assert.equal(textOf(two.answer), 'on b');
    await b.waitLog(/pooled session taken up here: server=example/);
    assert.ok(!/pooled session taken up here/.test(a.logs()), 'a made it: no record to take up');
    // Alternating requests each answered where they land.
    for (let i = 0; i < 6; i++) {
      const r = await echo(i % 2 ? a : b, s.sid, `turn ${i}`);
      assert.equal(textOf(r.answer), `turn ${i}`, r.text);
    }
    // Both instances show the session as pooled: /metrics and the access log's label.
    for (const gw of [a, b]) {
      const m = await request(`${gw.base}/metrics`, { method: 'GET' });
      const samples = metricSamples(await m.done());
      assert.equal(samples['mcpgw_sessions{server="example",mode="pooled"}'], 1, `${gw.base}: mcpgw_sessions{mode="pooled"}`);
      assert.match(gw.logs(), /session=sealed:[0-9a-f]{16} /, 'the access log names the session by its label');
      assert.ok(!gw.logs().includes(s.sid), 'no log line holds the sealed id');
      assert.ok(!gw.logs().includes(s.sid.slice(2, 40)), 'nor a piece of it');
    }
  });
});

test('restart: an instance that restarts with the same key file keeps serving the session', async () => {
  const dir = tmpdir();
  const kf = keyFile(dir, [newKey()]);
  const tf = tokensFile(dir);
  const opts = () => ({ dir: fs.mkdtempSync(path.join(dir, 'g-')), gateway: { session_key_file: kf }, auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf }, servers: [{ name: 'example', path: '/mcp', extra: POOLED }] });
  const a = await startGateway(opts());
  const s = await initSession(a, { headers: bearer('alice') });
  assert.equal(textOf((await echo(a, s.sid, 'before')).answer), 'before');
  await a.stop();
  const a2 = await startGateway(opts());
  try {
    const r = await echo(a2, s.sid, 'after');
    assert.equal(r.status, 200, r.text);
    assert.equal(textOf(r.answer), 'after');
  } finally {
    await a2.stop();
  }
});

test('another principal, another key, a forged, cut or DELETEd id: 404 as an unknown session', async () => {
  const dir = tmpdir();
  await twoInstances(dir, [newKey()], async ({ a, b }) => {
    const s = await initSession(a, { headers: bearer('alice') });
    // Stolen: bob's token with alice's id, on either instance.
    for (const gw of [a, b]) assert.equal((await echo(gw, s.sid, 'x', 'bob')).status, 404);
    // Forged (one character changed), cut, and an id of the same length under another key.
    const flip = s.sid.slice(0, 20) + (s.sid[20] === 'A' ? 'B' : 'A') + s.sid.slice(21);
    for (const bad of [flip, s.sid.slice(0, -4), s.sid.slice(0, 100), `~1${'A'.repeat(s.sid.length - 2)}`, '~', '~2abc']) {
      assert.equal((await echo(b, bad, 'x')).status, 404, `forged ${bad.length}`);
    }
    // GET, then a resume of a stream that lived on the other instance: 410 (nothing replays); a new GET works.
    const g = await get(b, { sid: s.sid, headers: bearer('alice') });
    assert.equal(g.status, 200);
    g.drop();
    const r = await resume(a, s.sid, '1_5', { headers: bearer('alice') });
    await r.done();
    assert.equal(r.status, 410, `resume on another instance: nothing of it replays: ${r.text()}`);
    const g2 = await get(a, { sid: s.sid, headers: bearer('alice') });
    assert.equal(g2.status, 200, 'the next GET works');
    g2.drop();
    // DELETE on b: b answers 404 from now on (a cannot know until the id expires).
    const d = await del(b, { sid: s.sid, headers: bearer('alice') });
    await d.done();
    assert.equal(d.status, 200);
    assert.equal((await echo(b, s.sid, 'after delete')).status, 404);
    // /admin/inflight is not configured here: the admin view is checked in the next test.
  });
});

test('SIGHUP: a rotation keeps old sessions; a bad key file keeps the running keys; /admin shows mode pooled and no id', async () => {
  const dir = tmpdir();
  const k1 = newKey();
  const kf = keyFile(dir, [k1]);
  const tf = tokensFile(dir);
  const gw = await startGateway({ dir, gateway: { session_key_file: kf, admin_token: 'admin-token-0123456789abcdef0123456789' }, auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf }, servers: [{ name: 'example', path: '/mcp', extra: POOLED }] });
  try {
    const old = await initSession(gw, { headers: bearer('alice') });
    // Rotation: a new key first, the old one kept below it.
    const k2 = newKey();
    keyFile(dir, [k2, k1]);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/);
    const neu = await initSession(gw, { headers: bearer('alice') });
    assert.notEqual(neu.sid.slice(2, 8), old.sid.slice(2, 8), 'the new key seals (another key id)');
    assert.equal(textOf((await echo(gw, old.sid, 'old')).answer), 'old');
    assert.equal(textOf((await echo(gw, neu.sid, 'new')).answer), 'new');
    // The old key dropped: its session's id no longer opens, though this instance holds its record.
    keyFile(dir, [k2]);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded[^]*SIGHUP: configuration reloaded/);
    assert.equal((await echo(gw, old.sid, 'gone')).status, 404, 'a removed key\'s session is over');
    assert.equal(textOf((await echo(gw, neu.sid, 'kept')).answer), 'kept');
    // A bad file: the reload is refused, the keys stay.
    fs.writeFileSync(kf, 'not a key\n', { mode: 0o600 });
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: .*session\.keys line 1: .*the running configuration stays/);
    assert.equal(textOf((await echo(gw, neu.sid, 'still')).answer), 'still');
    // /admin/inflight: pooled sessions by label, mode pooled, never the id.
    const r = await request(`${gw.base}/admin/inflight`, { method: 'GET', headers: { Authorization: 'Bearer admin-token-0123456789abcdef0123456789' } });
    const body = await r.done();
    assert.equal(r.status, 200, body);
    const doc = JSON.parse(body);
    assert.ok(Array.isArray(doc.pooled_sessions), body);
    assert.ok(doc.pooled_sessions.length >= 2, body);
    for (const p of doc.pooled_sessions) {
      assert.equal(p.mode, 'pooled');
      assert.match(p.label, /^sealed:[0-9a-f]{16}$/);
    }
    assert.ok(!body.includes(old.sid) && !body.includes(neu.sid), 'no sealed id in /admin');
  } finally {
    await gw.stop();
  }
});

// --- behind the shipped nginx instances site: round-robin, and a rolling restart ---------------

const DRAIN_MS = 30000;
const labelOf = (sid) => `sealed:${crypto.createHash('sha256').update(sid).digest('hex').slice(0, 16)}`;

/** A tools/call echo through nginx in a pooled session (no token: [auth] mode none on loopback). */
async function echoVia(via, s, text) {
  const r = await post(via, rpc('tools/call', { name: 'echo', arguments: { text, delay_ms: 20 } }), { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
  await r.done(scaled(10000));
  const answer = r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
  return r.status === 200 && textOf(answer) === text ? null : `echo ${text} in ${labelOf(s.sid)}: HTTP ${r.status} ${r.text()}`;
}

/** SIGTERM to gws[name]; it drains and exits 0; then the same instance again on its port. */
async function restartInstance(gws, name, opts) {
  const old = gws[name];
  old.proc.kill('SIGTERM');
  await old.waitLog(/SIGTERM: draining/, scaled(5000));
  const r = await Promise.race([old.exited, new Promise((res) => setTimeout(() => res(null), scaled(20000)).unref())]);
  assert.deepEqual(r, { code: 0, signal: null }, `${name} exit after SIGTERM; log (tail):\n${old.logs().slice(-3000)}`);
  gws[name] = await startGateway({ ...opts, gateway: { ...opts.gateway, instance_id: name, listen: `127.0.0.1:${old.port}` } });
}

test('behind nginx: a pooled session round-robins over both instances; a rolling restart of both fails no request and loses no session', { skip: !haveNginx && 'no nginx' }, async () => {
  const dir = tmpdir();
  const kf = keyFile(dir, [newKey()]);
  const gateway = { shutdown_drain_ms: DRAIN_MS, session_key_file: kf };
  const servers = [{ name: 'example', path: '/mcp', extra: POOLED }];
  await withInstances(async ({ gws, via }) => {
    const sessions = [];
    for (let i = 0; i < 8; i++) sessions.push(await initSession(via));
    for (const s of sessions) assert.match(s.sid, /^~1/, 'a sealed id: the map sends it round-robin');
    // One session's requests land on both instances (each access log names it), each answered.
    const s0 = sessions[0];
    for (let i = 0; i < 8; i++) assert.equal(await echoVia(via, s0, `rr ${i}`), null);
    const served = (gw) => gw.logs().split('\n').filter((l) => l.includes(`session=${labelOf(s0.sid)}`) && /mcp_method=tools\/call/.test(l) && /status=200/.test(l)).length;
    // An access line is written as its request completes, which may follow the answer's arrival.
    await waitFor(() => served(gws.g1) > 0 && served(gws.g2) > 0 && served(gws.g1) + served(gws.g2) >= 8, scaled(5000), 'the 8 tools/call of one session in both access logs');
    assert.equal(served(gws.g1) + served(gws.g2), 8, 'every call answered once, by one instance');

    // Clients that keep calling in their sessions, with no retry and no new initialize.
    const failures = [];
    let calls = 0;
    let stopped = false;
    const worker = async (w) => {
      for (let i = 0; i < 5000 && !stopped; i++) {
        const s = sessions[(w + i) % sessions.length];
        try {
          const f = await echoVia(via, s, `w${w}-${i}`);
          if (f) failures.push(f);
          else calls++;
        } catch (e) {
          failures.push(`w${w}-${i}: ${e.message}`);
        }
      }
    };
    const workers = [0, 1, 2, 3].map(worker);
    try {
      const until = (cond, ms, what) => waitFor(() => failures.length > 0 || cond(), ms, what);
      await until(() => calls >= 20, scaled(20000), 'calls before the restart');
      for (const name of ['g1', 'g2']) {
        const before = calls;
        await restartInstance(gws, name, { gateway, servers });
        await until(() => calls >= before + 20, scaled(20000), `calls after ${name} restarted`);
      }
    } finally {
      stopped = true;
      await Promise.all(workers);
    }
    console.log(`rolling restart of both instances: ${calls} calls in ${sessions.length} pooled sessions, ${failures.length} failed`);
    assert.equal(failures.length, 0, `failed requests:\n${failures.slice(0, 20).join('\n')}`);
    // No session lost: every one still answers, on the new processes.
    for (const [i, s] of sessions.entries()) assert.equal(await echoVia(via, s, `after ${i}`), null);
  }, { quietErrorLog: true, gateway, servers });
});
