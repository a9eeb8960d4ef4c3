/* SPDX-License-Identifier: MIT */
/*
 * The MCP endpoint. Requests are checked in a fixed order: header
 * size (431, in http.c), Host and Origin (403), the bearer token (401, or 403 for scopes;
 * SECURITY.md), the principal's rate (429), method (405), Accept (406), Content-Type (415), body
 * size (413), MCP-Protocol-Version (400), JSON (400 -32700), JSON-RPC (400 -32600), session (400
 * missing / 404 unknown or another principal's). Every request gets an SSE body: the response,
 * and whatever the child sends on that request's behalf, arrive as events. The 2024-11-05
 * HTTP+SSE transport (GET PATH/sse, POST PATH/messages) lives here too.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"
#include "pool.h"
#include "revision.h"

/*
 * What logs and the access log name rc's session by: its id, or a sealed id's label
 * (session_seal_label), the one the pool logs the session by.
 */
void
http_sid_tag(struct http_req *rc)
{
    size_t n = strlen(rc->sid);
    if (!session_seal_is(rc->sid, n)) {
        /* Copied, not formatted: this runs on every request. Cut as snprintf would. */
        if (n >= sizeof(rc->sid_tag))
            n = sizeof(rc->sid_tag) - 1;
        memcpy(rc->sid_tag, rc->sid, n);
        rc->sid_tag[n] = '\0';
        return;
    }
    session_seal_label(rc->sid, n, rc->sid_tag);
}

/* Copies a plausible session id header; false when absent. Implausible ids become unknown. */
bool
http_read_sid(struct http_req *rc)
{
    const char *v = http_header(rc, HTTP_H_SID);
    if (v == NULL)
        return false;
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof(rc->sid)) {
        snprintf(rc->sid, sizeof(rc->sid), "%s", "-");
        snprintf(rc->sid_tag, sizeof(rc->sid_tag), "%s", "-");
        return true;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e) {
            snprintf(rc->sid, sizeof(rc->sid), "%s", "-");
            snprintf(rc->sid_tag, sizeof(rc->sid_tag), "%s", "-");
            return true;
        }
    memcpy(rc->sid, v, n + 1);
    http_sid_tag(rc);
    return true;
}

static bool http_refuse_version(struct http_req *rc, enum MHD_Result *ret);

enum MHD_Result
http_session_error(struct http_req *rc, enum session_status status)
{
    unsigned code = MHD_HTTP_INTERNAL_SERVER_ERROR;
    int rpc = JSONRPC_INVALID_REQUEST;
    switch (status) {
    case SESSION_OK:
        rpc = JSONRPC_INTERNAL_ERROR;
        break;
    case SESSION_E_GONE:
        code = MHD_HTTP_NOT_FOUND;
        break;
    case SESSION_E_BUSY:
        code = MHD_HTTP_SERVICE_UNAVAILABLE;
        rpc = JSONRPC_INTERNAL_ERROR;
        break;
    case SESSION_E_TOO_MANY:
    case SESSION_E_PRINCIPAL:
        code = MHD_HTTP_TOO_MANY_REQUESTS;
        rpc = JSONRPC_INTERNAL_ERROR;
        break;
    case SESSION_E_DUPLICATE:
        code = MHD_HTTP_BAD_REQUEST;
        break;
    case SESSION_E_CONFLICT:
        code = MHD_HTTP_CONFLICT;
        break;
    case SESSION_E_EVICTED:
        code = MHD_HTTP_GONE;
        break;
    case SESSION_E_ID_TOO_LONG:
        code = MHD_HTTP_BAD_REQUEST;
        break;
    }
    return http_error(rc, code, rpc,
                      status == SESSION_OK ? "internal error" : relay_status_text(status));
}

/*
 * The session Mcp-Session-Id names on this endpoint; NULL if unknown, ended, another server's, or
 * another principal's (the same 404: a session id alone never grants access, nor reveals one).
 */
static struct session *
http_session(const struct http_req *rc)
{
    struct session *s = session_lookup(rc->sid, rc->srv, rc->principal, false);
    if (s != NULL && rc->srv->token_exchange) /* the subject of its next token exchange */
        session_token_seen(s, http_header(rc, HTTP_H_AUTHORIZATION));
    return s;
}

/* The refusal when http_session found nothing: 400 without the header, else 404. */
static enum MHD_Result
http_no_session(struct http_req *rc)
{
    if (rc->sid[0] == '\0')
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "Mcp-Session-Id header is required");
    return http_session_error(rc, SESSION_E_GONE);
}

/* How rc is authenticated, or would be: none, bearer, jwt, introspection. */
static const char *
http_auth_kind(const struct http_req *rc)
{
    if (httpd.cfg->auth.mode == CONFIG_AUTH_BEARER)
        return "bearer";
    if (httpd.cfg->auth.mode != CONFIG_AUTH_JWT)
        return "none";
    /* A JWT has three parts; any other token was introspected. Nothing of it is kept. */
    size_t n = 0;
    const char *t = auth_bearer_token(http_header(rc, HTTP_H_AUTHORIZATION), &n);
    size_t dots = 0;
    for (size_t i = 0; t != NULL && i < n; i++)
        dots += t[i] == '.';
    return dots == 2 ? "jwt" : "introspection";
}

void
http_audit_who(struct http_req *rc)
{
    if (!audit_on())
        return;
    char client[64];
    http_access_client(rc, client, sizeof(client));
    /* A call's trace id is its own (audit_call_trace), set when the request reaches its child. */
    const struct audit_who w = { rc->principal != NULL ? rc->principal->name : NULL,
                                 http_auth_kind(rc), client, NULL };
    audit_set_who(&w);
}

void
http_refusal(struct http_req *rc, const char *event, int code, const char *why)
{
    if (event != NULL)
        rc->refusal.event = event;
    rc->refusal.code = code;
    rc->refusal.why = why;
}

/* The W3C trace id rc carries (its body's _meta, else its header), when trace_context reads it. */
static void
http_refusal_trace(const struct http_req *rc, char out[TRACE_ID_LEN + 1])
{
    out[0] = '\0';
    if (rc->acc.trace_id[0] != '\0') {
        memcpy(out, rc->acc.trace_id, TRACE_ID_LEN + 1);
        return;
    }
    if (httpd.cfg->trace_context == CONFIG_TRACE_OFF)
        return;
    struct trace_in tin;
    trace_in_init(&tin, TRACE_PROPAGATE, http_header(rc, HTTP_H_TRACEPARENT), NULL);
    struct trace t;
    if (rc->scanned != NULL && rc->scanned->kind == JSONRPC_REQUEST
        && trace_resolve(&tin, buf_head(&rc->body), buf_used(&rc->body), rc->scanned, &t))
        trace_id_copy(&t, out);
    else if (tin.parent[0] != '\0')
        snprintf(out, TRACE_ID_LEN + 1, "%.*s", TRACE_ID_LEN, tin.parent + 3);
}

/*
 * Every refusal of a request to an MCP route that no session or pool answered: who (as far as
 * known), the server, the method and name when the body was read, the status, the JSON-RPC code
 * and why. A request refused before its route was known (431, a head read two ways) has no
 * server: the access log has it.
 */
void
http_audit_refused(struct http_req *rc, unsigned status)
{
    if (rc->refusal.done || rc->srv == NULL
        || (rc->kind != HTTP_MCP && rc->kind != HTTP_LEGACY_SSE && rc->kind != HTTP_LEGACY_MSG))
        return;
    rc->refusal.done = true;
    char client[64], trace_id[TRACE_ID_LEN + 1];
    http_access_client(rc, client, sizeof(client));
    http_refusal_trace(rc, trace_id);
    const struct audit_who w = { rc->principal != NULL ? rc->principal->name : NULL,
                                 http_auth_kind(rc), client,
                                 trace_id[0] != '\0' ? trace_id : NULL };
    audit_set_who(&w);
    const char *event = rc->refusal.event;
    if (event == NULL)
        event = status == 401 || status == 403   ? "refused_auth"
                : status == 413 || status == 429 ? "refused_limit"
                : status >= 500                  ? "refused_unavailable"
                                                 : "refused_request";
    bool body = rc->scanned != NULL && buf_used(&rc->body) != 0;
    audit_refusal(event, rc->srv->name, (int)status, rc->refusal.code, rc->refusal.why,
                  body ? buf_head(&rc->body) : NULL, body ? rc->scanned : NULL);
}

#define HTTP_UNAUDITED "Service unavailable: audit records cannot be written (audit_required)"

/* audit_required and the audit trail cannot be written: the call is refused, not unrecorded. */
bool
http_refuse_unaudited(struct http_req *rc, const struct jsonrpc_info *info, enum MHD_Result *ret)
{
    if (!audit_on() || !audit_refusing(rc->srv->name, buf_head(&rc->body), info))
        return false;
    rc->refusal.done = true; /* its record is the refused_audit one, if any can be written */
    *ret = http_error(rc, MHD_HTTP_SERVICE_UNAVAILABLE, JSONRPC_INTERNAL_ERROR, HTTP_UNAUDITED);
    return true;
}

static enum MHD_Result
http_post_request(struct http_req *rc, struct session *s, bool created,
                  const struct jsonrpc_info *info)
{
    enum session_status status;
    enum MHD_Result refused;
    if (audit_on() && audit_method(info->method) && http_refuse_unaudited(rc, info, &refused))
        return refused;
    struct stream *st = session_stream_open(s, false, &status);
    if (st == NULL)
        return http_session_error(rc, status);
    struct trace_in tin;
    struct trace_in *trace = http_access_trace(rc, &tin);
    status = session_client_request(s, st, buf_head(&rc->body), buf_used(&rc->body), info,
                                    rc->grants, trace);
    http_access_traced(rc, trace);
    if (status != SESSION_OK) {
        session_stream_detach(rc->sid, st);
        if (created)
            session_close(s, SESSION_END_INIT, "initialize not delivered");
        return http_session_error(rc, status);
    }
    return http_hold(rc, st, created);
}

/* Elements scanned one by one; any invalid one refuses the whole batch before anything is sent. */
enum MHD_Result
http_batch_scan(struct http_req *rc, const struct jsonrpc_span *el, struct jsonrpc_info *info,
                size_t n, bool *requests)
{
    char *body = buf_head(&rc->body);
    char why[160];
    for (size_t i = 0; i < n; i++) {
        const char *err = NULL;
        int st = jsonrpc_scan(body + el[i].off, el[i].len, &info[i], &err);
        if (st == JSONRPC_EBATCH)
            err = "a batch inside a batch";
        if (st != JSONRPC_OK) {
            snprintf(why, sizeof(why), "batch element %zu: %s", i, err ? err : "invalid");
            return http_error(rc, MHD_HTTP_BAD_REQUEST,
                              st == JSONRPC_EPARSE ? JSONRPC_PARSE_ERROR : JSONRPC_INVALID_REQUEST,
                              why);
        }
        if (info[i].kind == JSONRPC_REQUEST && strcmp(info[i].method, "initialize") == 0)
            return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                              "initialize must not be part of a batch");
        *requests |= info[i].kind == JSONRPC_REQUEST;
        /* audit_required: a batch holding a call that cannot be recorded is refused whole. */
        if (audit_on() && info[i].kind == JSONRPC_REQUEST && audit_method(info[i].method)
            && audit_refusing(rc->srv->name, body + el[i].off, &info[i])) {
            rc->refusal.done = true;
            return http_error(rc, MHD_HTTP_SERVICE_UNAVAILABLE, JSONRPC_INTERNAL_ERROR,
                              HTTP_UNAUDITED);
        }
    }
    return MHD_YES;
}

/* Why a batch is refused: the revisions that have them, or the old transport that has none. */
const char *
http_no_batches(unsigned over, char *buf, size_t size)
{
    if (over == REVISION_HTTP_SSE)
        snprintf(buf, size, "JSON-RPC batches are not part of %s", revision_list(over));
    else
        snprintf(buf, size, "JSON-RPC batches exist only in protocol revision %s",
                 revision_list_batches());
    return buf;
}

struct jsonrpc_info *
http_batch_open(struct http_req *rc, bool allowed, struct jsonrpc_span *el, size_t max, size_t *n,
                bool *requests, enum MHD_Result *ret)
{
    char why[128];
    if (!allowed) {
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          http_no_batches(REVISION_STREAMABLE, why, sizeof why));
        return NULL;
    }
    if (jsonrpc_batch_split(buf_head(&rc->body), buf_used(&rc->body), el, max, n) == -1) {
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "a batch may hold at most 256 messages");
        return NULL;
    }
    if (*n == 0) {
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "empty batch");
        return NULL;
    }
    struct jsonrpc_info *info = xcalloc(*n, sizeof(*info));
    *requests = false;
    *ret = http_batch_scan(rc, el, info, *n, requests);
    if (rc->responded) {
        free(info);
        return NULL;
    }
    return info;
}

/*
 * A JSON array in one POST: 2025-03-26 sessions only. Requests in it are
 * answered on one SSE stream, an event each; a batch of notifications and responses gets 202.
 */
static enum MHD_Result
http_post_batch(struct http_req *rc)
{
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc); /* initialize, the only request without one, is never batched */
    struct jsonrpc_span el[SESSION_BATCH_MAX];
    size_t n;
    bool requests;
    enum MHD_Result ret;
    struct jsonrpc_info *info =
        http_batch_open(rc, session_batches(s), el, ARRAY_LEN(el), &n, &requests, &ret);
    if (info == NULL)
        return ret;
    enum session_status status;
    struct stream *st = requests ? session_stream_open(s, false, &status) : NULL;
    if (requests && st == NULL) {
        free(info);
        return http_session_error(rc, status);
    }
    struct trace_in tin;
    struct trace_in *trace = http_access_trace(rc, &tin);
    status = session_client_batch(s, st, buf_head(&rc->body), buf_used(&rc->body), el, info, n,
                                  rc->grants, trace);
    http_access_traced(rc, trace);
    free(info);
    if (status != SESSION_OK) {
        if (st != NULL)
            session_stream_detach(rc->sid, st);
        return http_session_error(rc, status);
    }
    return st != NULL ? http_hold(rc, st, false) : http_empty(rc, MHD_HTTP_ACCEPTED);
}

/*
 * Scans a POST body as one message (one over max_body_bytes never gets here: http.c answers 413).
 * A refusal every POST shares is answered here (400 -32700 not JSON): the caller returns *ret when
 * rc->responded is set.
 */
int
http_scan_body(struct http_req *rc, struct jsonrpc_info *info, const char **err,
               enum MHD_Result *ret)
{
    int st = jsonrpc_scan(buf_head(&rc->body), buf_used(&rc->body), info, err);
    if (st == JSONRPC_OK) {
        http_access_mcp(rc, info);
        rc->scanned = info; /* until http_post returns (http_finish) */
    }
    if (st == JSONRPC_EPARSE)
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_PARSE_ERROR, "Parse error");
    return st;
}

static void
http_exchange_done(void *arg, struct auth_exchanged *res)
{
    struct http_req *rc = arg;
    rc->xchg = NULL;
    rc->xres = res;
    http_resume(rc);
}

/*
 * token_exchange: before a session's child starts, or a stateless request's principal pool has a
 * token for its children, the client's token is exchanged (auth.h); the request waits alone, its
 * connection suspended, and runs again when the exchange ends (as after an auth wait: http.c).
 * True when refused (403 refused, 502 a useless answer, 503 no answer) or waiting; false when
 * there is nothing to exchange or rc->xres holds the token.
 */
bool
http_exchange(struct http_req *rc, enum MHD_Result *ret)
{
    if (!rc->srv->token_exchange)
        return false;
    if (rc->xres != NULL && rc->xsrv != rc->srv) { /* a reload came: exchange for the new one */
        auth_exchanged_free(rc->xres);
        rc->xres = NULL;
    }
    if (rc->xres == NULL) {
        size_t n = 0;
        const char *tok = auth_bearer_token(http_header(rc, HTTP_H_AUTHORIZATION), &n);
        if (tok == NULL || n == 0) {
            *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                              "token exchange needs the client's bearer token");
            return true;
        }
        struct auth_exchanged *now = NULL;
        rc->xsrv = rc->srv;
        rc->xchg = auth_exchange_start(httpd.auth, rc->srv, tok, n, http_exchange_done, rc, &now);
        if (rc->xchg != NULL) {
            rc->auth_again = true;
            http_suspend(rc);
            *ret = MHD_YES;
            return true;
        }
        rc->xres = now;
    }
    if (rc->xres->status == AUTH_EXCHANGE_OK)
        return false;
    unsigned status = rc->xres->status == AUTH_EXCHANGE_REFUSED      ? MHD_HTTP_FORBIDDEN
                      : rc->xres->status == AUTH_EXCHANGE_BAD_ANSWER ? MHD_HTTP_BAD_GATEWAY
                                                                     : MHD_HTTP_SERVICE_UNAVAILABLE;
    char message[300];
    snprintf(message, sizeof message, "token exchange for this server failed: %s", rc->xres->why);
    log_info(NULL, "token exchange for [server:%s] refused for %s: %u %s", rc->srv->name,
             rc->principal->name, status, rc->xres->why);
    if (audit_on())
        audit_event("refused_exchange", NULL, rc->srv->name, NULL, (int)status, rc->xres->why, NULL,
                    NULL);
    struct MHD_Response *r = http_error_response(
        status == MHD_HTTP_FORBIDDEN ? JSONRPC_INVALID_REQUEST : JSONRPC_INTERNAL_ERROR, message);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    *ret = http_queue(rc, status, r);
    return true;
}

/* A new session of rc's principal, with its exchanged token when the server has token_exchange. */
static struct session *
http_session_new(struct http_req *rc, int *status, const char **why)
{
    if (!rc->srv->token_exchange)
        return session_create(rc->srv, rc->principal, rc->claims, status, why);
    struct session *s =
        session_create_exchanged(rc->srv, rc->principal, rc->claims, rc->xres,
                                 http_header(rc, HTTP_H_AUTHORIZATION), status, why);
    auth_exchanged_free(rc->xres);
    rc->xres = NULL;
    return s;
}

/* The new session's client, as the access log names it (http_access.c). */
static void
http_session_client(const struct http_req *rc, struct session *s)
{
    char client[64];
    http_access_client(rc, client, sizeof(client));
    session_set_client(s, client);
}

enum MHD_Result
http_post(struct http_req *rc)
{
    struct jsonrpc_info info;
    const char *err = NULL;
    enum MHD_Result ret = MHD_NO;
    int rc_scan = http_scan_body(rc, &info, &err, &ret);
    if (rc->responded)
        return ret;
    if (http_is_stateless(rc, rc_scan, &info))
        return http_stateless_post(rc, rc_scan, &info, err);
    /* A session's POST had its version judged by http_refuse_early. */
    if (rc->sid[0] == '\0' && http_refuse_version(rc, &ret))
        return ret;
    if (rc->sid[0] != '\0' && pool_session_named(rc->sid))
        return http_pooled_post(rc, rc_scan, &info, err);
    if (rc_scan == JSONRPC_EBATCH)
        return http_post_batch(rc);
    if (rc_scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          err ? err : "Invalid Request");
    bool is_init = info.kind == JSONRPC_REQUEST && strcmp(info.method, "initialize") == 0;
    struct session *s;
    if (rc->sid[0] == '\0' && is_init && rc->srv->session_pooled)
        return http_pooled_initialize(rc, &info);
    if (rc->sid[0] == '\0' && is_init) {
        if (http_refuse_drained(rc, &info, &ret) || http_exchange(rc, &ret))
            return ret;
        if (pool_session_count() > 0 && http_sessions_full())
            return http_error(rc, MHD_HTTP_SERVICE_UNAVAILABLE, JSONRPC_INTERNAL_ERROR,
                              "too many sessions");
        int status = 500;
        const char *why = "cannot start the upstream server";
        s = http_session_new(rc, &status, &why);
        if (s == NULL)
            return http_error(rc, (unsigned)status,
                              status == 403 ? JSONRPC_INVALID_REQUEST : JSONRPC_INTERNAL_ERROR,
                              why);
        http_session_client(rc, s);
        snprintf(rc->sid, sizeof(rc->sid), "%s", session_id(s));
        http_sid_tag(rc);
        return http_post_request(rc, s, true, &info);
    }
    s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc);
    if (is_init)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "session is already initialized");
    if (info.kind == JSONRPC_REQUEST)
        return http_post_request(rc, s, false, &info);
    enum session_status status =
        session_client_other(s, buf_head(&rc->body), buf_used(&rc->body), &info);
    if (status != SESSION_OK)
        return http_session_error(rc, status);
    return http_empty(rc, MHD_HTTP_ACCEPTED);
}

enum MHD_Result
http_get(struct http_req *rc)
{
    if (rc->sid[0] == '\0' && http_stateless_header(http_header(rc, HTTP_H_VERSION)))
        return http_stateless_refuse_method(rc);
    if (rc->sid[0] != '\0' && pool_session_named(rc->sid)) {
        struct pool_session *ps = http_pooled_session(rc);
        if (ps == NULL)
            return http_pooled_none(rc);
        enum pool_status pst;
        const char *last = http_header(rc, HTTP_H_LAST_EVENT_ID);
        struct stream *st =
            last != NULL ? pool_session_resume(ps, last, &pst) : pool_session_get(ps, &pst);
        if (st == NULL && last != NULL) /* the words of a child-mode session's refusal */
            return http_session_error(rc, pst == POOL_E_CONFLICT ? SESSION_E_CONFLICT
                                                                 : SESSION_E_EVICTED);
        if (st == NULL)
            return http_pooled_error(rc, NULL, pst, NULL);
        rc->pooled = true;
        return http_sse(rc, st, false);
    }
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc);
    enum session_status status;
    const char *last = http_header(rc, HTTP_H_LAST_EVENT_ID);
    struct stream *st = last != NULL ? session_stream_resume(s, last, &status)
                                     : session_stream_open(s, true, &status);
    if (st == NULL)
        return http_session_error(rc, status);
    return http_sse(rc, st, false);
}

enum MHD_Result
http_delete(struct http_req *rc)
{
    if (rc->sid[0] == '\0' && http_stateless_header(http_header(rc, HTTP_H_VERSION)))
        return http_stateless_refuse_method(rc);
    if (rc->sid[0] != '\0' && pool_session_named(rc->sid)) {
        struct pool_session *ps = http_pooled_session(rc);
        if (ps == NULL)
            return http_pooled_none(rc);
        pool_session_delete(ps);
        return http_empty(rc, MHD_HTTP_OK);
    }
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc);
    session_close(s, SESSION_END_DELETED, NULL);
    return http_empty(rc, MHD_HTTP_OK);
}

/*
 * GET PATH/sse: a new session whose one stream this is. The endpoint event carries a reference
 * relative to PATH/sse ("messages?sessionId=..."), so it stays right behind a proxy that mounts
 * the gateway under another prefix.
 */
enum MHD_Result
http_legacy_sse(struct http_req *rc)
{
    if (rc->srv->session_pooled)
        return http_pooled_sse_open(rc); /* a session with no process */
    enum MHD_Result ret;
    if (http_refuse_drained(rc, NULL, &ret) || http_exchange(rc, &ret))
        return ret;
    int status = 500;
    const char *why = "cannot start the upstream server";
    struct session *s = http_session_new(rc, &status, &why);
    if (s == NULL)
        return http_error(rc, (unsigned)status,
                          status == 403 ? JSONRPC_INVALID_REQUEST : JSONRPC_INTERNAL_ERROR, why);
    http_session_client(rc, s);
    snprintf(rc->sid, sizeof(rc->sid), "%s", session_id(s));
    http_sid_tag(rc);
    char endpoint[32 + CRYPTO_SESSION_ID_MAX];
    snprintf(endpoint, sizeof(endpoint), "messages?sessionId=%s", session_id(s));
    return http_sse(rc, session_legacy_open(s, endpoint), false);
}

/* POST PATH/messages?sessionId=...: one message, 202; answers travel on the session's stream. */
enum MHD_Result
http_legacy_post(struct http_req *rc)
{
    const char *v = MHD_lookup_connection_value(rc->c, MHD_GET_ARGUMENT_KIND, "sessionId");
    if (v == NULL || v[0] == '\0')
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "sessionId query parameter is required");
    snprintf(rc->sid, sizeof(rc->sid), "%s", v);
    http_sid_tag(rc);
    if (rc->srv->session_pooled) /* logged as a pooled session of this transport is */
        pool_session_sse_label(rc->sid, rc->sid_tag);
    struct pool_session *ps = strlen(v) < sizeof(rc->sid) ? http_pooled_sse_find(rc) : NULL;
    if (ps != NULL)
        return http_pooled_sse_post(rc, ps);
    struct session *s =
        strlen(v) < sizeof(rc->sid) ? session_lookup(rc->sid, rc->srv, rc->principal, true) : NULL;
    if (s == NULL)
        return http_session_error(rc, SESSION_E_GONE);
    if (rc->srv->token_exchange)
        session_token_seen(s, http_header(rc, HTTP_H_AUTHORIZATION));
    struct jsonrpc_info info;
    const char *err = NULL;
    char why[128];
    enum MHD_Result ret = MHD_NO;
    int rc_scan = http_scan_body(rc, &info, &err, &ret);
    if (rc->responded)
        return ret;
    if (rc_scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          rc_scan == JSONRPC_EBATCH
                              ? http_no_batches(REVISION_HTTP_SSE, why, sizeof why)
                          : err ? err
                                : "Invalid Request");
    enum session_status status;
    if (info.kind == JSONRPC_REQUEST) {
        if (strcmp(info.method, "initialize") == 0 && session_initialized(s))
            return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                              "session is already initialized");
        if (audit_on() && audit_method(info.method) && http_refuse_unaudited(rc, &info, &ret))
            return ret;
        struct trace_in tin;
        struct trace_in *trace = http_access_trace(rc, &tin);
        status = session_client_request(s, session_legacy_stream(s), buf_head(&rc->body),
                                        buf_used(&rc->body), &info, rc->grants, trace);
        http_access_traced(rc, trace);
    } else {
        status = session_client_other(s, buf_head(&rc->body), buf_used(&rc->body), &info);
    }
    if (status != SESSION_OK)
        return http_session_error(rc, status);
    return http_queue(rc, MHD_HTTP_ACCEPTED, http_static_response("Accepted"));
}

/* Checks that need only the headers; answers and returns true when the request is refused. */
static bool
http_refuse_origin(struct http_req *rc, enum MHD_Result *ret)
{
    if (http_host_refused(rc)) {
        http_refusal(rc, "refused_policy", 0, NULL);
        *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Host not allowed");
        return true;
    }
    http_refusal(rc, "refused_policy", 0, NULL); /* the two below, and nothing else, keep it */
    if (!http_rules_origin_allowed(httpd.cfg->allowed_origins,
                                   http_header(rc, HTTP_H_ORIGIN))) {
        *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Origin not allowed");
        return true;
    }
    if (!http_rules_fetch_site_allowed(http_header(rc, HTTP_H_ORIGIN),
                                       http_header(rc, HTTP_H_SEC_FETCH_SITE))) {
        *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                          "a browser's cross-site request without Origin is not allowed");
        return true;
    }
    rc->refusal.event = NULL;
    return false;
}

/*
 * 401 (no token, or one that does not verify) or 403 (scopes), with the RFC 6750 / RFC 9728
 * challenge: where the resource metadata is, and the scopes this server needs.
 */
static enum MHD_Result
http_auth_refusal(struct http_req *rc, enum auth_status st, const char *why)
{
    const struct config_auth *ca = &httpd.cfg->auth;
    char meta[1200], scopes[1024] = "", challenge[3000];
    if (auth_metadata_url(ca, rc->srv, meta, sizeof(meta)) == -1)
        meta[0] = '\0';
    size_t o = 0;
    for (char **sc = rc->srv->required_scopes; sc && *sc && o < sizeof(scopes); sc++)
        o += (size_t)snprintf(scopes + o, sizeof(scopes) - o, "%s%s", o ? " " : "", *sc);
    int n = snprintf(challenge, sizeof(challenge), "Bearer resource_metadata=\"%s\"", meta);
    if (st != AUTH_MISSING)
        n += snprintf(challenge + n, sizeof(challenge) - (size_t)n,
                      ", error=\"%s\", error_description=\"%s\"",
                      st == AUTH_SCOPE ? "insufficient_scope" : "invalid_token", why);
    if (scopes[0] != '\0')
        snprintf(challenge + n, sizeof(challenge) - (size_t)n, ", scope=\"%s\"", scopes);
    unsigned status = st == AUTH_SCOPE ? MHD_HTTP_FORBIDDEN : MHD_HTTP_UNAUTHORIZED;
    struct http_server *row = metrics_row_of(&httpd.servers, rc->srv->name, sizeof(*row));
    row->refused_auth[st == AUTH_MISSING ? 0 : st == AUTH_INVALID ? 1 : 2]++;
    char message[256];
    snprintf(message, sizeof(message), "%s: %s",
             status == MHD_HTTP_FORBIDDEN ? "Forbidden" : "Unauthorized", why);
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, message);
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    log_info(NULL, "request refused: %u %s", status, why);
    http_refusal(rc, "refused_auth", JSONRPC_INVALID_REQUEST, why);
    return http_queue(rc, status, r);
}

static void
http_auth_wake(void *arg)
{
    struct http_req *rc = arg;
    rc->auth_wait = NULL;
    http_resume(rc);
}

void
http_auth_abandon(struct http_req *rc)
{
    if (rc->auth_wait == NULL && rc->xchg == NULL)
        return;
    auth_wait_cancel(rc->auth_wait);
    rc->auth_wait = NULL;
    auth_exchange_cancel(rc->xchg);
    rc->xchg = NULL;
    http_drop(rc);
}

/*
 * The token needs keys or an introspection answer still on their way: the request waits alone,
 * its connection suspended, and every check runs again when the wait ends (http.c).
 */
static enum MHD_Result
http_auth_wait(struct http_req *rc)
{
    rc->auth_wait = auth_wait(httpd.auth, http_auth_wake, rc);
    rc->auth_again = true;
    http_suspend(rc);
    return MHD_YES;
}

/* Who is asking, and what their token grants on rc->srv. True when refused or waiting. */
static bool
http_refuse_token(struct http_req *rc, enum MHD_Result *ret)
{
    const char *why = NULL;
    char client[64];
    http_access_client(rc, client, sizeof(client));
    auth_set_client(httpd.auth, client);
    enum auth_status st =
        auth_check_claims(httpd.auth, http_header(rc, HTTP_H_AUTHORIZATION), rc->srv,
                          util_now_unix(), &rc->principal, &rc->grants, &rc->claims, &why);
    auth_set_client(httpd.auth, NULL);
    if (st == AUTH_OK)
        http_audit_who(rc);
    if (st == AUTH_PENDING) {
        *ret = http_auth_wait(rc);
        return true;
    }
    if (st == AUTH_UNAVAILABLE) {
        httpd.auth_unavailable++;
        struct MHD_Response *r =
            http_error_response(JSONRPC_INTERNAL_ERROR,
                                "Service unavailable: the authorization server cannot be reached");
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        log_info(NULL, "request refused: 503 %s", why);
        http_refusal(rc, "refused_auth", JSONRPC_INTERNAL_ERROR,
                     "the authorization server cannot be reached");
        *ret = http_queue(rc, MHD_HTTP_SERVICE_UNAVAILABLE, r);
        return true;
    }
    if (st != AUTH_OK) {
        *ret = http_auth_refusal(rc, st, why);
        return true;
    }
    return false;
}

/* Who is asking, and whether their bucket has a request left. True when refused or waiting. */
static bool
http_refuse_auth(struct http_req *rc, enum MHD_Result *ret)
{
    if (http_refuse_token(rc, ret))
        return true;
    uint64_t retry_ms = 0;
    if (auth_rate_take(rc->principal, &httpd.cfg->auth, util_now_ms(), &retry_ms))
        return false;
    httpd.rate_limited++;
    char retry[24];
    snprintf(retry, sizeof(retry), "%" PRIu64, (retry_ms + 999) / 1000);
    struct MHD_Response *r =
        http_error_response(JSONRPC_INTERNAL_ERROR, "rate limit exceeded (rate_limit_per_s)");
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry);
    log_debug(NULL, "request refused: 429 rate limit of %s", rc->principal->name);
    http_refusal(rc, NULL, JSONRPC_INTERNAL_ERROR, "rate limit exceeded (rate_limit_per_s)");
    *ret = http_queue(rc, MHD_HTTP_TOO_MANY_REQUESTS, r);
    return true;
}

static bool
http_refuse_body(struct http_req *rc, enum MHD_Result *ret)
{
    if (!http_rules_is_json(http_header(rc, HTTP_H_CONTENT_TYPE))) {
        *ret = http_error(rc, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, JSONRPC_INVALID_REQUEST,
                          "Content-Type must be application/json");
        return true;
    }
    uint64_t n;
    if (http_content_length(rc, &n) == -1 || n <= httpd.cfg->max_body_bytes)
        return false;
    /* Drained first (http.c answers once it is in), unless the client waits for this answer. */
    rc->too_big = true;
    *ret = http_rules_drain(n, http_header(rc, HTTP_H_EXPECT), httpd.cfg->max_body_bytes)
               ? MHD_YES
               : http_too_big(rc);
    return true;
}

/* The 2024-11-05 paths: the same Host and Origin rules; GET on /sse, POST on /messages. */
bool
http_refuse_legacy(struct http_req *rc, enum MHD_Result *ret)
{
    if (http_refuse_origin(rc, ret) || http_refuse_auth(rc, ret))
        return true;
    enum http_method want = rc->kind == HTTP_LEGACY_SSE ? HTTP_GET : HTTP_POST;
    if (rc->method != want) {
        *ret = http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST,
                          "Method not allowed");
        return true;
    }
    const char *accept = http_header(rc, HTTP_H_ACCEPT);
    if (want == HTTP_GET && accept != NULL && !http_rules_accepts(accept, "text/event-stream")) {
        *ret = http_error(rc, MHD_HTTP_NOT_ACCEPTABLE, JSONRPC_INVALID_REQUEST,
                          "Accept must list text/event-stream");
        return true;
    }
    return want == HTTP_POST && http_refuse_body(rc, ret);
}

/* A legacy request's MCP-Protocol-Version: absent, or a revision of a session. */
static bool
http_refuse_version(struct http_req *rc, enum MHD_Result *ret)
{
    const char *ver = http_header(rc, HTTP_H_VERSION);
    if (ver == NULL || revision_over(revision_named(ver), REVISION_STREAMABLE))
        return false;
    char why[160];
    snprintf(why, sizeof why, "Unsupported MCP-Protocol-Version (supported: %s)",
             revision_list(REVISION_STREAMABLE));
    *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, why);
    return true;
}

bool
http_refuse_again(struct http_req *rc, enum MHD_Result *ret)
{
    auth_principal_unref(rc->principal);
    rc->principal = NULL;
    auth_claims_unref(rc->claims);
    rc->claims = NULL;
    rc->grants = (struct policy_grants){ NULL, 0 };
    return http_refuse_origin(rc, ret) || http_refuse_token(rc, ret);
}

bool
http_refuse_early(struct http_req *rc, enum MHD_Result *ret)
{
    if (http_refuse_origin(rc, ret) || http_refuse_auth(rc, ret))
        return true;
    if (rc->method == HTTP_OTHER) {
        *ret = http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST,
                          "Method not allowed");
        return true;
    }
    const char *accept = http_header(rc, HTTP_H_ACCEPT);
    if ((rc->method == HTTP_POST
         && (accept == NULL || !http_rules_accepts(accept, "application/json")
             || !http_rules_accepts(accept, "text/event-stream")))
        || (rc->method == HTTP_GET
            && (accept == NULL || !http_rules_accepts(accept, "text/event-stream")))) {
        *ret = http_error(rc, MHD_HTTP_NOT_ACCEPTABLE, JSONRPC_INVALID_REQUEST,
                          rc->method == HTTP_POST
                              ? "Accept must list application/json and text/event-stream"
                              : "Accept must list text/event-stream");
        return true;
    }
    if (rc->method == HTTP_POST && http_refuse_body(rc, ret))
        return true;
    /*
     * Without a session a POST's era is its body's (http_stateless.c), and a stateless GET or
     * DELETE gets 405: the version is judged there.
     */
    const char *ver = http_header(rc, HTTP_H_VERSION);
    if (rc->sid[0] == '\0' && (rc->method == HTTP_POST || http_stateless_header(ver)))
        return false;
    return http_refuse_version(rc, ret);
}
