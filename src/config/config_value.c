/* SPDX-License-Identifier: MIT */
/*
 * The config module's value parsers: words split like a shell without expansion, comma lists,
 * names, paths, texts, URLs and HOST:PORT, each strict and each reporting a static phrase. Pure:
 * no INI, no struct config.
 */
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

void
config_strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static void
config_strv_push(char ***v, size_t *n, const char *s, size_t len)
{
    *v = xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = xstrndup(s, len);
    (*v)[*n] = NULL;
}

/* ---- value parsers: each returns 0, or -1 with a static phrase in *errstr ---- */

bool
config_is_name(const char *s, size_t len)
{
    if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

static bool
config_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

/*
 * Splits s into words as a POSIX shell would, without any expansion: blanks separate words,
 * single quotes are literal, double quotes honour only \" \\ \$ \` and \newline, a backslash
 * outside quotes takes the next character literally. $, *, ~, #, | and the like are ordinary
 * characters. Returns a NULL-terminated vector (possibly empty) or NULL.
 */
char **
config_split_words(const char *s, const char **errstr)
{
    char *w = xmalloc(strlen(s) + 1);
    size_t wl = 0, n = 0;
    char **v = NULL;
    bool in_word = false;
    const char *p = s;
    for (;;) {
        char c = *p;
        if (c == '\0' || config_is_blank(c)) {
            if (in_word)
                config_strv_push(&v, &n, w, wl);
            wl = 0;
            in_word = false;
            if (c == '\0')
                break;
            p++;
        } else if (c == '\\' && p[1] == '\n') {
            p += 2;
        } else if (c == '\\') {
            in_word = true;
            w[wl++] = p[1] ? p[1] : '\\'; /* a trailing backslash stays, as in sh -c */
            p += p[1] ? 2 : 1;
        } else if (c == '\'') {
            const char *q = strchr(p + 1, '\'');
            if (q == NULL)
                goto unterminated;
            in_word = true;
            memcpy(w + wl, p + 1, (size_t)(q - p - 1));
            wl += (size_t)(q - p - 1);
            p = q + 1;
        } else if (c == '"') {
            in_word = true;
            for (p++; *p != '"'; p++) {
                if (*p == '\0')
                    goto unterminated;
                if (*p == '\\' && p[1] != '\0' && strchr("\"\\$`\n", p[1]) != NULL) {
                    p++;
                    if (*p == '\n')
                        continue;
                }
                w[wl++] = *p;
            }
            p++;
        } else {
            in_word = true;
            w[wl++] = c;
            p++;
        }
    }
    free(w);
    return v ? v : xcalloc(1, sizeof *v);
unterminated:
    free(w);
    config_strv_free(v);
    *errstr = "unterminated quote";
    return NULL;
}

/* Comma separated entries, trimmed; empty entries are skipped, so "" is an empty list. */
char **
config_split_list(const char *s, const char **errstr)
{
    char **v = xcalloc(1, sizeof *v);
    size_t n = 0;
    while (*s) {
        const char *end = strchr(s, ',');
        if (end == NULL)
            end = s + strlen(s);
        const char *b = s, *e = end;
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        for (const char *q = b; q < e; q++) {
            if (isspace((unsigned char)*q) || iscntrl((unsigned char)*q)) {
                config_strv_free(v);
                *errstr = "entries must not contain spaces";
                return NULL;
            }
        }
        if (e > b)
            config_strv_push(&v, &n, b, (size_t)(e - b));
        s = *end ? end + 1 : end;
    }
    return v;
}

int
config_check_path(const char *s, const char **errstr)
{
    if (s[0] != '/') {
        *errstr = "must start with '/'";
        return -1;
    }
    for (const char *p = s; *p; p++) {
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p) || *p == '?' || *p == '#') {
            *errstr = "must not contain spaces, '?' or '#'";
            return -1;
        }
    }
    if (strcmp(s, "/healthz") == 0) {
        *errstr = "/healthz is reserved for the health check";
        return -1;
    }
    return 0;
}

/* Visible ASCII without spaces, quotes or backslashes (it may appear in a quoted header value). */
int
config_check_text(const char *s, const char **errstr)
{
    for (const char *p = s; *p; p++)
        if (*p < 0x21 || *p > 0x7e || *p == '"' || *p == '\\') {
            *errstr = "must be visible ASCII without spaces, quotes or backslashes";
            return -1;
        }
    return 0;
}

/* "" or http(s)://HOST[:PORT] with no path, query or trailing slash. */
int
config_check_url(const char *s, const char **errstr)
{
    if (*s == '\0')
        return 0;
    const char *host = util_has_prefix_i(s, "https://")  ? s + 8
                       : util_has_prefix_i(s, "http://") ? s + 7
                                                         : NULL;
    if (host == NULL || *host == '\0' || config_check_text(s, errstr) == -1
        || strpbrk(host, "/?#@") != NULL) {
        *errstr = "must be http(s)://HOST[:PORT], with no path or trailing slash";
        return -1;
    }
    return 0;
}

/* "host:port" or "[v6addr]:port"; the host is returned without brackets. */
int
config_parse_listen(const char *s, uint64_t max_port, char **host, uint16_t *port,
                    const char **errstr)
{
    const char *h, *colon;
    size_t hlen;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':') {
            *errstr = "must be HOST:PORT, IPv6 as [ADDR]:PORT";
            return -1;
        }
        h = s + 1;
        hlen = (size_t)(rb - h);
        colon = rb + 1;
        char addr[INET6_ADDRSTRLEN + 16];
        struct in6_addr in6;
        if (hlen == 0 || hlen >= sizeof addr) {
            *errstr = "host is not a valid IPv6 address";
            return -1;
        }
        memcpy(addr, h, hlen);
        addr[hlen] = '\0';
        if (inet_pton(AF_INET6, addr, &in6) != 1) {
            *errstr = "host is not a valid IPv6 address";
            return -1;
        }
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            *errstr = "must be HOST:PORT, IPv6 as [ADDR]:PORT";
            return -1;
        }
        h = s;
        hlen = (size_t)(colon - s);
        if (hlen == 0) {
            *errstr = "host is empty";
            return -1;
        }
        if (memchr(h, ':', hlen) != NULL) {
            *errstr = "an IPv6 host must be in brackets, as [::1]:PORT";
            return -1;
        }
        for (size_t i = 0; i < hlen; i++) {
            if (!isalnum((unsigned char)h[i]) && strchr("._-", h[i]) == NULL) {
                *errstr = "host must be a name or an address";
                return -1;
            }
        }
    }
    uint64_t p;
    const char *perr;
    if (util_parse_u64(colon + 1, 0, max_port, &p, &perr) == -1) {
        *errstr = "port must be 0..65535";
        return -1;
    }
    *host = xstrndup(h, hlen);
    *port = (uint16_t)p;
    return 0;
}
