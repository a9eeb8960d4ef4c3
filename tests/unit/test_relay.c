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

static void
on_expired(struct relay *r, struct pending *p)
{
    cr_assert_eq(r, &R);
    cr_assert_null(p->timer, "the timer is gone before the owner hears of it");
    expired[nexpired++] = p;
}

static void
setup(void)
{
    L = loop_new();
    relay_init(&R, L, "test", "srv", child_send, on_expired, &R);
    nsent = nexpired = 0;
    refuse = false;
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
