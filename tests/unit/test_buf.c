/* SPDX-License-Identifier: MIT */
/*
 * buf: init, append, the ceiling (a refused append or reserve leaves the buffer untouched),
 * reserve, consume and compact, doubling growth, reset and reuse after clear, through buf.h only.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "buf.h"

TestSuite(buf, .timeout = 30);

/* The live bytes are exactly want. */
static void
expect_bytes(const struct buf *b, const char *want)
{
    size_t n = strlen(want);
    cr_assert_eq(buf_used(b), n, "used %zu, want %zu", buf_used(b), n);
    if (n > 0)
        cr_assert(memcmp(buf_head(b), want, n) == 0, "content \"%.*s\", want \"%s\"",
                  (int)buf_used(b), buf_head(b), want);
}

static void
expect_same(const struct buf *a, const struct buf *b)
{
    cr_assert_eq(a->data, b->data);
    cr_assert_eq(a->off, b->off);
    cr_assert_eq(a->len, b->len);
    cr_assert_eq(a->cap, b->cap);
    cr_assert_eq(a->max, b->max);
}

Test(buf, init_is_empty)
{
    struct buf b;
    memset(&b, 0x5a, sizeof b);
    buf_init(&b, 100);
    cr_assert_null(b.data);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    cr_assert_eq(b.max, 100);
    cr_assert_eq(buf_used(&b), 0);
    buf_clear(&b);
}

Test(buf, append_concatenates)
{
    struct buf b;
    buf_init(&b, 1024);
    cr_assert_eq(buf_append(&b, "hello", 5), 0);
    cr_assert_eq(buf_append(&b, ", ", 2), 0);
    cr_assert_eq(buf_append(&b, "world", 5), 0);
    expect_bytes(&b, "hello, world");
    cr_assert_geq(b.cap, b.len);
    buf_clear(&b);
}

Test(buf, append_zero_bytes)
{
    struct buf b;
    buf_init(&b, 4);
    cr_assert_eq(buf_append(&b, NULL, 0), 0);
    cr_assert_eq(buf_used(&b), 0);
    cr_assert_eq(buf_append(&b, "abcd", 4), 0);
    /* Full to the ceiling: zero more bytes still fit. */
    cr_assert_eq(buf_append(&b, "", 0), 0);
    expect_bytes(&b, "abcd");
    buf_clear(&b);
}

Test(buf, append_up_to_ceiling_exactly)
{
    struct buf b;
    buf_init(&b, 10);
    cr_assert_eq(buf_append(&b, "0123456789", 10), 0);
    expect_bytes(&b, "0123456789");
    buf_clear(&b);
}

Test(buf, ceiling_refusal_leaves_buffer_unchanged)
{
    struct buf b;
    buf_init(&b, 10);
    cr_assert_eq(buf_append(&b, "abcdef", 6), 0);
    struct buf before = b;
    cr_assert_eq(buf_append(&b, "ghijk", 5), -1);
    expect_same(&b, &before);
    expect_bytes(&b, "abcdef");
    /* Still usable after a refusal. */
    cr_assert_eq(buf_append(&b, "ghij", 4), 0);
    expect_bytes(&b, "abcdefghij");
    before = b;
    cr_assert_eq(buf_append(&b, "x", 1), -1);
    expect_same(&b, &before);
    expect_bytes(&b, "abcdefghij");
    buf_clear(&b);
}

Test(buf, ceiling_refusal_on_empty_buffer)
{
    struct buf b;
    buf_init(&b, 3);
    cr_assert_eq(buf_append(&b, "abcd", 4), -1);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    /* Sizes near SIZE_MAX must not wrap around the check. */
    cr_assert_eq(buf_reserve(&b, SIZE_MAX), -1);
    cr_assert_eq(buf_reserve(&b, SIZE_MAX - 1), -1);
    cr_assert_null(b.data);
    buf_clear(&b);
}

Test(buf, ceiling_counts_live_bytes_only)
{
    struct buf b;
    buf_init(&b, 10);
    cr_assert_eq(buf_append(&b, "0123456789", 10), 0);
    buf_consume(&b, 4);
    expect_bytes(&b, "456789");
    /* Four bytes were consumed, so four more fit, and not five. */
    struct buf before = b;
    cr_assert_eq(buf_append(&b, "abcde", 5), -1);
    expect_same(&b, &before);
    cr_assert_eq(buf_append(&b, "abcd", 4), 0);
    expect_bytes(&b, "456789abcd");
    buf_clear(&b);
}

Test(buf, reserve_gives_room)
{
    struct buf b;
    buf_init(&b, 4096);
    cr_assert_eq(buf_reserve(&b, 1000), 0);
    cr_assert_not_null(b.data);
    cr_assert_geq(b.cap - b.len, 1000);
    cr_assert_eq(buf_used(&b), 0, "reserve must not change the content");
    /* The caller writes into the room and commits by moving len, as upstream.c does. */
    memcpy(b.data + b.len, "xyz", 3);
    b.len += 3;
    expect_bytes(&b, "xyz");
    cr_assert_eq(buf_reserve(&b, 0), 0);
    buf_clear(&b);
}

Test(buf, reserve_past_ceiling_refused_unchanged)
{
    struct buf b;
    buf_init(&b, 100);
    cr_assert_eq(buf_append(&b, "abc", 3), 0);
    struct buf before = b;
    cr_assert_eq(buf_reserve(&b, 98), -1);
    expect_same(&b, &before);
    cr_assert_eq(buf_reserve(&b, 97), 0);
    cr_assert_geq(b.cap - b.len, 97);
    expect_bytes(&b, "abc");
    buf_clear(&b);
}

Test(buf, consume_prefix_advances_head)
{
    struct buf b;
    buf_init(&b, 1024);
    cr_assert_eq(buf_append(&b, "line1\nline2\n", 12), 0);
    char *data = b.data;
    buf_consume(&b, 6);
    expect_bytes(&b, "line2\n");
    cr_assert_eq(b.data, data, "consume must not move storage");
    cr_assert_eq(b.off, 6);
    cr_assert_eq(buf_head(&b), data + 6);
    buf_clear(&b);
}

Test(buf, consume_everything_resets_offsets)
{
    struct buf b;
    buf_init(&b, 1024);
    cr_assert_eq(buf_append(&b, "abc", 3), 0);
    buf_consume(&b, 3);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(buf_used(&b), 0);
    cr_assert_eq(buf_append(&b, "de", 2), 0);
    expect_bytes(&b, "de");
    cr_assert_eq(b.off, 0);
    buf_clear(&b);
}

Test(buf, compact_moves_live_bytes_to_front)
{
    struct buf b;
    buf_init(&b, 1024);
    cr_assert_eq(buf_append(&b, "0123456789", 10), 0);
    buf_consume(&b, 7);
    size_t cap = b.cap;
    buf_compact(&b);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 3);
    cr_assert_eq(b.cap, cap);
    expect_bytes(&b, "789");
    /* Nothing to do at offset 0. */
    buf_compact(&b);
    expect_bytes(&b, "789");
    buf_clear(&b);
}

Test(buf, compact_on_empty_and_unallocated)
{
    struct buf b;
    buf_init(&b, 16);
    buf_compact(&b);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 0);
    buf_clear(&b);
}

Test(buf, reserve_compacts_before_growing)
{
    struct buf b;
    buf_init(&b, 4096);
    char fill[256];
    memset(fill, 'a', sizeof fill);
    cr_assert_eq(buf_append(&b, fill, sizeof fill), 0);
    cr_assert_eq(b.cap, 256, "first allocation is 256 bytes");
    cr_assert_eq(buf_append(&b, "tail", 4), 0);
    size_t cap = b.cap;
    /* Consume most of it: the tail room is short but the front has space. */
    buf_consume(&b, 250);
    size_t used = buf_used(&b);
    cr_assert_eq(buf_reserve(&b, cap - used), 0);
    cr_assert_eq(b.cap, cap, "compaction should have made room without growing");
    cr_assert_eq(b.off, 0);
    cr_assert(memcmp(buf_head(&b), "aaaaaatail", 10) == 0);
    buf_clear(&b);
}

Test(buf, growth_doubles_and_keeps_content)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    size_t total = 100000;
    size_t last_cap = 0;
    for (size_t i = 0; i < total; i++) {
        char c = (char)('a' + i % 26);
        cr_assert_eq(buf_append(&b, &c, 1), 0, "append %zu", i);
        if (b.cap != last_cap) {
            cr_assert_geq(b.cap, 256);
            cr_assert_eq(b.cap & (b.cap - 1), 0, "cap %zu is not a power of two", b.cap);
            if (last_cap != 0)
                cr_assert_eq(b.cap, last_cap * 2, "cap %zu after %zu", b.cap, last_cap);
            last_cap = b.cap;
        }
    }
    cr_assert_eq(buf_used(&b), total);
    for (size_t i = 0; i < total; i++)
        cr_assert_eq(buf_head(&b)[i], (char)('a' + i % 26), "byte %zu", i);
    buf_clear(&b);
}

Test(buf, large_append_grows_at_once)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    static char big[70000];
    memset(big, 'q', sizeof big);
    cr_assert_eq(buf_append(&b, "x", 1), 0);
    cr_assert_eq(buf_append(&b, big, sizeof big), 0);
    cr_assert_geq(b.cap, sizeof big + 1);
    cr_assert_eq(buf_used(&b), sizeof big + 1);
    cr_assert_eq(buf_head(&b)[0], 'x');
    cr_assert_eq(buf_head(&b)[sizeof big], 'q');
    buf_clear(&b);
}

Test(buf, reset_empties_but_keeps_storage)
{
    struct buf b;
    buf_init(&b, 1024);
    cr_assert_eq(buf_append(&b, "abcdef", 6), 0);
    buf_consume(&b, 2);
    char *data = b.data;
    size_t cap = b.cap;
    buf_reset(&b);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.data, data);
    cr_assert_eq(b.cap, cap);
    cr_assert_eq(b.max, 1024);
    cr_assert_eq(buf_append(&b, "xy", 2), 0);
    expect_bytes(&b, "xy");
    cr_assert_eq(b.data, data);
    buf_clear(&b);
}

Test(buf, clear_then_reuse)
{
    struct buf b;
    buf_init(&b, 64);
    cr_assert_eq(buf_append(&b, "abc", 3), 0);
    buf_clear(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.off, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    buf_clear(&b); /* twice is harmless */
    buf_init(&b, 8);
    cr_assert_eq(buf_append(&b, "12345678", 8), 0);
    cr_assert_eq(buf_append(&b, "9", 1), -1);
    expect_bytes(&b, "12345678");
    buf_clear(&b);
}

Test(buf, printf_appends_formatted_text_and_refuses_past_the_ceiling)
{
    struct buf b;
    buf_init(&b, 16);
    cr_assert_eq(buf_printf(&b, "%s=%d", "ab", 42), 0);
    expect_bytes(&b, "ab=42");
    cr_assert_eq(buf_printf(&b, ",%05u", 7u), 0);
    expect_bytes(&b, "ab=42,00007");
    /* 11 bytes used: 4 more fit with room for vsnprintf's NUL, 5 do not. */
    char *data = b.data;
    size_t len = b.len;
    cr_assert_eq(buf_printf(&b, "%s", "xxxxx"), -1);
    cr_assert_eq(b.data, data);
    cr_assert_eq(b.len, len, "a refused printf appends nothing");
    cr_assert_eq(buf_printf(&b, "%s", "yyyy"), 0);
    expect_bytes(&b, "ab=42,00007yyyy");
    buf_clear(&b);
    /* Longer than any fixed scratch buffer: formatted straight into the buffer. */
    buf_init(&b, 1 << 20);
    cr_assert_eq(buf_printf(&b, "%0*d", 5000, 1), 0);
    cr_assert_eq(buf_used(&b), 5000);
    cr_assert_eq(buf_head(&b)[4999], '1');
    cr_assert_eq(buf_head(&b)[0], '0');
    buf_clear(&b);
}
