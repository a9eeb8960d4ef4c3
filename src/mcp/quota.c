/* SPDX-License-Identifier: MIT */
/*
 * The per-principal counts of both eras (quota.h): a hash table of (server, principal) entries,
 * each freed as soon as it counts nothing, so the table holds only principals that hold
 * something. Its size is bounded by what the counts are: sessions, requests in flight, listens.
 */
#include "quota.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct quota {
    const char *server, *principal; /* in names */
    uint64_t n[QUOTA_KINDS];
    unsigned pins; /* holders that keep it while its counts are 0 (quota_pin) */
    size_t hash;   /* of (server, principal): unlinked without hashing again */
    struct quota *next;
    char names[]; /* server, NUL, principal, NUL */
};

static struct {
    struct quota **b;
    size_t nb, n;
} Q;

static size_t
quota_hash(const char *server, const char *principal)
{
    return util_hash2(server, strlen(server), principal, strlen(principal));
}

static struct quota **
quota_slot(const char *server, const char *principal, size_t hash)
{
    if (Q.nb == 0)
        return NULL;
    struct quota **q = &Q.b[hash & (Q.nb - 1)];
    for (; *q != NULL; q = &(*q)->next)
        if ((*q)->hash == hash && strcmp((*q)->server, server) == 0
            && strcmp((*q)->principal, principal) == 0)
            return q;
    return q;
}

/* Twice the entries' number of chains, at least 16: rehashed once per doubling. */
static void
quota_grow(void)
{
    size_t nb = Q.nb == 0 ? 16 : Q.nb * 2;
    struct quota **b = xcalloc(nb, sizeof(*b));
    for (size_t i = 0; i < Q.nb; i++)
        while (Q.b[i] != NULL) {
            struct quota *e = Q.b[i];
            Q.b[i] = e->next;
            size_t h = e->hash & (nb - 1);
            e->next = b[h];
            b[h] = e;
        }
    free(Q.b);
    Q.b = b;
    Q.nb = nb;
}

/* (server, principal)'s entry, made when there is none. */
static struct quota *
quota_get(const char *server, const char *principal)
{
    if (principal == NULL)
        principal = "";
    if (Q.n >= Q.nb)
        quota_grow();
    size_t hash = quota_hash(server, principal);
    struct quota **q = quota_slot(server, principal, hash);
    if (*q == NULL) {
        size_t sl = strlen(server) + 1, pl = strlen(principal) + 1;
        struct quota *e = xcalloc(1, sizeof(*e) + sl + pl);
        memcpy(e->names, server, sl);
        memcpy(e->names + sl, principal, pl);
        e->server = e->names;
        e->principal = e->names + sl;
        e->hash = hash;
        *q = e;
        Q.n++;
    }
    return *q;
}

/* Frees q once nothing holds it: every count 0, no pin. */
static void
quota_drop_idle(struct quota *q)
{
    if (q->pins > 0)
        return;
    for (int k = 0; k < QUOTA_KINDS; k++)
        if (q->n[k] != 0)
            return;
    struct quota **pp = &Q.b[q->hash & (Q.nb - 1)];
    while (*pp != NULL && *pp != q)
        pp = &(*pp)->next;
    if (*pp == q)
        *pp = q->next;
    Q.n--;
    free(q);
}

struct quota *
quota_take(const char *server, const char *principal, enum quota_kind kind, uint64_t n)
{
    struct quota *q = quota_get(server, principal);
    q->n[kind] += n;
    return q;
}

struct quota *
quota_pin(const char *server, const char *principal)
{
    struct quota *q = quota_get(server, principal);
    q->pins++;
    return q;
}

void
quota_unpin(struct quota *q)
{
    if (q == NULL)
        return;
    q->pins--;
    quota_drop_idle(q);
}

void
quota_add(struct quota *q, enum quota_kind kind, uint64_t n)
{
    q->n[kind] += n;
}

void
quota_give(struct quota *q, enum quota_kind kind, uint64_t n)
{
    q->n[kind] = q->n[kind] >= n ? q->n[kind] - n : 0;
    quota_drop_idle(q);
}

uint64_t
quota_count(const struct quota *q, enum quota_kind kind)
{
    return q->n[kind];
}

const char *
quota_server(const struct quota *q)
{
    return q->server;
}

const char *
quota_principal(const struct quota *q)
{
    return q->principal;
}

uint64_t
quota_of(const char *server, const char *principal, enum quota_kind kind)
{
    if (principal == NULL)
        principal = "";
    struct quota **q = quota_slot(server, principal, quota_hash(server, principal));
    return q != NULL && *q != NULL ? (*q)->n[kind] : 0;
}

bool
quota_fits(const char *server, const char *principal, enum quota_kind kind, uint64_t max)
{
    return max == 0 || quota_of(server, principal, kind) < max;
}

uint64_t
quota_total(enum quota_kind kind)
{
    uint64_t t = 0;
    for (size_t i = 0; i < Q.nb; i++)
        for (const struct quota *q = Q.b[i]; q != NULL; q = q->next)
            t += q->n[kind];
    return t;
}

size_t
quota_entries(void)
{
    return Q.n;
}

void
quota_module_free(void)
{
    for (size_t i = 0; i < Q.nb; i++)
        while (Q.b[i] != NULL) {
            struct quota *q = Q.b[i];
            Q.b[i] = q->next;
            free(q);
        }
    free(Q.b);
    Q.b = NULL;
    Q.nb = Q.n = 0;
}
