/* SPDX-License-Identifier: MIT */
/*
 * relay: the conversation with one child that sessions and pool children share. An entry's timer
 * goes with the entry, whoever deletes it (the answered call that left a timer armed on a freed
 * entry); a cancel is written once and marks the entry; a task-augmented request is marked, never
 * sent a cancel; lingering cancelled entries make room oldest first and only past the ceiling;
 * splices replace and insert in any order; answers are found by the minted id only, per
 * direction; the timer fires once for a waiting entry and never for a cancelled one. The child is
 * the send callback's list of lines. Through relay.h only. PROTOCOL.md and deploy/README.md list
 * the cancel reasons by hand: each label with its text as relay_reasons has it, each once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "relay.h"
#include "slurp.h"

TestSuite(relay, .timeout = 30);

static struct loop *L;
static struct relay R;
static char sent[8][256]; /* what the child read, a line each */
static int nsent;
static bool refuse; /* the child's stdin refuses */
static struct pending *expired[8];
static int nexpired;

static int
child_send(void *arg, const struct iovec *iov, int n)
{
    cr_assert_eq(arg, &R);
    if (refuse)
        return -1;
    cr_assert_lt(nsent, 8);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_lt(at + iov[i].iov_len, sizeof sent[0]);
        memcpy(sent[nsent] + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    sent[nsent++][at] = '\0';
    return 0;
}

/* --- the owner: each op records its call ------------------------------------------------------ */

enum op { OP_ANSWER, OP_STRAY, OP_REQUEST, OP_PROGRESS, OP_CANCELLED, OP_SUBSCRIPTION, OP_LOG,
          OP_NOTIFICATION, OP_EXPIRED, OP_GONE, OP_N };
static struct {
    enum op op;
    struct pending *p;
    char line[128];
} calls[16];
static int ncalls;
static bool gone_seen;  /* ops->gone was called: nothing may follow */
static bool end_in_op;  /* the next op ends the relay (relay_end), as a closing owner does */
static bool stray_mine; /* the stray op claims the answer */

static void
record(void *owner, enum op op, struct pending *p, const char *line, size_t len)
{
    cr_assert_eq(owner, &R, "ops get relay_init's owner");
    cr_assert(!gone_seen, "an op after gone");
    cr_assert(!R.ended || op == OP_GONE, "an op after the relay ended");
    cr_assert_lt(ncalls, 16);
    calls[ncalls].op = op;
    calls[ncalls].p = p;
    snprintf(calls[ncalls].line, sizeof calls[0].line, "%.*s", (int)len, line != NULL ? line : "");
    ncalls++;
    if (op == OP_GONE)
        gone_seen = true;
    if (end_in_op)
        relay_end(&R);
}

static void
on_answer(void *owner, struct pending *p, const char *line, size_t len,
          const struct jsonrpc_info *info)
{
    cr_assert(info->kind == JSONRPC_RESULT || info->kind == JSONRPC_ERROR);
    cr_assert_eq(p->state, PENDING_FORWARDED, "an answer op only for an entry still waiting");
    record(owner, OP_ANSWER, p, line, len);
}

static bool
on_stray(void *owner, const char *line, const struct jsonrpc_info *info)
{
    record(owner, OP_STRAY, NULL, line, info->id.off + info->id.len);
    return stray_mine;
}

static void
on_request(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    cr_assert_eq(info->kind, JSONRPC_REQUEST);
    record(owner, OP_REQUEST, NULL, line, len);
}

static void
on_progress(void *owner, struct pending *p, const char *line, size_t len,
            const struct jsonrpc_info *info)
{
    cr_assert_str_eq(info->method, "notifications/progress");
    cr_assert_eq(p->state, PENDING_FORWARDED);
    record(owner, OP_PROGRESS, p, line, len);
}

static void
on_cancelled(void *owner, struct pending *p, const char *line, size_t len,
             const struct jsonrpc_info *info)
{
    cr_assert_str_eq(info->method, "notifications/cancelled");
    record(owner, OP_CANCELLED, p, line, len);
}

static void
on_subscription(void *owner, struct pending *p, const char *line, size_t len,
                const struct jsonrpc_info *info)
{
    (void)info;
    cr_assert_str_eq(p->method, "subscriptions/listen");
    record(owner, OP_SUBSCRIPTION, p, line, len);
}

static void
on_log(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    cr_assert_str_eq(info->method, "notifications/message");
    record(owner, OP_LOG, NULL, line, len);
}

static void
on_notification(void *owner, const char *line, size_t len, const struct jsonrpc_info *info)
{
    cr_assert_eq(info->kind, JSONRPC_NOTIFICATION);
    record(owner, OP_NOTIFICATION, NULL, line, len);
}

static void
on_expired(void *owner, struct pending *p)
{
    cr_assert_null(p->timer, "the timer is gone before the owner hears of it");
    record(owner, OP_EXPIRED, p, NULL, 0);
    expired[nexpired++] = p;
}

static void
on_gone(void *owner, const char *reason)
{
    record(owner, OP_GONE, NULL, reason, strlen(reason));
}

/* Every op (a pool child's kind of owner), and the fewest (a session's). */
static const struct relay_ops all_ops = {
    .answer = on_answer,
    .stray = on_stray,
    .request = on_request,
    .progress = on_progress,
    .cancelled = on_cancelled,
    .subscription = on_subscription,
    .log = on_log,
    .notification = on_notification,
    .expired = on_expired,
    .gone = on_gone,
};
static const struct relay_ops few_ops = {
    .answer = on_answer,
    .request = on_request,
    .progress = on_progress,
    .cancelled = on_cancelled,
    .notification = on_notification,
    .expired = on_expired,
    .gone = on_gone,
};
static uint64_t n_invalid, n_late, n_unattributed;

static void
setup(void)
{
    L = loop_new();
    relay_init(&R, L, "test", "srv", child_send, &all_ops, &R);
    R.invalid = &n_invalid;
    R.late = &n_late;
    R.unattributed = &n_unattributed;
    nsent = nexpired = ncalls = 0;
    n_invalid = n_late = n_unattributed = 0;
    refuse = gone_seen = end_in_op = stray_mine = false;
}

static void
teardown(void)
{
    relay_clear(&R);
    loop_free(L);
}

static struct pending *
add(const char *id)
{
    return pending_add(&R.pt, PENDING_TO_CHILD, id, strlen(id), "tools/call", 1, util_now_ms());
}

static void
stop(void *arg)
{
    (void)arg;
    loop_stop(L);
}

/* Runs the loop for ms: every timer due by then fires. */
static void
run_for(uint64_t ms)
{
    loop_timer_add(L, ms, stop, NULL);
    loop_run(L);
}

Test(relay, timer_goes_with_its_entry, .init = setup, .fini = teardown)
{
    struct pending *answered = add("\"a\"");
    struct pending *waiting = add("\"b\"");
    relay_arm_timeout(&R, answered, 20, 0);
    relay_arm_timeout(&R, waiting, 20, 0);
    cr_assert_not_null(answered->timer);
    pending_del(&R.pt, answered); /* its answer came: the timer must not fire on freed memory */
    run_for(60);
    cr_assert_eq(nexpired, 1);
    cr_assert_eq(expired[0], waiting);
}

Test(relay, timer_never_fires_for_a_cancelled_entry, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    relay_arm_timeout(&R, p, 20, 0);
    cr_assert(relay_cancel(&R, p, RELAY_CANCEL_DISCONNECT));
    cr_assert_null(p->timer);
    run_for(60);
    cr_assert_eq(nexpired, 0);
}

Test(relay, clear_takes_timers_too, .init = setup, .fini = teardown)
{
    for (int i = 0; i < 4; i++)
        relay_arm_timeout(&R, add("7"), 20, 0);
    relay_clear(&R);
    cr_assert_eq(R.pt.count, 0);
    run_for(60);
    cr_assert_eq(nexpired, 0);
}

Test(relay, timeout_capped_by_max_from_start, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    p->start_ms = util_now_ms();
    relay_arm_timeout(&R, p, 100000, 30);
    cr_assert_leq(p->deadline_ms, p->start_ms + 30);
    relay_arm_timeout(&R, add("2"), 0, 0);
    run_for(80);
    cr_assert_eq(nexpired, 1, "timeout 0 arms nothing; the capped one fired");
}

Test(relay, cancel_is_written_once, .init = setup, .fini = teardown)
{
    struct pending *p = add("\"x\"");
    uint64_t timeouts = relay_cancels(RELAY_CANCEL_TIMEOUT);
    cr_assert(relay_cancel(&R, p, RELAY_CANCEL_TIMEOUT));
    cr_assert_not(relay_cancel(&R, p, RELAY_CANCEL_DISCONNECT));
    cr_assert_eq(nsent, 1);
    cr_assert_eq(relay_cancels(RELAY_CANCEL_TIMEOUT), timeouts + 1, "counted once");
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 0);
    cr_assert_eq(p->state, PENDING_CANCELLED);
    cr_assert(strstr(sent[0], "\"method\":\"notifications/cancelled\"") != NULL, "%s", sent[0]);
    cr_assert(strstr(sent[0], "\"requestId\":1") != NULL, "the id the child saw: %s", sent[0]);
    cr_assert(strstr(sent[0], "request timed out") != NULL, "%s", sent[0]);
    cr_assert_eq(sent[0][strlen(sent[0]) - 1], '\n');
}

Test(relay, cancel_refused_by_stdin_still_marks, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    refuse = true;
    cr_assert(relay_cancel(&R, p, RELAY_CANCEL_SHUTDOWN));
    cr_assert_eq(p->state, PENDING_CANCELLED, "a late answer must still be dropped");
}

Test(relay, task_is_marked_never_cancelled, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    p->task = true;
    cr_assert_not(relay_cancel(&R, p, RELAY_CANCEL_DISCONNECT));
    cr_assert_eq(nsent, 0);
    cr_assert_eq(p->state, PENDING_CANCELLED);
    cr_assert_eq(relay_cancels(RELAY_CANCEL_DISCONNECT), 0, "a task is not counted");
}

Test(relay, counters_per_server_in_metrics, .init = setup, .fini = teardown)
{
    relay_cancel(&R, add("1"), RELAY_CANCEL_HOLD);
    relay_count(relay_stats_of("other"), RELAY_CANCEL_CHILD);
    relay_count_to_client(R.stats);
    cr_assert_eq(relay_stats_of("srv"), R.stats, "one row per server name");
    struct buf b;
    buf_init(&b, 1 << 20);
    relay_metrics(&b);
    cr_assert_eq(buf_append(&b, "", 1), 0);
    const char *m = buf_head(&b);
    cr_assert(strstr(m, "# TYPE mcpgw_cancels_total counter\n") != NULL, "%s", m);
    cr_assert(strstr(m, "mcpgw_cancels_total{server=\"srv\",direction=\"to_child\",reason=\"input_"
                        "not_provided\"} 1\n")
                  != NULL,
              "%s", m);
    cr_assert(strstr(m, "mcpgw_cancels_total{server=\"other\",direction=\"to_child\",reason="
                        "\"child_ended\"} 1\n")
                  != NULL,
              "%s", m);
    cr_assert(
        strstr(m,
               "mcpgw_cancels_total{server=\"srv\",direction=\"to_client\",reason=\"child\"} 1\n")
            != NULL,
        "%s", m);
    cr_assert(
        strstr(m,
               "mcpgw_cancels_total{server=\"other\",direction=\"to_child\",reason=\"reload\"} 0\n")
            != NULL,
        "%s", m);
    buf_clear(&b);
    relay_module_free();
}

Test(relay, make_room_drops_oldest_lingering_only, .init = setup, .fini = teardown)
{
    struct pending *a = add("1"), *b = add("2"), *c = add("3"), *d = add("4");
    relay_cancel(&R, b, RELAY_CANCEL_OTHER);
    relay_cancel(&R, d, RELAY_CANCEL_OTHER);
    relay_make_room(&R, 10);
    cr_assert_eq(R.pt.count, 4, "under the ceiling: nothing goes");
    relay_make_room(&R, 3);
    cr_assert_eq(R.pt.count, 2, "at the ceiling: lingering entries go until below it");
    cr_assert_eq(R.pt.head, a);
    cr_assert_eq(R.pt.tail, c);
    relay_make_room(&R, 1);
    cr_assert_eq(R.pt.count, 2, "waiting entries never go");
}

Test(relay, splice_in_any_order, .init = setup, .fini = teardown)
{
    const char *m = "{\"id\":\"abc\",\"params\":{\"_meta\":{\"progressToken\":\"t\"}}}";
    const char *id = strstr(m, "\"abc\""), *tok = strstr(m, "\"t\"");
    struct relay_edit ed[3] = {
        { (size_t)(tok - m), 3, "9", 1 },
        { (size_t)(id - m), 5, "9", 1 },
        { 1, 0, "\"x\":1,", 6 },
    };
    cr_assert_eq(relay_send_spliced(&R, m, strlen(m), ed, 3), 0);
    cr_assert_str_eq(sent[0], "{\"x\":1,\"id\":9,\"params\":{\"_meta\":{\"progressToken\":9}}}\n");
}

Test(relay, answers_found_by_minted_id_per_direction, .init = setup, .fini = teardown)
{
    struct pending *p = add("\"client-id\"");
    struct pending *q = pending_add(&R.pt, PENDING_TO_CLIENT, "5", 1, "roots/list", 1, 0);
    uint64_t late = 0;
    char line[64];
    struct jsonrpc_info info;
    snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{}}",
             (unsigned long long)p->gw_id);
    cr_assert_eq(jsonrpc_scan(line, strlen(line), &info, NULL), JSONRPC_OK);
    cr_assert_eq(relay_answered(&R, PENDING_TO_CHILD, line, &info, &late), p);
    cr_assert_null(relay_answered(&R, PENDING_TO_CLIENT, line, &info, &late), "other direction");
    snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":\"%llu\",\"result\":{}}",
             (unsigned long long)q->gw_id);
    cr_assert_eq(jsonrpc_scan(line, strlen(line), &info, NULL), JSONRPC_OK);
    cr_assert_null(relay_answered(&R, PENDING_TO_CLIENT, line, &info, &late),
                   "a string is not minted");
    cr_assert_eq(late, 0);
    relay_cancel(&R, p, RELAY_CANCEL_TIMEOUT);
    snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{}}",
             (unsigned long long)p->gw_id);
    cr_assert_eq(jsonrpc_scan(line, strlen(line), &info, NULL), JSONRPC_OK);
    size_t before = R.pt.count;
    cr_assert_null(relay_answered(&R, PENDING_TO_CHILD, line, &info, &late), "a late answer");
    cr_assert_eq(late, 1, "counted");
    cr_assert_eq(R.pt.count, before - 1, "the cancelled entry is forgotten");
}

/* --- a child's lines: one op per message ------------------------------------------------------ */

/* The child writes text (a copy: the relay may flatten it in place). */
static void
feed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
feed(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < sizeof line);
    relay_line(&R, line, (size_t)n);
}

static unsigned long long
gw(const struct pending *p)
{
    return (unsigned long long)p->gw_id;
}

Test(relay, line_answer_matched_once_late_and_unknown_dropped, .init = setup, .fini = teardown)
{
    struct pending *p = add("\"a\"");
    struct pending *q = add("\"b\"");
    feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{}}", gw(p));
    cr_assert_eq(ncalls, 1);
    cr_assert_eq(calls[0].op, OP_ANSWER);
    cr_assert_eq(calls[0].p, p, "the entry its minted id names");
    pending_del(&R.pt, p); /* the owner ends it */
    relay_cancel(&R, q, RELAY_CANCEL_TIMEOUT);
    size_t before = R.pt.count;
    feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"error\":{\"code\":1,\"message\":\"x\"}}", gw(q));
    cr_assert_eq(ncalls, 1, "a late answer reaches no op");
    cr_assert_eq(n_late, 1, "counted late");
    cr_assert_eq(R.pt.count, before - 1, "the cancelled entry is forgotten");
    feed("{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}");
    cr_assert_eq(ncalls, 2, "an unknown id goes to stray");
    cr_assert_eq(calls[1].op, OP_STRAY);
    stray_mine = true;
    feed("{\"jsonrpc\":\"2.0\",\"id\":\"gw-sub-1\",\"result\":{}}");
    cr_assert_eq(calls[2].op, OP_STRAY);
    R.ops = &few_ops; /* no stray op: logged and dropped */
    feed("{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}");
    cr_assert_eq(ncalls, 3);
    cr_assert_eq(n_late + n_unattributed + n_invalid, 1);
}

/*
 * A task-augmented request cancelled before its answer (no notifications/cancelled goes for one):
 * its late CreateTaskResult names a task the child now runs for nobody, so the relay sends the
 * child tasks/cancel of it, once, under an id of the gateway's own, and drops the child's answer
 * to that; a task already over, a plain request's late answer and an error send nothing. The same for every owner: the fewest ops (a session's) as well as all (a pool
 * child's). A refused send is logged, nothing else changes.
 */
Test(relay, line_late_task_is_cancelled_at_the_child, .init = setup, .fini = teardown)
{
    for (int round = 0; round < 2; round++) {
        R.ops = round == 0 ? &all_ops : &few_ops;
        nsent = ncalls = 0;
        n_late = 0;
        struct pending *t = add("\"t\"");
        struct pending *q = add("\"q\"");
        struct pending *done = add("\"done\"");
        struct pending *err = add("\"err\"");
        t->task = done->task = err->task = true;
        relay_cancel(&R, t, RELAY_CANCEL_DELETED);
        relay_cancel(&R, q, RELAY_CANCEL_DELETED);
        relay_cancel(&R, done, RELAY_CANCEL_TIMEOUT);
        relay_cancel(&R, err, RELAY_CANCEL_CLIENT);
        cr_assert_eq(nsent, 1, "only the plain request got notifications/cancelled");
        uint64_t tid = gw(t);
        feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{\"task\":{\"taskId\":\"x\\\"1\","
             "\"status\":\"working\"}}}",
             (unsigned long long)tid);
        cr_assert_eq(ncalls, 0, "no op: the relay's own");
        cr_assert_eq(nsent, 2);
        int n = 0;
        char id[32];
        cr_assert_eq(sscanf(sent[1], "{\"jsonrpc\":\"2.0\",\"id\":\"%31[^\"]\"%n", id, &n), 1, "%s",
                     sent[1]);
        cr_assert(strncmp(id, "mcpgw-task-", 11) == 0, "%s", id);
        cr_assert_str_eq(sent[1] + n,
                         ",\"method\":\"tasks/cancel\",\"params\":{\"taskId\":\"x\\\"1\"}}\n");
        cr_assert_eq(n_late, 1, "still counted late");
        /* Over already, or no task in it: nothing more goes. */
        feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{\"task\":{\"taskId\":\"y\","
             "\"status\":\"completed\"}}}",
             (unsigned long long)gw(done));
        feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{}}", (unsigned long long)gw(q));
        feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"error\":{\"code\":-32603,\"message\":\"no\"}}",
             (unsigned long long)gw(err));
        cr_assert_eq(nsent, 2);
        cr_assert_eq(ncalls, 0, "late answers reach no op");
        cr_assert_eq(R.pt.count, 0, "every entry forgotten");
        /* The child's answer to the gateway's tasks/cancel is dropped, never stray. */
        feed("{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"taskId\":\"x\",\"status\":"
             "\"cancelled\"}}",
             id);
        cr_assert_eq(ncalls, 0, "the answer to the gateway's own request is no owner's");
        /* Once: the same late answer again names an unknown id (stray, with all ops). */
        feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{\"task\":{\"taskId\":\"x\"}}}",
             (unsigned long long)tid);
        cr_assert_eq(nsent, 2, "once");
        cr_assert_eq(ncalls, round == 0 ? 1 : 0);
    }
    /* A child whose stdin refuses: the cancel is lost (logged), nothing else changes. */
    struct pending *u = add("\"u\"");
    u->task = true;
    relay_cancel(&R, u, RELAY_CANCEL_CLIENT);
    refuse = true;
    feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{\"task\":{\"taskId\":\"z\"}}}", gw(u));
    cr_assert_eq(nsent, 2);
    cr_assert_eq(R.pt.count, 0);
}

Test(relay, line_request_and_notifications_each_one_op, .init = setup, .fini = teardown)
{
    feed("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}");
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}");
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
    cr_assert_eq(ncalls, 3);
    cr_assert_eq(calls[0].op, OP_REQUEST);
    cr_assert_eq(calls[1].op, OP_LOG);
    cr_assert_eq(calls[2].op, OP_NOTIFICATION);
    R.ops = &few_ops; /* no log op: a log line is any notification */
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}");
    cr_assert_eq(ncalls, 4);
    cr_assert_eq(calls[3].op, OP_NOTIFICATION);
}

Test(relay, line_progress_by_client_token_or_minted_id, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    pending_set_token(p, "\"tok\"", 5);
    struct pending *bare = add("2");
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"
         "\"tok\",\"progress\":1}}");
    cr_assert_eq(ncalls, 1);
    cr_assert_eq(calls[0].op, OP_PROGRESS);
    cr_assert_eq(calls[0].p, p);
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"
         "\"other\",\"progress\":1}}");
    cr_assert_eq(ncalls, 1, "a token of no request");
    cr_assert_eq(n_unattributed, 1);
    /* minted: the child saw the minted id as the token */
    R.minted_tokens = true;
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"
         "%llu,\"progress\":1}}",
         gw(p));
    cr_assert_eq(ncalls, 2);
    cr_assert_eq(calls[1].p, p);
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"
         "%llu,\"progress\":1}}",
         gw(bare));
    cr_assert_eq(ncalls, 2, "the minted id of a request that set no token");
    cr_assert_eq(n_unattributed, 2);
    relay_cancel(&R, p, RELAY_CANCEL_TIMEOUT);
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"
         "%llu,\"progress\":2}}",
         gw(p));
    cr_assert_eq(ncalls, 2, "progress of a cancelled request");
    cr_assert_eq(n_late, 1);
}

Test(relay, line_cancel_names_the_childs_request, .init = setup, .fini = teardown)
{
    struct pending *q = pending_add(&R.pt, PENDING_TO_CLIENT, "\"q1\"", 4, "roots/list", 1, 0);
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
         "\"q1\"}}");
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
         "\"q9\"}}");
    cr_assert_eq(ncalls, 2, "each cancel once, known or not");
    cr_assert_eq(calls[0].op, OP_CANCELLED);
    cr_assert_eq(calls[0].p, q);
    cr_assert_null(calls[1].p);
}

Test(relay, line_subscription_only_with_its_op, .init = setup, .fini = teardown)
{
    struct pending *l =
        pending_add(&R.pt, PENDING_TO_CHILD, "\"l\"", 3, "subscriptions/listen", 1, 0);
    struct pending *c = add("\"c\"");
#define SUB_NOTE                                                                                   \
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"_meta\":{"   \
    "\"io.modelcontextprotocol/subscriptionId\":%llu}}}"
    feed(SUB_NOTE, gw(l));
    cr_assert_eq(ncalls, 1);
    cr_assert_eq(calls[0].op, OP_SUBSCRIPTION);
    cr_assert_eq(calls[0].p, l);
    feed(SUB_NOTE, gw(c));
    cr_assert_eq(ncalls, 1, "the minted id of a request that is no listen");
    cr_assert_eq(n_unattributed, 1);
    R.ops = &few_ops;
    feed(SUB_NOTE, gw(l));
    cr_assert_eq(ncalls, 2);
    cr_assert_eq(calls[1].op, OP_NOTIFICATION, "without the op, the method decides");
}

Test(relay, line_batch_split_only_when_taken, .init = setup, .fini = teardown)
{
    const char *batch = "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\"},\r\n"
                        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]";
    feed("%s", batch);
    cr_assert_eq(ncalls, 0, "a batch where none is taken");
    cr_assert_eq(n_invalid, 1);
    R.batches = true;
    feed("%s", batch);
    cr_assert_eq(ncalls, 2, "one op per element");
    cr_assert_eq(calls[0].op, OP_NOTIFICATION);
    cr_assert_eq(calls[1].op, OP_REQUEST);
    cr_assert_null(strchr(calls[1].line, '\n'), "flattened before the op");
    feed("[[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\"}]]");
    feed("[]");
    cr_assert_eq(ncalls, 2, "a nested batch and an empty one");
    cr_assert_eq(n_invalid, 3);
    end_in_op = true; /* the owner closes in the first element's op */
    feed("%s", batch);
    cr_assert_eq(ncalls, 3, "nothing after the owner ended the relay");
    feed("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/a\"}");
    relay_gone(&R, "child exited");
    cr_assert_eq(ncalls, 3, "no op at all once ended, not even gone");
}

Test(relay, line_nothing_after_gone, .init = setup, .fini = teardown)
{
    struct pending *p = add("1");
    relay_arm_timeout(&R, p, 10, 0);
    feed("not json");
    cr_assert_eq(n_invalid, 1);
    relay_gone(&R, "child exited");
    relay_gone(&R, "child closed its stdout");
    cr_assert_eq(ncalls, 1, "gone once");
    cr_assert_eq(calls[0].op, OP_GONE);
    cr_assert_str_eq(calls[0].line, "child exited");
    feed("{\"jsonrpc\":\"2.0\",\"id\":%llu,\"result\":{}}", gw(p));
    run_for(60);
    cr_assert_null(p->timer, "the timer ran");
    cr_assert_eq(ncalls, 1, "no answer, no expiry after gone");
}

Test(relay, every_status_has_its_own_text)
{
    static const char *seen[RELAY_E_CREDENTIALS_BAD + 1];
    for (int st = RELAY_OK; st <= RELAY_E_CREDENTIALS_BAD; st++) {
        seen[st] = relay_status_text(st);
        cr_assert_str_neq(seen[st], "internal error", "status %d has a text", st);
        for (int o = RELAY_OK; o < st; o++)
            cr_assert_str_neq(seen[o], seen[st], "statuses %d and %d say the same", o, st);
    }
    cr_assert_str_eq(relay_status_text(RELAY_E_CREDENTIALS_BAD + 1), "internal error");
}

Test(relay, error_to_child, .init = setup, .fini = teardown)
{
    relay_error_to_child(&R, "\"q1\"", 4, -32601, "not available");
    relay_error_to_child(&R, NULL, 0, -32603, "x");
    cr_assert_eq(nsent, 2);
    cr_assert(strstr(sent[0], "\"id\":\"q1\"") != NULL, "%s", sent[0]);
    cr_assert(strstr(sent[0], "-32601") != NULL, "%s", sent[0]);
    cr_assert(strstr(sent[1], "\"id\":null") != NULL, "%s", sent[1]);
}

/* --- the documents that list the reasons by hand ------------------------------------------- */

/* A label and its text as doc lists them: counted in seen, or a failure naming what differs. */
static void
doc_pair(const char *doc, const char *label, size_t ll, const char *text, size_t tl,
         unsigned seen[RELAY_CANCEL_N])
{
    for (size_t i = 0; i < RELAY_CANCEL_N; i++) {
        const struct relay_reason_info *r = &relay_reasons[i];
        if (strlen(r->label) != ll || memcmp(r->label, label, ll) != 0)
            continue;
        cr_expect(strlen(r->text) == tl && memcmp(r->text, text, tl) == 0,
                  "%s gives `%s` the text \"%.*s\"; src/mcp/relay.c's relay_reasons gives \"%s\"",
                  doc, r->label, (int)tl, text, r->text);
        seen[i]++;
        return;
    }
    cr_expect(false, "%s lists `%.*s` \"%.*s\", which is no reason of enum relay_reason", doc,
              (int)ll, label, (int)tl, text);
}

/* The document doc (a path from the source root), whole. */
static char *
doc_read(const char *doc)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", MCPGW_SOURCE_ROOT, doc);
    char *md = slurp(path);
    cr_assert_not_null(md, "cannot read %s", path);
    return md;
}

static void
doc_lists_each_once(const char *doc, const unsigned seen[RELAY_CANCEL_N])
{
    for (size_t i = 0; i < RELAY_CANCEL_N; i++)
        cr_expect_eq(seen[i], 1, "%s lists `%s` \"%s\" %u times, not once", doc,
                     relay_reasons[i].label, relay_reasons[i].text, seen[i]);
}

/*
 * PROTOCOL.md's table of the reasons: after its head "| label | text | when |", a row per reason,
 * "| `LABEL` | "TEXT" | when |".
 */
Test(relay, protocol_md_lists_the_reasons_of_the_table)
{
    const char *doc = "PROTOCOL.md";
    char *md = doc_read(doc);
    unsigned seen[RELAY_CANCEL_N] = { 0 };
    const char *t = strstr(md, "\n| label | text | when |\n");
    cr_assert_not_null(t, "%s has no table of the cancel reasons (\"| label | text | when |\")",
                       doc);
    t = strchr(t + 1, '\n') + 1; /* the separator row */
    t = strchr(t, '\n');
    cr_assert_not_null(t);
    for (t++; *t == '|'; t++) {
        const char *end = strchr(t, '\n'), *l, *x;
        if (end == NULL)
            end = t + strlen(t);
        size_t ll = 0, tl = 0;
        bool ok = strncmp(t, "| `", 3) == 0;
        if (ok) {
            l = t + 3;
            ll = strcspn(l, "`\n");
            ok = strncmp(l + ll, "` | \"", 5) == 0;
        }
        if (ok) {
            x = l + ll + 5;
            tl = strcspn(x, "\"\n");
            ok = strncmp(x + tl, "\" |", 3) == 0;
        }
        cr_expect(ok, "%s: a row of the reasons' table is not | `label` | \"text\" | when |: %.*s",
                  doc, (int)(end - t), t);
        if (ok)
            doc_pair(doc, l, ll, x, tl, seen);
        t = end;
        if (*t == '\0')
            break;
    }
    doc_lists_each_once(doc, seen);
    free(md);
}

/*
 * deploy/README.md's row of mcpgw_cancels_total: from the first ':' after `direction="to_child"` to
 * `direction="to_client"`, each label outside parentheses followed by its text, `LABEL` "TEXT".
 */
Test(relay, deploy_readme_lists_the_reasons_of_the_table)
{
    const char *doc = "deploy/README.md";
    char *md = doc_read(doc);
    unsigned seen[RELAY_CANCEL_N] = { 0 };
    const char *row = strstr(md, "| `cancels_total` |");
    cr_assert_not_null(row, "%s has no row of `cancels_total`", doc);
    const char *t = strstr(row, "`direction=\"to_child\"`");
    const char *to = strstr(row, "`direction=\"to_client\"`");
    const char *eol = strchr(row, '\n');
    cr_assert(t != NULL && to != NULL && t < to && (eol == NULL || to < eol),
              "%s: the row of `cancels_total` names no `direction=\"to_child\"` then "
              "`direction=\"to_client\"`",
              doc);
    int depth = 0;
    bool listing = false; /* past the first ':' outside parentheses */
    for (t += strlen("`direction=\"to_child\"`"); t < to; t++) {
        if (*t == '(' || *t == ')') {
            depth += *t == '(' ? 1 : -1;
            continue;
        }
        if (depth != 0 || (!listing && *t != ':'))
            continue;
        if (*t == ':') {
            listing = true;
            continue;
        }
        if (*t != '`')
            continue;
        const char *l = t + 1, *x = NULL;
        size_t ll = strcspn(l, "`\n"), tl = 0;
        bool ok = strncmp(l + ll, "` \"", 3) == 0;
        if (ok) {
            x = l + ll + 3;
            tl = strcspn(x, "\"\n");
            ok = x[tl] == '"';
        }
        cr_expect(ok,
                  "%s: `%.*s` in the row of `cancels_total` is not followed by its text "
                  "(`label` \"text\")",
                  doc, (int)ll, l);
        if (!ok)
            break;
        doc_pair(doc, l, ll, x, tl, seen);
        t = x + tl;
    }
    doc_lists_each_once(doc, seen);
    free(md);
}

/* --- trace context: the splice that puts a trace into params._meta (trace.h) ---------------- */

#include "trace.h"

#define TP_CLIENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/*
 * in through trace_resolve (mode, header traceparent and tracestate) and trace_edits with the id
 * replaced by 7, as a child would read it, into out; false when the request carries no trace. The
 * result must scan as one request again; *span gets the gateway's span id.
 */
static bool
traced(const char *in, enum trace_mode mode, const char *hdr_tp, const char *hdr_ts, char *out,
       size_t cap, char span[17])
{
    size_t len = strlen(in);
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(in, len, &info, NULL), JSONRPC_OK, "%s", in);
    struct trace_in tin;
    trace_in_init(&tin, mode, hdr_tp, hdr_ts);
    struct trace tr;
    struct relay_edit ed[1 + TRACE_EDITS_MAX] = { { info.id.off, info.id.len, "7", 1 } };
    char text[TRACE_EDIT_BUF];
    int n = 1;
    bool on = trace_resolve(&tin, in, len, &info, &tr);
    if (on) {
        n += trace_edits(&tr, in, len, &info, text, ed + 1);
        memcpy(span, tr.parent + 36, 16);
        span[16] = '\0';
        char id[TRACE_ID_LEN + 1];
        trace_id_copy(&tr, id);
        cr_assert_str_eq(tin.trace_id, id);
    }
    struct iovec iov[2 * RELAY_EDITS_MAX + 1];
    int k = relay_splice(in, len, ed, n, iov);
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        cr_assert_lt(at + iov[i].iov_len, cap);
        memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    out[at] = '\0';
    struct jsonrpc_info again;
    cr_assert_eq(jsonrpc_scan(out, at, &again, NULL), JSONRPC_OK, "does not scan: %s", out);
    cr_assert_eq(again.kind, JSONRPC_REQUEST);
    return on;
}

/* out with the 16 hex digits of span replaced by S's, so expected texts can be written out. */
static void
unspan(char *out, const char *span)
{
    char *at = strstr(out, span);
    cr_assert_not_null(at, "span %s not in %s", span, out);
    memset(at, 'S', 16);
}

Test(relay, trace_parse_follows_w3c)
{
    char out[TRACE_PARENT_LEN + 1];
    cr_assert(trace_parse(TP_CLIENT, strlen(TP_CLIENT), out));
    cr_assert_str_eq(out, TP_CLIENT);
    static const char *const bad[] = {
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* trace id all zero */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* parent id all zero */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* uppercase */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00 with more */
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  /* short trace id */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* separator */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", /* flags */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_not(trace_parse(bad[i], strlen(bad[i]), out), "%s", bad[i]);
    /* A later version is read as 00 (its extra fields dropped). */
    const char *v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-abcd";
    cr_assert(trace_parse(v1, strlen(v1), out));
    cr_assert_str_eq(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03");
}

Test(relay, trace_every_shape_of_params)
{
    char out[2048], span[17];
    static const struct {
        const char *in, *want; /* the child's line, the gateway's span id as S */
    } cases[] = {
        /* no params: "params" added */
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
          "{\"params\":{\"_meta\":{\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
          "SSSSSSSSSSSSSSSS-01\"}},\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}" },
        /* params without _meta: "_meta" added */
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"e\"}}",
          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
          "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-SSSSSSSSSSSSSSSS-01\"},"
          "\"name\":\"e\"}}" },
        /* empty params, blanks inside */
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{ }}",
          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
          "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-SSSSSSSSSSSSSSSS-01\"} }}" },
        /* _meta without traceparent: inserted first */
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"progressToken\":"
          "5}}}",
          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
          "\"00-4bf92f3577b34da6a3ce929d0e0e4736-SSSSSSSSSSSSSSSS-01\",\"progressToken\":5}}}" },
        /* empty _meta */
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{}}}",
          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
          "\"00-4bf92f3577b34da6a3ce929d0e0e4736-SSSSSSSSSSSSSSSS-01\"}}}" },
        /* whitespace everywhere, line breaks too */
        { " {\n\"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"method\" : \"x\" , \"params\" : { \"_meta\""
          " : { } } } ",
          " {\n\"jsonrpc\" : \"2.0\" , \"id\" : 7 , \"method\" : \"x\" , \"params\" : { \"_meta\""
          " : {\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-SSSSSSSSSSSSSSSS-01\" } } "
          "} " },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert(traced(cases[i].in, TRACE_PROPAGATE, TP_CLIENT, NULL, out, sizeof out, span));
        cr_assert_str_neq(span, "00f067aa0ba902b7", "the gateway's own span id");
        cr_assert_str_neq(span, "0000000000000000");
        unspan(out, span);
        cr_assert_str_eq(out, cases[i].want, "case %zu", i);
    }
}

Test(relay, trace_from_meta_wins_and_keeps_its_tracestate)
{
    char out[2048], span[17];
    /* _meta's own traceparent (key escaped) is continued; its tracestate stays; the header loses. */
    const char *in = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{\"_meta\":{"
                     "\"trace\\u0070arent\":\"" TP_CLIENT "\",\"tracestate\":\"k=v\"}}}";
    cr_assert(traced(in, TRACE_START, "00-11111111111111111111111111111111-2222222222222222-00",
                     "h=1", out, sizeof out, span));
    unspan(out, span);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{"
                          "\"trace\\u0070arent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
                          "SSSSSSSSSSSSSSSS-01\",\"tracestate\":\"k=v\"}}}");
}

Test(relay, trace_header_with_tracestate)
{
    char out[2048], span[17];
    /* No _meta traceparent: the header's, with its tracestate quoted as JSON. */
    const char *in = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{}}";
    cr_assert(traced(in, TRACE_PROPAGATE, TP_CLIENT, "a=\"q\\,b=2", out, sizeof out, span));
    unspan(out, span);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{"
                          "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
                          "SSSSSSSSSSSSSSSS-01\",\"tracestate\":\"a=\\\"q\\\\,b=2\"}}}");
    /* A malformed _meta traceparent with a tracestate: both replaced by the header's. */
    in = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
         "\"junk\",\"tracestate\":\"old=1\"}}}";
    cr_assert(traced(in, TRACE_PROPAGATE, TP_CLIENT, "new=2", out, sizeof out, span));
    unspan(out, span);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{"
                          "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
                          "SSSSSSSSSSSSSSSS-01\",\"tracestate\":\"new=2\"}}}");
    /* A tracestate alone in _meta, the header's traceparent without one: removed. */
    in = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"tracestate\":"
         "\"old=1\"}}}";
    cr_assert(traced(in, TRACE_PROPAGATE, TP_CLIENT, NULL, out, sizeof out, span));
    unspan(out, span);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"_meta\":{"
                          "\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e4736-"
                          "SSSSSSSSSSSSSSSS-01\"}}}");
}

Test(relay, trace_start_drops_a_stale_tracestate)
{
    char out[2048], span[17];
    static const char *const in[] = {
        /* tracestate after the malformed traceparent, before it, between others */
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
        "\"00-bad\" , \"tracestate\" : \"old=1\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"tracestate\":"
        "\"old=1\" ,\"traceparent\":\"00-bad\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"a\":1,"
        "\"tracestate\":\"old=1\",\"traceparent\":\"00-bad\",\"b\":2}}}",
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        cr_assert(traced(in[i], TRACE_START, "not-a-traceparent", "h=1", out, sizeof out, span));
        cr_assert_null(strstr(out, "tracestate"), "case %zu: %s", i, out);
        /* The stale value, not the bare letters: a random span id may hold "bad". */
        cr_assert_null(strstr(out, "\"00-bad\""), "case %zu: %s", i, out);
        cr_assert_null(strstr(out, "4bf92f35"), "case %zu: %s", i, out);
        const char *tp = strstr(out, "\"traceparent\":\"00-");
        cr_assert_not_null(tp, "case %zu: %s", i, out);
        char parent[TRACE_PARENT_LEN + 1];
        cr_assert(trace_parse(tp + 15, TRACE_PARENT_LEN, parent), "%s", out);
        cr_assert_eq(memcmp(parent + 36, span, 16), 0);
        cr_assert_eq(memcmp(parent + 53, "01", 2), 0);
    }
    /* Two started traces differ. */
    char out2[2048], span2[17];
    cr_assert(traced(in[0], TRACE_START, NULL, NULL, out2, sizeof out2, span2));
    cr_assert_str_neq(out, out2);
}

Test(relay, trace_left_alone)
{
    char out[2048], span[17];
    /* propagate with nothing valid, a notification, _meta no object, params an array, twice */
    static const struct {
        const char *in;
        enum trace_mode mode;
    } cases[] = {
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
          "\"junk\"}}}",
          TRACE_PROPAGATE },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":null}}",
          TRACE_START },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}", TRACE_START },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"_meta\":{\"traceparent\":"
          "\"" TP_CLIENT "\",\"traceparent\":\"" TP_CLIENT "\"}}}",
          TRACE_START },
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}", TRACE_OFF },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_not(traced(cases[i].in, cases[i].mode, "bad", NULL, out, sizeof out, span),
                      "case %zu", i);
        char want[2048];
        snprintf(want, sizeof want, "%s", cases[i].in);
        char *one = strstr(want, "\"id\":1");
        one[5] = '7';
        cr_assert_str_eq(out, want, "case %zu", i);
    }
    /* A notification is never given one. */
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}";
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(note, strlen(note), &info, NULL), JSONRPC_OK);
    struct trace_in tin;
    trace_in_init(&tin, TRACE_START, TP_CLIENT, NULL);
    struct trace tr;
    cr_assert_not(trace_resolve(&tin, note, strlen(note), &info, &tr));
    cr_assert_str_eq(tin.trace_id, "");
}

Test(relay, trace_header_tracestate_bounded)
{
    struct trace_in tin;
    char big[TRACE_STATE_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    trace_in_init(&tin, TRACE_PROPAGATE, TP_CLIENT, big);
    cr_assert_eq(tin.state_len, 0);
    big[TRACE_STATE_MAX] = '\0';
    trace_in_init(&tin, TRACE_PROPAGATE, TP_CLIENT, big);
    cr_assert_eq(tin.state_len, TRACE_STATE_MAX + 2);
    trace_in_init(&tin, TRACE_PROPAGATE, TP_CLIENT, "a=\x01");
    cr_assert_eq(tin.state_len, 0);
    /* A tracestate without a valid traceparent is not kept. */
    trace_in_init(&tin, TRACE_PROPAGATE, "00-x", "a=1");
    cr_assert_eq(tin.state_len, 0);
    cr_assert_str_eq(tin.parent, "");
}
