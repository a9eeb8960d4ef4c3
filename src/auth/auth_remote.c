/* SPDX-License-Identifier: MIT */
/*
 * What comes from the authorization server (SECURITY.md, "Keys from the authorization server").
 *
 * Discovery: when keys or the introspection endpoint are not configured, the issuer's RFC 8414
 * metadata (/.well-known/oauth-authorization-server, path-inserted), else its OpenID Connect
 * discovery document (ISSUER/.well-known/openid-configuration), whose "issuer" must equal the
 * configured one. Done once per configuration; a failure is retried at the next need, at most once
 * per jwks_refetch_interval_ms.
 *
 * The JWK Set: fetched from jwks_uri, kept for its Cache-Control max-age (or Expires) bounded by
 * jwks_cache_min_s and jwks_cache_max_s. Past that, requests go on with the old set while one
 * refetch runs. A token whose kid the set lacks refetches at once, at most once per
 * jwks_refetch_interval_ms. A failed fetch keeps the last good set, and is logged and counted.
 *
 * Introspection (RFC 7662): one POST per distinct token in flight (requests with the same token
 * wait for the same answer), with client_secret_basic. Answers, active or not, are remembered by
 * the token's SHA-256 in a direct-mapped table until the token's exp, at most
 * introspection_cache_max_s. A failure is remembered for AUTH_INTRO_RETRY_MS so a down server is
 * not asked again by every request.
 *
 * Nothing here blocks: fetch.c runs the transfers on the loop. A request that needs an answer
 * still on its way gets AUTH_PENDING and waits (auth_remote_wait); every finished fetch wakes all
 * waiters, which check again: a wake is cheap, and waiters are bounded by the connections.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_int.h"
#include "fetch.h"
#include "log.h"
#include "util.h"

#define AUTH_INTRO_CACHE    1024        /* remembered introspection answers, by token hash */
#define AUTH_INTRO_RETRY_MS 1000        /* a failed introspection answers 503 this long */
#define AUTH_DOC_MAX        (64 * 1024) /* a discovery document or an introspection answer */
#define AUTH_URL_MAX        2048
#define AUTH_SECRET_MAX     1024

enum auth_disc { AUTH_DISC_NONE, AUTH_DISC_RUNNING, AUTH_DISC_DONE, AUTH_DISC_FAILED };

struct auth_wait {
    struct auth_remote *r;
    auth_wake_cb *cb;
    void *arg;
    struct auth_wait *prev, *next;
};

/* An introspection answer (or failure) remembered for a token, or one in flight. */
struct auth_intro {
    unsigned char hash[CRYPTO_SHA256_LEN];
    struct jsonrpc_doc *answer; /* NULL: the introspection failed */
    uint64_t until_ms;          /* 0: the slot is free */
    struct fetch *f;            /* in flight (on r->pending) */
    struct auth_remote *r;
    char client[48]; /* who asked first ("" unknown): a client's share of the pending ones */
    struct auth_intro *prev, *next;
};

struct auth_remote {
    const struct config_auth *ca;
    bool want_keys, want_intro, want_token;
    char *client_id, *client_secret;
    char *jwks_uri, *intro_uri, *token_uri; /* configured or discovered */
    enum auth_disc disc;
    int disc_step; /* 0: RFC 8414, 1: OpenID Connect */
    uint64_t disc_failed_ms;
    struct fetch *disc_fetch;
    struct auth_keyset keys;
    bool have_keys;
    uint64_t keys_until_ms; /* refetch when used after this */
    uint64_t keys_tried_ms; /* the last fetch started (unknown kid, failure backoff) */
    bool keys_failed;       /* the last fetch failed */
    struct fetch *keys_fetch;
    struct auth_intro cache[AUTH_INTRO_CACHE];
    struct auth_intro *pending;
    size_t npending;
    struct auth_wait *waiters;
};

/* Across configurations: /metrics. */
static struct auth_counters C;

void
auth_counters_get(struct auth_counters *out)
{
    *out = C;
}

/* --- waiting ------------------------------------------------------------------------------- */

struct auth_wait *
auth_remote_wait(struct auth_remote *r, auth_wake_cb *cb, void *arg)
{
    struct auth_wait *w = xcalloc(1, sizeof(*w));
    w->r = r;
    w->cb = cb;
    w->arg = arg;
    w->next = r->waiters;
    if (r->waiters != NULL)
        r->waiters->prev = w;
    r->waiters = w;
    C.waits++;
    return w;
}

void
auth_wait_cancel(struct auth_wait *w)
{
    if (w == NULL)
        return;
    UTIL_DLIST_UNLINK(w->r->waiters, w, prev, next);
    free(w);
}

/* Every waiter checks again (its callback runs now; the wait is gone when it does). */
static void
auth_wake_all(struct auth_remote *r)
{
    struct auth_wait *list = r->waiters;
    r->waiters = NULL;
    while (list != NULL) {
        struct auth_wait *w = list;
        list = w->next;
        auth_wake_cb *cb = w->cb;
        void *arg = w->arg;
        free(w);
        cb(arg);
    }
}

/* --- fetching ------------------------------------------------------------------------------ */

/* A GET of url (a POST of form, with the client's credentials), its answer at most max bytes. */
static struct fetch *
auth_fetch(struct auth_remote *r, const char *url, const char *form, size_t max, fetch_done_cb *cb,
           void *arg)
{
    struct fetch_request q = {
        .url = url,
        .form = form,
        .user = form != NULL ? r->client_id : NULL,
        .password = form != NULL ? r->client_secret : NULL,
        .ca_file = r->ca->tls_ca_file,
        .timeout_ms = r->ca->fetch_timeout_ms,
        .max_body_bytes = max,
    };
    return fetch_start(&q, cb, arg);
}

/* Why a finished fetch is no use, or NULL. */
static const char *
auth_fetch_failure(const struct fetch_result *res, char *buf, size_t size)
{
    if (res->error != NULL)
        return res->error;
    if (res->status < 200 || res->status > 299) {
        snprintf(buf, size, "HTTP status %ld", res->status);
        return buf;
    }
    return NULL;
}

static void auth_keys_fetch(struct auth_remote *r, uint64_t now_ms);

/* --- discovery ----------------------------------------------------------------------------- */

/* RFC 8414 section 3: the well-known part goes between the issuer's host and its path. */
static int
auth_disc_url(const struct auth_remote *r, char *out, size_t size)
{
    const char *iss = r->ca->issuer;
    size_t ilen = strlen(iss);
    while (ilen > 0 && iss[ilen - 1] == '/')
        ilen--;
    int n;
    if (r->disc_step == 0) {
        const char *path = strchr(iss + 8, '/'); /* config: https:// then a host */
        size_t hlen = path != NULL && (size_t)(path - iss) < ilen ? (size_t)(path - iss) : ilen;
        n = snprintf(out, size, "%.*s/.well-known/oauth-authorization-server%.*s", (int)hlen, iss,
                     (int)(ilen - hlen), iss + hlen);
    } else {
        n = snprintf(out, size, "%.*s/.well-known/openid-configuration", (int)ilen, iss);
    }
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* An https URL member of the metadata, copied, or NULL. */
static char *
auth_disc_member(const struct jsonrpc_doc *d, const char *key)
{
    const char *v = jsonrpc_doc_str(d, key);
    if (v == NULL || !util_has_prefix_i(v, "https://") || strlen(v) >= AUTH_URL_MAX)
        return NULL;
    for (const char *p = v; *p != '\0'; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return NULL;
    return xstrdup(v);
}

/* The metadata's issuer, jwks_uri and introspection_endpoint; NULL, or why it is unusable. */
static const char *
auth_disc_apply(struct auth_remote *r, const char *body, size_t len)
{
    struct jsonrpc_doc *d = jsonrpc_doc_parse(body, len);
    const char *iss = d != NULL ? jsonrpc_doc_str(d, "issuer") : NULL;
    const char *why = NULL;
    if (d == NULL)
        why = "not a JSON object";
    else if (iss == NULL || strcmp(iss, r->ca->issuer) != 0)
        why = "its issuer is not the configured issuer";
    if (why == NULL && r->want_keys && r->jwks_uri == NULL
        && (r->jwks_uri = auth_disc_member(d, "jwks_uri")) == NULL)
        why = "no https jwks_uri";
    if (why == NULL && r->want_intro && r->intro_uri == NULL
        && (r->intro_uri = auth_disc_member(d, "introspection_endpoint")) == NULL)
        why = "no https introspection_endpoint";
    if (why == NULL && r->want_token && r->token_uri == NULL
        && (r->token_uri = auth_disc_member(d, "token_endpoint")) == NULL)
        why = "no https token_endpoint";
    jsonrpc_doc_free(d);
    return why;
}

static void auth_discover(struct auth_remote *r);

static void
auth_disc_done(void *arg, const struct fetch_result *res)
{
    struct auth_remote *r = arg;
    r->disc_fetch = NULL;
    char buf[64], url[AUTH_URL_MAX];
    const char *why = auth_fetch_failure(res, buf, sizeof(buf));
    if (why == NULL)
        why = auth_disc_apply(r, res->body, res->len);
    if (auth_disc_url(r, url, sizeof(url)) == -1)
        url[0] = '\0';
    if (why != NULL && r->disc_step == 0) {
        log_debug(NULL, "auth: discovery at %s: %s; trying OpenID Connect discovery", url, why);
        r->disc_step = 1;
        auth_discover(r);
        return;
    }
    if (why != NULL) {
        C.jwks_failures++;
        r->disc = AUTH_DISC_FAILED;
        r->disc_failed_ms = util_now_ms();
        r->disc_step = 0;
        log_warn(NULL,
                 "auth: discovery at %s failed: %s (counted in "
                 "mcpgw_auth_fetch_failures_total)",
                 url, why);
        auth_wake_all(r);
        return;
    }
    r->disc = AUTH_DISC_DONE;
    log_info(NULL, "auth: discovered %s%s%s%s%s%s from %s", r->jwks_uri ? "jwks_uri " : "",
             r->jwks_uri ? r->jwks_uri : "", r->intro_uri ? " introspection_endpoint " : "",
             r->intro_uri ? r->intro_uri : "", r->token_uri ? " token_endpoint " : "",
             r->token_uri ? r->token_uri : "", url);
    if (r->want_keys && !r->have_keys)
        auth_keys_fetch(r, util_now_ms());
    auth_wake_all(r);
}

static void
auth_discover(struct auth_remote *r)
{
    char url[AUTH_URL_MAX];
    if (auth_disc_url(r, url, sizeof(url)) == -1)
        return;
    C.jwks_fetches++;
    r->disc = AUTH_DISC_RUNNING;
    r->disc_fetch = auth_fetch(r, url, NULL, AUTH_DOC_MAX, auth_disc_done, r);
    if (r->disc_fetch == NULL) {
        r->disc = AUTH_DISC_FAILED;
        r->disc_failed_ms = util_now_ms();
    }
}

/*
 * The URLs are known (AUTH_OK), being discovered (AUTH_PENDING, started here if need be), or
 * discovery failed lately (AUTH_UNAVAILABLE).
 */
static enum auth_status
auth_discovered(struct auth_remote *r, uint64_t now_ms)
{
    if ((!r->want_keys || r->jwks_uri != NULL) && (!r->want_intro || r->intro_uri != NULL)
        && (!r->want_token || r->token_uri != NULL))
        return AUTH_OK;
    if (r->disc == AUTH_DISC_RUNNING)
        return AUTH_PENDING;
    if (r->disc == AUTH_DISC_FAILED && now_ms - r->disc_failed_ms < r->ca->jwks_refetch_interval_ms)
        return AUTH_UNAVAILABLE;
    auth_discover(r);
    return r->disc == AUTH_DISC_RUNNING ? AUTH_PENDING : AUTH_UNAVAILABLE;
}

/* --- the JWK Set --------------------------------------------------------------------------- */

static void
auth_keys_done(void *arg, const struct fetch_result *res)
{
    struct auth_remote *r = arg;
    r->keys_fetch = NULL;
    char buf[64], err[256];
    const char *why = auth_fetch_failure(res, buf, sizeof(buf));
    struct auth_keyset next = { .n = 0 };
    size_t skipped = 0;
    if (why == NULL
        && auth_keyset_parse(&next, res->body, res->len, &skipped, err, sizeof(err)) == -1)
        why = err;
    uint64_t now = util_now_ms();
    /*
     * The refetch interval counts from the end of a fetch, not its start: a set that takes longer
     * than jwks_refetch_interval_ms to come would otherwise be fetched again at once for the
     * request that waited for it, and that request would wait for fetch after fetch.
     */
    r->keys_tried_ms = now;
    if (why != NULL) {
        C.jwks_failures++;
        r->keys_failed = true;
        log_warn(NULL, "auth: JWK Set %s: %s; %s (counted in mcpgw_auth_fetch_failures_total)",
                 r->jwks_uri, why, r->have_keys ? "the last good set stays in use" : "no keys yet");
        auth_wake_all(r);
        return;
    }
    const struct config_auth *ca = r->ca;
    uint64_t keep_s = res->max_age_s < 0 ? ca->jwks_cache_max_s : (uint64_t)res->max_age_s;
    keep_s = keep_s < ca->jwks_cache_min_s   ? ca->jwks_cache_min_s
             : keep_s > ca->jwks_cache_max_s ? ca->jwks_cache_max_s
                                             : keep_s;
    auth_keyset_clear(&r->keys);
    r->keys = next;
    r->have_keys = true;
    r->keys_failed = false;
    r->keys_until_ms = now + keep_s * 1000u;
    C.jwks_keys = r->keys.n;
    log_info(NULL, "auth: JWK Set %s: %zu keys%s, kept %" PRIu64 " s", r->jwks_uri, r->keys.n,
             skipped > 0 ? " (others of other types skipped)" : "", keep_s);
    auth_wake_all(r);
}

static void
auth_keys_fetch(struct auth_remote *r, uint64_t now_ms)
{
    if (r->keys_fetch != NULL || r->jwks_uri == NULL)
        return;
    r->keys_tried_ms = now_ms;
    C.jwks_fetches++;
    r->keys_fetch = auth_fetch(r, r->jwks_uri, NULL, AUTH_FILE_MAX, auth_keys_done, r);
    if (r->keys_fetch == NULL)
        r->keys_failed = true;
}

enum auth_status
auth_remote_keys(struct auth_remote *r, uint64_t now_ms, const struct auth_keyset **ks)
{
    *ks = &r->keys;
    if (r->have_keys) {
        if (now_ms >= r->keys_until_ms && r->keys_fetch == NULL
            && (!r->keys_failed || now_ms - r->keys_tried_ms >= r->ca->jwks_refetch_interval_ms))
            auth_keys_fetch(r, now_ms); /* stale: used while the refetch runs */
        return AUTH_OK;
    }
    enum auth_status st = auth_discovered(r, now_ms);
    if (st != AUTH_OK)
        return st;
    if (r->keys_fetch == NULL
        && (!r->keys_failed || now_ms - r->keys_tried_ms >= r->ca->jwks_refetch_interval_ms))
        auth_keys_fetch(r, now_ms);
    return r->keys_fetch != NULL ? AUTH_PENDING : AUTH_UNAVAILABLE;
}

enum auth_status
auth_remote_unknown_kid(struct auth_remote *r, uint64_t now_ms)
{
    if (r->keys_fetch != NULL)
        return AUTH_PENDING;
    if (now_ms - r->keys_tried_ms < r->ca->jwks_refetch_interval_ms)
        return AUTH_OK;
    log_info(NULL, "auth: a token names a key the JWK Set lacks: fetching %s again", r->jwks_uri);
    auth_keys_fetch(r, now_ms);
    return r->keys_fetch != NULL ? AUTH_PENDING : AUTH_OK;
}

/* --- introspection ------------------------------------------------------------------------- */

/* application/x-www-form-urlencoded value: unreserved characters kept, the rest %XX. */
size_t
auth_form_escape(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
            || c == '.' || c == '_' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

static struct auth_intro *
auth_intro_slot(struct auth_remote *r, const unsigned char *hash)
{
    return &r->cache[((size_t)hash[0] | (size_t)hash[1] << 8) % AUTH_INTRO_CACHE];
}

static void
auth_intro_unlink(struct auth_intro *p)
{
    struct auth_remote *r = p->r;
    UTIL_DLIST_UNLINK(r->pending, p, prev, next);
    r->npending--;
}

/*
 * An introspection answer, checked for shape only (what it grants is auth.c's business): a JSON
 * object whose "active" is a boolean. NULL with *why otherwise.
 */
struct jsonrpc_doc *
auth_intro_parse(const char *body, size_t len, const char **why)
{
    struct jsonrpc_doc *d = jsonrpc_doc_parse(body, len);
    *why = NULL;
    if (d == NULL)
        *why = "the answer is not a JSON object";
    else if (!jsonrpc_doc_has(d, "active"))
        *why = "the answer has no \"active\"";
    if (*why != NULL) {
        jsonrpc_doc_free(d);
        return NULL;
    }
    return d;
}

static void
auth_intro_done(void *arg, const struct fetch_result *res)
{
    struct auth_intro *p = arg;
    struct auth_remote *r = p->r;
    auth_intro_unlink(p);
    char buf[64];
    const char *why = auth_fetch_failure(res, buf, sizeof(buf));
    struct jsonrpc_doc *d = why == NULL ? auth_intro_parse(res->body, res->len, &why) : NULL;
    uint64_t now = util_now_ms();
    struct auth_intro *slot = auth_intro_slot(r, p->hash);
    jsonrpc_doc_free(slot->answer);
    memcpy(slot->hash, p->hash, sizeof(slot->hash));
    slot->answer = d;
    if (d == NULL) {
        C.introspection_failures++;
        log_warn(NULL,
                 "auth: introspection at %s failed: %s (counted in "
                 "mcpgw_auth_introspection_failures_total)",
                 r->intro_uri, why);
        slot->until_ms = now + AUTH_INTRO_RETRY_MS;
    } else {
        /*
         * Until exp, at most introspection_cache_max_s; an answer already past its exp only for
         * the requests that waited for it (their check refuses it).
         */
        int64_t exp, now_s = util_now_unix();
        uint64_t keep_ms = r->ca->introspection_cache_max_s * 1000u;
        if (jsonrpc_doc_int(d, "exp", &exp) == 0 && exp < now_s)
            keep_ms = 0;
        else if (jsonrpc_doc_int(d, "exp", &exp) == 0 && (uint64_t)(exp - now_s) < keep_ms / 1000u)
            keep_ms = (uint64_t)(exp - now_s) * 1000u;
        slot->until_ms = now + (keep_ms > 0 ? keep_ms : 1);
    }
    memset(p->hash, 0, sizeof(p->hash));
    free(p);
    auth_wake_all(r);
}

/* A client's share of introspection_max_pending: a quarter, at least one. */
static bool
auth_intro_client_full(const struct auth_remote *r, const char *client)
{
    if (client == NULL || client[0] == '\0')
        return false;
    uint64_t share = r->ca->introspection_max_pending / 4;
    uint64_t n = 0;
    for (const struct auth_intro *p = r->pending; p != NULL; p = p->next)
        n += strncmp(p->client, client, sizeof(p->client) - 1) == 0;
    return n >= (share > 0 ? share : 1);
}

static enum auth_status
auth_intro_send(struct auth_remote *r, const char *tok, size_t len, const unsigned char *hash,
                const char *client, const char **why)
{
    if (r->npending >= r->ca->introspection_max_pending) {
        *why = "introspection_max_pending introspections are in flight";
        return AUTH_UNAVAILABLE;
    }
    if (auth_intro_client_full(r, client)) {
        *why = "this client has a quarter of introspection_max_pending introspections in flight";
        return AUTH_UNAVAILABLE;
    }
    char *form = xmalloc(len * 3 + 64);
    memcpy(form, "token=", 6);
    size_t o = 6 + auth_form_escape(tok, len, form + 6);
    memcpy(form + o, "&token_type_hint=access_token", sizeof("&token_type_hint=access_token"));
    struct auth_intro *p = xcalloc(1, sizeof(*p));
    memcpy(p->hash, hash, sizeof(p->hash));
    p->r = r;
    snprintf(p->client, sizeof(p->client), "%s", client != NULL ? client : "");
    C.introspections++;
    p->f = auth_fetch(r, r->intro_uri, form, AUTH_DOC_MAX, auth_intro_done, p);
    crypto_cleanse(form, o);
    free(form);
    if (p->f == NULL) {
        free(p);
        return AUTH_UNAVAILABLE;
    }
    p->next = r->pending;
    if (r->pending != NULL)
        r->pending->prev = p;
    r->pending = p;
    r->npending++;
    return AUTH_PENDING;
}

enum auth_status
auth_remote_introspect(struct auth_remote *r, const char *tok, size_t len,
                       const unsigned char *hash, const char *client, uint64_t now_ms,
                       const struct jsonrpc_doc **answer, uint64_t *until_ms, const char **why)
{
    struct auth_intro *slot = auth_intro_slot(r, hash);
    if (slot->until_ms > now_ms && memcmp(slot->hash, hash, CRYPTO_SHA256_LEN) == 0) {
        if (slot->answer == NULL)
            return AUTH_UNAVAILABLE;
        *answer = slot->answer;
        *until_ms = slot->until_ms;
        return AUTH_OK;
    }
    for (struct auth_intro *p = r->pending; p != NULL; p = p->next)
        if (memcmp(p->hash, hash, CRYPTO_SHA256_LEN) == 0)
            return AUTH_PENDING;
    enum auth_status st = auth_discovered(r, now_ms);
    return st != AUTH_OK ? st : auth_intro_send(r, tok, len, hash, client, why);
}

/* --- lifetime ------------------------------------------------------------------------------ */

static char *
auth_credentials(const char *path, struct auth_remote *r, char *err, size_t errlen)
{
    size_t len;
    char *text = auth_slurp(path, true, &len, err, errlen);
    if (text == NULL)
        return NULL;
    char *nl = strpbrk(text, "\r\n");
    if (nl != NULL)
        *nl = '\0';
    char *colon = strchr(text, ':');
    if (colon == NULL || colon == text || colon[1] == '\0' || strlen(text) > AUTH_SECRET_MAX) {
        crypto_cleanse(text, len);
        free(text);
        auth_fail(err, errlen, "%s: must hold one line CLIENT_ID:CLIENT_SECRET", path);
        return NULL;
    }
    *colon = '\0';
    r->client_id = xstrdup(text);
    r->client_secret = xstrdup(colon + 1);
    crypto_cleanse(text, len);
    return text;
}

int
auth_remote_new(const struct config_auth *ca, struct auth_remote **out, char *err, size_t errlen)
{
    *out = NULL;
    bool keys = ca->mode == CONFIG_AUTH_JWT && ca->jwks_file == NULL;
    bool intro = ca->mode == CONFIG_AUTH_JWT && ca->introspection_credentials_file != NULL;
    bool token = ca->mode == CONFIG_AUTH_JWT && ca->discover_token_endpoint;
    if (!keys && !intro && !token)
        return 0;
    struct auth_remote *r = xcalloc(1, sizeof(*r));
    r->ca = ca;
    r->want_keys = keys;
    r->want_intro = intro;
    r->want_token = token;
    if (intro) {
        char *text = auth_credentials(ca->introspection_credentials_file, r, err, errlen);
        if (text == NULL) {
            free(r);
            return -1;
        }
        free(text);
    }
    r->jwks_uri = keys && ca->jwks_uri != NULL ? xstrdup(ca->jwks_uri) : NULL;
    r->intro_uri = intro && ca->introspection_endpoint ? xstrdup(ca->introspection_endpoint) : NULL;
    *out = r;
    return 0;
}

static bool
auth_same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

void
auth_remote_adopt(struct auth_remote *next, struct auth_remote *prev)
{
    const struct config_auth *n = next->ca, *p = prev->ca;
    if (!auth_same(n->issuer, p->issuer) || !auth_same(n->tls_ca_file, p->tls_ca_file))
        return;
    if (next->want_keys && prev->have_keys && auth_same(n->jwks_uri, p->jwks_uri)) {
        if (next->jwks_uri == NULL)
            next->jwks_uri = xstrdup(prev->jwks_uri);
        next->keys = prev->keys;
        prev->keys.n = 0;
        prev->have_keys = false;
        next->have_keys = true;
        next->keys_until_ms = prev->keys_until_ms;
        next->keys_tried_ms = prev->keys_tried_ms;
    }
    if (next->want_intro && next->intro_uri == NULL && prev->intro_uri != NULL
        && n->introspection_endpoint == NULL && p->introspection_endpoint == NULL)
        next->intro_uri = xstrdup(prev->intro_uri);
    if (next->want_token && next->token_uri == NULL && prev->token_uri != NULL)
        next->token_uri = xstrdup(prev->token_uri);
    if ((!next->want_keys || next->jwks_uri != NULL)
        && (!next->want_intro || next->intro_uri != NULL)
        && (!next->want_token || next->token_uri != NULL))
        next->disc = AUTH_DISC_DONE;
}

void
auth_remote_start(struct auth_remote *r)
{
    if (r == NULL)
        return;
    uint64_t now = util_now_ms();
    if (auth_discovered(r, now) == AUTH_OK && r->want_keys && !r->have_keys)
        auth_keys_fetch(r, now);
}

bool
auth_remote_has_keys(const struct auth_remote *r)
{
    return r != NULL && r->want_keys;
}

bool
auth_remote_introspects(const struct auth_remote *r)
{
    return r != NULL && r->want_intro;
}

enum auth_status
auth_remote_token_endpoint(struct auth_remote *r, uint64_t now_ms, const char **url)
{
    *url = NULL;
    if (r == NULL || !r->want_token)
        return AUTH_UNAVAILABLE;
    enum auth_status st = auth_discovered(r, now_ms);
    *url = r->token_uri;
    return st == AUTH_OK && r->token_uri == NULL ? AUTH_UNAVAILABLE : st;
}

const char *
auth_remote_token_uri(const struct auth_remote *r, bool *running)
{
    *running = r->disc == AUTH_DISC_RUNNING;
    return r->token_uri;
}

void
auth_remote_free(struct auth_remote *r)
{
    if (r == NULL)
        return;
    fetch_cancel(r->disc_fetch);
    r->disc = AUTH_DISC_FAILED; /* the waiters woken below see discovery over */
    fetch_cancel(r->keys_fetch);
    while (r->pending != NULL) {
        struct auth_intro *p = r->pending;
        auth_intro_unlink(p);
        fetch_cancel(p->f);
        free(p);
    }
    for (size_t i = 0; i < AUTH_INTRO_CACHE; i++)
        jsonrpc_doc_free(r->cache[i].answer);
    auth_wake_all(r);
    auth_keyset_clear(&r->keys);
    if (r->client_secret != NULL)
        crypto_cleanse(r->client_secret, strlen(r->client_secret));
    free(r->client_id);
    free(r->client_secret);
    free(r->jwks_uri);
    free(r->intro_uri);
    free(r->token_uri);
    free(r);
}
