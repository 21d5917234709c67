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
/* `whisperd info MODEL`: hyper-parameters, name, tensor types, parameters, memory. */
int wd_cmd_info(const wd_config_t *cfg, FILE *out);
/* "diarization: available (...)" or "...: unavailable: why": whether serve
 * would diarize, both networks loaded as it loads them (a few tens of MiB
 * read, nothing run). For `info` and `devices` (cmd_info.c). */
void wd_cmd_print_diarization(const wd_config_t *cfg, FILE *out);
/* `whisperd convert CT2_DIR -o FILE`: write a ggml file (via FILE.tmp + rename). */
int wd_cmd_convert(const wd_config_t *cfg, FILE *out);
/* `whisperd quantize IN OUT TYPE`: write IN as a ggml file of weight type
 * TYPE, as whisper.cpp's quantize tool does (via OUT.tmp + rename). */
int wd_cmd_quantize(const wd_config_t *cfg, FILE *out);
/* `whisperd transcribe FILE...`: the serve engine from the command line;
 * prints each file's transcript in --output-format (txt, srt, vtt, json). */
int wd_cmd_transcribe(const wd_config_t *cfg, FILE *out);
/* `whisperd diarize FILE...`: each file's speaker turns (core/diar.h), as
 * "start end label" lines or, with --rttm, RTTM lines; speakers A, B, ... in
 * order of first appearance. */
int wd_cmd_diarize(const wd_config_t *cfg, FILE *out);
/* `whisperd serve`: the HTTP daemon under systemd (cmd_serve.c). Returns 0
 * after a clean SIGTERM drain, 1 when start-up failed. */
int wd_cmd_serve(const wd_config_t *cfg);

#endif
