/* SPDX-License-Identifier: MIT */
/*
 * One-line structured logs on stderr, text or JSON, with the session id as a field. Journald and
 * docker both take stderr; no syslog, no files, no rotation here.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static enum log_level log_level = LOG_INFO;
static enum log_format log_format;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

void
log_init(enum log_level level, enum log_format format)
{
    log_level = level;
    log_format = format;
}

void
log_set_level(enum log_level level)
{
    log_level = level;
}

bool
log_enabled(enum log_level level)
{
    return level <= log_level;
}

int
log_level_parse(const char *s)
{
    for (size_t i = 0; i < ARRAY_LEN(log_names); i++)
        if (strcmp(s, log_names[i]) == 0)
            return (int)i;
    return -1;
}

/* Appends s to out as the inside of a JSON string. */
static size_t
log_json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return n;
}

static void
log_emit(enum log_level level, const char *sid, const char *text)
{
    if (log_format == LOG_FORMAT_JOURNAL) {
        /* sd-daemon(3) priority prefixes: err, warning, info, debug. */
        static const int prio[] = { 3, 4, 6, 7 };
        if (sid != NULL)
            fprintf(stderr, "<%d>session=%s %s\n", prio[level], sid, text);
        else
            fprintf(stderr, "<%d>%s\n", prio[level], text);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    if (log_format == LOG_FORMAT_JSON) {
        char esc[4096];
        log_json_escape(esc, sizeof(esc), text);
        if (sid != NULL)
            fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"session\":\"%s\",\"msg\":\"%s\"}\n",
                    when, log_names[level], sid, esc);
        else
            fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when,
                    log_names[level], esc);
    } else if (sid != NULL) {
        fprintf(stderr, "%s %s session=%s %s\n", when, log_names[level], sid, text);
    } else {
        fprintf(stderr, "%s %s %s\n", when, log_names[level], text);
    }
}

void
log_msg(enum log_level level, const char *sid, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* One event, one line: a stray newline from a child's stderr must not split it. */
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    log_emit(level, sid, text);
}

void
fatal(const char *fmt, ...)
{
    int saved = errno;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    char line[1200];
    snprintf(line, sizeof(line), "%s: %s", text, strerror(saved));
    log_emit(LOG_ERROR, NULL, line);
    exit(1);
}

void
fatalx(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    log_emit(LOG_ERROR, NULL, text);
    exit(1);
}
