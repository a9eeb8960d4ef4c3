/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for jsonrpc: classification, spans, duplicate and depth rules, the JSON grammar and
 * UTF-8 checks (also against jansson), flattening, id parsing, the jansson-built messages, batch
 * splitting and task states.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "jsonrpc.h"

TestSuite(jsonrpc, .timeout = 30);

static int
scan_n(const char *s, size_t n, struct jsonrpc_info *info)
{
    const char *err = NULL;
    int rc = jsonrpc_scan(s, n, info, &err);

    if (rc != JSONRPC_OK)
        cr_expect(err != NULL && *err != '\0', "no error phrase for %d", rc);
    return rc;
}

static int
scan(const char *s, struct jsonrpc_info *info)
{
    return scan_n(s, strlen(s), info);
}

static int
scan_rc(const char *s)
{
    struct jsonrpc_info info;
    return scan(s, &info);
}

static bool
span_is(const char *p, struct jsonrpc_span sp, const char *want)
{
    return sp.len == strlen(want) && memcmp(p + sp.off, want, sp.len) == 0;
}

/* "[[...]]" or a message whose result nests that deep: depth counts every open container. */
static char *
nested(const char *prefix, unsigned brackets, const char *suffix)
{
    size_t pl = strlen(prefix), sl = strlen(suffix);
    char *s = malloc(pl + 2 * brackets + sl + 1);

    cr_assert_not_null(s);
    memcpy(s, prefix, pl);
    memset(s + pl, '[', brackets);
    memset(s + pl + brackets, ']', brackets);
    memcpy(s + pl + 2 * brackets, suffix, sl + 1);
    return s;
}

Test(jsonrpc, kinds)
{
    struct jsonrpc_info info;

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &info), JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_REQUEST);
    cr_expect_str_eq(info.method, "ping");

    cr_assert_eq(scan("{\"method\":\"notifications/initialized\",\"jsonrpc\":\"2.0\"}", &info),
                 JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_NOTIFICATION);
    cr_expect_eq(info.id_type, JSONRPC_ID_NONE);
    cr_expect_eq(info.id.len, 0);
    cr_expect_str_eq(info.method, "notifications/initialized");

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}", &info), JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_RESULT);
    cr_expect_str_eq(info.method, "");

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":null}", &info), JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_RESULT);

    cr_assert_eq(
        scan("{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":\"x\"}}", &info),
        JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_ERROR);

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700}}", &info),
                 JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_ERROR);
    cr_expect_eq(info.id_type, JSONRPC_ID_NULL);
}

Test(jsonrpc, id_types)
{
    static const struct {
        const char *id;
        enum jsonrpc_id_type type;
    } cases[] = {
        { "0", JSONRPC_ID_NUMBER },        { "-17", JSONRPC_ID_NUMBER },
        { "1.5", JSONRPC_ID_NUMBER },      { "2e3", JSONRPC_ID_NUMBER },
        { "-0.25E-7", JSONRPC_ID_NUMBER }, { "\"\"", JSONRPC_ID_STRING },
        { "\"x y\"", JSONRPC_ID_STRING },  { "\"\\u00e9\\n\"", JSONRPC_ID_STRING },
    };
    char buf[128];
    struct jsonrpc_info info;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\": %s ,\"method\":\"m\"}",
                 cases[i].id);
        cr_assert_eq(scan(buf, &info), JSONRPC_OK, "%s", buf);
        cr_expect_eq(info.kind, JSONRPC_REQUEST, "%s", buf);
        cr_expect_eq(info.id_type, cases[i].type, "%s", buf);
        cr_expect(span_is(buf, info.id, cases[i].id), "%s", buf);
    }
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"m\"}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":[1],\"result\":1}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":1}"), JSONRPC_EINVALID);
}

Test(jsonrpc, string_and_number_ids_differ)
{
    const char *a = "{\"jsonrpc\":\"2.0\",\"id\":\"42\",\"result\":1}";
    const char *b = "{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":1}";
    struct jsonrpc_info ia, ib;

    cr_assert_eq(scan(a, &ia), JSONRPC_OK);
    cr_assert_eq(scan(b, &ib), JSONRPC_OK);
    cr_expect_eq(ia.id_type, JSONRPC_ID_STRING);
    cr_expect_eq(ib.id_type, JSONRPC_ID_NUMBER);
    cr_expect(span_is(a, ia.id, "\"42\""));
    cr_expect(span_is(b, ib.id, "42"));
    cr_expect_eq(ia.id.off, 22);
    cr_expect_eq(ib.id.off, 22);
}

Test(jsonrpc, big_number_id_exact_span)
{
    const char *s = "{\"jsonrpc\":\"2.0\",\"id\":144444444444444444444444444444,\"result\":{}}";
    struct jsonrpc_info info;
    uint64_t v;

    cr_assert_eq(scan(s, &info), JSONRPC_OK);
    cr_expect_eq(info.id_type, JSONRPC_ID_NUMBER);
    cr_expect(span_is(s, info.id, "144444444444444444444444444444"));
    cr_expect_not(jsonrpc_id_u64(s, info.id, &v));
}

Test(jsonrpc, method_escapes)
{
    struct jsonrpc_info info;

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools\\/call\"}", &info),
                 JSONRPC_OK);
    cr_expect_str_eq(info.method, "tools/call");
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"method\":\"\\u0074ools/\\u004cist\"}", &info),
                 JSONRPC_OK);
    cr_expect_str_eq(info.method, "tools/List");
    cr_assert_eq(
        scan("{\"jsonrpc\":\"2.0\",\"method\":\"a\\u00e9\\u20ac\\ud83d\\ude00\\\"\\\\\"}", &info),
        JSONRPC_OK);
    cr_expect_str_eq(info.method, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\\");
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"method\":\"caf\xc3\xa9\"}", &info), JSONRPC_OK);
    cr_expect_str_eq(info.method, "caf\xc3\xa9");
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"method\":\"\"}", &info), JSONRPC_OK);
    cr_expect_str_eq(info.method, "");
    cr_expect_not(info.method_long);
    /* A method is a C string: an escaped NUL cannot be represented. */
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"method\":\"a\\u0000b\"}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"method\":7}"), JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"method\":null}"), JSONRPC_EINVALID);
}

Test(jsonrpc, method_long)
{
    char name[256], buf[512];
    struct jsonrpc_info info;

    memset(name, 'm', JSONRPC_METHOD_MAX - 1);
    name[JSONRPC_METHOD_MAX - 1] = '\0';
    snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"}", name);
    cr_assert_eq(scan(buf, &info), JSONRPC_OK);
    cr_expect_not(info.method_long);
    cr_expect_str_eq(info.method, name);

    snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%sm\"}", name);
    cr_assert_eq(scan(buf, &info), JSONRPC_OK);
    cr_expect(info.method_long);
    cr_expect_str_eq(info.method, "");

    /* 94 bytes plus an escape decoding to one byte fits; to two bytes does not. */
    name[JSONRPC_METHOD_MAX - 2] = '\0';
    snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\\u0041\"}", name);
    cr_assert_eq(scan(buf, &info), JSONRPC_OK);
    cr_expect_not(info.method_long);
    cr_expect_eq(strlen(info.method), JSONRPC_METHOD_MAX - 1);
    snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\\u00e9\"}", name);
    cr_assert_eq(scan(buf, &info), JSONRPC_OK);
    cr_expect(info.method_long);
    cr_expect_str_eq(info.method, "");
}

Test(jsonrpc, request_id_and_progress_token)
{
    const char *c1 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                     "\"params\":{\"requestId\":\"r-1\",\"reason\":\"x\"}}";
    const char *c2 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                     "\"params\":{\"reason\":\"x\",\"requestId\" : 17 }}";
    const char *p1 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                     "\"params\":{\"progressToken\":{\"k\":[1,2]},\"progress\":0.5}}";
    const char *p2 = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                     "\"params\":{\"name\":\"t\",\"_meta\":{\"progressToken\":\"abc\"}}}";
    const char *p3 = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
                     "{\"progressToken\":1,\"_meta\":{\"progressToken\":2},\"requestId\":true}}";
    const char *p4 = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
                     "{\"_meta\":{\"progressToken\":2},\"progressToken\":1}}";
    const char *p5 = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\",\"params\":"
                     "{\"\\u005fmeta\":{\"progress\\u0054oken\":\"e\"},\"request\\u0049d\":null}}";
    const char *deep = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\",\"params\":"
                       "{\"x\":{\"requestId\":1,\"progressToken\":2,\"task\":{}}}}";
    struct jsonrpc_info info;

    cr_assert_eq(scan(c1, &info), JSONRPC_OK);
    cr_expect(span_is(c1, info.request_id, "\"r-1\""));
    cr_expect_eq(info.progress_token.len, 0);
    cr_assert_eq(scan(c2, &info), JSONRPC_OK);
    cr_expect(span_is(c2, info.request_id, "17"));
    cr_assert_eq(scan(p1, &info), JSONRPC_OK);
    cr_expect(span_is(p1, info.progress_token, "{\"k\":[1,2]}"));
    cr_expect_eq(info.request_id.len, 0);
    cr_assert_eq(scan(p2, &info), JSONRPC_OK);
    cr_expect(span_is(p2, info.progress_token, "\"abc\""));
    cr_assert_eq(scan(p3, &info), JSONRPC_OK);
    cr_expect(span_is(p3, info.progress_token, "2"));
    cr_expect(span_is(p3, info.request_id, "true"));
    cr_assert_eq(scan(p4, &info), JSONRPC_OK);
    cr_expect(span_is(p4, info.progress_token, "2"));
    cr_assert_eq(scan(p5, &info), JSONRPC_OK);
    cr_expect(span_is(p5, info.progress_token, "\"e\""));
    cr_expect(span_is(p5, info.request_id, "null"));
    cr_assert_eq(scan(deep, &info), JSONRPC_OK);
    cr_expect_eq(info.request_id.len, 0);
    cr_expect_eq(info.progress_token.len, 0);
    cr_expect_not(info.has_task);
}

Test(jsonrpc, params_shapes)
{
    struct jsonrpc_info info;

    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[1,2]}"),
                 JSONRPC_OK);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{}}"),
                 JSONRPC_OK);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":\"x\"}"),
                 JSONRPC_EINVALID);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":null}"),
                 JSONRPC_EINVALID);
    /* _meta that is not an object is passed through untouched. */
    cr_assert_eq(
        scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"_meta\":5}}", &info),
        JSONRPC_OK);
    cr_expect_eq(info.progress_token.len, 0);
    /* params on a response carries nothing routing looks at. */
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,"
                      "\"params\":{\"requestId\":1,\"task\":{},\"progressToken\":1}}",
                      &info),
                 JSONRPC_OK);
    cr_expect_eq(info.request_id.len, 0);
    cr_expect_eq(info.progress_token.len, 0);
    cr_expect_not(info.has_task);
}

Test(jsonrpc, has_task)
{
    struct jsonrpc_info info;

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                      "\"params\":{\"name\":\"x\",\"task\":{\"ttl\":60000}}}",
                      &info),
                 JSONRPC_OK);
    cr_expect(info.has_task);
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                      "\"params\":{\"name\":\"task\",\"arguments\":{\"task\":1}}}",
                      &info),
                 JSONRPC_OK);
    cr_expect_not(info.has_task);
}

Test(jsonrpc, crlf_and_flatten)
{
    const char *pretty =
        "\r\n{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 1,\n  \"method\": \"a\\nb\",\n"
        "  \"params\": {\t\"x\": [\n1,\n2\n]\n}\n}\n";
    const char *flat = "  {   \"jsonrpc\": \"2.0\",    \"id\": 1,   \"method\": \"a\\nb\",  "
                       " \"params\": {\t\"x\": [ 1, 2 ] } } ";
    struct jsonrpc_info info;
    char *copy = strdup(pretty);

    cr_assert_not_null(copy);
    cr_assert_eq(scan(pretty, &info), JSONRPC_OK);
    cr_expect(info.has_crlf);
    cr_expect_str_eq(info.method, "a\nb");
    jsonrpc_flatten(copy, strlen(copy));
    cr_expect_str_eq(copy, flat);
    cr_assert_eq(scan(copy, &info), JSONRPC_OK);
    cr_expect_not(info.has_crlf);
    cr_expect_str_eq(info.method, "a\nb");
    free(copy);

    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n", &info), JSONRPC_OK);
    cr_expect(info.has_crlf);
    cr_assert_eq(scan("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\r", &info), JSONRPC_OK);
    cr_expect(info.has_crlf);
    cr_assert_eq(scan(" {\"jsonrpc\":\"2.0\",\"method\":\"m\\r\\n\"}\t", &info), JSONRPC_OK);
    cr_expect_not(info.has_crlf);
    jsonrpc_flatten(NULL, 0);
}

Test(jsonrpc, duplicates_rejected)
{
    static const char *const dup[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"\\u0069d\":1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"a\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{},\"params\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"result\":2}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{},\"error\":{}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"requestId\":1,\"requestId\":2}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"progressToken\":1,"
        "\"progress\\u0054oken\":1}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"task\":{},\"task\":{}}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"_meta\":{},\"_meta\":{}}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"_meta\":"
        "{\"progressToken\":1,\"progressToken\":2}}}",
    };
    static const char *const ok[] = {
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"a\":1,\"a\":2}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"x\":1,\"x\":2}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"_meta\":{\"a\":1,\"a\":1}}}",
        ("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"o\":{\"requestId\":1,\"requestId\":2}"
         "}"
         "}"),
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"id\":1,\"id\":2}}",
    };

    for (size_t i = 0; i < sizeof dup / sizeof dup[0]; i++)
        cr_expect_eq(scan_rc(dup[i]), JSONRPC_EINVALID, "%s", dup[i]);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect_eq(scan_rc(ok[i]), JSONRPC_OK, "%s", ok[i]);
    /* A duplicate in JSON that turns out to be broken is a parse error, not EINVALID. */
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2"), JSONRPC_EPARSE);
}

Test(jsonrpc, batch)
{
    cr_expect_eq(scan_rc("[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}]"), JSONRPC_EBATCH);
    cr_expect_eq(scan_rc(" [] \n"), JSONRPC_EBATCH);
    cr_expect_eq(scan_rc("[1,2,{\"a\":[]}]"), JSONRPC_EBATCH);
    cr_expect_eq(scan_rc("[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"), JSONRPC_EPARSE);
    cr_expect_eq(scan_rc("[1,]"), JSONRPC_EPARSE);
}

Test(jsonrpc, invalid_json)
{
    static const char *const bad[] = {
        "",
        " \r\n\t",
        "{",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\"} x",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\\",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\x\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\u12\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\u12G4\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\U0041\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\'\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\ud800\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\ud800\\u0041\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\ud800x\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\udc00\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\\ud800\\ud800\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\x1f\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc0\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc1\xbf\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xe0\x80\xaf\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xa0\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xbf\xbf\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xf0\x80\x80\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xf4\x90\x80\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xf5\x80\x80\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\x80\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xe2\x82\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xe2\x82",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xf0\x9f\x98\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"\xc3(\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":'m'}",
        "{\"jsonrpc\":\"2.0\",method:\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",}",
        "{\"jsonrpc\":\"2.0\" \"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"method\" \"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":01,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":+1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1.,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":.1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1e,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":-,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":0x10,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":NaN,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":tru}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":nul",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":truex}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1 2]}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{1:2}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[}",
        "\f{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\v",
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(scan_rc(bad[i]), JSONRPC_EPARSE, "case %zu: %s", i, bad[i]);
}

Test(jsonrpc, nul_byte_rejected)
{
    static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":1\0,\"method\":\"m\"}";
    static const char b[] = "{\"jsonrpc\":\"2.0\",\"method\":\"m\0\"}";
    static const char c[] = "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\0";
    const char *err = NULL;
    struct jsonrpc_info info;

    cr_expect_eq(scan_n(a, sizeof a - 1, &info), JSONRPC_EPARSE);
    cr_expect_eq(scan_n(b, sizeof b - 1, &info), JSONRPC_EPARSE);
    cr_expect_eq(jsonrpc_scan(c, sizeof c - 1, &info, &err), JSONRPC_EPARSE);
    cr_expect_str_eq(err, "NUL byte");
    cr_expect_eq(scan_n(c, sizeof c - 2, &info), JSONRPC_OK);
}

Test(jsonrpc, depth_limit)
{
    char *s;

    s = nested("", 64, "");
    cr_expect_eq(scan_rc(s), JSONRPC_EBATCH);
    free(s);
    s = nested("", 65, "");
    cr_expect_eq(scan_rc(s), JSONRPC_EPARSE);
    free(s);
    /* The top-level object is depth 1. */
    s = nested("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":", 63, "}");
    cr_expect_eq(scan_rc(s), JSONRPC_OK);
    free(s);
    s = nested("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":", 64, "}");
    cr_expect_eq(scan_rc(s), JSONRPC_EPARSE);
    free(s);
    /* Inside params._meta (depth 3), the same limit applies. */
    s = nested("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"_meta\":{\"x\":", 61, "}}}");
    cr_expect_eq(scan_rc(s), JSONRPC_OK);
    free(s);
    s = nested("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"_meta\":{\"x\":", 62, "}}}");
    cr_expect_eq(scan_rc(s), JSONRPC_EPARSE);
    free(s);
    s = nested("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"requestId\":", 62, "}}");
    cr_expect_eq(scan_rc(s), JSONRPC_OK);
    free(s);
    s = nested("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"requestId\":", 63, "}}");
    cr_expect_eq(scan_rc(s), JSONRPC_EPARSE);
    free(s);
    /* Far too deep must fail cleanly too (no recursion to blow up). */
    s = nested("", 100000, "");
    cr_expect_eq(scan_rc(s), JSONRPC_EPARSE);
    free(s);
}

Test(jsonrpc, einvalid_versus_eparse)
{
    static const char *const invalid[] = {
        "{}",
        "42",
        "\"x\"",
        "null",
        "  true ",
        "{\"id\":1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.1\",\"id\":1,\"method\":\"m\"}",
        "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0 \",\"id\":1,\"method\":\"m\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"error\":{}}",
        "{\"jsonrpc\":\"2.0\",\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"error\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":null}",
        "{\"jsonrpc\":\"2.0\",\"id\":false,\"result\":1}",
    };

    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        cr_expect_eq(scan_rc(invalid[i]), JSONRPC_EINVALID, "%s", invalid[i]);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2\\u002e0\",\"id\":1,\"method\":\"m\"}"), JSONRPC_OK);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"result\":1,"),
                 JSONRPC_EPARSE);
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"\xc0\x80\"}"),
                 JSONRPC_EPARSE);
}

Test(jsonrpc, valid_json_edge_cases)
{
    static const char *const ok[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\\u0000\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\\ud83d\\ude00\\uDBFF\\uDFFF\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xf4\x8f\xbf\xbf\xef\xbf\xbf\xc2\x80\x7f\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[-0,0e0,1E+2,1e-400,1e400,-1.25e-10]}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"\":{\"\":[[],{},\"\"]}}}",
        "\t{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"result\" : [ true , false , null ] }\r\n",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
    };

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect_eq(scan_rc(ok[i]), JSONRPC_OK, "%s", ok[i]);
}

/* Long strings exercise the eight-bytes-at-a-time path at every alignment of the special byte. */
Test(jsonrpc, long_strings)
{
    static const char *const inserts[] = {
        "\"", "\\n", "\xc3\xa9", "\x01", "\xc3", "\xed\xa0\x80"
    };
    static const int expect[] = { JSONRPC_EPARSE, JSONRPC_OK,     JSONRPC_OK,
                                  JSONRPC_EPARSE, JSONRPC_EPARSE, JSONRPC_EPARSE };
    const char *head = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"";
    char buf[256];

    for (size_t k = 0; k < sizeof inserts / sizeof inserts[0]; k++) {
        for (size_t pos = 0; pos < 40; pos++) {
            size_t o = strlen(head);
            memcpy(buf, head, o);
            memset(buf + o, 'a', pos);
            o += pos;
            memcpy(buf + o, inserts[k], strlen(inserts[k]));
            o += strlen(inserts[k]);
            memset(buf + o, 'b', 40 - pos);
            o += 40 - pos;
            memcpy(buf + o, "\"}", 3);
            cr_expect_eq(scan_rc(buf), expect[k], "insert %zu at %zu", k, pos);
        }
    }
}

static json_t *
load(const char *s, size_t n)
{
    json_error_t err;
    json_t *j = json_loadb(s, n, JSON_DECODE_INT_AS_REAL, &err);

    cr_assert_not_null(j, "%s: %s", s, err.text);
    return j;
}

Test(jsonrpc, error_builder)
{
    static const char *const ids[] = { "7", "144444444444444444444444444444",
                                       "\"a\\\"b\\u00e9\\n\"", "-1.5e3" };
    const char *msg = "bad \"thing\"\n\xc3\xa9 </script>";
    struct jsonrpc_info info;
    size_t len;

    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char *s = jsonrpc_error_new(ids[i], strlen(ids[i]), JSONRPC_INVALID_PARAMS, msg, &len);
        json_t *j = load(s, len);
        json_t *e = json_object_get(j, "error");

        cr_expect_eq(strlen(s), len);
        cr_expect_null(strchr(s, '\n'));
        cr_expect_str_eq(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
        cr_expect_eq(json_number_value(json_object_get(e, "code")), -32602.0);
        cr_expect_str_eq(json_string_value(json_object_get(e, "message")), msg);
        cr_assert_eq(scan_n(s, len, &info), JSONRPC_OK);
        cr_expect_eq(info.kind, JSONRPC_ERROR);
        cr_expect(span_is(s, info.id, ids[i]), "%s", s);
        json_decref(j);
        free(s);
    }

    char *s = jsonrpc_error_new(NULL, 0, JSONRPC_PARSE_ERROR, "Parse error", &len);
    cr_expect_str_eq(s, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
                        "{\"code\":-32700,\"message\":\"Parse error\"}}");
    cr_expect_eq(len, strlen(s));
    free(s);
    /* Text that jansson cannot encode becomes "" rather than broken JSON. */
    s = jsonrpc_error_new("1", 1, JSONRPC_INTERNAL_ERROR, "bad \xff", &len);
    cr_expect_str_eq(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":"
                        "{\"code\":-32603,\"message\":\"\"}}");
    free(s);
}

Test(jsonrpc, cancel_builder)
{
    static const char *const ids[] = { "12", "144444444444444444444444444444",
                                       "\"tok\\\\\\ud83d\\ude00\"" };
    struct jsonrpc_info info;
    size_t len;

    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char *s = jsonrpc_cancel_new(ids[i], strlen(ids[i]), "client \"went\" away", &len);
        json_t *j = load(s, len);
        json_t *params = json_object_get(j, "params");

        cr_expect_str_eq(json_string_value(json_object_get(j, "method")),
                         "notifications/cancelled");
        cr_expect_str_eq(json_string_value(json_object_get(params, "reason")),
                         "client \"went\" away");
        cr_expect_null(json_object_get(j, "id"));
        cr_assert_eq(scan_n(s, len, &info), JSONRPC_OK);
        cr_expect_eq(info.kind, JSONRPC_NOTIFICATION);
        cr_expect_str_eq(info.method, "notifications/cancelled");
        cr_expect(span_is(s, info.request_id, ids[i]), "%s", s);
        json_decref(j);
        free(s);
    }

    char *s = jsonrpc_cancel_new("\"x\"", 3, NULL, &len);
    cr_expect_str_eq(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                        "\"params\":{\"requestId\":\"x\"}}");
    cr_expect_eq(len, strlen(s));
    free(s);
}

Test(jsonrpc, protocol_version)
{
    static const char req[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"c\"}}}";
    static const char res[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"
                              "{\"protocolVersion\":\"2025-03-26\",\"capabilities\":{}}}";
    static const char bigid[] = "{\"jsonrpc\":\"2.0\",\"id\":144444444444444444444444444444,"
                                "\"result\":{\"protocolVersion\":\"2025-03-26\"}}";
    static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1\0,\"result\":"
                              "{\"protocolVersion\":\"2025-03-26\"}}";
    char out[32];

    cr_assert_eq(jsonrpc_protocol_version(req, sizeof req - 1, out, sizeof out), 0);
    cr_expect_str_eq(out, "2025-06-18");
    cr_assert_eq(jsonrpc_protocol_version(res, sizeof res - 1, out, sizeof out), 0);
    cr_expect_str_eq(out, "2025-03-26");
    cr_assert_eq(jsonrpc_protocol_version(bigid, sizeof bigid - 1, out, sizeof out), 0);
    cr_expect_str_eq(out, "2025-03-26");
    /* Exactly fits (10 bytes + NUL), then one byte short. */
    cr_expect_eq(jsonrpc_protocol_version(res, sizeof res - 1, out, 11), 0);
    cr_expect_eq(jsonrpc_protocol_version(res, sizeof res - 1, out, 10), -1);
    cr_expect_eq(jsonrpc_protocol_version(res, sizeof res - 1, out, 0), -1);
    cr_expect_eq(jsonrpc_protocol_version(nul, sizeof nul - 1, out, sizeof out), -1);

    static const char *const none[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":20250618}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
        "\"result\":{\"protocolVersion\":\"2025-06-18\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[]}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"x\",\"protocolVersion\":"
        "\"y\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-03-26\"}",
        "[]",
        "",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        cr_expect_eq(jsonrpc_protocol_version(none[i], strlen(none[i]), out, sizeof out), -1, "%s",
                     none[i]);
}

Test(jsonrpc, id_u64)
{
    static const struct {
        const char *s;
        bool ok;
        uint64_t v;
    } cases[] = {
        { "0", true, 0 },
        { "7", true, 7 },
        { "42", true, 42 },
        { "18446744073709551615", true, UINT64_MAX },
        { "18446744073709551616", false, 0 },
        { "99999999999999999999", false, 0 },
        { "144444444444444444444444444444", false, 0 },
        { "007", false, 0 },
        { "00", false, 0 },
        { "-1", false, 0 },
        { "-0", false, 0 },
        { "1.0", false, 0 },
        { "1e3", false, 0 },
        { "\"1\"", false, 0 },
        { "null", false, 0 },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Offset the span into a larger buffer to check that off is honoured. */
        char buf[64];
        struct jsonrpc_span sp = { 3, strlen(cases[i].s) };
        uint64_t v = 12345;

        snprintf(buf, sizeof buf, "xx:%s,9", cases[i].s);
        cr_expect_eq(jsonrpc_id_u64(buf, sp, &v), cases[i].ok, "%s", cases[i].s);
        if (cases[i].ok)
            cr_expect_eq(v, cases[i].v, "%s", cases[i].s);
    }
    uint64_t v;
    struct jsonrpc_span empty = { 0, 0 };
    cr_expect_not(jsonrpc_id_u64("1", empty, &v));
}

/*
 * The scanner and jansson agree on what is JSON. Left out, as known differences: NUL bytes and
 * integers beyond long long or reals that overflow a double (jansson quirks), \u0000 (jansson
 * rejects it by default), and nesting past 64.
 */
Test(jsonrpc, differential_with_jansson)
{
    static const char *const inputs[] = {
        "{}",
        "[]",
        "1",
        "-0.5e+7",
        "\"s\"",
        "true",
        "null",
        " {\"a\" : [1, 2.5, -3e2, true, false, null, \"x\", {}, []]} ",
        "{\"a\":\"\\ud83d\\ude00\\u00e9\\/\\b\\f\\n\\r\\t\\\"\\\\\"}",
        "\"\xe2\x82\xac\xf0\x9f\x98\x80\xc2\xa9\xef\xbf\xbf\xf4\x8f\xbf\xbf\"",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"_meta\":{}}}",
        "{\"a\":1,\"a\":2}",
        "[1,2,3]\n",
        "",
        "   ",
        "{",
        "}",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{a:1}",
        "['x']",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "+1",
        "0x1",
        "tru",
        "nulll",
        "\"a\tb\"",
        "\"a\x7f\"",
        "\"\\x41\"",
        "\"\\u004\"",
        "\"\\ud800\"",
        "\"\\udc00x\"",
        "\"\\ud800\\u0041\"",
        "\"\xc0\x80\"",
        "\"\xed\xa0\x80\"",
        "\"\xf5\x80\x80\x80\"",
        "\"\xe2\x82\"",
        "\"\x80\"",
        "1 2",
        "{}{}",
        "\xef\xbb\xbf{}",
        "\f1",
        "[[[[[[[[[[]]]]]]]]]]",
        "[[[[[[[[[[]]]]]]]]]",
    };

    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        struct jsonrpc_info info;
        json_error_t err;
        size_t n = strlen(inputs[i]);
        json_t *j = json_loadb(inputs[i], n, JSON_DECODE_ANY, &err);
        bool scanner_ok = scan_n(inputs[i], n, &info) != JSONRPC_EPARSE;

        cr_expect_eq(scanner_ok, j != NULL, "case %zu: %s (jansson: %s)", i, inputs[i],
                     j != NULL ? "ok" : err.text);
        json_decref(j);
    }
}

/* --- batches (2025-03-26) and task states ------------------------------------------------ */

static void
expect_split(const char *text, size_t max, int rc_want, const char *const *want, size_t nwant)
{
    struct jsonrpc_span el[8];
    size_t n = 99;
    struct jsonrpc_info info;

    cr_assert_leq(max, 8);
    cr_assert_eq(scan(text, &info), JSONRPC_EBATCH, "%s is a batch", text);
    int rc = jsonrpc_batch_split(text, strlen(text), el, max, &n);
    cr_assert_eq(rc, rc_want, "%s: rc %d", text, rc);
    if (rc != 0)
        return;
    cr_assert_eq(n, nwant, "%s: %zu elements", text, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(el[i].len, strlen(want[i]), "%s: element %zu length", text, i);
        cr_assert(memcmp(text + el[i].off, want[i], el[i].len) == 0, "%s: element %zu", text, i);
    }
}

Test(jsonrpc, batch_split_elements_in_order)
{
    static const char *const two[] = { "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}",
                                       "{\"jsonrpc\":\"2.0\",\"id\":\"x,]\",\"method\":\"b\"}" };
    expect_split("[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"id\":\"x,]\","
                 "\"method\":\"b\"}]",
                 8, 0, two, 2);
    static const char *const spaced[] = { "1", "[2,3]", "{\"k\":[{}]}", "\"s\"" };
    expect_split(" \r\n[ 1 ,\t[2,3],\n{\"k\":[{}]} , \"s\" ] \n", 8, 0, spaced, 4);
    expect_split("[]", 8, 0, NULL, 0);
    expect_split("[ \n ]", 8, 0, NULL, 0);
}

Test(jsonrpc, batch_split_refuses_more_than_max)
{
    static const char *const three[] = { "1", "2", "3" };
    expect_split("[1,2,3]", 3, 0, three, 3);
    expect_split("[1,2,3,4]", 3, -1, NULL, 0);
}

Test(jsonrpc, batch_split_refuses_what_is_not_an_array)
{
    struct jsonrpc_span el[4];
    size_t n;
    cr_assert_eq(jsonrpc_batch_split("{}", 2, el, 4, &n), -1);
    cr_assert_eq(jsonrpc_batch_split("", 0, el, 4, &n), -1);
    cr_assert_eq(jsonrpc_batch_split("[1,", 3, el, 4, &n), -1);
}

/* The text of span sp of text, in out. */
static const char *
span_text(const char *text, struct jsonrpc_span sp, char *out, size_t cap)
{
    cr_assert_lt(sp.len, cap);
    memcpy(out, text + sp.off, sp.len);
    out[sp.len] = '\0';
    return out;
}

/* The member's value span in text, or "" when absent; NULL when member_at refuses. */
static const char *
member(const char *text, const char *key, char *out, size_t cap)
{
    struct jsonrpc_info info;
    struct jsonrpc_span sp;
    cr_assert_eq(scan(text, &info), JSONRPC_OK, "%s", text);
    if (jsonrpc_member_at(text, info.result, key, &sp) == -1)
        return NULL;
    return span_text(text, sp, out, cap);
}

Test(jsonrpc, member_at)
{
    char v[128];
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{ \"a\" : {\"tools\":1}, \"tools\" :"
                    " [ {} ] , \"z\":\"tools\"}}";
    cr_assert_str_eq(member(r, "tools", v, sizeof(v)), "[ {} ]", "not the nested one");
    cr_assert_str_eq(member(r, "a", v, sizeof(v)), "{\"tools\":1}");
    cr_assert_str_eq(member(r, "nope", v, sizeof(v)), "", "absent");
    cr_assert_str_eq(member("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "tools", v, sizeof(v)),
                     "");
    cr_assert_str_eq(member("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\\u006fols\":2}}",
                            "tools", v, sizeof(v)),
                     "2", "keys are compared unescaped");
    cr_assert_null(
        member("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":1,\"x\":0,\"tools\":2}}",
               "tools", v, sizeof(v)),
        "named twice: which one counts is anyone's guess");
    /* Element spans of an array work too, as the tool policy uses them. */
    const char *list = "[{\"name\":\"echo\"}, 3]";
    struct jsonrpc_span el[2], sp;
    size_t n;
    cr_assert_eq(jsonrpc_batch_split(list, strlen(list), el, 2, &n), 0);
    cr_assert_eq(jsonrpc_member_at(list, el[0], "name", &sp), 0);
    cr_assert_eq(sp.len, 6);
    cr_assert(memcmp(list + sp.off, "\"echo\"", 6) == 0);
    cr_assert_eq(jsonrpc_member_at(list, el[1], "name", &sp), -1, "not an object");
}

/* The taskId span jsonrpc_created_task gives for text, quotes included, or NULL for none. */
static const char *
created_task(const char *text, char *out, size_t cap)
{
    struct jsonrpc_info info;
    struct jsonrpc_span task, id;
    cr_assert_eq(scan(text, &info), JSONRPC_OK, "%s", text);
    if (!jsonrpc_created_task(text, &info, &task, &id))
        return NULL;
    cr_assert_eq(text[task.off], '{');
    return span_text(text, id, out, cap);
}

Test(jsonrpc, created_task_only_from_a_create_task_result)
{
    char v[64];
    cr_assert_str_eq(created_task("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"status\":"
                                  "\"working\",\"taskId\":\"t-1\"}}}",
                                  v, sizeof v),
                     "\"t-1\"");
    const char *none[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":\"t-1\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"status\":\"working\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"taskId\":7}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"taskId\":\"a\",\"taskId\":\"b\"}}}",
        ("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"x\",\"data\":{\"task\":"
         "{\"taskId\":\"t\"}}}}"),
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"task\":{\"taskId\":\"t\"}}}",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        cr_assert_null(created_task(none[i], v, sizeof v), "%s", none[i]);
}

Test(jsonrpc, task_state_from_each_message_kind)
{
    struct jsonrpc_task t;
    const char *create = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"taskId\":\"t-1\","
                         "\"status\":\"working\",\"ttl\":60000,\"createdAt\":\"x\"}}}";
    cr_assert_eq(jsonrpc_task_state(create, strlen(create), &t), 0);
    cr_assert_str_eq(t.task_id, "t-1");
    cr_assert_str_eq(t.status, "working");
    cr_assert_eq(t.ttl_ms, 60000);
    const char *get = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"taskId\":\"t-1\","
                      "\"status\":\"completed\",\"ttl\":null}}";
    cr_assert_eq(jsonrpc_task_state(get, strlen(get), &t), 0);
    cr_assert_str_eq(t.status, "completed");
    cr_assert_eq(t.ttl_ms, -1, "null ttl is unlimited");
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\","
                       "\"params\":{\"taskId\":\"t-2\",\"status\":\"input_required\"}}";
    cr_assert_eq(jsonrpc_task_state(note, strlen(note), &t), 0);
    cr_assert_str_eq(t.task_id, "t-2");
    cr_assert_str_eq(t.status, "input_required");
    cr_assert_eq(t.ttl_ms, -1);
}

Test(jsonrpc, task_state_absent_or_unusable)
{
    struct jsonrpc_task t;
    static const char *const none[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":7}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":\"\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"no\"}}",
        "not json",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        cr_assert_eq(jsonrpc_task_state(none[i], strlen(none[i]), &t), -1, "case %zu", i);
    char longid[300];
    int k =
        snprintf(longid, sizeof longid, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":\"");
    memset(longid + k, 'a', 200);
    snprintf(longid + k + 200, sizeof longid - (size_t)k - 200, "\"}}");
    cr_assert_eq(jsonrpc_task_state(longid, strlen(longid), &t), -1, "an id too long to track");
    const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"taskId\":\"a\"}}\0";
    cr_assert_eq(jsonrpc_task_state(nul, sizeof nul - 1, &t), -1, "a NUL byte");
}

/* The 2026-07-28 spans: params.name/uri/taskId/level, the _meta keys, the result's members. */
Test(jsonrpc, stateless_request_spans)
{
    const char *s = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
                    "\"echo\",\"arguments\":{\"name\":\"inner\"},\"_meta\":{"
                    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                    "\"io.modelcontextprotocol/clientCapabilities\":{\"sampling\":{}},"
                    "\"io.modelcontextprotocol/logLevel\":\"info\",\"progressToken\":\"t\"}}}";
    struct jsonrpc_info info;
    cr_assert_eq(scan(s, &info), JSONRPC_OK);
    cr_expect(span_is(s, info.name, "\"echo\""), "params.name, not arguments.name");
    cr_expect(span_is(s, info.meta_version, "\"2026-07-28\""));
    cr_expect(span_is(s, info.meta_caps, "{\"sampling\":{}}"));
    cr_expect(span_is(s, info.meta_log_level, "\"info\""));
    cr_expect(span_is(s, info.progress_token, "\"t\""));
    cr_expect_eq(info.uri.len, 0);
    cr_expect_eq(info.result.len, 0);

    const char *r = "{\"jsonrpc\":\"2.0\",\"method\":\"resources/read\",\"id\":\"x\",\"params\":{"
                    "\"uri\":\"test://a\",\"taskId\":\"k\",\"level\":\"debug\"}}";
    cr_assert_eq(scan(r, &info), JSONRPC_OK);
    cr_expect(span_is(r, info.uri, "\"test://a\""));
    cr_expect(span_is(r, info.task_id, "\"k\""));
    cr_expect(span_is(r, info.level, "\"debug\""));
    cr_expect_eq(info.meta_version.len, 0);

    /* A tracked key twice in _meta is refused like every tracked duplicate. */
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"_meta\":{"
                         "\"io.modelcontextprotocol/protocolVersion\":\"a\","
                         "\"io.modelcontextprotocol/protocolVersion\":\"b\"}}}"),
                 JSONRPC_EINVALID);
    /* Escaped key spellings are the same key. */
    const char *e = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"_meta\":{"
                    "\"io.modelcontextprotocol\\/protocolVersion\":\"v\"}}}";
    cr_assert_eq(scan(e, &info), JSONRPC_OK);
    cr_expect(span_is(e, info.meta_version, "\"v\""));
}

Test(jsonrpc, result_spans)
{
    const char *s = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"resultType\":1}],"
                    "\"ttlMs\":5,\"cacheScope\":\"public\"}}";
    struct jsonrpc_info info;
    cr_assert_eq(scan(s, &info), JSONRPC_OK);
    cr_expect_eq(info.kind, JSONRPC_RESULT);
    cr_expect_eq(s[info.result.off], '{');
    cr_expect_eq(info.result.off + info.result.len, strlen(s) - 1);
    cr_expect_eq(info.result_type.len, 0, "a nested resultType is not the result's");
    cr_expect(span_is(s, info.result_ttl, "5"));
    cr_expect(span_is(s, info.result_scope, "\"public\""));

    const char *t = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\"}}";
    cr_assert_eq(scan(t, &info), JSONRPC_OK);
    cr_expect(span_is(t, info.result_type, "\"complete\""));
    cr_expect_eq(scan_rc("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"ttlMs\":1,\"ttlMs\":2}}"),
                 JSONRPC_EINVALID);
    const char *n = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}";
    cr_assert_eq(scan(n, &info), JSONRPC_OK);
    cr_expect_eq(info.result.len, 0, "only an object result has a span");
    /* A response's params report nothing. */
    const char *q = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"params\":{\"name\":\"x\"}}";
    cr_assert_eq(scan(q, &info), JSONRPC_OK);
    cr_expect_eq(info.name.len, 0);
}

Test(jsonrpc, string_at)
{
    const char *s = "\"a\\u00e9\\n\"";
    struct jsonrpc_span sp = { 0, strlen(s) };
    char out[8];
    size_t n;
    cr_assert(jsonrpc_string_at(s, sp, out, sizeof(out), &n));
    cr_expect_eq(n, 4);
    cr_expect_str_eq(out, "a\xc3\xa9\n");
    cr_expect_not(jsonrpc_string_at(s, sp, out, 4, &n), "too long for cap - 1");
    const char *z = "\"a\\u0000\"";
    cr_expect_not(jsonrpc_string_at(z, (struct jsonrpc_span){ 0, strlen(z) }, out, 8, &n));
    cr_expect_not(jsonrpc_string_at("12", (struct jsonrpc_span){ 0, 2 }, out, 8, &n));
}

/* jsonrpc_discover_versions' callback: each version and a space, appended to the text at arg. */
static void
versions_seen(const char *version, void *arg)
{
    strcat(strcat(arg, version), " ");
}

Test(jsonrpc, stateless_builders)
{
    size_t len;
    char *p = jsonrpc_probe_new(3, "2026-07-28", "9.9", &len);
    struct jsonrpc_info info;
    cr_assert_eq(scan_n(p, len, &info), JSONRPC_OK);
    cr_expect_str_eq(info.method, "server/discover");
    cr_expect(span_is(p, info.meta_version, "\"2026-07-28\""));
    cr_expect(span_is(p, info.meta_caps, "{}"));
    free(p);
    char *i = jsonrpc_initialize_new(4, "2025-11-25", "9.9", &len);
    char v[16];
    cr_assert_eq(jsonrpc_protocol_version(i, len, v, sizeof(v)), 0);
    cr_expect_str_eq(v, "2025-11-25");
    free(i);

    const char *init =
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"protocolVersion\":\"2025-06-18\","
        "\"capabilities\":{\"tools\":{\"listChanged\":true},\"resources\":{"
        "\"subscribe\":true},\"tasks\":{}},\"serverInfo\":{\"name\":\"s\","
        "\"version\":\"1\"},\"instructions\":\"hi\"}}";
    static const char *const both[] = { "2026-07-28", "2099-01-01", NULL };
    char *d = jsonrpc_discover_from_init(init, strlen(init), both, 5, true, &len);
    cr_assert_not_null(d);
    json_t *js = json_loadb(d, len, 0, NULL);
    cr_assert_not_null(js);
    cr_expect_str_eq(json_string_value(json_object_get(js, "resultType")), "complete");
    json_t *listed = json_object_get(js, "supportedVersions");
    cr_expect_eq(json_array_size(listed), 2);
    cr_expect_str_eq(json_string_value(json_array_get(listed, 0)), "2026-07-28");
    cr_expect_str_eq(json_string_value(json_array_get(listed, 1)), "2099-01-01");
    json_t *caps = json_object_get(js, "capabilities");
    cr_expect_not_null(json_object_get(caps, "tools"));
    /* listChanged and subscribe stay (the gateway serves subscriptions/listen); tasks go. */
    cr_expect(json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged")));
    cr_expect(json_is_true(json_object_get(json_object_get(caps, "resources"), "subscribe")));
    cr_expect_eq(jsonrpc_listen_caps(init, strlen(init)),
                 JSONRPC_LISTEN_TOOLS | JSONRPC_LISTEN_UPDATES);
    cr_expect_null(json_object_get(caps, "tasks"));
    cr_expect_eq(json_integer_value(json_object_get(js, "ttlMs")), 5);
    cr_expect_str_eq(json_string_value(json_object_get(js, "cacheScope")), "public");
    cr_expect_str_eq(json_string_value(json_object_get(js, "instructions")), "hi");
    cr_expect_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(js, "_meta"), "io.modelcontextprotocol/serverInfo"),
            "name")),
        "s");
    json_decref(js);
    free(d);
    cr_expect_null(jsonrpc_discover_from_init("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{}}", 34,
                                              both, 0, false, &len));

    const char *disc = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"supportedVersions\":["
                       "\"2025-11-25\",\"2026-07-28\"]}}";
    char seen[128] = "";
    cr_expect(jsonrpc_discover_versions(disc, strlen(disc), versions_seen, seen));
    cr_expect_str_eq(seen, "2025-11-25 2026-07-28 ");
    /* The unsupported-version error's list is read as well; an answer without a list is not. */
    const char *refused = "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32022,\"message\":"
                          "\"x\",\"data\":{\"supported\":[\"2026-07-28\",7],\"requested\":\"x\"}}}";
    seen[0] = '\0';
    cr_expect(jsonrpc_discover_versions(refused, strlen(refused), versions_seen, seen));
    cr_expect_str_eq(seen, "2026-07-28 ");
    const char *bare =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32022,\"message\":\"x\"}}";
    seen[0] = '\0';
    cr_expect_not(jsonrpc_discover_versions(bare, strlen(bare), versions_seen, seen));
    cr_expect_not(jsonrpc_discover_versions("{\"result\":{}}", 13, versions_seen, seen));
    cr_expect_str_eq(seen, "");

    static const char *const sup[] = { "2026-07-28", NULL };
    char *e = jsonrpc_version_error_new("\"r\"", 3, "1999-01-01", sup, &len);
    js = json_loadb(e, len, 0, NULL);
    cr_assert_not_null(js);
    cr_expect_str_eq(json_string_value(json_object_get(js, "id")), "r");
    json_t *err = json_object_get(js, "error");
    cr_expect_eq(json_integer_value(json_object_get(err, "code")), -32022);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(err, "data"), "requested")),
                     "1999-01-01");
    cr_expect_eq(json_array_size(json_object_get(json_object_get(err, "data"), "supported")), 1);
    json_decref(js);
    int code = 0;
    cr_expect_eq(jsonrpc_error_code(e, len, &code), 0);
    cr_expect_eq(code, -32022);
    free(e);
    cr_expect_eq(jsonrpc_error_code(disc, strlen(disc), &code), -1, "a result has no error code");
}

/* obj with members (each with its leading comma) put first, as the pool stamps a result. */
static char *
with_first(const char *obj, const char *members)
{
    struct jsonrpc_span sp = { 0, strlen(obj) };
    char m[128];
    size_t len = strlen(members);
    memcpy(m, members, len);
    len = jsonrpc_members_first(obj, sp, m, len);
    char *out = malloc(sp.len + len + 1);
    out[0] = obj[0];
    memcpy(out + 1, m, len);
    memcpy(out + 1 + len, obj + 1, sp.len - 1);
    out[sp.len + len] = '\0';
    return out;
}

Test(jsonrpc, members_first)
{
    static const char *const cases[][3] = {
        { "{}", ",\"a\":1", "{\"a\":1}" },
        { "{ }", ",\"a\":1,\"b\":\"x\"", "{\"a\":1,\"b\":\"x\" }" },
        { "{ \t\r\n}", ",\"a\":1", "{\"a\":1 \t\r\n}" },
        { "{\"c\":3}", ",\"a\":1,\"b\":2", "{\"a\":1,\"b\":2,\"c\":3}" },
        { "{ \"c\":{}}", ",\"a\":1", "{\"a\":1, \"c\":{}}" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = with_first(cases[i][0], cases[i][1]);
        cr_expect_str_eq(got, cases[i][2], "%s with %s", cases[i][0], cases[i][1]);
        json_error_t e;
        json_t *j = json_loads(got, 0, &e);
        cr_expect(j != NULL, "%s is not JSON: %s", got, e.text);
        json_decref(j);
        free(got);
    }
}

/* A legacy session in front of a stateless child: the initialize result made from discover. */
Test(jsonrpc, init_from_discover)
{
    size_t len;
    const char *disc =
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"resultType\":\"complete\","
        "\"supportedVersions\":"
        "[\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true},\"prompts\":5,"
        "\"resources\":{\"subscribe\":true,\"listChanged\":true},\"extensions\":{\"x\":{}},"
        "\"tasks\":{}},\"instructions\":\"hi\",\"ttlMs\":0,\"_meta\":{"
        "\"io.modelcontextprotocol/"
        "serverInfo\":{\"name\":\"s\",\"version\":\"2\",\"title\":\"S\"}}}}";
    char *r = jsonrpc_init_from_discover(disc, strlen(disc), "2025-06-18", JSONRPC_LISTEN_TOOLS,
                                         "fallback", &len);
    cr_assert_not_null(r);
    json_t *js = json_loadb(r, len, 0, NULL);
    cr_assert_not_null(js);
    cr_expect_str_eq(json_string_value(json_object_get(js, "protocolVersion")), "2025-06-18");
    cr_expect_str_eq(json_string_value(json_object_get(js, "instructions")), "hi");
    json_t *caps = json_object_get(js, "capabilities");
    /* listChanged only where the gateway listens; no prompts (not an object), tasks, extensions. */
    cr_expect(json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged")));
    cr_expect_null(json_object_get(json_object_get(caps, "resources"), "listChanged"));
    cr_expect_null(json_object_get(json_object_get(caps, "resources"), "subscribe"));
    cr_expect_null(json_object_get(caps, "prompts"));
    cr_expect_null(json_object_get(caps, "tasks"));
    cr_expect_null(json_object_get(caps, "extensions"));
    json_t *info = json_object_get(js, "serverInfo");
    cr_expect_str_eq(json_string_value(json_object_get(info, "name")), "s");
    cr_expect_str_eq(json_string_value(json_object_get(info, "version")), "2");
    cr_expect_str_eq(json_string_value(json_object_get(info, "title")), "S");
    cr_expect_null(json_object_get(js, "resultType"));
    json_decref(js);
    free(r);
    /* No serverInfo: the fallback name and an empty version; no result object: NULL. */
    const char *bare = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"capabilities\":[]}}";
    r = jsonrpc_init_from_discover(bare, strlen(bare), "2025-11-25", 0, "fallback", &len);
    cr_assert_not_null(r);
    cr_expect_str_eq(r, "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":"
                        "{\"name\":\"fallback\",\"version\":\"\"}}");
    free(r);
    const char *err = "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":1,\"message\":\"x\"}}";
    cr_expect_null(jsonrpc_init_from_discover(err, strlen(err), "2025-11-25", 0, "f", &len));
}

struct asks_seen {
    char text[256];
};

static void
asks_seen_cb(const char *key, const char *method, const char *params, void *arg)
{
    struct asks_seen *a = arg;
    size_t n = strlen(a->text);
    snprintf(a->text + n, sizeof a->text - n, "%s=%s:%s;", key, method, params ? params : "-");
}

/* The questions of an input_required result, and what makes one malformed. */
Test(jsonrpc, input_requests)
{
    struct asks_seen a = { "" };
    char *state = NULL;
    size_t slen = 0;
    const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\","
                     "\"inputRequests\":{\"a\":{\"method\":\"roots/list\"},\"b\":{\"method\":"
                     "\"elicitation/create\",\"params\":{\"message\":\"m\"}}},\"requestState\":"
                     "\"s\\\"1\"}}";
    cr_expect_eq(jsonrpc_input_requests(ok, strlen(ok), 8, asks_seen_cb, &a, &state, &slen), 2);
    cr_expect_str_eq(a.text, "a=roots/list:-;b=elicitation/create:{\"message\":\"m\"};");
    cr_assert_not_null(state);
    cr_expect_str_eq(state, "\"s\\\"1\"");
    cr_expect_eq(slen, strlen(state));
    free(state);
    const char *only_state =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\","
        "\"requestState\":\"x\"}}";
    cr_expect_eq(
        jsonrpc_input_requests(only_state, strlen(only_state), 8, asks_seen_cb, &a, &state, &slen),
        0);
    free(state);
    static const char *const bad[] = {
        "{\"result\":{\"resultType\":\"input_required\"}}",
        "{\"result\":{\"inputRequests\":[]}}",
        "{\"result\":{\"inputRequests\":{\"a\":{\"method\":7}}}}",
        "{\"result\":{\"inputRequests\":{\"a\":{\"method\":\"roots/list\",\"params\":[]}}}}",
        "{\"result\":{\"requestState\":5}}",
        "{\"result\":{\"inputRequests\":{\"a\":{\"method\":\"x\"},\"b\":{\"method\":\"x\"}}}}",
        "not json",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        a.text[0] = '\0';
        cr_expect_eq(
            jsonrpc_input_requests(bad[i], strlen(bad[i]), 1, asks_seen_cb, &a, &state, &slen), -1,
            "%s", bad[i]);
        cr_expect_null(state);
        cr_expect_str_eq(a.text, "");
    }
}
