/* SPDX-License-Identifier: MIT */
/*
 * Per-principal limits of a pool, and the tables of names they and the listeners' URIs live in.
 *
 * A pool is shared by every client of its server; without limits one principal could take all of
 * it: every child's in-flight room, every child a legacy server leases to one request at a time
 * once it asks (pool_bridge.c) by holding calls for input rounds, or the gateway's memory with
 * listens and their URIs. So each principal (the token's name; "anonymous" without auth) has, per
 * server, at most max_inflight_per_principal requests in flight (queued, at a child or held;
 * listens apart), max_held_per_principal of them held for an input round (or with one due),
 * max_listens_per_principal listens and max_listen_uris_per_principal URIs over its legacy
 * listens. A new request past a limit gets 429 with a JSON-RPC error naming the key; a held call
 * past it cannot be refused that way (the request was taken before its child asked), so the
 * child's question is answered with an error instead (pool_bridge_ask); a legacy listen past the
 * URI limit ends with an error (pool_listen_open). 0 turns a limit off.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pool_int.h"

/* --- tables of names ------------------------------------------------------------------------ */

size_t
pool_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)(h ^ h >> 29);
}

/* The link of entry e: a pointer at next_off; its name is the entry's first member. */
#define POOL_LINK(e, off) ((void **)((char *)(e) + (off)))
#define POOL_NAME(e)      (*(char **)(e))

void *
pool_names_find(const struct pool_names *t, const char *name, size_t next_off)
{
    if (t->nb == 0)
        return NULL;
    for (void *e = t->b[pool_hash(name) & (t->nb - 1)]; e != NULL; e = *POOL_LINK(e, next_off))
        if (strcmp(POOL_NAME(e), name) == 0)
            return e;
    return NULL;
}

void
pool_names_add(struct pool_names *t, void *e, size_t next_off)
{
    if (t->n >= t->nb) {
        /* Twice the entries' number of chains (at least 16): rehashed once per doubling. */
        size_t nb = t->nb == 0 ? 16 : t->nb * 2;
        void **b = xcalloc(nb, sizeof(*b));
        for (size_t i = 0; i < t->nb; i++)
            while (t->b[i] != NULL) {
                void *x = t->b[i];
                t->b[i] = *POOL_LINK(x, next_off);
                size_t h = pool_hash(POOL_NAME(x)) & (nb - 1);
                *POOL_LINK(x, next_off) = b[h];
                b[h] = x;
            }
        free(t->b);
        t->b = b;
        t->nb = nb;
    }
    size_t h = pool_hash(POOL_NAME(e)) & (t->nb - 1);
    *POOL_LINK(e, next_off) = t->b[h];
    t->b[h] = e;
    t->n++;
}

void
pool_names_del(struct pool_names *t, void *e, size_t next_off)
{
    if (t->nb == 0)
        return;
    for (void **q = &t->b[pool_hash(POOL_NAME(e)) & (t->nb - 1)]; *q != NULL;
         q = POOL_LINK(*q, next_off))
        if (*q == e) {
            *q = *POOL_LINK(e, next_off);
            t->n--;
            return;
        }
}

/* --- principals ----------------------------------------------------------------------------- */

#define WHO_NEXT offsetof(struct pool_who, hnext)

static struct pool_who *
pool_who_find(const struct pool *p, const char *principal)
{
    return pool_names_find(&p->whos, principal != NULL ? principal : "", WHO_NEXT);
}

/* Forgets who once nothing counts toward it. */
static void
pool_who_drop_idle(struct pool *p, struct pool_who *who)
{
    if (who->calls + who->held + who->listens + who->uris > 0)
        return;
    pool_names_del(&p->whos, who, WHO_NEXT);
    free(who->name);
    free(who);
}

bool
pool_caps_admit(struct pool *p, const char *body, const struct jsonrpc_info *info,
                struct pool_meta *meta, enum pool_status *status)
{
    const struct config_server *srv = p->srv;
    const struct pool_who *who = pool_who_find(p, meta->principal);
    if (who == NULL)
        return true;
    const char *why = NULL;
    if (strcmp(info->method, "subscriptions/listen") == 0) {
        if (srv->max_listens_per_principal > 0 && who->listens >= srv->max_listens_per_principal)
            why = "too many subscriptions/listen open for this principal "
                  "(max_listens_per_principal)";
    } else if (srv->max_inflight_per_principal > 0
               && who->calls >= srv->max_inflight_per_principal) {
        why = "too many requests in flight for this principal (max_inflight_per_principal)";
    } else if (srv->max_held_per_principal > 0 && who->held >= srv->max_held_per_principal
               && p->era != CONFIG_ERA_MODERN && pool_caps_declared(body, info->meta_caps) != 0
               && (strcmp(info->method, "tools/call") == 0
                   || strcmp(info->method, "prompts/get") == 0
                   || strcmp(info->method, "resources/read") == 0)) {
        /* A request that could be held too (what it declares is read when its child asks). */
        why = "too many calls of this principal wait for input (max_held_per_principal)";
    }
    if (why == NULL)
        return true;
    log_debug(NULL, "pool %s: %s of %s refused: %s", p->name, info->method, who->name, why);
    meta->why = why;
    *status = POOL_E_PRINCIPAL;
    return false;
}

void
pool_caps_take(struct pool_call *call, const char *principal, const char *method)
{
    struct pool *p = call->pool;
    const char *name = principal != NULL ? principal : "";
    struct pool_who *who = pool_names_find(&p->whos, name, WHO_NEXT);
    if (who == NULL) {
        who = xcalloc(1, sizeof(*who));
        who->name = xstrdup(name);
        pool_names_add(&p->whos, who, WHO_NEXT);
    }
    call->who = who;
    call->counted_listen = strcmp(method, "subscriptions/listen") == 0;
    if (call->counted_listen)
        who->listens++;
    else
        who->calls++;
}

void
pool_caps_release(struct pool_call *call)
{
    struct pool_who *who = call->who;
    if (who == NULL)
        return;
    if (call->held_counted)
        who->held--;
    call->held_counted = false;
    if (call->counted_listen)
        who->listens--;
    else
        who->calls--;
    call->who = NULL;
    pool_who_drop_idle(call->pool, who);
}

void
pool_caps_held_sync(struct pool_call *call)
{
    bool want = call->due || call->held;
    if (call->who == NULL || want == call->held_counted)
        return;
    call->held_counted = want;
    if (want)
        call->who->held++;
    else
        call->who->held--;
}

bool
pool_caps_may_hold(const struct pool_call *call)
{
    uint64_t max = call->pool->srv->max_held_per_principal;
    return call->who == NULL || max == 0 || call->held_counted || call->who->held < max;
}

bool
pool_caps_uris_fit(const struct pool_call *call, size_t nuris)
{
    uint64_t max = call->pool->srv->max_listen_uris_per_principal;
    return call->who == NULL || max == 0 || call->who->uris + nuris <= max;
}

void
pool_caps_free(struct pool *p)
{
    free(p->whos.b);
    free(p->sub_names.b);
    p->whos = (struct pool_names){ 0 };
    p->sub_names = (struct pool_names){ 0 };
}
