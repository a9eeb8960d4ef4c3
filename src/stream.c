/* SPDX-License-Identifier: MIT */
/*
 * SSE framing and the per-stream queue. A message is framed once ("event: message\ndata: ...\n\n")
 * when it is queued; the JSON never holds a raw CR or LF (the scanner's flatten guarantees it), so
 * one data line always suffices.
 */
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char stream_prefix[] = "event: message\ndata: ";
static const char stream_suffix[] = "\n\n";
static const char stream_heartbeat[] = ": keep-alive\n\n";

struct stream *
stream_new(uint64_t id, bool is_get)
{
    struct stream *st = xcalloc(1, sizeof(*st));
    st->id = id;
    st->refs = 1;
    st->is_get = is_get;
    st->last_push_ms = util_now_ms();
    msgq_init(&st->q);
    return st;
}

struct stream *
stream_ref(struct stream *st)
{
    st->refs++;
    return st;
}

void
stream_unref(struct stream *st)
{
    if (st == NULL || --st->refs > 0)
        return;
    msgq_clear(&st->q);
    free(st);
}

static void
stream_wake(struct stream *st)
{
    if (st->wake != NULL)
        st->wake(st->wake_arg);
}

static void
stream_push(struct stream *st, struct msg *m)
{
    msgq_push(&st->q, m);
    msg_unref(m);
    st->last_push_ms = util_now_ms();
    stream_wake(st);
}

void
stream_push_message(struct stream *st, const struct iovec *iov, int n)
{
    if (st->ended || st->dropped)
        return;
    stream_push(st, msg_frame(stream_prefix, iov, n, stream_suffix));
}

void
stream_push_heartbeat(struct stream *st)
{
    if (st->ended || st->dropped || st->q.bytes > 0)
        return;
    struct iovec iov = { (void *)(uintptr_t)stream_heartbeat, sizeof(stream_heartbeat) - 1 };
    stream_push(st, msg_concat(&iov, 1));
}

void
stream_end(struct stream *st)
{
    if (st->ended)
        return;
    st->ended = true;
    stream_wake(st);
}

size_t
stream_read(struct stream *st, char *out, size_t max)
{
    size_t before = st->q.bytes;
    size_t n = msgq_take(&st->q, out, max);
    if (st->drain != NULL && before > st->low_water && st->q.bytes <= st->low_water)
        st->drain(st->drain_arg);
    return n;
}

bool
stream_finished(const struct stream *st)
{
    return st->ended && st->q.bytes == 0;
}

void
stream_set_wake(struct stream *st, stream_wake_cb *cb, void *arg)
{
    st->wake = cb;
    st->wake_arg = arg;
}
