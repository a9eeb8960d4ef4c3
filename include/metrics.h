/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_METRICS_H
#define MCPGW_METRICS_H

#include <stdint.h>

#include "buf.h"

/*
 * Prometheus text exposition (format 0.0.4) and a fixed-bucket latency histogram. The modules keep
 * their own counters; these helpers only write them out, so the hot paths pay one increment.
 */

#define METRICS_HIST_BUCKETS 17 /* 25 us .. 10 s, then +Inf */

struct metrics_hist {
    uint64_t
        bucket[METRICS_HIST_BUCKETS]; /* not cumulative: bucket[i] counts le[i-1] < v <= le[i] */
    uint64_t count;
    uint64_t sum_us;
};

void metrics_observe(struct metrics_hist *h, uint64_t us);

/* "# HELP" and "# TYPE" lines of a family; type is "counter", "gauge" or "histogram". */
void metrics_family(struct buf *b, const char *name, const char *type, const char *help);
/* One sample; labels is NULL or the inside of the braces, e.g. "reason=\"expired\"". */
void metrics_sample(struct buf *b, const char *name, const char *labels, uint64_t value);
/* A whole histogram family in seconds (name ends in _seconds). */
void metrics_histogram(struct buf *b, const char *name, const char *help,
                       const struct metrics_hist *h);

#endif
