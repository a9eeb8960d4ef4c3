/* SPDX-License-Identifier: MIT */
/*
 * What a sealed session id costs per call (mcp/session_seal.c): seal, open (good, forged, unknown
 * key), the principal's check, beside minting a random id today (crypto_session_id). Every request
 * of a pooled session will open its id, so open is the figure that counts. One thread, the real
 * code, a keyring of two keys; each figure is the mean CPU time (the thread's clock, so other
 * processes on the cores do not count) of N calls after a warm-up of N / 10.
 *   build/tests/bench/seal_bench [N]      (N: 200000 by default)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto.h"
#include "keyring.h"
#include "session_seal.h"
#include "util.h"

static double
bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: a loaded machine shares its cores */
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile unsigned bench_sink; /* keeps the calls from being optimised away */

enum bench_op { SEAL, OPEN, OPEN_FORGED, OPEN_UNKNOWN, PRINCIPAL, MINT };

static void
bench_one(enum bench_op op, const struct keyring *kr, const struct keyring *other,
          const struct session_seal_record *r, const char *id, const char *forged, long n)
{
    char out[SESSION_SEAL_ID_MAX + 1];
    struct session_seal_record back;
    size_t len = strlen(id);
    for (long i = 0; i < n; i++) {
        switch (op) {
        case SEAL:
            if (session_seal(kr, r, out) != 0)
                abort();
            bench_sink += (unsigned char)out[5];
            break;
        case OPEN:
            if (session_seal_open(kr, id, len, r->issued_s, 3600, &back) != SESSION_SEAL_OK)
                abort();
            bench_sink += back.flags;
            break;
        case OPEN_FORGED:
            bench_sink += session_seal_open(kr, forged, len, r->issued_s, 3600, &back);
            break;
        case OPEN_UNKNOWN:
            bench_sink += session_seal_open(other, id, len, r->issued_s, 3600, &back);
            break;
        case PRINCIPAL:
            bench_sink += session_seal_principal_is(r, "sub:0b3f2a4c-1d5e-4f60-8a7b-9c0d1e2f3a4b");
            break;
        case MINT:
            if (crypto_session_id("g1", out) != 0)
                abort();
            bench_sink += (unsigned char)out[5];
            break;
        }
    }
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    if (n <= 0) {
        fprintf(stderr, "usage: seal_bench [N]\n");
        return 2;
    }
    static const char keys[] = "6b1f0c2d9a8e7f60514233241506f7e8d9cabbac9d8e7f6051423324150617a8\n"
                               "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw=\n";
    static const char other_key[] = "c2VjcmV0LWtleS1udW1iZXItdGhyZWUtZm9yLXRlc3Q\n";
    static const char caps[] = "{\"roots\":{\"listChanged\":true},\"sampling\":{}}";
    char err[256];
    struct keyring *kr =
        keyring_parse(keys, strlen(keys), "bench", SESSION_SEAL_PURPOSE, err, sizeof err);
    struct keyring *other =
        keyring_parse(other_key, strlen(other_key), "bench", SESSION_SEAL_PURPOSE, err, sizeof err);
    struct session_seal_record r;
    if (kr == NULL || other == NULL
        || session_seal_record_init(&r, "sub:0b3f2a4c-1d5e-4f60-8a7b-9c0d1e2f3a4b", "everything",
                                    "2025-06-18", caps, strlen(caps), 5, 1785000000)
               != 0) {
        fprintf(stderr, "seal_bench: %s\n", err);
        return 1;
    }
    char id[SESSION_SEAL_ID_MAX + 1], forged[SESSION_SEAL_ID_MAX + 1];
    if (session_seal(kr, &r, id) != 0)
        return 1;
    memcpy(forged, id, sizeof id);
    forged[40] = forged[40] == 'A' ? 'B' : 'A';
    static const char *const names[] = { "seal",
                                         "open",
                                         "open, forged",
                                         "open, unknown key",
                                         "principal check",
                                         "random id today (crypto_session_id)" };
    printf("sealed id: %zu characters; %ld calls each\n", strlen(id), n);
    for (int op = SEAL; op <= MINT; op++) {
        bench_one((enum bench_op)op, kr, other, &r, id, forged, n / 10);
        double t0 = bench_now_ns();
        bench_one((enum bench_op)op, kr, other, &r, id, forged, n);
        double per = (bench_now_ns() - t0) / (double)n;
        printf("%-38s %8.0f ns\n", names[op], per);
    }
    keyring_free(kr);
    keyring_free(other);
    return 0;
}
