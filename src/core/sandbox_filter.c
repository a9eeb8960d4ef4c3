/* SPDX-License-Identifier: MIT */
/*
 * The box's seccomp filter (sandbox.h; src/README.md, section 6, "The box"): what a tool server
 * has no use for, built once in the parent with libseccomp (the one includer of <seccomp.h>) and
 * exported as BPF, twice: refusing with EPERM, and refusing by user notification so that the
 * gateway counts each refusal (sandbox_notify.c); and the labels those counts go under.
 */
#include <linux/filter.h>
#include <sys/mman.h>

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sandbox.h"
#include "util.h"

/*
 * What a tool server has no use for, refused with EPERM (not killed, so a server that probes
 * degrades): tracing other processes, mounts, new namespaces, kernel keyrings, modules, kexec,
 * BPF, perf, swap, reboot, the clock, io_uring (whose operations pass by seccomp).
 */
static const char *const sandbox_refused[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "iopl",
    "ioperm",
    "open_by_handle_at",
    "name_to_handle_at",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "vhangup",
    "lookup_dcookie",
    "uselib",
    "personality",
};
/* Every namespace flag of clone: a boxed child makes no namespace of its own. */
static const unsigned long sandbox_filter_ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWIPC,
    CLONE_NEWUTS,  CLONE_NEWNET, CLONE_NEWCGROUP,
};
/* Each refused call's number (-1: not on this architecture); clone (a namespace flag) last. */
static int sandbox_refused_nr[ARRAY_LEN(sandbox_refused) + 1];
_Static_assert(ARRAY_LEN(sandbox_refused) + 2 <= SANDBOX_REFUSED_LABELS,
               "labels: each, clone, other");
static char sandbox_refused_text[1024];

const char *
sandbox_refused_list(void)
{
    if (sandbox_refused_text[0] == '\0') {
        size_t used = 0;
        for (size_t i = 0; i < ARRAY_LEN(sandbox_refused) && used < sizeof(sandbox_refused_text);
             i++)
            used +=
                (size_t)snprintf(sandbox_refused_text + used, sizeof(sandbox_refused_text) - used,
                                 "%s%s", i ? ", " : "", sandbox_refused[i]);
    }
    return sandbox_refused_text;
}

size_t
sandbox_refused_label(int nr)
{
    for (size_t i = 0; i < ARRAY_LEN(sandbox_refused_nr); i++)
        if (sandbox_refused_nr[i] == nr)
            return i;
    return ARRAY_LEN(sandbox_refused_nr);
}

const char *
sandbox_refused_label_name(size_t i)
{
    return i < ARRAY_LEN(sandbox_refused)    ? sandbox_refused[i]
           : i == ARRAY_LEN(sandbox_refused) ? "clone"
                                             : "other";
}

/*
 * A filter built with libseccomp and exported as BPF through a memfd; what it refuses answered
 * by act (EPERM, or a user notification: sandbox_notify.c).
 */
static int
sandbox_build_filter(struct sock_fprog *out, uint32_t act, char *err, size_t errlen)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int fd = -1, rc = -1;
    if (ctx == NULL) {
        snprintf(err, errlen, "seccomp: cannot make a filter");
        return -1;
    }
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)) != 0)
        goto fail;
    for (size_t i = 0; i < ARRAY_LEN(sandbox_refused); i++) {
        int nr = seccomp_syscall_resolve_name(sandbox_refused[i]);
        sandbox_refused_nr[i] = nr != __NR_SCMP_ERROR ? nr : -1;
        if (nr != __NR_SCMP_ERROR && seccomp_rule_add(ctx, act, nr, 0) != 0)
            goto fail;
    }
    sandbox_refused_nr[ARRAY_LEN(sandbox_refused)] = SCMP_SYS(clone);
    /* clone with a namespace flag; clone3's flags are out of the filter's reach: ENOSYS makes
     * the C library fall back to clone (not a refusal: not counted). */
    for (size_t i = 0; i < ARRAY_LEN(sandbox_filter_ns_flags); i++)
        if (seccomp_rule_add(
                ctx, act, SCMP_SYS(clone), 1,
                SCMP_A0(SCMP_CMP_MASKED_EQ, sandbox_filter_ns_flags[i], sandbox_filter_ns_flags[i]))
            != 0)
            goto fail;
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0)
        goto fail;
    fd = memfd_create("mcpgw-seccomp", MFD_CLOEXEC);
    if (fd == -1 || seccomp_export_bpf(ctx, fd) != 0)
        goto fail;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0
        || size > 65536 * (off_t)sizeof(struct sock_filter))
        goto fail;
    struct sock_filter *prog = xcalloc((size_t)size / sizeof(*prog), sizeof(*prog));
    if (pread(fd, prog, (size_t)size, 0) != size) {
        free(prog);
        goto fail;
    }
    out->filter = prog;
    out->len = (unsigned short)((size_t)size / sizeof(*prog));
    rc = 0;
fail:
    if (rc == -1)
        snprintf(err, errlen, "seccomp: cannot build the filter");
    if (fd != -1)
        close(fd);
    seccomp_release(ctx);
    return rc;
}

int
sandbox_filter_build(struct sock_fprog *plain, struct sock_fprog *notify, char *err, size_t errlen)
{
    if (sandbox_build_filter(plain, SCMP_ACT_ERRNO(EPERM), err, errlen) == -1)
        return -1;
    /* Without user notification in the kernel (or libseccomp), refusals are not counted. */
    char ignored[64];
    (void)sandbox_build_filter(notify, SCMP_ACT_NOTIFY, ignored, sizeof(ignored));
    return 0;
}

size_t
sandbox_filter_refused_count(void)
{
    return ARRAY_LEN(sandbox_refused);
}
