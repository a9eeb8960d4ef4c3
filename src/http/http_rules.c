/* SPDX-License-Identifier: MIT */
/*
 * Header rules as pure functions of strings and addresses: Accept, Content-Type, Host and Origin
 * allow-lists, loopback peers, the layout of a parsed request head, how much of a refused body is
 * drained. No MHD, no config object: unit-tested in tests/unit/test_http_rules.c.
 */
#include "http_rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string.h>
#include <strings.h>

#include "util.h"

/* Does an Accept header admit type ("text/event-stream")? Wildcards count; q-values are ignored. */
bool
http_rules_accepts(const char *accept, const char *type)
{
    const char *slash = strchr(type, '/');
    size_t major = (size_t)(slash - type);
    for (const char *p = accept; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t len = (size_t)(p - start);
        if (util_span_ieq(start, len, type) || util_span_ieq(start, len, "*/*")
            || (len == major + 2 && strncasecmp(start, type, major + 1) == 0
                && start[major + 1] == '*'))
            return true;
        while (*p && *p != ',')
            p++;
    }
    return false;
}

bool
http_rules_is_json(const char *ctype)
{
    if (ctype == NULL || !util_has_prefix_i(ctype, "application/json"))
        return false;
    char next = ctype[strlen("application/json")];
    return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* Host without its port: "localhost:8080" -> "localhost", "[::1]:80" -> "[::1]". */
static size_t
http_rules_host_len(const char *host)
{
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        return end ? (size_t)(end - host) + 1 : strlen(host);
    }
    const char *colon = strchr(host, ':');
    return colon ? (size_t)(colon - host) : strlen(host);
}

bool
http_rules_host_allowed(char *const *allowed, const char *host)
{
    if (host == NULL)
        return false;
    size_t hl = http_rules_host_len(host);
    for (char *const *a = allowed; a && *a; a++) {
        if (strcmp(*a, "*") == 0 || util_span_ieq(host, strlen(host), *a)
            || util_span_ieq(host, hl, *a))
            return true;
    }
    return false;
}

/* "http://localhost:*" matches that scheme and host with any numeric port (or none). */
static bool
http_rules_origin_matches(const char *origin, const char *pattern)
{
    if (strcmp(pattern, "*") == 0)
        return true;
    size_t plen = strlen(pattern);
    if (plen >= 2 && strcmp(pattern + plen - 2, ":*") == 0) {
        size_t base = plen - 2;
        if (strlen(origin) < base || strncasecmp(origin, pattern, base) != 0)
            return false;
        const char *port = origin + base;
        if (*port == '\0')
            return true;
        if (*port++ != ':' || *port == '\0')
            return false;
        for (; *port; port++)
            if (*port < '0' || *port > '9')
                return false;
        return true;
    }
    return util_span_ieq(origin, strlen(origin), pattern);
}

bool
http_rules_origin_allowed(char *const *allowed, const char *origin)
{
    if (origin == NULL)
        return true; /* non-browser clients send none */
    for (char *const *a = allowed; a && *a; a++)
        if (http_rules_origin_matches(origin, *a))
            return true;
    return false;
}

bool
http_rules_loopback(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

static int
http_rules_b64(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

bool
http_rules_mcp_value(const char *h, char *out, size_t cap, size_t *len)
{
    static const char open[] = "=?base64?", close[] = "?=";
    /* Optional whitespace around a field value is not part of it (RFC 9110 section 5.5). */
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (cap == 0)
        return false;
    if (n < sizeof open - 1 + sizeof close - 1 || strncmp(h, open, sizeof open - 1) != 0
        || strncmp(h + n - (sizeof close - 1), close, sizeof close - 1) != 0) {
        /* Plain: printable ASCII only (the revision puts anything else in the base64 form). */
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)h[i] < 0x20 || (unsigned char)h[i] > 0x7e)
                return false;
        if (n >= cap)
            return false;
        memcpy(out, h, n);
        out[n] = '\0';
        *len = n;
        return true;
    }
    const char *b = h + sizeof open - 1;
    size_t blen = n - (sizeof open - 1) - (sizeof close - 1), o = 0;
    unsigned acc = 0, bits = 0, pad = 0;
    for (size_t i = 0; i < blen; i++) {
        if (b[i] == '=') {
            pad++;
            continue;
        }
        int v = http_rules_b64((unsigned char)b[i]);
        if (v < 0 || pad > 0)
            return false;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= cap)
                return false;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (pad > 2 || (blen - pad) % 4 == 1 || memchr(out, '\0', o) != NULL)
        return false;
    out[o] = '\0';
    *len = o;
    return true;
}

bool
http_rules_fetch_site_allowed(const char *origin, const char *fetch_site)
{
    if (origin != NULL || fetch_site == NULL)
        return true; /* Origin decides (the allow-list), or not a browser */
    return strcasecmp(fetch_site, "same-origin") == 0 || strcasecmp(fetch_site, "none") == 0;
}

/*
 * The head's bytes [from, to) are line ends and nothing else: lines of them, each LF or CR LF,
 * which the parser overwrote with one or two NULs. Read only when short enough to be that.
 */
static bool
http_rules_head_gap(const struct http_rules_head *h, uintptr_t from, uintptr_t to, unsigned lines)
{
    if (from < h->start || to > h->end || to < from + lines || to > from + 2u * lines)
        return false;
    for (const char *p = (const char *)from; p < (const char *)to; p++)
        if (*p != '\0')
            return false;
    return true;
}

static bool
http_rules_head_inside(const struct http_rules_head *h, const char *p)
{
    return (uintptr_t)p >= h->start && (uintptr_t)p < h->end;
}

void
http_rules_head_start(struct http_rules_head *h, const char *method, const char *target,
                      size_t target_len, const char *version, size_t size)
{
    *h = (struct http_rules_head){ .start = (uintptr_t)method, .end = (uintptr_t)method + size };
    if (size == 0 || !http_rules_head_inside(h, version) || !http_rules_head_inside(h, target)) {
        h->refusal = "a request head that cannot be checked";
        return;
    }
    /* "METHOD SP+ target SP version": a space became the method's NUL, the others were skipped. */
    const char *p = method + strlen(method);
    const char *v = version;
    if ((uintptr_t)p >= (uintptr_t)target || (uintptr_t)target + target_len + 1 != (uintptr_t)v) {
        h->refusal = "a NUL in the request line";
        return;
    }
    for (p++; p < target; p++)
        if (*p != ' ') {
            h->refusal = "a NUL in the request line";
            return;
        }
    h->at = (uintptr_t)version + strlen(version);
}

void
http_rules_head_field(struct http_rules_head *h, const char *name, size_t name_len,
                      const char *value, size_t value_len)
{
    h->hosts += util_span_ieq(name, name_len, "Host");
    h->lengths += util_span_ieq(name, name_len, "Content-Length");
    h->transfer |= util_span_ieq(name, name_len, "Transfer-Encoding");
    if (h->refusal != NULL)
        return;
    if (!http_rules_head_inside(h, name)) {
        /* 0.9.75 copies a folded header elsewhere (and joins the next line to its name). */
        h->refusal = "a header folded over more than one line";
        return;
    }
    if (!http_rules_head_gap(h, h->at, (uintptr_t)name, 1)) {
        h->refusal = "a NUL in a header value"; /* bytes hidden behind the previous line's NUL */
        return;
    }
    if (memchr(name, ' ', name_len) != NULL || memchr(name, '\t', name_len) != NULL) {
        h->refusal = "whitespace between a header name and its colon";
        return;
    }
    /* "name:" then blanks, skipped: the colon became the name's NUL. */
    const char *p = name + name_len;
    if (!http_rules_head_inside(h, value) || (uintptr_t)value <= (uintptr_t)p) {
        h->refusal = "a header folded over more than one line";
        return;
    }
    for (p++; p < value; p++)
        if (*p != ' ' && *p != '\t') {
            h->refusal = "a malformed header line";
            return;
        }
    h->at = (uintptr_t)value + value_len;
}

const char *
http_rules_head_refusal(struct http_rules_head *h)
{
    /* The last line's end, then the empty line's. */
    if (h->refusal == NULL && !http_rules_head_gap(h, h->at, h->end, 2))
        h->refusal = "a NUL in a header value";
    if (h->hosts > 1)
        return "more than one Host header";
    if (h->lengths > 1)
        return "more than one Content-Length header";
    if (h->lengths > 0 && h->transfer)
        return "Content-Length together with Transfer-Encoding";
    return h->refusal;
}

uint64_t
http_rules_drain_bytes(uint64_t max_body_bytes)
{
    return max_body_bytes + HTTP_RULES_DRAIN_EXTRA_BYTES;
}

bool
http_rules_drain(uint64_t length, const char *expect, uint64_t max_body_bytes)
{
    if (expect != NULL && strcasecmp(expect, "100-continue") == 0)
        return false;
    return length <= http_rules_drain_bytes(max_body_bytes);
}
