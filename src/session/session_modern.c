/* SPDX-License-Identifier: MIT */
/*
 * A legacy session (2024-11-05 to 2025-11-25: initialize, Mcp-Session-Id) in front of a child that
 * speaks only a stateless revision (2026-07-28): the gateway speaks the stateless revision to the
 * child and the legacy one to the client.
 *
 * How the gateway knows (the pool's probe rule, pool_start.c, applied to one child): the session
 * sends the client's initialize as for any child. A child that refuses it in the stateless era's
 * words (-32022, or an error whose data.supported lists a stateless revision the gateway knows) is
 * then sent a server/discover probe naming the newest stateless revision the gateway knows (the
 * pool's probe: the gateway's clientInfo, no client capabilities). An answer that lists stateless
 * revisions the gateway knows (a DiscoverResult's supportedVersions, or an unsupported-version
 * error's data.supported, which is asked again once with the newest revision it lists) makes the
 * session a stateless one; anything else ends it as before, the client getting the child's refusal
 * of its initialize. A server with era = stateless skips the initialize: the probe goes first. era
 * = legacy never probes. Nothing of this costs a legacy child anything but the copy of the client's
 * capabilities and clientInfo, kept until its initialize is answered.
 *
 * Then:
 *   - initialize is answered by the gateway from the discover result (serverInfo, the legacy
 *     capabilities, instructions; the client's protocolVersion when the gateway serves it on the
 *     session's transport, else the newest it does, as the legacy revisions negotiate);
 *   - every request gets the stateless _meta envelope spliced in (protocolVersion, the client's
 *     capabilities and clientInfo from its initialize, and the logLevel logging/setLevel set): the
 *     request's own bytes are not copied, as for any request of a session;
 *   - results go back as they came: resultType, ttlMs and cacheScope stay (a legacy Result may
 *     carry any further member);
 *   - an input_required result (the child asks for elicitation, sampling or roots) becomes the
 *     legacy client's requests on that request's stream; once every one is answered the request
 *     is sent again (a new id, inputResponses and requestState), for as many rounds as the child
 *     asks (at most MODERN_ROUNDS_MAX). The wait for the client's answers is bounded by
 *     input_hold_ms (then the request times out as any other, and is cancelled at the child);
 *   - what the stateless revision removed is answered by the gateway: ping, logging/setLevel (kept
 *     for the envelope); resources/subscribe, resources/unsubscribe, tasks/list and tasks/result
 *     get -32601; the client's notifications other than notifications/cancelled are not sent on
 *     (notifications/initialized, roots/list_changed: a stateless server takes none).
 *   - cancels: the client's notifications/cancelled, a dropped stream, a timeout, a DELETE, all go
 *     to the child as notifications/cancelled for the id it saw last, as for any session.
 *
 * Lifetimes: struct session_modern is the session's (s->modern), freed at session_close, or as
 * soon as the child turns out legacy. A held call (struct modern_call: a copy of a tools/call,
 * prompts/get or resources/read request, which may answer input_required) lives until its request
 * ends: its answer, or its entry found gone (cancelled, timed out) when the next call is held or a
 * client answers; at most 2 * max_inflight_per_session are held, stdin_queue_bytes of copies
 * together (a request past that is sent, not held: a round it asks for ends it with an error). The
 * questions of a round are in-flight entries toward the client (PENDING_TO_CLIENT) whose orig_id is
 * the question's key.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "log.h"
#include "session_int.h"
#include "version.h"

#define MODERN_ASKS_MAX   ENVELOPE_ASKS_MAX
#define MODERN_ROUNDS_MAX ENVELOPE_ROUNDS_MAX
#define MODERN_REPROBES   1  /* probes again with a revision the child's refusal listed */
#define MODERN_URIS_MAX   64 /* resources/subscribe URIs of one session */
#define MODERN_URI_MAX    2048

enum modern_state {
    MODERN_CANDIDATE = 0, /* the client's initialize went to the child */
    MODERN_PROBING,       /* server/discover went to the child */
    MODERN_ACTIVE,        /* the child is stateless: every message is translated */
};

/* A client request that may answer input_required, held for its rounds. */
struct modern_call {
    struct modern_call *next;
    uint64_t gw_id; /* the id the child saw last: its entry's gw_id */
    char *body;     /* the client's request as it came (flattened) */
    size_t len;
    char *state; /* the round's requestState as a JSON string; NULL: none */
    size_t state_len;
    struct buf answers; /* ",KEY:RESULT" for each question answered */
    uint64_t asks[MODERN_ASKS_MAX];
    size_t nasks, open;
    unsigned rounds;
};

struct session_modern {
    enum modern_state state;
    const struct revision *rev; /* the stateless row spoken to the child */
    char requested[32];         /* the client's protocolVersion */
    char *caps;                 /* the client's capabilities, raw JSON ("{}" when none) */
    char *info;                 /* its clientInfo, raw JSON; NULL: none */
    char *refusal;              /* the child's refusal of initialize, for the client */
    size_t refusal_len;
    char level[16];              /* logging/setLevel; "": none */
    unsigned listen_caps;        /* JSONRPC_LISTEN_* the child declared (discover capabilities) */
    uint64_t listen_id;          /* the child's id of the session's subscriptions/listen; 0: none */
    char *uris[MODERN_URIS_MAX]; /* resources/subscribe: raw JSON strings */
    size_t nuris;
    unsigned reprobes;
    struct modern_call *calls;
    size_t ncalls;
    size_t held_bytes; /* the calls' copies together: at most stdin_queue_bytes */
};

static char *
modern_span_dup(const char *body, struct jsonrpc_span sp)
{
    char *out = xmalloc(sp.len + 1);
    memcpy(out, body + sp.off, sp.len);
    out[sp.len] = '\0';
    return out;
}

void
session_modern_begin(struct session *s, const char *body, const struct jsonrpc_info *info)
{
    if (s->srv->era == CONFIG_ERA_LEGACY || s->modern != NULL)
        return;
    struct session_modern *m = xcalloc(1, sizeof *m);
    struct jsonrpc_span v;
    if (info->params.len && jsonrpc_member_at(body, info->params, "capabilities", &v) == 0
        && v.len > 0 && body[v.off] == '{')
        m->caps = modern_span_dup(body, v);
    else
        m->caps = xstrdup("{}");
    if (info->params.len && jsonrpc_member_at(body, info->params, "clientInfo", &v) == 0
        && v.len > 0 && body[v.off] == '{')
        m->info = modern_span_dup(body, v);
    if (info->params.len && jsonrpc_member_at(body, info->params, "protocolVersion", &v) == 0
        && v.len > 0)
        (void)jsonrpc_text_at(body, v, m->requested, sizeof m->requested);
    s->modern = m;
}

static void
modern_call_free(struct session_modern *m, struct modern_call *c)
{
    m->held_bytes -= c->len;
    free(c->body);
    free(c->state);
    buf_clear(&c->answers);
    free(c);
}

void
session_modern_free(struct session *s)
{
    struct session_modern *m = s->modern;
    if (m == NULL)
        return;
    while (m->calls != NULL) {
        struct modern_call *c = m->calls;
        m->calls = c->next;
        modern_call_free(m, c);
    }
    if (m->listen_id != 0 && s->u != NULL) {
        /* A listen ends on stdio with notifications/cancelled for its id. */
        char id[24];
        size_t len;
        snprintf(id, sizeof id, "%" PRIu64, m->listen_id);
        char *c = jsonrpc_cancel_new(id, strlen(id), "session ended", &len);
        struct iovec iov[2] = { { c, len }, { (void *)(uintptr_t) "\n", 1 } };
        (void)session_relay_send(s, iov, 2);
        free(c);
    }
    for (size_t i = 0; i < m->nuris; i++)
        free(m->uris[i]);
    free(m->caps);
    free(m->info);
    free(m->refusal);
    free(m);
    s->modern = NULL;
}

bool
session_modern_active(const struct session *s)
{
    return s->modern != NULL && s->modern->state == MODERN_ACTIVE;
}

bool
session_modern_probing(const struct session *s)
{
    return s->modern != NULL && s->modern->state == MODERN_PROBING;
}

static void modern_listen(struct session *s);

/* --- the probe ---------------------------------------------------------------------------- */

/* Sends the probe for p (the session's initialize entry), under a fresh id. */
static int
modern_probe(struct session *s, struct pending *p, const struct revision *rev)
{
    struct session_modern *m = s->modern;
    p->gw_id = s->r.pt.next_id++;
    s->init_gw_id = p->gw_id;
    m->state = MODERN_PROBING;
    m->rev = rev;
    size_t len;
    char *msg = jsonrpc_probe_new(p->gw_id, rev->name, MCPGW_VERSION, &len);
    struct iovec iov[2] = { { msg, len }, { (void *)(uintptr_t) "\n", 1 } };
    int rc = session_relay_send(s, iov, 2);
    free(msg);
    log_info(s->id, "server/discover sent to the child for %s", rev->name);
    return rc;
}

bool
session_modern_init_refused(struct session *s, struct pending *p, const char *line, size_t len)
{
    struct session_modern *m = s->modern;
    if (m == NULL || m->state != MODERN_CANDIDATE)
        return false;
    /*
     * Only a refusal in the stateless era's words is probed: the unsupported-version error
     * (-32022), or an error whose data.supported lists a stateless revision the gateway knows (a
     * stateless-only server lists its versions in any error to initialize). A legacy child's own
     * refusal reaches the client at once, as before: probing it would wait for an answer to a
     * method it may never answer.
     */
    uint32_t speaks = 0;
    int code = 0;
    (void)jsonrpc_discover_versions(line, len, revision_seen_stateless, &speaks);
    if (speaks == 0
        && (jsonrpc_error_code(line, len, &code) != 0 || code != JSONRPC_UNSUPPORTED_VERSION))
        return false;
    m->refusal = xmalloc(len + 1);
    memcpy(m->refusal, line, len);
    m->refusal_len = len;
    log_info(s->id, "child refused initialize: probing it with server/discover");
    if (modern_probe(s, p, revision_newest(REVISION_STATELESS)) == -1) {
        log_warn(s->id, "server/discover not delivered: child stdin full");
        return false;
    }
    return true;
}

/* The initialize failed for good: the client gets the child's refusal, or why. */
static void
modern_init_fail(struct session *s, struct stream *st, struct pending *p, const char *why)
{
    struct session_modern *m = s->modern;
    log_warn(s->id, "%s", why);
    if (st != NULL && m->refusal != NULL) {
        struct jsonrpc_info ri;
        if (jsonrpc_scan(m->refusal, m->refusal_len, &ri, NULL) == JSONRPC_OK) {
            struct relay_edit ed = { ri.id.off, ri.id.len, p->orig_id, p->orig_id_len };
            struct iovec iov[3];
            session_push(s, st, iov, relay_splice(m->refusal, m->refusal_len, &ed, 1, iov));
        } else
            session_push_error(s, st, p, why);
    } else if (st != NULL)
        session_push_error(s, st, p, why);
    pending_del(&s->r.pt, p);
    session_stream_answered(s, st);
    session_close(s, SESSION_END_INIT, "initialize failed");
}

void
session_modern_init_answer(struct session *s, struct stream *st, struct pending *p,
                           const char *line, size_t len, const struct jsonrpc_info *info)
{
    struct session_modern *m = s->modern;
    uint32_t speaks = 0;
    bool listed = jsonrpc_discover_versions(line, len, revision_seen_stateless, &speaks);
    if (speaks == 0) {
        modern_init_fail(s, st, p,
                         listed ? "server/discover lists no stateless version the gateway serves"
                                : "the child refused initialize and is not a stateless server");
        return;
    }
    if (info->kind == JSONRPC_ERROR) {
        /* It refused the probe's revision and listed what it speaks: ask for that one, once. */
        if (m->reprobes++ >= MODERN_REPROBES
            || modern_probe(s, p, revision_set_newest(speaks)) == -1)
            modern_init_fail(s, st, p, "server/discover refused every stateless version asked");
        return;
    }
    if (!(speaks & revision_bit(m->rev)))
        m->rev = revision_set_newest(speaks);
    unsigned over = s->legacy ? REVISION_SESSIONS : REVISION_STREAMABLE;
    const struct revision *legacy = revision_named(m->requested);
    if (!revision_over(legacy, over))
        legacy = revision_newest(over);
    m->listen_caps = jsonrpc_listen_caps(line, len);
    size_t rlen;
    char *res =
        jsonrpc_init_from_discover(line, len, legacy->name, m->listen_caps, s->srv->name, &rlen);
    if (res == NULL) {
        modern_init_fail(s, st, p, "server/discover answered without a result object");
        return;
    }
    free(m->refusal);
    m->refusal = NULL;
    m->state = MODERN_ACTIVE;
    snprintf(s->version, sizeof(s->version), "%s", legacy->name);
    s->rev = legacy;
    s->state = SESSION_READY;
    relay_start_ok(s->r.stats);
    log_info(s->id, "session initialized: protocol %s, the child stateless (%s)", legacy->name,
             m->rev->name);
    if (st != NULL) {
        struct iovec iov[5];
        session_push(s, st, iov,
                     jsonrpc_result_iov(iov, p->orig_id, p->orig_id_len, res, rlen, false));
    }
    free(res);
    pending_del(&s->r.pt, p);
    session_stream_answered(s, st);
    modern_listen(s);
}

/* --- the session's subscriptions: one subscriptions/listen at the child --------------------- */

/* The envelope's members, each with a leading comma, into b. */
static int
modern_envelope(const struct session_modern *m, struct buf *b)
{
    const struct envelope_client ec = { m->rev->name, m->caps, m->info, m->level };
    return envelope_members(&ec, b);
}

/*
 * (Re)opens the session's listen: the list changes the child declared, and the URIs the client
 * subscribed to. The listen before it, if any, is ended first (notifications/cancelled), so a
 * change that comes between the two is not seen: the client asked for the new set at that moment.
 */
static void
modern_listen(struct session *s)
{
    struct session_modern *m = s->modern;
    struct buf b;
    buf_init(&b, SIZE_MAX);
    int rc = 0;
    if (m->listen_id != 0) {
        rc |= buf_printf(&b,
                         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                         "{\"requestId\":%" PRIu64 ",\"reason\":\"subscriptions changed\"}}\n",
                         m->listen_id);
        m->listen_id = 0;
    }
    unsigned flags =
        m->listen_caps & (JSONRPC_LISTEN_TOOLS | JSONRPC_LISTEN_PROMPTS | JSONRPC_LISTEN_RESOURCES);
    if (flags != 0 || m->nuris > 0) {
        m->listen_id = s->r.pt.next_id++;
        rc |= buf_printf(&b,
                         "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                         ",\"method\":\"subscriptions/listen\",\"params\":{\"notifications\":{",
                         m->listen_id);
        const char *sep = "";
        if (flags & JSONRPC_LISTEN_TOOLS) {
            rc |= buf_printf(&b, "%s\"toolsListChanged\":true", sep);
            sep = ",";
        }
        if (flags & JSONRPC_LISTEN_PROMPTS) {
            rc |= buf_printf(&b, "%s\"promptsListChanged\":true", sep);
            sep = ",";
        }
        if (flags & JSONRPC_LISTEN_RESOURCES) {
            rc |= buf_printf(&b, "%s\"resourcesListChanged\":true", sep);
            sep = ",";
        }
        if (m->nuris > 0) {
            rc |= buf_printf(&b, "%s\"resourceSubscriptions\":[", sep);
            for (size_t i = 0; i < m->nuris; i++)
                rc |= buf_printf(&b, "%s%s", i == 0 ? "" : ",", m->uris[i]);
            rc |= buf_append(&b, "]", 1);
        }
        rc |= buf_append(&b, "},\"_meta\":{", 11);
        size_t at = buf_used(&b);
        rc |= modern_envelope(m, &b);
        /* The first member takes no comma. */
        if (rc == 0) {
            memmove(b.data + b.off + at, b.data + b.off + at + 1, buf_used(&b) - at - 1);
            b.len--;
        }
        rc |= buf_append(&b, "}}}\n", 4);
    }
    if (rc == 0 && buf_used(&b) > 0) {
        struct iovec iov = { (void *)buf_head(&b), buf_used(&b) };
        if (session_relay_send(s, &iov, 1) == -1)
            log_warn(s->id, "subscriptions/listen not delivered: child stdin full");
        else
            log_debug(s->id, "subscriptions/listen sent as child id %" PRIu64, m->listen_id);
    }
    buf_clear(&b);
}

bool
session_modern_listen_line(struct session *s, const char *line, const struct jsonrpc_info *info)
{
    struct session_modern *m = s->modern;
    if (m == NULL || m->state != MODERN_ACTIVE)
        return false;
    uint64_t id;
    if (info->kind == JSONRPC_NOTIFICATION && strcmp(info->method, "notifications/cancelled") == 0
        && info->request_id.len && jsonrpc_id_u64(line, info->request_id, &id) && id != 0
        && id == m->listen_id) {
        log_info(s->id, "the child ended the session's subscriptions/listen");
        m->listen_id = 0;
        return true;
    }
    if (info->kind == JSONRPC_NOTIFICATION) {
        /* The listen's acknowledgement is the gateway's own business. */
        return strcmp(info->method, "notifications/subscriptions/acknowledged") == 0;
    }
    if (info->kind == JSONRPC_REQUEST || !jsonrpc_id_u64(line, info->id, &id) || id != m->listen_id
        || id == 0)
        return false;
    log_info(s->id, "the child ended the session's subscriptions/listen%s",
             info->kind == JSONRPC_ERROR ? " with an error" : "");
    m->listen_id = 0;
    return true;
}

/* --- client -> child ---------------------------------------------------------------------- */

/* Answers the client's request on st at once (result: raw JSON, or an error with code). */
static void
modern_reply(struct session *s, struct stream *st, const char *body,
             const struct jsonrpc_info *info, const char *result, int code, const char *message)
{
    if (result != NULL) {
        struct iovec iov[5];
        int n = jsonrpc_result_iov(iov, body + info->id.off, info->id.len, result, strlen(result),
                                   false);
        session_push(s, st, iov, n);
        return;
    }
    size_t len;
    char *e = jsonrpc_error_new(body + info->id.off, info->id.len, code, message, &len);
    struct iovec iov = { e, len };
    session_push(s, st, &iov, 1);
    free(e);
}

static const char *const modern_levels[] = { "debug", "info",     "notice", "warning",
                                             "error", "critical", "alert",  "emergency" };

bool
session_modern_local(struct session *s, struct stream *st, const char *body, size_t len,
                     const struct jsonrpc_info *info)
{
    struct session_modern *m = s->modern;
    if (m == NULL || m->state != MODERN_ACTIVE)
        return false;
    const char *method = info->method;
    const char *bad = envelope_check(body, len, info);
    if (bad != NULL) {
        modern_reply(s, st, body, info, NULL, JSONRPC_INVALID_PARAMS, bad);
        return true;
    }
    if (strcmp(method, "ping") == 0) {
        modern_reply(s, st, body, info, "{}", 0, NULL);
        return true;
    }
    if (strcmp(method, "logging/setLevel") == 0) {
        char level[16] = "";
        if (info->level.len)
            (void)jsonrpc_text_at(body, info->level, level, sizeof level);
        for (size_t i = 0; i < ARRAY_LEN(modern_levels); i++)
            if (strcmp(level, modern_levels[i]) == 0) {
                snprintf(m->level, sizeof m->level, "%s", level);
                modern_reply(s, st, body, info, "{}", 0, NULL);
                return true;
            }
        modern_reply(s, st, body, info, NULL, JSONRPC_INVALID_PARAMS, "invalid logging level");
        return true;
    }
    bool sub = strcmp(method, "resources/subscribe") == 0;
    if ((sub || strcmp(method, "resources/unsubscribe") == 0)
        && (m->listen_caps & JSONRPC_LISTEN_UPDATES)) {
        if (info->uri.len == 0 || body[info->uri.off] != '"' || info->uri.len > MODERN_URI_MAX) {
            modern_reply(s, st, body, info, NULL, JSONRPC_INVALID_PARAMS,
                         "params.uri must be a string");
            return true;
        }
        size_t i = 0;
        while (i < m->nuris
               && !(strlen(m->uris[i]) == info->uri.len
                    && memcmp(m->uris[i], body + info->uri.off, info->uri.len) == 0))
            i++;
        if (sub && i == m->nuris && m->nuris >= MODERN_URIS_MAX) {
            modern_reply(s, st, body, info, NULL, JSONRPC_INVALID_PARAMS,
                         "too many resource subscriptions for this session");
            return true;
        }
        bool changed = false;
        if (sub && i == m->nuris) {
            m->uris[m->nuris++] = modern_span_dup(body, info->uri);
            changed = true;
        } else if (!sub && i < m->nuris) {
            free(m->uris[i]);
            m->uris[i] = m->uris[--m->nuris];
            changed = true;
        }
        if (changed)
            modern_listen(s);
        modern_reply(s, st, body, info, "{}", 0, NULL);
        return true;
    }
    if (revision_removed(m->rev, method) || strcmp(method, "server/discover") == 0
        || strcmp(method, "subscriptions/listen") == 0) {
        char message[JSONRPC_METHOD_MAX + 96];
        snprintf(message, sizeof message,
                 "%s is not available: the server speaks the stateless revision %s only", method,
                 m->rev->name);
        modern_reply(s, st, body, info, NULL, JSONRPC_METHOD_NOT_FOUND, message);
        return true;
    }
    return false;
}

/*
 * Sends body (a client request) to the child with id, the envelope, and extra (",KEY:VALUE"
 * members for params, a retry's; NULL: none) spliced in.
 */
static int
modern_send(struct session *s, const char *body, size_t len, const struct jsonrpc_info *info,
            const char *id, size_t idlen, const char *extra, size_t extra_len)
{
    struct session_modern *m = s->modern;
    struct buf env, ext;
    buf_init(&env, SIZE_MAX);
    buf_init(&ext, SIZE_MAX);
    struct relay_edit ed[3] = { { info->id.off, info->id.len, id, idlen } };
    int n = -1;
    if (modern_envelope(m, &env) == 0)
        n = envelope_edits(body, len, info, &env, extra, extra_len, &ext, ed + 1);
    int rc = n == -1 ? -1 : relay_send_spliced(&s->r, body, len, ed, n + 1);
    buf_clear(&env);
    buf_clear(&ext);
    return rc == 0 ? 0 : -1;
}

/* Forgets held calls whose request ended (cancelled, timed out, answered as an error). */
static void
modern_prune(struct session *s)
{
    struct session_modern *m = s->modern;
    for (struct modern_call **pc = &m->calls; *pc != NULL;) {
        struct modern_call *c = *pc;
        struct pending *p = pending_find_gw(&s->r.pt, PENDING_TO_CHILD, c->gw_id);
        if (p == NULL || p->state != PENDING_FORWARDED) {
            *pc = c->next;
            m->ncalls--;
            modern_call_free(m, c);
        } else
            pc = &c->next;
    }
}

int
session_modern_send(struct session *s, struct pending *p, const char *body, size_t len,
                    const struct jsonrpc_info *info, const char *id, size_t idlen)
{
    struct session_modern *m = s->modern;
    if (m->state == MODERN_CANDIDATE && p->gw_id == s->init_gw_id) {
        if (s->srv->era != CONFIG_ERA_STATELESS)
            return SESSION_MODERN_PASS;
        return modern_probe(s, p, revision_newest(REVISION_STATELESS));
    }
    if (m->state != MODERN_ACTIVE)
        return SESSION_MODERN_PASS;
    if (modern_send(s, body, len, info, id, idlen, NULL, 0) == -1)
        return -1;
    if (envelope_may_ask(info->method)) {
        modern_prune(s);
        if (m->ncalls < 2 * (size_t)sessions.cfg->max_inflight_per_session
            && m->held_bytes + len <= sessions.cfg->stdin_queue_bytes) {
            struct modern_call *c = xcalloc(1, sizeof *c);
            c->gw_id = p->gw_id;
            c->body = xmalloc(len + 1);
            memcpy(c->body, body, len);
            c->len = len;
            m->held_bytes += len;
            buf_init(&c->answers, SIZE_MAX);
            c->next = m->calls;
            m->calls = c;
            m->ncalls++;
        }
    }
    return 0;
}

/* --- child -> client: input rounds -------------------------------------------------------- */

static struct modern_call *
modern_call_of(const struct session_modern *m, uint64_t gw_id)
{
    for (struct modern_call *c = m->calls; c != NULL; c = c->next)
        if (c->gw_id == gw_id)
            return c;
    return NULL;
}

static void
modern_call_drop(struct session *s, struct modern_call *c)
{
    struct session_modern *m = s->modern;
    for (struct modern_call **pc = &m->calls; *pc != NULL; pc = &(*pc)->next)
        if (*pc == c) {
            *pc = c->next;
            m->ncalls--;
            break;
        }
    /* Its questions still open: a late answer finds no call and is dropped. */
    for (size_t i = 0; i < c->nasks; i++) {
        struct pending *q = pending_find_gw(&s->r.pt, PENDING_TO_CLIENT, c->asks[i]);
        if (q != NULL)
            pending_del(&s->r.pt, q);
    }
    modern_call_free(m, c);
}

/* Ends p (and its held call c, if any) with an error to the client on st. */
static void
modern_fail(struct session *s, struct stream *st, struct pending *p, struct modern_call *c,
            const char *why)
{
    log_warn(s->id, "%s: %s", p->method, why);
    if (st != NULL)
        session_push_error(s, st, p, why);
    if (c != NULL)
        modern_call_drop(s, c);
    pending_del(&s->r.pt, p);
    session_stream_answered(s, st);
}

static void modern_retry(struct session *s, struct stream *st, struct pending *p,
                         struct modern_call *c);

/* An input_required result for p: its questions go to the client on st. */
static void
modern_round(struct session *s, struct stream *st, struct pending *p, struct modern_call *c,
             const char *line, size_t len)
{
    if (st == NULL || stream_ended(st) || stream_dropped(st)) {
        modern_fail(s, st, p, c, "the client's stream is gone");
        return;
    }
    if (++c->rounds > MODERN_ROUNDS_MAX) {
        modern_fail(s, st, p, c, "the server asked for input in too many rounds");
        return;
    }
    struct envelope_asks as = { .n = 0 };
    free(c->state);
    const char *why = envelope_asks_read(line, len, &as, &c->state, &c->state_len);
    buf_clear(&c->answers);
    buf_init(&c->answers, SIZE_MAX);
    c->nasks = c->open = 0;
    for (size_t i = 0; i < as.n && why == NULL; i++) {
        struct pending *q = pending_add(&s->r.pt, PENDING_TO_CLIENT, as.a[i].key, as.a[i].key_len,
                                        as.a[i].method, stream_id(st), util_now_ms());
        s->stats->requests[1][session_class(as.a[i].method)]++;
        char id[UTIL_U64_TEXT_MAX], head[ENVELOPE_HEAD_MAX];
        size_t idlen = relay_id_text(q, id);
        struct iovec iov[4];
        session_push(s, st, iov, envelope_question(&as.a[i], id, idlen, head, iov));
        c->asks[c->nasks++] = q->gw_id;
        c->open++;
    }
    envelope_asks_free(&as);
    if (why != NULL) {
        modern_fail(s, st, p, c, why);
        return;
    }
    log_info(s->id, "%s: input round %u, %zu questions to the client", p->method, c->rounds,
             c->nasks);
    if (c->open == 0) {
        modern_retry(s, st, p, c);
        return;
    }
    /* The client has input_hold_ms to answer (request_timeout_max_ms still bounds the whole). */
    relay_arm_timeout(&s->r, p, s->srv->input_hold_ms, s->srv->request_timeout_max_ms);
}

/* Every question answered: the request again, under a new id, with the answers. */
static void
modern_retry(struct session *s, struct stream *st, struct pending *p, struct modern_call *c)
{
    struct buf extra;
    buf_init(&extra, SIZE_MAX);
    int rc = envelope_retry_members(&c->answers, c->state, &extra);
    struct jsonrpc_info info;
    if (rc != 0 || jsonrpc_scan(c->body, c->len, &info, NULL) != JSONRPC_OK) {
        buf_clear(&extra);
        modern_fail(s, st, p, c, "the request could not be sent again");
        return;
    }
    p->gw_id = s->r.pt.next_id++;
    c->gw_id = p->gw_id;
    char id[24];
    size_t idlen = relay_id_text(p, id);
    rc = modern_send(s, c->body, c->len, &info, id, idlen, buf_head(&extra), buf_used(&extra));
    buf_clear(&extra);
    if (rc == -1) {
        modern_fail(s, st, p, c, "upstream server is not reading its input");
        return;
    }
    /* The hold's timer goes; the request's own, if any, from now (as for a request sent). */
    loop_timer_del(p->timer);
    p->timer = NULL;
    relay_arm_timeout(&s->r, p, s->srv->request_timeout_ms, s->srv->request_timeout_max_ms);
    log_debug(s->id, "%s sent again as child id %" PRIu64 " (round %u answered)", p->method,
              p->gw_id, c->rounds);
}

bool
session_modern_answer(struct session *s, struct stream *st, struct pending *p, const char *line,
                      size_t len, const struct jsonrpc_info *info)
{
    struct session_modern *m = s->modern;
    if (m == NULL || m->state != MODERN_ACTIVE)
        return false;
    struct modern_call *c = modern_call_of(m, p->gw_id);
    bool asks = info->kind == JSONRPC_RESULT && info->result_type.len == 16
                && memcmp(line + info->result_type.off, "\"input_required\"", 16) == 0;
    if (!asks) {
        if (c != NULL)
            modern_call_drop(s, c);
        return false;
    }
    if (c == NULL) {
        /* Not a tools/call, prompts/get or resources/read, or not held (past the bounds). */
        modern_fail(s, st, p, NULL,
                    "the server asked for input on a request the gateway does not hold for it");
        return true;
    }
    modern_round(s, st, p, c, line, len);
    return true;
}

bool
session_modern_client_answer(struct session *s, struct pending *q, const char *body,
                             const struct jsonrpc_info *info)
{
    struct session_modern *m = s->modern;
    if (m == NULL || m->state != MODERN_ACTIVE)
        return false;
    struct modern_call *c = NULL;
    size_t i = 0;
    for (c = m->calls; c != NULL; c = c->next) {
        for (i = 0; i < c->nasks && c->asks[i] != q->gw_id; i++)
            ;
        if (i < c->nasks)
            break;
    }
    if (c == NULL) {
        log_debug(s->id, "answer to a question no request waits for dropped");
        pending_del(&s->r.pt, q);
        return true;
    }
    struct pending *p = pending_find_gw(&s->r.pt, PENDING_TO_CHILD, c->gw_id);
    char method[PENDING_METHOD_MAX];
    snprintf(method, sizeof method, "%s", q->method);
    if (p == NULL || p->state != PENDING_FORWARDED) {
        modern_call_drop(s, c); /* q with it */
        return true;
    }
    struct stream *st = session_stream_by_id(s, p->stream_id);
    if (info->kind != JSONRPC_RESULT || info->result.len == 0) {
        char why[PENDING_METHOD_MAX + 64];
        snprintf(why, sizeof why, "the client answered the server's %s with an error", method);
        modern_fail(s, st, p, c, why);
        return true;
    }
    if (envelope_answer_add(&c->answers, q->orig_id, q->orig_id_len, body + info->result.off,
                            info->result.len)
        != 0) {
        modern_fail(s, st, p, c, "the client's answer could not be kept");
        return true;
    }
    c->asks[i] = 0;
    pending_del(&s->r.pt, q);
    if (--c->open == 0)
        modern_retry(s, st, p, c);
    return true;
}
