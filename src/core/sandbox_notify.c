/* SPDX-License-Identifier: MIT */
/*
 * The box's seccomp refusals, counted through the kernel's user notification (src/README.md,
 * section 6, "The box"). Two halves:
 * - around the clone: a socket pair made before it; in the child (gateway's memory, system calls
 *   only, as in sandbox.c) the counting filter loaded with SECCOMP_FILTER_FLAG_NEW_LISTENER, its
 *   listener sent over the socket with SCM_RIGHTS and closed before exec (a child that kept it
 *   could answer its own refusals and let them through); the parent takes it once the clone has
 *   returned (the child has exec'd: the message waits in the socket).
 * - in the loop: each listener watched; each notification answered at once with EPERM (never
 *   SECCOMP_USER_NOTIF_FLAG_CONTINUE: nothing the filter refuses runs), counted by server and
 *   system call (the refused list is fixed: a bounded set of labels), logged at most
 *   SANDBOX_LOG_PER_S times a second per server. A wake-up answers at most SANDBOX_WAKE_NOTIFS:
 *   a child looping on refused calls (with as many processes as child_max_processes allows)
 *   must not keep the loop from everything else.
 * Not here: Landlock's refusals (the kernel reports them to the audit subsystem only), the
 * filter's contents (sandbox.c, libseccomp).
 */
#include "sandbox_notify.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "sandbox.h"
#include "util.h"

#define SANDBOX_NOTIFY_FD   3  /* where the child keeps its end of the socket until the seal */
#define SANDBOX_WAKE_NOTIFS 32 /* notifications answered per wake-up, at most */
#define SANDBOX_LOG_PER_S   10 /* refusals logged per server and second, at most */

/* A server's counts, for the life of the process (so /metrics stays monotonic across reloads). */
struct sandbox_server {
    struct metrics_row row;
    uint64_t refused[SANDBOX_REFUSED_LABELS];
    struct log_rate rate; /* refusals logged, SANDBOX_LOG_PER_S a second */
};

struct sandbox_watch {
    int fd; /* the listener */
    struct loop_watch *w;
    struct sandbox_server *srv;
    pid_t pid;
    char tag[64];
};

static struct metrics_row *sandbox_servers;
/* The socket of the spawn under way: [0] the gateway's end, [1] the child's. */
static int sandbox_sock[2] = { -1, -1 };
static int sandbox_taken = -1; /* the listener the last child sent, until taken */
/* 0: the last child's refusals are counted; else why not (an errno); -1: no child yet */
static int sandbox_why = -1;

/* ---- around the clone ------------------------------------------------------------------- */

static void
sandbox_close(int *fd)
{
    if (*fd != -1)
        close(*fd);
    *fd = -1;
}

int
sandbox_notify_prepare(bool on)
{
    sandbox_close(&sandbox_taken); /* a spawn that failed before taking it */
    if (!on) {
        sandbox_why = ENOSYS;
        return 0;
    }
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sandbox_sock);
}

pid_t
sandbox_notify_collect(pid_t pid)
{
    int saved = errno; /* the clone's, when it failed */
    sandbox_close(&sandbox_sock[1]);
    if (sandbox_sock[0] == -1 || pid <= 0) {
        sandbox_close(&sandbox_sock[0]);
        errno = saved;
        return pid;
    }
    int why = 0;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = { .iov_base = &why, .iov_len = sizeof(why) };
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)
    };
    ssize_t n = recvmsg(sandbox_sock[0], &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    int e = errno;
    sandbox_close(&sandbox_sock[0]);
    if (n != (ssize_t)sizeof(why))
        return pid; /* it failed before its seal: the spawn fails anyway */
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (why == 0 && c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS
        && c->cmsg_len == CMSG_LEN(sizeof(int))) {
        memcpy(&sandbox_taken, CMSG_DATA(c), sizeof(int));
        sandbox_why = 0;
        return pid;
    }
    if (why == 0) {
        /* It runs under a filter whose refusals would wait for an answer nobody gives. */
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, __WALL);
        errno = m.msg_flags & MSG_CTRUNC ? EMFILE : e != 0 ? e : EPROTO;
        return -1;
    }
    if (sandbox_why == 0 && why != sandbox_why)
        log_warn(NULL, "seccomp refusals are no longer counted: the kernel gives no listener (%s)",
                 strerror(why));
    sandbox_why = why;
    return pid;
}

SANDBOX_CHILD int
sandbox_notify_keep(void)
{
    if (sandbox_sock[1] == -1)
        return 3;
    if (sandbox_sock[1] != SANDBOX_NOTIFY_FD && dup2(sandbox_sock[1], SANDBOX_NOTIFY_FD) == -1)
        return -1;
    return SANDBOX_NOTIFY_FD + 1;
}

/* One message on the socket: why (0 with the listener fd, else the errno of its refusal). */
SANDBOX_CHILD static int
sandbox_notify_send(int why, int fd)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = { .iov_base = &why, .iov_len = sizeof(why) };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd != -1) {
        m.msg_control = ctl.buf;
        m.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(SANDBOX_NOTIFY_FD, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(why) ? 0 : -1;
}

SANDBOX_CHILD int
sandbox_notify_seal(const struct sock_fprog *notify, const struct sock_fprog *plain)
{
    if (sandbox_sock[1] != -1 && notify->filter != NULL) {
        int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                              SECCOMP_FILTER_FLAG_NEW_LISTENER, notify);
        if (fd >= 0) {
            /* From here a refused call waits for the gateway: none is made before exec. */
            int rc = sandbox_notify_send(0, fd);
            int e = errno;
            close(fd);
            close(SANDBOX_NOTIFY_FD);
            errno = e;
            return rc;
        }
        /* EBUSY: a filter above already has a listener (one per chain); else an old kernel. */
        int why = errno != 0 ? errno : ENOSYS;
        (void)sandbox_notify_send(why, -1);
        close(SANDBOX_NOTIFY_FD);
    }
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, plain);
}

const char *
sandbox_notify_state(void)
{
    static char text[160];
    if (sandbox_why <= 0)
        return "refusals counted (mcpgw_sandbox_refused_total)";
    snprintf(text, sizeof(text), "refusals not counted (the kernel gives no listener: %s)",
             sandbox_why == EBUSY ? "EBUSY, the gateway runs under a filter that has one"
                                  : strerror(sandbox_why));
    return text;
}

/* ---- in the loop ------------------------------------------------------------------------ */

static void sandbox_watch_ready(int fd, uint32_t events, void *arg);

struct sandbox_watch *
sandbox_watch_take(const char *server, pid_t pid, const char *tag)
{
    if (sandbox_taken == -1 || server == NULL) {
        sandbox_close(&sandbox_taken);
        return NULL;
    }
    struct sandbox_watch *w = xcalloc(1, sizeof(*w));
    w->fd = sandbox_taken;
    sandbox_taken = -1;
    w->srv = metrics_row_of(&sandbox_servers, server, sizeof(struct sandbox_server));
    w->pid = pid;
    snprintf(w->tag, sizeof(w->tag), "%s", tag != NULL ? tag : "-");
    return w;
}

int
sandbox_watch_start(struct sandbox_watch *w, struct loop *l)
{
    if (w == NULL)
        return 0;
    w->w = loop_watch_add(l, w->fd, EPOLLIN, sandbox_watch_ready, w);
    return w->w != NULL ? 0 : -1;
}

void
sandbox_watch_free(struct sandbox_watch *w)
{
    if (w == NULL)
        return;
    loop_watch_del(w->w);
    if (w->fd != -1)
        close(w->fd);
    free(w);
}

static void
sandbox_watch_stop(struct sandbox_watch *w)
{
    loop_watch_del(w->w);
    w->w = NULL;
    sandbox_close(&w->fd);
}

static void
sandbox_watch_log(struct sandbox_watch *w, const char *name)
{
    struct sandbox_server *s = w->srv;
    unsigned dropped;
    bool take = log_rate_take(&s->rate, SANDBOX_LOG_PER_S, &dropped);
    if (dropped)
        log_warn(w->tag, "server %s: %u seccomp refusals not logged (rate limit)", s->row.name,
                 dropped);
    if (!take)
        return;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)w->pid);
    const struct log_field f[] = { { "server", s->row.name, false },
                                   { "child", pid, true },
                                   { "syscall", name, false } };
    log_fields(LOG_WARN, w->tag, f, ARRAY_LEN(f),
               "server %s: child %s: %s refused (seccomp, EPERM)", s->row.name, pid, name);
}

/* One notification: answered EPERM, counted, logged. false when there was none to take. */
static bool
sandbox_watch_answer(struct sandbox_watch *w)
{
    struct seccomp_notif req;
    memset(&req, 0, sizeof(req)); /* the kernel refuses a buffer that is not zeroed */
    if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) == -1) {
        if (errno == ENOENT || errno == EINTR) /* ENOENT: its caller died meanwhile */
            return true;
        /* Cannot happen with a zeroed buffer; stop watching rather than spin on it. */
        log_warn(w->tag,
                 "child %d: reading its seccomp listener: %s; its refusals are no "
                 "longer counted",
                 (int)w->pid, strerror(errno));
        sandbox_watch_stop(w);
        return false;
    }
    struct seccomp_notif_resp resp = { .id = req.id, .error = -EPERM, .val = 0, .flags = 0 };
    if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) == -1 && errno != ENOENT)
        log_warn(w->tag, "cannot answer a seccomp refusal of child %d: %s", (int)w->pid,
                 strerror(errno));
    size_t i = sandbox_refused_label(req.data.nr);
    w->srv->refused[i]++;
    sandbox_watch_log(w, sandbox_refused_label_name(i));
    return true;
}

static void
sandbox_watch_ready(int fd, uint32_t events, void *arg)
{
    struct sandbox_watch *w = arg;
    /*
     * RECV blocks while no notification waits: it is called only right after the kernel said one
     * does (a notification whose caller died meanwhile leaves RECV an ENOENT, never a wait).
     */
    bool ready = (events & EPOLLIN) != 0;
    for (int n = 0; ready && n < SANDBOX_WAKE_NOTIFS; n++) {
        if (!sandbox_watch_answer(w))
            return;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ready = poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
        events = (uint32_t)(unsigned short)p.revents;
    }
    /* No process runs under the filter any more: nothing more comes (level-triggered: stop). */
    if (!ready && (events & (EPOLLHUP | EPOLLERR)) != 0)
        sandbox_watch_stop(w);
}

void
sandbox_notify_metrics(struct buf *b)
{
    metrics_family(b, "mcpgw_sandbox_refused_total", "counter",
                   "System calls the seccomp filter of a boxed server's children refused (EPERM), "
                   "by server and system call; a series from its first refusal. Landlock's "
                   "refusals are not counted.");
    char labels[192];
    for (const struct sandbox_server *s = (const struct sandbox_server *)(void *)sandbox_servers;
         s != NULL; s = METRICS_ROW_NEXT(s))
        for (size_t i = 0; i < SANDBOX_REFUSED_LABELS; i++)
            if (s->refused[i] != 0) {
                snprintf(labels, sizeof(labels), "server=\"%s\",syscall=\"%s\"", s->row.name,
                         sandbox_refused_label_name(i));
                metrics_sample(b, "mcpgw_sandbox_refused_total", labels, s->refused[i]);
            }
}

void
sandbox_notify_module_free(void)
{
    sandbox_close(&sandbox_taken);
    metrics_rows_free(&sandbox_servers);
}
