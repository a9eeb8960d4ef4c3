/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' reader of a whole file (a document or a configuration the test holds the code
 * to): its bytes and a NUL, or NULL when it cannot be opened. Criterion asserts the rest.
 */
#ifndef MCPGW_TEST_SLURP_H
#define MCPGW_TEST_SLURP_H

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

static inline char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

#endif
