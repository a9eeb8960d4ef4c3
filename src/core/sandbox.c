/* SPDX-License-Identifier: MIT */
/*
 * The box around a child (src/README.md, section 6, "The box"). Native: clone with namespace
 * flags, then, in the child and before exec, the uid/gid maps, a filesystem view on a fresh
 * tmpfs root (pivot_root), the limits, no_new_privs, Landlock where the kernel offers it
 * (landlock.c) and a seccomp filter that libseccomp built once in the parent
 * (sandbox_filter.c). The child runs in the parent's memory (CLONE_VM | CLONE_VFORK, like vfork):
 * from sandbox_spawn to exec it makes system calls only, with what sandbox_new prepared.
 *
 * A gateway running as root gives each boxed child a uid of its own from a reserved range
 * (SANDBOX_UID_BASE..+SANDBOX_UID_COUNT, the way systemd's DynamicUser= does): the namespaces
 * are made as root, the view is built, then the child drops to that uid, and only then makes
 * its user namespace. An ordinary gateway makes the user namespace first (clone) and maps its
 * own uid and gid inside.
 */
#include "sandbox.h"

#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "landlock.h"
#include "sandbox_notify.h"
#include "util.h"

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

#define SANDBOX_OLD       "/.old"     /* where the host's root is while the view is built */
#define SANDBOX_UID_BASE  2147352576u /* 0x7FFE0000: far above any distribution's ranges */
#define SANDBOX_UID_COUNT 65536u
#define SANDBOX_GID_BASE  (SANDBOX_UID_BASE + SANDBOX_UID_COUNT) /* owners' groups: apart */
#define SANDBOX_STACK     (256 * 1024)

struct sandbox {
    struct sandbox_spec spec; /* its path lists point into the arrays below */
    char **binds;             /* identity binds, parents before children */
    bool *bind_writable;
    size_t n_binds;
    char **hidden;
    size_t n_hidden;
    uint16_t *ports; /* spec.tcp_connect_ports */
    char *cwd;       /* spec.cwd's copy, or NULL */
};

/* The system's directories, read-only in every box (those that exist). */
static const char *const sandbox_system_dirs[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
};
/* The devices a tool server may open, bound from the host's /dev. */
static const char *const sandbox_devices[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
};

static const unsigned long sandbox_ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWIPC,
    CLONE_NEWUTS,  CLONE_NEWNET, CLONE_NEWCGROUP,
};

static struct sock_fprog sandbox_filter;
/* The same refusals by user notification, so they are counted (sandbox_notify.c); may be empty. */
static struct sock_fprog sandbox_filter_notify;
static int sandbox_landlock; /* the kernel's Landlock ABI, 0: none */
static bool sandbox_root;    /* the gateway runs as root: children get a uid of their own */
static uid_t sandbox_uid;    /* an ordinary gateway's ids, mapped inside */
static gid_t sandbox_gid;
static uint32_t sandbox_next;     /* the next reserved uid's offset */
static uint32_t sandbox_next_gid; /* the next reserved group's offset */
/* The stack of the one child between clone and exec (the parent waits: one at a time). */
static char sandbox_stack[SANDBOX_STACK] __attribute__((aligned(64)));

/* ---- made in the parent ---------------------------------------------------------------- */

static bool
sandbox_path_ok(const char *p)
{
    if (p[0] != '/' || strlen(p) >= PATH_MAX - sizeof(SANDBOX_OLD))
        return false;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return false;
    return true;
}

static bool
sandbox_is_or_under(const char *p, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool
sandbox_path_bindable(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    char q[PATH_MAX];
    if (n >= sizeof(q))
        return false;
    memcpy(q, p, n);
    q[n] = '\0';
    return strcmp(q, "/") != 0 && strcmp(q, "/tmp") != 0 && !sandbox_is_or_under(q, "/proc")
           && !sandbox_is_or_under(q, "/dev");
}

static int
sandbox_cmp_len(const void *a, const void *b)
{
    size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
    return la < lb ? -1 : la > lb;
}

struct sandbox *
sandbox_new(const struct sandbox_spec *spec, const char **errstr)
{
    struct sandbox *b = xcalloc(1, sizeof(*b));
    b->spec = *spec;
    size_t nr = 0, nw = 0, nh = 0;
    for (char *const *p = spec->read_only; p != NULL && *p != NULL; p++)
        nr++;
    for (char *const *p = spec->writable; p != NULL && *p != NULL; p++)
        nw++;
    for (char *const *p = spec->hidden; p != NULL && *p != NULL; p++)
        nh++;
    /* Read-only and writable binds in one list, ordered parents first (shorter first). */
    char **all = xcalloc(nr + nw + 1, sizeof(char *));
    for (size_t i = 0; i < nr; i++)
        all[i] = spec->read_only[i];
    for (size_t i = 0; i < nw; i++)
        all[nr + i] = spec->writable[i];
    b->binds = xcalloc(nr + nw + 1, sizeof(char *));
    b->bind_writable = xcalloc(nr + nw + 1, sizeof(bool));
    b->hidden = xcalloc(nh + 1, sizeof(char *));
    *errstr = NULL;
    for (size_t i = 0; i < nr + nw; i++)
        if (!sandbox_path_ok(all[i]) || !sandbox_path_bindable(all[i]))
            *errstr = "a sandbox path must be absolute, without \"..\", under PATH_MAX, and "
                      "not /, /tmp, /proc or /dev";
    for (size_t i = 0; i < nh; i++)
        if (!sandbox_path_ok(spec->hidden[i]))
            *errstr = "a hidden path must be absolute, without \"..\"";
    if (*errstr != NULL) {
        free(all);
        sandbox_free(b);
        return NULL;
    }
    /* Stable: a path both read-only and writable stays writable (the later one wins). */
    for (size_t i = 0; i < nr + nw; i++) {
        b->binds[i] = xstrdup(all[i]);
        b->bind_writable[i] = i >= nr;
    }
    b->n_binds = nr + nw;
    for (size_t i = 1; i < b->n_binds; i++)
        for (size_t j = i; j > 0 && sandbox_cmp_len(&b->binds[j - 1], &b->binds[j]) > 0; j--) {
            char *t = b->binds[j];
            b->binds[j] = b->binds[j - 1];
            b->binds[j - 1] = t;
            bool w = b->bind_writable[j];
            b->bind_writable[j] = b->bind_writable[j - 1];
            b->bind_writable[j - 1] = w;
        }
    for (size_t i = 0; i < nh; i++)
        b->hidden[i] = xstrdup(spec->hidden[i]);
    b->n_hidden = nh;
    b->cwd = spec->cwd != NULL ? xstrdup(spec->cwd) : NULL;
    b->spec.read_only = b->spec.writable = NULL;
    b->spec.hidden = b->hidden;
    if (spec->n_tcp_connect_ports > 0) {
        b->ports = xcalloc(spec->n_tcp_connect_ports, sizeof(uint16_t));
        memcpy(b->ports, spec->tcp_connect_ports, spec->n_tcp_connect_ports * sizeof(uint16_t));
    }
    b->spec.tcp_connect_ports = b->ports;
    b->spec.cwd = b->cwd;
    free(all);
    return b;
}

void
sandbox_free(struct sandbox *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n_binds; i++)
        free(b->binds[i]);
    for (size_t i = 0; i < b->n_hidden; i++)
        free(b->hidden[i]);
    free(b->binds);
    free(b->bind_writable);
    free(b->hidden);
    free(b->ports);
    free(b->cwd);
    free(b);
}

bool
sandbox_same(const struct sandbox *a, const struct sandbox *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    const struct sandbox_spec *x = &a->spec, *y = &b->spec;
    if (x->network_none != y->network_none || x->max_memory_bytes != y->max_memory_bytes
        || x->max_processes != y->max_processes || x->max_open_files != y->max_open_files
        || x->max_cpu_s != y->max_cpu_s || x->max_file_bytes != y->max_file_bytes
        || x->max_memory_cgroup_bytes != y->max_memory_cgroup_bytes || a->n_binds != b->n_binds
        || a->n_hidden != b->n_hidden || x->n_tcp_connect_ports != y->n_tcp_connect_ports
        || (x->n_tcp_connect_ports > 0
            && memcmp(x->tcp_connect_ports, y->tcp_connect_ports,
                      x->n_tcp_connect_ports * sizeof(uint16_t))
                   != 0)
        || (a->cwd == NULL) != (b->cwd == NULL) || (a->cwd != NULL && strcmp(a->cwd, b->cwd) != 0))
        return false;
    for (size_t i = 0; i < a->n_binds; i++)
        if (strcmp(a->binds[i], b->binds[i]) != 0 || a->bind_writable[i] != b->bind_writable[i])
            return false;
    for (size_t i = 0; i < a->n_hidden; i++)
        if (strcmp(a->hidden[i], b->hidden[i]) != 0)
            return false;
    return true;
}

bool
sandbox_has_cwd(const struct sandbox *b)
{
    return b->cwd != NULL;
}

int
sandbox_module_init(char *err, size_t errlen)
{
    if (sandbox_filter.filter != NULL)
        return 0;
    sandbox_root = geteuid() == 0;
    sandbox_uid = geteuid();
    sandbox_gid = getegid();
    sandbox_landlock = landlock_abi();
    return sandbox_filter_build(&sandbox_filter, &sandbox_filter_notify, err, errlen);
}

void
sandbox_module_free(void)
{
    free(sandbox_filter.filter);
    free(sandbox_filter_notify.filter);
    sandbox_filter = sandbox_filter_notify = (struct sock_fprog){ 0 };
    sandbox_notify_module_free();
}

void
sandbox_summary(const struct sandbox *b, char *out, size_t size)
{
    const struct sandbox_spec *s = &b->spec;
    char ll[160];
    if (sandbox_landlock == 0)
        snprintf(ll, sizeof(ll), "none (the kernel offers none)");
    else
        snprintf(ll, sizeof(ll), "ABI %d (filesystem%s%s)", sandbox_landlock,
                 s->n_tcp_connect_ports > 0 ? ", TCP connect" : "",
                 sandbox_landlock >= 6 ? "; signals and abstract unix sockets scoped to the box"
                                       : "");
    /* What cgroup_setup found: in force, or none and why (never claimed when not applied). */
    char cg[PATH_MAX + 320];
    if (cgroup_in_force())
        snprintf(cg, sizeof(cg),
                 "per child under %s: memory.max %" PRIu64 " B, pids.max %" PRIu64 " (0: max)",
                 cgroup_dir(), s->max_memory_cgroup_bytes, s->max_processes);
    else
        snprintf(cg, sizeof(cg), "none (%s)", cgroup_why());
    /* TCP connect: only the ports listed (Landlock), or, on the host's network, every port. */
    char net[240];
    size_t used = (size_t)snprintf(net, sizeof(net), "%s",
                                   s->network_none ? ", net (loopback only)" : "; network: host");
    if (s->n_tcp_connect_ports > 0) {
        used += (size_t)snprintf(net + used, sizeof(net) - used, "; TCP connect: only to port%s",
                                 s->n_tcp_connect_ports > 1 ? "s" : "");
        for (size_t i = 0; i < s->n_tcp_connect_ports && used < sizeof(net); i++)
            used += (size_t)snprintf(net + used, sizeof(net) - used, "%s %u", i ? "," : "",
                                     (unsigned)s->tcp_connect_ports[i]);
        if (used < sizeof(net))
            snprintf(net + used, sizeof(net) - used, " (Landlock)");
    } else if (!s->network_none) {
        snprintf(net + used, sizeof(net) - used,
                 "; TCP connect: every port, the gateway's own "
                 "included (sandbox_tcp_connect_ports unset)");
    }
    snprintf(out, size,
             "namespaces user, mount, pid, ipc, uts%s; view: system read-only, private /tmp, "
             "%zu bound, %zu hidden; uid: %s; no_new_privs; seccomp: %zu calls refused (EPERM), "
             "%s; Landlock: %s; cgroup: %s; limits: memory %" PRIu64 " B, processes %" PRIu64
             ", open files %" PRIu64 ", cpu %" PRIu64 " s, file %" PRIu64 " B (0: none)",
             net, b->n_binds, b->n_hidden,
             sandbox_root ? "one of a reserved range per child" : "the gateway's",
             sandbox_filter_refused_count(), sandbox_notify_state(), ll, cg, s->max_memory_bytes,
             s->max_processes, s->max_open_files, s->max_cpu_s, s->max_file_bytes);
}

gid_t
sandbox_group_new(void)
{
    return sandbox_root ? SANDBOX_GID_BASE + sandbox_next_gid++ % SANDBOX_UID_COUNT : (gid_t)-1;
}

/* ---- in the child: system calls only ---------------------------------------------------- */

/*
 * The child's uid when the gateway is root, and what it has of its own (written by the parent
 * before the clone). The second is volatile: clone is declared a leaf (it calls nothing of this
 * file, as far as the compiler knows), so its store would be dropped as dead before the reset
 * that follows the clone, and the child would read NULL.
 */
static uid_t sandbox_child_uid;
static gid_t sandbox_child_group; /* own's group, or -1: setgroups reads it here, not on a stack */
static const struct sandbox_own *volatile sandbox_child_own;
/*
 * The child's cgroup's cgroup.procs, opened by the parent before the clone; -1: none. Volatile
 * for the reason above: it is reset after the clone.
 */
static volatile int sandbox_cgroup_fd = -1;

int
sandbox_join_cgroup(const char *volatile *step)
{
    int fd = sandbox_cgroup_fd;
    if (fd == -1)
        return 0;
    *step = "joining its cgroup";
    return write(fd, "0", 1) == 1 ? 0 : -1;
}

/* "ID ID 1\n" into buf. */
static const char *
sandbox_map_line(char *buf, unsigned long id)
{
    char digits[24];
    int n = 0;
    do
        digits[n++] = (char)('0' + id % 10);
    while ((id /= 10) != 0);
    char *p = buf;
    for (int k = 0; k < 2; k++) {
        for (int i = n - 1; i >= 0; i--)
            *p++ = digits[i];
        *p++ = ' ';
    }
    memcpy(p, "1\n", 3);
    return buf;
}

static int
sandbox_map_ids(uid_t uid, gid_t gid)
{
    char line[64];
    if (util_write_text("/proc/self/setgroups", 0, "deny") == -1)
        return -1;
    if (util_write_text("/proc/self/uid_map", 0, sandbox_map_line(line, uid)) == -1)
        return -1;
    return util_write_text("/proc/self/gid_map", 0, sandbox_map_line(line, gid));
}

/* dst = SANDBOX_OLD + path; false when it does not fit. */
static bool
sandbox_old(char dst[PATH_MAX], const char *path)
{
    size_t n = strlen(path);
    if (n + sizeof(SANDBOX_OLD) > PATH_MAX)
        return false;
    memcpy(dst, SANDBOX_OLD, sizeof(SANDBOX_OLD) - 1);
    memcpy(dst + sizeof(SANDBOX_OLD) - 1, path, n + 1);
    return true;
}

/* mkdir -p in the view (every directory made here is on the view's own tmpfs). */
static int
sandbox_mkdirs(const char *path)
{
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0755) == -1 && errno != EEXIST)
                return -1;
            p[i] = c;
        }
    return 0;
}

/* The host's path bound at the same path in the view: a directory, a file, or a symlink copied. */
static int
sandbox_bind(const char *path, bool must_exist)
{
    char src[PATH_MAX];
    struct stat st;
    if (!sandbox_old(src, path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (lstat(src, &st) == -1)
        return must_exist ? -1 : 0;
    if (S_ISLNK(st.st_mode) && !must_exist) {
        char target[PATH_MAX];
        ssize_t n = readlink(src, target, sizeof(target) - 1);
        if (n < 0)
            return -1;
        target[n] = '\0';
        return symlink(target, path) == -1 && errno != EEXIST ? -1 : 0;
    }
    if (stat(src, &st) == -1)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        if (sandbox_mkdirs(path) == -1)
            return -1;
    } else {
        struct stat here;
        if (stat(path, &here) == -1) {
            char parent[PATH_MAX];
            memcpy(parent, path, strlen(path) + 1);
            char *slash = strrchr(parent, '/');
            if (slash != NULL && slash != parent) {
                *slash = '\0';
                if (sandbox_mkdirs(parent) == -1)
                    return -1;
            }
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
            if (fd == -1)
                return -1;
            close(fd);
        }
    }
    return mount(src, path, NULL, MS_BIND | MS_REC, NULL);
}

/*
 * A hidden path, covered where the view shows it: an empty directory or an empty file. A cover
 * above the child's own directory (sandbox_own) lets it pass to that one alone, bound next: it
 * is made read-only with the rest of the view.
 */
static int
sandbox_hide(const char *path, const char *own)
{
    struct stat st;
    if (stat(path, &st) == -1)
        return 0;
    if (S_ISDIR(st.st_mode) && own != NULL && sandbox_is_or_under(own, path))
        return mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=16k,nr_inodes=64,mode=0711");
    if (S_ISDIR(st.st_mode))
        return mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=4k,nr_inodes=1,mode=000");
    return mount("/.empty", path, NULL, MS_BIND, NULL);
}

static int
sandbox_setattr(const char *path, unsigned flags, uint64_t set, uint64_t clr)
{
    struct mount_attr attr = { .attr_set = set, .attr_clr = clr };
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &attr, sizeof(attr));
}

static int
sandbox_view(const struct sandbox *b, const char *volatile *step)
{
    *step = "making the mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
        return -1;
    *step = "mounting the view's root (tmpfs)";
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") == -1)
        return -1;
    if (mkdir("/tmp" SANDBOX_OLD, 0700) == -1)
        return -1;
    *step = "pivot_root";
    if (syscall(SYS_pivot_root, "/tmp", "/tmp" SANDBOX_OLD) == -1 || chdir("/") == -1)
        return -1;
    *step = "binding the system directories";
    for (size_t i = 0; i < ARRAY_LEN(sandbox_system_dirs); i++)
        if (sandbox_bind(sandbox_system_dirs[i], false) == -1)
            return -1;
    *step = "making /dev";
    if (mkdir("/dev", 0755) == -1
        || mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") == -1)
        return -1;
    for (size_t i = 0; i < ARRAY_LEN(sandbox_devices); i++)
        if (sandbox_bind(sandbox_devices[i], false) == -1)
            return -1;
    if (symlink("/proc/self/fd", "/dev/fd") == -1 || symlink("/proc/self/fd/0", "/dev/stdin") == -1
        || symlink("/proc/self/fd/1", "/dev/stdout") == -1
        || symlink("/proc/self/fd/2", "/dev/stderr") == -1 || mkdir("/dev/shm", 01777) == -1
        || mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") == -1)
        return -1;
    *step = "mounting /proc (its PID namespace's)";
    if (mkdir("/proc", 0555) == -1
        || mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == -1)
        return -1;
    *step = "mounting a private /tmp";
    if (mkdir("/tmp", 01777) == -1
        || mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") == -1)
        return -1;
    *step = "binding sandbox_read_only_paths, sandbox_writable_paths, cwd and the command's "
            "directory";
    for (size_t i = 0; i < b->n_binds; i++)
        if (sandbox_bind(b->binds[i], true) == -1)
            return -1;
    *step = "hiding the gateway's files";
    int fd = open("/.empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
    if (fd == -1)
        return -1;
    close(fd);
    const char *own = sandbox_child_own != NULL ? sandbox_child_own->dir : NULL;
    for (size_t i = 0; i < b->n_hidden; i++)
        if (sandbox_hide(b->hidden[i], own) == -1)
            return -1;
    *step = "binding its owner's directory (the exchanged token's)";
    if (own != NULL && sandbox_bind(own, true) == -1)
        return -1;
    *step = "leaving the host's root";
    if (umount2(SANDBOX_OLD, MNT_DETACH) == -1 || rmdir(SANDBOX_OLD) == -1)
        return -1;
    *step = "making the view read-only";
    if (sandbox_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0) == -1)
        return -1;
    static const char *const rw[] = { "/tmp", "/dev/shm", "/proc" };
    for (size_t i = 0; i < ARRAY_LEN(rw); i++)
        if (sandbox_setattr(rw[i], 0, 0, MOUNT_ATTR_RDONLY) == -1)
            return -1;
    *step = "making sandbox_writable_paths writable";
    for (size_t i = 0; i < b->n_binds; i++)
        if (b->bind_writable[i] && sandbox_setattr(b->binds[i], 0, 0, MOUNT_ATTR_RDONLY) == -1)
            return -1;
    return 0;
}

static int
sandbox_loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s == -1)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    ifr.ifr_flags = IFF_UP | IFF_RUNNING;
    int rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    int e = errno;
    close(s);
    errno = e;
    return rc;
}

static int
sandbox_limit(__rlimit_resource_t resource, uint64_t value)
{
    if (value == 0)
        return 0;
    /* Never above the gateway's own hard limit, which an unprivileged child cannot raise. */
    struct rlimit rl;
    if (getrlimit(resource, &rl) == -1)
        return -1;
    if (rl.rlim_max == RLIM_INFINITY || (rlim_t)value < rl.rlim_max)
        rl.rlim_max = (rlim_t)value;
    rl.rlim_cur = rl.rlim_max;
    return setrlimit(resource, &rl);
}

int
sandbox_enter(const struct sandbox *b, const char *volatile *step)
{
    if (!sandbox_root) {
        *step = "writing the user namespace's uid and gid maps";
        if (sandbox_map_ids(sandbox_uid, sandbox_gid) == -1)
            return -1;
    }
    if (sandbox_view(b, step) == -1)
        return -1;
    /* The view has it at the same path (bound, or the box's own /, /tmp, /proc or /dev). */
    *step = "changing to the working directory";
    if (b->cwd != NULL && chdir(b->cwd) == -1)
        return -1;
    *step = "bringing up the loopback of its network namespace";
    if (b->spec.network_none && sandbox_loopback_up() == -1)
        return -1;
    *step = "setting the hostname";
    if (sethostname("mcp-sandbox", 11) == -1)
        return -1;
    if (sandbox_root) {
        uid_t id = sandbox_child_uid;
        /*
         * Raw system calls: the C library's wrappers would apply the change to every thread of
         * the process it believes it is (the gateway's, whose memory the child shares) and wait
         * for threads that are not the child's.
         */
        *step = "dropping to the child's own uid";
        size_t groups = sandbox_child_group != (gid_t)-1; /* its owner's group, or none */
        if (syscall(SYS_setgroups, groups, &sandbox_child_group) == -1
            || syscall(SYS_setresgid, id, id, id) == -1 || syscall(SYS_setresuid, id, id, id) == -1)
            return -1;
        /* A uid change makes it not dumpable, and /proc/self root's: its maps are its own. */
        *step = "making the user namespace";
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == -1 || unshare(CLONE_NEWUSER) == -1
            || sandbox_map_ids(id, id) == -1)
            return -1;
    }
    /* After the user namespace: a process limit is counted in the child's own namespace. */
    *step = "setting the limits";
    if (sandbox_limit(RLIMIT_AS, b->spec.max_memory_bytes) == -1
        || sandbox_limit(RLIMIT_NPROC, b->spec.max_processes) == -1
        || sandbox_limit(RLIMIT_NOFILE, b->spec.max_open_files) == -1
        || sandbox_limit(RLIMIT_CPU, b->spec.max_cpu_s) == -1
        || sandbox_limit(RLIMIT_FSIZE, b->spec.max_file_bytes) == -1)
        return -1;
    *step = "no_new_privs";
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/*
 * Landlock on the finished view: read and execute beneath the system and the read-only binds,
 * everything beneath the writable ones, read and write but not execute in /tmp and /dev/shm, the
 * devices, /proc read-only; nothing else (the view's root, the covers over the gateway's files).
 */
static int
sandbox_landlock_apply(const struct sandbox *b, const char *volatile *step)
{
    int abi = sandbox_landlock;
    *step = "Landlock: making the ruleset";
    int rs = landlock_ruleset(abi, b->spec.n_tcp_connect_ports > 0);
    if (rs == -1)
        return -1;
    *step = "Landlock: allowing sandbox_tcp_connect_ports";
    int rc = 0;
    for (size_t i = 0; i < b->spec.n_tcp_connect_ports && rc == 0; i++)
        rc = landlock_allow_connect(rs, b->spec.tcp_connect_ports[i]);
    if (rc == 0)
        *step = "Landlock: allowing the view's paths";
    /* Listing any directory of the view: it holds only what the view shows (a hidden directory is
     * an empty, mode 000 tmpfs), and a server that lists its root must not fail. */
    if (rc == 0)
        rc = landlock_allow(rs, abi, "/", LANDLOCK_ALLOW_LIST, true);
    for (size_t i = 0; i < ARRAY_LEN(sandbox_system_dirs) && rc == 0; i++)
        rc = landlock_allow(rs, abi, sandbox_system_dirs[i], LANDLOCK_ALLOW_READ_EXEC, false);
    for (size_t i = 0; i < b->n_binds && rc == 0; i++)
        rc = landlock_allow(rs, abi, b->binds[i],
                            b->bind_writable[i] ? LANDLOCK_ALLOW_ALL : LANDLOCK_ALLOW_READ_EXEC,
                            true);
    if (rc == 0)
        rc = landlock_allow(rs, abi, "/dev", LANDLOCK_ALLOW_DEVICES, true);
    if (rc == 0)
        rc = landlock_allow(rs, abi, "/dev/shm", LANDLOCK_ALLOW_WRITE_NOEXEC, true);
    if (rc == 0)
        rc = landlock_allow(rs, abi, "/tmp", LANDLOCK_ALLOW_WRITE_NOEXEC, true);
    if (rc == 0)
        rc = landlock_allow(rs, abi, "/proc", LANDLOCK_ALLOW_READ, true);
    if (rc == 0 && sandbox_child_own != NULL && sandbox_child_own->dir != NULL)
        rc = landlock_allow(rs, abi, sandbox_child_own->dir, LANDLOCK_ALLOW_READ, true);
    if (rc == -1) {
        int e = errno;
        close(rs);
        errno = e;
        return -1;
    }
    *step = "Landlock: restricting itself";
    return landlock_restrict(rs);
}

int
sandbox_seal(const struct sandbox *b, const char *volatile *step)
{
    if ((sandbox_landlock > 0 || b->spec.n_tcp_connect_ports > 0)
        && sandbox_landlock_apply(b, step) == -1)
        return -1;
    *step = "loading the seccomp filter";
    return sandbox_notify_seal(&sandbox_filter_notify, &sandbox_filter);
}

static unsigned long
sandbox_flags(const struct sandbox *b)
{
    unsigned long f = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
    if (!sandbox_root)
        f |= CLONE_NEWUSER;
    if (b->spec.network_none)
        f |= CLONE_NEWNET;
    return f;
}

pid_t
sandbox_spawn(const struct sandbox *b, const struct sandbox_own *own, int (*fn)(void *), void *arg,
              struct cgroup_child **cg)
{
    if (own != NULL && own->dir != NULL
        && (!sandbox_path_ok(own->dir) || !sandbox_path_bindable(own->dir))) {
        errno = EINVAL;
        return -1;
    }
    if (sandbox_notify_prepare(sandbox_filter_notify.filter != NULL) == -1)
        return -1;
    if (cg != NULL && cgroup_in_force()) {
        *cg = cgroup_child_new(b->spec.max_memory_cgroup_bytes, b->spec.max_processes);
        if (*cg == NULL) {
            int e = errno;
            (void)sandbox_notify_collect(-1); /* closes the socket pair */
            errno = e;
            return -1;
        }
        sandbox_cgroup_fd = cgroup_child_procs_fd(*cg);
    }
    sandbox_child_own = own != NULL && (own->dir != NULL || own->gid != (gid_t)-1) ? own : NULL;
    sandbox_child_group = own != NULL ? own->gid : (gid_t)-1;
    sandbox_child_uid = SANDBOX_UID_BASE + sandbox_next++ % SANDBOX_UID_COUNT;
    pid_t pid = clone(fn, sandbox_stack + sizeof(sandbox_stack),
                      (int)(CLONE_VM | CLONE_VFORK | SIGCHLD | sandbox_flags(b)), arg);
    sandbox_child_own = NULL; /* the child has exec'd or exited: own was the caller's */
    if (cg != NULL) {
        sandbox_cgroup_fd = -1;
        cgroup_child_spawned(*cg);
    }
    return sandbox_notify_collect(pid);
}

/* ---- the probe ------------------------------------------------------------------------- */

struct sandbox_probe_arg {
    const struct sandbox *b;
    const char *volatile step;
    volatile int err;
};

SANDBOX_CHILD static int
sandbox_probe_child(void *arg)
{
    struct sandbox_probe_arg *a = arg;
    if (sandbox_notify_keep() == -1 || sandbox_enter(a->b, &a->step) == -1
        || sandbox_seal(a->b, &a->step) == -1)
        a->err = errno ? errno : EINVAL;
    _exit(0);
}

SANDBOX_CHILD static int
sandbox_probe_nothing(void *arg)
{
    (void)arg;
    _exit(0);
}

static const char *
sandbox_ns_name(unsigned long flag)
{
    return flag == CLONE_NEWUSER  ? "user"
           : flag == CLONE_NEWNS  ? "mount"
           : flag == CLONE_NEWPID ? "PID"
           : flag == CLONE_NEWIPC ? "IPC"
           : flag == CLONE_NEWUTS ? "UTS"
                                  : "network";
}

int
sandbox_probe(const struct sandbox *b, char *err, size_t errlen)
{
    if (b->spec.n_tcp_connect_ports > 0 && sandbox_landlock < 4) {
        snprintf(err, errlen,
                 "sandbox_tcp_connect_ports needs Landlock ABI 4 (Linux 6.7) to be enforced; "
                 "this kernel offers %s%.0d",
                 sandbox_landlock == 0 ? "no Landlock" : "ABI ", sandbox_landlock);
        return -1;
    }
    struct sandbox_probe_arg a = { .b = b, .step = NULL, .err = 0 };
    if (b->spec.max_memory_cgroup_bytes != 0 && !cgroup_in_force()) {
        snprintf(err, errlen,
                 "child_max_memory_cgroup_bytes needs a delegated cgroup v2 with the memory and "
                 "pids controllers, and there is none: %s",
                 cgroup_why());
        return -1;
    }
    pid_t pid = sandbox_spawn(b, NULL, sandbox_probe_child, &a, NULL);
    if (pid > 0) {
        (void)waitpid(pid, NULL, __WALL);
        (void)sandbox_watch_take(NULL, pid, NULL); /* its listener: closed, not watched */
        if (a.err == 0)
            return 0;
        snprintf(err, errlen, "the kernel refuses the box: %s: %s%s", a.step, strerror(a.err),
                 a.err == EPERM || a.err == EACCES
                     ? " (a container or an LSM may forbid it; /proc must be fully visible for a "
                       "new PID namespace's /proc)"
                     : "");
        return -1;
    }
    int e = errno;
    /* Which namespace: each flag alone. */
    unsigned long all = sandbox_flags(b);
    for (size_t i = 0; i < ARRAY_LEN(sandbox_ns_flags); i++) {
        unsigned long f = sandbox_ns_flags[i];
        if (!(all & f))
            continue;
        unsigned long one = f | (sandbox_root ? 0 : CLONE_NEWUSER);
        pid_t p = clone(sandbox_probe_nothing, sandbox_stack + sizeof(sandbox_stack),
                        (int)(CLONE_VM | CLONE_VFORK | SIGCHLD | one), NULL);
        if (p > 0) {
            (void)waitpid(p, NULL, __WALL);
            continue;
        }
        e = errno;
        snprintf(err, errlen, "the kernel refuses a new %s namespace: %s%s", sandbox_ns_name(f),
                 strerror(e),
                 f == CLONE_NEWUSER || !sandbox_root
                     ? " (unprivileged user namespaces are off: sysctl "
                       "kernel.unprivileged_userns_clone or user.max_user_namespaces, an "
                       "AppArmor or seccomp policy of the service or container, or the gateway's "
                       "own uid is not mapped in the user namespace it runs in)"
                 : e == ENOSPC ? " (the namespace count limit in /proc/sys/user is reached)"
                               : "");
        return -1;
    }
    snprintf(err, errlen, "the kernel refuses the box's namespaces: %s", strerror(e));
    return -1;
}
