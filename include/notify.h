/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_NOTIFY_H
#define MCPGW_NOTIFY_H

#include <stdbool.h>

/*
 * Telling systemd (Type=notify) what the gateway is doing: sd_notify(3)'s datagram protocol to
 * $NOTIFY_SOCKET. notify_init reads and unsets the variable (children never see it); without it,
 * each call does nothing. -1 (logged) when it names no usable socket.
 */
int notify_init(void);
/* Whether systemd listens (a usable $NOTIFY_SOCKET was given). */
bool notify_enabled(void);
/* One datagram: state is "KEY=VALUE" lines ("READY=1", "STOPPING=1\nSTATUS=..."). */
void notify_send(const char *state);
/* prefix ("READY=1\n", or "") then STATUS=status, in one datagram. */
void notify_status(const char *prefix, const char *status);
/* RELOADING=1 with MONOTONIC_USEC= (now), and STATUS=status: READY=1 must follow. */
void notify_reloading(const char *status);
void notify_module_free(void);

#endif
