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
    char *server, *principal;
    uint64_t n[QUOTA_KINDS];
    struct quota *next;
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
quota_slot(const char *server, const char *principal)
{
    if (Q.nb == 0)
        return NULL;
    struct quota **q = &Q.b[quota_hash(server, principal) & (Q.nb - 1)];
    for (; *q != NULL; q = &(*q)->next)
        if (strcmp((*q)->server, server) == 0 && strcmp((*q)->principal, principal) == 0)
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
            size_t h = quota_hash(e->server, e->principal) & (nb - 1);
            e->next = b[h];
            b[h] = e;
        }
    free(Q.b);
    Q.b = b;
    Q.nb = nb;
}

struct quota *
quota_take(const char *server, const char *principal, enum quota_kind kind, uint64_t n)
{
    if (principal == NULL)
        principal = "";
    if (Q.n >= Q.nb)
        quota_grow();
    struct quota **q = quota_slot(server, principal);
    if (*q == NULL) {
        *q = xcalloc(1, sizeof(**q));
        (*q)->server = xstrdup(server);
        (*q)->principal = xstrdup(principal);
        Q.n++;
    }
    (*q)->n[kind] += n;
    return *q;
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
    for (int k = 0; k < QUOTA_KINDS; k++)
        if (q->n[k] != 0)
            return;
    struct quota **pp = quota_slot(q->server, q->principal);
    if (pp != NULL && *pp == q)
        *pp = q->next;
    Q.n--;
    free(q->server);
    free(q->principal);
    free(q);
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
    struct quota **q = quota_slot(server, principal != NULL ? principal : "");
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
            free(q->server);
            free(q->principal);
            free(q);
        }
    free(Q.b);
    Q.b = NULL;
    Q.nb = Q.n = 0;
}
