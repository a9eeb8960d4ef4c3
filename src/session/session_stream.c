/* SPDX-License-Identifier: MIT */
/*
 * A session's HTTP streams: opening (POST, GET, the 2024-11-05 stream), resuming with
 * Last-Event-ID, back-pressure toward the child, SSE polling hang-ups, retiring streams kept for a
 * late resume, and what a client that leaves a stream means for the requests bound to it (cancel
 * at once, or after disconnect_grace_ms). Streams know nothing of MHD: http.c reads them.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "revision.h"
#include "session_int.h"
#include "upstream.h"

struct stream *
session_stream_by_id(const struct session *s, uint64_t id)
{
    for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
        if (stream_id(st) == id)
            return st;
    return NULL;
}

/* The replay history of a stream over transport: what replay_buffer_bytes says if it resumes. */
static size_t
session_replay_bytes(unsigned transport)
{
    const struct revision *r = revision_newest(transport);
    return r != NULL && r->resumable ? sessions.cfg->replay_buffer_bytes : 0;
}

/* Whether the session's revision has priming events and SSE polling (revision.h). */
static bool
session_polls(const struct session *s)
{
    return s->rev != NULL && s->rev->polling;
}

void
session_maybe_resume(struct session *s)
{
    if (!s->paused || s->u == NULL)
        return;
    for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
        if (stream_own(st)->attached && !stream_ended(st) && stream_over_low_water(st))
            return; /* an ended stream cannot grow: it holds nothing back */
    s->paused = false;
    upstream_pause(s->u, false);
}

static void
session_stream_drained(void *arg)
{
    session_maybe_resume(arg);
}

/*
 * Back-pressure (src/README.md, section 5): a stream being read that passes its high watermark
 * stops the child's stdout. A stream nobody reads cannot drain: it keeps only its newest
 * stream_queue_bytes (a resume from before what was dropped gets 410) rather than stall the
 * session's other streams.
 */
static void
session_pressure(struct session *s, struct stream *st)
{
    if (!stream_own(st)->attached) {
        stream_trim(st, sessions.cfg->stream_queue_bytes);
        return;
    }
    if (!s->paused && s->u != NULL && stream_pending(st) > sessions.cfg->stream_queue_bytes) {
        /*
         * Resumed at half the ceiling that paused it: st's drain was set when it opened, and a
         * reload since may have lowered stream_queue_bytes under twice that (the drain would
         * then never come, and the child stay paused for good).
         */
        stream_set_drain(st, session_stream_drained, s, sessions.cfg->stream_queue_bytes / 2);
        s->paused = true;
        upstream_pause(s->u, true);
    }
}

void
session_stream_timer_stop(struct stream *st)
{
    loop_timer_del(stream_own(st)->timer);
    stream_own(st)->timer = NULL;
}

/* Takes the stream out of the session and drops the session's reference. */
void
session_stream_remove(struct session *s, struct stream *st)
{
    if (stream_own(st)->prev != NULL)
        stream_own(stream_own(st)->prev)->next = stream_own(st)->next;
    else if (s->streams == st)
        s->streams = stream_own(st)->next;
    if (stream_own(st)->next != NULL)
        stream_own(stream_own(st)->next)->prev = stream_own(st)->prev;
    stream_own(st)->prev = stream_own(st)->next = NULL;
    if (s->get == st)
        s->get = NULL;
    stream_set_drain(st, NULL, NULL, 0);
    session_stream_timer_stop(st);
    stream_unref(st);
    session_maybe_resume(s);
}

/*
 * st leaves for good while the client has not read all of it: the child's requests that went out
 * on it may never have been seen, and nobody can read them now. Each is answered with an error
 * (as for an abandoned stream) rather than left waiting for ever in the table. A stream read to
 * its end lets go of nothing: its questions were delivered and may still be answered by POST.
 */
static void
session_stream_unread(struct session *s, struct stream *st)
{
    if (stream_pending(st) == 0 || s->state == SESSION_CLOSED)
        return;
    for (struct pending *p = s->r.pt.head, *next; p != NULL; p = next) {
        next = p->next;
        if (p->dir != PENDING_TO_CLIENT || p->stream_id != stream_id(st)
            || p->state != PENDING_FORWARDED)
            continue;
        session_error_to_child(s, p->orig_id, p->orig_id_len,
                               "client disconnected before reading this request");
        pending_del(&s->r.pt, p);
    }
}

/*
 * Forgets streams kept only for a late resume: nobody reads them, nothing is waited for on them,
 * and their last event is older than replay_max_age_s, or they are beyond the newest
 * max_inflight_per_session such streams of the session.
 */
void
session_retire(struct session *s, uint64_t now_ms)
{
    uint64_t age = sessions.cfg->replay_max_age_s * 1000u, kept = 0;
    struct stream *st = s->streams; /* newest first */
    while (st != NULL) {
        struct stream *next = stream_own(st)->next;
        if (!stream_own(st)->attached && stream_own(st)->awaiting == 0) {
            if (now_ms - stream_last_push_ms(st) >= age
                || ++kept > sessions.cfg->max_inflight_per_session) {
                session_stream_unread(s, st);
                session_stream_remove(s, st);
            }
        }
        st = next;
    }
}

void
session_push(struct session *s, struct stream *st, const struct iovec *iov, int n)
{
    stream_push_shared(st, iov, n, sessions.line);
    session_pressure(s, st);
}

/* SSE polling (2025-11-25): the connection of a POST stream still waiting ends after a while. */
static void
session_hangup_fired(void *arg)
{
    struct stream *st = arg;
    stream_own(st)->timer = NULL;
    if (!stream_own(st)->attached || stream_finished(st))
        return;
    stream_hang_up(st);
}

/*
 * The HTTP side reads st from now on. fresh: the POST's own connection, which SSE polling may end
 * once; a connection that resumed the stream keeps it to the end.
 */
static void
session_stream_attach(struct session *s, struct stream *st, bool fresh)
{
    session_stream_timer_stop(st);
    stream_own(st)->attached = true;
    (void)stream_hangup_clear(st);
    if (fresh && !stream_is_get(st) && sessions.cfg->sse_close_after_ms > 0 && session_polls(s))
        stream_own(st)->timer =
            loop_timer_add(sessions.l, sessions.cfg->sse_close_after_ms, session_hangup_fired, st);
    session_touch(s);
}

struct stream *
session_stream_open(struct session *s, bool is_get, enum session_status *status)
{
    if (s->state == SESSION_CLOSED) {
        *status = SESSION_E_GONE;
        return NULL;
    }
    if (is_get && s->get != NULL) {
        if (stream_own(s->get)->attached) {
            *status = SESSION_E_CONFLICT;
            return NULL;
        }
        /* The stream a dropped GET left goes on from where its reader stopped. */
        session_stream_attach(s, s->get, false);
        *status = SESSION_OK;
        return stream_ref(s->get);
    }
    struct stream *st =
        stream_new(sessions.next_stream_id++, is_get, session_replay_bytes(REVISION_STREAMABLE));
    stream_set_drain(st, session_stream_drained, s, sessions.cfg->stream_queue_bytes / 2);
    stream_own(st)->owner = s;
    stream_own(st)->next = s->streams;
    if (s->streams != NULL)
        stream_own(s->streams)->prev = st;
    s->streams = st;
    if (session_polls(s))
        stream_push_priming(st, sessions.cfg->sse_retry_ms);
    if (is_get) {
        s->get = st;
        /* Notifications that found no stream are delivered first, in order. */
        while (s->backlog.head != NULL) {
            struct msg *m = s->backlog.head->m;
            struct iovec iov = { m->data, m->len };
            stream_push_message(st, &iov, 1);
            msgq_advance(&s->backlog, m->len);
        }
    }
    session_stream_attach(s, st, true);
    session_retire(s, util_now_ms());
    *status = SESSION_OK;
    return stream_ref(st);
}

struct stream *
session_legacy_open(struct session *s, const char *endpoint)
{
    struct stream *st =
        stream_new(sessions.next_stream_id++, true, session_replay_bytes(REVISION_HTTP_SSE));
    stream_set_drain(st, session_stream_drained, s, sessions.cfg->stream_queue_bytes / 2);
    stream_own(st)->owner = s;
    s->streams = st;
    s->get = st;
    s->legacy = true;
    stream_push_event(st, "endpoint", endpoint);
    session_stream_attach(s, st, false);
    return stream_ref(st);
}

struct stream *
session_stream_resume(struct session *s, const char *last_event_id, enum session_status *status)
{
    uint64_t sid, seq;
    struct stream *st = NULL;
    if (s->state == SESSION_CLOSED) {
        *status = SESSION_E_GONE;
        return NULL;
    }
    if (stream_parse_event_id(last_event_id, &sid, &seq))
        st = session_stream_by_id(s, sid);
    if (st != NULL && stream_own(st)->attached) {
        *status = SESSION_E_CONFLICT;
        return NULL;
    }
    if (st == NULL || stream_dropped(st) || !stream_resume(st, seq) || stream_finished(st)) {
        log_info(s->id, "resume from Last-Event-ID %s refused: not replayable", last_event_id);
        *status = SESSION_E_EVICTED;
        return NULL;
    }
    log_info(s->id, "%s stream %" PRIu64 " resumed after event %" PRIu64 " (%zu bytes to replay)",
             stream_is_get(st) ? "GET" : "POST", stream_id(st), seq, stream_pending(st));
    session_stream_attach(s, st, false);
    *status = SESSION_OK;
    return stream_ref(st);
}

/* A client request bound to st got its answer, or was cancelled. */
void
session_stream_answered(struct session *s, struct stream *st)
{
    if (st == NULL || stream_own(st)->awaiting == 0)
        return;
    if (--stream_own(st)->awaiting == 0 && !stream_is_get(st)) {
        stream_end(st);
        session_stream_timer_stop(st); /* no hangup, no resume grace: nothing is waited for */
        session_maybe_resume(s);
        /* Kept for a late resume (the client may not have read it all) unless not replayable. */
        if (stream_replay_max(st) == 0) {
            if (!stream_own(st)->attached) /* nobody reads it now: a reload's grace held it */
                session_stream_unread(s, st);
            session_stream_remove(s, st);
        }
    }
}

/* The stream being read where a message unrelated to any known request goes; NULL if none. */
struct stream *
session_route_unrelated(const struct session *s)
{
    if (s->get != NULL && stream_own(s->get)->attached)
        return s->get;
    /* streams is newest-first */
    for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
        if (!stream_is_get(st) && stream_own(st)->attached && !stream_ended(st)
            && !stream_dropped(st))
            return st;
    return NULL;
}

/* Cancels at the child what is still in flight on st, which the client left for good. */
void
session_stream_abandon(struct session *s, struct stream *st, const char *why)
{
    unsigned n = 0;
    for (struct pending *p = s->r.pt.head, *next; p != NULL; p = next) {
        next = p->next;
        if (p->stream_id != stream_id(st) || p->state != PENDING_FORWARDED)
            continue;
        if (p->dir == PENDING_TO_CLIENT) {
            /* The child's own request went out on st: nobody can answer it now. (A question of
             * an input round is the gateway's: a stateless child takes no answer.) */
            if (!session_modern_active(s))
                session_error_to_child(s, p->orig_id, p->orig_id_len,
                                       "client disconnected before answering");
            pending_del(&s->r.pt, p);
            continue;
        }
        if (p->gw_id == s->init_gw_id || p->task)
            continue;
        relay_cancel(&s->r, p, RELAY_CANCEL_DISCONNECT);
        n++;
    }
    log_info(s->id, "%s POST stream %" PRIu64 ": %u requests cancelled", why, stream_id(st), n);
    stream_mark_dropped(st);
    stream_discard(st);
    session_stream_remove(s, st);
}

static void
session_grace_fired(void *arg)
{
    struct stream *st = arg;
    stream_own(st)->timer = NULL;
    if (!stream_own(st)->attached)
        session_stream_abandon(stream_own(st)->owner, st, "no resume in time of");
}

void
session_stream_detach(const char *sid, struct stream *st)
{
    struct session *s = session_find(sid);
    if (s == NULL || (stream_own(st)->prev == NULL && s->streams != st)) {
        if (s != NULL) /* the session let go of st once nothing was awaited on it */
            session_stream_unread(s, st);
        stream_unref(st); /* the session, or its hold on st, is gone */
        return;
    }
    if (s->legacy) {
        /* HTTP+SSE: the stream's connection is the session. */
        stream_own(st)->attached = false;
        session_close(s, SESSION_END_DISCONNECTED, NULL);
        stream_unref(st);
        return;
    }
    bool hangup = stream_hangup_clear(st);
    stream_own(st)->attached = false;
    session_stream_timer_stop(st);
    session_touch(s);
    bool unused = !stream_is_get(st) && stream_own(st)->awaiting == 0
                  && !stream_ended(st); /* its request never went */
    bool waited = !stream_is_get(st) && stream_own(st)->awaiting > 0;
    /* A POST stream read to its end is done: only what a client missed is kept for a resume. */
    bool done = !stream_is_get(st) && stream_finished(st);
    if (unused || done || (stream_replay_max(st) == 0 && !waited)) {
        if (!unused && !stream_finished(st))
            log_info(s->id, "client dropped %s stream %" PRIu64 ": 0 requests cancelled",
                     stream_is_get(st) ? "GET" : "POST", stream_id(st));
        session_stream_unread(s, st);
        stream_mark_dropped(st);
        stream_discard(st);
        session_stream_remove(s, st);
        stream_unref(st);
        return;
    }
    if (waited) {
        /*
         * Requests wait on st. A polling hangup expects the client back after sse_retry_ms; a
         * drop is given disconnect_grace_ms; without either the requests are cancelled now.
         */
        uint64_t wait = sessions.cfg->disconnect_grace_ms;
        if (hangup)
            wait += 3 * sessions.cfg->sse_retry_ms + 1000;
        if (wait == 0) {
            session_stream_abandon(s, st, "client dropped");
        } else {
            stream_own(st)->timer = loop_timer_add(sessions.l, wait, session_grace_fired, st);
            log_info(s->id,
                     "%s POST stream %" PRIu64 ": %u requests wait up to %" PRIu64
                     " ms for a resume",
                     hangup ? "gateway ended the connection of" : "client dropped", stream_id(st),
                     stream_own(st)->awaiting, wait);
        }
    } else if (!stream_finished(st)) {
        /* Kept: a client may resume it with Last-Event-ID. */
        log_info(s->id,
                 "client dropped %s stream %" PRIu64 ": 0 requests cancelled (%zu bytes unread "
                 "kept for a resume)",
                 stream_is_get(st) ? "GET" : "POST", stream_id(st), stream_pending(st));
    }
    session_maybe_resume(s);
    session_retire(s, util_now_ms());
    stream_unref(st);
}
