/* SPDX-License-Identifier: MIT */
/*
 * stream: SSE framing of one message event from iovecs, heartbeats only on an empty queue, reads
 * with a small max across events, the end mark and stream_finished, pushes ignored after end or
 * drop, the wake and drain callbacks, and refcounting.
 *
 * Resumability (replay_max > 0): message events framed with "id: <stream>-<seq>" and seq counting
 * from 1 per stream (none and no history when replay_max == 0); the priming event with and without
 * retry (none when not replayable, ended or dropped), large ids and retry values; heartbeats carry
 * no id and take no seq; the history of read events bounded by replay_max, evicted oldest first
 * and only once read, and what a resume can still reach; stream_resume replaying exactly the events
 * after seq (byte-exact, any read size), nothing at the last seq, false and the stream unchanged
 * for an evicted point, a seq not yet reached or a non-replayable stream, restarting a partly read
 * event, skipping comments before the resume point, never reusing a seq; stream_trim dropping from
 * the head; hangup stopping reads at an event boundary and stream_hung_up, cleared by a resume;
 * stream_discard; stream_finished with history vs pending; the drain callback with history;
 * stream_event_id / stream_parse_event_id round trips and rejects. Through stream.h only.
 */
#include <sys/uio.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "src/mcp/stream_int.h"
#include "util.h"

TestSuite(stream, .timeout = 30);

#define PREFIX       "event: message\ndata: "
#define SUFFIX       "\n\n"
#define HEARTBEAT    ": keep-alive\n\n"
/* One message event as framed on a replayable stream, e.g. EV("7-1", "{}"). */
#define EV(id, json) "id: " id "\n" PREFIX json SUFFIX

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

/* Every event held: the replay history and the unread ones. */
static size_t
held_events(const struct stream *st)
{
    size_t n = 0;
    for (const struct stream_event *ev = st->head; ev != NULL; ev = ev->next)
        n++;
    return n;
}

/* Reads and forgets everything queued. */
static void
read_away(struct stream *st)
{
    free(read_all(st, 4096));
}

/* Pushes {"n":1} .. {"n":count}: same-length events while seq stays one digit. */
static void
push_numbered(struct stream *st, int count)
{
    for (int i = 1; i <= count; i++) {
        char body[32];
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        push_str(st, body);
    }
}

/* Everything stream_resume must leave alone when it refuses. */
struct snapshot {
    struct stream_event *head, *tail, *cursor;
    size_t cursor_off, pending, history;
    uint64_t next_seq;
    bool hangup;
};

static struct snapshot
snap(const struct stream *st)
{
    return (struct snapshot){ st->head,    st->tail,    st->cursor,   st->cursor_off,
                              st->pending, st->history, st->next_seq, st->hangup };
}

static void
expect_unchanged(const struct stream *st, const struct snapshot *s, const char *what)
{
    cr_expect_eq(st->head, s->head, "%s: head", what);
    cr_expect_eq(st->tail, s->tail, "%s: tail", what);
    cr_expect_eq(st->cursor, s->cursor, "%s: cursor", what);
    cr_expect_eq(st->cursor_off, s->cursor_off, "%s: cursor_off", what);
    cr_expect_eq(st->pending, s->pending, "%s: pending", what);
    cr_expect_eq(st->history, s->history, "%s: history", what);
    cr_expect_eq(st->next_seq, s->next_seq, "%s: next_seq", what);
    cr_expect_eq(st->hangup, s->hangup, "%s: hangup", what);
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
    cr_assert_eq(st->own.awaiting, 0);
    cr_assert_eq(st->pending, 0);
    cr_assert_null(st->wake);
    cr_assert_null(st->drain);
    cr_assert_null(st->own.prev);
    cr_assert_null(st->own.next);
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

/* ---- Resumability: event ids ---- */

Test(stream, replay_message_frame_with_id)
{
    struct stream *st = stream_new(7, false, 4096);
    cr_assert_eq(st->replay_max, 4096);
    cr_assert_eq(st->next_seq, 1);
    cr_assert_eq(st->history, 0);
    struct iovec iov[2] = { iov_str("{\"jsonrpc\":\"2.0\","), iov_str("\"method\":\"x\"}") };
    stream_push_message(st, iov, 2);
    const char *want = "id: 7-1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n";
    cr_assert_eq(st->pending, strlen(want));
    cr_assert_eq(st->head->seq, 1);
    cr_assert_eq(st->next_seq, 2);
    expect_read(st, 4096, want);
    cr_assert_eq(st->pending, 0);
    cr_assert_eq(st->history, strlen(want), "a read event stays as history");
    cr_assert_eq(held_events(st), 1);
    cr_assert_null(st->cursor);
    stream_unref(st);
}

Test(stream, replay_seq_increments_per_stream)
{
    struct stream *st = stream_new(7, false, 4096);
    push_str(st, "{\"a\":1}");
    push_str(st, "{\"b\":2}");
    stream_push_message(st, NULL, 0);
    cr_assert_eq(st->next_seq, 4);
    uint64_t want_seq = 1;
    for (const struct stream_event *ev = st->head; ev != NULL; ev = ev->next)
        cr_assert_eq(ev->seq, want_seq++);
    /* Small reads do not disturb the framing. */
    expect_read(st, 3, EV("7-1", "{\"a\":1}") EV("7-2", "{\"b\":2}") EV("7-3", ""));

    /* Another stream counts from 1 again, under its own id. */
    struct stream *other = stream_new(8, true, 4096);
    push_str(other, "{}");
    expect_read(other, 4096, EV("8-1", "{}"));
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-4", "{}"));
    stream_unref(other);
    stream_unref(st);
}

Test(stream, replay_off_no_ids_no_history)
{
    struct stream *st = stream_new(7, false, 0);
    push_str(st, "{}");
    push_str(st, "{}");
    cr_assert_eq(st->head->seq, 0, "no seq when not replayable");
    cr_assert_eq(st->next_seq, 1, "no seq consumed");
    expect_read(st, 4096, PREFIX "{}" SUFFIX PREFIX "{}" SUFFIX);
    cr_assert_eq(st->history, 0);
    cr_assert_eq(held_events(st), 0, "read events are freed at once");
    cr_assert_null(st->head);
    cr_assert_null(st->tail);
    stream_unref(st);
}

Test(stream, replay_large_stream_id_and_seq)
{
    struct stream *st = stream_new(UINT64_MAX, false, 4096);
    st->next_seq = UINT64_MAX;
    push_str(st, "{}");
    expect_read(st, 4096, EV("18446744073709551615-18446744073709551615", "{}"));
    stream_unref(st);
}

/* ---- Priming ---- */

Test(stream, priming_with_retry)
{
    struct stream *st = stream_new(7, true, 4096);
    stream_push_priming(st, 3000);
    cr_assert_eq(st->head->seq, 1, "priming takes a seq: the client can name it");
    cr_assert_eq(st->next_seq, 2);
    push_str(st, "{}");
    expect_read(st, 4096, "id: 7-1\nretry: 3000\ndata: \n\n" EV("7-2", "{}"));
    stream_unref(st);
}

Test(stream, priming_without_retry)
{
    struct stream *st = stream_new(7, false, 4096);
    stream_push_priming(st, 0);
    expect_read(st, 4096, "id: 7-1\ndata: \n\n");
    cr_assert_eq(st->next_seq, 2);
    stream_unref(st);
}

Test(stream, priming_large_values)
{
    struct stream *st = stream_new(UINT64_MAX, false, 4096);
    st->next_seq = UINT64_MAX;
    stream_push_priming(st, UINT64_MAX);
    expect_read(st, 4096,
                "id: 18446744073709551615-18446744073709551615\n"
                "retry: 18446744073709551615\ndata: \n\n");
    stream_unref(st);
}

Test(stream, priming_refused)
{
    struct counter c = { 0 };
    struct stream *st = stream_new(7, false, 0);
    stream_set_wake(st, count_cb, &c);
    stream_push_priming(st, 3000);
    cr_assert_eq(st->pending, 0, "not replayable: no priming event");
    cr_assert_null(st->head);
    cr_assert_eq(st->next_seq, 1);
    cr_assert_eq(c.calls, 0);
    stream_unref(st);

    st = stream_new(7, false, 4096);
    stream_end(st);
    stream_push_priming(st, 3000);
    cr_assert_eq(st->pending, 0, "ended: no priming event");
    cr_assert_eq(st->next_seq, 1);
    cr_assert(stream_finished(st));
    stream_unref(st);

    st = stream_new(7, false, 4096);
    st->dropped = true;
    stream_push_priming(st, 0);
    cr_assert_eq(st->pending, 0, "dropped: no priming event");
    cr_assert_eq(st->next_seq, 1);
    stream_unref(st);
}

/* ---- Heartbeats on a replayable stream ---- */

Test(stream, replay_heartbeat_no_id_no_seq)
{
    struct stream *st = stream_new(7, true, 4096);
    push_str(st, "{}");
    read_away(st);
    stream_push_heartbeat(st);
    cr_assert_eq(st->tail->seq, 0, "a comment is not an event a client can name");
    cr_assert_eq(st->next_seq, 2, "a heartbeat takes no seq");
    expect_read(st, 4096, HEARTBEAT);
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-2", "{}"));

    /* A heartbeat before any message: the first message is still seq 1. */
    struct stream *fresh = stream_new(9, true, 4096);
    stream_push_heartbeat(fresh);
    push_str(fresh, "{}");
    expect_read(fresh, 4096, HEARTBEAT EV("9-1", "{}"));
    stream_unref(fresh);
    stream_unref(st);
}

/* ---- History ---- */

Test(stream, history_bounded_oldest_first)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 2 * one);
    push_numbered(st, 4);
    cr_assert_eq(st->pending, 4 * one);
    read_away(st);
    cr_assert_eq(st->history, 2 * one, "exactly replay_max kept");
    cr_assert_eq(held_events(st), 2);
    cr_assert_eq(st->head->seq, 3, "the oldest went first");
    cr_assert_eq(st->tail->seq, 4);
    cr_assert_eq(st->pending, 0);

    /* Events 1 and 2 are gone: resuming after 1 would miss 2. */
    struct snapshot s = snap(st);
    cr_assert_not(stream_resume(st, 1));
    expect_unchanged(st, &s, "resume(1)");
    cr_assert_not(stream_resume(st, 0));
    expect_unchanged(st, &s, "resume(0)");
    /* Event 2 itself is gone, but everything after it is held. */
    cr_assert(stream_resume(st, 2));
    expect_read(st, 4096, EV("7-3", "{\"n\":3}") EV("7-4", "{\"n\":4}"));
    stream_unref(st);
}

Test(stream, history_max_not_a_multiple)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 2 * one - 1);
    push_numbered(st, 3);
    read_away(st);
    cr_assert_eq(st->history, one, "two events would exceed replay_max by one byte");
    cr_assert_eq(held_events(st), 1);
    cr_assert_eq(st->head->seq, 3);
    cr_assert_not(stream_resume(st, 1));
    cr_assert(stream_resume(st, 2));
    expect_read(st, 4096, EV("7-3", "{\"n\":3}"));
    stream_unref(st);
}

Test(stream, history_grows_one_read_at_a_time)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 2 * one);
    push_numbered(st, 5);
    char out[256];
    for (size_t i = 1; i <= 5; i++) {
        cr_assert_eq(stream_read(st, out, one), one);
        size_t kept = i < 2 ? i : 2;
        cr_assert_eq(st->history, kept * one, "after %zu reads", i);
        cr_assert_eq(st->pending, (5 - i) * one);
        cr_assert_eq(st->head->seq, i - kept + 1);
        cr_assert_eq(held_events(st), kept + (5 - i));
    }
    stream_unref(st);
}

Test(stream, history_partly_read_event_not_counted)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    char out[256];
    cr_assert_eq(stream_read(st, out, one + 5), one + 5);
    cr_assert_eq(st->history, one, "only whole events are history");
    cr_assert_eq(st->pending, one - 5);
    cr_assert_eq(st->cursor_off, 5);
    cr_assert_eq(st->cursor->seq, 2);
    stream_unref(st);
}

Test(stream, history_unread_events_never_evicted)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, one);
    push_numbered(st, 5);
    cr_assert_eq(st->pending, 5 * one, "replay_max bounds history, not the queue");
    cr_assert_eq(held_events(st), 5);
    /* A read of part of the first event evicts nothing either. */
    char out[4];
    cr_assert_eq(stream_read(st, out, sizeof out), sizeof out);
    cr_assert_eq(held_events(st), 5);
    cr_assert_eq(st->history, 0);
    stream_unref(st);
}

Test(stream, history_event_larger_than_max)
{
    struct stream *st = stream_new(7, false, 10);
    push_str(st, "{\"bigger\":\"than ten bytes\"}");
    read_away(st);
    cr_assert_eq(st->history, 0, "an event over replay_max is not kept");
    cr_assert_null(st->head);
    cr_assert_null(st->tail);
    cr_assert_not(stream_resume(st, 0), "event 1 is gone");
    cr_assert(stream_resume(st, 1), "nothing after 1 was pushed: nothing to miss");
    cr_assert_eq(st->pending, 0);
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-2", "{}"));
    stream_unref(st);
}

Test(stream, history_counts_heartbeats)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, true, one + strlen(HEARTBEAT));
    push_numbered(st, 1);
    read_away(st);
    stream_push_heartbeat(st);
    read_away(st);
    cr_assert_eq(st->history, one + strlen(HEARTBEAT));
    cr_assert_eq(held_events(st), 2);
    cr_assert(stream_resume(st, 0));
    expect_read(st, 4096, EV("7-1", "{\"n\":1}") HEARTBEAT);
    stream_unref(st);
}

/* ---- Resume ---- */

Test(stream, resume_replays_events_after_seq)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 5);
    read_away(st);
    cr_assert_eq(st->history, 5 * one);

    cr_assert(stream_resume(st, 2));
    cr_assert_eq(st->pending, 3 * one);
    cr_assert_eq(st->history, 2 * one);
    cr_assert_eq(st->cursor->seq, 3);
    cr_assert_eq(st->cursor_off, 0);
    cr_assert_eq(held_events(st), 5, "a resume frees nothing");
    cr_assert_eq(unread_events(st), 3);
    expect_read(st, 4096, EV("7-3", "{\"n\":3}") EV("7-4", "{\"n\":4}") EV("7-5", "{\"n\":5}"));

    /* Again from the very start, read in small pieces. */
    cr_assert(stream_resume(st, 0));
    cr_assert_eq(st->pending, 5 * one);
    cr_assert_eq(st->history, 0);
    expect_read(st, 7,
                EV("7-1", "{\"n\":1}") EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}")
                    EV("7-4", "{\"n\":4}") EV("7-5", "{\"n\":5}"));
    cr_assert_eq(st->history, 5 * one);
    stream_unref(st);
}

Test(stream, resume_at_last_seq_replays_nothing)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    read_away(st);
    size_t hist = st->history;
    cr_assert(stream_resume(st, 3));
    cr_assert_eq(st->pending, 0);
    cr_assert_eq(st->history, hist);
    cr_assert_null(st->cursor);
    char out[64];
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    /* The next push is what the resumed reader gets. */
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-4", "{}"));
    stream_unref(st);
}

Test(stream, resume_never_reuses_a_seq)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    read_away(st);
    cr_assert(stream_resume(st, 1));
    cr_assert_eq(st->next_seq, 4);
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}") EV("7-4", "{}"));
    stream_unref(st);
}

Test(stream, resume_unreached_seq_refused)
{
    struct stream *st = stream_new(7, false, 4096);
    struct snapshot s = snap(st);
    cr_assert_not(stream_resume(st, 1), "nothing pushed yet: seq 1 never reached");
    expect_unchanged(st, &s, "empty stream");
    cr_assert(stream_resume(st, 0), "nothing pushed, nothing missed");

    push_numbered(st, 3);
    char out[10];
    cr_assert_eq(stream_read(st, out, sizeof out), sizeof out);
    s = snap(st);
    static const uint64_t bad[] = { 4, 5, 1000, UINT64_MAX - 1, UINT64_MAX };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        cr_assert_not(stream_resume(st, bad[i]), "seq %" PRIu64, bad[i]);
        expect_unchanged(st, &s, "seq >= next_seq");
    }
    stream_unref(st);
}

Test(stream, resume_evicted_point_refused_unchanged)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, one);
    push_numbered(st, 4);
    /* Read 3 whole events (history keeps only event 3) and part of event 4; ask a hangup. */
    char out[256];
    cr_assert_eq(stream_read(st, out, 3 * one + 4), 3 * one + 4);
    st->hangup = true;
    cr_assert_eq(st->head->seq, 3);
    struct snapshot s = snap(st);
    for (uint64_t seq = 0; seq < 2; seq++) {
        cr_assert_not(stream_resume(st, seq), "seq %" PRIu64, seq);
        expect_unchanged(st, &s, "evicted");
    }
    /* The stream reads on from where it was. */
    expect_read(st, 4096, &(EV("7-4", "{\"n\":4}"))[4]);
    stream_unref(st);
}

Test(stream, resume_not_replayable_refused)
{
    struct stream *st = stream_new(7, false, 0);
    struct snapshot s = snap(st);
    cr_assert_not(stream_resume(st, 0));
    expect_unchanged(st, &s, "empty, replay_max 0");
    push_str(st, "{}");
    push_str(st, "{}");
    char out[5];
    cr_assert_eq(stream_read(st, out, sizeof out), sizeof out);
    s = snap(st);
    cr_assert_not(stream_resume(st, 0));
    cr_assert_not(stream_resume(st, 1));
    expect_unchanged(st, &s, "replay_max 0");
    stream_unref(st);
}

Test(stream, resume_restarts_partly_read_event)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    char out[256];
    cr_assert_eq(stream_read(st, out, one + 9), one + 9);
    cr_assert_eq(st->cursor_off, 9);
    cr_assert(stream_resume(st, 1));
    cr_assert_eq(st->cursor_off, 0);
    cr_assert_eq(st->cursor->seq, 2);
    cr_assert_eq(st->pending, 2 * one, "event 2 whole again");
    cr_assert_eq(st->history, one);
    expect_read(st, 4096, EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}"));

    /* Part of the very first event read: resume(0) restarts it too. */
    struct stream *st2 = stream_new(7, false, 4096);
    push_numbered(st2, 2);
    cr_assert_eq(stream_read(st2, out, 3), 3);
    cr_assert(stream_resume(st2, 0));
    cr_assert_eq(st2->pending, 2 * one);
    cr_assert_eq(st2->history, 0);
    expect_read(st2, 5, EV("7-1", "{\"n\":1}") EV("7-2", "{\"n\":2}"));
    stream_unref(st2);
    stream_unref(st);
}

Test(stream, resume_with_unread_events)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 4);
    char out[256];
    cr_assert_eq(stream_read(st, out, one), one);
    /* The client saw event 1 only, and reconnects: 2..4 follow, nothing doubled. */
    cr_assert(stream_resume(st, 1));
    cr_assert_eq(st->pending, 3 * one);
    expect_read(st, 4096, EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}") EV("7-4", "{\"n\":4}"));
    stream_unref(st);
}

Test(stream, resume_skips_comments_before_point)
{
    struct stream *st = stream_new(7, true, 4096);
    push_str(st, "{\"a\":1}");
    read_away(st);
    stream_push_heartbeat(st);
    read_away(st);
    push_str(st, "{\"b\":2}");
    read_away(st);
    cr_assert(stream_resume(st, 1));
    cr_assert_eq(st->history, strlen(EV("7-1", "{\"a\":1}") HEARTBEAT));
    expect_read(st, 4096, EV("7-2", "{\"b\":2}"));
    /* From the start: the comment after the first replayed event comes along. */
    cr_assert(stream_resume(st, 0));
    expect_read(st, 4096, EV("7-1", "{\"a\":1}") HEARTBEAT EV("7-2", "{\"b\":2}"));
    /* At the last seq with a comment after it: the comment is not replayed. */
    stream_push_heartbeat(st);
    read_away(st);
    cr_assert(stream_resume(st, 2));
    cr_assert_eq(st->pending, 0);
    stream_unref(st);
}

Test(stream, resume_after_priming)
{
    struct stream *st = stream_new(7, true, 4096);
    stream_push_priming(st, 1000);
    push_str(st, "{}");
    read_away(st);
    /* The client holds the priming id only. */
    cr_assert(stream_resume(st, 1));
    expect_read(st, 4096, EV("7-2", "{}"));
    cr_assert(stream_resume(st, 0));
    expect_read(st, 4096, "id: 7-1\nretry: 1000\ndata: \n\n" EV("7-2", "{}"));
    stream_unref(st);
}

Test(stream, resume_ended_stream)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    stream_end(st);
    read_away(st);
    cr_assert(stream_finished(st));
    cr_assert(stream_resume(st, 1));
    cr_assert_not(stream_finished(st), "the replay is to be read first");
    expect_read(st, 4096, EV("7-2", "{\"n\":2}"));
    cr_assert(stream_finished(st));
    stream_unref(st);
}

Test(stream, resume_does_not_wake)
{
    struct counter c = { 0 };
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    read_away(st);
    stream_set_wake(st, count_cb, &c);
    cr_assert(stream_resume(st, 0));
    cr_assert_eq(c.calls, 0);
    stream_unref(st);
}

/* ---- Trim ---- */

Test(stream, trim_drops_from_head)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 5);
    char out[256];
    cr_assert_eq(stream_read(st, out, 2 * one), 2 * one);
    cr_assert_eq(st->history, 2 * one);

    /* Nothing to do while pending fits: the history stays. */
    stream_trim(st, 3 * one);
    cr_assert_eq(held_events(st), 5);
    cr_assert_eq(st->history, 2 * one);

    stream_trim(st, 2 * one);
    cr_assert_eq(st->pending, 2 * one);
    cr_assert_eq(st->history, 0, "the history goes first");
    cr_assert_eq(held_events(st), 2);
    cr_assert_eq(st->head, st->cursor);
    cr_assert_eq(st->head->seq, 4);

    /* Events before 4 are gone. */
    struct snapshot s = snap(st);
    cr_assert_not(stream_resume(st, 2));
    cr_assert_not(stream_resume(st, 0));
    expect_unchanged(st, &s, "trimmed");
    cr_assert(stream_resume(st, 3));
    expect_read(st, 4096, EV("7-4", "{\"n\":4}") EV("7-5", "{\"n\":5}"));
    stream_unref(st);
}

Test(stream, trim_not_at_event_boundary)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    /* A max between two events: whole events go until pending fits. */
    stream_trim(st, 2 * one - 1);
    cr_assert_eq(st->pending, one);
    cr_assert_eq(st->head->seq, 3);
    expect_read(st, 4096, EV("7-3", "{\"n\":3}"));
    stream_unref(st);
}

Test(stream, trim_partly_read_event)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    char out[8];
    cr_assert_eq(stream_read(st, out, sizeof out), sizeof out);
    cr_assert_eq(st->pending, 3 * one - 8);
    stream_trim(st, 2 * one);
    cr_assert_eq(st->pending, 2 * one);
    cr_assert_eq(st->cursor_off, 0);
    cr_assert_eq(st->head->seq, 2);
    expect_read(st, 4096, EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}"));
    stream_unref(st);
}

Test(stream, trim_to_zero_empties)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    read_away(st);
    push_numbered(st, 2);
    stream_trim(st, 0);
    cr_assert_eq(st->pending, 0);
    cr_assert_eq(st->history, 0);
    cr_assert_null(st->head);
    cr_assert_null(st->tail);
    cr_assert_null(st->cursor);
    cr_assert_not(stream_resume(st, 4), "event 5 was dropped unread");
    cr_assert(stream_resume(st, 5));
    push_str(st, "{}");
    expect_read(st, 4096, EV("7-6", "{}"));
    stream_unref(st);
}

Test(stream, trim_not_replayable)
{
    struct stream *st = stream_new(7, false, 0);
    for (int i = 0; i < 4; i++)
        push_str(st, "abc");
    size_t one = strlen(PREFIX "abc" SUFFIX);
    stream_trim(st, one);
    cr_assert_eq(st->pending, one);
    cr_assert_eq(held_events(st), 1);
    expect_read(st, 4096, PREFIX "abc" SUFFIX);
    stream_unref(st);
}

/* ---- Hangup ---- */

Test(stream, hangup_stops_at_event_boundary)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 3);
    cr_assert_not(stream_hung_up(st));
    char out[256];
    cr_assert_eq(stream_read(st, out, 6), 6);
    st->hangup = true;
    cr_assert_not(stream_hung_up(st), "in the middle of an event");
    /* The partly read event is completed, and nothing more. */
    cr_assert_eq(stream_read(st, out, sizeof out), one - 6);
    cr_assert(memcmp(out, &(EV("7-1", "{\"n\":1}"))[6], one - 6) == 0);
    cr_assert(stream_hung_up(st));
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    cr_assert_eq(st->pending, 2 * one, "the rest waits for the next connection");
    cr_assert_not(stream_finished(st));

    /* The client comes back with the last id it saw: the hangup is over. */
    cr_assert(stream_resume(st, 1));
    cr_assert_not(st->hangup);
    cr_assert_not(stream_hung_up(st));
    expect_read(st, 4096, EV("7-2", "{\"n\":2}") EV("7-3", "{\"n\":3}"));
    stream_unref(st);
}

Test(stream, hangup_small_reads_complete_the_event)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    char out[4];
    cr_assert_eq(stream_read(st, out, 1), 1);
    st->hangup = true;
    size_t got = 1, k;
    while ((k = stream_read(st, out, 3)) > 0) {
        cr_assert_not(stream_hung_up(st) && got + k != one);
        got += k;
    }
    cr_assert_eq(got, one, "read to the end of event 1 and no further");
    cr_assert(stream_hung_up(st));
    cr_assert_eq(st->cursor->seq, 2);
    stream_unref(st);
}

Test(stream, hangup_at_boundary_reads_nothing)
{
    struct stream *st = stream_new(7, false, 4096);
    st->hangup = true;
    cr_assert(stream_hung_up(st), "nothing queued is a boundary");
    push_numbered(st, 1);
    char out[256];
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    cr_assert(stream_hung_up(st));
    cr_assert_eq(unread_events(st), 1);
    /* Cleared (the next connection), the event is read whole. */
    st->hangup = false;
    cr_assert_not(stream_hung_up(st));
    expect_read(st, 4096, EV("7-1", "{\"n\":1}"));
    stream_unref(st);
}

Test(stream, hangup_on_non_replayable_stream)
{
    struct stream *st = stream_new(7, false, 0);
    push_str(st, "a");
    push_str(st, "b");
    char out[256];
    cr_assert_eq(stream_read(st, out, 2), 2);
    st->hangup = true;
    expect_read(st, 4096, &(PREFIX "a" SUFFIX)[2]);
    cr_assert(stream_hung_up(st));
    cr_assert_eq(st->pending, strlen(PREFIX "b" SUFFIX));
    stream_unref(st);
}

Test(stream, resume_clears_hangup_even_at_last_seq)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 1);
    read_away(st);
    st->hangup = true;
    cr_assert(stream_hung_up(st));
    cr_assert(stream_resume(st, 1));
    cr_assert_not(st->hangup);
    cr_assert_not(stream_hung_up(st));
    stream_unref(st);
}

/* ---- Discard ---- */

Test(stream, discard_empties)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 4);
    char out[256];
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    cr_assert_eq(stream_read(st, out, one + 3), one + 3);
    cr_assert_gt(st->history, 0);
    cr_assert_gt(st->pending, 0);
    stream_discard(st);
    cr_assert_null(st->head);
    cr_assert_null(st->tail);
    cr_assert_null(st->cursor);
    cr_assert_eq(st->cursor_off, 0);
    cr_assert_eq(st->pending, 0);
    cr_assert_eq(st->history, 0);
    cr_assert_eq(stream_read(st, out, sizeof out), 0);
    cr_assert_eq(st->next_seq, 5, "ids are never reused");
    cr_assert_not(stream_resume(st, 1));
    stream_discard(st); /* twice is harmless */
    cr_assert_null(st->head);
    stream_unref(st);

    /* Only history, nothing unread. */
    st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    read_away(st);
    stream_discard(st);
    cr_assert_null(st->head);
    cr_assert_eq(st->history, 0);
    stream_unref(st);

    /* Not replayable. */
    st = stream_new(7, false, 0);
    push_str(st, "{}");
    stream_discard(st);
    cr_assert_eq(st->pending, 0);
    cr_assert_null(st->head);
    stream_unref(st);
}

/* ---- Finished, drain, unref with history ---- */

Test(stream, finished_with_history_vs_pending)
{
    struct stream *st = stream_new(7, false, 4096);
    push_numbered(st, 2);
    stream_end(st);
    char out[256];
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    cr_assert_eq(stream_read(st, out, one), one);
    cr_assert_gt(st->history, 0);
    cr_assert_not(stream_finished(st), "an event is still unread");
    read_away(st);
    cr_assert_gt(st->history, 0);
    cr_assert(stream_finished(st), "history kept for replay does not hold the end back");
    stream_unref(st);
}

Test(stream, drain_with_history)
{
    size_t one = strlen(EV("7-1", "{\"n\":1}"));
    struct stream *st = stream_new(7, false, 4096);
    struct counter c = { 0 };
    c.st = st;
    push_numbered(st, 3);
    st->low_water = one;
    st->drain = count_cb;
    st->drain_arg = &c;
    char out[256];
    cr_assert_eq(stream_read(st, out, one), one);
    cr_assert_eq(c.calls, 0, "history does not count as pending");
    cr_assert_eq(stream_read(st, out, 1), 1);
    cr_assert_eq(c.calls, 0);
    cr_assert_eq(stream_read(st, out, one - 1), one - 1);
    cr_assert_eq(st->pending, one);
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(c.bytes_at_call, one);
    read_away(st);
    cr_assert_eq(c.calls, 1);
    /* A resume refills pending; reading it down fires again. */
    cr_assert(stream_resume(st, 0));
    cr_assert_eq(c.calls, 1, "a resume does not drain");
    read_away(st);
    cr_assert_eq(c.calls, 2);
    stream_unref(st);
}

Test(stream, unref_releases_history)
{
    struct stream *st = stream_new(7, true, 1 << 20);
    stream_push_priming(st, 500);
    for (int i = 0; i < 50; i++)
        push_str(st, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}");
    char out[1000];
    (void)stream_read(st, out, sizeof out);
    cr_assert_gt(st->history, 0);
    cr_assert_gt(st->pending, 0);
    stream_unref(st); /* LeakSanitizer checks history and queue are freed */
}

/* ---- Event ids ---- */

Test(stream, event_id_format_and_round_trip)
{
    static const struct {
        uint64_t stream, seq;
        const char *text;
    } cases[] = {
        { 1, 1, "1-1" },
        { 12, 3, "12-3" },
        { 7, 1000000, "7-1000000" },
        { UINT64_MAX, 1, "18446744073709551615-1" },
        { 1, UINT64_MAX, "1-18446744073709551615" },
        { UINT64_MAX, UINT64_MAX, "18446744073709551615-18446744073709551615" },
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char buf[42];
        int n = stream_event_id(cases[i].stream, cases[i].seq, buf, sizeof buf);
        cr_assert_eq(n, (int)strlen(cases[i].text));
        cr_assert_str_eq(buf, cases[i].text);
        uint64_t sid = 0, seq = 0;
        cr_assert(stream_parse_event_id(buf, &sid, &seq), "%s", buf);
        cr_assert_eq(sid, cases[i].stream, "%s", buf);
        cr_assert_eq(seq, cases[i].seq, "%s", buf);
    }
    /* Too little room: cut, and the whole length returned, as snprintf does. */
    char small[6];
    cr_assert_eq(stream_event_id(1234, 5678, small, sizeof small), 9);
    cr_assert_str_eq(small, "1234-");
}

Test(stream, parse_event_id_accepts)
{
    uint64_t sid = 0, seq = 0;
    cr_assert(stream_parse_event_id("12-3", &sid, &seq));
    cr_assert_eq(sid, 12);
    cr_assert_eq(seq, 3);
    /* An id the stream itself produced parses back to it. */
    struct stream *st = stream_new(42, false, 4096);
    st->next_seq = 99;
    push_str(st, "{}");
    char *got = read_all(st, 4096);
    char idline[64];
    cr_assert_eq(sscanf(got, "id: %63[^\n]", idline), 1);
    cr_assert(stream_parse_event_id(idline, &sid, &seq));
    cr_assert_eq(sid, 42);
    cr_assert_eq(seq, 99);
    free(got);
    stream_unref(st);
}

Test(stream, parse_event_id_rejects)
{
    static const char *const bad[] = {
        "",
        "-",
        "-3",
        "12-",
        "12",
        "12-0",
        "0-1",
        "0-0",
        "a-1",
        "1-a",
        "1-2-3",
        "1--2",
        "+1-2",
        "1-+2",
        " 1-2",
        "1 -2",
        "1- 2",
        "1-2 ",
        "1-2\n",
        "0x1-2",
        "1.0-2",
        "18446744073709551616-1", /* UINT64_MAX + 1 */
        "1-18446744073709551616",
        "99999999999999999999-1",  /* 20 digits, out of range */
        "123456789012345678901-1", /* 21 digits */
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        uint64_t sid = 0, seq = 0;
        cr_expect_not(stream_parse_event_id(bad[i], &sid, &seq), "\"%s\"", bad[i]);
    }
    uint64_t sid = 0, seq = 0;
    cr_assert_not(stream_parse_event_id(NULL, &sid, &seq));

    /* Very long inputs: digits only, a long stream id, a long seq. */
    char longs[3][1024];
    memset(longs[0], '1', sizeof longs[0] - 1);
    longs[0][sizeof longs[0] - 1] = '\0';
    memcpy(longs[1], longs[0], sizeof longs[1]);
    longs[1][500] = '-';
    memcpy(longs[2], longs[0], sizeof longs[2]);
    longs[2][1] = '-';
    for (size_t i = 0; i < 3; i++)
        cr_expect_not(stream_parse_event_id(longs[i], &sid, &seq), "long input %zu", i);
}

/*
 * stream_push_shared: the longest piece inside the shared message, when large enough, is
 * referenced (no copy); the framed bytes are the same as a copying push makes, for any read size,
 * across a resume, and the reference is dropped with the event.
 */
Test(stream, shared_piece_referenced_not_copied)
{
    size_t big = STREAM_SHARE_BYTES + 1234;
    struct msg *line = msg_new(big + 20);
    memcpy(line->data, "{\"id\":7,", 8);
    for (size_t i = 8; i < big + 20; i++)
        line->data[i] = (char)('a' + i % 26);
    line->data[big + 19] = '}';
    /* The child's id (7) is replaced by the client's ("c-1"), as session.c does. */
    struct iovec iov[3] = { { line->data, 6 }, iov_str("\"c-1\""), { line->data + 7, big + 13 } };
    size_t maxes[] = { 1, 7, 4096, 1 << 20 };
    for (size_t r = 0; r < ARRAY_LEN(maxes); r++) {
        struct stream *a = stream_new(9, false, 1 << 20), *b = stream_new(9, false, 1 << 20);
        stream_push_shared(a, iov, 3, line);
        stream_push_message(b, iov, 3);
        cr_assert_eq(line->refs, 2, "the event holds the line");
        cr_assert_not_null(a->tail->body);
        cr_assert_eq(a->tail->body_len, big + 13);
        cr_assert_null(b->tail->body, "without a shared message everything is copied");
        cr_assert_eq(a->pending, b->pending);
        char *want = read_all(b, 1 << 20);
        char *got = read_all(a, maxes[r]);
        cr_assert_str_eq(got, want, "read size %zu", maxes[r]);
        cr_assert(stream_resume(a, 0), "replay from the start");
        char *again = read_all(a, maxes[r]);
        cr_assert_str_eq(again, want);
        free(again);
        free(got);
        free(want);
        stream_unref(a);
        stream_unref(b);
        cr_assert_eq(line->refs, 1, "the reference went with the event");
    }
    /* A piece below STREAM_SHARE_BYTES, or outside the message, is copied. */
    struct stream *c = stream_new(9, false, 0);
    struct iovec small = { line->data, STREAM_SHARE_BYTES - 1 };
    stream_push_shared(c, &small, 1, line);
    struct iovec outside = iov_str("{\"not\":\"inside\"}");
    stream_push_shared(c, &outside, 1, line);
    cr_assert_null(c->head->body);
    cr_assert_null(c->tail->body);
    cr_assert_eq(line->refs, 1);
    stream_unref(c);
    msg_unref(line);
}
