/* SPDX-License-Identifier: MIT */
/*
 * auth: the tokens file, the JWKS loader, bearer and JWT checks, principals and their
 * token buckets. Signed-token cases with generated RSA, P-256 and Ed25519 keys, and every refusal
 * the issue lists, are in tests/integration/auth.test.mjs; here the JWS check is pinned to the
 * Ed25519 example of RFC 8037 appendix A.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "auth.h"
#include "crypto.h"
#include "fetch.h"
#include "policy.h"
#include "src/auth/auth_int.h"

TestSuite(auth, .timeout = 30);

/* RFC 8037 A.1 public key and the A.4 JWS over "Example of Ed25519 signing". */
#define RFC8037_X "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
#define RFC8037_JWS                                                                               \
    "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcv" \
    "Mg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"

static char tmpdir_path[64];
static struct policy_grants grants; /* what auth_check says the token grants */

static const char *
write_file(const char *name, const char *text)
{
    static char path[128];
    if (tmpdir_path[0] == '\0') {
        snprintf(tmpdir_path, sizeof tmpdir_path, "/tmp/test_auth.XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir_path));
    }
    snprintf(path, sizeof path, "%s/%s", tmpdir_path, name);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs(text, fp);
    fclose(fp);
    return path;
}

static void
cleanup(void)
{
    if (tmpdir_path[0] != '\0') {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir_path);
        cr_expect_eq(system(cmd), 0);
    }
    auth_module_free();
}

static char scope_tools[] = "mcp:tools", name_a[] = "a", path_mcp[] = "/mcp";
static char public_url[] = "https://mcp.example.com", issuer[] = "https://idp.example.com";
static char file_path[256];
static char *scopes_none[] = { NULL };
static char *scopes_tools[] = { scope_tools, NULL };

static struct config_server
server(char **scopes)
{
    struct config_server s = { 0 };
    s.name = name_a;
    s.path = path_mcp;
    s.required_scopes = scopes;
    return s;
}

static void
config_mode(struct config *cfg, enum config_auth_mode mode, const char *file)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->auth.mode = mode;
    cfg->auth.public_url = public_url;
    cfg->auth.issuer = issuer;
    cfg->auth.clock_skew_s = 60;
    cfg->auth.rate_limit_burst = 100;
    snprintf(file_path, sizeof file_path, "%s", file ? file : "");
    if (mode == CONFIG_AUTH_BEARER)
        cfg->auth.tokens_file = file_path;
    else
        cfg->auth.jwks_file = file_path;
}

Test(auth, mode_none_is_the_anonymous_principal, .fini = cleanup)
{
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_NONE, NULL);
    struct auth *a = auth_new(&cfg, NULL, 0);
    cr_assert_not_null(a);
    struct config_server s = server(scopes_tools);
    struct auth_principal *p1, *p2;
    const char *why;
    cr_assert_eq(auth_check(a, NULL, &s, 0, &p1, &grants, &why), AUTH_OK);
    cr_assert_eq(auth_check(a, "Bearer whatever", &s, 0, &p2, &grants, &why), AUTH_OK);
    cr_assert_eq(p1, p2, "one interned principal");
    cr_assert_str_eq(p1->name, "anonymous");
    cr_assert_eq(p1->refs, 2);
    auth_principal_unref(p1);
    auth_principal_unref(p2);
    auth_free(a);
}

/* sha256("s3cret-token-1") and sha256("other") in hex, computed with crypto_sha256. */
static void
hex_hash(const char *token, char out[65])
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(token, strlen(token), h);
    for (int i = 0; i < CRYPTO_SHA256_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

Test(auth, bearer_tokens_file, .fini = cleanup)
{
    char h1[65], h2[65], text[512];
    hex_hash("s3cret-token-1", h1);
    hex_hash("token-two", h2);
    snprintf(text, sizeof text, "# comment\n\n  sha256:%s alice mcp:tools other\r\nsha256:%s bob\n",
             h1, h2);
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_BEARER, write_file("tokens", text));
    char err[256] = "";
    struct auth *a = auth_new(&cfg, err, sizeof err);
    cr_assert_not_null(a, "%s", err);
    struct config_server plain = server(scopes_none), scoped = server(scopes_tools);
    struct auth_principal *p = NULL;
    const char *why;
    cr_assert_eq(auth_check(a, "Bearer s3cret-token-1", &scoped, 0, &p, &grants, &why), AUTH_OK);
    cr_assert_str_eq(p->name, "alice");
    auth_principal_unref(p);
    cr_assert_eq(auth_check(a, "bearer   s3cret-token-1  ", &plain, 0, &p, &grants, &why), AUTH_OK,
                 "scheme case-insensitive, blanks around the token");
    auth_principal_unref(p);
    cr_assert_eq(auth_check(a, "Bearer token-two", &plain, 0, &p, &grants, &why), AUTH_OK);
    cr_assert_str_eq(p->name, "bob");
    auth_principal_unref(p);
    p = NULL;
    cr_assert_eq(auth_check(a, "Bearer token-two", &scoped, 0, &p, &grants, &why), AUTH_SCOPE);
    cr_assert_null(p);
    cr_assert_eq(auth_check(a, "Bearer s3cret-token-2", &plain, 0, &p, &grants, &why),
                 AUTH_INVALID);
    cr_assert_str_eq(why, "unknown token");
    cr_assert_eq(auth_check(a, NULL, &plain, 0, &p, &grants, &why), AUTH_MISSING);
    cr_assert_eq(auth_check(a, "Basic YTpi", &plain, 0, &p, &grants, &why), AUTH_MISSING);
    cr_assert_eq(auth_check(a, "Bearer ", &plain, 0, &p, &grants, &why), AUTH_MISSING);
    auth_free(a);
}

/* The token's scopes reach the caller as the bits of the server's tool policy (policy.h). */
Test(auth, bearer_grants_for_the_tool_policy, .fini = cleanup)
{
    char h1[65], h2[65], text[512];
    hex_hash("s3cret-token-1", h1);
    hex_hash("token-two", h2);
    snprintf(text, sizeof text, "sha256:%s alice mcp:tools other\nsha256:%s bob\n", h1, h2);
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_BEARER, write_file("tokens", text));
    char err[256] = "";
    struct auth *a = auth_new(&cfg, err, sizeof err);
    cr_assert_not_null(a, "%s", err);
    struct config_server srv = server(scopes_none);
    srv.policy = policy_new("a");
    const char *bad, *w;
    cr_assert_eq(policy_add(srv.policy, POLICY_SCOPES,
                            (const char *[]){ "w*:nothing", "x*:other+mcp:tools", NULL }, &bad, &w),
                 0);
    struct auth_principal *p = NULL;
    const char *why, *scope = NULL;
    cr_assert_eq(auth_check(a, "Bearer s3cret-token-1", &srv, 0, &p, &grants, &why), AUTH_OK);
    cr_assert_eq(grants.of, srv.policy);
    cr_assert_eq(grants.bits, 0x6, "other and mcp:tools, not nothing");
    cr_assert_eq(policy_judge(srv.policy, grants.bits, "xray", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(srv.policy, grants.bits, "wave", &scope), POLICY_NO_SCOPE);
    auth_principal_unref(p);
    cr_assert_eq(auth_check(a, "Bearer token-two", &srv, 0, &p, &grants, &why), AUTH_OK);
    cr_assert_eq(grants.bits, 0);
    auth_principal_unref(p);
    struct config_server open = server(scopes_none);
    cr_assert_eq(auth_check(a, "Bearer s3cret-token-1", &open, 0, &p, &grants, &why), AUTH_OK);
    cr_assert_null(grants.of, "no policy: nothing to number");
    cr_assert_eq(grants.bits, 0);
    auth_principal_unref(p);
    auth_free(a);
    policy_free(srv.policy);
}

static void
tokens_err(const char *text, const char *want_suffix)
{
    struct config cfg;
    const char *path = write_file("bad", text);
    config_mode(&cfg, CONFIG_AUTH_BEARER, path);
    char err[256] = "", want[300];
    cr_assert_null(auth_new(&cfg, err, sizeof err), "accepted: %s", text);
    snprintf(want, sizeof want, "%s%s", path, want_suffix);
    cr_assert_str_eq(err, want);
}

Test(auth, bearer_tokens_file_errors, .fini = cleanup)
{
    char h[65], dup[300];
    hex_hash("x", h);
    tokens_err("sha1:abcd alice\n", ":1: expected sha256:<64 hex digits> PRINCIPAL [SCOPE ...]");
    tokens_err("\nsha256:zz00000000000000000000000000000000000000000000000000000000000000 a\n",
               ":2: the hash must be 64 hex digits");
    snprintf(dup, sizeof dup, "sha256:%s\n", h);
    tokens_err(dup, ":1: a principal name (1..256 characters) must follow the hash");
    snprintf(dup, sizeof dup, "sha256:%s a\nsha256:%s b\n", h, h);
    tokens_err(dup, ":2: the same token hash is listed twice");
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_BEARER, "/nonexistent/tokens");
    char err[256];
    cr_assert_null(auth_new(&cfg, err, sizeof err));
    cr_assert_str_eq(err, "/nonexistent/tokens: cannot open: No such file or directory");
}

static struct auth *
jwks_auth(struct config *cfg, const char *jwks, char *err, size_t errlen)
{
    config_mode(cfg, CONFIG_AUTH_JWT, write_file("jwks.json", jwks));
    return auth_new(cfg, err, errlen);
}

Test(auth, jwks_loading, .fini = cleanup)
{
    struct config cfg;
    char err[256] = "";
    struct auth *a =
        jwks_auth(&cfg,
                  "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC8037_X
                  "\"},{\"kty\":\"oct\",\"k\":\"AAAA\"},"
                  "{\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"" RFC8037_X "\"},"
                  "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"use\":\"enc\",\"x\":\"" RFC8037_X "\"}]}",
                  err, sizeof err);
    cr_assert_not_null(a, "%s", err);
    auth_free(a);
    cr_assert_null(
        jwks_auth(&cfg, "{\"keys\":[{\"kty\":\"oct\",\"k\":\"AAAA\"}]}", err, sizeof err));
    cr_assert(strstr(err, "no RS256, ES256 or EdDSA signing key") != NULL, "%s", err);
    cr_assert_null(jwks_auth(&cfg,
                             "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC8037_X
                             "\",\"d\":\"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\"}]}",
                             err, sizeof err));
    cr_assert(strstr(err, "keys[0] holds a private key") != NULL, "%s", err);
    cr_assert_null(jwks_auth(&cfg,
                             "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"" RFC8037_X
                             "\",\"y\":\"" RFC8037_X "\"}]}",
                             err, sizeof err));
    cr_assert(strstr(err, "keys[0] not a point on P-256") != NULL, "%s", err);
    cr_assert_null(jwks_auth(&cfg, "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}",
                             err, sizeof err));
    cr_assert(strstr(err, "keys[0] RSA keys must have at least 2048 bits") != NULL, "%s", err);
    cr_assert_null(jwks_auth(&cfg, "[1]", err, sizeof err));
    cr_assert(strstr(err, "not a JSON object") != NULL, "%s", err);
    cr_assert_null(
        jwks_auth(&cfg, "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\"}]}", err, sizeof err));
    cr_assert(strstr(err, "a key part is missing or not base64url") != NULL, "%s", err);
}

Test(auth, jws_signature_of_rfc8037, .fini = cleanup)
{
    struct config cfg;
    char err[256] = "";
    struct auth *a = jwks_auth(
        &cfg, "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC8037_X "\"}]}", err,
        sizeof err);
    cr_assert_not_null(a, "%s", err);
    struct config_server s = server(scopes_none);
    struct auth_principal *p = NULL;
    const char *why;
    /* The signature verifies; its payload is text, not claims. */
    cr_assert_eq(auth_check(a, "Bearer " RFC8037_JWS, &s, 0, &p, &grants, &why), AUTH_INVALID);
    cr_assert_str_eq(why, "the token's claims are not a JSON object");
    char tampered[] = "Bearer " RFC8037_JWS;
    cr_assert_eq(tampered[strlen(tampered) - 3], 'K');
    tampered[strlen(tampered) - 3] ^= 1; /* 'K' <-> 'J': another signature */
    cr_assert_eq(auth_check(a, tampered, &s, 0, &p, &grants, &why), AUTH_INVALID);
    cr_assert_str_eq(why, "the token's signature does not verify with any key of jwks_file");
    cr_assert_eq(auth_check(a, "Bearer eyJhbGciOiJub25lIn0.e30.", &s, 0, &p, &grants, &why),
                 AUTH_INVALID);
    cr_assert_str_eq(why, "the token's alg is not RS256, ES256 or EdDSA");
    cr_assert_eq(auth_check(a, "Bearer a.b", &s, 0, &p, &grants, &why), AUTH_INVALID);
    cr_assert_str_eq(why, "not a JWS compact token");
    cr_assert_eq(auth_check(a, "Bearer a.b.c.d", &s, 0, &p, &grants, &why), AUTH_INVALID);
    cr_assert_null(p);
    auth_free(a);
}

Test(auth, principals_and_buckets, .fini = cleanup)
{
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_NONE, NULL);
    cfg.auth.rate_limit_per_s = 10;
    cfg.auth.rate_limit_burst = 3;
    struct auth *a = auth_new(&cfg, NULL, 0);
    struct config_server s = server(scopes_none);
    struct auth_principal *p;
    const char *why;
    cr_assert_eq(auth_check(a, NULL, &s, 0, &p, &grants, &why), AUTH_OK);
    uint64_t retry = 0, t = 1000;
    for (int i = 0; i < 3; i++)
        cr_assert(auth_rate_take(p, &cfg.auth, t, &retry), "burst request %d", i);
    cr_assert_not(auth_rate_take(p, &cfg.auth, t, &retry));
    cr_assert_eq(retry, 101, "one token per 100 ms, rounded up");
    cr_assert_not(auth_rate_take(p, &cfg.auth, t + 99, &retry));
    cr_assert(auth_rate_take(p, &cfg.auth, t + 100, &retry));
    /* Referenced: never swept. Unreferenced: swept only once the bucket is full again. */
    auth_sweep(&cfg.auth, t + 100000);
    cr_assert_eq(auth_principal_count(), 1);
    auth_principal_unref(p);
    cr_assert(auth_rate_take(p, &cfg.auth, t + 100000, &retry));
    auth_sweep(&cfg.auth, t + 100000);
    cr_assert_eq(auth_principal_count(), 1, "a partly used bucket keeps its principal");
    auth_sweep(&cfg.auth, t + 100100);
    cr_assert_eq(auth_principal_count(), 0);
    cfg.auth.rate_limit_per_s = 0;
    cr_assert_eq(auth_check(a, NULL, &s, 0, &p, &grants, &why), AUTH_OK);
    for (int i = 0; i < 1000; i++)
        cr_assert(auth_rate_take(p, &cfg.auth, t, &retry), "no limit when rate_limit_per_s = 0");
    auth_principal_unref(p);
    auth_free(a);
}

Test(auth, resource_and_metadata_urls, .fini = cleanup)
{
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_JWT, "x");
    struct config_server s = server(scopes_none);
    char out[256];
    cr_assert_eq(auth_resource(&cfg.auth, &s, out, sizeof out), 0);
    cr_assert_str_eq(out, "https://mcp.example.com/mcp");
    cr_assert_eq(auth_metadata_url(&cfg.auth, &s, out, sizeof out), 0);
    cr_assert_str_eq(out, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
    cr_assert_eq(auth_resource(&cfg.auth, &s, out, 10), -1, "too small a buffer");
}

/* An RSA key with e = 1 verifies any "signature" equal to its message: refused. */
Test(auth, rsa_weak_exponent_refused, .fini = cleanup)
{
    unsigned char n[256];
    memset(n, 0xa5, sizeof(n));
    n[0] = 0xc3; /* 2048 bits */
    n[255] |= 1;
    const unsigned char e1[] = { 1 }, e2[] = { 2 }, e3[] = { 3 }, e65537[] = { 1, 0, 1 };
    const char *why = NULL;
    cr_expect_null(crypto_key_rsa(n, sizeof(n), e1, 1, &why));
    cr_expect(why != NULL && strstr(why, "exponent") != NULL, "%s", why ? why : "(null)");
    why = NULL;
    cr_expect_null(crypto_key_rsa(n, sizeof(n), e2, 1, &why), "an even exponent");
    struct crypto_key *k = crypto_key_rsa(n, sizeof(n), e3, 1, &why);
    cr_expect_not_null(k, "e = 3 is odd and allowed: %s", why ? why : "");
    crypto_key_free(k);
    k = crypto_key_rsa(n, sizeof(n), e65537, 3, &why);
    cr_expect_not_null(k, "e = 65537: %s", why ? why : "");
    crypto_key_free(k);
}

/*
 * RFC 7662 answers as the introspection endpoint would send them, judged for /mcp (the network
 * part is in tests/integration/oauth.test.mjs): active, audience, expiry, issuer, principal.
 */
Test(auth, introspection_answers, .fini = cleanup)
{
    struct config cfg;
    config_mode(&cfg, CONFIG_AUTH_JWT, NULL);
    cfg.auth.jwks_file = NULL; /* keys from discovery: nothing loaded, nothing fetched here */
    char err[256];
    struct auth *a = auth_new(&cfg, err, sizeof(err));
    cr_assert_not_null(a, "%s", err);
    struct config_server srv = server(scopes_tools);
    int64_t now = 1800000000;
    struct {
        const char *answer;
        enum auth_status want;
        const char *principal_or_why;
    } cases[] = {
        { "{\"active\":true,\"client_id\":\"cli\",\"scope\":\"mcp:tools\",\"exp\":1800000600,"
          "\"iss\":\"https://idp.example.com\",\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_OK, "client_id:cli" },
        { "{\"active\":true,\"sub\":\"alice\",\"client_id\":\"cli\",\"scope\":\"x mcp:tools\","
          "\"aud\":[\"https://other.example/mcp\",\"https://mcp.example.com/mcp\"]}",
          AUTH_OK, "sub:alice" },
        { "{\"active\":true,\"username\":\"bob\",\"scope\":\"mcp:tools\","
          "\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_OK, "username:bob" },
        { "{\"active\":false}", AUTH_INVALID, "the token is not active (introspection)" },
        { "{\"active\":\"true\",\"sub\":\"a\",\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_INVALID, "the token is not active (introspection)" },
        { "{\"active\":true,\"sub\":\"a\",\"scope\":\"mcp:tools\",\"aud\":\"https://other/mcp\"}",
          AUTH_INVALID, "the token's audience is not this server" },
        { "{\"active\":true,\"sub\":\"a\",\"scope\":\"mcp:tools\"}", AUTH_INVALID,
          "the token's audience is not this server" },
        { "{\"active\":true,\"sub\":\"a\",\"scope\":\"mcp:tools\",\"exp\":1799990000,"
          "\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_INVALID, "the token has expired" },
        { "{\"active\":true,\"sub\":\"a\",\"scope\":\"mcp:tools\",\"iss\":\"https://evil\","
          "\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_INVALID, "the token's issuer is not the configured issuer" },
        { "{\"active\":true,\"sub\":\"a\",\"scope\":\"other\","
          "\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_SCOPE, "the token lacks a required scope" },
        { "{\"active\":true,\"scope\":\"mcp:tools\",\"aud\":\"https://mcp.example.com/mcp\"}",
          AUTH_INVALID, "the token has no sub (1..256 bytes)" },
        { "[1]", AUTH_UNAVAILABLE, "the answer is not a JSON object" },
        { "{\"sub\":\"a\"}", AUTH_UNAVAILABLE, "the answer has no \"active\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct auth_principal *p = NULL;
        const char *why = NULL;
        enum auth_status st = auth_judge_introspection(a, cases[i].answer, strlen(cases[i].answer),
                                                       &srv, now, &p, &why);
        cr_expect_eq(st, cases[i].want, "case %zu: status %d, %s", i, (int)st, why ? why : "-");
        if (st == AUTH_OK)
            cr_expect_str_eq(p->name, cases[i].principal_or_why, "case %zu", i);
        else
            cr_expect_str_eq(why, cases[i].principal_or_why, "case %zu", i);
        auth_principal_unref(p);
    }
    /* The same word as a client_id, a username and a sub: three principals, never one. */
    static const char *const named[] = { "\"client_id\":\"alice\"", "\"username\":\"alice\"",
                                         "\"sub\":\"alice\"" };
    struct auth_principal *seen[3];
    for (size_t i = 0; i < 3; i++) {
        char answer[256];
        snprintf(
            answer, sizeof(answer),
            "{\"active\":true,%s,\"scope\":\"mcp:tools\",\"aud\":\"https://mcp.example.com/mcp\"}",
            named[i]);
        const char *why = NULL;
        cr_assert_eq(auth_judge_introspection(a, answer, strlen(answer), &srv, now, &seen[i], &why),
                     AUTH_OK, "%s", why ? why : "-");
        for (size_t j = 0; j < i; j++)
            cr_expect_neq(seen[i], seen[j], "%s and %s are one principal", named[i], named[j]);
    }
    for (size_t i = 0; i < 3; i++)
        auth_principal_unref(seen[i]);
    auth_free(a);
}

/* A token endpoint's answer to a token exchange (RFC 8693), judged as the gateway does. */
Test(auth, token_exchange_answers)
{
    char big[20000], fits[20000]; /* a token of 16385 bytes, one over; and one of 16384 */
    memset(big, 'x', sizeof big);
    memcpy(big, "{\"access_token\":\"", 17);
    memcpy(fits, big, sizeof fits);
    memcpy(big + 17 + 16385, "\"}", 3);
    memcpy(fits + 17 + 16384, "\"}", 3);
    struct {
        long status;
        const char *body;
        enum auth_exchange_status want;
        const char *token;  /* OK: the token */
        int64_t expires_in; /* OK: the expiry */
        const char *why;    /* else: a part of the reason */
    } cases[] = {
        { 200, "{\"access_token\":\"abc.def\",\"expires_in\":60,\"token_type\":\"Bearer\"}",
          AUTH_EXCHANGE_OK, "abc.def", 60, NULL },
        { 200, " \r\n{\"access_token\":\"t\\u0041\",\"issued_token_type\":\"x\"}", AUTH_EXCHANGE_OK,
          "tA", -1, NULL },
        { 200, "{\"access_token\":\"t\",\"expires_in\":-5}", AUTH_EXCHANGE_OK, "t", -1, NULL },
        { 200, "{\"access_token\":\"t\",\"expires_in\":\"60\"}", AUTH_EXCHANGE_OK, "t", -1, NULL },
        { 200, "{\"access_token\":\"a b\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "{\"access_token\":\"a\\nb\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "{\"access_token\":\"\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "{\"access_token\":42}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "{\"access_token\":\"a\",\"access_token\":\"b\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0,
          "no usable" },
        { 200, "[\"access_token\"]", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "{\"access_token\":\"t\"", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, "", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, big, AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "no usable" },
        { 200, fits, AUTH_EXCHANGE_OK, fits + 17, -1, NULL },
        { 400, "{\"error\":\"invalid_grant\",\"error_description\":\"secret stuff\"}",
          AUTH_EXCHANGE_REFUSED, NULL, 0, "refused the exchange (invalid_grant)" },
        { 401, "{\"error\":\"invalid_client\"}", AUTH_EXCHANGE_REFUSED, NULL, 0, "invalid_client" },
        { 403, "{\"error\":\"Bad Code!\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "HTTP status 403" },
        { 400, "not json", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "HTTP status 400" },
        { 500, "{\"error\":\"server_error\"}", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0,
          "HTTP status 500" },
        { 302, "", AUTH_EXCHANGE_BAD_ANSWER, NULL, 0, "HTTP status 302" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fetch_result r = { .status = cases[i].status,
                                  .body = cases[i].body,
                                  .len = strlen(cases[i].body),
                                  .max_age_s = -1 };
        struct auth_exchanged *x = auth_exchange_judge(&r);
        cr_assert_eq(x->status, cases[i].want, "case %zu: %d (%s)", i, x->status, x->why);
        if (cases[i].want == AUTH_EXCHANGE_OK) {
            size_t n = strcspn(cases[i].token, "\"");
            cr_assert_eq(x->len, n, "case %zu", i);
            cr_assert(memcmp(x->token, cases[i].token, n) == 0 && x->token[n] == '\0', "case %zu",
                      i);
            cr_assert_eq(x->expires_in_s, cases[i].expires_in, "case %zu", i);
        } else {
            cr_assert_null(x->token, "case %zu", i);
            cr_assert_not_null(strstr(x->why, cases[i].why), "case %zu: %s", i, x->why);
            cr_assert_null(strstr(x->why, "secret stuff"), "case %zu: a description is not kept",
                           i);
        }
        auth_exchanged_free(x);
    }
}
