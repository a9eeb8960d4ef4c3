/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_METRICS_H
#define MCPGW_METRICS_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

/*
 * Prometheus text exposition (format 0.0.4) and a fixed-bucket latency histogram. The modules keep
 * their own counters; these helpers only write them out, so the hot paths pay one increment.
 */

#define METRICS_HIST_BUCKETS 21 /* 25 us .. 300 s, then +Inf */

struct metrics_hist {
    uint64_t
        bucket[METRICS_HIST_BUCKETS]; /* not cumulative: bucket[i] counts le[i-1] < v <= le[i] */
    uint64_t count;
    uint64_t sum_us;
};

void metrics_observe(struct metrics_hist *h, uint64_t us);

/*
 * Per-server rows of counters. Each layer keeps its own (sessions, children, pools, the relay),
 * for the life of the process, so that a server's series stay monotonic across reloads. A row's
 * struct begins with a struct metrics_row (its name, the next row); metrics_row_of finds the row
 * of name or appends a zeroed one of size bytes. Servers are few and a row is looked up when a
 * session or child starts, not per message: a list, in the order seen, which /metrics keeps.
 */
struct metrics_row {
    char *name;
    struct metrics_row *next;
};
void *metrics_row_of(struct metrics_row **rows, const char *name, size_t size);
void metrics_rows_free(struct metrics_row **rows);
/* The row after r, as r's own type. */
#define METRICS_ROW_NEXT(r) ((__typeof__(r))(void *)(r)->row.next)

/* "# HELP" and "# TYPE" lines of a family; type is "counter", "gauge" or "histogram". */
void metrics_family(struct buf *b, const char *name, const char *type, const char *help);
/* One sample; labels is NULL or the inside of the braces, e.g. "reason=\"expired\"". */
void metrics_sample(struct buf *b, const char *name, const char *labels, uint64_t value);
/* A family with one series per row (server="its name"): the uint64_t at off in each row. */
void metrics_per_server(struct buf *b, const struct metrics_row *rows, const char *name,
                        const char *type, const char *help, size_t off);
/* A whole histogram family in seconds (name ends in _seconds). */
void metrics_histogram(struct buf *b, const char *name, const char *help,
                       const struct metrics_hist *h);
/* The samples of one labelled series of a histogram family (labels as for metrics_sample). */
void metrics_histogram_series(struct buf *b, const char *name, const char *labels,
                              const struct metrics_hist *h);
/*
 * The gateway's own series: mcpgw_build_info, the process_* series (from /proc/self) and the last
 * reload's outcome, which the reload path records with metrics_reload_result.
 */
void metrics_process(struct buf *b);
void metrics_reload_result(bool ok);
/* Resident bytes of process pid (from /proc/PID/statm); 0 when it cannot be read. */
uint64_t metrics_resident_bytes(pid_t pid);

#endif
