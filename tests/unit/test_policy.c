/* SPDX-License-Identifier: MIT */
/*
 * policy: glob syntax and matching (sets, escapes, the bound on backtracking), building from the
 * three keys with their errors and bounds, verdicts (deny wins, allow lists, every matching scope
 * rule), grants and their remapping across policies, a tools/call's name, tools/list filtering
 * (the bytes outside the kept tools unchanged, refusals that must become errors), the counters.
 * Through policy.h only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "buf.h"
#include "jsonrpc.h"
#include "policy.h"

TestSuite(policy, .timeout = 10);

/* A policy from three comma-free lists of entries (NULL-terminated string arrays). */
static struct policy *
make(const char *server, const char **allow, const char **deny, const char **scopes)
{
    struct policy *pol = policy_new(server);
    const char **lists[] = { allow, deny, scopes };
    for (int i = 0; i < 3; i++) {
        const char *bad = NULL, *why = NULL;
        cr_assert_eq(policy_add(pol, (enum policy_list)i, lists[i], &bad, &why), 0, "%s: %s",
                     bad ? bad : "-", why ? why : "-");
    }
    return pol;
}

#define LIST(...) ((const char *[]){ __VA_ARGS__, NULL })

Test(policy, glob_syntax)
{
    static const char *const good[] = { "a",   "*",     "read_*", "?x",  "[abc]", "[!a-z]x",
                                        "[]]", "[!]a]", "a\\*",   "\\[", "x:y",   "a-b.c/d" };
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        cr_assert_null(policy_glob_check(good[i]), "%s", good[i]);
    cr_assert_str_eq(policy_glob_check(""), "is empty");
    cr_assert_str_eq(policy_glob_check("a["), "has a '[' without its ']'");
    cr_assert_str_eq(policy_glob_check("[]"), "has a '[' without its ']'");
    cr_assert_str_eq(policy_glob_check("[!]"), "has a '[' without its ']'");
    cr_assert_str_eq(policy_glob_check("a\\"), "ends in a lone backslash");
    cr_assert_str_eq(policy_glob_check("a b"), "must be visible ASCII");
    cr_assert_str_eq(policy_glob_check("caf\xc3\xa9"), "must be visible ASCII");
    cr_assert_str_eq(policy_glob_check("[\xc3\xa9]"), "must be visible ASCII");
    cr_assert_str_eq(policy_glob_check("\\\x7f"), "must be visible ASCII");
    cr_assert_null(policy_glob_check("\\\\[a]"), "an escaped backslash, then a set");
    cr_assert(policy_glob_match("\\\\[a]", "\\a"));
    char long_glob[130];
    memset(long_glob, 'a', 129);
    long_glob[129] = '\0';
    cr_assert_str_eq(policy_glob_check(long_glob), "is longer than 128 bytes");
    long_glob[128] = '\0';
    cr_assert_null(policy_glob_check(long_glob));
}

Test(policy, glob_match)
{
    static const struct {
        const char *glob, *s;
        bool match;
    } cases[] = {
        { "*", "", true },
        { "*", "anything", true },
        { "read_*", "read_file", true },
        { "read_*", "read_", true },
        { "read_*", "rea", false },
        { "read_*", "xread_file", false },
        { "*_admin", "delete_admin", true },
        { "*_admin", "delete_admin2", false },
        { "a*b*c", "aXbYc", true },
        { "a*b*c", "abcbc", true },
        { "a*b*c", "abcb", false },
        { "?", "a", true },
        { "?", "", false },
        { "?", "ab", false },
        { "a?c", "abc", true },
        { "[abc]x", "bx", true },
        { "[abc]x", "dx", false },
        { "[a-c]", "b", true },
        { "[a-c]", "d", false },
        { "[!a-c]", "d", true },
        { "[!a-c]", "a", false },
        { "[]]", "]", true },
        { "[!]]", "]", false },
        { "[!]]", "x", true },
        { "[a-]", "-", true },
        { "[a-]", "b", false },
        { "a\\*", "a*", true },
        { "a\\*", "ab", false },
        { "\\?", "?", true },
        { "\\?", "x", false },
        { "echo", "echo", true },
        { "echo", "Echo", false },
        { "**", "x", true },
        { "*?", "", false },
        { "*?", "x", true },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
        cr_assert_eq(policy_glob_match(cases[i].glob, cases[i].s), cases[i].match, "%s ~ %s",
                     cases[i].glob, cases[i].s);
}

/* The classic exponential case for recursive matchers: here glob length x name length. */
Test(policy, glob_backtracking_is_bounded, .timeout = 2)
{
    char name[POLICY_NAME_MAX + 1];
    memset(name, 'a', POLICY_NAME_MAX);
    name[POLICY_NAME_MAX] = '\0';
    const char *glob = "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
    cr_assert_null(policy_glob_check(glob));
    for (int i = 0; i < 1000; i++)
        cr_assert_not(policy_glob_match(glob, name));
}

Test(policy, no_policy_means_everything)
{
    const char *scope = NULL;
    cr_assert_eq(policy_judge(NULL, 0, "anything", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(NULL, 0, NULL, &scope), POLICY_VISIBLE);
    cr_assert_not(policy_per_token(NULL));
    cr_assert_eq(policy_grants(NULL, (const char *[]){ "a" }, 1), 0);
    struct policy *pol = policy_new("s");
    cr_assert(policy_empty(pol));
    const char *bad, *why;
    cr_assert_eq(policy_add(pol, POLICY_ALLOW, LIST(NULL), &bad, &why), 0);
    cr_assert_eq(policy_add(pol, POLICY_DENY, NULL, &bad, &why), 0);
    cr_assert(policy_empty(pol));
    policy_free(pol);
    policy_free(NULL);
}

Test(policy, deny_wins_over_allow)
{
    struct policy *pol =
        make("s", LIST("read_*", "search", "admin_*"), LIST("*_secret", "admin_*"), LIST(NULL));
    const char *scope = NULL;
    cr_assert_not(policy_empty(pol));
    cr_assert_not(policy_per_token(pol));
    cr_assert_eq(policy_judge(pol, 0, "read_file", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(pol, 0, "search", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(pol, 0, "searchx", &scope), POLICY_NOT_ALLOWED);
    cr_assert_eq(policy_judge(pol, 0, "write_file", &scope), POLICY_NOT_ALLOWED);
    cr_assert_eq(policy_judge(pol, 0, "read_secret", &scope), POLICY_DENIED, "deny wins");
    cr_assert_eq(policy_judge(pol, 0, "admin_users", &scope), POLICY_DENIED, "deny wins");
    cr_assert_eq(policy_judge(pol, 0, NULL, &scope), POLICY_BAD_NAME);
    cr_assert_str_eq(policy_verdict_text(POLICY_DENIED), "denied by denied_tools");
    policy_free(pol);

    pol = make("s", LIST(NULL), LIST("crash"), LIST(NULL));
    cr_assert_eq(policy_judge(pol, 0, "echo", &scope), POLICY_VISIBLE, "no allow list: all");
    cr_assert_eq(policy_judge(pol, 0, "crash", &scope), POLICY_DENIED);
    policy_free(pol);
}

Test(policy, scopes_every_matching_rule)
{
    struct policy *pol = make("s", LIST(NULL), LIST(NULL),
                              LIST("write_*:files.write", "delete_*:files.admin+audit",
                                   "*_admin:admin", "write_*:files.write"));
    cr_assert(policy_per_token(pol));
    const char *have[] = { "files.write", "audit", "unrelated" };
    uint64_t bits = policy_grants(pol, have, 3);
    const char *scope = NULL;
    cr_assert_eq(policy_judge(pol, bits, "read_file", &scope), POLICY_VISIBLE, "no rule");
    cr_assert_eq(policy_judge(pol, bits, "write_file", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(pol, bits, "delete_file", &scope), POLICY_NO_SCOPE);
    cr_assert_str_eq(scope, "files.admin");
    cr_assert_eq(policy_judge(pol, bits, "write_admin", &scope), POLICY_NO_SCOPE,
                 "both rules apply");
    cr_assert_str_eq(scope, "admin");
    cr_assert_eq(policy_judge(pol, 0, "write_file", &scope), POLICY_NO_SCOPE);
    cr_assert_str_eq(scope, "files.write");
    const char *all[] = { "admin", "files.admin", "audit", "files.write" };
    bits = policy_grants(pol, all, 4);
    cr_assert_eq(bits, 0xf, "four distinct scopes, numbered once");
    cr_assert_eq(policy_judge(pol, bits, "delete_admin", &scope), POLICY_VISIBLE);
    policy_free(pol);
}

Test(policy, grants_follow_scope_names_across_policies)
{
    struct policy *old = make("s", LIST(NULL), LIST(NULL), LIST("a*:x", "b*:y", "c*:z"));
    struct policy *new = make("s", LIST(NULL), LIST(NULL), LIST("c*:z", "b*:w", "a*:x"));
    uint64_t bits = policy_grants(old, (const char *[]){ "x", "z" }, 2);
    struct policy_grants g = { old, bits };
    cr_assert_eq(policy_bits(old, g), bits);
    uint64_t mapped = policy_bits(new, g);
    const char *scope = NULL;
    cr_assert_eq(policy_judge(new, mapped, "apple", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(new, mapped, "cherry", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(new, mapped, "banana", &scope), POLICY_NO_SCOPE,
                 "w was never granted");
    cr_assert_eq(policy_bits(new, (struct policy_grants){ NULL, ~0ull }), 0);
    cr_assert_eq(policy_bits(NULL, g), 0);
    policy_free(old);
    policy_free(new);
}

static void
refused(enum policy_list list, const char **entries, const char *bad, const char *why)
{
    struct policy *pol = policy_new("s");
    const char *b = NULL, *w = NULL;
    cr_assert_eq(policy_add(pol, list, entries, &b, &w), -1, "%s", bad);
    cr_assert_str_eq(b, bad);
    cr_assert_str_eq(w, why, "%s", bad);
    policy_free(pol);
}

Test(policy, build_errors_name_the_entry)
{
    refused(POLICY_ALLOW, LIST("ok", "bad["), "bad[", "has a '[' without its ']'");
    refused(POLICY_DENY, LIST("x\\"), "x\\", "ends in a lone backslash");
    refused(POLICY_SCOPES, LIST("write_*"), "write_*", "must be GLOB:SCOPE[+SCOPE...]");
    refused(POLICY_SCOPES, LIST("w:"), "w:", "has an empty scope (GLOB:SCOPE[+SCOPE...])");
    refused(POLICY_SCOPES, LIST("w:a++b"), "w:a++b", "has an empty scope (GLOB:SCOPE[+SCOPE...])");
    refused(POLICY_SCOPES, LIST("w:a+"), "w:a+", "has an empty scope (GLOB:SCOPE[+SCOPE...])");
    refused(POLICY_SCOPES, LIST(":a"), ":a", "is empty");
    refused(POLICY_SCOPES, LIST("w[:a"), "w[:a", "has a '[' without its ']'");
    refused(POLICY_SCOPES, LIST("w:a\"b"), "w:a\"b", "has a scope that is not a scope token");
    char long_scope[300];
    snprintf(long_scope, sizeof(long_scope), "w:%0257d", 0);
    refused(POLICY_SCOPES, LIST(long_scope), long_scope, "has a scope longer than 256 bytes");
    char long_glob[140];
    memset(long_glob, 'g', 129);
    snprintf(long_glob + 129, sizeof(long_glob) - 129, ":s");
    refused(POLICY_SCOPES, LIST(long_glob), long_glob, "is longer than 128 bytes before ':'");
    /* A scope may hold ':' (the glob ends at the first one). */
    struct policy *pol = make("s", LIST(NULL), LIST(NULL), LIST("repo_*:repo:write+read:org"));
    const char *scope = NULL;
    uint64_t bits = policy_grants(pol, (const char *[]){ "repo:write" }, 1);
    cr_assert_eq(policy_judge(pol, bits, "repo_push", &scope), POLICY_NO_SCOPE);
    cr_assert_str_eq(scope, "read:org");
    policy_free(pol);
}

Test(policy, build_bounds)
{
    const char *entries[POLICY_ENTRIES_MAX + 2];
    char text[POLICY_ENTRIES_MAX + 1][16];
    for (int i = 0; i <= POLICY_ENTRIES_MAX; i++) {
        snprintf(text[i], sizeof(text[i]), "t%d", i);
        entries[i] = text[i];
    }
    entries[POLICY_ENTRIES_MAX + 1] = NULL;
    refused(POLICY_ALLOW, entries, "t64", "is one entry more than 64");
    entries[POLICY_ENTRIES_MAX] = NULL;
    struct policy *pol = make("s", entries, entries, LIST(NULL));
    policy_free(pol);

    /* 64 distinct scopes fit, a 65th does not; the failing rule leaves nothing behind. */
    char rules[POLICY_ENTRIES_MAX + 1][32];
    const char *r[POLICY_ENTRIES_MAX + 2];
    for (int i = 0; i < POLICY_ENTRIES_MAX; i++) {
        snprintf(rules[i], sizeof(rules[i]), "t%d:s%d", i, i);
        r[i] = rules[i];
    }
    r[POLICY_ENTRIES_MAX] = NULL;
    pol = make("s", LIST(NULL), LIST(NULL), r);
    const char *bad, *why;
    cr_assert_eq(policy_add(pol, POLICY_SCOPES, LIST("x:s3+s64"), &bad, &why), -1);
    cr_assert_str_eq(why, "is one entry more than 64");
    policy_free(pol);
    r[POLICY_ENTRIES_MAX - 1] = NULL;
    pol = make("s", LIST(NULL), LIST(NULL), r); /* 63 rules, 63 scopes */
    cr_assert_eq(policy_add(pol, POLICY_SCOPES, LIST("x:s3+new1+new2"), &bad, &why), -1);
    cr_assert_str_eq(why, "names more than 64 distinct scopes (over all rules)");
    cr_assert_eq(policy_add(pol, POLICY_SCOPES, LIST("x:s3+new1"), &bad, &why), 0,
                 "the failed rule's new1 was taken back");
    const char *scope = NULL;
    cr_assert_eq(
        policy_judge(pol, policy_grants(pol, (const char *[]){ "s3", "new1" }, 2), "x", &scope),
        POLICY_VISIBLE);
    cr_assert_eq(policy_judge(pol, policy_grants(pol, (const char *[]){ "s3" }, 1), "x", &scope),
                 POLICY_NO_SCOPE);
    cr_assert_str_eq(scope, "new1");
    policy_free(pol);
}

static enum policy_verdict
judge_call(const struct policy *pol, uint64_t bits, const char *json, char *name, size_t cap)
{
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(json, strlen(json), &info, NULL), JSONRPC_OK, "%s", json);
    const char *scope = NULL;
    return policy_judge_call(pol, bits, json, &info, name, cap, &scope);
}

Test(policy, call_names)
{
    struct policy *pol = make("s", LIST(NULL), LIST("crash", "[!e]*"), LIST(NULL));
    char name[POLICY_NAME_MAX + 1];
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"echo\"}}",
                            name, sizeof(name)),
                 POLICY_VISIBLE);
    cr_assert_str_eq(name, "echo");
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"e\\u0063ho\"}}",
                            name, sizeof(name)),
                 POLICY_VISIBLE, "escapes are decoded as the child would");
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"\\u0063rash\"}}",
                            name, sizeof(name)),
                 POLICY_DENIED);
    cr_assert_str_eq(name, "crash");
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":42}}",
                            name, sizeof(name)),
                 POLICY_BAD_NAME);
    cr_assert_str_eq(name, "");
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{}}",
                            name, sizeof(name)),
                 POLICY_BAD_NAME);
    cr_assert_eq(judge_call(pol, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"eeeeeeeeeeeeeeeeeeee\"}}",
                            name, 8),
                 POLICY_BAD_NAME, "longer than the room for it");
    cr_assert_eq(judge_call(NULL, 0,
                            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"crash\"}}",
                            name, sizeof(name)),
                 POLICY_VISIBLE);
    policy_free(pol);
}

/* Filters json (a tools/list response) and returns the new text ("" when nothing was dropped). */
static char *
filter(const struct policy *pol, uint64_t bits, const char *json, size_t *dropped, const char **err)
{
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(json, strlen(json), &info, NULL), JSONRPC_OK, "%s", json);
    size_t len = 0;
    char *out = policy_filter_tools(pol, bits, json, strlen(json), &info, &len, dropped, err);
    if (out == NULL)
        return strdup("");
    char *s = strndup(out, len);
    free(out);
    struct jsonrpc_info again;
    cr_assert_eq(jsonrpc_scan(s, strlen(s), &again, NULL), JSONRPC_OK, "%s", s);
    return s;
}

Test(policy, tools_list_keeps_every_other_byte)
{
    struct policy *pol = make("s", LIST(NULL), LIST("crash", "slow"), LIST("large:big"));
    size_t dropped;
    const char *err;
    const char *in =
        "{\"jsonrpc\":\"2.0\",\"result\":{ \"nextCursor\" : \"c\\u0031\", \"tools\" : [ "
        "{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\",\"x\":1.50e2}} , "
        "{\"inputSchema\":{},\"name\":\"crash\"},{\"name\":\"sl\\u006fw\"}, "
        "{\"name\":\"large\", \"description\":\"a\\nb\"} ,{\"name\":\"notify\"} ], "
        "\"_meta\":{\"k\":[1,2]} },\"id\":7}";
    char *out = filter(pol, 0, in, &dropped, &err);
    cr_assert_null(err);
    cr_assert_eq(dropped, 3);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"result\":{ \"nextCursor\" : \"c\\u0031\", "
                          "\"tools\" : [{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\","
                          "\"x\":1.50e2}},{\"name\":\"notify\"}], \"_meta\":{\"k\":[1,2]} },"
                          "\"id\":7}");
    free(out);
    out = filter(pol, policy_grants(pol, (const char *[]){ "big" }, 1), in, &dropped, &err);
    cr_assert_eq(dropped, 2, "the scope shows large");
    cr_assert(strstr(out, "{\"name\":\"large\", \"description\":\"a\\nb\"}") != NULL, "%s", out);
    free(out);
    policy_free(pol);

    pol = make("s", LIST(NULL), LIST("nothing_here"), LIST(NULL));
    out = filter(pol, 0, in, &dropped, &err);
    cr_assert_str_eq(out, "", "nothing dropped: the original line goes as it is");
    cr_assert_eq(dropped, 0);
    cr_assert_null(err);
    free(out);
    policy_free(pol);
}

Test(policy, tools_list_edges)
{
    struct policy *pol = make("s", LIST("echo"), LIST(NULL), LIST(NULL));
    size_t dropped;
    const char *err;
    char *out =
        filter(pol, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}", &dropped, &err);
    cr_assert_str_eq(out, "");
    cr_assert_null(err);
    free(out);
    out = filter(pol, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", &dropped, &err);
    cr_assert_str_eq(out, "", "no tools member: nothing to hide");
    cr_assert_null(err);
    free(out);
    out = filter(pol, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"x\"}]}}",
                 &dropped, &err);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}");
    free(out);
    /* A tool whose name cannot be read is hidden: nothing passes unjudged. */
    out = filter(pol, 0,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"echo\","
                 "\"name\":\"x\"},{\"title\":\"echo\"},\"echo\",{\"name\":1},{\"name\":\"echo\"}"
                 "]}}",
                 &dropped, &err);
    cr_assert_eq(dropped, 4);
    cr_assert_str_eq(out,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"echo\"}]}}");
    free(out);
    out = filter(pol, 0,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[],\"tools\":[{\"name\":"
                 "\"x\"}]}}",
                 &dropped, &err);
    cr_assert_str_eq(err, "the result names \"tools\" twice");
    free(out);
    out = filter(pol, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":{\"name\":\"x\"}}}",
                 &dropped, &err);
    cr_assert_str_eq(err, "the result's \"tools\" is not an array");
    free(out);
    out = filter(pol, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\\u006fols\":[{}],\"a\":1}}",
                 &dropped, &err);
    cr_assert_str_eq(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\\u006fols\":[],\"a\":1}}",
                     "an escaped key is the same key");
    free(out);
    out = filter(NULL, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{}]}}", &dropped,
                 &err);
    cr_assert_str_eq(out, "", "no policy, no filtering");
    free(out);

    struct buf b;
    buf_init(&b, 16 * (POLICY_TOOLS_MAX + 2) + 64);
    cr_assert_eq(buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":["), 0);
    for (int i = 0; i <= POLICY_TOOLS_MAX; i++)
        cr_assert_eq(buf_printf(&b, "%s{\"name\":\"x\"}", i ? "," : ""), 0);
    cr_assert_eq(buf_printf(&b, "]}}"), 0);
    cr_assert_eq(buf_append(&b, "", 1), 0);
    out = filter(pol, 0, buf_head(&b), &dropped, &err);
    cr_assert_str_eq(err, "the result lists more than 4096 tools");
    free(out);
    buf_clear(&b);
    policy_free(pol);
}

Test(policy, counters)
{
    struct policy *a = policy_new("alpha"), *a2 = policy_new("alpha"), *b = policy_new("beta");
    policy_count_denied(a);
    policy_count_denied(a2); /* another definition of the same server: one series */
    policy_count_hidden(b, 5);
    struct buf m;
    buf_init(&m, 1 << 16);
    policy_metrics(&m);
    cr_assert_eq(buf_append(&m, "", 1), 0);
    const char *text = buf_head(&m);
    cr_assert(strstr(text, "# TYPE mcpgw_policy_denied_total counter\n") != NULL, "%s", text);
    cr_assert(strstr(text, "mcpgw_policy_denied_total{server=\"alpha\"} 2\n") != NULL, "%s", text);
    cr_assert(strstr(text, "mcpgw_policy_denied_total{server=\"beta\"} 0\n") != NULL, "%s", text);
    cr_assert(strstr(text, "mcpgw_policy_tools_hidden_total{server=\"beta\"} 5\n") != NULL, "%s",
              text);
    buf_clear(&m);
    policy_free(a);
    policy_free(a2);
    policy_free(b);
}
