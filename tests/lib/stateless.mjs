// SPDX-License-Identifier: MIT
// Raw stateless requests for the pool's tests (stateless_bridge, stateless_caps): a POST with the
// headers of the era, the JSON-RPC messages of its response, and the whole exchange.
import { ACCEPT_BOTH, request } from './gw.mjs';
import { scaled } from './timing.mjs';

export const V = '2026-07-28';

/** POSTs msg with the headers of its era (Mcp-Name mirrors params.name or params.uri). */
export function mpost(gw, msg, { path: p = '/mcp', bearer, headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': msg.method, ...headers };
  const name = msg.method === 'resources/read' ? msg.params.uri : msg.params.name;
  if (name !== undefined) h['Mcp-Name'] = name;
  if (bearer) h.Authorization = `Bearer ${bearer}`;
  return request(`${gw.base}${p}`, { method: 'POST', headers: h, body: msg });
}

/** Every JSON-RPC message of a response: one JSON object, or the SSE stream's events. */
export function msgsOf(r) {
  if (/^application\/json/.test(r.headers['content-type'] ?? '')) return r.text() ? [JSON.parse(r.text())] : [];
  return r.events().map((e) => e.json).filter(Boolean);
}

/** The whole exchange: {r, msgs, answer} (answer: the message with result or error). */
export async function exchange(gw, msg, opts = {}) {
  const r = await mpost(gw, msg, opts);
  await r.done(scaled(10000));
  const msgs = msgsOf(r);
  return { r, msgs, answer: msgs.find((j) => j && ('result' in j || 'error' in j)) };
}
