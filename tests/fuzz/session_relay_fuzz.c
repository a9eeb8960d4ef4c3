/* SPDX-License-Identifier: MIT */
/*
 * session_relay: relay_fuzz.c's machinery (the client's streams, a fake child, the real loop and
 * a fake clock) against the session layer (src/session/) over the relay (src/mcp/relay.c) instead
 * of the pool. The header's first byte also picks the session settings: disconnect_grace_ms (500
 * or 0), replay_buffer_bytes (64 KiB or 0), sse_close_after_ms (700 or 0), init_timeout_ms (1500
 * or 30000), max_inflight_per_session (2 or 4), child_sleep_after_s (1 or 0: the sweep puts quiet
 * children to sleep, the next request wakes them, the child's answer to the replayed initialize is
 * any of the events' versions or an error); the third byte also the per-principal limits
 * (relay_fuzz.c's principal_keys) and max_sessions_per_principal (0, 1 or 2), which a SIGHUP may
 * change. Two clients, each its own principal by its address ([auth] mode none).
 *
 * Events (an opcode byte modulo 25, then its argument bytes):
 *   client: initialize of a new session of either client (protocol 2025-06-18, 2025-03-26,
 *     2025-11-25 or 2024-11-05), a request on a new POST stream (with or without a progress token or a task),
 *     a POSTed notification (initialized, a cancel) or answer (to one of the child's questions,
 *     result or error, or a stray id), a 2025-03-26 batch as http_mcp.c takes it (requests, a
 *     reused id, cancels, initialized, answers; empty, unterminated or with an invalid element or
 *     an initialize: refused whole), a GET stream, a read through a small buffer, a drop (the
 *     disconnect grace runs), a GET with Last-Event-ID of a stream it left (the last event it
 *     read, one never sent, or one that does not parse: only the first may be taken);
 *   child: answers (the initialize's with any of those versions or an error, a result, an error,
 *     a task, a batch of two to a 2025-03-26 session), progress (small or past
 *     stream_queue_bytes), a log line, a list change, a task's status, a question (roots,
 *     elicitation, sampling, ping) and its withdrawal, its end, a full stdin, a failing write;
 *   gateway: time (timers, session_sweep every second: idle expiry, init_timeout_ms), DELETE,
 *     expiry or the operator's end of a session (session_close) while requests are in flight, SIGHUP (a new configuration and [auth] as
 *     main.c swaps them: session_set_config, auth_adopt, sessions keep their old server, a retired
 *     configuration is freed once session_uses_config is false; at most four a run), a failing
 *     spawn, drain, shutdown, a scrape (/metrics and the admin view).
 * Invariants, after every event once the loop has run its deferred calls (check_sessions):
 *   - the client's streams: at most one final answer per request, with its own id (a batch's
 *     stream: one per request of the batch), none on a GET stream, progress only with its own
 *     tokens, only valid JSON-RPC; a finished stream had all of them unless the client cancelled;
 *     a resume never replays what was read;
 *   - every session in the table is open, has its child (or sleeps, holding none, with nothing in
 *     flight either way, no stream awaited and no line waiting; or wakes, its replayed initialize in
 *     flight with its timer), is found by its id, and its relay reads its child's lines for it (the
 *     session's table of operations, batches only where its revision has them, not ended, asleep
 *     or not); a paused child only while a stream the client reads is over its low water;
 *   - streams linked both ways and the session's; a POST stream's awaiting count equals the
 *     in-flight entries bound to it;
 *   - every in-flight entry has its owner: a request's stream is the session's (else it is the
 *     initialize or a task); a child's question is on a stream the client can still read, or the
 *     client read it (else the child waits for ever); a timer only on an entry still in flight,
 *     of its own relay, and the loop holds no timer but entries' and streams';
 *   - gauges equal table sizes: sessions.count, session_count(), created - closed, each server's
 *     open gauge, the owner's session count, the table's count, session_requests_in_flight,
 *     session_inflight, ntasks; no session over its in-flight cap;
 *   - per-principal counts (quota.h) equal what is there: each open session and each request
 *     forwarded and not yet answered or cancelled counts once toward its owner, and nothing else
 *     does; a session or request is admitted only under the current configuration's limit and
 *     refused for it only at it, across reloads;
 *   - no deferred call left queued; the upstream never used after upstream_close; the admin view
 *     is JSON listing every open session;
 *   - at the end (shutdown, every stream read, time far ahead): no session, no timer, no deferred
 *     call, no principal counts anything, and LeakSanitizer sees no leak. Each run starts from a
 *     clean session table (the drain flag and the counters of the last run do not stay).
 */
#define RELAY_SESSIONS 1
#include "relay_fuzz.c"
