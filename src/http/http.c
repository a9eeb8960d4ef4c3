/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front on libmicrohttpd 0.9.75 in external epoll mode (src/README.md, sections 1 and 6):
 * the daemon, its callbacks, the request context and the dispatch by route. The layer's other
 * rooms, none of which calls back into this file: http_reply.c (building and queueing answers,
 * header lookups, the Host check, the layer's state), http_conn.c (each client socket: hang-ups,
 * slow-client deadlines), http_sse.c (SSE bodies, suspend and resume, the response hold),
 * http_mcp.c (the MCP endpoint: Streamable HTTP and the 2024-11-05 transport, with the order of
 * its checks), http_stateless.c (the stateless era), http_ops.c (health, readiness, metrics, RFC
 * 9728 metadata), http_admin.c (the admin routes, a drained server's refusals), http_access.c
 * (the access log), http_rules.c (pure header rules, unit-tested). Their shared state is declared
 * in http_int.h; only these files include <microhttpd.h>.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "audit.h"
#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"

#define HTTP_PRM_PREFIX    "/.well-known/oauth-protected-resource"
#define HTTP_PARK_MHD_VERSION "0.9.75" /* the libmicrohttpd parking was read and tested on */
#define HTTP_RUNS_PER_TURN 4 /* MHD_run calls in one loop turn, at most (http_run) */

/* The well-known metadata paths exist only while a token is required. */
static bool
http_classify_prm(struct http_req *rc, const char *url)
{
    size_t plen = strlen(HTTP_PRM_PREFIX);
    if (httpd.cfg->auth.mode == CONFIG_AUTH_NONE || strncmp(url, HTTP_PRM_PREFIX, plen) != 0)
        return false;
    const char *rest = url + plen;
    for (size_t i = 0; i < httpd.cfg->n_servers; i++)
        if ((rest[0] == '\0' && i == 0) || strcmp(rest, httpd.cfg->servers[i].path) == 0) {
            rc->kind = HTTP_PRM;
            rc->srv = &httpd.cfg->servers[i];
            return true;
        }
    return false;
}

static void
http_classify(struct http_req *rc, const char *url, const char *method)
{
    rc->method = strcmp(method, "POST") == 0     ? HTTP_POST
                 : strcmp(method, "GET") == 0    ? HTTP_GET
                 : strcmp(method, "DELETE") == 0 ? HTTP_DELETE
                                                 : HTTP_OTHER;
    rc->head = strcmp(method, "HEAD") == 0;
    rc->options = strcmp(method, "OPTIONS") == 0;
    rc->kind = HTTP_NOT_FOUND;
    rc->gen = httpd.gen;
    if (strcmp(url, "/healthz") == 0) {
        rc->kind = HTTP_HEALTH;
        return;
    }
    if (strcmp(url, "/readyz") == 0) {
        rc->kind = HTTP_READY;
        return;
    }
    if (strcmp(url, "/metrics") == 0) {
        rc->kind = HTTP_METRICS;
        return;
    }
    if (strcmp(url, "/admin/inflight") == 0 || strncmp(url, "/admin/sessions/", 16) == 0
        || strncmp(url, "/admin/servers/", 15) == 0) {
        rc->kind = HTTP_ADMIN;
        return;
    }
    if (http_classify_prm(rc, url))
        return;
    for (size_t i = 0; i < httpd.cfg->n_servers; i++)
        if (strcmp(url, httpd.cfg->servers[i].path) == 0) {
            rc->kind = HTTP_MCP;
            rc->srv = &httpd.cfg->servers[i];
            return;
        }
    for (size_t i = 0; i < httpd.cfg->n_servers && httpd.cfg->legacy_sse; i++) {
        const char *path = httpd.cfg->servers[i].path;
        size_t plen = strlen(path);
        if (strncmp(url, path, plen) != 0)
            continue;
        const char *rest = url + plen - (plen > 0 && path[plen - 1] == '/');
        if (strcmp(rest, "/sse") == 0 || strcmp(rest, "/messages") == 0) {
            rc->kind = rest[1] == 's' ? HTTP_LEGACY_SSE : HTTP_LEGACY_MSG;
            rc->srv = &httpd.cfg->servers[i];
            return;
        }
    }
}

static enum MHD_Result
http_begin(struct http_req *rc, const char *url, const char *method)
{
    http_classify(rc, url, method);
    enum MHD_Result ret = MHD_NO;
    if (rc->conn != NULL && rc->conn->nul_in_uri)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "a NUL (%00) in the request target");
    /* Every route checks Host (DNS rebinding reaches /metrics too); the MCP routes Origin too. */
    if (rc->kind != HTTP_MCP && rc->kind != HTTP_LEGACY_SSE && rc->kind != HTTP_LEGACY_MSG
        && http_host_refused(rc))
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Host not allowed");
    switch (rc->kind) {
    case HTTP_HEALTH:
        return http_health(rc);
    case HTTP_READY:
        return http_ready(rc);
    case HTTP_METRICS:
        return http_metrics(rc);
    case HTTP_ADMIN:
        return http_admin(rc, url);
    case HTTP_PRM:
        return http_prm(rc);
    case HTTP_NOT_FOUND:
        return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not found");
    case HTTP_LEGACY_SSE:
    case HTTP_LEGACY_MSG:
        return http_refuse_legacy(rc, &ret) ? ret : MHD_YES;
    case HTTP_MCP:
        break;
    }
    http_read_sid(rc);
    if (http_refuse_early(rc, &ret))
        return ret;
    return MHD_YES;
}

/*
 * A reload came while the body arrived (or while the request waited, in here, for the
 * authorization server): rc->srv names a definition of a retired configuration, and rc->grants
 * index its tool policy, which is freed once no session or pool uses it. The request is judged
 * again, by the configuration now in force, as if it had just come: its route, then Origin and
 * its token (a reload is how tokens files and keys rotate: the old judgement no longer holds, and
 * scopes the old policy did not number cannot be carried over). True when refused or waiting
 * (*ret).
 */
static bool
http_rejudge(struct http_req *rc, const char *url, const char *method, enum MHD_Result *ret)
{
    enum http_kind kind = rc->kind;
    rc->judge_again = false;
    http_classify(rc, url, method);
    if (rc->kind != kind) {
        *ret = http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST,
                          "Not found (the configuration was reloaded)");
        return true;
    }
    return (kind == HTTP_MCP || kind == HTTP_LEGACY_SSE || kind == HTTP_LEGACY_MSG)
           && http_refuse_again(rc, ret);
}

static enum MHD_Result
http_finish(struct http_req *rc)
{
    if (rc->kind == HTTP_LEGACY_SSE)
        return http_legacy_sse(rc);
    if (rc->kind == HTTP_LEGACY_MSG) {
        enum MHD_Result ret = http_legacy_post(rc);
        rc->scanned = NULL;
        buf_clear(&rc->body);
        return ret;
    }
    switch (rc->method) {
    case HTTP_POST: {
        enum MHD_Result ret = http_post(rc);
        rc->scanned = NULL;   /* http_post's own */
        if (rc->xchg == NULL) /* else an initialize waits for its token exchange: kept */
            buf_clear(
                &rc->body); /* forwarded (copied) or refused: a long stream need not keep it */
        return ret;
    }
    case HTTP_GET:
        return http_get(rc);
    case HTTP_DELETE:
        return http_delete(rc);
    case HTTP_OTHER:
        break;
    }
    return http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST,
                      "Method not allowed");
}

#define HTTP_HDR(name) { name, sizeof name - 1 }

/* The names of enum http_hdr, in its order. */
static const struct {
    const char *name;
    size_t len;
} http_hdr_names[HTTP_H_COUNT] = {
    [HTTP_H_HOST] = HTTP_HDR(MHD_HTTP_HEADER_HOST),
    [HTTP_H_AUTHORIZATION] = HTTP_HDR(MHD_HTTP_HEADER_AUTHORIZATION),
    [HTTP_H_VERSION] = HTTP_HDR(HTTP_VERSION_HEADER),
    [HTTP_H_SID] = HTTP_HDR(HTTP_SID_HEADER),
    [HTTP_H_ORIGIN] = HTTP_HDR(MHD_HTTP_HEADER_ORIGIN),
    [HTTP_H_SEC_FETCH_SITE] = HTTP_HDR("Sec-Fetch-Site"),
    [HTTP_H_LAST_EVENT_ID] = HTTP_HDR(MHD_HTTP_HEADER_LAST_EVENT_ID),
    [HTTP_H_ACCEPT] = HTTP_HDR(MHD_HTTP_HEADER_ACCEPT),
    [HTTP_H_CONTENT_TYPE] = HTTP_HDR(MHD_HTTP_HEADER_CONTENT_TYPE),
    [HTTP_H_CONTENT_LENGTH] = HTTP_HDR(MHD_HTTP_HEADER_CONTENT_LENGTH),
    [HTTP_H_TRANSFER_ENCODING] = HTTP_HDR(MHD_HTTP_HEADER_TRANSFER_ENCODING),
    [HTTP_H_EXPECT] = HTTP_HDR(MHD_HTTP_HEADER_EXPECT),
    [HTTP_H_MCP_NAME] = HTTP_HDR("Mcp-Name"),
    [HTTP_H_MCP_METHOD] = HTTP_HDR("Mcp-Method"),
    [HTTP_H_TRACEPARENT] = HTTP_HDR("traceparent"),
    [HTTP_H_TRACESTATE] = HTTP_HDR("tracestate"),
    [HTTP_H_REQUEST_ID] = HTTP_HDR("X-Request-Id"),
    [HTTP_H_FORWARDED_FOR] = HTTP_HDR("X-Forwarded-For"),
};

/* The longest of them, MCP-Protocol-Version; and at most how many share one length. */
#define HTTP_HDR_LEN_MAX  20
#define HTTP_HDR_SAME_LEN 3

/* http_hdr_names by length: index + 1 of each name that long, 0 after the last (http_start). */
static unsigned char http_hdr_by_len[HTTP_HDR_LEN_MAX + 1][HTTP_HDR_SAME_LEN + 1];

static void
http_hdr_index(void)
{
    static bool made;
    if (made)
        return;
    for (size_t i = 0; i < HTTP_H_COUNT; i++) {
        size_t len = http_hdr_names[i].len, k = 0;
        assert(len <= HTTP_HDR_LEN_MAX);
        while (http_hdr_by_len[len][k] != 0)
            k++;
        assert(k < HTTP_HDR_SAME_LEN);
        http_hdr_by_len[len][k] = (unsigned char)(i + 1);
    }
    made = true;
}

struct http_head_pass {
    struct http_rules_head rules;
    struct http_req *rc;
};

/* One header of the head's pass: its layout checked, its value kept when the gateway reads it. */
static enum MHD_Result
http_head_value(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                const char *value, size_t value_size)
{
    (void)kind;
    struct http_head_pass *hp = cls;
    http_rules_head_field(&hp->rules, key, key_size, value, value_size);
    if (key_size > HTTP_HDR_LEN_MAX)
        return MHD_YES;
    for (const unsigned char *k = http_hdr_by_len[key_size]; *k != 0; k++) {
        size_t i = *k - 1u;
        if (strncasecmp(key, http_hdr_names[i].name, key_size) == 0) {
            if (hp->rc->hdr[i] == NULL) /* the first, as MHD_lookup_connection_value gives */
                hp->rc->hdr[i] = value;
            break;
        }
    }
    return MHD_YES;
}

/*
 * The one pass over the request's head, before anything reads a header (http_header): the values
 * the gateway reads are kept, and the layout is checked for what two parsers could read two ways
 * (request smuggling behind a proxy): see http_rules_head_refusal. The head is read where MHD
 * 0.9.75 parsed it, in place (http_rules.h); the target's raw length comes from the request-line
 * hook. Returns why the head must be refused with 400, or NULL.
 */
static const char *
http_read_head(struct http_req *rc, const char *method, const char *version, size_t size)
{
    struct http_head_pass hp = { .rc = rc };
    http_rules_head_start(&hp.rules, method, rc->conn != NULL ? rc->conn->target : NULL,
                          rc->conn != NULL ? rc->conn->target_len : 0, version, size);
    MHD_get_connection_values_n(rc->c, MHD_HEADER_KIND, http_head_value, &hp);
    rc->hdr_read = true;
    return http_rules_head_refusal(&hp.rules);
}

/*
 * The first look at a request, before any handler runs: the head's size (431 over
 * max_header_bytes), then its layout (bad: why http_read_head refuses it, or NULL), 400. True
 * when refused (*ret is the answer).
 */
static bool
http_refuse_head(struct http_req *rc, size_t size, const char *bad, enum MHD_Result *ret)
{
    if (size > httpd.cfg->max_header_bytes) {
        *ret = http_error(rc, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, JSONRPC_INVALID_REQUEST,
                          "request headers exceed max_header_bytes");
        return true;
    }
    if (bad == NULL)
        return false;
    *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, bad);
    return true;
}

/*
 * A body chunk. One over max_body_bytes is discarded, the rest of it too, and answered 413 once it
 * is in, so that a client still sending reads the answer instead of a reset; past
 * http_rules_drain_bytes the connection is closed (false).
 */
static bool
http_body(struct http_req *rc, const char *data, size_t size)
{
    httpd.bytes_in += size;
    rc->body_bytes += size;
    if (!rc->responded && !rc->too_big && buf_append(&rc->body, data, size) == -1) {
        rc->too_big = true;
        buf_clear(&rc->body);
    }
    if ((!rc->too_big && rc->deferred == NULL)
        || rc->body_bytes <= http_rules_drain_bytes(httpd.cfg->max_body_bytes))
        return true;
    log_info(rc->sid[0] ? rc->sid_tag : NULL,
             "closing a connection: its request body went on past max_body_bytes + %u",
             HTTP_RULES_DRAIN_EXTRA_BYTES);
    return false;
}

/*
 * A request's record is larger than malloc's per-thread cache takes (about 1 KiB), so each one
 * allocated and freed would go through malloc's slow path (and, freed among small chunks, its
 * consolidation): finished ones are kept, zeroed again when reused (as calloc would), and freed at
 * stop. As many as one turn of the loop may finish: with 16 keep-alive clients of 4 requests each
 * in flight, 16 kept left three records in four to malloc. 64 of them are 87 KiB.
 */
#define HTTP_REQ_SPARES 64
/* Under AddressSanitizer none is kept: every record is freed, so a use after its end is caught. */
#if defined(__SANITIZE_ADDRESS__)
#define HTTP_REQ_KEEP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HTTP_REQ_KEEP 0
#endif
#endif
#ifndef HTTP_REQ_KEEP
#define HTTP_REQ_KEEP HTTP_REQ_SPARES
#endif
static struct http_req *http_req_spare[HTTP_REQ_SPARES];
static size_t http_req_spares;

static struct http_req *
http_req_new(void)
{
    if (http_req_spares == 0)
        return xcalloc(1, sizeof(struct http_req));
    struct http_req *rc = http_req_spare[--http_req_spares];
    memset(rc, 0, sizeof(*rc));
    return rc;
}

static void
http_req_release(struct http_req *rc)
{
#if HTTP_REQ_KEEP > 0
    if (http_req_spares < HTTP_REQ_KEEP) {
        http_req_spare[http_req_spares++] = rc;
        return;
    }
#endif
    free(rc);
}

static enum MHD_Result
http_handle(struct MHD_Connection *c, const char *url, const char *method, const char *version,
            const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    struct http_req *rc = *con_cls;
    if (rc == NULL) {
        rc = http_req_new();
        rc->c = c;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rc->conn = ci != NULL ? ci->socket_context : NULL;
        if (rc->conn != NULL)
            rc->conn->rc = rc;
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        size_t head_size = ci != NULL ? ci->header_size : 0;
        if (rc->conn != NULL)
            rc->conn->rx_bytes += head_size;
        const char *bad_head = http_read_head(rc, method, version, head_size);
        http_access_start(rc, url, method);
        httpd.cur = rc;
        log_set_request(rc->acc.rid);
        buf_init(&rc->body, httpd.cfg->max_body_bytes);
        *con_cls = rc;
        httpd.live++;
        if (rc->conn != NULL)
            rc->conn->deadline_ms = util_now_ms() + httpd.cfg->client_body_timeout_ms;
        enum MHD_Result ret;
        /* A head refused here has no body worth reading (its framing may be what is wrong). */
        if (http_refuse_head(rc, head_size, bad_head, &ret))
            return ret;
        rc->first_call = true;
        ret = http_begin(rc, url, method);
        rc->first_call = false;
        return ret;
    }
    if (rc->auth_again) {
        /*
         * Resumed after waiting for the authorization server. A connection suspended in MHD's
         * first call gets the first call again (MHD 0.9.75, connection.c: the state stays
         * HEADERS_PROCESSED), so every check runs again here and the body follows. One suspended
         * in the final call (http_rejudge) gets the final call again: judged again below.
         */
        if (rc->dropped)
            return MHD_NO;
        rc->auth_again = false;
        if (rc->body_in) {
            rc->judge_again = true;
        } else {
            rc->first_call = true;
            enum MHD_Result ret = http_begin(rc, url, method);
            rc->first_call = false;
            return ret;
        }
    }
    if (*upload_data_size > 0) {
        if (rc->conn != NULL)
            rc->conn->rx_bytes += *upload_data_size;
        bool more = http_body(rc, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return more ? MHD_YES : MHD_NO;
    }
    rc->body_in = true;
    if (rc->conn != NULL)
        rc->conn->deadline_ms = 0; /* the request is in: the response may take its time */
    if (rc->deferred != NULL) {
        struct MHD_Response *r = rc->deferred;
        rc->deferred = NULL;
        enum MHD_Result ret = MHD_queue_response(rc->c, rc->deferred_status, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (rc->responded)
        return MHD_YES;
    if (rc->held)
        return http_unhold(rc);
    if (rc->too_big)
        return http_too_big(rc);
    enum MHD_Result ret;
    if ((rc->gen != httpd.gen || rc->judge_again) && http_rejudge(rc, url, method, &ret))
        return ret;
    return http_finish(rc);
}

/* MHD's request callback: the request's id is on every line logged while it runs. */
static enum MHD_Result
http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
             const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    struct http_req *rc = *con_cls;
    if (rc != NULL) {
        httpd.cur = rc;
        log_set_request(rc->acc.rid);
        http_audit_who(rc);
    }
    enum MHD_Result ret =
        http_handle(c, url, method, version, upload_data, upload_data_size, con_cls);
    httpd.cur = NULL;
    log_set_request(NULL);
    audit_set_who(NULL); /* a record made outside a request has no client of its own */
    return ret;
}

static void
http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    struct http_req *rc = *con_cls;
    if (rc == NULL)
        return;
    log_set_request(rc->acc.rid);
    http_access_end(rc);
    http_detach(rc);
    auth_wait_cancel(rc->auth_wait);
    auth_exchange_cancel(rc->xchg);
    auth_exchanged_free(rc->xres);
    if (rc->deferred != NULL)
        MHD_destroy_response(rc->deferred); /* the client left before its body was in */
    if (rc->conn != NULL && rc->conn->rc == rc) {
        rc->conn->rc = NULL;
        rc->conn->deadline_ms = 0; /* idle keep-alive: connection_timeout_s applies */
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && rc->waited && rc->body_in)
            http_park(rc->conn);
    }
    auth_principal_unref(rc->principal);
    auth_claims_unref(rc->claims);
    buf_clear(&rc->body);
    log_set_request(NULL); /* before rc, whose id it points at, goes */
    http_req_release(rc);
    *con_cls = NULL;
    httpd.live--;
}

static void PRINTF(2, 0) http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char text[512];
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    /* MHD's messages end with a newline, which would be logged as a literal \n. */
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    log_debug(NULL, "libmicrohttpd: %s", text);
}

static int
http_listen(const struct config *cfg)
{
    char port[8];
    snprintf(port, sizeof(port), "%u", cfg->listen_port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
                    *res;
    int gai = getaddrinfo(cfg->listen_host, port, &hints, &res);
    if (gai != 0) {
        log_error(NULL, "listen %s: %s", cfg->listen_host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1
        || bind(fd, res->ai_addr, res->ai_addrlen) == -1 || listen(fd, 1024) == -1) {
        log_error(NULL, "listen %s:%s: %s", cfg->listen_host, port, strerror(errno));
        if (fd != -1)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned bound = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            bound = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            bound = ntohs(a->sin_port);
        }
    }
    log_info(NULL, "listening on %s%s%s:%u", ss.ss_family == AF_INET6 ? "[" : "", host,
             ss.ss_family == AF_INET6 ? "]" : "", bound);
    httpd.bound_loopback = bound != 0 && http_rules_loopback((struct sockaddr *)&ss);
    /*
     * [auth] mode none is for loopback only, and the text of listen does not prove it (a host
     * name such as 127.gw.example may resolve to a public address): the bound address decides.
     */
    if (cfg->auth.mode == CONFIG_AUTH_NONE && !httpd.bound_loopback) {
        log_error(NULL,
                  "listen %s is bound to a non-loopback address: [auth] mode none is for "
                  "loopback only; set mode = bearer or jwt",
                  cfg->listen_host);
        close(fd);
        return -1;
    }
    return fd;
}

static void
http_mhd_ready(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    (void)arg;
    httpd.need_run = true; /* http_run follows in the same turn */
}

int
http_start(struct loop *l, const struct config *cfg, struct auth *auth)
{
    httpd.l = l;
    httpd.cfg = cfg;
    httpd.auth = auth;
    http_hdr_index();
    /*
     * MHD's per-connection pool holds the head, a record per header line, and the read and write
     * buffers. Twice max_header_bytes: a head over max_header_bytes still fits, so the gateway
     * answers its 431 (JSON) rather than MHD (HTML) unless it is over twice that.
     */
    size_t pool =
        2 * cfg->max_header_bytes + 16384 > 32768 ? 2 * cfg->max_header_bytes + 16384 : 32768;
    httpd.listen_fd = http_listen(cfg);
    if (httpd.listen_fd == -1)
        return -1;
    /* The logger goes first, or MHD prints what it says before it to stderr unformatted. */
    httpd.d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, http_handler,
        NULL, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
        httpd.listen_fd, MHD_OPTION_NOTIFY_COMPLETED, http_completed, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, http_notify, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
        MHD_OPTION_URI_LOG_CALLBACK, http_request_line, NULL, MHD_OPTION_END);
    if (httpd.d == NULL) {
        log_error(NULL, "libmicrohttpd did not start");
        close(httpd.listen_fd);
        httpd.listen_fd = -1;
        return -1;
    }
    /* Parking relies on how this version suspends, resumes and polls (src/README.md, section 6). */
    httpd.park_ok = strcmp(MHD_get_version(), HTTP_PARK_MHD_VERSION) == 0;
    if (!httpd.park_ok)
        log_info(NULL, "libmicrohttpd %s: idle connections are not parked (known for %s)",
                 MHD_get_version(), HTTP_PARK_MHD_VERSION);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(httpd.d, MHD_DAEMON_INFO_EPOLL_FD);
    httpd.mhd_w = loop_watch_add(l, di->epoll_fd, EPOLLIN, http_mhd_ready, NULL);
    if (httpd.mhd_w == NULL) {
        log_error(NULL, "cannot watch libmicrohttpd's epoll fd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int
http_prepare(void)
{
    if (httpd.d == NULL)
        return -1;
    if (httpd.need_run)
        return 0;
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(httpd.d, &t) != MHD_YES) {
        httpd.run_due_ms = UINT64_MAX;
        return -1;
    }
    if (t > 86400000ull)
        t = 86400000ull;
    httpd.run_due_ms = util_now_ms() + t;
    return (int)t;
}

/*
 * MHD runs only when it has something to do: its epoll fd was ready, a connection was resumed, or
 * one of its timeouts is due. Each MHD_run costs an epoll_wait of its own (on MHD's epoll fd), and
 * each loop turn one more: while MHD has more to do at once (a resume from inside it; a connection
 * it left ready, such as a kept-alive one after its answer, which it must reset and then read),
 * it runs again here rather than after another turn whose epoll_wait would not wait. At most
 * HTTP_RUNS_PER_TURN times: child pipes and timers do not wait behind a busy MHD.
 */
void
http_run(void)
{
    if (httpd.d == NULL || (!httpd.need_run && util_now_ms() < httpd.run_due_ms))
        return;
    for (int i = 0; i < HTTP_RUNS_PER_TURN; i++) {
        httpd.need_run = false;
        MHD_run(httpd.d);
        http_park_check();
        MHD_UNSIGNED_LONG_LONG t;
        if (!httpd.need_run && (MHD_get_timeout(httpd.d, &t) != MHD_YES || t > 0))
            return;
    }
    if (httpd.need_run)
        loop_wake(httpd.l); /* resumed from inside the last MHD_run: run it again next turn */
}

/*
 * Stops accepting: the listening socket is closed, so a new connection is refused at once (a
 * proxy fails over to another instance) while the connections already open are still served.
 * MHD_quiesce_daemon takes the socket out of MHD's epoll set and hands it back to be closed.
 */
void
http_quiesce(void)
{
    if (httpd.d == NULL || httpd.listen_fd == -1)
        return;
    MHD_socket fd = MHD_quiesce_daemon(httpd.d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    httpd.listen_fd = -1;
    httpd.quiesced = true;
    log_info(NULL, "listener closed: new connections are refused, open ones still served");
}

bool
http_idle(void)
{
    return httpd.live == 0;
}

void
http_stop(void)
{
    if (httpd.d == NULL)
        return;
    /*
     * MHD 0.9.75 aborts when stopped with a connection suspended: a request still held or
     * streaming at the stop deadline is dropped and resumed first, a parked connection resumed,
     * and one run lets MHD see them.
     */
    size_t resumed = 0;
    for (struct http_conn *k = httpd.conns; k != NULL; k = k->next)
        if (k->rc != NULL && k->rc->suspended) {
            http_drop(k->rc);
            resumed++;
        }
    if (resumed > 0)
        log_warn(NULL, "stopping with %zu requests still waiting: their connections are closed",
                 resumed);
    httpd.park_ok = false; /* what completes in this last run stays resumed */
    if (http_unpark_all() + resumed > 0)
        MHD_run(httpd.d);
    loop_watch_del(httpd.mhd_w);
    httpd.mhd_w = NULL;
    MHD_stop_daemon(httpd.d);
    httpd.d = NULL;
    http_holds_stop();
    if (httpd.listen_fd != -1)
        close(httpd.listen_fd);
    httpd.listen_fd = -1;
    metrics_rows_free(&httpd.servers);
    while (http_req_spares > 0)
        free(http_req_spare[--http_req_spares]);
}

bool
http_config_fits(const struct config *cfg)
{
    return cfg->auth.mode != CONFIG_AUTH_NONE || httpd.bound_loopback;
}

void
http_set_config(const struct config *cfg, struct auth *auth)
{
    httpd.cfg = cfg;
    httpd.auth = auth;
    httpd.gen++;
    httpd.host_logged = 0; /* allowed_hosts may have changed: show what is refused now */
}
