/* SPDX-License-Identifier: MIT */
/*
 * loop: timers fire in due order (ties in insertion order) and a deleted timer never fires; fd
 * watches fire on readiness, survive being deleted from inside a callback, and can be modified;
 * the prepare hook bounds the wait, the after hook runs after every wake-up and loop_wake skips
 * the block; deferred calls run after the caller returned, in order, those they queue on the next
 * turn; signals arrive through loop_signal_add. Nothing sleeps: every run is stopped from a
 * callback, with a guard timer that fails the test instead of hanging. Through loop.h only.
 */
#include <sys/epoll.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "loop.h"

TestSuite(loop, .timeout = 30);

#define GUARD_MS 5000

static struct loop *L;
static struct loop_timer *guard;
static bool guard_fired;

static void
guard_cb(void *arg)
{
    (void)arg;
    guard = NULL;
    guard_fired = true;
    loop_stop(L);
}

static void
fx_init(void)
{
    L = loop_new();
    cr_assert_not_null(L);
    guard = NULL;
    guard_fired = false;
}

static void
fx_fini(void)
{
    loop_free(L);
    L = NULL;
}

/* Runs the loop until a callback stops it, failing after GUARD_MS. */
static void
run_guarded(void)
{
    guard_fired = false;
    guard = loop_timer_add(L, GUARD_MS, guard_cb, NULL);
    loop_run(L);
    cr_assert_not(guard_fired, "the loop was not stopped within %d ms", GUARD_MS);
    loop_timer_del(guard);
    guard = NULL;
}

static void
stop_cb(void *arg)
{
    (void)arg;
    loop_stop(L);
}

/* --- timers ----------------------------------------------------------------------------- */

struct order {
    int got[512];
    int n;
    int want_n;
};

struct mark {
    struct order *o;
    int tag;
    bool fired;
};

static void
mark_cb(void *arg)
{
    struct mark *m = arg;
    cr_assert_not(m->fired, "timer %d fired twice", m->tag);
    m->fired = true;
    cr_assert_lt(m->o->n, (int)ARRAY_LEN(m->o->got));
    m->o->got[m->o->n++] = m->tag;
    if (m->o->n == m->o->want_n)
        loop_stop(L);
}

Test(loop, timers_fire_in_due_order, .init = fx_init, .fini = fx_fini)
{
    static const uint64_t delays[] = { 30, 10, 20, 0, 10, 0 };
    static const int want[] = { 3, 5, 1, 4, 2, 0 };
    struct order o = { .want_n = 6 };
    struct mark m[6];
    uint64_t start = util_now_us();
    for (int i = 0; i < 6; i++) {
        m[i] = (struct mark){ &o, i, false };
        cr_assert_not_null(loop_timer_add(L, delays[i], mark_cb, &m[i]));
    }
    run_guarded();
    uint64_t elapsed = util_now_us() - start;
    cr_assert_eq(o.n, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(o.got[i], want[i], "position %d: timer %d, want %d", i, o.got[i], want[i]);
    /* The last one is due 30 ms out (whole-ms clock: allow 1 ms of truncation). */
    cr_assert_geq(elapsed, 29000, "fired after %llu us", (unsigned long long)elapsed);
}

Test(loop, many_timers_heap_order_with_deletes, .init = fx_init, .fini = fx_fini)
{
    enum { N = 300 };
    static struct mark m[N];
    static struct loop_timer *t[N];
    struct order o = { 0 };
    int live = 0;
    for (int i = 0; i < N; i++) {
        uint64_t delay = (uint64_t)((i * 7919) % 4) * 10;
        m[i] = (struct mark){ &o, i, false };
        t[i] = loop_timer_add(L, delay, mark_cb, &m[i]);
    }
    /* Delete every fifth from the middle of the heap, and the first and last added. */
    for (int i = 0; i < N; i++) {
        if (i % 5 == 2 || i == 0 || i == N - 1)
            loop_timer_del(t[i]);
        else
            live++;
    }
    o.want_n = live;
    run_guarded();
    cr_assert_eq(o.n, live);
    /* Due order: by delay, and by insertion order within one delay. */
    int k = 0;
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < N; i++) {
            if (i % 5 == 2 || i == 0 || i == N - 1 || (i * 7919) % 4 != d)
                continue;
            cr_assert_eq(o.got[k], i, "position %d: timer %d, want %d", k, o.got[k], i);
            k++;
        }
    for (int i = 0; i < N; i++)
        if (i % 5 == 2 || i == 0 || i == N - 1)
            cr_assert_not(m[i].fired, "deleted timer %d fired", i);
}

Test(loop, deleted_timer_never_fires, .init = fx_init, .fini = fx_fini)
{
    struct order o = { .want_n = 1000 };
    struct mark x = { &o, 1, false };
    struct loop_timer *t = loop_timer_add(L, 5, mark_cb, &x);
    loop_timer_del(t);
    loop_timer_del(NULL);
    loop_timer_add(L, 20, stop_cb, NULL);
    run_guarded();
    cr_assert_not(x.fired);
    cr_assert_eq(o.n, 0);
}

struct killer {
    struct loop_timer *victim;
    bool fired;
};

static void
killer_cb(void *arg)
{
    struct killer *k = arg;
    k->fired = true;
    loop_timer_del(k->victim);
    k->victim = NULL;
}

Test(loop, timer_deletes_another_due_at_the_same_time, .init = fx_init, .fini = fx_fini)
{
    struct order o = { .want_n = 1000 };
    struct mark victim = { &o, 1, false }, later = { &o, 2, false };
    struct killer k1 = { 0 }, k2 = { 0 };
    loop_timer_add(L, 0, killer_cb, &k1);
    k1.victim = loop_timer_add(L, 0, mark_cb, &victim); /* due now, behind the killer */
    loop_timer_add(L, 0, killer_cb, &k2);
    k2.victim = loop_timer_add(L, 10, mark_cb, &later);
    loop_timer_add(L, 20, stop_cb, NULL);
    run_guarded();
    cr_assert(k1.fired);
    cr_assert(k2.fired);
    cr_assert_not(victim.fired);
    cr_assert_not(later.fired);
}

struct rearm {
    int left;
};

static void
rearm_cb(void *arg)
{
    struct rearm *r = arg;
    if (--r->left == 0)
        loop_stop(L);
    else
        loop_timer_add(L, 0, rearm_cb, r);
}

Test(loop, timer_added_from_a_timer, .init = fx_init, .fini = fx_fini)
{
    struct rearm r = { 50 };
    loop_timer_add(L, 0, rearm_cb, &r);
    run_guarded();
    cr_assert_eq(r.left, 0);
}

Test(loop, run_again_after_stop, .init = fx_init, .fini = fx_fini)
{
    for (int i = 0; i < 3; i++) {
        struct order o = { .want_n = 1 };
        struct mark m = { &o, i, false };
        loop_timer_add(L, 1, mark_cb, &m);
        run_guarded();
        cr_assert(m.fired, "run %d", i);
    }
}

Test(loop, free_with_pending_timers, .init = fx_init)
{
    for (int i = 0; i < 100; i++)
        loop_timer_add(L, 1000 + (uint64_t)i, stop_cb, NULL);
    loop_free(L); /* LeakSanitizer checks the timers went with it */
    L = NULL;
}

/* --- fd watches -------------------------------------------------------------------------- */

struct io {
    int fds[2];
    struct loop_watch *w;
    int calls;
    uint32_t events;
    bool written;
    char byte;
    bool stop;
};

static void
make_pipe(struct io *io)
{
    cr_assert_eq(pipe2(io->fds, O_NONBLOCK | O_CLOEXEC), 0, "pipe2: %s", strerror(errno));
}

static void
close_pipe(struct io *io)
{
    close(io->fds[0]);
    close(io->fds[1]);
}

static void
write_cb(void *arg)
{
    struct io *io = arg;
    io->written = true;
    cr_assert_eq(write(io->fds[1], "z", 1), 1);
}

static void
read_cb(int fd, uint32_t events, void *arg)
{
    struct io *io = arg;
    cr_assert(io->written, "readable before anything was written");
    cr_assert_eq(fd, io->fds[0]);
    io->calls++;
    io->events = events;
    cr_assert_eq(read(fd, &io->byte, 1), 1);
    loop_stop(L);
}

Test(loop, watch_fires_on_write, .init = fx_init, .fini = fx_fini)
{
    struct io io = { 0 };
    make_pipe(&io);
    io.w = loop_watch_add(L, io.fds[0], EPOLLIN, read_cb, &io);
    cr_assert_not_null(io.w);
    loop_timer_add(L, 5, write_cb, &io);
    run_guarded();
    cr_assert_eq(io.calls, 1);
    cr_assert(io.events & EPOLLIN, "events 0x%x", io.events);
    cr_assert_eq(io.byte, 'z');
    loop_watch_del(io.w);
    close_pipe(&io);
}

Test(loop, watch_add_refused, .init = fx_init, .fini = fx_fini)
{
    errno = 0;
    cr_assert_null(loop_watch_add(L, -1, EPOLLIN, read_cb, NULL));
    cr_assert_eq(errno, EBADF);
    /* A regular file cannot be polled by epoll. */
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    errno = 0;
    cr_assert_null(loop_watch_add(L, fileno(f), EPOLLIN, read_cb, NULL));
    cr_assert_eq(errno, EPERM);
    fclose(f);
}

static void
del_self_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct io *io = arg;
    io->calls++;
    loop_watch_del(io->w); /* the byte stays unread: level-triggered, it would fire again */
    loop_watch_del(io->w); /* a second delete in the same batch is harmless */
}

Test(loop, watch_del_inside_own_callback, .init = fx_init, .fini = fx_fini)
{
    struct io io = { 0 };
    make_pipe(&io);
    cr_assert_eq(write(io.fds[1], "a", 1), 1);
    io.w = loop_watch_add(L, io.fds[0], EPOLLIN, del_self_cb, &io);
    cr_assert_not_null(io.w);
    loop_timer_add(L, 20, stop_cb, NULL);
    run_guarded();
    cr_assert_eq(io.calls, 1);
    close_pipe(&io);
}

static struct io pair[2];

static void
del_both_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct io *io = arg;
    io->calls++;
    loop_watch_del(pair[0].w);
    loop_watch_del(pair[1].w);
}

Test(loop, watch_del_of_another_in_the_same_batch, .init = fx_init, .fini = fx_fini)
{
    for (int i = 0; i < 2; i++) {
        memset(&pair[i], 0, sizeof pair[i]);
        make_pipe(&pair[i]);
        cr_assert_eq(write(pair[i].fds[1], "a", 1), 1);
    }
    /* Both are ready in the first wait: whichever runs first deletes the other. */
    for (int i = 0; i < 2; i++) {
        pair[i].w = loop_watch_add(L, pair[i].fds[0], EPOLLIN, del_both_cb, &pair[i]);
        cr_assert_not_null(pair[i].w);
    }
    loop_timer_add(L, 20, stop_cb, NULL);
    run_guarded();
    cr_assert_eq(pair[0].calls + pair[1].calls, 1, "calls %d + %d", pair[0].calls, pair[1].calls);
    close_pipe(&pair[0]);
    close_pipe(&pair[1]);
}

static void
out_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    struct io *io = arg;
    io->calls++;
    io->events = events;
    cr_assert_eq(loop_watch_mod(io->w, 0), 0);
    loop_stop(L);
}

Test(loop, watch_mod_changes_events, .init = fx_init, .fini = fx_fini)
{
    struct io io = { 0 };
    make_pipe(&io);
    /* The write end is always writable, but nothing is asked for yet. */
    io.w = loop_watch_add(L, io.fds[1], 0, out_cb, &io);
    cr_assert_not_null(io.w);
    loop_timer_add(L, 10, stop_cb, NULL);
    run_guarded();
    cr_assert_eq(io.calls, 0);
    cr_assert_eq(loop_watch_mod(io.w, EPOLLOUT), 0);
    run_guarded();
    cr_assert_eq(io.calls, 1);
    cr_assert(io.events & EPOLLOUT);
    /* Disarmed again in the callback. */
    loop_timer_add(L, 10, stop_cb, NULL);
    run_guarded();
    cr_assert_eq(io.calls, 1);
    loop_watch_del(io.w);
    close_pipe(&io);
}

static void
hup_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    struct io *io = arg;
    io->calls++;
    io->events = events;
    loop_watch_del(io->w);
    loop_stop(L);
}

Test(loop, watch_sees_hangup, .init = fx_init, .fini = fx_fini)
{
    struct io io = { 0 };
    make_pipe(&io);
    io.w = loop_watch_add(L, io.fds[0], EPOLLIN, hup_cb, &io);
    close(io.fds[1]);
    run_guarded();
    cr_assert_eq(io.calls, 1);
    cr_assert(io.events & EPOLLHUP, "events 0x%x", io.events);
    close(io.fds[0]);
}

/* --- hooks ------------------------------------------------------------------------------- */

struct hooks {
    int prepares;
    int afters;
    int stop_at;
    int bound;
};

static int
prepare_cb(void *arg)
{
    struct hooks *h = arg;
    h->prepares++;
    if (h->prepares == h->stop_at)
        loop_stop(L);
    return h->bound;
}

static void
after_cb(void *arg)
{
    struct hooks *h = arg;
    h->afters++;
    cr_assert_eq(h->afters, h->prepares, "one after per wait");
}

Test(loop, prepare_bounds_the_wait, .init = fx_init, .fini = fx_fini)
{
    /* Nothing to wait for: without the prepare bound, epoll_wait would block for good. */
    struct hooks h = { .stop_at = 5, .bound = 0 };
    loop_set_hooks(L, prepare_cb, after_cb, &h);
    loop_run(L);
    cr_assert_eq(h.prepares, 5);
    cr_assert_eq(h.afters, 5);
}

Test(loop, prepare_bound_below_a_timer, .init = fx_init, .fini = fx_fini)
{
    struct hooks h = { .stop_at = 3, .bound = 10 };
    loop_set_hooks(L, prepare_cb, after_cb, &h);
    uint64_t start = util_now_ms();
    run_guarded(); /* the guard timer is 5 s out: the 10 ms bound wins */
    cr_assert_eq(h.prepares, 3);
    cr_assert_lt(util_now_ms() - start, 2000);
}

Test(loop, timer_bounds_an_unlimited_prepare, .init = fx_init, .fini = fx_fini)
{
    struct hooks h = { .stop_at = 1000000, .bound = -1 };
    loop_set_hooks(L, prepare_cb, after_cb, &h);
    loop_timer_add(L, 10, stop_cb, NULL);
    run_guarded();
    cr_assert_geq(h.prepares, 1);
    cr_assert_eq(h.afters, h.prepares);
}

static void
wake_after_cb(void *arg)
{
    struct hooks *h = arg;
    h->afters++;
    if (h->afters < h->stop_at)
        loop_wake(L);
    else
        loop_stop(L);
}

Test(loop, wake_skips_the_block, .init = fx_init, .fini = fx_fini)
{
    /* No prepare hook, no timer, no events: only loop_wake keeps the loop turning. */
    struct hooks h = { .stop_at = 5 };
    loop_set_hooks(L, NULL, wake_after_cb, &h);
    loop_wake(L);
    loop_run(L);
    cr_assert_eq(h.afters, 5);
}

/* --- deferred calls ---------------------------------------------------------------------- */

struct deferred {
    int order[8];
    int n;
    bool inside; /* set while the queuing callback runs: a deferred call must not see it */
    int afters;
    int turn_of[8]; /* the after-hook count when each call ran */
};

static struct deferred D;

static void
defer_mark_cb(void *arg)
{
    int tag = (int)(intptr_t)arg;
    cr_assert_not(D.inside, "deferred call %d ran inside the call that queued it", tag);
    cr_assert_lt(D.n, 8);
    D.turn_of[D.n] = D.afters;
    D.order[D.n++] = tag;
}

static void
defer_from_defer_cb(void *arg)
{
    defer_mark_cb(arg);
    loop_defer(L, defer_mark_cb, (void *)(intptr_t)9); /* the next turn's */
}

static void
defer_queue_cb(void *arg)
{
    (void)arg;
    D.inside = true;
    loop_defer(L, defer_mark_cb, (void *)(intptr_t)1);
    loop_defer(L, defer_from_defer_cb, (void *)(intptr_t)2);
    loop_defer(L, defer_mark_cb, (void *)(intptr_t)3);
    cr_assert_eq(D.n, 0, "a deferred call ran inside loop_defer");
    D.inside = false;
}

static void
defer_after_cb(void *arg)
{
    (void)arg;
    D.afters++;
    if (D.n == 4)
        loop_stop(L);
}

Test(loop, deferred_calls_run_later_in_order, .init = fx_init, .fini = fx_fini)
{
    memset(&D, 0, sizeof(D));
    loop_set_hooks(L, NULL, defer_after_cb, NULL);
    loop_timer_add(L, 0, defer_queue_cb, NULL);
    cr_assert_eq(loop_timers_pending(L), 1);
    cr_assert_eq(loop_deferred_pending(L), 0);
    run_guarded(); /* no fd, no timer left: only the queued call may keep the wait from blocking */
    cr_assert_eq(D.n, 4);
    cr_assert_eq(D.order[0], 1);
    cr_assert_eq(D.order[1], 2);
    cr_assert_eq(D.order[2], 3);
    cr_assert_eq(D.order[3], 9, "a call queued from a deferred call runs after the others");
    cr_assert_eq(D.turn_of[0], D.turn_of[2], "queued together, run in the same turn");
    cr_assert_eq(D.turn_of[3], D.turn_of[2] + 1, "queued from a deferred call: the next turn");
    cr_assert_eq(loop_deferred_pending(L), 0, "every deferred call ran");
}

/* The after hook defers a call (a free, say) and stops the loop in the same turn. */
static void
defer_and_stop_cb(void *arg)
{
    (void)arg;
    D.afters++;
    if (D.afters == 1) {
        loop_defer(L, defer_mark_cb, (void *)(intptr_t)5);
        loop_stop(L);
    }
}

Test(loop, deferred_calls_run_though_the_turn_stopped, .init = fx_init, .fini = fx_fini)
{
    memset(&D, 0, sizeof(D));
    loop_set_hooks(L, NULL, defer_and_stop_cb, NULL);
    loop_wake(L);
    run_guarded();
    cr_assert_eq(D.n, 1, "what the stopping turn deferred ran before loop_run returned");
    cr_assert_eq(D.order[0], 5);
    cr_assert_eq(loop_deferred_pending(L), 0);
}

Test(loop, deferred_calls_dropped_when_freed, .init = fx_init)
{
    memset(&D, 0, sizeof(D));
    loop_defer(L, defer_mark_cb, (void *)(intptr_t)1);
    loop_defer(L, defer_mark_cb, (void *)(intptr_t)2);
    cr_assert_eq(loop_deferred_pending(L), 2);
    loop_free(L); /* LeakSanitizer fails the test if the queued call is not freed */
    L = NULL;
    cr_assert_eq(D.n, 0, "loop_free runs no deferred call");
}

/* --- signals ----------------------------------------------------------------------------- */

struct sig {
    int got[4];
    int n;
    int want_n;
};

static void
sig_cb(int signo, void *arg)
{
    struct sig *s = arg;
    cr_assert_lt(s->n, 4);
    s->got[s->n++] = signo;
    if (s->n == s->want_n)
        loop_stop(L);
}

Test(loop, signal_reaches_callback, .init = fx_init, .fini = fx_fini)
{
    struct sig s = { .want_n = 1 };
    cr_assert_eq(loop_signal_add(L, SIGUSR1, sig_cb, &s), 0);
    cr_assert_eq(raise(SIGUSR1), 0); /* blocked now: it waits in the signalfd */
    run_guarded();
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.got[0], SIGUSR1);
}

Test(loop, two_signals_one_signalfd, .init = fx_init, .fini = fx_fini)
{
    struct sig s1 = { .want_n = 1000 }, s2 = { .want_n = 1000 };
    cr_assert_eq(loop_signal_add(L, SIGUSR1, sig_cb, &s1), 0);
    cr_assert_eq(loop_signal_add(L, SIGUSR2, sig_cb, &s2), 0);
    cr_assert_eq(raise(SIGUSR2), 0);
    cr_assert_eq(raise(SIGUSR1), 0);
    loop_timer_add(L, 20, stop_cb, NULL);
    run_guarded();
    cr_assert_eq(s1.n, 1);
    cr_assert_eq(s1.got[0], SIGUSR1);
    cr_assert_eq(s2.n, 1);
    cr_assert_eq(s2.got[0], SIGUSR2);
}

Test(loop, signal_add_refuses_bad_numbers, .init = fx_init, .fini = fx_fini)
{
    struct sig s = { 0 };
    cr_assert_eq(loop_signal_add(L, 0, sig_cb, &s), -1);
    cr_assert_eq(loop_signal_add(L, -1, sig_cb, &s), -1);
    cr_assert_eq(loop_signal_add(L, 65, sig_cb, &s), -1);
}
