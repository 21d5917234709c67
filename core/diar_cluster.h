/*
 * diar_cluster.h - agglomerative clustering of speaker embeddings, as
 * pyannote's speaker-diarization-3.1 does it (its AgglomerativeClustering:
 * centroid linkage over L2-normalized embeddings, cut at a distance
 * threshold, clusters smaller than min_cluster_size reassigned to the
 * nearest large cluster), with optional bounds on the number of clusters;
 * and the same with cannot-link constraints between embeddings of one
 * window (wd_diar_cluster_linked).
 */
#ifndef WD_DIAR_CLUSTER_H
#define WD_DIAR_CLUSTER_H

#include <stddef.h>

/* The most embeddings one call clusters: the distance matrix takes
 * n (n - 1) / 2 doubles (16 MB here). Callers with more subsample them (the
 * pipeline, diar.c, clusters an even subsample and assigns every embedding
 * to the nearest centroid, as pyannote assigns the embeddings it did not
 * cluster). */
#define WD_DIAR_CLUSTER_N_MAX 2000

/* labels[i] in 0 .. k-1 for each of the n embeddings (n x dim, row-major;
 * normalized here, on a copy), k returned in *ret_k, clusters numbered in
 * order of their first member. min_k / max_k: 0 for no bound, else clamped
 * to [1, n] (pyannote's set_num_clusters); max_k 1 or n 1 gives one
 * cluster. n == 0 gives k = 0. 0, WD_ENOMEM, WD_EINVAL (min_k > max_k after
 * clamping), WD_ERANGE (n > WD_DIAR_CLUSTER_N_MAX or dim 0). */
int wd_diar_cluster(const float *emb, size_t n, size_t dim, float threshold,
                    int min_cluster_size, int min_k, int max_k, int *labels, int *ret_k);

/* wd_diar_cluster with cannot-link constraints. group[i] (n ints) names the
 * window embedding i comes from, negative for none: embeddings of one group
 * are taken for different speakers (the local speakers the segmentation
 * model tells apart in one chunk). The centroid linkage then never merges
 * two clusters that share at least max(1, link_ratio x the smaller one's
 * number of groups) groups: they stay apart however close their centroids
 * (two voices as close as one speaker's own spread), while every other
 * merge proceeds as in pyannote's; clusters left that may not merge are
 * joined at an infinite height, above any threshold. The rest is
 * wd_diar_cluster's, which is this with group NULL. When the constrained
 * cut's number of large clusters is outside [min_k, max_k], the bound is
 * searched for on pyannote's unconstrained dendrogram (the bounds overrule
 * the constraints). Same return codes. */
int wd_diar_cluster_linked(const float *emb, size_t n, size_t dim, const int *group,
                           float link_ratio, float threshold, int min_cluster_size, int min_k,
                           int max_k, int *labels, int *ret_k);

#endif
