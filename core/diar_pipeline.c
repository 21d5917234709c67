/*
 * diar_pipeline.c - the parts of the diarization pipeline (diar.h) that
 * need no network: the chunk and frame geometry, powerset decoding, the
 * embedding masks and their mapping onto CAM++'s trunk frames, the speaker
 * count, clustering and assignment, reconstruction and the turns; plus the
 * parameters' defaults and the result's release. diar.c runs the networks
 * and hands their outputs (wd__diar_acts_t) to wd__diar_finish.
 *
 * The reference throughout is pyannote.audio 4.0.7 as configured by
 * speaker-diarization-3.1 (pipelines/speaker_diarization.py,
 * pipelines/utils/diarization.py, core/inference.py, utils/signal.py,
 * pipelines/clustering.py); each function names the piece it mirrors.
 *
 * One deviation: pyannote pads the clusters with silent extra "speakers"
 * when the per-frame count exceeds the number of clusters (one cluster,
 * two overlapping voices), which then get the overlapped frames and no
 * embedding. Here the count is capped at the number of clusters instead: a
 * speaker without a centroid could be neither named nor matched to a known
 * speaker.
 *
 * And two additions: the clustering is pyannote's with cannot-link
 * constraints between the local speakers of one chunk
 * (wd_diar_cluster_linked, WD__DIAR_LINK_RATIO below); and a local speaker
 * whose left and right parts sound like two voices is split at that
 * change point into two embeddings (diar.c, WD__DIAR_SPLIT_*), both
 * clustered and reconstructed part by part (wd__diar_reconstruct_split).
 *
 * Memory: O(duration): per chunk (one per step_s) its activity, 589 x 3
 * bytes, and 6 embedding slots of 192 floats (3 local speakers and the
 * right parts of split ones) and 3 cuts (6.4 KB per second of signal at
 * the 1 s step); per aggregated frame (59 per second) a count byte and the
 * clusters' sums. Clustering is bounded by WD_DIAR_CLUSTER_N_MAX.
 * Thread-safe: no shared state.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diar.h"
#include "diar_cluster.h"
#include "diar_internal.h"
#include "error.h"

/* Defaults. threshold and min_cluster_size are speaker-diarization-3.1's
 * (pyannote/speaker-diarization-3.1 config.yaml), which were tuned for
 * WeSpeaker's ResNet34 embeddings: they are the starting point only and
 * are to be tuned for CAM++ by the evaluation (issue #41); this is the one
 * place they are set. */
#define WD__DIAR_DEFAULT_THRESHOLD 0.7045654963945799f
#define WD__DIAR_DEFAULT_MIN_CLUSTER_SIZE 12
#define WD__DIAR_DEFAULT_STEP_S 1.0f /* 3.1: segmentation step 0.1 x 10 s */
/* Cannot-link (wd_diar_cluster_linked): two clusters are kept apart when
 * at least this share of the smaller one's chunks (and at least one) also
 * hold a local speaker of the other. Not a tuned figure: on the evaluation
 * files (issue #41) no speaker's clustered embeddings ever came twice from
 * one chunk (0 of 628 (chunk, speaker) pairs), so any small share works
 * there; 10% leaves room for a segmentation model that sometimes splits
 * one voice into two local speakers on long files. */
#define WD__DIAR_LINK_RATIO 0.1f

void wd_diar_params_default(wd_diar_params_t *p) {
  p->threshold = WD__DIAR_DEFAULT_THRESHOLD;
  p->min_cluster_size = WD__DIAR_DEFAULT_MIN_CLUSTER_SIZE;
  p->min_speakers = 0;
  p->max_speakers = 0;
  p->step_s = WD__DIAR_DEFAULT_STEP_S;
}

void wd_diar_result_free(wd_diar_result_t *r) {
  if (!r)
    return;
  free(r->turns);
  free(r->centroids);
  r->turns = NULL;
  r->centroids = NULL;
  r->n_turns = 0;
  r->n_speakers = 0;
}

/* ---- geometry (Inference.slide, Inference.aggregate) ---- */

void wd__diar_geom(size_t n, double step_s, wd__diar_geom_t *g) {
  double st = rint(step_s * WD_DIAR_SAMPLE_RATE); /* Python's round(step * sr) */
  g->n_samples = n;
  g->step = st >= 1 ? (size_t)st : 1;
  g->step_s = step_s;
  /* Whole chunks, then a zero-padded last one where the signal goes on
   * past them (or is shorter than a chunk). */
  const size_t whole = n >= WD__DIAR_CHUNK ? 1 + (n - WD__DIAR_CHUNK) / g->step : 0;
  const int has_last = n < WD__DIAR_CHUNK || (n - WD__DIAR_CHUNK) % g->step > 0;
  g->n_chunks = whole + (size_t)has_last;
  /* closest_frame(chunks' end + half a frame) + 1 */
  const double end = 10.0 + (double)(g->n_chunks - 1) * step_s;
  g->n_frames = (size_t)rint(end / WD__DIAR_FRAME_STEP_S) + 1;
}

size_t wd__diar_chunk_frame(const wd__diar_geom_t *g, size_t c) {
  return (size_t)rint((double)c * g->step_s / WD__DIAR_FRAME_STEP_S);
}

/* ---- segmentation outputs ---- */

/* diar_seg.h's classes: {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2} (the same
 * table as wd_diar_powerset_mask, kept here so that this file links
 * without the network). */
static const uint8_t k_powerset[7] = { 0x0, 0x1, 0x2, 0x4, 0x3, 0x5, 0x6 };

void wd__diar_powerset_decode(const float *logp, size_t n, uint8_t *act) {
  for (size_t f = 0; f < n; f++) {
    const float *l = logp + 7 * f;
    int best = 0;
    for (int c = 1; c < 7; c++)
      if (l[c] > l[best])
        best = c;
    for (int s = 0; s < WD__DIAR_LOCAL; s++)
      act[WD__DIAR_LOCAL * f + (size_t)s] = (uint8_t)((k_powerset[best] >> s) & 1u);
  }
}

/* get_embeddings(exclude_overlap=True): clean frames are those where no
 * other local speaker is active. */
int wd__diar_embed_mask(const uint8_t *act, int s, uint8_t *mask) {
  int active = 0, clean = 0;
  for (size_t f = 0; f < WD__DIAR_FRAMES; f++) {
    const uint8_t *a = act + WD__DIAR_LOCAL * f;
    const int on = a[s] != 0;
    active += on;
    clean += on && a[0] + a[1] + a[2] == 1;
  }
  if (active == 0)
    return -1;
  const int use_clean = clean > WD__DIAR_MIN_CLEAN;
  for (size_t f = 0; f < WD__DIAR_FRAMES; f++) {
    const uint8_t *a = act + WD__DIAR_LOCAL * f;
    mask[f] = (uint8_t)(a[s] && (!use_clean || a[0] + a[1] + a[2] == 1));
  }
  return clean;
}

/* ---- the trunk-frame mapping ---- */

/* Centres in samples of the chunk: segmentation frame f at 270 f + 495.5
 * (the middle of its 991-sample receptive field), trunk frame j at
 * 320 j + 200 (fbank frame 2 j's middle). */
size_t wd__diar_trunk_to_seg(size_t j) {
  const double f = rint(((double)(320 * j) + 200.0 - 495.5) / 270.0);
  return f <= 0 ? 0 : f >= WD__DIAR_FRAMES - 1 ? WD__DIAR_FRAMES - 1 : (size_t)f;
}

size_t wd__diar_seg_to_trunk(size_t f, size_t T_out) {
  const double j = rint(((double)(270 * f) + 495.5 - 200.0) / 320.0);
  return j <= 0 ? 0 : j >= (double)(T_out - 1) ? T_out - 1 : (size_t)j;
}

void wd__diar_trunk_weights(const uint8_t *mask, size_t T_out, float *w) {
  /* The nearest trunk frame grows with f, so the segmentation frames of
   * each trunk frame are a contiguous run, walked once. */
  size_t f = 0;
  for (size_t j = 0; j < T_out; j++) {
    unsigned on = 0, cnt = 0;
    while (f < WD__DIAR_FRAMES && wd__diar_seg_to_trunk(f, T_out) == j) {
      on += mask[f];
      cnt++;
      f++;
    }
    w[j] = cnt ? (float)on / (float)cnt : (float)mask[wd__diar_trunk_to_seg(j)];
  }
}

/* ---- change points inside a local speaker ---- */

void wd__diar_split_part(const uint8_t *mask, int cut, int side, uint8_t *part) {
  for (int f = 0; f < WD__DIAR_FRAMES; f++)
    part[f] = (uint8_t)(mask[f] && (f < cut) == (side == 0));
}

double wd__diar_cos_dist(const float *a, const float *b) {
  double d = 0, na = 0, nb = 0;
  for (size_t k = 0; k < WD_DIAR_EMB_DIM; k++) {
    d += (double)a[k] * b[k];
    na += (double)a[k] * a[k];
    nb += (double)b[k] * b[k];
  }
  return na > 0 && nb > 0 ? 1.0 - d / sqrt(na * nb) : 1.0;
}

/* ---- speaker count (SpeakerDiarizationMixin.speaker_count) ---- */

int wd__diar_count(const uint8_t *act, const wd__diar_geom_t *g, uint8_t *count) {
  /* float32 sums, as pyannote's aggregate: small integers, exact. */
  float *sum = calloc(2 * g->n_frames, sizeof *sum);
  if (!sum)
    return WD_ENOMEM;
  float *cover = sum + g->n_frames;
  for (size_t c = 0; c < g->n_chunks; c++) {
    const size_t f0 = wd__diar_chunk_frame(g, c);
    const uint8_t *a = act + c * WD__DIAR_FRAMES * WD__DIAR_LOCAL;
    for (size_t f = 0; f < WD__DIAR_FRAMES && f0 + f < g->n_frames; f++) {
      sum[f0 + f] += (float)(a[3 * f] + a[3 * f + 1] + a[3 * f + 2]);
      cover[f0 + f] += 1.0f;
    }
  }
  /* The mean over the covering chunks, rounded half to even (np.rint);
   * frames no chunk covers count 0 (missing=0). */
  for (size_t i = 0; i < g->n_frames; i++)
    count[i] = cover[i] > 0 ? (uint8_t)rintf(sum[i] / cover[i]) : 0;
  free(sum);
  return 0;
}

/* ---- reconstruction (reconstruct + to_diarization) ---- */

/* Slot s's activity at frame f of a chunk (a: its 589 x 3 activity, cut:
 * its 3 cuts or NULL): slot s < 3 local speaker s before its cut, slot
 * 3 + s local speaker s from its cut on. */
static uint8_t slot_act(const uint8_t *a, const uint16_t *cut, int s, size_t f) {
  const int l = s % WD__DIAR_LOCAL;
  const size_t c = cut ? cut[l] : 0;
  if (s < WD__DIAR_LOCAL)
    return (uint8_t)(a[3 * f + (size_t)l] && (c == 0 || f < c));
  return (uint8_t)(a[3 * f + (size_t)l] && c > 0 && f >= c);
}

int wd__diar_reconstruct(const uint8_t *act, const int *hard, const uint8_t *count,
                         const wd__diar_geom_t *g, int k, uint8_t *binary) {
  /* hard n_chunks x 3 into the slots' layout, the right parts unused. */
  const size_t n = g->n_chunks;
  int *h = malloc((n ? n : 1) * WD__DIAR_SLOTS * sizeof *h);
  if (!h)
    return WD_ENOMEM;
  for (size_t c = 0; c < n; c++)
    for (int s = 0; s < WD__DIAR_SLOTS; s++)
      h[c * WD__DIAR_SLOTS + (size_t)s] =
          s < WD__DIAR_LOCAL ? hard[c * WD__DIAR_LOCAL + (size_t)s] : -1;
  const int rc = wd__diar_reconstruct_split(act, NULL, h, count, g, k, binary);
  free(h);
  return rc;
}

int wd__diar_reconstruct_split(const uint8_t *act, const uint16_t *cut, const int *hard,
                               const uint8_t *count, const wd__diar_geom_t *g, int k,
                               uint8_t *binary) {
  const size_t K = k > 0 ? (size_t)k : 0;
  memset(binary, 0, g->n_frames * K);
  if (K == 0)
    return 0;
  float *sum = calloc(g->n_frames * K, sizeof *sum); /* (n_frames, k) */
  if (!sum)
    return WD_ENOMEM;
  for (size_t c = 0; c < g->n_chunks; c++) {
    const size_t f0 = wd__diar_chunk_frame(g, c);
    const uint8_t *a = act + c * WD__DIAR_FRAMES * WD__DIAR_LOCAL;
    const int *h = hard + WD__DIAR_SLOTS * c;
    const uint16_t *ct = cut ? cut + WD__DIAR_LOCAL * c : NULL;
    for (size_t f = 0; f < WD__DIAR_FRAMES && f0 + f < g->n_frames; f++) {
      /* Each cluster present in the chunk adds the max of its slots,
       * once: at its first slot. */
      for (int s = 0; s < WD__DIAR_SLOTS; s++) {
        if (h[s] < 0 || h[s] >= k)
          continue;
        int first = 1;
        uint8_t m = 0;
        for (int t = 0; t < WD__DIAR_SLOTS; t++)
          if (h[t] == h[s]) {
            first &= t >= s;
            const uint8_t v = slot_act(a, ct, t, f);
            if (v > m)
              m = v;
          }
        if (first)
          sum[(f0 + f) * K + (size_t)h[s]] += (float)m;
      }
    }
  }
  /* Each frame: the count[i] clusters of highest sum, the lower first on
   * ties (np.argsort(-x) of a short row: insertion sort, stable). */
  for (size_t i = 0; i < g->n_frames; i++) {
    const size_t want = count[i] < K ? count[i] : K;
    const float *r = sum + i * K;
    uint8_t *b = binary + i * K;
    for (size_t n = 0; n < want; n++) {
      size_t best = K;
      for (size_t kk = 0; kk < K; kk++)
        if (!b[kk] && (best == K || r[kk] > r[best]))
          best = kk;
      b[best] = 1;
    }
  }
  free(sum);
  return 0;
}

/* ---- turns (to_annotation: Binarize onset = offset = 0.5) ---- */

static double frame_middle(size_t i) {
  return (double)i * WD__DIAR_FRAME_STEP_S + 0.5 * WD__DIAR_FRAME_DUR_S;
}

static int turn_cmp(const void *pa, const void *pb) {
  const wd_diar_turn_t *a = pa, *b = pb;
  if (a->start != b->start)
    return a->start < b->start ? -1 : 1;
  if (a->speaker != b->speaker)
    return a->speaker < b->speaker ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

/* Appends [start, end) clipped to [0, end_s] when something is left. */
static int turn_add(wd_diar_turn_t **t, size_t *n, size_t *cap, double start, double end,
                    int spk, double end_s) {
  if (end > end_s)
    end = end_s;
  if (start < 0)
    start = 0;
  if (!(end > start))
    return 0;
  if (*n == *cap) {
    const size_t nc = *cap ? 2 * *cap : 64;
    wd_diar_turn_t *g = realloc(*t, nc * sizeof *g);
    if (!g)
      return WD_ENOMEM;
    *t = g;
    *cap = nc;
  }
  (*t)[(*n)++] = (wd_diar_turn_t){ .start = start, .end = end, .speaker = spk };
  return 0;
}

void wd__diar_normalize(const float *src, float *dst) {
  double ss = 0;
  for (size_t d = 0; d < WD_DIAR_EMB_DIM; d++)
    ss += (double)src[d] * src[d];
  const double inv = ss > 0 ? 1.0 / sqrt(ss) : 0; /* a zero vector stays zero */
  for (size_t d = 0; d < WD_DIAR_EMB_DIM; d++)
    dst[d] = (float)(src[d] * inv);
}

int wd__diar_turns(const uint8_t *binary, size_t n_frames, int k, double end_s,
                   const float *centroids, wd_diar_result_t *out) {
  memset(out, 0, sizeof *out);
  const size_t K = k > 0 ? (size_t)k : 0;
  if (K == 0 || n_frames == 0)
    return 0;
  wd_diar_turn_t *t = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (size_t kk = 0; kk < K && rc == 0; kk++) {
    int on = binary[kk] != 0;
    size_t start = 0;
    for (size_t i = 1; i < n_frames && rc == 0; i++) {
      const int y = binary[i * K + kk] != 0;
      if (on && !y) {
        rc = turn_add(&t, &n, &cap, frame_middle(start), frame_middle(i), (int)kk, end_s);
        on = 0;
      } else if (!on && y) {
        start = i;
        on = 1;
      }
    }
    if (on && rc == 0)
      rc = turn_add(&t, &n, &cap, frame_middle(start), frame_middle(n_frames - 1), (int)kk,
                    end_s);
  }
  int *order = malloc(K * sizeof *order); /* cluster -> speaker, -1: no turn */
  if (rc < 0 || !order) {
    free(t);
    free(order);
    return WD_ENOMEM;
  }
  if (n > 0)
    qsort(t, n, sizeof *t, turn_cmp);
  for (size_t kk = 0; kk < K; kk++)
    order[kk] = -1;
  int n_spk = 0;
  for (size_t i = 0; i < n; i++)
    if (order[t[i].speaker] < 0)
      order[t[i].speaker] = n_spk++;
  for (size_t i = 0; i < n; i++)
    t[i].speaker = order[t[i].speaker];
  if (n > 0) /* speakers' numbers changed the ties' order */
    qsort(t, n, sizeof *t, turn_cmp);
  if (centroids && n_spk > 0) {
    out->centroids = malloc((size_t)n_spk * WD_DIAR_EMB_DIM * sizeof *out->centroids);
    if (!out->centroids) {
      free(t);
      free(order);
      return WD_ENOMEM;
    }
    for (size_t kk = 0; kk < K; kk++) {
      if (order[kk] < 0)
        continue;
      wd__diar_normalize(centroids + kk * WD_DIAR_EMB_DIM,
                         out->centroids + (size_t)order[kk] * WD_DIAR_EMB_DIM);
    }
  }
  free(order);
  out->turns = t;
  out->n_turns = n;
  out->n_speakers = n_spk;
  return 0;
}

/* ---- after the networks ---- */

int wd__diar_acts_init(wd__diar_acts_t *a, const wd__diar_geom_t *g) {
  const size_t n = g->n_chunks;
  *a = (wd__diar_acts_t){ .g = *g };
  a->act = calloc(n * WD__DIAR_FRAMES * WD__DIAR_LOCAL, 1);
  a->emb = calloc(n * WD__DIAR_SLOTS * WD_DIAR_EMB_DIM, sizeof *a->emb);
  a->state = malloc(n * WD__DIAR_SLOTS);
  a->cut = calloc(n * WD__DIAR_LOCAL, sizeof *a->cut);
  if (!a->act || !a->emb || !a->state || !a->cut) {
    wd__diar_acts_free(a);
    return WD_ENOMEM;
  }
  memset(a->state, -1, n * WD__DIAR_SLOTS);
  return 0;
}

void wd__diar_acts_free(wd__diar_acts_t *a) {
  free(a->act);
  free(a->emb);
  free(a->state);
  free(a->cut);
  a->cut = NULL;
  a->act = NULL;
  a->emb = NULL;
  a->state = NULL;
}

/* The clusters' centroids (k x 192: the mean of their clustered
 * embeddings, BaseClustering.assign_embeddings) and every embedded
 * (chunk, speaker)'s cluster: the centroid of least cosine distance, the
 * first on ties (np.argmax); hard[i] = -2 for inactive ones. */
static void assign(const wd__diar_acts_t *a, const size_t *train, const int *labels,
                   size_t n_train, int k, float *cent, int *hard) {
  const size_t K = (size_t)k, D = WD_DIAR_EMB_DIM, n = a->g.n_chunks * WD__DIAR_SLOTS;
  double acc[WD_DIAR_EMB_DIM];
  for (size_t kk = 0; kk < K; kk++) {
    size_t cnt = 0;
    memset(acc, 0, sizeof acc);
    for (size_t i = 0; i < n_train; i++) {
      if ((size_t)labels[i] != kk)
        continue;
      for (size_t d = 0; d < D; d++)
        acc[d] += a->emb[train[i] * D + d];
      cnt++;
    }
    for (size_t d = 0; d < D; d++)
      cent[kk * D + d] = cnt ? (float)(acc[d] / (double)cnt) : 0.0f;
  }
  double *cn = malloc(K * sizeof *cn); /* centroid norms; NULL: plain dots */
  for (size_t kk = 0; cn && kk < K; kk++) {
    double ss = 0;
    for (size_t d = 0; d < D; d++)
      ss += (double)cent[kk * D + d] * cent[kk * D + d];
    cn[kk] = ss > 0 ? sqrt(ss) : 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (a->state[i] < 0) {
      hard[i] = -2;
      continue;
    }
    int best = 0;
    double best_sim = -INFINITY;
    for (size_t kk = 0; kk < K; kk++) {
      double dot = 0;
      for (size_t d = 0; d < D; d++)
        dot += (double)a->emb[i * D + d] * cent[kk * D + d];
      const double sim = cn ? dot / cn[kk] : dot; /* the embedding's own norm is common */
      if (sim > best_sim) {
        best_sim = sim;
        best = (int)kk;
      }
    }
    hard[i] = best;
  }
  free(cn);
}

/* Whether chunk rank r is one of m evenly spaced among n_ch: r = j n_ch / m
 * (floor) for some j < m, that j being ceil(r m / n_ch). m <= n_ch. */
static int chunk_picked(size_t r, size_t m, size_t n_ch) {
  const size_t j = (r * m + n_ch - 1) / n_ch;
  return j < m && j * n_ch / m == r;
}

/* The embeddings of m evenly spaced chunks among the n_ch that train[0 ..
 * n_all) (ascending embedding indices) touches. */
static size_t picked_count(const size_t *train, size_t n_all, size_t m, size_t n_ch) {
  size_t c = 0, r = 0;
  for (size_t i = 0; i < n_all; i++) {
    r += i > 0 && train[i] / WD__DIAR_SLOTS != train[i - 1] / WD__DIAR_SLOTS; /* chunk rank */
    c += (size_t)chunk_picked(r, m, n_ch);
  }
  return c;
}

/* train[0 .. n_all): the embeddings to cluster, ascending. Beyond
 * WD_DIAR_CLUSTER_N_MAX, keeps (in place) those of as many evenly spaced
 * chunks as fit, every local speaker of a kept chunk with it: an even
 * subsample of the embeddings themselves would rarely keep two of one
 * chunk (never at a stride of 3), and the chunks' cannot-link
 * (wd_diar_cluster_linked) would vanish from uploads longer than some
 * 20 minutes. The number kept. */
static size_t train_chunks(size_t *train, size_t n_all) {
  if (n_all <= WD_DIAR_CLUSTER_N_MAX)
    return n_all;
  size_t n_ch = 0;
  for (size_t i = 0; i < n_all; i++)
    n_ch += i == 0 || train[i] / WD__DIAR_SLOTS != train[i - 1] / WD__DIAR_SLOTS;
  /* m chunks: first the share that fits on average, then fewer until their
   * embeddings fit (a chunk holds 1 .. WD__DIAR_SLOTS: m = 1 always fits). */
  size_t m = n_ch * WD_DIAR_CLUSTER_N_MAX / n_all;
  m = m < 1 ? 1 : m;
  for (size_t c; m > 1 && (c = picked_count(train, n_all, m, n_ch)) > WD_DIAR_CLUSTER_N_MAX;) {
    const size_t shrunk = m * WD_DIAR_CLUSTER_N_MAX / c;
    m = shrunk < m ? shrunk : m - 1;
  }
  size_t kept = 0, r = 0, prev = train[0] / WD__DIAR_SLOTS;
  for (size_t i = 0; i < n_all; i++) {
    const size_t ch = train[i] / WD__DIAR_SLOTS; /* read before kept may overwrite it */
    r += ch != prev;
    prev = ch;
    if (chunk_picked(r, m, n_ch))
      train[kept++] = train[i]; /* kept <= i: in place */
  }
  return kept;
}

int wd__diar_finish(const wd__diar_acts_t *a, const wd_diar_params_t *p, wd_diar_result_t *out) {
  memset(out, 0, sizeof *out);
  if (p->min_speakers > 0 && p->max_speakers > 0 && p->min_speakers > p->max_speakers)
    return WD_EINVAL;
  const wd__diar_geom_t *g = &a->g;
  const size_t n = g->n_chunks * WD__DIAR_SLOTS, D = WD_DIAR_EMB_DIM;
  int rc = WD_ENOMEM, k = 0;
  uint8_t *count = malloc(g->n_frames);
  size_t *train = malloc((n ? n : 1) * sizeof *train);
  int *hard = malloc((n ? n : 1) * sizeof *hard);
  float *temb = NULL, *cent = NULL;
  int *labels = NULL, *group = NULL;
  uint8_t *binary = NULL;
  if (!count || !train || !hard)
    goto fail;
  if ((rc = wd__diar_count(a->act, g, count)) < 0)
    goto fail;
  uint8_t max_count = 0;
  for (size_t i = 0; i < g->n_frames; i++)
    if (count[i] > max_count)
      max_count = count[i];
  if (max_count == 0) { /* no speech anywhere */
    rc = 0;
    goto fail;
  }

  /* The clustered embeddings: all of them up to N_MAX, else those of
   * evenly spaced chunks, whole (train_chunks). */
  size_t n_all = 0, n_train = 0;
  for (size_t i = 0; i < n; i++)
    if (a->state[i] == 1)
      train[n_all++] = i;
  n_train = train_chunks(train, n_all);
  rc = WD_ENOMEM;
  labels = malloc((n_train ? n_train : 1) * sizeof *labels);
  temb = malloc((n_train ? n_train : 1) * D * sizeof *temb);
  group = malloc((n_train ? n_train : 1) * sizeof *group);
  if (!labels || !temb || !group)
    goto fail;
  if (n_train == 0) {
    /* Nothing long enough to cluster: one speaker, its centroid the mean
     * of whatever was embedded (pyannote's would be NaN). */
    for (size_t i = 0; i < n; i++)
      if (a->state[i] == 0)
        train[n_train++] = i;
    free(labels);
    labels = calloc(n_train ? n_train : 1, sizeof *labels);
    if (!labels)
      goto fail;
    k = 1;
  } else {
    /* Each embedding's group is its chunk: the local speakers of one chunk
     * are different voices to the segmentation model (cannot-link). */
    for (size_t i = 0; i < n_train; i++) {
      memcpy(temb + i * D, a->emb + train[i] * D, D * sizeof *temb);
      group[i] = (int)(train[i] / WD__DIAR_SLOTS);
    }
    rc = wd_diar_cluster_linked(temb, n_train, D, group, WD__DIAR_LINK_RATIO, p->threshold,
                                p->min_cluster_size, p->min_speakers, p->max_speakers, labels, &k);
    if (rc < 0)
      goto fail;
  }
  rc = WD_ENOMEM;
  cent = malloc((size_t)k * D * sizeof *cent);
  binary = malloc(g->n_frames * (size_t)k);
  if (!cent || !binary)
    goto fail;
  assign(a, train, labels, n_train, k, cent, hard);

  /* The count capped at max_speakers (as pyannote) and at k (see the top). */
  for (size_t i = 0; i < g->n_frames; i++)
    if (p->max_speakers > 0 && count[i] > p->max_speakers)
      count[i] = (uint8_t)p->max_speakers;
  if ((rc = wd__diar_reconstruct_split(a->act, a->cut, hard, count, g, k, binary)) < 0)
    goto fail;
  rc = wd__diar_turns(binary, g->n_frames, k, (double)g->n_samples / WD_DIAR_SAMPLE_RATE, cent,
                      out);
fail:
  free(count);
  free(train);
  free(hard);
  free(temb);
  free(cent);
  free(labels);
  free(group);
  free(binary);
  return rc;
}
