/* SPDX-License-Identifier: MIT */
/*
 * Inside the auth module: auth.c (files, principals, checking a request), auth_remote.c (what
 * comes from the authorization server over HTTPS: discovery, the JWK Set, introspection),
 * auth_claims.c (what a token's claims give a session's child: env_from_claims) and
 * auth_exchange.c (RFC 8693: a client's token exchanged for a session's child).
 */
#ifndef MCPGW_AUTH_INT_H
#define MCPGW_AUTH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "crypto.h"
#include "jsonrpc.h"

#define AUTH_KEYS_MAX 64            /* keys kept from a JWK Set */
#define AUTH_FILE_MAX (1024 * 1024) /* tokens_file, jwks_file, or a fetched JWK Set */

struct auth_jwk {
    char *kid; /* NULL: none */
    struct crypto_key *key;
};

/* The verification keys of one JWK Set. */
struct auth_keyset {
    struct auth_jwk k[AUTH_KEYS_MAX];
    size_t n;
};

/*
 * Fills ks (empty) from the JWK Set text[0..len): RS256, ES256 and EdDSA public keys; keys of
 * other types or uses are counted in *skipped. -1 with the reason in err ("keys[2] ...") when one
 * is malformed, weak or private, when there are too many, or when none is usable; ks is then
 * empty.
 */
int auth_keyset_parse(struct auth_keyset *ks, const char *text, size_t len, size_t *skipped,
                      char *err, size_t errlen);
void auth_keyset_clear(struct auth_keyset *ks);

/* The whole file (at most AUTH_FILE_MAX), NUL-terminated, or NULL with the reason in err. A file
 * others may write (or, secret, read) is refused. */
char *auth_slurp(const char *path, bool secret, size_t *len, char *err, size_t errlen);
int auth_fail(char *err, size_t errlen, const char *fmt, ...) PRINTF(3, 4);

/* --- auth_remote.c ------------------------------------------------------------------------ */

struct auth_remote;

/*
 * What [auth] fetches (mode jwt): the JWK Set unless jwks_file is set, and introspection when
 * introspection_credentials_file is. *r is NULL when nothing is fetched. -1 with err when the
 * credentials file cannot be read. Nothing is fetched until auth_remote_start or the first check.
 */
int auth_remote_new(const struct config_auth *ca, struct auth_remote **r, char *err, size_t errlen);
/* Cancels what is in flight and wakes every waiter (they check again, with the next struct auth).
 */
void auth_remote_free(struct auth_remote *r);
/* next takes prev's keys and discovered URLs when both have the same issuer and sources. */
void auth_remote_adopt(struct auth_remote *next, struct auth_remote *prev);
/* Starts discovery and the key fetch now, so the first request finds keys. */
void auth_remote_start(struct auth_remote *r);
bool auth_remote_has_keys(const struct auth_remote *r);
bool auth_remote_introspects(const struct auth_remote *r);

/*
 * The keys to verify with. AUTH_OK with *ks (a set past its cache time is still used while a
 * refetch runs); AUTH_PENDING while the first set is on its way; AUTH_UNAVAILABLE when there is
 * none and the last attempt failed less than jwks_refetch_interval_ms ago.
 */
enum auth_status auth_remote_keys(struct auth_remote *r, uint64_t now_ms,
                                  const struct auth_keyset **ks);
/*
 * A token names a kid the set lacks: AUTH_PENDING when a refetch runs (started now, or already);
 * AUTH_OK when none may start (the last was less than jwks_refetch_interval_ms ago): judge with
 * the keys there are.
 */
enum auth_status auth_remote_unknown_kid(struct auth_remote *r, uint64_t now_ms);

/*
 * The introspection answer for the token (hash is its SHA-256). AUTH_OK with *answer (owned by r,
 * valid until the loop runs again) and *until_ms, the end of its reuse; AUTH_PENDING while it is
 * on its way (this call may have sent it); AUTH_UNAVAILABLE when the endpoint failed lately, or
 * introspection_max_pending are in flight, or a quarter of them (at least one) for client (the
 * asking client's address; NULL: unknown), with *why said.
 */
enum auth_status auth_remote_introspect(struct auth_remote *r, const char *tok, size_t len,
                                        const unsigned char *hash, const char *client,
                                        uint64_t now_ms, const struct jsonrpc_doc **answer,
                                        uint64_t *until_ms, const char **why);

/* An introspection answer's shape: a JSON object with "active"; NULL with *why otherwise. */
struct jsonrpc_doc *auth_intro_parse(const char *body, size_t len, const char **why);

/*
 * Judges body as the introspection answer for a token presented to srv, as a request would
 * (shape, active, exp, nbf, iss, aud, scopes, principal): the fuzz target and unit tests' way in,
 * with no network. AUTH_UNAVAILABLE for a body that is not an answer at all.
 */
enum auth_status auth_judge_introspection(struct auth *a, const char *body, size_t len,
                                          const struct config_server *srv, int64_t now_s,
                                          struct auth_principal **principal, const char **why);

struct auth_wait *auth_remote_wait(struct auth_remote *r, auth_wake_cb *cb, void *arg);

/*
 * The token endpoint discovered for token_exchange: AUTH_OK with *url (owned by r); AUTH_PENDING
 * while discovery runs (this call may have started it); AUTH_UNAVAILABLE when it failed lately,
 * the metadata names none, or nothing is discovered (r NULL).
 */
enum auth_status auth_remote_token_endpoint(struct auth_remote *r, uint64_t now_ms,
                                            const char **url);
/* The same without starting anything (a waiter woken): the URL or NULL, and whether discovery
 * still runs. */
const char *auth_remote_token_uri(const struct auth_remote *r, bool *running);
/* What auth_exchange.c needs of a struct auth: its [auth] and its remote state (NULL: none). */
const struct config_auth *auth_parts(struct auth *a, struct auth_remote **r);
/*
 * auth_exchange.c: the answer of a token endpoint that answered (any status) judged into a result
 * (the unit tests' way in, with no network): OK with the access_token and expires_in, REFUSED for
 * 400/401/403 naming an OAuth error code, BAD_ANSWER for anything else.
 */
struct fetch_result;
struct auth_exchanged *auth_exchange_judge(const struct fetch_result *res);
/* s[0..n) as an application/x-www-form-urlencoded value into out (room for 3n + 1), its length. */
size_t auth_form_escape(const char *s, size_t n, char *out);

/* auth_claims.c: what verified claims c give srv's env_from_claims: every variable, or the first
 * one that cannot be set (its why). */
struct auth_claims *auth_claims_new(const struct config_server *srv, const struct jsonrpc_doc *c);

#endif
