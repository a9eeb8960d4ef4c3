/* SPDX-License-Identifier: MIT */
/*
 * One-line structured logs on stderr, text, JSON or journal, with the session id as a field.
 * Journald and docker both take stderr; [gateway] log_file names a file instead, which SIGUSR1
 * reopens after logrotate renamed it (log_reopen). No syslog, no rotation here. The journal
 * format on the journal's own stream sends each entry by the native protocol instead (journal.c),
 * its text as MESSAGE and its fields as MCPGW_ fields (log_journal).
 *
 * Past the fixed prefix (time, level, journald priority) everything may come from a peer: a
 * session id from a header or a query parameter, a method name, a child's stderr line. So the
 * session id and the message are escaped here, once per line, and no peer can end a line, forge
 * the next one or a journald priority, or make a JSON line unparsable:
 *
 *   text, journal: a backslash becomes \\; bytes 0x00-0x1f and 0x7f become \n, \r, \t or \xNN;
 *     a byte that is not part of valid UTF-8 becomes \xNN, and so does each of the two bytes of
 *     a C1 control (U+0080-U+009F: journald shows a line holding one as a blob); in the session
 *     id a space becomes \x20 too, so "session=ID " ends where it seems to; in a journal line
 *     without a session id, a '<' opening the message becomes \x3c. Nothing else changes:
 *     reading \\ and \xNN back as bytes gives the original exactly.
 *   json: JSON string escapes (\" \\ \n \r \t \b \f, \u00XX for other controls and 0x7f),
 *     \u0080-\u009f for C1 controls, \u2028 and \u2029; a byte that is not part of valid UTF-8
 *     becomes \u00XX of the byte, its Latin-1 reading. Lines are valid UTF-8 and parse;
 *     JSON.parse gives back valid UTF-8 text exactly, and any other byte as U+0080-U+00FF.
 *
 * A line, newline included, is at most LOG_LINE_MAX bytes and goes out in one write(2), so lines
 * never interleave. What does not fit is cut before a whole escape or UTF-8 sequence and ends
 * with LOG_CUT_MARK.
 */
#include "log.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"

#define LOG_TEXT_MAX 4096 /* a formatted message, before escaping */
#define LOG_SID_ROOM 200  /* bytes of an escaped session id; real ids are under 64 */

enum log_esc {
    LOG_ESC_TEXT = 0, /* text and journal message */
    LOG_ESC_SID,      /* text and journal session id: a space too */
    LOG_ESC_JSON,     /* the inside of a JSON string */
};

/* A line being built; len never passes sizeof(buf). */
struct log_line {
    char buf[LOG_LINE_MAX];
    size_t len;
};

static enum log_level log_level = LOG_INFO;
static enum log_format log_format;
static int log_fd = STDERR_FILENO;           /* stderr, or the log file */
static char log_path[4096];                  /* the log file's; "": stderr */
static const char *log_rid = ""; /* the request being handled (its caller's string); "": none */
static enum log_access_mode access_mode;     /* where access lines go */
static enum log_format access_format;
static int access_fd = -1; /* LOG_ACCESS_FILE: the access log */
static char access_path[4096];

static const char *const log_names[] = { "error", "warn", "info", "debug" };
static const char log_hex[] = "0123456789abcdef";
static const char log_cut[] = LOG_CUT_MARK;

void
log_init(enum log_level level, enum log_format format)
{
    log_level = level;
    log_format = format;
    /*
     * The journal format on the journal's own stream (systemd set JOURNAL_STREAM to stderr's
     * device and inode): entries go to journald natively, with fields; a line it cannot take
     * still goes to stderr. Anywhere else (a terminal, docker, a file) nothing changes.
     */
    if (format == LOG_FORMAT_JOURNAL && journal_stream_is(STDERR_FILENO)) {
        if (journal_open() == -1)
            journal_close();
    } else {
        journal_close();
    }
}

int
log_open_append(const char *path, const char **why)
{
    int fd = open(
        path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0640);
    if (fd == -1) {
        *why = errno == ELOOP   ? "a symbolic link, not followed: name the file itself"
               : errno == ENXIO ? "not a regular file (a FIFO or a socket)"
                                : strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        close(fd);
        return -1;
    }
    return fd;
}

/* The log file (log_open_append), its path no longer than log_path holds. */
static int
log_open(const char *path, const char **why)
{
    if (strlen(path) >= sizeof(log_path)) {
        *why = strerror(ENAMETOOLONG);
        return -1;
    }
    return log_open_append(path, why);
}

/* Lines go to fd from now on (the file just opened, or stderr). */
static void
log_use(int fd)
{
    if (log_fd != STDERR_FILENO)
        close(log_fd);
    log_fd = fd;
}

int
log_set_file(const char *path, const char **why)
{
    if (path == NULL || *path == '\0') {
        log_use(STDERR_FILENO);
        log_path[0] = '\0';
        return 0;
    }
    int fd = log_open(path, why);
    if (fd == -1)
        return -1;
    log_use(fd);
    memmove(log_path, path, strlen(path) + 1);
    return 0;
}

const char *
log_file(void)
{
    return log_path[0] != '\0' ? log_path : NULL;
}

const char *
log_access_file(void)
{
    return access_path[0] != '\0' ? access_path : NULL;
}

int
log_reopen(const char **log_why, const char **access_why)
{
    int ret = 0;
    *log_why = *access_why = NULL;
    if (access_path[0] != '\0') {
        int afd = log_open(access_path, access_why);
        if (afd == -1) {
            ret = -1;
        } else {
            close(access_fd);
            access_fd = afd;
        }
    }
    if (log_path[0] != '\0') {
        int fd = log_open(log_path, log_why);
        if (fd == -1)
            ret = -1;
        else
            log_use(fd);
    }
    return ret;
}

int
log_set_access(const char *path, enum log_format format, const char **why)
{
    access_format = format == LOG_FORMAT_JSON ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT;
    if (path == NULL || *path == '\0' || strcmp(path, "off") == 0) {
        if (access_fd != -1)
            close(access_fd);
        access_fd = -1;
        access_path[0] = '\0';
        access_mode = path != NULL && strcmp(path, "off") == 0 ? LOG_ACCESS_OFF : LOG_ACCESS_MAIN;
        return 0;
    }
    if (strcmp(path, access_path) == 0 && access_fd != -1) {
        access_mode = LOG_ACCESS_FILE;
        return 0;
    }
    int fd = log_open(path, why);
    if (fd == -1)
        return -1;
    if (access_fd != -1)
        close(access_fd);
    access_fd = fd;
    memmove(access_path, path, strlen(path) + 1);
    access_mode = LOG_ACCESS_FILE;
    return 0;
}

bool
log_access_on(void)
{
    return access_mode == LOG_ACCESS_FILE
           || (access_mode == LOG_ACCESS_MAIN && log_enabled(LOG_INFO));
}

void
log_set_request(const char *rid)
{
    log_rid = rid != NULL ? rid : "";
}

void
log_set_level(enum log_level level)
{
    log_level = level;
}

bool
log_enabled(enum log_level level)
{
    return level <= log_level;
}

int
log_level_parse(const char *s)
{
    for (size_t i = 0; i < ARRAY_LEN(log_names); i++)
        if (strcmp(s, log_names[i]) == 0)
            return (int)i;
    return -1;
}

/* Appends what fits of p[0..n); the fixed parts always fit, this only guards the buffer. */
static void
log_put(struct log_line *l, const char *p, size_t n)
{
    if (n > sizeof(l->buf) - l->len)
        n = sizeof(l->buf) - l->len;
    memcpy(l->buf + l->len, p, n);
    l->len += n;
}

/*
 * Length (2-4) of the valid UTF-8 sequence at s[0..n), its code point in *cp; 0 when s[0] does
 * not start one (overlong forms, surrogates and values past U+10FFFF included). *partial is set
 * when the input ends inside what is so far a valid sequence.
 */
static size_t
log_utf8(const unsigned char *s, size_t n, uint32_t *cp, bool *partial)
{
    size_t k;
    uint32_t v, min;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        k = 2;
        v = s[0] & 0x1fu;
        min = 0x80;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        k = 3;
        v = s[0] & 0x0fu;
        min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        k = 4;
        v = s[0] & 0x07u;
        min = 0x10000;
    } else {
        return 0;
    }
    for (size_t j = 1; j < k; j++) {
        if (j == n) {
            *partial = true;
            return 0;
        }
        if ((s[j] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[j] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return k;
}

/* Writes the escape for one byte c (ASCII or a lone byte) into out; returns its length. */
static size_t
log_esc_byte(char *out, unsigned char c, enum log_esc how)
{
    const char *two = c == '\\'   ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : NULL;
    if (how == LOG_ESC_JSON && two == NULL)
        two = c == '"' ? "\\\"" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
    if (two != NULL) {
        memcpy(out, two, 2);
        return 2;
    }
    if (how == LOG_ESC_JSON) {
        memcpy(out, "\\u00", 4);
        out[4] = log_hex[c >> 4];
        out[5] = log_hex[c & 15];
        return 6;
    }
    out[0] = '\\';
    out[1] = 'x';
    out[2] = log_hex[c >> 4];
    out[3] = log_hex[c & 15];
    return 4;
}

static bool
log_plain(unsigned char c, enum log_esc how)
{
    return c >= 0x20 && c < 0x7f && c != '\\' && !(c == '"' && how == LOG_ESC_JSON)
           && !(c == ' ' && how == LOG_ESC_SID);
}

/*
 * Appends s[0..n) escaped as `how` says while l->len stays within limit, whole escapes and whole
 * UTF-8 sequences only. cut: s was already cut short, so a sequence it ends inside is dropped
 * rather than escaped byte by byte. Returns false when not all of s fitted.
 */
static bool
log_put_escaped(struct log_line *l, size_t limit, const char *str, size_t n, enum log_esc how,
                bool cut)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && log_plain(s[run], how))
            run++;
        if (run > i) {
            size_t take = run - i;
            if (take > limit - l->len)
                take = limit - l->len;
            memcpy(l->buf + l->len, s + i, take);
            l->len += take;
            i += take;
            if (i < run)
                return false;
            continue;
        }
        char esc[12];
        const char *out = esc;
        size_t out_len, used = 1;
        uint32_t cp = 0;
        bool partial = false;
        size_t k = s[i] < 0x80 ? 0 : log_utf8(s + i, n - i, &cp, &partial);
        if (partial && cut)
            return true;
        if (k == 0) {
            out_len = log_esc_byte(esc, s[i], how);
        } else if (cp <= 0x9f) {
            /* JSON: \u0080-\u009f; text: both bytes, \xc2\xNN. */
            if (how == LOG_ESC_JSON)
                out_len = log_esc_byte(esc, (unsigned char)cp, how);
            else
                out_len = log_esc_byte(esc, s[i], how) + log_esc_byte(esc + 4, s[i + 1], how);
            used = 2;
        } else if (how == LOG_ESC_JSON && (cp == 0x2028 || cp == 0x2029)) {
            out_len = 6;
            memcpy(esc, cp == 0x2028 ? "\\u2028" : "\\u2029", 6);
            used = 3;
        } else {
            out = str + i;
            out_len = used = k;
        }
        if (out_len > limit - l->len)
            return false;
        memcpy(l->buf + l->len, out, out_len);
        l->len += out_len;
        i += used;
    }
    return true;
}

/* write(2) the whole line, retrying on EINTR; a failed log write has nowhere to be reported. */
static void
log_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w == -1 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void
log_put_prefix(struct log_line *l, enum log_level level, enum log_format format)
{
    char head[96];
    int n;
    if (format == LOG_FORMAT_JOURNAL) {
        /* sd-daemon(3) priority prefixes: err, warning, info, debug. */
        static const int prio[] = { 3, 4, 6, 7 };
        n = snprintf(head, sizeof(head), "<%d>", prio[level]);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(head, sizeof(head),
                     format == LOG_FORMAT_JSON
                         ? "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\""
                         : "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, log_names[level]);
    }
    log_put(l, head, n < 0 ? 0 : (size_t)n);
}

/* The value of field key (MCPGW_...) among f[0..n), or NULL. */
static const struct journal_field *
log_journal_has(const struct journal_field *f, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].key, key) == 0)
            return &f[i];
    return NULL;
}

/*
 * The entry as the journal's native protocol carries it, when log_init found stderr to be the
 * journal's stream and lines go to stderr: MESSAGE is msg[0..len) (the line without its priority
 * prefix and newline, so journalctl shows what it showed), with PRIORITY, SYSLOG_IDENTIFIER, and
 * MCPGW_SESSION, MCPGW_REQUEST_ID and MCPGW_<KEY> for each field of f[0..nf) given (values escaped
 * as in the line, at most LOG_SID_ROOM bytes each). False when it was not sent: the caller writes
 * the line to stderr, as without the protocol.
 */
static bool
log_journal(enum log_level level, const char *msg, size_t len, const char *sid,
            const struct log_field *f, size_t nf)
{
    if (log_fd != STDERR_FILENO || !journal_is_open())
        return false;
    static const char *const prio[] = { "3", "4", "6", "7" };
    struct journal_field jf[JOURNAL_FIELDS_MAX];
    char keys[JOURNAL_FIELDS_MAX][64];
    struct log_line vals = { .len = 0 }; /* the escaped values, one after another */
    size_t n = 0;
    jf[n++] = (struct journal_field){ "MESSAGE", msg, len };
    jf[n++] = (struct journal_field){ "PRIORITY", prio[level], 1 };
    jf[n++] = (struct journal_field){ "SYSLOG_IDENTIFIER", program_invocation_short_name,
                                      strlen(program_invocation_short_name) };
    if (log_rid[0] != '\0')
        jf[n++] = (struct journal_field){ "MCPGW_REQUEST_ID", log_rid, strlen(log_rid) };
    for (size_t i = 0; i <= nf && n < JOURNAL_FIELDS_MAX; i++) {
        /* The session id first, then the fields. */
        const char *key = i == 0 ? "session" : f[i - 1].key;
        const char *v = i == 0 ? sid : f[i - 1].value;
        if (v == NULL || v[0] == '\0')
            continue;
        char *k = keys[n];
        int kl = snprintf(k, sizeof(keys[n]), "MCPGW_%s", key);
        for (int j = 6; j < kl && k[j] != '\0'; j++)
            k[j] = isalnum((unsigned char)k[j]) ? (char)toupper((unsigned char)k[j]) : '_';
        if (log_journal_has(jf, n, k) != NULL)
            continue;
        size_t at = vals.len;
        size_t limit = at + LOG_SID_ROOM < sizeof(vals.buf) ? at + LOG_SID_ROOM : sizeof(vals.buf);
        if (!log_put_escaped(&vals, limit, v, strlen(v), LOG_ESC_TEXT, false))
            log_put(&vals, log_cut, sizeof(log_cut) - 1);
        jf[n++] = (struct journal_field){ k, vals.buf + at, vals.len - at };
    }
    return journal_send(jf, n) == 0;
}

/*
 * One line for text[0..n) (cut: text was already cut short), escaped for the format; in JSON the
 * fields f[0..nf) too, each a member before "msg" (the text says the same in words).
 */
static void
log_emit(enum log_level level, const char *sid, const struct log_field *f, size_t nf,
         const char *text, size_t n, bool cut)
{
    struct log_line l = { .len = 0 };
    bool json = log_format == LOG_FORMAT_JSON;
    enum log_esc how = json ? LOG_ESC_JSON : LOG_ESC_TEXT;
    /* Room kept for the mark, the closing "} and the newline. */
    size_t end = sizeof(l.buf) - (sizeof(log_cut) - 1) - 3;
    log_put_prefix(&l, level, log_format);
    size_t head = l.len; /* the prefix: the journal's entry is what follows it */
    if (sid != NULL) {
        log_put(&l, json ? ",\"session\":\"" : "session=", json ? 12 : 8);
        if (!log_put_escaped(&l, l.len + LOG_SID_ROOM, sid, strlen(sid),
                             json ? LOG_ESC_JSON : LOG_ESC_SID, false))
            log_put(&l, log_cut, sizeof(log_cut) - 1);
        log_put(&l, json ? "\"" : " ", 1);
    }
    /* Minted or checked by http_access.c: [A-Za-z0-9._:-] only, nothing to escape. */
    size_t rid_len = strlen(log_rid);
    if (json && rid_len > 0) {
        log_put(&l, ",\"request_id\":\"", 15);
        log_put(&l, log_rid, rid_len);
        log_put(&l, "\"", 1);
    } else if (rid_len > 0) {
        end -= sizeof(" request_id=") - 1 + rid_len; /* it follows the message */
    }
    for (size_t i = 0; json && i < nf; i++) {
        if (f[i].value == NULL)
            continue;
        log_put(&l, ",\"", 2);
        log_put(&l, f[i].key, strlen(f[i].key)); /* a constant: nothing to escape */
        log_put(&l, f[i].number ? "\":" : "\":\"", f[i].number ? 2 : 3);
        if (!log_put_escaped(&l, l.len + LOG_SID_ROOM, f[i].value, strlen(f[i].value), LOG_ESC_JSON,
                             false))
            log_put(&l, log_cut, sizeof(log_cut) - 1);
        if (!f[i].number)
            log_put(&l, "\"", 1);
    }
    if (json)
        log_put(&l, ",\"msg\":\"", 8);
    if (log_format == LOG_FORMAT_JOURNAL && sid == NULL && n > 0 && text[0] == '<') {
        /* Not even a second "<N>" after the real one: some readers strip more than one. */
        log_put(&l, "\\x3c", 4);
        text++;
        n--;
    }
    if (!log_put_escaped(&l, end, text, n, how, cut) || cut)
        log_put(&l, log_cut, sizeof(log_cut) - 1);
    if (!json && rid_len > 0) {
        log_put(&l, " request_id=", sizeof(" request_id=") - 1);
        log_put(&l, log_rid, rid_len);
    }
    log_put(&l, json ? "\"}\n" : "\n", json ? 3 : 1);
    if (log_format == LOG_FORMAT_JOURNAL
        && log_journal(level, l.buf + head, l.len - head - 1, sid, f, nf))
        return;
    log_write(log_fd, l.buf, l.len);
}

void
log_access(const struct log_field *f, size_t n)
{
    if (!log_access_on())
        return;
    struct log_line l = { .len = 0 };
    /* In the main log, its format: a JSON log stays JSON, a journal line keeps its prefix. */
    enum log_format format = access_mode == LOG_ACCESS_MAIN ? log_format : access_format;
    bool json = format == LOG_FORMAT_JSON;
    log_put_prefix(&l, LOG_INFO, format);
    size_t head = l.len;
    if (json)
        log_put(&l, ",\"type\":\"access\"", 16);
    else
        log_put(&l, "access", 6);
    size_t end = sizeof(l.buf) - (sizeof(log_cut) - 1) - 3;
    bool cut = false;
    for (size_t i = 0; i < n && !cut; i++) {
        const char *v = f[i].value;
        size_t klen = strlen(f[i].key);
        if (json && v == NULL)
            continue;
        if (l.len + klen + 8 > end) {
            cut = true;
            break;
        }
        if (json) {
            log_put(&l, ",\"", 2);
            log_put(&l, f[i].key, klen);
            log_put(&l, f[i].number ? "\":" : "\":\"", f[i].number ? 2 : 3);
        } else {
            log_put(&l, " ", 1);
            log_put(&l, f[i].key, klen);
            log_put(&l, "=", 1);
        }
        if (v == NULL || (!json && *v == '\0'))
            log_put(&l, "-", 1);
        else if (!log_put_escaped(&l, end, v, strlen(v), json ? LOG_ESC_JSON : LOG_ESC_SID, false))
            cut = true;
        if (json && !f[i].number)
            log_put(&l, "\"", 1);
    }
    if (cut)
        log_put(&l, log_cut, sizeof(log_cut) - 1);
    log_put(&l, json ? "}\n" : "\n", json ? 2 : 1);
    if (format == LOG_FORMAT_JOURNAL && access_mode == LOG_ACCESS_MAIN
        && log_journal(LOG_INFO, l.buf + head, l.len - head - 1, NULL, f, n))
        return;
    log_write(access_mode == LOG_ACCESS_FILE ? access_fd : log_fd, l.buf, l.len);
}

/* Formats, appends ": suffix" when suffix is not NULL, and emits. */
static void log_vemit(enum log_level level, const char *sid, const struct log_field *f, size_t nf,
                      const char *suffix, const char *fmt, va_list ap) PRINTF(6, 0);

static void
log_vemit(enum log_level level, const char *sid, const struct log_field *f, size_t nf,
          const char *suffix, const char *fmt, va_list ap)
{
    char text[LOG_TEXT_MAX];
    int r = vsnprintf(text, sizeof(text), fmt, ap);
    /* The length, not strlen: a %c of 0 puts a NUL inside, which is escaped like any byte. */
    size_t n = r < 0 ? 0 : (size_t)r;
    bool cut = n >= sizeof(text);
    if (cut)
        n = sizeof(text) - 1;
    if (suffix != NULL && !cut) {
        r = snprintf(text + n, sizeof(text) - n, ": %s", suffix);
        n += r < 0 ? 0 : (size_t)r;
        cut = n >= sizeof(text);
        if (cut)
            n = sizeof(text) - 1;
    }
    log_emit(level, sid, f, nf, text, n, cut);
}

void
log_msg(enum log_level level, const char *sid, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, sid, NULL, 0, NULL, fmt, ap);
    va_end(ap);
}

void
log_fields(enum log_level level, const char *sid, const struct log_field *f, size_t nf,
           const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vemit(level, sid, f, nf, NULL, fmt, ap);
    va_end(ap);
}

void
fatal(const char *fmt, ...)
{
    const char *why = strerror(errno);
    va_list ap;
    va_start(ap, fmt);
    log_vemit(LOG_ERROR, NULL, NULL, 0, why, fmt, ap);
    va_end(ap);
    exit(1);
}

void
fatalx(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vemit(LOG_ERROR, NULL, NULL, 0, NULL, fmt, ap);
    va_end(ap);
    exit(1);
}

const char *
log_limit_note(struct log_limit *ll, uint64_t now_ms, uint64_t every_ms, char *note, size_t size)
{
    if (ll->last_ms != 0 && now_ms - ll->last_ms < every_ms) {
        ll->held++;
        return NULL;
    }
    note[0] = '\0';
    if (ll->held > 0)
        snprintf(note, size, " (%" PRIu64 " more like this in the last %" PRIu64 " s)", ll->held,
                 (now_ms - ll->last_ms + 999) / 1000);
    ll->last_ms = now_ms;
    ll->held = 0;
    return note;
}

bool
log_rate_take(struct log_rate *r, unsigned per_s, unsigned *dropped_before)
{
    uint64_t now = util_now_ms();
    *dropped_before = 0;
    if (now - r->window_ms >= 1000) {
        *dropped_before = r->dropped;
        r->window_ms = now;
        r->lines = r->dropped = 0;
    }
    if (r->lines++ >= per_s) {
        r->dropped++;
        return false;
    }
    return true;
}
