/* SPDX-License-Identifier: MIT */
/*
 * Pooled sessions' list changes and subscriptions at children that speak only the stateless
 * revision (the pool's era is stateless, declared or probed; session_mode = pooled). A legacy pool
 * subscribes each URI at a child (pool_listen.c); a stateless child has no resources/subscribe,
 * only subscriptions/listen. So the pool holds one listen of the gateway's own at one ready child
 * (the least busy), asking for the list changes the children's server/discover declared
 * (pool.listen_caps) and, when they declare resources.subscribe, for every URI the pool's sessions
 * subscribed (pool.subs: the same reference-counted table a legacy pool uses, pool_sub_ref).
 *
 *   - Its id is a string ("mcpgw-listen-N") that takes no entry in the child's table: the child
 *     does not look busy (picking, 429) and nothing waits for it; no client's request has it.
 *   - It is (re)opened at the end of the turn a URI is first named or last given back, the
 *     children's capabilities become known, or its child ends (another ready child takes it): the
 *     old one is ended first (notifications/cancelled, control room), so a change that comes
 *     between the two is not seen, as for a session with a child of its own.
 *   - Its notifications (the child tags them with _meta subscriptionId = its id; the relay hands a
 *     string subscriptionId, which no minted id is, to pool_child_notification) become the legacy
 *     ones: a list change goes to every pooled session of the pool's server (of the pool's
 *     principal, for per-principal credentials) with a GET stream (pool_session_fanout), and
 *     resources/updated to the sessions that subscribed its URI (pool_session_updated); neither
 *     carries the gateway's subscriptionId.
 *   - Its acknowledgement and its end (a result, an error, or the child's notifications/cancelled)
 *     are the gateway's: an end is logged, and the listen is opened again on the next change, a
 *     child's change, or by the sweep after a backoff that doubles from POOL_BACKOFF_MIN_MS to
 *     POOL_BACKOFF_MAX_MS (reset by an acknowledgement): a child that keeps refusing it is asked
 *     at most that often.
 *   - What to listen for is the children's discover capabilities: the pool's probe's, or the
 *     first pooled session's initialize (a server/discover); else (era = stateless probes
 *     nothing, and a session sealed at another instance never initializes here) the gateway asks
 *     a ready child's server/discover itself ("mcpgw-discover-N", no entry, once at a time).
 *   - A pool of a server with per-principal credentials holds one of its own; the shared pool of
 *     such a server (its children hold no principal's credentials) holds none.
 *   - Its child keeps running while the listen names URIs (child.subs), as a legacy child holding
 *     subscriptions does. A retired pool's listen ends at once (pool_retire, shutdown); the
 *     sessions' URIs go to their server's next pool (pool_session_pool_retired).
 *
 * Lifetimes: nothing is allocated: the pool holds the listen's child (and the asked one's), its
 * number and backoff; the URIs are pool.subs's. The deferred (re)open walks the pool list (a pool
 * freed meanwhile is no longer in it). A child that ends is forgotten here first
 * (pool_listen_child_change from pool_child_retire).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "log.h"
#include "pool_int.h"
#include "version.h"

#define GL_ID_PREFIX   "mcpgw-listen-"
#define GL_ASK_PREFIX  "mcpgw-discover-"
#define GL_CLIENT_INFO "{\"name\":\"mcp-gateway\",\"version\":\"" MCPGW_VERSION "\"}"
#define GL_LISTS       (JSONRPC_LISTEN_TOOLS | JSONRPC_LISTEN_PROMPTS | JSONRPC_LISTEN_RESOURCES)

/* The URIs the listen names: the sessions', when the children declared resources.subscribe. */
static bool
pool_gl_uris(const struct pool *p)
{
    return p->subs != NULL && (p->listen_caps & JSONRPC_LISTEN_UPDATES);
}

/* Whether p may hold a listen: a live stateless pool of pooled sessions, not a probe's pool. */
static bool
pool_gl_eligible(const struct pool *p)
{
    return p->era == CONFIG_ERA_STATELESS && p->srv->session_pooled && !p->retired
           && !pools.draining && !p->broken
           && (p->key != NULL || !config_server_per_principal(p->srv));
}

/* Whether p should hold a listen now (at a ready child). */
static bool
pool_gl_wanted(const struct pool *p)
{
    return pool_gl_eligible(p) && p->listen_known
           && ((p->listen_caps & GL_LISTS) != 0 || pool_gl_uris(p));
}

unsigned
pool_session_listen_declared(const struct pool *p)
{
    if (p->key == NULL && config_server_per_principal(p->srv))
        return 0; /* this pool holds no listen */
    return p->listen_caps & (GL_LISTS | JSONRPC_LISTEN_UPDATES);
}

bool
pool_session_listen_serves(const struct pool_session *s, const struct config_server *srv)
{
    const struct pool *p = s->sub_pool;
    if (p == NULL && !config_server_per_principal(srv))
        p = pool_shared_of(srv->name);
    /* Not known yet (no discover read at this instance): taken, and named once it is. */
    return p == NULL || !p->listen_known || (p->listen_caps & JSONRPC_LISTEN_UPDATES) != 0;
}

static void
pool_gl_run(void *arg)
{
    (void)arg;
    pools.listen_due = false;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        if (p->gl_due) {
            p->gl_due = false;
            pool_session_listen_sync(p);
        }
}

void
pool_session_listen_due(struct pool *p)
{
    if (p->era != CONFIG_ERA_STATELESS || !p->srv->session_pooled)
        return; /* nothing to do for a server without pooled sessions: off by default */
    p->gl_due = true;
    if (!pools.listen_due) {
        pools.listen_due = true;
        loop_defer(pools.l, pool_gl_run, NULL);
    }
}

/* The id of listen number no, quoted (as the child writes it back). */
static size_t
pool_gl_id(uint64_t no, char out[48])
{
    return (size_t)snprintf(out, 48, "\"" GL_ID_PREFIX "%" PRIu64 "\"", no);
}

/* Ends p's listen at its child (told with notifications/cancelled while it can be). */
static void
pool_gl_close(struct pool *p, const char *reason)
{
    struct pool_child *c = p->gl_child;
    if (c == NULL)
        return;
    p->gl_child = NULL;
    c->subs = 0;
    char id[48];
    size_t idlen = pool_gl_id(p->gl_no, id);
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                     "{\"requestId\":%.*s,\"reason\":\"%s\"}}\n",
                     (int)idlen, id, reason);
    struct iovec iov = { msg, (size_t)n };
    if (pool_send_control(c, &iov, 1) == -1)
        log_debug(c->tag, "the end of the gateway's subscriptions/listen not delivered");
}

/* Not opened again by the sweep before the backoff's end (the child refused or ended it). */
static void
pool_gl_back_off(struct pool *p)
{
    p->gl_backoff_ms = p->gl_backoff_ms == 0 ? POOL_BACKOFF_MIN_MS : p->gl_backoff_ms * 2;
    if (p->gl_backoff_ms > POOL_BACKOFF_MAX_MS)
        p->gl_backoff_ms = POOL_BACKOFF_MAX_MS;
    p->gl_after_ms = util_now_ms() + p->gl_backoff_ms;
}

/* The listen request for p's current wishes, into b. 0, or -1 (a buffer failed). */
static int
pool_gl_request(const struct pool *p, uint64_t no, struct buf *b, size_t *nuris)
{
    unsigned flags = p->listen_caps & GL_LISTS;
    int rc = buf_printf(b,
                        "{\"jsonrpc\":\"2.0\",\"id\":\"" GL_ID_PREFIX "%" PRIu64
                        "\",\"method\":\"subscriptions/listen\",\"params\":{\"notifications\":{",
                        no);
    const char *sep = "";
    static const struct {
        unsigned flag;
        const char *name;
    } lists[] = { { JSONRPC_LISTEN_TOOLS, "toolsListChanged" },
                  { JSONRPC_LISTEN_PROMPTS, "promptsListChanged" },
                  { JSONRPC_LISTEN_RESOURCES, "resourcesListChanged" } };
    for (size_t i = 0; i < ARRAY_LEN(lists); i++)
        if (flags & lists[i].flag) {
            rc |= buf_printf(b, "%s\"%s\":true", sep, lists[i].name);
            sep = ",";
        }
    *nuris = 0;
    if (pool_gl_uris(p)) {
        rc |= buf_printf(b, "%s\"resourceSubscriptions\":[", sep);
        for (const struct pool_sub *s = p->subs; s != NULL && rc == 0; s = s->next) {
            size_t qlen;
            char *q = jsonrpc_quote(s->uri, &qlen);
            if (*nuris > 0)
                rc |= buf_append(b, ",", 1);
            rc |= buf_append(b, q, qlen);
            free(q);
            (*nuris)++;
        }
        rc |= buf_append(b, "]", 1);
    }
    /* The envelope: the revision the children speak, the gateway as the client. */
    const struct revision *rev =
        p->speaks != 0 ? revision_set_newest(p->speaks) : revision_newest(REVISION_STATELESS);
    const struct envelope_client ec = { rev->name, "{}", GL_CLIENT_INFO, NULL };
    rc |= buf_append(b, "},\"_meta\":{", 11);
    size_t at = buf_used(b);
    rc |= envelope_members(&ec, b);
    if (rc == 0) { /* the first member takes no comma */
        memmove(b->data + b->off + at, b->data + b->off + at + 1, buf_used(b) - at - 1);
        b->len--;
    }
    rc |= buf_append(b, "}}}\n", 4);
    return rc;
}

/*
 * What the children declare is not known yet (era = stateless: no probe; no session's initialize
 * at this instance yet; a session taken up from its sealed id subscribes all the same): a
 * server/discover of the gateway's own ("mcpgw-discover-N", no entry) to the least busy ready
 * child. Its answer (pool_session_listen_answer) tells, and opens the listen.
 */
static void
pool_gl_ask(struct pool *p)
{
    if (p->gl_asking != NULL)
        return;
    struct pool_child *c = pool_least_busy_ready(p);
    if (c == NULL)
        return; /* the next child ready asks */
    const struct revision *rev =
        p->speaks != 0 ? revision_set_newest(p->speaks) : revision_newest(REVISION_STATELESS);
    char msg[384];
    int n = snprintf(msg, sizeof msg,
                     "{\"jsonrpc\":\"2.0\",\"id\":\"" GL_ASK_PREFIX "%" PRIu64
                     "\",\"method\":\"server/discover\",\"params\":{\"_meta\":{"
                     "\"io.modelcontextprotocol/protocolVersion\":\"%s\","
                     "\"io.modelcontextprotocol/clientCapabilities\":{},"
                     "\"io.modelcontextprotocol/clientInfo\":" GL_CLIENT_INFO "}}}\n",
                     ++p->gl_sent, rev->name);
    struct iovec iov = { msg, (size_t)n };
    if (n <= 0 || (size_t)n >= sizeof msg || pool_send(c, &iov, 1) == -1) {
        pool_gl_back_off(p);
        return;
    }
    p->gl_asking = c;
    log_debug(c->tag, "server/discover of the gateway's sent: what pooled sessions may listen for");
}

void
pool_session_listen_sync(struct pool *p)
{
    pool_gl_close(p, "subscriptions changed");
    if (!p->listen_known && pool_gl_eligible(p)) {
        pool_gl_ask(p); /* what to listen for: the children's discover, asked once */
        return;
    }
    if (!pool_gl_wanted(p))
        return;
    struct pool_child *best = pool_least_busy_ready(p);
    if (best == NULL)
        return; /* the next child ready opens it (pool_session_listen_child) */
    uint64_t no = p->gl_sent + 1;
    struct buf b;
    buf_init(&b, SIZE_MAX);
    size_t nuris = 0;
    int rc = pool_gl_request(p, no, &b, &nuris);
    struct iovec iov = { (void *)(uintptr_t)buf_head(&b), buf_used(&b) };
    if (rc != 0 || pool_send(best, &iov, 1) == -1) {
        log_warn(best->tag,
                 "the gateway's subscriptions/listen (%zu resource URIs) not delivered: "
                 "child stdin full; tried again later",
                 nuris);
        pool_gl_back_off(p);
        buf_clear(&b);
        return;
    }
    buf_clear(&b);
    p->gl_sent = no;
    p->gl_no = no;
    p->gl_child = best;
    best->subs = (unsigned)nuris; /* a listen naming URIs keeps its child running */
    log_debug(best->tag,
              "the gateway's subscriptions/listen " GL_ID_PREFIX "%" PRIu64
              " sent: %zu resource URIs",
              no, nuris);
}

void
pool_session_listen_child(struct pool_child *c, bool gone)
{
    struct pool *p = c->pool;
    if (gone && p->gl_asking == c) {
        p->gl_asking = NULL; /* asked again at another child */
        pool_session_listen_due(p);
    }
    if (gone && p->gl_child == c) {
        p->gl_child = NULL; /* nothing to tell a child that ended */
        c->subs = 0;
        pool_session_listen_due(p);
    } else if (!gone && p->gl_child == NULL) {
        pool_session_listen_due(p);
    }
}

void
pool_session_listen_retry(struct pool *p)
{
    if (p->gl_child == NULL && p->gl_asking == NULL && !p->gl_due && pool_gl_eligible(p)
        && (!p->listen_known || pool_gl_wanted(p)) && util_now_ms() >= p->gl_after_ms)
        pool_session_listen_due(p);
}

void
pool_session_listen_end(struct pool *p)
{
    pool_gl_close(p,
                  relay_reasons[p->retired ? p->retired_why->cancel : RELAY_CANCEL_SHUTDOWN].text);
}

void
pool_session_listen_caps(struct pool *p, const char *line, size_t len)
{
    if (p->listen_known)
        return;
    p->listen_caps = jsonrpc_listen_caps(line, len);
    p->listen_known = true;
    pool_session_listen_due(p);
}

/* Whether the id (raw) at sp is the current listen of c's pool, held at c. */
static bool
pool_gl_current(const struct pool_child *c, const char *line, struct jsonrpc_span sp)
{
    const struct pool *p = c->pool;
    char id[48];
    size_t idlen = pool_gl_id(p->gl_no, id);
    return p->gl_child == c && sp.len == idlen && memcmp(line + sp.off, id, idlen) == 0;
}

/* Whether the raw id at sp is any listen of the gateway's (an old one's answer, say). */
static bool
pool_gl_ours(const char *line, struct jsonrpc_span sp)
{
    return sp.len > sizeof GL_ID_PREFIX + 1 && line[sp.off] == '"'
           && memcmp(line + sp.off + 1, GL_ID_PREFIX, sizeof GL_ID_PREFIX - 1) == 0;
}

/* The child ended the listen (how): logged, opened again later. */
static void
pool_gl_ended(struct pool_child *c, const char *how)
{
    struct pool *p = c->pool;
    log_warn(c->tag,
             "the child %s the gateway's subscriptions/listen: pooled sessions' list "
             "changes and resource updates wait until it is open again",
             how);
    p->gl_child = NULL;
    c->subs = 0;
    pool_gl_back_off(p);
}

bool
pool_session_listen_answer(struct pool_child *c, const char *line, const struct jsonrpc_info *info)
{
    struct jsonrpc_span id = info->id;
    if (id.len > sizeof GL_ASK_PREFIX + 1 && line[id.off] == '"'
        && memcmp(line + id.off + 1, GL_ASK_PREFIX, sizeof GL_ASK_PREFIX - 1) == 0) {
        struct pool *p = c->pool;
        if (p->gl_asking != c)
            return true; /* an answer the gateway no longer waits for */
        p->gl_asking = NULL;
        if (info->kind == JSONRPC_RESULT && info->result.len > 0) {
            /* The result object alone, as a message: the stray answer's length is not known. */
            struct buf b;
            buf_init(&b, SIZE_MAX);
            if (buf_append(&b, "{\"result\":", 10) == 0
                && buf_append(&b, line + info->result.off, info->result.len) == 0
                && buf_append(&b, "}", 1) == 0)
                pool_session_listen_caps(p, buf_head(&b), buf_used(&b));
            buf_clear(&b);
        } else {
            log_warn(c->tag, "the child refused the gateway's server/discover: pooled sessions' "
                             "list changes and resource updates wait for a session's initialize");
            pool_gl_back_off(p);
        }
        return true;
    }
    if (!pool_gl_ours(line, info->id))
        return false;
    if (pool_gl_current(c, line, info->id))
        pool_gl_ended(c, info->kind == JSONRPC_ERROR ? "refused" : "ended");
    return true; /* an older one's end: it was cancelled */
}

bool
pool_session_listen_cancelled(struct pool_child *c, const char *line,
                              const struct jsonrpc_info *info)
{
    if (info->request_id.len == 0 || !pool_gl_ours(line, info->request_id))
        return false;
    if (pool_gl_current(c, line, info->request_id))
        pool_gl_ended(c, "cancelled");
    return true;
}

bool
pool_session_listen_note(struct pool_child *c, const char *line, size_t len,
                         const struct jsonrpc_info *info)
{
    struct pool *p = c->pool;
    if (strcmp(info->method, "notifications/cancelled") == 0)
        return pool_session_listen_cancelled(c, line, info);
    if (info->meta_subscription.len == 0) {
        /* An acknowledgement without the id: its listen's, when it holds one. */
        return p->gl_child == c
               && strcmp(info->method, "notifications/subscriptions/acknowledged") == 0;
    }
    if (!pool_gl_current(c, line, info->meta_subscription)) {
        if (!pool_gl_ours(line, info->meta_subscription))
            return false;
        p->row->ctr.late_dropped++; /* an older listen's, ended since */
        return true;
    }
    if (strcmp(info->method, "notifications/subscriptions/acknowledged") == 0) {
        p->gl_backoff_ms = 0;
        log_debug(c->tag, "the gateway's subscriptions/listen acknowledged");
        return true;
    }
    (void)len;
    /* The legacy form, without the gateway's subscriptionId: to every session of the server
     * (a list change) or to those that subscribed the URI. */
    struct buf b;
    buf_init(&b, SIZE_MAX);
    struct jsonrpc_info mi;
    bool sent = false;
    if (envelope_legacy_note(line, info, &b) == 0
        && jsonrpc_scan(buf_head(&b), buf_used(&b), &mi, NULL) == JSONRPC_OK)
        sent = mi.uri.len == 0 ? pool_session_fanout(p, buf_head(&b), buf_used(&b))
                               : pool_session_updated(p, buf_head(&b), buf_used(&b), &mi);
    if (!sent)
        p->row->ctr.unattributed++; /* neither, or no session reads a GET stream for it */
    buf_clear(&b);
    return true;
}
