/* SPDX-License-Identifier: MIT */
/*
 * The child's tasks (2025-11-25): which tasks it created and has not reported terminal, so that a
 * session holding one is not expired while its client is away (tasks outlive connections).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session_int.h"

void
session_tasks_clear(struct session *s)
{
    while (s->tasks != NULL) {
        struct session_task *t = s->tasks;
        s->tasks = t->next;
        free(t);
    }
    s->ntasks = 0;
}

/* A CreateTaskResult, a tasks/get or tasks/cancel result, or notifications/tasks/status. */
void
session_task_seen(struct session *s, const char *line, size_t len)
{
    struct jsonrpc_task jt;
    if (jsonrpc_task_state(line, len, &jt) == -1)
        return;
    struct session_task **pp = &s->tasks;
    while (*pp != NULL && strcmp((*pp)->id, jt.task_id) != 0)
        pp = &(*pp)->next;
    if (jsonrpc_task_terminal(jt.status)) {
        if (*pp != NULL) {
            struct session_task *t = *pp;
            *pp = t->next;
            free(t);
            s->ntasks--;
            log_debug(s->id, "task %s is %s", jt.task_id, jt.status);
        }
        return;
    }
    if (*pp != NULL || s->ntasks >= sessions.cfg->max_inflight_per_session)
        return;
    struct session_task *t = xcalloc(1, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", jt.task_id);
    t->until_ms = jt.ttl_ms >= 0 ? util_now_ms() + (uint64_t)jt.ttl_ms : 0;
    t->next = s->tasks;
    s->tasks = t;
    s->ntasks++;
    log_debug(s->id, "task %s is %s", jt.task_id, jt.status[0] ? jt.status : "open");
}

/* Forgets tasks past their ttl; true while any other is held. */
bool
session_tasks_alive(struct session *s, uint64_t now_ms)
{
    struct session_task **pp = &s->tasks;
    while (*pp != NULL) {
        struct session_task *t = *pp;
        if (t->until_ms != 0 && now_ms >= t->until_ms) {
            *pp = t->next;
            free(t);
            s->ntasks--;
        } else {
            pp = &t->next;
        }
    }
    return s->tasks != NULL;
}
