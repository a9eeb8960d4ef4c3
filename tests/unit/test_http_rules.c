/* SPDX-License-Identifier: MIT */
/*
 * http_rules: Accept (wildcards, parameters, case), Content-Type, Host with and without port
 * (IPv6 brackets), Origin patterns with a port wildcard, loopback addresses. Through
 * http_rules.h only.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <string.h>

#include <criterion/criterion.h>

#include "http_rules.h"

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

/* Mirrored header values (2026-07-28, checklist T-84): plain, base64 form, blanks around. */
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

/* Finding F7: a browser's cross-site request without Origin is told apart by Sec-Fetch-Site. */
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
