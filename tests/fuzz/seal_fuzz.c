/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: sealed session ids (mcp/session_seal.c) and key files (core/keyring.c). The target
 * holds two keyrings: A (two keys, the first seals) and B (one other key). The first byte picks
 * what the rest is:
 *   0: an id, opened as it is with A and with B (the corpus holds ids A sealed at FZ_NOW, so
 *      mutations of good ids are reached);
 *   1: a record, its key and its lifetime, and a spoiling of its id: the record is sealed with A or
 *      B, issued within its lifetime or past it or too far in the future, then a byte changed, the
 *      id cut or grown, or left as it is, and opened with A;
 *   2: a key file's text, parsed; a keyring it gives seals and opens a record.
 * Invariants: nothing crashes or reads past the id (ASan); an id that opens is at most
 * SESSION_SEAL_ID_MAX visible characters, and its record re-seals to an id that opens to an equal
 * record; in mode 1 an untouched id opens exactly when it was sealed with A within its lifetime,
 * with the record sealed, and otherwise says why (UNKNOWN_KEY for B, EXPIRED), and a touched id
 * never opens.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "keyring.h"
#include "session_seal.h"
#include "util.h"

#define FZ_NOW     1785000000 /* the corpus's ids were sealed a little before */
#define FZ_MAX_AGE 86400
/* Keys of this target only (tests/fuzz/corpus/seal was sealed with the first). */
#define FZ_KEYS_A                                                        \
    "# A: the first seals\n"                                             \
    "6b1f0c2d9a8e7f60514233241506f7e8d9cabbac9d8e7f6051423324150617a8\n" \
    "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw=\n"
#define FZ_KEYS_B "c2VjcmV0LWtleS1udW1iZXItdGhyZWUtZm9yLXRlc3Q\n"

static struct keyring *ring_a, *ring_b;

static struct keyring *
fz_ring(const char *text)
{
    char err[512];
    struct keyring *kr =
        keyring_parse(text, strlen(text), "fuzz", SESSION_SEAL_PURPOSE, err, sizeof err);
    FUZZ_CHECK(kr != NULL, "the target's keys: %s", err);
    return kr;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ring_a = fz_ring(FZ_KEYS_A);
    ring_b = fz_ring(FZ_KEYS_B);
    return 0;
}

/* What the input still holds, read from the front. */
struct fz_in {
    const uint8_t *p;
    size_t n;
};

static uint64_t
fz_take(struct fz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v = v << 8 | (in->n > 0 ? *in->p : 0);
        if (in->n > 0) {
            in->p++;
            in->n--;
        }
    }
    return v;
}

/* A string of at most max bytes (a length byte, then the bytes) into out (room for max + 1). */
static void
fz_take_str(struct fz_in *in, char *out, size_t max)
{
    size_t len = (size_t)fz_take(in, 1) % (max + 1);
    if (len > in->n)
        len = in->n;
    memcpy(out, in->p, len);
    out[len] = '\0';
    in->p += len;
    in->n -= len;
}

/* An id that opened: its form, and its record sealed again opens to the same record. */
static void
fz_check_opened(const char *id, size_t len, const struct session_seal_record *r,
                const struct keyring *kr)
{
    FUZZ_CHECK(len <= SESSION_SEAL_ID_MAX && session_seal_is(id, len), "opened: %zu bytes", len);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(id[i] >= 0x21 && id[i] <= 0x7e, "opened with byte 0x%02x", (uint8_t)id[i]);
    char again[SESSION_SEAL_ID_MAX + 1];
    struct session_seal_record back;
    FUZZ_CHECK(session_seal(kr, r, again) == 0, "an opened record does not seal again");
    enum session_seal_verdict v =
        session_seal_open(kr, again, strlen(again), r->issued_s, 0, &back);
    FUZZ_CHECK(v == SESSION_SEAL_OK, "sealed again: %s", session_seal_verdict_text(v));
    FUZZ_CHECK(memcmp(r, &back, sizeof back) == 0, "sealed again: another record");
}

static void
fz_open_as_is(const uint8_t *data, size_t n)
{
    char *id = malloc(n > 0 ? n : 1); /* exactly n bytes: ASan sees a read past them */
    memcpy(id, data, n);
    struct session_seal_record r;
    const struct keyring *rings[] = { ring_a, ring_b };
    for (size_t k = 0; k < ARRAY_LEN(rings); k++) {
        enum session_seal_verdict v = session_seal_open(rings[k], id, n, FZ_NOW, FZ_MAX_AGE, &r);
        FUZZ_CHECK(v >= SESSION_SEAL_OK && v <= SESSION_SEAL_EXPIRED, "verdict %d", (int)v);
        if (v == SESSION_SEAL_OK)
            fz_check_opened(id, n, &r, rings[k]);
    }
    free(id);
}

static void
fz_seal_and_spoil(struct fz_in *in)
{
    unsigned how = (unsigned)fz_take(in, 1);
    bool other_key = how & 1, past = how & 2, future = how & 4;
    unsigned spoil = how >> 3 & 3; /* 0: none, 1: a byte changed, 2: cut, 3: grown */
    uint64_t age = fz_take(in, 3);
    uint32_t flags = (uint32_t)fz_take(in, 4);
    char server[SESSION_SEAL_SERVER_MAX + 1], rev[SESSION_SEAL_REVISION_MAX + 1], principal[300];
    fz_take_str(in, server, SESSION_SEAL_SERVER_MAX);
    fz_take_str(in, rev, SESSION_SEAL_REVISION_MAX);
    fz_take_str(in, principal, sizeof principal - 1);
    int64_t issued = past     ? FZ_NOW - FZ_MAX_AGE - 1 - (int64_t)age
                     : future ? FZ_NOW + SESSION_SEAL_SKEW_S + 1 + (int64_t)age
                              : FZ_NOW - (int64_t)(age % (FZ_MAX_AGE + 1));
    struct session_seal_record r, back;
    /* the rest is the capabilities' bytes, and then the spoiling */
    size_t caps_len = (size_t)fz_take(in, 1); /* apart: fz_take changes in->n */
    caps_len %= in->n + 1;
    const uint8_t *caps = in->p;
    in->p += caps_len;
    in->n -= caps_len;
    if (session_seal_record_init(&r, principal, server, rev, caps, caps_len, flags, issued) == -1)
        return; /* a server or revision out of bounds: nothing to seal */
    char id[SESSION_SEAL_ID_MAX + 8], orig[SESSION_SEAL_ID_MAX + 1];
    FUZZ_CHECK(session_seal(other_key ? ring_b : ring_a, &r, id) == 0, "a good record not sealed");
    size_t len = strlen(id);
    FUZZ_CHECK(len <= SESSION_SEAL_ID_MAX, "sealed: %zu characters", len);
    memcpy(orig, id, len + 1);
    size_t at = (size_t)fz_take(in, 1);
    uint8_t x = (uint8_t)fz_take(in, 1);
    if (spoil == 1)
        id[at % len] = (char)(id[at % len] ^ x);
    else if (spoil == 2)
        len = at % len;
    else if (spoil == 3) {
        size_t more = 1 + at % 6;
        memset(id + len, x, more);
        len += more;
    }
    bool untouched = len == strlen(orig) && memcmp(id, orig, len) == 0;
    enum session_seal_verdict v = session_seal_open(ring_a, id, len, FZ_NOW, FZ_MAX_AGE, &back);
    if (!untouched) {
        FUZZ_CHECK(v != SESSION_SEAL_OK, "a spoiled id opened (spoil %u)", spoil);
        return;
    }
    enum session_seal_verdict want = other_key        ? SESSION_SEAL_UNKNOWN_KEY
                                     : past || future ? SESSION_SEAL_EXPIRED
                                                      : SESSION_SEAL_OK;
    FUZZ_CHECK(v == want, "verdict %s, want %s", session_seal_verdict_text(v),
               session_seal_verdict_text(want));
    if (v == SESSION_SEAL_OK) {
        FUZZ_CHECK(memcmp(&r, &back, sizeof r) == 0, "opened to another record");
        FUZZ_CHECK(session_seal_principal_is(&back, principal), "the principal lost");
        fz_check_opened(id, len, &back, ring_a);
    }
}

static void
fz_key_file(const uint8_t *data, size_t n)
{
    char err[512] = "";
    struct keyring *kr =
        keyring_parse((const char *)data, n, "fuzz", SESSION_SEAL_PURPOSE, err, sizeof err);
    if (kr == NULL) {
        FUZZ_CHECK(err[0] != '\0', "refused without a reason");
        return;
    }
    FUZZ_CHECK(keyring_count(kr) >= 1 && keyring_count(kr) <= KEYRING_KEYS_MAX, "%zu keys",
               keyring_count(kr));
    struct session_seal_record r, back;
    char id[SESSION_SEAL_ID_MAX + 1];
    FUZZ_CHECK(session_seal_record_init(&r, "sub:fuzz", "files", "2025-11-25", "{}", 2, 1, FZ_NOW)
                   == 0,
               "the fixed record");
    FUZZ_CHECK(session_seal(kr, &r, id) == 0, "a parsed keyring cannot seal");
    enum session_seal_verdict v = session_seal_open(kr, id, strlen(id), FZ_NOW, 0, &back);
    FUZZ_CHECK(v == SESSION_SEAL_OK && memcmp(&r, &back, sizeof r) == 0, "%s",
               session_seal_verdict_text(v));
    keyring_free(kr);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    struct fz_in in = { data + 1, size - 1 };
    switch (data[0] % 3) {
    case 0:
        fz_open_as_is(in.p, in.n);
        break;
    case 1:
        fz_seal_and_spoil(&in);
        break;
    default:
        fz_key_file(in.p, in.n);
        break;
    }
    return 0;
}
