/* SPDX-License-Identifier: MIT */
/*
 * Pooled sessions of the 2024-11-05 HTTP+SSE transport (pool.h): GET PATH/sse opens a session
 * record with no process, whose one SSE stream (the record's get) carries the endpoint event and
 * then everything for the session's client: every call's answer and progress (each call's stream
 * is that one, pool_session_sse_stream, and its end does not end it), the child's questions
 * attributed to one of its calls (pool_session_ask.c), its list changes and updates, and the
 * gateway's own answers (ping, logging/setLevel, subscriptions, refusals). POST PATH/messages
 * hands it one message; the rest is pool_session.c's, as for a Streamable HTTP pooled session.
 *
 * The id is a random one (crypto_session_id), not sealed: the stream is one connection to one
 * instance, so the record is looked up here alone, and a sealed id never names one (nor the
 * reverse: pool_session_find opens only sealed ids). The connection is the session: when it drops
 * (pool_session_detach), every call is cancelled at its child ("client disconnected") and the
 * record goes through pool_session_close, the one close path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "crypto.h"
#include "log.h"
#include "pool_int.h"

_Static_assert(POOL_SESSION_SSE_LABEL_MAX <= POOL_SESSION_LABEL_MAX, "a label fits a record's");

static uint64_t pss_sse_next_stream = 1;

void
pool_session_sse_label(const char *id, char out[POOL_SESSION_SSE_LABEL_MAX])
{
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(id, strlen(id), h);
    static const char digits[] = "0123456789abcdef";
    memcpy(out, "sse:", 4);
    for (size_t i = 0; i < 8; i++) {
        out[4 + 2 * i] = digits[h[i] >> 4];
        out[4 + 2 * i + 1] = digits[h[i] & 15];
    }
    out[20] = '\0';
}

struct stream *
pool_session_sse_open(const struct config_server *srv, const char *principal,
                      const char *endpoint_head, bool room, struct pool_session **out,
                      enum pool_status *status, const char **why)
{
    *why = NULL;
    if (principal == NULL)
        principal = "";
    if (!pool_session_room(principal, room, status, why))
        return NULL;
    char id[CRYPTO_SESSION_ID_MAX];
    if (crypto_session_id(pools.cfg->instance_id, id) == -1 || pool_session_lookup(id) != NULL) {
        *status = POOL_E_UNAVAILABLE;
        *why = "cannot make a session id";
        return NULL;
    }
    struct pool_session *s =
        pool_session_new(id, srv->name, principal, (int64_t)(util_now_unix_ms() / 1000u));
    s->sse = true;
    pool_session_sse_label(id, s->label);
    s->get = stream_new(pss_sse_next_stream++, true, 0);
    stream_own(s->get)->attached = true;
    char endpoint[64 + CRYPTO_SESSION_ID_MAX];
    snprintf(endpoint, sizeof endpoint, "%s%s", endpoint_head, id);
    stream_push_event(s->get, "endpoint", endpoint);
    const struct log_field f[] = { { "server", srv->name, false },
                                   { "principal", principal, false } };
    log_fields(LOG_INFO, s->label, f, ARRAY_LEN(f),
               "pooled session created (2024-11-05 transport): server=%s owner=%s", srv->name,
               principal);
    audit_event("session_start", principal, srv->name, s->label, 0, NULL, NULL, NULL);
    *out = s;
    return stream_ref(s->get);
}

struct pool_session *
pool_session_sse_find(const char *id, const struct config_server *srv, const char *principal)
{
    struct pool_session *s = pool_session_lookup(id);
    /* Another transport's, another server's, another principal's, a failed one: the same 404. */
    if (s == NULL || !s->sse || s->failed || s->get == NULL || strcmp(s->server, srv->name) != 0
        || strcmp(s->principal, principal != NULL ? principal : "") != 0)
        return NULL;
    return s;
}

bool
pool_session_sse_initialized(const struct pool_session *s)
{
    if (s->rev != NULL)
        return true;
    for (const struct pool_call *c = s->calls; c != NULL; c = c->snext)
        if (c->init)
            return true;
    return false;
}

bool
pool_session_sse_ready(const struct pool_session *s)
{
    return s->rev != NULL;
}

struct stream *
pool_session_sse_stream(struct pool_call *call)
{
    struct pool_session *s = call->sess;
    call->st = stream_ref(s->get);
    call->st_shared = true;
    call->pool->row->ctr.requests++;
    return stream_ref(call->st); /* the HTTP side's, given back at once (202) */
}

/*
 * What a request of s gave back (the HTTP side's reference): its session's stream, where its
 * answer will come; or a stream already holding the gateway's own answer (ping, a refusal),
 * whose events go to the session's stream; or a call of its own, which no client reads here
 * (cancelled, as a stream nobody reads is).
 */
static void
pool_session_sse_take(struct pool_session *s, struct stream *st)
{
    if (st == s->get) {
        stream_unref(st);
        return;
    }
    if (stream_own(st)->owner != NULL) {
        log_info(s->label, "a request answered on a stream of its own: cancelled");
        pool_stream_detach(st);
        return;
    }
    /* Events of one data line each, framed without an id (pool_session_local, a refusal). */
    static const char head[] = "event: message\ndata: ";
    const size_t hl = sizeof head - 1;
    size_t n = stream_pending(st);
    char *buf = xmalloc(n + 1);
    size_t got = stream_read(st, buf, n);
    size_t off = 0;
    while (got - off > hl && memcmp(buf + off, head, hl) == 0) {
        char *nl = memchr(buf + off + hl, '\n', got - off - hl);
        if (nl == NULL || (size_t)(nl - buf) + 1 >= got || nl[1] != '\n')
            break;
        struct iovec iov = { buf + off + hl, (size_t)(nl - (buf + off + hl)) };
        stream_push_message(s->get, &iov, 1);
        off = (size_t)(nl - buf) + 2;
    }
    if (off < got)
        log_warn(s->label, "an answer of the gateway's not understood: dropped");
    free(buf);
    stream_own(st)->attached = false;
    stream_unref(st);
}

/* initialize: what the client offers is kept; the gateway answers once a child is ready. */
static enum pool_status
pool_session_sse_init(struct pool_session *s, const struct config_server *srv, char *body,
                      size_t len, const struct jsonrpc_info *info, struct pool_meta *meta)
{
    if (info->params.len == 0
        || !jsonrpc_member_string(body + info->params.off, info->params.len, "protocolVersion",
                                  s->asked, sizeof s->asked))
        s->asked[0] = '\0';
    struct jsonrpc_span caps = { 0, 0 };
    s->caps = 0;
    if (info->params.len > 0 && jsonrpc_member_at(body, info->params, "capabilities", &caps) == 0
        && caps.len > 0 && body[caps.off] == '{')
        s->caps = pool_caps_declared(body, caps);
    meta->session = s;
    meta->rev = revision_newest(REVISION_STREAMABLE); /* until the answer negotiates it */
    enum pool_status status;
    struct stream *st = pool_request(srv, body, len, info, meta, &status);
    if (st == NULL)
        return status;
    pool_session_sse_take(s, st);
    return POOL_OK;
}

enum pool_status
pool_session_sse_request(struct pool_session *s, const struct config_server *srv, char *body,
                         size_t len, const struct jsonrpc_info *info, struct pool_meta *meta)
{
    s->last_ms = util_now_ms();
    if (strcmp(info->method, "initialize") == 0)
        return pool_session_sse_init(s, srv, body, len, info, meta);
    if (s->rev == NULL && strcmp(info->method, "ping") == 0) {
        /* A ping may come before the initialize is answered: the gateway's to answer. */
        struct iovec iov[5];
        stream_push_message(
            s->get, iov,
            jsonrpc_result_iov(iov, body + info->id.off, info->id.len, "{}", 2, false));
        return POOL_OK;
    }
    enum pool_status status;
    struct stream *st = pool_session_request(s, srv, body, len, info, meta, &status);
    if (st == NULL)
        return status;
    pool_session_sse_take(s, st);
    return POOL_OK;
}

void
pool_session_sse_dropped(struct pool_session *s, struct stream *st)
{
    stream_own(st)->attached = false;
    stream_mark_dropped(st);
    stream_discard(st);
    pool_session_close(s, RELAY_CANCEL_DISCONNECT); /* ends the session's reference */
    stream_unref(st);                               /* the HTTP request's */
}
