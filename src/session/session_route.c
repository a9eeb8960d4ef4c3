/* SPDX-License-Identifier: MIT */
/*
 * Routing between a session's client and its child, every message through the in-flight table.
 * Client request ids are replaced by ids the gateway mints (restored byte-for-byte on the way
 * back); child request ids likewise toward the client (src/README.md, section 3). Where the child's
 * messages go:
 *   - a response: the stream of the POST that carried the request;
 *   - notifications/progress: the stream of the request that set the progressToken;
 *   - notifications/cancelled for a child request: the stream that carried that request;
 *   - any other request or notification: the GET stream when one is open, else the stream of the
 *     newest client request still waiting, else (notifications only) a bounded backlog that the
 *     next GET stream receives first. A child request with no stream at all is answered with an
 *     error at once rather than left hanging.
 * Never broadcast: each message goes on exactly one stream. Writes to the child never end the
 * session inside these functions: a child that stopped reading is reported on a later turn.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "envelope.h"
#include "log.h"
#include "metrics.h"
#include "revision.h"
#include "session_int.h"
#include "upstream.h"

/* --- writing to the child (through the relay) -------------------------------------------- */

int
session_relay_send(void *arg, const struct iovec *iov, int n)
{
    struct session *s = arg;
    if (s->nap == SESSION_WAKING)
        return session_sleep_queue(s, iov, n);
    return s->u == NULL ? -1 : upstream_send_iov(s->u, iov, n);
}

/* Sends the child msg[0..len) as one line, with the bytes at `at` replaced by id (the splice). */
static int
session_splice_send(struct session *s, const char *msg, size_t len, struct jsonrpc_span at,
                    const char *id, size_t idlen)
{
    struct relay_edit ed = { at.off, at.len, id, idlen };
    return relay_send_spliced(&s->r, msg, len, &ed, 1);
}

/*
 * The same for a client request that carries a trace (trace_context on): the id, and the trace
 * put into its params._meta, in one splice. The trace id goes on the in-flight entry p.
 */
static int
session_traced_send(struct session *s, struct pending *p, char *body, size_t len,
                    const struct jsonrpc_info *info, struct trace_in *tin, const char *id,
                    size_t idlen)
{
    struct trace tr;
    char text[TRACE_EDIT_BUF];
    struct relay_edit ed[1 + TRACE_EDITS_MAX] = { { info->id.off, info->id.len, id, idlen } };
    int n = 1;
    if (trace_resolve(tin, body, len, info, &tr)) {
        n += trace_edits(&tr, body, len, info, text, ed + 1);
        trace_id_copy(&tr, p->trace_id);
        audit_call_trace(p->audit, pending_trace_id(p));
    }
    return relay_send_spliced(&s->r, body, len, ed, n);
}

void
session_error_to_child(struct session *s, const char *id, size_t idlen, const char *message)
{
    relay_error_to_child(&s->r, id, idlen, JSONRPC_INTERNAL_ERROR, message);
}

/* --- request timeouts ------------------------------------------------------------------- */

static void
session_expired(void *owner, struct pending *p)
{
    struct session *s = owner;
    s->stats->timeouts++;
    uint64_t waited = util_now_ms() - p->start_ms;
    char message[128];
    snprintf(message, sizeof(message), "request timed out after %" PRIu64 " ms at the gateway",
             waited);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st != NULL)
        session_push_error(s, st, p, message);
    if (p->gw_id == s->init_gw_id) {
        /* initialize is never cancelled: the session goes instead. */
        pending_del(&s->r.pt, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT,
                      s->nap == SESSION_WAKING ? "the woken child did not answer initialize in time"
                                               : "initialize timed out");
        return;
    }
    relay_cancel(&s->r, p, RELAY_CANCEL_TIMEOUT);
    session_stream_answered(s, st);
}

/*
 * (Re)arms p's timeout: request_timeout_ms from now, never past request_timeout_max_ms total. The
 * session's initialize always has one: init_timeout_ms, or request_timeout_ms when set and smaller
 * (session_expired ends the session then).
 */
static void
session_arm_timeout(struct session *s, struct pending *p)
{
    if (strcmp(p->method, "tasks/result") == 0)
        return;
    uint64_t timeout_ms = s->srv->request_timeout_ms;
    if (p->gw_id == s->init_gw_id && (timeout_ms == 0 || s->srv->init_timeout_ms < timeout_ms))
        timeout_ms = s->srv->init_timeout_ms;
    relay_arm_timeout(&s->r, p, timeout_ms, s->srv->request_timeout_max_ms);
}

/* --- child -> client --------------------------------------------------------------------- */

static void
session_splice_push(struct session *s, struct stream *st, const char *line, size_t len,
                    struct jsonrpc_span at, const char *id, size_t idlen)
{
    struct relay_edit ed = { at.off, at.len, id, idlen };
    struct iovec iov[3];
    session_push(s, st, iov, relay_splice(line, len, &ed, 1, iov));
}

void
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
    if (s->nap == SESSION_WAKING)
        return session_sleep_woke(s, p, line, len, info);
    if (info->kind == JSONRPC_ERROR && session_modern_init_refused(s, p, line, len))
        return -1; /* stateless child mode: probed (session_modern.c) */
    if (info->kind == JSONRPC_ERROR) {
        log_warn(s->id, "child refused initialize");
        if (st != NULL)
            session_splice_push(s, st, line, len, info->id, p->orig_id, p->orig_id_len);
        pending_del(&s->r.pt, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT, "initialize failed");
        return -1;
    }
    char v[32], why[160];
    /* A 2024-11-05 session serves every revision with sessions, a Streamable HTTP one its own. */
    unsigned over = s->legacy ? REVISION_SESSIONS : REVISION_STREAMABLE;
    const struct revision *rev = NULL;
    if (jsonrpc_protocol_version(line, len, v, sizeof(v)) != -1)
        rev = revision_named(v);
    if (!revision_over(rev, over)) {
        log_warn(s->id, "child negotiated a protocol version the gateway does not serve");
        snprintf(why, sizeof why,
                 "upstream server negotiated a protocol version this gateway does not serve%s (%s)",
                 s->legacy ? "" : " over Streamable HTTP", revision_list(over));
        if (st != NULL)
            session_push_error(s, st, p, why);
        pending_del(&s->r.pt, p);
        session_stream_answered(s, st);
        session_close(s, SESSION_END_INIT, "unsupported protocol version");
        return -1;
    }
    session_modern_free(s); /* a legacy child: nothing to translate */
    snprintf(s->version, sizeof(s->version), "%s", rev->name);
    s->rev = rev;
    s->r.batches = rev->batches;
    s->state = SESSION_READY;
    relay_start_ok(s->r.stats);
    log_info(s->id, "session initialized: protocol %s", v);
    return 0;
}

/*
 * A tools/list result through the server's tool policy, on st: without the tools p's token may not
 * see (policy.h). One that cannot be filtered becomes an error: nothing passes unjudged.
 */
static void
session_push_tools(struct session *s, struct stream *st, const struct pending *p, const char *line,
                   size_t len, const struct jsonrpc_info *info)
{
    struct jsonrpc_info finfo;
    char *copy = NULL;
    if (relay_filter_tools(s->id, s->srv->policy, p->grants, &line, &len, &info, &finfo, &copy)
        == RELAY_FILTER_REFUSED)
        session_push_error(s, st, p, RELAY_FILTER_REFUSAL);
    else
        session_splice_push(s, st, line, len, info->id, p->orig_id, p->orig_id_len);
    free(copy);
}

static void
session_child_answer(void *owner, struct pending *p, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    struct session *s = owner;
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (p->gw_id == s->init_gw_id && session_modern_probing(s)) {
        session_modern_init_answer(s, st, p, line, len, info); /* stateless child mode */
        return;
    }
    if (p->gw_id == s->init_gw_id && session_check_init(s, st, p, line, len, info) == -1)
        return;
    if (s->modern != NULL && session_modern_answer(s, st, p, line, len, info))
        return; /* stateless child mode: an input round */
    if (info->kind == JSONRPC_RESULT
        && (p->task || strcmp(p->method, "tasks/get") == 0
            || strcmp(p->method, "tasks/cancel") == 0))
        session_task_seen(s, line, len);
    if (st != NULL && s->srv->policy != NULL && info->kind == JSONRPC_RESULT
        && strcmp(p->method, "tools/list") == 0)
        session_push_tools(s, st, p, line, len, info);
    else if (st != NULL)
        session_splice_push(s, st, line, len, info->id, p->orig_id, p->orig_id_len);
    audit_call_answer(p->audit, line, len, info);
    metrics_observe(&s->stats->latency, util_now_us() - p->start_us);
    pending_del(&s->r.pt, p);
    session_stream_answered(s, st);
}

static void
session_child_request(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct session *s = owner;
    if (session_modern_active(s)) {
        /* Stateless child mode: a stateless server sends no request (it asks by input rounds),
         * and takes no answer: dropped, counted as an invalid line. */
        relay_invalid(&s->r, "a request from a stateless server (dropped)", line, len);
        return;
    }
    struct stream *st = session_route_unrelated(s);
    relay_make_room(&s->r, 2 * sessions.cfg->max_inflight_per_session);
    const char *refusal = NULL;
    if (info->id.len > sessions.cfg->max_id_bytes)
        refusal = "request id longer than the gateway's max_id_bytes";
    else if (st == NULL)
        refusal = "no client stream is open to deliver this request";
    else if (s->r.pt.count >= 2 * sessions.cfg->max_inflight_per_session)
        refusal = "too many requests in flight for this session";
    if (refusal != NULL) {
        log_warn(s->id, "child request %s answered with an error: %s", info->method, refusal);
        session_error_to_child(s, line + info->id.off, info->id.len, refusal);
        return;
    }
    struct pending *p = pending_add(&s->r.pt, PENDING_TO_CLIENT, line + info->id.off, info->id.len,
                                    info->method, stream_id(st), util_now_ms());
    s->stats->requests[1][session_class(info->method)]++;
    char idbuf[UTIL_U64_TEXT_MAX];
    size_t idlen = relay_id_text(p, idbuf);
    session_splice_push(s, st, line, len, info->id, idbuf, idlen);
    log_debug(s->id, "child request %s sent on %s stream %" PRIu64 " as client id %" PRIu64,
              info->method, stream_is_get(st) ? "GET" : "POST", stream_id(st), p->gw_id);
}

static void
session_child_progress(void *owner, struct pending *p, const char *line, size_t len,
                       const struct jsonrpc_info *info)
{
    struct session *s = owner;
    (void)info;
    if (s->srv->request_timeout_max_ms > 0 && p->timer != NULL)
        session_arm_timeout(s, p);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st == NULL)
        return;
    struct iovec iov = { (void *)(uintptr_t)line, len };
    session_push(s, st, &iov, 1);
}

static void
session_child_cancel(void *owner, struct pending *p, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    struct session *s = owner;
    if (p == NULL && s->modern != NULL && session_modern_listen_line(s, line, info))
        return; /* stateless child mode: the child ended the session's subscriptions/listen */
    if (p == NULL) {
        log_debug(s->id, "child cancel for no active request ignored");
        return;
    }
    relay_mark_cancelled(&s->r, p);
    relay_count_to_client(s->r.stats);
    log_info(s->id, "child cancelled its %s request", p->method);
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (st == NULL || stream_ended(st) || stream_dropped(st))
        return;
    char idbuf[UTIL_U64_TEXT_MAX];
    size_t idlen = relay_id_text(p, idbuf);
    session_splice_push(s, st, line, len, info->request_id, idbuf, idlen);
}

/* A notification of the child's to the client: on the stream it belongs to, else kept. */
static void
session_note_push(struct session *s, const char *line, size_t len, const struct jsonrpc_info *info)
{
    if (strcmp(info->method, "notifications/tasks/status") == 0)
        session_task_seen(s, line, len);
    struct stream *st = session_route_unrelated(s);
    if (st != NULL) {
        struct iovec iov = { (void *)(uintptr_t)line, len };
        session_push(s, st, &iov, 1);
        log_debug(s->id, "child notification %s sent on %s stream %" PRIu64, info->method,
                  stream_is_get(st) ? "GET" : "POST", stream_id(st));
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
    /* At most SESSION_BACKLOG_MAX messages and stream_queue_bytes: the oldest go first. */
    uint64_t max_bytes = sessions.cfg->stream_queue_bytes;
    if (len > max_bytes) {
        s->stats->notifications_dropped++;
        return;
    }
    while (s->backlog.head != NULL
           && (s->backlog.count >= SESSION_BACKLOG_MAX || s->backlog.bytes + len > max_bytes)) {
        msgq_advance(&s->backlog, s->backlog.head->m->len - s->backlog.head_off);
        s->stats->notifications_dropped++;
    }
    struct msg *m = msg_new(len);
    memcpy(m->data, line, len);
    msgq_push(&s->backlog, m);
    msg_unref(m);
}

static void
session_child_notification(void *owner, const char *line, size_t len,
                           const struct jsonrpc_info *info)
{
    struct session *s = owner;
    if (s->modern != NULL && session_modern_listen_line(s, line, info))
        return; /* stateless child mode: the listen's acknowledgement */
    if (s->modern == NULL || info->meta_subscription.len == 0) {
        session_note_push(s, line, len, info);
        return;
    }
    /* Stateless child mode, the session's listen: the legacy form, without its subscriptionId. */
    struct buf b;
    buf_init(&b, SIZE_MAX);
    if (envelope_legacy_note(line, info, &b) == 0)
        session_note_push(s, buf_head(&b), buf_used(&b), info);
    else
        session_note_push(s, line, len, info);
    buf_clear(&b);
}

bool
session_batches(const struct session *s)
{
    return s->rev != NULL && s->rev->batches;
}

void
session_child_line(char *line, size_t len, struct msg *shared, void *arg)
{
    struct session *s = arg;
    sessions.line = shared;
    relay_line(&s->r, line, len);
    sessions.line = NULL;
}

static void
session_ended(void *owner, const char *reason)
{
    struct session *s = owner;
    const struct log_field f[] = { { "reason", reason, false } };
    log_fields(LOG_WARN, s->id, f, ARRAY_LEN(f), "upstream ended: %s", reason);
    session_close(s, SESSION_END_CHILD, reason);
}

/* An answer naming no entry: the end of a stateless child's subscriptions/listen, else stray. */
static bool
session_child_stray(void *owner, const char *line, const struct jsonrpc_info *info)
{
    struct session *s = owner;
    return s->modern != NULL && session_modern_listen_line(s, line, info);
}

void
session_child_gone(const char *reason, void *arg)
{
    struct session *s = arg;
    relay_gone(&s->r, reason);
}

const struct relay_ops session_relay_ops = {
    .answer = session_child_answer,
    .stray = session_child_stray,
    .request = session_child_request,
    .progress = session_child_progress,
    .cancelled = session_child_cancel,
    .notification = session_child_notification,
    .expired = session_expired,
    .gone = session_ended,
};

/* --- client -> child --------------------------------------------------------------------- */

/*
 * A tools/call the server's policy hides from a token granting bits (relay_refuse_hidden),
 * answered on st and never sent to the child. True when answered.
 */
static bool
session_refuse_hidden(struct session *s, struct stream *st, const char *body,
                      const struct jsonrpc_info *info, uint64_t bits)
{
    char message[RELAY_REFUSAL_MAX];
    if (!relay_refuse_hidden(s->srv->policy, bits, body, info,
                             s->owner != NULL ? s->owner->name : NULL, s->srv->name, s->id,
                             message))
        return false;
    size_t elen;
    char *e = jsonrpc_error_new(body + info->id.off, info->id.len, JSONRPC_INVALID_PARAMS, message,
                                &elen);
    struct iovec iov = { e, elen };
    session_push(s, st, &iov, 1);
    free(e);
    return true;
}

/*
 * Whether s's owner may have one more request in flight on s's server: max_inflight_per_principal
 * as the current configuration sets it, over the requests of every session of the owner on that
 * server, of every configuration, and of the server's pools (quota.h).
 */
static bool
session_principal_fits(struct session *s)
{
    const struct config_server *now = config_server_named(sessions.cfg, s->srv->name);
    uint64_t max = (now != NULL ? now : s->srv)->max_inflight_per_principal;
    return max == 0 || quota_count(session_calls_quota(s), QUOTA_CALLS) < max;
}

/*
 * What the client's initialize says it is (params.clientInfo name and version), for the admin
 * view: client data, so decoded, cut to SESSION_CLIENT_INFO_MAX - 1 bytes, and escaped only where
 * it is shown.
 */
static void
session_note_client_info(struct session *s, const char *body, const struct jsonrpc_info *info)
{
    struct jsonrpc_span ci, v;
    if (info->params.len == 0 || jsonrpc_member_at(body, info->params, "clientInfo", &ci) == -1
        || ci.len == 0 || body[ci.off] != '{')
        return;
    s->client_info = true;
    if (jsonrpc_member_at(body, ci, "name", &v) == 0 && v.len > 0)
        (void)jsonrpc_text_at(body, v, s->client_name, sizeof(s->client_name));
    if (jsonrpc_member_at(body, ci, "version", &v) == 0 && v.len > 0)
        (void)jsonrpc_text_at(body, v, s->client_version, sizeof(s->client_version));
}

enum session_status
session_client_request(struct session *s, struct stream *st, char *body, size_t len,
                       const struct jsonrpc_info *info, struct policy_grants grants,
                       struct trace_in *trace)
{
    if (s->state == SESSION_CLOSED || (s->u == NULL && !session_asleep(s)))
        return SESSION_E_GONE;
    if (info->id.len > sessions.cfg->max_id_bytes
        || info->progress_token.len > sessions.cfg->max_id_bytes)
        return SESSION_E_ID_TOO_LONG;
    struct pending *dup =
        pending_find_orig(&s->r.pt, PENDING_TO_CHILD, body + info->id.off, info->id.len);
    if (dup != NULL && dup->state == PENDING_FORWARDED)
        return SESSION_E_DUPLICATE;
    /* The client's own requests: a waking child's replayed initialize is the gateway's. */
    size_t active = pending_active(&s->r.pt, PENDING_TO_CHILD);
    if (s->nap == SESSION_WAKING && active > 0)
        active--;
    if (active >= sessions.cfg->max_inflight_per_session)
        return SESSION_E_TOO_MANY;
    bool counted = strcmp(info->method, "initialize") != 0;
    if (counted && !session_principal_fits(s))
        return SESSION_E_PRINCIPAL;
    /* Grants come relative to the request's server: its definition may be newer than s's. */
    uint64_t bits = s->srv->policy != NULL ? policy_bits(s->srv->policy, grants) : 0;
    if (s->srv->policy != NULL && strcmp(info->method, "tools/call") == 0
        && session_refuse_hidden(s, st, body, info, bits)) {
        stream_own(st)
            ->awaiting++; /* answered at once, as the child would: the stream ends as it would */
        session_stream_answered(s, st);
        return SESSION_OK;
    }
    if (session_asleep(s)) {
        enum session_status w = session_wake(s);
        if (w != SESSION_OK)
            return w;
    }
    if (info->has_crlf)
        jsonrpc_flatten(body, len);
    session_sleep_note(s, body, len, info);
    if (s->modern != NULL && session_modern_local(s, st, body, len, info)) {
        stream_own(st)->awaiting++; /* stateless child mode: answered by the gateway */
        session_stream_answered(s, st);
        return SESSION_OK;
    }
    relay_make_room(&s->r, 2 * sessions.cfg->max_inflight_per_session);
    uint64_t now_us = util_now_us();
    struct pending *p = pending_add(&s->r.pt, PENDING_TO_CHILD, body + info->id.off, info->id.len,
                                    info->method, stream_id(st), now_us / 1000u);
    p->start_us = now_us;
    s->stats->requests[0][session_class(info->method)]++;
    if (info->progress_token.len)
        pending_set_token(p, body + info->progress_token.off, info->progress_token.len);
    p->task = info->has_task;
    p->grants = bits;
    if (counted) /* given back when the entry is cancelled or deleted (pending.h) */
        quota_add(p->quota = session_calls_quota(s), QUOTA_CALLS, 1);
    if (audit_on() && audit_method(info->method))
        p->audit = audit_call_new(s->srv->name, s->id, body, len, info);
    if (strcmp(info->method, "initialize") == 0 && s->init_gw_id == 0) {
        s->init_gw_id = p->gw_id;
        session_note_client_info(s, body, info);
        session_modern_begin(s, body, info);
    }
    char idbuf[UTIL_U64_TEXT_MAX];
    size_t idlen = relay_id_text(p, idbuf);
    int sent = s->modern != NULL ? session_modern_send(s, p, body, len, info, idbuf, idlen)
                                 : SESSION_MODERN_PASS;
    if (sent == SESSION_MODERN_PASS)
        sent = trace == NULL
                   ? session_splice_send(s, body, len, info->id, idbuf, idlen)
                   : session_traced_send(s, p, body, len, info, trace, idbuf, idlen);
    if (sent == -1) {
        audit_call_drop(p->audit); /* refused (503): the refusal's record says so */
        p->audit = NULL;
        pending_del(&s->r.pt, p);
        return SESSION_E_BUSY;
    }
    stream_own(st)->awaiting++;
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
        p = pending_find_orig(&s->r.pt, PENDING_TO_CHILD, body + info->request_id.off,
                              info->request_id.len);
    if (p == NULL || p->state != PENDING_FORWARDED) {
        log_debug(s->id, "cancel for an unknown or finished request ignored");
        return;
    }
    if (p->gw_id == s->init_gw_id) {
        log_debug(s->id, "cancel of initialize ignored");
        return;
    }
    char idbuf[UTIL_U64_TEXT_MAX];
    size_t idlen = relay_id_text(p, idbuf);
    if (session_splice_send(s, body, len, info->request_id, idbuf, idlen) == -1)
        log_warn(s->id, "client cancel for %s not delivered: child stdin full", p->method);
    else
        log_info(s->id, "client cancel forwarded: method=%s child_id=%" PRIu64, p->method,
                 p->gw_id);
    relay_audit_cancel(p, RELAY_CANCEL_CLIENT);
    relay_mark_cancelled(&s->r, p);
    relay_count(s->r.stats, RELAY_CANCEL_CLIENT);
    /* The request's stream ends without a response. */
    session_stream_answered(s, session_stream_by_id(s, p->stream_id));
}

static enum session_status
session_client_answer(struct session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    struct pending *p =
        relay_answered(&s->r, PENDING_TO_CLIENT, body, info, &s->stats->late_dropped);
    if (p == NULL)
        return SESSION_OK;
    if (s->modern != NULL && session_modern_client_answer(s, p, body, info))
        return SESSION_OK; /* stateless child mode: an answer to an input round's question */
    /* Refused (stdin full): the entry stays, so the 503's retry still finds it. */
    if (session_splice_send(s, body, len, info->id, p->orig_id, p->orig_id_len) == -1)
        return SESSION_E_BUSY;
    pending_del(&s->r.pt, p);
    return SESSION_OK;
}

enum session_status
session_client_other(struct session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    if (s->state == SESSION_CLOSED || (s->u == NULL && !session_asleep(s)))
        return SESSION_E_GONE;
    session_touch(s);
    if (s->u == NULL) {
        /* Nothing of the client's is waited for by a sleeping child: a notification is dropped. */
        log_debug(s->id, "%s dropped: the child sleeps",
                  info->kind == JSONRPC_NOTIFICATION ? info->method : "an answer");
        return SESSION_OK;
    }
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
        if (session_modern_active(s))
            return SESSION_OK; /* stateless child mode: a stateless server takes no other */
        if (s->srv->policy != NULL && strcmp(info->method, "tools/call") == 0) {
            /* No id, so no answer: but a lax child might run it, unjudged. */
            log_debug(s->id, "tools/call without an id dropped (tool policy)");
            return SESSION_OK;
        }
        break;
    case JSONRPC_REQUEST:
        return SESSION_E_GONE; /* not reached: requests go through session_client_request */
    }
    struct iovec iov[2] = { { body, len }, { (void *)(uintptr_t) "\n", 1 } };
    return session_relay_send(s, iov, 2) == -1 ? SESSION_E_BUSY : SESSION_OK;
}

enum session_status
session_client_batch(struct session *s, struct stream *st, char *body, size_t len,
                     const struct jsonrpc_span *el, const struct jsonrpc_info *info, size_t n,
                     struct policy_grants grants, struct trace_in *trace)
{
    if (s->state == SESSION_CLOSED || (s->u == NULL && !session_asleep(s)))
        return SESSION_E_GONE;
    if (session_asleep(s)) {
        enum session_status w = session_wake(s);
        if (w != SESSION_OK)
            return w;
    }
    /* Toward stdin it is all or nothing: room for every element (ids may grow) or a 503. */
    size_t need = len + n * (24 + (trace != NULL ? (size_t)TRACE_EDIT_BUF : 0));
    if (upstream_queued_bytes(s->u) + need > sessions.cfg->stdin_queue_bytes)
        upstream_write_now(s->u); /* what this turn's batch holds back goes to the pipe first */
    if (upstream_queued_bytes(s->u) + need > sessions.cfg->stdin_queue_bytes)
        return SESSION_E_BUSY;
    if (st != NULL)
        stream_own(st)
            ->awaiting++; /* the batch's own hold: a request answered at once must not end st */
    for (size_t i = 0; i < n; i++) {
        char *m = body + el[i].off;
        if (info[i].kind != JSONRPC_REQUEST) {
            if (session_client_other(s, m, el[i].len, &info[i]) != SESSION_OK)
                log_warn(s->id, "batch element %zu not delivered", i);
            continue;
        }
        enum session_status rc =
            session_client_request(s, st, m, el[i].len, &info[i], grants, trace);
        if (rc != SESSION_OK) {
            /* Each request of a batch gets its own answer: this one an error, at once. */
            size_t elen;
            char *e = jsonrpc_error_new(m + info[i].id.off, info[i].id.len, JSONRPC_INVALID_REQUEST,
                                        relay_status_text(rc), &elen);
            struct iovec iov = { e, elen };
            session_push(s, st, &iov, 1);
            free(e);
        }
    }
    session_stream_answered(s, st); /* ends st when every request was answered or refused */
    return SESSION_OK;
}
