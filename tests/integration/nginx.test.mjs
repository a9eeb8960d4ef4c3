// SPDX-License-Identifier: MIT
// The gateway behind Debian's real nginx on loopback, with the shipped deploy/nginx site config:
// events stream through unbuffered, heartbeats carry a long call past nginx's read timeout, and a
// client that vanishes behind nginx gets its request cancelled at the child.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { get, initSession, post, request, rpc, startGateway, waitFor } from '../lib/gw.mjs';
import { startNginx } from '../lib/nginx.mjs';

async function withStack(gwOpts, ngOpts, fn) {
  const gw = await startGateway(gwOpts);
  let ng;
  try {
    ng = await startNginx({ gatewayPort: gw.port, ...ngOpts });
    const viaNginx = { ...gw, url: ng.url };
    await fn(gw, viaNginx, ng);
  } finally {
    if (ng) await ng.stop();
    await gw.stop();
  }
}

test('a session works end to end through nginx', async () => {
  await withStack({}, {}, async (gw, via) => {
    const s = await initSession(via);
    const r = await post(via, rpc('tools/call', { name: 'echo', arguments: { text: 'through nginx' } }, 'n1'), { sid: s.sid });
    await r.done();
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'text/event-stream');
    const resp = r.events().map((e) => e.json).find((j) => j?.id === 'n1');
    assert.equal(resp.result.content[0].text, 'through nginx');
  });
});

test('SSE events pass nginx one by one, not buffered until the end', async () => {
  await withStack({}, {}, async (gw, via) => {
    const s = await initSession(via);
    const r = await post(via, rpc('tools/call', { name: 'slow', arguments: { steps: 3, interval_ms: 400 }, _meta: { progressToken: 'pt' } }, 'n2'), { sid: s.sid });
    await r.waitEvent((j) => j.method === 'notifications/progress', 5000);
    // The first progress event arrived while the call was still running (two more steps to go).
    assert.equal(r.ended, false);
    assert.equal(r.events().some((e) => e.json?.id === 'n2'), false);
    await r.done();
    const kinds = r.events().map((e) => e.json.method || 'response');
    assert.deepEqual(kinds, ['notifications/progress', 'notifications/progress', 'notifications/progress', 'response']);
  });
});

test('heartbeats keep a silent call alive past proxy_read_timeout', async () => {
  // The call stays silent longer than nginx's read timeout; heartbeats come every second, two
  // seconds inside it, so a loaded runner that delays one still beats the timeout.
  await withStack({ gateway: { heartbeat_s: 1 } }, { readTimeout: '3s' }, async (gw, via) => {
    const s = await initSession(via);
    const r = await post(via, rpc('tools/call', { name: 'echo', arguments: { text: 'late', delay_ms: 4500 } }, 'n3'), { sid: s.sid });
    await r.done(10000);
    const resp = r.events().map((e) => e.json).find((j) => j?.id === 'n3');
    assert.ok(resp, `no response through nginx: ${r.text()}`);
    assert.equal(resp.result.content[0].text, 'late');
    assert.match(r.text(), /^: /m, 'heartbeat comments were sent');
  });
});

test('a client that vanishes behind nginx gets its request cancelled at the child', async () => {
  await withStack({}, {}, async (gw, via) => {
    const s = await initSession(via);
    const r = await post(via, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 100 } }, 'n4'), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.method === 'tools/call' && m.params?.name === 'slow'), 5000, 'call at child');
    const t0 = process.hrtime.bigint();
    r.drop();
    const cancel = await waitFor(() => gw.childMessages().find((m) => m.method === 'notifications/cancelled'), 5000, 'cancel at child');
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    console.log(`# drop -> cancel at child behind nginx (incl. log polling): ${ms.toFixed(2)} ms`);
    assert.equal(cancel.params.requestId, seen.id);
    assert.equal(cancel.params.reason, 'client disconnected');
    // The session goes on working.
    const r2 = await post(via, rpc('tools/call', { name: 'echo', arguments: { text: 'still here' } }, 'n5'), { sid: s.sid });
    await r2.done();
    assert.equal(r2.events().map((e) => e.json).find((j) => j?.id === 'n5').result.content[0].text, 'still here');
  });
});

test('a client that drops behind nginx and resumes with Last-Event-ID gets the answer; nothing is cancelled', async () => {
  await withStack({ gateway: { disconnect_grace_ms: 10000 } }, {}, async (gw, via) => {
    const s = await initSession(via);
    const r = await post(via, rpc('tools/call', { name: 'slow', arguments: { steps: 6, interval_ms: 150 }, _meta: { progressToken: 'rp' } }, 'n6'), { sid: s.sid });
    const first = await r.waitEvent((j) => j.method === 'notifications/progress', 5000);
    assert.ok(first);
    const lastId = r.events().filter((e) => e.id).at(-1).id;
    r.drop();
    await gw.waitLog(/client dropped POST stream \d+: 1 requests wait up to 10000 ms for a resume/);
    const g = await get(via, { sid: s.sid, headers: { 'Last-Event-ID': lastId, 'MCP-Protocol-Version': s.version } });
    assert.equal(g.status, 200);
    await g.done(10000);
    const evs = g.events();
    assert.ok(evs.every((e) => e.id && e.id.split('-')[0] === lastId.split('-')[0]), 'only the resumed stream\'s events');
    const resp = evs.map((e) => e.json).find((j) => j?.id === 'n6');
    assert.ok(resp?.result, `the answer came on the resumed stream: ${g.text()}`);
    assert.ok(!gw.childMessages().some((m) => m.method === 'notifications/cancelled'), 'nothing was cancelled');
  });
});

test('the 2024-11-05 transport works through nginx: GET /mcp/sse, the endpoint event, answers on the stream', async () => {
  await withStack({}, {}, async (gw, via, ng) => {
    const base = `http://127.0.0.1:${ng.port}`;
    const sseUrl = `${base}/mcp/sse`;
    const s = await request(sseUrl, { method: 'GET', headers: { Accept: 'text/event-stream' } });
    try {
      assert.equal(s.status, 200);
      assert.match(s.headers['content-type'] || '', /^text\/event-stream\b/);
      const first = await waitFor(() => s.completeEvents()[0], 5000, 'the endpoint event through nginx');
      assert.equal(first.event, 'endpoint', s.text());
      assert.match(first.data, /^messages\?sessionId=[A-Za-z0-9_.-]+$/);
      const endpoint = new URL(first.data, sseUrl);
      assert.equal(endpoint.origin, base, 'the endpoint resolves to nginx');
      assert.equal(endpoint.pathname, '/mcp/messages');
      const sid = endpoint.searchParams.get('sessionId');
      await gw.waitLog(new RegExp(`session=${sid.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')} session created`));
      const send = async (msg) => {
        const r = await request(endpoint.href, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: msg });
        await r.done();
        assert.equal(r.status, 202, `POST ${JSON.stringify(msg)} through nginx: HTTP ${r.status} ${r.text()}`);
        assert.equal(r.text(), 'Accepted');
      };
      const answer = (id) => waitFor(() => s.completeEvents().filter((e) => e.event === 'message').map((e) => e.json).find((j) => j?.id === id && ('result' in j || 'error' in j)), 5000, `the answer to ${id} on the stream`);
      await send(rpc('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'nginx-legacy', version: '1' } }, 'li'));
      const init = await answer('li');
      assert.equal(init.result?.protocolVersion, '2024-11-05', JSON.stringify(init));
      await send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      await send(rpc('tools/call', { name: 'echo', arguments: { text: 'legacy through nginx' } }, 'le'));
      const ans = await answer('le');
      assert.equal(ans.result?.content?.[0]?.text, 'legacy through nginx', JSON.stringify(ans));
      assert.equal(s.ended, false, 'the stream stays open');
    } finally {
      s.drop();
    }
  });
});

test('[auth] bearer behind nginx: the metadata and the 401 challenge pass through, a token opens a session only to its owner', async () => {
  const crypto = await import('node:crypto');
  const fs = await import('node:fs');
  const path = await import('node:path');
  const { tmpdir } = await import('../lib/gw.mjs');
  const dir = tmpdir();
  const tokens = { alice: crypto.randomBytes(24).toString('base64url'), bob: crypto.randomBytes(24).toString('base64url') };
  const line = (p) => `sha256:${crypto.createHash('sha256').update(tokens[p]).digest('hex')} ${p}\n`;
  fs.writeFileSync(path.join(dir, 'tokens'), line('alice') + line('bob'));
  const auth = { mode: 'bearer', public_url: 'https://mcp.example.com', tokens_file: path.join(dir, 'tokens') };
  await withStack({ auth }, {}, async (gw, via) => {
    const base = new URL(via.url).origin;
    for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const r = await request(base + p, { method: 'GET' });
      const body = await r.done();
      assert.equal(r.status, 200, p);
      assert.deepEqual(JSON.parse(body), { resource: 'https://mcp.example.com/mcp', bearer_methods_supported: ['header'] });
    }
    const init = rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } });
    const refused = await post(via, init);
    await refused.done();
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['www-authenticate'], 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"');
    const as = (who) => ({ Authorization: `Bearer ${tokens[who]}`, 'MCP-Protocol-Version': '2025-06-18' });
    const ok = await post(via, init, { headers: as('alice') });
    await ok.done();
    assert.equal(ok.status, 200);
    const sid = ok.headers['mcp-session-id'];
    const call = rpc('tools/call', { name: 'echo', arguments: { text: 'mine' } }, 'a1');
    const other = await post(via, call, { sid, headers: as('bob') });
    await other.done();
    assert.equal(other.status, 404, "bob cannot use alice's session");
    const mine = await post(via, call, { sid, headers: as('alice') });
    await mine.done();
    assert.equal(mine.status, 200);
    assert.equal(mine.events().map((e) => e.json).find((j) => j?.id === 'a1').result.content[0].text, 'mine');
  });
});
