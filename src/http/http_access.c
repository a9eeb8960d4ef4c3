/* SPDX-License-Identifier: MIT */
/*
 * The access log: one line per HTTP request when MHD reports it complete ([gateway] access_log,
 * access_log_format), and the request id that joins it to the other lines of that request and to
 * a proxy's log. The id is the request's X-Request-Id when it is 1..64 of [A-Za-z0-9._:-], else
 * 16 hex digits minted here; it goes back in the response's X-Request-Id, and log.c puts it on
 * every line logged while the request's callbacks run (http.c sets it around them).
 *
 * The client is the socket's peer, unless that peer is one of trusted_proxies and the request
 * carries X-Forwarded-For: then it is that header's last entry, the one the proxy itself added
 * (nginx's $proxy_add_x_forwarded_for appends $remote_addr); entries before it are whatever the
 * client sent. The peer is logged too.
 *
 * Cost: what a line needs is copied into the request as it goes (no allocation); the line is
 * built on the stack and written with one write(2).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_int.h"
#include "log.h"

static uint64_t
http_access_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Copies at most size - 1 bytes of s[0..n) into out, NUL-terminated. */
static void
http_access_copy(char *out, size_t size, const char *s, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

static bool
http_access_rid_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LOG_REQUEST_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
              || c == '_' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

/*
 * 16 hex digits. Ids need to be distinct, not secret: a splitmix64 sequence seeded once from
 * the system's random source, so minting costs no system call.
 */
static void
http_access_mint(char *out)
{
    static uint64_t state;
    static bool seeded;
    if (!seeded) {
        if (crypto_random(&state, sizeof(state)) == -1)
            state = http_access_now_ns();
        seeded = true;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++)
        out[i] = hex[(z >> (60 - 4 * i)) & 15];
    out[16] = '\0';
}

/* The peer's address as 16 bytes (IPv4 as ::ffff:a.b.c.d) in a; false when not IP. */
static bool
http_access_peer(const struct sockaddr *sa, unsigned char a[16])
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

static bool
http_access_trusted(const struct sockaddr *sa)
{
    unsigned char a[16];
    if (httpd.cfg->trusted_proxies == NULL || !http_access_peer(sa, a))
        return false;
    unsigned char net[16];
    unsigned bits;
    for (char **p = httpd.cfg->trusted_proxies; *p != NULL; p++)
        if (util_cidr_parse(*p, net, &bits) == 0 && util_cidr_match(a, net, bits))
            return true;
    return false;
}

static const struct sockaddr *
http_access_sockaddr(const struct http_req *rc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rc->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci != NULL ? ci->client_addr : NULL;
}

/* The last entry of X-Forwarded-For, trimmed, when it reads as an address. */
static void
http_access_forwarded(struct http_req *rc, const char *xff)
{
    const char *last = strrchr(xff, ',');
    last = last != NULL ? last + 1 : xff;
    while (*last == ' ' || *last == '\t')
        last++;
    size_t n = strlen(last);
    while (n > 0 && (last[n - 1] == ' ' || last[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof(rc->acc.forwarded))
        return;
    for (size_t i = 0; i < n; i++)
        if (strchr("0123456789abcdefABCDEF.:[]", last[i]) == NULL)
            return;
    http_access_copy(rc->acc.forwarded, sizeof(rc->acc.forwarded), last, n);
}

void
http_access_start(struct http_req *rc, const char *url, const char *method)
{
    struct http_access *a = &rc->acc;
    a->start_ns = http_access_now_ns();
    http_access_copy(a->method, sizeof(a->method), method, strlen(method));
    http_access_copy(a->path, sizeof(a->path), url, strlen(url));
    const char *rid = http_header(rc, HTTP_H_REQUEST_ID);
    if (rid != NULL && http_access_rid_ok(rid))
        http_access_copy(a->rid, sizeof(a->rid), rid, strlen(rid));
    else
        http_access_mint(a->rid);
    const char *xff = http_header(rc, HTTP_H_FORWARDED_FOR);
    if (xff != NULL && http_access_trusted(http_access_sockaddr(rc)))
        http_access_forwarded(rc, xff);
}

void
http_access_response(struct http_req *rc, unsigned status, struct MHD_Response *r)
{
    rc->acc.status = status;
    if (rc->acc.rid[0] != '\0')
        MHD_add_response_header(r, "X-Request-Id", rc->acc.rid);
}

/* A JSON string span's inside (quotes off); escapes stay as they are. */
static void
http_access_span(char *out, size_t size, const char *body, struct jsonrpc_span sp)
{
    const char *p = body + sp.off;
    size_t n = sp.len;
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        p++;
        n -= 2;
    }
    http_access_copy(out, size, p, n);
}

void
http_access_mcp(struct http_req *rc, const struct jsonrpc_info *info)
{
    struct http_access *a = &rc->acc;
    http_access_copy(a->mcp_method, sizeof(a->mcp_method), info->method, strlen(info->method));
    const char *hn = http_header(rc, HTTP_H_MCP_NAME);
    const char *body = buf_head(&rc->body);
    if (hn != NULL)
        http_access_copy(a->name, sizeof(a->name), hn, strlen(hn));
    else if (info->name.len > 0)
        http_access_span(a->name, sizeof(a->name), body, info->name);
    else if (info->uri.len > 0)
        http_access_span(a->name, sizeof(a->name), body, info->uri);
}

struct trace_in *
http_access_trace(struct http_req *rc, struct trace_in *tin)
{
    enum config_trace mode = httpd.cfg->trace_context;
    if (mode == CONFIG_TRACE_OFF)
        return NULL;
    trace_in_init(tin, mode == CONFIG_TRACE_START ? TRACE_START : TRACE_PROPAGATE,
                  http_header(rc, HTTP_H_TRACEPARENT), http_header(rc, HTTP_H_TRACESTATE));
    return tin;
}

void
http_access_traced(struct http_req *rc, const struct trace_in *tin)
{
    if (tin != NULL && tin->trace_id[0] != '\0' && rc->acc.trace_id[0] == '\0')
        memcpy(rc->acc.trace_id, tin->trace_id, sizeof(rc->acc.trace_id));
}

/* The peer's address as text. */
static void
http_access_addr(const struct sockaddr *sa, char *out, size_t size)
{
    out[0] = '\0';
    if (sa == NULL)
        return;
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)size);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6))
            inet_ntop(AF_INET, a6->s6_addr + 12, out, (socklen_t)size);
        else
            inet_ntop(AF_INET6, a6, out, (socklen_t)size);
    }
}

/*
 * The peer's address as text. A connection's peer does not change, so its text is made once per
 * connection and copied for each of its requests.
 */
void
http_access_peer_text(const struct http_req *rc, char *out, size_t size)
{
    struct http_conn *conn = rc->conn;
    if (conn == NULL) {
        http_access_addr(http_access_sockaddr(rc), out, size);
        return;
    }
    if (!conn->peer_known) {
        http_access_addr(http_access_sockaddr(rc), conn->peer, sizeof(conn->peer));
        conn->peer_known = true;
    }
    http_access_copy(out, size, conn->peer, strlen(conn->peer));
}

void
http_access_client(const struct http_req *rc, char *out, size_t size)
{
    if (rc->acc.forwarded[0] != '\0')
        http_access_copy(out, size, rc->acc.forwarded, strlen(rc->acc.forwarded));
    else
        http_access_peer_text(rc, out, size);
}

void
http_access_end(struct http_req *rc)
{
    if (!log_access_on() || rc->acc.start_ns == 0)
        return;
    const struct http_access *a = &rc->acc;
    char peer[INET6_ADDRSTRLEN], status[12], sent[24], ms[32];
    http_access_peer_text(rc, peer, sizeof(peer));
    snprintf(status, sizeof(status), "%u", a->status);
    snprintf(sent, sizeof(sent), "%llu", (unsigned long long)a->sent);
    uint64_t us = (http_access_now_ns() - a->start_ns) / 1000;
    snprintf(ms, sizeof(ms), "%llu.%03llu", (unsigned long long)(us / 1000),
             (unsigned long long)(us % 1000));
#define HTTP_ACCESS_OR_NULL(s) ((s)[0] != '\0' ? (s) : NULL)
    const struct log_field f[] = {
        { "client", a->forwarded[0] != '\0' ? a->forwarded : HTTP_ACCESS_OR_NULL(peer), false },
        { "peer", HTTP_ACCESS_OR_NULL(peer), false },
        { "method", a->method, false },
        { "path", a->path, false },
        { "status", status, true },
        { "bytes", sent, true },
        { "duration_ms", ms, true },
        { "mcp_method", HTTP_ACCESS_OR_NULL(a->mcp_method), false },
        { "name", HTTP_ACCESS_OR_NULL(a->name), false },
        { "session", HTTP_ACCESS_OR_NULL(rc->sid_tag), false },
        { "principal", rc->principal != NULL ? rc->principal->name : NULL, false },
        { "request_id", a->rid, false },
        { "trace_id", HTTP_ACCESS_OR_NULL(a->trace_id), false },
    };
#undef HTTP_ACCESS_OR_NULL
    log_access(f, ARRAY_LEN(f));
}
