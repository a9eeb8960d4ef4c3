/* SPDX-License-Identifier: MIT */
/*
 * Per-tool policy (policy.h): globs over tool names and the scopes a tool needs. A tool is visible
 * to a request when no denied_tools glob matches it, allowed_tools is empty or one of its globs
 * matches, and the request's token grants every scope of every tool_scopes rule that matches it.
 * A hidden tool is left out of tools/list answers and a call of it is answered as an unknown tool
 * would be, so a client cannot tell a hidden tool from one that does not exist.
 *
 * The scopes tool_scopes names are numbered (at most 64), so a request carries its token's grants
 * as one uint64_t computed once, when the token is checked, and filtering an answer later needs
 * no token. A tool name the policy cannot read (absent, not a string, too long) is hidden: with a
 * policy in force nothing passes unjudged. The globs are matched here, not with fnmatch(3), so
 * that their syntax is fixed, checked when the configuration is read, and costs at most
 * glob length x name length steps. JSON is read with the scanner's spans (jsonrpc.h); the bytes
 * of an answer outside result.tools, and those of each tool kept, pass through unchanged.
 */
#include "policy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util.h"

#define POLICY_SERVER_MAX   64  /* bytes of a server name (config: 1..64) */
#define POLICY_COUNTERS_MAX 256 /* server names counted; more (reloads renaming) are not */

struct policy_rule {
    char *glob;
    uint64_t need; /* bits of the scopes it names */
};

struct policy {
    char server[POLICY_SERVER_MAX + 1];
    char *allow[POLICY_ENTRIES_MAX];
    size_t nallow;
    char *deny[POLICY_ENTRIES_MAX];
    size_t ndeny;
    struct policy_rule rules[POLICY_ENTRIES_MAX];
    size_t nrules;
    char *scopes[POLICY_SCOPES_MAX];
    size_t nscopes;
};

struct policy *
policy_new(const char *server)
{
    struct policy *pol = xcalloc(1, sizeof(*pol));
    snprintf(pol->server, sizeof(pol->server), "%s", server);
    return pol;
}

void
policy_free(struct policy *pol)
{
    if (pol == NULL)
        return;
    for (size_t i = 0; i < pol->nallow; i++)
        free(pol->allow[i]);
    for (size_t i = 0; i < pol->ndeny; i++)
        free(pol->deny[i]);
    for (size_t i = 0; i < pol->nrules; i++)
        free(pol->rules[i].glob);
    for (size_t i = 0; i < pol->nscopes; i++)
        free(pol->scopes[i]);
    free(pol);
}

bool
policy_empty(const struct policy *pol)
{
    return pol->nallow == 0 && pol->ndeny == 0 && pol->nrules == 0;
}

bool
policy_per_token(const struct policy *pol)
{
    return pol != NULL && pol->nrules > 0;
}

/* --- globs ------------------------------------------------------------------------------ */

const char *
policy_glob_check(const char *glob)
{
    size_t n = strlen(glob);
    if (n == 0)
        return "is empty";
    if (n > POLICY_GLOB_MAX)
        return "is longer than 128 bytes";
    for (const char *p = glob; *p != '\0'; p++)
        if (*p < 0x21 || *p > 0x7e)
            return "must be visible ASCII";
    for (const char *p = glob; *p != '\0'; p++) {
        if (*p == '\\') {
            if (*++p == '\0')
                return "ends in a lone backslash";
        } else if (*p == '[') {
            const char *q = p + 1;
            q += *q == '!';
            q += *q == ']';
            while (*q != '\0' && *q != ']')
                q++;
            if (*q == '\0')
                return "has a '[' without its ']'";
            p = q;
        }
    }
    return NULL;
}

/* One element of a glob at *gp ('?', a set, an escaped or plain character) against c. */
static bool
policy_glob_one(const char **gp, unsigned char c)
{
    const char *g = *gp;
    if (*g == '?') {
        *gp = g + 1;
        return true;
    }
    if (*g != '[') {
        g += *g == '\\';
        *gp = g + 1;
        return (unsigned char)*g == c;
    }
    g++;
    bool negate = *g == '!', hit = false;
    g += negate;
    for (const char *first = g; *g != ']' || g == first; g++) {
        if (g[1] == '-' && g[2] != ']' && g[2] != '\0') {
            hit = hit || (c >= (unsigned char)g[0] && c <= (unsigned char)g[2]);
            g += 2;
        } else {
            hit = hit || c == (unsigned char)*g;
        }
    }
    *gp = g + 1;
    return hit != negate;
}

/*
 * Iterative, remembering only the last '*': on a mismatch that star takes one more byte. Each
 * retry moves the name on by one, so the work is bounded by glob length x name length.
 */
bool
policy_glob_match(const char *glob, const char *s)
{
    const char *star = NULL, *back = NULL;
    for (;;) {
        if (*glob == '*') {
            star = ++glob;
            back = s;
            continue;
        }
        if (*s == '\0' && *glob == '\0')
            return true;
        const char *next = glob;
        if (*s != '\0' && *glob != '\0' && policy_glob_one(&next, (unsigned char)*s)) {
            glob = next;
            s++;
            continue;
        }
        if (star == NULL || *back == '\0')
            return false;
        glob = star;
        s = ++back;
    }
}

static bool
policy_any(char *const *globs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (policy_glob_match(globs[i], name))
            return true;
    return false;
}

/* --- building ------------------------------------------------------------------------------ */

/* RFC 6749 scope-token characters (%x21 / %x23-5B / %x5D-7E), less '+', the rule's separator. */
static const char *
policy_scope_check(const char *s, size_t len)
{
    if (len == 0)
        return "has an empty scope (GLOB:SCOPE[+SCOPE...])";
    if (len > POLICY_SCOPE_MAX)
        return "has a scope longer than 256 bytes";
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
            return "has a scope that is not a scope token";
    return NULL;
}

/* The bit of the scope s[0..len), numbered on first use; 0 when the 64 are taken. */
static uint64_t
policy_scope_bit(struct policy *pol, const char *s, size_t len)
{
    for (size_t i = 0; i < pol->nscopes; i++)
        if (strlen(pol->scopes[i]) == len && memcmp(pol->scopes[i], s, len) == 0)
            return 1ull << i;
    if (pol->nscopes == POLICY_SCOPES_MAX)
        return 0;
    pol->scopes[pol->nscopes] = xstrndup(s, len);
    return 1ull << pol->nscopes++;
}

/* GLOB:SCOPE[+SCOPE...]; NULL, or why not. */
static const char *
policy_add_rule(struct policy *pol, const char *rule)
{
    const char *colon = strchr(rule, ':');
    if (colon == NULL)
        return "must be GLOB:SCOPE[+SCOPE...]";
    char glob[POLICY_GLOB_MAX + 2];
    size_t glen = (size_t)(colon - rule);
    if (glen > POLICY_GLOB_MAX)
        return "is longer than 128 bytes before ':'";
    memcpy(glob, rule, glen);
    glob[glen] = '\0';
    const char *why = policy_glob_check(glob);
    if (why != NULL)
        return why;
    uint64_t need = 0;
    size_t nscopes = pol->nscopes;
    for (const char *s = colon + 1;; s++) {
        size_t len = strcspn(s, "+");
        why = policy_scope_check(s, len);
        uint64_t bit = why == NULL ? policy_scope_bit(pol, s, len) : 0;
        if (why == NULL && bit == 0)
            why = "names more than 64 distinct scopes (over all rules)";
        if (why != NULL) {
            while (pol->nscopes > nscopes) /* this rule's new scopes go with it */
                free(pol->scopes[--pol->nscopes]);
            return why;
        }
        need |= bit;
        s += len;
        if (*s == '\0')
            break;
    }
    pol->rules[pol->nrules].glob = xstrdup(glob);
    pol->rules[pol->nrules++].need = need;
    return NULL;
}

int
policy_add(struct policy *pol, enum policy_list list, const char *const *entries, const char **bad,
           const char **why)
{
    char **globs = list == POLICY_ALLOW ? pol->allow : pol->deny;
    size_t *n = list == POLICY_ALLOW  ? &pol->nallow
                : list == POLICY_DENY ? &pol->ndeny
                                      : &pol->nrules;
    for (const char *const *e = entries; e != NULL && *e != NULL; e++) {
        *bad = *e;
        *why = *n == POLICY_ENTRIES_MAX ? "is one entry more than 64"
               : list == POLICY_SCOPES  ? policy_add_rule(pol, *e)
                                        : policy_glob_check(*e);
        if (*why != NULL)
            return -1;
        if (list != POLICY_SCOPES)
            globs[(*n)++] = xstrdup(*e);
    }
    *bad = NULL;
    return 0;
}

/* --- judging ------------------------------------------------------------------------------- */

uint64_t
policy_grants(const struct policy *pol, const char *const *scopes, size_t n)
{
    uint64_t bits = 0;
    for (size_t i = 0; pol != NULL && i < pol->nscopes; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(pol->scopes[i], scopes[j]) == 0) {
                bits |= 1ull << i;
                break;
            }
    return bits;
}

uint64_t
policy_bits(const struct policy *pol, struct policy_grants g)
{
    if (g.of == pol)
        return g.bits;
    if (pol == NULL || g.of == NULL)
        return 0;
    const char *have[POLICY_SCOPES_MAX];
    size_t n = 0;
    for (size_t i = 0; i < g.of->nscopes; i++)
        if (g.bits >> i & 1)
            have[n++] = g.of->scopes[i];
    return policy_grants(pol, have, n);
}

enum policy_verdict
policy_judge(const struct policy *pol, uint64_t bits, const char *name, const char **scope)
{
    if (pol == NULL)
        return POLICY_VISIBLE;
    if (name == NULL)
        return POLICY_BAD_NAME;
    if (policy_any(pol->deny, pol->ndeny, name))
        return POLICY_DENIED;
    if (pol->nallow > 0 && !policy_any(pol->allow, pol->nallow, name))
        return POLICY_NOT_ALLOWED;
    uint64_t need = 0;
    for (size_t i = 0; i < pol->nrules; i++)
        if (policy_glob_match(pol->rules[i].glob, name))
            need |= pol->rules[i].need;
    uint64_t missing = need & ~bits;
    if (missing == 0)
        return POLICY_VISIBLE;
    *scope = pol->scopes[__builtin_ctzll(missing)];
    return POLICY_NO_SCOPE;
}

const char *
policy_verdict_text(enum policy_verdict v)
{
    switch (v) {
    case POLICY_VISIBLE:
        return "visible";
    case POLICY_DENIED:
        return "denied by denied_tools";
    case POLICY_NOT_ALLOWED:
        return "not in allowed_tools";
    case POLICY_NO_SCOPE:
        return "the token lacks a scope tool_scopes requires";
    case POLICY_BAD_NAME:
        return "the tool's name cannot be read";
    }
    return "hidden";
}

enum policy_verdict
policy_judge_call(const struct policy *pol, uint64_t bits, const char *body,
                  const struct jsonrpc_info *info, char *name, size_t cap, const char **scope)
{
    bool readable = jsonrpc_string_at(body, info->name, name, cap, NULL);
    if (!readable && cap > 0)
        name[0] = '\0';
    return policy_judge(pol, bits, readable ? name : NULL, scope);
}

/* The "name" of the tool at el inside list (its array's text), decoded into name; NULL if none. */
static const char *
policy_tool_name(const char *list, struct jsonrpc_span el, char *name, size_t cap)
{
    struct jsonrpc_span at;
    if (jsonrpc_member_at(list, el, "name", &at) == -1 || at.len == 0
        || !jsonrpc_string_at(list, at, name, cap, NULL))
        return NULL;
    return name;
}

char *
policy_filter_tools(const struct policy *pol, uint64_t bits, const char *line, size_t len,
                    const struct jsonrpc_info *info, size_t *outlen, size_t *dropped,
                    const char **err)
{
    *dropped = 0;
    *err = NULL;
    struct jsonrpc_span tools;
    if (pol == NULL || info->result.len == 0)
        return NULL;
    if (jsonrpc_member_at(line, info->result, "tools", &tools) == -1) {
        *err = "the result names \"tools\" twice";
        return NULL;
    }
    if (tools.len == 0)
        return NULL;
    const char *list = line + tools.off;
    struct jsonrpc_span *el = xmalloc(POLICY_TOOLS_MAX * sizeof(*el));
    size_t n = 0;
    if (jsonrpc_batch_split(list, tools.len, el, POLICY_TOOLS_MAX, &n) == -1) {
        free(el);
        *err = list[0] == '[' ? "the result lists more than 4096 tools"
                              : "the result's \"tools\" is not an array";
        return NULL;
    }
    /* Never longer than line: the kept tools, fewer commas, the same brackets. */
    char *out = xmalloc(len);
    memcpy(out, line, tools.off);
    size_t o = tools.off;
    out[o++] = '[';
    char name[POLICY_NAME_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        const char *scope = NULL;
        if (policy_judge(pol, bits, policy_tool_name(list, el[i], name, sizeof(name)), &scope)
            != POLICY_VISIBLE) {
            (*dropped)++;
            continue;
        }
        if (o > tools.off + 1)
            out[o++] = ',';
        memcpy(out + o, list + el[i].off, el[i].len);
        o += el[i].len;
    }
    free(el);
    if (*dropped == 0) {
        free(out);
        return NULL;
    }
    out[o++] = ']';
    size_t tail = tools.off + tools.len;
    memcpy(out + o, line + tail, len - tail);
    *outlen = o + len - tail;
    return out;
}

/* --- counters ------------------------------------------------------------------------------ */

static struct {
    struct policy_counter {
        char server[POLICY_SERVER_MAX + 1];
        uint64_t denied, hidden;
    } c[POLICY_COUNTERS_MAX];
    size_t n;
} policy_ctr;

static struct policy_counter *
policy_counter(const struct policy *pol)
{
    for (size_t i = 0; i < policy_ctr.n; i++)
        if (strcmp(policy_ctr.c[i].server, pol->server) == 0)
            return &policy_ctr.c[i];
    if (policy_ctr.n == POLICY_COUNTERS_MAX)
        return NULL;
    struct policy_counter *c = &policy_ctr.c[policy_ctr.n++];
    memcpy(c->server, pol->server, sizeof(c->server));
    return c;
}

void
policy_count_denied(const struct policy *pol)
{
    struct policy_counter *c = policy_counter(pol);
    if (c != NULL)
        c->denied++;
}

void
policy_count_hidden(const struct policy *pol, size_t n)
{
    struct policy_counter *c = policy_counter(pol);
    if (c != NULL)
        c->hidden += n;
}

void
policy_metrics(struct buf *b)
{
    char labels[POLICY_SERVER_MAX + 16];
    metrics_family(b, "mcpgw_policy_denied_total", "counter",
                   "tools/call requests the per-tool policy refused (answered as an unknown tool), "
                   "by server.");
    for (size_t i = 0; i < policy_ctr.n; i++) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", policy_ctr.c[i].server);
        metrics_sample(b, "mcpgw_policy_denied_total", labels, policy_ctr.c[i].denied);
    }
    metrics_family(b, "mcpgw_policy_tools_hidden_total", "counter",
                   "Tools the per-tool policy left out of tools/list answers, by server.");
    for (size_t i = 0; i < policy_ctr.n; i++) {
        snprintf(labels, sizeof(labels), "server=\"%s\"", policy_ctr.c[i].server);
        metrics_sample(b, "mcpgw_policy_tools_hidden_total", labels, policy_ctr.c[i].hidden);
    }
}
