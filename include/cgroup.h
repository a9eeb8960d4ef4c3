/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CGROUP_H
#define MCPGW_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A cgroup v2 of its own for each boxed child, under the cgroup the gateway was delegated
 * (systemd's Delegate=yes): memory.max and pids.max per child. cgroup_setup finds the gateway's
 * cgroup (/proc/self/cgroup's "0::" line under the cgroup2 mount of /proc/self/mountinfo) and
 * checks it is delegated (marked so by systemd's trusted.delegate or user.delegate attribute, or,
 * for a gateway not running as root, owned by it), writable, and offers the memory and pids
 * controllers; then moves the gateway into a leaf (DIR/gateway: a cgroup with controllers enabled
 * for its children holds no process) and enables +memory +pids for DIR's children. Each boxed
 * child then gets DIR/box-N, which it joins itself before exec; the cgroup goes when the child is
 * reaped (its PID namespace's processes died with it).
 */

struct cgroup_child;

/* Where cgroup_setup reads; the process's own files unless a test names others. */
struct cgroup_source {
    const char *proc_cgroup; /* /proc/self/cgroup */
    const char *mountinfo;   /* /proc/self/mountinfo */
    /*
     * For tests: the tree is a plain directory standing for a cgroup2 filesystem (a file written
     * is created when missing, as the kernel's mkdir would have made it; no filesystem check).
     */
    bool stand_in;
};

/*
 * Once per process: 1 when per-child cgroups are in force, 0 when not (why in cgroup_why). With
 * apply false (--check-config), nothing is written: only the checks. Later calls return the
 * first call's answer, except that a check may be followed by an apply.
 */
int cgroup_setup(const struct cgroup_source *src, bool apply);
bool cgroup_in_force(void);
/* The delegated directory (per-child cgroups are made in it), or NULL. */
const char *cgroup_dir(void);
/* Why none is in force (static or the module's own buffer), or NULL when in force. */
const char *cgroup_why(void);
/* For tests: forget the state (the gateway's own cgroup does not move back). */
void cgroup_reset(void);

/*
 * A child's cgroup: DIR/box-N with memory.max (0: "max"), memory.swap.max 0 where swap is
 * accounted, memory.oom.group 1 and pids.max (0: "max"), and its cgroup.procs open for the child
 * to join (cgroup_child_procs_fd). NULL with errno when it cannot be made.
 */
struct cgroup_child *cgroup_child_new(uint64_t memory_max_bytes, uint64_t pids_max);
int cgroup_child_procs_fd(const struct cgroup_child *c);
/* The child has exec'd or died: its cgroup.procs fd is no longer needed. */
void cgroup_child_spawned(struct cgroup_child *c);
/*
 * The child was reaped: what is left is killed (cgroup.kill), the directory removed (retried on
 * later calls while the kernel still counts a dying process), c freed. The number of its
 * processes the kernel's OOM killer killed (memory.events oom_kill), for the caller to say.
 */
uint64_t cgroup_child_end(struct cgroup_child *c);
/* The path of c's directory (for logs). */
const char *cgroup_child_path(const struct cgroup_child *c);

#endif
