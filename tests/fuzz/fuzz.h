/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_FUZZ_H
#define MCPGW_FUZZ_H

/*
 * Shared by the fuzz targets and replay.c: libFuzzer's entry points and the check that turns a
 * broken invariant into a finding (abort, so libFuzzer and the sanitizers report it).
 */

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Every target defines the first; LLVMFuzzerInitialize is optional (replay.c has it weak). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fuzz_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

static inline void
fuzz_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s:%d: invariant broken: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* FUZZ_CHECK(cond, "fmt", ...): a broken invariant is a bug, reported with the input. */
#define FUZZ_CHECK(cond, ...)                           \
    do {                                                \
        if (!(cond))                                    \
            fuzz_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#endif
