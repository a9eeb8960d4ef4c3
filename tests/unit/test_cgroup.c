/* SPDX-License-Identifier: MIT */
/*
 * cgroup: the per-child cgroup v2 against a directory tree that stands for a cgroup2 filesystem
 * (cgroup_source.stand_in: the files the kernel's mkdir would make are created by the writes).
 * What the module writes (the gateway's move into DIR/gateway, +memory +pids in DIR's
 * subtree_control, memory.max, memory.swap.max, memory.oom.group and pids.max per child, the
 * child's own "0" into its cgroup.procs), that --check-config writes nothing, the OOM count read
 * back, the directory removed; and each reason it refuses (no unified line, no cgroup2 mount,
 * controllers missing, the root cgroup, not delegated). The real hierarchy is the integration
 * test's (tests/integration/sandbox_cgroup.test.mjs).
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "cgroup.h"
#include "sandbox.h"
#include "slurp.h"

TestSuite(cgroup, .timeout = 20);

static char T[256]; /* the tree's root, under /tmp */

static void
put(const char *rel, const char *text)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", T, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs(text, f);
    fclose(f);
}

static void
dir(const char *rel)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", T, rel);
    cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "%s", p);
}

/* The file's text, "" when it is missing (freed by the caller). */
static char *
get(const char *rel)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", T, rel);
    char *s = slurp(p);
    return s != NULL ? s : strdup("");
}

static bool
exists(const char *rel)
{
    char p[PATH_MAX + 64];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", T, rel);
    return stat(p, &st) == 0;
}

/*
 * T/mnt is the cgroup2 mount, T/mnt/svc the gateway's cgroup with controllers; the
 * mountinfo also holds a cgroup v1 mount, as a hybrid layout's does. delegated: marked by the
 * attribute systemd's Delegate=yes sets (as root), or owned by the test's own user (else).
 */
static void
tree(const char *own, const char *controllers, bool delegated)
{
    snprintf(T, sizeof(T), "/tmp/mcpgw-cgroup-XXXXXX");
    cr_assert_not_null(mkdtemp(T));
    dir("mnt");
    dir("mnt/svc");
    put("mnt/svc/cgroup.controllers", controllers);
    put("mnt/cgroup.controllers", controllers);
    put("mnt/svc/cgroup.procs", "");
    put("mnt/svc/cgroup.subtree_control", "");
    char text[2 * PATH_MAX];
    snprintf(text, sizeof(text),
             "32 31 0:29 / %s/v1 rw,relatime - cgroup cgroup rw,memory\n"
             "41 23 0:38 / %s/mnt rw,relatime shared:9 - cgroup2 cgroup2 rw\n",
             T, T);
    put("mountinfo", text);
    put("cgroup", own);
    if (delegated && geteuid() == 0) {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/mnt/svc", T);
        cr_assert_eq(setxattr(p, "trusted.delegate", "1", 1, 0), 0, "setxattr: %s",
                     strerror(errno));
    }
}

static void
untree(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", T);
    cr_expect_eq(system(cmd), 0);
    cgroup_reset();
}

static int
setup(bool apply)
{
    char c[PATH_MAX + 16], m[PATH_MAX + 16];
    snprintf(c, sizeof(c), "%s/cgroup", T);
    snprintf(m, sizeof(m), "%s/mountinfo", T);
    const struct cgroup_source src = { c, m, true };
    return cgroup_setup(&src, apply);
}

Test(cgroup, delegated_the_gateway_moves_into_its_leaf_and_enables_the_controllers)
{
    tree("12:memory:/x\n0::/svc\n", "cpuset cpu io memory pids\n", true);
    cr_assert_eq(setup(true), 1, "%s", cgroup_why());
    cr_expect(cgroup_in_force());
    cr_expect_null(cgroup_why());
    char want[PATH_MAX + 16];
    snprintf(want, sizeof(want), "%s/mnt/svc", T);
    cr_expect_str_eq(cgroup_dir(), want);
    char *procs = get("mnt/svc/gateway/cgroup.procs"), *sub = get("mnt/svc/cgroup.subtree_control");
    cr_expect_str_eq(procs, "0", "the gateway moves itself into DIR/gateway");
    cr_expect_str_eq(sub, "+memory +pids");
    free(procs);
    free(sub);
    untree();
}

Test(cgroup, check_only_writes_nothing)
{
    tree("0::/svc\n", "memory pids\n", true);
    cr_assert_eq(setup(false), 1, "%s", cgroup_why());
    cr_expect(!exists("mnt/svc/gateway"));
    char *sub = get("mnt/svc/cgroup.subtree_control");
    cr_expect_str_eq(sub, "");
    free(sub);
    untree();
}

/*
 * --check-config in ExecStartPre= or ExecReload= of a delegated unit runs in its subgroup
 * .control: it speaks of the unit's cgroup. The gateway itself never takes a parent's.
 */
Test(cgroup, check_from_systemds_control_subgroup_speaks_of_the_units_cgroup)
{
    tree("0::/svc/.control\n", "memory pids\n", true);
    dir("mnt/svc/.control");
    cr_assert_eq(setup(false), 1, "%s", cgroup_why());
    char want[PATH_MAX + 16];
    snprintf(want, sizeof(want), "%s/mnt/svc", T);
    cr_expect_str_eq(cgroup_dir(), want);
    cgroup_reset();
    put("mnt/svc/.control/cgroup.controllers", "memory pids\n");
    cr_expect_eq(setup(true), 0);
    cr_expect(strstr(cgroup_why(), "/svc/.control is not delegated") != NULL, "%s", cgroup_why());
    untree();
}

Test(cgroup, a_child_cgroup_its_limits_its_oom_count_and_its_removal)
{
    tree("0::/svc\n", "memory pids\n", true);
    cr_assert_eq(setup(true), 1, "%s", cgroup_why());
    struct cgroup_child *c = cgroup_child_new(268435456, 16);
    cr_assert_not_null(c, "%s", strerror(errno));
    cr_expect(cgroup_child_procs_fd(c) >= 0);
    char *mem = get("mnt/svc/box-1/memory.max"), *swap = get("mnt/svc/box-1/memory.swap.max"),
         *grp = get("mnt/svc/box-1/memory.oom.group"), *pids = get("mnt/svc/box-1/pids.max");
    cr_expect_str_eq(mem, "268435456");
    cr_expect_str_eq(swap, "0");
    cr_expect_str_eq(grp, "1", "an OOM kill ends the whole child");
    cr_expect_str_eq(pids, "16");
    free(mem);
    free(swap);
    free(grp);
    free(pids);
    cgroup_child_spawned(c);
    cr_expect_eq(cgroup_child_procs_fd(c), -1);
    put("mnt/svc/box-1/memory.events",
        "low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 1\n");
    cr_expect_eq(cgroup_child_end(c), 2);
    cr_expect(!exists("mnt/svc/box-1"), "removed once the child is reaped");
    /* No limit set: "max"; the next child's name is new. */
    c = cgroup_child_new(0, 0);
    cr_assert_not_null(c);
    mem = get("mnt/svc/box-2/memory.max");
    pids = get("mnt/svc/box-2/pids.max");
    cr_expect_str_eq(mem, "max");
    cr_expect_str_eq(pids, "max");
    cr_expect(!exists("mnt/svc/box-2/memory.swap.max"));
    free(mem);
    free(pids);
    cr_expect_eq(cgroup_child_end(c), 0);
    untree();
}

/* A leftover of an earlier run under the same name is stepped over, never reused. */
Test(cgroup, a_leftover_directory_is_not_reused)
{
    tree("0::/svc\n", "memory pids\n", true);
    cr_assert_eq(setup(true), 1, "%s", cgroup_why());
    dir("mnt/svc/box-1");
    struct cgroup_child *c = cgroup_child_new(1048576, 8);
    cr_assert_not_null(c);
    cr_expect(strstr(cgroup_child_path(c), "/box-2") != NULL, "%s", cgroup_child_path(c));
    cgroup_child_end(c);
    untree();
}

struct join_arg {
    const char *volatile step;
};

SANDBOX_CHILD static int
join_child(void *arg)
{
    struct join_arg *a = arg;
    _exit(sandbox_join_cgroup(&a->step) == 0 ? 0 : 1);
}

/* The boxed child writes "0" (itself) into its own cgroup's cgroup.procs before anything else. */
Test(cgroup, the_boxed_child_joins_its_cgroup_itself)
{
    tree("0::/svc\n", "memory pids\n", true);
    cr_assert_eq(setup(true), 1, "%s", cgroup_why());
    char err[256];
    cr_assert_eq(sandbox_module_init(err, sizeof(err)), 0, "%s", err);
    struct sandbox_spec spec = { .max_processes = 32, .max_memory_cgroup_bytes = 67108864 };
    const char *errstr = NULL;
    struct sandbox *b = sandbox_new(&spec, &errstr);
    cr_assert_not_null(b);
    char line[2048];
    sandbox_summary(b, line, sizeof(line));
    cr_expect(strstr(line, "cgroup: per child under ") != NULL, "%s", line);
    cr_expect(strstr(line, "memory.max 67108864 B, pids.max 32") != NULL, "%s", line);
    struct cgroup_child *cg = NULL;
    struct join_arg a = { NULL };
    pid_t pid = sandbox_spawn(b, NULL, join_child, &a, &cg);
    cr_assert(pid > 0, "%s", strerror(errno));
    int status = -1;
    cr_assert_eq(waitpid(pid, &status, __WALL), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d step %s", status,
              a.step ? a.step : "-");
    cr_assert_not_null(cg);
    cr_expect_eq(cgroup_child_procs_fd(cg), -1, "closed once the child has gone on");
    char *procs = get("mnt/svc/box-1/cgroup.procs"), *pids = get("mnt/svc/box-1/pids.max");
    cr_expect_str_eq(procs, "0");
    cr_expect_str_eq(pids, "32", "pids.max is child_max_processes");
    free(procs);
    free(pids);
    cgroup_child_end(cg);
    sandbox_free(b);
    sandbox_module_free();
    untree();
}

/* Each refusal: nothing written, the reason said, and a summary that claims nothing. */
static void
refused(const char *own, const char *controllers, bool delegated, const char *why)
{
    tree(own, controllers, delegated);
    cr_expect_eq(setup(true), 0, "%s", own);
    cr_expect(!cgroup_in_force());
    cr_expect_null(cgroup_dir());
    cr_expect(strstr(cgroup_why(), why) != NULL, "why: %s (expected %s)", cgroup_why(), why);
    cr_expect(!exists("mnt/svc/gateway"));
    char *sub = get("mnt/svc/cgroup.subtree_control");
    cr_expect_str_eq(sub, "");
    free(sub);
    errno = 0;
    cr_expect_null(cgroup_child_new(1, 1));
    struct sandbox_spec spec = { .max_processes = 32 };
    const char *errstr = NULL;
    struct sandbox *b = sandbox_new(&spec, &errstr);
    char line[2048];
    sandbox_summary(b, line, sizeof(line));
    cr_expect(strstr(line, "cgroup: none (") != NULL, "%s", line);
    cr_expect(strstr(line, why) != NULL, "%s", line);
    /* child_max_memory_cgroup_bytes without a cgroup: refused, saying why. */
    sandbox_free(b);
    spec.max_memory_cgroup_bytes = 1048576;
    b = sandbox_new(&spec, &errstr);
    char err[2048];
    cr_expect_eq(sandbox_probe(b, err, sizeof(err)), -1);
    cr_expect(strstr(err, "child_max_memory_cgroup_bytes needs a delegated cgroup v2") != NULL,
              "%s", err);
    sandbox_free(b);
    untree();
}

Test(cgroup, refused_without_a_unified_line)
{
    refused("4:memory:/x\n1:name=systemd:/x\n", "memory pids\n", true, "not cgroup v2 (");
}

Test(cgroup, refused_without_a_cgroup2_mount_showing_it)
{
    /* The cgroup2 mount's root is /svc: a cgroup beside it is not shown there. */
    tree("0::/other\n", "memory pids\n", true);
    char text[2 * PATH_MAX];
    snprintf(text, sizeof(text), "41 23 0:38 /svc %s/mnt rw - cgroup2 cgroup2 rw\n", T);
    put("mountinfo", text);
    cr_expect_eq(setup(true), 0);
    cr_expect(strstr(cgroup_why(), "no cgroup2 mount shows the gateway's cgroup /other") != NULL,
              "%s", cgroup_why());
    untree();
}

Test(cgroup, refused_when_the_controllers_are_cgroup_v1s)
{
    refused("0::/svc\n", "hugetlb\n", true, "controllers memory, pids not offered: ");
    refused("0::/svc\n", "memory hugetlb\n", true, "controller pids not offered: ");
}

Test(cgroup, refused_in_the_root_cgroup)
{
    tree("0::/\n", "memory pids\n", true);
    cr_expect_eq(setup(true), 0);
    cr_expect(strstr(cgroup_why(), "is the root cgroup, not one delegated to the gateway") != NULL,
              "%s", cgroup_why());
    cr_expect(!exists("mnt/gateway"));
    untree();
}

Test(cgroup, refused_when_not_delegated)
{
    if (geteuid() != 0)
        cr_skip_test("only root's own cgroup needs the delegate mark (an owner's is its own)");
    refused("0::/svc\n", "memory pids\n", false,
            "is not delegated to the gateway (Delegate=yes in its systemd unit marks it so)");
}

/* A mount whose root is below the hierarchy's (a cgroup namespace's view), its path escaped. */
Test(cgroup, a_mount_of_a_subtree_with_an_escaped_path)
{
    tree("0::/svc/inner\n", "memory pids\n", true);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/mnt two", T);
    cr_assert_eq(mkdir(p, 0755), 0);
    dir("mnt two/inner");
    put("mnt two/inner/cgroup.controllers", "memory pids\n");
    put("mnt two/inner/cgroup.procs", "");
    put("mnt two/inner/cgroup.subtree_control", "");
    if (geteuid() == 0) {
        snprintf(p, sizeof(p), "%s/mnt two/inner", T);
        cr_assert_eq(setxattr(p, "trusted.delegate", "1", 1, 0), 0);
    }
    char text[2 * PATH_MAX];
    snprintf(text, sizeof(text), "41 23 0:38 /svc %s/mnt\\040two rw - cgroup2 cgroup2 rw\n", T);
    put("mountinfo", text);
    cr_assert_eq(setup(false), 1, "%s", cgroup_why());
    snprintf(p, sizeof(p), "%s/mnt two/inner", T);
    cr_expect_str_eq(cgroup_dir(), p);
    untree();
}
