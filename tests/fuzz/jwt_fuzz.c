/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: JWT and JWKS parsing in auth.c. The first byte picks what the rest is:
 *   0: a JWK Set file (auth_new loads it, then it checks one fixed token);
 *   1: a raw Authorization header value after "Bearer ";
 *   2: "HEADER\nCLAIMS": both base64url-encoded and signed with the target's own Ed25519 key, whose
 *      public half is in the JWKS, so the claim checks behind a valid signature are reached too.
 * Invariants: a token is accepted only with the exact issuer, audience and an unexpired exp the
 * target can read back from its own claims (mode 2), and an accepted token always names a
 * principal; nothing leaks (principals are swept after each input).
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "auth.h"
#include "fuzz.h"
#include "fuzz_auth.h"
#include "log.h"
#include "util.h"

#define ISSUER     FUZZ_ISSUER
#define PUBLIC_URL FUZZ_PUBLIC_URL
#define NOW_S      FUZZ_NOW_S

static struct {
    EVP_PKEY *key;
    struct config cfg;
    struct config_server srv[2];
    struct auth *auth;
    char jwks_path[64];
} F;

static struct policy_grants grants;

/* A memfd holding text, reachable by path as /proc/self/fd/N; -1 on failure. */
static int
fuzz_memfile(const void *text, size_t n, char *path, size_t pathlen)
{
    int fd = memfd_create("fuzz", 0);
    /* memfd files are 0777; the gateway refuses files others may write. */
    if (fd != -1 && fchmod(fd, 0600) == -1)
        abort();
    if (fd == -1)
        return -1;
    if (write(fd, text, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_init(LOG_ERROR, LOG_FORMAT_TEXT); /* skipped JWKS keys would log on every input */
    F.key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    unsigned char pub[32];
    size_t publen = sizeof(pub);
    if (F.key == NULL || EVP_PKEY_get_raw_public_key(F.key, pub, &publen) != 1)
        abort();
    char x[64], jwks[256];
    util_base64url_encode(pub, publen, x);
    snprintf(jwks, sizeof(jwks),
             "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"k1\",\"x\":\"%s\"}]}", x);
    if (fuzz_memfile(jwks, strlen(jwks), F.jwks_path, sizeof(F.jwks_path)) == -1)
        abort();
    fuzz_auth_config(&F.cfg, F.srv);
    F.cfg.auth.jwks_file = F.jwks_path;
    char err[256];
    F.auth = auth_new(&F.cfg, err, sizeof(err));
    if (F.auth == NULL) {
        fprintf(stderr, "jwt_fuzz: %s\n", err);
        abort();
    }
    return 0;
}

/* Checks header (a NUL-terminated "Bearer ..." value) against both servers. */
static void
check_token(const char *header, bool *accepted)
{
    for (int i = 0; i < 2; i++) {
        struct auth_principal *p = NULL;
        const char *why = NULL;
        enum auth_status st = auth_check(F.auth, header, &F.srv[i], NOW_S, &p, &grants, &why);
        FUZZ_CHECK((st == AUTH_OK) == (p != NULL), "principal iff accepted (status %d)", (int)st);
        FUZZ_CHECK(st == AUTH_OK || why != NULL, "a refusal has a reason");
        if (p != NULL) {
            FUZZ_CHECK(p->name[0] != '\0', "an accepted token names a principal");
            auth_principal_unref(p);
        }
        accepted[i] = st == AUTH_OK;
    }
}

/* Mode 2: what the claims say, read independently with jansson, must allow what auth allowed. */
static void
check_claims_agree(const char *claims, size_t n, const bool *accepted)
{
    json_t *c = json_loadb(claims, n, JSON_REJECT_DUPLICATES, NULL);
    const char *aud_want[2] = { PUBLIC_URL "/mcp", PUBLIC_URL "/scoped" };
    for (int i = 0; i < 2; i++) {
        if (!accepted[i])
            continue;
        FUZZ_CHECK(json_is_object(c), "accepted claims that jansson does not read as an object");
        const char *iss = json_string_value(json_object_get(c, "iss"));
        FUZZ_CHECK(iss != NULL && strcmp(iss, ISSUER) == 0, "accepted a foreign issuer");
        json_t *exp = json_object_get(c, "exp");
        FUZZ_CHECK(json_is_number(exp) && json_number_value(exp) >= NOW_S - 60,
                   "accepted an expired token");
        json_t *aud = json_object_get(c, "aud");
        bool aud_ok = json_is_string(aud) && strcmp(json_string_value(aud), aud_want[i]) == 0;
        for (size_t k = 0; json_is_array(aud) && k < json_array_size(aud); k++)
            aud_ok = aud_ok
                     || (json_is_string(json_array_get(aud, k))
                         && strcmp(json_string_value(json_array_get(aud, k)), aud_want[i]) == 0);
        FUZZ_CHECK(aud_ok, "accepted a token for another audience");
    }
    json_decref(c);
}

static void
fuzz_signed(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (nl == NULL || size > 8192)
        return;
    size_t hlen = (size_t)(nl - data), clen = size - hlen - 1;
    char *tok = malloc(32 + (size + 64) * 4 / 3 + 128);
    size_t o = (size_t)sprintf(tok, "Bearer ");
    size_t start = o;
    o += util_base64url_encode(data, hlen, tok + o);
    tok[o++] = '.';
    o += util_base64url_encode(nl + 1, clen, tok + o);
    unsigned char sig[64];
    size_t siglen = sizeof(sig);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestSignInit(md, NULL, NULL, NULL, F.key) != 1
        || EVP_DigestSign(md, sig, &siglen, (const unsigned char *)tok + start, o - start) != 1)
        abort();
    EVP_MD_CTX_free(md);
    tok[o++] = '.';
    util_base64url_encode(sig, siglen, tok + o);
    bool accepted[2];
    check_token(tok, accepted);
    check_claims_agree((const char *)nl + 1, clen, accepted);
    if (getenv("JWT_FUZZ_VERBOSE") != NULL) /* shows that seeds reach the claim checks */
        fprintf(stderr, "jwt_fuzz: signed token accepted for /mcp: %d, for /scoped: %d\n",
                accepted[0], accepted[1]);
    free(tok);
}

static void
fuzz_jwks(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof(path));
    if (fd == -1)
        return;
    struct config cfg = F.cfg;
    cfg.auth.jwks_file = path;
    char err[256] = "";
    struct auth *a = auth_new(&cfg, err, sizeof(err));
    FUZZ_CHECK(a != NULL || err[0] != '\0', "a refused JWKS has a reason");
    if (a != NULL) {
        struct auth_principal *p = NULL;
        const char *why;
        if (auth_check(a, "Bearer e30.e30.AAAA", &F.srv[0], NOW_S, &p, &grants, &why) == AUTH_OK)
            FUZZ_CHECK(false, "an unsigned token passed a fuzzed JWKS");
        auth_free(a);
    }
    close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (F.auth == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_jwks(data + 1, size - 1);
        break;
    case 1: {
        char *h = malloc(size + 8);
        memcpy(h, "Bearer ", 7);
        memcpy(h + 7, data + 1, size - 1);
        h[size + 6] = '\0';
        bool accepted[2];
        check_token(h, accepted);
        free(h);
        break;
    }
    default:
        fuzz_signed(data + 1, size - 1);
        break;
    }
    auth_sweep(&F.cfg.auth, 0);
    return 0;
}
