/* SPDX-License-Identifier: MIT */
/*
 * Sessions: the table, and the lifecycle of one session from session_create to session_reap, with
 * its one close path (session_close) and the janitor's sweep. One child per session. The layer's
 * other rooms: session_stream.c (a session's HTTP streams), session_route.c (every message between
 * client and child through the in-flight table), session_task.c (the child's tasks),
 * session_report.c (admin view, /metrics). Their shared state is in session_int.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "session_int.h"
#include "upstream.h"
#include "util.h"

struct session_globals sessions;

/* Method classes of the requests counter: the part of the method before '/'; "other" last. */
const char *const session_classes[SESSION_CLASS_N] = {
    "initialize", "ping",  "tools",    "resources",   "prompts", "completion",
    "logging",    "tasks", "sampling", "elicitation", "roots",   "other",
};

/* The modes' names (the label of mcpgw_sessions, "mode" in /admin/inflight). */
const char *const session_modes[SESSION_MODE_N] = { [SESSION_MODE_CHILD] = "child" };

/*
 * Why sessions end, indexed by enum session_end: the text (logs, the error answered to what was in
 * flight, the reason of the cancels sent to the child), the /metrics label, and the cancel reason
 * counted for each cancel. A child that is gone is sent nothing.
 */
const struct session_end_info session_ends[SESSION_END_N] = {
    [SESSION_END_DELETED] = { "session deleted", "deleted", RELAY_CANCEL_DELETED },
    [SESSION_END_EXPIRED] = { "session expired", "expired", RELAY_CANCEL_EXPIRED },
    [SESSION_END_DISCONNECTED] = { "client disconnected", "client_disconnected",
                                   RELAY_CANCEL_DISCONNECT },
    [SESSION_END_CHILD] = { "child ended", "child_exited", RELAY_CANCEL_CHILD },
    [SESSION_END_SHUTDOWN] = { "gateway shutting down", "shutdown", RELAY_CANCEL_SHUTDOWN },
    [SESSION_END_INIT] = { "initialize did not complete", "other", RELAY_CANCEL_OTHER },
    [SESSION_END_ADMIN] = { "ended by the operator", "admin", RELAY_CANCEL_ADMIN },
    [SESSION_END_TOKEN] = { "its token could not be renewed", "token_renewal", RELAY_CANCEL_OTHER },
};

size_t
session_class(const char *method)
{
    size_t n = strcspn(method, "/");
    for (size_t i = 0; i + 1 < SESSION_CLASS_N; i++)
        if (strlen(session_classes[i]) == n && memcmp(session_classes[i], method, n) == 0)
            return i;
    return SESSION_CLASS_N - 1;
}

/* --- the table --------------------------------------------------------------------------- */

void
session_module_init(struct loop *l, const struct config *cfg)
{
    sessions.l = l;
    session_set_config(cfg);
    sessions.nbuckets = 64;
    while (sessions.nbuckets < cfg->max_sessions && sessions.nbuckets < ((size_t)1 << 20))
        sessions.nbuckets *= 2;
    sessions.buckets = xcalloc(sessions.nbuckets, sizeof(*sessions.buckets));
    sessions.next_stream_id = 1;
}

void
session_set_auth(struct auth *a)
{
    sessions.auth = a;
}

void
session_set_config(const struct config *cfg)
{
    sessions.cfg = cfg;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        /* Its series exist before any traffic. */
        (void)session_server_of(cfg->servers[i].name);
        upstream_server_seen(cfg->servers[i].name);
    }
}

struct session_server *
session_server_of(const char *name)
{
    return metrics_row_of(&sessions.servers, name, sizeof(struct session_server));
}

bool
session_uses_config(const struct config *cfg)
{
    const struct config_server *lo = cfg->servers, *hi = cfg->servers + cfg->n_servers;
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext)
            if (s->srv >= lo && s->srv < hi)
                return true;
    return false;
}

void
session_module_free(void)
{
    free(sessions.buckets);
    sessions.buckets = NULL;
    sessions.nbuckets = 0;
    metrics_rows_free(&sessions.servers);
}

static size_t
session_hash(const char *id)
{
    return util_hash(id, strlen(id)) & (sessions.nbuckets - 1);
}

struct session *
session_find(const char *id)
{
    if (sessions.buckets == NULL || id == NULL)
        return NULL;
    for (struct session *s = sessions.buckets[session_hash(id)]; s != NULL; s = s->hnext)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

struct session *
session_lookup(const char *id, const struct config_server *srv, const struct auth_principal *owner,
               bool legacy)
{
    struct session *s = session_find(id);
    if (s == NULL || s->owner != owner || s->legacy != legacy || (legacy && s->get == NULL))
        return NULL;
    return s->srv == srv || strcmp(s->srv->name, srv->name) == 0 ? s : NULL;
}

const char *
session_id(const struct session *s)
{
    return s->id;
}

bool
session_initialized(const struct session *s)
{
    return s->init_gw_id != 0;
}

struct stream *
session_legacy_stream(struct session *s)
{
    return s->get;
}

const char *
session_server_name(const struct session *s)
{
    return s->srv->name;
}

void
session_set_client(struct session *s, const char *client)
{
    snprintf(s->client, sizeof(s->client), "%s", client != NULL ? client : "");
}

/* The session's label: the first 8 bytes of its id's SHA-256, in hex. */
static void
session_label(struct session *s)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char h[CRYPTO_SHA256_LEN];
    crypto_sha256(s->id, strlen(s->id), h);
    for (size_t i = 0; i < SESSION_LABEL_LEN / 2; i++) {
        s->label[2 * i] = hex[h[i] >> 4];
        s->label[2 * i + 1] = hex[h[i] & 15];
    }
    s->label[SESSION_LABEL_LEN] = '\0';
}

struct quota *
session_calls_quota(struct session *s)
{
    if (s->calls_quota == NULL)
        s->calls_quota = quota_pin(s->srv->name, s->owner->name);
    return s->calls_quota;
}

size_t
session_requests_in_flight(const struct session *s)
{
    return pending_active(&s->r.pt, PENDING_TO_CHILD);
}

size_t
session_count(void)
{
    return sessions.count;
}

const struct session_counters *
session_counters(void)
{
    struct session_counters *c = &sessions.ctr;
    c->late_dropped = c->timeouts = c->child_lines_invalid = c->notifications_dropped = 0;
    for (const struct session_server *r = (const struct session_server *)(void *)sessions.servers;
         r != NULL; r = METRICS_ROW_NEXT(r)) {
        c->late_dropped += r->late_dropped;
        c->timeouts += r->timeouts;
        c->child_lines_invalid += r->child_lines_invalid;
        c->notifications_dropped += r->notifications_dropped;
    }
    return c;
}

static void
session_unlink(struct session *s)
{
    struct session **pp = &sessions.buckets[session_hash(s->id)];
    while (*pp != NULL && *pp != s)
        pp = &(*pp)->hnext;
    if (*pp == s)
        *pp = s->hnext;
    sessions.count--;
    s->stats->open--;
}

void
session_touch(struct session *s)
{
    s->last_active_ms = util_now_ms();
}

/* --- lifecycle --------------------------------------------------------------------------- */

/*
 * Starts s's child: the server's environment, creds (the owner's, or NULL) and, with
 * token_exchange, the held token's newest value and its file; in the server's box with what s has
 * of its own. Both the first start and a wake (session_sleep.c) come here.
 */
struct upstream *
session_spawn(struct session *s, char **creds, const char **err)
{
    const struct config_server *srv = s->srv;
    size_t n = 0;
    while (creds != NULL && creds[n] != NULL)
        n++;
    char **extra = xcalloc(n + 3, sizeof(*extra)); /* creds' strings borrowed, the token's own */
    if (n > 0)
        memcpy(extra, creds, n * sizeof(*extra));
    if (s->tok != NULL)
        auth_held_env(s->tok, extra + n);
    char **envp = config_child_env(srv, "MCPGW_SESSION_LABEL", s->label, extra);
    for (size_t i = n; extra[i] != NULL; i++) { /* the token's copies, wiped */
        explicit_bzero(extra[i], strlen(extra[i]));
        free(extra[i]);
    }
    free(extra);
    struct sandbox_own own;
    bool own_failed;
    const struct sandbox_own *mine = session_token_own(s, &own, &own_failed);
    struct upstream_params up = {
        .argv = srv->argv,
        .envp = envp,
        .cwd = srv->cwd,
        .tag = s->id,
        .server = srv->name,
        .max_line_bytes = sessions.cfg->max_message_bytes,
        .stdin_max_bytes = sessions.cfg->stdin_queue_bytes,
        .stdin_grace_ms = sessions.cfg->child_stdin_grace_ms,
        .term_grace_ms = sessions.cfg->child_term_grace_ms,
        .sandbox = srv->box,
        .own = mine,
    };
    uint64_t t0 = util_now_us();
    struct upstream *u = own_failed ? NULL
                                    : upstream_spawn(sessions.l, &up, session_child_line,
                                                     session_child_gone, s, err);
    if (own_failed)
        *err = "the gateway cannot keep the exchanged token (its log says why)";
    metrics_observe(&s->stats->spawn, util_now_us() - t0);
    config_env_free(envp);
    return u;
}

struct session *
session_create(const struct config_server *srv, struct auth_principal *owner,
               const struct auth_claims *claims, int *status, const char **err)
{
    return session_create_exchanged(srv, owner, claims, NULL, NULL, status, err);
}

struct session *
session_create_exchanged(const struct config_server *srv, struct auth_principal *owner,
                         const struct auth_claims *claims, struct auth_exchanged *x,
                         const char *authorization, int *status, const char **err)
{
    if (srv->token_exchange && (x == NULL || x->status != AUTH_EXCHANGE_OK)) {
        *status = 500; /* never a child of such a server without its token */
        *err = "token_exchange: no exchanged token";
        return NULL;
    }
    if (sessions.draining) {
        *status = 503;
        *err = "gateway shutting down";
        return NULL;
    }
    if (sessions.count >= sessions.cfg->max_sessions) {
        *status = 503;
        *err = "too many sessions";
        return NULL;
    }
    if (!quota_fits(QUOTA_GATEWAY, owner->name, QUOTA_SESSIONS,
                    sessions.cfg->auth.max_sessions_per_principal)) {
        *status = 429;
        *err = "too many sessions for this principal (max_sessions_per_principal)";
        return NULL;
    }
    char **creds = NULL;
    if (config_server_per_principal(srv)
        && (*err = auth_child_credentials(srv, owner->name, claims, "new session", &creds, status))
               != NULL)
        return NULL;
    struct session *s = xcalloc(1, sizeof(*s));
    if (crypto_session_id(sessions.cfg->instance_id, s->id) == -1) {
        config_env_free(creds);
        free(s);
        *status = 500;
        *err = "no randomness for a session id";
        return NULL;
    }
    session_label(s);
    s->mode = SESSION_MODE_CHILD;
    s->created_unix_ms = util_now_unix_ms();
    relay_init(&s->r, sessions.l, s->id, srv->name, session_relay_send, &session_relay_ops, s);
    msgq_init(&s->backlog);
    msgq_init(&s->wakeq);
    s->srv = srv;
    s->stats = session_server_of(srv->name);
    s->r.invalid = &s->stats->child_lines_invalid;
    s->r.late = &s->stats->late_dropped;
    if (srv->token_exchange) {
        /* The child's token variables are made by session_spawn from the held token. */
        char **tenv = xcalloc(3, sizeof(*tenv));
        *err = session_token_open(s, x, authorization, tenv);
        config_env_free(tenv);
        if (*err != NULL) {
            config_env_free(creds);
            session_token_close(s);
            free(s);
            *status = 500;
            return NULL;
        }
    }
    s->u = session_spawn(s, creds, err);
    /* A child that may sleep is started again with the same credentials (session_sleep.c). */
    if (s->u != NULL && srv->child_sleep_after_s > 0)
        s->creds = creds;
    else
        config_env_free(creds);
    if (s->u == NULL) {
        relay_start_failed(s->r.stats, *err, false);
        session_token_close(s);
        free(s);
        *status = 500;
        if (*err == upstream_no_fds) {
            /* Passing: sessions that end give their descriptors back (deploy/README.md, "File
             * limits"). */
            *status = 503;
            log_warn(NULL, "new session refused: %s (%zu sessions open)", *err, sessions.count);
        }
        return NULL;
    }
    size_t h = session_hash(s->id);
    s->hnext = sessions.buckets[h];
    sessions.buckets[h] = s;
    sessions.count++;
    sessions.ctr.created++;
    s->stats->open++;
    s->stats->created++;
    s->owner = auth_principal_ref(owner);
    s->quota = quota_take(QUOTA_GATEWAY, owner->name, QUOTA_SESSIONS, 1);
    session_touch(s);
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)upstream_pid(s->u));
    const struct log_field f[] = { { "server", srv->name, false },
                                   { "child", pid, true },
                                   { "principal", owner->name, false },
                                   { "session_label", s->label, false } };
    log_fields(LOG_INFO, s->id, f, ARRAY_LEN(f),
               "session created: server=%s child=%s owner=%s label=%s", srv->name, pid, owner->name,
               s->label);
    audit_event("session_start", owner->name, srv->name, s->id, 0, NULL, NULL, NULL);
    session_token_start(s);
    return s;
}

/*
 * The one way a session ends, whatever the reason. What is in flight is cancelled at the child
 * (when it is still there) and answered to the client with an error; streams end; the child goes
 * through its stop ladder after the queued cancels are written. The struct stays valid, CLOSED,
 * until session_reap at the end of the turn: a caller whose flow may have closed it checks the
 * state, never a freed pointer.
 */
void
session_close(struct session *s, enum session_end why, const char *detail)
{
    if (s->state == SESSION_CLOSED)
        return;
    const char *reason = detail != NULL ? detail : session_ends[why].text;
    /* A child that failed its initialize, or ended before it, is a failed start of its server. */
    if (why == SESSION_END_INIT || (why == SESSION_END_CHILD && s->state == SESSION_INITIALIZING))
        relay_start_failed(s->r.stats, reason, false);
    s->state = SESSION_CLOSED;
    relay_end(&s->r); /* nothing more of the child's reaches s */
    session_unlink(s);
    bool child_alive = why != SESSION_END_CHILD;
    char message[160];
    snprintf(message, sizeof(message), "session ended: %s", reason);
    unsigned cancelled = 0;
    for (struct pending *p = s->r.pt.head; p != NULL; p = p->next) {
        if (p->dir != PENDING_TO_CHILD || p->state != PENDING_FORWARDED)
            continue;
        if (child_alive && p->gw_id != s->init_gw_id) {
            relay_cancel(&s->r, p, session_ends[why].cancel);
            cancelled++;
        } else if (!child_alive) {
            relay_count(s->r.stats, RELAY_CANCEL_CHILD); /* ended with it: nothing to send */
            relay_audit_cancel(p, RELAY_CANCEL_CHILD);
        }
        struct stream *st = session_stream_by_id(s, p->stream_id);
        if (st != NULL)
            session_push_error(s, st, p, message);
    }
    relay_clear(&s->r);
    while (s->streams != NULL) {
        struct stream *st = s->streams;
        stream_end(st);
        session_stream_remove(s, st);
    }
    msgq_clear(&s->backlog);
    session_tasks_clear(s);
    session_sleep_close(s, why);
    session_modern_free(s);
    upstream_close(s->u, reason);
    s->u = NULL;
    session_token_close(s);
    quota_give(s->quota, QUOTA_SESSIONS, 1);
    s->quota = NULL;
    quota_unpin(s->calls_quota); /* its requests' counts are given back with their entries */
    s->calls_quota = NULL;
    if (audit_on())
        audit_event("session_end", s->owner != NULL ? s->owner->name : NULL,
                    s->srv != NULL ? s->srv->name : NULL, s->id, 0, session_ends[why].label, NULL,
                    NULL);
    auth_principal_unref(s->owner);
    s->owner = NULL;
    sessions.ctr.closed++;
    s->stats->closed_by[why]++;
    const struct log_field f[] = { { "server", s->srv != NULL ? s->srv->name : NULL, false },
                                   { "reason", reason, false } };
    log_fields(LOG_INFO, s->id, f, ARRAY_LEN(f),
               "session closed: %s (%u in-flight requests cancelled)", reason, cancelled);
    s->gnext = sessions.graveyard;
    sessions.graveyard = s;
}

void
session_close_all(enum session_end why)
{
    for (size_t i = 0; i < sessions.nbuckets; i++)
        while (sessions.buckets[i] != NULL)
            session_close(sessions.buckets[i], why, NULL);
}

void
session_reap(void)
{
    while (sessions.graveyard != NULL) {
        struct session *s = sessions.graveyard;
        sessions.graveyard = s->gnext;
        free(s);
    }
}

void
session_sweep(uint64_t now_ms)
{
    uint64_t hb = sessions.cfg->heartbeat_s * 1000u;
    uint64_t idle = sessions.cfg->session_idle_timeout_s * 1000u;
    for (size_t i = 0; i < sessions.nbuckets; i++) {
        struct session *s = sessions.buckets[i];
        while (s != NULL) {
            struct session *next = s->hnext;
            bool read = false;
            for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next) {
                read |= stream_own(st)->attached;
                if (stream_own(st)->attached && now_ms - stream_last_push_ms(st) >= hb)
                    stream_push_heartbeat(st);
            }
            session_retire(s, now_ms);
            struct pending *p = s->r.pt.head;
            bool tasks = false;
            while (p != NULL) {
                struct pending *pn = p->next;
                tasks |= p->task && p->state == PENDING_FORWARDED;
                if (p->state == PENDING_CANCELLED
                    && now_ms - p->cancelled_ms >= SESSION_CANCEL_LINGER_MS)
                    pending_del(&s->r.pt, p);
                p = pn;
            }
            /*
             * Idle: no connection reads any of its streams, and none did for the idle timeout. A
             * request whose client left (a stream waiting for a resume) does not keep it; a
             * task-augmented request, or a task of the child's not yet terminal (within its
             * ttl) does: tasks outlive connections.
             */
            tasks |= session_tasks_alive(s, now_ms);
            if (!read && !tasks && now_ms - s->last_active_ms >= idle)
                session_close(s, SESSION_END_EXPIRED, NULL);
            else
                session_sleep_check(s, now_ms, tasks);
            s = next;
        }
    }
}

/* --- draining and /metrics --------------------------------------------------------------- */

void
session_drain(void)
{
    sessions.draining = true;
}

bool
session_draining(void)
{
    return sessions.draining;
}

size_t
session_inflight_in(const struct session *s, enum pending_dir dir)
{
    size_t n = pending_active(&s->r.pt, dir);
    /*
     * An initialize whose client left is waited for by no one: a drain does not wait for it (the
     * session would be useless to its client anyway).
     */
    const struct pending *p =
        s->state == SESSION_INITIALIZING && dir == PENDING_TO_CHILD && s->init_gw_id != 0
            ? pending_find_gw(&s->r.pt, PENDING_TO_CHILD, s->init_gw_id)
            : NULL;
    if (p != NULL && p->state == PENDING_FORWARDED) {
        struct stream *st = session_stream_by_id(s, p->stream_id);
        n -= st == NULL || !stream_own(st)->attached;
    }
    return n;
}

size_t
session_inflight(enum pending_dir dir)
{
    size_t n = 0;
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext)
            n += session_inflight_in(s, dir);
    return n;
}
