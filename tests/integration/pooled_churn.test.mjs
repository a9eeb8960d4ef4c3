// SPDX-License-Identifier: MIT
// Pooled sessions under churn, randomized: many sessions on few children, each doing random
// calls (echo, slow calls with progress, calls it cancels, calls whose stream it drops,
// questions the child asks, log lines at random levels under a random logging/setLevel, the
// same JSON-RPC ids as every other session), while pool children are killed under them. The
// invariant, checked on every message every stream of a session carries: it is that session's
// (an answer to an id it sent on that stream, progress with its token, a log line or a question
// carrying its tag), and a log line is never below the level the session asked. Every call ends
// (an answer, an error when its child was killed, or no answer after the session's own cancel).
// The seed is printed; GW_POOLED_SEED replays one. Bounded in count and time.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { get, initSession, post, rpc, withGateway } from '../lib/gw.mjs';
import { prng } from '../lib/prng.mjs';
import { kids } from '../lib/procs.mjs';
import { scaled } from '../lib/timing.mjs';

const SESSIONS = 24;
const OPS = 30; // per session
const KILLS = 5;
const seen = { questions: 0, logs: 0, progress: 0, refused: 0 };
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const CALL_MS = scaled(15000);

const isAnswer = (j) => j && ('result' in j || 'error' in j);

/** Every message of one stream of session `tag` must be its own; returns the answer, if any. */
function check(s, events, { id, token, level }) {
  let answer;
  for (const e of events) {
    const j = e.json;
    if (!j) continue;
    const where = `session ${s.tag} stream of id ${id}: ${e.data}`;
    if (isAnswer(j) && j.id !== undefined && String(j.id).startsWith('mcpgw-')) assert.fail(`an answer on a client stream: ${where}`);
    if (isAnswer(j)) {
      assert.equal(j.id, id, `an answer to another id: ${where}`);
      answer = j;
    } else if (j.method === 'notifications/progress') {
      assert.equal(j.params.progressToken, token, `progress with another token: ${where}`);
      seen.progress++;
    } else if (j.method === 'notifications/message') {
      assert.ok(String(j.params.data).includes(s.tag), `another session's log line: ${where}`);
      assert.ok(LEVELS.indexOf(j.params.level) >= level, `a line below the session's level: ${where}`);
      seen.logs++;
    } else if (j.method === 'sampling/createMessage') {
      assert.ok(JSON.stringify(j.params).includes(s.tag), `another session's question: ${where}`);
    } else if (j.method === 'notifications/cancelled') {
      assert.ok(s.asked.has(j.params.requestId), `a cancel of no question of its own: ${where}`);
    } else {
      assert.fail(`unexpected message: ${where}`);
    }
  }
  return answer;
}

/** A refusal before anything reached a child (a child restarting after a kill): 503 or 429. */
const refused = (p) => (p.status === 503 || p.status === 429) && ++seen.refused > 0;

async function op(gw, s, r, n, forced) {
  const id = n % 5; // the same ids in every session
  const kind = forced ?? Math.floor(r() * 7);
  const token = `${s.tag}-pt-${n}`;
  const post1 = (params, name) => post(gw, rpc('tools/call', { name, arguments: params, _meta: { progressToken: token } }, id), { sid: s.sid });
  if (kind === 0) {
    const p = await post1({ text: `${s.tag}-echo-${n}` }, 'echo');
    await p.done(CALL_MS);
    if (refused(p)) return;
    const a = check(s, p.events(), { id, token, level: s.level });
    assert.ok(a, `session ${s.tag}: echo ${n} unanswered: ${p.status} ${p.text()}`);
    if (a.result) assert.equal(a.result.content[0].text, `${s.tag}-echo-${n}`);
  } else if (kind === 1) {
    const p = await post1({ steps: 3, interval_ms: 10 }, 'slow');
    await p.done(CALL_MS);
    if (refused(p)) return;
    assert.ok(check(s, p.events(), { id, token, level: s.level }), `session ${s.tag}: slow ${n} unanswered: ${p.status} ${p.text()}`);
  } else if (kind === 2 || kind === 3) {
    // A call it ends itself: its own cancel, or a dropped stream.
    const p = await post1({ tag: `${s.tag}-${n}` }, 'cancel_self');
    if (refused(p)) return p.done(CALL_MS);
    await p.waitEvent((j) => j.method === 'notifications/progress' || isAnswer(j), CALL_MS).catch(() => {});
    if (kind === 2) {
      const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } }, { sid: s.sid });
      await c.done();
      assert.equal(c.status, 202);
      await p.done(CALL_MS);
      const a = check(s, p.events(), { id, token, level: s.level });
      if (a) assert.ok(a.error, `session ${s.tag}: a result after its cancel`);
    } else {
      check(s, p.events(), { id, token, level: s.level });
      p.drop();
    }
  } else if (kind === 4) {
    const p = await post1({ prompt: `${s.tag}-q-${n}` }, 'sample');
    if (refused(p)) return p.done(CALL_MS);
    const ask = await p.waitEvent((j) => j.method === 'sampling/createMessage' || isAnswer(j), CALL_MS);
    if (ask.json.method === 'sampling/createMessage') {
      s.asked.add(ask.json.id);
      seen.questions++;
      const ans = await post(gw, { jsonrpc: '2.0', id: ask.json.id, result: { role: 'assistant', model: 'm', content: { type: 'text', text: `${s.tag}-a-${n}` } } }, { sid: s.sid });
      await ans.done();
    }
    await p.done(CALL_MS);
    const a = check(s, p.events(), { id, token, level: s.level });
    assert.ok(a, `session ${s.tag}: sample ${n} unanswered`);
    const text = JSON.stringify(a);
    assert.ok(!/sess\d+-a-/.test(text) || text.includes(`${s.tag}-a-${n}`), `another session's answer: ${text}`);
  } else if (kind === 5) {
    const level = Math.floor(r() * LEVELS.length);
    const p = await post(gw, rpc('logging/setLevel', { level: LEVELS[level] }, id), { sid: s.sid });
    await p.done(CALL_MS);
    assert.deepEqual(check(s, p.events(), { id, token, level: 0 }).result, {});
    s.level = level;
  } else {
    const p = await post1({ level: LEVELS[Math.floor(r() * LEVELS.length)], text: `${s.tag}-log-${n}` }, 'notify');
    await p.done(CALL_MS);
    if (refused(p)) return;
    assert.ok(check(s, p.events(), { id, token, level: s.level }), `session ${s.tag}: notify ${n} unanswered`);
  }
}

test('pooled sessions under churn never see each other\'s messages', async (t) => {
  const seed = Number(process.env.GW_POOLED_SEED) || Math.floor(Math.random() * 2 ** 31);
  t.diagnostic(`seed ${seed} (GW_POOLED_SEED replays it)`);
  const r = prng(seed);
  const extra = 'session_mode = pooled\npool_max_children = 3\npool_child_max_inflight = 64\npool_max_restarts_per_min = 1000\nrequest_timeout_ms = 10000';
  await withGateway({ servers: [{ name: 'example', path: '/mcp', extra }] }, async (gw) => {
    const sessions = [];
    for (let i = 0; i < SESSIONS; i++) {
      const s = await initSession(gw, { capabilities: i % 3 ? { sampling: {} } : {} });
      sessions.push({ ...s, tag: `sess${i}`, level: 0, asked: new Set(), get: await get(gw, { sid: s.sid }) });
    }
    let killed = 0;
    const killer = (async () => {
      for (let k = 0; k < KILLS; k++) {
        await new Promise((res) => setTimeout(res, 150 + Math.floor(r() * 300)));
        const pids = kids(gw.proc.pid);
        if (pids.length === 0) continue;
        try { process.kill(pids[Math.floor(r() * pids.length)], 'SIGKILL'); killed++; } catch { /* gone already */ }
      }
    })();
    await Promise.all(sessions.map(async (s) => {
      const mine = prng(Math.floor(r() * 2 ** 31));
      for (let n = 0; n < OPS; n++) await op(gw, s, mine, n);
    }));
    await killer;
    t.diagnostic(`children killed: ${killed}; seen under churn: ${JSON.stringify(seen)}`);
    // Under churn a question or a log line reaches a session only while nobody else's call is on
    // its child, so a draw may bring none. A quiet step after it: one session alone (debug level,
    // sampling declared) asks until each kind was seen, so the checks above are never vacuous.
    const q = sessions[1];
    const lv = await post(gw, rpc('logging/setLevel', { level: 'debug' }, 0), { sid: q.sid });
    await lv.done(CALL_MS);
    q.level = 0;
    for (let k = 0; k < 5 && (seen.questions === 0 || seen.logs === 0 || seen.progress === 0); k++) {
      for (const kind of [4, 6, 1]) await op(gw, q, r, OPS + 3 * k + kind, kind);
    }
    t.diagnostic(`seen in all: ${JSON.stringify(seen)}`);
    assert.ok(seen.questions > 0 && seen.logs > 0 && seen.progress > 0, 'questions, log lines and progress were exercised');
    for (const s of sessions) {
      // The GET stream carries only what is the session's own: its questions, nothing else here.
      for (const e of s.get.events()) {
        if (!e.json) continue;
        assert.equal(e.json.method, 'sampling/createMessage', `${s.tag} GET stream: ${e.data}`);
        assert.ok(JSON.stringify(e.json.params).includes(s.tag), `${s.tag} GET stream: ${e.data}`);
      }
      s.get.drop();
    }
  });
});
