// SPDX-License-Identifier: MIT
// Preloaded into supergateway by run.mjs (node --require): supergateway calls app.listen(port)
// and so binds every interface; this makes any listen() on a bare port bind 127.0.0.1 only, and
// prints the bound port on stderr ("bench-listen PORT") so `--port 0` can be used.
'use strict';
const net = require('node:net');

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function patchedListen(...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const cb = args.find((a) => typeof a === 'function');
    args = [{ port, host: '127.0.0.1' }];
    if (cb) args.push(cb);
  } else if (args[0] && typeof args[0] === 'object' && !args[0].path) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write(`bench-listen ${a.port}\n`);
  });
  return listen.apply(this, args);
};
