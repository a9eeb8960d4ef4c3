/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_STREAM_H
#define MCPGW_STREAM_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/*
 * One response channel toward a client: the SSE body of a POST, or the session's standalone GET
 * stream. A FIFO of framed SSE events plus an end mark. No MHD here: http.c installs a wake
 * callback while a connection drains the stream, and reads with stream_read.
 * Refcounted: the session holds one reference while the stream belongs to it, the HTTP connection
 * one while attached.
 */

typedef void stream_wake_cb(void *arg);

struct stream {
    uint64_t id;
    unsigned refs;
    bool is_get;       /* the standalone GET stream */
    bool ended;        /* nothing more will be pushed */
    bool dropped;      /* the client went away */
    unsigned awaiting; /* client requests bound here still waiting for their answer */
    struct msgq q;
    uint64_t last_push_ms;
    stream_wake_cb *wake;
    void *wake_arg;
    size_t low_water;      /* stream_read calls drain once the queue falls to it */
    stream_wake_cb *drain; /* installed by the session for back-pressure */
    void *drain_arg;
    struct stream *prev, *next; /* the owning session's list */
};

struct stream *stream_new(uint64_t id, bool is_get);
struct stream *stream_ref(struct stream *st);
void stream_unref(struct stream *st);

/* Frames the concatenated iovecs as one SSE "message" event and queues it. */
void stream_push_message(struct stream *st, const struct iovec *iov, int n);
/* Queues an SSE comment (heartbeat) if nothing else is queued. */
void stream_push_heartbeat(struct stream *st);
/* No more events; the reader sees the end once the queue is drained. */
void stream_end(struct stream *st);
/* Copies up to max framed bytes; returns the count (0: empty for now, or ended). */
size_t stream_read(struct stream *st, char *out, size_t max);
bool stream_finished(const struct stream *st); /* ended and drained */
void stream_set_wake(struct stream *st, stream_wake_cb *cb, void *arg);

#endif
