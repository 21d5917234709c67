/*
 * test_diar_pipeline.c - the diarization pipeline's parts that need no
 * network (core/diar_internal.h), on hand-made segmentation outputs with
 * answers worked out by hand from pyannote.audio 4.0.7's definitions:
 * chunk and frame geometry, powerset decoding, the embedding masks and
 * their trunk-frame weights, the speaker count (its rounding half to even),
 * reconstruction (max within a cluster, top-k per frame, ties), the turns
 * (frame middles, renumbering, clipping) and the whole tail of the pipeline
 * on synthetic embeddings of two speakers; and the count, reconstruction
 * and turns equal to pyannote's own functions' on synthetic segmentations
 * (tests/data/diar/make_pipeline_reference.py).
 *
 * The pipeline with the real networks is tests/core/test_diar_run.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diar.h"
#include "diar_cluster.h"
#include "diar_internal.h"
#include "error.h"
#include "wd_test.h"

#define SR 16000
#define FR WD__DIAR_FRAMES

static double middle(size_t i) {
  return (double)i * 270.0 / 16000.0 + 0.5 * 991.0 / 16000.0;
}

WD_TEST(geometry_as_pyannote_slides) {
  wd__diar_geom_t g;
  wd__diar_geom(30 * SR, 1.0, &g); /* 21 whole chunks, nothing left over */
  WD_CHECK_EQ_INT(g.n_chunks, 21);
  WD_CHECK_EQ_INT(g.step, SR);
  WD_CHECK_EQ_INT(g.n_frames, 1779); /* rint(30 / 0.016875) + 1 */
  wd__diar_geom(5 * SR, 1.0, &g);    /* shorter than a chunk: one, padded */
  WD_CHECK_EQ_INT(g.n_chunks, 1);
  WD_CHECK_EQ_INT(g.n_frames, 594);
  wd__diar_geom(10 * SR + SR / 2, 1.0, &g); /* one whole, one padded */
  WD_CHECK_EQ_INT(g.n_chunks, 2);
  WD_CHECK_EQ_INT(wd__diar_chunk_frame(&g, 1), 59);  /* rint(59.26) */
  WD_CHECK_EQ_INT(wd__diar_chunk_frame(&g, 2), 119); /* rint(118.52) */
  wd__diar_geom(11 * SR, 1.0, &g);
  WD_CHECK_EQ_INT(g.n_chunks, 2);
  wd__diar_geom(11 * SR, 0.5, &g);
  WD_CHECK_EQ_INT(g.n_chunks, 3);
  WD_CHECK_EQ_INT(g.step, 8000);
}

WD_TEST(powerset_decoding) {
  float logp[8 * 7];
  for (int f = 0; f < 8; f++)
    for (int c = 0; c < 7; c++)
      logp[7 * f + c] = (f < 7 && c == f) ? -0.1f : -5.0f;
  /* frame 7: a tie between {} and {0}: the first class wins */
  logp[7 * 7 + 0] = logp[7 * 7 + 1] = -0.5f;
  uint8_t act[8 * 3];
  wd__diar_powerset_decode(logp, 8, act);
  static const uint8_t want[8][3] = { { 0, 0, 0 }, { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 },
                                      { 1, 1, 0 }, { 1, 0, 1 }, { 0, 1, 1 }, { 0, 0, 0 } };
  for (int f = 0; f < 8; f++)
    for (int s = 0; s < 3; s++)
      WD_CHECK_EQ_INT(act[3 * f + s], want[f][s]);
}

WD_TEST(embedding_masks_exclude_overlap) {
  uint8_t act[FR * 3] = { 0 }, mask[FR];
  for (int f = 0; f < 100; f++)
    act[3 * f + 0] = 1; /* speaker 0: frames 0..99 */
  for (int f = 50; f < 150; f++)
    act[3 * f + 1] = 1; /* speaker 1: frames 50..149, overlapping 50..99 */
  for (int f = 200; f < 210; f++)
    act[3 * f + 2] = 1; /* speaker 2: 10 frames, ... */
  for (int f = 203; f < 210; f++)
    act[3 * f + 1] = 1; /* ... 7 of them overlapped: 3 clean, too few */
  WD_CHECK_EQ_INT(wd__diar_embed_mask(act, 0, mask), 50);
  int on = 0;
  for (int f = 0; f < FR; f++)
    on += mask[f];
  WD_CHECK_EQ_INT(on, 50);
  WD_CHECK(mask[0] && mask[49] && !mask[50]);
  WD_CHECK_EQ_INT(wd__diar_embed_mask(act, 1, mask), 50);
  WD_CHECK(!mask[99] && mask[100] && mask[149] && !mask[203]);
  /* Too few clean frames: the speaker's whole activity. */
  WD_CHECK_EQ_INT(wd__diar_embed_mask(act, 2, mask), 3);
  on = 0;
  for (int f = 0; f < FR; f++)
    on += mask[f];
  WD_CHECK_EQ_INT(on, 10);
  uint8_t none[FR * 3] = { 0 };
  WD_CHECK_EQ_INT(wd__diar_embed_mask(none, 1, mask), -1);
}

WD_TEST(trunk_frames_follow_time) {
  const size_t T_out = 499; /* CAM++ trunk frames of a 10 s chunk */
  /* Centres: segmentation frame f at 270 f + 495.5 samples, trunk frame j
   * at 320 j + 200. */
  WD_CHECK_EQ_INT(wd__diar_trunk_to_seg(0), 0);
  WD_CHECK_EQ_INT(wd__diar_trunk_to_seg(1), 0);   /* 520 vs 495.5 */
  WD_CHECK_EQ_INT(wd__diar_trunk_to_seg(250), 295); /* 80200: (80200-495.5)/270 = 295.2 */
  WD_CHECK_EQ_INT(wd__diar_trunk_to_seg(498), FR - 1);
  WD_CHECK_EQ_INT(wd__diar_seg_to_trunk(0, T_out), 1);
  WD_CHECK_EQ_INT(wd__diar_seg_to_trunk(100, T_out), 85); /* 27295.5 / 320 = 85.3 */
  WD_CHECK_EQ_INT(wd__diar_seg_to_trunk(FR - 1, T_out), 497);
  float w[499];
  uint8_t mask[FR];
  memset(mask, 1, sizeof mask);
  wd__diar_trunk_weights(mask, T_out, w);
  for (size_t j = 0; j < T_out; j++)
    WD_CHECK_NEAR(w[j], 1.0, 0);
  /* One active segmentation frame weighs on its nearest trunk frame only. */
  memset(mask, 0, sizeof mask);
  mask[100] = 1;
  wd__diar_trunk_weights(mask, T_out, w);
  double sum = 0;
  for (size_t j = 0; j < T_out; j++)
    sum += w[j];
  WD_CHECK(w[85] > 0);
  WD_CHECK_NEAR(sum, w[85], 0);
  /* The first second active: trunk frames up to ~1 s weigh 1, after 0. */
  for (int f = 0; f < 59; f++)
    mask[f] = 1;
  wd__diar_trunk_weights(mask, T_out, w);
  WD_CHECK_NEAR(w[0], 1.0, 0);
  WD_CHECK_NEAR(w[40], 1.0, 0);
  WD_CHECK_NEAR(w[60], 0.0, 0);
}

/* Two chunks of an 11 s signal (frames 0..588 and 59..647 of 653). */
static void two_chunks(wd__diar_geom_t *g, uint8_t *act) {
  wd__diar_geom(11 * SR, 1.0, g);
  memset(act, 0, 2 * FR * 3);
}

WD_TEST(speaker_count_rounds_half_to_even) {
  wd__diar_geom_t g;
  uint8_t act[2 * FR * 3], count[653];
  two_chunks(&g, act);
  WD_CHECK_EQ_INT(g.n_frames, 653);
  for (int f = 0; f < FR; f++) {
    act[3 * f + 0] = 1;             /* chunk 0: one speaker */
    act[3 * (FR + f) + 0] = 1;      /* chunk 1: two */
    act[3 * (FR + f) + 1] = 1;
  }
  WD_CHECK_EQ_INT(wd__diar_count(act, &g, count), 0);
  WD_CHECK_EQ_INT(count[0], 1);
  WD_CHECK_EQ_INT(count[58], 1);
  WD_CHECK_EQ_INT(count[59], 2); /* (1 + 2) / 2 = 1.5 -> 2 */
  WD_CHECK_EQ_INT(count[588], 2);
  WD_CHECK_EQ_INT(count[647], 2);
  WD_CHECK_EQ_INT(count[648], 0); /* no chunk covers it */
  memset(act, 0, sizeof act);
  for (int f = 0; f < FR; f++)
    act[3 * (FR + f) + 2] = 1; /* only chunk 1, one speaker */
  WD_CHECK_EQ_INT(wd__diar_count(act, &g, count), 0);
  WD_CHECK_EQ_INT(count[100], 0); /* 0.5 -> 0 */
  WD_CHECK_EQ_INT(count[600], 1);
}

WD_TEST(reconstruction_top_k_and_turns) {
  wd__diar_geom_t g;
  uint8_t act[2 * FR * 3], count[653], bin[653 * 2];
  two_chunks(&g, act);
  for (int f = 0; f < FR; f++) {
    act[3 * f + 0] = 1;
    act[3 * (FR + f) + 0] = 1;
    act[3 * (FR + f) + 1] = 1;
  }
  WD_CHECK_EQ_INT(wd__diar_count(act, &g, count), 0);
  int hard[6] = { 0, -2, -2, 0, 1, -2 };
  WD_CHECK_EQ_INT(wd__diar_reconstruct(act, hard, count, &g, 2, bin), 0);
  WD_CHECK(bin[0] == 1 && bin[1] == 0);
  WD_CHECK(bin[2 * 59] == 1 && bin[2 * 59 + 1] == 1);
  WD_CHECK(bin[2 * 648] == 0 && bin[2 * 648 + 1] == 0);
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd__diar_turns(bin, g.n_frames, 2, 11.0, NULL, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  WD_CHECK_EQ_INT(r.n_turns, 2);
  if (r.n_turns == 2) {
    WD_CHECK_EQ_INT(r.turns[0].speaker, 0);
    WD_CHECK_NEAR(r.turns[0].start, middle(0), 1e-12);
    WD_CHECK_NEAR(r.turns[0].end, middle(648), 1e-12);
    WD_CHECK_EQ_INT(r.turns[1].speaker, 1);
    WD_CHECK_NEAR(r.turns[1].start, middle(59), 1e-12);
    WD_CHECK_NEAR(r.turns[1].end, middle(648), 1e-12);
  }
  wd_diar_result_free(&r);
  WD_CHECK(r.turns == NULL && r.n_turns == 0);

  /* Both local speakers of chunk 1 in one cluster: the max, not the sum;
   * count 1 where the sums tie (chunk 0's cluster 1 against chunk 1's 0
   * over frames 59..588: 1 each): the lower cluster. */
  memset(act, 0, sizeof act);
  for (int f = 0; f < FR; f++) {
    act[3 * f + 2] = 1;
    act[3 * (FR + f) + 0] = 1;
    act[3 * (FR + f) + 1] = 1;
  }
  int hard2[6] = { -2, -2, 1, 0, 0, -2 };
  memset(count, 1, sizeof count);
  WD_CHECK_EQ_INT(wd__diar_reconstruct(act, hard2, count, &g, 2, bin), 0);
  WD_CHECK(bin[2 * 10 + 1] == 1 && bin[2 * 10] == 0);   /* only chunk 0: cluster 1 */
  WD_CHECK(bin[2 * 100] == 1 && bin[2 * 100 + 1] == 0); /* tie 1 vs 1: cluster 0 */
  WD_CHECK(bin[2 * 600] == 1 && bin[2 * 600 + 1] == 0); /* only chunk 1 */
  /* The count is capped at the number of clusters. */
  memset(count, 3, sizeof count);
  WD_CHECK_EQ_INT(wd__diar_reconstruct(act, hard2, count, &g, 2, bin), 0);
  WD_CHECK(bin[2 * 100] == 1 && bin[2 * 100 + 1] == 1);
}

/* A split local speaker (issue #41): its frames before the cut go to its
 * slot's cluster, those from the cut on to slot 3 + s's; both parts in
 * one cluster give back the unsplit speaker (the max, not the sum). */
WD_TEST(reconstruction_split_local_speaker) {
  wd__diar_geom_t g;
  uint8_t act[2 * FR * 3], count[653], bin[653 * 2];
  two_chunks(&g, act);
  for (int f = 0; f < FR; f++)
    act[3 * f + 0] = 1; /* chunk 0 only, local speaker 0 throughout */
  uint16_t cut[6] = { 300, 0, 0, 0, 0, 0 };
  int hard[12] = { 0, -2, -2, 1, -1, -1, -2, -2, -2, -1, -1, -1 };
  memset(count, 1, sizeof count);
  WD_CHECK_EQ_INT(wd__diar_reconstruct_split(act, cut, hard, count, &g, 2, bin), 0);
  WD_CHECK(bin[2 * 10] == 1 && bin[2 * 10 + 1] == 0);
  WD_CHECK(bin[2 * 299] == 1 && bin[2 * 299 + 1] == 0);
  WD_CHECK(bin[2 * 300] == 0 && bin[2 * 300 + 1] == 1);
  WD_CHECK(bin[2 * 588] == 0 && bin[2 * 588 + 1] == 1);
  hard[3] = 0; /* both parts cluster 0: the speaker whole */
  WD_CHECK_EQ_INT(wd__diar_reconstruct_split(act, cut, hard, count, &g, 2, bin), 0);
  WD_CHECK(bin[2 * 10] == 1 && bin[2 * 400] == 1 && bin[2 * 400 + 1] == 0);
  /* No cut (NULL): slot 3 stays silent, slot 0 has it all. */
  hard[3] = 1;
  WD_CHECK_EQ_INT(wd__diar_reconstruct_split(act, NULL, hard, count, &g, 2, bin), 0);
  WD_CHECK(bin[2 * 400] == 1 && bin[2 * 400 + 1] == 0);
}

WD_TEST(split_part_and_cos_dist) {
  uint8_t mask[FR], l[FR], r[FR];
  for (int f = 0; f < FR; f++)
    mask[f] = (uint8_t)(f % 3 != 0);
  wd__diar_split_part(mask, 100, 0, l);
  wd__diar_split_part(mask, 100, 1, r);
  int nl = 0, nr = 0, bad = 0;
  for (int f = 0; f < FR; f++) {
    nl += l[f];
    nr += r[f];
    bad += (l[f] && f >= 100) || (r[f] && f < 100) || (l[f] | r[f]) != mask[f];
  }
  WD_CHECK_EQ_INT(bad, 0);
  WD_CHECK_EQ_INT(nl, 66); /* 1..99 without multiples of 3 */
  WD_CHECK_EQ_INT(nl + nr, 392);
  float a[WD_DIAR_EMB_DIM] = { 0 }, b[WD_DIAR_EMB_DIM] = { 0 }, z[WD_DIAR_EMB_DIM] = { 0 };
  a[0] = 2.0f;
  b[0] = 1.0f;
  b[1] = 1.0f;
  WD_CHECK_NEAR(wd__diar_cos_dist(a, a), 0.0, 1e-12);
  WD_CHECK_NEAR(wd__diar_cos_dist(a, b), 1.0 - sqrt(0.5), 1e-9);
  b[0] = -1.0f;
  b[1] = 0.0f;
  WD_CHECK_NEAR(wd__diar_cos_dist(a, b), 2.0, 1e-12);
  WD_CHECK_NEAR(wd__diar_cos_dist(a, z), 1.0, 1e-12);
}

WD_TEST(turns_renumbered_and_clipped) {
  enum { N = 100, K = 3 };
  uint8_t bin[N * K] = { 0 };
  for (int i = 10; i < 20; i++)
    bin[i * K + 2] = 1; /* cluster 2 first: speaker 0 */
  for (int i = 30; i < N; i++)
    bin[i * K + 2] = 1; /* to the end: ends at the last frame's middle */
  for (int i = 50; i <= 60; i++)
    bin[i * K + 0] = 1; /* cluster 0: speaker 1; cluster 1 never: dropped */
  float cent[K * WD_DIAR_EMB_DIM] = { 0 };
  cent[0 * WD_DIAR_EMB_DIM + 0] = 3; /* cluster 0 along axis 0 */
  cent[2 * WD_DIAR_EMB_DIM + 1] = -2; /* cluster 2 along -axis 1 */
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd__diar_turns(bin, N, K, 1.5, cent, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  WD_CHECK_EQ_INT(r.n_turns, 3);
  if (r.n_turns == 3) {
    WD_CHECK_EQ_INT(r.turns[0].speaker, 0);
    WD_CHECK_NEAR(r.turns[0].start, middle(10), 1e-12);
    WD_CHECK_NEAR(r.turns[0].end, middle(20), 1e-12);
    WD_CHECK_NEAR(r.turns[1].start, middle(30), 1e-12);
    WD_CHECK_NEAR(r.turns[1].end, 1.5, 1e-12); /* middle(99) = 1.70: clipped */
    WD_CHECK_EQ_INT(r.turns[2].speaker, 1);
    WD_CHECK_NEAR(r.turns[2].start, middle(50), 1e-12);
    WD_CHECK_NEAR(r.turns[2].end, middle(61), 1e-12);
  }
  WD_CHECK(r.centroids != NULL);
  if (r.centroids) {
    WD_CHECK_NEAR(r.centroids[1], -1.0, 1e-6);
    WD_CHECK_NEAR(r.centroids[WD_DIAR_EMB_DIM + 0], 1.0, 1e-6);
  }
  wd_diar_result_free(&r);
}

/* A deterministic unit-scale pseudo-random number in [-1, 1). */
static float noise(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* 30 s: speaker A (local speaker 0) until 15 s, B (local speaker 1) after;
 * embeddings are A's or B's direction plus noise. The tail of the pipeline
 * must find two speakers switching at 15 s. */
WD_TEST(finish_two_synthetic_speakers) {
  wd__diar_geom_t g;
  wd__diar_geom(30 * SR, 1.0, &g);
  wd__diar_acts_t a;
  WD_CHECK_EQ_INT(wd__diar_acts_init(&a, &g), 0);
  if (!a.act)
    return;
  unsigned seed = 41;
  float dir[2][WD_DIAR_EMB_DIM];
  for (int s = 0; s < 2; s++)
    for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
      dir[s][d] = noise(&seed);
  for (size_t c = 0; c < g.n_chunks; c++) {
    uint8_t *act = a.act + c * FR * 3;
    for (size_t f = 0; f < FR; f++) {
      const double t = (double)c + middle(f);
      act[3 * f + (t < 15.0 ? 0 : 1)] = 1;
    }
    uint8_t mask[FR];
    for (int s = 0; s < 2; s++) {
      const int clean = wd__diar_embed_mask(act, s, mask);
      if (clean < 0)
        continue;
      float *e = a.emb + (c * WD__DIAR_SLOTS + (size_t)s) * WD_DIAR_EMB_DIM;
      for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
        e[d] = dir[s][d] + 0.3f * noise(&seed);
      a.state[c * WD__DIAR_SLOTS + (size_t)s] = clean >= WD__DIAR_TRAIN_RATIO * FR ? 1 : 0;
    }
  }
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  WD_CHECK_EQ_INT(r.n_turns, 2);
  if (r.n_turns == 2) {
    WD_CHECK_EQ_INT(r.turns[0].speaker, 0);
    WD_CHECK_NEAR(r.turns[0].start, middle(0), 1e-9);
    WD_CHECK_NEAR(r.turns[0].end, 15.0, 0.02);
    WD_CHECK_EQ_INT(r.turns[1].speaker, 1);
    WD_CHECK_NEAR(r.turns[1].start, 15.0, 0.02);
    WD_CHECK_NEAR(r.turns[1].end, 30.0, 0.05);
  }
  /* At most one speaker: everything is A. */
  wd_diar_result_t r1;
  p.max_speakers = 1;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r1), 0);
  WD_CHECK_EQ_INT(r1.n_speakers, 1);
  /* Bad bounds. */
  wd_diar_result_t r2;
  p.min_speakers = 3;
  p.max_speakers = 2;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r2), WD_EINVAL);
  wd_diar_result_free(&r);
  wd_diar_result_free(&r1);
  /* No speech: no speakers. */
  memset(a.act, 0, g.n_chunks * FR * 3);
  memset(a.state, -1, g.n_chunks * 3);
  wd_diar_params_default(&p);
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 0);
  WD_CHECK_EQ_INT(r.n_turns, 0);
  wd_diar_result_free(&r);
  wd__diar_acts_free(&a);
}

/* Two voices close in embedding space (centroids 0.09 apart in cosine
 * distance, under the threshold's 0.25: pyannote's AHC alone makes them one
 * speaker) that take turns inside every chunk of g, as local speakers 0
 * and 1. */
static void close_voices_every_chunk(const wd__diar_geom_t *g, wd__diar_acts_t *a) {
  unsigned seed = 7;
  float dir[2][WD_DIAR_EMB_DIM];
  for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
    dir[0][d] = noise(&seed);
  for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
    dir[1][d] = dir[0][d] + 0.45f * noise(&seed); /* cos ~ 1 / sqrt(1.2) */
  for (size_t c = 0; c < g->n_chunks; c++) {
    uint8_t *act = a->act + c * FR * 3;
    for (size_t f = 0; f < FR; f++)
      act[3 * f + (f < FR / 2 ? 0 : 1)] = 1;
    for (int s = 0; s < 2; s++) {
      float *e = a->emb + (c * WD__DIAR_SLOTS + (size_t)s) * WD_DIAR_EMB_DIM;
      for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
        e[d] = dir[s][d] + 0.05f * noise(&seed);
      a->state[c * WD__DIAR_SLOTS + (size_t)s] = 1;
    }
  }
}

/* 30 s of the close voices: the chunks' cannot-link keeps them apart.
 * --max-speakers 1 still makes them one. */
WD_TEST(finish_keeps_apart_close_voices_of_one_chunk) {
  wd__diar_geom_t g;
  wd__diar_geom(30 * SR, 1.0, &g);
  wd__diar_acts_t a;
  WD_CHECK_EQ_INT(wd__diar_acts_init(&a, &g), 0);
  if (!a.act)
    return;
  close_voices_every_chunk(&g, &a);
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  wd_diar_result_free(&r);
  p.max_speakers = 1;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 1);
  wd_diar_result_free(&r);
  wd__diar_acts_free(&a);
}

/* The same over 2,009 s (2,000 chunks): 4,000 embeddings, twice what
 * clustering takes. An even subsample of the embeddings (every other one)
 * would keep one local speaker of each chunk and lose every cannot-link;
 * whole chunks kept (every other chunk) keep them, and the two voices stay
 * two. */
WD_TEST(finish_long_upload_keeps_the_chunks_cannot_link) {
  wd__diar_geom_t g;
  wd__diar_geom((size_t)2009 * SR, 1.0, &g);
  wd__diar_acts_t a;
  WD_CHECK_EQ_INT(wd__diar_acts_init(&a, &g), 0);
  if (!a.act)
    return;
  WD_CHECK_EQ_INT(g.n_chunks, 2000);
  close_voices_every_chunk(&g, &a);
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  wd_diar_result_t r;
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0);
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  wd_diar_result_free(&r);
  /* Even chunks of three clustered embeddings (a third, far voice as local
   * speaker 2), odd ones of one (local speaker 1 assigned only): 4,000
   * again, but every other chunk now holds 3,000, so fewer chunks are
   * kept (at most 2,000 embeddings, else WD_ERANGE). The far voice, never
   * active, names no turn: the close two stay two. */
  unsigned seed = 99;
  float far[WD_DIAR_EMB_DIM];
  for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
    far[d] = noise(&seed);
  for (size_t c = 0; c < g.n_chunks; c++) {
    if (c % 2) {
      a.state[c * WD__DIAR_SLOTS + 1] = 0;
      continue;
    }
    float *e = a.emb + (c * WD__DIAR_SLOTS + 2) * WD_DIAR_EMB_DIM;
    for (int d = 0; d < WD_DIAR_EMB_DIM; d++)
      e[d] = far[d] + 0.05f * noise(&seed);
    a.state[c * WD__DIAR_SLOTS + 2] = 1;
  }
  WD_CHECK_EQ_INT(wd__diar_finish(&a, &p, &r), 0); /* not WD_ERANGE: at most 2,000 clustered */
  WD_CHECK_EQ_INT(r.n_speakers, 2);
  wd_diar_result_free(&r);
  wd__diar_acts_free(&a);
}

/* The speaker count, reconstruction and turns against pyannote's own
 * functions on the synthetic segmentations of
 * tests/data/diar/make_pipeline_reference.py (3 speakers, 31 chunks). */
WD_TEST(pyannote_parity) {
  FILE *txt = fopen(WD_TEST_DATA_DIR "/diar/pipeline_reference.txt", "r");
  FILE *bin = fopen(WD_TEST_DATA_DIR "/diar/pipeline_reference.bin", "rb");
  WD_CHECK(txt && bin);
  size_t n_samples = 0, n_chunks = 0, n_frames = 0;
  double step = 0;
  int k = 0;
  if (!txt || !bin ||
      fscanf(txt, "%zu %lf %zu %zu %d ", &n_samples, &step, &n_chunks, &n_frames, &k) != 5) {
    WD_CHECK(0);
    if (txt)
      fclose(txt);
    if (bin)
      fclose(bin);
    return;
  }
  wd__diar_geom_t g;
  wd__diar_geom(n_samples, step, &g);
  WD_CHECK_EQ_INT(g.n_chunks, n_chunks);
  WD_CHECK_EQ_INT(g.n_frames, n_frames);
  uint8_t *act = malloc(n_chunks * FR * 3), *count = malloc(n_frames);
  uint8_t *bin_k = malloc(n_frames * (size_t)k);
  int8_t *hard8 = malloc(n_chunks * 3);
  int *hard = malloc(n_chunks * 3 * sizeof *hard);
  char *ref_count = malloc(n_frames + 2);
  WD_CHECK(act && count && bin_k && hard8 && hard && ref_count);
  if (act && count && bin_k && hard8 && hard && ref_count && g.n_frames == n_frames) {
    WD_CHECK_EQ_INT(fread(act, 1, n_chunks * FR * 3, bin), n_chunks * FR * 3);
    WD_CHECK_EQ_INT(fread(hard8, 1, n_chunks * 3, bin), n_chunks * 3);
    for (size_t i = 0; i < n_chunks * 3; i++)
      hard[i] = hard8[i];
    WD_CHECK(fscanf(txt, "%s", ref_count) == 1);
    WD_CHECK_EQ_INT(wd__diar_count(act, &g, count), 0);
    size_t count_diff = 0;
    for (size_t i = 0; i < n_frames; i++)
      count_diff += count[i] != (uint8_t)(ref_count[i] - '0');
    WD_CHECK_EQ_INT(count_diff, 0);
    WD_CHECK_EQ_INT(wd__diar_reconstruct(act, hard, count, &g, k, bin_k), 0);
    wd_diar_result_t r;
    WD_CHECK_EQ_INT(wd__diar_turns(bin_k, n_frames, k, (double)n_samples / SR, NULL, &r), 0);
    double s0, e0;
    int spk;
    size_t n_ref = 0;
    while (fscanf(txt, "%lf %lf %d", &s0, &e0, &spk) == 3) {
      WD_CHECK(n_ref < r.n_turns);
      if (n_ref < r.n_turns) {
        WD_CHECK_NEAR(r.turns[n_ref].start, s0, 1e-9);
        WD_CHECK_NEAR(r.turns[n_ref].end, e0, 1e-9);
        WD_CHECK_EQ_INT(r.turns[n_ref].speaker, spk);
      }
      n_ref++;
    }
    WD_CHECK_EQ_INT(r.n_turns, n_ref);
    WD_CHECK(n_ref >= 6);
    wd_diar_result_free(&r);
  }
  free(act);
  free(count);
  free(bin_k);
  free(hard8);
  free(hard);
  free(ref_count);
  fclose(txt);
  fclose(bin);
}

WD_TEST(params_default) {
  wd_diar_params_t p;
  wd_diar_params_default(&p);
  WD_CHECK_NEAR(p.step_s, 1.0, 0);
  WD_CHECK(p.threshold > 0 && p.threshold < 2);
  WD_CHECK(p.min_cluster_size >= 1);
  WD_CHECK_EQ_INT(p.min_speakers, 0);
  WD_CHECK_EQ_INT(p.max_speakers, 0);
}

int main(void) {
  return wd_test_main();
}
