/* SPDX-License-Identifier: MIT */
/*
 * A session's exchanged token (token_exchange = on): the token auth_exchange_start got for the
 * session's child before it was spawned, given to the child twice: in its environment as
 * token_exchange_env, and in a file named by token_exchange_env + "_FILE", in a directory of the
 * session's own (mkdtemp, 0700, under $RUNTIME_DIRECTORY, else $TMPDIR, else /tmp), mode 0600.
 * The gateway rewrites the file (a new file renamed over the old one: a reader sees the old token
 * or the new one, never a part) token_exchange_renew_before_s before the token's expires_in, at
 * most once a second; the environment keeps the first token (a process's environment cannot be
 * changed from outside). A token answered without expires_in is not renewed.
 *
 * A renewal exchanges the client's most recent token seen on the session (session_token_seen:
 * every request of the session brings the client's current token, already verified), so a
 * client that refreshes its own token keeps the session renewable. A renewal refused by the
 * authorization server (the subject token revoked or expired, the exchange no longer allowed)
 * ends the session at once; one that gets no usable answer is tried again each second while the
 * exchanged token is still valid, and ends the session once it is not. The session ends through
 * session_close with SESSION_END_TOKEN: what is in flight gets the error, the child is stopped, a
 * notifications/message goes first to the stream being read, and an audit record
 * ("token_exchange") says why. The directory and its file go with the session.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "crypto.h"
#include "jsonrpc.h"
#include "log.h"
#include "session_int.h"

struct session_token {
    char dir[PATH_MAX - 64]; /* room for its file's name in file[] */
    char file[PATH_MAX];
    char *subject; /* the client's most recent token on the session, wiped when replaced */
    size_t len;
    struct auth_exchange *x;  /* a renewal in flight */
    struct loop_timer *timer; /* the next renewal */
    uint64_t expires_ms;      /* of the token the child has; 0: no expires_in given */
};

/* The base of the sessions' private directories. */
static const char *
session_token_base(void)
{
    const char *v = getenv("RUNTIME_DIRECTORY"); /* systemd: the first of a colon list */
    static char first[PATH_MAX - 128];
    if (v != NULL && v[0] == '/' && strcspn(v, ":") < sizeof first) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(v, ":"), v);
        return first;
    }
    v = getenv("TMPDIR");
    return v != NULL && v[0] == '/' && strlen(v) < PATH_MAX - 128 ? v : "/tmp";
}

/* Writes token into t->file through a new file renamed over it. -1 with errno's text in why. */
static int
session_token_write(struct session_token *t, const char *token, size_t len, const char **why)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.token.new", t->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t done = 0;
    while (fd != -1 && done < len) {
        ssize_t w = write(fd, token + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    int err = fd == -1 ? errno : done < len ? errno : 0;
    if (fd != -1 && close(fd) == -1 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, t->file) == -1)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        *why = strerror(err != 0 ? err : EIO);
        return -1;
    }
    return 0;
}

static void
session_token_forget(struct session_token *t)
{
    if (t->subject != NULL) {
        crypto_cleanse(t->subject, t->len);
        free(t->subject);
        t->subject = NULL;
    }
}

void
session_token_seen(struct session *s, const char *authorization)
{
    struct session_token *t = s->tok;
    if (t == NULL)
        return;
    size_t n = 0;
    const char *tok = auth_bearer_token(authorization, &n);
    if (tok == NULL || n == 0
        || (t->subject != NULL && t->len == n && crypto_equal(t->subject, tok, n)))
        return;
    session_token_forget(t);
    t->subject = xstrndup(tok, n);
    t->len = n;
}

/* The session cannot keep its token: it ends, saying why to its client, the log and the audit. */
static void
session_token_end(struct session *s, const char *why)
{
    char detail[320];
    snprintf(detail, sizeof detail, "the token for [server:%s] could not be renewed: %s",
             s->srv->name, why);
    log_warn(s->id, "session ends: %s", detail);
    audit_event("token_exchange", s->owner != NULL ? s->owner->name : NULL, s->srv->name, s->id,
                0, detail, NULL, NULL);
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

static void session_token_renew(void *arg);

/* The next renewal: renew_before_s ahead of the token's expiry, at least 1 s from now. */
static void
session_token_arm(struct session *s, uint64_t delay_ms)
{
    struct session_token *t = s->tok;
    loop_timer_del(t->timer);
    t->timer = loop_timer_add(sessions.l, delay_ms, session_token_renew, s);
}

static uint64_t
session_token_next(const struct session *s)
{
    uint64_t now = util_now_ms(), before = s->srv->token_exchange_renew_before_s * 1000u;
    const struct session_token *t = s->tok;
    return t->expires_ms > now + before + 1000 ? t->expires_ms - before - now : 1000;
}

static void
session_token_renewed(void *arg, struct auth_exchanged *res)
{
    struct session *s = arg;
    struct session_token *t = s->tok;
    t->x = NULL;
    const char *why = NULL;
    if (res->status == AUTH_EXCHANGE_OK && session_token_write(t, res->token, res->len, &why) == 0) {
        t->expires_ms = res->expires_in_s >= 0 ? util_now_ms() + (uint64_t)res->expires_in_s * 1000u
                                               : 0;
        log_info(s->id, "token for [server:%s] renewed%s", s->srv->name,
                 t->expires_ms != 0 ? "" : " (no expires_in: not renewed again)");
        if (t->expires_ms != 0)
            session_token_arm(s, session_token_next(s));
    } else if (res->status == AUTH_EXCHANGE_OK) {
        char w[160];
        snprintf(w, sizeof w, "its file cannot be written (%s)", why);
        log_warn(s->id, "token for [server:%s]: %s", s->srv->name, w);
        session_token_arm(s, 1000);
    } else if (res->status != AUTH_EXCHANGE_REFUSED && util_now_ms() + 1000 < t->expires_ms) {
        log_info(s->id, "token for [server:%s] not renewed yet (%s): again in 1 s", s->srv->name,
                 res->why);
        session_token_arm(s, 1000);
    } else {
        session_token_end(s, res->why);
    }
    auth_exchanged_free(res);
}

static void
session_token_renew(void *arg)
{
    struct session *s = arg;
    struct session_token *t = s->tok;
    t->timer = NULL;
    if (s->state == SESSION_CLOSED || t->x != NULL)
        return;
    if (t->subject == NULL || sessions.auth == NULL) {
        session_token_end(s, "no client token to exchange");
        return;
    }
    struct auth_exchanged *now = NULL;
    t->x = auth_exchange_start(sessions.auth, s->srv, t->subject, t->len, session_token_renewed, s,
                               &now);
    if (t->x == NULL)
        session_token_renewed(s, now);
}

const char *
session_token_open(struct session *s, struct auth_exchanged *x, const char *authorization,
                   char **env)
{
    struct session_token *t = xcalloc(1, sizeof(*t));
    s->tok = t;
    session_token_seen(s, authorization);
    int n = snprintf(t->dir, sizeof t->dir, "%s/mcpgw-token-XXXXXX", session_token_base());
    const char *why = NULL;
    if (n < 0 || (size_t)n >= sizeof t->dir || mkdtemp(t->dir) == NULL) {
        log_warn(NULL, "new session of [server:%s]: no private directory under %s: %s",
                 s->srv->name, session_token_base(), strerror(errno));
        t->dir[0] = '\0';
        return "the gateway cannot keep the exchanged token (its log says why)";
    }
    snprintf(t->file, sizeof t->file, "%s/token", t->dir);
    if (session_token_write(t, x->token, x->len, &why) == -1) {
        log_warn(NULL, "new session of [server:%s]: %s: %s", s->srv->name, t->file, why);
        return "the gateway cannot keep the exchanged token (its log says why)";
    }
    t->expires_ms = x->expires_in_s >= 0 ? util_now_ms() + (uint64_t)x->expires_in_s * 1000u : 0;
    const char *var = s->srv->token_exchange_env;
    size_t vlen = strlen(var), len = vlen + x->len + 2;
    env[0] = xmalloc(len);
    memcpy(env[0], var, vlen);
    env[0][vlen] = '=';
    memcpy(env[0] + vlen + 1, x->token, x->len);
    env[0][len - 1] = '\0';
    len = strlen(var) + strlen(t->file) + 8;
    env[1] = xmalloc(len);
    snprintf(env[1], len, "%s_FILE=%s", var, t->file);
    return NULL;
}

void
session_token_start(struct session *s)
{
    if (s->tok != NULL && s->tok->expires_ms != 0)
        session_token_arm(s, session_token_next(s));
}

void
session_token_close(struct session *s)
{
    struct session_token *t = s->tok;
    if (t == NULL)
        return;
    s->tok = NULL;
    loop_timer_del(t->timer);
    auth_exchange_cancel(t->x);
    session_token_forget(t);
    if (t->dir[0] != '\0') {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.token.new", t->dir);
        unlink(tmp);
        if (unlink(t->file) == -1 && errno != ENOENT)
            log_warn(NULL, "%s: %s", t->file, strerror(errno));
        if (rmdir(t->dir) == -1)
            log_warn(NULL, "%s: %s", t->dir, strerror(errno));
    }
    free(t);
}
