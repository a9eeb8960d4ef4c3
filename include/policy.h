/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_POLICY_H
#define MCPGW_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "jsonrpc.h"

/*
 * The per-tool policy of one [server:NAME] (allowed_tools, denied_tools, tool_scopes): which tools
 * a request may see and call, from the tool's name and the scopes its token grants. A server with
 * none of the three keys has no policy (NULL), and every function here treats NULL as "everything
 * is visible" at the cost of one test. Pure apart from the counters behind policy_metrics; config
 * builds a policy, auth computes a token's grants against it, the session and pool layers apply it
 * to tools/call requests and tools/list answers.
 */

#define POLICY_ENTRIES_MAX 64   /* entries of each key */
#define POLICY_SCOPES_MAX  64   /* distinct scopes tool_scopes names: the bits of a grant mask */
#define POLICY_GLOB_MAX    128  /* bytes of one glob */
#define POLICY_SCOPE_MAX   256  /* bytes of one scope */
#define POLICY_NAME_MAX    512  /* bytes of a tool name it reads; a longer name is hidden */
#define POLICY_TOOLS_MAX   4096 /* tools of one tools/list answer it filters; more: an error */

struct policy;

/* A token's scopes as one policy sees them: bit i set when it grants that policy's i-th scope. */
struct policy_grants {
    const struct policy *of; /* the policy the bits index; NULL: none (no bit set) */
    uint64_t bits;
};

/* The three keys, in the order config hands them over. */
enum policy_list {
    POLICY_ALLOW = 0, /* allowed_tools: GLOB, ...; when set, only matching tools */
    POLICY_DENY,      /* denied_tools: GLOB, ...; wins over allowed_tools */
    POLICY_SCOPES,    /* tool_scopes: GLOB:SCOPE[+SCOPE...], ...; every matching rule applies */
};

enum policy_verdict {
    POLICY_VISIBLE = 0,
    POLICY_DENIED,      /* a denied_tools glob matches */
    POLICY_NOT_ALLOWED, /* allowed_tools is set and no glob of it matches */
    POLICY_NO_SCOPE,    /* a matching tool_scopes rule names a scope the token lacks */
    POLICY_BAD_NAME,    /* no name, not a string, or longer than POLICY_NAME_MAX */
};

/* An empty policy for the server named server (a copy is kept for counters and logs). */
struct policy *policy_new(const char *server);
void policy_free(struct policy *pol);
/*
 * Adds the entries (NULL-terminated) of one key. -1 when one is malformed or a bound is passed:
 * *bad is that entry, *why a static phrase; pol is then unchanged by that entry.
 */
int policy_add(struct policy *pol, enum policy_list list, const char *const *entries,
               const char **bad, const char **why) MUSTCHECK;
/* Nothing was added: the server needs no policy (free it, use NULL). */
bool policy_empty(const struct policy *pol);
/* tool_scopes is set: what a request sees depends on its token (its answers are private). */
bool policy_per_token(const struct policy *pol);

/*
 * Globs: '*' any run of bytes, '?' one byte, '[abc]', '[a-z]', '[!a-z]' one byte of (not of) the
 * set (a ']' first in the set is a member), '\\' makes the next character literal.
 * policy_glob_check: why glob is not one (1..POLICY_GLOB_MAX visible ASCII), or NULL.
 */
const char *policy_glob_check(const char *glob);
/* glob (valid) matches all of s; time at most proportional to strlen(glob) * strlen(s). */
bool policy_glob_match(const char *glob, const char *s);

/* Which of pol's scopes are among scopes[0..n); 0 when pol is NULL or names none. */
uint64_t policy_grants(const struct policy *pol, const char *const *scopes, size_t n);
/* g's bits as pol indexes them (the same when g.of == pol; else matched by scope name). */
uint64_t policy_bits(const struct policy *pol, struct policy_grants g);

/*
 * May a token granting bits see and call the tool name (NULL: unreadable)? For POLICY_NO_SCOPE
 * *scope names a scope it lacks (pol's storage).
 */
enum policy_verdict policy_judge(const struct policy *pol, uint64_t bits, const char *name,
                                 const char **scope);
/* "denied by denied_tools", ... for logs. */
const char *policy_verdict_text(enum policy_verdict v);
/*
 * The verdict on a tools/call request (body, scanned as info): its params.name is decoded into
 * name[0..cap) ("" when unreadable), for the error and the log.
 */
enum policy_verdict policy_judge_call(const struct policy *pol, uint64_t bits, const char *body,
                                      const struct jsonrpc_info *info, char *name, size_t cap,
                                      const char **scope);

/*
 * A tools/list result (line[0..len), scanned as info) without the tools bits may not see. Returns
 * a new xmalloc'd line (*outlen bytes) where *dropped > 0 tools were left out; the bytes outside
 * result.tools are line's, those of each kept tool too. NULL with *dropped 0 when none is left
 * out (send line as it is), or NULL with *err (static) when the answer cannot be filtered: tools
 * is not an array, appears twice, or holds more than POLICY_TOOLS_MAX (send an error instead).
 */
char *policy_filter_tools(const struct policy *pol, uint64_t bits, const char *line, size_t len,
                          const struct jsonrpc_info *info, size_t *outlen, size_t *dropped,
                          const char **err);

/* Counters per server name (over reloads), for /metrics. */
void policy_count_denied(const struct policy *pol);
void policy_count_hidden(const struct policy *pol, size_t n);
void policy_metrics(struct buf *b);

#endif
