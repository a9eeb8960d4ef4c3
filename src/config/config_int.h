/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CONFIG_INT_H
#define MCPGW_CONFIG_INT_H

/*
 * Private to the config module (its files in src/config/): the option table's shape, the value
 * parsers config.c applies to each raw value (each returns 0, or -1 with a static phrase in
 * *errstr), and what the reader (config.c) hands the builder (config_build.c).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

enum config_section {
    CONFIG_SEC_GATEWAY = 0,
    CONFIG_SEC_AUTH,
    CONFIG_SEC_SERVER,
};

enum config_type {
    CONFIG_U64 = 0,    /* uint64_t in min..max */
    CONFIG_LISTEN,     /* HOST:PORT or [ADDR]:PORT -> listen_host, listen_port (port in min..max) */
    CONFIG_IDENT,      /* char *, min..max characters of [A-Za-z0-9_-] */
    CONFIG_PATH,       /* char *, URL path */
    CONFIG_DIR,        /* char *, a filesystem path; NULL when empty */
    CONFIG_URL,        /* char *, http(s)://HOST[:PORT] with no path; NULL when empty */
    CONFIG_TEXT,       /* char *, visible ASCII without spaces; NULL when empty */
    CONFIG_ARGV,       /* char **, shell words, at least one */
    CONFIG_ENV,        /* char **, NAME=VALUE shell words */
    CONFIG_NAMES,      /* char **, variable names as shell words */
    CONFIG_LIST,       /* char **, comma separated, entries trimmed */
    CONFIG_LOG_LEVEL,  /* enum log_level */
    CONFIG_LOG_FORMAT, /* enum log_format: text, json, journal */
    CONFIG_AUTH_MODE,  /* enum config_auth_mode: none, bearer, jwt */
    CONFIG_ERA,        /* enum config_era: auto, stateless, legacy */
    CONFIG_SCOPE,      /* bool cache_public: private, public */
    CONFIG_CREDS_MISSING, /* bool credentials_server_env: refuse, server_env */
    CONFIG_TRACE,         /* enum config_trace: off, propagate, start */
    CONFIG_SWITCH,        /* bool: off, on */
    CONFIG_NETWORK,       /* bool sandbox_network_none: host, none */
    CONFIG_SESSION_MODE,  /* bool session_pooled: child, pooled */
};

#define CONFIG_NO_TARGET SIZE_MAX
#define CONFIG_GW(field) offsetof(struct config, field)
#define CONFIG_SV(field) offsetof(struct config_server, field)

struct config_option {
    const char *key; /* "gateway.NAME", "auth.NAME" or "server.NAME", as config_keys() lists it */
    enum config_section section;
    enum config_type type;
    const char *def; /* default, written as in the file; NULL: none (see config_build_server) */
    uint64_t min, max;
    size_t off; /* in struct config or struct config_server; CONFIG_NO_TARGET: checked only */
};

/*
 * The table (config_table.c): config_n_options entries, counted by the compiler. What a key does
 * is said in options.md, not here. CONFIG_OPTIONS_MAX is room, not a count: it sizes the arrays
 * indexed like the table, and config_table.c fails to compile when the table outgrows it.
 */
#define CONFIG_OPTIONS_MAX 128
extern const struct config_option *const config_options;
extern const size_t config_n_options;

/* ---- the keys' prose (config_doc.c): options.md, and what is written from it ---- */

struct config_doc_para {
    char *text; /* prose: its lines joined by a blank; code: its lines, each with its newline */
    bool code;  /* a block between lines of three backquotes */
};

struct config_doc_text {
    struct config_doc_para *para;
    size_t n;
    int line; /* of its heading in options.md; 0: none */
};

struct config_doc {
    struct config_doc_text intro[3];                   /* by enum config_section */
    struct config_doc_text option[CONFIG_OPTIONS_MAX]; /* indexed like config_options */
};

/* Reads options.md: 0, or -1 with the reason (a key missing, unknown or twice) in err. */
int config_doc_read(struct config_doc *doc, const char *path, char *err, size_t errlen);
void config_doc_free(struct config_doc *doc);
/* The facts of a key as every document gives them: "(none)"/"(empty)" or the default, the
 * values the parser accepts, the unit (NULL for a switch or a non-number). */
const char *config_doc_default(const struct config_option *o);
const char *config_doc_bound(const struct config_option *o, char *buf, size_t size);
const char *config_doc_unit(const struct config_option *o);
/* The file at path with its generated parts written anew from doc, to f: 0, or -1 with err. */
int config_doc_readme(FILE *f, const struct config_doc *doc, const char *path, char *err,
                      size_t errlen);
int config_doc_conf(FILE *f, const struct config_doc *doc, const char *path, char *err,
                    size_t errlen);

void config_strv_free(char **v);
/* Each server's box (config_box.c), once every section is built: 0, or -1 said through ps. */
struct config_parse;
struct config;
int config_build_boxes(struct config_parse *ps, struct config *cfg);
bool config_is_name(const char *s, size_t len);
char **config_split_words(const char *s, const char **errstr);
char **config_split_list(const char *s, const char **errstr);
int config_check_path(const char *s, const char **errstr);
int config_check_text(const char *s, const char **errstr);
int config_check_url(const char *s, const char **errstr);
int config_parse_listen(const char *s, uint64_t max_port, char **host, uint16_t *port,
                        const char **errstr);

/* ---- between the reader (config.c) and the builder (config_build.c) ---- */

#define CONFIG_INI_LINE_MAX    200    /* libinih's INI_MAX_LINE (config.c checks it) */
#define CONFIG_SECRET_FILE_MAX 65536u /* admin_token_file, env_file, a credentials_dir file */

/* Values as written, before conversion; indexed like config_options. */
struct config_raw {
    char *value[CONFIG_OPTIONS_MAX];
    int line[CONFIG_OPTIONS_MAX];
};

struct config_raw_server {
    char *name;
    int line; /* of the section header */
    struct config_raw raw;
};

struct config;

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
    char last_key[CONFIG_INI_LINE_MAX];
    bool gateway_seen, auth_seen;
    struct config_raw gateway;
    struct config_raw auth;
    struct config_raw_server *servers;
    size_t n_servers;
    struct config_raw *cur; /* section being read; NULL before the first header */
    enum config_section cur_section;
    bool inline_secret; /* admin_token or an env line is written in the file itself */
    char **deprecated;  /* notes of deprecated spellings, NULL-terminated; NULL: none */
    size_t n_deprecated;
};

/* Records the first error as "file:line: key: message"; returns -1. */
int config_fail(struct config_parse *ps, int line, const char *key, const char *fmt, ...)
    PRINTF(4, 5);
/* Index of a key in config_options, or config_n_options. */
size_t config_find(enum config_section section, const char *name);
/* Converts one raw value of opt into its target in base (struct config or config_server). */
int config_apply(struct config_parse *ps, const struct config_option *opt, const char *v, int line,
                 void *base);
const char *config_lskip(const char *s);
/* The raw values of ps into cfg (config_build.c): 0, or -1 with the error in ps. */
int config_build(struct config_parse *ps, struct config *cfg);

/*
 * config_env.c: a secret file's text from fd, which is closed here: at most CONFIG_SECRET_FILE_MAX
 * bytes, no NUL. The text (NUL-terminated, *len bytes), which the caller wipes and frees; NULL
 * with *bad.
 */
char *config_secret_text(int fd, size_t *len, const char **bad);

/*
 * The two words of a key whose value is a bool (false's word first), written once for the parser,
 * the documents and --print-config; two empty words for another type.
 */
const char *const *config_pair_words(enum config_type type);

#endif
