/* SPDX-License-Identifier: MIT */
/*
 * log: whatever a peer puts in a session id or a message stays inside its field of one line, in
 * every format. stderr is captured in a temporary file; each line is checked for its shape (one
 * newline, no control byte, valid UTF-8, at most LOG_LINE_MAX bytes, one leading <N> in the
 * journal, JSON that parses), then its escaping is undone and compared with what was logged.
 * fatal and fatalx exit, so they run in this binary re-executed (a constructor catches it).
 * Under systemd (JOURNAL_STREAM naming stderr) the journal format goes by the native protocol: a
 * receiver bound here checks the datagram's fields byte for byte, and stderr once it is gone.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "log.h"

extern char **environ;

TestSuite(log, .timeout = 20);

static const enum log_format formats[] = { LOG_FORMAT_TEXT, LOG_FORMAT_JSON, LOG_FORMAT_JOURNAL };
static const char *const format_names[] = { "text", "json", "journal" };

#define CUT     LOG_CUT_MARK
#define CUT_LEN (sizeof(LOG_CUT_MARK) - 1)

/* --- capturing stderr -------------------------------------------------------------------- */

struct cap {
    int saved;
    FILE *f;
};

static void
cap_start(struct cap *c)
{
    c->f = tmpfile();
    cr_assert_not_null(c->f);
    c->saved = dup(STDERR_FILENO);
    cr_assert_neq(c->saved, -1);
    cr_assert_neq(dup2(fileno(c->f), STDERR_FILENO), -1);
}

/* Restores stderr; returns what was written (malloc'd, NUL-terminated), its length in *len. */
static char *
cap_end(struct cap *c, size_t *len)
{
    cr_assert_neq(dup2(c->saved, STDERR_FILENO), -1);
    close(c->saved);
    off_t n = lseek(fileno(c->f), 0, SEEK_END);
    cr_assert_geq(n, 0);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(pread(fileno(c->f), buf, (size_t)n, 0), n);
    buf[n] = '\0';
    fclose(c->f);
    *len = (size_t)n;
    return buf;
}

/* Runs the statement with stderr captured into out / out_len. */
#define CAPTURE(out, out_len, stmt)         \
    do {                                    \
        struct cap cap_;                    \
        cap_start(&cap_);                   \
        stmt;                               \
        (out) = cap_end(&cap_, &(out_len)); \
    } while (0)

/* --- reading a line back ----------------------------------------------------------------- */

/* What one line said, its escaping undone. */
struct parsed {
    int prio; /* journal: N of the leading <N>; -1 otherwise */
    char level[8];
    bool has_sid;
    char sid[1024];
    size_t sid_len;
    char msg[8192];
    size_t msg_len;
    bool cut; /* the message ended with LOG_CUT_MARK (removed from msg) */
};

static int
hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Undoes the text/journal escaping of in[0..n): \\, \n, \r, \t, \xNN (lower case). */
static size_t
unescape(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_lt(o, cap);
        if (in[i] != '\\') {
            out[o++] = in[i];
            continue;
        }
        cr_assert_lt(i + 1, n, "a lone backslash ends the field: %.*s", (int)n, in);
        char e = in[++i];
        if (e == '\\' || e == 'n' || e == 'r' || e == 't') {
            out[o++] = e == '\\' ? '\\' : e == 'n' ? '\n' : e == 'r' ? '\r' : '\t';
        } else {
            cr_assert_eq(e, 'x', "unknown escape \\%c in %.*s", e, (int)n, in);
            cr_assert_lt(i + 2, n);
            int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            cr_assert(hi >= 0 && lo >= 0, "bad \\x escape in %.*s", (int)n, in);
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        }
    }
    return o;
}

static void
take_cut(struct parsed *p, const char **msg, size_t *n)
{
    p->cut = *n >= CUT_LEN && memcmp(*msg + *n - CUT_LEN, CUT, CUT_LEN) == 0;
    if (p->cut)
        *n -= CUT_LEN;
}

static void
parse_plain(enum log_format f, const char *line, size_t n, struct parsed *p)
{
    const char *s = line, *end = line + n;
    if (f == LOG_FORMAT_JOURNAL) {
        cr_assert(n >= 3 && s[0] == '<' && s[1] >= '0' && s[1] <= '7' && s[2] == '>',
                  "journal line without <N>: %.*s", (int)n, line);
        p->prio = s[1] - '0';
        s += 3;
        cr_assert_neq(*s, '<', "a second <N> after the priority: %.*s", (int)n, line);
    } else {
        /* 2024-01-02T03:04:05.678Z level */
        cr_assert(n > 25 && s[4] == '-' && s[10] == 'T' && s[23] == 'Z' && s[24] == ' ',
                  "no timestamp: %.*s", (int)n, line);
        s += 25;
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        cr_assert_not_null(sp, "no level: %.*s", (int)n, line);
        cr_assert_lt((size_t)(sp - s), sizeof(p->level));
        memcpy(p->level, s, (size_t)(sp - s));
        s = sp + 1;
    }
    if ((size_t)(end - s) >= 8 && memcmp(s, "session=", 8) == 0) {
        p->has_sid = true;
        s += 8;
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        cr_assert_not_null(sp, "session id not ended by a space: %.*s", (int)n, line);
        p->sid_len = unescape(s, (size_t)(sp - s), p->sid, sizeof(p->sid));
        s = sp + 1;
    }
    size_t mn = (size_t)(end - s);
    take_cut(p, &s, &mn);
    p->msg_len = unescape(s, mn, p->msg, sizeof(p->msg));
}

static void
parse_json(const char *line, size_t n, struct parsed *p)
{
    json_error_t err;
    json_t *o = json_loadb(line, n, JSON_ALLOW_NUL, &err);
    cr_assert_not_null(o, "not JSON (%s): %.*s", err.text, (int)n, line);
    cr_assert(json_is_string(json_object_get(o, "ts")));
    json_t *lv = json_object_get(o, "level");
    cr_assert(json_is_string(lv));
    snprintf(p->level, sizeof(p->level), "%s", json_string_value(lv));
    json_t *sid = json_object_get(o, "session");
    cr_assert_eq(json_object_size(o), sid ? 4u : 3u, "unexpected keys: %.*s", (int)n, line);
    if (sid != NULL) {
        cr_assert(json_is_string(sid));
        p->has_sid = true;
        p->sid_len = json_string_length(sid);
        cr_assert_lt(p->sid_len, sizeof(p->sid));
        memcpy(p->sid, json_string_value(sid), p->sid_len);
    }
    json_t *msg = json_object_get(o, "msg");
    cr_assert(json_is_string(msg));
    const char *m = json_string_value(msg);
    size_t mn = json_string_length(msg);
    take_cut(p, &m, &mn);
    cr_assert_lt(mn, sizeof(p->msg));
    memcpy(p->msg, m, mn);
    p->msg_len = mn;
    json_decref(o);
}

/* Checks out[0..n) is exactly one well-formed line of format f, and reads it into p. */
static void
parse_line(enum log_format f, const char *out, size_t n, struct parsed *p)
{
    memset(p, 0, sizeof(*p));
    p->prio = -1;
    cr_assert_gt(n, 0, "nothing logged");
    cr_assert_leq(n, LOG_LINE_MAX, "a line of %zu bytes", n);
    cr_assert_eq(out[n - 1], '\n', "no newline at the end: %s", out);
    for (size_t i = 0; i + 1 < n; i++)
        cr_assert((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] != 0x7f,
                  "control byte 0x%02x at %zu of %.*s", (unsigned char)out[i], i, (int)n, out);
    json_t *utf8 = json_stringn(out, n); /* NULL when not valid UTF-8 */
    cr_assert_not_null(utf8, "not valid UTF-8: %.*s", (int)n, out);
    json_decref(utf8);
    if (f == LOG_FORMAT_JSON)
        parse_json(out, n - 1, p);
    else
        parse_plain(f, out, n - 1, p);
}

/* Logs "%.*s" of msg[0..msg_len) with sid in format f at level; returns the parsed line. */
static void
log_one(enum log_format f, enum log_level level, const char *sid, const char *msg, size_t msg_len,
        struct parsed *p)
{
    log_init(LOG_DEBUG, f);
    char *out;
    size_t n;
    CAPTURE(out, n, log_msg(level, sid, "%.*s", (int)msg_len, msg));
    parse_line(f, out, n, p);
    free(out);
}

static void
assert_bytes(const char *got, size_t got_len, const char *want, size_t want_len, const char *what,
             const char *format)
{
    cr_assert(got_len == want_len && memcmp(got, want, want_len) == 0,
              "%s: %s: got [%.*s] (%zu bytes), want [%.*s] (%zu bytes)", format, what, (int)got_len,
              got, got_len, (int)want_len, want, want_len);
}

/* In every format, msg and sid come back exactly, on one line, not cut. */
static void
round_trip(const char *sid, const char *msg)
{
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        struct parsed p;
        log_one(formats[i], LOG_INFO, sid, msg, strlen(msg), &p);
        assert_bytes(p.msg, p.msg_len, msg, strlen(msg), "message", format_names[i]);
        cr_assert_not(p.cut, "%s: cut", format_names[i]);
        cr_assert_eq(p.has_sid, sid != NULL, "%s: session field", format_names[i]);
        if (sid != NULL)
            assert_bytes(p.sid, p.sid_len, sid, strlen(sid), "session id", format_names[i]);
    }
}

/* The raw line logged in format f for sid and "%s" msg. */
static char *
raw_line(enum log_format f, const char *sid, const char *msg)
{
    log_init(LOG_DEBUG, f);
    char *out;
    size_t n;
    CAPTURE(out, n, log_info(sid, "%s", msg));
    return out;
}

/* --- the hostile bytes, in the message and in the session id ----------------------------- */

static const char *const hostile[] = {
    "cr\rin the middle",
    "lf\nin the middle",
    "crlf at the end\r\n",
    "a \"quoted\" word",
    "a back\\slash, and \\n not a newline",
    "<0>at the start",
    "after a newline\n<0>forged emergency",
    "after a crlf\r\n<3>forged error",
    "<0>",
    "\"}\n{\"ts\":\"x\",\"level\":\"error\",\"msg\":\"forged\"}",
    "2024-01-01T00:00:00.000Z error forged",
    "del\x7f and escape \x1b[31mred\x1b[0m, bell \a, tab \t, vt \v, ff \f, bs \b",
    "C1 controls: NEL \xc2\x85 CSI \xc2\x9b",
    "line separators: \xe2\x80\xa8 \xe2\x80\xa9",
    "valid UTF-8 passes: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
    "",
};

Test(log, hostile_messages_round_trip_in_every_format)
{
    for (size_t i = 0; i < ARRAY_LEN(hostile); i++) {
        round_trip(NULL, hostile[i]);
        round_trip("sid-1", hostile[i]);
    }
}

Test(log, hostile_session_ids_round_trip_in_every_format)
{
    static const char *const sids[] = {
        "cr\rsid", "lf\nsid",      "quote\"sid", "back\\slash",
        "<0>sid",  "x\n<0>forged", "with space", "\"},{\"level\":\"error",
        "del\x7f", "\xc2\x85",     "",
    };
    for (size_t i = 0; i < ARRAY_LEN(sids); i++) {
        round_trip(sids[i], "hello");
        round_trip(sids[i], "x\n<0>forged");
    }
}

Test(log, escapes_are_the_documented_ones)
{
    char *t = raw_line(LOG_FORMAT_TEXT, "s\"\\ <0>\r\n", "a\r\nb\t\"\\\x01\x7f");
    cr_assert_not_null(
        strstr(t, " info session=s\"\\\\\\x20<0>\\r\\n a\\r\\nb\\t\"\\\\\\x01\\x7f\n"), "%s", t);
    free(t);
    char *j = raw_line(LOG_FORMAT_JSON, "s\"\\ <0>\r\n", "a\r\nb\t\"\\\x01\x7f\b\f");
    cr_assert_not_null(strstr(j, ",\"level\":\"info\",\"session\":\"s\\\"\\\\ <0>\\r\\n\","
                                 "\"msg\":\"a\\r\\nb\\t\\\"\\\\\\u0001\\u007f\\b\\f\"}\n"),
                       "%s", j);
    free(j);
    char *g = raw_line(LOG_FORMAT_JOURNAL, NULL, "<0>x\n<0>y");
    cr_assert_str_eq(g, "<6>\\x3c0>x\\n<0>y\n");
    free(g);
    g = raw_line(LOG_FORMAT_JOURNAL, "<0>", "<0>x");
    cr_assert_str_eq(g, "<6>session=<0> <0>x\n");
    free(g);
}

Test(log, journal_priority_is_the_level)
{
    static const int prio[] = { 3, 4, 6, 7 };
    for (int level = LOG_ERROR; level <= LOG_DEBUG; level++) {
        struct parsed p;
        log_one(LOG_FORMAT_JOURNAL, (enum log_level)level, NULL, "<0>x\n<0>", 8, &p);
        cr_assert_eq(p.prio, prio[level]);
        assert_bytes(p.msg, p.msg_len, "<0>x\n<0>", 8, "message", "journal");
        log_one(LOG_FORMAT_JOURNAL, (enum log_level)level, "<1>", "<0>", 3, &p);
        cr_assert_eq(p.prio, prio[level]);
    }
}

Test(log, levels_below_the_threshold_write_nothing)
{
    log_init(LOG_INFO, LOG_FORMAT_JOURNAL);
    char *out;
    size_t n;
    CAPTURE(out, n, log_debug(NULL, "%s", "hidden"));
    cr_assert_eq(n, 0);
    free(out);
}

/* --- NUL --------------------------------------------------------------------------------- */

Test(log, nul_ends_a_session_id)
{
    /* A session id is a C string: whatever follows a NUL never reaches the log. */
    static const char sid[] = "ab\0<0>cd";
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        struct parsed p;
        log_one(formats[i], LOG_INFO, sid, "m", 1, &p);
        assert_bytes(p.sid, p.sid_len, "ab", 2, "session id", format_names[i]);
    }
}

Test(log, nul_ends_a_string_argument)
{
    /* %.*s stops at a NUL inside its bytes (a child's stderr line is logged that way). */
    static const char line[] = "before\0\n<0>after";
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        struct parsed p;
        log_one(formats[i], LOG_INFO, "s", line, sizeof(line) - 1, &p);
        assert_bytes(p.msg, p.msg_len, "before", 6, "message", format_names[i]);
    }
}

Test(log, nul_from_a_char_argument_is_escaped)
{
    /* The one way a NUL gets inside the formatted text: %c of 0. It is escaped, not a cut. */
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        log_init(LOG_DEBUG, formats[i]);
        char *out;
        size_t n;
        CAPTURE(out, n, log_info(NULL, "a%cb\n<0>c", 0));
        struct parsed p;
        parse_line(formats[i], out, n, &p);
        assert_bytes(p.msg, p.msg_len, "a\0b\n<0>c", 8, "message", format_names[i]);
        cr_assert_not_null(strstr(out, formats[i] == LOG_FORMAT_JSON ? "a\\u0000b" : "a\\x00b"),
                           "%s", out);
        free(out);
    }
}

/* --- invalid UTF-8 ----------------------------------------------------------------------- */

static const char invalid[] = "lone \xff, \xfe, cont \x80, lead \xc3 x, overlong \xc0\xaf and "
                              "\xe0\x80\xaf, surrogate \xed\xa0\x80, too big \xf4\x90\x80\x80, "
                              "cut \xe2\x82";

Test(log, invalid_utf8_text_and_journal_give_the_bytes_back)
{
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        if (formats[i] == LOG_FORMAT_JSON)
            continue;
        struct parsed p;
        log_one(formats[i], LOG_INFO, "\xff<0>\xc3", invalid, sizeof(invalid) - 1, &p);
        assert_bytes(p.msg, p.msg_len, invalid, sizeof(invalid) - 1, "message", format_names[i]);
        assert_bytes(p.sid, p.sid_len, "\xff<0>\xc3", 5, "session id", format_names[i]);
    }
    char *t = raw_line(LOG_FORMAT_TEXT, NULL,
                       "a\xff"
                       "b\xc3");
    cr_assert_not_null(strstr(t, " a\\xffb\\xc3\n"), "%s", t);
    free(t);
}

Test(log, invalid_utf8_json_parses_as_latin1)
{
    static const char msg[] = "a\xff"
                              "b\xc3\x28 \xed\xa0\x80";
    struct parsed p;
    log_one(LOG_FORMAT_JSON, LOG_INFO, "\xff<0>", msg, sizeof(msg) - 1, &p);
    /* Each stray byte reads as the code point of the same value (UTF-8 here). */
    static const char want[] = "a\xc3\xbf"
                               "b\xc3\x83( \xc3\xad\xc2\xa0\xc2\x80";
    assert_bytes(p.msg, p.msg_len, want, sizeof(want) - 1, "message", "json");
    assert_bytes(p.sid, p.sid_len, "\xc3\xbf<0>", 5, "session id", "json");
    char *j = raw_line(LOG_FORMAT_JSON, NULL,
                       "a\xff"
                       "b");
    cr_assert_not_null(strstr(j, "\"msg\":\"a\\u00ffb\"}\n"), "%s", j);
    free(j);
    /* The whole of the invalid sample still makes a line JSON accepts (parse_line checks). */
    log_one(LOG_FORMAT_JSON, LOG_INFO, NULL, invalid, sizeof(invalid) - 1, &p);
}

/* --- bounds ------------------------------------------------------------------------------ */

/*
 * A message of copies of unit, logged in every format: one line, cut, with the mark. atomic:
 * unit is one escape or one UTF-8 sequence, so the kept part holds whole units only.
 */
static void
over_long(const char *unit, bool atomic, const char *sid)
{
    size_t ul = strlen(unit), total = 0;
    char *msg = malloc(20000);
    cr_assert_not_null(msg);
    while (total + ul < 20000) {
        memcpy(msg + total, unit, ul);
        total += ul;
    }
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        log_init(LOG_DEBUG, formats[i]);
        char *out;
        size_t n;
        CAPTURE(out, n, log_warn(sid, "%.*s", (int)total, msg));
        struct parsed p;
        parse_line(formats[i], out, n, &p);
        cr_assert(p.cut, "%s: no cut mark: %s", format_names[i], out + n - 40);
        cr_assert_gt(n, LOG_LINE_MAX / 2, "%s: cut far too early (%zu bytes)", format_names[i], n);
        /* Cut between whole units: the kept part is a prefix of whole escapes and sequences. */
        cr_assert_leq(p.msg_len, total);
        cr_assert_eq(memcmp(p.msg, msg, p.msg_len), 0, "%s: kept part differs", format_names[i]);
        if (atomic)
            cr_assert_eq(p.msg_len % ul, 0, "%s: a unit cut in half", format_names[i]);
        if (sid != NULL)
            assert_bytes(p.sid, p.sid_len, sid, strlen(sid), "session id", format_names[i]);
        free(out);
    }
    free(msg);
}

Test(log, over_long_messages_are_cut_with_a_mark)
{
    over_long("a", true, NULL);
    over_long("a", true, "sid-1");
    over_long("\x01", true, "sid-1");          /* \x01 or \u0001 each */
    over_long("\xe2\x82\xac", true, NULL);     /* a 3-byte sequence, copied whole */
    over_long("\xf0\x9f\x98\x80", true, "s");  /* a 4-byte one; 4095 bytes end inside one */
    over_long("\\\"", false, NULL);            /* \\ and \" in JSON */
    over_long("ab\xc2\x85", false, "<0>\r\n"); /* \xc2\x85 in text, \u0085 in JSON */
}

Test(log, over_long_session_id_is_cut_with_a_mark)
{
    char sid[2000];
    memset(sid, '\n', sizeof(sid) - 1);
    sid[sizeof(sid) - 1] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(formats); i++) {
        struct parsed p;
        log_one(formats[i], LOG_INFO, sid, "after", 5, &p);
        assert_bytes(p.msg, p.msg_len, "after", 5, "message", format_names[i]);
        cr_assert_lt(p.sid_len, 200);
        cr_assert_geq(p.sid_len, CUT_LEN);
        cr_assert_eq(memcmp(p.sid + p.sid_len - CUT_LEN, CUT, CUT_LEN), 0, "%s: no mark",
                     format_names[i]);
    }
}

/* --- fatal and fatalx -------------------------------------------------------------------- */

/*
 * This binary re-executed with TEST_LOG_FATAL=format:fatal|fatalx logs through fatal or fatalx
 * and exits before Criterion starts.
 */
__attribute__((constructor)) static void
fatal_helper(void)
{
    const char *how = getenv("TEST_LOG_FATAL");
    if (how == NULL)
        return;
    log_init(LOG_INFO, strncmp(how, "json", 4) == 0      ? LOG_FORMAT_JSON
                       : strncmp(how, "journal", 7) == 0 ? LOG_FORMAT_JOURNAL
                                                         : LOG_FORMAT_TEXT);
    if (strstr(how, ":fatalx") != NULL)
        fatalx("bad %s", "<0>x\r\n<0>forged \"\\");
    errno = ENOENT;
    fatal("open %s", "<0>x\r\n<0>forged \"\\");
}

/* Runs the helper; returns its stderr (malloc'd) and checks it exited with status 1. */
static char *
run_fatal(const char *how, size_t *len)
{
    /* Not the whole environment: Criterion's own variables would make it a worker. */
    char env[64];
    snprintf(env, sizeof(env), "TEST_LOG_FATAL=%s", how);
    char *envp[8] = { env };
    size_t ne = 1;
    static const char *const keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
    for (size_t i = 0; i < ARRAY_LEN(keep); i++)
        for (char **e = environ; *e != NULL; e++)
            if (strncmp(*e, keep[i], strlen(keep[i])) == 0 && (*e)[strlen(keep[i])] == '=')
                envp[ne++] = *e;
    struct cap cap;
    cap_start(&cap);
    char *argv[] = { (char[]){ "test_log" }, NULL };
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp);
    int st = 0;
    pid_t w = rc == 0 ? waitpid(pid, &st, 0) : -1;
    char *out = cap_end(&cap, len);
    cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
    cr_assert_eq(w, pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: status %d, stderr %s", how, st, out);
    return out;
}

Test(log, fatal_and_fatalx_escape_like_the_rest)
{
    static const char *const kinds[] = { "fatal", "fatalx" };
    for (size_t i = 0; i < ARRAY_LEN(formats); i++)
        for (size_t k = 0; k < 2; k++) {
            char how[32];
            snprintf(how, sizeof(how), "%s:%s", format_names[i], kinds[k]);
            size_t n;
            char *out = run_fatal(how, &n);
            struct parsed p;
            parse_line(formats[i], out, n, &p);
            const char *want = k == 0 ? "open <0>x\r\n<0>forged \"\\: No such file or directory"
                                      : "bad <0>x\r\n<0>forged \"\\";
            assert_bytes(p.msg, p.msg_len, want, strlen(want), "message", how);
            if (formats[i] == LOG_FORMAT_JOURNAL)
                cr_assert_eq(p.prio, 3);
            else
                cr_assert_str_eq(p.level, "error");
            free(out);
        }
}

/* The whole file at path (malloc'd, NUL-terminated); "" when it does not exist. */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    cr_assert_not_null(buf);
    if (f != NULL) {
        size_t n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

Test(log, log_file_appends_and_reopens_at_its_path_after_a_rename)
{
    char dir[] = "/tmp/mcpgw-logtest-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], moved[160];
    snprintf(path, sizeof(path), "%s/gw.log", dir);
    snprintf(moved, sizeof(moved), "%s.1", path);
    log_init(LOG_INFO, LOG_FORMAT_TEXT);
    const char *why, *access_why;
    cr_assert_eq(log_reopen(&why, &access_why), 0, "nothing to reopen without a file");
    cr_assert_null(log_file());
    cr_assert_eq(log_set_file(path, &why), 0);
    cr_assert_str_eq(log_file(), path);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0137, 0, "mode %o", (unsigned)st.st_mode & 0777);
    log_info(NULL, "first");
    cr_assert_eq(rename(path, moved), 0);
    log_info(NULL, "second"); /* still the renamed file: it is open */
    cr_assert_eq(log_reopen(&why, &access_why), 0);
    log_info(NULL, "third");
    char *old = slurp(moved), *now = slurp(path);
    cr_assert(strstr(old, "info first\n") && strstr(old, "info second\n") && !strstr(old, "third"),
              "%s", old);
    cr_assert(strstr(now, "info third\n") && !strstr(now, "first"), "%s", now);
    free(old);
    free(now);
    /* A file that cannot be opened: -1, and lines stay in the one open. */
    char bad[160];
    snprintf(bad, sizeof(bad), "%s/no/such/dir/gw.log", dir);
    cr_assert_eq(log_set_file(bad, &why), -1);
    cr_assert_str_eq(why, strerror(ENOENT));
    cr_assert_str_eq(log_file(), path);
    log_info(NULL, "fourth");
    now = slurp(path);
    cr_assert(strstr(now, "info fourth\n"), "%s", now);
    free(now);
    cr_assert_eq(log_set_file(NULL, &why), 0);
    cr_assert_null(log_file());
    unlink(path);
    unlink(moved);
    rmdir(dir);
}

Test(log, log_files_are_regular_files_named_by_their_own_path)
{
    /*
     * A symbolic link (which could name another user's file), a FIFO (whose open would wait for a
     * reader, and its writes block the loop) or a device is refused, at once and with its reason;
     * on a reopen the file already open stays, for the log and the access log alike.
     */
    char dir[] = "/tmp/mcpgw-logtest-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], other[128], moved[160], fifo[128], apath[128];
    snprintf(path, sizeof(path), "%s/gw.log", dir);
    snprintf(other, sizeof(other), "%s/someone-elses", dir);
    snprintf(moved, sizeof(moved), "%s.1", path);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(apath, sizeof(apath), "%s/access.log", dir);
    int ofd = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_neq(ofd, -1);
    close(ofd);
    cr_assert_eq(symlink(other, path), 0);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    log_init(LOG_INFO, LOG_FORMAT_TEXT);
    const char *why = NULL, *access_why = NULL;
    cr_assert_eq(log_set_file(path, &why), -1, "a symbolic link is not followed");
    cr_assert(strstr(why, "symbolic link") != NULL, "%s", why);
    cr_assert_eq(log_set_file(fifo, &why), -1, "a FIFO is refused without waiting");
    cr_assert(strstr(why, "not a regular file") != NULL, "%s", why);
    cr_assert_eq(log_set_file("/dev/null", &why), -1, "a device is refused");
    cr_assert_str_eq(why, "not a regular file");
    cr_assert_eq(log_set_access(fifo, LOG_FORMAT_TEXT, &why), -1);
    cr_assert(strstr(why, "not a regular file") != NULL, "%s", why);
    cr_assert_null(log_file());
    /* Rotation, then the path comes back as a link and as a FIFO: the open files stay. */
    unlink(path);
    cr_assert_eq(log_set_file(path, &why), 0, "%s", why);
    cr_assert_eq(log_set_access(apath, LOG_FORMAT_TEXT, &why), 0, "%s", why);
    cr_assert_eq(rename(path, moved), 0);
    cr_assert_eq(symlink(other, path), 0);
    cr_assert_eq(unlink(apath), 0);
    cr_assert_eq(mkfifo(apath, 0600), 0);
    cr_assert_eq(log_reopen(&why, &access_why), -1);
    cr_assert(why != NULL && strstr(why, "symbolic link") != NULL, "%s", why);
    cr_assert(access_why != NULL && strstr(access_why, "not a regular file") != NULL, "%s",
              access_why);
    cr_assert_str_eq(log_file(), path);
    log_info(NULL, "after the refused reopen");
    char *old = slurp(moved), *theirs = slurp(other);
    cr_assert(strstr(old, "info after the refused reopen\n") != NULL, "%s", old);
    cr_assert_str_eq(theirs, "", "the link's target is not written: %s", theirs);
    free(old);
    free(theirs);
    cr_assert_eq(log_set_access(NULL, LOG_FORMAT_TEXT, &why), 0);
    cr_assert_eq(log_set_file(NULL, &why), 0);
    unlink(path);
    unlink(moved);
    unlink(other);
    unlink(fifo);
    unlink(apath);
    rmdir(dir);
}

Test(log, limit_holds_repeats_back_and_counts_them)
{
    struct log_limit ll = { 0 };
    char note[80];
    cr_assert_str_eq(log_limit_note(&ll, 1000, 5000, note, sizeof(note)), "");
    cr_assert_null(log_limit_note(&ll, 2000, 5000, note, sizeof(note)));
    cr_assert_null(log_limit_note(&ll, 5999, 5000, note, sizeof(note)));
    cr_assert_str_eq(log_limit_note(&ll, 6000, 5000, note, sizeof(note)),
                     " (2 more like this in the last 5 s)");
    cr_assert_str_eq(log_limit_note(&ll, 20000, 5000, note, sizeof(note)), "");
}

/* --- the journal's native protocol --------------------------------------------------------- */

#include <sys/socket.h>
#include <sys/un.h>

#include "journal.h"

/* A receiver bound at a temporary path, named by MCPGW_JOURNAL_SOCKET; its fd. */
static int
journal_receiver(char *path, size_t size)
{
    snprintf(path, size, "/tmp/mcpgw-test-journal-%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    cr_assert_neq(fd, -1);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s", strerror(errno));
    cr_assert_eq(setenv(JOURNAL_SOCKET_ENV, path, 1), 0);
    return fd;
}

/* A value with a newline goes in the binary form: KEY, newline, length (LE 64), value, newline. */
Test(log, journal_send_fields)
{
    char path[108];
    int fd = journal_receiver(path, sizeof(path));
    cr_assert_eq(journal_open(), 0);
    const struct journal_field f[] = { { "MESSAGE", "hello", 5 }, { "MCPGW_X", "a\nb", 3 } };
    cr_assert_eq(journal_send(f, 2), 0, "%s", strerror(errno));
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    static const char want[] = "MESSAGE=hello\nMCPGW_X\n\x03\0\0\0\0\0\0\0a\nb\n";
    cr_assert_eq(n, (ssize_t)sizeof(want) - 1);
    cr_assert_eq(memcmp(buf, want, sizeof(want) - 1), 0);
    /* No receiver: -1, nothing blocks. */
    close(fd);
    unlink(path);
    cr_assert_eq(journal_send(f, 2), -1);
    journal_close();
    unsetenv(JOURNAL_SOCKET_ENV);
}

/*
 * The journal format, with JOURNAL_STREAM naming stderr: the entry goes to the receiver with its
 * fields and nothing to stderr; with the receiver gone, the line goes to stderr as before.
 */
Test(log, journal_native_entry)
{
    char path[108];
    int fd = journal_receiver(path, sizeof(path));
    struct cap c;
    cap_start(&c);
    struct stat st;
    cr_assert_eq(fstat(STDERR_FILENO, &st), 0);
    char js[64];
    snprintf(js, sizeof(js), "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
    cr_assert_eq(setenv("JOURNAL_STREAM", js, 1), 0);
    log_init(LOG_INFO, LOG_FORMAT_JOURNAL);
    cr_assert(journal_is_open());
    log_set_request("rid-1");
    const struct log_field f[] = { { "server", "srv one", false },
                                   { "child", "42", true },
                                   { "principal", NULL, false } };
    log_fields(LOG_WARN, "sid-1", f, 3, "child %s said\n<0>no", "42");
    log_set_request(NULL);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    char want[512];
    snprintf(want, sizeof(want),
             "MESSAGE=session=sid-1 child 42 said\\n<0>no request_id=rid-1\n"
             "PRIORITY=4\n"
             "SYSLOG_IDENTIFIER=%s\n"
             "MCPGW_REQUEST_ID=rid-1\n"
             "MCPGW_SESSION=sid-1\n"
             "MCPGW_SERVER=srv one\n"
             "MCPGW_CHILD=42\n",
             program_invocation_short_name);
    cr_assert_str_eq(buf, want);
    close(fd);
    unlink(path);
    log_info(NULL, "no journal now");
    log_init(LOG_INFO, LOG_FORMAT_TEXT);
    cr_assert(!journal_is_open());
    unsetenv("JOURNAL_STREAM");
    unsetenv(JOURNAL_SOCKET_ENV);
    size_t len;
    char *out = cap_end(&c, &len);
    cr_assert_str_eq(out, "<6>no journal now\n");
    free(out);
}
