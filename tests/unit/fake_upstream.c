/* SPDX-License-Identifier: MIT */
/*
 * A fake of upstream.h for the session tests: no process, no pipes. Every message the owner sends
 * is "read" by the child at once and kept (one reference each) for the test to inspect; lines and
 * the child's end are injected by the test. It keeps the real contract and is no more lenient:
 * upstream_send refuses once the child is gone or closing, a failed write is reported through
 * gone_cb on a deferred call of the loop (never inside upstream_send, never after upstream_close),
 * at most once, and no line reaches a gone or closed upstream. It does not model back-pressure on
 * stdout, stdin flushing after close, or the stop ladder.
 */
#include "fake_upstream.h"

#include <stdlib.h>
#include <string.h>

#include "loop.h"
#include "msg.h"
#include "util.h"

struct upstream {
    struct loop *l;
    pid_t pid;
    char *argv0, *tag;
    char **envp; /* what it was started with (copied), NULL-terminated */
    size_t stdin_max, stdin_reserve;
    upstream_line_cb *line_cb;
    upstream_gone_cb *gone_cb;
    void *arg;
    struct msg **sent; /* what the child read, one reference each */
    size_t nsent, capsent;
    struct msg **waiting; /* control messages queued while full: read once it is not */
    size_t nwaiting, waiting_bytes;
    bool full, fail_next, gone, closed, paused;
    const char *gone_reason; /* static */
    char *close_reason;
    unsigned gone_calls;
    unsigned refused;      /* sends refused: gone, closed or full */
    struct upstream *next; /* every fake, newest first */
};

static struct {
    struct upstream *all;
    const char *fail_spawn;
    unsigned misuse;
    size_t live;
    pid_t next_pid;
} F;

const char upstream_no_fds[] = "out of file descriptors";

/* A call the owner may not make after upstream_close. */
static bool
fake_upstream_check(const struct upstream *u)
{
    if (u->closed)
        F.misuse++;
    return !u->closed;
}

struct upstream *
upstream_spawn(struct loop *l, const struct upstream_params *p, upstream_line_cb *line_cb,
               upstream_gone_cb *gone_cb, void *arg, const char **errstr)
{
    if (F.fail_spawn != NULL) {
        *errstr = F.fail_spawn;
        F.fail_spawn = NULL;
        return NULL;
    }
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->l = l;
    u->pid = 100000 + ++F.next_pid;
    u->argv0 = xstrdup(p->argv[0]);
    u->tag = xstrdup(p->tag != NULL ? p->tag : "-");
    size_t n = 0;
    while (p->envp != NULL && p->envp[n] != NULL)
        n++;
    u->envp = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        u->envp[i] = xstrdup(p->envp[i]);
    u->stdin_max = p->stdin_max_bytes;
    u->stdin_reserve = p->stdin_reserve_bytes;
    u->line_cb = line_cb;
    u->gone_cb = gone_cb;
    u->arg = arg;
    u->next = F.all;
    F.all = u;
    F.live++;
    return u;
}

/* The deferred report: what the real upstream_report does, with the fake never freed under it. */
static void
fake_upstream_report(void *arg)
{
    struct upstream *u = arg;
    if (u->closed || u->gone_cb == NULL)
        return;
    u->gone_calls++;
    u->gone_cb(u->gone_reason, u->arg);
}

void
fake_upstream_gone(struct upstream *u, const char *reason)
{
    if (u->gone)
        return;
    u->gone = true;
    u->gone_reason = reason;
    loop_defer(u->l, fake_upstream_report, u);
}

static void
fake_upstream_read(struct upstream *u, struct msg *m)
{
    if (u->nsent == u->capsent) {
        u->capsent = u->capsent ? 2 * u->capsent : 16;
        u->sent = xrealloc(u->sent, u->capsent * sizeof(*u->sent));
    }
    u->sent[u->nsent++] = m;
}

/* Queues m within ceiling (room past a full queue: what control messages may use). */
static int
fake_upstream_queue(struct upstream *u, struct msg *m, size_t room)
{
    if (!fake_upstream_check(u) || u->gone || (u->full && u->waiting_bytes + m->len > room)) {
        u->refused++;
        return -1;
    }
    if (u->fail_next) {
        /* Queued, then the write fails: the stdin queue is dropped with the message in it. */
        u->fail_next = false;
        fake_upstream_gone(u, "child stopped reading its stdin");
        return 0;
    }
    if (u->full || u->nwaiting > 0) {
        /* Behind what fills the queue: read once the child reads on (in order). */
        u->waiting = xrealloc(u->waiting, (u->nwaiting + 1) * sizeof(*u->waiting));
        u->waiting[u->nwaiting++] = msg_ref(m);
        u->waiting_bytes += m->len;
        return 0;
    }
    fake_upstream_read(u, msg_ref(m));
    return 0;
}

int
upstream_send(struct upstream *u, struct msg *m)
{
    return fake_upstream_queue(u, m, 0);
}

int
upstream_send_control_iov(struct upstream *u, const struct iovec *iov, int n)
{
    struct msg *m = msg_concat(iov, n);
    int rc = fake_upstream_queue(u, m, u->stdin_reserve);
    if (rc == -1 && !u->gone && !u->closed)
        fake_upstream_gone(u, "child stopped reading its stdin"); /* past the reserve: stuck */
    msg_unref(m);
    return rc;
}

int
upstream_send_iov(struct upstream *u, const struct iovec *iov, int n)
{
    struct msg *m = msg_concat(iov, n);
    int rc = upstream_send(u, m);
    msg_unref(m);
    return rc;
}

void
upstream_pause(struct upstream *u, bool paused)
{
    if (fake_upstream_check(u))
        u->paused = paused;
}

void
upstream_close(struct upstream *u, const char *reason)
{
    if (u == NULL || u->closed)
        return;
    u->closed = true;
    u->close_reason = xstrdup(reason != NULL ? reason : "");
    u->line_cb = NULL;
    u->gone_cb = NULL;
    F.live--;
}

pid_t
upstream_pid(const struct upstream *u)
{
    fake_upstream_check(u);
    return u->pid;
}

bool
upstream_writable(const struct upstream *u)
{
    fake_upstream_check(u);
    return !u->gone && !u->closed;
}

size_t
upstream_queued_bytes(const struct upstream *u)
{
    fake_upstream_check(u);
    return u->full ? u->stdin_max + u->waiting_bytes : 0;
}

/* Nothing is held back here: a send is written (or refused) at once. */
void
upstream_write_now(struct upstream *u)
{
    fake_upstream_check(u);
}

size_t
upstream_live_count(void)
{
    return F.live;
}

/* --- the test's side --------------------------------------------------------------------- */

void
fake_upstream_fail_spawn(const char *errstr)
{
    F.fail_spawn = errstr;
}

struct upstream *
fake_upstream_last(void)
{
    return F.all;
}

const char *
fake_upstream_argv0(const struct upstream *u)
{
    return u->argv0;
}

const char *
fake_upstream_env(const struct upstream *u, const char *name)
{
    size_t n = strlen(name);
    for (char **e = u->envp; *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

const char *
fake_upstream_tag(const struct upstream *u)
{
    return u->tag;
}

size_t
fake_upstream_stdin_max(const struct upstream *u)
{
    return u->stdin_max;
}

size_t
fake_upstream_sent_count(const struct upstream *u)
{
    return u->nsent;
}

const char *
fake_upstream_sent(const struct upstream *u, size_t i, size_t *len)
{
    if (i >= u->nsent)
        return NULL;
    if (len != NULL)
        *len = u->sent[i]->len;
    return u->sent[i]->data;
}

void
fake_upstream_set_full(struct upstream *u, bool full)
{
    u->full = full;
    if (full || u->gone || u->closed)
        return;
    /* The child reads on: what waited behind the full queue first. */
    for (size_t i = 0; i < u->nwaiting; i++)
        fake_upstream_read(u, u->waiting[i]);
    u->nwaiting = u->waiting_bytes = 0;
}

size_t
fake_upstream_stdin_reserve(const struct upstream *u)
{
    return u->stdin_reserve;
}

void
fake_upstream_fail_next_write(struct upstream *u)
{
    u->fail_next = true;
}

bool
fake_upstream_fail_pending(const struct upstream *u)
{
    return u->fail_next;
}

bool
fake_upstream_line(struct upstream *u, const char *line)
{
    size_t len = strlen(line);
    if (u->closed || u->gone || u->line_cb == NULL || len == 0)
        return false; /* the real one skips empty lines too */
    /* Exactly len bytes, not NUL-terminated: a read past the line is caught by ASan. */
    char *copy = xmemdup(line, len);
    u->line_cb(copy, len, NULL, u->arg);
    free(copy);
    return true;
}

bool
fake_upstream_gone_seen(const struct upstream *u)
{
    return u->gone;
}

bool
fake_upstream_closed(const struct upstream *u)
{
    return u->closed;
}

const char *
fake_upstream_close_reason(const struct upstream *u)
{
    return u->close_reason;
}

bool
fake_upstream_paused(const struct upstream *u)
{
    return u->paused;
}

unsigned
fake_upstream_gone_calls(const struct upstream *u)
{
    return u->gone_calls;
}

unsigned
fake_upstream_refused(const struct upstream *u)
{
    return u->refused;
}

unsigned
fake_upstream_misuse(void)
{
    return F.misuse;
}

void
fake_upstream_free_all(void)
{
    while (F.all != NULL) {
        struct upstream *u = F.all;
        F.all = u->next;
        for (size_t i = 0; i < u->nsent; i++)
            msg_unref(u->sent[i]);
        free(u->sent);
        for (size_t i = 0; i < u->nwaiting; i++)
            msg_unref(u->waiting[i]);
        free(u->waiting);
        free(u->argv0);
        free(u->tag);
        for (char **e = u->envp; e != NULL && *e != NULL; e++)
            free(*e);
        free(u->envp);
        free(u->close_reason);
        free(u);
    }
    memset(&F, 0, sizeof(F));
}

void
upstream_server_seen(const char *server)
{
    (void)server;
}
