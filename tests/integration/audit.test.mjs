// SPDX-License-Identifier: MIT
// The audit trail ([gateway] audit_log, audit_arguments_max_bytes, audit_required), with the real
// gateway and real children: a record per audited call of a session and per stateless request,
// checked field by field for each outcome (result, error, cancelled) and each cancel cause a test
// can bring about (the client's cancel, a disconnect, a timeout, DELETE, the operator, a
// shutdown); session start and end records; refusals by authentication (401, 403) and by tool
// policy, and those made before a request is in flight, in both eras (Origin, 413, the stateless
// _meta checks, the rate limit and the quotas' 429, an unknown session, a drained server's 503);
// the journal form, and a journal that cannot take a record (its receiver stopped, so its queue
// is full; its receiver and socket gone) with audit_required 0 and 1, then back; SIGUSR1
// reopening the file after a rename; and a file at its size limit (RLIMIT_FSIZE on the gateway)
// with audit_required 0 (calls go on, failures counted) and 1 (503 until records can be written
// again).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  callTool, del, initSession, MATRIX_POOLED, metricSamples, pooledLabel, pooledSkip, post, request, rpc, startGateway, tmpdir, waitFor, withGateway,
} from '../lib/gw.mjs';
import { exchange, mpost } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2026-07-28';
const sha256hex = (s) => crypto.createHash('sha256').update(s).digest('hex');
const RFC3339_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/** What the trail names a session by: its id, or a pooled session's label (its id is a bearer secret). */
const whereOf = (sid) => (MATRIX_POOLED ? pooledLabel(sid) : sid);

/** The records of an audit file: every line one JSON object. */
function records(file) {
  let text = '';
  try { text = fs.readFileSync(file, 'utf8'); } catch { return []; }
  assert.ok(text === '' || text.endsWith('\n'), `the file ends with a whole line: ${JSON.stringify(text.slice(-80))}`);
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
const waitRecord = (file, pred, what) => waitFor(() => records(file).find(pred), scaled(10000), what);

/** A stateless request's body, with its _meta envelope. */
function smsg(method, params, id) {
  return {
    jsonrpc: '2.0', id, method,
    params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {}, ...(params._meta || {}) } },
  };
}

/** The fields every call record has, whatever its outcome. */
function assertCall(rec, { server = 'example', method = 'tools/call', name, id, body, args }) {
  assert.match(rec.time, RFC3339_MS);
  assert.equal(rec.event, 'call');
  assert.equal(rec.server, server);
  assert.equal(rec.method, method);
  assert.equal(rec.name, name);
  assert.deepEqual(rec.request_id, id);
  assert.equal(rec.principal, 'address:127.0.0.1');
  assert.equal(rec.auth, 'none');
  assert.equal(rec.client, '127.0.0.1');
  assert.equal(rec.trace_id, undefined, 'no trace id until trace context is carried');
  assert.equal(rec.arguments_sha256, sha256hex(JSON.stringify(args)));
  assert.equal(rec.arguments, undefined, 'no arguments without audit_arguments_max_bytes');
  assert.equal(rec.bytes_in, Buffer.byteLength(JSON.stringify(body)));
  assert.equal(typeof rec.duration_ms, 'number');
  assert.ok(rec.duration_ms >= 0);
}

test('sessions: a record per audited call, each outcome and cancel cause field by field; session start and end', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file }, servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 60000' }] }, async (gw) => {
    const s = await initSession(gw);
    const start = await waitRecord(file, (r) => r.event === 'session_start', 'session_start');
    assert.equal(start.session, whereOf(s.sid));
    assert.equal(start.server, 'example');
    assert.equal(start.principal, 'address:127.0.0.1');
    assert.equal(start.client, '127.0.0.1');
    assert.match(start.time, RFC3339_MS);

    // result
    const args = { text: 'hi "there"', tag: 'r1' };
    const body1 = rpc('tools/call', { name: 'echo', arguments: args }, 'r-1');
    const r1 = await post(gw, body1, { sid: s.sid });
    await r1.done(scaled(5000));
    const rec1 = await waitRecord(file, (r) => r.request_id === 'r-1', 'the result record');
    assertCall(rec1, { name: 'echo', id: 'r-1', body: body1, args });
    assert.equal(rec1.session, whereOf(s.sid));
    assert.equal(rec1.outcome, 'result');
    assert.equal(rec1.error_code, undefined);
    assert.equal(rec1.cancel_cause, undefined);
    assert.ok(rec1.bytes_out > 0);

    // error, with the child's code; a number id stays a number
    const body2 = rpc('tools/call', { name: 'no_such_tool', arguments: {} }, 7);
    const r2 = await post(gw, body2, { sid: s.sid });
    await r2.done(scaled(5000));
    const rec2 = await waitRecord(file, (r) => r.request_id === 7, 'the error record');
    assertCall(rec2, { name: 'no_such_tool', id: 7, body: body2, args: {} });
    assert.equal(rec2.outcome, 'error');
    assert.equal(typeof rec2.error_code, 'number');
    assert.ok(rec2.error_code < 0);

    // cancelled by the client
    const body3 = rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'c' } }, 'c-1');
    const r3 = await post(gw, body3, { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'c'), scaled(5000), 'child read c-1');
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c-1' } }, { sid: s.sid });
    await c.done();
    await r3.done(scaled(5000));
    const rec3 = await waitRecord(file, (r) => r.request_id === 'c-1', 'the client cancel record');
    assertCall(rec3, { name: 'cancel_self', id: 'c-1', body: body3, args: { tag: 'c' } });
    assert.equal(rec3.outcome, 'cancelled');
    assert.equal(rec3.cancel_cause, 'client');

    // cancelled by a disconnect
    const body4 = rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'd' } }, 'd-1');
    const r4 = await post(gw, body4, { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'd'), scaled(5000), 'child read d-1');
    r4.drop();
    const rec4 = await waitRecord(file, (r) => r.request_id === 'd-1', 'the disconnect record');
    assert.equal(rec4.outcome, 'cancelled');
    assert.equal(rec4.cancel_cause, 'client_disconnected');

    // Not audited: tools/list, ping.
    await (await post(gw, rpc('tools/list', {}, 'l-1'), { sid: s.sid })).done(scaled(5000));
    // cancelled by DELETE: the call and the session's end
    const body5 = rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'x' } }, 'x-1');
    const r5 = await post(gw, body5, { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'x'), scaled(5000), 'child read x-1');
    const d = await del(gw, { sid: s.sid });
    await d.done();
    await r5.done(scaled(5000));
    const rec5 = await waitRecord(file, (r) => r.request_id === 'x-1', 'the DELETE record');
    assert.equal(rec5.outcome, 'cancelled');
    assert.equal(rec5.cancel_cause, 'deleted');
    const end = await waitRecord(file, (r) => r.event === 'session_end', 'session_end');
    assert.equal(end.session, whereOf(s.sid));
    assert.equal(end.detail, 'deleted');
    assert.equal(end.principal, 'address:127.0.0.1');
    assert.ok(!records(file).some((r) => r.method === 'tools/list' || r.request_id === 'l-1'), 'tools/list of a session is not audited');

    // cancelled by the shutdown
    const s2 = await initSession(gw);
    const body6 = rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'z' } }, 'z-1');
    await post(gw, body6, { sid: s2.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'z'), scaled(5000), 'child read z-1');
    await gw.stop();
    const rec6 = records(file).find((r) => r.request_id === 'z-1');
    assert.ok(rec6, 'the shutdown record');
    assert.equal(rec6.outcome, 'cancelled');
    assert.equal(rec6.cancel_cause, 'shutdown');
    // A pooled session's id outlives this instance (it opens until session_max_age_s): no end.
    assert.equal(records(file).find((r) => r.event === 'session_end' && r.session === whereOf(s2.sid))?.detail, MATRIX_POOLED ? undefined : 'shutdown');
    // Nothing of the request but what is listed: no header, no environment.
    assert.ok(!fs.readFileSync(file, 'utf8').includes('Accept'), 'no header in the trail');
  });
});

test('sessions: a request timeout and the operator\'s end of a session are each a cancel cause', async (t) => {
  if (pooledSkip(t, 'the operator\'s end of a session (POST /admin/sessions/ID/end) is for child-mode sessions (a pooled one\'s id is never shown)')) return;
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  const token = crypto.randomBytes(24).toString('hex');
  const tokenFile = path.join(dir, 'admin.token');
  fs.writeFileSync(tokenFile, token, { mode: 0o600 });
  await withGateway({
    gateway: { audit_log: file, admin_token_file: tokenFile },
    servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }],
  }, async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: {} }, 't-1'), { sid: s.sid });
    await r.done(scaled(10000));
    const rec = await waitRecord(file, (x) => x.request_id === 't-1', 'the timeout record');
    assert.equal(rec.outcome, 'cancelled');
    assert.equal(rec.cancel_cause, 'timeout');
    assert.ok(rec.duration_ms >= 250, `duration ${rec.duration_ms}`);
  });
  await withGateway({ gateway: { audit_log: file, admin_token_file: tokenFile } }, async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'a' } }, 'a-1'), { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'a'), scaled(5000), 'child read a-1');
    const a = await request(`${gw.base}/admin/sessions/${s.sid}/end`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
    await a.done();
    assert.equal(a.status, 200, a.text());
    await r.done(scaled(5000));
    const rec = await waitRecord(file, (x) => x.request_id === 'a-1', 'the admin record');
    assert.equal(rec.outcome, 'cancelled');
    assert.equal(rec.cancel_cause, 'admin');
    assert.equal((await waitRecord(file, (x) => x.event === 'session_end' && x.session === s.sid, 'session_end')).detail, 'admin');
  });
});

test('stateless: a record per pooled request, with its pool child; result, error, disconnect, timeout, shutdown', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file, audit_arguments_max_bytes: 10 }, servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 60000\nrequest_timeout_max_ms = 0' }] }, async (gw) => {
    const args = { text: 'héllo wörld, and more' };
    const body1 = smsg('tools/call', { name: 'echo', arguments: args }, 's-1');
    const { answer } = await exchange(gw, body1);
    assert.ok(answer.result, JSON.stringify(answer));
    const rec1 = await waitRecord(file, (r) => r.request_id === 's-1', 'the stateless result');
    assert.equal(rec1.outcome, 'result');
    assert.match(rec1.pool_child, /^pool:example#\d+$/);
    assert.equal(rec1.session, undefined);
    assert.equal(rec1.arguments_sha256, sha256hex(JSON.stringify(args)));
    assert.equal(rec1.bytes_in, Buffer.byteLength(JSON.stringify(body1)));
    assert.ok(rec1.bytes_out > 0);
    // The arguments, cut at 10 bytes on a character boundary and marked.
    const text = JSON.stringify(args);
    assert.ok(Buffer.byteLength(rec1.arguments) <= 10, rec1.arguments);
    assert.ok(text.startsWith(rec1.arguments), rec1.arguments);
    assert.equal(rec1.arguments_truncated, true);

    const { answer: a2 } = await exchange(gw, smsg('tools/call', { name: 'no_such_tool', arguments: {} }, 's-2'));
    assert.ok(a2.error);
    const rec2 = await waitRecord(file, (r) => r.request_id === 's-2', 'the stateless error');
    assert.equal(rec2.outcome, 'error');
    assert.equal(rec2.error_code, a2.error.code);

    // A stateless request of any method is recorded (here tools/list).
    await exchange(gw, smsg('tools/list', {}, 's-3'));
    assert.equal((await waitRecord(file, (r) => r.request_id === 's-3', 'tools/list')).method, 'tools/list');

    const r4 = await mpost(gw, smsg('tools/call', { name: 'cancel_self', arguments: {}, _meta: { progressToken: 'p4' } }, 's-4'));
    await r4.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    r4.drop();
    const rec4 = await waitRecord(file, (r) => r.request_id === 's-4', 'the stateless disconnect');
    assert.equal(rec4.outcome, 'cancelled');
    assert.equal(rec4.cancel_cause, 'client_disconnected');

    const r5 = await mpost(gw, smsg('tools/call', { name: 'cancel_self', arguments: {}, _meta: { progressToken: 'p5' } }, 's-5'));
    await r5.waitEvent((j) => j.method === 'notifications/progress', scaled(10000));
    await gw.stop();
    const rec5 = records(file).find((r) => r.request_id === 's-5');
    assert.equal(rec5?.outcome, 'cancelled', JSON.stringify(rec5));
    assert.equal(rec5.cancel_cause, 'shutdown');
  });
  await withGateway({ gateway: { audit_log: file }, servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }] }, async (gw) => {
    const r = await mpost(gw, smsg('tools/call', { name: 'cancel_self', arguments: {} }, 's-6'));
    await r.done(scaled(10000));
    const rec = await waitRecord(file, (x) => x.request_id === 's-6', 'the stateless timeout');
    assert.equal(rec.outcome, 'cancelled');
    assert.equal(rec.cancel_cause, 'timeout');
  });
});

test('stateless: a listen ended by a reload that changes its server is cancelled, cause reload; a pool child that crashes, cause child_ended', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file } }, async (gw) => {
    const l = await mpost(gw, smsg('subscriptions/listen', { notifications: { toolsListChanged: true } }, 'L-1'));
    await l.waitEvent((j) => j.method === 'notifications/subscriptions/acknowledged', scaled(10000));
    fs.appendFileSync(gw.conf, 'cache_ttl_ms = 4321\n'); // the last section is the server's: changed
    gw.proc.kill('SIGHUP');
    await l.done(scaled(10000));
    const rec = await waitRecord(file, (r) => r.request_id === 'L-1', 'the listen record');
    assert.equal(rec.method, 'subscriptions/listen');
    assert.equal(rec.outcome, 'cancelled');
    assert.equal(rec.cancel_cause, 'reload');

    const { answer } = await exchange(gw, smsg('tools/call', { name: 'crash', arguments: {} }, 'k-1'));
    assert.ok(answer?.error, JSON.stringify(answer));
    const k = await waitRecord(file, (r) => r.request_id === 'k-1', 'the crash record');
    assert.equal(k.outcome, 'cancelled');
    assert.equal(k.cancel_cause, 'child_ended');
  });
});

test('sessions: a child that crashes ends its call, cause child_ended, and its session', async (t) => {
  if (pooledSkip(t, 'a pooled session outlives its child\'s crash: the call ends, the session does not')) return;
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file } }, async (gw) => {
    const s = await initSession(gw);
    const r = await post(gw, rpc('tools/call', { name: 'crash', arguments: {} }, 'k-2'), { sid: s.sid });
    await r.done(scaled(10000));
    const k = await waitRecord(file, (x) => x.request_id === 'k-2', 'the crash record');
    assert.equal(k.outcome, 'cancelled');
    assert.equal(k.cancel_cause, 'child_ended');
    assert.equal((await waitRecord(file, (x) => x.event === 'session_end', 'session_end')).detail, 'child_exited');
  });
});

test('refusals: 403 (a scope missing) and 401 by authentication and a tool denied by policy are recorded; no token in the trail', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  const tokensFile = path.join(dir, 'tokens');
  const tok = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(tokensFile, `sha256:${sha256hex(tok)} alice\n`, { mode: 0o600 });
  await withGateway({
    gateway: { audit_log: file },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', extra: 'denied_tools = crash' }, { name: 'scoped', path: '/scoped', extra: 'required_scopes = mcp:admin' }],
  }, async (gw) => {
    const r403 = await mpost(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'u-0'), { bearer: tok, path: '/scoped' });
    await r403.done();
    assert.equal(r403.status, 403);
    const ref403 = await waitRecord(file, (x) => x.event === 'refused_auth' && x.http_status === 403, 'refused_auth 403');
    assert.equal(ref403.server, 'scoped');
    assert.match(ref403.detail, /scope/);

    const bad = `${tok}x`;
    const r = await mpost(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'u-1'), { bearer: bad });
    await r.done();
    assert.equal(r.status, 401);
    const ref = await waitRecord(file, (x) => x.event === 'refused_auth' && x.http_status === 401, 'refused_auth');
    assert.equal(ref.http_status, 401);
    assert.equal(ref.server, 'example');
    assert.equal(ref.client, '127.0.0.1');
    assert.equal(ref.auth, 'bearer');
    assert.equal(typeof ref.detail, 'string');

    const { answer } = await exchange(gw, smsg('tools/call', { name: 'crash', arguments: { k: 1 } }, 'p-1'), { bearer: tok });
    assert.ok(answer.error);
    const pol = await waitRecord(file, (x) => x.event === 'refused_policy', 'refused_policy');
    assert.equal(pol.principal, 'alice');
    assert.equal(pol.auth, 'bearer');
    assert.equal(pol.name, 'crash');
    assert.equal(pol.request_id, 'p-1');
    assert.equal(pol.error_code, -32602);
    assert.match(pol.detail, /denied_tools/);
    assert.equal(records(file).filter((x) => x.request_id === 'p-1' && x.event.startsWith('refused_')).length, 1, 'one refusal record');

    const { answer: ok } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'a' } }, 'p-2'), { bearer: tok });
    assert.ok(ok.result);
    assert.equal((await waitRecord(file, (x) => x.request_id === 'p-2', 'the call')).principal, 'alice');
    const all = fs.readFileSync(file, 'utf8');
    assert.ok(!all.includes(tok), 'the token is never in the trail');
    assert.ok(!all.includes(sha256hex(tok)), 'nor its hash');
  });
});

/** The refusal records of an audit file made after the first `skip` records. */
const refusalAfter = (file, skip, pred, what) => waitFor(() => records(file).slice(skip).find((x) => x.event.startsWith('refused_') && pred(x)), scaled(10000), what);

test('refusals before a request is in flight, both eras: Origin, Host, 413, the stateless _meta checks, quotas (429), an unknown session, a drained server (503), each field by field; no token in the trail', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  const tokensFile = path.join(dir, 'tokens');
  const tok = crypto.randomBytes(24).toString('hex');
  fs.writeFileSync(tokensFile, `sha256:${sha256hex(tok)} alice\n`, { mode: 0o600 });
  const admin = crypto.randomBytes(24).toString('hex');
  const adminFile = path.join(dir, 'admin.token');
  fs.writeFileSync(adminFile, admin, { mode: 0o600 });
  const traceId = crypto.randomBytes(16).toString('hex');
  const tp = `00-${traceId}-${crypto.randomBytes(8).toString('hex')}-01`;
  await withGateway({
    gateway: { audit_log: file, max_body_bytes: 2048, trace_context: 'propagate', admin_token_file: adminFile },
    auth: { mode: 'bearer', public_url: 'https://mcp.test.example', tokens_file: tokensFile },
    servers: [{ name: 'example', path: '/mcp', extra: 'max_inflight_per_principal = 1\nrequest_timeout_ms = 60000' }],
  }, async (gw) => {
    const auth = { Authorization: `Bearer ${tok}` };
    /** The fields every refusal of alice's request has. */
    const who = (x, principal = 'alice') => {
      assert.match(x.time, RFC3339_MS);
      assert.equal(x.server, 'example');
      assert.equal(x.client, '127.0.0.1');
      assert.equal(x.auth, 'bearer');
      assert.equal(x.principal, principal ?? undefined);
    };
    let n = records(file).length;

    // Origin: refused by policy before the token is read (no principal yet), the body unread.
    const o = await mpost(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'o-1'), { bearer: tok, headers: { Origin: 'http://evil.example' } });
    await o.done();
    assert.equal(o.status, 403);
    const ro = await refusalAfter(file, n, (x) => x.http_status === 403, 'the Origin refusal');
    who(ro, null);
    assert.equal(ro.event, 'refused_policy');
    assert.equal(ro.error_code, -32600);
    assert.equal(ro.detail, 'Origin not allowed');
    assert.equal(ro.method, undefined, 'the body was not read');
    n = records(file).length;
    const h = await mpost(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'h-1'), { bearer: tok, headers: { Host: 'evil.example' } });
    await h.done();
    assert.equal(h.status, 403);
    const rh = await refusalAfter(file, n, (x) => x.http_status === 403, 'the Host refusal');
    who(rh, null);
    assert.equal(rh.event, 'refused_policy');
    assert.equal(rh.detail, 'Host not allowed');
    n = records(file).length;

    // 413: over max_body_bytes, refused from its headers (alice is known, the body is not read).
    const big = await mpost(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'x'.repeat(4096) } }, 'b-1'), { bearer: tok });
    await big.done();
    assert.equal(big.status, 413);
    const rb = await refusalAfter(file, n, (x) => x.http_status === 413, 'the 413 refusal');
    who(rb);
    assert.equal(rb.event, 'refused_limit');
    assert.equal(rb.error_code, -32600);
    assert.match(rb.detail, /max_body_bytes/);
    assert.equal(rb.method, undefined);
    n = records(file).length;

    // Stateless _meta checks: the body was read, so its id, method, name and trace id are known.
    const m1 = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: {}, _meta: { traceparent: tp } }, 'm-1'), { bearer: tok, headers: { 'MCP-Protocol-Version': '2099-01-01' } });
    assert.equal(m1.r.status, 400);
    assert.equal(m1.answer.error.code, -32020);
    const r1 = await refusalAfter(file, n, (x) => x.request_id === 'm-1', 'the -32020 refusal');
    who(r1);
    assert.equal(r1.event, 'refused_request');
    assert.equal(r1.http_status, 400);
    assert.equal(r1.error_code, -32020);
    assert.equal(r1.method, 'tools/call');
    assert.equal(r1.name, 'echo');
    assert.equal(r1.trace_id, traceId);
    assert.match(r1.detail, /MCP-Protocol-Version/);
    n = records(file).length;
    const bad = smsg('tools/call', { name: 'echo', arguments: {} }, 'm-2');
    bad.params._meta['io.modelcontextprotocol/protocolVersion'] = '2099-01-01';
    const m2 = await exchange(gw, bad, { bearer: tok, headers: { 'MCP-Protocol-Version': '2099-01-01', traceparent: tp } });
    assert.equal(m2.r.status, 400);
    assert.equal(m2.answer.error.code, -32022);
    const r2 = await refusalAfter(file, n, (x) => x.request_id === 'm-2', 'the -32022 refusal');
    who(r2);
    assert.equal(r2.error_code, -32022);
    assert.equal(r2.http_status, 400);
    assert.equal(r2.trace_id, traceId, 'the trace id of the traceparent header');
    n = records(file).length;
    const nometa = { jsonrpc: '2.0', id: 'm-3', method: 'tools/call', params: { name: 'echo', arguments: {} } };
    const m3 = await exchange(gw, nometa, { bearer: tok });
    assert.equal(m3.r.status, 400);
    const r3 = await refusalAfter(file, n, (x) => x.request_id === 'm-3', 'the -32602 refusal');
    assert.equal(r3.error_code, -32602);
    assert.match(r3.detail, /protocolVersion/);
    assert.equal(r3.trace_id, undefined, 'no trace sent, none recorded');

    // Quotas (max_inflight_per_principal = 1, both eras in one count): a session's call in flight,
    // then a second call of the session and a stateless call are refused with 429.
    const s = await initSession(gw, { headers: auth });
    const hold = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'q' } }, 'q-1'), { sid: s.sid, headers: auth });
    await waitFor(() => gw.childMessages().some((m) => m.params?.arguments?.tag === 'q'), scaled(5000), 'child read q-1');
    n = records(file).length;
    const q2 = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'q' } }, 'q-2'), { sid: s.sid, headers: auth });
    await q2.done();
    assert.equal(q2.status, 429);
    const rq2 = await refusalAfter(file, n, (x) => x.request_id === 'q-2', 'the session quota refusal');
    who(rq2);
    assert.equal(rq2.event, 'refused_limit');
    assert.equal(rq2.http_status, 429);
    assert.equal(rq2.error_code, -32603);
    assert.equal(rq2.method, 'tools/call');
    assert.equal(rq2.name, 'echo');
    assert.match(rq2.detail, /max_inflight_per_principal|principal/);
    const q3 = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'q-3'), { bearer: tok });
    assert.equal(q3.r.status, 429);
    const rq3 = await refusalAfter(file, n, (x) => x.request_id === 'q-3', 'the pool quota refusal');
    who(rq3);
    assert.equal(rq3.event, 'refused_limit');
    assert.equal(rq3.http_status, 429);
    assert.equal(rq3.error_code, q3.answer.error.code);
    assert.equal(rq3.name, 'echo');
    assert.ok(!records(file).some((x) => x.event === 'call' && (x.request_id === 'q-2' || x.request_id === 'q-3')), 'a refused call has no call record');
    hold.drop();

    // An unknown session (legacy): 404.
    n = records(file).length;
    const u = await post(gw, rpc('tools/call', { name: 'echo', arguments: {} }, 'u-1'), { sid: 'gw-no-such-session', headers: auth });
    await u.done();
    assert.equal(u.status, 404);
    const ru = await refusalAfter(file, n, (x) => x.request_id === 'u-1', 'the unknown session refusal');
    who(ru);
    assert.equal(ru.event, 'refused_request');
    assert.equal(ru.http_status, 404);

    // A drained server: 503 for a new session and for a stateless request.
    const d = await request(`${gw.base}/admin/servers/example/drain`, { method: 'POST', headers: { Authorization: `Bearer ${admin}` } });
    await d.done();
    assert.equal(d.status, 200, d.text());
    n = records(file).length;
    const i = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }, 'i-1'), { headers: auth });
    await i.done();
    assert.equal(i.status, 503);
    const ri = await refusalAfter(file, n, (x) => x.request_id === 'i-1', 'the drained initialize');
    who(ri);
    assert.equal(ri.event, 'refused_unavailable');
    assert.equal(ri.method, 'initialize');
    assert.equal(ri.http_status, 503);
    assert.equal(ri.error_code, -32603);
    assert.match(ri.detail, /drained/);
    const dz = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: {} }, 'z-1'), { bearer: tok });
    assert.equal(dz.r.status, 503);
    const rz = await refusalAfter(file, n, (x) => x.request_id === 'z-1', 'the drained stateless call');
    assert.equal(rz.event, 'refused_unavailable');
    assert.equal(rz.principal, 'alice');

    const all = fs.readFileSync(file, 'utf8');
    assert.ok(!all.includes(tok) && !all.includes(sha256hex(tok)), 'no token in the trail');
    assert.ok(!all.includes(admin), 'no admin token in the trail');
  });
});

test('refusals: a call refused with 503 because its child\'s stdin queue is full is recorded as the refusal, not as a call', async (t) => {
  if (pooledSkip(t, 'a session\'s own child\'s stdin queue (a pooled call waits in the pool\'s queue)')) return;
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  const hostile = fileURLToPath(new URL('../fixtures/hostile.mjs', import.meta.url));
  await withGateway({
    gateway: { audit_log: file, stdin_queue_bytes: 65536, max_body_bytes: 32768, child_stdin_grace_ms: 200, child_term_grace_ms: 300, log_level: 'info' },
    servers: [{ name: 'hostile', path: '/mcp', command: `${process.execPath} ${hostile} no-stdin` }],
  }, async (gw) => {
    const s = await initSession(gw);
    const held = [];
    let refused = null;
    let id = null;
    for (let i = 0; i < 64 && !refused; i++) {
      id = `sq-${i}`;
      const r = await post(gw, rpc('tools/call', { name: 'slow', arguments: { pad: 'p'.repeat(8192) } }, id), { sid: s.sid });
      if (r.status === 200) held.push(r);
      else refused = r;
    }
    assert.ok(refused, 'a 503 within 64 calls of 8 KiB');
    await refused.done();
    assert.equal(refused.status, 503, refused.text());
    const x = await waitRecord(file, (r) => r.request_id === id, 'the refusal');
    assert.equal(x.event, 'refused_unavailable');
    assert.equal(x.http_status, 503);
    assert.equal(x.error_code, -32603);
    assert.equal(x.method, 'tools/call');
    assert.equal(x.name, 'slow');
    assert.equal(x.server, 'hostile');
    assert.equal(x.principal, 'address:127.0.0.1');
    assert.equal(x.client, '127.0.0.1');
    assert.match(x.detail, /not reading its input/);
    assert.equal(records(file).filter((r) => r.request_id === id).length, 1, 'no call record beside it');
    for (const r of held) r.drop();
  });
});

test('refusals: the rate limit (429) is recorded with its principal, both eras', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file }, auth: { mode: 'none', rate_limit_per_s: 1, rate_limit_burst: 1 } }, async (gw) => {
    for (const era of ['legacy', 'stateless']) {
      const n = records(file).length;
      const limited = await waitFor(async () => {
        const r = era === 'legacy'
          ? await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }, `${era}-r`))
          : await mpost(gw, smsg('tools/call', { name: 'echo', arguments: {} }, `${era}-r`));
        await r.done();
        return r.status === 429 ? r : null;
      }, scaled(10000), `a ${era} 429`);
      assert.equal(limited.status, 429);
      const x = await refusalAfter(file, n, (y) => y.http_status === 429, `the ${era} rate limit refusal`);
      assert.equal(x.event, 'refused_limit');
      assert.equal(x.principal, 'address:127.0.0.1');
      assert.equal(x.auth, 'none');
      assert.equal(x.client, '127.0.0.1');
      assert.equal(x.server, 'example');
      assert.equal(x.error_code, -32603);
      assert.match(x.detail, /rate_limit_per_s/);
      assert.equal(x.method, undefined, 'refused before the body was read');
    }
  });
});

test('audit_log = journal: each record one journal entry with its fields', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const sock = path.join(dir, 'journal.sock');
  const p = spawn(process.env.GW_JOURNAL_SINK, [sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d.toString('latin1'); });
  const exited = new Promise((res) => p.on('exit', res));
  try {
    await waitFor(() => fs.existsSync(sock), scaled(5000), 'the journal receiver');
    await withGateway({ gateway: { audit_log: 'journal' }, env: { MCPGW_JOURNAL_SOCKET: sock } }, async (gw) => {
      const s = await initSession(gw);
      await callTool(gw, s.sid, 'echo', { text: 'j' }, { id: 'j-1' });
      const entries = () => out.split('\n').slice(0, -1).map((l) => JSON.parse(l)).filter((e) => e.MCPGW_AUDIT === '1');
      const e = await waitFor(() => entries().find((x) => x.MCPGW_AUDIT_EVENT === 'call'), scaled(5000), 'the call entry');
      assert.equal(e.MCPGW_AUDIT_METHOD, 'tools/call');
      assert.equal(e.MCPGW_AUDIT_NAME, 'echo');
      assert.equal(e.MCPGW_AUDIT_OUTCOME, 'result');
      assert.equal(e.MCPGW_AUDIT_SERVER, 'example');
      assert.equal(e.MCPGW_AUDIT_PRINCIPAL, 'address:127.0.0.1');
      assert.equal(e.MCPGW_AUDIT_WHERE, whereOf(s.sid));
      const m = JSON.parse(e.MESSAGE);
      assert.equal(m.request_id, 'j-1');
      assert.equal(m.outcome, 'result');
      assert.ok(entries().some((x) => x.MCPGW_AUDIT_EVENT === 'session_start'));
    });
  } finally {
    p.kill('SIGTERM');
    await exited;
  }
});

/** The journal sink fixture on sock: its audit entries so far, and its end. */
function journalSink(sock) {
  const p = spawn(process.env.GW_JOURNAL_SINK, [sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d.toString('latin1'); });
  const exited = new Promise((res) => p.on('exit', res));
  return {
    p,
    entries: () => out.split('\n').slice(0, -1).map((l) => JSON.parse(l)).filter((e) => e.MCPGW_AUDIT === '1'),
    async end() {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGCONT');
        p.kill('SIGTERM');
      }
      await exited;
    },
  };
}
const metric = async (gw, name) => {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  return metricSamples(await r.done())[name];
};

test('audit_log = journal, a journal that stops reading (its queue full), audit_required = 0: calls go on, lost records are counted and logged, and records flow again once it reads', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const sock = path.join(dir, 'journal.sock');
  const sink = journalSink(sock);
  try {
    await waitFor(() => fs.existsSync(sock), scaled(5000), 'the journal receiver');
    await withGateway({ gateway: { audit_log: 'journal', audit_required: 0 }, env: { MCPGW_JOURNAL_SOCKET: sock } }, async (gw) => {
      await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'a' } }, 'ja-0'));
      await waitFor(() => sink.entries().some((e) => JSON.parse(e.MESSAGE).request_id === 'ja-0'), scaled(5000), 'the first entry');
      // Stopped, the receiver's queue (net.unix.max_dgram_qlen datagrams) fills: sendmsg fails.
      sink.p.kill('SIGSTOP');
      let i = 0;
      await waitFor(async () => {
        const { answer } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'b' } }, `ja-${++i}`));
        assert.ok(answer.result, `ja-${i} answered while its record is lost`);
        return (await metric(gw, 'mcpgw_audit_write_failures_total')) >= 1;
      }, scaled(20000), 'a failed write');
      await gw.waitLog(/audit_log journal: a record could not be written: Resource temporarily unavailable \(1 lost so far\)/);
      sink.p.kill('SIGCONT');
      // A call soon after may still find the queue full: each try is a call of its own.
      let j = 0;
      await waitFor(async () => {
        await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'c' } }, `jb-${++j}`));
        return sink.entries().some((e) => JSON.parse(e.MESSAGE).request_id === `jb-${j}`);
      }, scaled(10000), 'records reaching the journal again');
      await gw.waitLog(/audit_log journal: records are written again \(\d+ lost\)/);
      // Every record counted as written reached the journal; none of the lost ones did.
      const written = await metric(gw, 'mcpgw_audit_records_total');
      const lost = await metric(gw, 'mcpgw_audit_write_failures_total');
      await waitFor(() => sink.entries().length === written, scaled(5000), `${written} entries`);
      assert.ok(lost >= 1);
      const ids = new Set(sink.entries().map((e) => JSON.parse(e.MESSAGE).request_id));
      let missing = 0;
      for (let k = 1; k <= i; k++) missing += ids.has(`ja-${k}`) ? 0 : 1;
      for (let k = 1; k <= j; k++) missing += ids.has(`jb-${k}`) ? 0 : 1;
      assert.equal(missing, lost, 'the calls without an entry are the failures counted');
    });
  } finally {
    await sink.end();
  }
});

test('audit_log = journal, a journal that vanishes, audit_required = 1: failures counted and logged, audited calls get 503 in both eras, and they pass again once the journal is back', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const sock = path.join(dir, 'journal.sock');
  let sink = journalSink(sock);
  try {
    await waitFor(() => fs.existsSync(sock), scaled(5000), 'the journal receiver');
    await withGateway({ gateway: { audit_log: 'journal', audit_required: 1 }, env: { MCPGW_JOURNAL_SOCKET: sock } }, async (gw) => {
      const s = await initSession(gw);
      await callTool(gw, s.sid, 'echo', { text: 'v' }, { id: 'jv-0' });
      await waitFor(() => sink.entries().some((e) => JSON.parse(e.MESSAGE).request_id === 'jv-0'), scaled(5000), 'the first entry');
      // The journal goes away: its socket with it.
      await sink.end();
      fs.rmSync(sock, { force: true });
      // The first call's record is the one lost: it ran already.
      const { answer: a1 } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'v' } }, 'jv-1'));
      assert.ok(a1.result);
      await waitFor(async () => (await metric(gw, 'mcpgw_audit_write_failures_total')) >= 1, scaled(5000), 'the failure counted');
      await gw.waitLog(/audit_log journal: a record could not be written: No such file or directory .*; audited calls are refused until records can be written/);
      const { r, answer } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'refused-2' } }, 'jv-2'));
      assert.equal(r.status, 503);
      assert.equal(answer.error.code, -32603);
      assert.match(answer.error.message, /audit records cannot be written/);
      const one = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'refused-3' } }, 'jv-3'), { sid: s.sid });
      await one.done(scaled(5000));
      assert.equal(one.status, 503);
      assert.match(JSON.parse(one.text()).error.message, /audit records cannot be written/);
      assert.ok(!gw.childMessages().some((m) => /^refused-/.test(m.params?.arguments?.text ?? '')), 'the refused calls never reached a child');
      // Back at the same path: within a second a call passes, after the refused_audit entry.
      sink = journalSink(sock);
      await waitFor(() => fs.existsSync(sock), scaled(5000), 'the journal receiver again');
      await waitFor(async () => {
        const x = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'w' } }, 'jv-4'));
        return x.r.status === 200 && x.answer?.result;
      }, scaled(10000), 'a call to pass again');
      const back = await waitFor(() => sink.entries().find((e) => e.MCPGW_AUDIT_EVENT === 'refused_audit'), scaled(5000), 'the refused_audit entry');
      assert.equal(JSON.parse(back.MESSAGE).http_status, 503);
      await waitFor(() => sink.entries().some((e) => e.MCPGW_AUDIT_EVENT === 'call' && JSON.parse(e.MESSAGE).request_id === 'jv-4'), scaled(5000), 'the call entry');
      await gw.waitLog(/audit_log journal: records are written again/);
      const { r: r5 } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'x' } }, 'jv-5'));
      assert.equal(r5.status, 200);
    });
  } finally {
    await sink.end();
  }
});

test('SIGUSR1 reopens the audit file after a rename', async () => {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  await withGateway({ gateway: { audit_log: file } }, async (gw) => {
    await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: '1' } }, 'b-1'));
    await waitRecord(file, (r) => r.request_id === 'b-1', 'before');
    fs.renameSync(file, `${file}.1`);
    gw.proc.kill('SIGUSR1');
    await waitFor(() => fs.existsSync(file), scaled(5000), 'the new file');
    await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: '2' } }, 'b-2'));
    await waitRecord(file, (r) => r.request_id === 'b-2', 'after, in the new file');
    assert.ok(!records(`${file}.1`).some((r) => r.request_id === 'b-2'));
    assert.ok(records(`${file}.1`).some((r) => r.request_id === 'b-1'));
  });
});

/** A gateway under RLIMIT_FSIZE = limit, its audit file filled to room bytes short of it. */
async function fullDisk(required, fn) {
  const dir = tmpdir('mcpgw-audit-');
  const file = path.join(dir, 'audit.log');
  const limit = 1 << 20;
  fs.writeFileSync(file, `${'#'.repeat(limit - 41)}\n`);
  const gw = await startGateway({ gateway: { audit_log: file, audit_required: required }, fsize: limit });
  let ok = false;
  try {
    await fn(gw, file, limit);
    ok = true;
  } finally {
    await gw.stop(ok ? undefined : { expect: null });
  }
}

const failures = async (gw) => {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  const t = await r.done();
  return metricSamples(t).mcpgw_audit_write_failures_total;
};

test('a file at its size limit, audit_required = 0: calls go on, lost records are counted and logged', async () => {
  await fullDisk(0, async (gw, file, limit) => {
    for (const id of ['f-1', 'f-2']) {
      const { answer } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: id } }, id));
      assert.ok(answer.result, `${id} answered`);
    }
    await waitFor(async () => (await failures(gw)) >= 2, scaled(5000), 'two failures counted');
    await gw.waitLog(/audit_log .*: a record could not be written: File too large/);
    assert.equal(fs.statSync(file).size, limit - 40, 'a cut record is cut off again');
  });
});

test('a file at its size limit, audit_required = 1: audited calls get 503 until records can be written', async () => {
  await fullDisk(1, async (gw, file, limit) => {
    // The first call's record is the one lost: it ran already.
    await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'g' } }, 'g-1'));
    await waitFor(async () => (await failures(gw)) >= 1, scaled(5000), 'the failure counted');
    const { r, answer } = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'g' } }, 'g-2'));
    assert.equal(r.status, 503);
    assert.equal(answer.error.code, -32603);
    assert.match(answer.error.message, /audit records cannot be written/);
    // A session's call too, and a 2025-03-26 batch holding one is refused whole.
    const s = await initSession(gw, { version: '2025-03-26' });
    const one = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'g' } }, 'g-3'), { sid: s.sid });
    await one.done(scaled(5000));
    assert.equal(one.status, 503);
    const batch = await post(gw, [rpc('tools/list', {}, 'g-4'), rpc('tools/call', { name: 'echo', arguments: { text: 'g' } }, 'g-5')], { sid: s.sid });
    await batch.done(scaled(5000));
    assert.equal(batch.status, 503, batch.text());
    assert.match(JSON.parse(batch.text()).error.message, /audit records cannot be written/);
    assert.ok(!gw.childMessages().some((m) => m.id !== undefined && m.method === 'tools/list'), 'nothing of the batch reached the child');
    // Room again: within a second a call passes, after the refused_audit record that says so.
    fs.truncateSync(file, 0);
    const passed = await waitFor(async () => {
      const x = await exchange(gw, smsg('tools/call', { name: 'echo', arguments: { text: 'h' } }, 'h-1'));
      return x.r.status === 200 && x.answer?.result ? x : null;
    }, scaled(10000), 'a call to pass again');
    assert.ok(passed);
    assert.ok(limit > 0);
    const recs = records(file);
    assert.ok(recs.some((x) => x.event === 'refused_audit' && x.http_status === 503));
    assert.ok(recs.some((x) => x.request_id === 'h-1' && x.outcome === 'result'));
  });
});
