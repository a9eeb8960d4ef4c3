/* SPDX-License-Identifier: MIT */
/*
 * relay: a state-machine fuzzer of the pool (src/pool*.c), its real code with a fake child
 * (tests/unit/fake_upstream.c), the real loop, streams, in-flight tables and scanner, and a fake
 * clock: this file is built with -Dclock_gettime=fuzz_clock_gettime (tests/fuzz/meson.build), so
 * util_now_ms and the loop's timers read relay_now_us, which only the input moves. Nothing
 * sleeps, nothing forks, no socket: an input takes about a millisecond under ASan. Built with
 * RELAY_SESSIONS 1 (session_relay_fuzz.c), the same script drives the session layer instead: its
 * events, settings and invariants are listed there; the code for them is below, under "session
 * mode" and check_sessions.
 *
 * The input is a script. Its first three bytes choose the configuration ([server:a] with era
 * legacy, stateless or auto, pool size and per-child cap, warm children, request_timeout_ms on or
 * off (and request_timeout_max_ms), stream_queue_bytes at its floor or default, input_hold_ms,
 * and a tool policy: none, denied_tools, tool_scopes, or allowed_tools with tool_scopes, where
 * alice's token grants the scope and bob's and mallory's do not), loaded with
 * config_load_string; then each event is an opcode byte and its argument bytes:
 *   client: a request (tools/call with or without a progress token and client capabilities,
 *     tools/list, resources/list, resources/read, prompts/get, server/discover,
 *     subscriptions/listen), a retry of an input round with the good, a stale or a forged
 *     requestState (or another principal), a read of its stream through a small buffer (the
 *     back-pressure drain runs), a drop (pool_stream_detach);
 *   child (one of the live fakes): an answer to one entry of its table (result, error, empty
 *     result, a start's discover or initialize answer, an unknown id), progress (small or past
 *     stream_queue_bytes), a log line, a question (elicitation, sampling, roots, ping, unknown;
 *     small or past stream_queue_bytes), the withdrawal of a question, a list change or resource
 *     update, the child's side of the gateway's own subscriptions/listen and server/discover (a
 *     stateless pool of pooled sessions: the acknowledgement, a list change or an update under
 *     the listen's id or an older one's, its end by a result, an error or a cancel, the
 *     discover's answer or refusal), its end (gone), a full stdin or a failing next write; while
 *     its stdout is paused it writes nothing;
 *   pooled sessions (header: b2 & 64 adds session_mode = pooled, with children of any era): an
 *     initialize by alice or bob (pool_session_initialize, answered from the pool's handshake
 *     once a child is ready, or from a stateless child's answer to its server/discover; such a
 *     child may answer a pooled session's tools/call with an input round of one or two
 *     questions), a request in one of them (tools/call with a progress token,
 *     tools/list, ping, logging/setLevel, resources/read, tasks/get, resources/subscribe and
 *     unsubscribe of u1 or u2; or its GET stream), as its
 *     principal or mallory (404), the client's cancel of one of its requests, an answer to a
 *     question it may have been asked, DELETE (header: b0 bits 4 and 5 give its dropped calls
 *     disconnect_grace_ms and its waiting POSTs sse_close_after_ms); its sealed id forged (a
 *     character changed), cut, sealed with another key, expired, or sealed for another principal
 *     or server (404, and no record made: the fuzzer holds the session key, as session_key_file
 *     would give it);
 *   pooled sessions' own events (opcodes 230 to 255 where session_mode = pooled; elsewhere, and
 *     before these events existed, they repeat the first ones): GET with Last-Event-ID for a
 *     stream it left (the last event read, past what was sent, or no id at all: only the first is
 *     ever taken, and it gets the stream it names); a task-augmented tools/call (params.task, a
 *     ttl or none; pool_session_task.c); tasks/get, tasks/result or tasks/cancel naming one of
 *     the session's own tasks, an id the gateway minted for another session (or for one gone), or
 *     a child's own task id; tasks/list; a 2025-03-26 session's batch as http_pooled.c takes it
 *     (requests, a task-augmented one among them, an id in flight or twice in the batch, cancels,
 *     initialized, answers; pool_session_batch); the fuzzer's own reload of the pooled sessions'
 *     limits (max_inflight_per_session 1, 2 or 3 and session_idle_timeout_s 10, or the defaults);
 *     and the child's side of tasks: an answer to a task operation (a CreateTaskResult under the
 *     child's own task id, "ct.N", fresh or one another child minted too, with a ttl or none and
 *     any status, or a plain result; tasks/get and tasks/cancel with the Task object; tasks/result
 *     with its related-task _meta; an error; a late CreateTaskResult for a task-augmented call
 *     the gateway cancelled), notifications/tasks/status under the child's id (of one of its
 *     tasks, of another child's, of none), and a child holding tasks that ends, or writes a log
 *     line or asks a question while a task is live;
 *   gateway: time passes (timers fire, pool_sweep every second as main.c's tick), SIGHUP
 *     (pool_set_config with a fresh configuration, maybe another era or tool policy; the old ones
 *     are freed as main.c does, once pool_uses_config is false), the next spawn fails,
 *     pool_drain, pool_close_all, the operator's actions on the server: restart (pool_restart, as
 *     POST /admin/servers/a/restart does), drain and resume (relay_set_drained, as .../drain and
 *     .../resume do).
 * Invariants, checked after every event once the loop has run its deferred calls:
 *   - every stream the client reads carries at most one final response, with its request's own
 *     id (no answer crosses to another client), progress only with its own token, and only valid
 *     JSON-RPC; a finished stream had exactly one final response;
 *   - a request whose stream is not ended is owned by a call the pool can reach (queued, in a
 *     child's table, a listener): nothing is orphaned;
 *   - no in-flight entry without an owner except the gateway's own (start, fence, subscribe);
 *     an owned entry's call points back at it and its child;
 *   - a live child's lines are read by its relay (relay_line), which calls the pool child's table
 *     of operations with the child as owner and has not ended (it ends with the child's
 *     retirement: nothing of a retired child's reaches the pool);
 *   - gauges equal table sizes: queue lengths, the held list and nheld, n_children, n_starting,
 *     pool_inflight() equal to the queued calls plus forwarded entries;
 *   - a child is paused only while a stream the client holds is over its ceiling;
 *   - a pool with queued requests has a child starting, a fenced child whose ping is out, or a
 *     full child whose answers free room (else they wait for ever);
 *   - a fenced child has its ping out: one with none (and none that can be sent: a child whose
 *     stdin is closed or stuck is retired by then) would take no request again;
 *   - the tool policy: a tools/call of a tool hidden from its principal is answered "Unknown
 *     tool" (-32602) by the gateway, and only such a call is; a tools/list answer names no tool
 *     hidden from its principal;
 *   - a drained server refuses every new request (503) and no retry of a call in flight (one
 *     whose requestState verifies: a forged or expired one is a new request, refused);
 *   - no client ever reads the ids of the gateway's own listen or discover at a child, and the
 *     child that holds either is one of its pool's (a listen only in a stateless pool);
 *   - a pooled session's streams carry only its own answers and progress (the checks above, its
 *     questions with ids the gateway minted), its calls point back at it and its count is its
 *     list's, a GET stream not ended belongs to a session still there, and only its principal
 *     reaches it; its sessions count toward max_sessions_per_principal (the tally below);
 *   - pooled sessions' tasks (check_pooled_tasks, check_task_ids): a task record is in exactly
 *     one session's list, and in the list of the live child that created it (or of none once that
 *     child ended) exactly once; the calls on it are its session's, go to that child, and are its
 *     references; its id is 128 random bits of the gateway's, never the child's; a session's
 *     count is its list's and, with its task-augmented calls waiting, within
 *     max_inflight_per_session, as are its calls (a reload that lowers the cap leaves more, a
 *     number that then never grows); every task id a session's stream carries (a created task, a
 *     Task object, a status notification, a related-task) is one the gateway minted for that
 *     session, never another's, never a child's; a tasks/ request naming a task that is not its
 *     session's is answered with the gateway's error; a child with a live task asks no session
 *     anything and its log lines reach none (counted unattributed); a session's end (DELETE,
 *     expiry) sends each of its live tasks' children a tasks/cancel of it (check_task_cancels),
 *     and so does a late CreateTaskResult of a running task for a call already cancelled;
 *   - a pooled session's batch: its one stream carries exactly one answer per request of the
 *     batch, under that request's id, and none else (one event each, as PROTOCOL.md says); a
 *     batch's stream not ended has a call of the batch open somewhere the pool looks;
 *   - per-principal counts (quota.h, by server name) equal what is in flight in every pool,
 *     retired or not: calls, held calls, listens and their URIs; a new request is admitted only
 *     under the limit the header's third byte set (principal_keys), whatever restarts and
 *     reloads came between;
 *   - the loop's deferred calls have all run (nothing is left queued after the turns);
 *   - a pool retired by a reload or a restart, once nothing of its is in flight (a listen never
 *     ends by itself: it does not count) and no child of it runs a pooled session's live task, is
 *     freed within RETIRED_FREE_MS of the fake clock, and a retired configuration a second after
 *     its pools (check_retired; the tick frees them as main.c's does);
 *   - at the end (pool_close_all, every stream read, time far ahead) every request was answered
 *     exactly once, nothing is left (no pooled session, hence no task record), and LeakSanitizer
 *     sees no leak.
 * Use-after-free (timers of freed entries, a drain callback on a freed call) are ASan's.
 *
 * RELAY_FUZZ_SKIP (environment, a comma list of the names of skip_names below) steers the search
 * away from a bug already known, so a run can look past it until it is fixed. RELAY_FUZZ_TRACE
 * prints each event.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "auth.h"
#include "config.h"
#include "fake_upstream.h"
#include "fuzz.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "keyring.h"
#include "pool.h"
#include "session_seal.h"
#include "quota.h"
#include "session.h"
#include "src/pool/pool_int.h"
#include "src/session/session_int.h"
#include "stream.h"
#include "util.h"

/* session_relay_fuzz.c builds this file with RELAY_SESSIONS 1: sessions instead of the pool. */
#ifndef RELAY_SESSIONS
#define RELAY_SESSIONS 0
#endif

#define REQ_MAX    48
#define CFG_MAX    8
#define EVENTS_MAX 160
#define BIG_BYTES  70000 /* past stream_queue_bytes at its floor (65536) */
#define START_US   ((uint64_t)1000000000 * 1000000)
#define BATCH_MAX  4   /* elements of the client's batches */
#define SEEN_MAX   128 /* child questions the client saw */

/* --- the fake clock ------------------------------------------------------------------------ */

static uint64_t relay_now_us = START_US;

/* util.c and log.c call this (the build renames clock_gettime): only the input moves time. */
int
clock_gettime(clockid_t clk, struct timespec *ts)
{
    uint64_t us = relay_now_us + (clk == CLOCK_REALTIME ? (uint64_t)1700000000 * 1000000 : 0);
    ts->tv_sec = (time_t)(us / 1000000);
    ts->tv_nsec = (long)(us % 1000000) * 1000;
    return 0;
}

/* --- the input ----------------------------------------------------------------------------- */

static const uint8_t *in;
static size_t in_len, in_pos;

static unsigned
next_byte(void)
{
    return in_pos < in_len ? in[in_pos++] : 0;
}

/* --- state of one run ---------------------------------------------------------------------- */

/* One client request as the HTTP layer holds it. */
struct req {
    struct stream *st; /* our reference until detached */
    bool detached;     /* pool_stream_detach called */
    bool refused;      /* pool_request returned NULL: the HTTP layer answered */
    bool listen;
    bool get;       /* session mode: the standalone GET stream (no answer ever comes on it) */
    bool cancelled; /* session mode: the client cancelled it (an answer may not come) */
    char sid[SESSION_SEAL_ID_MAX + 1]; /* session mode: the session it belongs to */
    uint64_t stream_id;              /* session mode: its stream's id */
    char last_eid[48];               /* session mode: the id of the last whole event read */
    unsigned nb;                     /* session mode, a batch: its requests' ids, in bids */
    char bids[BATCH_MAX][24];
    char btokens[BATCH_MAX][24];
    bool banswered[BATCH_MAX];
    bool pooled;      /* pool mode: a pooled session's (session_mode = pooled; sid names it) */
    bool hidden;      /* pool mode: a tools/call of a tool its principal may not see (policy) */
    unsigned variant; /* pool mode: the tool policy it was judged by (policy_hides) */
    bool task_call;    /* pool mode: a pooled session's task-augmented tools/call */
    bool task_foreign; /* pool mode: a tasks/ request naming no task of its session */
    char id[24];      /* raw JSON */
    char token[24];
    char method[32];
    char name[8];
    unsigned caps;
    const char *principal;
    char *acc; /* bytes read, not yet a whole event */
    size_t acc_len, acc_cap;
    unsigned finals;
    char state[256], prev_state[256]; /* requestState of its input rounds */
};

static struct loop *L;
static struct config *cfgs[CFG_MAX]; /* cfgs[ncfg - 1] is current */
static size_t ncfg;
static char ini[1536];
static struct req R[REQ_MAX];
static size_t nreq;
static unsigned id_seq, ask_seq;
static unsigned skip;      /* bit n: skip_names[n] steered away from */
static bool trace;         /* RELAY_FUZZ_TRACE: each event and the end's counters on stderr */
static bool closed;        /* pool_close_all ran */
static bool sessions_mode; /* the header chose the session layer instead of the pool */
static unsigned cfg_b0, cfg_b1, cfg_b2; /* the header's configuration bytes (a reload flips some) */
static struct auth *A;
static struct auth_principal *P, *Q; /* session mode: two clients, by address (mode none) */
static struct policy_grants G;
#define SESS_MAX       3
#define SESSION_EVENTS 25
#define POOLED_EVENTS  9 /* pool mode, session_mode = pooled: the events 23 to 31 */
#define SIGHUP_MAX     4
static char sids[SESS_MAX][CRYPTO_SESSION_ID_MAX]; /* sessions made, live or not */
/* Each one's client requests in flight at the last check: over the cap (a reload lowered it), the
 * count never grows. */
static size_t sids_active[SESS_MAX];
static size_t nsids;
static unsigned nsighup; /* session mode: reloads so far in this run */
static char *big;        /* BIG_BYTES of filler */
/* Pool mode, session_mode = pooled: the pooled sessions made (live or not), and whose. */
static struct {
    char sid[SESSION_SEAL_ID_MAX + 1];
    const char *principal;
    size_t last_tasks, last_calls; /* what the last check saw: over the cap, it never grows */
} psess[SESS_MAX];
static size_t npsess;
/* Pooled sessions' tasks: every id the gateway minted for one, with its session's id, as the
 * checks after each event found them (a record may be gone by the time the client reads it). */
#define GW_TASKS_MAX 256
static struct {
    char id[24];
    char sid[SESSION_SEAL_ID_MAX + 1];
} gw_tasks[GW_TASKS_MAX];
static size_t ngw_tasks;
static unsigned child_task_seq; /* the fake children's task ids: "ct.N" (never the gateway's) */
static unsigned pooled_caps;    /* pooled_reload's choice: max_inflight_per_session, idle expiry */

/* What RELAY_FUZZ_SKIP can steer away from, each a kind of bug this fuzzer has found. */
enum skip_what {
    SKIP_TIMEOUT,        /* request_timeout_ms stays off */
    SKIP_BIG,            /* input rounds and progress stay under stream_queue_bytes */
    SKIP_EMPTY_RESULT,   /* the child's results are never empty (an empty result {} was once
                          * stamped into invalid JSON) */
    SKIP_PAUSED,         /* no check that a pool child is never paused (a drain callback on a
                          * freed call then shows as ASan's use-after-free in pool_drained) */
    SKIP_QUEUE_STRANDED, /* no queue check for retired or draining pools */
    SKIP_QUEUE_DRAINING, /* the queue check only for retired pools, not draining ones (a draining
                          * pool could strand its queue the way a retired one did) */
    SKIP_QUEUE_LIVE,     /* no queue check for live pools (a listener's subscriptions filled a
                          * starting child's slots, and what was queued behind them stayed
                          * queued) */
    SKIP_N,
};
static const char *const skip_names[SKIP_N] = {
    [SKIP_TIMEOUT] = "timeout",
    [SKIP_BIG] = "big",
    [SKIP_EMPTY_RESULT] = "empty_result",
    [SKIP_PAUSED] = "paused",
    [SKIP_QUEUE_STRANDED] = "queue_stranded",
    [SKIP_QUEUE_DRAINING] = "queue_draining",
    [SKIP_QUEUE_LIVE] = "queue_live",
};

static bool
skipping(enum skip_what what)
{
    return (skip >> what) & 1u;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *s = getenv("RELAY_FUZZ_SKIP");
    while (s != NULL && *s != '\0') {
        size_t n = strcspn(s, ",");
        size_t i = 0;
        while (i < SKIP_N && (strlen(skip_names[i]) != n || strncmp(s, skip_names[i], n) != 0))
            i++;
        if (i == SKIP_N) {
            fprintf(stderr, "RELAY_FUZZ_SKIP: \"%.*s\" is none of:", (int)n, s);
            for (i = 0; i < SKIP_N; i++)
                fprintf(stderr, " %s", skip_names[i]);
            fprintf(stderr, "\n");
            exit(2);
        }
        skip |= 1u << i;
        s += n + (s[n] == ',');
    }
    trace = getenv("RELAY_FUZZ_TRACE") != NULL;
    log_init(trace ? LOG_DEBUG : LOG_ERROR, LOG_FORMAT_TEXT);
    big = malloc(BIG_BYTES + 1);
    memset(big, 'x', BIG_BYTES);
    big[BIG_BYTES] = '\0';
    return 0;
}

/* --- the loop, one turn at a time ---------------------------------------------------------- */

static void
stop_cb(void *arg)
{
    (void)arg;
    loop_stop(L);
}

/* The end of every loop turn, as main.c's after hook: closed sessions are freed. */
static void
after_turn(void *arg)
{
    (void)arg;
    if (sessions_mode)
        session_reap();
}

/* One loop turn: the timers due by now, the deferred calls queued so far. */
static void
turn(void)
{
    loop_timer_add(L, 0, stop_cb, NULL);
    loop_run(L);
}

/* Three turns let deferred calls queue and run their own (a report, then a child's free). */
static void
settle(void)
{
    for (int i = 0; i < 3; i++)
        turn();
}

static void retired_tick(void);

/*
 * Time passes by ms, a second at most per turn: timers fire as they fall due (in due order
 * within a turn), pool_sweep once a second (main.c's tick).
 */
static void
advance(uint64_t ms)
{
    while (ms > 0) {
        uint64_t step = ms < 1000 ? ms : 1000;
        uint64_t before = relay_now_us / 1000000;
        relay_now_us += step * 1000;
        ms -= step;
        turn();
        if (relay_now_us / 1000000 != before) {
            if (sessions_mode)
                session_sweep(util_now_ms());
            else
                retired_tick();
        }
    }
    settle();
}

/* --- configuration ------------------------------------------------------------------------- */

/*
 * The per-principal limits the header's b2 (bits 4-5, and for sessions 6-7) chooses: the
 * defaults, small ones that every run reaches, or none; [auth] max_sessions_per_principal.
 */
static void
principal_keys(unsigned b2, char *out, size_t size)
{
    static const char *const sets[] = {
        "",
        "max_inflight_per_principal = 1\nmax_held_per_principal = 1\n"
        "max_listens_per_principal = 1\nmax_listen_uris_per_principal = 1\n",
        "max_inflight_per_principal = 2\nmax_held_per_principal = 2\n"
        "max_listens_per_principal = 2\nmax_listen_uris_per_principal = 2\n",
        "max_inflight_per_principal = 0\nmax_held_per_principal = 0\n"
        "max_listens_per_principal = 0\nmax_listen_uris_per_principal = 0\n",
    };
    static const unsigned sessions_cap[] = { 0, 1, 2, 0 };
    int n = snprintf(out, size, "%s", sets[(b2 >> 4) & 3]);
    if (RELAY_SESSIONS && n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, "[auth]\nmax_sessions_per_principal = %u\n",
                 sessions_cap[(b2 >> 6) & 3]);
}

static void
make_ini(unsigned b0, unsigned b1, unsigned b2)
{
    /* Padded to one width, so that a reload can write another era in place (sighup). */
    static const char *const eras[] = { "legacy   ", "stateless", "auto     ", "legacy   " };
    static const unsigned holds[] = { 1000, 3000, 500, 20000 };
    static const unsigned timeouts[] = { 300, 2000, 700, 5000 };
    unsigned timeout = (b1 & 1) && !skipping(SKIP_TIMEOUT) ? timeouts[(b2 >> 2) & 3] : 0;
    /* Session mode: a grace period (which needs a replay buffer), replay alone, or neither. */
    char session_keys[256] = "", server_keys[64] = "", limits[320] = "";
    principal_keys(b2, limits, sizeof limits);
    /* Pool mode: the tool policy of [server:a] (policy_hides says what each one hides). */
    static const char *const policies[] = {
        "",
        "denied_tools = u\n",
        "tool_scopes = u:w\n",
        "allowed_tools = t\ntool_scopes = t:w\n",
    };
    /* Pool mode: legacy sessions served by the pool (of either era's children). */
    bool pooled = !RELAY_SESSIONS && (b2 & 64);
    if (!RELAY_SESSIONS)
        snprintf(server_keys, sizeof server_keys, "%s%s", policies[(b0 >> 2) & 3],
                 pooled ? "session_mode = pooled\n" : "");
    /* Pooled sessions' streams: a dropped call's grace, SSE polling (b0 bits 4 and 5). */
    if (pooled) {
        /* pooled_reload: a small max_inflight_per_session (the cap of a session's calls and
         * tasks) and a 10 s session_idle_timeout_s (expiry), or the defaults. */
        static const unsigned caps[] = { 0, 2, 3, 1 };
        char caps_keys[96] = "";
        if (pooled_caps != 0)
            snprintf(caps_keys, sizeof caps_keys,
                     "max_inflight_per_session = %u\nsession_idle_timeout_s = 10\n",
                     caps[pooled_caps & 3]);
        snprintf(session_keys, sizeof session_keys,
                 "disconnect_grace_ms = %u\nsse_close_after_ms = %u\nsse_retry_ms = 100\n%s",
                 (b0 & 16) ? 500 : 0, (b0 & 32) ? 700 : 0, caps_keys);
    }
    if (RELAY_SESSIONS) {
        snprintf(session_keys, sizeof session_keys,
                 "max_inflight_per_session = %u\nsession_idle_timeout_s = 10\n"
                 "replay_buffer_bytes = %u\ndisconnect_grace_ms = %u\nsse_close_after_ms = %u\n",
                 (b0 & 128) ? 2 : 4, (b0 & 24) ? 65536 : 0, (b0 & 8) ? 500 : 0,
                 (b0 & 32) && (b0 & 24) ? 700 : 0);
        /* b0 bit 2 (the pool's policy bit): children that sleep after 1 s of quiet. */
        snprintf(server_keys, sizeof server_keys,
                 "init_timeout_ms = %u\nchild_sleep_after_s = %u\n", (b0 & 64) ? 1500 : 30000,
                 (b0 & 4) ? 1 : 0);
    }
    snprintf(ini, sizeof ini,
             "[gateway]\nlisten = 127.0.0.1:0\nheartbeat_s = 1\n%s%s"
             "[server:a]\ncommand = /bin/false\nera = %s\npool_max_children = %u\n"
             "pool_child_max_inflight = %u\npool_warm_children = %u\npool_idle_timeout_s = 2\n"
             "pool_start_timeout_ms = 500\npool_max_restarts_per_min = %u\n"
             "request_timeout_ms = %u\nrequest_timeout_max_ms = %u\ninput_hold_ms = %u\n%s%s",
             session_keys, (b1 & 2) ? "stream_queue_bytes = 65536\n" : "", eras[b0 & 3],
             1 + ((b1 >> 2) & 3), (b1 & 16) ? 2 : 64, (b1 & 32) ? 1 : 0, (b1 & 128) ? 2 : 10,
             timeout, timeout != 0 && (b1 & 64) ? 4 * timeout : 0, holds[b2 & 3], server_keys,
             limits);
}

/*
 * The pooled sessions' key (load_config gives it to the gateway as session_key_file's would be), so
 * that this fuzzer can seal ids the gateway's key opens but must refuse (expired, another
 * principal's, another server's), besides ids it cannot open (another key's, forged, cut).
 */
#define FZ_SESSION_KEY "5f6c0a1d9e3b47c28a1f0e6d4b3c2a19087f6e5d4c3b2a1908f7e6d5c4b3a291"
#define FZ_OTHER_KEY   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct keyring *
fz_keyring(const char *hex)
{
    char err[256];
    struct keyring *kr =
        keyring_parse(hex, strlen(hex), "fuzz key", SESSION_SEAL_PURPOSE, err, sizeof err);
    if (kr == NULL)
        fuzz_fail(__FILE__, __LINE__, "fuzz key: %s", err);
    return kr;
}

static struct config *
load_config(void)
{
    struct config *c = xcalloc(1, sizeof(*c));
    char err[512] = "";
    if (config_load_string(ini, "relay.ini", c, err, sizeof err) != 0)
        fuzz_fail(__FILE__, __LINE__, "config: %s\n%s", err, ini);
    if (pool_load_key(c, err, sizeof err) != 0)
        fuzz_fail(__FILE__, __LINE__, "key: %s", err);
    pool_session_keys_set(c, fz_keyring(FZ_SESSION_KEY));
    return c;
}

static const struct config *
cur_cfg(void)
{
    return cfgs[ncfg - 1];
}

/* As main.c: a configuration no pool uses any more is freed. */
static void
free_retired(bool all)
{
    size_t k = 0;
    for (size_t i = 0; i < ncfg; i++) {
        bool current = i == ncfg - 1 && !all;
        if (current || pool_uses_config(cfgs[i]) || session_uses_config(cfgs[i])) {
            cfgs[k++] = cfgs[i];
            continue;
        }
        config_clear(cfgs[i]);
        free(cfgs[i]);
    }
    ncfg = k;
}

/*
 * Pool mode: whether the tool policy of variant v (make_ini's policies, (b0 >> 2) & 3) hides tool
 * name from principal. Only alice's token grants the scope w.
 */
static bool
policy_hides(unsigned v, const char *principal, const char *name)
{
    bool w = strcmp(principal, "alice") == 0, t = strcmp(name, "t") == 0;
    switch (v & 3) {
    case 1:
        return !t; /* denied_tools = u */
    case 2:
        return !t && !w; /* tool_scopes = u:w */
    case 3:
        return !t || !w; /* allowed_tools = t, tool_scopes = t:w */
    default:
        return false;
    }
}

/* The scopes principal's token grants, as the server's policy numbers them (as auth.c does). */
static struct policy_grants
grants_of(const char *principal)
{
    const struct policy *pol = cur_cfg()->servers[0].policy;
    static const char *const w[] = { "w" };
    return (struct policy_grants){
        .of = pol,
        .bits = strcmp(principal, "alice") == 0 ? policy_grants(pol, w, 1) : 0,
    };
}

static void
sighup(unsigned arg)
{
    free_retired(false);
    if (ncfg == CFG_MAX)
        return;
    if (arg & 8) {
        /* Another tool policy: requests from now on are judged by it. */
        cfg_b0 = (cfg_b0 & ~0x0cu) | ((arg >> 2) & 0x0cu);
        make_ini(cfg_b0, cfg_b1, cfg_b2);
    }
    if (arg & 1) {
        /* The same file with another era: a reload that changes the server. */
        char *e = strstr(ini, "era = ");
        if (e != NULL) {
            static const char *const eras[] = { "legacy   ", "stateless", "auto     " };
            const char *with = eras[(arg >> 1) % 3];
            if (strncmp(e + 6, "legacy   ", 9) == 0 || strncmp(e + 6, "stateless", 9) == 0
                || strncmp(e + 6, "auto     ", 9) == 0)
                memcpy(e + 6, with, 9);
        }
    }
    struct config *c = load_config();
    cfgs[ncfg++] = c;
    pool_set_config(c);
}

/* --- the client ---------------------------------------------------------------------------- */

/* A request's stream is done with: as http.c's completed callback, once. */
static void
detach(struct req *r)
{
    if (r->st == NULL || r->detached)
        return;
    r->detached = true;
    if (sessions_mode)
        session_stream_detach(r->sid, r->st);
    else if (r->pooled)
        pool_session_detach(r->sid, r->st);
    else
        pool_stream_detach(r->st);
    r->st = NULL;
}

/* The text of the "requestState" member in s (NUL-terminated), or "" */
static void
take_state(const char *s, char *out, size_t max)
{
    const char *p = strstr(s, "\"requestState\":\"");
    out[0] = '\0';
    if (p == NULL)
        return;
    p += strlen("\"requestState\":\"");
    const char *e = strchr(p, '"');
    if (e == NULL || (size_t)(e - p) >= max)
        return;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
}

/*
 * Whether the gateway takes state, sent in a retry of of, for a held call's retry: one it sealed
 * (of's own, this round's or the one before, not a forged copy: the gateway's base64url takes no
 * other spelling of the same bytes) that has not expired. PROTOCOL.md's drain lets only such a
 * retry through; any other requestState (forged, expired, a stateless child's own) makes a new
 * request, which the drain refuses.
 */
static bool
state_verifies(const struct req *of, const char *state)
{
    static const char prefix[] = "mcpgw1.";
    if (strcmp(state, of->state) != 0 && strcmp(state, of->prev_state) != 0)
        return false;
    const char *dot = strrchr(state, '.');
    size_t plen = sizeof prefix - 1;
    if (strncmp(state, prefix, plen) != 0 || dot == NULL || (size_t)(dot - state) <= plen)
        return false;
    unsigned char raw[64];
    long n = util_base64url_decode(state + plen, (size_t)(dot - state) - plen, raw, sizeof raw);
    /* id 16, expiry 8 (ms): expired once the clock is past it */
    return n >= 24 && util_get_be(raw + 16, 8) >= util_now_ms();
}

static bool
span_is(const char *s, struct jsonrpc_span sp, const char *want)
{
    return sp.len == strlen(want) && memcmp(s + sp.off, want, sp.len) == 0;
}

/* An answer on a batch's stream: to one of its requests not yet answered (ids may repeat). */
static void
batch_answer(struct req *r, const char *data, struct jsonrpc_span id)
{
    for (unsigned i = 0; i < r->nb; i++)
        if (!r->banswered[i] && span_is(data, id, r->bids[i])) {
            r->banswered[i] = true;
            r->finals++;
            return;
        }
    fuzz_fail(__FILE__, __LINE__, "batch %s got an answer to none of its open requests: %.200s",
              r->id, data);
}

/* The child's questions the client has read (session, minted id): those it can still answer. */
static struct {
    char sid[SESSION_SEAL_ID_MAX + 1];
    uint64_t id;
} seen[SEEN_MAX];
static size_t nseen;

static void
question_seen(const struct req *r, const char *data, struct jsonrpc_span id)
{
    uint64_t n;
    FUZZ_CHECK(jsonrpc_id_u64(data, id, &n),
               "a question with an id the gateway did not mint: %.200s", data);
    if (nseen < SEEN_MAX) {
        snprintf(seen[nseen].sid, sizeof seen[0].sid, "%s", r->sid);
        seen[nseen++].id = n;
    }
}

static bool
was_seen(const char *sid, uint64_t id)
{
    for (size_t i = 0; i < nseen; i++)
        if (seen[i].id == id && strcmp(seen[i].sid, sid) == 0)
            return true;
    return nseen == SEEN_MAX; /* full: no longer known */
}

/* Whether the client still reads (holds) stream id of session sid. */
static bool
client_holds(const char *sid, uint64_t id)
{
    for (size_t i = 0; i < nreq; i++)
        if (R[i].st != NULL && R[i].stream_id == id && strcmp(R[i].sid, sid) == 0)
            return true;
    return false;
}

/*
 * A pooled session's stream: every task id in it (a CreateTaskResult, a Task object, a status
 * notification, a tasks/result's related-task) is one the gateway minted for this session; never
 * a child's own ("ct.N"), never another session's.
 */
static void
check_task_ids(const struct req *r, const char *data)
{
    static const char key[] = "\"taskId\":\"";
    for (const char *p = strstr(data, key); p != NULL; p = strstr(p, key)) {
        p += sizeof key - 1;
        size_t n = strcspn(p, "\"");
        FUZZ_CHECK(memchr(p, '.', n) == NULL, "session %.12s...: a child's own task id: %.300s",
                   r->sid, data);
        bool own = false, other = false;
        for (size_t i = 0; i < ngw_tasks; i++)
            if (strlen(gw_tasks[i].id) == n && memcmp(gw_tasks[i].id, p, n) == 0) {
                own |= strcmp(gw_tasks[i].sid, r->sid) == 0;
                other |= strcmp(gw_tasks[i].sid, r->sid) != 0;
            }
        FUZZ_CHECK(!other, "session %.12s...: another session's task: %.300s", r->sid, data);
        FUZZ_CHECK(own || ngw_tasks == GW_TASKS_MAX,
                   "session %.12s...: a task id the gateway never made for it: %.300s", r->sid,
                   data);
    }
}

/* One "message" event's data as the client sees it. */
static void
check_message(struct req *r, char *data, size_t len)
{
    struct jsonrpc_info info;
    const char *err = NULL;
    FUZZ_CHECK(jsonrpc_scan(data, len, &info, &err) == JSONRPC_OK,
               "request %s got a line that is not JSON-RPC (%s): %.200s", r->id, err, data);
    if (trace)
        fprintf(stderr, "relay: request %s%s reads %.300s\n", r->id, r->nb > 0 ? "(batch)" : "",
                data);
    if (r->pooled)
        check_task_ids(r, data);
    /* The gateway's own listen and discover at a child are never a client's to see. */
    FUZZ_CHECK(memmem(data, len, "mcpgw-listen-", 13) == NULL
                   && memmem(data, len, "mcpgw-discover-", 15) == NULL,
               "request %s read the gateway's own listen or discover: %.200s", r->id, data);
    switch (info.kind) {
    case JSONRPC_RESULT:
    case JSONRPC_ERROR:
        if (r->nb > 0) {
            batch_answer(r, data, info.id);
            return;
        }
        FUZZ_CHECK(span_is(data, info.id, r->id),
                   "request %s got the answer of another request: %.200s", r->id, data);
        /* A task-augmented call past the session's cap is refused before its tool is judged. */
        if (!sessions_mode && strcmp(r->method, "tools/call") == 0
            && !(r->task_call && info.kind == JSONRPC_ERROR
                 && strstr(data, "too many tasks in this session") != NULL))
            FUZZ_CHECK(
                r->hidden == (info.kind == JSONRPC_ERROR && strstr(data, "Unknown tool") != NULL),
                "request %s (%s's call of %s, policy %u): %s", r->id, r->principal, r->name,
                r->variant, r->hidden ? "a hidden tool reached the child" : "refused as unknown");
        /* A task the session does not hold: the gateway's error, nothing of a child's. */
        if (r->task_foreign)
            FUZZ_CHECK(info.kind == JSONRPC_ERROR
                           && (strstr(data, "unknown task") != NULL
                               || strstr(data, "Method not found") != NULL),
                       "request %s: %s of a task not its session's answered: %.200s", r->id,
                       r->method, data);
        if (!sessions_mode && strcmp(r->method, "tools/list") == 0 && info.kind == JSONRPC_RESULT)
            for (unsigned k = 0; k < 2; k++) {
                const char *tool = k == 0 ? "t" : "u";
                char needle[16];
                snprintf(needle, sizeof needle, "\"name\":\"%s\"", tool);
                FUZZ_CHECK(!policy_hides(r->variant, r->principal, tool)
                               || strstr(data, needle) == NULL,
                           "request %s: %s's tools/list shows %s (policy %u): %.200s", r->id,
                           r->principal, tool, r->variant, data);
            }
        r->finals++;
        FUZZ_CHECK(r->finals == 1, "request %s got %u final answers: %.200s", r->id, r->finals,
                   data);
        if (info.kind == JSONRPC_RESULT && strstr(data, "\"input_required\"") != NULL) {
            memcpy(r->prev_state, r->state, sizeof r->state);
            take_state(data, r->state, sizeof r->state);
        }
        return;
    case JSONRPC_REQUEST:
        /* A pooled session's question: an id the gateway minted, on one of its own streams. */
        if (r->pooled) {
            FUZZ_CHECK(info.id.len > 11 && memcmp(data + info.id.off, "\"mcpgw-ask-", 11) == 0,
                       "request %s: a question with an id the gateway did not mint: %.200s",
                       r->id, data);
            return;
        }
        /* A session's child may ask its client (it goes on a stream); a pool's never does. */
        FUZZ_CHECK(sessions_mode, "request %s got a request: %.200s", r->id, data);
        question_seen(r, data, info.id);
        return;
    case JSONRPC_NOTIFICATION:
        break;
    }
    bool own = r->token[0] != '\0' && span_is(data, info.progress_token, r->token);
    for (unsigned i = 0; i < r->nb; i++)
        own |= r->btokens[i][0] != '\0' && span_is(data, info.progress_token, r->btokens[i]);
    if (strcmp(info.method, "notifications/progress") == 0)
        FUZZ_CHECK(own, "request %s (token %s) got another's progress: %.200s", r->id, r->token,
                   data);
    if (info.meta_subscription.len != 0)
        FUZZ_CHECK(span_is(data, info.meta_subscription, r->id),
                   "request %s got another subscription's notification: %.200s", r->id, data);
}

/* The whole events in r->acc: a message event's data is checked; priming and comments pass. */
static void
parse_events(struct req *r)
{
    size_t at = 0;
    for (;;) {
        char *start = r->acc + at;
        size_t left = r->acc_len - at;
        char *end = memmem(start, left, "\n\n", 2);
        if (end == NULL)
            break;
        *end = '\0';
        char *data = NULL, *eid = NULL;
        bool message = true;
        for (char *l = start; l != NULL && l < end;) {
            char *nl = strchr(l, '\n');
            if (nl != NULL)
                *nl = '\0';
            if (strncmp(l, "data: ", 6) == 0) {
                FUZZ_CHECK(data == NULL, "an event of two data lines: %.200s", start);
                data = l + 6;
            } else if (strncmp(l, "event: ", 7) == 0) {
                message = strcmp(l + 7, "message") == 0;
            } else if (strncmp(l, "id: ", 4) == 0) {
                eid = l + 4;
            } else {
                FUZZ_CHECK(l[0] == ':' || strncmp(l, "retry: ", 7) == 0,
                           "request %s: an unknown event line: %.200s", r->id, l);
            }
            l = nl != NULL ? nl + 1 : NULL;
        }
        if (message && data != NULL && data[0] != '\0')
            check_message(r, data, strlen(data));
        if (eid != NULL)
            snprintf(r->last_eid, sizeof r->last_eid, "%s", eid);
        at = (size_t)(end - r->acc) + 2;
    }
    memmove(r->acc, r->acc + at, r->acc_len - at);
    r->acc_len -= at;
}

/* The client reads st through buffers of max bytes, at most rounds times (0: until empty). */
static void
client_read(struct req *r, size_t max, unsigned rounds)
{
    char buf[4096];
    if (r->st == NULL)
        return;
    if (max > sizeof buf)
        max = sizeof buf;
    for (unsigned i = 0; rounds == 0 || i < rounds; i++) {
        size_t n = stream_read(r->st, buf, max);
        if (n == 0)
            break;
        if (r->acc_len + n + 1 > r->acc_cap) {
            r->acc_cap = (r->acc_len + n + 1) * 2;
            r->acc = xrealloc(r->acc, r->acc_cap);
        }
        memcpy(r->acc + r->acc_len, buf, n);
        r->acc_len += n;
        r->acc[r->acc_len] = '\0';
        parse_events(r);
    }
    if (stream_finished(r->st)) {
        unsigned want = r->get ? 0u : r->nb > 0 ? r->nb : 1u;
        FUZZ_CHECK(r->finals == want || (r->cancelled && r->finals < want),
                   "request %s: its stream ended with %u of %u final answers", r->id, r->finals,
                   want);
        detach(r); /* the HTTP response is complete */
    }
}

static const char *const methods[] = {
    "tools/call",  "tools/call",     "tools/list",      "resources/list",
    "prompts/get", "resources/read", "server/discover", "subscriptions/listen",
};

/*
 * A new request of a principal that had before of kind in flight on server a: admitted only under
 * the current configuration's limit, refused for it only at it, whatever restarts and reloads
 * came between (the limit is the server's, not a pool's or a configuration's).
 */
static void
check_admitted(bool admitted, bool refused, enum quota_kind kind, uint64_t before, bool counted)
{
    const struct config_server *srv = &cur_cfg()->servers[0];
    uint64_t max =
        kind == QUOTA_LISTENS ? srv->max_listens_per_principal : srv->max_inflight_per_principal;
    if (admitted && counted)
        FUZZ_CHECK(max == 0 || before < max,
                   "admitted with %" PRIu64 " of kind %d in flight, the limit %" PRIu64, before,
                   (int)kind, max);
    if (refused)
        FUZZ_CHECK(max != 0 && before >= max,
                   "refused for its principal with %" PRIu64
                   " of kind %d in flight, the limit %" PRIu64,
                   before, (int)kind, max);
}

/* A new request (or, with of != NULL, a retry of of's round with state). */
static void
client_request(unsigned a, unsigned b, const struct req *of, const char *state)
{
    if (nreq == REQ_MAX)
        return;
    struct req *r = &R[nreq];
    memset(r, 0, sizeof(*r));
    unsigned n = ++id_seq;
    if (n & 1)
        snprintf(r->id, sizeof r->id, "\"c%u\"", n);
    else
        snprintf(r->id, sizeof r->id, "%u", 1000 + n);
    const char *method = of != NULL ? of->method : methods[a & 7];
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->name, sizeof r->name, "%s", of != NULL ? of->name : (b & 64) ? "u" : "t");
    r->caps = of != NULL && !(b & 8) ? of->caps : (a >> 3) & 7;
    r->principal =
        of != NULL ? ((b & 16) ? "mallory" : of->principal) : ((b & 32) ? "bob" : "alice");
    r->listen = strcmp(method, "subscriptions/listen") == 0;
    bool progress = (a & 7) == 1 || (of != NULL && (b & 4));
    if (progress)
        snprintf(r->token, sizeof r->token, "\"p%u\"", n);
    static const char *const levels[] = { NULL, "\"debug\"", "\"warning\"", "\"bogus\"" };
    const char *level = levels[(a >> 6) & 3];

    char body[2048];
    size_t len = (size_t)snprintf(body, sizeof body,
                                  "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{",
                                  r->id, method);
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        len += (size_t)snprintf(body + len, sizeof body - len, "\"name\":\"%s\",", r->name);
    else if (strcmp(method, "resources/read") == 0)
        len += (size_t)snprintf(body + len, sizeof body - len, "\"uri\":\"%s\",", r->name);
    else if (r->listen)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "\"notifications\":{\"toolsListChanged\":true,"
                                "\"resourceSubscriptions\":[%s]},",
                                (b & 128) ? "\"u1\",\"u2\""
                                : (b & 2) ? "\"u2\""
                                          : "\"u1\"");
    if (of != NULL) {
        /* inputResponses: r1..r3 answered, some, or none (b's low bits). */
        len += (size_t)snprintf(body + len, sizeof body - len, "\"inputResponses\":{");
        for (unsigned k = 1; k <= 3; k++)
            if ((b & 3) == 0 || ((b & 3) == 1 && k == 1) || (b & 3) == 2)
                len += (size_t)snprintf(
                    body + len, sizeof body - len, "%s\"r%u\":{\"action\":\"accept\"}",
                    body[len - 1] == '{' ? "" : ",", k + ((b & 3) == 2 ? 1 : 0));
        len += (size_t)snprintf(body + len, sizeof body - len, "},\"requestState\":\"%s\",", state);
    }
    len += (size_t)snprintf(
        body + len, sizeof body - len,
        "\"_meta\":{\"io.modelcontextprotocol/clientCapabilities\":{%s%s%s}",
        (r->caps & 1) ? "\"elicitation\":{}" : "",
        (r->caps & 2) ? ((r->caps & 1) ? ",\"sampling\":{}" : "\"sampling\":{}") : "",
        (r->caps & 4) ? ((r->caps & 3) ? ",\"roots\":{}" : "\"roots\":{}") : "");
    if (progress)
        len += (size_t)snprintf(body + len, sizeof body - len, ",\"progressToken\":%s", r->token);
    if (level != NULL)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                ",\"io.modelcontextprotocol/logLevel\":%s", level);
    len += (size_t)snprintf(body + len, sizeof body - len, "}}}");
    FUZZ_CHECK(len < sizeof body, "body too long");

    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    struct pool_meta meta = { .rev = revision_newest(REVISION_STATELESS),
                              .log_level = -1,
                              .principal = r->principal };
    meta.grants = grants_of(r->principal);
    if (info.meta_log_level.len != 0
        && (meta.log_level = pool_log_level(body, info.meta_log_level)) < 0) {
        r->refused = true; /* http_stateless.c's 400 */
        nreq++;
        return;
    }
    r->variant = (cfg_b0 >> 2) & 3;
    bool drained = relay_drained(relay_stats_of("a"));
    enum pool_status status = POOL_OK;
    enum quota_kind kind = r->listen ? QUOTA_LISTENS : QUOTA_CALLS;
    uint64_t before = quota_of("a", r->principal, kind);
    r->st = pool_request(&cur_cfg()->servers[0], body, len, &info, &meta, &status);
    /* A call of a tool hidden from its principal is answered by the gateway: it counts nothing. */
    bool hidden =
        strcmp(method, "tools/call") == 0 && policy_hides(r->variant, r->principal, r->name);
    if (of == NULL && status != POOL_E_PRINCIPAL)
        check_admitted(r->st != NULL && status == POOL_OK, false, kind, before, !hidden);
    if (r->st == NULL) {
        FUZZ_CHECK(status != POOL_OK, "pool_request: no stream and no error status");
        r->refused = true;
    } else {
        FUZZ_CHECK(status == POOL_OK, "pool_request: a stream and status %d", (int)status);
    }
    /*
     * The operator's drain refuses new requests, never the retry of a call in flight: a retry
     * whose requestState verifies. One that does not (forged, expired, a stateless child's own)
     * is a new request to the drain (deploy/README.md, .../drain).
     */
    bool retry = of != NULL && state_verifies(of, state);
    if (drained && !retry)
        FUZZ_CHECK(r->st == NULL
                       && (status == POOL_E_DRAINED || status == POOL_E_DRAINING
                           || status == POOL_E_ID_TOO_LONG),
                   "%s %s to a drained server: %s", of != NULL ? "unverified retry" : "request",
                   r->id, r->st != NULL ? "taken" : relay_status_text(status));
    if (retry)
        FUZZ_CHECK(status != POOL_E_DRAINED, "retry %s refused for the drain", r->id);
    r->hidden = r->st != NULL && hidden;
    nreq++;
}

static void
client_retry(unsigned a, unsigned b)
{
    size_t with_state = 0;
    for (size_t i = 0; i < nreq; i++)
        with_state += R[i].state[0] != '\0';
    if (with_state == 0) {
        client_request(a, b, NULL, NULL);
        return;
    }
    size_t k = a % with_state;
    const struct req *of = NULL;
    for (size_t i = 0; i < nreq && of == NULL; i++)
        if (R[i].state[0] != '\0' && k-- == 0)
            of = &R[i];
    char state[256];
    switch ((a >> 4) & 3) {
    case 1: /* stale: the round before, when there was one */
        snprintf(state, sizeof state, "%s", of->prev_state[0] ? of->prev_state : of->state);
        break;
    case 2: { /* forged: one character changed */
        snprintf(state, sizeof state, "%s", of->state);
        size_t n = strlen(state);
        size_t at = 7 + (b * 7) % (n > 8 ? n - 7 : 1);
        if (at < n)
            state[at] = state[at] == 'A' ? 'B' : 'A';
        break;
    }
    default:
        snprintf(state, sizeof state, "%s", of->state);
    }
    struct req copy = *of; /* R may not move, but of is only read before nreq++ */
    client_request(a, b, &copy, state);
}

/* --- pooled sessions (session_mode = pooled) ------------------------------------------------ */

static void mark_cancelled(const char *sid, const char *id);

/* A pooled session's initialize, by alice or bob. */
static void
pooled_init(unsigned a)
{
    if (nreq == REQ_MAX || npsess == SESS_MAX)
        return;
    struct req *r = &R[nreq];
    memset(r, 0, sizeof(*r));
    snprintf(r->id, sizeof r->id, "%u", ++id_seq);
    snprintf(r->method, sizeof r->method, "initialize");
    r->principal = (a & 1) ? "bob" : "alice";
    r->pooled = true;
    static const char *const asked[] = { "2025-06-18", "2025-03-26", "2025-11-25", "2099-01-01" };
    char body[512];
    size_t len = (size_t)snprintf(
        body, sizeof body,
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"initialize\",\"params\":{"
        "\"protocolVersion\":\"%s\",\"capabilities\":{%s},\"clientInfo\":{\"name\":\"f\","
        "\"version\":\"1\"}}}",
        r->id, asked[(a >> 1) & 3], (a & 8) ? "\"sampling\":{},\"roots\":{}" : "");
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    struct pool_meta meta = { .log_level = -1, .principal = r->principal };
    meta.grants = grants_of(r->principal);
    enum pool_status status = POOL_OK;
    struct pool_session *s = NULL;
    r->st = pool_session_initialize(&cur_cfg()->servers[0], body, len, &info, &meta, &s, &status);
    if (r->st == NULL) {
        FUZZ_CHECK(status != POOL_OK, "pool_session_initialize: no stream and no error status");
        r->refused = true;
    } else {
        snprintf(r->sid, sizeof r->sid, "%s", pool_session_id(s));
        FUZZ_CHECK(pool_session_named(r->sid), "a pooled session's id %s is not of the pooled "
                   "form", r->sid);
        snprintf(psess[npsess].sid, sizeof psess[0].sid, "%s", r->sid);
        psess[npsess++].principal = r->principal;
    }
    nreq++;
}

/* A request in one of the pooled sessions (as its principal, or another: 404). */
static void
pooled_request(unsigned a, unsigned b)
{
    if (nreq == REQ_MAX || npsess == 0)
        return;
    struct req *r = &R[nreq];
    memset(r, 0, sizeof(*r));
    size_t k = a % npsess;
    const char *principal = (b & 128) ? "mallory" : psess[k].principal;
    enum pool_status fst;
    const char *fwhy = NULL;
    struct pool_session *s =
        pool_session_find(psess[k].sid, &cur_cfg()->servers[0], principal, true, &fst, &fwhy);
    if (s == NULL)
        return; /* 404 */
    FUZZ_CHECK(strcmp(principal, psess[k].principal) == 0, "%s reached %s's pooled session",
               principal, psess[k].principal);
    snprintf(r->sid, sizeof r->sid, "%s", psess[k].sid);
    r->principal = principal;
    r->pooled = true;
    if ((b & 7) == 7) {
        enum pool_status status = POOL_OK;
        r->st = pool_session_get(s, &status);
        r->stream_id = r->st != NULL ? stream_id(r->st) : 0;
        r->get = true;
        r->refused = r->st == NULL;
        nreq++;
        return;
    }
    /* Ids repeat across sessions (c1, 1001, ...), never within one's calls in flight. */
    unsigned n = ++id_seq;
    snprintf(r->id, sizeof r->id, (n & 1) ? "\"c%u\"" : "%u", n & 1 ? n : 1000 + n);
    static const char *const m[] = { "tools/call",       "tools/call",          "tools/list",
                                     "ping",             "logging/setLevel",    "resources/read",
                                     "tasks/get",        "resources/subscribe", "resources/unsubscribe" };
    const char *method = m[(b >> 3) % 9];
    snprintf(r->method, sizeof r->method, "%s", method);
    /* A subscription names u1 or u2, the URIs the children's updates name (child_notify). */
    if (strncmp(method, "resources/", 10) == 0 && method[10] != 'r')
        snprintf(r->name, sizeof r->name, "u%u", 1 + ((b >> 6) & 1));
    else
        snprintf(r->name, sizeof r->name, "%s", (b & 64) ? "u" : "t");
    snprintf(r->token, sizeof r->token, "\"p%u\"", n);
    char body[512];
    size_t len = (size_t)snprintf(
        body, sizeof body,
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{\"name\":\"%s\","
        "\"uri\":\"%s\",\"level\":\"%s\",\"_meta\":{\"progressToken\":%s}}}",
        r->id, method, r->name, r->name, (b & 1) ? "debug" : "error", r->token);
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    struct pool_meta meta = { .log_level = -1, .principal = principal };
    meta.grants = grants_of(principal);
    r->variant = (cfg_b0 >> 2) & 3;
    enum pool_status status = POOL_OK;
    r->st = pool_session_request(s, &cur_cfg()->servers[0], body, len, &info, &meta, &status);
    r->stream_id = r->st != NULL ? stream_id(r->st) : 0;
    bool hidden = strcmp(method, "tools/call") == 0 && policy_hides(r->variant, principal, r->name);
    r->refused = r->st == NULL;
    r->hidden = r->st != NULL && hidden;
    nreq++;
}

/*
 * A request naming a pooled session's id forged (a character changed), cut, sealed with another
 * key, expired, or sealed for another principal or another server: the same 404 as an unknown id,
 * and no record made for it.
 */
static void
pooled_forged(unsigned a, unsigned b)
{
    if (npsess == 0)
        return;
    size_t k = a % npsess;
    const char *principal = psess[k].principal;
    const struct config_server *srv = &cur_cfg()->servers[0];
    char id[SESSION_SEAL_ID_MAX + 1];
    snprintf(id, sizeof id, "%s", psess[k].sid);
    size_t n = strlen(id);
    size_t at = 2 + (a >> 4) % (n - 2);
    int64_t now_s = (int64_t)(util_now_unix_ms() / 1000u);
    const char *rec_principal = principal, *rec_server = srv->name;
    int64_t issued = now_s;
    const char *key = FZ_SESSION_KEY;
    unsigned how = b % 6;
    switch (how) {
    case 0:
        id[at] = id[at] == 'A' ? 'B' : 'A';
        break;
    case 1:
        id[at] = '\0';
        break;
    case 2:
        key = FZ_OTHER_KEY;
        break;
    case 3:
        issued = now_s - (int64_t)cur_cfg()->session_max_age_s - 1 - (int64_t)((a >> 8) % 1000);
        break;
    case 4:
        rec_principal = strcmp(principal, "mallory") == 0 ? "alice" : "mallory";
        break;
    default:
        rec_server = "not-a";
        break;
    }
    if (how >= 2) {
        struct session_seal_record rec;
        struct keyring *kr = fz_keyring(key);
        int ok = session_seal_record_init(&rec, rec_principal, rec_server, "2025-06-18", "{}", 2,
                                          0, issued > 0 ? issued : 0);
        if (ok == 0)
            ok = session_seal(kr, &rec, id);
        keyring_free(kr);
        FUZZ_CHECK(ok == 0, "cannot seal a test id");
    }
    size_t before = pool_session_count();
    enum pool_status st = POOL_OK;
    const char *why = NULL;
    struct pool_session *s = pool_session_find(id, srv, principal, true, &st, &why);
    FUZZ_CHECK(s == NULL && st == POOL_E_GONE, "a pooled session id (case %u) was not refused 404",
               how);
    FUZZ_CHECK(pool_session_count() == before, "a refused id made a record (case %u)", how);
    if ((a & 15) != 15)
        return;
    /* A key change that drops the sealing key: no session's id opens, whatever record is held
     * (a record's shortcut past the AEAD holds only under the keys it opened with); then back. */
    pool_session_keys_set(cur_cfg(), fz_keyring(FZ_OTHER_KEY));
    for (size_t i = 0; i < npsess; i++) {
        st = POOL_OK;
        FUZZ_CHECK(pool_session_find(psess[i].sid, srv, psess[i].principal, true, &st, &why)
                           == NULL
                       && st == POOL_E_GONE,
                   "a session's id opened after its key was dropped");
    }
    FUZZ_CHECK(pool_session_count() == before, "a dropped key's id made a record");
    pool_session_keys_set(cur_cfg(), fz_keyring(FZ_SESSION_KEY));
}

/* The client's own message in a pooled session: a cancel, an answer to a question, DELETE. */
static void
pooled_other(unsigned a, unsigned b)
{
    if (npsess == 0)
        return;
    size_t k = a % npsess;
    enum pool_status fst;
    const char *fwhy = NULL;
    struct pool_session *s = pool_session_find(psess[k].sid, &cur_cfg()->servers[0],
                                               psess[k].principal, true, &fst, &fwhy);
    if (s == NULL)
        return;
    if ((b & 3) == 3) {
        pool_session_delete(s);
        return;
    }
    char body[256];
    size_t len;
    if ((b & 3) == 2) {
        len = (size_t)snprintf(body, sizeof body,
                               "{\"jsonrpc\":\"2.0\",\"id\":\"mcpgw-ask-%u\",\"result\":{}}",
                               1 + ((b >> 2) & 7));
    } else {
        /* Its cancel of one of its requests (or of an id it never sent). */
        struct req *of = NULL;
        size_t n = (b >> 2) & 15;
        for (size_t i = 0; i < nreq && of == NULL; i++)
            if (R[i].pooled && !R[i].get && R[i].id[0] != '\0' && strcmp(R[i].sid, psess[k].sid) == 0
                && strcmp(R[i].method, "initialize") != 0 && n-- == 0)
                of = &R[i];
        len = (size_t)snprintf(body, sizeof body,
                               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                               "\"params\":{\"requestId\":%s}}",
                               of != NULL ? of->id : "\"none\"");
        if (of != NULL) /* its stream may end with no answer, and so may a batch's of its id */
            mark_cancelled(psess[k].sid, of->id);
    }
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    FUZZ_CHECK(pool_session_other(s, body, len, &info) == POOL_OK, "a pooled session's %s refused",
               body);
}

/* --- pooled sessions' tasks (2025-11-25) and batches (2025-03-26) --------------------------- */

/* Pooled session k, found as principal would reach it (NULL: 404). */
static struct pool_session *
pooled_find(size_t k, const char *principal)
{
    enum pool_status fst;
    const char *fwhy = NULL;
    return pool_session_find(psess[k].sid, &cur_cfg()->servers[0], principal, true, &fst, &fwhy);
}

/* A new tracked request of pooled session k: its id and fields; the caller writes its body. */
static struct req *
pooled_req(size_t k, const char *method, const char *name, bool token)
{
    struct req *r = &R[nreq];
    memset(r, 0, sizeof(*r));
    snprintf(r->sid, sizeof r->sid, "%s", psess[k].sid);
    r->principal = psess[k].principal;
    r->pooled = true;
    unsigned n = ++id_seq;
    snprintf(r->id, sizeof r->id, (n & 1) ? "\"c%u\"" : "%u", n & 1 ? n : 1000 + n);
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->name, sizeof r->name, "%s", name);
    if (token)
        snprintf(r->token, sizeof r->token, "\"p%u\"", n);
    r->variant = (cfg_b0 >> 2) & 3;
    return r;
}

/* body, r's request in session s, as http_pooled.c's http_pooled_post sends it. */
static void
pooled_post(struct req *r, struct pool_session *s, char *body, size_t len)
{
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    struct pool_meta meta = { .log_level = -1, .principal = r->principal };
    meta.grants = grants_of(r->principal);
    enum pool_status status = POOL_OK;
    r->st = pool_session_request(s, &cur_cfg()->servers[0], body, len, &info, &meta, &status);
    r->stream_id = r->st != NULL ? stream_id(r->st) : 0;
    r->refused = r->st == NULL;
    nreq++;
}

/* A task-augmented tools/call (params.task, with a ttl or none) in one of the pooled sessions. */
static void
pooled_task_call(unsigned a, unsigned b)
{
    if (nreq == REQ_MAX || npsess == 0)
        return;
    size_t k = a % npsess;
    const char *principal = (b & 128) ? "mallory" : psess[k].principal;
    struct pool_session *s = pooled_find(k, principal);
    if (s == NULL)
        return; /* 404 */
    FUZZ_CHECK(strcmp(principal, psess[k].principal) == 0, "%s reached %s's pooled session",
               principal, psess[k].principal);
    struct req *r = pooled_req(k, "tools/call", (b & 64) ? "u" : "t", b & 1);
    r->task_call = true;
    static const char *const tasks[] = { "{\"ttl\":3000}", "{\"ttl\":60000}", "{}",
                                         "{\"ttl\":400}" };
    char body[512];
    size_t len = (size_t)snprintf(
        body, sizeof body,
        "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
        "\"arguments\":{},\"task\":%s%s%s%s}}",
        r->id, r->name, tasks[(b >> 1) & 3], r->token[0] ? ",\"_meta\":{\"progressToken\":" : "",
        r->token, r->token[0] ? "}" : "");
    pooled_post(r, s, body, len);
    r->hidden = r->st != NULL && policy_hides(r->variant, principal, r->name);
}

/* The k-th task record over every pooled session, or NULL. */
static const struct pool_task *
any_task(unsigned k)
{
    size_t n = 0;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next)
        for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext)
            n++;
    if (n == 0)
        return NULL;
    k %= (unsigned)n;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next)
        for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext)
            if (k-- == 0)
                return t;
    return NULL;
}

/*
 * tasks/get, tasks/result, tasks/cancel or tasks/list in one of the pooled sessions. The task it
 * names: one of the session's own, an id the gateway minted for any session (another's, or one
 * gone), or a child's own id: anything but the session's own is answered with an error and
 * reaches no child (task_foreign).
 */
static void
pooled_task_ask(unsigned a, unsigned b)
{
    if (nreq == REQ_MAX || npsess == 0)
        return;
    size_t k = a % npsess;
    struct pool_session *s = pooled_find(k, psess[k].principal);
    if (s == NULL)
        return;
    static const char *const m[] = { "tasks/get", "tasks/result", "tasks/cancel", "tasks/list" };
    const char *method = m[b & 3];
    char tid[192] = "";
    bool foreign = false;
    if ((b & 3) != 3) {
        switch ((b >> 2) & 3) {
        case 0:
        case 1: { /* one of its own */
            size_t n = 0;
            for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext)
                n++;
            const struct pool_task *t = s->tasks;
            for (size_t i = n > 0 ? (a >> 2) % n : 0; t != NULL && i > 0; i--)
                t = t->snext;
            if (t != NULL)
                snprintf(tid, sizeof tid, "\"%s\"", t->id);
            else
                snprintf(tid, sizeof tid, "\"AAAAAAAAAAAAAAAAAAAAAA\"");
            foreign = t == NULL;
            break;
        }
        case 2: /* one the gateway minted, for any session */
            if (ngw_tasks > 0) {
                size_t i = (a >> 2) % ngw_tasks;
                snprintf(tid, sizeof tid, "\"%s\"", gw_tasks[i].id);
                foreign = strcmp(gw_tasks[i].sid, psess[k].sid) != 0;
            } else {
                snprintf(tid, sizeof tid, "\"none\"");
                foreign = true;
            }
            break;
        default: { /* a child's own id (any session's task), never the session's name for it */
            const struct pool_task *t = any_task(a >> 2);
            if (t != NULL)
                snprintf(tid, sizeof tid, "%.*s", (int)t->child_raw_len, t->child_raw);
            else
                snprintf(tid, sizeof tid, "\"ct.1\"");
            foreign = true;
        }
        }
    }
    struct req *r = pooled_req(k, method, "", false);
    r->task_foreign = foreign;
    char body[512];
    size_t len = (size_t)snprintf(
        body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{%s%s}}",
        r->id, method, tid[0] ? "\"taskId\":" : "", tid);
    pooled_post(r, s, body, len);
}

/*
 * A JSON array POSTed in one of the pooled sessions, as http_pooled.c's http_pooled_batch takes
 * it: only a 2025-03-26 session's (any other's is refused whole, 400, before the pool sees it).
 * Elements (each a byte of the input): requests (tools/call with or without a progress token or a
 * task, tools/list, ping, resources/read, tasks/get, logging/setLevel, prompts/get), the id of a
 * request already sent (in flight: a duplicate) or of one earlier in the batch, a cancel, the
 * client's initialized, an answer to a question.
 */
static void
pooled_batch(unsigned a, unsigned b)
{
    if (nreq == REQ_MAX || npsess == 0)
        return;
    size_t k = a % npsess;
    struct pool_session *s = pooled_find(k, psess[k].principal);
    if (s == NULL || !pool_session_batches(s))
        return;
    static const char *const bm[] = { "tools/call",       "tools/list", "ping",
                                      "resources/read",   "tasks/get",  "logging/setLevel",
                                      "prompts/get",      "tools/call" };
    struct req *r = &R[nreq];
    memset(r, 0, sizeof(*r));
    snprintf(r->sid, sizeof r->sid, "%s", psess[k].sid);
    r->principal = psess[k].principal;
    r->pooled = true;
    unsigned n = 1 + (b & 3);
    char body[2048];
    size_t len = (size_t)snprintf(body, sizeof body, "[");
    bool cancels_own = false;
    for (unsigned i = 0; i < n; i++) {
        unsigned e = next_byte();
        char el[512];
        int elen;
        switch (e & 7) {
        case 0:
        case 1:
        case 2: {
            unsigned id = ++id_seq;
            snprintf(r->bids[r->nb], sizeof r->bids[0], (id & 1) ? "\"c%u\"" : "%u",
                     (id & 1) ? id : 1000 + id);
            if (e & 8)
                snprintf(r->btokens[r->nb], sizeof r->btokens[0], "\"p%u\"", id);
            const char *m = bm[(e >> 4) & 7];
            elen = snprintf(el, sizeof el,
                            "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{"
                            "\"name\":\"t\",\"uri\":\"t\",\"level\":\"debug\"%s%s%s%s}}",
                            r->bids[r->nb], m, (e & 128) ? ",\"task\":{\"ttl\":3000}" : "",
                            r->btokens[r->nb][0] ? ",\"_meta\":{\"progressToken\":" : "",
                            r->btokens[r->nb], r->btokens[r->nb][0] ? "}" : "");
            r->nb++;
            break;
        }
        case 3: { /* an id sent before: of this batch, or of the session's last request */
            const char *id = "1001";
            if ((e & 8) && r->nb > 0)
                id = r->bids[(e >> 4) % r->nb];
            else
                for (size_t j = nreq; j > 0; j--)
                    if (R[j - 1].pooled && strcmp(R[j - 1].sid, r->sid) == 0
                        && R[j - 1].id[0] != '\0' && strcmp(R[j - 1].method, "initialize") != 0) {
                        id = R[j - 1].id;
                        break;
                    }
            snprintf(r->bids[r->nb], sizeof r->bids[0], "%s", id);
            elen = snprintf(el, sizeof el,
                            "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\","
                            "\"params\":{\"name\":\"t\"}}",
                            r->bids[r->nb++]);
            break;
        }
        case 4: { /* a cancel: of this batch's request, or of another request of the session */
            const char *id = "\"none\"";
            if ((e & 8) && r->nb > 0) {
                id = r->bids[(e >> 4) % r->nb];
            } else {
                size_t m = (e >> 4) & 15;
                for (size_t j = 0; j < nreq; j++)
                    if (R[j].pooled && !R[j].get && R[j].id[0] != '\0'
                        && strcmp(R[j].sid, r->sid) == 0 && strcmp(R[j].method, "initialize") != 0
                        && m-- == 0) {
                        id = R[j].id;
                        break;
                    }
            }
            /* Ids repeat (a reused one): any request of the session with it may go unanswered. */
            mark_cancelled(r->sid, id);
            for (unsigned j = 0; j < r->nb; j++)
                cancels_own |= strcmp(r->bids[j], id) == 0;
            elen = snprintf(el, sizeof el,
                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                            "\"params\":{\"requestId\":%s}}",
                            id);
            break;
        }
        case 5:
            elen = snprintf(el, sizeof el,
                            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
            break;
        default:
            elen = snprintf(el, sizeof el,
                            "{\"jsonrpc\":\"2.0\",\"id\":\"mcpgw-ask-%u\",\"result\":{}}",
                            1 + ((e >> 3) & 7));
        }
        len += (size_t)snprintf(body + len, sizeof body - len, "%s%.*s", i > 0 ? "," : "", elen,
                                el);
    }
    len += (size_t)snprintf(body + len, sizeof body - len, "]");
    FUZZ_CHECK(len < sizeof body, "batch too long");
    /* As http_batch_open: split, each element scanned (none here is refused). */
    struct jsonrpc_span el[BATCH_MAX];
    struct jsonrpc_info info[BATCH_MAX];
    size_t nel = 0;
    FUZZ_CHECK(jsonrpc_batch_split(body, len, el, BATCH_MAX, &nel) == 0 && nel == n,
               "bad batch %s", body);
    for (size_t i = 0; i < nel; i++)
        FUZZ_CHECK(jsonrpc_scan(body + el[i].off, el[i].len, &info[i], NULL) == JSONRPC_OK,
                   "bad batch element %zu of %s", i, body);
    struct pool_meta meta = { .log_level = -1, .principal = r->principal };
    meta.grants = grants_of(r->principal);
    r->st = pool_session_batch(s, &cur_cfg()->servers[0], body, el, info, nel, &meta);
    FUZZ_CHECK((r->st != NULL) == (r->nb > 0), "a batch of %u requests: %s", r->nb,
               r->st != NULL ? "a stream" : "202");
    if (r->st == NULL)
        return; /* 202: nothing to read */
    r->stream_id = stream_id(r->st);
    r->cancelled = cancels_own; /* a request it cancelled itself may get no answer */
    nreq++;
}

/*
 * The fuzzer's own reload (SIGHUP with a changed file): pooled sessions' limits,
 * max_inflight_per_session (1, 2 or 3: the cap of a session's calls and task records together) and
 * session_idle_timeout_s 10 (expiry), or the defaults again.
 */
static void
pooled_reload(unsigned a)
{
    free_retired(false);
    if (ncfg == CFG_MAX)
        return;
    pooled_caps = a & 3;
    make_ini(cfg_b0, cfg_b1, cfg_b2);
    struct config *c = load_config();
    cfgs[ncfg++] = c;
    pool_set_config(c);
}

static struct req *
pick_req(unsigned a)
{
    size_t live = 0;
    for (size_t i = 0; i < nreq; i++)
        live += R[i].st != NULL;
    if (live == 0)
        return NULL;
    size_t k = a % live;
    for (size_t i = 0; i < nreq; i++)
        if (R[i].st != NULL && k-- == 0)
            return &R[i];
    return NULL;
}

/* --- the children ------------------------------------------------------------------------- */

static struct pool_child *
pick_child(unsigned a)
{
    size_t n = 0;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        for (struct pool_child *c = p->children; c != NULL; c = c->next)
            n++;
    if (n == 0)
        return NULL;
    size_t k = a % n;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        for (struct pool_child *c = p->children; c != NULL; c = c->next)
            if (k-- == 0)
                return c;
    return NULL;
}

/* The k-th entry of c's table (any state), or NULL when it has none. */
static struct pending *
pick_entry(struct pool_child *c, unsigned k)
{
    if (c->r.pt.count == 0)
        return NULL;
    k %= (unsigned)c->r.pt.count;
    for (struct pending *e = c->r.pt.head; e != NULL; e = e->next)
        if (k-- == 0)
            return e;
    return NULL;
}

/* The child writes line; nothing while its stdout is paused (it blocks on the pipe). */
static void
child_says(struct pool_child *c, const char *line)
{
    if (c->u == NULL || fake_upstream_paused(c->u))
        return;
    fake_upstream_line(c->u, line);
}

static char *line; /* a child's line being built */
static size_t line_cap;

static void line_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
line_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, line_cap, fmt, ap);
    va_end(ap);
    if ((size_t)n >= line_cap) {
        line_cap = (size_t)n + 1;
        line = xrealloc(line, line_cap);
        va_start(ap, fmt);
        vsnprintf(line, line_cap, fmt, ap);
        va_end(ap);
    }
}

static void
child_answer(struct pool_child *c, unsigned a, unsigned b)
{
    struct pending *e = pick_entry(c, a >> 2);
    if (e == NULL || (a & 3) == 3) {
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{}}", 900000 + b);
        child_says(c, line);
        return;
    }
    uint64_t id = e->gw_id;
    const struct pool_call *call = e->owner;
    if (call != NULL && call->sess != NULL && c->pool->era == CONFIG_ERA_STATELESS
        && (b & 3) != 1) {
        /* A pooled session's call at a stateless child: its discover, or an input round. */
        if (strcmp(e->method, "server/discover") == 0) {
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"resultType\":\"complete\",\"supportedVersions\":["
                     "\"2026-07-28\"],\"capabilities\":{\"tools\":{}},\"_meta\":{"
                     "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"f\",\"version\":\"1\"}}}}",
                     id);
            child_says(c, line);
            return;
        }
        if (strcmp(e->method, "tools/call") == 0 && (b & 12) == 12) {
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{"
                     "\"k\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"m\"}}%s},"
                     "\"requestState\":\"s%u\"}}",
                     id,
                     (b & 16) ? ",\"j\":{\"method\":\"sampling/createMessage\",\"params\":{}}"
                              : "",
                     b);
            child_says(c, line);
            return;
        }
    }
    if (id == c->start_id && c->state == POOL_CHILD_STARTING) {
        if (c->probing) {
            if (b % 8 == 7)
                line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                         ",\"result\":{\"supportedVersions\":[\"2099-01-01\"]}}",
                         id);
            else if (b & 1)
                line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                         ",\"result\":{\"supportedVersions\":[\"2026-07-28\"],"
                         "\"capabilities\":{}}}",
                         id);
            else
                line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                         ",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}",
                         id);
        } else if (b % 8 == 7) {
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"error\":{\"code\":-32602,\"message\":\"no\"}}",
                     id);
        } else {
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{"
                     "\"tools\":{\"listChanged\":true},\"resources\":{\"subscribe\":true,"
                     "\"listChanged\":true}},\"serverInfo\":{\"name\":\"f\",\"version\":\"1\"}}}",
                     id);
        }
        child_says(c, line);
        return;
    }
    switch (b & 3) {
    case 0:
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                 ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}",
                 id);
        break;
    case 1:
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                 ",\"error\":{\"code\":-32000,\"message\":\"failed\"}}",
                 id);
        break;
    case 2:
        if (skipping(SKIP_EMPTY_RESULT))
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"n\":0}}", id);
        else
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}", id);
        break;
    default:
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                 ",\"result\":{\"tools\":[{\"name\":\"t\"},{\"name\":\"u\"}],"
                 "\"resultType\":\"complete\",\"ttlMs\":5}}",
                 id);
    }
    child_says(c, line);
}

static bool
allow_big(unsigned b)
{
    return (b & 1) && !skipping(SKIP_BIG);
}

static void
child_progress(struct pool_child *c, unsigned a, unsigned b)
{
    struct pending *e = pick_entry(c, a);
    uint64_t id = e != NULL ? e->gw_id : 424242;
    line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
             "\"progressToken\":%" PRIu64 ",\"progress\":1,\"message\":\"%s\"}}",
             id, allow_big(b) ? big : "half");
    child_says(c, line);
}

static void
child_log(struct pool_child *c, unsigned a)
{
    static const char *const levels[] = { "debug", "info", "error", "emergency" };
    line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{"
             "\"level\":\"%s\",\"data\":\"line\"}}",
             levels[a & 3]);
    child_says(c, line);
}

static void
child_ask(struct pool_child *c, unsigned a, unsigned b)
{
    static const char *const asks[] = { "elicitation/create",
                                        "sampling/createMessage",
                                        "roots/list",
                                        "elicitation/create",
                                        "ping",
                                        "foo/bar" };
    const char *m = asks[a % 6];
    unsigned n = ++ask_seq;
    line_fmt("{\"jsonrpc\":\"2.0\",\"id\":\"k%u\",\"method\":\"%s\",\"params\":{"
             "\"message\":\"%s\"}}",
             n, m, allow_big(b) ? big : "which?");
    child_says(c, line);
}

static void
child_withdraw(struct pool_child *c, unsigned a)
{
    unsigned n = ask_seq > (a & 3) ? ask_seq - (a & 3) : 1;
    line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
             "\"requestId\":\"k%u\",\"reason\":\"never mind\"}}",
             n);
    child_says(c, line);
}

/*
 * The child's side of the gateway's own subscriptions/listen and server/discover (a stateless
 * pool of pooled sessions: pool_session_listen.c), whether or not this child holds them: its
 * acknowledgement, a list change or a resource's update under the listen's id (the current one,
 * or an older one's), the listen's end (a result, an error, the child's notifications/cancelled),
 * and an answer to the gateway's discover (capabilities with list changes and subscribe, or an
 * error). The gateway may hold none: then the ids name nothing of the gateway's, or an old one.
 */
static void
child_gateway_listen(struct pool_child *c, unsigned a)
{
    const struct pool *p = c->pool;
    uint64_t no = p->gl_no > (a & 1) ? p->gl_no - (a & 1) : 1;
    char id[64];
    snprintf(id, sizeof id, "\"mcpgw-listen-%" PRIu64 "\"", no);
    static const char meta[] = "\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":";
    switch ((a >> 1) & 7) {
    case 0:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\","
                 "\"params\":{\"notifications\":{},%s%s}}}",
                 meta, id);
        break;
    case 1:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\","
                 "\"params\":{%s%s}}}",
                 meta, id);
        break;
    case 2:
    case 3:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
                 "\"params\":{\"uri\":\"u%u\",%s%s}}}",
                 1 + ((a >> 4) & 1), meta, id);
        break;
    case 4:
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%s,%s}", id,
                 (a & 16) ? "\"error\":{\"code\":-32602,\"message\":\"no\"}"
                          : "\"result\":{\"resultType\":\"complete\"}");
        break;
    case 5:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":%s}}",
                 id);
        break;
    default:
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":\"mcpgw-discover-%" PRIu64 "\",%s}",
                 p->gl_sent > (a & 1) ? p->gl_sent - (a & 1) : 1,
                 (a & 16) ? "\"error\":{\"code\":-32601,\"message\":\"no\"}"
                          : "\"result\":{\"resultType\":\"complete\",\"supportedVersions\":["
                            "\"2026-07-28\"],\"capabilities\":{\"tools\":{\"listChanged\":true},"
                            "\"resources\":{\"subscribe\":true,\"listChanged\":true}}}");
        break;
    }
    child_says(c, line);
}

static void
child_notify(struct pool_child *c, unsigned a)
{
    switch (a & 3) {
    case 0:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
        break;
    case 1:
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\","
                 "\"params\":{\"uri\":\"u%u\"}}",
                 1 + ((a >> 2) & 1));
        break;
    case 2: {
        struct pending *e = pick_entry(c, a >> 2);
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\","
                 "\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%" PRIu64 "}}}",
                 e != NULL ? e->gw_id : 7);
        break;
    }
    default:
        child_gateway_listen(c, a >> 2);
        return;
    }
    child_says(c, line);
}

/* --- the children's side of pooled sessions' tasks ----------------------------------------- */

/*
 * Whether e is a pooled session's task operation in flight (a task-augmented call, tasks/...), or
 * a task-augmented call the gateway cancelled (DELETE, a drop, a timeout: no
 * notifications/cancelled for one), whose CreateTaskResult the child may still write.
 */
static bool
task_entry(const struct pending *e)
{
    const struct pool_call *call = e->owner;
    if (e->state == PENDING_CANCELLED)
        return e->task;
    return e->state == PENDING_FORWARDED && call != NULL && call->task_op != POOL_TASK_NONE;
}

static size_t
task_entries(const struct pool_child *c)
{
    size_t n = 0;
    for (const struct pending *e = c->r.pt.head; e != NULL; e = e->next)
        n += task_entry(e);
    return n;
}

/* The k-th child (any pool) for which has(child) holds, or NULL. */
static struct pool_child *
pick_child_with(unsigned k, bool (*has)(const struct pool_child *))
{
    size_t n = 0;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        for (struct pool_child *c = p->children; c != NULL; c = c->next)
            n += has(c);
    if (n == 0)
        return NULL;
    k %= (unsigned)n;
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        for (struct pool_child *c = p->children; c != NULL; c = c->next)
            if (has(c) && k-- == 0)
                return c;
    return NULL;
}

static bool
has_task_entries(const struct pool_child *c)
{
    return task_entries(c) > 0;
}

static bool
has_tasks(const struct pool_child *c)
{
    return c->tasks != NULL;
}

static const char *const task_statuses[] = { "working", "completed", "input_required", "failed",
                                             "cancelled" };

/*
 * The child answers one of its task operations: a task-augmented call with a CreateTaskResult
 * (a task id of its own, "ct.N": a fresh one or "ct.1", which another child may have minted too;
 * a ttl or none; any status), or as a plain call; tasks/get and tasks/cancel with its Task object,
 * tasks/result with the call's result and its related-task _meta; or an error.
 */
static void
child_task_answer(struct pool_child *c, unsigned a, unsigned b)
{
    size_t n = task_entries(c);
    if (n == 0)
        return;
    size_t k = a % n;
    struct pending *e = c->r.pt.head;
    for (; e != NULL; e = e->next)
        if (task_entry(e) && k-- == 0)
            break;
    if (e == NULL)
        return;
    const struct pool_call *call = e->owner;
    const char *status = task_statuses[(b >> 2) % 5];
    static const char *const ttls[] = { ",\"ttl\":3000", ",\"ttl\":60000", "", ",\"ttl\":300" };
    char raw[192];
    if (call == NULL) {
        /*
         * Its call was cancelled: a late CreateTaskResult. A task that runs (not terminal) must
         * be cancelled at the child by the gateway, or it runs for nobody (and the child's
         * questions meanwhile are attributed to whichever call is in flight).
         */
        unsigned tn = ++child_task_seq + 1;
        bool runs = (b >> 2) % 5 == 0 || (b >> 2) % 5 == 2;
        /* Not a child whose next write fails: the cancel goes with its stdin, the task with it. */
        bool watch = runs && c->state == POOL_CHILD_READY && c->u != NULL
                     && upstream_writable(c->u) && upstream_queued_bytes(c->u) == 0
                     && !fake_upstream_paused(c->u) && !fake_upstream_gone_seen(c->u)
                     && !fake_upstream_fail_pending(c->u);
        const struct upstream *u = c->u;
        size_t sent = watch ? fake_upstream_sent_count(u) : 0;
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"task\":{\"taskId\":"
                 "\"ct.%u\",\"status\":\"%s\",\"createdAt\":\"2026-01-01T00:00:00Z\"%s}}}",
                 e->gw_id, tn, status, ttls[(b >> 5) & 3]);
        child_says(c, line);
        if (!watch)
            return;
        char want[32];
        snprintf(want, sizeof want, "\"ct.%u\"", tn);
        bool cancelled = false;
        for (size_t j = sent; j < fake_upstream_sent_count(u) && !cancelled; j++) {
            size_t len;
            const char *m = fake_upstream_sent(u, j, &len);
            cancelled = strstr(m, "\"method\":\"tasks/cancel\"") != NULL && strstr(m, want) != NULL;
        }
        FUZZ_CHECK(cancelled, "a task created for a cancelled call (the child's %s, %s) was not "
                   "cancelled at the child", want, status);
        return;
    }
    if (call->task != NULL)
        snprintf(raw, sizeof raw, "%.*s", (int)call->task->child_raw_len, call->task->child_raw);
    else
        snprintf(raw, sizeof raw, "\"ct.0\"");
    if ((b & 3) == 3) {
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                 ",\"error\":{\"code\":-32602,\"message\":\"no such task\"}}",
                 e->gw_id);
    } else if (call->task_op == POOL_TASK_CREATE) {
        if ((b & 3) == 2)
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ran\"}]}}",
                     e->gw_id);
        else
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"task\":{\"taskId\":"
                     "\"ct.%u\",\"status\":\"%s\",\"createdAt\":\"2026-01-01T00:00:00Z\"%s,"
                     "\"pollInterval\":100}}}",
                     e->gw_id, (b & 128) ? 1u : ++child_task_seq + 1, status, ttls[(b >> 5) & 3]);
    } else if (call->task_op == POOL_TASK_RESULT) {
        static const char rel[] =
            ",\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":";
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                 ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]%s%s%s}}",
                 e->gw_id, (b & 3) == 2 ? "" : rel, (b & 3) == 2 ? "" : raw,
                 (b & 3) == 2 ? "" : "}}");
    } else {
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{%s%s%s\"status\":\"%s\","
                 "\"createdAt\":\"2026-01-01T00:00:00Z\"%s}}",
                 e->gw_id, (b & 3) == 2 ? "" : "\"taskId\":", (b & 3) == 2 ? "" : raw,
                 (b & 3) == 2 ? "" : ",",
                 call->task_op == POOL_TASK_CANCEL ? "cancelled" : status, ttls[(b >> 5) & 3]);
    }
    child_says(c, line);
}

/*
 * The child's notifications/tasks/status, under its own id: of one of its tasks, of one another
 * child holds (nobody's here: dropped), or of none.
 */
static void
child_task_status(struct pool_child *c, unsigned a, unsigned b)
{
    char raw[192];
    size_t n = 0;
    for (const struct pool_task *t = c->tasks; t != NULL; t = t->cnext)
        n++;
    const struct pool_task *t = NULL;
    if (n > 0 && (b & 3) != 3) {
        t = c->tasks;
        for (size_t i = a % n; i > 0; i--)
            t = t->cnext;
    } else if ((b & 3) == 3) {
        t = any_task(a);
    }
    if (t != NULL)
        snprintf(raw, sizeof raw, "%.*s", (int)t->child_raw_len, t->child_raw);
    else
        snprintf(raw, sizeof raw, "\"ct.%u\"", 900 + (a & 7));
    line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{"
             "\"taskId\":%s,\"status\":\"%s\",\"createdAt\":\"2026-01-01T00:00:00Z\","
             "\"lastUpdatedAt\":\"2026-01-01T00:00:01Z\",\"ttl\":3000,\"pollInterval\":100}}",
             raw, task_statuses[(b >> 2) % 5]);
    child_says(c, line);
}

/* The questions every pooled session has been asked so far. */
static unsigned
pooled_asks(void)
{
    unsigned n = 0;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next)
        n += s->next_ask;
    return n;
}

/*
 * A child holding tasks: it ends (its tasks read as failed from then on), or, one with a task not
 * yet terminal, writes a log line or asks a question: neither reaches any session (whose is it: a
 * task may write at any time), the log line is counted unattributed.
 */
static void
child_task_holder(struct pool_child *c, unsigned b)
{
    if (c->u == NULL)
        return;
    if ((b & 3) == 0 || (b & 3) == 3) {
        fake_upstream_gone(c->u, (b & 3) ? "child exited" : "child closed its stdout");
        return;
    }
    bool busy = c->state == POOL_CHILD_READY && pool_task_child_busy(c)
                && !fake_upstream_paused(c->u) && !fake_upstream_gone_seen(c->u);
    struct pool_server *row = c->pool->row;
    uint64_t unattributed = row->ctr.unattributed;
    unsigned asks = pooled_asks();
    if ((b & 3) == 1)
        child_log(c, b >> 2);
    else
        child_ask(c, (b >> 2) % 3, 0); /* elicitation, sampling, roots */
    settle();
    if (!busy)
        return;
    FUZZ_CHECK(pooled_asks() == asks, "a child running a task asked a pooled session");
    if ((b & 3) == 1)
        FUZZ_CHECK(row->ctr.unattributed == unattributed + 1,
                   "a child running a task: its log line was not dropped (unattributed %" PRIu64
                   " -> %" PRIu64 ")",
                   unattributed, row->ctr.unattributed);
}

/* --- session mode: the same client and child against the session layer ------------------- */

/*
 * The two clients' principals as the HTTP layer gets them from A (mode none: each client's
 * address names it), again after a reload; the old references are given back.
 */
static void
principals_from(struct auth *a, const struct config *c)
{
    static const char *const addrs[2] = { "192.0.2.1", "2001:db8::2" };
    struct auth_principal **who[2] = { &P, &Q };
    for (int i = 0; i < 2; i++) {
        struct auth_principal *p = NULL;
        const char *why = NULL;
        auth_set_client(a, addrs[i]);
        FUZZ_CHECK(auth_check(a, NULL, &c->servers[0], util_now_unix(), &p, &G, &why) == AUTH_OK,
                   "auth_check: %s", why);
        auth_set_client(a, NULL);
        if (*who[i] != NULL)
            auth_principal_unref(*who[i]);
        *who[i] = p;
    }
    FUZZ_CHECK(P != Q, "two client addresses are one principal in mode none");
}

/*
 * A new session of owner: created only while the owner is under max_sessions_per_principal,
 * refused with 429 only at it, whatever reloads came between.
 */
static struct session *
session_create_checked(struct auth_principal *owner)
{
    uint64_t cap = cur_cfg()->auth.max_sessions_per_principal;
    uint64_t before = quota_of(QUOTA_GATEWAY, owner->name, QUOTA_SESSIONS);
    int status = 0;
    const char *err = NULL;
    struct session *s = session_create(&cur_cfg()->servers[0], owner, NULL, &status, &err);
    if (s != NULL)
        FUZZ_CHECK(cap == 0 || before < cap,
                   "a session past max_sessions_per_principal (%" PRIu64 " held, cap %" PRIu64 ")",
                   before, cap);
    else if (status == 429)
        FUZZ_CHECK(cap != 0 && before >= cap,
                   "429 for a principal holding %" PRIu64 " sessions (cap %" PRIu64 ")", before,
                   cap);
    return s;
}

static struct session *
pick_session(unsigned a)
{
    if (nsids == 0)
        return NULL;
    return session_find(sids[a % nsids]);
}

/* A POST (or GET) stream of s for a new tracked request; NULL when refused or full. */
static struct req *
session_open(struct session *s, bool is_get)
{
    if (nreq == REQ_MAX)
        return NULL;
    enum session_status status = SESSION_OK;
    struct stream *st = session_stream_open(s, is_get, &status);
    if (st == NULL)
        return NULL;
    struct req *r = &R[nreq++];
    memset(r, 0, sizeof(*r));
    r->st = st;
    r->get = is_get;
    r->stream_id = stream_id(st);
    snprintf(r->sid, sizeof r->sid, "%s", s->id);
    return r;
}

/* body on a new POST stream of s, as http_mcp.c sends it; a refusal ends the stream unread. */
static void
session_send(struct session *s, struct req *r, char *body, size_t len, bool created)
{
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    uint64_t before = quota_of(s->srv->name, s->owner->name, QUOTA_CALLS);
    enum session_status st = session_client_request(s, r->st, body, len, &info, G, NULL);
    check_admitted(st == SESSION_OK, st == SESSION_E_PRINCIPAL, QUOTA_CALLS, before,
                   strcmp(info.method, "initialize") != 0);
    if (st != SESSION_OK) {
        r->refused = true;
        detach(r);
        if (created)
            session_close(s, SESSION_END_INIT, "initialize not delivered");
    }
}

static const char *const versions[] = { "2025-06-18", "2025-03-26", "2025-11-25", "2024-11-05" };

static void
session_new(unsigned b)
{
    if (nsids == SESS_MAX || nreq == REQ_MAX)
        return;
    struct session *s = session_create_checked((b & 4) ? Q : P);
    if (s == NULL)
        return;
    sids_active[nsids] = 0;
    snprintf(sids[nsids++], sizeof sids[0], "%s", s->id);
    struct req *r = session_open(s, false);
    FUZZ_CHECK(r != NULL, "a new session refused its first stream");
    unsigned n = ++id_seq;
    snprintf(r->id, sizeof r->id, "%u", 1000 + n);
    char body[512];
    int len = snprintf(body, sizeof body,
                       "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"%s\",\"capabilities\":{\"elicitation\":{}},"
                       "\"clientInfo\":{\"name\":\"f\",\"version\":\"1\"}}}",
                       r->id, versions[b & 3]);
    session_send(s, r, body, (size_t)len, true);
}

static const char *const session_methods[] = { "tools/call",     "tools/call",    "tools/list",
                                               "resources/read", "prompts/get",   "ping",
                                               "tools/call",     "resources/list" };

/* A request's text (id, method, progress token) into body; its length. */
static int
session_body(char *body, size_t size, const char *id, const char *m, const char *token, bool task)
{
    return snprintf(body, size,
                    "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":{"
                    "\"name\":\"t\",\"uri\":\"u1\"%s%s%s%s}}",
                    id, m, token[0] ? ",\"_meta\":{\"progressToken\":" : "", token,
                    token[0] ? "}" : "", task ? ",\"task\":{\"ttl\":3000}" : "");
}

static void
session_request(unsigned a, unsigned b)
{
    struct session *s = pick_session(a);
    if (s == NULL || (b & 15) == 0) {
        session_new(b >> 4);
        return;
    }
    struct req *r = session_open(s, false);
    if (r == NULL)
        return;
    unsigned n = ++id_seq;
    if (n & 1)
        snprintf(r->id, sizeof r->id, "\"c%u\"", n);
    else
        snprintf(r->id, sizeof r->id, "%u", 1000 + n);
    const char *m = session_methods[(a >> 2) & 7];
    snprintf(r->method, sizeof r->method, "%s", m);
    if (b & 16)
        snprintf(r->token, sizeof r->token, "\"p%u\"", n);
    char body[512];
    int len = session_body(body, sizeof body, r->id, m, r->token, (b & 0xe0) == 0xe0);
    session_send(s, r, body, (size_t)len, false);
}

/* The client cancels id of session sid: no answer is owed to a request of that id there. */
static void
mark_cancelled(const char *sid, const char *id)
{
    for (size_t i = 0; i < nreq; i++) {
        struct req *r = &R[i];
        if (strcmp(r->sid, sid) != 0)
            continue;
        bool named = strcmp(r->id, id) == 0;
        for (unsigned k = 0; k < r->nb; k++)
            named |= strcmp(r->bids[k], id) == 0;
        r->cancelled |= named;
    }
}

/* The k-th request the child sent the client (any state) in s's table; NULL when none. */
static struct pending *
pick_question(struct session *s, unsigned k)
{
    size_t n = 0;
    for (struct pending *e = s->r.pt.head; e != NULL; e = e->next)
        n += e->dir == PENDING_TO_CLIENT;
    if (n == 0)
        return NULL;
    k %= (unsigned)n;
    for (struct pending *e = s->r.pt.head; e != NULL; e = e->next)
        if (e->dir == PENDING_TO_CLIENT && k-- == 0)
            return e;
    return NULL;
}

/*
 * One client notification or answer into body: initialized, a cancel of one of its requests, an
 * answer (result or error) to one of the child's questions, or a stray answer. Its length.
 */
static int
session_other_body(struct session *s, char *body, size_t size, unsigned b)
{
    if ((b & 3) == 0)
        return snprintf(body, size,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    if ((b & 3) == 1 && nreq > 0) {
        const struct req *r = &R[(b >> 2) % nreq];
        const char *id = r->nb > 0 ? r->bids[0] : r->id[0] ? r->id : "0";
        mark_cancelled(s->id, id);
        return snprintf(body, size,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                        "\"requestId\":%s}}",
                        id);
    }
    struct pending *q = (b & 3) == 3 ? pick_question(s, b >> 3) : NULL;
    if (q != NULL && (b & 4))
        return snprintf(body, size,
                        "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                        ",\"error\":{\"code\":-1,\"message\":\"declined\"}}",
                        q->gw_id);
    if (q != NULL)
        return snprintf(body, size,
                        "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                        ",\"result\":{\"action\":\"accept\",\"roots\":[]}}",
                        q->gw_id);
    return snprintf(body, size, "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{}}", (b >> 2) & 7);
}

/* A POST of one notification or answer (202). */
static void
session_other(unsigned a, unsigned b)
{
    struct session *s = pick_session(a);
    if (s == NULL)
        return;
    char body[256];
    int len = session_other_body(s, body, sizeof body, b);
    struct jsonrpc_info info;
    FUZZ_CHECK(jsonrpc_scan(body, (size_t)len, &info, NULL) == JSONRPC_OK, "bad body %s", body);
    (void)session_client_other(s, body, (size_t)len, &info);
}

/*
 * A JSON-RPC batch POSTed to s, as http_mcp.c's http_post_batch takes it: refused whole (400)
 * when the session's revision has no batches, it is empty, or an element is invalid, a batch or
 * an initialize; else its requests are answered on one new stream. Elements (each a byte of the
 * input): requests (new ids, or the id of one already sent), cancels, initialized, answers to the
 * child's questions, and invalid ones.
 */
static void
session_batch(unsigned a, unsigned b)
{
    struct session *s = pick_session(a);
    if (s == NULL || !session_batches(s))
        return;
    unsigned n = b & 3;
    if ((b & 12) == 12)
        n = 4;
    char body[2048], ids[BATCH_MAX][24], tokens[BATCH_MAX][24] = { "" };
    size_t len = 0, nids = 0;
    len += (size_t)snprintf(body + len, sizeof body - len, "%s", (b & 0xf0) == 0xf0 ? " [ " : "[");
    for (unsigned i = 0; i < n; i++) {
        unsigned k = next_byte();
        char el[512];
        int elen;
        switch (k & 7) {
        case 0:
        case 1:
        case 2: {
            unsigned id = ++id_seq;
            snprintf(ids[nids], sizeof ids[0], (id & 1) ? "\"c%u\"" : "%u",
                     (id & 1) ? id : 1000 + id);
            if (k & 8)
                snprintf(tokens[nids], sizeof tokens[0], "\"p%u\"", id);
            elen = session_body(el, sizeof el, ids[nids], session_methods[(k >> 4) & 7],
                                tokens[nids], (k & 0xe0) == 0xe0);
            nids++;
            break;
        }
        case 3: { /* the id of an earlier request of this session: a duplicate if in flight */
            const char *id = "1001";
            for (size_t j = nreq; j > 0; j--)
                if (strcmp(R[j - 1].sid, s->id) == 0 && R[j - 1].id[0] && (k >> 3) % 2 == 0) {
                    id = R[j - 1].id;
                    break;
                }
            snprintf(ids[nids], sizeof ids[0], "%s", id);
            elen = session_body(el, sizeof el, ids[nids++], "tools/call", "", false);
            break;
        }
        case 4: /* a cancel */
            elen = session_other_body(s, el, sizeof el, ((k >> 3) << 2) | 1);
            break;
        case 5: /* initialized */
            elen = session_other_body(s, el, sizeof el, 0);
            break;
        case 6: /* an answer to one of the child's questions */
            elen = session_other_body(s, el, sizeof el, ((k >> 3) << 2) | 3);
            break;
        default: {
            static const char *const bad[] = {
                "1",
                "{\"jsonrpc\":\"2.0\"}",
                "[]",
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{}}",
            };
            elen = snprintf(el, sizeof el, "%s", bad[(k >> 3) & 3]);
        }
        }
        if (len + (size_t)elen + 4 >= sizeof body)
            break;
        len += (size_t)snprintf(body + len, sizeof body - len, "%s%s", i ? "," : "", el);
    }
    if ((b & 0xf0) != 0xe0) /* else: unterminated */
        len += (size_t)snprintf(body + len, sizeof body - len, "]");

    struct jsonrpc_span sp[SESSION_BATCH_MAX];
    size_t count;
    if (jsonrpc_batch_split(body, len, sp, ARRAY_LEN(sp), &count) == -1 || count == 0)
        return; /* 400 */
    struct jsonrpc_info info[BATCH_MAX + 1];
    FUZZ_CHECK(count <= BATCH_MAX, "a batch of %zu elements from %u", count, n);
    bool requests = false;
    for (size_t i = 0; i < count; i++) {
        if (jsonrpc_scan(body + sp[i].off, sp[i].len, &info[i], NULL) != JSONRPC_OK)
            return; /* 400 */
        if (info[i].kind == JSONRPC_REQUEST && strcmp(info[i].method, "initialize") == 0)
            return; /* 400 */
        requests |= info[i].kind == JSONRPC_REQUEST;
    }
    struct req *r = NULL;
    if (requests && (r = session_open(s, false)) == NULL)
        return;
    if (r != NULL) {
        FUZZ_CHECK(nids > 0 && nids <= BATCH_MAX, "a batch of %zu requests", nids);
        r->nb = (unsigned)nids;
        for (size_t i = 0; i < nids; i++) {
            memcpy(r->bids[i], ids[i], sizeof r->bids[0]);
            memcpy(r->btokens[i], tokens[i], sizeof r->btokens[0]);
        }
        snprintf(r->id, sizeof r->id, "%s", ids[0]);
        /* A cancel in the batch may name one of the batch's own requests. */
        for (size_t i = 0; i < count; i++) {
            const struct jsonrpc_span q = info[i].request_id;
            char id[24];
            if (info[i].kind != JSONRPC_NOTIFICATION || q.len == 0 || q.len >= sizeof id)
                continue;
            memcpy(id, body + sp[i].off + q.off, q.len);
            id[q.len] = '\0';
            mark_cancelled(s->id, id);
        }
    }
    if (session_client_batch(s, r != NULL ? r->st : NULL, body, len, sp, info, count, G, NULL)
        != SESSION_OK) {
        FUZZ_CHECK(r == NULL || !stream_ended(r->st), "a refused batch ended its stream");
        if (r != NULL) {
            r->refused = true;
            detach(r);
        }
    }
}

/*
 * GET with Last-Event-ID for a stream the client left: the id of the last whole event it read
 * (or the stream's start), one past what was sent, or one that does not parse. A stream resumed is
 * read on by the request that had it.
 */
static void
session_resume(unsigned a, unsigned b)
{
    size_t n = 0;
    for (size_t i = 0; i < nreq; i++)
        n += R[i].st == NULL && R[i].detached && !R[i].refused;
    if (n == 0)
        return;
    size_t k = a % n;
    struct req *r = NULL;
    for (size_t i = 0; i < nreq && r == NULL; i++)
        if (R[i].st == NULL && R[i].detached && !R[i].refused && k-- == 0)
            r = &R[i];
    struct session *s = session_find(r->sid);
    if (s == NULL)
        return; /* 404 */
    char eid[48];
    bool honest = r->last_eid[0] != '\0' && (b & 3) < 2;
    if (r->last_eid[0] == '\0') /* nothing read: seq 0 is no event id */
        stream_event_id(r->stream_id, 0, eid, sizeof eid);
    else if ((b & 3) == 2)
        stream_event_id(r->stream_id,
                        (uint64_t)strtoull(strchr(r->last_eid, '-') + 1, NULL, 10) + 1000, eid,
                        sizeof eid);
    else
        snprintf(eid, sizeof eid, "%s", (b & 3) == 3 ? ((b & 4) ? "x-1" : "") : r->last_eid);
    enum session_status status = SESSION_OK;
    struct stream *st = session_stream_resume(s, eid, &status);
    if (st == NULL)
        return;
    FUZZ_CHECK(honest, "a resume from Last-Event-ID %s was taken", eid);
    FUZZ_CHECK(stream_id(st) == r->stream_id, "a resume from %s got stream %" PRIu64, eid,
               stream_id(st));
    r->st = st;
    r->detached = false;
    r->acc_len = 0; /* what was read of an event not whole comes again */
}

/* The same in a pooled session (pool_session_resume), at the instance that holds its streams. */
static void
pooled_resume(unsigned a, unsigned b)
{
    size_t n = 0;
    for (size_t i = 0; i < nreq; i++)
        n += R[i].pooled && R[i].st == NULL && R[i].detached && !R[i].refused;
    if (n == 0)
        return;
    size_t k = a % n;
    struct req *r = NULL;
    for (size_t i = 0; i < nreq && r == NULL; i++)
        if (R[i].pooled && R[i].st == NULL && R[i].detached && !R[i].refused && k-- == 0)
            r = &R[i];
    if (r == NULL)
        return;
    enum pool_status fst;
    const char *fwhy = NULL;
    struct pool_session *s =
        pool_session_find(r->sid, &cur_cfg()->servers[0], r->principal, true, &fst, &fwhy);
    if (s == NULL)
        return; /* 404 */
    char eid[48];
    bool honest = r->last_eid[0] != '\0' && (b & 3) < 2;
    if (r->last_eid[0] == '\0')
        stream_event_id(r->stream_id, 0, eid, sizeof eid);
    else if ((b & 3) == 2)
        stream_event_id(r->stream_id,
                        (uint64_t)strtoull(strchr(r->last_eid, '-') + 1, NULL, 10) + 1000, eid,
                        sizeof eid);
    else
        snprintf(eid, sizeof eid, "%s", (b & 3) == 3 ? ((b & 4) ? "x-1" : "") : r->last_eid);
    enum pool_status status = POOL_OK;
    struct stream *st = pool_session_resume(s, eid, &status);
    if (st == NULL) {
        /* 409 only while the client reads that stream again (a later GET took the session's
         * GET stream up), else 404 (pool_session_resume, PROTOCOL.md). */
        uint64_t named = 0, seq;
        bool read = stream_parse_event_id(eid, &named, &seq) && client_holds(r->sid, named);
        FUZZ_CHECK(status == (read ? POOL_E_CONFLICT : POOL_E_GONE),
                   "a resume of a stream %s refused with %d", read ? "the client reads" : "nobody "
                   "reads", (int)status);
        return;
    }
    FUZZ_CHECK(honest, "a pooled resume from Last-Event-ID %s was taken", eid);
    FUZZ_CHECK(stream_id(st) == r->stream_id, "a pooled resume from %s got stream %" PRIu64, eid,
               stream_id(st));
    r->st = st;
    r->detached = false;
    r->acc_len = 0; /* what was read of an event not whole comes again */
}

/*
 * SIGHUP as main.c takes it: new settings and [auth], new sessions use the new server. At most
 * SIGHUP_MAX a run: more only loads the same files again (slow, and the loader's hit counts
 * would lure the search away from the sessions).
 */
static void
session_sighup(unsigned a, unsigned b)
{
    free_retired(false);
    if (ncfg == CFG_MAX || nsighup == SIGHUP_MAX)
        return;
    nsighup++;
    cfg_b0 ^= a & 0xf8;
    cfg_b1 ^= b & 3;
    cfg_b2 ^= b & 0xfc; /* timeouts, and the per-principal limits */
    make_ini(cfg_b0, cfg_b1, cfg_b2);
    struct config *c = load_config();
    char err[256] = "";
    struct auth *next = auth_new(c, err, sizeof err);
    FUZZ_CHECK(next != NULL, "auth_new: %s", err);
    session_set_config(c);
    auth_adopt(next, A);
    auth_free(A);
    A = next;
    cfgs[ncfg++] = c;
    free_retired(false);
    principals_from(A, c);
}

static void
session_child_says(struct session *s, const char *l)
{
    if (s->u != NULL && !fake_upstream_paused(s->u))
        fake_upstream_line(s->u, l);
}

static void
session_child(unsigned op, unsigned a, unsigned b)
{
    struct session *s = pick_session(a);
    if (s == NULL || s->u == NULL)
        return;
    struct pending *e = NULL;
    if (s->r.pt.count > 0) {
        unsigned k = (a >> 2) % (unsigned)s->r.pt.count;
        for (e = s->r.pt.head; e != NULL && k > 0; e = e->next)
            k--;
    }
    uint64_t id = e != NULL ? e->gw_id : 777;
    switch (op) {
    case 0: /* an answer (a batch of two for a 2025-03-26 child) */
        if (e != NULL && e->gw_id == s->init_gw_id && (b & 7) != 7)
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"protocolVersion\":\"%s\",\"capabilities\":{\"tools\":{}},"
                     "\"serverInfo\":{\"name\":\"f\",\"version\":\"1\"}}}",
                     id, versions[(b >> 3) & 3]);
        else if ((b & 3) == 3 && session_batches(s))
            line_fmt("[{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}},"
                     "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{}}]",
                     id, e != NULL && e->next != NULL ? e->next->gw_id : 778);
        else if ((b & 3) == 2 && e != NULL && e->task)
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"result\":{\"task\":{\"taskId\":\"t%u\",\"status\":\"working\","
                     "\"ttl\":%u}}}",
                     id, (b >> 4) & 3, (b & 64) ? 3000 : 60000);
        else if (b & 1)
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64
                     ",\"error\":{\"code\":-32000,\"message\":\"failed\"}}",
                     id);
        else
            line_fmt("{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"result\":{\"content\":[]}}", id);
        break;
    case 1: /* progress with the client's own token */
        line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{"
                 "\"progressToken\":%.*s,\"progress\":1,\"message\":\"%s\"}}",
                 e != NULL && e->token != NULL ? (int)e->token_len : 3,
                 e != NULL && e->token != NULL ? e->token : "\"z\"", allow_big(b) ? big : "half");
        break;
    case 2: /* a log line, a list change, a task's status, the withdrawal of a question */
        if ((b & 6) == 2)
            line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{"
                     "\"taskId\":\"t%u\",\"status\":\"%s\"}}",
                     (b >> 3) & 3, (b & 32) ? "completed" : "working");
        else if ((b & 6) == 4)
            line_fmt("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                     "\"requestId\":\"k%u\",\"reason\":\"never mind\"}}",
                     ask_seq > ((b >> 3) & 3) ? ask_seq - ((b >> 3) & 3) : 1);
        else
            line_fmt((b & 1)
                         ? "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}"
                         : "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                           "\"params\":{\"level\":\"info\",\"data\":\"x\"}}");
        break;
    default: { /* a request to the client */
        static const char *const asks[] = { "roots/list", "elicitation/create",
                                            "sampling/createMessage", "ping" };
        line_fmt("{\"jsonrpc\":\"2.0\",\"id\":\"k%u\",\"method\":\"%s\",\"params\":{"
                 "\"message\":\"%s\"}}",
                 ++ask_seq, asks[(b >> 1) & 3], allow_big(b) ? big : "which?");
    }
    }
    session_child_says(s, line);
}

/*
 * /metrics and the admin view walk every session, stream and entry: the view is JSON that lists
 * as many sessions as are open.
 */
static void
session_scrape(void)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 20);
    session_metrics(&b, pool_session_count_of);
    buf_clear(&b);
    size_t len = 0;
    char *view = session_admin_json(&len);
    json_error_t err;
    json_t *doc = json_loadb(view, len, 0, &err);
    FUZZ_CHECK(doc != NULL, "the admin view is not JSON (%s): %.300s", err.text, view);
    json_t *list = json_object_get(doc, "sessions");
    FUZZ_CHECK(json_is_array(list) && json_array_size(list) == sessions.count,
               "the admin view lists %zu sessions, %zu are open", json_array_size(list),
               sessions.count);
    json_decref(doc);
    free(view);
}

/*
 * A session ends from outside: DELETE, the idle expiry, or the operator's POST
 * /admin/sessions/ID/end (http_admin.c calls the same session_close).
 */
static void
session_end(struct session *s, unsigned b)
{
    static const enum session_end ends[4] = { SESSION_END_EXPIRED, SESSION_END_DELETED,
                                              SESSION_END_ADMIN, SESSION_END_DELETED };
    session_close(s, ends[b & 3], NULL);
}

/* Session mode's events; false for those the pool's switch plays (reads, drops, time, spawns). */
static bool
session_event(unsigned ev, unsigned a, unsigned b)
{
    struct session *s;
    switch (ev) {
    case 0:
    case 1:
    case 2:
        if (!closed)
            session_request(a, b);
        break;
    case 3:
        session_other(a, b);
        break;
    case 7:
    case 8:
        session_child(0, a, b);
        break;
    case 9:
        session_child(1, a, b);
        break;
    case 10:
        session_child(2, a, b);
        break;
    case 11:
        session_child(3, a, b);
        break;
    case 12:
        if ((s = pick_session(a)) != NULL && !closed)
            (void)session_open(s, true);
        break;
    case 14:
        if ((s = pick_session(a)) != NULL && s->u != NULL)
            fake_upstream_gone(s->u, (b & 1) ? "child exited" : "child closed its stdout");
        break;
    case 15:
        if ((s = pick_session(a)) != NULL && s->u != NULL) {
            if (b & 2)
                fake_upstream_fail_next_write(s->u);
            else
                fake_upstream_set_full(s->u, b & 1);
        }
        break;
    case 16:
        if ((s = pick_session(a)) != NULL)
            session_end(s, b);
        break;
    case 18:
        if ((a & 3) == 0) {
            session_close_all(SESSION_END_SHUTDOWN);
            closed = true;
        } else if ((a & 3) == 1) {
            session_drain();
        } else if ((a & 3) == 2) {
            session_sweep(util_now_ms());
        } else {
            session_scrape();
        }
        break;
    case 20:
        if (!closed)
            session_sighup(a, b);
        break;
    case 21:
    case 22:
        session_batch(a, b);
        break;
    case 23: {
        /* An answer to one of the child's questions, alone on its POST. */
        if ((s = pick_session(a)) != NULL)
            session_other(a, 3 | (b << 2));
        break;
    }
    case 24:
        session_resume(a, b);
        break;
    default:
        return false;
    }
    return true;
}

/* --- invariants ------------------------------------------------------------------------------ */

/*
 * A table's index by the sender's id holds each entry once, in the chain its id hashes to, each
 * chain oldest first; a lookup of any entry's id finds what a walk of the list would (the oldest
 * waiting entry of that id and direction, else the oldest cancelled one); its counts of active
 * entries are the list's.
 */
static void
check_index(const struct pending_table *t, const char *who)
{
    FUZZ_CHECK(t->count <= t->nbucket && (t->nbucket & (t->nbucket - 1)) == 0,
               "%s: %zu entries in %zu chains", who, t->count, t->nbucket);
    size_t chained = 0;
    for (size_t i = 0; i < t->nbucket; i++)
        for (const struct pending *e = t->bucket[i]; e != NULL; e = e->hnext) {
            chained++;
            FUZZ_CHECK((e->hash & (t->nbucket - 1)) == i
                           && e->hash == util_hash(e->orig_id, e->orig_id_len),
                       "%s: an entry in another id's chain", who);
            FUZZ_CHECK(e->hnext == NULL || e->hnext->seq > e->seq, "%s: a chain out of order", who);
        }
    FUZZ_CHECK(chained == t->count, "%s: %zu entries, %zu in the index", who, t->count, chained);
    size_t active[2] = { 0, 0 };
    for (const struct pending *e = t->head; e != NULL; e = e->next)
        active[e->dir] += e->state == PENDING_FORWARDED;
    FUZZ_CHECK(pending_active(t, PENDING_TO_CHILD) == active[PENDING_TO_CHILD]
                   && pending_active(t, PENDING_TO_CLIENT) == active[PENDING_TO_CLIENT],
               "%s: the table counts %zu and %zu active, its list %zu and %zu", who,
               pending_active(t, PENDING_TO_CHILD), pending_active(t, PENDING_TO_CLIENT),
               active[PENDING_TO_CHILD], active[PENDING_TO_CLIENT]);
    for (const struct pending *e = t->head; e != NULL; e = e->next) {
        const struct pending *want = NULL;
        for (const struct pending *q = t->head; q != NULL; q = q->next)
            if (q->dir == e->dir && q->orig_id_len == e->orig_id_len
                && memcmp(q->orig_id, e->orig_id, e->orig_id_len) == 0
                && (want == NULL
                    || (want->state != PENDING_FORWARDED && q->state == PENDING_FORWARDED)))
                want = q;
        FUZZ_CHECK(pending_find_orig(t, e->dir, e->orig_id, e->orig_id_len) == want,
                   "%s: the index finds another entry for an id than the list", who);
    }
}

static bool
gateways_own(const struct pool_child *c, const struct pending *e)
{
    return e->gw_id == c->start_id || e->gw_id == c->fence_id
           || strcmp(e->method, "resources/subscribe") == 0
           || strcmp(e->method, "resources/unsubscribe") == 0;
}

/* True when call is somewhere the pool will end it from. */
static bool
reachable(const struct pool_call *call)
{
    for (struct pool *p = pools.pools; p != NULL; p = p->next) {
        for (struct pool_call *q = p->qhead; q != NULL; q = q->qnext)
            if (q == call)
                return true;
        for (struct pool_listen *l = p->listeners; l != NULL; l = l->next)
            if (l->call == call)
                return true;
        for (struct pool_child *c = p->children; c != NULL; c = c->next)
            for (struct pending *e = c->r.pt.head; e != NULL; e = e->next)
                if (e->owner == call)
                    return true;
    }
    for (struct pool_call *h = pools.held; h != NULL; h = h->hnext)
        if (h == call)
            return true;
    for (struct pool_call *d = pools.due; d != NULL; d = d->dnext)
        if (d == call)
            return true;
    return false;
}

/*
 * Session mode, child_sleep_after_s: a sleeping session holds no child and nothing the child
 * could still owe or be owed (no request in flight either way, no stream read or awaited, no
 * task, no line waiting); a waking one has its new child and its replayed initialize in flight,
 * with a timer (the wake is bounded); lines wait only while it wakes; only a session of a
 * server with the key, past its initialize, ever sleeps.
 */
static void
check_sleep(struct session *s)
{
    switch (s->nap) {
    case SESSION_ASLEEP:
        FUZZ_CHECK(s->u == NULL, "session %s: asleep with a child", s->id);
        FUZZ_CHECK(s->srv->child_sleep_after_s > 0 && s->state == SESSION_READY && !s->legacy
                       && s->init_body != NULL,
                   "session %s: asleep, but may not sleep", s->id);
        FUZZ_CHECK(pending_active(&s->r.pt, PENDING_TO_CHILD) == 0
                       && pending_active(&s->r.pt, PENDING_TO_CLIENT) == 0,
                   "session %s: asleep with requests in flight", s->id);
        FUZZ_CHECK(s->ntasks == 0 && !s->sleep_pinned, "session %s: asleep with tasks or state",
                   s->id);
        for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next)
            FUZZ_CHECK(stream_own(st)->awaiting == 0,
                       "session %s: asleep with a stream awaiting its answers", s->id);
        break;
    case SESSION_WAKING: {
        FUZZ_CHECK(s->u != NULL, "session %s: waking without a child", s->id);
        const struct pending *p = pending_find_gw(&s->r.pt, PENDING_TO_CHILD, s->init_gw_id);
        FUZZ_CHECK(p != NULL && p->state == PENDING_FORWARDED && p->timer != NULL,
                   "session %s: waking without its replayed initialize in flight, timed", s->id);
        break;
    }
    case SESSION_AWAKE:
        FUZZ_CHECK(s->wakeq.count == 0 && s->wakeq.bytes == 0,
                   "session %s: lines waiting for a child that is awake", s->id);
        break;
    }
    FUZZ_CHECK(s->nap == SESSION_WAKING || s->wakeq.count == 0,
               "session %s: lines waiting for no wake", s->id);
}

/*
 * Session mode: the session layer's own tables against each other, after the loop ran its
 * deferred calls. Timers: every one the loop holds is an in-flight entry's or a session stream's.
 */
static void
check_sessions(void)
{
    size_t count = 0, timers = 0, inflight = 0;
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext) {
            count++;
            FUZZ_CHECK(s->state != SESSION_CLOSED, "session %s: closed, still in the table", s->id);
            /* Its relay reads its child's lines for it: batches only where its revision has them. */
            FUZZ_CHECK(s->r.ops == &session_relay_ops && s->r.arg == s && !s->r.ended
                           && s->r.batches == session_batches(s),
                       "session %s: its relay is not the open session's", s->id);
            FUZZ_CHECK(session_find(s->id) == s, "session %s: not found by its id", s->id);
            check_sleep(s);
            FUZZ_CHECK(s->nap == SESSION_ASLEEP || (s->u != NULL && !fake_upstream_closed(s->u)),
                       "session %s: open without its child", s->id);
            FUZZ_CHECK(s->u == NULL ? !s->paused : s->paused == fake_upstream_paused(s->u),
                       "session %s: paused %d, its child's stdout paused %d", s->id, s->paused,
                       s->u != NULL && fake_upstream_paused(s->u));
            size_t owned = 0;
            for (size_t j = 0; j < sessions.nbuckets; j++)
                for (struct session *o = sessions.buckets[j]; o != NULL; o = o->hnext)
                    owned += o->owner == s->owner;
            FUZZ_CHECK(s->owner != NULL
                           && quota_of(QUOTA_GATEWAY, s->owner->name, QUOTA_SESSIONS) == owned,
                       "session %s: its owner counts %" PRIu64 " sessions, owns %zu", s->id,
                       s->owner != NULL ? quota_of(QUOTA_GATEWAY, s->owner->name, QUOTA_SESSIONS)
                                        : 0,
                       owned);

            /* Streams: linked both ways, the session's; a POST's awaiting is its entries. */
            bool get_listed = s->get == NULL, over = false;
            const struct stream *prev = NULL;
            for (struct stream *st = s->streams; st != NULL; st = stream_own(st)->next) {
                FUZZ_CHECK(stream_own(st)->prev == prev && stream_own(st)->owner == s,
                           "session %s: stream %" PRIu64 " badly linked", s->id, stream_id(st));
                FUZZ_CHECK(!stream_dropped(st), "session %s: dropped stream %" PRIu64 " kept",
                           s->id, stream_id(st));
                prev = st;
                get_listed |= st == s->get;
                timers += stream_own(st)->timer != NULL;
                over |= stream_own(st)->attached && !stream_ended(st) && stream_over_low_water(st);
                size_t bound = 0;
                for (const struct pending *e = s->r.pt.head; e != NULL; e = e->next)
                    bound += e->dir == PENDING_TO_CHILD && e->state == PENDING_FORWARDED
                             && e->stream_id == stream_id(st);
                if (!stream_is_get(st))
                    FUZZ_CHECK(stream_own(st)->awaiting == bound,
                               "session %s: stream %" PRIu64 " awaits %u answers, %zu in flight "
                               "on it",
                               s->id, stream_id(st), stream_own(st)->awaiting, bound);
            }
            FUZZ_CHECK(get_listed && (s->get == NULL || stream_is_get(s->get)),
                       "session %s: its GET stream is not one of its streams", s->id);
            /* A child is paused only for a stream someone reads (else it waits for ever). */
            FUZZ_CHECK(!s->paused || over,
                       "session %s: its child is paused and no stream read is over its low water",
                       s->id);

            /* In-flight entries: linked, counted, each with its owner; timers only on live ones. */
            size_t n = 0, active = 0;
            const struct pending *eprev = NULL;
            for (struct pending *e = s->r.pt.head; e != NULL; e = e->next) {
                n++;
                FUZZ_CHECK(e->prev == eprev, "session %s: entry badly linked", s->id);
                eprev = e;
                FUZZ_CHECK(e->owner == NULL, "session %s: an entry with a pool owner", s->id);
                if (e->timer != NULL) {
                    timers++;
                    FUZZ_CHECK(e->state == PENDING_FORWARDED && e->relay == &s->r,
                               "session %s: a timer on a finished %s entry", s->id, e->method);
                }
                if (e->state != PENDING_FORWARDED)
                    continue;
                const struct stream *st = session_stream_by_id(s, e->stream_id);
                if (e->dir == PENDING_TO_CHILD) {
                    active++;
                    FUZZ_CHECK(st != NULL || e->gw_id == s->init_gw_id || e->task,
                               "session %s: an in-flight %s without its stream (no owner)", s->id,
                               e->method);
                } else {
                    /* The child's question: on a stream the client can still read, or read. */
                    FUZZ_CHECK(st != NULL || client_holds(s->id, e->stream_id)
                                   || was_seen(s->id, e->gw_id),
                               "session %s: the child's %s (client id %" PRIu64 ") is on no "
                               "stream and was never read: it is waited for ever",
                               s->id, e->method, e->gw_id);
                }
            }
            FUZZ_CHECK(eprev == s->r.pt.tail && n == s->r.pt.count,
                       "session %s: table count %zu, list %zu", s->id, s->r.pt.count, n);
            check_index(&s->r.pt, s->id);
            FUZZ_CHECK(session_requests_in_flight(s) == active,
                       "session %s: %zu requests in flight, table holds %zu", s->id,
                       session_requests_in_flight(s), active);
            /* The cap counts the client's requests: a waking child's replayed initialize is
             * the gateway's own. */
            size_t own = 0;
            if (s->nap == SESSION_WAKING) {
                const struct pending *ie =
                    pending_find_gw(&s->r.pt, PENDING_TO_CHILD, s->init_gw_id);
                own = ie != NULL && ie->state == PENDING_FORWARDED;
            }
            /* A session is admitted a request only under the cap of the moment: a SIGHUP that
             * lowers it leaves more in flight, a number that then never grows. */
            size_t last = 0;
            for (size_t k = 0; k < nsids; k++)
                if (strcmp(sids[k], s->id) == 0) {
                    last = sids_active[k];
                    sids_active[k] = active - own;
                }
            FUZZ_CHECK(active - own <= cur_cfg()->max_inflight_per_session || active - own <= last,
                       "session %s: %zu requests in flight past the cap of %" PRIu64
                       " (%zu before)",
                       s->id, active - own, cur_cfg()->max_inflight_per_session, last);
            inflight += session_inflight_in(s, PENDING_TO_CHILD);
            size_t ntasks = 0;
            for (const struct session_task *t = s->tasks; t != NULL; t = t->next)
                ntasks++;
            FUZZ_CHECK(ntasks == s->ntasks, "session %s: ntasks %zu, list %zu", s->id, s->ntasks,
                       ntasks);
        }
    FUZZ_CHECK(count == sessions.count, "sessions.count %zu, table %zu", sessions.count, count);
    FUZZ_CHECK(sessions.ctr.created - sessions.ctr.closed == count,
               "%" PRIu64 " sessions created, %" PRIu64 " closed, %zu open", sessions.ctr.created,
               sessions.ctr.closed, count);
    FUZZ_CHECK(session_count() == count && session_inflight(PENDING_TO_CHILD) == inflight,
               "session_count() or session_inflight() disagrees with the table");
    for (const struct session_server *row = (const struct session_server *)(void *)sessions.servers;
         row != NULL; row = METRICS_ROW_NEXT(row)) {
        size_t open = 0;
        uint64_t closed_n = 0;
        for (size_t i = 0; i < sessions.nbuckets; i++)
            for (struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext)
                open += s->stats == row;
        for (size_t w = 0; w < SESSION_END_N; w++)
            closed_n += row->closed_by[w];
        FUZZ_CHECK(row->open == open && row->created - closed_n == open,
                   "server %s: open gauge %zu, %" PRIu64 " created, %" PRIu64 " closed, %zu open",
                   row->row.name, row->open, row->created, closed_n, open);
    }
    FUZZ_CHECK(loop_timers_pending(L) == timers,
               "the loop holds %zu timers, entries and streams %zu: a timer outlived its owner",
               loop_timers_pending(L), timers);
}

/*
 * Per-principal counts (quota.h) equal what is there, in both modes, across restarts and reloads:
 * every call of every pool (current or retired; queued, at a child, held, due, listening; but a
 * pooled session's initialize, which the gateway answers from the pool's handshake) and
 * every open session and request a session forwarded counts once toward its (server, principal)
 * entry, in the kinds it is; each entry's counts are exactly those, and no entry counts anything
 * else (the totals over the table, and its number of entries).
 */
#define WHO_MAX 64
static struct who_tally {
    const struct quota *q;
    uint64_t n[QUOTA_KINDS];
} tally[WHO_MAX];
static size_t ntally;
static const struct pool_call *tallied[4 * REQ_MAX];
static size_t ntallied;

static void
tally_add(const struct quota *q, const char *server, const char *principal, enum quota_kind kind,
          uint64_t n)
{
    FUZZ_CHECK(q != NULL, "something in flight counts toward no principal (kind %d)", (int)kind);
    FUZZ_CHECK(strcmp(quota_server(q), server) == 0
                   && (principal == NULL || strcmp(quota_principal(q), principal) == 0),
               "counted toward (%s, %s), it is (%s, %s)'s", quota_server(q), quota_principal(q),
               server, principal != NULL ? principal : "?");
    size_t i = 0;
    while (i < ntally && tally[i].q != q)
        i++;
    FUZZ_CHECK(i < WHO_MAX, "more principals than the check holds");
    if (i == ntally) {
        memset(&tally[i], 0, sizeof tally[i]);
        tally[i].q = q;
        ntally++;
    }
    tally[i].n[kind] += n;
}

static void
tally_call(const struct pool_call *call)
{
    for (size_t i = 0; i < ntallied; i++)
        if (tallied[i] == call)
            return;
    FUZZ_CHECK(ntallied < ARRAY_LEN(tallied), "more calls than the check holds");
    tallied[ntallied++] = call;
    const char *server = call->pool->name;
    if (call->sess != NULL && call->init) {
        /* A pooled session's initialize: the gateway's to answer, counted toward nothing. */
        FUZZ_CHECK(call->who == NULL && !call->held_counted, "a pooled initialize is counted");
        return;
    }
    tally_add(call->who, server, call->principal,
              call->counted_listen ? QUOTA_LISTENS : QUOTA_CALLS, 1);
    FUZZ_CHECK(call->held_counted == (call->due || call->held),
               "a call %s held (due %d), its principal counts it %s", call->held ? "is" : "is not",
               call->due, call->held_counted ? "held" : "not held");
    if (call->held_counted)
        tally_add(call->who, server, NULL, QUOTA_HELD, 1);
    if (call->listen != NULL && call->listen->nuris > 0)
        tally_add(call->who, server, NULL, QUOTA_URIS, call->listen->nuris);
}

static void
check_principals(void)
{
    ntally = ntallied = 0;
    for (struct pool *p = pools.pools; p != NULL; p = p->next) {
        for (const struct pool_call *q = p->qhead; q != NULL; q = q->qnext)
            tally_call(q);
        for (const struct pool_listen *l = p->listeners; l != NULL; l = l->next)
            tally_call(l->call);
        for (const struct pool_child *c = p->children; c != NULL; c = c->next)
            for (const struct pending *e = c->r.pt.head; e != NULL; e = e->next) {
                FUZZ_CHECK(e->quota == NULL, "a pool child's entry counts toward a principal");
                if (e->owner != NULL)
                    tally_call(e->owner);
            }
    }
    for (const struct pool_call *h = pools.held; h != NULL; h = h->hnext)
        tally_call(h);
    for (const struct pool_call *d = pools.due; d != NULL; d = d->dnext)
        tally_call(d);
    size_t npooled = 0;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next) {
        npooled++;
        tally_add(s->quota, QUOTA_GATEWAY, s->principal, QUOTA_SESSIONS, 1);
        if (s->nuris > 0)
            tally_add(s->uris_quota, s->server, s->principal, QUOTA_URIS, s->nuris);
        size_t calls = 0;
        for (const struct pool_call *c = s->calls; c != NULL; c = c->snext) {
            calls++;
            FUZZ_CHECK(c->sess == s, "a pooled session's call points at another session");
        }
        FUZZ_CHECK(calls == s->ncalls, "pooled session %s: ncalls %zu, its list %zu", s->id,
                   s->ncalls, calls);
    }
    FUZZ_CHECK(npooled == pool_session_count(), "%zu pooled sessions counted, %zu listed",
               pool_session_count(), npooled);
    for (size_t i = 0; i < sessions.nbuckets; i++)
        for (const struct session *s = sessions.buckets[i]; s != NULL; s = s->hnext) {
            tally_add(s->quota, QUOTA_GATEWAY, s->owner->name, QUOTA_SESSIONS, 1);
            /* Pinned while the session lives, counts or not: an entry of the table too. */
            if (s->calls_quota != NULL)
                tally_add(s->calls_quota, s->srv->name, s->owner->name, QUOTA_CALLS, 0);
            for (const struct pending *e = s->r.pt.head; e != NULL; e = e->next) {
                bool counts = e->dir == PENDING_TO_CHILD && e->state == PENDING_FORWARDED
                              && e->gw_id != s->init_gw_id;
                if (counts)
                    tally_add(e->quota, s->srv->name, s->owner->name, QUOTA_CALLS, 1);
                else
                    FUZZ_CHECK(e->quota == NULL, "session %s: a %s %s entry still counts", s->id,
                               e->state == PENDING_FORWARDED ? "forwarded" : "cancelled",
                               e->method);
            }
        }
    uint64_t total[QUOTA_KINDS] = { 0 };
    for (size_t i = 0; i < ntally; i++)
        for (int k = 0; k < QUOTA_KINDS; k++) {
            FUZZ_CHECK(quota_count(tally[i].q, (enum quota_kind)k) == tally[i].n[k],
                       "(%s, %s) counts %" PRIu64 " of kind %d, %" PRIu64 " are there",
                       quota_server(tally[i].q), quota_principal(tally[i].q),
                       quota_count(tally[i].q, (enum quota_kind)k), k, tally[i].n[k]);
            total[k] += tally[i].n[k];
        }
    for (int k = 0; k < QUOTA_KINDS; k++)
        FUZZ_CHECK(quota_total((enum quota_kind)k) == total[k],
                   "the table counts %" PRIu64 " of kind %d, %" PRIu64 " are there",
                   quota_total((enum quota_kind)k), k, total[k]);
    FUZZ_CHECK(quota_entries() == ntally,
               "the table has %zu entries, %zu principals hold anything or a session pins them",
               quota_entries(), ntally);
}

/*
 * Pooled sessions' tasks: each record is its session's alone (in its list once, its count the
 * list's), on the child that created it (in that live child's list once) or on none once that
 * child ended; the calls on it are its session's and go to its child, and are its references;
 * its id is the gateway's (never the child's); with its task-augmented calls waiting, the session
 * holds no more than max_inflight_per_session (a reload that lowers the cap leaves more, which
 * then never grows), and so its calls. The ids found are remembered for the client's checks.
 */
static bool
child_live(const struct pool_child *c)
{
    for (const struct pool *p = pools.pools; p != NULL; p = p->next)
        for (const struct pool_child *k = p->children; k != NULL; k = k->next)
            if (k == c)
                return true;
    return false;
}

static bool
session_live(const struct pool_session *s)
{
    for (const struct pool_session *k = pool_sessions_all(); k != NULL; k = k->next)
        if (k == s)
            return true;
    return false;
}

static void
gw_task_seen(const struct pool_task *t)
{
    for (size_t i = 0; i < ngw_tasks; i++)
        if (strcmp(gw_tasks[i].id, t->id) == 0) {
            FUZZ_CHECK(strcmp(gw_tasks[i].sid, t->sess->id) == 0,
                       "task %s is two sessions' (%.12s..., %.12s...)", t->id, gw_tasks[i].sid,
                       t->sess->id);
            return;
        }
    if (ngw_tasks == GW_TASKS_MAX)
        return;
    snprintf(gw_tasks[ngw_tasks].id, sizeof gw_tasks[0].id, "%s", t->id);
    snprintf(gw_tasks[ngw_tasks++].sid, sizeof gw_tasks[0].sid, "%s", t->sess->id);
}

static void
check_pooled_tasks(void)
{
    size_t cap = pools.cfg->max_inflight_per_session;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next) {
        size_t n = 0, creates = 0;
        for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext) {
            n++;
            FUZZ_CHECK(t->sess == s, "session %s lists a task of another session", s->label);
            FUZZ_CHECK(strlen(t->id) == 22 && strspn(t->id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
                                                             "mnopqrstuvwxyz0123456789-_")
                                                      == 22,
                       "task %s: not 128 bits in base64url", t->id);
            FUZZ_CHECK(strcmp(t->id, t->child_id) != 0 && strchr(t->child_id, '.') != NULL,
                       "task %s: the gateway's id is the child's (%s)", t->id, t->child_id);
            for (const struct pool_task *u = t->snext; u != NULL; u = u->snext)
                FUZZ_CHECK(u != t && strcmp(u->id, t->id) != 0, "session %s: task %s twice",
                           s->label, t->id);
            if (t->c != NULL) {
                FUZZ_CHECK(child_live(t->c), "task %s names a child that is gone", t->id);
                size_t times = 0;
                for (const struct pool_task *u = t->c->tasks; u != NULL; u = u->cnext)
                    times += u == t;
                FUZZ_CHECK(times == 1, "task %s is %zu times in its child's list", t->id, times);
            }
            unsigned refs = 0;
            for (const struct pool_call *call = s->calls; call != NULL; call = call->snext)
                refs += call->task == t;
            FUZZ_CHECK(refs == t->refs, "task %s: %u references, %u calls on it", t->id, t->refs,
                       refs);
            gw_task_seen(t);
        }
        FUZZ_CHECK(n == s->ntasks, "session %s: ntasks %zu, its list %zu", s->label, s->ntasks, n);
        for (const struct pool_call *call = s->calls; call != NULL; call = call->snext) {
            creates += call->task_op == POOL_TASK_CREATE;
            if (call->task_op == POOL_TASK_CREATE)
                FUZZ_CHECK(call->task == NULL, "a task-augmented call points at a task");
            if (call->task == NULL)
                continue;
            FUZZ_CHECK(call->task->sess == s, "session %s: a call on another session's task",
                       s->label);
            FUZZ_CHECK(call->task_op >= POOL_TASK_GET && call->task_op <= POOL_TASK_CANCEL,
                       "a call on a task is no tasks/ request (%u)", call->task_op);
            FUZZ_CHECK(call->c == NULL || call->task->c == NULL || call->c == call->task->c,
                       "task %s's %s went to %s, not to its child %s", call->task->id,
                       call->p != NULL ? call->p->method : "request", call->c->tag,
                       call->task->c->tag);
        }
        for (size_t i = 0; i < npsess; i++) {
            if (strcmp(psess[i].sid, s->id) != 0)
                continue;
            FUZZ_CHECK(n + creates <= cap || n + creates <= psess[i].last_tasks,
                       "session %s: %zu tasks and %zu task calls, max_inflight_per_session %zu",
                       s->label, n, creates, cap);
            FUZZ_CHECK(s->ncalls <= cap || s->ncalls <= psess[i].last_calls,
                       "session %s: %zu calls, max_inflight_per_session %zu", s->label, s->ncalls,
                       cap);
            psess[i].last_tasks = n + creates;
            psess[i].last_calls = s->ncalls;
        }
    }
    for (const struct pool *p = pools.pools; p != NULL; p = p->next)
        for (const struct pool_child *c = p->children; c != NULL; c = c->next)
            for (const struct pool_task *t = c->tasks; t != NULL; t = t->cnext) {
                FUZZ_CHECK(t->c == c, "%s lists a task of another child", c->tag);
                FUZZ_CHECK(t->cprev == NULL ? c->tasks == t : t->cprev->cnext == t,
                           "%s: its task list's links disagree", c->tag);
                FUZZ_CHECK(session_live(t->sess), "%s holds task %s of a session that is gone",
                           c->tag, t->id);
                size_t times = 0;
                for (const struct pool_task *u = t->sess->tasks; u != NULL; u = u->snext)
                    times += u == t;
                FUZZ_CHECK(times == 1, "%s: task %s is %zu times in its session's list", c->tag,
                           t->id, times);
            }
}

/*
 * A session's end (DELETE, expiry, the operator, shutdown) cancels each of its tasks not yet
 * terminal at the child running it: the live ones are noted before each event, and one whose
 * session ended in it, on a child still ready, must have had a tasks/cancel with its child id
 * sent (pool_task_session_end) since.
 */
#define LIVE_TASKS_MAX 32
static struct {
    char id[24];
    char raw[160];
    const struct upstream *u;
    size_t sent;
} live_tasks[LIVE_TASKS_MAX];
static size_t nlive_tasks;

static void
tasks_note(void)
{
    nlive_tasks = 0;
    if (sessions_mode)
        return;
    for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next)
        for (const struct pool_task *t = s->tasks; t != NULL; t = t->snext) {
            if (t->terminal || t->c == NULL || t->c->state != POOL_CHILD_READY || t->c->u == NULL
                || !upstream_writable(t->c->u) || upstream_queued_bytes(t->c->u) != 0
                || fake_upstream_gone_seen(t->c->u)
                || t->child_raw_len >= sizeof live_tasks[0].raw || nlive_tasks == LIVE_TASKS_MAX)
                continue;
            snprintf(live_tasks[nlive_tasks].id, sizeof live_tasks[0].id, "%s", t->id);
            snprintf(live_tasks[nlive_tasks].raw, sizeof live_tasks[0].raw, "%.*s",
                     (int)t->child_raw_len, t->child_raw);
            live_tasks[nlive_tasks].u = t->c->u;
            live_tasks[nlive_tasks++].sent = fake_upstream_sent_count(t->c->u);
        }
}

/* The ready child whose upstream u is, reading its stdin (not full: what queues waits), or NULL. */
static const struct pool_child *
ready_child_of(const struct upstream *u)
{
    for (const struct pool *p = pools.pools; p != NULL; p = p->next)
        for (const struct pool_child *c = p->children; c != NULL; c = c->next)
            if (c->u == u && c->state == POOL_CHILD_READY && !fake_upstream_gone_seen(c->u)
                && upstream_queued_bytes(c->u) == 0)
                return c;
    return NULL;
}

static void
check_task_cancels(void)
{
    for (size_t i = 0; i < nlive_tasks; i++) {
        bool held = false;
        for (const struct pool_session *s = pool_sessions_all(); s != NULL && !held; s = s->next)
            for (const struct pool_task *t = s->tasks; t != NULL && !held; t = t->snext)
                held = strcmp(t->id, live_tasks[i].id) == 0;
        if (held || ready_child_of(live_tasks[i].u) == NULL)
            continue;
        bool cancelled = false;
        size_t n = fake_upstream_sent_count(live_tasks[i].u);
        for (size_t k = live_tasks[i].sent; k < n && !cancelled; k++) {
            size_t len;
            const char *m = fake_upstream_sent(live_tasks[i].u, k, &len);
            cancelled = strstr(m, "\"method\":\"tasks/cancel\"") != NULL
                        && strstr(m, live_tasks[i].raw) != NULL;
        }
        /* Gone without its session ending: past its ttl, forgotten (the child forgets it too). */
        bool session_gone = true;
        for (const struct pool_session *s = pool_sessions_all(); s != NULL; s = s->next)
            for (size_t g = 0; g < ngw_tasks; g++)
                if (strcmp(gw_tasks[g].id, live_tasks[i].id) == 0
                    && strcmp(gw_tasks[g].sid, s->id) == 0)
                    session_gone = false;
        if (session_gone && trace)
            fprintf(stderr, "relay: task %s ended with its session: %s\n", live_tasks[i].id,
                    cancelled ? "cancelled at its child" : "NOT cancelled at its child");
        if (session_gone)
            FUZZ_CHECK(cancelled, "task %s (the child's %s) live at its session's end: no "
                       "tasks/cancel reached its child", live_tasks[i].id, live_tasks[i].raw);
    }
}

/* --- retired pools and configurations end (pool mode) ------------------------------------- */

/*
 * A pool retired by a reload or a restart, once nothing of its is in flight (pool_inflight_in: no
 * queued, forwarded or held call; a listen never ends by itself, so it does not count), is freed
 * within RETIRED_FREE_MS of the fake clock: its starting children's starts end (two of
 * pool_start_timeout_ms at most), then a sweep stops its idle children and frees it. A retired
 * configuration whose pools are all so is freed by the next tick after them. Each is tracked from
 * the first check that saw it quiet; one that is no longer there, or in flight again, is forgotten.
 */
#define RETIRED_FREE_MS 3000
#define QUIET_MAX       (CFG_MAX + 16)

static struct {
    const void *obj;
    uint64_t since_ms;
} quiet[QUIET_MAX], quiet_next[QUIET_MAX];
static size_t nquiet, nquiet_next;

/* main.c's tick: pool_sweep, then the configurations no pool uses are freed. */
static void
retired_tick(void)
{
    pool_sweep(util_now_ms());
    free_retired(false);
}

/*
 * A retired pool with nothing in flight. A child that runs a pooled session's live task is not
 * stopped (the task would die with it): its pool waits for the task's end, its ttl, or its
 * session's end, which cancels it.
 */
static bool
pool_quiet(const struct pool *p)
{
    if (!p->retired || pool_inflight_in(p) != 0)
        return false;
    for (const struct pool_child *c = p->children; c != NULL; c = c->next)
        if (pool_task_child_busy(c))
            return false;
    return true;
}

/* obj is quiet now: how long it has been (it is kept in the next table). */
static uint64_t
quiet_for(const void *obj, uint64_t now)
{
    uint64_t since = now;
    for (size_t i = 0; i < nquiet; i++)
        if (quiet[i].obj == obj)
            since = quiet[i].since_ms;
    if (nquiet_next < QUIET_MAX) {
        quiet_next[nquiet_next].obj = obj;
        quiet_next[nquiet_next++].since_ms = since;
    }
    return now - since;
}

static void
check_retired(void)
{
    if (sessions_mode)
        return;
    uint64_t now = util_now_ms();
    nquiet_next = 0;
    for (const struct pool *p = pools.pools; p != NULL; p = p->next)
        if (pool_quiet(p)) {
            uint64_t ms = quiet_for(p, now);
            FUZZ_CHECK(ms <= RETIRED_FREE_MS,
                       "retired pool %s: nothing in flight for %" PRIu64 " ms, and not freed "
                       "(%zu children, %zu listeners' calls, %zu starting)",
                       p->name, ms, p->n_children, (size_t)(p->listeners != NULL), p->n_starting);
        }
    for (size_t i = 0; i + 1 < ncfg; i++) {
        bool cfg_quiet = true;
        for (const struct pool *p = pools.pools; p != NULL; p = p->next)
            cfg_quiet &= p->cfg != cfgs[i] || pool_quiet(p);
        if (!cfg_quiet)
            continue;
        uint64_t ms = quiet_for(cfgs[i], now);
        FUZZ_CHECK(ms <= RETIRED_FREE_MS + 1000,
                   "a retired configuration: nothing of it in flight for %" PRIu64 " ms, and not "
                   "freed",
                   ms);
    }
    memcpy(quiet, quiet_next, nquiet_next * sizeof quiet[0]);
    nquiet = nquiet_next;
}

static void
check_all(void)
{
    size_t inflight = 0;
    FUZZ_CHECK(fake_upstream_misuse() == 0, "the pool used an upstream after closing it");
    FUZZ_CHECK(loop_deferred_pending(L) == 0, "%zu deferred calls still queued after the turns",
               loop_deferred_pending(L));
    if (sessions_mode)
        check_sessions();
    else
        check_pooled_tasks();
    check_principals();
    for (struct pool *p = pools.pools; p != NULL; p = p->next) {
        size_t queued = 0;
        for (struct pool_call *q = p->qhead; q != NULL; q = q->qnext) {
            queued++;
            FUZZ_CHECK(q->c == NULL && q->p == NULL, "a queued call has a child");
            if (q->qnext == NULL)
                FUZZ_CHECK(p->qtail == q, "the queue's tail is not its last call");
        }
        FUZZ_CHECK(queued == p->queued, "pool %s: queued %zu, its queue holds %zu", p->name,
                   p->queued, queued);
        inflight += queued;
        size_t children = 0, starting = 0, fenced = 0, full = 0;
        for (struct pool_child *c = p->children; c != NULL; c = c->next) {
            children++;
            FUZZ_CHECK(c->state != POOL_CHILD_GONE, "a gone child is still in its pool");
            /* Its relay reads its lines for it: the pool child's table, itself as the owner. */
            FUZZ_CHECK(c->r.ops == &pool_relay_ops && c->r.arg == c && !c->r.ended
                           && c->r.minted_tokens && !c->r.batches,
                       "%s: its relay is not the live pool child's", c->tag);
            starting += c->state == POOL_CHILD_STARTING;
            bool start_seen = c->start_id == 0, fence_seen = c->fence_id == 0;
            check_index(&c->r.pt, c->tag);
            for (struct pending *e = c->r.pt.head; e != NULL; e = e->next) {
                struct pool_call *call = e->owner;
                start_seen |= e->gw_id == c->start_id;
                fence_seen |= e->gw_id == c->fence_id;
                if (call != NULL) {
                    FUZZ_CHECK(call->p == e && call->c == c,
                               "an entry's call points at another entry or child");
                    FUZZ_CHECK(e->state == PENDING_FORWARDED, "a cancelled entry has an owner");
                } else if (e->state == PENDING_FORWARDED) {
                    FUZZ_CHECK(gateways_own(c, e), "an in-flight %s entry without an owner",
                               e->method);
                }
                if (e->state == PENDING_FORWARDED && e->dir == PENDING_TO_CHILD
                    && e->gw_id != c->start_id && e->gw_id != c->fence_id
                    && strcmp(e->method, "subscriptions/listen") != 0)
                    inflight++;
            }
            FUZZ_CHECK(start_seen, "start_id names no entry");
            FUZZ_CHECK(fence_seen, "fence_id names no entry");
            /* A pool child is shared: it is never paused for one slow reader. */
            if (!skipping(SKIP_PAUSED))
                FUZZ_CHECK(c->u == NULL || !fake_upstream_paused(c->u), "%s is paused", c->tag);
            /*
             * A fenced child takes no request until its ping comes back: with no ping out (and
             * none that can be sent: its end is not on its way, it is still here) it never does.
             */
            if (c->state == POOL_CHILD_READY && pool_bridge_unfenced(c))
                FUZZ_CHECK(c->fence_id != 0,
                           "%s is fenced with no ping out: it takes no request "
                           "again",
                           c->tag);
            fenced += c->state == POOL_CHILD_READY && pool_bridge_unfenced(c) && c->fence_id != 0;
            if (c->state == POOL_CHILD_READY && !pool_bridge_unfenced(c) && c->u != NULL
                && upstream_writable(c->u)) {
                size_t cap = pool_bridge_leased(c) ? 1 : p->srv->pool_child_max_inflight;
                size_t active = pending_active(&c->r.pt, PENDING_TO_CHILD);
                full += active >= cap;
                FUZZ_CHECK(p->qhead == NULL || active >= cap,
                           "pool %s: %s has room (%zu of %zu) and %zu requests wait in the queue",
                           p->name, c->tag, active, cap, p->queued);
            }
        }
        /* The gateway's listen and discover are held at live children of the pool's. */
        for (size_t w = 0; w < 2; w++) {
            const struct pool_child *held = w == 0 ? p->gl_child : p->gl_asking;
            bool found = held == NULL;
            for (const struct pool_child *c = p->children; c != NULL && !found; c = c->next)
                found = c == held;
            FUZZ_CHECK(found, "pool %s: the gateway's %s is held at a child not in the pool",
                       p->name, w == 0 ? "listen" : "discover");
            FUZZ_CHECK(w == 1 || held == NULL || p->era == CONFIG_ERA_STATELESS,
                       "pool %s: a listen of the gateway's in a pool not stateless", p->name);
        }
        FUZZ_CHECK(children == p->n_children, "pool %s: n_children %zu, list %zu", p->name,
                   p->n_children, children);
        FUZZ_CHECK(starting == p->n_starting, "pool %s: n_starting %zu, list %zu", p->name,
                   p->n_starting, starting);
        bool stranded_known = p->retired || pools.draining; /* a retired or draining pool's queue */
        if (!(skipping(SKIP_QUEUE_STRANDED) && stranded_known)
            && !(skipping(SKIP_QUEUE_DRAINING) && pools.draining && !p->retired)
            && !(skipping(SKIP_QUEUE_LIVE) && !stranded_known))
            /*
             * Queued requests wait for a starting child, for a ready one's fence, or (those a
             * fence's return left over) for room on a busy one.
             */
            FUZZ_CHECK(p->qhead == NULL || p->n_starting > 0 || fenced > 0 || p->broken || full > 0,
                       "pool %s%s%s: %zu requests queued and no child starting: they wait for "
                       "ever",
                       p->name, p->retired ? " (retired)" : "", pools.draining ? " (draining)" : "",
                       p->queued);
    }
    size_t held = 0;
    for (struct pool_call *h = pools.held; h != NULL; h = h->hnext) {
        held++;
        inflight += h->p == NULL; /* its child answered while it was held: in no table */
        FUZZ_CHECK(h->held && h->st == NULL, "a call on the held list is not held");
    }
    FUZZ_CHECK(held == pools.nheld, "nheld %zu, the held list %zu", pools.nheld, held);
    FUZZ_CHECK(pool_inflight() == inflight, "pool_inflight() %zu, tables hold %zu", pool_inflight(),
               inflight);
    check_retired();
    for (size_t i = 0; i < nreq && !sessions_mode; i++) {
        const struct stream *st = R[i].st;
        if (st == NULL || stream_ended(st))
            continue;
        if (R[i].pooled && R[i].get) {
            /* A pooled session's GET stream is its session's, open while the session is. */
            enum pool_status fst;
            const char *fwhy = NULL;
            /* No room: only a record this instance holds is found, none is made. */
            FUZZ_CHECK(pool_session_find(R[i].sid, &cur_cfg()->servers[0], R[i].principal,
                                         false, &fst, &fwhy)
                           != NULL,
                       "a GET stream not ended of a pooled session that is gone");
            continue;
        }
        FUZZ_CHECK(stream_own_const(st)->owner != NULL,
                   "request %s: its stream is not ended and has no call", R[i].id);
        if (R[i].pooled && R[i].nb > 0) {
            /* A batch's stream: owned by the batch, open while a call of it is. */
            const struct pool_call *open = NULL;
            for (const struct pool_session *s = pool_sessions_all(); s != NULL && open == NULL;
                 s = s->next)
                for (const struct pool_call *call = s->calls; call != NULL; call = call->snext)
                    if ((const void *)call->batch == stream_own_const(st)->owner) {
                        open = call;
                        break;
                    }
            FUZZ_CHECK(open != NULL, "a batch's stream (of %u requests) not ended, with no call "
                       "open", R[i].nb);
            FUZZ_CHECK(reachable(open), "a batch's call is nowhere the pool looks");
            continue;
        }
        FUZZ_CHECK(reachable(stream_own_const(st)->owner),
                   "request %s: its call is nowhere the pool looks", R[i].id);
    }
}

/* --- one run --------------------------------------------------------------------------------- */

static void
run_event(unsigned op)
{
    unsigned a = next_byte(), b = next_byte();
    unsigned ev = sessions_mode ? op % SESSION_EVENTS : op % 23;
    /*
     * Where session_mode = pooled, the opcodes 230 and up (before, the first ones again) are the
     * pooled sessions' own: their resume, tasks, batches and limits (POOLED_EVENTS of them).
     */
    if (!sessions_mode && (cfg_b2 & 64) && op >= 230)
        ev = 23 + (op - 230) % POOLED_EVENTS;
    struct pool_child *c = NULL;
    if (trace)
        fprintf(stderr, "relay: event %u a=%u b=%u at %" PRIu64 " ms\n", ev, a, b,
                util_now_ms() - START_US / 1000);
    tasks_note();
    if (sessions_mode && session_event(ev, a, b)) {
        settle();
        check_all();
        return;
    }
    switch (ev) {
    case 0:
    case 1:
    case 2:
        if (!closed)
            client_request(a, b, NULL, NULL);
        break;
    case 3:
        if (!closed)
            client_retry(a, b);
        break;
    case 4:
    case 5: {
        static const size_t sizes[] = { 64, 512, 4096, 1500 };
        struct req *r = pick_req(a);
        if (r != NULL)
            client_read(r, sizes[b & 3], (b >> 2) & 15);
        break;
    }
    case 6: {
        struct req *r = pick_req(a);
        if (r != NULL)
            detach(r);
        break;
    }
    case 7:
    case 8:
        if ((c = pick_child(a)) != NULL)
            child_answer(c, a, b);
        break;
    case 9:
        if ((c = pick_child(a)) != NULL)
            child_progress(c, a >> 3, b);
        break;
    case 10:
        if ((c = pick_child(a)) != NULL)
            child_log(c, b);
        break;
    case 11:
        if ((c = pick_child(a)) != NULL)
            child_ask(c, a >> 3, b);
        break;
    case 12:
        if ((c = pick_child(a)) != NULL) {
            if (b & 1)
                child_withdraw(c, b >> 1);
            else
                child_notify(c, b >> 1);
        }
        break;
    case 13: {
        static const uint64_t steps[] = { 1, 50, 200, 600, 1100, 2500, 5200, 21000 };
        advance(steps[a & 7]);
        break;
    }
    case 14:
        if ((c = pick_child(a)) != NULL && c->u != NULL)
            fake_upstream_gone(c->u, (b & 1) ? "child exited" : "child closed its stdout");
        break;
    case 15:
        if ((c = pick_child(a)) != NULL && c->u != NULL) {
            if (b & 2)
                fake_upstream_fail_next_write(c->u);
            else
                fake_upstream_set_full(c->u, b & 1);
        }
        break;
    case 16:
        if (!closed)
            sighup(a);
        break;
    case 17:
        fake_upstream_fail_spawn(upstream_no_fds);
        break;
    case 18:
        if ((a & 3) == 0) {
            pool_close_all();
            closed = true;
        } else if ((a & 3) == 1) {
            pool_drain();
        } else if ((a & 3) == 3 && !closed) {
            (void)pool_restart(&pools.cfg->servers[0]); /* POST /admin/servers/a/restart */
        } else if (((a >> 2) & 3) == 1) {
            relay_set_drained(relay_stats_of("a"), true); /* POST /admin/servers/a/drain */
        } else if (((a >> 2) & 3) == 2) {
            relay_set_drained(relay_stats_of("a"), false); /* POST /admin/servers/a/resume */
        } else {
            pool_sweep(util_now_ms());
        }
        break;
    case 19:
        if (!closed && strstr(ini, "session_mode = pooled") != NULL)
            pooled_init(a);
        break;
    case 20:
        if (!closed)
            pooled_request(a, b);
        break;
    case 21:
        if (!closed)
            pooled_other(a, b);
        break;
    case 22:
        if (!closed)
            pooled_forged(a, b);
        break;
    case 23:
        pooled_resume(a, b);
        break;
    case 24:
        if (!closed)
            pooled_task_call(a, b);
        break;
    case 25:
        if (!closed)
            pooled_task_ask(a, b);
        break;
    case 26:
    case 31:
        if ((c = pick_child_with(a, has_task_entries)) != NULL)
            child_task_answer(c, a >> 3, b);
        break;
    case 27:
        if ((c = pick_child(a)) != NULL)
            child_task_status(c, a >> 3, b);
        break;
    case 28:
        if ((c = pick_child_with(a, has_tasks)) != NULL)
            child_task_holder(c, b);
        break;
    case 29:
        if (!closed)
            pooled_batch(a, b);
        break;
    case 30:
        if (!closed)
            pooled_reload(a);
        break;
    default:
        advance(1 + (a & 63));
        break;
    }
    settle();
    check_all();
    check_task_cancels();
}

/* The end: shutdown, every stream read to its end, time far ahead; everything answered. */
static void
finish(void)
{
    tasks_note();
    if (sessions_mode)
        session_close_all(SESSION_END_SHUTDOWN);
    else
        pool_close_all();
    closed = true;
    settle();
    check_all();
    check_task_cancels();
    for (size_t i = 0; i < nreq; i++) {
        struct req *r = &R[i];
        if (r->st != NULL)
            client_read(r, 4096, 0);
        if (r->st != NULL) {
            FUZZ_CHECK(stream_ended(r->st), "request %s: its stream did not end at shutdown",
                       r->id);
            detach(r);
        }
    }
    advance(25000); /* past every timeout: a timer left on freed memory fires */
    FUZZ_CHECK(pool_inflight() == 0, "%zu requests in flight after shutdown", pool_inflight());
    if (sessions_mode) {
        FUZZ_CHECK(sessions.count == 0 && sessions.graveyard == NULL,
                   "%zu sessions left after shutdown", sessions.count);
        FUZZ_CHECK(loop_timers_pending(L) == 0 && loop_deferred_pending(L) == 0,
                   "%zu timers and %zu deferred calls left after shutdown", loop_timers_pending(L),
                   loop_deferred_pending(L));
    }
    FUZZ_CHECK(quota_entries() == 0, "%zu principals still count something after shutdown",
               quota_entries());
    FUZZ_CHECK(pools.nheld == 0 && pools.held == NULL, "held calls after shutdown");
    FUZZ_CHECK(pool_session_count() == 0 && pool_sessions_all() == NULL,
               "%zu pooled sessions after shutdown", pool_session_count());
    for (struct pool *p = pools.pools; p != NULL; p = p->next)
        FUZZ_CHECK(p->children == NULL && p->qhead == NULL && p->listeners == NULL,
                   "pool %s not empty after shutdown", p->name);
    struct pool_counters total = pool_counters_total();
    if (trace)
        fprintf(stderr,
                "relay: %zu requests: %" PRIu64 " to the pool, %" PRIu64 " answered, %" PRIu64
                " rounds, %" PRIu64 " refused states, %" PRIu64 " children\n",
                nreq, total.requests, total.answered, total.rounds, total.states_refused,
                total.spawned);
    pool_module_free();
    if (sessions_mode) {
        session_reap();
        session_module_free();
        relay_module_free(); /* the server's start failures, for the next run */
        auth_principal_unref(P);
        auth_principal_unref(Q);
        auth_free(A);
        auth_module_free();
        P = Q = NULL;
        A = NULL;
    }
    settle();
    loop_free(L);
    L = NULL;
    FUZZ_CHECK(fake_upstream_misuse() == 0, "the pool used an upstream after closing it");
    fake_upstream_free_all();
    free_retired(true);
    for (size_t i = 0; i < ncfg; i++) {
        config_clear(cfgs[i]);
        free(cfgs[i]);
    }
    ncfg = 0;
    for (size_t i = 0; i < nreq; i++)
        free(R[i].acc);
    nreq = 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in = data;
    in_len = size;
    in_pos = 0;
    relay_now_us = START_US;
    closed = false;
    nreq = 0;
    npsess = 0;
    ngw_tasks = 0;
    child_task_seq = 0;
    pooled_caps = 0;
    id_seq = ask_seq = 0;
    unsigned b0 = next_byte(), b1 = next_byte(), b2 = next_byte();
    cfg_b0 = b0;
    cfg_b1 = b1;
    cfg_b2 = b2;
    nseen = 0;
    nsighup = 0;
    nquiet = 0;
    make_ini(b0, b1, b2);
    L = loop_new();
    loop_set_hooks(L, NULL, after_turn, NULL);
    cfgs[0] = load_config();
    ncfg = 1;
    sessions_mode = RELAY_SESSIONS;
    nsids = 0;
    if (sessions_mode) {
        char err[256] = "";
        A = auth_new(cfgs[0], err, sizeof err);
        FUZZ_CHECK(A != NULL, "auth_new: %s", err);
        principals_from(A, cfgs[0]);
        /*
         * Nothing of the last run stays: session_module_free leaves the drain flag and the
         * counters (a process frees the module once), and a drained table would refuse every
         * session of every later run.
         */
        memset(&sessions, 0, sizeof sessions);
        session_module_init(L, cfgs[0]);
    } else {
        relay_set_drained(relay_stats_of("a"), false); /* the rows outlive a run */
        pool_module_init(L, cfgs[0]);
    }
    settle();
    check_all();
    for (unsigned n = 0; n < EVENTS_MAX && in_pos < in_len; n++)
        run_event(next_byte());
    finish();
    return 0;
}
