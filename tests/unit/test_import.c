/* SPDX-License-Identifier: MIT */
/*
 * import: the sections --import-mcp-json writes load back through the config loader with
 * exactly the JSON's argv and env, whatever the arguments hold (blanks, quotes, backslashes, $,
 * ;, #, a leading [ or #, long lines); what cannot be carried over is skipped and named.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "config.h"
#include "import.h"

TestSuite(import, .timeout = 30);

/* import_mcp_text on json: the sections (new string) and the messages (into msgs). */
static char *
run_import(const char *json, const char *env_dir, int *count, char **msgs)
{
    char *out = NULL, *err = NULL;
    size_t ol = 0, el = 0;
    FILE *o = open_memstream(&out, &ol), *e = open_memstream(&err, &el);
    cr_assert(o != NULL && e != NULL);
    *count = import_mcp_text(json, strlen(json), "t.json", env_dir, o, e);
    fclose(o);
    fclose(e);
    *msgs = err;
    return out;
}

static void
load_ok(const char *text, struct config *cfg)
{
    char err[512] = "";
    int rc = config_load_string(text, "t.ini", cfg, err, sizeof err);
    cr_assert_eq(rc, 0, "load failed: %s\n--- text ---\n%s", err, text);
}

static void
expect_strv(char **got, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(got[i], "word %zu missing (want \"%s\")", i, want[i]);
        cr_assert_str_eq(got[i], want[i], "word %zu", i);
    }
    cr_assert_null(got[n], "extra word %s", got[n]);
}

/* The hostile words, as C strings and as JSON strings. */
static const char *const words[] = {
    "npx",
    "-y",
    "@modelcontextprotocol/server-filesystem",
    "/Users/me/My Documents",
    "it's",
    "a \"quoted\" word",
    "back\\slash\\",
    "$HOME and `cmd` ${ x}",
    "semi ; colon;",
    "#hash at start",
    ";semi at start",
    "[server:x]",
    "",
    "tab\there",
    " lead and trail ",
    "=:",
    "caf\xc3\xa9",
};
static const char *const words_json =
    "[\"-y\",\"@modelcontextprotocol/server-filesystem\",\"/Users/me/My Documents\",\"it's\","
    "\"a \\\"quoted\\\" word\",\"back\\\\slash\\\\\",\"$HOME and `cmd` ${ x}\",\"semi ; colon;\","
    "\"#hash at start\",\";semi at start\",\"[server:x]\",\"\",\"tab\\there\","
    "\" lead and trail \",\"=:\",\"caf\\u00e9\"]";

Test(import, argv_and_env_round_trip_inline)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{\"mcpServers\":{\"filesystem\":{\"command\":\"npx\",\"args\":%s,"
             "\"env\":{\"API_KEY\":\"s3cr;et 'x' \\\"y\\\" $z\",\"EMPTY\":\"\"}}}}",
             words_json);
    int count;
    char *msgs, *ini = run_import(json, NULL, &count, &msgs);
    cr_assert_eq(count, 1, "%s", msgs);
    cr_assert(strstr(msgs, "use --env-dir") != NULL, "no inline env warning: %s", msgs);
    struct config cfg;
    load_ok(ini, &cfg);
    cr_assert_eq(cfg.n_servers, 1);
    cr_assert_str_eq(cfg.servers[0].name, "filesystem");
    cr_assert_str_eq(cfg.servers[0].path, "/mcp/filesystem");
    expect_strv(cfg.servers[0].argv, words, sizeof words / sizeof *words);
    const char *const env[] = { "API_KEY=s3cr;et 'x' \"y\" $z", "EMPTY=" };
    expect_strv(cfg.servers[0].env, env, 2);
    config_clear(&cfg);
    free(ini);
    free(msgs);
}

Test(import, long_command_lines_use_continuations)
{
    char json[8192] =
        "{\"servers\":{\"long\":{\"type\":\"stdio\",\"command\":\"/bin/echo\",\"args\":[";
    char want[40][64];
    const char *wantv[41] = { "/bin/echo" };
    for (int i = 0; i < 40; i++) {
        snprintf(want[i], sizeof want[i], "--option-%02d=a value with blanks", i);
        wantv[i + 1] = want[i];
        strcat(json, i ? ",\"" : "\"");
        strcat(json, want[i]);
        strcat(json, "\"");
    }
    strcat(json, "]}}}");
    int count;
    char *msgs, *ini = run_import(json, NULL, &count, &msgs);
    cr_assert_eq(count, 1, "%s", msgs);
    for (char *p = ini, *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1)
        cr_assert_leq(nl - p, 198, "a line of %td bytes", nl - p);
    struct config cfg;
    load_ok(ini, &cfg);
    expect_strv(cfg.servers[0].argv, wantv, 41);
    config_clear(&cfg);
    free(ini);
    free(msgs);
}

Test(import, env_dir_gets_a_0600_file_that_loads)
{
    char dir[] = "/tmp/import-unit-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    int count;
    char *msgs, *ini = run_import("{\"mcpServers\":{\"gh\":{\"command\":\"/bin/cat\",\"env\":"
                                  "{\"GITHUB_TOKEN\":\"ghp_x y;z #w\",\"B\":\"'q'\"}}}}",
                                  dir, &count, &msgs);
    cr_assert_eq(count, 1, "%s", msgs);
    char path[256];
    snprintf(path, sizeof path, "%s/gh.env", dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600);
    cr_assert(strstr(ini, "env_file = ") != NULL && strstr(ini, "ghp_") == NULL, "%s", ini);
    struct config cfg;
    load_ok(ini, &cfg);
    const char *const env[] = { "GITHUB_TOKEN=ghp_x y;z #w", "B='q'" };
    expect_strv(cfg.servers[0].env, env, 2);
    config_clear(&cfg);
    unlink(path);
    rmdir(dir);
    free(ini);
    free(msgs);
}

Test(import, skipped_entries_are_named_with_reasons)
{
    int count;
    char *msgs,
        *ini = run_import("{\"servers\":{\"remote\":{\"type\":\"http\",\"url\":\"https://x/mcp\"},"
                          "\"sse\":{\"type\":\"sse\",\"url\":\"https://x/sse\"},"
                          "\"key\":{\"type\":\"stdio\",\"command\":\"/bin/cat\","
                          "\"env\":{\"K\":\"${input:api-key}\"}},"
                          "\"off\":{\"command\":\"/bin/cat\",\"disabled\":true},"
                          "\"odd\":{\"command\":\"/bin/cat\",\"autoApprove\":[]},"
                          "\"nl\":{\"command\":\"/bin/cat\",\"args\":[\"a\\nb\"]},"
                          "\"str\":{\"command\":\"/bin/cat\",\"args\":\"-v\"},"
                          "\"bad name/x\":{\"command\":\"/bin/cat\"},"
                          "\"bad name?x\":{\"command\":\"/bin/cat\"}},\"inputs\":[]}",
                          NULL, &count, &msgs);
    cr_assert_eq(count, 2, "%s", msgs);
    const char *const want[] = {
        "remote: skipped: remote (http)",
        "sse: skipped: remote (sse)",
        "key: skipped: env K uses ${input:api-key}, which cannot be resolved",
        "off: skipped: disabled",
        "odd: skipped: unknown field \"autoApprove\"",
        "nl: skipped: the command line holds a line break",
        "str: skipped: args is not an array",
        "bad name/x: imported as [server:bad-name-x]",
        "bad name?x: imported as [server:bad-name-x-2]",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(msgs, want[i]) != NULL, "no \"%s\" in:\n%s", want[i], msgs);
    struct config cfg;
    load_ok(ini, &cfg);
    cr_assert_eq(cfg.n_servers, 2);
    config_clear(&cfg);
    free(ini);
    free(msgs);
}

Test(import, a_byte_order_mark_is_skipped)
{
    int count;
    char *msgs, *ini = run_import("\xEF\xBB\xBF{\"mcpServers\":{\"a\":{\"command\":\"/bin/cat\"}}}",
                                  NULL, &count, &msgs);
    cr_assert_eq(count, 1, "%s", msgs);
    free(ini);
    free(msgs);
}

Test(import, a_bad_file_is_refused)
{
    static const char *const bad[] = { "", "[]", "{\"mcpServers\":[]}", "{\"other\":{}}",
                                       "{\"mcpServers\":{},\"mcpServers\":{}}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int count;
        char *msgs, *ini = run_import(bad[i], NULL, &count, &msgs);
        cr_assert_eq(count, -1, "%s accepted", bad[i]);
        cr_assert(strncmp(msgs, "t.json: ", 8) == 0, "%s", msgs);
        free(ini);
        free(msgs);
    }
}
