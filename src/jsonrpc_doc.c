/* SPDX-License-Identifier: MIT */
/*
 * Small JSON documents read and written off the hot path, with jansson (part of the jsonrpc
 * module, the one includer of <jansson.h>): the JWT header and claims, JWK Sets, and the RFC 9728
 * protected resource metadata the gateway serves.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jsonrpc.h"

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

const char *
jsonrpc_doc_str(const struct jsonrpc_doc *d, const char *key)
{
    return json_string_value(jsonrpc_doc_get(d, key));
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
