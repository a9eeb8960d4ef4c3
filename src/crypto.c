/* SPDX-License-Identifier: MIT */
/*
 * The gateway's only use of OpenSSL: random session ids from the CSPRNG and constant-time
 * comparison. TLS is not here: it ends in nginx (DESIGN.md section 8).
 */
#include "crypto.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

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
