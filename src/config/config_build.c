/* SPDX-License-Identifier: MIT */
/*
 * From the raw values config.c collected to struct config: each section's keys converted through
 * the option table and cross-checked, the files that keep secrets out of the INI file
 * (admin_token_file, env_file), the [auth] checks, each server's policy.
 */
#include <sys/stat.h>

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_int.h"

static const char *
config_raw_get(const struct config_raw *raw, const char *name, enum config_section section,
               int *line)
{
    size_t i = config_find(section, name);
    assert(i < config_n_options);
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
    size_t n;
    const char *bad;
    char *text = config_secret_text(fd, &n, &bad);
    if (text == NULL)
        config_fail(ps, line, key, "%s: %s", path, bad);
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

/*
 * env_file: NAME=VALUE lines (config_env_lines, the format credentials_dir's files share),
 * appended to env; a name set twice (in env and the file, or twice in the file) is an error
 * rather than a silent override. Messages name the file's line, never a value.
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
    char **lines = NULL;
    char why[256];
    int rc = 0;
    if (config_env_lines(text, srv->env, "env or env_file", &lines, why, sizeof why) == -1)
        rc = config_fail(ps, line, "env_file", "%s:%s", srv->env_file, why);
    for (size_t i = 0; rc == 0 && lines[i] != NULL; i++) {
        srv->env = xrealloc(srv->env, (n + 2) * sizeof *srv->env);
        srv->env[n++] = lines[i];
        srv->env[n] = NULL;
    }
    free(lines);
    explicit_bzero(text, total);
    free(text);
    return rc;
}

/* Every option of section (the [gateway] or the [auth] one) as written in raw, or its default. */
static int
config_apply_section(struct config_parse *ps, const struct config_raw *raw,
                     enum config_section section, struct config *cfg)
{
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *opt = &config_options[i];
        if (opt->section != section)
            continue;
        const char *v = raw->value[i] ? raw->value[i] : opt->def;
        if (config_apply(ps, opt, v, raw->line[i], cfg) == -1)
            return -1;
    }
    return 0;
}

static int
config_build_gateway(struct config_parse *ps, struct config *cfg)
{
    if (config_apply_section(ps, &ps->gateway, CONFIG_SEC_GATEWAY, cfg) == -1)
        return -1;
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
    if (config_apply_section(ps, &ps->auth, CONFIG_SEC_AUTH, cfg) == -1)
        return -1;
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

/* The variable names a server's child gets from the gateway itself (config_child_env). */
static bool
config_env_gateways(const char *name, size_t len)
{
    static const char *const ours[] = { "MCPGW_SERVER", "MCPGW_SESSION_LABEL", "MCPGW_POOL" };
    for (size_t i = 0; i < ARRAY_LEN(ours); i++)
        if (strlen(ours[i]) == len && memcmp(ours[i], name, len) == 0)
            return true;
    return false;
}

/* A claim's name or dotted path: visible ASCII but '|' and ',', no empty step. */
static bool
config_claim_path_ok(const char *s, size_t len)
{
    if (len == 0 || s[0] == '.' || s[len - 1] == '.')
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '|' || (s[i] == '.' && s[i + 1] == '.'))
            return false;
    return true;
}

/*
 * env_from_claims (VAR=claim or VAR=claim|default) parsed into srv->claim_env; credentials_dir a
 * directory no one else may write; both need [auth] principals, and make the server's pool one
 * principal's children each (config_server_per_principal): no warm children, which have none.
 */
static int
config_build_credentials(struct config_parse *ps, const struct config *cfg,
                         const struct config_raw_server *rs, struct config_server *srv)
{
    int line;
    config_raw_get(&rs->raw, "env_from_claims", CONFIG_SEC_SERVER, &line);
    line = line ? line : rs->line;
    size_t n = 0;
    while (srv->env_from_claims != NULL && srv->env_from_claims[n] != NULL)
        n++;
    if (n > 0 && cfg->auth.mode != CONFIG_AUTH_JWT)
        return config_fail(
            ps, line, "env_from_claims",
            "needs [auth] mode = jwt (a verified token's claims; mode %s has no claims)",
            cfg->auth.mode == CONFIG_AUTH_BEARER ? "bearer" : "none");
    srv->claim_env = n > 0 ? xcalloc(n, sizeof *srv->claim_env) : NULL;
    for (size_t i = 0; i < n; i++) {
        const char *e = srv->env_from_claims[i];
        const char *eq = strchr(e, '=');
        const char *bar = eq != NULL ? strchr(eq, '|') : NULL;
        size_t vlen = eq != NULL ? (size_t)(eq - e) : 0;
        size_t clen = eq == NULL ? 0 : bar != NULL ? (size_t)(bar - eq - 1) : strlen(eq + 1);
        const char *bad = NULL;
        if (eq == NULL || !config_is_name(e, vlen) || !config_claim_path_ok(eq + 1, clen))
            bad = "must be VAR=claim or VAR=claim|default (VAR of [A-Za-z_][A-Za-z0-9_]*, claim a "
                  "name or a dotted path)";
        else if (config_env_gateways(e, vlen))
            bad = "names a variable the gateway sets itself (MCPGW_*)";
        for (size_t j = 0; bad == NULL && j < srv->n_claim_env; j++)
            if (strlen(srv->claim_env[j].var) == vlen
                && memcmp(srv->claim_env[j].var, e, vlen) == 0)
                bad = "sets a variable twice";
        if (bad == NULL && bar != NULL) {
            size_t dlen = strlen(bar + 1);
            if (dlen > CONFIG_CLAIM_VALUE_MAX)
                bad = "has a default longer than 4096 bytes";
            for (size_t k = 0; bad == NULL && k < dlen; k++)
                if ((unsigned char)bar[1 + k] < 0x20 || bar[1 + k] == 0x7f)
                    bad = "has a default with control characters";
        }
        if (bad != NULL) /* the variable's name only: never a default */
            return config_fail(ps, line, "env_from_claims", "entry %zu (%.*s) %s", i + 1,
                               (int)(eq != NULL ? vlen : strcspn(e, "|")), e, bad);
        struct config_claim_env *ce = &srv->claim_env[srv->n_claim_env++];
        ce->var = xstrndup(e, vlen);
        ce->claim = xstrndup(eq + 1, clen);
        ce->def = bar != NULL ? xstrdup(bar + 1) : NULL;
    }
    if (srv->credentials_dir != NULL) {
        config_raw_get(&rs->raw, "credentials_dir", CONFIG_SEC_SERVER, &line);
        if (cfg->auth.mode == CONFIG_AUTH_NONE)
            return config_fail(ps, line, "credentials_dir",
                               "needs [auth] mode = bearer or jwt (a principal to name the file)");
        int fd = open(srv->credentials_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd == -1)
            return config_fail(ps, line, "credentials_dir", "%s: %s", srv->credentials_dir,
                               strerror(errno));
        char why[1024];
        const char *unsafe = util_file_unsafe(fd, srv->credentials_dir, false, why, sizeof why);
        close(fd);
        if (unsafe != NULL)
            return config_fail(ps, line, "credentials_dir", "%s", unsafe);
    }
    if (config_server_per_principal(srv) && srv->pool_warm_children > 0) {
        config_raw_get(&rs->raw, "pool_warm_children", CONFIG_SEC_SERVER, &line);
        return config_fail(ps, line ? line : rs->line, "pool_warm_children",
                           "must be 0 with env_from_claims, credentials_dir or token_exchange "
                           "(a warm child would have no principal: each principal's pool "
                           "children start for its own requests)");
    }
    if (srv->session_pooled && srv->token_exchange) {
        config_raw_get(&rs->raw, "session_mode", CONFIG_SEC_SERVER, &line);
        return config_fail(ps, line ? line : rs->line, "session_mode",
                           "pooled cannot be used with token_exchange = on (a session's "
                           "exchanged token would not be its own on a shared child)");
    }
    return 0;
}

/*
 * token_exchange: a verified client token (mode jwt, introspected or not) is the subject token;
 * an audience or a resource to ask for, the variable to set (and NAME_FILE), the gateway's client
 * (its secret read now, like every secret), the token endpoint configured or discovered (then the
 * issuer must be https). Keeps the server out of the pool (config_server_per_principal).
 */
static int
config_build_exchange(struct config_parse *ps, struct config *cfg,
                      const struct config_raw_server *rs, struct config_server *srv)
{
    int line;
    static const char *const keys[] = {
        "token_exchange_audience", "token_exchange_resource",  "token_exchange_scopes",
        "token_exchange_env",      "token_exchange_client_id", "token_exchange_client_secret_file",
        "token_exchange_endpoint"
    };
    if (!srv->token_exchange) {
        for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
            const char *v = config_raw_get(&rs->raw, keys[i], CONFIG_SEC_SERVER, &line);
            if (v != NULL && v[0] != '\0') /* empty, as --print-config writes it: unset */
                return config_fail(ps, line, keys[i], "needs token_exchange = on");
        }
        return 0;
    }
    config_raw_get(&rs->raw, "token_exchange", CONFIG_SEC_SERVER, &line);
    line = line ? line : rs->line;
    const char *env = srv->token_exchange_env;
    const char *const checks[][2] = {
        { cfg->auth.mode != CONFIG_AUTH_JWT
              ? "needs [auth] mode = jwt (a verified client token is the subject token)"
              : NULL,
          "token_exchange" },
        { srv->token_exchange_audience == NULL && srv->token_exchange_resource == NULL
              ? "or token_exchange_resource is required with token_exchange = on"
              : NULL,
          "token_exchange_audience" },
        { env == NULL || !config_is_name(env, strlen(env)) || strlen(env) > 120
              ? "must name the child's variable ([A-Za-z_][A-Za-z0-9_]*, at most 120 bytes)"
          : config_env_gateways(env, strlen(env))
              ? "names a variable the gateway sets itself (MCPGW_*)"
              : NULL,
          "token_exchange_env" },
        { srv->token_exchange_client_id == NULL
              ? "is required with token_exchange = on (the gateway authenticates itself)"
              : NULL,
          "token_exchange_client_id" },
        { srv->token_exchange_client_secret_file == NULL
              ? "is required with token_exchange = on (the gateway authenticates itself)"
              : NULL,
          "token_exchange_client_secret_file" },
        { srv->token_exchange_endpoint != NULL && !config_https_url(srv->token_exchange_endpoint)
              ? "must be an https:// URL"
          : srv->token_exchange_endpoint == NULL && !config_https_url(cfg->auth.issuer)
              ? "is required: [auth] issuer is no https:// URL to discover it from"
              : NULL,
          "token_exchange_endpoint" },
    };
    const char *bad = NULL, *key = NULL;
    for (size_t i = 0; bad == NULL && i < ARRAY_LEN(checks); i++) {
        bad = checks[i][0];
        key = checks[i][1];
    }
    for (size_t i = 0; bad == NULL && i < srv->n_claim_env; i++)
        if (strcmp(srv->claim_env[i].var, env) == 0) {
            bad = "names a variable env_from_claims sets too";
            key = "token_exchange_env";
        }
    if (bad != NULL) {
        int l;
        config_raw_get(&rs->raw, key, CONFIG_SEC_SERVER, &l);
        return config_fail(ps, l ? l : line, key, "%s", bad);
    }
    config_raw_get(&rs->raw, "token_exchange_client_secret_file", CONFIG_SEC_SERVER, &line);
    char *text = config_read_secret(ps, line, "token_exchange_client_secret_file",
                                    srv->token_exchange_client_secret_file);
    if (text == NULL)
        return -1;
    size_t total = strlen(text), len = strcspn(text, "\r\n");
    bool ok = len > 0 && len <= 1024;
    for (size_t i = 0; ok && i < len; i++)
        ok = (unsigned char)text[i] > 0x20 && text[i] != 0x7f;
    if (ok)
        srv->token_exchange_client_secret = xstrndup(text, len);
    explicit_bzero(text, total);
    free(text);
    if (!ok)
        return config_fail(ps, line, "token_exchange_client_secret_file",
                           "%s: the first line must be the secret (1..1024 visible characters)",
                           srv->token_exchange_client_secret_file);
    if (srv->token_exchange_endpoint == NULL)
        cfg->auth.discover_token_endpoint = true;
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
    for (size_t i = 0; i < config_n_options; i++) {
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
    if (config_build_credentials(ps, cfg, rs, srv) == -1
        || config_build_exchange(ps, cfg, rs, srv) == -1)
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

int
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
    return config_build_boxes(ps, cfg);
}
