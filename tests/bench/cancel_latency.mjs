// SPDX-License-Identifier: MIT
// Measures the time from a client dropping its connection to the child receiving the
// notifications/cancelled, directly and behind nginx. The example child stamps each line it
// reads with CLOCK_MONOTONIC (--log-times), the clock behind process.hrtime here, so the figure
// excludes any polling by this script. Usage (from the repository root, after a build):
//   GW_BIN=build/src/mcp-gateway GW_EXAMPLE=build/tests/fixtures/mcp-example-server \
//   GW_SOURCE_ROOT=$PWD node tests/bench/cancel_latency.mjs [runs]
import fs from 'node:fs';

import { initSession, post, rpc, startGateway, waitFor } from '../lib/gw.mjs';
import { haveNginx, startNginx } from '../lib/nginx.mjs';

const runs = Number(process.argv[2] || 200);

function stamped(gw) {
  if (!fs.existsSync(gw.childLog)) return [];
  // The last piece is a line still being written (or empty): only complete lines count.
  return fs.readFileSync(gw.childLog, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => {
    const sp = l.indexOf(' ');
    return { t: BigInt(l.slice(0, sp)), msg: JSON.parse(l.slice(sp + 1)) };
  });
}

async function measure(gw, target, n) {
  const s = await initSession(target);
  const out = [];
  for (let i = 0; i < n; i++) {
    const id = `run-${i}`;
    const from = stamped(gw).length; /* ids restart per session: look only at new lines */
    const r = await post(target, rpc('tools/call', { name: 'slow', arguments: { steps: 100000, interval_ms: 1000 } }, id), { sid: s.sid });
    const seen = await waitFor(() => stamped(gw).slice(from).find((x) => x.msg.method === 'tools/call'), 5000, 'call at child');
    const t0 = process.hrtime.bigint();
    r.drop();
    const c = await waitFor(() => stamped(gw).slice(from).find((x) => x.msg.method === 'notifications/cancelled' && x.msg.params.requestId === seen.msg.id), 5000, 'cancel at child');
    out.push({ ms: Number(c.t - t0) / 1e6 });
  }
  return out.map((o) => o.ms).sort((a, b) => a - b);
}

function summary(name, xs) {
  const q = (p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  return `${name.padEnd(14)} runs=${xs.length} median=${q(0.5).toFixed(3)} ms p90=${q(0.9).toFixed(3)} ms p99=${q(0.99).toFixed(3)} ms worst=${xs[xs.length - 1].toFixed(3)} ms`;
}

const gw = await startGateway({ gateway: { log_level: 'info', max_inflight_per_session: 65536 }, servers: [{ name: 'example', path: '/mcp', args: ['--log-times'] }] });
try {
  console.log(summary('direct', await measure(gw, gw, runs)));
  if (haveNginx) {
    const ng = await startNginx({ gatewayPort: gw.port });
    try {
      console.log(summary('behind nginx', await measure(gw, { ...gw, url: ng.url }, runs)));
    } finally {
      await ng.stop();
    }
  }
} finally {
  await gw.stop();
}
