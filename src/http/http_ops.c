/* SPDX-License-Identifier: MIT */
/*
 * The operator's routes: /healthz, /readyz, /metrics, and the RFC 9728 protected resource
 * metadata; the admin token's checks, which /metrics shares with the admin routes (http_admin.c).
 * Probes take GET and HEAD only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "pool.h"
#include "relay.h"
#include "sandbox_notify.h"
#include "upstream.h"

/* GET only (HEAD too: MHD sends the headers of the GET answer). */
static bool
http_refuse_not_get(struct http_req *rc, enum MHD_Result *ret)
{
    if (rc->method == HTTP_GET || rc->head)
        return false;
    *ret =
        http_error(rc, MHD_HTTP_METHOD_NOT_ALLOWED, JSONRPC_INVALID_REQUEST, "Method not allowed");
    return true;
}

enum MHD_Result
http_health(struct http_req *rc)
{
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    struct MHD_Response *r = http_static_response("{\"status\":\"ok\"}");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return http_queue(rc, MHD_HTTP_OK, r);
}

/* The peer of this connection is on loopback (behind nginx: nginx is). */
bool
http_peer_loopback(const struct http_req *rc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rc->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci != NULL && http_rules_loopback(ci->client_addr);
}

/* "Authorization: Bearer <token>" with the admin token (compared in constant time). */
bool
http_bearer_ok(const struct http_req *rc, const char *token)
{
    size_t len;
    const char *got = auth_bearer_token(http_header(rc, HTTP_H_AUTHORIZATION), &len);
    return got != NULL && len == strlen(token) && crypto_equal(got, token, len);
}

enum MHD_Result
http_unauthorized(struct http_req *rc)
{
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, "Unauthorized");
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    return http_queue(rc, MHD_HTTP_UNAUTHORIZED, r);
}

/* An operator view (admin, metrics) from b, which is cleared: 200, not to be cached. */
enum MHD_Result
http_view(struct http_req *rc, struct buf *b, const char *content_type)
{
    size_t len = buf_used(b);
    char *body = xstrndup(buf_head(b), len);
    buf_clear(b);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, MHD_HTTP_OK, r);
}

/*
 * Each server's state (relay.h: ok, failing, broken, drained, starting) and why, as
 * "servers":[...]; true when at least one of them can serve (relay_health_serves).
 */
static bool
http_ready_servers(struct buf *b, bool *ok)
{
    bool any = false;
    uint64_t now = util_now_ms();
    *ok = buf_printf(b, ",\"servers\":[") == 0;
    for (size_t i = 0; *ok && i < httpd.cfg->n_servers; i++) {
        const struct config_server *srv = &httpd.cfg->servers[i];
        const char *why;
        pool_probe(srv);
        enum relay_health h =
            relay_health_of(relay_stats_of(srv->name), srv->pool_max_restarts_per_min, now, &why);
        any |= relay_health_serves(h);
        size_t nlen, wlen;
        char *name = jsonrpc_quote(srv->name, &nlen);
        char *w = jsonrpc_quote(why, &wlen);
        *ok = buf_printf(b, "%s{\"name\":%.*s,\"state\":\"%s\",\"why\":%.*s}", i ? "," : "",
                         (int)nlen, name, relay_health_text(h), (int)wlen, w)
              == 0;
        free(name);
        free(w);
    }
    *ok = *ok && buf_printf(b, "]}") == 0;
    return any;
}

/* Why the gateway takes no new session now (/readyz, mcpgw_ready), or NULL while it does. */
static const char *
http_not_ready(bool serving)
{
    return session_draining()                           ? "draining"
           : http_sessions_full()                       ? "max_sessions reached"
           : !serving && httpd.cfg->n_servers > 0       ? "no server can serve"
                                                        : NULL;
}

/*
 * GET /readyz: 200 while new sessions are taken and some server can serve; 503 while draining, at
 * max_sessions, or when no server can serve (each is starting, broken or drained). The body says
 * each server's state.
 */
enum MHD_Result
http_ready(struct http_req *rc)
{
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    struct buf b;
    buf_init(&b, (size_t)1 << 20);
    struct buf servers;
    buf_init(&servers, (size_t)1 << 20);
    bool ok;
    bool serving = http_ready_servers(&servers, &ok);
    const char *reason = http_not_ready(serving);
    unsigned status = reason == NULL ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
    if (reason == NULL)
        ok = ok && buf_printf(&b, "{\"ready\":true") == 0;
    else
        ok = ok && buf_printf(&b, "{\"ready\":false,\"reason\":\"%s\"", reason) == 0;
    ok = ok && buf_append(&b, buf_head(&servers), buf_used(&servers)) == 0;
    buf_clear(&servers);
    if (!ok) {
        buf_clear(&b);
        return http_error(rc, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                          "readiness view too large");
    }
    size_t len = buf_used(&b);
    char *body = xstrndup(buf_head(&b), len);
    buf_clear(&b);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, status, r);
}

bool
http_readiness(char *status, size_t len, bool *settled)
{
    uint64_t now = util_now_ms();
    size_t serving = 0;
    *settled = true;
    for (size_t i = 0; i < httpd.cfg->n_servers; i++) {
        const struct config_server *srv = &httpd.cfg->servers[i];
        const struct relay_stats *st = relay_stats_of(srv->name);
        const char *why;
        pool_probe(srv);
        serving += relay_health_serves(
            relay_health_of(st, srv->pool_max_restarts_per_min, now, &why));
        *settled &= relay_settled(st);
    }
    const char *reason = http_not_ready(serving > 0);
    if (reason != NULL)
        snprintf(status, len, "not ready: %s (%zu of %zu servers serve)", reason, serving,
                 httpd.cfg->n_servers);
    else
        snprintf(status, len, "ready: %zu of %zu servers serve", serving, httpd.cfg->n_servers);
    return reason == NULL;
}

/*
 * mcpgw_server_state{server,state}: 1 for the state /readyz gives each configured server, 0 for
 * the others; a server a reload removed keeps its series, all 0. And mcpgw_ready: 1 when /readyz
 * answers 200.
 */
static void
http_server_states(struct buf *b)
{
    metrics_family(b, "mcpgw_server_state", "gauge",
                   "Each server's state as /readyz gives it: 1 for the state it is in.");
    uint64_t now = util_now_ms();
    bool serving = false;
    for (size_t i = 0; i < httpd.cfg->n_servers; i++) /* its series before any traffic */
        (void)relay_stats_of(httpd.cfg->servers[i].name);
    for (const struct relay_stats *st = relay_stats_next(NULL); st != NULL;
         st = relay_stats_next(st)) {
        const char *name = relay_stats_name(st);
        const struct config_server *srv = config_server_named(httpd.cfg, name);
        enum relay_health h = RELAY_HEALTH_OK; /* a removed server's series are all 0 */
        if (srv != NULL) {
            const char *why;
            h = relay_health_of(st, srv->pool_max_restarts_per_min, now, &why);
            serving |= relay_health_serves(h);
        }
        for (enum relay_health s = RELAY_HEALTH_OK; s < RELAY_HEALTH_N; s++) {
            char labels[256];
            snprintf(labels, sizeof(labels), "server=\"%s\",state=\"%s\"", name,
                     relay_health_text(s));
            metrics_sample(b, "mcpgw_server_state", labels, srv != NULL && h == s);
        }
    }
    metrics_family(b, "mcpgw_ready", "gauge",
                   "1 while new sessions are taken and a server can serve (/readyz answers 200).");
    metrics_sample(b, "mcpgw_ready", NULL, http_not_ready(serving) == NULL);
}

/*
 * GET /metrics (Prometheus text format): loopback peers only while admin_token is empty; with
 * an admin_token, any peer presenting it.
 */
enum MHD_Result
http_metrics(struct http_req *rc)
{
    const char *token = httpd.cfg->admin_token;
    if (token != NULL && token[0] != '\0') {
        if (!http_bearer_ok(rc, token))
            return http_unauthorized(rc);
    } else if (!http_peer_loopback(rc)) {
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                          "/metrics answers loopback clients only (or set admin_token)");
    }
    enum MHD_Result ret;
    if (http_refuse_not_get(rc, &ret))
        return ret;
    struct buf b;
    buf_init(&b, (size_t)1 << 24);
    metrics_process(&b);
    session_metrics(&b, pool_session_count_of);
    upstream_metrics(&b);
    sandbox_notify_metrics(&b);
    relay_metrics(&b);
    pool_metrics(&b);
    policy_metrics(&b);
    audit_metrics(&b);
    http_admin_metrics(&b);
    http_server_states(&b);
    metrics_family(&b, "mcpgw_http_requests_open", "gauge",
                   "HTTP requests being handled (open streams included).");
    metrics_sample(&b, "mcpgw_http_requests_open", NULL, httpd.live);
    metrics_family(&b, "mcpgw_http_connections_parked", "gauge",
                   "Kept-alive connections parked between requests (suspended until bytes come).");
    metrics_sample(&b, "mcpgw_http_connections_parked", NULL, httpd.parked);
    metrics_family(&b, "mcpgw_http_responses_total", "counter", "HTTP responses by status class.");
    for (unsigned i = 1; i < 6; i++) {
        char labels[16];
        snprintf(labels, sizeof(labels), "code=\"%uxx\"", i);
        metrics_sample(&b, "mcpgw_http_responses_total", labels, httpd.responses[i]);
    }
    metrics_family(&b, "mcpgw_http_received_bytes_total", "counter", "HTTP request body bytes.");
    metrics_sample(&b, "mcpgw_http_received_bytes_total", NULL, httpd.bytes_in);
    metrics_family(&b, "mcpgw_http_sent_bytes_total", "counter",
                   "HTTP response body bytes (SSE streams included).");
    metrics_sample(&b, "mcpgw_http_sent_bytes_total", NULL, httpd.bytes_out);
    metrics_family(&b, "mcpgw_auth_refused_total", "counter",
                   "Requests refused by [auth], by server: no token, an invalid one, missing "
                   "scopes.");
    static const char *const refusals[] = { "missing", "invalid", "insufficient_scope" };
    for (size_t i = 0; i < httpd.cfg->n_servers; i++) /* its series before any refusal */
        (void)metrics_row_of(&httpd.servers, httpd.cfg->servers[i].name,
                             sizeof(struct http_server));
    for (const struct http_server *r = (const struct http_server *)(void *)httpd.servers; r != NULL;
         r = METRICS_ROW_NEXT(r))
        for (size_t i = 0; i < ARRAY_LEN(refusals); i++) {
            char labels[160];
            snprintf(labels, sizeof(labels), "server=\"%s\",reason=\"%s\"", r->row.name,
                     refusals[i]);
            metrics_sample(&b, "mcpgw_auth_refused_total", labels, r->refused_auth[i]);
        }
    struct auth_counters ac;
    auth_counters_get(&ac);
    const struct {
        const char *name, *type, *help;
        uint64_t value;
    } authsrv[] = {
        { "mcpgw_auth_unavailable_total", "counter",
          "Requests answered 503: the authorization server could not answer for them.",
          httpd.auth_unavailable },
        { "mcpgw_auth_waits_total", "counter",
          "Requests that waited for the issuer's keys or an introspection answer.", ac.waits },
        { "mcpgw_auth_fetches_total", "counter",
          "Discovery documents and JWK Sets fetched from the authorization server.",
          ac.jwks_fetches },
        { "mcpgw_auth_fetch_failures_total", "counter",
          "Of those, failed ones (the last good key set stayed in use).", ac.jwks_failures },
        { "mcpgw_auth_jwks_keys", "gauge", "Keys in the last JWK Set fetched.", ac.jwks_keys },
        { "mcpgw_auth_introspections_total", "counter",
          "RFC 7662 introspection requests sent (answers are reused until exp).",
          ac.introspections },
        { "mcpgw_auth_introspection_failures_total", "counter",
          "Of those, failed ones (no answer, a status other than 2xx, or not JSON).",
          ac.introspection_failures },
    };
    for (size_t i = 0; i < ARRAY_LEN(authsrv); i++) {
        metrics_family(&b, authsrv[i].name, authsrv[i].type, authsrv[i].help);
        metrics_sample(&b, authsrv[i].name, NULL, authsrv[i].value);
    }
    metrics_family(&b, "mcpgw_rate_limited_total", "counter",
                   "Requests refused with 429 by a principal's rate_limit_per_s.");
    metrics_sample(&b, "mcpgw_rate_limited_total", NULL, httpd.rate_limited);
    metrics_family(&b, "mcpgw_slow_clients_closed_total", "counter",
                   "Connections closed because a request's headers or body came too slowly.");
    metrics_sample(&b, "mcpgw_slow_clients_closed_total", NULL, httpd.slow_closed);
    metrics_family(&b, "mcpgw_http_host_refused_total", "counter",
                   "Requests refused with 403: Host not in allowed_hosts.");
    metrics_sample(&b, "mcpgw_http_host_refused_total", NULL, httpd.host_refused);
    metrics_family(&b, "mcpgw_principals", "gauge",
                   "Principals remembered (holding sessions, requests or a partly used bucket).");
    metrics_sample(&b, "mcpgw_principals", NULL, auth_principal_count());
    return http_view(rc, &b, "text/plain; version=0.0.4");
}

/*
 * GET /.well-known/oauth-protected-resource[PATH] (RFC 9728 section 3): the metadata of the server
 * at PATH; the root form describes the first server. Public: no token, any Origin (browser clients
 * read it cross-origin), but the Host rule holds.
 */
enum MHD_Result
http_prm(struct http_req *rc)
{
    enum MHD_Result ret;
    if (rc->options) { /* a browser's CORS preflight (the SDK adds MCP-Protocol-Version) */
        struct MHD_Response *r = http_static_response("");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "mcp-protocol-version");
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
        return http_queue(rc, MHD_HTTP_NO_CONTENT, r);
    }
    if (http_refuse_not_get(rc, &ret))
        return ret;
    if (http_host_refused(rc))
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Host not allowed");
    char resource[1200];
    if (auth_resource(&httpd.cfg->auth, rc->srv, resource, sizeof(resource)) == -1)
        return http_error(rc, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                          "resource URI too long");
    size_t len;
    char *body = jsonrpc_prm_new(resource, httpd.cfg->auth.authorization_servers,
                                 rc->srv->required_scopes, &len);
    struct MHD_Response *r = http_body_response(body, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=300");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    return http_queue(rc, MHD_HTTP_OK, r);
}
