/* SPDX-License-Identifier: MIT */
/*
 * The stateless (2026-07-28) era on the MCP endpoint. A POST with no Mcp-Session-Id whose body
 * carries params._meta
 * ["io.modelcontextprotocol/protocolVersion"], or whose MCP-Protocol-Version header names no
 * legacy revision, is stateless; initialize still opens a legacy session. Host, Origin, auth, rate,
 * Accept, Content-Type and size were checked as for every request (http_mcp.c). Then, in order:
 * one message, a request (a notification gets 202 and goes nowhere: the revision defines none
 * over HTTP), _meta protocolVersion present (400 -32602), the MCP-Protocol-Version header equal to
 * it (400 -32020), a stateless revision the gateway knows (400 -32022 with data.supported and
 * data.requested; the pool refuses alike a revision its children do not speak), Mcp-Method
 * equal to the method (400 -32020), Mcp-Name equal to params.name, params.uri or params.taskId
 * where the revision requires it, base64 form decoded (400 -32020), clientCapabilities present and
 * logLevel valid (400 -32602), a method of the revision (404 -32601). For a token_exchange server
 * whose pool of the request's principal holds no exchanged token yet (pool_token_wanted), the
 * request's token is exchanged first, the request waiting as a session's initialize does (refused
 * alike: 403, 502, 503). The request then goes to its server's pool (pool.h) and is answered on its
 * own stream. GET and DELETE have no stateless meaning: 405 with Allow: POST.
 */
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "auth.h"
#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"
#include "pool.h"
#include "revision.h"

/* A header naming no revision with sessions: a stateless one, or one later than the gateway knows.
 */
bool
http_stateless_header(const char *ver)
{
    return ver != NULL && !revision_over(revision_named(ver), REVISION_SESSIONS);
}

bool
http_is_stateless(const struct http_req *rc, int scan, const struct jsonrpc_info *info)
{
    if (rc->sid[0] != '\0')
        return false;
    const char *ver = http_header(rc, HTTP_H_VERSION);
    /* initialize opens a legacy session, unless it says it is of a later revision. */
    if (scan == JSONRPC_OK && info->kind == JSONRPC_REQUEST
        && strcmp(info->method, "initialize") == 0)
        return http_stateless_header(ver);
    if (scan == JSONRPC_OK && info->meta_version.len != 0)
        return true;
    return http_stateless_header(ver);
}

enum MHD_Result
http_stateless_refuse_method(struct http_req *rc)
{
    char why[128];
    snprintf(why, sizeof why, "Method not allowed: protocol revision %s uses POST only",
             revision_list(REVISION_STATELESS));
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, why);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
    http_refusal(rc, NULL, JSONRPC_INVALID_REQUEST, why);
    return http_queue(rc, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

/* An error answer to the request's own id. */
static enum MHD_Result
http_answer_error(struct http_req *rc, unsigned status, const struct jsonrpc_info *info, int code,
                  const char *message)
{
    size_t len;
    char *e =
        jsonrpc_error_new(buf_head(&rc->body) + info->id.off, info->id.len, code, message, &len);
    http_refusal(rc, NULL, code, message);
    return http_queue(rc, status, http_json_response(e, len));
}

static enum MHD_Result
http_mismatch(struct http_req *rc, const struct jsonrpc_info *info, const char *message)
{
    return http_answer_error(rc, MHD_HTTP_BAD_REQUEST, info, JSONRPC_HEADER_MISMATCH, message);
}

static enum MHD_Result
http_bad_meta(struct http_req *rc, const struct jsonrpc_info *info, const char *message)
{
    return http_answer_error(rc, MHD_HTTP_BAD_REQUEST, info, JSONRPC_INVALID_PARAMS, message);
}

/* A mirrored header's value (http_rules_mcp_value); false when absent or malformed. */
static bool
http_header_value(const struct http_req *rc, enum http_hdr name, char *out, size_t cap, size_t *len)
{
    const char *h = http_header(rc, name);
    return h != NULL && http_rules_mcp_value(h, out, cap, len);
}

/* The body field Mcp-Name must mirror for this method, or an empty span. */
static struct jsonrpc_span
http_name_field(const struct jsonrpc_info *info, bool *required)
{
    static const struct jsonrpc_span none = { 0, 0 };
    const char *m = info->method;
    *required = true;
    if (strcmp(m, "tools/call") == 0 || strcmp(m, "prompts/get") == 0)
        return info->name;
    if (strcmp(m, "resources/read") == 0)
        return info->uri;
    if (strcmp(m, "tasks/get") == 0 || strcmp(m, "tasks/update") == 0
        || strcmp(m, "tasks/cancel") == 0)
        return info->task_id;
    *required = false;
    return none;
}

/* The headers against the body; true when refused (answered); else *rev is the request's row. */
static bool
http_stateless_headers(struct http_req *rc, const struct jsonrpc_info *info,
                       const struct revision **rev, enum MHD_Result *ret)
{
    const char *body = buf_head(&rc->body);
    char version[64];
    if (info->meta_version.len == 0
        || !jsonrpc_string_at(body, info->meta_version, version, sizeof(version), NULL)) {
        *ret = http_bad_meta(rc, info,
                             "params._meta[\"io.modelcontextprotocol/protocolVersion\"] is "
                             "required (a string)");
        return true;
    }
    char hv[64], hm[JSONRPC_METHOD_MAX];
    size_t hlen;
    bool hv_ok = http_header_value(rc, HTTP_H_VERSION, hv, sizeof(hv), &hlen);
    if (!hv_ok || strcmp(hv, version) != 0) {
        *ret = http_mismatch(rc, info,
                             !hv_ok ? "MCP-Protocol-Version header is required"
                                    : "MCP-Protocol-Version header does not match "
                                      "params._meta protocolVersion");
        return true;
    }
    *rev = revision_named(version);
    if (!revision_over(*rev, REVISION_STATELESS)) {
        size_t len;
        char *e = jsonrpc_version_error_new(body + info->id.off, info->id.len, version,
                                            revision_names(REVISION_STATELESS), &len);
        http_refusal(rc, NULL, JSONRPC_UNSUPPORTED_VERSION,
                     "the protocol version is not a stateless revision the gateway knows");
        *ret = http_queue(rc, MHD_HTTP_BAD_REQUEST, http_json_response(e, len));
        return true;
    }
    bool hm_ok = http_header_value(rc, HTTP_H_MCP_METHOD, hm, sizeof(hm), &hlen);
    if (!hm_ok || info->method_long || strcmp(hm, info->method) != 0) {
        *ret = http_mismatch(rc, info,
                             !hm_ok ? "Mcp-Method header is required"
                                    : "Mcp-Method header does not match the method");
        return true;
    }
    bool required;
    struct jsonrpc_span field = http_name_field(info, &required);
    if (required) {
        const char *hn = http_header(rc, HTTP_H_MCP_NAME);
        char want[1024], got[1024];
        size_t wlen = 0, glen = 0;
        if (hn == NULL) {
            *ret = http_mismatch(rc, info, "Mcp-Name header is required for this method");
            return true;
        }
        if (!http_rules_mcp_value(hn, got, sizeof(got), &glen) || field.len == 0
            || !jsonrpc_string_at(body, field, want, sizeof(want), &wlen) || wlen != glen
            || memcmp(want, got, glen) != 0) {
            *ret = http_mismatch(rc, info, "Mcp-Name header does not match the request's name");
            return true;
        }
    }
    return false;
}

enum MHD_Result
http_stateless_post(struct http_req *rc, int scan, const struct jsonrpc_info *info, const char *err)
{
    char why[128];
    const char *stateless = revision_list(REVISION_STATELESS);
    if (scan == JSONRPC_EBATCH) {
        snprintf(why, sizeof why, "JSON-RPC batches are not part of protocol revision %s",
                 stateless);
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, why);
    }
    if (scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          err ? err : "Invalid Request");
    if (info->kind == JSONRPC_NOTIFICATION) {
        log_debug(NULL, "stateless notification %s: nothing to deliver it to", info->method);
        return http_empty(rc, MHD_HTTP_ACCEPTED);
    }
    if (info->kind != JSONRPC_REQUEST) {
        snprintf(why, sizeof why, "no request awaits this response (protocol revision %s)",
                 stateless);
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, why);
    }
    enum MHD_Result ret;
    const struct revision *rev;
    if (http_stateless_headers(rc, info, &rev, &ret))
        return ret;
    const char *body = buf_head(&rc->body);
    if (info->meta_caps.len == 0 || body[info->meta_caps.off] != '{')
        return http_bad_meta(rc, info,
                             "params._meta[\"io.modelcontextprotocol/clientCapabilities\"] "
                             "is required (an object)");
    char client[64];
    http_access_client(rc, client, sizeof(client));
    struct pool_meta meta = { .rev = rev,
                              .log_level = -1,
                              .principal = rc->principal->name,
                              .claims = rc->claims,
                              .client = client,
                              .grants = rc->grants };
    if (info->meta_log_level.len != 0
        && (meta.log_level = pool_log_level(body, info->meta_log_level)) < 0)
        return http_bad_meta(rc, info,
                             "params._meta[\"io.modelcontextprotocol/logLevel\"] is not a "
                             "log level");
    enum MHD_Result refused;
    if (http_refuse_unaudited(rc, info, &refused))
        return refused;
    if (rc->srv->token_exchange) {
        /* The principal's pool needs its token exchanged first: it waits, as initialize does. */
        meta.authorization = http_header(rc, HTTP_H_AUTHORIZATION);
        if (pool_token_wanted(rc->srv, &meta) && http_exchange(rc, &refused))
            return refused;
        meta.xres = rc->xres;
    }
    struct trace_in tin;
    meta.trace = http_access_trace(rc, &tin);
    enum pool_status status;
    struct stream *st =
        pool_request(rc->srv, buf_head(&rc->body), buf_used(&rc->body), info, &meta, &status);
    auth_exchanged_free(rc->xres); /* the pool copied what it holds */
    rc->xres = NULL;
    http_access_traced(rc, meta.trace);
    if (st == NULL && status == POOL_E_DRAINED)
        return http_drained(rc, info);
    if (st == NULL) {
        unsigned code = MHD_HTTP_SERVICE_UNAVAILABLE;
        int rpc = JSONRPC_INTERNAL_ERROR;
        if (status == POOL_E_FULL || status == POOL_E_PRINCIPAL)
            code = MHD_HTTP_TOO_MANY_REQUESTS;
        else if (status == POOL_E_ID_TOO_LONG) {
            code = MHD_HTTP_BAD_REQUEST;
            rpc = JSONRPC_INVALID_REQUEST;
        } else if (status == POOL_E_NO_METHOD) {
            code = MHD_HTTP_NOT_FOUND;
            rpc = JSONRPC_METHOD_NOT_FOUND;
        } else if (status == POOL_E_BAD_STATE) {
            code = MHD_HTTP_BAD_REQUEST;
            rpc = JSONRPC_INVALID_PARAMS;
        } else if (status == POOL_E_CREDENTIALS) {
            code = MHD_HTTP_FORBIDDEN; /* as a session's initialize is refused */
            rpc = JSONRPC_INVALID_REQUEST;
        } else if (status == POOL_E_CREDENTIALS_BAD) {
            code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
        return http_answer_error(rc, code, info, rpc,
                                 meta.why != NULL ? meta.why : relay_status_text(status));
    }
    rc->stateless = true;
    return http_hold(rc, st, false);
}
