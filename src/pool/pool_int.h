/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_POOL_INT_H
#define MCPGW_POOL_INT_H

/*
 * Private to the pool (pool.c: pools and their children; pool_route.c: requests and the children's
 * messages). Nothing outside src/pool*.c includes this; the interface is pool.h.
 */

#include <sys/uio.h>

#include "log.h"
#include "metrics.h"
#include "pending.h"
#include "pool.h"
#include "quota.h"
#include "relay.h"
#include "revision.h"
#include "sandbox.h"
#include "upstream.h"

#define POOL_CANCEL_LINGER_MS 60000
/*
 * A child's stdin has this much room per request it may have in flight (and one more) past
 * stdin_queue_bytes, for the gateway's cancels and fence pings alone (pool_bridge.c, the fence):
 * a cancel is about 160 bytes, a ping 50.
 */
#define POOL_CONTROL_BYTES    512
/* Restarts after failures back off: the first waits this long, each next one twice as long. */
#define POOL_BACKOFF_MIN_MS   500
#define POOL_BACKOFF_MAX_MS   30000
/* A line that repeats while a server fails is written at most once in this many ms. */
#define POOL_LOG_REPEAT_MS    5000

enum pool_child_state {
    POOL_CHILD_STARTING = 0, /* probe or initialize in flight */
    POOL_CHILD_READY,
    POOL_CHILD_GONE, /* out of the pool; freed by a deferred call */
};

struct pool;
struct pool_task;
struct pool_batch;

struct pool_child {
    struct pool *pool;
    struct upstream *u;
    enum pool_child_state state;
    struct relay r;           /* its requests: ids and tokens minted per child */
    uint64_t start_id;        /* gw id of the probe or initialize in flight; 0: none */
    bool probing;             /* start_id is a server/discover probe (else an initialize) */
    struct loop_timer *timer; /* pool_start_timeout_ms while STARTING */
    uint64_t idle_since_ms;   /* last time it had nothing in flight */
    bool heard;               /* it wrote a line: a child that dies before is a failed start */
    /* The stateless row the probe names (pool_start.c). */
    const struct revision *probe_rev;
    /*
     * The fence (pool_bridge.c): a call that may ask was cancelled here, and a question it wrote
     * before reading its cancel may still come. cancel_seq counts such cancels, a ping (fence_id)
     * follows them, and its answer says the child read them all: fenced_seq takes the fence_seq
     * the ping was sent at. Questions are attributed only while fenced_seq == cancel_seq.
     */
    uint64_t fence_id; /* gw id of the ping in flight; 0: none */
    unsigned cancel_seq, fence_seq, fenced_seq;
    /* Resource URIs subscribed here for listeners, or named by the gateway's listen held here
     * (pool_session_listen.c): keeps it running */
    unsigned subs;
    uint64_t subs_sent; /* its subscribe requests so far (their ids: "mcpgw-sub-N") */
    char tag[96];       /* "pool:NAME#N" in logs */
    uint64_t used_seq;  /* pools.use_seq when it last got a request: the least recent goes first */
    struct pool_task *tasks; /* pooled sessions' tasks it holds (pool_session_task.c) */
    struct pool_child *prev, *next;
};

struct pool_call;

/* A table of names (URIs) by hash: buckets of singly linked chains (pool_caps.c). */
struct pool_names {
    void **b; /* chains; each entry's first member is its char *name, its link at next_off */
    size_t nb, n;
};

/* A subscriptions/listen of a legacy pool, served by the gateway (pool_listen.c). */
struct pool_listen {
    struct pool_call *call; /* its stream; the call has no child */
    unsigned flags;         /* agreed: JSONRPC_LISTEN_* */
    char **uris;            /* resourceSubscriptions agreed */
    size_t nuris;
    char *id; /* the listen request's id (raw JSON): the subscriptionId */
    size_t id_len;
    struct pool_listen *next;
};

/* A resource URI listeners named, subscribed at one child. */
struct pool_sub {
    char *uri;
    size_t refs;                  /* listeners naming it */
    struct pool_child *c;         /* where it is subscribed; NULL while no child is ready or sent */
    struct pool_sub *prev, *next; /* pool.subs */
    struct pool_sub *hnext;       /* pool.sub_names */
};

/* A question a legacy child asked the client (elicitation, sampling, roots), in a round. */
struct pool_ask {
    char *child_id; /* the child's request id, raw JSON */
    size_t child_id_len;
    char method[JSONRPC_METHOD_MAX];
    char *params; /* raw JSON object, or NULL */
    size_t params_len;
    unsigned key;  /* "r<key>" in inputRequests */
    bool answered; /* the client's response went to the child */
};

#define POOL_ASKS_MAX 16 /* questions one call may have open; more are answered with an error */

#define POOL_CALLER_TEXT 129 /* a caller's principal or name shown: 128 bytes, then cut */

/* Who made a call, for the admin view (pool_report.c): copied when it arrives, bounded. */
struct pool_caller {
    char principal[POOL_CALLER_TEXT];
    char client[64];             /* its address, as the access log has it; "": unknown */
    char name[POOL_CALLER_TEXT]; /* params.name, else params.uri, decoded and cut; "": none */
    uint64_t since_unix_ms;      /* its arrival at the gateway (queued time included) */
};

/*
 * A legacy session served by the pool (session_mode = pooled; pool_session.c): no child of its
 * own, only what the child would keep per connection. Its calls are pool calls like any other,
 * linked here so that a cancel by the client's id, a DELETE or the expiry finds them.
 */
struct pool_session {
    char *id;                           /* first member: its name in the table (pool_names) */
    struct pool_session *hnext;         /* the table's chain */
    char label[POOL_SESSION_LABEL_MAX]; /* what logs name it by: its id is a bearer secret */
    int64_t issued_s;                   /* its initialize, unix seconds (sealed in its id) */
    uint64_t opened_gen;                /* the keys (pss.kr_gen) its id last opened under */
    struct pool_session *prev, *next;   /* every pooled session (the sweep, list changes) */
    char *server;                       /* its server's name: a reload keeps the session */
    char *principal;                    /* its owner's name: every request must be theirs */
    const struct revision *rev;         /* negotiated at initialize (the gateway's answer) */
    char asked[16];                     /* the client's protocolVersion, until the answer */
    int log_level;    /* logging/setLevel (0 debug .. 7 emergency); 0 until asked */
    uint64_t last_ms; /* its last request (session_idle_timeout_s) */
    uint64_t created_unix_ms;
    struct pool_call *calls; /* in flight, queued or answering: call->snext */
    size_t ncalls;
    struct stream *get; /* its GET stream (in streams), or NULL */
    /* Its streams kept for a resume (pool_session_stream.c): one reference each, newest first */
    struct stream *streams;
    /* The claims its subscriptions' principal pool was found by (a reference); NULL: none */
    struct auth_claims *claims;
    struct quota *quota; /* its principal's QUOTA_SESSIONS count */
    bool linked;         /* in the table (after its initialize was taken) */
    bool failed;         /* its initialize ended unanswered: freed by the sweep */
    unsigned caps;       /* the questions its client declared at initialize (bits) */
    bool level_asked;    /* log_level came from its logging/setLevel (counted) */
    /* resources/subscribe: its URIs, each a reference to sub_pool's struct pool_sub */
    char **uris;
    size_t nuris;
    struct pool *sub_pool;    /* where they are referenced; NULL: to be placed again */
    struct quota *uris_quota; /* its principal's QUOTA_URIS count of them */
    unsigned next_ask;        /* the last question's number ("mcpgw-ask-N" to the client) */
    /*
     * The 2024-11-05 transport's (pool_session_sse.c): a random id looked up here alone, and get
     * is its one SSE stream (the connection is the session), which carries every call's messages.
     */
    bool sse;
    /*
     * For children that speak only the stateless revision (pool_session_modern.c): the client's
     * capabilities and clientInfo from its initialize (raw JSON, at most POOL_MODERN_KEPT_MAX
     * bytes together; NULL: not kept, or not given), freed once a legacy child answers for it;
     * stateless: its initialize was answered from such a child's server/discover.
     */
    char *client_caps;
    char *client_info;
    bool stateless;
    struct pool_task *tasks;  /* its tasks (2025-11-25), newest first: task->snext */
    size_t ntasks;
};

/*
 * A task (2025-11-25) a pooled session's call created at a child (pool_session_task.c): the
 * session names it by id, the child by its own.
 */
struct pool_task {
    char id[24];                     /* the session's: 128 random bits, base64url */
    char child_id[128];              /* the child's taskId, decoded */
    char *child_raw;                 /* the same as the child wrote it (a JSON string) */
    size_t child_raw_len;
    char *task; /* the Task object as the child last described it (its bytes); NULL: none */
    size_t task_len;
    struct pool_session *sess;       /* its owner, which frees it */
    struct pool_child *c;            /* where it runs; NULL once that child ended */
    struct pool_task *snext;         /* sess->tasks */
    struct pool_task *cprev, *cnext; /* c->tasks */
    uint64_t until_ms;               /* its ttl's end; 0: none */
    unsigned refs;                   /* calls of the session on it */
    bool terminal;                   /* completed, failed or cancelled (or its child ended) */
};

/* What a pooled session's call is to a task: makes one, or asks of one. */
enum pool_task_op {
    POOL_TASK_NONE = 0,
    POOL_TASK_CREATE, /* task-augmented: its CreateTaskResult makes the record */
    POOL_TASK_GET,
    POOL_TASK_RESULT,
    POOL_TASK_CANCEL,
};

/* One request from arrival to its end; across input rounds, the child's one call. */
struct pool_call {
    struct pool *pool;
    struct pool_session *sess; /* a pooled session's call: linked in sess->calls; NULL: none */
    struct pool_call *sprev, *snext;
    struct pool_task *task;    /* the task it asks of (a reference); NULL: none */
    struct pool_batch *batch;  /* a batch's request: st is the batch's stream; NULL: none */
    unsigned char task_op;     /* enum pool_task_op */
    bool init; /* the session's initialize, answered by the gateway once a child is ready */
    /* The stateless row the request names: what it is served as. */
    const struct revision *rev;
    struct pool_child *c; /* NULL while queued */
    struct pending *p;    /* its entry in c's table; NULL while queued */
    struct stream *st; /* one reference; stream_own(st)->owner points back here; NULL while held */
    bool st_shared;    /* st is its session's SSE stream (2024-11-05), not its own: never ended */
    int log_level;     /* -1: no log lines for this request */
    uint64_t grants;   /* the token's scopes as the server's tool policy numbers them */
    char *body;        /* queued only: the request, until a child is ready */
    size_t qid_off;    /* queued only: the client's id (raw) in body, for a cancel by it */
    size_t qid_len;
    struct trace *trace; /* the trace it carries to its child (trace.h); NULL: none */
    size_t len;
    struct pool_call *qnext;
    /* Input rounds (pool_bridge.c); all NULL/0 for a call that never asks. */
    bool noted;    /* a request that may ask, to a legacy pool (pool_bridge_note) */
    bool asker;    /* in flight on its child when the child asked: it leases the child */
    unsigned caps; /* the bridgeable capabilities its _meta clientCapabilities declares */
    /* The binding of its requestState; both NULL while caps is 0 (no round can happen). */
    char *principal;        /* whose call it is (principal name) */
    char *name;             /* params.name or params.uri, decoded; "" when none */
    struct quota *who;      /* its principal's counts (quota.h); NULL: not counted */
    bool held_counted;      /* who's QUOTA_HELD counts it (due or held) */
    bool counted_listen;    /* who's QUOTA_LISTENS counts it (else QUOTA_CALLS) */
    uint64_t hold_until_ms; /* its hold's end: set when a round brings something new */
    unsigned asked_keys;    /* questions r1..rN were in a round sent already */
    char method[JSONRPC_METHOD_MAX];
    struct pool_ask *asks; /* room for POOL_ASKS_MAX, made with the first */
    size_t nasks;
    unsigned next_key;
    unsigned round;             /* rounds sent so far; a requestState names the current one */
    unsigned char held_id[16];  /* names the call in its requestState */
    bool held;                  /* waiting for the client's retry */
    bool due;                   /* a round is to be sent at the end of this loop turn */
    struct loop_timer *hold;    /* input_hold_ms */
    struct pool_listen *listen; /* a legacy pool's subscriptions/listen: no child, no entry */
    char *final; /* the child's answer that came while held, for the client's retry */
    size_t final_len;
    struct pool_modern *modern; /* a pooled session's call to a stateless child: its rounds */
    struct pool_call *dnext;    /* pools.due */
    struct pool_call *hnext;    /* pools.held */
    struct pool_caller caller;
    struct audit_rec *audit; /* its audit record (audit.h), written by pool_call_end; NULL: off */
};

/* Why a pool was retired: the texts its children's stop, its queue and its listeners get. */
struct pool_retire_info {
    const char *stopped; /* "pool child stopped: ..." */
    const char *queued;  /* the error of a request still queued once no child will come */
    const char *listen;  /* the error that ends a listener (send subscriptions/listen again) */
    enum relay_reason cancel;
};
extern const struct pool_retire_info pool_retire_reload, pool_retire_restart;

/*
 * Whose children a pool's are, for a server whose children hold one principal's credentials
 * (config_server_per_principal; pool_principal.c): one pool per key, its children started with
 * that principal's credentials and serving that principal alone.
 */
struct pool_key {
    char *principal;            /* the verified principal's name: a copy, the key's own */
    enum config_auth_mode mode; /* the [auth] mode it was verified under */
    struct auth_claims *claims; /* what its token's claims give (a reference); NULL: none */
    /* The last start's refusal (auth_child_credentials' text, its status 403 or 500); NULL: none */
    const char *refused;
    int refused_status;
    uint64_t wait_since_ms; /* its queue has waited since for room under pool_max_children; 0 */
    struct auth_held *held; /* token_exchange: the principal's exchanged token (auth.h); NULL */
};

struct pool {
    char *name;
    const struct config_server *srv;
    const struct config *cfg;
    enum config_era era; /* AUTO until the probe decided */
    bool broken;         /* the children serve no version the gateway serves: none kept */
    bool retired;        /* replaced (reload, restart: retired_why): no new request; ends idle */
    char *discover;      /* legacy: the DiscoverResult object made from initialize */
    size_t discover_len;
    /* legacy: its initialize result's members but protocolVersion (pooled sessions' answer) */
    char *init_members;
    size_t init_members_len;
    char init_version[16];     /* the child's protocolVersion */
    struct relay_stats *stats; /* its server's counters (relay.h) */
    const struct pool_retire_info *retired_why;
    struct pool_server *row; /* its server's figures (below) */
    struct pool_child *children;
    size_t n_children, n_starting;
    struct pool_call *qhead, *qtail; /* waiting for a child to be ready */
    struct pool_listen *listeners;   /* legacy: subscriptions/listen served by the gateway */
    struct pool_sub *subs;           /* legacy: resource URIs they named */
    struct pool_names sub_names;     /* the same by URI */
    unsigned listen_caps;            /* JSONRPC_LISTEN_* its initialize (or discover) declared */
    bool listen_known;               /* stateless: listen_caps is a discover's (else unknown) */
    /*
     * Stateless, pooled sessions (pool_session_listen.c): the gateway's own subscriptions/listen,
     * "mcpgw-listen-<gl_no>", at gl_child (NULL: none open), for listen_caps's list changes and
     * the URIs in subs.
     */
    struct pool_child *gl_child;
    struct pool_child *gl_asking; /* its server/discover of the gateway's is at (NULL: none) */
    uint64_t gl_no, gl_sent;
    uint64_t gl_after_ms;   /* the sweep opens it again from then on (it was refused, ended) */
    uint64_t gl_backoff_ms; /* the last such wait, doubled by each end; 0 once acknowledged */
    bool gl_due;            /* (re)opened at the end of this turn */
    size_t queued;
    uint64_t fail_until_ms; /* a failure within the last minute: starts count as restarts */
    uint64_t window_ms;     /* the current minute of the restart budget */
    uint64_t restarts;      /* restarts in that minute */
    uint64_t backoff_ms;    /* the wait after the last failed start, doubled by each one; 0: none */
    unsigned starts_failed; /* failed starts in a row (the first is retried at once) */
    uint64_t next_start_ms; /* no start before this (backing off after a failure) */
    struct log_limit budget_log, fail_log; /* lines that repeat while its server fails */
    /*
     * The stateless revisions its children speak (revision.h's sets): the probe's verdict, the
     * rows the first child listed (its command is every child's); every stateless row for legacy
     * children (the gateway bridges them) and for era = stateless (the child refuses what it does
     * not speak itself); 0 while the era is unknown.
     */
    uint32_t speaks;
    struct pool_key *key; /* per-principal credentials: the principal its children serve; NULL */
    struct pool *next;
};

struct pool_counters {
    uint64_t requests, answered;
    uint64_t late_dropped;   /* answers and progress after a cancel */
    uint64_t slow_dropped;   /* notifications for a stream over stream_queue_bytes */
    uint64_t unattributed;   /* child notifications with no single owner: dropped */
    uint64_t logs_filtered;  /* log lines below the request's logLevel, or none asked */
    uint64_t child_requests; /* requests from children answered with an error (ping excepted) */
    uint64_t child_lines_invalid;
    uint64_t spawned, start_failed, crashed, idle_stopped;
    uint64_t refused_restart;   /* requests refused: restart budget spent */
    uint64_t rounds;            /* input_required answers sent for legacy children */
    uint64_t asks_bridged;      /* child requests turned into input requests */
    uint64_t held_expired;      /* held calls cancelled after input_hold_ms */
    uint64_t states_refused;    /* retries whose requestState was refused */
    uint64_t principal_stopped; /* idle children stopped for another principal's */
};

/* A server's figures over its pools old and new, for the life of the process (pool_report.c). */
struct pool_server {
    struct metrics_row row; /* its name, the next server's row */
    struct pool_counters ctr;
    struct metrics_hist latency; /* a request sent to a child -> its answer, through the gateway */
    /* Pooled sessions: how many asked each log level (0 debug .. 7), and what the children run at
     */
    size_t levels_asked[8];
    int child_level1;     /* the most verbose level asked plus one, sent to every child; 0: none */
    uint64_t levels_sent; /* the gateway's logging/setLevel requests so far ("mcpgw-log-N") */
    size_t sessions_open; /* its pooled sessions now (the admin view) */
};

struct pool_globals {
    struct loop *l;
    struct auth *auth; /* [auth], for token_exchange renewals; NULL: none */
    const struct config *cfg;
    struct pool *pools;
    bool draining;
    struct msg *line;            /* the child's large line being routed (pushed by reference) */
    struct metrics_row *servers; /* struct pool_server rows, in the order seen */
    unsigned next_child_no;      /* "pool:NAME#N": N counts over every pool, old and new */
    uint64_t use_seq;            /* requests sent to children so far (pool_child.used_seq) */
    bool settle_due;             /* pool_principal_settle is deferred to the end of this turn */
    bool listen_due; /* some pool's gl_due: pool_session_listen.c runs at the end of this turn */
    bool rooms_due;              /* pool_rooms is deferred to the end of this turn */
    struct pool_call *due;       /* calls with a round to send at the end of this loop turn */
    struct pool_call *held;      /* calls waiting for their client's retry */
    size_t nheld;
    struct pool_batch *batch; /* a batch's element being served: its calls and answers go there */
    unsigned char key[4096]; /* requestState sealing key */
    size_t key_len;
};
extern struct pool_globals pools;

/* pool_report.c: the row of server (made on first use); every row freed */
struct pool_server *pool_server_of(const char *name);
void pool_servers_free(void);
/* The counters of every server added up. */
struct pool_counters pool_counters_total(void);
/* Notes who made the new call (the admin view shows it beside the call's entry). */
void pool_caller_note(struct pool_call *call, const char *body, const struct jsonrpc_info *info,
                      const struct pool_meta *meta);

/* pool_caps.c: per-principal limits, tables of names */
/* The hash of a NUL-terminated name (util_hash). */
size_t pool_hash(const char *s);
/* The entry named name in t (link at next_off in each entry), or NULL. */
void *pool_names_find(const struct pool_names *t, const char *name, size_t next_off);
/* Adds e (its name set, not in t) to t, growing it as it fills. */
void pool_names_add(struct pool_names *t, void *e, size_t next_off);
/* Takes e out of t. */
void pool_names_del(struct pool_names *t, void *e, size_t next_off);
/*
 * Whether a new request (not a retry) of meta's principal fits the server's per-principal limits;
 * false with *status POOL_E_PRINCIPAL and meta->why naming the limit. A pooled session's
 * initialize (the gateway's to answer) fits always and counts toward none.
 */
bool pool_caps_admit(struct pool *p, const char *body, const struct jsonrpc_info *info,
                     struct pool_meta *meta, enum pool_status *status);
/* The new call counts toward its principal (meta's) as a request or a listen (by method). */
void pool_caps_take(struct pool_call *call, const char *principal, const char *method);
/* The call ends: its counts go. */
void pool_caps_release(struct pool_call *call);
/* Keeps the call's QUOTA_HELD count in step with call->due || call->held. */
void pool_caps_held_sync(struct pool_call *call);
/* Whether the call's principal may have one more call held (max_held_per_principal). */
bool pool_caps_may_hold(const struct pool_call *call);
/* Whether a legacy listen of nuris URIs fits its principal's max_listen_uris_per_principal. */
bool pool_caps_uris_fit(const struct pool_call *call, size_t nuris);
/* A legacy listen's nuris URIs count toward its principal (add) or no longer do. */
void pool_caps_uris(struct pool_call *call, size_t nuris, bool add);
/* Frees the pool's tables (every entry already gone). */
void pool_caps_free(struct pool *p);

/* pool_principal.c: pools of one principal's children (per-principal credentials) */
/* The pool of meta's principal (and claims) for srv; NULL when it has none (yet). */
struct pool *pool_principal_find(const struct config_server *srv, const struct pool_meta *meta);
/* A new pool for meta's principal (its name copied, its claims referenced). */
struct pool *pool_principal_new(const struct config *cfg, const struct config_server *srv,
                                const struct pool_meta *meta);
/* What a child of p adds to its environment: the principal's credentials; NULL: p->key->refused. */
char **pool_principal_env(struct pool *p);
/*
 * What p's boxed child is shown of its own (its principal's token directory, the group that reads
 * it): NULL when p holds no token or its server is not boxed, else own filled; *failed when it
 * cannot be (logged).
 */
const struct sandbox_own *pool_principal_own(struct pool *p, struct sandbox_own *own, bool *failed);
/*
 * Whether p may start one more child: srv's principal pools have fewer than pool_max_children;
 * else, with evict, the least recently used idle child of another principal's pool is stopped to
 * make room (true), unless p's principal has no credentials now (false, p->key->refused set).
 */
bool pool_principal_room(struct pool *p, bool evict);
/* A principal pool's child may be idle or gone: pools waiting for room get it (deferred). */
void pool_principal_kick(void);
/* Periodic, for a principal pool: a wait for room past pool_start_timeout_ms fails. */
void pool_principal_sweep(struct pool *p, uint64_t now_ms);
/* Whether p (a principal pool) is over: no child, nothing queued, held or listening, no budget. */
bool pool_principal_over(const struct pool *p, uint64_t now_ms);
/*
 * The pool of principal (with claims) for the server named server, made if it has none: where a
 * pooled session's subscriptions are placed on a server with per-principal credentials. NULL: the
 * server has none (or is gone), or claims miss what env_from_claims needs.
 */
struct pool *pool_principal_of(const char *server, const char *principal,
                               struct auth_claims *claims);
/*
 * Whether p (a principal pool) holds subscriptions and may start a child for them now: under
 * pool_max_children, and its principal's credentials did not refuse its last start.
 */
bool pool_principal_keeps(const struct pool *p);
/* The operator's restart: every principal pool of srv retired; their children, counted. */
size_t pool_principal_restart(const struct config_server *srv);
void pool_principal_free(struct pool *p);
/* token_exchange: p holds meta->xres's token for its children; NULL, or why not. */
const char *pool_principal_hold(struct pool *p, const struct pool_meta *meta);

/* pool.c */
/* A new pool of srv's children, first in the list (its key set by pool_principal_new). */
struct pool *pool_new(const struct config *cfg, const struct config_server *srv);
/* Retires p: no new request; its children stop once idle (a reload, a restart). */
void pool_retire(struct pool *p, const struct pool_retire_info *why);
/* Starts one child of p (a principal pool's with its principal's credentials); NULL: not now. */
struct pool_child *pool_child_start(struct pool *p);
/* Ends every request that waits in p's queue with why (no child will come). */
void pool_fail_queue(struct pool *p, const char *why);
/* What pool_inflight counts, of p alone. */
size_t pool_inflight_in(const struct pool *p);
/* A child for a new request of p: the least busy ready one; starts another when worth it. */
struct pool_child *pool_pick(struct pool *p, enum pool_status *status);
/* A child started well: no backoff any more, its server is OK (relay.h). */
void pool_start_ok(struct pool *p);
/*
 * A start of p's failed (failed_start: before the child served; why: the log's and /readyz's
 * reason): the restart budget and the backoff (pool_start.c).
 */
void pool_start_failed(struct pool *p, const char *why, bool failed_start);
/* The child can serve: what waited for it is dispatched. */
void pool_child_ready(struct pool_child *c);
/* Requests waiting in c's pool go to c while it has room (and no fence out). */
void pool_child_take_queue(struct pool_child *c);
/* c may have room again (an answer, a lingering entry gone): the queue, if any, is offered. */
void pool_child_room(struct pool_child *c);
/*
 * A cancel freed a slot on a child no fence holds (a stateless child's): at the end of the turn,
 * where no callback of a child is running, every ready child is offered its pool's queue.
 */
void pool_rooms_due(void);
/* The child failed or ended: out of the pool (its calls are ended first), maybe replaced. */
void pool_child_retire(struct pool_child *c, const char *why, bool failure);
/* c's children speak no stateless revision the gateway knows: p serves nothing, at once. */
void pool_break(struct pool_child *c, const char *why);
int pool_send(struct pool_child *c, const struct iovec *iov, int n);
/*
 * The same for the gateway's cancels and fence pings: queued in room the client's requests cannot
 * take. -1 only when the child is on its way out (gone, or taken as stuck: upstream.h).
 */
int pool_send_control(struct pool_child *c, const struct iovec *iov, int n);
/* The same, as the relay's writer (relay.h). */
int pool_relay_send(void *arg, const struct iovec *iov, int n);
/* The relay's writer for the gateway's control messages (cancels, fence pings): pool_send_control.
 */
int pool_relay_send_control(void *arg, const struct iovec *iov, int n);

/* pool_start.c */
/* Sends a starting child its probe (era unknown) or its initialize (legacy); -1: stdin refused. */
int pool_child_hello(struct pool_child *c);
/* The start timer of a starting child (pool_start_timeout_ms). */
void pool_start_timeout(void *arg);
/* The probe or initialize of a starting child was answered. */
void pool_child_start_answer(struct pool_child *c, const char *line, size_t len,
                             const struct jsonrpc_info *info);

/* pool_route.c */
/*
 * A tools/call of a tool p's policy hides from the request's token: a stream already carrying the
 * unknown tool error (-32602), nothing sent to a child. NULL when the tool is visible.
 */
struct stream *pool_refuse_hidden(struct pool *p, const char *body, const struct jsonrpc_info *info,
                                  const struct pool_meta *meta);
/*
 * A request of a revision p's children do not speak (pool_speaks): a stream already carrying the
 * unsupported-version error (-32022) that lists the revisions they speak; nothing sent to a child.
 */
struct stream *pool_refuse_version(struct pool *p, const char *body,
                                   const struct jsonrpc_info *info, const struct pool_meta *meta);
/* Sends a queued call to c; on failure ends the call with an error. */
void pool_call_dispatch(struct pool_call *call, struct pool_child *c);
/* Sends a new call's request (the HTTP request's body) to c; -1: its stdin is full. */
int pool_call_start(struct pool_call *call, struct pool_child *c, const char *body, size_t len,
                    const struct jsonrpc_info *info);
/* Ends call with a JSON-RPC error on its stream (call is freed). */
void pool_call_fail(struct pool_call *call, int code, const char *message);
/* The same for the client's id (raw), when the call has no entry or queued body to read it from. */
void pool_call_error(struct pool_call *call, const char *id, size_t idlen, int code,
                     const char *message);
/* A queued call (no child yet) leaves its pool's queue. */
void pool_call_unqueue(struct pool_call *call);
/* call waits at the end of p's queue with a copy of body[0..len) (id: its client id there). */
void pool_call_enqueue(struct pool *p, struct pool_call *call, const char *body, size_t len,
                       struct jsonrpc_span id);
/*
 * A queued call is cancelled for why: it leaves the queue and ends without a response (nothing
 * was sent to a child), counted and audited as a cancel.
 */
void pool_call_drop_queued(struct pool_call *call, enum relay_reason why);
/* Cancels at the child (at most once) and ends the call: the client left, timeout, shutdown. */
void pool_call_cancel(struct pool_call *call, enum relay_reason why);
/*
 * The pool child's side of its relay (relay.h): where each message of its child goes (its calls'
 * streams, the input-round bridge, the gateway's listens), a timeout cancels its call, the child's
 * end retires it.
 */
extern const struct relay_ops pool_relay_ops;
/* The upstream's callbacks: the child's bookkeeping around the relay's reading; its end. */
void pool_child_line(char *line, size_t len, struct msg *shared, void *arg);
void pool_child_gone(const char *reason, void *arg);
/* Methods a child of this era serves in revision rev (false: 404 -32601). */
bool pool_method_served(const struct pool *p, const struct revision *rev, const char *method);
/* Whether p's children speak rev (true while the era is unknown: judged again at dispatch). */
bool pool_speaks(const struct pool *p, const struct revision *rev);
/* The call's revision is one p's children do not speak: -32022 listing those they do (ends it). */
void pool_call_refuse_version(struct pool_call *call, const char *id, size_t idlen);
/* The child's answer to call (of method) for the client's id: stamped, pushed (not ended). */
void pool_deliver(struct pool_call *call, const char *method, const char *id, size_t idlen,
                  const char *line, size_t len, const struct jsonrpc_info *info);
/* A new stream for the call (a request, or a retry that carries it on): the caller's reference. */
struct stream *pool_call_stream(struct pool_call *call);
/* The end of a call: its stream ends, its rounds are forgotten, the call is freed. */
void pool_call_end(struct pool_call *call);
/* One event on the call's stream (nothing while the call is held): an answer, never dropped. */
void pool_push(struct pool_call *call, const struct iovec *iov, int n);
/* A notification for the call: dropped (counted) while its stream is over stream_queue_bytes. */
void pool_push_note(struct pool_call *call, const struct iovec *iov, int n);

/* pool_bridge.c: input rounds for legacy children */
/*
 * A request from c to its client (elicitation, sampling, roots): a question of the next round of
 * the one request it belongs to, or an error answer to the child.
 */
void pool_bridge_ask(struct pool_child *c, const char *line, size_t len,
                     const struct jsonrpc_info *info);
/* A retry carrying one of the gateway's requestStates: the held call goes on, on a new stream. */
struct stream *pool_bridge_resume(struct pool *p, const char *body, const struct jsonrpc_info *info,
                                  struct pool_meta *meta, enum pool_status *status);
/* The child's notifications/cancelled for one of its questions: withdrawn from its round. */
void pool_bridge_withdrawn(struct pool_child *c, const char *line, size_t len,
                           const struct jsonrpc_info *info);
/* True when the requestState at sp is one the gateway seals (else a stateless child's own). */
bool pool_bridge_ours(const char *body, struct jsonrpc_span sp);
/*
 * True when it is also sealed with the gateway's key and not expired: a retry that may carry on
 * a held call through a drain (which a forged one, refused later anyway, may not pass).
 */
bool pool_bridge_sealed(const char *body, struct jsonrpc_span sp);
/* What a new call keeps to bridge rounds later (capabilities, binding). */
void pool_bridge_note(struct pool_call *call, const char *body, const struct jsonrpc_info *info,
                      const struct pool_meta *meta);
/* Forgets the call's rounds: open questions answered to the child with an error, timers stopped. */
void pool_bridge_forget(struct pool_call *call);
/* A call of c that may ask was cancelled: questions wait for a fence (a ping) to be attributed. */
void pool_bridge_cancelled(struct pool_child *c);
/* True when p (a request of the gateway's own) is c's fence, now answered or lapsed: handled. */
bool pool_bridge_fence_done(struct pool_child *c, struct pending *p, bool lapsed);
/* True while a call that was in flight on c when c asked still is: c serves one at a time. */
bool pool_bridge_leased(const struct pool_child *c);
/* True while a cancelled call of c may still ask (its fence has not come back). */
bool pool_bridge_unfenced(const struct pool_child *c);
/* The bridgeable capabilities (elicitation, sampling, roots: bits) clientCapabilities at sp has. */
unsigned pool_caps_declared(const char *body, struct jsonrpc_span sp);
/* Calls of p held for their client's retry. */
size_t pool_held_in(const struct pool *p);
/* Shutdown: every call of p still held (one its child already answered is in no table) ends. */
void pool_bridge_end_held(struct pool *p);

/* pool_session.c, pool_session_ask.c: legacy sessions served by the pool (session_mode = pooled) */
/* The call ends: out of its session's list. */
void pool_session_unlink(struct pool_call *call);
/* A new call of s: into its list. */
void pool_session_link(struct pool_call *call, struct pool_session *s);
/* The session's initialize, answered from c's pool's handshake (ends the call). */
void pool_session_init_answer(struct pool_call *call, const char *id, size_t idlen);
/*
 * c's request to the client (bit: its capability, pool_caps_declared), attributed to call, a
 * pooled session's: sent to the session's client on the call's stream (else the session's GET
 * stream) with an id the gateway minted (NULL), or why not (the caller answers the child).
 */
const char *pool_session_ask(struct pool_child *c, struct pool_call *call, unsigned bit,
                             const char *line, size_t len, const struct jsonrpc_info *info);
/* The child withdrew a, a question of call's (a pooled session's): its client is told. */
void pool_session_withdrawn(struct pool_call *call, const struct pool_ask *a, const char *line,
                            size_t len, const struct jsonrpc_info *info);
/* The session's client answered a question of a child's (pool_session_ask.c): to that child. */
void pool_session_client_answer(struct pool_session *s, char *body, size_t len,
                                const struct jsonrpc_info *info);
/* A list change of a legacy child of p: to every session of p's server with a GET stream. */
bool pool_session_fanout(struct pool *p, const char *line, size_t len);
/* resources/updated from a legacy child of p: to every session of p that subscribed its URI. */
bool pool_session_updated(struct pool *p, const char *line, size_t len,
                          const struct jsonrpc_info *info);
/* p retires: the sessions' subscriptions there are placed again in their server's next pool. */
void pool_session_pool_retired(struct pool *p);
/* c is ready: it runs at the most verbose log level a session of its server asked. */
void pool_session_child_ready(struct pool_child *c);
/* True when line answers the gateway's own logging/setLevel to c (handled). */
bool pool_session_level_answer(struct pool_child *c, const char *line,
                               const struct jsonrpc_info *info);
/* Periodic: idle sessions expire, GET streams get their heartbeat. */
void pool_session_sweep(uint64_t now_ms);
/*
 * Whether a new local record fits (room: the HTTP front's max_sessions): false with *status and
 * *why while the gateway drains (503), at max_sessions (503) or at the principal's
 * max_sessions_per_principal (429).
 */
bool pool_session_room(const char *principal, bool room, enum pool_status *status,
                       const char **why);
/* A new local record, in the table: id, server, principal, and one session counted. */
struct pool_session *pool_session_new(const char *id, const char *server, const char *principal,
                                      int64_t issued_s);
/* The local record named id, of either transport; NULL: none here. */
struct pool_session *pool_session_lookup(const char *id);
/* The one close path: every call cancelled for why, the GET stream ended, the record freed. */
void pool_session_close(struct pool_session *s, enum relay_reason why);
/* pool_session_sse.c: the 2024-11-05 transport's pooled sessions */
/* A call of a session of that transport: its stream is the session's one (the caller's ref). */
struct stream *pool_session_sse_stream(struct pool_call *call);
/* The HTTP side let go of s's SSE stream st: the client left, every call is cancelled, s ends. */
void pool_session_sse_dropped(struct pool_session *s, struct stream *st);

/* pool_session_stream.c: a pooled session's resumable streams */
/* A number for a session's new stream: unique in this process, and unlikely at any other. */
uint64_t pool_session_stream_id(void);
/* The replay history of a session's stream (replay_buffer_bytes; 0: no event ids). */
size_t pool_session_replay_bytes(void);
/* A session call's new stream starts with the 2025-11-25 priming event. */
void pool_session_stream_prime(struct pool_call *call);
/* st, the stream of a new call of s, is kept for a resume from now on (and SSE polling). */
void pool_session_stream_track(struct pool_session *s, struct stream *st);
/* A GET: the session's GET stream, new or read on. */
struct stream *pool_session_stream_get(struct pool_session *s, enum pool_status *status);
/* The HTTP side let go of st: false when st is none of s's kept streams (the caller's then). */
bool pool_session_stream_detach(struct pool_session *s, struct stream *st);
/* Whether a connection reads any stream of s (a session read is not idle). */
bool pool_session_streams_read(const struct pool_session *s);
/* Periodic: heartbeats, streams kept past replay_max_age_s or the count forgotten. */
void pool_session_streams_sweep(struct pool_session *s, uint64_t now_ms);
/* The session ends: every stream it keeps ends and is let go. */
void pool_session_streams_free(struct pool_session *s);
/* Every pooled session, newest first (s->next), for the checks that walk them. */
const struct pool_session *pool_sessions_all(void);
/* Shutdown: every pooled session closed (its calls cancelled, its GET stream ended). */
void pool_session_free_all(void);
/* The same, and the keys of sealed ids (the module's end). */
void pool_session_module_free(void);

/*
 * pool_session_modern.c: a pooled session in front of children that speak only the stateless
 * revision (the pool's era is stateless, declared or probed)
 */
#define POOL_MODERN_KEPT_MAX 4096 /* bytes of a client's capabilities and clientInfo kept */
/* The session's initialize: its client's capabilities and clientInfo kept, when small enough. */
void pool_session_modern_keep(struct pool_session *s, const char *body,
                              const struct jsonrpc_info *info);
/* A legacy child answered for the session: what was kept for a stateless one goes. */
void pool_session_modern_drop(struct pool_session *s);
/* Whether s's requests go to stateless children (srv: its server), as far as this instance knows.
 */
bool pool_session_modern_on(const struct pool_session *s, const struct config_server *srv);
/*
 * The request of call (a pooled session's, to a stateless child) as the child takes it: a new
 * flat copy with the call's trace (if any) and the stateless _meta envelope of the session's
 * client spliced in (a retry's inputResponses and requestState too; the initialize becomes a
 * server/discover), scanned into *out (*len its length). NULL with *code and *why: the request
 * is refused (not sent).
 */
char *pool_session_modern_body(struct pool_call *call, const char *body, size_t *len,
                               const struct jsonrpc_info *info, struct jsonrpc_info *out, int *code,
                               const char **why);
/*
 * The child's answer p to call: true when handled here (the initialize answered from
 * server/discover, or an input_required round sent to the client; p deleted, the call ended or
 * kept for its retry), false when it is delivered as any other.
 */
bool pool_session_modern_answer(struct pool_call *call, struct pool_child *c, struct pending *p,
                                const char *line, size_t len, const struct jsonrpc_info *info);
/* The client's answer to a question of a round: true when it was one (handled). */
bool pool_session_modern_client_answer(struct pool_session *s, const char *body, size_t len,
                                       const struct jsonrpc_info *info);
/* Whether call, between its rounds (no child, no entry, not queued), has the client id id. */
bool pool_session_modern_call_is(const struct pool_call *call, const char *id, size_t idlen);
/* The call ends: its rounds' state goes (pool_call_end). */
void pool_session_modern_forget(struct pool_call *call);

/* A stream already carrying one message of the gateway's, ended: no call, no child. */
struct stream *pool_session_local(const char *msg, size_t len);
/* The same with a JSON-RPC error for the request's id. */
struct stream *pool_session_error(const struct jsonrpc_info *info, const char *body, int code,
                                  const char *why);

/* pool_session_batch.c: a pooled session's batches (2025-03-26) */
/* A new call while pools.batch is set: the batch's stream (one reference for the caller). */
struct stream *pool_batch_call_stream(struct pool_call *call);
/* A batch's call ends: its reference to the stream given back; the last one ends the stream. */
void pool_batch_call_end(struct pool_call *call);
/* The gateway's answer while pools.batch is set: pushed on the batch's stream (a reference). */
struct stream *pool_batch_local(const char *msg, size_t len);
/* st was a batch's and its client left: every call of it cancelled (true), else false. */
bool pool_batch_detach(struct stream *st);

/* pool_session_task.c: a pooled session's tasks (2025-11-25) */
/* A tasks/ request or a task-augmented request of s: answered here, or a pool call (to the task's child). */
struct stream *pool_task_request(struct pool_session *s, const struct config_server *srv,
                                 char *body, size_t len, const struct jsonrpc_info *info,
                                 struct pool_meta *meta, enum pool_status *status);
/* The call ends: its reference to a task is given back. */
void pool_task_call_end(struct pool_call *call);
/*
 * The child's answer to a call with a task_op: delivered with the session's task id spliced in
 * (true), or false to deliver it as it is. The caller ends the call either way.
 */
bool pool_task_deliver(struct pool_call *call, struct pending *p, const char *line, size_t len,
                       const struct jsonrpc_info *info);
/* notifications/tasks/status of c: to the owning session alone (true), or false: nobody's. */
bool pool_task_status(struct pool_child *c, const char *line, size_t len,
                      const struct jsonrpc_info *info);
/* True while c holds a task not yet terminal (within its ttl): it may write at any time. */
bool pool_task_child_busy(const struct pool_child *c);
/* c ended: its tasks are failed, out of its list. */
void pool_task_child_gone(struct pool_child *c);
/* s ends (why): its tasks not yet terminal are cancelled at their children, every record freed. */
void pool_task_session_end(struct pool_session *s, enum relay_reason why);
void pool_task_free(struct pool_task *t);

/*
 * pool_session_listen.c: pooled sessions' list changes and subscriptions at stateless children,
 * through the gateway's own subscriptions/listen at one child of the pool
 */
/* p's listen is (re)opened at the end of this turn (a stateless pool of pooled sessions'). */
void pool_session_listen_due(struct pool *p);
/* Now: the old listen ended at its child, a new one opened when wanted and a child is ready. */
void pool_session_listen_sync(struct pool *p);
/* c became ready (a listen waiting for a child goes there) or is gone (its listen moves). */
void pool_session_listen_child(struct pool_child *c, bool gone);
/* Periodic: a listen that was refused or ended is opened again once its backoff is over. */
void pool_session_listen_retry(struct pool *p);
/* p retires or the gateway stops: its listen ends at its child. */
void pool_session_listen_end(struct pool *p);
/* What a pooled session's initialize result declares: the listen's list changes, subscribe. */
unsigned pool_session_listen_declared(const struct pool *p);
/* Whether s's resources/subscribe is served: false once its children said they have none. */
bool pool_session_listen_serves(const struct pool_session *s, const struct config_server *srv);
/* A server/discover answer of a child of p: its capabilities are the pool's (the first read). */
void pool_session_listen_caps(struct pool *p, const char *line, size_t len);
/* True when line answers a listen or a discover of the gateway's ("mcpgw-listen-N"): handled. */
bool pool_session_listen_answer(struct pool_child *c, const char *line,
                                const struct jsonrpc_info *info);
/* True when the child's notifications/cancelled names a listen of the gateway's: handled. */
bool pool_session_listen_cancelled(struct pool_child *c, const char *line,
                                   const struct jsonrpc_info *info);
/*
 * A notification of c that names a listen of the gateway's (or acknowledges c's): to the
 * sessions as a legacy one (true), or false when it is none of the gateway's.
 */
bool pool_session_listen_note(struct pool_child *c, const char *line, size_t len,
                              const struct jsonrpc_info *info);

/* pool_listen.c: subscriptions/listen for legacy pools */
/* The call (a listen request) becomes a listener: acknowledged; false when its params are bad. */
bool pool_listen_open(struct pool_call *call, const char *body, const struct jsonrpc_info *info);
/* The listener is gone (pool_call_end calls this): its URIs released. */
void pool_listen_forget(struct pool_call *call);
/*
 * Shutdown (error NULL): every listener of p gets its graceful end; else (p retired) that JSON-RPC
 * error, counted as a cancel for why, and so does every listen p's stateless children hold (each is
 * cancelled at its child).
 */
void pool_listen_end_all(struct pool *p, const char *error, enum relay_reason why);
/*
 * A list change or resources/updated from c: to the listeners that asked; false if none did, or
 * c is not ready (what a starting child says is of its own start).
 */
bool pool_listen_notify(struct pool_child *c, const char *line, const struct jsonrpc_info *info);
/*
 * The least busy ready child of p (fewest requests in flight), or NULL: where a subscription or
 * the gateway's listen is held.
 */
struct pool_child *pool_least_busy_ready(struct pool *p);
/* True when line (an answer of c) is one to the gateway's own resources/(un)subscribe: handled. */
bool pool_listen_answer(struct pool_child *c, const char *line, const struct jsonrpc_info *info);
/* Periodic: subscriptions that wait (their send failed, or no child was ready) are placed. */
void pool_listen_retry(struct pool *p);
/* A URI named once more (a listener's, a pooled session's), or once less: pool.subs counts them. */
void pool_sub_ref(struct pool *p, const char *uri);
void pool_sub_unref(struct pool *p, const char *uri);
/* The shared pool of server name in the current configuration (made if none); NULL: none. */
struct pool *pool_shared_of(const char *name);
/* Subscriptions that wait for a child (none is ready). */
bool pool_listen_orphans(const struct pool *p);
/* c became ready (subscriptions waiting for a child go there) or is gone (its go elsewhere). */
void pool_listen_child_change(struct pool_child *c, bool gone);

#endif
