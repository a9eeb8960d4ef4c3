/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_POOL_H
#define MCPGW_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "jsonrpc.h"
#include "loop.h"
#include "policy.h"
#include "relay.h"
#include "session_seal.h"
#include "stream.h"
#include "trace.h"

/*
 * The stateless (2026-07-28) era has no sessions: each request stands alone. A pool of children per
 * [server:NAME] serves these requests, many clients per child. The era of the children is found
 * once per pool (a server/discover probe of the first child, which also tells the stateless
 * revisions the children speak: each request is served as the revision it names, or refused with
 * the list of those they speak) or set in the INI; a
 * legacy child is initialized once by the gateway and its results are adapted (resultType, ttlMs,
 * cacheScope), and server/discover is answered for it from its initialize result.
 *
 * Every request goes through its child's in-flight table (pending.h): the child sees an id and a
 * progress token the gateway minted, so clients sharing a child can never collide. Its answer and
 * its progress go on the request's own stream, which the answer ends. A client that closes that
 * stream, a timeout, the child's end and shutdown all end the request through the table: the child
 * gets notifications/cancelled with the id it saw, at once; a late answer is dropped. Nothing a
 * child sends goes to a client it cannot be attributed to: list changes and log
 * lines with no single owner are dropped and counted.
 *
 * A legacy child's requests to the client (elicitation, sampling, roots) become input_required
 * rounds of the request they belong to (pool_bridge.c): the child's call is held while the client
 * answers and retries with a sealed requestState; anything that cannot be attributed to exactly
 * one request, or that the client did not declare the capability for, gets an error.
 */

/* Outcomes of pool_request; http_stateless.c maps them to HTTP statuses. */
/* What a pool call says; its text for the client: relay_status_text (relay.h). */
enum pool_status {
    POOL_OK = RELAY_OK,
    POOL_E_FULL = RELAY_E_FULL, /* every child at pool_child_max_inflight, the pool at its size: 429 */
    POOL_E_UNAVAILABLE = RELAY_E_UNAVAILABLE, /* no child can be started (spawns, budget): 503 */
    POOL_E_BUSY = RELAY_E_BUSY,               /* the child's stdin queue is full: 503 */
    POOL_E_DRAINING = RELAY_E_DRAINING,       /* shutting down: 503 */
    POOL_E_DRAINED = RELAY_E_DRAINED,         /* the operator drained the server (relay.h): 503 */
    POOL_E_ID_TOO_LONG = RELAY_E_ID_TOO_LONG, /* id or progress token past max_id_bytes: 400 */
    POOL_E_NO_METHOD = RELAY_E_NO_METHOD, /* not a method of the revision (or of a legacy child) */
    POOL_E_BAD_STATE = RELAY_E_BAD_STATE, /* a retry's requestState names no call held here: 400 */
    POOL_E_PRINCIPAL = RELAY_E_PRINCIPAL, /* at a per-principal limit (meta.why names it): 429 */
    /* Per-principal credentials (config_server_per_principal): meta.why says which, no value */
    POOL_E_CREDENTIALS = RELAY_E_CREDENTIALS, /* none for this principal (no file of it): 403 */
    POOL_E_CREDENTIALS_BAD = RELAY_E_CREDENTIALS_BAD, /* its file cannot be read safely: 500 */
    /* Pooled sessions only: */
    POOL_E_GONE = RELAY_E_GONE,           /* the session is gone: 404 */
    POOL_E_TOO_MANY = RELAY_E_TOO_MANY,   /* the session's max_inflight_per_session: 429 */
    POOL_E_DUPLICATE = RELAY_E_DUPLICATE, /* the request id is already in flight: 400 */
    POOL_E_CONFLICT = RELAY_E_CONFLICT,   /* its GET stream is already open: 409 */
};

struct revision;
struct auth_claims;
struct auth_exchanged;
struct auth;

/* What http_stateless.c knows of the request beyond the scanner's spans. */
struct pool_meta {
    const struct revision *rev; /* the stateless row the request names (revision.h) */
    int log_level;         /* index of _meta logLevel (0 debug .. 7 emergency); -1: no log lines */
    const char *principal; /* who asks (auth's principal name): binds an input round to them */
    /*
     * What its verified token's claims give the server's env_from_claims (auth.h; NULL: none). A
     * server with per-principal credentials serves it on children of principal alone, each started
     * with these claims (and credentials_dir's file, read at its start).
     */
    struct auth_claims *claims;
    const char *client; /* its address as the access log names it (admin view); NULL: none */
    /* out: for POOL_E_BAD_STATE, what is wrong with the requestState; for POOL_E_UNAVAILABLE,
     * why the server cannot serve (when it is more than a failed start) */
    const char *why;
    /* The token's scopes, for the server's tool policy (policy.h). */
    struct policy_grants grants;
    /* What the HTTP request's headers carry of W3C trace context (trace.h); NULL: trace_context
     * is off, and the child's line is the client's with only the id (and token) replaced. */
    struct trace_in *trace;
    /*
     * token_exchange servers only (NULL otherwise, so nothing is added per request when off): the
     * request's Authorization (verified), the subject of the principal's next renewal; and the
     * exchange of its token, made when pool_token_wanted said so: what the principal's pool holds
     * for its children (copied; the caller still frees it).
     */
    const char *authorization;
    const struct auth_exchanged *xres;
    /* A pooled session's request (pool_session_request sets it); NULL: a stateless request. */
    struct pool_session *session;
    /* A pooled session's request on a task: this child alone (it holds the task); NULL: any. */
    struct pool_child *child;
};

void pool_module_init(struct loop *l, const struct config *cfg);
/* The [auth] token_exchange renewals go through (main.c sets it at start and at each reload). */
void pool_set_auth(struct auth *a);
/*
 * token_exchange: whether meta's principal has no pool of srv holding an exchanged token yet, so
 * that the request's token must be exchanged (meta->xres) before pool_request.
 */
bool pool_token_wanted(const struct config_server *srv, const struct pool_meta *meta);
/*
 * SIGHUP: a pool whose server is unchanged in cfg (config_server_same, and its children start
 * alike) moves to cfg as it is; the others take no new request, end their listeners and end once
 * idle.
 */
void pool_set_config(const struct config *cfg);
bool pool_uses_config(const struct config *cfg);
/*
 * Readiness is asked (/readyz, /metrics, systemd): while no child of srv (of the current
 * configuration) has ever completed its start, and its command is not known missing, its pool
 * starts one child (the probe) if it has none, so that the answer becomes true without a request
 * of either era. Nothing while the gateway or the server is drained. A gateway nobody asks starts
 * no child before a request.
 */
void pool_probe(const struct config_server *srv);
void pool_module_free(void);
/* Periodic: heartbeats, idle children, forgetting cancelled entries. */
void pool_sweep(uint64_t now_ms);
/* Shutdown: first no new request (draining), then everything in flight cancelled. */
void pool_drain(void);
void pool_close_all(void);
/* Requests in flight over every pool (what a drain waits for: no listen). */
size_t pool_inflight(void);
/*
 * The operator's restart of srv's pool (POST /admin/servers/NAME/restart): the pool is retired as
 * a reload retires it (its children end what they have in flight, then stop; its listeners are
 * told to listen again) and a new one starts as many children as it had, at least
 * pool_warm_children. Returns the old pool's children (0: srv had no pool, nothing to replace).
 */
size_t pool_restart(const struct config_server *srv);

/*
 * A stateless request (body is ours and may be rewritten in place) for srv: a new stream that
 * carries its answer and the notifications of that request, and that the answer ends; the caller
 * gets its own reference and gives it back with pool_stream_detach. NULL with *status otherwise.
 */
struct stream *pool_request(const struct config_server *srv, char *body, size_t len,
                            const struct jsonrpc_info *info, struct pool_meta *meta,
                            enum pool_status *status);
/*
 * The requestState sealing key: state_key_file's bytes, or a random key when it is empty. 0, or
 * -1 with err filled (the file cannot be read, or is not 32..4096 bytes); the key in use stays.
 */
int pool_load_key(const struct config *cfg, char *err, size_t errlen) MUSTCHECK;
/* The HTTP side is done with st; when its request is still in flight the client left: cancel. */
void pool_stream_detach(struct stream *st);
/* The log level at sp (a JSON string: "debug" 0 .. "emergency" 7); -1 when it is none of them. */
int pool_log_level(const char *p, struct jsonrpc_span sp);

/*
 * Pooled legacy sessions (session_mode = pooled; pool_session.c): a session that owns no child.
 * The gateway answers its initialize from the pool's own handshake with its children (their
 * serverInfo, capabilities and instructions; the version negotiated as the specification says),
 * once a child is ready (waiting for the first, bounded by pool_start_timeout_ms); each of its
 * requests is a pool call on one of the pool's children (pool_request), so ids and progress
 * tokens are minted per child and two sessions on one child never see each other's messages.
 * The session keeps what the child would keep per connection: its calls (the client's cancel by
 * its own id, DELETE, expiry), its log level, its GET stream. Its id has a form of its own
 * (pool_session_named), so the HTTP front routes it here without asking the session layer.
 * Children that speak only the stateless revision serve pooled sessions too: the initialize is
 * answered from a child's server/discover, each request carries its session's own stateless _meta
 * envelope, and input_required rounds become the session's client requests, then the retry
 * (pool_session_modern.c).
 */
struct pool_session;
/*
 * Whether id is a pooled session's: its one rule is session_seal_is (session_seal.h), a sealed id
 * starts with '~' and has no instance prefix, so nginx routes it round-robin.
 */
bool pool_session_named(const char *id);
/*
 * The keys that seal and open pooled sessions' ids, in two steps so that a reload failing
 * elsewhere keeps the running keys: load gives session_key_file's keyring (keyring.h), or a
 * random one when it is empty; NULL with err empty when the random key already in use stays,
 * NULL with err filled when the file is unsafe, unreadable or not a key file. set takes kr and
 * frees the keys it replaces (NULL: none left; the caller sets only what load gave).
 */
struct keyring *pool_session_keys_load(const struct config *cfg, char *err, size_t errlen);
void pool_session_keys_set(const struct config *cfg, struct keyring *kr);
#define POOL_SESSION_LABEL_MAX SESSION_SEAL_LABEL_MAX
/* Pooled sessions with a local record here (max_sessions counts them with the sessions of children). */
size_t pool_session_count(void);
/* Local records of srv's sessions (mcpgw_sessions{mode="pooled"}). */
size_t pool_session_count_of(const char *server);
/*
 * The session id names for srv and principal, opened on every request (session_seal_open with
 * session_max_age_s, then the principal and the server); an id that opens but has no record at
 * this instance gets a fresh one (no log level, subscription or GET stream), when room says
 * max_sessions has room and the principal's max_sessions_per_principal too. NULL with *status:
 * POOL_E_GONE when unknown, forged, expired, DELETEd here, another principal's or another
 * server's (the same 404 for all); POOL_E_UNAVAILABLE or POOL_E_PRINCIPAL with *why when full,
 * POOL_E_DRAINING when shutting down (503: nginx tries another instance); nothing is made then.
 */
struct pool_session *pool_session_find(const char *id, const struct config_server *srv,
                                       const char *principal, bool room, enum pool_status *status,
                                       const char **why);
/* What logs name the session by (never its id). */
const char *pool_session_label(const struct pool_session *s);
const char *pool_session_id(const struct pool_session *s);
/*
 * A legacy initialize for srv (session_mode = pooled): a new session (*out) and the stream its
 * answer comes on; NULL with *status (meta->why may say more). meta as for pool_request; the
 * session counts toward meta->principal's max_sessions_per_principal.
 */
struct stream *pool_session_initialize(const struct config_server *srv, char *body, size_t len,
                                       const struct jsonrpc_info *info, struct pool_meta *meta,
                                       struct pool_session **out, enum pool_status *status);
/* A request of the session (any but initialize): its stream, or NULL with *status. */
struct stream *pool_session_request(struct pool_session *s, const struct config_server *srv,
                                    char *body, size_t len, const struct jsonrpc_info *info,
                                    struct pool_meta *meta, enum pool_status *status);
#define POOL_BATCH_MAX 256 /* elements of one batch (as a child-mode session's) */
/*
 * A 2025-03-26 batch of the session (el, info: its elements, each already checked): each request
 * served as if posted alone, its answer an event of the one stream returned (it ends after the
 * last); NULL when the batch holds no request (202). Errors of one element are events of its own.
 */
struct stream *pool_session_batch(struct pool_session *s, const struct config_server *srv,
                                  char *body, const struct jsonrpc_span *el,
                                  const struct jsonrpc_info *info, size_t n,
                                  const struct pool_meta *meta);
/* Whether the session's revision has batches (2025-03-26). */
bool pool_session_batches(const struct pool_session *s);
/* A notification or response of the session's client: POOL_OK (202), or why not. */
enum pool_status pool_session_other(struct pool_session *s, char *body, size_t len,
                                    const struct jsonrpc_info *info);
/*
 * The session's GET stream (its own notifications: list changes), new, or the one a dropped GET
 * left (read on from where it stopped); NULL: POOL_E_CONFLICT (another connection reads it).
 */
struct stream *pool_session_get(struct pool_session *s, enum pool_status *status);
/*
 * GET with Last-Event-ID (pool_session_stream.c): the stream of this session at this instance the
 * id names, rewound to the event after it. NULL with POOL_E_CONFLICT while another connection
 * reads it, else POOL_E_GONE (410): malformed, no such stream here (another instance's, say), its
 * events dropped, or nothing more will follow.
 */
struct stream *pool_session_resume(struct pool_session *s, const char *last_event_id,
                                   enum pool_status *status);
/* The HTTP side is done with st, a stream of session sid (its GET stream, or a call's). */
void pool_session_detach(const char *sid, struct stream *st);
/* DELETE: every call of the session cancelled, the session gone. */
void pool_session_delete(struct pool_session *s);

/*
 * Pooled sessions of the 2024-11-05 HTTP+SSE transport (pool_session_sse.c): GET PATH/sse opens
 * a session record (no process) whose one SSE stream carries the endpoint event, then every answer,
 * progress, question and notification of the session's; POST PATH/messages?sessionId= hands it
 * one message. Its id is random (crypto_session_id), looked up at this instance alone (the stream
 * is one connection to one instance) and bound to its principal and server; a Streamable HTTP
 * pooled session's sealed id never names one, nor the reverse. Dropping the stream ends the
 * session, every call cancelled at its child ("client disconnected").
 */
/*
 * A new session of srv for principal, counted toward max_sessions_per_principal (room: whether
 * max_sessions has room): its SSE stream (the caller's reference) already carrying the endpoint
 * event, data endpoint_head followed by the id; NULL with *status and *why otherwise.
 */
struct stream *pool_session_sse_open(const struct config_server *srv, const char *principal,
                                     const char *endpoint_head, bool room,
                                     struct pool_session **out, enum pool_status *status,
                                     const char **why);
/*
 * What logs name the session id names by (it is a bearer secret, as a sealed id is): "sse:" and the
 * first 8 bytes of its SHA-256 in hex, whether or not a session has it.
 */
#define POOL_SESSION_SSE_LABEL_MAX 21
void pool_session_sse_label(const char *id, char out[POOL_SESSION_SSE_LABEL_MAX]);
/* The 2024-11-05 session id names, for srv and principal; NULL: none (404). */
struct pool_session *pool_session_sse_find(const char *id, const struct config_server *srv,
                                           const char *principal);
/*
 * A request of the session's client (initialize included, once): POOL_OK (202: whatever answers it
 * comes on the session's stream), or why not with meta->why.
 */
enum pool_status pool_session_sse_request(struct pool_session *s, const struct config_server *srv,
                                          char *body, size_t len, const struct jsonrpc_info *info,
                                          struct pool_meta *meta);
/* Whether the session's initialize was taken (answered, or on its way to a child). */
bool pool_session_sse_initialized(const struct pool_session *s);
/* Whether it was answered: the session serves requests. */
bool pool_session_sse_ready(const struct pool_session *s);

/* The pools' series in Prometheus text format. */
void pool_metrics(struct buf *b);
/*
 * The pools as a JSON array (server, era, children with pid, state and in-flight entries, each
 * with its caller: principal, client address, tool or resource name, when it started),
 * appended to b in at most max bytes: children that do not fit are left out. 0, 1 when some were
 * left out, -1 when not even the pools' frame fits (nothing appended).
 */
int pool_admin_json(struct buf *b, size_t max);
/*
 * The pooled sessions' local records as a JSON array (label, server, "mode":"pooled", owner,
 * protocol version, idle time, calls, whether a GET stream is open; never the id), appended to b
 * in at most max bytes: records that do not fit are left out. 0, 1 when some were left out.
 */
int pool_session_admin_json(struct buf *b, size_t max);

#endif
