/*
 * test_config.c - the configuration table: defaults, file, environment and
 * flags with their precedence, and the `where: key: message` errors.
 */
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "wd_test.h"

static char *const no_env[] = { NULL };

static char *write_file(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/wd_test_conf_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0)
    return NULL;
  ssize_t w = write(fd, text, strlen(text));
  (void)w;
  close(fd);
  return path;
}

WD_TEST(defaults) {
  wd_config_t c;
  char err[256];
  char *argv[] = { "whisperd", "--config", "/nonexistent/ok-if-missing-when-default", NULL };
  /* An explicit --config must exist: */
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv, no_env, err, sizeof err), WD_ECONFIG);
  WD_CHECK(strstr(err, "/nonexistent/ok-if-missing-when-default") != NULL);
  char *argv2[] = { "whisperd", NULL };
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, argv2, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.port, 8080);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_AUTO);
  WD_CHECK_EQ_INT(c.gpu_timeout_s, 0); /* by device class: 20 s on a GPU, 300 s on lavapipe */
  WD_CHECK_EQ_INT(c.max_body_mb, 25);
  WD_CHECK_EQ_STR(c.host, "127.0.0.1");
  WD_CHECK_EQ_STR(c.output_format, "txt");
  WD_CHECK_EQ_STR(c.web_ui, "on");
  WD_CHECK_EQ_INT(c.log_level, WD_LOG_INFO);
  WD_CHECK(!c.vk_validation);
  WD_CHECK_EQ_INT(c.n_args, 0);
  wd_config_free(&c);
}

WD_TEST(precedence_file_env_cli) {
  char *path = write_file("# comment\nport = 9000\nhost = \"0.0.0.0\"\nqueue-max=5\n"
                                "log-level = debug\n\nvk-validation = yes\n");
  WD_CHECK(path != NULL);
  char *env[] = { "WHISPERD_PORT=9001", "WHISPERD_QUEUE_MAX=6", "OTHER=1", NULL };
  char *argv[] = { "whisperd", "-c", path, "--port=9002", "devices", "--no-vk-validation",
                   "-m", "/m.bin", "extra", NULL };
  wd_config_t c;
  char err[256];
  WD_CHECK_EQ_INT(wd_config_load(&c, 9, argv, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.port, 9002);      /* CLI beats env beats file */
  WD_CHECK_EQ_INT(c.queue_max, 6);    /* env beats file */
  WD_CHECK_EQ_STR(c.host, "0.0.0.0"); /* file, quotes removed */
  WD_CHECK_EQ_INT(c.log_level, WD_LOG_DEBUG);
  WD_CHECK(!c.vk_validation);         /* --no- flag beats the file's yes */
  WD_CHECK_EQ_STR(c.model, "/m.bin");
  WD_CHECK_EQ_INT(c.n_args, 2);
  WD_CHECK_EQ_STR(c.args[0], "devices");
  WD_CHECK_EQ_STR(c.args[1], "extra");
  WD_CHECK_EQ_STR(c.config_file, path);
  wd_config_free(&c);
  unlink(path);
}

WD_TEST(file_errors_name_file_line_key) {
  char *path = write_file("port = 80\nport = 70000\n");
  char *argv[] = { "whisperd", "--config", path, NULL };
  wd_config_t c;
  char err[256], want[256];
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv, no_env, err, sizeof err), WD_ECONFIG);
  snprintf(want, sizeof want, "%s:2: port: 70000 is out of range [1, 65535]", path);
  WD_CHECK_EQ_STR(err, want);
  unlink(path);

  path = write_file("\nnot-a-key = 1\n");
  char *argv2[] = { "whisperd", "--config", path, NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv2, no_env, err, sizeof err), WD_ECONFIG);
  snprintf(want, sizeof want, "%s:2: not-a-key: unknown key", path);
  WD_CHECK_EQ_STR(err, want);
  unlink(path);

  path = write_file("just words\n");
  char *argv3[] = { "whisperd", "--config", path, NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv3, no_env, err, sizeof err), WD_ECONFIG);
  WD_CHECK(strstr(err, ":1: expected 'key = value'") != NULL);
  unlink(path);
}

WD_TEST(env_and_flag_errors) {
  wd_config_t c;
  char err[256];
  char *argv[] = { "whisperd", NULL };
  char *env[] = { "WHISPERD_CONFIG=/dev/null", "WHISPERD_MAX_BATCH=zero", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, argv, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "WHISPERD_MAX_BATCH: max-batch: 'zero' is not an integer");

  char *env2[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *argv2[] = { "whisperd", "--output-format", "pdf", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv2, env2, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--output-format: output-format: 'pdf' is not one of txt|srt|vtt|json");

  char *argv3[] = { "whisperd", "--bogus", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 2, argv3, env2, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--bogus: unknown option (see --help)");

  char *argv4[] = { "whisperd", "--port", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 2, argv4, env2, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--port: port: missing value");

  char *argv5[] = { "whisperd", "--log-level", "loud", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv5, env2, err, sizeof err), WD_ECONFIG);
  WD_CHECK(strstr(err, "'loud' is not a log level") != NULL);
}

/* --web-ui on|off (the page at /): a flag with its value, the file's key
 * and WHISPERD_WEB_UI; nothing else. */
WD_TEST(web_ui_on_off) {
  wd_config_t c;
  char err[256];
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *argv[] = { "whisperd", "--web-ui", "off", "serve", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 4, argv, env, err, sizeof err), 0);
  WD_CHECK_EQ_STR(c.web_ui, "off");
  WD_CHECK_EQ_INT(c.n_args, 1);
  wd_config_free(&c);
  char *env2[] = { "WHISPERD_CONFIG=/dev/null", "WHISPERD_WEB_UI=off", NULL };
  char *argv2[] = { "whisperd", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, argv2, env2, err, sizeof err), 0);
  WD_CHECK_EQ_STR(c.web_ui, "off");
  wd_config_free(&c);
  char *argv3[] = { "whisperd", "--web-ui=maybe", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 2, argv3, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--web-ui=maybe: web-ui: 'maybe' is not one of on|off");
}

/* serve runs one --model and the others from --models: a second --model
 * in the same place (the command line, or one config file) used to replace
 * the first without a word, a model lost. It is an error that names both
 * and says what to write instead; so is a second --models (a list is given
 * once, comma-separated). Across places precedence still decides. */
WD_TEST(repeated_model_refused) {
  wd_config_t c;
  char err[256];
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *argv[] = { "whisperd", "serve", "--model", "a.bin", "--model", "b.bin", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 6, argv, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--model: model: given twice ('a.bin', then 'b.bin'); serve runs one "
                       "--model, give the others with --models b.bin");
  char *argv2[] = { "whisperd", "-m", "a.bin", "--model=b.bin", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 4, argv2, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK(strstr(err, "--models b.bin") != NULL);
  char *argv3[] = { "whisperd", "--models", "a.bin", "--models", "b.bin", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 5, argv3, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK_EQ_STR(err, "--models: models: given twice ('a.bin', then 'b.bin'); give the list "
                       "once, comma-separated: --models a.bin,b.bin");

  char *path = write_file("model = a.bin\nport = 9000\nmodel = b.bin\n");
  WD_CHECK(path != NULL);
  char *argv4[] = { "whisperd", "-c", path, NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv4, env, err, sizeof err), WD_ECONFIG);
  char want[512];
  snprintf(want, sizeof want, "%s:3: model: given twice ('a.bin', then 'b.bin'); serve runs "
                              "one --model, give the others with --models b.bin", path);
  WD_CHECK_EQ_STR(err, want);
  unlink(path);

  /* One in each place: the command line wins over the environment, which
   * wins over the file, as for every option. */
  path = write_file("model = a.bin\n");
  char *env2[] = { "WHISPERD_MODEL=b.bin", NULL };
  char *argv5[] = { "whisperd", "-c", path, "--model", "c.bin", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 5, argv5, env2, err, sizeof err), 0);
  WD_CHECK_EQ_STR(c.model, "c.bin");
  wd_config_free(&c);
  char *argv6[] = { "whisperd", "-c", path, NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, argv6, env2, err, sizeof err), 0);
  WD_CHECK_EQ_STR(c.model, "b.bin");
  wd_config_free(&c);
  unlink(path);
  /* Other options keep the last value given, as before. */
  char *argv7[] = { "whisperd", "--port", "9000", "--port", "9001", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 5, argv7, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.port, 9001);
  wd_config_free(&c);
}

/* --device takes a Vulkan index, auto (the default), cpu or vulkan, nothing
 * else. */
WD_TEST(device_cpu_or_index) {
  wd_config_t c;
  char err[256];
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *a1[] = { "whisperd", "--device", "cpu", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a1, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_CPU);
  wd_config_free(&c);
  char *a2[] = { "whisperd", "--device=1", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 2, a2, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, 1);
  wd_config_free(&c);
  char *env2[] = { "WHISPERD_CONFIG=/dev/null", "WHISPERD_DEVICE=cpu", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, a1, env2, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_CPU);
  wd_config_free(&c);
  char *a5[] = { "whisperd", "--device", "vulkan", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a5, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_VULKAN);
  wd_config_free(&c);
  char *a6[] = { "whisperd", "--device", "auto", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a6, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_AUTO);
  wd_config_free(&c);
  char *a7[] = { "whisperd", "--device", "-1", NULL }; /* the old spelling of auto */
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a7, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_AUTO);
  wd_config_free(&c);
  char *a3[] = { "whisperd", "--device", "gpu", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a3, env, err, sizeof err), WD_ECONFIG);
  WD_CHECK(strstr(err, "not an integer") != NULL);
  char *a4[] = { "whisperd", "--device", "-2", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a4, env, err, sizeof err), WD_ECONFIG);
}

/* --device lists: one worker per entry (cpu, vulkan or an index, repeats
 * allowed), from the command line, the environment and the file; all
 * alone; auto and all never inside a list; empty entries, bad words,
 * out-of-range indexes and too many entries refused. A single value keeps
 * device == devices[0] and n_devices == 1. */
WD_TEST(device_lists) {
  wd_config_t c;
  char err[256];
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *a0[] = { "whisperd", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, a0, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 1);
  WD_CHECK_EQ_INT(c.devices[0], WD_DEVICE_AUTO);
  wd_config_free(&c);
  char *a1[] = { "whisperd", "--device", "cpu,0", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a1, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 2);
  WD_CHECK_EQ_INT(c.devices[0], WD_DEVICE_CPU);
  WD_CHECK_EQ_INT(c.devices[1], 0);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_CPU);
  wd_config_free(&c);
  char *a2[] = { "whisperd", "--device=0,1", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 2, a2, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 2);
  WD_CHECK_EQ_INT(c.devices[0], 0);
  WD_CHECK_EQ_INT(c.devices[1], 1);
  WD_CHECK_EQ_INT(c.device, 0);
  wd_config_free(&c);
  char *a3[] = { "whisperd", "--device", "cpu,vulkan,vulkan,63", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a3, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 4);
  WD_CHECK_EQ_INT(c.devices[1], WD_DEVICE_VULKAN);
  WD_CHECK_EQ_INT(c.devices[2], WD_DEVICE_VULKAN);
  WD_CHECK_EQ_INT(c.devices[3], 63);
  wd_config_free(&c);
  char *a4[] = { "whisperd", "--device", "all", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a4, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 1);
  WD_CHECK_EQ_INT(c.device, WD_DEVICE_ALL);
  wd_config_free(&c);
  /* The environment and the file take the same forms; the command line
   * still wins, and a later single value replaces a list. */
  char *env2[] = { "WHISPERD_CONFIG=/dev/null", "WHISPERD_DEVICE=vulkan,cpu", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 1, a0, env2, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 2);
  WD_CHECK_EQ_INT(c.devices[0], WD_DEVICE_VULKAN);
  WD_CHECK_EQ_INT(c.devices[1], WD_DEVICE_CPU);
  wd_config_free(&c);
  char *a5[] = { "whisperd", "--device", "1", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a5, env2, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 1);
  WD_CHECK_EQ_INT(c.device, 1);
  wd_config_free(&c);
  char *path = write_file("device = cpu,cpu\n");
  WD_CHECK(path != NULL);
  char *a6[] = { "whisperd", "--config", path, NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a6, no_env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, 2);
  WD_CHECK_EQ_INT(c.devices[1], WD_DEVICE_CPU);
  wd_config_free(&c);
  unlink(path);

  static struct {
    char value[48];
    const char *msg;
  } bad[] = {
    { "cpu,auto", "'auto' cannot be part of a list" },
    { "all,0", "'all' cannot be part of a list" },
    { "0,-1", "'auto' cannot be part of a list" },
    { "cpu,", "empty entry" },
    { ",cpu", "empty entry" },
    { "cpu,,0", "empty entry" },
    { "cpu,gpu", "'gpu' is not an integer" },
    { "0,64", "64 is out of range [-1, 63]" },
    { "", "'' is not an integer" },
    { "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "more than 16 devices" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *a[] = { "whisperd", "--device", bad[i].value, NULL };
    WD_CHECK_EQ_INT(wd_config_load(&c, 3, a, env, err, sizeof err), WD_ECONFIG);
    if (!strstr(err, bad[i].msg))
      fprintf(stderr, "--device '%s': got '%s', want '%s'\n", bad[i].value, err, bad[i].msg);
    WD_CHECK(strstr(err, bad[i].msg) != NULL);
    WD_CHECK(strstr(err, "--device: device: ") == err);
  }
  /* Sixteen entries are the most. */
  char *a7[] = { "whisperd", "--device", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 3, a7, env, err, sizeof err), 0);
  WD_CHECK_EQ_INT(c.n_devices, WD_DEVICES_MAX);
  WD_CHECK_EQ_INT(c.devices[15], 15);
  wd_config_free(&c);
}

WD_TEST(help_lists_every_option) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  wd_config_usage(f, "whisperd");
  fclose(f);
  static const char *const keys[] = { "--model", "--device", "--[no-]vk-validation", "--max-batch",
                                      "--host", "--port", "--http-threads", "--max-body-mb",
                                      "--queue-max", "--timeout", "--api-key", "--log-level",
                                      "--output", "--output-format", "--language", "--config",
                                      "devices", "transcribe", "convert", "info" };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    if (!strstr(buf, keys[i]))
      fprintf(stderr, "missing in --help: %s\n", keys[i]);
    WD_CHECK(strstr(buf, keys[i]) != NULL);
  }
  free(buf);
}

WD_TEST(flags_help_version_and_dashdash) {
  wd_config_t c;
  char err[256];
  char *env[] = { "WHISPERD_CONFIG=/dev/null", NULL };
  char *argv[] = { "whisperd", "-h", "-V", "--", "--port", NULL };
  WD_CHECK_EQ_INT(wd_config_load(&c, 5, argv, env, err, sizeof err), 0);
  WD_CHECK(c.want_help && c.want_version);
  WD_CHECK_EQ_INT(c.n_args, 1);
  WD_CHECK_EQ_STR(c.args[0], "--port");
  wd_config_free(&c);
}

int main(void) { return wd_test_main(); }
