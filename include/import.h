/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_IMPORT_H
#define MCPGW_IMPORT_H

#include <stddef.h>
#include <stdio.h>

/*
 * --import-mcp-json: [server:NAME] sections for the stdio servers of a Claude Desktop, Cursor
 * ({"mcpServers": {...}}) or VS Code ({"servers": {...}}) JSON file.
 */

/*
 * Writes the sections for json[0..n) (file names it in messages) to out and says on err what was
 * skipped, renamed or left inline, and why. env_dir: an existing directory where each server's env
 * goes, as NAME.env (mode 0600) named by env_file; NULL writes env = lines instead. Returns the
 * count of sections, or -1 when json is not such a file (a message on err).
 */
int import_mcp_text(const char *json, size_t n, const char *file, const char *env_dir, FILE *out,
                    FILE *err);

/*
 * The command line entry: file, then args[0..argc) (only "--env-dir DIR"). Exit status: 0 when
 * a section was printed, 1 otherwise, 2 for a usage error.
 */
int import_mcp_json(const char *file, int argc, char **argv);

#endif
