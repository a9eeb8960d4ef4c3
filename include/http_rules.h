/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_HTTP_RULES_H
#define MCPGW_HTTP_RULES_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>

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
 * A missing Origin is allowed: non-browser clients send none (checklist T-03).
 */
bool http_rules_origin_allowed(char *const *allowed, const char *origin);
/*
 * The value an Mcp-Name, Mcp-Method or MCP-Protocol-Version header carries (2026-07-28,
 * checklist T-84), blanks around it dropped: plain printable ASCII as is, or the "=?base64?<base64
 * of UTF-8>?=" form decoded. Into out[0..cap) with a NUL, length in *len; false when malformed,
 * holding a NUL, or too long.
 */
bool http_rules_mcp_value(const char *h, char *out, size_t cap, size_t *len);
/*
 * A browser's request that carries no Origin (a GET by <img>, <script> or a navigation from
 * another site: finding F7) says where it comes from in Sec-Fetch-Site: refused unless
 * "same-origin" or "none" (typed by the user). Non-browser clients send neither header.
 */
bool http_rules_fetch_site_allowed(const char *origin, const char *fetch_site);
/* The address is on loopback: 127.0.0.0/8, ::1, or ::ffff:127.x. */
bool http_rules_loopback(const struct sockaddr *sa);

#endif
