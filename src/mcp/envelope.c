/* SPDX-License-Identifier: MIT */
/*
 * A legacy client in front of a stateless-only child (envelope.h): the _meta envelope, what a
 * legacy request may not carry, an input_required result's questions and the retry's members.
 * Owner-independent: a session with a child of its own and a pooled session both use it.
 */
#include "envelope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
envelope_members(const struct envelope_client *ec, struct buf *b)
{
    int rc = buf_printf(b,
                        ",\"io.modelcontextprotocol/protocolVersion\":\"%s\""
                        ",\"io.modelcontextprotocol/clientCapabilities\":%s",
                        ec->rev, ec->caps != NULL ? ec->caps : "{}");
    if (ec->info != NULL)
        rc |= buf_printf(b, ",\"io.modelcontextprotocol/clientInfo\":%s", ec->info);
    if (ec->level != NULL && ec->level[0] != '\0')
        rc |= buf_printf(b, ",\"io.modelcontextprotocol/logLevel\":\"%s\"", ec->level);
    return rc;
}

struct jsonrpc_span
envelope_message(const char *body, size_t len)
{
    struct jsonrpc_span obj = { 0, len };
    while (obj.off < len && body[obj.off] != '{')
        obj.off++;
    obj.len = len - obj.off;
    return obj;
}

int
envelope_edits(const char *body, size_t len, const struct jsonrpc_info *info, struct buf *env,
               const char *extra, size_t extra_len, struct buf *ext, struct relay_edit *ed)
{
    int rc = 0, n = 0;
    if (info->meta.len > 0) {
        /* The envelope goes first in _meta, a retry's members first in params. */
        ed[n++] = (struct relay_edit){ info->meta.off + 1, 0, buf_head(env),
                                       jsonrpc_members_first(body, info->meta, buf_head(env),
                                                             buf_used(env)) };
        if (extra != NULL) {
            rc |= buf_append(ext, extra, extra_len);
            if (rc == 0)
                ed[n++] =
                    (struct relay_edit){ info->params.off + 1, 0, buf_head(ext),
                                         jsonrpc_members_first(body, info->params, buf_head(ext),
                                                               buf_used(ext)) };
        }
    } else {
        bool params = info->params.len > 0;
        struct jsonrpc_span obj = params ? info->params : envelope_message(body, len);
        rc |= buf_printf(ext, params ? ",\"_meta\":{%.*s}" : ",\"params\":{\"_meta\":{%.*s}",
                         (int)buf_used(env) - 1, buf_head(env) + 1);
        if (extra != NULL)
            rc |= buf_append(ext, extra, extra_len);
        if (!params)
            rc |= buf_append(ext, "}", 1);
        if (rc == 0)
            ed[n++] = (struct relay_edit){ obj.off + 1, 0, buf_head(ext),
                                           jsonrpc_members_first(body, obj, buf_head(ext),
                                                                 buf_used(ext)) };
    }
    return rc == 0 ? n : -1;
}

const char *
envelope_check(const char *body, size_t len, const struct jsonrpc_info *info)
{
    struct jsonrpc_span params;
    if (jsonrpc_member_at(body, envelope_message(body, len), "params", &params) == -1
        || (params.len > 0 && info->params.len == 0)
        || (info->meta.len > 0 && body[info->meta.off] != '{'))
        return "params and params._meta must be objects";
    if (info->meta_version.len || info->meta_caps.len || info->meta_log_level.len
        || info->request_state.len || info->input_responses.len)
        return "a session's request carries no stateless _meta, requestState or inputResponses: "
               "the gateway adds what the server needs";
    return NULL;
}

bool
envelope_may_ask(const char *method)
{
    return strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0
           || strcmp(method, "resources/read") == 0;
}

static void
envelope_ask_seen(const char *key, const char *method, const char *params, void *arg)
{
    struct envelope_asks *as = arg;
    if (as->n >= ENVELOPE_ASKS_MAX)
        return;
    struct envelope_ask *a = &as->a[as->n++];
    a->key = jsonrpc_quote(key, &a->key_len);
    snprintf(a->method, sizeof a->method, "%s", method);
    a->params = params != NULL ? xstrdup(params) : NULL;
}

const char *
envelope_asks_read(const char *line, size_t len, struct envelope_asks *as, char **state,
                   size_t *state_len)
{
    as->n = 0;
    *state = NULL;
    *state_len = 0;
    int n = jsonrpc_input_requests(line, len, ENVELOPE_ASKS_MAX, envelope_ask_seen, as, state,
                                   state_len);
    if (n == -1)
        return "the server's input_required result is malformed";
    for (size_t i = 0; i < as->n; i++)
        if (strcmp(as->a[i].method, "elicitation/create") != 0
            && strcmp(as->a[i].method, "sampling/createMessage") != 0
            && strcmp(as->a[i].method, "roots/list") != 0)
            return "the server asked for input of an unknown kind";
    return NULL;
}

void
envelope_asks_free(struct envelope_asks *as)
{
    for (size_t i = 0; i < as->n; i++) {
        free(as->a[i].key);
        free(as->a[i].params);
    }
    as->n = 0;
}

int
envelope_question(const struct envelope_ask *a, const char *id, size_t idlen,
                  char head[ENVELOPE_HEAD_MAX], struct iovec iov[4])
{
    int hl = snprintf(head, ENVELOPE_HEAD_MAX, "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"method\":\"%s\"",
                      (int)idlen, id, a->method);
    iov[0] = (struct iovec){ head, (size_t)hl };
    iov[1] = (struct iovec){ (void *)(uintptr_t) ",\"params\":", a->params != NULL ? 10 : 0 };
    iov[2] = (struct iovec){ a->params, a->params != NULL ? strlen(a->params) : 0 };
    iov[3] = (struct iovec){ (void *)(uintptr_t) "}", 1 };
    return 4;
}

int
envelope_answer_add(struct buf *answers, const char *key, size_t key_len, const char *result,
                    size_t result_len)
{
    int rc = buf_append(answers, ",", 1);
    rc |= buf_append(answers, key, key_len);
    rc |= buf_append(answers, ":", 1);
    rc |= buf_append(answers, result, result_len);
    return rc;
}

int
envelope_retry_members(const struct buf *answers, const char *state, struct buf *out)
{
    int rc = 0;
    if (buf_used(answers) > 0)
        rc |= buf_printf(out, ",\"inputResponses\":{%.*s}", (int)buf_used(answers) - 1,
                         buf_head(answers) + 1);
    if (state != NULL)
        rc |= buf_printf(out, ",\"requestState\":%s", state);
    return rc;
}

int
envelope_legacy_note(const char *line, const struct jsonrpc_info *info, struct buf *out)
{
    static const char *const lists[] = { "notifications/tools/list_changed",
                                         "notifications/prompts/list_changed",
                                         "notifications/resources/list_changed" };
    buf_reset(out);
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (strcmp(info->method, lists[i]) == 0)
            return buf_printf(out, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}", lists[i]);
    if (strcmp(info->method, "notifications/resources/updated") != 0 || info->uri.len == 0
        || line[info->uri.off] != '"')
        return -1;
    if (buf_printf(out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
                        "\"params\":{\"uri\":")
            == -1
        || buf_append(out, line + info->uri.off, info->uri.len) == -1)
        return -1;
    return buf_append(out, "}}", 2);
}
