/* SPDX-License-Identifier: MIT */
/*
 * Bounded byte buffer: every instance has its ceiling from the config (curl dynbuf). Growth doubles
 * so appends are amortised O(1); consumption is an offset, reclaimed by buf_compact.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
buf_init(struct buf *b, size_t max)
{
    b->data = NULL;
    b->off = b->len = b->cap = 0;
    b->max = max;
}

void
buf_clear(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

void
buf_reset(struct buf *b)
{
    b->off = b->len = 0;
}

void
buf_compact(struct buf *b)
{
    if (b->off == 0)
        return;
    size_t used = b->len - b->off;
    if (used)
        memmove(b->data, b->data + b->off, used);
    b->off = 0;
    b->len = used;
}

int
buf_reserve(struct buf *b, size_t n)
{
    if (n > b->max || b->len - b->off > b->max - n)
        return -1;
    if (b->cap - b->len >= n)
        return 0;
    buf_compact(b);
    if (b->cap - b->len >= n)
        return 0;
    size_t want = b->len + n;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
    return 0;
}

int
buf_append(struct buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) == -1)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void
buf_consume(struct buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0 || buf_reserve(b, (size_t)n + 1) == -1) {
        va_end(again);
        return -1;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
    va_end(again);
    b->len += (size_t)n;
    return 0;
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void
buf_out_printf(struct buf_out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    o->full = buf_vprintf(&o->b, fmt, ap) == -1;
    va_end(ap);
}

void
buf_out_raw(struct buf_out *o, const void *p, size_t n)
{
    if (!o->full)
        o->full = buf_append(&o->b, p, n) == -1;
}

void
buf_out_item_open(const struct buf_out *o, struct buf_out *one, size_t max, size_t keep)
{
    size_t used = buf_used(&o->b);
    one->full = false;
    buf_init(&one->b, used + keep < max ? max - used - keep : 0);
}

bool
buf_out_item_close(struct buf_out *o, struct buf_out *one)
{
    bool fits = !one->full && !o->full;
    if (fits)
        buf_out_raw(o, buf_head(&one->b), buf_used(&one->b));
    buf_clear(&one->b);
    return fits;
}
