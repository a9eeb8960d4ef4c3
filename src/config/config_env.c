/* SPDX-License-Identifier: MIT */
/*
 * What a server's children start with, for the session and the pool layers alike (config.h): the
 * environment the configuration gives them, and whether their command and cwd can start at all
 * (--check-config, and a warning at start and on SIGHUP).
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_int.h"

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

/* entry (NAME=value or NAME) names a variable that extra (NAME=VALUE entries) sets. */
static bool
config_env_in(const char *entry, char *const *extra)
{
    size_t n = strcspn(entry, "=");
    for (char *const *e = extra; e != NULL && *e != NULL; e++)
        if (strncmp(*e, entry, n) == 0 && (*e)[n] == '=')
            return true;
    return false;
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
config_child_env(const struct config_server *srv, const char *key, const char *value,
                 char *const *extra)
{
    size_t n = 2;
    for (char **e = srv->inherit_env; e && *e; e++)
        n++;
    for (char **e = srv->env; e && *e; e++)
        n++;
    for (char *const *e = extra; e && *e; e++)
        n++;
    char **envp = xcalloc(n + 1, sizeof(*envp));
    size_t k = 0;
    for (char **e = srv->inherit_env; e && *e; e++) {
        const char *v = getenv(*e);
        if (v == NULL || config_env_ours(*e, key) || config_env_in(*e, extra))
            continue;
        envp[k++] = config_env_pair(*e, v);
    }
    for (char **e = srv->env; e && *e; e++)
        if (!config_env_ours(*e, key) && !config_env_in(*e, extra))
            envp[k++] = xstrdup(*e);
    for (char *const *e = extra; e && *e; e++)
        if (!config_env_ours(*e, key) && !config_env_is(*e, "MCPGW_SESSION_LABEL")
            && !config_env_is(*e, "MCPGW_POOL"))
            envp[k++] = xstrdup(*e);
    envp[k++] = config_env_pair("MCPGW_SERVER", srv->name);
    envp[k++] = config_env_pair(key, value);
    envp[k] = NULL;
    return envp;
}

void
config_env_free(char **env)
{
    for (char **e = env; e != NULL && *e != NULL; e++) {
        explicit_bzero(*e, strlen(*e));
        free(*e);
    }
    free(env);
}

bool
config_server_per_principal(const struct config_server *srv)
{
    return srv->n_claim_env > 0 || srv->credentials_dir != NULL || srv->token_exchange;
}

int
config_env_lines(char *text, char *const *already, const char *where, char ***env, char *why,
                 size_t whylen)
{
    size_t n = 0;
    char **out = xcalloc(1, sizeof(*out));
    unsigned lineno = 0;
    for (char *p = text, *next; *p != '\0'; p = next) {
        char *nl = strchr(p, '\n');
        next = nl != NULL ? nl + 1 : p + strlen(p);
        if (nl != NULL)
            *nl = '\0';
        lineno++;
        size_t len = strlen(p);
        if (len > 0 && p[len - 1] == '\r')
            p[len - 1] = '\0';
        const char *s = p + strspn(p, " \t");
        if (*s == '\0' || *s == '#')
            continue;
        const char *eq = strchr(s, '=');
        if (eq == NULL || !config_is_name(s, (size_t)(eq - s)))
            snprintf(why, whylen, "%u: must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*", lineno);
        else if (config_env_in(s, out) || config_env_in(s, already))
            snprintf(why, whylen, "%u: %.*s is already set (%s)", lineno, (int)(eq - s), s, where);
        else {
            out = xrealloc(out, (n + 2) * sizeof(*out));
            out[n++] = xstrdup(s);
            out[n] = NULL;
            continue;
        }
        config_env_free(out);
        return -1;
    }
    *env = out;
    return 0;
}

char *
config_secret_text(int fd, size_t *len, const char **bad)
{
    char *text = xmalloc(CONFIG_SECRET_FILE_MAX + 1);
    size_t n = 0;
    ssize_t got = 0;
    while (n <= CONFIG_SECRET_FILE_MAX) {
        got = read(fd, text + n, CONFIG_SECRET_FILE_MAX + 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    int e = errno;
    close(fd);
    *bad = got < 0                         ? strerror(e)
           : n > CONFIG_SECRET_FILE_MAX    ? "is larger than 64 KiB"
           : memchr(text, '\0', n) != NULL ? "contains a NUL byte"
                                           : NULL;
    if (*bad != NULL) {
        explicit_bzero(text, n < CONFIG_SECRET_FILE_MAX ? n : CONFIG_SECRET_FILE_MAX);
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

/* A principal's name as a file name of credentials_dir: nothing that leaves or hides in DIR. */
static bool
config_safe_file_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 200 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && strchr("._:@+-", s[i]) == NULL)
            return false;
    return true;
}

int
config_credentials_read(const struct config_server *srv, const char *principal, char ***env,
                        char *why, size_t whylen)
{
    *env = NULL;
    if (!config_safe_file_name(principal)) {
        snprintf(why, whylen, "the principal's name is not a safe file name for credentials_dir");
        return -2;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s.env", srv->credentials_dir, principal)
        >= (int)sizeof path) {
        snprintf(why, whylen, "%s/...: the path is too long", srv->credentials_dir);
        return -1;
    }
    /* Non-blocking: a FIFO put there must not stop the gateway; it is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd == -1) {
        if (errno == ENOENT)
            return 1;
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    char unsafe[1024];
    const char *bad = util_file_unsafe(fd, path, true, unsafe, sizeof unsafe);
    if (bad == NULL && (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)))
        bad = "is not a regular file";
    if (bad == NULL && st.st_size > (off_t)CONFIG_SECRET_FILE_MAX)
        bad = "is larger than 64 KiB";
    if (bad != NULL) {
        close(fd);
        snprintf(why, whylen, "%s%s%s", bad == unsafe ? "" : path, bad == unsafe ? "" : ": ", bad);
        return -1;
    }
    size_t n = 0;
    const char *rbad;
    char *text = config_secret_text(fd, &n, &rbad);
    if (text == NULL) {
        snprintf(why, whylen, "%s: %s", path, rbad);
        return -1;
    }
    int rc = 0;
    char lwhy[256];
    if (config_env_lines(text, NULL, "an earlier line", env, lwhy, sizeof lwhy) == -1) {
        snprintf(why, whylen, "%s:%s", path, lwhy);
        rc = -1;
    }
    explicit_bzero(text, n);
    free(text);
    return rc;
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
