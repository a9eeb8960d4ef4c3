/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_FAKE_CLOCK_H
#define MCPGW_FAKE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "loop.h"

/*
 * The fake clock of the unit tests built with -Dclock_gettime=test_clock_gettime (tests/unit/
 * meson.build, kind 'clock'): the layers' sources read time through test_clock_gettime, so only the
 * test moves it, by adding to fake_now_us. The wall clock is the monotonic one plus a fixed date.
 */
extern uint64_t fake_now_us;
int test_clock_gettime(clockid_t clk, struct timespec *ts);

/* A few turns of l: timers due by now, deferred calls and the ones they defer. */
void fake_settle(struct loop *l);

#endif
