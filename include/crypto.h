/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CRYPTO_H
#define MCPGW_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* 128 random bits, base64url: 22 chars; plus an optional "prefix." (instance id, <= 16 chars). */
#define CRYPTO_SESSION_ID_MAX 48

/* Fills buf with bytes from OpenSSL's CSPRNG. */
int crypto_random(void *buf, size_t n) MUSTCHECK;
/*
 * Writes a new session id ("<prefix>.<22 base64url chars>", or no prefix when prefix is "") into
 * out, which holds CRYPTO_SESSION_ID_MAX bytes. Only visible ASCII (0x21-0x7E).
 */
int crypto_session_id(const char *prefix, char out[CRYPTO_SESSION_ID_MAX]) MUSTCHECK;
/* Overwrites n bytes (secrets) in a way the compiler keeps. */
void crypto_cleanse(void *p, size_t n);
/* Constant-time equality of two equal-length byte strings. */
bool crypto_equal(const void *a, const void *b, size_t n);

#define CRYPTO_SHA256_LEN 32

void crypto_sha256(const void *data, size_t n, unsigned char out[CRYPTO_SHA256_LEN]);
/* HMAC-SHA-256 of data[0..n) with key[0..klen) (RFC 2104). 0, or -1 (cannot happen in practice). */
int crypto_hmac_sha256(const void *key, size_t klen, const void *data, size_t n,
                       unsigned char out[CRYPTO_SHA256_LEN]) MUSTCHECK;

/*
 * AEAD: AES-256-GCM with a 96-bit nonce drawn from the CSPRNG for each seal, and a 128-bit tag.
 * A sealed box is nonce (12) | ciphertext (as long as the plaintext) | tag (16). One key's
 * contexts are made once (crypto_aead_new) and reused: a seal or an open sets the nonce and
 * allocates nothing. Random nonces bound one key to about 2^32 seals (NIST SP 800-38D 8.3):
 * rotate long before.
 */
#define CRYPTO_AEAD_KEY_LEN   32
#define CRYPTO_AEAD_NONCE_LEN 12
#define CRYPTO_AEAD_TAG_LEN   16
#define CRYPTO_AEAD_OVERHEAD  (CRYPTO_AEAD_NONCE_LEN + CRYPTO_AEAD_TAG_LEN)

struct crypto_aead;

/* A key's contexts, from key[0..32) (copied into OpenSSL's key schedule); NULL on failure. */
struct crypto_aead *crypto_aead_new(const unsigned char key[CRYPTO_AEAD_KEY_LEN]);
/* Wipes and frees (NULL is nothing). */
void crypto_aead_free(struct crypto_aead *a);
/*
 * Seals pt[0..n) with the associated data ad[0..adlen) (authenticated, not encrypted, not in
 * out) into out, which has room for n + CRYPTO_AEAD_OVERHEAD bytes. 0, or -1 (no randomness, or
 * lengths past INT_MAX).
 */
int crypto_aead_seal(struct crypto_aead *a, const void *ad, size_t adlen, const void *pt, size_t n,
                     unsigned char *out) MUSTCHECK;
/*
 * Opens box[0..n), sealed with the same key and ad, into out (room for n - CRYPTO_AEAD_OVERHEAD
 * bytes). 0, or -1 when n is shorter than the overhead or the tag does not verify (then out
 * holds zeros: nothing of a forged box is ever handed back). The tag is compared in constant
 * time (OpenSSL's), and every failure after the length check takes the same path.
 */
int crypto_aead_open(struct crypto_aead *a, const void *ad, size_t adlen, const unsigned char *box,
                     size_t n, unsigned char *out) MUSTCHECK;

/* The JWS algorithms the gateway verifies (RFC 7518, RFC 8037); each key serves exactly one. */
enum crypto_alg {
    CRYPTO_RS256 = 0, /* RSASSA-PKCS1-v1_5 with SHA-256, RSA keys of at least 2048 bits */
    CRYPTO_ES256,     /* ECDSA P-256 with SHA-256, signature r || s (64 bytes) */
    CRYPTO_EDDSA,     /* Ed25519 */
};

/* A public key for signature checks (an OpenSSL EVP_PKEY inside). */
struct crypto_key;

/*
 * Keys from the raw big-endian parts of a JWK (RFC 7518 section 6): RSA n and e; P-256 x and y
 * (32 bytes each, the point must be on the curve); Ed25519 x (32 bytes). NULL with a static
 * phrase in *why when the parts do not make a usable key.
 */
struct crypto_key *crypto_key_rsa(const unsigned char *n, size_t nlen, const unsigned char *e,
                                  size_t elen, const char **why);
struct crypto_key *crypto_key_p256(const unsigned char *x, size_t xlen, const unsigned char *y,
                                   size_t ylen, const char **why);
struct crypto_key *crypto_key_ed25519(const unsigned char *x, size_t xlen, const char **why);
enum crypto_alg crypto_key_alg(const struct crypto_key *k);
void crypto_key_free(struct crypto_key *k);

/* True when sig is k's algorithm's valid signature of data[0..n) (JWS encoding of the signature).
 */
bool crypto_verify(const struct crypto_key *k, const void *data, size_t n, const unsigned char *sig,
                   size_t siglen);

#endif
