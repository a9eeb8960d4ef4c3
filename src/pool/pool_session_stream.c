/* SPDX-License-Identifier: MIT */
/*
 * A pooled session's streams (session_mode = pooled; pool_int.h), resumable at the instance that
 * holds them with the rules and keys of a child-mode session's (session/session_stream.c): every
 * event of a call's POST stream and of the GET stream carries an id "<stream>-<seq>"
 * (replay_buffer_bytes of read events kept), a 2025-11-25 session's stream starts with a priming
 * event, GET with Last-Event-ID replays the one stream it names after that event (409 while
 * another connection reads it, 410 when nothing of it can be replayed), a client that drops a
 * stream whose call is unanswered gets disconnect_grace_ms to come back before the call is
 * cancelled at its child, and sse_close_after_ms ends a waiting POST's connection (SSE polling).
 *
 * The session keeps each such stream in its list (one reference) until it is read to its end, or
 * it is kept for a late resume longer than replay_max_age_s, or beyond the newest
 * max_inflight_per_session of those: so a session holds at most max_inflight_per_session streams
 * with a call and as many without, each at most replay_buffer_bytes read plus stream_queue_bytes
 * unread and one answer (pool_push_note drops notifications past that). The call owns its stream's
 * answer (stream_own(st)->owner is the call while it lasts, pool_route.c); this file owns the
 * list, the grace and the polling timers (stream_own(st)->timer).
 *
 * Stream numbers start at a random point per process: an id that names a stream of another
 * instance (sealed sessions travel, their streams do not) or of this one before a restart finds
 * no stream here and gets 410, never another stream's events.
 */
#include <inttypes.h>
#include <string.h>

#include "crypto.h"
#include "log.h"
#include "pool_int.h"

static uint64_t pss_next_stream; /* 0 until the first stream: then a random start */

uint64_t
pool_session_stream_id(void)
{
    if (pss_next_stream == 0) {
        uint64_t r = 0;
        if (crypto_random(&r, sizeof r) == -1)
            r = util_now_unix_ms() * 1000003u;
        /* Below 2^52 (and above 2^32), so that the id stays a number every client keeps exact. */
        pss_next_stream = (UINT64_C(1) << 32) + (r >> 12) % (UINT64_C(1) << 51);
    }
    return pss_next_stream++;
}

size_t
pool_session_replay_bytes(void)
{
    const struct revision *r = revision_newest(REVISION_STREAMABLE);
    return r != NULL && r->resumable ? pools.cfg->replay_buffer_bytes : 0;
}

/* Whether the session's revision has priming events and SSE polling (revision.h). */
static bool
pss_polls(const struct pool_session *s)
{
    return s->rev != NULL && s->rev->polling;
}

void
pool_session_stream_prime(struct pool_call *call)
{
    if (pss_polls(call->sess))
        stream_push_priming(call->st, pools.cfg->sse_retry_ms);
}

static void
pss_timer_stop(struct stream *st)
{
    loop_timer_del(stream_own(st)->timer);
    stream_own(st)->timer = NULL;
}

static bool
pss_kept(const struct pool_session *s, const struct stream *st)
{
    return stream_own_const(st)->prev != NULL || s->streams == st;
}

static struct stream *
pss_by_id(const struct pool_session *s, uint64_t id)
{
    for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
        if (stream_id(st) == id)
            return st;
    return NULL;
}

static void
pss_add(struct pool_session *s, struct stream *st)
{
    stream_own(st)->prev = NULL;
    stream_own(st)->next = s->streams;
    if (s->streams != NULL)
        stream_own(s->streams)->prev = st;
    s->streams = st;
    stream_ref(st);
}

/* Takes st out of the session's list and drops the list's reference. */
static void
pss_remove(struct pool_session *s, struct stream *st)
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
    pss_timer_stop(st);
    stream_unref(st);
}

/*
 * Forgets streams kept only for a late resume: nobody reads them, no call waits on them, and their
 * last event is older than replay_max_age_s, or they are beyond the newest
 * max_inflight_per_session such streams of the session.
 */
static void
pss_retire(struct pool_session *s, uint64_t now_ms)
{
    uint64_t age = pools.cfg->replay_max_age_s * 1000u, kept = 0;
    struct stream *st = s->streams; /* newest first */
    while (st != NULL) {
        struct stream *next = stream_own(st)->next;
        if (!stream_own(st)->attached && stream_own(st)->owner == NULL
            && (now_ms - stream_last_push_ms(st) >= age
                || ++kept > pools.cfg->max_inflight_per_session)) {
            log_debug(s->label, "%s stream %" PRIu64 " no longer kept for a resume",
                      stream_is_get(st) ? "GET" : "POST", stream_id(st));
            stream_end(st);
            pss_remove(s, st);
        }
        st = next;
    }
}

/* SSE polling (2025-11-25): the connection of a POST stream still waiting ends after a while. */
static void
pss_hangup_fired(void *arg)
{
    struct stream *st = arg;
    stream_own(st)->timer = NULL;
    if (stream_own(st)->attached && !stream_finished(st))
        stream_hang_up(st);
}

/* A connection reads st from now on. fresh: the POST's own, which SSE polling may end once. */
static void
pss_attach(struct pool_session *s, struct stream *st, bool fresh)
{
    pss_timer_stop(st);
    stream_own(st)->attached = true;
    (void)stream_hangup_clear(st);
    if (fresh && !stream_is_get(st) && pools.cfg->sse_close_after_ms > 0 && pss_polls(s))
        stream_own(st)->timer =
            loop_timer_add(pools.l, pools.cfg->sse_close_after_ms, pss_hangup_fired, st);
    s->last_ms = util_now_ms();
}

void
pool_session_stream_track(struct pool_session *s, struct stream *st)
{
    const struct pool_call *call = stream_own(st)->owner;
    if (call == NULL || call->sess != s || pss_kept(s, st))
        return; /* answered already (by the gateway, say): nothing to resume or to wait for */
    pss_add(s, st);
    pss_attach(s, st, true);
    pss_retire(s, util_now_ms());
}

struct stream *
pool_session_stream_get(struct pool_session *s, enum pool_status *status)
{
    if (s->get != NULL) {
        if (stream_own(s->get)->attached) {
            *status = POOL_E_CONFLICT;
            return NULL;
        }
        /* The stream a dropped GET left goes on from where its reader stopped. */
        pss_attach(s, s->get, false);
        *status = POOL_OK;
        return stream_ref(s->get);
    }
    struct stream *st = stream_new(pool_session_stream_id(), true, pool_session_replay_bytes());
    pss_add(s, st);
    stream_unref(st); /* the list's reference is the session's */
    s->get = st;
    if (pss_polls(s))
        stream_push_priming(st, pools.cfg->sse_retry_ms);
    pss_attach(s, st, true);
    pss_retire(s, util_now_ms());
    *status = POOL_OK;
    return stream_ref(st);
}

struct stream *
pool_session_resume(struct pool_session *s, const char *last_event_id, enum pool_status *status)
{
    s->last_ms = util_now_ms();
    uint64_t id, seq;
    struct stream *st = NULL;
    if (stream_parse_event_id(last_event_id, &id, &seq))
        st = pss_by_id(s, id);
    if (st != NULL && stream_own(st)->attached) {
        *status = POOL_E_CONFLICT;
        return NULL;
    }
    if (st == NULL || stream_dropped(st) || !stream_resume(st, seq) || stream_finished(st)) {
        log_info(s->label, "resume from Last-Event-ID %s refused: not replayable here",
                 last_event_id);
        *status = POOL_E_GONE;
        return NULL;
    }
    log_info(s->label,
             "%s stream %" PRIu64 " resumed after event %" PRIu64 " (%zu bytes to replay)",
             stream_is_get(st) ? "GET" : "POST", stream_id(st), seq, stream_pending(st));
    pss_attach(s, st, false);
    *status = POOL_OK;
    return stream_ref(st);
}

/* The client left st for good: its call is cancelled at its child (or leaves the queue). */
static void
pss_abandon(struct pool_session *s, struct stream *st, const char *why)
{
    log_info(s->label, "%s POST stream %" PRIu64 ": its request cancelled", why, stream_id(st));
    pool_stream_detach(stream_ref(st)); /* the drop: marked, discarded, the call cancelled */
    pss_remove(s, st);
}

static void
pss_grace_fired(void *arg)
{
    struct stream *st = arg;
    stream_own(st)->timer = NULL;
    struct pool_call *call = stream_own(st)->owner;
    if (stream_own(st)->attached || call == NULL || call->sess == NULL)
        return; /* resumed, or answered meanwhile: kept for a resume until replay_max_age_s */
    pss_abandon(call->sess, st, "no resume in time of");
}

bool
pool_session_stream_detach(struct pool_session *s, struct stream *st)
{
    if (!pss_kept(s, st))
        return false;
    bool hangup = stream_hangup_clear(st);
    stream_own(st)->attached = false;
    pss_timer_stop(st);
    s->last_ms = util_now_ms();
    bool waited = stream_own(st)->owner != NULL; /* a call waits for its answer on it */
    bool done = !stream_is_get(st) && stream_finished(st);
    if (done || (stream_replay_max(st) == 0 && !waited)) {
        stream_mark_dropped(st);
        stream_discard(st);
        pss_remove(s, st);
    } else if (waited) {
        /*
         * A polling hangup expects the client back after sse_retry_ms; a drop is given
         * disconnect_grace_ms; without either the call is cancelled now.
         */
        uint64_t wait = pools.cfg->disconnect_grace_ms;
        if (hangup)
            wait += 3 * pools.cfg->sse_retry_ms + 1000;
        if (wait == 0) {
            pss_abandon(s, st, "client dropped");
        } else {
            stream_own(st)->timer = loop_timer_add(pools.l, wait, pss_grace_fired, st);
            log_info(
                s->label,
                "%s POST stream %" PRIu64 ": its request waits up to %" PRIu64 " ms for a resume",
                hangup ? "gateway ended the connection of" : "client dropped", stream_id(st), wait);
        }
    } else {
        log_info(s->label,
                 "client dropped %s stream %" PRIu64 " (%zu bytes unread kept for a resume)",
                 stream_is_get(st) ? "GET" : "POST", stream_id(st), stream_pending(st));
    }
    pss_retire(s, util_now_ms());
    stream_unref(st); /* the HTTP request's */
    return true;
}

bool
pool_session_streams_read(const struct pool_session *s)
{
    for (const struct stream *st = s->streams; st != NULL; st = stream_own_const(st)->next)
        if (stream_own_const(st)->attached)
            return true;
    return false;
}

void
pool_session_streams_sweep(struct pool_session *s, uint64_t now_ms)
{
    uint64_t hb = pools.cfg->heartbeat_s * 1000u;
    if (s->get != NULL && stream_own(s->get)->attached
        && now_ms - stream_last_push_ms(s->get) >= hb)
        stream_push_heartbeat(s->get);
    pss_retire(s, now_ms);
}

void
pool_session_streams_free(struct pool_session *s)
{
    while (s->streams != NULL) {
        struct stream *st = s->streams;
        stream_end(st);
        pss_remove(s, st);
    }
}
