/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_ENVELOPE_H
#define MCPGW_ENVELOPE_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "jsonrpc.h"
#include "relay.h"

/*
 * A legacy client (initialize, a session) in front of a child that speaks only the stateless
 * revision (2026-07-28): what the gateway writes to the child for the client, and reads back, with
 * no owner of its own. Its owners are a session with a child of its own (session_modern.c) and a
 * pooled session (pool_session_modern.c): each keeps the client's capabilities and clientInfo,
 * the state of its calls and their questions, and sends what this module writes.
 *
 *   - the stateless _meta envelope every request carries (protocolVersion, the client's
 *     capabilities and clientInfo from its initialize, logLevel), spliced into the client's own
 *     bytes (envelope_members, envelope_edits);
 *   - what a legacy client may not send a stateless child (envelope_check);
 *   - an input_required result's questions (envelope_asks_read), each written to the client as a
 *     request with an id the owner minted (envelope_question), and the retry's members once they
 *     are answered (envelope_answer_add, envelope_retry_members).
 */

#define ENVELOPE_ASKS_MAX   8  /* questions of one round */
#define ENVELOPE_ROUNDS_MAX 16 /* rounds of one request */

/* What the envelope of a client's requests says: NULL or "" leaves a member out but caps. */
struct envelope_client {
    const char *rev;   /* the stateless revision spoken to the child */
    const char *caps;  /* the client's capabilities, raw JSON ("{}" when none) */
    const char *info;  /* its clientInfo, raw JSON; NULL: none */
    const char *level; /* logging/setLevel's level; NULL or "": none */
};

/* The envelope's members, each with a leading comma, appended to b. 0, or -1 (b is full). */
int envelope_members(const struct envelope_client *ec, struct buf *b) MUSTCHECK;
/*
 * The edits (into ed, room for 2; the count returned, -1 when a buffer failed) that put env (the
 * members envelope_members wrote; rearranged in place) first in the request's params._meta, and
 * extra[0..extra_len) (",KEY:VALUE" members; NULL: none) first in its params, making params and
 * _meta where the request has none. ext holds the texts the edits point into (buf_init'd by the
 * caller, cleared after the send). The request's id is not edited: the caller adds its own edit.
 */
int envelope_edits(const char *body, size_t len, const struct jsonrpc_info *info, struct buf *env,
                   const char *extra, size_t extra_len, struct buf *ext, struct relay_edit *ed);
/* The first '{' of the message body[0..len): the object the whole request is. */
struct jsonrpc_span envelope_message(const char *body, size_t len);
/*
 * NULL when the legacy request may go to a stateless child with an envelope; else why not (for an
 * error -32602): params or params._meta not an object, or the stateless revision's own members
 * (its _meta keys, requestState, inputResponses), which are the gateway's to add.
 */
const char *envelope_check(const char *body, size_t len, const struct jsonrpc_info *info);
/* Methods whose answer may be input_required: their requests are kept for a retry. */
bool envelope_may_ask(const char *method);

/* One question of an input_required result. */
struct envelope_ask {
    char *key; /* its key in inputRequests, quoted (the answer's key in inputResponses) */
    size_t key_len;
    char method[JSONRPC_METHOD_MAX];
    char *params; /* raw JSON object, or NULL */
};
struct envelope_asks {
    struct envelope_ask a[ENVELOPE_ASKS_MAX];
    size_t n;
};
/*
 * The questions of the input_required result line[0..len) into *as (each freed by
 * envelope_asks_free, whatever the outcome), its requestState into *state (a new JSON string;
 * NULL: none; the old one freed by the caller). NULL, or why the result cannot be bridged
 * (malformed, or a question of a kind other than elicitation, sampling or roots).
 */
const char *envelope_asks_read(const char *line, size_t len, struct envelope_asks *as, char **state,
                               size_t *state_len);
void envelope_asks_free(struct envelope_asks *as);
#define ENVELOPE_HEAD_MAX (64 + JSONRPC_METHOD_MAX + 32)
/*
 * The question a as a request to the client with the id id[0..idlen) (raw JSON, at most 32
 * bytes), into iov (4; head is its room): the count.
 */
int envelope_question(const struct envelope_ask *a, const char *id, size_t idlen,
                      char head[ENVELOPE_HEAD_MAX], struct iovec iov[4]);
/* The client's result (raw JSON) for the question with key (quoted) kept in answers. 0, or -1. */
int envelope_answer_add(struct buf *answers, const char *key, size_t key_len, const char *result,
                        size_t result_len) MUSTCHECK;
/* The retry's members (",\"inputResponses\":{..},\"requestState\":..") into out. 0, or -1. */
int envelope_retry_members(const struct buf *answers, const char *state, struct buf *out) MUSTCHECK;

/*
 * A stateless child's notification on a subscriptions/listen (line, scanned into info) as a legacy
 * client gets it, into out (cleared first): a list change bare, notifications/resources/updated
 * with its uri alone; never the listen's subscriptionId, which is the gateway's. 0, or -1 when it
 * is neither (or its uri is not a string).
 */
int envelope_legacy_note(const char *line, const struct jsonrpc_info *info,
                         struct buf *out) MUSTCHECK;

#endif
