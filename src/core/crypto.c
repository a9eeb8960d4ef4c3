/* SPDX-License-Identifier: MIT */
/*
 * The gateway's only use of OpenSSL: random session ids from the CSPRNG, constant-time
 * comparison, SHA-256 of bearer tokens, AES-256-GCM for what the gateway seals (sealed session
 * ids), and JWS signature checks (RS256, ES256, EdDSA) with public keys built from JWK parts
 * through the OpenSSL 3 EVP interface. TLS is not here: it ends in nginx
 * (src/README.md, section 6).
 */
#include "crypto.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>

#include "util.h"

struct crypto_key {
    EVP_PKEY *pkey;
    enum crypto_alg alg;
};

int
crypto_random(void *buf, size_t n)
{
    if (n > (size_t)0x7fffffff)
        return -1;
    return RAND_bytes(buf, (int)n) == 1 ? 0 : -1;
}

int
crypto_session_id(const char *prefix, char out[CRYPTO_SESSION_ID_MAX])
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[16];
    if (strlen(prefix) > 16 || crypto_random(raw, sizeof(raw)) == -1)
        return -1;
    size_t n = 0;
    if (*prefix) {
        n = (size_t)snprintf(out, CRYPTO_SESSION_ID_MAX, "%s.", prefix);
    }
    /* 128 bits -> 22 sextets (the last one carries 2 bits). */
    unsigned int acc = 0, bits = 0;
    for (size_t i = 0; i < sizeof(raw); i++) {
        acc = (acc << 8) | raw[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[n++] = b64url[(acc >> bits) & 0x3f];
        }
    }
    if (bits > 0)
        out[n++] = b64url[(acc << (6 - bits)) & 0x3f];
    out[n] = '\0';
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

bool
crypto_equal(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

void
crypto_sha256(const void *data, size_t n, unsigned char out[CRYPTO_SHA256_LEN])
{
    /*
     * The digest fetched once and one context reused: EVP_Digest with EVP_sha256() fetches the
     * algorithm from the provider store (locks, string compares) and allocates a context on every
     * call, which cost more than hashing a token or a principal's name. One thread: no lock. The
     * context holds nothing of the data after the final (the block buffer is wiped there).
     */
    static EVP_MD *md;
    static EVP_MD_CTX *ctx;
    if (md == NULL)
        md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (ctx == NULL)
        ctx = EVP_MD_CTX_new();
    unsigned int len = 0;
    if (md == NULL || ctx == NULL || EVP_DigestInit_ex2(ctx, md, NULL) != 1
        || EVP_DigestUpdate(ctx, data, n) != 1 || EVP_DigestFinal_ex(ctx, out, &len) != 1
        || len != CRYPTO_SHA256_LEN)
        memset(out, 0, CRYPTO_SHA256_LEN); /* cannot happen; an all-zero hash matches no entry */
}

void
crypto_cleanse(void *p, size_t n)
{
    OPENSSL_cleanse(p, n);
}

int
crypto_hmac_sha256(const void *key, size_t klen, const void *data, size_t n,
                   unsigned char out[CRYPTO_SHA256_LEN])
{
    unsigned int len = 0;
    if (klen > INT32_MAX || HMAC(EVP_sha256(), key, (int)klen, data, n, out, &len) == NULL
        || len != CRYPTO_SHA256_LEN)
        return -1;
    return 0;
}

/* --- AEAD ---------------------------------------------------------------------------------- */

/*
 * One key, two contexts (sealing and opening) keyed once: OpenSSL 3's GCM keeps the key schedule
 * when a later init passes no cipher and no key, only the nonce, so a seal or an open allocates
 * nothing and never schedules the key again. The process has one thread: no lock.
 */
struct crypto_aead {
    EVP_CIPHER_CTX *seal;
    EVP_CIPHER_CTX *open;
};

struct crypto_aead *
crypto_aead_new(const unsigned char key[CRYPTO_AEAD_KEY_LEN])
{
    struct crypto_aead *a = xcalloc(1, sizeof(*a));
    a->seal = EVP_CIPHER_CTX_new();
    a->open = EVP_CIPHER_CTX_new();
    if (a->seal == NULL || a->open == NULL
        || EVP_EncryptInit_ex(a->seal, EVP_aes_256_gcm(), NULL, key, NULL) != 1
        || EVP_DecryptInit_ex(a->open, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
        crypto_aead_free(a);
        return NULL;
    }
    return a;
}

void
crypto_aead_free(struct crypto_aead *a)
{
    if (a == NULL)
        return;
    EVP_CIPHER_CTX_free(a->seal); /* wipes the key schedule (EVP_CIPHER_CTX_reset) */
    EVP_CIPHER_CTX_free(a->open);
    free(a);
}

int
crypto_aead_seal(struct crypto_aead *a, const void *ad, size_t adlen, const void *pt, size_t n,
                 unsigned char *out)
{
    unsigned char *nonce = out, *ct = out + CRYPTO_AEAD_NONCE_LEN;
    int len = 0, fin = 0;
    if (n > INT_MAX - CRYPTO_AEAD_OVERHEAD || adlen > INT_MAX
        || crypto_random(nonce, CRYPTO_AEAD_NONCE_LEN) == -1)
        return -1;
    if (EVP_EncryptInit_ex(a->seal, NULL, NULL, NULL, nonce) != 1
        || (adlen > 0 && EVP_EncryptUpdate(a->seal, NULL, &len, ad, (int)adlen) != 1)
        || (n > 0 && EVP_EncryptUpdate(a->seal, ct, &len, pt, (int)n) != 1)
        || EVP_EncryptFinal_ex(a->seal, ct + (n > 0 ? len : 0), &fin) != 1
        || EVP_CIPHER_CTX_ctrl(a->seal, EVP_CTRL_AEAD_GET_TAG, CRYPTO_AEAD_TAG_LEN, ct + n) != 1) {
        OPENSSL_cleanse(out, n + CRYPTO_AEAD_OVERHEAD);
        return -1;
    }
    return 0;
}

int
crypto_aead_open(struct crypto_aead *a, const void *ad, size_t adlen, const unsigned char *box,
                 size_t n, unsigned char *out)
{
    if (n < CRYPTO_AEAD_OVERHEAD || n > INT_MAX || adlen > INT_MAX)
        return -1;
    size_t ctlen = n - CRYPTO_AEAD_OVERHEAD;
    const unsigned char *ct = box + CRYPTO_AEAD_NONCE_LEN;
    unsigned char tag[CRYPTO_AEAD_TAG_LEN];
    memcpy(tag, ct + ctlen, sizeof tag); /* the ctrl takes a non-const pointer */
    int len = 0, fin = 0;
    /*
     * GCM decrypts before the tag is known: out holds the plaintext of a forged box until the
     * final check fails, so out is wiped on every failure, whichever step it was.
     */
    bool ok = EVP_DecryptInit_ex(a->open, NULL, NULL, NULL, box) == 1
              && (adlen == 0 || EVP_DecryptUpdate(a->open, NULL, &len, ad, (int)adlen) == 1)
              && (ctlen == 0 || EVP_DecryptUpdate(a->open, out, &len, ct, (int)ctlen) == 1)
              && EVP_CIPHER_CTX_ctrl(a->open, EVP_CTRL_AEAD_SET_TAG, sizeof tag, tag) == 1
              && EVP_DecryptFinal_ex(a->open, out + (ctlen > 0 ? len : 0), &fin) == 1;
    if (!ok)
        OPENSSL_cleanse(out, ctlen);
    return ok ? 0 : -1;
}

static struct crypto_key *
crypto_key_wrap(EVP_PKEY *pkey, enum crypto_alg alg)
{
    struct crypto_key *k = xmalloc(sizeof(*k));
    k->pkey = pkey;
    k->alg = alg;
    return k;
}

/* EVP_PKEY_fromdata with the parameters built in bld; NULL on any failure. */
static EVP_PKEY *
crypto_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1
        || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

struct crypto_key *
crypto_key_rsa(const unsigned char *n, size_t nlen, const unsigned char *e, size_t elen,
               const char **why)
{
    if (nlen == 0 || nlen > 2048 || elen == 0 || elen > 8) {
        *why = "RSA n or e has an impossible length";
        return NULL;
    }
    BIGNUM *bn = BN_bin2bn(n, (int)nlen, NULL), *be = BN_bin2bn(e, (int)elen, NULL);
    /* e = 1 makes every "signature" its own message: a token forged with no key. */
    if (be != NULL && (!BN_is_odd(be) || BN_num_bits(be) < 2 || BN_get_word(be) < 3)) {
        BN_free(bn);
        BN_free(be);
        *why = "RSA public exponent must be odd and at least 3";
        return NULL;
    }
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bn != NULL && be != NULL && bld != NULL
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) == 1
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) == 1)
        pkey = crypto_fromdata("RSA", bld);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    if (pkey == NULL) {
        *why = "not a valid RSA public key";
        return NULL;
    }
    if (EVP_PKEY_get_bits(pkey) < 2048) {
        EVP_PKEY_free(pkey);
        *why = "RSA keys must have at least 2048 bits";
        return NULL;
    }
    return crypto_key_wrap(pkey, CRYPTO_RS256);
}

struct crypto_key *
crypto_key_p256(const unsigned char *x, size_t xlen, const unsigned char *y, size_t ylen,
                const char **why)
{
    if (xlen != 32 || ylen != 32) {
        *why = "P-256 x and y must be 32 bytes each";
        return NULL;
    }
    unsigned char point[65];
    point[0] = 0x04; /* uncompressed */
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bld != NULL
        && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point))
               == 1)
        pkey = crypto_fromdata("EC", bld);
    OSSL_PARAM_BLD_free(bld);
    if (pkey == NULL) {
        *why = "not a point on P-256";
        return NULL;
    }
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    bool ok = ctx != NULL && EVP_PKEY_public_check(ctx) == 1;
    EVP_PKEY_CTX_free(ctx);
    if (!ok) {
        EVP_PKEY_free(pkey);
        *why = "not a point on P-256";
        return NULL;
    }
    return crypto_key_wrap(pkey, CRYPTO_ES256);
}

struct crypto_key *
crypto_key_ed25519(const unsigned char *x, size_t xlen, const char **why)
{
    EVP_PKEY *pkey =
        xlen == 32 ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, xlen) : NULL;
    if (pkey == NULL) {
        *why = "Ed25519 x must be 32 bytes";
        return NULL;
    }
    return crypto_key_wrap(pkey, CRYPTO_EDDSA);
}

enum crypto_alg
crypto_key_alg(const struct crypto_key *k)
{
    return k->alg;
}

void
crypto_key_free(struct crypto_key *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

/* A JWS ES256 signature (r || s, 32 bytes each) as the DER ECDSA-Sig-Value OpenSSL verifies. */
static int
crypto_es256_der(const unsigned char *sig, size_t siglen, unsigned char **der)
{
    if (siglen != 64)
        return -1;
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
    if (es == NULL || r == NULL || s == NULL || ECDSA_SIG_set0(es, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(es);
        return -1;
    }
    int len = i2d_ECDSA_SIG(es, der);
    ECDSA_SIG_free(es);
    return len;
}

bool
crypto_verify(const struct crypto_key *k, const void *data, size_t n, const unsigned char *sig,
              size_t siglen)
{
    unsigned char *der = NULL;
    if (k->alg == CRYPTO_ES256) {
        int len = crypto_es256_der(sig, siglen, &der);
        if (len <= 0)
            return false;
        sig = der;
        siglen = (size_t)len;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    const EVP_MD *digest = k->alg == CRYPTO_EDDSA ? NULL : EVP_sha256();
    bool ok = md != NULL && EVP_DigestVerifyInit(md, NULL, digest, NULL, k->pkey) == 1
              && EVP_DigestVerify(md, sig, siglen, data, n) == 1;
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    return ok;
}
