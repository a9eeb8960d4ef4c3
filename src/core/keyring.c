/* SPDX-License-Identifier: MIT */
/*
 * Key files: one 32-byte key a line (hex or base64), comments, the first key seals and every key
 * opens (include/keyring.h). This file reads and checks the text and derives each key's AEAD key
 * and id; the AEAD itself is core/crypto.c's, and what is sealed is its caller's. It does not
 * watch the file: a reload loads it again and the caller swaps keyrings.
 */
#include "keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

struct keyring_key {
    unsigned char id[KEYRING_ID_LEN];
    struct crypto_aead *aead;
};

struct keyring {
    size_t n;
    struct keyring_key keys[KEYRING_KEYS_MAX];
};

static int
keyring_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool
keyring_all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (keyring_hex(s[i]) < 0)
            return false;
    return true;
}

/*
 * The bytes of one key line s[0..n) into out (room for 64): their count, or -1 when the line is
 * neither hex nor base64. Standard base64 is turned into base64url in a copy (wiped) and its
 * padding dropped, so util_base64url_decode checks both alphabets' rules (canonical last
 * character included).
 */
static long
keyring_decode(const char *s, size_t n, unsigned char out[64])
{
    if (n % 2 == 0 && n <= 128 && keyring_all_hex(s, n)) {
        for (size_t i = 0; i < n / 2; i++)
            out[i] = (unsigned char)(keyring_hex(s[2 * i]) << 4 | keyring_hex(s[2 * i + 1]));
        return (long)(n / 2);
    }
    char copy[128];
    if (n > sizeof copy)
        return -1;
    size_t pad = 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
        pad++;
    if (pad > 0 && n % 4 != 0)
        return -1; /* padding only completes a last group of four */
    for (size_t i = 0; i < n - pad; i++)
        copy[i] = s[i] == '+' ? '-' : s[i] == '/' ? '_' : s[i];
    long got = util_base64url_decode(copy, n - pad, out, 64);
    crypto_cleanse(copy, sizeof copy);
    return got;
}

/* The purpose's derivation of key: HMAC-SHA-256(key, "mcpgw <purpose> <what>"). */
static int
keyring_derive(const unsigned char key[32], const char *purpose, const char *what,
               unsigned char out[CRYPTO_SHA256_LEN])
{
    char label[128];
    int n = snprintf(label, sizeof label, "mcpgw %s %s", purpose, what);
    if (n < 0 || (size_t)n >= sizeof label)
        return -1;
    return crypto_hmac_sha256(key, 32, label, (size_t)n, out);
}

static int
keyring_fail(char *err, size_t errlen, const char *name, int line, const char *what)
{
    if (line > 0)
        snprintf(err, errlen, "%s line %d: %s", name, line, what);
    else
        snprintf(err, errlen, "%s %s", name, what);
    return -1;
}

/*
 * Why the key line s[0..n) cannot be kr's next key (a static phrase, or one in why), or NULL with
 * its 32 bytes in raw. raws holds the keys taken so far, lines their line numbers.
 */
static const char *
keyring_judge(const struct keyring *kr, const char *s, size_t n, const int lines[],
              unsigned char raws[][32], unsigned char raw[64], char *why, size_t whylen)
{
    long got = keyring_decode(s, n, raw);
    if (got < 0)
        return "not a key: a key is 64 hex digits (openssl rand -hex 32) or the base64 of 32 bytes "
               "(openssl rand -base64 32); a comment starts with #";
    if (got != 32) {
        snprintf(why, whylen,
                 "a key of %ld bytes: a key is 32 random bytes (openssl rand -base64 32)", got);
        return why;
    }
    if (kr->n == KEYRING_KEYS_MAX) {
        snprintf(why, whylen, "more than %d keys (the first seals, all open)", KEYRING_KEYS_MAX);
        return why;
    }
    bool flat = true;
    for (size_t i = 1; i < 32; i++)
        flat = flat && raw[i] == raw[0];
    if (flat)
        return "not a random key (all its bytes are the same): openssl rand -base64 32";
    for (size_t i = 0; i < kr->n; i++)
        if (crypto_equal(raws[i], raw, 32)) {
            snprintf(why, whylen, "the same key as line %d", lines[i]);
            return why;
        }
    return NULL;
}

/*
 * raw (32 bytes) as kr's next key: its purpose's AEAD key and id derived, its context made. NULL,
 * or why not (OpenSSL failed, or its id is an earlier key's: 2^-32 for two random keys, and then
 * a new key is better than trying two on every open).
 */
static const char *
keyring_take(struct keyring *kr, const unsigned char raw[32], const char *purpose,
             const int lines[], char *why, size_t whylen)
{
    unsigned char aead_key[CRYPTO_SHA256_LEN], id[CRYPTO_SHA256_LEN];
    struct keyring_key *k = &kr->keys[kr->n];
    const char *bad = NULL;
    if (keyring_derive(raw, purpose, "aead", aead_key) == -1
        || keyring_derive(raw, purpose, "id", id) == -1
        || (k->aead = crypto_aead_new(aead_key)) == NULL)
        bad = "cannot be made into a key (OpenSSL failed)";
    for (size_t i = 0; bad == NULL && i < kr->n; i++)
        if (memcmp(kr->keys[i].id, id, KEYRING_ID_LEN) == 0) {
            snprintf(why, whylen,
                     "its key id is line %d's: make another key (openssl rand -base64 32)",
                     lines[i]);
            bad = why;
            crypto_aead_free(k->aead);
            k->aead = NULL;
        }
    if (bad == NULL) {
        memcpy(k->id, id, KEYRING_ID_LEN);
        kr->n++;
    }
    crypto_cleanse(aead_key, sizeof aead_key);
    crypto_cleanse(id, sizeof id);
    return bad;
}

/* One key line (trimmed, not a comment) at line into kr and raws. 0, or -1 with err. */
static int
keyring_add(struct keyring *kr, const char *s, size_t n, int line, const int lines[],
            unsigned char raws[][32], const char *name, const char *purpose, char *err,
            size_t errlen)
{
    unsigned char raw[64];
    char why[160];
    const char *bad = keyring_judge(kr, s, n, lines, raws, raw, why, sizeof why);
    if (bad == NULL) {
        memcpy(raws[kr->n], raw, 32);
        bad = keyring_take(kr, raw, purpose, lines, why, sizeof why);
    }
    crypto_cleanse(raw, sizeof raw);
    if (bad != NULL)
        return keyring_fail(err, errlen, name, line, bad);
    return 0;
}

struct keyring *
keyring_parse(const char *text, size_t n, const char *name, const char *purpose, char *err,
              size_t errlen)
{
    if (n > KEYRING_TEXT_MAX) {
        keyring_fail(err, errlen, name, 0, "is larger than 64 KiB: a key file holds a few keys");
        return NULL;
    }
    if (memchr(text, '\0', n) != NULL) {
        keyring_fail(err, errlen, name, 0, "holds a NUL byte: not a key file");
        return NULL;
    }
    struct keyring *kr = xcalloc(1, sizeof(*kr));
    unsigned char raws[KEYRING_KEYS_MAX][32];
    int lines[KEYRING_KEYS_MAX + 1]; /* + 1: the line past the last key, refused */
    int line = 0, rc = 0;
    for (size_t at = 0; at < n && rc == 0;) {
        const char *s = text + at, *nl = memchr(s, '\n', n - at);
        size_t len = nl != NULL ? (size_t)(nl - s) : n - at;
        at += len + (nl != NULL);
        line++;
        while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        while (len > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            len--;
        }
        if (len == 0 || *s == '#')
            continue;
        lines[kr->n] = line;
        rc = keyring_add(kr, s, len, line, lines, raws, name, purpose, err, errlen);
    }
    crypto_cleanse(raws, sizeof raws);
    if (rc == 0 && kr->n == 0) {
        keyring_fail(err, errlen, name, 0,
                     "holds no key: one a line, 64 hex digits or base64 of 32 bytes "
                     "(openssl rand -base64 32)");
        rc = -1;
    }
    if (rc == -1) {
        keyring_free(kr);
        return NULL;
    }
    return kr;
}

struct keyring *
keyring_load(const char *path, const char *purpose, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd == -1) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    const char *unsafe = util_file_unsafe(fd, path, true, err, errlen);
    if (unsafe != NULL) {
        close(fd);
        return NULL;
    }
    char *text = xmalloc(KEYRING_TEXT_MAX + 1);
    size_t n = 0;
    ssize_t got = 1;
    while (n <= KEYRING_TEXT_MAX && got > 0) {
        got = read(fd, text + n, KEYRING_TEXT_MAX + 1 - n);
        if (got == -1 && errno == EINTR)
            got = 1;
        else if (got > 0)
            n += (size_t)got;
    }
    int e = errno;
    close(fd);
    struct keyring *kr = NULL;
    if (got == -1)
        snprintf(err, errlen, "%s: %s", path, strerror(e));
    else
        kr = keyring_parse(text, n, path, purpose, err, errlen);
    crypto_cleanse(text, KEYRING_TEXT_MAX + 1);
    free(text);
    return kr;
}

void
keyring_free(struct keyring *kr)
{
    if (kr == NULL)
        return;
    for (size_t i = 0; i < kr->n; i++)
        crypto_aead_free(kr->keys[i].aead);
    crypto_cleanse(kr, sizeof(*kr));
    free(kr);
}

size_t
keyring_count(const struct keyring *kr)
{
    return kr->n;
}

struct crypto_aead *
keyring_sealer(const struct keyring *kr, unsigned char id[KEYRING_ID_LEN])
{
    memcpy(id, kr->keys[0].id, KEYRING_ID_LEN);
    return kr->keys[0].aead;
}

struct crypto_aead *
keyring_find(const struct keyring *kr, const unsigned char id[KEYRING_ID_LEN])
{
    for (size_t i = 0; i < kr->n; i++)
        if (memcmp(kr->keys[i].id, id, KEYRING_ID_LEN) == 0)
            return kr->keys[i].aead;
    return NULL;
}
