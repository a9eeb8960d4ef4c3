/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_SESSION_H
#define MCPGW_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "buf.h"
#include "config.h"
#include "jsonrpc.h"
#include "loop.h"
#include "pending.h"
#include "policy.h"
#include "relay.h"
#include "stream.h"
#include "trace.h"

/*
 * Sessions: the table, their lifecycle, and the routing between a session's HTTP streams and its
 * child. Every request, answer, cancel, drop and ending goes through the session's in-flight table
 * (pending.h). Knows nothing of MHD: http.c hands it parsed messages and streams.
 */

enum session_state {
    SESSION_INITIALIZING = 0, /* in the table; initialize not yet answered */
    SESSION_READY,            /* in the table */
    SESSION_CLOSED,           /* out of the table, on the graveyard until the end of the turn */
};

/* A session is the session layer's (session_int.h); others hold pointers and ask it. */
struct session;

/* Outcomes of handing a message to a session; http.c maps them to HTTP statuses. */
/* What a session call says; its text for the client: relay_status_text (relay.h). */
enum session_status {
    SESSION_OK = RELAY_OK,
    SESSION_E_GONE = RELAY_E_GONE,               /* the session or its child is gone: 404 */
    SESSION_E_BUSY = RELAY_E_BUSY,               /* the child's stdin queue is full: 503 */
    SESSION_E_TOO_MANY = RELAY_E_TOO_MANY,       /* in-flight cap reached: 429 */
    SESSION_E_DUPLICATE = RELAY_E_DUPLICATE,     /* the request id is already in flight: 400 */
    SESSION_E_CONFLICT = RELAY_E_CONFLICT,       /* a GET stream is already open, or resumed: 409 */
    SESSION_E_EVICTED = RELAY_E_EVICTED,         /* Last-Event-ID names nothing replayable: 410 */
    SESSION_E_ID_TOO_LONG = RELAY_E_ID_TOO_LONG, /* id or progress token past max_id_bytes: 400 */
    SESSION_E_PRINCIPAL = RELAY_E_PRINCIPAL_CALLS, /* max_inflight_per_principal reached: 429 */
};

void session_module_init(struct loop *l, const struct config *cfg);
/*
 * SIGHUP: gateway-wide settings come from cfg from now on. Sessions keep the server definition
 * they started with (it belongs to an older cfg, which lives while session_uses_config says so).
 */
void session_set_config(const struct config *cfg);
bool session_uses_config(const struct config *cfg);
/* Frees the table (after every session was closed and reaped). */
void session_module_free(void);
/* Why a session ends (one close path: session_close); indexes the sessions-closed counter. */
enum session_end {
    SESSION_END_DELETED = 0,  /* DELETE */
    SESSION_END_EXPIRED,      /* session_idle_timeout_s */
    SESSION_END_DISCONNECTED, /* the 2024-11-05 stream's connection ended */
    SESSION_END_CHILD,        /* the child can no longer serve (nothing more is sent to it) */
    SESSION_END_SHUTDOWN,     /* the gateway stops */
    SESSION_END_INIT,         /* initialize failed, timed out or could not be delivered */
    SESSION_END_ADMIN,        /* the operator ended it (POST /admin/sessions/ID/end) */
    SESSION_END_TOKEN,        /* token_exchange: its exchanged token could not be renewed */
    SESSION_END_N,
};

/* Closes every session; children go through their ladder. */
void session_close_all(enum session_end why);
/* Frees sessions closed during this loop turn (call once per turn). */
void session_reap(void);
/* Periodic: heartbeats, idle expiry, forgetting cancelled entries. */
void session_sweep(uint64_t now_ms);

/* NULL when unknown or closed. */
struct session *session_find(const char *id);
/*
 * The session id names for a request to srv by owner: NULL when it is unknown, closed, another
 * server's (a server is its [server:NAME], so a session outlives a reload of its definition), or
 * another principal's: the same answer, so that an id alone neither grants access nor reveals a
 * session. legacy: a 2024-11-05 session whose stream is open; otherwise a Streamable HTTP one.
 */
struct session *session_lookup(const char *id, const struct config_server *srv,
                               const struct auth_principal *owner, bool legacy);
size_t session_count(void);
const char *session_id(const struct session *s);
/* Its client's initialize has been forwarded (a 2024-11-05 session may send it only once). */
bool session_initialized(const struct session *s);
/* A 2024-11-05 session's one stream, which every answer travels on. */
struct stream *session_legacy_stream(struct session *s);
/* The [server:NAME] it belongs to. */
const char *session_server_name(const struct session *s);
/*
 * Who the session's client is, for the admin view: its address as the access log has it (the
 * socket's peer, or a trusted proxy's X-Forwarded-For), copied (at most 63 bytes).
 */
void session_set_client(struct session *s, const char *client);
/* The client's requests in flight at its child. */
size_t session_requests_in_flight(const struct session *s);
/*
 * Spawns the child. NULL with *status 503 (too many sessions) or 500 (spawn failed). A server
 * with per-principal credentials (config_server_per_principal) gives the child owner's: its
 * credentials_dir file, read now, and claims (the token's, for env_from_claims; NULL: none), on
 * top of the server's environment; 403 when they refuse it (a claim missing or invalid, no file
 * and credentials_missing = refuse), 500 when the file is unsafe or malformed. *err never holds
 * a credential's value; it may point into claims, which must outlive its use.
 */
struct session *session_create(const struct config_server *srv, struct auth_principal *owner,
                               const struct auth_claims *claims, int *status, const char **err);
/*
 * session_create for a server with token_exchange = on: x (the caller's, not kept) is what the
 * exchange of the client's token gave (OK), authorization the request's Authorization header (the
 * subject of the renewals). The child gets the token in token_exchange_env and in the file that
 * token_exchange_env + "_FILE" names; the session renews it (session_token.c). 500 when the file
 * cannot be written.
 */
struct session *session_create_exchanged(const struct config_server *srv,
                                         struct auth_principal *owner,
                                         const struct auth_claims *claims, struct auth_exchanged *x,
                                         const char *authorization, int *status, const char **err);
/*
 * A request of s carried this Authorization header (verified, and s's owner's): the subject token
 * of s's next token exchange renewal. Nothing for a session without token_exchange.
 */
void session_token_seen(struct session *s, const char *authorization);
/* The [auth] token exchange renewals use (at start and after each reload); NULL: none. */
void session_set_auth(struct auth *a);

/*
 * Ends the session, once (later calls do nothing): cancels at the child and fails to the client
 * what is in flight, ends streams, stops the child. detail (static or copied before the call
 * returns; NULL: the reason's own text) says more in the log and the errors. The struct stays,
 * CLOSED, until session_reap: check s->state after any call that may have closed it.
 */
void session_close(struct session *s, enum session_end why, const char *detail);

/*
 * A stream for an HTTP connection to read (attached); the caller gets its own reference. POST: a
 * new stream. GET: the standalone stream, new, or the one a dropped GET left (read on from where
 * it stopped); SESSION_E_CONFLICT while another connection reads it.
 */
struct stream *session_stream_open(struct session *s, bool is_get, enum session_status *status);
/*
 * The 2024-11-05 HTTP+SSE transport: marks s legacy and opens its one
 * stream, whose first event is "endpoint" with the URL to POST messages to. Every answer and every
 * message of the child travels on it; when its connection ends, the session ends.
 */
struct stream *session_legacy_open(struct session *s, const char *endpoint);

/*
 * GET with Last-Event-ID: the stream the id names, rewound to the event after it (a POST's stream
 * too: its answer may have come while the client was away). SESSION_E_EVICTED when the id is
 * malformed, names no stream of this session, or its events are no longer held, or nothing more
 * will ever follow it; SESSION_E_CONFLICT while another connection reads that stream.
 */
struct stream *session_stream_resume(struct session *s, const char *last_event_id,
                                     enum session_status *status);
/*
 * The HTTP side is done with st (sid names its session, which may be gone by now) and releases
 * its reference. When st did not finish, the connection ended early: either the gateway hung up
 * (SSE polling) or the client went away. Requests bound to st are then cancelled at the child at
 * once, or after disconnect_grace_ms unless the client resumes the stream first.
 */
void session_stream_detach(const char *sid, struct stream *st);

/*
 * A client request (body is ours and may be rewritten in place), answered on st. grants: the
 * token's scopes for the server's tool policy (policy.h); a tools/call of a tool hidden from them
 * never reaches the child and is answered on st as an unknown tool. trace: what the HTTP request's
 * headers carry of W3C trace context (trace.h); NULL when trace_context is off: then the line the
 * child gets is the client's with only the id replaced.
 */
enum session_status session_client_request(struct session *s, struct stream *st, char *body,
                                           size_t len, const struct jsonrpc_info *info,
                                           struct policy_grants grants, struct trace_in *trace);
/* A client notification or response. */
enum session_status session_client_other(struct session *s, char *body, size_t len,
                                         const struct jsonrpc_info *info);

#define SESSION_BATCH_MAX 256 /* elements of one batch, either way */

/*
 * A 2025-03-26 batch: el/info are its elements, already scanned, in order;
 * requests among them are answered on st (NULL when there are none), each with its own event; a
 * request that cannot be forwarded (duplicate id, in-flight cap) gets an error event at once.
 * SESSION_E_BUSY when the child's stdin cannot take the whole batch (nothing is sent).
 */
enum session_status session_client_batch(struct session *s, struct stream *st, char *body,
                                         size_t len, const struct jsonrpc_span *el,
                                         const struct jsonrpc_info *info, size_t n,
                                         struct policy_grants grants, struct trace_in *trace);
/* Whether the session's revision has JSON-RPC batches (revision.h). */
bool session_batches(const struct session *s);

/* Counters since start (the admin view; /metrics later). */
struct session_counters {
    uint64_t created, closed;
    uint64_t late_dropped; /* answers or progress that came after a cancel */
    uint64_t timeouts;
    uint64_t child_lines_invalid, notifications_dropped;
};

/*
 * The admin view: every session with its streams and in-flight entries (direction, method, original
 * id, age, state, stream, deadline) and the counters, as one JSON document. New xmalloc'd string.
 */
char *session_admin_json(size_t *len);

const struct session_counters *session_counters(void);

/*
 * Graceful shutdown, first step: no new session and no new client request (503); answers,
 * notifications and resumes still flow so that what is in flight can finish.
 */
void session_drain(void);
bool session_draining(void);
/* Requests in flight over every session, in one direction (forwarded, not yet answered). */
size_t session_inflight(enum pending_dir dir);
/*
 * The sessions', children's and in-flight table's series in Prometheus text format; pooled, when
 * not NULL, counts a server's pooled sessions (mcpgw_sessions{mode="pooled"}: the layer that
 * keeps them is a sibling this one does not call).
 */
void session_metrics(struct buf *b, size_t (*pooled)(const char *server));

#endif
