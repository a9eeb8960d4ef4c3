/* SPDX-License-Identifier: MIT */
/*
 * Outgoing HTTPS through libcurl's multi interface, on the gateway's one loop: libcurl tells which
 * sockets to watch and when to call it again (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION);
 * the loop tells libcurl what happened (curl_multi_socket_action). Name resolution, when a URL
 * names a host, runs in libcurl's resolver thread, not on the loop. Finished transfers are
 * reported from the loop, so a callback never runs inside fetch_start and may start or cancel
 * other transfers.
 *
 * The only includer of curl/curl.h.
 */
#include "fetch.h"

#include <sys/epoll.h>

#include <curl/curl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "log.h"
#include "util.h"
#include "version.h"

struct fetch {
    CURL *e;
    struct curl_slist *headers;
    fetch_done_cb *cb;
    void *arg;
    char *body;
    size_t len, cap, max;
    bool too_big;
    /* Caching headers of the last response (a 100 Continue's are forgotten). */
    int64_t max_age, age;
    bool no_cache;
    time_t expires, date;
    char err[CURL_ERROR_SIZE];
    struct fetch *prev, *next;
};

static struct {
    CURLM *m;
    struct loop *l;
    struct loop_timer *timer;
    struct fetch *list;
    uint64_t started, failed;
} F;

static void fetch_check_done(void);

static void
fetch_io(int fd, uint32_t events, void *arg)
{
    (void)arg;
    int mask = ((events & EPOLLIN) ? CURL_CSELECT_IN : 0)
               | ((events & EPOLLOUT) ? CURL_CSELECT_OUT : 0)
               | ((events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
    int running;
    curl_multi_socket_action(F.m, fd, mask, &running);
    fetch_check_done();
}

static int
fetch_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e;
    (void)userp;
    struct loop_watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w != NULL)
            loop_watch_del(w);
        curl_multi_assign(F.m, s, NULL);
        return 0;
    }
    uint32_t events =
        ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    if (w == NULL) {
        w = loop_watch_add(F.l, s, events, fetch_io, NULL);
        if (w == NULL) {
            log_warn(NULL, "fetch: cannot watch a socket");
            return -1;
        }
        curl_multi_assign(F.m, s, w);
        return 0;
    }
    return loop_watch_mod(w, events) == 0 ? 0 : -1;
}

static void
fetch_timer_fired(void *arg)
{
    (void)arg;
    F.timer = NULL; /* freed by the loop */
    int running;
    curl_multi_socket_action(F.m, CURL_SOCKET_TIMEOUT, 0, &running);
    fetch_check_done();
}

static int
fetch_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    (void)userp;
    loop_timer_del(F.timer);
    F.timer = NULL;
    if (timeout_ms >= 0)
        F.timer = loop_timer_add(F.l, (uint64_t)timeout_ms, fetch_timer_fired, NULL);
    return 0;
}

static size_t
fetch_write(char *data, size_t size, size_t n, void *arg)
{
    struct fetch *f = arg;
    size_t len = size * n;
    if (len > f->max - f->len) {
        f->too_big = true;
        return 0; /* libcurl ends the transfer: CURLE_WRITE_ERROR */
    }
    if (f->len + len + 1 > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + len + 1)
            cap *= 2;
        /* Not realloc: the old buffer is wiped (an answer may hold a token: token exchange). */
        char *body = xmalloc(cap);
        if (f->body != NULL) {
            memcpy(body, f->body, f->len);
            explicit_bzero(f->body, f->cap);
            free(f->body);
        }
        f->body = body;
        f->cap = cap;
    }
    memcpy(f->body + f->len, data, len);
    f->len += len;
    f->body[f->len] = '\0';
    return len;
}

/* A header line's value after "Name:", blanks dropped, copied into out; NULL if another name. */
static const char *
fetch_header_value(const char *line, size_t n, const char *name, char *out, size_t size)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return NULL;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t len = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
    memcpy(out, v, len);
    out[len] = '\0';
    return out;
}

/* Cache-Control directives that matter here: max-age=N, no-cache, no-store. */
static void
fetch_cache_control(struct fetch *f, const char *v)
{
    for (const char *p = v; *p != '\0';) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        if (n >= 8 && strncasecmp(p, "max-age=", 8) == 0) {
            uint64_t s;
            char num[24];
            size_t k = n - 8 < sizeof(num) - 1 ? n - 8 : sizeof(num) - 1;
            memcpy(num, p + 8, k);
            num[k] = '\0';
            const char *why;
            if (util_parse_u64(num, 0, INT32_MAX, &s, &why) == 0)
                f->max_age = (int64_t)s;
        } else if ((n == 8 && strncasecmp(p, "no-cache", 8) == 0)
                   || (n == 8 && strncasecmp(p, "no-store", 8) == 0)) {
            f->no_cache = true;
        }
        p += n;
    }
}

static size_t
fetch_header(char *line, size_t size, size_t n, void *arg)
{
    struct fetch *f = arg;
    size_t len = size * n;
    char v[256];
    uint64_t u;
    const char *why;
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        f->max_age = f->age = -1; /* a new response (after 100 Continue) */
        f->no_cache = false;
        f->expires = f->date = -1;
    } else if (fetch_header_value(line, len, "Cache-Control", v, sizeof(v)) != NULL) {
        fetch_cache_control(f, v);
    } else if (fetch_header_value(line, len, "Age", v, sizeof(v)) != NULL) {
        if (util_parse_u64(v, 0, INT32_MAX, &u, &why) == 0)
            f->age = (int64_t)u;
    } else if (fetch_header_value(line, len, "Expires", v, sizeof(v)) != NULL) {
        f->expires = curl_getdate(v, NULL);
    } else if (fetch_header_value(line, len, "Date", v, sizeof(v)) != NULL) {
        f->date = curl_getdate(v, NULL);
    }
    return len;
}

/* Seconds the answer may be reused for, by RFC 9111's order: no-cache, max-age, Expires. */
static int64_t
fetch_max_age(const struct fetch *f)
{
    if (f->no_cache)
        return 0;
    if (f->max_age >= 0) {
        int64_t left = f->max_age - (f->age > 0 ? f->age : 0);
        return left > 0 ? left : 0;
    }
    if (f->expires >= 0) {
        time_t now = f->date >= 0 ? f->date : time(NULL);
        return f->expires > now ? (int64_t)(f->expires - now) : 0;
    }
    return -1;
}

static void
fetch_unlink(struct fetch *f)
{
    UTIL_DLIST_UNLINK(F.list, f, prev, next);
}

static void
fetch_free(struct fetch *f)
{
    curl_multi_remove_handle(F.m, f->e);
    curl_easy_cleanup(f->e);
    curl_slist_free_all(f->headers);
    if (f->body != NULL)
        explicit_bzero(f->body, f->cap);
    free(f->body);
    free(f);
}

static void
fetch_check_done(void)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(F.m, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct fetch *f = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&f);
        if (f == NULL)
            continue;
        CURLcode rc = msg->data.result;
        struct fetch_result r = { .status = 0, .body = f->body ? f->body : "", .len = f->len };
        if (rc == CURLE_OK) {
            curl_easy_getinfo(f->e, CURLINFO_RESPONSE_CODE, &r.status);
            r.max_age_s = fetch_max_age(f);
        } else {
            r.max_age_s = -1;
            r.error = f->too_big          ? "the answer exceeds its size bound"
                      : f->err[0] != '\0' ? f->err
                                          : curl_easy_strerror(rc);
        }
        if (r.error != NULL || r.status < 200 || r.status > 299)
            F.failed++;
        fetch_unlink(f);
        f->cb(f->arg, &r);
        fetch_free(f);
    }
}

int
fetch_module_init(struct loop *l)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -1;
    F.m = curl_multi_init();
    if (F.m == NULL) {
        curl_global_cleanup();
        return -1;
    }
    F.l = l;
    curl_multi_setopt(F.m, CURLMOPT_SOCKETFUNCTION, fetch_socket);
    curl_multi_setopt(F.m, CURLMOPT_TIMERFUNCTION, fetch_timer);
    return 0;
}

void
fetch_module_free(void)
{
    if (F.m == NULL)
        return;
    while (F.list != NULL) {
        struct fetch *f = F.list;
        fetch_unlink(f);
        fetch_free(f);
    }
    curl_multi_cleanup(F.m);
    F.m = NULL;
    loop_timer_del(F.timer);
    F.timer = NULL;
    curl_global_cleanup();
}

/* Client credentials for HTTP Basic are form-encoded first (RFC 6749 section 2.3.1). */
static int
fetch_basic(struct fetch *f, const char *user, const char *password)
{
    char *u = curl_easy_escape(f->e, user, 0), *p = curl_easy_escape(f->e, password, 0);
    int rc = u != NULL && p != NULL
                     && curl_easy_setopt(f->e, CURLOPT_HTTPAUTH, CURLAUTH_BASIC) == CURLE_OK
                     && curl_easy_setopt(f->e, CURLOPT_USERNAME, u) == CURLE_OK
                     && curl_easy_setopt(f->e, CURLOPT_PASSWORD, p) == CURLE_OK
                 ? 0
                 : -1;
    curl_free(u);
    curl_free(p);
    return rc;
}

static int
fetch_setup(struct fetch *f, const struct fetch_request *q)
{
    CURL *e = f->e;
    f->headers = curl_slist_append(NULL, "Accept: application/json");
    bool ok =
        f->headers != NULL && curl_easy_setopt(e, CURLOPT_URL, q->url) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https") == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)q->timeout_ms) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)q->max_body_bytes) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_USERAGENT, "mcp-gateway/" MCPGW_VERSION) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fetch_write) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_WRITEDATA, f) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, fetch_header) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_HEADERDATA, f) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->err) == CURLE_OK
        && curl_easy_setopt(e, CURLOPT_PRIVATE, f) == CURLE_OK;
    if (ok && q->ca_file != NULL && q->ca_file[0] != '\0')
        ok = curl_easy_setopt(e, CURLOPT_CAINFO, q->ca_file) == CURLE_OK;
    if (ok && q->form != NULL)
        ok = curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, q->form) == CURLE_OK;
    if (ok && q->password != NULL)
        ok = fetch_basic(f, q->user != NULL ? q->user : "", q->password) == 0;
    return ok ? 0 : -1;
}

struct fetch *
fetch_start(const struct fetch_request *req, fetch_done_cb *cb, void *arg)
{
    if (F.m == NULL) {
        log_warn(NULL, "fetch %s: outgoing HTTPS is not set up", req->url);
        return NULL;
    }
    struct fetch *f = xcalloc(1, sizeof(*f));
    f->cb = cb;
    f->arg = arg;
    f->max = req->max_body_bytes;
    f->max_age = f->age = -1;
    f->expires = f->date = -1;
    f->e = curl_easy_init();
    if (f->e == NULL || fetch_setup(f, req) == -1 || curl_multi_add_handle(F.m, f->e) != CURLM_OK) {
        log_warn(NULL, "fetch %s: libcurl refused the request", req->url);
        if (f->e != NULL)
            curl_easy_cleanup(f->e);
        curl_slist_free_all(f->headers);
        free(f);
        return NULL;
    }
    F.started++;
    f->next = F.list;
    if (F.list != NULL)
        F.list->prev = f;
    F.list = f;
    return f;
}

void
fetch_cancel(struct fetch *f)
{
    if (f == NULL)
        return;
    fetch_unlink(f);
    fetch_free(f);
}

uint64_t
fetch_started_total(void)
{
    return F.started;
}

uint64_t
fetch_failed_total(void)
{
    return F.failed;
}
