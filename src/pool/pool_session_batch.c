/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC batches of a pooled session (2025-03-26; session_mode = pooled). The HTTP front has
 * checked every element (any bad one refused the whole batch). Each request of the batch is a
 * request of the session as if posted alone (pool_session_request): its own pool call, on
 * whichever child the pool picks, or the gateway's own answer; notifications and responses go as
 * pool_session_other takes them. What differs is where the answers go: one stream for the whole
 * batch (struct pool_batch), an event per answer under its own id. While an element is served,
 * pools.batch names the batch: a call made then takes the batch's stream instead of one of its
 * own (pool_call_stream), and an answer of the gateway's is pushed there (pool_session_local). A
 * request that cannot be served (its id in flight or twice in the batch, the in-flight cap, no
 * child) gets its own error event. The stream ends once every call of the batch has ended (and
 * the batch was served whole); a client that closes it cancels every call of the batch still in
 * flight, as a dropped stream cancels one request.
 *
 * Lifetimes: the batch holds one reference to its stream, each of its calls one, the HTTP request
 * one. A batch lives from its POST until its last call ends (pool_batch_call_end, from
 * pool_call_end) or its stream is dropped; nothing else points at it.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pool_int.h"

struct pool_batch {
    struct stream *st;         /* one reference */
    struct pool_session *sess; /* whose it is: its calls are among sess->calls */
    size_t open;               /* calls of it not yet ended (plus one while it is served) */
    struct pool_batch *prev, *next;
};

static struct pool_batch *pool_batches; /* every batch with a call still open */

static void
pool_batch_free(struct pool_batch *b)
{
    UTIL_DLIST_UNLINK(pool_batches, b, prev, next);
    stream_own(b->st)->owner = NULL;
    stream_end(b->st);
    stream_unref(b->st);
    free(b);
}

/* One less holds b open; the last ends its stream. */
static void
pool_batch_close_one(struct pool_batch *b)
{
    if (--b->open == 0)
        pool_batch_free(b);
}

struct stream *
pool_batch_call_stream(struct pool_call *call)
{
    struct pool_batch *b = pools.batch;
    call->batch = b;
    call->st = stream_ref(b->st);
    b->open++;
    call->pool->row->ctr.requests++;
    return stream_ref(b->st);
}

void
pool_batch_call_end(struct pool_call *call)
{
    struct pool_batch *b = call->batch;
    call->batch = NULL;
    stream_unref(call->st);
    call->st = NULL;
    pool_batch_close_one(b);
}

struct stream *
pool_batch_local(const char *msg, size_t len)
{
    struct stream *st = pools.batch->st;
    struct iovec iov = { (void *)(uintptr_t)msg, len };
    stream_push_message(st, &iov, 1);
    return stream_ref(st);
}

/* An error event for the request at m (its id) on the batch's stream. */
static void
pool_batch_error(struct pool_batch *b, const char *m, const struct jsonrpc_info *info, int code,
                 const char *why)
{
    size_t len;
    char *e = jsonrpc_error_new(m + info->id.off, info->id.len, code, why, &len);
    struct iovec iov = { e, len };
    stream_push_message(b->st, &iov, 1);
    free(e);
}

/* Whether element i's id is also an earlier request's of the batch. */
static bool
pool_batch_dup(const char *body, const struct jsonrpc_span *el, const struct jsonrpc_info *info,
               size_t i)
{
    const char *id = body + el[i].off + info[i].id.off;
    for (size_t k = 0; k < i; k++)
        if (info[k].kind == JSONRPC_REQUEST && info[k].id.len == info[i].id.len
            && memcmp(body + el[k].off + info[k].id.off, id, info[i].id.len) == 0)
            return true;
    return false;
}

struct stream *
pool_session_batch(struct pool_session *s, const struct config_server *srv, char *body,
                   const struct jsonrpc_span *el, const struct jsonrpc_info *info, size_t n,
                   const struct pool_meta *meta0)
{
    static uint64_t next_stream_id = 1;
    bool requests = false;
    for (size_t i = 0; i < n; i++)
        requests |= info[i].kind == JSONRPC_REQUEST;
    struct pool_batch *b = NULL;
    if (requests) {
        b = xcalloc(1, sizeof(*b));
        b->st = stream_new(next_stream_id++, false, 0);
        stream_own(b->st)->owner = b;
        stream_own(b->st)->attached = true; /* the HTTP request reads it from now */
        b->sess = s;
        b->open = 1; /* until every element is served */
        b->next = pool_batches;
        if (pool_batches != NULL)
            pool_batches->prev = b;
        pool_batches = b;
    }
    for (size_t i = 0; i < n; i++) {
        char *m = body + el[i].off;
        if (info[i].kind != JSONRPC_REQUEST) {
            (void)pool_session_other(s, m, el[i].len, &info[i]);
            continue;
        }
        if (pool_batch_dup(body, el, info, i)) {
            pool_batch_error(b, m, &info[i], JSONRPC_INVALID_REQUEST,
                             "the same id as an earlier request of this batch");
            continue;
        }
        struct pool_meta meta = *meta0;
        enum pool_status status;
        pools.batch = b;
        struct stream *st = pool_session_request(s, srv, m, el[i].len, &info[i], &meta, &status);
        pools.batch = NULL;
        if (st != NULL)
            stream_unref(st); /* the batch's own stream: the HTTP request holds it */
        else
            pool_batch_error(b, m, &info[i],
                             status == POOL_E_GONE ? JSONRPC_INVALID_REQUEST
                                                   : JSONRPC_INTERNAL_ERROR,
                             meta.why != NULL ? meta.why : relay_status_text(status));
    }
    if (b == NULL)
        return NULL;
    struct stream *st = stream_ref(b->st);
    pool_batch_close_one(b); /* served: it ends with its last call */
    return st;
}

bool
pool_batch_detach(struct stream *st)
{
    struct pool_batch *b = pool_batches;
    while (b != NULL && b->st != st)
        b = b->next;
    if (b == NULL)
        return false;
    stream_own(st)->attached = false;
    stream_mark_dropped(st);
    stream_discard(st);
    b->open++; /* b stays while its calls are cancelled */
    size_t cancelled = 0;
    for (struct pool_call *call = b->sess->calls; call != NULL;) {
        if (call->batch != b) {
            call = call->snext;
            continue;
        }
        if (call->c == NULL)
            pool_call_drop_queued(call, RELAY_CANCEL_DISCONNECT);
        else
            pool_call_cancel(call, RELAY_CANCEL_DISCONNECT);
        cancelled++;
        call = b->sess->calls; /* the list changed: from its head again */
    }
    log_info(b->sess->label, "client dropped a batch's stream: %zu requests cancelled", cancelled);
    pool_batch_close_one(b);
    stream_unref(st); /* the HTTP request's */
    return true;
}
