/* SPDX-License-Identifier: MIT */
/*
 * A cgroup v2 per boxed child (src/README.md, section 6, "The box"; cgroup.h). Only what the
 * gateway was delegated is touched: its own cgroup (DIR), the leaf it moves itself into
 * (DIR/gateway, since a cgroup that enables controllers for its children may hold no process),
 * DIR's cgroup.subtree_control (+memory +pids), and one DIR/box-N per child. Every file is named
 * relative to DIR, so a test can stand a plain directory in for the cgroup2 filesystem.
 */
#include "cgroup.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CGROUP_PENDING_MAX 64 /* directories whose removal is retried, at most */
#define CGROUP_NAME_TRIES  16 /* box-N names tried past leftovers of an earlier run */

struct cgroup_child {
    char path[PATH_MAX];
    int procs_fd;
};

static bool cgroup_applied; /* cgroup_setup ran with apply: its answer is final */
static int cgroup_state;    /* 1: in force */
static bool cgroup_stand_in;
static char cgroup_path[PATH_MAX];
static char cgroup_reason[PATH_MAX + 256];
static uint64_t cgroup_next;
static char *cgroup_pending[CGROUP_PENDING_MAX];
static size_t cgroup_n_pending;

/* ---- files -------------------------------------------------------------------------------- */

/* dir + "/" + name into out; false when it does not fit. */
static bool
cgroup_join_path(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n > 0 && (size_t)n < size;
}

static int
cgroup_write(const char *dir, const char *name, const char *text)
{
    char p[PATH_MAX];
    if (!cgroup_join_path(p, sizeof(p), dir, name)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return util_write_text(p, cgroup_stand_in ? O_CREAT | O_TRUNC : 0, text);
}

/* The file's first size-1 bytes, NUL-terminated; -1 with errno. */
static int
cgroup_read(const char *path, char *out, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return -1;
    size_t used = 0;
    while (used + 1 < size) {
        ssize_t r = read(fd, out + used, size - 1 - used);
        if (r == -1 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == -1) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
            break;
        }
        used += (size_t)r;
    }
    close(fd);
    out[used] = '\0';
    return 0;
}

/* Whether the space-separated list holds word. */
static bool
cgroup_has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

/* mountinfo's octal escapes (\040 a space) undone, in place. */
static void
cgroup_unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r != '\0'; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0'
            && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else
            *w++ = *r;
    }
    *w = '\0';
}

/* The "0::" line's path; false when there is none. */
static bool
cgroup_own_path(const char *file, char *out, size_t size)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return false;
    char line[PATH_MAX + 16];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        found = line[3] == '/' && strlen(line + 3) < size;
        if (found)
            memcpy(out, line + 3, strlen(line + 3) + 1);
    }
    fclose(f);
    return found;
}

/*
 * The directory of cgroup path cg under a cgroup2 mount whose root holds it: the mount point
 * with cg's part below the mount's root appended. False when no cgroup2 mount shows it.
 */
static bool
cgroup_find_dir(const char *mountinfo, const char *cg, char *out, size_t size)
{
    FILE *f = fopen(mountinfo, "re");
    if (f == NULL)
        return false;
    char line[2 * PATH_MAX];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        *sep = '\0';
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... */
        char *save = NULL, *root = NULL, *point = NULL;
        char *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok != NULL && i < 5; i++, tok = strtok_r(NULL, " ", &save)) {
            if (i == 3)
                root = tok;
            else if (i == 4)
                point = tok;
        }
        if (root == NULL || point == NULL)
            continue;
        cgroup_unescape(root);
        cgroup_unescape(point);
        size_t rn = strcmp(root, "/") == 0 ? 0 : strlen(root);
        if (strncmp(cg, root, rn) != 0 || (cg[rn] != '\0' && cg[rn] != '/'))
            continue;
        const char *rest = cg + rn;
        if (strcmp(rest, "/") == 0)
            rest = "";
        int n = snprintf(out, size, "%s%s", point, rest);
        found = n > 0 && (size_t)n < size;
    }
    fclose(f);
    return found;
}

static bool
cgroup_marked_delegated(const char *dir)
{
    static const char *const names[] = { "trusted.delegate", "user.delegate" };
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        char v[8];
        ssize_t n = getxattr(dir, names[i], v, sizeof(v) - 1);
        if (n > 0 && v[0] == '1')
            return true;
    }
    return false;
}

/* Owned by the gateway's (not root) user: the kernel's own way to delegate a cgroup. */
static bool
cgroup_owned(const char *dir)
{
    uid_t me = geteuid();
    if (me == 0)
        return false;
    static const char *const names[] = { ".", "cgroup.procs", "cgroup.subtree_control" };
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        char p[PATH_MAX];
        struct stat st;
        if (!cgroup_join_path(p, sizeof(p), dir, names[i]) || stat(p, &st) == -1 || st.st_uid != me)
            return false;
    }
    return true;
}

static bool
cgroup_writable(const char *dir)
{
    static const char *const names[] = { ".", "cgroup.procs", "cgroup.subtree_control" };
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        char p[PATH_MAX];
        if (!cgroup_join_path(p, sizeof(p), dir, names[i]) || access(p, W_OK) == -1)
            return false;
    }
    return true;
}

/* ---- the gateway's cgroup --------------------------------------------------------------- */

static int cgroup_none(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
cgroup_none(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cgroup_reason, sizeof(cgroup_reason), fmt, ap);
    va_end(ap);
    cgroup_state = 0;
    cgroup_path[0] = '\0';
    return 0;
}

/* The checks, nothing written: 1 with cgroup_path set, or 0 with the reason. */
static int
cgroup_check(const struct cgroup_source *src, bool apply)
{
    char cg[PATH_MAX], dir[PATH_MAX], p[PATH_MAX], list[512];
    if (!cgroup_own_path(src->proc_cgroup, cg, sizeof(cg)))
        return cgroup_none("not cgroup v2 (%s has no unified \"0::\" line)", src->proc_cgroup);
    /*
     * systemd runs a delegated unit's control processes (ExecStartPre=, ExecReload=: where
     * --check-config runs) in the subgroup .control: the check speaks of the unit's cgroup, the
     * one its main process, the gateway, will find.
     */
    size_t n = strlen(cg);
    if (!apply && n > 9 && strcmp(cg + n - 9, "/.control") == 0)
        cg[n - 9] = '\0';
    if (!cgroup_find_dir(src->mountinfo, cg, dir, sizeof(dir)))
        return cgroup_none("not cgroup v2 (no cgroup2 mount shows the gateway's cgroup %s)", cg);
    struct statfs sf;
    if (!src->stand_in && (statfs(dir, &sf) == -1 || sf.f_type != CGROUP2_SUPER_MAGIC))
        return cgroup_none("not cgroup v2 (%s is not a cgroup2 filesystem)", dir);
    if (!cgroup_join_path(p, sizeof(p), dir, "cgroup.controllers")
        || cgroup_read(p, list, sizeof(list)) == -1)
        return cgroup_none("not cgroup v2 (%s/cgroup.controllers: %s)", dir, strerror(errno));
    list[strcspn(list, "\n")] = '\0';
    bool mem = cgroup_has_word(list, "memory"), pids = cgroup_has_word(list, "pids");
    if (!mem || !pids)
        return cgroup_none("controller%s %s not offered: %s/cgroup.controllers lists \"%s\" (in "
                           "a hybrid layout they are cgroup v1's; else not delegated)",
                           mem || pids ? "" : "s",
                           !mem && !pids ? "memory, pids"
                           : !mem        ? "memory"
                                         : "pids",
                           dir, list);
    if (strcmp(cg, "/") == 0)
        return cgroup_none("%s is the root cgroup, not one delegated to the gateway", dir);
    if (!cgroup_marked_delegated(dir) && !cgroup_owned(dir))
        return cgroup_none("%s is not delegated to the gateway (Delegate=yes in its systemd unit "
                           "marks it so)",
                           dir);
    if (!cgroup_writable(dir))
        return cgroup_none("%s is not writable by the gateway", dir);
    memcpy(cgroup_path, dir, strlen(dir) + 1);
    cgroup_reason[0] = '\0';
    cgroup_state = 1;
    return 1;
}

int
cgroup_setup(const struct cgroup_source *src, bool apply)
{
    if (cgroup_applied)
        return cgroup_state;
    cgroup_stand_in = src->stand_in;
    if (cgroup_check(src, apply) == 0 || !apply) {
        cgroup_applied = apply;
        return cgroup_state;
    }
    cgroup_applied = true;
    char leaf[PATH_MAX];
    if (!cgroup_join_path(leaf, sizeof(leaf), cgroup_path, "gateway"))
        return cgroup_none("%s: path too long", cgroup_path);
    if (mkdir(leaf, 0755) == -1 && errno != EEXIST)
        return cgroup_none("cannot make %s: %s", leaf, strerror(errno));
    if (cgroup_write(leaf, "cgroup.procs", "0") == -1)
        return cgroup_none("cannot move the gateway into %s: %s", leaf, strerror(errno));
    if (cgroup_write(cgroup_path, "cgroup.subtree_control", "+memory +pids") == -1) {
        int e = errno;
        return cgroup_none("cannot enable +memory +pids in %s/cgroup.subtree_control: %s%s",
                           cgroup_path, strerror(e),
                           e == EBUSY ? " (another process is in that cgroup)" : "");
    }
    return 1;
}

bool
cgroup_in_force(void)
{
    return cgroup_state == 1;
}

const char *
cgroup_dir(void)
{
    return cgroup_state == 1 ? cgroup_path : NULL;
}

const char *
cgroup_why(void)
{
    return cgroup_state == 1 ? NULL : cgroup_reason[0] != '\0' ? cgroup_reason : "not set up";
}

/* ---- a child's cgroup --------------------------------------------------------------------- */

/* rmdir, and for a stand-in the files a real cgroupfs would have removed with it. */
static int
cgroup_rmdir(const char *path)
{
    if (cgroup_stand_in) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                (void)unlinkat(dirfd(d), e->d_name, 0);
        if (d != NULL)
            closedir(d);
    }
    return rmdir(path);
}

/* Retries the removals the kernel refused earlier (a process still dying). */
static void
cgroup_retry_pending(void)
{
    size_t kept = 0;
    for (size_t i = 0; i < cgroup_n_pending; i++) {
        if (cgroup_rmdir(cgroup_pending[i]) == 0 || errno == ENOENT)
            free(cgroup_pending[i]);
        else
            cgroup_pending[kept++] = cgroup_pending[i];
    }
    cgroup_n_pending = kept;
}

static void
cgroup_limit_text(char *out, size_t size, uint64_t v)
{
    if (v == 0)
        snprintf(out, size, "max");
    else
        snprintf(out, size, "%" PRIu64, v);
}

struct cgroup_child *
cgroup_child_new(uint64_t memory_max_bytes, uint64_t pids_max)
{
    if (cgroup_state != 1) {
        errno = ENOENT;
        return NULL;
    }
    cgroup_retry_pending();
    struct cgroup_child *c = xcalloc(1, sizeof(*c));
    c->procs_fd = -1;
    int e = EEXIST;
    for (int i = 0; i < CGROUP_NAME_TRIES && e == EEXIST; i++) {
        char name[32];
        snprintf(name, sizeof(name), "box-%" PRIu64, ++cgroup_next);
        if (!cgroup_join_path(c->path, sizeof(c->path), cgroup_path, name)) {
            e = ENAMETOOLONG;
            break;
        }
        e = mkdir(c->path, 0755) == 0 ? 0 : errno;
    }
    if (e != 0) {
        free(c);
        errno = e;
        return NULL;
    }
    char mem[24], pids[24], p[PATH_MAX];
    cgroup_limit_text(mem, sizeof(mem), memory_max_bytes);
    cgroup_limit_text(pids, sizeof(pids), pids_max);
    /* Swap is not a way past memory.max (the file is there only where swap is accounted). */
    if (cgroup_write(c->path, "memory.max", mem) == -1
        || (memory_max_bytes != 0 && cgroup_write(c->path, "memory.swap.max", "0") == -1
            && errno != ENOENT)
        || cgroup_write(c->path, "memory.oom.group", "1") == -1
        || cgroup_write(c->path, "pids.max", pids) == -1
        || !cgroup_join_path(p, sizeof(p), c->path, "cgroup.procs")
        || (c->procs_fd = open(p, O_WRONLY | O_CLOEXEC | (cgroup_stand_in ? O_CREAT : 0), 0644))
               == -1) {
        e = errno;
        (void)cgroup_rmdir(c->path);
        free(c);
        errno = e;
        return NULL;
    }
    return c;
}

int
cgroup_child_procs_fd(const struct cgroup_child *c)
{
    return c != NULL ? c->procs_fd : -1;
}

const char *
cgroup_child_path(const struct cgroup_child *c)
{
    return c->path;
}

void
cgroup_child_spawned(struct cgroup_child *c)
{
    if (c != NULL && c->procs_fd != -1) {
        close(c->procs_fd);
        c->procs_fd = -1;
    }
}

uint64_t
cgroup_child_end(struct cgroup_child *c)
{
    if (c == NULL)
        return 0;
    cgroup_child_spawned(c);
    uint64_t oom = 0;
    char p[PATH_MAX], text[1024];
    if (cgroup_join_path(p, sizeof(p), c->path, "memory.events")
        && cgroup_read(p, text, sizeof(text)) == 0) {
        const char *k = strstr(text, "oom_kill ");
        if (k != NULL && (k == text || k[-1] == '\n'))
            oom = strtoull(k + 9, NULL, 10);
    }
    /* Its PID namespace ended with it; anything left (cgroup.kill: Linux 5.14) goes now. */
    if (!cgroup_stand_in)
        (void)cgroup_write(c->path, "cgroup.kill", "1");
    if (cgroup_rmdir(c->path) == -1 && errno != ENOENT) {
        if (cgroup_n_pending < CGROUP_PENDING_MAX)
            cgroup_pending[cgroup_n_pending++] = xstrdup(c->path);
    }
    free(c);
    cgroup_retry_pending();
    return oom;
}

void
cgroup_reset(void)
{
    for (size_t i = 0; i < cgroup_n_pending; i++)
        free(cgroup_pending[i]);
    cgroup_n_pending = 0;
    cgroup_applied = false;
    cgroup_state = 0;
    cgroup_stand_in = false;
    cgroup_path[0] = cgroup_reason[0] = '\0';
    cgroup_next = 0;
}
