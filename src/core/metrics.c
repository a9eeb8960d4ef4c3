/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition and latency histograms. Writing never fails: the buffer's ceiling
 * is far above what the gateway's fixed set of series needs, and a failure there is a bug.
 */
#include "metrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "version.h"

/* Upper bounds in microseconds, and the same in seconds as the le label writes them. */
static const uint64_t metrics_le_us[METRICS_HIST_BUCKETS - 1] = {
    25,    50,     100,    250,     500,     1000,     2500,     5000,     10000,     25000,
    50000, 100000, 250000, 1000000, 2500000, 10000000, 30000000, 60000000, 120000000, 300000000,
};
static const char *const metrics_le_text[METRICS_HIST_BUCKETS - 1] = {
    "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",    "0.1",   "0.25",   "1",       "2.5",    "10",    "30",     "60",    "120",  "300",
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
metrics_per_server(struct buf *b, const struct metrics_row *rows, const char *name,
                   const char *type, const char *help, size_t off)
{
    char labels[256];
    metrics_family(b, name, type, help);
    for (const struct metrics_row *r = rows; r != NULL; r = r->next) {
        uint64_t v;
        memcpy(&v, (const char *)r + off, sizeof(v));
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->name);
        metrics_sample(b, name, labels, v);
    }
}

void
metrics_histogram_series(struct buf *b, const char *name, const char *labels,
                         const struct metrics_hist *h)
{
    const char *sep = labels != NULL && labels[0] != '\0' ? "," : "";
    const char *l = sep[0] != '\0' ? labels : "";
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_HIST_BUCKETS - 1; i++) {
        cum += h->bucket[i];
        metrics_put(b, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, l, sep, metrics_le_text[i],
                    cum);
    }
    metrics_put(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l, sep, h->count);
    if (sep[0] != '\0') {
        metrics_put(b, "%s_sum{%s} %" PRIu64 ".%06" PRIu64 "\n", name, l, h->sum_us / 1000000,
                    h->sum_us % 1000000);
        metrics_put(b, "%s_count{%s} %" PRIu64 "\n", name, l, h->count);
    } else {
        metrics_put(b, "%s_sum %" PRIu64 ".%06" PRIu64 "\n", name, h->sum_us / 1000000,
                    h->sum_us % 1000000);
        metrics_put(b, "%s_count %" PRIu64 "\n", name, h->count);
    }
}

void
metrics_histogram(struct buf *b, const char *name, const char *help, const struct metrics_hist *h)
{
    metrics_family(b, name, "histogram", help);
    metrics_histogram_series(b, name, NULL, h);
}

/* --- the process ------------------------------------------------------------------------------ */

static struct {
    bool failed;         /* the last reload was refused */
    bool reloaded;       /* a reload succeeded: success_at holds when */
    uint64_t success_at; /* seconds since the epoch */
} metrics_reload;

void
metrics_reload_result(bool ok)
{
    metrics_reload.failed = !ok;
    if (ok) {
        metrics_reload.reloaded = true;
        metrics_reload.success_at = (uint64_t)time(NULL);
    }
}

uint64_t
metrics_resident_bytes(pid_t pid)
{
    char path[64], text[128];
    if (pid > 0)
        snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    else
        snprintf(path, sizeof(path), "/proc/self/statm");
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fgets(text, sizeof(text), f) != NULL ? sscanf(text, "%llu %llu", &size, &resident) : 0;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

/* utime + stime and starttime of /proc/self/stat, in clock ticks; false when unreadable. */
static bool
metrics_self_stat(unsigned long long *cpu_ticks, unsigned long long *start_ticks)
{
    char text[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (f == NULL)
        return false;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long ut = 0, st = 0, start = 0;
    /* After ") ": state (3), then fields 4..13 skipped, utime (14), stime (15), 16..21, starttime.
     */
    if (p == NULL
        || sscanf(p + 1,
                  " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                  "%*d %llu",
                  &ut, &st, &start)
               != 3)
        return false;
    *cpu_ticks = ut + st;
    *start_ticks = start;
    return true;
}

/* The boot time (btime of /proc/stat), seconds since the epoch; 0 when unreadable. */
static uint64_t
metrics_boot_time(void)
{
    char line[256];
    unsigned long long btime = 0;
    FILE *f = fopen("/proc/stat", "re");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    return btime;
}

/* Entries of /proc/self/fd (the directory's own descriptor left out). */
static uint64_t
metrics_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return 0;
    uint64_t n = 0;
    for (const struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0;
}

void
metrics_process(struct buf *b)
{
    metrics_family(b, "mcpgw_build_info", "gauge", "Always 1; the gateway's version as a label.");
    metrics_sample(b, "mcpgw_build_info", "version=\"" MCPGW_VERSION "\"", 1);
    long hz = sysconf(_SC_CLK_TCK);
    unsigned long long cpu = 0, start = 0;
    bool stat_ok = metrics_self_stat(&cpu, &start) && hz > 0;
    uint64_t started = stat_ok ? metrics_boot_time() + start / (unsigned long long)hz : 0;
    metrics_family(b, "process_cpu_seconds_total", "counter", "User and system CPU time spent.");
    metrics_put(b, "process_cpu_seconds_total %.2f\n", stat_ok ? (double)cpu / (double)hz : 0.0);
    metrics_family(b, "process_resident_memory_bytes", "gauge", "Resident memory size.");
    metrics_sample(b, "process_resident_memory_bytes", NULL, metrics_resident_bytes(0));
    metrics_family(b, "process_open_fds", "gauge", "Open file descriptors.");
    metrics_sample(b, "process_open_fds", NULL, metrics_open_fds());
    metrics_family(b, "process_start_time_seconds", "gauge",
                   "Start time of the process since the epoch.");
    metrics_sample(b, "process_start_time_seconds", NULL, started);
    metrics_family(b, "mcpgw_config_last_reload_successful", "gauge",
                   "0 when the last SIGHUP's configuration was refused (the running one stayed).");
    metrics_sample(b, "mcpgw_config_last_reload_successful", NULL, !metrics_reload.failed);
    metrics_family(b, "mcpgw_config_last_reload_success_timestamp_seconds", "gauge",
                   "When the configuration was last loaded (the start, or a SIGHUP), since the "
                   "epoch.");
    metrics_sample(b, "mcpgw_config_last_reload_success_timestamp_seconds", NULL,
                   metrics_reload.reloaded ? metrics_reload.success_at : started);
}

void *
metrics_row_of(struct metrics_row **rows, const char *name, size_t size)
{
    struct metrics_row **pp = rows;
    for (; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0)
            return *pp;
    *pp = xcalloc(1, size);
    (*pp)->name = xstrdup(name);
    return *pp;
}

void
metrics_rows_free(struct metrics_row **rows)
{
    while (*rows != NULL) {
        struct metrics_row *next = (*rows)->next;
        free((*rows)->name);
        free(*rows);
        *rows = next;
    }
}
