/* SPDX-License-Identifier: MIT */
/*
 * The man pages, in roff, from the texts the program already has: mcp-gateway(8) from the usage
 * text --help prints, mcp-gateway.ini(5) from the keys' prose (options.md, read by config_doc.c)
 * and the option table's facts. meson runs the binary with the hidden --man option at build time
 * (which fails when options.md and the table disagree on the keys); the same option rewrites the
 * README's tables and conf/gateway.ini's comments (`meson compile -C build docs`).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

/*
 * Writes s[0..len) escaped for roff: backslashes, minus signs, and, when it starts a line (lead),
 * a leading control character.
 */
static void
config_man_text(FILE *f, const char *s, size_t len, bool lead)
{
    if (lead && len > 0 && (s[0] == '.' || s[0] == '\''))
        fputs("\\&", f);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
}

static void
config_man_line(FILE *f, const char *s)
{
    config_man_text(f, s, strlen(s), true);
    fputc('\n', f);
}

/* A paragraph of options.md: `code` in bold, the rest as it is. */
static void
config_man_prose(FILE *f, const char *s)
{
    if (s[0] == '.' || s[0] == '\'')
        fputs("\\&", f);
    bool bold = false;
    for (const char *p = s; *p != '\0';) {
        size_t n = strcspn(p, "`");
        config_man_text(f, p, n, false);
        p += n;
        if (*p == '`') {
            fputs(bold ? "\\fR" : "\\fB", f);
            bold = !bold;
            p++;
        }
    }
    if (bold)
        fputs("\\fR", f);
    fputc('\n', f);
}

/* The paragraphs of t; in a key's entry (indented) each after the first keeps its indent. */
static void
config_man_paras(FILE *f, const struct config_doc_text *t, bool indented)
{
    for (size_t p = 0; p < t->n; p++) {
        const struct config_doc_para *para = &t->para[p];
        if (p > 0)
            fputs(indented ? ".IP\n" : ".PP\n", f);
        if (!para->code) {
            config_man_prose(f, para->text);
            continue;
        }
        fputs(".nf\n", f);
        for (const char *l = para->text; *l != '\0';) {
            const char *nl = strchr(l, '\n');
            config_man_text(f, l, (size_t)(nl - l), true);
            fputc('\n', f);
            l = nl + 1;
        }
        fputs(".fi\n", f);
    }
}

static void
config_man_section(FILE *f, const struct config_doc *doc, enum config_section sec,
                   const char *title)
{
    fprintf(f, ".SH \"%s\"\n", title);
    config_man_paras(f, &doc->intro[sec], false);
    for (size_t i = 0; i < config_n_options; i++) {
        const struct config_option *o = &config_options[i];
        if (o->section != sec)
            continue;
        char b[128];
        fputs(".TP\n.B ", f);
        config_man_line(f, strchr(o->key, '.') + 1);
        fputs("default: ", f);
        config_man_line(f, config_doc_default(o));
        fputs(".br\nbound: ", f);
        config_man_line(f, config_doc_bound(o, b, sizeof b));
        const char *unit = config_doc_unit(o);
        if (unit != NULL)
            fprintf(f, ".br\nunit: %s\n", unit);
        fputs(".br\n", f);
        config_man_paras(f, &doc->option[i], true);
    }
}

static void
config_man_ini(FILE *f, const struct config_doc *doc, const char *version)
{
    fprintf(f, ".TH MCP\\-GATEWAY.INI 5 \"\" \"mcp\\-gateway %s\" \"File Formats\"\n", version);
    fputs(".SH NAME\nmcp\\-gateway.ini \\- configuration file of mcp\\-gateway\n"
          ".SH SYNOPSIS\n/etc/mcp\\-gateway/gateway.ini\n"
          ".SH DESCRIPTION\n"
          "One INI file configures the gateway: a [gateway] section, an optional [auth] section "
          "and one or more [server:NAME] sections, one per stdio MCP server. "
          "Lines are limited to 198 bytes; a longer value is split over indented continuation "
          "lines, which for list keys are joined. A blank followed by ; starts a comment.\n"
          ".PP\n"
          "Every key below is listed with its default, the values the parser accepts (bound), "
          "for a number its unit (named by the key's suffix: _ms, _s, _bytes, _per_s, "
          "_per_min; a count otherwise), and what it does. The README's Configuration tables "
          "and the comments of conf/gateway.ini are written from the same text.\n"
          ".PP\n"
          ".B mcp\\-gateway \\-\\-check\\-config\n"
          "validates a file and prints file:line: key: reason for the first error.\n",
          f);
    config_man_section(f, doc, CONFIG_SEC_GATEWAY, "[gateway] SECTION");
    config_man_section(f, doc, CONFIG_SEC_AUTH, "[auth] SECTION");
    config_man_section(f, doc, CONFIG_SEC_SERVER, "[server:NAME] SECTIONS");
    fputs(".SH FILES\n/etc/mcp\\-gateway/gateway.ini\n"
          ".SH \"SEE ALSO\"\n.BR mcp\\-gateway (8),\n.BR systemd.service (5)\n",
          f);
}

/* The sections of mcp-gateway(8) after the usage text's: what the gateway serves and uses. */
static const char config_man_program_tail[] =
    ".SH ENDPOINTS\n"
    "Each [server:NAME] has its own path (the first defaults to [gateway] path, /mcp).\n"
    ".TP\n.B PATH\n"
    "MCP Streamable HTTP: POST (requests, notifications, responses), GET (the session's stream), "
    "DELETE (ends the session); 2026\\-07\\-28 requests are POST only, on a pool of children.\n"
    ".TP\n.B PATH/sse, PATH/messages\n"
    "the 2024\\-11\\-05 HTTP+SSE transport, while legacy_sse is 1.\n"
    ".TP\n.B /healthz\n200 while the process serves.\n"
    ".TP\n.B /readyz\n"
    "200 while new sessions are taken and some server can serve; 503 while draining, at "
    "max_sessions, or when no server can serve: each is starting (none of its children has "
    "started yet), broken or drained. The body gives each server's state.\n"
    ".TP\n.B /metrics\n"
    "Prometheus text: loopback peers only while admin_token is empty; with one, any peer "
    "presenting it.\n"
    ".TP\n.B /admin/inflight\n"
    "requests in flight per session and pool child (JSON); off unless admin_token is set, loopback "
    "peers with Authorization: Bearer admin_token.\n"
    ".TP\n.B POST /admin/sessions/ID/end\n"
    "ends the session: its requests in flight are cancelled at the child (\"ended by the "
    "operator\"), the child is stopped. Same gate as /admin/inflight.\n"
    ".TP\n.B POST /admin/servers/NAME/drain, .../resume\n"
    "the server takes no new sessions or 2026\\-07\\-28 requests (503, Retry\\-After) while open "
    "sessions and requests in flight finish; /readyz says drained; kept across SIGHUP. resume "
    "ends it. Same gate.\n"
    ".TP\n.B POST /admin/servers/NAME/restart\n"
    "replaces the server's pool children as SIGHUP does (the old ones finish what is in flight, "
    "then stop); sessions are untouched. Same gate.\n"
    ".TP\n.B /.well\\-known/oauth\\-protected\\-resource[PATH]\n"
    "RFC 9728 metadata, while [auth] mode is bearer or jwt.\n"
    ".SH \"EXIT STATUS\"\n"
    ".TP\n.B 0\nstopped by SIGTERM, SIGQUIT or SIGINT; \\-\\-check\\-config or "
    "\\-\\-print\\-config "
    "succeeded.\n"
    ".TP\n.B 1\n"
    "the configuration, a secret file or a server's command is wrong (the message says "
    "file:line: key: reason), or the listener could not start.\n"
    ".TP\n.B 2\nusage error.\n"
    ".SH FILES\n"
    ".TP\n/etc/mcp\\-gateway/gateway.ini\n"
    "the configuration (the default \\-\\-config of an install), see\n.BR mcp\\-gateway.ini (5).\n"
    ".TP\n/etc/mcp\\-gateway/NAME.ini\n"
    "the configuration of instance NAME of the template unit mcp\\-gateway@.service.\n"
    ".TP\nadmin_token_file, state_key_file, session_key_file, introspection_credentials_file, "
    "[server:NAME] "
    "env_file\n"
    "secrets, each 0600 or 0640: a file others can read is refused.\n"
    ".TP\n[auth] tokens_file, jwks_file\n"
    "token digests and public keys: others may read them (keep them 0640 all the same).\n"
    ".PP\nEach of these files, and the configuration, must be owned by root or the gateway's "
    "user and not be writable by its group or others, or it is refused.\n"
    ".TP\n/var/lib/mcp\\-gateway\nthe service's working directory.\n"
    ".SH EXAMPLES\n"
    "Check the configuration, then print it as loaded, defaults included, secrets redacted:\n"
    ".PP\n.nf\nmcp\\-gateway \\-\\-check\\-config\nmcp\\-gateway \\-\\-print\\-config\n.fi\n"
    ".PP\nRun from a source tree in front of the example server:\n"
    ".PP\n.nf\n\\&./build/src/mcp\\-gateway \\-\\-config conf/gateway.ini\n.fi\n"
    ".PP\nReload after editing the file, reopen a rotated log_file, stop with a drain:\n"
    ".PP\n.nf\nsystemctl reload mcp\\-gateway\nkill \\-USR1 $(pidof mcp\\-gateway)\n"
    "systemctl stop mcp\\-gateway\n.fi\n"
    ".PP\nA second instance: /etc/mcp\\-gateway/second.ini, then\n"
    ".PP\n.nf\nsystemctl enable \\-\\-now mcp\\-gateway@second\n.fi\n"
    ".SH \"SEE ALSO\"\n.BR mcp\\-gateway.ini (5),\n.BR systemctl (1)\n";

/*
 * mcp-gateway(8) from the usage text: its paragraphs are the synopsis ("usage: ..."), the
 * description, the options (lines "  -c, --config FILE    what it does") and the signals.
 */
static void
config_man_program(FILE *f, const char *version, const char *usage)
{
    static const char *const heads[] = { "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS" };
    fprintf(f, ".TH MCP\\-GATEWAY 8 \"\" \"mcp\\-gateway %s\" \"System Administration\"\n",
            version);
    fputs(".SH NAME\nmcp\\-gateway \\- Streamable HTTP gateway for stdio MCP servers\n", f);
    size_t para = 0;
    bool head = true;
    for (const char *p = usage; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
        const char *end = p + len;
        if (len == 0) {
            para += para + 1 < ARRAY_LEN(heads) ? 1 : 0;
            head = true;
        } else {
            bool first = head;
            if (head)
                fprintf(f, ".SH %s\n", heads[para]);
            head = false;
            if (para == 0 && strncmp(p, "usage: ", 7) == 0) {
                if (!first)
                    fputs(".br\n", f); /* one synopsis line each */
                p += 7;
            } else if (para == 2 && strncmp(p, "  ", 2) == 0) {
                const char *flags = p + 2;
                const char *gap = strstr(flags, "  ");
                if (gap == NULL || gap > end)
                    gap = end;
                fputs(".TP\n.B ", f);
                config_man_text(f, flags, (size_t)(gap - flags), true);
                fputc('\n', f);
                for (p = gap; p < end && *p == ' '; p++)
                    ;
            }
            config_man_text(f, p, (size_t)(end - p), true);
            fputc('\n', f);
        }
        p = nl != NULL ? nl + 1 : end;
    }
    fputs(config_man_program_tail, f);
}

int
config_man(FILE *f, const char *what, const char *options_md, const char *target,
           const char *version, const char *usage, char *err, size_t errlen)
{
    if (strcmp(what, "8") == 0) {
        config_man_program(f, version, usage);
        return 0;
    }
    bool page = strcmp(what, "5") == 0, readme = strcmp(what, "readme") == 0;
    if (!page && !readme && strcmp(what, "conf") != 0) {
        snprintf(err, errlen,
                 "not a page or a document: 8, 5 OPTIONS_MD, readme OPTIONS_MD README or conf "
                 "OPTIONS_MD CONF");
        return -1;
    }
    if (options_md == NULL || (page != (target == NULL))) {
        snprintf(err, errlen, "takes %s",
                 page ? "the path of options.md" : "the paths of options.md and of the file");
        return -1;
    }
    struct config_doc *doc = xmalloc(sizeof(*doc));
    int rc = config_doc_read(doc, options_md, err, errlen);
    if (rc == 0) {
        if (page)
            config_man_ini(f, doc, version);
        else if (readme)
            rc = config_doc_readme(f, doc, target, err, errlen);
        else
            rc = config_doc_conf(f, doc, target, err, errlen);
        config_doc_free(doc);
    }
    free(doc);
    return rc;
}
