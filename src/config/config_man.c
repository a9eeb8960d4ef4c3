/* SPDX-License-Identifier: MIT */
/*
 * The man pages, in roff, from the texts the program already has: mcp-gateway(8) from the usage
 * text --help prints, mcp-gateway.ini(5) from the option table. meson runs the binary with the
 * hidden --man option at build time, and a test compares the pages with --help and the README,
 * so there is no second copy of either to drift.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

/* Writes s[0..len) escaped for roff: backslashes, minus signs, and a leading control character. */
static void
config_man_text(FILE *f, const char *s, size_t len)
{
    if (len > 0 && (s[0] == '.' || s[0] == '\''))
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
    config_man_text(f, s, strlen(s));
    fputc('\n', f);
}

/* The allowed values of a key, as the parser checks them; "" when the type has no simple bound. */
static void
config_man_bound(FILE *f, const struct config_option *o)
{
    char b[128];
    switch (o->type) {
    case CONFIG_U64:
        snprintf(b, sizeof(b), "%llu..%llu", (unsigned long long)o->min,
                 (unsigned long long)o->max);
        break;
    case CONFIG_LISTEN:
        snprintf(b, sizeof(b), "port %llu..%llu", (unsigned long long)o->min,
                 (unsigned long long)o->max);
        break;
    case CONFIG_IDENT:
        snprintf(b, sizeof(b), "%llu..%llu characters of [A-Za-z0-9_-]", (unsigned long long)o->min,
                 (unsigned long long)o->max);
        break;
    case CONFIG_LOG_LEVEL:
        snprintf(b, sizeof(b), "error, warn, info, debug");
        break;
    case CONFIG_LOG_FORMAT:
        snprintf(b, sizeof(b), "text, json, journal");
        break;
    case CONFIG_AUTH_MODE:
        snprintf(b, sizeof(b), "none, bearer, jwt");
        break;
    case CONFIG_ERA:
        snprintf(b, sizeof(b), "auto, stateless, legacy");
        break;
    case CONFIG_SCOPE:
        snprintf(b, sizeof(b), "private, public");
        break;
    case CONFIG_PATH:
    case CONFIG_DIR:
    case CONFIG_URL:
    case CONFIG_TEXT:
    case CONFIG_ARGV:
    case CONFIG_ENV:
    case CONFIG_NAMES:
    case CONFIG_LIST:
        return;
    }
    fputs("bound: ", f);
    config_man_text(f, b, strlen(b));
    fputs("\n.br\n", f);
}

/* The unit of a numeric key, from its name's suffix; NULL for a 0..1 switch or a non-number. */
static const char *
config_man_unit(const struct config_option *o)
{
    static const struct {
        const char *suffix, *unit;
    } units[] = { { "_per_s", "per second" },
                  { "_per_min", "per minute" },
                  { "_ms", "milliseconds" },
                  { "_s", "seconds" },
                  { "_bytes", "bytes" } };
    if (o->type != CONFIG_U64 || (o->min == 0 && o->max == 1))
        return NULL;
    size_t len = strlen(o->key);
    for (size_t i = 0; i < ARRAY_LEN(units); i++) {
        size_t n = strlen(units[i].suffix);
        if (len > n && strcmp(o->key + len - n, units[i].suffix) == 0)
            return units[i].unit;
    }
    return "count";
}

static void
config_man_section(FILE *f, enum config_section sec, const char *title, const char *intro)
{
    fprintf(f, ".SH \"%s\"\n", title);
    config_man_line(f, intro);
    for (size_t i = 0; i < CONFIG_N_OPTIONS; i++) {
        const struct config_option *o = &config_options[i];
        if (o->section != sec)
            continue;
        const char *name = strchr(o->key, '.') + 1;
        fputs(".TP\n.B ", f);
        config_man_line(f, name);
        fputs("default: ", f);
        config_man_line(f, o->def == NULL ? "(none)" : *o->def == '\0' ? "(empty)" : o->def);
        fputs(".br\n", f);
        config_man_bound(f, o);
        const char *unit = config_man_unit(o);
        if (unit != NULL)
            fprintf(f, "unit: %s\n.br\n", unit);
        config_man_line(f, o->doc);
    }
}

static void
config_man_ini(FILE *f, const char *version)
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
          "Every key below is listed with its default, where the parser checks one its bound, "
          "for a number its unit (named by the key's suffix: _ms, _s, _bytes, _per_s, "
          "_per_min; a count otherwise), and what it does. conf/gateway.ini says the same for "
          "each key.\n"
          ".B mcp\\-gateway \\-\\-check\\-config\n"
          "validates a file and prints file:line: key: reason for the first error.\n",
          f);
    config_man_section(f, CONFIG_SEC_GATEWAY, "[gateway] SECTION",
                       "The listener, limits, timeouts and logging; the section may be left out.");
    config_man_section(f, CONFIG_SEC_AUTH, "[auth] SECTION",
                       "Who may use the gateway. mode none is accepted on a loopback listener "
                       "only.");
    config_man_section(f, CONFIG_SEC_SERVER, "[server:NAME] SECTIONS",
                       "One per stdio MCP server; NAME is the server's name in logs and metrics.");
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
    ".TP\nadmin_token_file, state_key_file, introspection_credentials_file, [server:NAME] "
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
                config_man_text(f, flags, (size_t)(gap - flags));
                fputc('\n', f);
                for (p = gap; p < end && *p == ' '; p++)
                    ;
            }
            config_man_text(f, p, (size_t)(end - p));
            fputc('\n', f);
        }
        p = nl != NULL ? nl + 1 : end;
    }
    fputs(config_man_program_tail, f);
}

int
config_man(FILE *f, int section, const char *version, const char *usage)
{
    if (section == 5)
        config_man_ini(f, version);
    else if (section == 8)
        config_man_program(f, version, usage);
    else
        return -1;
    return 0;
}
