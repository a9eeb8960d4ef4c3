/* SPDX-License-Identifier: MIT */
/*
 * A pool child's start (pool_int.h), from its first message to ready: the probe (server/discover
 * naming a stateless revision) or the initialize it is sent, the start timeout, the probe's
 * verdict (the era and the stateless revisions the pool's children speak) and the initialize's
 * answer of a legacy child; before it, the spawn itself (pool_child_start) under the restart
 * budget and the backoff after failed starts. pool.c owns what follows.
 */
#include <stdint.h>
#include <stdlib.h>

#include "log.h"
#include "pool_int.h"
#include "version.h"

/*
 * Sends the probe (era unknown) or the initialize (legacy) of a starting child. The probe names
 * c->probe_rev: the newest stateless row first, older ones after a refusal that listed nothing
 * (pool_child_start_answer).
 */
int
pool_child_hello(struct pool_child *c)
{
    struct pool *p = c->pool;
    c->probing = p->era == CONFIG_ERA_AUTO;
    if (c->probing && c->probe_rev == NULL)
        c->probe_rev = revision_newest(REVISION_STATELESS);
    struct pending *e =
        pending_add(&c->r.pt, PENDING_TO_CHILD, "0", 1,
                    c->probing ? "server/discover" : "initialize", 0, util_now_ms());
    c->start_id = e->gw_id;
    size_t len;
    char *m = c->probing
                  ? jsonrpc_probe_new(e->gw_id, c->probe_rev->name, MCPGW_VERSION, &len)
                  : jsonrpc_initialize_new(e->gw_id, revision_newest(REVISION_STREAMABLE)->name,
                                           MCPGW_VERSION, &len);
    struct iovec iov[2] = { { m, len }, { (void *)(uintptr_t) "\n", 1 } };
    int rc = pool_send(c, iov, 2);
    free(m);
    log_debug(c->tag, "%s sent%s%s", c->probing ? "server/discover probe" : "initialize",
              c->probing ? " for " : "", c->probing ? c->probe_rev->name : "");
    return rc;
}

/*
 * Children of one pool are started, and probed, side by side: the first verdict is the pool's era,
 * and a child that answers the other way afterwards (a legacy refusal or silence where another
 * child served the stateless revision, or the reverse) is not of this server as the pool knows it.
 * It is retired rather than let the pool's era flip under children already serving the first.
 */
#define POOL_ERA_CONTRADICTED                                                                      \
    "its server/discover answer contradicts the era the pool's first child showed"

void
pool_start_timeout(void *arg)
{
    struct pool_child *c = arg;
    c->timer = NULL;
    if (c->state != POOL_CHILD_STARTING)
        return;
    if (c->probing) {
        /* Silence is a legacy server's answer too: initialize the same child. */
        if (c->pool->era == CONFIG_ERA_STATELESS) {
            pool_child_retire(c, POOL_ERA_CONTRADICTED, true);
            return;
        }
        log_info(c->tag, "no answer to server/discover: the server is legacy (initialize-based)");
        c->pool->era = CONFIG_ERA_LEGACY;
        c->pool->speaks = revision_set_over(REVISION_STATELESS);
        struct pending *probe = pending_find_gw(&c->r.pt, PENDING_TO_CHILD, c->start_id);
        if (probe != NULL)
            pending_del(&c->r.pt, probe);
        if (pool_child_hello(c) == 0) {
            c->timer =
                loop_timer_add(pools.l, c->pool->srv->pool_start_timeout_ms, pool_start_timeout, c);
            return;
        }
    }
    pool_child_retire(c, "did not answer its initialize within pool_start_timeout_ms", true);
}

/* --- a child's start: the probe's verdict, the initialize ----------------------------------- */

/*
 * The probe's answer. The versions it lists (a result's supportedVersions, or the list of an
 * unsupported-version error: a stateless server that does not speak the probe's revision) that are
 * stateless rows of the table are what the pool's children speak. A stateless server's refusal that
 * lists nothing is asked again with the next older stateless row, at most once per row. A list with
 * no row the gateway knows breaks the pool. Any other error means legacy (never key this on one
 * code: legacy servers refuse an unknown method in many ways); initialize the same child.
 */
static void
pool_probe_verdict(struct pool_child *c, const char *line, size_t len,
                   const struct jsonrpc_info *info)
{
    struct pool *p = c->pool;
    uint32_t speaks = 0;
    bool listed = jsonrpc_discover_versions(line, len, revision_seen_stateless, &speaks);
    int code = 0;
    if (info->kind == JSONRPC_ERROR && !listed && jsonrpc_error_code(line, len, &code) != 0)
        code = 0;
    bool refused = info->kind == JSONRPC_ERROR && (listed || code == JSONRPC_UNSUPPORTED_VERSION);
    if (speaks != 0) {
        if (p->era == CONFIG_ERA_LEGACY) {
            pool_child_retire(c, POOL_ERA_CONTRADICTED, true);
            return;
        }
        char text[128];
        revision_set_text(speaks, text, sizeof text);
        log_info(c->tag, "server/discover %s: the server serves %s",
                 refused ? "refused the probe's version" : "answered", text);
        p->era = CONFIG_ERA_STATELESS;
        p->speaks = speaks;
        if (info->kind == JSONRPC_RESULT && p->srv->session_pooled)
            pool_session_listen_caps(p, line, len); /* what pooled sessions may listen for */
        pool_child_ready(c);
        return;
    }
    if (info->kind == JSONRPC_RESULT || (refused && listed)) {
        /* A stateless server of other versions only: nothing to serve stateless clients with. */
        pool_break(c, "server/discover lists no version the gateway serves");
        return;
    }
    if (refused) {
        const struct revision *older = revision_older(c->probe_rev, REVISION_STATELESS);
        if (older == NULL) {
            pool_break(c, "server/discover refused every stateless version the gateway serves");
            return;
        }
        log_info(c->tag, "server/discover refused %s without a list: asking for %s",
                 c->probe_rev->name, older->name);
        c->probe_rev = older;
    } else if (p->era == CONFIG_ERA_STATELESS) {
        pool_child_retire(c, POOL_ERA_CONTRADICTED, true);
        return;
    } else {
        log_info(c->tag, "server/discover refused: the server is legacy (initialize-based)");
        p->era = CONFIG_ERA_LEGACY;
        p->speaks = revision_set_over(REVISION_STATELESS);
    }
    if (pool_child_hello(c) == -1) {
        pool_child_retire(c, "its stdin refused the next start message", true);
        return;
    }
    c->timer = loop_timer_add(pools.l, p->srv->pool_start_timeout_ms, pool_start_timeout, c);
}

void
pool_child_start_answer(struct pool_child *c, const char *line, size_t len,
                        const struct jsonrpc_info *info)
{
    struct pool *p = c->pool;
    struct pending *e = pending_find_gw(&c->r.pt, PENDING_TO_CHILD, c->start_id);
    if (e != NULL)
        pending_del(&c->r.pt, e);
    c->start_id = 0;
    loop_timer_del(c->timer);
    c->timer = NULL;
    if (c->probing) {
        pool_probe_verdict(c, line, len, info);
        return;
    }
    size_t dlen = 0;
    char *d = info->kind == JSONRPC_RESULT
                  ? jsonrpc_discover_from_init(line, len, revision_names(REVISION_STATELESS),
                                               p->srv->cache_ttl_ms, p->srv->cache_public, &dlen)
                  : NULL;
    if (d == NULL) {
        pool_child_retire(c, "initialize refused", true);
        return;
    }
    free(p->discover);
    p->discover = d;
    p->discover_len = dlen;
    if (p->srv->session_pooled) {
        /* What a pooled session's initialize is answered with (pool_session.c). */
        size_t mlen = 0;
        char *m =
            jsonrpc_init_members(line, len, true, p->init_version, sizeof p->init_version, &mlen);
        if (m != NULL) {
            free(p->init_members);
            p->init_members = m;
            p->init_members_len = mlen;
        }
    }
    p->listen_caps = jsonrpc_listen_caps(line, len);
    static const char initialized[] =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    struct iovec iov = { (void *)(uintptr_t)initialized, sizeof initialized - 1 };
    if (pool_send(c, &iov, 1) == -1) {
        pool_child_retire(c, "its stdin refused notifications/initialized", true);
        return;
    }
    pool_child_ready(c);
}

/* The restart budget: true when another start is allowed now (and counts it). */
static bool
pool_budget(struct pool *p, uint64_t now)
{
    if (now >= p->fail_until_ms)
        return true;
    if (now - p->window_ms >= 60000) {
        p->window_ms = now;
        p->restarts = 0;
    }
    if (p->restarts >= p->srv->pool_max_restarts_per_min)
        return false;
    p->restarts++;
    return true;
}

/*
 * A child failed (why). A failed start (failed_start: it died or failed before it answered
 * anything) is retried at once the first time, so that one child lost while it started (killed,
 * say) costs the requests waiting for it nothing; from the second in a row the next start waits,
 * twice as long as after the one before (POOL_BACKOFF_MIN_MS up to POOL_BACKOFF_MAX_MS). Its
 * server's state says so either way. A child that had served is replaced at once; should its
 * replacement fail, the backoff starts from the bottom.
 */
void
pool_start_failed(struct pool *p, const char *why, bool failed_start)
{
    uint64_t now = util_now_ms();
    p->fail_until_ms = now + 60000;
    if (!failed_start) {
        p->backoff_ms = 0;
        p->next_start_ms = 0;
        p->starts_failed = 0;
        return;
    }
    /* The server's state is its current pool's: a retired pool's children say nothing of it. */
    if (!p->retired)
        relay_start_failed(p->stats, why, false);
    if (++p->starts_failed == 1)
        return; /* the first in a row: at once */
    p->backoff_ms = p->backoff_ms == 0                        ? POOL_BACKOFF_MIN_MS
                    : p->backoff_ms * 2 < POOL_BACKOFF_MAX_MS ? p->backoff_ms * 2
                                                              : POOL_BACKOFF_MAX_MS;
    p->next_start_ms = now + p->backoff_ms;
}

void
pool_start_ok(struct pool *p)
{
    p->backoff_ms = 0;
    p->next_start_ms = 0;
    p->starts_failed = 0;
    if (!p->retired)
        relay_start_ok(p->stats);
}

struct pool_child *
pool_child_start(struct pool *p)
{
    uint64_t now = util_now_ms();
    if (p->key != NULL)
        p->key->refused = NULL;
    if (now < p->next_start_ms)
        return NULL; /* backing off: pool_sweep starts it once the wait is over */
    /* A principal's child: its credentials now (credentials_dir read again), or a refusal. */
    char **extra = NULL;
    if (p->key != NULL && (extra = pool_principal_env(p)) == NULL)
        return NULL;
    if (!pool_budget(p, now)) {
        config_env_free(extra);
        char note[80];
        if (log_limit_note(&p->budget_log, now, POOL_LOG_REPEAT_MS, note, sizeof(note)) != NULL)
            log_warn(NULL, "pool %s: not starting a child: pool_max_restarts_per_min reached%s",
                     p->name, note);
        return NULL;
    }
    struct pool_child *c = xcalloc(1, sizeof(*c));
    c->pool = p;
    snprintf(c->tag, sizeof(c->tag), "pool:%s#%u", p->name, ++pools.next_child_no);
    relay_init(&c->r, pools.l, c->tag, p->name, pool_relay_send, &pool_relay_ops, c);
    c->r.send_control = pool_relay_send_control; /* cancels: never lost to a full stdin */
    c->r.minted_tokens = true; /* a request's progress token goes as its minted id */
    c->r.invalid = &p->row->ctr.child_lines_invalid;
    c->r.late = &p->row->ctr.late_dropped;
    c->r.unattributed = &p->row->ctr.unattributed;
    char **envp = config_child_env(p->srv, "MCPGW_POOL", c->tag, extra);
    config_env_free(extra);
    struct sandbox_own own;
    bool own_failed;
    const struct sandbox_own *mine = pool_principal_own(p, &own, &own_failed);
    struct upstream_params up = {
        .argv = p->srv->argv,
        .envp = envp,
        .cwd = p->srv->cwd,
        .tag = c->tag,
        .server = p->srv->name,
        .max_line_bytes = pools.cfg->max_message_bytes,
        .stdin_max_bytes = pools.cfg->stdin_queue_bytes,
        .stdin_reserve_bytes = (p->srv->pool_child_max_inflight + 1) * POOL_CONTROL_BYTES,
        .stdin_grace_ms = pools.cfg->child_stdin_grace_ms,
        .term_grace_ms = pools.cfg->child_term_grace_ms,
        .sandbox = p->srv->box,
        .own = mine,
    };
    const char *err = "spawn failed";
    if (own_failed)
        err = "the gateway cannot keep the exchanged token (its log says why)";
    else
        c->u = upstream_spawn(pools.l, &up, pool_child_line, pool_child_gone, c, &err);
    config_env_free(envp);
    if (c->u == NULL) {
        char note[80];
        if (log_limit_note(&p->fail_log, now, POOL_LOG_REPEAT_MS, note, sizeof(note)) != NULL)
            log_warn(NULL, "pool %s: cannot start a child: %s%s", p->name, err, note);
        p->row->ctr.start_failed++;
        pool_start_failed(p, err, true);
        free(c);
        return NULL;
    }
    p->row->ctr.spawned++;
    c->next = p->children;
    if (p->children != NULL)
        p->children->prev = c;
    p->children = c;
    p->n_children++;
    c->idle_since_ms = now;
    c->used_seq = ++pools.use_seq;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)upstream_pid(c->u));
    const struct log_field f[] = { { "server", p->name, false }, { "child", pid, true } };
    log_fields(LOG_INFO, c->tag, f, ARRAY_LEN(f), "pool child started: pid %s", pid);
    if (p->era == CONFIG_ERA_STATELESS) {
        c->state = POOL_CHILD_READY;
        pool_child_ready(c);
        return c;
    }
    c->state = POOL_CHILD_STARTING;
    p->n_starting++;
    if (pool_child_hello(c) == -1) {
        pool_child_retire(c, "its stdin refused the first message", true);
        return NULL;
    }
    c->timer = loop_timer_add(pools.l, p->srv->pool_start_timeout_ms, pool_start_timeout, c);
    return c;
}
