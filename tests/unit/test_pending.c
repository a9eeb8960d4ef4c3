/* SPDX-License-Identifier: MIT */
/*
 * pending: the in-flight table. Gateway ids count up from 1 and are never reused; lookups by
 * gateway id and by the sender's id are per direction, the sender's id is compared byte for byte;
 * progress tokens match only client requests; deleting anywhere keeps the list consistent both
 * ways; pending_active counts only FORWARDED entries; methods are truncated; clear frees all.
 * Through pending.h only.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "pending.h"

TestSuite(pending, .timeout = 30);

static struct pending_table T;

static void
table_init(void)
{
    pending_init(&T);
}

static void
table_fini(void)
{
    pending_clear(&T);
}

static struct pending *
add(enum pending_dir dir, const char *orig_id, const char *method)
{
    return pending_add(&T, dir, orig_id, strlen(orig_id), method, 7, 1000);
}

static struct pending *
find_orig(enum pending_dir dir, const char *id)
{
    return pending_find_orig(&T, dir, id, strlen(id));
}

static struct pending *
find_token(const char *tok)
{
    return pending_find_token(&T, tok, strlen(tok));
}

/* The list holds exactly want[0..n), in order, linked both ways, and count agrees. */
static void
expect_list(struct pending *const *want, size_t n)
{
    cr_assert_eq(T.count, n, "count %zu, want %zu", T.count, n);
    if (n == 0) {
        cr_assert_null(T.head);
        cr_assert_null(T.tail);
        return;
    }
    cr_assert_eq(T.head, want[0]);
    cr_assert_eq(T.tail, want[n - 1]);
    cr_assert_null(T.head->prev);
    cr_assert_null(T.tail->next);
    struct pending *p = T.head;
    for (size_t i = 0; i < n; i++, p = p->next) {
        cr_assert_eq(p, want[i], "forward entry %zu", i);
        cr_assert_eq(p->prev, i > 0 ? want[i - 1] : NULL, "prev of entry %zu", i);
    }
    cr_assert_null(p);
    p = T.tail;
    for (size_t i = n; i-- > 0; p = p->prev)
        cr_assert_eq(p, want[i], "backward entry %zu", i);
    cr_assert_null(p);
}

Test(pending, init_is_empty, .init = table_init, .fini = table_fini)
{
    cr_assert_null(T.head);
    cr_assert_null(T.tail);
    cr_assert_eq(T.count, 0);
    cr_assert_eq(T.next_id, 1);
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CHILD, 1));
    cr_assert_null(find_orig(PENDING_TO_CHILD, "1"));
    cr_assert_null(find_token("t"));
    cr_assert_eq(pending_active(&T, PENDING_TO_CHILD), 0);
    cr_assert_eq(pending_active(&T, PENDING_TO_CLIENT), 0);
}

Test(pending, add_copies_fields, .init = table_init, .fini = table_fini)
{
    char id[] = "\"req-1\"";
    char method[] = "tools/call";
    struct pending *p = pending_add(&T, PENDING_TO_CHILD, id, strlen(id), method, 42, 12345);
    cr_assert_not_null(p);
    /* The table owns copies: the caller's buffers may change afterwards. */
    id[1] = 'X';
    method[0] = 'X';
    cr_assert_eq(p->dir, PENDING_TO_CHILD);
    cr_assert_eq(p->state, PENDING_FORWARDED);
    cr_assert_eq(p->gw_id, 1);
    cr_assert_eq(p->orig_id_len, strlen("\"req-1\""));
    cr_assert(memcmp(p->orig_id, "\"req-1\"", p->orig_id_len) == 0);
    cr_assert_str_eq(p->method, "tools/call");
    cr_assert_eq(p->stream_id, 42);
    cr_assert_eq(p->start_ms, 12345);
    cr_assert_eq(p->deadline_ms, 0);
    cr_assert_eq(p->cancelled_ms, 0);
    cr_assert_null(p->token);
    cr_assert_eq(p->token_len, 0);
    cr_assert_not(p->task);
    cr_assert_null(p->timer);
    cr_assert_null(p->owner);
}

Test(pending, gw_ids_increase_from_one, .init = table_init, .fini = table_fini)
{
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        struct pending *p = add(i % 2 ? PENDING_TO_CLIENT : PENDING_TO_CHILD, "1", "ping");
        cr_assert_eq(p->gw_id, last + 1, "entry %d got id %llu", i, (unsigned long long)p->gw_id);
        last = p->gw_id;
    }
    /* Deleting never makes an id available again. */
    pending_del(&T, T.tail);
    pending_del(&T, T.head);
    struct pending *p = add(PENDING_TO_CHILD, "1", "ping");
    cr_assert_eq(p->gw_id, 11);
}

Test(pending, find_gw_per_direction, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "1", "tools/call");  /* gw 1 */
    struct pending *b = add(PENDING_TO_CLIENT, "1", "roots/list"); /* gw 2 */
    struct pending *c = add(PENDING_TO_CHILD, "2", "ping");        /* gw 3 */
    cr_assert_eq(pending_find_gw(&T, PENDING_TO_CHILD, 1), a);
    cr_assert_eq(pending_find_gw(&T, PENDING_TO_CLIENT, 2), b);
    cr_assert_eq(pending_find_gw(&T, PENDING_TO_CHILD, 3), c);
    /* The same gateway id in the other direction is not that entry. */
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CLIENT, 1));
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CHILD, 2));
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CLIENT, 3));
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CHILD, 0));
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CHILD, 4));
}

Test(pending, find_orig_is_byte_exact, .init = table_init, .fini = table_fini)
{
    struct pending *num = add(PENDING_TO_CHILD, "42", "a");
    struct pending *str = add(PENDING_TO_CHILD, "\"42\"", "b");
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "42"), num);
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "\"42\""), str);
    cr_assert_null(find_orig(PENDING_TO_CHILD, "4"), "a prefix is not a match");
    cr_assert_null(find_orig(PENDING_TO_CHILD, "420"));
    cr_assert_null(find_orig(PENDING_TO_CHILD, "42.0"), "no numeric equivalence");
    cr_assert_null(find_orig(PENDING_TO_CHILD, "\"42 \""));
    cr_assert_null(find_orig(PENDING_TO_CLIENT, "42"), "other direction");
    cr_assert_null(find_orig(PENDING_TO_CLIENT, "\"42\""));
    /* The length is part of the key, not a NUL: bytes past len are ignored. */
    cr_assert_eq(pending_find_orig(&T, PENDING_TO_CHILD, "42xyz", 2), num);
}

Test(pending, find_orig_embedded_nul, .init = table_init, .fini = table_fini)
{
    static const char id_a[] = "\"a\0b\"";
    static const char id_b[] = "\"a\0c\"";
    struct pending *a = pending_add(&T, PENDING_TO_CLIENT, id_a, sizeof id_a - 1, "x", 1, 0);
    cr_assert_eq(a->orig_id_len, 5);
    cr_assert_eq(pending_find_orig(&T, PENDING_TO_CLIENT, id_a, sizeof id_a - 1), a);
    cr_assert_null(pending_find_orig(&T, PENDING_TO_CLIENT, id_b, sizeof id_b - 1));
}

Test(pending, find_orig_returns_first_of_duplicates, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "7", "a");
    struct pending *b = add(PENDING_TO_CHILD, "7", "b");
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "7"), a);
    pending_del(&T, a);
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "7"), b);
}

Test(pending, find_token_only_to_child, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "1", "tools/call");
    struct pending *b = add(PENDING_TO_CLIENT, "2", "sampling/createMessage");
    struct pending *c = add(PENDING_TO_CHILD, "3", "tools/call");
    pending_set_token(a, "\"tok\"", 5);
    pending_set_token(b, "\"other\"", 7);
    pending_set_token(c, "9", 1);
    cr_assert_eq(a->token_len, 5);
    cr_assert(memcmp(a->token, "\"tok\"", 5) == 0);
    cr_assert_eq(find_token("\"tok\""), a);
    cr_assert_eq(find_token("9"), c);
    cr_assert_null(find_token("\"other\""), "child-bound requests only");
    cr_assert_null(find_token("\"9\""), "string and number tokens differ");
    cr_assert_null(find_token("\"tok"));
    /* An entry without a token never matches, not even the empty token. */
    add(PENDING_TO_CHILD, "4", "ping");
    cr_assert_null(pending_find_token(&T, "", 0));
}

Test(pending, set_token_replaces, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "1", "tools/call");
    pending_set_token(a, "\"first\"", 7);
    pending_set_token(a, "2", 1); /* the old copy is freed (LeakSanitizer) */
    cr_assert_null(find_token("\"first\""));
    cr_assert_eq(find_token("2"), a);
}

Test(pending, del_middle, .init = table_init, .fini = table_fini)
{
    struct pending *p[5];
    for (int i = 0; i < 5; i++)
        p[i] = add(PENDING_TO_CHILD, "1", "m");
    pending_del(&T, p[2]);
    struct pending *want[] = { p[0], p[1], p[3], p[4] };
    expect_list(want, 4);
    cr_assert_null(pending_find_gw(&T, PENDING_TO_CHILD, 3));
    cr_assert_eq(pending_find_gw(&T, PENDING_TO_CHILD, 4), p[3]);
}

Test(pending, del_head, .init = table_init, .fini = table_fini)
{
    struct pending *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = add(PENDING_TO_CHILD, "1", "m");
    pending_del(&T, p[0]);
    struct pending *want[] = { p[1], p[2] };
    expect_list(want, 2);
}

Test(pending, del_tail_then_add, .init = table_init, .fini = table_fini)
{
    struct pending *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = add(PENDING_TO_CHILD, "1", "m");
    pending_del(&T, p[2]);
    struct pending *want[] = { p[0], p[1] };
    expect_list(want, 2);
    /* The tail pointer was updated: a new entry links after p[1]. */
    struct pending *q = add(PENDING_TO_CLIENT, "2", "m");
    struct pending *want2[] = { p[0], p[1], q };
    expect_list(want2, 3);
}

Test(pending, del_only_and_all, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "1", "m");
    pending_del(&T, a);
    expect_list(NULL, 0);
    struct pending *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = add(PENDING_TO_CHILD, "1", "m");
    /* In a mixed order: middle, tail, head, last. */
    pending_del(&T, p[1]);
    struct pending *w1[] = { p[0], p[2], p[3] };
    expect_list(w1, 3);
    pending_del(&T, p[3]);
    struct pending *w2[] = { p[0], p[2] };
    expect_list(w2, 2);
    pending_del(&T, p[0]);
    struct pending *w3[] = { p[2] };
    expect_list(w3, 1);
    pending_del(&T, p[2]);
    expect_list(NULL, 0);
    struct pending *z = add(PENDING_TO_CHILD, "1", "m");
    struct pending *w4[] = { z };
    expect_list(w4, 1);
}

Test(pending, del_with_token_frees_it, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "1", "m");
    pending_set_token(a, "\"t\"", 3);
    pending_del(&T, a);
    cr_assert_null(find_token("\"t\""));
}

Test(pending, active_counts_forwarded_per_direction, .init = table_init, .fini = table_fini)
{
    struct pending *c1 = add(PENDING_TO_CHILD, "1", "m");
    struct pending *c2 = add(PENDING_TO_CHILD, "2", "m");
    add(PENDING_TO_CHILD, "3", "m");
    struct pending *k1 = add(PENDING_TO_CLIENT, "4", "m");
    add(PENDING_TO_CLIENT, "5", "m");
    cr_assert_eq(pending_active(&T, PENDING_TO_CHILD), 3);
    cr_assert_eq(pending_active(&T, PENDING_TO_CLIENT), 2);
    pending_cancel(&T, c1);
    pending_cancel(&T, k1);
    cr_assert_eq(pending_active(&T, PENDING_TO_CHILD), 2);
    cr_assert_eq(pending_active(&T, PENDING_TO_CLIENT), 1);
    cr_assert_eq(T.count, 5, "cancelled entries stay in the table");
    pending_del(&T, c2);
    cr_assert_eq(pending_active(&T, PENDING_TO_CHILD), 1);
    pending_del(&T, c1);
    cr_assert_eq(pending_active(&T, PENDING_TO_CHILD), 1);
    cr_assert_eq(pending_active(&T, PENDING_TO_CLIENT), 1);
}

Test(pending, method_truncated, .init = table_init, .fini = table_fini)
{
    char m[200];
    memset(m, 'm', sizeof m - 1);
    m[sizeof m - 1] = '\0';
    struct pending *p = add(PENDING_TO_CHILD, "1", m);
    cr_assert_eq(strlen(p->method), PENDING_METHOD_MAX - 1);
    cr_assert(memcmp(p->method, m, PENDING_METHOD_MAX - 1) == 0);

    /* Exactly PENDING_METHOD_MAX - 1 fits whole; one more is cut. */
    m[PENDING_METHOD_MAX - 1] = '\0';
    p = add(PENDING_TO_CHILD, "2", m);
    cr_assert_str_eq(p->method, m);
    m[PENDING_METHOD_MAX - 1] = 'x';
    m[PENDING_METHOD_MAX] = '\0';
    p = add(PENDING_TO_CHILD, "3", m);
    cr_assert_eq(strlen(p->method), PENDING_METHOD_MAX - 1);
    cr_assert_eq(p->method[PENDING_METHOD_MAX - 2], 'm');

    p = add(PENDING_TO_CHILD, "4", "");
    cr_assert_str_eq(p->method, "");
}

Test(pending, empty_orig_id, .init = table_init, .fini = table_fini)
{
    struct pending *p = pending_add(&T, PENDING_TO_CHILD, "", 0, "m", 1, 0);
    cr_assert_eq(p->orig_id_len, 0);
    cr_assert_eq(pending_find_orig(&T, PENDING_TO_CHILD, "", 0), p);
    cr_assert_null(find_orig(PENDING_TO_CHILD, "1"));
}

Test(pending, clear_frees_all)
{
    struct pending_table t;
    pending_init(&t);
    for (int i = 0; i < 100; i++) {
        struct pending *p = pending_add(&t, i % 3 ? PENDING_TO_CHILD : PENDING_TO_CLIENT, "\"id\"",
                                        4, "tools/call", (uint64_t)i, 0);
        if (i % 2)
            pending_set_token(p, "\"tok\"", 5);
    }
    cr_assert_eq(t.count, 100);
    pending_clear(&t); /* LeakSanitizer checks that everything went */
    cr_assert_null(t.head);
    cr_assert_null(t.tail);
    cr_assert_eq(t.count, 0);
    cr_assert_null(pending_find_gw(&t, PENDING_TO_CHILD, 2));
    /* Usable again; ids keep counting. */
    struct pending *p = pending_add(&t, PENDING_TO_CHILD, "1", 1, "m", 0, 0);
    cr_assert_gt(p->gw_id, 100);
    cr_assert_eq(t.count, 1);
    pending_clear(&t);
    pending_clear(&t);
}

/* The trace id an entry's request carried to the child, for the records that name it. */
Test(pending, trace_id_accessor, .init = table_init, .fini = table_fini)
{
    struct pending *p = pending_add(&T, PENDING_TO_CHILD, "1", 1, "tools/call", 7, 1000);
    cr_assert_null(pending_trace_id(p), "none unless trace_context put one on it");
    memcpy(p->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", 33);
    cr_assert_str_eq(pending_trace_id(p), "4bf92f3577b34da6a3ce929d0e0e4736");
}

/* The oldest entry of that id and direction still waiting, else the oldest cancelled: a walk. */
static struct pending *
find_by_walk(enum pending_dir dir, const char *id, size_t len)
{
    struct pending *want = NULL;
    for (struct pending *q = T.head; q != NULL; q = q->next)
        if (q->dir == dir && q->orig_id_len == len && memcmp(q->orig_id, id, len) == 0
            && (want == NULL
                || (want->state != PENDING_FORWARDED && q->state == PENDING_FORWARDED)))
            want = q;
    return want;
}

/* Distinct ids past every size the index grows through: each found, the deleted ones not. */
Test(pending, index_finds_each_of_many, .init = table_init, .fini = table_fini)
{
    enum { N = 1000 };
    static struct pending *e[N];
    char id[16];
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "%d", i);
        e[i] = add(i % 2 ? PENDING_TO_CLIENT : PENDING_TO_CHILD, id, "m");
    }
    cr_assert_geq(T.nbucket, (size_t)N);
    for (int i = 0; i < N; i += 3)
        pending_del(&T, e[i]);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "%d", i);
        enum pending_dir dir = i % 2 ? PENDING_TO_CLIENT : PENDING_TO_CHILD;
        cr_assert_eq(find_orig(dir, id), i % 3 ? e[i] : NULL, "id %d", i);
        cr_assert_null(find_orig(i % 2 ? PENDING_TO_CHILD : PENDING_TO_CLIENT, id), "id %d", i);
    }
}

/* A call taken over by its retry answers to the new id only, and keeps its place by age. */
Test(pending, set_orig_moves_the_entry_to_its_new_id, .init = table_init, .fini = table_fini)
{
    struct pending *a = add(PENDING_TO_CHILD, "\"a\"", "m");
    struct pending *b = add(PENDING_TO_CHILD, "\"b\"", "m");
    pending_set_orig(&T, a, "\"b\"", 3);
    cr_assert_null(find_orig(PENDING_TO_CHILD, "\"a\""));
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "\"b\""), a, "the older of two waiting");
    pending_del(&T, a);
    cr_assert_eq(find_orig(PENDING_TO_CHILD, "\"b\""), b);
    struct pending *list[] = { b };
    expect_list(list, 1);
}

/*
 * Random adds (a few ids, so many repeat), deletes, cancels and new ids: after every step, every
 * id's lookup in either direction finds what a walk of the list finds, the index holds each entry
 * once, and the counts of active entries are the list's. A fixed seed: the same steps every run.
 */
Test(pending, index_agrees_with_a_walk_after_every_step, .init = table_init, .fini = table_fini)
{
    static const char *const ids[] = { "1", "2", "3", "\"x\"", "\"y\"", "null", "10", "11" };
    enum { IDS = sizeof ids / sizeof ids[0], STEPS = 20000 };
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t most = 0;
    for (int step = 0; step < STEPS; step++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        unsigned op = (unsigned)(s % 8), k = (unsigned)(s >> 8);
        struct pending *p = T.head;
        for (unsigned i = T.count ? k % (unsigned)T.count : 0; p != NULL && i > 0; i--)
            p = p->next;
        const char *id = ids[(s >> 32) % IDS];
        if (op < 3 || p == NULL)
            add((s >> 40) & 1 ? PENDING_TO_CLIENT : PENDING_TO_CHILD, id, "m");
        else if (op < 6)
            pending_del(&T, p);
        else if (op == 6)
            pending_cancel(&T, p);
        else
            pending_set_orig(&T, p, id, strlen(id));
        size_t chained = 0;
        for (size_t i = 0; i < T.nbucket; i++)
            for (struct pending *q = T.bucket[i]; q != NULL; q = q->hnext)
                chained++;
        cr_assert_eq(chained, T.count, "step %d: %zu in the index, %zu in the list", step, chained,
                     T.count);
        size_t active[2] = { 0, 0 };
        for (struct pending *q = T.head; q != NULL; q = q->next)
            active[q->dir] += q->state == PENDING_FORWARDED;
        for (int d = 0; d < 2; d++)
            cr_assert_eq(pending_active(&T, (enum pending_dir)d), active[d],
                         "step %d: %zu active %s, the list has %zu", step,
                         pending_active(&T, (enum pending_dir)d),
                         d ? "to the client" : "to the child", active[d]);
        most = T.count > most ? T.count : most;
        for (unsigned i = 0; i < IDS; i++)
            for (int d = 0; d < 2; d++)
                cr_assert_eq(pending_find_orig(&T, (enum pending_dir)d, ids[i], strlen(ids[i])),
                             find_by_walk((enum pending_dir)d, ids[i], strlen(ids[i])),
                             "step %d: id %s", step, ids[i]);
    }
    cr_assert_gt(most, 32, "the index grew past its first size (%zu entries at most)", most);
}
