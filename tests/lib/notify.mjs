// SPDX-License-Identifier: MIT
// A systemd notify socket for a gateway a test starts: what systemd's Type=notify reads, so a test
// can wait as `systemctl start`, `restart` and `reload` do (READY=1 after a start or a reload,
// RELOADING=1, STOPPING=1, STATUS=). The socket is the real thing, an AF_UNIX datagram socket,
// bound by tests/fixtures/notify_sink.c (node has none), which prints each datagram as a line.
//
//   const sink = await notifySink();                    // a path; notifySink({ abstract: true }): '@name'
//   const gw = await startGateway({ env: sink.env });   // NOTIFY_SOCKET=...
//   await sink.waitFor((m) => m.READY === '1');         // as `systemctl start` returns
//   const n = sink.messages().length; gw.proc.kill('SIGHUP');
//   await sink.waitFor((m) => m.READY === '1', { from: n });   // as `systemctl reload` returns
//   sink.close();
//
// messages(): every datagram so far, in order, as an object of its KEY=VALUE lines (a key said
// twice keeps the last); raw(): the same as the lines the fixture printed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { tmpdir, waitFor as poll } from './gw.mjs';
import { scaled } from './timing.mjs';

export const NOTIFY_SINK = process.env.GW_NOTIFY_SINK;

const parse = (line) => Object.fromEntries(line.split('\t').filter(Boolean).map((kv) => {
  const i = kv.indexOf('=');
  return i < 0 ? [kv, ''] : [kv.slice(0, i), kv.slice(i + 1)];
}));

/** Starts a notify socket; resolves once it is bound. */
export async function notifySink({ abstract = false } = {}) {
  if (!NOTIFY_SINK || !fs.existsSync(NOTIFY_SINK)) throw new Error('GW_NOTIFY_SINK (the notify-sink fixture) is not built');
  const dir = tmpdir('mcpgw-notify-');
  const name = abstract ? `@mcpgw-notify-${process.pid}-${path.basename(dir)}` : path.join(dir, 'notify.sock');
  const proc = spawn(NOTIFY_SINK, [name], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => { out += d.toString(); });
  proc.stderr.on('data', (d) => { err += d.toString(); });
  const lines = () => out.split('\n').slice(0, -1);
  await poll(() => lines()[0] === 'bound' || proc.exitCode !== null, scaled(5000), 'the notify socket bound');
  if (proc.exitCode !== null) throw new Error(`notify-sink ${name}: ${err}`);
  const raw = () => lines().slice(1);
  const messages = () => raw().map(parse);
  return {
    name,
    env: { NOTIFY_SOCKET: name },
    raw,
    messages,
    /** The first message at index >= from that pred accepts: {index, ...its keys}. */
    waitFor: (pred, { from = 0, ms = scaled(10000), what = 'a notify message' } = {}) => poll(() => {
      const all = messages();
      for (let i = from; i < all.length; i++) if (pred(all[i])) return { index: i, ...all[i] };
      return null;
    }, ms, what),
    /** Ends the fixture (it removes its socket file). */
    async close() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const done = new Promise((res) => proc.on('exit', res));
      proc.stdin.end();
      await done;
    },
  };
}
