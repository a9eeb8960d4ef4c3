/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_FAKE_UPSTREAM_H
#define MCPGW_FAKE_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "upstream.h"

/*
 * The test's side of the fake upstream (fake_upstream.c): it implements upstream.h without a
 * process, and these calls steer it and read what the "child" got. A fake stays readable after
 * upstream_close until fake_upstream_free_all (the real one frees itself later; the owner must not
 * touch it after close, which fake_upstream_misuse counts).
 */

/* The next upstream_spawn fails with errstr (static, e.g. upstream_no_fds). */
void fake_upstream_fail_spawn(const char *errstr);
/* The upstream spawned last; NULL before any. */
struct upstream *fake_upstream_last(void);
/* What upstream_spawn was given (copied). */
const char *fake_upstream_argv0(const struct upstream *u);
const char *fake_upstream_tag(const struct upstream *u);
/* The value of name in the environment it was started with; NULL: not set. */
const char *fake_upstream_env(const struct upstream *u, const char *name);
size_t fake_upstream_stdin_max(const struct upstream *u);

/* Messages the child read from stdin, in order: the i-th one's bytes (NUL-terminated), its length.
 */
size_t fake_upstream_sent_count(const struct upstream *u);
const char *fake_upstream_sent(const struct upstream *u, size_t i, size_t *len);

/*
 * Full: upstream_send refuses (-1) and upstream_queued_bytes is at the ceiling. Control messages
 * (upstream_send_control_iov) still queue behind it, up to stdin_reserve_bytes (past that the child
 * is gone, as the real one takes it as stuck), and the child reads them once it is no longer full.
 */
void fake_upstream_set_full(struct upstream *u, bool full);
size_t fake_upstream_stdin_reserve(const struct upstream *u);
/*
 * The next write fails as when the child closed its stdin: upstream_send still queues the message
 * (0) but the child never reads it; from then on sends fail and the gone report comes on a
 * deferred call ("child stopped reading its stdin").
 */
void fake_upstream_fail_next_write(struct upstream *u);
/* Whether the next write is set to fail (the child is gone with it). */
bool fake_upstream_fail_pending(const struct upstream *u);
/* The child writes line (no '\n'): line_cb gets a writable copy. false: not delivered (gone). */
bool fake_upstream_line(struct upstream *u, const char *line);
/* The child can no longer serve: gone_cb on a deferred call, unless closed first. */
void fake_upstream_gone(struct upstream *u, const char *reason);

bool fake_upstream_gone_seen(const struct upstream *u); /* gone, reported or not */
bool fake_upstream_closed(const struct upstream *u);
const char *fake_upstream_close_reason(const struct upstream *u); /* NULL while open */
bool fake_upstream_paused(const struct upstream *u);
unsigned fake_upstream_gone_calls(const struct upstream *u); /* gone_cb calls made */
unsigned fake_upstream_refused(const struct upstream *u);    /* sends refused (-1) */
/* Calls on an upstream after its upstream_close (other than upstream_close), over all fakes. */
unsigned fake_upstream_misuse(void);

/* Frees every fake: after loop_free (a pending gone report refers to its fake). */
void fake_upstream_free_all(void);

#endif
