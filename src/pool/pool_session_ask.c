/* SPDX-License-Identifier: MIT */
/*
 * A pooled session's questions (pool_int.h): a child's sampling, elicitation or roots request that
 * the input-round bridge attributed to a pooled session's call (pool_bridge_ask) is sent to that
 * session's client on the call's stream (else the session's GET stream) under an id the gateway
 * minted; the client's answer goes back to the child under the child's own id; the child's
 * withdrawal of a question reaches the client. pool_session.c owns the session and its calls.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pool_int.h"

/* The id a question of the session's has toward its client, as raw JSON; its length. */
static size_t
pool_session_ask_id(unsigned key, char *buf, size_t size)
{
    return (size_t)snprintf(buf, size, "\"mcpgw-ask-%u\"", key);
}

/* The stream a question of call goes on: the call's own while read, else the session's GET. */
static struct stream *
pool_session_ask_stream(struct pool_call *call)
{
    if (call->st != NULL && stream_own(call->st)->attached && !stream_ended(call->st))
        return call->st;
    struct stream *get = call->sess->get; /* kept while dropped (for the next GET): read now? */
    return get != NULL && stream_own(get)->attached ? get : NULL;
}

static void
pool_session_push_to(struct pool_call *call, struct stream *st, const struct iovec *iov, int n)
{
    if (st == call->st)
        pool_push(call, iov, n);
    else
        stream_push_shared(st, iov, n, pools.line);
}

const char *
pool_session_ask(struct pool_child *c, struct pool_call *call, unsigned bit, const char *line,
                 size_t len, const struct jsonrpc_info *info)
{
    struct pool_session *s = call->sess;
    if ((s->caps & bit) == 0)
        return "the client did not declare this capability at initialize";
    if (call->nasks >= POOL_ASKS_MAX)
        return "too many open requests to the client for this call";
    struct stream *st = pool_session_ask_stream(call);
    if (st == NULL)
        return "not available: the session has no open stream to ask its client on";
    if (call->asks == NULL)
        call->asks = xcalloc(POOL_ASKS_MAX, sizeof(*call->asks));
    struct pool_ask *a = &call->asks[call->nasks++];
    a->child_id = xmemdup(line + info->id.off, info->id.len);
    a->child_id_len = info->id.len;
    snprintf(a->method, sizeof(a->method), "%s", info->method);
    a->key = ++s->next_ask;
    char idbuf[32];
    struct relay_edit ed = { info->id.off, info->id.len, idbuf,
                             pool_session_ask_id(a->key, idbuf, sizeof idbuf) };
    struct iovec iov[3];
    int k = relay_splice(line, len, &ed, 1, iov);
    pool_session_push_to(call, st, iov, k);
    c->pool->row->ctr.asks_bridged++;
    log_debug(s->label, "child request %s sent to the session's client as %s", info->method, idbuf);
    return NULL;
}

void
pool_session_withdrawn(struct pool_call *call, const struct pool_ask *a, const char *line,
                       size_t len, const struct jsonrpc_info *info)
{
    struct stream *st = pool_session_ask_stream(call);
    if (st == NULL)
        return;
    char idbuf[32];
    struct relay_edit ed = { info->request_id.off, info->request_id.len, idbuf,
                             pool_session_ask_id(a->key, idbuf, sizeof idbuf) };
    struct iovec iov[3];
    int k = relay_splice(line, len, &ed, 1, iov);
    pool_session_push_to(call, st, iov, k);
}

/* The client's answer to one of the session's questions: to the child, with the child's id. */
void
pool_session_client_answer(struct pool_session *s, char *body, size_t len,
                           const struct jsonrpc_info *info)
{
    char idbuf[32];
    for (struct pool_call *call = s->calls; call != NULL; call = call->snext)
        for (size_t i = 0; i < call->nasks; i++) {
            struct pool_ask *a = &call->asks[i];
            size_t n = pool_session_ask_id(a->key, idbuf, sizeof idbuf);
            if (a->answered || n != info->id.len || memcmp(idbuf, body + info->id.off, n) != 0)
                continue;
            a->answered = true;
            if (call->c == NULL)
                return;
            struct relay_edit ed = { info->id.off, info->id.len, a->child_id, a->child_id_len };
            if (relay_send_spliced(&call->c->r, body, len, &ed, 1) == -1)
                log_warn(s->label, "the client's answer to %s not delivered: child stdin full",
                         a->method);
            return;
        }
    if (pool_session_modern_client_answer(s, body, len, info))
        return; /* a question of a stateless child's input round */
    log_debug(s->label, "an answer for no open question of the session's dropped");
}
