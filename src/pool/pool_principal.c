/* SPDX-License-Identifier: MIT */
/*
 * Pools of one principal's children, for a server whose children hold one principal's
 * credentials (env_from_claims, credentials_dir: config_server_per_principal). A stateless
 * request of such a server goes to the pool of its key: the verified principal's name, the [auth]
 * mode it was verified under, and what its token's claims give env_from_claims (a token whose
 * claims changed gets children of its own, started with the new values). Each child of that pool
 * is started with the key's credentials (auth_child_credentials, the function a session's child
 * is built with; credentials_dir read again at each start) and serves that key alone: a call is
 * only ever routed to a child of its own pool, and a child never moves between pools.
 *
 * The server's pool_max_children bounds the children of all its principal pools together. A pool
 * that needs a child at that bound, none of its own having room, stops the least recently used
 * idle child of another principal's pool (pool_child.used_seq: the last request sent to it); with
 * none idle its call waits, as many as one child takes, for the first child that becomes idle or
 * ends, at most pool_start_timeout_ms. A principal pool with no child and nothing waiting is freed
 * by the sweep once its restart budget's minute is over (so that a server that keeps failing
 * cannot be restarted past pool_max_restarts_per_min by a principal whose pool was freed).
 *
 * token_exchange: the principal's pool holds the token its principal's own was exchanged for
 * (http_stateless.c exchanges a request's token when pool_token_wanted says its pool holds none,
 * as before a session's start, and answers a failed exchange with the session's statuses), in a
 * private directory and file of its own (auth_held.c). No child of the pool starts without it:
 * each gets the newest token in token_exchange_env and the file's path in its _FILE. Every request
 * of the pool brings the principal's current token, the subject of the next renewal. A renewal
 * refused (or none before expiry) ends the pool: its children stop, what is in flight or queued
 * gets an error saying why, an audit record ("token_exchange") and the log say it, and the
 * principal's next request exchanges its token again for a new pool.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "auth.h"
#include "pool_int.h"

/* Whether claims a and b give the same variables (NULL: none): the same children may serve both. */
static bool
pool_claims_same(const struct auth_claims *a, const struct auth_claims *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL || (a->why == NULL) != (b->why == NULL))
        return false;
    if (a->why != NULL && strcmp(a->why, b->why) != 0)
        return false;
    char **x = a->env, **y = b->env;
    for (; x != NULL && y != NULL && *x != NULL && *y != NULL; x++, y++)
        if (strcmp(*x, *y) != 0)
            return false;
    return (x == NULL || *x == NULL) && (y == NULL || *y == NULL);
}

struct pool *
pool_principal_find(const struct config_server *srv, const struct pool_meta *meta)
{
    if (meta->principal == NULL)
        return NULL;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        if (!p->retired && p->srv == srv && p->key != NULL && p->key->mode == pools.cfg->auth.mode
            && strcmp(p->key->principal, meta->principal) == 0
            && pool_claims_same(p->key->claims, meta->claims))
            return p;
    return NULL;
}

void
pool_set_auth(struct auth *a)
{
    pools.auth = a;
}

bool
pool_token_wanted(const struct config_server *srv, const struct pool_meta *meta)
{
    if (!srv->token_exchange || meta->principal == NULL)
        return false;
    const struct pool *p = pool_principal_find(srv, meta);
    return p == NULL || p->key->held == NULL;
}

static const struct pool_retire_info pool_retire_token = {
    "its principal's token could not be renewed",
    "the token exchanged for this principal could not be renewed: retry the request",
    "its principal's token could not be renewed: send subscriptions/listen again",
    RELAY_CANCEL_ADMIN,
};

/* A renewal was refused, or none came before expiry: the principal's pool ends (above). */
static void
pool_principal_token_end(void *arg, const char *why)
{
    struct pool *p = arg;
    char detail[320];
    snprintf(detail, sizeof detail, "the token for [server:%s] could not be renewed: %s", p->name,
             why);
    log_warn(NULL, "pool %s: %s's children stop: %s", p->name, p->key->principal, detail);
    audit_event("token_exchange", p->key->principal, p->name, NULL, 0, detail, NULL, NULL);
    if (!p->retired)
        pool_retire(p, &pool_retire_token);
    pool_fail_queue(p, detail);
    struct pool_child *c = p->children;
    while (c != NULL) {
        struct pool_child *next = c->next;
        pool_child_retire(c, detail, false);
        c = next;
    }
    auth_held_close(p->key->held);
    p->key->held = NULL;
}

/* The principal's pool takes the token meta->xres holds; NULL, or why not (a 500). */
const char *
pool_principal_hold(struct pool *p, const struct pool_meta *meta)
{
    if (meta->xres == NULL || meta->xres->status != AUTH_EXCHANGE_OK)
        return "no token was exchanged for this principal";
    char tag[96];
    snprintf(tag, sizeof tag, "pool:%s", p->name);
    const struct auth_held_params hp = { .a = &pools.auth,
                                         .l = pools.l,
                                         .srv = &p->srv,
                                         .tag = tag,
                                         .authorization = meta->authorization,
                                         .end = pool_principal_token_end,
                                         .arg = p };
    const char *why = NULL;
    p->key->held = auth_held_open(&hp, meta->xres, &why);
    if (p->key->held == NULL)
        return why;
    auth_held_start(p->key->held);
    log_info(NULL, "pool %s: %s's token exchanged for its children", p->name, p->key->principal);
    return NULL;
}

struct pool *
pool_principal_new(const struct config *cfg, const struct config_server *srv,
                   const struct pool_meta *meta)
{
    struct pool *p = pool_new(cfg, srv);
    p->key = xcalloc(1, sizeof(*p->key));
    p->key->principal = xstrdup(meta->principal != NULL ? meta->principal : "");
    p->key->mode = cfg->auth.mode;
    p->key->claims = meta->claims != NULL ? auth_claims_ref(meta->claims) : NULL;
    log_debug(NULL, "pool %s: a pool of %s's children", p->name, p->key->principal);
    return p;
}

void
pool_principal_free(struct pool *p)
{
    if (p->key == NULL)
        return;
    auth_held_close(p->key->held);
    auth_claims_unref(p->key->claims);
    free(p->key->principal);
    free(p->key);
    p->key = NULL;
}

char **
pool_principal_env(struct pool *p)
{
    char **extra = NULL;
    int status = 403;
    const char *why = auth_child_credentials(p->srv, p->key->principal, p->key->claims,
                                             "pool child", &extra, &status);
    if (why == NULL && p->srv->token_exchange) {
        if (p->key->held == NULL) { /* never a child without its principal's token */
            config_env_free(extra);
            extra = NULL;
            why = "no token is held for this principal (its renewal failed): retry the request";
            status = 500;
        } else {
            size_t n = 0;
            while (extra != NULL && extra[n] != NULL)
                n++;
            extra = xrealloc(extra, (n + 3) * sizeof(*extra));
            auth_held_env(p->key->held, extra + n);
            extra[n + 2] = NULL;
        }
    }
    p->key->refused = why;
    p->key->refused_status = status;
    return why == NULL ? extra : NULL;
}

const struct sandbox_own *
pool_principal_own(struct pool *p, struct sandbox_own *own, bool *failed)
{
    return auth_held_own(p->key != NULL && p->srv->box != NULL ? p->key->held : NULL, own, failed);
}

/* Children of srv's principal pools of the current configuration (the bound counts them). */
static size_t
pool_principal_children(const struct config_server *srv)
{
    size_t n = 0;
    for (const struct pool *q = pools.pools; q != NULL; q = q->next)
        if (q->key != NULL && !q->retired && q->srv == srv)
            n += q->n_children;
    return n;
}

/* Whether c could be stopped with nothing lost: ready, nothing in flight, no fence, no lease. */
static bool
pool_child_idle(const struct pool_child *c)
{
    return c->state == POOL_CHILD_READY && c->u != NULL && upstream_writable(c->u)
           && pending_active(&c->r.pt, PENDING_TO_CHILD) == 0 && c->subs == 0
           && !pool_bridge_unfenced(c) && !pool_bridge_leased(c) && !pool_task_child_busy(c);
}

bool
pool_principal_room(struct pool *p, bool evict)
{
    const struct config_server *srv = p->srv;
    if (pool_principal_children(srv) < srv->pool_max_children)
        return true;
    if (!evict)
        return false;
    /* No child of another is stopped for a principal whose own could not start (credentials). */
    char **extra = pool_principal_env(p);
    if (extra == NULL)
        return false;
    config_env_free(extra);
    struct pool_child *lru = NULL;
    for (struct pool *q = pools.pools; q != NULL; q = q->next) {
        if (q == p || q->key == NULL || q->retired || q->srv != srv)
            continue;
        for (struct pool_child *c = q->children; c != NULL; c = c->next)
            if (pool_child_idle(c) && (lru == NULL || c->used_seq < lru->used_seq))
                lru = c;
    }
    if (lru == NULL)
        return false;
    lru->pool->row->ctr.principal_stopped++;
    pool_child_retire(lru, "stopped for another principal's request (pool_max_children reached)",
                      false);
    return pool_principal_children(srv) < srv->pool_max_children;
}

/* Whether p's queue waits for room: nothing of its own is starting or fenced to take it. */
static bool
pool_principal_waits(const struct pool *p)
{
    if (p->key == NULL || p->qhead == NULL || p->retired || p->broken || p->n_starting > 0)
        return false;
    for (const struct pool_child *c = p->children; c != NULL; c = c->next)
        if (c->state == POOL_CHILD_READY && pool_bridge_unfenced(c))
            return false; /* its fence's answer takes the queue */
    return true;
}

/*
 * Pools waiting for room get a child, the longest waiting first: under the bound, or in the room
 * of another principal's idle child (stopped). Deferred to the end of the turn, where no callback
 * of the child that became idle is running.
 */
static void
pool_principal_settle(void *arg)
{
    (void)arg;
    pools.settle_due = false;
    if (pools.draining)
        return;
    size_t passes = 0;
    for (const struct pool *q = pools.pools; q != NULL; q = q->next)
        passes += q->key != NULL ? 1 + q->srv->pool_max_children : 0;
    while (passes-- > 0) {
        struct pool *w = NULL;
        for (struct pool *q = pools.pools; q != NULL; q = q->next)
            if (pool_principal_waits(q)
                && (w == NULL || q->key->wait_since_ms < w->key->wait_since_ms))
                w = q;
        if (w == NULL)
            return;
        w->key->refused = NULL;
        if (!pool_principal_room(w, true)) {
            if (w->key->refused == NULL)
                return;                          /* no idle child to stop: the waits go on */
            pool_fail_queue(w, w->key->refused); /* its credentials are gone meanwhile */
            w->key->wait_since_ms = 0;
            continue;
        }
        if (pool_child_start(w) == NULL) {
            pool_fail_queue(w, w->key->refused != NULL
                                   ? w->key->refused
                                   : "upstream server cannot be started now: it keeps failing "
                                     "(restarts back off, at most pool_max_restarts_per_min)");
            w->key->wait_since_ms = 0;
        }
    }
}

void
pool_principal_kick(void)
{
    if (pools.settle_due || pools.draining)
        return;
    pools.settle_due = true;
    loop_defer(pools.l, pool_principal_settle, NULL);
}

void
pool_principal_sweep(struct pool *p, uint64_t now_ms)
{
    if (!pool_principal_waits(p)) {
        p->key->wait_since_ms = 0;
        return;
    }
    if (p->key->wait_since_ms == 0)
        p->key->wait_since_ms = now_ms;
    if (now_ms - p->key->wait_since_ms < p->srv->pool_start_timeout_ms) {
        pool_principal_kick(); /* room that came without a kick (a child idle at its sweep) */
        return;
    }
    pool_fail_queue(p, "every child of this server is busy with other principals' requests "
                       "(pool_max_children); try again later");
    p->key->wait_since_ms = 0;
}

bool
pool_principal_over(const struct pool *p, uint64_t now_ms)
{
    return p->children == NULL && p->qhead == NULL && p->listeners == NULL && p->subs == NULL
           && pool_held_in(p) == 0 && now_ms >= p->fail_until_ms;
}

struct pool *
pool_principal_of(const char *server, const char *principal, struct auth_claims *claims)
{
    for (size_t i = 0; i < pools.cfg->n_servers; i++) {
        const struct config_server *srv = &pools.cfg->servers[i];
        if (strcmp(srv->name, server) != 0)
            continue;
        if (!config_server_per_principal(srv) || principal == NULL
            || (claims != NULL && claims->why != NULL))
            return NULL;
        const struct pool_meta meta = { .principal = principal, .claims = claims };
        struct pool *p = pool_principal_find(srv, &meta);
        return p != NULL ? p : pool_principal_new(pools.cfg, srv, &meta);
    }
    return NULL;
}

bool
pool_principal_keeps(const struct pool *p)
{
    /* Not again after its credentials refused a start: the principal's next request tries. */
    return p->subs != NULL && p->key->refused == NULL
           && pool_principal_children(p->srv) < p->srv->pool_max_children;
}

size_t
pool_principal_restart(const struct config_server *srv)
{
    size_t n = 0;
    for (struct pool *q = pools.pools; q != NULL; q = q->next)
        if (q->key != NULL && !q->retired && q->srv == srv) {
            n += q->n_children;
            pool_retire(q, &pool_retire_restart);
        }
    return n;
}
