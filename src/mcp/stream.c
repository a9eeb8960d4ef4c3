/* SPDX-License-Identifier: MIT */
/*
 * SSE framing, the per-stream event list and its replay history. A message is framed once
 * ("id: 7-3\nevent: message\ndata: ...\n\n") when it is queued; the JSON never holds a raw CR or
 * LF (the scanner's flatten guarantees it), so one data line always suffices.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_int.h"
#include "util.h"

_Static_assert(offsetof(struct stream, own) == 0,
               "stream_own() casts a stream to its first member");

static const char stream_prefix[] = "event: message\ndata: ";
static const char stream_suffix[] = "\n\n";
static const char stream_heartbeat[] = ": keep-alive\n\n";

struct stream *
stream_new(uint64_t id, bool is_get, size_t replay_max)
{
    struct stream *st = xcalloc(1, sizeof(*st));
    st->id = id;
    st->refs = 1;
    st->is_get = is_get;
    st->replay_max = replay_max;
    st->next_seq = 1;
    st->last_push_ms = util_now_ms();
    return st;
}

struct stream *
stream_ref(struct stream *st)
{
    st->refs++;
    return st;
}

/* Unlinks and frees the head event. */
static void
stream_pop(struct stream *st)
{
    struct stream_event *ev = st->head;
    if (ev == st->cursor) {
        st->pending -= ev->len - st->cursor_off;
        st->cursor = ev->next;
        st->cursor_off = 0;
    } else {
        st->history -= ev->len;
    }
    st->head = ev->next;
    if (st->head == NULL)
        st->tail = NULL;
    msg_unref(ev->m);
    msg_unref(ev->body);
    msg_unref(ev->tail);
    free(ev);
}

void
stream_discard(struct stream *st)
{
    while (st->head != NULL)
        stream_pop(st);
}

void
stream_unref(struct stream *st)
{
    if (st == NULL || --st->refs > 0)
        return;
    stream_discard(st);
    free(st);
}

static void
stream_wake(struct stream *st)
{
    if (st->wake != NULL)
        st->wake(st->wake_arg);
}

/* Queues an event (takes the references it is given). */
static void
stream_push_event_parts(struct stream *st, struct stream_event *ev)
{
    ev->len = ev->m->len + ev->body_len + (ev->tail != NULL ? ev->tail->len : 0);
    if (st->tail != NULL)
        st->tail->next = ev;
    else
        st->head = ev;
    st->tail = ev;
    if (st->cursor == NULL) {
        st->cursor = ev;
        st->cursor_off = 0;
    }
    st->pending += ev->len;
    st->last_push_ms = util_now_ms();
    stream_wake(st);
}

static void
stream_push(struct stream *st, struct msg *m, uint64_t seq)
{
    struct stream_event *ev = xcalloc(1, sizeof(*ev));
    ev->seq = seq;
    ev->m = m;
    stream_push_event_parts(st, ev);
}

/* ev's framed bytes as up to three pieces, each with the message that holds it; returns the count.
 */
static int
stream_event_parts(const struct stream_event *ev, struct iovec part[3], struct msg *owner[3])
{
    int n = 0;
    part[n] = (struct iovec){ ev->m->data, ev->m->len };
    owner[n++] = ev->m;
    if (ev->body != NULL) {
        part[n] = (struct iovec){ ev->body->data + ev->body_off, ev->body_len };
        owner[n++] = ev->body;
    }
    if (ev->tail != NULL) {
        part[n] = (struct iovec){ ev->tail->data, ev->tail->len };
        owner[n++] = ev->tail;
    }
    return n;
}

/* Copies k bytes of ev's framing from off (off + k <= ev->len). */
static void
stream_event_copy(const struct stream_event *ev, size_t off, char *out, size_t k)
{
    struct iovec part[3];
    struct msg *owner[3];
    int n = stream_event_parts(ev, part, owner);
    for (int i = 0; i < n && k > 0; i++) {
        if (off >= part[i].iov_len) {
            off -= part[i].iov_len;
            continue;
        }
        size_t c = part[i].iov_len - off < k ? part[i].iov_len - off : k;
        memcpy(out, (const char *)part[i].iov_base + off, c);
        out += c;
        k -= c;
        off = 0;
    }
}

int
stream_event_id(uint64_t stream_id, uint64_t seq, char *out, size_t size)
{
    char a[UTIL_U64_TEXT_MAX], b[UTIL_U64_TEXT_MAX];
    size_t na = util_u64_text(stream_id, a), nb = util_u64_text(seq, b);
    if (na + 1 + nb >= size)
        return snprintf(out, size, "%s-%s", a, b); /* cut as snprintf cuts */
    memcpy(out, a, na);
    out[na] = '-';
    memcpy(out + na + 1, b, nb + 1);
    return (int)(na + 1 + nb);
}

bool
stream_parse_event_id(const char *s, uint64_t *stream_id, uint64_t *seq)
{
    const char *dash = s ? strchr(s, '-') : NULL;
    if (dash == NULL || dash == s || dash - s > 20)
        return false;
    char head[24];
    memcpy(head, s, (size_t)(dash - s));
    head[dash - s] = '\0';
    const char *why;
    return util_parse_u64(head, 1, UINT64_MAX, stream_id, &why) == 0
           && util_parse_u64(dash + 1, 1, UINT64_MAX, seq, &why) == 0;
}

/* "id: <stream>-<next seq>" (no newline) for the event about to be pushed; returns its length. */
static int
stream_id_field(const struct stream *st, char *out, size_t size)
{
    memcpy(out, "id: ", 4);
    return 4 + stream_event_id(st->id, st->next_seq, out + 4, size - 4);
}

/* The index of the longest iovec inside shared, if it is worth sharing; else -1. */
static int
stream_shareable(const struct iovec *iov, int n, const struct msg *shared)
{
    int best = -1;
    for (int i = 0; shared != NULL && i < n; i++) {
        const char *p = iov[i].iov_base;
        if (p >= shared->data && p + iov[i].iov_len <= shared->data + shared->len
            && iov[i].iov_len >= STREAM_SHARE_BYTES
            && (best < 0 || iov[i].iov_len > iov[best].iov_len))
            best = i;
    }
    return best;
}

void
stream_push_shared(struct stream *st, const struct iovec *iov, int n, struct msg *shared)
{
    if (st->ended || st->dropped)
        return;
    char prefix[96];
    uint64_t seq = 0;
    int k = 0;
    if (st->replay_max > 0) {
        k = stream_id_field(st, prefix, sizeof(prefix)) + 1;
        prefix[k - 1] = '\n';
        seq = st->next_seq++;
    }
    _Static_assert(sizeof prefix >= 4 + 2 * (UTIL_U64_TEXT_MAX - 1) + 2 + sizeof stream_prefix,
                   "the id field and the prefix fit");
    memcpy(prefix + k, stream_prefix, sizeof stream_prefix);
    struct stream_event *ev = xcalloc(1, sizeof(*ev));
    ev->seq = seq;
    int i = stream_shareable(iov, n, shared);
    if (i < 0) {
        ev->m = msg_frame(prefix, iov, n, stream_suffix);
    } else {
        ev->m = msg_frame(prefix, iov, i, NULL);
        ev->body = msg_ref(shared);
        ev->body_off = (size_t)((const char *)iov[i].iov_base - shared->data);
        ev->body_len = iov[i].iov_len;
        ev->tail = msg_frame(NULL, iov + i + 1, n - i - 1, stream_suffix);
    }
    stream_push_event_parts(st, ev);
}

void
stream_push_message(struct stream *st, const struct iovec *iov, int n)
{
    stream_push_shared(st, iov, n, NULL);
}

void
stream_push_priming(struct stream *st, uint64_t retry_ms)
{
    if (st->ended || st->dropped || st->replay_max == 0)
        return;
    char frame[128];
    int k = stream_id_field(st, frame, sizeof(frame));
    static const char retry[] = "\nretry: ", data[] = "\ndata: \n\n";
    _Static_assert(sizeof frame >= 4 + 2 * (UTIL_U64_TEXT_MAX - 1) + 1 + sizeof retry - 1
                                        + UTIL_U64_TEXT_MAX - 1 + sizeof data,
                   "the priming event fits");
    if (retry_ms > 0) {
        memcpy(frame + k, retry, sizeof retry - 1);
        k += (int)(sizeof retry - 1);
        k += (int)util_u64_text(retry_ms, frame + k);
    }
    memcpy(frame + k, data, sizeof data);
    struct iovec iov = { frame, (size_t)k + sizeof data - 1 };
    stream_push(st, msg_concat(&iov, 1), st->next_seq);
    st->next_seq++;
}

void
stream_push_event(struct stream *st, const char *type, const char *data)
{
    if (st->ended || st->dropped)
        return;
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "event: %s\ndata: ", type);
    struct iovec iov = { (void *)(uintptr_t)data, strlen(data) };
    stream_push(st, msg_frame(prefix, &iov, 1, stream_suffix), 0);
}

void
stream_push_heartbeat(struct stream *st)
{
    if (st->ended || st->dropped || st->pending > 0)
        return;
    struct iovec iov = { (void *)(uintptr_t)stream_heartbeat, sizeof(stream_heartbeat) - 1 };
    stream_push(st, msg_concat(&iov, 1), 0);
}

void
stream_end(struct stream *st)
{
    if (st->ended)
        return;
    st->ended = true;
    stream_wake(st);
}

/* Keeps at most replay_max bytes of read events (none when not replayable). */
static void
stream_evict(struct stream *st)
{
    while (st->history > st->replay_max && st->head != st->cursor)
        stream_pop(st);
}

size_t
stream_read(struct stream *st, char *out, size_t max)
{
    size_t before = st->pending, n = 0;
    while (n < max && st->cursor != NULL) {
        if (st->hangup && st->cursor_off == 0)
            break; /* a hangup ends the connection between events */
        struct stream_event *ev = st->cursor;
        size_t k = ev->len - st->cursor_off;
        if (k > max - n)
            k = max - n;
        stream_event_copy(ev, st->cursor_off, out + n, k);
        n += k;
        st->cursor_off += k;
        st->pending -= k;
        if (st->cursor_off == ev->len) {
            st->history += ev->len;
            st->cursor = ev->next;
            st->cursor_off = 0;
        }
    }
    stream_evict(st);
    if (st->drain != NULL && before > st->low_water && st->pending <= st->low_water)
        st->drain(st->drain_arg);
    return n;
}

int
stream_take(struct stream *st, struct iovec *iov, struct msg **refs, int max)
{
    if (st->cursor_off != 0 || st->hangup)
        return -1;
    int n = 0;
    for (const struct stream_event *ev = st->cursor; ev != NULL; ev = ev->next)
        n += 1 + (ev->body != NULL) + (ev->tail != NULL);
    if (n > max)
        return -1;
    n = 0;
    for (struct stream_event *ev = st->cursor; ev != NULL; ev = ev->next) {
        int k = stream_event_parts(ev, iov + n, refs + n);
        for (int i = n; i < n + k; i++)
            msg_ref(refs[i]);
        n += k;
        st->history += ev->len;
    }
    size_t before = st->pending;
    st->cursor = NULL;
    st->pending = 0;
    stream_evict(st);
    if (st->drain != NULL && before > st->low_water)
        st->drain(st->drain_arg);
    return n;
}

bool
stream_finished(const struct stream *st)
{
    return st->ended && st->pending == 0;
}

bool
stream_hung_up(const struct stream *st)
{
    return st->hangup && st->cursor_off == 0;
}

void
stream_set_wake(struct stream *st, stream_wake_cb *cb, void *arg)
{
    st->wake = cb;
    st->wake_arg = arg;
}

bool
stream_resume(struct stream *st, uint64_t seq)
{
    if (st->replay_max == 0 || seq >= st->next_seq)
        return false;
    /* The first event after seq must still be held (or none was pushed after it yet). */
    struct stream_event *ev = st->head;
    while (ev != NULL && ev->seq == 0)
        ev = ev->next;
    uint64_t first = ev != NULL ? ev->seq : st->next_seq;
    if (first > seq + 1)
        return false;
    struct stream_event *from = st->head;
    while (from != NULL && (from->seq == 0 || from->seq <= seq))
        from = from->next;
    /* Comments before the resume point are not worth replaying: skip them too. */
    size_t hist = 0, pend = 0;
    bool after = false;
    for (ev = st->head; ev != NULL; ev = ev->next) {
        if (ev == from)
            after = true;
        if (after)
            pend += ev->len;
        else
            hist += ev->len;
    }
    st->cursor = from;
    st->cursor_off = 0;
    st->pending = pend;
    st->history = hist;
    st->hangup = false;
    return true;
}

void
stream_trim(struct stream *st, size_t max)
{
    while (st->pending > max && st->head != NULL)
        stream_pop(st);
}

uint64_t
stream_id(const struct stream *st)
{
    return st->id;
}

bool
stream_is_get(const struct stream *st)
{
    return st->is_get;
}

size_t
stream_pending(const struct stream *st)
{
    return st->pending;
}

size_t
stream_history(const struct stream *st)
{
    return st->history;
}

size_t
stream_replay_max(const struct stream *st)
{
    return st->replay_max;
}

uint64_t
stream_last_push_ms(const struct stream *st)
{
    return st->last_push_ms;
}

bool
stream_ended(const struct stream *st)
{
    return st->ended;
}

void
stream_mark_dropped(struct stream *st)
{
    st->dropped = true;
}

bool
stream_dropped(const struct stream *st)
{
    return st->dropped;
}

bool
stream_one_event(const struct stream *st)
{
    return st->cursor != NULL && st->cursor == st->tail && st->cursor_off == 0;
}

void
stream_hang_up(struct stream *st)
{
    st->hangup = true;
    stream_wake(st);
}

bool
stream_hangup_clear(struct stream *st)
{
    bool was = st->hangup;
    st->hangup = false;
    return was;
}

void
stream_set_drain(struct stream *st, stream_wake_cb *cb, void *arg, size_t low_water)
{
    st->drain = cb;
    st->drain_arg = arg;
    st->low_water = low_water;
}

bool
stream_over_low_water(const struct stream *st)
{
    return st->pending > st->low_water;
}
