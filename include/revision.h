/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_REVISION_H
#define MCPGW_REVISION_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The MCP protocol revisions the gateway knows, one row each (revision.c), with what each has.
 * Every decision made by revision or era asks this table, and the errors that list revisions take
 * their lists from it: adding a revision is one row plus the behaviour that is really new.
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

#endif
