/*
 * test_diar_cluster.c - wd_diar_cluster against pyannote's own
 * AgglomerativeClustering (scipy's centroid linkage and fcluster), on the
 * embedding sets of tests/data/diar/make_cluster_reference.py: the exact
 * labels (both numbered in order of first member), bounds on the number of
 * clusters and the reassignment of small clusters included; and
 * wd_diar_cluster_linked's cannot-link cut on fixed clouds of embeddings.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diar_cluster.h"
#include "error.h"
#include "wd_test.h"

#define REF_TXT WD_TEST_DATA_DIR "/diar/cluster_reference.txt"
#define REF_BIN WD_TEST_DATA_DIR "/diar/cluster_reference.bin"

WD_TEST(labels_match_pyannote) {
  FILE *txt = fopen(REF_TXT, "r");
  FILE *bin = fopen(REF_BIN, "rb");
  WD_CHECK(txt && bin);
  if (!txt || !bin) {
    if (txt)
      fclose(txt);
    if (bin)
      fclose(bin);
    return;
  }
  char name[64];
  size_t n, dim;
  double thr;
  int mcs, lo, hi, k_ref, n_cases = 0;
  while (fscanf(txt, "%63s %zu %zu %lf %d %d %d %d", name, &n, &dim, &thr, &mcs, &lo, &hi,
                &k_ref) == 8) {
    float *emb = malloc(n * dim * sizeof *emb);
    int *ref = malloc(n * sizeof *ref);
    int *got = malloc(n * sizeof *got);
    WD_CHECK(emb && ref && got);
    if (!emb || !ref || !got)
      break;
    for (size_t i = 0; i < n; i++)
      WD_CHECK(fscanf(txt, "%d", &ref[i]) == 1);
    WD_CHECK_EQ_INT(fread(emb, sizeof *emb, n * dim, bin), n * dim);
    int k = -1;
    WD_CHECK_EQ_INT(wd_diar_cluster(emb, n, dim, (float)thr, mcs, lo, hi, got, &k), 0);
    int same = k == k_ref;
    for (size_t i = 0; i < n; i++)
      same &= got[i] == ref[i];
    if (!same)
      fprintf(stderr, "case %s: k %d (pyannote %d), labels differ\n", name, k, k_ref);
    WD_CHECK(same);
    n_cases++;
    free(emb);
    free(ref);
    free(got);
  }
  WD_CHECK_EQ_INT(n_cases, 14);
  fclose(txt);
  fclose(bin);
}

WD_TEST(bounds_and_edges) {
  float e[4 * 2] = { 1, 0, 0.9f, 0.1f, 0, 1, 0.1f, 0.9f };
  int lab[4], k = -1;
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 0, 2, 0.7f, 1, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 0);
  /* Two pairs, min_cluster_size 1: two clusters, first member first. */
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 4, 2, 0.7f, 1, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 2);
  WD_CHECK(lab[0] == 0 && lab[1] == 0 && lab[2] == 1 && lab[3] == 1);
  /* At most one: one cluster without clustering. Exactly four: a cut of
   * the dendrogram always applies its first merge, so pyannote gets no
   * closer than three ([0 0 1 2], checked in pyannote 4.0.7). */
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 4, 2, 0.7f, 1, 0, 1, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 1);
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 4, 2, 0.7f, 1, 4, 4, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 3);
  WD_CHECK(lab[0] == 0 && lab[1] == 0 && lab[2] == 1 && lab[3] == 2);
  /* min above max; too many embeddings. */
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 4, 2, 0.7f, 1, 3, 2, lab, &k), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_diar_cluster(e, WD_DIAR_CLUSTER_N_MAX + 1, 2, 0.7f, 1, 0, 0, lab, &k),
                  WD_ERANGE);
  /* Bounds above n are clamped to n (pyannote's set_num_clusters). */
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 4, 2, 0.7f, 1, 9, 9, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 3);
}

/* ---- cannot-link (wd_diar_cluster_linked) ---- */

#define DIM 8
#define CLOUD 20 /* members per cloud */

/* A cloud of CLOUD unit-ish vectors around centre c (DIM floats): c plus a
 * deterministic jitter of +-0.06 per coordinate (an LCG, so that every run
 * and platform sees the same points). Its spread (cosine distance to its
 * centre ~0.01) is far below the threshold. */
static void cloud(const float *c, uint32_t seed, float *out) {
  for (int i = 0; i < CLOUD; i++)
    for (int d = 0; d < DIM; d++) {
      seed = seed * 1664525u + 1013904223u;
      const float u = (float)(seed >> 8) / (float)(1u << 24); /* [0, 1) */
      out[i * DIM + d] = c[d] + 0.12f * (u - 0.5f);
    }
}

/* Three clouds: A and B 0.1 apart in cosine distance (euclidean 0.45 <
 * the 0.7045 threshold: one cluster to AHC alone), C orthogonal to both. */
static void three_clouds(float *e) {
  const float a[DIM] = { 1, 0, 0, 0, 0, 0, 0, 0 };
  const float b[DIM] = { 0.9f, 0.4359f, 0, 0, 0, 0, 0, 0 }; /* cos(a, b) = 0.9 */
  const float c[DIM] = { 0, 0, 0, 0, 1, 0, 0, 0 };
  cloud(a, 1, e);
  cloud(b, 2, e + CLOUD * DIM);
  cloud(c, 3, e + 2 * CLOUD * DIM);
}

/* Whether each of the n_clouds clouds (members [0, CLOUD),
 * [CLOUD, 2 CLOUD), ...) carries a single label. */
static int cloud_pure(const int *lab, int n_clouds) {
  for (int c = 0; c < n_clouds; c++)
    for (int i = 1; i < CLOUD; i++)
      if (lab[c * CLOUD + i] != lab[c * CLOUD])
        return 0;
  return 1;
}

WD_TEST(linked_separates_close_voices_of_one_window) {
  float e[3 * CLOUD * DIM];
  int group[3 * CLOUD], lab[3 * CLOUD], ref[3 * CLOUD], k = -1;
  three_clouds(e);
  /* A and B talk in the same windows (two local speakers of chunk i); C in
   * windows of its own. */
  for (int i = 0; i < CLOUD; i++) {
    group[i] = i;
    group[CLOUD + i] = i;
    group[2 * CLOUD + i] = 100 + i;
  }
  WD_CHECK_EQ_INT(wd_diar_cluster(e, 3 * CLOUD, DIM, 0.7045f, 12, 0, 0, ref, &k), 0);
  WD_CHECK_EQ_INT(k, 2); /* AHC alone merges the close pair */
  WD_CHECK(cloud_pure(ref, 3) && ref[0] == ref[CLOUD] && ref[0] != ref[2 * CLOUD]);
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 3);
  WD_CHECK(cloud_pure(lab, 3) && lab[0] == 0 && lab[CLOUD] == 1 && lab[2 * CLOUD] == 2);
  /* No group: the plain AHC's labels. Negative groups: no constraint. */
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, NULL, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 2);
  WD_CHECK(memcmp(lab, ref, sizeof lab) == 0);
  for (int i = 0; i < CLOUD; i++)
    group[CLOUD + i] = -1;
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 2);
  WD_CHECK(memcmp(lab, ref, sizeof lab) == 0);
}

WD_TEST(linked_separated_and_single_clouds) {
  float e[3 * CLOUD * DIM];
  int group[3 * CLOUD], lab[3 * CLOUD], k = -1;
  three_clouds(e);
  /* C's centre moved away from A and B: three well-separated clouds, each
   * voice alone in its windows (no constraint at all) -> 3. */
  const float b[DIM] = { 0, 1, 0, 0, 0, 0, 0, 0 };
  cloud(b, 2, e + CLOUD * DIM);
  for (int i = 0; i < 3 * CLOUD; i++)
    group[i] = i;
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 3);
  WD_CHECK(cloud_pure(lab, 3) && lab[0] == 0 && lab[CLOUD] == 1 && lab[2 * CLOUD] == 2);
  /* One cloud -> 1. */
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 1);
}

WD_TEST(linked_tolerates_a_stray_window) {
  /* One voice (two clouds of one centre), the segmentation wrong once: a
   * single window holds a local speaker of each half. The two leaves of
   * that window never merge directly, but each joins its neighbours, and
   * the clusters that then hold them share 1 group of 20, below the 10%
   * ratio: one speaker. */
  float e[2 * CLOUD * DIM];
  int group[2 * CLOUD], lab[2 * CLOUD], k = -1;
  const float a[DIM] = { 1, 0, 0, 0, 0, 0, 0, 0 };
  cloud(a, 1, e);
  cloud(a, 2, e + CLOUD * DIM);
  for (int i = 0; i < 2 * CLOUD; i++)
    group[i] = i;
  group[CLOUD + 7] = 3;
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 2 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 1);
  /* With a ratio above 1 nothing shared is ever enough: the plain AHC. */
  for (int i = 0; i < CLOUD; i++)
    group[CLOUD + i] = i;
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 2 * CLOUD, DIM, group, 2.0f, 0.7045f, 12, 0, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 1);
}

WD_TEST(linked_bounds_force_the_count) {
  float e[3 * CLOUD * DIM];
  int group[3 * CLOUD], lab[3 * CLOUD], k = -1;
  three_clouds(e);
  for (int i = 0; i < CLOUD; i++) {
    group[i] = i;
    group[CLOUD + i] = i;
    group[2 * CLOUD + i] = 100 + i;
  }
  /* --max-speakers 2 and --num-speakers 2 beat the constraint (pyannote's
   * cut for a number); --min-speakers 3 is met by the constrained cut. */
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 0, 2, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 2);
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 2, 2, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 2);
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 3, 0, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 3);
  WD_CHECK_EQ_INT(
      wd_diar_cluster_linked(e, 3 * CLOUD, DIM, group, 0.1f, 0.7045f, 12, 1, 1, lab, &k), 0);
  WD_CHECK_EQ_INT(k, 1);
}

int main(void) {
  return wd_test_main();
}
