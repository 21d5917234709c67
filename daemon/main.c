/*
 * main.c - the whisperd executable: configuration, logging, then one
 * subcommand. All logic lives in wd_daemon_lib where tests can reach it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "log.h"

extern char **environ;

int main(int argc, char **argv) {
  /* A terminal gets "info: ..." lines; journald gets "<6>..." prefixes. */
  /* "<6>" prefixes only where journald reads them (issue #27): plain lines
   * in a terminal, a file, docker logs. */
  wd_log_set_style(wd_log_stderr_is_journal() ? WD_LOG_STYLE_SYSLOG : WD_LOG_STYLE_PLAIN);

  wd_config_t cfg;
  char err[1024];
  if (wd_config_load(&cfg, argc, argv, environ, err, sizeof err) < 0) {
    wd_log_error("%s", err);
    return 2;
  }
  wd_log_set_level(cfg.log_level);
  int status = 0;
  const char *cmd = cfg.n_args > 0 ? cfg.args[0] : "serve";
  if (cfg.want_help) {
    wd_config_usage(stdout, "whisperd");
  } else if (cfg.want_version) {
    printf("whisperd %s\n", WD_VERSION);
  } else if (strcmp(cmd, "devices") == 0) {
    status = wd_cmd_devices(&cfg, stdout);
  } else if (strcmp(cmd, "info") == 0) {
    status = wd_cmd_info(&cfg, stdout);
  } else if (strcmp(cmd, "convert") == 0) {
    status = wd_cmd_convert(&cfg, stdout);
  } else if (strcmp(cmd, "quantize") == 0) {
    status = wd_cmd_quantize(&cfg, stdout);
  } else if (strcmp(cmd, "transcribe") == 0) {
    status = wd_cmd_transcribe(&cfg, stdout);
  } else if (strcmp(cmd, "diarize") == 0) {
    status = wd_cmd_diarize(&cfg, stdout);
  } else if (strcmp(cmd, "serve") == 0) {
    status = wd_cmd_serve(&cfg);
  } else {
    wd_log_error("unknown command '%s' (see --help)", cmd);
    status = 2;
  }
  wd_config_free(&cfg);
  return status;
}
