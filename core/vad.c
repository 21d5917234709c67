/*
 * vad.c - the Silero VAD network (see vad.h): loading our model file and the
 * forward pass over a whole signal.
 *
 * Layout: activations are time-major (a row per time step, channels
 * contiguous), so a convolution of 3 taps is one matrix product over rows
 * that are three neighbouring time steps side by side (tap-major: row t =
 * x[t-1] | x[t] | x[t+1], zeros outside the chunk's own steps); weights are
 * stored k-major for vad_gemm.h, columns padded with zeros to a multiple of
 * 16. Chunks go BLOCK at a time through the STFT and the convolutions and
 * the LSTM's input projection; then the recurrence runs chunk by chunk.
 */
#include "vad.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "vad_gemm.h"

#define BLOCK 64     /* chunks per pass through the convolutional front */
#define N_FRAMES 4   /* STFT frames per chunk: (576 + 64 - 256) / 128 + 1 */
#define WIN 256      /* STFT window */
#define HOP 128
#define N_BASIS 258  /* 129 real and 129 imaginary filters */
#define N_BINS 129
#define HID 128      /* LSTM state */
_Static_assert(HID == WD_VAD_STATE, "vad.h streams the LSTM state");
#define GATES (4 * HID)
#define ROUND16(n) (((n) + 15u) & ~(size_t)15u)

/* One convolution: cin -> cout, 3 taps, weights k-major ((3 cin) x cout16). */
typedef struct {
  size_t cin, cout, cout16;
  float *w, *b;
} conv_t;

struct wd_vad_model {
  float *stft;             /* WIN x ROUND16(N_BASIS) */
  conv_t conv[4];
  float *wih, *whh;        /* HID x GATES, k-major */
  float *bias;             /* b_ih + b_hh */
  float out_w[HID], out_b;
};

/* The tensors of our file: name and shape (vad_convert.py writes them). */
enum { T_STFT, T_C0W, T_C0B, T_C1W, T_C1B, T_C2W, T_C2B, T_C3W, T_C3B,
       T_WIH, T_WHH, T_BIH, T_BHH, T_OUTW, T_OUTB, N_TENSORS };
static const struct {
  const char *name;
  size_t shape[3];
} k_tensors[N_TENSORS] = {
  { "stft.basis", { N_BASIS, 1, WIN } },  { "conv0.weight", { 128, N_BINS, 3 } },
  { "conv0.bias", { 128 } },              { "conv1.weight", { 64, 128, 3 } },
  { "conv1.bias", { 64 } },               { "conv2.weight", { 64, 64, 3 } },
  { "conv2.bias", { 64 } },               { "conv3.weight", { 128, 64, 3 } },
  { "conv3.bias", { 128 } },              { "lstm.weight_ih", { GATES, HID } },
  { "lstm.weight_hh", { GATES, HID } },   { "lstm.bias_ih", { GATES } },
  { "lstm.bias_hh", { GATES } },          { "out.weight", { 1, HID, 1 } },
  { "out.bias", { 1 } },
};

#define MAX_FILE (16u << 20)  /* ours is 1.2 MB */
#define MAX_HEADER (1u << 16)

static int fail(char *err, size_t err_len, const char *path, const char *what) {
  snprintf(err, err_len, "%s: %s", path, what);
  return WD_EMODEL;
}

/* Reads path whole into *ret (at most MAX_FILE bytes). */
static int read_file(const char *path, unsigned char **ret, size_t *ret_len, char *err,
                     size_t err_len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_len, "%s: cannot open", path);
    return WD_ENOENT;
  }
  unsigned char *buf = malloc(MAX_FILE);
  size_t n = buf ? fread(buf, 1, MAX_FILE, f) : 0;
  const int more = buf && n == MAX_FILE && fgetc(f) != EOF;
  fclose(f);
  if (!buf)
    return WD_ENOMEM;
  if (more) {
    free(buf);
    return fail(err, err_len, path, "larger than any Silero VAD file (16 MiB)");
  }
  *ret = buf;
  *ret_len = n;
  return 0;
}

/* Finds tensor i's f32 data in the file (header already parsed). */
static int tensor_data(const json_t *hdr, size_t i, const unsigned char *data, size_t data_len,
                       const float **ret, const char *path, char *err, size_t err_len) {
  char msg[160];
  const json_t *t = json_object_get(hdr, k_tensors[i].name);
  const json_t *shape = json_object_get(t, "shape"), *offs = json_object_get(t, "data_offsets");
  const char *dtype = json_string_value(json_object_get(t, "dtype"));
  if (!t || !dtype || strcmp(dtype, "F32") != 0 || !json_is_array(shape) ||
      !json_is_array(offs) || json_array_size(offs) != 2) {
    snprintf(msg, sizeof msg, "tensor %s missing or not F32", k_tensors[i].name);
    return fail(err, err_len, path, msg);
  }
  size_t n = 1, dims = 0;
  while (dims < 3 && k_tensors[i].shape[dims])
    dims++;
  if (json_array_size(shape) != dims) {
    snprintf(msg, sizeof msg, "tensor %s has %zu dimensions, expected %zu", k_tensors[i].name,
             json_array_size(shape), dims);
    return fail(err, err_len, path, msg);
  }
  for (size_t d = 0; d < dims; d++) {
    const json_t *v = json_array_get(shape, d);
    if (!json_is_integer(v) || (size_t)json_integer_value(v) != k_tensors[i].shape[d] ||
        json_integer_value(v) < 0) {
      snprintf(msg, sizeof msg, "tensor %s has another shape than Silero VAD v6's",
               k_tensors[i].name);
      return fail(err, err_len, path, msg);
    }
    n *= k_tensors[i].shape[d];
  }
  const json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
  if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
      json_integer_value(e) < json_integer_value(b) ||
      (size_t)json_integer_value(e) > data_len ||
      (size_t)(json_integer_value(e) - json_integer_value(b)) != n * 4 ||
      json_integer_value(b) % 4) {
    snprintf(msg, sizeof msg, "tensor %s: data offsets out of the file or of the wrong size",
             k_tensors[i].name);
    return fail(err, err_len, path, msg);
  }
  *ret = (const float *)(const void *)(data + json_integer_value(b));
  return 0;
}

/* dst (cin 3 rows of cout16, tap-major k = tap * cin + i) from a torch
 * Conv1d weight w[o][i][tap]. */
static int conv_init(conv_t *c, size_t cin, size_t cout, const float *w, const float *b) {
  c->cin = cin, c->cout = cout, c->cout16 = ROUND16(cout);
  c->w = calloc(3 * cin * c->cout16, sizeof(float));
  c->b = calloc(c->cout16, sizeof(float));
  if (!c->w || !c->b)
    return WD_ENOMEM;
  for (size_t o = 0; o < cout; o++) {
    for (size_t i = 0; i < cin; i++)
      for (size_t tap = 0; tap < 3; tap++)
        c->w[(tap * cin + i) * c->cout16 + o] = w[(o * cin + i) * 3 + tap];
    c->b[o] = b[o];
  }
  return 0;
}

/* Copies the file's tensors into the model's layouts (data is aligned). */
static int model_init(wd_vad_model_t *m, const float *t[N_TENSORS]) {
  const size_t s16 = ROUND16(N_BASIS);
  m->stft = calloc(WIN * s16, sizeof(float));
  m->wih = malloc(HID * GATES * sizeof(float));
  m->whh = malloc(HID * GATES * sizeof(float));
  m->bias = malloc(GATES * sizeof(float));
  if (!m->stft || !m->wih || !m->whh || !m->bias)
    return WD_ENOMEM;
  for (size_t k = 0; k < N_BASIS; k++)
    for (size_t j = 0; j < WIN; j++)
      m->stft[j * s16 + k] = t[T_STFT][k * WIN + j];
  static const size_t io[4][2] = { { N_BINS, 128 }, { 128, 64 }, { 64, 64 }, { 64, 128 } };
  for (int l = 0; l < 4; l++) {
    int rc = conv_init(&m->conv[l], io[l][0], io[l][1], t[T_C0W + 2 * l], t[T_C0B + 2 * l]);
    if (rc)
      return rc;
  }
  for (size_t g = 0; g < GATES; g++) {
    for (size_t k = 0; k < HID; k++) {
      m->wih[k * GATES + g] = t[T_WIH][g * HID + k];
      m->whh[k * GATES + g] = t[T_WHH][g * HID + k];
    }
    m->bias[g] = t[T_BIH][g] + t[T_BHH][g];
  }
  memcpy(m->out_w, t[T_OUTW], sizeof m->out_w);
  m->out_b = t[T_OUTB][0];
  return 0;
}

int wd_vad_model_load(const char *path, wd_vad_model_t **ret_model, char *err, size_t err_len) {
  unsigned char *buf = NULL;
  size_t len = 0;
  json_t *hdr = NULL;
  wd_vad_model_t *m = NULL;
  int rc = read_file(path, &buf, &len, err, err_len);
  if (rc)
    return rc;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0 && len >= 8; i--)
    hlen = hlen << 8 | buf[i];
  if (len < 8 || hlen == 0 || hlen > MAX_HEADER || hlen > len - 8) {
    rc = fail(err, err_len, path, "not a safetensors file");
    goto out;
  }
  json_error_t jerr;
  hdr = json_loadb((const char *)buf + 8, (size_t)hlen, 0, &jerr);
  const json_t *meta = json_object_get(hdr, "__metadata__");
  const char *fmt = json_string_value(json_object_get(meta, "format"));
  const char *ver = json_string_value(json_object_get(meta, "version"));
  if (!hdr || !fmt || strcmp(fmt, "whisperd-silero-vad") != 0 || !ver || strcmp(ver, "1") != 0) {
    rc = fail(err, err_len, path,
              "not a whisperd Silero VAD file (format whisperd-silero-vad, version 1: "
              "scripts/fetch-vad.sh makes one)");
    goto out;
  }
  const float *t[N_TENSORS];
  const unsigned char *data = buf + 8 + hlen;
  if ((8 + hlen) % 4) {
    rc = fail(err, err_len, path, "tensor data not 4-byte aligned");
    goto out;
  }
  for (size_t i = 0; i < N_TENSORS && !rc; i++)
    rc = tensor_data(hdr, i, data, len - 8 - (size_t)hlen, &t[i], path, err, err_len);
  if (rc)
    goto out;
  m = calloc(1, sizeof *m);
  rc = m ? model_init(m, t) : WD_ENOMEM;
  if (!rc) {
    *ret_model = m;
    m = NULL;
  }
out:
  wd_vad_model_free(m);
  json_decref(hdr);
  free(buf);
  return rc;
}

void wd_vad_model_free(wd_vad_model_t *m) {
  if (!m)
    return;
  for (int l = 0; l < 4; l++) {
    free(m->conv[l].w);
    free(m->conv[l].b);
  }
  free(m->stft);
  free(m->wih);
  free(m->whh);
  free(m->bias);
  free(m);
}

size_t wd_vad_n_chunks(size_t n) { return (n + WD_VAD_CHUNK - 1) / WD_VAD_CHUNK; }

/* ------------------------------------------------------------------------ */
/* The forward pass                                                          */

typedef struct {
  const float *f32;
  const int16_t *s16;
  size_t n;
  size_t base;   /* the signal's sample index of f32[0] or s16[0] (a stream's tail) */
} src_t;

/* Sample i of the signal, 0 outside it (the context before the first chunk,
 * the padding after the last). */
static inline float sample(const src_t *s, ptrdiff_t i) {
  if (i < (ptrdiff_t)s->base || (size_t)i - s->base >= s->n)
    return 0.0f;
  i -= (ptrdiff_t)s->base;
  return s->f32 ? s->f32[i] : (float)s->s16[i] / 32768.0f;
}

/* Scratch for one block, sized for BLOCK chunks. */
typedef struct {
  float *frames; /* BLOCK * N_FRAMES x WIN */
  float *spec;   /* BLOCK * N_FRAMES x ROUND16(N_BASIS) */
  float *col;    /* im2col rows, at most BLOCK * N_FRAMES x 3 * N_BINS */
  float *act[2]; /* magnitudes and conv outputs: BLOCK * N_FRAMES x (at most) 144 */
  float *gates;  /* BLOCK x GATES: the input projection */
} scratch_t;

static void scratch_free(scratch_t *s) {
  free(s->frames), free(s->spec), free(s->col), free(s->act[0]), free(s->act[1]), free(s->gates);
}

static int scratch_new(scratch_t *s) {
  const size_t rows = BLOCK * N_FRAMES;
  *s = (scratch_t){
    .frames = malloc(rows * WIN * sizeof(float)),
    .spec = malloc(rows * ROUND16(N_BASIS) * sizeof(float)),
    .col = malloc(rows * 3 * N_BINS * sizeof(float)),
    .act = { malloc(rows * ROUND16(N_BINS) * sizeof(float)),
             malloc(rows * ROUND16(N_BINS) * sizeof(float)) },
    .gates = malloc(BLOCK * GATES * sizeof(float)),
  };
  if (!s->frames || !s->spec || !s->col || !s->act[0] || !s->act[1] || !s->gates) {
    scratch_free(s);
    return WD_ENOMEM;
  }
  return 0;
}

/* The STFT frames of chunk g (its 576 samples, reflect-padded by 64). */
static void chunk_frames(const src_t *s, size_t g, float *frames) {
  float x[WD_VAD_CONTEXT + WD_VAD_CHUNK + 64];
  const ptrdiff_t start = (ptrdiff_t)(g * WD_VAD_CHUNK) - WD_VAD_CONTEXT;
  const size_t len = WD_VAD_CONTEXT + WD_VAD_CHUNK;
  for (size_t j = 0; j < len; j++)
    x[j] = sample(s, start + (ptrdiff_t)j);
  for (size_t t = 0; t < 64; t++) /* reflect: the edge sample is not repeated */
    x[len + t] = x[len - 2 - t];
  for (size_t f = 0; f < N_FRAMES; f++)
    memcpy(frames + f * WIN, x + f * HOP, WIN * sizeof(float));
}

/* One convolution over nb chunks of t_in steps each: in (nb t_in x cin),
 * out (nb t_out x cout16, ReLU). Stride 1 or 2, zero padding of 1 at each
 * chunk's own edges. */
static void conv(const conv_t *c, const float *in, size_t nb, size_t t_in, size_t stride,
                 float *col, float *out) {
  const size_t t_out = (t_in - 1) / stride + 1, k = 3 * c->cin;
  for (size_t b = 0; b < nb; b++)
    for (size_t t = 0; t < t_out; t++) {
      float *row = col + (b * t_out + t) * k;
      for (size_t tap = 0; tap < 3; tap++) {
        const ptrdiff_t ti = (ptrdiff_t)(t * stride + tap) - 1;
        if (ti < 0 || (size_t)ti >= t_in)
          memset(row + tap * c->cin, 0, c->cin * sizeof(float));
        else
          memcpy(row + tap * c->cin, in + (b * t_in + (size_t)ti) * c->cin, c->cin * sizeof(float));
      }
    }
  const size_t rows = nb * t_out;
  /* Packed outputs (cout wide) for the next layer's rows: the product
   * writes cout16 columns, so it goes to a row stride of cout16, then the
   * ReLU compacts it in place (cout16 >= cout). */
  wd_vad_gemm(col, k, c->w, c->cout16, c->b, out, c->cout16, rows, c->cout16, k);
  for (size_t r = 0; r < rows; r++)
    for (size_t o = 0; o < c->cout; o++) {
      const float v = out[r * c->cout16 + o];
      out[r * c->cout + o] = v > 0.0f ? v : 0.0f;
    }
}

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The recurrence over nb chunks whose input projections are in gates. */
static void lstm(const wd_vad_model_t *m, const float *gates, size_t nb, float *h, float *c,
                 float *probs) {
  float g[GATES];
  for (size_t b = 0; b < nb; b++) {
    wd_vad_gemm(h, HID, m->whh, GATES, gates + b * GATES, g, GATES, 1, GATES, HID);
    float p = m->out_b;
    for (size_t k = 0; k < HID; k++) {
      const float i = sigmoid(g[k]), f = sigmoid(g[HID + k]), gg = tanhf(g[2 * HID + k]),
                  o = sigmoid(g[3 * HID + k]);
      c[k] = f * c[k] + i * gg;
      h[k] = o * tanhf(c[k]);
      p += m->out_w[k] * (h[k] > 0.0f ? h[k] : 0.0f);
    }
    probs[b] = sigmoid(p);
  }
}

/* Chunks [first, end) of the signal, the LSTM running on from h and c. */
static int probs_range(const wd_vad_model_t *m, const src_t *s, size_t first, size_t end,
                       float *h, float *c, float *probs) {
  scratch_t sc;
  int rc = scratch_new(&sc);
  if (rc)
    return rc;
  const size_t s16 = ROUND16(N_BASIS);
  for (size_t g0 = first; g0 < end; g0 += BLOCK) {
    const size_t nb = end - g0 < BLOCK ? end - g0 : BLOCK, rows = nb * N_FRAMES;
    for (size_t b = 0; b < nb; b++)
      chunk_frames(s, g0 + b, sc.frames + b * N_FRAMES * WIN);
    wd_vad_gemm(sc.frames, WIN, m->stft, s16, NULL, sc.spec, s16, rows, s16, WIN);
    float *mag = sc.act[0];
    for (size_t r = 0; r < rows; r++)
      for (size_t k = 0; k < N_BINS; k++) {
        const float re = sc.spec[r * s16 + k], im = sc.spec[r * s16 + N_BINS + k];
        mag[r * N_BINS + k] = sqrtf(re * re + im * im);
      }
    conv(&m->conv[0], sc.act[0], nb, 4, 1, sc.col, sc.act[1]);
    conv(&m->conv[1], sc.act[1], nb, 4, 2, sc.col, sc.act[0]);
    conv(&m->conv[2], sc.act[0], nb, 2, 2, sc.col, sc.act[1]);
    conv(&m->conv[3], sc.act[1], nb, 1, 1, sc.col, sc.act[0]);
    wd_vad_gemm(sc.act[0], HID, m->wih, GATES, m->bias, sc.gates, GATES, nb, GATES, HID);
    lstm(m, sc.gates, nb, h, c, probs + (g0 - first));
  }
  scratch_free(&sc);
  return 0;
}

static int probs_src(const wd_vad_model_t *m, const src_t *s, float *probs) {
  float h[HID] = { 0 }, c[HID] = { 0 };
  return probs_range(m, s, 0, wd_vad_n_chunks(s->n), h, c, probs);
}

void wd_vad_stream_init(wd_vad_stream_t *st) { memset(st, 0, sizeof *st); }

int wd_vad_stream_probs(const wd_vad_model_t *m, wd_vad_stream_t *st, const int16_t *pcm,
                        size_t n, size_t base, float *probs) {
  const size_t end = (base + n) / WD_VAD_CHUNK; /* complete chunks only */
  if (end <= st->next)
    return 0;
  /* the next chunk's context must still be there */
  if (base > 0 && base + WD_VAD_CONTEXT > st->next * WD_VAD_CHUNK)
    return WD_EINVAL;
  const src_t s = { .s16 = pcm, .n = n, .base = base };
  const int rc = probs_range(m, &s, st->next, end, st->h, st->c, probs);
  if (rc < 0)
    return rc;
  const int got = (int)(end - st->next);
  st->next = end;
  return got;
}

int wd_vad_probs(const wd_vad_model_t *m, const float *pcm, size_t n, float *probs) {
  const src_t s = { .f32 = pcm, .n = n };
  return probs_src(m, &s, probs);
}

int wd_vad_probs_s16(const wd_vad_model_t *m, const int16_t *pcm, size_t n, float *probs) {
  const src_t s = { .s16 = pcm, .n = n };
  return probs_src(m, &s, probs);
}

int wd_vad_spans_s16(const wd_vad_model_t *m, const wd_vad_params_t *p, const int16_t *pcm,
                     size_t n, wd_vad_span_t **ret, size_t *ret_n) {
  *ret = NULL;
  *ret_n = 0;
  const size_t nc = wd_vad_n_chunks(n);
  float *probs = malloc((nc ? nc : 1) * sizeof *probs);
  int rc = probs ? wd_vad_probs_s16(m, pcm, n, probs) : WD_ENOMEM;
  if (!rc)
    rc = wd_vad_speech(probs, nc, n, p, ret, ret_n);
  free(probs);
  return rc;
}
