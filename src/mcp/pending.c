/* SPDX-License-Identifier: MIT */
/*
 * The in-flight table of one child: a list, oldest first, an index by the sender's id, and counts
 * of the entries still waiting. A child holds up to max_inflight_per_session or
 * pool_child_max_inflight entries (256 by default), lingering ones twice that, and every request a
 * client sends looks its own id up (already in flight?) and counts what is in flight: with walks
 * of the list, each request cost in proportion to what was in flight. The answer's lookup by the
 * gateway's id walks the list: answers mostly come in order, so it finds its entry near the head.
 * Progress tokens are looked up only for progress, by a walk.
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

/* The index: chains of entries with the same hash bits, each chain oldest first. */
static struct pending **
pending_chain(const struct pending_table *t, size_t hash)
{
    return &t->bucket[hash & (t->nbucket - 1)];
}

/* The link in p's chain that points at p, or would: before the first entry younger than p. */
static struct pending **
pending_link(const struct pending_table *t, const struct pending *p)
{
    struct pending **at = pending_chain(t, p->hash);
    while (*at != NULL && *at != p && (*at)->seq < p->seq)
        at = &(*at)->hnext;
    return at;
}

static void
pending_index_add(struct pending_table *t, struct pending *p)
{
    struct pending **at = pending_link(t, p);
    p->hnext = *at;
    *at = p;
}

static void
pending_index_del(struct pending_table *t, struct pending *p)
{
    struct pending **at = pending_link(t, p);
    *at = p->hnext;
    p->hnext = NULL;
}

/* More entries than chains: built again, twice as many, from the list (newest first in). */
static void
pending_index_grow(struct pending_table *t)
{
    size_t n = t->nbucket < 16 ? 16 : t->nbucket;
    while (n < t->count)
        n *= 2;
    free(t->bucket);
    t->bucket = xcalloc(n, sizeof(*t->bucket));
    t->nbucket = n;
    for (struct pending *p = t->tail; p != NULL; p = p->prev) {
        struct pending **at = pending_chain(t, p->hash);
        p->hnext = *at;
        *at = p;
    }
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
    t->active[PENDING_TO_CHILD] = t->active[PENDING_TO_CLIENT] = 0;
    free(t->bucket);
    t->bucket = NULL;
    t->nbucket = 0;
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
    p->hash = util_hash(orig_id, orig_len);
    p->seq = p->gw_id;
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
    t->active[dir]++;
    if (t->count > t->nbucket)
        pending_index_grow(t);
    else
        pending_index_add(t, p);
    return p;
}

void
pending_set_token(struct pending *p, const char *token, size_t len)
{
    free(p->token);
    p->token = xmemdup(token, len);
    p->token_len = len;
}

void
pending_set_orig(struct pending_table *t, struct pending *p, const char *orig_id, size_t len)
{
    pending_index_del(t, p);
    free(p->orig_id);
    p->orig_id = xmemdup(orig_id, len);
    p->orig_id_len = len;
    p->hash = util_hash(orig_id, len);
    pending_index_add(t, p); /* in its new chain by age, as in the list */
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
 * Lookups by a client-chosen value (the sender's id, or the progress token) prefer the oldest
 * entry still waiting, else the oldest cancelled one: a cancelled entry lingers to catch a late
 * answer, and the client may reuse its id or token meanwhile. Given the matches oldest first, this
 * keeps the best so far in *best; true once nothing later can beat it.
 */
static bool
pending_pick(struct pending **best, struct pending *p)
{
    if (*best == NULL || p->state == PENDING_FORWARDED)
        *best = p;
    return p->state == PENDING_FORWARDED;
}

struct pending *
pending_find_orig(const struct pending_table *t, enum pending_dir dir, const char *id, size_t len)
{
    if (t->nbucket == 0)
        return NULL;
    size_t hash = util_hash(id, len);
    struct pending *best = NULL;
    for (struct pending *p = *pending_chain(t, hash); p != NULL; p = p->hnext)
        if (p->hash == hash && p->dir == dir && p->orig_id_len == len
            && memcmp(p->orig_id, id, len) == 0 && pending_pick(&best, p))
            break;
    return best;
}

struct pending *
pending_find_token(const struct pending_table *t, const char *token, size_t len)
{
    struct pending *best = NULL;
    for (struct pending *p = t->head; p != NULL; p = p->next)
        if (p->dir == PENDING_TO_CHILD && p->token != NULL && p->token_len == len
            && memcmp(p->token, token, len) == 0 && pending_pick(&best, p))
            break;
    return best;
}

void
pending_cancel(struct pending_table *t, struct pending *p)
{
    if (p->state != PENDING_FORWARDED)
        return;
    p->state = PENDING_CANCELLED;
    t->active[p->dir]--;
}

void
pending_del(struct pending_table *t, struct pending *p)
{
    if (p->state == PENDING_FORWARDED)
        t->active[p->dir]--;
    pending_index_del(t, p);
    UTIL_DLIST_UNLINK_TAIL(t->head, t->tail, p, prev, next);
    t->count--;
    pending_free(p);
}

size_t
pending_active(const struct pending_table *t, enum pending_dir dir)
{
    return t->active[dir];
}

const char *
pending_trace_id(const struct pending *p)
{
    return p->trace_id[0] != '\0' ? p->trace_id : NULL;
}
