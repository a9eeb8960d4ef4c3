/* SPDX-License-Identifier: MIT */
/*
 * Stateless requests through a pool child (pool.h), every one through the child's in-flight
 * table. Toward the child, the request's id and its progress token are both replaced by one number
 * the gateway minted for it on that child; the request's own _meta (client capabilities, log
 * level) goes with it unchanged. Back from the child:
 *   - its answer, with the client's id restored, ends the request's stream; a result that lacks
 *     resultType gets "complete", and the five cacheable results and the
 *     gateway's discover get ttlMs and cacheScope where missing (the server's INI defaults);
 *   - notifications/progress with a minted token goes, re-tagged with the client's token, on the
 *     stream of the request that set it;
 *   - notifications/message goes to a request only when it is the one request in flight on that
 *     child (or every request there is one pooled session's: to its oldest) and asked for logs at
 *     or below the line's level (_meta logLevel, a session's logging/setLevel); otherwise it is
 *     dropped and counted: nothing is ever sent to a client it cannot be attributed
 *     to, nor broadcast;
 *   - a notification that names a subscription (_meta subscriptionId: the minted id of a
 *     subscriptions/listen) goes, with the client's id put back, on that listen's stream;
 *   - a notification of the gateway's own listen for pooled sessions (a string subscriptionId,
 *     "mcpgw-listen-N"; pool_session_listen.c): a list change to every session of the server, an
 *     update to the sessions that subscribed its URI, as legacy notifications;
 *   - any other notification (list changes outside a listen, say): dropped and counted; requests
 *     (sampling, elicitation, roots): answered with an error, ping with {}.
 * subscriptions/listen is passed to stateless children (it has no timeout, and closing its stream
 * cancels it like any request); for legacy children the gateway serves it (pool_listen.c).
 * A request leaves the table by its answer, a cancel (the client closed its stream, a timeout,
 * shutdown: notifications/cancelled with the minted id, once) or the child's end.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "pool_int.h"

/* --- methods ----------------------------------------------------------------------------- */

/* The revision's core requests a legacy child also serves (server/discover is the gateway's). */
static const char *const pool_core[] = {
    "tools/call",     "tools/list",          "subscriptions/listen",     "server/discover",
    "resources/list", "resources/read",      "resources/templates/list", "prompts/list",
    "prompts/get",    "completion/complete",
};

/* Results a shared cache may keep: they get ttlMs and cacheScope where missing. */
static const char *const pool_cacheable[] = {
    "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
};

static bool
pool_in(const char *const *list, size_t n, const char *method)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], method) == 0)
            return true;
    return false;
}

bool
pool_method_served(const struct pool *p, const struct revision *rev, const char *method)
{
    /*
     * A legacy pool's listen is the gateway's, its subscriptions shared by every listener: with
     * one principal's children, another's listener would hear of that principal's resources.
     */
    if (p->key != NULL && p->era == CONFIG_ERA_LEGACY
        && strcmp(method, "subscriptions/listen") == 0)
        return false;
    /* The core first: the common requests are there, and none of it is removed. */
    if (pool_in(pool_core, ARRAY_LEN(pool_core), method))
        return true;
    /*
     * A stateless child may serve extensions (the tasks extension, say); a legacy one only the
     * core. While the era is unknown anything not removed is taken, and judged again at dispatch.
     */
    return p->era != CONFIG_ERA_LEGACY && !revision_removed(rev, method);
}

bool
pool_speaks(const struct pool *p, const struct revision *rev)
{
    return p->era == CONFIG_ERA_AUTO || (p->speaks & revision_bit(rev)) != 0;
}

/* --- the end of a call ------------------------------------------------------------------ */

struct stream *
pool_call_stream(struct pool_call *call)
{
    static uint64_t next_stream_id = 1;
    if (call->sess != NULL && call->sess->sse)
        return pool_session_sse_stream(call); /* 2024-11-05: the session's one stream */
    if (pools.batch != NULL)
        return pool_batch_call_stream(call); /* a batch's request: the batch's one stream */
    /* A stateless revision's stream is the request's alone; replayed only if the revision resumes.
     */
    bool resumable = call->rev->resumable && revision_over(call->rev, REVISION_STATELESS);
    /* A pooled session's call (not its initialize) resumes (pool_session_stream.c) */
    bool session = call->sess != NULL && !call->init;
    if (session)
        call->st = stream_new(pool_session_stream_id(), false, pool_session_replay_bytes());
    else
        call->st =
            stream_new(next_stream_id++, false, resumable ? pools.cfg->replay_buffer_bytes : 0);
    stream_own(call->st)->owner = call;
    /* The HTTP request reads it from now until pool_stream_detach. */
    stream_own(call->st)->attached = true;
    call->pool->row->ctr.requests++;
    if (session)
        pool_session_stream_prime(call);
    return stream_ref(call->st);
}

/*
 * Pushes one event on the call's stream. A pool child is shared, so a slow reader never pauses it
 * (every other client of that child would wait): its stream takes what the call must get (the
 * answer, an error, an input round) whatever its length, and pool_push_note drops notifications
 * past stream_queue_bytes. So one stream holds at most the ceiling plus one answer.
 */
void
pool_push(struct pool_call *call, const struct iovec *iov, int n)
{
    struct stream *st = call->st;
    if (st == NULL)
        return; /* held: between its input rounds the call has no stream */
    stream_push_shared(st, iov, n, pools.line);
}

void
pool_push_note(struct pool_call *call, const struct iovec *iov, int n)
{
    struct stream *st = call->st;
    if (st != NULL && stream_pending(st) > pools.cfg->stream_queue_bytes) {
        call->pool->row->ctr.slow_dropped++;
        return;
    }
    pool_push(call, iov, n);
}

/*
 * The JSON-RPC error code of the answer just pushed, for the HTTP status of a one-object answer.
 * A held call has no stream (between its input rounds): nothing to record.
 */
static void
pool_answer_code(struct pool_call *call, int code)
{
    if (call->st != NULL)
        stream_own(call->st)->answer_code = code;
}

/* The call is over: its stream ends (everything pushed stays readable), the call is freed. */
void
pool_call_end(struct pool_call *call)
{
    pool_bridge_forget(call);
    pool_listen_forget(call);
    pool_session_modern_forget(call);
    pool_session_unlink(call);
    pool_caps_release(call);
    audit_call_end(call->audit);
    call->audit = NULL;
    if (call->p != NULL) {
        call->p->owner = NULL;
        loop_timer_del(call->p->timer);
        call->p->timer = NULL;
    }
    if (call->batch != NULL) {
        pool_batch_call_end(call); /* the batch's stream ends with its last call */
    } else if (call->st != NULL) {
        stream_own(call->st)->owner = NULL;
        if (!call->st_shared)
            stream_end(call->st);
        stream_unref(call->st);
    }
    free(call->body); /* a queued copy, or NULL */
    free(call->trace);
    free(call);
}

/* A JSON-RPC error for the client's id (raw) on the call's stream, as its answer. */
static void
pool_push_error(struct pool_call *call, const char *id, size_t idlen, int code, const char *message)
{
    size_t len;
    char *e = jsonrpc_error_new(id, idlen, code, message, &len);
    struct iovec iov = { e, len };
    pool_push(call, &iov, 1);
    free(e);
    pool_answer_code(call, code);
    audit_call_error(call->audit, code);
}

void
pool_call_error(struct pool_call *call, const char *id, size_t idlen, int code, const char *message)
{
    pool_push_error(call, id, idlen, code, message);
    struct pending *p = call->p;
    struct pool_child *c = call->c;
    pool_call_end(call);
    if (p != NULL && p->state == PENDING_FORWARDED)
        pending_del(&c->r.pt, p);
}

void
pool_call_refuse_version(struct pool_call *call, const char *id, size_t idlen)
{
    const char *names[REVISION_SET_MAX + 1];
    revision_set_names(call->pool->speaks, names);
    size_t len;
    char *e = jsonrpc_version_error_new(id, idlen, call->rev->name, names, &len);
    struct iovec iov = { e, len };
    pool_push(call, &iov, 1);
    free(e);
    pool_answer_code(call, JSONRPC_UNSUPPORTED_VERSION);
    audit_call_error(call->audit, JSONRPC_UNSUPPORTED_VERSION);
    pool_call_end(call);
}

void
pool_call_fail(struct pool_call *call, int code, const char *message)
{
    struct jsonrpc_info info;
    if (call->p != NULL)
        pool_call_error(call, call->p->orig_id, call->p->orig_id_len, code, message);
    else if (call->body != NULL && jsonrpc_scan(call->body, call->len, &info, NULL) == JSONRPC_OK)
        pool_call_error(call, call->body + info.id.off, info.id.len, code, message);
    else
        pool_call_error(call, NULL, 0, code, message);
}

void
pool_call_cancel(struct pool_call *call, enum relay_reason why)
{
    struct pending *p = call->p;
    struct pool_child *c = call->c;
    audit_call_cancel(call->audit, relay_reasons[why].label);
    if (p != NULL && relay_cancel(&c->r, p, why)) {
        /* A legacy child's question it wrote before reading the cancel may still come. */
        if (call->pool->era != CONFIG_ERA_STATELESS && why != RELAY_CANCEL_SHUTDOWN)
            pool_bridge_cancelled(c);
        else if (call->pool->qhead != NULL)
            pool_rooms_due(); /* no fence: the slot is free now for what waits */
    } else {
        relay_count(call->pool->stats,
                    why); /* nothing at a child: queued, or answered while held */
        if (p != NULL && call->pool->qhead != NULL)
            pool_rooms_due(); /* a task-augmented call's slot, freed with no cancel sent */
    }
    if (why == RELAY_CANCEL_DISCONNECT) {
        pool_call_end(call);
        return;
    }
    char message[128];
    if (why == RELAY_CANCEL_TIMEOUT && p != NULL)
        snprintf(message, sizeof(message), "request timed out after %" PRIu64 " ms at the gateway",
                 util_now_ms() - p->start_ms);
    else
        snprintf(message, sizeof(message), "%s", relay_reasons[why].text);
    size_t len;
    char *e = jsonrpc_error_new(p != NULL ? p->orig_id : NULL, p != NULL ? p->orig_id_len : 0,
                                JSONRPC_INTERNAL_ERROR, message, &len);
    struct iovec iov = { e, len };
    pool_push(call, &iov, 1);
    free(e);
    pool_call_end(call);
}

void
pool_call_unqueue(struct pool_call *call)
{
    struct pool *p = call->pool;
    struct pool_call **q = &p->qhead, *prev = NULL;
    while (*q != NULL && *q != call) {
        prev = *q;
        q = &(*q)->qnext;
    }
    if (*q == call) {
        *q = call->qnext;
        if (p->qtail == call)
            p->qtail = prev;
        p->queued--;
        call->qnext = NULL;
    }
}

void
pool_call_drop_queued(struct pool_call *call, enum relay_reason why)
{
    pool_call_unqueue(call);
    relay_count(call->pool->stats, why);
    audit_call_cancel(call->audit, relay_reasons[why].label);
    pool_call_end(call);
}

void
pool_stream_detach(struct stream *st)
{
    struct pool_call *call = stream_own(st)->owner;
    stream_own(st)->attached = false;
    if (call != NULL) {
        /* Closing the stream is the cancel: at once, no grace. */
        stream_mark_dropped(st);
        stream_discard(st);
        if (call->listen != NULL) {
            pool_call_end(call); /* a listener: the subscription ends */
        } else if (call->c == NULL) {
            pool_call_drop_queued(call, RELAY_CANCEL_DISCONNECT);
        } else {
            pool_call_cancel(call, RELAY_CANCEL_DISCONNECT);
        }
    }
    stream_unref(st);
}

/* --- client -> child ------------------------------------------------------------------------ */

/* A tools/call the server's policy hides from the token (relay_refuse_hidden): its own stream. */
struct stream *
pool_refuse_hidden(struct pool *p, const char *body, const struct jsonrpc_info *info,
                   const struct pool_meta *meta)
{
    char message[RELAY_REFUSAL_MAX];
    if (!relay_refuse_hidden(p->srv->policy, policy_bits(p->srv->policy, meta->grants), body, info,
                             meta->principal, p->name, NULL, message))
        return NULL;
    struct pool_call *call = xcalloc(1, sizeof(*call));
    call->pool = p;
    call->rev = meta->rev;
    call->log_level = -1;
    struct stream *st = pool_call_stream(call);
    pool_call_error(call, body + info->id.off, info->id.len, JSONRPC_INVALID_PARAMS, message);
    return st;
}

struct stream *
pool_refuse_version(struct pool *p, const char *body, const struct jsonrpc_info *info,
                    const struct pool_meta *meta)
{
    struct pool_call *call = xcalloc(1, sizeof(*call));
    call->pool = p;
    call->rev = meta->rev;
    call->log_level = -1;
    struct stream *st = pool_call_stream(call);
    pool_call_refuse_version(call, body + info->id.off, info->id.len);
    log_debug(NULL, "pool %s: %s of %s refused: its children do not speak that revision", p->name,
              info->method, meta->rev->name);
    return st;
}

static void
pool_expired(void *owner, struct pending *p)
{
    (void)owner;
    if (p->owner != NULL)
        pool_call_cancel(p->owner, RELAY_CANCEL_TIMEOUT);
}

static void
pool_arm_timeout(struct pool_call *call)
{
    const struct config_server *srv = call->pool->srv;
    /* tasks/result waits for its task's end, however long it runs. */
    if (strcmp(call->p->method, "subscriptions/listen") != 0
        && strcmp(call->p->method, "tasks/result") != 0)
        relay_arm_timeout(&call->c->r, call->p, srv->request_timeout_ms,
                          srv->request_timeout_max_ms);
}

/* server/discover of a legacy child: the gateway's answer, made from its initialize. */
static void
pool_discover_answer(struct pool_call *call, const char *id, size_t idlen)
{
    struct pool *p = call->pool;
    struct iovec iov[5];
    p->row->ctr.answered++;
    pool_push(call, iov, jsonrpc_result_iov(iov, id, idlen, p->discover, p->discover_len, false));
    pool_call_end(call);
}

/*
 * Sends body (the request info describes) to c as call's: minted id and token, the timeout armed.
 * A revision the pool's children do not speak, a method the pool's era does not serve, or a legacy
 * child's server/discover, is answered here (the call ends). -1 when the child's stdin refuses it
 * (the call is untouched).
 */
static int
pool_call_send(struct pool_call *call, struct pool_child *c, const char *body, size_t len,
               const struct jsonrpc_info *info)
{
    c->used_seq = ++pools.use_seq; /* the least recently used is stopped first (principal pools) */
    char *own = NULL;              /* a pooled session's request as a stateless child takes it */
    struct jsonrpc_info oinfo;
    if (call->sess != NULL && call->pool->era == CONFIG_ERA_STATELESS) {
        int code;
        const char *why = NULL;
        own = pool_session_modern_body(call, body, &len, info, &oinfo, &code, &why);
        if (own == NULL) {
            pool_call_error(call, body + info->id.off, info->id.len, code, why);
            return 0;
        }
        body = own;
        info = &oinfo;
    } else if (call->sess != NULL && call->init) {
        /* A pooled session's initialize is the gateway's to answer, once a child is ready. */
        pool_session_init_answer(call, body + info->id.off, info->id.len);
        return 0;
    }
    if (call->sess != NULL) {
        /* Its methods were judged by the session (pool_session_request): legacy, passed on. */
    } else if (!pool_speaks(call->pool, call->rev)) {
        pool_call_refuse_version(call, body + info->id.off, info->id.len);
        return 0;
    }
    if (call->sess == NULL && !pool_method_served(call->pool, call->rev, info->method)) {
        pool_call_error(call, body + info->id.off, info->id.len, JSONRPC_METHOD_NOT_FOUND,
                        "Method not found");
        return 0;
    }
    if (call->pool->era == CONFIG_ERA_LEGACY && strcmp(info->method, "server/discover") == 0) {
        pool_discover_answer(call, body + info->id.off, info->id.len);
        return 0;
    }
    if (call->pool->retired && strcmp(info->method, "subscriptions/listen") == 0) {
        /*
         * A listen that waited in a retired pool's queue for a starting child: it would hold that
         * child (and the pool) for as long as its client stays. It ends as the pool's listeners
         * ended, to listen again on the new pool.
         */
        pool_call_error(call, body + info->id.off, info->id.len, JSONRPC_INTERNAL_ERROR,
                        call->pool->retired_why->listen);
        return 0;
    }
    if (call->pool->era == CONFIG_ERA_LEGACY && strcmp(info->method, "subscriptions/listen") == 0) {
        if (!pool_listen_open(call, body, info))
            pool_call_error(call, body + info->id.off, info->id.len, JSONRPC_INVALID_PARAMS,
                            "params.notifications must be an object; resourceSubscriptions at "
                            "most 256 URIs of at most 2048 bytes");
        return 0;
    }
    relay_make_room(&c->r, 2 * c->pool->srv->pool_child_max_inflight);
    struct pending *p = pending_add(&c->r.pt, PENDING_TO_CHILD, body + info->id.off, info->id.len,
                                    info->method, 0, util_now_ms());
    if (info->progress_token.len)
        pending_set_token(p, body + info->progress_token.off, info->progress_token.len);
    /* A pooled session's task outlives its request: never a cancel (relay.h). */
    p->task = call->sess != NULL && info->has_task;
    char idbuf[24];
    size_t idlen = relay_id_text(p, idbuf);
    struct relay_edit ed[2 + TRACE_EDITS_MAX] = {
        { info->id.off, info->id.len, idbuf, idlen },
        { info->progress_token.off, info->progress_token.len, idbuf, idlen },
    };
    int n = info->progress_token.len ? 2 : 1;
    char text[TRACE_EDIT_BUF];
    if (call->trace != NULL) {
        if (own == NULL) /* else in own already */
            n += trace_edits(call->trace, body, len, info, text, ed + n);
        trace_id_copy(call->trace, p->trace_id);
        audit_call_trace(call->audit, pending_trace_id(p));
    }
    int sent = relay_send_spliced(&c->r, body, len, ed, n);
    free(own);
    if (sent == -1) {
        pending_del(&c->r.pt, p);
        return -1;
    }
    call->c = c;
    call->p = p;
    p->owner = call;
    p->start_us = util_now_us();
    if (call->sess == NULL) /* a stateless call: the pool child it ran on */
        audit_call_where(call->audit, c->r.tag);
    pool_arm_timeout(call);
    return 0;
}

void
pool_call_dispatch(struct pool_call *call, struct pool_child *c)
{
    struct jsonrpc_info info;
    if (jsonrpc_scan(call->body, call->len, &info, NULL) != JSONRPC_OK) {
        pool_call_fail(call, JSONRPC_INTERNAL_ERROR, "internal error");
        return;
    }
    char *body = call->body;
    call->body = NULL; /* pool_call_send may end the call: the copy is freed here */
    if (pool_call_send(call, c, body, call->len, &info) == -1) {
        call->body = body; /* for the error's id */
        pool_call_fail(call, JSONRPC_INTERNAL_ERROR, relay_status_text(POOL_E_BUSY));
        return;
    }
    free(body);
}

int
pool_call_start(struct pool_call *call, struct pool_child *c, const char *body, size_t len,
                const struct jsonrpc_info *info)
{
    return pool_call_send(call, c, body, len, info);
}

/* --- child -> client ------------------------------------------------------------------------- */

/*
 * The child's answer to a call (of method), to the client's id: resultType, ttlMs and cacheScope
 * where the result lacks them, pushed on the call's stream (which it ends, with the
 * call, in the caller).
 */
void
pool_deliver(struct pool_call *call, const char *method, const char *id, size_t idlen,
             const char *line, size_t len, const struct jsonrpc_info *info)
{
    const struct config_server *srv = call->pool->srv;
    char *copy = NULL;
    struct jsonrpc_info finfo;
    bool tools =
        srv->policy != NULL && info->kind == JSONRPC_RESULT && strcmp(method, "tools/list") == 0;
    if (tools
        && relay_filter_tools(call->pool->name, srv->policy, call->grants, &line, &len, &info,
                              &finfo, &copy)
               == RELAY_FILTER_REFUSED) {
        pool_push_error(call, id, idlen, JSONRPC_INTERNAL_ERROR, RELAY_FILTER_REFUSAL);
        return;
    }
    /* What a token may see differs by token: such a list is never for a shared cache. */
    bool private_list = tools && policy_per_token(srv->policy);
    char stamp[96];
    size_t slen = 0;
    if (call->rev->result_fields && info->kind == JSONRPC_RESULT && info->result.len >= 2
        && line[info->result.off] == '{') {
        bool cacheable = pool_in(pool_cacheable, ARRAY_LEN(pool_cacheable), method);
        if (info->result_type.len == 0)
            slen += (size_t)snprintf(stamp + slen, sizeof(stamp) - slen,
                                     ",\"resultType\":\"complete\"");
        if (cacheable && info->result_ttl.len == 0)
            slen += (size_t)snprintf(stamp + slen, sizeof(stamp) - slen, ",\"ttlMs\":%" PRIu64,
                                     srv->cache_ttl_ms);
        if (cacheable && info->result_scope.len == 0)
            slen += (size_t)snprintf(stamp + slen, sizeof(stamp) - slen, ",\"cacheScope\":\"%s\"",
                                     srv->cache_public && !private_list ? "public" : "private");
    }
    struct relay_edit ed[3] = { { info->id.off, info->id.len, id, idlen } };
    int n = 1;
    if (private_list && info->result_scope.len != 0)
        ed[n++] =
            (struct relay_edit){ info->result_scope.off, info->result_scope.len, "\"private\"", 9 };
    if (slen > 0)
        ed[n++] = (struct relay_edit){ info->result.off + 1, 0, stamp,
                                       jsonrpc_members_first(line, info->result, stamp, slen) };
    struct iovec iov[7];
    int k = relay_splice(line, len, ed, n, iov);
    call->pool->row->ctr.answered++;
    pool_push(call, iov, k);
    int code;
    if (info->kind == JSONRPC_ERROR && jsonrpc_error_code(line, len, &code) == 0)
        pool_answer_code(call, code); /* an error is rare: its code is read with jansson */
    free(copy);
}

static void
pool_child_answer(void *owner, struct pending *p, const char *line, size_t len,
                  const struct jsonrpc_info *info)
{
    struct pool_child *c = owner;
    if (p->gw_id == c->start_id) {
        pool_child_start_answer(c, line, len, info);
        return;
    }
    struct pool_call *call = p->owner;
    if (call == NULL) {
        /* The gateway's own request with an entry: the fence's ping (pool_bridge.c). */
        if (!pool_bridge_fence_done(c, p, false))
            pending_del(&c->r.pt, p);
        return;
    }
    if (call->modern != NULL && pool_session_modern_answer(call, c, p, line, len, info))
        return; /* a pooled session's initialize or input round, at a stateless child */
    audit_call_answer(call->audit, line, len, info);
    if (call->st == NULL) {
        /* Held between rounds: the answer waits for the client's retry (pool_bridge_resume). */
        call->final = xmemdup(line, len);
        call->final_len = len;
        for (size_t i = 0; i < call->nasks; i++)
            call->asks[i].answered = true; /* the child waits for none of them any more */
        log_info(c->tag, "held %s answered by the child: kept for the client's retry", p->method);
        pending_del(&c->r.pt, p);
        call->p = NULL;
        /*
         * Done with its child: out of the child's table, the call is not ended with it (which
         * frees the child while the call waits for its retry), so it must not point at it.
         */
        call->c = NULL;
        return;
    }
    metrics_observe(&call->pool->row->latency, util_now_us() - p->start_us);
    if (call->task_op == POOL_TASK_NONE || !pool_task_deliver(call, p, line, len, info))
        pool_deliver(call, p->method, p->orig_id, p->orig_id_len, line, len, info);
    pending_del(&c->r.pt, p);
    call->p = NULL;
    pool_call_end(call);
}

/*
 * Whether p, the request a notification of c's names (by its progress token or its subscription
 * id), is a client's: the gateway's own (a start, a fence) is no longer any client's (counted).
 */
static bool
pool_related(struct pool_child *c, const struct pending *p)
{
    if (p->owner != NULL)
        return true;
    c->pool->row->ctr.late_dropped++;
    return false;
}

/* line, with the bytes at sp replaced by with, on p's stream. */
static void
pool_push_retagged(struct pending *p, const char *line, size_t len, struct jsonrpc_span sp,
                   const char *with, size_t with_len)
{
    struct relay_edit ed = { sp.off, sp.len, with, with_len };
    struct iovec iov[3];
    int k = relay_splice(line, len, &ed, 1, iov);
    pool_push_note(p->owner, iov, k);
}

/* Progress: on the request's stream, with the client's own token. */
static void
pool_child_progress(void *owner, struct pending *p, const char *line, size_t len,
                    const struct jsonrpc_info *info)
{
    if (!pool_related(owner, p))
        return;
    struct pool_call *call = p->owner;
    if (call->pool->srv->request_timeout_max_ms > 0 && p->timer != NULL)
        pool_arm_timeout(call);
    pool_push_retagged(p, line, len, info->progress_token, p->token, p->token_len);
}

/* Log levels of RFC 5424 as MCP names them, least severe first. */
int
pool_log_level(const char *line, struct jsonrpc_span sp)
{
    static const char *const names[] = { "debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency" };
    char v[16];
    if (!jsonrpc_string_at(line, sp, v, sizeof(v), NULL))
        return -1;
    for (size_t i = 0; i < ARRAY_LEN(names); i++)
        if (strcmp(v, names[i]) == 0)
            return (int)i;
    return -1;
}

/* Whether two calls are one pooled session's (stateless requests are each their own client). */
static bool
pool_same_session(const struct pool_call *a, const struct pool_call *b)
{
    return a->sess != NULL && a->sess == b->sess;
}

static void
pool_child_log(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct pool_child *c = owner;
    struct pending *first = NULL;
    bool one_owner = true;
    for (struct pending *p = c->r.pt.head; p != NULL && one_owner; p = p->next) {
        if (p->state != PENDING_FORWARDED || p->owner == NULL)
            continue;
        if (first == NULL)
            first = p;
        else
            one_owner = pool_same_session(first->owner, p->owner);
    }
    if (first == NULL || !one_owner || pool_task_child_busy(c)) {
        /* No request, or several of different clients, or a task that may write at any time:
         * whose line it is cannot be known. */
        c->pool->row->ctr.unattributed++;
        return;
    }
    /* One request, or several of one pooled session: the line is that client's (on the stream
     * of its oldest call there; stdio says no more about which call wrote it). */
    struct pool_call *call = first->owner;
    int level = pool_log_level(line, info->level);
    int want = call->sess != NULL ? call->sess->log_level : call->log_level;
    if (want < 0 || level < want) {
        c->pool->row->ctr.logs_filtered++;
        return;
    }
    struct iovec iov = { (void *)(uintptr_t)line, len };
    pool_push_note(call, &iov, 1);
}

/* A listen's notification: on the listen's stream, with the client's id. */
static void
pool_child_subscription(void *owner, struct pending *p, const char *line, size_t len,
                        const struct jsonrpc_info *info)
{
    if (pool_related(owner, p))
        pool_push_retagged(p, line, len, info->meta_subscription, p->orig_id, p->orig_id_len);
}

/* A request of the child's: ping is answered here; the others may become input rounds. */
static void
pool_child_request(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct pool_child *c = owner;
    if (strcmp(info->method, "ping") != 0) {
        pool_bridge_ask(c, line, len, info);
        return;
    }
    size_t idlen = info->id.len <= pools.cfg->max_id_bytes ? info->id.len : 0;
    struct iovec iov[5];
    int n = jsonrpc_result_iov(iov, idlen ? line + info->id.off : "null", idlen ? idlen : 4, "{}",
                               2, true);
    if (pool_send(c, iov, n) == -1)
        log_warn(c->tag, "answer to the child's ping not delivered");
}

/* The child withdrew one of its questions (notifications/cancelled): pool_bridge.c knows them. */
static void
pool_child_withdrawn(void *owner, struct pending *p, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    (void)p; /* a pool child's questions are held by their calls, not in the table */
    if (pool_session_listen_cancelled(owner, line, info))
        return; /* it ended the gateway's own listen */
    pool_bridge_withdrawn(owner, line, len, info);
}

/* Any other notification: a legacy child's list change or update may be a listen's. */
static void
pool_child_notification(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct pool_child *c = owner;
    /*
     * A string subscriptionId (no client listen has one: theirs are minted numbers) or a stateless
     * child's: the gateway's own listen for pooled sessions (pool_session_listen.c), or nobody's.
     */
    if (info->meta_subscription.len != 0 || c->pool->era != CONFIG_ERA_LEGACY) {
        if (!pool_session_listen_note(c, line, len, info))
            c->pool->row->ctr.unattributed++;
        return;
    }
    if (strcmp(info->method, "notifications/tasks/status") == 0) {
        if (!pool_task_status(c, line, len, info)) /* its session's alone */
            c->pool->row->ctr.unattributed++;
        return;
    }
    /* A list change is every session's of the server (their GET streams), and listeners'. */
    size_t n = strlen(info->method);
    bool sessions = false;
    if (c->state == POOL_CHILD_READY && n > 13
        && strcmp(info->method + n - 13, "/list_changed") == 0
        && strncmp(info->method, "notifications/", 14) == 0)
        sessions = pool_session_fanout(c->pool, line, len);
    else if (c->state == POOL_CHILD_READY
             && strcmp(info->method, "notifications/resources/updated") == 0)
        sessions = pool_session_updated(c->pool, line, len, info);
    if (!pool_listen_notify(c, line, info) && !sessions)
        c->pool->row->ctr.unattributed++;
}

/* An answer with no entry: the gateway's own resources/subscribe or unsubscribe (pool_listen.c). */
static bool
pool_child_stray(void *owner, const char *line, const struct jsonrpc_info *info)
{
    return pool_listen_answer(owner, line, info) || pool_session_level_answer(owner, line, info)
           || pool_session_listen_answer(owner, line, info);
}

static void
pool_child_ended(void *owner, const char *reason)
{
    pool_child_retire(owner, reason, true);
}

const struct relay_ops pool_relay_ops = {
    .answer = pool_child_answer,
    .stray = pool_child_stray,
    .request = pool_child_request,
    .progress = pool_child_progress,
    .cancelled = pool_child_withdrawn,
    .subscription = pool_child_subscription,
    .log = pool_child_log,
    .notification = pool_child_notification,
    .expired = pool_expired,
    .gone = pool_child_ended,
};

void
pool_child_line(char *line, size_t len, struct msg *shared, void *arg)
{
    struct pool_child *c = arg;
    if (c->state == POOL_CHILD_GONE)
        return;
    if (!c->heard) {
        c->heard = true;
        if (c->state == POOL_CHILD_READY)
            pool_start_ok(c->pool); /* ready at its start (stateless): its first line proves it */
    }
    pools.line = shared;
    relay_line(&c->r, line, len);
    pools.line = NULL;
    pool_child_room(c); /* an answer frees a slot for what waits in the queue */
}

void
pool_child_gone(const char *reason, void *arg)
{
    struct pool_child *c = arg;
    relay_gone(&c->r, reason); /* pool_relay_ops' gone: the child retires */
}
