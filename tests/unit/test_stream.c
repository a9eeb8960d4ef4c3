/* SPDX-License-Identifier: MIT */
/*
 * stream: SSE framing of one message event from iovecs, heartbeats only on an empty queue, reads
 * with a small max across events, the end mark and stream_finished, pushes ignored after end or
 * drop, the wake and drain callbacks, and refcounting. Through stream.h only.
 */
#include <sys/uio.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "stream.h"
#include "util.h"

TestSuite(stream, .timeout = 30);

#define PREFIX    "event: message\ndata: "
#define SUFFIX    "\n\n"
#define HEARTBEAT ": keep-alive\n\n"

/* Events queued and not yet read. */
static size_t
unread_events(const struct stream *st)
{
    size_t n = 0;
    for (const struct stream_event *ev = st->cursor; ev != NULL; ev = ev->next)
        n++;
    return n;
}

static struct iovec
iov_str(const char *s)
{
    return (struct iovec){ (void *)(uintptr_t)s, strlen(s) };
}

static void
push_str(struct stream *st, const char *s)
{
    struct iovec iov = iov_str(s);
    stream_push_message(st, &iov, 1);
}

/* Reads everything queued, max bytes per call, into a NUL-terminated heap string. */
static char *
read_all(struct stream *st, size_t max)
{
    size_t cap = st->pending + 1, n = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    char *chunk = malloc(max);
    cr_assert_not_null(chunk);
    for (;;) {
        size_t k = stream_read(st, chunk, max);
        if (k == 0)
            break;
        cr_assert_leq(k, max);
        cr_assert_leq(n + k, cap - 1, "read more than was queued");
        memcpy(out + n, chunk, k);
        n += k;
    }
    out[n] = '\0';
    free(chunk);
    return out;
}

static void
expect_read(struct stream *st, size_t max, const char *want)
{
    char *got = read_all(st, max);
    /* Not fatal: the caller still unrefs the stream, so a failure does not also leak. */
    cr_expect_str_eq(got, want);
    free(got);
}

struct counter {
    int calls;
    struct stream *st;
    size_t bytes_at_call; /* the queue size seen by the last call */
};

static void
count_cb(void *arg)
{
    struct counter *c = arg;
    c->calls++;
    if (c->st != NULL)
        c->bytes_at_call = c->st->pending;
}

Test(stream, new_fields)
{
    uint64_t before = util_now_ms();
    struct stream *st = stream_new(17, true, 0);
    cr_assert_eq(st->id, 17);
    cr_assert(st->is_get);
    cr_assert_eq(st->refs, 1);
    cr_assert_not(st->ended);
    cr_assert_not(st->dropped);
    cr_assert_eq(st->awaiting, 0);
    cr_assert_eq(st->pending, 0);
    cr_assert_null(st->wake);
    cr_assert_null(st->drain);
    cr_assert_null(st->prev);
    cr_assert_null(st->next);
    cr_assert_geq(st->last_push_ms, before);
    cr_assert_not(stream_finished(st));
    char out[8];
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    stream_unref(st);

    st = stream_new(18, false, 0);
    cr_assert_not(st->is_get);
    stream_unref(st);
}

Test(stream, message_frame_from_iovecs)
{
    struct stream *st = stream_new(1, false, 0);
    struct iovec iov[3] = { iov_str("{\"jsonrpc\":\"2.0\",\"id\":"), iov_str("7"),
                            iov_str(",\"result\":{}}") };
    stream_push_message(st, iov, 3);
    const char *want = PREFIX "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}" SUFFIX;
    cr_assert_eq(st->pending, strlen(want));
    cr_assert_eq(unread_events(st), 1, "one event is one queued message");
    expect_read(st, 4096, want);
    cr_assert_eq(st->pending, 0);
    stream_unref(st);
}

Test(stream, message_frame_empty_iovecs)
{
    struct stream *st = stream_new(1, false, 0);
    struct iovec iov[2] = { iov_str(""), iov_str("{}") };
    stream_push_message(st, iov, 2);
    stream_push_message(st, NULL, 0);
    expect_read(st, 4096, PREFIX "{}" SUFFIX PREFIX SUFFIX);
    stream_unref(st);
}

Test(stream, message_frame_six_iovecs)
{
    struct stream *st = stream_new(1, false, 0);
    struct iovec iov[6] = { iov_str("a"), iov_str("b"), iov_str("c"),
                            iov_str("d"), iov_str("e"), iov_str("f") };
    stream_push_message(st, iov, 6);
    expect_read(st, 4096, PREFIX "abcdef" SUFFIX);
    stream_unref(st);
}

/* The header promises the concatenation of all n iovecs, whatever n is. */
Test(stream, message_frame_many_iovecs)
{
    struct stream *st = stream_new(1, false, 0);
    struct iovec iov[10];
    static const char *const parts[10] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" };
    for (int i = 0; i < 10; i++)
        iov[i] = iov_str(parts[i]);
    stream_push_message(st, iov, 10);
    expect_read(st, 4096, PREFIX "0123456789" SUFFIX);
    stream_unref(st);
}

Test(stream, several_messages_in_order)
{
    struct stream *st = stream_new(1, false, 0);
    push_str(st, "{\"id\":1}");
    push_str(st, "{\"id\":2}");
    push_str(st, "{\"id\":3}");
    cr_assert_eq(unread_events(st), 3);
    expect_read(st, 4096,
                PREFIX "{\"id\":1}" SUFFIX PREFIX "{\"id\":2}" SUFFIX PREFIX "{\"id\":3}" SUFFIX);
    stream_unref(st);
}

Test(stream, small_reads_across_events)
{
    static const size_t maxes[] = { 1, 2, 3, 7, 13, 25, 64 };
    const char *want = PREFIX "{\"a\":\"first\"}" SUFFIX PREFIX "{\"b\":2}" SUFFIX HEARTBEAT;
    for (size_t i = 0; i < ARRAY_LEN(maxes); i++) {
        struct stream *st = stream_new(1, false, 0);
        push_str(st, "{\"a\":\"first\"}");
        push_str(st, "{\"b\":2}");
        /* A heartbeat is refused while events are queued; read them, then it is accepted. */
        stream_push_heartbeat(st);
        char *got = read_all(st, maxes[i]);
        stream_push_heartbeat(st);
        char *hb = read_all(st, maxes[i]);
        size_t n = strlen(got) + strlen(hb) + 1;
        char *all = malloc(n);
        cr_assert_not_null(all);
        snprintf(all, n, "%s%s", got, hb);
        cr_assert_str_eq(all, want, "max %zu", maxes[i]);
        free(all);
        free(got);
        free(hb);
        stream_unref(st);
    }
}

Test(stream, read_exact_event_boundary)
{
    struct stream *st = stream_new(1, false, 0);
    push_str(st, "x");
    push_str(st, "y");
    size_t one = strlen(PREFIX "x" SUFFIX);
    char out[64];
    cr_assert_eq(stream_read(st, out, one), one);
    cr_assert(memcmp(out, PREFIX "x" SUFFIX, one) == 0);
    cr_assert_eq(unread_events(st), 1);
    cr_assert_eq(st->pending, one);
    stream_unref(st);
}

Test(stream, heartbeat_only_when_empty)
{
    struct stream *st = stream_new(1, true, 0);
    stream_push_heartbeat(st);
    cr_assert_eq(st->pending, strlen(HEARTBEAT));
    /* A second one while the first is queued adds nothing. */
    stream_push_heartbeat(st);
    cr_assert_eq(unread_events(st), 1);
    expect_read(st, 100, HEARTBEAT);

    push_str(st, "{}");
    size_t queued = st->pending;
    stream_push_heartbeat(st);
    cr_assert_eq(st->pending, queued, "no heartbeat behind a queued event");
    expect_read(st, 100, PREFIX "{}" SUFFIX);

    /* A message may follow a heartbeat. */
    stream_push_heartbeat(st);
    push_str(st, "{}");
    expect_read(st, 100, HEARTBEAT PREFIX "{}" SUFFIX);
    stream_unref(st);
}

Test(stream, heartbeat_after_partial_read_is_refused)
{
    struct stream *st = stream_new(1, true, 0);
    push_str(st, "{}");
    char out[4];
    cr_assert_eq(stream_read(st, out, sizeof out), 4);
    stream_push_heartbeat(st);
    /* Injecting a comment in the middle of an event would corrupt it. */
    expect_read(st, 100, &(PREFIX "{}" SUFFIX)[4]);
    stream_unref(st);
}

Test(stream, push_updates_last_push)
{
    struct stream *st = stream_new(1, false, 0);
    st->last_push_ms = 0;
    push_str(st, "{}");
    cr_assert_gt(st->last_push_ms, 0);
    st->last_push_ms = 0;
    char out[64];
    (void)stream_read(st, out, sizeof out);
    stream_push_heartbeat(st);
    cr_assert_gt(st->last_push_ms, 0);
    stream_unref(st);
}

Test(stream, end_and_finished)
{
    struct stream *st = stream_new(1, false, 0);
    push_str(st, "{\"last\":true}");
    cr_assert_not(stream_finished(st));
    stream_end(st);
    cr_assert(st->ended);
    cr_assert_not(stream_finished(st), "ended but not drained");
    char out[5];
    cr_assert_eq(stream_read(st, out, sizeof out), 5);
    cr_assert_not(stream_finished(st), "partly drained");
    char *rest = read_all(st, 5);
    cr_assert_str_eq(rest, &(PREFIX "{\"last\":true}" SUFFIX)[5]);
    free(rest);
    cr_assert(stream_finished(st));
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    cr_assert(stream_finished(st));
    stream_unref(st);
}

Test(stream, drained_but_not_ended_is_not_finished)
{
    struct stream *st = stream_new(1, false, 0);
    push_str(st, "{}");
    expect_read(st, 100, PREFIX "{}" SUFFIX);
    cr_assert_not(stream_finished(st));
    stream_end(st);
    cr_assert(stream_finished(st));
    stream_unref(st);
}

Test(stream, pushes_after_end_ignored)
{
    struct stream *st = stream_new(1, false, 0);
    push_str(st, "a");
    stream_end(st);
    size_t queued = st->pending;
    push_str(st, "b");
    stream_push_heartbeat(st);
    cr_assert_eq(st->pending, queued);
    expect_read(st, 100, PREFIX "a" SUFFIX);
    stream_push_heartbeat(st);
    cr_assert_eq(st->pending, 0, "no heartbeat on an ended stream");
    cr_assert(stream_finished(st));
    stream_unref(st);
}

Test(stream, pushes_after_drop_ignored)
{
    struct stream *st = stream_new(1, true, 0);
    st->dropped = true;
    push_str(st, "a");
    stream_push_heartbeat(st);
    cr_assert_eq(st->pending, 0);
    cr_assert_eq(unread_events(st), 0);
    stream_unref(st);
}

Test(stream, wake_on_push_and_end)
{
    struct stream *st = stream_new(1, false, 0);
    struct counter c = { 0 };
    c.st = st;
    push_str(st, "before the callback");
    stream_set_wake(st, count_cb, &c);
    cr_assert_eq(st->wake_arg, &c);
    push_str(st, "{}");
    cr_assert_eq(c.calls, 1);
    cr_assert_gt(c.bytes_at_call, 0, "woken after the bytes were queued");
    char *drop = read_all(st, 1000);
    free(drop);
    stream_push_heartbeat(st);
    cr_assert_eq(c.calls, 2);
    stream_push_heartbeat(st); /* refused: no wake */
    cr_assert_eq(c.calls, 2);
    stream_end(st);
    cr_assert_eq(c.calls, 3);
    stream_end(st); /* already ended */
    cr_assert_eq(c.calls, 3);
    push_str(st, "ignored");
    cr_assert_eq(c.calls, 3);

    /* Removing the callback stops the wake-ups. */
    struct stream *st2 = stream_new(2, false, 0);
    stream_set_wake(st2, count_cb, &c);
    stream_set_wake(st2, NULL, NULL);
    push_str(st2, "{}");
    stream_end(st2);
    cr_assert_eq(c.calls, 3);
    stream_unref(st);
    stream_unref(st2);
}

Test(stream, reading_does_not_wake)
{
    struct stream *st = stream_new(1, false, 0);
    struct counter c = { 0 };
    push_str(st, "{}");
    stream_set_wake(st, count_cb, &c);
    char *s = read_all(st, 3);
    free(s);
    cr_assert_eq(c.calls, 0);
    stream_unref(st);
}

Test(stream, drain_fires_at_low_water)
{
    struct stream *st = stream_new(1, false, 0);
    struct counter c = { 0 };
    c.st = st;
    size_t one = strlen(PREFIX "0123456789" SUFFIX);
    for (int i = 0; i < 3; i++)
        push_str(st, "0123456789");
    st->low_water = one;
    st->drain = count_cb;
    st->drain_arg = &c;

    char out[256];
    /* 3 events queued; reading one byte leaves more than low water. */
    cr_assert_eq(stream_read(st, out, 1), 1);
    cr_assert_eq(c.calls, 0);
    /* Down to exactly one event: falls to low water. */
    cr_assert_eq(stream_read(st, out, 2 * one - 1), 2 * one - 1);
    cr_assert_eq(st->pending, one);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(c.bytes_at_call, one, "called after the bytes were taken");
    /* Already at or below low water: no repeat. */
    cr_assert_eq(stream_read(st, out, 3), 3);
    cr_assert_eq(c.calls, 1);
    char *tail = read_all(st, 100);
    free(tail);
    cr_assert_eq(c.calls, 1);

    /* Filling past low water again re-arms it. */
    push_str(st, "0123456789");
    push_str(st, "0123456789");
    cr_assert_eq(c.calls, 1, "pushing never drains");
    char *rest = read_all(st, 7);
    free(rest);
    cr_assert_eq(c.calls, 2);
    stream_unref(st);
}

Test(stream, drain_one_read_below_low_water)
{
    struct stream *st = stream_new(1, false, 0);
    struct counter c = { 0 };
    for (int i = 0; i < 4; i++)
        push_str(st, "abc");
    st->low_water = 10;
    st->drain = count_cb;
    st->drain_arg = &c;
    /* One read takes everything, from far above low water to zero: one call. */
    char out[256];
    size_t all = st->pending;
    cr_assert_eq(stream_read(st, out, sizeof out), all);
    cr_assert_eq(c.calls, 1);
    /* An empty read on an empty queue does not call it. */
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    cr_assert_eq(c.calls, 1);
    stream_unref(st);
}

Test(stream, drain_not_called_when_never_above)
{
    struct stream *st = stream_new(1, false, 0);
    struct counter c = { 0 };
    push_str(st, "abc");
    st->low_water = 1000;
    st->drain = count_cb;
    st->drain_arg = &c;
    char *s = read_all(st, 2);
    free(s);
    cr_assert_eq(c.calls, 0);
    stream_unref(st);
}

Test(stream, refcounting)
{
    struct stream *st = stream_new(1, false, 0);
    cr_assert_eq(stream_ref(st), st);
    cr_assert_eq(st->refs, 2);
    push_str(st, "queued when the last reference goes");
    stream_unref(st);
    cr_assert_eq(st->refs, 1);
    push_str(st, "still usable");
    stream_unref(st); /* frees the stream and its queue (LeakSanitizer checks) */
    stream_unref(NULL);
}

Test(stream, unref_releases_queued_messages)
{
    struct stream *st = stream_new(1, false, 0);
    stream_ref(st);
    for (int i = 0; i < 100; i++)
        push_str(st, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}");
    stream_end(st);
    stream_unref(st);
    cr_assert_eq(unread_events(st), 100);
    stream_unref(st);
}
