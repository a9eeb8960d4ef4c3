/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: what the authorization server sends (auth.c, auth_remote.c). The first byte picks
 * what the rest is:
 *   0: a fetched JWK Set (auth_keyset_parse, as auth_remote.c calls it on every fetch);
 *   1: an RFC 7662 introspection answer, judged for a token presented to two servers
 *      (auth_judge_introspection: the path of an answer that came over HTTPS).
 * Invariants: a parsed set holds 1..AUTH_KEYS_MAX keys and a refused one none, with a reason; an
 * accepted introspection answer is, read independently with jansson, an object with "active":
 * true, the server's resource in "aud", no past exp, the configured iss when it has one, and it
 * names a principal; nothing leaks.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "fuzz_auth.h"
#include "log.h"
#include "src/auth/auth_int.h"

#define ISSUER     FUZZ_ISSUER
#define PUBLIC_URL FUZZ_PUBLIC_URL
#define NOW_S      FUZZ_NOW_S

static struct {
    struct config cfg;
    struct config_server srv[2];
    struct auth *auth;
} F;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_init(LOG_ERROR, LOG_FORMAT_TEXT);
    fuzz_auth_config(&F.cfg, F.srv);
    char err[256];
    /* No jwks_file and no credentials: keys would come from discovery, never fetched here. */
    F.auth = auth_new(&F.cfg, err, sizeof(err));
    if (F.auth == NULL) {
        fprintf(stderr, "authsrv_fuzz: %s\n", err);
        abort();
    }
    return 0;
}

static void
fuzz_keyset(const uint8_t *data, size_t size)
{
    struct auth_keyset ks = { .n = 0 };
    size_t skipped = 0;
    char err[256] = "";
    int rc = auth_keyset_parse(&ks, (const char *)data, size, &skipped, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -1, "auth_keyset_parse returned %d", rc);
    if (rc == 0) {
        FUZZ_CHECK(ks.n >= 1 && ks.n <= AUTH_KEYS_MAX, "a parsed set of %zu keys", ks.n);
        for (size_t i = 0; i < ks.n; i++)
            FUZZ_CHECK(ks.k[i].key != NULL, "key %zu of a parsed set is NULL", i);
    } else {
        FUZZ_CHECK(ks.n == 0, "a refused set kept %zu keys", ks.n);
        FUZZ_CHECK(err[0] != '\0', "a refused set has a reason");
    }
    auth_keyset_clear(&ks);
}

/* "aud" (a string or an array of strings) names want. */
static bool
aud_names(json_t *aud, const char *want)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    for (size_t k = 0; json_is_array(aud) && k < json_array_size(aud); k++)
        if (json_is_string(json_array_get(aud, k))
            && strcmp(json_string_value(json_array_get(aud, k)), want) == 0)
            return true;
    return false;
}

static void
fuzz_introspection(const uint8_t *data, size_t size)
{
    const char *aud_want[2] = { PUBLIC_URL "/mcp", PUBLIC_URL "/scoped" };
    for (int i = 0; i < 2; i++) {
        struct auth_principal *p = NULL;
        const char *why = NULL;
        enum auth_status st =
            auth_judge_introspection(F.auth, (const char *)data, size, &F.srv[i], NOW_S, &p, &why);
        FUZZ_CHECK((st == AUTH_OK) == (p != NULL), "principal iff accepted (status %d)", (int)st);
        FUZZ_CHECK(st == AUTH_OK || why != NULL, "a refusal has a reason");
        if (st != AUTH_OK)
            continue;
        FUZZ_CHECK(p->name[0] != '\0', "an accepted answer names a principal");
        auth_principal_unref(p);
        json_t *c = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
        FUZZ_CHECK(json_is_object(c), "accepted an answer jansson does not read as an object");
        FUZZ_CHECK(json_is_true(json_object_get(c, "active")), "accepted an inactive token");
        json_t *exp = json_object_get(c, "exp"), *iss = json_object_get(c, "iss");
        FUZZ_CHECK(exp == NULL || (json_is_number(exp) && json_number_value(exp) >= NOW_S - 60),
                   "accepted an expired token");
        FUZZ_CHECK(iss == NULL
                       || (json_is_string(iss) && strcmp(json_string_value(iss), ISSUER) == 0),
                   "accepted a foreign issuer");
        FUZZ_CHECK(aud_names(json_object_get(c, "aud"), aud_want[i]),
                   "accepted a token for another audience");
        json_decref(c);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (F.auth == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size == 0 || size > 65536)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_keyset(data + 1, size - 1);
    else
        fuzz_introspection(data + 1, size - 1);
    auth_sweep(&F.cfg.auth, 0);
    return 0;
}
