/* SPDX-License-Identifier: MIT */
/*
 * Sessions and routing. One child per session. Client request ids are replaced by ids the gateway
 * mints (restored byte-for-byte on the way back); child request ids likewise toward the client
 * (DESIGN.md section 4). Where the child's messages go:
 *   - a response: the stream of the POST that carried the request;
 *   - notifications/progress: the stream of the request that set the progressToken;
 *   - notifications/cancelled for a child request: the stream that carried that request;
 *   - any other request or notification: the GET stream when one is open, else the stream of the
 *     newest client request still waiting, else (notifications only) a bounded backlog that the
 *     next GET stream receives first. A child request with no stream at all is answered with an
 *     error at once rather than left hanging.
 * Never broadcast: each message goes on exactly one stream.
 */
#include "session.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "upstream.h"

#define SESSION_BACKLOG_MAX      256
#define SESSION_CANCEL_LINGER_MS 60000

static const char *const session_versions[] = { "2025-03-26", "2025-06-18", "2025-11-25" };

/* Reason strings sent to children, indexed by enum session_cancel_reason. */
static const char *const session_reasons[SESSION_CANCEL_N] = {
    "client",          "client disconnected", "request timed out",
    "session deleted", "session expired",     "gateway shutting down",
    "other",
};

const char *
session_cancel_reason_name(enum session_cancel_reason r)
{
    return (unsigned)r < SESSION_CANCEL_N ? session_reasons[r] : "other";
}

/* Method classes of the requests counter: the part of the method before '/'; "other" last. */
static const char *const session_classes[] = {
    "initialize", "ping",  "tools",    "resources",   "prompts", "completion",
    "logging",    "tasks", "sampling", "elicitation", "roots",   "other",
};
#define SESSION_CLASS_N ARRAY_LEN(session_classes)

/*
 * Why sessions end, indexed by enum session_end: the text (logs, the error answered to what was in
 * flight, the reason of the cancels sent to the child), the /metrics label, and the cancel reason
 * counted for each cancel. A child that is gone is sent nothing.
 */
static const struct {
    const char *text;
    const char *label;
    enum session_cancel_reason cancel;
} session_ends[SESSION_END_N] = {
    [SESSION_END_DELETED] = { "session deleted", "deleted", SESSION_CANCEL_DELETED },
    [SESSION_END_EXPIRED] = { "session expired", "expired", SESSION_CANCEL_EXPIRED },
    [SESSION_END_DISCONNECTED] = { "client disconnected", "client_disconnected",
                                   SESSION_CANCEL_DISCONNECT },
    [SESSION_END_CHILD] = { "child ended", "child_exited", SESSION_CANCEL_OTHER },
    [SESSION_END_SHUTDOWN] = { "gateway shutting down", "shutdown", SESSION_CANCEL_SHUTDOWN },
    [SESSION_END_INIT] = { "initialize did not complete", "other", SESSION_CANCEL_OTHER },
};

static struct {
    struct loop *l;
    const struct config *cfg;
    struct session **buckets;
    size_t nbuckets;
    size_t count;
    struct session *graveyard;
    uint64_t next_stream_id;
    bool draining;    /* SIGTERM: no new sessions or requests, what is in flight may finish */
    struct msg *line; /* the child's large line being routed: pushed by reference, not copied */
    struct session_counters ctr;
    uint64_t requests[2][SESSION_CLASS_N]; /* [0] client -> child, [1] child -> client */
    uint64_t closed_by[SESSION_END_N];
    struct metrics_hist latency; /* client request -> the child's answer, through the gateway */
    struct metrics_hist spawn;   /* the spawn call of a session's child */
} S;

static size_t
session_class(const char *method)
{
    size_t n = strcspn(method, "/");
    for (size_t i = 0; i + 1 < SESSION_CLASS_N; i++)
        if (strlen(session_classes[i]) == n && memcmp(session_classes[i], method, n) == 0)
            return i;
    return SESSION_CLASS_N - 1;
}

/* --- the table --------------------------------------------------------------------------- */

void
session_module_init(struct loop *l, const struct config *cfg)
{
    S.l = l;
    S.cfg = cfg;
    S.nbuckets = 64;
    while (S.nbuckets < cfg->max_sessions && S.nbuckets < ((size_t)1 << 20))
        S.nbuckets *= 2;
    S.buckets = xcalloc(S.nbuckets, sizeof(*S.buckets));
    S.next_stream_id = 1;
}

void
session_set_config(const struct config *cfg)
{
    S.cfg = cfg;
}

bool
session_uses_config(const struct config *cfg)
{
    const struct config_server *lo = cfg->servers, *hi = cfg->servers + cfg->n_servers;
    for (size_t i = 0; i < S.nbuckets; i++)
        for (const struct session *s = S.buckets[i]; s != NULL; s = s->hnext)
            if (s->srv >= lo && s->srv < hi)
                return true;
    return false;
}

void
session_module_free(void)
{
    free(S.buckets);
    S.buckets = NULL;
    S.nbuckets = 0;
}

static size_t
session_hash(const char *id)
{
    uint64_t h = 1469598103934665603ull;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 1099511628211ull;
    return (size_t)(h & (S.nbuckets - 1));
}

struct session *
session_find(const char *id)
{
    if (S.buckets == NULL || id == NULL)
        return NULL;
    for (struct session *s = S.buckets[session_hash(id)]; s != NULL; s = s->hnext)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

size_t
session_count(void)
{
    return S.count;
}

const struct session_counters *
session_counters(void)
{
    return &S.ctr;
}

bool
session_version_supported(const char *v, size_t len)
{
    for (size_t i = 0; i < ARRAY_LEN(session_versions); i++)
        if (strlen(session_versions[i]) == len && memcmp(session_versions[i], v, len) == 0)
            return true;
    return false;
}

static void
session_unlink(struct session *s)
{
    struct session **pp = &S.buckets[session_hash(s->id)];
    while (*pp != NULL && *pp != s)
        pp = &(*pp)->hnext;
    if (*pp == s)
        *pp = s->hnext;
    S.count--;
}

static void
session_touch(struct session *s)
{
    s->last_active_ms = util_now_ms();
}

/* --- streams ----------------------------------------------------------------------------- */

static void session_cancel_to_child(struct session *s, struct pending *p,
                                    enum session_cancel_reason why);

static struct stream *
session_stream_by_id(const struct session *s, uint64_t id)
{
    for (struct stream *st = s->streams; st != NULL; st = st->next)
        if (st->id == id)
            return st;
    return NULL;
}

/* Protocol revisions are dates: "2025-11-25" and later have priming events and SSE polling. */
static bool
session_polls(const struct session *s)
{
    return strcmp(s->version, "2025-11-25") >= 0;
}

static void
session_maybe_resume(struct session *s)
{
    if (!s->paused || s->u == NULL)
        return;
    for (struct stream *st = s->streams; st != NULL; st = st->next)
        if (st->attached && !st->ended && st->pending > st->low_water)
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
 * Back-pressure (DESIGN.md 7): a stream being read that passes its high watermark stops the
 * child's stdout. A stream nobody reads cannot drain: it keeps only its newest stream_queue_bytes
 * (a resume from before what was dropped gets 410) rather than stall the session's other streams.
 */
static void
session_pressure(struct session *s, struct stream *st)
{
    if (!st->attached) {
        stream_trim(st, S.cfg->stream_queue_bytes);
        return;
    }
    if (!s->paused && s->u != NULL && st->pending > S.cfg->stream_queue_bytes) {
        s->paused = true;
        upstream_pause(s->u, true);
    }
}

static void
session_stream_timer_stop(struct stream *st)
{
    loop_timer_del(st->timer);
    st->timer = NULL;
}

/* Takes the stream out of the session and drops the session's reference. */
static void
session_stream_remove(struct session *s, struct stream *st)
{
    if (st->prev != NULL)
        st->prev->next = st->next;
    else if (s->streams == st)
        s->streams = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    if (s->get == st)
        s->get = NULL;
    st->drain = NULL;
    session_stream_timer_stop(st);
    stream_unref(st);
    session_maybe_resume(s);
}

/*
 * Forgets streams kept only for a late resume: nobody reads them, nothing is waited for on them,
 * and their last event is older than replay_max_age_s, or they are beyond the newest
 * max_inflight_per_session such streams of the session.
 */
static void
session_retire(struct session *s, uint64_t now_ms)
{
    uint64_t age = S.cfg->replay_max_age_s * 1000u, kept = 0;
    struct stream *st = s->streams; /* newest first */
    while (st != NULL) {
        struct stream *next = st->next;
        if (!st->attached && st->awaiting == 0) {
            if (now_ms - st->last_push_ms >= age || ++kept > S.cfg->max_inflight_per_session)
                session_stream_remove(s, st);
        }
        st = next;
    }
}

static void
session_push(struct session *s, struct stream *st, const struct iovec *iov, int n)
{
    stream_push_shared(st, iov, n, S.line);
    session_pressure(s, st);
}

/* SSE polling (2025-11-25): the connection of a POST stream still waiting ends after a while. */
static void
session_hangup_fired(void *arg)
{
    struct stream *st = arg;
    st->timer = NULL;
    if (!st->attached || stream_finished(st))
        return;
    st->hangup = true;
    if (st->wake != NULL)
        st->wake(st->wake_arg);
}

/*
 * The HTTP side reads st from now on. fresh: the POST's own connection, which SSE polling may end
 * once; a connection that resumed the stream keeps it to the end.
 */
static void
session_stream_attach(struct session *s, struct stream *st, bool fresh)
{
    session_stream_timer_stop(st);
    st->attached = true;
    st->hangup = false;
    if (fresh && !st->is_get && S.cfg->sse_close_after_ms > 0 && session_polls(s))
        st->timer = loop_timer_add(S.l, S.cfg->sse_close_after_ms, session_hangup_fired, st);
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
        if (s->get->attached) {
            *status = SESSION_E_CONFLICT;
            return NULL;
        }
        /* The stream a dropped GET left goes on from where its reader stopped. */
        session_stream_attach(s, s->get, false);
        *status = SESSION_OK;
        return stream_ref(s->get);
    }
    struct stream *st = stream_new(S.next_stream_id++, is_get, S.cfg->replay_buffer_bytes);
    st->low_water = S.cfg->stream_queue_bytes / 2;
    st->drain = session_stream_drained;
    st->drain_arg = s;
    st->owner = s;
    st->next = s->streams;
    if (s->streams != NULL)
        s->streams->prev = st;
    s->streams = st;
    if (session_polls(s))
        stream_push_priming(st, S.cfg->sse_retry_ms);
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
    struct stream *st = stream_new(S.next_stream_id++, true, 0);
    st->low_water = S.cfg->stream_queue_bytes / 2;
    st->drain = session_stream_drained;
    st->drain_arg = s;
    st->owner = s;
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
    if (st != NULL && st->attached) {
        *status = SESSION_E_CONFLICT;
        return NULL;
    }
    if (st == NULL || st->dropped || !stream_resume(st, seq) || stream_finished(st)) {
        log_info(s->id, "resume from Last-Event-ID %s refused: not replayable", last_event_id);
        *status = SESSION_E_EVICTED;
        return NULL;
    }
    log_info(s->id, "%s stream %" PRIu64 " resumed after event %" PRIu64 " (%zu bytes to replay)",
             st->is_get ? "GET" : "POST", st->id, seq, st->pending);
    session_stream_attach(s, st, false);
    *status = SESSION_OK;
    return stream_ref(st);
}

/* A client request bound to st got its answer, or was cancelled. */
static void
session_stream_answered(struct session *s, struct stream *st)
{
    if (st == NULL || st->awaiting == 0)
        return;
    if (--st->awaiting == 0 && !st->is_get) {
        stream_end(st);
        session_stream_timer_stop(st); /* no hangup, no resume grace: nothing is waited for */
        session_maybe_resume(s);
        /* Kept for a late resume (the client may not have read it all) unless not replayable. */
        if (st->replay_max == 0)
            session_stream_remove(s, st);
    }
}

/* The stream being read where a message unrelated to any known request goes; NULL if none. */
static struct stream *
session_route_unrelated(const struct session *s)
{
    if (s->get != NULL && s->get->attached)
        return s->get;
    /* streams is newest-first */
    for (struct stream *st = s->streams; st != NULL; st = st->next)
        if (!st->is_get && st->attached && !st->ended && !st->dropped)
            return st;
    return NULL;
}

/* Cancels at the child what is still in flight on st, which the client left for good. */
static void
session_stream_abandon(struct session *s, struct stream *st, const char *why)
{
    unsigned n = 0;
    for (struct pending *p = s->pt.head; p != NULL; p = p->next) {
        if (p->dir != PENDING_TO_CHILD || p->stream_id != st->id || p->state != PENDING_FORWARDED
            || p->gw_id == s->init_gw_id || p->task)
            continue;
        session_cancel_to_child(s, p, SESSION_CANCEL_DISCONNECT);
        n++;
    }
    log_info(s->id, "%s POST stream %" PRIu64 ": %u requests cancelled", why, st->id, n);
    st->dropped = true;
    stream_discard(st);
    session_stream_remove(s, st);
}

static void
session_grace_fired(void *arg)
{
    struct stream *st = arg;
    st->timer = NULL;
    if (!st->attached)
        session_stream_abandon(st->owner, st, "no resume in time of");
}

/* --- the in-flight table: every deletion goes through here (timers go with their entry) --- */

static void
session_pending_del(struct session *s, struct pending *p)
{
    loop_timer_del(p->timer);
    p->timer = NULL;
    pending_del(&s->pt, p);
}

static void
session_pending_clear(struct session *s)
{
    while (s->pt.head != NULL)
        session_pending_del(s, s->pt.head);
}

/* --- writing to the child ---------------------------------------------------------------- */

static int
session_send_iov(struct session *s, struct iovec *iov, int n)
{
    if (s->u == NULL)
        return -1;
    struct msg *m = msg_concat(iov, n);
    int rc = upstream_send(s->u, m);
    msg_unref(m);
    return rc;
}

/* Sends the child msg[0..len) as one line, with the bytes at `at` replaced by id (the splice). */
static int
session_splice_send(struct session *s, const char *msg, size_t len, struct jsonrpc_span at,
                    const char *id, size_t idlen)
{
    struct iovec iov[4] = {
        { (void *)(uintptr_t)msg, at.off },
        { (void *)(uintptr_t)id, idlen },
        { (void *)(uintptr_t)(msg + at.off + at.len), len - at.off - at.len },
        { (void *)(uintptr_t) "\n", 1 },
    };
    return session_send_iov(s, iov, 4);
}

/* Sends the child a notifications/cancelled for p and marks p cancelled (at most once). */
static void
session_cancel_to_child(struct session *s, struct pending *p, enum session_cancel_reason why)
{
    const char *reason = session_reasons[why];
    if (p->state != PENDING_FORWARDED)
        return;
    if (p->task) {
        /* Never notifications/cancelled for a task-augmented request (checklist C-04, K-31). */
        log_info(s->id, "task-augmented %s not cancelled (%s): tasks/cancel is the client's",
                 p->method, reason);
        p->state = PENDING_CANCELLED;
        p->cancelled_ms = util_now_ms();
        loop_timer_del(p->timer);
        p->timer = NULL;
        return;
    }
    char idbuf[24];
    int idlen = snprintf(idbuf, sizeof(idbuf), "%" PRIu64, p->gw_id);
    size_t len;
    char *c = jsonrpc_cancel_new(idbuf, (size_t)idlen, reason, &len);
    struct iovec iov[2] = { { c, len }, { (void *)(uintptr_t) "\n", 1 } };
    if (session_send_iov(s, iov, 2) == -1)
        log_warn(s->id, "cancel for %s (%s) not delivered: child stdin full or closed", p->method,
                 reason);
    else
        log_info(s->id, "cancel sent to child: method=%s child_id=%" PRIu64 " reason=\"%s\"",
                 p->method, p->gw_id, reason);
    free(c);
    S.ctr.cancels_to_child[why]++;
    p->state = PENDING_CANCELLED;
    p->cancelled_ms = util_now_ms();
    loop_timer_del(p->timer);
    p->timer = NULL;
}

/* --- request timeouts ------------------------------------------------------------------- */

static void session_push_error(struct session *s, struct stream *st, const struct pending *p,
                               const char *message);
static void session_stream_answered(struct session *s, struct stream *st);

static void
session_timeout_fired(void *arg)
{
    struct pending *p = arg;
    struct session *s = p->owner;
    p->timer = NULL;
    if (p->state != PENDING_FORWARDED)
        return;
    S.ctr.timeouts++;
    uint64_t waited = util_now_ms() - p->start_ms;
    char message[128];
    snprintf(message, sizeof(message), "request timed out after %" PRIu64 " ms at the gateway",
             waited);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st != NULL)
        session_push_error(s, st, p, message);
    if (p->gw_id == s->init_gw_id) {
        /* initialize is never cancelled (checklist C-03): the session goes instead. */
        session_pending_del(s, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT, "initialize timed out");
        return;
    }
    session_cancel_to_child(s, p, SESSION_CANCEL_TIMEOUT);
    session_stream_answered(s, st);
}

/* (Re)arms p's timeout: request_timeout_ms from now, never past request_timeout_max_ms total. */
static void
session_arm_timeout(struct session *s, struct pending *p)
{
    uint64_t timeout = s->srv->request_timeout_ms;
    if (timeout == 0 || strcmp(p->method, "tasks/result") == 0)
        return;
    uint64_t now = util_now_ms();
    uint64_t deadline = now + timeout;
    if (s->srv->request_timeout_max_ms > 0
        && deadline > p->start_ms + s->srv->request_timeout_max_ms)
        deadline = p->start_ms + s->srv->request_timeout_max_ms;
    loop_timer_del(p->timer);
    p->deadline_ms = deadline;
    p->owner = s;
    p->timer = loop_timer_add(S.l, deadline > now ? deadline - now : 0, session_timeout_fired, p);
}

/* --- tasks (2025-11-25): what the child holds keeps the session --------------------------- */

static bool
session_task_terminal(const char *status)
{
    return strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0
           || strcmp(status, "cancelled") == 0;
}

static void
session_tasks_clear(struct session *s)
{
    while (s->tasks != NULL) {
        struct session_task *t = s->tasks;
        s->tasks = t->next;
        free(t);
    }
    s->ntasks = 0;
}

/* A CreateTaskResult, a tasks/get or tasks/cancel result, or notifications/tasks/status. */
static void
session_task_seen(struct session *s, const char *line, size_t len)
{
    struct jsonrpc_task jt;
    if (jsonrpc_task_state(line, len, &jt) == -1)
        return;
    struct session_task **pp = &s->tasks;
    while (*pp != NULL && strcmp((*pp)->id, jt.task_id) != 0)
        pp = &(*pp)->next;
    if (session_task_terminal(jt.status)) {
        if (*pp != NULL) {
            struct session_task *t = *pp;
            *pp = t->next;
            free(t);
            s->ntasks--;
            log_debug(s->id, "task %s is %s", jt.task_id, jt.status);
        }
        return;
    }
    if (*pp != NULL || s->ntasks >= S.cfg->max_inflight_per_session)
        return;
    struct session_task *t = xcalloc(1, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", jt.task_id);
    t->until_ms = jt.ttl_ms >= 0 ? util_now_ms() + (uint64_t)jt.ttl_ms : 0;
    t->next = s->tasks;
    s->tasks = t;
    s->ntasks++;
    log_debug(s->id, "task %s is %s", jt.task_id, jt.status[0] ? jt.status : "open");
}

/* Forgets tasks past their ttl; true while any other is held. */
static bool
session_tasks_alive(struct session *s, uint64_t now_ms)
{
    struct session_task **pp = &s->tasks;
    while (*pp != NULL) {
        struct session_task *t = *pp;
        if (t->until_ms != 0 && now_ms >= t->until_ms) {
            *pp = t->next;
            free(t);
            s->ntasks--;
        } else {
            pp = &t->next;
        }
    }
    return s->tasks != NULL;
}

/* --- child -> client --------------------------------------------------------------------- */

static void
session_splice_push(struct session *s, struct stream *st, const char *line, size_t len,
                    struct jsonrpc_span at, const char *id, size_t idlen)
{
    struct iovec iov[3] = {
        { (void *)(uintptr_t)line, at.off },
        { (void *)(uintptr_t)id, idlen },
        { (void *)(uintptr_t)(line + at.off + at.len), len - at.off - at.len },
    };
    session_push(s, st, iov, 3);
}

static void
session_push_error(struct session *s, struct stream *st, const struct pending *p,
                   const char *message)
{
    size_t len;
    char *e = jsonrpc_error_new(p->orig_id, p->orig_id_len, JSONRPC_INTERNAL_ERROR, message, &len);
    struct iovec iov = { e, len };
    session_push(s, st, &iov, 1);
    free(e);
}

/* The initialize result fixes the session's protocol version. -1: the session was ended. */
static int
session_check_init(struct session *s, struct stream *st, struct pending *p, const char *line,
                   size_t len, const struct jsonrpc_info *info)
{
    if (info->kind == JSONRPC_ERROR) {
        log_warn(s->id, "child refused initialize");
        if (st != NULL)
            session_splice_push(s, st, line, len, info->id, p->orig_id, p->orig_id_len);
        session_pending_del(s, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT, "initialize failed");
        return -1;
    }
    char v[32];
    if (jsonrpc_protocol_version(line, len, v, sizeof(v)) == -1
        || !(session_version_supported(v, strlen(v))
             || (s->legacy && strcmp(v, "2024-11-05") == 0))) {
        log_warn(s->id, "child negotiated a protocol version the gateway does not serve");
        if (st != NULL)
            session_push_error(s, st, p,
                               s->legacy ? "upstream server negotiated a protocol version this "
                                           "gateway does not serve (2024-11-05, 2025-03-26, "
                                           "2025-06-18, 2025-11-25)"
                                         : "upstream server negotiated a protocol version this "
                                           "gateway does not serve over Streamable HTTP "
                                           "(2025-03-26, 2025-06-18, 2025-11-25)");
        session_pending_del(s, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT, "unsupported protocol version");
        return -1;
    }
    snprintf(s->version, sizeof(s->version), "%s", v);
    s->state = SESSION_READY;
    log_info(s->id, "session initialized: protocol %s", v);
    return 0;
}

static void
session_child_answer(struct session *s, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    uint64_t id;
    struct pending *p = NULL;
    if (info->id_type == JSONRPC_ID_NUMBER && jsonrpc_id_u64(line, info->id, &id))
        p = pending_find_gw(&s->pt, PENDING_TO_CHILD, id);
    if (p == NULL) {
        log_debug(s->id, "child answered an unknown id %.*s: dropped", (int)info->id.len,
                  line + info->id.off);
        return;
    }
    if (p->state == PENDING_CANCELLED) {
        S.ctr.late_dropped++;
        log_debug(s->id, "late answer for cancelled %s dropped", p->method);
        session_pending_del(s, p);
        return;
    }
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (p->gw_id == s->init_gw_id && session_check_init(s, st, p, line, len, info) == -1)
        return;
    if (info->kind == JSONRPC_RESULT
        && (p->task || strcmp(p->method, "tasks/get") == 0
            || strcmp(p->method, "tasks/cancel") == 0))
        session_task_seen(s, line, len);
    if (st != NULL)
        session_splice_push(s, st, line, len, info->id, p->orig_id, p->orig_id_len);
    metrics_observe(&S.latency, util_now_us() - p->start_us);
    session_pending_del(s, p);
    session_stream_answered(s, st);
}

static void
session_child_request(struct session *s, const char *line, size_t len,
                      const struct jsonrpc_info *info)
{
    struct stream *st = session_route_unrelated(s);
    if (st == NULL || s->pt.count >= 2 * S.cfg->max_inflight_per_session) {
        log_warn(s->id, "child request %s: no client stream open, answered with an error",
                 info->method);
        size_t elen;
        char *e = jsonrpc_error_new(line + info->id.off, info->id.len, JSONRPC_INTERNAL_ERROR,
                                    "no client stream is open to deliver this request", &elen);
        struct iovec iov[2] = { { e, elen }, { (void *)(uintptr_t) "\n", 1 } };
        if (session_send_iov(s, iov, 2) == -1)
            log_warn(s->id, "error answer to the child not delivered");
        free(e);
        return;
    }
    struct pending *p = pending_add(&s->pt, PENDING_TO_CLIENT, line + info->id.off, info->id.len,
                                    info->method, st->id, util_now_ms());
    S.requests[1][session_class(info->method)]++;
    char idbuf[24];
    int idlen = snprintf(idbuf, sizeof(idbuf), "%" PRIu64, p->gw_id);
    session_splice_push(s, st, line, len, info->id, idbuf, (size_t)idlen);
    log_debug(s->id, "child request %s sent on %s stream %" PRIu64 " as client id %" PRIu64,
              info->method, st->is_get ? "GET" : "POST", st->id, p->gw_id);
}

static void
session_child_progress(struct session *s, const char *line, size_t len,
                       const struct jsonrpc_info *info)
{
    struct pending *p = NULL;
    if (info->progress_token.len)
        p = pending_find_token(&s->pt, line + info->progress_token.off, info->progress_token.len);
    if (p == NULL || p->state != PENDING_FORWARDED) {
        if (p != NULL)
            S.ctr.late_dropped++;
        log_debug(s->id, "progress for no active request dropped");
        return;
    }
    if (s->srv->request_timeout_max_ms > 0 && p->timer != NULL)
        session_arm_timeout(s, p);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st == NULL)
        return;
    struct iovec iov = { (void *)(uintptr_t)line, len };
    session_push(s, st, &iov, 1);
}

static void
session_child_cancel(struct session *s, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    struct pending *p = NULL;
    if (info->request_id.len)
        p = pending_find_orig(&s->pt, PENDING_TO_CLIENT, line + info->request_id.off,
                              info->request_id.len);
    if (p == NULL || p->state != PENDING_FORWARDED) {
        log_debug(s->id, "child cancel for no active request ignored");
        return;
    }
    p->state = PENDING_CANCELLED;
    p->cancelled_ms = util_now_ms();
    S.ctr.cancels_to_client++;
    log_info(s->id, "child cancelled its %s request", p->method);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st == NULL || st->ended || st->dropped)
        return;
    char idbuf[24];
    int idlen = snprintf(idbuf, sizeof(idbuf), "%" PRIu64, p->gw_id);
    session_splice_push(s, st, line, len, info->request_id, idbuf, (size_t)idlen);
}

static void
session_child_notification(struct session *s, const char *line, size_t len,
                           const struct jsonrpc_info *info)
{
    if (strcmp(info->method, "notifications/progress") == 0) {
        session_child_progress(s, line, len, info);
        return;
    }
    if (strcmp(info->method, "notifications/cancelled") == 0) {
        session_child_cancel(s, line, len, info);
        return;
    }
    if (strcmp(info->method, "notifications/tasks/status") == 0)
        session_task_seen(s, line, len);
    struct stream *st = session_route_unrelated(s);
    if (st != NULL) {
        struct iovec iov = { (void *)(uintptr_t)line, len };
        session_push(s, st, &iov, 1);
        log_debug(s->id, "child notification %s sent on %s stream %" PRIu64, info->method,
                  st->is_get ? "GET" : "POST", st->id);
        return;
    }
    if (s->get != NULL) {
        /* The stream a dropped GET left: the next GET reads on from it. */
        log_debug(s->id, "child notification %s queued on the unread GET stream", info->method);
        struct iovec iov = { (void *)(uintptr_t)line, len };
        session_push(s, s->get, &iov, 1);
        return;
    }
    log_debug(s->id, "child notification %s kept for the next GET stream", info->method);
    if (s->backlog.count >= SESSION_BACKLOG_MAX) {
        msgq_advance(&s->backlog, s->backlog.head->m->len - s->backlog.head_off);
        S.ctr.notifications_dropped++;
    }
    struct msg *m = msg_new(len);
    memcpy(m->data, line, len);
    msgq_push(&s->backlog, m);
    msg_unref(m);
}

static void session_child_message(struct session *s, char *line, size_t len, bool top);

#define SESSION_INVALID_LOGGED 10

/*
 * Counts a child's line that is not a message; true while it should still be logged. The first
 * SESSION_INVALID_LOGGED of a session are, then only the counter moves: a child writing garbage
 * as fast as it can must not flood the log.
 */
static bool
session_invalid_line(struct session *s)
{
    S.ctr.child_lines_invalid++;
    if (s->invalid_logged >= SESSION_INVALID_LOGGED)
        return false;
    if (++s->invalid_logged == SESSION_INVALID_LOGGED)
        log_warn(s->id, "this child's further invalid lines are counted "
                        "(mcpgw_child_lines_invalid_total), not logged");
    return true;
}

/* A 2025-03-26 child may write a batch (checklist S-03): each element is routed on its own. */
static void
session_child_batch(struct session *s, char *line, size_t len)
{
    struct jsonrpc_span el[SESSION_BATCH_MAX];
    size_t n;
    if (jsonrpc_batch_split(line, len, el, ARRAY_LEN(el), &n) == -1 || n == 0) {
        if (session_invalid_line(s))
            log_warn(s->id, "child wrote an empty or oversized batch: skipped");
        return;
    }
    for (size_t i = 0; i < n && s->state != SESSION_CLOSED; i++)
        session_child_message(s, line + el[i].off, el[i].len, false);
}

bool
session_batches(const struct session *s)
{
    return strcmp(s->version, "2025-03-26") == 0;
}

static void
session_child_line(char *line, size_t len, struct msg *shared, void *arg)
{
    struct session *s = arg;
    if (s->state == SESSION_CLOSED)
        return;
    S.line = shared;
    session_child_message(s, line, len, true);
    S.line = NULL;
}

/* One line from the child (top), or one element of its batch. */
static void
session_child_message(struct session *s, char *line, size_t len, bool top)
{
    struct jsonrpc_info info;
    const char *err = NULL;
    int rc = jsonrpc_scan(line, len, &info, &err);
    if (rc == JSONRPC_EBATCH && top && session_batches(s)) {
        if (info.has_crlf)
            jsonrpc_flatten(line, len);
        session_child_batch(s, line, len);
        return;
    }
    if (rc != JSONRPC_OK) {
        if (session_invalid_line(s))
            log_warn(s->id, "child wrote a line that is not a JSON-RPC message (%s): skipped",
                     err ? err : "invalid");
        log_debug(s->id, "skipped line: %.*s", len > 200 ? 200 : (int)len, line);
        return;
    }
    if (info.has_crlf)
        jsonrpc_flatten(line, len);
    switch (info.kind) {
    case JSONRPC_RESULT:
    case JSONRPC_ERROR:
        session_child_answer(s, line, len, &info);
        break;
    case JSONRPC_REQUEST:
        session_child_request(s, line, len, &info);
        break;
    case JSONRPC_NOTIFICATION:
        session_child_notification(s, line, len, &info);
        break;
    }
}

static void
session_child_gone(const char *reason, void *arg)
{
    struct session *s = arg;
    log_warn(s->id, "upstream ended: %s", reason);
    session_close(s, SESSION_END_CHILD, reason);
}

/* --- client -> child --------------------------------------------------------------------- */

enum session_status
session_client_request(struct session *s, struct stream *st, char *body, size_t len,
                       const struct jsonrpc_info *info)
{
    if (s->state == SESSION_CLOSED || s->u == NULL)
        return SESSION_E_GONE;
    struct pending *dup =
        pending_find_orig(&s->pt, PENDING_TO_CHILD, body + info->id.off, info->id.len);
    if (dup != NULL && dup->state == PENDING_FORWARDED)
        return SESSION_E_DUPLICATE;
    if (pending_active(&s->pt, PENDING_TO_CHILD) >= S.cfg->max_inflight_per_session)
        return SESSION_E_TOO_MANY;
    if (S.draining)
        return SESSION_E_DRAINING;
    if (info->has_crlf)
        jsonrpc_flatten(body, len);
    uint64_t now_us = util_now_us();
    struct pending *p = pending_add(&s->pt, PENDING_TO_CHILD, body + info->id.off, info->id.len,
                                    info->method, st->id, now_us / 1000u);
    p->start_us = now_us;
    S.requests[0][session_class(info->method)]++;
    if (info->progress_token.len)
        pending_set_token(p, body + info->progress_token.off, info->progress_token.len);
    p->task = info->has_task;
    if (strcmp(info->method, "initialize") == 0 && s->init_gw_id == 0)
        s->init_gw_id = p->gw_id;
    char idbuf[24];
    int idlen = snprintf(idbuf, sizeof(idbuf), "%" PRIu64, p->gw_id);
    if (session_splice_send(s, body, len, info->id, idbuf, (size_t)idlen) == -1) {
        session_pending_del(s, p);
        return SESSION_E_BUSY;
    }
    st->awaiting++;
    session_arm_timeout(s, p);
    session_touch(s);
    log_debug(s->id, "request %s forwarded as child id %" PRIu64, info->method, p->gw_id);
    return SESSION_OK;
}

static void
session_client_cancel(struct session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    struct pending *p = NULL;
    if (info->request_id.len)
        p = pending_find_orig(&s->pt, PENDING_TO_CHILD, body + info->request_id.off,
                              info->request_id.len);
    if (p == NULL || p->state != PENDING_FORWARDED) {
        log_debug(s->id, "cancel for an unknown or finished request ignored");
        return;
    }
    if (p->gw_id == s->init_gw_id) {
        log_debug(s->id, "cancel of initialize ignored");
        return;
    }
    char idbuf[24];
    int idlen = snprintf(idbuf, sizeof(idbuf), "%" PRIu64, p->gw_id);
    if (session_splice_send(s, body, len, info->request_id, idbuf, (size_t)idlen) == -1)
        log_warn(s->id, "client cancel for %s not delivered: child stdin full", p->method);
    else
        log_info(s->id, "client cancel forwarded: method=%s child_id=%" PRIu64, p->method,
                 p->gw_id);
    p->state = PENDING_CANCELLED;
    p->cancelled_ms = util_now_ms();
    loop_timer_del(p->timer);
    p->timer = NULL;
    S.ctr.cancels_to_child[SESSION_CANCEL_CLIENT]++;
    /* The request's stream ends without a response. */
    session_stream_answered(s, session_stream_by_id(s, p->stream_id));
}

static enum session_status
session_client_answer(struct session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    uint64_t id;
    struct pending *p = NULL;
    if (info->id_type == JSONRPC_ID_NUMBER && jsonrpc_id_u64(body, info->id, &id))
        p = pending_find_gw(&s->pt, PENDING_TO_CLIENT, id);
    if (p == NULL) {
        log_debug(s->id, "client answered an unknown request: dropped");
        return SESSION_OK;
    }
    if (p->state == PENDING_CANCELLED) {
        S.ctr.late_dropped++;
        log_debug(s->id, "client answer to a cancelled %s dropped", p->method);
        session_pending_del(s, p);
        return SESSION_OK;
    }
    int rc = session_splice_send(s, body, len, info->id, p->orig_id, p->orig_id_len);
    session_pending_del(s, p);
    return rc == -1 ? SESSION_E_BUSY : SESSION_OK;
}

enum session_status
session_client_other(struct session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    if (s->state == SESSION_CLOSED || s->u == NULL)
        return SESSION_E_GONE;
    session_touch(s);
    if (info->has_crlf)
        jsonrpc_flatten(body, len);
    switch (info->kind) {
    case JSONRPC_RESULT:
    case JSONRPC_ERROR:
        return session_client_answer(s, body, len, info);
    case JSONRPC_NOTIFICATION:
        if (strcmp(info->method, "notifications/cancelled") == 0) {
            session_client_cancel(s, body, len, info);
            return SESSION_OK;
        }
        break;
    case JSONRPC_REQUEST:
        return SESSION_E_GONE; /* not reached: requests go through session_client_request */
    }
    struct iovec iov[2] = { { body, len }, { (void *)(uintptr_t) "\n", 1 } };
    return session_send_iov(s, iov, 2) == -1 ? SESSION_E_BUSY : SESSION_OK;
}

const char *
session_status_text(enum session_status status)
{
    switch (status) {
    case SESSION_OK:
        return "ok";
    case SESSION_E_GONE:
        return "Session not found";
    case SESSION_E_BUSY:
        return "upstream server is not reading its input; try again later";
    case SESSION_E_TOO_MANY:
        return "too many requests in flight for this session";
    case SESSION_E_DUPLICATE:
        return "a request with this id is already in flight";
    case SESSION_E_CONFLICT:
        return "this stream is already being read by another connection";
    case SESSION_E_EVICTED:
        return "Last-Event-ID names no event this session can still replay";
    case SESSION_E_DRAINING:
        return "gateway shutting down: no new requests; start a new session";
    }
    return "internal error";
}

enum session_status
session_client_batch(struct session *s, struct stream *st, char *body, size_t len,
                     const struct jsonrpc_span *el, const struct jsonrpc_info *info, size_t n)
{
    if (s->state == SESSION_CLOSED || s->u == NULL)
        return SESSION_E_GONE;
    /* Toward stdin it is all or nothing: room for every element (ids may grow) or a 503. */
    if (upstream_queued_bytes(s->u) + len + n * 24 > S.cfg->stdin_queue_bytes)
        return SESSION_E_BUSY;
    for (size_t i = 0; i < n; i++) {
        char *m = body + el[i].off;
        if (info[i].kind != JSONRPC_REQUEST) {
            if (session_client_other(s, m, el[i].len, &info[i]) != SESSION_OK)
                log_warn(s->id, "batch element %zu not delivered", i);
            continue;
        }
        enum session_status rc = session_client_request(s, st, m, el[i].len, &info[i]);
        if (rc != SESSION_OK) {
            /* Each request of a batch gets its own answer: this one an error, at once. */
            size_t elen;
            char *e = jsonrpc_error_new(m + info[i].id.off, info[i].id.len, JSONRPC_INVALID_REQUEST,
                                        session_status_text(rc), &elen);
            struct iovec iov = { e, elen };
            session_push(s, st, &iov, 1);
            free(e);
        }
    }
    if (st != NULL && st->awaiting == 0 && !st->ended)
        stream_end(st); /* every request of the batch was refused */
    return SESSION_OK;
}

/* --- lifecycle --------------------------------------------------------------------------- */

static char **
session_child_env(const struct config_server *srv)
{
    size_t n = 0;
    for (char **e = srv->inherit_env; e && *e; e++)
        n++;
    for (char **e = srv->env; e && *e; e++)
        n++;
    char **envp = xcalloc(n + 1, sizeof(*envp));
    size_t k = 0;
    for (char **e = srv->inherit_env; e && *e; e++) {
        const char *v = getenv(*e);
        if (v == NULL)
            continue;
        size_t len = strlen(*e) + strlen(v) + 2;
        envp[k] = xmalloc(len);
        snprintf(envp[k], len, "%s=%s", *e, v);
        k++;
    }
    for (char **e = srv->env; e && *e; e++)
        envp[k++] = xstrdup(*e);
    envp[k] = NULL;
    return envp;
}

struct session *
session_create(const struct config_server *srv, struct auth_principal *owner, int *status,
               const char **err)
{
    if (S.draining) {
        *status = 503;
        *err = "gateway shutting down";
        return NULL;
    }
    if (S.count >= S.cfg->max_sessions) {
        *status = 503;
        *err = "too many sessions";
        return NULL;
    }
    uint64_t cap = S.cfg->auth.max_sessions_per_principal;
    if (cap != 0 && owner->sessions >= cap) {
        *status = 429;
        *err = "too many sessions for this principal (max_sessions_per_principal)";
        return NULL;
    }
    struct session *s = xcalloc(1, sizeof(*s));
    if (crypto_session_id(S.cfg->instance_id, s->id) == -1) {
        free(s);
        *status = 500;
        *err = "no randomness for a session id";
        return NULL;
    }
    pending_init(&s->pt);
    msgq_init(&s->backlog);
    s->srv = srv;
    char **envp = session_child_env(srv);
    struct upstream_params up = {
        .argv = srv->argv,
        .envp = envp,
        .cwd = srv->cwd,
        .tag = s->id,
        .max_line_bytes = S.cfg->max_message_bytes,
        .stdin_max_bytes = S.cfg->stdin_queue_bytes,
        .stdin_grace_ms = S.cfg->child_stdin_grace_ms,
        .term_grace_ms = S.cfg->child_term_grace_ms,
    };
    uint64_t t0 = util_now_us();
    s->u = upstream_spawn(S.l, &up, session_child_line, session_child_gone, s, err);
    metrics_observe(&S.spawn, util_now_us() - t0);
    for (char **e = envp; *e; e++)
        free(*e);
    free(envp);
    if (s->u == NULL) {
        free(s);
        *status = 500;
        if (*err == upstream_no_fds) {
            /* Passing: sessions that end give their descriptors back (README: file limits). */
            *status = 503;
            log_warn(NULL, "new session refused: %s (%zu sessions open)", *err, S.count);
        }
        return NULL;
    }
    size_t h = session_hash(s->id);
    s->hnext = S.buckets[h];
    S.buckets[h] = s;
    S.count++;
    S.ctr.created++;
    s->owner = auth_principal_ref(owner);
    owner->sessions++;
    session_touch(s);
    log_info(s->id, "session created: server=%s child=%d owner=%s", srv->name,
             (int)upstream_pid(s->u), owner->name);
    return s;
}

/*
 * The one way a session ends, whatever the reason. What is in flight is cancelled at the child
 * (when it is still there) and answered to the client with an error; streams end; the child goes
 * through its stop ladder after the queued cancels are written. The struct stays valid, CLOSED,
 * until session_reap at the end of the turn: a caller whose flow may have closed it checks the
 * state, never a freed pointer.
 */
void
session_close(struct session *s, enum session_end why, const char *detail)
{
    if (s->state == SESSION_CLOSED)
        return;
    s->state = SESSION_CLOSED;
    session_unlink(s);
    const char *reason = detail != NULL ? detail : session_ends[why].text;
    bool child_alive = why != SESSION_END_CHILD;
    char message[160];
    snprintf(message, sizeof(message), "session ended: %s", reason);
    unsigned cancelled = 0;
    for (struct pending *p = s->pt.head; p != NULL; p = p->next) {
        if (p->dir != PENDING_TO_CHILD || p->state != PENDING_FORWARDED)
            continue;
        if (child_alive && p->gw_id != s->init_gw_id) {
            session_cancel_to_child(s, p, session_ends[why].cancel);
            cancelled++;
        }
        struct stream *st = session_stream_by_id(s, p->stream_id);
        if (st != NULL)
            session_push_error(s, st, p, message);
    }
    session_pending_clear(s);
    while (s->streams != NULL) {
        struct stream *st = s->streams;
        stream_end(st);
        session_stream_remove(s, st);
    }
    msgq_clear(&s->backlog);
    session_tasks_clear(s);
    upstream_close(s->u, reason);
    s->u = NULL;
    s->owner->sessions--;
    auth_principal_unref(s->owner);
    s->owner = NULL;
    S.ctr.closed++;
    S.closed_by[why]++;
    log_info(s->id, "session closed: %s (%u in-flight requests cancelled)", reason, cancelled);
    s->gnext = S.graveyard;
    S.graveyard = s;
}

void
session_close_all(enum session_end why)
{
    for (size_t i = 0; i < S.nbuckets; i++)
        while (S.buckets[i] != NULL)
            session_close(S.buckets[i], why, NULL);
}

void
session_reap(void)
{
    while (S.graveyard != NULL) {
        struct session *s = S.graveyard;
        S.graveyard = s->gnext;
        free(s);
    }
}

void
session_stream_detach(const char *sid, struct stream *st)
{
    struct session *s = session_find(sid);
    if (s == NULL || (st->prev == NULL && s->streams != st)) {
        stream_unref(st); /* the session, or its hold on st, is gone */
        return;
    }
    if (s->legacy) {
        /* HTTP+SSE: the stream's connection is the session (checklist T-92). */
        st->attached = false;
        session_close(s, SESSION_END_DISCONNECTED, NULL);
        stream_unref(st);
        return;
    }
    bool hangup = st->hangup;
    st->attached = false;
    st->hangup = false;
    session_stream_timer_stop(st);
    session_touch(s);
    bool unused = !st->is_get && st->awaiting == 0 && !st->ended; /* its request never went */
    bool waited = !st->is_get && st->awaiting > 0;
    /* A POST stream read to its end is done: only what a client missed is kept for a resume. */
    bool done = !st->is_get && stream_finished(st);
    if (unused || done || (st->replay_max == 0 && !waited)) {
        if (!unused && !stream_finished(st))
            log_info(s->id, "client dropped %s stream %" PRIu64 ": 0 requests cancelled",
                     st->is_get ? "GET" : "POST", st->id);
        st->dropped = true;
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
        uint64_t wait = S.cfg->disconnect_grace_ms;
        if (hangup)
            wait += 3 * S.cfg->sse_retry_ms + 1000;
        if (wait == 0) {
            session_stream_abandon(s, st, "client dropped");
        } else {
            st->timer = loop_timer_add(S.l, wait, session_grace_fired, st);
            log_info(s->id,
                     "%s POST stream %" PRIu64 ": %u requests wait up to %" PRIu64
                     " ms for a resume",
                     hangup ? "gateway ended the connection of" : "client dropped", st->id,
                     st->awaiting, wait);
        }
    } else if (!stream_finished(st)) {
        /* Kept: a client may resume it with Last-Event-ID. */
        log_info(s->id,
                 "client dropped %s stream %" PRIu64 ": 0 requests cancelled (%zu bytes unread "
                 "kept for a resume)",
                 st->is_get ? "GET" : "POST", st->id, st->pending);
    }
    session_maybe_resume(s);
    session_retire(s, util_now_ms());
    stream_unref(st);
}

void
session_sweep(uint64_t now_ms)
{
    uint64_t hb = S.cfg->heartbeat_s * 1000u;
    uint64_t idle = S.cfg->session_idle_timeout_s * 1000u;
    for (size_t i = 0; i < S.nbuckets; i++) {
        struct session *s = S.buckets[i];
        while (s != NULL) {
            struct session *next = s->hnext;
            bool read = false;
            for (struct stream *st = s->streams; st != NULL; st = st->next) {
                read |= st->attached;
                if (st->attached && now_ms - st->last_push_ms >= hb)
                    stream_push_heartbeat(st);
            }
            session_retire(s, now_ms);
            struct pending *p = s->pt.head;
            bool tasks = false;
            while (p != NULL) {
                struct pending *pn = p->next;
                tasks |= p->task && p->state == PENDING_FORWARDED;
                if (p->state == PENDING_CANCELLED
                    && now_ms - p->cancelled_ms >= SESSION_CANCEL_LINGER_MS)
                    session_pending_del(s, p);
                p = pn;
            }
            /*
             * Idle: no connection reads any of its streams, and none did for the idle timeout. A
             * request whose client left (a stream waiting for a resume) does not keep it; a
             * task-augmented request, or a task of the child's not yet terminal (within its
             * ttl) does: tasks outlive connections.
             */
            tasks |= session_tasks_alive(s, now_ms);
            if (!read && !tasks && now_ms - s->last_active_ms >= idle)
                session_close(s, SESSION_END_EXPIRED, NULL);
            s = next;
        }
    }
}

/* --- the admin view ---------------------------------------------------------------------- */

static void PRINTF(2, 3) session_put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    if (rc == -1)
        fatalx("admin view over its ceiling");
}

static void
session_put_raw(struct buf *b, const char *p, size_t n)
{
    if (buf_append(b, p, n) == -1)
        fatalx("admin view over its ceiling");
}

static void
session_put_quoted(struct buf *b, const char *s)
{
    size_t n;
    char *q = jsonrpc_quote(s, &n);
    session_put_raw(b, q, n);
    free(q);
}

static void
session_admin_entry(struct buf *b, const struct pending *p, uint64_t now, bool first)
{
    session_put(b, "%s{\"direction\":\"%s\",\"method\":", first ? "" : ",",
                p->dir == PENDING_TO_CHILD ? "to_child" : "to_client");
    session_put_quoted(b, p->method);
    session_put(b, ",\"id\":");
    session_put_raw(b, p->orig_id, p->orig_id_len);
    session_put(b,
                ",\"gateway_id\":%" PRIu64 ",\"state\":\"%s\",\"age_ms\":%" PRIu64
                ",\"stream\":%" PRIu64 ",\"task\":%s",
                p->gw_id, p->state == PENDING_FORWARDED ? "forwarded" : "cancelled",
                now - p->start_ms, p->stream_id, p->task ? "true" : "false");
    if (p->timer != NULL)
        session_put(b, ",\"deadline_in_ms\":%" PRIu64,
                    p->deadline_ms > now ? p->deadline_ms - now : 0);
    if (p->token != NULL) {
        session_put(b, ",\"progress_token\":");
        session_put_raw(b, p->token, p->token_len);
    }
    session_put(b, "}");
}

static void
session_admin_session(struct buf *b, const struct session *s, uint64_t now, bool first)
{
    session_put(b,
                "%s{\"id\":\"%s\",\"server\":\"%s\",\"child_pid\":%d,\"state\":\"%s\","
                "\"protocol_version\":\"%s\",\"idle_ms\":%" PRIu64 ",\"tasks_open\":%zu,"
                "\"owner\":",
                first ? "" : ",", s->id, s->srv->name, s->u ? (int)upstream_pid(s->u) : 0,
                s->state == SESSION_READY ? "ready" : "initializing", s->version,
                now - s->last_active_ms, s->ntasks);
    session_put_quoted(b, s->owner->name);
    session_put(b, ",\"streams\":[");
    for (const struct stream *st = s->streams; st != NULL; st = st->next)
        session_put(b,
                    "%s{\"id\":%" PRIu64 ",\"kind\":\"%s\",\"attached\":%s,\"ended\":%s,"
                    "\"awaiting\":%u,\"queued_bytes\":%zu,\"replay_bytes\":%zu}",
                    st == s->streams ? "" : ",", st->id, st->is_get ? "get" : "post",
                    st->attached ? "true" : "false", st->ended ? "true" : "false", st->awaiting,
                    st->pending, st->history);
    session_put(b, "],\"inflight\":[");
    for (const struct pending *p = s->pt.head; p != NULL; p = p->next)
        session_admin_entry(b, p, now, p == s->pt.head);
    session_put(b, "]}");
}

char *
session_admin_json(size_t *len)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 30);
    uint64_t now = util_now_ms();
    session_put(&b, "{\"sessions\":[");
    bool first = true;
    for (size_t i = 0; i < S.nbuckets; i++)
        for (const struct session *s = S.buckets[i]; s != NULL; s = s->hnext) {
            session_admin_session(&b, s, now, first);
            first = false;
        }
    const struct session_counters *c = &S.ctr;
    session_put(&b,
                "],\"counters\":{\"sessions_open\":%zu,\"sessions_created\":%" PRIu64
                ",\"sessions_closed\":%" PRIu64 ",\"cancels_to_child\":{",
                S.count, c->created, c->closed);
    for (size_t r = 0; r < SESSION_CANCEL_N; r++)
        session_put(&b, "%s\"%s\":%" PRIu64, r ? "," : "", session_reasons[r],
                    c->cancels_to_child[r]);
    session_put(&b,
                "},\"cancels_to_client\":%" PRIu64 ",\"late_dropped\":%" PRIu64
                ",\"timeouts\":%" PRIu64 ",\"child_lines_invalid\":%" PRIu64
                ",\"notifications_dropped\":%" PRIu64 "}}",
                c->cancels_to_client, c->late_dropped, c->timeouts, c->child_lines_invalid,
                c->notifications_dropped);
    *len = buf_used(&b);
    char *out = xstrndup(buf_head(&b), *len);
    buf_clear(&b);
    return out;
}

/* --- draining and /metrics --------------------------------------------------------------- */

void
session_drain(void)
{
    S.draining = true;
}

bool
session_draining(void)
{
    return S.draining;
}

size_t
session_inflight(enum pending_dir dir)
{
    size_t n = 0;
    for (size_t i = 0; i < S.nbuckets; i++)
        for (const struct session *s = S.buckets[i]; s != NULL; s = s->hnext)
            n += pending_active(&s->pt, dir);
    return n;
}

/* Label values of the cancel reasons, indexed by enum session_cancel_reason. */
static const char *const session_cancel_labels[SESSION_CANCEL_N] = {
    "client", "client_disconnected", "timeout", "deleted", "expired", "shutdown", "other",
};

void
session_metrics(struct buf *b)
{
    char labels[96];
    const struct session_counters *c = &S.ctr;
    metrics_family(b, "mcpgw_sessions_open", "gauge", "Sessions open now.");
    metrics_sample(b, "mcpgw_sessions_open", NULL, S.count);
    metrics_family(b, "mcpgw_sessions_created_total", "counter", "Sessions created.");
    metrics_sample(b, "mcpgw_sessions_created_total", NULL, c->created);
    metrics_family(b, "mcpgw_sessions_closed_total", "counter", "Sessions ended, by reason.");
    for (size_t i = 0; i < SESSION_END_N; i++) {
        snprintf(labels, sizeof(labels), "reason=\"%s\"", session_ends[i].label);
        metrics_sample(b, "mcpgw_sessions_closed_total", labels, S.closed_by[i]);
    }
    const struct upstream_counters *u = upstream_counters();
    metrics_family(b, "mcpgw_children_running", "gauge",
                   "Child processes not yet reaped (stopping ones included).");
    metrics_sample(b, "mcpgw_children_running", NULL, upstream_live_count());
    metrics_family(b, "mcpgw_children_spawned_total", "counter", "Child processes started.");
    metrics_sample(b, "mcpgw_children_spawned_total", NULL, u->spawned);
    metrics_family(b, "mcpgw_children_spawn_failures_total", "counter",
                   "Child processes that could not be started.");
    metrics_sample(b, "mcpgw_children_spawn_failures_total", NULL, u->spawn_failed);
    metrics_family(b, "mcpgw_children_exited_total", "counter",
                   "Child processes reaped, by how they ended.");
    metrics_sample(b, "mcpgw_children_exited_total", "status=\"exit_zero\"", u->exited_zero);
    metrics_sample(b, "mcpgw_children_exited_total", "status=\"exit_nonzero\"", u->exited_nonzero);
    metrics_sample(b, "mcpgw_children_exited_total", "status=\"signal\"", u->killed);
    metrics_family(b, "mcpgw_inflight_requests", "gauge",
                   "Requests waiting for their answer, by direction.");
    metrics_sample(b, "mcpgw_inflight_requests", "direction=\"to_child\"",
                   session_inflight(PENDING_TO_CHILD));
    metrics_sample(b, "mcpgw_inflight_requests", "direction=\"to_client\"",
                   session_inflight(PENDING_TO_CLIENT));
    metrics_family(b, "mcpgw_requests_total", "counter",
                   "Requests forwarded, by direction and method class (the part before '/').");
    for (size_t d = 0; d < 2; d++)
        for (size_t i = 0; i < SESSION_CLASS_N; i++) {
            snprintf(labels, sizeof(labels), "direction=\"%s\",class=\"%s\"",
                     d == 0 ? "to_child" : "to_client", session_classes[i]);
            metrics_sample(b, "mcpgw_requests_total", labels, S.requests[d][i]);
        }
    metrics_family(b, "mcpgw_cancels_total", "counter",
                   "notifications/cancelled forwarded or sent, by direction and reason.");
    for (size_t r = 0; r < SESSION_CANCEL_N; r++) {
        snprintf(labels, sizeof(labels), "direction=\"to_child\",reason=\"%s\"",
                 session_cancel_labels[r]);
        metrics_sample(b, "mcpgw_cancels_total", labels, c->cancels_to_child[r]);
    }
    metrics_sample(b, "mcpgw_cancels_total", "direction=\"to_client\",reason=\"child\"",
                   c->cancels_to_client);
    metrics_family(b, "mcpgw_late_messages_dropped_total", "counter",
                   "Answers and progress that arrived after their request was cancelled.");
    metrics_sample(b, "mcpgw_late_messages_dropped_total", NULL, c->late_dropped);
    metrics_family(b, "mcpgw_request_timeouts_total", "counter",
                   "Requests that passed their request_timeout_ms.");
    metrics_sample(b, "mcpgw_request_timeouts_total", NULL, c->timeouts);
    metrics_family(b, "mcpgw_child_lines_invalid_total", "counter",
                   "Lines from children that were not JSON-RPC (dropped).");
    metrics_sample(b, "mcpgw_child_lines_invalid_total", NULL, c->child_lines_invalid);
    metrics_family(b, "mcpgw_notifications_dropped_total", "counter",
                   "Child notifications no stream could take.");
    metrics_sample(b, "mcpgw_notifications_dropped_total", NULL, c->notifications_dropped);
    metrics_family(b, "mcpgw_child_stdin_bytes_total", "counter", "Bytes written to children.");
    metrics_sample(b, "mcpgw_child_stdin_bytes_total", NULL, u->stdin_bytes);
    metrics_family(b, "mcpgw_child_stdout_bytes_total", "counter", "Bytes read from children.");
    metrics_sample(b, "mcpgw_child_stdout_bytes_total", NULL, u->stdout_bytes);
    metrics_histogram(b, "mcpgw_request_duration_seconds",
                      "Client request to the child's answer, through the gateway.", &S.latency);
    metrics_histogram(b, "mcpgw_spawn_duration_seconds", "Starting a session's child process.",
                      &S.spawn);
}
