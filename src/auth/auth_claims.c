/* SPDX-License-Identifier: MIT */
/*
 * env_from_claims (auth.h): what a verified token's claims give a server's session children, one
 * NAME=VALUE each, worked out once per token and server (auth.c's grant) and kept with the token
 * in its cache, refcounted; the values are wiped when the last reference goes. A value is a
 * string, or an integer written in decimal, of at most CONFIG_CLAIM_VALUE_MAX bytes without
 * control characters: nothing a child's environment could misread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_int.h"
#include "crypto.h"
#include "log.h"

struct auth_claims *
auth_claims_ref(struct auth_claims *c)
{
    c->refs++;
    return c;
}

void
auth_claims_unref(struct auth_claims *c)
{
    if (c == NULL || --c->refs > 0)
        return;
    for (char **e = c->env; e != NULL && *e != NULL; e++) {
        crypto_cleanse(*e, strlen(*e));
        free(*e);
    }
    free(c->env);
    free(c->why);
    free(c);
}

/*
 * The value of claim in c as env_from_claims takes it: a member of that name, else a dotted path
 * through nested objects. A string, or an integer written in decimal; NULL when absent, of
 * another type, longer than CONFIG_CLAIM_VALUE_MAX or holding a control character. num is room
 * for the integer's text.
 */
static const char *
auth_claim_value(const struct jsonrpc_doc *c, const char *claim, char *num, size_t numlen)
{
    char path[1024];
    const char *leaf = claim;
    if (!jsonrpc_doc_has(c, claim) && strchr(claim, '.') != NULL
        && snprintf(path, sizeof path, "%s", claim) < (int)sizeof path) {
        char *save = NULL, *step = strtok_r(path, ".", &save);
        for (char *next; c != NULL && (next = strtok_r(NULL, ".", &save)) != NULL; step = next)
            c = jsonrpc_doc_obj(c, step);
        leaf = step;
    }
    if (c == NULL || leaf == NULL)
        return NULL;
    const char *v = jsonrpc_doc_str(c, leaf);
    int64_t i;
    if (v == NULL && jsonrpc_doc_is_int(c, leaf) && jsonrpc_doc_int(c, leaf, &i) == 0) {
        snprintf(num, numlen, "%" PRId64, i);
        v = num;
    }
    size_t n = v != NULL ? strlen(v) : 0;
    if (v == NULL || n > CONFIG_CLAIM_VALUE_MAX)
        return NULL;
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)v[k] < 0x20 || v[k] == 0x7f)
            return NULL;
    return v;
}

/* What claims c give srv's env_from_claims: every variable, or the first one that cannot be set. */
struct auth_claims *
auth_claims_new(const struct config_server *srv, const struct jsonrpc_doc *c)
{
    struct auth_claims *ac = xcalloc(1, sizeof(*ac));
    ac->refs = 1;
    ac->env = xcalloc(srv->n_claim_env + 1, sizeof(char *));
    for (size_t i = 0; i < srv->n_claim_env; i++) {
        const struct config_claim_env *ce = &srv->claim_env[i];
        char num[24];
        const char *v = auth_claim_value(c, ce->claim, num, sizeof num);
        if (v == NULL && ce->def == NULL) {
            char why[512];
            snprintf(why, sizeof why,
                     "the token's claim %s (for %s) is missing, or not a string or an integer of "
                     "at most %d bytes without control characters",
                     ce->claim, ce->var, CONFIG_CLAIM_VALUE_MAX);
            ac->why = xstrdup(why);
            break;
        }
        v = v != NULL ? v : ce->def;
        size_t len = strlen(ce->var) + strlen(v) + 2;
        ac->env[i] = xmalloc(len);
        snprintf(ac->env[i], len, "%s=%s", ce->var, v);
    }
    return ac;
}

/*
 * The credentials of a child of srv that serves principal alone (config_server_per_principal):
 * its credentials_dir file, read now, then what claims give env_from_claims (a name set by both:
 * the claim's). A session's child and a pool child of one principal are built by this one function.
 */
const char *
auth_child_credentials(const struct config_server *srv, const char *principal,
                       const struct auth_claims *claims, const char *what, char ***extra,
                       int *status)
{
    *status = 403;
    if (srv->n_claim_env > 0 && (claims == NULL || claims->why != NULL)) {
        const char *why = claims != NULL ? claims->why : "no token's claims for env_from_claims";
        log_info(NULL, "%s of [server:%s] refused for %s: %s", what, srv->name, principal, why);
        return why;
    }
    char **file = NULL;
    if (srv->credentials_dir != NULL) {
        char why[1200];
        int rc = config_credentials_read(srv, principal, &file, why, sizeof why);
        if (rc == -2) {
            log_info(NULL, "%s of [server:%s] refused for %s: %s", what, srv->name, principal, why);
            return "this principal's name cannot name a file of credentials_dir";
        }
        if (rc == 1 && !srv->credentials_server_env) {
            log_info(NULL, "%s of [server:%s] refused: %s has no file in credentials_dir", what,
                     srv->name, principal);
            return "no credentials for this principal on this server (credentials_dir)";
        }
        if (rc == -1) {
            log_warn(NULL, "%s of [server:%s] refused for %s: %s", what, srv->name, principal, why);
            *status = 500;
            return "the credentials of this principal cannot be read (the gateway's log says why)";
        }
    }
    size_t n = 0, k = 0;
    for (char **e = file; e != NULL && *e != NULL; e++)
        n++;
    n += claims != NULL ? srv->n_claim_env : 0;
    char **out = xcalloc(n + 1, sizeof(*out));
    for (char **e = file; e != NULL && *e != NULL; e++) {
        size_t name = strcspn(*e, "=");
        bool claimed = false;
        for (char **c = claims != NULL ? claims->env : NULL; c && *c && !claimed; c++)
            claimed = strncmp(*c, *e, name) == 0 && (*c)[name] == '=';
        if (!claimed)
            out[k++] = xstrdup(*e);
    }
    for (char **c = claims != NULL ? claims->env : NULL; c && *c; c++)
        out[k++] = xstrdup(*c);
    config_env_free(file);
    *extra = out;
    return NULL;
}
