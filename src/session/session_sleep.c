/* SPDX-License-Identifier: MIT */
/*
 * Sleeping children (child_sleep_after_s): a session whose child has had nothing to do for a
 * while gives the process back and keeps everything else (its id, streams, replay history,
 * counters). The sweep (session_sweep, once a second) puts a quiet child to sleep: upstream_close,
 * the same stop ladder as any session's end. The session's next request wakes it: the child is
 * started again as the first one was (session_spawn: the same environment, the owner's kept
 * credentials, the newest exchanged token, the same box), the client's own initialize is replayed
 * with an id of the gateway's, and until its answer every line for the child (the request that
 * woke it, requests and notifications that came since, cancels) waits in s->wakeq, bounded by
 * stdin_queue_bytes. The answer is checked (the same protocol version as the session's, else the
 * session ends), swallowed, followed by notifications/initialized and the waiting lines in order,
 * less the requests cancelled or timed out while they waited and the cancels that named them.
 *
 * Ownership: each waiting request is an ordinary in-flight entry of the session's relay (its
 * timeout, its quota, its stream's awaiting count) from the moment it arrived; s->wakeq holds only
 * the bytes of its line. The wake's timer is the replayed initialize's own entry's
 * (init_timeout_ms, or request_timeout_ms when smaller): session_expired ends the session when it
 * fires. Both go with the session through session_close, which calls session_sleep_close.
 *
 * A session is never put to sleep while anything of the child's could be lost: a request in
 * flight either way (a question of the child's unanswered), a task not known to be terminal, a
 * stream a client reads or waits on, or state the client set at the child after initialize that a
 * new child would not have (logging/setLevel, resources/subscribe: such a session stays awake;
 * replaying them is not done). Nor is a session in front of a stateless-only child
 * (session_modern.c): its child was greeted with server/discover, and would refuse the replay.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "session_int.h"
#include "upstream.h"
#include "util.h"

/* Room kept in the child's stdin queue for notifications/initialized past the waiting lines. */
#define SESSION_WAKE_SLACK 256

static const char session_initialized_line[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

bool
session_asleep(const struct session *s)
{
    return s->nap == SESSION_ASLEEP;
}

const char *
session_sleep_state(const struct session *s)
{
    switch (s->nap) {
    case SESSION_ASLEEP:
        return "asleep";
    case SESSION_WAKING:
        return "waking";
    case SESSION_AWAKE:
        break;
    }
    return s->u != NULL ? "running" : "none";
}

void
session_sleep_note(struct session *s, const char *body, size_t len, const struct jsonrpc_info *info)
{
    if (s->srv->child_sleep_after_s == 0)
        return;
    if (strcmp(info->method, "initialize") == 0) {
        if (s->init_body == NULL && s->init_gw_id == 0) {
            s->init_body = xstrndup(body, len);
            s->init_len = len;
            s->init_id = info->id;
        }
        return;
    }
    if (!s->sleep_pinned
        && (strcmp(info->method, "logging/setLevel") == 0
            || strcmp(info->method, "resources/subscribe") == 0)) {
        s->sleep_pinned = true;
        log_debug(s->id, "%s: the session's child no longer sleeps (a new one would not have it)",
                  info->method);
    }
}

/* Nothing of the child's could be lost by stopping it now (the file's comment). */
static bool
session_quiet(const struct session *s, bool tasks)
{
    if (tasks || s->ntasks > 0 || s->sleep_pinned || s->init_body == NULL)
        return false;
    /* A stateless child is greeted by server/discover, not the client's initialize: it keeps
     * running (a wake would replay what it refuses). */
    if (s->modern != NULL)
        return false;
    if (pending_active(&s->r.pt, PENDING_TO_CHILD) > 0
        || pending_active(&s->r.pt, PENDING_TO_CLIENT) > 0)
        return false;
    for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
        if (stream_own(st)->attached || stream_own(st)->awaiting > 0)
            return false;
    return true;
}

void
session_sleep_check(struct session *s, uint64_t now_ms, bool tasks)
{
    uint64_t after_ms = s->srv->child_sleep_after_s * 1000u;
    if (after_ms == 0 || s->state != SESSION_READY || s->legacy || s->nap != SESSION_AWAKE
        || s->u == NULL)
        return;
    if (!session_quiet(s, tasks)) {
        s->quiet_since_ms = 0;
        return;
    }
    if (s->quiet_since_ms == 0)
        s->quiet_since_ms = now_ms;
    uint64_t since = s->quiet_since_ms > s->last_active_ms ? s->quiet_since_ms : s->last_active_ms;
    if (now_ms - since < after_ms)
        return;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)upstream_pid(s->u));
    upstream_close(s->u, "the session's child sleeps (child_sleep_after_s)");
    s->u = NULL;
    s->paused = false;
    s->nap = SESSION_ASLEEP;
    s->quiet_since_ms = 0;
    s->stats->sleeps++;
    const struct log_field f[] = { { "server", s->srv->name, false }, { "child", pid, true } };
    log_fields(LOG_INFO, s->id, f, ARRAY_LEN(f),
               "child %s sleeps: quiet for %" PRIu64 " s (child_sleep_after_s)", pid,
               (now_ms - since) / 1000u);
}

enum session_status
session_wake(struct session *s)
{
    uint64_t t0 = util_now_us();
    const char *err = "spawn failed";
    struct upstream *u = session_spawn(s, s->creds, &err);
    if (u == NULL) {
        s->stats->wake_failures++;
        if (err == upstream_no_fds) {
            /* Passing, as for a new session: it stays asleep, and the client may try again. */
            log_warn(s->id, "the sleeping child cannot wake now: %s", err);
            return SESSION_E_BUSY;
        }
        char detail[200];
        snprintf(detail, sizeof(detail), "the sleeping child could not be started again: %s", err);
        log_warn(s->id, "%s", detail);
        session_close(s, SESSION_END_CHILD, detail);
        return SESSION_E_GONE;
    }
    s->u = u;
    s->nap = SESSION_WAKING;
    s->wake_start_us = t0;
    /* The replayed initialize: the client's own body with an id of the gateway's, no stream. */
    relay_make_room(&s->r, 2 * sessions.cfg->max_inflight_per_session);
    uint64_t now_us = util_now_us();
    struct pending *p =
        pending_add(&s->r.pt, PENDING_TO_CHILD, "null", 4, "initialize", 0, now_us / 1000u);
    p->start_us = now_us;
    s->init_gw_id = p->gw_id;
    char idbuf[UTIL_U64_TEXT_MAX];
    size_t idlen = relay_id_text(p, idbuf);
    struct relay_edit ed = { s->init_id.off, s->init_id.len, idbuf, idlen };
    struct iovec iov[2 * RELAY_EDITS_MAX + 2];
    int k = relay_splice(s->init_body, s->init_len, &ed, 1, iov);
    iov[k++] = (struct iovec){ (void *)(uintptr_t) "\n", 1 };
    if (upstream_send_iov(u, iov, k) == -1) {
        session_close(s, SESSION_END_CHILD, "the woken child did not take its initialize");
        return SESSION_E_GONE;
    }
    uint64_t timeout_ms = s->srv->request_timeout_ms;
    if (timeout_ms == 0 || s->srv->init_timeout_ms < timeout_ms)
        timeout_ms = s->srv->init_timeout_ms;
    relay_arm_timeout(&s->r, p, timeout_ms, s->srv->request_timeout_max_ms);
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)upstream_pid(u));
    const struct log_field f[] = { { "server", s->srv->name, false }, { "child", pid, true } };
    log_fields(LOG_INFO, s->id, f, ARRAY_LEN(f), "child wakes: started as %s, initialize replayed",
               pid);
    return SESSION_OK;
}

int
session_sleep_queue(struct session *s, const struct iovec *iov, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    size_t max = sessions.cfg->stdin_queue_bytes;
    if (s->wakeq.bytes + len + SESSION_WAKE_SLACK > max)
        return -1; /* as a full stdin: 503 for a request */
    struct msg *m = msg_concat(iov, n);
    msgq_push(&s->wakeq, m);
    msg_unref(m);
    return 0;
}

/* Whether id is among the n ids of ids. */
static bool
session_id_in(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/*
 * Whether a waiting line is still due: a request whose entry was cancelled (by its client, its
 * timeout, its stream's abandon) while it waited is never sent, nor a cancel naming one of those
 * (recorded in dropped, room for every line of the queue).
 */
static bool
session_wake_due(struct session *s, const struct msg *m, uint64_t *dropped, size_t *ndropped)
{
    size_t len = m->len > 0 && m->data[m->len - 1] == '\n' ? m->len - 1 : m->len;
    struct jsonrpc_info info;
    if (jsonrpc_scan(m->data, len, &info, NULL) != JSONRPC_OK)
        return true;
    uint64_t gw;
    if (info.kind == JSONRPC_REQUEST && jsonrpc_id_u64(m->data, info.id, &gw)) {
        const struct pending *p = pending_find_gw(&s->r.pt, PENDING_TO_CHILD, gw);
        if (p != NULL && p->state == PENDING_FORWARDED)
            return true;
        dropped[(*ndropped)++] = gw;
        return false;
    }
    if (info.kind == JSONRPC_NOTIFICATION && strcmp(info.method, "notifications/cancelled") == 0
        && info.request_id.len > 0 && jsonrpc_id_u64(m->data, info.request_id, &gw))
        return !session_id_in(dropped, *ndropped, gw);
    return true;
}

int
session_sleep_woke(struct session *s, struct pending *p, const char *line, size_t len,
                   const struct jsonrpc_info *info)
{
    uint64_t took_us = util_now_us() - s->wake_start_us;
    pending_del(&s->r.pt, p);
    char v[32] = "";
    const char *why = NULL;
    if (info->kind == JSONRPC_ERROR)
        why = "the woken child refused the replayed initialize";
    else if (jsonrpc_protocol_version(line, len, v, sizeof(v)) == -1 || strcmp(v, s->version) != 0)
        why = "the woken child negotiated another protocol version than the session's";
    if (why != NULL) {
        const struct log_field f[] = { { "server", s->srv->name, false } };
        log_fields(LOG_WARN, s->id, f, ARRAY_LEN(f), "%s (session %s, child %s)", why, s->version,
                   v[0] != '\0' ? v : "-");
        session_close(s, SESSION_END_CHILD, why);
        return -1;
    }
    struct iovec iov = { (void *)(uintptr_t)session_initialized_line,
                         sizeof(session_initialized_line) - 1 };
    if (upstream_send_iov(s->u, &iov, 1) == -1) {
        session_close(s, SESSION_END_CHILD,
                      "the woken child did not take notifications/initialized");
        return -1;
    }
    struct msgq q = s->wakeq;
    msgq_init(&s->wakeq);
    uint64_t *dropped = xcalloc(q.count + 1, sizeof(*dropped));
    size_t ndropped = 0, sent = 0;
    bool failed = false;
    for (struct msgq_item *it = q.head; it != NULL && !failed; it = it->next) {
        if (!session_wake_due(s, it->m, dropped, &ndropped))
            continue;
        struct iovec one = { it->m->data, it->m->len };
        failed = upstream_send_iov(s->u, &one, 1) == -1;
        sent += !failed;
    }
    msgq_clear(&q);
    free(dropped);
    if (failed) {
        session_close(s, SESSION_END_CHILD, "the woken child did not take the waiting requests");
        return -1;
    }
    s->nap = SESSION_AWAKE;
    s->stats->wakes++;
    metrics_observe(&s->stats->wake, took_us);
    char ms[32];
    snprintf(ms, sizeof(ms), "%.3f", (double)took_us / 1000.0);
    const struct log_field f[] = { { "server", s->srv->name, false }, { "wake_ms", ms, true } };
    log_fields(LOG_INFO, s->id, f, ARRAY_LEN(f),
               "child woke in %s ms: initialize replayed, %zu waiting line(s) sent, %zu dropped",
               ms, sent, ndropped);
    return -1;
}

void
session_sleep_close(struct session *s, enum session_end why)
{
    if (s->nap == SESSION_WAKING && (why == SESSION_END_CHILD || why == SESSION_END_INIT))
        s->stats->wake_failures++;
    s->nap = SESSION_AWAKE;
    msgq_clear(&s->wakeq);
    config_env_free(s->creds);
    s->creds = NULL;
    free(s->init_body);
    s->init_body = NULL;
}

void
session_sleep_metrics(struct buf *b)
{
    char labels[256];
    struct session_server *r;
    struct session_server *rows = (struct session_server *)(void *)sessions.servers;
    for (r = rows; r != NULL; r = METRICS_ROW_NEXT(r))
        r->asleep = 0;
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext)
            s->stats->asleep += s->nap == SESSION_ASLEEP;
    metrics_per_server(b, sessions.servers, "mcpgw_sessions_asleep", "gauge",
                       "Sessions whose child sleeps now (child_sleep_after_s), by server.",
                       offsetof(struct session_server, asleep));
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        { "mcpgw_child_sleeps_total", "Sessions' children stopped for quiet, by server.",
          offsetof(struct session_server, sleeps) },
        { "mcpgw_child_wakes_total",
          "Sleeping children started again and through their replayed initialize, by server.",
          offsetof(struct session_server, wakes) },
        { "mcpgw_child_wake_failures_total",
          "Wakes that failed (spawn, initialize refused, timed out or of another protocol "
          "version), by server.",
          offsetof(struct session_server, wake_failures) },
    };
    for (size_t c = 0; c < ARRAY_LEN(counters); c++)
        metrics_per_server(b, sessions.servers, counters[c].name, "counter", counters[c].help,
                           counters[c].off);
    metrics_family(b, "mcpgw_child_wake_duration_seconds", "histogram",
                   "A sleeping child's wake: its spawn to the answer of its replayed initialize, "
                   "by server.");
    for (r = rows; r != NULL; r = METRICS_ROW_NEXT(r)) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_histogram_series(b, "mcpgw_child_wake_duration_seconds", labels, &r->wake);
    }
}
