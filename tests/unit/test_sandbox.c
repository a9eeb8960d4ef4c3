/* SPDX-License-Identifier: MIT */
/*
 * sandbox: what a box may be made of (paths absolute, without "..", never /, /tmp, /proc or /dev,
 * which are the box's own), two boxes told apart, the one-line summary, the list of refused
 * system calls. The box itself is proven through the gateway (tests/integration/sandbox.test.mjs).
 * Through sandbox.h only.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "sandbox.h"

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
