/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_AUDIT_H
#define MCPGW_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "jsonrpc.h"

/*
 * The audit trail (audit_log): one JSON line per audited call (tools/call, resources/read,
 * prompts/get, completion/complete in a session; every stateless request), per session start and
 * end, and per request refused on an MCP route (authentication, policy, limits, protocol). A line
 * goes to a regular file (appended, one write each, reopened on SIGUSR1) or, with "journal", to the
 * systemd journal as one entry with the line as MESSAGE and its main fields as MCPGW_AUDIT_*
 * fields.
 *
 * Off (the default), audit_on() is false and nothing here runs: callers test it before they make
 * a record, so the hot path allocates nothing. A record never holds a credential: no header, no
 * token, no environment; the arguments only as a SHA-256 of their JSON text, and the text itself
 * only up to arguments_max bytes when the operator set it.
 */

struct audit_rec;

/* Who the current HTTP request is (the http layer sets it around routing; NULL clears). */
struct audit_who {
    const char *principal; /* auth's principal name */
    const char *auth;      /* how it was authenticated: none, bearer, jwt, introspection */
    const char *client;    /* the client's address as the access log names it */
    const char *trace_id;  /* the W3C trace id (a call's is set by audit_call_trace); NULL */
};
void audit_set_who(const struct audit_who *w);

/*
 * The trail's destination: NULL or "" off, "journal", or a file path (opened like log_file: the
 * last component not followed, no wait, a regular file only). arguments_max: bytes of arguments
 * kept (0: never); required: refuse new audited calls while records cannot be written.
 * 0, or -1 with *why (static text); the previous destination stays then.
 */
int audit_set(const char *path, uint64_t arguments_max, bool required, const char **why);
/* SIGUSR1: the file opened again at its path. 0 (also when off or journal), or -1 with *why. */
int audit_reopen(const char **why);
const char *audit_path(void);
bool audit_on(void);
/* Whether method is one a session's request is audited for. */
bool audit_method(const char *method);
/*
 * audit_required is set and the last write failed: new audited calls are refused. Each call
 * writes a refusal record of the call (at most one a second); once one is written the trail is
 * back and calls pass again.
 */
bool audit_refusing(const char *server, const char *body, const struct jsonrpc_info *info);

/*
 * A call's record from its start: server, where (session id, or NULL while a stateless call waits
 * for a child), the request as received. NULL when the trail is off.
 */
struct audit_rec *audit_call_new(const char *server, const char *where, const char *body,
                                 size_t len, const struct jsonrpc_info *info);
/* The pool child that took it ("pool:NAME#N"). */
void audit_call_where(struct audit_rec *a, const char *where);
/* The W3C trace id the request carried to its child (trace_context); NULL: none. */
void audit_call_trace(struct audit_rec *a, const char *trace_id);
/* The child's answer (a result, or an error and its code). The first outcome set stays. */
void audit_call_answer(struct audit_rec *a, const char *line, size_t len,
                       const struct jsonrpc_info *info);
/* The gateway answered it with an error of code. */
void audit_call_error(struct audit_rec *a, int code);
/* It was cancelled, for cause (relay_reasons' label). */
void audit_call_cancel(struct audit_rec *a, const char *cause);
/* Writes the record (outcome "unanswered" if none was set) and frees it; NULL: nothing. */
void audit_call_end(struct audit_rec *a);
/* Frees it unwritten: the call was refused before its child saw it (its refusal is the record). */
void audit_call_drop(struct audit_rec *a);

/*
 * An event that is no call: "session_start", "session_end" (detail: why it ended),
 * "refused_auth" (code 401 or 403, detail: why), "refused_policy" (the tool; detail: why),
 * "refused_exchange" (a session's token exchange at its start: code 403, 502 or 503, detail:
 * why), "token_exchange" (a session ended because its token could not be renewed: detail: why).
 * principal: whose (NULL: the current request's). code: an HTTP status (100..599) or a JSON-RPC
 * error code; 0: none. body/info: the request, when there is one (its id, method and name go in
 * the record).
 */
void audit_event(const char *event, const char *principal, const char *server, const char *where,
                 int code, const char *detail, const char *body, const struct jsonrpc_info *info);

/*
 * A request the gateway refused itself, before any child saw it: event ("refused_auth",
 * "refused_policy", "refused_limit", "refused_unavailable", "refused_request"), the HTTP status
 * and the JSON-RPC error code of the answer (0: none), why in words; who is the current
 * request's (audit_set_who). body/info: the request, when its body was read (NULL: not).
 */
void audit_refusal(const char *event, const char *server, int http_status, int code,
                   const char *detail, const char *body, const struct jsonrpc_info *info);

/* mcpgw_audit_records_total, mcpgw_audit_write_failures_total. */
void audit_metrics(struct buf *b);
void audit_module_free(void);

/* The record writer's pieces, for its unit test. */
/* s[0..n) as the inside of a JSON string, cut at max bytes (at a character boundary): true cut. */
bool audit_put_string(struct buf *b, const char *s, size_t n, size_t max);

#endif
