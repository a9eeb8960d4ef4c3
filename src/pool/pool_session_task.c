/* SPDX-License-Identifier: MIT */
/*
 * A pooled session's tasks (2025-11-25; session_mode = pooled). Many sessions share a child and
 * several children serve one server, so a task is the child's that created it, and the session
 * names it by an id the gateway minted (128 random bits, base64url): never the child's own, which
 * another child may have minted too, and which one session could guess of another's. Each task of
 * a session is a record here (struct pool_task: the session's id, the child and its id, the Task
 * as the child last described it), in the session's list and its child's:
 *   - a task-augmented request is a pool call like any other; its CreateTaskResult makes the
 *     record, and the session gets the result with its own id spliced in;
 *   - tasks/get, tasks/result and tasks/cancel name the session's id: they go to that child alone,
 *     under the child's id, and come back with the session's id spliced in (result.taskId, or the
 *     related-task _meta of a tasks/result);
 *   - tasks/list is answered here, from the session's own records;
 *   - notifications/tasks/status of a child reaches only the owning session (its GET stream, else
 *     the stream of its newest call), with the session's id;
 *   - a task whose child ended is reported failed (tasks/get, tasks/list), its tasks/result gets an
 *     error and its tasks/cancel -32602 (terminal); one past its ttl is forgotten (-32602: unknown);
 *   - the session's end (DELETE, expiry, the operator) sends the child a tasks/cancel of each task
 *     not yet terminal, as the gateway's own request (relay_task_cancel), whose answer is dropped;
 *     a CreateTaskResult that comes after its call was cancelled (the session's end, a drop, a
 *     timeout, the client's cancel) is the relay's: it cancels that task at the child itself.
 * A session holds at most max_inflight_per_session records together with its task-augmented calls
 * in flight; past it the oldest terminal record is forgotten, and with none a new task-augmented
 * request is refused. While a child holds a task not yet terminal, its questions and log lines
 * cannot be attributed by the one-call-in-flight rule (the task may write them whenever it runs):
 * pool_task_child_busy says so to pool_bridge_ask and the log's attribution.
 *
 * Lifetimes: the session owns its records; pool_task_session_end (from the session's one close
 * path, after its calls ended) frees them. A call on a record holds a reference (refs), so a record
 * is never forgotten under a call; pool_task_call_end gives it back. The child's list is cleared by
 * pool_task_child_gone before the child is freed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "log.h"
#include "pool_int.h"

#define PTASK_RELATED      "io.modelcontextprotocol/related-task"
#define PTASK_OBJECT_MAX   16384 /* bytes of a Task object kept (a longer one: its status alone) */

/* A JSON-RPC error as the call's answer (the caller ends the call). */
static void
ptask_push_error(struct pool_call *call, const struct pending *p, int code, const char *message)
{
    size_t len;
    char *e = jsonrpc_error_new(p->orig_id, p->orig_id_len, code, message, &len);
    struct iovec iov = { e, len };
    pool_push(call, &iov, 1);
    free(e);
}

/* The session's record of id (the session's own), or NULL. Records past their ttl go first. */
static struct pool_task *
ptask_find(struct pool_session *s, const char *id)
{
    uint64_t now = util_now_ms();
    struct pool_task **pp = &s->tasks;
    while (*pp != NULL) {
        struct pool_task *t = *pp;
        if (t->refs == 0 && t->until_ms != 0 && now >= t->until_ms) {
            *pp = t->snext;
            pool_task_free(t);
            s->ntasks--;
            continue;
        }
        if (strcmp(t->id, id) == 0)
            return t;
        pp = &t->snext;
    }
    return NULL;
}

static void
ptask_child_unlink(struct pool_task *t)
{
    if (t->c == NULL)
        return;
    UTIL_DLIST_UNLINK(t->c->tasks, t, cprev, cnext);
    t->c = NULL;
    t->cprev = t->cnext = NULL;
}

void
pool_task_free(struct pool_task *t)
{
    ptask_child_unlink(t);
    free(t->child_raw);
    free(t->task);
    free(t);
}

/* Remembers the Task object at sp of line (the child's bytes) and what it says of its status. */
static void
ptask_keep(struct pool_task *t, const char *line, struct jsonrpc_span sp)
{
    struct jsonrpc_span st;
    char status[24];
    if (jsonrpc_member_at(line, sp, "status", &st) == 0 && st.len > 0
        && jsonrpc_string_at(line, st, status, sizeof status, NULL))
        t->terminal = jsonrpc_task_terminal(status);
    if (sp.len == 0 || sp.len > PTASK_OBJECT_MAX || line[sp.off] != '{')
        return;
    free(t->task);
    t->task = xmemdup(line + sp.off, sp.len);
    t->task_len = sp.len;
}

/* The session's task-augmented calls waiting for their CreateTaskResult. */
static size_t
ptask_pending_creates(const struct pool_session *s)
{
    size_t n = 0;
    for (const struct pool_call *c = s->calls; c != NULL; c = c->snext)
        n += c->task_op == POOL_TASK_CREATE;
    return n;
}

/* Room for one more record: the oldest terminal one unreferenced is forgotten if need be. */
static bool
ptask_room(struct pool_session *s)
{
    size_t max = pools.cfg->max_inflight_per_session;
    if (s->ntasks + ptask_pending_creates(s) < max)
        return true;
    struct pool_task **victim = NULL;
    for (struct pool_task **pp = &s->tasks; *pp != NULL; pp = &(*pp)->snext)
        if (((*pp)->terminal || (*pp)->c == NULL) && (*pp)->refs == 0)
            victim = pp; /* the list is newest first: the last one found is the oldest */
    if (victim == NULL)
        return false;
    struct pool_task *t = *victim;
    *victim = t->snext;
    pool_task_free(t);
    s->ntasks--;
    return true;
}

bool
pool_task_child_busy(const struct pool_child *c)
{
    uint64_t now = util_now_ms();
    for (const struct pool_task *t = c->tasks; t != NULL; t = t->cnext)
        if (!t->terminal && (t->until_ms == 0 || now < t->until_ms))
            return true;
    return false;
}

/* --- the session's requests ------------------------------------------------------------------ */

/* A Task object for t whose child ended: failed, as the child last described it otherwise. */
static char *
ptask_failed_object(const struct pool_task *t, size_t *len)
{
    struct buf_out o = { .full = false };
    buf_init(&o.b, PTASK_OBJECT_MAX + 512);
    char now[UTIL_RFC3339_MAX];
    util_rfc3339(util_now_unix_ms(), now);
    buf_out_printf(&o, "{\"taskId\":\"%s\",\"status\":\"failed\",\"statusMessage\":"
                       "\"the server's process that ran it ended\"",
                   t->id);
    struct jsonrpc_span sp = { 0, t->task_len };
    struct jsonrpc_span v;
    if (t->task != NULL && jsonrpc_member_at(t->task, sp, "createdAt", &v) == 0 && v.len > 0)
        buf_out_printf(&o, ",\"createdAt\":%.*s", (int)v.len, t->task + v.off);
    else
        buf_out_printf(&o, ",\"createdAt\":\"%s\"", now);
    buf_out_printf(&o, ",\"lastUpdatedAt\":\"%s\"", now);
    if (t->task != NULL && jsonrpc_member_at(t->task, sp, "ttl", &v) == 0 && v.len > 0)
        buf_out_printf(&o, ",\"ttl\":%.*s", (int)v.len, t->task + v.off);
    else
        buf_out_printf(&o, ",\"ttl\":null");
    buf_out_printf(&o, "}");
    *len = buf_used(&o.b);
    char *s = xmemdup(buf_head(&o.b), *len);
    buf_clear(&o.b);
    return s;
}

/* t's Task object as the session sees it (its own id in it), appended to o. */
static void
ptask_put_object(struct buf_out *o, const struct pool_task *t)
{
    struct jsonrpc_span sp = { 0, t->task_len }, id;
    if (t->c == NULL || t->task == NULL || jsonrpc_member_at(t->task, sp, "taskId", &id) != 0
        || id.len == 0) {
        size_t len;
        char *f = ptask_failed_object(t, &len);
        if (t->c != NULL) /* no object kept: what is known */
            buf_out_printf(o, "{\"taskId\":\"%s\",\"status\":\"%s\"}", t->id,
                           t->terminal ? "completed" : "working");
        else
            buf_out_printf(o, "%.*s", (int)len, f);
        free(f);
        return;
    }
    buf_out_printf(o, "%.*s\"%s\"%.*s", (int)id.off, t->task, t->id,
                   (int)(t->task_len - id.off - id.len), t->task + id.off + id.len);
}

/* tasks/list: the session's own records, each as the child last described it. */
static struct stream *
ptask_list(struct pool_session *s, const char *body, const struct jsonrpc_info *info)
{
    (void)ptask_find(s, ""); /* forgets the records past their ttl */
    struct buf_out o = { .full = false };
    buf_init(&o.b, (size_t)1 << 24);
    buf_out_printf(&o, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{\"tasks\":[", (int)info->id.len,
                   body + info->id.off);
    for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext) {
        if (t != s->tasks)
            buf_out_printf(&o, ",");
        ptask_put_object(&o, t);
    }
    buf_out_printf(&o, "]}}");
    struct stream *st = o.full ? pool_session_error(info, body, JSONRPC_INTERNAL_ERROR,
                                                    "the task list does not fit")
                               : pool_session_local(buf_head(&o.b), buf_used(&o.b));
    buf_clear(&o.b);
    return st;
}

/* A request on a record whose child ended: answered here (the task failed with its child). */
static struct stream *
ptask_orphan(struct pool_task *t, enum pool_task_op op, const char *body,
             const struct jsonrpc_info *info)
{
    if (op == POOL_TASK_RESULT)
        return pool_session_error(info, body, JSONRPC_INTERNAL_ERROR,
                                  "task failed: the server's process that ran it ended");
    if (op == POOL_TASK_CANCEL)
        return pool_session_error(info, body, JSONRPC_INVALID_PARAMS,
                                  "task is already in a terminal status (failed)");
    size_t flen;
    char *f = ptask_failed_object(t, &flen);
    struct buf_out o = { .full = false };
    buf_init(&o.b, flen + info->id.len + 64);
    buf_out_printf(&o, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":%.*s}", (int)info->id.len,
                   body + info->id.off, (int)flen, f);
    struct stream *st = pool_session_local(buf_head(&o.b), buf_used(&o.b));
    buf_clear(&o.b);
    free(f);
    return st;
}

/*
 * Whether s's revision has tasks (its row's tasks): then, and only then, a call's stream is its own
 * and its owner the call (a batch's stream is owned by the batch, a 2024-11-05 session's by none).
 */
static bool
ptask_served(const struct pool_session *s)
{
    return s->rev != NULL && s->rev->tasks && !s->sse && pools.batch == NULL;
}

struct stream *
pool_task_request(struct pool_session *s, const struct config_server *srv, char *body, size_t len,
                  const struct jsonrpc_info *info, struct pool_meta *meta,
                  enum pool_status *status)
{
    const char *m = info->method;
    enum pool_task_op op = POOL_TASK_NONE;
    if (!ptask_served(s)) {
        /* Before 2025-11-25 (a 2025-03-26 batch's session, a 2024-11-05 one): no tasks/ methods;
         * a request that names a task is an ordinary one, its answer the child's as it is. */
        if (strncmp(m, "tasks/", 6) == 0)
            return pool_session_error(info, body, JSONRPC_METHOD_NOT_FOUND, "Method not found");
        return pool_request(srv, body, len, info, meta, status);
    }
    if (strncmp(m, "tasks/", 6) != 0) {
        /* A task-augmented request: a record's room is kept for its CreateTaskResult. */
        if (!ptask_room(s))
            return pool_session_error(info, body, JSONRPC_INTERNAL_ERROR,
                                      "too many tasks in this session (max_inflight_per_session)");
        struct stream *st = pool_request(srv, body, len, info, meta, status);
        struct pool_call *call = st != NULL ? stream_own(st)->owner : NULL;
        if (call != NULL)
            call->task_op = POOL_TASK_CREATE;
        return st;
    }
    if (strcmp(m, "tasks/list") == 0)
        return ptask_list(s, body, info);
    if (strcmp(m, "tasks/get") == 0)
        op = POOL_TASK_GET;
    else if (strcmp(m, "tasks/result") == 0)
        op = POOL_TASK_RESULT;
    else if (strcmp(m, "tasks/cancel") == 0)
        op = POOL_TASK_CANCEL;
    else
        return pool_session_error(info, body, JSONRPC_METHOD_NOT_FOUND, "Method not found");
    char id[sizeof(((struct pool_task *)0)->id)];
    struct pool_task *t = NULL;
    if (info->task_id.len > 0 && jsonrpc_string_at(body, info->task_id, id, sizeof id, NULL))
        t = ptask_find(s, id);
    if (t == NULL)
        return pool_session_error(info, body, JSONRPC_INVALID_PARAMS,
                                  "unknown task: params.taskId names no task of this session");
    if (t->c == NULL)
        return ptask_orphan(t, op, body, info);
    /* To the child that holds it, under the child's own id. */
    struct relay_edit ed = { info->task_id.off, info->task_id.len, t->child_raw, t->child_raw_len };
    struct iovec iov[3];
    int k = relay_splice(body, len, &ed, 1, iov);
    size_t n = 0;
    char *copy = xmalloc(len - info->task_id.len + t->child_raw_len + 1);
    for (int i = 0; i < k; i++) {
        memcpy(copy + n, iov[i].iov_base, iov[i].iov_len);
        n += iov[i].iov_len;
    }
    copy[n] = '\0';
    struct jsonrpc_info ci;
    if (jsonrpc_scan(copy, n, &ci, NULL) != JSONRPC_OK) {
        free(copy);
        return pool_session_error(info, body, JSONRPC_INTERNAL_ERROR, "internal error");
    }
    meta->child = t->c;
    t->refs++; /* held while the request is made: a call that ends at once gives it back */
    struct stream *st = pool_request(srv, copy, n, &ci, meta, status);
    struct pool_call *call = st != NULL ? stream_own(st)->owner : NULL;
    if (call != NULL) {
        call->task_op = (unsigned char)op;
        call->task = t;
        t->refs++;
    }
    t->refs--;
    free(copy);
    return st;
}

void
pool_task_call_end(struct pool_call *call)
{
    if (call->task != NULL)
        call->task->refs--;
    call->task = NULL;
    call->task_op = POOL_TASK_NONE;
}

/* --- the child's answers and notifications --------------------------------------------------- */

/* line with sp replaced by the session's id t->id, delivered as the call's answer. */
static void
ptask_deliver(struct pool_call *call, const struct pending *p, const char *line, size_t len,
              struct jsonrpc_span sp, const struct pool_task *t)
{
    char with[sizeof t->id + 2];
    int wlen = snprintf(with, sizeof with, "\"%s\"", t->id);
    struct relay_edit ed = { sp.off, sp.len, with, (size_t)wlen };
    struct iovec iov[3];
    int k = relay_splice(line, len, &ed, 1, iov);
    char *copy = xmalloc(len - sp.len + (size_t)wlen + 1);
    size_t n = 0;
    for (int i = 0; i < k; i++) {
        memcpy(copy + n, iov[i].iov_base, iov[i].iov_len);
        n += iov[i].iov_len;
    }
    copy[n] = '\0';
    struct jsonrpc_info ci;
    struct msg *shared = pools.line;
    pools.line = NULL; /* the copy is this function's, not the child's line */
    if (jsonrpc_scan(copy, n, &ci, NULL) == JSONRPC_OK)
        pool_deliver(call, p->method, p->orig_id, p->orig_id_len, copy, n, &ci);
    else
        ptask_push_error(call, p, JSONRPC_INTERNAL_ERROR, "internal error");
    pools.line = shared;
    free(copy);
}

/* A CreateTaskResult: the record is made, the session gets its own id. false: no task in it. */
static bool
ptask_created(struct pool_call *call, struct pending *p, const char *line, size_t len,
              const struct jsonrpc_info *info)
{
    struct pool_session *s = call->sess;
    struct pool_child *c = call->c;
    struct jsonrpc_span task, idsp;
    char child_id[sizeof(((struct pool_task *)0)->child_id)];
    if (!jsonrpc_created_task(line, info, &task, &idsp)
        || !jsonrpc_string_at(line, idsp, child_id, sizeof child_id, NULL))
        return false; /* the child ran it as a plain request, or said something else */
    call->task_op = POOL_TASK_NONE; /* its room is the record's now */
    if (s == NULL || c == NULL || !ptask_room(s)) {
        if (c != NULL)
            relay_task_cancel(&c->r, line + idsp.off, idsp.len);
        ptask_push_error(call, p, JSONRPC_INTERNAL_ERROR,
                         "too many tasks in this session (max_inflight_per_session)");
        return true;
    }
    struct pool_task *t = xcalloc(1, sizeof(*t));
    unsigned char r[16];
    if (crypto_random(r, sizeof r) == -1) {
        free(t);
        relay_task_cancel(&c->r, line + idsp.off, idsp.len);
        ptask_push_error(call, p, JSONRPC_INTERNAL_ERROR, "no randomness for a task id");
        return true;
    }
    util_base64url_encode(r, sizeof r, t->id);
    memcpy(t->child_id, child_id, sizeof child_id);
    t->child_raw = xmemdup(line + idsp.off, idsp.len);
    t->child_raw_len = idsp.len;
    t->sess = s;
    ptask_keep(t, line, task);
    struct jsonrpc_span ttl;
    uint64_t ms;
    if (jsonrpc_member_at(line, task, "ttl", &ttl) == 0 && ttl.len > 0
        && jsonrpc_id_u64(line, ttl, &ms) && ms < UINT64_MAX / 2)
        t->until_ms = util_now_ms() + ms;
    t->snext = s->tasks;
    s->tasks = t;
    s->ntasks++;
    t->c = c;
    t->cnext = c->tasks;
    if (c->tasks != NULL)
        c->tasks->cprev = t;
    c->tasks = t;
    log_info(s->label, "task created at %s: the session's %s is the child's %s", c->tag, t->id,
             t->child_id);
    ptask_deliver(call, p, line, len, idsp, t);
    return true;
}

bool
pool_task_deliver(struct pool_call *call, struct pending *p, const char *line, size_t len,
                  const struct jsonrpc_info *info)
{
    if (call->task_op == POOL_TASK_CREATE)
        return ptask_created(call, p, line, len, info);
    struct pool_task *t = call->task;
    if (t == NULL || info->kind != JSONRPC_RESULT || info->result.len == 0)
        return false; /* an error passes as the child wrote it */
    struct jsonrpc_span sp = { 0, 0 };
    if (call->task_op == POOL_TASK_RESULT) {
        /* Terminal now; its related-task _meta names the task. */
        t->terminal = true;
        struct jsonrpc_span meta, rel;
        if (jsonrpc_member_at(line, info->result, "_meta", &meta) == 0 && meta.len > 0
            && line[meta.off] == '{' && jsonrpc_member_at(line, meta, PTASK_RELATED, &rel) == 0
            && rel.len > 0 && line[rel.off] == '{')
            (void)!jsonrpc_member_at(line, rel, "taskId", &sp);
    } else {
        ptask_keep(t, line, info->result);
        (void)!jsonrpc_member_at(line, info->result, "taskId", &sp);
    }
    if (sp.len == 0 || line[sp.off] != '"')
        return false;
    ptask_deliver(call, p, line, len, sp, t);
    return true;
}

/* The newest of the session's streams: its GET stream, else its newest call's. */
static struct stream *
ptask_stream_of(struct pool_session *s)
{
    if (s->get != NULL)
        return s->get;
    for (struct pool_call *call = s->calls; call != NULL; call = call->snext)
        if (call->st != NULL)
            return call->st;
    return NULL;
}

bool
pool_task_status(struct pool_child *c, const char *line, size_t len,
                 const struct jsonrpc_info *info)
{
    char child_id[sizeof(((struct pool_task *)0)->child_id)];
    if (info->task_id.len == 0
        || !jsonrpc_string_at(line, info->task_id, child_id, sizeof child_id, NULL))
        return false;
    struct pool_task *t = c->tasks;
    while (t != NULL && strcmp(t->child_id, child_id) != 0)
        t = t->cnext;
    if (t == NULL)
        return false; /* no session's: dropped, counted by the caller */
    ptask_keep(t, line, info->params);
    struct stream *st = ptask_stream_of(t->sess);
    if (st == NULL)
        return true; /* the session reads none of its streams now: its next tasks/get says it */
    if (stream_pending(st) > pools.cfg->stream_queue_bytes) {
        c->pool->row->ctr.slow_dropped++;
        return true;
    }
    char with[sizeof t->id + 2];
    int wlen = snprintf(with, sizeof with, "\"%s\"", t->id);
    struct relay_edit ed = { info->task_id.off, info->task_id.len, with, (size_t)wlen };
    struct iovec iov[3];
    int k = relay_splice(line, len, &ed, 1, iov);
    stream_push_shared(st, iov, k, pools.line);
    return true;
}

/* --- endings ---------------------------------------------------------------------------------- */

void
pool_task_child_gone(struct pool_child *c)
{
    while (c->tasks != NULL) {
        struct pool_task *t = c->tasks;
        if (!t->terminal)
            log_info(t->sess->label, "task %s failed: its child %s ended", t->id, c->tag);
        t->terminal = true;
        ptask_child_unlink(t);
    }
}

void
pool_task_session_end(struct pool_session *s, enum relay_reason why)
{
    while (s->tasks != NULL) {
        struct pool_task *t = s->tasks;
        s->tasks = t->snext;
        if (t->c != NULL && !t->terminal && t->c->state == POOL_CHILD_READY) {
            log_info(s->label, "task %s cancelled at %s: %s", t->id, t->c->tag,
                     relay_reasons[why].text);
            relay_task_cancel(&t->c->r, t->child_raw, t->child_raw_len);
        }
        pool_task_free(t);
    }
    s->ntasks = 0;
}
