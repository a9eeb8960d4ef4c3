/* SPDX-License-Identifier: MIT */
/*
 * The INI file -> struct config. One option table, config_options, holds every key with its
 * section, type, default, bounds and target; parsing, defaults and config_keys() all read it.
 * libinih does the INI syntax. Our line reader in front of it counts lines, refuses lines that inih
 * would silently cut at INI_MAX_LINE, and tracks section headers itself, because inih keeps only 49
 * bytes of a section name and says nothing about empty sections. Values are collected raw first and
 * converted once the whole file is read (config_build.c), so continuation lines can extend a list
 * and cross-checks see final values. config_env.c has what a server's children start with.
 */
#include "config.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config_int.h"
#include "sandbox.h"

_Static_assert(INI_MAX_LINE == CONFIG_INI_LINE_MAX, "config_int.h sizes lines as libinih does");

/* What inih would make of a line; config_classify mirrors ini_parse_stream's order. */
enum config_line {
    CONFIG_LINE_BLANK = 0,
    CONFIG_LINE_COMMENT,
    CONFIG_LINE_CONTINUATION,
    CONFIG_LINE_SECTION,
    CONFIG_LINE_PAIR,
    CONFIG_LINE_JUNK,
};

int
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

/*
 * A value written in a spelling kept for one release after its rename: recorded as "file:line:
 * key = old is deprecated ...: write key = now" for main.c to log (at start and on each reload)
 * or print (--check-config), as a warning; the file still loads.
 */
static void
config_deprecated(struct config_parse *ps, int line, const char *key, const char *old,
                  const char *now)
{
    char note[512];
    snprintf(note, sizeof note,
             "%s:%d: %s = %s is deprecated and will be refused by the next release: write %s = %s",
             ps->name, line, key, old, key, now);
    ps->deprecated = xrealloc(ps->deprecated, (ps->n_deprecated + 2) * sizeof *ps->deprecated);
    ps->deprecated[ps->n_deprecated++] = xstrdup(note);
    ps->deprecated[ps->n_deprecated] = NULL;
}

static const char *
config_opt_name(const struct config_option *opt)
{
    return strchr(opt->key, '.') + 1;
}

size_t
config_find(enum config_section section, const char *name)
{
    size_t i = 0;
    for (; i < config_n_options; i++)
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

const char *const config_auth_mode_words[CONFIG_WORDS] = { "none", "bearer", "jwt" };
const char *const config_era_words[CONFIG_WORDS] = { "auto", "stateless", "legacy" };
const char *const config_trace_words[CONFIG_WORDS] = { "off", "propagate", "start" };

const char *const *
config_pair_words(enum config_type type)
{
    static const char *const scope[2] = { "private", "public" };
    static const char *const creds[2] = { "refuse", "server_env" };
    static const char *const sw[2] = { "off", "on" };
    static const char *const net[2] = { "host", "none" };
    static const char *const mode[2] = { "child", "pooled" };
    static const char *const other[2] = { "", "" };
    return type == CONFIG_SCOPE           ? scope
           : type == CONFIG_CREDS_MISSING ? creds
           : type == CONFIG_SWITCH        ? sw
           : type == CONFIG_NETWORK       ? net
           : type == CONFIG_SESSION_MODE  ? mode
                                          : other;
}

/* The index of v among words, or -1. */
static int
config_word(const char *v, const char *const words[CONFIG_WORDS])
{
    for (int i = 0; i < CONFIG_WORDS; i++)
        if (strcmp(v, words[i]) == 0)
            return i;
    return -1;
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

int
config_apply(struct config_parse *ps, const struct config_option *opt, const char *v, int line,
             void *base)
{
    const char *key = config_opt_name(opt);
    const char *errstr = NULL;
    int m;
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
    case CONFIG_AUTH_MODE:
        if ((m = config_word(v, config_auth_mode_words)) < 0)
            return config_fail(ps, line, key, "must be none, bearer or jwt");
        *(enum config_auth_mode *)config_target(base, opt) = (enum config_auth_mode)m;
        return 0;
    case CONFIG_ERA: {
        if ((m = config_word(v, config_era_words)) >= 0) {
            *(enum config_era *)config_target(base, opt) = (enum config_era)m;
            return 0;
        }
        /* The era's name before 0.2.0, accepted for one release after the rename. */
        static const char era_deprecated[] = "modern"; /* deprecated spelling of stateless */
        if (strcmp(v, era_deprecated) == 0) {
            config_deprecated(ps, line, key, v, "stateless");
            *(enum config_era *)config_target(base, opt) = CONFIG_ERA_STATELESS;
            return 0;
        }
        return config_fail(ps, line, key, "must be auto, stateless or legacy");
    }
    case CONFIG_TRACE:
        if ((m = config_word(v, config_trace_words)) < 0)
            return config_fail(ps, line, key, "must be off, propagate or start");
        *(enum config_trace *)config_target(base, opt) = (enum config_trace)m;
        return 0;
    case CONFIG_SCOPE:
    case CONFIG_CREDS_MISSING:
    case CONFIG_SWITCH:
    case CONFIG_SESSION_MODE:
    case CONFIG_NETWORK: {
        const char *const *w = config_pair_words(opt->type);
        if (strcmp(v, w[0]) != 0 && strcmp(v, w[1]) != 0)
            return config_fail(ps, line, key, "must be %s or %s", w[0], w[1]);
        *(bool *)config_target(base, opt) = strcmp(v, w[1]) == 0;
        return 0;
    }
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

const char *
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
    if (i == config_n_options)
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

static void
config_raw_free(struct config_raw *raw)
{
    for (size_t i = 0; i < config_n_options; i++)
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
        config_strv_free(ps->deprecated);
        config_clear(cfg);
        return -1;
    }
    cfg->deprecated = ps->deprecated;
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

const struct config_server *
config_server_named(const struct config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_servers; i++)
        if (strcmp(cfg->servers[i].name, name) == 0)
            return &cfg->servers[i];
    return NULL;
}

/* Whether two NULL-terminated string arrays (either may be NULL: empty) hold the same strings. */
static bool
config_strv_same(char *const *a, char *const *b)
{
    size_t i = 0;
    for (; a != NULL && b != NULL && a[i] != NULL && b[i] != NULL; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return (a == NULL || a[i] == NULL) && (b == NULL || b[i] == NULL);
}

bool
config_server_same(const struct config_server *a, const struct config_server *b)
{
    if (strcmp(a->name, b->name) != 0)
        return false;
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *o = &config_options[i];
        if (o->section != CONFIG_SEC_SERVER || o->off == CONFIG_NO_TARGET)
            continue;
        const char *pa = (const char *)a + o->off, *pb = (const char *)b + o->off;
        bool same = true;
        switch (o->type) {
        case CONFIG_U64:
            same = *(const uint64_t *)pa == *(const uint64_t *)pb;
            break;
        case CONFIG_IDENT:
        case CONFIG_PATH:
        case CONFIG_DIR:
        case CONFIG_URL:
        case CONFIG_TEXT: {
            const char *sa = *(char *const *)pa, *sb = *(char *const *)pb;
            same = sa == NULL || sb == NULL ? sa == sb : strcmp(sa, sb) == 0;
            break;
        }
        case CONFIG_ARGV:
        case CONFIG_ENV:
        case CONFIG_NAMES:
        case CONFIG_LIST:
            same = config_strv_same(*(char **const *)pa, *(char **const *)pb);
            break;
        case CONFIG_ERA:
            same = *(const enum config_era *)pa == *(const enum config_era *)pb;
            break;
        case CONFIG_SCOPE:
        case CONFIG_CREDS_MISSING:
        case CONFIG_SWITCH:
        case CONFIG_SESSION_MODE:
        case CONFIG_NETWORK:
            same = *(const bool *)pa == *(const bool *)pb;
            break;
        case CONFIG_LISTEN:
        case CONFIG_LOG_LEVEL:
        case CONFIG_LOG_FORMAT:
        case CONFIG_AUTH_MODE:
        case CONFIG_TRACE:
            same = false; /* no key of a server section has these types */
            break;
        }
        if (!same)
            return false;
    }
    return true;
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
    free(cfg->session_key_file);
    free(cfg->log_file);
    free(cfg->access_log);
    free(cfg->audit_log);
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
        for (size_t j = 0; j < srv->n_claim_env; j++) {
            free(srv->claim_env[j].var);
            free(srv->claim_env[j].claim);
            if (srv->claim_env[j].def != NULL)
                explicit_bzero(srv->claim_env[j].def, strlen(srv->claim_env[j].def));
            free(srv->claim_env[j].def);
        }
        free(srv->claim_env);
        for (char **e = srv->env_from_claims; e != NULL && *e != NULL; e++)
            explicit_bzero(*e, strlen(*e));
        config_strv_free(srv->env_from_claims);
        free(srv->credentials_dir);
        free(srv->token_exchange_audience);
        free(srv->token_exchange_resource);
        config_strv_free(srv->token_exchange_scopes);
        free(srv->token_exchange_env);
        free(srv->token_exchange_client_id);
        free(srv->token_exchange_client_secret_file);
        if (srv->token_exchange_client_secret != NULL)
            explicit_bzero(srv->token_exchange_client_secret,
                           strlen(srv->token_exchange_client_secret));
        free(srv->token_exchange_client_secret);
        free(srv->token_exchange_endpoint);
        config_strv_free(srv->sandbox_read_only_paths);
        config_strv_free(srv->sandbox_writable_paths);
        config_strv_free(srv->sandbox_tcp_connect_ports);
        sandbox_free(srv->box);
    }
    free(cfg->servers);
    config_strv_free(cfg->deprecated);
    memset(cfg, 0, sizeof *cfg);
}

const char *const *
config_keys(void)
{
    /* Filled on first use; the gateway reads its config on one thread at startup. */
    static const char *keys[CONFIG_OPTIONS_MAX + 1];
    if (keys[0] == NULL)
        for (size_t i = 0; i < config_n_options; i++)
            keys[i] = config_options[i].key;
    return keys;
}
