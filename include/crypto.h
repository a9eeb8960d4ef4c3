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
/* Constant-time equality of two equal-length byte strings. */
bool crypto_equal(const void *a, const void *b, size_t n);

#endif
