/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_UTIL_H
#define MCPGW_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MUSTCHECK    __attribute__((warn_unused_result))
#define NORETURN     __attribute__((noreturn))
#define PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define FALLTHROUGH  __attribute__((fallthrough))

/*
 * Takes node out of a doubly linked list threaded through its members prev and next (named by the
 * caller), whose first element is the lvalue head (and, with _TAIL, whose last is tail); node's
 * own links are left as they were. node is evaluated more than once: pass a plain variable.
 */
#define UTIL_DLIST_UNLINK(head, node, prev, next) \
    do {                                          \
        if ((node)->prev != NULL)                 \
            (node)->prev->next = (node)->next;    \
        else                                      \
            (head) = (node)->next;                \
        if ((node)->next != NULL)                 \
            (node)->next->prev = (node)->prev;    \
    } while (0)
#define UTIL_DLIST_UNLINK_TAIL(head, tail, node, prev, next) \
    do {                                                     \
        UTIL_DLIST_UNLINK(head, node, prev, next);           \
        if ((node)->next == NULL)                            \
            (tail) = (node)->prev;                           \
    } while (0)

/* Allocation never fails for the caller: on failure these log and abort (tmux, redis). */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);

/*
 * The one hash of the gateway's tables of names (sessions by id, principals, the per-principal
 * counts, the pools' tables of names): a multiply-and-fold over 64 bits, eight bytes a step, from a
 * start drawn at random once per process (getrandom), its last state mixed so that the low bits a
 * table takes depend on every byte and on the whole start. Some of those names come from clients (a session
 * id, a token's subject, a tool's name): with a start no one outside the process knows, a list of
 * names that fall into one chain cannot be prepared once for every gateway, and the order a table
 * is walked in differs between processes. What it is not: a MAC or a cryptographic hash (it
 * proves nothing and keeps nothing secret), nor a keyed hash like SipHash that holds against
 * someone who times lookups to learn collisions; the tables it serves are bounded besides.
 */
size_t util_hash(const void *p, size_t n);
/* The hash of the pair (a, b): "a" + "bc" and "ab" + "c" differ. */
size_t util_hash2(const void *a, size_t na, const void *b, size_t nb);

/* Monotonic clock. */
uint64_t util_now_ms(void);
uint64_t util_now_us(void);

/*
 * Strict decimal parse of the whole string into [min, max]. Returns 0, or -1 with *errstr set to a
 * static phrase ("is not a number", "is out of range").
 */
int util_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
                   const char **errstr) MUSTCHECK;
/*
 * v in decimal into out, which has room for UTIL_U64_TEXT_MAX bytes, NUL-terminated; returns its
 * length. What snprintf's "%" PRIu64 writes, without the format's parse: ids made per request.
 */
#define UTIL_U64_TEXT_MAX 21
size_t util_u64_text(uint64_t v, char *out);

/* Case-insensitive ASCII comparison of n bytes. */
bool util_ieq_n(const char *a, const char *b, size_t n);
/*
 * Case-insensitive ASCII comparisons of a byte span. Inline: the length (usually a literal's,
 * known when compiled) is compared before any byte, and most spans differ in it.
 */
static inline bool
util_span_ieq(const char *a, size_t alen, const char *b)
{
    return alen == strlen(b) && util_ieq_n(a, b, alen);
}
bool util_has_prefix_i(const char *s, const char *prefix);

/* Wall clock, seconds since the epoch (token lifetimes). */
int64_t util_now_unix(void);
/* Wall clock, milliseconds since the epoch (when something began, for operators). */
uint64_t util_now_unix_ms(void);
#define UTIL_RFC3339_MAX 32
/* unix_ms as RFC 3339 UTC with milliseconds ("2026-07-28T09:30:00.123Z") into out. */
void util_rfc3339(uint64_t unix_ms, char out[UTIL_RFC3339_MAX]);
/*
 * Copies s into out (size >= 1 bytes, NUL-terminated), cut to what fits before a UTF-8 sequence
 * that does not: a cut never splits a character. Returns whether s was cut.
 */
bool util_utf8_copy(char *out, size_t size, const char *s);

/*
 * base64url without padding (RFC 7515 section 2) of s[0..n) into out, which has room for cap bytes.
 * Returns the decoded length, or -1 on a character outside the alphabet, '=' padding, an
 * impossible length (n % 4 == 1), non-zero bits left in the last character, or an input that
 * decodes to more than cap bytes (refused whole: nothing is written past cap, nothing truncated).
 */
long util_base64url_decode(const char *s, size_t n, unsigned char *out, size_t cap) MUSTCHECK;
/*
 * As sshd does: a file anyone but root or the gateway's own user may write steers
 * the gateway, and a secret anyone may read is no secret. The open file fd (named path) must be
 * owned by root or this process's user and not writable by group or others; with secret, not
 * readable by others either (0640 with the gateway's group, or 0600). NULL when it is safe; else
 * buf holding "PATH is ...: chmod ... PATH", the reason and its fix.
 */
const char *util_file_unsafe(int fd, const char *path, bool secret, char *buf, size_t len);
/*
 * Where the gateway makes its private run-time directories (an exchanged token's): the first
 * directory of $RUNTIME_DIRECTORY (systemd's colon list), else $TMPDIR, else /tmp; only an
 * absolute path that leaves room for a name below it. Static storage.
 */
const char *util_runtime_dir(void);
/* The inverse: in[0..n) as base64url without padding into out (room for (n * 4 + 2) / 3 + 1 bytes,
 * NUL-terminated); returns the length. */
size_t util_base64url_encode(const unsigned char *in, size_t n, char *out);
/* v's low `bytes` bytes (1..8) big-endian at p, and back: fixed fields of sealed tokens. */
void util_put_be(unsigned char *p, uint64_t v, int bytes);
uint64_t util_get_be(const unsigned char *p, int bytes);
/*
 * An IP address or CIDR ("10.0.0.0/8", "::1", "fd00::/8") as 16 bytes (IPv4 as ::ffff:a.b.c.d) and
 * a prefix length counted on those 16 bytes (an IPv4 /8 is 104). 0, or -1 when s is neither.
 */
int util_cidr_parse(const char *s, unsigned char addr[16], unsigned *bits) MUSTCHECK;
/* Whether addr (16 bytes as util_cidr_parse gives them) lies in net/bits. */
bool util_cidr_match(const unsigned char addr[16], const unsigned char net[16], unsigned bits);

/*
 * execvp without glibc's fallback of running a file that is not an executable through sh: argv[0]
 * with a '/' as it is, else each directory of search (':'-separated; an empty entry is "."). Only
 * system calls, no allocation (between vfork and exec); returns only on failure, with errno.
 */
void util_exec_search(char *const argv[], char *const envp[], const char *search);

/*
 * Writes text to path in one write (opened O_WRONLY | O_CLOEXEC | flags, mode 0644 if made): 0, or
 * -1 with errno (EIO for a short write). System calls only: a boxed child uses it before exec.
 */
int util_write_text(const char *path, int flags, const char *text);

#endif
