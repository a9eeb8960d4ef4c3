/* SPDX-License-Identifier: MIT */
/*
 * loadgen: the benchmark client. One thread, one epoll loop, HTTP/1.1 keep-alive connections
 * speaking MCP's Streamable HTTP (initialize, notifications/initialized, tools/call), or, for
 * the floor, the same stdio server driven directly over pipes. Answers may come as SSE
 * (chunked `data:` events) or as application/json; only the first 4 KiB of a body is kept, so
 * a 100 MB result costs the client a read and a count. Latencies use CLOCK_MONOTONIC. Results
 * are printed as one JSON object per line on stdout.
 *
 * Modes (tests/bench/run.mjs drives them; `loadgen --help` lists the options):
 *   echo        S sessions x K requests in flight of tools/call echo, for a duration
 *   large       sequential tools/call large {bytes}
 *   init        sequential initialize round trips (spawn included), each session then deleted
 *   hold        open N sessions, K at a time, then leave them idle and read the server's RSS
 *   cancel      explicit notifications/cancelled: client send -> child receipt (child log)
 *   disconnect  drop the connection of a running call -> child receives the cancel
 *   pending     N connections, each with one slow echo, all in flight at once: the server's RSS
 *               growth per request in flight, then every answer checked (--stateless only)
 *
 * --stateless: stateless requests instead (echo, large, disconnect, pending): no initialize, no
 * session; each POST carries MCP-Protocol-Version: 2026-07-28, Mcp-Method, Mcp-Name and the
 * _meta envelope (protocolVersion, clientCapabilities) in its params. Connections stay open
 * (keep-alive) and every request has its own id.
 *
 * --tokens FILE: each request carries `Authorization: LINE`, the file's lines taken round-robin
 * (run.mjs's auth scenarios: the same token every request, or a different one each).
 *
 * With --pid, the server process's utime+stime (/proc/PID/stat) is read at the edges of the
 * measured window, and its VmRSS/VmHWM (/proc/PID/status) where the mode needs them; in echo,
 * also its voluntary context switches (each a wait that slept: a wake-up), summed over its threads,
 * and the utime+stime of its direct children (the gateway's children: "children_cpu_us_per_req").
 *
 * --strace FILE (echo, with --pid): the server's system calls are counted in the measured window
 * by `strace -c -f -o FILE -p PID`, started once the warm-up is over and stopped (SIGINT) at the
 * window's end (but not before STRACE_MIN_REQUESTS answers, within 10 times the duration); the
 * window's answered requests are counted until strace has exited, so FILE's counts and
 * "strace_requests" cover the same span. strace slows every system call down: the
 * time figures of such a run are not the server's. No strace, or one that cannot attach, is an
 * error (exit 1), not a run without counts.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NORETURN     __attribute__((noreturn))
#define PRINTF(a, b) __attribute__((format(printf, a, b)))

#define PREFIX_MAX          4096 /* bytes of each body (or stdout line) kept for checks */
#define HEAD_MAX            16384
#define READ_BUF            (256 * 1024)
#define PROTO               "2025-06-18"
#define STATELESS           "2026-07-28"
#define MAX_ARGV            32
#define NS_PER_S            1000000000ULL
#define NS_PER_MS           1000000ULL
#define STRACE_MIN_REQUESTS 1000 /* --strace: answers counted at least (within 10x --duration) */
#define SLOW_ARGS           "{\"steps\":100000,\"interval_ms\":1000}"
/* disconnect --stateless: the example server's echo, answered after ten minutes unless cancelled */
#define STATELESS_SLOW_ARGS "{\"text\":\"held\",\"delay_ms\":600000}"

extern char **environ;

/* ---- options ---- */

struct options {
    const char *mode;
    const char *url;       /* http://A.B.C.D:PORT/PATH */
    const char *cmd;       /* direct: the stdio server's command line (split on spaces) */
    const char *label;     /* copied into the output */
    const char *header;    /* one more request header line ("Authorization: Bearer ..."), or NULL */
    const char *tokens;    /* a file of Authorization values, one a line, used round-robin */
    const char *child_log; /* cancel, disconnect: the child's --log --log-times file */
    const char *strace;    /* echo: strace -c's output file (the window's system calls) */
    long sessions;
    long inflight;
    double duration;
    double warmup;
    long count;
    long bytes;
    long text_bytes;
    long timeout_ms;
    long overshoot;
    long give_up;
    long delay_ms; /* pending: the echo's delay_ms */
    long children; /* pending: wait for this many initialized children first (0: do not) */
    bool stateless;
    pid_t pid;
};

static struct options opt = {
    .label = "",
    .sessions = 1,
    .inflight = 1,
    .duration = 3,
    .warmup = 0.5,
    .count = 100,
    .bytes = 1048576,
    .text_bytes = 32,
    .timeout_ms = 2000,
    .overshoot = 0,
    .give_up = 3,
    .delay_ms = 5000,
};

static struct sockaddr_in target;
static char target_host[96];
static char target_path[256];
static int ep = -1;
static uint64_t tick_ns; /* one clock tick of /proc/PID/stat */
static char **tokens;    /* --tokens: the Authorization values */
static size_t ntokens, token_next;
static long tokens_sent; /* requests that carried one */

/* ---- small helpers ---- */

static PRINTF(1, 2) NORETURN void die(const char *fmt, ...)
{
    va_list ap;

    fputs("loadgen: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *
xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        die("out of memory (%zu bytes)", n);
    return p;
}

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void
sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / NS_PER_S), .tv_nsec = (long)(ns % NS_PER_S) };

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static uint64_t
self_cpu_ns(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * NS_PER_S
           + ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000;
}

/* utime+stime of pid in ns (clock-tick resolution) into *cpu_ns, and its stime added to *sys_ns
 * (unless NULL); false, nothing written and *why set, when /proc cannot give them (pid gone). */
static bool
proc_cpu_read(pid_t pid, uint64_t *cpu_ns, uint64_t *sys_ns, const char **why)
{
    char path[64], buf[2048];

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        *why = strerror(errno);
        return false;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        *why = "cannot read";
        return false;
    }
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    /* after ") ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
     * stime */
    if (p == NULL
        || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        *why = "cannot parse";
        return false;
    }
    if (sys_ns != NULL)
        *sys_ns += st * tick_ns;
    *cpu_ns = (ut + st) * tick_ns;
    return true;
}

/* utime+stime of pid in ns; *sys_ns (unless NULL) += its stime. Dies when it cannot be read. */
static uint64_t
proc_cpu_ns(pid_t pid, uint64_t *sys_ns)
{
    uint64_t ns;
    const char *why;

    if (!proc_cpu_read(pid, &ns, sys_ns, &why))
        die("/proc/%ld/stat: %s", (long)pid, why);
    return ns;
}

/* The servers --cmd started (direct mode), whose CPU is the floor's: at most DIRECT_MAX counted. */
#define DIRECT_MAX 64
static pid_t direct_pids[DIRECT_MAX];
static size_t n_direct;

/*
 * The server's CPU time: --pid's, or (direct mode) the sum of the servers this run started;
 * *sys_ns (unless NULL): its part in the kernel (stime).
 */
static uint64_t
server_cpu_ns(uint64_t *sys_ns)
{
    if (sys_ns != NULL)
        *sys_ns = 0;
    if (opt.pid > 0)
        return proc_cpu_ns(opt.pid, sys_ns);
    uint64_t sum = 0;
    for (size_t i = 0; i < n_direct; i++)
        sum += proc_cpu_ns(direct_pids[i], sys_ns);
    return sum;
}

/* A "VmXXX:" field of /proc/PID/status in KiB, or -1. */
static long
server_status_kib(const char *field)
{
    char path[64], line[256];
    long v = -1;

    if (opt.pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)opt.pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    return v;
}

static bool
server_alive(void)
{
    return opt.pid <= 0 || kill(opt.pid, 0) == 0;
}

/* Sums per(FILE of /proc/PID/task/TID/NAME) over the server's threads; 0 without --pid. */
static uint64_t
server_tasks_sum(const char *name, uint64_t (*per)(FILE *f))
{
    char path[64];
    uint64_t sum = 0;

    if (opt.pid <= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/task", (long)opt.pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char f[400];
        snprintf(f, sizeof(f), "%.63s/%.255s/%.31s", path, e->d_name, name);
        FILE *fp = fopen(f, "re");
        if (fp == NULL)
            continue;
        sum += per(fp);
        fclose(fp);
    }
    closedir(d);
    return sum;
}

static uint64_t
task_wakeups(FILE *f)
{
    char line[256];
    uint64_t n = 0;

    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
            n += strtoull(line + 24, NULL, 10);
    return n;
}

/* The server's voluntary context switches, summed over its threads (/proc/PID/task/N/status):
 * each is a wait that blocked, so each is a wake-up. 0 without --pid. */
static uint64_t
server_wakeups(void)
{
    return server_tasks_sum("status", task_wakeups);
}

/* The CPU time of the children a thread's children file lists; one gone meanwhile counts 0. */
static uint64_t
task_children_cpu(FILE *f)
{
    long kid;
    uint64_t sum = 0;

    while (fscanf(f, "%ld", &kid) == 1) {
        uint64_t ns;
        const char *why;
        if (proc_cpu_read((pid_t)kid, &ns, NULL, &why))
            sum += ns;
    }
    return sum;
}

/*
 * The CPU time of --pid's children (/proc/PID/task/TID/children, direct children only): what the
 * processes behind the server spend, e.g. the gateway's children. A child gone between the list
 * and its read, or started in the window, counts for what /proc shows at each reading.
 */
static uint64_t
server_children_cpu_ns(void)
{
    return server_tasks_sum("children", task_children_cpu);
}

/* --strace: the tracer's pid and the read end of its stderr. */
static pid_t strace_pid = -1;
static int strace_err = -1;

/*
 * Attaches `strace -c -f -o FILE -p PID` to the server and returns once it says it attached
 * (its "Process N attached" on stderr), within 10 s; dies otherwise (no strace, no permission).
 */
static void
strace_start(void)
{
    int pfd[2];
    char pid[32];
    posix_spawn_file_actions_t fa;

    if (pipe2(pfd, O_CLOEXEC) == -1)
        die("pipe2: %s", strerror(errno));
    snprintf(pid, sizeof(pid), "%ld", (long)opt.pid);
    char a0[] = "strace", a1[] = "-c", a2[] = "-f", a3[] = "-o", a5[] = "-p", out[PATH_MAX];
    snprintf(out, sizeof(out), "%s", opt.strace);
    char *argv[] = { a0, a1, a2, a3, out, a5, pid, NULL };
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&strace_pid, "strace", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (rc != 0)
        die("--strace: cannot run strace: %s (Debian: apt-get install strace)", strerror(rc));
    strace_err = pfd[0];
    char text[4096];
    size_t have = 0;
    uint64_t deadline = now_ns() + 10 * NS_PER_S;
    for (;;) {
        struct pollfd pf = { .fd = strace_err, .events = POLLIN };
        ssize_t n = 1;
        if (poll(&pf, 1, 100) == 1)
            n = read(strace_err, text + have, sizeof(text) - 1 - have);
        if (n > 0 && pf.revents != 0) {
            have += (size_t)n;
            text[have] = '\0';
            if (strstr(text, " attached") != NULL)
                return;
            if (have == sizeof(text) - 1)
                have = 0;
        }
        int st;
        if (n <= 0 || waitpid(strace_pid, &st, WNOHANG) == strace_pid || now_ns() > deadline)
            die("--strace: strace did not attach to %ld: %s", (long)opt.pid,
                have ? text : "(nothing on its stderr)");
    }
}

/* Whether the tracer has exited; dies if it ended in failure. */
static bool
strace_gone(void)
{
    int st;

    if (waitpid(strace_pid, &st, WNOHANG) != strace_pid)
        return false;
    /* Interrupted, strace prints its table, detaches, and ends by the same signal. */
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        die("--strace: strace ended with status %d", st);
    strace_pid = -1;
    close(strace_err);
    strace_err = -1;
    return true;
}

/* Resets the server's VmHWM to its current RSS. */
static void
server_reset_hwm(void)
{
    char path[64];

    if (opt.pid <= 0)
        return;
    snprintf(path, sizeof(path), "/proc/%ld/clear_refs", (long)opt.pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd == -1 || write(fd, "5", 1) != 1)
        fprintf(stderr, "loadgen: cannot reset VmHWM of %ld: %s\n", (long)opt.pid, strerror(errno));
    if (fd != -1)
        close(fd);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Latency samples in ns. */
struct samples {
    uint64_t *v;
    size_t n;
    size_t cap;
};

static void
samples_add(struct samples *s, uint64_t ns)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = ns;
}

static double
samples_q_us(const struct samples *s, double q)
{
    if (s->n == 0)
        return -1;
    size_t i = (size_t)(q * (double)s->n);
    if (i >= s->n)
        i = s->n - 1;
    return (double)s->v[i] / 1e3;
}

static double
samples_mean_us(const struct samples *s)
{
    double sum = 0;

    for (size_t i = 0; i < s->n; i++)
        sum += (double)s->v[i];
    return s->n ? sum / (double)s->n / 1e3 : -1;
}

/* Prints "count":n,"p50_us":...; sorts s. */
static void
print_quantiles(const struct samples *s)
{
    qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
    printf("\"samples\":%zu,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
           "\"mean_us\":%.1f",
           s->n, samples_q_us(s, 0.5), samples_q_us(s, 0.9), samples_q_us(s, 0.99),
           samples_q_us(s, 1.0), samples_mean_us(s));
}

static void
print_head(const char *mode)
{
    printf("{\"mode\":\"%s\",\"label\":\"%s\",\"via\":\"%s\"", mode, opt.label,
           opt.cmd ? "direct" : "http");
}

static void
print_end(void)
{
    printf("}\n");
    fflush(stdout);
}

/* Whether a body prefix holds the answer to request id: `"id":ID` then `,` or `}`, and a
 * "result" member. */
static bool
answer_ok(const char *p, size_t len, long id)
{
    char pat[40];
    int pl = snprintf(pat, sizeof(pat), "\"id\":%ld", id);
    const char *q = memmem(p, len, pat, (size_t)pl);

    if (q == NULL || (size_t)(q - p) + (size_t)pl >= len)
        return false;
    char c = q[pl];
    return (c == ',' || c == '}') && memmem(p, len, "\"result\"", 8) != NULL;
}

/* ---- HTTP connections ---- */

enum pstate {
    P_HEAD = 0,
    P_BODY_LEN,
    P_CHUNK_SIZE,
    P_CHUNK_DATA,
    P_CHUNK_CRLF,
    P_TRAILER,
    P_BODY_EOF,
    P_DONE,
};

enum kind {
    K_CONN = 1,
    K_CHILD_OUT,
    K_CHILD_IN,
};

struct conn;
typedef void conn_fn(struct conn *c);

struct conn {
    enum kind kind; /* first: epoll data points here */
    int fd;
    bool want_out;
    /* request */
    const char *mcp_method; /* stateless: Mcp-Method (and MCP-Protocol-Version), or NULL */
    const char *mcp_name;   /* stateless: Mcp-Name, or NULL */
    char *out;
    size_t out_len;
    size_t out_off;
    size_t out_cap;
    uint64_t t_sent;
    long id;
    bool busy;
    /* response */
    enum pstate ps;
    char head[HEAD_MAX];
    size_t head_len;
    char line[64];
    size_t line_len;
    uint64_t remain;
    int status;
    bool chunked;
    bool close_after;
    bool failed;
    char sid[256];
    char prefix[PREFIX_MAX];
    size_t prefix_len;
    uint64_t body_len;
    /* owner */
    conn_fn *done;
    void *user;
    long user_n;
};

static void
ep_ctl(int op, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = { .events = events, .data.ptr = ptr };

    if (epoll_ctl(ep, op, fd, &ev) == -1 && op != EPOLL_CTL_DEL)
        die("epoll_ctl: %s", strerror(errno));
}

static void
conn_close(struct conn *c)
{
    if (c->fd != -1) {
        ep_ctl(EPOLL_CTL_DEL, c->fd, 0, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->want_out = false;
}

static void conn_finish(struct conn *c, bool failed);

/* Connections whose request failed before it left (no connection): finished from the loop,
 * not from inside conn_request, so a refusing server cannot recurse us into a stack overflow. */
static struct conn **deferred;
static size_t ndeferred, capdeferred;
static long connect_failures;

static void
conn_defer_failure(struct conn *c)
{
    if (ndeferred == capdeferred) {
        capdeferred = capdeferred ? capdeferred * 2 : 64;
        deferred = xrealloc(deferred, capdeferred * sizeof(*deferred));
    }
    deferred[ndeferred++] = c;
}

static void
deferred_run(void)
{
    while (ndeferred > 0) {
        struct conn *c = deferred[--ndeferred];
        conn_finish(c, true);
    }
}

/* (Re)connects c; returns false when the connection is refused. */
static bool
conn_connect(struct conn *c)
{
    int one = 1;

    conn_close(c);
    c->kind = K_CONN;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd == -1)
        die("socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&target, sizeof(target)) == -1) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    ep_ctl(EPOLL_CTL_ADD, c->fd, EPOLLIN, c);
    return true;
}

static struct conn *
conn_new(void)
{
    struct conn *c = xrealloc(NULL, sizeof(*c));

    memset(c, 0, sizeof(*c));
    c->kind = K_CONN;
    c->fd = -1;
    if (!conn_connect(c))
        die("connect %s:%u: %s", target_host, ntohs(target.sin_port), strerror(errno));
    return c;
}

static void
conn_free(struct conn *c)
{
    for (size_t i = 0; i < ndeferred; i++)
        if (deferred[i] == c)
            deferred[i--] = deferred[--ndeferred];
    conn_close(c);
    free(c->out);
    free(c);
}

static void
conn_reset_response(struct conn *c)
{
    c->ps = P_HEAD;
    c->head_len = 0;
    c->line_len = 0;
    c->status = 0;
    c->chunked = false;
    c->close_after = false;
    c->failed = false;
    c->sid[0] = '\0';
    c->prefix_len = 0;
    c->body_len = 0;
    c->remain = 0;
}

static void
conn_finish(struct conn *c, bool failed)
{
    c->failed = failed;
    c->busy = false;
    if (failed || c->close_after)
        conn_close(c);
    c->ps = P_DONE;
    if (c->done != NULL)
        c->done(c);
}

static void
conn_flush(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN) {
            if (!c->want_out) {
                ep_ctl(EPOLL_CTL_MOD, c->fd, EPOLLIN | EPOLLOUT, c);
                c->want_out = true;
            }
            return;
        }
        if (n == -1) {
            conn_close(c);
            conn_defer_failure(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->want_out) {
        ep_ctl(EPOLL_CTL_MOD, c->fd, EPOLLIN, c);
        c->want_out = false;
    }
}

static PRINTF(2, 3) void out_append(struct conn *c, const char *fmt, ...)
{
    va_list ap;

    for (;;) {
        size_t room = c->out_cap - c->out_len;
        va_start(ap, fmt);
        int n = vsnprintf(c->out + c->out_len, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            die("vsnprintf failed");
        if ((size_t)n < room) {
            c->out_len += (size_t)n;
            return;
        }
        c->out_cap = c->out_cap * 2 + (size_t)n + 256;
        c->out = xrealloc(c->out, c->out_cap);
    }
}

/* Starts one HTTP request on c (reconnecting when the last answer closed it). */
static void
conn_request(struct conn *c, const char *method, const char *sid, const char *body)
{
    if (c->fd == -1 && !conn_connect(c)) {
        connect_failures++;
        conn_reset_response(c);
        c->busy = true;
        conn_defer_failure(c);
        return;
    }
    if (c->out_cap == 0) {
        c->out_cap = 1024;
        c->out = xrealloc(NULL, c->out_cap);
    }
    c->out_len = c->out_off = 0;
    size_t blen = body ? strlen(body) : 0;
    out_append(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\n",
               method, target_path, target_host);
    if (body != NULL)
        out_append(c, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
    if (sid != NULL && sid[0] != '\0')
        out_append(c, "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: " PROTO "\r\n", sid);
    else if (c->mcp_method != NULL)
        out_append(c, "MCP-Protocol-Version: " STATELESS "\r\nMcp-Method: %s\r\n", c->mcp_method);
    if (c->mcp_method != NULL && c->mcp_name != NULL)
        out_append(c, "Mcp-Name: %s\r\n", c->mcp_name);
    if (opt.header != NULL)
        out_append(c, "%s\r\n", opt.header);
    if (ntokens > 0) {
        out_append(c, "Authorization: %s\r\n", tokens[token_next]);
        token_next = (token_next + 1) % ntokens;
        tokens_sent++;
    }
    out_append(c, "\r\n%s", body ? body : "");
    conn_reset_response(c);
    c->busy = true;
    c->t_sent = now_ns();
    conn_flush(c);
}

static void
body_take(struct conn *c, const char *p, size_t n)
{
    if (c->prefix_len < PREFIX_MAX) {
        size_t k = n < PREFIX_MAX - c->prefix_len ? n : PREFIX_MAX - c->prefix_len;
        memcpy(c->prefix + c->prefix_len, p, k);
        c->prefix_len += k;
    }
    c->body_len += n;
}

/* Body bytes up to what the length or chunk still holds; at its end the parser goes to next. */
static size_t
body_run(struct conn *c, const char *p, size_t n, enum pstate next)
{
    size_t k = n < c->remain ? n : (size_t)c->remain;
    body_take(c, p, k);
    c->remain -= k;
    if (c->remain == 0)
        c->ps = next;
    return k;
}

static bool
head_has(const char *line, size_t len, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);

    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return false;
    const char *v = line + nl + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *val = v;
    *vlen = (size_t)(end - v);
    return true;
}

/* Parses the status line and headers in c->head[0, len). */
static bool
head_parse(struct conn *c, size_t len)
{
    const char *p = c->head, *end = c->head + len;
    bool has_len = false;

    if (len < 12 || strncmp(p, "HTTP/1.", 7) != 0)
        return false;
    c->status = atoi(p + 9);
    if (strncmp(p, "HTTP/1.0", 8) == 0)
        c->close_after = true;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            break;
        size_t ll = (size_t)(eol - p);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        const char *v;
        size_t vl;
        if (head_has(p, ll, "content-length", &v, &vl)) {
            c->remain = strtoull(v, NULL, 10);
            has_len = true;
        } else if (head_has(p, ll, "transfer-encoding", &v, &vl)) {
            c->chunked = memmem(v, vl, "chunked", 7) != NULL;
        } else if (head_has(p, ll, "connection", &v, &vl)) {
            if (vl == 5 && strncasecmp(v, "close", 5) == 0)
                c->close_after = true;
        } else if (head_has(p, ll, "mcp-session-id", &v, &vl)) {
            if (vl >= sizeof(c->sid))
                vl = sizeof(c->sid) - 1;
            memcpy(c->sid, v, vl);
            c->sid[vl] = '\0';
        }
        p = eol + 1;
    }
    if (c->chunked)
        c->ps = P_CHUNK_SIZE;
    else if (has_len)
        c->ps = P_BODY_LEN;
    else if (c->status == 204 || c->status == 304)
        c->ps = P_DONE;
    else
        c->ps = P_BODY_EOF;
    return true;
}

/* Reads a CRLF-terminated line into c->line; returns bytes consumed, sets *full at its end. */
static size_t
line_take(struct conn *c, const char *p, size_t n, bool *full)
{
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) + 1 : n;

    for (size_t i = 0; i < take; i++)
        if (c->line_len < sizeof(c->line) - 1 && p[i] != '\r' && p[i] != '\n')
            c->line[c->line_len++] = p[i];
    c->line[c->line_len] = '\0';
    *full = nl != NULL;
    return take;
}

/* Feeds received bytes to the response parser; false on a protocol error. */
static bool
conn_parse(struct conn *c, const char *p, size_t n)
{
    while (n > 0 || c->ps == P_DONE) {
        bool full;
        size_t k;
        switch (c->ps) {
        case P_HEAD: {
            size_t room = HEAD_MAX - c->head_len;
            k = n < room ? n : room;
            memcpy(c->head + c->head_len, p, k);
            size_t scan_from = c->head_len > 3 ? c->head_len - 3 : 0;
            c->head_len += k;
            char *e = memmem(c->head + scan_from, c->head_len - scan_from, "\r\n\r\n", 4);
            if (e == NULL) {
                if (c->head_len == HEAD_MAX)
                    return false;
                return true;
            }
            size_t hl = (size_t)(e - c->head) + 4;
            size_t used = hl - (c->head_len - k);
            if (!head_parse(c, hl))
                return false;
            p += used;
            n -= used;
            if (c->ps == P_BODY_LEN && c->remain == 0)
                c->ps = P_DONE;
            break;
        }
        case P_BODY_LEN:
            k = body_run(c, p, n, P_DONE);
            p += k;
            n -= k;
            break;
        case P_CHUNK_SIZE:
            k = line_take(c, p, n, &full);
            p += k;
            n -= k;
            if (full) {
                c->remain = strtoull(c->line, NULL, 16);
                c->line_len = 0;
                c->ps = c->remain ? P_CHUNK_DATA : P_TRAILER;
            }
            break;
        case P_CHUNK_DATA:
            k = body_run(c, p, n, P_CHUNK_CRLF);
            p += k;
            n -= k;
            break;
        case P_CHUNK_CRLF:
            k = line_take(c, p, n, &full);
            p += k;
            n -= k;
            if (full) {
                c->line_len = 0;
                c->ps = P_CHUNK_SIZE;
            }
            break;
        case P_TRAILER:
            k = line_take(c, p, n, &full);
            p += k;
            n -= k;
            if (full) {
                bool empty = c->line_len == 0;
                c->line_len = 0;
                if (empty)
                    c->ps = P_DONE;
            }
            break;
        case P_BODY_EOF:
            body_take(c, p, n);
            n = 0;
            break;
        case P_DONE:
            if (n > 0)
                return false; /* bytes after the answer: nothing was asked */
            conn_finish(c, false);
            return true;
        }
    }
    return true;
}

static void
conn_readable(struct conn *c)
{
    static char buf[READ_BUF];

    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        if (n <= 0) {
            bool ok = c->busy && c->ps == P_BODY_EOF;
            conn_close(c);
            if (c->busy)
                conn_finish(c, !ok);
            return;
        }
        if (!c->busy) {
            conn_close(c); /* nothing was asked: the server closed or misbehaved */
            return;
        }
        if (!conn_parse(c, buf, (size_t)n)) {
            conn_finish(c, true);
            return;
        }
        if (c->fd == -1 || !c->busy)
            return;
        if ((size_t)n < sizeof(buf))
            return;
    }
}

/* ---- direct: the stdio server over pipes ---- */

struct child;
typedef void line_fn(struct child *ch, long id, uint64_t t_done);

struct child_end {
    enum kind kind;
    struct child *ch;
};

struct child {
    struct child_end rd;
    struct child_end wr;
    pid_t pid;
    int in_fd;  /* its stdin */
    int out_fd; /* its stdout */
    char *out;
    size_t out_len;
    size_t out_off;
    size_t out_cap;
    bool want_out;
    char prefix[PREFIX_MAX]; /* of the current stdout line */
    size_t prefix_len;
    uint64_t line_len;
    uint64_t last_line_len;
    bool last_ok;
    bool eof;
    line_fn *on_line;
    void *user;
};

static char *cmd_argv[MAX_ARGV + 1];

static void
cmd_split(void)
{
    static char copy[4096];
    size_t n = 0;

    snprintf(copy, sizeof(copy), "%s", opt.cmd);
    for (char *tok = strtok(copy, " "); tok != NULL; tok = strtok(NULL, " "))
        if (n < MAX_ARGV)
            cmd_argv[n++] = tok;
    cmd_argv[n] = NULL;
    if (n == 0)
        die("--cmd is empty");
}

static struct child *
child_new(line_fn *on_line, void *user)
{
    int in[2], out[2];
    posix_spawn_file_actions_t fa;
    struct child *ch = xrealloc(NULL, sizeof(*ch));

    memset(ch, 0, sizeof(*ch));
    if (pipe2(in, O_CLOEXEC) == -1 || pipe2(out, O_CLOEXEC) == -1)
        die("pipe2: %s", strerror(errno));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&ch->pid, cmd_argv[0], &fa, NULL, cmd_argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        die("spawn %s: %s", cmd_argv[0], strerror(rc));
    if (n_direct < DIRECT_MAX)
        direct_pids[n_direct++] = ch->pid;
    close(in[0]);
    close(out[1]);
    ch->in_fd = in[1];
    ch->out_fd = out[0];
    fcntl(ch->in_fd, F_SETFL, O_NONBLOCK);
    fcntl(ch->out_fd, F_SETFL, O_NONBLOCK);
    ch->rd.kind = K_CHILD_OUT;
    ch->rd.ch = ch;
    ch->wr.kind = K_CHILD_IN;
    ch->wr.ch = ch;
    ch->on_line = on_line;
    ch->user = user;
    ep_ctl(EPOLL_CTL_ADD, ch->out_fd, EPOLLIN, &ch->rd);
    return ch;
}

/* Closes its stdin (the server exits at EOF) and reaps it. */
static void
child_free(struct child *ch)
{
    for (size_t i = 0; i < n_direct; i++)
        if (direct_pids[i] == ch->pid) {
            direct_pids[i] = direct_pids[--n_direct];
            break;
        }

    if (ch->want_out)
        ep_ctl(EPOLL_CTL_DEL, ch->in_fd, 0, NULL);
    close(ch->in_fd);
    ep_ctl(EPOLL_CTL_DEL, ch->out_fd, 0, NULL);
    close(ch->out_fd);
    int st;
    while (waitpid(ch->pid, &st, 0) == -1 && errno == EINTR)
        ;
    free(ch->out);
    free(ch);
}

static void
child_flush(struct child *ch)
{
    while (ch->out_off < ch->out_len) {
        ssize_t n = write(ch->in_fd, ch->out + ch->out_off, ch->out_len - ch->out_off);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN) {
            if (!ch->want_out) {
                ep_ctl(EPOLL_CTL_ADD, ch->in_fd, EPOLLOUT, &ch->wr);
                ch->want_out = true;
            }
            return;
        }
        if (n == -1)
            die("write to child %ld: %s", (long)ch->pid, strerror(errno));
        ch->out_off += (size_t)n;
    }
    ch->out_len = ch->out_off = 0;
    if (ch->want_out) {
        ep_ctl(EPOLL_CTL_DEL, ch->in_fd, 0, NULL);
        ch->want_out = false;
    }
}

/* Queues one line (the newline is added) toward the child's stdin. */
static void
child_send(struct child *ch, const char *line)
{
    size_t n = strlen(line);

    if (ch->out_len + n + 1 > ch->out_cap) {
        ch->out_cap = ch->out_len + n + 1 + 4096;
        ch->out = xrealloc(ch->out, ch->out_cap);
    }
    memcpy(ch->out + ch->out_len, line, n);
    ch->out[ch->out_len + n] = '\n';
    ch->out_len += n + 1;
    child_flush(ch);
}

/* The id of the answer in prefix, or -1 when it is not a result carrying a numeric id. */
static long
line_id(const char *p, size_t len)
{
    const char *q = memmem(p, len, "\"id\":", 5);

    if (q == NULL || memmem(p, len, "\"result\"", 8) == NULL)
        return -1;
    q += 5;
    if ((size_t)(q - p) >= len || *q < '0' || *q > '9')
        return -1;
    return strtol(q, NULL, 10);
}

static void
child_readable(struct child *ch)
{
    static char buf[READ_BUF];

    for (;;) {
        ssize_t n = read(ch->out_fd, buf, sizeof(buf));
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        if (n <= 0) {
            ch->eof = true;
            ep_ctl(EPOLL_CTL_DEL, ch->out_fd, 0, NULL);
            return;
        }
        const char *p = buf;
        size_t left = (size_t)n;
        while (left > 0) {
            const char *nl = memchr(p, '\n', left);
            size_t k = nl ? (size_t)(nl - p) : left;
            if (ch->prefix_len < PREFIX_MAX) {
                size_t c = k < PREFIX_MAX - ch->prefix_len ? k : PREFIX_MAX - ch->prefix_len;
                memcpy(ch->prefix + ch->prefix_len, p, c);
                ch->prefix_len += c;
            }
            ch->line_len += k;
            if (nl == NULL)
                break;
            uint64_t t = now_ns();
            long id = line_id(ch->prefix, ch->prefix_len);
            ch->last_line_len = ch->line_len;
            ch->last_ok = id >= 0;
            ch->prefix_len = 0;
            ch->line_len = 0;
            if (ch->on_line != NULL)
                ch->on_line(ch, id, t);
            p = nl + 1;
            left -= k + 1;
        }
        if ((size_t)n < sizeof(buf))
            return;
    }
}

/* ---- the loop ---- */

static void
loop_once(int timeout_ms)
{
    struct epoll_event evs[256];

    if (ndeferred > 0) {
        deferred_run();
        timeout_ms = 0;
    }
    int n = epoll_wait(ep, evs, 256, timeout_ms);

    if (n == -1 && errno != EINTR)
        die("epoll_wait: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        enum kind *k = evs[i].data.ptr;
        if (*k == K_CONN) {
            struct conn *c = (struct conn *)k;
            if ((evs[i].events & EPOLLOUT) && c->fd != -1)
                conn_flush(c);
            if ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && c->fd != -1)
                conn_readable(c);
        } else if (*k == K_CHILD_OUT) {
            child_readable(((struct child_end *)k)->ch);
        } else {
            child_flush(((struct child_end *)k)->ch);
        }
    }
}

/* Runs the loop until *flag is true or deadline (ns, 0 = none) passes; false on timeout. */
static bool
loop_until(const bool *flag, uint64_t deadline)
{
    while (!*flag) {
        int to = -1;
        if (deadline) {
            uint64_t t = now_ns();
            if (t >= deadline)
                return false;
            to = (int)((deadline - t) / NS_PER_MS) + 1;
        }
        loop_once(to);
    }
    return true;
}

static void
flag_done(struct conn *c)
{
    *(bool *)c->user = true;
}

/* One request on c, waited for (the loop keeps serving everything else meanwhile). */
static bool
roundtrip(struct conn *c, const char *method, const char *sid, const char *body)
{
    bool done = false;
    conn_fn *saved_fn = c->done;
    void *saved_user = c->user;

    c->done = flag_done;
    c->user = &done;
    conn_request(c, method, sid, body);
    bool ok = loop_until(&done, now_ns() + (uint64_t)opt.timeout_ms * 5 * NS_PER_MS);
    c->done = saved_fn;
    c->user = saved_user;
    if (!ok) {
        conn_close(c);
        c->busy = false;
        c->failed = true;
    }
    return ok && !c->failed;
}

static const char init_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"" PROTO "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"loadgen\",\"version\":\"1\"}}}";
static const char initialized_body[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";

/* initialize + notifications/initialized on c; the session id lands in sid. */
static bool
session_open(struct conn *c, char *sid, size_t sidlen)
{
    if (!roundtrip(c, "POST", NULL, init_body) || c->status != 200 || c->sid[0] == '\0'
        || !answer_ok(c->prefix, c->prefix_len, 0))
        return false;
    snprintf(sid, sidlen, "%s", c->sid);
    return roundtrip(c, "POST", sid, initialized_body) && c->status / 100 == 2;
}

static bool
child_initialize(struct child *ch)
{
    char line[512];

    snprintf(line, sizeof(line), "%s", init_body);
    child_send(ch, line);
    uint64_t deadline = now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS;
    line_fn *saved = ch->on_line;
    ch->on_line = NULL;
    ch->last_line_len = 0;
    while (ch->last_line_len == 0 && now_ns() < deadline && !ch->eof)
        loop_once(10);
    ch->on_line = saved;
    bool ok = ch->last_line_len > 0 && ch->last_ok;
    child_send(ch, initialized_body);
    return ok;
}

/* ---- echo / large: sessions x in flight ---- */

struct echo_run {
    const char *tool;
    char args[8192]; /* the tool's arguments object */
    uint64_t t_start;
    uint64_t t_end;
    bool measuring;
    bool stopping;
    long inflight;
    long done_in_window;
    long errors;
    long total;
    long next_id;
    long issue_limit; /* requests to send in all, 0 = no limit */
    struct samples lat;
    uint64_t body_bytes;
};

static struct echo_run run;

/* A stateless request's _meta (the client's capabilities: none). */
#define STATELESS_META                                                          \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" STATELESS "\"," \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* tools/call TOOL with ARGS (a JSON object): legacy, or with --stateless the _meta envelope. */
static void
call_body(char *buf, size_t len, long id, const char *tool, const char *args)
{
    snprintf(
        buf, len,
        "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
        "\"arguments\":%s%s}}",
        id, tool, args, opt.stateless ? "," STATELESS_META : "");
}

/* With --stateless, marks c's next requests as 2026-07-28 tools/call of tool (Mcp-* headers). */
static void
conn_stateless(struct conn *c, const char *tool)
{
    c->mcp_method = opt.stateless ? "tools/call" : NULL;
    c->mcp_name = opt.stateless ? tool : NULL;
}

static void
echo_body(char *buf, size_t len, long id)
{
    call_body(buf, len, id, run.tool, run.args);
}

static void
echo_account(uint64_t t_sent, uint64_t t_done, bool ok, uint64_t bytes)
{
    run.total++;
    run.inflight--;
    if (!ok)
        run.errors++;
    if (run.measuring && t_done >= run.t_start && ok) {
        run.done_in_window++;
        run.body_bytes += bytes;
        samples_add(&run.lat, t_done - t_sent);
    }
}

static void echo_http_next(struct conn *c);

static void
echo_http_done(struct conn *c)
{
    uint64_t t = now_ns();
    bool ok = !c->failed && c->status == 200 && answer_ok(c->prefix, c->prefix_len, c->id);

    echo_account(c->t_sent, t, ok, c->body_len);
    if (!ok && run.errors <= 3)
        fprintf(stderr, "loadgen: bad answer (status %d, failed %d): %.*s\n", c->status,
                (int)c->failed, (int)(c->prefix_len < 300 ? c->prefix_len : 300), c->prefix);
    if (!ok && run.errors > 1000)
        die("more than 1000 failed requests");
    echo_http_next(c);
}

static void
echo_http_next(struct conn *c)
{
    char body[9000];

    if (run.stopping || (run.issue_limit > 0 && run.next_id >= run.issue_limit))
        return;
    c->id = ++run.next_id;
    echo_body(body, sizeof(body), c->id);
    run.inflight++;
    conn_stateless(c, run.tool);
    conn_request(c, "POST", (const char *)c->user, body);
}

struct lane {
    long id;
    uint64_t t_sent;
};

struct direct_sess {
    struct child *ch;
    struct lane *lanes;
    long nlanes;
};

static void
echo_direct_send(struct direct_sess *ds, struct lane *l)
{
    char body[9000];

    if (run.stopping || (run.issue_limit > 0 && run.next_id >= run.issue_limit))
        return;
    l->id = ++run.next_id;
    echo_body(body, sizeof(body), l->id);
    run.inflight++;
    l->t_sent = now_ns();
    child_send(ds->ch, body);
}

static void
echo_direct_line(struct child *ch, long id, uint64_t t)
{
    struct direct_sess *ds = ch->user;

    for (long i = 0; i < ds->nlanes; i++) {
        struct lane *l = &ds->lanes[i];
        if (l->id == id && id > 0) {
            l->id = 0;
            echo_account(l->t_sent, t, ch->last_ok, ch->last_line_len);
            echo_direct_send(ds, l);
            return;
        }
    }
    run.errors++;
}

/* The loop for a timed run: warmup, then the measured window, then a drain. */
static void
echo_loop(double warmup, double duration, long max_count)
{
    uint64_t t0 = now_ns();
    uint64_t cpu0 = 0, cpu1 = 0, sys0 = 0, sys1 = 0, self0 = 0, self1 = 0, wake0 = 0, wake1 = 0;
    uint64_t kids0 = 0, kids1 = 0;

    run.t_start = t0 + (uint64_t)(warmup * 1e9);
    for (;;) {
        uint64_t t = now_ns();
        if (!run.measuring && t >= run.t_start) {
            if (opt.strace != NULL) {
                strace_start();
                t = now_ns();
            }
            run.measuring = true;
            run.t_start = t;
            run.t_end = t + (uint64_t)(duration * 1e9);
            cpu0 = server_cpu_ns(&sys0);
            kids0 = server_children_cpu_ns();
            self0 = self_cpu_ns();
            wake0 = server_wakeups();
        }
        /* Counting system calls, a window of a few answers would be mostly its edges: on a busy
         * machine it goes on until STRACE_MIN_REQUESTS (or 10 times the duration). */
        bool short_count = opt.strace != NULL && run.done_in_window < STRACE_MIN_REQUESTS
                           && t < run.t_start + (uint64_t)(10 * duration * 1e9);
        if (run.measuring
            && ((t >= run.t_end && !short_count)
                || (max_count > 0 && run.done_in_window >= max_count)))
            break;
        if (run.inflight == 0) {
            if (run.issue_limit > 0 && run.next_id >= run.issue_limit)
                break;
            die("nothing in flight (every connection failed?)");
        }
        uint64_t until = run.measuring ? run.t_end : run.t_start;
        loop_once(until > t ? (int)((until - t) / NS_PER_MS) + 1 : 10);
    }
    uint64_t t_end = now_ns();
    cpu1 = server_cpu_ns(&sys1);
    kids1 = server_children_cpu_ns();
    self1 = self_cpu_ns();
    wake1 = server_wakeups();
    long window = run.done_in_window;
    long traced = -1;
    if (strace_pid > 0) {
        /* Until strace has detached, the server's calls are counted: so are its answers. */
        uint64_t until = now_ns() + 30 * NS_PER_S;
        kill(strace_pid, SIGINT);
        while (!strace_gone()) {
            if (now_ns() > until)
                die("--strace: strace did not exit within 30 s of SIGINT");
            loop_once(5);
        }
        traced = run.done_in_window;
    }
    run.stopping = true;
    run.measuring = false;
    uint64_t drain_until = now_ns() + (uint64_t)opt.timeout_ms * 5 * NS_PER_MS;
    while (run.inflight > 0 && now_ns() < drain_until)
        loop_once(10);
    double secs = (double)(t_end - run.t_start) / 1e9;
    printf(",\"seconds\":%.3f,\"requests\":%ld,\"errors\":%ld,\"rps\":%.1f,", secs, window,
           run.errors, (double)window / secs);
    if (opt.pid > 0 || n_direct > 0)
        printf("\"server_cpu_ms\":%.1f,\"server_cpu_us_per_req\":%.2f,"
               "\"server_sys_us_per_req\":%.2f,",
               (double)(cpu1 - cpu0) / 1e6,
               window ? (double)(cpu1 - cpu0) / 1e3 / (double)window : -1.0,
               window ? (double)(sys1 - sys0) / 1e3 / (double)window : -1.0);
    if (opt.pid > 0)
        printf("\"server_wakeups\":%" PRIu64 ",\"server_wakeups_per_req\":%.3f,"
               "\"children_cpu_us_per_req\":%.2f,",
               wake1 - wake0, window ? (double)(wake1 - wake0) / (double)window : -1.0,
               window && kids1 >= kids0 ? (double)(kids1 - kids0) / 1e3 / (double)window : -1.0);
    if (traced >= 0)
        printf("\"strace_requests\":%ld,", traced);
    printf("\"client_cpu_util\":%.3f,\"body_bytes\":%" PRIu64 ",",
           (double)(self1 - self0) / (double)(t_end - run.t_start), run.body_bytes);
    if (ntokens > 0)
        printf("\"tokens\":%zu,\"tokens_sent\":%ld,", ntokens, tokens_sent);
    print_quantiles(&run.lat);
}

static void
mode_echo(bool large)
{
    long s = large ? 1 : opt.sessions, k = large ? 1 : opt.inflight;

    run.tool = large ? "large" : "echo";
    run.issue_limit = large ? opt.count : 0;
    if (large) {
        snprintf(run.args, sizeof(run.args), "{\"bytes\":%ld}", opt.bytes);
    } else {
        long tb = opt.text_bytes < 1 ? 1 : opt.text_bytes > 8000 ? 8000 : opt.text_bytes;
        char text[8001];
        for (long i = 0; i < tb; i++)
            text[i] = (char)('a' + i % 26);
        text[tb] = '\0';
        snprintf(run.args, sizeof(run.args), "{\"text\":\"%s\"}", text);
    }
    long rss0 = server_status_kib("VmRSS");
    if (large)
        server_reset_hwm();
    if (opt.cmd == NULL) {
        struct conn **cs = xrealloc(NULL, (size_t)(s * k) * sizeof(*cs));
        char(*sids)[256] = xrealloc(NULL, (size_t)s * sizeof(*sids));
        for (long i = 0; i < s; i++) {
            struct conn *c = conn_new();
            /* stateless: no session, S x K connections that each send their own requests */
            if (!opt.stateless && !session_open(c, sids[i], sizeof(sids[i])))
                die("session %ld: initialize failed (status %d)", i, c->status);
            for (long j = 0; j < k; j++) {
                struct conn *cj = j == 0 ? c : conn_new();
                cj->user = opt.stateless ? NULL : sids[i];
                cj->done = echo_http_done;
                cs[i * k + j] = cj;
            }
        }
        for (long i = 0; i < s * k; i++)
            echo_http_next(cs[i]);
        print_head(large ? "large" : "echo");
        printf(",\"sessions\":%ld,\"inflight\":%ld", s, k);
        if (large)
            printf(",\"bytes\":%ld", opt.bytes);
        echo_loop(large ? 0 : opt.warmup, large ? 1e9 : opt.duration, large ? opt.count : 0);
        for (long i = 0; i < s * k; i++)
            conn_free(cs[i]);
        free(cs);
        free(sids);
    } else {
        struct direct_sess *ds = xrealloc(NULL, (size_t)s * sizeof(*ds));
        for (long i = 0; i < s; i++) {
            ds[i].ch = child_new(NULL, &ds[i]);
            if (!child_initialize(ds[i].ch))
                die("direct child %ld: initialize failed", i);
            ds[i].ch->on_line = echo_direct_line;
            ds[i].nlanes = k;
            ds[i].lanes = xrealloc(NULL, (size_t)k * sizeof(struct lane));
            memset(ds[i].lanes, 0, (size_t)k * sizeof(struct lane));
        }
        for (long i = 0; i < s; i++)
            for (long j = 0; j < k; j++)
                echo_direct_send(&ds[i], &ds[i].lanes[j]);
        print_head(large ? "large" : "echo");
        printf(",\"sessions\":%ld,\"inflight\":%ld", s, k);
        if (large)
            printf(",\"bytes\":%ld", opt.bytes);
        echo_loop(large ? 0 : opt.warmup, large ? 1e9 : opt.duration, large ? opt.count : 0);
        for (long i = 0; i < s; i++) {
            child_free(ds[i].ch);
            free(ds[i].lanes);
        }
        free(ds);
    }
    if (opt.pid > 0) {
        long hwm = server_status_kib("VmHWM");
        printf(",\"server_rss0_kib\":%ld,\"server_hwm_kib\":%ld,\"server_peak_growth_kib\":%ld",
               rss0, hwm, hwm - rss0);
    }
    print_end();
    free(run.lat.v);
    run.lat.v = NULL;
}

/* ---- init: initialize round trips, spawn included ---- */

static void
mode_init(void)
{
    struct samples lat = { 0 };
    long fails = 0;

    if (opt.cmd == NULL) {
        struct conn *c = conn_new();
        for (long i = 0; i < opt.count; i++) {
            uint64_t t0 = now_ns();
            bool ok = roundtrip(c, "POST", NULL, init_body) && c->status == 200 && c->sid[0] != '\0'
                      && answer_ok(c->prefix, c->prefix_len, 0);
            uint64_t t1 = now_ns();
            if (!ok) {
                fails++;
                continue;
            }
            samples_add(&lat, t1 - t0);
            char sid[256];
            snprintf(sid, sizeof(sid), "%s", c->sid);
            if (!roundtrip(c, "DELETE", sid, NULL))
                fails++;
        }
        conn_free(c);
    } else {
        for (long i = 0; i < opt.count; i++) {
            uint64_t t0 = now_ns();
            struct child *ch = child_new(NULL, NULL);
            bool ok = child_initialize(ch);
            uint64_t t1 = now_ns();
            child_free(ch);
            if (ok)
                samples_add(&lat, t1 - t0);
            else
                fails++;
        }
    }
    print_head("init");
    printf(",\"errors\":%ld,", fails);
    print_quantiles(&lat);
    print_end();
    free(lat.v);
}

/* ---- hold: N idle sessions ---- */

struct hold_state {
    long next;     /* initializes sent */
    long ok;       /* sessions initialized (initialize and notifications/initialized answered) */
    long refused;  /* 503 */
    long other;    /* other status or a broken connection */
    long verified; /* answered an echo afterwards */
    long vnext;    /* echoes sent */
    long active;   /* requests in flight */
    uint64_t t_last_open;
    char (*sids)[256];
};

static struct hold_state hold;

static void hold_start(struct conn *c);

/* c->user_n: 0 initialize sent, 1 notifications/initialized sent, 2 verifying echo sent. */
static void
hold_done(struct conn *c)
{
    if (c->user_n == 0 && !c->failed && c->status == 200 && c->sid[0] != '\0') {
        char sid[256];
        snprintf(sid, sizeof(sid), "%s", c->sid);
        c->user_n = 1;
        conn_request(c, "POST", sid, initialized_body);
        snprintf(c->sid, sizeof(c->sid), "%s", sid);
        return;
    }
    if (c->user_n == 0) {
        if (c->status == 503)
            hold.refused++;
        else
            hold.other++;
        if (hold.other <= 3 && c->status != 503)
            fprintf(stderr, "loadgen: hold: initialize failed: status %d failed %d\n", c->status,
                    (int)c->failed);
    } else if (c->user_n == 1) {
        if (!c->failed && c->status / 100 == 2) {
            snprintf(hold.sids[hold.ok++], sizeof(hold.sids[0]), "%s", c->sid);
            hold.t_last_open = now_ns();
        } else {
            hold.other++;
        }
    } else if (!c->failed && c->status == 200 && answer_ok(c->prefix, c->prefix_len, c->id)) {
        hold.verified++;
    }
    hold.active--;
    hold_start(c);
}

/* Next step for an idle connection: open a session, else verify one. */
static void
hold_start(struct conn *c)
{
    if (connect_failures > 100 && hold.next < opt.sessions) {
        fprintf(stderr, "loadgen: hold: the server refuses connections; giving up at %ld\n",
                hold.next);
        hold.other += opt.sessions - hold.next;
        hold.next = opt.sessions;
    }
    if (hold.next < opt.sessions) {
        hold.next++;
        hold.active++;
        c->id = 0;
        c->user_n = 0;
        conn_request(c, "POST", NULL, init_body);
    } else if (hold.active == 0 && hold.vnext < hold.ok) {
        /* every session is open: now one echo on each, all connections at once */
        for (struct conn **p = c->user; *p != NULL; p++)
            if (!(*p)->busy && hold.vnext < hold.ok) {
                char body[9000];
                long i = hold.vnext++;
                hold.active++;
                (*p)->id = i + 1;
                (*p)->user_n = 2;
                echo_body(body, sizeof(body), (*p)->id);
                conn_request(*p, "POST", hold.sids[i], body);
            }
    } else if (hold.next >= opt.sessions && hold.vnext > 0 && hold.vnext < hold.ok) {
        char body[9000];
        long i = hold.vnext++;
        hold.active++;
        c->id = i + 1;
        c->user_n = 2;
        echo_body(body, sizeof(body), c->id);
        conn_request(c, "POST", hold.sids[i], body);
    }
}

static void
mode_hold(void)
{
    long par = opt.inflight;
    long rss0 = server_status_kib("VmRSS");
    struct conn **cs = xrealloc(NULL, (size_t)(par + 1) * sizeof(*cs));

    run.tool = "echo";
    snprintf(run.args, sizeof(run.args), "{\"text\":\"held\"}");
    hold.sids = xrealloc(NULL, (size_t)opt.sessions * sizeof(*hold.sids));
    uint64_t t0 = now_ns();
    for (long i = 0; i < par; i++) {
        cs[i] = conn_new();
        cs[i]->done = hold_done;
        cs[i]->user = cs;
    }
    cs[par] = NULL;
    for (long i = 0; i < par; i++)
        hold_start(cs[i]);
    uint64_t deadline = now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS * 100;
    while (hold.active > 0 && now_ns() < deadline)
        loop_once(100);
    uint64_t t1 = now_ns();
    for (long i = 0; i < par; i++)
        conn_free(cs[i]);
    free(cs);
    sleep_ns(500 * NS_PER_MS); /* let the server see the closes and settle */
    long rss1 = server_status_kib("VmRSS");
    print_head("hold");
    printf(",\"attempted\":%ld,\"held\":%ld,\"refused_503\":%ld,\"failed_other\":%ld,"
           "\"verified\":%ld,\"open_seconds\":%.3f,\"total_seconds\":%.3f,\"server_alive\":%s",
           opt.sessions, hold.ok, hold.refused, hold.other, hold.verified,
           (double)((hold.t_last_open ? hold.t_last_open : t1) - t0) / 1e9, (double)(t1 - t0) / 1e9,
           server_alive() ? "true" : "false");
    if (opt.pid > 0)
        printf(",\"server_rss0_kib\":%ld,\"server_rss_kib\":%ld,\"bytes_per_session\":%.0f", rss0,
               rss1,
               hold.ok && rss1 >= 0 ? (double)(rss1 - rss0) * 1024.0 / (double)hold.ok : -1.0);
    print_end();
    free(hold.sids);
    free(deferred);
}

/* ---- cancel / disconnect: latency to the child's receipt ---- */

struct childlog {
    int fd;
    char buf[65536];
    size_t len;
};

/* Moves to the end of the log: only lines after this count. */
static void
childlog_skip(struct childlog *cl)
{
    cl->len = 0;
    lseek(cl->fd, 0, SEEK_END);
}

/* Opens the child's log (it creates it at start), waiting up to the deadline. */
static int
childlog_open(uint64_t deadline)
{
    int fd;

    while ((fd = open(opt.child_log, O_RDONLY | O_CLOEXEC)) == -1 && now_ns() < deadline)
        sleep_ns(NS_PER_MS);
    if (fd == -1)
        die("%s: %s", opt.child_log, strerror(errno));
    return fd;
}

/* Waits for a complete line holding needle; returns its CLOCK_MONOTONIC stamp (ns) or 0. */
static uint64_t
childlog_wait(struct childlog *cl, const char *needle, uint64_t deadline)
{
    for (;;) {
        ssize_t n = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
        if (n > 0)
            cl->len += (size_t)n;
        char *start = cl->buf;
        char *nl;
        while ((nl = memchr(start, '\n', cl->len - (size_t)(start - cl->buf))) != NULL) {
            *nl = '\0';
            if (strstr(start, needle) != NULL) {
                uint64_t stamp = strtoull(start, NULL, 10);
                size_t rest = cl->len - (size_t)(nl + 1 - cl->buf);
                memmove(cl->buf, nl + 1, rest);
                cl->len = rest;
                return stamp;
            }
            start = nl + 1;
        }
        size_t rest = cl->len - (size_t)(start - cl->buf);
        memmove(cl->buf, start, rest);
        cl->len = rest;
        if (cl->len == sizeof(cl->buf) - 1)
            cl->len = 0; /* a huge line we do not care about */
        if (now_ns() >= deadline)
            return 0;
        if (n <= 0)
            loop_once(1); /* keeps the connections served while waiting */
    }
}

static void
slow_call_body(char *buf, size_t len, long id)
{
    snprintf(
        buf, len,
        "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\","
        "\"arguments\":" SLOW_ARGS "}}",
        id);
}

static void
cancel_body(char *buf, size_t len, long id)
{
    snprintf(buf, len,
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
             "{\"requestId\":%ld,\"reason\":\"bench\"}}",
             id);
}

static void
ignore_done(struct conn *c)
{
    (void)c;
}

static void
mode_cancel(bool disconnect)
{
    struct samples lat = { 0 };
    struct childlog cl = { 0 };
    long misses = 0, errors = 0, runs = 0, miss_streak = 0;
    char sid[256] = "", body[1024];
    struct conn *a = NULL, *b = NULL;
    struct child *ch = NULL;

    if (opt.child_log == NULL)
        die("--child-log is required");
    if (opt.cmd == NULL && opt.stateless) {
        /* 2026-07-28 defines no notification over HTTP: a call is cancelled by closing it. */
        if (!disconnect)
            die("cancel has no --stateless variant (use disconnect)");
    } else if (opt.cmd == NULL) {
        b = conn_new();
        if (!session_open(b, sid, sizeof(sid)))
            die("initialize failed (status %d)", b->status);
    } else {
        if (disconnect)
            die("disconnect has no direct variant");
        ch = child_new(NULL, NULL);
        if (!child_initialize(ch))
            die("direct child: initialize failed");
    }
    /*
     * The child opens its log at start: wait for it. A stateless call may find no child yet (a pool
     * starts its first on the first request; a peer may spawn one per request): the log is made
     * here then, and each child appends to it.
     */
    uint64_t deadline = now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS;
    if (opt.stateless)
        cl.fd = open(opt.child_log, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    else
        cl.fd = childlog_open(deadline);
    if (cl.fd == -1)
        die("%s: %s", opt.child_log, strerror(errno));
    for (long i = 1; i <= opt.count; i++) {
        runs++;
        childlog_skip(&cl);
        if (opt.stateless)
            call_body(body, sizeof(body), 1000 + i, "echo", STATELESS_SLOW_ARGS);
        else
            slow_call_body(body, sizeof(body), 1000 + i);
        if (ch != NULL) {
            child_send(ch, body);
        } else {
            if (a == NULL)
                a = conn_new();
            a->done = ignore_done;
            conn_stateless(a, "echo");
            conn_request(a, "POST", sid, body);
        }
        deadline = now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS;
        if (childlog_wait(&cl, "\"tools/call\"", deadline) == 0) {
            errors++;
            fprintf(stderr, "loadgen: the call never reached the child\n");
            break;
        }
        uint64_t t0;
        if (disconnect) {
            t0 = now_ns();
            conn_free(a);
            a = NULL;
        } else {
            cancel_body(body, sizeof(body), 1000 + i);
            if (ch != NULL) {
                t0 = now_ns();
                child_send(ch, body);
            } else {
                b->done = ignore_done;
                t0 = now_ns();
                conn_request(b, "POST", sid, body);
            }
        }
        uint64_t stamp = childlog_wait(&cl, "notifications/cancelled",
                                       now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS);
        if (stamp == 0 || stamp < t0) {
            misses++;
            if (++miss_streak >= opt.give_up)
                break;
        } else {
            miss_streak = 0;
            samples_add(&lat, stamp - t0);
        }
        if (b != NULL && b->busy) {
            bool bdone = false;
            b->done = flag_done;
            b->user = &bdone;
            if (!loop_until(&bdone, now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS))
                errors++;
            b->done = NULL;
        }
        if (a != NULL) {
            /* The gateway ends a cancelled call's stream; a peer that does not leaves it open:
             * give it a moment, then start over on a fresh connection. */
            bool adone = !a->busy;
            a->done = flag_done;
            a->user = &adone;
            (void)loop_until(&adone, now_ns() + 20 * NS_PER_MS);
            a->done = NULL;
            if (a->busy || a->fd == -1) {
                conn_free(a);
                a = NULL;
            }
        }
    }
    print_head(disconnect ? "disconnect" : "cancel");
    printf(",\"runs\":%ld,\"misses\":%ld,\"errors\":%ld,\"miss_timeout_ms\":%ld,", runs, misses,
           errors, opt.timeout_ms);
    print_quantiles(&lat);
    print_end();
    if (a != NULL)
        conn_free(a);
    if (b != NULL)
        conn_free(b);
    if (ch != NULL)
        child_free(ch);
    close(cl.fd);
    free(lat.v);
}

/* ---- pending: N requests in flight at once (2026-07-28, one connection each) ---- */

/* Counts the complete lines holding needle that the log gained since the last call (no wait). */
static long
childlog_count(struct childlog *cl, const char *needle)
{
    long found = 0;

    for (;;) {
        ssize_t n = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
        if (n > 0)
            cl->len += (size_t)n;
        char *start = cl->buf;
        char *nl;
        while ((nl = memchr(start, '\n', cl->len - (size_t)(start - cl->buf))) != NULL) {
            *nl = '\0';
            if (strstr(start, needle) != NULL)
                found++;
            start = nl + 1;
        }
        size_t rest = cl->len - (size_t)(start - cl->buf);
        memmove(cl->buf, start, rest);
        cl->len = rest;
        if (cl->len == sizeof(cl->buf) - 1)
            cl->len = 0; /* a huge line we do not care about */
        if (n <= 0)
            return found;
    }
}

/* Processes whose parent is --pid (its children: the pool's), or -1 without --pid. */
static long
server_children(void)
{
    char path[300], buf[512];
    long n = 0;

    if (opt.pid <= 0)
        return -1;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd == -1)
            continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
            continue;
        buf[k] = '\0';
        char *p = strrchr(buf, ')');
        char state = 0;
        long ppid = 0;
        if (p != NULL && sscanf(p + 2, "%c %ld", &state, &ppid) == 2 && ppid == (long)opt.pid
            && state != 'Z')
            n++;
    }
    closedir(d);
    return n;
}

struct pending_state {
    long answered; /* answers (or failures) seen */
    long ok;       /* answers with a result for their own id */
    long bad;
    long early; /* answered before every request was in flight */
    long status_429;
    bool all_in;
};

static struct pending_state pend;

static void
pending_done(struct conn *c)
{
    bool ok = !c->failed && c->status == 200 && answer_ok(c->prefix, c->prefix_len, c->id);

    pend.answered++;
    if (!pend.all_in)
        pend.early++;
    if (ok) {
        pend.ok++;
        return;
    }
    pend.bad++;
    if (c->status == 429)
        pend.status_429++;
    if (pend.bad <= 3)
        fprintf(stderr, "loadgen: pending: bad answer to %ld (status %d, failed %d): %.*s\n", c->id,
                c->status, (int)c->failed, (int)(c->prefix_len < 300 ? c->prefix_len : 300),
                c->prefix);
}

static void
mode_pending(void)
{
    struct childlog cl = { 0 };
    char body[9000], args[128];
    long n = opt.sessions;

    if (!opt.stateless)
        die("pending needs --stateless");
    if (opt.child_log == NULL)
        die("--child-log is required");
    uint64_t deadline = now_ns() + (uint64_t)opt.timeout_ms * NS_PER_MS;
    cl.fd = childlog_open(deadline);
    /* The pool's warm children, initialized (each logs its notifications/initialized). */
    long ready = 0;
    while (opt.children > 0 && ready < opt.children && now_ns() < deadline) {
        ready += childlog_count(&cl, "notifications/initialized");
        if (ready < opt.children)
            sleep_ns(2 * NS_PER_MS);
    }
    if (ready < opt.children)
        die("pending: %ld of %ld children initialized within %ld ms", ready, opt.children,
            opt.timeout_ms);
    /* One quick request first: the path works, and nothing is started by the measured ones. */
    struct conn *w = conn_new();
    run.tool = "echo";
    snprintf(run.args, sizeof(run.args), "{\"text\":\"warm\"}");
    echo_body(body, sizeof(body), 1);
    w->id = 1;
    conn_stateless(w, "echo");
    if (!roundtrip(w, "POST", NULL, body) || w->status != 200
        || !answer_ok(w->prefix, w->prefix_len, 1))
        die("pending: the first request failed (status %d): %.*s", w->status,
            (int)(w->prefix_len < 300 ? w->prefix_len : 300), w->prefix);
    conn_free(w);
    sleep_ns(200 * NS_PER_MS);
    (void)childlog_count(&cl, "\"tools/call\"");
    long rss0 = server_status_kib("VmRSS");
    uint64_t cpu0 = server_cpu_ns(NULL);

    struct conn **cs = xrealloc(NULL, (size_t)n * sizeof(*cs));
    snprintf(args, sizeof(args), "{\"text\":\"pending\",\"delay_ms\":%ld}", opt.delay_ms);
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        cs[i] = conn_new();
        cs[i]->done = pending_done;
        cs[i]->id = 2 + i;
        conn_stateless(cs[i], "echo");
        call_body(body, sizeof(body), cs[i]->id, "echo", args);
        conn_request(cs[i], "POST", NULL, body);
        if (i % 64 == 63)
            loop_once(0);
    }
    uint64_t t_sent = now_ns();
    /* In flight = the children have read it: N tools/call lines in their (shared) log. */
    long seen = 0;
    deadline = t0 + (uint64_t)opt.timeout_ms * NS_PER_MS;
    while (seen < n && now_ns() < deadline) {
        seen += childlog_count(&cl, "\"tools/call\"");
        if (seen < n)
            loop_once(1);
    }
    uint64_t t_in = now_ns();
    pend.all_in = seen >= n;
    long rss1 = server_status_kib("VmRSS");
    long kids = server_children();
    long answered_at_peak = pend.answered;
    /* Then every answer: delay_ms after its receipt. */
    deadline = now_ns() + ((uint64_t)opt.delay_ms + (uint64_t)opt.timeout_ms) * NS_PER_MS;
    while (pend.answered < n && now_ns() < deadline)
        loop_once(100);
    uint64_t t_done = now_ns();
    uint64_t cpu1 = server_cpu_ns(NULL);
    long unanswered = n - pend.answered;
    for (long i = 0; i < n; i++)
        conn_free(cs[i]);
    free(cs);
    print_head("pending");
    printf(",\"requests\":%ld,\"delay_ms\":%ld,\"in_flight\":%ld,\"all_in_flight\":%s,"
           "\"answered_before_all_in_flight\":%ld,\"ok\":%ld,\"bad\":%ld,\"status_429\":%ld,"
           "\"unanswered\":%ld,\"send_seconds\":%.3f,\"in_flight_seconds\":%.3f,"
           "\"total_seconds\":%.3f,\"children\":%ld,\"server_alive\":%s",
           n, opt.delay_ms, seen, pend.all_in ? "true" : "false", answered_at_peak, pend.ok,
           pend.bad, pend.status_429, unanswered, (double)(t_sent - t0) / 1e9,
           (double)(t_in - t0) / 1e9, (double)(t_done - t0) / 1e9, kids,
           server_alive() ? "true" : "false");
    if (opt.pid > 0)
        printf(",\"server_rss0_kib\":%ld,\"server_rss_kib\":%ld,\"bytes_per_request\":%.0f,"
               "\"server_cpu_us_per_req\":%.2f",
               rss0, rss1,
               rss1 >= 0 && seen > 0 ? (double)(rss1 - rss0) * 1024.0 / (double)seen : -1.0,
               (double)(cpu1 - cpu0) / 1e3 / (double)n);
    print_end();
    close(cl.fd);
    free(deferred);
}

/* ---- main ---- */

static NORETURN void
usage(int status)
{
    fprintf(
        status ? stderr : stdout,
        "usage: loadgen MODE (--url http://127.0.0.1:PORT/PATH | --cmd 'SERVER ARGS') [options]\n"
        "modes: echo large init hold cancel disconnect pending\n"
        "  --sessions N      sessions (echo) / sessions to open (hold) / requests (pending) [1]\n"
        "  --inflight K      requests in flight per session (echo) / parallel (hold) [1]\n"
        "  --duration S      measured seconds (echo)                           [3]\n"
        "  --warmup S        unmeasured seconds first (echo)                   [0.5]\n"
        "  --count N         requests (large, init, cancel, disconnect)        [100]\n"
        "  --bytes B         result size (large)                               [1048576]\n"
        "  --text-bytes B    echo text size                                    [32]\n"
        "  --pid PID         the server process: CPU (its own, its children's), VmRSS, VmHWM\n"
        "  --strace FILE     count the server's system calls in the window (echo, --pid)\n"
        "  --child-log FILE  the child's --log --log-times file (cancel, disconnect)\n"
        "  --timeout-ms T    waits (a cancel not seen in T ms is a miss)        [2000]\n"
        "  --give-up N       stop after N misses in a row                       [3]\n"
        "  --label TEXT      copied into the output\n"
        "  --header LINE     one more request header, e.g. 'Authorization: Bearer T'\n"
        "  --tokens FILE     Authorization values, one a line, one per request round-robin\n"
        "  --stateless       stateless requests: no session (echo, large, disconnect, pending)\n"
        "  --delay-ms D      the echo's delay_ms (pending)                      [5000]\n"
        "  --children N      wait for N initialized children first (pending)    [0]\n");
    exit(status);
}

static void
parse_url(void)
{
    unsigned port;
    char host[64];
    int off = 0;

    if (sscanf(opt.url, "http://%63[0-9.]:%u%n", host, &port, &off) != 2 || port > 65535)
        die("--url must be http://A.B.C.D:PORT/PATH");
    snprintf(target_host, sizeof(target_host), "%s:%u", host, port);
    snprintf(target_path, sizeof(target_path), "%s", opt.url[off] ? opt.url + off : "/");
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &target.sin_addr) != 1)
        die("bad address %s", host);
}

/* --tokens: every non-empty line of the file (a trailing CR dropped), kept for the whole run. */
static void
load_tokens(const char *path)
{
    FILE *fp = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0, have = 0;
    ssize_t n;

    if (fp == NULL)
        die("%s: %s", path, strerror(errno));
    while ((n = getline(&line, &cap, fp)) != -1) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        if (ntokens == have) {
            have = have ? have * 2 : 1024;
            tokens = xrealloc(tokens, have * sizeof(*tokens));
        }
        tokens[ntokens] = xrealloc(NULL, (size_t)n + 1);
        memcpy(tokens[ntokens++], line, (size_t)n + 1);
    }
    free(line);
    fclose(fp);
    if (ntokens == 0)
        die("%s: no tokens", path);
}

static long
num(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*end != '\0' || end == s)
        die("not a number: %s", s);
    return v;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "url", required_argument, NULL, 'u' },
        { "cmd", required_argument, NULL, 'c' },
        { "sessions", required_argument, NULL, 's' },
        { "inflight", required_argument, NULL, 'k' },
        { "duration", required_argument, NULL, 'd' },
        { "warmup", required_argument, NULL, 'w' },
        { "count", required_argument, NULL, 'n' },
        { "bytes", required_argument, NULL, 'b' },
        { "text-bytes", required_argument, NULL, 't' },
        { "pid", required_argument, NULL, 'p' },
        { "child-log", required_argument, NULL, 'l' },
        { "timeout-ms", required_argument, NULL, 'T' },
        { "give-up", required_argument, NULL, 'g' },
        { "label", required_argument, NULL, 'L' },
        { "header", required_argument, NULL, 'H' },
        { "tokens", required_argument, NULL, 'K' },
        { "stateless", no_argument, NULL, 'M' },
        { "delay-ms", required_argument, NULL, 'D' },
        { "children", required_argument, NULL, 'C' },
        { "strace", required_argument, NULL, 'S' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'u':
            opt.url = optarg;
            break;
        case 'c':
            opt.cmd = optarg;
            break;
        case 's':
            opt.sessions = num(optarg);
            break;
        case 'k':
            opt.inflight = num(optarg);
            break;
        case 'd':
            opt.duration = strtod(optarg, NULL);
            break;
        case 'w':
            opt.warmup = strtod(optarg, NULL);
            break;
        case 'n':
            opt.count = num(optarg);
            break;
        case 'b':
            opt.bytes = num(optarg);
            break;
        case 't':
            opt.text_bytes = num(optarg);
            break;
        case 'p':
            opt.pid = (pid_t)num(optarg);
            break;
        case 'l':
            opt.child_log = optarg;
            break;
        case 'T':
            opt.timeout_ms = num(optarg);
            break;
        case 'g':
            opt.give_up = num(optarg);
            break;
        case 'H':
            opt.header = optarg;
            break;
        case 'K':
            opt.tokens = optarg;
            break;
        case 'L':
            opt.label = optarg;
            break;
        case 'M':
            opt.stateless = true;
            break;
        case 'D':
            opt.delay_ms = num(optarg);
            break;
        case 'C':
            opt.children = num(optarg);
            break;
        case 'S':
            opt.strace = optarg;
            break;
        case 'h':
            usage(0);
        default:
            usage(2);
        }
    }
    if (optind != argc - 1)
        usage(2);
    opt.mode = argv[optind];
    if ((opt.url == NULL) == (opt.cmd == NULL))
        die("give exactly one of --url and --cmd");
    if (opt.sessions < 1 || opt.inflight < 1 || opt.count < 1)
        die("--sessions, --inflight and --count must be at least 1");
    if (opt.stateless && opt.url == NULL)
        die("--stateless needs --url (the stdio floor is legacy)");
    if (opt.stateless && (strcmp(opt.mode, "init") == 0 || strcmp(opt.mode, "hold") == 0))
        die("%s has no --stateless variant", opt.mode);
    /* pending holds a socket per request: take the hard limit of descriptors. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (opt.strace != NULL && (opt.pid <= 0 || strcmp(opt.mode, "echo") != 0))
        die("--strace needs --pid and mode echo");
    if (opt.tokens != NULL && opt.url == NULL)
        die("--tokens needs --url");
    if (opt.tokens != NULL)
        load_tokens(opt.tokens);
    if (opt.url != NULL)
        parse_url();
    else
        cmd_split();
    long hz = sysconf(_SC_CLK_TCK);
    tick_ns = NS_PER_S / (uint64_t)(hz > 0 ? hz : 100);
    signal(SIGPIPE, SIG_IGN);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep == -1)
        die("epoll_create1: %s", strerror(errno));

    if (strcmp(opt.mode, "echo") == 0)
        mode_echo(false);
    else if (strcmp(opt.mode, "large") == 0)
        mode_echo(true);
    else if (strcmp(opt.mode, "init") == 0)
        mode_init();
    else if (strcmp(opt.mode, "hold") == 0 && opt.url != NULL)
        mode_hold();
    else if (strcmp(opt.mode, "cancel") == 0)
        mode_cancel(false);
    else if (strcmp(opt.mode, "disconnect") == 0 && opt.url != NULL)
        mode_cancel(true);
    else if (strcmp(opt.mode, "pending") == 0 && opt.url != NULL)
        mode_pending();
    else
        die("unknown mode %s (hold, disconnect and pending need --url)", opt.mode);
    close(ep);
    return 0;
}
