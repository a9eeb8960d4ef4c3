/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_STREAM_INT_H
#define MCPGW_STREAM_INT_H

/*
 * The stream's own state, private to stream.c (and its unit test): everyone else goes through
 * stream.h.
 */

#include "stream.h"

/*
 * One framed event: the bytes of m, then body_len bytes of body from body_off, then those of
 * tail. body (a large message the child wrote, shared with nobody else's copy) and tail are NULL
 * for an event framed into m alone.
 */
struct stream_event {
    struct stream_event *next;
    uint64_t seq; /* 0: a comment (heartbeat), not an event a client can name */
    size_t len;   /* framed bytes in all */
    struct msg *m;
    struct msg *body;
    size_t body_off, body_len;
    struct msg *tail;
};

struct stream {
    struct stream_owner own; /* first: stream_own() */
    uint64_t id;
    unsigned refs;
    bool is_get;  /* the standalone GET stream */
    bool ended;   /* nothing more will be pushed */
    bool dropped; /* the client went away for good: nothing more is kept */
    bool hangup;  /* end the current connection at the next event boundary (SSE polling) */
    /* head..cursor: events read (the replay history); cursor..tail: events not yet read */
    struct stream_event *head, *tail, *cursor;
    size_t cursor_off; /* bytes of the cursor event already read */
    size_t pending;    /* bytes not yet read */
    size_t history;    /* bytes of read events kept for replay */
    size_t replay_max; /* ceiling of history; 0: no event ids and no history */
    uint64_t next_seq;
    uint64_t last_push_ms;
    stream_wake_cb *wake;
    void *wake_arg;
    size_t low_water;      /* stream_read calls drain once pending falls to it */
    stream_wake_cb *drain; /* the owner's back-pressure */
    void *drain_arg;
};

#endif
