/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_JSONRPC_H
#define MCPGW_JSONRPC_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * JSON-RPC on the hot path: a validating single-pass scanner that classifies one message and
 * records the byte spans routing needs; the original bytes pass through unchanged (src/README.md,
 * section 6). Gateway-made messages (errors, cancels) are built here too, with jansson. Pure: no
 * I/O, no globals.
 */

/* A byte range inside the scanned input; len == 0 means absent. */
struct jsonrpc_span {
    size_t off;
    size_t len;
};

enum jsonrpc_kind {
    JSONRPC_REQUEST = 0,  /* "method" and a non-null "id" */
    JSONRPC_NOTIFICATION, /* "method", no "id" */
    JSONRPC_RESULT,       /* "id" and "result" */
    JSONRPC_ERROR,        /* "id" (possibly null) and "error" */
};

enum jsonrpc_id_type {
    JSONRPC_ID_NONE = 0,
    JSONRPC_ID_NUMBER,
    JSONRPC_ID_STRING,
    JSONRPC_ID_NULL,
};

#define JSONRPC_METHOD_MAX 96

struct jsonrpc_info {
    enum jsonrpc_kind kind;
    enum jsonrpc_id_type id_type;
    struct jsonrpc_span id;          /* raw value of "id"; quotes included for strings */
    char method[JSONRPC_METHOD_MAX]; /* decoded (escapes resolved), NUL-terminated, "" if none */
    bool method_long;                /* decoded method did not fit; method[] is then "" */
    struct jsonrpc_span request_id;  /* raw params.requestId (notifications/cancelled) */
    struct jsonrpc_span
        progress_token; /* raw params._meta.progressToken, or params.progressToken */
    bool has_task;      /* params.task is present (task-augmented request) */
    bool has_crlf;      /* a raw CR or LF byte occurs (as whitespace) */
    /* Requests and notifications (raw values, quotes included for strings): */
    struct jsonrpc_span name;            /* params.name (tools/call, prompts/get) */
    struct jsonrpc_span uri;             /* params.uri (resources/read) */
    struct jsonrpc_span task_id;         /* params.taskId */
    struct jsonrpc_span level;           /* params.level (notifications/message) */
    struct jsonrpc_span params;          /* params, when it is an object */
    struct jsonrpc_span meta;            /* params._meta (any value) */
    struct jsonrpc_span request_state;   /* params.requestState (a 2026-07-28 retry) */
    struct jsonrpc_span input_responses; /* params.inputResponses */
    /* params._meta["io.modelcontextprotocol/..."] of the 2026-07-28 revision: */
    struct jsonrpc_span meta_version;      /* .../protocolVersion */
    struct jsonrpc_span meta_caps;         /* .../clientCapabilities */
    struct jsonrpc_span meta_log_level;    /* .../logLevel */
    struct jsonrpc_span meta_subscription; /* .../subscriptionId (a listen's notifications) */
    /* Results: the result object, and its members the 2026-07-28 revision adds. */
    struct jsonrpc_span result;       /* only when it is an object */
    struct jsonrpc_span result_type;  /* result.resultType */
    struct jsonrpc_span result_ttl;   /* result.ttlMs */
    struct jsonrpc_span result_scope; /* result.cacheScope */
};

enum jsonrpc_status {
    JSONRPC_OK = 0,
    JSONRPC_EPARSE = -1,   /* not one JSON text: syntax, invalid UTF-8, NUL byte, depth > 64 */
    JSONRPC_EINVALID = -2, /* valid JSON, but not one JSON-RPC 2.0 message */
    JSONRPC_EBATCH = -3,   /* a valid JSON top-level array (a batch) */
};

/*
 * Scans p[0..n) as exactly one JSON text (whitespace around it allowed) holding one JSON-RPC 2.0
 * object. On JSONRPC_OK *out is filled; otherwise *errstr (if errstr != NULL) gets a static phrase.
 * Duplicate tracked keys (jsonrpc, id, method, params, result, error, and the nested ones above)
 * are JSONRPC_EINVALID, so the gateway and the child can never disagree about which one counts.
 * Tracked inside params: requestId, progressToken, _meta, task, name, uri, taskId, level,
 * requestState and inputResponses;
 * inside params._meta: progressToken and the 2026-07-28 protocolVersion, clientCapabilities,
 * logLevel and subscriptionId; inside result: resultType, ttlMs and cacheScope. On a RESULT or
 * ERROR, params (if any) is validated but its fields are not reported. On any status but JSONRPC_OK
 * *out is zeroed, except that has_crlf stays meaningful for JSONRPC_EINVALID and JSONRPC_EBATCH
 * (the whole text was valid JSON, so jsonrpc_flatten is safe).
 */
int jsonrpc_scan(const char *p, size_t n, struct jsonrpc_info *out, const char **errstr) MUSTCHECK;

/*
 * The elements of a JSON array that jsonrpc_scan reported as JSONRPC_EBATCH: their spans, in
 * order, into el[0..max). Returns 0 with *count set (0 for "[]"), or -1 when there are more than
 * max elements or p is not an array.
 */
int jsonrpc_batch_split(const char *p, size_t n, struct jsonrpc_span *el, size_t max,
                        size_t *count) MUSTCHECK;

/*
 * The value of member key of the JSON object at obj (a span of a text jsonrpc_scan accepted, or
 * of one of its elements): 0 with *val its span (len 0: absent), or -1 when obj is not an object
 * or names key twice (then which one counts is anyone's guess). Keys are compared unescaped.
 */
int jsonrpc_member_at(const char *p, struct jsonrpc_span obj, const char *key,
                      struct jsonrpc_span *val) MUSTCHECK;

/*
 * The task a CreateTaskResult names: true with *task the span of result.task (an object) and
 * *task_id that of its taskId (a string, quotes included); false for any other message.
 */
bool jsonrpc_created_task(const char *p, const struct jsonrpc_info *info, struct jsonrpc_span *task,
                          struct jsonrpc_span *task_id);

/*
 * Members to insert as the first of the JSON object at obj (a span of a text jsonrpc_scan accepted
 * that starts with '{'): members[0..len) holds them each with a leading comma (",\"a\":1,\"b\":2"),
 * and is rearranged in place into the text that goes right after the object's '{':
 * "\"a\":1,\"b\":2" when the object is empty (blanks inside it or not), "\"a\":1,\"b\":2,"
 * otherwise. Returns that text's length.
 */
size_t jsonrpc_members_first(const char *p, struct jsonrpc_span obj, char *members, size_t len);

/* Replaces every raw CR and LF with a space. Only for input that jsonrpc_scan accepted. */
void jsonrpc_flatten(char *p, size_t n);

/* True when the span is a plain non-negative integer (no sign, fraction, exponent) <= UINT64_MAX.
 */
bool jsonrpc_id_u64(const char *p, struct jsonrpc_span id, uint64_t *out);

/*
 * The JSON string at sp (a span the scanner reported, quotes included), unescaped into out with a
 * terminating NUL. false when sp is not a string, its text does not fit cap - 1 bytes, or it holds
 * a NUL.
 */
bool jsonrpc_string_at(const char *p, struct jsonrpc_span sp, char *out, size_t cap, size_t *len);
/*
 * The same for text shown to operators (a client's name, a tool's): a longer string is cut to
 * cap - 1 bytes at a character boundary (util_utf8_copy) instead of refused. false, out "", when
 * sp is no string or holds a NUL.
 */
bool jsonrpc_text_at(const char *p, struct jsonrpc_span sp, char *out, size_t cap);

/* Standard codes only. */
#define JSONRPC_PARSE_ERROR         (-32700)
#define JSONRPC_INVALID_REQUEST     (-32600)
#define JSONRPC_METHOD_NOT_FOUND    (-32601)
#define JSONRPC_INVALID_PARAMS      (-32602)
#define JSONRPC_INTERNAL_ERROR      (-32603)
/* 2026-07-28 */
#define JSONRPC_HEADER_MISMATCH     (-32020)
#define JSONRPC_MISSING_CAPABILITY  (-32021)
#define JSONRPC_UNSUPPORTED_VERSION (-32022)

/*
 * {"jsonrpc":"2.0","id":<id_raw>,"error":{"code":code,"message":message}}; id_raw == NULL gives
 * "id":null. id_raw is spliced verbatim (byte-exact ids). Returns a new xmalloc'd string (no
 * newline, NUL-terminated) and its length in *len.
 */
char *jsonrpc_error_new(const char *id_raw, size_t id_len, int code, const char *message,
                        size_t *len);

/*
 * {"jsonrpc":"2.0","id":<id_raw>,"result":<result>} as five iovecs pointing at the arguments (no
 * copy), a newline after it when newline is set (a child's stdin takes lines, a stream does not).
 * Returns the count, 5.
 */
int jsonrpc_result_iov(struct iovec iov[5], const char *id_raw, size_t id_len, const char *result,
                       size_t result_len, bool newline);

/*
 * {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":<id_raw>,
 * "reason":reason}}; reason may be NULL (then omitted). New xmalloc'd string, length in *len.
 */
char *jsonrpc_cancel_new(const char *id_raw, size_t id_len, const char *reason, size_t *len);

/*
 * s as a JSON string literal (quotes included): a new xmalloc'd buffer, NOT NUL-terminated, length
 * in *len. NULL or invalid UTF-8 give "".
 */
char *jsonrpc_quote(const char *s, size_t *len);

struct buf_out;
/* s as a JSON string literal (as jsonrpc_quote) appended to o. */
void jsonrpc_put_quoted(struct buf_out *o, const char *s);

/*
 * protocolVersion of an initialize request (params.protocolVersion) or of its result
 * (result.protocolVersion), copied NUL-terminated into out. Returns 0, or -1 when absent, not a
 * string, or longer than outlen - 1. Uses jansson: only for the one-off initialize messages.
 */
int jsonrpc_protocol_version(const char *p, size_t n, char *out, size_t outlen) MUSTCHECK;

/* What a task message says of its task (2025-11-25 tasks). */
struct jsonrpc_task {
    char task_id[128];
    char status[24]; /* "working", "input_required", "completed", "failed", "cancelled"; "" */
    int64_t ttl_ms;  /* -1: absent or null (unlimited) */
};

/*
 * Reads the Task in a CreateTaskResult (result.task), a tasks/get or tasks/cancel result (result),
 * or a notifications/tasks/status (params). Returns 0, or -1 when there is none. Uses jansson:
 * only for the small task messages, never on the hot path.
 */
int jsonrpc_task_state(const char *p, size_t n, struct jsonrpc_task *out) MUSTCHECK;
/* A Task's status that nothing follows: completed, failed or cancelled. */
bool jsonrpc_task_terminal(const char *status);

/*
 * Small JSON documents off the hot path (a JWT's header and claims, a JWKS file), read with
 * jansson: one object, duplicate keys refused, no NUL in strings. A struct jsonrpc_doc is an
 * object; those reached with jsonrpc_doc_at are borrowed and live as long as the parsed root.
 */
struct jsonrpc_doc;

/* The object in p[0..n), or NULL when it is not exactly one JSON object. */
struct jsonrpc_doc *jsonrpc_doc_parse(const char *p, size_t n);
void jsonrpc_doc_free(struct jsonrpc_doc *d);
bool jsonrpc_doc_has(const struct jsonrpc_doc *d, const char *key);
/* The member key is JSON true (not merely truthy). */
bool jsonrpc_doc_true(const struct jsonrpc_doc *d, const char *key);
/* The string member key, or NULL when absent or not a string. */
const char *jsonrpc_doc_str(const struct jsonrpc_doc *d, const char *key);
/* The member key is a JSON integer (not a real). */
bool jsonrpc_doc_is_int(const struct jsonrpc_doc *d, const char *key);
/* The member key as an integer (a real is truncated toward zero). 0, or -1: absent or not a number.
 */
int jsonrpc_doc_int(const struct jsonrpc_doc *d, const char *key, int64_t *out) MUSTCHECK;
/*
 * The member key when it is a string (one entry) or an array of strings, into out[0..max).
 * Returns the count (0 when absent), or -1 for any other type, a non-string element, or more than
 * max entries.
 */
int jsonrpc_doc_strs(const struct jsonrpc_doc *d, const char *key, const char **out,
                     size_t max) MUSTCHECK;
/* The length of the array member key (0 when absent or not an array), and its element i when that
 * element is an object (else NULL). */
size_t jsonrpc_doc_len(const struct jsonrpc_doc *d, const char *key);
const struct jsonrpc_doc *jsonrpc_doc_at(const struct jsonrpc_doc *d, const char *key, size_t i);
/* The member key when it is an object (borrowed, like jsonrpc_doc_at), else NULL. */
const struct jsonrpc_doc *jsonrpc_doc_obj(const struct jsonrpc_doc *d, const char *key);
/* d's keys in document order into out[0..max) (borrowed); returns how many d has. */
size_t jsonrpc_doc_keys(const struct jsonrpc_doc *d, const char **out, size_t max);

/*
 * An RFC 9728 protected resource metadata document: resource, authorization_servers (omitted when
 * empty), scopes_supported (omitted when empty), bearer_methods_supported ["header"]. The lists
 * are NULL-terminated (or NULL). New xmalloc'd string, length in *len.
 */
char *jsonrpc_prm_new(const char *resource, char *const *auth_servers, char *const *scopes,
                      size_t *len);

/*
 * error.code of the JSON-RPC error response p[0..n). 0, or -1 when p is not an error response
 * with an integer code. Uses jansson (an error answer is rare: off the hot path); a result costs
 * one scan.
 */
int jsonrpc_error_code(const char *p, size_t n, int *code) MUSTCHECK;

/*
 * The stateless era (pool.h), off the hot path. Requests the gateway makes itself: a
 * server/discover probe and a legacy initialize, with id, the protocol version and the gateway's
 * version (agent) as clientInfo; no client capabilities.
 */
char *jsonrpc_probe_new(uint64_t id, const char *version, const char *agent, size_t *len);
char *jsonrpc_initialize_new(uint64_t id, const char *version, const char *agent, size_t *len);
/*
 * The protocol versions the answer p[0..n) to a server/discover lists: a result's
 * supportedVersions, or an error's data.supported (the unsupported-version error's list). Each
 * string of the list goes to seen (the first 64 entries; other values skipped). False when the
 * answer has no such array.
 */
typedef void jsonrpc_version_cb(const char *version, void *arg);
bool jsonrpc_discover_versions(const char *p, size_t n, jsonrpc_version_cb *seen, void *arg);
/*
 * A DiscoverResult object (the value of "result") made from a legacy initialize response: its
 * capabilities (without those the gateway does not carry to stateless clients: tasks),
 * instructions and serverInfo (as _meta io.modelcontextprotocol/serverInfo), supportedVersions
 * (versions, NULL-ended), ttlMs and cacheScope. NULL when p holds no result object.
 */
char *jsonrpc_discover_from_init(const char *p, size_t n, const char *const *versions,
                                 uint64_t ttl_ms, bool public_scope, size_t *len);
/*
 * The member key of the JSON object p[0..n) as compact JSON (a new string, length in *len), or
 * NULL when p is not an object or has no such member (2026-07-28 inputResponses).
 */
char *jsonrpc_member_json(const char *p, size_t n, const char *key, size_t *len);
/*
 * A child's initialize answer p[0..n), for the gateway's own answers to pooled sessions: the
 * result object's members but protocolVersion, as compact JSON text without the braces ("" when
 * none; a new string, length in *len), with what a pooled session is not served left out of its
 * capabilities (resources.subscribe unless subscribe); the child's protocolVersion into
 * version[0..vsize)
 * ("" when none). NULL when p holds no result object.
 */
char *jsonrpc_init_members(const char *p, size_t n, bool subscribe, char *version, size_t vsize,
                           size_t *len);
/* The string member key of the JSON object p[0..n) into out[0..size); false when none fits. */
bool jsonrpc_member_string(const char *p, size_t n, const char *key, char *out, size_t size);
/* subscriptions/listen: what a listener asks for, and what a legacy child supports. */
#define JSONRPC_LISTEN_TOOLS     1u /* toolsListChanged; tools.listChanged */
#define JSONRPC_LISTEN_PROMPTS   2u /* promptsListChanged; prompts.listChanged */
#define JSONRPC_LISTEN_RESOURCES 4u /* resourcesListChanged; resources.listChanged */
#define JSONRPC_LISTEN_UPDATES   8u /* resourceSubscriptions; resources.subscribe */
/* The JSONRPC_LISTEN_* flags an initialize response p[0..n) declares. */
unsigned jsonrpc_listen_caps(const char *p, size_t n);
/*
 * A listen request's params object p[0..n): the flags asked for, and the resourceSubscriptions
 * URIs (a new NULL-terminated array of new strings, or NULL). -1 when notifications is missing
 * or not an object, or the URIs are not an array of at most max_uris non-empty strings of at most
 * max_uri_bytes.
 */
int jsonrpc_listen_parse(const char *p, size_t n, unsigned *flags, char ***uris, size_t *nuris,
                         size_t max_uris, size_t max_uri_bytes);
/* notifications/subscriptions/acknowledged with the agreed flags and URIs, for the listen id. */
char *jsonrpc_listen_ack_new(const char *id_raw, size_t id_len, unsigned flags, char *const *uris,
                             size_t nuris, size_t *len);
/*
 * -32022 UnsupportedProtocolVersionError: data.supported (NULL-terminated list) and
 * data.requested (NULL: null).
 */
char *jsonrpc_version_error_new(const char *id_raw, size_t id_len, const char *requested,
                                const char *const *supported, size_t *len);
/* The same with its own message (one that says why the requested revision is not served). */
char *jsonrpc_version_error_msg_new(const char *id_raw, size_t id_len, const char *requested,
                                    const char *const *supported, const char *message, size_t *len);

/*
 * A legacy session in front of a stateless child (session_modern.c). The InitializeResult object
 * (the value of "result") a legacy client gets from the child's server/discover answer p[0..n):
 * protocolVersion version, the legacy server capabilities it declares (objects only; listChanged
 * and subscribe only for the JSONRPC_LISTEN_* flags in listen; no tasks, no extensions),
 * serverInfo from _meta io.modelcontextprotocol/serverInfo (fallback_name and "" when it lacks a
 * string name or version), instructions. NULL when p holds no result object.
 */
char *jsonrpc_init_from_discover(const char *p, size_t n, const char *version, unsigned listen,
                                 const char *fallback_name, size_t *len);
/*
 * The questions of an input_required result p[0..n): each member of result.inputRequests goes to
 * each (its key, its method, its params as compact JSON or NULL), and *state gets requestState as
 * a JSON string (quotes included, a new string; NULL when absent). The count, or -1 (nothing
 * reported) when the result is malformed: inputRequests not an object, an entry without a string
 * method or with params that are not an object, requestState not a string, neither present, or
 * more than max questions.
 */
typedef void jsonrpc_input_cb(const char *key, const char *method, const char *params, void *arg);
int jsonrpc_input_requests(const char *p, size_t n, size_t max, jsonrpc_input_cb *each, void *arg,
                           char **state, size_t *state_len);

#endif
