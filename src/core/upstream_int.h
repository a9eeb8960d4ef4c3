/* SPDX-License-Identifier: MIT */
/*
 * A child process's record and its server's counters, shared by upstream.c (the child) and
 * upstream_metrics.c (the counters by server, and what /metrics says of them).
 */
#ifndef MCPGW_UPSTREAM_INT_H
#define MCPGW_UPSTREAM_INT_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "upstream.h"

struct upstream {
    struct loop *l;
    pid_t pid;
    int in_fd, out_fd, err_fd, pid_fd;
    struct loop_watch *in_w, *out_w, *err_w, *pid_w;
    struct msgq inq;
    struct buf line;
    size_t scan_off; /* bytes of line already searched for '\n' */
    struct buf errline;
    size_t max_line, stdin_max;
    size_t stdin_reserve; /* past stdin_max, for upstream_send_control_iov only */
    uint64_t stdin_grace_ms, term_grace_ms;
    struct loop_timer *timer;
    char tag[64];
    upstream_line_cb *line_cb;
    upstream_gone_cb *gone_cb;
    const char *gone_reason; /* static: why, for the deferred report */
    void *arg;
    bool paused, gone, closing, exited, out_eof, ladder_done;
    bool out_grown;           /* its stdout pipe was enlarged */
    unsigned busy;            /* > 0 while one of our callbacks runs: frees wait for it to unwind */
    int ladder_step;          /* 0 stdin open, 1 stdin closed, 2 SIGTERM sent, 3 SIGKILL sent */
    struct log_rate err_rate; /* its stderr lines logged, UPSTREAM_STDERR_PER_S a second */
    struct cgroup_child *cg;  /* a boxed child's cgroup (cgroup.h); NULL: none */
    struct sandbox_watch *box_w;          /* its seccomp refusals, counted; NULL: not */
    struct upstream_server *srv;          /* its server's row */
    struct upstream *srv_next, *srv_prev; /* the row's children not yet freed */
    bool due;                             /* in upstream_due: written at the batch's end */
    struct upstream *due_next;
};

/*
 * Counters of one server (by name), kept for the life of the process so that /metrics stays
 * monotonic across reloads, and the server's children not yet freed (for their memory).
 */
struct upstream_server {
    struct metrics_row row; /* its name, the next server's row */
    uint64_t running;       /* children not yet freed */
    uint64_t spawned, spawn_failed;
    uint64_t exited[3]; /* exit_zero, exit_nonzero, signal */
    uint64_t stdin_bytes, stdout_bytes;
    struct upstream *children;
};

/* The counters of the server named name, made at its first use (until the module ends). */
struct upstream_server *upstream_server_of(const char *name);

#endif
