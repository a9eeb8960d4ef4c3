// SPDX-License-Identifier: MIT
// A steady stream of new sessions through nginx, for the rolling restart of deploy/README.md
// step 10 (tests/package/run.sh restarts one instance while this runs). WORKERS clients each
// loop: initialize (by nginx's public name), then DELETE the session. Every initialize must be
// answered 200 with a session id and a result; a DELETE may also get 404 (its instance is gone).
// After each round the counts go to PROGRESS as JSON ({ok, g1, g2, ..., failed}); the loop ends
// when STOP exists (or after MAX_ROUNDS per worker, or MAX_MS), and the exit status is 1 when any
// request failed. Usage: node rolling.mjs URL HOST PROGRESS STOP
import fs from 'node:fs';
import http from 'node:http';

const [url, host, progressFile, stopFile] = process.argv.slice(2);
if (!stopFile) {
  console.error('usage: node rolling.mjs URL HOST PROGRESS STOP');
  process.exit(2);
}
const WORKERS = 3;
const MAX_ROUNDS = 20000;
const MAX_MS = 120000;
const agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
const counts = { ok: 0, failed: 0 };
const failures = [];
const t0 = Date.now();

/** One request through nginx; resolves with {status, headers, body}. */
function send(method, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { Host: host, ...headers }, timeout: 20000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The JSON-RPC answer of a JSON or SSE body, or undefined. */
function answerOf(r) {
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) {
    try { return JSON.parse(r.body); } catch { return undefined; }
  }
  for (const block of r.body.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
    if (!data) continue;
    try {
      const j = JSON.parse(data);
      if ('result' in j || 'error' in j) return j;
    } catch { /* not a message */ }
  }
  return undefined;
}

const init = JSON.stringify({
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'package-rolling', version: '1' } },
});

/** initialize then DELETE; returns null, or what went wrong. */
async function round() {
  const r = await send('POST', { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, init);
  const sid = r.headers['mcp-session-id'];
  if (r.status !== 200 || !sid || !answerOf(r)?.result) return `initialize: HTTP ${r.status} ${r.body.slice(0, 200)}`;
  const d = await send('DELETE', { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' });
  if (!(d.status >= 200 && d.status < 300) && d.status !== 404) return `DELETE ${sid}: HTTP ${d.status} ${d.body.slice(0, 200)}`;
  const inst = sid.split('.')[0];
  counts[inst] = (counts[inst] ?? 0) + 1;
  return null;
}

async function worker() {
  for (let i = 0; i < MAX_ROUNDS && !fs.existsSync(stopFile) && Date.now() - t0 < MAX_MS; i++) {
    let fail;
    try { fail = await round(); } catch (e) { fail = e.message; }
    if (fail) { counts.failed++; failures.push(fail); } else counts.ok++;
    fs.writeFileSync(`${progressFile}.tmp`, JSON.stringify(counts));
    fs.renameSync(`${progressFile}.tmp`, progressFile);
  }
}

await Promise.all(Array.from({ length: WORKERS }, worker));
agent.destroy();
console.log(`rolling: ${JSON.stringify(counts)} in ${Date.now() - t0} ms`);
if (failures.length) {
  console.log(failures.slice(0, 20).join('\n'));
  process.exit(1);
}
