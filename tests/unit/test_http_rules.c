/* SPDX-License-Identifier: MIT */
/*
 * http_rules: Accept (wildcards, parameters, case), Content-Type, Host with and without port
 * (IPv6 brackets), Origin patterns with a port wildcard, loopback addresses. Through
 * http_rules.h only.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "src/http/http_rules.h"

TestSuite(http_rules, .timeout = 10);

Test(http_rules, accept)
{
    cr_assert(http_rules_accepts("application/json, text/event-stream", "text/event-stream"));
    cr_assert(http_rules_accepts("text/event-stream;q=0.5", "text/event-stream"));
    cr_assert(http_rules_accepts("TEXT/Event-Stream", "text/event-stream"));
    cr_assert(http_rules_accepts("*/*", "application/json"));
    cr_assert(http_rules_accepts("application/*", "application/json"));
    cr_assert_not(http_rules_accepts("text/*", "application/json"));
    cr_assert_not(http_rules_accepts("application/jsonx", "application/json"));
    cr_assert_not(http_rules_accepts("text/html", "text/event-stream"));
    cr_assert_not(http_rules_accepts("", "text/event-stream"));
}

Test(http_rules, content_type)
{
    cr_assert(http_rules_is_json("application/json"));
    cr_assert(http_rules_is_json("Application/JSON; charset=utf-8"));
    cr_assert_not(http_rules_is_json(NULL));
    cr_assert_not(http_rules_is_json("application/jsonp"));
    cr_assert_not(http_rules_is_json("text/json"));
}

Test(http_rules, host)
{
    char *allowed[] = { (char[]){ "localhost" }, (char[]){ "127.0.0.1" }, (char[]){ "[::1]" },
                        NULL };
    cr_assert(http_rules_host_allowed(allowed, "localhost"));
    cr_assert(http_rules_host_allowed(allowed, "LOCALHOST:8080"));
    cr_assert(http_rules_host_allowed(allowed, "[::1]:80"));
    cr_assert(http_rules_host_allowed(allowed, "127.0.0.1:1"));
    cr_assert_not(http_rules_host_allowed(allowed, NULL), "a missing Host is refused");
    cr_assert_not(http_rules_host_allowed(allowed, "evil.example"));
    cr_assert_not(http_rules_host_allowed(allowed, "localhost.evil.example"));
    cr_assert_not(http_rules_host_allowed(allowed, "127.0.0.10"));
    char *none[] = { NULL };
    cr_assert_not(http_rules_host_allowed(none, "localhost"));
    char *any[] = { (char[]){ "*" }, NULL };
    cr_assert(http_rules_host_allowed(any, "whatever:1"));
}

Test(http_rules, origin)
{
    char *allowed[] = { (char[]){ "http://localhost:*" }, (char[]){ "https://app.example" }, NULL };
    cr_assert(http_rules_origin_allowed(allowed, NULL), "non-browser clients send no Origin");
    cr_assert(http_rules_origin_allowed(allowed, "http://localhost"));
    cr_assert(http_rules_origin_allowed(allowed, "http://localhost:5173"));
    cr_assert(http_rules_origin_allowed(allowed, "HTTPS://APP.example"));
    cr_assert_not(http_rules_origin_allowed(allowed, "http://localhost:"));
    cr_assert_not(http_rules_origin_allowed(allowed, "http://localhost:80x"));
    cr_assert_not(http_rules_origin_allowed(allowed, "http://localhost.evil:80"));
    cr_assert_not(http_rules_origin_allowed(allowed, "https://localhost:80"));
    cr_assert_not(http_rules_origin_allowed(allowed, "https://app.example:443"));
    cr_assert_not(http_rules_origin_allowed(allowed, "null"));
}

Test(http_rules, loopback)
{
    struct sockaddr_in a4 = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.5.6.7", &a4.sin_addr);
    cr_assert(http_rules_loopback((struct sockaddr *)&a4));
    inet_pton(AF_INET, "10.0.0.1", &a4.sin_addr);
    cr_assert_not(http_rules_loopback((struct sockaddr *)&a4));
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    cr_assert(http_rules_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
    cr_assert(http_rules_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:192.0.2.1", &a6.sin6_addr);
    cr_assert_not(http_rules_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
    cr_assert_not(http_rules_loopback((struct sockaddr *)&a6));
    cr_assert_not(http_rules_loopback(NULL));
}

/* Mirrored header values (2026-07-28): plain, base64 form, blanks around. */
Test(http_rules, mcp_value)
{
    char out[32];
    size_t n;
    cr_assert(http_rules_mcp_value("tools/call", out, sizeof(out), &n));
    cr_expect_str_eq(out, "tools/call");
    cr_assert(http_rules_mcp_value("  echo \t", out, sizeof(out), &n));
    cr_expect_str_eq(out, "echo");
    cr_expect_eq(n, 4);
    /* "héllo" in UTF-8 */
    cr_assert(http_rules_mcp_value("=?base64?aMOpbGxv?=", out, sizeof(out), &n));
    cr_expect_eq(n, 6);
    cr_expect_str_eq(out, "h\xc3\xa9llo");
    cr_assert(http_rules_mcp_value("=?base64?YQ==?=", out, sizeof(out), &n));
    cr_expect_str_eq(out, "a");
    cr_expect_not(http_rules_mcp_value("=?base64?a*b?=", out, sizeof(out), &n), "bad alphabet");
    cr_expect_not(http_rules_mcp_value("=?base64?YQ=x?=", out, sizeof(out), &n), "data after =");
    cr_expect_not(http_rules_mcp_value("=?base64?AA==?=", out, sizeof(out), &n), "a NUL");
    cr_expect_not(http_rules_mcp_value("caf\xc3\xa9", out, sizeof(out), &n),
                  "non-ASCII must use the base64 form");
    cr_expect_not(
        http_rules_mcp_value("0123456789012345678901234567890123456789", out, sizeof(out), &n),
        "too long");
    /* The markers are case-sensitive: "=?BASE64?...?=" is a plain value. */
    cr_assert(http_rules_mcp_value("=?BASE64?YQ==?=", out, sizeof(out), &n));
    cr_expect_str_eq(out, "=?BASE64?YQ==?=");
}

/* A browser's cross-site request without Origin is told apart by Sec-Fetch-Site. */
Test(http_rules, fetch_site)
{
    cr_expect(http_rules_fetch_site_allowed(NULL, NULL), "not a browser");
    cr_expect(http_rules_fetch_site_allowed(NULL, "same-origin"));
    cr_expect(http_rules_fetch_site_allowed(NULL, "none"), "typed by the user");
    cr_expect_not(http_rules_fetch_site_allowed(NULL, "cross-site"));
    cr_expect_not(http_rules_fetch_site_allowed(NULL, "same-site"));
    cr_expect_not(http_rules_fetch_site_allowed(NULL, "Cross-Site"));
    cr_expect(http_rules_fetch_site_allowed("https://a.example", "cross-site"),
              "with an Origin, the allow-list decides");
}

/*
 * The request head as libmicrohttpd 0.9.75 leaves it (http_rules_head_*): parsed in place, every
 * line end (LF or CR LF) written over with NULs, the method's space and the one before the version
 * too, each header's colon, blanks after the colon skipped, a value as long as its strlen. A folded
 * line makes 0.9.75 copy the header's name elsewhere: here, into moved[].
 */
struct head_field {
    const char *name, *value;
};

struct head {
    char buf[512];
    char moved[64];
    const char *method, *target, *version;
    size_t target_len, size;
    struct head_field f[8];
    size_t n;
};

/* One line of h->buf from *at: its start, its length in *line_len; *at moves past its end. */
static char *
head_line(struct head *h, size_t *at, size_t len, size_t *line_len)
{
    char *line = h->buf + *at;
    for (size_t i = *at; i < len; i++) {
        if (h->buf[i] == '\n' || (h->buf[i] == '\r' && i + 1 < len && h->buf[i + 1] == '\n')) {
            *line_len = i - *at;
            *at = i + 1 + (h->buf[i] == '\r');
            memset(h->buf + i, 0, *at - i);
            return line;
        }
    }
    cr_assert_fail("no line end");
    return NULL;
}

static void
head_parse(struct head *h, const char *raw, size_t len)
{
    memset(h, 0, sizeof(*h));
    cr_assert_lt(len, sizeof(h->buf));
    memcpy(h->buf, raw, len);
    size_t at = 0, line_len;
    char *line = head_line(h, &at, len, &line_len);
    char *sp = memchr(line, ' ', line_len);
    *sp = '\0';
    h->method = line;
    char *target = sp + 1;
    while (*target == ' ')
        target++;
    char *last = line + line_len - 1; /* the version is found from the back, as 0.9.75 does */
    while (*last != ' ')
        last--;
    *last = '\0';
    h->target = target;
    h->target_len = strlen(target);
    h->version = last + 1;
    for (;;) {
        line = head_line(h, &at, len, &line_len);
        if (line[0] == '\0')
            break;
        if (line[0] == ' ' || line[0] == '\t') {
            /* 0.9.75 joins the continuation to the previous header's name, elsewhere. */
            snprintf(h->moved, sizeof(h->moved), "%s%s", h->f[h->n - 1].name, line + 1);
            h->f[h->n - 1].name = h->moved;
            continue;
        }
        char *colon = strchr(line, ':');
        cr_assert_not_null(colon);
        *colon++ = '\0';
        while (*colon == ' ' || *colon == '\t')
            colon++;
        h->f[h->n++] = (struct head_field){ line, colon };
    }
    h->size = at;
}

/* The refusal for raw (len bytes, NULs included), or NULL. */
static const char *
head_refusal(const char *raw, size_t len)
{
    static struct head h;
    head_parse(&h, raw, len);
    struct http_rules_head r;
    http_rules_head_start(&r, h.method, h.target, h.target_len, h.version, h.size);
    for (size_t i = 0; i < h.n; i++)
        http_rules_head_field(&r, h.f[i].name, strlen(h.f[i].name), h.f[i].value,
                              strlen(h.f[i].value));
    return http_rules_head_refusal(&r);
}

#define HEAD(s) head_refusal(s, sizeof(s) - 1)

Test(http_rules, head_clean)
{
    cr_expect_null(HEAD("POST /mcp?a=b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"));
    cr_expect_null(HEAD("GET / HTTP/1.1\nHost: x\nAccept: */*\n\n"), "bare LF line ends");
    cr_expect_null(HEAD("GET   /a%20b  HTTP/1.1\r\nX-Empty:\r\nX-Blanks: \t v \t\r\n\r\n"),
                   "blanks around the target, an empty value, blanks around a value");
    cr_expect_null(HEAD("GET / HTTP/1.0\r\n\r\n"), "no header at all");
    cr_expect_null(HEAD("GET / HTTP/1.1\r\nHost: x\n\r\n"), "mixed line ends");
}

/* A NUL inside a value hides what follows it from every reader of the value. */
Test(http_rules, head_nul)
{
    const char *nul = "a NUL in a header value";
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nX-A: b\0c\r\nHost: x\r\n\r\n"), nul);
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nHost: x\0.evil\r\n\r\n"), nul, "the last header");
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nX-A: b\0\r\n\r\n"), nul, "just before CR LF");
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\nX-A: \0b\nHost: x\n\n"), nul, "a value's first byte");
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nX-A:\0 b\r\n\r\n"), nul, "right after the colon");
    cr_expect_str_eq(HEAD("GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n"), "a NUL in the request line");
    cr_expect_str_eq(HEAD("GE\0T / HTTP/1.1\r\nHost: x\r\n\r\n"), "a NUL in the request line");
    /* The one case the parsed head cannot show: NUL LF reads as CR LF (SECURITY.md). */
    cr_expect_null(HEAD("GET / HTTP/1.1\r\nX-A: b\0\nHost: x\r\n\r\n"));
}

Test(http_rules, head_malformed)
{
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nHost : x\r\n\r\n"),
                     "whitespace between a header name and its colon");
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nX-A\t: b\r\n\r\n"),
                     "whitespace between a header name and its colon");
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nX-A: b\r\n c\r\nHost: x\r\n\r\n"),
                     "a header folded over more than one line");
    struct http_rules_head r;
    http_rules_head_start(&r, "GET", NULL, 0, "HTTP/1.1", 0);
    cr_expect_str_eq(http_rules_head_refusal(&r), "a request head that cannot be checked");
}

/* Headers two parsers could read two ways are refused, whatever the layout. */
Test(http_rules, head_duplicates)
{
    cr_expect_str_eq(HEAD("GET / HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n"),
                     "more than one Host header");
    cr_expect_str_eq(HEAD("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
                     "more than one Content-Length header");
    cr_expect_str_eq(
        HEAD("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        "Content-Length together with Transfer-Encoding");
    cr_expect_null(HEAD("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
}

/* A body over max_body_bytes: drained up to max_body_bytes + 16 MiB, unless answered at once. */
Test(http_rules, drain)
{
    uint64_t max = 4194304;
    cr_expect_eq(http_rules_drain_bytes(max), max + 16u * 1024u * 1024u);
    cr_expect(http_rules_drain(max + 1, NULL, max));
    cr_expect(http_rules_drain(http_rules_drain_bytes(max), NULL, max));
    cr_expect_not(http_rules_drain(http_rules_drain_bytes(max) + 1, NULL, max),
                  "longer than the drain: answered at once, then closed");
    cr_expect_not(http_rules_drain(max + 1, "100-continue", max), "the client waits for it");
    cr_expect_not(http_rules_drain(max + 1, "100-Continue", max));
    cr_expect(http_rules_drain(max + 1, "something-else", max));
}
