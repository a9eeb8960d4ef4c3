/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_HTTP_H
#define MCPGW_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "loop.h"
#include "util.h"

/*
 * The HTTP front: libmicrohttpd in external epoll mode inside our loop, the Streamable HTTP
 * endpoint(s) (POST/GET/DELETE), header rules, SSE bodies with suspend/resume, and the EPOLLRDHUP
 * watch on every client socket that has a stream (MHD never notices a suspended client leaving).
 */

/* Binds the listener and starts the daemon. -1 with a logged reason. */
int http_start(struct loop *l, const struct config *cfg, struct auth *auth) MUSTCHECK;
/* Loop hooks: the longest the loop may wait for MHD, and running MHD when it has work (again
 * within the turn while it has more at once). */
int http_prepare(void);
void http_run(void);
/* Stops accepting new connections (shutdown). */
void http_quiesce(void);
/*
 * SIGHUP: false when cfg cannot run on the socket already bound ([auth] mode none on a
 * non-loopback address): the reload must be refused.
 */
bool http_config_fits(const struct config *cfg);
/* SIGHUP: requests from now on see cfg and auth (listen and MHD options stay as started). */
void http_set_config(const struct config *cfg, struct auth *auth);
/* Closes connections whose request headers or body are overdue (the janitor tick). */
void http_sweep(uint64_t now_ms);
/* No request is in progress. */
bool http_idle(void);
/*
 * What /readyz would say now, for systemd (main.c): true when it would answer 200; status gets
 * "N of M servers serve" or why not; *settled is false while a server that serves nothing yet
 * still waits for the outcome of its first child's start.
 */
bool http_readiness(char *status, size_t len, bool *settled);
void http_stop(void);

#endif
