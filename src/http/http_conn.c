/* SPDX-License-Identifier: MIT */
/*
 * Client connections, from MHD's connection-started to its closed notification. Every client
 * socket is watched once, edge-triggered, with EPOLLRDHUP, so a drop is seen at once even while
 * its connection is suspended (MHD itself never notices: src/README.md, section 6). Request lines,
 * headers and bodies must arrive within client_header_timeout_ms and client_body_timeout_ms; a
 * response being streamed has no such deadline.
 */
#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "log.h"

#define HTTP_GONE_GRACE_MS 1000 /* a request still arriving when its client sent FIN */

/*
 * Edge-triggered events on a client socket. Bytes arriving while no request is open start the
 * next request's header deadline (a kept-alive connection is idle until then, under
 * connection_timeout_s only). EPOLLRDHUP: the client closed its socket or reset it, once.
 */
static void
http_conn_event(int fd, uint32_t events, void *arg)
{
    (void)fd;
    struct http_conn *conn = arg;
    if ((events & EPOLLIN) != 0 && conn->rc == NULL && conn->deadline_ms == 0)
        conn->deadline_ms = util_now_ms() + httpd.cfg->client_header_timeout_ms;
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0 || conn->gone)
        return;
    conn->gone = true;
    /*
     * A request still arriving can no longer complete once the client has sent its FIN, and MHD,
     * having read everything, may wait for the rest until a timeout. What MHD still holds gets
     * HTTP_GONE_GRACE_MS to be processed.
     */
    uint64_t soon = util_now_ms() + HTTP_GONE_GRACE_MS;
    if (conn->deadline_ms > soon)
        conn->deadline_ms = soon;
    httpd.need_run = true; /* MHD reads the end itself where it is not suspended */
    if (conn->rc != NULL && conn->rc->st != NULL)
        http_drop(conn->rc);
    else if (conn->rc != NULL)
        http_auth_abandon(conn->rc);
}

void
http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
            enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    struct http_conn *conn = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn = xcalloc(1, sizeof(*conn));
        conn->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL) {
            conn->fd = ci->connect_fd;
            conn->w = loop_watch_add(httpd.l, conn->fd, EPOLLIN | EPOLLRDHUP | EPOLLET,
                                     http_conn_event, conn);
        }
        if (conn->w == NULL)
            log_warn(NULL, "cannot watch a client socket: %s", strerror(errno));
        conn->deadline_ms = util_now_ms() + httpd.cfg->client_header_timeout_ms;
        conn->next = httpd.conns;
        if (httpd.conns != NULL)
            httpd.conns->prev = conn;
        httpd.conns = conn;
        *socket_context = conn;
        return;
    }
    if (conn == NULL)
        return;
    if (conn->rc != NULL)
        conn->rc->conn = NULL;
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        httpd.conns = conn->next;
    if (conn->next != NULL)
        conn->next->prev = conn->prev;
    loop_watch_del(conn->w);
    free(conn);
    *socket_context = NULL;
}

/* MHD has read a request line: the headers must follow within client_header_timeout_ms. */
void *
http_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct http_conn *conn = ci != NULL ? ci->socket_context : NULL;
    if (conn != NULL) {
        conn->deadline_ms = util_now_ms() + httpd.cfg->client_header_timeout_ms;
        /* MHD unescapes %00 into a NUL that ends the path early: "/metrics%00/../mcp". */
        conn->nul_in_uri = strstr(uri, "%00") != NULL;
        /* Where the raw target lies, for the head check (http_rules_head_start) to find a NUL. */
        conn->target = uri;
        conn->target_len = strlen(uri);
    }
    return NULL; /* the request context is made in http_handler */
}

/*
 * Closes connections whose request line and headers, or body, are overdue (slow clients). A
 * response being written, held or streamed has no deadline. MHD sees the shut socket and closes
 * the connection as a client abort.
 */
void
http_sweep(uint64_t now_ms)
{
    for (struct http_conn *conn = httpd.conns; conn != NULL; conn = conn->next) {
        if (conn->deadline_ms == 0 || now_ms < conn->deadline_ms || conn->fd == -1)
            continue;
        conn->deadline_ms = 0;
        httpd.slow_closed++;
        log_info(NULL, "closing a slow client's connection: its request %s did not arrive in time",
                 conn->rc != NULL ? "body" : "line and headers");
        shutdown(conn->fd, SHUT_RDWR);
        httpd.need_run = true;
        if (conn->rc != NULL)
            http_auth_abandon(conn->rc); /* MHD does not look at a suspended connection */
    }
}
