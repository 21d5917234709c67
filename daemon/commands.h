/*
 * commands.h - the subcommands of the whisperd binary.
 *
 * Each takes the effective configuration and its operands (cfg->args after
 * the command name) and returns a process exit status. They print their
 * results on stdout and their errors through the log.
 */
#ifndef WD_COMMANDS_H
#define WD_COMMANDS_H

#include <stdio.h>

#include "config.h"

/* `whisperd devices`: one block per Vulkan device. */
int wd_cmd_devices(const wd_config_t *cfg, FILE *out);

#endif
