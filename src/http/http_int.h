/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_HTTP_INT_H
#define MCPGW_HTTP_INT_H

/*
 * Private to the HTTP layer (http.c, http_conn.c, http_sse.c, http_mcp.c, http_ops.c,
 * http_admin.c): the request and connection contexts, the layer's state, and the functions its
 * files share. The only header that includes <microhttpd.h>; the layer's interface is http.h.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "auth.h"
#include "buf.h"
#include "config.h"
#include "crypto.h"
#include "http.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "pool.h"
#include "session.h"
#include "session_seal.h"
#include "stream.h"
#include "trace.h"

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
#define HTTP_COPY_MAX (64u * 1024u)
#define HTTP_IOV_MAX  64

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
    bool nul_in_uri;               /* the current request line holds %00 (refused: 400) */
    const char *target;            /* its target, in MHD's buffer (compared, never read) */
    size_t target_len;             /* the target's strlen when the line was read */
    uint64_t deadline_ms;          /* the request's headers or body must be in by then; 0: none */
    struct MHD_Connection *c;      /* MHD's, for parking (http_park) */
    uint64_t rx_bytes;             /* request heads and bodies MHD passed on, in bytes */
    bool parked;                   /* suspended between requests, until its socket is readable */
    bool park_check;               /* parked in this MHD_run: in httpd.to_check */
    uint64_t parked_ms;            /* since when: connection_timeout_s counts from there */
    struct http_conn *park_prev, *park_next; /* httpd.to_check */
    bool peer_known;               /* peer holds the peer's address as text (http_access.c) */
    char peer[46];                 /* INET6_ADDRSTRLEN: formatted once, not on every request */
    struct http_conn *prev, *next; /* H.conns */
};

/* What a request's access line reports, gathered as it goes (http_access.c). */
struct http_access {
    uint64_t start_ns; /* CLOCK_MONOTONIC at the first handler call */
    uint64_t sent;     /* response body bytes */
    unsigned status;   /* of the response queued; 0: none */
    char method[16];
    char path[256];                   /* cut there */
    char rid[LOG_REQUEST_ID_MAX + 1]; /* X-Request-Id, checked, or minted */
    char forwarded[48];               /* the last X-Forwarded-For entry from a trusted peer */
    char mcp_method[64];              /* of a POST's body */
    char name[128];                   /* Mcp-Name, params.name or params.uri */
    char trace_id[TRACE_ID_LEN + 1];  /* the W3C trace id its request carried to a child; "" */
};

/*
 * A refusal's audit record (audit_refusal), written by http_queue when the answer's status is 400
 * or more and no session or pool took the request: the event (NULL: by status), the JSON-RPC code
 * and why (pointers valid until that http_queue; NULL: none). done: written (or not to be).
 */
struct http_refusal {
    const char *event;
    const char *why;
    int code;
    bool done;
};

/* One HTTP request, from the first handler call to MHD's completed callback. */
/*
 * The request headers the gateway reads. Their values are taken in the one pass over the head that
 * checks its layout (http.c), and read from the request's record after that: about a dozen
 * lookups a request, each a walk of MHD's header list, become one walk.
 */
enum http_hdr {
    HTTP_H_HOST,
    HTTP_H_AUTHORIZATION,
    HTTP_H_VERSION, /* MCP-Protocol-Version */
    HTTP_H_SID,     /* Mcp-Session-Id */
    HTTP_H_ORIGIN,
    HTTP_H_SEC_FETCH_SITE,
    HTTP_H_LAST_EVENT_ID,
    HTTP_H_ACCEPT,
    HTTP_H_CONTENT_TYPE,
    HTTP_H_CONTENT_LENGTH,
    HTTP_H_TRANSFER_ENCODING,
    HTTP_H_EXPECT,
    HTTP_H_MCP_NAME,
    HTTP_H_MCP_METHOD,
    HTTP_H_TRACEPARENT,
    HTTP_H_TRACESTATE,
    HTTP_H_REQUEST_ID,
    HTTP_H_FORWARDED_FOR,
    HTTP_H_COUNT
};

struct http_req {
    struct MHD_Connection *c;
    enum http_kind kind;
    enum http_method method;
    const struct config_server *srv;
    struct buf body;
    bool too_big;                  /* the body is over max_body_bytes: drained, then 413 */
    uint64_t body_bytes;           /* body bytes received, kept or not */
    bool first_call;               /* inside MHD's first call: the body, if any, is still to come */
    struct MHD_Response *deferred; /* a refusal sent once the body is drained */
    unsigned deferred_status;
    bool responded;                      /* a response is queued */
    char sid[SESSION_SEAL_ID_MAX + 1];   /* a random id, or a pooled session's sealed one */
    char sid_tag[CRYPTO_SESSION_ID_MAX]; /* what logs name it by: sid, or a sealed id's label */
    struct stream *st;
    bool suspended;
    bool waited; /* was suspended: MHD took its socket out of its epoll set (http_park) */
    bool dropped;
    bool held;                      /* a POST stream waiting for its answer, no response queued */
    bool with_sid;                  /* the response carries Mcp-Session-Id (a new session) */
    bool stateless;                 /* st is a stateless request's (the pool's), not a session's */
    bool pooled;                    /* st is a pooled session's (the pool's: pool_session_detach) */
    enum pool_status pooled_status; /* why http_pooled_session found none */
    const char *pooled_why;         /* and a static text, when full */
    /* Held (http_hold): its place in its kind's queue, oldest first, and when the hold ends. */
    struct http_req *hold_prev, *hold_next;
    uint64_t hold_due_ms;
    unsigned char hold_q;   /* 1 + the index of the queue it is on; 0: none */
    struct http_conn *conn; /* NULL once MHD closed the connection */
    unsigned gen;           /* httpd.gen when the request was last classified */
    bool head;              /* HEAD: HTTP_OTHER for the MCP endpoint, a GET for the probes */
    bool options;           /* OPTIONS: answered (CORS) only on the metadata routes */
    struct auth_principal *principal;   /* who is asking (a reference), once authenticated */
    struct auth_claims *claims;         /* its token's env_from_claims (a reference); NULL: none */
    struct policy_grants grants;        /* and which of srv's tool policy scopes its token grants */
    struct auth_wait *auth_wait;        /* suspended until the authorization server answers */
    bool auth_again;                    /* the checks run again at the next call (after the wait) */
    struct auth_exchange *xchg;         /* token_exchange: suspended until the exchange ends */
    struct auth_exchanged *xres;        /* and what it gave, for the session about to start */
    const struct config_server *xsrv;   /* the server xres was exchanged for */
    bool body_in;                       /* MHD's final call came: the body, if any, is in */
    bool judge_again;                   /* waited in the final call: judged again (http_rejudge) */
    struct http_access acc;             /* what its access line reports (http_access.c) */
    const struct jsonrpc_info *scanned; /* its body's one message, while http_post runs; NULL */
    struct http_refusal refusal;        /* what its refusal's audit record says (http_queue) */
    const char *hdr[HTTP_H_COUNT];      /* the headers' values (MHD's), from the head's pass */
    bool hdr_read;                      /* that pass ran */
};

/*
 * Refusals by [auth] of one server's requests (by name), kept for the life of the process like
 * the other layers' rows (metrics.h): 401 missing, 401 invalid, 403 scope.
 */
struct http_server {
    struct metrics_row row;
    uint64_t refused_auth[3];
};

struct http_globals {
    struct MHD_Daemon *d;
    struct loop *l;
    const struct config *cfg;
    struct auth *auth;
    struct http_conn *conns; /* every open connection, for the header and body deadlines */
    struct http_conn *to_check; /* parked in this MHD_run, checked after it (http_park_check) */
    size_t parked;              /* connections parked now */
    bool park_ok;               /* this libmicrohttpd's parking is known (src/README.md) */
    struct loop_watch *mhd_w;
    int listen_fd;
    bool need_run;
    uint64_t run_due_ms;          /* MHD's next timeout, from http_prepare */
    size_t live;                  /* request contexts */
    unsigned gen;                 /* configuration generation: counts reloads */
    uint64_t responses[6];        /* by status class: [2] counts 2xx */
    uint64_t bytes_in, bytes_out; /* request bodies; response bodies (SSE included) */
    struct metrics_row *servers;  /* struct http_server rows, in the order seen */
    uint64_t rate_limited;        /* 429 from the principal's token bucket */
    uint64_t auth_unavailable;    /* 503: the authorization server could not answer */
    uint64_t slow_closed;         /* connections closed at a header or body deadline */
    uint64_t host_refused;        /* 403: Host not in allowed_hosts */
    unsigned host_logged;         /* of those, logged since the start or the last reload */
    bool bound_loopback;          /* the listening socket is bound to a loopback address */
    bool quiesced;                /* the listener is closed (draining or stopping) */
    struct http_req *cur;         /* the request whose callback runs now, or NULL */
};
extern struct http_globals httpd;

/* http_sse.c: the hold queues' timers go (http_stop, after every request is gone). */
void http_holds_stop(void);

/* http_reply.c */
enum MHD_Result http_queue(struct http_req *rc, unsigned status, struct MHD_Response *r);
struct MHD_Response *http_body_response(char *body, size_t len);
/* The same, as application/json. */
struct MHD_Response *http_json_response(char *body, size_t len);
struct MHD_Response *http_static_response(const char *text);
struct MHD_Response *http_error_response(int code, const char *message);
enum MHD_Result http_error(struct http_req *rc, unsigned status, int code, const char *message);
/* The audit trail's view of who rc is (audit.h): principal, how authenticated, client address. */
void http_audit_who(struct http_req *rc);
/* What rc's refusal's audit record says: event (NULL: kept, or by status), code and why. */
void http_refusal(struct http_req *rc, const char *event, int code, const char *why);
/* Writes rc's refusal record (http_queue, with the trail on): an MCP route's refusals only. */
void http_audit_refused(struct http_req *rc, unsigned status);
/* 503 and true when audit_required refuses rc's call (info) because records cannot be written. */
bool http_refuse_unaudited(struct http_req *rc, const struct jsonrpc_info *info,
                           enum MHD_Result *ret);
enum MHD_Result http_empty(struct http_req *rc, unsigned status);
/* 413 with Connection: close, for a body over max_body_bytes. */
enum MHD_Result http_too_big(struct http_req *rc);
/* The request header h's value (its first occurrence), or NULL: read in the head's one pass. */
const char *http_header(const struct http_req *rc, enum http_hdr h);
/* True when the request's Host is not in allowed_hosts (counted; the first few logged). */
bool http_host_refused(struct http_req *rc);
/* The request's Content-Length in *n (0 when absent): 0, or -1 when it is not a number. */
int http_content_length(const struct http_req *rc, uint64_t *n);

/* http_access.c: one access line per request, and its request id (X-Request-Id). */
/* The request's first call: its start, method, path, request id, client. */
void http_access_start(struct http_req *rc, const char *url, const char *method);
/* Adds X-Request-Id to the response r about to be queued for rc, and notes status. */
void http_access_response(struct http_req *rc, unsigned status, struct MHD_Response *r);
/* The MCP method and the tool, prompt or resource name the request carried (a POST body). */
void http_access_mcp(struct http_req *rc, const struct jsonrpc_info *info);
/*
 * W3C trace context ([gateway] trace_context): tin filled from rc's traceparent and tracestate
 * headers, or NULL when trace_context is off (nothing read). http_access_traced takes the trace
 * id the request carried to its child (tin NULL: nothing) for the access line's trace_id.
 */
struct trace_in *http_access_trace(struct http_req *rc, struct trace_in *tin);
void http_access_traced(struct http_req *rc, const struct trace_in *tin);
/* Response body bytes for rc. */
static inline void
http_access_sent(struct http_req *rc, size_t n)
{
    httpd.bytes_out += n;
    if (rc != NULL)
        rc->acc.sent += n;
}
/* MHD's completed callback: the access line. */
/* Who is asking: the trusted proxy's X-Forwarded-For, else the peer's address ("" if none). */
void http_access_client(const struct http_req *rc, char *out, size_t size);
/* The socket peer's address as text ("" if none). */
void http_access_peer_text(const struct http_req *rc, char *out, size_t size);
void http_access_end(struct http_req *rc);

/* http_sse.c */
void http_detach(struct http_req *rc);
/* rc off its hold queue (http_sse.c), if it is on one. */
void http_hold_off(struct http_req *rc);
void http_drop(struct http_req *rc);
/* Suspends rc's connection until http_resume (MHD_suspend_connection's rules apply). */
void http_suspend(struct http_req *rc);
/* Lets MHD run a suspended request again (this loop turn). */
void http_resume(struct http_req *rc);
enum MHD_Result http_sse(struct http_req *rc, struct stream *st, bool with_sid);
enum MHD_Result http_hold(struct http_req *rc, struct stream *st, bool with_sid);
enum MHD_Result http_unhold(struct http_req *rc);

/* http_mcp.c */
/* A request waiting for the authorization server whose client left: the wait ends, MHD closes. */
void http_auth_abandon(struct http_req *rc);
bool http_read_sid(struct http_req *rc);
void http_sid_tag(struct http_req *rc);
bool http_refuse_early(struct http_req *rc, enum MHD_Result *ret);
bool http_refuse_legacy(struct http_req *rc, enum MHD_Result *ret);
/* A session layer's refusal (status) of rc: its HTTP status and JSON-RPC error. */
enum MHD_Result http_session_error(struct http_req *rc, enum session_status status);

/* http_pooled.c: pooled sessions (session_mode = pooled), which the pool serves */
struct pool_session;
/* A pool's refusal of a pooled session's request: its HTTP status and JSON-RPC error. */
enum MHD_Result http_pooled_error(struct http_req *rc, const struct jsonrpc_info *info,
                                  enum pool_status status, const char *why);
/* Whether the sessions of both modes together are at max_sessions. */
bool http_sessions_full(void);
/*
 * The pooled session rc->sid names, its sealed id opened and checked against this request's own
 * principal and endpoint; NULL: rc->pooled_status says why (http_pooled_none answers it).
 */
struct pool_session *http_pooled_session(struct http_req *rc);
enum MHD_Result http_pooled_none(struct http_req *rc);
/* initialize for a server with session_mode = pooled: a session with no child. */
enum MHD_Result http_pooled_initialize(struct http_req *rc, const struct jsonrpc_info *info);
/* Any POST but initialize in a pooled session (scan, err: http_scan_body's verdict). */
/* A batch's elements scanned (info[0..n)); any bad one is answered (rc->responded) 400. */
enum MHD_Result http_batch_scan(struct http_req *rc, const struct jsonrpc_span *el,
                                struct jsonrpc_info *info, size_t n, bool *requests);
/*
 * What a session's batch passes before its elements are served, in either mode: its revision has
 * batches (allowed), at most max elements (el), none, each element scanned (http_batch_scan).
 * NULL when rc was answered (*ret); else the elements' infos (*n of them; the caller frees them)
 * and whether any is a request.
 */
struct jsonrpc_info *http_batch_open(struct http_req *rc, bool allowed, struct jsonrpc_span *el,
                                     size_t max, size_t *n, bool *requests, enum MHD_Result *ret);
/* Why a batch is refused over a transport or revision (over) that has none. */
const char *http_no_batches(unsigned over, char *buf, size_t size);
enum MHD_Result http_pooled_post(struct http_req *rc, int scan, const struct jsonrpc_info *info,
                                 const char *err);
/* What the pool knows of a pooled session's request (meta), its client's address, its trace. */
struct pool_meta;
struct trace_in;
void http_pooled_meta(struct http_req *rc, struct pool_meta *meta, char *client, size_t size,
                      struct trace_in *tin);
/*
 * A POST body scanned as one message into info (its refusal as not JSON answered: *ret, when
 * rc->responded); JSONRPC_OK or the scanner's verdict.
 */
int http_scan_body(struct http_req *rc, struct jsonrpc_info *info, const char **err,
                   enum MHD_Result *ret);

/* http_pooled_sse.c: the 2024-11-05 transport's pooled sessions (session_mode = pooled) */
/* GET PATH/sse of a pooled server: a session with no process, whose one stream this is. */
enum MHD_Result http_pooled_sse_open(struct http_req *rc);
/* The 2024-11-05 pooled session rc->sid names for rc's principal and server; NULL: none. */
struct pool_session *http_pooled_sse_find(const struct http_req *rc);
/* POST PATH/messages?sessionId= of it: one message, 202. */
enum MHD_Result http_pooled_sse_post(struct http_req *rc, struct pool_session *s);
/*
 * Origin and the token judged again, by the configuration now in force (rc->srv is already of it):
 * the principal and grants found before are dropped. The rate limit is not charged twice. True
 * when refused or waiting for the authorization server (then the request is judged again).
 */
bool http_refuse_again(struct http_req *rc, enum MHD_Result *ret);
enum MHD_Result http_post(struct http_req *rc);
enum MHD_Result http_get(struct http_req *rc);
enum MHD_Result http_delete(struct http_req *rc);
enum MHD_Result http_legacy_sse(struct http_req *rc);
enum MHD_Result http_legacy_post(struct http_req *rc);

/* http_stateless.c */
/* The header names a revision that is not a legacy one (2026-07-28, or one unknown). */
bool http_stateless_header(const char *ver);
/* This POST (scanned: scan is jsonrpc_scan's status) is of the stateless era. */
bool http_is_stateless(const struct http_req *rc, int scan, const struct jsonrpc_info *info);
enum MHD_Result http_stateless_post(struct http_req *rc, int scan, const struct jsonrpc_info *info,
                                    const char *err);
/* GET or DELETE of a stateless client: 405 with Allow: POST. */
enum MHD_Result http_stateless_refuse_method(struct http_req *rc);

/* http_ops.c */
enum MHD_Result http_health(struct http_req *rc);
enum MHD_Result http_ready(struct http_req *rc);
enum MHD_Result http_metrics(struct http_req *rc);
enum MHD_Result http_prm(struct http_req *rc);
/* The peer of rc's connection is on loopback. */
bool http_peer_loopback(const struct http_req *rc);
/* rc carries "Authorization: Bearer <token>" (compared in constant time). */
bool http_bearer_ok(const struct http_req *rc, const char *token);
/* 401 with WWW-Authenticate: Bearer. */
enum MHD_Result http_unauthorized(struct http_req *rc);
/* An operator view from b (cleared): 200 with content_type, Cache-Control: no-store. */
enum MHD_Result http_view(struct http_req *rc, struct buf *b, const char *content_type);

/* http_admin.c */
/* The admin routes under /admin/ (url: the request's path), behind admin_token. */
enum MHD_Result http_admin(struct http_req *rc, const char *url);
/* mcpgw_admin_actions_total. */
void http_admin_metrics(struct buf *b);
/*
 * 503 with Retry-After: rc->srv is drained by the operator (relay.h). info: the request, whose id
 * the error carries; NULL: id null.
 */
enum MHD_Result http_drained(struct http_req *rc, const struct jsonrpc_info *info);
/* True when rc->srv is drained: *ret is the refusal (http_drained). */
bool http_refuse_drained(struct http_req *rc, const struct jsonrpc_info *info,
                         enum MHD_Result *ret);

/* http_conn.c: MHD's connection notifications and the request-line hook */
void http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode toe);
void *http_request_line(void *cls, const char *uri, struct MHD_Connection *c);
/* From MHD's completed notification of a request that waited suspended: parks conn. */
void http_park(struct http_conn *conn);
/* After each MHD_run: resumes what was parked in it but is closing or has bytes left to read. */
void http_park_check(void);
/* Resumes every parked connection (before MHD_stop_daemon, which aborts on a suspended one). */
size_t http_unpark_all(void);

/* http_mcp.c: token_exchange's exchange of the request's token (true: answered or waiting). */
bool http_exchange(struct http_req *rc, enum MHD_Result *ret);

#endif
