/*
 * diar.c - the diarization pipeline's network side (diar.h): loading both
 * models, running the segmentation over the chunks and CAM++ over each
 * chunk's speakers, then handing the results to wd__diar_finish
 * (diar_pipeline.c) for counting, clustering and reconstruction.
 *
 * The loop over the signal, BATCH chunks at a time:
 *  1. the chunks' 10 s windows (pointers into pcm; the last chunk, which
 *     runs past the end, zero-padded in a buffer of its own) go through
 *     wd_diar_seg_forward together, and each frame's powerset class is
 *     decoded into the activity of 3 local speakers;
 *  2. for each chunk with an active speaker, one embedding per active
 *     local speaker, pooled (wd_campp_embed) from the CAM++ trunk frames of
 *     the chunk's window with per-frame weights made from that speaker's
 *     mask (its frames without overlap; wd__diar_trunk_weights maps the
 *     589 segmentation frames onto the trunk's 50 frames per second by
 *     time). pyannote runs the embedding network once per (chunk, speaker)
 *     with the mask applied in its pooling. The mask enters CAM++ only at
 *     the pooling, so the trunk (95 % of the network's work) need not run
 *     per speaker, nor per chunk: with 10 s windows every second it would
 *     see each second of audio ten times (2.5 s of CPU per 10 s of audio
 *     measured, 80 % of it the trunk). It runs once over the signal
 *     instead, in blocks of 10 s (BLOCK_SAMPLES) each computed with 1 s of
 *     the neighbouring audio on both sides (MARGIN_SAMPLES) so that no kept
 *     frame sees a block edge's zero padding; a chunk's window takes its
 *     499 frames from the (at most two) blocks it spans (trunk_ring_t). The
 *     trunk's normalizations (the fbank's mean, CAM++'s context means) then
 *     span a block with its margins instead of the chunk's window: the
 *     evaluation (tests/bench/diar_eval.py) measures what that costs.
 *     A clustered local speaker is also tried split in two at a change
 *     point inside its mask (change_point): the segmentation model
 *     sometimes gives one local speaker two voices of a window.
 * should_stop is polled before each batch and each chunk's embeddings.
 *
 * Memory: per batch BATCH x 589 x 7 log-probabilities, one block's fbank
 * (1199 x 80) and trunk (600 x 512) floats, RING blocks of kept trunk
 * frames (500 x 512 each) and a chunk's window of them (499 x 512); per chunk of the
 * signal what wd__diar_acts_t keeps (about 4 KB per second: diar_pipeline.c).
 *
 * Threading: everything on the calling thread; the model is read-only
 * after loading and may be shared by any number of threads.
 */
#include "diar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diar_campp.h"
#include "diar_fbank.h"
#include "diar_internal.h"
#include "diar_seg.h"
#include "error.h"
#include "fault.h"

#define BATCH 8 /* chunks per segmentation forward */

/* The trunk's blocks. A trunk frame stands for 320 samples (the fbank's
 * 160-sample hop, then the TDNN's stride 2): global trunk frame j starts
 * at sample 320 j. Block b keeps global frames [500 b, 500 b + 500), which
 * it computes from samples [BLOCK_SAMPLES b - MARGIN_SAMPLES,
 * BLOCK_SAMPLES (b + 1) + BLOCK_TAIL + MARGIN_SAMPLES) (clipped to the
 * signal): BLOCK_TAIL makes the 500th frame's fbank frames whole. */
#define FRAME_SAMPLES 320
#define BLOCK_SAMPLES 160000
#define BLOCK_FRAMES (BLOCK_SAMPLES / FRAME_SAMPLES)
#define BLOCK_TAIL 240
#define MARGIN_SAMPLES 16000
#define RING 3 /* blocks kept: a chunk spans two, and chunks come in order */
_Static_assert(MARGIN_SAMPLES % FRAME_SAMPLES == 0, "a margin of whole frames");
_Static_assert(WD__DIAR_FRAMES == WD_DIAR_SEG_FRAMES, "diar_internal.h's frames");
_Static_assert(WD__DIAR_LOCAL == WD_DIAR_SEG_SPEAKERS, "diar_internal.h's speakers");
_Static_assert(WD__DIAR_CHUNK == WD_DIAR_SEG_WINDOW, "diar_internal.h's chunk");
_Static_assert(WD_DIAR_EMB_DIM == WD_CAMPP_EMB, "diar.h's embedding size");

struct wd_diar {
  wd_diar_seg_t *seg;
  wd_campp_t *emb;
};

int wd_diar_load(const char *seg_path, const char *emb_path, wd_diar_t **ret, char *err,
                 size_t err_len) {
  *ret = NULL;
  wd_diar_t *d = calloc(1, sizeof *d);
  if (!d)
    return WD_ENOMEM;
  int rc = wd_diar_seg_load(seg_path, &d->seg, err, err_len);
  if (rc == 0)
    rc = wd_campp_load(emb_path, &d->emb, err, err_len);
  if (rc < 0) {
    wd_diar_free(d);
    return rc;
  }
  *ret = d;
  return 0;
}

void wd_diar_free(wd_diar_t *d) {
  if (!d)
    return;
  wd_diar_seg_free(d->seg);
  wd_campp_free(d->emb);
  free(d);
}

/* Per-run scratch: reused by every batch and chunk. */
typedef struct {
  float *pad;    /* WD__DIAR_CHUNK: the zero-padded last chunk */
  float *logp;   /* BATCH x 589 x 7 */
  float *feats;  /* a block's fbank: at most T_blk x 80 */
  float *bhid;   /* a block's trunk: at most wd_campp_frames(T_blk) x 512 */
  float *ring;   /* RING x BLOCK_FRAMES x 512: the kept frames of blocks ring_b[] */
  long ring_b[RING];
  float *hidden; /* a chunk's window of trunk frames: T_out x 512 */
  float *w;      /* T_out trunk-frame weights */
  double *split; /* change_point's sums: 6 x 512 */
  size_t T_blk, T_out;
} scratch_t;

static void scratch_free(scratch_t *s) {
  free(s->pad);
  free(s->logp);
  free(s->feats);
  free(s->bhid);
  free(s->ring);
  free(s->hidden);
  free(s->w);
  free(s->split);
}

static int scratch_init(scratch_t *s) {
  memset(s, 0, sizeof *s);
  s->T_blk = wd_diar_fbank_frames(BLOCK_SAMPLES + BLOCK_TAIL + 2 * MARGIN_SAMPLES);
  s->T_out = wd_campp_frames(wd_diar_fbank_frames(WD__DIAR_CHUNK));
  for (int r = 0; r < RING; r++)
    s->ring_b[r] = -1;
  s->pad = calloc(WD__DIAR_CHUNK, sizeof *s->pad);
  s->logp = malloc((size_t)BATCH * WD__DIAR_FRAMES * WD_DIAR_SEG_CLASSES * sizeof *s->logp);
  s->feats = malloc(s->T_blk * WD_DIAR_FBANK_BINS * sizeof *s->feats);
  s->bhid = malloc(wd_campp_frames(s->T_blk) * WD_CAMPP_HIDDEN * sizeof *s->bhid);
  s->ring = malloc((size_t)RING * BLOCK_FRAMES * WD_CAMPP_HIDDEN * sizeof *s->ring);
  s->hidden = malloc(s->T_out * WD_CAMPP_HIDDEN * sizeof *s->hidden);
  s->w = malloc(s->T_out * sizeof *s->w);
  s->split = malloc(6 * WD_CAMPP_HIDDEN * sizeof *s->split);
  if (!s->pad || !s->logp || !s->feats || !s->bhid || !s->ring || !s->hidden || !s->w ||
      !s->split) {
    scratch_free(s);
    return WD_ENOMEM;
  }
  return 0;
}

/* Block b's kept trunk frames into its ring slot (zeros for frames past
 * the signal, or all of them when the block's audio is too short for the
 * trunk). */
static int block_trunk(const wd_diar_t *d, const float *pcm, size_t n, long b, scratch_t *s) {
  float *dst = s->ring + (size_t)(b % RING) * BLOCK_FRAMES * WD_CAMPP_HIDDEN;
  const size_t lo = (size_t)b * BLOCK_SAMPLES;
  const size_t s0 = lo > MARGIN_SAMPLES ? lo - MARGIN_SAMPLES : 0;
  size_t s1 = lo + BLOCK_SAMPLES + BLOCK_TAIL + MARGIN_SAMPLES;
  s1 = s1 < n ? s1 : n;
  memset(dst, 0, (size_t)BLOCK_FRAMES * WD_CAMPP_HIDDEN * sizeof *dst);
  s->ring_b[b % RING] = b;
  const size_t T = s1 > s0 ? wd_diar_fbank_frames(s1 - s0) : 0;
  if (T < 4)
    return 0; /* a few ms of audio: nothing to pool from */
  int rc = wd_diar_fbank(pcm + s0, s1 - s0, s->feats);
  if (rc == 0)
    rc = wd_campp_trunk(d->emb, s->feats, T, s->bhid);
  if (rc < 0)
    return rc;
  /* Block frame i starts at sample s0 + 320 i; global frame 500 b + k at
   * lo + 320 k: k = i - (lo - s0) / 320. */
  const size_t skip = (lo - s0) / FRAME_SAMPLES, To = wd_campp_frames(T);
  for (size_t k = 0; k < BLOCK_FRAMES && skip + k < To; k++)
    memcpy(dst + k * WD_CAMPP_HIDDEN, s->bhid + (skip + k) * WD_CAMPP_HIDDEN,
           WD_CAMPP_HIDDEN * sizeof *dst);
  return 0;
}

/* s->hidden: the T_out trunk frames of the window starting at sample
 * start (its nearest whole frame), from the blocks it spans. */
static int window_trunk(const wd_diar_t *d, const float *pcm, size_t n, size_t start,
                        scratch_t *s) {
  const size_t j0 = (start + FRAME_SAMPLES / 2) / FRAME_SAMPLES;
  for (size_t k = 0; k < s->T_out;) {
    const size_t j = j0 + k;
    const long b = (long)(j / BLOCK_FRAMES);
    if (s->ring_b[b % RING] != b) {
      const int rc = block_trunk(d, pcm, n, b, s);
      if (rc < 0)
        return rc;
    }
    const size_t off = j % BLOCK_FRAMES;
    size_t run = BLOCK_FRAMES - off;
    run = run < s->T_out - k ? run : s->T_out - k;
    memcpy(s->hidden + k * WD_CAMPP_HIDDEN,
           s->ring + ((size_t)(b % RING) * BLOCK_FRAMES + off) * WD_CAMPP_HIDDEN,
           run * WD_CAMPP_HIDDEN * sizeof *s->hidden);
    k += run;
  }
  return 0;
}

/* Pooled statistics (mean, then std; wd_campp_embed's) of weights
 * summing v1 (squares v2) with sums sx, sxx of w x and w x^2 per channel. */
static void pooled(double v1, double v2, const double *sx, const double *sxx, float *stats) {
  const double den = v1 - v2 / v1;
  for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++) {
    const double mean = sx[c] / v1, var = sxx[c] - sx[c] * mean;
    stats[c] = (float)mean;
    stats[WD_CAMPP_HIDDEN + c] = den > 1e-12 && var > 0 ? (float)sqrt(var / den) : 0.0f;
  }
}

/* Trunk frame j of s->hidden into a part's weighted sums: the weights
 * (v1), their squares (v2), and per channel w x (sx) and w x^2 (sxx). */
static void add_frame(const scratch_t *s, size_t j, double *v1, double *v2, double *sx,
                      double *sxx) {
  const double w = s->w[j];
  if (w <= 0)
    return;
  *v1 += w, *v2 += w * w;
  const float *x = s->hidden + j * WD_CAMPP_HIDDEN;
  for (size_t c = 0; c < WD_CAMPP_HIDDEN; c++)
    sx[c] += w * x[c], sxx[c] += w * x[c] * x[c];
}

/* A clustered local speaker's change point (diar_internal.h,
 * WD__DIAR_SPLIT_*): the cut (a segmentation frame) whose left and right
 * parts of mask have the most distant embeddings, written to eL and eR,
 * or 0 when no split reaches WD__DIAR_SPLIT_DISTANCE (or there are too
 * few clean frames for two parts). s->w holds mask's trunk weights. The
 * candidates are scored at trunk-frame resolution from running sums of
 * the weighted statistics (one pass over the trunk frames, then only the
 * dense layer per part), the winner's parts embedded exactly. */
static int change_point(const wd_diar_t *d, const uint8_t *mask, scratch_t *s, float *eL,
                        float *eR) {
  uint16_t idx[WD__DIAR_FRAMES]; /* the clean frames, in order */
  int k = 0;
  for (int f = 0; f < WD__DIAR_FRAMES; f++)
    if (mask[f])
      idx[k++] = (uint16_t)f;
  if (k < 2 * WD__DIAR_SPLIT_MIN_PART)
    return 0;
  const size_t H = WD_CAMPP_HIDDEN, T = s->T_out;
  double *sx = s->split, *sxx = sx + H, *lx = sxx + H, *lxx = lx + H, *rx = lxx + H,
         *rxx = rx + H;
  double v1 = 0, v2 = 0, l1 = 0, l2 = 0;
  memset(sx, 0, 4 * H * sizeof *sx); /* sx, sxx, lx, lxx */
  for (size_t j = 0; j < T; j++)
    add_frame(s, j, &v1, &v2, sx, sxx);
  float stats[2 * WD_CAMPP_HIDDEN], l[WD_DIAR_EMB_DIM], r[WD_DIAR_EMB_DIM];
  double best = WD__DIAR_SPLIT_DISTANCE;
  int cut = 0;
  size_t j = 0; /* the left sums hold trunk frames 0 .. j-1 */
  for (int q = WD__DIAR_SPLIT_MIN_PART; q <= k - WD__DIAR_SPLIT_MIN_PART;
       q += WD__DIAR_SPLIT_STEP) {
    const size_t J = wd__diar_seg_to_trunk(idx[q], T);
    for (; j < J; j++)
      add_frame(s, j, &l1, &l2, lx, lxx);
    if (!(l1 > 0) || !(v1 - l1 > 0))
      continue;
    pooled(l1, l2, lx, lxx, stats);
    wd_campp_dense_f32(d->emb, stats, l);
    for (size_t c = 0; c < H; c++)
      rx[c] = sx[c] - lx[c], rxx[c] = sxx[c] - lxx[c];
    pooled(v1 - l1, v2 - l2, rx, rxx, stats);
    wd_campp_dense_f32(d->emb, stats, r);
    const double dist = wd__diar_cos_dist(l, r);
    if (dist >= best) {
      best = dist;
      cut = idx[q];
    }
  }
  if (cut == 0)
    return 0;
  uint8_t part[WD__DIAR_FRAMES];
  wd__diar_split_part(mask, cut, 0, part);
  wd__diar_trunk_weights(part, T, s->w);
  if (wd_campp_embed(d->emb, s->hidden, T, s->w, l) < 0)
    return 0;
  wd__diar_split_part(mask, cut, 1, part);
  wd__diar_trunk_weights(part, T, s->w);
  if (wd_campp_embed(d->emb, s->hidden, T, s->w, r) < 0)
    return 0;
  memcpy(eL, l, sizeof l);
  memcpy(eR, r, sizeof r);
  return cut;
}

/* The embeddings of chunk c's active local speakers (act: its 589 x 3
 * activity), pooled from the window's trunk frames; a clustered one with
 * a change point (change_point) split into two. */
static int embed_chunk(const wd_diar_t *d, const float *pcm, size_t n, size_t start, size_t c,
                       scratch_t *s, wd__diar_acts_t *a) {
  const uint8_t *act = a->act + c * WD__DIAR_FRAMES * WD__DIAR_LOCAL;
  uint8_t mask[WD__DIAR_FRAMES];
  int have_trunk = 0;
  for (int sp = 0; sp < WD__DIAR_LOCAL; sp++) {
    const size_t i = c * WD__DIAR_SLOTS + (size_t)sp;
    const int clean = wd__diar_embed_mask(act, sp, mask);
    if (clean < 0)
      continue; /* never active: state stays -1 */
    if (!have_trunk) {
      const int rc = window_trunk(d, pcm, n, start, s);
      if (rc < 0)
        return rc;
      have_trunk = 1;
    }
    wd__diar_trunk_weights(mask, s->T_out, s->w); /* change_point reuses them */
    const int rc = wd_campp_embed(d->emb, s->hidden, s->T_out, s->w, a->emb + i * WD_DIAR_EMB_DIM);
    if (rc == WD_EINVAL)
      continue; /* no weight at all (the speaker's frames all past the signal) */
    if (rc < 0)
      return rc;
    a->state[i] = (double)clean >= WD__DIAR_TRAIN_RATIO * WD__DIAR_FRAMES ? 1 : 0;
    if (a->state[i] != 1)
      continue;
    const size_t j = i + WD__DIAR_LOCAL; /* the right part's slot */
    const int cut = change_point(d, mask, s, a->emb + i * WD_DIAR_EMB_DIM,
                                 a->emb + j * WD_DIAR_EMB_DIM);
    if (cut > 0) {
      a->cut[c * WD__DIAR_LOCAL + (size_t)sp] = (uint16_t)cut;
      a->state[j] = 1;
    }
  }
  return 0;
}

/* Tests (core/fault.h, diar_delay:MS): waits MS before a batch of windows,
 * looking at should_stop every 20 ms as the windows would. 1: stopped. */
static int fault_wait(int (*should_stop)(void *), void *stop_arg) {
  for (long ms = wd__fault_diar_delay_ms(); ms > 0; ms -= 20) {
    if (should_stop && should_stop(stop_arg))
      return 1;
    nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000L }, NULL);
  }
  return 0;
}

int wd_diar_run(const wd_diar_t *d, const float *pcm, size_t n, const wd_diar_params_t *p,
                int (*should_stop)(void *), void *stop_arg, wd_diar_result_t *out) {
  memset(out, 0, sizeof *out);
  if (!(p->step_s > 0 && p->step_s <= 10) || !isfinite(p->threshold) || p->min_speakers < 0 ||
      p->max_speakers < 0)
    return WD_EINVAL;
  if (n == 0)
    return 0;
  wd__diar_geom_t g;
  wd__diar_geom(n, (double)p->step_s, &g);
  wd__diar_acts_t a;
  scratch_t s;
  int rc = wd__diar_acts_init(&a, &g);
  if (rc < 0)
    return rc;
  if ((rc = scratch_init(&s)) < 0) {
    wd__diar_acts_free(&a);
    return rc;
  }
  for (size_t c0 = 0; c0 < g.n_chunks; c0 += BATCH) {
    if (should_stop && should_stop(stop_arg)) {
      rc = WD_ECANCELED;
      goto out;
    }
    if (fault_wait(should_stop, stop_arg)) { /* tests: a long diarization (core/fault.h) */
      rc = WD_ECANCELED;
      goto out;
    }
    if (wd__fault_diar_oom()) { /* tests: a failure part-way (core/fault.h) */
      rc = WD_ENOMEM;
      goto out;
    }
    const size_t nb = g.n_chunks - c0 < BATCH ? g.n_chunks - c0 : BATCH;
    const float *win[BATCH];
    for (size_t b = 0; b < nb; b++) {
      const size_t start = (c0 + b) * g.step;
      if (start + WD__DIAR_CHUNK <= n) {
        win[b] = pcm + start;
      } else { /* the last chunk: what is left, then zeros */
        const size_t left = start < n ? n - start : 0;
        memcpy(s.pad, pcm + start, left * sizeof *pcm);
        memset(s.pad + left, 0, (WD__DIAR_CHUNK - left) * sizeof *pcm);
        win[b] = s.pad;
      }
    }
    if ((rc = wd_diar_seg_forward(d->seg, win, nb, s.logp)) < 0)
      goto out;
    for (size_t b = 0; b < nb; b++) {
      const size_t c = c0 + b;
      wd__diar_powerset_decode(s.logp + b * WD__DIAR_FRAMES * WD_DIAR_SEG_CLASSES, WD__DIAR_FRAMES,
                               a.act + c * WD__DIAR_FRAMES * WD__DIAR_LOCAL);
      if (b > 0 && should_stop && should_stop(stop_arg)) {
        rc = WD_ECANCELED;
        goto out;
      }
      if ((rc = embed_chunk(d, pcm, n, c * g.step, c, &s, &a)) < 0)
        goto out;
    }
  }
  rc = wd__diar_finish(&a, p, out);
out:
  scratch_free(&s);
  wd__diar_acts_free(&a);
  return rc;
}

int wd_diar_embed_clip(const wd_diar_t *d, const float *pcm, size_t n, float *emb) {
  if (n < WD_DIAR_SAMPLE_RATE / 2)
    return WD_EINVAL;
  const size_t T = wd_diar_fbank_frames(n), T_out = wd_campp_frames(T);
  float *feats = malloc(T * WD_DIAR_FBANK_BINS * sizeof *feats);
  float *hidden = malloc(T_out * WD_CAMPP_HIDDEN * sizeof *hidden);
  int rc = WD_ENOMEM;
  if (!feats || !hidden)
    goto out;
  if ((rc = wd_diar_fbank(pcm, n, feats)) < 0 ||
      (rc = wd_campp_trunk(d->emb, feats, T, hidden)) < 0 ||
      (rc = wd_campp_embed(d->emb, hidden, T_out, NULL, emb)) < 0)
    goto out;
  wd__diar_normalize(emb, emb);
out:
  free(feats);
  free(hidden);
  return rc;
}
