/* SPDX-License-Identifier: MIT */
/*
 * The Streamable HTTP front (mcp-spec-checklist section 1) on libmicrohttpd 0.9.75 in external
 * epoll mode. Requests are checked in a fixed order: header size (431), Host and Origin (403), the
 * bearer token (401, or 403 for scopes; SECURITY.md), the principal's rate (429), method (405),
 * Accept (406), Content-Type (415), body size (413), MCP-Protocol-Version (400), JSON (400 -32700),
 * JSON-RPC (400 -32600), session (400 missing / 404 unknown or another principal's). Request lines,
 * headers and bodies must arrive within client_header_timeout_ms and client_body_timeout_ms; a
 * response being streamed has no such deadline. Every request gets an SSE body: the
 * response, and whatever the child sends on that request's behalf, arrive as events. While a stream
 * waits, its connection is suspended. Every client socket is watched, once per connection, with an
 * edge-triggered EPOLLRDHUP so a drop is seen at once (DESIGN.md section 2). Every error body is a
 * JSON-RPC error object.
 *
 * A POST's stream is held back for response_hold_ms: an answer that arrives in that time, with
 * nothing before it, leaves as one SSE body with a Content-Length in one write, instead of
 * headers, event and last chunk in three. Anything else (a notification first, the time up)
 * starts the stream as usual. The hold never delays a message, only headers with nothing after.
 */
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "auth.h"
#include "buf.h"
#include "crypto.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "session.h"

#define HTTP_SID_HEADER     "Mcp-Session-Id"
#define HTTP_VERSION_HEADER "MCP-Protocol-Version"

enum http_kind {
    HTTP_MCP = 0,
    HTTP_LEGACY_SSE, /* 2024-11-05 HTTP+SSE: GET PATH/sse */
    HTTP_LEGACY_MSG, /* 2024-11-05 HTTP+SSE: POST PATH/messages?sessionId= */
    HTTP_HEALTH,
    HTTP_READY,
    HTTP_METRICS,
    HTTP_ADMIN,
    HTTP_PRM, /* RFC 9728 protected resource metadata of rc->srv */
    HTTP_NOT_FOUND,
};

enum http_method {
    HTTP_POST = 0,
    HTTP_GET,
    HTTP_DELETE,
    HTTP_OTHER,
};

/*
 * After a hold, a body up to HTTP_COPY_MAX is copied into one buffer (headers and body leave in
 * one write); a larger one is sent from the stream's own messages (an iovec response, no copy),
 * when it has at most HTTP_IOV_MAX pieces.
 */
#define HTTP_COPY_MAX      (64u * 1024u)
#define HTTP_GONE_GRACE_MS 1000 /* a request still arriving when its client sent FIN */
#define HTTP_IOV_MAX       64

/* The messages an iovec response is sent from, released when MHD is done with it. */
struct http_sent {
    int n;
    struct msg *m[HTTP_IOV_MAX];
};

struct http_req;

/* One client connection, from MHD's connection-started to its closed notification. */
struct http_conn {
    struct loop_watch *w; /* EPOLLIN | EPOLLRDHUP | EPOLLET on the socket */
    int fd;
    struct http_req *rc;           /* the request being served */
    bool gone;                     /* the peer hung up */
    uint64_t deadline_ms;          /* the request's headers or body must be in by then; 0: none */
    struct http_conn *prev, *next; /* H.conns */
};

/* One HTTP request, from the first handler call to MHD's completed callback. */
struct http_req {
    struct MHD_Connection *c;
    enum http_kind kind;
    enum http_method method;
    const struct config_server *srv;
    struct buf body;
    bool too_big;
    bool responded; /* a response is queued */
    char sid[CRYPTO_SESSION_ID_MAX];
    struct stream *st;
    bool suspended;
    bool dropped;
    bool held;               /* a POST stream waiting for its answer, no response queued */
    bool with_sid;           /* the response carries Mcp-Session-Id (a new session) */
    struct loop_timer *hold; /* ends the hold */
    struct http_conn *conn;  /* NULL once MHD closed the connection */
    unsigned gen;            /* H.gen when the request began */
    bool head;               /* HEAD: HTTP_OTHER for the MCP endpoint, a GET for the probes */
    bool options;            /* OPTIONS: answered (CORS) only on the metadata routes */
    struct auth_principal *principal; /* who is asking (a reference), once authenticated */
};

static struct {
    struct MHD_Daemon *d;
    struct loop *l;
    const struct config *cfg;
    struct auth *auth;
    struct http_conn *conns; /* every open connection, for the header and body deadlines */
    struct loop_watch *mhd_w;
    int listen_fd;
    bool need_run;
    uint64_t run_due_ms;          /* MHD's next timeout, from http_prepare */
    size_t live;                  /* request contexts */
    unsigned gen;                 /* configuration generation: counts reloads */
    uint64_t responses[6];        /* by status class: [2] counts 2xx */
    uint64_t bytes_in, bytes_out; /* request bodies; response bodies (SSE included) */
    uint64_t refused_auth[3];     /* 401 missing, 401 invalid, 403 scope */
    uint64_t rate_limited;        /* 429 from the principal's token bucket */
    uint64_t slow_closed;         /* connections closed at a header or body deadline */
} H = { .listen_fd = -1, .run_due_ms = UINT64_MAX };

/* --- responses --------------------------------------------------------------------------- */

static enum MHD_Result
http_queue(struct http_req *rc, unsigned status, struct MHD_Response *r)
{
    enum MHD_Result ret = MHD_queue_response(rc->c, status, r);
    H.responses[status / 100 < 6 ? status / 100 : 0]++;
    MHD_destroy_response(r);
    rc->responded = true;
    log_debug(rc->sid[0] ? rc->sid : NULL, "http %u", status);
    return ret;
}

/* A response whose body is body (taken: freed by MHD). */
static struct MHD_Response *
http_body_response(char *body, size_t len)
{
    H.bytes_out += len;
    return MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
}

/* 0.9.75 takes a non-const buffer even for persistent data; keep the one cast here. */
static struct MHD_Response *
http_static_response(const char *text)
{
    H.bytes_out += strlen(text);
    return MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text,
                                           MHD_RESPMEM_PERSISTENT);
}

/* A JSON-RPC error object (id null) as an application/json response, for the caller to queue. */
static struct MHD_Response *
http_error_response(int code, const char *message)
{
    size_t len;
    char *body = jsonrpc_error_new(NULL, 0, code, message, &len);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return r;
}

static enum MHD_Result
http_error(struct http_req *rc, unsigned status, int code, const char *message)
{
    struct MHD_Response *r = http_error_response(code, message);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                rc->kind == HTTP_MCP          ? "GET, POST, DELETE"
                                : rc->kind == HTTP_LEGACY_MSG ? "POST"
                                : rc->kind == HTTP_LEGACY_SSE ? "GET"
                                                              : "GET, HEAD");
    if (rc->kind == HTTP_MCP || rc->kind == HTTP_LEGACY_SSE || rc->kind == HTTP_LEGACY_MSG)
        log_info(rc->sid[0] ? rc->sid : NULL, "request refused: %u %s", status, message);
    return http_queue(rc, status, r);
}

static enum MHD_Result
http_empty(struct http_req *rc, unsigned status)
{
    return http_queue(rc, status, http_static_response(""));
}

/* --- SSE bodies -------------------------------------------------------------------------- */

static void
http_resume(struct http_req *rc)
{
    if (!rc->suspended)
        return;
    rc->suspended = false;
    MHD_resume_connection(rc->c);
    /*
     * In external mode a resume wakes nothing: MHD_run must follow (engineering-notes 1.1). It
     * does at the end of this loop turn; http_run asks for another turn for resumes inside it.
     */
    H.need_run = true;
}

static void
http_wake(void *arg)
{
    http_resume(arg);
}

/* Hands the stream back to its session; dropped when it had not finished. */
static void
http_detach(struct http_req *rc)
{
    loop_timer_del(rc->hold);
    rc->hold = NULL;
    if (rc->st == NULL)
        return;
    struct stream *st = rc->st;
    rc->st = NULL;
    stream_set_wake(st, NULL, NULL);
    session_stream_detach(rc->sid, st);
}

static ssize_t
http_sse_reader(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct http_req *rc = cls;
    if (rc->dropped || rc->st == NULL)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = stream_read(rc->st, out, max);
    H.bytes_out += n;
    if (n > 0)
        return (ssize_t)n;
    /* Finished, or the gateway ends this connection (SSE polling): the client resumes. */
    if (stream_finished(rc->st) || stream_hung_up(rc->st))
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Never return 0 without suspending: MHD would spin (engineering-notes 2.2). */
    rc->suspended = true;
    MHD_suspend_connection(rc->c);
    return 0;
}

/* The client left while a stream was open: the reader, or the held request, ends the response. */
static void
http_drop(struct http_req *rc)
{
    rc->dropped = true;
    http_detach(rc);
    http_resume(rc);
}

/*
 * Edge-triggered events on a client socket. Bytes arriving while no request is open start the
 * next request's header deadline (a kept-alive connection is idle until then, under
 * connection_timeout_s only). EPOLLRDHUP: the client closed its socket or reset it, once.
 */
static void
http_conn_event(int fd, uint32_t events, void *arg)
{
    (void)fd;
    struct http_conn *conn = arg;
    if ((events & EPOLLIN) != 0 && conn->rc == NULL && conn->deadline_ms == 0)
        conn->deadline_ms = util_now_ms() + H.cfg->client_header_timeout_ms;
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0 || conn->gone)
        return;
    conn->gone = true;
    /*
     * A request still arriving can no longer complete once the client has sent its FIN, and MHD,
     * having read everything, may wait for the rest until a timeout. What MHD still holds gets
     * HTTP_GONE_GRACE_MS to be processed.
     */
    uint64_t soon = util_now_ms() + HTTP_GONE_GRACE_MS;
    if (conn->deadline_ms > soon)
        conn->deadline_ms = soon;
    H.need_run = true; /* MHD reads the end itself where it is not suspended */
    if (conn->rc != NULL && conn->rc->st != NULL)
        http_drop(conn->rc);
}

static void
http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
            enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    struct http_conn *conn = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn = xcalloc(1, sizeof(*conn));
        conn->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL) {
            conn->fd = ci->connect_fd;
            conn->w = loop_watch_add(H.l, conn->fd, EPOLLIN | EPOLLRDHUP | EPOLLET, http_conn_event,
                                     conn);
        }
        if (conn->w == NULL)
            log_warn(NULL, "cannot watch a client socket: %s", strerror(errno));
        conn->deadline_ms = util_now_ms() + H.cfg->client_header_timeout_ms;
        conn->next = H.conns;
        if (H.conns != NULL)
            H.conns->prev = conn;
        H.conns = conn;
        *socket_context = conn;
        return;
    }
    if (conn == NULL)
        return;
    if (conn->rc != NULL)
        conn->rc->conn = NULL;
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        H.conns = conn->next;
    if (conn->next != NULL)
        conn->next->prev = conn->prev;
    loop_watch_del(conn->w);
    free(conn);
    *socket_context = NULL;
}

/* MHD has read a request line: the headers must follow within client_header_timeout_ms. */
static void *
http_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)uri;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct http_conn *conn = ci != NULL ? ci->socket_context : NULL;
    if (conn != NULL)
        conn->deadline_ms = util_now_ms() + H.cfg->client_header_timeout_ms;
    return NULL; /* the request context is made in http_handler */
}

/*
 * Closes connections whose request line and headers, or body, are overdue (slow clients). A
 * response being written, held or streamed has no deadline. MHD sees the shut socket and closes
 * the connection as a client abort.
 */
void
http_sweep(uint64_t now_ms)
{
    for (struct http_conn *conn = H.conns; conn != NULL; conn = conn->next) {
        if (conn->deadline_ms == 0 || now_ms < conn->deadline_ms || conn->fd == -1)
            continue;
        conn->deadline_ms = 0;
        H.slow_closed++;
        log_info(NULL, "closing a slow client's connection: its request %s did not arrive in time",
                 conn->rc != NULL ? "body" : "line and headers");
        shutdown(conn->fd, SHUT_RDWR);
        H.need_run = true;
    }
}

static void
http_sse_headers(struct MHD_Response *r, const struct http_req *rc, bool with_sid)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    if (with_sid)
        MHD_add_response_header(r, HTTP_SID_HEADER, rc->sid);
}

static enum MHD_Result
http_sse(struct http_req *rc, struct stream *st, bool with_sid)
{
    rc->st = st;
    stream_set_wake(st, http_wake, rc);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, http_sse_reader, rc, NULL);
    http_sse_headers(r, rc, with_sid);
    enum MHD_Result ret = http_queue(rc, MHD_HTTP_OK, r);
    if (rc->conn == NULL || rc->conn->gone)
        http_drop(rc); /* the hang-up came before the stream: the reader ends the response */
    return ret;
}

static void
http_hold_over(void *arg)
{
    struct http_req *rc = arg;
    rc->hold = NULL;
    http_resume(rc);
}

static void
http_sent_free(void *cls)
{
    struct http_sent *sent = cls;
    for (int i = 0; i < sent->n; i++)
        msg_unref(sent->m[i]);
    free(sent);
}

/* A POST's stream: held for response_hold_ms (see the top of this file), or started now. */
static enum MHD_Result
http_hold(struct http_req *rc, struct stream *st, bool with_sid)
{
    if (H.cfg->response_hold_ms == 0 || rc->conn == NULL || rc->conn->gone)
        return http_sse(rc, st, with_sid);
    rc->st = st;
    rc->with_sid = with_sid;
    rc->held = true;
    stream_set_wake(st, http_wake, rc);
    rc->hold = loop_timer_add(H.l, H.cfg->response_hold_ms, http_hold_over, rc);
    rc->suspended = true;
    MHD_suspend_connection(rc->c);
    return MHD_YES;
}

/* MHD calls again after the resume that ends a hold: one buffer if all is there, else a stream. */
static enum MHD_Result
http_unhold(struct http_req *rc)
{
    rc->held = false;
    loop_timer_del(rc->hold);
    rc->hold = NULL;
    struct stream *st = rc->st;
    if (rc->dropped || st == NULL)
        return MHD_NO; /* the client left: MHD closes the connection */
    if (!st->ended)
        return http_sse(rc, st, rc->with_sid);
    struct MHD_Response *r;
    if (st->pending <= HTTP_COPY_MAX) {
        char *body = xmalloc(st->pending + 1);
        r = http_body_response(body, stream_read(st, body, st->pending));
    } else {
        struct iovec iov[HTTP_IOV_MAX];
        struct MHD_IoVec mio[HTTP_IOV_MAX];
        struct http_sent *sent = xmalloc(sizeof(*sent));
        sent->n = stream_take(st, iov, sent->m, HTTP_IOV_MAX);
        if (sent->n < 0) {
            free(sent);
            return http_sse(rc, st, rc->with_sid);
        }
        for (int i = 0; i < sent->n; i++) {
            mio[i] = (struct MHD_IoVec){ iov[i].iov_base, iov[i].iov_len };
            H.bytes_out += iov[i].iov_len;
        }
        r = MHD_create_response_from_iovec(mio, (unsigned)sent->n, http_sent_free, sent);
    }
    http_sse_headers(r, rc, rc->with_sid);
    return http_queue(rc, MHD_HTTP_OK, r);
}

/* --- header rules ------------------------------------------------------------------------ */

static const char *
http_header(const struct http_req *rc, const char *name)
{
    return MHD_lookup_connection_value(rc->c, MHD_HEADER_KIND, name);
}

/* Does an Accept header admit type ("text/event-stream")? Wildcards count; q-values are ignored. */
static bool
http_accepts(const char *accept, const char *type)
{
    const char *slash = strchr(type, '/');
    size_t major = (size_t)(slash - type);
    for (const char *p = accept; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t len = (size_t)(p - start);
        if (util_span_ieq(start, len, type) || util_span_ieq(start, len, "*/*")
            || (len == major + 2 && strncasecmp(start, type, major + 1) == 0
                && start[major + 1] == '*'))
            return true;
        while (*p && *p != ',')
            p++;
    }
    return false;
}

static bool
http_is_json(const char *ctype)
{
    if (ctype == NULL || !util_has_prefix_i(ctype, "application/json"))
        return false;
    char next = ctype[strlen("application/json")];
    return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* Host without its port: "localhost:8080" -> "localhost", "[::1]:80" -> "[::1]". */
static size_t
http_host_len(const char *host)
{
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        return end ? (size_t)(end - host) + 1 : strlen(host);
    }
    const char *colon = strchr(host, ':');
    return colon ? (size_t)(colon - host) : strlen(host);
}

static bool
http_host_allowed(const char *host)
{
    if (host == NULL)
        return false;
    size_t hl = http_host_len(host);
    for (char **a = H.cfg->allowed_hosts; a && *a; a++) {
        if (strcmp(*a, "*") == 0 || util_span_ieq(host, strlen(host), *a)
            || util_span_ieq(host, hl, *a))
            return true;
    }
    return false;
}

/* "http://localhost:*" matches that scheme and host with any numeric port (or none). */
static bool
http_origin_matches(const char *origin, const char *pattern)
{
    if (strcmp(pattern, "*") == 0)
        return true;
    size_t plen = strlen(pattern);
    if (plen >= 2 && strcmp(pattern + plen - 2, ":*") == 0) {
        size_t base = plen - 2;
        if (strlen(origin) < base || strncasecmp(origin, pattern, base) != 0)
            return false;
        const char *port = origin + base;
        if (*port == '\0')
            return true;
        if (*port++ != ':' || *port == '\0')
            return false;
        for (; *port; port++)
            if (*port < '0' || *port > '9')
                return false;
        return true;
    }
    return util_span_ieq(origin, strlen(origin), pattern);
}

static bool
http_origin_allowed(const char *origin)
{
    if (origin == NULL)
        return true; /* non-browser clients send none (checklist T-03) */
    for (char **a = H.cfg->allowed_origins; a && *a; a++)
        if (http_origin_matches(origin, *a))
            return true;
    return false;
}

/* Copies a plausible session id header; false when absent. Implausible ids become unknown. */
static bool
http_read_sid(struct http_req *rc)
{
    const char *v = http_header(rc, HTTP_SID_HEADER);
    if (v == NULL)
        return false;
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof(rc->sid)) {
        snprintf(rc->sid, sizeof(rc->sid), "%s", "-");
        return true;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e) {
            snprintf(rc->sid, sizeof(rc->sid), "%s", "-");
            return true;
        }
    memcpy(rc->sid, v, n + 1);
    return true;
}

/* --- the MCP endpoint -------------------------------------------------------------------- */

static enum MHD_Result
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
    case SESSION_E_DRAINING:
        code = MHD_HTTP_SERVICE_UNAVAILABLE;
        rpc = JSONRPC_INTERNAL_ERROR;
        break;
    }
    return http_error(rc, code, rpc,
                      status == SESSION_OK ? "internal error" : session_status_text(status));
}

/*
 * The session belongs to the server this request's path names. A server is its [server:NAME]:
 * after a reload the session keeps the older definition, reached at the server's current path.
 */
static bool
http_same_endpoint(const struct session *s, const struct http_req *rc)
{
    return s->srv == rc->srv || strcmp(s->srv->name, rc->srv->name) == 0;
}

/*
 * The session Mcp-Session-Id names on this endpoint; NULL if unknown, ended, another server's, or
 * another principal's (the same 404: a session id alone never grants access, nor reveals one).
 */
static struct session *
http_session(const struct http_req *rc)
{
    struct session *s = session_find(rc->sid);
    return s != NULL && http_same_endpoint(s, rc) && !s->legacy && s->owner == rc->principal ? s
                                                                                             : NULL;
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

static enum MHD_Result
http_post_request(struct http_req *rc, struct session *s, bool created,
                  const struct jsonrpc_info *info)
{
    enum session_status status;
    struct stream *st = session_stream_open(s, false, &status);
    if (st == NULL)
        return http_session_error(rc, status);
    status = session_client_request(s, st, buf_head(&rc->body), buf_used(&rc->body), info);
    if (status != SESSION_OK) {
        session_stream_detach(rc->sid, st);
        if (created)
            session_close(s, SESSION_END_INIT, "initialize not delivered");
        return http_session_error(rc, status);
    }
    return http_hold(rc, st, created);
}

/* Elements scanned one by one; any invalid one refuses the whole batch before anything is sent. */
static enum MHD_Result
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
    }
    return MHD_YES;
}

/*
 * A JSON array in one POST: 2025-03-26 sessions only (checklist T-12, T-13). Requests in it are
 * answered on one SSE stream, an event each; a batch of notifications and responses gets 202.
 */
static enum MHD_Result
http_post_batch(struct http_req *rc)
{
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc); /* initialize, the only request without one, is never batched */
    if (!session_batches(s))
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "JSON-RPC batches exist only in protocol revision 2025-03-26");
    struct jsonrpc_span el[SESSION_BATCH_MAX];
    size_t n;
    if (jsonrpc_batch_split(buf_head(&rc->body), buf_used(&rc->body), el, ARRAY_LEN(el), &n) == -1)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "a batch may hold at most 256 messages");
    if (n == 0)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST, "empty batch");
    struct jsonrpc_info *info = xcalloc(n, sizeof(*info));
    bool requests = false;
    enum MHD_Result ret = http_batch_scan(rc, el, info, n, &requests);
    if (rc->responded) {
        free(info);
        return ret;
    }
    enum session_status status;
    struct stream *st = requests ? session_stream_open(s, false, &status) : NULL;
    if (requests && st == NULL) {
        free(info);
        return http_session_error(rc, status);
    }
    status = session_client_batch(s, st, buf_head(&rc->body), buf_used(&rc->body), el, info, n);
    free(info);
    if (status != SESSION_OK) {
        if (st != NULL)
            session_stream_detach(rc->sid, st);
        return http_session_error(rc, status);
    }
    return st != NULL ? http_hold(rc, st, false) : http_empty(rc, MHD_HTTP_ACCEPTED);
}

/*
 * Scans a POST body as one message. The refusals every POST shares are answered here (413 too
 * big, 400 -32700 not JSON): the caller returns *ret when rc->responded is set.
 */
static int
http_scan_body(struct http_req *rc, struct jsonrpc_info *info, const char **err,
               enum MHD_Result *ret)
{
    if (rc->too_big) {
        *ret = http_error(rc, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST,
                          "request body exceeds max_body_bytes");
        return JSONRPC_EPARSE;
    }
    int st = jsonrpc_scan(buf_head(&rc->body), buf_used(&rc->body), info, err);
    if (st == JSONRPC_EPARSE)
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_PARSE_ERROR, "Parse error");
    return st;
}

static enum MHD_Result
http_post(struct http_req *rc)
{
    struct jsonrpc_info info;
    const char *err = NULL;
    enum MHD_Result ret = MHD_NO;
    int rc_scan = http_scan_body(rc, &info, &err, &ret);
    if (rc->responded)
        return ret;
    if (rc_scan == JSONRPC_EBATCH)
        return http_post_batch(rc);
    if (rc_scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          err ? err : "Invalid Request");
    bool is_init = info.kind == JSONRPC_REQUEST && strcmp(info.method, "initialize") == 0;
    struct session *s;
    if (rc->sid[0] == '\0' && is_init) {
        int status = 500;
        const char *why = "cannot start the upstream server";
        s = session_create(rc->srv, rc->principal, &status, &why);
        if (s == NULL)
            return http_error(rc, (unsigned)status, JSONRPC_INTERNAL_ERROR, why);
        snprintf(rc->sid, sizeof(rc->sid), "%s", s->id);
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

static enum MHD_Result
http_get(struct http_req *rc)
{
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc);
    enum session_status status;
    const char *last = http_header(rc, MHD_HTTP_HEADER_LAST_EVENT_ID);
    struct stream *st = last != NULL ? session_stream_resume(s, last, &status)
                                     : session_stream_open(s, true, &status);
    if (st == NULL)
        return http_session_error(rc, status);
    return http_sse(rc, st, false);
}

static enum MHD_Result
http_delete(struct http_req *rc)
{
    struct session *s = http_session(rc);
    if (s == NULL)
        return http_no_session(rc);
    session_close(s, SESSION_END_DELETED, NULL);
    return http_empty(rc, MHD_HTTP_OK);
}

/* --- the 2024-11-05 HTTP+SSE transport (checklist 1.10) --------------------------------- */

/*
 * GET PATH/sse: a new session whose one stream this is. The endpoint event carries a reference
 * relative to PATH/sse ("messages?sessionId=..."), so it stays right behind a proxy that mounts
 * the gateway under another prefix.
 */
static enum MHD_Result
http_legacy_sse(struct http_req *rc)
{
    int status = 500;
    const char *why = "cannot start the upstream server";
    struct session *s = session_create(rc->srv, rc->principal, &status, &why);
    if (s == NULL)
        return http_error(rc, (unsigned)status, JSONRPC_INTERNAL_ERROR, why);
    snprintf(rc->sid, sizeof(rc->sid), "%s", s->id);
    char endpoint[32 + CRYPTO_SESSION_ID_MAX];
    snprintf(endpoint, sizeof(endpoint), "messages?sessionId=%s", s->id);
    return http_sse(rc, session_legacy_open(s, endpoint), false);
}

/* POST PATH/messages?sessionId=...: one message, 202; answers travel on the session's stream. */
static enum MHD_Result
http_legacy_post(struct http_req *rc)
{
    const char *v = MHD_lookup_connection_value(rc->c, MHD_GET_ARGUMENT_KIND, "sessionId");
    if (v == NULL || v[0] == '\0')
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "sessionId query parameter is required");
    snprintf(rc->sid, sizeof(rc->sid), "%s", v);
    struct session *s = session_find(strlen(v) < sizeof(rc->sid) ? rc->sid : NULL);
    if (s == NULL || !http_same_endpoint(s, rc) || !s->legacy || s->get == NULL
        || s->owner != rc->principal)
        return http_session_error(rc, SESSION_E_GONE);
    struct jsonrpc_info info;
    const char *err = NULL;
    enum MHD_Result ret = MHD_NO;
    int rc_scan = http_scan_body(rc, &info, &err, &ret);
    if (rc->responded)
        return ret;
    if (rc_scan != JSONRPC_OK)
        return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          rc_scan == JSONRPC_EBATCH ? "JSON-RPC batches are not part of 2024-11-05"
                          : err                     ? err
                                                    : "Invalid Request");
    enum session_status status;
    if (info.kind == JSONRPC_REQUEST) {
        if (strcmp(info.method, "initialize") == 0 && s->init_gw_id != 0)
            return http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                              "session is already initialized");
        status = session_client_request(s, s->get, buf_head(&rc->body), buf_used(&rc->body), &info);
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
    if (!http_host_allowed(http_header(rc, MHD_HTTP_HEADER_HOST))) {
        *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Host not allowed");
        return true;
    }
    if (!http_origin_allowed(http_header(rc, MHD_HTTP_HEADER_ORIGIN))) {
        *ret = http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Origin not allowed");
        return true;
    }
    return false;
}

/*
 * 401 (no token, or one that does not verify) or 403 (scopes), with the RFC 6750 / RFC 9728
 * challenge: where the resource metadata is, and the scopes this server needs.
 */
static enum MHD_Result
http_auth_refusal(struct http_req *rc, enum auth_status st, const char *why)
{
    const struct config_auth *ca = &H.cfg->auth;
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
    H.refused_auth[st == AUTH_MISSING ? 0 : st == AUTH_INVALID ? 1 : 2]++;
    char message[256];
    snprintf(message, sizeof(message), "%s: %s",
             status == MHD_HTTP_FORBIDDEN ? "Forbidden" : "Unauthorized", why);
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, message);
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    log_info(NULL, "request refused: %u %s", status, why);
    return http_queue(rc, status, r);
}

/* Who is asking, and whether their bucket has a request left. True when refused. */
static bool
http_refuse_auth(struct http_req *rc, enum MHD_Result *ret)
{
    const char *why = NULL;
    enum auth_status st = auth_check(H.auth, http_header(rc, MHD_HTTP_HEADER_AUTHORIZATION),
                                     rc->srv, util_now_unix(), &rc->principal, &why);
    if (st != AUTH_OK) {
        *ret = http_auth_refusal(rc, st, why);
        return true;
    }
    uint64_t retry_ms = 0;
    if (auth_rate_take(rc->principal, &H.cfg->auth, util_now_ms(), &retry_ms))
        return false;
    H.rate_limited++;
    char retry[24];
    snprintf(retry, sizeof(retry), "%" PRIu64, (retry_ms + 999) / 1000);
    struct MHD_Response *r =
        http_error_response(JSONRPC_INTERNAL_ERROR, "rate limit exceeded (rate_limit_per_s)");
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry);
    log_debug(NULL, "request refused: 429 rate limit of %s", rc->principal->name);
    *ret = http_queue(rc, MHD_HTTP_TOO_MANY_REQUESTS, r);
    return true;
}

static bool
http_refuse_body(struct http_req *rc, enum MHD_Result *ret)
{
    if (!http_is_json(http_header(rc, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        *ret = http_error(rc, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, JSONRPC_INVALID_REQUEST,
                          "Content-Type must be application/json");
        return true;
    }
    const char *clen = http_header(rc, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t n;
    const char *why;
    if (clen != NULL && util_parse_u64(clen, 0, UINT64_MAX, &n, &why) == 0
        && n > H.cfg->max_body_bytes) {
        *ret = http_error(rc, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST,
                          "request body exceeds max_body_bytes");
        return true;
    }
    return false;
}

/* The 2024-11-05 paths: the same Host and Origin rules; GET on /sse, POST on /messages. */
static bool
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
    const char *accept = http_header(rc, MHD_HTTP_HEADER_ACCEPT);
    if (want == HTTP_GET && accept != NULL && !http_accepts(accept, "text/event-stream")) {
        *ret = http_error(rc, MHD_HTTP_NOT_ACCEPTABLE, JSONRPC_INVALID_REQUEST,
                          "Accept must list text/event-stream");
        return true;
    }
    return want == HTTP_POST && http_refuse_body(rc, ret);
}

static bool
http_refuse_early(struct http_req *rc, enum MHD_Result *ret)
{
    if (http_refuse_origin(rc, ret) || http_refuse_auth(rc, ret))
        return true;
    if (rc->method == HTTP_OTHER) {
        *ret = http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST,
                          "Method not allowed");
        return true;
    }
    const char *accept = http_header(rc, MHD_HTTP_HEADER_ACCEPT);
    if ((rc->method == HTTP_POST
         && (accept == NULL || !http_accepts(accept, "application/json")
             || !http_accepts(accept, "text/event-stream")))
        || (rc->method == HTTP_GET
            && (accept == NULL || !http_accepts(accept, "text/event-stream")))) {
        *ret = http_error(rc, MHD_HTTP_NOT_ACCEPTABLE, JSONRPC_INVALID_REQUEST,
                          rc->method == HTTP_POST
                              ? "Accept must list application/json and text/event-stream"
                              : "Accept must list text/event-stream");
        return true;
    }
    if (rc->method == HTTP_POST && http_refuse_body(rc, ret))
        return true;
    const char *ver = http_header(rc, HTTP_VERSION_HEADER);
    if (ver != NULL && !session_version_supported(ver, strlen(ver))) {
        *ret = http_error(rc, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                          "Unsupported MCP-Protocol-Version (supported: 2025-03-26, 2025-06-18, "
                          "2025-11-25)");
        return true;
    }
    return false;
}

/* GET only (HEAD too: MHD sends the headers of the GET answer). */
static bool
http_refuse_not_get(struct http_req *rc, enum MHD_Result *ret)
{
    if (rc->method == HTTP_GET || rc->head)
        return false;
    *ret =
        http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST, "Method not allowed");
    return true;
}

static enum MHD_Result
http_health(struct http_req *rc)
{
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    struct MHD_Response *r = http_static_response("{\"status\":\"ok\"}");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return http_queue(rc, MHD_HTTP_OK, r);
}

/* The peer of this connection is on loopback (127.0.0.0/8, ::1, or ::ffff:127.x). */
static bool
http_peer_loopback(const struct http_req *rc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rc->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL)
        return false;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

/* "Authorization: Bearer <token>" with the admin token (compared in constant time). */
static bool
http_bearer_ok(const struct http_req *rc, const char *token)
{
    size_t len;
    const char *got = auth_bearer_token(http_header(rc, MHD_HTTP_HEADER_AUTHORIZATION), &len);
    return got != NULL && len == strlen(token) && crypto_equal(got, token, len);
}

static enum MHD_Result
http_unauthorized(struct http_req *rc)
{
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, "Unauthorized");
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    return http_queue(rc, MHD_HTTP_UNAUTHORIZED, r);
}

/*
 * GET /admin/inflight: off unless admin_token is set; then only for loopback peers presenting
 * "Authorization: Bearer <admin_token>".
 */
static enum MHD_Result
http_admin(struct http_req *rc)
{
    const char *token = H.cfg->admin_token;
    if (token == NULL || token[0] == '\0')
        return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not found");
    if (!http_peer_loopback(rc))
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                          "the admin view answers loopback clients only");
    if (!http_bearer_ok(rc, token))
        return http_unauthorized(rc);
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    size_t len;
    char *body = session_admin_json(&len);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, MHD_HTTP_OK, r);
}

/* GET /readyz: 200 while new sessions are taken, 503 while draining or at max_sessions. */
static enum MHD_Result
http_ready(struct http_req *rc)
{
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    const char *body = "{\"ready\":true}";
    unsigned status = MHD_HTTP_OK;
    if (session_draining() || session_count() >= H.cfg->max_sessions) {
        body = session_draining() ? "{\"ready\":false,\"reason\":\"draining\"}"
                                  : "{\"ready\":false,\"reason\":\"max_sessions reached\"}";
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    struct MHD_Response *r = http_static_response(body);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, status, r);
}

/*
 * GET /metrics (Prometheus text format): loopback peers only while admin_token is empty; with
 * an admin_token, any peer presenting it.
 */
static enum MHD_Result
http_metrics(struct http_req *rc)
{
    const char *token = H.cfg->admin_token;
    if (token != NULL && token[0] != '\0') {
        if (!http_bearer_ok(rc, token))
            return http_unauthorized(rc);
    } else if (!http_peer_loopback(rc)) {
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                          "/metrics answers loopback clients only (or set admin_token)");
    }
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    struct buf b;
    buf_init(&b, (size_t)1 << 24);
    session_metrics(&b);
    metrics_family(&b, "mcpgw_ready", "gauge", "1 while new sessions are taken (/readyz).");
    metrics_sample(&b, "mcpgw_ready", NULL,
                   !session_draining() && session_count() < H.cfg->max_sessions);
    metrics_family(&b, "mcpgw_http_requests_open", "gauge",
                   "HTTP requests being handled (open streams included).");
    metrics_sample(&b, "mcpgw_http_requests_open", NULL, H.live);
    metrics_family(&b, "mcpgw_http_responses_total", "counter", "HTTP responses by status class.");
    for (unsigned i = 1; i < 6; i++) {
        char labels[16];
        snprintf(labels, sizeof(labels), "code=\"%uxx\"", i);
        metrics_sample(&b, "mcpgw_http_responses_total", labels, H.responses[i]);
    }
    metrics_family(&b, "mcpgw_http_received_bytes_total", "counter", "HTTP request body bytes.");
    metrics_sample(&b, "mcpgw_http_received_bytes_total", NULL, H.bytes_in);
    metrics_family(&b, "mcpgw_http_sent_bytes_total", "counter",
                   "HTTP response body bytes (SSE streams included).");
    metrics_sample(&b, "mcpgw_http_sent_bytes_total", NULL, H.bytes_out);
    metrics_family(&b, "mcpgw_auth_refused_total", "counter",
                   "Requests refused by [auth]: no token, an invalid one, missing scopes.");
    static const char *const refusals[] = { "reason=\"missing\"", "reason=\"invalid\"",
                                            "reason=\"insufficient_scope\"" };
    for (size_t i = 0; i < ARRAY_LEN(refusals); i++)
        metrics_sample(&b, "mcpgw_auth_refused_total", refusals[i], H.refused_auth[i]);
    metrics_family(&b, "mcpgw_rate_limited_total", "counter",
                   "Requests refused with 429 by a principal's rate_limit_per_s.");
    metrics_sample(&b, "mcpgw_rate_limited_total", NULL, H.rate_limited);
    metrics_family(&b, "mcpgw_slow_clients_closed_total", "counter",
                   "Connections closed because a request's headers or body came too slowly.");
    metrics_sample(&b, "mcpgw_slow_clients_closed_total", NULL, H.slow_closed);
    metrics_family(&b, "mcpgw_principals", "gauge",
                   "Principals remembered (holding sessions, requests or a partly used bucket).");
    metrics_sample(&b, "mcpgw_principals", NULL, auth_principal_count());
    size_t len = buf_used(&b);
    char *body = xstrndup(buf_head(&b), len);
    buf_clear(&b);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, MHD_HTTP_OK, r);
}

/*
 * GET /.well-known/oauth-protected-resource[PATH] (RFC 9728 section 3): the metadata of the server
 * at PATH; the root form describes the first server. Public: no token, any Origin (browser clients
 * read it cross-origin), but the Host rule holds.
 */
static enum MHD_Result
http_prm(struct http_req *rc)
{
    enum MHD_Result ret;
    if (rc->options) { /* a browser's CORS preflight (the SDK adds MCP-Protocol-Version) */
        struct MHD_Response *r = http_static_response("");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "mcp-protocol-version");
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
        return http_queue(rc, MHD_HTTP_NO_CONTENT, r);
    }
    if (http_refuse_not_get(rc, &ret))
        return ret;
    if (!http_host_allowed(http_header(rc, MHD_HTTP_HEADER_HOST)))
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Host not allowed");
    char resource[1200];
    if (auth_resource(&H.cfg->auth, rc->srv, resource, sizeof(resource)) == -1)
        return http_error(rc, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                          "resource URI too long");
    size_t len;
    char *body = jsonrpc_prm_new(resource, H.cfg->auth.authorization_servers,
                                 rc->srv->required_scopes, &len);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=300");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    return http_queue(rc, MHD_HTTP_OK, r);
}

#define HTTP_PRM_PREFIX "/.well-known/oauth-protected-resource"

/* The well-known metadata paths exist only while a token is required. */
static bool
http_classify_prm(struct http_req *rc, const char *url)
{
    size_t plen = strlen(HTTP_PRM_PREFIX);
    if (H.cfg->auth.mode == CONFIG_AUTH_NONE || strncmp(url, HTTP_PRM_PREFIX, plen) != 0)
        return false;
    const char *rest = url + plen;
    for (size_t i = 0; i < H.cfg->n_servers; i++)
        if ((rest[0] == '\0' && i == 0) || strcmp(rest, H.cfg->servers[i].path) == 0) {
            rc->kind = HTTP_PRM;
            rc->srv = &H.cfg->servers[i];
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
    if (strcmp(url, "/admin/inflight") == 0) {
        rc->kind = HTTP_ADMIN;
        return;
    }
    if (http_classify_prm(rc, url))
        return;
    for (size_t i = 0; i < H.cfg->n_servers; i++)
        if (strcmp(url, H.cfg->servers[i].path) == 0) {
            rc->kind = HTTP_MCP;
            rc->srv = &H.cfg->servers[i];
            return;
        }
    for (size_t i = 0; i < H.cfg->n_servers && H.cfg->legacy_sse; i++) {
        const char *path = H.cfg->servers[i].path;
        size_t plen = strlen(path);
        if (strncmp(url, path, plen) != 0)
            continue;
        const char *rest = url + plen - (plen > 0 && path[plen - 1] == '/');
        if (strcmp(rest, "/sse") == 0 || strcmp(rest, "/messages") == 0) {
            rc->kind = rest[1] == 's' ? HTTP_LEGACY_SSE : HTTP_LEGACY_MSG;
            rc->srv = &H.cfg->servers[i];
            return;
        }
    }
}

static enum MHD_Result
http_begin(struct http_req *rc, const char *url, const char *method)
{
    http_classify(rc, url, method);
    enum MHD_Result ret = MHD_NO;
    switch (rc->kind) {
    case HTTP_HEALTH:
        return http_health(rc);
    case HTTP_READY:
        return http_ready(rc);
    case HTTP_METRICS:
        return http_metrics(rc);
    case HTTP_ADMIN:
        return http_admin(rc);
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

static enum MHD_Result
http_finish(struct http_req *rc)
{
    if (rc->kind == HTTP_LEGACY_SSE)
        return http_legacy_sse(rc);
    if (rc->kind == HTTP_LEGACY_MSG) {
        enum MHD_Result ret = http_legacy_post(rc);
        buf_clear(&rc->body);
        return ret;
    }
    switch (rc->method) {
    case HTTP_POST: {
        enum MHD_Result ret = http_post(rc);
        buf_clear(&rc->body); /* forwarded (copied) or refused: a long stream need not keep it */
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

static enum MHD_Result
http_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    size_t *n = cls;
    *n += strlen(key) + (value != NULL ? strlen(value) : 0) + 4; /* ": " and CRLF */
    return MHD_YES;
}

/* The request line and headers as received, near enough: names, values and separators. */
static size_t
http_request_bytes(struct MHD_Connection *c, const char *url, const char *method)
{
    size_t n = strlen(method) + strlen(url) + 12;
    MHD_get_connection_values(c, MHD_HEADER_KIND, http_header_bytes, &n);
    return n;
}

static enum MHD_Result
http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
             const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)version;
    struct http_req *rc = *con_cls;
    if (rc == NULL) {
        rc = xcalloc(1, sizeof(*rc));
        rc->c = c;
        rc->gen = H.gen;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rc->conn = ci != NULL ? ci->socket_context : NULL;
        if (rc->conn != NULL)
            rc->conn->rc = rc;
        buf_init(&rc->body, H.cfg->max_body_bytes);
        *con_cls = rc;
        H.live++;
        if (rc->conn != NULL)
            rc->conn->deadline_ms = util_now_ms() + H.cfg->client_body_timeout_ms;
        if (http_request_bytes(c, url, method) > H.cfg->max_header_bytes)
            return http_error(rc, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, JSONRPC_INVALID_REQUEST,
                              "request headers exceed max_header_bytes");
        return http_begin(rc, url, method);
    }
    if (*upload_data_size > 0) {
        H.bytes_in += *upload_data_size;
        if (!rc->responded && !rc->too_big
            && buf_append(&rc->body, upload_data, *upload_data_size) == -1) {
            rc->too_big = true;
            buf_clear(&rc->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rc->conn != NULL)
        rc->conn->deadline_ms = 0; /* the request is in: the response may take its time */
    if (rc->responded)
        return MHD_YES;
    if (rc->held)
        return http_unhold(rc);
    if (rc->gen != H.gen) {
        /* A reload came while the body arrived: rc->srv may name a retired definition. */
        enum http_kind kind = rc->kind;
        http_classify(rc, url, method);
        if (rc->kind != kind)
            return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST,
                              "Not found (the configuration was reloaded)");
    }
    return http_finish(rc);
}

static void
http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct http_req *rc = *con_cls;
    if (rc == NULL)
        return;
    http_detach(rc);
    if (rc->conn != NULL && rc->conn->rc == rc) {
        rc->conn->rc = NULL;
        rc->conn->deadline_ms = 0; /* idle keep-alive: connection_timeout_s applies */
    }
    auth_principal_unref(rc->principal);
    buf_clear(&rc->body);
    free(rc);
    *con_cls = NULL;
    H.live--;
}

static void PRINTF(2, 0) http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char text[512];
    vsnprintf(text, sizeof(text), fmt, ap);
    log_debug(NULL, "libmicrohttpd: %s", text);
}

/* --- the daemon -------------------------------------------------------------------------- */

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
    return fd;
}

static void
http_mhd_ready(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    (void)arg;
    H.need_run = true; /* http_run follows in the same turn */
}

int
http_start(struct loop *l, const struct config *cfg, struct auth *auth)
{
    H.l = l;
    H.cfg = cfg;
    H.auth = auth;
    /* MHD's per-connection pool holds the headers plus read and write buffers. */
    size_t pool = cfg->max_header_bytes + 16384 > 32768 ? cfg->max_header_bytes + 16384 : 32768;
    H.listen_fd = http_listen(cfg);
    if (H.listen_fd == -1)
        return -1;
    /* The logger goes first, or MHD prints what it says before it to stderr unformatted. */
    H.d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL,
                           NULL, http_handler, NULL, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, NULL,
                           MHD_OPTION_LISTEN_SOCKET, H.listen_fd, MHD_OPTION_NOTIFY_COMPLETED,
                           http_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, http_notify, NULL,
                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_URI_LOG_CALLBACK,
                           http_request_line, NULL, MHD_OPTION_END);
    if (H.d == NULL) {
        log_error(NULL, "libmicrohttpd did not start");
        close(H.listen_fd);
        H.listen_fd = -1;
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(H.d, MHD_DAEMON_INFO_EPOLL_FD);
    H.mhd_w = loop_watch_add(l, di->epoll_fd, EPOLLIN, http_mhd_ready, NULL);
    if (H.mhd_w == NULL) {
        log_error(NULL, "cannot watch libmicrohttpd's epoll fd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int
http_prepare(void)
{
    if (H.d == NULL)
        return -1;
    if (H.need_run)
        return 0;
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(H.d, &t) != MHD_YES) {
        H.run_due_ms = UINT64_MAX;
        return -1;
    }
    if (t > 86400000ull)
        t = 86400000ull;
    H.run_due_ms = util_now_ms() + t;
    return (int)t;
}

/*
 * MHD runs only when it has something to do: its epoll fd was ready, a connection was resumed, or
 * one of its timeouts is due. Each MHD_run costs an epoll_wait of its own.
 */
void
http_run(void)
{
    if (H.d == NULL || (!H.need_run && util_now_ms() < H.run_due_ms))
        return;
    H.need_run = false;
    MHD_run(H.d);
    if (H.need_run)
        loop_wake(H.l); /* resumed from inside MHD_run: run it again next turn */
}

void
http_quiesce(void)
{
    if (H.d == NULL || H.listen_fd == -1)
        return;
    MHD_socket fd = MHD_quiesce_daemon(H.d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    H.listen_fd = -1;
}

bool
http_idle(void)
{
    return H.live == 0;
}

void
http_stop(void)
{
    if (H.d == NULL)
        return;
    loop_watch_del(H.mhd_w);
    H.mhd_w = NULL;
    MHD_stop_daemon(H.d);
    H.d = NULL;
    if (H.listen_fd != -1)
        close(H.listen_fd);
    H.listen_fd = -1;
}

void
http_set_config(const struct config *cfg, struct auth *auth)
{
    H.cfg = cfg;
    H.auth = auth;
    H.gen++;
}
