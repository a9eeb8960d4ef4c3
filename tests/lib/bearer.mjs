// SPDX-License-Identifier: MIT
// A client with a bearer token in a session (2025-06-18), for the tests of what one principal's
// child holds: a POST, an initialize that also sends notifications/initialized, and a read of one
// variable (or the file it names) through the example server's env tool.
import assert from 'node:assert/strict';

import { ACCEPT_BOTH, request, rpc } from './gw.mjs';
import { scaled } from './timing.mjs';

/** The longest a POST here waits for its response to start: a request never answered fails the test. */
const HEAD_MS = 60000;

/** POST msg to gw's path p with token (and session sid, and more headers). */
export function bearerPost(gw, p, msg, token, sid, headers = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, Authorization: `Bearer ${token}`, ...headers };
  if (sid) h['Mcp-Session-Id'] = sid;
  const ms = scaled(HEAD_MS);
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`POST ${p} (${msg.method ?? 'answer'}): no response within ${ms} ms`)), ms);
  });
  return Promise.race([request(`${gw.base}${p}`, { method: 'POST', headers: h, body: msg }), late]).finally(() => clearTimeout(timer));
}

const initMsg = () => rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bearer-it', version: '1' } });

/** initialize with token on path p: {status, sid, body} when 200, else {status, body, error, headers}. */
export async function bearerInit(gw, p, token) {
  const r = await bearerPost(gw, p, initMsg(), token);
  const body = await r.done(scaled(20000));
  let error;
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) error = JSON.parse(body).error;
  if (r.status !== 200) return { status: r.status, body, error, headers: r.headers };
  const sid = r.headers['mcp-session-id'];
  const n = await bearerPost(gw, p, { jsonrpc: '2.0', method: 'notifications/initialized' }, token, sid, { 'MCP-Protocol-Version': '2025-06-18' });
  await n.done();
  assert.equal(n.status, 202, n.text());
  return { status: r.status, sid, body };
}

/**
 * The value of variable name in the session's child, or (file) the content of the file it names;
 * null when unset; {status, body} when the call is not answered 200.
 */
export async function envOf(gw, p, token, sid, name, file = false) {
  const r = await bearerPost(gw, p, rpc('tools/call', { name: 'env', arguments: { name, file } }), token, sid);
  const body = await r.done();
  if (r.status !== 200) return { status: r.status, body };
  const ans = r.events().map((e) => e.json).find((j) => j && ('result' in j || 'error' in j));
  assert.ok(ans?.result, body);
  return ans.result.isError ? null : ans.result.content[0].text;
}
