/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_AUTH_H
#define MCPGW_AUTH_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "util.h"

/*
 * Who is asking, and how much they may ask: the Authorization header of a request becomes a
 * principal under the [auth] mode (none, bearer, jwt), and each principal carries the counters the
 * per-principal limits need (sessions held, a token bucket of requests). Pure apart from reading
 * the key and token files in auth_new: no HTTP, no sessions. Signatures and hashes go through
 * crypto, JSON through jsonrpc.
 */

/* Key material loaded from one configuration's tokens_file or jwks_file. */
struct auth;

/*
 * One identity: the token's principal name (bearer); for an issuer's token the claim that names
 * it and its value, "sub:alice" (a JWT, or an introspection answer, which may name it by
 * "username:..." or "client_id:..." instead); or, in mode none, the client's address
 * ("address:127.0.0.1", auth_set_client), "anonymous" when it is not known.
 * Interned by name, so two requests of one principal hold the same pointer. Sessions, requests
 * and remembered JWTs hold references; an entry with none lives on until its token bucket is full
 * again.
 */
struct auth_principal {
    char *name;
    unsigned refs;
    double tokens;     /* rate limit bucket; < 0: full, not yet used */
    uint64_t stamp_ms; /* when tokens was last brought up to date */
    struct auth_principal *next;
};

/*
 * What a verified token's claims give a server's session children (its env_from_claims): the
 * variables, or why this token cannot start a session there. Refcounted: the cache of verified
 * tokens and each request holding it. Its values are credentials: never logged, wiped when freed.
 */
struct auth_claims {
    unsigned refs;
    char *why; /* NULL: env holds every variable; else the refusal, naming a claim, never a value */
    char **env; /* "VAR=value", NULL-terminated */
};
struct auth_claims *auth_claims_ref(struct auth_claims *c);
void auth_claims_unref(struct auth_claims *c);
/*
 * What a child of srv that serves principal alone adds to its environment (srv has env_from_claims
 * or credentials_dir): principal's credentials_dir file, read now, then what claims (the request's
 * verified token's; NULL: none) give env_from_claims, a name set by both taking the claim's. NULL
 * with *extra (NAME=VALUE, NULL-terminated; free with config_env_free), or the refusal's text with
 * *status 403 (no credentials: a missing claim, no file without credentials_missing = server_env,
 * a name that cannot name a file) or 500 (the file cannot be read safely). The log says why,
 * naming what (the child: "new session", "pool child"), never a value.
 */
const char *auth_child_credentials(const struct config_server *srv, const char *principal,
                                   const struct auth_claims *claims, const char *what,
                                   char ***extra, int *status);

enum auth_status {
    AUTH_OK = 0,
    AUTH_MISSING,     /* no "Authorization: Bearer" header: 401, no error code */
    AUTH_INVALID,     /* a token that does not verify: 401 error="invalid_token" */
    AUTH_SCOPE,       /* valid, but lacks a scope the server requires: 403 insufficient_scope */
    AUTH_PENDING,     /* keys or an introspection answer are on their way: auth_wait, then again */
    AUTH_UNAVAILABLE, /* the authorization server failed and nothing remembered answers: 503 */
};

/* A request waiting for the authorization server (AUTH_PENDING). */
struct auth_wait;
typedef void auth_wake_cb(void *arg);

/* What came from the authorization server, across configurations (for /metrics). */
struct auth_counters {
    uint64_t jwks_fetches;   /* discovery and JWK Set fetches started */
    uint64_t jwks_failures;  /* of those, failed (the last good set stayed) */
    uint64_t jwks_keys;      /* keys in the last fetched set */
    uint64_t introspections; /* RFC 7662 requests sent */
    uint64_t introspection_failures;
    uint64_t waits; /* requests that waited for keys or an introspection */
};
void auth_counters_get(struct auth_counters *out);

/*
 * Loads what cfg->auth's mode needs (nothing for none). NULL with "file: reason" in err when a
 * file cannot be read or holds nothing usable. The result must not outlive cfg.
 */
struct auth *auth_new(const struct config *cfg, char *err, size_t errlen);
void auth_free(struct auth *a);

/*
 * Checks a request to srv carrying the Authorization header value header (NULL when absent). On
 * AUTH_OK *principal is a new reference and *grants says which scopes of srv's tool policy the
 * token grants (none in mode none); otherwise *why names the reason (static storage).
 * now_s is the wall clock (exp, nbf). A JWT that verified is remembered in a cache keyed by its
 * SHA-256 and srv, until its slot is reused.
 */
/*
 * The address of the client the next auth_check is for (the HTTP layer's view: the peer, or the
 * trusted proxy's X-Forwarded-For), NULL when unknown. An opaque token needs an introspection; one
 * client may have at most a quarter of introspection_max_pending of them in flight (at least
 * one), so a client that sends random tokens cannot keep every other client's new tokens from
 * being introspected. The string is copied where it is kept.
 */
void auth_set_client(struct auth *a, const char *client);
enum auth_status auth_check(struct auth *a, const char *header, const struct config_server *srv,
                            int64_t now_s, struct auth_principal **principal,
                            struct policy_grants *grants, const char **why);
/*
 * auth_check, and on AUTH_OK *claims: a new reference to what the token's claims give srv's
 * env_from_claims (NULL when srv has none, and in modes none and bearer).
 */
enum auth_status auth_check_claims(struct auth *a, const char *header,
                                   const struct config_server *srv, int64_t now_s,
                                   struct auth_principal **principal, struct policy_grants *grants,
                                   struct auth_claims **claims, const char **why);

/*
 * After AUTH_PENDING: cb(arg) runs once, from the loop, when what the check waited for came (or
 * failed, or a and its configuration were retired): then call auth_check again, with the current
 * struct auth. The wait is gone by the time cb runs; auth_wait_cancel abandons it before that.
 */
struct auth_wait *auth_wait(struct auth *a, auth_wake_cb *cb, void *arg);
void auth_wait_cancel(struct auth_wait *w);

/*
 * A reload: next takes over prev's fetched JWK Set and discovered URLs when both fetch them from
 * the same issuer, so requests do not wait for keys after SIGHUP. prev keeps the rest.
 */
void auth_adopt(struct auth *next, struct auth *prev);

/* Starts fetching the issuer's keys (discovery, JWK Set) now, so the first request finds them. */
void auth_start(struct auth *a);

/*
 * The token of an "Authorization: Bearer <token>" value (scheme case-insensitive, blanks around
 * the token dropped), and its length; NULL when header is NULL or of another scheme.
 */
const char *auth_bearer_token(const char *header, size_t *len);

/* The resource URI of srv (public_url + path) and its RFC 9728 metadata URL (path-inserted). */
int auth_resource(const struct config_auth *ca, const struct config_server *srv, char *out,
                  size_t size);
int auth_metadata_url(const struct config_auth *ca, const struct config_server *srv, char *out,
                      size_t size);

/*
 * RFC 8693 token exchange (auth_exchange.c), for a server with token_exchange = on: the client's
 * verified token (the subject token) exchanged at the authorization server's token endpoint for
 * one meant for the server's downstream API (its token_exchange_audience, _resource, _scopes).
 * Asynchronous, on the loop, bounded by token_exchange_timeout_ms (plus, the first time, the
 * discovery of the endpoint, bounded by fetch_timeout_ms per document). Nothing here knows
 * sessions or pools: any owner of a child may use it.
 */
enum auth_exchange_status {
    AUTH_EXCHANGE_OK = 0,
    AUTH_EXCHANGE_REFUSED,     /* the authorization server refused (an OAuth error, 4xx): 403 */
    AUTH_EXCHANGE_BAD_ANSWER,  /* it answered with nothing usable (5xx, no access_token): 502 */
    AUTH_EXCHANGE_UNREACHABLE, /* no answer in time, or no token endpoint known: 503 */
};

/* What an exchange gave: owned by whoever the callback gave it to; auth_exchanged_free wipes. */
struct auth_exchanged {
    enum auth_exchange_status status;
    char *token;          /* OK: the issued access token (visible ASCII), a credential */
    size_t len;           /* its length */
    int64_t expires_in_s; /* OK: the answer's expires_in; -1: none given */
    char why[200]; /* not OK: the reason, for logs, audit and the client: never a token's text */
};
void auth_exchanged_free(struct auth_exchanged *x);

struct auth_exchange;
/* Runs once, from the loop, never inside auth_exchange_start; res is the callee's to free. */
typedef void auth_exchange_cb(void *arg, struct auth_exchanged *res);

/*
 * Starts exchanging subject[0..len) for srv (token_exchange = on) with a's [auth] (its CA file,
 * the discovered token endpoint unless srv configures one); subject is copied, and wiped once
 * sent. NULL when it ended at once: *now holds why (not OK). srv must outlive the exchange.
 */
struct auth_exchange *auth_exchange_start(struct auth *a, const struct config_server *srv,
                                          const char *subject, size_t len, auth_exchange_cb *cb,
                                          void *arg, struct auth_exchanged **now);
/* Abandons an exchange whose callback has not run: it never will. NULL does nothing. */
void auth_exchange_cancel(struct auth_exchange *x);

/*
 * An exchanged token held for the children of one owner (auth_held.c): a session's child, or one
 * principal's pool children. Its private directory (0700) holds it in a file (0600) that is
 * rewritten before the token expires, by exchanging the newest subject token seen; every copy is
 * wiped when freed and never logged.
 */
struct auth_held;
struct loop;
/* The owner cannot keep its token (a refused renewal, or none before expiry): why, no secret. */
typedef void auth_held_end_cb(void *arg, const char *why);
struct auth_held_params {
    struct auth *const *a; /* the owner's current [auth] (a reload replaces it); *a NULL: none */
    struct loop *l;        /* the renewal timer's */
    const struct config_server *const *srv; /* the owner's server (kept current by the owner) */
    const char *tag;                        /* the owner, in log lines */
    const char *authorization;              /* the request's Authorization: the first subject */
    auth_held_end_cb *end;                  /* may close the held token */
    void *arg;
};
/* The directory and its file from x's token (x stays the caller's); NULL with *why (a 500). */
struct auth_held *auth_held_open(const struct auth_held_params *hp, const struct auth_exchanged *x,
                                 const char **why);
/* env[0] and env[1] get new "VAR=<newest token>" and "VAR_FILE=<its file>". */
void auth_held_env(const struct auth_held *h, char **env);
/*
 * What a boxed child of h's owner is shown of its own (sandbox_own, sandbox.h), filled into own:
 * h's directory, and the group it reads it through. On a root gateway the first call gives the
 * directory and its file a group of their own (sandbox_group_new: no other child holds it) and
 * opens them to it, 0750 and 0640 (renewals keep it); otherwise they stay the gateway's alone
 * (0700, 0600) and the group is -1. NULL for h NULL (no token held: nothing of its own), or with
 * *failed when the group cannot be set (logged).
 */
struct sandbox_own;
const struct sandbox_own *auth_held_own(struct auth_held *h, struct sandbox_own *own, bool *failed);
/* authorization (a request's header, verified) brings the subject of the next renewal. */
void auth_held_seen(struct auth_held *h, const char *authorization);
/* Arms the first renewal (once the owner's child is up). NULL does nothing. */
void auth_held_start(struct auth_held *h);
/* The renewal stopped, the token wiped, the file and its directory removed. NULL does nothing. */
void auth_held_close(struct auth_held *h);

struct auth_principal *auth_principal_ref(struct auth_principal *p);
void auth_principal_unref(struct auth_principal *p);

/*
 * Takes one request from p's bucket (rate_limit_per_s, rate_limit_burst). False when empty, with
 * the wait until the next token in *retry_ms. Always true when the rate limit is off.
 */
bool auth_rate_take(struct auth_principal *p, const struct config_auth *ca, uint64_t now_ms,
                    uint64_t *retry_ms);

/* Forgets principals nobody references whose bucket is full again (the janitor tick). */
void auth_sweep(const struct config_auth *ca, uint64_t now_ms);
size_t auth_principal_count(void);
/* Frees every principal; references still held become invalid (shutdown only). */
void auth_module_free(void);

#endif
