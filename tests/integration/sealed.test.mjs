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

import { callTool, del, get, initSession, metricSamples, post, request, resume, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';

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
    keyFile(dir, [newKey(), k1]);
    gw.proc.kill('SIGHUP');
    await gw.waitLog(/SIGHUP: configuration reloaded/);
    const neu = await initSession(gw, { headers: bearer('alice') });
    assert.notEqual(neu.sid.slice(2, 8), old.sid.slice(2, 8), 'the new key seals (another key id)');
    assert.equal(textOf((await echo(gw, old.sid, 'old')).answer), 'old');
    assert.equal(textOf((await echo(gw, neu.sid, 'new')).answer), 'new');
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
