/* SPDX-License-Identifier: MIT */
/*
 * An exchanged token held for the children of one owner (token_exchange = on; auth.h): a
 * session's child, or the children of one principal's pool. The token is given to a child twice:
 * in its environment as token_exchange_env, and in a file named by token_exchange_env + "_FILE", in
 * a directory of the owner's own (mkdtemp, 0700, under $RUNTIME_DIRECTORY, else $TMPDIR, else
 * /tmp), mode 0600. The file is rewritten (a new file renamed over the old one: a reader sees the
 * old token or the new one, never a part) token_exchange_renew_before_s before the token's
 * expires_in, at most once a second; a child's environment keeps the token it was started with (a
 * process's environment cannot be changed from outside), a child started later gets the newest. A
 * token answered without expires_in is not renewed.
 *
 * A renewal exchanges the client's most recent token seen (auth_held_seen: every request of the
 * owner brings the client's current token, already verified), so a client that refreshes its own
 * token keeps the owner renewable. A renewal refused by the authorization server (the subject
 * token revoked or expired, the exchange no longer allowed) ends the owner at once (its end
 * callback); one that gets no usable answer is tried again each second while the held token is
 * still valid, and ends the owner once it is not. Every copy of a token here is wiped when freed;
 * none is ever logged.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_int.h"
#include "crypto.h"
#include "log.h"
#include "loop.h"
#include "sandbox.h"
#include "util.h"

struct auth_held {
    struct auth *const *a; /* the owner's current [auth], for renewals */
    struct loop *l;
    const struct config_server *const *srv; /* the owner's (a reload may change it) */
    char tag[96];                           /* the owner, in log lines */
    char dir[PATH_MAX - 64];                /* room for its file's name in file[] */
    char file[PATH_MAX];
    char *token; /* the newest exchanged token, for children started later */
    size_t token_len;
    char *subject; /* the client's most recent token seen, wiped when replaced */
    size_t len;
    struct auth_exchange *x;  /* a renewal in flight */
    struct loop_timer *timer; /* the next renewal */
    uint64_t expires_ms;      /* of the newest token; 0: no expires_in given */
    gid_t gid; /* a root gateway's boxed children read it through this group; -1: none */
    auth_held_end_cb *end;
    void *arg;
};

/* The base of the owners' private directories (every box hides it: config_box.c). */
static const char *
auth_held_base(void)
{
    return util_runtime_dir();
}

static void
auth_held_wipe(char **p, size_t *len)
{
    if (*p != NULL) {
        crypto_cleanse(*p, *len);
        free(*p);
        *p = NULL;
        *len = 0;
    }
}

/* Writes x's token into h->file through a new file renamed over it, and keeps it. -1: *why. */
static int
auth_held_write(struct auth_held *h, const struct auth_exchanged *x, const char **why)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.token.new", h->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    /* Readable by the group of its boxed children, before it holds anything. */
    if (fd != -1 && h->gid != (gid_t)-1
        && (fchown(fd, (uid_t)-1, h->gid) == -1 || fchmod(fd, 0640) == -1)) {
        int e = errno;
        close(fd);
        fd = -1;
        errno = e;
    }
    size_t done = 0;
    while (fd != -1 && done < x->len) {
        ssize_t w = write(fd, x->token + done, x->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    int err = fd == -1 ? errno : done < x->len ? errno : 0;
    if (fd != -1 && close(fd) == -1 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, h->file) == -1)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        *why = strerror(err != 0 ? err : EIO);
        return -1;
    }
    auth_held_wipe(&h->token, &h->token_len);
    h->token = xstrndup(x->token, x->len);
    h->token_len = x->len;
    h->expires_ms = x->expires_in_s >= 0 ? util_now_ms() + (uint64_t)x->expires_in_s * 1000u : 0;
    return 0;
}

void
auth_held_seen(struct auth_held *h, const char *authorization)
{
    if (h == NULL)
        return;
    size_t n = 0;
    const char *tok = auth_bearer_token(authorization, &n);
    if (tok == NULL || n == 0
        || (h->subject != NULL && h->len == n && crypto_equal(h->subject, tok, n)))
        return;
    auth_held_wipe(&h->subject, &h->len);
    h->subject = xstrndup(tok, n);
    h->len = n;
}

static void auth_held_renew(void *arg);

static void
auth_held_arm(struct auth_held *h, uint64_t delay_ms)
{
    loop_timer_del(h->timer);
    h->timer = loop_timer_add(h->l, delay_ms, auth_held_renew, h);
}

/* The next renewal: renew_before_s ahead of the token's expiry, at least 1 s from now. */
static uint64_t
auth_held_next(const struct auth_held *h)
{
    uint64_t now = util_now_ms(), before = (*h->srv)->token_exchange_renew_before_s * 1000u;
    return h->expires_ms > now + before + 1000 ? h->expires_ms - before - now : 1000;
}

/* The owner cannot keep its token: its callback (which may close h) says why. */
static void
auth_held_fail(struct auth_held *h, const char *why)
{
    char copy[200];
    snprintf(copy, sizeof copy, "%s", why);
    h->end(h->arg, copy);
}

static void
auth_held_renewed(void *arg, struct auth_exchanged *res)
{
    struct auth_held *h = arg;
    h->x = NULL;
    const char *why = NULL;
    const char *name = (*h->srv)->name;
    if (res->status == AUTH_EXCHANGE_OK && auth_held_write(h, res, &why) == 0) {
        log_info(h->tag, "token for [server:%s] renewed%s", name,
                 h->expires_ms != 0 ? "" : " (no expires_in: not renewed again)");
        if (h->expires_ms != 0)
            auth_held_arm(h, auth_held_next(h));
        auth_exchanged_free(res);
    } else if (res->status == AUTH_EXCHANGE_OK) {
        log_warn(h->tag, "token for [server:%s]: its file cannot be written (%s)", name, why);
        auth_held_arm(h, 1000);
        auth_exchanged_free(res);
    } else if (res->status != AUTH_EXCHANGE_REFUSED && util_now_ms() + 1000 < h->expires_ms) {
        log_info(h->tag, "token for [server:%s] not renewed yet (%s): again in 1 s", name,
                 res->why);
        auth_held_arm(h, 1000);
        auth_exchanged_free(res);
    } else {
        char w[sizeof res->why];
        snprintf(w, sizeof w, "%s", res->why);
        auth_exchanged_free(res);
        auth_held_fail(h, w);
    }
}

static void
auth_held_renew(void *arg)
{
    struct auth_held *h = arg;
    h->timer = NULL;
    if (h->x != NULL)
        return;
    if (h->subject == NULL || *h->a == NULL) {
        auth_held_fail(h, "no client token to exchange");
        return;
    }
    struct auth_exchanged *now = NULL;
    h->x = auth_exchange_start(*h->a, *h->srv, h->subject, h->len, auth_held_renewed, h, &now);
    if (h->x == NULL)
        auth_held_renewed(h, now);
}

struct auth_held *
auth_held_open(const struct auth_held_params *hp, const struct auth_exchanged *x, const char **why)
{
    struct auth_held *h = xcalloc(1, sizeof(*h));
    h->a = hp->a;
    h->l = hp->l;
    h->srv = hp->srv;
    h->end = hp->end;
    h->arg = hp->arg;
    h->gid = (gid_t)-1;
    snprintf(h->tag, sizeof h->tag, "%s", hp->tag != NULL ? hp->tag : "");
    auth_held_seen(h, hp->authorization);
    const char *name = (*h->srv)->name;
    int n = snprintf(h->dir, sizeof h->dir, "%s/mcpgw-token-XXXXXX", auth_held_base());
    const char *err = NULL;
    if (n < 0 || (size_t)n >= sizeof h->dir || mkdtemp(h->dir) == NULL) {
        log_warn(h->tag, "token for [server:%s]: no private directory under %s: %s", name,
                 auth_held_base(), strerror(errno));
        h->dir[0] = '\0';
    } else {
        snprintf(h->file, sizeof h->file, "%s/token", h->dir);
        if (auth_held_write(h, x, &err) == 0)
            return h;
        log_warn(h->tag, "token for [server:%s]: %s: %s", name, h->file, err);
    }
    auth_held_close(h);
    *why = "the gateway cannot keep the exchanged token (its log says why)";
    return NULL;
}

void
auth_held_env(const struct auth_held *h, char **env)
{
    const char *var = (*h->srv)->token_exchange_env;
    size_t vlen = strlen(var), len = vlen + h->token_len + 2;
    env[0] = xmalloc(len);
    memcpy(env[0], var, vlen);
    env[0][vlen] = '=';
    memcpy(env[0] + vlen + 1, h->token, h->token_len);
    env[0][len - 1] = '\0';
    len = vlen + strlen(h->file) + 8;
    env[1] = xmalloc(len);
    snprintf(env[1], len, "%s_FILE=%s", var, h->file);
}

const struct sandbox_own *
auth_held_own(struct auth_held *h, struct sandbox_own *own, bool *failed)
{
    *failed = false;
    if (h == NULL)
        return NULL;
    if (h->gid == (gid_t)-1) {
        gid_t g = sandbox_group_new();
        if (g != (gid_t)-1) {
            /* The file first: the directory opens to the group once what it holds is its. */
            if (chown(h->file, (uid_t)-1, g) == -1 || chmod(h->file, 0640) == -1
                || chown(h->dir, (uid_t)-1, g) == -1 || chmod(h->dir, 0750) == -1) {
                log_warn(h->tag, "token for [server:%s]: %s: its group: %s", (*h->srv)->name,
                         h->dir, strerror(errno));
                *failed = true;
                return NULL;
            }
            h->gid = g;
        }
    }
    own->dir = h->dir;
    own->gid = h->gid;
    return own;
}

void
auth_held_start(struct auth_held *h)
{
    if (h != NULL && h->expires_ms != 0 && h->timer == NULL && h->x == NULL)
        auth_held_arm(h, auth_held_next(h));
}

void
auth_held_close(struct auth_held *h)
{
    if (h == NULL)
        return;
    loop_timer_del(h->timer);
    auth_exchange_cancel(h->x);
    auth_held_wipe(&h->subject, &h->len);
    auth_held_wipe(&h->token, &h->token_len);
    if (h->dir[0] != '\0') {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.token.new", h->dir);
        unlink(tmp);
        if (h->file[0] != '\0' && unlink(h->file) == -1 && errno != ENOENT)
            log_warn(h->tag, "%s: %s", h->file, strerror(errno));
        if (rmdir(h->dir) == -1)
            log_warn(h->tag, "%s: %s", h->dir, strerror(errno));
    }
    free(h);
}
