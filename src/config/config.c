/* SPDX-License-Identifier: MIT */
/*
 * The INI file -> struct config. One option table, config_options, holds every key with its
 * section, type, default, bounds, target and a line of documentation; parsing, defaults and
 * config_keys() all read it. libinih does the INI syntax. Our line reader in front of it counts
 * lines, refuses lines that inih would silently cut at INI_MAX_LINE, and tracks section headers
 * itself, because inih keeps only 49 bytes of a section name and says nothing about empty
 * sections. Values are collected raw first and converted once the whole file is read, so
 * continuation lines can extend a list and cross-checks see final values. Besides the file, a load
 * reads the files that keep secrets out of it (admin_token_file, env_file); config_check_command
 * looks at each server's command and cwd, for --check-config and as a warning at start.
 */
#include "config.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "config_int.h"

/* Values as written, before conversion; indexed like config_options. */
struct config_raw {
    char *value[CONFIG_N_OPTIONS];
    int line[CONFIG_N_OPTIONS];
};

struct config_raw_server {
    char *name;
    int line; /* of the section header */
    struct config_raw raw;
};

/* What inih would make of a line; config_classify mirrors ini_parse_stream's order. */
enum config_line {
    CONFIG_LINE_BLANK = 0,
    CONFIG_LINE_COMMENT,
    CONFIG_LINE_CONTINUATION,
    CONFIG_LINE_SECTION,
    CONFIG_LINE_PAIR,
    CONFIG_LINE_JUNK,
};

struct config_parse {
    const char *name; /* for messages */
    FILE *fp;         /* the source: fp, or text when fp is NULL */
    const char *text;
    char *err;
    size_t errlen;
    bool failed; /* first error wins; the reader then ends the parse */
    int lineno;
    bool in_pair;      /* a key was seen since the last header: indented lines continue it */
    bool continuation; /* the line inih is handling continues the previous key */
    char last_key[INI_MAX_LINE];
    bool gateway_seen, auth_seen;
    struct config_raw gateway;
    struct config_raw auth;
    struct config_raw_server *servers;
    size_t n_servers;
    struct config_raw *cur; /* section being read; NULL before the first header */
    enum config_section cur_section;
    bool inline_secret; /* admin_token or an env line is written in the file itself */
};

#define CONFIG_SECRET_FILE_MAX 65536u /* admin_token_file, env_file */

static int config_fail(struct config_parse *ps, int line, const char *key, const char *fmt, ...)
    PRINTF(4, 5);

static int
config_fail(struct config_parse *ps, int line, const char *key, const char *fmt, ...)
{
    if (ps->failed)
        return -1;
    ps->failed = true;
    if (ps->err == NULL || ps->errlen == 0)
        return -1;
    int n = snprintf(ps->err, ps->errlen, "%s:%d: %s: ", ps->name, line, key[0] ? key : "-");
    if (n < 0 || (size_t)n >= ps->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *
config_opt_name(const struct config_option *opt)
{
    return strchr(opt->key, '.') + 1;
}

/* Index of a key in config_options, or CONFIG_N_OPTIONS. */
static size_t
config_find(enum config_section section, const char *name)
{
    size_t i = 0;
    for (; i < CONFIG_N_OPTIONS; i++)
        if (config_options[i].section == section
            && strcmp(config_opt_name(&config_options[i]), name) == 0)
            break;
    return i;
}

static bool
config_is_list(enum config_type type)
{
    return type == CONFIG_ARGV || type == CONFIG_ENV || type == CONFIG_NAMES || type == CONFIG_LIST;
}

/* ---- conversion of one raw value into its target ---- */

static void *
config_target(void *base, const struct config_option *opt)
{
    return (char *)base + opt->off;
}

static int
config_apply_words(struct config_parse *ps, const struct config_option *opt, const char *v,
                   int line, void *base)
{
    const char *key = config_opt_name(opt);
    const char *errstr = NULL;
    char **words = config_split_words(v, &errstr);
    if (words == NULL)
        return config_fail(ps, line, key, "%s", errstr);
    const char *bad = NULL;
    for (char **w = words; *w && bad == NULL; w++) {
        if (opt->type == CONFIG_ENV) {
            const char *eq = strchr(*w, '=');
            if (eq == NULL || !config_is_name(*w, (size_t)(eq - *w)))
                bad = "each word must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*";
        } else if (opt->type == CONFIG_NAMES && !config_is_name(*w, strlen(*w))) {
            bad = "each word must be a variable name of [A-Za-z_][A-Za-z0-9_]*";
        }
    }
    if (bad == NULL && opt->type == CONFIG_ARGV && words[0] == NULL)
        bad = "is empty";
    if (bad != NULL) {
        config_strv_free(words);
        return config_fail(ps, line, key, "%s", bad);
    }
    *(char ***)config_target(base, opt) = words;
    return 0;
}

static int
config_apply_ident(struct config_parse *ps, const struct config_option *opt, const char *v,
                   int line, void *base)
{
    size_t len = strlen(v);
    bool ok = len >= opt->min && len <= opt->max;
    for (const char *p = v; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || *p == '_' || *p == '-';
    if (!ok)
        return config_fail(ps, line, config_opt_name(opt),
                           "must be %" PRIu64 "..%" PRIu64 " characters of [A-Za-z0-9_-]", opt->min,
                           opt->max);
    *(char **)config_target(base, opt) = xstrdup(v);
    return 0;
}

static int
config_apply(struct config_parse *ps, const struct config_option *opt, const char *v, int line,
             void *base)
{
    const char *key = config_opt_name(opt);
    const char *errstr = NULL;
    switch (opt->type) {
    case CONFIG_U64: {
        uint64_t n;
        if (util_parse_u64(v, opt->min, opt->max, &n, &errstr) == -1) {
            if (*v >= '0' && *v <= '9' && strspn(v, "0123456789") == strlen(v))
                return config_fail(ps, line, key, "must be %" PRIu64 "..%" PRIu64, opt->min,
                                   opt->max);
            return config_fail(ps, line, key, "is not a number");
        }
        *(uint64_t *)config_target(base, opt) = n;
        return 0;
    }
    case CONFIG_LISTEN: {
        struct config *cfg = base;
        if (config_parse_listen(v, opt->max, &cfg->listen_host, &cfg->listen_port, &errstr) == -1)
            return config_fail(ps, line, key, "%s", errstr);
        return 0;
    }
    case CONFIG_IDENT:
        return config_apply_ident(ps, opt, v, line, base);
    case CONFIG_PATH:
        if (config_check_path(v, &errstr) == -1)
            return config_fail(ps, line, key, "%s", errstr);
        if (opt->off != CONFIG_NO_TARGET)
            *(char **)config_target(base, opt) = xstrdup(v);
        return 0;
    case CONFIG_DIR:
        if (*v != '\0')
            *(char **)config_target(base, opt) = xstrdup(v);
        return 0;
    case CONFIG_URL:
    case CONFIG_TEXT:
        if (opt->type == CONFIG_URL ? config_check_url(v, &errstr) == -1
                                    : config_check_text(v, &errstr) == -1)
            return config_fail(ps, line, key, "%s", errstr);
        if (*v != '\0')
            *(char **)config_target(base, opt) = xstrdup(v);
        return 0;
    case CONFIG_AUTH_MODE: {
        static const char *const modes[] = { "none", "bearer", "jwt" };
        for (size_t m = 0; m < ARRAY_LEN(modes); m++)
            if (strcmp(v, modes[m]) == 0) {
                *(enum config_auth_mode *)config_target(base, opt) = (enum config_auth_mode)m;
                return 0;
            }
        return config_fail(ps, line, key, "must be none, bearer or jwt");
    }
    case CONFIG_ERA: {
        static const char *const eras[] = { "auto", "modern", "legacy" };
        for (size_t m = 0; m < ARRAY_LEN(eras); m++)
            if (strcmp(v, eras[m]) == 0) {
                *(enum config_era *)config_target(base, opt) = (enum config_era)m;
                return 0;
            }
        return config_fail(ps, line, key, "must be auto, modern or legacy");
    }
    case CONFIG_SCOPE:
        if (strcmp(v, "private") != 0 && strcmp(v, "public") != 0)
            return config_fail(ps, line, key, "must be private or public");
        *(bool *)config_target(base, opt) = strcmp(v, "public") == 0;
        return 0;
    case CONFIG_ARGV:
    case CONFIG_ENV:
    case CONFIG_NAMES:
        return config_apply_words(ps, opt, v, line, base);
    case CONFIG_LIST: {
        char **list = config_split_list(v, &errstr);
        if (list == NULL)
            return config_fail(ps, line, key, "%s", errstr);
        *(char ***)config_target(base, opt) = list;
        return 0;
    }
    case CONFIG_LOG_LEVEL: {
        int level = log_level_parse(v);
        if (level == -1)
            return config_fail(ps, line, key, "must be error, warn, info or debug");
        *(enum log_level *)config_target(base, opt) = (enum log_level)level;
        return 0;
    }
    case CONFIG_LOG_FORMAT:
        if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0 && strcmp(v, "journal") != 0)
            return config_fail(ps, line, key, "must be text, json or journal");
        *(enum log_format *)config_target(base, opt) = strcmp(v, "json") == 0 ? LOG_FORMAT_JSON
                                                       : strcmp(v, "journal") == 0
                                                           ? LOG_FORMAT_JOURNAL
                                                           : LOG_FORMAT_TEXT;
        return 0;
    }
    return config_fail(ps, line, key, "has an unknown type");
}

/* ---- the line reader and the section tracker in front of inih ---- */

static int
config_getc(struct config_parse *ps)
{
    if (ps->fp != NULL)
        return getc(ps->fp);
    if (*ps->text == '\0')
        return EOF;
    return (unsigned char)*ps->text++;
}

static const char *
config_lskip(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

/* inih's ini_find_chars_or_comment: the first of chars, or a ';' that follows whitespace. */
static const char *
config_find_chars_or_comment(const char *s, const char *chars)
{
    bool was_space = false;
    while (*s && (chars == NULL || strchr(chars, *s) == NULL) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

static enum config_line
config_classify(const struct config_parse *ps, const char *line, const char **startp)
{
    const char *s = line;
    if (ps->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3;
    const char *start = config_lskip(s);
    *startp = start;
    if (*start == '\0')
        return CONFIG_LINE_BLANK;
    if (*start == ';' || *start == '#')
        return CONFIG_LINE_COMMENT;
    if (ps->in_pair && start > line)
        return CONFIG_LINE_CONTINUATION;
    if (*start == '[')
        return CONFIG_LINE_SECTION;
    const char *sep = config_find_chars_or_comment(start, "=:");
    return (*sep == '=' || *sep == ':') ? CONFIG_LINE_PAIR : CONFIG_LINE_JUNK;
}

/* Copies the trimmed span [b, e) into out (INI_MAX_LINE bytes). */
static void
config_copy_trimmed(char *out, const char *b, const char *e)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    size_t n = (size_t)(e - b) < INI_MAX_LINE - 1 ? (size_t)(e - b) : INI_MAX_LINE - 1;
    memcpy(out, b, n);
    out[n] = '\0';
}

/* The key a too-long line belongs to: the one it continues, or the text before '='. */
static void
config_long_line_key(const struct config_parse *ps, const char *line, char *key)
{
    const char *start;
    enum config_line kind = config_classify(ps, line, &start);
    const char *eq = strchr(start, '=');
    if (kind == CONFIG_LINE_CONTINUATION)
        config_copy_trimmed(key, ps->last_key, ps->last_key + strlen(ps->last_key));
    else if (kind == CONFIG_LINE_COMMENT || eq == NULL)
        strcpy(key, "-");
    else
        config_copy_trimmed(key, start, eq);
}

static int
config_section_begin(struct config_parse *ps, const char *name)
{
    char key[INI_MAX_LINE + 2];
    snprintf(key, sizeof key, "[%s]", name);
    if (strcmp(name, "gateway") == 0) {
        if (ps->gateway_seen)
            return config_fail(ps, ps->lineno, key, "is duplicate");
        ps->gateway_seen = true;
        ps->cur = &ps->gateway;
        ps->cur_section = CONFIG_SEC_GATEWAY;
        return 0;
    }
    if (strcmp(name, "auth") == 0) {
        if (ps->auth_seen)
            return config_fail(ps, ps->lineno, key, "is duplicate");
        ps->auth_seen = true;
        ps->cur = &ps->auth;
        ps->cur_section = CONFIG_SEC_AUTH;
        return 0;
    }
    if (strncmp(name, "server:", 7) != 0)
        return config_fail(ps, ps->lineno, key, "unknown section");
    const char *sname = name + 7;
    size_t len = strlen(sname);
    bool ok = len >= 1 && len <= 64;
    for (const char *p = sname; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || strchr("_.-", *p) != NULL;
    if (!ok)
        return config_fail(ps, ps->lineno, key,
                           "server name must be 1..64 characters of [A-Za-z0-9_.-]");
    for (size_t i = 0; i < ps->n_servers; i++)
        if (strcmp(ps->servers[i].name, sname) == 0)
            return config_fail(ps, ps->lineno, key, "is duplicate");
    ps->servers = xrealloc(ps->servers, (ps->n_servers + 1) * sizeof *ps->servers);
    struct config_raw_server *rs = &ps->servers[ps->n_servers++];
    memset(rs, 0, sizeof *rs);
    rs->name = xstrdup(sname);
    rs->line = ps->lineno;
    ps->cur = &rs->raw;
    ps->cur_section = CONFIG_SEC_SERVER;
    return 0;
}

/* Updates the section and continuation state for a line inih is about to parse. */
static int
config_track_line(struct config_parse *ps, char *line)
{
    const char *start;
    enum config_line kind = config_classify(ps, line, &start);
    ps->continuation = kind == CONFIG_LINE_CONTINUATION;
    switch (kind) {
    case CONFIG_LINE_BLANK:
    case CONFIG_LINE_COMMENT:
        return 0;
    case CONFIG_LINE_CONTINUATION:
        /* inih would append an indented header to the previous value; "[::1]" stays allowed. */
        if (strncmp(start, "[gateway]", 9) == 0 || strncmp(start, "[auth]", 6) == 0
            || strncmp(start, "[server:", 8) == 0)
            return config_fail(ps, ps->lineno, "-", "section header must not be indented");
        return 0;
    case CONFIG_LINE_SECTION: {
        const char *end = config_find_chars_or_comment(start + 1, "]");
        if (*end != ']')
            return config_fail(ps, ps->lineno, "-", "section header has no closing ']'");
        char name[INI_MAX_LINE];
        size_t n = (size_t)(end - start - 1); /* untrimmed, as inih keeps it */
        memcpy(name, start + 1, n);
        name[n] = '\0';
        ps->in_pair = false;
        return config_section_begin(ps, name);
    }
    case CONFIG_LINE_PAIR:
        ps->in_pair = true;
        config_copy_trimmed(ps->last_key, start, config_find_chars_or_comment(start, "=:"));
        return 0;
    case CONFIG_LINE_JUNK:
        return config_fail(ps, ps->lineno, "-", "expected KEY = VALUE, [SECTION] or a comment");
    }
    return 0;
}

/*
 * The ini_reader: one physical line into str, with its '\n', as fgets would, but a line longer
 * than num - 2 bytes (INI_MAX_LINE - 2) is an error instead of a silently cut value.
 */
static char *
config_reader(char *str, int num, void *stream)
{
    struct config_parse *ps = stream;
    if (ps->failed || num < 3)
        return NULL;
    size_t cap = (size_t)num - 1, max = (size_t)num - 2, len = 0;
    bool seen = false;
    int c;
    while ((c = config_getc(ps)) != EOF) {
        seen = true;
        if (c == '\n')
            break;
        if (c == '\0') {
            config_fail(ps, ps->lineno + 1, "-", "contains a NUL byte");
            return NULL;
        }
        if (len == cap) {
            len++;
            break; /* the rest of the line is never needed */
        }
        str[len++] = (char)c;
    }
    if (ps->fp != NULL && ferror(ps->fp)) {
        config_fail(ps, ps->lineno + 1, "-", "read error: %s", strerror(errno));
        return NULL;
    }
    if (!seen)
        return NULL;
    ps->lineno++;
    if (len > 0 && len <= cap && str[len - 1] == '\r')
        len--;
    if (len > max) {
        char key[INI_MAX_LINE];
        str[cap] = '\0';
        config_long_line_key(ps, str, key);
        config_fail(ps, ps->lineno, key,
                    "line too long (max %zu bytes); split a long value over indented "
                    "continuation lines",
                    max);
        return NULL;
    }
    str[len] = '\0';
    if (config_track_line(ps, str) == -1)
        return NULL;
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

/*
 * Appends a continuation to *slot. inih 55 leaves " ; comment" on continuation lines (later
 * versions strip it), so it is cut here, the same way inih cuts it on key lines.
 */
static void
config_append(char **slot, const char *value, const char *sep)
{
    const char *end = config_find_chars_or_comment(value, NULL);
    while (end > value && isspace((unsigned char)end[-1]))
        end--;
    size_t a = strlen(*slot), b = (size_t)(end - value), s = a && b ? strlen(sep) : 0;
    *slot = xrealloc(*slot, a + s + b + 1);
    memcpy(*slot + a, sep, s);
    memcpy(*slot + a + s, value, b);
    (*slot)[a + s + b] = '\0';
}

/* Records one key = value (or a continuation of the previous key) in the current section. */
static int
config_store(struct config_parse *ps, const char *name, const char *value)
{
    if (ps->cur == NULL)
        return config_fail(ps, ps->lineno, name, "is outside any section");
    size_t i = config_find(ps->cur_section, name);
    if (i == CONFIG_N_OPTIONS)
        return config_fail(ps, ps->lineno, name, "unknown key");
    const struct config_option *opt = &config_options[i];
    char **slot = &ps->cur->value[i];
    if (ps->continuation && *slot != NULL) {
        if (!config_is_list(opt->type))
            return config_fail(ps, ps->lineno, name, "is duplicate");
        config_append(slot, value, opt->type == CONFIG_LIST ? "," : " ");
        return 0;
    }
    if (*slot != NULL)
        return config_fail(ps, ps->lineno, name, "is duplicate");
    *slot = xstrdup(value);
    ps->cur->line[i] = ps->lineno;
    return 0;
}

/*
 * The ini_handler: 1 to go on, 0 on error. section is ignored: inih truncates it to 49 bytes,
 * config_track_line has the full one.
 */
static int
config_handler(void *user, const char *section, const char *name, const char *value)
{
    struct config_parse *ps = user;
    (void)section;
    if (ps->failed)
        return 0;
    return config_store(ps, name, value) == 0;
}

/* ---- from raw values to struct config ---- */

static const char *
config_raw_get(const struct config_raw *raw, const char *name, enum config_section section,
               int *line)
{
    size_t i = config_find(section, name);
    assert(i < CONFIG_N_OPTIONS);
    *line = raw->line[i];
    return raw->value[i] ? raw->value[i] : config_options[i].def;
}

/* ---- files that keep secrets out of the INI file ---- */

/*
 * The text of a file that holds a secret (admin_token_file, env_file), checked like the other
 * secret files (util_file_unsafe): at most CONFIG_SECRET_FILE_MAX bytes, no NUL. NULL after
 * config_fail; the caller wipes and frees the text.
 */
static char *
config_read_secret(struct config_parse *ps, int line, const char *key, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        config_fail(ps, line, key, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char why[1024];
    const char *unsafe = util_file_unsafe(fd, path, true, why, sizeof why);
    if (unsafe != NULL) {
        close(fd);
        config_fail(ps, line, key, "%s", unsafe);
        return NULL;
    }
    char *text = xmalloc(CONFIG_SECRET_FILE_MAX + 1);
    size_t n = 0;
    ssize_t got = 0;
    while (n <= CONFIG_SECRET_FILE_MAX) {
        got = read(fd, text + n, CONFIG_SECRET_FILE_MAX + 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    int e = errno;
    close(fd);
    const char *bad = got < 0                         ? strerror(e)
                      : n > CONFIG_SECRET_FILE_MAX    ? "is larger than 64 KiB"
                      : memchr(text, '\0', n) != NULL ? "contains a NUL byte"
                                                      : NULL;
    if (bad != NULL) {
        explicit_bzero(text, n < CONFIG_SECRET_FILE_MAX ? n : CONFIG_SECRET_FILE_MAX);
        free(text);
        config_fail(ps, line, key, "%s: %s", path, bad);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

/* admin_token_file: the token is its first line (without "\r\n"); admin_token must be empty. */
static int
config_admin_token_file(struct config_parse *ps, struct config *cfg)
{
    int line;
    config_raw_get(&ps->gateway, "admin_token_file", CONFIG_SEC_GATEWAY, &line);
    if (cfg->admin_token[0] != '\0')
        return config_fail(ps, line, "admin_token_file",
                           "and admin_token exclude each other: set one");
    char *text = config_read_secret(ps, line, "admin_token_file", cfg->admin_token_file);
    if (text == NULL)
        return -1;
    size_t len = strcspn(text, "\r\n");
    bool ok = len >= 32 && len <= 256;
    for (size_t i = 0; ok && i < len; i++)
        ok = isalnum((unsigned char)text[i]) || text[i] == '_' || text[i] == '-';
    if (ok) {
        free(cfg->admin_token);
        cfg->admin_token = xmalloc(len + 1);
        memcpy(cfg->admin_token, text, len);
        cfg->admin_token[len] = '\0';
    }
    explicit_bzero(text, strlen(text));
    free(text);
    if (!ok)
        return config_fail(ps, line, "admin_token_file",
                           "%s: the first line must be 32..256 characters of [A-Za-z0-9_-]",
                           cfg->admin_token_file);
    return 0;
}

/* Whether env holds a variable called name (len bytes). */
static bool
config_env_has(char **env, const char *name, size_t len)
{
    for (char **e = env; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return true;
    return false;
}

/*
 * env_file: NAME=VALUE lines, the value as written up to the end of the line (no quotes, no
 * expansion); blank lines and lines starting with '#' are skipped. Appended to env; a name set
 * twice (in env and the file, or twice in the file) is an error rather than a silent override.
 * Messages name the file's line, never a value.
 */
static int
config_env_file(struct config_parse *ps, const struct config_raw_server *rs,
                struct config_server *srv)
{
    int line;
    config_raw_get(&rs->raw, "env_file", CONFIG_SEC_SERVER, &line);
    char *text = config_read_secret(ps, line, "env_file", srv->env_file);
    if (text == NULL)
        return -1;
    size_t total = strlen(text), n = 0;
    while (srv->env != NULL && srv->env[n] != NULL)
        n++;
    unsigned lineno = 0;
    int rc = 0;
    for (char *p = text, *next; rc == 0 && *p != '\0'; p = next) {
        char *nl = strchr(p, '\n');
        next = nl != NULL ? nl + 1 : p + strlen(p);
        if (nl != NULL)
            *nl = '\0';
        lineno++;
        size_t len = strlen(p);
        if (len > 0 && p[len - 1] == '\r')
            p[len - 1] = '\0';
        const char *s = config_lskip(p);
        if (*s == '\0' || *s == '#')
            continue;
        const char *eq = strchr(s, '=');
        if (eq == NULL || !config_is_name(s, (size_t)(eq - s)))
            rc = config_fail(ps, line, "env_file",
                             "%s:%u: must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*",
                             srv->env_file, lineno);
        else if (config_env_has(srv->env, s, (size_t)(eq - s)))
            rc = config_fail(ps, line, "env_file", "%s:%u: %.*s is already set (env or env_file)",
                             srv->env_file, lineno, (int)(eq - s), s);
        else {
            srv->env = xrealloc(srv->env, (n + 2) * sizeof *srv->env);
            srv->env[n++] = xstrdup(s);
            srv->env[n] = NULL;
        }
    }
    explicit_bzero(text, total);
    free(text);
    return rc;
}

static int
config_build_gateway(struct config_parse *ps, struct config *cfg)
{
    for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
        const struct config_option *opt = &config_options[i];
        if (opt->section != CONFIG_SEC_GATEWAY)
            continue;
        const char *v = ps->gateway.value[i] ? ps->gateway.value[i] : opt->def;
        if (config_apply(ps, opt, v, ps->gateway.line[i], cfg) == -1)
            return -1;
    }
    if (cfg->admin_token_file != NULL && config_admin_token_file(ps, cfg) == -1)
        return -1;
    size_t tlen = strlen(cfg->admin_token);
    if (tlen > 0 && tlen < 32) {
        int line;
        config_raw_get(&ps->gateway, "admin_token", CONFIG_SEC_GATEWAY, &line);
        return config_fail(ps, line, "admin_token", "must be empty or 32..256 characters");
    }
    for (char **p = cfg->trusted_proxies; p != NULL && *p != NULL; p++) {
        unsigned char net[16];
        unsigned bits;
        if (util_cidr_parse(*p, net, &bits) == -1) {
            int line;
            config_raw_get(&ps->gateway, "trusted_proxies", CONFIG_SEC_GATEWAY, &line);
            return config_fail(ps, line, "trusted_proxies", "%s is not an IP address or CIDR", *p);
        }
    }
    if (cfg->stdin_queue_bytes < cfg->max_body_bytes + 1024) {
        int line, body_line;
        config_raw_get(&ps->gateway, "stdin_queue_bytes", CONFIG_SEC_GATEWAY, &line);
        config_raw_get(&ps->gateway, "max_body_bytes", CONFIG_SEC_GATEWAY, &body_line);
        return config_fail(ps, line ? line : body_line, "stdin_queue_bytes",
                           "must be at least max_body_bytes + 1024 = %" PRIu64,
                           cfg->max_body_bytes + 1024);
    }
    if (cfg->replay_buffer_bytes == 0
        && (cfg->disconnect_grace_ms > 0 || cfg->sse_close_after_ms > 0)) {
        int line;
        const char *key =
            cfg->disconnect_grace_ms > 0 ? "disconnect_grace_ms" : "sse_close_after_ms";
        config_raw_get(&ps->gateway, key, CONFIG_SEC_GATEWAY, &line);
        return config_fail(ps, line, key,
                           "needs replay_buffer_bytes > 0 (a client resumes with Last-Event-ID)");
    }
    return 0;
}

/* RFC 6749 scope-token characters: %x21 / %x23-5B / %x5D-7E. */
static int
config_check_scopes(struct config_parse *ps, char **scopes, int line)
{
    const char *errstr = NULL;
    for (char **sc = scopes; sc && *sc; sc++)
        if (config_check_text(*sc, &errstr) == -1)
            return config_fail(ps, line, "required_scopes", "%s is not a scope token", *sc);
    return 0;
}

static bool
config_loopback_host(const char *h)
{
    return strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0 || strncmp(h, "127.", 4) == 0;
}

/* The [auth] values and what each mode needs. */
/* An https:// URL with a host: where keys and token answers come from (no plain http). */
static bool
config_https_url(const char *s)
{
    const char *errstr;
    return s != NULL && util_has_prefix_i(s, "https://") && s[8] != '\0' && s[8] != '/'
           && config_check_text(s, &errstr) == 0;
}

/*
 * mode = jwt: keys from jwks_file, from jwks_uri, or from the issuer's discovery document; opaque
 * tokens introspected when credentials are given, at introspection_endpoint or the discovered one.
 */
static int
config_check_jwt(struct config_parse *ps, struct config_auth *a)
{
    int line;
    if (a->jwks_file != NULL && a->jwks_uri != NULL) {
        config_raw_get(&ps->auth, "jwks_uri", CONFIG_SEC_AUTH, &line);
        return config_fail(ps, line, "jwks_uri", "and jwks_file exclude each other: set one");
    }
    const char *bad =
        a->jwks_uri != NULL && !config_https_url(a->jwks_uri) ? "jwks_uri"
        : a->introspection_endpoint != NULL && !config_https_url(a->introspection_endpoint)
            ? "introspection_endpoint"
            : NULL;
    if (bad != NULL) {
        config_raw_get(&ps->auth, bad, CONFIG_SEC_AUTH, &line);
        return config_fail(ps, line, bad, "must be an https:// URL");
    }
    if (a->introspection_endpoint != NULL && a->introspection_credentials_file == NULL) {
        config_raw_get(&ps->auth, "introspection_endpoint", CONFIG_SEC_AUTH, &line);
        return config_fail(ps, line, "introspection_credentials_file",
                           "is required with introspection_endpoint (RFC 7662: the gateway "
                           "authenticates itself)");
    }
    bool discover =
        (a->jwks_file == NULL && a->jwks_uri == NULL)
        || (a->introspection_credentials_file != NULL && a->introspection_endpoint == NULL);
    if (discover && !config_https_url(a->issuer)) {
        config_raw_get(&ps->auth, "issuer", CONFIG_SEC_AUTH, &line);
        return config_fail(
            ps, line, "issuer", "must be an https:// URL to discover %s from (or set %s)",
            a->jwks_file == NULL && a->jwks_uri == NULL ? "its keys" : "its introspection endpoint",
            a->jwks_file == NULL && a->jwks_uri == NULL ? "jwks_file or jwks_uri"
                                                        : "introspection_endpoint");
    }
    if (a->jwks_cache_min_s > a->jwks_cache_max_s) {
        config_raw_get(&ps->auth, "jwks_cache_min_s", CONFIG_SEC_AUTH, &line);
        return config_fail(ps, line, "jwks_cache_min_s", "exceeds jwks_cache_max_s");
    }
    return 0;
}

static int
config_build_auth(struct config_parse *ps, struct config *cfg)
{
    struct config_auth *a = &cfg->auth;
    for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
        const struct config_option *opt = &config_options[i];
        if (opt->section != CONFIG_SEC_AUTH)
            continue;
        const char *v = ps->auth.value[i] ? ps->auth.value[i] : opt->def;
        if (config_apply(ps, opt, v, ps->auth.line[i], cfg) == -1)
            return -1;
    }
    int line;
    config_raw_get(&ps->auth, "authorization_servers", CONFIG_SEC_AUTH, &line);
    const char *errstr = NULL;
    for (char **u = a->authorization_servers; *u; u++)
        if (config_check_text(*u, &errstr) == -1
            || !(util_has_prefix_i(*u, "https://") || util_has_prefix_i(*u, "http://")))
            return config_fail(ps, line, "authorization_servers", "%s is not an http(s) URL", *u);
    config_raw_get(&ps->auth, "mode", CONFIG_SEC_AUTH, &line);
    if (a->mode == CONFIG_AUTH_NONE) {
        if (!config_loopback_host(cfg->listen_host))
            return config_fail(ps, line, "mode",
                               "none needs a loopback listen address (127.0.0.0/8, ::1, "
                               "localhost); set mode = bearer or jwt");
        return 0;
    }
    const char *missing = a->public_url == NULL                              ? "public_url"
                          : a->mode == CONFIG_AUTH_BEARER && !a->tokens_file ? "tokens_file"
                          : a->mode == CONFIG_AUTH_JWT && !a->issuer         ? "issuer"
                                                                             : NULL;
    if (missing != NULL)
        return config_fail(ps, line, missing, "is required with mode = %s",
                           a->mode == CONFIG_AUTH_JWT ? "jwt" : "bearer");
    if (a->mode == CONFIG_AUTH_JWT && config_check_jwt(ps, a) == -1)
        return -1;
    if (a->mode == CONFIG_AUTH_JWT && a->authorization_servers[0] == NULL) {
        config_strv_free(a->authorization_servers);
        a->authorization_servers = xcalloc(2, sizeof(char *));
        a->authorization_servers[0] = xstrdup(a->issuer);
    }
    return 0;
}

/* allowed_tools, denied_tools, tool_scopes: the server's tool policy; NULL when all are empty. */
static int
config_build_policy(struct config_parse *ps, const struct config_raw_server *rs,
                    struct config_server *srv)
{
    static const char *const keys[] = { "allowed_tools", "denied_tools", "tool_scopes" };
    char **lists[] = { srv->allowed_tools, srv->denied_tools, srv->tool_scopes };
    struct policy *pol = policy_new(srv->name);
    for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
        const char *bad = NULL, *why = NULL;
        if (policy_add(pol, (enum policy_list)i, (const char *const *)lists[i], &bad, &why) == -1) {
            policy_free(pol);
            int line;
            config_raw_get(&rs->raw, keys[i], CONFIG_SEC_SERVER, &line);
            return config_fail(ps, line ? line : rs->line, keys[i], "%s %s", bad, why);
        }
    }
    if (policy_empty(pol)) {
        policy_free(pol);
        pol = NULL;
    }
    srv->policy = pol;
    return 0;
}

static int
config_build_server(struct config_parse *ps, struct config *cfg, size_t idx)
{
    struct config_raw_server *rs = &ps->servers[idx];
    struct config_server *srv = &cfg->servers[idx];
    srv->name = xstrdup(rs->name);
    srv->line = rs->line;
    for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
        const struct config_option *opt = &config_options[i];
        if (opt->section != CONFIG_SEC_SERVER)
            continue;
        const char *v = rs->raw.value[i] ? rs->raw.value[i] : opt->def;
        int line = rs->raw.value[i] ? rs->raw.line[i] : rs->line;
        if (v == NULL && opt->type == CONFIG_PATH && idx == 0)
            v = config_raw_get(&ps->gateway, "path", CONFIG_SEC_GATEWAY, &line);
        else if (v == NULL && opt->type == CONFIG_PATH)
            return config_fail(ps, rs->line, "path",
                               "is required (only the first server defaults to [gateway] path)");
        else if (v == NULL && opt->type == CONFIG_ARGV)
            return config_fail(ps, rs->line, "command", "is required");
        if (v != NULL && config_apply(ps, opt, v, line, srv) == -1)
            return -1;
    }
    config_raw_get(&rs->raw, "command", CONFIG_SEC_SERVER, &srv->command_line);
    config_raw_get(&rs->raw, "cwd", CONFIG_SEC_SERVER, &srv->cwd_line);
    if (srv->env_file != NULL && config_env_file(ps, rs, srv) == -1)
        return -1;
    int scopes_line;
    config_raw_get(&rs->raw, "required_scopes", CONFIG_SEC_SERVER, &scopes_line);
    if (config_check_scopes(ps, srv->required_scopes, scopes_line ? scopes_line : rs->line) == -1
        || config_build_policy(ps, rs, srv) == -1)
        return -1;
    if (srv->request_timeout_max_ms != 0 && srv->request_timeout_max_ms < srv->request_timeout_ms) {
        int line;
        config_raw_get(&rs->raw, "request_timeout_max_ms", CONFIG_SEC_SERVER, &line);
        return config_fail(ps, line ? line : rs->line, "request_timeout_max_ms",
                           "must be 0 or at least request_timeout_ms");
    }
    if (srv->pool_warm_children > srv->pool_max_children) {
        int line;
        config_raw_get(&rs->raw, "pool_warm_children", CONFIG_SEC_SERVER, &line);
        return config_fail(ps, line ? line : rs->line, "pool_warm_children",
                           "must be at most pool_max_children (%" PRIu64 ")",
                           srv->pool_max_children);
    }
    for (size_t j = 0; j < idx; j++) {
        if (strcmp(cfg->servers[j].path, srv->path) == 0) {
            int line;
            config_raw_get(&rs->raw, "path", CONFIG_SEC_SERVER, &line);
            return config_fail(ps, line ? line : rs->line, "path", "is already used by [server:%s]",
                               cfg->servers[j].name);
        }
    }
    return 0;
}

static int
config_build(struct config_parse *ps, struct config *cfg)
{
    if (config_build_gateway(ps, cfg) == -1 || config_build_auth(ps, cfg) == -1)
        return -1;
    if (ps->n_servers == 0)
        return config_fail(ps, 0, "server", "no [server:NAME] section");
    cfg->servers = xcalloc(ps->n_servers, sizeof *cfg->servers);
    cfg->n_servers = ps->n_servers;
    for (size_t i = 0; i < ps->n_servers; i++)
        if (config_build_server(ps, cfg, i) == -1)
            return -1;
    return 0;
}

static void
config_raw_free(struct config_raw *raw)
{
    for (size_t i = 0; i < CONFIG_N_OPTIONS; i++)
        free(raw->value[i]);
}

static int
config_run(struct config_parse *ps, struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->file = xstrdup(ps->name);
    int rc = ini_parse_stream(config_reader, ps, config_handler, ps);
    if (rc != 0)
        config_fail(ps, rc > 0 ? rc : ps->lineno, "-", "syntax error");
    if (!ps->failed)
        config_build(ps, cfg);
    size_t tok = config_find(CONFIG_SEC_GATEWAY, "admin_token");
    size_t env = config_find(CONFIG_SEC_SERVER, "env");
    ps->inline_secret = ps->gateway.value[tok] != NULL && ps->gateway.value[tok][0] != '\0';
    for (size_t i = 0; i < ps->n_servers; i++)
        if (ps->servers[i].raw.value[env] != NULL && ps->servers[i].raw.value[env][0] != '\0')
            ps->inline_secret = true;
    config_raw_free(&ps->gateway);
    config_raw_free(&ps->auth);
    for (size_t i = 0; i < ps->n_servers; i++) {
        free(ps->servers[i].name);
        config_raw_free(&ps->servers[i].raw);
    }
    free(ps->servers);
    if (ps->failed) {
        config_clear(cfg);
        return -1;
    }
    return 0;
}

static void
config_parse_init(struct config_parse *ps, const char *name, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    ps->name = name;
    ps->err = err;
    ps->errlen = errlen;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

int
config_load(const char *path, struct config *cfg, char *err, size_t errlen)
{
    struct config_parse ps;
    config_parse_init(&ps, path, err, errlen);
    memset(cfg, 0, sizeof *cfg);
    ps.fp = fopen(path, "re");
    if (ps.fp == NULL)
        return config_fail(&ps, 0, "-", "cannot open: %s", strerror(errno));
    char why[1024];
    const char *unsafe = util_file_unsafe(fileno(ps.fp), path, false, why, sizeof why);
    if (unsafe != NULL) {
        fclose(ps.fp);
        return config_fail(&ps, 0, "-", "%s", unsafe);
    }
    int rc = config_run(&ps, cfg);
    /* Secrets in a file others may read: warned, not refused, as the file may be shared on
     * purpose (the refusal is for files that are nothing but a secret). */
    struct stat st;
    if (rc == 0 && ps.inline_secret && fstat(fileno(ps.fp), &st) == 0 && (st.st_mode & S_IROTH))
        log_warn(NULL,
                 "%s holds secrets (admin_token or env lines) and is readable by others: chmod "
                 "0640 %s (group: the gateway's), or move them to admin_token_file and env_file",
                 path, path);
    fclose(ps.fp);
    return rc;
}

int
config_load_string(const char *text, const char *name, struct config *cfg, char *err, size_t errlen)
{
    struct config_parse ps;
    config_parse_init(&ps, name, err, errlen);
    ps.text = text;
    return config_run(&ps, cfg);
}

void
config_clear(struct config *cfg)
{
    free(cfg->file);
    free(cfg->listen_host);
    free(cfg->instance_id);
    free(cfg->admin_token);
    free(cfg->admin_token_file);
    free(cfg->state_key_file);
    free(cfg->log_file);
    free(cfg->access_log);
    config_strv_free(cfg->trusted_proxies);
    config_strv_free(cfg->allowed_origins);
    config_strv_free(cfg->allowed_hosts);
    free(cfg->auth.public_url);
    free(cfg->auth.issuer);
    free(cfg->auth.jwks_file);
    free(cfg->auth.jwks_uri);
    free(cfg->auth.introspection_endpoint);
    free(cfg->auth.introspection_credentials_file);
    free(cfg->auth.tls_ca_file);
    free(cfg->auth.tokens_file);
    config_strv_free(cfg->auth.authorization_servers);
    for (size_t i = 0; i < cfg->n_servers; i++) {
        struct config_server *srv = &cfg->servers[i];
        free(srv->name);
        free(srv->path);
        config_strv_free(srv->argv);
        if (srv->env != NULL)
            for (char **e = srv->env; *e != NULL; e++)
                explicit_bzero(*e, strlen(*e));
        config_strv_free(srv->env);
        free(srv->env_file);
        config_strv_free(srv->inherit_env);
        free(srv->cwd);
        config_strv_free(srv->required_scopes);
        config_strv_free(srv->allowed_tools);
        config_strv_free(srv->denied_tools);
        config_strv_free(srv->tool_scopes);
        policy_free(srv->policy);
    }
    free(cfg->servers);
    memset(cfg, 0, sizeof *cfg);
}

const char *const *
config_keys(void)
{
    /* Filled on first use; the gateway reads its config on one thread at startup. */
    static const char *keys[CONFIG_N_OPTIONS + 1];
    if (keys[0] == NULL)
        for (size_t i = 0; i < CONFIG_N_OPTIONS; i++)
            keys[i] = config_options[i].key;
    return keys;
}

/* Why path cannot be executed, or NULL when it is an executable regular file. */
static const char *
config_exec_problem(const char *path, char *buf, size_t len)
{
    struct stat st;
    if (stat(path, &st) == -1)
        snprintf(buf, len, "%s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(buf, len, "is not a regular file");
    else if (access(path, X_OK) == -1)
        snprintf(buf, len, "is not executable (%s)", strerror(errno));
    else
        return NULL;
    return buf;
}

int
config_check_command(const struct config *cfg, const struct config_server *srv, char *err,
                     size_t errlen)
{
    struct stat st;
    const char *cwd_bad = srv->cwd == NULL            ? NULL
                          : stat(srv->cwd, &st) == -1 ? strerror(errno)
                          : !S_ISDIR(st.st_mode)      ? "is not a directory"
                                                      : NULL;
    if (cwd_bad != NULL) {
        snprintf(err, errlen, "%s:%d: cwd: [server:%s] %s: %s", cfg->file, srv->cwd_line, srv->name,
                 srv->cwd, cwd_bad);
        return -1;
    }
    const char *cmd = srv->argv[0];
    char path[PATH_MAX], why[256];
    const char *bad = NULL;
    if (strchr(cmd, '/') != NULL) {
        /* The child execs it after its chdir: a relative command is relative to cwd. */
        if (cmd[0] != '/' && srv->cwd != NULL)
            snprintf(path, sizeof path, "%s/%s", srv->cwd, cmd);
        else
            snprintf(path, sizeof path, "%s", cmd);
        bad = config_exec_problem(path, why, sizeof why);
    } else {
        /* As upstream_exec searches: the gateway's PATH, an empty entry is ".". */
        const char *search = getenv("PATH");
        if (search == NULL)
            search = "/bin:/usr/bin";
        bad = "not found in PATH";
        for (const char *d = search; bad != NULL;) {
            const char *end = strchrnul(d, ':');
            int dlen = end == d ? 1 : (int)(end - d);
            const char *dir = end == d ? "." : d;
            if (dir[0] != '/' && srv->cwd != NULL)
                snprintf(path, sizeof path, "%s/%.*s/%s", srv->cwd, dlen, dir, cmd);
            else
                snprintf(path, sizeof path, "%.*s/%s", dlen, dir, cmd);
            if (config_exec_problem(path, why, sizeof why) == NULL)
                bad = NULL;
            if (*end == '\0')
                break;
            d = end + 1;
        }
        if (bad != NULL) {
            snprintf(why, sizeof why, "not found in PATH (%s)", search);
            snprintf(path, sizeof path, "%s", cmd);
            bad = why;
        }
    }
    if (bad == NULL)
        return 0;
    snprintf(err, errlen, "%s:%d: command: [server:%s] %s: %s", cfg->file, srv->command_line,
             srv->name, path, bad);
    return -1;
}
