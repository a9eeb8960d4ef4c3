/* SPDX-License-Identifier: MIT */
/*
 * Child processes counted by server: the rows upstream.c counts in, kept for the life of the
 * process so that /metrics stays monotonic across reloads, and what /metrics says of them.
 */
#include <stddef.h>
#include <stdio.h>

#include "upstream_int.h"
#include "util.h"

static struct metrics_row *upstream_servers; /* struct upstream_server rows */

struct upstream_server *
upstream_server_of(const char *name)
{
    return metrics_row_of(&upstream_servers, name, sizeof(struct upstream_server));
}

void
upstream_server_seen(const char *server)
{
    (void)upstream_server_of(server);
}

void
upstream_metrics(struct buf *b)
{
    static const char *const statuses[] = { "exit_zero", "exit_nonzero", "signal" };
    char labels[192];
    const struct upstream_server *r;
    metrics_per_server(b, upstream_servers, "mcpgw_children_running", "gauge",
                       "Child processes not yet reaped (stopping ones included), by server.",
                       offsetof(struct upstream_server, running));
    metrics_per_server(b, upstream_servers, "mcpgw_children_spawned_total", "counter",
                       "Child processes started.", offsetof(struct upstream_server, spawned));
    metrics_per_server(b, upstream_servers, "mcpgw_children_spawn_failures_total", "counter",
                       "Child processes that could not be started.",
                       offsetof(struct upstream_server, spawn_failed));
    metrics_family(b, "mcpgw_children_exited_total", "counter",
                   "Child processes reaped, by server and how they ended.");
    for (r = (const struct upstream_server *)(void *)upstream_servers; r != NULL;
         r = METRICS_ROW_NEXT(r))
        for (size_t i = 0; i < ARRAY_LEN(statuses); i++) {
            snprintf(labels, sizeof(labels), "server=\"%s\",status=\"%s\"", r->row.name,
                     statuses[i]);
            metrics_sample(b, "mcpgw_children_exited_total", labels, r->exited[i]);
        }
    /* One read of /proc/PID/statm per child not yet reaped: bounded by the children alive. */
    metrics_family(b, "mcpgw_children_resident_memory_bytes", "gauge",
                   "Resident memory of the server's children (their own processes, not what they "
                   "started), read at the scrape.");
    for (r = (const struct upstream_server *)(void *)upstream_servers; r != NULL;
         r = METRICS_ROW_NEXT(r)) {
        uint64_t bytes = 0;
        for (const struct upstream *u = r->children; u != NULL; u = u->srv_next)
            if (u->pid > 0 && !u->exited)
                bytes += metrics_resident_bytes(u->pid);
        snprintf(labels, sizeof(labels), "server=\"%s\"", r->row.name);
        metrics_sample(b, "mcpgw_children_resident_memory_bytes", labels, bytes);
    }
    metrics_per_server(b, upstream_servers, "mcpgw_child_stdin_bytes_total", "counter",
                       "Bytes written to children, by server.",
                       offsetof(struct upstream_server, stdin_bytes));
    metrics_per_server(b, upstream_servers, "mcpgw_child_stdout_bytes_total", "counter",
                       "Bytes read from children, by server.",
                       offsetof(struct upstream_server, stdout_bytes));
}

void
upstream_module_free(void)
{
    metrics_rows_free(&upstream_servers);
}
