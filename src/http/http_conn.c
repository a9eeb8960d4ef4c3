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

#include <linux/tcp.h>
#include <netinet/in.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "log.h"

#define HTTP_GONE_GRACE_MS 1000 /* a request still arriving when its client sent FIN */
#define HTTP_TCP_ESTABLISHED 1  /* tcpi_state's value (the kernel's ABI; linux/tcp.h has no name) */
/*
 * Connections parked at once, at most. libmicrohttpd walks its whole list of suspended connections
 * in every run that resumes one: with many idle connections parked, that walk would cost more than
 * the two epoll_ctl a parked request saves. Past this, a connection takes libmicrohttpd's own path.
 */
#define HTTP_PARK_MAX 64

static void
http_park_unlink(struct http_conn *conn)
{
    if (!conn->park_check)
        return;
    conn->park_check = false;
    UTIL_DLIST_UNLINK(httpd.to_check, conn, park_prev, park_next);
    conn->park_prev = conn->park_next = NULL;
}

static void
http_unpark(struct http_conn *conn)
{
    if (!conn->parked)
        return;
    http_park_unlink(conn);
    conn->parked = false;
    httpd.parked--;
    MHD_resume_connection(conn->c);
    httpd.need_run = true; /* MHD reads the socket in its next run, this loop turn */
}

/*
 * Edge-triggered events on a client socket. Bytes arriving while no request is open start the
 * next request's header deadline (a kept-alive connection is idle until then, under
 * connection_timeout_s only) and resume a parked connection. EPOLLRDHUP: the client closed its
 * socket or reset it, once.
 */
static void
http_conn_event(int fd, uint32_t events, void *arg)
{
    (void)fd;
    struct http_conn *conn = arg;
    if ((events & EPOLLIN) != 0 && conn->rc == NULL && conn->deadline_ms == 0)
        conn->deadline_ms = util_now_ms() + httpd.cfg->client_header_timeout_ms;
    http_unpark(conn); /* whatever came, MHD reads it: a request, an end, an error */
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
        conn->c = c;
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
    http_park_unlink(conn);
    if (conn->parked) /* never: MHD closes no suspended connection (the count stays right) */
        httpd.parked--;
    if (conn->rc != NULL)
        conn->rc->conn = NULL;
    UTIL_DLIST_UNLINK(httpd.conns, conn, prev, next);
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
 * Parking (src/README.md, section 6). A kept-alive connection whose request waited suspended is
 * out of MHD's epoll set when its response has been sent: MHD takes a suspended socket out, and
 * puts it back once a read finds nothing. Left to MHD, it goes back in as the response ends and
 * out again as the next request waits: two epoll_ctl per request. Suspended as the response ends
 * (MHD's completed notification, before MHD puts it back), it waits on this module's own watch
 * instead, whose next edge resumes it, and MHD's run then reads the next request.
 *
 * The notification cannot tell whether MHD keeps the connection or closes it, nor whether MHD has
 * read bytes past the request (pipelined). http_park_check settles both after the run: it resumes
 * a connection that is no longer established (MHD shut it, or the peer did) or whose socket
 * received more bytes than its requests used; MHD then goes on as if it had never been parked.
 */
void
http_park(struct http_conn *conn)
{
    if (!httpd.park_ok || conn->parked || conn->gone || conn->w == NULL
        || httpd.parked >= HTTP_PARK_MAX)
        return;
    MHD_suspend_connection(conn->c);
    conn->parked = true;
    conn->parked_ms = util_now_ms();
    httpd.parked++;
    conn->park_check = true;
    conn->park_prev = NULL;
    conn->park_next = httpd.to_check;
    if (httpd.to_check != NULL)
        httpd.to_check->park_prev = conn;
    httpd.to_check = conn;
}

void
http_park_check(void)
{
    while (httpd.to_check != NULL) {
        struct http_conn *conn = httpd.to_check;
        http_park_unlink(conn);
        struct tcp_info ti;
        socklen_t n = sizeof(ti);
        if (getsockopt(conn->fd, IPPROTO_TCP, TCP_INFO, &ti, &n) != 0
            || n < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received)
            || ti.tcpi_state != HTTP_TCP_ESTABLISHED || ti.tcpi_bytes_received != conn->rx_bytes)
            http_unpark(conn);
    }
}

size_t
http_unpark_all(void)
{
    size_t n = 0;
    for (struct http_conn *conn = httpd.conns; conn != NULL; conn = conn->next)
        if (conn->parked) {
            http_unpark(conn);
            n++;
        }
    return n;
}

/*
 * Closes connections whose request line and headers, or body, are overdue (slow clients), and
 * parked ones idle for connection_timeout_s (MHD times out no suspended connection). A response
 * being written, held or streamed has no deadline. MHD sees the shut socket and closes the
 * connection as a client abort.
 */
void
http_sweep(uint64_t now_ms)
{
    uint64_t idle_ms = httpd.cfg->connection_timeout_s * 1000;
    for (struct http_conn *conn = httpd.conns; conn != NULL; conn = conn->next) {
        if (conn->parked && idle_ms > 0 && now_ms - conn->parked_ms >= idle_ms) {
            log_debug(NULL, "closing a kept-alive connection idle for connection_timeout_s");
            shutdown(conn->fd, SHUT_RDWR);
            http_unpark(conn);
            continue;
        }
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
