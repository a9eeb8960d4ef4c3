/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_UPSTREAM_H
#define MCPGW_UPSTREAM_H

#include <sys/types.h>
#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "loop.h"
#include "msg.h"
#include "util.h"

/*
 * One child process: spawn, a bounded stdin queue, stdout split into lines, stderr drained into the
 * log, exit tracked by pidfd, and the stop ladder (close stdin -> SIGTERM -> SIGKILL, always to the
 * whole process group). Bytes only: no MCP here.
 */

struct upstream;

struct upstream_params {
    char *const *argv;      /* argv[0] looked up in PATH when it has no '/' */
    char *const *envp;      /* the child's whole environment */
    const char *cwd;        /* NULL: inherit */
    const char *tag;        /* for logs (the session id); copied */
    const char *server;     /* the [server:NAME] it runs, for spawn errors; NULL: "-" */
    size_t max_line_bytes;  /* a longer stdout line ends the child */
    size_t stdin_max_bytes; /* queued bytes toward stdin */
    /*
     * Room past stdin_max_bytes that only upstream_send_control may use: the owner's own control
     * messages (a cancel, a ping) are queued behind whatever fills the queue, never refused for it.
     */
    size_t stdin_reserve_bytes;
    uint64_t stdin_grace_ms;       /* after stdin is closed, before SIGTERM */
    uint64_t term_grace_ms;        /* after SIGTERM, before SIGKILL */
    const struct sandbox *sandbox; /* the box the child runs in (sandbox.h); NULL: none */
    const struct sandbox_own *own; /* what it has of its own in its box (sandbox.h); NULL: none */
};

/*
 * One stdout line without its '\n'; the bytes may be modified and are valid during the call. A
 * large line comes as a message too (shared, line == shared->data, else NULL): a callee that
 * keeps part of it takes a reference instead of a copy, once it no longer modifies it.
 */
typedef void upstream_line_cb(char *line, size_t len, struct msg *shared, void *arg);
/*
 * The child can no longer serve (exited, closed stdout, overlong line, stdin broken, its pipes
 * could not be watched). Called at most once, from a deferred call of the loop (never inside an
 * upstream call such as upstream_send, nor inside line_cb), and never after upstream_close. reason
 * is static.
 */
typedef void upstream_gone_cb(const char *reason, void *arg);

/*
 * Spawns the child. NULL with *errstr (static) on failure; nothing is left running then.
 * *errstr == upstream_no_fds: the process ran out of file descriptors (a passing condition).
 */
extern const char upstream_no_fds[];
struct upstream *upstream_spawn(struct loop *l, const struct upstream_params *p,
                                upstream_line_cb *line_cb, upstream_gone_cb *gone_cb, void *arg,
                                const char **errstr);
/*
 * Queues m for stdin (takes a reference on success). -1 when the queue would pass its ceiling or
 * the child is gone or closing. A write that fails after m was queued (the child closed its stdin)
 * is not this call's result: gone_cb reports it on a later turn, and the owner answers what it
 * had in flight then.
 */
int upstream_send(struct upstream *u, struct msg *m) MUSTCHECK;
/* The same for the concatenation of n iovecs (one message made of them). */
int upstream_send_iov(struct upstream *u, const struct iovec *iov, int n) MUSTCHECK;
/*
 * The same for one of the owner's control messages: queued up to stdin_max_bytes plus
 * stdin_reserve_bytes, so a queue the owner's other messages filled still takes it. A control
 * message that finds even the reserve full means the child has stopped reading its stdin: it is
 * gone (gone_cb on a later turn, as for a failed write), and -1. So a -1 here always means the
 * child's end is on its way (or came): the owner need not retry.
 */
int upstream_send_control_iov(struct upstream *u, const struct iovec *iov, int n) MUSTCHECK;
/*
 * Between these two (they nest), what is sent is written when the outermost batch ends, once per
 * child: the HTTP side's run, whose requests for one child then cost it one write and one
 * wake-up. A child's queue of 64 KiB or more is written at once all the same.
 */
void upstream_batch_begin(void);
void upstream_batch_end(void);
/* What a batch holds back for u, written now (before a ceiling on u's queue is judged). */
void upstream_write_now(struct upstream *u);
/* Stops or resumes reading stdout (back-pressure from full HTTP streams). */
void upstream_pause(struct upstream *u, bool paused);
/*
 * Detaches the owner (no more callbacks) and stops the child: queued stdin is flushed (within the
 * stdin grace), stdin closed, then SIGTERM and SIGKILL to the group. The upstream frees itself once
 * the child is reaped and its stdout is closed (or the ladder has run out). Idempotent.
 */
void upstream_close(struct upstream *u, const char *reason);
pid_t upstream_pid(const struct upstream *u);
size_t upstream_queued_bytes(const struct upstream *u);
/*
 * False once the child can take nothing more (it is gone, though gone_cb has not run yet, or
 * closing): a sender should look elsewhere rather than be refused.
 */
bool upstream_writable(const struct upstream *u);
/* Children spawned and not yet freed, over the whole process (shutdown waits for 0). */
size_t upstream_live_count(void);

/* Makes the row of server, so that its series exist before its first child. */
void upstream_server_seen(const char *server);
/*
 * The children's series by server (running, spawned, spawn failures, exits, resident memory, bytes
 * written and read).
 */
void upstream_metrics(struct buf *b);
/* Frees the rows of every server (at exit, once every child is freed). */
void upstream_module_free(void);

#endif
