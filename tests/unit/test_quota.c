/* SPDX-License-Identifier: MIT */
/*
 * quota: the per-principal counts of both eras. Entries are kept by (server, principal), apart
 * from each other however the names split; an entry lives exactly while one of its counts is not
 * 0 (a pointer taken stays valid until its last count goes); quota_fits reads the limit (0: none);
 * the totals and the number of entries are what was taken and not given back. Through quota.h.
 */
#include <stdio.h>

#include <criterion/criterion.h>

#include "quota.h"

static void
cleanup(void)
{
    quota_module_free();
}

TestSuite(quota, .timeout = 10, .fini = cleanup);

Test(quota, counts_by_server_and_principal)
{
    struct quota *a = quota_take("a", "bc", QUOTA_CALLS, 1);
    struct quota *b = quota_take("ab", "c", QUOTA_CALLS, 2);
    cr_assert_neq(a, b, "\"a\"+\"bc\" and \"ab\"+\"c\" are two entries");
    cr_assert_eq(quota_take("a", "bc", QUOTA_HELD, 1), a, "the same names: the same entry");
    cr_assert_eq(quota_of("a", "bc", QUOTA_CALLS), 1);
    cr_assert_eq(quota_of("a", "bc", QUOTA_HELD), 1);
    cr_assert_eq(quota_of("ab", "c", QUOTA_CALLS), 2);
    cr_assert_eq(quota_of("a", "nobody", QUOTA_CALLS), 0);
    cr_assert_str_eq(quota_server(b), "ab");
    cr_assert_str_eq(quota_principal(b), "c");
    cr_assert_eq(quota_total(QUOTA_CALLS), 3);
    cr_assert_eq(quota_entries(), 2);
    cr_assert(quota_fits("ab", "c", QUOTA_CALLS, 3));
    cr_assert_not(quota_fits("ab", "c", QUOTA_CALLS, 2));
    cr_assert(quota_fits("ab", "c", QUOTA_CALLS, 0), "0: no limit");
    cr_assert_eq(quota_take(QUOTA_GATEWAY, NULL, QUOTA_SESSIONS, 1),
                 quota_take("", "", QUOTA_SESSIONS, 0), "a NULL principal is \"\"");
}

Test(quota, an_entry_goes_with_its_last_count)
{
    struct quota *q = quota_take("s", "p", QUOTA_CALLS, 1);
    quota_add(q, QUOTA_LISTENS, 2);
    quota_give(q, QUOTA_CALLS, 1);
    cr_assert_eq(quota_entries(), 1, "listens still count");
    quota_give(q, QUOTA_LISTENS, 2);
    cr_assert_eq(quota_entries(), 0);
    cr_assert_eq(quota_of("s", "p", QUOTA_LISTENS), 0);
    /* Many entries: the table grows and every one is found again, then all go. */
    char name[16];
    struct quota *e[200];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "p%d", i);
        e[i] = quota_take("s", name, QUOTA_SESSIONS, (uint64_t)i + 1);
    }
    cr_assert_eq(quota_entries(), 200);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "p%d", i);
        cr_assert_eq(quota_of("s", name, QUOTA_SESSIONS), (uint64_t)i + 1);
        quota_give(e[i], QUOTA_SESSIONS, (uint64_t)i + 1);
    }
    cr_assert_eq(quota_entries(), 0);
    cr_assert_eq(quota_total(QUOTA_SESSIONS), 0);
}

Test(quota, a_pinned_entry_stays_with_every_count_0)
{
    struct quota *pin = quota_pin("s", "p");
    cr_assert_eq(quota_entries(), 1, "a pin makes the entry");
    struct quota *q = quota_take("s", "p", QUOTA_CALLS, 1);
    cr_assert_eq(q, pin, "the pinned entry is the one counts go to");
    quota_give(q, QUOTA_CALLS, 1);
    cr_assert_eq(quota_entries(), 1, "pinned: kept with its counts at 0");
    cr_assert_eq(quota_of("s", "p", QUOTA_CALLS), 0);
    struct quota *again = quota_pin("s", "p");
    cr_assert_eq(again, pin, "a second pin, the same entry");
    quota_add(pin, QUOTA_CALLS, 2);
    quota_unpin(again);
    quota_unpin(pin);
    cr_assert_eq(quota_entries(), 1, "unpinned, its counts keep it");
    cr_assert_eq(quota_of("s", "p", QUOTA_CALLS), 2);
    quota_give(pin, QUOTA_CALLS, 2);
    cr_assert_eq(quota_entries(), 0, "the last count given back, unpinned: gone");
    quota_unpin(NULL);
}
