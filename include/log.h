/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_LOG_H
#define MCPGW_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN,
    LOG_INFO,
    LOG_DEBUG,
};

enum log_format {
    LOG_FORMAT_TEXT = 0, /* "ts level [session=ID ]msg" */
    LOG_FORMAT_JSON,     /* {"ts":..,"level":..[,"session":ID],"msg":..}, one per line */
    LOG_FORMAT_JOURNAL,  /* "<prio>[session=ID ]msg": journald reads the level, adds the time;
                          * on the journal's stream, its native protocol with fields (log.c) */
};

/* Bytes in a line, newline included; a longer one is cut and ends with LOG_CUT_MARK. */
#define LOG_LINE_MAX 4096
#define LOG_CUT_MARK "\xe2\x80\xa6[truncated]" /* "…[truncated]" */

/*
 * One line per event on stderr (or the log file), in the format given, written with one write(2).
 * The session id and the formatted message are escaped (text, journal: \\, \n, \r, \t, \xNN; JSON:
 * string escapes), so whatever a peer put in them stays inside its field of one line (log.c has the
 * rules).
 */
void log_init(enum log_level level, enum log_format format);
/*
 * Lines go to path from now on ([gateway] log_file: appended to, created 0640 less the umask);
 * NULL or "": stderr again. A log file is a regular file named by its own path: a symbolic link
 * as its last component, a FIFO, a socket or a device is refused. -1 with *why (static text) when
 * path cannot be opened or is refused: lines stay where they were.
 */
int log_set_file(const char *path, const char **why);
/* The log file's path; NULL while lines go to stderr. */
const char *log_file(void);
/*
 * Opens the log file and the access_log file again at their paths, for rotation (the old ones
 * were renamed), as log_set_file does: 0, or -1 when one failed, with its *log_why or
 * *access_why set (the other NULL), and its lines stay in the file already open. Nothing to do
 * (0) without either.
 */
int log_reopen(const char **log_why, const char **access_why);
/* The access_log file's path; NULL without one. */
const char *log_access_file(void);
void log_set_level(enum log_level level);

/* A request id: 1..64 of [A-Za-z0-9._:-] (http.c checks or mints it). */
#define LOG_REQUEST_ID_MAX 64
/*
 * The request whose callbacks run now: until it is set to NULL again every line ends with
 * " request_id=ID" (text, journal), or carries "request_id" (JSON). rid is not copied (this runs
 * several times a request): it must stay as it is until the next call.
 */
void log_set_request(const char *rid);

/* [gateway] access_log: off; "" (the main log, at info); or a file of its own. */
enum log_access_mode {
    LOG_ACCESS_MAIN = 0,
    LOG_ACCESS_OFF,
    LOG_ACCESS_FILE,
};
/*
 * Access lines go to path (appended, created 0640 less the umask; log_reopen reopens it too);
 * NULL or "": the main log, at info; "off": nowhere. format: text or json. -1 with *why when
 * path cannot be opened or is refused, as for log_set_file (lines stay where they went).
 */
int log_set_access(const char *path, enum log_format format, const char **why);
/* Whether an access line would be written (so the caller can skip building one). */
bool log_access_on(void);
/* One field of an access line: value NULL (text "-", left out in JSON); number: unquoted. */
struct log_field {
    const char *key;
    const char *value;
    bool number;
};
/*
 * One access line: "TS access k=v k=v..." (values escaped as a session id is: a space is \x20)
 * or {"ts":..,"type":"access","k":"v",..}; one write(2).
 */
void log_access(const struct log_field *f, size_t n);
/*
 * log_msg with fields: in JSON each non-NULL one is a member of the line ("server", "child",
 * "principal", "reason"...), values escaped, at most 200 bytes each; text and journal lines are
 * the message alone, which says the same in words.
 */
void log_fields(enum log_level level, const char *sid, const struct log_field *f, size_t nf,
                const char *fmt, ...) PRINTF(5, 6);
bool log_enabled(enum log_level level);

/*
 * At most per_s lines a second from one source (a child's stderr, a server's refusals): whether
 * one more may be logged now. *dropped_before is what the last second dropped, said once as its
 * second ends (0 otherwise), for the caller to log before the line.
 */
struct log_rate {
    uint64_t window_ms;
    unsigned lines, dropped;
};
bool log_rate_take(struct log_rate *r, unsigned per_s, unsigned *dropped_before);
/* "error", "warn", "info", "debug" -> level; -1 when unknown. */
int log_level_parse(const char *s);

/*
 * sid may be NULL. Message bodies only at LOG_DEBUG; never tokens. A %s argument ends at its
 * first NUL; the message is at most 4095 bytes before escaping.
 */
void log_msg(enum log_level level, const char *sid, const char *fmt, ...) PRINTF(3, 4);

#define log_error(sid, ...) log_msg(LOG_ERROR, sid, __VA_ARGS__)
#define log_warn(sid, ...)  log_msg(LOG_WARN, sid, __VA_ARGS__)
#define log_info(sid, ...)  log_msg(LOG_INFO, sid, __VA_ARGS__)
#define log_debug(sid, ...)                       \
    do {                                          \
        if (log_enabled(LOG_DEBUG))               \
            log_msg(LOG_DEBUG, sid, __VA_ARGS__); \
    } while (0)

/*
 * A line that may repeat (a failing server's): written at most once per every_ms; the next one
 * written says how many were held back. log_limit_note gives NULL while the line is held back,
 * else note (size bytes): "" or " (N more like this in the last M s)", to append to the line.
 */
struct log_limit {
    uint64_t last_ms; /* when the line was last written; 0: never */
    uint64_t held;    /* lines held back since */
};
const char *log_limit_note(struct log_limit *ll, uint64_t now_ms, uint64_t every_ms, char *note,
                           size_t size);

NORETURN void fatal(const char *fmt, ...) PRINTF(1, 2); /* appends strerror(errno) */
NORETURN void fatalx(const char *fmt, ...) PRINTF(1, 2);

/*
 * Opens a log file to append to (created 0640 less the umask), as log_file and audit_log are. Its
 * last component is not followed when it is a symbolic link (which could name another user's
 * file), the open does not wait (for a FIFO's reader, say), and only a regular file is taken: a
 * FIFO or a device would block the loop's writes. The fd, or -1 with *why (static text).
 */
int log_open_append(const char *path, const char **why);

#endif
