/* SPDX-License-Identifier: MIT */
#ifndef MCPGW_CONFIG_INT_H
#define MCPGW_CONFIG_INT_H

/*
 * Private to the config module (config.c, config_value.c): the value parsers config.c applies to
 * each raw value. Each returns 0, or -1 with a static phrase in *errstr.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void config_strv_free(char **v);
bool config_is_name(const char *s, size_t len);
char **config_split_words(const char *s, const char **errstr);
char **config_split_list(const char *s, const char **errstr);
int config_check_path(const char *s, const char **errstr);
int config_check_text(const char *s, const char **errstr);
int config_check_url(const char *s, const char **errstr);
int config_parse_listen(const char *s, uint64_t max_port, char **host, uint16_t *port,
                        const char **errstr);

#endif
