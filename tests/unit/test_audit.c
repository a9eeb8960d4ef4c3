/* SPDX-License-Identifier: MIT */
/*
 * audit: the record writer. Strings are escaped as JSON (quotes, backslashes, control bytes, DEL)
 * and cut at their bound on a character boundary; a record of a call is one line of valid JSON
 * with its fields, its arguments only when configured (bounded, marked when cut); off, nothing is
 * made; a file that cannot be opened is refused. Through audit.h, with a real file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "audit.h"

static char dir[] = "/tmp/mcpgw-audit-unit-XXXXXX";
static char file[sizeof(dir) + 16];

static void
setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/audit.log", dir);
}

static void
cleanup(void)
{
    const char *why;
    cr_assert_eq(audit_set(NULL, 0, false, &why), 0);
    audit_module_free();
    unlink(file);
    rmdir(dir);
}

TestSuite(audit, .timeout = 10, .init = setup, .fini = cleanup);

/* s through audit_put_string with bound max: the text and whether it was cut. */
static bool
put(const char *s, size_t max, char *out, size_t size)
{
    struct buf b;
    buf_init(&b, 1 << 16);
    bool cut = audit_put_string(&b, s, strlen(s), max);
    snprintf(out, size, "%.*s", (int)buf_used(&b), buf_head(&b));
    buf_clear(&b);
    return cut;
}

Test(audit, strings_are_escaped_as_json)
{
    char out[256];
    cr_assert_not(put("a\"b\\c\nd\te\x01\x7f", 100, out, sizeof out));
    cr_assert_str_eq(out, "a\\\"b\\\\c\\nd\\u0009e\\u0001\\u007f");
    cr_assert_not(put("h\xc3\xa9llo", 100, out, sizeof out));
    cr_assert_str_eq(out, "h\xc3\xa9llo", "UTF-8 passes as it is");
}

Test(audit, strings_are_cut_at_a_character_boundary)
{
    char out[256];
    cr_assert(put("abcdef", 3, out, sizeof out));
    cr_assert_str_eq(out, "abc");
    /* "h" then "é" (2 bytes): a bound of 2 would split it; the cut goes back before it. */
    cr_assert(put("h\xc3\xa9llo", 2, out, sizeof out));
    cr_assert_str_eq(out, "h");
    cr_assert(put("\xe2\x82\xac\xe2\x82\xac", 4, out, sizeof out));
    cr_assert_str_eq(out, "\xe2\x82\xac");
    cr_assert_not(put("abc", 3, out, sizeof out), "exactly the bound: not cut");
}

/* The last line of the file, parsed. */
static json_t *
last_record(void)
{
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f);
    char line[1 << 16], last[1 << 16] = "";
    while (fgets(line, sizeof line, f) != NULL)
        memcpy(last, line, strlen(line) + 1);
    fclose(f);
    cr_assert(strlen(last) > 0 && last[strlen(last) - 1] == '\n', "a whole line");
    json_error_t e;
    json_t *j = json_loads(last, 0, &e);
    cr_assert_not_null(j, "valid JSON: %s: %s", e.text, last);
    return j;
}

static struct audit_rec *
call(const char *body)
{
    struct jsonrpc_info info;
    cr_assert_eq(jsonrpc_scan(body, strlen(body), &info, NULL), JSONRPC_OK);
    return audit_call_new("srv", "sid-1", body, strlen(body), &info);
}

Test(audit, off_makes_nothing)
{
    cr_assert_not(audit_on());
    cr_assert_null(call("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}"));
    cr_assert_eq(access(file, F_OK), -1, "no file");
}

Test(audit, a_call_record_with_bounded_arguments)
{
    const char *why = NULL;
    cr_assert_eq(audit_set(file, 8, false, &why), 0, "%s", why ? why : "");
    const struct audit_who w = { "sub:\"eve\"\n", "jwt", "127.0.0.1", NULL };
    audit_set_who(&w);
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":\"q\\\"1\",\"method\":\"tools/call\","
                       "\"params\":{\"name\":\"ec\\u0068o\",\"arguments\":{\"text\":"
                       "\"\xc3\xa9\xc3\xa9\xc3\xa9\"}}}";
    struct audit_rec *a = call(body);
    audit_set_who(NULL);
    audit_call_error(a, -32000);
    audit_call_cancel(a, "timeout"); /* the first outcome stays */
    audit_call_end(a);
    json_t *j = last_record();
    cr_assert_str_eq(json_string_value(json_object_get(j, "event")), "call");
    cr_assert_str_eq(json_string_value(json_object_get(j, "principal")), "sub:\"eve\"\n");
    cr_assert_str_eq(json_string_value(json_object_get(j, "auth")), "jwt");
    cr_assert_str_eq(json_string_value(json_object_get(j, "session")), "sid-1");
    cr_assert_str_eq(json_string_value(json_object_get(j, "request_id")), "q\"1");
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "echo", "decoded");
    cr_assert_str_eq(json_string_value(json_object_get(j, "outcome")), "error");
    cr_assert_eq(json_integer_value(json_object_get(j, "error_code")), -32000);
    cr_assert_null(json_object_get(j, "cancel_cause"));
    cr_assert_null(json_object_get(j, "trace_id"));
    /* {"text":"ééé"} is 17 bytes: 8 of them, back to a character boundary, is {"text": */
    cr_assert_str_eq(json_string_value(json_object_get(j, "arguments")), "{\"text\":");
    cr_assert(json_is_true(json_object_get(j, "arguments_truncated")));
    cr_assert_eq(strlen(json_string_value(json_object_get(j, "arguments_sha256"))), 64);
    cr_assert_eq(json_integer_value(json_object_get(j, "bytes_in")), (json_int_t)strlen(body));
    json_decref(j);
}

Test(audit, a_long_request_id_is_left_out)
{
    const char *why = NULL;
    cr_assert_eq(audit_set(file, 0, false, &why), 0);
    char body[1024];
    char id[400];
    memset(id, 'x', sizeof id - 1);
    id[sizeof id - 1] = '\0';
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"resources/read\",\"params\":{\"uri\":"
             "\"file:///a\"}}",
             id);
    struct audit_rec *a = call(body);
    audit_call_cancel(a, "client");
    audit_call_end(a);
    json_t *j = last_record();
    cr_assert_null(json_object_get(j, "request_id"));
    cr_assert(json_is_true(json_object_get(j, "request_id_cut")));
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "file:///a");
    cr_assert_str_eq(json_string_value(json_object_get(j, "outcome")), "cancelled");
    cr_assert_str_eq(json_string_value(json_object_get(j, "cancel_cause")), "client");
    cr_assert_null(json_object_get(j, "arguments"), "0: never the arguments");
    json_decref(j);
}

Test(audit, a_refusal_has_its_status_and_code_and_a_dropped_call_no_record)
{
    const char *why = NULL;
    cr_assert_eq(audit_set(file, 0, false, &why), 0);
    const struct audit_who w = { "alice", "bearer", "192.0.2.7",
                                 "0af7651916cd43dd8448eb211c80319c" };
    audit_set_who(&w);
    audit_call_drop(call("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                         "\"params\":{\"name\":\"dropped\"}}"));
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                       "\"params\":{\"name\":\"echo\",\"arguments\":{}}}";
    struct jsonrpc_info info;
    const char *err = NULL;
    cr_assert_eq(jsonrpc_scan(body, strlen(body), &info, &err), JSONRPC_OK);
    audit_refusal("refused_limit", "example", 429, -32603, "too many", body, &info);
    audit_set_who(NULL);
    json_t *j = last_record();
    cr_assert_str_eq(json_string_value(json_object_get(j, "event")), "refused_limit");
    cr_assert_str_eq(json_string_value(json_object_get(j, "principal")), "alice");
    cr_assert_str_eq(json_string_value(json_object_get(j, "auth")), "bearer");
    cr_assert_str_eq(json_string_value(json_object_get(j, "client")), "192.0.2.7");
    cr_assert_str_eq(json_string_value(json_object_get(j, "trace_id")),
                     "0af7651916cd43dd8448eb211c80319c");
    cr_assert_str_eq(json_string_value(json_object_get(j, "server")), "example");
    cr_assert_eq(json_integer_value(json_object_get(j, "request_id")), 3);
    cr_assert_str_eq(json_string_value(json_object_get(j, "method")), "tools/call");
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "echo");
    cr_assert_eq(json_integer_value(json_object_get(j, "http_status")), 429);
    cr_assert_eq(json_integer_value(json_object_get(j, "error_code")), -32603);
    cr_assert_str_eq(json_string_value(json_object_get(j, "detail")), "too many");
    json_decref(j);
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f);
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof line, f) != NULL)
        lines++;
    fclose(f);
    cr_assert_eq(lines, 1, "the dropped call wrote nothing");
}

Test(audit, a_symbolic_link_is_refused)
{
    char link[sizeof(file) + 8];
    snprintf(link, sizeof link, "%s.lnk", file);
    cr_assert_eq(symlink("/dev/null", link), 0);
    const char *why = NULL;
    cr_assert_eq(audit_set(link, 0, false, &why), -1);
    cr_assert_not_null(why);
    cr_assert_not(audit_on());
    unlink(link);
}
