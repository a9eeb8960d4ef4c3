/* SPDX-License-Identifier: MIT */
/*
 * Each server's box (sandbox = on): the paths bound into its view (sandbox_read_only_paths, the
 * cwd and the command's directory read-only, sandbox_writable_paths writable) and the gateway's
 * own files hidden from it (every file and directory the [gateway] and [auth] sections name, the
 * configuration file and its directory, each server's env_file, credentials_dir and
 * token_exchange_client_secret_file, where exchanged tokens are kept when a server exchanges them,
 * and the package's /etc/mcp-gateway and /var/lib/mcp-gateway), made once per configuration. A
 * child of a token_exchange server is shown its own token's directory alone (sandbox_own).
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_int.h"
#include "sandbox.h"

/* A growing NULL-terminated list of strings. */
struct config_box_list {
    char **v;
    size_t n;
};

static void
config_box_add(struct config_box_list *l, char *s)
{
    l->v = xrealloc(l->v, (l->n + 2) * sizeof(char *));
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
}

static void
config_box_clear(struct config_box_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* path made absolute against base (the gateway's working directory when NULL); a new string. */
static char *
config_box_abs(const char *path, const char *base)
{
    if (path[0] == '/')
        return xstrdup(path);
    char cwd[PATH_MAX];
    if (base == NULL)
        base = getcwd(cwd, sizeof(cwd)) != NULL ? cwd : "/";
    size_t nb = strlen(base), np = strlen(path);
    char *abs = xmalloc(nb + np + 2);
    memcpy(abs, base, nb);
    abs[nb] = '/';
    memcpy(abs + nb + 1, path, np + 1);
    return abs;
}

/* The real path of an existing directory (cwd, the command's), or NULL. */
static char *
config_box_real(const char *path, const char *base)
{
    char *abs = config_box_abs(path, base);
    char *real = realpath(abs, NULL);
    free(abs);
    return real;
}

/* Whether inner is dir or below it. */
static bool
config_box_under(const char *inner, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strncmp(inner, dir, n) == 0 && (inner[n] == '\0' || inner[n] == '/' || n == 1);
}

static void
config_box_hidden(const struct config *cfg, struct config_box_list *hidden,
                  const struct config_box_list *binds)
{
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *o = &config_options[i];
        if (o->type != CONFIG_DIR || o->section == CONFIG_SEC_SERVER)
            continue;
        const char *v = *(char *const *)(const void *)((const char *)cfg + o->off);
        if (v != NULL)
            config_box_add(hidden, config_box_abs(v, NULL));
    }
    bool exchange = false;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        const struct config_server *s = &cfg->servers[i];
        if (s->env_file != NULL)
            config_box_add(hidden, config_box_abs(s->env_file, NULL));
        if (s->credentials_dir != NULL)
            config_box_add(hidden, config_box_abs(s->credentials_dir, NULL));
        if (s->token_exchange_client_secret_file != NULL)
            config_box_add(hidden, config_box_abs(s->token_exchange_client_secret_file, NULL));
        exchange = exchange || s->token_exchange;
    }
    /* Where exchanged tokens are kept (auth_held.c), each child shown its own alone (sandbox_own);
     * /tmp and the like are the box's own, empty. */
    const char *run = util_runtime_dir();
    if (exchange && sandbox_path_bindable(run))
        config_box_add(hidden, xstrdup(run));
    if (cfg->file != NULL) {
        char *file = config_box_abs(cfg->file, NULL);
        char *dir = xstrdup(file);
        char *slash = strrchr(dir, '/');
        *(slash == dir ? slash + 1 : slash) = '\0';
        /* Its directory, unless a bind lies in it or it is a system directory (/etc). */
        bool keep =
            strcmp(dir, "/") == 0 || strcmp(dir, "/etc") == 0 || strncmp(dir, "/usr", 4) == 0;
        for (size_t i = 0; i < binds->n && !keep; i++)
            keep = config_box_under(binds->v[i], dir);
        config_box_add(hidden, file);
        if (keep)
            free(dir);
        else
            config_box_add(hidden, dir);
    }
    config_box_add(hidden, xstrdup("/etc/mcp-gateway"));
    config_box_add(hidden, xstrdup("/var/lib/mcp-gateway"));
}

/*
 * sandbox_tcp_connect_ports: each a port 1..65535, at most CONFIG_BOX_PORTS_MAX, never the
 * gateway's own listen port (the one thing the list exists to keep out of reach). The count in
 * *n (0: the key is unset); 0, or -1 said through config_fail.
 */
#define CONFIG_BOX_PORTS_MAX 32
static int
config_box_ports(struct config_parse *ps, const struct config *cfg,
                 const struct config_raw_server *rs, char **ports,
                 uint16_t out[CONFIG_BOX_PORTS_MAX], size_t *n)
{
    const char *key = "sandbox_tcp_connect_ports";
    int line = rs->raw.line[config_find(CONFIG_SEC_SERVER, key)];
    *n = 0;
    for (char **p = ports; p != NULL && *p != NULL; p++) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(*p, &end, 10);
        if ((*p)[0] < '0' || (*p)[0] > '9' || *end != '\0' || errno != 0 || v == 0 || v > 65535)
            return config_fail(ps, line ? line : rs->line, key, "%s: not a TCP port (1 to 65535)",
                               *p);
        if (v == cfg->listen_port)
            return config_fail(ps, line ? line : rs->line, key,
                               "%lu is the gateway's own listen port: its children must not "
                               "reach it",
                               v);
        if (*n == CONFIG_BOX_PORTS_MAX)
            return config_fail(ps, line ? line : rs->line, key, "more than %d ports",
                               CONFIG_BOX_PORTS_MAX);
        out[(*n)++] = (uint16_t)v;
    }
    return 0;
}

/* Each entry absolute and existing: 0, or -1 said through config_fail. */
static int
config_box_paths(struct config_parse *ps, const struct config_raw_server *rs, const char *key,
                 char **paths, struct config_box_list *out)
{
    int line = rs->raw.line[config_find(CONFIG_SEC_SERVER, key)];
    for (char **p = paths; p != NULL && *p != NULL; p++) {
        struct stat st;
        if ((*p)[0] != '/')
            return config_fail(ps, line ? line : rs->line, key, "%s: must be an absolute path", *p);
        if (!sandbox_path_bindable(*p))
            return config_fail(ps, line ? line : rs->line, key,
                               "%s: cannot be bound: /, /tmp, /proc and /dev are the box's own",
                               *p);
        if (stat(*p, &st) == -1)
            return config_fail(ps, line ? line : rs->line, key, "%s: %s", *p, strerror(errno));
        config_box_add(out, xstrdup(*p));
    }
    return 0;
}

static int
config_box_server(struct config_parse *ps, struct config *cfg, size_t idx)
{
    const struct config_raw_server *rs = &ps->servers[idx];
    struct config_server *srv = &cfg->servers[idx];
    struct config_box_list ro = { 0 }, rw = { 0 }, all = { 0 }, hidden = { 0 };
    uint16_t ports[CONFIG_BOX_PORTS_MAX];
    size_t n_ports = 0;
    char *cwd = NULL;
    int rc = -1;
    if (config_box_ports(ps, cfg, rs, srv->sandbox_tcp_connect_ports, ports, &n_ports) == -1)
        goto out;
    if (config_box_paths(ps, rs, "sandbox_read_only_paths", srv->sandbox_read_only_paths, &ro) == -1
        || config_box_paths(ps, rs, "sandbox_writable_paths", srv->sandbox_writable_paths, &rw)
               == -1)
        goto out;
    /* The cwd and the command's directory, read-only, where they exist (a missing one is
     * config_check_command's warning, and the spawn's error). */
    /* Either one being /, /tmp, /proc or /dev is in the view already (as the box's own). */
    cwd = config_box_real(srv->cwd != NULL ? srv->cwd : ".", NULL);
    size_t cwd_bind = SIZE_MAX; /* its index in ro, if bound */
    if (cwd != NULL && sandbox_path_bindable(cwd)) {
        cwd_bind = ro.n;
        config_box_add(&ro, xstrdup(cwd));
    }
    if (strchr(srv->argv[0], '/') != NULL) {
        char *dir = xstrdup(srv->argv[0]);
        *strrchr(dir, '/') = '\0';
        char *real = config_box_real(dir[0] != '\0' ? dir : "/", cwd);
        free(dir);
        if (real != NULL && sandbox_path_bindable(real))
            config_box_add(&ro, real);
        else
            free(real);
    }
    for (size_t i = 0; i < ro.n; i++)
        config_box_add(&all, xstrdup(ro.v[i]));
    for (size_t i = 0; i < rw.n; i++)
        config_box_add(&all, xstrdup(rw.v[i]));
    config_box_hidden(cfg, &hidden, &all);
    /* A cwd the box hides (the gateway's state directory, or one below it, where the packaged
     * units start it) is not in the view, nor bound: the child starts at the view's root. */
    for (size_t i = 0; cwd != NULL && i < hidden.n; i++)
        if (config_box_under(cwd, hidden.v[i])) {
            free(cwd);
            cwd = NULL;
            if (cwd_bind != SIZE_MAX) {
                free(ro.v[cwd_bind]);
                memmove(&ro.v[cwd_bind], &ro.v[cwd_bind + 1], (ro.n - cwd_bind) * sizeof(char *));
                ro.n--;
            }
        }
    struct sandbox_spec spec = {
        .network_none = srv->sandbox_network_none,
        .read_only = ro.v,
        .writable = rw.v,
        .hidden = hidden.v,
        .max_memory_bytes = srv->child_max_memory_bytes,
        .max_processes = srv->child_max_processes,
        .max_open_files = srv->child_max_open_files,
        .max_cpu_s = srv->child_max_cpu_s,
        .max_file_bytes = srv->child_max_file_bytes,
        .max_memory_cgroup_bytes = srv->child_max_memory_cgroup_bytes,
        .tcp_connect_ports = ports,
        .n_tcp_connect_ports = n_ports,
        .cwd = cwd,
    };
    const char *errstr = NULL;
    srv->box = sandbox_new(&spec, &errstr);
    if (srv->box == NULL) {
        config_fail(ps, rs->line, "sandbox", "%s", errstr);
        goto out;
    }
    rc = 0;
out:
    free(cwd);
    config_box_clear(&ro);
    config_box_clear(&rw);
    config_box_clear(&all);
    config_box_clear(&hidden);
    return rc;
}

int
config_build_boxes(struct config_parse *ps, struct config *cfg)
{
    for (size_t i = 0; i < cfg->n_servers; i++)
        if (cfg->servers[i].sandbox && config_box_server(ps, cfg, i) == -1)
            return -1;
    return 0;
}
