/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_SESSION_SEAL_H
#define MCPGW_SESSION_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crypto.h"
#include "keyring.h"
#include "util.h"

/*
 * Sealed session ids: what a legacy session fixes at initialize, sealed into its Mcp-Session-Id
 * with a key of a keyring, so that any instance holding the key can serve the session and a
 * restart loses none. The id is
 *   "~1" base64url(key id 4 | nonce 12 | AES-256-GCM(record) | tag 16)
 * with "~1" and the key id as associated data; the record is
 *   issued 8 (unix seconds, big-endian) | SHA-256 of the principal 32 | SHA-256 of the client's
 *   capabilities 32 | flags 4 | revision length 1 | revision | server length 1 | server.
 * At most SESSION_SEAL_ID_MAX characters, all base64url but the '~' (0x21..0x7E, the spec's rule
 * for Mcp-Session-Id). A minted random id (crypto_session_id: 22 base64url characters, after an
 * instance_id of [A-Za-z0-9_-] and a dot) never starts with '~', so the two never meet, and no
 * nginx map of instance prefixes routes a sealed id: it goes round-robin.
 *
 * What the seal gives: nobody without the key can make an id that opens, change one that does
 * (every byte is under the tag), or read what it holds (the principal and the capabilities are
 * digests besides). What it does not: an id is a bearer secret for its lifetime like any session
 * id, so whoever steals one can replay it until it expires; hence the principal's digest, which
 * the caller compares with the principal of the request's own token on every request
 * (session_seal_principal_is): a stolen id is useless without that principal's token too.
 */
#define SESSION_SEAL_PREFIX       "~1"
#define SESSION_SEAL_ID_MAX       256       /* characters, without the NUL */
#define SESSION_SEAL_SERVER_MAX   64        /* a server's name (the configuration's bound) */
#define SESSION_SEAL_REVISION_MAX 16        /* a protocol revision's name (a date: 10 today) */
#define SESSION_SEAL_SKEW_S       60        /* an id issued this far in the future still opens */
#define SESSION_SEAL_PURPOSE      "session" /* the keyring purpose of session ids */
#define SESSION_SEAL_LABEL_MAX    24 /* "sealed:" and 16 hex digits of the id's SHA-256, NUL */

/* What a sealed id holds. Zeroed past each string's NUL, so two equal records compare equal. */
struct session_seal_record {
    int64_t issued_s;                           /* unix seconds, >= 0 */
    unsigned char principal[CRYPTO_SHA256_LEN]; /* SHA-256 of the principal's name */
    unsigned char caps[CRYPTO_SHA256_LEN];      /* SHA-256 of the capabilities' canonical bytes */
    uint32_t flags; /* the caller's bits (the capabilities it acts on) */
    char revision[SESSION_SEAL_REVISION_MAX + 1];
    char server[SESSION_SEAL_SERVER_MAX + 1];
};

enum session_seal_verdict {
    SESSION_SEAL_OK = 0,
    SESSION_SEAL_MALFORMED,    /* not a sealed id of this version, or not base64url */
    SESSION_SEAL_WRONG_LENGTH, /* shorter or longer than any sealed id can be */
    SESSION_SEAL_UNKNOWN_KEY,  /* sealed with a key the keyring does not hold */
    SESSION_SEAL_FORGED,       /* the tag does not verify: changed, cut, or made up */
    SESSION_SEAL_EXPIRED,      /* issued + max age is past, or issued too far in the future */
};

/*
 * Fills r: principal and caps[0..caps_len) are hashed (the caller chooses the canonical bytes of
 * the capabilities), server (1..SESSION_SEAL_SERVER_MAX) and revision
 * (1..SESSION_SEAL_REVISION_MAX) copied; every byte of both must be visible ASCII. 0, or -1 when a
 * bound or issued_s < 0 fails.
 */
int session_seal_record_init(struct session_seal_record *r, const char *principal,
                             const char *server, const char *revision, const void *caps,
                             size_t caps_len, uint32_t flags, int64_t issued_s) MUSTCHECK;
/*
 * Seals r with the first key of kr (not NULL; keyring_load with SESSION_SEAL_PURPOSE) into out
 * (NUL-terminated, at most SESSION_SEAL_ID_MAX characters). 0, or -1 when r breaks a bound or the
 * CSPRNG fails. Allocates nothing.
 */
int session_seal(const struct keyring *kr, const struct session_seal_record *r,
                 char out[SESSION_SEAL_ID_MAX + 1]) MUSTCHECK;
/*
 * Opens id[0..len) (any bytes, no NUL needed) with the key of kr (not NULL) its key id names: one
 * AEAD attempt. SESSION_SEAL_OK fills *r; any other verdict leaves *r zeroed. Expired when
 * issued_s + max_age_s < now_s (an id opens through its last second) or issued_s > now_s +
 * SESSION_SEAL_SKEW_S. Allocates nothing.
 */
enum session_seal_verdict session_seal_open(const struct keyring *kr, const char *id, size_t len,
                                            int64_t now_s, uint64_t max_age_s,
                                            struct session_seal_record *r);
/* Whether an id issued at issued_s is past its age at now_s (session_seal_open's expiry rule). */
bool session_seal_expired(int64_t issued_s, int64_t now_s, uint64_t max_age_s);
/*
 * What logs and the access log name a sealed id by (the id is a bearer secret no instance can
 * revoke): "sealed:" and the first 8 bytes of its SHA-256 in hex.
 */
void session_seal_label(const char *id, size_t len, char out[SESSION_SEAL_LABEL_MAX]);
/* Whether id[0..len) is of the sealed family ('~' first), whatever its version or validity. */
bool session_seal_is(const char *id, size_t len);
/* Whether r was sealed for principal: its SHA-256 compared in constant time. */
bool session_seal_principal_is(const struct session_seal_record *r, const char *principal);
/* A static phrase for a verdict, for a log line or an error text (it names no key, no content). */
const char *session_seal_verdict_text(enum session_seal_verdict v);

#endif
