// SPDX-License-Identifier: MIT
// The child process seen through the gateway: large results byte-exact, floods and back-pressure,
// a child that crashes, ignores SIGTERM, forks, or closes its stdout, stderr logging, and no fd
// leaked across many sessions.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { EXAMPLE, callTool, del, get, initSession, parseSse, pidAlive, post, reaped, rpc, startGateway, stdoutBlocked, tmpdir, waitFor, withGateway } from '../lib/gw.mjs';

/** Whether the gateway runs under AddressSanitizer (its memory use is then much larger). */
const underAsan = (pid) => { try { return /libasan/.test(fs.readFileSync(`/proc/${pid}/maps`, 'utf8')); } catch { return false; } };


/** Live (non-zombie) processes whose process group is pgid. */
function groupMembers(pgid) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let st;
    try { st = fs.readFileSync(`/proc/${d}/stat`, 'utf8'); } catch { continue; }
    const f = st.slice(st.lastIndexOf(')') + 2).split(' '); // state ppid pgrp ...
    if (f[0] !== 'Z' && Number(f[2]) === pgid) out.push(Number(d));
  }
  return out;
}

/** Direct children of pid, from /proc/<pid>/task/<tid>/children. */
function childrenOf(pid) {
  const out = [];
  try {
    for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
      const c = fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim();
      if (c) out.push(...c.split(/\s+/).map(Number));
    }
  } catch { /* gone */ }
  return out;
}

const comm = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; } };

/** Kills a leftover process this test started (by pid), so a failed test leaks nothing. */
function cleanup(pid) {
  if (pid && pidAlive(pid)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
}

/** Collects SSE events of a live response incrementally (cheap for many small events). */
function collect(r) {
  const events = [];
  let rest = r.text();
  const take = () => {
    let i;
    while ((i = rest.indexOf('\n\n')) >= 0) {
      const ev = parseSse(rest.slice(0, i + 2))[0];
      rest = rest.slice(i + 2);
      if (ev) events.push(ev);
    }
  };
  take();
  r.res.on('data', (d) => { rest += d; take(); });
  return events;
}

const textOf = (j) => j?.result?.content?.[0]?.text;
const sha256 = (s) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

/** What tool `large` produces (tests/fixtures/mcp_example.c large_fill). */
function largeExpected(bytes, utf8) {
  if (!utf8) {
    const pat = '0123456789abcdef';
    return pat.repeat(Math.floor(bytes / 16)) + pat.slice(0, bytes % 16);
  }
  const mixed = 'a\u00e9\u20ac\u{1F600}'; // 1 + 2 + 3 + 4 bytes
  const full = Math.floor(bytes / 10);
  const rest = bytes - full * 10;
  const tail = rest >= 6 ? 'a\u00e9\u20ac' : rest >= 3 ? 'a\u00e9' : rest >= 1 ? 'a' : '';
  return mixed.repeat(full) + tail;
}

for (const [label, bytes, ms] of [['1 MB', 1 << 20, 20000], ['10 MB', 10 << 20, 30000], ['100 MB', 100 << 20, 240000]]) {
  test(`a ${label} result passes byte-exact`, { timeout: ms + 30000 }, async () => {
    await withGateway({}, async (gw) => {
      const s = await initSession(gw);
      const t0 = performance.now();
      const r = await post(gw, rpc('tools/call', { name: 'large', arguments: { bytes } }, 'big'), { sid: s.sid });
      assert.equal(r.status, 200);
      await r.done(ms);
      const wall = performance.now() - t0;
      const raw = r.text();
      // One event: "event: message\ndata: {...}\n\n"; the JSON itself is parsed once.
      const start = raw.indexOf('data: ');
      assert.ok(start >= 0 && raw.endsWith('\n\n'), 'one complete SSE event');
      const msg = JSON.parse(raw.slice(start + 6, raw.length - 2));
      assert.equal(msg.id, 'big');
      const text = textOf(msg);
      assert.equal(typeof text, 'string', 'a text result');
      assert.equal(text.length, bytes, 'length');
      assert.ok(sha256(text) === sha256(largeExpected(bytes, false)), 'content matches the pattern (sha256)');
      if (bytes >= 100 << 20) console.log(`100 MB result through the gateway: ${Math.round(wall)} ms wall (${(bytes / 1048576 / (wall / 1000)).toFixed(1)} MB/s)`);
    });
  });
}

test('a 1 MB UTF-8 result (1-4 byte characters across read boundaries) passes byte-exact', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const bytes = 1 << 20;
    const { response } = await callTool(gw, s.sid, 'large', { bytes, utf8: true }, { ms: 20000 });
    const text = textOf(response);
    assert.ok(!text.includes('\uFFFD'), 'valid UTF-8 (no replacement characters)');
    const expected = largeExpected(bytes, true);
    assert.equal(Buffer.byteLength(text, 'utf8'), Buffer.byteLength(expected, 'utf8'), 'byte length as the child produced');
    assert.equal(Buffer.byteLength(text, 'utf8'), bytes, '1 MB is a whole number of characters here');
    assert.ok(sha256(text) === sha256(expected), 'content matches the pattern (sha256)');
  });
});

test('a flood of 2000 notifications reaches the GET stream complete and in order, then the tool answers', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const evs = collect(g);
    const { response, events } = await callTool(gw, s.sid, 'flood', { count: 2000, bytes: 2000 }, { ms: 20000 });
    assert.equal(textOf(response), 'ok');
    assert.equal(events.length, 1, 'the POST stream carries only the response');
    await waitFor(() => evs.length >= 2000, 10000, '2000 notifications on GET');
    assert.equal(evs.length, 2000);
    evs.forEach((e, i) => {
      assert.equal(e.json.method, 'notifications/message');
      assert.ok(e.json.params.data.startsWith(`${i + 1} `), `event ${i} in order`);
      assert.equal(e.data.length, 2000, 'each line as long as the child wrote it');
    });
    g.drop();
  });
});

test('back-pressure: a slow GET reader stops the child\'s stdout; on resume everything arrives and the call answers', async () => {
  const COUNT = 20000; // ~40 MB: far beyond socket buffers + stream_queue_bytes + the pipe
  await withGateway({ gateway: { stream_queue_bytes: 65536 } }, async (gw) => {
    const s = await initSession(gw);
    const g = await get(gw, { sid: s.sid });
    assert.equal(g.status, 200);
    const evs = collect(g);
    g.res.pause();
    const call = await post(gw, rpc('tools/call', { name: 'flood', arguments: { count: COUNT, bytes: 2000 } }, 'fl'), { sid: s.sid });
    await waitFor(() => gw.childMessages().some((m) => m.params?.name === 'flood'), 5000, 'child to read the call');
    const state = { stable: 0, last: null };
    await waitFor(() => stdoutBlocked(s.pid, state), 20000, 'child blocked on its stdout');
    assert.equal(call.events().length, 0, 'the call has not answered while the reader is paused');
    const rss = Number(/VmRSS:\s*(\d+)/.exec(fs.readFileSync(`/proc/${gw.proc.pid}/status`, 'utf8'))[1]);
    assert.ok(rss < 64 * 1024 * (underAsan(gw.proc.pid) ? 16 : 1), `gateway memory stays bounded while paused: ${rss} kB`);
    g.res.resume();
    await call.done(30000);
    assert.equal(textOf(call.events()[0]?.json), 'ok', call.text());
    await waitFor(() => evs.length >= COUNT, 30000, `${COUNT} notifications on GET`);
    assert.equal(evs.length, COUNT);
    for (let i = 0; i < COUNT; i++) {
      if (!evs[i].json?.params?.data?.startsWith(`${i + 1} `)) assert.fail(`event ${i} out of order or lost: ${evs[i].data.slice(0, 120)}`);
    }
    g.drop();
  });
});

test('a child that exits mid-request: JSON-RPC error -32603 on the stream, session 404 afterwards, child reaped', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const { response } = await callTool(gw, s.sid, 'crash', {}, { id: 'boom' });
    assert.equal(response.id, 'boom');
    assert.equal(response.error.code, -32603);
    assert.match(response.error.message, /child exited|session ended/);
    const r = await post(gw, rpc('tools/call', { name: 'echo', arguments: { text: 'x' } }), { sid: s.sid });
    await r.done();
    assert.equal(r.status, 404);
    await waitFor(() => reaped(s.pid), 5000, 'child reaped');
    await gw.waitLog(new RegExp(`child ${s.pid} exited with status 3`));
  });
});

test('a child ignoring SIGTERM and stdin EOF is SIGKILLed after the grace periods on DELETE', async () => {
  const gateway = { child_stdin_grace_ms: 200, child_term_grace_ms: 300 };
  await withGateway({ gateway, servers: [{ name: 'stubborn', path: '/mcp', args: ['--ignore-sigterm', '--no-stdin-exit'] }] }, async (gw) => {
    const s = await initSession(gw);
    try {
      const t0 = Date.now();
      const d = await del(gw, { sid: s.sid });
      await d.done();
      assert.equal(d.status, 200);
      await waitFor(() => !pidAlive(s.pid), 2000, 'child killed within 2 s');
      const took = Date.now() - t0;
      assert.ok(took >= 400, `not before both grace periods (${took} ms)`);
      await waitFor(() => reaped(s.pid), 2000, 'child reaped');
      await gw.waitLog(new RegExp(`child ${s.pid} killed by signal 9`));
      const logs = gw.logs();
      const term = logs.indexOf(`child ${s.pid}: SIGTERM to its process group`);
      const kill = logs.indexOf(`child ${s.pid}: SIGKILL to its process group`);
      assert.ok(term >= 0, 'SIGTERM logged');
      assert.ok(kill > term, 'SIGKILL logged after SIGTERM');
    } finally {
      cleanup(s.pid);
    }
  });
});

for (const [label, spawnBg] of [
  ['sharing the child\'s stdout', 'sleep 300 &'],
  ['with its own stdio (daemon-like)', 'sleep 300 </dev/null >/dev/null 2>&1 &'],
]) {
  test(`a grandchild ${label} is killed with its process group on DELETE`, async () => {
    const dir = tmpdir('mcpgw-gc-');
    const log = path.join(dir, 'child.log');
    const command = `/bin/sh -c '${spawnBg} exec ${EXAMPLE} --log ${log}'`;
    const gateway = { child_stdin_grace_ms: 200, child_term_grace_ms: 300 };
    let grandchild;
    await withGateway({ gateway, servers: [{ name: 'forker', path: '/mcp', command }] }, async (gw) => {
      const s = await initSession(gw);
      try {
        grandchild = await waitFor(() => childrenOf(s.pid).find((p) => comm(p) === 'sleep'), 5000, 'the sleep grandchild');
        assert.deepEqual(groupMembers(s.pid).sort(), [s.pid, grandchild].sort(), 'both in the child\'s process group');
        const d = await del(gw, { sid: s.sid });
        await d.done();
        assert.equal(d.status, 200);
        await waitFor(() => reaped(s.pid), 5000, 'child reaped');
        await waitFor(() => !pidAlive(grandchild), 3000, 'grandchild gone');
        assert.deepEqual(groupMembers(s.pid), [], 'nothing left in the process group');
      } finally {
        cleanup(grandchild);
        cleanup(s.pid);
      }
    });
  });
}

test('child stderr lines are logged with the session id', async () => {
  await withGateway({}, async (gw) => {
    const s = await initSession(gw);
    const { response } = await callTool(gw, s.sid, 'stderr', { lines: 3 });
    assert.equal(textOf(response), 'ok');
    for (let i = 1; i <= 3; i++) await gw.waitLog(new RegExp(`session=${s.sid} child stderr: mcp-example-server: stderr line ${i} of 3`));
  });
});

test('a child that closes its stdout but keeps running: the session ends, the child is reaped, nothing hangs', async () => {
  const gateway = { child_stdin_grace_ms: 200, child_term_grace_ms: 300 };
  const command = "/bin/sh -c 'exec 1>&-; sleep 300'";
  await withGateway({ gateway, servers: [{ name: 'mute', path: '/mcp', command }] }, async (gw) => {
    const r = await post(gw, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'it', version: '1' } }, 'init'));
    const body = await r.done(5000);
    const pid = Number(/child=(\d+)/.exec(gw.logs())[1]);
    try {
      if (r.status === 200) {
        const ans = r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
        assert.ok(ans && ans.error, `initialize fails: ${body}`);
        assert.equal(ans.id, 'init');
        assert.equal(ans.error.code, -32603);
      } else {
        assert.ok(r.status >= 400, `an error status, got ${r.status}`);
      }
      await gw.waitLog(/closed its stdout|child exited/);
      await waitFor(() => reaped(pid), 3000, 'sh reaped');
      await waitFor(() => groupMembers(pid).length === 0, 3000, 'its sleep gone too');
      const sid = r.headers['mcp-session-id'];
      if (sid) {
        const again = await post(gw, rpc('ping'), { sid });
        await again.done();
        assert.equal(again.status, 404, 'the session is gone');
      }
      const h = await get(gw, { url: `${gw.base}/healthz`, headers: { Accept: '*/*' } });
      await h.done();
      assert.equal(h.status, 200, 'the gateway still answers');
    } finally {
      for (const p of groupMembers(pid)) cleanup(p);
    }
  });
});

test('the gateway\'s fd count returns to its baseline after 50 sessions created and deleted (some mid-call, with GET streams)', async () => {
  await withGateway({}, async (gw) => {
    const fds = () => fs.readdirSync(`/proc/${gw.proc.pid}/fd`).length;
    // Warm-up: one session, so lazily opened descriptors are part of the baseline.
    const w = await initSession(gw);
    await (await del(gw, { sid: w.sid })).done();
    await waitFor(() => reaped(w.pid), 5000, 'warm-up child reaped');
    await waitFor(() => gw.logs().includes(`child ${w.pid} exited`), 5000);
    let baseline;
    await waitFor(() => { const n = fds(); const same = n === baseline; baseline = n; return same; }, 5000, 'a stable baseline');
    const pids = [];
    for (let i = 0; i < 50; i++) {
      const s = await initSession(gw);
      pids.push(s.pid);
      // Odd sessions also hold a GET stream and a call in flight when deleted; every third
      // drops its GET stream first.
      let g = null;
      let call = null;
      if (i % 2) {
        g = await get(gw, { sid: s.sid });
        call = await post(gw, rpc('tools/call', { name: 'slow', arguments: { steps: 100, interval_ms: 50 } }), { sid: s.sid });
        if (i % 3 === 0) g.drop();
      }
      const d = await del(gw, { sid: s.sid });
      await d.done();
      assert.equal(d.status, 200);
      if (call) {
        await call.done();
        assert.equal(call.events().map((e) => e.json).find((j) => j?.error)?.error.code, -32603);
      }
      if (g && !(i % 3 === 0)) await g.done();
    }
    await waitFor(() => pids.every(reaped), 10000, 'all 50 children reaped');
    try {
      await waitFor(() => fds() === baseline, 5000, 'fd count back to baseline');
    } catch (e) {
      const list = fs.readdirSync(`/proc/${gw.proc.pid}/fd`).map((f) => { try { return `${f} -> ${fs.readlinkSync(`/proc/${gw.proc.pid}/fd/${f}`)}`; } catch { return f; } });
      assert.fail(`fd count ${fds()} != baseline ${baseline}:\n${list.join('\n')}`);
    }
  });
});
