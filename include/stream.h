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
 * Refcounted: its owner (a session, or a stateless call) holds one reference while the stream
 * belongs to it, the HTTP connection one while attached. The stream's state is its own
 * (src/mcp/stream_int.h); what the owner keeps on it is struct stream_owner, which the stream
 * module never reads.
 */

typedef void stream_wake_cb(void *arg);

struct loop_timer;
struct stream;

/* What the owner of a stream keeps on it; the stream module neither reads nor writes it. */
struct stream_owner {
    void *owner;                /* the session, or the pool call */
    struct stream *prev, *next; /* the owning session's list */
    struct loop_timer *timer;   /* a session's: resume grace while detached, hangup while read */
    unsigned awaiting;          /* client requests bound here still waiting for their answer */
    int answer_code; /* 2026-07-28: the error code of the answer that ended it; 0: none */
    bool attached;   /* an HTTP connection is reading it */
};

/* The owner's part of st: the first member of the stream (stream.c checks it). */
static inline struct stream_owner *
stream_own(struct stream *st)
{
    return (struct stream_owner *)(void *)st;
}
static inline const struct stream_owner *
stream_own_const(const struct stream *st)
{
    return (const struct stream_owner *)(const void *)st;
}

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

uint64_t stream_id(const struct stream *st);
bool stream_is_get(const struct stream *st);           /* the standalone GET stream of a session */
size_t stream_pending(const struct stream *st);        /* bytes not yet read */
size_t stream_history(const struct stream *st);        /* bytes of read events kept for replay */
size_t stream_replay_max(const struct stream *st);     /* 0: no event ids and no history */
uint64_t stream_last_push_ms(const struct stream *st); /* when an event was last queued */
bool stream_ended(const struct stream *st);            /* nothing more will be pushed */
/* The client went away for good: nothing more is kept (stream_discard forgets what there is). */
void stream_mark_dropped(struct stream *st);
bool stream_dropped(const struct stream *st);
/* Exactly one whole event is queued and nothing of it read (an answer that can go as one body). */
bool stream_one_event(const struct stream *st);
/*
 * SSE polling: end the current connection at the next event boundary (the reader is woken);
 * stream_hangup_clear takes the request back and says whether there was one.
 */
void stream_hang_up(struct stream *st);
bool stream_hangup_clear(struct stream *st);
/*
 * Back-pressure: stream_read calls cb(arg) once the unread bytes fall to low_water; cb NULL:
 * nothing is called.
 */
void stream_set_drain(struct stream *st, stream_wake_cb *cb, void *arg, size_t low_water);
/* Whether the unread bytes are above the drain's low water mark. */
bool stream_over_low_water(const struct stream *st);

/* Formats "<stream>-<seq>" into out (at least 42 bytes); returns its length. */
int stream_event_id(uint64_t stream_id, uint64_t seq, char *out, size_t size);
/* Parses a Last-Event-ID of that form. */
bool stream_parse_event_id(const char *s, uint64_t *stream_id, uint64_t *seq);

#endif
