/* SPDX-License-Identifier: MIT */
/*
 * A child's lines through its relay (relay.h): each line is scanned (CR and LF outside strings
 * flattened, so the bytes can be forwarded as one line), a batch split into its messages, an
 * invalid line counted and logged; then each message is classified and matched before its one
 * call to the owner (struct relay_ops): an answer to the entry its minted id names (a late answer
 * to a cancelled entry is dropped here), progress to the request its token names, a
 * subscription's notification to its listen (a minted id is a number: one whose subscriptionId
 * is a string goes to the owner's notification, whatever its method), a cancel to the child's
 * request it names. The kind switch is here only: owners implement the table. No op is called
 * once the relay has ended (the child's end, relay_end), not even for the rest of a batch.
 */
#include "relay.h"

#include <string.h>

#include "log.h"

static void
relay_add(uint64_t *counter)
{
    if (counter != NULL)
        (*counter)++;
}

/* --- matching ---------------------------------------------------------------------------------- */

/* The entry of dir whose minted id is the JSON number at sp; NULL if none. */
static struct pending *
relay_minted(const struct relay *r, enum pending_dir dir, const char *line, struct jsonrpc_span sp)
{
    uint64_t n;
    if (sp.len == 0 || !jsonrpc_id_u64(line, sp, &n))
        return NULL;
    return pending_find_gw(&r->pt, dir, n);
}

/*
 * The entry an answer names by its minted id, whatever its state; NULL when none. A late answer
 * to a cancelled entry is dropped, counted in *late, the entry forgotten, and *late_seen set.
 */
static struct pending *
relay_match(struct relay *r, enum pending_dir dir, const char *line,
            const struct jsonrpc_info *info, uint64_t *late, bool *late_seen)
{
    *late_seen = false;
    struct pending *p = NULL;
    if (info->id_type == JSONRPC_ID_NUMBER)
        p = relay_minted(r, dir, line, info->id);
    if (p == NULL || p->state != PENDING_CANCELLED)
        return p;
    relay_add(late);
    *late_seen = true;
    log_debug(r->tag, "%s for cancelled %s dropped",
              dir == PENDING_TO_CHILD ? "late answer" : "client's late answer", p->method);
    pending_del(&r->pt, p);
    return NULL;
}

static void
relay_unknown(const struct relay *r, enum pending_dir dir, const char *line,
              const struct jsonrpc_info *info)
{
    log_debug(r->tag, "%s answered an unknown id %.*s: dropped",
              dir == PENDING_TO_CHILD ? "child" : "client", (int)info->id.len, line + info->id.off);
}

struct pending *
relay_answered(struct relay *r, enum pending_dir dir, const char *line,
               const struct jsonrpc_info *info, uint64_t *late)
{
    bool late_seen;
    struct pending *p = relay_match(r, dir, line, info, late, &late_seen);
    if (p == NULL && !late_seen)
        relay_unknown(r, dir, line, info);
    return p;
}

/* --- invalid lines ----------------------------------------------------------------------------- */

#define RELAY_INVALID_LOGGED 10
void
relay_invalid(struct relay *r, const char *why, const char *line, size_t len)
{
    relay_add(r->invalid);
    if (r->invalid_logged < RELAY_INVALID_LOGGED) {
        log_warn(r->tag, "child wrote a line that is not a JSON-RPC message (%s): skipped", why);
        if (++r->invalid_logged == RELAY_INVALID_LOGGED)
            log_warn(r->tag, "this child's further invalid lines are counted "
                             "(mcpgw_child_lines_invalid_total), not logged");
    }
    log_debug(r->tag, "skipped line: %.*s", len > 200 ? 200 : (int)len, line);
}

/* --- the kinds --------------------------------------------------------------------------------- */

/*
 * The answer to q, a task-augmented request cancelled before it (relay.h, relay_task_cancel): a
 * task it created and that is not over yet is cancelled at the child.
 */
static void
relay_late_task(struct relay *r, const struct pending *q, const char *line,
                const struct jsonrpc_info *info)
{
    struct jsonrpc_span task, idsp, st;
    char status[24];
    if (!jsonrpc_created_task(line, info, &task, &idsp))
        return; /* no task: a late answer like any other */
    if (jsonrpc_member_at(line, task, "status", &st) == 0 && st.len > 0
        && jsonrpc_string_at(line, st, status, sizeof status, NULL)
        && jsonrpc_task_terminal(status))
        return; /* over already: nothing runs */
    log_info(r->tag, "task created for a cancelled %s: cancelled at the child", q->method);
    relay_task_cancel(r, line + idsp.off, idsp.len);
}

static void
relay_child_answer(struct relay *r, const char *line, size_t len, const struct jsonrpc_info *info)
{
    bool late_seen;
    if (info->id_type == JSONRPC_ID_NUMBER) {
        const struct pending *q = relay_minted(r, PENDING_TO_CHILD, line, info->id);
        if (q != NULL && q->state == PENDING_CANCELLED && q->task)
            relay_late_task(r, q, line, info); /* before it is forgotten, below */
    }
    struct pending *p = relay_match(r, PENDING_TO_CHILD, line, info, r->late, &late_seen);
    if (p != NULL) {
        r->ops->answer(r->arg, p, line, len, info);
        return;
    }
    if (late_seen || relay_task_cancel_answer(line, info)
        || (r->ops->stray != NULL && r->ops->stray(r->arg, line, info)))
        return;
    relay_unknown(r, PENDING_TO_CHILD, line, info);
}

/*
 * The request a notification names at sp (a token or a subscription), still waiting; NULL when
 * none (unattributed) or ended (late).
 */
static struct pending *
relay_related(struct relay *r, struct pending *p, const char *what)
{
    if (p == NULL) {
        relay_add(r->unattributed);
        log_debug(r->tag, "%s for no active request dropped", what);
        return NULL;
    }
    if (p->state != PENDING_FORWARDED) {
        relay_add(r->late);
        log_debug(r->tag, "%s for no active request dropped", what);
        return NULL;
    }
    return p;
}

static void
relay_child_progress(struct relay *r, const char *line, size_t len,
                     const struct jsonrpc_info *info)
{
    struct pending *p = NULL;
    if (r->minted_tokens) {
        p = relay_minted(r, PENDING_TO_CHILD, line, info->progress_token);
        if (p != NULL && p->token == NULL)
            p = NULL; /* a minted id, but of a request that set no token */
    } else if (info->progress_token.len) {
        p = pending_find_token(&r->pt, line + info->progress_token.off, info->progress_token.len);
    }
    p = relay_related(r, p, "progress");
    if (p != NULL)
        r->ops->progress(r->arg, p, line, len, info);
}

static void
relay_child_subscription(struct relay *r, const char *line, size_t len,
                         const struct jsonrpc_info *info)
{
    struct pending *p = relay_minted(r, PENDING_TO_CHILD, line, info->meta_subscription);
    if (p != NULL && strcmp(p->method, "subscriptions/listen") != 0)
        p = NULL;
    p = relay_related(r, p, "a subscription's notification");
    if (p != NULL)
        r->ops->subscription(r->arg, p, line, len, info);
}

static void
relay_child_cancelled(struct relay *r, const char *line, size_t len,
                      const struct jsonrpc_info *info)
{
    struct pending *p = NULL;
    if (info->request_id.len)
        p = pending_find_orig(&r->pt, PENDING_TO_CLIENT, line + info->request_id.off,
                              info->request_id.len);
    if (p != NULL && p->state != PENDING_FORWARDED)
        p = NULL;
    r->ops->cancelled(r->arg, p, line, len, info);
}

static void
relay_child_notification(struct relay *r, const char *line, size_t len,
                         const struct jsonrpc_info *info)
{
    const struct relay_ops *ops = r->ops;
    bool sub = ops->subscription != NULL && info->meta_subscription.len != 0;
    if (sub && line[info->meta_subscription.off] != '"')
        relay_child_subscription(r, line, len, info);
    else if (sub) /* a string subscriptionId is no minted id: the owner's own listen's, or none */
        ops->notification(r->arg, line, len, info);
    else if (strcmp(info->method, "notifications/progress") == 0)
        relay_child_progress(r, line, len, info);
    else if (strcmp(info->method, "notifications/cancelled") == 0)
        relay_child_cancelled(r, line, len, info);
    else if (ops->log != NULL && strcmp(info->method, "notifications/message") == 0)
        ops->log(r->arg, line, len, info);
    else
        ops->notification(r->arg, line, len, info);
}

/*
 * One line of the child's (top), or one element of its batch: a message, a batch (top only, and
 * only when the relay takes them), or invalid.
 */
static void
relay_message(struct relay *r, char *line, size_t len, bool top)
{
    struct jsonrpc_info info;
    const char *err = NULL;
    int rc = jsonrpc_scan(line, len, &info, &err);
    bool batch = rc == JSONRPC_EBATCH && top && r->batches;
    if (rc != JSONRPC_OK && !batch) {
        relay_invalid(r, err != NULL ? err : "invalid", line, len);
        return;
    }
    if (info.has_crlf)
        jsonrpc_flatten(line, len);
    if (batch) {
        struct jsonrpc_span el[RELAY_BATCH_MAX];
        size_t n;
        if (jsonrpc_batch_split(line, len, el, RELAY_BATCH_MAX, &n) == -1 || n == 0) {
            relay_invalid(r, "an empty or oversized batch", line, len);
            return;
        }
        for (size_t i = 0; i < n && !r->ended; i++)
            relay_message(r, line + el[i].off, el[i].len, false);
        return;
    }
    switch (info.kind) {
    case JSONRPC_RESULT:
    case JSONRPC_ERROR:
        relay_child_answer(r, line, len, &info);
        break;
    case JSONRPC_REQUEST:
        r->ops->request(r->arg, line, len, &info);
        break;
    case JSONRPC_NOTIFICATION:
        relay_child_notification(r, line, len, &info);
        break;
    }
}

void
relay_line(struct relay *r, char *line, size_t len)
{
    if (!r->ended)
        relay_message(r, line, len, true);
}

void
relay_gone(struct relay *r, const char *reason)
{
    if (r->ended)
        return;
    r->ended = true;
    r->ops->gone(r->arg, reason);
}

void
relay_end(struct relay *r)
{
    r->ended = true;
}
