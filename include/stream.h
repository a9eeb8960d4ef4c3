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
 * stream. A list of framed SSE events plus an end mark. No MHD here: http.c installs a wake
 * callback while a connection drains the stream, and reads with stream_read.
 *
 * Resumability: when replay_max > 0 every message event carries an id
 * "<stream id>-<seq>" (seq counts from 1 per stream; stream ids are unique in the process, so ids
 * are unique across the session and name their stream). Events already read stay in the list as
 * the replay history, at most replay_max bytes, oldest evicted first, so a client that reconnects
 * with Last-Event-ID gets every event after it (stream_resume). Eviction is only ever from the
 * head: the retained events are always contiguous.
 *
 * Refcounted: the session holds one reference while the stream belongs to it, the HTTP connection
 * one while attached.
 */

typedef void stream_wake_cb(void *arg);

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

struct loop_timer;

struct stream {
    uint64_t id;
    unsigned refs;
    bool is_get;       /* the standalone GET stream */
    bool ended;        /* nothing more will be pushed */
    bool dropped;      /* the client went away for good: nothing more is kept */
    bool attached;     /* an HTTP connection is reading it */
    bool hangup;       /* end the current connection at the next event boundary (SSE polling) */
    unsigned awaiting; /* client requests bound here still waiting for their answer */
    int answer_code;   /* 2026-07-28: the error code of the answer that ended it; 0: none */
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
    stream_wake_cb *drain; /* installed by the session for back-pressure */
    void *drain_arg;
    struct loop_timer *timer;   /* the session's: resume grace while detached, hangup while read */
    void *owner;                /* the session's */
    struct stream *prev, *next; /* the owning session's list */
};

struct stream *stream_new(uint64_t id, bool is_get, size_t replay_max);
struct stream *stream_ref(struct stream *st);
void stream_unref(struct stream *st);

/* Frames the concatenated iovecs as one SSE "message" event (with an id when replayable). */
void stream_push_message(struct stream *st, const struct iovec *iov, int n);
/*
 * The same, where iovecs may point into shared's bytes: the longest such piece, when it is at
 * least STREAM_SHARE_BYTES, is referenced rather than copied (a large answer is never held
 * twice). shared may be NULL.
 */
#define STREAM_SHARE_BYTES 16384
void stream_push_shared(struct stream *st, const struct iovec *iov, int n, struct msg *shared);
/*
 * The 2025-11-25 priming event: an id and empty data, so the client holds a Last-Event-ID before
 * any message; with "retry: <retry_ms>" when retry_ms > 0. Nothing when the stream is not
 * replayable.
 */
void stream_push_priming(struct stream *st, uint64_t retry_ms);
/* Queues one SSE event of the given type with data (one line, no CR or LF), without an id. */
void stream_push_event(struct stream *st, const char *type, const char *data);
/* Queues an SSE comment (heartbeat) if nothing else is waiting to be read. */
void stream_push_heartbeat(struct stream *st);
/* No more events; the reader sees the end once everything is read. */
void stream_end(struct stream *st);
/* Forgets every event (the stream is dead). */
void stream_discard(struct stream *st);
/*
 * Copies up to max framed bytes; returns the count (0: nothing to read for now, ended, or a
 * hangup reached an event boundary).
 */
size_t stream_read(struct stream *st, char *out, size_t max);
/*
 * Hands over everything unread, from an event boundary, as at most max iovecs, each with a
 * reference on the message that holds its bytes (refs[i], dropped by the caller once the bytes
 * are sent), and marks it read. Returns the count, or -1 (nothing taken) when it needs more than
 * max or a read is partway through an event.
 */
int stream_take(struct stream *st, struct iovec *iov, struct msg **refs, int max);
bool stream_finished(const struct stream *st); /* ended and everything read */
/* A hangup was asked and the reader is at an event boundary: end this connection now. */
bool stream_hung_up(const struct stream *st);
void stream_set_wake(struct stream *st, stream_wake_cb *cb, void *arg);

/*
 * Rewinds the reader to the event after seq (the client's Last-Event-ID). false when that point
 * is no longer held (evicted) or was never reached; the stream is then unchanged.
 */
bool stream_resume(struct stream *st, uint64_t seq);
/* Drops events from the head until at most max bytes are unread (a reader that is away). */
void stream_trim(struct stream *st, size_t max);

/* Formats "<stream>-<seq>" into out (at least 42 bytes); returns its length. */
int stream_event_id(uint64_t stream_id, uint64_t seq, char *out, size_t size);
/* Parses a Last-Event-ID of that form. */
bool stream_parse_event_id(const char *s, uint64_t *stream_id, uint64_t *seq);

#endif
