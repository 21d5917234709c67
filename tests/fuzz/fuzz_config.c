/*
 * fuzz_config.c - the configuration parser (daemon/config.c): the config
 * file's "key = value" lines, WHISPERD_* environment variables and the
 * command line, all through wd_config_load().
 *
 * Input: the config file's bytes up to the first NUL; after it,
 * NUL-separated strings, each an environment entry when it starts with
 * "WHISPERD_", else a command-line argument. The file is written to a
 * private temp dir and named with --config; strings that would name another
 * file (--config, -c, WHISPERD_CONFIG) are dropped so that the fuzzer never
 * opens random paths (a FIFO would hang it).
 */
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "fuzz_common.h"

#define N_MAX 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, '\0', size);
  const size_t file_len = nul ? (size_t)(nul - data) : size;
  static char path[512]; /* argv strings are not const */
  snprintf(path, sizeof path, "%s", fuzz_tmp_write("input", data, file_len));

  /* One copy of the rest, cut into strings in place. */
  const size_t rest_len = nul ? size - file_len - 1 : 0;
  char *rest = malloc(rest_len + 1);
  if (!rest)
    abort();
  if (rest_len > 0)
    memcpy(rest, nul + 1, rest_len);
  rest[rest_len] = '\0';

  char *argv[N_MAX + 4], *envp[N_MAX + 1];
  int argc = 0, envc = 0;
  argv[argc++] = (char *)"whisperd";
  for (size_t i = 0; nul && i <= rest_len;) {
    char *s = rest + i;
    const size_t n = strlen(s);
    i += n + 1;
    if (strncmp(s, "WHISPERD_", 9) == 0) {
      if (strncmp(s, "WHISPERD_CONFIG", 15) != 0 && envc < N_MAX)
        envp[envc++] = s;
    } else if (strncmp(s, "--config", 8) != 0 && strcmp(s, "-c") != 0 && argc < N_MAX) {
      argv[argc++] = s;
    }
  }
  /* After a "--" the flag would be an operand, so it goes in front. */
  memmove(argv + 3, argv + 1, (size_t)(argc - 1) * sizeof *argv);
  argv[1] = (char *)"--config";
  argv[2] = path;
  argc += 2;
  argv[argc] = NULL;
  envp[envc] = NULL;

  wd_config_t cfg;
  char err[512];
  int rc = wd_config_load(&cfg, argc, argv, envp, err, sizeof err);
  if (rc == 0) {
    FUZZ_CHECK(cfg.n_args >= 0 && cfg.n_args <= WD_CONFIG_MAX_ARGS);
    FUZZ_CHECK(cfg.model != NULL && cfg.host != NULL);
    wd_config_free(&cfg);
  } else {
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
  }
  free(rest);
  return 0;
}
