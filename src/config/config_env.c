/* SPDX-License-Identifier: MIT */
/*
 * What a server's children start with, for the session and the pool layers alike (config.h): the
 * environment the configuration gives them, and whether their command and cwd can start at all
 * (--check-config, and a warning at start and on SIGHUP).
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

/* entry (NAME=value, or a NAME of inherit_env) is the variable name. */
static bool
config_env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && (entry[n] == '=' || entry[n] == '\0');
}

/* entry is a variable the gateway sets itself: the configuration's is left out. */
static bool
config_env_ours(const char *entry, const char *key)
{
    return config_env_is(entry, "MCPGW_SERVER") || config_env_is(entry, key);
}

static char *
config_env_pair(const char *k, const char *v)
{
    size_t len = strlen(k) + strlen(v) + 2;
    char *e = xmalloc(len);
    snprintf(e, len, "%s=%s", k, v);
    return e;
}

char **
config_child_env(const struct config_server *srv, const char *key, const char *value)
{
    size_t n = 2;
    for (char **e = srv->inherit_env; e && *e; e++)
        n++;
    for (char **e = srv->env; e && *e; e++)
        n++;
    char **envp = xcalloc(n + 1, sizeof(*envp));
    size_t k = 0;
    for (char **e = srv->inherit_env; e && *e; e++) {
        const char *v = getenv(*e);
        if (v == NULL || config_env_ours(*e, key))
            continue;
        envp[k++] = config_env_pair(*e, v);
    }
    for (char **e = srv->env; e && *e; e++)
        if (!config_env_ours(*e, key))
            envp[k++] = xstrdup(*e);
    envp[k++] = config_env_pair("MCPGW_SERVER", srv->name);
    envp[k++] = config_env_pair(key, value);
    envp[k] = NULL;
    return envp;
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
