/* SPDX-License-Identifier: MIT */
/*
 * SSE bodies: a request's response is an SSE stream read from its session's stream; while it
 * waits, the connection is suspended and the stream's wake resumes it. A POST's stream is held
 * back for response_hold_ms: an answer that arrives in that time, with nothing before it, leaves as
 * one SSE body with a Content-Length in one write, instead of headers, event and last chunk in
 * three. Anything else (a notification first, the time up) starts the stream as usual. The hold
 * never delays a message, only headers with nothing after.
 *
 * Every hold of a kind (a session's response_hold_ms, a stateless request's heartbeat_s) lasts as
 * long, so holds end in the order they began: each kind has a queue, oldest first, and one loop
 * timer for its oldest, rather than a timer added and deleted for every request. A request is on
 * its queue from http_hold until http_unhold or http_detach takes it off (both come before it is
 * freed); the timer's end takes the holds that are over off and resumes them.
 */
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "pool.h"

void
http_suspend(struct http_req *rc)
{
    rc->suspended = true;
    rc->waited = true;
    MHD_suspend_connection(rc->c);
}

void
http_resume(struct http_req *rc)
{
    if (!rc->suspended)
        return;
    rc->suspended = false;
    MHD_resume_connection(rc->c);
    /*
     * In external mode a resume wakes nothing: MHD_run must follow (src/README.md, section 6). It
     * does at the end of this loop turn; http_run asks for another turn for resumes inside it.
     */
    httpd.need_run = true;
}

static void
http_wake(void *arg)
{
    http_resume(arg);
}

struct http_holds {
    struct http_req *head, *tail; /* by hold_due_ms, earliest first */
    struct loop_timer *timer;     /* due at timer_ms, no later than the head's end; NULL: none */
    uint64_t timer_ms;
};

static struct http_holds http_holds[2]; /* [0] sessions' holds, [1] stateless requests' */

static void http_holds_arm(struct http_holds *q);

/* The queue's timer: every hold that is over comes off and its request resumes. */
static void
http_holds_fire(void *arg)
{
    struct http_holds *q = arg;
    q->timer = NULL;
    uint64_t now = util_now_ms();
    while (q->head != NULL && q->head->hold_due_ms <= now) {
        struct http_req *rc = q->head;
        http_hold_off(rc);
        http_resume(rc); /* MHD calls again: http_unhold */
    }
    http_holds_arm(q);
}

/*
 * A timer no later than the head's end (one armed earlier stays while anything is held: it fires
 * and arms again; http_hold_off deletes it when the queue empties).
 */
static void
http_holds_arm(struct http_holds *q)
{
    if (q->head == NULL || (q->timer != NULL && q->timer_ms <= q->head->hold_due_ms))
        return;
    loop_timer_del(q->timer);
    uint64_t now = util_now_ms(), due = q->head->hold_due_ms;
    q->timer = loop_timer_add(httpd.l, due > now ? due - now : 0, http_holds_fire, q);
    q->timer_ms = due;
}

/* rc goes on its kind's queue, in order (a reload may have shortened the hold: rarely not last). */
static void
http_hold_on(struct http_req *rc, uint64_t hold_ms)
{
    unsigned char k = rc->stateless ? 1 : 0;
    struct http_holds *q = &http_holds[k];
    rc->hold_due_ms = util_now_ms() + hold_ms;
    struct http_req *after = q->tail;
    while (after != NULL && after->hold_due_ms > rc->hold_due_ms)
        after = after->hold_prev;
    rc->hold_prev = after;
    rc->hold_next = after != NULL ? after->hold_next : q->head;
    if (rc->hold_next != NULL)
        rc->hold_next->hold_prev = rc;
    else
        q->tail = rc;
    if (after != NULL)
        after->hold_next = rc;
    else
        q->head = rc;
    rc->hold_q = (unsigned char)(k + 1);
    http_holds_arm(q);
}

void
http_hold_off(struct http_req *rc)
{
    if (rc->hold_q == 0)
        return;
    struct http_holds *q = &http_holds[rc->hold_q - 1];
    UTIL_DLIST_UNLINK_TAIL(q->head, q->tail, rc, hold_prev, hold_next);
    rc->hold_prev = rc->hold_next = NULL;
    rc->hold_q = 0;
    if (q->head == NULL) {
        /*
         * None held: no timer left armed until the next hold. Left armed, it cost 10-21 % more
         * CPU per echo at one request at a time (src/README.md, section 6).
         */
        loop_timer_del(q->timer);
        q->timer = NULL;
    }
}

void
http_holds_stop(void)
{
    for (size_t i = 0; i < ARRAY_LEN(http_holds); i++) {
        loop_timer_del(http_holds[i].timer);
        http_holds[i] = (struct http_holds){ 0 };
    }
}

/* Hands the stream back to its session; dropped when it had not finished. */
void
http_detach(struct http_req *rc)
{
    http_hold_off(rc);
    if (rc->st == NULL)
        return;
    struct stream *st = rc->st;
    rc->st = NULL;
    stream_set_wake(st, NULL, NULL);
    if (rc->stateless)
        pool_stream_detach(st);
    else if (rc->pooled)
        pool_session_detach(rc->sid, st);
    else
        session_stream_detach(rc->sid, st);
}

static ssize_t
http_sse_reader(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct http_req *rc = cls;
    if (rc->dropped || rc->st == NULL)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = stream_read(rc->st, out, max);
    http_access_sent(rc, n);
    if (n > 0)
        return (ssize_t)n;
    /* Finished, or the gateway ends this connection (SSE polling): the client resumes. */
    if (stream_finished(rc->st) || stream_hung_up(rc->st))
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Never return 0 without suspending: MHD would spin (src/README.md, section 6). */
    http_suspend(rc);
    return 0;
}

/* The client left while a stream was open: the reader, or the held request, ends the response. */
void
http_drop(struct http_req *rc)
{
    rc->dropped = true;
    http_detach(rc);
    http_resume(rc);
}

/*
 * An SSE response's headers. A stream (streaming) also says that nothing on the way may cache or
 * buffer it; a held one that is complete (a Content-Length) has nothing to hold back.
 */
static void
http_sse_headers(struct MHD_Response *r, const struct http_req *rc, bool with_sid, bool streaming)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    if (streaming) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
    }
    if (with_sid)
        MHD_add_response_header(r, HTTP_SID_HEADER, rc->sid);
}

enum MHD_Result
http_sse(struct http_req *rc, struct stream *st, bool with_sid)
{
    rc->st = st;
    stream_set_wake(st, http_wake, rc);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, http_sse_reader, rc, NULL);
    http_sse_headers(r, rc, with_sid, true);
    enum MHD_Result ret = http_queue(rc, MHD_HTTP_OK, r);
    if (rc->conn == NULL || rc->conn->gone)
        http_drop(rc); /* the hang-up came before the stream: the reader ends the response */
    return ret;
}

static void
http_sent_free(void *cls)
{
    struct http_sent *sent = cls;
    for (int i = 0; i < sent->n; i++)
        msg_unref(sent->m[i]);
    free(sent);
}

/* A POST's stream: held for response_hold_ms (see the top of this file), or started now. */
enum MHD_Result
http_hold(struct http_req *rc, struct stream *st, bool with_sid)
{
    /*
     * A stateless request waits for its first message up to a heartbeat period: its answer alone
     * leaves as one JSON object with the status its error code calls for; anything
     * else first (progress, a log line, the time up) starts an SSE stream.
     */
    uint64_t hold_ms = rc->stateless ? httpd.cfg->heartbeat_s * 1000u : httpd.cfg->response_hold_ms;
    if (hold_ms == 0 || rc->conn == NULL || rc->conn->gone)
        return http_sse(rc, st, with_sid);
    rc->st = st;
    rc->with_sid = with_sid;
    rc->held = true;
    stream_set_wake(st, http_wake, rc);
    /*
     * Answered already (the gateway's own answer), or, 2026-07-28, something came before any
     * answer (a listen's acknowledgement): nothing to wait for.
     */
    if (stream_ended(st) || (rc->stateless && stream_pending(st) > 0))
        return http_unhold(rc);
    http_hold_on(rc, hold_ms);
    http_suspend(rc);
    return MHD_YES;
}

static const char http_event_head[] = "event: message\ndata: ";

/*
 * A stateless request's stream that holds its answer alone (one event, no id: nothing is replayed
 * in 2026-07-28): the JSON object itself, application/json, with the status of its error code.
 */
static enum MHD_Result
http_json(struct http_req *rc, struct stream *st)
{
    size_t head = sizeof http_event_head - 1;
    int code = stream_own(st)->answer_code;
    unsigned status = code == JSONRPC_METHOD_NOT_FOUND ? MHD_HTTP_NOT_FOUND
                      : (code == JSONRPC_INVALID_REQUEST || code == JSONRPC_INVALID_PARAMS
                         || code == JSONRPC_HEADER_MISMATCH || code == JSONRPC_MISSING_CAPABILITY
                         || code == JSONRPC_UNSUPPORTED_VERSION)
                          ? MHD_HTTP_BAD_REQUEST
                          : MHD_HTTP_OK;
    struct MHD_Response *r;
    if (stream_pending(st) <= HTTP_COPY_MAX) {
        /* Small: one buffer, so headers and body leave in one write. */
        char *body = xmalloc(stream_pending(st) + 1);
        size_t n = stream_read(st, body, stream_pending(st));
        if (n < head + 2 || memcmp(body, http_event_head, head) != 0) {
            free(body);
            return MHD_NO; /* not one event: cannot happen for a stream that ended on its answer */
        }
        memmove(body, body + head, n - head - 2);
        r = http_json_response(body, n - head - 2);
        return http_queue(rc, status, r);
    }
    struct iovec iov[HTTP_IOV_MAX];
    struct MHD_IoVec mio[HTTP_IOV_MAX];
    struct http_sent *sent = xmalloc(sizeof(*sent));
    sent->n = stream_take(st, iov, sent->m, HTTP_IOV_MAX);
    if (sent->n < 1 || iov[0].iov_len < head || memcmp(iov[0].iov_base, http_event_head, head) != 0
        || iov[sent->n - 1].iov_len < 2) {
        http_sent_free(sent);
        return MHD_NO;
    }
    iov[0].iov_base = (char *)iov[0].iov_base + head;
    iov[0].iov_len -= head;
    iov[sent->n - 1].iov_len -= 2; /* the event's blank line */
    for (int i = 0; i < sent->n; i++) {
        mio[i] = (struct MHD_IoVec){ iov[i].iov_base, iov[i].iov_len };
        http_access_sent(rc, iov[i].iov_len);
    }
    r = MHD_create_response_from_iovec(mio, (unsigned)sent->n, http_sent_free, sent);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return http_queue(rc, status, r);
}

/* MHD calls again after the resume that ends a hold: one buffer if all is there, else a stream. */
enum MHD_Result
http_unhold(struct http_req *rc)
{
    rc->held = false;
    http_hold_off(rc);
    struct stream *st = rc->st;
    if (rc->dropped || st == NULL)
        return MHD_NO; /* the client left: MHD closes the connection */
    if (!stream_ended(st))
        return http_sse(rc, st, rc->with_sid);
    if (rc->stateless && stream_one_event(st))
        return http_json(rc, st); /* the answer alone */
    struct MHD_Response *r;
    if (stream_pending(st) <= HTTP_COPY_MAX) {
        char *body = xmalloc(stream_pending(st) + 1);
        r = http_body_response(body, stream_read(st, body, stream_pending(st)));
    } else {
        struct iovec iov[HTTP_IOV_MAX];
        struct MHD_IoVec mio[HTTP_IOV_MAX];
        struct http_sent *sent = xmalloc(sizeof(*sent));
        sent->n = stream_take(st, iov, sent->m, HTTP_IOV_MAX);
        if (sent->n < 0) {
            free(sent);
            return http_sse(rc, st, rc->with_sid);
        }
        for (int i = 0; i < sent->n; i++) {
            mio[i] = (struct MHD_IoVec){ iov[i].iov_base, iov[i].iov_len };
            http_access_sent(rc, iov[i].iov_len);
        }
        r = MHD_create_response_from_iovec(mio, (unsigned)sent->n, http_sent_free, sent);
    }
    http_sse_headers(r, rc, rc->with_sid, false);
    return http_queue(rc, MHD_HTTP_OK, r);
}
