/* SPDX-License-Identifier: MIT */
/*
 * One thread, one epoll (src/README.md, section 1). fds are level-triggered. Timers are a binary
 * min-heap keyed by due time; signals arrive through one signalfd. libmicrohttpd's own epoll fd is
 * just one more watched fd; the hooks let http.c bound each wait by MHD_get_timeout() and call
 * MHD_run() after every wake-up.
 */
#include "loop.h"

#include <sys/epoll.h>
#include <sys/signalfd.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

struct loop_watch {
    struct loop *l;
    int fd;
    bool dead;
    loop_io_cb *cb;
    void *arg;
    struct loop_watch *next_dead;
};

struct loop_timer {
    struct loop *l;
    uint64_t due_ms;
    uint64_t seq; /* ties break in insertion order */
    size_t index;
    loop_timer_cb *cb;
    void *arg;
};

struct loop_defer {
    loop_defer_cb *cb;
    void *arg;
    struct loop_defer *next;
};

struct loop_sig {
    loop_signal_cb *cb;
    void *arg;
};

struct loop {
    int epfd;
    bool stop;
    bool woken;
    struct loop_timer **heap;
    size_t nheap, capheap;
    uint64_t timer_seq;
    struct loop_watch *dead;
    struct loop_defer *defer_head, **defer_tail; /* FIFO of deferred calls */
    int sigfd;
    sigset_t sigmask;
    struct loop_watch *sigwatch;
    struct loop_sig sigs[65];
    loop_prepare_cb *prepare;
    loop_after_cb *after;
    void *hook_arg;
};

struct loop *
loop_new(void)
{
    struct loop *l = xcalloc(1, sizeof(*l));
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd == -1)
        fatal("epoll_create1");
    l->sigfd = -1;
    l->defer_tail = &l->defer_head;
    sigemptyset(&l->sigmask);
    return l;
}

static void
loop_reap_dead(struct loop *l)
{
    while (l->dead != NULL) {
        struct loop_watch *w = l->dead;
        l->dead = w->next_dead;
        free(w);
    }
}

void
loop_free(struct loop *l)
{
    if (l == NULL)
        return;
    if (l->sigwatch != NULL)
        loop_watch_del(l->sigwatch);
    if (l->sigfd != -1)
        close(l->sigfd);
    loop_reap_dead(l);
    while (l->defer_head != NULL) {
        struct loop_defer *d = l->defer_head;
        l->defer_head = d->next;
        free(d);
    }
    for (size_t i = 0; i < l->nheap; i++)
        free(l->heap[i]);
    free(l->heap);
    close(l->epfd);
    free(l);
}

struct loop_watch *
loop_watch_add(struct loop *l, int fd, uint32_t events, loop_io_cb *cb, void *arg)
{
    struct loop_watch *w = xcalloc(1, sizeof(*w));
    w->l = l;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    struct epoll_event ev = { .events = events, .data.ptr = w };
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
        int saved = errno;
        free(w);
        errno = saved;
        return NULL;
    }
    return w;
}

int
loop_watch_mod(struct loop_watch *w, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = w };
    return epoll_ctl(w->l->epfd, EPOLL_CTL_MOD, w->fd, &ev);
}

void
loop_watch_del(struct loop_watch *w)
{
    if (w == NULL || w->dead)
        return;
    epoll_ctl(w->l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->dead = true;
    w->next_dead = w->l->dead;
    w->l->dead = w;
}

/* --- timers: binary min-heap ------------------------------------------------------------- */

static bool
loop_timer_before(const struct loop_timer *a, const struct loop_timer *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static void
loop_heap_set(struct loop *l, size_t i, struct loop_timer *t)
{
    l->heap[i] = t;
    t->index = i;
}

static void
loop_heap_up(struct loop *l, size_t i)
{
    struct loop_timer *t = l->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!loop_timer_before(t, l->heap[parent]))
            break;
        loop_heap_set(l, i, l->heap[parent]);
        i = parent;
    }
    loop_heap_set(l, i, t);
}

static void
loop_heap_down(struct loop *l, size_t i)
{
    struct loop_timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->nheap)
            break;
        if (c + 1 < l->nheap && loop_timer_before(l->heap[c + 1], l->heap[c]))
            c++;
        if (!loop_timer_before(l->heap[c], t))
            break;
        loop_heap_set(l, i, l->heap[c]);
        i = c;
    }
    loop_heap_set(l, i, t);
}

static void
loop_heap_remove(struct loop *l, size_t i)
{
    l->nheap--;
    if (i == l->nheap)
        return;
    loop_heap_set(l, i, l->heap[l->nheap]);
    loop_heap_down(l, i);
    loop_heap_up(l, l->heap[i]->index);
}

struct loop_timer *
loop_timer_add(struct loop *l, uint64_t delay_ms, loop_timer_cb *cb, void *arg)
{
    struct loop_timer *t = xcalloc(1, sizeof(*t));
    t->l = l;
    t->due_ms = util_now_ms() + delay_ms;
    t->seq = l->timer_seq++;
    t->cb = cb;
    t->arg = arg;
    if (l->nheap == l->capheap) {
        l->capheap = l->capheap ? l->capheap * 2 : 64;
        l->heap = xrealloc(l->heap, l->capheap * sizeof(*l->heap));
    }
    loop_heap_set(l, l->nheap++, t);
    loop_heap_up(l, t->index);
    return t;
}

void
loop_timer_del(struct loop_timer *t)
{
    if (t == NULL)
        return;
    loop_heap_remove(t->l, t->index);
    free(t);
}

static void
loop_run_timers(struct loop *l)
{
    uint64_t now = util_now_ms();
    while (l->nheap > 0 && l->heap[0]->due_ms <= now) {
        struct loop_timer *t = l->heap[0];
        loop_heap_remove(l, 0);
        loop_timer_cb *cb = t->cb;
        void *arg = t->arg;
        free(t);
        cb(arg);
    }
}

static int
loop_timer_timeout(const struct loop *l)
{
    if (l->nheap == 0)
        return -1;
    uint64_t now = util_now_ms();
    uint64_t due = l->heap[0]->due_ms;
    if (due <= now)
        return 0;
    uint64_t d = due - now;
    return d > 86400000u ? 86400000 : (int)d;
}

/* --- deferred calls ---------------------------------------------------------------------- */

void
loop_defer(struct loop *l, loop_defer_cb *cb, void *arg)
{
    struct loop_defer *d = xcalloc(1, sizeof(*d));
    d->cb = cb;
    d->arg = arg;
    *l->defer_tail = d;
    l->defer_tail = &d->next;
}

/* Runs the calls queued so far; those they queue wait for the next turn. */
static void
loop_run_deferred(struct loop *l)
{
    struct loop_defer *d = l->defer_head;
    l->defer_head = NULL;
    l->defer_tail = &l->defer_head;
    while (d != NULL) {
        struct loop_defer *next = d->next;
        d->cb(d->arg);
        free(d);
        d = next;
    }
}

size_t
loop_timers_pending(const struct loop *l)
{
    return l->nheap;
}

size_t
loop_deferred_pending(const struct loop *l)
{
    size_t n = 0;
    for (const struct loop_defer *d = l->defer_head; d != NULL; d = d->next)
        n++;
    return n;
}

/* --- signals ----------------------------------------------------------------------------- */

static void
loop_signal_read(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct loop *l = arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo < ARRAY_LEN(l->sigs) && l->sigs[si.ssi_signo].cb != NULL)
            l->sigs[si.ssi_signo].cb((int)si.ssi_signo, l->sigs[si.ssi_signo].arg);
    }
}

int
loop_signal_add(struct loop *l, int signo, loop_signal_cb *cb, void *arg)
{
    if (signo <= 0 || (size_t)signo >= ARRAY_LEN(l->sigs))
        return -1;
    sigaddset(&l->sigmask, signo);
    if (sigprocmask(SIG_BLOCK, &l->sigmask, NULL) == -1)
        return -1;
    int fd = signalfd(l->sigfd, &l->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd == -1)
        return -1;
    if (l->sigfd == -1) {
        l->sigfd = fd;
        l->sigwatch = loop_watch_add(l, fd, EPOLLIN, loop_signal_read, l);
        if (l->sigwatch == NULL)
            return -1;
    }
    l->sigs[signo].cb = cb;
    l->sigs[signo].arg = arg;
    return 0;
}

/* --- running ----------------------------------------------------------------------------- */

void
loop_set_hooks(struct loop *l, loop_prepare_cb *prepare, loop_after_cb *after, void *arg)
{
    l->prepare = prepare;
    l->after = after;
    l->hook_arg = arg;
}

void
loop_wake(struct loop *l)
{
    l->woken = true;
}

static int
loop_min_timeout(int a, int b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

void
loop_run(struct loop *l)
{
    struct epoll_event evs[128];
    l->stop = false;
    while (!l->stop) {
        int timeout = loop_timer_timeout(l);
        if (l->prepare != NULL)
            timeout = loop_min_timeout(timeout, l->prepare(l->hook_arg));
        if (l->woken || l->defer_head != NULL)
            timeout = 0;
        l->woken = false;
        int n = epoll_wait(l->epfd, evs, (int)ARRAY_LEN(evs), timeout);
        if (n == -1 && errno != EINTR)
            fatal("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct loop_watch *w = evs[i].data.ptr;
            if (!w->dead)
                w->cb(w->fd, evs[i].events, w->arg);
        }
        loop_run_timers(l);
        loop_run_deferred(l);
        if (l->after != NULL)
            l->after(l->hook_arg);
        loop_reap_dead(l);
    }
    /*
     * A stop ends the loop, not the work its last turn deferred (a retired child's free, say,
     * deferred by what the after hook did): it still runs, as deferred calls defer more at most a
     * few times over.
     */
    for (int i = 0; i < 16 && l->defer_head != NULL; i++)
        loop_run_deferred(l);
}

void
loop_stop(struct loop *l)
{
    l->stop = true;
}
