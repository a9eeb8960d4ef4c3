/* SPDX-License-Identifier: MIT */
/*
 * W3C trace context (trace.h): the traceparent parser, the gateway's span ids, and the edits that
 * put a request's trace into its params._meta without copying the body (the relay's splice).
 */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "util.h"

static const char trace_hex[] = "0123456789abcdef";

static bool
trace_is_hex(const char *s, size_t n, bool *zero)
{
    *zero = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        if (c != '0')
            *zero = false;
    }
    return true;
}

bool
trace_parse(const char *s, size_t n, char out[TRACE_PARENT_LEN + 1])
{
    bool zero;
    if (n < TRACE_PARENT_LEN || !trace_is_hex(s, 2, &zero) || memcmp(s, "ff", 2) == 0)
        return false;
    /* Version 00 is exactly 55 characters; a later version may add fields after a '-'. */
    if (memcmp(s, "00", 2) == 0 ? n != TRACE_PARENT_LEN
                                : n > TRACE_PARENT_LEN && s[TRACE_PARENT_LEN] != '-')
        return false;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return false;
    if (!trace_is_hex(s + 3, 32, &zero) || zero || !trace_is_hex(s + 36, 16, &zero) || zero
        || !trace_is_hex(s + 53, 2, &zero))
        return false;
    memcpy(out, "00", 2);
    memcpy(out + 2, s + 2, TRACE_PARENT_LEN - 2);
    out[TRACE_PARENT_LEN] = '\0';
    return true;
}

void
trace_in_init(struct trace_in *tin, enum trace_mode mode, const char *traceparent,
              const char *tracestate)
{
    tin->mode = mode;
    tin->parent[0] = '\0';
    tin->state[0] = '\0';
    tin->state_len = 0;
    tin->trace_id[0] = '\0';
    if (traceparent == NULL || !trace_parse(traceparent, strlen(traceparent), tin->parent))
        return; /* a tracestate without a valid traceparent means nothing */
    if (tracestate == NULL || tracestate[0] == '\0')
        return;
    size_t n = strlen(tracestate), k = 0;
    if (n > TRACE_STATE_MAX)
        return;
    tin->state[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        char c = tracestate[i];
        if (c < 0x20 || c > 0x7e) {
            tin->state[0] = '\0';
            return;
        }
        if (c == '"' || c == '\\')
            tin->state[k++] = '\\';
        tin->state[k++] = c;
    }
    tin->state[k++] = '"';
    tin->state[k] = '\0';
    tin->state_len = k;
}

/*
 * bytes random bytes from the system's CSPRNG, drawn 4 KiB at a time: one RAND_bytes call costs
 * about 2.5 us here, the ids of one request need two, and each byte is handed out once. The ids
 * are not secrets, but one principal's must not let anyone compute another's.
 */
static void
trace_random(unsigned char *out, size_t bytes)
{
    static unsigned char pool[4096];
    static size_t left;
    if (left < bytes) {
        if (crypto_random(pool, sizeof pool) == -1)
            memset(pool, 0x5a, sizeof pool); /* never seen; a fixed id still joins a request's lines */
        left = sizeof pool;
    }
    memcpy(out, pool + sizeof pool - left, bytes);
    memset(pool + sizeof pool - left, 0, bytes);
    left -= bytes;
}

/* bytes (at most 16) random bytes, not all zero, as hex digits at out. */
static void
trace_mint_hex(char *out, size_t bytes)
{
    unsigned char raw[16];
    bool zero = true;
    for (int tries = 0; zero && tries < 4; tries++) {
        trace_random(raw, bytes);
        for (size_t i = 0; i < bytes; i++)
            zero = zero && raw[i] == 0;
    }
    if (zero)
        raw[bytes - 1] = 1;
    for (size_t i = 0; i < bytes; i++) {
        out[2 * i] = trace_hex[raw[i] >> 4];
        out[2 * i + 1] = trace_hex[raw[i] & 15];
    }
}

/*
 * The spans of params._meta.traceparent and .tracestate (len 0: absent). False when params or
 * _meta is there but no object, or names either key twice: such a message is left as it is.
 */
static bool
trace_spans(const char *body, size_t len, const struct jsonrpc_info *info, struct jsonrpc_span *tp,
            struct jsonrpc_span *ts)
{
    *tp = *ts = (struct jsonrpc_span){ 0, 0 };
    if (info->meta.len != 0)
        return body[info->meta.off] == '{'
               && jsonrpc_member_at(body, info->meta, "traceparent", tp) == 0
               && jsonrpc_member_at(body, info->meta, "tracestate", ts) == 0;
    if (info->params.len != 0)
        return true;
    /* No params object: absent (one is added), or an array (left as it is). */
    size_t off = 0;
    while (off < len && body[off] != '{')
        off++;
    struct jsonrpc_span params;
    return off < len
           && jsonrpc_member_at(body, (struct jsonrpc_span){ off, len - off }, "params", &params)
                  == 0
           && params.len == 0;
}

bool
trace_resolve(struct trace_in *tin, const char *body, size_t len, const struct jsonrpc_info *info,
              struct trace *t)
{
    if (tin == NULL || tin->mode == TRACE_OFF || info->kind != JSONRPC_REQUEST)
        return false;
    struct jsonrpc_span tp, ts;
    if (!trace_spans(body, len, info, &tp, &ts))
        return false;
    t->tp = tp;
    t->ts = ts;
    char got[256]; /* a later version may carry more fields */
    size_t glen;
    if (tp.len != 0 && jsonrpc_string_at(body, tp, got, sizeof got, &glen)
        && trace_parse(got, glen, t->parent)) {
        t->how = TRACE_STATE_KEEP;
    } else if (tin->parent[0] != '\0') {
        memcpy(t->parent, tin->parent, sizeof t->parent);
        t->how = tin->state_len != 0 ? TRACE_STATE_SET : TRACE_STATE_DROP;
    } else if (tin->mode == TRACE_START) {
        memcpy(t->parent, "00-", 3);
        trace_mint_hex(t->parent + 3, 16);
        memcpy(t->parent + 35, "-0000000000000000-01", 21); /* sampled: the child may record */
        t->how = TRACE_STATE_DROP;
    } else {
        return false;
    }
    t->state = t->how == TRACE_STATE_SET ? tin->state : NULL;
    t->state_len = t->how == TRACE_STATE_SET ? tin->state_len : 0;
    trace_mint_hex(t->parent + 36, 8); /* the gateway's hop */
    if (tin->trace_id[0] == '\0')
        trace_id_copy(t, tin->trace_id);
    return true;
}

void
trace_id_copy(const struct trace *t, char out[TRACE_ID_LEN + 1])
{
    memcpy(out, t->parent + 3, TRACE_ID_LEN);
    out[TRACE_ID_LEN] = '\0';
}

struct trace *
trace_copy(const struct trace *t)
{
    struct trace *c = xmalloc(sizeof(*c) + t->state_len);
    *c = *t;
    if (t->state_len != 0) {
        memcpy(c + 1, t->state, t->state_len);
        c->state = (const char *)(c + 1);
    }
    return c;
}

/* Appends s[0..n) to buf at *k. */
static void
trace_put(char *buf, size_t *k, const char *s, size_t n)
{
    memcpy(buf + *k, s, n);
    *k += n;
}

/* ,"traceparent":"..." and, when set and wanted, ,"tracestate":... at buf + *k. */
static void
trace_members(const struct trace *t, bool with_state, char *buf, size_t *k)
{
    trace_put(buf, k, ",\"traceparent\":\"", 16);
    trace_put(buf, k, t->parent, TRACE_PARENT_LEN);
    trace_put(buf, k, "\"", 1);
    if (with_state && t->how == TRACE_STATE_SET) {
        trace_put(buf, k, ",\"tracestate\":", 14);
        trace_put(buf, k, t->state, t->state_len);
    }
}

static bool
trace_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Where the key of the member whose value is at val starts (its opening quote). */
static size_t
trace_key_start(const char *body, struct jsonrpc_span val)
{
    size_t i = val.off;
    while (i > 0 && trace_ws(body[i - 1]))
        i--;
    i--; /* ':' */
    while (i > 0 && trace_ws(body[i - 1]))
        i--;
    i--; /* the key's closing quote; the key decodes to "tracestate": no raw quote inside */
    while (body[i - 1] != '"')
        i--;
    return i - 1;
}

/* The edit that removes the member whose value is at val from its object. */
static struct relay_edit
trace_remove(const char *body, size_t len, struct jsonrpc_span val)
{
    size_t key = trace_key_start(body, val), end = val.off + val.len;
    size_t before = key;
    while (before > 0 && trace_ws(body[before - 1]))
        before--;
    if (body[before - 1] == ',') /* not the first member: from the comma before it */
        return (struct relay_edit){ before - 1, end - (before - 1), "", 0 };
    size_t after = end;
    while (after < len && trace_ws(body[after]))
        after++;
    if (after < len && body[after] == ',') /* the first of several: through the comma after it */
        return (struct relay_edit){ key, after + 1 - key, "", 0 };
    return (struct relay_edit){ key, end - key, "", 0 };
}

int
trace_edits(const struct trace *t, const char *body, size_t len, const struct jsonrpc_info *info,
            char *buf, struct relay_edit *ed)
{
    struct jsonrpc_span tp = t->tp, ts = t->ts;
    size_t k = 0;
    if (info->meta.len == 0) {
        /* "_meta" (and "params" when there is none) added as the first member. */
        struct jsonrpc_span obj = info->params;
        bool params = obj.len == 0;
        if (params) {
            obj.off = 0;
            while (body[obj.off] != '{')
                obj.off++;
            obj.len = len - obj.off;
            trace_put(buf, &k, ",\"params\":{\"_meta\":{", 20);
        } else {
            trace_put(buf, &k, ",\"_meta\":{", 10);
        }
        size_t from = k;
        trace_members(t, true, buf, &k);
        memmove(buf + from, buf + from + 1, k - from - 1); /* the first member takes no comma */
        k--;
        trace_put(buf, &k, params ? "}}" : "}", params ? 2 : 1);
        ed[0] = (struct relay_edit){ obj.off + 1, 0, buf, jsonrpc_members_first(body, obj, buf, k) };
        return 1;
    }
    int n = 0;
    if (tp.len != 0) {
        char *v = buf + k;
        trace_put(buf, &k, "\"", 1);
        trace_put(buf, &k, t->parent, TRACE_PARENT_LEN);
        trace_put(buf, &k, "\"", 1);
        ed[n++] = (struct relay_edit){ tp.off, tp.len, v, (size_t)(buf + k - v) };
    } else if (ts.len != 0 && t->how == TRACE_STATE_DROP) {
        /* The tracestate member becomes the traceparent member. */
        char *v = buf + k;
        trace_members(t, false, buf, &k);
        size_t key = trace_key_start(body, ts);
        ed[n++] = (struct relay_edit){ key, ts.off + ts.len - key, v + 1, (size_t)(buf + k - v) - 1 };
        return n;
    } else {
        char *v = buf + k;
        trace_members(t, ts.len == 0, buf, &k);
        ed[n++] = (struct relay_edit){ info->meta.off + 1, 0, v,
                                       jsonrpc_members_first(body, info->meta, v,
                                                             (size_t)(buf + k - v)) };
    }
    if (t->how == TRACE_STATE_SET && ts.len != 0) {
        ed[n++] = (struct relay_edit){ ts.off, ts.len, t->state, t->state_len };
    } else if (t->how == TRACE_STATE_SET && tp.len != 0) {
        char *v = buf + k;
        trace_put(buf, &k, ",\"tracestate\":", 14);
        trace_put(buf, &k, t->state, t->state_len);
        ed[n++] = (struct relay_edit){ info->meta.off + 1, 0, v,
                                       jsonrpc_members_first(body, info->meta, v,
                                                             (size_t)(buf + k - v)) };
    } else if (t->how == TRACE_STATE_DROP && ts.len != 0) {
        ed[n++] = trace_remove(body, len, ts);
    }
    return n;
}
