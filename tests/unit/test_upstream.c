/* SPDX-License-Identifier: MIT */
/*
 * upstream: real children (the example MCP server from the build tree, /bin/sh, sleep, cat).
 * Round trips through stdin and stdout, lines over 64 KiB, the max_line_bytes boundary, exits,
 * spawn failures, the stop ladder up to SIGKILL, what the child inherits (process group, signal
 * mask and dispositions, blocking stdio, no other fds), the group kill reaching a grandchild, the
 * stdin ceiling, batches (written once at their end, a ceiling judged after what they hold is
 * written), pause, and callbacks around upstream_close. Every wait runs the loop until a
 * condition holds, with a deadline that fails the test; nothing sleeps. Through upstream.h only.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "log.h"
#include "loop.h"
#include "msg.h"
#include "upstream.h"

#ifndef MCPGW_BUILD_ROOT
#error "MCPGW_BUILD_ROOT must name the meson build directory"
#endif
#define EXAMPLE     MCPGW_BUILD_ROOT "/tests/fixtures/mcp-example-server"
#define DEADLINE_MS 5000

extern char **environ;

TestSuite(upstream, .timeout = 30);

#define MAX_LINES 16

struct ctx {
    struct upstream *u;
    int lines;
    char *line[MAX_LINES];
    size_t line_len[MAX_LINES];
    int gone;
    int shared; /* lines that came as a message of their own */
    char reason[160];
    bool close_in_line;
};

static struct loop *L;
static struct ctx C;
static pid_t spawned[16];
static int nspawned;
static bool deadline_hit;
static bool (*until)(void);

static void reset_lines(void);

static void
fx_init(void)
{
    signal(SIGPIPE, SIG_IGN); /* as main.c does: a dead child's stdin gives EPIPE */
    L = loop_new();
    memset(&C, 0, sizeof C);
    nspawned = 0;
}

static void
fx_fini(void)
{
    /* After a failed assertion a child may still run: take its whole group down. */
    for (int i = 0; i < nspawned; i++)
        if (spawned[i] > 0)
            kill(-spawned[i], SIGKILL);
    reset_lines();
    if (upstream_live_count() == 0)
        loop_free(L);
    L = NULL;
}

static void
line_cb(char *line, size_t len, struct msg *shared, void *arg)
{
    struct ctx *c = arg;
    if (shared != NULL) {
        cr_assert_eq(shared->data, line, "a shared line is the message's own bytes");
        cr_assert_eq(shared->len, len);
        cr_assert_eq(line[len], '\0');
        c->shared++;
    }
    cr_assert_eq(c->gone, 0, "a line after gone_cb");
    cr_assert_null(memchr(line, '\n', len), "a line holds a newline");
    if (c->lines < MAX_LINES) {
        c->line[c->lines] = malloc(len + 1);
        cr_assert_not_null(c->line[c->lines]);
        memcpy(c->line[c->lines], line, len);
        c->line[c->lines][len] = '\0';
        c->line_len[c->lines] = len;
    }
    c->lines++;
    if (c->close_in_line)
        upstream_close(c->u, "closed from the line callback");
}

static void
gone_cb(const char *reason, void *arg)
{
    struct ctx *c = arg;
    c->gone++;
    cr_assert_not_null(reason);
    snprintf(c->reason, sizeof c->reason, "%s", reason);
}

/* --- running the loop until something holds ---------------------------------------------- */

static void
deadline_cb(void *arg)
{
    (void)arg;
    deadline_hit = true;
    loop_stop(L);
}

static int
poll_prepare(void *arg)
{
    (void)arg;
    return 10; /* recheck conditions that no fd reports (/proc state) every 10 ms */
}

static void
check_after(void *arg)
{
    (void)arg;
    if (until != NULL && until())
        loop_stop(L);
}

/* Runs the loop until cond() holds or ms pass; returns cond(). */
static bool
run_until(bool (*cond)(void), uint64_t ms)
{
    if (cond != NULL && cond())
        return true;
    until = cond;
    deadline_hit = false;
    struct loop_timer *t = loop_timer_add(L, ms, deadline_cb, NULL);
    loop_set_hooks(L, poll_prepare, check_after, NULL);
    loop_run(L);
    loop_set_hooks(L, NULL, NULL, NULL);
    if (!deadline_hit)
        loop_timer_del(t);
    until = NULL;
    return cond != NULL && cond();
}

/* Runs the loop for ms, whatever happens (to see that nothing more does). */
static void
run_for(uint64_t ms)
{
    (void)run_until(NULL, ms);
}

static void
reset_lines(void)
{
    for (int i = 0; i < C.lines && i < MAX_LINES; i++) {
        free(C.line[i]);
        C.line[i] = NULL;
    }
    C.lines = 0;
}

static bool
have_line(void)
{
    return C.lines > 0;
}

static bool
have_gone(void)
{
    return C.gone > 0;
}

static bool
none_live(void)
{
    return upstream_live_count() == 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

static struct upstream_params
params(char *const *argv)
{
    return (struct upstream_params){
        .argv = argv,
        .envp = environ,
        .cwd = NULL,
        .tag = "test",
        .max_line_bytes = 4u << 20,
        .stdin_max_bytes = 1u << 20,
        .stdin_grace_ms = 200,
        .term_grace_ms = 200,
    };
}

static struct upstream *
spawn_p(const struct upstream_params *p)
{
    const char *err = NULL;
    struct upstream *u = upstream_spawn(L, p, line_cb, gone_cb, &C, &err);
    cr_assert_not_null(u, "spawn %s: %s", p->argv[0], err ? err : "(no errstr)");
    pid_t pid = upstream_pid(u);
    cr_assert_gt(pid, 0);
    if (nspawned < (int)ARRAY_LEN(spawned))
        spawned[nspawned++] = pid;
    C.u = u;
    return u;
}

static struct upstream *
spawn(char *const *argv)
{
    struct upstream_params p = params(argv);
    return spawn_p(&p);
}

static void
send_str(struct upstream *u, const char *s)
{
    size_t n = strlen(s);
    struct msg *m = msg_new(n);
    memcpy(m->data, s, n);
    cr_assert_eq(upstream_send(u, m), 0, "send refused: %s", s);
    msg_unref(m);
}

/* upstream_send of a small message; its result (the message reference is released either way). */
static int
send_small(struct upstream *u)
{
    struct msg *m = msg_new(3);
    memcpy(m->data, "{}\n", 3);
    int rc = upstream_send(u, m);
    msg_unref(m);
    return rc;
}

/* A message of n bytes: 'x' up to its last, a newline. */
static struct msg *
x_line(size_t n)
{
    struct msg *m = msg_new(n);
    memset(m->data, 'x', n - 1);
    m->data[n - 1] = '\n';
    return m;
}

/* Closes u and runs the loop until every upstream is freed. */
static void
close_and_wait(struct upstream *u)
{
    upstream_close(u, "test done");
    cr_assert(run_until(none_live, DEADLINE_MS), "upstream not freed within %d ms", DEADLINE_MS);
    C.u = NULL;
}

static bool
process_gone(pid_t pid)
{
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return true;
    /* A zombie waiting for a reaper (init in a container may be slow) is dead too. */
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* The value of a "Name:\t..." line of /proc/<pid>/status. */
static bool
proc_status(pid_t pid, const char *name, char *out, size_t cap)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    size_t nlen = strlen(name);
    bool found = false;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, cap, "%.*s", (int)strcspn(v, "\n"), v);
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The flags of an fd (octal in /proc/<pid>/fdinfo/<fd>); -1 if it is not open. */
static long
fd_flags(pid_t pid, int fd)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)pid, fd);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long flags = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "flags:", 6) == 0)
            flags = strtol(line + 6, NULL, 8);
    fclose(f);
    return flags;
}

/* The target of /proc/<pid>/fd/<fd> ("pipe:[1234]"). */
static bool
fd_link(pid_t pid, int fd, char *out, size_t cap)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    ssize_t n = readlink(path, out, cap - 1);
    if (n < 0)
        return false;
    out[n] = '\0';
    return true;
}

/* Our own fd whose link equals target, or -1. Fails the test if there are several. */
static int
own_fd_for(const char *target)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int found = -1, count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        char link[128];
        if (fd_link(getpid(), fd, link, sizeof link) && strcmp(link, target) == 0) {
            found = fd;
            count++;
        }
    }
    closedir(d);
    cr_assert_leq(count, 1, "%d fds of ours point at %s", count, target);
    return found;
}

static int
count_own_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The first pid in /proc/<pid>/task/<pid>/children, or 0. */
static pid_t
first_child_of(pid_t pid)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int child = 0;
    if (fscanf(f, "%d", &child) != 1)
        child = 0;
    fclose(f);
    return (pid_t)child;
}

static const char init_req[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n";

/* --- round trips ------------------------------------------------------------------------- */

Test(upstream, initialize_and_ping, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    cr_assert_eq(upstream_live_count(), 0);
    struct upstream *u = spawn(argv);
    cr_assert_eq(upstream_live_count(), 1);
    cr_assert_eq(upstream_queued_bytes(u), 0);

    send_str(u, init_req);
    cr_assert(run_until(have_line, DEADLINE_MS), "no answer to initialize");
    cr_assert_eq(C.lines, 1);
    cr_assert_eq(C.shared, 0, "a short line is lent, not handed over");
    cr_assert(strstr(C.line[0], "\"id\":1") != NULL, "answer: %s", C.line[0]);
    cr_assert(strstr(C.line[0], "\"serverInfo\"") != NULL, "answer: %s", C.line[0]);
    cr_assert_eq(C.line_len[0], strlen(C.line[0]));

    reset_lines();
    send_str(u, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n");
    cr_assert(run_until(have_line, DEADLINE_MS), "no answer to ping");
    cr_assert_str_eq(C.line[0], "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"result\":{}}");
    cr_assert_eq(C.gone, 0);
    close_and_wait(u);
    cr_assert_eq(C.gone, 0, "gone_cb after upstream_close");
}

static const char large_head[] =
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"";
static const char large_foot[] = "\"}]}}";

static void
ask_large(struct upstream *u, size_t bytes)
{
    char req[256];
    snprintf(req, sizeof req,
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"large\",\"arguments\":{\"bytes\":%zu}}}\n",
             bytes);
    send_str(u, req);
}

static size_t
large_line_len(size_t bytes)
{
    return sizeof large_head - 1 + bytes + sizeof large_foot - 1;
}

Test(upstream, line_over_64k_arrives_whole, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream *u = spawn(argv);
    size_t bytes = 1000000;
    ask_large(u, bytes);
    cr_assert(run_until(have_line, DEADLINE_MS), "no answer to the large tool");
    cr_assert_eq(C.lines, 1);
    const char *s = C.line[0];
    size_t len = C.line_len[0];
    cr_assert_eq(len, large_line_len(bytes), "line of %zu bytes", len);
    cr_assert(memcmp(s, large_head, sizeof large_head - 1) == 0, "head: %.80s", s);
    const char *text = s + sizeof large_head - 1;
    static const char pat[] = "0123456789abcdef";
    for (size_t i = 0; i < bytes; i++)
        if (text[i] != pat[i % 16])
            cr_assert_fail("text byte %zu is 0x%02x, want '%c'", i, (unsigned char)text[i],
                           pat[i % 16]);
    cr_assert(memcmp(text + bytes, large_foot, sizeof large_foot - 1) == 0);
    run_for(20);
    cr_assert_eq(C.lines, 1, "one line, not pieces");
    cr_assert_eq(C.shared, 1, "a large line is handed over as a message, not copied");
    cr_assert_eq(C.gone, 0);
    close_and_wait(u);
}

Test(upstream, line_of_exactly_max_line_bytes_passes, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream_params p = params(argv);
    p.max_line_bytes = 100000; /* more than one 64 KiB read */
    struct upstream *u = spawn_p(&p);
    size_t bytes = p.max_line_bytes - large_line_len(0);
    ask_large(u, bytes);
    cr_assert(run_until(have_line, DEADLINE_MS), "gone: %d (%s)", C.gone, C.reason);
    cr_assert_eq(C.line_len[0], p.max_line_bytes);
    cr_assert_eq(C.gone, 0);
    /* Still serving. */
    reset_lines();
    send_str(u, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
    cr_assert(run_until(have_line, DEADLINE_MS));
    cr_assert(strstr(C.line[0], "\"id\":2") != NULL, "answer: %s", C.line[0]);
    close_and_wait(u);
}

/* A line of line_len bytes with max_line_bytes = max ends the child, and no piece is delivered. */
static void
expect_overlong(size_t max, size_t line_len)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream_params p = params(argv);
    p.max_line_bytes = max;
    struct upstream *u = spawn_p(&p);
    ask_large(u, line_len - large_line_len(0));
    cr_assert(run_until(have_gone, DEADLINE_MS),
              "max_line_bytes %zu, line of %zu: gone_cb did not fire; %d line(s) delivered, the "
              "first of %zu bytes",
              max, line_len, C.lines, C.lines ? C.line_len[0] : 0);
    cr_assert_eq(C.gone, 1);
    cr_assert_neq(C.reason[0], '\0', "empty reason");
    cr_assert(strstr(C.reason, "line") != NULL, "reason: %s", C.reason);
    cr_assert_eq(C.lines, 0, "no piece of the overlong line is delivered");
    run_for(20);
    cr_assert_eq(C.gone, 1, "gone_cb fires at most once");
    close_and_wait(u);
}

Test(upstream, line_far_over_max_line_bytes_ends_child, .init = fx_init, .fini = fx_fini)
{
    expect_overlong(1000, 5000);
}

/* One byte over, with a ceiling below one read (the buffer grows to 1024 and one read fills it). */
Test(upstream, line_one_over_small_max_ends_child, .init = fx_init, .fini = fx_fini)
{
    expect_overlong(1000, 1001);
}

/* One byte over, with a ceiling above one 64 KiB read. */
Test(upstream, line_one_over_large_max_ends_child, .init = fx_init, .fini = fx_fini)
{
    expect_overlong(100000, 100001);
}

Test(upstream, lines_split_and_trimmed, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" },
                     (char[]){ "printf 'a\\r\\n\\nbb\\n\\r\\nlast-without-newline'" }, NULL };
    struct upstream *u = spawn(argv);
    cr_assert(run_until(have_gone, DEADLINE_MS));
    cr_assert_eq(C.lines, 2, "lines: %d", C.lines);
    cr_assert_str_eq(C.line[0], "a", "CR before LF is dropped");
    cr_assert_str_eq(C.line[1], "bb");
    close_and_wait(u);
}

/* --- exits and spawn failures ------------------------------------------------------------ */

Test(upstream, child_exit_fires_gone, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" }, (char[]){ "exit 3" }, NULL };
    struct upstream *u = spawn(argv);
    pid_t pid = upstream_pid(u);
    cr_assert(run_until(have_gone, DEADLINE_MS), "gone_cb did not fire");
    cr_assert_neq(C.reason[0], '\0');
    cr_assert_eq(C.lines, 0);
    run_for(30);
    cr_assert_eq(C.gone, 1, "gone_cb fires at most once");
    /* The owner still holds it until upstream_close. */
    cr_assert_eq(upstream_live_count(), 1);
    char m[] = "{}\n";
    struct msg *msg = msg_new(3);
    memcpy(msg->data, m, 3);
    cr_assert_eq(upstream_send(u, msg), -1, "send to a gone child");
    cr_assert_eq(msg->refs, 1, "no reference taken on refusal");
    msg_unref(msg);
    close_and_wait(u);
    cr_assert(process_gone(pid));
}

/* True when /proc/PID/comm (comm_path) names want. */
static bool
proc_comm_is(const char *comm_path, const char *want)
{
    char comm[32] = "";
    FILE *f = fopen(comm_path, "re");
    if (f == NULL)
        return false;
    bool got = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    return got && strcmp(comm, want) == 0;
}

Test(upstream, stdin_closed_by_child_fires_gone, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" },
                     (char[]){ "exec 0<&-; exec sleep 100" }, NULL };
    struct upstream *u = spawn(argv);
    pid_t pid = upstream_pid(u);
    /*
     * Wait until the child has closed its stdin, that is until it runs sleep, which the shell
     * execs only after. /proc/PID/fd/0 failing to resolve does not prove it (a lookup can fail
     * for other reasons than a closed descriptor), and a send before the shell closed it is
     * simply written, which fails the test.
     */
    char path[64], comm_path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/0", (int)pid);
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)pid);
    uint64_t end = util_now_ms() + DEADLINE_MS;
    while (!proc_comm_is(comm_path, "sleep") && util_now_ms() < end)
        run_for(5);
    cr_assert(proc_comm_is(comm_path, "sleep"), "the child never ran sleep");
    cr_assert_neq(access(path, F_OK), 0, "the child kept its stdin");
    send_str(u, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    /* The write failed inside upstream_send: the owner hears of it later, never inside it. */
    cr_assert_eq(C.gone, 0, "gone_cb ran inside upstream_send");
    cr_assert_eq(send_small(u), -1, "a send after the failed write is refused");
    cr_assert_eq(C.gone, 0, "gone_cb ran inside upstream_send");
    cr_assert(run_until(have_gone, DEADLINE_MS), "writing to a closed stdin did not end it");
    cr_assert(strstr(C.reason, "stdin") != NULL, "reason: %s", C.reason);
    close_and_wait(u);
}

Test(upstream, gone_never_after_close, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" }, (char[]){ "echo hi; exit 3" }, NULL };
    struct upstream *u = spawn(argv);
    upstream_close(u, "at once");
    upstream_close(u, "twice is harmless");
    cr_assert(run_until(none_live, DEADLINE_MS));
    cr_assert_eq(C.gone, 0);
    cr_assert_eq(C.lines, 0, "no line after upstream_close");
}

/* The spawn fails, leaving nothing behind, and *errstr blames what failed (want). */
static void
expect_spawn_fails_with(const struct upstream_params *p, const char *want)
{
    int fds_before = count_own_fds();
    const char *err = NULL;
    struct upstream *u = upstream_spawn(L, p, line_cb, gone_cb, &C, &err);
    cr_assert_null(u);
    cr_assert_not_null(err, "no errstr");
    cr_assert_neq(err[0], '\0');
    cr_assert_str_eq(err, want);
    cr_assert_eq(upstream_live_count(), 0);
    errno = 0;
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left behind");
    cr_assert_eq(errno, ECHILD);
    cr_assert_eq(count_own_fds(), fds_before, "fds leaked");
}

Test(upstream, spawn_missing_command, .init = fx_init, .fini = fx_fini)
{
    char *abs[] = { (char[]){ "/nonexistent/mcpgw-no-such-command" }, NULL };
    struct upstream_params p = params(abs);
    expect_spawn_fails_with(&p, "command not found");
    char *rel[] = { (char[]){ "mcpgw-no-such-command-in-path" }, NULL };
    p = params(rel);
    expect_spawn_fails_with(&p, "command not found");
    char *noexec[] = { (char[]){ "/etc/hostname" }, NULL };
    p = params(noexec);
    if (access(noexec[0], F_OK) == 0)
        expect_spawn_fails_with(&p, "command not executable");
}

Test(upstream, spawn_missing_cwd, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" }, (char[]){ "exit 0" }, NULL };
    struct upstream_params p = params(argv);
    p.cwd = "/nonexistent/mcpgw-dir";
    expect_spawn_fails_with(&p, "cwd not found");
    p.cwd = "/etc/passwd";
    expect_spawn_fails_with(&p, "cwd is not a directory");
}

Test(upstream, cwd_is_applied, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" }, (char[]){ "pwd" }, NULL };
    struct upstream_params p = params(argv);
    p.cwd = "/tmp";
    struct upstream *u = spawn_p(&p);
    cr_assert(run_until(have_line, DEADLINE_MS));
    cr_assert_str_eq(C.line[0], "/tmp");
    close_and_wait(u);
}

/* --- the stop ladder --------------------------------------------------------------------- */

Test(upstream, close_graceful_on_stdin_eof, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 10000;
    p.term_grace_ms = 10000;
    struct upstream *u = spawn_p(&p);
    pid_t pid = upstream_pid(u);
    send_str(u, init_req);
    cr_assert(run_until(have_line, DEADLINE_MS));
    uint64_t start = util_now_ms();
    close_and_wait(u);
    /* The example server exits on EOF: no signal was needed. */
    cr_assert_lt(util_now_ms() - start, 5000);
    cr_assert(process_gone(pid));
}

Test(upstream, close_escalates_to_sigkill, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, (char[]){ "--ignore-sigterm" },
                     (char[]){ "--no-stdin-exit" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 50;
    p.term_grace_ms = 50;
    struct upstream *u = spawn_p(&p);
    pid_t pid = upstream_pid(u);
    /* An answer proves the server is up, with SIGTERM ignored. */
    send_str(u, init_req);
    cr_assert(run_until(have_line, DEADLINE_MS));
    char ign[64];
    cr_assert(proc_status(pid, "SigIgn", ign, sizeof ign));
    unsigned long long mask = strtoull(ign, NULL, 16);
    cr_assert(mask & (1ull << (SIGTERM - 1)), "SIGTERM not ignored: %s", ign);

    uint64_t start = util_now_ms();
    upstream_close(u, "test");
    cr_assert(run_until(none_live, DEADLINE_MS), "not freed: live %zu", upstream_live_count());
    uint64_t took = util_now_ms() - start;
    /* stdin grace, then SIGTERM (ignored), then the term grace, then SIGKILL. */
    cr_assert_geq(took, 95, "freed after %llu ms: SIGKILL cannot have been needed",
                  (unsigned long long)took);
    cr_assert(process_gone(pid));
    cr_assert_eq(C.gone, 0);
}

/* --- what the child inherits ------------------------------------------------------------- */

Test(upstream, own_group_and_clean_signal_state, .init = fx_init, .fini = fx_fini)
{
    /* Make the parent's state dirty so that inheriting it would show. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    cr_assert_eq(sigprocmask(SIG_BLOCK, &set, NULL), 0);
    signal(SIGUSR2, SIG_IGN);
    signal(SIGHUP, SIG_IGN);

    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL }; /* found through PATH */
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 20;
    p.term_grace_ms = 50;
    struct upstream *u = spawn_p(&p);
    pid_t pid = upstream_pid(u);
    cr_assert_eq(getpgid(pid), pid, "the child leads its own process group");
    cr_assert_neq(getpgid(pid), getpgid(0));
    char blk[64], ign[64];
    cr_assert(proc_status(pid, "SigBlk", blk, sizeof blk));
    cr_assert_eq(strtoull(blk, NULL, 16), 0, "SigBlk %s", blk);
    cr_assert(proc_status(pid, "SigIgn", ign, sizeof ign));
    /*
     * glibc's posix_spawn sets its two internal signals (32 and 33, excluded from sigfillset) to
     * SIG_IGN in the helper, and they stay ignored across exec; glibc children reinstall them.
     * Every other signal must be at its default.
     */
    unsigned long long ignored = strtoull(ign, NULL, 16) & ~((1ull << 31) | (1ull << 32));
    cr_assert_eq(ignored, 0, "SigIgn %s", ign);
    close_and_wait(u);
    cr_assert(process_gone(pid));
}

static pid_t grandparent_pid;
static pid_t grandchild_pid;

static bool
have_grandchild(void)
{
    grandchild_pid = first_child_of(grandparent_pid);
    return grandchild_pid > 0;
}

static bool
grandchild_gone(void)
{
    return process_gone(grandchild_pid);
}

Test(upstream, group_kill_reaches_grandchild, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" },
                     (char[]){ "sleep 100 & exec sleep 100" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 20;
    p.term_grace_ms = 100;
    struct upstream *u = spawn_p(&p);
    grandparent_pid = upstream_pid(u);
    cr_assert(run_until(have_grandchild, DEADLINE_MS), "no grandchild appeared");
    pid_t g = grandchild_pid;
    cr_assert_neq(g, grandparent_pid);
    cr_assert_eq(getpgid(g), grandparent_pid, "the grandchild is in the child's group");
    close_and_wait(u);
    cr_assert(run_until(grandchild_gone, DEADLINE_MS), "grandchild %d survived", (int)g);
}

Test(upstream, child_stdio_blocking_ours_not, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 20;
    p.term_grace_ms = 50;
    struct upstream *u = spawn_p(&p);
    pid_t pid = upstream_pid(u);
    for (int fd = 0; fd <= 2; fd++) {
        long flags = fd_flags(pid, fd);
        cr_assert_neq(flags, -1, "child fd %d is not open", fd);
        cr_assert_eq(flags & O_NONBLOCK, 0, "child fd %d is non-blocking (flags 0%lo)", fd, flags);
        char link[128];
        cr_assert(fd_link(pid, fd, link, sizeof link));
        cr_assert(strncmp(link, "pipe:", 5) == 0, "child fd %d is %s", fd, link);
        /* Our end of the same pipe: non-blocking and close-on-exec. */
        int ours = own_fd_for(link);
        cr_assert_neq(ours, -1, "no end of %s (child fd %d) in the parent", link, fd);
        long oflags = fd_flags(getpid(), ours);
        cr_assert(oflags & O_NONBLOCK, "our end of child fd %d blocks (0%lo)", fd, oflags);
        cr_assert(oflags & O_CLOEXEC, "our end of child fd %d lacks O_CLOEXEC (0%lo)", fd, oflags);
        cr_assert_eq(oflags & O_ACCMODE, fd == 0 ? O_WRONLY : O_RDONLY);
    }
    close_and_wait(u);
}

/* Reads the child's fd table: returns a bitmask of fds 0-2 seen, or -1 with *extra set to a higher
 * fd. */
static int
child_fds(pid_t pid, int *extra)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "%s: %s", path, strerror(errno));
    int mask = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd < 0 || fd > 2) {
            *extra = fd;
            mask = -1;
            break;
        }
        mask |= 1 << fd;
    }
    closedir(d);
    return mask;
}

Test(upstream, only_fds_0_to_2_in_child, .init = fx_init, .fini = fx_fini)
{
    /* An inheritable fd in the parent must not reach the child. */
    int leak = open("/dev/null", O_RDONLY);
    cr_assert_geq(leak, 3);
    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 20;
    p.term_grace_ms = 50;
    struct upstream *u = spawn_p(&p);
    pid_t pid = upstream_pid(u);
    /*
     * sleep opens its locale files for a moment while it starts (seen as a passing fd 3), so the
     * table is read until it holds exactly 0-2; an inherited fd would stay for good.
     */
    int extra = -1, mask = -1;
    uint64_t deadline = util_now_ms() + 2000;
    for (int i = 0; i < 2000 && util_now_ms() < deadline; i++) {
        if ((mask = child_fds(pid, &extra)) == 7)
            break;
        usleep(1000);
    }
    cr_assert_neq(mask, -1, "child still has fd %d open after 2 s", extra);
    cr_assert_eq(mask, 7, "child lacks one of fds 0-2");
    close(leak);
    close_and_wait(u);
}

/* --- stdin ceiling ----------------------------------------------------------------------- */

Test(upstream, send_refused_past_stdin_max, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL }; /* never reads stdin */
    struct upstream_params p = params(argv);
    p.stdin_max_bytes = 16384;
    p.stdin_grace_ms = 50;
    p.term_grace_ms = 100;
    struct upstream *u = spawn_p(&p);

    /* Larger than the ceiling on its own. */
    struct msg *big = msg_new(p.stdin_max_bytes + 1);
    memset(big->data, 'x', big->len);
    cr_assert_eq(upstream_send(u, big), -1);
    cr_assert_eq(big->refs, 1);
    msg_unref(big);

    struct msg *m = x_line(4096);
    /* The pipe takes the first ones; the queue grows once it is full. */
    int sent = 0;
    while (upstream_queued_bytes(u) == 0) {
        cr_assert_eq(upstream_send(u, m), 0, "refused with an empty queue after %d", sent);
        cr_assert_lt(++sent, 1100, "the pipe never filled");
    }
    size_t q;
    for (;;) {
        q = upstream_queued_bytes(u);
        cr_assert_leq(q, p.stdin_max_bytes);
        if (upstream_send(u, m) == -1)
            break;
        cr_assert_eq(upstream_queued_bytes(u), q + m->len);
        cr_assert_lt(++sent, 2000);
    }
    cr_assert_gt(q + m->len, p.stdin_max_bytes, "refused with room left (%zu queued)", q);
    cr_assert_eq(upstream_queued_bytes(u), q, "a refused send changed the queue");
    /* The queue holds one reference per accepted send; the refused one took none. */
    cr_assert_eq(m->refs, 1 + q / m->len, "refs %u, queued %zu", m->refs, q);
    cr_assert_eq(upstream_send(u, m), -1, "still refused");
    cr_assert_eq(C.gone, 0);

    /* Closing with a stuck queue: stdin grace, then SIGTERM ends sleep. */
    upstream_close(u, "stuck");
    cr_assert(run_until(none_live, DEADLINE_MS));
    cr_assert_eq(m->refs, 1, "the queue's references went with it");
    msg_unref(m);
}

Test(upstream, control_messages_pass_a_full_queue_up_to_the_reserve, .init = fx_init,
     .fini = fx_fini)
{
    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL }; /* never reads stdin */
    struct upstream_params p = params(argv);
    p.stdin_max_bytes = 16384;
    p.stdin_reserve_bytes = 1024;
    p.stdin_grace_ms = 50;
    p.term_grace_ms = 100;
    struct upstream *u = spawn_p(&p);
    struct msg *m = x_line(4096);
    for (int sent = 0; upstream_send(u, m) == 0;)
        cr_assert_lt(++sent, 2000, "the queue never filled");
    size_t q = upstream_queued_bytes(u);
    cr_assert_leq(q, p.stdin_max_bytes);
    /* Past the ceiling the owner's control messages still queue, within the reserve. */
    char ctl[300];
    memset(ctl, 'c', sizeof ctl - 1);
    ctl[sizeof ctl - 1] = '\n';
    struct iovec iov = { ctl, sizeof ctl };
    int taken = 0;
    while (upstream_send_control_iov(u, &iov, 1) == 0)
        cr_assert_lt(++taken, 100);
    cr_assert_eq((size_t)taken, (p.stdin_max_bytes + 1024 - q) / 300,
                 "%d control messages taken past %zu queued", taken, q);
    cr_assert_eq(upstream_send(u, m), -1, "the client's kind is still refused");
    /* The reserve full too: the child has stopped reading its stdin, and is gone. */
    cr_assert(run_until(have_gone, DEADLINE_MS));
    cr_assert_str_eq(C.reason, "child stopped reading its stdin");
    upstream_close(u, "stuck");
    cr_assert(run_until(none_live, DEADLINE_MS));
    msg_unref(m);
}

/* --- batches ----------------------------------------------------------------------------- */

static bool
have_three_lines(void)
{
    return C.lines >= 3;
}

Test(upstream, batch_writes_once_at_its_end, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "cat" }, NULL }; /* its stdin back as lines */
    struct upstream *u = spawn(argv);
    upstream_batch_begin();
    send_str(u, "{\"n\":1}\n");
    send_str(u, "{\"n\":2}\n");
    upstream_batch_begin(); /* nested: only the outermost end writes */
    send_str(u, "{\"n\":3}\n");
    upstream_batch_end();
    cr_assert_eq(upstream_queued_bytes(u), 24, "the batch holds all three");
    run_for(20);
    cr_assert_eq(C.lines, 0, "nothing reached the child before the batch's end");
    upstream_batch_end();
    cr_assert_eq(upstream_queued_bytes(u), 0, "written at the batch's end");
    cr_assert(run_until(have_three_lines, DEADLINE_MS), "%d lines back", C.lines);
    cr_assert_str_eq(C.line[0], "{\"n\":1}");
    cr_assert_str_eq(C.line[1], "{\"n\":2}");
    cr_assert_str_eq(C.line[2], "{\"n\":3}");
    /* Outside a batch a send is written at once again. */
    send_str(u, "{\"n\":4}\n");
    cr_assert_eq(upstream_queued_bytes(u), 0);
    close_and_wait(u);
}

Test(upstream, batch_refuses_only_what_would_not_fit, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "cat" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_max_bytes = 65536; /* the least stdin_queue_bytes */
    struct upstream *u = spawn_p(&p);
    struct msg *m = x_line(40000);
    upstream_batch_begin();
    cr_assert_eq(upstream_send(u, m), 0);
    cr_assert_eq(upstream_queued_bytes(u), m->len, "held by the batch");
    /*
     * Both would pass the ceiling: what the batch holds goes to the (empty) pipe first, and the
     * second is taken, as it would have been without a batch; it is held in turn.
     */
    cr_assert_eq(upstream_send(u, m), 0, "refused although the pipe had room");
    cr_assert_eq(upstream_queued_bytes(u), m->len, "the first was written, the second held");
    upstream_batch_end();
    cr_assert(run_until(have_line, DEADLINE_MS));
    close_and_wait(u);
    msg_unref(m);
}

Test(upstream, batch_writes_64k_at_once, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "cat" }, NULL };
    struct upstream *u = spawn(argv);
    struct msg *m = x_line(70000);
    upstream_batch_begin();
    cr_assert_eq(upstream_send(u, m), 0);
    cr_assert_lt(upstream_queued_bytes(u), m->len, "a batch held back 64 KiB or more");
    upstream_batch_end();
    cr_assert(run_until(have_line, DEADLINE_MS));
    cr_assert_eq(C.line_len[0], m->len - 1);
    close_and_wait(u);
    msg_unref(m);
}

Test(upstream, batch_holds_a_closed_child_until_it_is_written, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "cat" }, NULL };
    struct upstream *u = spawn(argv);
    upstream_batch_begin();
    send_str(u, "{\"last\":true}\n");
    upstream_close(u, "closed inside the batch");
    cr_assert_eq(upstream_live_count(), 1);
    upstream_batch_end(); /* writes the line, then stdin closes: cat ends */
    cr_assert(run_until(none_live, DEADLINE_MS), "not freed after the batch");
    cr_assert_eq(C.lines, 0, "a line after upstream_close");
    C.u = NULL;
}

/* --- pause and callbacks around close ---------------------------------------------------- */

Test(upstream, pause_holds_lines_back, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream *u = spawn(argv);
    upstream_pause(u, true);
    upstream_pause(u, true);
    send_str(u, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
    run_for(100);
    cr_assert_eq(C.lines, 0, "a line while paused");
    upstream_pause(u, false);
    cr_assert(run_until(have_line, DEADLINE_MS));
    cr_assert(strstr(C.line[0], "\"id\":5") != NULL);
    close_and_wait(u);
}

/*
 * A child writes its last answer and exits while stdout is paused (HTTP back-pressure). The
 * answer is in the pipe; resuming must deliver it before (or instead of) declaring the child gone.
 */
Test(upstream, paused_output_survives_exit, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "/bin/sh" }, (char[]){ "-c" }, (char[]){ "echo last-answer" },
                     NULL };
    struct upstream *u = spawn(argv);
    upstream_pause(u, true);
    pid_t pid = upstream_pid(u);
    /* Let it exit while paused (the pidfd fires; the stdout watch is off). */
    uint64_t end = util_now_ms() + DEADLINE_MS;
    while (!process_gone(pid) && C.gone == 0 && util_now_ms() < end)
        run_for(5);
    run_for(20);
    upstream_pause(u, false);
    run_until(have_line, 200);
    cr_assert_eq(C.lines, 1, "the line written before exit was lost (gone_cb: %d, \"%s\")", C.gone,
                 C.reason);
    cr_assert_str_eq(C.line[0], "last-answer");
    close_and_wait(u);
}

Test(upstream, close_inside_line_callback, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ EXAMPLE }, NULL };
    struct upstream *u = spawn(argv);
    C.close_in_line = true;
    /* Two answers, likely in one read: the second must not be delivered after the close. */
    send_str(u, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
    cr_assert(run_until(none_live, DEADLINE_MS), "not freed after closing in the callback");
    cr_assert_eq(C.lines, 1);
    cr_assert_eq(C.gone, 0);
}

Test(upstream, stderr_is_drained, .init = fx_init, .fini = fx_fini)
{
    log_set_level(LOG_ERROR); /* the child's noise goes to our log at info */
    /* About 300 KB on stderr before it reads stdin: more than a pipe holds. */
    char *argv[] = { (char[]){ EXAMPLE }, (char[]){ "--stderr-noise" }, (char[]){ "3000" }, NULL };
    struct upstream *u = spawn(argv);
    send_str(u, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n");
    cr_assert(run_until(have_line, DEADLINE_MS), "no answer: stderr not drained?");
    cr_assert(strstr(C.line[0], "\"id\":9") != NULL);
    close_and_wait(u);
}

Test(upstream, two_children_counted, .init = fx_init, .fini = fx_fini)
{
    char *argv[] = { (char[]){ "sleep" }, (char[]){ "100" }, NULL };
    struct upstream_params p = params(argv);
    p.stdin_grace_ms = 10;
    p.term_grace_ms = 50;
    struct upstream *a = spawn_p(&p);
    struct upstream *b = spawn_p(&p);
    cr_assert_eq(upstream_live_count(), 2);
    cr_assert_neq(upstream_pid(a), upstream_pid(b));
    upstream_close(a, "a");
    upstream_close(b, "b");
    cr_assert(run_until(none_live, DEADLINE_MS));
}
