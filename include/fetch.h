/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_FETCH_H
#define MCPGW_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "util.h"

/*
 * Outgoing HTTPS requests (the authorization server's discovery document, JWKS and introspection
 * endpoint), driven by the event loop: a transfer never blocks it. HTTPS only, the peer verified
 * (against ca_file, or the system's store), no redirects, a bounded body and a deadline. No
 * knowledge of what is fetched.
 */

struct fetch;

struct fetch_request {
    const char *url;       /* https:// */
    const char *form;      /* NULL: GET; else POSTed as application/x-www-form-urlencoded */
    const char *user;      /* with password: HTTP Basic (client_secret_basic: both form-encoded) */
    const char *password;  /* NULL: no Authorization header */
    const char *ca_file;   /* NULL or "": the system's CA store */
    uint64_t timeout_ms;   /* the whole transfer, connection included */
    size_t max_body_bytes; /* a longer answer fails the fetch */
};

struct fetch_result {
    long status;       /* HTTP status; 0 when no answer came */
    const char *body;  /* NUL-terminated, valid during the callback only */
    size_t len;        /* bytes of body */
    int64_t max_age_s; /* from Cache-Control (max-age minus Age) or Expires; -1: none given */
    const char *error; /* NULL when an answer came (any status); else why not */
};

typedef void fetch_done_cb(void *arg, const struct fetch_result *r);

/* Once, before any fetch: the loop the transfers run in. -1 if libcurl cannot start. */
int fetch_module_init(struct loop *l) MUSTCHECK;
/* Cancels every transfer (no callback runs) and releases libcurl. */
void fetch_module_free(void);

/*
 * Starts a transfer. cb(arg, result) runs once, from the loop, never inside fetch_start. NULL
 * (with the reason logged) when the module is not initialized or libcurl refuses the request;
 * then cb never runs.
 */
struct fetch *fetch_start(const struct fetch_request *req, fetch_done_cb *cb, void *arg);
/* Abandons a transfer whose callback has not run yet: it never will. */
void fetch_cancel(struct fetch *f);

/* Transfers started, and those that ended without an answer or with a status other than 2xx. */
uint64_t fetch_started_total(void);
uint64_t fetch_failed_total(void);

#endif
