/*
 * cpu_attn.c - LayerNorm, softmax and single-query attention (see
 * cpu_attn.h). Plain C written so that the compiler vectorises the inner
 * loops without reassociating a sum: dot products keep 8 partial sums, the
 * value accumulation runs across the head's columns.
 */
#include "cpu_attn.h"

#include <math.h>
#include <stddef.h>

void cpu_layernorm_row(const float *x, int d, const float *g, const float *b, float *y) {
  double mean = 0.0, var = 0.0;
  for (int i = 0; i < d; i++)
    mean += x[i];
  mean /= d;
  for (int i = 0; i < d; i++)
    var += (x[i] - mean) * (x[i] - mean);
  var /= d;
  const float m = (float)mean, inv = (float)(1.0 / sqrt(var + 1e-5));
  for (int i = 0; i < d; i++)
    y[i] = (x[i] - m) * inv * g[i] + b[i];
}

void cpu_softmax_row(float *s, int n) {
  float mx = -INFINITY;
  for (int j = 0; j < n; j++)
    mx = s[j] > mx ? s[j] : mx;
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < n; j++)
    s[j] *= inv;
}

static float dot8(const float *a, const float *b, int n) {
  float p[8] = { 0 };
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      p[j] += a[i + j] * b[i + j];
  float s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  for (; i < n; i++)
    s += a[i] * b[i];
  return s;
}

void cpu_attend_one(const float *q, const float *K, const float *V, int n, int ld, int dh,
                    float scale, float *s, float *o, float *keep) {
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    s[j] = dot8(q, K + (size_t)j * (size_t)ld, dh) * scale;
    mx = s[j] > mx ? s[j] : mx;
  }
  if (keep)
    for (int j = 0; j < n; j++)
      keep[j] = s[j];
  float sum = 0.0f;
  for (int j = 0; j < n; j++) {
    s[j] = expf(s[j] - mx);
    sum += s[j];
  }
  for (int c = 0; c < dh; c++)
    o[c] = 0.0f;
  for (int j = 0; j < n; j++) {
    const float *v = V + (size_t)j * (size_t)ld;
    const float p = s[j];
    for (int c = 0; c < dh; c++)
      o[c] += p * v[c];
  }
  const float inv = 1.0f / sum;
  for (int c = 0; c < dh; c++)
    o[c] *= inv;
}
