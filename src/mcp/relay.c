/* SPDX-License-Identifier: MIT */
/*
 * The conversation with one child that sessions and pool children share (relay.h): the table,
 * the splice of minted ids, cancels at most once, timers owned by their entry, the ceiling of
 * lingering entries, errors to the child, the texts of refusals and the tool policy's refusal. No
 * routing to clients here, and no knowledge of who owns the child: the owner writes through its
 * send callback and ends expired requests itself (ops->expired). A child's lines: relay_line.c.
 */
#include "relay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

/* The gateway's own tasks/cancel (relay_task_cancel): a string id, which no minted id can be. */
#define RELAY_TASK_CANCEL_ID "mcpgw-task-"

static uint64_t relay_task_cancels; /* sent, over every child: each id its own */

/* --- reasons and counters -------------------------------------------------------------------- */

const struct relay_reason_info relay_reasons[RELAY_CANCEL_N] = {
    [RELAY_CANCEL_CLIENT] = { "client", "client" },
    [RELAY_CANCEL_DISCONNECT] = { "client disconnected", "client_disconnected" },
    [RELAY_CANCEL_TIMEOUT] = { "request timed out", "timeout" },
    [RELAY_CANCEL_DELETED] = { "session deleted", "deleted" },
    [RELAY_CANCEL_EXPIRED] = { "session expired", "expired" },
    [RELAY_CANCEL_SHUTDOWN] = { "gateway shutting down", "shutdown" },
    [RELAY_CANCEL_RELOAD] = { "configuration reloaded", "reload" },
    [RELAY_CANCEL_HOLD] = { "input not provided in time", "input_not_provided" },
    [RELAY_CANCEL_CHILD] = { "upstream server ended", "child_ended" },
    [RELAY_CANCEL_ADMIN] = { "ended by the operator", "admin" },
    [RELAY_CANCEL_OTHER] = { "other", "other" },
};

struct relay_stats {
    struct metrics_row row; /* its server's name, the next row */
    uint64_t cancels[RELAY_CANCEL_N];
    uint64_t to_client; /* the child cancelled a request it had sent the client */
    uint64_t fails;     /* starts failed in a row */
    uint64_t fail_ms;   /* when the last one failed */
    bool broken;        /* its children serve nothing the gateway serves */
    bool drained;       /* the operator drained it: no new session or stateless request */
    bool served;        /* a child of it completed its start (initialize, or the pool's probe) */
    char why[160];      /* the last failure */
    char missing[320];  /* why its command cannot run (the loader's check), or "" */
};

static struct metrics_row *relay_rows; /* struct relay_stats rows */

struct relay_stats *
relay_stats_of(const char *server)
{
    return metrics_row_of(&relay_rows, server, sizeof(struct relay_stats));
}

const struct relay_stats *
relay_stats_next(const struct relay_stats *st)
{
    return st == NULL ? (const struct relay_stats *)(void *)relay_rows : METRICS_ROW_NEXT(st);
}

const char *
relay_stats_name(const struct relay_stats *st)
{
    return st->row.name;
}

void
relay_count(struct relay_stats *st, enum relay_reason why)
{
    st->cancels[why]++;
}

void
relay_count_to_client(struct relay_stats *st)
{
    st->to_client++;
}

void
relay_start_ok(struct relay_stats *st)
{
    st->fails = 0;
    st->broken = false;
    st->served = true;
    st->why[0] = '\0';
}

bool
relay_served(const struct relay_stats *st)
{
    return st->served;
}

bool
relay_settled(const struct relay_stats *st)
{
    return st->served || st->fails > 0 || st->broken || st->drained || st->missing[0] != '\0';
}

bool
relay_missing(const struct relay_stats *st)
{
    return st->missing[0] != '\0';
}

void
relay_set_missing(struct relay_stats *st, const char *why)
{
    snprintf(st->missing, sizeof(st->missing), "%s", why != NULL ? why : "");
}

void
relay_start_failed(struct relay_stats *st, const char *why, bool broken)
{
    st->fails++;
    st->fail_ms = util_now_ms();
    st->broken |= broken;
    snprintf(st->why, sizeof(st->why), "%s", why);
}

void
relay_set_drained(struct relay_stats *st, bool drained)
{
    st->drained = drained;
}

bool
relay_drained(const struct relay_stats *st)
{
    return st->drained;
}

enum relay_health
relay_health_of(const struct relay_stats *st, uint64_t budget, uint64_t now_ms, const char **why)
{
    if (st->drained) {
        *why = "drained by the operator: no new sessions or stateless requests";
        return RELAY_HEALTH_DRAINED;
    }
    if (st->missing[0] != '\0') {
        *why = st->missing;
        return RELAY_HEALTH_BROKEN;
    }
    *why = st->why;
    if (st->broken || (st->fails >= budget && now_ms - st->fail_ms < 60000))
        return RELAY_HEALTH_BROKEN;
    if (!st->served) {
        if (st->fails == 0)
            *why = "no child of it has started yet";
        return RELAY_HEALTH_STARTING;
    }
    return st->fails > 0 ? RELAY_HEALTH_FAILING : RELAY_HEALTH_OK;
}

bool
relay_health_serves(enum relay_health h)
{
    return h == RELAY_HEALTH_OK || h == RELAY_HEALTH_FAILING;
}

const char *
relay_health_text(enum relay_health h)
{
    static const char *const names[RELAY_HEALTH_N] = { "ok", "failing", "broken", "drained",
                                                       "starting" };
    return names[h];
}

uint64_t
relay_cancels(enum relay_reason why)
{
    uint64_t n = 0;
    for (const struct relay_stats *st = (const struct relay_stats *)(void *)relay_rows; st != NULL;
         st = METRICS_ROW_NEXT(st))
        n += st->cancels[why];
    return n;
}

uint64_t
relay_cancels_to_client(void)
{
    uint64_t n = 0;
    for (const struct relay_stats *st = (const struct relay_stats *)(void *)relay_rows; st != NULL;
         st = METRICS_ROW_NEXT(st))
        n += st->to_client;
    return n;
}

void
relay_metrics(struct buf *b)
{
    char labels[256];
    metrics_family(b, "mcpgw_cancels_total", "counter",
                   "Requests the gateway ended before their answer, by server and reason (a "
                   "notifications/cancelled went to the child unless child_ended or client, the "
                   "client's own, forwarded), and the children's cancels of their own requests.");
    for (const struct relay_stats *st = (const struct relay_stats *)(void *)relay_rows; st != NULL;
         st = METRICS_ROW_NEXT(st)) {
        for (size_t r = 0; r < RELAY_CANCEL_N; r++) {
            snprintf(labels, sizeof(labels), "server=\"%s\",direction=\"to_child\",reason=\"%s\"",
                     st->row.name, relay_reasons[r].label);
            metrics_sample(b, "mcpgw_cancels_total", labels, st->cancels[r]);
        }
        snprintf(labels, sizeof(labels), "server=\"%s\",direction=\"to_client\",reason=\"child\"",
                 st->row.name);
        metrics_sample(b, "mcpgw_cancels_total", labels, st->to_client);
    }
}

void
relay_module_free(void)
{
    metrics_rows_free(&relay_rows);
}

void
relay_init(struct relay *r, struct loop *l, const char *tag, const char *server,
           relay_send_cb *send, const struct relay_ops *ops, void *arg)
{
    pending_init(&r->pt);
    r->l = l;
    r->tag = tag;
    r->stats = relay_stats_of(server);
    r->invalid_logged = 0;
    r->send = send;
    r->send_control = NULL;
    r->ops = ops;
    r->arg = arg;
    r->batches = r->minted_tokens = r->ended = false;
    r->invalid = r->late = r->unattributed = NULL;
}

void
relay_clear(struct relay *r)
{
    pending_clear(&r->pt);
}

/* --- splicing ------------------------------------------------------------------------------ */

int
relay_splice(const char *msg, size_t len, struct relay_edit *ed, int n, struct iovec *iov)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ed[j].off < ed[j - 1].off; j--) {
            struct relay_edit t = ed[j];
            ed[j] = ed[j - 1];
            ed[j - 1] = t;
        }
    int k = 0;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        iov[k++] = (struct iovec){ (void *)(uintptr_t)(msg + at), ed[i].off - at };
        iov[k++] = (struct iovec){ (void *)(uintptr_t)ed[i].with, ed[i].with_len };
        at = ed[i].off + ed[i].len;
    }
    iov[k++] = (struct iovec){ (void *)(uintptr_t)(msg + at), len - at };
    return k;
}

int
relay_send_spliced(struct relay *r, const char *msg, size_t len, struct relay_edit *ed, int n)
{
    struct iovec iov[2 * RELAY_EDITS_MAX + 2];
    int k = relay_splice(msg, len, ed, n, iov);
    iov[k++] = (struct iovec){ (void *)(uintptr_t) "\n", 1 };
    return r->send(r->arg, iov, k);
}

/* --- the table ----------------------------------------------------------------------------- */

void
relay_make_room(struct relay *r, size_t max)
{
    for (struct pending *p = r->pt.head; p != NULL && r->pt.count >= max;) {
        struct pending *next = p->next;
        if (p->state == PENDING_CANCELLED)
            pending_del(&r->pt, p);
        p = next;
    }
}

size_t
relay_id_text(const struct pending *p, char *buf)
{
    return util_u64_text(p->gw_id, buf);
}

/* --- cancels and errors ---------------------------------------------------------------------- */

void
relay_mark_cancelled(struct relay *r, struct pending *p)
{
    pending_cancel(&r->pt, p);
    pending_uncount(p); /* no longer in flight for its principal */
    p->cancelled_ms = util_now_ms();
    loop_timer_del(p->timer);
    p->timer = NULL;
}

void
relay_audit_cancel(struct pending *p, enum relay_reason why)
{
    if (p->audit == NULL)
        return;
    audit_call_cancel(p->audit, relay_reasons[why].label);
    audit_call_end(p->audit);
    p->audit = NULL;
}

bool
relay_cancel(struct relay *r, struct pending *p, enum relay_reason why)
{
    const char *reason = relay_reasons[why].text;
    if (p->state != PENDING_FORWARDED)
        return false;
    relay_audit_cancel(p, why);
    if (p->task) {
        /* Never notifications/cancelled for a task-augmented request. */
        log_info(r->tag, "task-augmented %s not cancelled (%s): tasks/cancel is the client's",
                 p->method, reason);
        relay_mark_cancelled(r, p);
        return false;
    }
    char idbuf[24];
    size_t idlen = relay_id_text(p, idbuf);
    size_t len;
    char *m = jsonrpc_cancel_new(idbuf, idlen, reason, &len);
    struct iovec iov[2] = { { m, len }, { (void *)(uintptr_t) "\n", 1 } };
    relay_send_cb *send = r->send_control != NULL ? r->send_control : r->send;
    if (send(r->arg, iov, 2) == -1)
        log_warn(r->tag, "cancel for %s (%s) not delivered: child stdin full or closed", p->method,
                 reason);
    else
        log_fields(LOG_INFO, r->tag,
                   (const struct log_field[]){ { "method", p->method, false },
                                               { "reason", reason, false } },
                   2, "cancel sent to child: method=%s child_id=%" PRIu64 " reason=\"%s\"",
                   p->method, p->gw_id, reason);
    free(m);
    relay_mark_cancelled(r, p);
    relay_count(r->stats, why);
    return true;
}

void
relay_task_cancel(struct relay *r, const char *task_raw, size_t raw_len)
{
    char head[96];
    int n = snprintf(head, sizeof head,
                     "{\"jsonrpc\":\"2.0\",\"id\":\"" RELAY_TASK_CANCEL_ID "%" PRIu64
                     "\",\"method\":\"tasks/cancel\",\"params\":{\"taskId\":",
                     ++relay_task_cancels);
    struct iovec iov[3] = {
        { head, (size_t)n },
        { (void *)(uintptr_t)task_raw, raw_len },
        { (void *)(uintptr_t) "}}\n", 3 },
    };
    relay_send_cb *send = r->send_control != NULL ? r->send_control : r->send;
    if (send(r->arg, iov, 3) == -1)
        log_warn(r->tag, "tasks/cancel not delivered: child stdin full or closed");
}

bool
relay_task_cancel_answer(const char *line, const struct jsonrpc_info *info)
{
    return info->id_type == JSONRPC_ID_STRING && info->id.len > sizeof RELAY_TASK_CANCEL_ID
           && memcmp(line + info->id.off + 1, RELAY_TASK_CANCEL_ID, sizeof RELAY_TASK_CANCEL_ID - 1)
                  == 0;
}

void
relay_error_to_child(struct relay *r, const char *id, size_t idlen, int code, const char *message)
{
    size_t len;
    char *e = jsonrpc_error_new(id, idlen, code, message, &len);
    struct iovec iov[2] = { { e, len }, { (void *)(uintptr_t) "\n", 1 } };
    if (r->send(r->arg, iov, 2) == -1)
        log_warn(r->tag, "error answer to the child's request not delivered");
    free(e);
}

/* --- refusals --------------------------------------------------------------------------------- */

const char *
relay_status_text(unsigned status)
{
    switch ((enum relay_status)status) {
    case RELAY_OK:
        return "ok";
    case RELAY_E_GONE:
        return "Session not found";
    case RELAY_E_BUSY:
        return "upstream server is not reading its input; try again later";
    case RELAY_E_TOO_MANY:
        return "too many requests in flight for this session";
    case RELAY_E_DUPLICATE:
        return "a request with this id is already in flight";
    case RELAY_E_CONFLICT:
        return "this stream is already being read by another connection";
    case RELAY_E_EVICTED:
        return "Last-Event-ID names no event this session can still replay";
    case RELAY_E_ID_TOO_LONG:
        return "request id or progress token longer than max_id_bytes";
    case RELAY_E_PRINCIPAL_CALLS:
        return "too many requests in flight for this principal (max_inflight_per_principal)";
    case RELAY_E_FULL:
        return "too many requests in flight for this server (pool_child_max_inflight)";
    case RELAY_E_UNAVAILABLE:
        return "upstream server cannot be started now; try again later";
    case RELAY_E_DRAINING:
        return "gateway shutting down: no new requests";
    case RELAY_E_DRAINED:
        return "server drained by the operator: no new requests";
    case RELAY_E_NO_METHOD:
        return "Method not found";
    case RELAY_E_BAD_STATE:
        return "requestState refused";
    case RELAY_E_PRINCIPAL:
        return "too many requests for this principal";
    case RELAY_E_CREDENTIALS:
        return "no credentials for this principal on this server";
    case RELAY_E_CREDENTIALS_BAD:
        return "the credentials of this principal cannot be read (the gateway's log says why)";
    }
    return "internal error";
}

bool
relay_refuse_hidden(const struct policy *pol, uint64_t bits, const char *body,
                    const struct jsonrpc_info *info, const char *principal, const char *server,
                    const char *session, char *message)
{
    char name[POLICY_NAME_MAX + 1];
    const char *scope = NULL;
    enum policy_verdict v = policy_judge_call(pol, bits, body, info, name, sizeof(name), &scope);
    if (v == POLICY_VISIBLE)
        return false;
    if (name[0] != '\0')
        snprintf(message, RELAY_REFUSAL_MAX, "Unknown tool: %s", name);
    else
        snprintf(message, RELAY_REFUSAL_MAX, "Unknown tool");
    policy_count_denied(pol);
    const char *sep = scope != NULL ? ": " : "";
    if (scope == NULL)
        scope = "";
    if (audit_on()) {
        char detail[POLICY_NAME_MAX + 64];
        snprintf(detail, sizeof detail, "%s%s%s", policy_verdict_text(v), sep, scope);
        audit_event("refused_policy", principal, server, session, JSONRPC_INVALID_PARAMS, detail,
                    body, info);
    }
    if (principal == NULL)
        principal = "-";
    if (session != NULL)
        log_debug(session, "tools/call of %s refused for %s: %s%s%s", name, principal,
                  policy_verdict_text(v), sep, scope);
    else
        log_debug(NULL, "pool %s: tools/call of %s refused for %s: %s%s%s", server, name,
                  principal, policy_verdict_text(v), sep, scope);
    return true;
}

/* --- the policy hook ------------------------------------------------------------------------- */

enum relay_filter
relay_filter_tools(const char *tag, const struct policy *pol, uint64_t bits, const char **line,
                   size_t *len, const struct jsonrpc_info **info, struct jsonrpc_info *finfo,
                   char **copy)
{
    size_t dropped = 0;
    const char *err = NULL;
    *copy = policy_filter_tools(pol, bits, *line, *len, *info, len, &dropped, &err);
    if (*copy == NULL && err == NULL)
        return RELAY_FILTER_ASIS;
    if (*copy == NULL || jsonrpc_scan(*copy, *len, finfo, NULL) != JSONRPC_OK) {
        log_warn(tag, "child's tools/list answer refused: %s (tool policy)",
                 err != NULL ? err : "filtered answer does not scan");
        free(*copy);
        *copy = NULL;
        return RELAY_FILTER_REFUSED;
    }
    policy_count_hidden(pol, dropped);
    log_debug(tag, "tools/list answer: %zu tools hidden by the tool policy", dropped);
    *line = *copy;
    *info = finfo;
    return RELAY_FILTER_COPY;
}

/* --- timeouts -------------------------------------------------------------------------------- */

static void
relay_timer_fired(void *arg)
{
    struct pending *p = arg;
    p->timer = NULL; /* the loop frees a timer before it fires */
    struct relay *r = p->relay;
    if (p->state == PENDING_FORWARDED && !r->ended && r->ops->expired != NULL)
        r->ops->expired(r->arg, p);
}

void
relay_arm_timeout(struct relay *r, struct pending *p, uint64_t timeout_ms, uint64_t max_ms)
{
    if (timeout_ms == 0)
        return;
    uint64_t now = util_now_ms();
    uint64_t deadline = now + timeout_ms;
    if (max_ms > 0 && deadline > p->start_ms + max_ms)
        deadline = p->start_ms + max_ms;
    loop_timer_del(p->timer);
    p->deadline_ms = deadline;
    p->relay = r;
    p->timer = loop_timer_add(r->l, deadline > now ? deadline - now : 0, relay_timer_fired, p);
}
