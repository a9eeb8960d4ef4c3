/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_MSG_H
#define MCPGW_MSG_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>

/*
 * A refcounted, immutable byte blob (a framed message for a child's stdin or an SSE stream), and
 * a FIFO of them with a read offset into the head. Every queue holds its own reference. data is
 * followed by a NUL; it lives after the header, or in a block of its own (msg_adopt).
 */
struct msg {
    unsigned int refs;
    bool adopted; /* data is its own malloc'd block */
    size_t len;
    char *data;
};

/* New message of len bytes (content written by the caller before it is shared), refs = 1. */
struct msg *msg_new(size_t len);
/*
 * A message over block, a malloc'd block of at least len + 1 bytes whose first len bytes are
 * the content: it is taken (freed with the message), not copied. block[len] becomes NUL.
 */
struct msg *msg_adopt(char *block, size_t len);
/* New message holding the concatenation of the iovecs. */
struct msg *msg_concat(const struct iovec *iov, int n);
/* The same between a prefix and a suffix (either may be NULL), e.g. an SSE frame. */
struct msg *msg_frame(const char *prefix, const struct iovec *iov, int n, const char *suffix);
struct msg *msg_ref(struct msg *m);
void msg_unref(struct msg *m);

struct msgq_item {
    struct msgq_item *next;
    struct msg *m;
};

struct msgq {
    struct msgq_item *head;
    struct msgq_item *tail;
    size_t head_off; /* bytes of head->m already taken */
    size_t bytes;    /* bytes not yet taken */
    size_t count;
};

void msgq_init(struct msgq *q);
void msgq_clear(struct msgq *q);               /* unrefs everything */
void msgq_push(struct msgq *q, struct msg *m); /* takes a reference */
/* Copies up to max bytes into out and advances; returns the number copied. */
size_t msgq_take(struct msgq *q, char *out, size_t max);
/* Fills up to n iovecs with the pending bytes (for writev); returns how many. */
int msgq_iov(const struct msgq *q, struct iovec *iov, int n);
/* Marks n bytes as written (after writev). */
void msgq_advance(struct msgq *q, size_t n);

#endif
