/* SPDX-License-Identifier: MIT */
/*
 * systemd's native journal protocol (journal.h): each entry one datagram on an unbound, unconnected
 * AF_UNIX socket, sent to the socket's path every time, so a journald that restarted (and made its
 * socket again) is reached without a reconnect. A field is "KEY=value\n", or, when the value holds
 * a newline, "KEY\n", its length as 64-bit little-endian, the value, "\n". Sends never block: a
 * journald that cannot take an entry now gets -1 (EAGAIN) and the caller writes the line instead.
 * An entry is at most a few KiB (log.c's lines and fields), far under what one datagram holds,
 * so the protocol's other form (a memfd for a large entry) is not needed.
 */
#include "journal.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int journal_fd = -1;
static struct sockaddr_un journal_addr;
static socklen_t journal_addr_len;

bool
journal_stream_is(int fd)
{
    const char *e = getenv("JOURNAL_STREAM");
    uintmax_t dev, ino;
    int end = 0;
    if (e == NULL || sscanf(e, "%ju:%ju%n", &dev, &ino, &end) != 2 || e[end] != '\0')
        return false;
    struct stat st;
    if (fstat(fd, &st) == -1)
        return false;
    return (uintmax_t)st.st_dev == dev && (uintmax_t)st.st_ino == ino;
}

/* journald's address into journal_addr; -1 with errno when the path does not fit. */
static int
journal_address(void)
{
    const char *path = getenv(JOURNAL_SOCKET_ENV);
    if (path == NULL || path[0] == '\0')
        path = JOURNAL_SOCKET;
    size_t n = strlen(path);
    if (n >= sizeof(journal_addr.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(&journal_addr, 0, sizeof(journal_addr));
    journal_addr.sun_family = AF_UNIX;
    memcpy(journal_addr.sun_path, path, n);
    journal_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

int
journal_socket(void)
{
    if (journal_address() == -1)
        return -1;
    return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

int
journal_open(void)
{
    if (journal_fd != -1)
        return 0;
    int fd = journal_socket();
    if (fd == -1)
        return -1;
    journal_fd = fd;
    return 0;
}

void
journal_close(void)
{
    if (journal_fd != -1)
        close(journal_fd);
    journal_fd = -1;
}

bool
journal_is_open(void)
{
    return journal_fd != -1;
}

int
journal_send(const struct journal_field *f, size_t n)
{
    return journal_send_on(journal_fd, f, n);
}

int
journal_send_on(int fd, const struct journal_field *f, size_t n)
{
    if (fd == -1 || n > JOURNAL_FIELDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    /* At most 5 pieces a field: key, "\n", length, value, "\n" (or key, "=", value, "\n"). */
    struct iovec iov[JOURNAL_FIELDS_MAX * 5];
    unsigned char lens[JOURNAL_FIELDS_MAX][8];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool binary = memchr(f[i].value, '\n', f[i].len) != NULL;
        iov[k++] = (struct iovec){ (void *)(uintptr_t)f[i].key, strlen(f[i].key) };
        if (binary) {
            iov[k++] = (struct iovec){ (void *)(uintptr_t) "\n", 1 };
            uint64_t v = f[i].len;
            for (size_t b = 0; b < 8; b++)
                lens[i][b] = (unsigned char)(v >> (8 * b));
            iov[k++] = (struct iovec){ lens[i], 8 };
        } else {
            iov[k++] = (struct iovec){ (void *)(uintptr_t) "=", 1 };
        }
        iov[k++] = (struct iovec){ (void *)(uintptr_t)f[i].value, f[i].len };
        iov[k++] = (struct iovec){ (void *)(uintptr_t) "\n", 1 };
    }
    struct msghdr mh = {
        .msg_name = &journal_addr, .msg_namelen = journal_addr_len, .msg_iov = iov, .msg_iovlen = k
    };
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}
