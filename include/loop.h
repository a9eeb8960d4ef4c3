/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_LOOP_H
#define MCPGW_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * The one event loop: epoll for fds, a min-heap of one-shot timers, signalfd for signals, and two
 * hooks around each wait so libmicrohttpd can bound the wait and run after every wake-up.
 * No HTTP or MCP knowledge.
 */

struct loop;
struct loop_watch;
struct loop_timer;

typedef void loop_io_cb(int fd, uint32_t events, void *arg);
typedef void loop_timer_cb(void *arg);
typedef void loop_signal_cb(int signo, void *arg);
/* Returns the longest the next wait may block, in ms, or -1 for no limit. */
typedef int loop_prepare_cb(void *arg);
typedef void loop_after_cb(void *arg);
typedef void loop_defer_cb(void *arg);

struct loop *loop_new(void);
void loop_free(struct loop *l);

/*
 * Watches fd (level-triggered) for events. NULL (errno set) if epoll refuses. The watch does not
 * own the fd: call loop_watch_del before closing it. Deleting is safe inside any callback; the
 * memory goes at the end of the current batch.
 */
struct loop_watch *loop_watch_add(struct loop *l, int fd, uint32_t events, loop_io_cb *cb,
                                  void *arg);
int loop_watch_mod(struct loop_watch *w, uint32_t events) MUSTCHECK;
void loop_watch_del(struct loop_watch *w);

/*
 * One-shot timer, delay_ms from now. The loop frees it right before calling cb: a fired timer must
 * not be deleted again. loop_timer_del on a pending timer cancels and frees it.
 */
struct loop_timer *loop_timer_add(struct loop *l, uint64_t delay_ms, loop_timer_cb *cb, void *arg);
void loop_timer_del(struct loop_timer *t);

/* Blocks signo for the process and delivers it through a signalfd. */
int loop_signal_add(struct loop *l, int signo, loop_signal_cb *cb, void *arg) MUSTCHECK;

/*
 * Runs cb(arg) once, later in this loop turn: after the fd callbacks and timers, before the after
 * hook, never inside the caller (redis freeClientAsync, libuv's closing phase). Calls queued from a
 * deferred call run on the next turn, which then does not block. The caller keeps arg alive until
 * cb runs; there is no cancel: cb checks its object's state. A call queued in the turn that stops
 * the loop (by the after hook, say) still runs before loop_run returns; deferred calls still
 * queued when the loop is freed are dropped, not run.
 */
void loop_defer(struct loop *l, loop_defer_cb *cb, void *arg);

/*
 * What is still queued (tests and fuzzers check that nothing is left behind): timers not yet
 * fired, deferred calls not yet run.
 */
size_t loop_timers_pending(const struct loop *l);
size_t loop_deferred_pending(const struct loop *l);
void loop_set_hooks(struct loop *l, loop_prepare_cb *prepare, loop_after_cb *after, void *arg);
/* Asks for the next wait not to block (work was queued from inside a callback). */
void loop_wake(struct loop *l);

void loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif
