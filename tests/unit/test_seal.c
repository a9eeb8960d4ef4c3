/* SPDX-License-Identifier: MIT */
/*
 * Sealed session ids, from the bottom: the AEAD of core/crypto.c (round trip, associated data,
 * every failure hands back zeros), the key files of core/keyring.c (formats, comments, every way
 * a file is refused, with its line and never its content), and the ids of mcp/session_seal.c
 * (round trip at both bounds, every character changed and every truncation refused, another
 * file's key, a rotation, the lifetime's boundaries, the verdict for each kind of bad id). The
 * clock is a parameter of session_seal_open, so the boundaries are exact seconds, no clock moved.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crypto.h"
#include "keyring.h"
#include "session_seal.h"
#include "util.h"

TestSuite(seal, .timeout = 30);

/* Two keys in each format: made with openssl rand, for these tests only. */
#define K1_HEX    "6b1f0c2d9a8e7f60514233241506f7e8d9cabbac9d8e7f6051423324150617a8"
#define K1_B64    "ax8MLZqOf2BRQjMkFQb36NnKu6ydjn9gUUIzJBUGF6g=" /* K1 in base64 */
#define K2_B64    "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw="
#define K3_URL    "c2VjcmV0LWtleS1udW1iZXItdGhyZWUtZm9yLXRlc3Q" /* base64url, no padding */
#define PRINCIPAL "sub:alice"
#define CAPS      "{\"sampling\":{},\"roots\":{\"listChanged\":true}}"
#define NOW       1785000000 /* 2026-07-25 */

static struct keyring *
ring(const char *text)
{
    char err[512] = "";
    struct keyring *kr =
        keyring_parse(text, strlen(text), "keys", SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "%s", err);
    return kr;
}

/* The error keyring_parse gives text (it must refuse it). */
static const char *
refusal(const char *text, size_t n)
{
    static char err[512];
    err[0] = '\0';
    struct keyring *kr = keyring_parse(text, n, "keys", SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_null(kr, "accepted: %s", text);
    cr_assert_neq(err[0], '\0');
    return err;
}

static void
record(struct session_seal_record *r, int64_t issued)
{
    cr_assert_eq(session_seal_record_init(r, PRINCIPAL, "files", "2025-06-18", CAPS, strlen(CAPS),
                                          0x5, issued),
                 0);
}

static void
seal(const struct keyring *kr, const struct session_seal_record *r, char *id)
{
    cr_assert_eq(session_seal(kr, r, id), 0);
}

static enum session_seal_verdict
open_at(const struct keyring *kr, const char *id, size_t len, int64_t now)
{
    struct session_seal_record r;
    return session_seal_open(kr, id, len, now, 3600, &r);
}

/* --- the AEAD -------------------------------------------------------------------------------- */

Test(seal, aead_round_trip)
{
    unsigned char key[CRYPTO_AEAD_KEY_LEN];
    memset(key, 7, sizeof key);
    struct crypto_aead *a = crypto_aead_new(key);
    cr_assert_not_null(a);
    const char msg[] = "the record", ad[] = "head";
    unsigned char box[sizeof msg + CRYPTO_AEAD_OVERHEAD], box2[sizeof box], out[sizeof msg];
    cr_assert_eq(crypto_aead_seal(a, ad, 4, msg, sizeof msg, box), 0);
    cr_assert_eq(crypto_aead_seal(a, ad, 4, msg, sizeof msg, box2), 0);
    cr_assert_neq(memcmp(box, box2, CRYPTO_AEAD_NONCE_LEN), 0, "a fresh nonce each seal");
    cr_assert_eq(crypto_aead_open(a, ad, 4, box, sizeof box, out), 0);
    cr_assert_str_eq((char *)out, msg);
    cr_assert_eq(crypto_aead_open(a, ad, 4, box2, sizeof box2, out), 0);

    memset(out, 0x55, sizeof out);
    cr_assert_eq(crypto_aead_open(a, "Head", 4, box, sizeof box, out), -1, "other ad");
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], 0, "a failed open hands back zeros, not the plaintext");
    cr_assert_eq(crypto_aead_open(a, ad, 3, box, sizeof box, out), -1, "shorter ad");
    for (size_t i = 0; i < sizeof box; i++) {
        box[i] ^= 0x01;
        cr_assert_eq(crypto_aead_open(a, ad, 4, box, sizeof box, out), -1, "byte %zu", i);
        box[i] ^= 0x01;
    }
    cr_assert_eq(crypto_aead_open(a, ad, 4, box, CRYPTO_AEAD_OVERHEAD - 1, out), -1);
    cr_assert_eq(crypto_aead_open(a, ad, 4, box, sizeof box - 1, out), -1);

    /* empty plaintext, no ad: the tag alone */
    unsigned char tag[CRYPTO_AEAD_OVERHEAD];
    cr_assert_eq(crypto_aead_seal(a, NULL, 0, NULL, 0, tag), 0);
    cr_assert_eq(crypto_aead_open(a, NULL, 0, tag, sizeof tag, out), 0);
    key[0] = 8;
    struct crypto_aead *b = crypto_aead_new(key);
    cr_assert_eq(crypto_aead_open(b, NULL, 0, tag, sizeof tag, out), -1, "another key");
    crypto_aead_free(b);
    crypto_aead_free(a);
    crypto_aead_free(NULL);
}

/* --- key files ------------------------------------------------------------------------------- */

Test(seal, keyring_formats)
{
    struct keyring *kr = ring("# session keys, newest first\n"
                              "\n" K2_B64 "\r\n"
                              "   " K1_HEX "  \n"
                              "\t# the oldest\n" K3_URL);
    cr_assert_eq(keyring_count(kr), 3);
    unsigned char id[KEYRING_ID_LEN];
    struct crypto_aead *first = keyring_sealer(kr, id);
    cr_assert_eq(keyring_find(kr, id), first);
    unsigned char none[KEYRING_ID_LEN] = { 0 };
    if (keyring_find(kr, none) != NULL) /* a 3 in 2^32 chance that a key's id is all zeros */
        cr_assert(memcmp(id, none, sizeof none) == 0);
    keyring_free(kr);

    /* K1 in hex and in base64 is one key: the same id */
    struct keyring *a = ring(K1_HEX), *b = ring(K1_B64);
    unsigned char ia[KEYRING_ID_LEN], ib[KEYRING_ID_LEN];
    keyring_sealer(a, ia);
    keyring_sealer(b, ib);
    cr_assert_eq(memcmp(ia, ib, sizeof ia), 0);
    keyring_free(a);
    keyring_free(b);
    keyring_free(NULL);
}

Test(seal, keyring_refusals)
{
    const char *e = refusal("", 0);
    cr_assert(strstr(e, "keys holds no key") != NULL, "%s", e);
    e = refusal("# nothing yet\n\n", 15);
    cr_assert(strstr(e, "holds no key") != NULL, "%s", e);

    e = refusal("# a\n" K1_HEX "\nnot-a-key!\n", strlen("# a\n" K1_HEX "\nnot-a-key!\n"));
    cr_assert(strstr(e, "keys line 3: not a key") != NULL, "%s", e);
    cr_assert(strstr(e, "not-a-key") == NULL, "the line's text is never shown: %s", e);

    /* 16 bytes: too short in both formats, and the message says so without the key */
    const char *short_hex = "00112233445566778899aabbccddeeff";
    e = refusal(short_hex, strlen(short_hex));
    cr_assert(strstr(e, "keys line 1: a key of 16 bytes: a key is 32 random bytes") != NULL, "%s",
              e);
    cr_assert(strstr(e, "00112233") == NULL, "%s", e);
    e = refusal("\nESIzRFVmd4iZqrvM3e7/AA==\n", 26);
    cr_assert(strstr(e, "keys line 2: a key of 16 bytes") != NULL, "%s", e);
    e = refusal(K1_HEX "00", strlen(K1_HEX "00"));
    cr_assert(strstr(e, "a key of 33 bytes") != NULL, "%s", e);
    cr_assert(strstr(e, "6b1f") == NULL, "%s", e);

    e = refusal(K1_HEX "\n" K2_B64 "\n" K1_B64 "\n", strlen(K1_HEX "\n" K2_B64 "\n" K1_B64 "\n"));
    cr_assert(strstr(e, "keys line 3: the same key as line 1") != NULL, "%s", e);

    const char *zeros = "0000000000000000000000000000000000000000000000000000000000000000";
    e = refusal(zeros, strlen(zeros));
    cr_assert(strstr(e, "line 1: not a random key") != NULL, "%s", e);

    e = refusal(K1_HEX " # trailing comment", strlen(K1_HEX " # trailing comment"));
    cr_assert(strstr(e, "line 1: not a key") != NULL, "a comment is a line of its own: %s", e);
    e = refusal("ax8MLZqOf2BRQjMkFQb36NnKu6ydjn9gUUIzJBUGF6g", 43 - 1);
    cr_assert(strstr(e, "line 1:") != NULL, "%s", e);
    e = refusal("ax8MLZqOf2BRQjMkFQb36NnKu6ydjn9gUUIzJBUGF6h=", 44);
    cr_assert(strstr(e, "not a key") != NULL, "a last character with bits left over: %s", e);

    char nul[] = K1_HEX "\n\0\n";
    e = refusal(nul, sizeof nul - 1);
    cr_assert(strstr(e, "NUL") != NULL, "%s", e);

    /* KEYRING_KEYS_MAX keys are taken; one more is refused on its line */
    char many[KEYRING_KEYS_MAX * 70 + 80] = "";
    for (int i = 0; i <= KEYRING_KEYS_MAX; i++) {
        char line[80];
        snprintf(line, sizeof line, "%02x%s\n", i, &K1_HEX[2]);
        strcat(many, line);
    }
    size_t upto = strlen(many) - 65;
    char err[512];
    struct keyring *kr = keyring_parse(many, upto, "keys", SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "%s", err);
    cr_assert_eq(keyring_count(kr), KEYRING_KEYS_MAX);
    keyring_free(kr);
    e = refusal(many, strlen(many));
    cr_assert(strstr(e, "keys line 17: more than 16 keys") != NULL, "%s", e);

    char *big = malloc(KEYRING_TEXT_MAX + 2);
    memset(big, '#', KEYRING_TEXT_MAX + 1);
    e = refusal(big, KEYRING_TEXT_MAX + 1);
    cr_assert(strstr(e, "larger than 64 KiB") != NULL, "%s", e);
    free(big);
}

/* A key file of text with mode, in a new temporary directory; its path into path. */
static void
key_file(char *path, size_t len, const char *text, mode_t mode)
{
    char dir[] = "/tmp/mcpgw-seal-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, len, "%s/keys", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
}

static void
key_file_gone(const char *path)
{
    unlink(path);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

Test(seal, keyring_files)
{
    char path[128], err[1024], want[512];
    key_file(path, sizeof path, "# k\n" K1_HEX "\n" K2_B64 "\n", 0600);
    struct keyring *kr = keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "%s", err);
    cr_assert_eq(keyring_count(kr), 2);
    keyring_free(kr);

    cr_assert_eq(chmod(path, 0640), 0);
    kr = keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "0640, the gateway's group: %s", err);
    keyring_free(kr);

    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_null(keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err));
    snprintf(want, sizeof want, "%s holds a secret and is readable by others: chmod 0640 %s", path,
             path);
    cr_assert_str_eq(err, want);

    cr_assert_eq(chmod(path, 0620), 0);
    cr_assert_null(keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err));
    cr_assert(strstr(err, "is writable by its group") != NULL, "%s", err);

    cr_assert_eq(chmod(path, 0600), 0);
    FILE *f = fopen(path, "a");
    fputs("tooshort\n", f);
    fclose(f);
    cr_assert_null(keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err));
    snprintf(want, sizeof want, "%s line 4: ", path);
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s", err);
    cr_assert(strstr(err, "tooshort") == NULL, "%s", err);

    key_file_gone(path);
    cr_assert_null(keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err));
    snprintf(want, sizeof want, "%s: No such file or directory", path);
    cr_assert_str_eq(err, want);

    key_file(path, sizeof path, "", 0600);
    cr_assert_null(keyring_load(path, SESSION_SEAL_PURPOSE, err, sizeof err));
    cr_assert(strstr(err, "holds no key") != NULL, "%s", err);
    key_file_gone(path);
}

/* --- sealed ids ------------------------------------------------------------------------------ */

static bool
b64url_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
           || c == '_';
}

Test(seal, round_trip)
{
    struct keyring *kr = ring(K1_HEX);
    struct session_seal_record r, back;
    record(&r, NOW);
    char id[SESSION_SEAL_ID_MAX + 1], id2[SESSION_SEAL_ID_MAX + 1];
    seal(kr, &r, id);
    seal(kr, &r, id2);
    cr_assert_str_neq(id, id2, "a fresh nonce each seal");
    cr_assert_eq(strncmp(id, SESSION_SEAL_PREFIX, 2), 0);
    for (size_t i = 2; id[i]; i++)
        cr_assert(b64url_char(id[i]), "%s", id);
    cr_assert(session_seal_is(id, strlen(id)));
    cr_assert_eq(session_seal_open(kr, id, strlen(id), NOW + 5, 3600, &back), SESSION_SEAL_OK);
    cr_assert_eq(memcmp(&r, &back, sizeof r), 0);
    cr_assert_eq(back.issued_s, NOW);
    cr_assert_eq(back.flags, 0x5);
    cr_assert_str_eq(back.server, "files");
    cr_assert_str_eq(back.revision, "2025-06-18");
    unsigned char caps[CRYPTO_SHA256_LEN];
    crypto_sha256(CAPS, strlen(CAPS), caps);
    cr_assert_eq(memcmp(back.caps, caps, sizeof caps), 0);
    cr_assert(session_seal_principal_is(&back, PRINCIPAL));
    cr_assert_not(session_seal_principal_is(&back, "sub:alic"));
    cr_assert_not(session_seal_principal_is(&back, "sub:bob"));
    cr_assert_eq(session_seal_open(kr, id2, strlen(id2), NOW, 3600, &back), SESSION_SEAL_OK);
    cr_assert_eq(memcmp(&r, &back, sizeof r), 0);
    cr_assert(strstr(id, "files") == NULL && strstr(id, "alice") == NULL);

    /* the longest record there is: within the bound */
    char server[SESSION_SEAL_SERVER_MAX + 1], rev[SESSION_SEAL_REVISION_MAX + 1];
    memset(server, 'z', SESSION_SEAL_SERVER_MAX);
    server[SESSION_SEAL_SERVER_MAX] = '\0';
    memset(rev, '~', SESSION_SEAL_REVISION_MAX);
    rev[SESSION_SEAL_REVISION_MAX] = '\0';
    char principal[300];
    memset(principal, 'p', sizeof principal - 1);
    principal[sizeof principal - 1] = '\0';
    cr_assert_eq(
        session_seal_record_init(&r, principal, server, rev, NULL, 0, UINT32_MAX, INT64_MAX), 0);
    seal(kr, &r, id);
    cr_assert_leq(strlen(id), SESSION_SEAL_ID_MAX);
    cr_assert_eq(strlen(id), 256, "the bound is the longest record's length: %zu", strlen(id));
    cr_assert_eq(session_seal_open(kr, id, strlen(id), INT64_MAX, 0, &back), SESSION_SEAL_OK);
    cr_assert_eq(memcmp(&r, &back, sizeof r), 0);
    cr_assert(session_seal_principal_is(&back, principal));

    /* the shortest */
    cr_assert_eq(session_seal_record_init(&r, "", "a", "b", NULL, 0, 0, 0), 0);
    seal(kr, &r, id);
    cr_assert_eq(session_seal_open(kr, id, strlen(id), 0, 0, &back), SESSION_SEAL_OK);
    cr_assert_eq(memcmp(&r, &back, sizeof r), 0);
    keyring_free(kr);
}

Test(seal, record_bounds)
{
    struct session_seal_record r;
    char long_server[SESSION_SEAL_SERVER_MAX + 2];
    memset(long_server, 's', sizeof long_server - 1);
    long_server[sizeof long_server - 1] = '\0';
    cr_assert_eq(session_seal_record_init(&r, "p", long_server, "2025-06-18", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "", "2025-06-18", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "a b", "2025-06-18", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "a\x7f", "2025-06-18", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "s", "2025-06-18-extra", NULL, 0, 0, 1), 0);
    cr_assert_eq(session_seal_record_init(&r, "p", "s", "2025-06-18-extra!", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "s", "", NULL, 0, 0, 1), -1);
    cr_assert_eq(session_seal_record_init(&r, "p", "s", "2025-06-18", NULL, 0, 0, -1), -1);

    /* a record broken after init is refused by the seal too */
    struct keyring *kr = ring(K1_HEX);
    char id[SESSION_SEAL_ID_MAX + 1];
    cr_assert_eq(session_seal_record_init(&r, "p", "s", "2025-06-18", NULL, 0, 0, 1), 0);
    r.server[0] = ' ';
    cr_assert_eq(session_seal(kr, &r, id), -1);
    cr_assert_str_eq(id, "");
    keyring_free(kr);
}

Test(seal, minted_ids_are_not_sealed)
{
    char id[CRYPTO_SESSION_ID_MAX];
    const char *prefixes[] = { "", "g1", "a-b_c", "ZZZZZZZZZZZZZZZZ" };
    for (int round = 0; round < 200; round++)
        for (size_t i = 0; i < ARRAY_LEN(prefixes); i++) {
            cr_assert_eq(crypto_session_id(prefixes[i], id), 0);
            cr_assert_not(session_seal_is(id, strlen(id)), "%s", id);
        }
    cr_assert_not(session_seal_is("", 0));
    struct keyring *kr = ring(K1_HEX);
    cr_assert_eq(open_at(kr, id, strlen(id), NOW), SESSION_SEAL_MALFORMED);
    keyring_free(kr);
}

/* Every character of a good id replaced by each other base64url character (and a few others). */
Test(seal, every_character_changed)
{
    struct keyring *kr = ring(K1_HEX);
    struct session_seal_record r;
    record(&r, NOW);
    char id[SESSION_SEAL_ID_MAX + 1];
    seal(kr, &r, id);
    size_t len = strlen(id);
    static const char others[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~.=+/ \x01\x80\xff";
    size_t forged = 0;
    for (size_t i = 0; i < len; i++) {
        char was = id[i];
        for (size_t k = 0; k < sizeof others - 1; k++) {
            if (others[k] == was)
                continue;
            id[i] = others[k];
            enum session_seal_verdict v = open_at(kr, id, len, NOW);
            cr_assert_neq(v, SESSION_SEAL_OK, "char %zu -> 0x%02x opened", i,
                          (unsigned char)others[k]);
            forged += v == SESSION_SEAL_FORGED;
        }
        id[i] = was;
    }
    cr_assert_gt(forged, len * 40, "most changes reach the tag and fail there (%zu)", forged);
    cr_assert_eq(open_at(kr, id, len, NOW), SESSION_SEAL_OK, "restored");
    keyring_free(kr);
}

Test(seal, truncations_and_extensions)
{
    struct keyring *kr = ring(K1_HEX);
    struct session_seal_record r;
    record(&r, NOW);
    char id[SESSION_SEAL_ID_MAX + 8];
    seal(kr, &r, id);
    size_t len = strlen(id);
    for (size_t n = 0; n < len; n++)
        cr_assert_neq(open_at(kr, id, n, NOW), SESSION_SEAL_OK, "cut to %zu", n);
    for (size_t n = 0; n < len; n++) /* the tail alone, cut from the front */
        cr_assert_neq(open_at(kr, id + len - n, n, NOW), SESSION_SEAL_OK, "its last %zu", n);
    strcat(id, "AAAA");
    for (size_t n = len + 1; n <= len + 4; n++)
        cr_assert_neq(open_at(kr, id, n, NOW), SESSION_SEAL_OK, "grown to %zu", n);
    keyring_free(kr);
}

Test(seal, verdicts)
{
    struct keyring *kr = ring(K1_HEX);
    char id[SESSION_SEAL_ID_MAX * 2];
    cr_assert_eq(open_at(kr, "", 0, NOW), SESSION_SEAL_MALFORMED);
    cr_assert_eq(open_at(kr, "~", 1, NOW), SESSION_SEAL_MALFORMED);
    cr_assert_eq(open_at(kr, "~2AAAA", 6, NOW), SESSION_SEAL_MALFORMED, "another version");
    cr_assert_eq(open_at(kr, "~1AAAA", 6, NOW), SESSION_SEAL_WRONG_LENGTH);
    memset(id, 'A', sizeof id);
    id[0] = '~';
    id[1] = '1';
    cr_assert_eq(open_at(kr, id, SESSION_SEAL_ID_MAX + 4, NOW), SESSION_SEAL_WRONG_LENGTH);
    cr_assert_eq(open_at(kr, id, 2 + 4 * 40 + 1, NOW), SESSION_SEAL_WRONG_LENGTH,
                 "4k + 1 characters");
    id[50] = '*';
    cr_assert_eq(open_at(kr, id, 2 + 4 * 40, NOW), SESSION_SEAL_MALFORMED, "not base64url");
    id[50] = 'A';
    /* key id AAAA... names no key of this ring (a 2^-32 chance that it does) */
    cr_assert_eq(open_at(kr, id, 2 + 4 * 40, NOW), SESSION_SEAL_UNKNOWN_KEY);

    /* this ring's key id, any body: forged */
    struct session_seal_record r;
    record(&r, NOW);
    seal(kr, &r, id);
    size_t len = strlen(id);
    memset(id + 8, 'B', len - 8);
    id[len - 1] = 'A'; /* a last character with no bits left over: canonical */
    cr_assert_eq(open_at(kr, id, len, NOW), SESSION_SEAL_FORGED);

    /* a record no seal makes, sealed with the key by hand: opens, but is no record */
    unsigned char kid[KEYRING_ID_LEN], raw[SESSION_SEAL_ID_MAX], plain[100];
    struct crypto_aead *key = keyring_sealer(kr, kid);
    unsigned char ad[2 + KEYRING_ID_LEN] = { '~', '1' };
    memcpy(ad + 2, kid, KEYRING_ID_LEN);
    memset(plain, 'x', sizeof plain); /* lengths of 'x' (120): past every bound */
    memcpy(raw, kid, KEYRING_ID_LEN);
    cr_assert_eq(crypto_aead_seal(key, ad, sizeof ad, plain, sizeof plain, raw + KEYRING_ID_LEN),
                 0);
    memcpy(id, "~1", 2);
    size_t n =
        2
        + util_base64url_encode(raw, KEYRING_ID_LEN + CRYPTO_AEAD_OVERHEAD + sizeof plain, id + 2);
    cr_assert_eq(open_at(kr, id, n, NOW), SESSION_SEAL_MALFORMED);
    /* the same with the other version's prefix as associated data: the tag binds the prefix */
    ad[1] = '2';
    cr_assert_eq(crypto_aead_seal(key, ad, sizeof ad, plain, sizeof plain, raw + KEYRING_ID_LEN),
                 0);
    n = 2
        + util_base64url_encode(raw, KEYRING_ID_LEN + CRYPTO_AEAD_OVERHEAD + sizeof plain, id + 2);
    cr_assert_eq(open_at(kr, id, n, NOW), SESSION_SEAL_FORGED);

    const char *texts[6];
    for (int v = SESSION_SEAL_OK; v <= SESSION_SEAL_EXPIRED; v++) {
        texts[v] = session_seal_verdict_text((enum session_seal_verdict)v);
        for (int w = SESSION_SEAL_OK; w < v; w++)
            cr_assert_str_neq(texts[v], texts[w]);
    }
    keyring_free(kr);
}

Test(seal, another_file_and_rotation)
{
    struct keyring *old = ring(K1_HEX), *other = ring(K2_B64);
    struct keyring *rotated = ring("# new first, old kept to open\n" K3_URL "\n" K1_B64 "\n");
    struct keyring *dropped = ring(K3_URL);
    struct session_seal_record r, back;
    record(&r, NOW);
    char id_old[SESSION_SEAL_ID_MAX + 1], id_new[SESSION_SEAL_ID_MAX + 1];
    seal(old, &r, id_old);
    cr_assert_eq(open_at(other, id_old, strlen(id_old), NOW), SESSION_SEAL_UNKNOWN_KEY);
    cr_assert_eq(session_seal_open(rotated, id_old, strlen(id_old), NOW, 3600, &back),
                 SESSION_SEAL_OK, "the old key, second in the file, still opens");
    cr_assert_eq(memcmp(&r, &back, sizeof r), 0);
    seal(rotated, &r, id_new);
    cr_assert_eq(open_at(rotated, id_new, strlen(id_new), NOW), SESSION_SEAL_OK);
    cr_assert_eq(open_at(dropped, id_new, strlen(id_new), NOW), SESSION_SEAL_OK,
                 "new ids are sealed with the first key");
    cr_assert_eq(open_at(old, id_new, strlen(id_new), NOW), SESSION_SEAL_UNKNOWN_KEY);
    cr_assert_eq(open_at(dropped, id_old, strlen(id_old), NOW), SESSION_SEAL_UNKNOWN_KEY,
                 "once the old key leaves the file its ids are gone");

    /* one file's key for another purpose derives another key: nothing crosses */
    char err[256];
    struct keyring *state = keyring_parse(K1_HEX, 64, "keys", "state", err, sizeof err);
    cr_assert_not_null(state, "%s", err);
    cr_assert_eq(open_at(state, id_old, strlen(id_old), NOW), SESSION_SEAL_UNKNOWN_KEY);
    keyring_free(state);
    keyring_free(old);
    keyring_free(other);
    keyring_free(rotated);
    keyring_free(dropped);
}

Test(seal, lifetime_boundaries)
{
    struct keyring *kr = ring(K1_HEX);
    struct session_seal_record r, back;
    record(&r, NOW);
    char id[SESSION_SEAL_ID_MAX + 1];
    seal(kr, &r, id);
    size_t len = strlen(id);
    cr_assert_eq(session_seal_open(kr, id, len, NOW + 100, 100, &back), SESSION_SEAL_OK,
                 "through its last second");
    cr_assert_eq(session_seal_open(kr, id, len, NOW + 101, 100, &back), SESSION_SEAL_EXPIRED);
    for (size_t i = 0; i < sizeof back; i++)
        cr_assert_eq(((unsigned char *)&back)[i], 0, "an expired id hands back nothing");
    cr_assert_eq(session_seal_open(kr, id, len, NOW, 0, &back), SESSION_SEAL_OK);
    cr_assert_eq(session_seal_open(kr, id, len, NOW + 1, 0, &back), SESSION_SEAL_EXPIRED);
    cr_assert_eq(session_seal_open(kr, id, len, NOW - SESSION_SEAL_SKEW_S, 100, &back),
                 SESSION_SEAL_OK, "an instance whose clock is a little behind");
    cr_assert_eq(session_seal_open(kr, id, len, NOW - SESSION_SEAL_SKEW_S - 1, 100, &back),
                 SESSION_SEAL_EXPIRED, "issued too far in the future");
    cr_assert_eq(session_seal_open(kr, id, len, INT64_MAX, UINT64_MAX, &back), SESSION_SEAL_OK);
    cr_assert_eq(session_seal_open(kr, id, len, INT64_MIN, UINT64_MAX, &back),
                 SESSION_SEAL_EXPIRED);
    /* The rule alone (a local record checks its age with it, without opening its id again). */
    int64_t cases[][2] = { { NOW + 100, 0 }, { NOW + 101, 1 }, { NOW - SESSION_SEAL_SKEW_S, 0 },
                           { NOW - SESSION_SEAL_SKEW_S - 1, 1 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(session_seal_expired(NOW, cases[i][0], 100), cases[i][1] == 1,
                     "case %zu", i);
    keyring_free(kr);
}

/* What logs name a sealed id by: a fixed form, the same for the same id, never the id. */
Test(seal, label)
{
    struct keyring *kr = ring(K1_HEX);
    struct session_seal_record r;
    record(&r, NOW);
    char id[SESSION_SEAL_ID_MAX + 1], a[SESSION_SEAL_LABEL_MAX], b[SESSION_SEAL_LABEL_MAX];
    seal(kr, &r, id);
    session_seal_label(id, strlen(id), a);
    session_seal_label(id, strlen(id), b);
    cr_assert_str_eq(a, b);
    cr_assert_eq(strlen(a), SESSION_SEAL_LABEL_MAX - 1);
    cr_assert_eq(strncmp(a, "sealed:", 7), 0);
    cr_assert_eq(strspn(a + 7, "0123456789abcdef"), 16);
    cr_assert_null(strstr(id, a + 7), "no part of the id");
    session_seal_label(id, strlen(id) - 1, b);
    cr_assert_str_neq(a, b, "another id, another label");
    keyring_free(kr);
}

/* Any bytes at all: no crash, no read past len (ASan), never OK. */
Test(seal, arbitrary_bytes)
{
    struct keyring *kr = ring(K1_HEX);
    unsigned char buf[400];
    unsigned seed = 1;
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(seed = seed * 1103515245u + 12345u) % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
        if (n >= 2 && round % 2 == 0) {
            buf[0] = '~';
            buf[1] = '1';
        }
        char *copy = malloc(n > 0 ? n : 1); /* exactly n bytes: ASan sees a read past them */
        memcpy(copy, buf, n);
        cr_assert_neq(open_at(kr, copy, n, NOW), SESSION_SEAL_OK);
        free(copy);
    }
    keyring_free(kr);
}
