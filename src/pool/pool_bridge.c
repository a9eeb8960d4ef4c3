/* SPDX-License-Identifier: MIT */
/*
 * Input rounds (multi round-trip requests) for legacy children. A stateless server never sends the
 * client a request; a legacy child does (elicitation/create, sampling/createMessage, roots/list)
 * and waits for the answer. While a pool child serves a stateless request, such a request of its
 * becomes one question of an input_required answer to that client:
 *   {"resultType":"input_required","inputRequests":{"r1":{"method":…,"params":…}},
 *    "requestState":"mcpgw1.…"}
 * and the child's call is held. The client answers the questions and sends the same request
 * again with a new id, inputResponses and the requestState: each answer goes to the child as the
 * result of its request, and the held call goes on, on the retry's stream, where its own answer
 * arrives, or the next round (multi-round). A retry that leaves a question unanswered is asked it
 * again.
 *
 * Attribution is exact: a child's request becomes a question only when exactly one client request
 * (of any method) is in flight on that child and it is one that may answer input_required
 * (tools/call, prompts/get, resources/read); any other is answered to the child with an error
 * that says why, and counted. So is a question the request's own _meta did not declare the
 * capability for, or one past POOL_ASKS_MAX.
 *
 * The lease. The calls in flight on a child when it asks are the ones that may ask again (the
 * asking one's next round, say): each is marked (asker), and while one of them is in flight there
 * the child serves one request at a time (pool_child_cap: pool.c picks no other request for it),
 * so their later questions stay attributable. Once none is (answered, cancelled, failed, or its
 * answer kept for a held retry), the child takes pool_child_max_inflight at once again: nothing
 * that asked can ask any more, and a question of a later call is attributed by the rule above
 * whatever the lease did, so the lease's end cannot make it go to the wrong call. What it costs:
 * a call that asks while it shares its child has that question refused ("cannot tell which").
 *
 * The fence. After any request on a legacy child is cancelled, a question the child wrote before
 * it read the cancel may still arrive, and would look like the next call's. So the cancel is
 * followed by a ping (the fence), and until the ping is answered (or given up after
 * POOL_CANCEL_LINGER_MS) the child gets no new request at all (pool.c). Every question written
 * before the child read the cancel arrives before the ping's answer, since the child reads the
 * cancel first; a question of a request sent after the ping might too (a child may answer its ping
 * after a handler it started later has asked), which is why none is sent. So a question that
 * arrives while the fence is out belongs to the cancelled request or to one that was in flight
 * beside it: never to a request that came later, and waiting for the fence could not tell which. It
 * is refused at once, with that reason: "the request that asked it was cancelled" when nothing else
 * is in flight, "cannot tell which" when something is.
 *
 * The fence must never be lost: a fenced child with no ping out would take no request again. So the
 * cancel and the ping are control messages (pool_send_control): they are queued for the child's
 * stdin in room past stdin_queue_bytes that the clients' requests cannot take (POOL_CONTROL_BYTES
 * for each request the child may have in flight, and one more), so a stdin queue clients filled
 * still takes them, behind what it holds, and the child reads them when it reads on. Each request
 * is cancelled at most once and no request is queued while the queue is past its ceiling, so that
 * room is enough; a child that leaves even it unread has stopped reading its stdin and is retired
 * (its calls end with an error, it is replaced), as is one whose stdin is closed: never kept
 * fenced.
 *
 * requestState is attacker-controlled: "mcpgw1." base64url(held id 16 | expiry ms 8 | round 4 |
 * SHA-256 of server, principal, method and name 32) "." base64url(HMAC-SHA-256 of what precedes,
 * with the key of state_key_file or a random one). A retry is refused (400 -32602, nothing
 * reaches the child) when the MAC, the expiry, the binding (the same principal, server, method
 * and name) or the round do not match, or no call is held under that id here: replayed,
 * expired, or held by another instance. A held call waits input_hold_ms, then it is cancelled at
 * the child and its questions answered with an error, like one whose client goes away.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crypto.h"
#include "log.h"
#include "pool_int.h"

#define POOL_STATE_PREFIX "mcpgw1."
#define POOL_STATE_RAW    60 /* id 16, expiry 8, round 4, binding 32 */

/* --- the key ------------------------------------------------------------------------------ */

int
pool_load_key(const struct config *cfg, char *err, size_t errlen)
{
    unsigned char key[sizeof pools.key];
    size_t n = 32;
    if (cfg->state_key_file == NULL) {
        if (pools.key_len > 0)
            return 0; /* a random key made earlier stays: held rounds stay valid */
        if (crypto_random(key, n) == -1) {
            snprintf(err, errlen, "state_key_file: no randomness for a random key");
            return -1;
        }
    } else {
        int fd = open(cfg->state_key_file, O_RDONLY | O_CLOEXEC);
        char why[1024];
        const char *unsafe =
            fd == -1 ? NULL : util_file_unsafe(fd, cfg->state_key_file, true, why, sizeof why);
        if (unsafe != NULL) {
            close(fd);
            snprintf(err, errlen, "state_key_file %s", unsafe);
            return -1;
        }
        ssize_t got = fd == -1 ? -1 : read(fd, key, sizeof key);
        char extra;
        bool more = got == (ssize_t)sizeof key && read(fd, &extra, 1) == 1;
        int e = errno;
        if (fd != -1)
            close(fd);
        if (got < 0) {
            snprintf(err, errlen, "state_key_file %s: %s", cfg->state_key_file, strerror(e));
            return -1;
        }
        if (got < 32 || more) {
            snprintf(err, errlen, "state_key_file %s: must hold 32..4096 bytes",
                     cfg->state_key_file);
            return -1;
        }
        n = (size_t)got;
    }
    memcpy(pools.key, key, n);
    pools.key_len = n;
    crypto_cleanse(key, sizeof key);
    return 0;
}

/* --- sealing -------------------------------------------------------------------------------- */

static void
pool_binding(const char *server, const char *principal, const char *method, const char *name,
             unsigned char out[CRYPTO_SHA256_LEN])
{
    size_t ls = strlen(server) + 1, lp = strlen(principal) + 1, lm = strlen(method) + 1,
           ln = strlen(name) + 1;
    char *b = xmalloc(ls + lp + lm + ln);
    memcpy(b, server, ls);
    memcpy(b + ls, principal, lp);
    memcpy(b + ls + lp, method, lm);
    memcpy(b + ls + lp + lm, name, ln);
    crypto_sha256(b, ls + lp + lm + ln, out);
    free(b);
}

/* The call's requestState for its current round, into out (room for 192 bytes). */
static void
pool_seal(const struct pool_call *call, char *out)
{
    unsigned char raw[POOL_STATE_RAW];
    memcpy(raw, call->held_id, 16);
    util_put_be(raw + 16, call->hold_until_ms, 8);
    util_put_be(raw + 24, call->round, 4);
    pool_binding(call->pool->name, call->principal, call->method, call->name, raw + 28);
    size_t o = (size_t)snprintf(out, 16, "%s", POOL_STATE_PREFIX);
    o += util_base64url_encode(raw, sizeof raw, out + o);
    unsigned char mac[CRYPTO_SHA256_LEN];
    if (crypto_hmac_sha256(pools.key, pools.key_len, out, o, mac) == -1)
        memset(mac, 0, sizeof mac); /* cannot happen; such a state never verifies */
    out[o++] = '.';
    util_base64url_encode(mac, sizeof mac, out + o);
}

bool
pool_bridge_ours(const char *body, struct jsonrpc_span sp)
{
    return sp.len > sizeof POOL_STATE_PREFIX
           && memcmp(body + sp.off + 1, POOL_STATE_PREFIX, sizeof POOL_STATE_PREFIX - 1) == 0;
}

/*
 * The payload (POOL_STATE_RAW bytes into raw, room for 64) of the requestState at sp, when the
 * gateway sealed it with its key and it has not expired; false with *why otherwise.
 */
static bool
pool_state_open(const char *body, struct jsonrpc_span sp, unsigned char *raw, const char **why)
{
    char state[256];
    size_t n;
    *why = "requestState is not one this gateway issued";
    if (!jsonrpc_string_at(body, sp, state, sizeof(state), &n))
        return false;
    char *dot = strrchr(state, '.');
    size_t plen = sizeof POOL_STATE_PREFIX - 1;
    if (dot == NULL || (size_t)(dot - state) <= plen)
        return false;
    unsigned char mac[64], want[CRYPTO_SHA256_LEN];
    /* Both parts are the client's: bounded by the buffers, a longer one does not verify. */
    long maclen = util_base64url_decode(dot + 1, strlen(dot + 1), mac, sizeof mac);
    long rawlen = util_base64url_decode(state + plen, (size_t)(dot - state) - plen, raw, 64);
    if (maclen != CRYPTO_SHA256_LEN || rawlen != POOL_STATE_RAW
        || crypto_hmac_sha256(pools.key, pools.key_len, state, (size_t)(dot - state), want) == -1
        || !crypto_equal(mac, want, sizeof want)) {
        *why = "requestState does not verify (tampered, or sealed with another key)";
        return false;
    }
    if (util_get_be(raw + 16, 8) < util_now_ms()) {
        *why = "requestState has expired (input_hold_ms)";
        return false;
    }
    return true;
}

bool
pool_bridge_sealed(const char *body, struct jsonrpc_span sp)
{
    unsigned char raw[64];
    const char *why;
    return pool_bridge_ours(body, sp) && pool_state_open(body, sp, raw, &why);
}

/* Opens a requestState; NULL when it is not one this gateway sealed, with *why. */
static struct pool_call *
pool_unseal(const struct pool *p, const char *body, const struct jsonrpc_info *info,
            const struct pool_meta *meta, const char **why)
{
    unsigned char raw[64];
    if (!pool_state_open(body, info->request_state, raw, why))
        return NULL;
    struct pool_call *call = pools.held;
    while (call != NULL && memcmp(call->held_id, raw, 16) != 0)
        call = call->hnext;
    /*
     * Held here, or by the pool of this server a reload retired (it ends the calls it has, its
     * held ones included: the call goes on there, under the definition it started with).
     */
    if (call == NULL
        || (call->pool != p && !(call->pool->retired && strcmp(call->pool->name, p->name) == 0))) {
        *why = "requestState names no call held here: already used, ended, or held by another "
               "gateway instance (keep a client on one instance: deploy/README.md, step 10)";
        return NULL;
    }
    char name[1024] = "";
    struct jsonrpc_span field =
        strcmp(info->method, "resources/read") == 0 ? info->uri : info->name;
    if (field.len > 0 && !jsonrpc_string_at(body, field, name, sizeof(name), NULL))
        name[0] = '\0';
    unsigned char bind[CRYPTO_SHA256_LEN];
    pool_binding(p->name, meta->principal != NULL ? meta->principal : "", info->method, name, bind);
    if (!crypto_equal(bind, raw + 28, sizeof bind)) {
        *why = "requestState belongs to another request (principal, server, method or name)";
        return NULL;
    }
    if (util_get_be(raw + 24, 4) != call->round) {
        *why = "requestState was already used (a round is answered once)";
        return NULL;
    }
    return call;
}

/* --- the round ---------------------------------------------------------------------------- */

static const char *const pool_ask_methods[][2] = {
    { "elicitation/create", "elicitation" },
    { "sampling/createMessage", "sampling" },
    { "roots/list", "roots" },
};

/*
 * The capability a method needs, with its bit (pool_caps_declared), or NULL (bit 0) when it is not
 * a question that can be bridged.
 */
static const char *
pool_ask_capability(const char *method, unsigned *bit)
{
    for (size_t i = 0; i < ARRAY_LEN(pool_ask_methods); i++)
        if (strcmp(method, pool_ask_methods[i][0]) == 0) {
            *bit = 1u << i;
            return pool_ask_methods[i][1];
        }
    *bit = 0;
    return NULL;
}

/*
 * The bridgeable capabilities the clientCapabilities object at sp declares: bit i for
 * pool_ask_methods[i]. Read with the scanner (no allocation: every call to a legacy pool comes by).
 */
unsigned
pool_caps_declared(const char *body, struct jsonrpc_span sp)
{
    unsigned bits = 0;
    for (size_t i = 0; i < ARRAY_LEN(pool_ask_methods); i++) {
        struct jsonrpc_span v;
        if (jsonrpc_member_at(body, sp, pool_ask_methods[i][1], &v) == 0 && v.len != 0)
            bits |= 1u << i;
    }
    return bits;
}

/* Methods whose answer may be input_required. */
static bool
pool_may_ask(const char *method)
{
    return strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0
           || strcmp(method, "resources/read") == 0;
}

void
pool_bridge_note(struct pool_call *call, const char *body, const struct jsonrpc_info *info,
                 const struct pool_meta *meta)
{
    if (call->pool->era == CONFIG_ERA_STATELESS || !pool_may_ask(info->method))
        return;
    snprintf(call->method, sizeof(call->method), "%s", info->method);
    call->noted = true;
    call->caps = pool_caps_declared(body, info->meta_caps);
    if (call->caps == 0)
        return; /* it can ask nothing: no round, so nothing to bind a requestState to */
    free(call->principal);
    call->principal = xstrdup(meta->principal != NULL ? meta->principal : "");
    if (call->name == NULL) {
        char name[1024] = "";
        struct jsonrpc_span f =
            strcmp(info->method, "resources/read") == 0 ? info->uri : info->name;
        if (f.len > 0 && !jsonrpc_string_at(body, f, name, sizeof(name), NULL))
            name[0] = '\0';
        call->name = xstrdup(name);
    }
}

/* --- the fence ------------------------------------------------------------------------------ */

static void
pool_fence_send(struct pool_child *c)
{
    struct pending *e = pending_add(&c->r.pt, PENDING_TO_CHILD, "0", 1, "ping", 0, util_now_ms());
    char m[64];
    int len = snprintf(m, sizeof(m),
                       "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"ping\"}\n", e->gw_id);
    struct iovec iov = { m, (size_t)len };
    if (pool_send_control(c, &iov, 1) == -1) {
        /* The child is on its way out (gone, or stuck): its end retires it, this turn. */
        pending_del(&c->r.pt, e);
        return;
    }
    c->fence_id = e->gw_id;
    c->fence_seq = c->cancel_seq;
}

void
pool_bridge_cancelled(struct pool_child *c)
{
    c->cancel_seq++;
    if (c->fence_id == 0)
        pool_fence_send(c);
}

bool
pool_bridge_fence_done(struct pool_child *c, struct pending *p, bool lapsed)
{
    if (c->fence_id == 0 || p->gw_id != c->fence_id)
        return false;
    if (lapsed)
        log_warn(c->tag, "no answer to the gateway's ping: questions are attributed again");
    c->fenced_seq = c->fence_seq;
    c->fence_id = 0;
    pending_del(&c->r.pt, p);
    if (c->cancel_seq != c->fenced_seq)
        pool_fence_send(c); /* cancels came after this fence was sent */
    else
        pool_child_take_queue(c); /* requests that waited for the fence */
    return true;
}

bool
pool_bridge_leased(const struct pool_child *c)
{
    for (const struct pending *p = c->r.pt.head; p != NULL; p = p->next)
        if (p->state == PENDING_FORWARDED && p->owner != NULL
            && ((const struct pool_call *)p->owner)->asker)
            return true;
    return false;
}

bool
pool_bridge_unfenced(const struct pool_child *c)
{
    return c->cancel_seq != c->fenced_seq;
}

static void
pool_refuse_ask(struct pool_child *c, const char *id, size_t idlen, const char *why)
{
    if (c->state == POOL_CHILD_GONE)
        return; /* its requests end with it */
    relay_error_to_child(&c->r, id, idlen, JSONRPC_METHOD_NOT_FOUND, why);
    c->pool->row->ctr.child_requests++;
}

static void pool_bridge_flush(void *arg);

void
pool_bridge_ask(struct pool_child *c, const char *line, size_t len, const struct jsonrpc_info *info)
{
    const char *id = line + info->id.off;
    size_t idlen = info->id.len;
    unsigned bit;
    const char *cap = pool_ask_capability(info->method, &bit);
    struct pool_call *owner = NULL;
    size_t candidates = 0;
    /* Every client request in flight may be the one asking; the gateway's own have no owner. */
    for (struct pending *p = c->r.pt.head; p != NULL; p = p->next)
        if (p->state == PENDING_FORWARDED && p->owner != NULL) {
            owner = p->owner;
            candidates++;
        }
    /*
     * A question asked on behalf of a request: the calls in flight may ask again, one request at a
     * time while one of them is (the lease, above). One asked with no request in flight
     * (server-everything asks for roots right after initialize) says nothing of the requests.
     */
    if (cap != NULL && candidates > 0)
        for (struct pending *p = c->r.pt.head; p != NULL; p = p->next)
            if (p->state == PENDING_FORWARDED && p->owner != NULL)
                ((struct pool_call *)p->owner)->asker = true;
    const char *why = NULL;
    if (cap == NULL)
        why = "not available: this gateway relays only elicitation, sampling and roots requests "
              "to stateless clients";
    else if (idlen > pools.cfg->max_id_bytes)
        why = "request id longer than the gateway's max_id_bytes";
    else if (pool_task_child_busy(c))
        why = "not available: a task runs on this server, and the gateway cannot tell which "
              "client request or task this belongs to";
    else if (pool_bridge_unfenced(c) && candidates == 0)
        why = "not available: the request that asked it was cancelled";
    else if (pool_bridge_unfenced(c))
        why = "not available: the gateway cannot tell which client request this belongs to (a "
              "request cancelled on this server may have asked it)";
    else if (candidates != 1)
        why = "not available: the gateway cannot tell which client request this belongs to";
    else if (owner->sess != NULL) {
        /* A pooled session's call: the question goes to its client as a legacy request. */
        if ((why = pool_session_ask(c, owner, bit, line, len, info)) == NULL)
            return;
    } else if (!owner->rev->input_rounds)
        why = "not available: the request's protocol revision has no input rounds";
    else if (!owner->noted)
        why = "not available: the request in flight on this server cannot take input (only "
              "tools/call, prompts/get and resources/read can)";
    else if (owner->nasks >= POOL_ASKS_MAX)
        why = "too many open requests to the client for this call";
    else if ((owner->caps & bit) == 0)
        why = "the client did not declare this capability in its request";
    else if (!owner->due && !owner->held && !pool_caps_may_hold(owner))
        why = "not available: the client's principal has too many calls waiting for input "
              "(max_held_per_principal)";
    if (why != NULL) {
        log_info(c->tag, "child request %s answered with an error: %s", info->method, why);
        pool_refuse_ask(c, idlen <= pools.cfg->max_id_bytes ? id : NULL,
                        idlen <= pools.cfg->max_id_bytes ? idlen : 0, why);
        return;
    }
    if (owner->asks == NULL)
        owner->asks = xcalloc(POOL_ASKS_MAX, sizeof(*owner->asks));
    struct pool_ask *a = &owner->asks[owner->nasks++];
    a->child_id = xmemdup(id, idlen);
    a->child_id_len = idlen;
    snprintf(a->method, sizeof(a->method), "%s", info->method);
    if (info->params.len > 0) {
        a->params = xmemdup(line + info->params.off, info->params.len);
        a->params_len = info->params.len;
    }
    a->key = ++owner->next_key;
    c->pool->row->ctr.asks_bridged++;
    log_debug(c->tag, "child request %s becomes input request r%u of %s", info->method, a->key,
              owner->method);
    /* Questions that come in the same loop turn leave in one round. */
    if (!owner->due && !owner->held) {
        owner->due = true;
        pool_caps_held_sync(owner);
        owner->dnext = pools.due;
        if (pools.due == NULL)
            loop_defer(pools.l, pool_bridge_flush, NULL);
        pools.due = owner;
    }
}

static void
pool_unlink_due(struct pool_call *call)
{
    for (struct pool_call **q = &pools.due; *q != NULL; q = &(*q)->dnext)
        if (*q == call) {
            *q = call->dnext;
            break;
        }
    call->due = false;
    call->dnext = NULL;
    pool_caps_held_sync(call);
}

static void
pool_unlink_held(struct pool_call *call)
{
    for (struct pool_call **q = &pools.held; *q != NULL; q = &(*q)->hnext)
        if (*q == call) {
            *q = call->hnext;
            pools.nheld--;
            break;
        }
    call->hnext = NULL;
    call->held = false;
    loop_timer_del(call->hold);
    call->hold = NULL;
    pool_caps_held_sync(call);
}

static void
pool_hold_over(void *arg)
{
    struct pool_call *call = arg;
    call->hold = NULL;
    call->pool->row->ctr.held_expired++;
    log_info(call->c != NULL ? call->c->tag : NULL,
             "held %s: no retry within input_hold_ms: cancelled", call->method);
    pool_call_cancel(call, RELAY_CANCEL_HOLD);
}

/*
 * Sends the call's open questions as one input_required answer on its stream, which ends: the
 * child's call is held until the client's retry (pool_bridge_resume) or input_hold_ms.
 *
 * The hold's end is fixed when a round brings the client something new: a question it was not
 * asked yet, or the next one after the retry answered some (fresh). A retry that answers nothing
 * is asked the same again until that end, never later: else a client could keep the call, and the
 * child it leases (one request at a time), for as long as it retries.
 */
static void
pool_round(struct pool_call *call, bool fresh)
{
    struct buf b;
    buf_init(&b, SIZE_MAX);
    struct pending *p = call->p;
    for (size_t i = 0; i < call->nasks; i++)
        fresh |= !call->asks[i].answered && call->asks[i].key > call->asked_keys;
    uint64_t now = util_now_ms();
    if (fresh || call->hold_until_ms == 0)
        call->hold_until_ms = now + call->pool->srv->input_hold_ms;
    call->asked_keys = call->next_key;
    call->round++;
    if (call->round == 1 && crypto_random(call->held_id, sizeof call->held_id) == -1)
        memset(call->held_id, 0, sizeof call->held_id); /* cannot happen */
    char state[192];
    pool_seal(call, state);
    int rc = buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    rc |= buf_append(&b, p->orig_id, p->orig_id_len);
    rc |= buf_printf(&b, ",\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{");
    bool first = true;
    for (size_t i = 0; i < call->nasks; i++) {
        const struct pool_ask *a = &call->asks[i];
        if (a->answered)
            continue;
        rc |= buf_printf(&b, "%s\"r%u\":{\"method\":\"%s\"", first ? "" : ",", a->key, a->method);
        if (a->params != NULL) {
            rc |= buf_printf(&b, ",\"params\":");
            rc |= buf_append(&b, a->params, a->params_len);
        }
        rc |= buf_printf(&b, "}");
        first = false;
    }
    rc |= buf_printf(&b, "},\"requestState\":\"%s\"}}", state);
    if (rc != 0)
        fatalx("out of memory building an input round");
    struct iovec iov = { buf_head(&b), buf_used(&b) };
    pool_push(call, &iov, 1);
    buf_clear(&b);
    call->pool->row->ctr.rounds++;
    /* The stream is done; the call waits for the retry, held. */
    struct stream *st = call->st;
    call->st = NULL;
    stream_own(st)->owner = NULL;
    stream_end(st);
    stream_unref(st);
    if (!call->held) {
        call->held = true;
        call->hnext = pools.held;
        pools.held = call;
        pools.nheld++;
        pool_caps_held_sync(call);
    }
    loop_timer_del(call->hold);
    call->hold = loop_timer_add(pools.l, call->hold_until_ms > now ? call->hold_until_ms - now : 0,
                                pool_hold_over, call);
    log_info(call->c->tag, "%s held: input round %u sent to the client", call->method, call->round);
}

static void
pool_bridge_flush(void *arg)
{
    (void)arg;
    while (pools.due != NULL) {
        struct pool_call *call = pools.due;
        pool_unlink_due(call);
        size_t open = 0;
        for (size_t i = 0; i < call->nasks; i++)
            open += !call->asks[i].answered;
        /* Every question withdrawn before the round left: no round, the call goes on. */
        if (call->st != NULL && call->p != NULL && open > 0)
            pool_round(call, true);
    }
}

size_t
pool_held_in(const struct pool *p)
{
    size_t n = 0;
    for (const struct pool_call *call = pools.held; call != NULL; call = call->hnext)
        n += call->pool == p;
    return n;
}

void
pool_bridge_end_held(struct pool *p)
{
    struct pool_call **q = &pools.held;
    while (*q != NULL)
        if ((*q)->pool == p)
            pool_call_cancel(*q, RELAY_CANCEL_SHUTDOWN); /* unlinks it */
        else
            q = &(*q)->hnext;
}

void
pool_bridge_forget(struct pool_call *call)
{
    if (call->due)
        pool_unlink_due(call);
    if (call->held || call->hold != NULL)
        pool_unlink_held(call);
    for (size_t i = 0; i < call->nasks; i++) {
        struct pool_ask *a = &call->asks[i];
        if (!a->answered && call->c != NULL)
            pool_refuse_ask(call->c, a->child_id, a->child_id_len,
                            "the client's request ended before it answered");
        free(a->child_id);
        free(a->params);
    }
    free(call->asks);
    free(call->final);
    call->final = NULL;
    free(call->principal);
    free(call->name);
    call->principal = call->name = NULL;
    call->asks = NULL;
    call->nasks = 0;
}

/* --- the retry ------------------------------------------------------------------------------ */

/* Sends the client's answer to one question to the child. */
static void
pool_answer_ask(struct pool_call *call, struct pool_ask *a, const char *result, size_t len)
{
    struct iovec iov[5];
    if (pool_send(call->c, iov,
                  jsonrpc_result_iov(iov, a->child_id, a->child_id_len, result, len, true))
        == -1)
        log_warn(call->c->tag, "the client's answer to %s not delivered: child stdin full",
                 a->method);
    a->answered = true;
}

struct stream *
pool_bridge_resume(struct pool *p, const char *body, const struct jsonrpc_info *info,
                   struct pool_meta *meta, enum pool_status *status)
{
    const char *why = NULL;
    struct pool_call *call = pool_unseal(p, body, info, meta, &why);
    if (call == NULL) {
        p->row->ctr.states_refused++;
        log_info(NULL, "pool %s: retry refused: %s", p->name, why);
        meta->why = why;
        *status = POOL_E_BAD_STATE;
        return NULL;
    }
    if (call->final != NULL) {
        /* The child answered while the call was held: that answer is this retry's. */
        pool_unlink_held(call);
        struct stream *st = pool_call_stream(call);
        struct jsonrpc_info fi;
        if (jsonrpc_scan(call->final, call->final_len, &fi, NULL) == JSONRPC_OK)
            pool_deliver(call, call->method, body + info->id.off, info->id.len, call->final,
                         call->final_len, &fi);
        pool_call_end(call);
        return st;
    }
    /* The held call goes on, as this request: its id, token, log level and capabilities. */
    struct pending *e = call->p;
    pending_set_orig(&call->c->r.pt, e, body + info->id.off, info->id.len);
    free(e->token);
    e->token = NULL;
    e->token_len = 0;
    if (info->progress_token.len)
        pending_set_token(e, body + info->progress_token.off, info->progress_token.len);
    call->log_level = meta->log_level;
    call->caps = pool_caps_declared(body, info->meta_caps);
    pool_unlink_held(call);
    struct stream *st = pool_call_stream(call);
    size_t open_asks = 0, answered = 0;
    for (size_t i = 0; i < call->nasks; i++) {
        struct pool_ask *a = &call->asks[i];
        if (a->answered)
            continue;
        char key[16];
        snprintf(key, sizeof(key), "r%u", a->key);
        size_t len = 0;
        char *result = info->input_responses.len > 0 ? jsonrpc_member_json(
                           body + info->input_responses.off, info->input_responses.len, key, &len)
                                                     : NULL;
        if (result != NULL && result[0] == '{') {
            pool_answer_ask(call, a, result, len);
            answered++;
        } else
            open_asks++; /* not answered (or not a result object): asked again */
        free(result);
    }
    log_info(call->c->tag, "%s resumed by the client's retry (round %u)", call->method,
             call->round);
    if (open_asks > 0)
        pool_round(call, answered > 0); /* answered nothing: the hold's end stays */
    return st;
}

void
pool_bridge_withdrawn(struct pool_child *c, const char *line, size_t len,
                      const struct jsonrpc_info *info)
{
    if (info->request_id.len == 0)
        return;
    for (struct pending *p = c->r.pt.head; p != NULL; p = p->next) {
        struct pool_call *call = p->owner;
        if (call == NULL || p->state != PENDING_FORWARDED)
            continue;
        for (size_t i = 0; i < call->nasks; i++) {
            struct pool_ask *a = &call->asks[i];
            if (!a->answered && a->child_id_len == info->request_id.len
                && memcmp(a->child_id, line + info->request_id.off, a->child_id_len) == 0) {
                a->answered = true; /* withdrawn: not asked again, its answer not sent */
                log_info(c->tag, "child withdrew its %s (r%u)", a->method, a->key);
                if (call->sess != NULL)
                    pool_session_withdrawn(call, a, line, len, info);
                return;
            }
        }
    }
}
