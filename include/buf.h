/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_BUF_H
#define MCPGW_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * A byte buffer with a ceiling set at init (curl's dynbuf). The live bytes are data[off, len);
 * consuming a prefix only advances off, and the space is reclaimed by buf_compact(), so taking many
 * lines out of one read costs no memmove per line. An all-zero struct is not valid: use buf_init.
 */
struct buf {
    char *data;
    size_t off;
    size_t len;
    size_t cap;
    size_t max; /* ceiling on len - off */
};

void buf_init(struct buf *b, size_t max);
void buf_clear(struct buf *b); /* frees the storage; the buf may be reused after buf_init */
/* Appends n bytes; -1 (and nothing appended) when the live size would pass the ceiling. */
int buf_append(struct buf *b, const void *p, size_t n) MUSTCHECK;
/* Appends the formatted text (no NUL); -1 with the buffer untouched past the ceiling. */
int buf_printf(struct buf *b, const char *fmt, ...) PRINTF(2, 3) MUSTCHECK;
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) PRINTF(2, 0) MUSTCHECK;
/* Ensures room for n more bytes at data+len; -1 past the ceiling. */
int buf_reserve(struct buf *b, size_t n) MUSTCHECK;
void buf_consume(struct buf *b, size_t n);
void buf_compact(struct buf *b);
void buf_reset(struct buf *b);

/*
 * A writer that stops at its buffer's ceiling: after the first write that does not fit, nothing
 * more is written and full stays set, so a document is cut at a write boundary the caller knows
 * of, never by a later, smaller write slipping in (the admin views).
 */
struct buf_out {
    struct buf b;
    bool full;
};
void buf_out_printf(struct buf_out *o, const char *fmt, ...) PRINTF(2, 3);
void buf_out_raw(struct buf_out *o, const void *p, size_t n);
/*
 * One item of a list into o, whole or not at all: buf_out_item_open gives *one the room o may
 * still take of max bytes, less keep for what closes the list; buf_out_item_close appends *one to
 * o when both fit (true; false: the item is left out) and frees it.
 */
void buf_out_item_open(const struct buf_out *o, struct buf_out *one, size_t max, size_t keep);
bool buf_out_item_close(struct buf_out *o, struct buf_out *one);

static inline size_t
buf_used(const struct buf *b)
{
    return b->len - b->off;
}

/* No offset is added to the null pointer of a buffer that never held anything (off is 0). */
static inline char *
buf_head(const struct buf *b)
{
    return b->off == 0 ? b->data : b->data + b->off;
}

#endif
