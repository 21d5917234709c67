/*
 * test_audio_ffmpeg.c - core/audio gives, bit for bit, the samples
 * openai/whisper's load_audio gets from
 *   ffmpeg -nostdin -threads 0 -i FILE -f s16le -ac 1 -acodec pcm_s16le -ar 16000 -
 * divided by 32768: every file in tests/data/audio/formats/ and inputs made
 * here by the ffmpeg tool from jfk.wav at 8, 22.05, 44.1 and 48 kHz, mono and
 * stereo (channels that differ), 8-, 16-, 24-bit and float WAV, mu-law,
 * FLAC, MP3 and Opus. The reference is the command itself, run here, so
 * this checks our use of libswresample (and the decoder choice) against
 * what the tool does, not against a copy of our own output.
 *
 * Needs the ffmpeg command (scripts/install-test-deps.sh installs it); it
 * skips without one, and fails instead under CI (CI set), where it must run.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audio.h"
#include "error.h"
#include "wd_test.h"

static int have_ffmpeg(void) {
  if (system("ffmpeg -hide_banner -version >/dev/null 2>&1") == 0)
    return 1;
  const char *ci = getenv("CI");
  if (ci && *ci)
    fprintf(stderr, "  the ffmpeg command is missing under CI (scripts/install-test-deps.sh)\n");
  WD_CHECK(!(ci && *ci));
  return 0;
}

/* The samples the openai/whisper command gives for path (malloc'd s16). */
static int16_t *ffmpeg_pcm(const char *path, size_t *ret_n) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "ffmpeg -nostdin -threads 0 -i '%s' -f s16le -ac 1 -acodec pcm_s16le -ar 16000 - "
           "2>/dev/null",
           path);
  FILE *f = popen(cmd, "r");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  int16_t *x = malloc(cap * sizeof *x);
  size_t got;
  while (x && (got = fread(x + n, sizeof *x, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      int16_t *y = realloc(x, 2 * cap * sizeof *x);
      if (!y) {
        free(x);
        x = NULL;
      }
      x = y;
      cap *= 2;
    }
  }
  if (pclose(f) != 0 || n == 0) {
    free(x);
    return NULL;
  }
  *ret_n = n;
  return x;
}

/* Decodes path both ways; 0 when identical, else prints how they differ. */
static int compare(const char *path, const char *label) {
  size_t n_ref = 0, n = 0;
  int16_t *ref = ffmpeg_pcm(path, &n_ref);
  int16_t *x = NULL;
  char err[256] = "";
  const int rc = wd_audio_decode_file(path, NULL, &x, &n, err, sizeof err);
  int bad = 0;
  if (!ref || rc < 0) {
    fprintf(stderr, "  %-30s ffmpeg %s, ours %s\n", label, ref ? "ok" : "FAILED",
            rc < 0 ? err : "ok");
    bad = 1;
  } else {
    size_t diff = 0, first = n_ref;
    double max_d = 0;
    for (size_t i = 0; i < n && i < n_ref; i++) {
      const double d = ((double)x[i] - ref[i]) / 32768.0;
      if (d != 0.0) {
        diff++;
        if (first == n_ref)
          first = i;
        if (d > max_d || -d > max_d)
          max_d = d > 0 ? d : -d;
      }
    }
    bad = diff != 0 || n != n_ref;
    fprintf(stderr, "  %-30s %8zu samples (ffmpeg %8zu): %s", label, n, n_ref,
            bad ? "DIFFERENT" : "identical");
    if (diff)
      fprintf(stderr, ", %zu differ from %zu, max %.3g x 32768", diff, first, max_d * 32768.0);
    fputc('\n', stderr);
  }
  free(ref);
  free(x);
  return bad;
}

WD_TEST(every_format_file_as_the_ffmpeg_command) {
  if (!have_ffmpeg())
    wd_test_skip("no ffmpeg command");
  const char *dir = wd_test_data("audio/formats");
  DIR *d = opendir(dir);
  WD_CHECK(d != NULL);
  if (!d)
    return;
  int n = 0, bad = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    bad += compare(path, e->d_name);
    n++;
  }
  closedir(d);
  WD_CHECK(n >= 20);
  WD_CHECK_EQ_INT(bad, 0);
}

/* Inputs the ffmpeg tool makes from jfk.wav's first 5 s: rate, channels
 * (stereo: the right channel is the left at 0.6 and 3 ms late, so a
 * downmix that is not FFmpeg's shows), sample format, container. */
static const struct {
  const char *name, *args;
} made[] = {
  { "s16_8k_mono.wav", "-ar 8000 -ac 1" },
  { "s16_8k_stereo.wav", "-ar 8000 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3' " },
  { "ulaw_8k_mono.wav", "-ar 8000 -ac 1 -c:a pcm_mulaw" },
  { "u8_11k_mono.wav", "-ar 11025 -ac 1 -c:a pcm_u8" },
  { "s16_16k_stereo.wav", "-ar 16000 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3'" },
  { "s16_22k_mono.wav", "-ar 22050 -ac 1" },
  { "s24_44k_stereo.wav", "-ar 44100 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3' -c:a pcm_s24le" },
  { "f32_44k_stereo.wav", "-ar 44100 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3' -c:a pcm_f32le" },
  { "f32_16k_mono.wav", "-ar 16000 -ac 1 -c:a pcm_f32le" },
  { "s16_44k_stereo.flac", "-ar 44100 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3'" },
  { "s24_48k_mono.flac", "-ar 48000 -ac 1 -sample_fmt s32 -bits_per_raw_sample 24" },
  { "mp3_48k_mono.mp3", "-ar 48000 -ac 1 -c:a libmp3lame -b:a 64k" },
  { "mp3_44k_stereo.mp3", "-ar 44100 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3' -c:a libmp3lame" },
  { "opus_48k_stereo.ogg", "-ar 48000 -af 'pan=stereo|c0=c0|c1=0.6*c0,adelay=0|3' -c:a libopus" },
  { "opus_48k_mono.opus", "-ar 48000 -ac 1 -c:a libopus -b:a 24k" },
};

WD_TEST(resampled_and_stereo_inputs_as_the_ffmpeg_command) {
  if (!have_ffmpeg())
    wd_test_skip("no ffmpeg command");
  char tmp[] = "/tmp/wd_audio_ffmpeg.XXXXXX"; /* mkdtemp's template */
  WD_CHECK(mkdtemp(tmp) != NULL);
  const char *src = wd_test_data("audio/jfk.wav");
  int bad = 0;
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
    char path[256], cmd[8192];
    snprintf(path, sizeof path, "%s/%s", tmp, made[i].name);
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -v error -y -t 5 -i '%s' %s '%s'", src,
             made[i].args, path);
    const int made_ok = system(cmd) == 0;
    if (!made_ok)
      fprintf(stderr, "  failed: %s\n", cmd);
    WD_CHECK(made_ok);
    if (made_ok)
      bad += compare(path, made[i].name);
    unlink(path);
  }
  rmdir(tmp);
  WD_CHECK_EQ_INT(bad, 0);
}

int main(void) { return wd_test_main(); }
