/* SPDX-License-Identifier: MIT */
/*
 * What refusing a few TCP ports with Landlock costs (src/README.md, section 6, "The box"): a
 * ruleset handling LANDLOCK_ACCESS_NET_CONNECT_TCP with an allow rule for every port but the
 * refused ones, built once, then enforced by each of N forked children (landlock_restrict_self
 * copies every rule of the ruleset into the child's new domain), beside the small allow-list
 * that sandbox_tcp_connect_ports makes. Prints the build time, each case's mean per child, and
 * the unreclaimable slab (/proc/meminfo SUnreclaim) held by 100 children that hold the domain.
 *   build/tests/bench/landlock_ports [N]      (default 200; needs Landlock ABI 4, Linux 6.7)
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LL_CREATE_RULESET_VERSION (1u << 0)
#define LL_RULE_NET_PORT          2
#define LL_NET_CONNECT_TCP        (1ull << 1)
#define LL_FS_READ_FILE           (1ull << 2) /* handled, no rule: a filesystem layer to stack */

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
};

struct ll_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
} __attribute__((packed));

static double
now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long
meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f != NULL)
        fclose(f);
    return v;
}

static int
ruleset(uint64_t fs, uint64_t net)
{
    struct ll_ruleset_attr attr = { .handled_access_fs = fs, .handled_access_net = net };
    return (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0u);
}

static int
allow(int rs, unsigned port)
{
    struct ll_net_port_attr np = { .allowed_access = LL_NET_CONNECT_TCP, .port = port };
    return (int)syscall(SYS_landlock_add_rule, rs, LL_RULE_NET_PORT, &np, 0u);
}

/* Every port 0..65535 but 8080 and 9090 (a gateway's listen port and one more). */
static int
all_but_two(void)
{
    int rs = ruleset(0, LL_NET_CONNECT_TCP);
    for (unsigned p = 0; rs >= 0 && p <= 65535; p++)
        if (p != 8080 && p != 9090 && allow(rs, p) == -1) {
            perror("landlock_add_rule");
            exit(1);
        }
    return rs;
}

/* Four ports, as sandbox_tcp_connect_ports would list. */
static int
four(void)
{
    int rs = ruleset(0, LL_NET_CONNECT_TCP);
    static const unsigned ports[] = { 80, 443, 5432, 6379 };
    for (size_t i = 0; rs >= 0 && i < 4; i++)
        allow(rs, ports[i]);
    return rs;
}

static volatile double *shared; /* the child's own time for its restrict_self calls */

/* Forks n children; each enforces the layers given (-1: none) and exits. Mean ms per child. */
static void
run(const char *what, int n, int first, int second)
{
    double total = 0, inner = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        pid_t pid = fork();
        if (pid == 0) {
            double c0 = now_ms();
            if ((first >= 0 && syscall(SYS_landlock_restrict_self, first, 0u) == -1)
                || (second >= 0 && syscall(SYS_landlock_restrict_self, second, 0u) == -1))
                _exit(1);
            shared[0] = now_ms() - c0;
            _exit(0);
        }
        int st;
        if (pid == -1 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "%s: a child failed\n", what);
            exit(1);
        }
        total += now_ms() - t0;
        inner += shared[0];
    }
    printf("%-44s fork to reap %.3f ms, restrict_self %.3f ms (mean of %d)\n", what, total / n,
           inner / n, n);
}

/* 100 children holding the domain (or none): the unreclaimable slab they add, read once each has
 * said it holds it (the domains of earlier children are freed later, by a work queue: it waits
 * 2 s first). */
static void
memory(const char *what, int rs)
{
    int hold[2], ready[2];
    pid_t kids[100];
    if (pipe(hold) == -1 || pipe(ready) == -1)
        exit(1);
    sleep(2);
    long before = meminfo_kb("SUnreclaim");
    for (int i = 0; i < 100; i++)
        if ((kids[i] = fork()) == 0) {
            char c = 'r';
            close(hold[1]);
            if (rs >= 0 && syscall(SYS_landlock_restrict_self, rs, 0u) == -1)
                _exit(1);
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            _exit(read(hold[0], &c, 1) == 0 ? 0 : 1); /* waits for the parent's close */
        }
    close(ready[1]);
    char buf[100];
    size_t got = 0;
    for (ssize_t r; got < sizeof(buf) && (r = read(ready[0], buf, sizeof(buf) - got)) > 0;)
        got += (size_t)r;
    long after = meminfo_kb("SUnreclaim");
    close(hold[1]);
    for (int i = 0; i < 100; i++)
        (void)waitpid(kids[i], NULL, 0);
    close(hold[0]);
    close(ready[0]);
    printf("%-44s %zu children: SUnreclaim %+ld kB (%.1f kB each)\n", what, got, after - before,
           (double)(after - before) / 100);
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    printf("Landlock ABI %ld\n", abi);
    if (abi < 4 || n < 1) {
        fprintf(stderr, "needs Landlock ABI 4 (TCP rules) and N > 0\n");
        return 1;
    }
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
        return 1;
    double t0 = now_ms();
    int big = all_but_two();
    printf("%-44s %.1f ms, once\n", "build: 65534 allow rules (all but 2 ports)", now_ms() - t0);
    int small = four(), fs = ruleset(LL_FS_READ_FILE, 0);
    if (big < 0 || small < 0 || fs < 0) {
        perror("landlock_create_ruleset");
        return 1;
    }
    /* First: the domains of the timed children below are freed later, by a work queue. */
    memory("no domain", -1);
    memory("all but 2 ports", big);
    memory("4 ports allowed", small);
    run("fork only", n, -1, -1);
    run("all but 2 ports", n, big, -1);
    run("a filesystem layer, then all but 2 ports", n, fs, big);
    run("all but 2 ports, then a filesystem layer", n, big, fs);
    run("4 ports allowed (sandbox_tcp_connect_ports)", n, small, -1);
    return 0;
}
