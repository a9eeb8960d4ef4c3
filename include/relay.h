/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_RELAY_H
#define MCPGW_RELAY_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "jsonrpc.h"
#include "loop.h"
#include "pending.h"
#include "policy.h"

/*
 * The conversation with one child, the part a session (which owns its child) and a pool child
 * (which many clients share) have in common: the in-flight table, the ids the gateway mints and
 * splices in, cancels sent at most once, timers that belong to their entry, lingering cancelled
 * entries and their ceiling, errors written to the child. Who owns the child, how a child's
 * question is attributed and how an answer travels to its client stay with the owner.
 *
 * Lifetimes: an entry belongs to the table; its timer belongs to the entry and goes with it
 * (pending_del), so a timer can never fire on a freed entry, whoever deletes it. An entry's
 * `owner` is the owner's back pointer (a pool call); the relay never follows it. The relay reads
 * every line of its child (relay_line) and calls its owner through one table of operations
 * (struct relay_ops), never after the child's end or relay_end.
 */

struct relay;

/*
 * Why the gateway ended a request before its answer: one vocabulary for both eras. Each has one
 * text (the reason of the notifications/cancelled sent to the child, logs, errors) and one label
 * (mcpgw_cancels_total{reason}). The child is sent a cancel for every reason but CHILD (it is
 * gone) and CLIENT (the client's own notifications/cancelled is forwarded as it came).
 */
enum relay_reason {
    RELAY_CANCEL_CLIENT = 0, /* the client's own notifications/cancelled */
    RELAY_CANCEL_DISCONNECT, /* the client closed the stream the answer was bound for */
    RELAY_CANCEL_TIMEOUT,    /* request_timeout_ms (or its max) passed */
    RELAY_CANCEL_DELETED,    /* DELETE of its session */
    RELAY_CANCEL_EXPIRED,    /* its session's idle expiry */
    RELAY_CANCEL_SHUTDOWN,   /* the gateway is stopping */
    RELAY_CANCEL_RELOAD,     /* a configuration reload ended it */
    RELAY_CANCEL_HOLD,       /* a held call's client did not retry within input_hold_ms */
    RELAY_CANCEL_CHILD,      /* the child ended: nothing can be sent to it */
    RELAY_CANCEL_ADMIN,      /* the operator ended its session or restarted its pool (admin) */
    RELAY_CANCEL_OTHER,      /* anything else (a session whose initialize failed) */
    RELAY_CANCEL_N,
};
struct relay_reason_info {
    const char *text;
    const char *label;
};
extern const struct relay_reason_info relay_reasons[RELAY_CANCEL_N];

/*
 * Counters of one server (by name), kept for the life of the process so that /metrics stays
 * monotonic across reloads: requests ended by reason, the child's cancels of its own requests.
 */
struct relay_stats;
/* The row of server (made on first use). */
struct relay_stats *relay_stats_of(const char *server);
void relay_count(struct relay_stats *st, enum relay_reason why);
void relay_count_to_client(struct relay_stats *st);
/* Every server's row in turn (the first after NULL, NULL after the last), and its name. */
const struct relay_stats *relay_stats_next(const struct relay_stats *st);
const char *relay_stats_name(const struct relay_stats *st);
/* Over every server: requests ended for why, and the children's cancels (the admin view). */
uint64_t relay_cancels(enum relay_reason why);
uint64_t relay_cancels_to_client(void);
/* mcpgw_cancels_total{server, direction, reason} for every server seen. */
void relay_metrics(struct buf *b);
void relay_module_free(void);

/*
 * A server's state from its children's starts (pool children's starts, session children's spawns
 * and initialize results): STARTING until a child of it completes its start (an initialize
 * answered, or the pool's probe), whether or not starts failed before; OK from then on, until a
 * start fails; FAILING after a failed start, OK again after one succeeds; BROKEN at once when the
 * loader found its command missing (relay_set_missing), once as many starts in a row failed as
 * the restart budget allows (pool_max_restarts_per_min), the last within a minute, or when its
 * children serve nothing the gateway serves. DRAINED, whatever its starts say, while the operator
 * drains it (it takes no new session and no new stateless request). /readyz shows it
 * (http_ops.c); only OK and FAILING serve (relay_health_serves): a server none of whose children
 * ever started is not counted as able to serve.
 */
enum relay_health {
    RELAY_HEALTH_OK,
    RELAY_HEALTH_FAILING,
    RELAY_HEALTH_BROKEN,
    RELAY_HEALTH_DRAINED,
    RELAY_HEALTH_STARTING,
    RELAY_HEALTH_N,
};
void relay_start_ok(struct relay_stats *st);
void relay_start_failed(struct relay_stats *st, const char *why, bool broken);
/* Whether a child of the server ever completed its start (the pool probes until one did). */
bool relay_served(const struct relay_stats *st);
/* Whether its state is known: a child started or failed, or it is broken or drained. */
bool relay_settled(const struct relay_stats *st);
/* The loader's verdict on the server's command: why it cannot run, or NULL when it can. */
void relay_set_missing(struct relay_stats *st, const char *why);
bool relay_missing(const struct relay_stats *st);
/*
 * The operator's drain (POST /admin/servers/NAME/drain, .../resume). It belongs to the server's
 * name for the life of the process, like the counters: a SIGHUP keeps it.
 */
void relay_set_drained(struct relay_stats *st, bool drained);
bool relay_drained(const struct relay_stats *st);
/* The state (budget: the server's pool_max_restarts_per_min); *why: the last failure, or "". */
enum relay_health relay_health_of(const struct relay_stats *st, uint64_t budget, uint64_t now_ms,
                                  const char **why);
const char *relay_health_text(enum relay_health h);
/* The one rule of who can take new sessions and requests: OK and FAILING. */
bool relay_health_serves(enum relay_health h);

/* Writes one message (iovecs, newline included) to the child's stdin; -1 when it refuses. */
typedef int relay_send_cb(void *arg, const struct iovec *iov, int n);

/*
 * The owner's side of a relay: one entry per kind of message its child writes, called once per
 * message, after the relay did what every owner needs (relay_line): the line scanned and its CR
 * and LF flattened, a batch split into its messages, an invalid line counted and logged, an answer
 * matched to its entry by the id the relay minted, a late answer to a cancelled entry dropped and
 * counted, progress and a subscription's notification matched to their request. `owner` is
 * relay_init's arg: the owner's, which the relay passes back and never follows. No entry is called
 * after `gone`, nor after relay_end; each is called with the line's bytes, valid during the call.
 * Entries marked optional may be NULL.
 */
struct relay_ops {
    /* The child's answer to p, an entry still waiting; the owner ends it (pending_del). */
    void (*answer)(void *owner, struct pending *p, const char *line, size_t len,
                   const struct jsonrpc_info *info);
    /*
     * Optional: an answer whose id names no entry: true when it answers one of the owner's own
     * requests that have none; else (or NULL) it is logged and dropped.
     */
    bool (*stray)(void *owner, const char *line, const struct jsonrpc_info *info);
    /* A request of the child's (sampling, elicitation, roots, ping, ...). */
    void (*request)(void *owner, const char *line, size_t len, const struct jsonrpc_info *info);
    /*
     * notifications/progress for p, the request whose token it names (the client's, or with
     * minted_tokens the minted id), still waiting; progress for none is dropped (counted late
     * when its request was cancelled, else unattributed).
     */
    void (*progress)(void *owner, struct pending *p, const char *line, size_t len,
                     const struct jsonrpc_info *info);
    /*
     * notifications/cancelled from the child: p is the request of the child's that it names when
     * the table holds it still waiting (PENDING_TO_CLIENT), else NULL.
     */
    void (*cancelled)(void *owner, struct pending *p, const char *line, size_t len,
                      const struct jsonrpc_info *info);
    /*
     * Optional: a notification whose _meta subscriptionId is the minted id of p, a
     * subscriptions/listen still waiting (one naming no listen is unattributed, one of a
     * cancelled listen late). A string subscriptionId is no minted id: notification takes it,
     * whatever its method (the owner's own listen may have such an id). NULL: _meta
     * subscriptionId means nothing; the method decides.
     */
    void (*subscription)(void *owner, struct pending *p, const char *line, size_t len,
                         const struct jsonrpc_info *info);
    /* Optional: notifications/message; NULL: as any other notification. */
    void (*log)(void *owner, const char *line, size_t len, const struct jsonrpc_info *info);
    /* Any other notification. */
    void (*notification)(void *owner, const char *line, size_t len,
                         const struct jsonrpc_info *info);
    /* Optional: p's deadline passed (its timer is already gone): the owner ends the request. */
    void (*expired)(void *owner, struct pending *p);
    /* The child ended (reason static): the last entry called. */
    void (*gone)(void *owner, const char *reason);
};

struct relay {
    struct pending_table pt;
    struct loop *l;
    const char *tag;           /* log lines: the session id, or "pool:NAME#N" */
    struct relay_stats *stats; /* its server's counters */
    unsigned invalid_logged;   /* the child's invalid lines logged so far (a few, then counted) */
    relay_send_cb *send;       /* the owner's writer (it knows whether the child is gone) */
    /*
     * The owner's writer for cancels, which a full stdin queue must not lose (a writer with room
     * of its own past the queue's ceiling); NULL: send. The owner sets it after relay_init.
     */
    relay_send_cb *send_control;
    const struct relay_ops *ops; /* the owner's side (static, the owner's kind's) */
    void *arg;                   /* the owner, for send and ops */
    /*
     * Set by the owner after relay_init, as its child's conversation needs: batches, whether a
     * line may be a JSON-RPC batch (its revision has them); minted_tokens, whether the child saw
     * a request's progress token replaced by its minted id (else the client's own is the key).
     */
    bool batches, minted_tokens;
    bool ended; /* relay_end or the child's end: no entry of ops is called any more */
    /*
     * The owner's counters (set after relay_init; NULL: not counted): the child's lines that are
     * not messages, its answers and progress that came after a cancel, and progress or a
     * subscription's notification that names no request.
     */
    uint64_t *invalid, *late, *unattributed;
};

void relay_init(struct relay *r, struct loop *l, const char *tag, const char *server,
                relay_send_cb *send, const struct relay_ops *ops, void *arg);
/* Every entry goes, with its timer. */
void relay_clear(struct relay *r);

/*
 * One line of the child's (len bytes, no newline; modified in place): scanned, classified,
 * matched, and passed to the owner's ops, once per message (each element of a batch in turn,
 * until the owner ends the relay). Nothing when the relay has ended.
 */
#define RELAY_BATCH_MAX 256 /* messages of one batch of the child's */
void relay_line(struct relay *r, char *line, size_t len);
/*
 * Counts a child's line that is not a message (why: what is wrong) in r->invalid and logs it: the
 * first few of a child, then only the counter moves, so a child writing garbage as fast as it can
 * does not flood the log. relay_line does it for lines it cannot read; an owner, for a message its
 * child must not send.
 */
void relay_invalid(struct relay *r, const char *why, const char *line, size_t len);
/* The child ended: the relay ends and calls ops->gone, once; nothing when it had ended. */
void relay_gone(struct relay *r, const char *reason);
/* The owner is done with the child (its session closed, its pool child retired): no op after. */
void relay_end(struct relay *r);

/* One replacement of msg[off, off + len) by with[0..with_len) (len 0: an insertion). */
struct relay_edit {
    size_t off, len;
    const char *with;
    size_t with_len;
};
#define RELAY_EDITS_MAX 4 /* the id, a progress token, a trace's two (trace.h) */
/*
 * msg with up to RELAY_EDITS_MAX edits (any order, not overlapping; ed is sorted in place) as
 * iovecs into iov (room for 2 * n + 1); returns the count.
 */
int relay_splice(const char *msg, size_t len, struct relay_edit *ed, int n, struct iovec *iov);
/* The same, sent to the child as one line. */
int relay_send_spliced(struct relay *r, const char *msg, size_t len, struct relay_edit *ed, int n);

/*
 * Cancelled entries linger only to recognise a late answer. While the table holds max entries or
 * more, the oldest lingering ones go first (a late answer for one is then dropped as unknown,
 * the same outcome), so clients that cancel request after request cannot grow it.
 */
void relay_make_room(struct relay *r, size_t max);
/*
 * The entry still waiting that an answer (the child's, or the client's to a child's request)
 * names by its minted id. NULL when there is none: an unknown id (logged), or a late answer to a
 * cancelled entry, which is dropped, counted in *late, and the entry forgotten.
 */
struct pending *relay_answered(struct relay *r, enum pending_dir dir, const char *line,
                               const struct jsonrpc_info *info, uint64_t *late);
/* The minted id of p as text into buf (room for UTIL_U64_TEXT_MAX bytes); its length. */
size_t relay_id_text(const struct pending *p, char *buf);

/*
 * Sends the child notifications/cancelled for p (the id it saw) with why's text, marks p
 * cancelled and counts it: once. True when the cancel was written (or refused by a full or
 * closed stdin: logged); false when p was no longer waiting (nothing changes), or is
 * task-augmented (marked, never sent a cancel, not counted: tasks outlive their requests).
 */
bool relay_cancel(struct relay *r, struct pending *p, enum relay_reason why);
/* p's audit record (if any) written now as cancelled for why (relay_cancel does it too). */
void relay_audit_cancel(struct pending *p, enum relay_reason why);
/* p was cancelled by other means (the client's own cancel went through): marked, timer gone. */
void relay_mark_cancelled(struct relay *r, struct pending *p);
/*
 * Sends the child tasks/cancel of its task task_raw (the taskId as the child wrote it, quotes
 * included) as the gateway's own request: a string id of the form mcpgw-task-N, which no minted
 * id can be, whose answer relay_line drops. Through send_control, so a full stdin loses it only
 * when the control room is full too (logged). relay_line calls it itself for a CreateTaskResult
 * that answers a task-augmented request cancelled before it (relay_cancel sends no
 * notifications/cancelled for one, and the client's own may be ignored): a task the child would
 * otherwise run for nobody.
 */
void relay_task_cancel(struct relay *r, const char *task_raw, size_t raw_len);
/* True when line answers one of the gateway's own tasks/cancel. */
bool relay_task_cancel_answer(const char *line, const struct jsonrpc_info *info);
/* Answers a request of the child's (its raw id; NULL: null) with a JSON-RPC error. */
void relay_error_to_child(struct relay *r, const char *id, size_t idlen, int code,
                          const char *message);

/*
 * The policy hook: a tools/list result of the child's through pol for a token granting bits.
 * RELAY_FILTER_ASIS: nothing hidden, pass *line as it is; RELAY_FILTER_COPY: *line, *len and
 * *info now name the filtered copy (*copy, the caller frees it); RELAY_FILTER_REFUSED: the answer
 * cannot be filtered (logged): the client gets an error instead, nothing passes unjudged.
 */
enum relay_filter { RELAY_FILTER_ASIS = 0, RELAY_FILTER_COPY, RELAY_FILTER_REFUSED };
#define RELAY_FILTER_REFUSAL "the server's tools/list answer cannot be filtered"
enum relay_filter relay_filter_tools(const char *tag, const struct policy *pol, uint64_t bits,
                                     const char **line, size_t *len,
                                     const struct jsonrpc_info **info, struct jsonrpc_info *finfo,
                                     char **copy);

/*
 * Why the gateway refuses a client's message, whoever owns the child: session.h's and pool.h's
 * statuses take their values from it. One text each, for the client (HTTP error bodies, errors
 * inside a batch).
 */
enum relay_status {
    RELAY_OK = 0,
    RELAY_E_GONE,            /* the session or its child is gone: 404 */
    RELAY_E_BUSY,            /* the child's stdin queue is full: 503 */
    RELAY_E_TOO_MANY,        /* a session's in-flight cap reached: 429 */
    RELAY_E_DUPLICATE,       /* the request id is already in flight: 400 */
    RELAY_E_CONFLICT,        /* a GET stream is already open, or the stream resumed is read: 409 */
    RELAY_E_EVICTED,         /* Last-Event-ID names nothing the session can still replay: 410 */
    RELAY_E_ID_TOO_LONG,     /* the request id or progress token passes max_id_bytes: 400 */
    RELAY_E_PRINCIPAL_CALLS, /* the principal is at max_inflight_per_principal: 429 */
    RELAY_E_FULL,            /* every child at pool_child_max_inflight, the pool at its size: 429 */
    RELAY_E_UNAVAILABLE,     /* no child can be started (spawn failures, restart budget): 503 */
    RELAY_E_DRAINING,        /* shutting down: 503 */
    RELAY_E_DRAINED,         /* the operator drained the server: 503 */
    RELAY_E_NO_METHOD,       /* not a method the server serves in that revision: 404 */
    RELAY_E_BAD_STATE,       /* a retry's requestState names no call this gateway holds: 400 */
    RELAY_E_PRINCIPAL,       /* the principal is at one of its limits (the caller names it): 429 */
    RELAY_E_CREDENTIALS,     /* no credentials for this principal: 403 */
    RELAY_E_CREDENTIALS_BAD, /* this principal's credentials cannot be read safely: 500 */
};
/* The text of status: an enum relay_status, or a value of an owner's status enum. */
const char *relay_status_text(unsigned status);

/*
 * The tool policy at a client's tools/call (body, info): false when pol lets a token granting
 * bits see the tool. Else true: message (room for RELAY_REFUSAL_MAX bytes) holds what the MCP
 * specification answers for an unknown tool ("Unknown tool: NAME", with JSONRPC_INVALID_PARAMS),
 * so a client cannot tell a hidden tool from a missing one; the refusal is counted
 * (policy_count_denied), audited (refused_policy: principal, server, session) and logged (under
 * the session's id, or the pool's name for a stateless request, session NULL). The caller answers
 * and never sends the call to a child.
 */
#define RELAY_REFUSAL_MAX (POLICY_NAME_MAX + 16)
bool relay_refuse_hidden(const struct policy *pol, uint64_t bits, const char *body,
                         const struct jsonrpc_info *info, const char *principal,
                         const char *server, const char *session, char *message);

/*
 * (Re)arms p's timer: timeout_ms from now, never past max_ms from its start (0: no ceiling);
 * timeout_ms 0 arms nothing. When it fires, r's expired callback ends the request.
 */
void relay_arm_timeout(struct relay *r, struct pending *p, uint64_t timeout_ms, uint64_t max_ms);

#endif
