/* SPDX-License-Identifier: MIT */
/*
 * JSON read and written off the hot path, with jansson (part of the jsonrpc module, the one
 * includer of <jansson.h>): the messages the gateway writes itself (errors, cancels), the
 * initialize result's protocol version and task states read once each, the JWT header and claims,
 * JWK Sets, and the RFC 9728 protected resource metadata the gateway serves.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "jsonrpc.h"

/*
 * Builders. The raw id is spliced byte for byte, so the JSON around it is concatenated here and
 * jansson only encodes the free-text strings.
 */

#define JSONRPC_DUMP_FLAGS (JSON_ENCODE_ANY | JSON_COMPACT)

/* text as a JSON string, in a new xmalloc'd buffer without a NUL. NULL or invalid UTF-8 give "". */
char *
jsonrpc_quote(const char *text, size_t *len)
{
    json_t *js = text != NULL ? json_string(text) : NULL;
    size_t n = js != NULL ? json_dumpb(js, NULL, 0, JSONRPC_DUMP_FLAGS) : 0;
    char *q = n != 0 ? xmalloc(n) : NULL;

    if (q != NULL && json_dumpb(js, q, n, JSONRPC_DUMP_FLAGS) != n) {
        free(q);
        q = NULL;
    }
    json_decref(js);
    if (q == NULL) {
        n = 2;
        q = xmemdup("\"\"", n);
    }
    *len = n;
    return q;
}

void
jsonrpc_put_quoted(struct buf_out *o, const char *s)
{
    size_t n;
    char *q = jsonrpc_quote(s, &n);
    buf_out_raw(o, q, n);
    free(q);
}

static size_t
jsonrpc_put(char *buf, size_t o, const char *s, size_t n)
{
    memcpy(buf + o, s, n);
    return o + n;
}

/*
 * A message with an id and, when text is not NULL, one string: head, the id's raw bytes, mid, the
 * text as a JSON string, "}}" (the closing of the object mid opened and of the message's).
 */
static char *
jsonrpc_id_text_new(const char *head, const char *id_raw, size_t id_len, const char *mid,
                    const char *text, size_t *len)
{
    size_t hlen = strlen(head), mlen = text != NULL ? strlen(mid) : 0, qlen = 0, o = 0;
    char *q = text != NULL ? jsonrpc_quote(text, &qlen) : NULL;
    char *buf = xmalloc(hlen + id_len + mlen + qlen + sizeof "}}");

    o = jsonrpc_put(buf, o, head, hlen);
    o = jsonrpc_put(buf, o, id_raw, id_len);
    if (q != NULL) {
        o = jsonrpc_put(buf, o, mid, mlen);
        o = jsonrpc_put(buf, o, q, qlen);
    }
    o = jsonrpc_put(buf, o, "}}", 2);
    buf[o] = '\0';
    free(q);
    if (len != NULL)
        *len = o;
    return buf;
}

char *
jsonrpc_error_new(const char *id_raw, size_t id_len, int code, const char *message, size_t *len)
{
    char mid[64];
    snprintf(mid, sizeof mid, ",\"error\":{\"code\":%d,\"message\":", code);
    if (id_raw == NULL || id_len == 0) {
        id_raw = "null";
        id_len = 4;
    }
    return jsonrpc_id_text_new("{\"jsonrpc\":\"2.0\",\"id\":", id_raw, id_len, mid, message, len);
}

int
jsonrpc_result_iov(struct iovec iov[5], const char *id_raw, size_t id_len, const char *result,
                   size_t result_len, bool newline)
{
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    static const char mid[] = ",\"result\":";
    iov[0] = (struct iovec){ (void *)(uintptr_t)head, sizeof head - 1 };
    iov[1] = (struct iovec){ (void *)(uintptr_t)id_raw, id_len };
    iov[2] = (struct iovec){ (void *)(uintptr_t)mid, sizeof mid - 1 };
    iov[3] = (struct iovec){ (void *)(uintptr_t)result, result_len };
    iov[4] = (struct iovec){ (void *)(uintptr_t) "}\n", newline ? 2 : 1 };
    return 5;
}

char *
jsonrpc_cancel_new(const char *id_raw, size_t id_len, const char *reason, size_t *len)
{
    assert(id_raw != NULL && id_len != 0);
    return jsonrpc_id_text_new("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                               "\"params\":{\"requestId\":",
                               id_raw, id_len, ",\"reason\":", reason, len);
}

int
jsonrpc_protocol_version(const char *p, size_t n, char *out, size_t outlen)
{
    json_t *root, *holder, *v;
    int rc = -1;

    /* jansson skips a NUL after a number or literal, so a NUL never gets that far. */
    if (outlen == 0 || memchr(p, '\0', n) != NULL)
        return -1;
    root = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, NULL);
    if (root == NULL)
        return -1;
    holder = json_object_get(root, json_object_get(root, "method") != NULL ? "params" : "result");
    v = json_object_get(holder, "protocolVersion");
    if (json_is_string(v) && json_string_length(v) < outlen) {
        memcpy(out, json_string_value(v), json_string_length(v) + 1);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

bool
jsonrpc_task_terminal(const char *status)
{
    return strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0
           || strcmp(status, "cancelled") == 0;
}

int
jsonrpc_task_state(const char *p, size_t n, struct jsonrpc_task *out)
{
    json_t *root, *t, *v;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (memchr(p, '\0', n) != NULL)
        return -1;
    root = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, NULL);
    if (root == NULL)
        return -1;
    /* notifications/tasks/status: params is the Task; CreateTaskResult: result.task; else result */
    t = json_object_get(root, json_object_get(root, "method") != NULL ? "params" : "result");
    if (json_is_object(json_object_get(t, "task")))
        t = json_object_get(t, "task");
    v = json_object_get(t, "taskId");
    if (json_is_string(v) && json_string_length(v) > 0
        && json_string_length(v) < sizeof(out->task_id)) {
        memcpy(out->task_id, json_string_value(v), json_string_length(v) + 1);
        v = json_object_get(t, "status");
        if (json_is_string(v) && json_string_length(v) < sizeof(out->status))
            memcpy(out->status, json_string_value(v), json_string_length(v) + 1);
        v = json_object_get(t, "ttl");
        out->ttl_ms = json_is_number(v) && json_number_value(v) >= 0
                          ? (int64_t)(json_number_value(v) > 9e15 ? 9e15 : json_number_value(v))
                          : -1;
        rc = 0;
    }
    json_decref(root);
    return rc;
}

/* ---- small documents: JWT parts, JWKS, protected resource metadata ---------------------- */

/* A struct jsonrpc_doc is a jansson object; the type stays opaque outside this module. */
static const json_t *
jsonrpc_doc_json(const struct jsonrpc_doc *d)
{
    return (const json_t *)(const void *)d;
}

struct jsonrpc_doc *
jsonrpc_doc_parse(const char *p, size_t n)
{
    json_t *root = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
    if (root != NULL && !json_is_object(root)) {
        json_decref(root);
        root = NULL;
    }
    return (struct jsonrpc_doc *)(void *)root;
}

void
jsonrpc_doc_free(struct jsonrpc_doc *d)
{
    json_decref((json_t *)(void *)d);
}

/* json_object_get takes a non-const object in jansson 2.14; it does not modify it. */
static json_t *
jsonrpc_doc_get(const struct jsonrpc_doc *d, const char *key)
{
    return json_object_get((json_t *)(uintptr_t)jsonrpc_doc_json(d), key);
}

bool
jsonrpc_doc_has(const struct jsonrpc_doc *d, const char *key)
{
    return jsonrpc_doc_get(d, key) != NULL;
}

bool
jsonrpc_doc_true(const struct jsonrpc_doc *d, const char *key)
{
    return json_is_true(jsonrpc_doc_get(d, key));
}

const char *
jsonrpc_doc_str(const struct jsonrpc_doc *d, const char *key)
{
    return json_string_value(jsonrpc_doc_get(d, key));
}

bool
jsonrpc_doc_is_int(const struct jsonrpc_doc *d, const char *key)
{
    return json_is_integer(jsonrpc_doc_get(d, key));
}

int
jsonrpc_doc_int(const struct jsonrpc_doc *d, const char *key, int64_t *out)
{
    json_t *v = jsonrpc_doc_get(d, key);
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_real(v))
        return -1;
    double x = json_real_value(v);
    *out = x >= 9e18 ? INT64_MAX : x <= -9e18 ? INT64_MIN : (int64_t)x;
    return 0;
}

int
jsonrpc_doc_strs(const struct jsonrpc_doc *d, const char *key, const char **out, size_t max)
{
    json_t *v = jsonrpc_doc_get(d, key);
    if (v == NULL)
        return 0;
    if (json_is_string(v)) {
        if (max == 0)
            return -1;
        out[0] = json_string_value(v);
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) > max)
        return -1;
    for (size_t i = 0; i < json_array_size(v); i++) {
        out[i] = json_string_value(json_array_get(v, i));
        if (out[i] == NULL)
            return -1;
    }
    return (int)json_array_size(v);
}

size_t
jsonrpc_doc_len(const struct jsonrpc_doc *d, const char *key)
{
    return json_array_size(jsonrpc_doc_get(d, key));
}

const struct jsonrpc_doc *
jsonrpc_doc_at(const struct jsonrpc_doc *d, const char *key, size_t i)
{
    json_t *v = json_array_get(jsonrpc_doc_get(d, key), i);
    return json_is_object(v) ? (const struct jsonrpc_doc *)(const void *)v : NULL;
}

const struct jsonrpc_doc *
jsonrpc_doc_obj(const struct jsonrpc_doc *d, const char *key)
{
    json_t *v = jsonrpc_doc_get(d, key);
    return json_is_object(v) ? (const struct jsonrpc_doc *)(const void *)v : NULL;
}

size_t
jsonrpc_doc_keys(const struct jsonrpc_doc *d, const char **out, size_t max)
{
    json_t *o = (json_t *)(uintptr_t)jsonrpc_doc_json(d);
    size_t n = 0;
    for (void *it = json_object_iter(o); it != NULL; it = json_object_iter_next(o, it), n++)
        if (n < max)
            out[n] = json_object_iter_key(it);
    return n;
}

static json_t *
jsonrpc_strv(char *const *v)
{
    json_t *a = json_array();
    for (; v != NULL && *v != NULL; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

char *
jsonrpc_prm_new(const char *resource, char *const *auth_servers, char *const *scopes, size_t *len)
{
    json_t *o = json_object();
    json_object_set_new(o, "resource", json_string(resource));
    if (auth_servers != NULL && auth_servers[0] != NULL)
        json_object_set_new(o, "authorization_servers", jsonrpc_strv(auth_servers));
    if (scopes != NULL && scopes[0] != NULL)
        json_object_set_new(o, "scopes_supported", jsonrpc_strv(scopes));
    json_t *methods = json_array();
    json_array_append_new(methods, json_string("header"));
    json_object_set_new(o, "bearer_methods_supported", methods);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    char *copy = xstrdup(s != NULL ? s : "{}"); /* NULL only when out of memory */
    free(s);
    *len = strlen(copy);
    return copy;
}

/* --- the stateless era: the gateway's own requests to pool children, and its discover ---- */

static char *
jsonrpc_dump_new(json_t *js, size_t *len)
{
    char *s = js != NULL ? json_dumps(js, JSON_COMPACT) : NULL;
    json_decref(js);
    if (s == NULL)
        abort(); /* jansson failed to allocate: as xmalloc does */
    char *out = xstrdup(s);
    free(s);
    *len = strlen(out);
    return out;
}

/* The _meta of a request the gateway makes itself: no client capabilities (nothing to ask). */
static json_t *
jsonrpc_gateway_meta(const char *version, const char *agent)
{
    return json_pack("{s:s,s:{},s:{s:s,s:s}}", "io.modelcontextprotocol/protocolVersion", version,
                     "io.modelcontextprotocol/clientCapabilities",
                     "io.modelcontextprotocol/clientInfo", "name", "mcp-gateway", "version", agent);
}

char *
jsonrpc_probe_new(uint64_t id, const char *version, const char *agent, size_t *len)
{
    return jsonrpc_dump_new(json_pack("{s:s,s:I,s:s,s:{s:o}}", "jsonrpc", "2.0", "id",
                                      (json_int_t)id, "method", "server/discover", "params",
                                      "_meta", jsonrpc_gateway_meta(version, agent)),
                            len);
}

char *
jsonrpc_initialize_new(uint64_t id, const char *version, const char *agent, size_t *len)
{
    /* What the gateway can bridge to stateless clients as input rounds (pool_bridge.c). */
    return jsonrpc_dump_new(json_pack("{s:s,s:I,s:s,s:{s:s,s:{s:{},s:{},s:{}},s:{s:s,s:s}}}",
                                      "jsonrpc", "2.0", "id", (json_int_t)id, "method",
                                      "initialize", "params", "protocolVersion", version,
                                      "capabilities", "elicitation", "sampling", "roots",
                                      "clientInfo", "name", "mcp-gateway", "version", agent),
                            len);
}

static json_t *
jsonrpc_load_result(const char *p, size_t n)
{
    if (memchr(p, '\0', n) != NULL)
        return NULL;
    return json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
}

/* A JSON array of the NULL-ended versions. */
static json_t *
jsonrpc_versions_new(const char *const *versions)
{
    json_t *list = json_array();
    for (; *versions != NULL; versions++)
        json_array_append_new(list, json_string(*versions));
    return list;
}

bool
jsonrpc_discover_versions(const char *p, size_t n, jsonrpc_version_cb *seen, void *arg)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *list = json_object_get(json_object_get(root, "result"), "supportedVersions");
    if (list == NULL)
        list =
            json_object_get(json_object_get(json_object_get(root, "error"), "data"), "supported");
    bool listed = json_is_array(list);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (i >= 64)
            break;
        if (json_is_string(v))
            seen(json_string_value(v), arg);
    }
    json_decref(root);
    return listed;
}

/*
 * Capabilities a legacy child declared that mean nothing to a stateless client through this
 * gateway: 2025-11-25 tasks (a different protocol than the tasks extension). listChanged and
 * subscribe stay: the gateway serves subscriptions/listen for legacy children (pool_listen.c).
 */
static void
jsonrpc_stateless_caps(json_t *caps)
{
    json_object_del(caps, "tasks");
}

unsigned
jsonrpc_listen_caps(const char *p, size_t n)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *caps = json_object_get(json_object_get(root, "result"), "capabilities");
    unsigned flags = 0;
    if (json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged")))
        flags |= JSONRPC_LISTEN_TOOLS;
    if (json_is_true(json_object_get(json_object_get(caps, "prompts"), "listChanged")))
        flags |= JSONRPC_LISTEN_PROMPTS;
    if (json_is_true(json_object_get(json_object_get(caps, "resources"), "listChanged")))
        flags |= JSONRPC_LISTEN_RESOURCES;
    if (json_is_true(json_object_get(json_object_get(caps, "resources"), "subscribe")))
        flags |= JSONRPC_LISTEN_UPDATES;
    json_decref(root);
    return flags;
}

int
jsonrpc_listen_parse(const char *p, size_t n, unsigned *flags, char ***uris, size_t *nuris,
                     size_t max_uris, size_t max_uri_bytes)
{
    static const char *const keys[] = { "toolsListChanged", "promptsListChanged",
                                        "resourcesListChanged" };
    static const unsigned bits[] = { JSONRPC_LISTEN_TOOLS, JSONRPC_LISTEN_PROMPTS,
                                     JSONRPC_LISTEN_RESOURCES };
    json_t *root = jsonrpc_load_result(p, n);
    json_t *want = json_object_get(root, "notifications");
    *flags = 0;
    *uris = NULL;
    *nuris = 0;
    if (!json_is_object(want)) {
        json_decref(root);
        return -1;
    }
    for (size_t i = 0; i < ARRAY_LEN(keys); i++)
        if (json_is_true(json_object_get(want, keys[i])))
            *flags |= bits[i];
    json_t *list = json_object_get(want, "resourceSubscriptions");
    int rc = 0;
    if (list != NULL) {
        if (!json_is_array(list) || json_array_size(list) > max_uris) {
            rc = -1;
        } else {
            size_t i;
            json_t *v;
            *uris = xcalloc(json_array_size(list) + 1, sizeof(char *));
            json_array_foreach(list, i, v)
            {
                if (!json_is_string(v) || json_string_length(v) == 0
                    || json_string_length(v) > max_uri_bytes
                    || memchr(json_string_value(v), '\0', json_string_length(v)) != NULL) {
                    rc = -1;
                    break;
                }
                (*uris)[(*nuris)++] = xstrdup(json_string_value(v));
            }
            if (*nuris > 0)
                *flags |= JSONRPC_LISTEN_UPDATES;
        }
    }
    json_decref(root);
    if (rc == -1) {
        for (size_t i = 0; i < *nuris; i++)
            free((*uris)[i]);
        free(*uris);
        *uris = NULL;
        *nuris = 0;
    }
    return rc;
}

char *
jsonrpc_listen_ack_new(const char *id_raw, size_t id_len, unsigned flags, char *const *uris,
                       size_t nuris, size_t *len)
{
    json_t *agreed = json_object();
    if (flags & JSONRPC_LISTEN_TOOLS)
        json_object_set_new(agreed, "toolsListChanged", json_true());
    if (flags & JSONRPC_LISTEN_PROMPTS)
        json_object_set_new(agreed, "promptsListChanged", json_true());
    if (flags & JSONRPC_LISTEN_RESOURCES)
        json_object_set_new(agreed, "resourcesListChanged", json_true());
    if ((flags & JSONRPC_LISTEN_UPDATES) && nuris > 0) {
        json_t *list = json_array();
        for (size_t i = 0; i < nuris; i++)
            json_array_append_new(list, json_string(uris[i]));
        json_object_set_new(agreed, "resourceSubscriptions", list);
    }
    size_t alen;
    char *a = jsonrpc_dump_new(agreed, &alen);
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/"
                               "acknowledged\",\"params\":{\"notifications\":";
    static const char mid[] = ",\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":";
    char *buf = xmalloc(sizeof head + alen + sizeof mid + id_len + 4);
    size_t o = jsonrpc_put(buf, 0, head, sizeof head - 1);
    o = jsonrpc_put(buf, o, a, alen);
    o = jsonrpc_put(buf, o, mid, sizeof mid - 1);
    o = jsonrpc_put(buf, o, id_raw, id_len);
    o = jsonrpc_put(buf, o, "}}}", 3);
    buf[o] = '\0';
    free(a);
    *len = o;
    return buf;
}

char *
jsonrpc_discover_from_init(const char *p, size_t n, const char *const *versions, uint64_t ttl_ms,
                           bool public_scope, size_t *len)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res)) {
        json_decref(root);
        return NULL;
    }
    json_t *caps = json_object_get(res, "capabilities");
    caps = json_is_object(caps) ? json_deep_copy(caps) : json_object();
    jsonrpc_stateless_caps(caps);
    json_t *out = json_pack("{s:s,s:o,s:o,s:I,s:s}", "resultType", "complete", "supportedVersions",
                            jsonrpc_versions_new(versions), "capabilities", caps, "ttlMs",
                            (json_int_t)ttl_ms, "cacheScope", public_scope ? "public" : "private");
    json_t *instructions = json_object_get(res, "instructions");
    if (json_is_string(instructions))
        json_object_set(out, "instructions", instructions);
    json_t *info = json_object_get(res, "serverInfo");
    if (json_is_object(info))
        json_object_set_new(out, "_meta",
                            json_pack("{s:O}", "io.modelcontextprotocol/serverInfo", info));
    json_decref(root);
    return jsonrpc_dump_new(out, len);
}

char *
jsonrpc_version_error_new(const char *id_raw, size_t id_len, const char *requested,
                          const char *const *supported, size_t *len)
{
    return jsonrpc_version_error_msg_new(id_raw, id_len, requested, supported,
                                         "Unsupported protocol version", len);
}

char *
jsonrpc_version_error_msg_new(const char *id_raw, size_t id_len, const char *requested,
                              const char *const *supported, const char *message, size_t *len)
{
    json_t *list = jsonrpc_versions_new(supported);
    json_t *req = json_string(requested);
    json_t *err =
        json_pack("{s:i,s:s,s:{s:o,s:o}}", "code", JSONRPC_UNSUPPORTED_VERSION, "message", message,
                  "data", "supported", list, "requested", req != NULL ? req : json_null());
    size_t elen;
    char *e = jsonrpc_dump_new(err, &elen);
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
    if (id_raw == NULL || id_len == 0) {
        id_raw = "null";
        id_len = 4;
    }
    char *buf = xmalloc(sizeof head - 1 + id_len + sizeof ",\"error\":" - 1 + elen + 2);
    size_t o = jsonrpc_put(buf, 0, head, sizeof head - 1);
    o = jsonrpc_put(buf, o, id_raw, id_len);
    o = jsonrpc_put(buf, o, ",\"error\":", sizeof ",\"error\":" - 1);
    o = jsonrpc_put(buf, o, e, elen);
    o = jsonrpc_put(buf, o, "}", 1);
    buf[o] = '\0';
    free(e);
    *len = o;
    return buf;
}

int
jsonrpc_error_code(const char *p, size_t n, int *code)
{
    struct jsonrpc_info info;
    if (jsonrpc_scan(p, n, &info, NULL) != JSONRPC_OK || info.kind != JSONRPC_ERROR)
        return -1;
    json_t *root = jsonrpc_load_result(p, n);
    json_t *c = json_object_get(json_object_get(root, "error"), "code");
    int rc = -1;
    if (json_is_integer(c) && json_integer_value(c) >= INT32_MIN
        && json_integer_value(c) <= INT32_MAX) {
        *code = (int)json_integer_value(c);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

char *
jsonrpc_member_json(const char *p, size_t n, const char *key, size_t *len)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *v = json_is_object(root) ? json_object_get(root, key) : NULL;
    char *out = NULL;
    if (v != NULL) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s == NULL)
            abort(); /* jansson failed to allocate: as xmalloc does */
        out = xstrdup(s);
        free(s);
        *len = strlen(out);
    }
    json_decref(root);
    return out;
}

/* --- a legacy session in front of a stateless child (session/session_modern.c) ------------- */

/*
 * The capabilities of a discover result a legacy client is shown: the server features of the
 * legacy revisions, each only when an object; listChanged and subscribe only where the gateway
 * carries them (listen, JSONRPC_LISTEN_* flags); tasks and extensions never (the stateless tasks
 * extension is not the 2025-11-25 tasks protocol).
 */
static json_t *
jsonrpc_legacy_caps(json_t *caps, unsigned listen)
{
    static const char *const kept[] = { "tools",   "prompts",     "resources",
                                        "logging", "completions", "experimental" };
    json_t *out = json_object();
    for (size_t i = 0; i < ARRAY_LEN(kept); i++) {
        json_t *v = json_object_get(caps, kept[i]);
        if (json_is_object(v))
            json_object_set_new(out, kept[i], json_deep_copy(v));
    }
    struct {
        const char *cap, *key;
        unsigned flag;
    } flags[] = { { "tools", "listChanged", JSONRPC_LISTEN_TOOLS },
                  { "prompts", "listChanged", JSONRPC_LISTEN_PROMPTS },
                  { "resources", "listChanged", JSONRPC_LISTEN_RESOURCES },
                  { "resources", "subscribe", JSONRPC_LISTEN_UPDATES } };
    for (size_t i = 0; i < ARRAY_LEN(flags); i++) {
        json_t *o = json_object_get(out, flags[i].cap);
        if (o != NULL && !(listen & flags[i].flag))
            json_object_del(o, flags[i].key);
    }
    return out;
}

char *
jsonrpc_init_from_discover(const char *p, size_t n, const char *version, unsigned listen,
                           const char *fallback_name, size_t *len)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res)) {
        json_decref(root);
        return NULL;
    }
    json_t *info =
        json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo");
    json_t *name = json_object_get(info, "name"), *ver = json_object_get(info, "version");
    json_t *server = json_pack("{s:s,s:s}", "name",
                               json_is_string(name) ? json_string_value(name) : fallback_name,
                               "version", json_is_string(ver) ? json_string_value(ver) : "");
    json_t *title = json_object_get(info, "title");
    if (json_is_string(title))
        json_object_set(server, "title", title);
    json_t *out = json_pack("{s:s,s:o,s:o}", "protocolVersion", version, "capabilities",
                            jsonrpc_legacy_caps(json_object_get(res, "capabilities"), listen),
                            "serverInfo", server);
    json_t *instructions = json_object_get(res, "instructions");
    if (json_is_string(instructions))
        json_object_set(out, "instructions", instructions);
    json_decref(root);
    return jsonrpc_dump_new(out, len);
}

int
jsonrpc_input_requests(const char *p, size_t n, size_t max, jsonrpc_input_cb *each, void *arg,
                       char **state, size_t *state_len)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *res = json_object_get(root, "result");
    json_t *asks = json_object_get(res, "inputRequests");
    json_t *st = json_object_get(res, "requestState");
    int count = -1;
    *state = NULL;
    if ((asks != NULL && !json_is_object(asks)) || (st != NULL && !json_is_string(st))
        || (asks == NULL && st == NULL) || json_object_size(asks) > max)
        goto out;
    const char *key;
    json_t *v;
    json_object_foreach(asks, key, v)
    {
        json_t *m = json_object_get(v, "method"), *params = json_object_get(v, "params");
        if (!json_is_string(m) || (params != NULL && !json_is_object(params)))
            goto out;
    }
    count = 0;
    json_object_foreach(asks, key, v)
    {
        char *params = NULL;
        json_t *pv = json_object_get(v, "params");
        if (pv != NULL) {
            char *s = json_dumps(pv, JSON_COMPACT);
            if (s == NULL)
                abort(); /* jansson failed to allocate: as xmalloc does */
            params = xstrdup(s);
            free(s);
        }
        each(key, json_string_value(json_object_get(v, "method")), params, arg);
        free(params);
        count++;
    }
    if (st != NULL) {
        char *s = json_dumps(st, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s == NULL)
            abort(); /* jansson failed to allocate: as xmalloc does */
        *state = xstrdup(s);
        free(s);
        *state_len = strlen(*state);
    }
out:
    json_decref(root);
    return count;
}

char *
jsonrpc_init_members(const char *p, size_t n, bool subscribe, char *version, size_t vsize,
                     size_t *len)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *res = json_object_get(root, "result");
    if (!json_is_object(res) || vsize == 0) {
        json_decref(root);
        return NULL;
    }
    json_t *v = json_object_get(res, "protocolVersion");
    snprintf(version, vsize, "%s", json_is_string(v) ? json_string_value(v) : "");
    json_t *copy = json_deep_copy(res);
    json_object_del(copy, "protocolVersion");
    json_t *caps = json_object_get(copy, "capabilities");
    if (json_is_object(caps)) {
        /*
         * What a pooled session is not served: subscriptions placed by the session. Its tasks
         * are (pool_session_task.c): tasks stays as the child declared it.
         */
        json_t *res_caps = json_object_get(caps, "resources");
        if (json_is_object(res_caps) && !subscribe)
            json_object_del(res_caps, "subscribe");
    }
    json_decref(root);
    size_t dlen;
    char *d = jsonrpc_dump_new(copy, &dlen);
    /* "{...}" -> "...": the members alone, for the gateway's protocolVersion to go first. */
    memmove(d, d + 1, dlen - 2);
    d[dlen - 2] = '\0';
    *len = dlen - 2;
    return d;
}

bool
jsonrpc_member_string(const char *p, size_t n, const char *key, char *out, size_t size)
{
    json_t *root = jsonrpc_load_result(p, n);
    json_t *v = json_is_object(root) ? json_object_get(root, key) : NULL;
    bool ok = json_is_string(v) && size > 0 && strlen(json_string_value(v)) < size;
    if (ok)
        snprintf(out, size, "%s", json_string_value(v));
    json_decref(root);
    return ok;
}
