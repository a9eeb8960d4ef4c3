/* SPDX-License-Identifier: MIT */
/*
 * RFC 8693 token exchange (auth.h): the client's token, verified by auth.c, is sent as the
 * subject token (grant_type urn:ietf:params:oauth:grant-type:token-exchange, subject_token_type
 * access_token) with the server's audience, resource and scopes, the gateway authenticating as
 * the server's token_exchange_client_id (client_secret_basic), to the server's
 * token_exchange_endpoint or the token_endpoint of [auth] issuer's metadata (auth_remote.c
 * discovers it with the rest). The answer is read with the scanner, not jansson, so the issued
 * token is copied once, into memory this module wipes; fetch.c wipes its own body buffer.
 *
 * Outcomes: 200 with an access_token: OK. 400, 401 or 403 with an OAuth "error": REFUSED (the
 * error code is kept for the reason, never error_description, which a server may fill with
 * anything). Any other answer: BAD_ANSWER. No answer in token_exchange_timeout_ms, or no endpoint:
 * UNREACHABLE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth_int.h"
#include "crypto.h"
#include "fetch.h"
#include "jsonrpc.h"
#include "log.h"
#include "util.h"

#define AUTH_XCHG_TOKEN_MAX  16384 /* an issued token longer than this is refused */
#define AUTH_XCHG_ANSWER_MAX 65536 /* the token endpoint's answer */

static const char auth_xchg_grant[] = "urn:ietf:params:oauth:grant-type:token-exchange";
static const char auth_xchg_subject_type[] = "urn:ietf:params:oauth:token-type:access_token";

struct auth_exchange {
    const struct config_server *srv;
    char *ca_file; /* NULL: the system's store */
    struct auth_remote *r;
    struct auth_wait *w; /* waiting for discovery */
    struct fetch *f;     /* the exchange in flight */
    char *subject;       /* kept only while the endpoint is discovered */
    size_t len;
    auth_exchange_cb *cb;
    void *arg;
};

void
auth_exchanged_free(struct auth_exchanged *x)
{
    if (x == NULL)
        return;
    if (x->token != NULL) {
        crypto_cleanse(x->token, x->len);
        free(x->token);
    }
    free(x);
}

static struct auth_exchanged *
auth_xchg_result(enum auth_exchange_status st, const char *why)
{
    struct auth_exchanged *x = xcalloc(1, sizeof(*x));
    x->status = st;
    x->expires_in_s = -1;
    snprintf(x->why, sizeof x->why, "%s", why != NULL ? why : "");
    return x;
}

static void
auth_xchg_forget_subject(struct auth_exchange *x)
{
    if (x->subject != NULL) {
        crypto_cleanse(x->subject, x->len);
        free(x->subject);
        x->subject = NULL;
    }
}

static void
auth_xchg_free(struct auth_exchange *x)
{
    auth_xchg_forget_subject(x);
    free(x->ca_file);
    free(x);
}

/* Ends x with res: the callback owns res, x is gone. */
static void
auth_xchg_end(struct auth_exchange *x, struct auth_exchanged *res)
{
    auth_exchange_cb *cb = x->cb;
    void *arg = x->arg;
    auth_xchg_free(x);
    cb(arg, res);
}

/* Appends "&name=value" (value form-escaped) at form[*o]; room was reserved by the caller. */
static void
auth_xchg_param(char *form, size_t *o, const char *name, const char *value, size_t vlen)
{
    *o += (size_t)sprintf(form + *o, "%s%s=", *o > 0 ? "&" : "", name);
    *o += auth_form_escape(value, vlen, form + *o);
}

/* The value of member key of the object at obj, as a string into out; false when absent. */
static bool
auth_xchg_string(const char *p, struct jsonrpc_span obj, const char *key, char *out, size_t cap,
                 size_t *len)
{
    struct jsonrpc_span v;
    return jsonrpc_member_at(p, obj, key, &v) == 0 && v.len > 0
           && jsonrpc_string_at(p, v, out, cap, len);
}

struct auth_exchanged *
auth_exchange_judge(const struct fetch_result *res)
{
    char why[160];
    struct jsonrpc_info info;
    int rc = jsonrpc_scan(res->body, res->len, &info, NULL);
    struct jsonrpc_span obj = { 0, res->len };
    while (obj.len > 0
           && (res->body[obj.off] == ' ' || res->body[obj.off] == '\t' || res->body[obj.off] == '\r'
               || res->body[obj.off] == '\n')) {
        obj.off++;
        obj.len--;
    }
    bool json =
        (rc == JSONRPC_OK || rc == JSONRPC_EINVALID) && obj.len > 0 && res->body[obj.off] == '{';
    if (res->status == 400 || res->status == 401 || res->status == 403) {
        char code[65];
        size_t n = 0;
        bool named = json && auth_xchg_string(res->body, obj, "error", code, sizeof code, &n);
        for (size_t i = 0; named && i < n; i++)
            named = (code[i] >= 'a' && code[i] <= 'z') || code[i] == '_';
        if (named && n > 0) {
            snprintf(why, sizeof why, "the authorization server refused the exchange (%s)", code);
            return auth_xchg_result(AUTH_EXCHANGE_REFUSED, why);
        }
    }
    if (res->status != 200) {
        snprintf(why, sizeof why, "the token endpoint answered HTTP status %ld", res->status);
        return auth_xchg_result(AUTH_EXCHANGE_BAD_ANSWER, why);
    }
    char *tok = xmalloc(AUTH_XCHG_TOKEN_MAX + 1);
    size_t n = 0;
    bool ok =
        json && auth_xchg_string(res->body, obj, "access_token", tok, AUTH_XCHG_TOKEN_MAX + 1, &n);
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)tok[i] > 0x20 && tok[i] != 0x7f;
    if (!ok || n == 0) {
        crypto_cleanse(tok, AUTH_XCHG_TOKEN_MAX + 1);
        free(tok);
        return auth_xchg_result(AUTH_EXCHANGE_BAD_ANSWER,
                                "the token endpoint's answer has no usable access_token (a JSON "
                                "string of visible ASCII, at most 16384 bytes)");
    }
    struct auth_exchanged *x = auth_xchg_result(AUTH_EXCHANGE_OK, NULL);
    x->token = xstrndup(tok, n);
    x->len = n;
    crypto_cleanse(tok, AUTH_XCHG_TOKEN_MAX + 1);
    free(tok);
    struct jsonrpc_span v;
    uint64_t s;
    if (jsonrpc_member_at(res->body, obj, "expires_in", &v) == 0 && v.len > 0
        && jsonrpc_id_u64(res->body, v, &s) && s <= INT32_MAX)
        x->expires_in_s = (int64_t)s;
    return x;
}

static void
auth_xchg_done(void *arg, const struct fetch_result *res)
{
    struct auth_exchange *x = arg;
    x->f = NULL;
    struct auth_exchanged *out;
    if (res->error != NULL) {
        char why[200];
        snprintf(why, sizeof why, "the token endpoint did not answer: %s", res->error);
        out = auth_xchg_result(AUTH_EXCHANGE_UNREACHABLE, why);
    } else {
        out = auth_exchange_judge(res);
    }
    if (out->status != AUTH_EXCHANGE_OK)
        log_info(NULL, "token exchange for [server:%s]: %s", x->srv->name, out->why);
    auth_xchg_end(x, out);
}

/* Sends the exchange to url; the subject is wiped here. NULL, or why it could not be sent. */
static const char *
auth_xchg_send(struct auth_exchange *x, const char *url)
{
    const struct config_server *srv = x->srv;
    size_t room = 3 * x->len + 512;
    room += srv->token_exchange_audience ? 3 * strlen(srv->token_exchange_audience) : 0;
    room += srv->token_exchange_resource ? 3 * strlen(srv->token_exchange_resource) : 0;
    char scopes[4096] = "";
    size_t sl = 0;
    for (char **sc = srv->token_exchange_scopes; sc != NULL && *sc != NULL; sc++) {
        int w = snprintf(scopes + sl, sizeof scopes - sl, "%s%s", sl > 0 ? " " : "", *sc);
        if (w < 0 || (size_t)w >= sizeof scopes - sl)
            return "token_exchange_scopes are too long (4096 bytes at most)";
        sl += (size_t)w;
    }
    room += 3 * sl;
    char *form = xmalloc(room);
    size_t o = 0;
    auth_xchg_param(form, &o, "grant_type", auth_xchg_grant, strlen(auth_xchg_grant));
    auth_xchg_param(form, &o, "subject_token", x->subject, x->len);
    auth_xchg_param(form, &o, "subject_token_type", auth_xchg_subject_type,
                    strlen(auth_xchg_subject_type));
    if (srv->token_exchange_audience != NULL)
        auth_xchg_param(form, &o, "audience", srv->token_exchange_audience,
                        strlen(srv->token_exchange_audience));
    if (srv->token_exchange_resource != NULL)
        auth_xchg_param(form, &o, "resource", srv->token_exchange_resource,
                        strlen(srv->token_exchange_resource));
    if (sl > 0)
        auth_xchg_param(form, &o, "scope", scopes, sl);
    auth_xchg_forget_subject(x);
    struct fetch_request q = {
        .url = url,
        .form = form,
        .user = srv->token_exchange_client_id,
        .password = srv->token_exchange_client_secret,
        .ca_file = x->ca_file,
        .timeout_ms = srv->token_exchange_timeout_ms,
        .max_body_bytes = AUTH_XCHG_ANSWER_MAX,
    };
    x->f = fetch_start(&q, auth_xchg_done, x);
    crypto_cleanse(form, o);
    free(form);
    return x->f == NULL ? "the token exchange could not be sent (the gateway's log says why)"
                        : NULL;
}

static void
auth_xchg_wake(void *arg)
{
    struct auth_exchange *x = arg;
    x->w = NULL;
    bool running;
    const char *url = auth_remote_token_uri(x->r, &running);
    if (url == NULL && running) {
        x->w = auth_remote_wait(x->r, auth_xchg_wake, x);
        return;
    }
    const char *why = url == NULL ? "the token endpoint could not be discovered from [auth] "
                                    "issuer's metadata"
                                  : auth_xchg_send(x, url);
    if (why != NULL)
        auth_xchg_end(x, auth_xchg_result(AUTH_EXCHANGE_UNREACHABLE, why));
}

struct auth_exchange *
auth_exchange_start(struct auth *a, const struct config_server *srv, const char *subject,
                    size_t len, auth_exchange_cb *cb, void *arg, struct auth_exchanged **now)
{
    *now = NULL;
    struct auth_remote *r;
    const struct config_auth *ca = auth_parts(a, &r);
    struct auth_exchange *x = xcalloc(1, sizeof(*x));
    x->srv = srv;
    x->ca_file = ca->tls_ca_file != NULL ? xstrdup(ca->tls_ca_file) : NULL;
    x->subject = xstrndup(subject, len);
    x->len = len;
    x->cb = cb;
    x->arg = arg;
    x->r = r;
    const char *url = srv->token_exchange_endpoint, *why = NULL;
    enum auth_status st = AUTH_OK;
    if (url == NULL)
        st = auth_remote_token_endpoint(r, util_now_ms(), &url);
    if (st == AUTH_PENDING) {
        x->w = auth_remote_wait(r, auth_xchg_wake, x);
        return x;
    }
    why = st != AUTH_OK ? "the token endpoint is not known: its discovery from [auth] issuer's "
                          "metadata failed lately"
                        : auth_xchg_send(x, url);
    if (why == NULL)
        return x;
    log_info(NULL, "token exchange for [server:%s]: %s", srv->name, why);
    *now = auth_xchg_result(AUTH_EXCHANGE_UNREACHABLE, why);
    auth_xchg_free(x);
    return NULL;
}

void
auth_exchange_cancel(struct auth_exchange *x)
{
    if (x == NULL)
        return;
    auth_wait_cancel(x->w);
    fetch_cancel(x->f);
    auth_xchg_free(x);
}
