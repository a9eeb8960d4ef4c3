/* SPDX-License-Identifier: MIT */
/*
 * msg: refcounted blobs (new, concat, ref, unref) and the msgq FIFO: takes that cross message
 * boundaries with a reader smaller than a message, iovecs and partial advances for writev, the
 * byte and message counts, and that the queue holds (and clear drops) exactly one reference per
 * push, checked through references the test keeps. Through msg.h only.
 */
#include <sys/uio.h>

#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "msg.h"

TestSuite(msg, .timeout = 30);

static struct msg *
msg_str(const char *s)
{
    size_t n = strlen(s);
    struct msg *m = msg_new(n);
    memcpy(m->data, s, n);
    return m;
}

static struct iovec
iov_str(const char *s)
{
    return (struct iovec){ (void *)(uintptr_t)s, strlen(s) };
}

/* Takes exactly want (as a string) with one msgq_take of max bytes. */
static void
take_expect(struct msgq *q, size_t max, const char *want)
{
    char out[256];
    cr_assert_leq(max, sizeof out);
    memset(out, '#', sizeof out);
    size_t n = msgq_take(q, out, max);
    size_t wn = strlen(want);
    cr_assert_eq(n, wn, "took %zu bytes, want %zu (\"%s\")", n, wn, want);
    cr_assert(memcmp(out, want, wn) == 0, "took \"%.*s\", want \"%s\"", (int)n, out, want);
    cr_assert_eq(out[n], '#', "wrote past the count");
}

static void
expect_counts(const struct msgq *q, size_t bytes, size_t count)
{
    cr_assert_eq(q->bytes, bytes, "bytes %zu, want %zu", q->bytes, bytes);
    cr_assert_eq(q->count, count, "count %zu, want %zu", q->count, count);
    if (count == 0) {
        cr_assert_null(q->head);
        cr_assert_null(q->tail);
        cr_assert_eq(q->head_off, 0);
    } else {
        cr_assert_not_null(q->head);
        cr_assert_not_null(q->tail);
        cr_assert_null(q->tail->next);
    }
}

Test(msg, new_has_one_ref_and_nul)
{
    struct msg *m = msg_new(5);
    cr_assert_eq(m->refs, 1);
    cr_assert_eq(m->len, 5);
    cr_assert_eq(m->data[5], '\0', "a spare NUL follows the bytes");
    memcpy(m->data, "hello", 5);
    cr_assert_str_eq(m->data, "hello");
    msg_unref(m);
}

Test(msg, new_empty)
{
    struct msg *m = msg_new(0);
    cr_assert_eq(m->len, 0);
    cr_assert_eq(m->data[0], '\0');
    msg_unref(m);
}

Test(msg, concat_joins_iovecs)
{
    struct iovec iov[4] = { iov_str("event: "), iov_str(""), iov_str("{\"a\":1}"),
                            iov_str("\n\n") };
    struct msg *m = msg_concat(iov, 4);
    cr_assert_eq(m->refs, 1);
    cr_assert_eq(m->len, strlen("event: {\"a\":1}\n\n"));
    cr_assert_str_eq(m->data, "event: {\"a\":1}\n\n");
    msg_unref(m);
}

Test(msg, concat_nothing)
{
    struct msg *m = msg_concat(NULL, 0);
    cr_assert_eq(m->len, 0);
    cr_assert_eq(m->data[0], '\0');
    msg_unref(m);
}

Test(msg, ref_and_unref_count)
{
    struct msg *m = msg_str("x");
    cr_assert_eq(msg_ref(m), m);
    cr_assert_eq(m->refs, 2);
    msg_ref(m);
    cr_assert_eq(m->refs, 3);
    msg_unref(m);
    msg_unref(m);
    cr_assert_eq(m->refs, 1);
    msg_unref(m); /* freed: ASan reports a leak or a double free otherwise */
    msg_unref(NULL);
}

Test(msg, queue_init_is_empty)
{
    struct msgq q;
    memset(&q, 0x5a, sizeof q);
    msgq_init(&q);
    expect_counts(&q, 0, 0);
    char out[4];
    cr_assert_eq(msgq_take(&q, out, sizeof out), 0);
    struct iovec iov[2];
    cr_assert_eq(msgq_iov(&q, iov, 2), 0);
    msgq_clear(&q);
}

Test(msg, push_takes_a_reference)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *m = msg_str("abc");
    msgq_push(&q, m);
    cr_assert_eq(m->refs, 2);
    expect_counts(&q, 3, 1);
    cr_assert_eq(q.head->m, m);
    /* The same message twice: two references, two entries. */
    msgq_push(&q, m);
    cr_assert_eq(m->refs, 3);
    expect_counts(&q, 6, 2);
    take_expect(&q, 6, "abcabc");
    cr_assert_eq(m->refs, 1, "taking everything drops the queue's references");
    expect_counts(&q, 0, 0);
    msg_unref(m);
    msgq_clear(&q);
}

Test(msg, take_partial_across_boundaries)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc"), *b = msg_str("defgh"), *c = msg_str("ij");
    msgq_push(&q, a);
    msgq_push(&q, b);
    msgq_push(&q, c);
    expect_counts(&q, 10, 3);

    /* The reader's max is smaller than the head message. */
    take_expect(&q, 2, "ab");
    expect_counts(&q, 8, 3);
    cr_assert_eq(q.head_off, 2);
    cr_assert_eq(a->refs, 2, "a is still partly queued");

    /* Crosses from a into b. */
    take_expect(&q, 4, "cdef");
    expect_counts(&q, 4, 2);
    cr_assert_eq(a->refs, 1, "a left the queue");
    cr_assert_eq(q.head->m, b);
    cr_assert_eq(q.head_off, 3);

    take_expect(&q, 1, "g");
    expect_counts(&q, 3, 2);

    /* More room than bytes: takes the rest, across b and c. */
    take_expect(&q, 100, "hij");
    expect_counts(&q, 0, 0);
    cr_assert_eq(b->refs, 1);
    cr_assert_eq(c->refs, 1);

    char out[4];
    cr_assert_eq(msgq_take(&q, out, sizeof out), 0);
    msg_unref(a);
    msg_unref(b);
    msg_unref(c);
    msgq_clear(&q);
}

Test(msg, take_exactly_one_message)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc"), *b = msg_str("de");
    msgq_push(&q, a);
    msgq_push(&q, b);
    take_expect(&q, 3, "abc");
    expect_counts(&q, 2, 1);
    cr_assert_eq(q.head->m, b);
    cr_assert_eq(q.head_off, 0);
    cr_assert_eq(a->refs, 1);
    take_expect(&q, 2, "de");
    expect_counts(&q, 0, 0);
    msg_unref(a);
    msg_unref(b);
}

Test(msg, take_zero_max)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc");
    msgq_push(&q, a);
    char out[1];
    cr_assert_eq(msgq_take(&q, out, 0), 0);
    expect_counts(&q, 3, 1);
    cr_assert_eq(q.head_off, 0);
    msgq_clear(&q);
    msg_unref(a);
}

Test(msg, take_byte_by_byte)
{
    struct msgq q;
    msgq_init(&q);
    const char *parts[] = { "one", "", "two", "three", "" };
    struct msg *m[5];
    for (int i = 0; i < 5; i++) {
        m[i] = msg_str(parts[i]);
        msgq_push(&q, m[i]);
    }
    expect_counts(&q, 11, 5);
    char got[32] = "";
    size_t n = 0;
    for (;;) {
        char c;
        size_t k = msgq_take(&q, &c, 1);
        if (k == 0)
            break;
        cr_assert_eq(k, 1);
        cr_assert_lt(n, sizeof got - 1);
        got[n++] = c;
        cr_assert_eq(q.bytes, 11 - n);
    }
    cr_assert_str_eq(got, "onetwothree");
    expect_counts(&q, 0, 0);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(m[i]->refs, 1, "message %d still referenced", i);
        msg_unref(m[i]);
    }
}

Test(msg, empty_messages_between_are_skipped)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("a"), *e = msg_str(""), *b = msg_str("b");
    msgq_push(&q, a);
    msgq_push(&q, e);
    msgq_push(&q, b);
    expect_counts(&q, 2, 3);
    take_expect(&q, 1, "a");
    /* The empty message at the new head is dropped with a. */
    expect_counts(&q, 1, 1);
    cr_assert_eq(e->refs, 1);
    cr_assert_eq(q.head->m, b);
    take_expect(&q, 1, "b");
    expect_counts(&q, 0, 0);
    msg_unref(a);
    msg_unref(e);
    msg_unref(b);
}

Test(msg, iov_lists_pending_bytes)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc"), *b = msg_str("defgh"), *c = msg_str("ij");
    msgq_push(&q, a);
    msgq_push(&q, b);
    msgq_push(&q, c);
    take_expect(&q, 1, "a");

    struct iovec iov[4];
    int n = msgq_iov(&q, iov, 4);
    cr_assert_eq(n, 3);
    cr_assert_eq(iov[0].iov_base, a->data + 1, "the head iovec starts at the read offset");
    cr_assert_eq(iov[0].iov_len, 2);
    cr_assert_eq(iov[1].iov_base, b->data);
    cr_assert_eq(iov[1].iov_len, 5);
    cr_assert_eq(iov[2].iov_base, c->data);
    cr_assert_eq(iov[2].iov_len, 2);

    /* Fewer slots than messages. */
    cr_assert_eq(msgq_iov(&q, iov, 2), 2);
    cr_assert_eq(iov[1].iov_base, b->data);
    cr_assert_eq(msgq_iov(&q, iov, 0), 0);

    /* msgq_iov does not consume. */
    expect_counts(&q, 9, 3);
    msgq_clear(&q);
    msg_unref(a);
    msg_unref(b);
    msg_unref(c);
}

Test(msg, advance_partial_like_a_short_writev)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc"), *b = msg_str("defgh"), *c = msg_str("ij");
    msgq_push(&q, a);
    msgq_push(&q, b);
    msgq_push(&q, c);

    /* writev wrote 5 of 10 bytes: all of a, two bytes of b. */
    msgq_advance(&q, 5);
    expect_counts(&q, 5, 2);
    cr_assert_eq(a->refs, 1);
    cr_assert_eq(q.head->m, b);
    cr_assert_eq(q.head_off, 2);
    struct iovec iov[4];
    cr_assert_eq(msgq_iov(&q, iov, 4), 2);
    cr_assert_eq(iov[0].iov_base, b->data + 2);
    cr_assert_eq(iov[0].iov_len, 3);
    cr_assert_eq(iov[1].iov_base, c->data);

    /* Within the head. */
    msgq_advance(&q, 1);
    expect_counts(&q, 4, 2);
    cr_assert_eq(q.head_off, 3);

    /* Exactly to the end of b. */
    msgq_advance(&q, 2);
    expect_counts(&q, 2, 1);
    cr_assert_eq(q.head->m, c);
    cr_assert_eq(q.head_off, 0);
    cr_assert_eq(b->refs, 1);

    msgq_advance(&q, 0);
    expect_counts(&q, 2, 1);

    msgq_advance(&q, 2);
    expect_counts(&q, 0, 0);
    cr_assert_eq(c->refs, 1);
    msg_unref(a);
    msg_unref(b);
    msg_unref(c);
}

Test(msg, push_after_drain)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("ab"), *b = msg_str("cd");
    msgq_push(&q, a);
    take_expect(&q, 2, "ab");
    expect_counts(&q, 0, 0);
    msgq_push(&q, b);
    expect_counts(&q, 2, 1);
    cr_assert_eq(q.head, q.tail);
    take_expect(&q, 10, "cd");
    msg_unref(a);
    msg_unref(b);
}

Test(msg, clear_unrefs_everything)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("abc"), *b = msg_str("defgh");
    msgq_push(&q, a);
    msgq_push(&q, b);
    msgq_push(&q, b);
    take_expect(&q, 1, "a"); /* a partly taken: clear must still drop it */
    cr_assert_eq(a->refs, 2);
    cr_assert_eq(b->refs, 3);
    msgq_clear(&q);
    cr_assert_eq(a->refs, 1);
    cr_assert_eq(b->refs, 1);
    expect_counts(&q, 0, 0);
    /* Usable again after clear. */
    msgq_push(&q, a);
    expect_counts(&q, 3, 1);
    take_expect(&q, 3, "abc");
    msgq_clear(&q);
    msgq_clear(&q);
    msg_unref(a);
    msg_unref(b);
}

Test(msg, clear_frees_the_last_reference)
{
    struct msgq q;
    msgq_init(&q);
    struct msg *a = msg_str("owned by the queue");
    msgq_push(&q, a);
    msg_unref(a); /* the queue's reference is now the only one */
    cr_assert_eq(q.head->m->refs, 1);
    msgq_clear(&q); /* LeakSanitizer reports the message if this does not free it */
    expect_counts(&q, 0, 0);
}

Test(msg, large_message_taken_piecewise)
{
    struct msgq q;
    msgq_init(&q);
    size_t len = 1 << 20;
    struct msg *m = msg_new(len);
    for (size_t i = 0; i < len; i++)
        m->data[i] = (char)(i * 7);
    msgq_push(&q, m);
    msg_unref(m);
    char chunk[4000];
    size_t got = 0;
    for (;;) {
        size_t n = msgq_take(&q, chunk, sizeof chunk);
        if (n == 0)
            break;
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(chunk[i], (char)((got + i) * 7), "byte %zu", got + i);
        got += n;
        cr_assert_eq(q.bytes, len - got);
    }
    cr_assert_eq(got, len);
    expect_counts(&q, 0, 0);
}
