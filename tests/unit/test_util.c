/* SPDX-License-Identifier: MIT */
/*
 * util: base64url without padding, both ways; the decoder's output bound (an input that would
 * decode past the room given is refused whole, and nothing is written past it); which files are
 * safe to read settings and secrets from; the hash of the tables of names (the same within a
 * process, another start in each process, pairs told apart, low bits spread); u64 in decimal as
 * snprintf writes it. Through util.h only.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "util.h"

TestSuite(util, .timeout = 10);

Test(util, base64url_decode)
{
    unsigned char out[64];
    cr_assert_eq(util_base64url_decode("", 0, out, sizeof out), 0);
    cr_assert_eq(util_base64url_decode("TWE", 3, out, sizeof out), 2);
    cr_assert_eq(memcmp(out, "Ma", 2), 0);
    cr_assert_eq(util_base64url_decode("TWFu", 4, out, sizeof out), 3);
    cr_assert_eq(memcmp(out, "Man", 3), 0);
    cr_assert_eq(util_base64url_decode("-_8", 3, out, sizeof out), 2);
    cr_assert_eq(out[0], 0xfb);
    cr_assert_eq(out[1], 0xff);
    cr_assert_eq(util_base64url_decode("TWE=", 4, out, sizeof out), -1, "padding is not base64url");
    cr_assert_eq(util_base64url_decode("T+E", 3, out, sizeof out), -1,
                 "'+' is base64, not base64url");
    cr_assert_eq(util_base64url_decode("T", 1, out, sizeof out), -1,
                 "one character cannot be a byte");
    cr_assert_eq(util_base64url_decode("TWF", 3, out, sizeof out), -1,
                 "leftover bits must be zero");
}

/* n bytes of a pattern, encoded; decoded into a guarded buffer of room cap. */
static long
decode_into(size_t n, size_t cap, unsigned char *guarded, size_t guarded_len)
{
    unsigned char in[256];
    char text[400];
    for (size_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    size_t len = util_base64url_encode(in, n, text);
    memset(guarded, 0xa5, guarded_len);
    long r = util_base64url_decode(text, len, guarded, cap);
    if (r >= 0)
        cr_assert_eq(memcmp(guarded, in, (size_t)r), 0, "%zu bytes decoded wrong", n);
    return r;
}

Test(util, base64url_decode_bound)
{
    unsigned char buf[256];
    /* Each length of last group (4, 2 and 3 characters): exactly the room fits, one byte less not.
     */
    for (size_t n = 30; n <= 33; n++) {
        cr_assert_eq(decode_into(n, n, buf, sizeof buf), (long)n, "%zu bytes into %zu", n, n);
        cr_assert_eq(decode_into(n, n - 1, buf, sizeof buf), -1, "%zu bytes into %zu", n, n - 1);
        for (size_t i = 0; i < sizeof buf; i++)
            cr_assert_eq(buf[i], 0xa5, "refused, yet byte %zu was written", i);
    }
    /* The requestState case: 183 bytes offered to a 64-byte MAC buffer. */
    cr_assert_eq(decode_into(183, 64, buf, sizeof buf), -1);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0xa5, "refused, yet byte %zu was written", i);
    cr_assert_eq(decode_into(0, 0, buf, sizeof buf), 0, "nothing fits in no room");
    cr_assert_eq(util_base64url_decode("AA", 2, buf, 0), -1, "one byte does not");
}

/* util_file_unsafe on a fresh file of mode (and owner uid when not -1); NULL or the message. */
static const char *
file_verdict(mode_t mode, uid_t uid, bool secret, char *path, char *buf, size_t len)
{
    strcpy(path, "/tmp/test_util_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_neq(fd, -1);
    cr_assert_eq(fchmod(fd, mode), 0);
    if (uid != (uid_t)-1)
        cr_assert_eq(fchown(fd, uid, (gid_t)-1), 0);
    const char *r = util_file_unsafe(fd, path, secret, buf, len);
    close(fd);
    unlink(path);
    return r;
}

Test(util, file_unsafe)
{
    char path[32], buf[256], want[256];
    cr_assert_null(file_verdict(0644, (uid_t)-1, false, path, buf, sizeof buf));
    cr_assert_null(file_verdict(0640, (uid_t)-1, true, path, buf, sizeof buf));
    cr_assert_null(file_verdict(0600, (uid_t)-1, true, path, buf, sizeof buf));
    cr_assert_not_null(file_verdict(0664, (uid_t)-1, false, path, buf, sizeof buf));
    snprintf(want, sizeof want, "%s is writable by its group: chmod go-w %s", path, path);
    cr_assert_str_eq(buf, want);
    cr_assert_not_null(file_verdict(0646, (uid_t)-1, false, path, buf, sizeof buf));
    snprintf(want, sizeof want, "%s is writable by others: chmod go-w %s", path, path);
    cr_assert_str_eq(buf, want);
    cr_assert_not_null(file_verdict(0644, (uid_t)-1, true, path, buf, sizeof buf));
    snprintf(want, sizeof want, "%s holds a secret and is readable by others: chmod 0640 %s", path,
             path);
    cr_assert_str_eq(buf, want);
    /* Owned by someone else than root or this user: only root can make such a file here. */
    if (geteuid() == 0) {
        cr_assert_not_null(file_verdict(0600, 4242, true, path, buf, sizeof buf));
        snprintf(want, sizeof want,
                 "%s is owned by uid 4242, neither root nor this user (uid 0): chown root %s", path,
                 path);
        cr_assert_str_eq(buf, want);
    }
}

/* Text shown to operators is cut at a character boundary, and times are RFC 3339 UTC. */
Test(util, utf8_copy_and_rfc3339)
{
    char out[6];
    cr_assert(!util_utf8_copy(out, sizeof out, "abcde"));
    cr_assert_str_eq(out, "abcde");
    cr_assert(util_utf8_copy(out, sizeof out, "abcdef"));
    cr_assert_str_eq(out, "abcde");
    /* "ab" then two 2-byte characters: the second would end past 5 bytes, so it goes whole. */
    cr_assert(util_utf8_copy(out, sizeof out, "ab\xc3\xbc\xc3\xbc"));
    cr_assert_str_eq(out, "ab\xc3\xbc");
    /* A 4-byte character that does not fit leaves nothing of itself. */
    cr_assert(util_utf8_copy(out, sizeof out, "a\xf0\x9f\x98\x80z"));
    cr_assert_str_eq(out, "a\xf0\x9f\x98\x80");
    cr_assert(util_utf8_copy(out, sizeof out, "ab\xf0\x9f\x98\x80"));
    cr_assert_str_eq(out, "ab");
    char at[UTIL_RFC3339_MAX];
    util_rfc3339(0, at);
    cr_assert_str_eq(at, "1970-01-01T00:00:00.000Z");
    util_rfc3339(1785231000123u, at);
    cr_assert_str_eq(at, "2026-07-28T09:30:00.123Z");
}

/* util_hash("principal") in a new process, which draws its own start. */
static size_t
hash_in_child(void)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        size_t h = util_hash("principal", 9);
        _exit(write(fd[1], &h, sizeof h) == (ssize_t)sizeof h ? 0 : 1);
    }
    size_t h = 0;
    cr_assert_eq(read(fd[0], &h, sizeof h), (ssize_t)sizeof h);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd[0]);
    close(fd[1]);
    return h;
}

Test(util, hash_start_is_drawn_per_process)
{
    /* Before this process draws its own start, so each child draws one. */
    size_t a = hash_in_child(), b = hash_in_child();
    cr_assert_neq(a, b, "two processes hash a name alike: the start is not drawn per process");
    cr_assert_eq(util_hash("principal", 9), util_hash("principal", 9), "one start per process");
}

Test(util, hash_pairs_and_spread)
{
    cr_assert_neq(util_hash2("a", 1, "bc", 2), util_hash2("ab", 2, "c", 1));
    cr_assert_neq(util_hash2("", 0, "ab", 2), util_hash2("ab", 2, "", 0));
    /* 65,536 names that differ in their last bytes, into 1,024 chains by the low bits: 64 each. */
    static unsigned chain[1024];
    char name[32];
    for (unsigned i = 0; i < 65536; i++) {
        int n = snprintf(name, sizeof name, "session-%u", i);
        chain[util_hash(name, (size_t)n) & 1023]++;
    }
    unsigned longest = 0;
    for (size_t i = 0; i < 1024; i++)
        longest = chain[i] > longest ? chain[i] : longest;
    cr_assert_lt(longest, 128, "a chain of %u where 64 is the mean", longest);
}

Test(util, u64_text_as_snprintf)
{
    /* Each power of ten, one below and above it, and UINT64_MAX less it: every length, 1 to 20. */
    uint64_t v = 1;
    for (int i = 0; i <= 20; i++) {
        uint64_t cases[] = { v, v - 1, v + 1, UINT64_MAX - v };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            char want[32], got[UTIL_U64_TEXT_MAX + 8];
            memset(got, 'x', sizeof got);
            int n = snprintf(want, sizeof want, "%" PRIu64, cases[k]);
            cr_assert_eq(util_u64_text(cases[k], got), (size_t)n, "%s", want);
            cr_assert_str_eq(got, want);
        }
        if (v > UINT64_MAX / 10)
            break;
        v *= 10;
    }
    char max[UTIL_U64_TEXT_MAX];
    cr_assert_eq(util_u64_text(UINT64_MAX, max), UTIL_U64_TEXT_MAX - 1);
    cr_assert_str_eq(max, "18446744073709551615");
}
