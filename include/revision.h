/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_REVISION_H
#define MCPGW_REVISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The MCP protocol revisions the gateway knows, one row each (revision.c), with what each has.
 * Every decision made by revision or era asks this table, and the errors that list revisions take
 * their lists from it.
 *
 * Adding a stateless revision that behaves as 2026-07-28 does (the same removed methods, input
 * rounds, no resumption, results stamped alike) is one row, with those columns: the pools probe
 * children with the newest stateless row, keep the rows each server speaks, serve every request
 * on the row it names, and the discover answers the gateway writes list every stateless row.
 * A revision that behaves differently needs, beyond its row, the code of what is new: a column
 * here when a decision made today differs (and the places that ask it), a new method's handling
 * in the pool or the sessions (pool_route.c, session_route.c), new _meta or header rules in the
 * HTTP front (http_stateless.c, http_mcp.c), and a new transport its own path.
 */

/* How a revision reaches the gateway: bits, so a question can name several. */
enum revision_transport {
    REVISION_HTTP_SSE = 1u << 0,   /* 2024-11-05: GET PATH/sse, POST PATH/messages, a session */
    REVISION_STREAMABLE = 1u << 1, /* Streamable HTTP with Mcp-Session-Id: one child a session */
    REVISION_STATELESS = 1u << 2,  /* Streamable HTTP without sessions: the server's pool */
};
#define REVISION_SESSIONS (REVISION_HTTP_SSE | REVISION_STREAMABLE) /* the legacy era */

struct revision {
    const char *name; /* the date, as on the wire */
    enum revision_transport transport;
    bool batches;      /* JSON-RPC batches on the endpoint */
    bool polling;      /* priming event with retry; POST streams may be ended so the client polls */
    bool resumable;    /* SSE event ids and Last-Event-ID resumption (replay_buffer_bytes) */
    bool input_rounds; /* the server asks its client by input_required + requestState (MRTR), so a
                          legacy child's questions are bridged into rounds */
    bool result_fields; /* results carry resultType; cacheable ones ttlMs and cacheScope (the pool
                           adds them where a child's result lacks them) */
    bool tasks; /* the tasks methods and task-augmented requests in a session (a stateless one's
                   tasks are an extension its children serve, not the gateway's table) */
    const char *const *removed; /* methods it removed from its predecessors; NULL-ended */
};

/* The row named v[0..len); NULL for a revision the gateway does not know. */
const struct revision *revision_find(const char *v, size_t len);
/* The same for a NUL-terminated name. */
const struct revision *revision_named(const char *v);
/* Whether r (may be NULL) reaches the gateway over one of the transports in mask. */
bool revision_over(const struct revision *r, unsigned mask);
/* The names of the revisions over mask, oldest first: a NULL-ended list, and ", "-joined text. */
const char *const *revision_names(unsigned mask);
const char *revision_list(unsigned mask);
/* The revisions that have batches, ", "-joined. */
const char *revision_list_batches(void);
/* The newest revision over mask (what the gateway offers a child in its initialize). */
const struct revision *revision_newest(unsigned mask);
/* Whether r removed method. */
bool revision_removed(const struct revision *r, const char *method);

/*
 * Sets of rows (what a pool's children speak): bit i is the table's row i, oldest first. The
 * table has at most REVISION_SET_MAX rows.
 */
#define REVISION_SET_MAX 32
/* r's bit; 0 for NULL. */
uint32_t revision_bit(const struct revision *r);
/* Every row over mask. */
uint32_t revision_set_over(unsigned mask);
/* The rows over mask that names (NULL-ended) lists; names the gateway does not know are skipped. */
uint32_t revision_set_named(const char *const *names, unsigned mask);
/* The names of the rows in set, oldest first, NULL-ended, into out[REVISION_SET_MAX + 1]. */
void revision_set_names(uint32_t set, const char **out);
/* The same ", "-joined into out[0..cap) (cut to fit). */
void revision_set_text(uint32_t set, char *out, size_t cap);
/*
 * What a server/discover answer (or an unsupported-version error) lists, as the probe reads it for
 * a pool's children and a session's child alike: a version (jsonrpc_discover_versions's callback)
 * whose row is stateless joins the set at arg (a uint32_t); others are ignored.
 */
void revision_seen_stateless(const char *version, void *arg);
/* The newest row in set; NULL for the empty set. */
const struct revision *revision_set_newest(uint32_t set);
/* The newest row over mask older than r (NULL: none). */
const struct revision *revision_older(const struct revision *r, unsigned mask);

#endif
