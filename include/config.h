/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CONFIG_H
#define MCPGW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "policy.h"
#include "util.h"

/*
 * The INI file -> struct config: defaults, bounds, cross-checks. The option table
 * (config/config_table.c) holds each key's facts, config/options.md its prose; config_keys()
 * lists the keys.
 */

enum config_auth_mode {
    CONFIG_AUTH_NONE = 0, /* no authentication: loopback listeners only */
    CONFIG_AUTH_BEARER,   /* opaque tokens, SHA-256 hashes in tokens_file */
    CONFIG_AUTH_JWT,      /* signed JWT access tokens, keys in jwks_file */
};

/* [auth]: who may use the gateway, and how much (SECURITY.md). */
struct config_auth {
    enum config_auth_mode mode;
    char *public_url;             /* "https://host[:port]" as clients see it; NULL in mode none */
    char *issuer;                 /* the iss every JWT must carry; NULL unless jwt */
    char *jwks_file;              /* NULL unless jwt */
    char *jwks_uri;               /* jwt: NULL for jwks_file, or from discovery */
    char *introspection_endpoint; /* jwt: NULL unless set (else from discovery) */
    char *introspection_credentials_file; /* jwt: NULL: no introspection */
    char *tls_ca_file;                    /* NULL: the system's CA store */
    uint64_t fetch_timeout_ms;
    uint64_t jwks_cache_min_s, jwks_cache_max_s;
    uint64_t jwks_refetch_interval_ms; /* unknown kid: refetch at most once per this */
    uint64_t introspection_cache_max_s;
    bool discover_token_endpoint; /* a server's token_exchange needs the discovered endpoint */
    uint64_t introspection_max_pending;
    char *tokens_file;                   /* NULL unless bearer */
    char **authorization_servers;        /* NULL-terminated; jwt: defaults to the issuer */
    uint64_t clock_skew_s;               /* leeway on exp and nbf */
    uint64_t max_sessions_per_principal; /* 0: only max_sessions applies */
    uint64_t rate_limit_per_s;           /* requests per second per principal; 0: no limit */
    uint64_t rate_limit_burst;           /* token bucket size */
};

/*
 * The words of the keys whose value is one of a few (config.c), in their enum's order: what the
 * parser takes, and what --print-config, the documents, --check-config and the admin view write.
 */
#define CONFIG_WORDS 3
extern const char *const config_auth_mode_words[CONFIG_WORDS];
extern const char *const config_era_words[CONFIG_WORDS];
extern const char *const config_trace_words[CONFIG_WORDS];

/* A server's protocol era toward stateless clients (its pool's children). */
enum config_era {
    CONFIG_ERA_AUTO = 0,  /* probe the first child with server/discover */
    CONFIG_ERA_STATELESS, /* serves 2026-07-28 itself */
    CONFIG_ERA_LEGACY,    /* initialize-based: the gateway initializes it and adapts results */
};

/*
 * One entry of env_from_claims, VAR=claim or VAR=claim|default: the claim (a member of the
 * verified token's claims, or a dotted path into nested objects) becomes the variable VAR of a
 * session's child. A value is a string or an integer (written in decimal) of at most
 * CONFIG_CLAIM_VALUE_MAX bytes without control characters (NUL, CR, LF among them).
 */
struct config_claim_env {
    char *var;
    char *claim;
    char *def; /* NULL: a missing or invalid claim refuses the session */
};
#define CONFIG_CLAIM_VALUE_MAX 4096
/* [gateway] trace_context: W3C trace context toward the children (trace.h's modes, in order). */
enum config_trace {
    CONFIG_TRACE_OFF = 0,   /* nothing read, nothing added */
    CONFIG_TRACE_PROPAGATE, /* a client's traceparent continued with the gateway's span id */
    CONFIG_TRACE_START,     /* the same, and a new trace for a request that has none */
};

struct config_server {
    char *name;             /* from [server:NAME] */
    char *path;             /* MCP endpoint, starts with '/' */
    char **argv;            /* command split like a shell would, NULL-terminated, argv[0] != NULL */
    char **env;             /* "KEY=VALUE" of env = and env_file, NULL-terminated */
    char *env_file;         /* KEY=VALUE lines added to env; NULL: none */
    char **inherit_env;     /* names copied from the gateway's environment, NULL-terminated */
    char *cwd;              /* NULL: the gateway's working directory */
    char **required_scopes; /* every one must be granted to the token; NULL-terminated */
    char **allowed_tools;   /* globs (policy.h); NULL-terminated */
    char **denied_tools;    /* globs; NULL-terminated */
    char **tool_scopes;     /* GLOB:SCOPE[+SCOPE...] rules; NULL-terminated */
    struct policy *policy;  /* made from the three above; NULL when all are empty */
    uint64_t request_timeout_ms;     /* 0: none */
    uint64_t request_timeout_max_ms; /* > 0: progress restarts the clock, up to this total */
    uint64_t init_timeout_ms; /* a session child's initialize unanswered this long: it goes */
    /* The pool of children that serves stateless requests (no sessions there). */
    enum config_era era;
    uint64_t pool_max_children;
    uint64_t pool_warm_children;      /* started with the gateway, never ended for idleness */
    uint64_t pool_idle_timeout_s;     /* a child beyond the warm ones idle this long ends */
    uint64_t pool_child_max_inflight; /* requests in flight on one child */
    uint64_t pool_start_timeout_ms;   /* probe and initialize of a new child */
    uint64_t pool_max_restarts_per_min;
    uint64_t input_hold_ms; /* a bridged call waits this long for the client's retry */
    /* Per principal in the pool (0: no limit): requests, held calls, listens, listens' URIs. */
    uint64_t max_inflight_per_principal;
    uint64_t max_held_per_principal;
    uint64_t max_listens_per_principal;
    uint64_t max_listen_uris_per_principal;
    /*
     * session_mode = pooled: a legacy session of this server costs no process; its requests go
     * through the server's pool (pool_session.h). false: one child per session (the default).
     */
    bool session_pooled;
    uint64_t cache_ttl_ms; /* ttlMs stamped where a legacy child's cacheable result lacks it */
    bool cache_public;     /* cacheScope stamped likewise: "public", else "private" */
    /* Per-principal credentials of a session's child (none: every child has the server's). */
    char **env_from_claims;             /* the entries as written, NULL-terminated */
    struct config_claim_env *claim_env; /* the same, parsed */
    size_t n_claim_env;
    char *credentials_dir;       /* DIR/PRINCIPAL.env read at each session start; NULL: none */
    bool credentials_server_env; /* credentials_missing = server_env (else refuse) */
    /* RFC 8693 token exchange for a session's child (token_exchange = on). */
    bool token_exchange;
    char *token_exchange_audience, *token_exchange_resource; /* NULL: not sent (one is set) */
    char **token_exchange_scopes;                            /* NULL: no scope sent */
    char *token_exchange_env;       /* the variable; NAME_FILE names the file */
    char *token_exchange_client_id; /* the gateway's client at the token endpoint */
    char *token_exchange_client_secret_file;
    char *token_exchange_client_secret; /* the file's first line, read at build; wiped when freed */
    char *token_exchange_endpoint;      /* NULL: discovered from [auth] issuer's metadata */
    uint64_t token_exchange_timeout_ms;
    uint64_t token_exchange_renew_before_s;
    /* The box around each child (sandbox.h): made from the keys below when sandbox = on. */
    bool sandbox;
    bool sandbox_network_none;
    char **sandbox_read_only_paths; /* absolute, NULL-terminated */
    char **sandbox_writable_paths;
    char **sandbox_tcp_connect_ports; /* decimal ports; NULL: every port */
    uint64_t child_max_memory_bytes;  /* the rlimits inside the box; 0: none */
    uint64_t child_max_processes;
    uint64_t child_max_open_files;
    uint64_t child_max_cpu_s;
    uint64_t child_max_file_bytes;
    uint64_t child_max_memory_cgroup_bytes; /* memory.max of each child's cgroup; 0: none */
    struct sandbox *box; /* NULL: sandbox = off */
    /* A session's child quiet this long is stopped, and started again by the session's next
     * request (session_sleep.c); 0: never. */
    uint64_t child_sleep_after_s;
    int line;            /* line of the section header */
    int command_line;    /* line of command = */
    int cwd_line;        /* line of cwd =; 0 when unset */
};

struct config {
    char *file;           /* path it was loaded from */
    char *listen_host;    /* "127.0.0.1", "::1" (no brackets), "localhost", ... */
    uint16_t listen_port; /* 0: ephemeral (tests) */
    char *instance_id;    /* session id prefix, "" for none */
    char *admin_token;    /* bearer token of /admin/inflight; "" disables it */
    uint64_t max_sessions;
    uint64_t max_connections;
    uint64_t session_idle_timeout_s;
    uint64_t max_body_bytes;
    uint64_t max_header_bytes;         /* request line and headers; larger gets 431 */
    uint64_t client_header_timeout_ms; /* a request's line and headers must arrive within */
    uint64_t client_body_timeout_ms;   /* its body must arrive within */
    uint64_t max_message_bytes;        /* ceiling on one line from a child's stdout */
    uint64_t stream_queue_bytes;       /* per stream; above it the child's stdout is not read */
    uint64_t stdin_queue_bytes;        /* per child; above it new messages get 503 */
    uint64_t max_inflight_per_session;
    uint64_t max_id_bytes; /* a request id or progress token longer than this is refused */
    uint64_t heartbeat_s;
    uint64_t connection_timeout_s; /* idle timeout of connections being read/written; 0 none */
    uint64_t child_stdin_grace_ms; /* stdin closed -> SIGTERM */
    uint64_t child_term_grace_ms;  /* SIGTERM -> SIGKILL */
    uint64_t replay_buffer_bytes;  /* per stream; 0: not resumable */
    uint64_t replay_max_age_s;     /* a stream nobody reads is forgotten after this */
    uint64_t disconnect_grace_ms;  /* 0: a client drop cancels at once */
    uint64_t shutdown_drain_ms;    /* SIGTERM: time for in-flight requests before cancelling */
    uint64_t response_hold_ms;     /* a POST stream's headers wait this long for the answer */
    uint64_t sse_retry_ms;         /* retry field of priming events; 0: none */
    uint64_t sse_close_after_ms;   /* SSE polling: POST connections end after this; 0: never */
    uint64_t legacy_sse;           /* 1: the 2024-11-05 HTTP+SSE transport is served too */
    char *state_key_file;          /* requestState sealing key; NULL: random at start */
    char *admin_token_file;        /* where admin_token was read from; NULL: none */
    char **allowed_origins;        /* NULL-terminated */
    char **allowed_hosts;          /* NULL-terminated */
    enum log_level log_level;
    enum log_format log_format;
    char *log_file;   /* NULL: the log goes to stderr */
    char *access_log; /* NULL: access lines in the log, at info; "off": none */
    enum log_format access_log_format;
    char **trusted_proxies;             /* NULL-terminated: addresses or CIDRs */
    char *audit_log;                    /* NULL: no audit trail; "journal", or a file */
    uint64_t audit_arguments_max_bytes; /* 0: arguments only as their digest */
    uint64_t audit_required; /* 1: audited calls are refused while records cannot be written */
    enum config_trace trace_context;
    char *session_key_file;     /* the keys of pooled sessions' sealed ids; NULL: random at start */
    uint64_t session_max_age_s; /* a sealed session id opens this long after its initialize */
    struct config_auth auth;
    struct config_server *servers;
    size_t n_servers;
    /* "file:line: key = old is deprecated ...: write key = new", one per use of a spelling kept
     * for one release after a rename (the deprecated era = modern); NULL-terminated, NULL: none. */
    char **deprecated;
};

/*
 * Loads and validates a file. On failure returns -1 and writes "file:line: key: reason" into err.
 * cfg is all-or-nothing: on failure it holds nothing that needs config_clear.
 */
int config_load(const char *path, struct config *cfg, char *err, size_t errlen) MUSTCHECK;
/* Same, from a NUL-terminated string; name is used in error messages. */
int config_load_string(const char *text, const char *name, struct config *cfg, char *err,
                       size_t errlen) MUSTCHECK;
void config_clear(struct config *cfg);
/* The [server:NAME] of cfg named name; NULL if none. */
const struct config_server *config_server_named(const struct config *cfg, const char *name);
/*
 * Whether a and b (of two loads) are the same server: the same name and every key of the section
 * the same after defaults (env_file's lines are in env, so a changed file is a change). A reload
 * keeps what serves an unchanged server.
 */
bool config_server_same(const struct config_server *a, const struct config_server *b);
/*
 * Whether srv's child can start: its cwd is a directory, and its command (argv[0], looked up in
 * PATH when it has no '/', relative to cwd when it is relative) is an executable regular file.
 * 0, or -1 with "file:line: key: [server:NAME] reason" in err. --check-config fails on it; a start
 * or reload only warns (a child is spawned per session, and the others still serve).
 */
int config_check_command(const struct config *cfg, const struct config_server *srv, char *err,
                         size_t errlen);

/*
 * The environment of srv's children (sessions' and pools' alike): inherit_env taken from the
 * gateway's, then env (env_file's lines included), then what names the child for an operator
 * (ps e, /proc/PID/environ): MCPGW_SERVER=<srv's name> and key=value
 * (MCPGW_SESSION_LABEL=<label> or MCPGW_POOL=<tag>). Those two names are the gateway's: a
 * configured variable of either name is left out. extra (NULL: none; NAME=VALUE, NULL-terminated)
 * is one principal's credentials: a name it sets wins over inherit_env's and env's. A new
 * NULL-terminated array of new strings (free with config_env_free).
 */
char **config_child_env(const struct config_server *srv, const char *key, const char *value,
                        char *const *extra);
/* Frees what config_child_env or config_credentials_read returned, its strings wiped first. */
void config_env_free(char **env);

/*
 * Whether srv's children hold one principal's credentials (env_from_claims, credentials_dir or
 * token_exchange): a session's child is its owner's, and its stateless requests go to pool
 * children of their principal alone (pool_principal.c), never to a child another principal shares.
 */
bool config_server_per_principal(const struct config_server *srv);

/*
 * The principal's file of srv's credentials_dir, DIR/PRINCIPAL.env, in env_file's format
 * (config_env_lines), checked like every secret file (util_file_unsafe; a regular file).
 * 0 with *env (new, NULL-terminated; free with config_env_free); 1 when there is no such file;
 * -2 when the principal is not a safe file name ([A-Za-z0-9._:@+-], 1..200 bytes, no leading
 * dot); -1 when the file is unsafe or malformed: why says so, naming the path and a line, never
 * a value.
 */
int config_credentials_read(const struct config_server *srv, const char *principal, char ***env,
                            char *why, size_t whylen);

/*
 * env_file's format, shared with credentials_dir: text (NUL-terminated, modified) as NAME=VALUE
 * lines, the value as written to the end of the line (no quotes, no expansion; a "\\r" before
 * the "\\n" dropped); blank lines and lines starting with '#' skipped. 0 with *env (new,
 * NULL-terminated); -1 with "LINE: reason" in why (a malformed line, or a name set twice: by an
 * earlier line or by already, NAME=VALUE entries; where says what already is). Never a value.
 */
int config_env_lines(char *text, char *const *already, const char *where, char ***env, char *why,
                     size_t whylen);

/*
 * Writes cfg as an INI file to f (--print-config): every key with its value after defaults,
 * section by section, secrets redacted. 0, or -1 when f failed.
 */
int config_print(FILE *f, const struct config *cfg);

/* Every key as "gateway.KEY", "auth.KEY" or "server.KEY", NULL-terminated (static storage). */
const char *const *config_keys(void);

/*
 * The hidden --man of the build and of `meson compile -C build docs`, written to f. what "8":
 * mcp-gateway(8) from usage (the text --help prints); "5": mcp-gateway.ini(5) from options_md
 * (the keys' prose, src/config/options.md) and the option table; "readme", "conf": the file
 * target (README.md, conf/gateway.ini) with its option tables, or the comment above each key,
 * written anew from the same two. Returns 0, or -1 with the reason in err (options.md lacks a key
 * of the table, has one it lacks or one twice; a file cannot be read).
 */
int config_man(FILE *f, const char *what, const char *options_md, const char *target,
               const char *version, const char *usage, char *err, size_t errlen) MUSTCHECK;

#endif
