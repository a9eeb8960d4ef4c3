/* SPDX-License-Identifier: MIT */
/*
 * config_load_string on the input as one NUL-terminated text (an embedded NUL ends it, as it would
 * end a C string). A failure must leave a "fuzz:LINE: KEY: reason" message and an all-zero config
 * (config.h: all-or-nothing); a success must hold what config.h promises of every field, and
 * config_clear must release all of it (LeakSanitizer checks).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define FZ_ERR_LEN 512

/* A NULL-terminated vector of strings (strlen lets ASan check every byte of each). */
static bool
fz_strv_ok(char *const *v)
{
    size_t total = 0;

    if (v == NULL)
        return false;
    for (; *v != NULL; v++)
        total += strlen(*v);
    return total < SIZE_MAX;
}

/* Entries of allowed_origins and allowed_hosts: non-empty, no spaces or control characters. */
static bool
fz_list_ok(char *const *v)
{
    if (!fz_strv_ok(v))
        return false;
    for (; *v != NULL; v++) {
        if ((*v)[0] == '\0')
            return false;
        for (const char *c = *v; *c; c++) {
            if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c))
                return false;
        }
    }
    return true;
}

static bool
fz_ident_ok(const char *s, size_t min, size_t max)
{
    size_t len = strlen(s);

    for (const char *c = s; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
            return false;
    }
    return len >= min && len <= max;
}

static void
fz_check_server(const struct config *cfg, size_t i)
{
    const struct config_server *srv = &cfg->servers[i];
    size_t len = srv->name != NULL ? strlen(srv->name) : 0;

    FUZZ_CHECK(len >= 1 && len <= 64, "server %zu: name length %zu", i, len);
    for (const char *c = srv->name; *c; c++)
        FUZZ_CHECK(isalnum((unsigned char)*c) || strchr("_.-", *c) != NULL, "server name %s",
                   srv->name);
    FUZZ_CHECK(srv->path != NULL && srv->path[0] == '/', "server %s: path", srv->name);
    FUZZ_CHECK(strcmp(srv->path, "/healthz") != 0, "server %s: reserved path", srv->name);
    for (size_t j = 0; j < i; j++)
        FUZZ_CHECK(strcmp(cfg->servers[j].path, srv->path) != 0, "path %s used twice", srv->path);
    FUZZ_CHECK(fz_strv_ok(srv->argv) && srv->argv[0] != NULL, "server %s: argv", srv->name);
    FUZZ_CHECK(fz_strv_ok(srv->env), "server %s: env", srv->name);
    FUZZ_CHECK(fz_strv_ok(srv->inherit_env), "server %s: inherit_env", srv->name);
    for (char **e = srv->env; *e != NULL; e++)
        FUZZ_CHECK(strchr(*e, '=') != NULL && (*e)[0] != '=', "server %s: env %s", srv->name, *e);
    FUZZ_CHECK(srv->cwd == NULL || srv->cwd[0] != '\0', "server %s: empty cwd", srv->name);
    FUZZ_CHECK(srv->request_timeout_max_ms == 0
                   || srv->request_timeout_max_ms >= srv->request_timeout_ms,
               "server %s: request_timeout_max_ms", srv->name);
}

/* What config.h and the option table promise of a loaded config. */
static void
fz_check_config(const struct config *cfg)
{
    size_t tlen = cfg->admin_token != NULL ? strlen(cfg->admin_token) : 0;

    FUZZ_CHECK(cfg->file != NULL && strcmp(cfg->file, "fuzz") == 0, "file");
    FUZZ_CHECK(cfg->listen_host != NULL && cfg->listen_host[0] != '\0', "listen_host");
    FUZZ_CHECK(cfg->instance_id != NULL && fz_ident_ok(cfg->instance_id, 0, 16), "instance_id");
    FUZZ_CHECK(cfg->admin_token != NULL && fz_ident_ok(cfg->admin_token, 0, 256)
                   && (tlen == 0 || tlen >= 32),
               "admin_token");
    FUZZ_CHECK(cfg->max_sessions >= 1 && cfg->max_sessions <= 1000000, "max_sessions");
    FUZZ_CHECK(cfg->max_body_bytes >= 1024, "max_body_bytes");
    FUZZ_CHECK(cfg->stdin_queue_bytes >= cfg->max_body_bytes + 1024, "stdin_queue_bytes");
    FUZZ_CHECK(cfg->replay_buffer_bytes > 0
                   || (cfg->disconnect_grace_ms == 0 && cfg->sse_close_after_ms == 0),
               "replay_buffer_bytes 0 with grace or close-after");
    FUZZ_CHECK(cfg->legacy_sse <= 1, "legacy_sse");
    FUZZ_CHECK(fz_list_ok(cfg->allowed_origins), "allowed_origins");
    FUZZ_CHECK(fz_list_ok(cfg->allowed_hosts), "allowed_hosts");
    FUZZ_CHECK(cfg->n_servers >= 1 && cfg->servers != NULL, "no servers");
    for (size_t i = 0; i < cfg->n_servers; i++)
        fz_check_server(cfg, i);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), err[FZ_ERR_LEN];
    struct config cfg, zero;
    int rc;

    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    memset(err, 'x', sizeof err);
    memset(&zero, 0, sizeof zero);
    rc = config_load_string(text, "fuzz", &cfg, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1, "config_load_string returned %d", rc);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "err is not NUL-terminated");
    if (rc == 0) {
        fz_check_config(&cfg);
        config_clear(&cfg);
        FUZZ_CHECK(memcmp(&cfg, &zero, sizeof cfg) == 0, "config_clear left something");
    } else {
        FUZZ_CHECK(err[0] != '\0', "failure without a message");
        FUZZ_CHECK(strncmp(err, "fuzz:", 5) == 0, "message without the name: %s", err);
        FUZZ_CHECK(memcmp(&cfg, &zero, sizeof cfg) == 0, "failure left a config: %s", err);
    }
    free(text);
    return 0;
}
