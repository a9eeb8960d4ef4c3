/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_TRACE_H
#define MCPGW_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "jsonrpc.h"
#include "relay.h"

/*
 * W3C trace context through the gateway ([gateway] trace_context). A client request's
 * traceparent (from its params._meta, else from the HTTP request's traceparent header) is
 * continued: the child gets params._meta.traceparent with the client's trace id, a span id the
 * gateway minted for its hop (random, never all zero) and the client's flags; tracestate goes
 * with the traceparent it belongs to. With none (or a malformed one, ignored as the W3C
 * specification says) a new trace is started when the mode is TRACE_START. Only requests: the
 * child's own requests, notifications and the gateway's own messages are not touched. Nothing
 * here runs when the mode is TRACE_OFF: callers pass no struct trace_in at all then.
 */

enum trace_mode {
    TRACE_OFF = 0,   /* nothing read, nothing added */
    TRACE_PROPAGATE, /* a valid traceparent is continued with the gateway's span id */
    TRACE_START,     /* the same, and a new trace for a request that has none */
};

#define TRACE_PARENT_LEN 55  /* 00-<32 hex>-<16 hex>-<2 hex> */
#define TRACE_ID_LEN     32  /* the trace id's hex digits */
#define TRACE_STATE_MAX  512 /* the longest tracestate header passed on (bytes) */

/* What one HTTP request's headers carry, checked once for every message of its body. */
struct trace_in {
    enum trace_mode mode;
    char parent[TRACE_PARENT_LEN + 1]; /* a valid traceparent header as version 00; "": none */
    char state[2 * TRACE_STATE_MAX + 3]; /* its tracestate header as a JSON string; "": none */
    size_t state_len;
    /* Out: the trace id of the first request given a trace (the access log); "": none. */
    char trace_id[TRACE_ID_LEN + 1];
};

/*
 * tin for mode from the header values (NULL: absent). A traceparent that is not a valid one is
 * ignored, and so is its tracestate; a tracestate longer than TRACE_STATE_MAX or with a byte
 * outside printable ASCII is not passed on.
 */
void trace_in_init(struct trace_in *tin, enum trace_mode mode, const char *traceparent,
                   const char *tracestate);

/*
 * s[0..n) as a W3C traceparent (version 00, or a later one read as 00; never ff; lowercase hex;
 * trace id and parent id not all zero), written as version 00 into out. False when it is none.
 */
bool trace_parse(const char *s, size_t n, char out[TRACE_PARENT_LEN + 1]);

/* What happens to params._meta.tracestate. */
enum trace_state_how {
    TRACE_STATE_KEEP = 0, /* the traceparent came from _meta: its tracestate stays as it is */
    TRACE_STATE_SET,      /* set to state (the header's) */
    TRACE_STATE_DROP,     /* removed: it belonged to no traceparent that is continued */
};

/* The trace context one request carries to its child. */
struct trace {
    char parent[TRACE_PARENT_LEN + 1]; /* the client's trace id, the gateway's span id, flags */
    enum trace_state_how how;
    const char *state; /* TRACE_STATE_SET: a JSON string, state_len bytes */
    size_t state_len;
    /* Where the request's params._meta has traceparent and tracestate (len 0: absent). */
    struct jsonrpc_span tp, ts;
};

/*
 * The trace the request body[0..len)/info (a JSONRPC_REQUEST) carries to its child under tin, with a span
 * id minted for it; the first one's trace id goes to tin->trace_id. False when it carries none:
 * tin NULL or off, no valid traceparent and no new trace to start, or a message whose params or
 * params._meta is not an object or names traceparent or tracestate twice (left as it is).
 */
bool trace_resolve(struct trace_in *tin, const char *body, size_t len,
                   const struct jsonrpc_info *info, struct trace *t);

/* t's trace id (hex) into out. */
void trace_id_copy(const struct trace *t, char out[TRACE_ID_LEN + 1]);

/* A copy of t in one allocation (its state inside it), for a request that waits in a queue. */
struct trace *trace_copy(const struct trace *t);

#define TRACE_EDITS_MAX 2
#define TRACE_EDIT_BUF  (2 * TRACE_STATE_MAX + 160)
/*
 * The edits (at most TRACE_EDITS_MAX, texts in buf of TRACE_EDIT_BUF bytes) that give the
 * request body/info (the one trace_resolve made t from, or a byte-identical copy) t in _meta:
 * traceparent replaced or inserted, tracestate set, kept or removed; a missing _meta or params is
 * added. Returns the count (0 when the message cannot carry it).
 */
int trace_edits(const struct trace *t, const char *body, size_t len,
                const struct jsonrpc_info *info, char *buf, struct relay_edit *ed);

#endif
