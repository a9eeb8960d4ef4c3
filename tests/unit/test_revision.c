/* SPDX-License-Identifier: MIT */
/*
 * The revision table: lookups, the lists error texts are made of, and that the table is in order.
 * The sources are checked too: outside revision.c no code line of src/ or include/ names a
 * revision's date (comments may), so every decision by revision goes through the table.
 */
#include <dirent.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "revision.h"

TestSuite(revision, .timeout = 10);

Test(revision, find_knows_each_and_only_exact_names)
{
    cr_assert_not_null(revision_named("2025-06-18"));
    cr_assert_str_eq(revision_find("2025-03-26 trailing", 10)->name, "2025-03-26");
    cr_assert_null(revision_named("2025-06-1"));
    cr_assert_null(revision_named("2025-06-180"));
    cr_assert_null(revision_named(""));
    cr_assert_null(revision_named("2099-01-01"));
}

Test(revision, transports_and_features)
{
    cr_assert(revision_over(revision_named("2024-11-05"), REVISION_HTTP_SSE));
    cr_assert(!revision_over(revision_named("2024-11-05"), REVISION_STREAMABLE));
    cr_assert(revision_over(revision_named("2025-11-25"), REVISION_SESSIONS));
    cr_assert(!revision_over(revision_named("2026-07-28"), REVISION_SESSIONS));
    cr_assert(revision_over(revision_named("2026-07-28"), REVISION_STATELESS));
    cr_assert(!revision_over(NULL, ~0u));
    cr_assert(revision_named("2025-03-26")->batches);
    cr_assert(!revision_named("2025-06-18")->batches);
    cr_assert(revision_named("2025-11-25")->polling);
    cr_assert(!revision_named("2025-06-18")->polling);
    cr_assert(revision_named("2025-03-26")->resumable);
    cr_assert(!revision_named("2024-11-05")->resumable);
    cr_assert(!revision_named("2026-07-28")->resumable);
    cr_assert(revision_named("2026-07-28")->input_rounds);
    cr_assert(!revision_named("2025-11-25")->input_rounds);
    cr_assert(revision_removed(revision_named("2026-07-28"), "initialize"));
    cr_assert(revision_removed(revision_named("2026-07-28"), "sampling/createMessage"));
    cr_assert(!revision_removed(revision_named("2026-07-28"), "tools/call"));
    cr_assert(!revision_removed(revision_named("2025-11-25"), "initialize"));
}

Test(revision, lists_are_oldest_first)
{
    cr_assert_str_eq(revision_list(REVISION_STREAMABLE), "2025-03-26, 2025-06-18, 2025-11-25");
    cr_assert_str_eq(revision_list(REVISION_SESSIONS),
                     "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25");
    cr_assert_str_eq(revision_list(REVISION_STATELESS), "2026-07-28");
    cr_assert_str_eq(revision_list(0), "");
    cr_assert_str_eq(revision_list_batches(), "2025-03-26");
    const char *const *n = revision_names(REVISION_STREAMABLE | REVISION_STATELESS);
    size_t k = 0;
    for (; n[k] != NULL; k++)
        if (k > 0)
            cr_assert_lt(strcmp(n[k - 1], n[k]), 0, "%s before %s", n[k - 1], n[k]);
    cr_assert_eq(k, 4);
    cr_assert_str_eq(revision_newest(REVISION_STREAMABLE)->name, "2025-11-25");
    cr_assert_str_eq(revision_newest(REVISION_SESSIONS | REVISION_STATELESS)->name, "2026-07-28");
    cr_assert_null(revision_newest(0));
}

/* A date in quotes on a line that is code, not comment. */
static bool
revision_code_names_date(const char *line)
{
    static regex_t re;
    static bool made;
    if (!made) {
        cr_assert_eq(
            regcomp(&re, "\"20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]\"", REG_EXTENDED | REG_NOSUB), 0);
        made = true;
    }
    const char *s = line + strspn(line, " \t");
    if (s[0] == '*' || strncmp(s, "/*", 2) == 0 || strncmp(s, "//", 2) == 0)
        return false;
    return regexec(&re, line, 0, NULL, 0) == 0;
}

/* Reads the .c and .h files of dir and its folders (one level: the layers); counts offenders. */
static size_t
revision_scan_dir(const char *dir, bool top, size_t *files)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    size_t found = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[512], line[1024];
        size_t n = strlen(e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (top && e->d_type == DT_DIR && e->d_name[0] != '.') {
            found += revision_scan_dir(path, false, files);
            continue;
        }
        if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 && strcmp(e->d_name + n - 2, ".h") != 0)
            || strcmp(e->d_name, "revision.c") == 0)
            continue;
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "%s", path);
        (*files)++;
        for (unsigned no = 1; fgets(line, sizeof line, f) != NULL; no++)
            if (revision_code_names_date(line)) {
                cr_log_error("%s:%u names a revision outside revision.c: %s", path, no, line);
                found++;
            }
        fclose(f);
    }
    closedir(d);
    return found;
}

Test(revision, no_source_outside_the_table_names_a_revision)
{
    size_t files = 0;
    size_t found = revision_scan_dir(MCPGW_SOURCE_ROOT "/src", true, &files)
                   + revision_scan_dir(MCPGW_SOURCE_ROOT "/include", false, &files);
    cr_assert_gt(files, 40, "only %zu source files read", files);
    cr_assert_eq(found, 0, "%zu code lines name a revision's date (see the log)", found);
}
