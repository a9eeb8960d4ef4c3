/* SPDX-License-Identifier: MIT */
/*
 * Pools of children for the stateless era (pool.h): one pool per [server:NAME], made on the first
 * stateless request (or at start for pool_warm_children, or when readiness is asked while no child
 * of its server ever started: pool_probe), children started (pool_start.c probes and
 * initializes them), picked, replaced and stopped here. The requests themselves are pool_route.c's.
 *
 * A child's life: STARTING (era unknown: a server/discover probe; legacy: an initialize, then
 * notifications/initialized), READY, then GONE when it fails, crashes, idles out or the pool
 * retires. A GONE child is out of the pool at once and freed by a deferred call, never inside one
 * of its own callbacks. Starts after a failure are budgeted (pool_max_restarts_per_min).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "auth.h"
#include "log.h"
#include "pool_int.h"
#include "version.h"

struct pool_globals pools;

/* A reload retires every pool; an operator's restart one server's (pool_restart). */
const struct pool_retire_info pool_retire_reload = {
    "configuration reloaded",
    "the configuration was reloaded: retry the request",
    "configuration reloaded: send subscriptions/listen again",
    RELAY_CANCEL_RELOAD,
};
const struct pool_retire_info pool_retire_restart = {
    "restarted by the operator",
    "the server was restarted by the operator: retry the request",
    "server restarted by the operator: send subscriptions/listen again",
    RELAY_CANCEL_ADMIN,
};

/* Why a broken pool (its children serve no version the gateway serves) refuses every request. */
static const char pool_broken_text[] = "upstream server supports no protocol version this gateway "
                                       "serves to stateless clients";

void
pool_module_init(struct loop *l, const struct config *cfg)
{
    pools.l = l;
    pools.cfg = cfg;
    pools.draining = false;
    pools.listen_due = false; /* a deferred run of an earlier loop's is not this one's */
    pools.rooms_due = false;
    pool_set_config(cfg);
}

static struct pool *
pool_find(const struct config_server *srv)
{
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        if (!p->retired && p->srv == srv && p->key == NULL)
            return p; /* the shared pool: a principal's own is pool_principal_find's */
    return NULL;
}

static void pool_queue_settle(struct pool *p, const char *what);

struct pool *
pool_shared_of(const char *name)
{
    for (size_t i = 0; i < pools.cfg->n_servers; i++) {
        const struct config_server *srv = &pools.cfg->servers[i];
        if (strcmp(srv->name, name) != 0)
            continue;
        if (config_server_per_principal(srv))
            return NULL;
        struct pool *p = pool_find(srv);
        return p != NULL ? p : pool_new(pools.cfg, srv);
    }
    return NULL;
}

struct pool *
pool_new(const struct config *cfg, const struct config_server *srv)
{
    struct pool *p = xcalloc(1, sizeof(*p));
    p->name = xstrdup(srv->name);
    p->stats = relay_stats_of(srv->name);
    p->row = pool_server_of(srv->name);
    p->srv = srv;
    p->cfg = cfg;
    p->era = srv->era;
    if (p->era != CONFIG_ERA_AUTO)
        p->speaks = revision_set_over(REVISION_STATELESS);
    p->next = pools.pools;
    pools.pools = p;
    return p;
}

/*
 * Whether p's server needs a probe: no child of it has ever completed its start, and the loader
 * did not find its command missing (it is broken already; a probe would only fail).
 */
static bool
pool_probes(const struct relay_stats *st)
{
    return !relay_served(st) && !relay_missing(st);
}

/*
 * The children p keeps started: pool_warm_children; and while its server needs a probe, at least
 * one, so that /readyz can say whether the server serves before any request came, 2026-07-28 or
 * legacy (pool_probe). Once started, the probe is a child like any other beyond the warm ones: it
 * ends after pool_idle_timeout_s with nothing in flight, and is not replaced.
 */
static uint64_t
pool_want(const struct pool *p)
{
    if (p->key != NULL) /* a principal's children start for its requests and subscriptions */
        return pool_principal_keeps(p) ? 1 : 0;
    uint64_t warm = p->srv->pool_warm_children;
    return warm == 0 && pool_probes(p->stats) ? 1 : warm;
}

/*
 * Starts children up to pool_want (while the restart budget allows). A broken pool has none: its
 * children could serve nothing, and it stays broken until a reload makes a new pool.
 */
static void
pool_warm(struct pool *p)
{
    while (!p->retired && !pools.draining && !p->broken && p->n_children < pool_want(p))
        if (pool_child_start(p) == NULL)
            break;
}

/*
 * p takes no new request from now on: its children end what they have in flight and stop once
 * idle (pool_sweep_child), what waits in its queue goes to its starting children or fails, and
 * the pool is freed once empty. New requests make a new pool (pool_find skips retired ones).
 */
void
pool_retire(struct pool *p, const struct pool_retire_info *why)
{
    p->retired = true;
    p->retired_why = why;
    log_info(NULL, "pool %s: retired (%s): its %zu children stop once idle", p->name, why->stopped,
             p->n_children);
    /*
     * A listener would stay on the old pool and hear nothing once its children idle out: it ends,
     * saying why, and listens again on the new one. Held input rounds stay on the old pool until
     * they end (pool_bridge.c).
     */
    pool_listen_end_all(p, why->listen, why->cancel);
    pool_session_pool_retired(p);
    pool_session_listen_end(p); /* the gateway's own listen at a stateless child */
}

/* Whether children started under a and under b are started alike (pool_child_start's params). */
static bool
pool_spawn_same(const struct config *a, const struct config *b)
{
    return a->max_message_bytes == b->max_message_bytes
           && a->stdin_queue_bytes == b->stdin_queue_bytes
           && a->child_stdin_grace_ms == b->child_stdin_grace_ms
           && a->child_term_grace_ms == b->child_term_grace_ms;
}

/*
 * A reload keeps the pool of a server whose section did not change (config_server_same), and
 * whose children would start alike: its children, calls, held rounds and listeners go on, now
 * under cfg. Any other pool is retired: its server changed, or is gone.
 */
void
pool_set_config(const struct config *cfg)
{
    for (struct pool *p = pools.pools; p != NULL; p = p->next) {
        if (p->cfg == cfg || p->retired)
            continue;
        const struct config_server *srv = config_server_named(cfg, p->name);
        if (srv != NULL && pool_spawn_same(p->cfg, cfg) && config_server_same(p->srv, srv)) {
            p->srv = srv;
            p->cfg = cfg;
            log_info(NULL, "pool %s: server unchanged: its %zu children stay", p->name,
                     p->n_children);
            continue;
        }
        pool_retire(p, &pool_retire_reload);
    }
    pools.cfg = cfg;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        (void)relay_stats_of(cfg->servers[i].name); /* its series exist before any traffic */
        if (cfg->servers[i].pool_warm_children > 0 && pool_find(&cfg->servers[i]) == NULL)
            pool_warm(pool_new(cfg, &cfg->servers[i]));
    }
}

void
pool_probe(const struct config_server *srv)
{
    const struct relay_stats *st = relay_stats_of(srv->name);
    if (!pools.draining && !relay_drained(st) && pool_probes(st) && pool_find(srv) == NULL)
        pool_warm(pool_new(pools.cfg, srv));
}

bool
pool_uses_config(const struct config *cfg)
{
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        if (p->cfg == cfg)
            return true;
    return false;
}

void
pool_call_enqueue(struct pool *p, struct pool_call *call, const char *body, size_t len,
                  struct jsonrpc_span id)
{
    call->body = xmemdup(body, len);
    call->len = len;
    call->qid_off = id.off;
    call->qid_len = id.len;
    if (p->qtail != NULL)
        p->qtail->qnext = call;
    else
        p->qhead = call;
    p->qtail = call;
    p->queued++;
}

static void
pool_free(struct pool *p)
{
    free(p->name);
    free(p->discover);
    free(p->init_members);
    pool_caps_free(p);
    pool_principal_free(p);
    free(p);
}

void
pool_module_free(void)
{
    pool_session_module_free();
    while (pools.pools != NULL) {
        struct pool *p = pools.pools;
        pools.pools = p->next;
        pool_free(p);
    }
    pool_servers_free();
}

/* --- children ---------------------------------------------------------------------------- */

int
pool_send(struct pool_child *c, const struct iovec *iov, int n)
{
    return c->u == NULL || c->state == POOL_CHILD_GONE ? -1 : upstream_send_iov(c->u, iov, n);
}

int
pool_relay_send(void *arg, const struct iovec *iov, int n)
{
    return pool_send(arg, iov, n);
}

int
pool_send_control(struct pool_child *c, const struct iovec *iov, int n)
{
    return c->u == NULL || c->state == POOL_CHILD_GONE ? -1
                                                       : upstream_send_control_iov(c->u, iov, n);
}

int
pool_relay_send_control(void *arg, const struct iovec *iov, int n)
{
    return pool_send_control(arg, iov, n);
}

static void
pool_child_free(void *arg)
{
    struct pool_child *c = arg;
    relay_clear(&c->r);
    free(c);
}

void
pool_child_ready(struct pool_child *c)
{
    struct pool *p = c->pool;
    if (c->state == POOL_CHILD_STARTING) {
        p->n_starting--;
        c->state = POOL_CHILD_READY;
        pool_start_ok(p);
    }
    loop_timer_del(c->timer);
    c->timer = NULL;
    c->idle_since_ms = util_now_ms();
    char speaks[128];
    revision_set_text(p->speaks, speaks, sizeof speaks);
    log_info(c->tag, "pool child ready (%s%s)",
             p->era == CONFIG_ERA_LEGACY ? "legacy, bridged to " : "", speaks);
    pool_listen_child_change(c, false);
    pool_session_child_ready(c);
    pool_child_take_queue(c);
}

/*
 * How many requests c may have in flight: one while a call that was in flight when it asked its
 * client something still is (the lease, pool_bridge.c).
 */
static size_t
pool_child_cap(const struct pool_child *c)
{
    return pool_bridge_leased(c) ? 1 : c->pool->srv->pool_child_max_inflight;
}

/*
 * What still waits in p's queue once a child took what it had room for. Requests queue only for
 * a starting child or a fenced one (pool_pick); a fenced child may have had less room when its
 * fence came back than was queued for it (its calls in flight, or a lease taken meanwhile). With
 * no child starting and no fence out, nothing would come for the rest: a new child is started
 * when the pool may grow, else they wait for room on the busy ones (pool_child_room).
 */
static void
pool_queue_rest(struct pool *p)
{
    if (p->qhead == NULL || p->retired || pools.draining || p->broken || p->n_starting > 0
        || (p->key != NULL ? !pool_principal_room(p, false)
                           : p->n_children >= p->srv->pool_max_children))
        return;
    for (const struct pool_child *c = p->children; c != NULL; c = c->next)
        if (c->state == POOL_CHILD_READY && pool_bridge_unfenced(c))
            return; /* its fence's answer takes the queue */
    (void)pool_child_start(p);
}

void
pool_child_take_queue(struct pool_child *c)
{
    struct pool *p = c->pool;
    while (p->qhead != NULL && c->state == POOL_CHILD_READY && c->u != NULL
           && upstream_writable(c->u) && !pool_bridge_unfenced(c)
           && pending_active(&c->r.pt, PENDING_TO_CHILD) < pool_child_cap(c)) {
        struct pool_call *call = p->qhead;
        p->qhead = call->qnext;
        if (p->qhead == NULL)
            p->qtail = NULL;
        p->queued--;
        call->qnext = NULL;
        pool_call_dispatch(call, c);
    }
    pool_queue_settle(p, "no upstream server child has room for it");
    pool_queue_rest(p);
}

void
pool_child_room(struct pool_child *c)
{
    if (c->pool->qhead != NULL && c->state == POOL_CHILD_READY)
        pool_child_take_queue(c);
    if (c->pool->key != NULL)
        pool_principal_kick(); /* idle now: another principal's queue may want its room */
}

static void
pool_rooms(void *arg)
{
    (void)arg;
    pools.rooms_due = false;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        for (struct pool_child *c = p->children; c != NULL && p->qhead != NULL; c = c->next)
            if (c->state == POOL_CHILD_READY)
                pool_child_take_queue(c);
}

void
pool_rooms_due(void)
{
    if (pools.rooms_due) /* a draining gateway still serves what waits */
        return;
    pools.rooms_due = true;
    loop_defer(pools.l, pool_rooms, NULL);
}

/* Ends every request that waits in the queue (no child will come). */
void
pool_fail_queue(struct pool *p, const char *why)
{
    while (p->qhead != NULL) {
        struct pool_call *call = p->qhead;
        p->qhead = call->qnext;
        p->queued--;
        call->qnext = NULL;
        pool_call_fail(call, JSONRPC_INTERNAL_ERROR, why);
    }
    p->qtail = NULL;
}

/* p's children speak no stateless revision the gateway knows: it serves nothing, at once. */
void
pool_break(struct pool_child *c, const char *why)
{
    struct pool *p = c->pool;
    p->broken = true;
    if (!p->retired)
        relay_start_failed(p->stats, pool_broken_text, true);
    pool_fail_queue(p, pool_broken_text);
    pool_child_retire(c, why, false);
}

/*
 * A pool that starts no child any more (retired by a reload, the gateway draining, broken): once
 * none of its children is starting, nothing will take what still waits in its queue, which ends
 * with an error saying what happened (what) and why nothing else will come. A queued request is
 * never moved to the new configuration's pool: it was routed, authorized and judged by the tool
 * policy under the old one.
 */
static void
pool_queue_settle(struct pool *p, const char *what)
{
    if (p->qhead == NULL || p->n_starting > 0 || !(p->retired || pools.draining || p->broken))
        return;
    char message[256];
    snprintf(message, sizeof(message), "%s; %s", what,
             p->broken    ? pool_broken_text
             : p->retired ? p->retired_why->queued
                          : "gateway shutting down");
    pool_fail_queue(p, message);
}

void
pool_child_retire(struct pool_child *c, const char *why, bool failure)
{
    if (c->state == POOL_CHILD_GONE)
        return;
    struct pool *p = c->pool;
    bool starting = c->state == POOL_CHILD_STARTING;
    if (starting)
        p->n_starting--;
    c->state = POOL_CHILD_GONE;
    relay_end(&c->r); /* nothing more of the child's reaches c */
    loop_timer_del(c->timer);
    c->timer = NULL;
    if (failure) {
        /* Not rate-limited: each names its child, and the backoff spaces them out. */
        const struct log_field f[] = { { "server", p->name, false }, { "reason", why, false } };
        log_fields(LOG_WARN, c->tag, f, ARRAY_LEN(f), "pool child ended: %s", why);
        p->row->ctr.crashed++;
        pool_start_failed(p, why, starting || !c->heard);
    } else {
        log_info(c->tag, "pool child stopped: %s", why);
    }
    /* What it had in flight fails now (each entry leaves the table); the rest goes with c. */
    pool_task_child_gone(c); /* pooled sessions' tasks there failed with it */
    char message[160];
    snprintf(message, sizeof(message), "upstream server ended: %s", why);
    struct pending *e = c->r.pt.head;
    while (e != NULL) {
        struct pending *next = e->next;
        if (e->state == PENDING_FORWARDED && e->owner != NULL) {
            relay_count(p->stats, RELAY_CANCEL_CHILD);
            audit_call_cancel(((struct pool_call *)e->owner)->audit,
                              relay_reasons[RELAY_CANCEL_CHILD].label);
            pool_call_fail(e->owner, JSONRPC_INTERNAL_ERROR, message);
        }
        e = next;
    }
    UTIL_DLIST_UNLINK(p->children, c, prev, next);
    p->n_children--;
    pool_listen_child_change(c, true);
    upstream_close(c->u, why);
    c->u = NULL;
    loop_defer(pools.l, pool_child_free, c);
    if (p->retired || pools.draining || p->broken) {
        /* No replacement: what waits for a child now waits in vain. */
        snprintf(message, sizeof(message), "upstream server ended %s(%s)",
                 starting ? "before it was ready " : "", why);
        pool_queue_settle(p, message);
        return;
    }
    if (p->key != NULL) {
        pool_principal_kick(); /* its room goes to the pool that waited longest for it */
        return;
    }
    if (p->qhead != NULL && p->n_starting == 0 && pool_child_start(p) == NULL)
        pool_fail_queue(p, "upstream server cannot be started now: it keeps failing (restarts "
                           "back off, at most pool_max_restarts_per_min)");
    else if (p->n_starting == 0 && pool_listen_orphans(p))
        (void)pool_child_start(p); /* listeners' subscriptions need a child to be held at */
    else
        pool_warm(p);
}

/*
 * The least busy ready child with room; NULL if none. *fenced counts the children left out only
 * because their fence is out: requests may wait for them (pool_child_take_queue).
 */
static struct pool_child *
pool_least_busy(struct pool *p, size_t *active, size_t *fenced)
{
    struct pool_child *best = NULL;
    size_t min = SIZE_MAX;
    *fenced = 0;
    for (struct pool_child *c = p->children; c != NULL; c = c->next) {
        /* One whose stdin already failed (killed, say) is as good as gone: its end is on its way.
         */
        if (c->state != POOL_CHILD_READY || c->u == NULL || !upstream_writable(c->u))
            continue;
        size_t n = pending_active(&c->r.pt, PENDING_TO_CHILD);
        /*
         * A child leased by a call that may ask serves one request at a time, and no child gets a
         * request while a question of a cancelled one may still come (the fence, pool_bridge.c).
         */
        if (pool_bridge_unfenced(c)) {
            *fenced += n < pool_child_cap(c);
            continue;
        }
        if (n < min && n < pool_child_cap(c)) {
            min = n;
            best = c;
        }
    }
    *active = min;
    return best;
}

struct pool_child *
pool_pick(struct pool *p, enum pool_status *status)
{
    size_t active, fenced;
    struct pool_child *c = pool_least_busy(p, &active, &fenced);
    if (p->key != NULL)
        p->key->refused = NULL; /* set below by a start, or a stop for room, that it refused */
    /*
     * Grow one child at a time while every ready child is busy. A principal's pool counts its
     * server's principal pools together, and when none of its own children has room, the least
     * recently used idle child of another principal makes room (pool_principal_room).
     */
    bool full;
    if ((c == NULL || active > 0) && p->n_starting == 0
        && (p->key != NULL ? pool_principal_room(p, c == NULL)
                           : p->n_children < p->srv->pool_max_children)) {
        struct pool_child *fresh = pool_child_start(p);
        if (fresh != NULL && fresh->state == POOL_CHILD_READY)
            return fresh;
        full = false;
    } else {
        full = p->key != NULL ? !pool_principal_room(p, false)
                              : p->n_children >= p->srv->pool_max_children;
    }
    if (c != NULL)
        return c;
    if (p->key != NULL && p->key->refused != NULL) { /* no credentials: no child, no wait */
        *status = p->key->refused_status == 403 ? POOL_E_CREDENTIALS : POOL_E_CREDENTIALS_BAD;
        return NULL;
    }
    size_t coming = p->n_starting + fenced;
    if (coming > 0 && p->queued < p->srv->pool_child_max_inflight * coming) {
        *status = POOL_OK; /* queued until a child is ready, or its fence is back */
        return NULL;
    }
    /*
     * A principal's pool at the bound with no idle child of another principal to stop: its call
     * waits for one (at most pool_start_timeout_ms, as many as one child takes).
     */
    if (full && p->key != NULL && p->queued < p->srv->pool_child_max_inflight) {
        if (p->key->wait_since_ms == 0)
            p->key->wait_since_ms = util_now_ms();
        *status = POOL_OK;
        return NULL;
    }
    if (full)
        *status = POOL_E_FULL;
    else {
        *status = POOL_E_UNAVAILABLE;
        p->row->ctr.refused_restart++;
    }
    return NULL;
}

struct stream *
pool_request(const struct config_server *srv, char *body, size_t len,
             const struct jsonrpc_info *info, struct pool_meta *meta, enum pool_status *status)
{
    /*
     * Draining: no new request. A retry of a held call is none: it carries on a call in flight,
     * which the drain waits for, so it is served. Only a requestState that verifies makes a
     * retry: a forged one is a new request for the gates (the drain's 503), and is refused later
     * (400, pool_bridge_resume) only when the gates let new requests through.
     */
    /* A pooled session's request is legacy: params.requestState means nothing to the gateway. */
    bool ours = meta->session == NULL && info->request_state.len != 0
                && pool_bridge_ours(body, info->request_state);
    bool resume = ours && pool_bridge_sealed(body, info->request_state);
    if (pools.draining && !resume) {
        *status = POOL_E_DRAINING;
        return NULL;
    }
    if (info->id.len > pools.cfg->max_id_bytes
        || info->progress_token.len > pools.cfg->max_id_bytes) {
        *status = POOL_E_ID_TOO_LONG;
        return NULL;
    }
    bool keyed = config_server_per_principal(srv);
    if (keyed && (meta->principal == NULL || (meta->claims != NULL && meta->claims->why != NULL))) {
        /* No principal to key a child by, or a claim env_from_claims needs: no child for it. */
        meta->why =
            meta->principal == NULL ? "no principal to start a child for" : meta->claims->why;
        *status = POOL_E_CREDENTIALS;
        return NULL;
    }
    struct pool *p = meta->child != NULL ? meta->child->pool
                     : keyed                ? pool_principal_find(srv, meta)
                                            : pool_find(srv);
    if (p == NULL)
        p = keyed ? pool_principal_new(pools.cfg, srv, meta) : pool_new(pools.cfg, srv);
    if (srv->token_exchange) {
        /* Its children need the principal's exchanged token: the one held, or meta's now. */
        if (p->key->held == NULL && (meta->why = pool_principal_hold(p, meta)) != NULL) {
            *status = POOL_E_CREDENTIALS_BAD;
            return NULL;
        }
        auth_held_seen(p->key->held, meta->authorization); /* the next renewal's subject */
    }
    if (relay_drained(p->stats) && !resume) {
        *status = POOL_E_DRAINED;
        return NULL;
    }
    if (p->broken) {
        meta->why = pool_broken_text;
        *status = POOL_E_UNAVAILABLE;
        return NULL;
    }
    if (meta->session == NULL && !pool_speaks(p, meta->rev)) {
        *status = POOL_OK;
        return pool_refuse_version(p, body, info, meta);
    }
    if (meta->session == NULL && !pool_method_served(p, meta->rev, info->method)) {
        *status = POOL_E_NO_METHOD;
        return NULL;
    }
    struct stream *hidden = p->srv->policy != NULL && strcmp(info->method, "tools/call") == 0
                                ? pool_refuse_hidden(p, body, info, meta)
                                : NULL;
    if (hidden != NULL) {
        *status = POOL_OK;
        return hidden;
    }
    /* A retry of an input round the gateway bridged (a stateless child's own rounds pass). */
    if (ours) {
        if (info->has_crlf)
            jsonrpc_flatten(body, len);
        return pool_bridge_resume(p, body, info, meta, status);
    }
    if (meta->session == NULL && info->request_state.len != 0 && p->era == CONFIG_ERA_LEGACY) {
        p->row->ctr.states_refused++;
        meta->why = "requestState is not one this gateway issued";
        *status = POOL_E_BAD_STATE;
        return NULL;
    }
    if (!pool_caps_admit(p, body, info, meta, status))
        return NULL;
    *status = POOL_OK;
    /* A pooled session's request on a task goes to the child that holds it, whatever its load. */
    struct pool_child *c = meta->child != NULL ? meta->child : pool_pick(p, status);
    if (c == NULL && *status != POOL_OK) {
        if (p->key != NULL && p->key->refused != NULL)
            meta->why = p->key->refused;
        return NULL;
    }
    if (info->has_crlf)
        jsonrpc_flatten(body, len);
    struct pool_call *call = xcalloc(1, sizeof(*call));
    call->pool = p;
    if (meta->session != NULL) {
        pool_session_link(call, meta->session);
        call->init = strcmp(info->method, "initialize") == 0;
    }
    struct trace tr;
    if (meta->trace != NULL && trace_resolve(meta->trace, body, len, info, &tr))
        call->trace = trace_copy(&tr);
    call->rev = meta->rev;
    call->log_level = meta->log_level;
    call->grants = p->srv->policy != NULL ? policy_bits(p->srv->policy, meta->grants) : 0;
    struct stream *st = pool_call_stream(call);
    /* A pooled session's calls are recorded as a child-mode session's: the audited methods. */
    if (audit_on() && (meta->session == NULL || audit_method(info->method)))
        call->audit = audit_call_new(
            p->name, meta->session != NULL ? pool_session_label(meta->session) : NULL, body, len,
            info); /* a pooled session's call: under its label, never its id nor its child */
    pool_caller_note(call, body, info, meta);
    pool_caps_take(call, meta->principal, info->method);
    if (meta->session == NULL) /* a pooled session's questions are not bridged into rounds */
        pool_bridge_note(call, body, info, meta);
    if (c != NULL) {
        if (pool_call_start(call, c, body, len, info) == -1) {
            audit_call_drop(call->audit); /* refused (503): the refusal's record says so */
            pool_bridge_forget(call);
            pool_session_modern_forget(call);
            pool_session_unlink(call);
            pool_caps_release(call);
            if (call->batch != NULL) {
                pool_batch_call_end(call);
            } else {
                stream_own(call->st)->owner = NULL;
                stream_unref(call->st);
            }
            stream_unref(st);
            free(call->trace);
            free(call);
            p->row->ctr.requests--;
            *status = POOL_E_BUSY;
            return NULL;
        }
        return st;
    }
    pool_call_enqueue(p, call, body, len, info->id);
    log_debug(NULL, "pool %s: %s waits for a child to start", p->name, info->method);
    return st;
}

/* --- sweep, drain, shutdown ---------------------------------------------------------------- */

static void
pool_sweep_child(struct pool_child *c, uint64_t now_ms)
{
    uint64_t hb = pools.cfg->heartbeat_s * 1000u;
    bool busy = false;
    struct pending *e = c->r.pt.head;
    while (e != NULL) {
        struct pending *next = e->next;
        struct pool_call *call = e->owner;
        /* A fence (ping) unanswered as long as a cancelled entry lingers is given up (freed). */
        if (e->state == PENDING_FORWARDED && now_ms - e->start_ms >= POOL_CANCEL_LINGER_MS
            && pool_bridge_fence_done(c, e, true)) {
            e = next;
            continue;
        }
        if (e->state == PENDING_FORWARDED) {
            busy |= e->gw_id != c->start_id && e->gw_id != c->fence_id; /* not the gateway's */
            if (call != NULL && call->st != NULL && stream_own(call->st)->attached
                && now_ms - stream_last_push_ms(call->st) >= hb)
                stream_push_heartbeat(call->st);
        } else if (now_ms - e->cancelled_ms >= POOL_CANCEL_LINGER_MS) {
            pending_del(&c->r.pt, e);
        }
        e = next;
    }
    busy |= c->subs > 0; /* it holds listeners' subscriptions */
    busy |= pool_task_child_busy(c); /* it runs a pooled session's task */
    size_t queued = c->pool->queued;
    pool_child_room(c); /* lingering entries freed, a fence given up */
    if (c->state == POOL_CHILD_GONE)
        return;
    busy |= c->pool->queued != queued; /* it took what waited */
    if (busy || c->state != POOL_CHILD_READY)
        c->idle_since_ms = now_ms;
    struct pool *p = c->pool;
    if (c->state != POOL_CHILD_READY || busy)
        return;
    /*
     * Its end was seen (it exited, say) and is reported at the end of this turn: a stop now would
     * silence that report and count a death as an idle stop. It ends as what it is.
     */
    if (!upstream_writable(c->u))
        return;
    if (p->retired || pools.draining) {
        pool_child_retire(c, p->retired ? p->retired_why->stopped : "gateway shutting down", false);
        return;
    }
    if (p->n_children > p->srv->pool_warm_children
        && now_ms - c->idle_since_ms >= p->srv->pool_idle_timeout_s * 1000u) {
        p->row->ctr.idle_stopped++;
        pool_child_retire(c, "idle for pool_idle_timeout_s", false);
    }
}

void
pool_sweep(uint64_t now_ms)
{
    pool_session_sweep(now_ms);
    struct pool **pp = &pools.pools;
    while (*pp != NULL) {
        struct pool *p = *pp;
        struct pool_child *c = p->children;
        while (c != NULL) {
            struct pool_child *next = c->next;
            pool_sweep_child(c, now_ms);
            c = next;
        }
        if (!pools.draining && !p->retired && p->n_children < pool_want(p))
            pool_warm(p);
        if (p->key != NULL)
            pool_principal_sweep(p, now_ms);
        pool_listen_retry(p);
        uint64_t hb = pools.cfg->heartbeat_s * 1000u;
        for (struct pool_listen *l = p->listeners; l != NULL; l = l->next) {
            struct stream *st = l->call->st;
            if (st != NULL && now_ms - stream_last_push_ms(st) >= hb)
                stream_push_heartbeat(st);
        }
        for (struct pool_call *call = p->qhead; call != NULL; call = call->qnext) {
            struct stream *st = call->st; /* waiting for a child to start: in flight all the same */
            if (st != NULL && stream_own(st)->attached && now_ms - stream_last_push_ms(st) >= hb)
                stream_push_heartbeat(st);
        }
        /* A held call whose child answered is in no child's table, yet it is the pool's. */
        if ((p->retired && p->children == NULL && p->qhead == NULL && p->listeners == NULL
             && pool_held_in(p) == 0)
            || (p->key != NULL && pool_principal_over(p, now_ms))) {
            *pp = p->next;
            log_debug(NULL, "pool %s%s%s: ended", p->name,
                      p->key != NULL ? " of " : " of an older configuration",
                      p->key != NULL ? p->key->principal : "");
            pool_free(p);
            continue;
        }
        pp = &p->next;
    }
}

size_t
pool_restart(const struct config_server *srv)
{
    struct pool *old = pool_find(srv);
    if (config_server_per_principal(srv)) {
        /* Its principals' pools end; each principal's next request starts its own again. */
        size_t n = pool_principal_restart(srv);
        if (old != NULL) {
            n += old->n_children; /* the readiness probe's */
            pool_retire(old, &pool_retire_restart);
        }
        return n;
    }
    if (old == NULL)
        return 0;
    size_t n = old->n_children;
    pool_retire(old, &pool_retire_restart);
    if (pools.draining)
        return n;
    /*
     * As many children as the old pool had (at least the warm ones), started now: the operator's
     * restart does not wait out a backoff. The restart budget is the server's, not a pool's: the
     * new pool goes on with the old one's minute (its failures, the starts they counted) and its
     * count of failed starts in a row, so restarts in a loop against a server that keeps failing
     * start at most pool_max_restarts_per_min children a minute, as its own failures would.
     */
    struct pool *p = pool_new(pools.cfg, srv);
    p->fail_until_ms = old->fail_until_ms;
    p->window_ms = old->window_ms;
    p->restarts = old->restarts;
    p->starts_failed = old->starts_failed;
    p->backoff_ms = old->backoff_ms;
    size_t want = n > srv->pool_warm_children ? n : srv->pool_warm_children;
    if (want > srv->pool_max_children)
        want = srv->pool_max_children;
    while (!p->broken && p->n_children < want)
        if (pool_child_start(p) == NULL)
            break;
    return n;
}

void
pool_drain(void)
{
    pools.draining = true;
}

void
pool_close_all(void)
{
    pools.draining = true;
    pool_session_free_all(); /* every pooled session ends: its calls, its GET stream */
    for (struct pool *p = pools.pools; p != NULL; p = p->next) {
        pool_fail_queue(p, "gateway shutting down");
        pool_listen_end_all(p, NULL, RELAY_CANCEL_SHUTDOWN);
        pool_session_listen_end(p);
        while (p->children != NULL) {
            struct pool_child *c = p->children;
            for (struct pending *e = c->r.pt.head; e != NULL; e = e->next)
                if (e->state == PENDING_FORWARDED && e->owner != NULL)
                    pool_call_cancel(e->owner, RELAY_CANCEL_SHUTDOWN);
            pool_child_retire(c, "gateway shutting down", false);
        }
        pool_bridge_end_held(p);
    }
}

/*
 * p's requests that will end with an answer, held ones included: not the gateway's own probe,
 * initialize or fence, and not a stateless child's subscriptions/listen, which lasts until its
 * client leaves (a drain that waited for one would always run to shutdown_drain_ms).
 */
size_t
pool_inflight_in(const struct pool *p)
{
    size_t n = p->queued;
    for (const struct pool_child *c = p->children; c != NULL; c = c->next)
        for (const struct pending *e = c->r.pt.head; e != NULL; e = e->next)
            n += e->dir == PENDING_TO_CHILD && e->state == PENDING_FORWARDED
                 && e->gw_id != c->start_id && e->gw_id != c->fence_id
                 && strcmp(e->method, "subscriptions/listen") != 0;
    /* A held call whose child answered while it was held: in no table, not over. */
    for (const struct pool_call *call = pools.held; call != NULL; call = call->hnext)
        n += call->pool == p && call->p == NULL;
    return n;
}

size_t
pool_inflight(void)
{
    size_t n = 0;
    for (const struct pool *p = pools.pools; p != NULL; p = p->next)
        n += pool_inflight_in(p);
    return n;
}
