/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC 2.0 on the hot path. jsonrpc_scan checks that a buffer is exactly one JSON text (the
 * full RFC 8259 grammar, strict UTF-8, nesting capped at 64) in one pass, classifies the message
 * and records the byte spans that routing needs. It allocates nothing and builds no DOM: the
 * original bytes are what gets forwarded. The few messages the gateway writes itself (errors,
 * cancels), the one-off initialize and task bookkeeping and the small documents of auth use
 * jansson, in jsonrpc_doc.c (the same module, the one includer of <jansson.h>).
 *
 * Unicode escapes: a \uD800-\uDBFF escape must be followed by a \uDC00-\uDFFF escape, and a lone
 * \uDC00-\uDFFF escape is rejected too (jansson 2.14 rejects both as well). \u0000 is valid JSON
 * and accepted, except in "method", which must fit a C string.
 */
#include "jsonrpc.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc_int.h"

#define JSONRPC_DEPTH_MAX 64

/* Objects whose keys the scanner looks at; anything deeper is only validated. */
enum jsonrpc_level {
    JSONRPC_LEVEL_TOP = 0,
    JSONRPC_LEVEL_PARAMS,
    JSONRPC_LEVEL_META,
    JSONRPC_LEVEL_RESULT, /* the result object of a response */
};

/* Nesting depth of each tracked object (the top-level object is 1). */
static const unsigned jsonrpc_level_depth[] = { 1, 2, 3, 2 };

/* Tracked keys; the value is also the key's bit in an object's "seen" mask. */
enum jsonrpc_key {
    JSONRPC_KEY_NONE = 0,
    JSONRPC_KEY_JSONRPC,
    JSONRPC_KEY_ID,
    JSONRPC_KEY_METHOD,
    JSONRPC_KEY_PARAMS,
    JSONRPC_KEY_RESULT,
    JSONRPC_KEY_ERROR,
    JSONRPC_KEY_REQUEST_ID,
    JSONRPC_KEY_PROGRESS_TOKEN,
    JSONRPC_KEY_META,
    JSONRPC_KEY_TASK,
    JSONRPC_KEY_META_PROGRESS_TOKEN,
    JSONRPC_KEY_NAME,
    JSONRPC_KEY_URI,
    JSONRPC_KEY_TASK_ID,
    JSONRPC_KEY_LEVEL,
    JSONRPC_KEY_REQUEST_STATE,
    JSONRPC_KEY_INPUT_RESPONSES,
    JSONRPC_KEY_META_VERSION,
    JSONRPC_KEY_META_CAPS,
    JSONRPC_KEY_META_LOG_LEVEL,
    JSONRPC_KEY_META_SUBSCRIPTION,
    JSONRPC_KEY_RESULT_TYPE,
    JSONRPC_KEY_TTL,
    JSONRPC_KEY_CACHE_SCOPE,
};

struct jsonrpc_keydef {
    const char *name;
    size_t len;
    enum jsonrpc_level level;
};

static const struct jsonrpc_keydef jsonrpc_keys[] = {
    [JSONRPC_KEY_NONE] = { "", 0, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_JSONRPC] = { "jsonrpc", 7, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_ID] = { "id", 2, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_METHOD] = { "method", 6, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_PARAMS] = { "params", 6, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_RESULT] = { "result", 6, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_ERROR] = { "error", 5, JSONRPC_LEVEL_TOP },
    [JSONRPC_KEY_REQUEST_ID] = { "requestId", 9, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_PROGRESS_TOKEN] = { "progressToken", 13, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_META] = { "_meta", 5, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_TASK] = { "task", 4, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_META_PROGRESS_TOKEN] = { "progressToken", 13, JSONRPC_LEVEL_META },
    [JSONRPC_KEY_NAME] = { "name", 4, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_URI] = { "uri", 3, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_TASK_ID] = { "taskId", 6, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_LEVEL] = { "level", 5, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_REQUEST_STATE] = { "requestState", 12, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_INPUT_RESPONSES] = { "inputResponses", 14, JSONRPC_LEVEL_PARAMS },
    [JSONRPC_KEY_META_VERSION] = { "io.modelcontextprotocol/protocolVersion", 39,
                                   JSONRPC_LEVEL_META },
    [JSONRPC_KEY_META_CAPS] = { "io.modelcontextprotocol/clientCapabilities", 42,
                                JSONRPC_LEVEL_META },
    [JSONRPC_KEY_META_LOG_LEVEL] = { "io.modelcontextprotocol/logLevel", 32, JSONRPC_LEVEL_META },
    [JSONRPC_KEY_META_SUBSCRIPTION] = { "io.modelcontextprotocol/subscriptionId", 38,
                                        JSONRPC_LEVEL_META },
    [JSONRPC_KEY_RESULT_TYPE] = { "resultType", 10, JSONRPC_LEVEL_RESULT },
    [JSONRPC_KEY_TTL] = { "ttlMs", 5, JSONRPC_LEVEL_RESULT },
    [JSONRPC_KEY_CACHE_SCOPE] = { "cacheScope", 10, JSONRPC_LEVEL_RESULT },
};

/* Longer than any tracked key, so a decoded key that does not fit is simply not tracked. */
#define JSONRPC_KEY_BUF 48

#define JSONRPC_BIT(k) (1u << (unsigned)(k))

struct jsonrpc_scanner {
    const unsigned char *base;
    const unsigned char *end;
    struct jsonrpc_info *info;
    const char *err;                 /* syntax error: not one JSON text */
    const char *invalid;             /* first semantic error: JSON, but not JSON-RPC */
    unsigned top_seen;               /* JSONRPC_BIT of each tracked top-level key */
    struct jsonrpc_span plain_token; /* params.progressToken */
    struct jsonrpc_span meta_token;  /* params._meta.progressToken */
};

static const unsigned char *jsonrpc_object(struct jsonrpc_scanner *sc, const unsigned char *s,
                                           enum jsonrpc_level level);

static const unsigned char *
jsonrpc_fail(struct jsonrpc_scanner *sc, const char *why)
{
    sc->err = why;
    return NULL;
}

static void
jsonrpc_invalid(struct jsonrpc_scanner *sc, const char *why)
{
    if (sc->invalid == NULL)
        sc->invalid = why;
}

static struct jsonrpc_span
jsonrpc_span_of(const struct jsonrpc_scanner *sc, const unsigned char *from,
                const unsigned char *to)
{
    struct jsonrpc_span sp = { (size_t)(from - sc->base), (size_t)(to - from) };
    return sp;
}

static inline bool
jsonrpc_is_digit(unsigned c)
{
    return c - '0' < 10;
}

static inline const unsigned char *
jsonrpc_ws(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *end = sc->end;

    while (s < end && *s <= ' ') {
        if (*s == '\n' || *s == '\r')
            sc->info->has_crlf = true;
        else if (*s != ' ' && *s != '\t')
            break;
        s++;
    }
    return s;
}

/* Bytes a string can hold as they are: printable ASCII other than '"' and '\\'. */
static inline bool
jsonrpc_is_plain(unsigned c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

#define JSONRPC_ONES  0x0101010101010101ull
#define JSONRPC_HIGHS 0x8080808080808080ull

/*
 * High bit set in each byte of v that is not plain. Borrows only travel upwards from a byte that
 * really matched, so the lowest set bit is exact (higher ones may be false positives).
 */
static inline uint64_t
jsonrpc_swar_special(uint64_t v)
{
    uint64_t q = v ^ (JSONRPC_ONES * '"');
    uint64_t b = v ^ (JSONRPC_ONES * '\\');
    uint64_t ctl = (v - JSONRPC_ONES * 0x20) & ~v;
    uint64_t zq = (q - JSONRPC_ONES) & ~q;
    uint64_t zb = (b - JSONRPC_ONES) & ~b;

    return (ctl | zq | zb | v) & JSONRPC_HIGHS;
}

/* Skips plain string bytes, eight at a time; returns the first other byte, or end. */
static inline const unsigned char *
jsonrpc_plain_run(const unsigned char *s, const unsigned char *end)
{
    while (end - s >= 8) {
        uint64_t v;
        memcpy(&v, s, sizeof v);
        uint64_t m = jsonrpc_swar_special(v);
        if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return s + (__builtin_ctzll(m) >> 3);
#else
            while (jsonrpc_is_plain(*s))
                s++;
            return s;
#endif
        }
        s += 8;
    }
    while (s < end && jsonrpc_is_plain(*s))
        s++;
    return s;
}

/* Validates UTF-8 sequences starting at s (*s >= 0x80): no overlongs, surrogates or > U+10FFFF. */
static const unsigned char *
jsonrpc_utf8(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *end = sc->end;

    do {
        unsigned c = *s, lo = 0x80, hi = 0xBF;
        size_t need;

        if (c < 0xC2) {
            return jsonrpc_fail(sc, "invalid UTF-8");
        } else if (c < 0xE0) {
            need = 1;
        } else if (c < 0xF0) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c < 0xF5) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return jsonrpc_fail(sc, "invalid UTF-8");
        }
        if ((size_t)(end - s) <= need || s[1] < lo || s[1] > hi)
            return jsonrpc_fail(sc, "invalid UTF-8");
        for (size_t i = 2; i <= need; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return jsonrpc_fail(sc, "invalid UTF-8");
        }
        s += need + 1;
    } while (s < end && *s >= 0x80);
    return s;
}

/* One escape at s (*s == '\\'); a high surrogate must be followed by a low one. */
static const unsigned char *
jsonrpc_escape(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *end = sc->end;
    long cp, lo;

    if (end - s < 2)
        return jsonrpc_fail(sc, "unterminated string");
    switch (s[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        return s + 2;
    case 'u':
        break;
    default:
        return jsonrpc_fail(sc, "invalid escape");
    }
    if ((cp = jsonrpc_hex4(s + 2, end)) < 0)
        return jsonrpc_fail(sc, "invalid \\u escape");
    s += 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return jsonrpc_fail(sc, "unpaired surrogate escape");
    if (cp < 0xD800 || cp > 0xDBFF)
        return s;
    if (end - s < 2 || s[0] != '\\' || s[1] != 'u')
        return jsonrpc_fail(sc, "unpaired surrogate escape");
    if ((lo = jsonrpc_hex4(s + 2, end)) < 0)
        return jsonrpc_fail(sc, "invalid \\u escape");
    if (lo < 0xDC00 || lo > 0xDFFF)
        return jsonrpc_fail(sc, "unpaired surrogate escape");
    return s + 6;
}

/* A string whose opening quote is just before s; returns the byte after the closing quote. */
static const unsigned char *
jsonrpc_string(struct jsonrpc_scanner *sc, const unsigned char *s, bool *escaped)
{
    const unsigned char *end = sc->end;
    bool esc = false;

    for (;;) {
        s = jsonrpc_plain_run(s, end);
        if (s == end)
            return jsonrpc_fail(sc, "unterminated string");
        if (*s == '"') {
            *escaped = esc;
            return s + 1;
        }
        if (*s == '\\') {
            esc = true;
            do {
                s = jsonrpc_escape(sc, s);
            } while (s != NULL && s < end && *s == '\\');
        } else if (*s < 0x20) {
            return jsonrpc_fail(sc, "control character in string");
        } else {
            s = jsonrpc_utf8(sc, s);
        }
        if (s == NULL)
            return NULL;
    }
}

static const unsigned char *
jsonrpc_digits(const unsigned char *s, const unsigned char *end)
{
    while (s < end && jsonrpc_is_digit(*s))
        s++;
    return s;
}

static const unsigned char *
jsonrpc_number(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *end = sc->end;

    if (*s == '-')
        s++;
    if (s == end || !jsonrpc_is_digit(*s))
        return jsonrpc_fail(sc, "invalid number");
    s = *s == '0' ? s + 1 : jsonrpc_digits(s, end);
    if (s < end && *s == '.') {
        if (++s == end || !jsonrpc_is_digit(*s))
            return jsonrpc_fail(sc, "invalid number");
        s = jsonrpc_digits(s, end);
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        if (++s < end && (*s == '+' || *s == '-'))
            s++;
        if (s == end || !jsonrpc_is_digit(*s))
            return jsonrpc_fail(sc, "invalid number");
        s = jsonrpc_digits(s, end);
    }
    return s;
}

static const unsigned char *
jsonrpc_literal(struct jsonrpc_scanner *sc, const unsigned char *s, const char *word, size_t len)
{
    if ((size_t)(sc->end - s) < len || memcmp(s, word, len) != 0)
        return jsonrpc_fail(sc, "invalid literal");
    return s + len;
}

/* One scalar starting at s (not a container). */
static const unsigned char *
jsonrpc_scalar(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    bool esc;

    switch (*s) {
    case '"':
        return jsonrpc_string(sc, s + 1, &esc);
    case 't':
        return jsonrpc_literal(sc, s, "true", 4);
    case 'f':
        return jsonrpc_literal(sc, s, "false", 5);
    case 'n':
        return jsonrpc_literal(sc, s, "null", 4);
    default:
        if (*s == '-' || jsonrpc_is_digit(*s))
            return jsonrpc_number(sc, s);
        return jsonrpc_fail(sc, "unexpected character");
    }
}

/* `"key" :` followed by whitespace; returns the start of the member's value. */
static const unsigned char *
jsonrpc_member_key(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    bool esc;

    if (s == sc->end || *s != '"')
        return jsonrpc_fail(sc, "expected a string key");
    if ((s = jsonrpc_string(sc, s + 1, &esc)) == NULL)
        return NULL;
    s = jsonrpc_ws(sc, s);
    if (s == sc->end || *s != ':')
        return jsonrpc_fail(sc, "expected ':'");
    return jsonrpc_ws(sc, s + 1);
}

/*
 * Validates one value starting at s inside `depth` open containers, without recursion: bit i of
 * objs says whether the i-th container opened here is an object.
 */
static const unsigned char *
jsonrpc_value(struct jsonrpc_scanner *sc, const unsigned char *s, unsigned depth)
{
    const unsigned char *end = sc->end;
    uint64_t objs = 0;
    unsigned level = 0;

    for (;;) {
        if (s == end)
            return jsonrpc_fail(sc, "unexpected end of input");
        if (*s == '{' || *s == '[') {
            bool obj = *s == '{';
            if (depth + level >= JSONRPC_DEPTH_MAX)
                return jsonrpc_fail(sc, "nesting deeper than 64");
            objs = obj ? objs | 1ull << level : objs & ~(1ull << level);
            level++;
            s = jsonrpc_ws(sc, s + 1);
            if (s == end || *s != (obj ? '}' : ']')) {
                if (obj && (s = jsonrpc_member_key(sc, s)) == NULL)
                    return NULL;
                continue;
            }
            s++;
            level--;
        } else if ((s = jsonrpc_scalar(sc, s)) == NULL) {
            return NULL;
        }
        /* After a value: close containers until one continues with ','. */
        for (;;) {
            bool obj;
            if (level == 0)
                return s;
            s = jsonrpc_ws(sc, s);
            if (s == end)
                return jsonrpc_fail(sc, "unexpected end of input");
            obj = objs >> (level - 1) & 1;
            if (*s == ',') {
                s = jsonrpc_ws(sc, s + 1);
                if (obj && (s = jsonrpc_member_key(sc, s)) == NULL)
                    return NULL;
                break;
            }
            if (*s != (obj ? '}' : ']'))
                return jsonrpc_fail(sc, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            s++;
            level--;
        }
    }
}

static enum jsonrpc_key
jsonrpc_key_find(enum jsonrpc_level level, const unsigned char *s, size_t len, bool escaped)
{
    char buf[JSONRPC_KEY_BUF];

    if (escaped) {
        if (!jsonrpc_unescape(s, len, buf, sizeof buf, &len))
            return JSONRPC_KEY_NONE;
        s = (const unsigned char *)buf;
    }
    for (size_t k = 1; k < ARRAY_LEN(jsonrpc_keys); k++) {
        const struct jsonrpc_keydef *kd = &jsonrpc_keys[k];
        if (kd->level == level && kd->len == len && memcmp(kd->name, s, len) == 0)
            return (enum jsonrpc_key)k;
    }
    return JSONRPC_KEY_NONE;
}

static const unsigned char *
jsonrpc_member_version(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *str = s + 1;
    char buf[4];
    size_t len;
    bool esc;

    if (*s != '"') {
        jsonrpc_invalid(sc, "\"jsonrpc\" is not \"2.0\"");
        return jsonrpc_value(sc, s, 1);
    }
    if ((s = jsonrpc_string(sc, str, &esc)) == NULL)
        return NULL;
    if (!jsonrpc_unescape(str, (size_t)(s - 1 - str), buf, sizeof buf, &len) || len != 3
        || memcmp(buf, "2.0", 3) != 0)
        jsonrpc_invalid(sc, "\"jsonrpc\" is not \"2.0\"");
    return s;
}

static const unsigned char *
jsonrpc_member_id(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *start = s;
    struct jsonrpc_info *info = sc->info;

    if ((s = jsonrpc_value(sc, s, 1)) == NULL)
        return NULL;
    info->id = jsonrpc_span_of(sc, start, s);
    if (*start == '"')
        info->id_type = JSONRPC_ID_STRING;
    else if (*start == 'n')
        info->id_type = JSONRPC_ID_NULL;
    else if (*start == '-' || jsonrpc_is_digit(*start))
        info->id_type = JSONRPC_ID_NUMBER;
    else
        jsonrpc_invalid(sc, "\"id\" is not a string, number or null");
    return s;
}

static const unsigned char *
jsonrpc_member_method(struct jsonrpc_scanner *sc, const unsigned char *s)
{
    const unsigned char *str = s + 1;
    struct jsonrpc_info *info = sc->info;
    size_t len;
    bool esc;

    if (*s != '"') {
        jsonrpc_invalid(sc, "\"method\" is not a string");
        return jsonrpc_value(sc, s, 1);
    }
    if ((s = jsonrpc_string(sc, str, &esc)) == NULL)
        return NULL;
    len = (size_t)(s - 1 - str);
    if (!esc && len < sizeof info->method) {
        memcpy(info->method, str, len);
    } else if (!jsonrpc_unescape(str, len, info->method, sizeof info->method - 1, &len)) {
        info->method_long = true;
        len = 0;
    } else if (memchr(info->method, '\0', len) != NULL) {
        jsonrpc_invalid(sc, "\"method\" contains NUL");
        len = 0;
    }
    info->method[len] = '\0';
    return s;
}

/* Where the value of a key reported as a plain span goes (JSONRPC_KEY_NAME and after). */
static const size_t jsonrpc_key_at[] = {
    [JSONRPC_KEY_NAME] = offsetof(struct jsonrpc_info, name),
    [JSONRPC_KEY_URI] = offsetof(struct jsonrpc_info, uri),
    [JSONRPC_KEY_TASK_ID] = offsetof(struct jsonrpc_info, task_id),
    [JSONRPC_KEY_LEVEL] = offsetof(struct jsonrpc_info, level),
    [JSONRPC_KEY_REQUEST_STATE] = offsetof(struct jsonrpc_info, request_state),
    [JSONRPC_KEY_INPUT_RESPONSES] = offsetof(struct jsonrpc_info, input_responses),
    [JSONRPC_KEY_META_VERSION] = offsetof(struct jsonrpc_info, meta_version),
    [JSONRPC_KEY_META_CAPS] = offsetof(struct jsonrpc_info, meta_caps),
    [JSONRPC_KEY_META_LOG_LEVEL] = offsetof(struct jsonrpc_info, meta_log_level),
    [JSONRPC_KEY_META_SUBSCRIPTION] = offsetof(struct jsonrpc_info, meta_subscription),
    [JSONRPC_KEY_RESULT_TYPE] = offsetof(struct jsonrpc_info, result_type),
    [JSONRPC_KEY_TTL] = offsetof(struct jsonrpc_info, result_ttl),
    [JSONRPC_KEY_CACHE_SCOPE] = offsetof(struct jsonrpc_info, result_scope),
};

static struct jsonrpc_span *
jsonrpc_key_span(struct jsonrpc_info *info, enum jsonrpc_key key)
{
    return (struct jsonrpc_span *)(void *)((char *)info + jsonrpc_key_at[key]);
}

/* The value of a member of a tracked object; depth is that object's depth. */
static const unsigned char *
jsonrpc_member(struct jsonrpc_scanner *sc, const unsigned char *s, enum jsonrpc_key key,
               unsigned depth)
{
    const unsigned char *start = s;

    switch (key) {
    case JSONRPC_KEY_NONE:
        return jsonrpc_value(sc, s, depth);
    case JSONRPC_KEY_RESULT:
        if (*s != '{')
            return jsonrpc_value(sc, s, depth);
        s = jsonrpc_object(sc, s + 1, JSONRPC_LEVEL_RESULT);
        if (s != NULL)
            sc->info->result = jsonrpc_span_of(sc, start, s);
        return s;
    case JSONRPC_KEY_JSONRPC:
        return jsonrpc_member_version(sc, s);
    case JSONRPC_KEY_ID:
        return jsonrpc_member_id(sc, s);
    case JSONRPC_KEY_METHOD:
        return jsonrpc_member_method(sc, s);
    case JSONRPC_KEY_PARAMS:
        if (*s == '{') {
            s = jsonrpc_object(sc, s + 1, JSONRPC_LEVEL_PARAMS);
            if (s != NULL)
                sc->info->params = jsonrpc_span_of(sc, start, s);
            return s;
        }
        if (*s != '[')
            jsonrpc_invalid(sc, "\"params\" is not an object or array");
        return jsonrpc_value(sc, s, depth);
    case JSONRPC_KEY_ERROR:
        if (*s != '{')
            jsonrpc_invalid(sc, "\"error\" is not an object");
        return jsonrpc_value(sc, s, depth);
    case JSONRPC_KEY_META:
        s = *s == '{' ? jsonrpc_object(sc, s + 1, JSONRPC_LEVEL_META) : jsonrpc_value(sc, s, depth);
        if (s != NULL)
            sc->info->meta = jsonrpc_span_of(sc, start, s);
        return s;
    case JSONRPC_KEY_TASK:
        sc->info->has_task = true;
        return jsonrpc_value(sc, s, depth);
    case JSONRPC_KEY_REQUEST_ID:
        if ((s = jsonrpc_value(sc, s, depth)) != NULL)
            sc->info->request_id = jsonrpc_span_of(sc, start, s);
        return s;
    case JSONRPC_KEY_PROGRESS_TOKEN:
        if ((s = jsonrpc_value(sc, s, depth)) != NULL)
            sc->plain_token = jsonrpc_span_of(sc, start, s);
        return s;
    case JSONRPC_KEY_META_PROGRESS_TOKEN:
        if ((s = jsonrpc_value(sc, s, depth)) != NULL)
            sc->meta_token = jsonrpc_span_of(sc, start, s);
        return s;
    case JSONRPC_KEY_NAME:
    case JSONRPC_KEY_URI:
    case JSONRPC_KEY_TASK_ID:
    case JSONRPC_KEY_LEVEL:
    case JSONRPC_KEY_REQUEST_STATE:
    case JSONRPC_KEY_INPUT_RESPONSES:
    case JSONRPC_KEY_META_VERSION:
    case JSONRPC_KEY_META_CAPS:
    case JSONRPC_KEY_META_LOG_LEVEL:
    case JSONRPC_KEY_META_SUBSCRIPTION:
    case JSONRPC_KEY_RESULT_TYPE:
    case JSONRPC_KEY_TTL:
    case JSONRPC_KEY_CACHE_SCOPE:
        if ((s = jsonrpc_value(sc, s, depth)) != NULL)
            *jsonrpc_key_span(sc->info, key) = jsonrpc_span_of(sc, start, s);
        return s;
    }
    return jsonrpc_fail(sc, "internal error");
}

/*
 * A tracked object (top level, params, params._meta) whose '{' is just before s. Recursion is
 * bounded: each level only descends into the next one.
 */
static const unsigned char *
jsonrpc_object(struct jsonrpc_scanner *sc, const unsigned char *s, enum jsonrpc_level level)
{
    const unsigned char *end = sc->end;
    unsigned depth = jsonrpc_level_depth[level], seen = 0;

    s = jsonrpc_ws(sc, s);
    if (s < end && *s == '}')
        return s + 1;
    for (;;) {
        const unsigned char *key = s + 1;
        enum jsonrpc_key k;
        bool esc;

        if (s == end || *s != '"')
            return jsonrpc_fail(sc, "expected a string key");
        if ((s = jsonrpc_string(sc, key, &esc)) == NULL)
            return NULL;
        k = jsonrpc_key_find(level, key, (size_t)(s - 1 - key), esc);
        s = jsonrpc_ws(sc, s);
        if (s == end || *s != ':')
            return jsonrpc_fail(sc, "expected ':'");
        s = jsonrpc_ws(sc, s + 1);
        if (s == end)
            return jsonrpc_fail(sc, "unexpected end of input");
        if (k != JSONRPC_KEY_NONE) {
            if (seen & JSONRPC_BIT(k))
                jsonrpc_invalid(sc, "duplicate key");
            seen |= JSONRPC_BIT(k);
        }
        if ((s = jsonrpc_member(sc, s, k, depth)) == NULL)
            return NULL;
        s = jsonrpc_ws(sc, s);
        if (s == end)
            return jsonrpc_fail(sc, "unexpected end of input");
        if (*s == '}')
            break;
        if (*s != ',')
            return jsonrpc_fail(sc, "expected ',' or '}'");
        s = jsonrpc_ws(sc, s + 1);
    }
    if (level == JSONRPC_LEVEL_TOP)
        sc->top_seen = seen;
    return s + 1;
}

/* Kind from the top-level keys, or a reason why the object is not one JSON-RPC message. */
static const char *
jsonrpc_classify(const struct jsonrpc_scanner *sc, enum jsonrpc_kind *kind)
{
    unsigned seen = sc->top_seen;
    bool id = seen & JSONRPC_BIT(JSONRPC_KEY_ID);
    bool null_id = id && sc->info->id_type == JSONRPC_ID_NULL;
    bool result = seen & JSONRPC_BIT(JSONRPC_KEY_RESULT);
    bool error = seen & JSONRPC_BIT(JSONRPC_KEY_ERROR);

    if (!(seen & JSONRPC_BIT(JSONRPC_KEY_JSONRPC)))
        return "missing \"jsonrpc\"";
    if (seen & JSONRPC_BIT(JSONRPC_KEY_METHOD)) {
        if (result || error)
            return "\"method\" together with \"result\" or \"error\"";
        if (null_id)
            return "null \"id\" in a request";
        *kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
        return NULL;
    }
    if (result && error)
        return "both \"result\" and \"error\"";
    if (!result && !error)
        return "no \"method\", \"result\" or \"error\"";
    if (!id)
        return "response without \"id\"";
    if (result && null_id)
        return "null \"id\" in a result";
    *kind = result ? JSONRPC_RESULT : JSONRPC_ERROR;
    return NULL;
}

static int
jsonrpc_scan_end(struct jsonrpc_info *out, int status, const char *why, const char **errstr)
{
    bool crlf = out->has_crlf;

    memset(out, 0, sizeof *out);
    out->has_crlf = status != JSONRPC_EPARSE && crlf;
    if (errstr != NULL)
        *errstr = why;
    return status;
}

int
jsonrpc_scan(const char *p, size_t n, struct jsonrpc_info *out, const char **errstr)
{
    struct jsonrpc_scanner sc;
    const unsigned char *s;
    const char *why;
    unsigned char first;

    memset(out, 0, sizeof *out);
    if (n == 0)
        return jsonrpc_scan_end(out, JSONRPC_EPARSE, "empty input", errstr);
    memset(&sc, 0, sizeof sc);
    sc.base = (const unsigned char *)p;
    sc.end = sc.base + n;
    sc.info = out;

    s = jsonrpc_ws(&sc, sc.base);
    if (s == sc.end)
        return jsonrpc_scan_end(out, JSONRPC_EPARSE, "empty input", errstr);
    first = *s;
    if (first == '{')
        s = jsonrpc_object(&sc, s + 1, JSONRPC_LEVEL_TOP);
    else
        s = jsonrpc_value(&sc, s, 0);
    if (s != NULL && jsonrpc_ws(&sc, s) != sc.end)
        s = jsonrpc_fail(&sc, "data after the JSON text");
    if (s == NULL) {
        why = memchr(p, '\0', n) != NULL ? "NUL byte" : sc.err;
        return jsonrpc_scan_end(out, JSONRPC_EPARSE, why, errstr);
    }
    if (first == '[')
        return jsonrpc_scan_end(out, JSONRPC_EBATCH, "batch", errstr);
    if (first != '{')
        return jsonrpc_scan_end(out, JSONRPC_EINVALID, "not an object", errstr);
    why = sc.invalid != NULL ? sc.invalid : jsonrpc_classify(&sc, &out->kind);
    if (why != NULL)
        return jsonrpc_scan_end(out, JSONRPC_EINVALID, why, errstr);
    if (out->kind == JSONRPC_RESULT || out->kind == JSONRPC_ERROR) {
        /* "params" means nothing on a response: report none of its fields. */
        memset(&out->request_id, 0, sizeof out->request_id);
        out->has_task = false;
        memset(&out->name, 0, sizeof out->name);
        memset(&out->uri, 0, sizeof out->uri);
        memset(&out->task_id, 0, sizeof out->task_id);
        memset(&out->level, 0, sizeof out->level);
        memset(&out->params, 0, sizeof out->params);
        memset(&out->meta, 0, sizeof out->meta);
        memset(&out->request_state, 0, sizeof out->request_state);
        memset(&out->input_responses, 0, sizeof out->input_responses);
        memset(&out->meta_version, 0, sizeof out->meta_version);
        memset(&out->meta_caps, 0, sizeof out->meta_caps);
        memset(&out->meta_log_level, 0, sizeof out->meta_log_level);
        memset(&out->meta_subscription, 0, sizeof out->meta_subscription);
    } else {
        out->progress_token = sc.meta_token.len != 0 ? sc.meta_token : sc.plain_token;
    }
    return JSONRPC_OK;
}

int
jsonrpc_batch_split(const char *p, size_t n, struct jsonrpc_span *el, size_t max, size_t *count)
{
    struct jsonrpc_scanner sc;
    struct jsonrpc_info scratch;
    const unsigned char *s;

    memset(&sc, 0, sizeof sc);
    memset(&scratch, 0, sizeof scratch);
    sc.base = (const unsigned char *)p;
    sc.end = sc.base + n;
    sc.info = &scratch;
    *count = 0;
    s = jsonrpc_ws(&sc, sc.base);
    if (s == sc.end || *s != '[')
        return -1;
    s = jsonrpc_ws(&sc, s + 1);
    if (s < sc.end && *s == ']')
        return 0;
    while (s < sc.end) {
        const unsigned char *start = s;
        if ((s = jsonrpc_value(&sc, s, 1)) == NULL)
            return -1;
        if (*count == max)
            return -1;
        el[(*count)++] = jsonrpc_span_of(&sc, start, s);
        s = jsonrpc_ws(&sc, s);
        if (s == sc.end)
            return -1;
        if (*s == ']')
            return 0;
        if (*s != ',')
            return -1;
        s = jsonrpc_ws(&sc, s + 1);
    }
    return -1;
}

int
jsonrpc_member_at(const char *p, struct jsonrpc_span obj, const char *key, struct jsonrpc_span *val)
{
    struct jsonrpc_scanner sc;
    struct jsonrpc_info scratch;
    size_t klen = strlen(key);
    const unsigned char *s;

    memset(&sc, 0, sizeof sc);
    memset(&scratch, 0, sizeof scratch);
    sc.base = (const unsigned char *)p;
    sc.end = sc.base + obj.off + obj.len;
    sc.info = &scratch;
    *val = (struct jsonrpc_span){ 0, 0 };
    s = jsonrpc_ws(&sc, sc.base + obj.off);
    if (s == sc.end || *s != '{')
        return -1;
    s = jsonrpc_ws(&sc, s + 1);
    if (s < sc.end && *s == '}')
        return 0;
    while (s < sc.end && *s == '"') {
        const unsigned char *k = s + 1, *start;
        char buf[JSONRPC_KEY_BUF];
        size_t len;
        bool esc, match;

        if ((s = jsonrpc_string(&sc, k, &esc)) == NULL)
            return -1;
        len = (size_t)(s - 1 - k);
        match = esc ? jsonrpc_unescape(k, len, buf, sizeof buf, &len) && len == klen
                          && memcmp(buf, key, klen) == 0
                    : len == klen && memcmp(k, key, klen) == 0;
        s = jsonrpc_ws(&sc, s);
        if (s == sc.end || *s != ':')
            return -1;
        start = s = jsonrpc_ws(&sc, s + 1);
        if ((s = jsonrpc_value(&sc, s, 1)) == NULL || (match && val->len != 0))
            return -1;
        if (match)
            *val = jsonrpc_span_of(&sc, start, s);
        s = jsonrpc_ws(&sc, s);
        if (s < sc.end && *s == '}')
            return 0;
        if (s == sc.end || *s != ',')
            return -1;
        s = jsonrpc_ws(&sc, s + 1);
    }
    return -1;
}

bool
jsonrpc_created_task(const char *p, const struct jsonrpc_info *info, struct jsonrpc_span *task,
                     struct jsonrpc_span *task_id)
{
    return info->kind == JSONRPC_RESULT && info->result.len != 0
           && jsonrpc_member_at(p, info->result, "task", task) == 0 && task->len != 0
           && p[task->off] == '{' && jsonrpc_member_at(p, *task, "taskId", task_id) == 0
           && task_id->len != 0 && p[task_id->off] == '"';
}

size_t
jsonrpc_members_first(const char *p, struct jsonrpc_span obj, char *members, size_t len)
{
    if (len == 0)
        return 0;
    const char *s = p + obj.off + 1, *end = p + obj.off + obj.len;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'))
        s++;
    /* Each member's leading comma becomes a trailing one; an empty object takes none. */
    memmove(members, members + 1, len - 1);
    if (s < end && *s == '}')
        return len - 1;
    members[len - 1] = ',';
    return len;
}

void
jsonrpc_flatten(char *p, size_t n)
{
    static const char crlf[2] = { '\r', '\n' };

    if (n == 0)
        return;
    for (size_t i = 0; i < sizeof crlf; i++) {
        char *q = p, *end = p + n;
        while (q < end && (q = memchr(q, crlf[i], (size_t)(end - q))) != NULL)
            *q++ = ' ';
    }
}

bool
jsonrpc_id_u64(const char *p, struct jsonrpc_span id, uint64_t *out)
{
    const char *s;
    uint64_t v = 0;

    if (id.len == 0)
        return false;
    s = p + id.off;
    if (id.len > 1 && s[0] == '0')
        return false;
    for (size_t i = 0; i < id.len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool
jsonrpc_string_at(const char *p, struct jsonrpc_span sp, char *out, size_t cap, size_t *len)
{
    if (sp.len < 2 || p[sp.off] != '"' || cap == 0)
        return false;
    size_t n;
    if (!jsonrpc_unescape((const unsigned char *)p + sp.off + 1, sp.len - 2, out, cap - 1, &n)
        || memchr(out, '\0', n) != NULL)
        return false;
    out[n] = '\0';
    if (len != NULL)
        *len = n;
    return true;
}

bool
jsonrpc_text_at(const char *p, struct jsonrpc_span sp, char *out, size_t cap)
{
    out[0] = '\0';
    if (sp.len < 2 || p[sp.off] != '"')
        return false;
    char *all = xmalloc(sp.len); /* the decoded text is never longer than its escaped form */
    bool ok = jsonrpc_string_at(p, sp, all, sp.len, NULL);
    if (ok)
        (void)util_utf8_copy(out, cap, all);
    free(all);
    return ok;
}
