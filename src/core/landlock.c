/* SPDX-License-Identifier: MIT */
/*
 * Landlock for the box (src/README.md, section 6, "The box"): on top of the view the mounts make,
 * a ruleset handling every filesystem right of the running ABI (best effort: a right the kernel
 * does not know is not asked for), so what the view leaves open but a tool server has no use for
 * is refused too: executing what it wrote in /tmp, writing to /proc, reaching the view's own
 * tmpfs root or the covers over the gateway's files. From ABI 4, and only when the server lists
 * the TCP ports its child may connect to, TCP connect to any other port is refused (Landlock can
 * only allow ports: refusing a few by allowing the other 65534 costs about 19 ms and 4.5 MB of
 * kernel memory per child, as the kernel copies every rule into each child's domain;
 * src/README.md). From ABI 6, signals and abstract unix sockets are scoped to the box. The child
 * runs in the gateway's memory (sandbox.c): everything here after landlock_abi is system calls on
 * the caller's own stack.
 *
 * The constants are the kernel's (include/uapi/linux/landlock.h); Debian 12's headers stop at
 * ABI 2, so they are written out here, and the kernel's header is not included.
 */
#include "landlock.h"

#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1u << 0)
#define LL_RULE_PATH_BENEATH      1
#define LL_RULE_NET_PORT          2

/* Filesystem rights, by the ABI that brought them. */
#define LL_FS_EXECUTE                 (1ull << 0) /* ABI 1 */
#define LL_FS_WRITE_FILE              (1ull << 1)
#define LL_FS_READ_FILE               (1ull << 2)
#define LL_FS_READ_DIR                (1ull << 3)
#define LL_FS_REMOVE_DIR              (1ull << 4)
#define LL_FS_REMOVE_FILE             (1ull << 5)
#define LL_FS_MAKE_CHAR               (1ull << 6)
#define LL_FS_MAKE_DIR                (1ull << 7)
#define LL_FS_MAKE_REG                (1ull << 8)
#define LL_FS_MAKE_SOCK               (1ull << 9)
#define LL_FS_MAKE_FIFO               (1ull << 10)
#define LL_FS_MAKE_BLOCK              (1ull << 11)
#define LL_FS_MAKE_SYM                (1ull << 12)
#define LL_FS_REFER                   (1ull << 13) /* ABI 2: link and rename across directories */
#define LL_FS_TRUNCATE                (1ull << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV               (1ull << 15) /* ABI 5: ioctl on a device file */
/* ABI 4: TCP by port (allowed ports only: a handled right is refused for every port no rule
 * names). */
#define LL_NET_CONNECT_TCP            (1ull << 1)
/* ABI 6: scopes. */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define LL_SCOPE_SIGNAL               (1ull << 1)

/* The rights that apply to a file (a rule on a file that is not a directory may hold only these).
 */
#define LL_FS_FILE \
    (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

/* The kernel's struct landlock_ruleset_attr as of ABI 6 (a smaller kernel takes it when the fields
 * it does not know are zero). */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
    uint64_t allowed_access;
    uint64_t port; /* host byte order */
} __attribute__((packed));

/* Every filesystem right the ABI knows. */
static uint64_t
ll_fs_rights(int abi)
{
    uint64_t r = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0 to 12 */
    if (abi >= 2)
        r |= LL_FS_REFER;
    if (abi >= 3)
        r |= LL_FS_TRUNCATE;
    if (abi >= 5)
        r |= LL_FS_IOCTL_DEV;
    return r;
}

int
landlock_abi(void)
{
    static int abi = -1;
    if (abi == -1) {
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
        abi = v > 0 ? (int)v : 0; /* ENOSYS: not built; EOPNOTSUPP: not enabled at boot */
    }
    return abi;
}

int
landlock_ruleset(int abi, bool tcp_connect)
{
    struct ll_ruleset_attr attr = { .handled_access_fs = ll_fs_rights(abi) };
    if (tcp_connect) {
        if (abi < 4) {
            errno = EOPNOTSUPP;
            return -1;
        }
        attr.handled_access_net = LL_NET_CONNECT_TCP;
    }
    if (abi >= 6)
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
    return (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0u);
}

int
landlock_allow(int ruleset, int abi, const char *path, enum landlock_allow what, bool must_exist)
{
    const uint64_t rd = LL_FS_READ_FILE | LL_FS_READ_DIR;
    uint64_t all = ll_fs_rights(abi), allow;
    switch (what) {
    case LANDLOCK_ALLOW_LIST:
        allow = LL_FS_READ_DIR;
        break;
    case LANDLOCK_ALLOW_READ:
        allow = rd;
        break;
    case LANDLOCK_ALLOW_READ_EXEC:
        allow = rd | LL_FS_EXECUTE;
        break;
    case LANDLOCK_ALLOW_DEVICES:
        allow = rd | LL_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
        break;
    case LANDLOCK_ALLOW_WRITE_NOEXEC:
        allow = all & ~LL_FS_EXECUTE;
        break;
    case LANDLOCK_ALLOW_ALL:
    default:
        allow = all;
        break;
    }
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd == -1)
        return !must_exist && errno == ENOENT ? 0 : -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (rc == 0) {
        struct ll_path_beneath_attr pb = {
            .allowed_access = allow & all & (S_ISDIR(st.st_mode) ? ~0ull : LL_FS_FILE),
            .parent_fd = fd,
        };
        if (pb.allowed_access != 0) /* the kernel refuses an empty rule */
            rc = (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0u);
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int
landlock_allow_connect(int ruleset, uint16_t port)
{
    struct ll_net_port_attr np = { .allowed_access = LL_NET_CONNECT_TCP, .port = port };
    return (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &np, 0u);
}

int
landlock_restrict(int ruleset)
{
    int rc = (int)syscall(SYS_landlock_restrict_self, ruleset, 0u);
    int e = errno;
    close(ruleset);
    errno = e;
    return rc;
}
