/* SPDX-License-Identifier: MIT */
/*
 * pool: stateless requests through a pool of fake children (fake_upstream.c) with a fake clock
 * (this binary's sources are built with -Dclock_gettime=test_clock_gettime: only the test moves
 * time), the pool's real code, the real relay, loop, streams and scanner. Through pool.h, and
 * pool_int.h where a test reads a child's table. The cases are the lifetimes examples once missed:
 * an answered call's timer, a round past stream_queue_bytes, a slow reader on a shared child, a
 * retired pool's queue, the fence after a cancel. tests/fuzz/relay_fuzz.c drives the same code
 * through random interleavings.
 */
#include <sys/stat.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "auth.h"
#include "config.h"
#include "fake_clock.h"
#include "fake_upstream.h"
#include "jsonrpc.h"
#include "keyring.h"
#include "log.h"
#include "loop.h"
#include "pool.h"
#include "session_seal.h"
#include "src/pool/pool_int.h"
#include "stream.h"
#include "util.h"

TestSuite(pool, .timeout = 30);

/* --- the loop (fake_clock.c moves time) ------------------------------------------------------ */

static struct loop *L;
static struct config *cfgs[4];
static size_t ncfg;

/* Time passes by ms, a second a turn, with the pool's sweep each second (main.c's tick). */
static void
advance(uint64_t ms)
{
    while (ms > 0) {
        uint64_t step = ms < 1000 ? ms : 1000;
        fake_now_us += step * 1000;
        ms -= step;
        fake_settle(L);
        pool_sweep(util_now_ms());
    }
    fake_settle(L);
}

static struct config *
load(const char *server_keys)
{
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[gateway]\nlisten = 127.0.0.1:0\nstream_queue_bytes = 65536\n"
             "[server:a]\npath = /mcp\ncommand = /bin/true\n%s%s\n",
             strstr(server_keys, "era = ") != NULL ? "" : "era = legacy\n", server_keys);
    struct config *cfg = xcalloc(1, sizeof(*cfg));
    char err[256];
    cr_assert_eq(config_load_string(ini, "test.ini", cfg, err, sizeof err), 0, "%s", err);
    cfgs[ncfg++] = cfg;
    return cfg;
}

static void
setup_with(const char *server_keys)
{
    log_init(LOG_ERROR, LOG_FORMAT_TEXT);
    L = loop_new();
    ncfg = 0;
    struct config *cfg = load(server_keys);
    pool_module_init(L, cfg);
    char err[256];
    cr_assert_eq(pool_load_key(cfg, err, sizeof err), 0, "%s", err);
}

static void
teardown(void)
{
    pool_close_all();
    advance(60000);
    pool_module_free();
    loop_free(L);
    fake_upstream_free_all();
    for (size_t i = 0; i < ncfg; i++) {
        config_clear(cfgs[i]);
        free(cfgs[i]);
    }
}

/* --- client and child ------------------------------------------------------------------------ */

struct call {
    struct stream *st;
    char got[1 << 20]; /* what the client read */
    size_t len;
};

static struct stream *
request_as(const char *principal, struct auth_claims *claims, const char *body,
           enum pool_status *status)
{
    char *copy = xstrdup(body);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(copy, strlen(copy), &info, NULL), JSONRPC_OK, "%s", body);
    struct pool_meta meta = { .rev = revision_newest(REVISION_STATELESS),
                              .log_level = -1,
                              .principal = principal,
                              .claims = claims };
    if (info.meta_log_level.len != 0) /* as http_stateless.c reads it */
        meta.log_level = pool_log_level(copy, info.meta_log_level);
    *status = POOL_OK;
    struct stream *st =
        pool_request(&cfgs[ncfg - 1]->servers[0], copy, strlen(copy), &info, &meta, status);
    free(copy);
    fake_settle(L);
    return st;
}

static struct stream *
request(const char *body, enum pool_status *status)
{
    return request_as("alice", NULL, body, status);
}

static void
call_start(struct call *c, const char *body)
{
    enum pool_status status;
    c->len = 0;
    c->st = request(body, &status);
    cr_assert_not_null(c->st, "refused: %s", relay_status_text(status));
}

/* The client reads what its stream holds now. */
static void
call_read(struct call *c)
{
    size_t n;
    while (c->len < sizeof c->got - 1
           && (n = stream_read(c->st, c->got + c->len, sizeof c->got - 1 - c->len)) > 0)
        c->len += n;
    c->got[c->len] = '\0';
    fake_settle(L);
}

static void
call_done(struct call *c)
{
    call_read(c);
    pool_stream_detach(c->st);
    fake_settle(L);
}

/* The pool's one child (the newest fake), its start answered: it is ready. */
static struct upstream *
child_ready(void)
{
    struct upstream *u = fake_upstream_last();
    cr_assert_not_null(u, "no child started");
    size_t len;
    const char *init = fake_upstream_sent(u, 0, &len);
    cr_assert(strstr(init, "\"method\":\"initialize\"") != NULL, "%s", init);
    uint64_t id = strtoull(strstr(init, "\"id\":") + 5, NULL, 10);
    char line[256];
    snprintf(line, sizeof line,
             "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"protocolVersion\":"
             "\"2025-06-18\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"f\","
             "\"version\":\"1\"}}}",
             id);
    cr_assert(fake_upstream_line(u, line));
    fake_settle(L);
    return u;
}

/* The id the child saw on the last message it read that names method. */
static uint64_t
child_got(struct upstream *u, const char *method)
{
    for (size_t i = fake_upstream_sent_count(u); i-- > 0;) {
        size_t len;
        const char *m = fake_upstream_sent(u, i, &len);
        if (strstr(m, method) != NULL && strstr(m, "\"id\":") != NULL)
            return strtoull(strstr(m, "\"id\":") + 5, NULL, 10);
    }
    cr_assert_fail("the child read no %s", method);
    return 0;
}

static size_t
child_count(struct upstream *u, const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < fake_upstream_sent_count(u); i++) {
        size_t len;
        n += strstr(fake_upstream_sent(u, i, &len), needle) != NULL;
    }
    return n;
}

__attribute__((format(printf, 2, 3))) static void
child_says(struct upstream *u, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cr_assert(fake_upstream_line(u, line), "%s", line);
    fake_settle(L);
}

#define CALL(id, name, caps)                                    \
    "{\"jsonrpc\":\"2.0\",\"id\":\"" id                         \
    "\",\"method\":\"tools/call\",\"params\":{\"name\":\"" name \
    "\",\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":{" caps "}}}}"

/* --- the cases ------------------------------------------------------------------------------ */

static void
setup_timed(void)
{
    setup_with("request_timeout_ms = 1000\npool_max_children = 1");
}

Test(pool, answered_call_leaves_no_timer, .init = setup_timed, .fini = teardown)
{
    static struct call c;
    call_start(&c, CALL("a", "echo", ""));
    struct upstream *u = child_ready();
    uint64_t id = child_got(u, "tools/call");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&c);
    cr_assert(strstr(c.got, "\"id\":\"a\"") != NULL, "%s", c.got);
    advance(5000); /* past its deadline: a timer left on its freed entry would fire now */
    cr_assert_eq(child_count(u, "notifications/cancelled"), 0, "an answered call was cancelled");
    cr_assert_eq(pool_inflight(), 0);
}

Test(pool, unanswered_call_times_out_once, .init = setup_timed, .fini = teardown)
{
    static struct call c;
    call_start(&c, CALL("t", "slow", ""));
    struct upstream *u = child_ready();
    advance(1500);
    call_done(&c);
    cr_assert(strstr(c.got, "timed out") != NULL, "%s", c.got);
    cr_assert_eq(child_count(u, "notifications/cancelled"), 1);
    advance(5000);
    cr_assert_eq(child_count(u, "notifications/cancelled"), 1, "cancelled once");
}

#define PROGRESS(token)                                                                            \
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":" \
    token ",\"progress\":1}}"

/*
 * The pool child's side of its relay (pool_relay_ops): progress names its request by the minted id
 * the child saw as its token and reaches that call once, with the client's token; progress that
 * names no request is unattributed; once the call timed out its progress and its answer are late,
 * and reach no stream; once the child is retired, nothing of its reaches the pool, not even its end.
 */
Test(pool, relay_calls_the_pool_child_once_per_message, .init = setup_timed, .fini = teardown)
{
    static struct call c;
    call_start(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"tools/call\",\"params\":{"
                   "\"name\":\"slow\",\"_meta\":{\"progressToken\":\"mine\"}}}");
    struct upstream *u = child_ready();
    uint64_t id = child_got(u, "tools/call");
    const struct pool_counters *k = &pools.pools->row->ctr;
    child_says(u, PROGRESS("%" PRIu64), id);
    child_says(u, PROGRESS("%" PRIu64), id + 1000);
    call_read(&c);
    cr_assert_not_null(strstr(c.got, "\"progressToken\":\"mine\""), "%s", c.got);
    cr_assert_eq(strstr(strstr(c.got, "progressToken") + 1, "progressToken"), NULL,
                 "one progress event: %s", c.got);
    cr_assert_eq(k->unattributed, 1);
    advance(1500); /* timed out: cancelled at the child, answered with an error */
    child_says(u, PROGRESS("%" PRIu64), id);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    cr_assert_eq(k->late_dropped, 2, "its progress and its answer came late");
    call_done(&c);
    cr_assert_not_null(strstr(c.got, "timed out"), "%s", c.got);
    cr_assert_null(strstr(c.got, "\"result\""), "a late answer reached the client: %s", c.got);
    struct pool_child *child = pools.pools->children;
    uint64_t crashed = k->crashed;
    pool_child_retire(child, "stopped by the test", false);
    cr_assert(child->r.ended, "the relay ends with its child");
    char line[128];
    int n = snprintf(line, sizeof line, PROGRESS("%" PRIu64), id);
    relay_line(&child->r, line, (size_t)n);
    relay_gone(&child->r, "child exited");
    cr_assert_eq(k->late_dropped, 2, "a line after the child's retirement");
    cr_assert_eq(k->crashed, crashed, "the end of a retired child counted");
}

static void
setup_small(void)
{
    setup_with("pool_max_children = 1\npool_child_max_inflight = 4");
}

Test(pool, round_past_the_ceiling_then_its_retry, .init = setup_small, .fini = teardown)
{
    static struct call c, retry;
    call_start(&c, CALL("e", "elicit", "\"elicitation\":{}"));
    struct upstream *u = child_ready();
    /* The question alone is past stream_queue_bytes (64 KiB). */
    size_t big = 100000;
    char *line = xmalloc(big + 256);
    int n = snprintf(line, 256,
                     "{\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"method\":\"elicitation/create\","
                     "\"params\":{\"message\":\"");
    memset(line + n, 'x', big);
    snprintf(line + n + big, 256, "\"}}");
    cr_assert(fake_upstream_line(u, line));
    free(line);
    fake_settle(L);
    cr_assert_not(fake_upstream_paused(u), "a shared child is never paused");
    call_done(&c);
    const char *rs = strstr(c.got, "\"requestState\":\"");
    cr_assert_not_null(rs, "an input round: %.200s", c.got);
    char state[256];
    snprintf(state, sizeof state, "%.*s", (int)strcspn(rs + 16, "\""), rs + 16);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":\"e2\",\"method\":\"tools/call\",\"params\":{"
             "\"name\":\"elicit\",\"inputResponses\":{\"r1\":{\"action\":\"accept\"}},"
             "\"requestState\":\"%s\",\"_meta\":{\"io.modelcontextprotocol/"
             "clientCapabilities\":{\"elicitation\":{}}}}}",
             state);
    call_start(&retry, body);
    cr_assert_eq(child_count(u, "\"id\":\"q1\",\"result\""), 1, "the answer reached the child");
    uint64_t id = child_got(u, "tools/call");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&retry);
    cr_assert(strstr(retry.got, "\"id\":\"e2\"") != NULL, "the retry's answer: %s", retry.got);
}

Test(pool, slow_reader_does_not_pause_a_shared_child, .init = setup_small, .fini = teardown)
{
    static struct call slow, other;
    call_start(&slow, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"flood\",\"_meta\":{\"io.modelcontextprotocol/logLevel\":"
                      "\"debug\"}}}");
    struct upstream *u = child_ready();
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{"
                     "\"level\":\"info\",\"data\":\"");
    memset(line + n, 'y', 1500);
    snprintf(line + n + 1500, sizeof line - (size_t)n - 1500, "\"}}");
    for (int i = 0; i < 200; i++) /* 300 KB for a client that reads nothing */
        cr_assert(fake_upstream_line(u, line));
    fake_settle(L);
    cr_assert_not(fake_upstream_paused(u));
    cr_assert_leq(stream_pending(slow.st), 65536 + sizeof line,
                  "notifications past the ceiling dropped");
    call_start(&other, CALL("o", "echo", ""));
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}",
               child_got(u, "\"name\":\"echo\""));
    call_done(&other);
    cr_assert(strstr(other.got, "\"id\":\"o\"") != NULL, "%s", other.got);
    call_done(&slow);
}

Test(pool, retired_queue_ends_with_an_error, .init = setup_small, .fini = teardown)
{
    static struct call c;
    call_start(&c, CALL("q", "echo", "")); /* queued: the first child is starting */
    struct upstream *u = fake_upstream_last();
    /* SIGHUP that changes the server: the starting child's pool is retired. */
    struct config *next =
        load("pool_max_children = 1\npool_child_max_inflight = 4\ncache_ttl_ms = 1");
    pool_set_config(next);
    fake_upstream_gone(u, "exited");
    fake_settle(L);
    advance(2000);
    call_done(&c);
    cr_assert(strstr(c.got, "\"id\":\"q\"") != NULL && strstr(c.got, "\"error\"") != NULL,
              "the queued call is answered with an error: %s", c.got);
    cr_assert_eq(pool_inflight(), 0);
}

Test(pool, unchanged_server_keeps_its_pool_across_a_reload, .init = setup_small, .fini = teardown)
{
    static struct call c, d;
    call_start(&c, CALL("k", "echo", ""));
    struct upstream *u = child_ready();
    uint64_t id = child_got(u, "tools/call");
    size_t children = upstream_live_count();
    /* SIGHUP with the same section: the pool, its child and the call in flight stay. */
    pool_set_config(load("pool_max_children = 1\npool_child_max_inflight = 4"));
    fake_settle(L);
    advance(2000);
    cr_assert_eq(upstream_live_count(), children, "no child started");
    cr_assert_not(fake_upstream_closed(u), "the child goes on");
    cr_assert_eq(pool_inflight(), 1);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&c);
    cr_assert(strstr(c.got, "\"id\":\"k\",\"result\"") != NULL, "%s", c.got);
    /* A new request of the new configuration goes to the same child. */
    call_start(&d, CALL("n", "echo", ""));
    id = child_got(u, "tools/call");
    cr_assert_eq(upstream_live_count(), children);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&d);
    cr_assert(strstr(d.got, "\"id\":\"n\",\"result\"") != NULL, "%s", d.got);
    /* The section changes: the pool is retired, its idle child stops. */
    pool_set_config(load("pool_max_children = 2\npool_child_max_inflight = 4"));
    advance(2000);
    cr_assert(fake_upstream_closed(u), "the changed server's child stops once idle");
}

/*
 * A listen queued for a starting child, whose pool a reload then retires: once the child is ready
 * the listen is not opened on the retired pool (it would keep it for as long as its client stays)
 * but ends with the error that says to listen again, and the pool ends.
 */
Test(pool, listen_queued_in_a_retired_pool_ends_and_the_pool_goes, .init = setup_small,
     .fini = teardown)
{
    static struct call l;
    call_start(&l, "{\"jsonrpc\":\"2.0\",\"id\":\"L\",\"method\":\"subscriptions/listen\","
                   "\"params\":{\"notifications\":{\"toolsListChanged\":true},\"_meta\":{}}}");
    cr_assert_eq(pools.pools->queued, 1, "the listen waits for the starting child");
    pool_set_config(load("pool_max_children = 1\npool_child_max_inflight = 4\ncache_ttl_ms = 1"));
    struct upstream *u = child_ready();
    call_read(&l);
    cr_assert(strstr(l.got, "\"id\":\"L\",\"error\"") != NULL, "%s", l.got);
    cr_assert(strstr(l.got, "configuration reloaded: send subscriptions/listen again") != NULL,
              "%s", l.got);
    cr_assert(stream_ended(l.st));
    call_done(&l);
    advance(2000);
    cr_assert(fake_upstream_closed(u), "the retired pool's child stops");
    cr_assert_null(pools.pools, "the retired pool is freed");
}

Test(pool, a_request_waits_for_the_fence, .init = setup_small, .fini = teardown)
{
    static struct call a, b;
    call_start(&a, CALL("a", "elicit", "\"elicitation\":{}"));
    struct upstream *u = child_ready();
    pool_stream_detach(a.st); /* the client leaves: a cancel, then the fence's ping */
    fake_settle(L);
    cr_assert_eq(child_count(u, "notifications/cancelled"), 1);
    uint64_t ping = child_got(u, "\"method\":\"ping\"");
    size_t before = fake_upstream_sent_count(u);
    call_start(&b, CALL("b", "echo", ""));
    cr_assert_eq(fake_upstream_sent_count(u), before, "no request reaches a fenced child");
    /* A question now is the cancelled call's (or ambiguous): refused to the child. */
    child_says(u, "%s",
               "{\"jsonrpc\":\"2.0\",\"id\":\"late-q\",\"method\":\"elicitation/create\"}");
    cr_assert_eq(child_count(u, "\"id\":\"late-q\",\"error\""), 1);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", ping);
    uint64_t id = child_got(u, "\"name\":\"echo\"");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&b);
    cr_assert(strstr(b.got, "\"id\":\"b\"") != NULL, "%s", b.got);
}

Test(pool, what_the_fence_left_queued_takes_the_next_free_slot, .init = setup_small,
     .fini = teardown)
{
    /*
     * Two calls stay in flight on the one child (room for four); a third is cancelled, and the
     * fence goes out. Four requests queue for the fenced child; when the ping comes back it has
     * room for two. The other two wait for room, and the first answer makes it.
     */
    static struct call x1, x2, y, q[4];
    call_start(&x1, CALL("x1", "slow", ""));
    struct upstream *u = child_ready();
    call_start(&x2, CALL("x2", "slow", ""));
    call_start(&y, CALL("y", "slow", ""));
    pool_stream_detach(y.st);
    fake_settle(L);
    uint64_t ping = child_got(u, "\"method\":\"ping\"");
    static const char *const ids[] = { "q0", "q1", "q2", "q3" };
    char body[512];
    for (size_t i = 0; i < 4; i++) {
        snprintf(body, sizeof body, CALL("%s", "echo", ""), ids[i]);
        call_start(&q[i], body);
    }
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 0, "no request reaches a fenced child");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", ping);
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 2, "the child's room: two of the four");
    /* x1's answer (the first slow call the child read) frees a slot: the next queued one. */
    for (size_t i = 0; i < fake_upstream_sent_count(u); i++) {
        size_t len;
        const char *m = fake_upstream_sent(u, i, &len);
        if (strstr(m, "\"name\":\"slow\"") != NULL) {
            uint64_t id = strtoull(strstr(m, "\"id\":") + 5, NULL, 10);
            child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}",
                       id);
            break;
        }
    }
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 3,
                 "a queued request waits while the child has room");
    call_done(&x1);
    cr_assert(strstr(x1.got, "\"id\":\"x1\"") != NULL, "%s", x1.got);
    call_done(&x2);
    for (size_t i = 0; i < 4; i++)
        call_done(&q[i]);
}

static void
setup_auto_one(void)
{
    setup_with("era = auto\npool_max_children = 2\npool_warm_children = 2\n"
               "pool_child_max_inflight = 1");
}

Test(pool, a_cancel_on_a_stateless_child_frees_its_slot_for_the_queue, .init = setup_auto_one,
     .fini = teardown)
{
    /*
     * Two calls queue while the two children's probes are out; the newest turns out stateless
     * (no fence follows a cancel there) with one slot: the first call takes it, the second waits
     * for the other child. The client drops the first: the cancel frees the slot, and the queued
     * call goes to it at the end of that turn, not at the next sweep, when the child writes
     * again, or when the other child is ready.
     */
    static struct call a, b;
    call_start(&a, CALL("a", "slow", ""));
    call_start(&b, CALL("b", "echo", ""));
    struct upstream *u = fake_upstream_last();
    cr_assert_not_null(u, "no child started");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"supportedVersions\":"
               "[\"2026-07-28\"],\"capabilities\":{}}}",
               child_got(u, "server/discover"));
    cr_assert_eq(child_count(u, "\"name\":\"slow\""), 1);
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 0, "one slot: b waits");
    pool_stream_detach(a.st);
    fake_settle(L);
    cr_assert_eq(child_count(u, "notifications/cancelled"), 1, "the cancel reached the child");
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 1, "b took the freed slot");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}",
               child_got(u, "\"name\":\"echo\""));
    call_done(&b);
    cr_assert(strstr(b.got, "\"id\":\"b\"") != NULL, "%s", b.got);
}

Test(pool, a_cancel_behind_a_full_stdin_still_fences, .init = setup_small, .fini = teardown)
{
    /*
     * The child's stdin queue is full (clients' requests filled it) when a call on it is cancelled:
     * the cancel and the fence's ping must still be queued, behind what fills it, or the child,
     * fenced with no ping out, would take no request again (with one child: none is served).
     */
    static struct call a, b;
    call_start(&a, CALL("a", "elicit", "\"elicitation\":{}"));
    struct upstream *u = child_ready();
    fake_upstream_set_full(u, true);
    pool_stream_detach(a.st);
    fake_settle(L);
    call_start(&b, CALL("b", "echo", "")); /* waits for the fence */
    cr_assert_eq(child_count(u, "\"name\":\"echo\""), 0, "no request reaches a fenced child");
    fake_upstream_set_full(u, false); /* the child reads on */
    fake_settle(L);
    cr_assert_eq(child_count(u, "notifications/cancelled"), 1, "the cancel waited in the queue");
    uint64_t ping = child_got(u, "\"method\":\"ping\"");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", ping);
    uint64_t id = child_got(u, "\"name\":\"echo\"");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&b);
    cr_assert(strstr(b.got, "\"id\":\"b\"") != NULL && strstr(b.got, "\"result\"") != NULL, "%s",
              b.got);
}

static void
setup_idle(void)
{
    setup_with("pool_max_children = 1\npool_warm_children = 0\npool_idle_timeout_s = 1");
}

Test(pool, a_death_seen_before_the_idle_stop_is_a_failed_child, .init = setup_idle,
     .fini = teardown)
{
    /*
     * The child served a call, then idled past pool_idle_timeout_s and died (killed by someone
     * else). Its exit was seen in the same loop turn as the sweep that would stop it for
     * idleness, before its end was reported (a deferred call): the gateway saw it die, so it is a
     * failed child, counted once, not an idle stop that swallows the death.
     */
    static struct call c;
    call_start(&c, CALL("c", "echo", ""));
    struct upstream *u = child_ready();
    uint64_t id = child_got(u, "\"name\":\"echo\"");
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
    call_done(&c);
    fake_now_us += 1500 * 1000; /* idle past the timeout; no sweep yet */
    fake_upstream_gone(u, "child exited");
    pool_sweep(util_now_ms()); /* the same turn: the sweep runs before the deferred report */
    fake_settle(L);
    const struct pool_server *row = pools.pools->row;
    cr_assert_eq(row->ctr.crashed, 1, "the death is one failed child");
    cr_assert_eq(row->ctr.idle_stopped, 0, "not an idle stop");
    cr_assert_eq(fake_upstream_gone_calls(u), 1, "its end reported to the pool");
}

/* --- per-principal credentials: a pool of each principal's children -------------------------- */

static void
setup_principals(void)
{
    setup_with("pool_max_children = 2\npool_child_max_inflight = 4\npool_start_timeout_ms = 3000\n"
               "env_from_claims = TOKEN=tok\n"
               "[auth]\nmode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\n");
}

/* What a principal's verified token's claims give TOKEN (auth.h's shape). */
struct claims {
    struct auth_claims c;
    char *env[2];
    char var[64];
};

static struct auth_claims *
claims_of(struct claims *k, const char *value)
{
    snprintf(k->var, sizeof k->var, "TOKEN=%s", value);
    k->env[0] = k->var;
    k->env[1] = NULL;
    k->c.refs = 100; /* the test's: never freed by the pool */
    k->c.why = NULL;
    k->c.env = k->env;
    return &k->c;
}

static void
call_as(struct call *c, const char *principal, struct auth_claims *claims, const char *body)
{
    enum pool_status status;
    c->len = 0;
    c->st = request_as(principal, claims, body, &status);
    cr_assert_not_null(c->st, "%s refused: %s", principal, relay_status_text(status));
}

/* The child answers the last tools/call named name it read. */
static void
answer(struct upstream *u, const char *name)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"name\":\"%s\"", name);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}",
               child_got(u, needle));
}

Test(pool, each_principal_has_its_own_children_least_recently_used_stopped_first,
     .init = setup_principals, .fini = teardown)
{
    static struct claims ka, kb, kc;
    struct auth_claims *a = claims_of(&ka, "alice-secret"), *b = claims_of(&kb, "bob-secret"),
                       *cc = claims_of(&kc, "carol-secret");
    static struct call a1, b1, a2, c1;
    call_as(&a1, "sub:alice", a, CALL("a1", "alice1", ""));
    struct upstream *ua = child_ready();
    cr_assert_str_eq(fake_upstream_env(ua, "TOKEN"), "alice-secret");
    call_as(&b1, "sub:bob", b, CALL("b1", "bob1", ""));
    struct upstream *ub = child_ready();
    cr_assert_neq(ua, ub, "bob's call starts a child of his own, alice's has room");
    cr_assert_str_eq(fake_upstream_env(ub, "TOKEN"), "bob-secret");
    call_as(&a2, "sub:alice", a, CALL("a2", "alice2", ""));
    cr_assert_eq(child_count(ua, "\"name\":\"alice2\""), 1, "alice's call on alice's child");
    cr_assert_eq(child_count(ub, "alice"), 0, "nothing of alice's reaches bob's child");
    cr_assert_eq(child_count(ua, "bob"), 0, "nothing of bob's reaches alice's child");
    answer(ua, "alice1");
    answer(ua, "alice2");
    answer(ub, "bob1");
    call_done(&a1);
    call_done(&a2);
    call_done(&b1);
    cr_assert(strstr(a2.got, "\"id\":\"a2\",\"result\"") != NULL, "%s", a2.got);
    /* At the bound (2), both idle: carol's child takes the room of the least recently used. */
    advance(1000);
    call_as(&c1, "sub:carol", cc, CALL("c1", "carol1", ""));
    cr_assert(fake_upstream_closed(ub), "bob's child (used before alice's last call) stopped");
    cr_assert_not(fake_upstream_closed(ua), "alice's child stays");
    struct upstream *uc = child_ready();
    cr_assert_str_eq(fake_upstream_env(uc, "TOKEN"), "carol-secret");
    cr_assert_eq(child_count(uc, "\"name\":\"carol1\""), 1);
    cr_assert_eq(child_count(ua, "carol"), 0);
    answer(uc, "carol1");
    call_done(&c1);
    cr_assert_eq(pools.pools->row->ctr.principal_stopped, 1);
}

Test(pool, a_principal_waits_for_an_idle_child_of_another_or_times_out, .init = setup_principals,
     .fini = teardown)
{
    static struct claims ka, kb, kc;
    struct auth_claims *a = claims_of(&ka, "alice-secret"), *b = claims_of(&kb, "bob-secret"),
                       *cc = claims_of(&kc, "carol-secret");
    static struct call a1, c1, b1, b2;
    call_as(&a1, "sub:alice", a, CALL("a1", "alice1", ""));
    struct upstream *ua = child_ready();
    call_as(&c1, "sub:carol", cc, CALL("c1", "carol1", ""));
    struct upstream *uc = child_ready();
    /* Both children busy at the bound: bob's call waits, no child of another serves it. */
    size_t live = upstream_live_count();
    call_as(&b1, "sub:bob", b, CALL("b1", "bob1", ""));
    cr_assert_eq(upstream_live_count(), live, "no child past pool_max_children");
    cr_assert_eq(child_count(ua, "bob"), 0);
    cr_assert_eq(child_count(uc, "bob"), 0);
    /* Alice's answer leaves her child idle: it stops, and bob's own starts for his call. */
    answer(ua, "alice1");
    call_done(&a1);
    cr_assert(fake_upstream_closed(ua), "alice's idle child made room");
    struct upstream *ub = child_ready();
    cr_assert_str_eq(fake_upstream_env(ub, "TOKEN"), "bob-secret");
    cr_assert_eq(child_count(ub, "\"name\":\"bob1\""), 1, "bob's call on bob's child");
    /* Now carol and bob are busy: alice waits, past pool_start_timeout_ms: an error. */
    static struct call a2;
    call_as(&a2, "sub:alice", a, CALL("a2", "alice2", ""));
    advance(5000);
    call_done(&a2);
    cr_assert(strstr(a2.got, "busy with other principals") != NULL, "%s", a2.got);
    cr_assert_eq(child_count(ub, "alice"), 0);
    cr_assert_eq(child_count(uc, "alice"), 0);
    /* A token whose claims changed is served by children started with the new values. */
    static struct claims kb2;
    answer(ub, "bob1");
    call_done(&b1);
    call_as(&b2, "sub:bob", claims_of(&kb2, "bob-rotated"), CALL("b2", "bob2", ""));
    struct upstream *ub2 = child_ready();
    cr_assert_neq(ub2, ub);
    cr_assert_str_eq(fake_upstream_env(ub2, "TOKEN"), "bob-rotated");
    cr_assert_eq(child_count(ub, "bob2"), 0);
    answer(ub2, "bob2");
    call_done(&b2);
    answer(uc, "carol1");
    call_done(&c1);
}

Test(pool, a_principal_without_credentials_gets_no_child, .init = setup_principals,
     .fini = teardown)
{
    static struct claims k;
    struct auth_claims *bad = claims_of(&k, "x");
    static char why[] = "the token's claim tok (for TOKEN) is missing";
    bad->why = why;
    size_t live = upstream_live_count();
    enum pool_status status;
    char *body = xstrdup(CALL("d", "dave", ""));
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(body, strlen(body), &info, NULL), JSONRPC_OK);
    struct pool_meta meta = { .rev = revision_newest(REVISION_STATELESS),
                              .log_level = -1,
                              .principal = "sub:dave",
                              .claims = bad };
    cr_assert_null(pool_request(&cfgs[0]->servers[0], body, strlen(body), &info, &meta, &status));
    free(body);
    cr_assert_eq(status, POOL_E_CREDENTIALS);
    cr_assert(strstr(meta.why, "claim tok") != NULL, "%s", meta.why);
    cr_assert_eq(upstream_live_count(), live, "no child");
}

Test(pool, no_child_is_stopped_for_a_principal_that_could_not_start_one, .init = setup_principals,
     .fini = teardown)
{
    static struct claims ka, kb;
    static struct call a1, b1;
    call_as(&a1, "sub:alice", claims_of(&ka, "alice-secret"), CALL("a1", "alice1", ""));
    struct upstream *ua = child_ready();
    call_as(&b1, "sub:bob", claims_of(&kb, "bob-secret"), CALL("b1", "bob1", ""));
    struct upstream *ub = child_ready();
    answer(ua, "alice1");
    answer(ub, "bob1");
    call_done(&a1);
    call_done(&b1);
    /* At the bound, both idle: a request with no claims for env_from_claims stops neither. */
    enum pool_status status;
    cr_assert_null(request_as("sub:dave", NULL, CALL("d", "dave", ""), &status));
    cr_assert_eq(status, POOL_E_CREDENTIALS);
    cr_assert_not(fake_upstream_closed(ua), "alice's idle child stays");
    cr_assert_not(fake_upstream_closed(ub), "bob's idle child stays");
    cr_assert_eq(pools.pools->row->ctr.principal_stopped, 0);
}

/* --- token_exchange: a principal's children hold the token exchanged for that principal ------- */

static char xdir[64];

static void
setup_exchange(void)
{
    snprintf(xdir, sizeof xdir, "/tmp/mcpgw-unit-xchg-XXXXXX");
    cr_assert_not_null(mkdtemp(xdir));
    setenv("TMPDIR", xdir, 1);
    char secret[128], keys[1024];
    snprintf(secret, sizeof secret, "%s/secret", xdir);
    FILE *f = fopen(secret, "w");
    cr_assert_not_null(f);
    fputs("s3cret\n", f);
    fclose(f);
    chmod(secret, 0600);
    snprintf(keys, sizeof keys,
             "pool_max_children = 1\npool_child_max_inflight = 4\npool_start_timeout_ms = 3000\n"
             "token_exchange = on\ntoken_exchange_resource = https://api.example\n"
             "token_exchange_env = DOWN_TOKEN\ntoken_exchange_client_id = gw\n"
             "token_exchange_client_secret_file = %s\n"
             "token_exchange_endpoint = https://i.example/token\n"
             "[auth]\nmode = jwt\npublic_url = https://a\nissuer = https://i.example\n"
             "jwks_file = k\n",
             secret);
    setup_with(keys);
}

static void
teardown_exchange(void)
{
    teardown();
    char secret[128];
    snprintf(secret, sizeof secret, "%s/secret", xdir);
    unlink(secret);
    cr_assert_eq(rmdir(xdir), 0, "every token directory removed: %s", xdir);
    unsetenv("TMPDIR");
}

static struct stream *
request_exchanged(const char *principal, const char *token, const char *body,
                  enum pool_status *status, const char **why)
{
    char *copy = xstrdup(body);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(copy, strlen(copy), &info, NULL), JSONRPC_OK, "%s", body);
    struct auth_exchanged *x = NULL;
    if (token != NULL) {
        x = xcalloc(1, sizeof(*x));
        x->status = AUTH_EXCHANGE_OK;
        x->token = xstrdup(token);
        x->len = strlen(token);
        x->expires_in_s = -1;
    }
    struct pool_meta meta = { .rev = revision_newest(REVISION_STATELESS),
                              .log_level = -1,
                              .principal = principal,
                              .authorization = "Bearer subject",
                              .xres = x };
    *status = POOL_OK;
    struct stream *st =
        pool_request(&cfgs[ncfg - 1]->servers[0], copy, strlen(copy), &info, &meta, status);
    *why = meta.why;
    auth_exchanged_free(x);
    free(copy);
    fake_settle(L);
    return st;
}

/* What the child's DOWN_TOKEN_FILE holds. */
static void
file_of(struct upstream *u, char *out, size_t cap)
{
    const char *path = fake_upstream_env(u, "DOWN_TOKEN_FILE");
    cr_assert_not_null(path);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "%s", path);
    cr_assert_eq(sb.st_mode & 0777, 0600, "the file: 0600");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

/* Child u holds token, in its variable and in the file its DOWN_TOKEN_FILE names. */
static void
holds_token(struct upstream *u, const char *token)
{
    char got[256];
    cr_assert_str_eq(fake_upstream_env(u, "DOWN_TOKEN"), token);
    file_of(u, got, sizeof got);
    cr_assert_str_eq(got, token);
}

Test(pool, no_token_exchange_child_starts_without_its_principals_token, .init = setup_exchange,
     .fini = teardown_exchange)
{
    size_t live = upstream_live_count();
    enum pool_status status;
    const char *why = NULL;
    cr_assert_null(request_exchanged("sub:alice", NULL, CALL("a", "alice", ""), &status, &why));
    cr_assert_eq(status, POOL_E_CREDENTIALS_BAD);
    cr_assert(why != NULL && strstr(why, "no token was exchanged") != NULL, "%s", why);
    cr_assert_eq(upstream_live_count(), live, "no child");
}

Test(pool, each_principals_child_holds_its_own_exchanged_token, .init = setup_exchange,
     .fini = teardown_exchange)
{
    static struct call a1, b1, a2;
    enum pool_status status;
    const char *why = NULL;
    a1.st = request_exchanged("sub:alice", "tok-alice", CALL("a1", "alice1", ""), &status, &why);
    cr_assert_not_null(a1.st, "%s", why);
    struct upstream *ua = child_ready();
    holds_token(ua, "tok-alice");
    answer(ua, "alice1");
    call_done(&a1);
    /* bob at the bound of 1: alice's idle child stops; bob's holds bob's token alone. */
    b1.st = request_exchanged("sub:bob", "tok-bob", CALL("b1", "bob1", ""), &status, &why);
    cr_assert_not_null(b1.st, "%s", why);
    cr_assert(fake_upstream_closed(ua), "alice's idle child stopped for bob");
    struct upstream *ub = child_ready();
    cr_assert_neq(ub, ua);
    holds_token(ub, "tok-bob");
    cr_assert_str_neq(fake_upstream_env(ub, "DOWN_TOKEN_FILE"),
                      fake_upstream_env(ua, "DOWN_TOKEN_FILE"), "a file per principal");
    answer(ub, "bob1");
    call_done(&b1);
    /* alice again, with no new exchange: her pool's token, never bob's. */
    a2.st = request_exchanged("sub:alice", NULL, CALL("a2", "alice2", ""), &status, &why);
    cr_assert_not_null(a2.st, "%s", why);
    struct upstream *ua2 = child_ready();
    holds_token(ua2, "tok-alice");
    answer(ua2, "alice2");
    call_done(&a2);
}

/* --- pooled sessions' sealed ids: the checks of every request (pool_session_find) ------------ */

#define SEAL_KEY   "5f6c0a1d9e3b47c28a1f0e6d4b3c2a19087f6e5d4c3b2a1908f7e6d5c4b3a291"
#define SEAL_OTHER "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct keyring *
seal_keys(const char *hex)
{
    char err[256];
    struct keyring *kr =
        keyring_parse(hex, strlen(hex), "test key", SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "%s", err);
    return kr;
}

static void
setup_sealed(void)
{
    setup_with("session_mode = pooled\n[auth]\nmax_sessions_per_principal = 2");
    pool_session_keys_set(cfgs[0], seal_keys(SEAL_KEY));
}

/* An id sealed with hex's key for principal, server and revision, issued age_s ago. */
static void
sealed_id(const char *hex, const char *principal, const char *server, const char *revision,
          int64_t age_s, char out[SESSION_SEAL_ID_MAX + 1])
{
    struct session_seal_record r;
    int64_t now_s = (int64_t)(util_now_unix_ms() / 1000u);
    cr_assert_eq(session_seal_record_init(&r, principal, server, revision, "{}", 2, 0,
                                          now_s - age_s),
                 0);
    struct keyring *kr = seal_keys(hex);
    cr_assert_eq(session_seal(kr, &r, out), 0);
    keyring_free(kr);
}

static struct pool_session *
find_as(const char *id, const char *principal, bool room, enum pool_status *st)
{
    const char *why = NULL;
    *st = POOL_OK;
    return pool_session_find(id, &cfgs[0]->servers[0], principal, room, st, &why);
}

Test(pool, a_sealed_id_opens_for_its_principal_and_server_only, .init = setup_sealed,
     .fini = teardown)
{
    char id[SESSION_SEAL_ID_MAX + 1], bad[SESSION_SEAL_ID_MAX + 1];
    enum pool_status st;
    sealed_id(SEAL_KEY, "alice", "a", "2025-06-18", 10, id);
    cr_assert(pool_session_named(id), "a sealed id is a pooled session's");
    /* No record here (sealed elsewhere): taken up, once. */
    struct pool_session *s = find_as(id, "alice", true, &st);
    cr_assert_not_null(s);
    cr_assert_eq(pool_session_count(), 1);
    cr_assert_eq(find_as(id, "alice", true, &st), s, "the same record the second time");
    cr_assert_eq(pool_session_count(), 1);
    cr_assert_eq(strncmp(pool_session_label(s), "sealed:", 7), 0);
    /* Another principal: the unknown session's 404, with or without a record here. */
    cr_assert_null(find_as(id, "bob", true, &st));
    cr_assert_eq(st, POOL_E_GONE);
    /* Another server's id, an expired one, another key's, a legacy revision without sessions. */
    sealed_id(SEAL_KEY, "alice", "b", "2025-06-18", 0, bad);
    cr_assert_null(find_as(bad, "alice", true, &st));
    cr_assert_eq(st, POOL_E_GONE);
    sealed_id(SEAL_KEY, "alice", "a", "2025-06-18", (int64_t)cfgs[0]->session_max_age_s + 1, bad);
    cr_assert_null(find_as(bad, "alice", true, &st));
    cr_assert_eq(st, POOL_E_GONE);
    sealed_id(SEAL_OTHER, "alice", "a", "2025-06-18", 0, bad);
    cr_assert_null(find_as(bad, "alice", true, &st));
    sealed_id(SEAL_KEY, "alice", "a", "2024-11-05", 0, bad);
    cr_assert_null(find_as(bad, "alice", true, &st), "2024-11-05 has no Streamable HTTP sessions");
    /* Every character changed, and every cut: never opens, never a record. */
    for (size_t i = 0; id[i] != '\0'; i++) {
        memcpy(bad, id, sizeof bad);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        cr_assert_null(find_as(bad, "alice", true, &st), "character %zu changed", i);
        memcpy(bad, id, sizeof bad);
        bad[i] = '\0';
        cr_assert_null(find_as(bad, "alice", true, &st), "cut at %zu", i);
    }
    cr_assert_eq(pool_session_count(), 1, "no refused id made a record");
}

Test(pool, a_sealed_id_taken_up_is_bounded_and_deleted_ids_stay_deleted, .init = setup_sealed,
     .fini = teardown)
{
    char id[3][SESSION_SEAL_ID_MAX + 1];
    enum pool_status st;
    for (int i = 0; i < 3; i++)
        sealed_id(SEAL_KEY, "alice", "a", "2025-06-18", i, id[i]);
    /* max_sessions full (the HTTP front says so): 503, no record. */
    cr_assert_null(find_as(id[0], "alice", false, &st));
    cr_assert_eq(st, POOL_E_UNAVAILABLE);
    cr_assert_eq(pool_session_count(), 0);
    /* max_sessions_per_principal = 2: the third of alice's is refused. */
    cr_assert_not_null(find_as(id[0], "alice", true, &st));
    struct pool_session *s1 = find_as(id[1], "alice", true, &st);
    cr_assert_not_null(s1);
    cr_assert_null(find_as(id[2], "alice", true, &st));
    cr_assert_eq(st, POOL_E_PRINCIPAL);
    /* DELETE: this instance answers 404 to the id from then on, and the room is free. */
    pool_session_delete(s1);
    cr_assert_eq(pool_session_count(), 1);
    cr_assert_null(find_as(id[1], "alice", true, &st));
    cr_assert_eq(st, POOL_E_GONE);
    cr_assert_not_null(find_as(id[2], "alice", true, &st));
    /* A rotation: the old key below the new one still opens its ids; dropped, they are gone. */
    struct pool_session *s0 = find_as(id[0], "alice", true, &st);
    cr_assert_not_null(s0);
    char both[160];
    snprintf(both, sizeof both, "%s\n%s\n", SEAL_OTHER, SEAL_KEY);
    char err[256];
    struct keyring *kr =
        keyring_parse(both, strlen(both), "rotated", SESSION_SEAL_PURPOSE, err, sizeof err);
    cr_assert_not_null(kr, "%s", err);
    pool_session_keys_set(cfgs[0], kr);
    cr_assert_eq(find_as(id[0], "alice", true, &st), s0);
    pool_session_keys_set(cfgs[0], seal_keys(SEAL_OTHER));
    cr_assert_null(find_as(id[0], "alice", true, &st), "its key left the file");
}

/* --- pooled sessions of the 2024-11-05 transport: random ids, by id, principal and server ---- */

Test(pool, a_2024_11_05_session_is_its_transports_principals_and_servers_alone,
     .init = setup_sealed, .fini = teardown)
{
    const struct config_server *srv = &cfgs[0]->servers[0];
    struct pool_session *s = NULL;
    enum pool_status st;
    const char *why = NULL;
    /* max_sessions full (the HTTP front says so): 503, no record. */
    cr_assert_null(
        pool_session_sse_open(srv, "alice", "messages?sessionId=", false, &s, &st, &why));
    cr_assert_eq(st, POOL_E_UNAVAILABLE);
    cr_assert_eq(pool_session_count(), 0);
    struct stream *get =
        pool_session_sse_open(srv, "alice", "messages?sessionId=", true, &s, &st, &why);
    cr_assert_not_null(get);
    const char *id = pool_session_id(s);
    char ev[256];
    size_t n = stream_read(get, ev, sizeof ev - 1);
    ev[n] = '\0';
    char want[256];
    snprintf(want, sizeof want, "event: endpoint\ndata: messages?sessionId=%s\n\n", id);
    cr_assert_str_eq(ev, want, "the endpoint event first");
    cr_assert_eq(strncmp(pool_session_label(s), "sse:", 4), 0);
    char label[POOL_SESSION_SSE_LABEL_MAX];
    pool_session_sse_label(id, label);
    cr_assert_str_eq(label, pool_session_label(s), "the label of its id, whoever computes it");
    /* Its id is no sealed one: the Streamable HTTP path never finds it, nor it a sealed one. */
    cr_assert(!pool_session_named(id));
    cr_assert_null(find_as(id, "alice", true, &st));
    cr_assert_eq(st, POOL_E_GONE);
    cr_assert_eq(pool_session_sse_find(id, srv, "alice"), s);
    cr_assert_null(pool_session_sse_find(id, srv, "bob"), "another principal's: none");
    cr_assert_null(pool_session_sse_find(id, srv, NULL));
    char sealed[SESSION_SEAL_ID_MAX + 1];
    sealed_id(SEAL_KEY, "alice", "a", "2025-06-18", 0, sealed);
    cr_assert_not_null(find_as(sealed, "alice", true, &st));
    cr_assert_null(pool_session_sse_find(sealed, srv, "alice"),
                   "a sealed id names no such session");
    /* max_sessions_per_principal = 2, both transports counted: alice's third is refused. */
    struct pool_session *t = NULL;
    cr_assert_null(pool_session_sse_open(srv, "alice", "messages?sessionId=", true, &t, &st, &why));
    cr_assert_eq(st, POOL_E_PRINCIPAL);
    cr_assert(!pool_session_sse_initialized(s) && !pool_session_sse_ready(s));
    /* The connection drops: the session is gone, its room given back. */
    cr_assert_eq(pool_session_count(), 2);
    char was[64];
    snprintf(was, sizeof was, "%s", id);
    pool_session_detach(was, get);
    cr_assert_eq(pool_session_count(), 1);
    cr_assert_null(pool_session_sse_find(was, srv, "alice"), "gone with its connection");
    struct stream *again =
        pool_session_sse_open(srv, "alice", "messages?sessionId=", true, &t, &st, &why);
    cr_assert_not_null(again, "the room is back");
    pool_session_detach(pool_session_id(t), again);
}
