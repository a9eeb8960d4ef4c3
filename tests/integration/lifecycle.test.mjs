// SPDX-License-Identifier: MIT
// Session lifecycle over Streamable HTTP: initialize and the session id,
// 202 for notifications and responses, the list methods, protocol version negotiation, one child
// per session, DELETE, idle expiry, a crashing child, the child's stderr in the log, heartbeats.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import {
  callTool, del, get, initSession, MATRIX_POOLED, pidAlive, pooledSkip, post, rpc, startGateway, waitFor,
} from '../lib/gw.mjs';

const VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'];

function reEscape(s) {
  return s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
}

function initMsg(version = '2025-06-18', id = 'init') {
  return rpc('initialize', { protocolVersion: version, capabilities: {}, clientInfo: { name: 'it', version: '1' } }, id);
}

/** POSTs one request on the session and returns its JSON-RPC answer (and the response). */
async function ask(gw, sid, method, params, { id = `${method}-${Math.random()}`, headers } = {}) {
  const r = await post(gw, rpc(method, params, id), { sid, headers });
  await r.done();
  const ev = r.events().find((e) => e.json && e.json.id === id && ('result' in e.json || 'error' in e.json));
  return { r, msg: ev?.json };
}

/** Status of a ping on sid (the body is read to the end). */
async function pingStatus(gw, sid) {
  const r = await post(gw, rpc('ping'), { sid });
  await r.done();
  return r.status;
}

function parentOf(pid) {
  const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
}

// --- initialize -------------------------------------------------------------------------------

test('initialize: 200 text/event-stream, a visible-ASCII Mcp-Session-Id of >= 22 chars, SSE headers', async () => {
  const gw = await startGateway();
  try {
    const r = await post(gw, initMsg());
    await r.done();
    assert.equal(r.status, 200, r.text());
    assert.match(r.headers['content-type'], /^text\/event-stream/);
    // A stream says nothing may buffer or cache it; an answer held until whole (Content-Length,
    // response_hold_ms) has nothing to hold back and does not.
    const whole = r.headers['content-length'] !== undefined;
    assert.equal(r.headers['x-accel-buffering'], whole ? undefined : 'no', JSON.stringify(r.headers));
    assert.equal(r.headers['cache-control'], whole ? undefined : 'no-cache', JSON.stringify(r.headers));
    const sid = r.headers['mcp-session-id'];
    assert.ok(sid, 'Mcp-Session-Id present');
    assert.match(sid, /^[\x21-\x7e]+$/);
    assert.ok(sid.length >= 22, `length ${sid.length}`);
    const ev = r.events().find((e) => e.json?.id === 'init');
    assert.ok(ev?.json.result, r.text());
    assert.equal(ev.json.jsonrpc, '2.0');
    assert.equal(ev.json.result.serverInfo.name, 'mcp-example-server');
    // the child got the initialize; its id was rewritten but the client sees its own back
    await waitFor(() => gw.childMessages().some((m) => m.method === 'initialize'), 5000, 'child saw initialize');
  } finally {
    await gw.stop();
  }
});

test('session ids are unique across 20 sessions', async () => {
  const gw = await startGateway();
  try {
    const ids = new Set();
    for (let i = 0; i < 20; i++) {
      const s = await initSession(gw);
      assert.match(s.sid, /^[\x21-\x7e]{22,}$/);
      ids.add(s.sid);
    }
    assert.equal(ids.size, 20);
    if (!MATRIX_POOLED) assert.equal(new Set(gw.childPids()).size, 20); // a pooled session has no child
  } finally {
    await gw.stop();
  }
});

test('instance_id=g1: session ids start with "g1."', async (t) => {
  if (pooledSkip(t, 'a pooled session\'s id is sealed, with no instance prefix (any instance serves it)')) return;
  const gw = await startGateway({ gateway: { instance_id: 'g1' } });
  try {
    const a = await initSession(gw);
    const b = await initSession(gw);
    for (const s of [a, b]) {
      assert.ok(s.sid.startsWith('g1.'), s.sid);
      assert.match(s.sid.slice(3), /^[\x21-\x7e]{22,}$/);
      assert.equal(await pingStatus(gw, s.sid), 200);
    }
    assert.notEqual(a.sid, b.sid);
  } finally {
    await gw.stop();
  }
});

// --- 202 answers ------------------------------------------------------------------------------

test('notifications/initialized -> 202 with an empty body, delivered to the child', async () => {
  const gw = await startGateway();
  try {
    const r = await post(gw, initMsg());
    await r.done();
    const sid = r.headers['mcp-session-id'];
    const n = await post(gw, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, headers: { 'MCP-Protocol-Version': '2025-06-18' } });
    const body = await n.done();
    assert.equal(n.status, 202);
    assert.equal(body, '');
    await waitFor(() => gw.childMessages().some((m) => m.method === 'notifications/initialized'), 5000, 'child saw initialized');
    assert.equal(await pingStatus(gw, sid), 200);
  } finally {
    await gw.stop();
  }
});

test('a client JSON-RPC response POST -> 202 with an empty body', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    for (const msg of [
      { jsonrpc: '2.0', id: 424242, result: {} },
      { jsonrpc: '2.0', id: 'nobody', error: { code: -32000, message: 'no' } },
    ]) {
      const r = await post(gw, msg, { sid: s.sid });
      const body = await r.done();
      assert.equal(r.status, 202, body);
      assert.equal(body, '');
    }
    assert.equal(await pingStatus(gw, s.sid), 200);
  } finally {
    await gw.stop();
  }
});

// --- list methods -----------------------------------------------------------------------------

test('tools/list, resources/list and prompts/list return the example server entries', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const tools = await ask(gw, s.sid, 'tools/list', {}, { id: 't' });
    assert.equal(tools.r.status, 200);
    assert.equal(tools.msg.id, 't');
    const names = tools.msg.result.tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['batch', 'cancel_self', 'child_cancel', 'crash', 'echo', 'elicit', 'env', 'flood', 'garbage', 'large', 'notify', 'roots', 'sample', 'slow', 'stderr', 'stubborn'].sort());
    for (const t of tools.msg.result.tools) assert.equal(t.inputSchema.type, 'object', t.name);

    const res = await ask(gw, s.sid, 'resources/list', {}, { id: 7 });
    assert.equal(res.msg.id, 7);
    assert.deepEqual(res.msg.result.resources, [{ uri: 'example://hello', name: 'hello', mimeType: 'text/plain' }]);

    const prompts = await ask(gw, s.sid, 'prompts/list', {}, { id: 'p' });
    assert.deepEqual(prompts.msg.result.prompts.map((p) => p.name), ['greet']);

    const echo = await callTool(gw, s.sid, 'echo', { text: 'héllo ✓' }, { id: 'e' });
    assert.equal(echo.response.result.content[0].text, 'héllo ✓');
  } finally {
    await gw.stop();
  }
});

// --- protocol versions ------------------------------------------------------------------------

for (const v of VERSIONS) {
  test(`protocol ${v} negotiates and its MCP-Protocol-Version header is accepted`, async () => {
    const gw = await startGateway();
    try {
      const s = await initSession(gw, { version: v });
      assert.equal(s.result.protocolVersion, v);
      const { r, msg } = await ask(gw, s.sid, 'tools/list', {}, { id: 'l', headers: { 'MCP-Protocol-Version': v } });
      assert.equal(r.status, 200, r.text());
      assert.ok(msg?.result?.tools?.length > 0, r.text());
      const g = await get(gw, { sid: s.sid, headers: { 'MCP-Protocol-Version': v } });
      assert.equal(g.status, 200);
      g.drop();
    } finally {
      await gw.stop();
    }
  });
}

test('a child answering initialize with 2024-11-05: JSON-RPC error, session gone, child reaped', async (t) => {
  if (pooledSkip(t, 'a pooled initialize is answered from the pool\'s handshake: a 2024-11-05 child is bridged, its sessions given a revision the gateway serves (PROTOCOL.md)')) return;
  const gw = await startGateway({ servers: [{ name: 'old', path: '/mcp', args: ['--protocol-version', '2024-11-05'] }] });
  try {
    const r = await post(gw, initMsg('2025-06-18', 'init-old'));
    await r.done();
    assert.equal(r.status, 200, r.text());
    const sid = r.headers['mcp-session-id'];
    assert.ok(sid);
    const ev = r.events().find((e) => e.json?.id === 'init-old');
    assert.ok(ev, r.text());
    assert.ok(ev.json.error, `an error, not a result: ${r.text()}`);
    assert.equal(typeof ev.json.error.code, 'number');
    assert.match(ev.json.error.message, /protocol version/i);
    assert.match(ev.json.error.message, /not serve/i);
    assert.ok(!r.text().includes('2024-11-05"'), 'the unsupported result is not relayed');
    const pid = Number(new RegExp(`session=${reEscape(sid)} session created: server=old child=(\\d+)`).exec(gw.logs())[1]);
    assert.equal(await pingStatus(gw, sid), 404);
    await waitFor(() => !pidAlive(pid), 8000, 'child reaped');
  } finally {
    await gw.stop();
  }
});

// --- one child per session, DELETE, idle expiry -----------------------------------------------

test('one child per session: two sessions, two live children of the gateway', async (t) => {
  if (pooledSkip(t, 'one child per session')) return;
  const gw = await startGateway();
  try {
    const a = await initSession(gw);
    const b = await initSession(gw);
    assert.ok(a.pid && b.pid);
    assert.notEqual(a.pid, b.pid);
    assert.ok(pidAlive(a.pid) && pidAlive(b.pid));
    assert.equal(parentOf(a.pid), gw.proc.pid);
    assert.equal(parentOf(b.pid), gw.proc.pid);
    assert.equal((await callTool(gw, a.sid, 'echo', { text: 'for-a' })).response.result.content[0].text, 'for-a');
    assert.equal((await callTool(gw, b.sid, 'echo', { text: 'for-b' })).response.result.content[0].text, 'for-b');
  } finally {
    await gw.stop();
  }
});

test('DELETE -> 200, the child goes away, then 404 for that session; another session keeps working', async () => {
  const gw = await startGateway();
  try {
    const a = await initSession(gw);
    const b = await initSession(gw);
    const d = await del(gw, { sid: a.sid });
    await d.done();
    assert.equal(d.status, 200);
    if (!MATRIX_POOLED) await waitFor(() => !pidAlive(a.pid), 8000, 'child of the deleted session gone'); // a pooled one has none
    assert.equal(await pingStatus(gw, a.sid), 404);
    const g = await get(gw, { sid: a.sid });
    await g.done();
    assert.equal(g.status, 404);
    const d2 = await del(gw, { sid: a.sid });
    await d2.done();
    assert.equal(d2.status, 404);
    assert.ok(pidAlive(b.pid));
    assert.equal((await callTool(gw, b.sid, 'echo', { text: 'still here' })).response.result.content[0].text, 'still here');
  } finally {
    await gw.stop();
  }
});

test('DELETE ends a request in flight with an error and closes the GET stream', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    const call = callTool(gw, s.sid, 'cancel_self', {}, { id: 'pending-1' });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'cancel_self'), 5000, 'call reached the child');
    const d = await del(gw, { sid: s.sid });
    await d.done();
    assert.equal(d.status, 200);
    const { response } = await call;
    assert.equal(response.id, 'pending-1');
    assert.equal(response.error.code, -32603);
    await g.done();
    if (!MATRIX_POOLED) await waitFor(() => !pidAlive(s.pid), 8000, 'child gone'); // a pooled session has none
  } finally {
    await gw.stop();
  }
});

test('session_idle_timeout_s=1: an idle session expires and its child is reaped; one with a GET stream does not', async (t) => {
  if (pooledSkip(t, 'a pooled session\'s sealed id still opens once its record expired (until session_max_age_s): pooled tests that expiry')) return;
  const gw = await startGateway({ gateway: { session_idle_timeout_s: 1, heartbeat_s: 1 } });
  try {
    const idle = await initSession(gw);
    const idleSince = Date.now(); // its last activity was before this
    const held = await initSession(gw);
    const g = await get(gw, { sid: held.sid });
    assert.equal(g.status, 200);
    // Probe with an initialize carrying the session id: it is looked up (400 while the session
    // lives, 404 once it is gone) but refused before it could count as activity, as a ping would.
    const probe = async () => {
      const r = await post(gw, initMsg('2025-06-18', 'probe'), { sid: idle.sid });
      await r.done();
      assert.ok([400, 404].includes(r.status), `probe: ${r.status} ${r.text()}`);
      return r.status === 404;
    };
    await waitFor(probe, 6000, 'idle session expired');
    assert.ok(Date.now() - idleSince >= 500, 'not closed long before its idle time');
    await waitFor(() => !pidAlive(idle.pid), 6000, 'idle child reaped');
    await gw.waitLog(new RegExp(`session=${reEscape(idle.sid)} session closed: session expired`));
    // two more sweeps (each sends the open GET stream a heartbeat) and the held session is still there
    const beats = (g.text().match(/^:/gm) || []).length;
    await waitFor(() => (g.text().match(/^:/gm) || []).length >= beats + 2, 5000, 'two more sweeps');
    assert.equal(g.ended, false, 'the GET stream is still open');
    assert.ok(pidAlive(held.pid));
    assert.ok(!new RegExp(`session=${reEscape(held.sid)} session closed`).test(gw.logs()));
    assert.equal(await pingStatus(gw, held.sid), 200);
    g.drop();
  } finally {
    await gw.stop();
  }
});

// --- a failing child --------------------------------------------------------------------------

test('a child crash mid-request: -32603 for that id on its stream, stream ends, then 404, child reaped', async () => {
  const gw = await startGateway();
  try {
    const s = await initSession(gw);
    const other = callTool(gw, s.sid, 'cancel_self', {}, { id: 'bystander' });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'cancel_self'), 5000, 'first call reached the child');
    const { r, events, response } = await callTool(gw, s.sid, 'crash', {}, { id: 'crash-1' });
    assert.equal(r.status, 200);
    assert.ok(r.ended, 'the stream ended');
    assert.ok(response, r.text());
    assert.equal(response.id, 'crash-1');
    assert.equal(response.error.code, -32603);
    assert.equal(events.filter((e) => e.json && ('result' in e.json || 'error' in e.json)).length, 1);
    // every other request in flight on the session is answered too
    const b = await other;
    assert.equal(b.response.id, 'bystander');
    assert.equal(b.response.error.code, -32603);
    // A pooled session outlives its shared child; the pool child's exit is logged under its tag.
    assert.equal(await pingStatus(gw, s.sid), MATRIX_POOLED ? 200 : 404);
    await waitFor(() => !pidAlive(s.pid), 8000, 'child reaped');
    // The gateway logs the exit when it reaps; the log pipe may be read after the pid is gone.
    await gw.waitLog(new RegExp(`session=${MATRIX_POOLED ? 'pool:example\\\\?#\\d+' : reEscape(s.sid)} child ${s.pid} exited with status 3`));
  } finally {
    await gw.stop();
  }
});

test('the child stderr appears in the gateway log with the session id', async (t) => {
  if (pooledSkip(t, 'a shared child\'s stderr is logged under its pool tag, no session\'s')) return;
  const gw = await startGateway({ servers: [{ name: 'noisy', path: '/mcp', args: ['--stderr-noise', '3'] }] });
  try {
    const s = await initSession(gw);
    const sid = reEscape(s.sid);
    for (let i = 1; i <= 3; i++) await gw.waitLog(new RegExp(`session=${sid} child stderr: .*noise ${i} of 3`));
    const { response } = await callTool(gw, s.sid, 'stderr', { lines: 2 });
    assert.equal(response.result.content[0].text, 'ok');
    await gw.waitLog(new RegExp(`session=${sid} child stderr: .*stderr line 2 of 2`));
  } finally {
    await gw.stop();
  }
});

test('heartbeat_s=1: a GET stream receives an SSE comment within 3 s', async () => {
  const gw = await startGateway({ gateway: { heartbeat_s: 1 } });
  try {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    assert.match(g.headers['content-type'], /^text\/event-stream/);
    await waitFor(() => /^:/m.test(g.text()), 3000, 'an SSE comment');
    assert.deepEqual(g.events(), [], 'heartbeats are comments, not events');
    assert.equal(await pingStatus(gw, s.sid), 200);
    g.drop();
  } finally {
    await gw.stop();
  }
});
