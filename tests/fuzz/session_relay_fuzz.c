/* SPDX-License-Identifier: MIT */
/*
 * session_relay: relay_fuzz.c's script (the same client, fake child and fake clock) against the
 * session layer (src/session*.c) instead of the pool; the header's first byte also picks
 * disconnect_grace_ms and replay_buffer_bytes. Events, as relay_fuzz.c's: session_create with the
 * client's initialize, requests on POST streams, the client's notifications (initialized, a
 * cancel, a stray answer), GET streams, reads and drops, the child's answers, progress, log lines
 * and requests, its end and a full stdin, DELETE or idle expiry (session_close), shutdown and
 * drain, time. Checks: relay_fuzz.c's stream checks (one final answer with the request's own id
 * per POST stream unless the client cancelled it, none on a GET stream, only valid JSON-RPC,
 * progress with the request's own token), the upstream never used after upstream_close, ASan,
 * and no leak.
 */
#define RELAY_SESSIONS 1
#include "relay_fuzz.c"
