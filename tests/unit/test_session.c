/* SPDX-License-Identifier: MIT */
/*
 * session: routing and cancellation in-process, with the real loop, streams, in-flight table and
 * scanner, and a fake child (fake_upstream.c) instead of processes. Driven as http.c drives it:
 * session_create, session_stream_open, session_client_request/other/batch with bodies scanned by
 * jsonrpc_scan, session_stream_detach, session_close; the test reads what each stream got
 * (stream_read) and what the child read.
 *
 * Ids (minted toward the child, spliced back byte-for-byte, "42" vs 42, a 30-digit id, duplicates
 * and reuse, the in-flight cap, a full stdin); where the child's messages go (answers, progress,
 * child requests and the child's cancel of one, a child's batch, the notification backlog, late
 * answers, back-pressure); cancels (the client's, a dropped POST stream at once or after the
 * grace period, never initialize nor a task-augmented request, DELETE, idle expiry, the child's
 * end); the lifecycle (create, spawn failure, reap, close twice, close all); and the re-entries
 * that crashed the gateway when a child closed its stdin: a write fails inside a flow (drop,
 * cancel, answer, DELETE, batch, timeout, grace expiry, a request, the error answer to a child's
 * request), the session must finish that flow and end on the deferred report, on the next loop
 * turn. Run under ASan (abort_on_error) in CI: a use after free there is a crash here. The loop
 * runs turn by turn, or until a condition with a deadline; nothing sleeps. A test marked BUG is
 * disabled until the gateway is fixed.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "auth.h"
#include "buf.h"
#include "config.h"
#include "fake_upstream.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "quota.h"
#include "session.h"
#include "src/session/session_int.h"
#include "stream.h"
#include "util.h"

static void fx_fini(void);

TestSuite(session, .timeout = 30, .fini = fx_fini);

#define GATEWAY    "[gateway]\nlisten = 127.0.0.1:0\nmax_inflight_per_session = 4\n"
#define SERVER     "[server:a]\ncommand = /bin/false\n"
#define INI        GATEWAY SERVER
#define V_CURRENT  "2025-06-18"
#define V_BATCHES  "2025-03-26"
#define EV_MAX     8
#define EV_LEN     2048
#define HELD_MAX   32
#define TOOL_CALL  "\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}"
#define STDIN_GONE "child stopped reading its stdin"

static struct loop *L;
static struct config CFG;
static struct config CFG2; /* a reload's, when a test makes one */
static bool reloaded;
static struct auth *A;
static struct auth_principal *P;
static struct policy_grants grants; /* the token's, for the server's tool policy */
static bool started;
static bool (*until)(void);
static bool deadline_hit;

/* Streams the test holds as an HTTP connection would, with the session id they were opened on. */
static struct {
    struct stream *st;
    char sid[CRYPTO_SESSION_ID_MAX];
} held[HELD_MAX];
static int nheld;

/* One session and its fake child. */
struct fx {
    struct session *s;
    struct upstream *u;
    char sid[CRYPTO_SESSION_ID_MAX];
};

/* --- the fixture ------------------------------------------------------------------------- */

/* The end of every loop turn, as main.c's after hook: closed sessions are freed here. */
static void
after_turn(void *arg)
{
    (void)arg;
    session_reap();
    if (until != NULL && until())
        loop_stop(L);
}

static void
start(const char *ini)
{
    char err[512] = "";
    log_init(LOG_DEBUG, LOG_FORMAT_TEXT);
    cr_assert_eq(config_load_string(ini, "session.ini", &CFG, err, sizeof err), 0, "%s", err);
    L = loop_new();
    loop_set_hooks(L, NULL, after_turn, NULL);
    session_module_init(L, &CFG);
    A = auth_new(&CFG, err, sizeof err);
    cr_assert_not_null(A, "%s", err);
    const char *why = NULL;
    cr_assert_eq(auth_check(A, NULL, &CFG.servers[0], util_now_unix(), &P, &grants, &why), AUTH_OK);
    started = true;
}

static void
fx_fini(void)
{
    if (!started)
        return;
    for (int i = 0; i < nheld; i++)
        session_stream_detach(held[i].sid, held[i].st);
    nheld = 0;
    session_close_all(SESSION_END_SHUTDOWN);
    session_reap();
    session_module_free();
    loop_free(L);
    unsigned misuse = fake_upstream_misuse();
    fake_upstream_free_all();
    auth_principal_unref(P);
    auth_free(A);
    auth_module_free();
    config_clear(&CFG);
    if (reloaded)
        config_clear(&CFG2);
    reloaded = false;
    if (misuse != 0) {
        fprintf(stderr, "the session used its upstream %u times after upstream_close\n", misuse);
        abort();
    }
}

/* --- the loop ---------------------------------------------------------------------------- */

static void
stop_cb(void *arg)
{
    (void)arg;
    loop_stop(L);
}

static void
deadline_cb(void *arg)
{
    (void)arg;
    deadline_hit = true;
    loop_stop(L);
}

/* One loop turn: timers due, deferred calls, the end-of-turn hook. */
static void
turn(void)
{
    loop_timer_add(L, 0, stop_cb, NULL);
    loop_run(L);
}

/* Runs the loop until cond() holds after a turn, at most ms; returns cond(). */
static bool
run_until(bool (*cond)(void), uint64_t ms)
{
    if (cond())
        return true;
    until = cond;
    deadline_hit = false;
    struct loop_timer *t = loop_timer_add(L, ms, deadline_cb, NULL);
    loop_run(L);
    if (!deadline_hit)
        loop_timer_del(t);
    until = NULL;
    return cond();
}

/* --- streams, as http.c holds them ------------------------------------------------------- */

static struct stream *
hold(const struct fx *f, struct stream *st)
{
    cr_assert_lt(nheld, HELD_MAX);
    held[nheld].st = st;
    snprintf(held[nheld].sid, sizeof held[nheld].sid, "%s", f->sid);
    nheld++;
    return st;
}

/* The connection ends: session_stream_detach, as http.c's request-completed callback does. */
static void
detach(struct stream *st)
{
    for (int i = 0; i < nheld; i++)
        if (held[i].st == st) {
            char sid[CRYPTO_SESSION_ID_MAX];
            snprintf(sid, sizeof sid, "%s", held[i].sid);
            held[i] = held[--nheld];
            session_stream_detach(sid, st);
            return;
        }
    cr_assert_fail("detach of a stream the test does not hold");
}

static struct stream *
open_stream(struct fx *f, bool is_get)
{
    enum session_status status = SESSION_E_GONE;
    struct stream *st = session_stream_open(f->s, is_get, &status);
    cr_assert_eq(status, SESSION_OK, "session_stream_open: %s", relay_status_text(status));
    cr_assert_not_null(st);
    return hold(f, st);
}

/* Reads everything st has for now; the data line of each message event into ev. */
static int
events(struct stream *st, char ev[][EV_LEN], int max)
{
    static char raw[1 << 16];
    size_t used = 0, n;
    while ((n = stream_read(st, raw + used, sizeof raw - 1 - used)) > 0)
        used += n;
    raw[used] = '\0';
    int k = 0;
    for (char *p = raw; (p = strstr(p, "data: ")) != NULL; p++) {
        if (p != raw && p[-1] != '\n')
            continue;
        char *start = p + strlen("data: "), *end = strchr(start, '\n');
        cr_assert_not_null(end);
        cr_assert_lt(k, max, "more events than expected");
        cr_assert_lt((size_t)(end - start), (size_t)EV_LEN);
        memcpy(ev[k], start, (size_t)(end - start));
        ev[k][end - start] = '\0';
        k++;
    }
    return k;
}

/* The one event st has for now, a request of the child's: its id as the client sees it. */
static uint64_t
the_one_request_id(struct stream *st)
{
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    struct jsonrpc_info info;
    uint64_t id = 0;
    cr_assert_eq(jsonrpc_scan(ev[0], strlen(ev[0]), &info, NULL), JSONRPC_OK);
    cr_assert(jsonrpc_id_u64(ev[0], info.id, &id), "%s", ev[0]);
    return id;
}

static int
count_events(struct stream *st)
{
    char ev[EV_MAX][EV_LEN];
    return events(st, ev, EV_MAX);
}

/* st got exactly one event, want. */
static void
expect_event(struct stream *st, const char *want)
{
    char ev[EV_MAX][EV_LEN];
    int n = events(st, ev, EV_MAX);
    cr_assert_eq(n, 1, "%d events, expected one: %s", n, want);
    cr_assert_str_eq(ev[0], want);
}

/* ev is a JSON-RPC error for the raw id, with code, whose message contains part. */
static void
expect_error(const char *ev, const char *id_raw, int code, const char *part)
{
    char head[256];
    snprintf(head, sizeof head,
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"", id_raw, code);
    cr_assert(strncmp(ev, head, strlen(head)) == 0, "not an error %d for id %s: %s", code, id_raw,
              ev);
    cr_assert_not_null(strstr(ev + strlen(head), part), "error without \"%s\": %s", part, ev);
}

/* st got one event, an internal error for the raw id mentioning part, and nothing follows. */
static void
expect_only_error(struct stream *st, const char *id_raw, const char *part)
{
    char ev[EV_MAX][EV_LEN];
    int n = events(st, ev, EV_MAX);
    cr_assert_eq(n, 1, "%d events, expected one error for %s", n, id_raw);
    expect_error(ev[0], id_raw, JSONRPC_INTERNAL_ERROR, part);
    cr_assert(stream_finished(st), "the stream did not end after its error");
}

/* --- the client side --------------------------------------------------------------------- */

static char *
body_dup(const char *json, size_t *len)
{
    *len = strlen(json);
    return xmemdup(json, *len); /* exactly the body: a read past it is caught by ASan */
}

static enum session_status
request(struct fx *f, struct stream *st, const char *json)
{
    size_t len;
    char *body = body_dup(json, &len);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(body, len, &info, NULL), JSONRPC_OK, "%s", json);
    cr_assert_eq(info.kind, JSONRPC_REQUEST, "%s", json);
    enum session_status rc = session_client_request(f->s, st, body, len, &info, grants, NULL);
    free(body);
    return rc;
}

/* A notification or an answer from the client. */
static enum session_status
other(struct fx *f, const char *json)
{
    size_t len;
    char *body = body_dup(json, &len);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(body, len, &info, NULL), JSONRPC_OK, "%s", json);
    cr_assert_neq(info.kind, JSONRPC_REQUEST, "%s", json);
    enum session_status rc = session_client_other(f->s, body, len, &info);
    free(body);
    return rc;
}

static enum session_status
batch(struct fx *f, struct stream *st, const char *json)
{
    size_t len, n;
    char *body = body_dup(json, &len);
    struct jsonrpc_info info[SESSION_BATCH_MAX];
    struct jsonrpc_span el[SESSION_BATCH_MAX];
    cr_assert_eq(jsonrpc_scan(body, len, &info[0], NULL), JSONRPC_EBATCH, "%s", json);
    cr_assert_eq(jsonrpc_batch_split(body, len, el, SESSION_BATCH_MAX, &n), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(jsonrpc_scan(body + el[i].off, el[i].len, &info[i], NULL), JSONRPC_OK);
    enum session_status rc = session_client_batch(f->s, st, body, len, el, info, n, grants, NULL);
    free(body);
    return rc;
}

/* --- the child side ---------------------------------------------------------------------- */

static size_t
nsent(const struct fx *f)
{
    return fake_upstream_sent_count(f->u);
}

/* The i-th message the child read, without its '\n' (which it must end with). */
static const char *
sent(const struct fx *f, size_t i)
{
    static char line[EV_LEN];
    size_t len;
    const char *m = fake_upstream_sent(f->u, i, &len);
    cr_assert_not_null(m, "the child read %zu messages, not %zu", nsent(f), i + 1);
    cr_assert(len > 0 && m[len - 1] == '\n', "a message to the child is one line: %s", m);
    cr_assert_null(memchr(m, '\n', len - 1), "a newline inside a message to the child: %s", m);
    cr_assert_lt(len, sizeof line);
    memcpy(line, m, len - 1);
    line[len - 1] = '\0';
    return line;
}

static const char *
last_sent(const struct fx *f)
{
    cr_assert_gt(nsent(f), 0);
    return sent(f, nsent(f) - 1);
}

/* The id the child saw on its i-th message: a number the gateway minted. */
static uint64_t
sent_id(const struct fx *f, size_t i)
{
    const char *m = sent(f, i);
    struct jsonrpc_info info;
    uint64_t id = 0;
    cr_assert_eq(jsonrpc_scan(m, strlen(m), &info, NULL), JSONRPC_OK, "%s", m);
    cr_assert_eq(info.id_type, JSONRPC_ID_NUMBER, "the child got a non-minted id: %s", m);
    cr_assert(jsonrpc_id_u64(m, info.id, &id), "%s", m);
    return id;
}

static void
expect_cancel(const struct fx *f, size_t i, uint64_t child_id, const char *reason)
{
    char want[512];
    snprintf(
        want, sizeof want,
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
        "%" PRIu64 ",\"reason\":\"%s\"}}",
        child_id, reason);
    cr_assert_str_eq(sent(f, i), want);
}

static void PRINTF(2, 3) child_says(struct fx *f, const char *fmt, ...)
{
    char line[EV_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cr_assert(fake_upstream_line(f->u, line), "line not delivered: %s", line);
}

/* The child answers its message with this id. */
static void
child_answers(struct fx *f, uint64_t child_id, const char *result)
{
    child_says(f, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":%s}", child_id, result);
}

/* --- sessions ---------------------------------------------------------------------------- */

static void
open_session(struct fx *f)
{
    int status = 0;
    const char *err = NULL;
    f->s = session_create(&CFG.servers[0], P, NULL, &status, &err);
    cr_assert_not_null(f->s, "session_create: %d %s", status, err);
    f->u = fake_upstream_last();
    cr_assert_not_null(f->u);
    snprintf(f->sid, sizeof f->sid, "%s", f->s->id);
}

/* Sends initialize on a new POST stream; returns the stream (the child's id in *child_id). */
static struct stream *
send_initialize(struct fx *f, const char *version, uint64_t *child_id)
{
    char init[256];
    snprintf(init, sizeof init,
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
             "\"version\":\"1\"}}}",
             version);
    struct stream *st = open_stream(f, false);
    cr_assert_eq(request(f, st, init), SESSION_OK);
    *child_id = sent_id(f, nsent(f) - 1);
    return st;
}

static void
child_initialized(struct fx *f, uint64_t child_id, const char *version)
{
    child_says(
        f,
        "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"protocolVersion\":\"%s\","
        "\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"fake\",\"version\":\"1\"}}}",
        child_id, version);
}

/* A session through initialize and notifications/initialized, with no stream left open. */
static void
ready_session(struct fx *f, const char *version)
{
    open_session(f);
    uint64_t id;
    struct stream *st = send_initialize(f, version, &id);
    child_initialized(f, id, version);
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    cr_assert(strncmp(ev[0], "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":", 33) == 0, "%s", ev[0]);
    cr_assert(stream_finished(st));
    detach(st);
    cr_assert_eq(f->s->state, SESSION_READY);
    cr_assert_eq(other(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"),
                 SESSION_OK);
}

/* A request with a client id on a new POST stream; the id the child saw in *child_id. */
static struct stream *
post(struct fx *f, const char *id_raw, uint64_t *child_id)
{
    char json[256];
    snprintf(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"id\":%s," TOOL_CALL, id_raw);
    struct stream *st = open_stream(f, false);
    size_t before = nsent(f);
    cr_assert_eq(request(f, st, json), SESSION_OK, "%s", json);
    cr_assert_eq(nsent(f), before + 1);
    if (child_id != NULL)
        *child_id = sent_id(f, before);
    return st;
}

static uint64_t
closed_by(const char *label)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 20);
    session_metrics(&b, NULL);
    char *text = xstrndup(buf_head(&b), buf_used(&b));
    buf_clear(&b);
    char key[128];
    snprintf(key, sizeof key, "mcpgw_sessions_closed_total{server=\"%s\",reason=\"%s\"} ",
             CFG.servers[0].name, label);
    char *p = strstr(text, key);
    cr_assert_not_null(p, "no %s in the metrics", key);
    uint64_t v = strtoull(p + strlen(key), NULL, 10);
    free(text);
    return v;
}

/* --- re-entry checks --------------------------------------------------------------------- */

/* Right after the call whose write failed: the session finished the flow and still stands. */
static void
expect_still_open(const struct fx *f)
{
    cr_assert_eq(session_find(f->sid), f->s, "the session ended inside the failing call");
    cr_assert_neq(f->s->state, SESSION_CLOSED);
    cr_assert_eq(fake_upstream_gone_calls(f->u), 0, "gone_cb inside the failing call");
    cr_assert(fake_upstream_gone_seen(f->u), "the write did not fail");
}

/* One turn later: the deferred report ended the session, once, as SESSION_END_CHILD. */
static void
expect_child_end(const struct fx *f, size_t sent_before)
{
    size_t count = session_count();
    turn();
    cr_assert_null(session_find(f->sid), "the session outlived its child");
    cr_assert_eq(session_count(), count - 1);
    cr_assert_eq(closed_by("child_exited"), 1);
    cr_assert_eq(session_counters()->closed, 1);
    cr_assert_eq(fake_upstream_gone_calls(f->u), 1);
    cr_assert(fake_upstream_closed(f->u));
    cr_assert_str_eq(fake_upstream_close_reason(f->u), STDIN_GONE);
    cr_assert_eq(nsent(f), sent_before, "the child read something after its stdin broke");
    cr_assert_eq(fake_upstream_misuse(), 0, "the upstream was used after upstream_close");
    turn(); /* nothing is left that refers to the freed session */
}

/* ========================================================================================= */
/* ids                                                                                        */

Test(session, child_sees_minted_ids_and_answers_splice_back_the_client_ids)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    /* "42" and 42 are different ids; a 30-digit number must survive unchanged. */
    const char *ids[] = { "\"42\"", "42", "123456789012345678901234567890" };
    struct stream *st[3];
    uint64_t cid[3];
    for (int i = 0; i < 3; i++) {
        st[i] = post(&f, ids[i], &cid[i]);
        char want[256];
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 "," TOOL_CALL, cid[i]);
        cr_assert_str_eq(last_sent(&f), want, "only the id is replaced");
    }
    cr_assert(cid[0] != cid[1] && cid[1] != cid[2] && cid[0] != cid[2]);
    for (int i = 2; i >= 0; i--) {
        char result[32], want[256];
        snprintf(result, sizeof result, "{\"n\": %d}", i);
        child_answers(&f, cid[i], result);
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"n\": %d}}",
                 ids[i], i);
        expect_event(st[i], want);
        cr_assert(stream_finished(st[i]));
        detach(st[i]);
    }
    cr_assert_eq(session_inflight(PENDING_TO_CHILD), 0);
}

Test(session, client_bytes_around_the_id_reach_the_child_unchanged_on_one_line)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st = open_stream(&f, false);
    cr_assert_eq(
        request(&f, st,
                "{ \"jsonrpc\" : \"2.0\",\r\n \"id\" :\t\"a b\" , \"method\":\"tools/call\","
                "\n\"params\":{\"s\":\"x\\ny\"} }"),
        SESSION_OK);
    char want[256];
    snprintf(want, sizeof want,
             "{ \"jsonrpc\" : \"2.0\",   \"id\" :\t%" PRIu64 " , \"method\":\"tools/call\","
             " \"params\":{\"s\":\"x\\ny\"} }",
             sent_id(&f, nsent(&f) - 1));
    cr_assert_str_eq(last_sent(&f), want);
    child_answers(&f, sent_id(&f, nsent(&f) - 1), "{}");
    expect_event(st, "{\"jsonrpc\":\"2.0\",\"id\":\"a b\",\"result\":{}}");
    detach(st);
}

Test(session, duplicate_inflight_id_is_refused)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t cid;
    struct stream *st1 = post(&f, "7", &cid);
    size_t before = nsent(&f);
    struct stream *st2 = open_stream(&f, false);
    cr_assert_eq(request(&f, st2, "{\"jsonrpc\":\"2.0\",\"id\":7," TOOL_CALL), SESSION_E_DUPLICATE);
    cr_assert_eq(nsent(&f), before, "a duplicate reached the child");
    detach(st2); /* as http.c does on a refusal */
    /* The string "7" is another id. */
    struct stream *st3 = post(&f, "\"7\"", NULL);
    child_answers(&f, cid, "{}");
    expect_event(st1, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
    /* Answered: the id may be used again. */
    uint64_t c4, c5;
    struct stream *st4 = post(&f, "7", &c4);
    /* Cancelled: too. A cancel then names the new request, and the old one's answer is late. */
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":7}}"),
                 SESSION_OK);
    struct stream *st5 = post(&f, "7", &c5);
    cr_assert_neq(c4, c5);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":7}}"),
                 SESSION_OK);
    cr_assert(strstr(last_sent(&f), "\"requestId\":") != NULL);
    cr_assert_eq(strtoull(strstr(last_sent(&f), "\"requestId\":") + 12, NULL, 10), c5);
    child_answers(&f, c4, "{}");
    child_answers(&f, c5, "{}");
    cr_assert_eq(session_counters()->late_dropped, 2);
    detach(st1);
    detach(st3);
    detach(st4);
    detach(st5);
}

Test(session, inflight_cap_per_session)
{
    start(INI); /* max_inflight_per_session = 4 */
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st[4];
    uint64_t cid[4];
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "%d", i);
        st[i] = post(&f, id, &cid[i]);
    }
    size_t before = nsent(&f);
    struct stream *extra = open_stream(&f, false);
    cr_assert_eq(request(&f, extra, "{\"jsonrpc\":\"2.0\",\"id\":9," TOOL_CALL),
                 SESSION_E_TOO_MANY);
    cr_assert_eq(nsent(&f), before);
    detach(extra);
    child_answers(&f, cid[0], "{}");
    struct stream *again = post(&f, "9", NULL);
    for (int i = 0; i < 4; i++)
        detach(st[i]);
    detach(again);
}

Test(session, full_child_stdin_is_busy_and_leaves_nothing_in_flight)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    fake_upstream_set_full(f.u, true);
    struct stream *st = open_stream(&f, false);
    cr_assert_eq(request(&f, st, "{\"jsonrpc\":\"2.0\",\"id\":1," TOOL_CALL), SESSION_E_BUSY);
    cr_assert_eq(session_inflight(PENDING_TO_CHILD), 0);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"}"),
                 SESSION_E_BUSY);
    detach(st);
    fake_upstream_set_full(f.u, false);
    detach(post(&f, "1", NULL)); /* the id was never in flight */
}

/* ========================================================================================= */
/* routing of the child's messages                                                            */

Test(session, response_goes_to_the_post_stream_of_its_request)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t c1, c2;
    struct stream *st1 = post(&f, "1", &c1);
    struct stream *st2 = post(&f, "2", &c2);
    child_answers(&f, c1, "{\"to\":1}");
    cr_assert_eq(count_events(st2), 0, "an answer went to another stream");
    cr_assert_not(stream_finished(st2));
    expect_event(st1, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"to\":1}}");
    cr_assert(stream_finished(st1), "the POST stream ends with its answer");
    /* An error answer is spliced the same way. */
    child_says(
        &f, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"error\":{\"code\":-1,\"message\":\"no\"}}",
        c2);
    expect_event(st2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":\"no\"}}");
    /* An answer for an id the gateway never minted goes nowhere. */
    child_answers(&f, 999, "{}");
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}");
    cr_assert_eq(count_events(st1) + count_events(st2), 0);
    detach(st1);
    detach(st2);
}

Test(session, progress_goes_to_the_stream_of_the_request_that_set_the_token)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = open_stream(&f, false);
    cr_assert_eq(request(&f, st1,
                         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"t\",\"_meta\":{\"progressToken\":\"tok-1\"}}}"),
                 SESSION_OK);
    struct stream *st2 = open_stream(&f, false);
    cr_assert_eq(request(&f, st2,
                         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"t\",\"_meta\":{\"progressToken\":7}}}"),
                 SESSION_OK);
    const char *p1 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                     "\"progressToken\":\"tok-1\",\"progress\":1}}";
    const char *p2 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                     "\"progressToken\":7,\"progress\":2}}";
    child_says(&f, "%s", p1);
    cr_assert_eq(count_events(st2), 0, "progress went to the newer stream");
    expect_event(st1, p1);
    child_says(&f, "%s", p2);
    expect_event(st2, p2);
    /* "7" is not 7; an unknown token goes nowhere and is not a late message. */
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                   "\"progressToken\":\"7\",\"progress\":3}}");
    cr_assert_eq(count_events(st1) + count_events(st2), 0);
    cr_assert_eq(session_counters()->late_dropped, 0);
    /* After a cancel, its progress is late: dropped and counted. */
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":1}}"),
                 SESSION_OK);
    child_says(&f, "%s", p1);
    cr_assert_eq(count_events(st1), 0);
    cr_assert_eq(session_counters()->late_dropped, 1);
    detach(st1);
    detach(st2);
}

Test(session, child_request_goes_to_the_open_get_stream)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    struct stream *st = post(&f, "1", NULL);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"sampling/createMessage\","
                   "\"params\":{}}");
    cr_assert_eq(count_events(st), 0, "a child request went to a POST stream with a GET open");
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(get, ev, EV_MAX), 1);
    /* The client sees an id the gateway minted, not the child's. */
    struct jsonrpc_info info;
    uint64_t id = 0;
    cr_assert_eq(jsonrpc_scan(ev[0], strlen(ev[0]), &info, NULL), JSONRPC_OK);
    cr_assert_eq(info.kind, JSONRPC_REQUEST);
    cr_assert(jsonrpc_id_u64(ev[0], info.id, &id), "%s", ev[0]);
    char want[256];
    snprintf(want, sizeof want,
             "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
             ",\"method\":\"sampling/createMessage\",\"params\":{}}",
             id);
    cr_assert_str_eq(ev[0], want);
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 1);
    /* The client's answer reaches the child with the child's own id back. */
    char answer[128];
    snprintf(answer, sizeof answer,
             "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"ok\":1}}", id);
    cr_assert_eq(other(&f, answer), SESSION_OK);
    cr_assert_str_eq(last_sent(&f), "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"result\":{\"ok\":1}}");
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 0);
    /* A second answer to it is dropped: the child never hears of it twice. */
    size_t before = nsent(&f);
    cr_assert_eq(other(&f, answer), SESSION_OK);
    cr_assert_eq(nsent(&f), before);
    detach(get);
    detach(st);
}

Test(session, child_request_without_get_goes_to_the_newest_waiting_post_stream)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *older = post(&f, "1", NULL);
    struct stream *newer = post(&f, "2", NULL);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"roots/list\"}");
    cr_assert_eq(count_events(older), 0);
    cr_assert_eq(count_events(newer), 1);
    /* A notification with no relation goes the same way. */
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}");
    cr_assert_eq(count_events(older), 0);
    cr_assert_eq(count_events(newer), 1);
    detach(older);
    detach(newer);
}

Test(session, child_request_with_no_stream_is_answered_to_the_child_with_an_error)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    size_t before = nsent(&f);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"sampling/createMessage\"}");
    cr_assert_eq(nsent(&f), before + 1);
    expect_error(last_sent(&f), "\"c1\"", JSONRPC_INTERNAL_ERROR, "no client stream is open");
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 0);
}

Test(session, notifications_with_no_stream_wait_for_the_next_get_stream)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    const char *n[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":1}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":2}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":3}}",
    };
    child_says(&f, "%s", n[0]);
    child_says(&f, "%s", n[1]);
    cr_assert_eq(f.s->backlog.count, 2);
    /* A POST stream opened later does not take the backlog. */
    struct stream *st = post(&f, "1", NULL);
    cr_assert_eq(count_events(st), 0);
    detach(st); /* dropped: its request is cancelled */
    struct stream *get = open_stream(&f, true);
    child_says(&f, "%s", n[2]);
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(get, ev, EV_MAX), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(ev[i], n[i], "event %d out of order", i);
    cr_assert_eq(f.s->backlog.count, 0);
    /* A dropped GET stream keeps what comes meanwhile for the next GET, and cancels nothing. */
    uint64_t cancels = relay_cancels(RELAY_CANCEL_DISCONNECT);
    detach(get);
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), cancels);
    child_says(&f, "%s", n[3]);
    get = open_stream(&f, true);
    cr_assert_eq(events(get, ev, EV_MAX), 1);
    cr_assert_str_eq(ev[0], n[3]);
    detach(get);
}

Test(session, late_answer_after_cancel_is_dropped_and_counted)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t cid;
    struct stream *st = post(&f, "\"r1\"", &cid);
    struct stream *other_st = post(&f, "\"r2\"", NULL);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":\"r1\"}}"),
                 SESSION_OK);
    cr_assert_eq(session_counters()->late_dropped, 0);
    child_answers(&f, cid, "{\"late\":true}");
    cr_assert_eq(session_counters()->late_dropped, 1);
    cr_assert_eq(count_events(st), 0, "a late answer reached the client");
    cr_assert_eq(count_events(other_st), 0, "a late answer went to another stream");
    /* Forgotten once dropped: a second copy is unknown, not late. */
    child_answers(&f, cid, "{\"late\":true}");
    cr_assert_eq(session_counters()->late_dropped, 1);
    detach(st);
    detach(other_st);
}

Test(session, child_cancel_of_its_request_goes_to_the_stream_that_carried_it)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *older = post(&f, "1", NULL);
    struct stream *st = post(&f, "2", NULL);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c9\",\"method\":\"roots/list\"}");
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    struct jsonrpc_info info;
    uint64_t id = 0;
    cr_assert_eq(jsonrpc_scan(ev[0], strlen(ev[0]), &info, NULL), JSONRPC_OK);
    cr_assert(jsonrpc_id_u64(ev[0], info.id, &id));
    /* A GET stream opened since does not take it: the cancel follows its request. */
    struct stream *get = open_stream(&f, true);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                   "\"params\":{\"requestId\":\"c9\",\"reason\":\"gave up\"}}");
    char want[256];
    snprintf(want, sizeof want,
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
             "\"params\":{\"requestId\":%" PRIu64 ",\"reason\":\"gave up\"}}",
             id);
    expect_event(st, want);
    cr_assert_eq(count_events(get) + count_events(older), 0);
    cr_assert_eq(relay_cancels_to_client(), 1);
    /* The client's answer to it comes late: dropped, and the child does not hear of it. */
    size_t before = nsent(&f);
    char answer[128];
    snprintf(answer, sizeof answer, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", id);
    cr_assert_eq(other(&f, answer), SESSION_OK);
    cr_assert_eq(nsent(&f), before);
    cr_assert_eq(session_counters()->late_dropped, 1);
    detach(older);
    detach(st);
    detach(get);
}

Test(session, child_batch_elements_are_routed_each_on_its_own)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_BATCHES);
    uint64_t c1, c2;
    struct stream *st1 = post(&f, "\"a\"", &c1);
    struct stream *st2 = post(&f, "\"b\"", &c2);
    child_says(&f,
               "[{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"n\":2}}, "
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}},"
               "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"n\":1}}]",
               c2, c1);
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st2, ev, EV_MAX), 1);
    cr_assert_str_eq(ev[0], "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{\"n\":2}}");
    /* Answered, st2 ended: the notification goes to the stream still waiting, st1, in order. */
    cr_assert_eq(events(st1, ev, EV_MAX), 2);
    cr_assert_str_eq(ev[0],
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}");
    cr_assert_str_eq(ev[1], "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"n\":1}}");
    detach(st1);
    detach(st2);
}

static char *
big_notification(size_t size)
{
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                               "\"params\":{\"data\":\"";
    char *line = xmalloc(size + 1);
    memcpy(line, head, sizeof head - 1);
    memset(line + sizeof head - 1, 'x', size - (sizeof head - 1) - 3);
    memcpy(line + size - 3, "\"}}", 4);
    return line;
}

Test(session, a_full_stream_pauses_the_child_until_it_is_read)
{
    start(GATEWAY "stream_queue_bytes = 65536\n" SERVER);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    char *line = big_notification(40000);
    cr_assert(fake_upstream_line(f.u, line));
    cr_assert_not(fake_upstream_paused(f.u));
    cr_assert(fake_upstream_line(f.u, line));
    cr_assert(fake_upstream_paused(f.u), "over stream_queue_bytes and the child still read");
    /* Read down to the low watermark (half): the child is read again. */
    char *out = xmalloc(1 << 17);
    size_t got = 0, n;
    while ((n = stream_read(get, out + got, 4096)) > 0 && fake_upstream_paused(f.u))
        got += n;
    cr_assert_not(fake_upstream_paused(f.u));
    cr_assert_not(stream_over_low_water(get));
    free(out);
    free(line);
    detach(get);
}

Test(session, task_augmented_request_is_not_cancelled_by_a_drop)
{
    start(INI);
    struct fx f;
    ready_session(&f, "2025-11-25");
    struct stream *st = open_stream(&f, false);
    cr_assert_eq(request(&f, st,
                         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"t\",\"task\":{\"ttl\":60000}}}"),
                 SESSION_OK);
    size_t before = nsent(&f);
    detach(st);
    cr_assert_eq(nsent(&f), before, "a task-augmented request got notifications/cancelled");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 0);
}

Test(session, sweep_expires_an_idle_session_and_cancels_what_it_held)
{
    start(GATEWAY "disconnect_grace_ms = 600000\n" SERVER);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t cid;
    struct stream *st = post(&f, "1", &cid);
    detach(st); /* waits for a resume: that does not keep the session */
    size_t before = nsent(&f);
    session_sweep(util_now_ms());
    cr_assert_eq(session_find(f.sid), f.s, "expired before its idle timeout");
    session_sweep(util_now_ms() + CFG.session_idle_timeout_s * 1000);
    cr_assert_null(session_find(f.sid));
    cr_assert_eq(nsent(&f), before + 1);
    expect_cancel(&f, before, cid, "session expired");
    cr_assert_eq(closed_by("expired"), 1);
}

/* ========================================================================================= */
/* cancellation                                                                               */

Test(session, client_cancel_is_forwarded_with_the_child_id_and_ends_the_stream)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t cid;
    struct stream *st = post(&f, "\"abc\"", &cid);
    struct stream *st2 = post(&f, "\"def\"", NULL);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":\"abc\",\"reason\":\"user\"}}"),
                 SESSION_OK);
    char want[256];
    snprintf(want, sizeof want,
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
             "\"params\":{\"requestId\":%" PRIu64 ",\"reason\":\"user\"}}",
             cid);
    cr_assert_str_eq(last_sent(&f), want);
    cr_assert_eq(relay_cancels(RELAY_CANCEL_CLIENT), 1);
    cr_assert_eq(count_events(st), 0, "a cancelled request gets no answer");
    cr_assert(stream_finished(st), "the cancelled request's stream did not end");
    cr_assert_not(stream_finished(st2));
    /* Once only: a second cancel for it is not forwarded; nor one for an unknown id. */
    size_t before = nsent(&f);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":\"abc\"}}"),
                 SESSION_OK);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":\"zzz\"}}"),
                 SESSION_OK);
    cr_assert_eq(nsent(&f), before);
    detach(st);
    detach(st2);
}

Test(session, dropped_post_stream_cancels_its_requests_as_client_disconnected)
{
    start(INI); /* disconnect_grace_ms = 0 */
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t c1, c2;
    struct stream *st1 = post(&f, "1", &c1);
    struct stream *st2 = post(&f, "2", &c2);
    size_t before = nsent(&f);
    detach(st1);
    cr_assert_eq(nsent(&f), before + 1);
    expect_cancel(&f, before, c1, "client disconnected");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 1);
    /* The other stream's request is untouched; the dropped one's answer is late. */
    child_answers(&f, c1, "{}");
    cr_assert_eq(session_counters()->late_dropped, 1);
    child_answers(&f, c2, "{}");
    expect_event(st2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
    /* A stream read to its end cancels nothing. */
    detach(st2);
    cr_assert_eq(nsent(&f), before + 1);
}

Test(session, dropped_post_stream_answers_the_child_request_it_carried_with_an_error)
{
    start(INI); /* disconnect_grace_ms = 0 */
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t c1;
    struct stream *st = post(&f, "1", &c1);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"roots/list\"}");
    cr_assert_eq(count_events(st), 1);
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 1);
    size_t before = nsent(&f);
    detach(st);
    /* The child's request gets an error (nobody can answer it now), its call a cancel. */
    cr_assert_eq(nsent(&f), before + 2);
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 0);
    bool error_seen = false;
    for (size_t i = before; i < nsent(&f); i++)
        error_seen |= strstr(sent(&f, i), "client disconnected before answering") != NULL
                      && strstr(sent(&f, i), "\"r1\"") != NULL;
    cr_assert(error_seen, "no error answer for the child's roots/list");
}

static bool
disconnect_cancelled(void)
{
    return relay_cancels(RELAY_CANCEL_DISCONNECT) > 0;
}

Test(session, dropped_post_stream_cancels_after_the_grace_period)
{
    start(GATEWAY "disconnect_grace_ms = 20\n" SERVER);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t cid;
    struct stream *st = post(&f, "1", &cid);
    size_t before = nsent(&f);
    detach(st);
    cr_assert_eq(nsent(&f), before, "cancelled before the grace period");
    cr_assert(run_until(disconnect_cancelled, 2000), "no cancel after the grace period");
    cr_assert_eq(nsent(&f), before + 1);
    expect_cancel(&f, before, cid, "client disconnected");
}

Test(session, initialize_is_never_cancelled)
{
    start(INI);
    struct fx f;
    open_session(&f);
    uint64_t cid;
    struct stream *st = send_initialize(&f, V_CURRENT, &cid);
    /* The client cancels it, then goes away: the child hears of neither. */
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":0}}"),
                 SESSION_OK);
    detach(st);
    cr_assert_eq(nsent(&f), 1, "the child got more than initialize: %s", last_sent(&f));
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 0);
    child_initialized(&f, cid, V_CURRENT);
    cr_assert_eq(f.s->state, SESSION_READY);
    /* DELETE while initialize is in flight: no cancel for it either, the client gets an error. */
    struct fx g;
    open_session(&g);
    st = send_initialize(&g, V_CURRENT, &cid);
    session_close(g.s, SESSION_END_DELETED, NULL);
    cr_assert_eq(nsent(&g), 1, "initialize was cancelled on DELETE: %s", last_sent(&g));
    expect_only_error(st, "0", "session ended: session deleted");
    detach(st);
}

Test(session, delete_cancels_what_is_in_flight_and_errors_each_waiting_stream)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t c1, c2;
    struct stream *get = open_stream(&f, true);
    struct stream *st1 = post(&f, "\"a\"", &c1);
    struct stream *st2 = post(&f, "2", &c2);
    size_t before = nsent(&f);
    session_close(f.s, SESSION_END_DELETED, NULL);
    cr_assert_null(session_find(f.sid));
    cr_assert_eq(session_count(), 0);
    cr_assert_eq(f.s->state, SESSION_CLOSED, "the struct stays until the end of the turn");
    cr_assert_eq(nsent(&f), before + 2);
    /* In-flight order is not part of the contract: each cancel once, with its child id. */
    const char *rid = strstr(sent(&f, before), "\"requestId\":");
    cr_assert_not_null(rid);
    bool first_is_c1 = strtoull(rid + strlen("\"requestId\":"), NULL, 10) == c1;
    expect_cancel(&f, before, first_is_c1 ? c1 : c2, "session deleted");
    expect_cancel(&f, before + 1, first_is_c1 ? c2 : c1, "session deleted");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DELETED), 2);
    expect_only_error(st1, "\"a\"", "session ended: session deleted");
    expect_only_error(st2, "2", "session ended: session deleted");
    cr_assert_eq(count_events(get), 0);
    cr_assert(stream_finished(get));
    cr_assert(fake_upstream_closed(f.u));
    cr_assert_str_eq(fake_upstream_close_reason(f.u), "session deleted");
    cr_assert_eq(quota_of(QUOTA_GATEWAY, P->name, QUOTA_SESSIONS), 0);
    turn();
    cr_assert_eq(closed_by("deleted"), 1);
    cr_assert_eq(nsent(&f), before + 2);
    /* The HTTP side lets go of streams whose session is gone. */
    detach(st1);
    detach(st2);
    detach(get);
}

Test(session, child_gone_fails_what_is_in_flight_and_sends_the_child_nothing)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = post(&f, "\"a\"", NULL);
    struct stream *st2 = post(&f, "2", NULL);
    size_t before = nsent(&f);
    fake_upstream_gone(f.u, "child exited");
    cr_assert_eq(session_find(f.sid), f.s, "the report is deferred");
    cr_assert_eq(count_events(st1), 0);
    turn();
    cr_assert_null(session_find(f.sid));
    cr_assert_eq(session_count(), 0);
    cr_assert_eq(closed_by("child_exited"), 1);
    cr_assert_eq(nsent(&f), before, "the gone child was sent something");
    cr_assert_eq(fake_upstream_refused(f.u), 0, "the session tried to write to its gone child");
    cr_assert_str_eq(fake_upstream_close_reason(f.u), "child exited");
    expect_only_error(st1, "\"a\"", "session ended: child exited");
    expect_only_error(st2, "2", "session ended: child exited");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_OTHER), 0);
    detach(st1);
    detach(st2);
}

/*
 * The session's side of its relay (session_relay_ops): a batch where the session's revision has
 * none is one invalid line, routed nowhere; once the session is closed (it stays allocated until
 * the end of the turn), a line of its child's, as an upstream still reading would pass it, and the
 * child's end reach no op of the session: the answer is not routed, the end not counted.
 */
Test(session, relay_calls_the_session_for_nothing_after_its_end)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    uint64_t c1;
    struct stream *st = post(&f, "\"a\"", &c1);
    uint64_t invalid = session_counters()->child_lines_invalid;
    child_says(&f, "[{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}]", c1);
    cr_assert_eq(session_counters()->child_lines_invalid, invalid + 1);
    cr_assert_eq(count_events(st), 0, "a batch of a revision that has none was routed");
    session_close(f.s, SESSION_END_DELETED, NULL);
    cr_assert(f.s->r.ended, "the relay ends with its session");
    char line[128];
    int n = snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}",
                     c1);
    session_child_line(line, (size_t)n, NULL, f.s);
    session_child_gone("child exited", f.s);
    cr_assert_eq(closed_by("deleted"), 1);
    cr_assert_eq(closed_by("child_exited"), 0, "an op after the end");
    expect_only_error(st, "\"a\"", "session ended: session deleted");
    detach(st);
}

/*
 * When the child's stdin is full the client's answer gets SESSION_E_BUSY ("try again later", a
 * 503): the in-flight entry must stay, so the retry reaches the child (it was deleted, and the
 * retry dropped as an answer to an unknown request).
 */
Test(session, client_answer_refused_for_a_full_stdin_can_be_retried)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"roots/list\"}");
    uint64_t id = the_one_request_id(get);
    char answer[128];
    snprintf(answer, sizeof answer, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", id);
    fake_upstream_set_full(f.u, true);
    cr_assert_eq(other(&f, answer), SESSION_E_BUSY);
    fake_upstream_set_full(f.u, false);
    size_t before = nsent(&f);
    cr_assert_eq(other(&f, answer), SESSION_OK);
    cr_assert_eq(nsent(&f), before + 1, "the retried answer never reached the child");
    cr_assert_str_eq(last_sent(&f), "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"result\":{}}");
    detach(get);
}

/* ========================================================================================= */
/* re-entries: the child closed its stdin and the next write fails inside a flow              */

Test(session, reentry_client_drop_whose_cancel_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    /* Two requests on the dropped stream (as a batch has), one on another. */
    struct stream *st1 = post(&f, "1", NULL);
    cr_assert_eq(request(&f, st1, "{\"jsonrpc\":\"2.0\",\"id\":11," TOOL_CALL), SESSION_OK);
    struct stream *st2 = post(&f, "\"b\"", NULL);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    detach(st1);
    expect_still_open(&f);
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 2);
    expect_child_end(&f, before);
    expect_only_error(st2, "\"b\"", "session ended: " STDIN_GONE);
    detach(st2);
}

Test(session, reentry_client_cancel_whose_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = post(&f, "\"a\"", NULL);
    struct stream *st2 = post(&f, "\"b\"", NULL);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                           "\"params\":{\"requestId\":\"a\"}}"),
                 SESSION_OK);
    expect_still_open(&f);
    cr_assert(stream_finished(st1));
    expect_child_end(&f, before);
    cr_assert_eq(count_events(st1), 0, "a cancelled request got an answer");
    expect_only_error(st2, "\"b\"", "session ended: " STDIN_GONE);
    detach(st1);
    detach(st2);
}

Test(session, reentry_client_answer_to_a_child_request_whose_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    struct stream *st = post(&f, "\"a\"", NULL);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"method\":\"elicitation/create\"}");
    uint64_t id = the_one_request_id(get);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    char answer[128];
    snprintf(answer, sizeof answer, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", id);
    cr_assert_eq(other(&f, answer), SESSION_OK, "the write is queued; its failure comes later");
    expect_still_open(&f);
    expect_child_end(&f, before);
    expect_only_error(st, "\"a\"", "session ended: " STDIN_GONE);
    cr_assert(stream_finished(get));
    detach(get);
    detach(st);
}

Test(session, reentry_delete_whose_cancel_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = post(&f, "\"a\"", NULL);
    struct stream *st2 = post(&f, "\"b\"", NULL);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    session_close(f.s, SESSION_END_DELETED, NULL);
    /* DELETE closed it first: the report that follows must not reach the closed session. */
    cr_assert_null(session_find(f.sid));
    cr_assert_eq(session_count(), 0);
    cr_assert(fake_upstream_gone_seen(f.u), "the write did not fail");
    cr_assert(fake_upstream_closed(f.u));
    expect_only_error(st1, "\"a\"", "session ended: session deleted");
    expect_only_error(st2, "\"b\"", "session ended: session deleted");
    turn();
    cr_assert_eq(fake_upstream_gone_calls(f.u), 0, "gone_cb after upstream_close");
    cr_assert_eq(closed_by("deleted"), 1);
    cr_assert_eq(closed_by("child_exited"), 0);
    cr_assert_eq(session_counters()->closed, 1);
    cr_assert_eq(nsent(&f), before);
    cr_assert_eq(fake_upstream_misuse(), 0);
    turn();
    detach(st1);
    detach(st2);
}

Test(session, reentry_batch_whose_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_BATCHES);
    struct stream *other_st = post(&f, "\"x\"", NULL);
    struct stream *st = open_stream(&f, false);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    cr_assert_eq(batch(&f, st,
                       "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"},"
                       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/roots/list_changed\"},"
                       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}]"),
                 SESSION_OK);
    expect_still_open(&f);
    /* The first request's write is queued (its failure comes later); the rest are refused now. */
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    expect_error(ev[0], "2", JSONRPC_INVALID_REQUEST, "not reading its input");
    cr_assert_not(stream_finished(st));
    expect_child_end(&f, before);
    expect_only_error(st, "1", "session ended: " STDIN_GONE);
    expect_only_error(other_st, "\"x\"", "session ended: " STDIN_GONE);
    detach(st);
    detach(other_st);
}

static struct fx *timeout_fx;

static bool
timeout_session_gone(void)
{
    return session_find(timeout_fx->sid) == NULL;
}

Test(session, reentry_request_timeout_whose_cancel_write_fails)
{
    start(GATEWAY SERVER "request_timeout_ms = 20\n");
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = post(&f, "\"a\"", NULL);
    struct stream *st2 = post(&f, "\"b\"", NULL);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    timeout_fx = &f;
    cr_assert(run_until(timeout_session_gone, 2000), "the session outlived its child");
    cr_assert_eq(session_count(), 0);
    cr_assert_geq(session_counters()->timeouts, 1);
    cr_assert_eq(closed_by("child_exited"), 1);
    cr_assert_eq(fake_upstream_gone_calls(f.u), 1);
    cr_assert_str_eq(fake_upstream_close_reason(f.u), STDIN_GONE);
    cr_assert_eq(nsent(&f), before);
    cr_assert_eq(fake_upstream_misuse(), 0);
    /* Each waiting stream got one error: its timeout, or the end of the session. */
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st1, ev, EV_MAX), 1);
    expect_error(ev[0], "\"a\"", JSONRPC_INTERNAL_ERROR, "");
    cr_assert(stream_finished(st1));
    cr_assert_eq(events(st2, ev, EV_MAX), 1);
    expect_error(ev[0], "\"b\"", JSONRPC_INTERNAL_ERROR, "");
    cr_assert(stream_finished(st2));
    turn();
    detach(st1);
    detach(st2);
}

Test(session, reentry_request_whose_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    size_t before = nsent(&f);
    struct stream *st = open_stream(&f, false);
    fake_upstream_fail_next_write(f.u);
    cr_assert_eq(request(&f, st, "{\"jsonrpc\":\"2.0\",\"id\":\"a\"," TOOL_CALL), SESSION_OK);
    expect_still_open(&f);
    expect_child_end(&f, before);
    expect_only_error(st, "\"a\"", "session ended: " STDIN_GONE);
    detach(st);
}

Test(session, reentry_grace_expiry_whose_cancel_write_fails)
{
    start(GATEWAY "disconnect_grace_ms = 20\n" SERVER);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st1 = post(&f, "\"a\"", NULL);
    struct stream *st2 = post(&f, "\"b\"", NULL);
    size_t before = nsent(&f);
    detach(st1);
    fake_upstream_fail_next_write(f.u);
    timeout_fx = &f;
    cr_assert(run_until(timeout_session_gone, 2000), "the session outlived its child");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 1);
    cr_assert_eq(closed_by("child_exited"), 1);
    cr_assert_eq(nsent(&f), before);
    cr_assert_eq(fake_upstream_misuse(), 0);
    expect_only_error(st2, "\"b\"", "session ended: " STDIN_GONE);
    detach(st2);
}

Test(session, reentry_error_answer_to_a_child_request_whose_write_fails)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    size_t before = nsent(&f);
    fake_upstream_fail_next_write(f.u);
    /* No stream is open: the gateway answers the child itself, from inside its line. */
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}");
    expect_still_open(&f);
    cr_assert_not(fake_upstream_line(f.u, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"),
                  "a gone child's line was delivered");
    expect_child_end(&f, before);
}

/* ========================================================================================= */
/* lifecycle                                                                                  */

Test(session, create_spawns_with_the_server_params_and_counts_the_owner)
{
    start(INI);
    struct fx f;
    open_session(&f);
    cr_assert_str_eq(fake_upstream_argv0(f.u), "/bin/false");
    cr_assert_str_eq(fake_upstream_tag(f.u), f.sid);
    cr_assert_eq(fake_upstream_stdin_max(f.u), CFG.stdin_queue_bytes);
    cr_assert_eq(f.s->state, SESSION_INITIALIZING);
    cr_assert_eq(session_find(f.sid), f.s);
    cr_assert_eq(session_count(), 1);
    cr_assert_eq(quota_of(QUOTA_GATEWAY, P->name, QUOTA_SESSIONS), 1);
    session_close(f.s, SESSION_END_EXPIRED, NULL);
    cr_assert_eq(quota_of(QUOTA_GATEWAY, P->name, QUOTA_SESSIONS), 0);
}

Test(session, spawn_failure_creates_nothing)
{
    start(INI);
    int status = 0;
    const char *err = NULL;
    fake_upstream_fail_spawn("spawn failed");
    cr_assert_null(session_create(&CFG.servers[0], P, NULL, &status, &err));
    cr_assert_eq(status, 500);
    cr_assert_str_eq(err, "spawn failed");
    fake_upstream_fail_spawn(upstream_no_fds);
    cr_assert_null(session_create(&CFG.servers[0], P, NULL, &status, &err));
    cr_assert_eq(status, 503, "running out of descriptors passes");
    cr_assert_eq(session_count(), 0);
    cr_assert_eq(quota_of(QUOTA_GATEWAY, P->name, QUOTA_SESSIONS), 0);
    cr_assert_eq(session_counters()->created, 0);
}

Test(session, reap_frees_closed_sessions_at_the_end_of_the_turn)
{
    start(INI);
    struct fx f, g;
    ready_session(&f, V_CURRENT);
    ready_session(&g, V_CURRENT);
    cr_assert_eq(session_count(), 2);
    session_close(f.s, SESSION_END_EXPIRED, NULL);
    /* Closed: out of the table at once, the struct still readable until reaped. */
    cr_assert_null(session_find(f.sid));
    cr_assert_eq(f.s->state, SESSION_CLOSED);
    cr_assert_null(f.s->u);
    cr_assert_eq(session_count(), 1);
    session_reap(); /* freed here (LeakSanitizer holds the test to it) */
    session_reap();
    cr_assert_eq(session_find(g.sid), g.s);
    session_close(g.s, SESSION_END_EXPIRED, NULL);
    turn(); /* the end-of-turn hook reaps it */
    cr_assert_eq(session_count(), 0);
    cr_assert_eq(closed_by("expired"), 2);
}

Test(session, close_twice_is_harmless)
{
    start(INI);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *st = post(&f, "1", NULL);
    size_t before = nsent(&f);
    session_close(f.s, SESSION_END_DELETED, NULL);
    session_close(f.s, SESSION_END_EXPIRED, "again");
    session_close(f.s, SESSION_END_CHILD, NULL);
    cr_assert_eq(nsent(&f), before + 1, "one cancel, once");
    cr_assert_eq(session_counters()->closed, 1);
    cr_assert_eq(closed_by("deleted"), 1);
    cr_assert_eq(closed_by("expired"), 0);
    cr_assert_str_eq(fake_upstream_close_reason(f.u), "session deleted");
    expect_only_error(st, "1", "session deleted");
    cr_assert_eq(quota_of(QUOTA_GATEWAY, P->name, QUOTA_SESSIONS), 0);
    turn();
    cr_assert_eq(session_count(), 0);
    detach(st);
}

Test(session, close_all_ends_every_session)
{
    start(INI);
    struct fx f[3];
    struct stream *st[3];
    uint64_t cid[3];
    for (int i = 0; i < 3; i++) {
        ready_session(&f[i], V_CURRENT);
        st[i] = post(&f[i], "1", &cid[i]);
    }
    size_t before[3];
    for (int i = 0; i < 3; i++)
        before[i] = nsent(&f[i]);
    session_close_all(SESSION_END_SHUTDOWN);
    cr_assert_eq(session_count(), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_null(session_find(f[i].sid));
        cr_assert(fake_upstream_closed(f[i].u));
        cr_assert_eq(nsent(&f[i]), before[i] + 1);
        expect_cancel(&f[i], before[i], cid[i], "gateway shutting down");
        expect_only_error(st[i], "1", "session ended: gateway shutting down");
    }
    cr_assert_eq(closed_by("shutdown"), 3);
    cr_assert_eq(upstream_live_count(), 0);
    turn();
    for (int i = 0; i < 3; i++)
        detach(st[i]);
}

/* ========================================================================================= */
/* the per-tool policy                                                                        */

#define POLICY_SERVER SERVER "denied_tools = t\ntool_scopes = s*:big\n"

Test(session, tool_policy_answers_a_hidden_call_itself_and_filters_lists)
{
    start(GATEWAY POLICY_SERVER);
    struct fx f;
    ready_session(&f, V_CURRENT);
    size_t before = nsent(&f);
    struct stream *st = open_stream(&f, false);
    cr_assert_eq(request(&f, st, "{\"jsonrpc\":\"2.0\",\"id\":5," TOOL_CALL), SESSION_OK);
    cr_assert_eq(nsent(&f), before, "a hidden tool's call reached the child");
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    cr_assert_str_eq(ev[0], "{\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-32602,\"message\":"
                            "\"Unknown tool: t\"}}");
    cr_assert(stream_finished(st), "answered, so the stream ends as after the child's answer");
    detach(st);
    /* A tools/call without an id gets no answer, and does not reach the child either. */
    cr_assert_eq(other(&f, "{\"jsonrpc\":\"2.0\"," TOOL_CALL), SESSION_OK);
    cr_assert_eq(nsent(&f), before);

    static const char *const list =
        "{\"tools\":[{\"name\":\"t\"},{\"name\":\"s1\",\"x\":[1]},{\"name\":\"u\"}],"
        "\"nextCursor\":\"n\"}";
    st = open_stream(&f, false);
    cr_assert_eq(request(&f, st, "{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"method\":\"tools/list\"}"),
                 SESSION_OK);
    child_answers(&f, sent_id(&f, nsent(&f) - 1), list);
    expect_event(st, "{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"result\":{\"tools\":[{\"name\":\"u\"}],"
                     "\"nextCursor\":\"n\"}}");
    detach(st);
    /* A token granting big sees s1: its grants went with the request to its answer. */
    grants = (struct policy_grants){
        CFG.servers[0].policy, policy_grants(CFG.servers[0].policy, (const char *[]){ "big" }, 1)
    };
    st = open_stream(&f, false);
    cr_assert_eq(request(&f, st, "{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"method\":\"tools/list\"}"),
                 SESSION_OK);
    uint64_t id = sent_id(&f, nsent(&f) - 1);
    grants =
        (struct policy_grants){ NULL, 0 }; /* what a later request's token says changes nothing */
    child_answers(&f, id, list);
    expect_event(st, "{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"result\":{\"tools\":[{\"name\":\"s1\","
                     "\"x\":[1]},{\"name\":\"u\"}],\"nextCursor\":\"n\"}}");
    detach(st);
}

Test(session, tool_policy_in_a_batch_answers_the_hidden_call_and_waits_for_the_rest)
{
    start(GATEWAY POLICY_SERVER);
    struct fx f;
    ready_session(&f, V_BATCHES);
    size_t before = nsent(&f);
    struct stream *st = open_stream(&f, false);
    cr_assert_eq(batch(&f, st,
                       "[{\"jsonrpc\":\"2.0\",\"id\":1," TOOL_CALL ","
                       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"u\"}}]"),
                 SESSION_OK);
    cr_assert_eq(nsent(&f), before + 1, "only u reached the child");
    char ev[EV_MAX][EV_LEN];
    cr_assert_eq(events(st, ev, EV_MAX), 1);
    expect_error(ev[0], "1", JSONRPC_INVALID_PARAMS, "Unknown tool: t");
    cr_assert_not(stream_finished(st), "u is still waited for");
    child_answers(&f, sent_id(&f, before), "{}");
    expect_event(st, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
    cr_assert(stream_finished(st));
    detach(st);
    /* A batch of hidden calls only: each answered, and the stream ends. */
    st = open_stream(&f, false);
    cr_assert_eq(batch(&f, st,
                       "[{\"jsonrpc\":\"2.0\",\"id\":3," TOOL_CALL ","
                       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"s2\"}}]"),
                 SESSION_OK);
    cr_assert_eq(events(st, ev, EV_MAX), 2);
    expect_error(ev[0], "3", JSONRPC_INVALID_PARAMS, "Unknown tool: t");
    expect_error(ev[1], "4", JSONRPC_INVALID_PARAMS, "Unknown tool: s2");
    cr_assert(stream_finished(st));
    cr_assert_eq(nsent(&f), before + 1);
    detach(st);
}

/*
 * A child's request on a stream the client leaves for good without reading it (replay off: the
 * dropped GET is discarded, the POST stream already let go of once its answer came) is answered
 * to the child with an error, as for an abandoned stream: it no longer waits for ever. One the
 * client read stays, to be answered by POST.
 */
#define INI_NO_REPLAY GATEWAY "replay_buffer_bytes = 0\n" SERVER

static bool
child_got_error_for(struct fx *f, size_t from, const char *id)
{
    for (size_t i = from; i < nsent(f); i++)
        if (strstr(sent(f, i), "\"error\"") != NULL && strstr(sent(f, i), id) != NULL)
            return true;
    return false;
}

/* The child's request r1 left the table, answered to the child with an error after before. */
/* A session without replay, a POST in flight (its child id in *c1), and the child asking r1. */
static struct stream *
post_then_r1(struct fx *f, uint64_t *c1)
{
    start(INI_NO_REPLAY);
    ready_session(f, V_CURRENT);
    struct stream *st = post(f, "1", c1);
    child_says(f, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"roots/list\"}");
    return st;
}

static void
expect_r1_ended(struct fx *f, size_t before)
{
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 0, "the child's request waits for ever");
    cr_assert(child_got_error_for(f, before, "\"r1\""), "no error answer for the child's request");
}

Test(session, child_request_on_a_get_stream_dropped_unread_is_answered_with_an_error)
{
    start(INI_NO_REPLAY);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"roots/list\"}");
    cr_assert_eq(session_inflight(PENDING_TO_CLIENT), 1);
    size_t before = nsent(&f);
    detach(get); /* unread */
    expect_r1_ended(&f, before);
}

Test(session, child_request_on_an_answered_post_stream_dropped_unread_is_answered_with_an_error)
{
    struct fx f;
    uint64_t c1;
    struct stream *st = post_then_r1(&f, &c1);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", c1);
    cr_assert(stream_ended(st));
    size_t before = nsent(&f);
    detach(st); /* neither the question nor the answer read */
    expect_r1_ended(&f, before);
}

Test(session, child_request_the_client_read_stays_answerable_after_the_drop)
{
    start(INI_NO_REPLAY);
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":\"roots/list\"}");
    uint64_t id = the_one_request_id(get);
    size_t before = nsent(&f);
    detach(get);
    cr_assert_eq(nsent(&f), before, "the child was told something of a request the client read");
    char answer[128];
    snprintf(answer, sizeof answer, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", id);
    cr_assert_eq(other(&f, answer), SESSION_OK);
    cr_assert_str_eq(last_sent(&f), "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":{}}");
}

/*
 * A reload that lowers stream_queue_bytes under a stream already open: the stream that pauses the
 * child must also resume it once read. Its drain's low water was half the old ceiling, which a
 * stream paused at the new one may never pass: the child stayed paused for good.
 */
Test(session, a_stream_open_before_a_reload_that_lowered_its_ceiling_resumes_the_child)
{
    start(INI); /* stream_queue_bytes at its default */
    struct fx f;
    ready_session(&f, V_CURRENT);
    struct stream *get = open_stream(&f, true);
    char err[512] = "";
    cr_assert_eq(config_load_string(GATEWAY "stream_queue_bytes = 65536\n" SERVER, "reload.ini",
                                    &CFG2, err, sizeof err),
                 0, "%s", err);
    reloaded = true;
    session_set_config(&CFG2);
    char *line = big_notification(40000);
    cr_assert(fake_upstream_line(f.u, line));
    cr_assert(fake_upstream_line(f.u, line));
    cr_assert(fake_upstream_paused(f.u),
              "over the new stream_queue_bytes and the child still read");
    char *out = xmalloc(1 << 17);
    size_t n;
    for (int i = 0; i < 64 && (n = stream_read(get, out, 4096)) > 0; i++)
        ;
    cr_assert_eq(stream_pending(get), 0, "the stream was not read to its end");
    cr_assert_not(fake_upstream_paused(f.u), "the stream was read and its child stays paused");
    free(out);
    free(line);
    detach(get);
}

/*
 * A stream opened without replay whose client dropped it while a reload's disconnect_grace_ms
 * held its request: the answer ends it and, not replayable, it goes; the child's request it
 * carried, never read, is answered with an error rather than waited for for ever.
 */
Test(session, child_request_on_a_stream_let_go_of_during_its_grace_is_answered_with_an_error)
{
    struct fx f;
    uint64_t c1;
    struct stream *st = post_then_r1(&f, &c1);
    char err[512] = "";
    cr_assert_eq(config_load_string(GATEWAY "disconnect_grace_ms = 500\n" SERVER, "reload.ini",
                                    &CFG2, err, sizeof err),
                 0, "%s", err);
    reloaded = true;
    session_set_config(&CFG2);
    detach(st); /* unread: its request waits for a resume */
    cr_assert_eq(session_inflight(PENDING_TO_CHILD), 1, "the grace did not hold the request");
    size_t before = nsent(&f);
    child_says(&f, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", c1);
    expect_r1_ended(&f, before);
}
