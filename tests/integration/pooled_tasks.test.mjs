// SPDX-License-Identifier: MIT
// Tasks (2025-11-25) in pooled sessions (session_mode = pooled): many sessions share a child and
// several children serve one server, so the gateway keeps a table of the sessions' tasks and gives
// each an id of its own. The example server's --tasks runs a task-augmented echo as a task named
// "task-N", N counted per process: two children name their first task alike. Seen from outside:
// what each session's client gets (answers, its GET stream), what the children read (--log).
//   - two sessions on one child: neither can get, cancel, list, fetch or hear the other's task,
//     nor name one by the child's own id; the initialize answer keeps tasks;
//   - tasks on two children whose ids collide, told apart by the session's ids;
//   - a child killed with a task live: failed, an error for its result, -32602 for its cancel;
//   - DELETE and idle expiry with a live task: tasks/cancel reaches the child under its own id,
//     also for a task whose CreateTaskResult comes after the DELETE;
//   - the session's cap (max_inflight_per_session): a terminal task makes room, a live one not;
//   - a child that holds a live task: its questions cannot be attributed (an error to the child).
// Nothing sleeps to synchronise; deadlines scale for a slow (ASan) run.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { del, get, initSession, post, rpc, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const V = '2025-11-25';
const isAnswer = (j) => j && ('result' in j || 'error' in j);
const pooled = (extra = 'pool_max_children = 1', gateway = {}) => ({
  gateway,
  servers: [{ name: 'example', path: '/mcp', args: ['--tasks'], extra: `session_mode = pooled\n${extra}` }],
});

async function session(gw, capabilities = {}) {
  const s = await initSession(gw, { version: V, capabilities });
  assert.match(s.sid, /^~1/, 'a pooled session');
  return s;
}

/** Posts a request in the session and returns its answer (the stream ends with it). */
async function ask(gw, sid, method, params, id) {
  const r = await post(gw, rpc(method, params, id), { sid, headers: { 'MCP-Protocol-Version': V } });
  assert.equal(r.status, 200, `${method}: HTTP ${r.status} ${await r.done().catch(() => '')}`);
  await r.done(scaled(10000));
  const a = r.events().map((e) => e.json).find(isAnswer);
  assert.ok(a, `${method}: no answer in ${r.text()}`);
  assert.equal(a.id, id);
  return a;
}

/** A task-augmented echo: its CreateTaskResult's task. */
async function createTask(gw, sid, text, delayMs, id = `create-${text}`) {
  const a = await ask(gw, sid, 'tools/call', { name: 'echo', arguments: { text, delay_ms: delayMs }, task: { ttl: 600000 } }, id);
  assert.ok(a.result?.task, `a CreateTaskResult: ${JSON.stringify(a)}`);
  return a.result.task;
}

const childTasks = (gw, method) => gw.childMessages().filter((m) => m.method === method);
const statusEvents = (r) => r.events().map((e) => e.json).filter((j) => j?.method === 'notifications/tasks/status');

test('two sessions on one child: each gets its own task ids, and neither can reach the other\'s task', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await session(gw);
    const b = await session(gw);
    assert.deepEqual(a.result.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } }, 'tasks as the child declared them');
    const ga = await get(gw, { sid: a.sid });
    const gb = await get(gw, { sid: b.sid });
    assert.equal(ga.status, 200);
    assert.equal(gb.status, 200);
    const ta = await createTask(gw, a.sid, 'alpha', 600000);
    const tb = await createTask(gw, b.sid, 'beta', 600000);
    for (const t of [ta, tb]) {
      assert.match(t.taskId, /^[A-Za-z0-9_-]{22}$/, 'an id the gateway minted: 128 random bits');
      assert.equal(t.status, 'working');
    }
    assert.notEqual(ta.taskId, tb.taskId);
    assert.deepEqual(childTasks(gw, 'tools/call').map((m) => m.params.arguments.text), ['alpha', 'beta'], 'one child ran both');
    // b names a's task by the session's id, and by the child's own: unknown either way.
    for (const [m, taskId] of [['tasks/get', ta.taskId], ['tasks/cancel', ta.taskId], ['tasks/result', ta.taskId], ['tasks/get', 'task-1'], ['tasks/cancel', 'task-1']]) {
      const r = await ask(gw, b.sid, m, { taskId }, `b-${m}-${taskId}`);
      assert.equal(r.error?.code, -32602, `${m} of another session's task: ${JSON.stringify(r)}`);
    }
    assert.equal(childTasks(gw, 'tasks/cancel').length, 0, 'no cancel reached the child');
    assert.equal(childTasks(gw, 'tasks/result').length, 0);
    const lb = await ask(gw, b.sid, 'tasks/list', {}, 'b-list');
    assert.deepEqual(lb.result.tasks.map((t) => t.taskId), [tb.taskId], 'b lists its own task alone');
    const la = await ask(gw, a.sid, 'tasks/list', {}, 'a-list');
    assert.deepEqual(la.result.tasks.map((t) => t.taskId), [ta.taskId]);
    // a's own: tasks/get reaches the child under the child's id, answered with a's id.
    const got = await ask(gw, a.sid, 'tasks/get', { taskId: ta.taskId }, 'a-get');
    assert.equal(got.result.taskId, ta.taskId);
    assert.equal(got.result.status, 'working');
    assert.deepEqual(childTasks(gw, 'tasks/get').map((m) => m.params.taskId), ['task-1'], 'the child saw its own id');
    // a cancels its task: the child's status notification reaches a's GET stream alone.
    const c = await ask(gw, a.sid, 'tasks/cancel', { taskId: ta.taskId }, 'a-cancel');
    assert.equal(c.result.taskId, ta.taskId);
    assert.equal(c.result.status, 'cancelled');
    const sa = await waitFor(() => statusEvents(ga)[0], scaled(5000), 'a\'s status notification');
    assert.equal(sa.params.taskId, ta.taskId);
    assert.equal(sa.params.status, 'cancelled');
    // A short task of b's: its tasks/result (the related-task _meta with b's id), its status to b.
    const tb2 = await createTask(gw, b.sid, 'gamma', 200);
    const res = await ask(gw, b.sid, 'tasks/result', { taskId: tb2.taskId }, 'b-result');
    assert.equal(res.result.content[0].text, 'gamma');
    assert.equal(res.result._meta['io.modelcontextprotocol/related-task'].taskId, tb2.taskId);
    const sb = await waitFor(() => statusEvents(gb).find((j) => j.params.status === 'completed'), scaled(5000), 'b\'s status notification');
    assert.equal(sb.params.taskId, tb2.taskId);
    assert.deepEqual(statusEvents(ga).map((j) => j.params.taskId), [ta.taskId], 'a heard only of its own task');
    assert.deepEqual(statusEvents(gb).map((j) => j.params.taskId), [tb2.taskId], 'b heard only of its own task');
    assert.doesNotMatch(ga.text() + gb.text(), /task-\d/, 'no child id reaches a client');
    ga.drop();
    gb.drop();
  });
});

test('tasks on two children, each naming its first task "task-1": the session tells them apart', async () => {
  await withGateway(pooled('pool_max_children = 2\npool_child_max_inflight = 1'), async (gw) => {
    const s = await session(gw);
    const t1 = await createTask(gw, s.sid, 'one', 1000);
    // The first child busy with a call that runs until cancelled: the next request starts a second.
    const held = await post(gw, rpc('tools/call', { name: 'cancel_self', arguments: { tag: 'hold' } }, 'hold'), { sid: s.sid });
    await waitFor(() => gw.childMessages().find((m) => m.params?.arguments?.tag === 'hold'), scaled(5000), 'the held call at the first child');
    const t2 = await createTask(gw, s.sid, 'two', 1000);
    assert.equal(childTasks(gw, 'initialize').length, 2, 'two children');
    assert.notEqual(t1.taskId, t2.taskId);
    const r1 = await ask(gw, s.sid, 'tasks/result', { taskId: t1.taskId }, 'r1');
    const r2 = await ask(gw, s.sid, 'tasks/result', { taskId: t2.taskId }, 'r2');
    assert.equal(r1.result.content[0].text, 'one');
    assert.equal(r2.result.content[0].text, 'two');
    assert.deepEqual(childTasks(gw, 'tasks/result').map((m) => m.params.taskId), ['task-1', 'task-1'], 'each child was asked under its own id');
    const list = await ask(gw, s.sid, 'tasks/list', {}, 'list');
    assert.deepEqual(list.result.tasks.map((t) => t.taskId).sort(), [t1.taskId, t2.taskId].sort());
    const c = await post(gw, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'hold' } }, { sid: s.sid });
    assert.equal(c.status, 202);
    await held.done(scaled(5000));
  });
});

test('a child killed with a task live: the task is failed, its result an error, its cancel -32602; the session serves on', async () => {
  await withGateway(pooled(), async (gw) => {
    const s = await session(gw);
    const t = await createTask(gw, s.sid, 'doomed', 600000);
    const pid = Number(/pool child started: pid (\d+)/.exec(gw.logs())?.[1]);
    assert.ok(pid > 0, 'the pool child\'s pid in the log');
    process.kill(pid, 'SIGKILL');
    await gw.waitLog(/task \S+ failed: its child \S+ ended/, scaled(5000));
    const got = await ask(gw, s.sid, 'tasks/get', { taskId: t.taskId }, 'get');
    assert.equal(got.result.taskId, t.taskId);
    assert.equal(got.result.status, 'failed');
    assert.equal(got.result.createdAt, t.createdAt);
    const list = await ask(gw, s.sid, 'tasks/list', {}, 'list');
    assert.deepEqual(list.result.tasks.map((x) => [x.taskId, x.status]), [[t.taskId, 'failed']]);
    const res = await ask(gw, s.sid, 'tasks/result', { taskId: t.taskId }, 'result');
    assert.equal(res.error?.code, -32603);
    const c = await ask(gw, s.sid, 'tasks/cancel', { taskId: t.taskId }, 'cancel');
    assert.equal(c.error?.code, -32602);
    const e = await ask(gw, s.sid, 'tools/call', { name: 'echo', arguments: { text: 'after' } }, 'after');
    assert.equal(e.result.content[0].text, 'after', 'a new child serves the session');
  });
});

test('DELETE and idle expiry with a live task: tasks/cancel reaches the child under its own id', async () => {
  await withGateway(pooled(undefined, { session_idle_timeout_s: 1 }), async (gw) => {
    const a = await session(gw);
    await createTask(gw, a.sid, 'deleted', 600000);
    const d = await del(gw, { sid: a.sid });
    assert.equal(d.status, 200);
    const c1 = await waitFor(() => childTasks(gw, 'tasks/cancel')[0], scaled(5000), 'tasks/cancel at the child');
    assert.deepEqual(c1.params, { taskId: 'task-1' });
    assert.match(c1.id, /^mcpgw-task-\d+$/, 'the gateway\'s own request');
    // Nobody uses this one: its record expires, and its task is cancelled at the child.
    const b = await session(gw);
    await createTask(gw, b.sid, 'expired', 600000);
    const c2 = await waitFor(() => childTasks(gw, 'tasks/cancel')[1], scaled(10000), 'the expired session\'s tasks/cancel');
    assert.deepEqual(c2.params, { taskId: 'task-2' });
    await gw.waitLog(/task \S+ cancelled at \S+: session expired/);
    // The child's answers to the gateway's cancels went nowhere; the gateway serves on.
    const s = await session(gw);
    const e = await ask(gw, s.sid, 'tools/call', { name: 'echo', arguments: { text: 'on' } }, 'on');
    assert.equal(e.result.content[0].text, 'on');
  });
});

test('a task whose CreateTaskResult comes after its session was DELETEd is cancelled at the child', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await session(gw);
    // The child runs the task at once but answers its CreateTaskResult only later: the DELETE
    // comes between, and the gateway sends no notifications/cancelled for a task-augmented call.
    const createDelay = scaled(3000);
    const call = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'late', delay_ms: 600000, create_delay_ms: createDelay }, task: { ttl: 600000 } }, 'late'), { sid: a.sid, headers: { 'MCP-Protocol-Version': V } });
    assert.equal(call.status, 200);
    await waitFor(() => childTasks(gw, 'tools/call')[0], scaled(5000), 'the call at the child');
    const d = await del(gw, { sid: a.sid });
    assert.equal(d.status, 200);
    await gw.waitLog(/task-augmented tools\/call not cancelled \(session deleted\)/);
    await call.done(scaled(5000));
    // The late CreateTaskResult names a task no session holds: it must not run on for nobody
    // (while it runs, the child's questions could not be told from another session's).
    const c = await waitFor(() => childTasks(gw, 'tasks/cancel')[0], createDelay + scaled(5000), 'tasks/cancel at the child');
    assert.deepEqual(c.params, { taskId: 'task-1' });
    assert.match(c.id, /^mcpgw-task-\d+$/, 'the gateway\'s own request');
    await gw.waitLog(/task created for a cancelled tools\/call: cancelled at the child/);
    const s = await session(gw);
    const e = await ask(gw, s.sid, 'tools/call', { name: 'echo', arguments: { text: 'on' } }, 'on');
    assert.equal(e.result.content[0].text, 'on');
  });
});

test('a session holds at most max_inflight_per_session tasks: a terminal one makes room, a live one does not', async () => {
  await withGateway(pooled(undefined, { max_inflight_per_session: 2 }), async (gw) => {
    const s = await session(gw);
    const t1 = await createTask(gw, s.sid, 'first', 600000);
    await createTask(gw, s.sid, 'second', 600000);
    const over = await ask(gw, s.sid, 'tools/call', { name: 'echo', arguments: { text: 'third', delay_ms: 1 }, task: {} }, 'third');
    assert.equal(over.error?.code, -32603);
    assert.match(over.error.message, /too many tasks/);
    assert.equal(childTasks(gw, 'tools/call').length, 2, 'the refused one never reached the child');
    await ask(gw, s.sid, 'tasks/cancel', { taskId: t1.taskId }, 'cancel-first');
    const t3 = await createTask(gw, s.sid, 'third', 600000, 'third-again');
    const list = await ask(gw, s.sid, 'tasks/list', {}, 'list');
    assert.equal(list.result.tasks.length, 2);
    assert.ok(list.result.tasks.some((t) => t.taskId === t3.taskId));
    assert.ok(!list.result.tasks.some((t) => t.taskId === t1.taskId), 'the terminal one made room');
  });
});

test('while a child holds a live task, its questions are not attributed to whichever call is in flight', async () => {
  await withGateway(pooled(), async (gw) => {
    const a = await session(gw);
    const b = await session(gw, { sampling: {} });
    await createTask(gw, a.sid, 'running', 600000);
    const q = await post(gw, rpc('tools/call', { name: 'sample', arguments: { prompt: 'p' } }, 'q'), { sid: b.sid });
    await q.done(scaled(5000));
    assert.ok(!q.events().some((e) => e.json?.method === 'sampling/createMessage'), 'no question reached b');
    assert.ok(isAnswer(q.events().map((e) => e.json).find(isAnswer)));
    await gw.waitLog(/sampling\/createMessage answered with an error: not available: a task runs on this server/);
  });
});
