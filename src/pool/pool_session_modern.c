/* SPDX-License-Identifier: MIT */
/*
 * A pooled session (session_mode = pooled, pool_session.c) in front of children that speak only
 * the stateless revision (2026-07-28): the pool's era is stateless, declared (era = stateless) or
 * found by its probe. The session is legacy toward its client and stateless toward the children,
 * as a session with a child of its own is (session/session_modern.c); what neither owns is
 * mcp/envelope.c.
 *
 *   - initialize: the session's initialize call goes to a child as a server/discover carrying the
 *     session's own envelope, and the client gets an initialize result made from its answer
 *     (jsonrpc_init_from_discover): serverInfo, the legacy capabilities, instructions; the
 *     protocolVersion negotiated as for any pooled session (the client's when the gateway serves
 *     it, else its newest). listChanged and resources.subscribe are declared as the discover
 *     declares them: the pool's own listen (pool_session_listen.c) brings its list changes and
 *     the sessions' resource updates; the first discover read tells the pool what to listen for.
 *   - every request: the client's bytes with the envelope spliced in (the stateless revision the
 *     pool speaks, the client's capabilities and clientInfo from its own initialize, the log
 *     level its logging/setLevel set): a new flat copy per request, made when the call is sent to
 *     its child (a call queued while the pool's era was not known yet gets it then). A session
 *     taken up at another instance (its id opened, no record here) sends the capabilities its
 *     sealed flags name (elicitation, sampling, roots) and no clientInfo: only digests of them
 *     travel in the id.
 *   - an input_required result: the child's request is over (the revision's rule), so the call
 *     leaves its child and keeps its stream; the questions go to the client on that stream as
 *     requests with ids the gateway minted ("mcpgw-ask-N", the session's numbering), a question
 *     of a kind the client did not declare at initialize ends the call with an error, the client
 *     has input_hold_ms to answer them all; then the request goes again (a fresh pool call to any
 *     child of the pool, queued like any other) with inputResponses and requestState, for at most
 *     ENVELOPE_ROUNDS_MAX rounds. A client's error answer ends the call with an error.
 *   - cancels: in flight at a child, as for any pooled session (notifications/cancelled with the
 *     id the child saw; a dropped stream is the cancel); between rounds nothing is at a child,
 *     and the call ends there.
 *
 * Lifetimes: struct pool_modern is its call's (call->modern), made at its first send, freed by
 * pool_call_end (pool_session_modern_forget) with the hold's timer. The client's capabilities and
 * clientInfo are the session's (bounded by POOL_MODERN_KEPT_MAX), freed with it, or as soon as a
 * legacy child answered its initialize.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "envelope.h"
#include "log.h"
#include "pool_int.h"

struct pool_modern_ask {
    unsigned no; /* "mcpgw-ask-N" toward the client; 0: answered */
    char *key;   /* its key in inputRequests (quoted): the answer's in inputResponses */
    size_t key_len;
    char method[JSONRPC_METHOD_MAX];
};

struct pool_modern {
    char *id; /* the client's id, raw JSON */
    size_t id_len;
    char *body; /* a request that may ask: the client's bytes as they came (flat); NULL: none */
    size_t len;
    char *state; /* the round's requestState (a JSON string); NULL: none */
    size_t state_len;
    struct buf answers; /* ",KEY:RESULT" for each question answered */
    struct pool_modern_ask asks[ENVELOPE_ASKS_MAX];
    size_t nasks, open;
    unsigned rounds;
    bool retry;              /* its sends carry inputResponses and requestState */
    struct loop_timer *hold; /* input_hold_ms, while the client answers */
};

static const char *const pool_modern_levels[8] = { "debug", "info",     "notice", "warning",
                                                   "error", "critical", "alert",  "emergency" };

/* --- the session's client -------------------------------------------------------------------- */

static char *
pool_modern_span(const char *body, struct jsonrpc_span sp)
{
    char *out = xmalloc(sp.len + 1);
    memcpy(out, body + sp.off, sp.len);
    out[sp.len] = '\0';
    jsonrpc_flatten(out, sp.len); /* its line to the child is one line */
    return out;
}

void
pool_session_modern_keep(struct pool_session *s, const char *body, const struct jsonrpc_info *info)
{
    struct jsonrpc_span caps = { 0, 0 }, who = { 0, 0 };
    if (info->params.len == 0)
        return;
    if (jsonrpc_member_at(body, info->params, "capabilities", &caps) != 0 || caps.len == 0
        || body[caps.off] != '{')
        caps.len = 0;
    if (jsonrpc_member_at(body, info->params, "clientInfo", &who) != 0 || who.len == 0
        || body[who.off] != '{')
        who.len = 0;
    if (caps.len + who.len > POOL_MODERN_KEPT_MAX) {
        log_info(s->label,
                 "capabilities and clientInfo past %d bytes: not kept (a stateless "
                 "child is told the capabilities the gateway bridges)",
                 POOL_MODERN_KEPT_MAX);
        return;
    }
    if (caps.len > 0)
        s->client_caps = pool_modern_span(body, caps);
    if (who.len > 0)
        s->client_info = pool_modern_span(body, who);
}

void
pool_session_modern_drop(struct pool_session *s)
{
    free(s->client_caps);
    free(s->client_info);
    s->client_caps = s->client_info = NULL;
}

bool
pool_session_modern_on(const struct pool_session *s, const struct config_server *srv)
{
    if (s->stateless || srv->era == CONFIG_ERA_STATELESS)
        return true;
    if (config_server_per_principal(srv))
        return false;
    const struct pool *p = pool_shared_of(srv->name);
    return p != NULL && p->era == CONFIG_ERA_STATELESS;
}

/*
 * The capabilities the envelope names: the client's own, else (not kept: a session taken up here
 * from its sealed id, or too large) those its sealed flags say it declared.
 */
static const char *
pool_modern_caps(const struct pool_session *s, char out[64])
{
    if (s->client_caps != NULL)
        return s->client_caps;
    static const char *const names[3] = { "elicitation", "sampling", "roots" };
    size_t k = 0;
    out[k++] = '{';
    for (unsigned i = 0; i < 3; i++)
        if (s->caps & (1u << i))
            k += (size_t)snprintf(out + k, 64 - k, "%s\"%s\":{}", k > 1 ? "," : "", names[i]);
    out[k++] = '}';
    out[k] = '\0';
    return out;
}

/* The concatenated iovecs as one new NUL-terminated buffer (*len its length). */
static char *
pool_modern_join(const struct iovec *iov, int k, size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < k; i++)
        n += iov[i].iov_len;
    char *out = xmalloc(n + 1);
    size_t at = 0;
    for (int i = 0; i < k; i++) {
        if (iov[i].iov_len > 0)
            memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

/* --- client -> child ------------------------------------------------------------------------- */

char *
pool_session_modern_body(struct pool_call *call, const char *body, size_t *len,
                         const struct jsonrpc_info *info, struct jsonrpc_info *out, int *code,
                         const char **why)
{
    struct pool_session *s = call->sess;
    struct pool_modern *m = call->modern;
    *code = JSONRPC_INTERNAL_ERROR;
    if (m == NULL) {
        m = call->modern = xcalloc(1, sizeof(*m));
        buf_init(&m->answers, SIZE_MAX);
        m->id = xmemdup(body + info->id.off, info->id.len);
        m->id_len = info->id.len;
    }
    char *step = NULL; /* the request before the envelope, when it is a copy */
    size_t slen = *len;
    struct jsonrpc_info si = *info;
    const char *from = body;
    if (call->init) {
        /* The initialize becomes a server/discover with the session's envelope (no trace). */
        static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
        static const char tail[] = ",\"method\":\"server/discover\",\"params\":{}}";
        slen = sizeof head - 1 + m->id_len + sizeof tail - 1;
        step = xmalloc(slen + 1);
        memcpy(step, head, sizeof head - 1);
        memcpy(step + sizeof head - 1, m->id, m->id_len);
        memcpy(step + sizeof head - 1 + m->id_len, tail, sizeof tail);
    } else {
        const char *bad = envelope_check(body, *len, info);
        if (bad != NULL) {
            *code = JSONRPC_INVALID_PARAMS;
            *why = bad;
            return NULL;
        }
        if (m->body == NULL && envelope_may_ask(info->method)) {
            m->body = xmemdup(body, *len);
            m->len = *len;
        }
        if (call->trace != NULL) {
            /* The trace first, on the client's own bytes (what its spans name). */
            struct relay_edit ed[RELAY_EDITS_MAX];
            char text[TRACE_EDIT_BUF];
            int n = trace_edits(call->trace, body, *len, info, text, ed);
            if (n > 0) {
                struct iovec iov[2 * RELAY_EDITS_MAX + 1];
                step = pool_modern_join(iov, relay_splice(body, *len, ed, n, iov), &slen);
            }
        }
    }
    if (step != NULL) {
        from = step;
        if (jsonrpc_scan(step, slen, &si, NULL) != JSONRPC_OK) {
            free(step);
            *why = "the request could not be given the stateless _meta";
            return NULL;
        }
    }
    /* Then the envelope (and a retry's members). */
    const struct revision *rev = call->pool->speaks != 0 ? revision_set_newest(call->pool->speaks)
                                                         : revision_newest(REVISION_STATELESS);
    char capbuf[64];
    const struct envelope_client ec = { rev->name, pool_modern_caps(s, capbuf), s->client_info,
                                        s->level_asked ? pool_modern_levels[s->log_level] : NULL };
    struct buf env, ext, extra;
    buf_init(&env, SIZE_MAX);
    buf_init(&ext, SIZE_MAX);
    buf_init(&extra, SIZE_MAX);
    int rc = envelope_members(&ec, &env);
    if (m->retry && !call->init)
        rc |= envelope_retry_members(&m->answers, m->state, &extra);
    struct relay_edit ed[2];
    int n = rc != 0
                ? -1
                : envelope_edits(from, slen, &si, &env, buf_used(&extra) ? buf_head(&extra) : NULL,
                                 buf_used(&extra), &ext, ed);
    char *res = NULL;
    if (n >= 0) {
        struct iovec iov[5];
        res = pool_modern_join(iov, relay_splice(from, slen, ed, n, iov), len);
        if (jsonrpc_scan(res, *len, out, NULL) != JSONRPC_OK) {
            free(res);
            res = NULL;
        }
    }
    buf_clear(&env);
    buf_clear(&ext);
    buf_clear(&extra);
    free(step);
    if (res == NULL)
        *why = "the request could not be given the stateless _meta";
    return res;
}

/* --- child -> client ------------------------------------------------------------------------- */

/* The initialize, answered from the child's server/discover answer; the call ends. */
static void
pool_modern_init_answer(struct pool_call *call, struct pool_child *c, struct pending *p,
                        const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct pool_session *s = call->sess;
    uint32_t speaks = 0;
    (void)jsonrpc_discover_versions(line, len, revision_seen_stateless, &speaks);
    /* The revisions of the session's transport: a 2024-11-05 session's (GET /sse) too. */
    unsigned mask = s->sse ? REVISION_SESSIONS : REVISION_STREAMABLE;
    const struct revision *rev = revision_named(s->asked);
    if (!revision_over(rev, mask))
        rev = revision_newest(mask);
    size_t rlen = 0;
    char *res = NULL;
    if (info->kind == JSONRPC_RESULT && speaks != 0) {
        pool_session_listen_caps(call->pool, line, len); /* the first discover read tells */
        res = jsonrpc_init_from_discover(line, len, rev->name,
                                         pool_session_listen_declared(call->pool),
                                         call->pool->name, &rlen);
    }
    if (res == NULL) {
        log_warn(s->label, "the child's server/discover answer cannot answer initialize");
        pool_call_error(call, p->orig_id, p->orig_id_len, JSONRPC_INTERNAL_ERROR,
                        "the server's children did not answer server/discover as a stateless "
                        "server of a revision the gateway serves");
        return;
    }
    s->rev = rev;
    s->stateless = true;
    struct iovec iov[5];
    call->pool->row->ctr.answered++;
    pool_push(call, iov, jsonrpc_result_iov(iov, p->orig_id, p->orig_id_len, res, rlen, false));
    free(res);
    log_info(s->label, "pooled session initialized: %s, the children stateless", rev->name);
    pending_del(&c->r.pt, p);
    call->p = NULL;
    pool_call_end(call);
}

static void pool_modern_retry(struct pool_call *call);

/* The client did not answer the round within input_hold_ms: the call ends. */
static void
pool_modern_hold_over(void *arg)
{
    struct pool_call *call = arg;
    struct pool_modern *m = call->modern;
    m->hold = NULL;
    log_info(call->sess != NULL ? call->sess->label : NULL,
             "input round not answered within input_hold_ms: the request ends");
    relay_count(call->pool->stats, RELAY_CANCEL_TIMEOUT);
    char message[128];
    snprintf(message, sizeof message,
             "request timed out after %" PRIu64 " ms waiting for the client's answers at the "
             "gateway (input_hold_ms)",
             call->pool->srv->input_hold_ms);
    pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR, message);
}

static void
pool_modern_asks_clear(struct pool_modern *m)
{
    for (size_t i = 0; i < m->nasks; i++)
        free(m->asks[i].key);
    m->nasks = m->open = 0;
}

/* The capability bit (pool_caps_declared's) a question needs. */
static unsigned
pool_modern_bit(const char *method)
{
    if (strcmp(method, "elicitation/create") == 0)
        return 1u;
    if (strcmp(method, "sampling/createMessage") == 0)
        return 2u;
    return 4u; /* roots/list: envelope_asks_read lets no other kind through */
}

/* An input_required result for call (no longer at any child): its questions to the client. */
static void
pool_modern_round(struct pool_call *call, const char *line, size_t len)
{
    struct pool_modern *m = call->modern;
    struct pool_session *s = call->sess;
    const char *why = NULL;
    char text[JSONRPC_METHOD_MAX + 96];
    struct envelope_asks as = { .n = 0 };
    if (s == NULL || call->st == NULL || stream_ended(call->st) || !stream_own(call->st)->attached)
        why = "the client's stream is gone";
    else if (m->body == NULL)
        why = "the server asked for input on a request that cannot ask for it";
    else if (++m->rounds > ENVELOPE_ROUNDS_MAX)
        why = "the server asked for input in too many rounds";
    if (why == NULL) {
        free(m->state);
        why = envelope_asks_read(line, len, &as, &m->state, &m->state_len);
    }
    for (size_t i = 0; i < as.n && why == NULL; i++)
        if ((s->caps & pool_modern_bit(as.a[i].method)) == 0) {
            snprintf(text, sizeof text,
                     "the server asked for %s, which the client did not declare at initialize",
                     as.a[i].method);
            why = text;
        }
    if (why != NULL) {
        envelope_asks_free(&as);
        log_warn(s != NULL ? s->label : NULL, "input round refused: %s", why);
        pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR, why);
        return;
    }
    pool_modern_asks_clear(m);
    buf_clear(&m->answers);
    buf_init(&m->answers, SIZE_MAX);
    for (size_t i = 0; i < as.n; i++) {
        struct pool_modern_ask *a = &m->asks[m->nasks++];
        a->no = ++s->next_ask;
        if (a->no == 0)
            a->no = ++s->next_ask; /* 0 means answered */
        a->key = as.a[i].key;
        a->key_len = as.a[i].key_len;
        as.a[i].key = NULL;
        snprintf(a->method, sizeof a->method, "%s", as.a[i].method);
        char id[32], head[ENVELOPE_HEAD_MAX];
        int idlen = snprintf(id, sizeof id, "\"mcpgw-ask-%u\"", a->no);
        struct iovec iov[4];
        pool_push(call, iov, envelope_question(&as.a[i], id, (size_t)idlen, head, iov));
        m->open++;
    }
    envelope_asks_free(&as);
    call->pool->row->ctr.asks_bridged += m->nasks;
    log_info(s->label, "input round %u of a request: %zu questions to the client", m->rounds,
             m->nasks);
    if (m->open == 0) {
        pool_modern_retry(call);
        return;
    }
    m->hold = loop_timer_add(pools.l, call->pool->srv->input_hold_ms, pool_modern_hold_over, call);
}

bool
pool_session_modern_answer(struct pool_call *call, struct pool_child *c, struct pending *p,
                           const char *line, size_t len, const struct jsonrpc_info *info)
{
    if (call->modern == NULL)
        return false;
    if (call->init) {
        pool_modern_init_answer(call, c, p, line, len, info);
        return true;
    }
    bool asks = info->kind == JSONRPC_RESULT && info->result_type.len == 16
                && memcmp(line + info->result_type.off, "\"input_required\"", 16) == 0;
    if (!asks)
        return false;
    /* Its request at the child is over: the call keeps its stream and leaves the child. */
    pending_del(&c->r.pt, p);
    call->p = NULL;
    call->c = NULL;
    pool_modern_round(call, line, len);
    return true;
}

/* Every question answered: the request again, with the answers, to any child of the pool. */
static void
pool_modern_retry(struct pool_call *call)
{
    struct pool_modern *m = call->modern;
    struct pool *p = call->pool;
    m->retry = true;
    loop_timer_del(m->hold);
    m->hold = NULL;
    struct jsonrpc_info info;
    if (jsonrpc_scan(m->body, m->len, &info, NULL) != JSONRPC_OK) {
        pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR,
                        "the request could not be sent again");
        return;
    }
    if (p->retired || pools.draining) {
        /* No child of this pool takes it any more (a reload, a restart, shutdown). */
        pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR,
                        p->retired ? "the server was restarted or reloaded during the request's "
                                     "input round: send the request again"
                                   : relay_status_text(POOL_E_DRAINING));
        return;
    }
    enum pool_status status = POOL_OK;
    struct pool_child *c = pool_pick(p, &status);
    if (c != NULL) {
        if (pool_call_start(call, c, m->body, m->len, &info) == -1)
            pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR,
                            relay_status_text(POOL_E_BUSY));
        return;
    }
    if (status != POOL_OK) {
        pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR, relay_status_text(status));
        return;
    }
    /* No child has room yet: it waits in the queue as a new request would. */
    pool_call_enqueue(p, call, m->body, m->len, info.id);
}

bool
pool_session_modern_client_answer(struct pool_session *s, const char *body, size_t len,
                                  const struct jsonrpc_info *info)
{
    (void)len;
    char id[32];
    for (struct pool_call *call = s->calls; call != NULL; call = call->snext) {
        struct pool_modern *m = call->modern;
        if (m == NULL || call->c != NULL || call->body != NULL)
            continue; /* not between rounds */
        for (size_t i = 0; i < m->nasks; i++) {
            struct pool_modern_ask *a = &m->asks[i];
            size_t n = (size_t)snprintf(id, sizeof id, "\"mcpgw-ask-%u\"", a->no);
            if (a->no == 0 || n != info->id.len || memcmp(id, body + info->id.off, n) != 0)
                continue;
            if (info->kind != JSONRPC_RESULT || info->result.len == 0) {
                char why[JSONRPC_METHOD_MAX + 64];
                snprintf(why, sizeof why, "the client answered the server's %s with an error",
                         a->method);
                pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR, why);
                return true;
            }
            if (envelope_answer_add(&m->answers, a->key, a->key_len, body + info->result.off,
                                    info->result.len)
                != 0) {
                pool_call_error(call, m->id, m->id_len, JSONRPC_INTERNAL_ERROR,
                                "the client's answer could not be kept");
                return true;
            }
            a->no = 0;
            if (--m->open == 0)
                pool_modern_retry(call);
            return true;
        }
    }
    return false;
}

bool
pool_session_modern_call_is(const struct pool_call *call, const char *id, size_t idlen)
{
    const struct pool_modern *m = call->modern;
    return m != NULL && call->c == NULL && call->body == NULL && m->id_len == idlen
           && memcmp(m->id, id, idlen) == 0;
}

void
pool_session_modern_forget(struct pool_call *call)
{
    struct pool_modern *m = call->modern;
    if (m == NULL)
        return;
    call->modern = NULL;
    loop_timer_del(m->hold);
    pool_modern_asks_clear(m);
    buf_clear(&m->answers);
    free(m->state);
    free(m->body);
    free(m->id);
    free(m);
}
