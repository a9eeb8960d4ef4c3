/* SPDX-License-Identifier: MIT */
/*
 * A session's exchanged token (token_exchange = on): the token auth_exchange_start got for the
 * session's child before it was spawned, held by auth_held.c (its private directory and file, the
 * child's token_exchange_env and its _FILE, the renewals with the client's most recent token seen
 * on the session). A session whose token cannot be renewed ends through session_close with
 * SESSION_END_TOKEN: what is in flight gets the error, the child is stopped, a
 * notifications/message goes first to the stream being read, and an audit record
 * ("token_exchange") says why. The directory and its file go with the session.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "jsonrpc.h"
#include "log.h"
#include "session_int.h"

void
session_token_seen(struct session *s, const char *authorization)
{
    auth_held_seen(s->tok, authorization);
}

/* The session cannot keep its token: it ends, saying why to its client, the log and the audit. */
static void
session_token_end(void *arg, const char *why)
{
    struct session *s = arg;
    char detail[320];
    snprintf(detail, sizeof detail, "the token for [server:%s] could not be renewed: %s",
             s->srv->name, why);
    log_warn(s->id, "session ends: %s", detail);
    audit_event("token_exchange", s->owner != NULL ? s->owner->name : NULL, s->srv->name, s->id, 0,
                detail, NULL, NULL);
    struct stream *st = session_route_unrelated(s);
    if (st != NULL) {
        size_t qlen;
        char *q = jsonrpc_quote(detail, &qlen);
        char *msg = xmalloc(qlen + 160);
        int n = snprintf(msg, qlen + 160,
                         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":"
                         "{\"level\":\"error\",\"logger\":\"mcp-gateway\",\"data\":%.*s}}",
                         (int)qlen, q);
        struct iovec iov = { msg, (size_t)n };
        session_push(s, st, &iov, 1);
        free(msg);
        free(q);
    }
    session_close(s, SESSION_END_TOKEN, detail);
}

const char *
session_token_open(struct session *s, struct auth_exchanged *x, const char *authorization,
                   char **env)
{
    const struct auth_held_params hp = { .a = &sessions.auth,
                                         .l = sessions.l,
                                         .srv = &s->srv,
                                         .tag = s->id,
                                         .authorization = authorization,
                                         .end = session_token_end,
                                         .arg = s };
    const char *why = NULL;
    s->tok = auth_held_open(&hp, x, &why);
    if (s->tok == NULL) {
        log_warn(NULL, "new session of [server:%s] refused: %s", s->srv->name, why);
        return why;
    }
    auth_held_env(s->tok, env);
    return NULL;
}

const struct sandbox_own *
session_token_own(struct session *s, struct sandbox_own *own, bool *failed)
{
    return auth_held_own(s->srv->box != NULL ? s->tok : NULL, own, failed);
}

void
session_token_start(struct session *s)
{
    auth_held_start(s->tok);
}

void
session_token_close(struct session *s)
{
    struct auth_held *t = s->tok;
    s->tok = NULL;
    auth_held_close(t);
}
