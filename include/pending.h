/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_PENDING_H
#define MCPGW_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The in-flight table of one child (a session's, or a pool child's: relay.h), both directions.
 * Each entry knows the sender's id byte-for-byte, the id the gateway gave the receiver, the
 * method, the stream its answer (or its related traffic) is bound for, the progress token, times
 * and an internal state. Streams are named by id, never by pointer. The state names never appear
 * on the wire. An entry owns its timer: deleting the entry deletes the timer.
 */

struct audit_rec;
struct loop_timer;
struct relay;

enum pending_dir {
    PENDING_TO_CHILD = 0, /* a client request forwarded to the child */
    PENDING_TO_CLIENT,    /* a child request forwarded to the client */
};

enum pending_state {
    PENDING_FORWARDED = 0, /* waiting for the answer */
    PENDING_CANCELLED,     /* cancelled; kept only to recognise and drop a late answer */
};

#define PENDING_METHOD_MAX 64

struct pending {
    struct pending *prev, *next;
    enum pending_dir dir;
    enum pending_state state;
    uint64_t gw_id; /* the id the receiver sees (minted by the gateway) */
    char *orig_id;  /* the sender's id, raw JSON bytes */
    size_t orig_id_len;
    char method[PENDING_METHOD_MAX];
    uint64_t stream_id;
    char *token; /* raw progress token, NULL if none */
    size_t token_len;
    uint64_t start_ms;
    uint64_t start_us;        /* set by its owner for the latency histogram */
    uint64_t deadline_ms;     /* 0: none */
    uint64_t cancelled_ms;    /* when it entered PENDING_CANCELLED */
    bool task;                /* task-augmented: never cancelled by a disconnect */
    uint64_t grants;          /* its token's scopes, numbered by the tool policy */
    struct loop_timer *timer; /* its request timeout (relay_arm_timeout); goes with the entry */
    struct relay *relay;      /* the relay the timer reports to */
    void *owner; /* the owner's back pointer (a pool call); NULL: none or the gateway's */
    /* A session's request: its principal's count (quota.h), given back when the entry is
     * cancelled or deleted, whichever comes first; NULL: not counted. */
    struct quota *quota;
    /* A session's audited call: its record (audit.h), written where the entry ends (its answer,
     * its cancel, or its deletion); NULL: the trail is off, or nothing to record. */
    struct audit_rec *audit;
    /* The trace id (32 hex digits) the request carried to the child (trace.h); "": none. */
    char trace_id[33];
    /* The table's index by orig_id: the next entry of its bucket, oldest first, and the hash. */
    struct pending *hnext;
    size_t hash;
    uint64_t seq; /* its place in the list: its first gw_id (one may be minted again later) */
};

/*
 * The entries oldest first, and an index of them by sender's id: a request's lookup of its own id
 * (in flight already?) costs the same with 256 in flight as with one.
 */
struct pending_table {
    struct pending *head, *tail;
    size_t count;
    uint64_t next_id;
    size_t active[2];        /* entries FORWARDED, by direction */
    struct pending **bucket; /* nbucket (a power of two, at least count) chains; NULL: none yet */
    size_t nbucket;
};

void pending_init(struct pending_table *t);
/* Frees every entry (and its timer). */
void pending_clear(struct pending_table *t);
/* Adds an entry with a fresh gw_id; orig_id and method are copied. */
struct pending *pending_add(struct pending_table *t, enum pending_dir dir, const char *orig_id,
                            size_t orig_len, const char *method, uint64_t stream_id,
                            uint64_t now_ms);
void pending_set_token(struct pending *p, const char *token, size_t len);
/* p now stands for a request of another sender's id (a pool call taken over by its retry). */
void pending_set_orig(struct pending_table *t, struct pending *p, const char *orig_id, size_t len);
struct pending *pending_find_gw(const struct pending_table *t, enum pending_dir dir, uint64_t id);
/* Both prefer an entry still FORWARDED over a cancelled one with the same id or token. */
struct pending *pending_find_orig(const struct pending_table *t, enum pending_dir dir,
                                  const char *id, size_t len);
/* A client request (TO_CHILD) holding this progress token. */
struct pending *pending_find_token(const struct pending_table *t, const char *token, size_t len);
/* p is cancelled: it lingers, no longer active (the only way out of FORWARDED). */
void pending_cancel(struct pending_table *t, struct pending *p);
/* p no longer counts toward its principal (p->quota given back, if any). */
void pending_uncount(struct pending *p);
/* Unlinks and frees p, and deletes its timer (and gives its count back). */
void pending_del(struct pending_table *t, struct pending *p);
/* The trace id the request carried to the child ([gateway] trace_context), or NULL: none. */
const char *pending_trace_id(const struct pending *p);
/* Entries still waiting (state FORWARDED) in one direction. */
size_t pending_active(const struct pending_table *t, enum pending_dir dir);

#endif
