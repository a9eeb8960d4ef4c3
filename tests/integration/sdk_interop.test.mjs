// SPDX-License-Identifier: MIT
// Interop: the official TypeScript SDK client talks through the gateway to the reference
// "everything" server over stdio. Versions pinned in tests/package-lock.json:
//   @modelcontextprotocol/sdk                1.32.2
//   @modelcontextprotocol/server-everything  2026.8.31  (serverInfo version "2.0.0")
// Install them with `npm ci` in tests/ (tests/deps.sh does it).
//
// One session is shared by the tests below, which run in order: connect, list, tools, progress,
// sampling, elicitation, roots, logging, cancellation, and last DELETE with the child gone and
// a clean gateway exit. On failure each test appends the tail of the gateway's debug log.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { del, everythingServer, MATRIX_POOLED, parseSse, pidAlive, pooledSkip, post, rpc, startGateway, waitFor } from '../lib/gw.mjs';


// Resolved from tests/node_modules (this file lives in tests/integration).
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema,
} = await import('@modelcontextprotocol/sdk/types.js');

const SERVED_VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'];
const SAMPLED_TEXT = 'sampled through the gateway: 42';
const ROOT_ENTRY = { uri: 'file:///tmp/mcpgw-interop-root', name: 'interop root' };
const ELICITED = { name: 'Ada Lovelace', check: true, email: 'ada@example.org', integer: 7, number: 2.5 };

let gw;
let client;
let transport;
const seen = { sampling: [], elicitation: [], roots: 0, logs: [], errors: [] };
// Every SSE body the transport received, each as text, teed off its own fetch.
const streams = [];

async function teeFetch(url, init) {
  const res = await fetch(url, init);
  if (!res.body || !/^text\/event-stream\b/.test(res.headers.get('content-type') ?? '')) return res;
  const [mine, theirs] = res.body.tee();
  const at = streams.push('') - 1;
  (async () => {
    const dec = new TextDecoder();
    try { for await (const chunk of mine) streams[at] += dec.decode(chunk, { stream: true }); } catch { /* aborted */ }
  })();
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
}

function logTail(lines = 200) {
  if (!gw) return '(gateway not started)';
  return gw.logs().split('\n').slice(-lines).join('\n');
}

/** A test whose failure carries the gateway log tail. */
function step(name, fn) {
  test(name, async (t) => {
    try {
      await fn(t);
    } catch (e) {
      if (e && typeof e === 'object') {
        try { e.message = `${e.message}\n--- gateway log (tail) ---\n${logTail()}`; } catch { /* read-only */ }
      }
      throw e;
    }
  });
}

/** Text content of a tools/call result, joined. */
function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

before(async () => {
  gw = await startGateway({
    servers: [everythingServer()],
  });
  client = new Client(
    { name: 'mcp-gateway-interop', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen.sampling.push(req.params);
    return { model: 'interop-fixed-model', role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text: SAMPLED_TEXT } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.elicitation.push(req.params);
    return { action: 'accept', content: { ...ELICITED } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [ROOT_ENTRY] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { seen.logs.push(n.params); });
  client.onerror = (e) => { seen.errors.push(e); };
  transport = new StreamableHTTPClientTransport(new URL(gw.url), { fetch: teeFetch });
  await client.connect(transport);
});

after(async () => {
  // Only reached with the gateway still running when a test above failed early.
  try { await client?.close(); } catch { /* already closed */ }
  if (gw && gw.proc.exitCode === null && gw.proc.signalCode === null) await gw.stop({ expect: null });
});

/** The children serving the session: its own (child mode), or the pool's (pooled). */
const childPids = () => (MATRIX_POOLED ? [...gw.logs().matchAll(/pool child started: pid (\d+)/g)].map((m) => Number(m[1])) : gw.childPids());

step('connect: session id, negotiated version, server info and capabilities', async () => {
  assert.ok(transport.sessionId, 'Mcp-Session-Id received');
  assert.match(transport.sessionId, /^[\x21-\x7e]+$/);
  assert.ok(SERVED_VERSIONS.includes(transport.protocolVersion), `negotiated ${transport.protocolVersion}`);
  const info = client.getServerVersion();
  assert.equal(info.name, 'mcp-servers/everything');
  assert.equal(info.version, '2.0.0');
  const caps = client.getServerCapabilities();
  for (const c of ['tools', 'prompts', 'resources', 'logging']) assert.ok(caps[c], `server capability ${c}`);
  assert.ok(client.getInstructions(), 'instructions passed through');
  assert.equal(childPids().length, 1, 'one child for the one session');
  assert.ok(pidAlive(childPids()[0]));
});

step('lists tools, resources and prompts; reads a resource and gets a prompt', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  // The capability-gated tools are registered when the child handles notifications/initialized.
  for (const n of ['echo', 'trigger-long-running-operation', 'toggle-simulated-logging', 'trigger-sampling-request',
    'trigger-elicitation-request', 'get-roots-list']) assert.ok(names.includes(n), `tool ${n} in ${names}`);
  const { resources } = await client.listResources();
  assert.ok(resources.length > 0, 'resources non-empty');
  const read = await client.readResource({ uri: resources[0].uri });
  assert.ok(read.contents.length > 0 && read.contents[0].uri, 'resource contents');
  const { prompts } = await client.listPrompts();
  assert.ok(prompts.some((p) => p.name === 'simple-prompt'), 'simple-prompt listed');
  const p = await client.getPrompt({ name: 'simple-prompt' });
  assert.ok(p.messages.length > 0);
});

step('tools/call echo returns the text, including non-ASCII', async () => {
  const msg = 'hello through the gateway — ünïcødé ✓';
  const r = await client.callTool({ name: 'echo', arguments: { message: msg } });
  assert.equal(r.isError, undefined);
  assert.equal(text(r), `Echo: ${msg}`);
});

step('long-running tool: progress notifications reach onprogress, then the result', async () => {
  const progress = [];
  const r = await client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  assert.match(text(r), /Long running operation completed\. Duration: 1 seconds, Steps: 4\./);
  assert.ok(progress.length >= 2, `progress notifications: ${JSON.stringify(progress)}`);
  assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3, 4]);
  assert.ok(progress.every((p) => p.total === 4));
});

step('sampling: the child asks the client, our handler answers, the tool returns it', async () => {
  const r = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'interop prompt', maxTokens: 20 } });
  assert.equal(seen.sampling.length, 1, 'sampling handler called once');
  const req = seen.sampling[0];
  assert.equal(req.maxTokens, 20);
  assert.match(req.messages[0].content.text, /interop prompt/);
  const t = text(r);
  assert.ok(t.startsWith('LLM sampling result:'), t);
  const result = JSON.parse(t.slice(t.indexOf('{')));
  assert.deepEqual(result.content, { type: 'text', text: SAMPLED_TEXT });
  assert.equal(result.model, 'interop-fixed-model');
  assert.equal(result.role, 'assistant');
});

step('elicitation: the child asks the client, the accepted content comes back', async () => {
  const r = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
  assert.equal(seen.elicitation.length, 1, 'elicitation handler called once');
  assert.ok(seen.elicitation[0].requestedSchema.properties.name, 'requestedSchema passed through');
  const t = text(r);
  assert.match(t, /User provided the requested information/);
  assert.match(t, /- Name: Ada Lovelace/);
  assert.match(t, /- Email: ada@example\.org/);
  const raw = JSON.parse(t.slice(t.indexOf('Raw result: ') + 'Raw result: '.length));
  assert.deepEqual(raw, { action: 'accept', content: ELICITED });
});

step('roots: the child requests roots/list after initialization and gets ours', async (t) => {
  if (pooledSkip(t, 'a shared child\'s roots/list after its initialization is no session\'s call\'s: answered with an error')) return;
  // server-everything calls roots/list on its own ~350 ms after notifications/initialized.
  await waitFor(() => seen.roots >= 1, 10000, 'roots/list from the child');
  await waitFor(() => seen.logs.some((l) => /Roots updated: 1 root\(s\) received from client/.test(String(l.data))), 5000,
    'the child logging that it received our root');
  const r = await client.callTool({ name: 'get-roots-list', arguments: {} });
  const listed = text(r);
  assert.match(listed, /Current MCP Roots \(1 total\)/);
  assert.ok(listed.includes(ROOT_ENTRY.uri), listed);
  assert.ok(listed.includes(ROOT_ENTRY.name), listed);
});

step('logging: setLoggingLevel, then notifications/message from the child reach the client', async () => {
  await client.setLoggingLevel('debug');
  const before = seen.logs.length;
  const on = await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  assert.match(text(on), /Started simulated, random-leveled logging/);
  // One message is sent at once, then one every 5 s.
  const msg = await waitFor(() => seen.logs.slice(before).find((l) => /level[- ]message/i.test(String(l.data))), 10000,
    'a simulated log message');
  assert.ok(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'].includes(msg.level));
  const off = await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  assert.match(text(off), /Stopped simulated logging/);
});

step('cancellation: aborting a call sends notifications/cancelled through the gateway', async () => {
  const ac = new AbortController();
  const progress = [];
  const call = client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } },
    undefined,
    {
      signal: ac.signal,
      onprogress: (p) => {
        progress.push(p);
        if (progress.length === 1) ac.abort('interop test abort');
      },
    },
  );
  await assert.rejects(call, (e) => /interop test abort|abort/i.test(String(e?.message ?? e)));
  assert.equal(progress.length >= 1, true);
  // A pooled session's names the pool child it went to.
  const m = await gw.waitLog(/client cancel forwarded: method=tools\/call (child=\S+ )?child_id=\d+/, 5000);
  assert.ok(m);
  // The session stays usable after the cancel.
  const r = await client.callTool({ name: 'echo', arguments: { message: 'after cancel' } });
  assert.equal(text(r), 'Echo: after cancel');
});

step('no transport or protocol errors were reported to the client', async () => {
  // Except one the SDK makes itself: progress notifications of the aborted call that the gateway
  // sent after the first one, on which the SDK aborted, before the cancel reached it (the SDK
  // reports each as an unknown token). Only those the wire shows, on the aborted call's stream.
  const onWire = streams.flatMap((t) => parseSse(t).map((e) => e.json).filter(Boolean));
  const aborted = onWire.filter((j) => j.method === 'notifications/progress' && j.params.total === 40);
  assert.ok(aborted.length >= 1, 'the aborted call\'s first progress is on the wire');
  assert.ok(aborted.every((j) => j.params.progressToken === aborted[0].params.progressToken));
  assert.ok(!onWire.some((j) => ('result' in j || 'error' in j) && j.id === aborted[0].params.progressToken), 'no answer to the aborted call');
  const key = (n) => JSON.stringify([n.method, n.params?.progressToken, n.params?.progress, n.params?.total]);
  const late = new Set(aborted.slice(1).map(key));
  const UNKNOWN = 'Received a progress notification for an unknown token: ';
  const dropped = (m) => {
    if (!m.startsWith(UNKNOWN)) return false;
    try { return late.has(key(JSON.parse(m.slice(UNKNOWN.length)))); } catch { return false; }
  };
  const reported = seen.errors.map((e) => String(e?.message ?? e));
  assert.deepEqual(reported.filter((m) => !dropped(m)), [], JSON.stringify(reported));
});

step('DELETE ends the session: the child is gone, the session 404s, the gateway exits 0', async () => {
  const sid = transport.sessionId;
  const pids = childPids();
  assert.equal(pids.length, 1);
  await transport.terminateSession();
  assert.equal(transport.sessionId, undefined, 'SDK dropped the session id after DELETE');
  await client.close();
  // A pooled session has no child to stop: the pool's serves on.
  if (!MATRIX_POOLED) await waitFor(() => !pidAlive(pids[0]), 10000, `child ${pids[0]} gone`);
  await gw.waitLog(MATRIX_POOLED ? /pooled session ended: session deleted/ : /session closed/, 5000);
  // The ended session is unknown now, for POST and for DELETE.
  const p = await post(gw, rpc('tools/list'), { sid, headers: { 'MCP-Protocol-Version': transport.protocolVersion } });
  await p.done();
  assert.equal(p.status, 404);
  const d = await del(gw, { sid });
  await d.done();
  assert.equal(d.status, 404);
  await gw.stop();
});
