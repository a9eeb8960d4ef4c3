/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_SANDBOX_NOTIFY_H
#define MCPGW_SANDBOX_NOTIFY_H

#include <sys/types.h>

#include <stdbool.h>

#include "buf.h"
#include "loop.h"

/*
 * The box's seccomp refusals, counted (sandbox.h). The kernel tells nobody of a refusal its
 * filter answers with an errno; it does tell a listener of one answered by user notification. So
 * a boxed child loads a variant of the filter whose refusals notify, with a listener (a file
 * descriptor) that it hands to the gateway over a socket before exec; the gateway answers each
 * notification at once with EPERM (never lets the call through), counts it by server and system
 * call, and logs it (rate-limited). Where the kernel gives no listener (EBUSY: the gateway runs
 * under a filter that has one; or a kernel without user notification) the child loads the plain
 * EPERM filter and its refusals are not counted; the start line says which.
 */

struct sock_fprog;
struct sandbox_watch;

/* ---- around the clone (sandbox.c) ---------------------------------------------------------- */

/*
 * In the parent, before the clone: the socket the child hands its listener over (when on: the
 * counting variant of the filter exists). 0, or -1 with errno (the spawn fails).
 */
int sandbox_notify_prepare(bool on);
/*
 * In the parent, after the clone returned pid (the child has exec'd or exited): takes the
 * listener it sent, for sandbox_watch_take. pid, or -1 with errno when the child sent one the
 * gateway could not take (out of file descriptors): the child is killed and reaped then.
 */
pid_t sandbox_notify_collect(pid_t pid);
/*
 * In the child before it closes its descriptors: the socket moved to fd 3; the first fd the
 * child may close (3 when there is no socket, else 4), or -1 with errno.
 */
int sandbox_notify_keep(void);
/*
 * In the child, last before exec: the counting filter with a listener, handed over and closed;
 * where the kernel refuses a listener, why is sent instead and the plain filter loaded. 0, or -1
 * with errno.
 */
int sandbox_notify_seal(const struct sock_fprog *notify, const struct sock_fprog *plain);
/* Whether the last child's refusals are counted, in words (for the start line). */
const char *sandbox_notify_state(void);

/* ---- in the loop ------------------------------------------------------------------------- */

/*
 * The listener of the child just spawned (pid, of server; tag for the log), NULL when its
 * refusals are not counted; owns the listener. server NULL: the listener is closed (the probe).
 */
struct sandbox_watch *sandbox_watch_take(const char *server, pid_t pid, const char *tag);
/* Watches the listener in the loop: 0 (also for NULL), or -1 with errno. */
int sandbox_watch_start(struct sandbox_watch *w, struct loop *l);
/* Stops watching and closes the listener (the child was reaped). NULL is fine. */
void sandbox_watch_free(struct sandbox_watch *w);
/* mcpgw_sandbox_refused_total: by server and system call, a series from its first refusal. */
void sandbox_notify_metrics(struct buf *b);
/* Frees the servers' rows (at exit, once every child is freed). */
void sandbox_notify_module_free(void);

#endif
