// SPDX-License-Identifier: MIT
// W3C trace context ([gateway] trace_context): a client's traceparent (its params._meta, else the
// HTTP traceparent header) reaches the child in params._meta.traceparent with the client's trace
// id, a span id the gateway minted for its hop as the parent, and the client's flags, for a legacy
// session's request and a stateless request served by the pool; tracestate goes with it. start:
// a request with none (or a malformed one) gets a new trace. off: the child's line is the
// client's body with only the id replaced. The trace id is the access line's and the audit record's
// trace_id. What the child read is the example server's --log file, byte for byte.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { initSession, MATRIX_POOLED, post, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { mpost, msgsOf, V } from '../lib/stateless.mjs';
import { scaled } from '../lib/timing.mjs';

const META = 'io.modelcontextprotocol/';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';
const CLIENT_TP = `00-${TRACE}-${SPAN}-01`;
const W3C = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

let seq = 0;
/** A tools/call of echo with a text no other line has, and params._meta extra (may be undefined). */
function echoCall(extraMeta, stateless) {
  const text = `trace-${process.pid}-${++seq}`;
  const meta = { ...(extraMeta ?? {}) };
  if (stateless) Object.assign(meta, { [`${META}protocolVersion`]: V, [`${META}clientCapabilities`]: {} });
  const params = { name: 'echo', arguments: { text } };
  if (Object.keys(meta).length) params._meta = meta;
  return { text, msg: rpc('tools/call', params, `c-${seq}`) };
}

/** The line the child read that carries text (polled: the child logs as it reads). */
function childLine(gw, text) {
  return waitFor(() => gw.childLines().find((l) => l.includes(text)), scaled(5000), `the child's line with ${text}`);
}

/** Sends call through a legacy session (sid) or as a stateless request; the answer's text. */
async function send(gw, { sid, msg, headers = {} }) {
  const r = sid ? await post(gw, msg, { sid, headers }) : await mpost(gw, msg, { headers });
  await r.done(scaled(10000));
  assert.equal(r.status, 200, r.text());
  const answer = msgsOf(r).find((j) => j && ('result' in j || 'error' in j));
  assert.ok(answer?.result, `an answer: ${r.text()}`);
  return r;
}

/** The access log's JSON lines. */
function accessLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).filter((o) => o.type === 'access');
}

/** The audit trail's call records. */
function auditCalls(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).filter((o) => o.event === 'call');
}

async function withTrace(mode, fn) {
  const dir = tmpdir('mcpgw-trace-');
  const access = path.join(dir, 'access.log');
  const audit = path.join(dir, 'audit.log');
  const gateway = { access_log: access, access_log_format: 'json', audit_log: audit };
  if (mode !== undefined) gateway.trace_context = mode;
  const gw = await startGateway({ gateway });
  try {
    await fn(gw, () => accessLines(access), () => auditCalls(audit));
  } finally {
    await gw.stop();
  }
}

for (const era of ['legacy', 'stateless']) {
  test(`propagate (${era}): the client's trace id reaches the child with the gateway's span id as the parent`, async () => {
    await withTrace('propagate', async (gw, access, audit) => {
      const sid = era === 'legacy' ? (await initSession(gw)).sid : undefined;
      // From params._meta: its tracestate stays as it is.
      let { text, msg } = echoCall({ traceparent: CLIENT_TP, tracestate: 'congo=t61rcWkgMzE' }, era === 'stateless');
      await send(gw, { sid, msg });
      let got = JSON.parse(await childLine(gw, text));
      let m = W3C.exec(got.params._meta.traceparent);
      assert.ok(m, `a traceparent: ${JSON.stringify(got.params._meta)}`);
      assert.equal(m[1], TRACE, 'the client\'s trace id');
      assert.notEqual(m[2], SPAN, 'the parent is the gateway\'s span, not the client\'s');
      assert.notEqual(m[2], '0000000000000000');
      assert.equal(m[3], '01', 'flags kept');
      assert.equal(got.params._meta.tracestate, 'congo=t61rcWkgMzE');
      const line = await waitFor(() => access().find((l) => l.mcp_method === 'tools/call' && l.trace_id), scaled(5000), 'the access line');
      assert.equal(line.trace_id, TRACE, 'the access line\'s trace_id');
      const record = await waitFor(() => audit().find((r) => r.method === 'tools/call' && r.request_id === msg.id), scaled(5000), 'the call\'s audit record');
      assert.equal(record.trace_id, TRACE, 'the audit record\'s trace_id');
      const firstSpan = m[2];

      // From the HTTP headers (nginx passes traceparent through), flags 00 kept.
      ({ text, msg } = echoCall(undefined, era === 'stateless'));
      await send(gw, { sid, msg, headers: { traceparent: `00-${TRACE}-${SPAN}-00`, tracestate: 'rojo=00f067aa0ba902b7' } });
      got = JSON.parse(await childLine(gw, text));
      m = W3C.exec(got.params._meta.traceparent ?? '');
      assert.ok(m, `a traceparent from the header: ${JSON.stringify(got.params)}`);
      assert.equal(m[1], TRACE);
      assert.notEqual(m[2], SPAN);
      assert.notEqual(m[2], firstSpan, 'a span id per request');
      assert.equal(m[3], '00');
      assert.equal(got.params._meta.tracestate, 'rojo=00f067aa0ba902b7');
      if (era === 'stateless') assert.equal(got.params._meta[`${META}protocolVersion`], V, 'the other _meta members stay');

      // A malformed header is ignored: the child's line gets no traceparent.
      ({ text, msg } = echoCall(undefined, era === 'stateless'));
      await send(gw, { sid, msg, headers: { traceparent: `00-${TRACE}-${SPAN}-01-extra` } });
      got = JSON.parse(await childLine(gw, text));
      assert.equal(got.params._meta?.traceparent, undefined, JSON.stringify(got));
    });
  });

  test(`start (${era}): a request with no traceparent, or a malformed one, gets a new trace`, async () => {
    await withTrace('start', async (gw, access) => {
      const sid = era === 'legacy' ? (await initSession(gw)).sid : undefined;
      const seen = [];
      for (const headers of [{}, { traceparent: `00-${'0'.repeat(32)}-${SPAN}-01` }]) {
        const { text, msg } = echoCall(undefined, era === 'stateless');
        await send(gw, { sid, msg, headers });
        const got = JSON.parse(await childLine(gw, text));
        const m = W3C.exec(got.params._meta?.traceparent ?? '');
        assert.ok(m, `a new traceparent: ${JSON.stringify(got.params)}`);
        assert.notEqual(m[1], '0'.repeat(32));
        assert.notEqual(m[2], '0'.repeat(16));
        assert.equal(m[3], '01', 'a started trace is sampled');
        assert.equal(got.params._meta.tracestate, undefined);
        const line = await waitFor(() => access().find((l) => l.trace_id === m[1]), scaled(5000), 'the access line with the new trace id');
        assert.equal(line.mcp_method, 'tools/call');
        seen.push(m[1]);
      }
      assert.notEqual(seen[0], seen[1], 'a new trace id each time');
      // The gateway's own initialize of a pool's legacy child carries none; a session's
      // initialize is the client's request and carries one (a pooled session's is the gateway's
      // to answer: its child saw only the pool's own).
      const inits = gw.childMessages().filter((j) => j.method === 'initialize');
      assert.ok(inits.length >= 1);
      for (const j of inits) assert.equal(j.params?._meta?.traceparent === undefined, era === 'stateless' || MATRIX_POOLED, JSON.stringify(j));
    });
  });

  test(`off (${era}, the default): the child's line is the client's body with only the id replaced`, async () => {
    await withTrace(undefined, async (gw, access, audit) => {
      const sid = era === 'legacy' ? (await initSession(gw)).sid : undefined;
      for (const meta of [undefined, { traceparent: CLIENT_TP, tracestate: 'a=1' }]) {
        const { text, msg } = echoCall(meta, era === 'stateless');
        await send(gw, { sid, msg, headers: { traceparent: CLIENT_TP } });
        const line = await childLine(gw, text);
        const minted = /"id":(\d+)/.exec(line);
        assert.ok(minted, line);
        assert.equal(line.replace(minted[0], `"id":${JSON.stringify(msg.id)}`), JSON.stringify(msg), 'byte for byte');
      }
      const lines = await waitFor(() => { const l = access().filter((x) => x.mcp_method === 'tools/call'); return l.length === 2 && l; }, scaled(5000), 'two access lines');
      for (const l of lines) assert.equal(l.trace_id, undefined, JSON.stringify(l));
      const records = await waitFor(() => { const r = audit().filter((x) => x.method === 'tools/call'); return r.length === 2 && r; }, scaled(5000), 'two audit records');
      for (const r of records) assert.equal(r.trace_id, undefined, JSON.stringify(r));
    });
  });
}

test('propagate: a legacy batch gives each request its own span; notifications are left alone', async (t) => {
  await withTrace('propagate', async (gw) => {
    const { sid } = await initSession(gw, { version: '2025-03-26' });
    const a = echoCall({ traceparent: CLIENT_TP });
    const b = echoCall(undefined);
    const note = { jsonrpc: '2.0', method: 'notifications/roots/list_changed', params: { _meta: { traceparent: 'junk' } } };
    const r = await post(gw, [a.msg, b.msg, note], { sid, headers: { traceparent: `00-${'1'.repeat(32)}-${SPAN}-01` } });
    await r.done(scaled(10000));
    assert.equal(r.status, 200, r.text());
    const ga = JSON.parse(await childLine(gw, a.text));
    const gb = JSON.parse(await childLine(gw, b.text));
    assert.equal(W3C.exec(ga.params._meta.traceparent)[1], TRACE, 'the element\'s own _meta first');
    assert.equal(W3C.exec(gb.params._meta.traceparent)[1], '1'.repeat(32), 'else the header');
    assert.notEqual(W3C.exec(ga.params._meta.traceparent)[2], W3C.exec(gb.params._meta.traceparent)[2]);
    if (MATRIX_POOLED) { // a pooled session's notification is no shared child's
      assert.ok(!gw.childLines().some((l) => l.includes('roots/list_changed')), 'the notification stays at the gateway');
      return;
    }
    const n = await waitFor(() => gw.childLines().find((l) => l.includes('roots/list_changed')), scaled(5000), 'the notification');
    assert.equal(n, JSON.stringify(note), 'a notification passes as it came');
  });
});
