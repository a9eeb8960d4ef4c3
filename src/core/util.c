/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every module uses: allocation that cannot fail for the caller, the hash of the
 * tables of names, the monotonic clock, strict number parsing, base64url. Nothing here knows
 * about HTTP, MCP or the loop.
 */
#include "util.h"

#include <arpa/inet.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static NORETURN void
util_oom(size_t n)
{
    fprintf(stderr, "mcp-gateway: out of memory allocating %zu bytes\n", n);
    abort();
}

void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        util_oom(n);
    return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p == NULL)
        util_oom(nmemb * size);
    return p;
}

void *
xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        util_oom(n);
    return q;
}

char *
xstrdup(const char *s)
{
    return xmemdup(s, strlen(s) + 1);
}

char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void *
xmemdup(const void *p, size_t n)
{
    void *q = xmalloc(n);
    if (n)
        memcpy(q, p, n);
    return q;
}

uint64_t
util_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* --- the hash of the tables of names ------------------------------------------------------ */

/* The start: drawn once, on the first hash, and the same for the life of the process. */
static uint64_t
util_hash_start(void)
{
    static uint64_t start;
    static bool drawn;
    if (!drawn) {
        /* Before the kernel's pool is ready (early boot): the time and the pid, which differ. */
        if (getrandom(&start, sizeof start, GRND_NONBLOCK) != (ssize_t)sizeof start)
            start = 1469598103934665603ull ^ util_now_us() ^ ((uint64_t)getpid() << 40);
        drawn = true;
    }
    return start;
}

/* An odd multiplier whose bits are well spread (the finaliser of MurmurHash3's 64-bit mix). */
#define UTIL_HASH_MUL 0xff51afd7ed558ccdull

/*
 * Eight bytes at a time (a session id, 22 bytes, is three steps, not 22), the length first, so
 * that "ab" and "ab\0" differ; each step multiplies and folds the high half down, so the low bits
 * a table's chain is picked by depend on every byte.
 */
static uint64_t
util_mix(uint64_t h, const unsigned char *p, size_t n)
{
    h = (h ^ n) * UTIL_HASH_MUL;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * UTIL_HASH_MUL;
        h ^= h >> 32;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * UTIL_HASH_MUL;
        h ^= h >> 32;
    }
    return h;
}

/* The end: every bit of h reaches the low ones. */
static size_t
util_hash_end(uint64_t h)
{
    h ^= h >> 33;
    h *= UTIL_HASH_MUL;
    h ^= h >> 33;
    return (size_t)h;
}

size_t
util_hash(const void *p, size_t n)
{
    return util_hash_end(util_mix(util_hash_start(), p, n));
}

size_t
util_hash2(const void *a, size_t na, const void *b, size_t nb)
{
    return util_hash_end(util_mix(util_mix(util_hash_start(), a, na), b, nb));
}

uint64_t
util_now_ms(void)
{
    return util_now_us() / 1000u;
}

size_t
util_u64_text(uint64_t v, char *out)
{
    char rev[UTIL_U64_TEXT_MAX];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
    return n;
}

int
util_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, const char **errstr)
{
    if (s == NULL || *s < '0' || *s > '9') {
        *errstr = "is not a number";
        return -1;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0') {
        *errstr = "is not a number";
        return -1;
    }
    if (errno == ERANGE || v < min || v > max) {
        *errstr = "is out of range";
        return -1;
    }
    *out = v;
    return 0;
}

static int
util_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

bool
util_ieq_n(const char *a, const char *b, size_t n)
{
    if (memcmp(a, b, n) == 0)
        return true; /* the usual case (a header's or a media type's usual spelling), at once */
    for (size_t i = 0; i < n; i++)
        if (util_lower((unsigned char)a[i]) != util_lower((unsigned char)b[i]))
            return false;
    return true;
}

bool
util_has_prefix_i(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strlen(s) >= n && util_span_ieq(s, n, prefix);
}

int64_t
util_now_unix(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

uint64_t
util_now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void
util_rfc3339(uint64_t unix_ms, char out[UTIL_RFC3339_MAX])
{
    time_t t = (time_t)(unix_ms / 1000u);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, UTIL_RFC3339_MAX - 6, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned ms = (unsigned)(unix_ms % 1000u);
    out[n++] = '.';
    out[n++] = (char)('0' + ms / 100);
    out[n++] = (char)('0' + ms / 10 % 10);
    out[n++] = (char)('0' + ms % 10);
    out[n++] = 'Z';
    out[n] = '\0';
}

bool
util_utf8_copy(char *out, size_t size, const char *s)
{
    size_t n = strlen(s);
    bool cut = n >= size;
    if (cut) {
        n = size - 1;
        /* s[n] is the first byte left out: back off over a sequence it continues. */
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return cut;
}

static int
util_b64url_value(char c)
{
    /*
     * A table, not comparisons: every request of a sealed session decodes its id (about 170
     * characters), and the comparisons were a fifth of opening one. -1: not in the alphabet.
     */
    /* clang-format off */
    static const signed char value[256] = {
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1,
        52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
        -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
        15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, 63,
        -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
        41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    };
    /* clang-format on */
    return value[(unsigned char)c];
}

void
util_put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

uint64_t
util_get_be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

long
util_base64url_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
    /* Every 4 characters are 3 bytes, a last 2 or 3 are 1 or 2: refused whole when over cap. */
    if (n % 4 == 1 || n > (size_t)LONG_MAX / 3 || n / 4 * 3 + (n % 4 != 0 ? n % 4 - 1 : 0) > cap)
        return -1;
    unsigned acc = 0, bits = 0;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int v = util_b64url_value(s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) /* the last character carries bits no byte holds: not canonical */
        return -1;
    return (long)len;
}

size_t
util_base64url_encode(const unsigned char *in, size_t n, char *out)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned acc = 0, bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64url[(acc >> bits) & 0x3f];
        }
        acc &= (1u << bits) - 1;
    }
    if (bits > 0)
        out[o++] = b64url[(acc << (6 - bits)) & 0x3f];
    out[o] = '\0';
    return o;
}

const char *
util_file_unsafe(int fd, const char *path, bool secret, char *buf, size_t len)
{
    struct stat st;
    if (fstat(fd, &st) == -1)
        snprintf(buf, len, "%s cannot be examined: %s", path, strerror(errno));
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        snprintf(buf, len,
                 "%s is owned by uid %u, neither root nor this user (uid %u): chown root %s", path,
                 (unsigned)st.st_uid, (unsigned)geteuid(), path);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(buf, len, "%s is writable by %s: chmod go-w %s", path,
                 st.st_mode & S_IWOTH ? "others" : "its group", path);
    else if (secret && (st.st_mode & S_IROTH))
        snprintf(buf, len, "%s holds a secret and is readable by others: chmod 0640 %s", path,
                 path);
    else
        return NULL;
    return buf;
}

int
util_cidr_parse(const char *s, unsigned char addr[16], unsigned *bits)
{
    char text[INET6_ADDRSTRLEN + 8];
    if (strlen(s) >= sizeof(text))
        return -1;
    memcpy(text, s, strlen(s) + 1);
    char *slash = strchr(text, '/');
    long b = -1;
    if (slash != NULL) {
        char *end;
        *slash = '\0';
        if (slash[1] < '0' || slash[1] > '9')
            return -1;
        b = strtol(slash + 1, &end, 10);
        if (*end != '\0')
            return -1;
    }
    if (inet_pton(AF_INET, text, addr + 12) == 1) {
        memset(addr, 0, 10);
        addr[10] = addr[11] = 0xff;
        if (b > 32)
            return -1;
        *bits = b < 0 ? 128u : (unsigned)b + 96u;
        return 0;
    }
    if (inet_pton(AF_INET6, text, addr) == 1 && b <= 128) {
        *bits = b < 0 ? 128u : (unsigned)b;
        return 0;
    }
    return -1;
}

bool
util_cidr_match(const unsigned char addr[16], const unsigned char net[16], unsigned bits)
{
    size_t whole = bits / 8;
    if (memcmp(addr, net, whole) != 0)
        return false;
    unsigned rest = bits % 8;
    return rest == 0 || ((addr[whole] ^ net[whole]) & (0xffu << (8 - rest)) & 0xffu) == 0;
}

const char *
util_runtime_dir(void)
{
    static char first[PATH_MAX - 128];
    const char *v = getenv("RUNTIME_DIRECTORY");
    if (v != NULL && v[0] == '/' && strcspn(v, ":") < sizeof first) {
        snprintf(first, sizeof first, "%.*s", (int)strcspn(v, ":"), v);
        return first;
    }
    v = getenv("TMPDIR");
    return v != NULL && v[0] == '/' && strlen(v) < PATH_MAX - 128 ? v : "/tmp";
}

void
util_exec_search(char *const argv[], char *const envp[], const char *search)
{
    const char *file = argv[0];
    if (strchr(file, '/') != NULL) {
        execve(file, argv, envp);
        return;
    }
    char path[PATH_MAX];
    size_t flen = strlen(file);
    int saved = ENOENT;
    for (const char *d = search;; d++) {
        const char *end = strchrnul(d, ':');
        size_t dlen = end == d ? 1 : (size_t)(end - d); /* an empty entry is "." */
        if (dlen + flen + 2 <= sizeof(path)) {
            memcpy(path, end == d ? "." : d, dlen);
            path[dlen] = '/';
            memcpy(path + dlen + 1, file, flen + 1);
            execve(path, argv, envp);
            if (errno == EACCES)
                saved = EACCES;
            else if (errno != ENOENT && errno != ENOTDIR) {
                saved = errno;
                break;
            }
        }
        if (*end == '\0')
            break;
        d = end;
    }
    errno = saved;
}

int
util_write_text(const char *path, int flags, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
    if (fd == -1)
        return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    close(fd);
    if (w == (ssize_t)n)
        return 0;
    errno = w >= 0 ? EIO : e;
    return -1;
}
