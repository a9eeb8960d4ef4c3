/* SPDX-License-Identifier: MIT */
/*
 * metrics: histogram bucketing at and around every bound, the text exposition of families,
 * samples and histograms (cumulative buckets, +Inf equal to the count, the sum in seconds).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "metrics.h"

TestSuite(metrics, .timeout = 30);

/* The bounds in microseconds as the exposition promises them (le labels in seconds). */
static const uint64_t bounds_us[] = { 25,       50,       100,      250,       500,
                                      1000,     2500,     5000,     10000,     25000,
                                      50000,    100000,   250000,   1000000,   2500000,
                                      10000000, 30000000, 60000000, 120000000, 300000000 };

static char *
text_of(struct buf *b)
{
    char *s = malloc(buf_used(b) + 1);
    memcpy(s, buf_head(b), buf_used(b));
    s[buf_used(b)] = '\0';
    return s;
}

/* The value of the line that starts with prefix (followed by a space). */
static uint64_t
value_of(const char *text, const char *prefix)
{
    char want[160];
    snprintf(want, sizeof(want), "\n%s ", prefix);
    const char *p = strstr(text, want);
    if (p == NULL && strncmp(text, want + 1, strlen(want + 1)) == 0)
        p = text - 1;
    cr_assert_not_null(p, "no line %s in:\n%s", prefix, text);
    return strtoull(p + strlen(want), NULL, 10);
}

Test(metrics, observe_puts_a_value_in_the_first_bucket_whose_bound_it_does_not_pass)
{
    for (size_t i = 0; i < sizeof(bounds_us) / sizeof(bounds_us[0]); i++) {
        struct metrics_hist h = { 0 };
        metrics_observe(&h, bounds_us[i]);
        cr_assert_eq(h.bucket[i], 1, "value %" PRIu64 " not in bucket %zu", bounds_us[i], i);
        metrics_observe(&h, bounds_us[i] + 1);
        cr_assert_eq(h.bucket[i + 1], 1, "value %" PRIu64 " + 1 not in bucket %zu", bounds_us[i],
                     i + 1);
        cr_assert_eq(h.count, 2);
        cr_assert_eq(h.sum_us, 2 * bounds_us[i] + 1);
    }
    struct metrics_hist h = { 0 };
    metrics_observe(&h, 0);
    metrics_observe(&h, UINT64_C(1) << 40);
    cr_assert_eq(h.bucket[0], 1);
    cr_assert_eq(h.bucket[METRICS_HIST_BUCKETS - 1], 1, "past the last bound: the +Inf bucket");
}

Test(metrics, family_and_samples_in_text_format)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    metrics_family(&b, "x_total", "counter", "Things.");
    metrics_sample(&b, "x_total", NULL, 7);
    metrics_sample(&b, "x_total", "reason=\"a b\"", UINT64_MAX);
    metrics_sample(&b, "x_total", "", 3);
    char *t = text_of(&b);
    cr_assert_str_eq(t, "# HELP x_total Things.\n# TYPE x_total counter\nx_total 7\n"
                        "x_total{reason=\"a b\"} 18446744073709551615\nx_total 3\n");
    free(t);
    buf_clear(&b);
}

Test(metrics, histogram_is_cumulative_with_inf_equal_to_count_and_sum_in_seconds)
{
    struct metrics_hist h = { 0 };
    uint64_t values[] = { 10, 30, 30, 700, 1500000, 20000000 };
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        metrics_observe(&h, values[i]);
    struct buf b;
    buf_init(&b, 1 << 20);
    metrics_histogram(&b, "lat_seconds", "Latency.", &h);
    char *t = text_of(&b);
    cr_assert(strncmp(t, "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n", 57) == 0,
              "%s", t);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"2.5e-05\"}"), 1);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"5e-05\"}"), 3);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"0.0005\"}"), 3);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"0.001\"}"), 4);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"1\"}"), 4);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"2.5\"}"), 5);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"10\"}"), 5);
    cr_assert_eq(value_of(t, "lat_seconds_bucket{le=\"+Inf\"}"), 6);
    cr_assert_eq(value_of(t, "lat_seconds_count"), 6);
    cr_assert_not_null(strstr(t, "\nlat_seconds_sum 21.500770\n"), "%s", t);
    /* Every bucket line, in order, never decreasing. */
    uint64_t last = 0;
    size_t lines = 0;
    for (const char *p = strstr(t, "lat_seconds_bucket"); p != NULL;
         p = strstr(p + 1, "lat_seconds_bucket")) {
        uint64_t v = strtoull(strchr(p, ' ') + 1, NULL, 10);
        cr_assert_geq(v, last);
        last = v;
        lines++;
    }
    cr_assert_eq(lines, METRICS_HIST_BUCKETS);
    free(t);
    buf_clear(&b);
}

Test(metrics, a_labelled_histogram_series_goes_to_300_s_with_its_labels_on_every_line)
{
    struct metrics_hist h = { 0 };
    metrics_observe(&h, 200000000); /* 200 s: a long tool call */
    metrics_observe(&h, 400000000); /* past the last bound */
    struct buf b;
    buf_init(&b, 1 << 20);
    metrics_histogram_series(&b, "d_seconds", "server=\"a\"", &h);
    char *t = text_of(&b);
    cr_assert_eq(value_of(t, "d_seconds_bucket{server=\"a\",le=\"120\"}"), 0, "%s", t);
    cr_assert_eq(value_of(t, "d_seconds_bucket{server=\"a\",le=\"300\"}"), 1, "%s", t);
    cr_assert_eq(value_of(t, "d_seconds_bucket{server=\"a\",le=\"+Inf\"}"), 2);
    cr_assert_eq(value_of(t, "d_seconds_count{server=\"a\"}"), 2);
    cr_assert_not_null(strstr(t, "\nd_seconds_sum{server=\"a\"} 600.000000\n"), "%s", t);
    free(t);
    buf_clear(&b);
}

Test(metrics, the_process_series_and_the_reload_outcome)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    metrics_process(&b);
    char *t = text_of(&b);
    cr_assert_not_null(strstr(t, "\nmcpgw_build_info{version=\""), "%s", t);
    cr_assert_gt(value_of(t, "process_resident_memory_bytes"), 0);
    cr_assert_gt(value_of(t, "process_open_fds"), 2, "stdin, stdout, stderr at least");
    uint64_t started = value_of(t, "process_start_time_seconds");
    cr_assert_gt(started, 1500000000, "since the epoch: %" PRIu64, started);
    cr_assert_eq(value_of(t, "mcpgw_config_last_reload_successful"), 1);
    cr_assert_eq(value_of(t, "mcpgw_config_last_reload_success_timestamp_seconds"), started,
                 "the start until a reload");
    free(t);
    buf_clear(&b);
    metrics_reload_result(false);
    metrics_process(&b);
    t = text_of(&b);
    cr_assert_eq(value_of(t, "mcpgw_config_last_reload_successful"), 0);
    cr_assert_eq(value_of(t, "mcpgw_config_last_reload_success_timestamp_seconds"), started);
    free(t);
    buf_clear(&b);
    metrics_reload_result(true);
    metrics_process(&b);
    t = text_of(&b);
    cr_assert_eq(value_of(t, "mcpgw_config_last_reload_successful"), 1);
    cr_assert_geq(value_of(t, "mcpgw_config_last_reload_success_timestamp_seconds"), started);
    free(t);
    buf_clear(&b);
}
