/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: whole HTTP requests through the real gateway. The target runs the gateway's own
 * modules in-process (config, auth, session, http on libmicrohttpd, the example server as the
 * child), connects to its loopback listener, writes the input, half-closes, and runs the event loop
 * until the gateway closes the connection or 50 ms pass. Every session is then closed and every
 * child reaped before the next input, so inputs do not depend on each other.
 *
 * stateless requests go to a pool of children (pool.h), ended with the sessions after each input.
 *
 * The first byte picks the configuration: even, [auth] mode = bearer (the token "fuzz-token" of
 * principal "fuzzer" with scope "s"; a second server at /scoped requires it) and trace_context =
 * start; odd, mode = none and trace_context = propagate (so every request that reaches a child
 * goes through the trace splice, with the client's traceparent headers and _meta as they come).
 * The rest is the bytes sent. Invariants: the gateway never crashes or trips a sanitizer, every
 * answer it completes starts with "HTTP/1.1 ", and no child outlives its input.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "crypto.h"
#include "fuzz.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "pool.h"
#include "session.h"
#include "upstream.h"

#define HTTP_FUZZ_BUDGET_MS 50
#define HTTP_FUZZ_MAX_INPUT (256 * 1024)

static struct {
    struct loop *l;
    struct config cfg[2]; /* [0] bearer, [1] none */
    struct auth *auth[2];
    int current;
    uint16_t port;
    int client;
    char reply[13];
    size_t reply_len;
    bool peer_closed;
} F = { .client = -1 };

static int
fuzz_prepare(void *arg)
{
    (void)arg;
    return http_prepare();
}

static void
fuzz_after(void *arg)
{
    (void)arg;
    http_run();
    session_reap();
}

static void
fuzz_stop(void *arg)
{
    loop_stop(arg);
}

/* Runs the loop for up to ms, or until done() holds after a turn. */
static void
fuzz_run(uint64_t ms, bool (*done)(void))
{
    uint64_t until = util_now_ms() + ms;
    while (!(done != NULL && done()) && util_now_ms() < until) {
        /* Only this timer stops the loop, so it has fired (and is freed) when loop_run returns. */
        loop_timer_add(F.l, 5, fuzz_stop, F.l);
        loop_run(F.l);
        http_sweep(util_now_ms()); /* main's janitor tick: slow-client deadlines */
    }
}

static void
fuzz_client_readable(int fd, uint32_t events, void *arg)
{
    (void)events;
    (void)arg;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            size_t take = sizeof(F.reply) - F.reply_len;
            if (take > (size_t)n)
                take = (size_t)n;
            memcpy(F.reply + F.reply_len, buf, take);
            F.reply_len += take;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            F.peer_closed = true;
        return;
    }
}

static bool
fuzz_peer_closed(void)
{
    return F.peer_closed;
}

static bool
fuzz_no_children(void)
{
    return upstream_live_count() == 0 && http_idle();
}

/* A port nothing listens on right now (the gateway binds it next). */
static uint16_t
fuzz_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    if (s == -1 || bind(s, (struct sockaddr *)&a, sizeof(a)) == -1
        || getsockname(s, (struct sockaddr *)&a, &len) == -1)
        abort();
    close(s);
    return ntohs(a.sin_port);
}

static void
fuzz_config(int i, const char *tokens_path)
{
    char auth[256], text[2048], err[512];
    const char *trace = i == 0 ? "start" : "propagate";
    if (i == 0)
        snprintf(auth, sizeof(auth),
                 "mode = bearer\npublic_url = https://mcp.fuzz.example\ntokens_file = %s\n",
                 tokens_path);
    else
        snprintf(auth, sizeof(auth), "mode = none\n");
    snprintf(text, sizeof(text),
             "[gateway]\n"
             "listen = 127.0.0.1:%u\n"
             "max_sessions = 4\n"
             "max_body_bytes = 65536\n"
             "stdin_queue_bytes = 131072\n"
             "max_header_bytes = 8192\n"
             "client_header_timeout_ms = 100\n"
             "client_body_timeout_ms = 100\n"
             "shutdown_drain_ms = 0\n"
             "child_stdin_grace_ms = 0\n"
             "child_term_grace_ms = 0\n"
             "legacy_sse = 1\n"
             "trace_context = %s\n"
             "log_level = %s\n"
             "[auth]\n"
             "%s"
             "[server:a]\n"
             "path = /mcp\n"
             "command = %s/tests/fixtures/mcp-example-server\n"
             "[server:b]\n"
             "path = /scoped\n"
             "command = %s/tests/fixtures/mcp-example-server\n"
             "required_scopes = s\n",
             F.port, trace, getenv("HTTP_FUZZ_VERBOSE") != NULL ? "debug" : "error", auth,
             MCPGW_BUILD_ROOT, MCPGW_BUILD_ROOT);
    if (config_load_string(text, "http_fuzz.ini", &F.cfg[i], err, sizeof(err)) == -1
        || (F.auth[i] = auth_new(&F.cfg[i], err, sizeof(err))) == NULL) {
        fprintf(stderr, "http_fuzz: %s\n", err);
        abort();
    }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    log_init(getenv("HTTP_FUZZ_VERBOSE") != NULL ? LOG_DEBUG : LOG_ERROR, LOG_FORMAT_TEXT);
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256("fuzz-token", strlen("fuzz-token"), h);
    char line[128];
    int o = snprintf(line, sizeof(line), "sha256:");
    for (int i = 0; i < CRYPTO_SHA256_LEN; i++)
        o += snprintf(line + o, sizeof(line) - (size_t)o, "%02x", h[i]);
    snprintf(line + o, sizeof(line) - (size_t)o, " fuzzer s\n");
    int fd = memfd_create("tokens", 0);
    /* memfd files are 0777; the gateway refuses files others may write. */
    if (fd != -1 && fchmod(fd, 0600) == -1)
        abort();
    if (fd == -1 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
        abort();
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    F.port = fuzz_free_port();
    fuzz_config(0, path);
    fuzz_config(1, path);
    F.l = loop_new();
    session_module_init(F.l, &F.cfg[0]);
    if (http_start(F.l, &F.cfg[0], F.auth[0]) == -1)
        abort();
    char err[256];
    if (pool_load_key(&F.cfg[0], err, sizeof(err)) == -1)
        abort();
    pool_module_init(F.l, &F.cfg[0]);
    loop_set_hooks(F.l, fuzz_prepare, fuzz_after, NULL);
    return 0;
}

/* Writes data to the client socket, running the gateway whenever the socket is full. */
static void
fuzz_send(const uint8_t *data, size_t size)
{
    size_t off = 0;
    uint64_t until = util_now_ms() + HTTP_FUZZ_BUDGET_MS;
    while (off < size && !F.peer_closed && util_now_ms() < until) {
        ssize_t n = write(F.client, data + off, size - off);
        if (n > 0)
            off += (size_t)n;
        else if (n == -1 && errno != EAGAIN && errno != EINTR)
            break;
        else
            fuzz_run(5, fuzz_peer_closed);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (F.l == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size == 0 || size > HTTP_FUZZ_MAX_INPUT)
        return 0;
    int want = data[0] & 1;
    if (want != F.current) {
        F.current = want;
        session_set_config(&F.cfg[want]);
        http_set_config(&F.cfg[want], F.auth[want]);
    }
    F.client = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(F.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (F.client == -1
        || (connect(F.client, (struct sockaddr *)&a, sizeof(a)) == -1 && errno != EINPROGRESS))
        abort();
    F.reply_len = 0;
    F.peer_closed = false;
    struct loop_watch *w = loop_watch_add(F.l, F.client, EPOLLIN, fuzz_client_readable, NULL);
    fuzz_send(data + 1, size - 1);
    shutdown(F.client, SHUT_WR);
    fuzz_run(HTTP_FUZZ_BUDGET_MS, fuzz_peer_closed);
    loop_watch_del(w);
    close(F.client);
    F.client = -1;
    if (getenv("HTTP_FUZZ_VERBOSE") != NULL) /* shows that the seeds get answers */
        fprintf(stderr, "http_fuzz: reply starts %.*s\n", (int)F.reply_len, F.reply);
    if (F.reply_len >= 9)
        FUZZ_CHECK(memcmp(F.reply, "HTTP/1.1 ", 9) == 0, "a reply that is not HTTP/1.1: %.9s",
                   F.reply);
    session_close_all(SESSION_END_SHUTDOWN);
    pool_close_all();
    fuzz_run(2000, fuzz_no_children);
    FUZZ_CHECK(upstream_live_count() == 0, "a child outlived its input");
    /* The next input starts with no pool (a stateless request made one, with children). */
    pool_module_free();
    pool_module_init(F.l, &F.cfg[F.current]);
    auth_sweep(&F.cfg[F.current].auth, util_now_ms());
    return 0;
}
