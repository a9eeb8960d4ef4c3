/* SPDX-License-Identifier: MIT */
/*
 * subscriptions/listen for legacy pools, served by the gateway itself: a legacy
 * child knows nothing of it. A listen request becomes a listener of its pool, on the request's
 * long-lived stream: first notifications/subscriptions/acknowledged with what was agreed (what
 * was asked, as far as the server's initialize declared it: tools, prompts and resources
 * listChanged, resources subscribe), then every list change any child of the pool reports, and
 * notifications/resources/updated for the URIs it named, each carrying
 * _meta["io.modelcontextprotocol/subscriptionId"] = the listen request's id. A list change goes
 * to every listener that asked for it: it is a fact about the server, not about a request. A
 * child that reports the same change as another sends it again: listeners may see it twice.
 *
 * A URI is subscribed (resources/subscribe) at one child of the pool, whichever is least busy,
 * while at least one listener names it (reference-counted); the last listener to leave
 * unsubscribes it; a child that ends takes its subscriptions to another child. The URIs are in a
 * table by hash (pool.sub_names): tens of thousands of them open and close in linear time. Closing
 * the stream ends the listener; at shutdown each listener gets the graceful end, a complete
 * result; one that falls behind (pool_listen_push) ends with an error. Per principal, listens and
 * their URIs are bounded (pool_caps.c).
 *
 * Pooled sessions' URIs (resources/subscribe, pool_session.c) are referenced in the same table. At
 * a stateless pool nothing is subscribed per URI (a stateless child has no resources/subscribe):
 * the pool's own subscriptions/listen names them all, re-opened when a URI is first named or
 * last given back (pool_session_listen.c); pool_listen_child_change and pool_listen_retry hand
 * such a pool to it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "pool_int.h"

#define POOL_LISTEN_URIS_MAX 256  /* resourceSubscriptions of one listen request */
#define POOL_LISTEN_URI_MAX  2048 /* bytes of one URI */

/* --- subscriptions at the children ----------------------------------------------------------- */

#define SUB_NEXT      offsetof(struct pool_sub, hnext)
#define SUB_ID_PREFIX "mcpgw-sub-"

/*
 * Sends c a resources/subscribe or resources/unsubscribe of uri, as the gateway's own request:
 * its id is a string ("mcpgw-sub-N") no client request has on a pool child, and it takes no
 * entry in c's table, so it neither makes c look busy (picking, 429) nor is ever waited for;
 * the answer is only logged when it is an error (pool_listen_answer). -1: c's stdin is full.
 */
static int
pool_sub_send(struct pool_child *c, const char *method, const char *uri)
{
    size_t qlen;
    char *q = jsonrpc_quote(uri, &qlen);
    char head[128];
    int hlen = snprintf(head, sizeof(head),
                        "{\"jsonrpc\":\"2.0\",\"id\":\"" SUB_ID_PREFIX "%" PRIu64
                        "\",\"method\":\"%s\",\"params\":{\"uri\":",
                        ++c->subs_sent, method);
    struct iovec iov[3] = { { head, (size_t)hlen },
                            { q, qlen },
                            { (void *)(uintptr_t) "}}\n", 3 } };
    int rc = pool_send(c, iov, 3);
    if (rc == -1)
        log_warn(c->tag, "%s not delivered: child stdin full", method);
    free(q);
    return rc;
}

bool
pool_listen_answer(struct pool_child *c, const char *line, const struct jsonrpc_info *info)
{
    if (info->id_type != JSONRPC_ID_STRING || info->id.len < sizeof SUB_ID_PREFIX + 1
        || memcmp(line + info->id.off + 1, SUB_ID_PREFIX, sizeof SUB_ID_PREFIX - 1) != 0)
        return false;
    if (info->kind == JSONRPC_ERROR)
        log_warn(c->tag, "child refused the gateway's resources/subscribe or unsubscribe");
    return true;
}

struct pool_child *
pool_least_busy_ready(struct pool *p)
{
    struct pool_child *best = NULL;
    size_t min = SIZE_MAX;
    for (struct pool_child *c = p->children; c != NULL; c = c->next)
        if (c->state == POOL_CHILD_READY && pending_active(&c->r.pt, PENDING_TO_CHILD) < min) {
            best = c;
            min = pending_active(&c->r.pt, PENDING_TO_CHILD);
        }
    return best;
}

/*
 * Holds sub at a ready child (the least busy); none ready, or its stdin full: it is not placed and
 * waits for the next child to be ready (pool_listen_child_change).
 */
static void
pool_sub_place(struct pool *p, struct pool_sub *sub)
{
    if (p->era == CONFIG_ERA_STATELESS) {
        /* A stateless child has no resources/subscribe: the pool's listen names it. */
        sub->c = NULL;
        return;
    }
    struct pool_child *best = pool_least_busy_ready(p);
    sub->c = NULL;
    if (best == NULL || pool_sub_send(best, "resources/subscribe", sub->uri) == -1)
        return;
    sub->c = best;
    best->subs++;
}

/* Another listener names uri: found by its hash, or added and subscribed. */
void
pool_sub_ref(struct pool *p, const char *uri)
{
    struct pool_sub *s = pool_names_find(&p->sub_names, uri, SUB_NEXT);
    if (s != NULL) {
        s->refs++;
        return;
    }
    s = xcalloc(1, sizeof(*s));
    s->uri = xstrdup(uri);
    s->refs = 1;
    pool_names_add(&p->sub_names, s, SUB_NEXT);
    s->next = p->subs;
    if (p->subs != NULL)
        p->subs->prev = s;
    p->subs = s;
    pool_sub_place(p, s);
    pool_session_listen_due(p); /* a stateless pool's listen names one URI more */
}

/* A listener naming uri left: the last one unsubscribes it. */
void
pool_sub_unref(struct pool *p, const char *uri)
{
    struct pool_sub *s = pool_names_find(&p->sub_names, uri, SUB_NEXT);
    if (s == NULL || --s->refs > 0)
        return;
    pool_names_del(&p->sub_names, s, SUB_NEXT);
    UTIL_DLIST_UNLINK(p->subs, s, prev, next);
    if (s->c != NULL) {
        s->c->subs--;
        (void)pool_sub_send(s->c, "resources/unsubscribe", s->uri);
    }
    free(s->uri);
    free(s);
    pool_session_listen_due(p); /* a stateless pool's listen names one URI less */
}

bool
pool_listen_orphans(const struct pool *p)
{
    if (p->era == CONFIG_ERA_STATELESS) {
        /* The URIs wait for a child to hold the pool's listen: none is ready. */
        if (p->subs == NULL || !(p->listen_caps & JSONRPC_LISTEN_UPDATES))
            return false;
        for (const struct pool_child *c = p->children; c != NULL; c = c->next)
            if (c->state == POOL_CHILD_READY)
                return false;
        return true;
    }
    for (const struct pool_sub *s = p->subs; s != NULL; s = s->next)
        if (s->c == NULL)
            return true;
    return false;
}

/*
 * Places the subscriptions that wait (s->c NULL) while that succeeds: once one cannot be (no child
 * ready, or the least busy one's stdin is full) the rest wait for the next chance.
 */
void
pool_listen_child_change(struct pool_child *c, bool gone)
{
    struct pool *p = c->pool;
    if (p->era == CONFIG_ERA_STATELESS) {
        pool_session_listen_child(c, gone);
        return;
    }
    bool placing = true;
    for (struct pool_sub *s = p->subs; s != NULL; s = s->next) {
        if (gone && s->c == c)
            s->c = NULL; /* its subscriptions go to another child */
        if (placing && s->c == NULL) {
            pool_sub_place(p, s);
            placing = s->c != NULL;
        }
    }
}

void
pool_listen_retry(struct pool *p)
{
    if (p->era == CONFIG_ERA_STATELESS) {
        pool_session_listen_retry(p);
        return;
    }
    for (struct pool_sub *s = p->subs; s != NULL; s = s->next)
        if (s->c == NULL) {
            pool_sub_place(p, s);
            if (s->c == NULL)
                return;
        }
}

/* --- listeners ------------------------------------------------------------------------------ */

bool
pool_listen_open(struct pool_call *call, const char *body, const struct jsonrpc_info *info)
{
    struct pool *p = call->pool;
    unsigned asked = 0;
    char **uris = NULL;
    size_t nuris = 0;
    if (info->params.len == 0
        || jsonrpc_listen_parse(body + info->params.off, info->params.len, &asked, &uris, &nuris,
                                POOL_LISTEN_URIS_MAX, POOL_LISTEN_URI_MAX)
               == -1)
        return false;
    unsigned flags = asked & p->listen_caps;
    if ((flags & JSONRPC_LISTEN_UPDATES) && !pool_caps_uris_fit(call, nuris)) {
        for (size_t i = 0; i < nuris; i++)
            free(uris[i]);
        free(uris);
        pool_call_error(call, body + info->id.off, info->id.len, JSONRPC_INVALID_PARAMS,
                        "too many resource URIs over this principal's listens "
                        "(max_listen_uris_per_principal)");
        return true;
    }
    struct pool_listen *l = xcalloc(1, sizeof(*l));
    l->flags = flags;
    if (l->flags & JSONRPC_LISTEN_UPDATES) {
        l->uris = uris;
        l->nuris = nuris;
    } else {
        for (size_t i = 0; i < nuris; i++)
            free(uris[i]);
        free(uris);
    }
    l->id = xmemdup(body + info->id.off, info->id.len);
    l->id_len = info->id.len;
    l->call = call;
    l->next = p->listeners;
    p->listeners = l;
    call->listen = l;
    pool_caps_uris(call, l->nuris, true);
    size_t len;
    char *ack = jsonrpc_listen_ack_new(l->id, l->id_len, l->flags, l->uris, l->nuris, &len);
    struct iovec iov = { ack, len };
    pool_push(call, &iov, 1);
    free(ack);
    for (size_t i = 0; i < l->nuris; i++)
        pool_sub_ref(p, l->uris[i]);
    log_info(NULL, "pool %s: listener %.*s: flags %u, %zu resource URIs", p->name,
             (int)(l->id_len > 64 ? 64 : l->id_len), l->id, l->flags, l->nuris);
    return true;
}

void
pool_listen_forget(struct pool_call *call)
{
    struct pool_listen *l = call->listen;
    if (l == NULL)
        return;
    struct pool *p = call->pool;
    for (struct pool_listen **q = &p->listeners; *q != NULL; q = &(*q)->next)
        if (*q == l) {
            *q = l->next;
            break;
        }
    for (size_t i = 0; i < l->nuris; i++) {
        pool_sub_unref(p, l->uris[i]);
        free(l->uris[i]);
    }
    pool_caps_uris(call, l->nuris, false);
    free(l->uris);
    free(l->id);
    free(l);
    call->listen = NULL;
}

/*
 * A stateless child's listens: requests in flight at the child that never end by themselves (no
 * timeout, no answer until the client leaves). Each is cancelled at its child (the child is told,
 * counted for why) and its client gets error: else a retired pool's child would never idle out,
 * and neither the pool nor its configuration would ever be freed.
 */
static void
pool_listen_end_forwarded(struct pool *p, const char *error, enum relay_reason why)
{
    for (struct pool_child *c = p->children; c != NULL; c = c->next) {
        struct pending *e = c->r.pt.head;
        while (e != NULL) {
            struct pending *next = e->next;
            struct pool_call *call = e->owner;
            if (e->state == PENDING_FORWARDED && call != NULL
                && strcmp(e->method, "subscriptions/listen") == 0) {
                audit_call_cancel(call->audit, relay_reasons[why].label);
                if (!relay_cancel(&c->r, e, why))
                    relay_count(p->stats, why);
                /* The entry lingers cancelled (a late answer is dropped); the call ends. */
                pool_call_error(call, e->orig_id, e->orig_id_len, JSONRPC_INTERNAL_ERROR, error);
            }
            e = next;
        }
    }
    if (p->qhead != NULL)
        pool_rooms_due(); /* the listens' slots are free for what waits (no fence follows) */
}

void
pool_listen_end_all(struct pool *p, const char *error, enum relay_reason why)
{
    if (error != NULL)
        pool_listen_end_forwarded(p, error, why);
    while (p->listeners != NULL) {
        struct pool_listen *l = p->listeners;
        audit_call_cancel(l->call->audit, relay_reasons[why].label); /* ended by the gateway */
        if (error != NULL) {
            relay_count(p->stats, why);
            pool_call_error(l->call, l->id, l->id_len, JSONRPC_INTERNAL_ERROR, error);
            continue;
        }
        /* The graceful end: a complete result naming the subscription. */
        static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
        static const char mid[] = ",\"result\":{\"resultType\":\"complete\",\"_meta\":{"
                                  "\"io.modelcontextprotocol/subscriptionId\":";
        struct iovec iov[5] = {
            { (void *)(uintptr_t)head, sizeof head - 1 },
            { l->id, l->id_len },
            { (void *)(uintptr_t)mid, sizeof mid - 1 },
            { l->id, l->id_len },
            { (void *)(uintptr_t) "}}}", 3 },
        };
        pool_push(l->call, iov, 5);
        pool_call_end(l->call); /* forgets l */
    }
}

/*
 * Pushes a notification carrying the listener's subscription id: head, id, tail.
 *
 * A listener's stream has no child to pause (the notifications come from every child, for every
 * listener): a listener that does not read would keep all of them. So once its unread bytes pass
 * stream_queue_bytes the listen ends, with a JSON-RPC error (-32603) after what it had not read:
 * it fell behind, and listens again to start over (re-reading what it watches). Nothing is
 * dropped silently. The listener (l) is freed then: the callers iterate with a saved next.
 */
static void
pool_listen_push(struct pool_listen *l, const char *head, size_t hlen, const char *mid, size_t mlen)
{
    struct iovec iov[4] = {
        { (void *)(uintptr_t)head, hlen },
        { (void *)(uintptr_t)mid, mlen },
        { l->id, l->id_len },
        { (void *)(uintptr_t) "}}}", 3 },
    };
    struct pool_call *call = l->call;
    pool_push(call, iov, 4);
    if (call->st == NULL || stream_pending(call->st) <= pools.cfg->stream_queue_bytes)
        return;
    log_warn(NULL,
             "pool %s: listener %.*s fell behind (more than stream_queue_bytes unread): ended",
             call->pool->name, (int)(l->id_len > 64 ? 64 : l->id_len), l->id);
    pool_call_error(call, l->id, l->id_len, JSONRPC_INTERNAL_ERROR,
                    "listener fell behind: more than stream_queue_bytes of notifications "
                    "unread; the listen ended, listen again");
}

bool
pool_listen_notify(struct pool_child *c, const char *line, const struct jsonrpc_info *info)
{
    static const struct {
        const char *method;
        unsigned flag;
    } lists[] = {
        { "notifications/tools/list_changed", JSONRPC_LISTEN_TOOLS },
        { "notifications/prompts/list_changed", JSONRPC_LISTEN_PROMPTS },
        { "notifications/resources/list_changed", JSONRPC_LISTEN_RESOURCES },
    };
    static const char meta[] = "{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":";
    struct pool *p = c->pool;
    size_t sent = 0;
    /*
     * A child still starting tells of its own start (lists being filled, say), which no listener
     * missed anything by: only a ready child's changes are the server's.
     */
    if (c->state != POOL_CHILD_READY)
        return false;
    for (size_t i = 0; i < ARRAY_LEN(lists); i++) {
        if (strcmp(info->method, lists[i].method) != 0)
            continue;
        char head[96];
        int hlen = snprintf(head, sizeof(head),
                            "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":", lists[i].method);
        for (struct pool_listen *l = p->listeners, *next; l != NULL; l = next) {
            next = l->next; /* l may end (pool_listen_push) */
            if (l->flags & lists[i].flag) {
                pool_listen_push(l, head, (size_t)hlen, meta, sizeof meta - 1);
                sent++;
            }
        }
        return sent > 0;
    }
    char uri[POOL_LISTEN_URI_MAX + 1];
    if (strcmp(info->method, "notifications/resources/updated") != 0 || info->uri.len == 0
        || !jsonrpc_string_at(line, info->uri, uri, sizeof(uri), NULL)
        || pool_names_find(&p->sub_names, uri, SUB_NEXT) == NULL)
        return false; /* not a URI any listener named */
    /* {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":<raw>,"_meta":…
     */
    struct buf b;
    buf_init(&b, POOL_LISTEN_URI_MAX * 8);
    if (buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
                       "\"params\":{\"uri\":")
            == -1
        || buf_append(&b, line + info->uri.off, info->uri.len) == -1) {
        buf_clear(&b);
        return false;
    }
    static const char umeta[] = ",\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":";
    for (struct pool_listen *l = p->listeners, *next; l != NULL; l = next) {
        next = l->next; /* l may end (pool_listen_push) */
        for (size_t i = 0; i < l->nuris; i++)
            if (strcmp(l->uris[i], uri) == 0) {
                pool_listen_push(l, buf_head(&b), buf_used(&b), umeta, sizeof umeta - 1);
                sent++;
                break;
            }
    }
    buf_clear(&b);
    return sent > 0;
}
