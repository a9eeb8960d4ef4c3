/* SPDX-License-Identifier: MIT */
/*
 * --import-mcp-json: the stdio servers an MCP client's JSON configuration lists (Claude Desktop
 * and Cursor: {"mcpServers": {NAME: {command, args, env}}}; VS Code: {"servers": {NAME: {type,
 * command, args, env}}, "inputs": [...]}) as [server:NAME] sections. Each command line is quoted
 * so that the INI reader (config.c) and the word splitter (config_value.c) give back exactly the
 * JSON's argv; entries that cannot be carried over are named on stderr with the reason.
 */
#include "import.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_int.h"
#include "jsonrpc.h"
#include "util.h"

#define IMPORT_FILE_MAX     (1u << 20) /* a client's configuration is a few KiB */
#define IMPORT_MAX_SERVERS  1024
#define IMPORT_MAX_ARGS     256
#define IMPORT_MAX_ENV      256
#define IMPORT_NAME_MAX     64
#define IMPORT_LINE_MAX     190 /* below the INI reader's 198 bytes with the indent */
/* The longest physical line the INI reader takes (config.c's reader), its newline left out. */
#define IMPORT_INI_LINE_MAX ((size_t)CONFIG_INI_LINE_MAX - 2)
#define IMPORT_CWD_MAX      (IMPORT_INI_LINE_MAX - (sizeof("cwd = ") - 1))

/* Characters a word may hold unquoted. */
static bool
import_plain(char c)
{
    return isalnum((unsigned char)c) || strchr("_./:@%+=,-", c) != NULL;
}

/*
 * w as one word for config_split_words, in a new string: as is when plain, else in single quotes,
 * else (it holds a quote or a ';', which after a blank would start an INI comment) with every
 * other character behind a backslash. Line breaks cannot be written (the caller refuses them).
 */
static char *
import_quote(const char *w)
{
    size_t n = strlen(w);
    bool plain = n > 0;
    for (const char *p = w; plain && *p; p++)
        plain = import_plain(*p);
    if (plain)
        return xstrdup(w);
    char *q = xmalloc(2 * n + 3), *o = q;
    if (strchr(w, '\'') == NULL && strchr(w, ';') == NULL) {
        *o++ = '\'';
        memcpy(o, w, n);
        o += n;
        *o++ = '\'';
    } else {
        for (const char *p = w; *p; p++) {
            if (!import_plain(*p))
                *o++ = '\\';
            *o++ = *p;
        }
    }
    *o = '\0';
    return q;
}

/* A client's variable (${input:api-key}, ${env:HOME}, ${workspaceFolder}) in s, or NULL. */
static const char *
import_variable(const char *s, char *out, size_t outlen)
{
    for (const char *p = strstr(s, "${"); p != NULL; p = strstr(p + 2, "${")) {
        const char *q = p + 2;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        if (q == p + 2)
            continue;
        if (*q == ':')
            q += strcspn(q, "}");
        if (*q == '}') {
            snprintf(out, outlen, "%.*s", (int)(q - p + 1), p);
            return out;
        }
    }
    return NULL;
}

/* [A-Za-z_][A-Za-z0-9_]*, as env and env_file want. */
static bool
import_env_name(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

/* One entry, read and checked. */
struct import_entry {
    const char *argv[IMPORT_MAX_ARGS + 1];
    size_t argc;
    const char *env_names[IMPORT_MAX_ENV];
    const char *env_values[IMPORT_MAX_ENV];
    size_t n_env;
    const char *cwd;
};

/*
 * Reads entry e into *ie. NULL, or why the entry is skipped (in why[0..whylen) or a literal).
 */
static const char *
import_read(const struct jsonrpc_doc *e, struct import_entry *ie, char *why, size_t whylen)
{
    static const char *const known[] = { "type", "command", "args", "env", "cwd", "disabled" };
    const char *keys[64];
    char var[128];
    memset(ie, 0, sizeof *ie);
    if (jsonrpc_doc_true(e, "disabled"))
        return "disabled";
    const char *type = jsonrpc_doc_str(e, "type");
    if (jsonrpc_doc_has(e, "url") || (type != NULL && strcmp(type, "stdio") != 0)) {
        snprintf(why, whylen, "remote (%s): the gateway runs stdio servers only",
                 type != NULL ? type : "url");
        return why;
    }
    if (jsonrpc_doc_has(e, "envFile"))
        return "envFile is not imported: list its variables in env, or set env_file by hand";
    size_t nk = jsonrpc_doc_keys(e, keys, ARRAY_LEN(keys));
    if (nk > ARRAY_LEN(keys))
        return "too many fields";
    for (size_t i = 0; i < nk; i++) {
        bool ok = false;
        for (size_t k = 0; k < ARRAY_LEN(known); k++)
            ok |= strcmp(keys[i], known[k]) == 0;
        if (!ok) {
            snprintf(why, whylen, "unknown field \"%.64s\"", keys[i]);
            return why;
        }
    }
    const char *cmd = jsonrpc_doc_str(e, "command");
    if (cmd == NULL || *cmd == '\0')
        return "no command (a non-empty string)";
    ie->argv[0] = cmd;
    int na = jsonrpc_doc_strs(e, "args", ie->argv + 1, IMPORT_MAX_ARGS - 1);
    if (na < 0 || jsonrpc_doc_str(e, "args") != NULL) /* a lone string is no argv */
        return "args is not an array of at most 255 strings";
    ie->argc = 1 + (size_t)na;
    if (jsonrpc_doc_has(e, "cwd") && (ie->cwd = jsonrpc_doc_str(e, "cwd")) == NULL)
        return "cwd is not a string";
    const struct jsonrpc_doc *env = jsonrpc_doc_obj(e, "env");
    if (jsonrpc_doc_has(e, "env") && env == NULL)
        return "env is not an object";
    if (env != NULL) {
        ie->n_env = jsonrpc_doc_keys(env, ie->env_names, IMPORT_MAX_ENV);
        if (ie->n_env > IMPORT_MAX_ENV)
            return "more than 256 env variables";
        for (size_t i = 0; i < ie->n_env; i++) {
            ie->env_values[i] = jsonrpc_doc_str(env, ie->env_names[i]);
            if (!import_env_name(ie->env_names[i]) || ie->env_values[i] == NULL) {
                snprintf(why, whylen,
                         "env \"%.64s\": must be a string under a name of [A-Za-z_][A-Za-z0-9_]*",
                         ie->env_names[i]);
                return why;
            }
            if (strpbrk(ie->env_values[i], "\r\n") != NULL) {
                snprintf(why, whylen, "env %.64s holds a line break", ie->env_names[i]);
                return why;
            }
            if (import_variable(ie->env_values[i], var, sizeof var) != NULL) {
                snprintf(why, whylen, "env %.64s uses %s, which cannot be resolved here",
                         ie->env_names[i], var);
                return why;
            }
        }
    }
    for (size_t i = 0; i < ie->argc; i++) {
        if (strpbrk(ie->argv[i], "\r\n") != NULL)
            return "the command line holds a line break, which an INI value cannot";
        if (import_variable(ie->argv[i], var, sizeof var) != NULL) {
            snprintf(why, whylen, "%s uses %s, which cannot be resolved here",
                     i == 0 ? "command" : "args", var);
            return why;
        }
    }
    if (ie->cwd != NULL
        && (*ie->cwd == '\0' || strpbrk(ie->cwd, "\r\n;") != NULL
            || isspace((unsigned char)ie->cwd[0])
            || isspace((unsigned char)ie->cwd[strlen(ie->cwd) - 1])
            || import_variable(ie->cwd, var, sizeof var) != NULL))
        return "cwd cannot be written as an INI value (empty, blanks at an end, ';', a line "
               "break or a variable)";
    if (ie->cwd != NULL && strlen(ie->cwd) > IMPORT_CWD_MAX) {
        /* A path has no continuation lines: "cwd = PATH" is one line of the INI reader's. */
        snprintf(why, whylen,
                 "cwd is %zu bytes, longer than the %zu an INI line holds after \"cwd = \" (the "
                 "reader takes lines of at most %zu bytes)",
                 strlen(ie->cwd), IMPORT_CWD_MAX, IMPORT_INI_LINE_MAX);
        return why;
    }
    return NULL;
}

/*
 * A section name of [A-Za-z0-9_.-]{1,64} for name, not one of taken[0..n): other characters
 * become '-', and a clash gets a -2, -3, ... suffix.
 */
static void
import_name(const char *name, char *const *taken, size_t n, char out[IMPORT_NAME_MAX + 1])
{
    size_t len = 0;
    for (const char *p = name; *p && len < IMPORT_NAME_MAX; p++)
        out[len++] = isalnum((unsigned char)*p) || strchr("_.-", *p) != NULL ? *p : '-';
    if (len == 0)
        out[len++] = 's';
    out[len] = '\0';
    for (unsigned k = 2;; k++) {
        bool clash = false;
        for (size_t i = 0; i < n && !clash; i++)
            clash = strcmp(taken[i], out) == 0;
        if (!clash)
            return;
        char suffix[16];
        int sl = snprintf(suffix, sizeof suffix, "-%u", k);
        size_t keep = len + (size_t)sl <= IMPORT_NAME_MAX ? len : IMPORT_NAME_MAX - (size_t)sl;
        memcpy(out + keep, suffix, (size_t)sl + 1);
    }
}

/*
 * key = the words, one continuation line each once the line would pass IMPORT_LINE_MAX. -1
 * when a word alone is too long for a line.
 */
static int
import_words(FILE *out, const char *key, char **words, size_t n)
{
    size_t total = strlen(key) + 3;
    for (size_t i = 0; i < n; i++) {
        if (strlen(words[i]) > IMPORT_LINE_MAX - 4)
            return -1;
        total += strlen(words[i]) + 1;
    }
    bool split = total > IMPORT_LINE_MAX;
    fprintf(out, "%s =", key);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%s", split && i > 0 ? "\n    " : " ", words[i]);
    fputc('\n', out);
    return 0;
}

static void
import_free_words(char **w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

/*
 * NAME.env in env_dir, mode 0600, holding the NAME=VALUE lines: a new file, never one that is
 * there already (an earlier import's, another user's file, a link or a FIFO, whose open would
 * wait for a reader). Its path, or NULL (said on err).
 */
static char *
import_env_file(const char *env_dir, const char *name, const struct import_entry *ie, FILE *err)
{
    size_t plen = strlen(env_dir) + strlen(name) + 6;
    char *path = xmalloc(plen);
    snprintf(path, plen, "%s/%s.env", env_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd != -1 && fchmod(fd, 0600) == 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        if (fd == -1 && errno == EEXIST)
            fprintf(err,
                    "%s: skipped: %s exists already, and is not overwritten (remove it, or "
                    "choose another --env-dir)\n",
                    name, path);
        else
            fprintf(err, "%s: skipped: %s: %s\n", name, path, strerror(errno));
        if (fd != -1)
            close(fd);
        free(path);
        return NULL;
    }
    for (size_t i = 0; i < ie->n_env; i++)
        fprintf(f, "%s=%s\n", ie->env_names[i], ie->env_values[i]);
    if (fclose(f) != 0) {
        fprintf(err, "%s: %s\n", path, strerror(errno));
        free(path);
        return NULL;
    }
    return path;
}

/* The section for one read entry. 0, or -1 with the reason on err (nothing written to out). */
static int
import_section(const char *name, const struct import_entry *ie, const char *env_dir, FILE *out,
               FILE *err)
{
    char **cmd = xcalloc(ie->argc, sizeof *cmd), **env = xcalloc(ie->n_env + 1, sizeof *env);
    for (size_t i = 0; i < ie->argc; i++)
        cmd[i] = import_quote(ie->argv[i]);
    for (size_t i = 0; i < ie->n_env; i++) {
        size_t l = strlen(ie->env_names[i]) + strlen(ie->env_values[i]) + 2;
        char *w = xmalloc(l);
        snprintf(w, l, "%s=%s", ie->env_names[i], ie->env_values[i]);
        env[i] = import_quote(w);
        free(w);
    }
    char *text = NULL, *env_path = NULL;
    size_t tlen = 0;
    FILE *sec = open_memstream(&text, &tlen);
    int rc = sec != NULL ? 0 : -1;
    if (rc == 0) {
        fprintf(sec, "[server:%s]\npath = /mcp/%s\n", name, name);
        if (import_words(sec, "command", cmd, ie->argc) == -1) {
            fprintf(err, "%s: skipped: a word of the command line is longer than %d bytes\n", name,
                    IMPORT_LINE_MAX - 4);
            rc = -1;
        }
    }
    if (rc == 0 && ie->cwd != NULL)
        fprintf(sec, "cwd = %s\n", ie->cwd);
    if (rc == 0 && ie->n_env > 0 && env_dir == NULL) {
        if (import_words(sec, "env", env, ie->n_env) == -1) {
            fprintf(err, "%s: skipped: an env value is too long for an env line; use --env-dir\n",
                    name);
            rc = -1;
        } else {
            fprintf(err,
                    "%s: env written inline as env = (secrets in the INI file); use --env-dir "
                    "DIR to write them to a 0600 env_file\n",
                    name);
        }
    }
    if (rc == 0 && ie->n_env > 0 && env_dir != NULL) {
        env_path = import_env_file(env_dir, name, ie, err);
        if (env_path == NULL)
            rc = -1;
        else
            fprintf(sec, "env_file = %s\n", env_path);
    }
    if (sec != NULL && fclose(sec) == 0 && rc == 0)
        fprintf(out, "\n%s", text);
    free(text);
    free(env_path);
    import_free_words(cmd, ie->argc);
    import_free_words(env, ie->n_env);
    return rc;
}

int
import_mcp_text(const char *json, size_t n, const char *file, const char *env_dir, FILE *out,
                FILE *err)
{
    if (n >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0) { /* a byte order mark, as editors write */
        json += 3;
        n -= 3;
    }
    struct jsonrpc_doc *root = jsonrpc_doc_parse(json, n);
    if (root == NULL) {
        fprintf(err, "%s: not a JSON object (or a key is duplicate)\n", file);
        return -1;
    }
    static const char *const tops[] = { "mcpServers", "servers" };
    const struct jsonrpc_doc *lists[2];
    bool any = false;
    for (size_t t = 0; t < 2; t++) {
        lists[t] = jsonrpc_doc_obj(root, tops[t]);
        if (lists[t] == NULL && jsonrpc_doc_has(root, tops[t])) {
            fprintf(err, "%s: %s is not an object\n", file, tops[t]);
            jsonrpc_doc_free(root);
            return -1;
        }
        any |= lists[t] != NULL;
    }
    if (!any) {
        fprintf(err,
                "%s: no \"mcpServers\" (Claude Desktop, Cursor) or \"servers\" (VS Code) object\n",
                file);
        jsonrpc_doc_free(root);
        return -1;
    }
    char *taken[IMPORT_MAX_SERVERS];
    size_t n_taken = 0;
    int printed = 0;
    for (size_t t = 0; t < 2; t++) {
        if (lists[t] == NULL)
            continue;
        const char *names[IMPORT_MAX_SERVERS];
        size_t nn = jsonrpc_doc_keys(lists[t], names, IMPORT_MAX_SERVERS);
        if (nn > IMPORT_MAX_SERVERS) {
            fprintf(err, "%s: more than %d servers; the rest are skipped\n", tops[t],
                    IMPORT_MAX_SERVERS);
            nn = IMPORT_MAX_SERVERS;
        }
        for (size_t i = 0; i < nn && n_taken < IMPORT_MAX_SERVERS; i++) {
            const struct jsonrpc_doc *e = jsonrpc_doc_obj(lists[t], names[i]);
            struct import_entry ie;
            char why[256];
            const char *skip = e == NULL ? "not an object" : import_read(e, &ie, why, sizeof why);
            if (skip != NULL) {
                fprintf(err, "%s: skipped: %s\n", names[i], skip);
                continue;
            }
            char name[IMPORT_NAME_MAX + 1];
            import_name(names[i], taken, n_taken, name);
            if (strcmp(name, names[i]) != 0)
                fprintf(err, "%s: imported as [server:%s] (names are 1..64 of [A-Za-z0-9_.-])\n",
                        names[i], name);
            if (import_section(name, &ie, env_dir, out, err) == -1)
                continue;
            taken[n_taken++] = xstrdup(name);
            printed++;
        }
    }
    for (size_t i = 0; i < n_taken; i++)
        free(taken[i]);
    jsonrpc_doc_free(root);
    return printed;
}

int
import_mcp_json(const char *file, int argc, char **argv)
{
    const char *env_dir = NULL;
    char dir[PATH_MAX];
    if (argc == 2 && strcmp(argv[0], "--env-dir") == 0) {
        if (realpath(argv[1], dir) == NULL) {
            fprintf(stderr, "--env-dir %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        if (strpbrk(dir, "\r\n;#") != NULL || strlen(dir) > IMPORT_LINE_MAX - 90) {
            fprintf(stderr,
                    "--env-dir %s: a path without ';', '#' or line breaks, at most %d "
                    "bytes, is needed in an INI value\n",
                    dir, IMPORT_LINE_MAX - 90);
            return 1;
        }
        env_dir = dir;
    } else if (argc != 0) {
        fprintf(stderr, "usage: mcp-gateway --import-mcp-json FILE [--env-dir DIR]\n");
        return 2;
    }
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", file, strerror(errno));
        return 1;
    }
    char *text = xmalloc(IMPORT_FILE_MAX + 1);
    size_t n = fread(text, 1, IMPORT_FILE_MAX + 1, f);
    bool bad = ferror(f) != 0 || n > IMPORT_FILE_MAX;
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: unreadable or larger than 1 MiB\n", file);
        free(text);
        return 1;
    }
    int printed = import_mcp_text(text, n, file, env_dir, stdout, stderr);
    free(text);
    if (printed == 0)
        fprintf(stderr, "%s: no stdio server to import\n", file);
    return printed > 0 ? 0 : 1;
}
