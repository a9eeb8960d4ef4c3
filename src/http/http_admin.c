/* SPDX-License-Identifier: MIT */
/*
 * The operator's admin routes, every one behind admin_token: while it is empty they do not exist
 * (404, as any unknown path); then only loopback peers (403) presenting "Authorization: Bearer
 * <admin_token>" (401, compared in constant time) reach them.
 *   GET  /admin/inflight                 the in-flight view: sessions and pools
 *   POST /admin/sessions/ID/end          ends one session: its requests are cancelled at the child
 *   POST /admin/servers/NAME/drain       NAME takes no new session and no new stateless request
 *   POST /admin/servers/NAME/resume      ... and takes them again
 *   POST /admin/servers/NAME/restart     NAME's pool is replaced, as a reload replaces it
 * An action answers 200 with a small JSON document saying what it did (404 for an unknown
 * session or server), and is logged at info (action, target, peer, outcome) and counted
 * (mcpgw_admin_actions_total), refusals included. The work itself is the session layer's
 * (session_close), the pool's (pool_restart) and the relay's (the drained state); nothing here
 * knows their insides. The refusal a drained server's new work gets is here too.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "http_rules.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "relay.h"
#include "session.h"

#define HTTP_ADMIN_POOLS_MAX ((size_t)16 << 20) /* the pools' part of the admin view */
/* Retry-After of a drained server's refusals: a hint; the drain lasts until the operator ends it.
 */
#define HTTP_DRAINED_RETRY_S "5"

enum http_admin_action {
    HTTP_ADMIN_END = 0,
    HTTP_ADMIN_DRAIN,
    HTTP_ADMIN_RESUME,
    HTTP_ADMIN_RESTART,
    HTTP_ADMIN_ACTIONS,
};
static const char *const http_admin_actions[HTTP_ADMIN_ACTIONS] = { "end", "drain", "resume",
                                                                    "restart" };

enum http_admin_outcome {
    HTTP_ADMIN_OK = 0,    /* done (or already so: draining a drained server) */
    HTTP_ADMIN_NOT_FOUND, /* no such session or server */
    HTTP_ADMIN_REFUSED,   /* 401, 403 or 405 */
    HTTP_ADMIN_OUTCOMES,
};
static const char *const http_admin_outcomes[HTTP_ADMIN_OUTCOMES] = { "ok", "not_found",
                                                                      "refused" };

/* Counted for the life of the process (mcpgw_admin_actions_total). */
static uint64_t http_admin_count[HTTP_ADMIN_ACTIONS][HTTP_ADMIN_OUTCOMES];

/* What an admin path names. */
struct http_admin_route {
    bool inflight; /* GET /admin/inflight */
    bool action;   /* an action route: act and target below */
    enum http_admin_action act;
    char target[CRYPTO_SESSION_ID_MAX + 64]; /* the session id or server name, as in the path */
};

/*
 * The one segment after prefix in url, followed by "/" and a verb: true with the segment in
 * target and the verb in *verb. A segment is 1 .. size - 1 bytes without '/'.
 */
static bool
http_admin_segment(const char *url, const char *prefix, char *target, size_t size,
                   const char **verb)
{
    size_t plen = strlen(prefix);
    if (strncmp(url, prefix, plen) != 0)
        return false;
    const char *seg = url + plen;
    const char *slash = strchr(seg, '/');
    size_t n = slash != NULL ? (size_t)(slash - seg) : 0;
    if (n == 0 || n >= size)
        return false;
    memcpy(target, seg, n);
    target[n] = '\0';
    *verb = slash + 1;
    return true;
}

/* The route url names; false when it is no admin route (404 once the gate is passed). */
static bool
http_admin_route(const char *url, struct http_admin_route *rt)
{
    memset(rt, 0, sizeof(*rt));
    const char *verb;
    if (strcmp(url, "/admin/inflight") == 0) {
        rt->inflight = true;
        return true;
    }
    if (http_admin_segment(url, "/admin/sessions/", rt->target, sizeof(rt->target), &verb)) {
        rt->act = HTTP_ADMIN_END;
        rt->action = strcmp(verb, "end") == 0;
        return rt->action;
    }
    if (!http_admin_segment(url, "/admin/servers/", rt->target, sizeof(rt->target), &verb))
        return false;
    for (size_t i = HTTP_ADMIN_DRAIN; i < HTTP_ADMIN_ACTIONS; i++)
        if (strcmp(verb, http_admin_actions[i]) == 0) {
            rt->act = (enum http_admin_action)i;
            rt->action = true;
            return true;
        }
    return false;
}

/* One line per action, refused ones too: what, on what, from whom, how it went. */
static void
http_admin_log(const struct http_req *rc, const struct http_admin_route *rt,
               enum http_admin_outcome o, const char *detail)
{
    http_admin_count[rt->act][o]++;
    char peer[64];
    http_access_peer_text(rc, peer, sizeof(peer));
    const char *action = http_admin_actions[rt->act];
    const struct log_field f[] = { { "action", action, false },
                                   { "target", rt->target, false },
                                   { "peer", peer[0] != '\0' ? peer : NULL, false },
                                   { "outcome", http_admin_outcomes[o], false } };
    log_fields(LOG_INFO, NULL, f, ARRAY_LEN(f), "admin action %s %s from %s: %s%s%s", action,
               rt->target, peer[0] != '\0' ? peer : "-", http_admin_outcomes[o],
               detail != NULL ? ", " : "", detail != NULL ? detail : "");
}

/* 200 with body (a JSON object, taken). */
static enum MHD_Result
http_admin_done(struct http_req *rc, const struct http_admin_route *rt, char *body,
                const char *detail)
{
    http_admin_log(rc, rt, HTTP_ADMIN_OK, detail);
    struct MHD_Response *r = http_json_response(body, strlen(body));
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return http_queue(rc, MHD_HTTP_OK, r);
}

static enum MHD_Result
http_admin_not_found(struct http_req *rc, const struct http_admin_route *rt, const char *message)
{
    http_admin_log(rc, rt, HTTP_ADMIN_NOT_FOUND, NULL);
    return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, message);
}

/* The object {"action":..,KEY:TARGET,...rest} as a new string; rest starts with ',' or is "". */
static char *
http_admin_body(const struct http_admin_route *rt, const char *key, const char *rest)
{
    size_t tlen;
    char *t = jsonrpc_quote(rt->target, &tlen);
    size_t size = tlen + strlen(rest) + 64;
    char *body = xmalloc(size);
    snprintf(body, size, "{\"action\":\"%s\",\"%s\":%.*s%s}", http_admin_actions[rt->act], key,
             (int)tlen, t, rest);
    free(t);
    return body;
}

/* POST /admin/sessions/ID/end: the session's one close path, with the operator as its reason. */
static enum MHD_Result
http_admin_end(struct http_req *rc, const struct http_admin_route *rt)
{
    struct session *s = session_find(rt->target);
    if (s == NULL)
        return http_admin_not_found(rc, rt, "no such session");
    size_t inflight = session_requests_in_flight(s);
    char server[96];
    snprintf(server, sizeof(server), "%s", session_server_name(s));
    session_close(s, SESSION_END_ADMIN, NULL);
    char rest[160], detail[64];
    snprintf(rest, sizeof(rest), ",\"server\":\"%s\",\"state\":\"ended\",\"cancelled\":%zu", server,
             inflight);
    snprintf(detail, sizeof(detail), "%zu requests in flight cancelled", inflight);
    return http_admin_done(rc, rt, http_admin_body(rt, "session", rest), detail);
}

/* POST /admin/servers/NAME/{drain,resume,restart}. */
static enum MHD_Result
http_admin_server_action(struct http_req *rc, const struct http_admin_route *rt)
{
    const struct config_server *srv = config_server_named(httpd.cfg, rt->target);
    if (srv == NULL)
        return http_admin_not_found(rc, rt, "no such server");
    struct relay_stats *st = relay_stats_of(srv->name);
    char rest[160], detail[64];
    if (rt->act == HTTP_ADMIN_RESTART) {
        size_t n = pool_restart(srv);
        snprintf(rest, sizeof(rest), ",\"state\":\"restarted\",\"children_replaced\":%zu", n);
        snprintf(detail, sizeof(detail), "%zu pool children replaced", n);
        return http_admin_done(rc, rt, http_admin_body(rt, "server", rest), detail);
    }
    bool drain = rt->act == HTTP_ADMIN_DRAIN;
    bool changed = relay_drained(st) != drain;
    relay_set_drained(st, drain);
    const char *why;
    enum relay_health h = relay_health_of(st, srv->pool_max_restarts_per_min, util_now_ms(), &why);
    snprintf(rest, sizeof(rest), ",\"state\":\"%s\",\"changed\":%s", relay_health_text(h),
             changed ? "true" : "false");
    snprintf(detail, sizeof(detail), "%s%s", relay_health_text(h), changed ? "" : " already");
    return http_admin_done(rc, rt, http_admin_body(rt, "server", rest), detail);
}

/* GET /admin/inflight: the sessions' document, with the pools joined before its closing brace. */
static enum MHD_Result
http_admin_inflight(struct http_req *rc)
{
    size_t len;
    char *body = session_admin_json(&len);
    /* "pools", and "pools_truncated" when children were left out. */
    struct buf b;
    buf_init(&b, 2 * (size_t)HTTP_ADMIN_POOLS_MAX + len + 128);
    int ok = buf_append(&b, body, len - 1); /* without the document's closing brace */
    free(body);
    if (ok == 0)
        ok = buf_printf(&b, ",\"pools\":");
    int pr = ok == 0 ? pool_admin_json(&b, HTTP_ADMIN_POOLS_MAX) : -1;
    if (pr != -1 && buf_printf(&b, ",\"pooled_sessions\":") == -1)
        pr = -1;
    int sr = pr != -1 ? pool_session_admin_json(&b, HTTP_ADMIN_POOLS_MAX) : -1;
    if (ok == -1 || pr == -1 || sr == -1
        || buf_printf(&b, ",\"pools_truncated\":%s,\"pooled_sessions_truncated\":%s}",
                      pr ? "true" : "false", sr ? "true" : "false")
               == -1) {
        buf_clear(&b);
        return http_error(rc, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                          "admin view too large");
    }
    return http_view(rc, &b, "application/json");
}

/* A method the route does not take: 405 with its Allow. */
static enum MHD_Result
http_admin_method(struct http_req *rc, const char *allow)
{
    struct MHD_Response *r = http_error_response(JSONRPC_INVALID_REQUEST, "Method not allowed");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    return http_queue(rc, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

enum MHD_Result
http_admin(struct http_req *rc, const char *url)
{
    const char *token = httpd.cfg->admin_token;
    if (token == NULL || token[0] == '\0')
        return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not found");
    struct http_admin_route rt;
    bool known = http_admin_route(url, &rt);
    if (!http_peer_loopback(rc)) {
        if (rt.action)
            http_admin_log(rc, &rt, HTTP_ADMIN_REFUSED, "not a loopback peer (403)");
        return http_error(rc, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST,
                          "the admin routes answer loopback clients only");
    }
    if (!http_bearer_ok(rc, token)) {
        if (rt.action)
            http_admin_log(rc, &rt, HTTP_ADMIN_REFUSED, "no valid admin token (401)");
        return http_unauthorized(rc);
    }
    if (!known)
        return http_error(rc, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Not found");
    if (rt.inflight)
        return rc->method == HTTP_GET || rc->head ? http_admin_inflight(rc)
                                                  : http_admin_method(rc, "GET, HEAD");
    if (rc->method != HTTP_POST) {
        http_admin_log(rc, &rt, HTTP_ADMIN_REFUSED, "not a POST (405)");
        return http_admin_method(rc, "POST");
    }
    return rt.act == HTTP_ADMIN_END ? http_admin_end(rc, &rt) : http_admin_server_action(rc, &rt);
}

void
http_admin_metrics(struct buf *b)
{
    metrics_family(b, "mcpgw_admin_actions_total", "counter",
                   "Admin actions (POST /admin/...), by action and outcome: ok, not_found (no "
                   "such session or server), refused (403, 401 or 405).");
    char labels[64];
    for (size_t a = 0; a < HTTP_ADMIN_ACTIONS; a++)
        for (size_t o = 0; o < HTTP_ADMIN_OUTCOMES; o++) {
            snprintf(labels, sizeof(labels), "action=\"%s\",outcome=\"%s\"", http_admin_actions[a],
                     http_admin_outcomes[o]);
            metrics_sample(b, "mcpgw_admin_actions_total", labels, http_admin_count[a][o]);
        }
}

enum MHD_Result
http_drained(struct http_req *rc, const struct jsonrpc_info *info)
{
    char message[200];
    snprintf(message, sizeof(message),
             "server %s is drained by the operator: it takes no new sessions or requests; try "
             "again later",
             rc->srv->name);
    size_t len;
    char *e = info != NULL ? jsonrpc_error_new(buf_head(&rc->body) + info->id.off, info->id.len,
                                               JSONRPC_INTERNAL_ERROR, message, &len)
                           : jsonrpc_error_new(NULL, 0, JSONRPC_INTERNAL_ERROR, message, &len);
    struct MHD_Response *r = http_json_response(e, len);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, HTTP_DRAINED_RETRY_S);
    http_refusal(rc, NULL, JSONRPC_INTERNAL_ERROR, message);
    log_info(rc->sid[0] ? rc->sid_tag : NULL, "request refused: 503 server %s drained by the operator",
             rc->srv->name);
    return http_queue(rc, MHD_HTTP_SERVICE_UNAVAILABLE, r);
}

bool
http_refuse_drained(struct http_req *rc, const struct jsonrpc_info *info, enum MHD_Result *ret)
{
    if (!relay_drained(relay_stats_of(rc->srv->name)))
        return false;
    *ret = http_drained(rc, info);
    return true;
}
