/* SPDX-License-Identifier: MIT */
/*
 * stateless_revisions: a stateless revision that behaves as 2026-07-28 is one row of the revision
 * table. This binary compiles src/mcp/revision.c with MCPGW_TEST_STATELESS_ROW="2099-01-01"
 * (tests/unit/meson.build), so its table has a made-up later stateless row, and runs the pool's
 * real code on fake children (fake_upstream.c) with a fake clock, as test_pool.c does. It checks
 * the lists and the newest row, then the probe's verdict (what a child's answer or refusal says it
 * speaks), and the serving decision: a request is served as the row it names on a pool whose
 * children speak it, and refused with -32022 listing what they speak otherwise; a legacy pool
 * speaks every stateless row, and the discover answer the gateway writes for it lists them all.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "config.h"
#include "fake_clock.h"
#include "fake_upstream.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "pool.h"
#include "revision.h"
#include "src/pool/pool_int.h"
#include "stream.h"
#include "util.h"

#define OLD "2026-07-28"
#define NEW "2099-01-01"

TestSuite(stateless_revisions, .timeout = 30);

/* --- the table ------------------------------------------------------------------------------ */

Test(stateless_revisions, the_row_is_in_every_list)
{
    cr_assert_str_eq(revision_list(REVISION_STATELESS), OLD ", " NEW);
    cr_assert_str_eq(revision_newest(REVISION_STATELESS)->name, NEW);
    cr_assert_str_eq(revision_newest(REVISION_SESSIONS | REVISION_STATELESS)->name, NEW);
    cr_assert_str_eq(revision_newest(REVISION_STREAMABLE)->name, "2025-11-25");
    const char *const *n = revision_names(REVISION_STATELESS);
    cr_assert_str_eq(n[0], OLD);
    cr_assert_str_eq(n[1], NEW);
    cr_assert_null(n[2]);
    const struct revision *r = revision_named(NEW);
    cr_assert(revision_over(r, REVISION_STATELESS));
    cr_assert(!revision_over(r, REVISION_SESSIONS));
    cr_assert(r->input_rounds && r->result_fields && !r->resumable);
    cr_assert(revision_removed(r, "initialize"));
    cr_assert_eq(revision_older(r, REVISION_STATELESS), revision_named(OLD));
    cr_assert_null(revision_older(revision_named(OLD), REVISION_STATELESS));
    cr_assert_str_eq(revision_older(revision_named(OLD), ~0u)->name, "2025-11-25");
}

Test(stateless_revisions, sets_of_rows)
{
    uint32_t both = revision_set_over(REVISION_STATELESS);
    cr_assert_eq(both, revision_bit(revision_named(OLD)) | revision_bit(revision_named(NEW)));
    static const char *const listed[] = { "2025-11-25", NEW, "2030-01-01", "", NULL };
    cr_assert_eq(revision_set_named(listed, REVISION_STATELESS), revision_bit(revision_named(NEW)),
                 "a legacy row and unknown names are not stateless rows the gateway knows");
    const char *names[REVISION_SET_MAX + 1];
    revision_set_names(both, names);
    cr_assert_str_eq(names[0], OLD);
    cr_assert_str_eq(names[1], NEW);
    cr_assert_null(names[2]);
    revision_set_names(0, names);
    cr_assert_null(names[0]);
    char text[64];
    revision_set_text(both, text, sizeof text);
    cr_assert_str_eq(text, OLD ", " NEW);
    revision_set_text(both, text, 12);
    cr_assert_str_eq(text, OLD ","); /* cut to fit */
    cr_assert_eq(revision_bit(NULL), 0);
}

/* --- the pool: fake children and a fake clock ------------------------------------------------ */

static struct loop *L;
static struct config *cfg;

/* One server, era = auto (the probe decides), one child at most. */
static void
setup(void)
{
    log_init(LOG_ERROR, LOG_FORMAT_TEXT);
    L = loop_new();
    static const char ini[] = "[gateway]\nlisten = 127.0.0.1:0\n"
                              "[server:a]\npath = /mcp\ncommand = /bin/true\nera = auto\n"
                              "pool_max_children = 1\n";
    cfg = xcalloc(1, sizeof(*cfg));
    char err[256];
    cr_assert_eq(config_load_string(ini, "test.ini", cfg, err, sizeof err), 0, "%s", err);
    pool_module_init(L, cfg);
    cr_assert_eq(pool_load_key(cfg, err, sizeof err), 0, "%s", err);
}

static void
teardown(void)
{
    pool_close_all();
    for (int i = 0; i < 60; i++) {
        fake_now_us += 1000000;
        fake_settle(L);
        pool_sweep(util_now_ms());
    }
    pool_module_free();
    loop_free(L);
    fake_upstream_free_all();
    config_clear(cfg);
    free(cfg);
}

/* A request of revision rev (id and name as given) as http_stateless.c hands it on. */
static struct stream *
request(const char *rev, const char *id, const char *method)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"%s\",\"params\":{\"name\":\"echo\","
             "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"%s\","
             "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
             id, method, rev);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(body, strlen(body), &info, NULL), JSONRPC_OK, "%s", body);
    struct pool_meta meta = { .rev = revision_named(rev), .log_level = -1, .principal = "alice" };
    cr_assert_not_null(meta.rev);
    enum pool_status status = POOL_OK;
    struct stream *st = pool_request(&cfg->servers[0], body, strlen(body), &info, &meta, &status);
    cr_assert_not_null(st, "refused: %s", relay_status_text(status));
    fake_settle(L);
    return st;
}

/* What the client reads of st now, then done with it. */
static void
read_all(struct stream *st, char *out, size_t cap)
{
    size_t len = 0, n;
    while (len < cap - 1 && (n = stream_read(st, out + len, cap - 1 - len)) > 0)
        len += n;
    out[len] = '\0';
    pool_stream_detach(st);
    fake_settle(L);
}

/* The i-th message the child read; NULL past the last. */
static const char *
child_read(struct upstream *u, size_t i)
{
    size_t len;
    return i < fake_upstream_sent_count(u) ? fake_upstream_sent(u, i, &len) : NULL;
}

static uint64_t
id_of(const char *m)
{
    const char *p = strstr(m, "\"id\":");
    cr_assert_not_null(p, "%s", m);
    return strtoull(p + 5, NULL, 10);
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

/* The probe the child read as its i-th message names version; its id. */
static uint64_t
probe_at(struct upstream *u, size_t i, const char *version)
{
    const char *m = child_read(u, i);
    cr_assert_not_null(m, "the child read no message %zu", i);
    cr_assert(strstr(m, "\"method\":\"server/discover\"") != NULL, "%s", m);
    char want[96];
    snprintf(want, sizeof want, "\"io.modelcontextprotocol/protocolVersion\":\"%s\"", version);
    cr_assert(strstr(m, want) != NULL, "the probe does not name %s: %s", version, m);
    return id_of(m);
}

/* A request of rev, answered by the child: what the client got (the child must have read it). */
static void
served(struct upstream *u, const char *rev, char *out, size_t cap)
{
    size_t before = fake_upstream_sent_count(u);
    struct stream *st = request(rev, "c", "tools/call");
    const char *m = child_read(u, before);
    cr_assert_not_null(m, "a %s request did not reach the child", rev);
    cr_assert(strstr(m, rev) != NULL, "%s", m);
    child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id_of(m));
    read_all(st, out, cap);
    cr_assert(strstr(out, "\"id\":\"c\"") != NULL, "%s", out);
    cr_assert(strstr(out, "\"resultType\":\"complete\"") != NULL, "%s row stamps: %s", rev, out);
}

/* A request of rev is refused without reaching the child: -32022 listing supported. */
static void
refused(struct upstream *u, const char *rev, const char *supported)
{
    size_t before = fake_upstream_sent_count(u);
    struct stream *st = request(rev, "r", "tools/call");
    char out[2048];
    read_all(st, out, sizeof out);
    cr_assert_eq(fake_upstream_sent_count(u), before, "a refused request reached the child");
    cr_assert(strstr(out, "\"code\":-32022") != NULL, "%s", out);
    char want[128];
    snprintf(want, sizeof want, "\"supported\":[%s],\"requested\":\"%s\"", supported, rev);
    cr_assert(strstr(out, want) != NULL, "want %s in %s", want, out);
}

/* The first request starts the child, whose probe names the newest stateless row. */
static struct upstream *
first_child(struct stream **st)
{
    *st = request(OLD, "w", "tools/list");
    struct upstream *u = fake_upstream_last();
    cr_assert_not_null(u, "no child started");
    return u;
}

/* The waiting request (tools/list) goes to the child once ready: answered. */
static void
first_served(struct upstream *u, struct stream *st)
{
    char out[2048];
    for (size_t i = 0; child_read(u, i) != NULL; i++)
        if (strstr(child_read(u, i), "\"method\":\"tools/list\"") != NULL) {
            child_says(u, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"tools\":[]}}",
                       id_of(child_read(u, i)));
            read_all(st, out, sizeof out);
            cr_assert(strstr(out, "\"id\":\"w\"") != NULL, "%s", out);
            return;
        }
    cr_assert_fail("the waiting request did not reach the child");
}

Test(stateless_revisions, a_child_of_the_older_row_refuses_the_probe_with_its_list, .init = setup,
     .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    uint64_t id = probe_at(u, 0, NEW);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-32022,\"message\":"
               "\"Unsupported protocol version\",\"data\":{\"supported\":[\"" OLD
               "\"],\"requested\":\"" NEW "\"}}}",
               id);
    first_served(u, st);
    char out[2048];
    served(u, OLD, out, sizeof out);
    refused(u, NEW, "\"" OLD "\"");
    cr_assert_eq(fake_upstream_sent_count(u), 3, "one probe, two requests served: nothing else");
}

Test(stateless_revisions, a_child_of_both_rows_is_served_both, .init = setup, .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"supportedVersions\":[\"" OLD
               "\",\"" NEW "\",\"2030-01-01\"],\"capabilities\":{}}}",
               probe_at(u, 0, NEW));
    first_served(u, st);
    char out[2048];
    served(u, OLD, out, sizeof out);
    served(u, NEW, out, sizeof out);
}

Test(stateless_revisions, a_refusal_without_a_list_asks_the_next_older_row, .init = setup,
     .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-32022,\"message\":"
               "\"Unsupported protocol version\"}}",
               probe_at(u, 0, NEW));
    uint64_t id = probe_at(u, 1, OLD);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"supportedVersions\":[\"" OLD
               "\"]}}",
               id);
    first_served(u, st);
    char out[2048];
    served(u, OLD, out, sizeof out);
    refused(u, NEW, "\"" OLD "\"");
}

Test(stateless_revisions, refusals_of_every_row_break_the_pool, .init = setup, .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    static const char no[] = "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-32022,"
                             "\"message\":\"Unsupported protocol version\"}}";
    child_says(u, no, probe_at(u, 0, NEW));
    child_says(u, no, probe_at(u, 1, OLD));
    cr_assert_null(child_read(u, 2), "asked at most once per stateless row");
    char out[2048];
    read_all(st, out, sizeof out);
    cr_assert(strstr(out, "supports no protocol version") != NULL, "%s", out);
    cr_assert(fake_upstream_closed(u));
}

Test(stateless_revisions, a_list_of_unknown_rows_breaks_the_pool, .init = setup, .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-32022,\"message\":"
               "\"x\",\"data\":{\"supported\":[\"2030-01-01\"],\"requested\":\"" NEW "\"}}}",
               probe_at(u, 0, NEW));
    cr_assert_null(child_read(u, 1), "its list is its answer: no other probe");
    char out[2048];
    read_all(st, out, sizeof out);
    cr_assert(strstr(out, "supports no protocol version") != NULL, "%s", out);
}

Test(stateless_revisions, a_legacy_child_speaks_every_row, .init = setup, .fini = teardown)
{
    struct stream *st;
    struct upstream *u = first_child(&st);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-32601,\"message\":"
               "\"Method not found\"}}",
               probe_at(u, 0, NEW));
    const char *init = child_read(u, 1);
    cr_assert(init != NULL && strstr(init, "\"method\":\"initialize\"") != NULL, "%s", init);
    child_says(u,
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"protocolVersion\":"
               "\"2025-11-25\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"f\","
               "\"version\":\"1\"}}}",
               id_of(init));
    first_served(u, st);
    char out[2048];
    served(u, OLD, out, sizeof out);
    served(u, NEW, out, sizeof out);
    /* The gateway answers server/discover for it, in either row, listing both. */
    for (int i = 0; i < 2; i++) {
        size_t before = fake_upstream_sent_count(u);
        read_all(request(i == 0 ? OLD : NEW, "d", "server/discover"), out, sizeof out);
        cr_assert_eq(fake_upstream_sent_count(u), before, "server/discover reached the child");
        cr_assert(strstr(out, "\"supportedVersions\":[\"" OLD "\",\"" NEW "\"]") != NULL, "%s",
                  out);
    }
}
