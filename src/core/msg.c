/* SPDX-License-Identifier: MIT */
/*
 * Refcounted byte blobs and the FIFO that carries them to a pipe or an HTTP stream. A large
 * message is copied out piecewise through the head offset, never moved (no O(n^2) memmove).
 */
#include "msg.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct msg *
msg_new(size_t len)
{
    struct msg *m = xmalloc(sizeof(*m) + len + 1);
    m->refs = 1;
    m->adopted = false;
    m->len = len;
    m->data = (char *)(m + 1);
    m->data[len] = '\0';
    return m;
}

struct msg *
msg_adopt(char *block, size_t len)
{
    struct msg *m = xmalloc(sizeof(*m));
    m->refs = 1;
    m->adopted = true;
    m->len = len;
    m->data = block;
    m->data[len] = '\0';
    return m;
}

struct msg *
msg_frame(const char *prefix, const struct iovec *iov, int n, const char *suffix)
{
    size_t pre = prefix ? strlen(prefix) : 0, suf = suffix ? strlen(suffix) : 0;
    size_t len = pre + suf;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    struct msg *m = msg_new(len);
    char *p = m->data;
    if (pre)
        memcpy(p, prefix, pre);
    p += pre;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    if (suf)
        memcpy(p, suffix, suf);
    return m;
}

struct msg *
msg_concat(const struct iovec *iov, int n)
{
    return msg_frame(NULL, iov, n, NULL);
}

struct msg *
msg_ref(struct msg *m)
{
    m->refs++;
    return m;
}

void
msg_unref(struct msg *m)
{
    if (m == NULL || --m->refs > 0)
        return;
    if (m->adopted)
        free(m->data);
    free(m);
}

void
msgq_init(struct msgq *q)
{
    memset(q, 0, sizeof(*q));
}

static void
msgq_pop(struct msgq *q)
{
    struct msgq_item *it = q->head;
    q->head = it->next;
    if (q->head == NULL)
        q->tail = NULL;
    q->head_off = 0;
    q->count--;
    msg_unref(it->m);
    free(it);
}

void
msgq_clear(struct msgq *q)
{
    while (q->head != NULL)
        msgq_pop(q);
    q->bytes = 0;
}

void
msgq_push(struct msgq *q, struct msg *m)
{
    struct msgq_item *it = xmalloc(sizeof(*it));
    it->next = NULL;
    it->m = msg_ref(m);
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->bytes += m->len;
    q->count++;
}

void
msgq_advance(struct msgq *q, size_t n)
{
    q->bytes -= n;
    while (n > 0 && q->head != NULL) {
        size_t left = q->head->m->len - q->head_off;
        if (n < left) {
            q->head_off += n;
            return;
        }
        n -= left;
        msgq_pop(q);
    }
    /* Drop empty messages at the head too. */
    while (q->head != NULL && q->head->m->len == q->head_off)
        msgq_pop(q);
}

size_t
msgq_take(struct msgq *q, char *out, size_t max)
{
    size_t done = 0;
    for (struct msgq_item *it = q->head; it != NULL && done < max; it = it->next) {
        size_t off = it == q->head ? q->head_off : 0;
        size_t n = it->m->len - off;
        if (n > max - done)
            n = max - done;
        memcpy(out + done, it->m->data + off, n);
        done += n;
    }
    msgq_advance(q, done);
    return done;
}

int
msgq_iov(const struct msgq *q, struct iovec *iov, int n)
{
    int i = 0;
    for (struct msgq_item *it = q->head; it != NULL && i < n; it = it->next) {
        size_t off = it == q->head ? q->head_off : 0;
        iov[i].iov_base = it->m->data + off;
        iov[i].iov_len = it->m->len - off;
        i++;
    }
    return i;
}
