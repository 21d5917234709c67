/*
 * config_man.c - renders whisperd(8) from the configuration table.
 *
 * COMMANDS and OPTIONS come row by row from wd_config_command_doc() and
 * wd_config_option_doc(), the accessors over the tables that --help prints,
 * so adding an option to daemon/config.c adds it here too; the test
 * tests/packaging/man_options.sh checks that every flag of --help is on the
 * page. The rest (files, signals, endpoints) is prose that changes rarely.
 *
 * Threading: none; the caller owns out. The build runs this once through
 * daemon/whisperd_man.c and installs the result as share/man/man8/whisperd.8.
 */
#include "config_man.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "error.h"

/* Text for a roff body line: backslashes and dashes escaped (so that flags
 * render as minus signs and copy correctly), and a leading '.' or '\'' kept
 * from being read as a request. */
static void roff_text(FILE *out, const char *s) {
  if (*s == '.' || *s == '\'')
    fputs("\\&", out);
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\e", out);
    else if (*s == '-')
      fputs("\\-", out);
    else
      fputc(*s, out);
  }
}

/* Help text as a sentence: the table's help has no final period. */
static void roff_sentence(FILE *out, const char *s) {
  roff_text(out, s);
  const size_t n = strlen(s);
  fputs(n && s[n - 1] == '.' ? "\n" : ".\n", out);
}

/* "WHISPERD_" + key, upper case, dashes as underscores: the rule of
 * config.c's environment parser. */
static void roff_env_name(FILE *out, const char *key) {
  fputs("WHISPERD_", out);
  for (; *key; key++)
    fputc(*key == '-' ? '_' : (*key >= 'a' && *key <= 'z') ? *key - 'a' + 'A' : *key, out);
}

/* One .TP entry: the tag line (flags in bold, value name in italics), then
 * help, default, range and the environment variable. */
static void man_option(FILE *out, const wd_config_doc_t *d) {
  fputs(".TP\n", out);
  if (d->short_flag)
    fprintf(out, "\\fB\\-%c\\fR, ", d->short_flag);
  fputs(d->is_bool ? "\\fB\\-\\-\\fR[\\fBno\\-\\fR]\\fB" : "\\fB\\-\\-", out);
  roff_text(out, d->key);
  fputs("\\fR", out);
  if (d->meta) {
    fputs(" \\fI", out);
    roff_text(out, d->meta);
    fputs("\\fR", out);
  }
  fputc('\n', out);
  roff_sentence(out, d->help);
  fputs(".br\nDefault: ", out);
  if (d->def[0])
    roff_text(out, d->def);
  else
    fputs("\"\" (empty)", out);
  if (d->has_range)
    fprintf(out, "; range %ld..%ld", d->min, d->max);
  fputs(". Environment: ", out);
  roff_env_name(out, d->key);
  fputs(". File: ", out);
  roff_text(out, d->key);
  fputs(" = \\fIvalue\\fR.\n", out);
}

int wd_config_man(FILE *out, const char *version, const char *date) {
  fprintf(out,
          ".\\\" whisperd(8), generated at build time from daemon/config.c's tables\n"
          ".\\\" by daemon/config_man.c: edit those, not this file.\n"
          ".TH WHISPERD 8 \"%s\" \"whisperd %s\" \"System Administration\"\n",
          date, version);
  fputs(".SH NAME\n"
        "whisperd \\- Whisper speech\\-to\\-text daemon with an OpenAI\\-compatible HTTP API\n"
        ".SH SYNOPSIS\n"
        ".B whisperd\n"
        "[\\fIOPTIONS\\fR] [\\fICOMMAND\\fR [\\fIARGS\\fR...]]\n"
        ".SH DESCRIPTION\n"
        "\\fBwhisperd\\fR transcribes and translates speech with OpenAI's Whisper models, on a\n"
        "Vulkan GPU when there is one and on the CPU otherwise. \\fBwhisperd serve\\fR\n"
        "answers \\fB/v1/audio/transcriptions\\fR and \\fB/v1/audio/translations\\fR as the\n"
        "OpenAI API does; concurrent requests wait in a bounded queue and are decoded\n"
        "together in batches.\n"
        ".SH COMMANDS\n",
        out);
  const char *name, *args, *help;
  for (size_t i = 0; wd_config_command_doc(i, &name, &args, &help) == 0; i++) {
    fputs(".TP\n\\fB", out);
    roff_text(out, name);
    fputs("\\fR", out);
    if (args[0]) {
      fputs(" \\fI", out);
      roff_text(out, args);
      fputs("\\fR", out);
    }
    fputc('\n', out);
    roff_sentence(out, help);
  }
  fputs(".SH OPTIONS\n"
        "Every option is also a configuration file line \\fIkey\\fR = \\fIvalue\\fR and an\n"
        "environment variable \\fBWHISPERD_\\fR\\fIKEY\\fR (upper case, dashes as underscores).\n"
        "Precedence, lowest first: defaults, the configuration file, the environment,\n"
        "the command line. Booleans accept true/false, yes/no, on/off and 1/0.\n"
        ".TP\n"
        "\\fB\\-c\\fR, \\fB\\-\\-config\\fR \\fIFILE\\fR\n"
        "Configuration file (default \\fI/etc/whisperd/whisperd.conf\\fR, read if present).\n"
        "Environment: WHISPERD_CONFIG.\n",
        out);
  wd_config_doc_t d;
  for (size_t i = 0; wd_config_option_doc(i, &d) == 0; i++)
    man_option(out, &d);
  fputs(".TP\n"
        "\\fB\\-h\\fR, \\fB\\-\\-help\\fR\n"
        "Show the options and exit.\n"
        ".TP\n"
        "\\fB\\-V\\fR, \\fB\\-\\-version\\fR\n"
        "Show the version and exit.\n"
        ".SH HTTP ENDPOINTS\n"
        ".TP\n.B /v1/audio/transcriptions, /v1/audio/translations\n"
        "OpenAI\\-compatible multipart uploads; \\fB\\-\\-api\\-key\\fR guards them.\n"
        ".TP\n.B /health\n"
        "Liveness: 200 while the process serves HTTP.\n"
        ".TP\n.B /ready\n"
        "Readiness: 200 once the model is loaded and warmed up, 503 while starting; while\n"
        "draining, 503 on connections opened before SIGTERM (new ones are refused).\n"
        ".TP\n.B /metrics\n"
        "Prometheus text format: requests, latency, \\fBwhisperd_queue_depth\\fR, batch\n"
        "occupancy, real\\-time factor.\n"
        ".SH SIGNALS\n"
        ".TP\n.B SIGTERM, SIGINT\n"
        "Stop accepting (close the listening socket: new connections are refused),\n"
        "answer queued jobs 503, let running jobs finish within\n"
        "\\fB\\-\\-shutdown\\-grace\\fR seconds, exit 0.\n"
        ".TP\n.B SIGHUP\n"
        "Reopen \\fB\\-\\-log\\-file\\fR.\n"
        ".SH FILES\n"
        ".TP\n.I /etc/whisperd/whisperd.conf\n"
        "The configuration file.\n"
        ".TP\n.I /usr/lib/systemd/system/whisperd.service, whisperd.socket\n"
        "The systemd units (\\fIType=notify\\fR, socket activation).\n"
        ".SH EXIT STATUS\n"
        "0 on success, 1 on a runtime failure, 2 on a configuration or usage error.\n"
        ".SH SEE ALSO\n"
        ".BR systemd.service (5),\n"
        ".BR systemd.socket (5)\n",
        out);
  return ferror(out) ? WD_EIO : 0;
}
