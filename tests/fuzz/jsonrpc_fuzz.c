/* SPDX-License-Identifier: MIT */
/*
 * jsonrpc_scan against jansson. jansson decides whether the input is one JSON text; a small
 * walker over text jansson accepted finds the members of the three objects the scanner tracks
 * (top level, params, params._meta) with their raw spans, and jansson decodes each key and small
 * value. From that the target computes what the scanner must report, following the rules that
 * include/jsonrpc.h and src/mcp/jsonrpc.c document:
 *   - a raw NUL byte anywhere, or nesting deeper than 64, is JSONRPC_EPARSE (jansson allows both);
 *   - duplicate keys are legal JSON; a duplicate *tracked* key is JSONRPC_EINVALID;
 *   - "\u0000" is valid, except in a "method" short enough to fit info.method (a longer one only
 *     sets method_long, and the scanner never looks inside it);
 *   - jansson refuses numbers that overflow a double and "\u0000" inside keys: the first leaves
 *     the verdict open, the second is decided on a copy with "\u0001" in its place.
 * Then the helpers that take message text: flatten, batch split (elements are checked the same
 * way), the id splicing of jsonrpc_error_new and jsonrpc_cancel_new (the result must re-scan with
 * the very same id bytes), jsonrpc_id_u64, jsonrpc_quote, jsonrpc_protocol_version,
 * jsonrpc_task_state, and jsonrpc_member_at on a result (against the walker) with the tool policy's
 * filtering of result.tools built on it. Any mismatch aborts.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "jsonrpc.h"
#include "policy.h"

#define FZ_DEPTH_MAX   64  /* the scanner's nesting cap */
#define FZ_BATCH_MAX   256 /* as SESSION_BATCH_MAX: what the gateway passes */
#define FZ_RECURSE_MAX 2   /* batch elements are checked recursively this deep */
#define FZ_QUOTE_MAX   256 /* bytes of the input given to jsonrpc_quote */
#define FZ_LOAD_FLAGS  (JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

enum fz_verdict {
    FZ_REJECT = 0,
    FZ_ACCEPT,
    FZ_UNKNOWN, /* jansson could not tell (number overflow, no memory) */
};

struct fz_member {
    struct jsonrpc_span key; /* quotes included */
    struct jsonrpc_span val;
};

/* Occurrences of one tracked key in one object, and the first one's value. */
struct fz_found {
    unsigned count;
    struct jsonrpc_span val;
};

enum fz_top {
    FZ_JSONRPC = 0,
    FZ_ID,
    FZ_METHOD,
    FZ_PARAMS,
    FZ_RESULT,
    FZ_ERROR,
    FZ_NTOP,
};

enum fz_par {
    FZ_REQUEST_ID = 0,
    FZ_PROGRESS,
    FZ_META,
    FZ_TASK,
    FZ_NAME,
    FZ_URI,
    FZ_TASK_ID,
    FZ_LEVEL,
    FZ_REQUEST_STATE,
    FZ_INPUT_RESPONSES,
    FZ_NPAR,
};

enum fz_meta {
    FZ_META_PROGRESS = 0,
    FZ_META_VERSION,
    FZ_META_CAPS,
    FZ_META_LOG_LEVEL,
    FZ_META_SUBSCRIPTION,
    FZ_NMETA,
};

enum fz_res {
    FZ_RESULT_TYPE = 0,
    FZ_TTL,
    FZ_CACHE_SCOPE,
    FZ_NRES,
};

static const char *const fz_top_names[FZ_NTOP] = {
    "jsonrpc", "id", "method", "params", "result", "error",
};
/* Every key jsonrpc.h lists as tracked, per object: a duplicate of any of them is invalid. */
static const char *const fz_par_names[FZ_NPAR] = {
    "requestId", "progressToken", "_meta",        "task",           "name",
    "uri",       "taskId",        "level",        "requestState",   "inputResponses",
};
static const char *const fz_meta_names[FZ_NMETA] = {
    "progressToken",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
    "io.modelcontextprotocol/subscriptionId",
};
static const char *const fz_res_names[FZ_NRES] = { "resultType", "ttlMs", "cacheScope" };

static void fz_check_text(const char *p, size_t n, unsigned level);

/* ---- the walker: structure of a text jansson accepted, so values can be skipped naively ---- */

static size_t
fz_ws(const char *p, size_t n, size_t i)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

static bool
fz_is_delim(char c)
{
    return c == ',' || c == '}' || c == ']' || c == ':' || c == ' ' || c == '\t' || c == '\n'
           || c == '\r';
}

/* i at an opening quote; returns the offset after the closing one. */
static size_t
fz_skip_string(const char *p, size_t n, size_t i)
{
    for (i++; i < n && p[i] != '"'; i++) {
        if (p[i] == '\\')
            i++;
    }
    return i < n ? i + 1 : n;
}

/* The offset just after the value starting at i. */
static size_t
fz_skip_value(const char *p, size_t n, size_t i)
{
    unsigned depth = 0;

    do {
        if (i >= n)
            return n;
        if (p[i] == '"') {
            i = fz_skip_string(p, n, i);
            continue;
        }
        if (p[i] == '{' || p[i] == '[') {
            depth++;
        } else if (p[i] == '}' || p[i] == ']') {
            depth--;
        } else if (depth == 0) {
            while (i < n && !fz_is_delim(p[i]))
                i++;
            return i;
        }
        i++;
    } while (depth > 0);
    return i;
}

/* Deepest nesting of objects and arrays. */
static unsigned
fz_depth(const char *p, size_t n)
{
    unsigned depth = 0, max = 0;

    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"') {
            i = fz_skip_string(p, n, i) - 1;
        } else if (p[i] == '{' || p[i] == '[') {
            if (++depth > max)
                max = depth;
        } else if (p[i] == '}' || p[i] == ']') {
            depth--;
        }
    }
    return max;
}

/* Members of the object whose '{' is at *pos (start there); false after the last one. */
static bool
fz_next_member(const char *p, size_t n, size_t *pos, struct fz_member *m)
{
    size_t i;

    if (*pos >= n || p[*pos] == '}')
        return false;
    i = fz_ws(p, n, *pos + 1);
    if (i >= n || p[i] != '"')
        return false;
    m->key.off = i;
    i = fz_skip_string(p, n, i);
    m->key.len = i - m->key.off;
    i = fz_ws(p, n, i);
    i = i < n ? fz_ws(p, n, i + 1) : n; /* the ':' */
    m->val.off = i;
    i = fz_skip_value(p, n, i);
    m->val.len = i - m->val.off;
    *pos = fz_ws(p, n, i);
    return true;
}

/* Elements of the array whose '[' is at *pos (start there); false after the last one. */
static bool
fz_next_element(const char *p, size_t n, size_t *pos, struct jsonrpc_span *el)
{
    size_t i;

    if (*pos >= n || p[*pos] == ']')
        return false;
    i = fz_ws(p, n, *pos + 1);
    if (i >= n || p[i] == ']')
        return false;
    el->off = i;
    i = fz_skip_value(p, n, i);
    el->len = i - el->off;
    *pos = fz_ws(p, n, i);
    return true;
}

/* ---- jansson ---- */

static json_t *
fz_load_span(const char *p, struct jsonrpc_span sp)
{
    return json_loadb(p + sp.off, sp.len, FZ_LOAD_FLAGS, NULL);
}

static bool
fz_str_is(const json_t *s, const char *want)
{
    size_t len = strlen(want);

    return json_is_string(s) && json_string_length(s) == len
           && memcmp(json_string_value(s), want, len) == 0;
}

static enum fz_verdict
fz_verdict_of(const char *p, size_t n, const json_error_t *jerr)
{
    json_error_t again;
    enum fz_verdict v;
    char *copy;
    json_t *root;

    switch (json_error_code(jerr)) {
    case json_error_numeric_overflow:
    case json_error_out_of_memory:
        return FZ_UNKNOWN;
    case json_error_null_byte_in_key:
        break;
    case json_error_unknown:
    case json_error_stack_overflow:
    case json_error_cannot_open_file:
    case json_error_invalid_argument:
    case json_error_invalid_utf8:
    case json_error_premature_end_of_input:
    case json_error_end_of_input_expected:
    case json_error_invalid_syntax:
    case json_error_invalid_format:
    case json_error_wrong_type:
    case json_error_null_character:
    case json_error_null_value:
    case json_error_duplicate_key:
    case json_error_item_not_found:
    case json_error_index_out_of_range:
    default:
        return FZ_REJECT;
    }
    /* "\u0000" in a key is JSON jansson cannot store; the same text with "\u0001" is equivalent. */
    copy = malloc(n);
    FUZZ_CHECK(copy != NULL, "out of memory");
    memcpy(copy, p, n);
    for (size_t i = 0; i + 6 <= n; i++) {
        if (memcmp(copy + i, "\\u0000", 6) == 0)
            copy[i + 5] = '1';
    }
    root = json_loadb(copy, n, FZ_LOAD_FLAGS, &again);
    v = root != NULL ? FZ_ACCEPT : fz_verdict_of(copy, n, &again);
    json_decref(root);
    free(copy);
    return v;
}

/* ---- what the scanner must report ---- */

/* Counts the members of the object at off whose decoded key is one of names[0..nnames). */
static void
fz_collect(const char *p, size_t n, size_t off, const char *const *names, size_t nnames,
           struct fz_found *found)
{
    struct fz_member m;
    size_t pos = off;

    while (fz_next_member(p, n, &pos, &m)) {
        json_t *key = fz_load_span(p, m.key);

        FUZZ_CHECK(json_is_string(key), "walker: no key string at %zu", m.key.off);
        for (size_t i = 0; i < nnames; i++) {
            if (fz_str_is(key, names[i]) && found[i].count++ == 0)
                found[i].val = m.val;
        }
        json_decref(key);
    }
}

static bool
fz_any_dup(const struct fz_found *found, size_t nfound)
{
    for (size_t i = 0; i < nfound; i++) {
        if (found[i].count > 1)
            return true;
    }
    return false;
}

static char
fz_first(const char *p, const struct fz_found *f)
{
    return p[f->val.off];
}

/* The members the scanner reads, per tracked object. */
struct fz_tracked {
    struct fz_found top[FZ_NTOP];
    struct fz_found par[FZ_NPAR];
    struct fz_found meta[FZ_NMETA];
    struct fz_found res[FZ_NRES];
    size_t params_off; /* 0: no params object walked */
};

static void
fz_track(const char *p, size_t n, size_t off, struct fz_tracked *t)
{
    memset(t, 0, sizeof *t);
    fz_collect(p, n, off, fz_top_names, FZ_NTOP, t->top);
    /* With two "params" or "_meta" the message is invalid anyway: only a single one is walked. */
    if (t->top[FZ_PARAMS].count == 1 && fz_first(p, &t->top[FZ_PARAMS]) == '{') {
        t->params_off = t->top[FZ_PARAMS].val.off;
        fz_collect(p, n, t->params_off, fz_par_names, FZ_NPAR, t->par);
        if (t->par[FZ_META].count == 1 && fz_first(p, &t->par[FZ_META]) == '{')
            fz_collect(p, n, t->par[FZ_META].val.off, fz_meta_names, FZ_NMETA, t->meta);
    }
    if (t->top[FZ_RESULT].count == 1 && fz_first(p, &t->top[FZ_RESULT]) == '{')
        fz_collect(p, n, t->top[FZ_RESULT].val.off, fz_res_names, FZ_NRES, t->res);
}

/* Reads "jsonrpc", "id" and "method"; false when one of them makes the message invalid. */
static bool
fz_expect_fields(const char *p, const struct fz_tracked *t, struct jsonrpc_info *info)
{
    bool ok = true;

    if (t->top[FZ_JSONRPC].count != 0) {
        json_t *v = fz_load_span(p, t->top[FZ_JSONRPC].val);
        ok = fz_str_is(v, "2.0");
        json_decref(v);
    }
    if (t->top[FZ_ID].count != 0) {
        char c = fz_first(p, &t->top[FZ_ID]);
        info->id = t->top[FZ_ID].val;
        if (c == '"')
            info->id_type = JSONRPC_ID_STRING;
        else if (c == 'n')
            info->id_type = JSONRPC_ID_NULL;
        else if (c == '-' || (c >= '0' && c <= '9'))
            info->id_type = JSONRPC_ID_NUMBER;
        else
            ok = false;
    }
    if (t->top[FZ_METHOD].count != 0) {
        json_t *v = fz_load_span(p, t->top[FZ_METHOD].val);
        size_t len = json_string_length(v);
        if (!json_is_string(v))
            ok = false;
        else if (len >= JSONRPC_METHOD_MAX)
            info->method_long = true;
        else if (memchr(json_string_value(v), '\0', len) != NULL)
            ok = false;
        else
            memcpy(info->method, json_string_value(v), len + 1);
        json_decref(v);
    }
    return ok;
}

/* jsonrpc_classify, from the rules in jsonrpc.h; false when no kind fits. */
static bool
fz_expect_kind(const struct fz_tracked *t, const struct jsonrpc_info *info, enum jsonrpc_kind *kind)
{
    bool id = t->top[FZ_ID].count != 0;
    bool null_id = id && info->id_type == JSONRPC_ID_NULL;
    bool result = t->top[FZ_RESULT].count != 0;
    bool error = t->top[FZ_ERROR].count != 0;

    if (t->top[FZ_JSONRPC].count == 0)
        return false;
    if (t->top[FZ_METHOD].count != 0) {
        *kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
        return !result && !error && !null_id;
    }
    *kind = result ? JSONRPC_RESULT : JSONRPC_ERROR;
    return result != error && id && !(result && null_id);
}

/* The status and info jsonrpc_scan must give for the object at off. */
static int
fz_expect_object(const char *p, size_t n, size_t off, struct jsonrpc_info *info)
{
    struct fz_tracked t;
    bool ok;

    fz_track(p, n, off, &t);
    ok = !fz_any_dup(t.top, FZ_NTOP) && !fz_any_dup(t.par, FZ_NPAR)
         && !fz_any_dup(t.meta, FZ_NMETA) && !fz_any_dup(t.res, FZ_NRES);
    ok &= fz_expect_fields(p, &t, info);
    if (t.top[FZ_PARAMS].count != 0 && fz_first(p, &t.top[FZ_PARAMS]) != '{'
        && fz_first(p, &t.top[FZ_PARAMS]) != '[')
        ok = false;
    if (t.top[FZ_ERROR].count != 0 && fz_first(p, &t.top[FZ_ERROR]) != '{')
        ok = false;
    if (!ok || !fz_expect_kind(&t, info, &info->kind)) {
        memset(info, 0, sizeof *info);
        return JSONRPC_EINVALID;
    }
    if (info->kind == JSONRPC_REQUEST || info->kind == JSONRPC_NOTIFICATION) {
        info->request_id = t.par[FZ_REQUEST_ID].val;
        info->has_task = t.par[FZ_TASK].count != 0;
        info->progress_token = t.meta[FZ_META_PROGRESS].count != 0 ? t.meta[FZ_META_PROGRESS].val
                                                                   : t.par[FZ_PROGRESS].val;
        info->name = t.par[FZ_NAME].val;
        info->uri = t.par[FZ_URI].val;
        info->task_id = t.par[FZ_TASK_ID].val;
        info->level = t.par[FZ_LEVEL].val;
        info->request_state = t.par[FZ_REQUEST_STATE].val;
        info->input_responses = t.par[FZ_INPUT_RESPONSES].val;
        if (t.params_off != 0) {
            info->params = t.top[FZ_PARAMS].val;
            info->meta = t.par[FZ_META].val;
        }
        info->meta_version = t.meta[FZ_META_VERSION].val;
        info->meta_caps = t.meta[FZ_META_CAPS].val;
        info->meta_log_level = t.meta[FZ_META_LOG_LEVEL].val;
        info->meta_subscription = t.meta[FZ_META_SUBSCRIPTION].val;
    }
    if (t.top[FZ_RESULT].count != 0 && fz_first(p, &t.top[FZ_RESULT]) == '{') {
        info->result = t.top[FZ_RESULT].val;
        info->result_type = t.res[FZ_RESULT_TYPE].val;
        info->result_ttl = t.res[FZ_TTL].val;
        info->result_scope = t.res[FZ_CACHE_SCOPE].val;
    }
    return JSONRPC_OK;
}

/* The walker against the jansson DOM: every tracked key it found is there, with that value. */
static void
fz_check_dom(const char *p, size_t n, size_t off, const json_t *root)
{
    struct fz_tracked t;
    const json_t *params;

    fz_track(p, n, off, &t);
    if (fz_any_dup(t.top, FZ_NTOP))
        return;
    for (size_t i = 0; i < FZ_NTOP; i++) {
        const json_t *dom = json_object_get(root, fz_top_names[i]);
        FUZZ_CHECK((dom != NULL) == (t.top[i].count != 0), "walker and DOM disagree on \"%s\"",
                   fz_top_names[i]);
        if (dom != NULL && i <= FZ_METHOD) {
            json_t *v = fz_load_span(p, t.top[i].val);
            FUZZ_CHECK(json_equal(v, dom), "walker's \"%s\" is not the DOM's", fz_top_names[i]);
            json_decref(v);
        }
    }
    params = json_object_get(root, "params");
    if (t.params_off == 0 || fz_any_dup(t.par, FZ_NPAR))
        return;
    for (size_t i = 0; i < FZ_NPAR; i++) {
        const json_t *dom = json_object_get(params, fz_par_names[i]);
        FUZZ_CHECK((dom != NULL) == (t.par[i].count != 0), "walker and DOM disagree on params.%s",
                   fz_par_names[i]);
    }
}

/* ---- comparing ---- */

static bool
fz_span_eq(struct jsonrpc_span a, struct jsonrpc_span b)
{
    return a.off == b.off && a.len == b.len;
}

/* The plain spans of the later tracked keys, named for the message. */
static void
fz_check_spans(const char *what, const struct jsonrpc_info *got, const struct jsonrpc_info *want)
{
    static const struct {
        const char *name;
        size_t at;
    } spans[] = {
        { "name", offsetof(struct jsonrpc_info, name) },
        { "uri", offsetof(struct jsonrpc_info, uri) },
        { "taskId", offsetof(struct jsonrpc_info, task_id) },
        { "level", offsetof(struct jsonrpc_info, level) },
        { "params", offsetof(struct jsonrpc_info, params) },
        { "_meta", offsetof(struct jsonrpc_info, meta) },
        { "requestState", offsetof(struct jsonrpc_info, request_state) },
        { "inputResponses", offsetof(struct jsonrpc_info, input_responses) },
        { "_meta protocolVersion", offsetof(struct jsonrpc_info, meta_version) },
        { "_meta clientCapabilities", offsetof(struct jsonrpc_info, meta_caps) },
        { "_meta logLevel", offsetof(struct jsonrpc_info, meta_log_level) },
        { "_meta subscriptionId", offsetof(struct jsonrpc_info, meta_subscription) },
        { "result", offsetof(struct jsonrpc_info, result) },
        { "resultType", offsetof(struct jsonrpc_info, result_type) },
        { "ttlMs", offsetof(struct jsonrpc_info, result_ttl) },
        { "cacheScope", offsetof(struct jsonrpc_info, result_scope) },
    };

    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
        const struct jsonrpc_span *g = (const void *)((const char *)got + spans[i].at);
        const struct jsonrpc_span *w = (const void *)((const char *)want + spans[i].at);
        FUZZ_CHECK(fz_span_eq(*g, *w), "%s: %s span %zu+%zu, want %zu+%zu", what, spans[i].name,
                   g->off, g->len, w->off, w->len);
    }
}

static void
fz_check_info(const char *what, const struct jsonrpc_info *got, const struct jsonrpc_info *want)
{
    FUZZ_CHECK(got->kind == want->kind, "%s: kind %d, want %d", what, got->kind, want->kind);
    FUZZ_CHECK(got->id_type == want->id_type, "%s: id_type %d, want %d", what, got->id_type,
               want->id_type);
    FUZZ_CHECK(fz_span_eq(got->id, want->id), "%s: id span %zu+%zu, want %zu+%zu", what,
               got->id.off, got->id.len, want->id.off, want->id.len);
    FUZZ_CHECK(strcmp(got->method, want->method) == 0, "%s: method \"%s\", want \"%s\"", what,
               got->method, want->method);
    FUZZ_CHECK(got->method_long == want->method_long, "%s: method_long %d, want %d", what,
               got->method_long, want->method_long);
    FUZZ_CHECK(fz_span_eq(got->request_id, want->request_id),
               "%s: requestId span %zu+%zu, want %zu+%zu", what, got->request_id.off,
               got->request_id.len, want->request_id.off, want->request_id.len);
    FUZZ_CHECK(fz_span_eq(got->progress_token, want->progress_token),
               "%s: progressToken span %zu+%zu, want %zu+%zu", what, got->progress_token.off,
               got->progress_token.len, want->progress_token.off, want->progress_token.len);
    FUZZ_CHECK(got->has_task == want->has_task, "%s: has_task %d, want %d", what, got->has_task,
               want->has_task);
    FUZZ_CHECK(got->has_crlf == want->has_crlf, "%s: has_crlf %d, want %d", what, got->has_crlf,
               want->has_crlf);
    fz_check_spans(what, got, want);
}

/* The shape jsonrpc.h promises for each status, whatever the input. */
static void
fz_check_shape(int rc, const struct jsonrpc_info *info, const char *err)
{
    struct jsonrpc_info zero;

    FUZZ_CHECK(rc == JSONRPC_OK || rc == JSONRPC_EPARSE || rc == JSONRPC_EINVALID
                   || rc == JSONRPC_EBATCH,
               "unknown status %d", rc);
    if (rc == JSONRPC_OK) {
        FUZZ_CHECK(memchr(info->method, '\0', sizeof info->method) != NULL, "method unterminated");
        FUZZ_CHECK(!info->method_long || info->method[0] == '\0', "long method not emptied");
        FUZZ_CHECK((info->id_type == JSONRPC_ID_NONE) == (info->id.len == 0), "id span/type");
        return;
    }
    FUZZ_CHECK(err != NULL && err[0] != '\0', "status %d without an error phrase", rc);
    memset(&zero, 0, sizeof zero);
    zero.has_crlf = rc != JSONRPC_EPARSE && info->has_crlf;
    FUZZ_CHECK(memcmp(info, &zero, sizeof zero) == 0, "status %d (%s) left info filled", rc, err);
}

/* ---- the helpers that take message text ---- */

/* jsonrpc_id_u64's promise, computed differently: digits only, no leading zero, <= UINT64_MAX. */
static void
fz_check_id_u64(const char *p, struct jsonrpc_span sp)
{
    static const char max[] = "18446744073709551615";
    const char *s = p + sp.off;
    bool want = sp.len > 0 && sp.len <= 20 && (sp.len == 1 || s[0] != '0');
    uint64_t got = 0, v = 0;

    for (size_t i = 0; want && i < sp.len; i++) {
        want = s[i] >= '0' && s[i] <= '9';
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (want && sp.len == 20)
        want = memcmp(s, max, 20) <= 0;
    FUZZ_CHECK(jsonrpc_id_u64(p, sp, &got) == want, "jsonrpc_id_u64(%.*s) != %d", (int)sp.len, s,
               want);
    FUZZ_CHECK(!want || got == v, "jsonrpc_id_u64(%.*s) = %" PRIu64, (int)sp.len, s, got);
}

/* An error reply with the id spliced in must scan as an ERROR with the very same id bytes. */
static void
fz_check_error_new(const char *p, const struct jsonrpc_info *info, int code)
{
    const char *id = info->id.len != 0 ? p + info->id.off : NULL;
    struct jsonrpc_info ei;
    size_t len = 0;
    char *e = jsonrpc_error_new(id, info->id.len, code, info->method, &len);
    int rc = jsonrpc_scan(e, len, &ei, NULL);
    json_t *root, *err;

    FUZZ_CHECK(strlen(e) == len, "error reply: length %zu, strlen %zu", len, strlen(e));
    FUZZ_CHECK(rc == JSONRPC_OK && ei.kind == JSONRPC_ERROR, "error reply scans as %d: %s", rc, e);
    if (id != NULL) {
        FUZZ_CHECK(ei.id_type == info->id_type && ei.id.len == info->id.len
                       && memcmp(e + ei.id.off, id, ei.id.len) == 0,
                   "error reply changed the id: %s", e);
    } else {
        FUZZ_CHECK(ei.id_type == JSONRPC_ID_NULL, "error reply without id: %s", e);
    }
    root = json_loadb(e, len, FZ_LOAD_FLAGS, NULL);
    err = json_object_get(root, "error");
    if (root != NULL) {
        FUZZ_CHECK(json_number_value(json_object_get(err, "code")) == (double)code,
                   "error reply code: %s", e);
        FUZZ_CHECK(fz_str_is(json_object_get(err, "message"), info->method),
                   "error reply message: %s", e);
    }
    json_decref(root);
    free(e);
}

/* A cancel with a raw id spliced in must scan as that notification, with the same id bytes. */
static void
fz_check_cancel_new(const char *p, struct jsonrpc_span id, const char *reason)
{
    struct jsonrpc_info ci;
    size_t len = 0;
    char *c = jsonrpc_cancel_new(p + id.off, id.len, reason, &len);
    int rc = jsonrpc_scan(c, len, &ci, NULL);
    json_t *root;

    FUZZ_CHECK(strlen(c) == len, "cancel: length %zu, strlen %zu", len, strlen(c));
    FUZZ_CHECK(rc == JSONRPC_OK && ci.kind == JSONRPC_NOTIFICATION
                   && strcmp(ci.method, "notifications/cancelled") == 0,
               "cancel scans as %d: %s", rc, c);
    FUZZ_CHECK(ci.request_id.len == id.len
                   && memcmp(c + ci.request_id.off, p + id.off, id.len) == 0,
               "cancel changed the requestId: %s", c);
    root = json_loadb(c, len, FZ_LOAD_FLAGS, NULL);
    if (root != NULL && reason != NULL) {
        FUZZ_CHECK(fz_str_is(json_object_get(json_object_get(root, "params"), "reason"), reason),
                   "cancel reason: %s", c);
    }
    json_decref(root);
    free(c);
}

/* Flattening keeps the length, removes every CR and LF and changes nothing a re-scan reports. */
static void
fz_check_flatten(const char *p, size_t n, int rc, const struct jsonrpc_info *info)
{
    char *flat = malloc(n);
    struct jsonrpc_info fi, want = *info;
    const char *err = NULL;

    FUZZ_CHECK(flat != NULL, "out of memory");
    memcpy(flat, p, n);
    jsonrpc_flatten(flat, n);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(flat[i] == (p[i] == '\r' || p[i] == '\n' ? ' ' : p[i]), "flatten at %zu", i);
    }
    FUZZ_CHECK(jsonrpc_scan(flat, n, &fi, &err) == rc, "flattened text scans differently");
    want.has_crlf = false;
    fz_check_info("flattened", &fi, &want);
    free(flat);
}

/* The batch split against the walker, then each element as a message of its own. */
static void
fz_check_batch(const char *p, size_t n, bool known, unsigned level)
{
    struct jsonrpc_span el[FZ_BATCH_MAX], two[2], w;
    size_t count = 0, count2 = 0, walked = 0, pos = fz_ws(p, n, 0);
    int rc = jsonrpc_batch_split(p, n, el, FZ_BATCH_MAX, &count);
    int rc2 = jsonrpc_batch_split(p, n, two, 2, &count2);

    FUZZ_CHECK(rc == 0 || rc == -1, "batch split returned %d", rc);
    FUZZ_CHECK(count <= FZ_BATCH_MAX && count2 <= 2, "batch split overran max");
    if (known) {
        while (fz_next_element(p, n, &pos, &w)) {
            if (walked < FZ_BATCH_MAX && rc == 0)
                FUZZ_CHECK(fz_span_eq(el[walked], w), "batch element %zu span", walked);
            walked++;
        }
        FUZZ_CHECK(rc == (walked > FZ_BATCH_MAX ? -1 : 0), "batch of %zu: split gives %d", walked,
                   rc);
        FUZZ_CHECK(rc != 0 || count == walked, "batch of %zu: split counts %zu", walked, count);
    }
    if (rc == 0) {
        FUZZ_CHECK(rc2 == (count > 2 ? -1 : 0), "batch of %zu with max 2: %d", count, rc2);
        for (size_t i = 0; i < count2 && rc2 == 0; i++)
            FUZZ_CHECK(fz_span_eq(two[i], el[i]), "batch element %zu differs with max 2", i);
    }
    for (size_t i = 0; rc == 0 && i < count; i++) {
        FUZZ_CHECK(el[i].len > 0 && el[i].off + el[i].len <= n, "batch element %zu out of range",
                   i);
    }
    for (size_t i = 0; rc == 0 && level < FZ_RECURSE_MAX && i < count; i++)
        fz_check_text(p + el[i].off, el[i].len, level + 1);
}

/* protocolVersion: whatever fits is NUL-terminated, and the answer does not depend on outlen. */
static void
fz_check_protocol_version(const char *p, size_t n)
{
    static const size_t sizes[] = { 1, 2, 11, 64 };
    char big[256], out[64];
    int rc = jsonrpc_protocol_version(p, n, big, sizeof big);
    size_t len = rc == 0 ? strnlen(big, sizeof big) : 0;

    FUZZ_CHECK(rc == 0 || rc == -1, "protocol_version returned %d", rc);
    FUZZ_CHECK(rc != 0 || len < sizeof big, "protocol_version unterminated");
    FUZZ_CHECK(jsonrpc_protocol_version(p, n, out, 0) == -1, "protocol_version with outlen 0");
    for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
        int r = jsonrpc_protocol_version(p, n, out, sizes[i]);
        bool fits = rc == 0 && len < sizes[i];
        FUZZ_CHECK(r == (fits ? 0 : -1), "protocol_version with outlen %zu: %d", sizes[i], r);
        FUZZ_CHECK(!fits || strcmp(out, big) == 0, "protocol_version with outlen %zu", sizes[i]);
    }
}

static void
fz_check_task_state(const char *p, size_t n)
{
    struct jsonrpc_task t;
    int rc = jsonrpc_task_state(p, n, &t);

    FUZZ_CHECK(rc == 0 || rc == -1, "task_state returned %d", rc);
    if (rc != 0)
        return;
    FUZZ_CHECK(t.task_id[0] != '\0' && memchr(t.task_id, '\0', sizeof t.task_id) != NULL,
               "task_state: task_id");
    FUZZ_CHECK(memchr(t.status, '\0', sizeof t.status) != NULL, "task_state: status");
    FUZZ_CHECK(t.ttl_ms >= -1 && t.ttl_ms <= 9000000000000000LL, "task_state: ttl %" PRId64,
               t.ttl_ms);
}

/* jsonrpc_quote gives a JSON string the scanner accepts and jansson reads back. */
static void
fz_check_quote(const uint8_t *data, size_t size)
{
    size_t n = strnlen((const char *)data, size < FZ_QUOTE_MAX ? size : FZ_QUOTE_MAX), qlen = 0;
    char *s = malloc(n + 1), *q;
    struct jsonrpc_info info;
    json_t *v, *ref;

    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, data, n);
    s[n] = '\0';
    q = jsonrpc_quote(s, &qlen);
    FUZZ_CHECK(qlen >= 2 && q[0] == '"' && q[qlen - 1] == '"', "quote: not a string");
    FUZZ_CHECK(jsonrpc_scan(q, qlen, &info, NULL) == JSONRPC_EINVALID,
               "quote: scanner refuses %.*s", (int)qlen, q);
    v = json_loadb(q, qlen, FZ_LOAD_FLAGS, NULL);
    ref = json_string(s); /* NULL: invalid UTF-8, which quotes as "" */
    FUZZ_CHECK(fz_str_is(v, ref != NULL ? s : ""), "quote: reads back differently: %.*s", (int)qlen,
               q);
    json_decref(ref);
    json_decref(v);
    free(q);
    free(s);
    q = jsonrpc_quote(NULL, &qlen);
    FUZZ_CHECK(qlen == 2 && memcmp(q, "\"\"", 2) == 0, "quote(NULL)");
    free(q);
}

/*
 * result.tools as jsonrpc_member_at finds it, against the walker; then the tool policy's filter: a
 * filtered answer is shorter, scans as the same result with the same id bytes, and filtering it
 * again leaves it as it is (every tool kept is one the policy shows).
 */
static void
fz_check_tools(const char *p, size_t n, const struct jsonrpc_info *info, bool known)
{
    static const char *const key[1] = { "tools" };
    static struct policy *pol;
    struct fz_found found = { 0 };
    struct jsonrpc_span val;
    int rc = jsonrpc_member_at(p, info->result, "tools", &val);
    const char *bad, *why, *err = NULL;
    size_t len = 0, dropped = 0;

    if (known) {
        fz_collect(p, n, info->result.off, key, 1, &found);
        FUZZ_CHECK(rc == (found.count > 1 ? -1 : 0), "member_at: %d for %u \"tools\"", rc,
                   found.count);
        FUZZ_CHECK(rc != 0 || fz_span_eq(val, found.val), "member_at: span %zu+%zu, want %zu+%zu",
                   val.off, val.len, found.val.off, found.val.len);
    }
    if (pol == NULL) {
        pol = policy_new("fuzz");
        int denied =
            policy_add(pol, POLICY_DENY, (const char *[]){ "[a-m]*", "?", NULL }, &bad, &why);
        int scoped = policy_add(pol, POLICY_SCOPES, (const char *[]){ "*z*:s", NULL }, &bad, &why);
        FUZZ_CHECK(denied == 0 && scoped == 0, "fuzz policy");
    }
    char *f = policy_filter_tools(pol, 0, p, n, info, &len, &dropped, &err);
    FUZZ_CHECK(f == NULL ? dropped == 0 : dropped > 0 && err == NULL && len < n,
               "filter: %zu dropped, %zu of %zu bytes", dropped, len, n);
    FUZZ_CHECK(rc == 0 || err != NULL, "filter: \"tools\" twice passed");
    if (f == NULL)
        return;
    struct jsonrpc_info fi;
    FUZZ_CHECK(jsonrpc_scan(f, len, &fi, NULL) == JSONRPC_OK && fi.kind == JSONRPC_RESULT
                   && fi.id.len == info->id.len
                   && memcmp(f + fi.id.off, p + info->id.off, fi.id.len) == 0,
               "filtered answer: %.*s", (int)len, f);
    size_t len2 = 0, dropped2 = 0;
    char *again = policy_filter_tools(pol, 0, f, len, &fi, &len2, &dropped2, &err);
    FUZZ_CHECK(again == NULL && err == NULL, "filtering twice drops more: %.*s", (int)len, f);
    free(f);
}

/* Everything that may be done with text the scanner accepted. */
static void
fz_check_accepted(const char *p, size_t n, int rc, const struct jsonrpc_info *info, bool known,
                  unsigned level)
{
    int code = (int)(uint32_t)(n * 2654435761u);

    fz_check_flatten(p, n, rc, info);
    fz_check_protocol_version(p, n);
    fz_check_task_state(p, n);
    if (rc == JSONRPC_EBATCH)
        fz_check_batch(p, n, known, level);
    if (rc != JSONRPC_OK)
        return;
    fz_check_id_u64(p, info->id);
    fz_check_id_u64(p, info->request_id);
    fz_check_id_u64(p, info->progress_token);
    fz_check_error_new(p, info, code);
    if (info->kind == JSONRPC_RESULT && info->result.len != 0)
        fz_check_tools(p, n, info, known);
    if (info->kind == JSONRPC_REQUEST)
        fz_check_cancel_new(p, info->id, code & 1 ? info->method : NULL);
    if (info->request_id.len != 0)
        fz_check_cancel_new(p, info->request_id, code & 2 ? NULL : "fuzz");
}

static void
fz_check_text(const char *p, size_t n, unsigned level)
{
    struct jsonrpc_info info, want;
    const char *err = NULL;
    json_error_t jerr;
    json_t *root;
    enum fz_verdict verdict;
    int rc = jsonrpc_scan(p, n, &info, &err), expect;
    size_t first;

    fz_check_shape(rc, &info, err);
    if (memchr(p, '\0', n) != NULL) {
        FUZZ_CHECK(rc == JSONRPC_EPARSE, "a NUL byte, but status %d", rc);
        return;
    }
    root = json_loadb(p, n, FZ_LOAD_FLAGS, &jerr);
    verdict = root != NULL ? FZ_ACCEPT : fz_verdict_of(p, n, &jerr);
    if (verdict == FZ_REJECT) {
        FUZZ_CHECK(rc == JSONRPC_EPARSE, "jansson refuses (%s), but status %d", jerr.text, rc);
        return;
    }
    if (verdict == FZ_UNKNOWN) {
        json_decref(root);
        if (rc != JSONRPC_EPARSE)
            fz_check_accepted(p, n, rc, &info, false, level);
        return;
    }
    if (fz_depth(p, n) > FZ_DEPTH_MAX) {
        FUZZ_CHECK(rc == JSONRPC_EPARSE, "nesting over %d, but status %d", FZ_DEPTH_MAX, rc);
        json_decref(root);
        return;
    }
    memset(&want, 0, sizeof want);
    first = fz_ws(p, n, 0);
    if (p[first] == '[')
        expect = JSONRPC_EBATCH;
    else if (p[first] == '{')
        expect = fz_expect_object(p, n, first, &want);
    else
        expect = JSONRPC_EINVALID;
    want.has_crlf = memchr(p, '\r', n) != NULL || memchr(p, '\n', n) != NULL;
    FUZZ_CHECK(rc == expect, "status %d (%s), want %d", rc, rc == JSONRPC_OK ? "ok" : err, expect);
    fz_check_info("scan", &info, &want);
    if (json_is_object(root))
        fz_check_dom(p, n, first, root);
    json_decref(root);
    fz_check_accepted(p, n, rc, &info, true, level);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    json_object_seed(1); /* reproducible: no seed from /dev/urandom */
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jsonrpc_span el[4];
    size_t count = 0;

    fz_check_text((const char *)data, size, 0);
    /* Only promised for a batch, but it must stay inside any buffer. */
    if (jsonrpc_batch_split((const char *)data, size, el, ARRAY_LEN(el), &count) == 0) {
        for (size_t i = 0; i < count; i++)
            FUZZ_CHECK(el[i].off + el[i].len <= size, "batch split out of range");
    }
    fz_check_quote(data, size);
    return 0;
}
