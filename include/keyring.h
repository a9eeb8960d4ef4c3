/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_KEYRING_H
#define MCPGW_KEYRING_H

#include <stddef.h>

#include "crypto.h"

/*
 * The keys of a key file, for what the gateway seals and opens again (sealed session ids). The
 * file holds one key a line, each 32 random bytes written as 64 hex digits (openssl rand -hex 32)
 * or in base64 (openssl rand -base64 32; base64url and no padding are taken too); blank lines and
 * lines starting with # are skipped. The first key seals, every key opens: a rotation puts the
 * new key first and keeps the old one below it until what it sealed has expired.
 *
 * A key is never used as it is: each purpose (a short label) derives its own AEAD key from it
 * (HMAC-SHA-256(key, "mcpgw <purpose> aead")) and its key id (the first KEYRING_ID_LEN bytes of
 * HMAC-SHA-256(key, "mcpgw <purpose> id")), so one file may serve two purposes without one's
 * sealed text opening as the other's, and the id, which travels in what is sealed, says nothing
 * of the key. The file's bytes and the keys are wiped as soon as the AEAD contexts hold them; the
 * contexts are wiped when the keyring is freed. Messages name the file and the line, never what
 * the line holds.
 */
#define KEYRING_KEYS_MAX 16
#define KEYRING_ID_LEN   4
#define KEYRING_TEXT_MAX 65536 /* bytes of a key file */

struct keyring;

/*
 * The keyring of the key file path, checked like every secret file (util_file_unsafe with secret:
 * owned by root or this user, writable by neither group nor others, not readable by others).
 * NULL with the reason in err ("PATH line 3: ...") when the file is unsafe, unreadable, or holds
 * a line that is not a key, a key that is not 32 bytes, the same key twice, more than
 * KEYRING_KEYS_MAX keys, or none.
 */
struct keyring *keyring_load(const char *path, const char *purpose, char *err, size_t errlen);
/* The same from text[0..n) already read; name stands for the file in err. */
struct keyring *keyring_parse(const char *text, size_t n, const char *name, const char *purpose,
                              char *err, size_t errlen);
/* Wipes and frees (NULL is nothing). */
void keyring_free(struct keyring *kr);
size_t keyring_count(const struct keyring *kr);
/* The sealing key (the file's first), its id into id. */
struct crypto_aead *keyring_sealer(const struct keyring *kr, unsigned char id[KEYRING_ID_LEN]);
/* The key whose id is id, or NULL: what was sealed with it can be opened by one attempt. */
struct crypto_aead *keyring_find(const struct keyring *kr, const unsigned char id[KEYRING_ID_LEN]);

#endif
