/* SPDX-License-Identifier: MIT */
/*
 * mcp-gateway: startup order, signals, the janitor tick, and shutdown. The only file that knows
 * every module.
 *
 * Shutdown. SIGTERM first drains: the listening socket closes (new connections are refused, so a
 * proxy fails over to another instance at connect), and on the connections already open /readyz
 * turns 503, new sessions and stateless requests get 503 (each answer closing its connection),
 * requests of open sessions are still served, and requests in flight get shutdown_drain_ms to
 * finish. Then (or at once on SIGINT or a second SIGTERM) the gateway stops accepting, ends every
 * session (what is still in flight is cancelled at the child and answered with an error), lets
 * each child go through its stop ladder, waits until every child is reaped and every HTTP request
 * has finished (bounded by the ladder's grace times), and exits 0.
 *
 * SIGQUIT is SIGTERM. SIGUSR1 reopens log_file, access_log and audit_log (log rotation). Every
 * other signal is logged and otherwise ignored (main_ignored: job control, resource limits,
 * strays, real-time ones), but the core-dump ones sent on purpose (main_dumps): only TERM, INT,
 * QUIT (and KILL, and ABRT &c. after a log line) end the gateway. SIGPIPE is ignored (a peer
 * that closed is an EPIPE).
 *
 * Reload (SIGHUP): the file is read and validated again; on error the running configuration stays.
 * New sessions use the new server definitions; a running session keeps the definition it started
 * with. A pool whose server did not change moves to the new configuration (pool_set_config); the
 * others are retired. The old configuration is freed once no session or pool uses it. listen,
 * max_connections and connection_timeout_s need a restart (they configure the listener).
 */
#include <sys/resource.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "auth.h"
#include "cgroup.h"
#include "config.h"
#include "fetch.h"
#include "http.h"
#include "import.h"
#include "keyring.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "notify.h"
#include "pool.h"
#include "quota.h"
#include "relay.h"
#include "revision.h"
#include "sandbox.h"
#include "session.h"
#include "upstream.h"
#include "version.h"

#define MAIN_TICK_MS         1000
#define MAIN_FDS_PER_SESSION 4u /* the child's stdin, stdout, stderr and its pidfd */
#define MAIN_FDS_PER_BOX     1u /* and a boxed child's seccomp listener */

static struct {
    struct loop *l;
    struct config *cfg;
    struct auth *auth; /* keys and tokens of cfg's [auth] */
    const char *path;
    struct config **retired; /* older configurations some session may still use */
    size_t n_retired;
    bool draining, stopping;
    uint64_t drain_deadline_ms, stop_deadline_ms;
    bool notified;    /* systemd got READY=1 */
    char status[256]; /* the STATUS= it got last */
} M;

/* --help prints this; mcp-gateway(8) is made from it (config_man), so the two cannot disagree. */
static const char main_usage_text[] =
    "usage: mcp-gateway [--config FILE] [--check-config] [--print-config] [--version] [--help]\n"
    "usage: mcp-gateway --import-mcp-json FILE [--env-dir DIR]\n"
    "\n"
    "Streamable HTTP front end for stdio MCP servers: one child process per session, and a pool "
    "of\n"
    "children per server for stateless (2026-07-28) requests.\n"
    "\n"
    "  -c, --config FILE    INI file (default: " MCPGW_DEFAULT_CONFIG
    "; if absent, conf/gateway.ini)\n"
    "  -t, --check-config   validate the configuration, print the result; exit 1 on an error, 0 "
    "with a warning (a server whose command cannot run, which the gateway starts with)\n"
    "  -I, --import-mcp-json FILE [--env-dir DIR]  print [server:NAME] sections for the stdio "
    "servers of a Claude Desktop, Cursor or VS Code mcp.json; env goes to DIR/NAME.env (0600)\n"
    "  -p, --print-config   print the configuration with defaults, secrets redacted; exit 0 or 1\n"
    "  -V, --version        print the version and exit\n"
    "  -h, --help           print this help and exit\n"
    "\n"
    "Signals: SIGTERM (or SIGQUIT) drains (shutdown_drain_ms), then stops; SIGINT or a\n"
    "second SIGTERM stops at once; either way every child is reaped and the exit status is 0.\n"
    "SIGHUP reloads the configuration (new sessions use it). SIGUSR1 reopens log_file,\n"
    "access_log and audit_log.\n"
    "SIGABRT, SIGSEGV, SIGBUS, SIGFPE and SIGILL sent by kill are logged, then dump core.\n"
    "SIGTSTP, SIGTTIN, SIGTTOU, SIGXFSZ, SIGXCPU, SIGUSR2, SIGWINCH, the real-time signals\n"
    "and every other one are logged and ignored: none stops or ends the gateway.\n";

static void
main_usage(FILE *f)
{
    fputs(main_usage_text, f);
}

static void
main_free_retired(void)
{
    size_t k = 0;
    for (size_t i = 0; i < M.n_retired; i++) {
        struct config *c = M.retired[i];
        if (session_uses_config(c) || pool_uses_config(c)) {
            M.retired[k++] = c;
            continue;
        }
        log_debug(NULL, "configuration of %s: no session uses it any more", c->file);
        config_clear(c);
        free(c);
    }
    M.n_retired = k;
}

/*
 * systemd (Type=notify, notify.h): READY=1 once the listener is up and readiness has its first
 * verdict, so that `systemctl start` (and a rolling restart's next step) waits until /readyz can
 * say whether a server serves: some server serves, or none still waits for its first child's
 * start (a broken one does not hold the start back). Then STATUS= follows /readyz's answer.
 */
static void
main_notify(void)
{
    if (!notify_enabled() || M.stopping || M.draining)
        return; /* without systemd, readiness is asked by /readyz alone (it starts the probes) */
    char status[sizeof(M.status)];
    bool settled;
    bool ready = http_readiness(status, sizeof(status), &settled);
    if (!M.notified && !ready && !settled)
        return;
    if (M.notified && strcmp(status, M.status) == 0)
        return;
    notify_status(M.notified ? "" : "READY=1\n", status);
    if (!M.notified)
        log_info(NULL, "readiness: %s", status);
    M.notified = true;
    memcpy(M.status, status, sizeof(M.status));
}

static void
main_tick(void *arg)
{
    (void)arg;
    uint64_t now = util_now_ms();
    session_sweep(now);
    pool_sweep(now);
    http_sweep(now);
    auth_sweep(&M.cfg->auth, now);
    main_free_retired();
    main_notify();
    loop_timer_add(M.l, MAIN_TICK_MS, main_tick, NULL);
}

static void main_stop(const char *why);

static void
main_stop_check(void)
{
    if (M.draining && !M.stopping) {
        size_t left = session_inflight(PENDING_TO_CHILD) + pool_inflight();
        if (left == 0)
            main_stop("drained: no request in flight");
        else if (util_now_ms() >= M.drain_deadline_ms)
            main_stop("shutdown_drain_ms passed: cancelling what is still in flight");
    }
    if (!M.stopping)
        return;
    bool done = upstream_live_count() == 0 && http_idle();
    if (done || util_now_ms() >= M.stop_deadline_ms) {
        if (!done)
            log_warn(NULL, "shutdown deadline passed: %zu children, requests %s",
                     upstream_live_count(), http_idle() ? "done" : "still open");
        loop_stop(M.l);
    }
}

static void
main_deadline(void *arg)
{
    (void)arg; /* only wakes the loop; main_after decides */
}

/* The second step of shutdown: stop listening, end every session, wait for the children. */
static void
main_stop(const char *why)
{
    if (M.stopping)
        return;
    M.stopping = true;
    log_info(NULL, "shutting down (%s): %zu sessions", why, session_count());
    char status[256];
    snprintf(status, sizeof(status), "stopping (%s)", why);
    notify_status("STOPPING=1\n", status);
    uint64_t grace = M.cfg->child_stdin_grace_ms + M.cfg->child_term_grace_ms + 1000;
    M.stop_deadline_ms = util_now_ms() + grace;
    loop_timer_add(M.l, grace, main_deadline, NULL);
    http_quiesce();
    session_close_all(SESSION_END_SHUTDOWN);
    pool_close_all();
}

static void
main_drain(const char *why)
{
    M.draining = true;
    char status[256];
    snprintf(status, sizeof(status), "draining (%s): no new sessions or requests", why);
    notify_status("STOPPING=1\n", status);
    session_drain();
    pool_drain();
    http_quiesce(); /* new connections are refused: a proxy sends them to another instance */
    uint64_t drain = M.cfg->shutdown_drain_ms;
    M.drain_deadline_ms = util_now_ms() + drain;
    loop_timer_add(M.l, drain, main_deadline, NULL);
    log_info(NULL,
             "%s: draining: no new sessions or requests; %zu requests in flight get up to "
             "%" PRIu64 " ms",
             why, session_inflight(PENDING_TO_CHILD) + pool_inflight(), drain);
}

/* Settings the running listener was built with: a reload keeps them (restart to change). */
static void
main_keep_listener(const struct config *old, struct config *next)
{
    if (strcmp(old->listen_host, next->listen_host) != 0 || old->listen_port != next->listen_port
        || old->max_connections != next->max_connections
        || old->connection_timeout_s != next->connection_timeout_s
        || old->max_header_bytes != next->max_header_bytes)
        log_warn(NULL, "SIGHUP: listen, max_connections, connection_timeout_s and "
                       "max_header_bytes take effect at the next start; the running values stay");
    free(next->listen_host);
    next->listen_host = xstrdup(old->listen_host);
    next->listen_port = old->listen_port;
    next->max_connections = old->max_connections;
    next->connection_timeout_s = old->connection_timeout_s;
    next->max_header_bytes = old->max_header_bytes;
}

/* Lines go to path (NULL: stderr) unless they already do; when it cannot be opened, they stay. */
static void
main_log_file(const char *path, const char *why)
{
    const char *now = log_file();
    if (path == now || (path != NULL && now != NULL && strcmp(path, now) == 0))
        return;
    char was[4096];
    snprintf(was, sizeof(was), "%s", now != NULL ? now : "stderr");
    log_info(NULL, "%s: log_file changed: the log goes to %s", why, path != NULL ? path : "stderr");
    const char *err = NULL;
    if (log_set_file(path, &err) == -1)
        log_error(NULL, "%s: log_file %s: %s; the log stays %s%s", why, path, err,
                  now != NULL ? "in " : "on ", was);
    else
        log_info(NULL, "%s: the log goes here from now on (it went to %s)", why, was);
}

/* SIGUSR1: logrotate renamed the log file; open a new one at its path. */
static void
main_reopen_log(void)
{
    /* The access_log file, if any, is reopened with the log file, or without one. */
    const char *log_why, *access_why;
    (void)log_reopen(&log_why, &access_why);
    if (access_why != NULL)
        log_error(NULL, "SIGUSR1: access_log %s: %s; access lines stay in the file already open",
                  log_access_file(), access_why);
    if (log_file() == NULL)
        log_info(NULL, "SIGUSR1: no log_file set; the log goes to stderr, nothing to reopen");
    else if (log_why != NULL)
        log_error(NULL, "SIGUSR1: log_file %s: %s; the log stays in the file already open",
                  log_file(), log_why);
    else
        log_info(NULL, "SIGUSR1: log file reopened (%s)", log_file());
    const char *audit_why = NULL;
    if (audit_reopen(&audit_why) == -1)
        log_error(NULL, "SIGUSR1: audit_log %s: %s; records stay in the file already open",
                  audit_path(), audit_why);
}

/* The audit trail where cfg says (audit_set); when it cannot be opened it stays where it was. */
static int
main_audit(const struct config *cfg, const char *why)
{
    const char *err = NULL;
    if (audit_set(cfg->audit_log, cfg->audit_arguments_max_bytes, cfg->audit_required != 0, &err)
        == 0)
        return 0;
    log_error(NULL, "%s: audit_log %s: %s%s", why, cfg->audit_log, err,
              audit_on() ? "; records stay where they went" : "");
    return -1;
}

/*
 * Each server's command and cwd (config_check_command): --check-config prints what is wrong as a
 * warning; a start or reload warns in the log and marks the server broken at once (/readyz), since
 * the other servers still serve. Returns the count.
 */
static size_t
main_check_commands(const struct config *cfg, bool check)
{
    size_t bad = 0;
    char err[PATH_MAX + 512];
    for (size_t i = 0; i < cfg->n_servers; i++) {
        const struct config_server *srv = &cfg->servers[i];
        bool ok = config_check_command(cfg, srv, err, sizeof(err)) == 0;
        /* /readyz is public: its why names the cause, never a path (the log has those). */
        const char *cause = strstr(err, ": cwd: ") != NULL ? "cwd missing or not a directory"
                                                           : "command missing or not executable";
        if (!check)
            relay_set_missing(relay_stats_of(srv->name), ok ? NULL : cause);
        if (ok)
            continue;
        bad++;
        if (check)
            fprintf(stderr, "warning: %s; its sessions will fail to start\n", err);
        else
            log_warn(NULL, "%s; its sessions will fail to start", err);
    }
    return bad;
}

/*
 * Each boxed server's box, tried once with a throw-away child (sandbox.h): the kernel must give
 * every namespace and mount, or the gateway refuses the file (never a child run unboxed). Says
 * what is applied: on stdout for --check-config, in the log at start and on reload. 0 or -1.
 */
static int
main_check_boxes(const struct config *cfg, bool check)
{
    char err[1024], what[2048];
    bool cgroup_seen = false;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        const struct config_server *srv = &cfg->servers[i];
        if (srv->box == NULL)
            continue;
        /*
         * The delegated cgroup, once, before the first boxed child: --check-config only looks,
         * the gateway moves itself into its leaf (cgroup.h). Without a boxed server, untouched.
         */
        const struct cgroup_source self = { "/proc/self/cgroup", "/proc/self/mountinfo", false };
        if (!cgroup_seen)
            (void)cgroup_setup(&self, !check);
        cgroup_seen = true;
        if (sandbox_module_init(err, sizeof(err)) == -1
            || sandbox_probe(srv->box, err, sizeof(err)) == -1) {
            if (check)
                fprintf(stderr, "error: [server:%s] sandbox = on: %s\n", srv->name, err);
            else
                log_error(NULL, "[server:%s] sandbox = on: %s", srv->name, err);
            return -1;
        }
        sandbox_summary(srv->box, what, sizeof(what));
        if (check)
            printf("  [server:%s] sandbox: %s\n", srv->name, what);
        else
            log_info(NULL, "[server:%s] sandbox: %s", srv->name, what);
    }
    return 0;
}

/*
 * The file's deprecated spellings (config.h's deprecated): each a warning, on stderr for
 * --check-config, in the log at start and on each reload; the file is used all the same.
 */
static void
main_warn_deprecated(const struct config *cfg, bool check)
{
    for (char *const *d = cfg->deprecated; d != NULL && *d != NULL; d++) {
        if (check)
            fprintf(stderr, "warning: %s\n", *d);
        else
            log_warn(NULL, "%s", *d);
    }
}

static bool
main_reload(void)
{
    char err[512];
    struct config *next = xcalloc(1, sizeof(*next));
    if (config_load(M.path, next, err, sizeof(err)) == -1) {
        log_error(NULL, "SIGHUP: %s; the running configuration stays", err);
        free(next);
        return false;
    }
    main_keep_listener(M.cfg, next);
    if (main_check_boxes(next, false) == -1) {
        log_error(NULL, "SIGHUP: the running configuration stays");
        config_clear(next);
        free(next);
        return false;
    }
    if (!http_config_fits(next)) {
        log_error(NULL, "SIGHUP: [auth] mode none needs the loopback listener this process has "
                        "not got; the running configuration stays");
        config_clear(next);
        free(next);
        return false;
    }
    struct auth *auth = auth_new(next, err, sizeof(err));
    /* The session keys are read before anything changes: a bad file keeps the running ones. */
    struct keyring *session_keys = auth == NULL ? NULL : pool_session_keys_load(next, err, sizeof(err));
    if (auth == NULL || (session_keys == NULL && err[0] != '\0')
        || pool_load_key(next, err, sizeof(err)) == -1) {
        log_error(NULL, "SIGHUP: %s; the running configuration stays", err);
        keyring_free(session_keys);
        auth_free(auth);
        config_clear(next);
        free(next);
        return false;
    }
    if (session_keys != NULL) /* NULL: the random key in use stays */
        pool_session_keys_set(next, session_keys);
    log_init(next->log_level, next->log_format);
    main_log_file(next->log_file, "SIGHUP");
    const char *access_err = NULL;
    if (log_set_access(next->access_log, next->access_log_format, &access_err) == -1)
        log_error(NULL, "SIGHUP: access_log %s: %s; access lines stay where they went",
                  next->access_log, access_err);
    (void)main_audit(next, "SIGHUP");
    main_warn_deprecated(next, false);
    main_check_commands(next, false);
    session_set_config(next);
    pool_set_config(next);
    http_set_config(next, auth);
    session_set_auth(auth);
    pool_set_auth(auth);
    auth_adopt(auth, M.auth); /* keys fetched for the same issuer stay in use */
    auth_free(M.auth);        /* it only read the retired configuration's [auth] */
    M.auth = auth;
    auth_start(M.auth);
    M.retired = xrealloc(M.retired, (M.n_retired + 1) * sizeof(*M.retired));
    M.retired[M.n_retired++] = M.cfg;
    M.cfg = next;
    main_free_retired();
    log_info(NULL, "SIGHUP: configuration reloaded from %s (%zu servers); new sessions use it",
             M.path, next->n_servers);
    return true;
}

/*
 * What a signal the gateway does not use does to it. Each is read from the loop's signalfd
 * (blocked), so it is logged and none ends the gateway, stops it or goes unnoticed: the job-control
 * stops (TSTP, TTIN, TTOU: a background write to a terminal is then let through, a read gets EIO),
 * the resource limits (XFSZ: the write over RLIMIT_FSIZE gets EFBIG all the same; XCPU: past the
 * soft RLIMIT_CPU, the hard one still ends it with SIGKILL), SYS, TRAP, STKFLT, the real-time
 * signals glibc leaves to programs (SIGRTMIN..SIGRTMAX), and the strays (USR2, WINCH, ALRM,
 * VTALRM, PROF, IO, PWR, URG, CONT). A fault (SEGV, BUS, FPE, ILL, a seccomp SYS, a breakpoint's
 * TRAP) is delivered whatever the mask; the same signal sent by kill is one more stray, except the
 * core-dump ones below. CHLD keeps its default (ignored: children are watched by pidfd).
 */
static const int main_ignored[] = { SIGUSR2, SIGWINCH, SIGALRM, SIGVTALRM, SIGPROF,  SIGIO,
                                    SIGPWR,  SIGURG,   SIGCONT, SIGTSTP,   SIGTTIN,  SIGTTOU,
                                    SIGXFSZ, SIGXCPU,  SIGSYS,  SIGTRAP,   SIGSTKFLT };
/*
 * Sent on purpose, these ask for a core dump (SIGABRT is what systemd's watchdog sends): logged
 * with the sender, then their default action, as asked.
 */
static const int main_dumps[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };

static const char *
main_signal_hint(int signo)
{
    return signo == SIGXFSZ   ? ": a file passed RLIMIT_FSIZE (writes to it fail with EFBIG)"
           : signo == SIGXCPU ? ": the CPU time passed the soft RLIMIT_CPU (the hard one kills)"
           : signo == SIGTSTP || signo == SIGTTIN || signo == SIGTTOU ? ": the gateway never stops"
                                                                      : "";
}

/* A core-dump signal sent to the gateway: one line, then its default action (no return). */
static bool
main_signal_fatal(int signo, const char *name)
{
    bool dump = false;
    for (size_t i = 0; i < ARRAY_LEN(main_dumps); i++)
        dump |= main_dumps[i] == signo;
    if (!dump)
        return false;
    log_error(NULL, "%s sent to the gateway: ending with its default action (a core dump)", name);
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    (void)sigaction(signo, &dfl, NULL);
    (void)raise(signo);
    (void)sigprocmask(SIG_UNBLOCK, &one, NULL); /* delivered here */
    abort();
}

static void
main_signal(int signo, void *arg)
{
    (void)arg;
    if (signo == SIGHUP) {
        if (M.stopping)
            return;
        notify_reloading("reloading the configuration");
        bool ok = main_reload();
        metrics_reload_result(ok);
        /* READY=1 again either way: a refused file leaves the running configuration serving. */
        if (notify_enabled()) {
            bool settled;
            (void)http_readiness(M.status, sizeof(M.status), &settled);
            notify_status(M.draining ? "" : "READY=1\n", M.status);
            M.notified = true;
        }
        return;
    }
    char name[32];
    if (signo >= SIGRTMIN && signo <= SIGRTMAX)
        snprintf(name, sizeof(name), "SIGRTMIN+%d", signo - SIGRTMIN);
    else
        snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(signo));
    if (signo == SIGUSR1) {
        main_reopen_log();
        return;
    }
    if (main_signal_fatal(signo, name))
        return; /* not reached */
    if (signo != SIGTERM && signo != SIGINT && signo != SIGQUIT) {
        /* One line per signal, then one per 10 s with a count: a storm floods nothing. */
        static struct log_limit limits[65];
        char note[80];
        if (signo > 0 && (size_t)signo < ARRAY_LEN(limits)
            && log_limit_note(&limits[signo], util_now_ms(), 10000, note, sizeof(note)) != NULL)
            log_info(NULL,
                     "%s ignored%s (SIGTERM stops, SIGHUP reloads, SIGUSR1 reopens log_file)%s",
                     name, main_signal_hint(signo), note);
        return;
    }
    if (signo != SIGINT && !M.draining && !M.stopping && M.cfg->shutdown_drain_ms > 0) {
        main_drain(name);
        return;
    }
    main_stop(name);
}

static int
main_prepare(void *arg)
{
    (void)arg;
    return http_prepare();
}

static void
main_after(void *arg)
{
    (void)arg;
    upstream_batch_begin();
    http_run();
    upstream_batch_end();
    session_reap();
    main_stop_check();
    if (!M.notified)
        main_notify();
}

/*
 * Raises the open-file limit to its hard limit and says when that still cannot hold
 * max_sessions children (stdin, stdout, stderr and a pidfd each) beside max_connections sockets
 * and the pools' children: sessions past it are refused with 503 (deploy/README.md, "File
 * limits"). A session of a pooled server holds no descriptor, of either transport (a 2024-11-05
 * session's one stream is a connection, counted by max_connections).
 */
static void
main_raise_nofile(const struct config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
            log_warn(NULL, "cannot raise the open-file limit");
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    uint64_t others = cfg->max_connections + 64; /* sockets, and the gateway's own descriptors */
    uint64_t per = 0; /* the most one session may hold, on the server where it holds most */
    for (size_t i = 0; i < cfg->n_servers; i++) {
        const struct config_server *srv = &cfg->servers[i];
        uint64_t child = MAIN_FDS_PER_SESSION + (srv->box != NULL ? MAIN_FDS_PER_BOX : 0);
        others += srv->pool_max_children * child;
        if (!srv->session_pooled)
            per = child > per ? child : per;
    }
    uint64_t need = cfg->max_sessions * per + others;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need && per == 0)
        log_warn(NULL,
                 "open-file limit %llu is below the %llu that max_connections = %llu and the "
                 "pools' children may use (pooled sessions hold none)",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                 (unsigned long long)cfg->max_connections);
    else if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        log_warn(NULL,
                 "open-file limit %llu is below the %llu that max_sessions = %llu and "
                 "max_connections = %llu may use: about %llu sessions fit, more get 503",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                 (unsigned long long)cfg->max_sessions, (unsigned long long)cfg->max_connections,
                 (unsigned long long)(rl.rlim_cur > others ? (rl.rlim_cur - others) / per : 0));
}

/* What the command line asks for. */
struct main_args {
    const char *path;
    bool check, print;
};

/* The hidden --man (src/meson.build, src/config/docs.sh): a page or a document on stdout. */
static int
main_man(const char *what, int argc, char **argv)
{
    char err[1024] = "";
    if (argc > 2) {
        main_usage(stderr);
        return 2;
    }
    if (config_man(stdout, what, argc > 0 ? argv[0] : NULL, argc > 1 ? argv[1] : NULL,
                   MCPGW_VERSION, main_usage_text, err, sizeof err)
        != 0) {
        fprintf(stderr, "mcp-gateway: --man %s: %s\n", what, err);
        return 1;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* -1: serve or check as a says; otherwise the exit status of an option that did its work. */
static int
main_options(int argc, char **argv, struct main_args *a)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "check-config", no_argument, NULL, 't' },
        { "print-config", no_argument, NULL, 'p' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { "import-mcp-json", required_argument, NULL, 'I' },
        /* Not in --help: meson writes the man pages with it at build time. */
        { "man", required_argument, NULL, 'M' },
        { NULL, 0, NULL, 0 },
    };
    /* The install's file; from a source tree with nothing installed, the tree's own. */
    a->path = access(MCPGW_DEFAULT_CONFIG, F_OK) == 0 ? MCPGW_DEFAULT_CONFIG : "conf/gateway.ini";
    int ch;
    while ((ch = getopt_long(argc, argv, "c:tpVhI:", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            a->path = optarg;
            break;
        case 't':
            a->check = true;
            break;
        case 'p':
            a->print = true;
            break;
        case 'V':
            printf("mcp-gateway %s (default config %s)\n", MCPGW_VERSION, MCPGW_DEFAULT_CONFIG);
            return 0;
        case 'h':
            main_usage(stdout);
            return 0;
        case 'I': /* the rest of the command line is the import's own */
            return import_mcp_json(optarg, argc - optind, argv + optind);
        case 'M': /* --man WHAT [OPTIONS_MD [FILE]] */
            return main_man(optarg, argc - optind, argv + optind);
        default:
            main_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        main_usage(stderr);
        return 2;
    }
    return -1;
}

/* Frees what main_load made (the current configuration, its auth and its session keys). */
static void
main_unload(void)
{
    pool_session_keys_set(M.cfg, NULL);
    auth_free(M.auth);
    M.auth = NULL;
    if (M.cfg != NULL)
        config_clear(M.cfg);
    free(M.cfg);
    M.cfg = NULL;
}

/* The configuration at path, its auth and its state key; -1 (said on stderr) when one fails. */
static int
main_load(const char *path)
{
    char err[512];
    M.path = path;
    M.cfg = xcalloc(1, sizeof(*M.cfg));
    if (config_load(path, M.cfg, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        free(M.cfg);
        M.cfg = NULL;
        return -1;
    }
    M.auth = auth_new(M.cfg, err, sizeof(err));
    struct keyring *session_keys =
        M.auth == NULL ? NULL : pool_session_keys_load(M.cfg, err, sizeof(err));
    if (M.auth == NULL || session_keys == NULL || pool_load_key(M.cfg, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        keyring_free(session_keys);
        main_unload();
        return -1;
    }
    pool_session_keys_set(M.cfg, session_keys);
    return 0;
}

/* --check-config and --print-config: the exit status. */
static int
main_offline(const struct main_args *a)
{
    int rc = 0;
    /*
     * A server whose command cannot run is a warning, as at start and on SIGHUP, where the other
     * servers still serve: the exit status is 1 exactly when the gateway would refuse the file.
     */
    main_warn_deprecated(M.cfg, true);
    size_t warned = a->check ? main_check_commands(M.cfg, true) : 0;
    if (a->check && main_check_boxes(M.cfg, true) == -1) {
        main_unload();
        return 1;
    }
    if (a->print) {
        rc = config_print(stdout, M.cfg) == 0 && fflush(stdout) == 0 ? 0 : 1;
    } else {
        printf("%s: configuration OK (%zu servers", a->path, M.cfg->n_servers);
        if (warned > 0)
            printf(", %zu with a warning on stderr", warned);
        printf(")\n");
        for (size_t i = 0; i < M.cfg->n_servers; i++) {
            const struct config_server *srv = &M.cfg->servers[i];
            /* A pooled server's pool serves its legacy sessions too (none has a child). */
            printf("  [server:%s] %s: %s (%s)%s of %" PRIu64 "..%" PRIu64
                   " children (era %s, idle end %" PRIu64 " s, %" PRIu64 " in flight each)\n",
                   srv->name, srv->path,
                   srv->session_pooled ? "pooled legacy sessions and stateless" : "stateless pool",
                   revision_list(REVISION_STATELESS),
                   srv->session_pooled ? " requests on a pool" : "", srv->pool_warm_children,
                   srv->pool_max_children, config_era_words[srv->era], srv->pool_idle_timeout_s,
                   srv->pool_child_max_inflight);
        }
    }
    main_unload();
    return rc;
}

/* Logs, signals, the modules in order, the listener: 0, or -1 when the listener cannot start. */
static int
main_start(void)
{
    log_init(M.cfg->log_level, M.cfg->log_format);
    const char *why = NULL;
    if (log_set_file(M.cfg->log_file, &why) == -1)
        fatalx("log_file %s: %s", M.cfg->log_file, why);
    if (log_set_access(M.cfg->access_log, M.cfg->access_log_format, &why) == -1)
        fatalx("access_log %s: %s", M.cfg->access_log, why);
    if (audit_set(M.cfg->audit_log, M.cfg->audit_arguments_max_bytes, M.cfg->audit_required != 0,
                  &why)
        == -1)
        fatalx("audit_log %s: %s", M.cfg->audit_log, why);
    (void)notify_init(); /* before any child starts: none of them inherits NOTIFY_SOCKET */
    main_warn_deprecated(M.cfg, false);
    main_check_commands(M.cfg, false);
    if (main_check_boxes(M.cfg, false) == -1)
        fatalx("a server's sandbox cannot be made; nothing started");
    signal(SIGPIPE, SIG_IGN);
    main_raise_nofile(M.cfg);
    M.l = loop_new();
    if (fetch_module_init(M.l) == -1)
        fatal("libcurl");
    session_module_init(M.l, M.cfg);
    session_set_auth(M.auth);
    pool_set_auth(M.auth);
    /*
     * Read from the loop, before any thread starts (libcurl's resolver inherits the mask);
     * children start with every signal unblocked and at its default (upstream.c).
     */
    static const int used[] = { SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1 };
    for (size_t i = 0; i < ARRAY_LEN(used); i++)
        if (loop_signal_add(M.l, used[i], main_signal, NULL) == -1)
            fatal("signalfd");
    for (size_t i = 0; i < ARRAY_LEN(main_ignored); i++)
        if (loop_signal_add(M.l, main_ignored[i], main_signal, NULL) == -1)
            fatal("signalfd");
    for (size_t i = 0; i < ARRAY_LEN(main_dumps); i++)
        if (loop_signal_add(M.l, main_dumps[i], main_signal, NULL) == -1)
            fatal("signalfd");
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        if (loop_signal_add(M.l, sig, main_signal, NULL) == -1)
            fatal("signalfd");
    if (http_start(M.l, M.cfg, M.auth) == -1)
        return -1;
    pool_module_init(M.l, M.cfg); /* warm children: after the listener, which may fail */
    auth_start(M.auth);           /* the issuer's keys, before the first request needs them */
    loop_set_hooks(M.l, main_prepare, main_after, NULL);
    loop_timer_add(M.l, MAIN_TICK_MS, main_tick, NULL);
    log_info(NULL, "mcp-gateway %s started (%zu servers, config %s)", MCPGW_VERSION,
             M.cfg->n_servers, M.path);
    main_notify(); /* under systemd: the probes start now, not at the loop's first wake-up */
    return 0;
}

/* After the loop: every module freed, highest first, then every configuration. */
static void
main_shutdown(void)
{
    http_stop();
    session_reap();
    session_module_free();
    session_set_auth(NULL);
    pool_module_free();
    pool_set_auth(NULL);
    relay_module_free();
    audit_module_free();
    quota_module_free();
    upstream_module_free();
    sandbox_module_free();
    auth_free(M.auth);
    auth_module_free();
    fetch_module_free();
    notify_module_free();
    loop_free(M.l);
    M.n_retired += 1;
    M.retired = xrealloc(M.retired, M.n_retired * sizeof(*M.retired));
    M.retired[M.n_retired - 1] = M.cfg;
    for (size_t i = 0; i < M.n_retired; i++) {
        config_clear(M.retired[i]);
        free(M.retired[i]);
    }
    free(M.retired);
    log_info(NULL, "stopped");
}

int
main(int argc, char **argv)
{
    struct main_args a = { 0 };
    int rc = main_options(argc, argv, &a);
    if (rc != -1)
        return rc;
    if (main_load(a.path) == -1)
        return 1;
    if (a.check || a.print)
        return main_offline(&a);
    if (main_start() == -1)
        return 1;
    loop_run(M.l);
    main_shutdown();
    return 0;
}
