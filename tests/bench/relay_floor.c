/* SPDX-License-Identifier: MIT */
/*
 * The relay floor of the benchmark (contender R): libmicrohttpd 0.9.75 set up as http_floor sets
 * it up (as the gateway does), relaying each POST to a child the plain way: an initialize starts
 * a child (one per session, found again by its Mcp-Session-Id), a request is written to the
 * child's stdin as it is, its connection suspended until the child's line with its id comes back,
 * then resumed and answered with that line as JSON. The child's writes are gathered into one per
 * loop turn and its lines read until EAGAIN, as the gateway does; nothing else: no validation, no
 * id of its own, no limits, timers, access record, cancellation or parking. What passing a line
 * through libmicrohttpd to a child costs a process on this machine, so that the gateway's CPU per
 * echo reads as R plus what its own work adds (or saves: R suspends the plain way, and
 * libmicrohttpd then takes the socket out of its epoll set and puts it back, two epoll_ctl per
 * request, which the gateway's parking avoids). Ids are the client's own: the load generator
 * never has two requests with one id in flight.
 *   build/tests/bench/relay_floor PORT CHILD [ARG]   (PORT 0: any; listens on 127.0.0.1 only)
 * Bodies up to 4 KiB (an echo's). Ends on SIGTERM or SIGINT; a child ends when its stdin closes
 * (its session's DELETE, or the end).
 */
#include <sys/epoll.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "floor_mhd.h"

#define RELAY_CHILDREN 256
#define RELAY_LINE_MAX (1 << 20)
#define RELAY_RUNS     4
/* The outer epoll's event data of child k's stdout (floor_mhd.h has the first two). */
#define RELAY_EV_CHILD 2u

struct relay_req;

struct relay_child {
    int in;  /* its stdin; -1 once closed */
    int out; /* its stdout */
    char *w; /* bytes for its stdin, written once per loop turn */
    size_t wlen, wcap;
    char *r; /* what its stdout gave that is not a whole line yet */
    size_t rlen;
    struct relay_req *waiting; /* requests suspended for its answer */
};

struct relay_req {
    struct floor_body body;
    long id;
    int child;    /* for an initialize: the child it started (its session id) */
    char *answer; /* the child's line, once it came */
    size_t answer_len;
    struct relay_req *next; /* in its child's waiting list */
    struct MHD_Connection *c;
};

static struct relay_child kids[RELAY_CHILDREN];
static int nkids;
static char *const *child_argv;
static int ep;

static _Noreturn void
die(const char *what)
{
    perror(what);
    exit(1);
}

static void
child_append(struct relay_child *ch, const char *p, size_t n)
{
    if (ch->in == -1)
        return;
    if (ch->wlen + n + 1 > ch->wcap) {
        ch->wcap = (ch->wlen + n + 1) * 2;
        ch->w = realloc(ch->w, ch->wcap);
        if (ch->w == NULL)
            die("relay_floor: realloc");
    }
    memcpy(ch->w + ch->wlen, p, n);
    ch->wlen += n;
    ch->w[ch->wlen++] = '\n';
}

/* Writes what each child's stdin waits for; a full pipe keeps the rest for the next turn. */
static void
child_flush(void)
{
    for (int i = 0; i < nkids; i++) {
        struct relay_child *ch = &kids[i];
        if (ch->wlen == 0 || ch->in == -1)
            continue;
        ssize_t n = write(ch->in, ch->w, ch->wlen);
        if (n > 0) {
            memmove(ch->w, ch->w + n, ch->wlen - (size_t)n);
            ch->wlen -= (size_t)n;
        } else if (n == -1 && errno != EAGAIN)
            die("relay_floor: write to child");
    }
}

static int
child_start(void)
{
    int in[2], out[2];
    if (nkids == RELAY_CHILDREN)
        return -1;
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        die("relay_floor: pipe");
    pid_t pid = fork();
    if (pid == -1)
        die("relay_floor: fork");
    if (pid == 0) {
        if (dup2(in[0], 0) == -1 || dup2(out[1], 1) == -1)
            _exit(127);
        execv(child_argv[0], child_argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    struct relay_child *ch = &kids[nkids];
    *ch = (struct relay_child){ .in = in[1], .out = out[0] };
    ch->r = malloc(RELAY_LINE_MAX);
    if (ch->r == NULL)
        die("relay_floor: malloc");
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = RELAY_EV_CHILD + (uint32_t)nkids };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ch->out, &ev) != 0)
        die("relay_floor: epoll_ctl");
    return nkids++;
}

static long
line_id(const char *p, size_t n)
{
    const char *id = memmem(p, n, "\"id\":", 5);
    return id != NULL ? strtol(id + 5, NULL, 10) : -1;
}

/* One line from a child: the answer of the waiting request with its id (others are dropped). */
static void
child_line(struct relay_child *ch, const char *p, size_t n)
{
    long id = line_id(p, n);
    for (struct relay_req **q = &ch->waiting; *q != NULL; q = &(*q)->next) {
        struct relay_req *r = *q;
        if (r->id != id)
            continue;
        *q = r->next;
        r->answer = malloc(n);
        if (r->answer == NULL)
            die("relay_floor: malloc");
        memcpy(r->answer, p, n);
        r->answer_len = n;
        MHD_resume_connection(r->c);
        return;
    }
}

/* Reads a child's stdout until EAGAIN and hands on each whole line. */
static void
child_read(struct relay_child *ch)
{
    for (;;) {
        ssize_t n = read(ch->out, ch->r + ch->rlen, RELAY_LINE_MAX - ch->rlen);
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                epoll_ctl(ep, EPOLL_CTL_DEL, ch->out, NULL);
                close(ch->out);
                ch->out = -1;
            }
            return;
        }
        ch->rlen += (size_t)n;
        size_t start = 0;
        for (;;) {
            char *nl = memchr(ch->r + start, '\n', ch->rlen - start);
            if (nl == NULL)
                break;
            child_line(ch, ch->r + start, (size_t)(nl - (ch->r + start)));
            start = (size_t)(nl - ch->r) + 1;
        }
        memmove(ch->r, ch->r + start, ch->rlen - start);
        ch->rlen -= start;
        if (ch->rlen == RELAY_LINE_MAX) {
            fprintf(stderr, "relay_floor: a child's line over %d bytes\n", RELAY_LINE_MAX);
            exit(1);
        }
    }
}

/* The child's answer, resumed: its line as JSON, with the session id of the child it started. */
static enum MHD_Result
relay_answer(struct MHD_Connection *c, struct relay_req *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->answer_len, r->answer, MHD_RESPMEM_MUST_FREE);
    r->answer = NULL;
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (r->child >= 0) {
        char sid[16];
        snprintf(sid, sizeof(sid), "r%d", r->child);
        MHD_add_response_header(resp, "Mcp-Session-Id", sid);
    }
    return floor_queue(c, MHD_HTTP_OK, resp);
}

static struct MHD_Response *
relay_empty(void)
{
    return MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result
relay_request(struct MHD_Connection *c, const char *method, struct relay_req *r)
{
    const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
    int k = sid != NULL && sid[0] == 'r' ? atoi(sid + 1) : -1;

    if (strcmp(method, "DELETE") == 0 && k >= 0 && k < nkids) {
        if (kids[k].in != -1)
            close(kids[k].in); /* the child ends on its stdin's end */
        kids[k].in = -1;
        return floor_queue(c, MHD_HTTP_OK, relay_empty());
    }
    if (strcmp(method, "POST") != 0)
        return floor_queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, relay_empty());
    if (k < 0 && strstr(r->body.text, "\"initialize\"") != NULL)
        k = r->child = child_start();
    if (k < 0 || k >= nkids)
        return floor_queue(c, MHD_HTTP_NOT_FOUND, relay_empty());
    struct relay_child *ch = &kids[k];
    child_append(ch, r->body.text, r->body.len);
    r->id = line_id(r->body.text, r->body.len);
    if (r->id < 0) /* a notification */
        return floor_queue(c, MHD_HTTP_ACCEPTED, relay_empty());
    r->c = c;
    r->next = ch->waiting;
    ch->waiting = r;
    MHD_suspend_connection(c);
    return MHD_YES;
}

static enum MHD_Result
relay_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
              const char *version, const char *upload, size_t *upload_size, void **ptr)
{
    (void)cls;
    (void)url;
    (void)version;
    struct relay_req *r = *ptr;

    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL)
            return MHD_NO;
        r->child = -1;
        *ptr = r;
        return MHD_YES;
    }
    if (floor_body_add(&r->body, upload, upload_size))
        return MHD_YES;
    if (r->answer != NULL)
        return relay_answer(c, r);
    return relay_request(c, method, r);
}

static void
relay_completed(void *cls, struct MHD_Connection *c, void **ptr,
                enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct relay_req *r = *ptr;
    if (r != NULL)
        free(r->answer);
    free(r);
    *ptr = NULL;
}

/*
 * libmicrohttpd refuses to stop with a connection suspended: each request still waiting gets an
 * empty answer first (a connection it closes then). The children see their stdin end as this
 * process ends.
 */
static void
relay_stop(struct MHD_Daemon *d)
{
    for (int i = 0; i < nkids; i++)
        while (kids[i].waiting != NULL) {
            struct relay_req *r = kids[i].waiting;
            kids[i].waiting = r->next;
            r->answer = calloc(1, 1);
            if (r->answer == NULL)
                die("relay_floor: calloc");
            MHD_resume_connection(r->c);
        }
    MHD_stop_daemon(d);
}

int
main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: relay_floor PORT CHILD [ARG...]\n");
        return 2;
    }
    child_argv = argv + 2;
    struct sigaction reap = { .sa_handler = SIG_DFL, .sa_flags = SA_NOCLDWAIT };
    sigaction(SIGCHLD, &reap, NULL); /* no zombies: nothing waits for a child here */
    struct MHD_Daemon *d =
        floor_start("relay_floor", atoi(argv[1]), relay_handler, relay_completed, &ep);
    for (;;) {
        struct epoll_event out[64];
        int n = epoll_wait(ep, out, 64, 1000);
        for (int i = 0; i < n; i++) {
            if (out[i].data.u32 == FLOOR_EV_STOP) {
                relay_stop(d);
                return 0;
            }
            if (out[i].data.u32 >= RELAY_EV_CHILD)
                child_read(&kids[out[i].data.u32 - RELAY_EV_CHILD]);
        }
        /* As the gateway does: again at once while libmicrohttpd has more to do (a resumed
         * connection answered and kept alive: its next request to read). */
        for (int k = 0; k < RELAY_RUNS; k++) {
            MHD_UNSIGNED_LONG_LONG t;
            MHD_run(d);
            if (MHD_get_timeout(d, &t) != MHD_YES || t > 0)
                break;
        }
        child_flush();
    }
}
