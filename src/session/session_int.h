/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_SESSION_INT_H
#define MCPGW_SESSION_INT_H

/*
 * Private to the session layer (session.c, session_stream.c, session_route.c, session_task.c,
 * session_report.c): its state and the functions its files share. Nothing outside src/session*.c
 * includes this; the layer's interface is session.h.
 */

#include <sys/uio.h>

#include "auth.h"
#include "crypto.h"
#include "metrics.h"
#include "msg.h"
#include "quota.h"
#include "relay.h"
#include "revision.h"
#include "sandbox.h"
#include "session.h"
#include "stream.h"
#include "upstream.h"

/* A task the child created and has not reported terminal; it keeps the session from expiring. */
struct session_task {
    struct session_task *next;
    uint64_t until_ms; /* created + ttl; 0: no ttl (until terminal or the child's end) */
    char id[128];
};

/*
 * How a session is served, for operators (mcpgw_sessions{mode}, "mode" in /admin/inflight):
 * SESSION_MODE_CHILD, the session's own child process, is the only mode.
 */
enum session_mode { SESSION_MODE_CHILD, SESSION_MODE_N };
extern const char *const session_modes[SESSION_MODE_N];
/* A session's child (child_sleep_after_s, session_sleep.c). */
enum session_nap {
    SESSION_AWAKE = 0, /* s->u is the child (or NULL once it is gone and the session closes) */
    SESSION_ASLEEP,    /* stopped for quiet; s->u NULL: the next request wakes it */
    SESSION_WAKING,    /* s->u started again; its replayed initialize not yet answered */
};

#define SESSION_LABEL_LEN       16
#define SESSION_CLIENT_MAX      64  /* an IPv6 address in text, with room */
#define SESSION_CLIENT_INFO_MAX 129 /* clientInfo's name or version: 128 bytes, then cut */

struct session {
    char id[CRYPTO_SESSION_ID_MAX];
    enum session_state state;
    enum session_mode mode;
    const struct config_server *srv;
    struct session_server *stats; /* its server's counters (session_int.h) */
    struct auth_principal *owner; /* who created it; only they may use it (a reference) */
    struct quota *quota;          /* its owner's session count (quota.h, QUOTA_GATEWAY) */
    struct quota *calls_quota;    /* its owner's requests on its server: pinned while it lives */
    struct upstream *u;
    struct relay r;             /* its in-flight table and the writes that go with it */
    struct stream *streams;     /* every stream of the session (one reference each) */
    struct stream *get;         /* the standalone GET stream, also in streams */
    struct msgq backlog;        /* child notifications waiting for a stream */
    char version[16];           /* negotiated protocol version */
    const struct revision *rev; /* its row (revision.h); NULL until negotiated */
    uint64_t init_gw_id;
    uint64_t last_active_ms;
    bool paused; /* child stdout not read: a stream queue is over its high watermark */
    bool legacy; /* 2024-11-05 HTTP+SSE: the GET stream is the session */
    struct session_task *tasks; /* the child's tasks not known to be terminal (2025-11-25) */
    size_t ntasks;
    /*
     * For operators (the admin view, the child's environment). The label names the session
     * where its id must not go: the id lets whoever holds it use the session, the label (16 hex
     * digits of the id's SHA-256) does not.
     */
    char label[SESSION_LABEL_LEN + 1];
    char client[SESSION_CLIENT_MAX];           /* the client's address, as the access log has it */
    char client_name[SESSION_CLIENT_INFO_MAX]; /* initialize's clientInfo.name, cut; "": none */
    char client_version[SESSION_CLIENT_INFO_MAX]; /* ... .version */
    bool client_info;                             /* the initialize had a clientInfo object */
    uint64_t created_unix_ms;
    struct auth_held *tok; /* token_exchange: the exchanged token (session_token.c); NULL */
    /*
     * child_sleep_after_s (session_sleep.c): what a woken child is started and greeted with, and
     * the lines that wait for it. All NULL and empty on a server that never sleeps.
     */
    enum session_nap nap;
    bool sleep_pinned;       /* the client set state at the child (log level, subscription) */
    uint64_t quiet_since_ms; /* first sweep that found it quiet; 0: not quiet */
    uint64_t wake_start_us;
    char **creds;    /* the child's per-principal environment (wiped when freed); NULL: none */
    char *init_body; /* the client's initialize, as it came (its id at init_id) */
    size_t init_len;
    struct jsonrpc_span init_id;
    struct msgq wakeq;     /* lines for the child written while it wakes, in order */
    /* A child that may speak, or speaks, only a stateless revision (session_modern.c); NULL:
     * a legacy child (or a server with era = legacy). */
    struct session_modern *modern;
    struct session *hnext; /* hash chain */
    struct session *gnext; /* graveyard */
};

#define SESSION_BACKLOG_MAX      256
#define SESSION_CANCEL_LINGER_MS 60000
#define SESSION_CLASS_N          12

/* Method classes of the requests counter (the part before '/'), "other" last. */
extern const char *const session_classes[SESSION_CLASS_N];

struct session_end_info {
    const char *text;         /* logs, errors to what was in flight, cancels to the child */
    const char *label;        /* mcpgw_sessions_closed_total{reason} */
    enum relay_reason cancel; /* its cancels (child_ended: counted, nothing sent) */
};
extern const struct session_end_info session_ends[SESSION_END_N];

/*
 * Counters of one server (by name), kept for the life of the process so that /metrics stays
 * monotonic across reloads.
 */
struct session_server {
    struct metrics_row row; /* its name, the next server's row */
    size_t open;
    uint64_t created;
    uint64_t closed_by[SESSION_END_N];
    uint64_t requests[2][SESSION_CLASS_N]; /* [0] client -> child, [1] child -> client */
    uint64_t late_dropped;                 /* answers or progress that came after a cancel */
    uint64_t timeouts;
    uint64_t child_lines_invalid, notifications_dropped;
    struct metrics_hist latency; /* client request -> the child's answer, through the gateway */
    struct metrics_hist spawn;   /* the spawn call of a session's child */
    size_t inflight[2];          /* scratch of the scrape: session_inflight_in, by direction */
    /* Scratch of the scrape: sessions open, by mode. */
    size_t by_mode[SESSION_MODE_N];
    /* child_sleep_after_s (session_sleep.c): sleeps, wakes and failed wakes; a wake's time, from
     * the spawn to the replayed initialize's answer; sessions asleep (scratch of the scrape). */
    uint64_t sleeps, wakes, wake_failures;
    struct metrics_hist wake;
    uint64_t asleep;
};

/* The layer's state: one table of sessions per process. */
struct session_globals {
    struct loop *l;
    const struct config *cfg;
    struct session **buckets;
    size_t nbuckets;
    size_t count;
    struct session *graveyard; /* closed this turn, freed by session_reap */
    uint64_t next_stream_id;
    bool draining;    /* SIGTERM: no new sessions or requests, what is in flight may finish */
    struct msg *line; /* the child's large line being routed: pushed by reference, not copied */
    struct session_counters ctr; /* created and closed; the rest is summed from the rows */
    struct metrics_row *servers; /* struct session_server rows, in the order seen */
    struct auth *auth; /* the current [auth]: token exchange renewals (session_set_auth) */
};
extern struct session_globals sessions;

/* session.c */
/* The row of server (made on first use). */
struct session_server *session_server_of(const char *name);
/* What session_inflight counts, of s alone. */
size_t session_inflight_in(const struct session *s, enum pending_dir dir);
void session_touch(struct session *s);
/* s's owner's quota entry on s's server, pinned at its first request until session_close. */
struct quota *session_calls_quota(struct session *s);
size_t session_class(const char *method);

/* session_stream.c */
struct stream *session_stream_by_id(const struct session *s, uint64_t id);
/* Pushes one event (the pieces of one message) on st, then applies back-pressure. */
void session_push(struct session *s, struct stream *st, const struct iovec *iov, int n);
/* Takes st out of the session and drops the session's reference. */
void session_stream_remove(struct session *s, struct stream *st);
void session_stream_timer_stop(struct stream *st);
void session_maybe_resume(struct session *s);
void session_retire(struct session *s, uint64_t now_ms);
/* A client request bound to st got its answer, or was cancelled (st may be NULL). */
void session_stream_answered(struct session *s, struct stream *st);
/* The stream being read where a message unrelated to any known request goes; NULL if none. */
struct stream *session_route_unrelated(const struct session *s);
/* Cancels at the child what is still in flight on st, which the client left for good. */
void session_stream_abandon(struct session *s, struct stream *st, const char *why);

/* session_route.c */
/* The relay's writer (relay.h): the session's child, -1 once it is gone. */
int session_relay_send(void *arg, const struct iovec *iov, int n);
/*
 * The session's side of its relay (relay.h): where each message of its child goes (the routing
 * above); a timeout's end (initialize ends the session); the child's end closes the session.
 */
extern const struct relay_ops session_relay_ops;
/* Answers a request of the child's (its raw id) with a JSON-RPC error. */
void session_error_to_child(struct session *s, const char *id, size_t idlen, const char *message);
/* A JSON-RPC error for p's client id on st. */
void session_push_error(struct session *s, struct stream *st, const struct pending *p,
                        const char *message);
/* The upstream's callbacks: the relay reads the line (the session's bytes for its streams). */
void session_child_line(char *line, size_t len, struct msg *shared, void *arg);
void session_child_gone(const char *reason, void *arg);

/* session.c: starts s's child (s->u) with creds (not taken) and s's token; NULL with *err. */
struct upstream *session_spawn(struct session *s, char **creds, const char **err);

/* session_sleep.c */
/* Whether s has no child now only because it sleeps (a request wakes it). */
bool session_asleep(const struct session *s);
/* A request of the client's, before it is forwarded: keeps what a wake replays (initialize). */
void session_sleep_note(struct session *s, const char *body, size_t len,
                        const struct jsonrpc_info *info);
/* The sweep: puts s's child to sleep once it has been quiet for child_sleep_after_s. */
void session_sleep_check(struct session *s, uint64_t now_ms, bool tasks);
/* Starts s's sleeping child again (SESSION_OK: s->u is set and waking; else s may be closed). */
enum session_status session_wake(struct session *s);
/* The relay's writes while the child wakes: queued, sent once it has answered initialize. */
int session_sleep_queue(struct session *s, const struct iovec *iov, int n);
/* The woken child's answer to the replayed initialize (p): checked, swallowed; -1 always. */
int session_sleep_woke(struct session *s, struct pending *p, const char *line, size_t len,
                       const struct jsonrpc_info *info);
/* session_close: what the session kept for its wakes is freed (creds wiped). */
void session_sleep_close(struct session *s, enum session_end why);
/* The admin view's word for s's child: "running", "asleep" or "waking". */
const char *session_sleep_state(const struct session *s);
/* The sleeps', wakes' and sleeping sessions' series. */
void session_sleep_metrics(struct buf *b);

/* session_token.c */
/*
 * Before the spawn: s's private directory and its token file from x (the exchange at initialize;
 * x stays the caller's), the subject from authorization (the request's header). env[0] and env[1]
 * get "VAR=token" and "VAR_FILE=path". NULL, or the refusal (500) when the file cannot be made.
 */
const char *session_token_open(struct session *s, struct auth_exchanged *x,
                               const char *authorization, char **env);
/*
 * What s's boxed child is shown of its own (the token's directory, the group that reads it): NULL
 * when s holds no token, else own filled, or NULL with the log saying why it cannot be.
 */
const struct sandbox_own *session_token_own(struct session *s, struct sandbox_own *own,
                                            bool *failed);
/* After the spawn: the first renewal's timer. */
void session_token_start(struct session *s);
/* The session's end (session_close): the renewal stopped, the file and directory removed. */
void session_token_close(struct session *s);

/* session_modern.c: a legacy session in front of a stateless child */
/* Keeps what the client's initialize says (unless era = legacy): a candidate. */
void session_modern_begin(struct session *s, const char *body, const struct jsonrpc_info *info);
void session_modern_free(struct session *s);
/* The child is stateless: every message of the session is translated. */
bool session_modern_active(const struct session *s);
/* Its initialize's entry now waits for the server/discover probe's answer. */
bool session_modern_probing(const struct session *s);
/* The child refused the initialize (line): true when the probe went to it instead (p kept). */
bool session_modern_init_refused(struct session *s, struct pending *p, const char *line,
                                 size_t len);
/* The probe's answer: the session is ready (its initialize answered) or ended. */
void session_modern_init_answer(struct session *s, struct stream *st, struct pending *p,
                                const char *line, size_t len, const struct jsonrpc_info *info);
/* A request the gateway answers itself on st (what the stateless revision removed, a bad one). */
bool session_modern_local(struct session *s, struct stream *st, const char *body, size_t len,
                          const struct jsonrpc_info *info);
/* Sends p's request with the stateless envelope: 0, -1 (stdin full), or PASS: the usual way. */
#define SESSION_MODERN_PASS (-2)
int session_modern_send(struct session *s, struct pending *p, const char *body, size_t len,
                        const struct jsonrpc_info *info, const char *id, size_t idlen);
/* The child's answer to p: true when it was an input round (or refused), not for the client. */
bool session_modern_answer(struct session *s, struct stream *st, struct pending *p,
                           const char *line, size_t len, const struct jsonrpc_info *info);
/* The child's line about the session's subscriptions/listen (its end, its acknowledgement):
 * true when it is one, and taken. */
bool session_modern_listen_line(struct session *s, const char *line,
                                const struct jsonrpc_info *info);
/* The client's answer to a question q of a round: true when taken (q is gone). */
bool session_modern_client_answer(struct session *s, struct pending *q, const char *body,
                                  const struct jsonrpc_info *info);

/* session_task.c */
/* A CreateTaskResult, a tasks/get or tasks/cancel result, or notifications/tasks/status. */
void session_task_seen(struct session *s, const char *line, size_t len);
void session_tasks_clear(struct session *s);
/* Forgets tasks past their ttl; true while any other is held. */
bool session_tasks_alive(struct session *s, uint64_t now_ms);

#endif
