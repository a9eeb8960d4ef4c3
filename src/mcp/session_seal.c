/* SPDX-License-Identifier: MIT */
/*
 * Sealed session ids (include/session_seal.h): a fixed record sealed with the first key of a
 * keyring into a visible-ASCII id, and opened again by any holder of the key, with a verdict for
 * every way an id can be wrong. Pure: no clock (the caller passes now), no allocation, no I/O.
 * What the record means (whose session, which server, what the client declared) is the caller's;
 * this file only guarantees that what opens is what was sealed, by a holder of the key, within
 * its lifetime. An id is the client's input: every length is checked before it is used, and no
 * input makes it read or write past its buffers (tests/fuzz/session_seal_fuzz.c).
 */
#include "session_seal.h"

#include <string.h>

#define SEAL_PREFIX_LEN (sizeof SESSION_SEAL_PREFIX - 1)
/* issued 8, principal 32, caps 32, flags 4, the two lengths 1 each */
#define SEAL_FIXED      (8 + CRYPTO_SHA256_LEN + CRYPTO_SHA256_LEN + 4 + 1 + 1)
#define SEAL_PLAIN_MAX  (SEAL_FIXED + SESSION_SEAL_REVISION_MAX + SESSION_SEAL_SERVER_MAX)
#define SEAL_PLAIN_MIN  (SEAL_FIXED + 1 + 1)
#define SEAL_HEAD       (KEYRING_ID_LEN)
#define SEAL_RAW_MAX    (SEAL_HEAD + CRYPTO_AEAD_OVERHEAD + SEAL_PLAIN_MAX)
#define SEAL_RAW_MIN    (SEAL_HEAD + CRYPTO_AEAD_OVERHEAD + SEAL_PLAIN_MIN)
/* base64url without padding: n bytes are ceil(4n / 3) characters */
#define SEAL_B64(n)     (((n)*4 + 2) / 3)
#define SEAL_ID_MIN     (SEAL_PREFIX_LEN + SEAL_B64(SEAL_RAW_MIN))
#define SEAL_ID_LONGEST (SEAL_PREFIX_LEN + SEAL_B64(SEAL_RAW_MAX))

_Static_assert(SEAL_ID_LONGEST <= SESSION_SEAL_ID_MAX, "a sealed id outgrows its bound");
_Static_assert(SESSION_SEAL_SERVER_MAX < 256 && SESSION_SEAL_REVISION_MAX < 256,
               "a string's length is one byte");

/* Whether s[0..n) is 1..max bytes of visible ASCII (0x21..0x7E). */
static bool
seal_visible(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

int
session_seal_record_init(struct session_seal_record *r, const char *principal, const char *server,
                         const char *revision, const void *caps, size_t caps_len, uint32_t flags,
                         int64_t issued_s)
{
    memset(r, 0, sizeof(*r));
    size_t ls = strlen(server), lr = strlen(revision);
    if (issued_s < 0 || !seal_visible(server, ls, SESSION_SEAL_SERVER_MAX)
        || !seal_visible(revision, lr, SESSION_SEAL_REVISION_MAX))
        return -1;
    r->issued_s = issued_s;
    crypto_sha256(principal, strlen(principal), r->principal);
    crypto_sha256(caps_len > 0 ? caps : "", caps_len, r->caps);
    r->flags = flags;
    memcpy(r->revision, revision, lr);
    memcpy(r->server, server, ls);
    return 0;
}

/* r as its plaintext into out (room for SEAL_PLAIN_MAX): its length, or 0 when r breaks a bound. */
static size_t
seal_plain(const struct session_seal_record *r, unsigned char *out)
{
    size_t lr = strnlen(r->revision, sizeof r->revision), ls = strnlen(r->server, sizeof r->server);
    if (r->issued_s < 0 || !seal_visible(r->revision, lr, SESSION_SEAL_REVISION_MAX)
        || !seal_visible(r->server, ls, SESSION_SEAL_SERVER_MAX))
        return 0;
    unsigned char *p = out;
    util_put_be(p, (uint64_t)r->issued_s, 8);
    p += 8;
    memcpy(p, r->principal, CRYPTO_SHA256_LEN);
    p += CRYPTO_SHA256_LEN;
    memcpy(p, r->caps, CRYPTO_SHA256_LEN);
    p += CRYPTO_SHA256_LEN;
    util_put_be(p, r->flags, 4);
    p += 4;
    *p++ = (unsigned char)lr;
    memcpy(p, r->revision, lr);
    p += lr;
    *p++ = (unsigned char)ls;
    memcpy(p, r->server, ls);
    p += ls;
    return (size_t)(p - out);
}

/* The plaintext p[0..n) into r: false when its lengths or strings are not a record's. */
static bool
seal_unplain(const unsigned char *p, size_t n, struct session_seal_record *r)
{
    if (n < SEAL_PLAIN_MIN)
        return false;
    uint64_t issued = util_get_be(p, 8);
    size_t lr = p[SEAL_FIXED - 2];
    if (issued > INT64_MAX || lr > SESSION_SEAL_REVISION_MAX || SEAL_FIXED + lr > n)
        return false;
    const unsigned char *rev = p + SEAL_FIXED - 1;
    size_t ls = rev[lr];
    const unsigned char *srv = rev + lr + 1;
    if (n != SEAL_FIXED + lr + ls || !seal_visible((const char *)rev, lr, SESSION_SEAL_REVISION_MAX)
        || !seal_visible((const char *)srv, ls, SESSION_SEAL_SERVER_MAX))
        return false;
    r->issued_s = (int64_t)issued;
    memcpy(r->principal, p + 8, CRYPTO_SHA256_LEN);
    memcpy(r->caps, p + 8 + CRYPTO_SHA256_LEN, CRYPTO_SHA256_LEN);
    r->flags = (uint32_t)util_get_be(p + 8 + 2 * CRYPTO_SHA256_LEN, 4);
    memcpy(r->revision, rev, lr);
    memcpy(r->server, srv, ls);
    return true;
}

/* The associated data: the prefix (the format's version) and the key id. */
static size_t
seal_ad(const unsigned char *kid, unsigned char ad[SEAL_PREFIX_LEN + KEYRING_ID_LEN])
{
    memcpy(ad, SESSION_SEAL_PREFIX, SEAL_PREFIX_LEN);
    memcpy(ad + SEAL_PREFIX_LEN, kid, KEYRING_ID_LEN);
    return SEAL_PREFIX_LEN + KEYRING_ID_LEN;
}

int
session_seal(const struct keyring *kr, const struct session_seal_record *r,
             char out[SESSION_SEAL_ID_MAX + 1])
{
    unsigned char plain[SEAL_PLAIN_MAX], raw[SEAL_RAW_MAX], ad[SEAL_PREFIX_LEN + KEYRING_ID_LEN];
    size_t n = seal_plain(r, plain);
    int rc = -1;
    if (n > 0) {
        struct crypto_aead *key = keyring_sealer(kr, raw);
        size_t adlen = seal_ad(raw, ad);
        if (crypto_aead_seal(key, ad, adlen, plain, n, raw + SEAL_HEAD) == 0) {
            memcpy(out, SESSION_SEAL_PREFIX, SEAL_PREFIX_LEN);
            util_base64url_encode(raw, SEAL_HEAD + CRYPTO_AEAD_OVERHEAD + n, out + SEAL_PREFIX_LEN);
            rc = 0;
        }
    }
    crypto_cleanse(plain, sizeof plain);
    if (rc == -1)
        out[0] = '\0';
    return rc;
}

enum session_seal_verdict
session_seal_open(const struct keyring *kr, const char *id, size_t len, int64_t now_s,
                  uint64_t max_age_s, struct session_seal_record *r)
{
    memset(r, 0, sizeof(*r));
    if (len < SEAL_PREFIX_LEN || memcmp(id, SESSION_SEAL_PREFIX, SEAL_PREFIX_LEN) != 0)
        return SESSION_SEAL_MALFORMED;
    /* 4k + 1 characters of base64url are no whole number of bytes */
    if (len < SEAL_ID_MIN || len > SEAL_ID_LONGEST || (len - SEAL_PREFIX_LEN) % 4 == 1)
        return SESSION_SEAL_WRONG_LENGTH;
    unsigned char raw[SEAL_RAW_MAX], plain[SEAL_PLAIN_MAX], ad[SEAL_PREFIX_LEN + KEYRING_ID_LEN];
    long n = util_base64url_decode(id + SEAL_PREFIX_LEN, len - SEAL_PREFIX_LEN, raw, sizeof raw);
    if (n < 0)
        return SESSION_SEAL_MALFORMED;
    if ((size_t)n < SEAL_RAW_MIN) /* cannot happen past the length check: kept by what it guards */
        return SESSION_SEAL_WRONG_LENGTH;
    struct crypto_aead *key = keyring_find(kr, raw);
    if (key == NULL)
        return SESSION_SEAL_UNKNOWN_KEY;
    size_t boxlen = (size_t)n - SEAL_HEAD, adlen = seal_ad(raw, ad);
    if (crypto_aead_open(key, ad, adlen, raw + SEAL_HEAD, boxlen, plain) == -1)
        return SESSION_SEAL_FORGED;
    enum session_seal_verdict v = SESSION_SEAL_OK;
    if (!seal_unplain(plain, boxlen - CRYPTO_AEAD_OVERHEAD, r))
        v = SESSION_SEAL_MALFORMED; /* sealed by a holder of the key, yet no record */
    else if (session_seal_expired(r->issued_s, now_s, max_age_s))
        v = SESSION_SEAL_EXPIRED;
    crypto_cleanse(plain, sizeof plain);
    if (v != SESSION_SEAL_OK)
        memset(r, 0, sizeof(*r));
    return v;
}

void
session_seal_label(const char *id, size_t len, char out[SESSION_SEAL_LABEL_MAX])
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(id, len, h);
    static const char digits[] = "0123456789abcdef";
    memcpy(out, "sealed:", 7);
    for (size_t i = 0; i < 8; i++) {
        out[7 + 2 * i] = digits[h[i] >> 4];
        out[7 + 2 * i + 1] = digits[h[i] & 15];
    }
    out[SESSION_SEAL_LABEL_MAX - 1] = '\0';
}

bool
session_seal_expired(int64_t issued_s, int64_t now_s, uint64_t max_age_s)
{
    /* issued_s + max_age_s < now_s, written without an overflow for any now_s and max_age_s */
    return issued_s - SESSION_SEAL_SKEW_S > now_s
           || (now_s > issued_s && (uint64_t)now_s - (uint64_t)issued_s > max_age_s);
}

bool
session_seal_is(const char *id, size_t len)
{
    return len > 0 && id[0] == SESSION_SEAL_PREFIX[0];
}

bool
session_seal_principal_is(const struct session_seal_record *r, const char *principal)
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(principal, strlen(principal), h);
    return crypto_equal(h, r->principal, sizeof h);
}

const char *
session_seal_verdict_text(enum session_seal_verdict v)
{
    switch (v) {
    case SESSION_SEAL_OK:
        return "ok";
    case SESSION_SEAL_MALFORMED:
        return "not a sealed session id of this gateway's format";
    case SESSION_SEAL_WRONG_LENGTH:
        return "a sealed session id of an impossible length";
    case SESSION_SEAL_UNKNOWN_KEY:
        return "sealed with a key this gateway does not hold";
    case SESSION_SEAL_FORGED:
        return "a sealed session id that does not verify (changed, cut, or made up)";
    case SESSION_SEAL_EXPIRED:
        return "a sealed session id past its lifetime, or issued in the future";
    }
    return "unknown verdict";
}
