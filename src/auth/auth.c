/* SPDX-License-Identifier: MIT */
/*
 * Authentication and per-principal accounting (SECURITY.md).
 *
 * bearer: tokens_file lists SHA-256 hashes of opaque tokens, so the file never holds a usable
 * secret. A presented token is hashed and compared with every entry in constant time.
 *
 * jwt: a compact JWS (RFC 7515) whose alg is RS256, ES256 or EdDSA, signed by a key of jwks_file.
 * The alg must match the key's type, so an HS256 token "signed" with a public key, or alg "none",
 * never verifies. Claims: exp required, nbf optional (both with clock_skew_s), iss equal to issuer,
 * aud naming this server's resource URI (public_url + path, RFC 8707), sub the principal; scopes
 * from "scope" (space separated) or "scp".
 *
 * A JWT that verified is remembered (by its SHA-256, per server) with its principal, its scopes (as
 * the bits of the server's tool policy, policy.h) and lifetime until another token takes its slot,
 * so a client that sends the same token on every request pays for one signature check, not one per
 * request; exp and nbf are checked again each time. Keys change only with a new struct auth, whose
 * cache starts empty.
 *
 * Principals are interned in one table. Each carries a token bucket for rate_limit_per_s and the
 * count of sessions it holds; an unreferenced entry stays until its bucket is full again, so
 * dropping every session does not reset a principal's rate.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth_int.h"
#include "log.h"
#include "util.h"

#define AUTH_TOKEN_MAX  16384 /* a bearer token or a whole JWT */
#define AUTH_SCOPES_MAX 64    /* scopes read from one token */
#define AUTH_AUD_MAX    64    /* audiences read from one token */
#define AUTH_NAME_MAX   256   /* bytes of a principal's name */
#define AUTH_BUCKETS    1024  /* principal table */
#define AUTH_ANONYMOUS  "anonymous"
#define AUTH_CACHE      256 /* verified JWTs remembered, direct-mapped by hash */

struct auth_token {
    unsigned char hash[CRYPTO_SHA256_LEN];
    char *principal;
    char **scopes; /* NULL-terminated */
};

/* A JWT that verified for srv: valid again while now is inside [nbf - skew, exp + skew]. */
struct auth_cached {
    unsigned char hash[CRYPTO_SHA256_LEN];
    const struct config_server *srv;
    struct auth_principal *principal; /* a reference; NULL: the slot is free */
    uint64_t grants;                  /* its scopes as srv's tool policy numbers them */
    int64_t exp, nbf;
    uint64_t until_ms; /* an introspected token: reused until then (0: a JWT, no such bound) */
    struct auth_claims *claims; /* a reference: what its claims give srv's env_from_claims */
};

struct auth {
    const struct config_auth *ca;
    struct auth_cached cache[AUTH_CACHE];
    struct auth_token *tokens;
    size_t ntokens;
    struct auth_keyset keys;    /* from jwks_file */
    struct auth_remote *remote; /* what is fetched; NULL: nothing */
    const char *client;         /* auth_set_client's, for the check under way */
};

static struct {
    struct auth_principal *bucket[AUTH_BUCKETS];
    size_t count;
} P;

/* --- files ------------------------------------------------------------------------------- */

int
auth_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

char *
auth_slurp(const char *path, bool secret, size_t *len, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "re");
    if (fp == NULL) {
        auth_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char why[1024];
    const char *unsafe = util_file_unsafe(fileno(fp), path, secret, why, sizeof why);
    if (unsafe != NULL) {
        fclose(fp);
        auth_fail(err, errlen, "%s", unsafe);
        return NULL;
    }
    char *text = xmalloc(AUTH_FILE_MAX + 1);
    size_t n = fread(text, 1, AUTH_FILE_MAX + 1, fp);
    bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad || n > AUTH_FILE_MAX) {
        free(text);
        auth_fail(err, errlen, "%s: %s", path, bad ? "read error" : "larger than 1 MiB");
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

static void
auth_strv_free(char **v)
{
    for (char **p = v; p != NULL && *p != NULL; p++)
        free(*p);
    free(v);
}

static int
auth_hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* "sha256:<64 hex> PRINCIPAL [SCOPE ...]" into t; -1 with a static phrase in *why. */
static int
auth_token_line(char *line, struct auth_token *t, const char **why)
{
    char *save = NULL;
    char *hash = strtok_r(line, " \t", &save);
    char *name = strtok_r(NULL, " \t", &save);
    if (hash == NULL || strncmp(hash, "sha256:", 7) != 0 || strlen(hash) != 7 + 64) {
        *why = "expected sha256:<64 hex digits> PRINCIPAL [SCOPE ...]";
        return -1;
    }
    for (size_t i = 0; i < CRYPTO_SHA256_LEN; i++) {
        int hi = auth_hex(hash[7 + 2 * i]), lo = auth_hex(hash[8 + 2 * i]);
        if (hi < 0 || lo < 0) {
            *why = "the hash must be 64 hex digits";
            return -1;
        }
        t->hash[i] = (unsigned char)(hi << 4 | lo);
    }
    if (name == NULL || strlen(name) > AUTH_NAME_MAX) {
        *why = "a principal name (1..256 characters) must follow the hash";
        return -1;
    }
    t->principal = xstrdup(name);
    size_t n = 0;
    t->scopes = xcalloc(1, sizeof(char *));
    for (char *sc; (sc = strtok_r(NULL, " \t", &save)) != NULL && n < AUTH_SCOPES_MAX;) {
        t->scopes = xrealloc(t->scopes, (n + 2) * sizeof(char *));
        t->scopes[n++] = xstrdup(sc);
        t->scopes[n] = NULL;
    }
    return 0;
}

static int
auth_load_tokens(struct auth *a, const char *path, char *err, size_t errlen)
{
    size_t len;
    char *text = auth_slurp(path, false, &len, err, errlen);
    if (text == NULL)
        return -1;
    if (memchr(text, '\0', len) != NULL) {
        free(text);
        return auth_fail(err, errlen, "%s: contains a NUL byte", path);
    }
    int lineno = 0, rc = 0;
    char *save = NULL;
    for (char *line = text; rc == 0 && line != NULL; line = save) {
        char *nl = strchr(line, '\n');
        save = nl != NULL ? nl + 1 : NULL;
        if (nl != NULL)
            *nl = '\0';
        lineno++;
        line[strcspn(line, "\r")] = '\0';
        const char *p = line + strspn(line, " \t");
        if (*p == '\0' || *p == '#')
            continue;
        struct auth_token t = { 0 };
        const char *why = NULL;
        if (auth_token_line(line, &t, &why) == 0) {
            for (size_t i = 0; i < a->ntokens && why == NULL; i++)
                if (crypto_equal(a->tokens[i].hash, t.hash, CRYPTO_SHA256_LEN))
                    why = "the same token hash is listed twice";
            if (why == NULL) {
                a->tokens = xrealloc(a->tokens, (a->ntokens + 1) * sizeof(*a->tokens));
                a->tokens[a->ntokens++] = t;
                continue;
            }
            free(t.principal);
            auth_strv_free(t.scopes);
        }
        rc = auth_fail(err, errlen, "%s:%d: %s", path, lineno, why);
    }
    free(text);
    if (rc == 0 && a->ntokens == 0)
        log_warn(NULL, "%s lists no token: every request will get 401", path);
    return rc;
}

/* base64url s[0..n) decoded into a new buffer; NULL when malformed or empty. */
static unsigned char *
auth_b64_new(const char *s, size_t n, size_t *len)
{
    size_t cap = n / 4 * 3 + 3;
    unsigned char *out = xmalloc(cap);
    long r = util_base64url_decode(s, n, out, cap);
    if (r <= 0) {
        free(out);
        return NULL;
    }
    *len = (size_t)r;
    return out;
}

/* A base64url member of a JWK, decoded into a new buffer; NULL when absent or malformed. */
static unsigned char *
auth_jwk_part(const struct jsonrpc_doc *k, const char *key, size_t *len)
{
    const char *s = jsonrpc_doc_str(k, key);
    return s != NULL ? auth_b64_new(s, strlen(s), len) : NULL;
}

/* The key a JWK describes; NULL with *why, or NULL with *why == NULL for a key to skip. */
static struct crypto_key *
auth_jwk_key(const struct jsonrpc_doc *k, const char **why)
{
    const char *kty = jsonrpc_doc_str(k, "kty"), *crv = jsonrpc_doc_str(k, "crv");
    const char *use = jsonrpc_doc_str(k, "use"), *alg = jsonrpc_doc_str(k, "alg");
    *why = NULL;
    if (jsonrpc_doc_has(k, "d")) {
        *why = "holds a private key (\"d\"): publish public keys only";
        return NULL;
    }
    if (kty == NULL) {
        *why = "has no kty";
        return NULL;
    }
    if (use != NULL && strcmp(use, "sig") != 0)
        return NULL;
    const char *want = strcmp(kty, "RSA") == 0                                         ? "RS256"
                       : strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-256") == 0    ? "ES256"
                       : strcmp(kty, "OKP") == 0 && crv && strcmp(crv, "Ed25519") == 0 ? "EdDSA"
                                                                                       : NULL;
    if (want == NULL || (alg != NULL && strcmp(alg, want) != 0))
        return NULL; /* a type or algorithm this gateway does not verify */
    size_t l1 = 0, l2 = 0;
    unsigned char *p1 = auth_jwk_part(k, strcmp(kty, "RSA") == 0 ? "n" : "x", &l1);
    unsigned char *p2 =
        strcmp(kty, "OKP") == 0 ? NULL : auth_jwk_part(k, strcmp(kty, "RSA") == 0 ? "e" : "y", &l2);
    struct crypto_key *key = NULL;
    if (p1 == NULL || (p2 == NULL && strcmp(kty, "OKP") != 0))
        *why = "a key part is missing or not base64url";
    else if (strcmp(kty, "RSA") == 0)
        key = crypto_key_rsa(p1, l1, p2, l2, why);
    else if (strcmp(kty, "EC") == 0)
        key = crypto_key_p256(p1, l1, p2, l2, why);
    else
        key = crypto_key_ed25519(p1, l1, why);
    free(p1);
    free(p2);
    return key;
}

void
auth_keyset_clear(struct auth_keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++) {
        free(ks->k[i].kid);
        crypto_key_free(ks->k[i].key);
    }
    ks->n = 0;
}

int
auth_keyset_parse(struct auth_keyset *ks, const char *text, size_t len, size_t *skipped, char *err,
                  size_t errlen)
{
    struct jsonrpc_doc *doc = jsonrpc_doc_parse(text, len);
    if (doc == NULL)
        return auth_fail(err, errlen, "not a JSON object");
    int rc = 0;
    size_t n = jsonrpc_doc_len(doc, "keys");
    *skipped = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct jsonrpc_doc *k = jsonrpc_doc_at(doc, "keys", i);
        const char *why = k == NULL ? "is not an object" : NULL;
        struct crypto_key *key = k != NULL ? auth_jwk_key(k, &why) : NULL;
        const char *kid = k != NULL ? jsonrpc_doc_str(k, "kid") : NULL;
        if (why != NULL) {
            rc = auth_fail(err, errlen, "keys[%zu] %s", i, why);
        } else if (key == NULL) {
            (*skipped)++;
        } else if (ks->n == AUTH_KEYS_MAX) {
            crypto_key_free(key);
            rc = auth_fail(err, errlen, "more than %d usable keys", AUTH_KEYS_MAX);
        } else {
            ks->k[ks->n].kid = kid != NULL ? xstrdup(kid) : NULL;
            ks->k[ks->n++].key = key;
        }
    }
    jsonrpc_doc_free(doc);
    if (rc == 0 && ks->n == 0)
        rc = auth_fail(err, errlen, "no RS256, ES256 or EdDSA signing key in \"keys\"");
    if (rc == -1)
        auth_keyset_clear(ks);
    return rc;
}

static int
auth_load_jwks(struct auth *a, const char *path, char *err, size_t errlen)
{
    size_t len, skipped;
    char *text = auth_slurp(path, false, &len, err, errlen);
    if (text == NULL)
        return -1;
    char why[256];
    int rc = auth_keyset_parse(&a->keys, text, len, &skipped, why, sizeof(why));
    free(text);
    if (rc == -1)
        return auth_fail(err, errlen, "%s: %s", path, why);
    if (skipped > 0)
        log_info(NULL, "%s: %zu keys of other types or uses skipped", path, skipped);
    return 0;
}

struct auth *
auth_new(const struct config *cfg, char *err, size_t errlen)
{
    struct auth *a = xcalloc(1, sizeof(*a));
    a->ca = &cfg->auth;
    int rc = 0;
    if (cfg->auth.mode == CONFIG_AUTH_BEARER)
        rc = auth_load_tokens(a, cfg->auth.tokens_file, err, errlen);
    else if (cfg->auth.mode == CONFIG_AUTH_JWT && cfg->auth.jwks_file != NULL)
        rc = auth_load_jwks(a, cfg->auth.jwks_file, err, errlen);
    if (rc == 0)
        rc = auth_remote_new(&cfg->auth, &a->remote, err, errlen);
    if (rc == -1) {
        auth_free(a);
        return NULL;
    }
    return a;
}

void
auth_free(struct auth *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->ntokens; i++) {
        memset(a->tokens[i].hash, 0, sizeof(a->tokens[i].hash));
        free(a->tokens[i].principal);
        auth_strv_free(a->tokens[i].scopes);
    }
    free(a->tokens);
    auth_remote_free(a->remote);
    auth_keyset_clear(&a->keys);
    for (size_t i = 0; i < AUTH_CACHE; i++) {
        auth_principal_unref(a->cache[i].principal);
        auth_claims_unref(a->cache[i].claims);
    }
    free(a);
}

/* --- principals -------------------------------------------------------------------------- */

/* The principal named s[0..n), found or added; a new reference. */
static struct auth_principal *
auth_principal_get(const char *s, size_t n)
{
    size_t b = util_hash(s, n) % AUTH_BUCKETS;
    for (struct auth_principal *p = P.bucket[b]; p != NULL; p = p->next)
        if (strlen(p->name) == n && memcmp(p->name, s, n) == 0)
            return auth_principal_ref(p);
    struct auth_principal *p = xcalloc(1, sizeof(*p));
    p->name = xstrndup(s, n);
    p->tokens = -1;
    p->refs = 1;
    p->next = P.bucket[b];
    P.bucket[b] = p;
    P.count++;
    return p;
}

struct auth_principal *
auth_principal_ref(struct auth_principal *p)
{
    p->refs++;
    return p;
}

void
auth_principal_unref(struct auth_principal *p)
{
    if (p != NULL && p->refs > 0)
        p->refs--;
}

/* Brings p's bucket up to now; returns the tokens in it. */
static double
auth_refill(struct auth_principal *p, const struct config_auth *ca, uint64_t now_ms)
{
    double burst = (double)ca->rate_limit_burst;
    if (p->tokens < 0 || now_ms < p->stamp_ms) {
        p->tokens = burst;
    } else {
        p->tokens += (double)(now_ms - p->stamp_ms) * (double)ca->rate_limit_per_s / 1000.0;
        if (p->tokens > burst)
            p->tokens = burst;
    }
    p->stamp_ms = now_ms;
    return p->tokens;
}

bool
auth_rate_take(struct auth_principal *p, const struct config_auth *ca, uint64_t now_ms,
               uint64_t *retry_ms)
{
    if (ca->rate_limit_per_s == 0)
        return true;
    if (auth_refill(p, ca, now_ms) >= 1.0) {
        p->tokens -= 1.0;
        return true;
    }
    double wait = (1.0 - p->tokens) * 1000.0 / (double)ca->rate_limit_per_s;
    *retry_ms = (uint64_t)wait + 1;
    return false;
}

void
auth_sweep(const struct config_auth *ca, uint64_t now_ms)
{
    for (size_t b = 0; b < AUTH_BUCKETS; b++) {
        for (struct auth_principal **pp = &P.bucket[b]; *pp != NULL;) {
            struct auth_principal *p = *pp;
            bool full = ca->rate_limit_per_s == 0 || p->tokens < 0
                        || auth_refill(p, ca, now_ms) >= (double)ca->rate_limit_burst;
            if (p->refs == 0 && full) {
                *pp = p->next;
                free(p->name);
                free(p);
                P.count--;
            } else {
                pp = &p->next;
            }
        }
    }
}

size_t
auth_principal_count(void)
{
    return P.count;
}

void
auth_module_free(void)
{
    for (size_t b = 0; b < AUTH_BUCKETS; b++) {
        while (P.bucket[b] != NULL) {
            struct auth_principal *p = P.bucket[b];
            P.bucket[b] = p->next;
            free(p->name);
            free(p);
        }
    }
    P.count = 0;
}

/* --- checking a request ------------------------------------------------------------------ */

int
auth_resource(const struct config_auth *ca, const struct config_server *srv, char *out, size_t size)
{
    int n = snprintf(out, size, "%s%s", ca->public_url ? ca->public_url : "", srv->path);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int
auth_metadata_url(const struct config_auth *ca, const struct config_server *srv, char *out,
                  size_t size)
{
    int n = snprintf(out, size, "%s/.well-known/oauth-protected-resource%s",
                     ca->public_url ? ca->public_url : "", srv->path);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Every scope srv requires is among have[0..n). */
static bool
auth_scopes_ok(const struct config_server *srv, const char *const *have, size_t n)
{
    for (char **need = srv->required_scopes; need != NULL && *need != NULL; need++) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp(have[i], *need) == 0;
        if (!found)
            return false;
    }
    return true;
}

static enum auth_status
auth_bearer(const struct auth *a, const char *tok, size_t len, const struct config_server *srv,
            struct auth_principal **principal, uint64_t *grants, const char **why)
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(tok, len, h);
    const struct auth_token *match = NULL;
    for (size_t i = 0; i < a->ntokens; i++) /* no early exit: the time does not depend on i */
        if (crypto_equal(a->tokens[i].hash, h, sizeof(h)))
            match = &a->tokens[i];
    if (match == NULL) {
        *why = "unknown token";
        return AUTH_INVALID;
    }
    size_t n = 0;
    while (match->scopes[n] != NULL)
        n++;
    if (!auth_scopes_ok(srv, (const char *const *)match->scopes, n)) {
        *why = "the token lacks a required scope";
        return AUTH_SCOPE;
    }
    *principal = auth_principal_get(match->principal, strlen(match->principal));
    *grants = policy_grants(srv->policy, (const char *const *)match->scopes, n);
    return AUTH_OK;
}

/* One base64url part of a JWT, decoded and parsed as a JSON object; NULL if it is not one. */
static struct jsonrpc_doc *
auth_jwt_part(const char *s, size_t n)
{
    size_t len;
    unsigned char *raw = auth_b64_new(s, n, &len);
    struct jsonrpc_doc *d = raw != NULL ? jsonrpc_doc_parse((const char *)raw, len) : NULL;
    free(raw);
    return d;
}

/* The header's alg as a crypto_alg; -1 for any other (none, HS256, ...). */
static int
auth_jwt_alg(const char *alg)
{
    if (alg == NULL)
        return -1;
    return strcmp(alg, "RS256") == 0   ? CRYPTO_RS256
           : strcmp(alg, "ES256") == 0 ? CRYPTO_ES256
           : strcmp(alg, "EdDSA") == 0 ? CRYPTO_EDDSA
                                       : -1;
}

/*
 * The signature over tok[0..signed_len) checks out with some key of ks of the header's alg and
 * kid. *kid_known: the token names no kid, or ks has a key of that kid.
 */
static bool
auth_jwt_signed(const struct auth_keyset *ks, const char *tok, size_t signed_len,
                const char *sig_b64, size_t sig_len, int alg, const char *kid, bool *kid_known)
{
    size_t n = 0;
    unsigned char *sig = auth_b64_new(sig_b64, sig_len, &n);
    bool ok = false;
    *kid_known = kid == NULL;
    for (size_t i = 0; i < ks->n && !ok; i++) {
        const struct auth_jwk *k = &ks->k[i];
        if (kid != NULL && k->kid != NULL && strcmp(kid, k->kid) == 0)
            *kid_known = true;
        if (sig == NULL || (int)crypto_key_alg(k->key) != alg
            || (kid != NULL && k->kid != NULL && strcmp(kid, k->kid) != 0))
            continue;
        ok = crypto_verify(k->key, tok, signed_len, sig, n);
    }
    free(sig);
    return ok;
}

/*
 * exp is past, or nbf still ahead, by more than skew. now_s is a real clock and skew at most an
 * hour, so now_s -/+ skew cannot overflow, whatever int64 a token carries.
 */
static bool
auth_expired(int64_t exp, int64_t now_s, int64_t skew)
{
    return exp < now_s - skew;
}

static bool
auth_early(int64_t nbf, int64_t now_s, int64_t skew)
{
    return nbf > now_s + skew;
}

/*
 * The claims of a verified token, or of an introspection answer (RFC 7662 section 2.2, where exp
 * and iss are optional and the principal may be named by username or client_id): time, issuer,
 * audience, subject. The principal's name in *name, and the claim that gave it in *claim.
 */
static const char *
auth_claims(const struct auth *a, const struct jsonrpc_doc *c, const struct config_server *srv,
            int64_t now_s, bool introspected, const char **name, const char **claim)
{
    const struct config_auth *ca = a->ca;
    int64_t exp, nbf, skew = (int64_t)ca->clock_skew_s;
    if (introspected && !jsonrpc_doc_true(c, "active"))
        return "the token is not active (introspection)";
    if (jsonrpc_doc_int(c, "exp", &exp) == -1 && (!introspected || jsonrpc_doc_has(c, "exp")))
        return "the token has no exp";
    if (jsonrpc_doc_has(c, "exp") && auth_expired(exp, now_s, skew))
        return "the token has expired";
    if (jsonrpc_doc_has(c, "nbf")
        && (jsonrpc_doc_int(c, "nbf", &nbf) == -1 || auth_early(nbf, now_s, skew)))
        return "the token is not valid yet (nbf)";
    const char *iss = jsonrpc_doc_str(c, "iss");
    if ((iss == NULL && (!introspected || jsonrpc_doc_has(c, "iss")))
        || (iss != NULL && strcmp(iss, ca->issuer) != 0))
        return "the token's issuer is not the configured issuer";
    char resource[1024];
    const char *aud[AUTH_AUD_MAX];
    int naud = jsonrpc_doc_strs(c, "aud", aud, AUTH_AUD_MAX);
    bool aud_ok = false;
    if (auth_resource(ca, srv, resource, sizeof(resource)) == 0)
        for (int i = 0; i < naud && !aud_ok; i++)
            aud_ok = strcmp(aud[i], resource) == 0;
    if (!aud_ok)
        return "the token's audience is not this server";
    /* A JWT names its principal by sub; an introspection answer may by the others instead. */
    static const char *const claims[] = { "sub", "username", "client_id" };
    const char *sub = NULL;
    for (size_t i = 0; sub == NULL && i < (introspected ? ARRAY_LEN(claims) : 1); i++) {
        *claim = claims[i];
        sub = jsonrpc_doc_str(c, claims[i]);
    }
    *name = sub;
    size_t sublen = sub != NULL ? strlen(sub) : 0;
    if (sublen == 0 || sublen > AUTH_NAME_MAX)
        return "the token has no sub (1..256 bytes)";
    for (size_t i = 0; i < sublen; i++)
        if ((unsigned char)sub[i] < 0x20 || sub[i] == 0x7f)
            return "the token's sub holds control characters";
    return NULL;
}

/* The granted scopes: "scope" (space separated), else "scp" (string or array). */
static size_t
auth_jwt_scopes(const struct jsonrpc_doc *c, char *copy, size_t copylen, const char **out,
                size_t max)
{
    const char *scope = jsonrpc_doc_str(c, "scope");
    const char *scp[AUTH_SCOPES_MAX];
    int nscp = scope == NULL ? jsonrpc_doc_strs(c, "scp", scp, AUTH_SCOPES_MAX) : 0;
    if (scope == NULL && nscp == 1 && jsonrpc_doc_str(c, "scp") != NULL) {
        scope = scp[0]; /* "scp": "a b" as some issuers write it */
        nscp = 0;
    }
    size_t n = 0;
    for (int i = 0; i < nscp && n < max; i++)
        out[n++] = scp[i];
    if (scope != NULL && snprintf(copy, copylen, "%s", scope) < (int)copylen) {
        char *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t != NULL && n < max;
             t = strtok_r(NULL, " ", &save))
            out[n++] = t;
    }
    return n;
}

/* The remembered verification of this token for srv, if it is still inside its lifetime. */
static struct auth_principal *
auth_cache_find(struct auth *a, const unsigned char *hash, const struct config_server *srv,
                int64_t now_s, uint64_t *grants, struct auth_claims **claims)
{
    const struct auth_cached *c = &a->cache[hash[0] % AUTH_CACHE];
    int64_t skew = (int64_t)a->ca->clock_skew_s;
    if (c->principal == NULL || c->srv != srv || !crypto_equal(c->hash, hash, CRYPTO_SHA256_LEN)
        || auth_expired(c->exp, now_s, skew) || auth_early(c->nbf, now_s, skew)
        || (c->until_ms != 0 && util_now_ms() >= c->until_ms))
        return NULL;
    *grants = c->grants;
    *claims = c->claims != NULL ? auth_claims_ref(c->claims) : NULL;
    return auth_principal_ref(c->principal);
}

static void
auth_cache_put(struct auth *a, const unsigned char *hash, const struct config_server *srv,
               const struct jsonrpc_doc *claims, struct auth_principal *p, uint64_t grants,
               uint64_t until_ms, struct auth_claims *env)
{
    struct auth_cached *c = &a->cache[hash[0] % AUTH_CACHE];
    auth_principal_unref(c->principal);
    auth_claims_unref(c->claims);
    c->claims = env != NULL ? auth_claims_ref(env) : NULL;
    memcpy(c->hash, hash, CRYPTO_SHA256_LEN);
    c->srv = srv;
    c->principal = auth_principal_ref(p);
    c->grants = grants;
    c->until_ms = until_ms;
    if (jsonrpc_doc_int(claims, "exp", &c->exp) == -1) /* introspected without exp */
        c->exp = INT64_MAX / 2;
    if (jsonrpc_doc_int(claims, "nbf", &c->nbf) == -1)
        c->nbf = INT64_MIN / 2;
}

/*
 * Verified claims c (a JWT's, or an introspection answer) grant srv: the principal, or why not.
 * Remembered for the next request with the same token.
 */
static enum auth_status
auth_grant(struct auth *a, const unsigned char *hash, const struct jsonrpc_doc *c,
           const struct config_server *srv, int64_t now_s, bool introspected, uint64_t until_ms,
           struct auth_principal **principal, uint64_t *grants, struct auth_claims **claims,
           const char **why)
{
    const char *name = NULL, *claim = NULL;
    *why = auth_claims(a, c, srv, now_s, introspected, &name, &claim);
    if (*why != NULL)
        return AUTH_INVALID;
    /*
     * A sub, a username and a client_id are names of different things: "alice" the client is not
     * "alice" the subject. The principal's name says which it is ("sub:alice"), so that sessions
     * and held calls bound to one are never another's. A sub is the issuer's subject identifier in
     * a JWT and in an introspection answer alike (RFC 7662 section 2.2): one principal.
     */
    char qualified[AUTH_NAME_MAX + 16];
    int qlen = snprintf(qualified, sizeof(qualified), "%s:%s", claim, name);
    char copy[4096];
    const char *scopes[AUTH_SCOPES_MAX];
    size_t n = auth_jwt_scopes(c, copy, sizeof(copy), scopes, AUTH_SCOPES_MAX);
    if (!auth_scopes_ok(srv, scopes, n)) {
        *why = "the token lacks a required scope";
        return AUTH_SCOPE;
    }
    *principal = auth_principal_get(qualified, (size_t)qlen);
    *grants = policy_grants(srv->policy, scopes, n);
    *claims = srv->n_claim_env > 0 ? auth_claims_new(srv, c) : NULL;
    auth_cache_put(a, hash, srv, c, *principal, *grants, until_ms, *claims);
    return AUTH_OK;
}

void
auth_set_client(struct auth *a, const char *client)
{
    a->client = client;
}

/* An opaque token: what the issuer's introspection endpoint says of it. */
static enum auth_status
auth_introspected(struct auth *a, const char *tok, size_t len, const unsigned char *hash,
                  const struct config_server *srv, int64_t now_s, struct auth_principal **principal,
                  uint64_t *grants, struct auth_claims **claims, const char **why)
{
    const struct jsonrpc_doc *answer = NULL;
    uint64_t until_ms = 0;
    enum auth_status st = auth_remote_introspect(a->remote, tok, len, hash, a->client,
                                                 util_now_ms(), &answer, &until_ms, why);
    if (st == AUTH_PENDING)
        *why = "waiting for the introspection endpoint";
    else if (st == AUTH_UNAVAILABLE && *why == NULL)
        *why = "the introspection endpoint cannot be reached";
    if (st != AUTH_OK)
        return st;
    return auth_grant(a, hash, answer, srv, now_s, true, until_ms, principal, grants, claims, why);
}

enum auth_status
auth_judge_introspection(struct auth *a, const char *body, size_t len,
                         const struct config_server *srv, int64_t now_s,
                         struct auth_principal **principal, const char **why)
{
    *principal = NULL;
    struct jsonrpc_doc *d = auth_intro_parse(body, len, why);
    if (d == NULL)
        return AUTH_UNAVAILABLE;
    unsigned char hash[CRYPTO_SHA256_LEN];
    crypto_sha256(body, len, hash);
    uint64_t grants;
    struct auth_claims *claims = NULL;
    enum auth_status st = auth_grant(a, hash, d, srv, now_s, true, util_now_ms() + 1, principal,
                                     &grants, &claims, why);
    auth_claims_unref(claims);
    jsonrpc_doc_free(d);
    return st;
}

/*
 * The keys a JWT is checked with: jwks_file's, or the issuer's JWK Set (AUTH_PENDING while the
 * first one is on its way).
 */
static enum auth_status
auth_keys(struct auth *a, const struct auth_keyset **ks, const char **why)
{
    *ks = &a->keys;
    if (!auth_remote_has_keys(a->remote))
        return AUTH_OK;
    enum auth_status st = auth_remote_keys(a->remote, util_now_ms(), ks);
    *why = st == AUTH_PENDING ? "waiting for the issuer's JWK Set"
           : st == AUTH_OK    ? NULL
                              : "the issuer's JWK Set cannot be fetched";
    return st;
}

/* Why the JOSE header h is refused, or NULL; its alg in *alg. */
static const char *
auth_jwt_header(const struct jsonrpc_doc *h, int *alg)
{
    *alg = h != NULL ? auth_jwt_alg(jsonrpc_doc_str(h, "alg")) : -1;
    const char *typ = h != NULL ? jsonrpc_doc_str(h, "typ") : NULL;
    if (h == NULL)
        return "the token's header is not JSON";
    if (*alg < 0)
        return "the token's alg is not RS256, ES256 or EdDSA";
    if (jsonrpc_doc_has(h, "crit"))
        return "the token has crit header parameters";
    if (typ != NULL && strcasecmp(typ, "JWT") != 0 && strcasecmp(typ, "at+jwt") != 0
        && strcasecmp(typ, "application/at+jwt") != 0)
        return "the token's typ is not JWT or at+jwt";
    return NULL;
}

static enum auth_status
auth_jwt(struct auth *a, const char *tok, size_t len, const struct config_server *srv,
         int64_t now_s, struct auth_principal **principal, uint64_t *grants,
         struct auth_claims **claims, const char **why)
{
    unsigned char hash[CRYPTO_SHA256_LEN];
    crypto_sha256(tok, len, hash);
    *principal = auth_cache_find(a, hash, srv, now_s, grants, claims);
    if (*principal != NULL)
        return AUTH_OK;
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 != NULL ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
    if (d2 == NULL || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)) != NULL) {
        if (auth_remote_introspects(a->remote))
            return auth_introspected(a, tok, len, hash, srv, now_s, principal, grants, claims, why);
        *why = "not a JWS compact token";
        return AUTH_INVALID;
    }
    int alg;
    struct jsonrpc_doc *h = auth_jwt_part(tok, (size_t)(d1 - tok));
    *why = auth_jwt_header(h, &alg);
    const struct auth_keyset *ks = NULL;
    /* A malformed header is refused before anything waits for keys. */
    enum auth_status st = *why == NULL ? auth_keys(a, &ks, why) : AUTH_INVALID;
    if (st != AUTH_OK) {
        jsonrpc_doc_free(h);
        return st;
    }
    bool kid_known = true;
    if (!auth_jwt_signed(ks, tok, (size_t)(d2 - tok), d2 + 1, len - (size_t)(d2 + 1 - tok), alg,
                         jsonrpc_doc_str(h, "kid"), &kid_known)) {
        /* A key the set lacks: the issuer may have rotated its keys since the set was fetched. */
        if (!kid_known && auth_remote_has_keys(a->remote)
            && auth_remote_unknown_kid(a->remote, util_now_ms()) == AUTH_PENDING)
            st = AUTH_PENDING;
        *why = st == AUTH_PENDING ? "waiting for the issuer's JWK Set (a new kid)"
               : auth_remote_has_keys(a->remote)
                   ? "the token's signature does not verify with any key of the issuer's JWK Set"
                   : "the token's signature does not verify with any key of jwks_file";
    }
    jsonrpc_doc_free(h);
    if (*why != NULL)
        return st == AUTH_PENDING ? AUTH_PENDING : AUTH_INVALID;
    struct jsonrpc_doc *c = auth_jwt_part(d1 + 1, (size_t)(d2 - d1 - 1));
    if (c == NULL) {
        *why = "the token's claims are not a JSON object";
        return AUTH_INVALID;
    }
    st = auth_grant(a, hash, c, srv, now_s, false, 0, principal, grants, claims, why);
    jsonrpc_doc_free(c);
    return st;
}

const char *
auth_bearer_token(const char *header, size_t *len)
{
    if (header == NULL || !util_has_prefix_i(header, "Bearer "))
        return NULL;
    const char *tok = header + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && tok[n - 1] == ' ')
        n--;
    *len = n;
    return tok;
}

enum auth_status
auth_check(struct auth *a, const char *header, const struct config_server *srv, int64_t now_s,
           struct auth_principal **principal, struct policy_grants *grants, const char **why)
{
    struct auth_claims *claims = NULL;
    enum auth_status st = auth_check_claims(a, header, srv, now_s, principal, grants, &claims, why);
    auth_claims_unref(claims);
    return st;
}

enum auth_status
auth_check_claims(struct auth *a, const char *header, const struct config_server *srv,
                  int64_t now_s, struct auth_principal **principal, struct policy_grants *grants,
                  struct auth_claims **claims, const char **why)
{
    *principal = NULL;
    *claims = NULL;
    *grants = (struct policy_grants){ srv->policy, 0 };
    *why = NULL;
    if (a->ca->mode == CONFIG_AUTH_NONE) {
        /*
         * No token names anyone: the client's address does (the access log's client, the peer's
         * unless a trusted proxy named it), so that one client's requests, rounds and listens
         * count against its own per-principal limits, not everyone's. "anonymous" when the
         * address is not known.
         */
        static const char prefix[] = "address:";
        char name[AUTH_NAME_MAX];
        size_t n = a->client != NULL ? strlen(a->client) : 0;
        if (n != 0) {
            /* Copied, not formatted (this runs on every request); cut as snprintf would. */
            if (n > sizeof(name) - sizeof(prefix))
                n = sizeof(name) - sizeof(prefix);
            memcpy(name, prefix, sizeof(prefix) - 1);
            memcpy(name + sizeof(prefix) - 1, a->client, n);
            n += sizeof(prefix) - 1;
            name[n] = '\0';
        } else {
            n = strlen(AUTH_ANONYMOUS);
            memcpy(name, AUTH_ANONYMOUS, n + 1);
        }
        *principal = auth_principal_get(name, n);
        return AUTH_OK;
    }
    size_t len;
    const char *tok = auth_bearer_token(header, &len);
    if (tok == NULL) {
        *why = "no bearer token";
        return AUTH_MISSING;
    }
    if (len == 0 || len > AUTH_TOKEN_MAX) {
        *why = len == 0 ? "no bearer token" : "the token is too long";
        return len == 0 ? AUTH_MISSING : AUTH_INVALID;
    }
    if (a->ca->mode == CONFIG_AUTH_BEARER)
        return auth_bearer(a, tok, len, srv, principal, &grants->bits, why);
    return auth_jwt(a, tok, len, srv, now_s, principal, &grants->bits, claims, why);
}

/* --- waiting for the authorization server ------------------------------------------------ */

const struct config_auth *
auth_parts(struct auth *a, struct auth_remote **r)
{
    *r = a->remote;
    return a->ca;
}

struct auth_wait *
auth_wait(struct auth *a, auth_wake_cb *cb, void *arg)
{
    return auth_remote_wait(a->remote, cb, arg);
}

void
auth_adopt(struct auth *next, struct auth *prev)
{
    if (next->remote != NULL && prev->remote != NULL)
        auth_remote_adopt(next->remote, prev->remote);
}

void
auth_start(struct auth *a)
{
    auth_remote_start(a->remote);
}
