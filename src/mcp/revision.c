/* SPDX-License-Identifier: MIT */
/*
 * The revision table (revision.h). The lists and texts made from it are built once, on first use,
 * into static storage: the table is constant, and so are they.
 */
#include "revision.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

/* What 2026-07-28 removed: the session's handshake and the requests a server made of a client. */
static const char *const revision_removed_2026[] = {
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/list",
    "tasks/result",
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
    NULL,
};
static const char *const revision_removed_none[] = { NULL };

/* Oldest first. */
static const struct revision revision_table[] = {
    /* name, transport, batches, polling, resumable, input_rounds, result_fields, tasks, removed */
    { "2024-11-05", REVISION_HTTP_SSE, false, false, false, false, false, false, revision_removed_none },
    { "2025-03-26", REVISION_STREAMABLE, true, false, true, false, false, false, revision_removed_none },
    { "2025-06-18", REVISION_STREAMABLE, false, false, true, false, false, false, revision_removed_none },
    { "2025-11-25", REVISION_STREAMABLE, false, true, true, false, false, true, revision_removed_none },
    { "2026-07-28", REVISION_STATELESS, false, false, false, true, true, false, revision_removed_2026 },
#ifdef MCPGW_TEST_STATELESS_ROW
    /*
     * Test builds only (tests/unit/meson.build, tests/fixtures/meson.build compile this file a
     * second time with the define; the gateway's own build never has it): a made-up later
     * stateless row that behaves as 2026-07-28, to show that such a row is all it takes.
     */
    { MCPGW_TEST_STATELESS_ROW, REVISION_STATELESS, false, false, false, true, true, false,
      revision_removed_2026 },
#endif
};
#define REVISION_N        ARRAY_LEN(revision_table)
_Static_assert(ARRAY_LEN(revision_table) <= REVISION_SET_MAX, "a revision set is 32 bits");
#define REVISION_MASKS    8 /* every combination of the three transport bits */
#define REVISION_NAME_MAX 16

const struct revision *
revision_find(const char *v, size_t len)
{
    for (size_t i = 0; i < REVISION_N; i++)
        if (strlen(revision_table[i].name) == len && memcmp(revision_table[i].name, v, len) == 0)
            return &revision_table[i];
    return NULL;
}

const struct revision *
revision_named(const char *v)
{
    return revision_find(v, strlen(v));
}

bool
revision_over(const struct revision *r, unsigned mask)
{
    return r != NULL && (r->transport & mask) != 0;
}

const char *const *
revision_names(unsigned mask)
{
    static const char *names[REVISION_MASKS][REVISION_N + 1];
    static bool made[REVISION_MASKS];
    mask &= REVISION_MASKS - 1;
    if (!made[mask]) {
        size_t k = 0;
        for (size_t i = 0; i < REVISION_N; i++)
            if (revision_over(&revision_table[i], mask))
                names[mask][k++] = revision_table[i].name;
        names[mask][k] = NULL;
        made[mask] = true;
    }
    return names[mask];
}

#define REVISION_LIST_MAX (REVISION_N * (REVISION_NAME_MAX + 2))

/* The names of the rows over mask (with batches, if batches_only), ", "-joined into out. */
static void
revision_join(char *out, unsigned mask, bool batches_only)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < REVISION_N; i++)
        if (revision_over(&revision_table[i], mask) && (!batches_only || revision_table[i].batches))
            used += (size_t)snprintf(out + used, REVISION_LIST_MAX - used, "%s%s",
                                     used == 0 ? "" : ", ", revision_table[i].name);
}

const char *
revision_list(unsigned mask)
{
    static char text[REVISION_MASKS][REVISION_LIST_MAX];
    static bool made[REVISION_MASKS];
    mask &= REVISION_MASKS - 1;
    if (!made[mask]) {
        revision_join(text[mask], mask, false);
        made[mask] = true;
    }
    return text[mask];
}

const char *
revision_list_batches(void)
{
    static char text[REVISION_LIST_MAX];
    static bool made;
    if (!made) {
        revision_join(text, REVISION_MASKS - 1, true);
        made = true;
    }
    return text;
}

const struct revision *
revision_newest(unsigned mask)
{
    for (size_t i = REVISION_N; i-- > 0;)
        if (revision_over(&revision_table[i], mask))
            return &revision_table[i];
    return NULL;
}

bool
revision_removed(const struct revision *r, const char *method)
{
    for (const char *const *m = r->removed; *m != NULL; m++)
        if (strcmp(*m, method) == 0)
            return true;
    return false;
}

uint32_t
revision_bit(const struct revision *r)
{
    return r == NULL ? 0 : UINT32_C(1) << (r - revision_table);
}

uint32_t
revision_set_over(unsigned mask)
{
    uint32_t set = 0;
    for (size_t i = 0; i < REVISION_N; i++)
        if (revision_over(&revision_table[i], mask))
            set |= revision_bit(&revision_table[i]);
    return set;
}

uint32_t
revision_set_named(const char *const *names, unsigned mask)
{
    uint32_t set = 0;
    for (; *names != NULL; names++) {
        const struct revision *r = revision_named(*names);
        if (revision_over(r, mask))
            set |= revision_bit(r);
    }
    return set;
}

void
revision_set_names(uint32_t set, const char **out)
{
    size_t k = 0;
    for (size_t i = 0; i < REVISION_N; i++)
        if (set & revision_bit(&revision_table[i]))
            out[k++] = revision_table[i].name;
    out[k] = NULL;
}

void
revision_set_text(uint32_t set, char *out, size_t cap)
{
    size_t used = 0;
    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < REVISION_N && used < cap; i++)
        if (set & revision_bit(&revision_table[i]))
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used == 0 ? "" : ", ",
                                     revision_table[i].name);
}

void
revision_seen_stateless(const char *version, void *arg)
{
    const struct revision *r = revision_named(version);
    if (revision_over(r, REVISION_STATELESS))
        *(uint32_t *)arg |= revision_bit(r);
}

const struct revision *
revision_set_newest(uint32_t set)
{
    for (size_t i = REVISION_N; i-- > 0;)
        if (set & revision_bit(&revision_table[i]))
            return &revision_table[i];
    return NULL;
}

const struct revision *
revision_older(const struct revision *r, unsigned mask)
{
    for (size_t i = (size_t)(r - revision_table); i-- > 0;)
        if (revision_over(&revision_table[i], mask))
            return &revision_table[i];
    return NULL;
}
