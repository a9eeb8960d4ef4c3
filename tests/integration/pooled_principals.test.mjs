// SPDX-License-Identifier: MIT
// resources/subscribe in pooled sessions (session_mode = pooled) of a server with per-principal
// credentials (credentials_dir): each principal's children are its own pool, so a session's
// subscription is placed at a child of its own principal's pool, counted with that principal's
// other sessions, and notifications/resources/updated from that child reaches only that
// principal's sessions that subscribed the URI; the operator's restart places it again at the
// principal's new child. initialize keeps resources.subscribe for such a server. Two principals
// (bearer tokens alice and bob, each with a credentials file of its own) prove that nothing
// crosses: the listen fixture sends an update only from the child that holds the subscription.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { get, initSession, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const LISTEN_FIXTURE = path.join(process.env.GW_SOURCE_ROOT ?? '.', 'tests/fixtures/listen_server.mjs');
const ADMIN = 'pooled-principals-admin-0123456789abcdef';
const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef' };
const bearer = (who) => ({ Authorization: `Bearer ${TOKENS[who]}` });
const isAnswer = (j) => j && ('result' in j || 'error' in j);

test('per-principal credentials: a pooled session\'s subscription is placed at its own principal\'s child; updates reach only that principal\'s subscribers; a restart places it again', async () => {
  const dir = tmpdir('mcpgw-psubs-');
  const tf = path.join(dir, 'tokens');
  fs.writeFileSync(tf, Object.entries(TOKENS).map(([n, t]) => `sha256:${crypto.createHash('sha256').update(t).digest('hex')} ${n}\n`).join(''), { mode: 0o600 });
  const creds = path.join(dir, 'creds');
  fs.mkdirSync(creds, { mode: 0o700 });
  for (const n of Object.keys(TOKENS)) fs.writeFileSync(path.join(creds, `${n}.env`), `WHO=${n}\n`, { mode: 0o600 });
  const log = path.join(dir, 'subs.log');
  const subs = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  const gw = await startGateway({
    dir,
    gateway: { admin_token: ADMIN },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tf },
    servers: [{ name: 'listen', path: '/mcp', command: `${process.execPath} ${LISTEN_FIXTURE}`, env: `LISTEN_FIXTURE_LOG=${log}`, extra: `session_mode = pooled\ncredentials_dir = ${creds}\npool_max_children = 4` }],
  });
  try {
    const call = async (who, s, method, params) => {
      const r = await post(gw, rpc(method, params), { sid: s.sid, headers: bearer(who) });
      await r.done(scaled(10000));
      assert.equal(r.status, 200, r.text());
      return r.events().map((e) => e.json).find(isAnswer);
    };
    const sess = {
      a1: ['alice', await initSession(gw, { headers: bearer('alice') })],
      a2: ['alice', await initSession(gw, { headers: bearer('alice') })],
      b1: ['bob', await initSession(gw, { headers: bearer('bob') })],
    };
    for (const [, s] of Object.values(sess)) assert.equal(s.result.capabilities.resources.subscribe, true, 'resources.subscribe is kept');
    const gets = {};
    for (const [k, [who, s]] of Object.entries(sess)) {
      gets[k] = await get(gw, { sid: s.sid, headers: bearer(who) });
      assert.equal(gets[k].status, 200);
    }
    const pidOf = async (who, s) => Number((await call(who, s, 'tools/call', { name: 'whoami', arguments: {} })).result.content[0].text);
    const alicePid = await pidOf('alice', sess.a1[1]);
    const bobPid = await pidOf('bob', sess.b1[1]);
    assert.notEqual(alicePid, bobPid, 'each principal has a child of its own');
    const sub = async (k, uri) => assert.deepEqual((await call(sess[k][0], sess[k][1], 'resources/subscribe', { uri })).result, {});
    await sub('a1', 'test://a');
    await sub('a2', 'test://a'); // counted with a1's: not sent again
    await sub('b1', 'test://a');
    await waitFor(() => subs().length === 2, scaled(5000), 'one subscription at each principal\'s child');
    assert.deepEqual(subs().map((x) => x.pid).sort(), [alicePid, bobPid].sort(), `each at its own principal's child: ${JSON.stringify(subs())}`);
    const updates = (k) => gets[k].events().filter((e) => e.json?.method === 'notifications/resources/updated').length;
    // alice's child reports the update: alice's two sessions hear it, bob's does not.
    assert.match((await call('alice', sess.a2[1], 'tools/call', { name: 'update', arguments: { uri: 'test://a' } })).result.content[0].text, /updated/);
    await waitFor(() => updates('a1') === 1 && updates('a2') === 1, scaled(5000), 'alice\'s sessions to hear her child\'s update');
    // bob's child reports it: only bob's session hears it.
    await call('bob', sess.b1[1], 'tools/call', { name: 'update', arguments: { uri: 'test://a' } });
    await waitFor(() => updates('b1') === 1, scaled(5000), 'bob to hear his child\'s update');
    assert.equal(updates('a1'), 1, 'no update of bob\'s child reached alice');
    assert.equal(updates('a2'), 1);
    // One of alice's sessions lets go: her subscription stays for the other (nothing sent).
    await call('alice', sess.a1[1], 'resources/unsubscribe', { uri: 'test://a' });
    assert.equal(subs().length, 2);
    // The operator's restart: each principal's subscription is placed again at its new child.
    const r = await request(`${gw.base}/admin/servers/listen/restart`, { method: 'POST', headers: { Authorization: `Bearer ${ADMIN}` } });
    await r.done(scaled(5000));
    assert.equal(r.status, 200, r.text());
    await waitFor(() => subs().filter((x) => x.method === 'resources/subscribe').length === 4, scaled(10000), 'both subscriptions placed again');
    const again = subs().slice(2).filter((x) => x.method === 'resources/subscribe').map((x) => x.pid);
    const alice2 = await pidOf('alice', sess.a2[1]);
    const bob2 = await pidOf('bob', sess.b1[1]);
    assert.deepEqual(again.sort(), [alice2, bob2].sort(), `at each principal's new child: ${JSON.stringify(subs())}`);
    await call('alice', sess.a2[1], 'tools/call', { name: 'update', arguments: { uri: 'test://a' } });
    await waitFor(() => updates('a2') === 2, scaled(5000), 'alice\'s subscriber to hear the new child');
    await call('bob', sess.b1[1], 'tools/call', { name: 'update', arguments: { uri: 'test://a' } });
    await waitFor(() => updates('b1') === 2, scaled(5000), 'bob to hear his new child');
    assert.equal(updates('a1'), 1, 'a1 unsubscribed: it hears nothing more');
    assert.equal(updates('a2'), 2, 'nothing of bob\'s reached alice');
    for (const g of Object.values(gets)) g.drop();
  } finally {
    await gw.stop();
  }
});
