/* SPDX-License-Identifier: MIT */
/*
 * Legacy sessions served by the pool (session_mode = pooled; pool.h): a session owns no child.
 * Its record holds what a child would keep per connection (its calls, its log level, its GET
 * stream); everything else is the pool's: the session's initialize is answered by the gateway
 * from the pool's own handshake with its children (pool_start.c keeps it), and each request is a
 * pool call (pool_request) on whichever child the pool picks, with the id and the progress token
 * minted per child, so two sessions on one child never see each other's answers or progress.
 *
 * Lifetimes: the table owns a session; pool_session_close is its one close path (DELETE, idle
 * expiry, shutdown), which ends every call of the session first (each call's one end is
 * pool_call_end, which unlinks it here) and frees the record. A call points at its session only
 * while linked in its list. Nothing else keeps a pointer to a session across a loop turn: the
 * HTTP front looks it up by id at each request.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "auth.h"
#include "crypto.h"
#include "keyring.h"
#include "log.h"
#include "pool_int.h"
#include "session_seal.h"

#define PSS_TOMBS 1024 /* DELETEd ids this instance remembers (their digests) */

/* An id DELETEd here: its digest, until its max age is over (then it would not open anyway). */
struct pss_tomb {
    unsigned char h[CRYPTO_SHA256_LEN];
    int64_t until_s;
};

static struct {
    struct pool_names t;      /* local records, by id */
    struct pool_session *all; /* every local record, newest first */
    size_t n;
    uint64_t next_stream_id;
    struct keyring *kr; /* seals and opens the ids (session_key_file, or a random key) */
    bool kr_random;     /* kr is the random key made at start */
    uint64_t kr_gen;    /* changes with kr: a record's id opened under this one needs no AEAD */
    struct pss_tomb tombs[PSS_TOMBS];
    size_t next_tomb;
} pss;

#define PSS_LINK     offsetof(struct pool_session, hnext)
#define PSS_URIS_MAX 256  /* resources/subscribe URIs one session may hold */
#define PSS_URI_MAX  2048 /* bytes of one URI */
#define PSS_LEVEL_ID "mcpgw-log-"

static const char *const pss_levels[8] = { "debug", "info",     "notice", "warning",
                                           "error", "critical", "alert",  "emergency" };

bool
pool_session_named(const char *id)
{
    return session_seal_is(id, strlen(id));
}

/* --- the keys of sealed ids ------------------------------------------------------------------ */

struct keyring *
pool_session_keys_load(const struct config *cfg, char *err, size_t errlen)
{
    err[0] = '\0';
    if (cfg->session_key_file != NULL)
        return keyring_load(cfg->session_key_file, SESSION_SEAL_PURPOSE, err, errlen);
    if (pss.kr != NULL && pss.kr_random)
        return NULL; /* the random key made earlier stays: the sessions it sealed stay */
    unsigned char key[32];
    char hex[2 * sizeof key];
    if (crypto_random(key, sizeof key) == -1) {
        snprintf(err, errlen, "session_key_file: no randomness for a random key");
        return NULL;
    }
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof key; i++) {
        hex[2 * i] = digits[key[i] >> 4];
        hex[2 * i + 1] = digits[key[i] & 15];
    }
    struct keyring *kr =
        keyring_parse(hex, sizeof hex, "random key", SESSION_SEAL_PURPOSE, err, errlen);
    crypto_cleanse(key, sizeof key);
    crypto_cleanse(hex, sizeof hex);
    return kr;
}

void
pool_session_keys_set(const struct config *cfg, struct keyring *kr)
{
    keyring_free(pss.kr);
    pss.kr = kr;
    pss.kr_gen++;
    pss.kr_random = kr != NULL && cfg->session_key_file == NULL;
}

/* --- DELETEd ids: a bounded memory, so that this instance answers 404 after a DELETE -------- */

static bool
pool_session_deleted(const char *id, int64_t now_s)
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(id, strlen(id), h);
    for (size_t i = 0; i < PSS_TOMBS; i++)
        if (pss.tombs[i].until_s >= now_s && crypto_equal(pss.tombs[i].h, h, sizeof h))
            return true;
    return false;
}

static void
pool_session_bury(const struct pool_session *s)
{
    struct pss_tomb *t = &pss.tombs[pss.next_tomb++ % PSS_TOMBS];
    crypto_sha256(s->id, strlen(s->id), t->h);
    t->until_s = s->issued_s + (int64_t)pools.cfg->session_max_age_s;
}

struct pool_session *
pool_session_lookup(const char *id)
{
    return pool_names_find(&pss.t, id, PSS_LINK);
}

size_t
pool_session_count(void)
{
    return pss.n;
}

const struct pool_session *
pool_sessions_all(void)
{
    return pss.all;
}

const char *
pool_session_id(const struct pool_session *s)
{
    return s->id;
}

size_t
pool_session_count_of(const char *server)
{
    size_t n = 0;
    for (const struct pool_session *s = pss.all; s != NULL; s = s->next)
        n += strcmp(s->server, server) == 0;
    return n;
}

const char *
pool_session_label(const struct pool_session *s)
{
    return s->label;
}

/* A new local record, in the table: id (sealed, or the 2024-11-05 transport's random one),
 * server, principal, and one session counted. */
struct pool_session *
pool_session_new(const char *id, const char *server, const char *principal, int64_t issued_s)
{
    struct pool_session *s = xcalloc(1, sizeof(*s));
    s->id = xstrdup(id);
    session_seal_label(id, strlen(id), s->label);
    s->server = xstrdup(server);
    s->principal = xstrdup(principal);
    s->issued_s = issued_s;
    s->opened_gen = pss.kr_gen; /* sealed here, or opened just now */
    s->last_ms = util_now_ms();
    s->created_unix_ms = util_now_unix_ms();
    s->quota = quota_take(QUOTA_GATEWAY, principal, QUOTA_SESSIONS, 1);
    pool_names_add(&pss.t, s, PSS_LINK);
    s->next = pss.all;
    if (pss.all != NULL)
        pss.all->prev = s;
    pss.all = s;
    pss.n++;
    pool_server_of(s->server)->sessions_open++;
    s->linked = true;
    return s;
}

bool
pool_session_room(const char *principal, bool room, enum pool_status *status, const char **why)
{
    if (pools.draining) {
        *status = POOL_E_DRAINING; /* 503: nginx tries the next instance */
        *why = "gateway shutting down";
        return false;
    }
    if (!room) {
        *status = POOL_E_UNAVAILABLE;
        *why = "too many sessions";
        return false;
    }
    if (!quota_fits(QUOTA_GATEWAY, principal, QUOTA_SESSIONS,
                    pools.cfg->auth.max_sessions_per_principal)) {
        *status = POOL_E_PRINCIPAL;
        *why = "too many sessions for this principal (max_sessions_per_principal)";
        return false;
    }
    return true;
}

struct pool_session *
pool_session_find(const char *id, const struct config_server *srv, const char *principal, bool room,
                  enum pool_status *status, const char **why)
{
    *status = POOL_E_GONE;
    if (principal == NULL)
        principal = "";
    struct session_seal_record r;
    int64_t now_s = (int64_t)(util_now_unix_ms() / 1000u);
    struct pool_session *s = pool_names_find(&pss.t, id, PSS_LINK);
    if (s != NULL && s->sse)
        return NULL; /* a 2024-11-05 session's id (pool_session_sse_find), never a sealed one */
    if (s != NULL && s->opened_gen == pss.kr_gen && pss.kr != NULL) {
        /* The record's own id, opened under the keys in use: what it sealed is what the record
         * holds (principal, server, issue time), so only the age is checked again. */
        if (s->failed || strcmp(s->principal, principal) != 0 || strcmp(s->server, srv->name) != 0
            || !srv->session_pooled
            || session_seal_expired(s->issued_s, now_s, pools.cfg->session_max_age_s))
            return NULL;
        return s;
    }
    enum session_seal_verdict v =
        pss.kr == NULL
            ? SESSION_SEAL_UNKNOWN_KEY
            : session_seal_open(pss.kr, id, strlen(id), now_s, pools.cfg->session_max_age_s, &r);
    if (v != SESSION_SEAL_OK) {
        log_debug(NULL, "pooled session id refused: %s", session_seal_verdict_text(v));
        return NULL;
    }
    /* Another principal's id, or another server's: the same 404 as an unknown one. */
    if (!session_seal_principal_is(&r, principal) || strcmp(r.server, srv->name) != 0
        || !srv->session_pooled)
        return NULL;
    if (s != NULL) {
        s->opened_gen = pss.kr_gen;
        return s->failed || strcmp(s->principal, principal) != 0 ? NULL : s;
    }
    const struct revision *rev = revision_named(r.revision);
    if (!revision_over(rev, REVISION_STREAMABLE) || pool_session_deleted(id, now_s))
        return NULL;
    /* Opened, and no record here: sealed at another instance, or before a restart. */
    if (!pool_session_room(principal, room, status, why))
        return NULL;
    s = pool_session_new(id, srv->name, principal, r.issued_s);
    s->rev = rev;
    s->caps = r.flags;
    const struct log_field f[] = { { "server", srv->name, false },
                                   { "principal", principal, false } };
    log_fields(LOG_INFO, s->label, f, ARRAY_LEN(f),
               "pooled session taken up here: server=%s owner=%s (sealed %" PRId64 " s ago)",
               srv->name, principal, now_s - r.issued_s);
    return s;
}

/*
 * The revision a session gets: the client's when the gateway serves it over the session's
 * transports (mask: Streamable HTTP; a 2024-11-05 session's, 2024-11-05 too) and the children
 * speak it (not newer than theirs); else the children's, else the newest.
 */
static const struct revision *
pool_session_negotiate(const char *asked, const char *child, unsigned mask)
{
    const struct revision *c = revision_named(child);
    if (!revision_over(c, mask))
        c = revision_newest(mask);
    const struct revision *a = revision_named(asked);
    if (revision_over(a, mask) && revision_bit(a) <= revision_bit(c))
        return a;
    return c;
}

struct stream *
pool_session_local(const char *msg, size_t len)
{
    if (pools.batch != NULL)
        return pool_batch_local(msg, len); /* a batch's request: on the batch's stream */
    struct stream *st = stream_new(++pss.next_stream_id, false, 0);
    struct iovec iov = { (void *)(uintptr_t)msg, len };
    stream_push_message(st, &iov, 1);
    stream_end(st);
    stream_own(st)->attached = true;
    return st;
}

static struct stream *
pool_session_result(const struct jsonrpc_info *info, const char *body, const char *result)
{
    char m[256 + JSONRPC_METHOD_MAX];
    int n = snprintf(m, sizeof m, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":%s}",
                     (int)info->id.len, body + info->id.off, result);
    return pool_session_local(m, (size_t)n);
}

struct stream *
pool_session_error(const struct jsonrpc_info *info, const char *body, int code, const char *why)
{
    size_t len;
    char *e = jsonrpc_error_new(body + info->id.off, info->id.len, code, why, &len);
    struct stream *st = pool_session_local(e, len);
    free(e);
    return st;
}

/* --- log levels: each session's own, the children at the most verbose one asked ----------- */

/* Sends c logging/setLevel at level, as the gateway's own request (no entry in c's table). */
static void
pool_session_level_send(struct pool_child *c, struct pool_server *row, int level)
{
    char m[160];
    int n = snprintf(m, sizeof m,
                     "{\"jsonrpc\":\"2.0\",\"id\":\"" PSS_LEVEL_ID "%" PRIu64
                     "\",\"method\":\"logging/setLevel\",\"params\":{\"level\":\"%s\"}}\n",
                     ++row->levels_sent, pss_levels[level]);
    struct iovec iov = { m, (size_t)n };
    if (pool_send(c, &iov, 1) == -1)
        log_warn(c->tag, "logging/setLevel not delivered: child stdin full");
}

/* The most verbose level the sessions of row's server asked changed: every child is told. */
static void
pool_session_levels_changed(const char *server)
{
    struct pool_server *row = pool_server_of(server);
    int level = -1;
    for (int i = 0; i < 8 && level < 0; i++)
        if (row->levels_asked[i] > 0)
            level = i;
    if (level < 0 || level + 1 == row->child_level1)
        return; /* none asks any more: the children stay where they are */
    row->child_level1 = level + 1;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        if (!p->retired && strcmp(p->name, server) == 0 && p->era == CONFIG_ERA_LEGACY)
            for (struct pool_child *c = p->children; c != NULL; c = c->next)
                if (c->state == POOL_CHILD_READY)
                    pool_session_level_send(c, row, level);
}

static void
pool_session_set_level(struct pool_session *s, int level)
{
    struct pool_server *row = pool_server_of(s->server);
    if (s->level_asked)
        row->levels_asked[s->log_level]--;
    s->log_level = level;
    s->level_asked = level >= 0;
    if (level >= 0)
        row->levels_asked[level]++;
    pool_session_levels_changed(s->server);
}

void
pool_session_child_ready(struct pool_child *c)
{
    struct pool_server *row = c->pool->row;
    if (c->pool->era == CONFIG_ERA_LEGACY && row->child_level1 > 0)
        pool_session_level_send(c, row, row->child_level1 - 1);
}

bool
pool_session_level_answer(struct pool_child *c, const char *line, const struct jsonrpc_info *info)
{
    if (info->id_type != JSONRPC_ID_STRING || info->id.len < sizeof PSS_LEVEL_ID + 1
        || memcmp(line + info->id.off + 1, PSS_LEVEL_ID, sizeof PSS_LEVEL_ID - 1) != 0)
        return false;
    if (info->kind == JSONRPC_ERROR)
        log_info(c->tag, "child refused the gateway's logging/setLevel");
    return true;
}

/* --- resources/subscribe: each session's URIs, referenced once at the pool ----------------- */

/* The session's URIs are referenced at its server's current shared pool (placed at a child). */
static void
pool_session_subs_place(struct pool_session *s)
{
    if (s->sub_pool != NULL || s->nuris == 0)
        return;
    s->sub_pool = pool_shared_of(s->server);
    if (s->sub_pool == NULL) /* per-principal credentials: its principal's pool, never another's */
        s->sub_pool = pool_principal_of(s->server, s->principal, s->claims);
    for (size_t i = 0; s->sub_pool != NULL && i < s->nuris; i++)
        pool_sub_ref(s->sub_pool, s->uris[i]);
}

static void
pool_session_subs_drop(struct pool_session *s)
{
    for (size_t i = 0; s->sub_pool != NULL && i < s->nuris; i++)
        pool_sub_unref(s->sub_pool, s->uris[i]);
    s->sub_pool = NULL;
}

void
pool_session_pool_retired(struct pool *p)
{
    for (struct pool_session *s = pss.all; s != NULL; s = s->next)
        if (s->sub_pool == p)
            pool_session_subs_drop(s); /* placed again by the sweep, in the server's next pool */
}

/* resources/subscribe or unsubscribe (add) of the session: answered by the gateway. */
static struct stream *
pool_session_subscribe(struct pool_session *s, const struct config_server *srv, const char *body,
                       const struct jsonrpc_info *info, bool add, struct auth_claims *claims)
{
    char uri[PSS_URI_MAX + 1];
    if (pool_session_modern_on(s, srv) && !pool_session_listen_serves(s, srv))
        return pool_session_error(info, body, JSONRPC_METHOD_NOT_FOUND,
                                  "resources/subscribe is not available: the server's children "
                                  "do not declare resources.subscribe");
    if (config_server_per_principal(srv) && s->sub_pool == NULL) {
        /* Placed at the pool of the principal's children as this request's token makes them. */
        if (claims != NULL && claims->why != NULL)
            return pool_session_error(info, body, JSONRPC_INVALID_REQUEST, claims->why);
        auth_claims_unref(s->claims);
        s->claims = claims != NULL ? auth_claims_ref(claims) : NULL;
    }
    if (info->uri.len == 0 || !jsonrpc_string_at(body, info->uri, uri, sizeof uri, NULL))
        return pool_session_error(info, body, JSONRPC_INVALID_PARAMS,
                                  "params.uri must be a string of at most 2048 bytes");
    size_t i = 0;
    while (i < s->nuris && strcmp(s->uris[i], uri) != 0)
        i++;
    if (add && i == s->nuris) {
        uint64_t max = srv->max_listen_uris_per_principal;
        if (s->nuris >= PSS_URIS_MAX
            || (max > 0 && quota_of(srv->name, s->principal, QUOTA_URIS) >= max))
            return pool_session_error(info, body, JSONRPC_INVALID_PARAMS,
                                      "too many subscriptions (at most 256 a session, and "
                                      "max_listen_uris_per_principal)");
        if (s->uris == NULL)
            s->uris = xcalloc(PSS_URIS_MAX, sizeof(*s->uris));
        s->uris[s->nuris++] = xstrdup(uri);
        if (s->uris_quota == NULL)
            s->uris_quota = quota_take(srv->name, s->principal, QUOTA_URIS, 1);
        else
            quota_add(s->uris_quota, QUOTA_URIS, 1);
        if (s->sub_pool != NULL)
            pool_sub_ref(s->sub_pool, uri);
        else
            pool_session_subs_place(s);
    } else if (!add && i < s->nuris) {
        if (s->sub_pool != NULL)
            pool_sub_unref(s->sub_pool, uri);
        free(s->uris[i]);
        s->uris[i] = s->uris[--s->nuris];
        quota_give(s->uris_quota, QUOTA_URIS, 1);
        if (s->nuris == 0)
            s->uris_quota = NULL; /* its last count given back */
    }
    return pool_session_result(info, body, "{}");
}

bool
pool_session_updated(struct pool *p, const char *line, size_t len, const struct jsonrpc_info *info)
{
    char uri[PSS_URI_MAX + 1];
    if (info->uri.len == 0 || !jsonrpc_string_at(line, info->uri, uri, sizeof uri, NULL))
        return false;
    bool sent = false;
    struct iovec iov = { (void *)(uintptr_t)line, len };
    for (struct pool_session *s = pss.all; s != NULL; s = s->next) {
        if (s->sub_pool != p || s->get == NULL
            || (p->key != NULL && strcmp(s->principal, p->key->principal) != 0))
            continue;
        for (size_t i = 0; i < s->nuris; i++)
            if (strcmp(s->uris[i], uri) == 0) {
                sent = true;
                if (stream_pending(s->get) > pools.cfg->stream_queue_bytes)
                    p->row->ctr.slow_dropped++;
                else
                    stream_push_shared(s->get, &iov, 1, pools.line);
                break;
            }
    }
    return sent;
}

/* The session leaves the table and is freed (no call of it is left). */
static void
pool_session_free(struct pool_session *s)
{
    if (s->linked) {
        pool_names_del(&pss.t, s, PSS_LINK);
        UTIL_DLIST_UNLINK(pss.all, s, prev, next);
        pss.n--;
        pool_server_of(s->server)->sessions_open--;
    }
    if (s->quota != NULL)
        quota_give(s->quota, QUOTA_SESSIONS, 1);
    pool_session_modern_drop(s);
    if (s->level_asked) {
        pool_server_of(s->server)->levels_asked[s->log_level]--;
        s->level_asked = false;
        pool_session_levels_changed(s->server); /* the next most verbose one asked, if any */
    }
    pool_session_subs_drop(s);
    pool_session_streams_free(s);
    auth_claims_unref(s->claims);
    for (size_t i = 0; i < s->nuris; i++)
        free(s->uris[i]);
    if (s->nuris > 0)
        quota_give(s->uris_quota, QUOTA_URIS, s->nuris);
    free(s->uris);
    free(s->id);
    free(s->server);
    free(s->principal);
    free(s);
}

/*
 * A call of the session ends now, with why: one still queued leaves the queue and gets its
 * error with the id its queued body names (nothing was sent to a child).
 */
static void
pool_session_cancel_call(struct pool_call *call, enum relay_reason why)
{
    if (call->c == NULL) {
        pool_call_unqueue(call);
        relay_count(call->pool->stats, why);
        audit_call_cancel(call->audit, relay_reasons[why].label);
        pool_call_fail(call, JSONRPC_INTERNAL_ERROR, relay_reasons[why].text);
        return;
    }
    pool_call_cancel(call, why);
}

/* The one close path: every call cancelled for why, the GET stream ended, the record freed. */
void
pool_session_close(struct pool_session *s, enum relay_reason why)
{
    while (s->calls != NULL)
        pool_session_cancel_call(s->calls, why);
    pool_task_session_end(s, why); /* what still runs at a child is cancelled there */
    if (s->sse && s->get != NULL) {
        /* A 2024-11-05 session's one stream: the connection's, kept in no list. */
        stream_end(s->get);
        stream_unref(s->get);
        s->get = NULL;
    }
    pool_session_streams_free(s); /* its GET stream and those kept for a resume end */
    log_info(s->label, "pooled session ended: %s", relay_reasons[why].text);
    /*
     * The audit trail's end of the session: its DELETE here, an initialize that failed, a
     * 2024-11-05 session's connection. Not a sealed session's local record forgotten (idle, this
     * instance's shutdown): its id still opens, here or elsewhere, until session_max_age_s.
     */
    if (s->sse || s->failed || why == RELAY_CANCEL_DELETED)
        audit_event("session_end", s->principal, s->server, s->label, 0, relay_reasons[why].label,
                    NULL, NULL);
    pool_session_free(s);
}

void
pool_session_unlink(struct pool_call *call)
{
    struct pool_session *s = call->sess;
    if (s == NULL)
        return;
    pool_task_call_end(call);
    UTIL_DLIST_UNLINK(s->calls, call, sprev, snext);
    s->ncalls--;
    /* An initialize that ended unanswered (refused, timed out): the session is no session. */
    if (call->init && s->rev == NULL) {
        s->failed = true; /* closed by the next sweep; its GET stream has nothing to wait for */
        if (s->get != NULL)
            stream_end(s->get);
    }
    call->sess = NULL;
    call->sprev = call->snext = NULL;
}

void
pool_session_link(struct pool_call *call, struct pool_session *s)
{
    call->sess = s;
    call->sprev = NULL;
    call->snext = s->calls;
    if (s->calls != NULL)
        s->calls->sprev = call;
    s->calls = call;
    s->ncalls++;
}

void
pool_session_init_answer(struct pool_call *call, const char *id, size_t idlen)
{
    struct pool *p = call->pool;
    struct pool_session *s = call->sess;
    if (p->init_members == NULL) {
        pool_call_error(call, id, idlen, JSONRPC_INTERNAL_ERROR,
                        "the server's handshake is not known");
        return;
    }
    pool_session_modern_drop(s); /* a legacy child: nothing to tell a stateless one */
    s->rev = pool_session_negotiate(s->asked, p->init_version,
                                    s->sse ? REVISION_SESSIONS : REVISION_STREAMABLE);
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    static const char mid[] = ",\"result\":{\"protocolVersion\":\"";
    struct iovec iov[7] = {
        { (void *)(uintptr_t)head, sizeof head - 1 },
        { (void *)(uintptr_t)id, idlen },
        { (void *)(uintptr_t)mid, sizeof mid - 1 },
        { (void *)(uintptr_t)s->rev->name, strlen(s->rev->name) },
        { (void *)(uintptr_t)(p->init_members_len > 0 ? "\"," : "\""),
          p->init_members_len > 0 ? 2 : 1 },
        { p->init_members, p->init_members_len },
        { (void *)(uintptr_t) "}}", 2 },
    };
    p->row->ctr.answered++;
    pool_push(call, iov, 7);
    log_debug(s->label, "pooled session initialized: %s (offered %s)", s->rev->name,
              s->asked[0] != '\0' ? s->asked : "none");
    pool_call_end(call);
}

struct stream *
pool_session_initialize(const struct config_server *srv, char *body, size_t len,
                        const struct jsonrpc_info *info, struct pool_meta *meta,
                        struct pool_session **out, enum pool_status *status)
{
    if (pools.draining) {
        *status = POOL_E_DRAINING;
        return NULL;
    }
    const char *principal = meta->principal != NULL ? meta->principal : "";
    if (!quota_fits(QUOTA_GATEWAY, principal, QUOTA_SESSIONS,
                    pools.cfg->auth.max_sessions_per_principal)) {
        meta->why = "too many sessions for this principal (max_sessions_per_principal)";
        *status = POOL_E_PRINCIPAL;
        return NULL;
    }
    char asked[sizeof(((struct pool_session *)0)->asked)];
    if (info->params.len == 0
        || !jsonrpc_member_string(body + info->params.off, info->params.len, "protocolVersion",
                                  asked, sizeof asked))
        asked[0] = '\0';
    struct jsonrpc_span caps = { 0, 0 };
    unsigned flags = 0;
    if (info->params.len > 0 && jsonrpc_member_at(body, info->params, "capabilities", &caps) == 0
        && caps.len > 0 && body[caps.off] == '{')
        flags = pool_caps_declared(body, caps);
    else
        caps.len = 0;
    /*
     * What the id holds is fixed now, before a child may have answered: the revision offered is
     * the client's bounded by the gateway's, and by the children's when a child of the server has
     * told it; the answer's negotiation (pool_session_init_answer) can only keep it or lower it
     * to the children's, which the sealed one then is for every child of that command.
     */
    const struct pool *sp = pool_shared_of(srv->name);
    const struct revision *offer = pool_session_negotiate(
        asked, sp != NULL && sp->init_version[0] != '\0' ? sp->init_version : "",
        REVISION_STREAMABLE);
    int64_t now_s = (int64_t)(util_now_unix_ms() / 1000u);
    struct session_seal_record rec;
    char id[SESSION_SEAL_ID_MAX + 1];
    if (pss.kr == NULL
        || session_seal_record_init(&rec, principal, srv->name, offer->name, body + caps.off,
                                    caps.len, flags, now_s)
               == -1
        || session_seal(pss.kr, &rec, id) == -1) {
        meta->why = "cannot seal a session id";
        *status = POOL_E_UNAVAILABLE;
        return NULL;
    }
    struct pool_session *s = pool_session_new(id, srv->name, principal, now_s);
    memcpy(s->asked, offer->name, strlen(offer->name) + 1);
    s->caps = flags;
    pool_session_modern_keep(s, body, info); /* for children that turn out stateless */
    meta->session = s;
    meta->rev = revision_newest(REVISION_STREAMABLE); /* until the answer negotiates it */
    struct stream *st = pool_request(srv, body, len, info, meta, status);
    if (st == NULL) {
        pool_session_free(s);
        return NULL;
    }
    const struct log_field f[] = { { "server", srv->name, false },
                                   { "principal", principal, false } };
    log_fields(LOG_INFO, s->label, f, ARRAY_LEN(f), "pooled session created: server=%s owner=%s",
               srv->name, principal);
    audit_event("session_start", principal, srv->name, s->label, 0, NULL, NULL, NULL);
    *out = s;
    return st;
}

struct stream *
pool_session_request(struct pool_session *s, const struct config_server *srv, char *body,
                     size_t len, const struct jsonrpc_info *info, struct pool_meta *meta,
                     enum pool_status *status)
{
    s->last_ms = util_now_ms();
    if (s->rev == NULL) {
        *status = POOL_E_GONE; /* initialize not answered yet: nothing to serve it as */
        meta->why = "the session's initialize has not been answered";
        return NULL;
    }
    const char *m = info->method;
    if (strcmp(m, "ping") == 0)
        return pool_session_result(info, body, "{}");
    if (strcmp(m, "logging/setLevel") == 0) {
        int level = info->level.len > 0 ? pool_log_level(body, info->level) : -1;
        if (level < 0)
            return pool_session_error(info, body, JSONRPC_INVALID_PARAMS,
                                      "params.level must be a log level (debug .. emergency)");
        pool_session_set_level(s, level);
        return pool_session_result(info, body, "{}");
    }
    if (strcmp(m, "resources/subscribe") == 0 || strcmp(m, "resources/unsubscribe") == 0)
        return pool_session_subscribe(s, srv, body, info, m[10] == 's', meta->claims);
    if (strcmp(m, "server/discover") == 0 || strcmp(m, "subscriptions/listen") == 0)
        return pool_session_error(info, body, JSONRPC_METHOD_NOT_FOUND, "Method not found");
    if (s->ncalls >= pools.cfg->max_inflight_per_session) {
        *status = POOL_E_TOO_MANY;
        return NULL;
    }
    for (const struct pool_call *c = s->calls; c != NULL; c = c->snext)
        if (c->p != NULL && c->p->orig_id_len == info->id.len
            && memcmp(c->p->orig_id, body + info->id.off, info->id.len) == 0) {
            *status = POOL_E_DUPLICATE;
            return NULL;
        }
    meta->session = s;
    meta->rev = s->rev;
    struct stream *st = strncmp(m, "tasks/", 6) == 0 || info->has_task /* the session's tasks */
                            ? pool_task_request(s, srv, body, len, info, meta, status)
                            : pool_request(srv, body, len, info, meta, status);
    /* Resumable, and given disconnect_grace_ms; a batch's one stream is not (its owner is the
     * batch, whose drop cancels every call of it). */
    if (st != NULL && pools.batch == NULL)
        pool_session_stream_track(s, st);
    return st;
}

/* Whether the call's client id (raw) is id: its entry's, or while queued its body's. */
static bool
pool_session_call_is(const struct pool_call *call, const char *id, size_t idlen)
{
    if (call->p != NULL)
        return call->p->orig_id_len == idlen && memcmp(call->p->orig_id, id, idlen) == 0;
    if (call->c == NULL && call->body == NULL)
        return pool_session_modern_call_is(call, id, idlen); /* between its input rounds */
    return call->c == NULL && call->body != NULL && call->qid_len == idlen
           && memcmp(call->body + call->qid_off, id, idlen) == 0;
}

/*
 * The client's notifications/cancelled: forwarded to the call's child with the id it saw; a call
 * still queued leaves the queue, and no child ever gets it. Either way its stream ends without a
 * response.
 */
static void
pool_session_client_cancel(struct pool_session *s, char *body, size_t len,
                           const struct jsonrpc_info *info)
{
    struct pool_call *call = s->calls;
    for (; call != NULL; call = call->snext)
        if (pool_session_call_is(call, body + info->request_id.off, info->request_id.len))
            break;
    if (call != NULL && !call->init && call->p == NULL) {
        log_info(s->label, "client cancel of a request still queued: it leaves the queue");
        pool_call_drop_queued(call, RELAY_CANCEL_CLIENT);
        return;
    }
    if (call == NULL || call->init || call->p->state != PENDING_FORWARDED) {
        log_debug(s->label, "cancel for an unknown or finished request ignored");
        return;
    }
    struct pending *p = call->p;
    struct pool_child *c = call->c;
    char idbuf[24];
    size_t idlen = relay_id_text(p, idbuf);
    struct relay_edit ed = { info->request_id.off, info->request_id.len, idbuf, idlen };
    if (relay_send_spliced(&c->r, body, len, &ed, 1) == -1)
        log_warn(s->label, "client cancel for %s not delivered: child stdin full", p->method);
    else
        log_info(s->label, "client cancel forwarded: method=%s child=%s child_id=%s", p->method,
                 c->tag, idbuf);
    /* The call's record (not its entry's: a pool call holds it) says who cancelled it. */
    audit_call_cancel(call->audit, relay_reasons[RELAY_CANCEL_CLIENT].label);
    relay_mark_cancelled(&c->r, p);
    relay_count(call->pool->stats, RELAY_CANCEL_CLIENT);
    /* A question it wrote before reading the cancel may still come (the fence). */
    pool_bridge_cancelled(c);
    /* The request's stream ends without a response. */
    pool_call_end(call);
}

enum pool_status
pool_session_other(struct pool_session *s, char *body, size_t len, const struct jsonrpc_info *info)
{
    s->last_ms = util_now_ms();
    if (info->has_crlf)
        jsonrpc_flatten(body, len);
    if (info->kind == JSONRPC_NOTIFICATION && strcmp(info->method, "notifications/cancelled") == 0
        && info->request_id.len > 0)
        pool_session_client_cancel(s, body, len, info);
    else if (info->kind == JSONRPC_RESULT || info->kind == JSONRPC_ERROR)
        pool_session_client_answer(s, body, len, info);
    /*
     * Anything else is the session's alone and no child's: notifications/initialized (the
     * gateway answered initialize), roots/list_changed (a shared child has no roots of one
     * client), a response (the gateway asks a pooled session's client nothing).
     */
    return POOL_OK;
}

bool
pool_session_batches(const struct pool_session *s)
{
    return s->rev != NULL && s->rev->batches;
}

struct stream *
pool_session_get(struct pool_session *s, enum pool_status *status)
{
    s->last_ms = util_now_ms();
    return pool_session_stream_get(s, status);
}

void
pool_session_detach(const char *sid, struct stream *st)
{
    if (pool_batch_detach(st))
        return; /* a batch's stream: every call of it cancelled */
    struct pool_session *s = pool_names_find(&pss.t, sid, PSS_LINK);
    if (s != NULL && s->get == st && s->sse) {
        /* The 2024-11-05 transport: the connection is the session. */
        pool_session_sse_dropped(s, st);
        return;
    }
    if (s != NULL && pool_session_stream_detach(s, st))
        return; /* its GET stream, or a call's kept for a resume (pool_session_stream.c) */
    if (stream_own(st)->owner == NULL) {
        stream_own(st)->attached = false; /* a local answer, or a call already over */
        stream_unref(st);
        return;
    }
    pool_stream_detach(st);
}

void
pool_session_delete(struct pool_session *s)
{
    pool_session_bury(s); /* this instance answers 404 to it from now on; another cannot know */
    pool_session_close(s, RELAY_CANCEL_DELETED);
}

bool
pool_session_fanout(struct pool *p, const char *line, size_t len)
{
    bool sent = false;
    struct iovec iov = { (void *)(uintptr_t)line, len };
    for (struct pool_session *s = pss.all; s != NULL; s = s->next) {
        if (s->get == NULL || strcmp(s->server, p->name) != 0
            || (p->key != NULL && strcmp(s->principal, p->key->principal) != 0))
            continue;
        sent = true;
        if (stream_pending(s->get) > pools.cfg->stream_queue_bytes) {
            p->row->ctr.slow_dropped++;
            continue;
        }
        stream_push_shared(s->get, &iov, 1, pools.line);
    }
    return sent;
}

void
pool_session_sweep(uint64_t now_ms)
{
    uint64_t idle = pools.cfg->session_idle_timeout_s * 1000u;
    struct pool_session *s = pss.all;
    while (s != NULL) {
        struct pool_session *next = s->next;
        if (s->failed && s->calls == NULL) {
            pool_session_close(s, RELAY_CANCEL_OTHER);
        } else if (s->calls == NULL && !pool_session_streams_read(s) && !(s->sse && s->get != NULL)
                   && now_ms - s->last_ms >= idle) {
            pool_session_close(s, RELAY_CANCEL_EXPIRED);
        } else {
            pool_session_streams_sweep(s, now_ms); /* heartbeats; streams kept too long go */
            pool_session_subs_place(s); /* its pool retired: its subscriptions go to the next */
        }
        s = next;
    }
}

void
pool_session_free_all(void)
{
    while (pss.all != NULL)
        pool_session_close(pss.all, RELAY_CANCEL_SHUTDOWN);
    free(pss.t.b);
    pss.t = (struct pool_names){ 0 };
}

void
pool_session_module_free(void)
{
    pool_session_free_all();
    keyring_free(pss.kr); /* only now: a request shutdown still reads must not find no key */
    pss.kr = NULL;
}

int
pool_session_admin_json(struct buf *b, size_t max)
{
    struct buf_out o = { .full = false };
    buf_init(&o.b, max);
    uint64_t now = util_now_ms();
    size_t omitted = 0;
    bool first = true;
    buf_out_printf(&o, "[");
    for (const struct pool_session *s = pss.all; s != NULL; s = s->next) {
        /* Each record whole or not at all (room is kept for the closing bracket). */
        struct buf_out one;
        buf_out_item_open(&o, &one, max, 16);
        char at[UTIL_RFC3339_MAX];
        util_rfc3339(s->created_unix_ms, at);
        buf_out_printf(&one,
                       "%s{\"label\":\"%s\",\"server\":\"%s\",\"mode\":\"pooled\","
                       "\"state\":\"%s\",\"protocol_version\":\"%s\",\"idle_ms\":%" PRIu64
                       ",\"calls\":%zu,\"get_stream\":%s,\"created_at\":\"%s\",\"owner\":",
                       first ? "" : ",", s->label, s->server,
                       s->rev != NULL ? "ready" : "initializing",
                       s->rev != NULL ? s->rev->name : "", now - s->last_ms, s->ncalls,
                       s->get != NULL && stream_own_const(s->get)->attached ? "true" : "false", at);
        jsonrpc_put_quoted(&one, s->principal);
        buf_out_printf(&one, "}");
        if (buf_out_item_close(&o, &one))
            first = false;
        else
            omitted++;
    }
    buf_out_printf(&o, "]");
    int rc = o.full ? -1 : (int)(omitted > 0);
    if (!o.full && buf_append(b, buf_head(&o.b), buf_used(&o.b)) == -1)
        rc = -1;
    buf_clear(&o.b);
    return rc;
}
