/* SPDX-License-Identifier: MIT */
/*
 * Per-principal limits of a pool (counted in quota.h's table, by server), and the tables of names
 * the listeners' URIs live in.
 *
 * A pool is shared by every client of its server; without limits one principal could take all of
 * it: every child's in-flight room, every child a legacy server leases to one request at a time
 * once it asks (pool_bridge.c) by holding calls for input rounds, or the gateway's memory with
 * listens and their URIs. So each principal (the token's name; the client's address without auth)
 * has, per server, at most max_inflight_per_principal requests in flight (queued, at a child or
 * held; listens apart; its sessions' requests to that server count too), max_held_per_principal
 * of them held for an input round (or with one due; at most a share of the pool, below),
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
#include "quota.h"
#include "util.h"

/* --- tables of names ------------------------------------------------------------------------ */

size_t
pool_hash(const char *s)
{
    return util_hash(s, strlen(s));
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

/*
 * The counts live in quota.h's table under the server's name, not in the pool: a pool the
 * operator restarts or a reload replaces keeps counting what it still has in flight against the
 * same principal as its successor, so no limit starts from zero.
 */

/*
 * The held calls one principal may have: max_held_per_principal, and at most (pool_max_children
 * - 1) / 2 (at least 1). A child that asks serves one request at a time while it does, so a held
 * call takes a child; with the share, two principals at their limit leave a child for a third.
 */
static uint64_t
pool_caps_held_max(const struct config_server *srv)
{
    uint64_t max = srv->max_held_per_principal;
    uint64_t share = srv->pool_max_children > 2 ? (srv->pool_max_children - 1) / 2 : 1;
    return max == 0 || max <= share ? max : share;
}

/*
 * A pooled session's initialize: the gateway answers it from the pool's handshake, so it is no
 * request of the principal's at a child and counts toward no per-principal limit, as a child-mode
 * session's initialize does not.
 */
static bool
pool_caps_exempt(const struct pool_session *session, const char *method)
{
    return session != NULL && strcmp(method, "initialize") == 0;
}

bool
pool_caps_admit(struct pool *p, const char *body, const struct jsonrpc_info *info,
                struct pool_meta *meta, enum pool_status *status)
{
    const struct config_server *srv = p->srv;
    const char *who = meta->principal != NULL ? meta->principal : "";
    const char *why = NULL;
    if (pool_caps_exempt(meta->session, info->method))
        return true;
    if (strcmp(info->method, "subscriptions/listen") == 0) {
        if (!quota_fits(p->name, who, QUOTA_LISTENS, srv->max_listens_per_principal))
            why = "too many subscriptions/listen open for this principal "
                  "(max_listens_per_principal)";
    } else if (!quota_fits(p->name, who, QUOTA_CALLS, srv->max_inflight_per_principal)) {
        why = "too many requests in flight for this principal (max_inflight_per_principal)";
    } else if (!quota_fits(p->name, who, QUOTA_HELD, pool_caps_held_max(srv))
               && p->era != CONFIG_ERA_STATELESS && pool_caps_declared(body, info->meta_caps) != 0
               && (strcmp(info->method, "tools/call") == 0
                   || strcmp(info->method, "prompts/get") == 0
                   || strcmp(info->method, "resources/read") == 0)) {
        /* A request that could be held too (what it declares is read when its child asks). */
        why = "too many calls of this principal wait for input (max_held_per_principal)";
    }
    if (why == NULL)
        return true;
    log_debug(NULL, "pool %s: %s of %s refused: %s", p->name, info->method, who, why);
    meta->why = why;
    *status = POOL_E_PRINCIPAL;
    return false;
}

void
pool_caps_take(struct pool_call *call, const char *principal, const char *method)
{
    if (pool_caps_exempt(call->sess, method))
        return; /* call->who stays NULL: nothing to give back */
    call->counted_listen = strcmp(method, "subscriptions/listen") == 0;
    call->who = quota_take(call->pool->name, principal,
                           call->counted_listen ? QUOTA_LISTENS : QUOTA_CALLS, 1);
}

void
pool_caps_release(struct pool_call *call)
{
    struct quota *who = call->who;
    if (who == NULL)
        return;
    call->who = NULL;
    if (call->held_counted)
        quota_give(who, QUOTA_HELD, 1); /* the call's own count keeps who */
    call->held_counted = false;
    quota_give(who, call->counted_listen ? QUOTA_LISTENS : QUOTA_CALLS, 1);
}

void
pool_caps_held_sync(struct pool_call *call)
{
    bool want = call->due || call->held;
    if (call->who == NULL || want == call->held_counted)
        return;
    call->held_counted = want;
    if (want)
        quota_add(call->who, QUOTA_HELD, 1);
    else
        quota_give(call->who, QUOTA_HELD, 1);
}

bool
pool_caps_may_hold(const struct pool_call *call)
{
    uint64_t max = pool_caps_held_max(call->pool->srv);
    return call->who == NULL || max == 0 || call->held_counted
           || quota_count(call->who, QUOTA_HELD) < max;
}

bool
pool_caps_uris_fit(const struct pool_call *call, size_t nuris)
{
    uint64_t max = call->pool->srv->max_listen_uris_per_principal;
    return call->who == NULL || max == 0 || quota_count(call->who, QUOTA_URIS) + nuris <= max;
}

void
pool_caps_uris(struct pool_call *call, size_t nuris, bool add)
{
    if (call->who == NULL || nuris == 0)
        return;
    if (add)
        quota_add(call->who, QUOTA_URIS, nuris);
    else
        quota_give(call->who, QUOTA_URIS, nuris);
}

void
pool_caps_free(struct pool *p)
{
    free(p->sub_names.b);
    p->sub_names = (struct pool_names){ 0 };
}
