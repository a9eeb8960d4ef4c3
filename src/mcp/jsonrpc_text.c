/* SPDX-License-Identifier: MIT */
/*
 * The text inside JSON strings: \u escapes read, and a string the scanner (jsonrpc.c) accepted
 * decoded to UTF-8. Part of the jsonrpc module (src/mcp/jsonrpc_int.h).
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "jsonrpc_int.h"

static int
jsonrpc_hexval(unsigned c)
{
    if (c - '0' < 10)
        return (int)(c - '0');
    c |= 0x20;
    if (c - 'a' < 6)
        return (int)(c - 'a' + 10);
    return -1;
}

long
jsonrpc_hex4(const unsigned char *s, const unsigned char *end)
{
    long v = 0;

    if (end - s < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int d = jsonrpc_hexval(s[i]);
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static void
jsonrpc_put_utf8(char *out, size_t *o, unsigned long cp)
{
    size_t n = *o;

    if (cp < 0x80) {
        out[n++] = (char)cp;
    } else if (cp < 0x800) {
        out[n++] = (char)(0xC0 | cp >> 6);
        out[n++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[n++] = (char)(0xE0 | cp >> 12);
        out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[n++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[n++] = (char)(0xF0 | cp >> 18);
        out[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
        out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[n++] = (char)(0x80 | (cp & 0x3F));
    }
    *o = n;
}

bool
jsonrpc_unescape(const unsigned char *s, size_t len, char *out, size_t cap, size_t *outlen)
{
    const unsigned char *end = s + len;
    size_t o = 0;

    while (s < end) {
        const unsigned char *bs = memchr(s, '\\', (size_t)(end - s));
        size_t run = (size_t)((bs ? bs : end) - s);
        unsigned long cp;

        if (run > cap - o)
            return false;
        memcpy(out + o, s, run);
        o += run;
        if (bs == NULL)
            break;
        s = bs + 2;
        switch (bs[1]) {
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u':
            cp = (unsigned long)jsonrpc_hex4(s, end);
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10)
                     + ((unsigned long)jsonrpc_hex4(s + 2, end) - 0xDC00);
                s += 6;
            }
            break;
        default: /* '"', '\\', '/' */
            cp = bs[1];
            break;
        }
        if ((cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u) > cap - o)
            return false;
        jsonrpc_put_utf8(out, &o, cp);
    }
    *outlen = o;
    return true;
}
