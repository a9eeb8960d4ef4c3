/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_JOURNAL_H
#define MCPGW_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/*
 * systemd's native journal protocol: one datagram per entry, of KEY=VALUE fields, to journald's
 * socket, so that an entry carries fields a reader can match (journalctl MCPGW_SERVER=NAME) where
 * a line on stderr carries only its priority. Bytes only: what the fields say is log.c's.
 */

/* journald's socket, unless the environment names another (tests: a receiver of their own). */
#define JOURNAL_SOCKET     "/run/systemd/journal/socket"
#define JOURNAL_SOCKET_ENV "MCPGW_JOURNAL_SOCKET"

/*
 * Whether fd is the journal's stream: JOURNAL_STREAM ("DEVICE:INODE", which systemd sets for a
 * service whose stderr or stdout it connects to the journal) names fd's device and inode. Only
 * then is the native protocol the same destination by another way.
 */
bool journal_stream_is(int fd);
/* Opens the socket entries are sent on (once; again after journal_close). 0, or -1 with errno. */
int journal_open(void);
void journal_close(void);
/*
 * A socket of the caller's own for entries (journal_send_on), apart from the log's: the audit
 * trail's, which must not depend on where the log goes. The fd, or -1 with errno.
 */
int journal_socket(void);
bool journal_is_open(void);

/* One field: key (A-Z, 0-9, _; at most 64 bytes, not starting with _) and len bytes of value. */
struct journal_field {
    const char *key;
    const char *value;
    size_t len;
};
/*
 * Sends one entry of fields f[0..n) (at most JOURNAL_FIELDS_MAX), without blocking: a value with a
 * newline goes in the protocol's binary form. 0, or -1 with errno (nothing sent: journald is not
 * there or is full), so that the caller writes the entry where it would have gone.
 */
#define JOURNAL_FIELDS_MAX 32
int journal_send(const struct journal_field *f, size_t n) MUSTCHECK;
/* The same on a socket of journal_socket(). */
int journal_send_on(int fd, const struct journal_field *f, size_t n) MUSTCHECK;

#endif
