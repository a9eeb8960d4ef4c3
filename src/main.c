/* SPDX-License-Identifier: MIT */
/*
 * mcp-gateway: startup order, signals, the janitor tick, and shutdown. The only file that knows
 * every module.
 *
 * Shutdown (SIGTERM, SIGINT): stop accepting, end every session (in-flight requests are cancelled
 * at the child and answered with an error), let each child go through its stop ladder, wait until
 * every child is reaped and every HTTP request has finished (bounded by the ladder's grace times),
 * then exit 0.
 */
#include <sys/resource.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "session.h"
#include "upstream.h"
#include "version.h"

#define MAIN_TICK_MS 1000

static struct {
    struct loop *l;
    struct config cfg;
    bool stopping;
    uint64_t stop_deadline_ms;
} M;

static void
main_usage(FILE *f)
{
    fprintf(f, "usage: mcp-gateway [--config FILE] [--check-config] [--version] [--help]\n"
               "\n"
               "Streamable HTTP front end for stdio MCP servers: one child process per session.\n"
               "\n"
               "  -c, --config FILE    INI configuration (default: conf/gateway.ini)\n"
               "  -t, --check-config   validate the configuration, print the result, exit 0 or 1\n"
               "  -V, --version        print the version and exit\n"
               "  -h, --help           print this help and exit\n"
               "\n"
               "Signals: SIGTERM/SIGINT stop cleanly (every child reaped, exit 0).\n");
}

static void
main_tick(void *arg)
{
    (void)arg;
    session_sweep(util_now_ms());
    loop_timer_add(M.l, MAIN_TICK_MS, main_tick, NULL);
}

static void
main_stop_check(void)
{
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

static void
main_signal(int signo, void *arg)
{
    (void)arg;
    if (signo == SIGHUP) {
        log_info(NULL, "SIGHUP: configuration reload is not implemented yet; ignored");
        return;
    }
    if (M.stopping)
        return;
    M.stopping = true;
    log_info(NULL, "%s: shutting down (%zu sessions)", signo == SIGTERM ? "SIGTERM" : "SIGINT",
             session_count());
    uint64_t grace = M.cfg.child_stdin_grace_ms + M.cfg.child_term_grace_ms + 1000;
    M.stop_deadline_ms = util_now_ms() + grace;
    loop_timer_add(M.l, grace, main_deadline, NULL);
    http_quiesce();
    session_close_all("gateway shutting down");
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
    http_run();
    session_reap();
    main_stop_check();
}

static void
main_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
            log_warn(NULL, "cannot raise the open-file limit");
    }
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "check-config", no_argument, NULL, 't' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *path = "conf/gateway.ini";
    bool check = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:tVh", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            path = optarg;
            break;
        case 't':
            check = true;
            break;
        case 'V':
            printf("mcp-gateway %s\n", MCPGW_VERSION);
            return 0;
        case 'h':
            main_usage(stdout);
            return 0;
        default:
            main_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        main_usage(stderr);
        return 2;
    }
    char err[512];
    if (config_load(path, &M.cfg, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (check) {
        printf("%s: configuration OK (%zu servers)\n", path, M.cfg.n_servers);
        config_clear(&M.cfg);
        return 0;
    }
    log_init(M.cfg.log_level, M.cfg.log_json);
    signal(SIGPIPE, SIG_IGN);
    main_raise_nofile();
    M.l = loop_new();
    session_module_init(M.l, &M.cfg);
    if (loop_signal_add(M.l, SIGTERM, main_signal, NULL) == -1
        || loop_signal_add(M.l, SIGINT, main_signal, NULL) == -1
        || loop_signal_add(M.l, SIGHUP, main_signal, NULL) == -1)
        fatal("signalfd");
    if (http_start(M.l, &M.cfg) == -1)
        return 1;
    loop_set_hooks(M.l, main_prepare, main_after, NULL);
    loop_timer_add(M.l, MAIN_TICK_MS, main_tick, NULL);
    log_info(NULL, "mcp-gateway %s started (%zu servers, config %s)", MCPGW_VERSION,
             M.cfg.n_servers, path);
    loop_run(M.l);
    http_stop();
    session_reap();
    session_module_free();
    loop_free(M.l);
    config_clear(&M.cfg);
    log_info(NULL, "stopped");
    return 0;
}
