// SPDX-License-Identifier: MIT
// Tasks (2025-11-25): tasks/* pass through untouched to the session's child;
// a task-augmented request (params.task) never gets a notifications/cancelled from the gateway
// (not on a drop, a timeout, a DELETE); tasks/result is exempt from request timeouts; a session
// whose child holds a task not yet terminal does not expire while nobody is connected. The task
// side runs on the reference server-everything (its simulate-research-query tool is a real task:
// four stages of about a second).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callTool, del, everythingServer, initSession, MATRIX_POOLED, pooledSkip, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';


const V = '2025-11-25';
const TOKEN = 't'.repeat(32);
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const everything = everythingServer();

async function admin(gw) {
  const r = await fetch(`${gw.base}/admin/inflight`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(r.status, 200);
  return r.json();
}

/** Posts a request and returns its answer (the stream must end with it). */
async function ask(gw, sid, method, params, id) {
  const r = await post(gw, rpc(method, params, id), { sid, headers: { 'MCP-Protocol-Version': V } });
  assert.equal(r.status, 200, `${method}: ${r.status}`);
  await r.done(20000);
  const a = r.events().map((e) => e.json).find(isAnswer);
  assert.ok(a, `${method}: no answer in ${r.text()}`);
  return a;
}

const childTasks = (gw, method) => gw.childMessages().filter((m) => m.method === method);
const childCancels = (gw) => gw.childMessages().filter((m) => m.method === 'notifications/cancelled');

test('a task-augmented call is never cancelled by the gateway: not on a drop, a timeout or DELETE', async (t) => {
  await withGateway({ servers: [{ name: 'example', path: '/mcp', extra: 'request_timeout_ms = 300' }] }, async (gw) => {
    const s = await initSession(gw, { version: V });
    // A drop of the call's stream: the example does not know tasks, so it simply keeps working.
    const dropped = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'a', delay_ms: 5000 }, task: { ttl: 60000 } }, 'task-drop'), { sid: s.sid });
    await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.text === 'a'), 5000, 'call at the child');
    dropped.drop();
    await gw.waitLog(MATRIX_POOLED ? /task-augmented tools\/call not cancelled \(client disconnected\)/ : /client dropped POST stream \d+: 0 requests cancelled/);
    // A timeout: the client gets its error, the child no cancel.
    const timed = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'b', delay_ms: 5000 }, task: {} }, 'task-timeout'), { sid: s.sid });
    await timed.done(5000);
    const err = timed.events().map((e) => e.json).find(isAnswer);
    assert.match(err.error.message, /timed out/);
    await gw.waitLog(/task-augmented tools\/call not cancelled \(request timed out\)/);
    // DELETE with a task-augmented call in flight.
    const third = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'c', delay_ms: 5000 }, task: {} }, 'task-del'), { sid: s.sid });
    await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.text === 'c'), 5000, 'third call at the child');
    const d = await del(gw, { sid: s.sid });
    assert.equal(d.status, 200);
    await third.done(5000);
    await gw.waitLog(/task-augmented tools\/call not cancelled \(session deleted\)/);
    assert.deepEqual(childCancels(gw), [], 'no notifications/cancelled for task-augmented requests');
  });
});

test('an ordinary call beside them is still cancelled on a drop (the exemption is per request)', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'plain', delay_ms: 5000 } }, 'plain'), { sid: s.sid });
    const seen = await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.text === 'plain'), 5000, 'call at the child');
    r.drop();
    const c = await waitFor(() => childCancels(gw)[0], 5000, 'cancel at the child');
    assert.deepEqual(c.params, { requestId: seen.id, reason: 'client disconnected' });
  });
});

test('server-everything tasks through the gateway: create, tasks/get, tasks/list, tasks/result (exempt from the timeout)', async (t) => {
  // 2000 ms: initialize (a node child starting on a loaded runner) must fit in it; tasks/result
  // blocks about 4 s, twice that, so only its exemption lets it through.
  await withGateway({ servers: [{ ...everything, extra: 'request_timeout_ms = 2000' }] }, async (gw) => {
    const s = await initSession(gw, { version: V, capabilities: { tasks: {} } });
    assert.ok(s.result.capabilities.tasks, `server-everything declares tasks: ${JSON.stringify(s.result.capabilities)}`);
    const created = await ask(gw, s.sid, 'tools/call', { name: 'simulate-research-query', arguments: { topic: 'gateways' }, task: { ttl: 60000 } }, 'create-1');
    const task = created.result.task;
    assert.ok(task?.taskId, `CreateTaskResult: ${JSON.stringify(created)}`);
    assert.equal(created.id, 'create-1');
    const got = await ask(gw, s.sid, 'tasks/get', { taskId: task.taskId }, 'get-1');
    assert.equal(got.result.taskId, task.taskId);
    const list = await ask(gw, s.sid, 'tasks/list', {}, 'list-1');
    assert.ok(list.result.tasks.some((t) => t.taskId === task.taskId));
    // tasks/result blocks until the task is terminal (about 4 s), well past request_timeout_ms.
    const result = await ask(gw, s.sid, 'tasks/result', { taskId: task.taskId }, 'result-1');
    assert.ok(result.result, `tasks/result: ${JSON.stringify(result)}`);
    assert.match(JSON.stringify(result.result.content), /gateways/);
    assert.doesNotMatch(gw.logs(), /request timed out/);
  });
});

test('a session whose child holds a working task does not expire while nobody is connected', async (t) => {
  if (pooledSkip(t, 'a pooled session expires at session_idle_timeout_s with a task live, which then gets a tasks/cancel (pooled_tasks); the admin view lists no pooled session')) return;
  await withGateway({ gateway: { session_idle_timeout_s: 1, admin_token: TOKEN }, servers: [everything] }, async (gw) => {
    const s = await initSession(gw, { version: V, capabilities: { tasks: {} } });
    const created = await ask(gw, s.sid, 'tools/call', { name: 'simulate-research-query', arguments: { topic: 'idle' }, task: { ttl: 60000 } }, 'create-2');
    const taskId = created.result.task.taskId;
    // Nobody reads any stream now. Past twice the idle timeout the session must still be there.
    const held = await waitFor(async () => {
      const a = await admin(gw);
      const me = a.sessions.find((x) => x.id === s.sid);
      assert.ok(me, 'the session expired while its task was working');
      return me.idle_ms >= 2200 && me;
    }, 10000, 'the session to stay idle past twice the timeout');
    assert.equal(held.tasks_open, 1);
    // Once the child reports the task terminal (tasks/get), the session may expire.
    await waitFor(async () => (await ask(gw, s.sid, 'tasks/get', { taskId }, `poll-${Date.now()}`)).result.status === 'completed', 15000, 'the task to complete');
    await waitFor(async () => !(await admin(gw)).sessions.some((x) => x.id === s.sid), 10000, 'the session to expire');
    await gw.waitLog(new RegExp(`session=${s.sid.replace(/[-]/g, '\\-')} session closed: session expired`));
  });
});

test('tasks/* requests reach the child byte for byte, apart from the id', async (t) => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw, { version: V });
    const params = { taskId: 'tid-\u00e9\u4e2d', _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'x' }, n: 1.5e300 } };
    const a = await ask(gw, s.sid, 'tasks/get', params, 'tg-1');
    assert.equal(a.id, 'tg-1');
    if (MATRIX_POOLED) { // a pooled session names its tasks by ids the gateway minted: this one it never gave
      assert.equal(a.error?.code, -32602, JSON.stringify(a));
      assert.ok(!gw.childMessages().some((x) => x.method === 'tasks/get'), 'an unknown task id reaches no child');
      return;
    }
    const m = await waitFor(() => gw.childMessages().find((x) => x.method === 'tasks/get'), 5000, 'tasks/get at the child');
    assert.deepEqual(m.params, params);
    const ok = await callTool(gw, s.sid, 'echo', { text: 'after' });
    assert.equal(ok.response.result.content[0].text, 'after');
  });
});

test('a task-augmented call cancelled before its CreateTaskResult (the client\'s cancel, a timeout) has its task cancelled at the child', async () => {
  // The example runs the task at once but answers its CreateTaskResult only after create_delay_ms,
  // and ignores notifications/cancelled for a task-augmented request (tasks/cancel ends a task):
  // both answers come after their calls were cancelled, naming tasks that would run for nobody.
  const timeoutMs = scaled(1000);
  const createDelay = timeoutMs + scaled(1500);
  await withGateway({ servers: [{ name: 'example', path: '/mcp', args: ['--tasks'], extra: `request_timeout_ms = ${timeoutMs}` }] }, async (gw) => {
    const s = await initSession(gw, { version: V });
    const h = { 'MCP-Protocol-Version': V };
    const call = (text) => post(gw, rpc('tools/call', { name: 'echo', arguments: { text, delay_ms: 600000, create_delay_ms: createDelay }, task: { ttl: 600000 } }, text), { sid: s.sid, headers: h });
    const byClient = await call('by-client');
    await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.text === 'by-client'), scaled(5000), 'the call at the child');
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'by-client', reason: 'changed my mind' } }, { sid: s.sid, headers: h });
    assert.equal(c.status, 202);
    const byTimeout = await call('by-timeout');
    await byTimeout.done(createDelay + scaled(5000));
    const err = byTimeout.events().map((e) => e.json).find(isAnswer);
    assert.match(err?.error?.message ?? '', /timed out/, JSON.stringify(err));
    await byClient.done(scaled(5000));
    assert.ok(!byClient.events().some((e) => isAnswer(e.json)), 'no answer after the client\'s cancel');
    const cancels = await waitFor(() => { const l = childTasks(gw, 'tasks/cancel'); return l.length >= 2 && l; }, createDelay + scaled(5000), 'two tasks/cancel at the child');
    assert.deepEqual(cancels.map((m) => m.params.taskId).sort(), ['task-1', 'task-2']);
    for (const m of cancels) assert.match(String(m.id), /^mcpgw-task-\d+$/, 'the gateway\'s own request');
    await gw.waitLog(/task created for a cancelled tools\/call: cancelled at the child/);
    // The child's answers to those went nowhere; the session serves on.
    const list = await ask(gw, s.sid, 'tasks/list', {}, 'list');
    if (MATRIX_POOLED) // a pooled session lists its own records: the cancelled calls made none
      assert.deepEqual(list.result.tasks, []);
    else
      assert.deepEqual(list.result.tasks.map((t) => [t.taskId, t.status]).sort(), [['task-1', 'cancelled'], ['task-2', 'cancelled']]);
    assert.equal(childTasks(gw, 'tasks/cancel').length, 2, 'each once');
    const ok = await callTool(gw, s.sid, 'echo', { text: 'after' });
    assert.equal(ok.response.result.content[0].text, 'after');
  });
});
