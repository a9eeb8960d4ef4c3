// SPDX-License-Identifier: MIT
// Starts Debian's real nginx on loopback with a shipped site config (deploy/nginx), pointed
// at test gateways. Only the ports, the TLS lines and (optionally) the read timeout change.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { startGateway, tmpdir, waitFor } from './gw.mjs';

const NGINX = ['/usr/sbin/nginx', '/usr/local/sbin/nginx'].find((p) => fs.existsSync(p));
export const haveNginx = Boolean(NGINX);

/** A free loopback port (bound and released; nginx cannot listen on port 0). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.on('connect', () => { c.destroy(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

/**
 * Starts nginx with a site file from deploy/nginx (default mcp-gateway.conf, or `site`: a file
 * name there or an absolute path). `ports` maps the upstream ports written in the site to the
 * test gateways' ports ({8081: gw1.port, 8082: gw2.port}), every `127.0.0.1:<port>` occurrence;
 * `gatewayPort` is short for {8080: gatewayPort} (the single-instance site). A port that does
 * not occur in the site is an error: the site and the test disagree.
 */
export async function startNginx({ gatewayPort, readTimeout, site: siteFile = 'mcp-gateway.conf', ports = {} } = {}) {
  // The nginx tests fail, rather than skip, without nginx: a skip would pass the suite unseen.
  if (!NGINX) throw new Error('nginx is not installed (tests/deps.sh installs nginx-light)');
  const root = process.env.GW_SOURCE_ROOT;
  const map = { ...(gatewayPort !== undefined ? { 8080: gatewayPort } : {}), ...ports };
  const sitePath = path.isAbsolute(siteFile) ? siteFile : path.join(root, 'deploy/nginx', siteFile);
  const dir = tmpdir('mcpgw-nginx-');
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  let site = fs.readFileSync(sitePath, 'utf8');
  for (const [from, to] of Object.entries(map)) {
    const re = new RegExp(`\\b127\\.0\\.0\\.1:${Number(from)}(?!\\d)`, 'g');
    if (!re.test(site)) throw new Error(`${sitePath} has no 127.0.0.1:${from} to point at port ${to}`);
    site = site.replace(re, `127.0.0.1:${Number(to)}`);
  }
  if (!/listen 443 ssl http2;/.test(site)) throw new Error(`${sitePath} has no "listen 443 ssl http2;" line`);
  site = site
    .replace(/listen 443 ssl http2;/, `listen 127.0.0.1:${port};`)
    .replace(/^\s*ssl_certificate.*$/gm, '');
  if (readTimeout) site = site.replace('proxy_read_timeout 1h;', `proxy_read_timeout ${readTimeout};`);
  const conf = `
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${site}
}
`;
  fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const proc = spawn(NGINX, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  await waitFor(async () => (proc.exitCode !== null ? 'exit' : canConnect(port)), 5000, 'nginx to listen').then((v) => {
    if (v === 'exit') throw new Error(`nginx exited: ${out}`);
  });
  return {
    port,
    dir,
    url: `http://127.0.0.1:${port}/mcp`,
    errorLog: () => (fs.existsSync(path.join(dir, 'error.log')) ? fs.readFileSync(path.join(dir, 'error.log'), 'utf8') : ''),
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000).unref())]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    },
  };
}

/**
 * Starts gateways g1 and g2 and nginx with the instances site in front of them, runs
 * fn({gws: {g1, g2}, via, ng}), and always stops everything; clean gateway exits are asserted
 * when fn passed (a gateway fn stopped itself has already exited: stop() checks its status).
 * With quietErrorLog, nginx's error log must also hold no alert, emerg or crit line after fn.
 * Optional, for both gateways alike: `gateway` (more [gateway] keys) and `servers` (startGateway's
 * servers); `site`: another site file for nginx (startNginx's site: a name in deploy/nginx or an
 * absolute path), default the shipped mcp-gateway-instances.conf.
 */
export async function withInstances(fn, { quietErrorLog = false, gateway = {}, servers, site = 'mcp-gateway-instances.conf' } = {}) {
  const gws = {};
  let ng;
  let ok = false;
  try {
    gws.g1 = await startGateway({ gateway: { ...gateway, instance_id: 'g1' }, ...(servers ? { servers } : {}) });
    gws.g2 = await startGateway({ gateway: { ...gateway, instance_id: 'g2' }, ...(servers ? { servers } : {}) });
    ng = await startNginx({ site, ports: { 8081: gws.g1.port, 8082: gws.g2.port } });
    // Something with a .url (and .logs for initSession) that sends requests through nginx.
    const via = { url: ng.url, base: `http://127.0.0.1:${ng.port}`, logs: () => gws.g1.logs() + gws.g2.logs() };
    await fn({ gws, via, ng });
    if (quietErrorLog) assert.ok(!/\[(alert|emerg|crit)\]/.test(ng.errorLog()), ng.errorLog());
    ok = true;
  } finally {
    if (!ok && ng) console.log(`nginx error log (tail):\n${ng.errorLog().slice(-4000)}`);
    if (ng) await ng.stop();
    for (const [name, gw] of Object.entries(gws)) {
      if (ok) await gw.stop();
      else {
        await gw.stop({ expect: null }).catch(() => {});
        console.log(`gateway ${name} log (tail):\n${gw.logs().slice(-3000)}`);
      }
    }
  }
}
