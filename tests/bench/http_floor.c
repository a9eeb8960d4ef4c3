/* SPDX-License-Identifier: MIT */
/*
 * The HTTP floor of the benchmark (contender H): libmicrohttpd 0.9.75 set up as the gateway sets
 * it up (its epoll, driven by MHD_run from an outer epoll_wait, suspension allowed, the same
 * connection pool size, timeout and limit, completed notifications), answering every POST at once
 * with a canned echo result in one SSE event with the gateway's four response headers: no child, no
 * JSON parsing (the id is found with strstr), never suspended. What HTTP alone costs a process on
 * this machine, so that the gateway's CPU per echo reads as H plus what relaying to a child adds.
 *   build/tests/bench/http_floor [PORT]     (default 0: any; listens on 127.0.0.1 only)
 * Ends on SIGTERM or SIGINT.
 */
#include <sys/epoll.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floor_mhd.h"

static enum MHD_Result
floor_answer(struct MHD_Connection *c, const char *method, const struct floor_body *r)
{
    struct MHD_Response *resp;
    unsigned status = MHD_HTTP_OK;
    const char *id = strcmp(method, "POST") == 0 ? strstr(r->text, "\"id\":") : NULL;

    if (id == NULL) {
        /* a notification (202), a DELETE or anything else (200): no body */
        if (strcmp(method, "POST") == 0)
            status = MHD_HTTP_ACCEPTED;
        resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    } else {
        char *out = malloc(256);
        if (out == NULL)
            return MHD_NO;
        int n = snprintf(out, 256,
                         "event: message\ndata: {\"result\":{\"content\":[{\"type\":\"text\","
                         "\"text\":\"0123456789abcdef0123456789abcdef\"}]},\"jsonrpc\":\"2.0\","
                         "\"id\":%ld}\n\n",
                         strtol(id + 5, NULL, 10));
        resp = MHD_create_response_from_buffer((size_t)n, out, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        MHD_add_response_header(resp, "X-Request-Id", "0123456789abcdef");
        if (strstr(r->text, "\"initialize\"") != NULL)
            MHD_add_response_header(resp, "Mcp-Session-Id", "http-floor");
    }
    return floor_queue(c, status, resp);
}

static enum MHD_Result
floor_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
              const char *version, const char *upload, size_t *upload_size, void **ptr)
{
    (void)cls;
    (void)url;
    (void)version;
    struct floor_body *r = *ptr;

    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        *ptr = r;
        return r != NULL ? MHD_YES : MHD_NO;
    }
    if (floor_body_add(r, upload, upload_size))
        return MHD_YES;
    return floor_answer(c, method, r);
}

static void
floor_completed(void *cls, struct MHD_Connection *c, void **ptr,
                enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    free(*ptr);
    *ptr = NULL;
}

int
main(int argc, char **argv)
{
    int ep;
    struct MHD_Daemon *d = floor_start("http_floor", argc > 1 ? atoi(argv[1]) : 0, floor_handler,
                                       floor_completed, &ep);
    for (;;) {
        struct epoll_event out[2];
        int n = epoll_wait(ep, out, 2, 1000);
        for (int i = 0; i < n; i++)
            if (out[i].data.u32 == FLOOR_EV_STOP) {
                MHD_stop_daemon(d);
                return 0;
            }
        MHD_run(d);
    }
}
