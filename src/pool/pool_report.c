/* SPDX-License-Identifier: MIT */
/*
 * What the pools show operators: their series for /metrics and their part of the admin view
 * (every pool, child and in-flight entry), bounded like the sessions' part: a child is shown whole
 * or left out and counted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "pool_int.h"

void
pool_caller_note(struct pool_call *call, const char *body, const struct jsonrpc_info *info,
                 const struct pool_meta *meta)
{
    struct pool_caller *w = &call->caller;
    (void)util_utf8_copy(w->principal, sizeof(w->principal),
                         meta->principal != NULL ? meta->principal : "");
    snprintf(w->client, sizeof(w->client), "%s", meta->client != NULL ? meta->client : "");
    struct jsonrpc_span sp = info->name.len > 0 ? info->name : info->uri;
    if (sp.len > 0)
        (void)jsonrpc_text_at(body, sp, w->name, sizeof(w->name));
    w->since_unix_ms = util_now_unix_ms();
}

/* The caller of an entry's call: client data, cut when noted, escaped here. */
static void
pool_admin_caller(struct buf_out *o, const struct pool_caller *w)
{
    char at[UTIL_RFC3339_MAX];
    util_rfc3339(w->since_unix_ms, at);
    buf_out_printf(o, ",\"principal\":");
    jsonrpc_put_quoted(o, w->principal);
    buf_out_printf(o, ",\"client\":");
    if (w->client[0] != '\0')
        jsonrpc_put_quoted(o, w->client);
    else
        buf_out_printf(o, "null");
    buf_out_printf(o, ",\"name\":");
    if (w->name[0] != '\0')
        jsonrpc_put_quoted(o, w->name);
    else
        buf_out_printf(o, "null");
    buf_out_printf(o, ",\"started_at\":\"%s\",\"started_unix_ms\":%" PRIu64, at, w->since_unix_ms);
}

static void
pool_admin_child(struct buf_out *o, const struct pool_child *c, uint64_t now)
{
    static const char *const states[] = { "starting", "ready", "gone" };
    buf_out_printf(o, "{\"tag\":");
    jsonrpc_put_quoted(o, c->tag);
    buf_out_printf(o, ",\"pid\":%d,\"state\":\"%s\",\"idle_ms\":%" PRIu64 ",\"inflight\":[",
                   c->u != NULL ? (int)upstream_pid(c->u) : 0, states[c->state],
                   now - c->idle_since_ms);
    bool first = true;
    for (const struct pending *p = c->r.pt.head; p != NULL; p = p->next) {
        if (p->gw_id == c->start_id)
            continue; /* the gateway's own probe or initialize */
        buf_out_printf(o, "%s{\"method\":", first ? "" : ",");
        first = false;
        jsonrpc_put_quoted(o, p->method);
        buf_out_printf(o, ",\"id\":");
        buf_out_raw(o, p->orig_id, p->orig_id_len);
        {
            const struct pool_call *call = p->owner;
            const char *state = p->state != PENDING_FORWARDED ? "cancelled"
                                : call != NULL && call->held  ? "held"
                                                              : "forwarded";
            buf_out_printf(o, ",\"child_id\":%" PRIu64 ",\"state\":\"%s\",\"age_ms\":%" PRIu64,
                           p->gw_id, state, now - p->start_ms);
            if (call != NULL && call->round > 0)
                buf_out_printf(o, ",\"input_rounds\":%u", call->round);
            if (call != NULL)
                pool_admin_caller(o, &call->caller);
        }
        if (p->token != NULL) {
            buf_out_printf(o, ",\"progress_token\":");
            buf_out_raw(o, p->token, p->token_len);
        }
        buf_out_printf(o, "}");
    }
    buf_out_printf(o, "]}");
}

int
pool_admin_json(struct buf *b, size_t max)
{
    struct buf_out o = { .full = false };
    buf_init(&o.b, max);
    uint64_t now = util_now_ms();
    size_t omitted = 0;
    buf_out_printf(&o, "[");
    for (const struct pool *p = pools.pools; p != NULL; p = p->next) {
        size_t listeners = 0, subs = 0;
        for (const struct pool_listen *l = p->listeners; l != NULL; l = l->next)
            listeners++;
        for (const struct pool_sub *sub = p->subs; sub != NULL; sub = sub->next)
            subs++;
        buf_out_printf(&o,
                       "%s{\"server\":\"%s\",\"era\":\"%s\",\"retired\":%s,\"queued\":%zu,"
                       "\"held\":%zu,\"listeners\":%zu,\"resource_subscriptions\":%zu,"
                       "\"pooled_sessions\":%zu,\"principal\":",
                       p == pools.pools ? "" : ",", p->name, config_era_words[p->era],
                       p->retired ? "true" : "false", p->queued, pool_held_in(p), listeners, subs,
                       p->retired || p->key != NULL ? (size_t)0 : p->row->sessions_open);
        /* A principal pool's (its children serve that principal alone), as sessions show owners. */
        if (p->key != NULL)
            jsonrpc_put_quoted(&o, p->key->principal);
        else
            buf_out_printf(&o, "null");
        buf_out_printf(&o, ",\"children\":[");
        bool first = true;
        for (const struct pool_child *c = p->children; c != NULL; c = c->next) {
            /* Each child whole or not at all (room is kept for the closing brackets). */
            struct buf_out one;
            buf_out_item_open(&o, &one, max, 256);
            buf_out_printf(&one, "%s", first ? "" : ",");
            pool_admin_child(&one, c, now);
            if (buf_out_item_close(&o, &one))
                first = false;
            else
                omitted++;
        }
        buf_out_printf(&o, "]}");
    }
    buf_out_printf(&o, "]");
    int rc = o.full ? -1 : (int)(omitted > 0);
    if (!o.full && buf_append(b, buf_head(&o.b), buf_used(&o.b)) == -1)
        rc = -1;
    buf_clear(&o.b);
    return rc;
}

struct pool_server *
pool_server_of(const char *name)
{
    return metrics_row_of(&pools.servers, name, sizeof(struct pool_server));
}

void
pool_servers_free(void)
{
    metrics_rows_free(&pools.servers);
}

/* The first server's row. */
static const struct pool_server *
pool_rows(void)
{
    return (const struct pool_server *)(void *)pools.servers;
}

struct pool_counters
pool_counters_total(void)
{
    struct pool_counters t = { 0 };
    for (const struct pool_server *r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        const struct pool_counters *k = &r->ctr;
        t.requests += k->requests;
        t.answered += k->answered;
        t.late_dropped += k->late_dropped;
        t.slow_dropped += k->slow_dropped;
        t.unattributed += k->unattributed;
        t.logs_filtered += k->logs_filtered;
        t.child_requests += k->child_requests;
        t.child_lines_invalid += k->child_lines_invalid;
        t.spawned += k->spawned;
        t.start_failed += k->start_failed;
        t.crashed += k->crashed;
        t.idle_stopped += k->idle_stopped;
        t.refused_restart += k->refused_restart;
        t.rounds += k->rounds;
        t.asks_bridged += k->asks_bridged;
        t.held_expired += k->held_expired;
        t.states_refused += k->states_refused;
        t.principal_stopped += k->principal_stopped;
    }
    return t;
}

/* A server's gauges over its pools, old and new (a scrape's work, not the requests'). */
struct pool_gauges {
    size_t ready, starting, retired, inflight, held;
    size_t principals; /* principal pools (per-principal credentials) with a child */
};

static struct pool_gauges
pool_gauges_of(const char *name)
{
    struct pool_gauges g = { 0 };
    for (const struct pool *q = pools.pools; q != NULL; q = q->next) {
        if (strcmp(q->name, name) != 0)
            continue;
        for (const struct pool_child *c = q->children; c != NULL; c = c->next)
            g.ready += c->state == POOL_CHILD_READY;
        g.starting += q->n_starting;
        g.retired += q->retired;
        g.inflight += pool_inflight_in(q);
        g.held += pool_held_in(q);
        g.principals += q->key != NULL && q->children != NULL;
    }
    return g;
}

/* One series per server of a counter family, with the labels after the server's: extra. */
static void
pool_sample(struct buf *b, const char *name, const struct pool_server *r, const char *extra,
            uint64_t v)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "server=\"%s\"%s%s", r->row.name, extra[0] ? "," : "", extra);
    metrics_sample(b, name, labels, v);
}

void
pool_metrics(struct buf *b)
{
    char labels[256];
    const struct pool_server *r;
    for (size_t i = 0; pools.cfg != NULL && i < pools.cfg->n_servers; i++)
        (void)pool_server_of(pools.cfg->servers[i].name); /* its series before any traffic */
    /*
     * One series per server name: after a reload, a retired pool of that name (still serving what
     * it had) and its successor are summed, or the scrape would hold the same series twice. A
     * server the reload removed keeps its series (its counters stay, its gauges go to 0).
     */
    metrics_family(b, "mcpgw_pool_children", "gauge",
                   "Pool children (stateless requests) by server and state, those of pools of "
                   "older configurations included.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        struct pool_gauges g = pool_gauges_of(r->row.name);
        pool_sample(b, "mcpgw_pool_children", r, "state=\"ready\"", g.ready);
        pool_sample(b, "mcpgw_pool_children", r, "state=\"starting\"", g.starting);
    }
    metrics_family(b, "mcpgw_pools_retired", "gauge",
                   "Pools of older configurations (SIGHUP) still ending what they had, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pools_retired", r, "", pool_gauges_of(r->row.name).retired);
    metrics_family(b, "mcpgw_pool_inflight_requests", "gauge",
                   "Stateless requests in flight or waiting for a pool child, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_inflight_requests", r, "", pool_gauges_of(r->row.name).inflight);
    metrics_family(b, "mcpgw_pool_requests_total", "counter",
                   "Stateless requests accepted, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_requests_total", r, "", r->ctr.requests);
    metrics_family(b, "mcpgw_pool_messages_dropped_total", "counter",
                   "Pool children's messages not delivered, by server and reason.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        const struct pool_counters *k = &r->ctr;
        pool_sample(b, "mcpgw_pool_messages_dropped_total", r, "reason=\"late\"", k->late_dropped);
        pool_sample(b, "mcpgw_pool_messages_dropped_total", r, "reason=\"slow_reader\"",
                    k->slow_dropped);
        pool_sample(b, "mcpgw_pool_messages_dropped_total", r, "reason=\"unattributed\"",
                    k->unattributed);
        pool_sample(b, "mcpgw_pool_messages_dropped_total", r, "reason=\"log_level\"",
                    k->logs_filtered);
        pool_sample(b, "mcpgw_pool_messages_dropped_total", r, "reason=\"invalid\"",
                    k->child_lines_invalid);
    }
    metrics_family(
        b, "mcpgw_pool_child_requests_total", "counter",
        "Requests from legacy pool children to the client (elicitation, sampling, roots), "
        "by server and outcome.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        pool_sample(b, "mcpgw_pool_child_requests_total", r, "outcome=\"bridged\"",
                    r->ctr.asks_bridged);
        pool_sample(b, "mcpgw_pool_child_requests_total", r, "outcome=\"refused\"",
                    r->ctr.child_requests);
    }
    metrics_family(b, "mcpgw_pool_input_rounds_total", "counter",
                   "input_required answers sent for legacy children's requests, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_input_rounds_total", r, "", r->ctr.rounds);
    metrics_family(b, "mcpgw_pool_held_calls", "gauge",
                   "Children's calls held while their client answers an input round, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_held_calls", r, "", pool_gauges_of(r->row.name).held);
    metrics_family(b, "mcpgw_pool_request_states_refused_total", "counter",
                   "Retries whose requestState was refused (tampered, expired, used, foreign), "
                   "by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_request_states_refused_total", r, "", r->ctr.states_refused);
    metrics_family(b, "mcpgw_pool_child_events_total", "counter",
                   "Pool children's lives, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        const struct pool_counters *k = &r->ctr;
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"started\"", k->spawned);
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"start_failed\"",
                    k->start_failed);
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"failed\"", k->crashed);
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"idle_stopped\"",
                    k->idle_stopped);
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"refused_restart\"",
                    k->refused_restart);
        pool_sample(b, "mcpgw_pool_child_events_total", r, "event=\"principal_stopped\"",
                    k->principal_stopped);
    }
    metrics_family(b, "mcpgw_pool_principals", "gauge",
                   "Principals with pool children of their own (servers with per-principal "
                   "credentials), by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        pool_sample(b, "mcpgw_pool_principals", r, "", pool_gauges_of(r->row.name).principals);
    metrics_family(b, "mcpgw_pool_request_duration_seconds", "histogram",
                   "Stateless request sent to a pool child to the child's answer, through the "
                   "gateway, by server.");
    for (r = pool_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_histogram_series(b, "mcpgw_pool_request_duration_seconds", labels, &r->latency);
    }
}
