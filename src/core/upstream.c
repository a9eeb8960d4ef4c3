/* SPDX-License-Identifier: MIT */
/*
 * Child processes (src/README.md, section 6). vfork + exec into its own
 * process group with an empty signal mask, default dispositions and a parent-death signal (what
 * posix_spawn cannot give, and vfork costs the same); only fds 0-2 survive; our pipe
 * ends are non-blocking, the child's are not. Exit is watched through a pidfd. stderr is always
 * drained (a child blocks otherwise). The upstream is freed only after both its exit and its
 * stdout EOF were seen (tmux job.c), or after the kill ladder has run to the end. When the child
 * exits, its process group is sent SIGKILL before the zombie is reaped, so nothing it started
 * outlives it (the unreaped zombie keeps the group id from being reused meanwhile).
 */
#include "upstream.h"

#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cgroup.h"
#include "log.h"
#include "sandbox.h"
#include "sandbox_notify.h"
#include "upstream_int.h"
#include "util.h"

#define UPSTREAM_READ_BYTES     65536
#define UPSTREAM_SHARE_BYTES    65536     /* a line this long is handed over, not copied */
#define UPSTREAM_PIPE_BIG       (1 << 20) /* stdout pipe of a child that fills its 64 KiB one */
#define UPSTREAM_WAKE_BYTES     (1 << 20) /* stdout bytes read per wake-up, at most (about) */
#define UPSTREAM_STDERR_LINE    2048
#define UPSTREAM_ERR_WAKE_BYTES (64 * 1024) /* stderr bytes read per wake-up, at most */
#define UPSTREAM_STDERR_PER_S   200


static size_t upstream_live;

/*
 * What is sent inside a batch (upstream_batch_begin .. upstream_batch_end) is written at its
 * end, once per child: the requests one turn brings for a child go in one writev, and the child
 * reads them in one wake-up. A child on this list is held (busy) until it is written.
 */
static unsigned upstream_batching;
static struct upstream *upstream_due;
/* A queue this long is written at once, batch or not: a pipe holds 64 KiB unread. */
#define UPSTREAM_BATCH_BYTES (64 * 1024)


static void upstream_out_ready(int fd, uint32_t events, void *arg);
static void upstream_in_ready(int fd, uint32_t events, void *arg);
static void upstream_err_ready(int fd, uint32_t events, void *arg);
static void upstream_pid_ready(int fd, uint32_t events, void *arg);
static void upstream_ladder(void *arg);

size_t
upstream_live_count(void)
{
    return upstream_live;
}

pid_t
upstream_pid(const struct upstream *u)
{
    return u->pid;
}

size_t
upstream_queued_bytes(const struct upstream *u)
{
    return u->inq.bytes;
}

bool
upstream_writable(const struct upstream *u)
{
    return !u->gone && !u->closing && u->in_fd != -1;
}

static void
upstream_close_fd(struct loop_watch **w, int *fd)
{
    loop_watch_del(*w);
    *w = NULL;
    if (*fd != -1)
        close(*fd);
    *fd = -1;
}

/* A boxed child's cgroup, once the child is reaped: removed, and an OOM kill in it said. */
static void
upstream_cgroup_end(struct upstream *u)
{
    if (u->cg == NULL)
        return;
    uint64_t oom = cgroup_child_end(u->cg);
    u->cg = NULL;
    if (oom > 0)
        log_warn(u->tag,
                 "child %d: the kernel's OOM killer ended it (its cgroup's memory.max, "
                 "child_max_memory_cgroup_bytes; %llu kill%s)",
                 (int)u->pid, (unsigned long long)oom, oom == 1 ? "" : "s");
}

static void
upstream_free(struct upstream *u)
{
    upstream_cgroup_end(u);
    upstream_close_fd(&u->in_w, &u->in_fd);
    upstream_close_fd(&u->out_w, &u->out_fd);
    upstream_close_fd(&u->err_w, &u->err_fd);
    upstream_close_fd(&u->pid_w, &u->pid_fd);
    sandbox_watch_free(u->box_w);
    loop_timer_del(u->timer);
    msgq_clear(&u->inq);
    buf_clear(&u->line);
    buf_clear(&u->errline);
    struct upstream_server *row = u->srv;
    UTIL_DLIST_UNLINK(row->children, u, srv_prev, srv_next);
    row->running--;
    free(u);
    upstream_live--;
}

/* Frees the upstream once nothing more can come from the child. */
static void
upstream_maybe_free(struct upstream *u)
{
    if (u->busy == 0 && u->closing && u->exited && (u->out_eof || u->ladder_done))
        upstream_free(u);
}

/* Every entry from the loop goes through enter/leave, so the owner may call upstream_close from
 * inside a callback without the upstream disappearing under our feet. */
static void
upstream_enter(struct upstream *u)
{
    u->busy++;
}

static void
upstream_leave(struct upstream *u)
{
    u->busy--;
    upstream_maybe_free(u);
}

static void
upstream_report(void *arg)
{
    struct upstream *u = arg;
    if (!u->closing && u->gone_cb != NULL)
        u->gone_cb(u->gone_reason, u->arg);
    upstream_leave(u);
}

/*
 * The child can no longer serve: from now on nothing is sent to it and no line delivered. The
 * owner hears of it once, on a deferred call, never inside the call that found out (a failed write
 * inside upstream_send, a read inside a line callback): its flow may still be using what it would
 * free on hearing. The pending report holds the upstream (busy) until it has run.
 */
static void
upstream_gone(struct upstream *u, const char *reason)
{
    if (u->gone)
        return;
    u->gone = true;
    u->gone_reason = reason;
    upstream_enter(u);
    loop_defer(u->l, upstream_report, u);
}

/* --- spawning ---------------------------------------------------------------------------- */

static int
upstream_pipe(int fds[2], int parent_end)
{
    if (pipe2(fds, O_CLOEXEC) == -1)
        return -1;
    /* O_NONBLOCK on our end only: the flag lives on the open file description. */
    return fcntl(fds[parent_end], F_SETFL, O_NONBLOCK);
}

/* How far a child got before it failed: what a spawn error blames. */
enum upstream_step {
    UPSTREAM_STEP_SETUP = 0,
    UPSTREAM_STEP_BOX,
    UPSTREAM_STEP_CWD,
    UPSTREAM_STEP_EXEC
};

/* What the child side needs, on the parent's stack (the parent waits until exec or exit). */
struct upstream_child_arg {
    const struct upstream_params *p;
    pid_t parent;
    int in, out, err;
    const char *search;
    volatile int child_errno, child_step;
    const char *volatile box_step; /* static: the box's step that failed */
};

/*
 * The child side of vfork(): only system calls, no allocation, no return. It asks for SIGKILL when
 * the gateway dies (a gateway killed with SIGKILL leaves no child behind), leads its own process
 * group, gets default signal dispositions and an empty mask, keeps only fds 0-2, and execs. A
 * failure is written to *child_errno (vfork shares the memory) before _exit.
 */
SANDBOX_CHILD static NORETURN void
upstream_child(struct upstream_child_arg *a)
{
    const struct upstream_params *p = a->p;
    /* In its own PID namespace a boxed child's parent is outside: getppid() is 0 there. */
    pid_t ppid = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1
        || (ppid != a->parent && !(p->sandbox != NULL && ppid == 0)))
        goto fail;
    if (setpgid(0, 0) == -1)
        goto fail;
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)sigaction(sig, &dfl, NULL); /* fails harmlessly for glibc's reserved ones */
    sigset_t empty;
    sigemptyset(&empty);
    if (sigprocmask(SIG_SETMASK, &empty, NULL) == -1)
        goto fail;
    if (dup2(a->in, 0) == -1 || dup2(a->out, 1) == -1 || dup2(a->err, 2) == -1)
        goto fail;
    a->child_step = UPSTREAM_STEP_BOX;
    if (p->sandbox != NULL && sandbox_join_cgroup(&a->box_step) == -1)
        goto fail;
    a->child_step = UPSTREAM_STEP_SETUP;
    /* A boxed child keeps the socket its seccomp listener leaves by (fd 3) until the seal. */
    int keep = p->sandbox != NULL ? sandbox_notify_keep() : 3;
    if (keep == -1 || syscall(SYS_close_range, (unsigned)keep, ~0u, 0u) == -1)
        goto fail;
    a->child_step = UPSTREAM_STEP_BOX;
    if (p->sandbox != NULL && sandbox_enter(p->sandbox, &a->box_step) == -1)
        goto fail;
    /* A box changes to the real path of the cwd (or the gateway's) in its view itself. */
    a->child_step = UPSTREAM_STEP_CWD;
    if (p->cwd != NULL && (p->sandbox == NULL || !sandbox_has_cwd(p->sandbox))
        && chdir(p->cwd) == -1)
        goto fail;
    a->child_step = UPSTREAM_STEP_BOX;
    if (p->sandbox != NULL && sandbox_seal(p->sandbox, &a->box_step) == -1)
        goto fail;
    a->child_step = UPSTREAM_STEP_EXEC;
    util_exec_search(p->argv, p->envp, a->search);
fail:
    a->child_errno = errno ? errno : EINVAL;
    _exit(127);
}

SANDBOX_CHILD static int
upstream_box_child(void *arg)
{
    upstream_child(arg);
}

/* Logs why a child did not start, naming its server and the real cause; *errstr the short form. */
static void
upstream_spawn_error(const struct upstream *u, const struct upstream_params *p, int step, int e,
                     const char *box_step, const char **errstr)
{
    const char *server = p->server != NULL ? p->server : "-";
    if (step == UPSTREAM_STEP_BOX) {
        *errstr = e == EMFILE || e == ENFILE ? upstream_no_fds : "cannot make the child's sandbox";
        log_error(u->tag, "server %s: cannot start a child: sandbox: %s: %s", server,
                  box_step != NULL ? box_step : "cloning into its namespaces", strerror(e));
    } else if (step == UPSTREAM_STEP_CWD) {
        *errstr = e == ENOENT    ? "cwd not found"
                  : e == ENOTDIR ? "cwd is not a directory"
                                 : "cannot change to cwd";
        log_error(u->tag, "server %s: cannot start a child: cwd %s: %s", server, p->cwd,
                  strerror(e));
    } else if (step == UPSTREAM_STEP_EXEC) {
        *errstr = e == ENOENT                   ? "command not found"
                  : e == EACCES || e == ENOEXEC ? "command not executable"
                                                : "cannot execute the command";
        log_error(u->tag, "server %s: cannot start a child: command %s: %s", server, p->argv[0],
                  strerror(e));
    } else {
        *errstr = "spawn failed";
        log_error(u->tag, "server %s: cannot start a child: %s", server, strerror(e));
    }
}

static int
upstream_do_spawn(struct upstream *u, const struct upstream_params *p, int in[2], int out[2],
                  int err[2], const char **errstr)
{
    struct upstream_child_arg a = {
        .p = p,
        .parent = getpid(),
        .in = in[0],
        .out = out[1],
        .err = err[1],
        .search = getenv("PATH"),
        .child_step = UPSTREAM_STEP_SETUP,
    };
    if (a.search == NULL)
        a.search = "/bin:/usr/bin";
    pid_t pid;
    if (p->sandbox != NULL) {
        pid = sandbox_spawn(p->sandbox, p->own, upstream_box_child, &a, &u->cg);
        if (pid == -1) {
            a.child_step = UPSTREAM_STEP_BOX;
            if (cgroup_in_force() && u->cg == NULL)
                a.box_step = "making its cgroup";
        }
    } else if ((pid = vfork()) == 0) {
        upstream_child(&a);
    }
    int rc = pid == -1 ? errno : a.child_errno;
    if (pid > 0 && rc != 0)
        (void)waitpid(pid, NULL, 0); /* it has already exited: reap it */
    if (rc != 0) {
        upstream_spawn_error(u, p,
                             pid == -1 && p->sandbox == NULL ? UPSTREAM_STEP_SETUP : a.child_step,
                             rc, a.box_step, errstr);
        return -1;
    }
    u->pid = pid;
    if (p->sandbox != NULL)
        u->box_w = sandbox_watch_take(u->srv->row.name, pid, u->tag);
    return 0;
}

const char upstream_no_fds[] = "out of file descriptors";

struct upstream *
upstream_spawn(struct loop *l, const struct upstream_params *p, upstream_line_cb *line_cb,
               upstream_gone_cb *gone_cb, void *arg, const char **errstr)
{
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->l = l;
    u->in_fd = u->out_fd = u->err_fd = u->pid_fd = -1;
    u->pid = -1;
    msgq_init(&u->inq);
    buf_init(&u->line, p->max_line_bytes + 1);
    buf_init(&u->errline, UPSTREAM_STDERR_LINE);
    u->max_line = p->max_line_bytes;
    u->stdin_max = p->stdin_max_bytes;
    u->stdin_reserve = p->stdin_reserve_bytes;
    u->stdin_grace_ms = p->stdin_grace_ms;
    u->term_grace_ms = p->term_grace_ms;
    snprintf(u->tag, sizeof(u->tag), "%s", p->tag ? p->tag : "-");
    u->line_cb = line_cb;
    u->gone_cb = gone_cb;
    u->arg = arg;
    upstream_live++;
    u->srv = upstream_server_of(p->server != NULL ? p->server : "-");
    u->srv_next = u->srv->children;
    if (u->srv_next != NULL)
        u->srv_next->srv_prev = u;
    u->srv->children = u;
    u->srv->running++;

    *errstr = "cannot create pipes";
    if (upstream_pipe(in, 1) == -1 || upstream_pipe(out, 0) == -1 || upstream_pipe(err, 0) == -1) {
        if (errno == EMFILE || errno == ENFILE)
            *errstr = upstream_no_fds;
        goto fail;
    }
    if (upstream_do_spawn(u, p, in, out, err, errstr) == -1) {
        u->srv->spawn_failed++;
        goto fail;
    }
    u->srv->spawned++;
    close(in[0]);
    close(out[1]);
    close(err[1]);
    u->in_fd = in[1];
    u->out_fd = out[0];
    u->err_fd = err[0];
    in[0] = in[1] = out[0] = out[1] = err[0] = err[1] = -1;
    u->pid_fd = (int)syscall(SYS_pidfd_open, u->pid, 0);
    if (u->pid_fd == -1) {
        *errstr = errno == EMFILE || errno == ENFILE ? upstream_no_fds : "pidfd_open failed";
        goto fail_running;
    }
    u->out_w = loop_watch_add(l, u->out_fd, EPOLLIN, upstream_out_ready, u);
    u->err_w = loop_watch_add(l, u->err_fd, EPOLLIN, upstream_err_ready, u);
    u->pid_w = loop_watch_add(l, u->pid_fd, EPOLLIN, upstream_pid_ready, u);
    if (u->out_w == NULL || u->err_w == NULL || u->pid_w == NULL
        || sandbox_watch_start(u->box_w, l) == -1) {
        log_warn(u->tag, "cannot watch child %d: %s", (int)u->pid, strerror(errno));
        *errstr = "cannot watch the child's pipes";
        goto fail_running;
    }
    log_debug(u->tag, "child %d spawned: %s", (int)u->pid, p->argv[0]);
    return u;

fail_running:
    /* Cannot track it: do not leave it running. */
    kill(-u->pid, SIGKILL);
    waitpid(u->pid, NULL, 0);
fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] != -1)
            close(in[i]);
        if (out[i] != -1)
            close(out[i]);
        if (err[i] != -1)
            close(err[i]);
    }
    u->exited = u->closing = u->out_eof = true;
    upstream_free(u);
    return NULL;
}

/* --- stdin ------------------------------------------------------------------------------- */

static void
upstream_close_stdin(struct upstream *u)
{
    upstream_close_fd(&u->in_w, &u->in_fd);
    msgq_clear(&u->inq);
}

static void
upstream_flush(struct upstream *u)
{
    while (u->inq.bytes > 0 && u->in_fd != -1) {
        struct iovec iov[64];
        int n = msgq_iov(&u->inq, iov, (int)ARRAY_LEN(iov));
        ssize_t w = writev(u->in_fd, iov, n);
        if (w > 0)
            u->srv->stdin_bytes += (uint64_t)w;
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            log_debug(u->tag, "child stdin: %s", strerror(errno));
            upstream_close_stdin(u);
            upstream_gone(u, "child stopped reading its stdin");
            return;
        }
        msgq_advance(&u->inq, (size_t)w);
    }
    bool want_out = u->inq.bytes > 0;
    if (want_out && u->in_w == NULL) {
        u->in_w = loop_watch_add(u->l, u->in_fd, EPOLLOUT, upstream_in_ready, u);
        if (u->in_w == NULL) {
            log_warn(u->tag, "cannot watch child %d's stdin: %s", (int)u->pid, strerror(errno));
            upstream_close_stdin(u);
            upstream_gone(u, "cannot watch the child's stdin");
            return;
        }
    } else if (!want_out && u->in_w != NULL) {
        loop_watch_del(u->in_w);
        u->in_w = NULL;
    }
    if (!want_out && u->closing && u->ladder_step == 0) {
        upstream_close_stdin(u);
        u->ladder_step = 1;
    }
}

static void
upstream_in_ready(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct upstream *u = arg;
    upstream_enter(u);
    upstream_flush(u);
    upstream_leave(u);
}

void
upstream_write_now(struct upstream *u)
{
    if (u->due && u->in_w == NULL)
        upstream_flush(u);
}

/* Queues m when the queue stays within ceiling; -1 (nothing queued) otherwise or when gone. */
static int
upstream_queue(struct upstream *u, struct msg *m, size_t ceiling)
{
    if (u->gone || u->closing || u->in_fd == -1)
        return -1;
    if (u->inq.bytes + m->len > ceiling)
        upstream_write_now(u); /* refused only if it still does not fit, as without a batch */
    if (u->gone || u->in_fd == -1 || u->inq.bytes + m->len > ceiling)
        return -1;
    msgq_push(&u->inq, m);
    if (u->in_w != NULL)
        return 0; /* EPOLLOUT writes it */
    if (upstream_batching > 0 && u->inq.bytes < UPSTREAM_BATCH_BYTES) {
        if (!u->due) {
            u->due = true;
            u->due_next = upstream_due;
            upstream_due = u;
            upstream_enter(u);
        }
        return 0;
    }
    /* Try at once: most writes complete without waiting for EPOLLOUT. */
    upstream_flush(u);
    return 0;
}

void
upstream_batch_begin(void)
{
    upstream_batching++;
}

void
upstream_batch_end(void)
{
    if (--upstream_batching > 0)
        return;
    while (upstream_due != NULL) {
        struct upstream *u = upstream_due;
        upstream_due = u->due_next;
        u->due = false;
        u->due_next = NULL;
        if (u->in_w == NULL)
            upstream_flush(u);
        upstream_leave(u);
    }
}

int
upstream_send(struct upstream *u, struct msg *m)
{
    return upstream_queue(u, m, u->stdin_max);
}

/* --- stdout ------------------------------------------------------------------------------ */

/*
 * A large line that starts the buffer becomes a message over the buffer's own block, so it is
 * never copied; what follows its '\n' moves to a new buffer.
 */
static struct msg *
upstream_take_line(struct upstream *u, size_t len)
{
    struct buf rest;
    buf_init(&rest, u->line.max);
    size_t after = buf_used(&u->line) - len - 1;
    if (after > 0 && buf_append(&rest, u->line.data + len + 1, after) == -1)
        fatal("line buffer"); /* cannot happen: after is below the same ceiling */
    struct msg *m = msg_adopt(u->line.data, len);
    u->line = rest;
    return m;
}

static void
upstream_emit_lines(struct upstream *u)
{
    for (;;) {
        char *head = buf_head(&u->line);
        size_t used = buf_used(&u->line);
        /* A taken line leaves an empty buffer with no block at all (head NULL). */
        char *nl = used > u->scan_off ? memchr(head + u->scan_off, '\n', used - u->scan_off) : NULL;
        if (nl == NULL) {
            u->scan_off = used;
            break;
        }
        size_t len = (size_t)(nl - head);
        struct msg *shared = NULL;
        if (len >= UPSTREAM_SHARE_BYTES && head == u->line.data)
            shared = upstream_take_line(u, len);
        else
            buf_consume(&u->line, len + 1);
        u->scan_off = 0;
        if (len > 0 && head[len - 1] == '\r')
            len--;
        if (shared != NULL) {
            shared->len = len;
            shared->data[len] = '\0';
        }
        if (len > 0 && !u->closing && !u->gone && u->line_cb != NULL)
            u->line_cb(head, len, shared, u->arg);
        msg_unref(shared);
    }
    if (buf_used(&u->line) > u->max_line) {
        buf_reset(&u->line);
        u->scan_off = 0;
        if (u->gone) /* still drained so the child can leave: said once is enough */
            return;
        log_warn(u->tag, "child %d wrote a line over max_message_bytes (%zu)", (int)u->pid,
                 u->max_line);
        upstream_gone(u, "child wrote a line over max_message_bytes");
    }
}

static void
upstream_read_out(struct upstream *u)
{
    /*
     * At most UPSTREAM_WAKE_BYTES per wake-up: a child that refills its pipe as fast as it is
     * read must not keep the loop from everything else (the level-triggered watch comes back).
     */
    for (size_t total = 0; u->out_fd != -1 && !u->paused && total < UPSTREAM_WAKE_BYTES;) {
        if (buf_reserve(&u->line, UPSTREAM_READ_BYTES) == -1) {
            /* Near the ceiling: read what still fits to find out whether the line ends. */
            size_t room = u->line.max - buf_used(&u->line);
            if (room == 0 || buf_reserve(&u->line, room) == -1) {
                upstream_emit_lines(u);
                return;
            }
        }
        size_t room = u->line.cap - u->line.len;
        /* Never read past the ceiling: capacity is rounded up, the line limit is not. */
        if (room > u->line.max - buf_used(&u->line))
            room = u->line.max - buf_used(&u->line);
        ssize_t n = read(u->out_fd, u->line.data + u->line.len, room);
        if (n > 0) {
            if (n >= UPSTREAM_READ_BYTES && !u->out_grown) {
                /*
                 * A full default pipe's worth: a child writing a large message. A bigger pipe lets
                 * it write on while we read, with fewer wake-ups on both sides. Best effort: the
                 * kernel caps it (fs/pipe-max-size, the user's pipe pages).
                 */
                u->out_grown = true;
                (void)fcntl(u->out_fd, F_SETPIPE_SZ, UPSTREAM_PIPE_BIG);
            }
            u->srv->stdout_bytes += (uint64_t)n;
            u->line.len += (size_t)n;
            total += (size_t)n;
            upstream_emit_lines(u);
            if ((size_t)n < room)
                return; /* the pipe is empty: the level-triggered watch says when it is not */
            continue;
        }
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        /* EOF or error: a partial last line without '\n' is not a message. */
        upstream_close_fd(&u->out_w, &u->out_fd);
        u->out_eof = true;
        upstream_gone(u, u->exited ? "child exited" : "child closed its stdout");
        return;
    }
}

static void
upstream_out_ready(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct upstream *u = arg;
    upstream_enter(u);
    upstream_read_out(u);
    upstream_leave(u);
}

int
upstream_send_iov(struct upstream *u, const struct iovec *iov, int n)
{
    struct msg *m = msg_concat(iov, n);
    int rc = upstream_send(u, m);
    msg_unref(m);
    return rc;
}

int
upstream_send_control_iov(struct upstream *u, const struct iovec *iov, int n)
{
    struct msg *m = msg_concat(iov, n);
    int rc = upstream_queue(u, m, u->stdin_max + u->stdin_reserve);
    if (rc == -1 && !u->gone && !u->closing && u->in_fd != -1) {
        log_warn(u->tag, "child %d has not read %zu bytes of its stdin: taken as stuck",
                 (int)u->pid, u->inq.bytes);
        upstream_gone(u, "child stopped reading its stdin");
    }
    msg_unref(m);
    return rc;
}

void
upstream_pause(struct upstream *u, bool paused)
{
    if (u->paused == paused || u->out_fd == -1)
        return;
    u->paused = paused;
    if (paused) {
        /* Removed, not disarmed: a level-triggered EPOLLHUP would otherwise spin. */
        loop_watch_del(u->out_w);
        u->out_w = NULL;
    } else {
        u->out_w = loop_watch_add(u->l, u->out_fd, EPOLLIN, upstream_out_ready, u);
        if (u->out_w == NULL) {
            /* Unread, the child blocks on stdout: this child ends, the gateway goes on. */
            log_warn(u->tag, "cannot watch child %d's stdout: %s", (int)u->pid, strerror(errno));
            upstream_gone(u, "cannot watch the child's stdout");
        }
    }
}

/* --- stderr ------------------------------------------------------------------------------ */

static void
upstream_log_stderr(struct upstream *u, const char *p, size_t n)
{
    unsigned dropped;
    bool take = log_rate_take(&u->err_rate, UPSTREAM_STDERR_PER_S, &dropped);
    if (dropped)
        log_warn(u->tag, "child stderr: %u lines not logged (rate limit)", dropped);
    if (!take)
        return;
    /* Its server and pid as fields: JSON lines and journal entries can be matched by them. */
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)u->pid);
    const struct log_field f[] = { { "server", u->srv->row.name, false }, { "child", pid, true } };
    log_fields(LOG_INFO, u->tag, f, ARRAY_LEN(f), "child stderr: %.*s", (int)n, p);
}

/* Splits stderr bytes into lines for the log; a line longer than the buffer is logged in pieces. */
static void
upstream_err_bytes(struct upstream *u, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl != NULL ? (size_t)(nl - p) : n;
        size_t room = u->errline.max - 1 - buf_used(&u->errline);
        bool cut = take > room || (take == room && nl == NULL); /* the line goes on past it */
        if (take > room)
            take = room;
        if (take > 0 && buf_append(&u->errline, p, take) == -1)
            buf_reset(&u->errline); /* cannot happen: take fits under the ceiling */
        p += take;
        n -= take;
        if (cut || nl != NULL) {
            upstream_log_stderr(u, buf_head(&u->errline), buf_used(&u->errline));
            buf_reset(&u->errline);
        }
        if (!cut && nl != NULL) {
            p++; /* the '\n' itself */
            n--;
        }
    }
}

static void
upstream_err_ready(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct upstream *u = arg;
    char chunk[4096];
    /*
     * At most UPSTREAM_ERR_WAKE_BYTES per wake-up: a child flooding stderr must not keep the loop
     * from everything else (the level-triggered watch comes back for the rest).
     */
    for (size_t total = 0; total < UPSTREAM_ERR_WAKE_BYTES;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        if (n <= 0) {
            if (buf_used(&u->errline))
                upstream_log_stderr(u, buf_head(&u->errline), buf_used(&u->errline));
            buf_reset(&u->errline);
            upstream_close_fd(&u->err_w, &u->err_fd);
            return;
        }
        upstream_err_bytes(u, chunk, (size_t)n);
        total += (size_t)n;
        if ((size_t)n < sizeof(chunk))
            return; /* the pipe is empty for now */
    }
}

/* --- exit and the stop ladder ------------------------------------------------------------ */

static void
upstream_pid_ready(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct upstream *u = arg;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    /* Peek first: while the zombie is unreaped its process group id cannot be reused. */
    if (waitid((idtype_t)P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG | WNOWAIT) == -1
        || si.si_pid == 0)
        return;
    /* Whatever it started and left behind in its group goes with it. */
    kill(-u->pid, SIGKILL);
    siginfo_t reaped;
    memset(&reaped, 0, sizeof(reaped));
    if (waitid((idtype_t)P_PIDFD, (id_t)fd, &reaped, WEXITED | WNOHANG) == -1)
        log_warn(u->tag, "reaping child %d: %s", (int)u->pid, strerror(errno));
    upstream_cgroup_end(u);
    upstream_enter(u);
    u->exited = true;
    upstream_close_fd(&u->pid_w, &u->pid_fd);
    sandbox_watch_free(u->box_w); /* it and all its box are gone */
    u->box_w = NULL;
    if (si.si_code == CLD_EXITED && si.si_status == 0)
        u->srv->exited[0]++;
    else if (si.si_code == CLD_EXITED)
        u->srv->exited[1]++;
    else
        u->srv->exited[2]++;
    char pid[16], st[16];
    snprintf(pid, sizeof(pid), "%d", (int)u->pid);
    snprintf(st, sizeof(st), "%d", si.si_status);
    const struct log_field f[] = {
        { "child", pid, true }, { si.si_code == CLD_EXITED ? "exit_status" : "signal", st, true }
    };
    if (si.si_code == CLD_EXITED)
        log_fields(LOG_INFO, u->tag, f, ARRAY_LEN(f), "child %s exited with status %s", pid, st);
    else
        log_fields(LOG_INFO, u->tag, f, ARRAY_LEN(f), "child %s killed by signal %s", pid, st);
    /*
     * Deliver what it wrote before dying, then report. While paused (back-pressure), its last
     * lines are still in the pipe: the stdout EOF after resuming reports the exit instead.
     */
    if (!u->paused) {
        upstream_read_out(u);
        upstream_gone(u, "child exited");
    }
    upstream_leave(u);
}

/* One step of close stdin -> SIGTERM -> SIGKILL; each step waits for its grace period. */
static void
upstream_ladder(void *arg)
{
    struct upstream *u = arg;
    u->timer = NULL;
    upstream_enter(u);
    switch (u->ladder_step) {
    case 0:
        /* stdin did not drain within the grace period: the child is not reading. */
        upstream_close_stdin(u);
        u->ladder_step = 1;
        FALLTHROUGH;
    case 1:
        /* Once the leader is reaped its group was already killed; its pid may be reused. */
        if (!u->exited && kill(-u->pid, SIGTERM) == 0)
            log_info(u->tag, "child %d: SIGTERM to its process group", (int)u->pid);
        u->ladder_step = 2;
        u->timer = loop_timer_add(u->l, u->term_grace_ms, upstream_ladder, u);
        break;
    case 2:
        if (!u->exited && kill(-u->pid, SIGKILL) == 0)
            log_warn(u->tag, "child %d: SIGKILL to its process group", (int)u->pid);
        u->ladder_step = 3;
        /* Give the kernel a moment to deliver it, then stop waiting for stdout. */
        u->timer = loop_timer_add(u->l, 100, upstream_ladder, u);
        break;
    default:
        u->ladder_done = true;
        break;
    }
    upstream_leave(u);
}

void
upstream_close(struct upstream *u, const char *reason)
{
    if (u == NULL || u->closing)
        return;
    log_debug(u->tag, "closing child %d: %s", (int)u->pid, reason);
    u->closing = true;
    u->line_cb = NULL;
    u->gone_cb = NULL;
    if (u->paused)
        upstream_pause(u, false); /* keep draining so the child never blocks on stdout */
    if (u->inq.bytes == 0 || u->in_fd == -1) {
        upstream_close_stdin(u);
        u->ladder_step = 1;
    }
    /* While stdin is still flushing, step 0 closes it after the grace period at the latest. */
    u->timer = loop_timer_add(u->l, u->stdin_grace_ms, upstream_ladder, u);
    upstream_maybe_free(u);
}
