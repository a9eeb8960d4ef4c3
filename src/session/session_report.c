/* SPDX-License-Identifier: MIT */
/*
 * What the session layer shows operators: the admin view (every session, stream and in-flight
 * entry as JSON) and the sessions', children's and in-flight table's series for /metrics.
 */
#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "session_int.h"
#include "upstream.h"

/*
 * The admin view has a ceiling: SESSION_ADMIN_MAX bytes of sessions, then the counters. Sessions
 * that do not fit are left out whole and counted ("truncated", "sessions_omitted"), so what a peer
 * can grow (ids, streams, entries) never ends the gateway, nor makes a document that does not
 * parse.
 */
#define SESSION_ADMIN_MAX  ((size_t)16 << 20)
#define SESSION_ADMIN_TAIL ((size_t)4096) /* the counters */

static void
session_admin_entry(struct buf_out *o, const struct pending *p, uint64_t now, bool first)
{
    buf_out_printf(o, "%s{\"direction\":\"%s\",\"method\":", first ? "" : ",",
                   p->dir == PENDING_TO_CHILD ? "to_child" : "to_client");
    jsonrpc_put_quoted(o, p->method);
    buf_out_printf(o, ",\"id\":");
    buf_out_raw(o, p->orig_id, p->orig_id_len);
    buf_out_printf(o,
                   ",\"gateway_id\":%" PRIu64 ",\"state\":\"%s\",\"age_ms\":%" PRIu64
                   ",\"stream\":%" PRIu64 ",\"task\":%s",
                   p->gw_id, p->state == PENDING_FORWARDED ? "forwarded" : "cancelled",
                   now - p->start_ms, p->stream_id, p->task ? "true" : "false");
    if (p->timer != NULL)
        buf_out_printf(o, ",\"deadline_in_ms\":%" PRIu64,
                       p->deadline_ms > now ? p->deadline_ms - now : 0);
    if (p->token != NULL) {
        buf_out_printf(o, ",\"progress_token\":");
        buf_out_raw(o, p->token, p->token_len);
    }
    buf_out_printf(o, "}");
}

static void
session_admin_session(struct buf_out *o, const struct session *s, uint64_t now)
{
    buf_out_printf(o,
                   "{\"id\":\"%s\",\"server\":\"%s\",\"mode\":\"%s\",\"child_pid\":%d,"
                   "\"child\":\"%s\",\"state\":\"%s\",\"protocol_version\":\"%s\","
                   "\"idle_ms\":%" PRIu64 ",\"tasks_open\":%zu,\"owner\":",
                   s->id, s->srv->name, session_modes[s->mode], s->u ? (int)upstream_pid(s->u) : 0,
                   session_sleep_state(s), s->state == SESSION_READY ? "ready" : "initializing",
                   s->version, now - s->last_active_ms, s->ntasks);
    jsonrpc_put_quoted(o, s->owner->name);
    char at[UTIL_RFC3339_MAX];
    util_rfc3339(s->created_unix_ms, at);
    buf_out_printf(
        o, ",\"label\":\"%s\",\"created_at\":\"%s\",\"created_unix_ms\":%" PRIu64 ",\"client\":",
        s->label, at, s->created_unix_ms);
    if (s->client[0] != '\0')
        jsonrpc_put_quoted(o, s->client);
    else
        buf_out_printf(o, "null");
    /* Client data: decoded and cut when noted, escaped here; invalid UTF-8 shows as "". */
    buf_out_printf(o, ",\"client_info\":");
    if (s->client_info) {
        buf_out_printf(o, "{\"name\":");
        jsonrpc_put_quoted(o, s->client_name);
        buf_out_printf(o, ",\"version\":");
        jsonrpc_put_quoted(o, s->client_version);
        buf_out_printf(o, "}");
    } else {
        buf_out_printf(o, "null");
    }
    buf_out_printf(o, ",\"streams\":[");
    for (const struct stream *st = s->streams; st != NULL; st = stream_own_const(st)->next)
        buf_out_printf(
            o,
            "%s{\"id\":%" PRIu64 ",\"kind\":\"%s\",\"attached\":%s,\"ended\":%s,"
            "\"awaiting\":%u,\"queued_bytes\":%zu,\"replay_bytes\":%zu}",
            st == s->streams ? "" : ",", stream_id(st), stream_is_get(st) ? "get" : "post",
            stream_own_const(st)->attached ? "true" : "false", stream_ended(st) ? "true" : "false",
            stream_own_const(st)->awaiting, stream_pending(st), stream_history(st));
    buf_out_printf(o, "],\"inflight\":[");
    for (const struct pending *p = s->r.pt.head; p != NULL; p = p->next)
        session_admin_entry(o, p, now, p == s->r.pt.head);
    buf_out_printf(o, "]}");
}

char *
session_admin_json(size_t *len)
{
    struct buf_out o = { .full = false };
    buf_init(&o.b, SESSION_ADMIN_MAX + SESSION_ADMIN_TAIL);
    uint64_t now = util_now_ms();
    size_t shown = 0, omitted = 0;
    buf_out_printf(&o, "{\"sessions\":[");
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext) {
            size_t used = buf_used(&o.b);
            if (omitted == 0 && used < SESSION_ADMIN_MAX) {
                /* Each session whole or not at all, in the room left under the ceiling. */
                struct buf_out one;
                buf_out_item_open(&o, &one, SESSION_ADMIN_MAX, 0);
                buf_out_printf(&one, "%s", shown ? "," : "");
                session_admin_session(&one, s, now);
                if (buf_out_item_close(&o, &one)) {
                    shown++;
                    continue;
                }
            }
            omitted++;
        }
    const struct session_counters *c = session_counters();
    buf_out_printf(
        &o,
        "],\"truncated\":%s,\"sessions_omitted\":%zu,\"counters\":{\"sessions_open\":%zu,"
        "\"sessions_created\":%" PRIu64 ",\"sessions_closed\":%" PRIu64 ",\"cancels_to_child\":{",
        omitted ? "true" : "false", omitted, sessions.count, c->created, c->closed);
    for (size_t r = 0; r < RELAY_CANCEL_N; r++)
        buf_out_printf(&o, "%s\"%s\":%" PRIu64, r ? "," : "", relay_reasons[r].text,
                       relay_cancels((enum relay_reason)r));
    buf_out_printf(&o,
                   "},\"cancels_to_client\":%" PRIu64 ",\"late_dropped\":%" PRIu64
                   ",\"timeouts\":%" PRIu64 ",\"child_lines_invalid\":%" PRIu64
                   ",\"notifications_dropped\":%" PRIu64 "}}",
                   relay_cancels_to_client(), c->late_dropped, c->timeouts, c->child_lines_invalid,
                   c->notifications_dropped);
    assert(!o.full); /* the counters fit in SESSION_ADMIN_TAIL */
    *len = buf_used(&o.b);
    char *out = xstrndup(buf_head(&o.b), *len);
    buf_clear(&o.b);
    return out;
}

/* The first server's row. */
static struct session_server *
session_rows(void)
{
    return (struct session_server *)(void *)sessions.servers;
}

void
session_metrics(struct buf *b, size_t (*pooled)(const char *server))
{
    char labels[256];
    struct session_server *r;
    metrics_family(b, "mcpgw_sessions_open", "gauge",
                   "Sessions open now, by server, of both modes (mcpgw_sessions: by mode).");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_sample(b, "mcpgw_sessions_open", labels,
                       r->open + (pooled != NULL ? pooled(r->row.name) : 0));
    }
    metrics_per_server(b, sessions.servers, "mcpgw_sessions_created_total", "counter",
                       "Child-mode sessions created, by server (a pooled session is not counted: "
                       "any instance takes one up).",
                       offsetof(struct session_server, created));
    metrics_family(b, "mcpgw_sessions_closed_total", "counter",
                   "Sessions ended, by server and reason.");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        for (size_t i = 0; i < SESSION_END_N; i++) {
            snprintf(labels, sizeof(labels), "server=\"%s\",reason=\"%s\"", r->row.name,
                     session_ends[i].label);
            metrics_sample(b, "mcpgw_sessions_closed_total", labels, r->closed_by[i]);
        }
    /* The gauges are counted at the scrape: one walk of the sessions, each adding to its row. */
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        r->inflight[0] = r->inflight[1] = 0;
        memset(r->by_mode, 0, sizeof(r->by_mode));
    }
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext) {
            s->stats->inflight[0] += session_inflight_in(s, PENDING_TO_CHILD);
            s->stats->inflight[1] += session_inflight_in(s, PENDING_TO_CLIENT);
            s->stats->by_mode[s->mode]++;
        }
    metrics_family(b, "mcpgw_sessions", "gauge",
                   "Sessions open now, by server and mode (child: the session's own child "
                   "process; pooled: a pooled session's record at this instance).");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        for (size_t m = 0; m < SESSION_MODE_N; m++) {
            snprintf(labels, sizeof(labels), "server=\"%s\",mode=\"%s\"", r->row.name,
                     session_modes[m]);
            metrics_sample(b, "mcpgw_sessions", labels, r->by_mode[m]);
        }
        if (pooled != NULL) {
            snprintf(labels, sizeof(labels), "server=\"%s\",mode=\"pooled\"", r->row.name);
            metrics_sample(b, "mcpgw_sessions", labels, pooled(r->row.name));
        }
    }
    metrics_family(b, "mcpgw_inflight_requests", "gauge",
                   "Requests of sessions waiting for their answer, by server and direction.");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        for (size_t d = 0; d < 2; d++) {
            snprintf(labels, sizeof(labels), "server=\"%s\",direction=\"%s\"", r->row.name,
                     d == 0 ? "to_child" : "to_client");
            metrics_sample(b, "mcpgw_inflight_requests", labels, r->inflight[d]);
        }
    metrics_family(b, "mcpgw_requests_total", "counter",
                   "Requests forwarded, by server, direction and method class (the part before "
                   "'/').");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r))
        for (size_t d = 0; d < 2; d++)
            for (size_t i = 0; i < SESSION_CLASS_N; i++) {
                snprintf(labels, sizeof(labels), "server=\"%s\",direction=\"%s\",class=\"%s\"",
                         r->row.name, d == 0 ? "to_child" : "to_client", session_classes[i]);
                metrics_sample(b, "mcpgw_requests_total", labels, r->requests[d][i]);
            }
    metrics_per_server(b, sessions.servers, "mcpgw_late_messages_dropped_total", "counter",
                       "Answers and progress that arrived after their request was cancelled, by "
                       "server.",
                       offsetof(struct session_server, late_dropped));
    metrics_per_server(b, sessions.servers, "mcpgw_request_timeouts_total", "counter",
                       "Requests that passed their request_timeout_ms, by server.",
                       offsetof(struct session_server, timeouts));
    metrics_per_server(b, sessions.servers, "mcpgw_child_lines_invalid_total", "counter",
                       "Lines from sessions' children that were not JSON-RPC (dropped), by "
                       "server.",
                       offsetof(struct session_server, child_lines_invalid));
    metrics_per_server(b, sessions.servers, "mcpgw_notifications_dropped_total", "counter",
                       "Child notifications no stream could take, by server.",
                       offsetof(struct session_server, notifications_dropped));
    metrics_family(b, "mcpgw_request_duration_seconds", "histogram",
                   "Client request to the child's answer, through the gateway, by server.");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_histogram_series(b, "mcpgw_request_duration_seconds", labels, &r->latency);
    }
    metrics_family(b, "mcpgw_spawn_duration_seconds", "histogram",
                   "Starting a session's child process, by server.");
    for (r = session_rows(); r != NULL; r = METRICS_ROW_NEXT(r)) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_histogram_series(b, "mcpgw_spawn_duration_seconds", labels, &r->spawn);
    }
    session_sleep_metrics(b);
}
