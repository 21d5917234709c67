/*
 * test_diar_cluster.c - wd_diar_cluster against pyannote's own
 * AgglomerativeClustering (scipy's centroid linkage and fcluster), on the
 * embedding sets of tests/data/diar/make_cluster_reference.py: the exact
 * labels (both numbered in order of first member), bounds on the number of
 * clusters and the reassignment of small clusters included.
 */
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

int main(void) {
  return wd_test_main();
}
