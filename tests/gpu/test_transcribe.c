/*
 * test_transcribe.c - whole-file decoding on the Vulkan engine with the real
 * tiny.en and base weights: a long file of speech and silences (windows,
 * seek, context, nothing lost at window edges, times monotonic and not
 * overlapping), silence and noise (no hallucinated text), beam search and
 * best_of sampling on real speech, word timestamps, and translation of
 * German speech into English by the multilingual model.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "error.h"
#include "mel.h"
#include "model.h"
#include "model_vocab.h"
#include "timing.h"
#include "vk_engine.h"
#include "wd_audio_f32.h"
#include "wd_test.h"
#include "wd_transcribe.h"

#define TINY WD_SOURCE_DIR "/models/ggml-tiny.en.bin"
#define BASE WD_SOURCE_DIR "/models/ggml-base.bin"

/* One model on the Vulkan engine, ready to decode. */
typedef struct {
  wd_model_t *m;
  wd_tokenizer_t *tok;
  wd_mel_t *mel;
  wd_vk_engine_t *eng;
  int heads[1024][2];
  int n_heads;
} rig_t;

static void rig_free(rig_t *g) {
  wd_vk_engine_free(g->eng);
  wd_mel_free(g->mel);
  wd_tokenizer_free(g->tok);
  wd_model_free(g->m);
  memset(g, 0, sizeof *g);
}

/* 0, 1 to skip (no model file, no device), -1 on failure. */
static int rig_open(rig_t *g, const char *path) {
  memset(g, 0, sizeof *g);
  FILE *f = fopen(path, "rb");
  if (!f)
    return 1;
  fclose(f);
  char err[512] = "";
  int n_mel = 0, n_fft = 0;
  WD_CHECK_EQ_INT(wd_model_load(path, &g->m, err, sizeof err), 0);
  WD_CHECK_EQ_INT(wd_model_tokenizer_new(g->m, &g->tok), 0);
  const float *filters = wd_model_mel_filters(g->m, &n_mel, &n_fft);
  WD_CHECK_EQ_INT(wd_mel_new(n_mel, filters, &g->mel), 0);
  WD_CHECK_EQ_INT(wd_timing_heads(g->m, g->heads, 1024, &g->n_heads), 0);
  /* Keep lavapipe mapped so LeakSanitizer can name its exit-time leaks. */
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NODELETE);
  const wd_vk_engine_opts_t eo = { .device = -1, .max_seqs = 5, .max_audio = 1,
                                  /* the f32 kernels, held to the f32 reference; the
                                   * matrix units against them: test_engine_matrix.c */
                                  .exact = true };
  int rc = wd_vk_engine_new(g->m, &eo, &g->eng, err, sizeof err);
  if (rc == WD_ENODEVICE) {
    rig_free(g);
    return 1;
  }
  WD_CHECK_EQ_INT(rc, 0);
  if (rc < 0)
    fprintf(stderr, "engine: %s\n", err);
  return rc < 0 ? -1 : 0;
}

/* Appends seconds of silence, or a test file, to a growing PCM buffer. */
typedef struct {
  float *v;
  size_t n;
} pcm_t;

static void pcm_silence(pcm_t *p, double s) {
  const size_t k = (size_t)(s * 16000.0);
  p->v = realloc(p->v, (p->n + k) * sizeof *p->v);
  memset(p->v + p->n, 0, k * sizeof *p->v);
  p->n += k;
}

static void pcm_file(pcm_t *p, const char *name) {
  float *x = NULL;
  size_t k = 0;
  char err[256] = "";
  WD_CHECK_EQ_INT(wd_test_audio_decode_file(wd_test_data(name), NULL, &x, &k, err, sizeof err),
                  0);
  p->v = realloc(p->v, (p->n + k) * sizeof *p->v);
  memcpy(p->v + p->n, x, k * sizeof *x);
  p->n += k;
  free(x);
}

/* The long file: four clips twice, with silences of 0.5 to 12 s (100 s). */
static void pcm_long(pcm_t *p) {
  const char *const clips[] = { "audio/jfk.wav", "audio/synth/quick_fox.wav",
                                "audio/synth/numbers.wav", "audio/synth/ask_not.wav" };
  const double gaps[] = { 6.0, 1.0, 9.5, 2.0, 0.5, 12.0, 3.0, 4.5 };
  for (int i = 0; i < 8; i++) {
    pcm_file(p, clips[i % 4]);
    pcm_silence(p, gaps[i]);
  }
}

static int decode(rig_t *g, const pcm_t *p, const wd_decode_opts_t *o, wd_transcript_t *tr) {
  return wd_test_transcribe(wd_vk_engine_iface(g->eng), g->tok, g->mel, p->v, p->n, o, tr);
}

/* Lower case, letters, digits and single spaces only. */
static void normalise(const char *in, char *out, size_t cap) {
  size_t n = 0;
  int space = 1;
  for (const char *s = in; *s && n + 1 < cap; s++) {
    if (isalnum((unsigned char)*s)) {
      out[n++] = (char)tolower((unsigned char)*s);
      space = 0;
    } else if (!space && (isspace((unsigned char)*s) || *s == ',' || *s == '.' || *s == ';' ||
                          *s == '-' || *s == '!' || *s == '?')) {
      out[n++] = ' ';
      space = 1;
    }
  }
  while (n > 0 && out[n - 1] == ' ')
    n--;
  out[n] = '\0';
}

/* Segments in time order, none overlapping the one before, inside the
 * audio; prints them. */
static void check_times(const wd_transcript_t *tr) {
  for (int i = 0; i < tr->n_segments; i++) {
    const wd_segment_t *s = &tr->segments[i];
    fprintf(stderr, "  [%7.2f %7.2f] %s\n", s->start, s->end, s->text);
    WD_CHECK(s->start <= s->end);
    WD_CHECK(s->end <= tr->duration + 0.02);
    if (i > 0)
      WD_CHECK(s->start >= tr->segments[i - 1].end - 1e-6);
  }
}

/* Expected segments of one run. */
typedef struct {
  double start, end;
  const char *text;
} seg_ref_t;

static void check_segments(const wd_transcript_t *tr, const seg_ref_t *ref, int n_ref) {
  check_times(tr);
  WD_CHECK_EQ_INT(tr->n_segments, n_ref);
  for (int i = 0; i < tr->n_segments && i < n_ref; i++) {
    WD_CHECK_EQ_STR(tr->segments[i].text, ref[i].text);
    WD_CHECK_NEAR(tr->segments[i].start, ref[i].start, 0.02);
    WD_CHECK_NEAR(tr->segments[i].end, ref[i].end, 0.02);
  }
}

/* What openai/whisper 20250625 transcribe() prints for the long file below
 * with these tiny.en weights (ggml widened to f32, fp16=False, CPU): every
 * segment and time. It loses the second jfk.wav (49-60 s) and times the
 * fox that follows it 13 s early: the model's mistake, which an exact
 * implementation repeats. */
static const seg_ref_t LONG_REF[] = {
  { 0.00, 7.74, " And so my fellow Americans ask not what your country can do for you" },
  { 7.74, 10.94, " ask what you can do for your country." },
  { 16.94, 20.06, " The quick roundfark jump over the lazy nog." },
  { 20.06, 23.58, " speech recognition turns spoken words into text." },
  { 24.58, 30.58, " My phone number is 5.5, 1, 2, 3, 4, and the meetings start at 9.30." },
  { 40.30, 44.86, " And so my fellow Americans ask not what your country can do for you." },
  { 44.86, 46.98, " Ask what you can do for your country." },
  { 47.98, 53.98, " The quick roundfark jump over the lazy nog." },
  { 53.98, 60.98, " speech recognition turns spoken words into text." },
  { 77.98, 84.98, " My phone number is 5.5, 1, 2, 3, 4 and the meetings start at 9.30." },
  { 87.98, 92.98, " And so my fellow Americans ask not what your country can do for you." },
  { 92.98, 95.98, " Ask what you can do for your country." },
};

/* 100 s: four windows, speech across window edges, silences of 0.5 to 12 s;
 * the same segments, texts and times as openai/whisper. */
WD_TEST(long_file_with_silences_as_openai) {
  rig_t g;
  const int r = rig_open(&g, TINY);
  if (r > 0)
    wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
  if (r < 0)
    return;
  pcm_t p = { 0 };
  pcm_long(&p);
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  wd_transcript_t tr;
  const int rc = decode(&g, &p, &o, &tr);
  WD_CHECK_EQ_INT(rc, 0);
  if (rc == 0) {
    fprintf(stderr, "  %.1f s of audio, %d segments\n", tr.duration, tr.n_segments);
    check_segments(&tr, LONG_REF, (int)(sizeof LONG_REF / sizeof LONG_REF[0]));
    wd_transcript_free(&tr);
  }
  free(p.v);
  rig_free(&g);
}

/* An initial prompt (one segment, punctuated, where jfk.wav alone gives
 * two), a prefix, and clip_timestamps (a clip inside one window; two clips of the long
 * file, the second of which tiny.en mistakes for the fox and times past the
 * clip's end): openai/whisper's segments for each, all at temperature 0. */
WD_TEST(prompt_and_clips_as_openai) {
  rig_t g;
  const int r = rig_open(&g, TINY);
  if (r > 0)
    wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
  if (r < 0)
    return;
  pcm_t jfk = { 0 }, lng = { 0 };
  pcm_file(&jfk, "audio/jfk.wav");
  pcm_long(&lng);
  wd_decode_opts_t o;
  wd_transcript_t tr;
  /* the prompt */
  int32_t *prompt = NULL;
  wd_decode_opts_default(&o);
  WD_CHECK_EQ_INT(wd_decode_encode_text(g.tok, "Quick brown fox, lazy dog. Phone numbers.", &prompt,
                                        &o.n_prompt),
                  0);
  o.prompt = prompt;
  WD_CHECK_EQ_INT(decode(&g, &jfk, &o, &tr), 0);
  const seg_ref_t with_prompt[] = {
    { 0.00, 11.00, " And so my fellow Americans ask not what your country can do for you. Ask "
                   "what you can do for your country." },
  };
  check_segments(&tr, with_prompt, 1);
  wd_transcript_free(&tr);
  free(prompt);
  /* a prefix: openai decodes past it and keeps only what it sampled; here
   * the model, made to start mid-sentence, samples nothing but the
   * timestamps, and the window's one segment is blanked */
  int32_t *prefix = NULL;
  wd_decode_opts_default(&o);
  WD_CHECK_EQ_INT(wd_decode_encode_text(g.tok, "And so, my fellow Americans", &prefix,
                                        &o.n_prefix),
                  0);
  o.prefix = prefix;
  WD_CHECK_EQ_INT(decode(&g, &jfk, &o, &tr), 0);
  const seg_ref_t with_prefix[] = { { 0.00, 11.00, "" } };
  check_segments(&tr, with_prefix, 1);
  wd_transcript_free(&tr);
  free(prefix);
  /* one clip */
  wd_decode_opts_default(&o);
  const float c1[] = { 3.0f, 8.0f };
  o.clips = c1;
  o.n_clips = 2;
  WD_CHECK_EQ_INT(decode(&g, &jfk, &o, &tr), 0);
  const seg_ref_t one_clip[] = { { 3.00, 7.80, " Ask not what your country can do for you." } };
  check_segments(&tr, one_clip, 1);
  wd_transcript_free(&tr);
  /* two clips of the long file */
  const float c2[] = { 16.0f, 31.0f, 77.0f, 86.0f };
  o.clips = c2;
  o.n_clips = 4;
  WD_CHECK_EQ_INT(decode(&g, &lng, &o, &tr), 0);
  const seg_ref_t two_clips[] = {
    { 16.00, 20.20, " The quick roundfark jump over the lazy nog." },
    { 20.20, 24.72, " Speech recognition turns spoken words into text." },
    { 24.72, 30.56, " My phone number is 555, 1,2,3,4 and the meetings start set I'm 30." },
    { 77.00, 84.00, " The next roundfark jump over the lazy nog." },
    { 84.00, 92.00, " The next roundfark jump over the lazy nog." },
  };
  check_segments(&tr, two_clips, 5);
  wd_transcript_free(&tr);
  free(jfk.v);
  free(lng.v);
  rig_free(&g);
}

/* No speech: no text, with both models. */
WD_TEST(silence_and_noise_give_no_text) {
  const char *const models[] = { TINY, BASE };
  for (int m = 0; m < 2; m++) {
    rig_t g;
    const int r = rig_open(&g, models[m]);
    if (r > 0)
      wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
    if (r < 0)
      return;
    const char *const files[] = { "audio/synth/silence_3s.wav", "audio/synth/noise_3s.wav" };
    for (int f = 0; f < 2; f++) {
      pcm_t p = { 0 };
      pcm_file(&p, files[f]);
      wd_decode_opts_t o;
      wd_decode_opts_default(&o);
      wd_transcript_t tr;
      WD_CHECK_EQ_INT(decode(&g, &p, &o, &tr), 0);
      fprintf(stderr, "  %s %s: '%s'\n", m == 0 ? "tiny.en" : "base", files[f],
              tr.text ? tr.text : "(null)");
      WD_CHECK(tr.text && tr.text[0] == '\0');
      wd_transcript_free(&tr);
      free(p.v);
    }
    rig_free(&g);
  }
}

static const char *const JFK =
    "and so my fellow americans ask not what your country can do for you ask what you can do "
    "for your country";

/* Beam search (forks and reorders of the KV caches on the device) and
 * best_of sampling (seeded) on real speech. */
WD_TEST(beam_search_and_best_of) {
  rig_t g;
  const int r = rig_open(&g, TINY);
  if (r > 0)
    wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
  if (r < 0)
    return;
  pcm_t p = { 0 };
  pcm_file(&p, "audio/jfk.wav");
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  o.beam_size = 5;
  wd_transcript_t tr;
  char norm[1024];
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &tr), 0);
  normalise(tr.text ? tr.text : "", norm, sizeof norm);
  fprintf(stderr, "  beam 5: %s\n", norm);
  WD_CHECK_EQ_STR(norm, JFK);
  check_times(&tr);
  wd_transcript_free(&tr);
  /* sampling at 0.4 (best of 5): still the sentence; the same seed twice
   * gives the same bits */
  wd_decode_opts_default(&o);
  o.best_of = 5;
  o.seed = 7;
  wd_decode_set_temperature(&o, 0.4f, 0.2f);
  wd_transcript_t a, b;
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &a), 0);
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &b), 0);
  normalise(a.text ? a.text : "", norm, sizeof norm);
  fprintf(stderr, "  best of 5 at 0.4: %s\n", norm);
  WD_CHECK(strstr(norm, "ask not what your country can do for you") != NULL);
  WD_CHECK(a.text && b.text && strcmp(a.text, b.text) == 0);
  WD_CHECK(a.n_segments > 0 && a.segments[0].temperature >= 0.4f - 1e-6f);
  wd_transcript_free(&a);
  wd_transcript_free(&b);
  free(p.v);
  rig_free(&g);
}

/* openai/whisper 20250625 word_timestamps=True on jfk.wav, tiny.en (f32,
 * CPU): word, start, end. */
static const struct {
  const char *word;
  double start, end;
} JFK_WORDS[] = {
  { " And", 0.00, 0.76 },      { " so", 0.76, 1.06 },     { " my", 1.06, 1.46 },
  { " fellow", 1.46, 1.76 },   { " Americans", 1.76, 2.26 }, { " ask", 2.26, 3.88 },
  { " not", 3.88, 4.52 },      { " what", 4.52, 5.70 },   { " your", 5.70, 6.02 },
  { " country", 6.02, 6.36 },  { " can", 6.36, 6.76 },    { " do", 6.76, 7.02 },
  { " for", 7.02, 7.26 },      { " you", 7.26, 8.06 },    { " ask", 8.06, 8.66 },
  { " what", 8.66, 8.94 },     { " you", 8.94, 9.28 },    { " can", 9.28, 9.50 },
  { " do", 9.50, 9.72 },       { " for", 9.72, 9.92 },    { " your", 9.92, 10.22 },
  { " country", 10.22, 10.50 },
};

/* Word timestamps: openai's words and times; the segments take their ends
 * from the words (7.74 -> 8.06, 10.74 -> 10.50) as openai's do. */
WD_TEST(word_timestamps_jfk_as_openai) {
  rig_t g;
  const int r = rig_open(&g, TINY);
  if (r > 0)
    wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
  if (r < 0)
    return;
  pcm_t p = { 0 };
  pcm_file(&p, "audio/jfk.wav");
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  o.word_timestamps = 1;
  o.align_heads = (const int (*)[2])g.heads;
  o.n_align_heads = g.n_heads;
  wd_transcript_t tr;
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &tr), 0);
  int n = 0;
  const int n_ref = (int)(sizeof JFK_WORDS / sizeof JFK_WORDS[0]);
  for (int i = 0; i < tr.n_segments; i++) {
    const wd_segment_t *s = &tr.segments[i];
    fprintf(stderr, "  [%6.2f %6.2f]%s\n", s->start, s->end, s->text);
    for (int k = 0; k < s->n_words; k++, n++) {
      const wd_word_t *w = &s->words[k];
      fprintf(stderr, "    %6.2f %6.2f %.2f %s\n", w->start, w->end, (double)w->probability,
              w->word);
      WD_CHECK(w->probability > 0.0f && w->probability <= 1.0f);
      if (n >= n_ref)
        continue;
      WD_CHECK_EQ_STR(w->word, JFK_WORDS[n].word);
      WD_CHECK_NEAR(w->start, JFK_WORDS[n].start, 0.02);
      WD_CHECK_NEAR(w->end, JFK_WORDS[n].end, 0.02);
    }
  }
  WD_CHECK_EQ_INT(n, n_ref);
  WD_CHECK_EQ_INT(tr.n_segments, 2);
  if (tr.n_segments == 2) {
    WD_CHECK_NEAR(tr.segments[0].end, 8.06, 0.02);
    WD_CHECK_NEAR(tr.segments[1].end, 10.50, 0.02);
  }
  wd_transcript_free(&tr);
  free(p.v);
  rig_free(&g);
}

/* The multilingual model detects German and translates it into English.
 * At temperature 0 alone: base's translation of this clip fails openai's
 * log-probability test (-1.34), and what the sampled attempts then say is
 * the seed's luck. */
WD_TEST(base_translates_german) {
  rig_t g;
  const int r = rig_open(&g, BASE);
  if (r > 0)
    wd_test_skip("no model (scripts/fetch-model.sh) or no Vulkan device");
  if (r < 0)
    return;
  pcm_t p = { 0 };
  pcm_file(&p, "audio/synth/de_weather.wav");
  wd_decode_opts_t o;
  wd_decode_opts_default(&o);
  wd_decode_set_temperature(&o, 0.0f, 0.0f);
  o.translate = 1;
  wd_transcript_t tr;
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &tr), 0);
  char norm[1024];
  normalise(tr.text ? tr.text : "", norm, sizeof norm);
  fprintf(stderr, "  %s (%.2f): %s\n", tr.language, (double)tr.language_prob, norm);
  WD_CHECK_EQ_STR(tr.language, "de");
  WD_CHECK(strstr(norm, "good morning") != NULL);
  WD_CHECK(strstr(norm, "guten") == NULL && strstr(norm, "morgen") == NULL);
  wd_transcript_free(&tr);
  /* the same audio transcribed stays German */
  o.translate = 0;
  WD_CHECK_EQ_INT(decode(&g, &p, &o, &tr), 0);
  normalise(tr.text ? tr.text : "", norm, sizeof norm);
  WD_CHECK(strstr(norm, "guten morgen") != NULL);
  wd_transcript_free(&tr);
  free(p.v);
  rig_free(&g);
}

int main(void) { return wd_test_main(); }
