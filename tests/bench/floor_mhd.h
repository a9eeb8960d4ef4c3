/* SPDX-License-Identifier: MIT */
/*
 * What the benchmark's two floors (http_floor.c, H; relay_floor.c, R) share: libmicrohttpd 0.9.75
 * started as the gateway starts it, on a loopback listener, and the outer epoll that drives it.
 */
#ifndef MCPGW_BENCH_FLOOR_MHD_H
#define MCPGW_BENCH_FLOOR_MHD_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

/* The outer epoll's event data (u32): libmicrohttpd's own epoll fd, the stop signal. */
#define FLOOR_EV_MHD  0u
#define FLOOR_EV_STOP 1u

/*
 * libmicrohttpd with the gateway's flags and defaults (its epoll, suspension allowed, the
 * connection pool, timeout and limit) on 127.0.0.1:port (0: any), SIGPIPE ignored, and an epoll
 * fd that watches its epoll fd and SIGTERM and SIGINT (blocked, read as FLOOR_EV_STOP). Exits
 * with a message naming who if any of it fails.
 */
struct MHD_Daemon *floor_start(const char *who, int port, MHD_AccessHandlerCallback handler,
                               MHD_RequestCompletedCallback completed, int *ep);

/* A request's body, up to FLOOR_BODY_MAX - 1 bytes (an echo's), NUL-terminated once whole. */
#define FLOOR_BODY_MAX 4096
struct floor_body {
    size_t len;
    char text[FLOOR_BODY_MAX];
};

/*
 * In an access handler's call: takes what *upload_size says came (the rest of a longer body is
 * dropped) and returns true, or, on the call that says the body is whole, ends it with a NUL and
 * returns false.
 */
bool floor_body_add(struct floor_body *b, const char *upload, size_t *upload_size);

/* Queues resp (NULL: MHD_NO) with status and lets it go. */
enum MHD_Result floor_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp);

#endif
