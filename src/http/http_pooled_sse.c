/* SPDX-License-Identifier: MIT */
/*
 * The 2024-11-05 HTTP+SSE transport for a pooled server (session_mode = pooled; pool.h): GET
 * PATH/sse opens a pooled session (no process) whose one SSE stream this request reads, and
 * POST PATH/messages?sessionId= hands it one message, answered 202, whatever answers it coming on
 * that stream. http_mcp.c routes here after its checks (http_refuse_legacy), as for a child-mode
 * session of that transport; the session's id is a random one the pool looks up, and logs name
 * it by its label.
 */
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "http_int.h"
#include "jsonrpc.h"
#include "pool.h"

_Static_assert(POOL_SESSION_SSE_LABEL_MAX <= sizeof(((struct http_req *)0)->sid_tag),
               "a pooled session's label fits a request's tag");

/* The session's id in rc->sid, its label in rc->sid_tag (what the access log names it by). */
static void
http_pooled_sse_name(struct http_req *rc, const struct pool_session *s)
{
    snprintf(rc->sid, sizeof(rc->sid), "%s", pool_session_id(s));
    snprintf(rc->sid_tag, sizeof(rc->sid_tag), "%s", pool_session_label(s));
}

enum MHD_Result
http_pooled_sse_open(struct http_req *rc)
{
    enum MHD_Result ret;
    if (http_refuse_drained(rc, NULL, &ret))
        return ret;
    struct pool_session *s = NULL;
    enum pool_status status;
    const char *why = NULL;
    struct stream *st =
        pool_session_sse_open(rc->srv, rc->principal != NULL ? rc->principal->name : NULL,
                              "messages?sessionId=", !http_sessions_full(), &s, &status, &why);
    if (st == NULL)
        return http_pooled_error(rc, NULL, status, why);
    http_pooled_sse_name(rc, s);
    rc->pooled = true; /* its end is the pool's: pool_session_detach */
    return http_sse(rc, st, false);
}

struct pool_session *
http_pooled_sse_find(const struct http_req *rc)
{
    return pool_session_sse_find(rc->sid, rc->srv,
                                 rc->principal != NULL ? rc->principal->name : NULL);
}

enum MHD_Result
http_pooled_sse_post(struct http_req *rc, struct pool_session *s)
{
    http_pooled_sse_name(rc, s);
    struct jsonrpc_info info;
    const char *err = NULL;
    enum MHD_Result ret = MHD_NO;
    int scan = http_scan_body(rc, &info, &err, &ret);
    if (rc->responded)
        return ret;
    if (scan == JSONRPC_EBATCH)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "JSON-RPC batches are not part of 2024-11-05");
    if (scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          err ? err : "Invalid Request");
    char *body = buf_head(&rc->body);
    size_t len = buf_used(&rc->body);
    enum pool_status status;
    if (info.kind != JSONRPC_REQUEST) {
        status = pool_session_other(s, body, len, &info);
        if (status != POOL_OK)
            return http_pooled_error(rc, NULL, status, NULL);
        return http_queue(rc, MHD_HTTP_ACCEPTED, http_static_response("Accepted"));
    }
    bool init = strcmp(info.method, "initialize") == 0;
    if (init && pool_session_sse_initialized(s))
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "session is already initialized");
    if (!init && strcmp(info.method, "ping") != 0 && !pool_session_sse_ready(s))
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "the session is not initialized: send initialize and wait for its "
                          "answer first");
    if (audit_on() && audit_method(info.method) && http_refuse_unaudited(rc, &info, &ret))
        return ret;
    char client[64];
    struct pool_meta meta;
    struct trace_in tin;
    http_pooled_meta(rc, &meta, client, sizeof client, &tin);
    status = pool_session_sse_request(s, rc->srv, body, len, &info, &meta);
    http_access_traced(rc, meta.trace);
    if (status != POOL_OK)
        return http_pooled_error(rc, &info, status, meta.why);
    return http_queue(rc, MHD_HTTP_ACCEPTED, http_static_response("Accepted"));
}
