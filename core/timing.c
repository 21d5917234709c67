/*
 * timing.c - word-level timestamps from the cross-attention of the
 * alignment heads, as openai/whisper computes them (see timing.h).
 *
 * Layout follows the data: text helpers that mimic Python's str semantics
 * (UTF-8 decoding with U+FFFD, str.strip(), the `in` substring test that
 * openai's punctuation checks use), the word split, the attention matrix
 * (softmax, standardisation, median filter, head mean), DTW, then the
 * policy of add_word_timestamps and transcribe.py's seek and hallucination
 * rules.
 *
 * Exactness: everything after the matrix (the DTW path, word boundaries,
 * heuristics, rounding) reproduces openai bit for bit given the same matrix;
 * the DTW keeps its cost in float32 with float64 additions as openai's numba
 * code does. The matrix itself (softmax, std_mean, mean over heads) agrees
 * with torch's float32 kernels within a few ulps, not always in the last
 * bit.
 *
 * Threading: no globals; reentrant. Ownership: see timing.h.
 * ref: openai/whisper v20250625 whisper/timing.py, whisper/transcribe.py,
 * whisper/tokenizer.py (split_tokens_on_unicode, split_tokens_on_spaces).
 */
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "pystr.h"

#define WD_TOKENS_PER_SECOND 50.0 /* audio.py TOKENS_PER_SECOND */
#define WD_FRAMES_PER_SECOND 100.0
#define WD_HOP_LENGTH 160
#define WD_SAMPLE_RATE 16000
#define WD_N_FRAMES 3000

/* Python's string.punctuation. */
static const char wd_py_punctuation[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
/* transcribe.py `punctuation`: prepend + append defaults, as one string. */
static const char wd_hal_punctuation[] = WD_TIMING_PREPEND WD_TIMING_APPEND;
/* add_word_timestamps sentence_end_marks. */
static const char wd_sentence_end_marks[] = ".\u3002!\uff01?\uff1f";

void wd_timing_opts_default(wd_timing_opts_t *o) {
  *o = (wd_timing_opts_t){
    .prepend = WD_TIMING_PREPEND,
    .append = WD_TIMING_APPEND,
    .medfilt_width = 7,
    .qk_scale = 1.0f,
  };
}

/* ------------------------------------------------ Python string semantics */

/* Python's `needle in haystack` for str: a substring test, true for "".
 * On valid UTF-8 a byte substring is a code point substring. */
static int py_in(const char *needle, size_t n, const char *haystack) {
  if (n == 0)
    return 1;
  const size_t h = strlen(haystack);
  for (size_t i = 0; i + n <= h; i++)
    if (memcmp(haystack + i, needle, n) == 0)
      return 1;
  return 0;
}

/* Python's `s.strip() in set`. */
static int py_strip_in(const char *s, const char *set) {
  size_t n;
  const char *b = wd_py_strip(s, strlen(s), &n);
  return py_in(b, n, set);
}

/* Python's max(a, b) and min(a, b): the first argument unless the second
 * is strictly greater (smaller). */
static double py_max(double a, double b) { return b > a ? b : a; }
static double py_min(double a, double b) { return b < a ? b : a; }

/* Python's round(x) for the seek: to the nearest integer, ties to even
 * (nearbyint in the default rounding mode). */
static int py_round_int(double x) { return (int)nearbyint(x); }

double wd_timing_round2(double x) {
  if (!isfinite(x))
    return x;
  /* glibc formats the exact binary value, rounding half to even, as
   * CPython's round(x, 2) does via _Py_dg_dtoa mode 3; both then read the
   * decimal back to the nearest double. */
  char buf[64];
  snprintf(buf, sizeof buf, "%.2f", x);
  return strtod(buf, NULL);
}

/* numpy's pairwise summation of float64 (np.add.reduce, as np.mean uses). */
static double np_pairwise_sum(const double *a, size_t n) {
  if (n < 8) {
    double s = 0.0; /* numpy starts from -0.0; the same for any non-empty sum */
    for (size_t i = 0; i < n; i++)
      s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; k++)
      r[k] = a[k];
    size_t i;
    for (i = 8; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; k++)
        r[k] += a[i + (size_t)k];
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++)
      s += a[i];
    return s;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
}

/* ------------------------------------------------------------ word lists */

void wd_timing_words_free(wd_timing_word_t *w, int n) {
  if (!w)
    return;
  for (int i = 0; i < n; i++)
    free(w[i].word);
  free(w);
}

/* A growable list of alignment words. */
typedef struct {
  wd_timing_word_t *v;
  int n, cap;
} wlist_t;

static int wlist_push(wlist_t *l, char *word, int tok_begin, int n_tok) {
  if (l->n == l->cap) {
    const int cap = l->cap ? l->cap * 2 : 32;
    wd_timing_word_t *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v)
      return WD_ENOMEM;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (wd_timing_word_t){ .word = word, .tok_begin = tok_begin, .n_tok = n_tok };
  return 0;
}

/* Concatenates a and b into a new string. */
static char *str_cat(const char *a, const char *b) {
  const size_t la = strlen(a), lb = strlen(b);
  char *s = malloc(la + lb + 1);
  if (!s)
    return NULL;
  memcpy(s, a, la);
  memcpy(s + la, b, lb + 1);
  return s;
}

/* ------------------------------------------------------------ word split */

/*
 * The bytes decode_with_timestamps gives each id: a text token's bytes, a
 * special token's name ("<|endoftext|>"). Fills *ret_bytes with all of them
 * concatenated and off[0..n] with where each starts (off[n] = total).
 */
static int token_bytes(const wd_tokenizer_t *tok, const int32_t *ids, int n, char **ret_bytes,
                       size_t *off) {
  size_t total = 0;
  char name[64];
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    if (!wd_tokenizer_token_bytes(tok, ids[i], &len)) {
      if (wd_tokenizer_token_text(tok, ids[i], name, sizeof name) != 0)
        return WD_EINVAL;
      len = strlen(name);
    }
    off[i] = total;
    total += len;
  }
  off[n] = total;
  char *b = malloc(total + 1);
  if (!b)
    return WD_ENOMEM;
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    const char *p = wd_tokenizer_token_bytes(tok, ids[i], &len);
    if (!p) {
      wd_tokenizer_token_text(tok, ids[i], name, sizeof name);
      p = name;
      len = strlen(name);
    }
    memcpy(b + off[i], p, len);
  }
  b[total] = '\0';
  *ret_bytes = b;
  return 0;
}

/*
 * tokenizer.py split_tokens_on_unicode: tokens are gathered until their
 * decoded text has no U+FFFD, or its first U+FFFD is one the decoding of
 * the whole list has at the same place (an invalid byte, not a character
 * cut between tokens). Tokens still gathered at the end form no word.
 */
static int split_on_unicode(const wd_tokenizer_t *tok, const int32_t *ids, int n, wlist_t *out) {
  size_t *off = malloc(((size_t)n + 1) * sizeof *off);
  char *bytes = NULL;
  uint32_t *full = NULL, *cur = NULL;
  char *text = NULL;
  int rc = off ? token_bytes(tok, ids, n, &bytes, off) : WD_ENOMEM;
  if (rc != 0)
    goto done;
  const size_t total = off[n];
  full = malloc((total + 1) * sizeof *full);
  cur = malloc((total + 1) * sizeof *cur);
  text = malloc(4 * total + 1);
  if (!full || !cur || !text) {
    rc = WD_ENOMEM;
    goto done;
  }
  const size_t n_full = wd_utf8_decode((const unsigned char *)bytes, total, full);
  size_t unicode_offset = 0;
  int start = 0; /* first token of the current group */
  for (int k = 0; k < n; k++) {
    const size_t b0 = off[start], b1 = off[k + 1];
    const size_t n_cur = wd_utf8_decode((const unsigned char *)bytes + b0, b1 - b0, cur);
    size_t first = n_cur;
    for (size_t i = 0; i < n_cur; i++) {
      if (cur[i] == WD_PY_REPLACEMENT) {
        first = i;
        break;
      }
    }
    /* Past the end of the whole decoding Python would raise IndexError;
     * here the group just goes on. */
    const int emit = first == n_cur || (unicode_offset + first < n_full &&
                                        full[unicode_offset + first] == WD_PY_REPLACEMENT);
    if (!emit)
      continue;
    size_t len = 0;
    for (size_t i = 0; i < n_cur; i++)
      len += wd_utf8_put(cur[i], text + len);
    char *w = malloc(len + 1);
    if (!w) {
      rc = WD_ENOMEM;
      goto done;
    }
    memcpy(w, text, len);
    w[len] = '\0';
    if ((rc = wlist_push(out, w, start, k + 1 - start)) != 0) {
      free(w);
      goto done;
    }
    unicode_offset += n_cur;
    start = k + 1;
  }
done:
  free(off);
  free(bytes);
  free(full);
  free(cur);
  free(text);
  return rc;
}

/*
 * tokenizer.py split_tokens_on_spaces: unicode subwords are joined to the
 * previous word unless they are special tokens, start with a space, or strip
 * to something `in` string.punctuation (a substring test: "" and "()" count).
 */
static int split_on_spaces(const wd_tokenizer_t *tok, const int32_t *ids, int n, wlist_t *out) {
  wlist_t sub = { 0 };
  int rc = split_on_unicode(tok, ids, n, &sub);
  const int32_t eot = wd_tokenizer_special(tok)->eot;
  for (int i = 0; rc == 0 && i < sub.n; i++) {
    wd_timing_word_t *s = &sub.v[i];
    const int special = ids[s->tok_begin] >= eot;
    const int with_space = s->word[0] == ' ';
    const int punctuation = py_strip_in(s->word, wd_py_punctuation);
    if (special || with_space || punctuation || out->n == 0) {
      if ((rc = wlist_push(out, s->word, s->tok_begin, s->n_tok)) == 0)
        s->word = NULL;
      continue;
    }
    wd_timing_word_t *last = &out->v[out->n - 1];
    char *w = str_cat(last->word, s->word);
    if (!w) {
      rc = WD_ENOMEM;
      break;
    }
    free(last->word);
    last->word = w;
    last->n_tok += s->n_tok;
  }
  wd_timing_words_free(sub.v, sub.n);
  return rc;
}

/* tokenizer.py split_to_word_tokens: languages written without spaces. */
static int splits_on_unicode(const char *language) {
  static const char *const langs[] = { "zh", "ja", "th", "lo", "my", "yue" };
  if (!language)
    return 0;
  for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
    if (strcasecmp(language, langs[i]) == 0)
      return 1;
  return 0;
}

int wd_timing_split_words(const wd_tokenizer_t *tok, const char *language, const int32_t *ids,
                          int n, wd_timing_word_t **ret_words, int *ret_n) {
  if (!tok || (!ids && n > 0) || n < 0 || !ret_words || !ret_n)
    return WD_EINVAL;
  *ret_words = NULL;
  *ret_n = 0;
  wlist_t out = { 0 };
  int rc = splits_on_unicode(language) ? split_on_unicode(tok, ids, n, &out)
                                       : split_on_spaces(tok, ids, n, &out);
  if (rc != 0) {
    wd_timing_words_free(out.v, out.n);
    return rc;
  }
  *ret_words = out.v;
  *ret_n = out.n;
  return 0;
}

/* ------------------------------------------------------ attention matrix */

/* NaN-last ordering, as torch.sort puts NaN after every number. */
static int nan_last_less(float a, float b) {
  if (isnan(a))
    return 0;
  if (isnan(b))
    return 1;
  return a < b;
}

/* Eight windows at a time, lane by lane, in fixed-length loops the
 * compiler turns into SIMD min/max at -O2. */
#define WD_MED_LANES 8

/* Compare-exchange on eight lanes: a gets the smaller values, b the larger. */
static inline void cswap8(float *restrict a, float *restrict b) {
  for (int l = 0; l < WD_MED_LANES; l++) {
    const float lo = b[l] < a[l] ? b[l] : a[l], hi = b[l] < a[l] ? a[l] : b[l];
    a[l] = lo;
    b[l] = hi;
  }
}

/* The median of each window of 7 of a NaN-free padded row (len + 6
 * values): a 16-comparator sorting network (Knuth), which gives the value
 * any sort gives. */
static void median7(const float *row, float *y, int len) {
  float a[7][WD_MED_LANES], tail[WD_MED_LANES + 6];
  for (int t0 = 0; t0 < len; t0 += WD_MED_LANES) {
    const int n = len - t0 < WD_MED_LANES ? len - t0 : WD_MED_LANES;
    const float *src = row + t0;
    if (n < WD_MED_LANES) { /* the last windows, spare lanes zero */
      memset(tail, 0, sizeof tail);
      memcpy(tail, src, ((size_t)n + 6) * sizeof *tail);
      src = tail;
    }
    for (int k = 0; k < 7; k++)
      for (int l = 0; l < WD_MED_LANES; l++)
        a[k][l] = src[l + k];
    cswap8(a[0], a[6]);
    cswap8(a[2], a[3]);
    cswap8(a[4], a[5]);
    cswap8(a[0], a[2]);
    cswap8(a[1], a[4]);
    cswap8(a[3], a[6]);
    cswap8(a[0], a[1]);
    cswap8(a[2], a[5]);
    cswap8(a[3], a[4]);
    cswap8(a[1], a[2]);
    cswap8(a[4], a[6]);
    cswap8(a[2], a[3]);
    cswap8(a[4], a[5]);
    cswap8(a[1], a[2]);
    cswap8(a[3], a[4]);
    cswap8(a[5], a[6]);
    for (int l = 0; l < n; l++)
      y[t0 + l] = a[3][l];
  }
}

int wd_timing_median_filter(float *x, int rows, int len, int width) {
  if (!x || rows < 0 || len < 0 || width <= 0 || width % 2 == 0 || width > 63)
    return WD_EINVAL;
  const int pad = width / 2;
  if (len <= pad)
    return 0; /* timing.py: F.pad needs the pad narrower than the input */
  float *row = malloc(((size_t)len + 2 * (size_t)pad) * sizeof *row);
  if (!row)
    return WD_ENOMEM;
  float win[63];
  for (int r = 0; r < rows; r++) {
    float *y = x + (size_t)r * (size_t)len;
    /* F.pad(mode="reflect"): mirror without repeating the edge sample. */
    for (int i = 0; i < len + 2 * pad; i++) {
      int j = i - pad;
      if (j < 0)
        j = -j;
      else if (j >= len)
        j = 2 * (len - 1) - j;
      row[i] = y[j];
    }
    int has_nan = 0;
    for (int t = 0; t < len; t++)
      has_nan |= isnan(y[t]);
    if (width == 7 && !has_nan) {
      median7(row, y, len); /* the common case, about 10x faster */
      continue;
    }
    for (int t = 0; t < len; t++) {
      for (int k = 0; k < width; k++) { /* insertion sort of the window */
        const float v = row[t + k];
        int p = k;
        while (p > 0 && nan_last_less(v, win[p - 1])) {
          win[p] = win[p - 1];
          p--;
        }
        win[p] = v;
      }
      y[t] = win[pad];
    }
  }
  free(row);
  return 0;
}

/*
 * The matrix find_alignment runs DTW on, before its negation (timing.h):
 *   w = softmax(qk[:, :, :m] * qk_scale) over audio positions
 *   w = (w - mean) / std over tokens (std_mean, unbiased=False)
 *   w = median_filter(w, width)
 *   matrix = mean over heads of w[:, n_sot:n_tokens-1, :]
 * Writes matrix (n_tokens - n_sot - 1, m).
 */
int wd_timing_attention_matrix(const float *qk, int n_heads, int n_tokens, int n_audio_ctx,
                               int n_sot, int num_frames, float qk_scale, int width,
                               float *matrix) {
  if (!qk || !matrix || n_heads < 1 || n_sot < 1 || n_tokens < n_sot + 2 || num_frames < 0 ||
      num_frames / 2 > n_audio_ctx || width <= 0 || width % 2 == 0)
    return WD_EINVAL;
  const int m = num_frames / 2;
  const size_t T = (size_t)n_tokens, M = (size_t)m, H = (size_t)n_heads;
  const size_t N = T - (size_t)n_sot - 1; /* rows kept: <|notimestamps|> .. last text token */
  float *w = malloc(H * T * M * sizeof *w + 1);
  if (!w)
    return WD_ENOMEM;
  /* (n_heads, n_tokens, m): softmax over the first m audio positions. */
  for (size_t h = 0; h < H; h++) {
    for (size_t i = 0; i < T; i++) {
      const float *src = qk + (h * T + i) * (size_t)n_audio_ctx;
      float *dst = w + (h * T + i) * M;
      float mx = -INFINITY;
      for (size_t t = 0; t < M; t++) {
        dst[t] = src[t] * qk_scale;
        if (dst[t] > mx)
          mx = dst[t];
      }
      double sum = 0.0;
      for (size_t t = 0; t < M; t++) {
        dst[t] = expf(dst[t] - mx);
        sum += dst[t];
      }
      const float inv = (float)(1.0 / sum);
      for (size_t t = 0; t < M; t++)
        dst[t] *= inv;
    }
  }
  /* Standardise each (head, audio position) across tokens; rows are
   * walked in memory order, each position keeping its own sums. */
  double *mean = malloc(2 * M * sizeof *mean + 1);
  float *meanf = malloc(2 * M * sizeof *meanf + 1);
  if (!mean || !meanf) {
    free(mean);
    free(meanf);
    free(w);
    return WD_ENOMEM;
  }
  double *var = mean + M;
  float *stdf = meanf + M;
  for (size_t h = 0; h < H; h++) {
    float *wh = w + h * T * M;
    for (size_t t = 0; t < 2 * M; t++)
      mean[t] = 0.0;
    for (size_t i = 0; i < T; i++)
      for (size_t t = 0; t < M; t++)
        mean[t] += wh[i * M + t];
    for (size_t t = 0; t < M; t++)
      mean[t] /= (double)T;
    for (size_t i = 0; i < T; i++) {
      for (size_t t = 0; t < M; t++) {
        const double d = wh[i * M + t] - mean[t];
        var[t] += d * d;
      }
    }
    for (size_t t = 0; t < M; t++) {
      meanf[t] = (float)mean[t];
      stdf[t] = (float)sqrt(var[t] / (double)T);
    }
    for (size_t i = (size_t)n_sot; i < (size_t)n_sot + N; i++) /* only the rows kept */
      for (size_t t = 0; t < M; t++)
        wh[i * M + t] = (wh[i * M + t] - meanf[t]) / stdf[t];
  }
  free(mean);
  free(meanf);
  /* Median filter along audio positions; only the rows kept are needed. */
  int rc = 0;
  for (size_t h = 0; h < H && rc == 0; h++)
    rc = wd_timing_median_filter(w + (h * T + (size_t)n_sot) * M, (int)N, m, width);
  if (rc == 0) {
    for (size_t r = 0; r < N; r++) {
      for (size_t t = 0; t < M; t++) {
        float s = 0.0f;
        for (size_t h = 0; h < H; h++)
          s += w[(h * T + (size_t)n_sot + r) * M + t];
        matrix[r * M + t] = s / (float)H;
      }
    }
  }
  free(w);
  return rc;
}

/* ------------------------------------------------------------------- DTW */

int wd_timing_dtw(const float *x, int n, int m, int *text_idx, int *time_idx) {
  if (n < 0 || m < 0 || (!x && n > 0 && m > 0) || !text_idx || !time_idx)
    return WD_EINVAL;
  const size_t W = (size_t)m + 1;
  float *cost = malloc(((size_t)n + 1) * W * sizeof *cost);
  signed char *trace = malloc(((size_t)n + 1) * W);
  if (!cost || !trace) {
    free(cost);
    free(trace);
    return WD_ENOMEM;
  }
  for (size_t k = 0; k < ((size_t)n + 1) * W; k++) {
    cost[k] = INFINITY;
    trace[k] = -1;
  }
  cost[0] = 0.0f;
  /* Column by column, as dtw_cpu; ties go to the later choice. */
  for (size_t j = 1; j <= (size_t)m; j++) {
    for (size_t i = 1; i <= (size_t)n; i++) {
      const float c0 = cost[(i - 1) * W + j - 1], c1 = cost[(i - 1) * W + j],
                  c2 = cost[i * W + j - 1];
      float c;
      signed char t;
      if (c0 < c1 && c0 < c2) {
        c = c0;
        t = 0;
      } else if (c1 < c0 && c1 < c2) {
        c = c1;
        t = 1;
      } else {
        c = c2;
        t = 2;
      }
      /* float64 input + float32 cost, stored back into the float32 matrix. */
      cost[i * W + j] = (float)((double)x[(i - 1) * (size_t)m + j - 1] + (double)c);
      trace[i * W + j] = t;
    }
  }
  /* backtrace: the first row leads left, the first column up. */
  for (size_t j = 0; j < W; j++)
    trace[j] = 2;
  for (size_t i = 0; i <= (size_t)n; i++)
    trace[i * W] = 1;
  int len = 0;
  size_t i = (size_t)n, j = (size_t)m;
  while (i > 0 || j > 0) {
    text_idx[len] = (int)i - 1;
    time_idx[len] = (int)j - 1;
    len++;
    const signed char t = trace[i * W + j];
    if (t == 0) {
      i--;
      j--;
    } else if (t == 1) {
      i--;
    } else {
      j--;
    }
  }
  for (int a = 0, b = len - 1; a < b; a++, b--) { /* reverse into path order */
    int s = text_idx[a];
    text_idx[a] = text_idx[b];
    text_idx[b] = s;
    s = time_idx[a];
    time_idx[a] = time_idx[b];
    time_idx[b] = s;
  }
  free(cost);
  free(trace);
  return len;
}

/* -------------------------------------------------------- find_alignment */

int wd_timing_find_alignment(const wd_tokenizer_t *tok, const char *language,
                             const int32_t *tokens, int n_tokens, int n_sot, const float *qk,
                             int n_heads, int n_audio_ctx, int num_frames, const float *probs,
                             const wd_timing_opts_t *opts, wd_timing_word_t **ret_words,
                             int *ret_n) {
  if (!ret_words || !ret_n)
    return WD_EINVAL;
  *ret_words = NULL;
  *ret_n = 0;
  wd_timing_opts_t def;
  if (!opts) {
    wd_timing_opts_default(&def);
    opts = &def;
  }
  const int n_text = n_tokens - n_sot - 2;
  if (!tok || !tokens || n_sot < 1 || n_text < 0 || num_frames < 0 || n_audio_ctx < 1 ||
      num_frames / 2 > n_audio_ctx)
    return WD_EINVAL;
  if (n_text == 0)
    return 0; /* timing.py: no text tokens, no model run, no words */
  if (!qk || !probs || n_heads < 1)
    return WD_EINVAL;
  const int m = num_frames / 2;
  const int N = n_text + 1; /* matrix rows: <|notimestamps|> and every text token */
  const int32_t *text = tokens + n_sot + 1;
  /* text_token_probs[k] = probs[n_sot + k] (the logits after token
   * n_sot + k, i.e. sampled_logits[k] of timing.py, at text token k). */
  const float *text_probs = probs + n_sot;

  float *matrix = malloc((size_t)N * (size_t)m * sizeof *matrix + 1);
  int *path_text = malloc(((size_t)N + (size_t)m) * sizeof *path_text);
  int *path_time = malloc(((size_t)N + (size_t)m) * sizeof *path_time);
  double *jump_times = malloc(((size_t)N + (size_t)m) * sizeof *jump_times);
  double *tp = malloc((size_t)n_text * sizeof *tp);
  wd_timing_word_t *split = NULL;
  int n_split = 0;
  wlist_t out = { 0 };
  int rc = 0;
  if (!matrix || !path_text || !path_time || !jump_times || !tp) {
    rc = WD_ENOMEM;
    goto done;
  }
  rc = wd_timing_attention_matrix(qk, n_heads, n_tokens, n_audio_ctx, n_sot, num_frames,
                                  opts->qk_scale, opts->medfilt_width, matrix);
  if (rc != 0)
    goto done;
  for (size_t k = 0; k < (size_t)N * (size_t)m; k++)
    matrix[k] = -matrix[k];
  const int len = wd_timing_dtw(matrix, N, m, path_text, path_time);
  if (len < 0) {
    rc = len;
    goto done;
  }
  /* jumps: the first path entry of every text index. */
  int n_jumps = 0;
  for (int k = 0; k < len; k++)
    if (k == 0 || path_text[k] != path_text[k - 1])
      jump_times[n_jumps++] = path_time[k] / WD_TOKENS_PER_SECOND;

  /* The split runs on text_tokens + [EOT], which tokens[] ends with. */
  rc = wd_timing_split_words(tok, language, text, n_text + 1, &split, &n_split);
  if (rc != 0 || n_split <= 1)
    goto done; /* only the EOT word: no words */
  for (int k = 0; k < n_text; k++)
    tp[k] = text_probs[k];
  int boundary = 0; /* word_boundaries[k], the cumulative token count */
  for (int k = 0; k + 1 < n_split; k++) {
    const int b0 = boundary, b1 = boundary + split[k].n_tok;
    if (b1 >= n_jumps || b1 > n_text) { /* IndexError in numpy */
      rc = WD_EINTERNAL;
      goto done;
    }
    if ((rc = wlist_push(&out, split[k].word, b0, b1 - b0)) != 0)
      goto done;
    split[k].word = NULL;
    wd_timing_word_t *w = &out.v[out.n - 1];
    w->start = jump_times[b0];
    w->end = jump_times[b1];
    w->probability = np_pairwise_sum(tp + b0, (size_t)(b1 - b0)) / (double)(b1 - b0);
    boundary = b1;
  }
done:
  wd_timing_words_free(split, n_split);
  free(matrix);
  free(path_text);
  free(path_time);
  free(jump_times);
  free(tp);
  if (rc != 0) {
    wd_timing_words_free(out.v, out.n);
    return rc;
  }
  *ret_words = out.v;
  *ret_n = out.n;
  return 0;
}

/* ---------------------------------------------------- merge_punctuations */

/* dst.word = a + b, dst.tokens = a.tokens + b.tokens (adjacent ranges);
 * src becomes "" with no tokens. `front` says whether src comes first. */
static int merge_into(wd_timing_word_t *dst, wd_timing_word_t *src, int front) {
  char *w = front ? str_cat(src->word, dst->word) : str_cat(dst->word, src->word);
  if (!w)
    return WD_ENOMEM;
  free(dst->word);
  dst->word = w;
  if (src->n_tok > 0) {
    if (front || dst->n_tok == 0)
      dst->tok_begin = src->tok_begin;
    dst->n_tok += src->n_tok;
  }
  src->word[0] = '\0';
  src->n_tok = 0;
  return 0;
}

int wd_timing_merge_punctuations(wd_timing_word_t *a, int n, const char *prepended,
                                 const char *appended) {
  if ((!a && n > 0) || !prepended || !appended)
    return WD_EINVAL;
  /* Prepended punctuation joins the following word, right to left. */
  for (int i = n - 2, j = n - 1; i >= 0; i--) {
    wd_timing_word_t *prev = &a[i], *next = &a[j];
    if (prev->word[0] == ' ' && py_strip_in(prev->word, prepended)) {
      int rc = merge_into(next, prev, 1);
      if (rc != 0)
        return rc;
    } else {
      j = i;
    }
  }
  /* Appended punctuation joins the previous word, left to right. */
  for (int i = 0, j = 1; j < n; j++) {
    wd_timing_word_t *prev = &a[i], *next = &a[j];
    const size_t lp = strlen(prev->word);
    const int ends_space = lp > 0 && prev->word[lp - 1] == ' ';
    if (!ends_space && py_in(next->word, strlen(next->word), appended)) {
      int rc = merge_into(prev, next, 0);
      if (rc != 0)
        return rc;
    } else {
      i = j;
    }
  }
  return 0;
}

/* --------------------------------------------------- add_word_timestamps */

static int cmp_double(const void *pa, const void *pb) {
  const double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

/* Text tokens (below eot) of a segment. */
static int n_text_tokens(const wd_segment_t *s, int32_t eot) {
  int n = 0;
  for (int i = 0; i < s->n_tokens; i++)
    n += s->tokens[i] < eot;
  return n;
}

int wd_timing_add_word_timestamps(wd_timing_word_t *align, int n_align,
                                  const wd_timing_opts_t *opts, int32_t eot, wd_segment_t *segs,
                                  int n_segs, double last_speech_timestamp) {
  if ((!align && n_align > 0) || n_align < 0 || (!segs && n_segs > 0) || n_segs < 0)
    return WD_EINVAL;
  if (n_segs == 0)
    return 0;
  wd_timing_opts_t def;
  if (!opts) {
    wd_timing_opts_default(&def);
    opts = &def;
  }

  /* The median of the non-zero word durations, at most 0.7 s. */
  double *dur = malloc((size_t)n_align * sizeof *dur + 1);
  if (!dur)
    return WD_ENOMEM;
  int n_dur = 0;
  for (int i = 0; i < n_align; i++) {
    const double d = align[i].end - align[i].start;
    if (d != 0.0)
      dur[n_dur++] = d;
  }
  double median = 0.0;
  if (n_dur > 0) {
    qsort(dur, (size_t)n_dur, sizeof *dur, cmp_double);
    median = n_dur % 2 ? dur[n_dur / 2] : (dur[n_dur / 2 - 1] + dur[n_dur / 2]) / 2.0;
  }
  free(dur);
  median = py_min(0.7, median);
  const double max_duration = median * 2;

  /* Words at sentence ends are no longer than max_duration. */
  if (n_dur > 0) {
    for (int i = 1; i < n_align; i++) {
      wd_timing_word_t *w = &align[i];
      if (w->end - w->start > max_duration) {
        if (py_in(w->word, strlen(w->word), wd_sentence_end_marks))
          w->end = w->start + max_duration;
        else if (py_in(align[i - 1].word, strlen(align[i - 1].word), wd_sentence_end_marks))
          w->start = w->end - max_duration;
      }
    }
  }

  int rc = wd_timing_merge_punctuations(align, n_align, opts->prepend, opts->append);
  if (rc != 0)
    return rc;

  /* Hand the words to segments by text-token counts; allocate first so a
   * failure leaves the segments as they were. */
  wd_word_t **words = calloc((size_t)n_segs, sizeof *words);
  int *n_words = calloc((size_t)n_segs, sizeof *n_words);
  if (!words || !n_words) {
    rc = WD_ENOMEM;
    goto fail;
  }
  const double time_offset = (double)(segs[0].seek * WD_HOP_LENGTH) / WD_SAMPLE_RATE;
  int wi = 0;
  for (int s = 0; s < n_segs; s++) {
    const int n_text = n_text_tokens(&segs[s], eot);
    int first = wi, saved = 0, count = 0;
    for (; wi < n_align && saved < n_text; wi++) {
      count += align[wi].word[0] != '\0';
      saved += align[wi].n_tok;
    }
    if (count == 0)
      continue;
    words[s] = calloc((size_t)count, sizeof *words[s]);
    if (!words[s]) {
      rc = WD_ENOMEM;
      goto fail;
    }
    for (int k = first; k < wi; k++) {
      if (align[k].word[0] == '\0')
        continue;
      wd_word_t *w = &words[s][n_words[s]++];
      if (!(w->word = strdup(align[k].word))) {
        rc = WD_ENOMEM;
        goto fail;
      }
      w->start = wd_timing_round2(time_offset + align[k].start);
      w->end = wd_timing_round2(time_offset + align[k].end);
      w->probability = (float)align[k].probability;
    }
  }

  for (int s = 0; s < n_segs; s++) {
    wd_segment_t *seg = &segs[s];
    wd_words_free(seg->words, seg->n_words);
    seg->words = words[s];
    seg->n_words = n_words[s];
    words[s] = NULL;
    const int n = seg->n_words;
    if (n == 0)
      continue;
    wd_word_t *w0 = &seg->words[0], *w1 = n > 1 ? &seg->words[1] : NULL;
    wd_word_t *wl = &seg->words[n - 1];
    /* The first and second word after a pause are no longer than
     * max_duration (twice it for the pair). */
    if (w0->end - last_speech_timestamp > median * 4 &&
        (w0->end - w0->start > max_duration || (w1 && w1->end - w0->start > max_duration * 2))) {
      if (w1 && w1->end - w1->start > max_duration) {
        const double boundary = py_max(w1->end / 2, w1->end - max_duration);
        w0->end = w1->start = boundary;
      }
      w0->start = py_max(0, w0->end - max_duration);
    }
    /* The segment's start wins over a first word that is too long. */
    if (seg->start < w0->end && seg->start - 0.5 > w0->start)
      w0->start = py_max(0, py_min(w0->end - median, seg->start));
    else
      seg->start = w0->start;
    /* The segment's end wins over a last word that is too long. */
    if (seg->end > wl->start && seg->end + 0.5 < wl->end)
      wl->end = py_max(wl->start + median, seg->end);
    else
      seg->end = wl->end;
    last_speech_timestamp = seg->end;
  }
  free(words);
  free(n_words);
  return 0;
fail:
  if (words)
    for (int s = 0; s < n_segs; s++)
      wd_words_free(words[s], n_words[s]);
  free(words);
  free(n_words);
  return rc;
}

int wd_timing_window(const wd_tokenizer_t *tok, const char *language, const int32_t *tokens,
                     int n_tokens, int n_sot, const float *qk, int n_heads, int n_audio_ctx,
                     int num_frames, const float *probs, const wd_timing_opts_t *opts,
                     wd_segment_t *segs, int n_segs, double last_speech_timestamp) {
  if (!tok)
    return WD_EINVAL;
  wd_timing_word_t *align = NULL;
  int n_align = 0;
  int rc = wd_timing_find_alignment(tok, language, tokens, n_tokens, n_sot, qk, n_heads,
                                    n_audio_ctx, num_frames, probs, opts, &align, &n_align);
  if (rc == 0)
    rc = wd_timing_add_word_timestamps(align, n_align, opts, wd_tokenizer_special(tok)->eot, segs,
                                       n_segs, last_speech_timestamp);
  wd_timing_words_free(align, n_align);
  return rc;
}

/* ------------------------------------------------------ the window's tail */

double wd_timing_last_speech(const wd_segment_t *segs, int n_segs, double fallback) {
  for (int s = n_segs - 1; s >= 0; s--)
    if (segs[s].n_words > 0)
      return segs[s].words[segs[s].n_words - 1].end;
  return n_segs > 0 ? segs[n_segs - 1].end : fallback;
}

double wd_timing_word_anomaly_score(const wd_word_t *w) {
  const double probability = w->probability, duration = w->end - w->start;
  double score = 0.0;
  if (probability < 0.15)
    score += 1.0;
  if (duration < 0.133)
    score += (0.133 - duration) * 15;
  if (duration > 2.0)
    score += duration - 2.0;
  return score;
}

int wd_timing_segment_is_anomaly(const wd_word_t *words, int n_words) {
  if (!words || n_words <= 0)
    return 0;
  double score = 0.0;
  int n = 0;
  for (int i = 0; i < n_words && n < 8; i++) {
    if (py_in(words[i].word, strlen(words[i].word), wd_hal_punctuation))
      continue;
    score += wd_timing_word_anomaly_score(&words[i]);
    n++;
  }
  return score >= 3 || score + 0.01 >= n;
}

/* next_words_segment: the first of segs[0..n) with words, or NULL. */
static const wd_segment_t *next_words_segment(const wd_segment_t *segs, int n) {
  for (int i = 0; i < n; i++)
    if (segs[i].n_words > 0)
      return &segs[i];
  return NULL;
}

static int seg_is_anomaly(const wd_segment_t *s) {
  return s && wd_timing_segment_is_anomaly(s->words, s->n_words);
}

void wd_timing_window_seek(const wd_segment_t *segs, int n_segs, const wd_timing_seek_in_t *in,
                           int *seek, int *ret_n_keep, int *ret_skip) {
  const double time_offset = (double)(in->previous_seek * WD_HOP_LENGTH) / WD_SAMPLE_RATE;
  const double window_end_time =
      (double)((in->previous_seek + WD_N_FRAMES) * WD_HOP_LENGTH) / WD_SAMPLE_RATE;
  const double segment_duration = (double)(in->segment_size * WD_HOP_LENGTH) / WD_SAMPLE_RATE;
  const double content_duration = (double)(in->content_frames * WD_HOP_LENGTH) / WD_SAMPLE_RATE;
  *ret_n_keep = n_segs;
  *ret_skip = 0;
  const int have_end = n_segs > 0; /* get_end() is not None */

  if (!in->single_timestamp_ending && have_end) {
    const double last_word_end = wd_timing_last_speech(segs, n_segs, 0.0);
    if (last_word_end > time_offset)
      *seek = py_round_int(last_word_end * WD_FRAMES_PER_SECOND);
  }
  const double threshold = in->hallucination_silence_threshold;
  if (!(threshold >= 0))
    return; /* None */

  if (!in->single_timestamp_ending && have_end) {
    const double last_word_end = wd_timing_last_speech(segs, n_segs, 0.0);
    if (last_word_end > time_offset) {
      const double remaining_duration = window_end_time - last_word_end;
      if (remaining_duration > threshold)
        *seek = py_round_int(last_word_end * WD_FRAMES_PER_SECOND);
      else
        *seek = in->previous_seek + in->segment_size;
    }
  }

  /* A possible hallucination first: skip the silence before it. */
  const wd_segment_t *first = next_words_segment(segs, n_segs);
  if (first && seg_is_anomaly(first)) {
    const double gap = first->start - time_offset;
    if (gap > threshold) {
      *seek = in->previous_seek + py_round_int(gap * WD_FRAMES_PER_SECOND);
      *ret_n_keep = 0;
      *ret_skip = 1;
      return;
    }
  }

  /* Drop from an anomalous segment surrounded by silence or by more
   * anomalies. */
  double hal_last_end = in->last_speech_timestamp;
  for (int si = 0; si < n_segs; si++) {
    const wd_segment_t *s = &segs[si];
    if (s->n_words == 0)
      continue;
    if (seg_is_anomaly(s)) {
      const wd_segment_t *next = next_words_segment(segs + si + 1, n_segs - si - 1);
      const double hal_next_start = next ? next->words[0].start : time_offset + segment_duration;
      const int silence_before = s->start - hal_last_end > threshold || s->start < threshold ||
                                 s->start - time_offset < 2.0;
      const int silence_after = hal_next_start - s->end > threshold || seg_is_anomaly(next) ||
                                window_end_time - s->end < 2.0;
      if (silence_before && silence_after) {
        *seek = py_round_int(py_max(time_offset + 1, s->start) * WD_FRAMES_PER_SECOND);
        if (content_duration - s->end < threshold)
          *seek = in->content_frames;
        *ret_n_keep = si;
        return;
      }
    }
    hal_last_end = s->end;
  }
}

/* ------------------------------------------------------- heads and tokens */

int wd_timing_heads(const wd_model_t *m, int (*pairs)[2], int max, int *ret_n) {
  if (!m || !ret_n || max < 0 || (!pairs && max > 0))
    return WD_EINVAL;
  const int(*known)[2] = NULL;
  int n = 0;
  if (wd_model_alignment_heads(m, &known, &n) == 0 && n > 0) {
    *ret_n = n;
    if (n > max)
      return WD_ERANGE;
    memcpy(pairs, known, (size_t)n * sizeof *pairs);
    return 0;
  }
  /* model.py: all heads of the last half of the decoder layers. */
  const wd_hparams_t *hp = wd_model_hparams(m);
  const int first = hp->n_text_layer / 2;
  n = (hp->n_text_layer - first) * hp->n_text_head;
  *ret_n = n;
  if (n > max)
    return WD_ERANGE;
  int k = 0;
  for (int l = first; l < hp->n_text_layer; l++)
    for (int h = 0; h < hp->n_text_head; h++) {
      pairs[k][0] = l;
      pairs[k][1] = h;
      k++;
    }
  return 0;
}

int wd_timing_align_tokens(const wd_tokenizer_t *tok, const int32_t *sot_seq, int n_sot,
                           const wd_segment_t *segs, int n_segs, int32_t *out, int max,
                           int *ret_n) {
  if (!tok || !sot_seq || n_sot < 1 || (!segs && n_segs > 0) || !ret_n || max < 0 ||
      (!out && max > 0))
    return WD_EINVAL;
  const wd_special_tokens_t *sp = wd_tokenizer_special(tok);
  int n = n_sot + 2;
  for (int s = 0; s < n_segs; s++)
    n += n_text_tokens(&segs[s], sp->eot);
  *ret_n = n;
  if (n > max)
    return WD_ERANGE;
  int k = 0;
  for (int i = 0; i < n_sot; i++)
    out[k++] = sot_seq[i];
  out[k++] = sp->notimestamps;
  for (int s = 0; s < n_segs; s++)
    for (int i = 0; i < segs[s].n_tokens; i++)
      if (segs[s].tokens[i] < sp->eot)
        out[k++] = segs[s].tokens[i];
  out[k++] = sp->eot;
  return 0;
}
