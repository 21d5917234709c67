/*
 * diar_cluster.c - agglomerative clustering of speaker embeddings (see
 * diar_cluster.h), as pyannote.audio 4.0.7's AgglomerativeClustering.cluster
 * (pipelines/clustering.py) does it with speaker-diarization-3.1's settings
 * (metric "cosine", method "centroid"), set_num_clusters included.
 *
 * The steps, each mirroring a piece of pyannote's code:
 *  1. min_cluster_size = min(min_cluster_size, max(1, round(0.1 n)))
 *     (Python's round: half to even, as rint());
 *  2. the embeddings are L2-normalized, so that the euclidean distance
 *     between two of them is a monotone function of their cosine distance,
 *     and scipy's linkage(method="centroid", metric="euclidean") builds the
 *     dendrogram: here the same algorithm as scipy's fast_linkage (Muellner's
 *     "generic" algorithm: a nearest-neighbour candidate per row of the
 *     condensed distance matrix, checked against the matrix when it is the
 *     smallest; the merged cluster takes the larger index, the distances are
 *     updated by the Lance-Williams formula for centroids), in double;
 *  3. fcluster(Z, threshold, criterion="distance"): the flat clusters are
 *     the largest subtrees whose highest merge (over the whole subtree: a
 *     centroid dendrogram may have inversions) is <= threshold, numbered in
 *     scipy's depth-first order;
 *  4. if the number of large clusters (>= min_cluster_size members) is
 *     outside [min_k, max_k], the dendrogram is cut after a number of merges
 *     instead of at a height: the merges are tried in order of the distance
 *     of their height to the threshold, and the first cut that gives the
 *     wanted number of large clusters (else the closest) is kept;
 *  5. no large cluster: everything is one cluster; else each small cluster
 *     goes to the large cluster whose centroid (the mean of its normalized
 *     members) is closest in cosine distance.
 * The labels are then renumbered in order of first member (pyannote numbers
 * them in sorted order of scipy's cluster ids; only the names differ).
 *
 * wd_diar_cluster_linked (not pyannote's) adds cannot-link constraints to
 * step 2: each cluster carries the set of groups (windows) of its members,
 * a bit set, and a pair of clusters sharing enough groups is skipped by the
 * nearest-neighbour search, as if its distance were infinite, while its
 * real distance stays in the matrix for the Lance-Williams updates of later
 * merges; whether a pair may merge changes only when one of its clusters
 * grows, so the candidates are revalidated as their distances are. When no
 * pair may merge any more the clusters left are joined at an infinite
 * height, so that Z stays a full dendrogram for steps 3-5; step 4 (bounds
 * not met) goes back to the unconstrained dendrogram. Without groups the
 * code path and the labels are step 2's.
 *
 * Ties (two exactly equal distances) are broken by the lowest index here;
 * scipy's heap and numpy's argsort may break them otherwise. Random float
 * embeddings practically never tie; identical embeddings do (their order
 * does not change the flat clusters).
 *
 * Memory: the condensed distance matrix, n (n - 1) / 2 doubles (16 MB at
 * WD_DIAR_CLUSTER_N_MAX = 2000), and O(n dim) besides (with groups, n bit
 * sets of one bit per distinct group: 0.5 MB at 2000 x 2000). Time: O(n^2)
 * per typical run (O(n^3) at worst, as scipy); the constraints' test costs
 * one popcount per 64 groups per pair looked at (2,000 embeddings of 1,000
 * windows: 0.5 -> 0.7 s here). Thread-safe: no shared state.
 */
#include "diar_cluster.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* The condensed matrix's index of pair (i, j), i < j < n (scipy's order). */
static size_t cond_index(size_t n, size_t i, size_t j) {
  return n * i - i * (i + 1) / 2 + (j - i - 1);
}

/* Lance-Williams update for centroid linkage (scipy's _centroid): the
 * euclidean distance from cluster i to the union of x and y, from d(x, i),
 * d(y, i) and d(x, y). The clamp only guards rounding below zero. */
static double centroid_update(double d_xi, double d_yi, double d_xy, double nx, double ny) {
  const double v = ((nx * d_xi * d_xi) + (ny * d_yi * d_yi) - (nx * ny * d_xy * d_xy) / (nx + ny)) /
                   (nx + ny);
  return v > 0 ? sqrt(v) : 0;
}

/* Cannot-link state of a constrained linkage (wd_diar_cluster_linked): the
 * groups of the cluster in each slot, as a bit set of words 64-bit words
 * per slot over the distinct groups, and their number. */
typedef struct {
  uint64_t *bits; /* n x words */
  size_t *cnt;    /* n */
  size_t words;
  double ratio;
} link_t;

/* Whether the clusters in slots x and y may merge: yes without
 * constraints, else unless they share at least
 * max(1, ratio x min(their numbers of groups)) groups. */
static int may_merge(const link_t *lk, size_t x, size_t y) {
  if (!lk)
    return 1;
  const uint64_t *bx = lk->bits + x * lk->words, *by = lk->bits + y * lk->words;
  size_t shared = 0;
  for (size_t w = 0; w < lk->words; w++)
    shared += (size_t)__builtin_popcountll(bx[w] & by[w]);
  if (shared == 0)
    return 1;
  const size_t m = lk->cnt[x] < lk->cnt[y] ? lk->cnt[x] : lk->cnt[y];
  return (double)shared < lk->ratio * (double)m;
}

/* The nearest live cluster y > x of row x that x may merge with:
 * *ret_y = SIZE_MAX when none. */
static double find_min_dist(size_t n, const double *D, const size_t *size, const link_t *lk,
                            size_t x, size_t *ret_y) {
  double best = INFINITY;
  size_t by = SIZE_MAX;
  for (size_t y = x + 1; y < n; y++) {
    if (size[y] == 0 || !may_merge(lk, x, y))
      continue;
    const double d = D[cond_index(n, x, y)];
    if (d < best) {
      best = d;
      by = y;
    }
  }
  *ret_y = by;
  return best;
}

/* Merges k .. n-2 of Z: the live clusters joined one by one in slot
 * order at an infinite height (a constrained linkage's end). */
static void join_rest(size_t n, size_t k, size_t *size, size_t *id, double *Z) {
  size_t acc = SIZE_MAX; /* the slot holding the union so far */
  for (size_t s = 0; s < n && k + 1 < n; s++) {
    if (size[s] == 0)
      continue;
    if (acc == SIZE_MAX) {
      acc = s;
      continue;
    }
    const size_t a = id[acc] < id[s] ? id[acc] : id[s], b = id[acc] < id[s] ? id[s] : id[acc];
    Z[4 * k + 0] = (double)a;
    Z[4 * k + 1] = (double)b;
    Z[4 * k + 2] = INFINITY;
    Z[4 * k + 3] = (double)(size[acc] + size[s]);
    size[s] += size[acc];
    size[acc] = 0;
    id[s] = n + k;
    acc = s;
    k++;
  }
}

/* Z (n - 1 rows of (id_a, id_b, height, size), ids as scipy's: leaves
 * 0 .. n-1, merge k is n + k) from the condensed distances D (overwritten).
 * With lk, pairs that may not merge are skipped; when only such pairs are
 * left, the remaining clusters are joined in slot order at an infinite
 * height, which any finite threshold cuts (lk's sets are updated).
 * 0 or WD_ENOMEM. */
static int centroid_linkage(size_t n, double *D, double *Z, link_t *lk) {
  size_t *size = malloc(n * sizeof *size);
  size_t *id = malloc(n * sizeof *id);
  size_t *nb = malloc(n * sizeof *nb);
  double *md = malloc(n * sizeof *md);
  int rc = WD_ENOMEM;
  if (!size || !id || !nb || !md)
    goto fail;
  for (size_t i = 0; i < n; i++) {
    size[i] = 1;
    id[i] = i;
  }
  for (size_t x = 0; x + 1 < n; x++)
    md[x] = find_min_dist(n, D, size, lk, x, &nb[x]);
  md[n - 1] = INFINITY;
  nb[n - 1] = SIZE_MAX;
  for (size_t k = 0; k + 1 < n; k++) {
    /* The smallest candidate, checked against the matrix (and the
     * constraints): a stale one (its neighbour's distance changed) is
     * recomputed and the search repeated. A recomputed row stays fresh
     * until the next merge, and at most n - k rows are live, so n - k + 1
     * searches find a valid one, or only infinities. */
    size_t x = SIZE_MAX, y = SIZE_MAX;
    double dist = INFINITY;
    int found = 0;
    for (size_t tries = 0; tries <= n - k && !found; tries++) {
      x = SIZE_MAX;
      dist = INFINITY;
      for (size_t i = 0; i + 1 < n; i++)
        if (size[i] && md[i] < dist) {
          dist = md[i];
          x = i;
        }
      if (x == SIZE_MAX) /* only infinities left */
        break;
      y = nb[x];
      found = y != SIZE_MAX && size[y] && dist == D[cond_index(n, x, y)] && may_merge(lk, x, y);
      if (!found)
        md[x] = find_min_dist(n, D, size, lk, x, &nb[x]);
    }
    if (!found) {
      /* No pair may merge any more: cannot happen without constraints on
       * finite input (every live row has a finite candidate). */
      if (!lk) {
        rc = WD_EINTERNAL;
        goto fail;
      }
      join_rest(n, k, size, id, Z);
      break;
    }
    const size_t nx = size[x], ny = size[y];
    size_t id_x = id[x], id_y = id[y];
    if (id_x > id_y) {
      const size_t t = id_x;
      id_x = id_y;
      id_y = t;
    }
    Z[4 * k + 0] = (double)id_x;
    Z[4 * k + 1] = (double)id_y;
    Z[4 * k + 2] = dist;
    Z[4 * k + 3] = (double)(nx + ny);
    size[x] = 0; /* x is dropped, y becomes the union */
    size[y] = nx + ny;
    id[y] = n + k;
    if (lk) {
      uint64_t *bx = lk->bits + x * lk->words, *by = lk->bits + y * lk->words;
      size_t c = 0;
      for (size_t w = 0; w < lk->words; w++) {
        by[w] |= bx[w];
        c += (size_t)__builtin_popcountll(by[w]);
      }
      lk->cnt[y] = c;
    }
    md[x] = INFINITY;
    for (size_t z = 0; z < n; z++) {
      if (size[z] == 0 || z == y)
        continue;
      const double dzx = D[z < x ? cond_index(n, z, x) : cond_index(n, x, z)];
      double *dzy = &D[z < y ? cond_index(n, z, y) : cond_index(n, y, z)];
      *dzy = centroid_update(dzx, *dzy, dist, (double)nx, (double)ny);
    }
    /* Rows that pointed at x now point at y (a guess, checked when used);
     * rows before y whose distance to the union is below their candidate
     * take it. */
    for (size_t z = 0; z < x; z++)
      if (size[z] && nb[z] == x)
        nb[z] = y;
    for (size_t z = 0; z < y; z++) {
      if (size[z] == 0)
        continue;
      const double d = D[cond_index(n, z, y)];
      if (d < md[z] && may_merge(lk, z, y)) {
        nb[z] = y;
        md[z] = d;
      }
    }
    if (y + 1 < n) {
      size_t z;
      const double d = find_min_dist(n, D, size, lk, y, &z);
      if (z != SIZE_MAX || lk) { /* with lk, y may have lost its last partner */
        nb[y] = z;
        md[y] = d;
      }
    }
  }
  rc = 0;
fail:
  free(size);
  free(id);
  free(nb);
  free(md);
  return rc;
}

/* Scratch of fcluster_distance for n leaves. */
typedef struct {
  double *maxd;  /* n - 1: the highest merge in each merge's subtree */
  size_t *stack; /* 2 n: nodes still to visit (at most one per leaf, plus one) */
} fc_work_t;

/* scipy's fcluster(Z, t, criterion="distance"): flat[i] in 0 .. k-1 for
 * each leaf, in scipy's numbering (depth first from the root, first child
 * first); returns k. */
static size_t fcluster_distance(size_t n, const double *Z, double t, int *flat,
                                const fc_work_t *work) {
  double *maxd = work->maxd;
  size_t *stack = work->stack;
  for (size_t k = 0; k + 1 < n; k++) {
    double m = Z[4 * k + 2];
    for (int c = 0; c < 2; c++) {
      const size_t ch = (size_t)Z[4 * k + c];
      if (ch >= n && maxd[ch - n] > m)
        m = maxd[ch - n];
    }
    maxd[k] = m;
  }
  /* Depth-first from the root: a node whose subtree stays under t is one
   * cluster (all its leaves); else its children are visited, first one
   * first. The stack holds node ids; a cluster's leaves are labelled by a
   * second walk of the same stack. */
  size_t k_flat = 0, sp = 0;
  stack[sp++] = 2 * n - 2;
  while (sp > 0) {
    const size_t node = stack[--sp];
    if (node < n) {
      flat[node] = (int)k_flat++;
      continue;
    }
    if (maxd[node - n] <= t) {
      /* Label all leaves below node with one id. */
      const size_t base = sp;
      stack[sp++] = node;
      while (sp > base) {
        const size_t m = stack[--sp];
        if (m < n) {
          flat[m] = (int)k_flat;
        } else {
          stack[sp++] = (size_t)Z[4 * (m - n) + 1];
          stack[sp++] = (size_t)Z[4 * (m - n) + 0];
        }
      }
      k_flat++;
      continue;
    }
    stack[sp++] = (size_t)Z[4 * (node - n) + 1]; /* popped second */
    stack[sp++] = (size_t)Z[4 * (node - n) + 0]; /* popped first */
  }
  return k_flat;
}

/* Counts each flat cluster's members into counts[0 .. k-1]; returns how
 * many have at least min_size. */
static size_t count_large(const int *flat, size_t n, size_t k, size_t min_size, size_t *counts) {
  memset(counts, 0, k * sizeof *counts);
  for (size_t i = 0; i < n; i++)
    counts[flat[i]]++;
  size_t large = 0;
  for (size_t c = 0; c < k; c++)
    large += counts[c] >= min_size;
  return large;
}

static size_t absdiff(size_t a, size_t b) {
  return a > b ? a - b : b - a;
}

/* Step 4: with Zi = Z whose heights are 0, 1, 2, ... (a cut "after merge
 * i"), the cut closest to num_k large clusters, tried in order of
 * |height - threshold| (numpy's argsort, lowest index first on ties; the
 * argsort here is a stable insertion into order[]). Leaves flat / k and
 * returns the number of large clusters. */
static size_t search_cut(size_t n, const double *Z, double *Zi, double threshold,
                         size_t min_size, size_t num_k, int *flat, size_t *k, size_t large,
                         size_t *counts, const fc_work_t *work, size_t *order) {
  for (size_t i = 0; i + 1 < n; i++) {
    memcpy(&Zi[4 * i], &Z[4 * i], 4 * sizeof *Zi);
    Zi[4 * i + 2] = (double)i;
  }
  for (size_t i = 0; i + 1 < n; i++) {
    const double key = fabs(Z[4 * i + 2] - threshold);
    size_t j = i;
    while (j > 0 && fabs(Z[4 * order[j - 1] + 2] - threshold) > key) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  size_t best_it = n - 1, best_large = 1;
  int found = 0;
  for (size_t r = 0; r + 1 < n; r++) {
    const size_t it = order[r];
    if ((size_t)Z[4 * it + 3] < min_size)
      continue; /* this merge cannot change the number of large clusters */
    *k = fcluster_distance(n, Zi, (double)it, flat, work);
    large = count_large(flat, n, *k, min_size, counts);
    if (absdiff(large, num_k) < absdiff(best_large, num_k)) {
      best_it = it;
      best_large = large;
    }
    if (large == num_k) {
      found = 1;
      break;
    }
  }
  if (!found && best_large != num_k) {
    /* pyannote's last resort re-applies the best cut (n - 1: one cluster);
     * when nothing was tried at all the threshold's cut stays, as there. */
    *k = fcluster_distance(n, Zi, (double)best_it, flat, work);
    large = count_large(flat, n, *k, min_size, counts);
  }
  return large;
}

/* The condensed euclidean distances D of the n normalized rows of x. */
static void pdist(const double *x, size_t n, size_t dim, double *D) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      double ss = 0;
      for (size_t d = 0; d < dim; d++) {
        const double diff = x[i * dim + d] - x[j * dim + d];
        ss += diff * diff;
      }
      D[cond_index(n, i, j)] = sqrt(ss);
    }
}

static int int_cmp(const void *pa, const void *pb) {
  const int a = *(const int *)pa, b = *(const int *)pb;
  return (a > b) - (a < b);
}

/* lk for n leaves of groups group[] (negative: none): each leaf's slot
 * holds the bit of its group's rank among the distinct groups.
 * 0 or WD_ENOMEM (lk's arrays then freed by the caller all the same). */
static int link_init(link_t *lk, const int *group, size_t n, double ratio) {
  int *u = malloc(n * sizeof *u);
  if (!u)
    return WD_ENOMEM;
  memcpy(u, group, n * sizeof *u);
  qsort(u, n, sizeof *u, int_cmp); /* n >= 2 here */
  size_t nu = 0;
  for (size_t i = 0; i < n; i++)
    if (u[i] >= 0 && (nu == 0 || u[nu - 1] != u[i]))
      u[nu++] = u[i];
  lk->words = nu / 64 + 1;
  lk->ratio = ratio;
  lk->bits = calloc(n * lk->words, sizeof *lk->bits);
  lk->cnt = calloc(n, sizeof *lk->cnt);
  if (!lk->bits || !lk->cnt) {
    free(u);
    return WD_ENOMEM;
  }
  for (size_t i = 0; i < n && nu > 0; i++) {
    if (group[i] < 0)
      continue;
    const int *r = bsearch(&group[i], u, nu, sizeof *u, int_cmp);
    const size_t b = (size_t)(r - u);
    lk->bits[i * lk->words + b / 64] |= (uint64_t)1 << (b % 64);
    lk->cnt[i] = 1;
  }
  free(u);
  return 0;
}

int wd_diar_cluster(const float *emb, size_t n, size_t dim, float threshold,
                    int min_cluster_size, int min_k, int max_k, int *labels, int *ret_k) {
  return wd_diar_cluster_linked(emb, n, dim, NULL, 0, threshold, min_cluster_size, min_k, max_k,
                                labels, ret_k);
}

int wd_diar_cluster_linked(const float *emb, size_t n, size_t dim, const int *group,
                           float link_ratio, float threshold, int min_cluster_size, int min_k,
                           int max_k, int *labels, int *ret_k) {
  *ret_k = 0;
  if (n == 0)
    return 0;
  if (n > WD_DIAR_CLUSTER_N_MAX || dim == 0)
    return WD_ERANGE;
  /* pyannote's set_num_clusters: bounds clamped to [1, n]; equal bounds fix
   * the number. */
  const size_t lo = (size_t)(min_k > 0 ? ((size_t)min_k < n ? (size_t)min_k : n) : 1);
  const size_t hi = (size_t)(max_k > 0 ? ((size_t)max_k < n ? (size_t)max_k : n) : n);
  if (lo > hi)
    return WD_EINVAL;
  if (hi < 2 || n == 1) { /* nothing to cluster (pyannote does not call cluster()) */
    for (size_t i = 0; i < n; i++)
      labels[i] = 0;
    *ret_k = 1;
    return 0;
  }
  size_t num_k = lo == hi ? lo : 0; /* 0: not fixed */
  const double rounded = rint(0.1 * (double)n);
  size_t min_size = rounded > 1 ? (size_t)rounded : 1;
  if (min_cluster_size < 1)
    min_cluster_size = 1;
  if ((size_t)min_cluster_size < min_size)
    min_size = (size_t)min_cluster_size;

  int rc = WD_ENOMEM;
  const size_t n_pairs = n * (n - 1) / 2;
  double *x = malloc(n * dim * sizeof *x);          /* normalized embeddings */
  double *D = malloc(n_pairs * sizeof *D);          /* condensed distances */
  double *Z = calloc(4 * (n - 1), sizeof *Z);       /* the dendrogram */
  double *Zi = malloc(4 * (n - 1) * sizeof *Zi);    /* heights replaced by ranks */
  fc_work_t work = { malloc(n * sizeof(double)), malloc(2 * n * sizeof(size_t)) };
  size_t *order = malloc(n * sizeof *order);
  size_t *counts = malloc(n * sizeof *counts);
  int *flat = malloc(n * sizeof *flat);
  double *cent = NULL;
  size_t *cl_large = NULL;
  link_t lk = { NULL, NULL, 0, 0 }; /* the constraints, with group */
  if (!x || !D || !Z || !Zi || !work.maxd || !work.stack || !order || !counts || !flat)
    goto fail;
  for (size_t i = 0; i < n; i++) {
    double ss = 0;
    for (size_t d = 0; d < dim; d++)
      ss += (double)emb[i * dim + d] * (double)emb[i * dim + d];
    const double inv = ss > 0 ? 1.0 / sqrt(ss) : 0; /* a zero vector stays zero */
    for (size_t d = 0; d < dim; d++)
      x[i * dim + d] = (double)emb[i * dim + d] * inv;
  }
  pdist(x, n, dim, D);
  if (group && (rc = link_init(&lk, group, n, (double)link_ratio)) < 0)
    goto fail;
  rc = centroid_linkage(n, D, Z, group ? &lk : NULL);
  if (rc < 0)
    goto fail;

  size_t k = fcluster_distance(n, Z, (double)threshold, flat, &work);
  size_t large = count_large(flat, n, k, min_size, counts);
  if (large < lo)
    num_k = lo;
  else if (large > hi)
    num_k = hi;
  if (num_k && large != num_k && group) {
    /* The bounds overrule the constraints: pyannote's dendrogram, searched
     * for the number (from the constrained cut's) that they allow. */
    pdist(x, n, dim, D);
    if ((rc = centroid_linkage(n, D, Z, NULL)) < 0)
      goto fail;
  }
  if (num_k && large != num_k)
    large = search_cut(n, Z, Zi, (double)threshold, min_size, num_k, flat, &k, large, counts,
                       &work, order);

  if (large == 0) {
    for (size_t i = 0; i < n; i++)
      labels[i] = 0;
    *ret_k = 1;
    rc = 0;
    goto fail;
  }
  if (large < k) {
    /* Step 5: centroids (means of the normalized members) of every flat
     * cluster; each small one joins the large one of least cosine
     * distance (the first on ties, as numpy's argmin). */
    cent = calloc(k * dim, sizeof *cent);
    cl_large = malloc(k * sizeof *cl_large);
    if (!cent || !cl_large) {
      rc = WD_ENOMEM;
      goto fail;
    }
    for (size_t i = 0; i < n; i++)
      for (size_t d = 0; d < dim; d++)
        cent[(size_t)flat[i] * dim + d] += x[i * dim + d];
    for (size_t c = 0; c < k; c++) {
      double ss = 0;
      for (size_t d = 0; d < dim; d++) {
        cent[c * dim + d] /= (double)counts[c];
        ss += cent[c * dim + d] * cent[c * dim + d];
      }
      /* Cosine distance needs only the direction: normalize once here. */
      const double inv = ss > 0 ? 1.0 / sqrt(ss) : 0;
      for (size_t d = 0; d < dim; d++)
        cent[c * dim + d] *= inv;
    }
    for (size_t s = 0; s < k; s++) {
      cl_large[s] = s;
      if (counts[s] >= min_size)
        continue;
      double best = INFINITY;
      for (size_t c = 0; c < k; c++) {
        if (counts[c] < min_size)
          continue;
        double dot = 0;
        for (size_t d = 0; d < dim; d++)
          dot += cent[s * dim + d] * cent[c * dim + d];
        if (1.0 - dot < best) {
          best = 1.0 - dot;
          cl_large[s] = c;
        }
      }
    }
    for (size_t i = 0; i < n; i++)
      flat[i] = (int)cl_large[flat[i]];
  }
  /* Renumber in order of first member. */
  for (size_t c = 0; c < n; c++)
    order[c] = SIZE_MAX;
  size_t next = 0;
  for (size_t i = 0; i < n; i++) {
    const size_t f = (size_t)flat[i];
    if (order[f] == SIZE_MAX)
      order[f] = next++;
    labels[i] = (int)order[f];
  }
  *ret_k = (int)next;
  rc = 0;
fail:
  free(x);
  free(D);
  free(Z);
  free(Zi);
  free(work.maxd);
  free(work.stack);
  free(order);
  free(counts);
  free(flat);
  free(cent);
  free(cl_large);
  free(lk.bits);
  free(lk.cnt);
  return rc;
}
