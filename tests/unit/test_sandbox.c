/* SPDX-License-Identifier: MIT */
/*
 * sandbox: what a box may be made of (paths absolute, without "..", never /, /tmp, /proc or /dev,
 * which are the box's own), two boxes told apart, the one-line summary, the list of refused
 * system calls, a child's own directory refused where a bound path would be, the owners' groups,
 * the labels its refusals are counted under, and one real boxed child whose refused unshare is
 * counted for its server only (the loop run until the child is gone, no sleep), and under a
 * filter that has a listener already, the EPERM filter, uncounted. The box itself is proven
 * through the gateway (tests/integration/sandbox.test.mjs). Through sandbox.h,
 * sandbox_notify.h and upstream.h.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "buf.h"
#include "loop.h"
#include "sandbox.h"
#include "sandbox_notify.h"
#include "upstream.h"

TestSuite(sandbox, .timeout = 10);

Test(sandbox, bindable_paths)
{
    static const char *const no[] = { "/",     "//",      "/tmp", "/tmp/",
                                      "/proc", "/proc/1", "/dev", "/dev/shm" };
    static const char *const yes[] = { "/srv", "/tmp/x", "/procs", "/devices", "/home/u" };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        cr_expect(!sandbox_path_bindable(no[i]), "%s", no[i]);
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        cr_expect(sandbox_path_bindable(yes[i]), "%s", yes[i]);
}

/* A NULL-terminated list of one writable copy of s (the spec's lists hold char *). */
static char **
one(const char *s)
{
    char **v = calloc(2, sizeof(char *));
    v[0] = strdup(s);
    return v;
}

static void
one_free(char **v)
{
    free(v[0]);
    free(v);
}

Test(sandbox, new_refuses_bad_paths)
{
    static const char *const bad[] = { "relative", "/a/../b", "/a/..", "/tmp", "/" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **w = one(bad[i]);
        struct sandbox_spec spec = { .writable = w };
        const char *err = NULL;
        cr_expect_null(sandbox_new(&spec, &err), "%s", bad[i]);
        cr_expect_not_null(err);
        one_free(w);
    }
    char **ok = one("/srv/a..b");
    struct sandbox_spec spec = { .read_only = ok };
    const char *err = NULL;
    struct sandbox *b = sandbox_new(&spec, &err);
    cr_assert_not_null(b, "%s", err ? err : "");
    sandbox_free(b);
    one_free(ok);
}

Test(sandbox, same_and_summary)
{
    char **ro = one("/srv/data"), **hidden = one("/etc/mcp-gateway");
    struct sandbox_spec spec = { .read_only = ro, .hidden = hidden, .max_processes = 16 };
    const char *err = NULL;
    struct sandbox *a = sandbox_new(&spec, &err), *b = sandbox_new(&spec, &err);
    spec.network_none = true;
    struct sandbox *c = sandbox_new(&spec, &err);
    cr_assert(a != NULL && b != NULL && c != NULL);
    cr_expect(sandbox_same(a, b));
    cr_expect(!sandbox_same(a, c));
    cr_expect(!sandbox_same(a, NULL));
    cr_expect(sandbox_same(NULL, NULL));
    /* The directory the child starts in is the box's too: a reload that moves it is a new box. */
    spec.network_none = false;
    spec.cwd = "/srv/data";
    struct sandbox *d = sandbox_new(&spec, &err), *e = sandbox_new(&spec, &err);
    cr_assert(d != NULL && e != NULL);
    cr_expect(sandbox_has_cwd(d) && !sandbox_has_cwd(a));
    cr_expect(!sandbox_same(a, d));
    cr_expect(sandbox_same(d, e));
    sandbox_free(d);
    sandbox_free(e);
    char line[512];
    sandbox_summary(c, line, sizeof(line));
    cr_expect(strstr(line, "net (loopback only)") != NULL, "%s", line);
    cr_expect(strstr(line, "1 bound, 1 hidden") != NULL, "%s", line);
    cr_expect(strstr(line, "processes 16") != NULL, "%s", line);
    cr_expect(strstr(sandbox_refused_list(), "ptrace, ") == sandbox_refused_list());
    cr_expect(strstr(sandbox_refused_list(), "io_uring_setup") != NULL);
    sandbox_free(a);
    sandbox_free(b);
    sandbox_free(c);
    one_free(ro);
    one_free(hidden);
}

static int
never(void *arg)
{
    (void)arg;
    _exit(0);
}

/* A child's own directory must be bindable like any path of the view: refused before any clone. */
Test(sandbox, own_directory_refused)
{
    char **ro = one("/srv/data");
    struct sandbox_spec spec = { .read_only = ro };
    const char *err = NULL;
    struct sandbox *b = sandbox_new(&spec, &err);
    cr_assert_not_null(b);
    static const char *const bad[] = { "relative", "/a/../b", "/tmp", "/", "/proc/1" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sandbox_own own = { bad[i], (gid_t)-1 };
        errno = 0;
        cr_expect_eq(sandbox_spawn(b, &own, never, NULL, NULL), -1, "%s", bad[i]);
        cr_expect_eq(errno, EINVAL, "%s", bad[i]);
    }
    sandbox_free(b);
    one_free(ro);
}

/* An owner's group: from its own reserved range, a new one each time, for a root gateway alone. */
Test(sandbox, owner_groups)
{
    char err[256];
    cr_assert_eq(sandbox_module_init(err, sizeof(err)), 0, "%s", err);
    gid_t a = sandbox_group_new(), b = sandbox_group_new();
    if (geteuid() != 0) {
        cr_expect_eq(a, (gid_t)-1);
        cr_expect_eq(b, (gid_t)-1);
    } else {
        cr_expect_geq(a, (gid_t)0x7fff0000u);
        cr_expect_geq(b, (gid_t)0x7fff0000u);
        cr_expect_neq(a, b);
    }
    sandbox_module_free();
}

Test(sandbox, refusal_labels)
{
    char err[256];
    cr_assert_eq(sandbox_module_init(err, sizeof(err)), 0, "%s", err);
    cr_expect_str_eq(sandbox_refused_label_name(sandbox_refused_label(SYS_ptrace)), "ptrace");
    cr_expect_str_eq(sandbox_refused_label_name(sandbox_refused_label(SYS_unshare)), "unshare");
    cr_expect_str_eq(sandbox_refused_label_name(sandbox_refused_label(SYS_clone)), "clone");
    cr_expect_str_eq(sandbox_refused_label_name(sandbox_refused_label(SYS_read)), "other");
    cr_expect_lt(sandbox_refused_label(SYS_read), SANDBOX_REFUSED_LABELS);
    sandbox_module_free();
}

static struct loop *L;
static int gone;

static void
on_line(char *line, size_t len, struct msg *shared, void *arg)
{
    (void)line;
    (void)len;
    (void)shared;
    (void)arg;
}

static void
on_gone(const char *reason, void *arg)
{
    (void)reason;
    (void)arg;
    gone++;
}

static void
on_deadline(void *arg)
{
    *(bool *)arg = true;
    loop_stop(L);
}

/* The loop stops after a turn once the child is gone (phase 0), then once it is freed (1). */
static int phase;

static void
after(void *arg)
{
    (void)arg;
    if (phase == 0 ? gone > 0 : upstream_live_count() == 0)
        loop_stop(L);
}

/*
 * A boxed child of server running unshare(1), which asks for a user namespace (the filter
 * refuses it), the loop run until it is gone and freed; the refusals' series into text.
 */
static void
run_unshare(struct sandbox *b, const char *server, char *text, size_t size)
{
    signal(SIGPIPE, SIG_IGN);
    L = loop_new();
    gone = phase = 0;
    char a0[] = "/usr/bin/unshare", a1[] = "--user", a2[] = "/bin/true";
    char *const argv[] = { a0, a1, a2, NULL };
    struct upstream_params p = { .argv = argv,
                                 .envp = environ,
                                 .tag = "t",
                                 .server = server,
                                 .max_line_bytes = 4096,
                                 .stdin_max_bytes = 4096,
                                 .stdin_grace_ms = 100,
                                 .term_grace_ms = 100,
                                 .sandbox = b };
    const char *errstr = NULL;
    struct upstream *u = upstream_spawn(L, &p, on_line, on_gone, NULL, &errstr);
    cr_assert_not_null(u, "%s", errstr ? errstr : "");
    bool late = false;
    struct loop_timer *t = loop_timer_add(L, 10000, on_deadline, &late);
    loop_set_hooks(L, NULL, after, NULL);
    while (!late && gone == 0)
        loop_run(L);
    upstream_close(u, "test");
    phase = 1;
    while (!late && upstream_live_count() > 0)
        loop_run(L);
    cr_assert(!late, "the child did not end within 10 s");
    loop_timer_del(t);
    loop_free(L);
    struct buf m;
    buf_init(&m, 1 << 20);
    sandbox_notify_metrics(&m);
    cr_assert_eq(buf_append(&m, "", 1), 0);
    snprintf(text, size, "%s", buf_head(&m));
    buf_clear(&m);
}

/* A box the kernel gives here, its summary in line; skips the test otherwise. */
static struct sandbox *
box_or_skip(char *line, size_t size)
{
    char err[256];
    cr_assert_eq(sandbox_module_init(err, sizeof(err)), 0, "%s", err);
    struct sandbox_spec spec = { .max_processes = 16 };
    const char *why = NULL;
    struct sandbox *b = sandbox_new(&spec, &why);
    cr_assert_not_null(b);
    if (sandbox_probe(b, err, sizeof(err)) == -1)
        cr_skip_test("the kernel refuses the box here: %s", err);
    sandbox_summary(b, line, size);
    return b;
}

Test(sandbox, refusal_counted_for_its_server, .timeout = 30)
{
    char line[1024], text[4096];
    struct sandbox *b = box_or_skip(line, sizeof(line));
    if (strstr(line, "refusals not counted") != NULL)
        cr_skip_test("%s", line);
    cr_expect(strstr(line, "refusals counted (mcpgw_sandbox_refused_total)") != NULL, "%s", line);
    run_unshare(b, "unit-a", text, sizeof(text));
    cr_expect(strstr(text, "mcpgw_sandbox_refused_total{server=\"unit-a\",syscall=\"unshare\"} 1\n")
                  != NULL,
              "%s", text);
    sandbox_free(b);
    upstream_module_free();
    sandbox_module_free();
}

/*
 * The kernel gives one listener per filter chain: under a filter that has one (this test's own
 * process, as a gateway in some containers), the child loads the EPERM filter, the summary says
 * the refusals are not counted and why, and none is.
 */
Test(sandbox, no_listener_falls_back_to_eperm, .timeout = 30)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_uselib, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
    cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    int listener =
        (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener == -1)
        cr_skip_test("no seccomp listener here at all");
    char line[1024], text[4096];
    struct sandbox *b = box_or_skip(line, sizeof(line));
    cr_expect(strstr(line, "refusals not counted (the kernel gives no listener: EBUSY") != NULL,
              "%s", line);
    run_unshare(b, "unit-b", text, sizeof(text));
    cr_expect(strstr(text, "unit-b") == NULL, "%s", text);
    close(listener);
    sandbox_free(b);
    upstream_module_free();
    sandbox_module_free();
}
