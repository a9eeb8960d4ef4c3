// SPDX-License-Identifier: MIT
// A rolling restart behind Debian's real nginx with the shipped deploy/nginx/mcp-gateway-instances.conf
// (only its ports and TLS lines replaced) loses nothing. Two gateways, instance_id g1 and g2, with
// shutdown_drain_ms; a few concurrent clients keep opening sessions through nginx (initialize,
// notifications/initialized, tools/call echo, DELETE) and sending 2026-07-28 tools/call echoes.
// g1 is sent SIGTERM while a call of one of its sessions is in flight, drains (its listener closes
// at once: nginx fails over at connect; what reaches it on a pooled connection is a 503 that nginx
// retries, or a request of one of its own sessions, still served), exits 0, and is started again
// on the same port. Every new session initializes and every call answers: no request fails. The
// one thing a client sees is the rule of the 2025 revisions, a 404 for a session of the instance
// that is gone, answered by initializing again (counted, and allowed). Then both instances, one
// after the other as deploy/README.md's runbook says: the second as soon as the first has sent
// systemd READY=1 (where `systemctl restart` of a Type=notify unit returns); and again by
// deploy/systemd/mcp-gateway-restart-instances, which the Debian package's postinst runs after an
// upgrade.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { GW_BIN, initSession, post, request, rpc, startGateway, tmpdir, waitFor } from '../lib/gw.mjs';
import { withInstances } from '../lib/nginx.mjs';
import { notifySink } from '../lib/notify.mjs';
import { scaled } from '../lib/timing.mjs';

const STATELESS = '2026-07-28';
const DRAIN_MS = 30000;
const WORKERS = 4;
const MAX_ROUNDS = 5000; // per worker: a bound, never reached (the test stops the workers)
const textOf = (j) => j?.result?.content?.[0]?.text;

let nextId = 1;

/** A 2026-07-28 tools/call echo through url; resolves to null when answered, else what went wrong. */
async function statelessEcho(url, text) {
  const id = `m-${nextId++}`;
  const body = {
    jsonrpc: '2.0', id, method: 'tools/call',
    params: { name: 'echo', arguments: { text }, _meta: { 'io.modelcontextprotocol/protocolVersion': STATELESS, 'io.modelcontextprotocol/clientCapabilities': {} } },
  };
  const headers = {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': STATELESS, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo',
  };
  const r = await request(url, { method: 'POST', headers, body });
  const b = await r.done(scaled(10000));
  if (r.status !== 200) return `2026-07-28 echo ${text}: HTTP ${r.status} ${b}`;
  let j;
  try { j = JSON.parse(b); } catch { return `2026-07-28 echo ${text}: not JSON: ${b}`; }
  return j.id === id && textOf(j) === text ? null : `2026-07-28 echo ${text}: ${b}`;
}

/** The answer of a session POST (a JSON body or SSE events), or undefined. */
function answerOf(r) {
  if (/^application\/json\b/.test(r.headers['content-type'] || '')) {
    try { return JSON.parse(r.text()); } catch { return undefined; }
  }
  return r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
}

/**
 * One session through nginx: initialize, initialized, tools/call echo (a short delay, so calls are
 * in flight when the instance is told to stop), DELETE. A 404 on a later request means the
 * session's instance is gone: the client initializes again (at most 3 times). Resolves to
 * {fail: null or what went wrong, reinit: how many times it initialized again}.
 */
async function sessionRound(via, text) {
  let reinit = 0;
  for (let attempt = 0; attempt < 4; attempt++) {
    if (attempt > 0) reinit++;
    const init = await post(via, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'rolling', version: '1' } }));
    await init.done(scaled(10000));
    const sid = init.headers['mcp-session-id'];
    if (init.status !== 200 || !sid || !answerOf(init)?.result) return { fail: `initialize: HTTP ${init.status} ${init.text()}`, reinit };
    const h = { 'MCP-Protocol-Version': answerOf(init).result.protocolVersion };
    const n = await post(via, { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, headers: h });
    await n.done(scaled(10000));
    if (n.status === 404) continue;
    if (n.status !== 202) return { fail: `initialized in ${sid}: HTTP ${n.status} ${n.text()}`, reinit };
    const c = await post(via, rpc('tools/call', { name: 'echo', arguments: { text, delay_ms: 20 } }), { sid, headers: h });
    await c.done(scaled(10000));
    if (c.status === 404) continue;
    if (c.status !== 200 || textOf(answerOf(c)) !== text) return { fail: `echo in ${sid}: HTTP ${c.status} ${c.text()}`, reinit };
    const d = await request(via.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid, ...h } });
    await d.done(scaled(10000));
    if (!(d.status >= 200 && d.status < 300) && d.status !== 404) return { fail: `DELETE ${sid}: HTTP ${d.status} ${d.text()}`, reinit };
    return { fail: null, reinit, inst: sid.slice(0, 2) };
  }
  return { fail: `${text}: 404 after 3 new sessions`, reinit };
}

/**
 * A steady stream of new sessions (sessionRound) and stateless calls (statelessEcho) through nginx by
 * WORKERS clients, until stop(). stats counts what was answered (byInst: sessions per instance),
 * failures what was not.
 */
function traffic(via) {
  const stats = { sessions: 0, stateless: 0, reinit: 0, byInst: { g1: 0, g2: 0 } };
  const failures = [];
  let stopped = false;
  const worker = async (w) => {
    for (let i = 0; i < MAX_ROUNDS && !stopped; i++) {
      const text = `w${w}-${i}`;
      try {
        if (i % 2 === 0) {
          const r = await sessionRound(via, text);
          stats.reinit += r.reinit;
          if (r.fail) failures.push(r.fail);
          else { stats.sessions++; stats.byInst[r.inst]++; }
        } else {
          const f = await statelessEcho(via.url, text);
          if (f) failures.push(f);
          else stats.stateless++;
        }
      } catch (e) {
        failures.push(`${text}: ${e.message}`);
      }
    }
  };
  const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));
  const total = () => stats.sessions + stats.stateless + failures.length;
  return {
    stats, failures, total,
    async stop() { stopped = true; await Promise.all(workers); },
    report(what) {
      console.log(`${what}: ${stats.sessions} sessions, ${stats.stateless} stateless calls, ${stats.reinit} sessions initialized again after a 404, ${failures.length} failed`);
      assert.equal(failures.length, 0, `${failures.length} failed requests (of ${total()}), the first ones:\n${failures.slice(0, 20).join('\n')}`);
    },
  };
}

/** SIGTERM to gws[name] (systemctl restart's stop): it drains and exits 0. */
async function stopInstance(gws, name) {
  const old = gws[name];
  old.proc.kill('SIGTERM');
  await old.waitLog(/SIGTERM: draining/, scaled(5000));
  const r = await Promise.race([old.exited, new Promise((res) => setTimeout(() => res(null), scaled(20000)).unref())]);
  assert.deepEqual(r, { code: 0, signal: null }, `${name} exit after SIGTERM; log (tail):\n${old.logs().slice(-3000)}`);
  return old;
}

/**
 * gws[name] again on the port it had (systemctl restart's start; a new process: a new log). With a
 * notify sink, resolves as `systemctl restart` of the Type=notify unit returns: at the new
 * process's READY=1 (the only process with that NOTIFY_SOCKET, as systemd's is per unit).
 */
async function startInstance(gws, name, port, sink) {
  const from = sink ? sink.messages().length : 0;
  gws[name] = await startGateway({ gateway: { shutdown_drain_ms: DRAIN_MS, instance_id: name, listen: `127.0.0.1:${port}` }, ...(sink ? { env: sink.env } : {}) });
  if (sink) await sink.waitFor((m) => m.READY === '1', { from, ms: scaled(10000), what: `${name}'s READY=1` });
}

/** GET /readyz on the instance's own loopback listener answers 200. */
async function ready(gw) {
  const r = await request(`${gw.base}/readyz`, { method: 'GET' });
  await r.done(scaled(5000));
  return r.status === 200;
}

test('a rolling restart of one instance behind nginx: every new session initializes, every stateless call answers', async () => {
    await withInstances(async ({ gws, via }) => {
      const t = traffic(via);
      const { stats } = t;
      try {
        await waitFor(() => stats.byInst.g1 >= 3 && stats.byInst.g2 >= 3, scaled(20000), 'sessions on both instances');

        // A call of a g1 session in flight when g1 is told to stop: the drain lets it finish.
        let held;
        for (let i = 0; i < 20 && !held; i++) {
          const s = await initSession(via);
          if (s.sid.startsWith('g1.')) held = s;
        }
        assert.ok(held, 'a session on g1');
        const call = post(via, rpc('tools/call', { name: 'echo', arguments: { text: 'held', delay_ms: 1500 } }, 'held'), { sid: held.sid, headers: { 'MCP-Protocol-Version': held.version } });
        await waitFor(() => gws.g1.childMessages().some((m) => m.id !== undefined && m.params?.arguments?.text === 'held'), scaled(5000), 'the held call at g1\'s child');

        const atTerm = t.total();
        const old = await stopInstance(gws, 'g1');
        const c = await call;
        await c.done(scaled(5000));
        assert.equal(c.status, 200, `the held call: ${c.text()}`);
        assert.equal(textOf(answerOf(c)), 'held', c.text());
        await waitFor(() => t.total() >= atTerm + 10, scaled(20000), 'requests while g1 is down');

        await startInstance(gws, 'g1', old.port);
        const g1Before = stats.byInst.g1;
        await waitFor(() => stats.byInst.g1 >= g1Before + 2, scaled(30000), 'new sessions on the restarted g1');
      } finally {
        await t.stop();
      }
      t.report('rolling restart of g1');
    }, { quietErrorLog: true, gateway: { shutdown_drain_ms: DRAIN_MS } });
});

// deploy/README.md's runbook: `systemctl restart mcp-gateway@g1 && curl -sf .../readyz &&
// systemctl restart mcp-gateway@g2`. Under Type=notify each restart returns at the new process's
// READY=1; the runbook then asks /readyz once (READY=1 also comes when readiness's first verdict is
// "not ready") and restarts the second at once, without polling. nginx must not hold g1 as failed
// for what it refused while it was down: then g2's restart would leave new sessions no instance.
test('a rolling restart of both instances behind nginx, the second as soon as the first sent READY=1: nothing fails', async () => {
  const sink = await notifySink();
  try {
    await withInstances(async ({ gws, via, ng }) => {
      const t = traffic(via);
      const { stats } = t;
      const refused = (port) => new RegExp(`Connection refused\\) while connecting to upstream.*upstream: "http://127\\.0\\.0\\.1:${port}/`).test(ng.errorLog());
      // Each wait ends early on a failed request: t.report then says which ones failed.
      const until = (cond, ms, what) => waitFor(() => t.failures.length > 0 || cond(), ms, what);
      try {
        await until(() => stats.byInst.g1 >= 3 && stats.byInst.g2 >= 3, scaled(20000), 'sessions on both instances');
        for (const [name, other] of [['g1', 'g2'], ['g2', 'g1']]) {
          const atTerm = t.total();
          const otherBefore = stats.byInst[other];
          const old = await stopInstance(gws, name);
          // While it is down the stream goes on: new sessions on the other instance, and nginx has
          // tried the one that is down (a refused connect, which a max_fails upstream counts).
          await until(() => t.total() >= atTerm + 10 && stats.byInst[other] >= otherBefore + 2 && refused(old.port), scaled(20000), `requests while ${name} is down`);
          await startInstance(gws, name, old.port, sink);
          assert.ok(await ready(gws[name]), `${name}'s /readyz answers 200 once it sent READY=1`);
        }
        // Both restarted: new sessions reach each of them.
        const before = { ...stats.byInst };
        await until(() => stats.byInst.g1 >= before.g1 + 2 && stats.byInst.g2 >= before.g2 + 2, scaled(30000), 'new sessions on both restarted instances');
      } finally {
        await t.stop();
      }
      t.report('rolling restart of g1, then g2 at its READY=1');
    }, { quietErrorLog: true, gateway: { shutdown_drain_ms: DRAIN_MS } });
  } finally {
    await sink.close();
  }
});

// deploy/systemd/mcp-gateway-restart-instances, which the Debian package's postinst runs after an
// upgrade (debhelper restarts no instance of a template unit), does the same: each running
// mcp-gateway@NAME in turn, the next once the one before answers /readyz. systemctl and
// deb-systemd-invoke are stood in for by a script that lists g1 and g2 (list-units), gives each
// one's command line as systemd shows it (show -p ExecStart --value) and, for try-restart, asks
// this test to stop and start that instance (files in ctl/), returning at the new process's
// READY=1, as systemctl does for the Type=notify unit.
const RESTART_INSTANCES = path.join(process.env.GW_SOURCE_ROOT, 'deploy/systemd/mcp-gateway-restart-instances');
const STUB = `#!/bin/sh
ctl=$(dirname "$0")/ctl
case "$1" in
list-units) for i in g1 g2; do echo "mcp-gateway@$i.service loaded active running mcp-gateway $i"; done ;;
show) cat "$ctl/$5.exec" ;;
try-restart)
    echo "$2" >"$ctl/req.tmp" && mv "$ctl/req.tmp" "$ctl/req"
    i=0
    until [ -f "$ctl/done" ]; do
        i=$((i + 1)); [ $i -lt 600 ] || exit 1
        sleep 0.05
    done
    rm "$ctl/done" ;;
*) echo "stub systemctl: $*" >&2; exit 1 ;;
esac
`;

test('restart-instances (postinst after an upgrade) restarts both instances behind nginx one at a time, each once the one before is ready: nothing fails', async () => {
  const sink = await notifySink();
  try {
  await withInstances(async ({ gws, via }) => {
    const dir = tmpdir('mcpgw-restart-');
    const ctl = path.join(dir, 'ctl');
    fs.mkdirSync(ctl);
    fs.writeFileSync(path.join(dir, 'systemctl'), STUB, { mode: 0o755 });
    fs.symlinkSync('systemctl', path.join(dir, 'deb-systemd-invoke'));
    // What systemd would show for each instance; its file names its real port (print-config).
    const describe = (name) => {
      const gw = gws[name];
      fs.writeFileSync(gw.conf, fs.readFileSync(gw.conf, 'utf8').replace(/^listen = .*$/m, `listen = 127.0.0.1:${gw.port}`));
      fs.writeFileSync(path.join(ctl, `mcp-gateway@${name}.service.exec`),
        `{ path=${GW_BIN} ; argv[]=${GW_BIN} --config ${gw.conf} ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n`);
    };
    describe('g1');
    describe('g2');
    const t = traffic(via);
    const { stats } = t;
    const restarted = [];
    let out = '';
    try {
      await waitFor(() => stats.byInst.g1 >= 3 && stats.byInst.g2 >= 3, scaled(20000), 'sessions on both instances');
      const pids = { g1: gws.g1.proc.pid, g2: gws.g2.proc.pid };
      const proc = spawn('sh', [RESTART_INSTANCES], { env: { ...process.env, PATH: `${dir}:${process.env.PATH}` }, stdio: ['ignore', 'pipe', 'pipe'] });
      proc.stdout.on('data', (d) => { out += d; });
      proc.stderr.on('data', (d) => { out += d; });
      const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
      let code = null;
      exited.then((c) => { code = c; });
      const deadline = Date.now() + scaled(60000);
      while (code === null || fs.existsSync(path.join(ctl, 'req'))) {
        assert.ok(Date.now() < deadline, `restart-instances did not end in time:\n${out}`);
        const req = path.join(ctl, 'req');
        if (fs.existsSync(req)) {
          const unit = fs.readFileSync(req, 'utf8').trim();
          fs.unlinkSync(req);
          const name = /^mcp-gateway@(g[12])\.service$/.exec(unit)?.[1];
          assert.ok(name, `restart-instances asked for ${unit}`);
          // The one restarted before this one answers /readyz: restart-instances waited for it.
          if (restarted.length) assert.ok(await ready(gws[restarted.at(-1)]), `${restarted.at(-1)} ready before ${name} is restarted`);
          const old = await stopInstance(gws, name);
          await startInstance(gws, name, old.port, sink);
          describe(name);
          restarted.push(name);
          fs.writeFileSync(path.join(ctl, 'done'), '');
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(code, 0, `restart-instances:\n${out}`);
      assert.deepEqual(restarted, ['g1', 'g2'], out);
      assert.equal(out.match(/is ready$/gm)?.length, 2, out);
      for (const name of ['g1', 'g2']) assert.notEqual(gws[name].proc.pid, pids[name], `${name} is a new process`);
      const before = { ...stats.byInst };
      await waitFor(() => stats.byInst.g1 >= before.g1 + 2 && stats.byInst.g2 >= before.g2 + 2, scaled(30000), 'new sessions on both restarted instances');
    } finally {
      await t.stop();
    }
    console.log(out.trim());
    t.report('restart-instances');
  }, { quietErrorLog: true, gateway: { shutdown_drain_ms: DRAIN_MS } });
  } finally {
    await sink.close();
  }
});
