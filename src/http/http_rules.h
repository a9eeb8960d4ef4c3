/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_HTTP_RULES_H
#define MCPGW_HTTP_RULES_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Pure header rules of the HTTP front: strings in, a verdict out. Header values may be NULL (the
 * header is absent). Case-insensitive where HTTP says so.
 */

/* Does an Accept header admit type ("text/event-stream")? Wildcards count; q-values are ignored. */
bool http_rules_accepts(const char *accept, const char *type);
/* application/json, with or without parameters. */
bool http_rules_is_json(const char *ctype);
/*
 * Host (with or without its port) is in allowed (NULL-terminated; "*" admits any). A missing Host
 * is refused.
 */
bool http_rules_host_allowed(char *const *allowed, const char *host);
/*
 * Origin is in allowed ("*" any; "http://localhost:*" that scheme and host with any numeric port).
 * A missing Origin is allowed: non-browser clients send none.
 */
bool http_rules_origin_allowed(char *const *allowed, const char *origin);
/*
 * The value an Mcp-Name, Mcp-Method or MCP-Protocol-Version header carries (2026-07-28),
 * blanks around it dropped: plain printable ASCII as is, or the "=?base64?<base64
 * of UTF-8>?=" form decoded. Into out[0..cap) with a NUL, length in *len; false when malformed,
 * holding a NUL, or too long.
 */
bool http_rules_mcp_value(const char *h, char *out, size_t cap, size_t *len);
/*
 * A browser's request that carries no Origin (a GET by <img>, <script> or a navigation from
 * another site) says where it comes from in Sec-Fetch-Site: refused unless
 * "same-origin" or "none" (typed by the user). Non-browser clients send neither header.
 */
bool http_rules_fetch_site_allowed(const char *origin, const char *fetch_site);
/* The address is on loopback: 127.0.0.0/8, ::1, or ::ffff:127.x. */
bool http_rules_loopback(const struct sockaddr *sa);

/*
 * A request head as libmicrohttpd 0.9.75 leaves it in its read buffer, checked before any handler
 * runs. That version parses in place: it writes a NUL over every line end (CR and LF
 * each), over the colon of each header line and over the spaces around the request target, and
 * keeps pointers to the pieces. A value's length is its strlen, so a NUL the client sent inside a
 * value ends it there and what follows disappears. The pieces and the head's size show it: between
 * the end of one piece and the start of the next there may be only what the parser wrote or
 * skipped. Only addresses are compared until they are known to lie inside the head. This is the
 * layout of 0.9.75 (libmicrohttpd 1.0 refuses a NUL itself and parses otherwise): a head the rules
 * cannot account for is refused, so a parser that changed shows at once.
 *
 * Use: http_rules_head_start, http_rules_head_field for each header in the order received, then
 * http_rules_head_refusal.
 */
struct http_rules_head {
    uintptr_t start;     /* the method's first byte */
    uintptr_t end;       /* one past the empty line that ends the head */
    uintptr_t at;        /* one past the last byte accounted for */
    unsigned hosts;      /* Host headers */
    unsigned lengths;    /* Content-Length headers */
    bool transfer;       /* a Transfer-Encoding header */
    const char *refusal; /* the first fault found in the layout; NULL while none */
};

/*
 * method, target and version where the parser left them (target_len: the target's strlen when the
 * request line was read, before it was unescaped), size: the head's bytes from method on.
 */
void http_rules_head_start(struct http_rules_head *h, const char *method, const char *target,
                           size_t target_len, const char *version, size_t size);
/* The next header, as the parser stored it. */
void http_rules_head_field(struct http_rules_head *h, const char *name, size_t name_len,
                           const char *value, size_t value_len);
/*
 * Why the head must be refused with 400, or NULL: a NUL in the request line or in a header value,
 * a header folded over several lines (obs-fold), whitespace between a name and its colon, two Host
 * or two Content-Length headers, Content-Length with Transfer-Encoding.
 */
const char *http_rules_head_refusal(struct http_rules_head *h);

/* Bytes of a refused body read past max_body_bytes, at most: see http_rules_drain. */
#define HTTP_RULES_DRAIN_EXTRA_BYTES (16u * 1024u * 1024u)

/*
 * A refused body (over max_body_bytes) is read and discarded up to this many bytes in all, so that
 * a client still sending it can then read the 413: max_body_bytes + HTTP_RULES_DRAIN_EXTRA_BYTES.
 * Beyond it the connection is closed.
 */
uint64_t http_rules_drain_bytes(uint64_t max_body_bytes);
/*
 * A body whose Content-Length (length) exceeds max_body_bytes is drained before the 413 (true), or
 * refused at once (false) when the client waits for an answer before it sends (expect, the Expect
 * header, is 100-continue) or when the body is longer than http_rules_drain_bytes.
 */
bool http_rules_drain(uint64_t length, const char *expect, uint64_t max_body_bytes);

#endif
