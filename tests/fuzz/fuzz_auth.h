/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_FUZZ_AUTH_H
#define MCPGW_FUZZ_AUTH_H

/*
 * The [auth] the auth targets (jwt, authsrv) judge tokens under: mode jwt for FUZZ_ISSUER at
 * FUZZ_PUBLIC_URL, two servers, /mcp needing no scope and /scoped needing "s", at FUZZ_NOW_S.
 */
#include "config.h"

#define FUZZ_ISSUER     "https://idp.fuzz.example"
#define FUZZ_PUBLIC_URL "https://mcp.fuzz.example"
#define FUZZ_NOW_S      1800000000

static char fuzz_scope_s[] = "s", fuzz_name_a[] = "a", fuzz_name_b[] = "b";
static char fuzz_path_a[] = "/mcp", fuzz_path_b[] = "/scoped";
static char fuzz_issuer[] = FUZZ_ISSUER, fuzz_public_url[] = FUZZ_PUBLIC_URL;
static char *fuzz_scopes_none[] = { NULL };
static char *fuzz_scopes_s[] = { fuzz_scope_s, NULL };

static inline void
fuzz_auth_config(struct config *cfg, struct config_server srv[2])
{
    cfg->auth.mode = CONFIG_AUTH_JWT;
    cfg->auth.public_url = fuzz_public_url;
    cfg->auth.issuer = fuzz_issuer;
    cfg->auth.clock_skew_s = 60;
    cfg->auth.rate_limit_burst = 1;
    cfg->auth.introspection_cache_max_s = 300;
    srv[0] = (struct config_server){ .name = fuzz_name_a,
                                     .path = fuzz_path_a,
                                     .required_scopes = fuzz_scopes_none };
    srv[1] = (struct config_server){ .name = fuzz_name_b,
                                     .path = fuzz_path_b,
                                     .required_scopes = fuzz_scopes_s };
}

#endif
