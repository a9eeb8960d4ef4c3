/* SPDX-License-Identifier: MIT */
/* The fake clock and the loop turns of the unit tests that move time themselves (fake_clock.h). */
#include "fake_clock.h"

uint64_t fake_now_us = 1000000000;

int
test_clock_gettime(clockid_t clk, struct timespec *ts)
{
    uint64_t us = fake_now_us + (clk == CLOCK_REALTIME ? (uint64_t)1700000000 * 1000000 : 0);
    ts->tv_sec = (time_t)(us / 1000000);
    ts->tv_nsec = (long)(us % 1000000) * 1000;
    return 0;
}

static void
fake_clock_stop(void *arg)
{
    loop_stop(arg);
}

void
fake_settle(struct loop *l)
{
    for (int i = 0; i < 3; i++) {
        loop_timer_add(l, 0, fake_clock_stop, l);
        loop_run(l);
    }
}
