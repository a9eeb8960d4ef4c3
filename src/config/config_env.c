/* SPDX-License-Identifier: MIT */
/*
 * The environment a server's children start with: what the configuration says, for the session
 * and the pool layers alike (config.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

char **
config_child_env(const struct config_server *srv)
{
    size_t n = 0;
    for (char **e = srv->inherit_env; e && *e; e++)
        n++;
    for (char **e = srv->env; e && *e; e++)
        n++;
    char **envp = xcalloc(n + 1, sizeof(*envp));
    size_t k = 0;
    for (char **e = srv->inherit_env; e && *e; e++) {
        const char *v = getenv(*e);
        if (v == NULL)
            continue;
        size_t len = strlen(*e) + strlen(v) + 2;
        envp[k] = xmalloc(len);
        snprintf(envp[k], len, "%s=%s", *e, v);
        k++;
    }
    for (char **e = srv->env; e && *e; e++)
        envp[k++] = xstrdup(*e);
    envp[k] = NULL;
    return envp;
}
