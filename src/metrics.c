/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition and latency histograms. Writing never fails: the buffer's ceiling
 * is far above what the gateway's fixed set of series needs, and a failure there is a bug.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* Upper bounds in microseconds, and the same in seconds as the le label writes them. */
static const uint64_t metrics_le_us[METRICS_HIST_BUCKETS - 1] = {
    25,    50,    100,   250,    500,    1000,    2500,    5000,
    10000, 25000, 50000, 100000, 250000, 1000000, 2500000, 10000000,
};
static const char *const metrics_le_text[METRICS_HIST_BUCKETS - 1] = {
    "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
    "0.01",    "0.025", "0.05",   "0.1",     "0.25",   "1",     "2.5",    "10",
};

void
metrics_observe(struct metrics_hist *h, uint64_t us)
{
    size_t i = 0;
    while (i < METRICS_HIST_BUCKETS - 1 && us > metrics_le_us[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_us += us;
}

static void PRINTF(2, 3) metrics_put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    if (rc == -1)
        fatalx("metrics: over the buffer's ceiling");
}

void
metrics_family(struct buf *b, const char *name, const char *type, const char *help)
{
    metrics_put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
metrics_sample(struct buf *b, const char *name, const char *labels, uint64_t value)
{
    if (labels != NULL && labels[0] != '\0')
        metrics_put(b, "%s{%s} %" PRIu64 "\n", name, labels, value);
    else
        metrics_put(b, "%s %" PRIu64 "\n", name, value);
}

void
metrics_histogram(struct buf *b, const char *name, const char *help, const struct metrics_hist *h)
{
    metrics_family(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_HIST_BUCKETS - 1; i++) {
        cum += h->bucket[i];
        metrics_put(b, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, metrics_le_text[i], cum);
    }
    metrics_put(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, h->count);
    metrics_put(b, "%s_sum %" PRIu64 ".%06" PRIu64 "\n", name, h->sum_us / 1000000,
                h->sum_us % 1000000);
    metrics_put(b, "%s_count %" PRIu64 "\n", name, h->count);
}
