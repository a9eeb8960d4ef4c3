/* SPDX-License-Identifier: MIT */
/*
 * What the pools show operators: their series for /metrics and their part of the admin view
 * (every pool, child and in-flight entry), bounded like the sessions' part: a child is shown whole
 * or left out and counted.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"
#include "pool_int.h"

static const char *const pool_eras[] = { "auto", "modern", "legacy" };

/* A bounded writer: once a write does not fit, it is full and writes nothing more. */
struct pool_out {
    struct buf b;
    bool full;
};

static void PRINTF(2, 3) pool_put(struct pool_out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    o->full = buf_vprintf(&o->b, fmt, ap) == -1;
    va_end(ap);
}

static void
pool_put_raw(struct pool_out *o, const char *p, size_t n)
{
    if (!o->full)
        o->full = buf_append(&o->b, p, n) == -1;
}

static void
pool_admin_child(struct pool_out *o, const struct pool_child *c, uint64_t now)
{
    static const char *const states[] = { "starting", "ready", "gone" };
    pool_put(o, "{\"tag\":");
    size_t n;
    char *q = jsonrpc_quote(c->tag, &n);
    pool_put_raw(o, q, n);
    free(q);
    pool_put(o, ",\"pid\":%d,\"state\":\"%s\",\"idle_ms\":%" PRIu64 ",\"inflight\":[",
             c->u != NULL ? (int)upstream_pid(c->u) : 0, states[c->state], now - c->idle_since_ms);
    bool first = true;
    for (const struct pending *p = c->pt.head; p != NULL; p = p->next) {
        if (p->gw_id == c->start_id)
            continue; /* the gateway's own probe or initialize */
        pool_put(o, "%s{\"method\":", first ? "" : ",");
        first = false;
        q = jsonrpc_quote(p->method, &n);
        pool_put_raw(o, q, n);
        free(q);
        pool_put(o, ",\"id\":");
        pool_put_raw(o, p->orig_id, p->orig_id_len);
        pool_put(o, ",\"child_id\":%" PRIu64 ",\"state\":\"%s\",\"age_ms\":%" PRIu64, p->gw_id,
                 p->state == PENDING_FORWARDED ? "forwarded" : "cancelled", now - p->start_ms);
        if (p->token != NULL) {
            pool_put(o, ",\"progress_token\":");
            pool_put_raw(o, p->token, p->token_len);
        }
        pool_put(o, "}");
    }
    pool_put(o, "]}");
}

int
pool_admin_json(struct buf *b, size_t max)
{
    struct pool_out o = { .full = false };
    buf_init(&o.b, max);
    uint64_t now = util_now_ms();
    size_t omitted = 0;
    pool_put(&o, "[");
    for (const struct pool *p = pools.pools; p != NULL; p = p->next) {
        pool_put(&o,
                 "%s{\"server\":\"%s\",\"era\":\"%s\",\"retired\":%s,\"queued\":%zu,"
                 "\"children\":[",
                 p == pools.pools ? "" : ",", p->name, pool_eras[p->era],
                 p->retired ? "true" : "false", p->queued);
        bool first = true;
        for (const struct pool_child *c = p->children; c != NULL; c = c->next) {
            /* Each child whole or not at all (room is kept for the closing brackets). */
            size_t used = buf_used(&o.b);
            struct pool_out one = { .full = false };
            buf_init(&one.b, used + 256 < max ? max - used - 256 : 0);
            pool_put(&one, "%s", first ? "" : ",");
            pool_admin_child(&one, c, now);
            if (!one.full && !o.full) {
                pool_put_raw(&o, buf_head(&one.b), buf_used(&one.b));
                first = false;
            } else {
                omitted++;
            }
            buf_clear(&one.b);
        }
        pool_put(&o, "]}");
    }
    pool_put(&o, "]");
    int rc = o.full ? -1 : (int)(omitted > 0);
    if (!o.full && buf_append(b, buf_head(&o.b), buf_used(&o.b)) == -1)
        rc = -1;
    buf_clear(&o.b);
    return rc;
}

void
pool_metrics(struct buf *b)
{
    char labels[160];
    const struct pool_counters *k = &pools.ctr;
    metrics_family(b, "mcpgw_pool_children", "gauge",
                   "Pool children (2026-07-28 requests) by server and state.");
    for (const struct pool *p = pools.pools; p != NULL; p = p->next) {
        size_t ready = 0;
        for (const struct pool_child *c = p->children; c != NULL; c = c->next)
            ready += c->state == POOL_CHILD_READY;
        snprintf(labels, sizeof(labels), "server=\"%s\",state=\"ready\"", p->name);
        metrics_sample(b, "mcpgw_pool_children", labels, ready);
        snprintf(labels, sizeof(labels), "server=\"%s\",state=\"starting\"", p->name);
        metrics_sample(b, "mcpgw_pool_children", labels, p->n_starting);
    }
    metrics_family(b, "mcpgw_pool_inflight_requests", "gauge",
                   "2026-07-28 requests in flight or waiting for a pool child.");
    metrics_sample(b, "mcpgw_pool_inflight_requests", NULL, pool_inflight());
    metrics_family(b, "mcpgw_pool_requests_total", "counter", "2026-07-28 requests accepted.");
    metrics_sample(b, "mcpgw_pool_requests_total", NULL, k->requests);
    metrics_family(b, "mcpgw_pool_cancels_total", "counter",
                   "2026-07-28 requests ended before their answer, by reason.");
    static const char *const why[] = { "client_closed", "timeout", "child_ended", "shutdown" };
    for (size_t i = 0; i < ARRAY_LEN(why); i++) {
        snprintf(labels, sizeof(labels), "reason=\"%s\"", why[i]);
        metrics_sample(b, "mcpgw_pool_cancels_total", labels, k->cancels[i]);
    }
    metrics_family(b, "mcpgw_pool_messages_dropped_total", "counter",
                   "Pool children's messages not delivered, by reason.");
    metrics_sample(b, "mcpgw_pool_messages_dropped_total", "reason=\"late\"", k->late_dropped);
    metrics_sample(b, "mcpgw_pool_messages_dropped_total", "reason=\"unattributed\"",
                   k->unattributed);
    metrics_sample(b, "mcpgw_pool_messages_dropped_total", "reason=\"log_level\"",
                   k->logs_filtered);
    metrics_sample(b, "mcpgw_pool_messages_dropped_total", "reason=\"invalid\"",
                   k->child_lines_invalid);
    metrics_family(b, "mcpgw_pool_child_requests_refused_total", "counter",
                   "Requests from pool children answered with an error (not bridged).");
    metrics_sample(b, "mcpgw_pool_child_requests_refused_total", NULL, k->child_requests);
    metrics_family(b, "mcpgw_pool_child_events_total", "counter", "Pool children's lives.");
    metrics_sample(b, "mcpgw_pool_child_events_total", "event=\"started\"", k->spawned);
    metrics_sample(b, "mcpgw_pool_child_events_total", "event=\"start_failed\"", k->start_failed);
    metrics_sample(b, "mcpgw_pool_child_events_total", "event=\"failed\"", k->crashed);
    metrics_sample(b, "mcpgw_pool_child_events_total", "event=\"idle_stopped\"", k->idle_stopped);
    metrics_sample(b, "mcpgw_pool_child_events_total", "event=\"refused_restart\"",
                   k->refused_restart);
}
