/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_LANDLOCK_H
#define MCPGW_LANDLOCK_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Landlock for the box (sandbox.h): a ruleset that handles every filesystem access right of the
 * running kernel's ABI, with what the box's view allows beneath each path, then restrict_self;
 * from ABI 4, TCP connect only to the ports a server lists, when it lists any; from ABI 6 it also
 * scopes signals and abstract unix sockets to the box. The ABI is asked once
 * in the parent (landlock_abi); the rest runs in the child before exec: system calls only.
 */

/* What a path allows beneath it. */
enum landlock_allow {
    LANDLOCK_ALLOW_LIST,         /* list directories (the view's root: all it shows is the view) */
    LANDLOCK_ALLOW_READ,         /* read files and directories (/proc) */
    LANDLOCK_ALLOW_READ_EXEC,    /* and execute (the system, the read-only binds) */
    LANDLOCK_ALLOW_DEVICES,      /* read, write, truncate and ioctl on the devices (/dev) */
    LANDLOCK_ALLOW_WRITE_NOEXEC, /* everything but execute (/tmp, /dev/shm) */
    LANDLOCK_ALLOW_ALL,          /* everything (sandbox_writable_paths) */
};

/* The running kernel's Landlock ABI, 0 when it offers none (asked once; call in the parent). */
int landlock_abi(void);
/*
 * In the child: a new ruleset's fd for the ABI landlock_abi() gave (> 0), or -1 with errno; with
 * tcp_connect it also handles TCP connect (ABI 4 and later, else EOPNOTSUPP): then only the ports
 * landlock_allow_connect names may be connected to, on any address.
 */
int landlock_ruleset(int abi, bool tcp_connect);
/* In the child: allow what beneath path. A path that does not exist is skipped unless
 * must_exist. 0 or -1 with errno. */
int landlock_allow(int ruleset, int abi, const char *path, enum landlock_allow what,
                   bool must_exist);
/* In the child: allow TCP connect to port (a ruleset made with tcp_connect). 0 or -1 with errno. */
int landlock_allow_connect(int ruleset, uint16_t port);
/* In the child: enforces the ruleset on itself (no_new_privs must be set) and closes it. */
int landlock_restrict(int ruleset);

#endif
