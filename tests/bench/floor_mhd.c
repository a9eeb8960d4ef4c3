/* SPDX-License-Identifier: MIT */
#include "floor_mhd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gateway's connection pool at its default max_header_bytes: 2 × 16384 + 16384. */
#define FLOOR_POOL        49152
/* The gateway's defaults of connection_timeout_s and max_connections. */
#define FLOOR_TIMEOUT_S   60
#define FLOOR_CONNECTIONS 4096

static int
floor_listen(const char *who, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0
        || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
        fprintf(stderr, "%s: ", who);
        perror("listen");
        exit(1);
    }
    return fd;
}

struct MHD_Daemon *
floor_start(const char *who, int port, MHD_AccessHandlerCallback handler,
            MHD_RequestCompletedCallback completed, int *ep)
{
    sigset_t stop;

    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, NULL,
        MHD_OPTION_LISTEN_SOCKET, floor_listen(who, port), MHD_OPTION_NOTIFY_COMPLETED, completed,
        NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)FLOOR_POOL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)FLOOR_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)FLOOR_CONNECTIONS,
        MHD_OPTION_END);
    *ep = epoll_create1(EPOLL_CLOEXEC);
    const union MHD_DaemonInfo *di =
        d != NULL ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    struct epoll_event mhd = { .events = EPOLLIN, .data.u32 = FLOOR_EV_MHD };
    struct epoll_event sig = { .events = EPOLLIN, .data.u32 = FLOOR_EV_STOP };
    if (sfd == -1 || di == NULL || *ep == -1
        || epoll_ctl(*ep, EPOLL_CTL_ADD, di->epoll_fd, &mhd) != 0
        || epoll_ctl(*ep, EPOLL_CTL_ADD, sfd, &sig) != 0) {
        fprintf(stderr, "%s: libmicrohttpd did not start\n", who);
        exit(1);
    }
    return d;
}

bool
floor_body_add(struct floor_body *b, const char *upload, size_t *upload_size)
{
    if (*upload_size == 0) {
        b->text[b->len] = '\0';
        return false;
    }
    size_t n = *upload_size;
    if (n > FLOOR_BODY_MAX - 1 - b->len)
        n = FLOOR_BODY_MAX - 1 - b->len;
    memcpy(b->text + b->len, upload, n);
    b->len += n;
    *upload_size = 0;
    return true;
}

enum MHD_Result
floor_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp)
{
    if (resp == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}
