/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CONFIG_INT_H
#define MCPGW_CONFIG_INT_H

/*
 * Private to the config module (config.c, config_table.c, config_value.c, config_man.c): the
 * option table's shape and the value parsers config.c applies to each raw value. Each parser
 * returns 0, or -1 with a static phrase in *errstr.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    CONFIG_ERA,        /* enum config_era: auto, modern, legacy */
    CONFIG_SCOPE,      /* bool cache_public: private, public */
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
    const char *doc;
};

/* The table (config_table.c): CONFIG_N_OPTIONS entries, checked there at compile time. */
#define CONFIG_N_OPTIONS 85
extern const struct config_option *const config_options;

void config_strv_free(char **v);
bool config_is_name(const char *s, size_t len);
char **config_split_words(const char *s, const char **errstr);
char **config_split_list(const char *s, const char **errstr);
int config_check_path(const char *s, const char **errstr);
int config_check_text(const char *s, const char **errstr);
int config_check_url(const char *s, const char **errstr);
int config_parse_listen(const char *s, uint64_t max_port, char **host, uint16_t *port,
                        const char **errstr);

#endif
