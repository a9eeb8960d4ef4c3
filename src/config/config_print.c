/* SPDX-License-Identifier: MIT */
/*
 * --print-config: the configuration as loaded, every key of the option table with its value after
 * defaults, in INI form, section by section. Secrets are not printed: admin_token, each env
 * value and each default of env_from_claims become <redacted> on a line commented out (so the
 * output still loads, without them), and the *_file keys show their path, never the file's
 * contents.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_int.h"
#include "log.h"

#define CONFIG_REDACTED "<redacted>"

/* One shell word as config_split_words reads it back: bare when plain, else single-quoted. */
static void
config_print_word(FILE *f, const char *w)
{
    if (*w != '\0' && strpbrk(w, " \t\\'\"") == NULL) {
        fputs(w, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = w; *p != '\0'; p++) {
        if (*p == '\'')
            fputs("'\\''", f);
        else
            fputc(*p, f);
    }
    fputc('\'', f);
}

/* The value of o in base (struct config or struct config_server), as the file would write it. */
static void
config_print_value(FILE *f, const struct config *cfg, const struct config_option *o,
                   const char *base)
{
    static const char *const levels[] = { "error", "warn", "info", "debug" };
    static const char *const formats[] = { "text", "json", "journal" };
    const void *at = base + o->off;
    switch (o->type) {
    case CONFIG_U64:
        fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)at);
        return;
    case CONFIG_LISTEN:
        fprintf(f, strchr(cfg->listen_host, ':') != NULL ? "[%s]:%u" : "%s:%u", cfg->listen_host,
                (unsigned)cfg->listen_port);
        return;
    case CONFIG_IDENT:
    case CONFIG_PATH:
    case CONFIG_DIR:
    case CONFIG_URL:
    case CONFIG_TEXT: {
        const char *s = *(char *const *)at;
        fputs(s != NULL ? s : "", f);
        return;
    }
    case CONFIG_ARGV:
    case CONFIG_ENV:
    case CONFIG_NAMES:
    case CONFIG_LIST: {
        char *const *v = *(char **const *)at;
        for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
            fputs(i == 0 ? "" : o->type == CONFIG_LIST ? ", " : " ", f);
            const char *eq = strchr(v[i], '=');
            const char *bar = strchr(v[i], '|');
            if (o->type == CONFIG_ENV && eq != NULL)
                fprintf(f, "%.*s=%s", (int)(eq - v[i]), v[i], CONFIG_REDACTED);
            else if (strcmp(o->key, "server.env_from_claims") == 0 && bar != NULL)
                fprintf(f, "%.*s|%s", (int)(bar - v[i]), v[i], CONFIG_REDACTED); /* a default */
            else if (o->type == CONFIG_LIST)
                fputs(v[i], f);
            else
                config_print_word(f, v[i]);
        }
        return;
    }
    case CONFIG_LOG_LEVEL:
        fputs(levels[*(const enum log_level *)at], f);
        return;
    case CONFIG_LOG_FORMAT:
        fputs(formats[*(const enum log_format *)at], f);
        return;
    case CONFIG_AUTH_MODE:
        fputs(config_auth_mode_words[*(const enum config_auth_mode *)at], f);
        return;
    case CONFIG_ERA:
        fputs(config_era_words[*(const enum config_era *)at], f);
        return;
    case CONFIG_TRACE:
        fputs(config_trace_words[*(const enum config_trace *)at], f);
        return;
    case CONFIG_SCOPE:
    case CONFIG_CREDS_MISSING:
    case CONFIG_SWITCH:
    case CONFIG_SESSION_MODE:
    case CONFIG_NETWORK:
        fputs(config_pair_words(o->type)[*(const bool *)at ? 1 : 0], f);
        return;
    }
}

/* The keys of one section; a key holding a secret is commented out with its value redacted. */
static int
config_print_section(FILE *f, const struct config *cfg, enum config_section sec, const char *base,
                     const char *first_path)
{
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *o = &config_options[i];
        if (o->section != sec)
            continue;
        const char *name = strchr(o->key, '.') + 1;
        if (strcmp(o->key, "gateway.path") == 0) {
            /* Only the first server's default; that server's own path line follows. */
            fprintf(f, "path = %s\n", first_path);
        } else if (strcmp(o->key, "gateway.admin_token") == 0) {
            /* Loaded from admin_token_file when that is set: the file's line shows where. */
            bool set = cfg->admin_token != NULL && *cfg->admin_token != '\0';
            if (set && cfg->admin_token_file == NULL)
                fprintf(f, "; %s = %s\n", name, CONFIG_REDACTED);
            else
                fprintf(f, "%s =\n", name);
        } else {
            char *val = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&val, &len);
            if (m == NULL)
                return -1;
            config_print_value(m, cfg, o, base);
            if (fclose(m) != 0) {
                free(val);
                return -1;
            }
            /* env lines (and env_from_claims' defaults) carry their values redacted: commented
             * out, so the output still loads. */
            bool redacted = (o->type == CONFIG_ENV && len > 0) || strstr(val, CONFIG_REDACTED);
            fprintf(f, "%s%s =%s%s\n", redacted ? "; " : "", name, len > 0 ? " " : "", val);
            free(val);
        }
    }
    return 0;
}

int
config_print(FILE *f, const struct config *cfg)
{
    fprintf(f,
            "; mcp-gateway --print-config: %s as loaded, defaults included.\n"
            "; Secrets are redacted: a line \"; key = ... %s ...\" had a value here.\n",
            cfg->file != NULL ? cfg->file : "(string)", CONFIG_REDACTED);
    fputs("\n[gateway]\n", f);
    if (config_print_section(f, cfg, CONFIG_SEC_GATEWAY, (const char *)cfg,
                             cfg->n_servers > 0 ? cfg->servers[0].path : "/mcp")
        == -1)
        return -1;
    fputs("\n[auth]\n", f);
    if (config_print_section(f, cfg, CONFIG_SEC_AUTH, (const char *)cfg, NULL) == -1)
        return -1;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        fprintf(f, "\n[server:%s]\n", cfg->servers[i].name);
        if (config_print_section(f, cfg, CONFIG_SEC_SERVER, (const char *)&cfg->servers[i], NULL)
            == -1)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}
