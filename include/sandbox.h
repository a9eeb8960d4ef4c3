/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_SANDBOX_H
#define MCPGW_SANDBOX_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The box around a child ([server:NAME] sandbox = on): new user, mount, PID, IPC and UTS
 * namespaces (and a network one with sandbox_network = none), a filesystem view built of the
 * system directories read-only, a private /tmp, the bound paths, and the gateway's own files
 * hidden; no_new_privs, a seccomp filter that answers EPERM, and rlimits. Made in the parent
 * (sandbox_new: every allocation happens there), entered by the child between clone and exec
 * (sandbox_spawn: only system calls there).
 */

struct sandbox;
struct cgroup_child;

struct sandbox_spec {
    bool network_none;         /* sandbox_network = none: a network namespace of its own */
    char *const *read_only;    /* absolute paths bound read-only; NULL-terminated or NULL */
    char *const *writable;     /* absolute paths bound writable */
    char *const *hidden;       /* absolute paths not visible in the box (the gateway's files) */
    uint64_t max_memory_bytes; /* RLIMIT_AS; 0: not limited */
    uint64_t max_processes;    /* RLIMIT_NPROC, counted in the child's own user namespace */
    uint64_t max_open_files;   /* RLIMIT_NOFILE */
    uint64_t max_cpu_s;        /* RLIMIT_CPU */
    uint64_t max_file_bytes;   /* RLIMIT_FSIZE */
    /* memory.max of the child's cgroup (cgroup.h, where one is in force; pids.max is
     * max_processes); 0: not limited */
    uint64_t max_memory_cgroup_bytes;
    /* The only TCP ports the child may connect to, on any address (Landlock ABI 4 and later;
     * sandbox_probe refuses a kernel without it); n 0: every port. */
    const uint16_t *tcp_connect_ports;
    size_t n_tcp_connect_ports;
    /*
     * The real path of the directory the child starts in (the server's cwd, else the gateway's):
     * in the view at the same path, so that a relative command or cwd resolves as unboxed; NULL:
     * the view's root.
     */
    const char *cwd;
};

/*
 * A box from spec (paths copied). NULL with a static reason in *errstr when a path is not
 * absolute, holds "..", or the view would need more than the box's fixed room.
 */
struct sandbox *sandbox_new(const struct sandbox_spec *spec, const char **errstr);
void sandbox_free(struct sandbox *b);
/*
 * Whether a path may be bound into the view: not "/" (the whole host), nor /tmp, /proc, /dev or
 * below the last two (the box's own: a bind there would cover them with the host's).
 */
bool sandbox_path_bindable(const char *path);
bool sandbox_same(const struct sandbox *a, const struct sandbox *b);
/* Whether sandbox_enter changes to the spec's cwd (then the spawn does not change again). */
bool sandbox_has_cwd(const struct sandbox *b);

/*
 * Builds the seccomp filter once (libseccomp, exported as BPF) and asks the kernel what it
 * offers: 0, or -1 with why in err. Says nothing itself; sandbox_summary says what is applied.
 */
int sandbox_module_init(char *err, size_t errlen);
void sandbox_module_free(void);
/*
 * Starts a throw-away boxed process that only exits: 0 when the kernel gives every namespace
 * and mount the box needs, else -1 and err names the step and the kernel's reason (which
 * namespace, and what usually refuses it). For start-up and --check-config.
 */
int sandbox_probe(const struct sandbox *b, char *err, size_t errlen);
/* One line: namespaces, Landlock, seccomp, the limits in force. */
void sandbox_summary(const struct sandbox *b, char *out, size_t size);

/*
 * What one child sees besides its box's view: its owner's directory (a session's or a principal
 * pool's exchanged token, auth.h), bound read-only at the same path, so a file renamed into it
 * reaches the child; and the group that may read it: a root gateway's boxed child holds it as a
 * supplementary group besides its own uid ((gid_t)-1: none; an ordinary gateway's child maps the
 * gateway's own uid and needs none). Another child's directory is never in a view: a covered
 * path above it shows only this one.
 */
struct sandbox_own {
    const char *dir; /* absolute, bindable (sandbox_path_bindable); NULL: nothing of its own */
    gid_t gid;
};
/*
 * A group of its own for one owner's directory, from a reserved range apart from the children's
 * uids, when the gateway runs as root; (gid_t)-1 otherwise (none is needed).
 */
gid_t sandbox_group_new(void);

/*
 * Clones fn into the box (CLONE_VM | CLONE_VFORK: the parent waits until fn execs or exits, as
 * with vfork); fn must call sandbox_join_cgroup, then sandbox_notify_keep (before it closes
 * descriptors: it keeps the one the seccomp listener leaves by), sandbox_enter, then only system
 * calls, then sandbox_seal and exec. own (NULL: none) must stay valid until this returns. With cg
 * and a cgroup in force (cgroup.h), *cg is the child's cgroup, made before the clone, for the
 * caller to end with cgroup_child_end once the child is reaped. The pid as the gateway sees it
 * (its listener then waits for sandbox_watch_take), or -1 with errno (EINVAL: own's directory
 * cannot be bound; *cg is then NULL unless the clone had happened).
 */
pid_t sandbox_spawn(const struct sandbox *b, const struct sandbox_own *own, int (*fn)(void *),
                    void *arg, struct cgroup_child **cg);
/*
 * In the child, before it closes the fds it inherited: it moves itself into the cgroup
 * sandbox_spawn made (cgroup.procs, opened by the parent), so all it starts is counted there.
 * 0 (also when there is none), or -1 with errno and *step.
 */
int sandbox_join_cgroup(const char *volatile *step);
/*
 * For fn and what it calls that does not return: AddressSanitizer, seeing a call that does not
 * return made on a stack that is not a thread's, warns and may then report falsely.
 */
#define SANDBOX_CHILD __attribute__((no_sanitize_address))
/*
 * In the child: the uid and gid maps, the filesystem view, its working directory, the hostname,
 * the limits, no_new_privs. 0, or -1 with errno and *step naming what failed (static). Landlock
 * (where the kernel offers it) and the seccomp filter come last, from sandbox_seal, just before
 * exec (after chdir).
 */
int sandbox_enter(const struct sandbox *b, const char *volatile *step);
int sandbox_seal(const struct sandbox *b, const char *volatile *step);
/*
 * The filter (sandbox_filter.c), built once by sandbox_module_init: into plain, refusing with
 * EPERM, and into notify, refusing by user notification (notify->filter stays NULL where libseccomp
 * cannot). 0, or -1 with why in err. The filter's buffers are the caller's to free.
 */
struct sock_fprog;
int sandbox_filter_build(struct sock_fprog *plain, struct sock_fprog *notify, char *err,
                         size_t errlen);
/* How many system calls the filter refuses by name (clone with a namespace flag besides). */
size_t sandbox_filter_refused_count(void);
/* The system calls the filter refuses, ", "-joined (for the documents and --check-config). */
const char *sandbox_refused_list(void);
/*
 * The label a refused call is counted under (sandbox_notify.h): the index of system call nr in
 * the refused list, clone's (with a namespace flag) after it, then "other"; each below
 * SANDBOX_REFUSED_LABELS. The name of label i.
 */
#define SANDBOX_REFUSED_LABELS 64
size_t sandbox_refused_label(int nr);
const char *sandbox_refused_label_name(size_t i);

#endif
