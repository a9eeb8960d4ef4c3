/* SPDX-License-Identifier: MIT */
/*
 * The audit trail (audit.h): records made only while it is on, one line each, written at once
 * (one write(2) with O_APPEND, so concurrent readers never see half of a line unless the disk is
 * full, and then the half is cut off again). A write that fails is counted, logged (the first, then
 * once a minute), and with audit_required the gateway refuses new audited calls until a record is
 * written again.
 */
#include "audit.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crypto.h"
#include "journal.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

#define AUDIT_ID_MAX   256 /* a request id longer than this is left out (request_id_cut) */
#define AUDIT_TEXT_MAX 256 /* names, principals, server, where: cut past this */
#define AUDIT_PATH_MAX 4096

struct audit_rec {
    char server[AUDIT_TEXT_MAX];
    char where[AUDIT_TEXT_MAX];
    char method[JSONRPC_METHOD_MAX];
    char name[AUDIT_TEXT_MAX];
    char principal[AUDIT_TEXT_MAX];
    char auth[16];
    char client[64];
    char trace_id[64];
    char id[AUDIT_ID_MAX];
    size_t id_len;
    bool id_cut;
    char sha[2 * CRYPTO_SHA256_LEN + 1]; /* "": no arguments */
    char *args;                          /* the arguments' text when kept; NULL: not */
    size_t args_len;
    uint64_t start_unix_ms, start_ms;
    uint64_t bytes_in, bytes_out;
    const char *outcome; /* NULL: none yet */
    int code;
    bool has_code;
    const char *cause;
};

static struct {
    bool on, journal, required, failing;
    int fd;
    int jfd;
    char path[AUDIT_PATH_MAX];
    uint64_t args_max;
    uint64_t records, failures, lost_since;
    uint64_t logged_ms, tried_ms;
    struct audit_who who; /* pointers into the buffers below */
    char principal[AUDIT_TEXT_MAX], auth[16], client[64], trace_id[64];
} A = { .fd = -1, .jfd = -1 };

bool
audit_on(void)
{
    return A.on;
}

const char *
audit_path(void)
{
    return A.on ? A.path : NULL;
}

bool
audit_method(const char *method)
{
    return strcmp(method, "tools/call") == 0 || strcmp(method, "resources/read") == 0
           || strcmp(method, "prompts/get") == 0 || strcmp(method, "completion/complete") == 0;
}

static void
audit_copy(char *out, size_t size, const char *s)
{
    if (s == NULL)
        out[0] = '\0';
    else
        (void)util_utf8_copy(out, size, s); /* cut at a character boundary */
}

void
audit_set_who(const struct audit_who *w)
{
    if (!A.on)
        return;
    audit_copy(A.principal, sizeof A.principal, w != NULL ? w->principal : NULL);
    audit_copy(A.auth, sizeof A.auth, w != NULL ? w->auth : NULL);
    audit_copy(A.client, sizeof A.client, w != NULL ? w->client : NULL);
    audit_copy(A.trace_id, sizeof A.trace_id, w != NULL ? w->trace_id : NULL);
}

/* Opens path like log_file (log.c): no symbolic link, no wait, a regular file only. */
static int
audit_open(const char *path, const char **why)
{
    if (strlen(path) >= sizeof(A.path)) {
        *why = strerror(ENAMETOOLONG);
        return -1;
    }
    return log_open_append(path, why);
}

static void
audit_close_all(void)
{
    if (A.fd != -1)
        close(A.fd);
    if (A.jfd != -1)
        close(A.jfd);
    A.fd = A.jfd = -1;
}

int
audit_set(const char *path, uint64_t arguments_max, bool required, const char **why)
{
    *why = NULL;
    if (path == NULL || path[0] == '\0') {
        audit_close_all();
        A.on = A.journal = A.failing = false;
        A.path[0] = '\0';
        return 0;
    }
    A.args_max = arguments_max;
    A.required = required;
    if (!required)
        A.failing = false;
    if (A.on && strcmp(path, A.path) == 0)
        return 0;
    if (strcmp(path, "journal") == 0) {
        int jfd = journal_socket();
        if (jfd == -1) {
            *why = strerror(errno);
            return -1;
        }
        audit_close_all();
        A.jfd = jfd;
        A.journal = true;
    } else {
        int fd = audit_open(path, why);
        if (fd == -1)
            return -1;
        audit_close_all();
        A.fd = fd;
        A.journal = false;
    }
    memmove(A.path, path, strlen(path) + 1);
    A.on = true;
    return 0;
}

int
audit_reopen(const char **why)
{
    *why = NULL;
    if (!A.on || A.journal)
        return 0;
    int fd = audit_open(A.path, why);
    if (fd == -1)
        return -1;
    close(A.fd);
    A.fd = fd;
    return 0;
}

/* --- the writer ------------------------------------------------------------------------------ */

/* Appends to a record; its buffer's ceiling is above anything a record holds. */
static void
ap(struct buf *b, const void *p, size_t n)
{
    if (buf_append(b, p, n) == -1)
        log_debug(NULL, "audit record cut at its ceiling");
}

static void PRINTF(2, 3) apf(struct buf *b, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    if (buf_vprintf(b, fmt, va) == -1)
        log_debug(NULL, "audit record cut at its ceiling");
    va_end(va);
}

bool
audit_put_string(struct buf *b, const char *s, size_t n, size_t max)
{
    bool cut = false;
    if (n > max) {
        n = max;
        /* Back to a character's first byte: never half of a UTF-8 sequence. */
        while (n > 0 && ((unsigned char)s[n] & 0xC0u) == 0x80u)
            n--;
        cut = true;
    }
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        if (i > run)
            ap(b, s + run, i - run);
        run = i + 1;
        char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
        if (c == '"' || c == '\\') {
            e[1] = (char)c;
            ap(b, e, 2);
        } else if (c == '\n') {
            ap(b, "\\n", 2);
        } else {
            ap(b, e, 6);
        }
    }
    if (n > run)
        ap(b, s + run, n - run);
    return cut;
}

static void
audit_field(struct buf *b, const char *key, const char *value)
{
    if (value == NULL || value[0] == '\0')
        return;
    apf(b, ",\"%s\":\"", key);
    (void)audit_put_string(b, value, strlen(value), AUDIT_TEXT_MAX);
    ap(b, "\"", 1);
}

/* A journal field of value (cut short enough for one entry); none when empty. */
static void
audit_jfield(struct journal_field *jf, size_t *n, const char *key, const char *value)
{
    if (value == NULL || value[0] == '\0' || *n >= JOURNAL_FIELDS_MAX)
        return;
    jf[(*n)++] = (struct journal_field){ key, value, strnlen(value, AUDIT_TEXT_MAX) };
}

static void
audit_failed(int err)
{
    A.failures++;
    A.lost_since++;
    if (A.required)
        A.failing = true;
    uint64_t now = util_now_ms();
    if (A.logged_ms == 0 || now - A.logged_ms >= 60000u) {
        A.logged_ms = now;
        log_error(NULL,
                  "audit_log %s: a record could not be written: %s (%" PRIu64 " lost so far)%s",
                  A.path, strerror(err), A.failures,
                  A.required ? "; audited calls are refused until records can be written" : "");
    }
}

/* Whether the whole line went; a short write is cut off again, so the file stays in lines. */
static bool
audit_write_file(const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(A.fd, p + done, n - done);
        if (w == -1 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = w == 0 ? EIO : errno;
            if (done > 0) {
                off_t end = lseek(A.fd, 0, SEEK_END);
                if (end != -1 && end >= (off_t)done && ftruncate(A.fd, end - (off_t)done) == -1)
                    log_debug(NULL, "audit_log: a cut record could not be cut off");
            }
            errno = err;
            return false;
        }
        done += (size_t)w;
    }
    return true;
}

/* The fields the journal form carries besides MESSAGE (the JSON line). */
struct audit_keys {
    const char *event, *principal, *server, *method, *name, *outcome, *cause, *where, *client;
};

static bool
audit_emit(struct buf *b, const struct audit_keys *k)
{
    ap(b, "}\n", 2);
    bool ok;
    if (A.journal) {
        struct journal_field jf[JOURNAL_FIELDS_MAX];
        size_t n = 0;
        jf[n++] = (struct journal_field){ "MESSAGE", buf_head(b), buf_used(b) - 1 };
        jf[n++] = (struct journal_field){ "PRIORITY", "6", 1 };
        jf[n++] = (struct journal_field){ "SYSLOG_IDENTIFIER", "mcp-gateway", 11 };
        jf[n++] = (struct journal_field){ "MCPGW_AUDIT", "1", 1 };
        audit_jfield(jf, &n, "MCPGW_AUDIT_EVENT", k->event);
        audit_jfield(jf, &n, "MCPGW_AUDIT_PRINCIPAL", k->principal);
        audit_jfield(jf, &n, "MCPGW_AUDIT_SERVER", k->server);
        audit_jfield(jf, &n, "MCPGW_AUDIT_METHOD", k->method);
        audit_jfield(jf, &n, "MCPGW_AUDIT_NAME", k->name);
        audit_jfield(jf, &n, "MCPGW_AUDIT_OUTCOME", k->outcome);
        audit_jfield(jf, &n, "MCPGW_AUDIT_CANCEL_CAUSE", k->cause);
        audit_jfield(jf, &n, "MCPGW_AUDIT_WHERE", k->where);
        audit_jfield(jf, &n, "MCPGW_AUDIT_CLIENT", k->client);
        ok = journal_send_on(A.jfd, jf, n) == 0;
    } else {
        ok = audit_write_file(buf_head(b), buf_used(b));
    }
    if (!ok) {
        audit_failed(errno);
        return false;
    }
    A.records++;
    if (A.failing || A.lost_since > 0) {
        log_info(NULL, "audit_log %s: records are written again (%" PRIu64 " lost)", A.path,
                 A.lost_since);
        A.failing = false;
        A.lost_since = 0;
    }
    return true;
}

static void
audit_head(struct buf *b, uint64_t unix_ms, const char *event)
{
    char t[UTIL_RFC3339_MAX];
    util_rfc3339(unix_ms, t);
    apf(b, "{\"time\":\"%s\",\"event\":\"%s\"", t, event);
}

static void
audit_who_fields(struct buf *b, const char *principal, const char *auth, const char *client,
                 const char *trace_id)
{
    audit_field(b, "principal", principal);
    audit_field(b, "auth", auth);
    audit_field(b, "client", client);
    audit_field(b, "trace_id", trace_id);
}

/* The request's id (raw JSON, bounded), method and name from body. */
static void
audit_request_fields(const char *body, const struct jsonrpc_info *info, char *method, size_t msize,
                     char *name, size_t nsize, char *id, size_t *id_len, bool *id_cut)
{
    snprintf(method, msize, "%s", info->method);
    name[0] = '\0';
    struct jsonrpc_span sp = info->name.len ? info->name : info->uri;
    if (strcmp(info->method, "completion/complete") == 0 && info->params.len != 0) {
        struct jsonrpc_span ref;
        if (jsonrpc_member_at(body, info->params, "ref", &ref) == 0 && ref.len != 0
            && body[ref.off] == '{'
            && (jsonrpc_member_at(body, ref, "name", &sp) == -1 || sp.len == 0)
            && jsonrpc_member_at(body, ref, "uri", &sp) == -1)
            sp.len = 0;
    }
    if (sp.len == 0 || !jsonrpc_text_at(body, sp, name, nsize))
        name[0] = '\0';
    *id_len = 0;
    *id_cut = info->id.len > AUDIT_ID_MAX;
    if (info->id.len != 0 && !*id_cut) {
        memcpy(id, body + info->id.off, info->id.len);
        *id_len = info->id.len;
    }
}

/* --- calls ----------------------------------------------------------------------------------- */

struct audit_rec *
audit_call_new(const char *server, const char *where, const char *body, size_t len,
               const struct jsonrpc_info *info)
{
    if (!A.on)
        return NULL;
    struct audit_rec *a = xcalloc(1, sizeof(*a));
    a->start_unix_ms = util_now_unix_ms();
    a->start_ms = util_now_ms();
    a->bytes_in = len;
    audit_copy(a->server, sizeof a->server, server);
    audit_copy(a->where, sizeof a->where, where);
    snprintf(a->principal, sizeof a->principal, "%s", A.principal);
    snprintf(a->auth, sizeof a->auth, "%s", A.auth);
    snprintf(a->client, sizeof a->client, "%s", A.client);
    snprintf(a->trace_id, sizeof a->trace_id, "%s", A.trace_id);
    audit_request_fields(body, info, a->method, sizeof a->method, a->name, sizeof a->name, a->id,
                         &a->id_len, &a->id_cut);
    /* The arguments: params.arguments (tools, prompts) or params.argument (completion). */
    struct jsonrpc_span args = { 0, 0 };
    if (info->params.len != 0
        && (jsonrpc_member_at(body, info->params, "arguments", &args) == -1 || args.len == 0)
        && jsonrpc_member_at(body, info->params, "argument", &args) == -1)
        args.len = 0;
    if (args.len != 0) {
        unsigned char d[CRYPTO_SHA256_LEN];
        crypto_sha256(body + args.off, args.len, d);
        for (size_t i = 0; i < CRYPTO_SHA256_LEN; i++)
            snprintf(a->sha + 2 * i, 3, "%02x", d[i]);
        if (A.args_max > 0) {
            /* One byte past the bound, so the cut finds a character boundary when written. */
            a->args_len = args.len > A.args_max ? (size_t)A.args_max + 1 : args.len;
            a->args = xmemdup(body + args.off, a->args_len);
        }
    }
    return a;
}

void
audit_call_where(struct audit_rec *a, const char *where)
{
    if (a != NULL)
        audit_copy(a->where, sizeof a->where, where);
}

void
audit_call_trace(struct audit_rec *a, const char *trace_id)
{
    if (a != NULL)
        audit_copy(a->trace_id, sizeof a->trace_id, trace_id);
}

void
audit_call_answer(struct audit_rec *a, const char *line, size_t len,
                  const struct jsonrpc_info *info)
{
    if (a == NULL || a->outcome != NULL)
        return;
    a->bytes_out = len;
    if (info->kind == JSONRPC_RESULT) {
        a->outcome = "result";
        return;
    }
    a->outcome = "error";
    struct jsonrpc_span err, code;
    /* error.code: the scanner records no span for it, so find it in the whole message. */
    struct jsonrpc_span all = { 0, len };
    while (all.len > 0 && line[all.off] != '{') {
        all.off++;
        all.len--;
    }
    if (jsonrpc_member_at(line, all, "error", &err) == 0 && err.len != 0 && line[err.off] == '{'
        && jsonrpc_member_at(line, err, "code", &code) == 0 && code.len != 0 && code.len < 16) {
        char t[16], *end;
        memcpy(t, line + code.off, code.len);
        t[code.len] = '\0';
        long v = strtol(t, &end, 10);
        if (*end == '\0' && v >= INT32_MIN && v <= INT32_MAX) {
            a->code = (int)v;
            a->has_code = true;
        }
    }
}

void
audit_call_error(struct audit_rec *a, int code)
{
    if (a == NULL || a->outcome != NULL)
        return;
    a->outcome = "error";
    a->code = code;
    a->has_code = true;
}

void
audit_call_cancel(struct audit_rec *a, const char *cause)
{
    if (a == NULL || a->outcome != NULL)
        return;
    a->outcome = "cancelled";
    a->cause = cause;
}

void
audit_call_end(struct audit_rec *a)
{
    if (a == NULL)
        return;
    if (A.on) {
        struct buf b;
        buf_init(&b, 64 * 1024 + 4 * (a->args != NULL ? a->args_len : 0));
        audit_head(&b, a->start_unix_ms, "call");
        audit_who_fields(&b, a->principal, a->auth, a->client, a->trace_id);
        audit_field(&b, "server", a->server);
        bool pool = strncmp(a->where, "pool:", 5) == 0;
        audit_field(&b, pool ? "pool_child" : "session", a->where);
        if (a->id_len != 0) {
            ap(&b, ",\"request_id\":", 14);
            ap(&b, a->id, a->id_len);
        } else if (a->id_cut) {
            ap(&b, ",\"request_id_cut\":true", 22);
        }
        audit_field(&b, "method", a->method);
        audit_field(&b, "name", a->name);
        audit_field(&b, "arguments_sha256", a->sha);
        if (a->args != NULL) {
            ap(&b, ",\"arguments\":\"", 14);
            bool cut = audit_put_string(&b, a->args, a->args_len, A.args_max);
            ap(&b, "\"", 1);
            if (cut)
                ap(&b, ",\"arguments_truncated\":true", 27);
        }
        const char *outcome = a->outcome != NULL ? a->outcome : "unanswered";
        audit_field(&b, "outcome", outcome);
        if (a->has_code)
            apf(&b, ",\"error_code\":%d", a->code);
        audit_field(&b, "cancel_cause", a->cause);
        apf(&b, ",\"duration_ms\":%" PRIu64 ",\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64,
            util_now_ms() - a->start_ms, a->bytes_in, a->bytes_out);
        struct audit_keys k = { "call",  a->principal, a->server, a->method, a->name,
                                outcome, a->cause,     a->where,  a->client };
        (void)audit_emit(&b, &k);
        buf_clear(&b);
    }
    free(a->args);
    free(a);
}

void
audit_call_drop(struct audit_rec *a)
{
    if (a == NULL)
        return;
    free(a->args);
    free(a);
}

/* An event's record: http_status (0: none) and code (a JSON-RPC error code; 0: none) each. */
static void
audit_event_codes(const char *event, const char *principal, const char *server, const char *where,
                  int http_status, int code, const char *detail, const char *body,
                  const struct jsonrpc_info *info)
{
    struct buf b;
    buf_init(&b, 64 * 1024);
    audit_head(&b, util_now_unix_ms(), event);
    audit_who_fields(&b, principal != NULL ? principal : A.principal, A.auth, A.client, A.trace_id);
    audit_field(&b, "server", server);
    if (where != NULL)
        audit_field(&b, strncmp(where, "pool:", 5) == 0 ? "pool_child" : "session", where);
    char method[JSONRPC_METHOD_MAX] = "", name[AUDIT_TEXT_MAX] = "", id[AUDIT_ID_MAX];
    size_t id_len = 0;
    bool id_cut = false;
    if (body != NULL && info != NULL) {
        audit_request_fields(body, info, method, sizeof method, name, sizeof name, id, &id_len,
                             &id_cut);
        if (id_len != 0) {
            ap(&b, ",\"request_id\":", 14);
            ap(&b, id, id_len);
        } else if (id_cut) {
            ap(&b, ",\"request_id_cut\":true", 22);
        }
        audit_field(&b, "method", method);
        audit_field(&b, "name", name);
    }
    if (http_status != 0)
        apf(&b, ",\"http_status\":%d", http_status);
    if (code != 0)
        apf(&b, ",\"error_code\":%d", code);
    audit_field(&b, "detail", detail);
    struct audit_keys k = { event,   principal != NULL ? principal : A.principal,
                            server,  method,
                            name,    NULL,
                            NULL,    where,
                            A.client };
    (void)audit_emit(&b, &k);
    buf_clear(&b);
}

void
audit_event(const char *event, const char *principal, const char *server, const char *where,
            int code, const char *detail, const char *body, const struct jsonrpc_info *info)
{
    if (!A.on)
        return;
    bool http = code >= 100 && code < 600;
    audit_event_codes(event, principal, server, where, http ? code : 0, http ? 0 : code, detail,
                      body, info);
}

void
audit_refusal(const char *event, const char *server, int http_status, int code, const char *detail,
              const char *body, const struct jsonrpc_info *info)
{
    if (A.on)
        audit_event_codes(event, NULL, server, NULL, http_status, code, detail, body, info);
}

bool
audit_refusing(const char *server, const char *body, const struct jsonrpc_info *info)
{
    if (!A.on || !A.required || !A.failing)
        return false;
    uint64_t now = util_now_ms();
    if (A.tried_ms != 0 && now - A.tried_ms < 1000u)
        return true;
    A.tried_ms = now;
    /* The refusal's own record: once it is written the trail is back, and the call passes. */
    char detail[96];
    snprintf(detail, sizeof detail, "audit records could not be written (%" PRIu64 " lost)",
             A.lost_since);
    audit_event("refused_audit", NULL, server, NULL, 503, detail, body, info);
    return A.failing;
}

void
audit_metrics(struct buf *b)
{
    metrics_family(b, "mcpgw_audit_records_total", "counter", "Audit records written (audit_log).");
    metrics_sample(b, "mcpgw_audit_records_total", NULL, A.records);
    metrics_family(b, "mcpgw_audit_write_failures_total", "counter",
                   "Audit records that could not be written (a full disk, a file at its size "
                   "limit, an I/O error, a journal that refused the entry).");
    metrics_sample(b, "mcpgw_audit_write_failures_total", NULL, A.failures);
}

void
audit_module_free(void)
{
    audit_close_all();
    A.on = false;
}
