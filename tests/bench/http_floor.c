/* SPDX-License-Identifier: MIT */
/*
 * The HTTP floor of the benchmark (contender H): libmicrohttpd 0.9.75 set up as the gateway sets
 * it up (its epoll, driven by MHD_run from an outer epoll_wait, suspension allowed, the same
 * connection pool size, timeout and limit, completed notifications), answering every POST at once
 * with a canned echo result in one SSE event with the gateway's four response headers: no child, no
 * JSON parsing (the id is found with strstr), never suspended. What HTTP alone costs a process on
 * this machine, so that the gateway's CPU per echo reads as H plus what relaying to a child adds.
 *   build/tests/bench/http_floor [PORT]     (default 0: any; listens on 127.0.0.1 only)
 * Ends on SIGTERM or SIGINT.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#define FLOOR_BODY_MAX    4096
/* The gateway's connection pool at its default max_header_bytes: 2 × 16384 + 16384. */
#define FLOOR_POOL        49152
/* The gateway's defaults of connection_timeout_s and max_connections. */
#define FLOOR_TIMEOUT_S   60
#define FLOOR_CONNECTIONS 4096

struct floor_req {
    size_t len;
    char body[FLOOR_BODY_MAX];
};

static enum MHD_Result
floor_answer(struct MHD_Connection *c, const char *method, struct floor_req *r)
{
    struct MHD_Response *resp;
    unsigned status = MHD_HTTP_OK;
    const char *id = strcmp(method, "POST") == 0 ? strstr(r->body, "\"id\":") : NULL;

    if (id == NULL) {
        /* a notification (202), a DELETE or anything else (200): no body */
        if (strcmp(method, "POST") == 0)
            status = MHD_HTTP_ACCEPTED;
        resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    } else {
        char *out = malloc(256);
        if (out == NULL)
            return MHD_NO;
        int n = snprintf(out, 256,
                         "event: message\ndata: {\"result\":{\"content\":[{\"type\":\"text\","
                         "\"text\":\"0123456789abcdef0123456789abcdef\"}]},\"jsonrpc\":\"2.0\","
                         "\"id\":%ld}\n\n",
                         strtol(id + 5, NULL, 10));
        resp = MHD_create_response_from_buffer((size_t)n, out, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        MHD_add_response_header(resp, "X-Request-Id", "0123456789abcdef");
        if (strstr(r->body, "\"initialize\"") != NULL)
            MHD_add_response_header(resp, "Mcp-Session-Id", "http-floor");
    }
    if (resp == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result
floor_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
              const char *version, const char *upload, size_t *upload_size, void **ptr)
{
    (void)cls;
    (void)url;
    (void)version;
    struct floor_req *r = *ptr;

    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        *ptr = r;
        return r != NULL ? MHD_YES : MHD_NO;
    }
    if (*upload_size != 0) {
        size_t n = *upload_size;
        if (n > FLOOR_BODY_MAX - 1 - r->len)
            n = FLOOR_BODY_MAX - 1 - r->len;
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        *upload_size = 0;
        return MHD_YES;
    }
    r->body[r->len] = '\0';
    return floor_answer(c, method, r);
}

static void
floor_completed(void *cls, struct MHD_Connection *c, void **ptr,
                enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*ptr);
    *ptr = NULL;
}

static int
floor_listen(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0
        || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
        perror("http_floor: listen");
        exit(1);
    }
    return fd;
}

int
main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 0;
    sigset_t stop;

    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, floor_handler,
        NULL, MHD_OPTION_LISTEN_SOCKET, floor_listen(port), MHD_OPTION_NOTIFY_COMPLETED,
        floor_completed, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)FLOOR_POOL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)FLOOR_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)FLOOR_CONNECTIONS, MHD_OPTION_END);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (sfd == -1 || d == NULL || ep == -1) {
        fprintf(stderr, "http_floor: libmicrohttpd did not start\n");
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = di->epoll_fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, di->epoll_fd, &ev);
    ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = sfd };
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    for (;;) {
        struct epoll_event out[2];
        int n = epoll_wait(ep, out, 2, 1000);
        for (int i = 0; i < n; i++)
            if (out[i].data.fd == sfd) {
                MHD_stop_daemon(d);
                return 0;
            }
        MHD_run(d);
    }
}
