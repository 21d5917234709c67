/*
 * config_man.h - whisperd(8), the manual page, rendered from the same
 * option and command tables as --help (daemon/config.c), so that the two
 * can never list different options.
 */
#ifndef WD_CONFIG_MAN_H
#define WD_CONFIG_MAN_H

#include <stdio.h>

/*
 * Writes the page as roff (man(7) macros) to out. version goes into the
 * footer ("whisperd 0.1.0"), date (YYYY-MM-DD) into the header. Returns 0,
 * or WD_EIO when out reports a write error.
 */
int wd_config_man(FILE *out, const char *version, const char *date);

#endif
