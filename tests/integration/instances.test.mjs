// SPDX-License-Identifier: MIT
// Several gateway instances behind one nginx with the shipped deploy/nginx/mcp-gateway-instances.conf
// (only its ports and TLS lines replaced): two gateways with instance_id g1 and g2 mint session ids
// "g1.<random>" and "g2.<random>"; nginx sends new sessions to either instance and every later
// request of a session (Mcp-Session-Id header, or the sessionId query argument of the 2024-11-05
// transport) to the instance that holds it. When an instance stops, its sessions answer 404 with
// a JSON-RPC error body through nginx (their clients initialize again) and new sessions go to the
// instances that are left.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callTool, del, get, initSession, post, request, rpc, startGateway, waitFor } from '../lib/gw.mjs';
import { withInstances } from '../lib/nginx.mjs';

const SID_RE = /^(g[12])\.[A-Za-z0-9_-]{22}$/;
/** The log line of the instance that created session sid. */
const createdRe = (sid) => new RegExp(`session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created`);
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const textOf = (j) => j?.result?.content?.[0]?.text;
const prefixOf = (sid) => {
  const m = SID_RE.exec(sid ?? '');
  assert.ok(m, `session id of the form g1.|g2.<22 base64url characters>: ${JSON.stringify(sid)}`);
  return m[1];
};

/** Opens n Streamable HTTP sessions through nginx, one after the other: [{sid, version, inst}]. */
async function openSessions(via, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const s = await initSession(via);
    out.push({ ...s, inst: prefixOf(s.sid) });
  }
  return out;
}

/** A tools/call echo through `target` (nginx or an instance) in session s; returns the answer. */
async function echo(target, s, text) {
  const { r, response } = await callTool(target, s.sid, 'echo', { text });
  assert.equal(r.status, 200, `tools/call echo in ${s.sid}: HTTP ${r.status} ${r.text()}`);
  assert.equal(textOf(response), text, `echo answered in ${s.sid}: ${r.text()}`);
  return response;
}

/** Awaits the whole body; asserts HTTP 404 with a JSON body holding a JSON-RPC error. */
async function assertSessionNotFound(r, what) {
  const text = await r.done();
  assert.equal(r.status, 404, `${what}: HTTP status (body: ${text})`);
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, `${what}: Content-Type (body: ${text})`);
  let body;
  assert.doesNotThrow(() => { body = JSON.parse(text); }, `${what}: body is JSON: ${text}`);
  assert.equal(body.jsonrpc, '2.0', text);
  assert.equal(body.id, null, text);
  assert.equal(typeof body.error?.code, 'number', text);
  assert.equal(typeof body.error.message, 'string', text);
  return body;
}

/** A ping sent straight to one instance (not through nginx) in session s. */
function pingDirect(gw, s, id) {
  return post(gw, rpc('ping', undefined, id), { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
}

// --- the 2024-11-05 transport through nginx ----------------------------------------------------

/**
 * GET <nginx>/mcp/sse; asserts the stream opens with the endpoint event and returns
 * {s, sid, inst, endpoint (absolute, on nginx), messages(), waitMsg(pred)}.
 */
async function openLegacy(via) {
  const sseUrl = `${via.base}/mcp/sse`;
  const s = await request(sseUrl, { method: 'GET', headers: { Accept: 'text/event-stream' } });
  if (s.status !== 200) throw new Error(`GET /mcp/sse through nginx: HTTP ${s.status} ${await s.done()}`);
  assert.match(s.headers['content-type'] || '', /^text\/event-stream\b/);
  const first = await waitFor(() => s.completeEvents()[0], 5000, 'the endpoint event through nginx');
  assert.equal(first.event, 'endpoint', `first event: ${s.text()}`);
  assert.match(first.data, /^messages\?sessionId=[A-Za-z0-9_.-]+$/);
  const endpoint = new URL(first.data, sseUrl);
  assert.equal(endpoint.origin, new URL(via.base).origin, 'the endpoint resolves to nginx');
  assert.equal(endpoint.pathname, '/mcp/messages');
  const sid = endpoint.searchParams.get('sessionId');
  const conn = {
    s,
    sid,
    inst: prefixOf(sid),
    endpoint: endpoint.href,
    messages: () => s.completeEvents().filter((e) => e.event === 'message').map((e) => e.json),
    waitMsg: (pred, ms = 5000, what = 'a message on the SSE stream') => waitFor(() => conn.messages().find((j) => j && pred(j)), ms, what),
  };
  return conn;
}

/** POSTs one message to the connection's message endpoint (through nginx); expects 202. */
async function send202(conn, msg) {
  const r = await request(conn.endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: msg });
  await r.done();
  assert.equal(r.status, 202, `POST ${JSON.stringify(msg)} to ${conn.endpoint}: HTTP ${r.status} ${r.text()}`);
  assert.equal(r.text(), 'Accepted');
}

async function legacyInitAndEcho(conn, tag) {
  await send202(conn, rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'instances-it', version: '1' } }, `init-${tag}`));
  const init = await conn.waitMsg((j) => j.id === `init-${tag}` && isAnswer(j), 5000, `the initialize answer of ${conn.sid}`);
  assert.ok(init.result, `initialize answered: ${JSON.stringify(init)}`);
  assert.equal(init.result.protocolVersion, '2024-11-05');
  await send202(conn, { jsonrpc: '2.0', method: 'notifications/initialized' });
  await send202(conn, rpc('tools/call', { name: 'echo', arguments: { text: `legacy ${tag}` } }, `echo-${tag}`));
  const ans = await conn.waitMsg((j) => j.id === `echo-${tag}` && isAnswer(j), 10000, `the echo answer of ${conn.sid}`);
  assert.equal(textOf(ans), `legacy ${tag}`);
}

// --- tests -------------------------------------------------------------------------------------

test('new sessions land on both instances; each session is served through nginx by its own instance only', async () => {
  await withInstances(async ({ gws, via }) => {
    const sessions = await openSessions(via, 8);
    const seen = new Set(sessions.map((s) => s.inst));
    assert.deepEqual([...seen].sort(), ['g1', 'g2'], `both instances got new sessions: ${sessions.map((s) => s.sid).join(' ')}`);
    for (const s of sessions) await gws[s.inst].waitLog(createdRe(s.sid));

    for (const [i, s] of sessions.entries()) {
      // Follow-up requests through nginx reach the instance that holds the session.
      await echo(via, s, `via nginx ${i}`);
      // Straight to its own instance: known there.
      const own = await pingDirect(gws[s.inst], s, `own-${i}`);
      await own.done();
      assert.equal(own.status, 200, `ping on ${s.inst} in ${s.sid}: ${own.text()}`);
      assert.deepEqual(own.events().map((e) => e.json).find((j) => j?.id === `own-${i}`)?.result, {}, own.text());
      // Straight to the other instance: unknown there.
      const other = s.inst === 'g1' ? 'g2' : 'g1';
      await assertSessionNotFound(await pingDirect(gws[other], s, `other-${i}`), `${s.sid} on ${other}`);
    }
    assert.ok(!gws.g1.childMessages().some((m) => String(m.id).startsWith('other-')) && !gws.g2.childMessages().some((m) => String(m.id).startsWith('other-')));

    // The standalone GET stream of one session per instance opens through nginx.
    for (const inst of ['g1', 'g2']) {
      const s = sessions.find((x) => x.inst === inst);
      const g = await get(via, { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
      assert.equal(g.status, 200, `GET stream of ${s.sid} through nginx: ${g.text()}`);
      assert.match(g.headers['content-type'] || '', /^text\/event-stream\b/);
      g.drop();
    }

    // DELETE through nginx ends each session on its own instance.
    for (const s of sessions) {
      const d = await del(via, { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
      await d.done();
      assert.ok(d.status >= 200 && d.status < 300, `DELETE ${s.sid} through nginx: HTTP ${d.status} ${d.text()}`);
      await assertSessionNotFound(await pingDirect(gws[s.inst], s, `after-delete-${s.sid}`), `${s.sid} on ${s.inst} after DELETE`);
    }
  });
});

test('an instance stops: its sessions answer 404 through nginx, the other instance serves on and takes every new session', async () => {
  await withInstances(async ({ gws, via, ng }) => {
    const sessions = await openSessions(via, 6);
    const g1s = sessions.filter((s) => s.inst === 'g1');
    const g2s = sessions.filter((s) => s.inst === 'g2');
    assert.ok(g1s.length > 0 && g2s.length > 0, `sessions on both instances: ${sessions.map((s) => s.sid).join(' ')}`);
    for (const s of sessions) await echo(via, s, `before ${s.sid}`);

    await gws.g1.stop();

    // g1's sessions: 404 with a JSON-RPC error body from nginx, for POST and GET alike.
    for (const s of g1s) {
      const p = await post(via, rpc('tools/call', { name: 'echo', arguments: { text: 'gone' } }, `gone-${s.sid}`), { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } });
      const body = await assertSessionNotFound(p, `POST in ${s.sid} after g1 stopped`);
      assert.match(body.error.message, /session not found/i);
      await assertSessionNotFound(await get(via, { sid: s.sid, headers: { 'MCP-Protocol-Version': s.version } }), `GET in ${s.sid} after g1 stopped`);
    }
    // The same for the 2024-11-05 message endpoint of a g1 session id.
    const legacyGone = await request(`${via.base}/mcp/messages?sessionId=${encodeURIComponent(g1s[0].sid)}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: rpc('ping', undefined, 'legacy-gone'),
    });
    await assertSessionNotFound(legacyGone, `legacy POST for ${g1s[0].sid} after g1 stopped`);

    // g2's sessions go on.
    for (const s of g2s) await echo(via, s, `after ${s.sid}`);

    // Every new session lands on g2, and nginx fails none of them.
    const fresh = await openSessions(via, 6);
    assert.deepEqual(fresh.map((s) => s.inst), fresh.map(() => 'g2'), `new sessions after g1 stopped: ${fresh.map((s) => s.sid).join(' ')}`);
    for (const s of fresh) await echo(via, s, `fresh ${s.sid}`);
    assert.ok(!/\[(alert|emerg|crit)\]/.test(ng.errorLog()), ng.errorLog());
  });
});

test('the 2024-11-05 transport through nginx: GET /mcp/sse opens sessions on both instances; messages reach their instance', async () => {
  await withInstances(async ({ gws, via }) => {
    const conns = [];
    try {
      // At least 4 sessions, until both instances have been seen (at most 8).
      for (let i = 0; i < 8 && (conns.length < 4 || new Set(conns.map((c) => c.inst)).size < 2); i++) conns.push(await openLegacy(via));
      assert.deepEqual([...new Set(conns.map((c) => c.inst))].sort(), ['g1', 'g2'], `both instances: ${conns.map((c) => c.sid).join(' ')}`);
      for (const c of conns) await gws[c.inst].waitLog(createdRe(c.sid));
      for (const [i, c] of conns.entries()) await legacyInitAndEcho(c, String(i));
      // Every stream is still open and carried only its own session's answers.
      for (const [i, c] of conns.entries()) {
        assert.equal(c.s.ended, false, `the stream of ${c.sid} stays open`);
        const ids = c.messages().map((j) => j?.id).filter((x) => x !== undefined);
        assert.deepEqual(ids, [`init-${i}`, `echo-${i}`], `answers on the stream of ${c.sid}`);
      }
    } finally {
      for (const c of conns) c.s.drop();
    }
  });
});
