/* SPDX-License-Identifier: MIT */
/*
 * config: defaults, bounds, listen syntax, lists, shell splitting, duplicates, long and
 * continuation lines, several servers, and the keys' prose (options.md: every key of the table
 * once; the man page, README tables and conf comments written from it), through config.h only.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "config.h"
#include "slurp.h"

TestSuite(config, .timeout = 30);

#define SERVER "[server:a]\ncommand = /bin/cat\n"

static void
load_ok(const char *text, struct config *cfg)
{
    char err[512] = "";
    int rc = config_load_string(text, "t.ini", cfg, err, sizeof err);
    cr_assert_eq(rc, 0, "load failed: %s\n--- text ---\n%s", err, text);
}

static void
expect_zeroed(const struct config *cfg)
{
    struct config zero;
    memset(&zero, 0, sizeof zero);
    cr_assert(memcmp(cfg, &zero, sizeof zero) == 0, "cfg not zeroed after a failed load");
}

static void
load_err(const char *text, const char *want)
{
    struct config cfg;
    char err[512] = "";
    int rc = config_load_string(text, "t.ini", &cfg, err, sizeof err);
    cr_assert_eq(rc, -1, "expected failure \"%s\"\n--- text ---\n%s", want, text);
    cr_assert_str_eq(err, want, "got %s\n--- text ---\n%s", err, text);
    expect_zeroed(&cfg);
}

/* One [gateway] key with a minimal server after it; the key is on line 2. */
static void
gw_err(const char *line, const char *want)
{
    char text[1024];
    snprintf(text, sizeof text, "[gateway]\n%s\n" SERVER, line);
    load_err(text, want);
}

static void
gw_ok(const char *line, struct config *cfg)
{
    char text[1024];
    snprintf(text, sizeof text, "[gateway]\n%s\n" SERVER, line);
    load_ok(text, cfg);
}

/* One key of [server:a] (line 3, after command on line 2). */
static void
sv_err(const char *line, const char *want)
{
    char text[1024];
    snprintf(text, sizeof text, SERVER "%s\n", line);
    load_err(text, want);
}

static size_t
strv_len(char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static void
expect_strv(char *const *got, const char *const *want)
{
    cr_assert_not_null(got);
    size_t n = 0;
    for (; want[n]; n++) {
        cr_assert_not_null(got[n], "entry %zu missing, want \"%s\"", n, want[n]);
        cr_assert_str_eq(got[n], want[n], "entry %zu", n);
    }
    cr_assert_null(got[n], "extra entry \"%s\"", got[n]);
}

static void
expect_defaults(const struct config *cfg)
{
    cr_assert_str_eq(cfg->listen_host, "127.0.0.1");
    cr_assert_eq(cfg->listen_port, 8080);
    cr_assert_str_eq(cfg->instance_id, "");
    cr_assert_eq(cfg->max_sessions, 1024);
    cr_assert_eq(cfg->max_connections, 4096);
    cr_assert_eq(cfg->session_idle_timeout_s, 1800);
    cr_assert_eq(cfg->max_body_bytes, 4194304);
    cr_assert_eq(cfg->max_message_bytes, 134217728);
    cr_assert_eq(cfg->stream_queue_bytes, 8388608);
    cr_assert_eq(cfg->stdin_queue_bytes, 8388608);
    cr_assert_eq(cfg->max_inflight_per_session, 256);
    cr_assert_eq(cfg->heartbeat_s, 15);
    cr_assert_eq(cfg->connection_timeout_s, 60);
    cr_assert_eq(cfg->child_stdin_grace_ms, 2000);
    cr_assert_eq(cfg->child_term_grace_ms, 3000);
    expect_strv(cfg->allowed_origins, (const char *[]){ "http://localhost:*", "http://127.0.0.1:*",
                                                        "http://[::1]:*", NULL });
    expect_strv(cfg->allowed_hosts, (const char *[]){ "localhost", "127.0.0.1", "[::1]", NULL });
    cr_assert_eq(cfg->log_level, LOG_INFO);
    cr_assert_eq(cfg->log_format, LOG_FORMAT_TEXT);
    cr_assert_eq(cfg->max_header_bytes, 16384);
    cr_assert_eq(cfg->client_header_timeout_ms, 10000);
    cr_assert_eq(cfg->client_body_timeout_ms, 60000);
    cr_assert_eq(cfg->auth.mode, CONFIG_AUTH_NONE);
    cr_assert_null(cfg->auth.public_url);
    cr_assert_null(cfg->auth.issuer);
    cr_assert_null(cfg->auth.jwks_file);
    cr_assert_null(cfg->auth.tokens_file);
    expect_strv(cfg->auth.authorization_servers, (const char *[]){ NULL });
    cr_assert_eq(cfg->auth.clock_skew_s, 60);
    cr_assert_eq(cfg->auth.max_sessions_per_principal, 0);
    cr_assert_eq(cfg->auth.rate_limit_per_s, 0);
    cr_assert_eq(cfg->auth.rate_limit_burst, 100);
    for (size_t i = 0; i < cfg->n_servers; i++) {
        expect_strv(cfg->servers[i].required_scopes, (const char *[]){ NULL });
        cr_assert_null(cfg->servers[i].policy, "no tool policy unless one is configured");
    }
}

Test(config, defaults_with_one_server)
{
    struct config cfg;
    load_ok(SERVER, &cfg);
    cr_assert_str_eq(cfg.file, "t.ini");
    expect_defaults(&cfg);
    cr_assert_eq(cfg.n_servers, 1);
    const struct config_server *s = &cfg.servers[0];
    cr_assert_str_eq(s->name, "a");
    cr_assert_str_eq(s->path, "/mcp");
    expect_strv(s->argv, (const char *[]){ "/bin/cat", NULL });
    expect_strv(s->env, (const char *[]){ NULL });
    expect_strv(s->inherit_env, (const char *[]){ "PATH", "HOME", "LANG", NULL });
    cr_assert_null(s->cwd);
    cr_assert_eq(s->line, 1);
    config_clear(&cfg);
    expect_zeroed(&cfg);
    config_clear(&cfg); /* idempotent */
}

Test(config, every_gateway_key_set)
{
    struct config cfg;
    load_ok("; comment\n"
            "[gateway]\n"
            "listen = 0.0.0.0:9000\n"
            "path = /rpc\n"
            "instance_id = gw-1_A\n"
            "max_sessions = 1\n"
            "max_connections = 16\n"
            "session_idle_timeout_s = 604800\n"
            "max_body_bytes = 1024\n"
            "max_header_bytes = 1048576\n"
            "client_header_timeout_ms = 100\n"
            "client_body_timeout_ms = 3600000\n"
            "max_message_bytes = 2147483648\n"
            "stream_queue_bytes = 65536\n"
            "stdin_queue_bytes = 65536\n"
            "max_inflight_per_session = 65536\n"
            "heartbeat_s = 3600\n"
            "connection_timeout_s = 0\n"
            "child_stdin_grace_ms = 0\n"
            "child_term_grace_ms = 600000\n"
            "allowed_origins = *\n"
            "allowed_hosts =\n"
            "log_level = debug\n"
            "log_format = json ; inline comment\n"
            "[auth]\n"
            "mode = bearer\n"
            "public_url = https://mcp.example.com:8443\n"
            "tokens_file = /etc/mcp-gateway/tokens\n" SERVER,
            &cfg);
    cr_assert_str_eq(cfg.listen_host, "0.0.0.0");
    cr_assert_eq(cfg.listen_port, 9000);
    cr_assert_str_eq(cfg.instance_id, "gw-1_A");
    cr_assert_eq(cfg.max_sessions, 1);
    cr_assert_eq(cfg.max_connections, 16);
    cr_assert_eq(cfg.session_idle_timeout_s, 604800);
    cr_assert_eq(cfg.max_body_bytes, 1024);
    cr_assert_eq(cfg.max_header_bytes, 1048576);
    cr_assert_eq(cfg.client_header_timeout_ms, 100);
    cr_assert_eq(cfg.client_body_timeout_ms, 3600000);
    cr_assert_eq(cfg.max_message_bytes, 2147483648u);
    cr_assert_eq(cfg.stream_queue_bytes, 65536);
    cr_assert_eq(cfg.stdin_queue_bytes, 65536);
    cr_assert_eq(cfg.max_inflight_per_session, 65536);
    cr_assert_eq(cfg.heartbeat_s, 3600);
    cr_assert_eq(cfg.connection_timeout_s, 0);
    cr_assert_eq(cfg.child_stdin_grace_ms, 0);
    cr_assert_eq(cfg.child_term_grace_ms, 600000);
    expect_strv(cfg.allowed_origins, (const char *[]){ "*", NULL });
    expect_strv(cfg.allowed_hosts, (const char *[]){ NULL });
    cr_assert_eq(cfg.log_level, LOG_DEBUG);
    cr_assert_eq(cfg.log_format, LOG_FORMAT_JSON);
    cr_assert_str_eq(cfg.servers[0].path, "/rpc");
    cr_assert_eq(cfg.auth.mode, CONFIG_AUTH_BEARER);
    cr_assert_str_eq(cfg.auth.public_url, "https://mcp.example.com:8443");
    cr_assert_str_eq(cfg.auth.tokens_file, "/etc/mcp-gateway/tokens");
    cr_assert_eq(cfg.servers[0].line, 29);
    config_clear(&cfg);
}

/* An [auth] section (lines 2..) before a minimal server. */
static void
auth_err(const char *lines, const char *want)
{
    char text[2048];
    snprintf(text, sizeof text, "[auth]\n%s\n" SERVER, lines);
    load_err(text, want);
}

Test(config, auth_modes_and_what_they_need)
{
    struct config cfg;
    load_ok("[auth]\nmode = jwt\npublic_url = https://mcp.example.com\njwks_file = /k.json\n"
            "issuer = https://idp.example.com/realm\nclock_skew_s = 0\n"
            "max_sessions_per_principal = 5\nrate_limit_per_s = 10\nrate_limit_burst = 20\n"
            "[server:a]\ncommand = /bin/cat\nrequired_scopes = mcp:tools, mcp:read\n",
            &cfg);
    cr_assert_eq(cfg.auth.mode, CONFIG_AUTH_JWT);
    cr_assert_str_eq(cfg.auth.issuer, "https://idp.example.com/realm");
    cr_assert_str_eq(cfg.auth.jwks_file, "/k.json");
    /* authorization_servers defaults to the issuer */
    expect_strv(cfg.auth.authorization_servers,
                (const char *[]){ "https://idp.example.com/realm", NULL });
    cr_assert_eq(cfg.auth.clock_skew_s, 0);
    cr_assert_eq(cfg.auth.max_sessions_per_principal, 5);
    cr_assert_eq(cfg.auth.rate_limit_per_s, 10);
    cr_assert_eq(cfg.auth.rate_limit_burst, 20);
    expect_strv(cfg.servers[0].required_scopes, (const char *[]){ "mcp:tools", "mcp:read", NULL });
    config_clear(&cfg);
    load_ok("[auth]\nmode = jwt\npublic_url = http://127.0.0.1:8080\njwks_file = k\nissuer = i\n"
            "authorization_servers = https://a.example, https://b.example\n" SERVER,
            &cfg);
    expect_strv(cfg.auth.authorization_servers,
                (const char *[]){ "https://a.example", "https://b.example", NULL });
    config_clear(&cfg);

    auth_err("mode = oauth", "t.ini:2: mode: must be none, bearer or jwt");
    auth_err("mode = bearer", "t.ini:2: public_url: is required with mode = bearer");
    auth_err("mode = bearer\npublic_url = https://a",
             "t.ini:2: tokens_file: is required with mode = bearer");
    /* Keys from the issuer's discovery document need an https issuer to discover them from. */
    auth_err("mode = jwt\npublic_url = https://a\nissuer = i",
             "t.ini:4: issuer: must be an https:// URL to discover its keys from (or set jwks_file "
             "or jwks_uri)");
    load_ok("[auth]\nmode = jwt\npublic_url = https://a\nissuer = https://idp.example/r\n" SERVER,
            &cfg);
    cr_assert_null(cfg.auth.jwks_file);
    cr_assert_null(cfg.auth.jwks_uri);
    cr_assert_null(cfg.auth.introspection_credentials_file);
    cr_assert_eq(cfg.auth.fetch_timeout_ms, 5000);
    cr_assert_eq(cfg.auth.jwks_cache_min_s, 60);
    cr_assert_eq(cfg.auth.jwks_cache_max_s, 3600);
    cr_assert_eq(cfg.auth.jwks_refetch_interval_ms, 10000);
    cr_assert_eq(cfg.auth.introspection_cache_max_s, 300);
    cr_assert_eq(cfg.auth.introspection_max_pending, 64);
    config_clear(&cfg);
    load_ok("[auth]\nmode = jwt\npublic_url = https://a\nissuer = i\n"
            "jwks_uri = https://idp.example/keys\nintrospection_endpoint = https://idp.example/i\n"
            "introspection_credentials_file = /c\ntls_ca_file = /ca.pem\n" SERVER,
            &cfg);
    cr_assert_str_eq(cfg.auth.jwks_uri, "https://idp.example/keys");
    cr_assert_str_eq(cfg.auth.introspection_endpoint, "https://idp.example/i");
    cr_assert_str_eq(cfg.auth.introspection_credentials_file, "/c");
    cr_assert_str_eq(cfg.auth.tls_ca_file, "/ca.pem");
    config_clear(&cfg);
    auth_err(
        "mode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\njwks_uri = https://x/k",
        "t.ini:6: jwks_uri: and jwks_file exclude each other: set one");
    auth_err("mode = jwt\npublic_url = https://a\nissuer = i\njwks_uri = http://x/k",
             "t.ini:5: jwks_uri: must be an https:// URL");
    auth_err("mode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\n"
             "introspection_endpoint = https://x/i",
             "t.ini:6: introspection_credentials_file: is required with introspection_endpoint "
             "(RFC 7662: the gateway authenticates itself)");
    auth_err("mode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\n"
             "introspection_credentials_file = c",
             "t.ini:4: issuer: must be an https:// URL to discover its introspection endpoint from "
             "(or set introspection_endpoint)");
    auth_err("mode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\n"
             "jwks_cache_min_s = 100\njwks_cache_max_s = 99",
             "t.ini:6: jwks_cache_min_s: exceeds jwks_cache_max_s");
    auth_err("mode = jwt\npublic_url = https://a\njwks_file = k",
             "t.ini:2: issuer: is required with mode = jwt");
    auth_err("public_url = https://a/mcp",
             "t.ini:2: public_url: must be http(s)://HOST[:PORT], with no path or trailing slash");
    auth_err("public_url = https://a/",
             "t.ini:2: public_url: must be http(s)://HOST[:PORT], with no path or trailing slash");
    auth_err("public_url = ftp://a",
             "t.ini:2: public_url: must be http(s)://HOST[:PORT], with no path or trailing slash");
    auth_err("issuer = a\"b", "t.ini:2: issuer: must be visible ASCII without spaces, quotes or "
                              "backslashes");
    auth_err("authorization_servers = idp.example",
             "t.ini:2: authorization_servers: idp.example is not an http(s) URL");
    auth_err("clock_skew_s = 3601", "t.ini:2: clock_skew_s: must be 0..3600");
    auth_err("rate_limit_burst = 0", "t.ini:2: rate_limit_burst: must be 1..1000000");
    auth_err("nope = 1", "t.ini:2: nope: unknown key");
    load_err("[auth]\n[auth]\n" SERVER, "t.ini:2: [auth]: is duplicate");
    load_err("[server:a]\ncommand = x\nrequired_scopes = a\"b\n",
             "t.ini:3: required_scopes: a\"b is not a scope token");
}

Test(config, auth_none_needs_a_loopback_listener)
{
    const char *want = "t.ini:0: mode: none needs a loopback listen address (127.0.0.0/8, ::1, "
                       "localhost); set mode = bearer or jwt";
    gw_err("listen = 0.0.0.0:8080", want);
    gw_err("listen = [::]:8080", want);
    gw_err("listen = 10.0.0.1:8080", want);
    struct config cfg;
    gw_ok("listen = 127.0.0.2:8080", &cfg);
    config_clear(&cfg);
    gw_ok("listen = [::1]:8080", &cfg);
    config_clear(&cfg);
}

Test(config, numeric_bounds)
{
    gw_err("max_sessions = 0", "t.ini:2: max_sessions: must be 1..1000000");
    gw_err("max_sessions = 1000001", "t.ini:2: max_sessions: must be 1..1000000");
    gw_err("max_connections = 15", "t.ini:2: max_connections: must be 16..1000000");
    gw_err("session_idle_timeout_s = 604801", "t.ini:2: session_idle_timeout_s: must be 1..604800");
    gw_err("max_body_bytes = 1023", "t.ini:2: max_body_bytes: must be 1024..1073741824");
    gw_err("max_body_bytes = 1073741825", "t.ini:2: max_body_bytes: must be 1024..1073741824");
    gw_err("max_message_bytes = 65535", "t.ini:2: max_message_bytes: must be 65536..2147483648");
    gw_err("max_message_bytes = 2147483649",
           "t.ini:2: max_message_bytes: must be 65536..2147483648");
    gw_err("stream_queue_bytes = 1073741825",
           "t.ini:2: stream_queue_bytes: must be 65536..1073741824");
    gw_err("stdin_queue_bytes = 65535", "t.ini:2: stdin_queue_bytes: must be 65536..2147483648");
    gw_err("max_inflight_per_session = 0", "t.ini:2: max_inflight_per_session: must be 1..65536");
    gw_err("heartbeat_s = 0", "t.ini:2: heartbeat_s: must be 1..3600");
    gw_err("heartbeat_s = 3601", "t.ini:2: heartbeat_s: must be 1..3600");
    gw_err("connection_timeout_s = 86401", "t.ini:2: connection_timeout_s: must be 0..86400");
    gw_err("child_stdin_grace_ms = 600001", "t.ini:2: child_stdin_grace_ms: must be 0..600000");
    gw_err("child_term_grace_ms = 99999999999999999999999",
           "t.ini:2: child_term_grace_ms: must be 0..600000");
    gw_err("max_sessions = ten", "t.ini:2: max_sessions: is not a number");
    gw_err("max_sessions = -1", "t.ini:2: max_sessions: is not a number");
    gw_err("max_sessions = 10 sessions", "t.ini:2: max_sessions: is not a number");
    gw_err("max_sessions =", "t.ini:2: max_sessions: is not a number");
}

Test(config, stdin_queue_must_hold_a_body)
{
    gw_err("max_body_bytes = 1073741824",
           "t.ini:2: stdin_queue_bytes: must be at least max_body_bytes + 1024 = 1073742848");
    load_err("[gateway]\nstdin_queue_bytes = 65536\nmax_body_bytes = 65536\n" SERVER,
             "t.ini:2: stdin_queue_bytes: must be at least max_body_bytes + 1024 = 66560");
    struct config cfg;
    load_ok("[gateway]\nstdin_queue_bytes = 66560\nmax_body_bytes = 65536\n" SERVER, &cfg);
    config_clear(&cfg);
}

Test(config, admin_token)
{
    struct config cfg;
    gw_ok("admin_token = 0123456789abcdef0123456789abcdef", &cfg);
    cr_assert_str_eq(cfg.admin_token, "0123456789abcdef0123456789abcdef");
    config_clear(&cfg);
    load_ok(SERVER, &cfg);
    cr_assert_str_eq(cfg.admin_token, "");
    config_clear(&cfg);
    gw_err("admin_token = short", "t.ini:2: admin_token: must be empty or 32..256 characters");
    gw_err("admin_token = has space and more than thirty two characters",
           "t.ini:2: admin_token: must be 0..256 characters of [A-Za-z0-9_-]");
}

Test(config, request_timeouts)
{
    struct config cfg;
    load_ok(SERVER "request_timeout_ms = 1500\nrequest_timeout_max_ms = 60000\n", &cfg);
    cr_assert_eq(cfg.servers[0].request_timeout_ms, 1500);
    cr_assert_eq(cfg.servers[0].request_timeout_max_ms, 60000);
    config_clear(&cfg);
    load_ok(SERVER, &cfg);
    cr_assert_eq(cfg.servers[0].request_timeout_ms, 0);
    cr_assert_eq(cfg.servers[0].request_timeout_max_ms, 0);
    config_clear(&cfg);
    sv_err("request_timeout_ms = 86400001", "t.ini:3: request_timeout_ms: must be 0..86400000");
    load_err(SERVER "request_timeout_ms = 5000\nrequest_timeout_max_ms = 4000\n",
             "t.ini:4: request_timeout_max_ms: must be 0 or at least request_timeout_ms");
}

Test(config, tool_policy)
{
    struct config cfg;
    load_ok(SERVER "allowed_tools = read_*, search\ndenied_tools = *_admin\n"
                   "tool_scopes = write_*:files.write, delete_*:files.admin+audit\n"
                   "  , \\[x]:y\n",
            &cfg);
    const struct config_server *srv = &cfg.servers[0];
    expect_strv(srv->allowed_tools, (const char *[]){ "read_*", "search", NULL });
    expect_strv(srv->denied_tools, (const char *[]){ "*_admin", NULL });
    expect_strv(
        srv->tool_scopes,
        (const char *[]){ "write_*:files.write", "delete_*:files.admin+audit", "\\[x]:y", NULL });
    cr_assert_not_null(srv->policy);
    cr_assert(policy_per_token(srv->policy));
    const char *scope = NULL;
    cr_assert_eq(policy_judge(srv->policy, 0, "read_file", &scope), POLICY_VISIBLE);
    cr_assert_eq(policy_judge(srv->policy, 0, "read_admin", &scope), POLICY_DENIED);
    cr_assert_eq(policy_judge(srv->policy, 0, "echo", &scope), POLICY_NOT_ALLOWED);
    config_clear(&cfg);
    load_ok(SERVER "denied_tools = crash\n", &cfg);
    cr_assert_not_null(cfg.servers[0].policy);
    cr_assert_not(policy_per_token(cfg.servers[0].policy));
    config_clear(&cfg);
    load_ok(SERVER "allowed_tools =\n", &cfg);
    cr_assert_null(cfg.servers[0].policy, "empty lists: no policy");
    config_clear(&cfg);
    sv_err("allowed_tools = ok, bad[", "t.ini:3: allowed_tools: bad[ has a '[' without its ']'");
    sv_err("denied_tools = caf\xc3\xa9",
           "t.ini:3: denied_tools: caf\xc3\xa9 must be visible ASCII");
    sv_err("tool_scopes = write_*", "t.ini:3: tool_scopes: write_* must be GLOB:SCOPE[+SCOPE...]");
    sv_err("tool_scopes = w:a+",
           "t.ini:3: tool_scopes: w:a+ has an empty scope (GLOB:SCOPE[+SCOPE...])");
    sv_err("tool_scopes = w:a\"b",
           "t.ini:3: tool_scopes: w:a\"b has a scope that is not a scope token");
    sv_err("allowed_tools = read file", "t.ini:3: allowed_tools: entries must not contain spaces");
}

Test(config, listen)
{
    struct config cfg;
    gw_ok("listen = [::1]:9001", &cfg);
    cr_assert_str_eq(cfg.listen_host, "::1");
    cr_assert_eq(cfg.listen_port, 9001);
    config_clear(&cfg);
    gw_ok("listen = localhost:0", &cfg);
    cr_assert_str_eq(cfg.listen_host, "localhost");
    cr_assert_eq(cfg.listen_port, 0);
    config_clear(&cfg);
    load_ok("[gateway]\nlisten = [::]:65535\n[auth]\nmode = bearer\npublic_url = https://a\n"
            "tokens_file = t\n" SERVER,
            &cfg);
    cr_assert_str_eq(cfg.listen_host, "::");
    cr_assert_eq(cfg.listen_port, 65535);
    config_clear(&cfg);

    gw_err("listen = 127.0.0.1", "t.ini:2: listen: must be HOST:PORT, IPv6 as [ADDR]:PORT");
    gw_err("listen = [::1]", "t.ini:2: listen: must be HOST:PORT, IPv6 as [ADDR]:PORT");
    gw_err("listen = :8080", "t.ini:2: listen: host is empty");
    gw_err("listen = []:8080", "t.ini:2: listen: host is not a valid IPv6 address");
    gw_err("listen = [nope]:8080", "t.ini:2: listen: host is not a valid IPv6 address");
    gw_err("listen = ::1:8080", "t.ini:2: listen: an IPv6 host must be in brackets, as [::1]:PORT");
    gw_err("listen = a/b:8080", "t.ini:2: listen: host must be a name or an address");
    gw_err("listen = 127.0.0.1:65536", "t.ini:2: listen: port must be 0..65535");
    gw_err("listen = 127.0.0.1:http", "t.ini:2: listen: port must be 0..65535");
    gw_err("listen = 127.0.0.1:", "t.ini:2: listen: port must be 0..65535");
    gw_err("listen =", "t.ini:2: listen: must be HOST:PORT, IPv6 as [ADDR]:PORT");
}

Test(config, origin_and_host_lists)
{
    struct config cfg;
    load_ok("[gateway]\n"
            "allowed_origins =   https://a.example ,http://b:8080,\n"
            "   http://c:*   ; continuation with a comment\n"
            "allowed_hosts = a.example,,b\n" SERVER,
            &cfg);
    expect_strv(cfg.allowed_origins,
                (const char *[]){ "https://a.example", "http://b:8080", "http://c:*", NULL });
    expect_strv(cfg.allowed_hosts, (const char *[]){ "a.example", "b", NULL });
    config_clear(&cfg);
    gw_ok("allowed_origins =", &cfg);
    cr_assert_eq(strv_len(cfg.allowed_origins), 0);
    config_clear(&cfg);
    gw_err("allowed_hosts = a b", "t.ini:2: allowed_hosts: entries must not contain spaces");
}

Test(config, instance_id_and_log_keys)
{
    gw_err("instance_id = a.b", "t.ini:2: instance_id: must be 0..16 characters of [A-Za-z0-9_-]");
    gw_err("instance_id = 12345678901234567",
           "t.ini:2: instance_id: must be 0..16 characters of [A-Za-z0-9_-]");
    struct config cfg;
    gw_ok("instance_id = 1234567890123456", &cfg);
    cr_assert_str_eq(cfg.instance_id, "1234567890123456");
    config_clear(&cfg);
    gw_ok("log_level = warn", &cfg);
    cr_assert_eq(cfg.log_level, LOG_WARN);
    config_clear(&cfg);
    gw_err("log_level = verbose", "t.ini:2: log_level: must be error, warn, info or debug");
    gw_ok("log_format = journal", &cfg);
    cr_assert_eq(cfg.log_format, LOG_FORMAT_JOURNAL);
    config_clear(&cfg);
    gw_ok("log_format = text", &cfg);
    cr_assert_eq(cfg.log_format, LOG_FORMAT_TEXT);
    config_clear(&cfg);
    gw_err("log_format = xml", "t.ini:2: log_format: must be text, json or journal");
    gw_err("log_format = JSON", "t.ini:2: log_format: must be text, json or journal");
}

Test(config, access_log_keys)
{
    struct config cfg;
    gw_ok("log_level = info", &cfg);
    cr_assert_null(cfg.access_log);
    cr_assert_eq(cfg.access_log_format, LOG_FORMAT_TEXT);
    /* No proxy is trusted unless the operator names it: a local process names no other client. */
    cr_assert(cfg.trusted_proxies == NULL || cfg.trusted_proxies[0] == NULL);
    config_clear(&cfg);
    gw_ok("access_log = off\naccess_log_format = json\ntrusted_proxies = 10.0.0.0/8, fd00::/8",
          &cfg);
    cr_assert_str_eq(cfg.access_log, "off");
    cr_assert_eq(cfg.access_log_format, LOG_FORMAT_JSON);
    cr_assert_str_eq(cfg.trusted_proxies[1], "fd00::/8");
    config_clear(&cfg);
    gw_ok("trusted_proxies =", &cfg);
    cr_assert(cfg.trusted_proxies == NULL || cfg.trusted_proxies[0] == NULL);
    config_clear(&cfg);
    gw_err("trusted_proxies = 127.0.0.1, nginx",
           "t.ini:2: trusted_proxies: nginx is not an IP address or CIDR");
    gw_err("trusted_proxies = 10.0.0.0/33",
           "t.ini:2: trusted_proxies: 10.0.0.0/33 is not an IP address or CIDR");
    unsigned char a[16], net[16];
    unsigned bits, abits;
    cr_assert_eq(util_cidr_parse("10.1.2.3", a, &abits), 0);
    cr_assert_eq(util_cidr_parse("10.0.0.0/8", net, &bits), 0);
    cr_assert_eq(bits, 104);
    cr_assert(util_cidr_match(a, net, bits));
    cr_assert_eq(util_cidr_parse("11.0.0.0/8", net, &bits), 0);
    cr_assert(!util_cidr_match(a, net, bits));
    cr_assert_eq(util_cidr_parse("10.1.2.0/23", net, &bits), 0);
    cr_assert(util_cidr_match(a, net, bits));
}

Test(config, shell_splitting)
{
    struct config cfg;
    load_ok("[server:a]\n"
            "command = node  'my server.js' \"a \\\"b\\\" \\$x \\q\" back\\ slash '' \"\" "
            "x'y'\"z\" $HOME ~ * # end\\\n",
            &cfg);
    expect_strv(cfg.servers[0].argv,
                (const char *[]){ "node", "my server.js", "a \"b\" $x \\q", "back slash", "", "",
                                  "xyz", "$HOME", "~", "*", "#", "end\\", NULL });
    config_clear(&cfg);
    load_err("[server:a]\ncommand = node 'oops\n", "t.ini:2: command: unterminated quote");
    load_err("[server:a]\ncommand = node \"oops\\\"\n", "t.ini:2: command: unterminated quote");
    load_err("[server:a]\ncommand =\n", "t.ini:2: command: is empty");
    load_err("[server:a]\ncommand = ; only a comment\n", "t.ini:2: command: is empty");
    load_err("[server:a]\npath = /x\n", "t.ini:1: command: is required");
}

Test(config, env_and_inherit_env)
{
    struct config cfg;
    load_ok(SERVER "env = A=1 _B='two words' C= D=x=y\n"
                   "inherit_env = PATH  TERM_2\n"
                   "cwd = /srv/my dir\n",
            &cfg);
    const struct config_server *s = &cfg.servers[0];
    expect_strv(s->env, (const char *[]){ "A=1", "_B=two words", "C=", "D=x=y", NULL });
    expect_strv(s->inherit_env, (const char *[]){ "PATH", "TERM_2", NULL });
    cr_assert_str_eq(s->cwd, "/srv/my dir");
    config_clear(&cfg);
    load_ok(SERVER "inherit_env =\ncwd =\n", &cfg);
    cr_assert_eq(strv_len(cfg.servers[0].inherit_env), 0);
    cr_assert_null(cfg.servers[0].cwd);
    config_clear(&cfg);
    const char *env_err =
        "t.ini:3: env: each word must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*";
    sv_err("env = NOVALUE", env_err);
    sv_err("env = 1A=x", env_err);
    sv_err("env = =x", env_err);
    sv_err("env = A-B=x", env_err);
    sv_err("env = A='x", "t.ini:3: env: unterminated quote");
    sv_err("inherit_env = PATH A=1",
           "t.ini:3: inherit_env: each word must be a variable name of [A-Za-z_][A-Za-z0-9_]*");
}

Test(config, duplicates)
{
    gw_err("listen = 127.0.0.1:1\nlisten = 127.0.0.1:2", "t.ini:3: listen: is duplicate");
    gw_err("listen = 127.0.0.1:1\n  127.0.0.1:2", "t.ini:3: listen: is duplicate");
    sv_err("command = /bin/true", "t.ini:3: command: is duplicate");
    sv_err("env = A=1\nenv = B=2", "t.ini:4: env: is duplicate");
    load_err(SERVER "[gateway]\n[gateway]\n", "t.ini:4: [gateway]: is duplicate");
    load_err(SERVER "[server:b]\ncommand = x\n[server:a]\n", "t.ini:5: [server:a]: is duplicate");
    load_err(SERVER "[server:b]\npath = /mcp\ncommand = x\n",
             "t.ini:4: path: is already used by [server:a]");
}

Test(config, unknown_keys_and_sections)
{
    gw_err("max_session = 1", "t.ini:2: max_session: unknown key");
    gw_err("command = x", "t.ini:2: command: unknown key");
    sv_err("listen = 127.0.0.1:1", "t.ini:3: listen: unknown key");
    load_err("[gateway]\n[servers:a]\ncommand = x\n", "t.ini:2: [servers:a]: unknown section");
    load_err("[Gateway]\n", "t.ini:1: [Gateway]: unknown section");
    load_err("[ gateway ]\n", "t.ini:1: [ gateway ]: unknown section");
    load_err("listen = 127.0.0.1:1\n" SERVER, "t.ini:1: listen: is outside any section");
    load_err(SERVER "just words\n", "t.ini:3: -: expected KEY = VALUE, [SECTION] or a comment");
    load_err(SERVER "[gateway\n", "t.ini:3: -: section header has no closing ']'");
    load_err(SERVER "  [server:b]\n  command = y\n",
             "t.ini:3: -: section header must not be indented");
    struct config cfg;
    load_ok("[gateway]\nallowed_hosts = localhost,\n  [::1]\n" SERVER, &cfg);
    expect_strv(cfg.allowed_hosts, (const char *[]){ "localhost", "[::1]", NULL });
    config_clear(&cfg);
    load_err("[server:]\n", "t.ini:1: [server:]: server name must be 1..64 characters of "
                            "[A-Za-z0-9_.-]");
    load_err("[server:a b]\n", "t.ini:1: [server:a b]: server name must be 1..64 characters of "
                               "[A-Za-z0-9_.-]");
    char text[512], want[512];
    char name[66];
    memset(name, 'n', 65);
    name[65] = '\0';
    snprintf(text, sizeof text, "[server:%s]\ncommand = x\n", name);
    snprintf(want, sizeof want,
             "t.ini:1: [server:%s]: server name must be 1..64 characters of [A-Za-z0-9_.-]", name);
    load_err(text, want);
}

Test(config, long_server_name_is_not_truncated)
{
    /* inih keeps only 49 bytes of a section name; names up to 64 must survive whole. */
    char a[65], b[65], text[512];
    memset(a, 'x', 64);
    a[64] = '\0';
    memcpy(b, a, sizeof b);
    b[63] = 'y';
    snprintf(text, sizeof text,
             "[server:%s]\ncommand = one\n[server:%s]\npath = /b\ncommand = two\n", a, b);
    struct config cfg;
    load_ok(text, &cfg);
    cr_assert_eq(cfg.n_servers, 2);
    cr_assert_str_eq(cfg.servers[0].name, a);
    cr_assert_str_eq(cfg.servers[1].name, b);
    cr_assert_str_eq(cfg.servers[1].argv[0], "two");
    config_clear(&cfg);
}

Test(config, long_lines)
{
    char text[1024], want[512];
    char value[256];
    /* "command = " is 10 bytes: 188 more make a 198-byte line, the longest allowed. */
    memset(value, 'v', 188);
    value[188] = '\0';
    snprintf(text, sizeof text, "[server:a]\ncommand = %s\n", value);
    struct config cfg;
    load_ok(text, &cfg);
    cr_assert_eq(strlen(cfg.servers[0].argv[0]), 188);
    config_clear(&cfg);
    snprintf(text, sizeof text, "[server:a]\ncommand = %s\r\n", value); /* CRLF still fits */
    load_ok(text, &cfg);
    cr_assert_eq(strlen(cfg.servers[0].argv[0]), 188);
    config_clear(&cfg);

    const char *why = "line too long (max 198 bytes); split a long value over indented "
                      "continuation lines";
    snprintf(text, sizeof text, "[server:a]\npath = /x\ncommand = %sv\n", value);
    snprintf(want, sizeof want, "t.ini:3: command: %s", why);
    load_err(text, want);
    memset(value, 'v', 240);
    value[240] = '\0';
    snprintf(text, sizeof text, "[server:a]\n  ; %s\ncommand = x\n", value);
    snprintf(want, sizeof want, "t.ini:2: -: %s", why);
    load_err(text, want);
    snprintf(text, sizeof text, "[server:a]\ncommand = x\n\n  %s\n", value);
    snprintf(want, sizeof want, "t.ini:4: command: %s", why);
    load_err(text, want);
    snprintf(text, sizeof text, "[server:a]\ncommand = x\nenv =   %s=1\n", value);
    snprintf(want, sizeof want, "t.ini:3: env: %s", why);
    load_err(text, want);
}

Test(config, continuation_lines_build_a_long_command)
{
    char text[2048];
    char arg[6][101];
    int n = snprintf(text, sizeof text, "[server:a]\ncommand = /usr/bin/env\n");
    for (int i = 0; i < 6; i++) {
        memset(arg[i], 'a' + i, 100);
        arg[i][100] = '\0';
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%s\n", i % 2 ? "\t" : "    ", arg[i]);
        if (i == 2)
            n += snprintf(text + n, sizeof text - (size_t)n, "  ; a comment between\n\n");
    }
    snprintf(text + n, sizeof text - (size_t)n, "env = A=1\n  'B=two words'\n");
    struct config cfg;
    load_ok(text, &cfg);
    char **argv = cfg.servers[0].argv;
    cr_assert_eq(strv_len(argv), 7);
    cr_assert_str_eq(argv[0], "/usr/bin/env");
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(argv[i + 1], arg[i]);
    expect_strv(cfg.servers[0].env, (const char *[]){ "A=1", "B=two words", NULL });
    config_clear(&cfg);
}

Test(config, several_servers)
{
    struct config cfg;
    load_ok("[gateway]\npath = /first\n"
            "[server:one]\ncommand = one\n"
            "[server:two.b]\npath = /two\ncommand = two --flag\ncwd = /tmp\n",
            &cfg);
    cr_assert_eq(cfg.n_servers, 2);
    cr_assert_str_eq(cfg.servers[0].name, "one");
    cr_assert_str_eq(cfg.servers[0].path, "/first");
    cr_assert_eq(cfg.servers[0].line, 3);
    cr_assert_str_eq(cfg.servers[1].name, "two.b");
    cr_assert_str_eq(cfg.servers[1].path, "/two");
    cr_assert_eq(cfg.servers[1].line, 5);
    expect_strv(cfg.servers[1].argv, (const char *[]){ "two", "--flag", NULL });
    cr_assert_str_eq(cfg.servers[1].cwd, "/tmp");
    config_clear(&cfg);

    load_err(SERVER "[server:b]\ncommand = x\n",
             "t.ini:3: path: is required (only the first server defaults to [gateway] path)");
    load_err("[server:a]\npath = /healthz\ncommand = x\n",
             "t.ini:2: path: /healthz is reserved for the health check");
    load_err("[server:a]\npath = mcp\ncommand = x\n", "t.ini:2: path: must start with '/'");
    load_err("[server:a]\npath = /a b\ncommand = x\n",
             "t.ini:2: path: must not contain spaces, '?' or '#'");
    load_err("[gateway]\npath = /x?y\n" SERVER,
             "t.ini:2: path: must not contain spaces, '?' or '#'");
    load_err("[server:a]\npath = /x\ncommand = x\n[server:b]\npath = /x\ncommand = y\n",
             "t.ini:5: path: is already used by [server:a]");
}

Test(config, missing_server)
{
    load_err("", "t.ini:0: server: no [server:NAME] section");
    load_err("[gateway]\nlisten = 127.0.0.1:1\n", "t.ini:0: server: no [server:NAME] section");
}

Test(config, files_and_line_endings)
{
    struct config cfg;
    load_ok("\xEF\xBB\xBF[server:a]\r\ncommand = /bin/cat\r\n", &cfg);
    cr_assert_str_eq(cfg.servers[0].argv[0], "/bin/cat");
    config_clear(&cfg);
    load_ok("[server:a]\ncommand = /bin/cat", &cfg); /* no final newline */
    config_clear(&cfg);

    char err[512];
    memset(&cfg, 0x5a, sizeof cfg);
    cr_assert_eq(config_load("/nonexistent/gw.ini", &cfg, err, sizeof err), -1);
    cr_assert_str_eq(err, "/nonexistent/gw.ini:0: -: cannot open: No such file or directory");
    expect_zeroed(&cfg);

    char path[] = "/tmp/test_config_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_neq(fd, -1);
    FILE *f = fdopen(fd, "w");
    fwrite("[server:a]\ncommand = a\0b\n", 1, 25, f);
    fclose(f);
    cr_assert_eq(config_load(path, &cfg, err, sizeof err), -1);
    unlink(path);
    char want[512];
    snprintf(want, sizeof want, "%s:2: -: contains a NUL byte", path);
    cr_assert_str_eq(err, want);

    /* A short error buffer is truncated, never overrun; no buffer at all is fine too. */
    char small[8];
    cr_assert_eq(config_load_string("", "t.ini", &cfg, small, sizeof small), -1);
    cr_assert_str_eq(small, "t.ini:0");
    cr_assert_eq(config_load_string("", "t.ini", &cfg, NULL, 0), -1);
}

/* A temporary file holding text with mode; its path in path (sizeof "/tmp/test_config_XXXXXX"). */
static void
temp_file(char *path, const char *text, mode_t mode)
{
    strcpy(path, "/tmp/test_config_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_neq(fd, -1);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    cr_assert_eq(fchmod(fd, mode), 0);
    close(fd);
}

Test(config, file_modes)
{
    char path[32], want[512], err[512];
    struct config cfg;
    /* The configuration itself: writable by its group is refused like by others. */
    temp_file(path, SERVER, 0620);
    cr_assert_eq(config_load(path, &cfg, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:0: -: %s is writable by its group: chmod go-w %s", path, path,
             path);
    cr_assert_str_eq(err, want);
    expect_zeroed(&cfg);
    cr_assert_eq(chmod(path, 0602), 0);
    cr_assert_eq(config_load(path, &cfg, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:0: -: %s is writable by others: chmod go-w %s", path, path,
             path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_eq(config_load(path, &cfg, err, sizeof err), 0, "%s", err);
    config_clear(&cfg);
    unlink(path);
}

Test(config, admin_token_file)
{
    static const char tok[] = "0123456789abcdef0123456789abcdef";
    char path[32], text[512], want[512], err[512];
    struct config cfg;
    temp_file(path, "0123456789abcdef0123456789abcdef\r\nignored\n", 0640);
    snprintf(text, sizeof text, "[gateway]\nadmin_token_file = %s\n" SERVER, path);
    load_ok(text, &cfg);
    cr_assert_str_eq(cfg.admin_token, tok);
    cr_assert_str_eq(cfg.admin_token_file, path);
    config_clear(&cfg);
    /* Not with admin_token. */
    snprintf(text, sizeof text, "[gateway]\nadmin_token = %s\nadmin_token_file = %s\n" SERVER, tok,
             path);
    load_err(text, "t.ini:3: admin_token_file: and admin_token exclude each other: set one");
    /* A secret: readable by others is refused, with the fix. */
    cr_assert_eq(chmod(path, 0644), 0);
    snprintf(text, sizeof text, "[gateway]\nadmin_token_file = %s\n" SERVER, path);
    snprintf(
        want, sizeof want,
        "t.ini:2: admin_token_file: %s holds a secret and is readable by others: chmod 0640 %s",
        path, path);
    load_err(text, want);
    unlink(path);
    /* The first line must be a valid token. */
    temp_file(path, "short\n", 0600);
    snprintf(text, sizeof text, "[gateway]\nadmin_token_file = %s\n" SERVER, path);
    snprintf(want, sizeof want,
             "t.ini:2: admin_token_file: %s: the first line must be 32..256 characters of "
             "[A-Za-z0-9_-]",
             path);
    load_err(text, want);
    unlink(path);
    snprintf(want, sizeof want, "t.ini:2: admin_token_file: %s: No such file or directory", path);
    load_err(text, want);
    (void)err;
}

Test(config, env_file)
{
    char path[32], text[512], want[512];
    struct config cfg;
    temp_file(path, "# secrets\n\nAPI_KEY=s3cret value # kept\n  TOKEN=a=b\r\nEMPTY=\n", 0600);
    snprintf(text, sizeof text, SERVER "env = A=1\nenv_file = %s\n", path);
    load_ok(text, &cfg);
    const char *const want_env[] = { "A=1", "API_KEY=s3cret value # kept", "TOKEN=a=b", "EMPTY=" };
    char **env = cfg.servers[0].env;
    cr_assert_eq(strv_len(env), 4);
    for (size_t i = 0; i < 4; i++)
        cr_assert_str_eq(env[i], want_env[i]);
    config_clear(&cfg);
    /* Without env lines too. */
    snprintf(text, sizeof text, SERVER "env_file = %s\n", path);
    load_ok(text, &cfg);
    cr_assert_eq(strv_len(cfg.servers[0].env), 3);
    config_clear(&cfg);
    /* A name in env and the file is an error, not an override; the value is never printed. */
    snprintf(text, sizeof text, SERVER "env = TOKEN=x\nenv_file = %s\n", path);
    snprintf(want, sizeof want, "t.ini:4: env_file: %s:4: TOKEN is already set (env or env_file)",
             path);
    load_err(text, want);
    /* Readable by others, or writable by the group: refused. */
    snprintf(text, sizeof text, SERVER "env_file = %s\n", path);
    cr_assert_eq(chmod(path, 0604), 0);
    snprintf(want, sizeof want,
             "t.ini:3: env_file: %s holds a secret and is readable by others: chmod 0640 %s", path,
             path);
    load_err(text, want);
    cr_assert_eq(chmod(path, 0660), 0);
    snprintf(want, sizeof want, "t.ini:3: env_file: %s is writable by its group: chmod go-w %s",
             path, path);
    load_err(text, want);
    unlink(path);
    /* A line that is not NAME=VALUE. */
    temp_file(path, "A=1\nnot a pair\n", 0600);
    snprintf(text, sizeof text, SERVER "env_file = %s\n", path);
    snprintf(want, sizeof want,
             "t.ini:3: env_file: %s:2: must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*", path);
    load_err(text, want);
    unlink(path);
}

Test(config, check_command)
{
    struct config cfg;
    char err[1024];
    load_ok("[server:a]\ncommand = sh -c true\n[server:b]\npath = /b\ncommand = /bin/cat\n"
            "cwd = /\n[server:c]\npath = /c\ncommand = /nonexistent/x --flag\n"
            "[server:d]\npath = /d\ncommand = /bin/cat\ncwd = /nonexistent-dir\n"
            "[server:e]\npath = /e\ncommand = /etc/passwd\n[server:f]\npath = /f\n"
            "command = no-such-command-here\n[server:g]\npath = /g\ncommand = /bin/cat\n"
            "cwd = /etc/passwd\n",
            &cfg);
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[0], err, sizeof err), 0, "%s", err);
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[1], err, sizeof err), 0, "%s", err);
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[2], err, sizeof err), -1);
    cr_assert_str_eq(err, "t.ini:9: command: [server:c] /nonexistent/x: No such file or directory");
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[3], err, sizeof err), -1);
    cr_assert_str_eq(err, "t.ini:13: cwd: [server:d] /nonexistent-dir: No such file or directory");
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[4], err, sizeof err), -1);
    cr_assert_str_eq(err, "t.ini:16: command: [server:e] /etc/passwd: is not executable "
                          "(Permission denied)");
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[5], err, sizeof err), -1);
    cr_assert(
        strncmp(err, "t.ini:19: command: [server:f] no-such-command-here: not found in PATH", 69)
            == 0,
        "%s", err);
    cr_assert_eq(config_check_command(&cfg, &cfg.servers[6], err, sizeof err), -1);
    cr_assert_str_eq(err, "t.ini:23: cwd: [server:g] /etc/passwd: is not a directory");
    config_clear(&cfg);
}

Test(config, keys_list_the_table)
{
    const char *const *keys = config_keys();
    cr_assert_not_null(keys);
    size_t n = 0, gw = 0, au = 0, sv = 0;
    for (; keys[n]; n++) {
        if (strncmp(keys[n], "gateway.", 8) == 0)
            gw++;
        else if (strncmp(keys[n], "auth.", 5) == 0)
            au++;
        else if (strncmp(keys[n], "server.", 7) == 0)
            sv++;
        else
            cr_assert_fail("key %s has no section prefix", keys[n]);
    }
    cr_assert_eq(n, gw + au + sv);
    cr_assert(gw > 0 && au > 0 && sv > 0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            cr_assert_str_neq(keys[i], keys[j], "%s twice", keys[i]);
    /* As many keys as options.md describes (no count kept by hand: each key is one heading). */
    char *md = slurp(MCPGW_SOURCE_ROOT "/src/config/options.md");
    cr_assert_not_null(md);
    size_t headings = 0;
    for (const char *p = strstr(md, "\n## "); p != NULL; p = strstr(p + 1, "\n### "))
        headings += strncmp(p, "\n### ", 5) == 0;
    free(md);
    cr_assert_eq(n, headings, "%zu keys, %zu ### headings in options.md", n, headings);
    cr_assert_eq(config_keys(), keys);
}

#define OPTIONS_MD MCPGW_SOURCE_ROOT "/src/config/options.md"

/* Writes text to a new temporary file; its path, which the caller unlinks and frees. */
static char *
write_temp(const char *text)
{
    char *path = strdup("/tmp/mcpgw-options-XXXXXX");
    cr_assert_not_null(path);
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fputs(text, f) >= 0, true);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* text with the first occurrence of from replaced by to (a new string). */
static char *
replace_once(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    cr_assert_not_null(at, "\"%s\" is not in the text", from);
    size_t head = (size_t)(at - text), flen = strlen(from), tlen = strlen(to);
    char *out = malloc(strlen(text) - flen + tlen + 1);
    cr_assert_not_null(out);
    memcpy(out, text, head);
    memcpy(out + head, to, tlen);
    strcpy(out + head + tlen, at + flen);
    return out;
}

/* config_man's answer for what on options.md text (and target, for readme and conf): its return
 * value, the reason in err. */
static int
man_of(const char *what, const char *options_md_text, const char *target, char *err, size_t errlen)
{
    char *md = write_temp(options_md_text);
    FILE *out = fopen("/dev/null", "w");
    cr_assert_not_null(out);
    err[0] = '\0';
    int rc = config_man(out, what, md, target, "test", "usage: test\n", err, errlen);
    fclose(out);
    unlink(md);
    free(md);
    return rc;
}

/* The man page is written from options.md and the table: each key of the table has its text. */
Test(config, docs_options_md_has_every_key_once)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md, "cannot read %s", OPTIONS_MD);
    char err[512];
    cr_assert_eq(man_of("5", md, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(man_of("readme", md, MCPGW_SOURCE_ROOT "/README.md", err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(man_of("conf", md, MCPGW_SOURCE_ROOT "/conf/gateway.ini", err, sizeof err), 0,
                 "%s", err);
    for (const char *const *k = config_keys(); *k; k++) {
        char heading[128];
        snprintf(heading, sizeof heading, "\n### %s\n", strchr(*k, '.') + 1);
        cr_expect(strstr(md, heading) != NULL, "options.md lacks ### %s", strchr(*k, '.') + 1);
    }
    free(md);
}

/* A key of the table that options.md does not describe stops the build, naming it. */
Test(config, docs_options_md_lacking_a_key_fails)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md);
    char *bad = replace_once(md, "\n### max_sessions\n", "\n");
    char err[512];
    cr_assert_eq(man_of("5", bad, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "gateway.max_sessions has no ### max_sessions under ## [gateway]")
                  != NULL,
              "%s", err);
    free(bad);
    free(md);
}

/* A key the table lacks (or one in the wrong section) stops it too. */
Test(config, docs_options_md_unknown_key_fails)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md);
    char *bad =
        replace_once(md, "\n### path\n", "\n### no_such_key\n\nWhat it does.\n\n### path\n");
    char err[512];
    cr_assert_eq(man_of("5", bad, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "### no_such_key: the option table (config_table.c) has no such key in "
                          "[gateway]")
                  != NULL,
              "%s", err);
    free(bad);
    char *moved =
        replace_once(md, "\n### path\n", "\n### pool_max_children\n\nHere.\n\n### path\n");
    cr_assert_eq(man_of("5", moved, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "### pool_max_children: the option table") != NULL, "%s", err);
    free(moved);
    free(md);
}

/* A key twice stops it, with both lines. */
Test(config, docs_options_md_key_twice_fails)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md);
    char *bad = replace_once(md, "\n### path\n", "\n### listen\n\nAgain.\n\n### path\n");
    char err[512];
    cr_assert_eq(man_of("5", bad, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "### listen twice in [gateway] (first at line") != NULL, "%s", err);
    free(bad);
    free(md);
}

/* A key with no summary (its first paragraph a block of code, or nothing) stops it. */
Test(config, docs_options_md_key_without_summary_fails)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md);
    char *bad = replace_once(md, "\n### path\n", "\n### path\n\n```\npath = /x\n```\n");
    char err[512];
    cr_assert_eq(man_of("5", bad, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "### path: its first paragraph, the summary, is missing") != NULL, "%s",
              err);
    free(bad);
    free(md);
}

/* conf/gateway.ini must have a line for each key: the comment above it is written there. */
Test(config, docs_conf_lacking_a_key_fails)
{
    char *md = slurp(OPTIONS_MD);
    char *ini = slurp(MCPGW_SOURCE_ROOT "/conf/gateway.ini");
    cr_assert_not_null(md);
    cr_assert_not_null(ini);
    char *bad = replace_once(ini, "\nheartbeat_s = 15\n", "\n");
    char *conf = write_temp(bad);
    char err[512];
    cr_assert_eq(man_of("conf", md, conf, err, sizeof err), -1);
    cr_assert(strstr(err, "no line \"heartbeat_s =\" or \"; heartbeat_s =\" under [gateway]")
                  != NULL,
              "%s", err);
    unlink(conf);
    free(conf);
    free(bad);
    char *unknown =
        replace_once(ini, "\nheartbeat_s = 15\n", "\nheartbeat_s = 15\n; heartbeat_ms = 1\n");
    conf = write_temp(unknown);
    cr_assert_eq(man_of("conf", md, conf, err, sizeof err), -1);
    cr_assert(strstr(err, "heartbeat_ms is not a key of [gateway]") != NULL, "%s", err);
    unlink(conf);
    free(conf);
    free(unknown);
    free(ini);
    free(md);
}

/* README.md's tables are written between their two markers; without them nothing is. */
Test(config, docs_readme_without_markers_fails)
{
    char *md = slurp(OPTIONS_MD);
    cr_assert_not_null(md);
    char *readme = write_temp("# x\n\nno markers\n");
    char err[512];
    cr_assert_eq(man_of("readme", md, readme, err, sizeof err), -1);
    cr_assert(strstr(err, "no line \"<!-- The tables below") != NULL, "%s", err);
    unlink(readme);
    free(readme);
    free(md);
}

Test(config, shipped_config_loads_with_defaults)
{
    struct config cfg;
    char err[512] = "";
    int rc = config_load(MCPGW_SOURCE_ROOT "/conf/gateway.ini", &cfg, err, sizeof err);
    cr_assert_eq(rc, 0, "conf/gateway.ini: %s", err);
    expect_defaults(&cfg);
    cr_assert_eq(cfg.n_servers, 1);
    cr_assert_str_eq(cfg.servers[0].name, "example");
    cr_assert_str_eq(cfg.servers[0].path, "/mcp");
    expect_strv(cfg.servers[0].argv,
                (const char *[]){ "build/tests/fixtures/mcp-example-server", NULL });
    /* The example server is boxed: the one key the shipped file sets off its default. */
    cr_assert(cfg.servers[0].sandbox);
    cr_assert_not_null(cfg.servers[0].box);
    config_clear(&cfg);
}

/* Each tests/conf/bad file starts with "; expect: SUFFIX"; good.ini loads. */
Test(config, test_configs)
{
    static const char *const bad[] = { "bad_port.ini", "unknown_key.ini", "long_line.ini",
                                       "no_server.ini", "dup_server.ini" };
    char path[1024], err[512];
    struct config cfg;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/tests/conf/%s", MCPGW_SOURCE_ROOT, bad[i]);
        char *text = slurp(path);
        cr_assert_not_null(text, "cannot read %s", path);
        cr_assert(strncmp(text, "; expect: ", 10) == 0, "%s: no expect line", bad[i]);
        char *want = text + 10;
        want[strcspn(want, "\n")] = '\0';
        cr_assert_eq(config_load(path, &cfg, err, sizeof err), -1, "%s loaded", bad[i]);
        size_t el = strlen(err), wl = strlen(want);
        cr_expect(el >= wl && strcmp(err + el - wl, want) == 0, "%s: got \"%s\", want \"...%s\"",
                  bad[i], err, want);
        free(text);
    }
    snprintf(path, sizeof path, "%s/tests/conf/good.ini", MCPGW_SOURCE_ROOT);
    cr_assert_eq(config_load(path, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cfg.n_servers, 2);
    expect_strv(cfg.allowed_origins,
                (const char *[]){ "http://localhost:*", "https://app.example.com", NULL });
    expect_strv(cfg.servers[1].argv,
                (const char *[]){ "/usr/bin/env", "MESSAGE=hello world", "/bin/cat", NULL });
    config_clear(&cfg);
}

/* A reload keeps what serves an unchanged server: every key of the section, after defaults. */
Test(config, server_same_compares_every_key_of_the_section)
{
    static const char base[] = "[server:a]\ncommand = /bin/cat -u\nallowed_tools = x*\n"
                               "[server:b]\npath = /b\ncommand = /bin/cat\n";
    struct config a, b;
    load_ok(base, &a);
    load_ok(base, &b);
    cr_assert(config_server_same(&a.servers[0], &b.servers[0]));
    cr_assert(config_server_same(&a.servers[1], &b.servers[1]));
    cr_assert_not(config_server_same(&a.servers[0], &b.servers[1]), "another name");
    config_clear(&b);
    /* The same values written otherwise (defaults spelled out, spaces between words): the same. */
    load_ok("[server:a]\ncommand = /bin/cat   -u\nallowed_tools = x*\nrequest_timeout_ms = 0\n"
            "[server:b]\npath = /b\ncommand = /bin/cat\ncache_scope = private\n",
            &b);
    cr_assert(config_server_same(&a.servers[0], &b.servers[0]));
    cr_assert(config_server_same(&a.servers[1], &b.servers[1]));
    config_clear(&b);
    /* One key differs: the first two lines replace the base's, the third is added. */
    static const char *const changed[][3] = {
        { "/bin/cat", "x*", "" },
        { "/bin/cat -u -v", "x*", "" },
        { "/bin/cat -u", "y*", "" },
        { "/bin/cat -u", "x*, y*", "" },
        { "/bin/cat -u", "x*", "env = A=1\n" },
        { "/bin/cat -u", "x*", "inherit_env = PATH\n" },
        { "/bin/cat -u", "x*", "cwd = /\n" },
        { "/bin/cat -u", "x*", "era = legacy\n" },
        { "/bin/cat -u", "x*", "pool_max_children = 3\n" },
        { "/bin/cat -u", "x*", "max_listens_per_principal = 1\n" },
        { "/bin/cat -u", "x*", "cache_scope = public\n" },
        { "/bin/cat -u", "x*", "path = /other\n" },
    };
    for (size_t i = 0; i < sizeof changed / sizeof *changed; i++) {
        char text[512];
        snprintf(text, sizeof text, "[server:a]\ncommand = %s\nallowed_tools = %s\n%s",
                 changed[i][0], changed[i][1], changed[i][2]);
        struct config c;
        load_ok(text, &c);
        cr_assert_not(config_server_same(&a.servers[0], &c.servers[0]), "%s", text);
        config_clear(&c);
    }
    config_clear(&a);
}

/* env_file's lines are in env: a file that changed between two loads is a changed server. */
Test(config, server_same_sees_a_changed_env_file)
{
    char path[32], text[256];
    struct config a, b;
    temp_file(path, "TOKEN=one\n", 0600);
    snprintf(text, sizeof text, SERVER "env_file = %s\n", path);
    load_ok(text, &a);
    load_ok(text, &b);
    cr_assert(config_server_same(&a.servers[0], &b.servers[0]));
    config_clear(&b);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("TOKEN=two\n", f);
    cr_assert_eq(fclose(f), 0);
    load_ok(text, &b);
    cr_assert_not(config_server_same(&a.servers[0], &b.servers[0]));
    config_clear(&a);
    config_clear(&b);
    unlink(path);
}

/*
 * era is auto, stateless or legacy. The era's spelling before its rename still loads, for one
 * release, as stateless (deprecated): one note per use, naming the file, the line and the new
 * spelling, for the gateway to warn with; a failed load frees the notes it had made.
 */
Test(config, era_values_and_the_deprecated_spelling)
{
    static const char deprecated[] = "modern"; /* the era's deprecated spelling */
    static const char *const names[] = { "auto", "stateless", "legacy" };
    static const enum config_era eras[] = { CONFIG_ERA_AUTO, CONFIG_ERA_STATELESS,
                                            CONFIG_ERA_LEGACY };
    char text[512];
    for (size_t i = 0; i < 3; i++) {
        struct config cfg;
        snprintf(text, sizeof text, SERVER "era = %s\n", names[i]);
        load_ok(text, &cfg);
        cr_expect_eq(cfg.servers[0].era, eras[i], "era = %s", names[i]);
        cr_expect_null(cfg.deprecated, "era = %s is no deprecated spelling", names[i]);
        config_clear(&cfg);
    }
    sv_err("era = stateful", "t.ini:3: era: must be auto, stateless or legacy");

    struct config cfg;
    snprintf(text, sizeof text,
             SERVER "era = %s\n[server:b]\npath = /b\ncommand = /bin/cat\nera = %s\n", deprecated,
             deprecated);
    load_ok(text, &cfg);
    cr_expect_eq(cfg.servers[0].era, CONFIG_ERA_STATELESS);
    cr_expect_eq(cfg.servers[1].era, CONFIG_ERA_STATELESS);
    cr_assert_not_null(cfg.deprecated);
    char want[256];
    const int lines[] = { 3, 7 };
    for (size_t i = 0; i < 2; i++) {
        snprintf(want, sizeof want,
                 "t.ini:%d: era = %s is deprecated and will be refused by the next release: write "
                 "era = stateless",
                 lines[i], deprecated);
        cr_assert_not_null(cfg.deprecated[i]);
        cr_expect_str_eq(cfg.deprecated[i], want);
    }
    cr_expect_null(cfg.deprecated[2], "one note per use");
    config_clear(&cfg);

    /* The deprecated spelling, then an error in the same server: nothing is kept, nothing leaks. */
    snprintf(text, sizeof text, SERVER "era = %s\npool_max_children = 0\n", deprecated);
    load_err(text, "t.ini:4: pool_max_children: must be 1..1024");
}

#define JWT_AUTH "[auth]\nmode = jwt\npublic_url = https://a\nissuer = i\njwks_file = k\n"

Test(config, env_from_claims)
{
    struct config cfg;
    load_ok(JWT_AUTH SERVER "env_from_claims = GH=gh_token, ORG=org.login|none, E=a.b.c|, "
                            "U=https://x.example/claims/t\n",
            &cfg);
    const struct config_server *s = &cfg.servers[0];
    cr_assert_eq(s->n_claim_env, 4);
    cr_assert_str_eq(s->claim_env[0].var, "GH");
    cr_assert_str_eq(s->claim_env[0].claim, "gh_token");
    cr_assert_null(s->claim_env[0].def);
    cr_assert_str_eq(s->claim_env[1].claim, "org.login");
    cr_assert_str_eq(s->claim_env[1].def, "none");
    cr_assert_str_eq(s->claim_env[2].def, "");
    cr_assert_str_eq(s->claim_env[3].claim, "https://x.example/claims/t");
    cr_assert(config_server_per_principal(s));
    config_clear(&cfg);
    /* Off by default: nothing per principal. */
    load_ok(SERVER, &cfg);
    cr_assert_not(config_server_per_principal(&cfg.servers[0]));
    cr_assert_eq(cfg.servers[0].n_claim_env, 0);
    cr_assert_null(cfg.servers[0].credentials_dir);
    cr_assert_not(cfg.servers[0].credentials_server_env);
    config_clear(&cfg);
    const char *const bad[][2] = {
        { "T", "entry 1 (T) must be VAR=claim or VAR=claim|default (VAR of [A-Za-z_][A-Za-z0-9_]*, "
               "claim a name or a dotted path)" },
        { "1T=x", "entry 1 (1T) must be VAR=claim or VAR=claim|default (VAR of "
                  "[A-Za-z_][A-Za-z0-9_]*, claim a name or a dotted path)" },
        { "T=",
          "entry 1 (T) must be VAR=claim or VAR=claim|default (VAR of [A-Za-z_][A-Za-z0-9_]*, "
          "claim a name or a dotted path)" },
        { "T=.a", "entry 1 (T) must be VAR=claim or VAR=claim|default (VAR of "
                  "[A-Za-z_][A-Za-z0-9_]*, claim a name or a dotted path)" },
        { "A=x, T=a..b", "entry 2 (T) must be VAR=claim or VAR=claim|default (VAR of "
                         "[A-Za-z_][A-Za-z0-9_]*, claim a name or a dotted path)" },
        { "MCPGW_POOL=x",
          "entry 1 (MCPGW_POOL) names a variable the gateway sets itself (MCPGW_*)" },
        { "T=a, T=b", "entry 2 (T) sets a variable twice" },
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        char text[512], want[512];
        snprintf(text, sizeof text, JWT_AUTH SERVER "env_from_claims = %s\n", bad[i][0]);
        snprintf(want, sizeof want, "t.ini:8: env_from_claims: %s", bad[i][1]);
        load_err(text, want);
    }
    load_err(SERVER "env_from_claims = T=x\n",
             "t.ini:3: env_from_claims: needs [auth] mode = jwt (a verified token's claims; mode "
             "none has no claims)");
    load_err(JWT_AUTH SERVER "env_from_claims = T=x\npool_warm_children = 1\n",
             "t.ini:9: pool_warm_children: must be 0 with env_from_claims, credentials_dir or "
             "token_exchange (a warm child would have no principal: each principal's pool "
             "children start for its own requests)");
    load_err(JWT_AUTH SERVER "credentials_missing = sometimes\n",
             "t.ini:8: credentials_missing: must be refuse or server_env");
}

Test(config, env_lines)
{
    char text[] = "# c\n\n  A=1\r\nB=x=y # kept\nEMPTY=\n";
    char **env = NULL, why[256];
    cr_assert_eq(config_env_lines(text, NULL, "x", &env, why, sizeof why), 0);
    cr_assert_eq(strv_len(env), 3);
    cr_assert_str_eq(env[0], "A=1");
    cr_assert_str_eq(env[1], "B=x=y # kept");
    cr_assert_str_eq(env[2], "EMPTY=");
    char old[] = "B=old";
    char *const already[] = { old, NULL };
    char again[] = "A=1\nB=2\n";
    char **none = NULL;
    cr_assert_eq(config_env_lines(again, already, "env", &none, why, sizeof why), -1);
    cr_assert_str_eq(why, "2: B is already set (env)");
    cr_assert_null(none);
    config_env_free(env);
    char twice[] = "A=1\nA=2\n", notpair[] = "A=1\nnot a pair\n";
    cr_assert_eq(config_env_lines(twice, NULL, "an earlier line", &env, why, sizeof why), -1);
    cr_assert_str_eq(why, "2: A is already set (an earlier line)");
    cr_assert_eq(config_env_lines(notpair, NULL, "x", &env, why, sizeof why), -1);
    cr_assert_str_eq(why, "2: must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*");
}

Test(config, child_env_credentials)
{
    struct config cfg;
    load_ok(SERVER "env = T=server K=keep\ninherit_env =\n", &cfg);
    char e1[] = "T=mine", e2[] = "MCPGW_SERVER=x", e3[] = "MCPGW_SESSION_LABEL=y", e4[] = "N=new";
    char *const extra[] = { e1, e2, e3, e4, NULL };
    char **env = config_child_env(&cfg.servers[0], "MCPGW_SESSION_LABEL", "lbl", extra);
    const char *const want[] = { "K=keep", "T=mine", "N=new", "MCPGW_SERVER=a",
                                 "MCPGW_SESSION_LABEL=lbl" };
    cr_assert_eq(strv_len(env), ARRAY_LEN(want));
    for (size_t i = 0; i < ARRAY_LEN(want); i++)
        cr_assert_str_eq(env[i], want[i]);
    config_env_free(env);
    config_clear(&cfg);
}

Test(config, credentials_read)
{
    char dir[] = "/tmp/test_creds_XXXXXX", path[128], why[1200];
    cr_assert_not_null(mkdtemp(dir));
    struct config cfg;
    char text[256];
    snprintf(text, sizeof text,
             "[auth]\nmode = bearer\npublic_url = https://a\ntokens_file = /dev/null\n" SERVER
             "credentials_dir = %s\n",
             dir);
    load_ok(text, &cfg);
    const struct config_server *s = &cfg.servers[0];
    cr_assert(config_server_per_principal(s));
    char **env = NULL;
    /* No file; names that are not safe file names. */
    cr_assert_eq(config_credentials_read(s, "sub:alice", &env, why, sizeof why), 1);
    const char *const unsafe[] = { "", ".env", "../x", "a/b", "a b", "sub:al\nice" };
    for (size_t i = 0; i < ARRAY_LEN(unsafe); i++) {
        cr_assert_eq(config_credentials_read(s, unsafe[i], &env, why, sizeof why), -2, "%s",
                     unsafe[i]);
        cr_assert_str_eq(why, "the principal's name is not a safe file name for credentials_dir");
    }
    snprintf(path, sizeof path, "%s/sub:alice.env", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("TOKEN=s3cret\n# c\nOTHER=x\n", f);
    fclose(f);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(config_credentials_read(s, "sub:alice", &env, why, sizeof why), 0, "%s", why);
    cr_assert_eq(strv_len(env), 2);
    cr_assert_str_eq(env[0], "TOKEN=s3cret");
    config_env_free(env);
    /* Readable by others: refused, the reason names the path, never the value. */
    cr_assert_eq(chmod(path, 0644), 0);
    cr_assert_eq(config_credentials_read(s, "sub:alice", &env, why, sizeof why), -1);
    cr_assert(strstr(why, "holds a secret and is readable by others") != NULL, "%s", why);
    cr_assert(strstr(why, "s3cret") == NULL);
    /* A malformed line: its number. */
    f = fopen(path, "w");
    fputs("TOKEN=s3cret\nnot a pair\n", f);
    fclose(f);
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(config_credentials_read(s, "sub:alice", &env, why, sizeof why), -1);
    char want[256];
    snprintf(want, sizeof want, "%s:2: must be NAME=VALUE, NAME of [A-Za-z_][A-Za-z0-9_]*", path);
    cr_assert_str_eq(why, want);
    unlink(path);
    /* A FIFO never blocks the gateway: refused as not a regular file. */
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(config_credentials_read(s, "sub:alice", &env, why, sizeof why), -1);
    snprintf(want, sizeof want, "%s: is not a regular file", path);
    cr_assert_str_eq(why, want);
    unlink(path);
    config_clear(&cfg);
    /* The directory must be writable by no one else. */
    cr_assert_eq(chmod(dir, 0770), 0);
    struct config bad;
    char err[1200];
    cr_assert_eq(config_load_string(text, "t.ini", &bad, err, sizeof err), -1);
    cr_assert(strstr(err, "credentials_dir: ") != NULL && strstr(err, "is writable by its group"),
              "%s", err);
    rmdir(dir);
}
