/* SPDX-License-Identifier: MIT */
/*
 * systemd's readiness protocol (sd_notify(3)), written here rather than linked from libsystemd:
 * it is one datagram of "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path,
 * or an abstract name spelled with a leading '@'), and that is all the gateway needs of it. Without
 * $NOTIFY_SOCKET (not under systemd, or Type= other than notify) every call does nothing.
 */
#include "notify.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static struct {
    int fd;
    struct sockaddr_un addr;
    socklen_t addr_len;
} notify = { .fd = -1 };

int
notify_init(void)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (name == NULL || name[0] == '\0')
        return 0;
    size_t len = strlen(name);
    int rc = -1;
    if ((name[0] != '/' && name[0] != '@') || len >= sizeof(notify.addr.sun_path) || len < 2) {
        log_warn(NULL, "NOTIFY_SOCKET %s: neither a path nor an abstract name; systemd is not told",
                 name);
        goto out;
    }
    notify.addr.sun_family = AF_UNIX;
    memcpy(notify.addr.sun_path, name, len);
    if (name[0] == '@')
        notify.addr.sun_path[0] = '\0'; /* abstract: the name's length is all of it */
    notify.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'));
    notify.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (notify.fd == -1) {
        log_warn(NULL, "NOTIFY_SOCKET: socket: %s; systemd is not told", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    /* Not for the children: a server that speaks the protocol would talk for the gateway. */
    unsetenv("NOTIFY_SOCKET");
    return rc;
}

bool
notify_enabled(void)
{
    return notify.fd != -1;
}

void
notify_send(const char *state)
{
    if (notify.fd == -1)
        return;
    ssize_t n = sendto(notify.fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT,
                       (const struct sockaddr *)&notify.addr, notify.addr_len);
    if (n == -1)
        log_warn(NULL, "NOTIFY_SOCKET: %s", strerror(errno));
}

void
notify_reloading(const char *status)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[512];
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=%s",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000,
             status);
    notify_send(msg);
}

void
notify_status(const char *prefix, const char *status)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%sSTATUS=%s", prefix, status);
    notify_send(msg);
}

void
notify_module_free(void)
{
    if (notify.fd != -1)
        close(notify.fd);
    notify.fd = -1;
}
