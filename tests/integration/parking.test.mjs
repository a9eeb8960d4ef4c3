// SPDX-License-Identifier: MIT
// Parked connections (src/README.md, section 6): a kept-alive connection whose request waited
// for its child is suspended as its response ends, out of libmicrohttpd's loop, and resumed by the
// gateway's own watch when its client writes again. What a client must never see of it: a request
// left unread (pipelined, in pieces, past MHD's buffer, chunked), a connection kept that should
// close (Connection: close, HTTP/1.0, its client's FIN or reset), one kept past
// connection_timeout_s, or a stop that aborts. Each case also reads mcpgw_http_connections_parked
// so that a gateway that stopped parking fails here instead of passing on the old path, and the
// gateway's open descriptors, so that a connection closed while parked is seen to be released.
//
// Raw sockets: node's http client neither pipelines nor sends a request in pieces. Responses are
// read by their framing (Content-Length or chunked); nothing sleeps: waits poll with a deadline.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { test } from 'node:test';

import { ACCEPT_BOTH, initSession, metricSamples, parseSse, request, waitFor, withGateway } from '../lib/gw.mjs';
import { scaled } from '../lib/timing.mjs';

const VERSION = '2025-06-18';
const HOLD = 1000; /* response_hold_ms: answers leave as one body with a Content-Length */
const textOf = (j) => j?.result?.content?.[0]?.text;

/** A client connection read response by response. */
class Raw {
  /** halfOpen: the client keeps its side open when the gateway closes (closed: its FIN came). */
  constructor(gw, { halfOpen = false } = {}) {
    this.gw = gw;
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.s = net.connect({ port: gw.port, host: gw.host, allowHalfOpen: halfOpen });
    this.s.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); });
    this.s.on('error', () => {});
    this.s.on('end', () => { this.closed = true; });
    this.s.on('close', () => { this.closed = true; });
    this.ready = new Promise((res, rej) => { this.s.once('connect', res); this.s.once('error', rej); });
  }

  write(data) { return new Promise((res) => this.s.write(data, res)); }

  /** The next whole response: {status, headers, body}; the bytes after it stay for the next. */
  async response(what, ms = scaled(10000)) {
    let r;
    await waitFor(() => (r = this.take()) || (this.closed && 'closed'), ms, `${what}: a response`);
    if (r === 'closed') throw new Error(`${what}: the gateway closed the connection; read ${this.buf.length} bytes: ${this.buf.toString()}`);
    return r;
  }

  take() {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const lines = this.buf.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(lines[0].split(' ')[1]);
    const headers = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let at = end + 4;
    let body;
    if (headers['transfer-encoding'] === 'chunked') {
      const parts = [];
      for (;;) {
        const nl = this.buf.indexOf('\r\n', at);
        if (nl < 0) return null;
        const size = parseInt(this.buf.subarray(at, nl).toString(), 16);
        if (this.buf.length < nl + 2 + size + 2) return null;
        parts.push(this.buf.subarray(nl + 2, nl + 2 + size));
        at = nl + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(parts).toString();
    } else {
      const len = Number(headers['content-length'] ?? 0);
      if (this.buf.length < at + len) return null;
      body = this.buf.subarray(at, at + len).toString();
      at += len;
    }
    this.buf = this.buf.subarray(at);
    return { status, headers, body };
  }

  /** Resolves once the gateway has closed the connection (or rejects after ms). */
  async closedBy(what, ms = scaled(10000)) { await waitFor(() => this.closed, ms, `${what}: the gateway to close the connection`); }

  destroy() { this.s.destroy(); }
}

/** Runs fn(c) on a new connection c (opts: Raw's), which is destroyed after it. */
async function withRaw(gw, fn, opts) {
  const c = new Raw(gw, opts);
  await c.ready;
  try {
    return await fn(c);
  } finally {
    c.destroy();
  }
}

/** The raw text of a POST of msg in session sid (headers: more, or replacing, lines). */
function postText(gw, sid, msg, headers = {}, { version = '1.1' } = {}) {
  const body = typeof msg === 'string' ? msg : JSON.stringify(msg);
  const h = {
    Host: `${gw.host}:${gw.port}`, 'Content-Type': 'application/json', Accept: ACCEPT_BOTH,
    'Mcp-Session-Id': sid, 'MCP-Protocol-Version': VERSION, 'Content-Length': Buffer.byteLength(body), ...headers,
  };
  const head = Object.entries(h).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  return `POST /mcp HTTP/${version}\r\n${head}\r\n${body}`;
}

const echo = (id, text) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });

/** Asserts r is the echo answer of id with text. */
function assertEcho(r, id, text, what) {
  assert.equal(r.status, 200, `${what}: ${r.body}`);
  const answers = (r.headers['content-type'] || '').startsWith('text/event-stream') ? parseSse(r.body).map((e) => e.json) : [JSON.parse(r.body)];
  const a = answers.find((j) => j && j.id === id);
  assert.ok(a, `${what}: the answer of ${id} in ${r.body}`);
  assert.equal(textOf(a), text, `${what}: ${r.body}`);
}

async function metrics(gw) {
  const r = await request(`${gw.base}/metrics`, { method: 'GET' });
  return metricSamples(await r.done(scaled(10000)));
}
const parked = async (gw) => (await metrics(gw)).mcpgw_http_connections_parked;
/** Waits until exactly n connections are parked. */
async function parkedIs(gw, n, what) {
  let last;
  await waitFor(async () => (last = await parked(gw)) === n, scaled(10000), `${what}: ${n} parked (last read ${last})`);
}
const fds = (gw) => fs.readdirSync(`/proc/${gw.proc.pid}/fd`).length;

const opts = (gateway = {}) => ({ gateway: { response_hold_ms: HOLD, ...gateway } });

test('a waited echo parks its kept-alive connection, and each next request resumes it: 20 in a row, one connection', async () => {
  await withGateway(opts(), async (gw) => {
    const s = await initSession(gw);
    await withRaw(gw, async (c) => {
      await parkedIs(gw, 0, 'before');
      for (let i = 0; i < 20; i++) {
        await c.write(postText(gw, s.sid, echo(`p-${i}`, `park ${i}`)));
        assertEcho(await c.response(`call ${i}`), `p-${i}`, `park ${i}`, `call ${i}`);
        await parkedIs(gw, 1, `after call ${i}`);
      }
      assert.equal(c.closed, false);
    });
    await parkedIs(gw, 0, 'after the client closed');
  });
});

test('pipelined requests behind a waited one are all answered, in order: in one write, and past MHD\'s read buffer', async () => {
  await withGateway(opts(), async (gw) => {
    const s = await initSession(gw);
    for (const [what, n, pad] of [['3 in one write', 3, 0], ['8 of 12 KiB each in one write (96 KiB)', 8, 12 * 1024]]) {
      await withRaw(gw, async (c) => {
        // The first request parks the connection; the pipelined ones come while it is parked.
        await c.write(postText(gw, s.sid, echo('first', 'first')));
        assertEcho(await c.response(`${what}: first`), 'first', 'first', what);
        await parkedIs(gw, 1, `${what}: first`);
        const texts = Array.from({ length: n }, (_, i) => `${i}:${'x'.repeat(pad)}`);
        await c.write(texts.map((t, i) => postText(gw, s.sid, echo(`pl-${i}`, t))).join(''));
        for (let i = 0; i < n; i++) assertEcho(await c.response(`${what}: ${i}`), `pl-${i}`, texts[i], `${what}: ${i}`);
        await parkedIs(gw, 1, `${what}: after the pipeline`);
        // And pipelined from the start: the request that parks has another behind it already.
        await c.write(postText(gw, s.sid, echo('a', 'a')) + postText(gw, s.sid, echo('b', 'b')));
        assertEcho(await c.response(`${what}: a`), 'a', 'a', what);
        assertEcho(await c.response(`${what}: b`), 'b', 'b', what);
      });
      await parkedIs(gw, 0, `${what}: closed`);
    }
  });
});

test('a request in pieces: part of it behind a waited one, the rest after its answer; then one byte at a time', async () => {
  await withGateway(opts(), async (gw) => {
    const s = await initSession(gw);
    await withRaw(gw, async (c) => {
      const next = postText(gw, s.sid, echo('piece', 'in pieces'));
      for (const cut of [3, 40, next.length - 1]) {
        await c.write(postText(gw, s.sid, echo(`w-${cut}`, 'waited')) + next.slice(0, cut));
        assertEcho(await c.response(`cut ${cut}: the waited one`), `w-${cut}`, 'waited', `cut ${cut}`);
        await c.write(next.slice(cut));
        assertEcho(await c.response(`cut ${cut}: the rest`), 'piece', 'in pieces', `cut ${cut}`);
      }
      await parkedIs(gw, 1, 'parked');
      const drip = postText(gw, s.sid, echo('drip', 'a byte at a time'));
      for (let i = 0; i < drip.length; i += 1) await c.write(drip[i]);
      assertEcho(await c.response('dripped'), 'drip', 'a byte at a time', 'dripped');
      await parkedIs(gw, 1, 'after the drip');
    });
  });
});

test('a chunked request body is answered, and so is the next request on its connection', async () => {
  await withGateway(opts(), async (gw) => {
    const s = await initSession(gw);
    await withRaw(gw, async (c) => {
      const body = JSON.stringify(echo('ch', 'chunked'));
      const chunked = postText(gw, s.sid, '', { 'Content-Length': undefined, 'Transfer-Encoding': 'chunked' })
        + `${(10).toString(16)}\r\n${body.slice(0, 10)}\r\n${(body.length - 10).toString(16)}\r\n${body.slice(10)}\r\n0\r\n\r\n`;
      await c.write(chunked);
      assertEcho(await c.response('chunked'), 'ch', 'chunked', 'chunked');
      await c.write(postText(gw, s.sid, echo('after', 'after')));
      assertEcho(await c.response('after'), 'after', 'after', 'after the chunked one');
    });
  });
});

/** Waits until nothing is parked and the gateway holds no more descriptors than base. */
async function settled(gw, base, what) {
  await parkedIs(gw, 0, what);
  await waitFor(() => fds(gw) <= base, scaled(10000), `${what}: the gateway's descriptors back to ${base} (now ${fds(gw)})`);
}

test('connections that must end are not kept parked: Connection: close and HTTP/1.0 (to a client that keeps its half open), the client\'s FIN, its reset', async () => {
  await withGateway(opts(), async (gw) => {
    const s = await initSession(gw);
    await parkedIs(gw, 0, 'before');
    const base = fds(gw);
    // The gateway closes after the answer, whatever the client does: it keeps its side open here,
    // so nothing it sends can end a connection the gateway left parked.
    for (const [what, text] of [
      ['Connection: close', postText(gw, s.sid, echo('cc', 'close'), { Connection: 'close' })],
      ['HTTP/1.0', postText(gw, s.sid, echo('cc', 'close'), {}, { version: '1.0' })],
    ]) {
      await withRaw(gw, async (c) => {
        await c.write(text);
        assertEcho(await c.response(what), 'cc', 'close', what);
        await c.closedBy(what);
        await settled(gw, base, what);
      }, { halfOpen: true });
    }
    // The client ends a parked connection: FIN, then RST.
    for (const how of ['end', 'resetAndDestroy']) {
      const c = new Raw(gw);
      await c.ready;
      await c.write(postText(gw, s.sid, echo('h', how)));
      assertEcho(await c.response(how), 'h', how, how);
      await parkedIs(gw, 1, `${how}: parked`);
      c.s[how]();
      await settled(gw, base, `after the client's ${how}`);
    }
  });
});

test('a parked connection idle for connection_timeout_s is closed, never before', async () => {
  await withGateway(opts({ connection_timeout_s: 1 }), async (gw) => {
    const s = await initSession(gw);
    await parkedIs(gw, 0, 'before');
    const base = fds(gw);
    await withRaw(gw, async (c) => {
      await c.write(postText(gw, s.sid, echo('idle', 'idle')));
      assertEcho(await c.response('idle'), 'idle', 'idle', 'idle');
      const t0 = performance.now();
      await parkedIs(gw, 1, 'idle: parked');
      await c.closedBy('connection_timeout_s', scaled(10000));
      const took = performance.now() - t0;
      assert.ok(took >= 900, `closed ${took.toFixed(0)} ms after its answer: before connection_timeout_s (1 s)`);
      await settled(gw, base, 'after connection_timeout_s');
    }, { halfOpen: true });
  });
});

/** HTTP_PARK_MAX in src/http/http_conn.c: connections parked at once, at most. */
const PARK_MAX = 64;

test('many connections: at most 64 parked at once, the rest on libmicrohttpd\'s own path, all answered again; a stop with them parked exits cleanly', async () => {
  const N = PARK_MAX + 16;
  const cs = [];
  try {
    await withGateway(opts(), async (gw) => {
      const s = await initSession(gw);
      for (let i = 0; i < N; i++) cs.push(new Raw(gw));
      await Promise.all(cs.map((c) => c.ready));
      await Promise.all(cs.map(async (c, i) => {
        await c.write(postText(gw, s.sid, echo(`m-${i}`, `one ${i}`)));
        assertEcho(await c.response(`conn ${i}`), `m-${i}`, `one ${i}`, `conn ${i}`);
      }));
      await parkedIs(gw, PARK_MAX, 'parked up to the bound');
      // Every connection asks again, parked or not; each is answered, and the bound holds.
      await Promise.all(cs.map(async (c, i) => {
        await c.write(postText(gw, s.sid, echo(`n-${i}`, `two ${i}`)));
        assertEcho(await c.response(`conn ${i} again`), `n-${i}`, `two ${i}`, `conn ${i} again`);
      }));
      await parkedIs(gw, PARK_MAX, 'parked up to the bound again');
      // Half of them close; the other half's next calls park them all.
      cs.slice(0, N / 2).forEach((c) => c.destroy());
      await Promise.all(cs.slice(N / 2).map(async (c, k) => {
        await c.write(postText(gw, s.sid, echo(`o-${k}`, `three ${k}`)));
        assertEcho(await c.response(`conn ${N / 2 + k} a third time`), `o-${k}`, `three ${k}`, `conn ${N / 2 + k} a third time`);
      }));
      await parkedIs(gw, N / 2, 'the remaining half parked');
      // withGateway's stop (SIGTERM) comes with them parked and asserts a clean exit: MHD must
      // not be stopped with a connection suspended.
    });
  } finally {
    cs.forEach((c) => c.destroy());
  }
});
