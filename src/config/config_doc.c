/* SPDX-License-Identifier: MIT */
/*
 * The keys' prose: options.md read and checked against the option table (every key of the table
 * under its section once, no other), the facts each document adds to it (default, bound, unit,
 * from the table), and the two documents rewritten from both: README.md's option tables, between
 * their marker comments, and the comment above each key of conf/gateway.ini. config_man.c writes
 * the man page from the same reading.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

#define CONFIG_DOC_FILE_MAX   (1u << 20) /* options.md, README.md, conf/gateway.ini */
#define CONFIG_DOC_CONF_WIDTH 98         /* columns of a comment in conf/gateway.ini */

static const char *const config_doc_heading[] = { "[gateway]", "[auth]", "[server:NAME]" };

/* The README's markers, each a line of its own; what is between them is written here. */
static const char config_doc_begin[] =
    "<!-- The tables below are written from src/config/options.md and the option table: edit "
    "those, then run `meson compile -C build docs`. -->";
static const char config_doc_end[] = "<!-- End of the written tables. -->";

PRINTF(3, 4)
static int
config_doc_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The whole of a text file, NUL-terminated; NULL with the reason in err. */
static char *
config_doc_slurp(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        config_doc_fail(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = xmalloc(CONFIG_DOC_FILE_MAX + 1);
    size_t n = fread(text, 1, CONFIG_DOC_FILE_MAX + 1, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad || n > CONFIG_DOC_FILE_MAX || memchr(text, '\0', n) != NULL) {
        config_doc_fail(err, errlen, "%s: %s", path,
                        bad                       ? "read error"
                        : n > CONFIG_DOC_FILE_MAX ? "larger than 1 MiB"
                                                  : "a NUL byte");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

static void
config_doc_text_free(struct config_doc_text *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->para[i].text);
    free(t->para);
    memset(t, 0, sizeof(*t));
}

void
config_doc_free(struct config_doc *doc)
{
    for (size_t i = 0; i < ARRAY_LEN(doc->intro); i++)
        config_doc_text_free(&doc->intro[i]);
    for (size_t i = 0; i < config_n_options; i++)
        config_doc_text_free(&doc->option[i]);
}

/* Appends a line to the last paragraph of t: prose joined by a blank, code kept as lines. */
static void
config_doc_append(struct config_doc_text *t, const char *s, size_t len)
{
    struct config_doc_para *p = &t->para[t->n - 1];
    size_t old = p->text != NULL ? strlen(p->text) : 0;
    p->text = xrealloc(p->text, old + len + 2);
    char *w = p->text + old;
    if (!p->code && old > 0)
        *w++ = ' ';
    memcpy(w, s, len);
    w += len;
    if (p->code)
        *w++ = '\n';
    *w = '\0';
}

static void
config_doc_para(struct config_doc_text *t, bool code)
{
    t->para = xrealloc(t->para, (t->n + 1) * sizeof(*t->para));
    t->para[t->n++] = (struct config_doc_para){ .text = NULL, .code = code };
}

/*
 * Reads options.md into doc. Before the first "## " heading is the editor's note, skipped; then
 * "## [gateway]", "## [auth]" or "## [server:NAME]", its opening, and "### KEY" per key.
 */
int
config_doc_read(struct config_doc *doc, const char *path, char *err, size_t errlen)
{
    memset(doc, 0, sizeof(*doc));
    size_t len = 0;
    char *text = config_doc_slurp(path, &len, err, errlen);
    if (text == NULL)
        return -1;
    int sec = -1, lineno = 0, rc = -1;
    struct config_doc_text *cur = NULL;
    bool open = false, code = false;
    for (char *p = text; *p != '\0';) {
        char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        char *line = p;
        p = nl != NULL ? nl + 1 : p + n;
        line[n] = '\0';
        lineno++;
        if (code) {
            if (strcmp(line, "```") == 0)
                code = open = false;
            else
                config_doc_append(cur, line, n);
            continue;
        }
        if (strncmp(line, "## ", 3) == 0) {
            for (sec = 0; sec < (int)ARRAY_LEN(config_doc_heading); sec++)
                if (strcmp(line + 3, config_doc_heading[sec]) == 0)
                    break;
            if (sec == (int)ARRAY_LEN(config_doc_heading)) {
                config_doc_fail(err, errlen,
                                "%s:%d: \"%s\": a section is [gateway], [auth] or [server:NAME]",
                                path, lineno, line);
                goto out;
            }
            cur = &doc->intro[sec];
            if (cur->line != 0) {
                config_doc_fail(err, errlen, "%s:%d: %s twice (first at line %d)", path, lineno,
                                line, cur->line);
                goto out;
            }
            cur->line = lineno;
            open = false;
            continue;
        }
        if (sec < 0) /* the editor's note */
            continue;
        if (strncmp(line, "### ", 4) == 0) {
            size_t i = config_find((enum config_section)sec, line + 4);
            if (i == config_n_options) {
                config_doc_fail(err, errlen,
                                "%s:%d: ### %s: the option table (config_table.c) has no such key "
                                "in %s",
                                path, lineno, line + 4, config_doc_heading[sec]);
                goto out;
            }
            cur = &doc->option[i];
            if (cur->line != 0) {
                config_doc_fail(err, errlen, "%s:%d: ### %s twice in %s (first at line %d)", path,
                                lineno, line + 4, config_doc_heading[sec], cur->line);
                goto out;
            }
            cur->line = lineno;
            open = false;
            continue;
        }
        if (line[0] == '#') {
            config_doc_fail(err, errlen, "%s:%d: \"%s\": only ## [section] and ### key headings",
                            path, lineno, line);
            goto out;
        }
        if (strcmp(line, "```") == 0) {
            config_doc_para(cur, true);
            code = open = true;
            continue;
        }
        if (strspn(line, " \t") == n) {
            open = false;
            continue;
        }
        if (!open)
            config_doc_para(cur, false);
        open = true;
        config_doc_append(cur, line, n);
    }
    if (code) {
        config_doc_fail(err, errlen, "%s: a block of code is not closed with ```", path);
        goto out;
    }
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *o = &config_options[i];
        const struct config_doc_text *t = &doc->option[i];
        if (t->line == 0) {
            config_doc_fail(err, errlen, "%s: the option table's %s has no ### %s under ## %s",
                            path, o->key, strchr(o->key, '.') + 1, config_doc_heading[o->section]);
            goto out;
        }
        if (t->n == 0 || t->para[0].code) {
            config_doc_fail(err, errlen,
                            "%s:%d: ### %s: its first paragraph, the summary, is "
                            "missing",
                            path, t->line, strchr(o->key, '.') + 1);
            goto out;
        }
    }
    rc = 0;
out:
    free(text);
    if (rc != 0)
        config_doc_free(doc);
    return rc;
}

const char *
config_doc_default(const struct config_option *o)
{
    return o->def == NULL ? "(none)" : *o->def == '\0' ? "(empty)" : o->def;
}

/* The words of an enum-valued key, ", "-joined into b. */
static void
config_doc_words(char *b, size_t size, const char *const words[CONFIG_WORDS])
{
    size_t used = 0;
    b[0] = '\0';
    for (int i = 0; i < CONFIG_WORDS && used < size; i++)
        used += (size_t)snprintf(b + used, size - used, "%s%s", i == 0 ? "" : ", ", words[i]);
}

/* The values the parser accepts, written as one phrase. */
const char *
config_doc_bound(const struct config_option *o, char *b, size_t size)
{
    unsigned long long lo = o->min, hi = o->max;
    switch (o->type) {
    case CONFIG_U64:
        snprintf(b, size, "%llu..%llu", lo, hi);
        break;
    case CONFIG_LISTEN:
        snprintf(b, size, "port %llu..%llu", lo, hi);
        break;
    case CONFIG_IDENT:
        snprintf(b, size, "%llu..%llu characters of [A-Za-z0-9_-]", lo, hi);
        break;
    case CONFIG_PATH:
        snprintf(b, size, "a URL path, starting with /");
        break;
    case CONFIG_DIR:
        snprintf(b, size, "a filesystem path");
        break;
    case CONFIG_URL:
        snprintf(b, size, "http:// or https://HOST[:PORT], no path");
        break;
    case CONFIG_TEXT:
        snprintf(b, size, "visible ASCII, no spaces");
        break;
    case CONFIG_ARGV:
        snprintf(b, size, "shell words, at least one");
        break;
    case CONFIG_ENV:
        snprintf(b, size, "NAME=VALUE shell words");
        break;
    case CONFIG_NAMES:
        snprintf(b, size, "variable names, as shell words");
        break;
    case CONFIG_LIST:
        snprintf(b, size, "a comma-separated list");
        break;
    case CONFIG_LOG_LEVEL:
        snprintf(b, size, "error, warn, info, debug");
        break;
    case CONFIG_LOG_FORMAT:
        snprintf(b, size, "text, json, journal");
        break;
    case CONFIG_AUTH_MODE:
        config_doc_words(b, size, config_auth_mode_words);
        break;
    case CONFIG_ERA:
        config_doc_words(b, size, config_era_words);
        break;
    case CONFIG_TRACE:
        config_doc_words(b, size, config_trace_words);
        break;
    case CONFIG_SCOPE:
    case CONFIG_CREDS_MISSING:
    case CONFIG_SWITCH:
    case CONFIG_SESSION_MODE:
    case CONFIG_NETWORK:
        snprintf(b, size, "%s, %s", config_pair_words(o->type)[0], config_pair_words(o->type)[1]);
        break;
    }
    return b;
}

/* The unit of a numeric key, from its name's suffix; NULL for a 0..1 switch or a non-number. */
const char *
config_doc_unit(const struct config_option *o)
{
    static const struct {
        const char *suffix, *unit;
    } units[] = { { "_per_s", "per second" },
                  { "_per_min", "per minute" },
                  { "_ms", "milliseconds" },
                  { "_s", "seconds" },
                  { "_bytes", "bytes" } };
    if (o->type != CONFIG_U64 || (o->min == 0 && o->max == 1))
        return NULL;
    size_t len = strlen(o->key);
    for (size_t i = 0; i < ARRAY_LEN(units); i++) {
        size_t n = strlen(units[i].suffix);
        if (len > n && strcmp(o->key + len - n, units[i].suffix) == 0)
            return units[i].unit;
    }
    return "count";
}

/* s for a README table cell: a | would end the cell. */
static void
config_doc_cell(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s, f);
    }
}

static void
config_doc_tables(FILE *f, const struct config_doc *doc)
{
    for (int sec = CONFIG_SEC_GATEWAY; sec <= CONFIG_SEC_SERVER; sec++) {
        fprintf(f, "\n### `%s`\n\n", config_doc_heading[sec]);
        for (size_t p = 0; p < doc->intro[sec].n; p++)
            if (!doc->intro[sec].para[p].code)
                fprintf(f, "%s\n\n", doc->intro[sec].para[p].text);
        fputs("| key | default | bound | summary |\n|---|---|---|---|\n", f);
        for (size_t i = 0; i < config_n_options; i++) {
            const struct config_option *o = &config_options[i];
            if ((int)o->section != sec)
                continue;
            char b[128];
            const char *unit = config_doc_unit(o);
            fprintf(f, "| `%s` | ", strchr(o->key, '.') + 1);
            if (o->def != NULL && *o->def != '\0')
                fputc('`', f);
            config_doc_cell(f, config_doc_default(o));
            if (o->def != NULL && *o->def != '\0')
                fputc('`', f);
            fputs(" | ", f);
            config_doc_cell(f, config_doc_bound(o, b, sizeof b));
            if (unit != NULL)
                fprintf(f, " (%s)", unit);
            fputs(" | ", f);
            config_doc_cell(f, doc->option[i].para[0].text);
            fputs(" |\n", f);
        }
    }
    fputc('\n', f);
}

/* Where line (NUL- or newline-terminated) equals s. */
static bool
config_doc_line_is(const char *line, const char *s)
{
    size_t n = strlen(s);
    return strncmp(line, s, n) == 0 && (line[n] == '\n' || line[n] == '\0');
}

int
config_doc_readme(FILE *f, const struct config_doc *doc, const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = config_doc_slurp(path, &len, err, errlen);
    if (text == NULL)
        return -1;
    const char *begin = NULL, *end = NULL;
    for (const char *p = text; *p != '\0';) {
        if (begin == NULL && config_doc_line_is(p, config_doc_begin))
            begin = p;
        else if (begin != NULL && end == NULL && config_doc_line_is(p, config_doc_end))
            end = p;
        const char *nl = strchr(p, '\n');
        p = nl != NULL ? nl + 1 : p + strlen(p);
    }
    if (begin == NULL || end == NULL) {
        free(text);
        return config_doc_fail(err, errlen, "%s: no line \"%s\" followed by a line \"%s\"", path,
                               config_doc_begin, config_doc_end);
    }
    fwrite(text, 1, (size_t)(begin - text), f);
    fprintf(f, "%s\n", config_doc_begin);
    config_doc_tables(f, doc);
    fputs(end, f);
    free(text);
    return 0;
}

/* s without its backquotes, wrapped into "; " lines of at most CONFIG_DOC_CONF_WIDTH columns. */
static void
config_doc_comment(FILE *f, const char *s)
{
    size_t col = 0;
    while (*s != '\0') {
        while (*s == ' ')
            s++;
        size_t n = strcspn(s, " "), width = 0;
        for (size_t i = 0; i < n; i++)
            width += s[i] != '`' && (s[i] & 0xC0) != 0x80; /* UTF-8: count characters */
        if (n == 0)
            break;
        if (col > 0 && col + 1 + width > CONFIG_DOC_CONF_WIDTH) {
            fputc('\n', f);
            col = 0;
        }
        fputs(col == 0 ? ";" : "", f);
        fputc(' ', f);
        col += col == 0 ? 2 + width : 1 + width;
        for (size_t i = 0; i < n; i++)
            if (s[i] != '`')
                fputc(s[i], f);
        s += n;
    }
    if (col > 0)
        fputc('\n', f);
}

/* The comment above KEY's line in conf/gateway.ini: its summary, then its facts. */
static void
config_doc_conf_key(FILE *f, const struct config_doc *doc, size_t i)
{
    const struct config_option *o = &config_options[i];
    char b[128], facts[512];
    const char *unit = config_doc_unit(o);
    config_doc_comment(f, doc->option[i].para[0].text);
    int n = snprintf(facts, sizeof facts, "default: %s; bound: %s", config_doc_default(o),
                     config_doc_bound(o, b, sizeof b));
    if (unit != NULL && n > 0 && (size_t)n < sizeof facts)
        snprintf(facts + n, sizeof facts - (size_t)n, "; unit: %s", unit);
    config_doc_comment(f, facts);
}

/* Writes lines[0..n), each up to and with its newline (the last line of a file may have none). */
static void
config_doc_flush(FILE *f, const char *const *lines, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const char *nl = strchr(lines[k], '\n');
        fwrite(lines[k], 1, nl != NULL ? (size_t)(nl - lines[k]) + 1 : strlen(lines[k]), f);
    }
}

/* "KEY =" or "; KEY =" (then the end or a blank): the length of KEY, else 0. */
static size_t
config_doc_key_line(const char *line, const char **key)
{
    const char *p = line[0] == ';' && line[1] == ' ' ? line + 2 : line;
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
    if (n == 0 || strncmp(p + n, " =", 2) != 0
        || (p[n + 2] != '\n' && p[n + 2] != ' ' && p[n + 2] != '\0'))
        return 0;
    *key = p;
    return n;
}

/*
 * conf/gateway.ini with the comment right above each key's line written anew: the run of ';'
 * lines between the line above that is blank, a section header or another key's, and the key's
 * line (a line ";  ..." continues a key written out and stays). Everything else is kept.
 */
int
config_doc_conf(FILE *f, const struct config_doc *doc, const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = config_doc_slurp(path, &len, err, errlen);
    if (text == NULL)
        return -1;
    bool seen[CONFIG_OPTIONS_MAX] = { false };
    size_t n_lines = 0;
    for (const char *p = text; *p != '\0'; p++)
        n_lines += *p == '\n';
    const char **lines = xcalloc(n_lines + 2, sizeof(*lines)); /* kept lines, not yet written */
    size_t kept = 0;
    int sec = -1, lineno = 0, rc = -1;
    char *mem = NULL;
    size_t memlen = 0;
    FILE *out = open_memstream(&mem, &memlen);
    if (out == NULL) {
        free(lines);
        free(text);
        return config_doc_fail(err, errlen, "open_memstream: %s", strerror(errno));
    }
    for (const char *p = text; *p != '\0';) {
        const char *line = p, *nl = strchr(p, '\n');
        p = nl != NULL ? nl + 1 : p + strlen(p);
        lineno++;
        const char *key = NULL;
        size_t klen = config_doc_key_line(line, &key);
        if (line[0] == '[') {
            sec = strncmp(line, "[gateway]", 9) == 0  ? CONFIG_SEC_GATEWAY
                  : strncmp(line, "[auth]", 6) == 0   ? CONFIG_SEC_AUTH
                  : strncmp(line, "[server:", 8) == 0 ? CONFIG_SEC_SERVER
                                                      : -1;
        } else if (klen > 0) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)klen, key);
            size_t i = sec < 0 ? config_n_options : config_find((enum config_section)sec, name);
            if (i == config_n_options) {
                config_doc_fail(err, errlen, "%s:%d: %s is not a key of %s", path, lineno, name,
                                sec < 0 ? "any section" : config_doc_heading[sec]);
                goto out;
            }
            while (kept > 0 && lines[kept - 1][0] == ';' && strncmp(lines[kept - 1], ";  ", 3) != 0
                   && config_doc_key_line(lines[kept - 1], &key) == 0)
                kept--;
            config_doc_flush(out, lines, kept);
            kept = 0;
            config_doc_conf_key(out, doc, i);
            seen[i] = true;
        }
        lines[kept++] = line;
        if (line[0] != ';') { /* a comment is kept until what follows it is known */
            config_doc_flush(out, lines, kept);
            kept = 0;
        }
    }
    config_doc_flush(out, lines, kept);
    for (size_t i = 0; i < config_n_options; i++)
        if (!seen[i]) {
            const struct config_option *o = &config_options[i];
            config_doc_fail(err, errlen, "%s: no line \"%s =\" or \"; %s =\" under %s", path,
                            strchr(o->key, '.') + 1, strchr(o->key, '.') + 1,
                            config_doc_heading[o->section]);
            goto out;
        }
    rc = 0;
out:
    if (fclose(out) != 0 && rc == 0)
        rc = config_doc_fail(err, errlen, "out of memory");
    if (rc == 0)
        fwrite(mem, 1, memlen, f);
    free(mem);
    free(lines);
    free(text);
    return rc;
}
