// SPDX-License-Identifier: MIT
// The official TypeScript SDK client against a running gateway (tests/package/run.sh points it at
// the installed one, started as its systemd unit would): initialize, tools/list, tools/call echo,
// DELETE. Usage: node sdk_client.mjs URL
import assert from 'node:assert/strict';

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');

const url = new URL(process.argv[2]);
const client = new Client({ name: 'mcp-gateway-package-test', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);
console.log(`connected to ${url}: server ${JSON.stringify(client.getServerVersion())}, session ${transport.sessionId}`);
const { tools } = await client.listTools();
assert.ok(tools.some((t) => t.name === 'echo'), 'the example server lists echo');
console.log(`tools/list: ${tools.map((t) => t.name).join(', ')}`);
const r = await client.callTool({ name: 'echo', arguments: { text: 'hello from the installed package' } });
const text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
assert.match(text, /hello from the installed package/);
console.log(`tools/call echo: ${text}`);
await transport.terminateSession();
await client.close();
console.log('session ended (DELETE)');
