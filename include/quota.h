/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_QUOTA_H
#define MCPGW_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * What each principal holds of each server, for the per-principal limits of both eras: one table
 * for the process, keyed by (server name, principal name). It is held by the server as the
 * configuration names it, not by a session, a pool or a configuration: a pool the operator
 * restarts, a reload that replaces every pool and configuration, keep the counts of what is
 * still in flight in the old ones, so a principal's limit holds across them. The counts are
 * taken where an object starts counting and given back by that object's one close path
 * (pool_call_end, session_close, an in-flight entry that leaves its table or is cancelled): each
 * count equals what is really there.
 *
 * Server QUOTA_GATEWAY names the gateway as a whole (max_sessions_per_principal is a key of
 * [auth]: sessions are counted over every server).
 */

#define QUOTA_GATEWAY ""

enum quota_kind {
    QUOTA_CALLS = 0, /* requests in flight (a session's forwarded, the pool's queued, at a child or
                        held; listens apart): max_inflight_per_principal */
    QUOTA_HELD,      /* of the pool's, held for an input round or with one due: max_held_... */
    QUOTA_LISTENS,   /* subscriptions/listen open: max_listens_per_principal */
    QUOTA_URIS,      /* resource URIs over its legacy listens: max_listen_uris_per_principal */
    QUOTA_SESSIONS,  /* sessions (server QUOTA_GATEWAY): max_sessions_per_principal */
    QUOTA_KINDS,
};

/* One (server, principal): kept while any of its counts is not 0, or it is pinned. */
struct quota;

/*
 * Adds n of kind to (server, principal) (NULL principal: ""): the entry, made on first use; it
 * stays valid at least until the count just taken is given back.
 */
struct quota *quota_take(const char *server, const char *principal, enum quota_kind kind,
                         uint64_t n);
/*
 * (server, principal)'s entry, kept (with every count 0 too) until quota_unpin: a holder that
 * counts often against one entry (a session, for its requests) finds it without a lookup.
 */
struct quota *quota_pin(const char *server, const char *principal);
/* Ends a pin (NULL: none); q is freed once nothing holds it. */
void quota_unpin(struct quota *q);
/* Adds n of kind to q, an entry its caller holds a count of or a pin on. */
void quota_add(struct quota *q, enum quota_kind kind, uint64_t n);
/* Gives n of kind back to q (taken before); q is freed once every count of it is 0. */
void quota_give(struct quota *q, enum quota_kind kind, uint64_t n);
/* q's count of kind. */
uint64_t quota_count(const struct quota *q, enum quota_kind kind);
/* The names q is kept under. */
const char *quota_server(const struct quota *q);
const char *quota_principal(const struct quota *q);
/* The count of kind of (server, principal); 0 when it holds nothing. */
uint64_t quota_of(const char *server, const char *principal, enum quota_kind kind);
/* Whether one more of kind fits limit max (0: no limit) for (server, principal). */
bool quota_fits(const char *server, const char *principal, enum quota_kind kind, uint64_t max);
/* The counts of kind added over every entry; and how many entries there are (pinned ones too). */
uint64_t quota_total(enum quota_kind kind);
size_t quota_entries(void);
/* Frees every entry (shutdown; a test's next run). */
void quota_module_free(void);

#endif
