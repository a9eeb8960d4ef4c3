/* SPDX-License-Identifier: MIT */
/*
 * The in-flight table of one child. A child holds a handful of entries (bounded by
 * max_inflight_per_session or pool_child_max_inflight, lingering ones twice that), so a list with
 * linear lookups beats a hash here; ids the gateway mints grow monotonically and are never reused
 * within a table.
 */
#include "pending.h"

#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "loop.h"
#include "quota.h"
#include "util.h"

void
pending_init(struct pending_table *t)
{
    memset(t, 0, sizeof(*t));
    t->next_id = 1;
}

static void
pending_free(struct pending *p)
{
    pending_uncount(p);
    loop_timer_del(p->timer);
    audit_call_end(p->audit); /* a record not yet written: it ends here, unanswered */
    free(p->orig_id);
    free(p->token);
    free(p);
}

void
pending_uncount(struct pending *p)
{
    if (p->quota != NULL)
        quota_give(p->quota, QUOTA_CALLS, 1);
    p->quota = NULL;
}

void
pending_clear(struct pending_table *t)
{
    struct pending *p = t->head;
    while (p != NULL) {
        struct pending *next = p->next;
        pending_free(p);
        p = next;
    }
    t->head = t->tail = NULL;
    t->count = 0;
}

struct pending *
pending_add(struct pending_table *t, enum pending_dir dir, const char *orig_id, size_t orig_len,
            const char *method, uint64_t stream_id, uint64_t now_ms)
{
    struct pending *p = xcalloc(1, sizeof(*p));
    p->dir = dir;
    p->state = PENDING_FORWARDED;
    p->gw_id = t->next_id++;
    p->orig_id = xmemdup(orig_id, orig_len);
    p->orig_id_len = orig_len;
    size_t mlen = strlen(method);
    if (mlen >= sizeof(p->method))
        mlen = sizeof(p->method) - 1;
    memcpy(p->method, method, mlen);
    p->method[mlen] = '\0';
    p->stream_id = stream_id;
    p->start_ms = now_ms;
    p->prev = t->tail;
    if (t->tail != NULL)
        t->tail->next = p;
    else
        t->head = p;
    t->tail = p;
    t->count++;
    return p;
}

void
pending_set_token(struct pending *p, const char *token, size_t len)
{
    free(p->token);
    p->token = xmemdup(token, len);
    p->token_len = len;
}

struct pending *
pending_find_gw(const struct pending_table *t, enum pending_dir dir, uint64_t id)
{
    for (struct pending *p = t->head; p != NULL; p = p->next)
        if (p->gw_id == id && p->dir == dir)
            return p;
    return NULL;
}

/*
 * Lookups by a client-chosen value (the sender's id, or with token the progress token) prefer an
 * entry still waiting: a cancelled entry lingers to catch a late answer, and the client may reuse
 * its id or token meanwhile.
 */
static struct pending *
pending_find_chosen(const struct pending_table *t, enum pending_dir dir, bool token, const char *v,
                    size_t len)
{
    struct pending *lingering = NULL;
    for (struct pending *p = t->head; p != NULL; p = p->next) {
        const char *pv = token ? p->token : p->orig_id;
        if (p->dir != dir || pv == NULL || (token ? p->token_len : p->orig_id_len) != len
            || memcmp(pv, v, len) != 0)
            continue;
        if (p->state == PENDING_FORWARDED)
            return p;
        if (lingering == NULL)
            lingering = p;
    }
    return lingering;
}

struct pending *
pending_find_orig(const struct pending_table *t, enum pending_dir dir, const char *id, size_t len)
{
    return pending_find_chosen(t, dir, false, id, len);
}

struct pending *
pending_find_token(const struct pending_table *t, const char *token, size_t len)
{
    return pending_find_chosen(t, PENDING_TO_CHILD, true, token, len);
}

void
pending_del(struct pending_table *t, struct pending *p)
{
    UTIL_DLIST_UNLINK_TAIL(t->head, t->tail, p, prev, next);
    t->count--;
    pending_free(p);
}

size_t
pending_active(const struct pending_table *t, enum pending_dir dir)
{
    size_t n = 0;
    for (struct pending *p = t->head; p != NULL; p = p->next)
        if (p->dir == dir && p->state == PENDING_FORWARDED)
            n++;
    return n;
}

const char *
pending_trace_id(const struct pending *p)
{
    return p->trace_id[0] != '\0' ? p->trace_id : NULL;
}
