/* SPDX-License-Identifier: MIT */
/* Inside the jsonrpc module: jsonrpc.c (the scanner) and jsonrpc_text.c (string contents). */
#ifndef MCPGW_JSONRPC_INT_H
#define MCPGW_JSONRPC_INT_H

#include <stdbool.h>
#include <stddef.h>

/* The four hex digits at s (at most end) as a code unit, or -1. */
long jsonrpc_hex4(const unsigned char *s, const unsigned char *end);

/*
 * Decodes the body of a string the scanner accepted, s[0..len), into out (not NUL-terminated),
 * *outlen bytes. False when the result would be longer than cap.
 */
bool jsonrpc_unescape(const unsigned char *s, size_t len, char *out, size_t cap, size_t *outlen);

#endif
