/* SPDX-License-Identifier: MIT */
/*
 * Answers and the request's headers, for every room of the HTTP layer: building and queueing
 * responses (every error body a JSON-RPC error object; while draining, each answer closes its
 * connection), the answer deferred until a refused request's body is read, header lookups, and
 * the Host check with its bounded logging.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "audit.h"
#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"

/* The layer's state (http_int.h): here, beside what every room uses, so no room needs http.c. */
struct http_globals httpd = { .listen_fd = -1, .run_due_ms = UINT64_MAX };

/*
 * A body follows the head of rc's request, and the gateway may read it to its end before
 * answering: a Content-Length within http_rules_drain_bytes, or chunked; not when the client
 * waits for 100 Continue (then the answer goes at once, before any body).
 */
static bool
http_body_follows(const struct http_req *rc)
{
    uint64_t n;
    if (http_content_length(rc, &n) == -1
        || (n == 0 && http_header(rc, HTTP_H_TRANSFER_ENCODING) == NULL))
        return false;
    return http_rules_drain(n, http_header(rc, HTTP_H_EXPECT), httpd.cfg->max_body_bytes);
}

enum MHD_Result
http_queue(struct http_req *rc, unsigned status, struct MHD_Response *r)
{
    /*
     * Draining (the listener is closed): each answer closes its connection, so a proxy's pooled
     * connection is not used again and its next request connects, is refused, and goes elsewhere.
     */
    if (httpd.quiesced && MHD_get_response_header(r, MHD_HTTP_HEADER_CONNECTION) == NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    /* A refusal the gateway made itself (no stream: no session or pool answered it). */
    if (status >= 400 && rc->st == NULL && audit_on())
        http_audit_refused(rc, status);
    rc->refusal.event = rc->refusal.why = NULL; /* they point into the caller's frame */
    rc->refusal.code = 0;
    if (rc->first_call && rc->deferred == NULL && http_body_follows(rc)) {
        /*
         * Refused from its headers while the client still sends a body: answering now would
         * have MHD close the socket under the client (EPIPE instead of the answer). The body is
         * read and discarded first (bounded, http_body), then this answer goes.
         */
        http_access_response(rc, status, r);
        rc->deferred = r;
        rc->deferred_status = status;
        rc->responded = true;
        httpd.responses[status / 100 < 6 ? status / 100 : 0]++;
        log_debug(rc->sid[0] ? rc->sid_tag : NULL, "http %u (once the body is read)", status);
        return MHD_YES;
    }
    http_access_response(rc, status, r);
    enum MHD_Result ret = MHD_queue_response(rc->c, status, r);
    httpd.responses[status / 100 < 6 ? status / 100 : 0]++;
    MHD_destroy_response(r);
    rc->responded = true;
    log_debug(rc->sid[0] ? rc->sid_tag : NULL, "http %u", status);
    return ret;
}

/* A response whose body is body (taken: freed by MHD). */
struct MHD_Response *
http_body_response(char *body, size_t len)
{
    http_access_sent(httpd.cur, len);
    return MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
}

/* 0.9.75 takes a non-const buffer even for persistent data; keep the one cast here. */
struct MHD_Response *
http_static_response(const char *text)
{
    http_access_sent(httpd.cur, strlen(text));
    return MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                           MHD_RESPMEM_PERSISTENT);
}

/* A JSON-RPC error object (id null) as an application/json response, for the caller to queue. */
struct MHD_Response *
http_json_response(char *body, size_t len)
{
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return r;
}

struct MHD_Response *
http_error_response(int code, const char *message)
{
    size_t len;
    char *body = jsonrpc_error_new(NULL, 0, code, message, &len);
    return http_json_response(body, len);
}

enum MHD_Result
http_error(struct http_req *rc, unsigned status, int code, const char *message)
{
    struct MHD_Response *r = http_error_response(code, message);
    http_refusal(rc, NULL, code, message);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                rc->kind == HTTP_MCP          ? "GET, POST, DELETE"
                                : rc->kind == HTTP_LEGACY_MSG ? "POST"
                                : rc->kind == HTTP_LEGACY_SSE ? "GET"
                                                              : "GET, HEAD");
    if (rc->kind == HTTP_MCP || rc->kind == HTTP_LEGACY_SSE || rc->kind == HTTP_LEGACY_MSG)
        log_info(rc->sid[0] ? rc->sid_tag : NULL, "request refused: %u %s", status, message);
    return http_queue(rc, status, r);
}

enum MHD_Result
http_empty(struct http_req *rc, unsigned status)
{
    return http_queue(rc, status, http_static_response(""));
}

/*
 * 413 for a body over max_body_bytes, with Connection: close: a client that sent more than it may
 * does not reuse the connection (answered from its headers, what it still sends is not read).
 */
enum MHD_Result
http_too_big(struct http_req *rc)
{
    struct MHD_Response *r =
        http_error_response(JSONRPC_INVALID_REQUEST, "request body exceeds max_body_bytes");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    http_refusal(rc, NULL, JSONRPC_INVALID_REQUEST, "request body exceeds max_body_bytes");
    log_info(rc->sid[0] ? rc->sid_tag : NULL, "request refused: 413 body over max_body_bytes");
    return http_queue(rc, MHD_HTTP_CONTENT_TOO_LARGE, r);
}

int
http_content_length(const struct http_req *rc, uint64_t *n)
{
    const char *clen = http_header(rc, HTTP_H_CONTENT_LENGTH);
    const char *why;
    *n = 0;
    return clen == NULL ? 0 : util_parse_u64(clen, 0, UINT64_MAX, n, &why);
}

const char *
http_header(const struct http_req *rc, enum http_hdr h)
{
    assert(rc->hdr_read);
    return rc->hdr[h];
}

/*
 * Refused Hosts logged after a start or a reload: enough for an operator to see which name a
 * proxy or a client sends and to list it, while a flood of bad Hosts moves only the counter.
 */
#define HTTP_HOST_LOGGED 10

bool
http_host_refused(struct http_req *rc)
{
    const char *host = http_header(rc, HTTP_H_HOST);
    if (http_rules_host_allowed(httpd.cfg->allowed_hosts, host))
        return false;
    httpd.host_refused++;
    if (httpd.host_logged < HTTP_HOST_LOGGED) {
        /* The value as received, cut: it comes from the peer (log.c escapes it). */
        if (host == NULL)
            log_warn(NULL, "refused a request without Host (403): [gateway] allowed_hosts "
                           "lists the names accepted");
        else
            log_warn(NULL,
                     "refused Host \"%.200s\"%s (403): not in [gateway] allowed_hosts; list it "
                     "there if clients (or a proxy in front) reach this gateway by that name",
                     host, strlen(host) > 200 ? "..." : "");
        if (++httpd.host_logged == HTTP_HOST_LOGGED)
            log_warn(NULL, "further refused Hosts are counted (mcpgw_http_host_refused_total), "
                           "not logged, until the next reload");
    }
    return true;
}
