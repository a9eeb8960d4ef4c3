/* SPDX-License-Identifier: MIT */
/*
 * Pooled sessions at the MCP endpoint (session_mode = pooled): the pool serves them (pool.h), the
 * session layer never sees them. A legacy initialize for a pooled server makes one; a request
 * whose Mcp-Session-Id is a sealed id (pool_session_named) is opened and checked here
 * (http_pooled_session) and handed to the pool; the pool's refusals become HTTP statuses and
 * JSON-RPC errors. http_mcp.c routes to these after its checks, as for any session.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "http_int.h"
#include "jsonrpc.h"
#include "log.h"
#include "pool.h"
#include "revision.h"

/* A pool's refusal of a pooled session's request: its HTTP status and JSON-RPC error. */
enum MHD_Result
http_pooled_error(struct http_req *rc, const struct jsonrpc_info *info, enum pool_status status,
                  const char *why)
{
    unsigned code = MHD_HTTP_SERVICE_UNAVAILABLE;
    int rpc = JSONRPC_INTERNAL_ERROR;
    switch (status) {
    case POOL_E_FULL:
    case POOL_E_PRINCIPAL:
    case POOL_E_TOO_MANY:
        code = MHD_HTTP_TOO_MANY_REQUESTS;
        break;
    case POOL_E_ID_TOO_LONG:
    case POOL_E_DUPLICATE:
        code = MHD_HTTP_BAD_REQUEST;
        rpc = JSONRPC_INVALID_REQUEST;
        break;
    case POOL_E_GONE:
        code = MHD_HTTP_NOT_FOUND;
        rpc = JSONRPC_INVALID_REQUEST;
        break;
    case POOL_E_CONFLICT:
        code = MHD_HTTP_CONFLICT;
        rpc = JSONRPC_INVALID_REQUEST;
        break;
    case POOL_E_CREDENTIALS:
        code = MHD_HTTP_FORBIDDEN;
        rpc = JSONRPC_INVALID_REQUEST;
        break;
    case POOL_E_CREDENTIALS_BAD:
        code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        break;
    case POOL_E_NO_METHOD:
        code = MHD_HTTP_NOT_FOUND;
        rpc = JSONRPC_METHOD_NOT_FOUND;
        break;
    case POOL_E_BAD_STATE:
        code = MHD_HTTP_BAD_REQUEST;
        rpc = JSONRPC_INVALID_PARAMS;
        break;
    case POOL_OK:
    case POOL_E_UNAVAILABLE:
    case POOL_E_BUSY:
    case POOL_E_DRAINING:
    case POOL_E_DRAINED:
        break;
    }
    (void)info;
    return http_error(rc, code, rpc, why != NULL ? why : relay_status_text(status));
}

/* What the pool knows of a pooled session's request (as of a stateless one, minus its _meta), and
 * the W3C trace context its headers carry (into tin). */
void
http_pooled_meta(struct http_req *rc, struct pool_meta *meta, char *client, size_t size,
                 struct trace_in *tin)
{
    http_access_client(rc, client, size);
    *meta = (struct pool_meta){ .log_level = -1,
                                .principal = rc->principal->name,
                                .claims = rc->claims,
                                .client = client,
                                .grants = rc->grants };
    meta->trace = http_access_trace(rc, tin);
}

/* Whether the gateway holds max_sessions sessions already, of either mode. */
bool
http_sessions_full(void)
{
    return session_count() + pool_session_count() >= httpd.cfg->max_sessions;
}

/*
 * The pooled session rc->sid names, its sealed id opened and checked against this request's own
 * principal and endpoint (pool_session_find): an id that opens here but was sealed at another
 * instance, or before a restart, gets a local record now. NULL: rc->pooled_status says why.
 */
struct pool_session *
http_pooled_session(struct http_req *rc)
{
    rc->pooled_why = NULL;
    return pool_session_find(rc->sid, rc->srv, rc->principal->name, !http_sessions_full(),
                             &rc->pooled_status, &rc->pooled_why);
}

/* The refusal when http_pooled_session found nothing: 404 as for any unknown session, or full. */
enum MHD_Result
http_pooled_none(struct http_req *rc)
{
    if (rc->pooled_status == POOL_E_GONE)
        return http_session_error(rc, SESSION_E_GONE);
    return http_pooled_error(rc, NULL, rc->pooled_status, rc->pooled_why);
}

/* initialize for a server with session_mode = pooled: a session with no child. */
enum MHD_Result
http_pooled_initialize(struct http_req *rc, const struct jsonrpc_info *info)
{
    enum MHD_Result ret;
    if (http_refuse_drained(rc, info, &ret))
        return ret;
    if (http_sessions_full())
        return http_error(rc, MHD_HTTP_SERVICE_UNAVAILABLE, JSONRPC_INTERNAL_ERROR,
                          "too many sessions");
    if (audit_on() && audit_method(info->method) && http_refuse_unaudited(rc, info, &ret))
        return ret;
    char client[64];
    struct pool_meta meta;
    struct trace_in tin;
    http_pooled_meta(rc, &meta, client, sizeof client, &tin);
    enum pool_status status;
    struct pool_session *s = NULL;
    struct stream *st = pool_session_initialize(rc->srv, buf_head(&rc->body), buf_used(&rc->body),
                                                info, &meta, &s, &status);
    http_access_traced(rc, meta.trace);
    if (st == NULL)
        return http_pooled_error(rc, info, status, meta.why);
    snprintf(rc->sid, sizeof(rc->sid), "%s", pool_session_id(s));
    http_sid_tag(rc);
    rc->pooled = true;
    return http_hold(rc, st, true);
}

/*
 * A JSON array in a pooled session: 2025-03-26 only. Every element is checked first (any bad one
 * refuses the whole batch); each request is then served as if posted alone, its answer an event of
 * one SSE stream; a batch of notifications and responses gets 202.
 */
static enum MHD_Result
http_pooled_batch(struct http_req *rc, struct pool_session *s)
{
    struct jsonrpc_span el[POOL_BATCH_MAX];
    size_t n;
    bool requests;
    enum MHD_Result ret;
    struct jsonrpc_info *info =
        http_batch_open(rc, pool_session_batches(s), el, ARRAY_LEN(el), &n, &requests, &ret);
    if (info == NULL)
        return ret;
    char client[64];
    struct pool_meta meta;
    struct trace_in tin;
    http_pooled_meta(rc, &meta, client, sizeof client, &tin);
    struct stream *st =
        pool_session_batch(s, rc->srv, buf_head(&rc->body), el, info, n, &meta);
    http_access_traced(rc, meta.trace);
    free(info);
    if (st == NULL)
        return http_empty(rc, MHD_HTTP_ACCEPTED);
    rc->pooled = true;
    return http_hold(rc, st, false);
}

/* Any POST but initialize in a pooled session (rc->sid has the pooled form). */
enum MHD_Result
http_pooled_post(struct http_req *rc, int scan, const struct jsonrpc_info *info, const char *err)
{
    struct pool_session *s = http_pooled_session(rc);
    if (s == NULL)
        return http_pooled_none(rc);
    if (scan == JSONRPC_EBATCH)
        return http_pooled_batch(rc, s);
    if (scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          err ? err : "Invalid Request");
    if (info->kind != JSONRPC_REQUEST) {
        enum pool_status status =
            pool_session_other(s, buf_head(&rc->body), buf_used(&rc->body), info);
        if (status != POOL_OK)
            return http_pooled_error(rc, NULL, status, NULL);
        return http_empty(rc, MHD_HTTP_ACCEPTED);
    }
    if (strcmp(info->method, "initialize") == 0)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "session is already initialized");
    enum MHD_Result ret;
    if (audit_on() && audit_method(info->method) && http_refuse_unaudited(rc, info, &ret))
        return ret;
    char client[64];
    struct pool_meta meta;
    struct trace_in tin;
    http_pooled_meta(rc, &meta, client, sizeof client, &tin);
    enum pool_status status;
    struct stream *st = pool_session_request(s, rc->srv, buf_head(&rc->body), buf_used(&rc->body),
                                             info, &meta, &status);
    http_access_traced(rc, meta.trace);
    if (st == NULL)
        return http_pooled_error(rc, info, status, meta.why);
    rc->pooled = true;
    return http_hold(rc, st, false);
}
