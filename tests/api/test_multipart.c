/*
 * test_multipart.c - the multipart/form-data parser on what the OpenAI SDKs,
 * curl and browsers send, and on every way a body can be broken: cut at
 * each byte, mutated at random, oversized, unterminated. Nothing may crash
 * (run it under ASan), and every failure must carry a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "multipart.h"
#include "wd_test.h"

#define CT "multipart/form-data; boundary=XyZ"
/* A string literal with its length (it may hold NUL bytes). */
#define LIT(s) (s), (sizeof(s) - 1)

static wd_multipart_t *parse_ok(const char *ct, const char *body, size_t len) {
  wd_multipart_t *m = NULL;
  char err[256] = "";
  int rc = wd_multipart_parse(ct, body, len, &m, err, sizeof err);
  if (rc != 0)
    fprintf(stderr, "unexpected failure %d: %s\n", rc, err);
  WD_CHECK_EQ_INT(rc, 0);
  return m;
}

static int parse_err(const char *ct, const char *body, size_t len, char *err, size_t err_len) {
  wd_multipart_t *m = (wd_multipart_t *)(uintptr_t)1; /* must be reset to NULL */
  int rc = wd_multipart_parse(ct, body, len, &m, err, err_len);
  WD_CHECK(rc < 0);
  WD_CHECK(m == NULL);
  WD_CHECK(err[0] != '\0');
  return rc;
}

/* Part i has this name and exactly these bytes. */
static void check_part(const wd_multipart_t *m, int i, const char *name, const char *data,
                       size_t len) {
  const wd_multipart_part_t *p = wd_multipart_part(m, i);
  WD_CHECK(p != NULL);
  if (!p)
    return;
  WD_CHECK_EQ_STR(p->name, name);
  WD_CHECK_EQ_INT(p->len, len);
  WD_CHECK(p->len == len && memcmp(p->data, data, len) == 0);
}

WD_TEST(boundary_from_content_type) {
  char b[WD_MULTIPART_MAX_BOUNDARY + 1];
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=abc", b, sizeof b), 0);
  WD_CHECK_EQ_STR(b, "abc");
  WD_CHECK_EQ_INT(wd_multipart_boundary("Multipart/Form-Data;BOUNDARY=\"a b;c\"", b, sizeof b), 0);
  WD_CHECK_EQ_STR(b, "a b;c");
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; charset=utf-8; boundary=q1 ", b,
                                        sizeof b), 0);
  WD_CHECK_EQ_STR(b, "q1");
  WD_CHECK_EQ_INT(wd_multipart_boundary("  multipart/form-data ;boundary=\"x\\\"y\"", b, sizeof b),
                  0);
  WD_CHECK_EQ_STR(b, "x\"y");
  /* The Python SDK: 32 hex digits; Node: "openai-" and digits; undici. */
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=----formdata-undici-0123",
                                        b, sizeof b), 0);
  WD_CHECK_EQ_STR(b, "----formdata-undici-0123");
  WD_CHECK_EQ_INT(wd_multipart_boundary("application/json", b, sizeof b), WD_EUNSUP);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/mixed; boundary=a", b, sizeof b), WD_EUNSUP);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data-x; boundary=a", b, sizeof b),
                  WD_EUNSUP);
  WD_CHECK_EQ_INT(wd_multipart_boundary("", b, sizeof b), WD_EUNSUP);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data", b, sizeof b), WD_EFORMAT);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=", b, sizeof b),
                  WD_EFORMAT);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=\"\"", b, sizeof b),
                  WD_EFORMAT);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=\"abc", b, sizeof b),
                  WD_EFORMAT);
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundaryx=abc", b, sizeof b),
                  WD_EFORMAT);
  char long_ct[512];
  snprintf(long_ct, sizeof long_ct, "multipart/form-data; boundary=%0*d",
           WD_MULTIPART_MAX_BOUNDARY + 1, 7);
  WD_CHECK_EQ_INT(wd_multipart_boundary(long_ct, b, sizeof b), WD_EFORMAT);
  snprintf(long_ct, sizeof long_ct, "multipart/form-data; boundary=%0*d",
           WD_MULTIPART_MAX_BOUNDARY, 7);
  WD_CHECK_EQ_INT(wd_multipart_boundary(long_ct, b, sizeof b), 0);
  WD_CHECK_EQ_INT(strlen(b), WD_MULTIPART_MAX_BOUNDARY);
  char small[4];
  WD_CHECK_EQ_INT(wd_multipart_boundary("multipart/form-data; boundary=abcd", small, sizeof small),
                  WD_EFORMAT);
  WD_CHECK_EQ_INT(wd_multipart_boundary(NULL, b, sizeof b), WD_EINVAL);
}

/* The order and shape the Python SDK uses: fields, repeated key[], file last. */
WD_TEST(python_sdk_shape) {
  static const char body[] =
      "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"temperature\"\r\n\r\n0.0\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\n"
      "segment\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\n"
      "word\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"jfk.wav\"\r\n"
      "Content-Type: audio/x-wav\r\n\r\nRIFF\0\r\n--XyZx\r\n-\r\n\r\n"
      "--XyZ--\r\n";
  wd_multipart_t *m = parse_ok(CT, LIT(body));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 5);
  check_part(m, 0, "model", LIT("whisper-1"));
  check_part(m, 1, "temperature", LIT("0.0"));
  check_part(m, 2, "timestamp_granularities[]", LIT("segment"));
  check_part(m, 3, "timestamp_granularities[]", LIT("word"));
  /* Binary content keeps NULs, CRLFs and a boundary-prefixed line. */
  check_part(m, 4, "file", LIT("RIFF\0\r\n--XyZx\r\n-\r\n"));
  const wd_multipart_part_t *f = wd_multipart_part(m, 4);
  WD_CHECK_EQ_STR(f ? f->filename : NULL, "jfk.wav");
  WD_CHECK_EQ_STR(f ? f->content_type : NULL, "audio/x-wav");
  WD_CHECK(wd_multipart_part(m, 0)->filename == NULL);
  WD_CHECK(wd_multipart_part(m, 0)->content_type == NULL);
  WD_CHECK(wd_multipart_part(m, 5) == NULL);
  WD_CHECK(wd_multipart_part(m, -1) == NULL);
  wd_multipart_free(m);
}

/* The Node SDK: file in the middle, fields after it, nested key[sub]. */
WD_TEST(node_sdk_shape_fields_after_file) {
  static const char body[] =
      "--openai-1\r\ncontent-disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
      "--openai-1\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\nID3xyz\r\n"
      "--openai-1\r\nContent-Disposition: form-data; name=\"chunking_strategy[type]\"\r\n\r\n"
      "server_vad\r\n"
      "--openai-1\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\ntext\r\n"
      "--openai-1--";
  wd_multipart_t *m = parse_ok("multipart/form-data; boundary=openai-1", LIT(body));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 4);
  check_part(m, 1, "file", LIT("ID3xyz"));
  check_part(m, 2, "chunking_strategy[type]", LIT("server_vad"));
  check_part(m, 3, "response_format", LIT("text"));
  wd_multipart_free(m);
}

WD_TEST(preamble_epilogue_padding_bare_lf) {
  static const char body[] =
      "This is a preamble.\r\n--XyZ\r\n--XyZ is not here\r\n"
      "--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
      "--XyZ\nContent-Disposition: form-data; name=b\n\n2\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"c\"\r\n\r\n\r\n"
      "--XyZ--  epilogue\r\n--XyZ\r\nignored";
  wd_multipart_t *m = NULL;
  char err[256] = "";
  int rc = wd_multipart_parse(CT, body, sizeof body - 1, &m, err, sizeof err);
  /* "--XyZ\r\n" after the preamble opens a part whose first header line
   * is "--XyZ is not here": not a header, so the body is malformed. */
  WD_CHECK_EQ_INT(rc, WD_EFORMAT);
  WD_CHECK(strstr(err, "malformed header line") != NULL);
  static const char ok_body[] =
      "This is a preamble.\r\n"
      "--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
      "--XyZ\nContent-Disposition: form-data; name=b\n\n2\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"c\"\r\n\r\n\r\n"
      "--XyZ--  epilogue\r\n--XyZ\r\nignored";
  m = parse_ok(CT, LIT(ok_body));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 3);
  check_part(m, 0, "a", LIT("1"));
  check_part(m, 1, "b", LIT("2"));
  check_part(m, 2, "c", LIT(""));
  wd_multipart_free(m);
}

WD_TEST(boundary_text_inside_content) {
  static const char body[] =
      "--XyZ\r\nContent-Disposition: form-data; name=\"p\"\r\n\r\n"
      "a --XyZ b\r\n--XyZZ\r\n--XyZ-x\r\n\r\n"
      "--XyZ--";
  wd_multipart_t *m = parse_ok(CT, LIT(body));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 1);
  check_part(m, 0, "p", LIT("a --XyZ b\r\n--XyZZ\r\n--XyZ-x\r\n"));
  wd_multipart_free(m);
}

WD_TEST(zero_parts_and_empty_content) {
  wd_multipart_t *m = parse_ok(CT, LIT("--XyZ--\r\n"));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 0);
  wd_multipart_free(m);
  /* A delimiter right after the blank line: empty content. */
  m = parse_ok(CT, LIT("--XyZ\r\nContent-Disposition: form-data; name=e\r\n\r\n--XyZ--"));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 1);
  check_part(m, 0, "e", LIT(""));
  wd_multipart_free(m);
}

WD_TEST(disposition_parameters) {
  static const char body[] =
      "--XyZ\r\nContent-Disposition: form-data; filename=\"a\\\"b;c.wav\"; name=\"f;x\"\r\n"
      "CONTENT-TYPE:   audio/wav  \r\nX-Other: 1\r\n\r\nd\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"g\"; filename=\"fallback.wav\"; "
      "filename*=UTF-8''%C3%A9t%C3%A9.wav\r\n\r\ne\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"h\"; filename*=UTF-8''bad%zz\r\n\r\n"
      "f\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"\"; filename=\"\"\r\n\r\ng\r\n"
      "--XyZ--";
  wd_multipart_t *m = parse_ok(CT, LIT(body));
  WD_CHECK_EQ_INT(wd_multipart_count(m), 4);
  const wd_multipart_part_t *p = wd_multipart_part(m, 0);
  WD_CHECK_EQ_STR(p->name, "f;x");
  WD_CHECK_EQ_STR(p->filename, "a\"b;c.wav");
  WD_CHECK_EQ_STR(p->content_type, "audio/wav");
  p = wd_multipart_part(m, 1);
  WD_CHECK_EQ_STR(p->filename, "\xC3\xA9t\xC3\xA9.wav");
  p = wd_multipart_part(m, 2);
  WD_CHECK(p->filename == NULL); /* malformed filename* is ignored */
  p = wd_multipart_part(m, 3);
  WD_CHECK_EQ_STR(p->name, "");
  WD_CHECK_EQ_STR(p->filename, "");
  wd_multipart_free(m);
}

WD_TEST(malformed_bodies) {
  char err[256];
  static const struct {
    const char *body;
    size_t len;
    int rc;
    const char *msg;
  } cases[] = {
    { LIT(""), WD_ETRUNC, "empty or truncated" },
    { LIT("hello world"), WD_EFORMAT, "no boundary" },
    { LIT("--XyZ"), WD_ETRUNC, "truncated" },
    { LIT("--Xy"), WD_ETRUNC, "truncated" },
    { LIT("--XyZ\r\n"), WD_ETRUNC, "headers of part 1" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=a\r\n"), WD_ETRUNC, "headers" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc"), WD_ETRUNC,
      "ends inside part 1 ('a')" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--XyZ"), WD_ETRUNC,
      "ends inside part 1" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--XyZ-"), WD_ETRUNC,
      "ends inside" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--XyZ\r\n"), WD_ETRUNC,
      "headers of part 2" },
    { LIT("--XyZ\r\nContent-Type: text/plain\r\n\r\nabc\r\n--XyZ--"), WD_EFORMAT,
      "no Content-Disposition name" },
    { LIT("--XyZ\r\nContent-Disposition: form-data\r\n\r\nabc\r\n--XyZ--"), WD_EFORMAT,
      "no Content-Disposition name" },
    { LIT("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nabc\r\n--XyZ--"),
      WD_EFORMAT, "not form-data" },
    { LIT("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nabc\r\n--XyZ--"),
      WD_EFORMAT, "unterminated quoted string" },
    { LIT("--XyZ\r\nthis is not a header\r\n\r\nabc\r\n--XyZ--"), WD_EFORMAT,
      "malformed header line" },
    { LIT("--XyZ\r\n\0\0\0\r\n\r\nabc\r\n--XyZ--"), WD_EFORMAT, "malformed header line" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    err[0] = '\0';
    int rc = parse_err(CT, cases[i].body, cases[i].len, err, sizeof err);
    if (rc != cases[i].rc || !strstr(err, cases[i].msg))
      fprintf(stderr, "case %zu: rc %d (%s), want %d '%s'\n", i, rc, err, cases[i].rc,
              cases[i].msg);
    WD_CHECK_EQ_INT(rc, cases[i].rc);
    WD_CHECK(strstr(err, cases[i].msg) != NULL);
  }
  /* The Content-Type itself. */
  err[0] = '\0';
  WD_CHECK_EQ_INT(parse_err("application/json", LIT("{}"), err, sizeof err), WD_EUNSUP);
  WD_CHECK(strstr(err, "multipart/form-data") != NULL);
  err[0] = '\0';
  WD_CHECK_EQ_INT(parse_err("multipart/form-data", LIT("--x--"), err, sizeof err), WD_EFORMAT);
  WD_CHECK(strstr(err, "boundary") != NULL);
  /* Arguments. */
  wd_multipart_t *m = NULL;
  WD_CHECK_EQ_INT(wd_multipart_parse(NULL, "", 0, &m, NULL, 0), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_multipart_parse(CT, NULL, 5, &m, NULL, 0), WD_EINVAL);
  WD_CHECK_EQ_INT(wd_multipart_parse(CT, "", 0, NULL, NULL, 0), WD_EINVAL);
  /* No err buffer is fine too. */
  WD_CHECK_EQ_INT(wd_multipart_parse(CT, LIT("x"), &m, NULL, 0), WD_EFORMAT);
  wd_multipart_free(NULL);
}

WD_TEST(limits) {
  char err[256] = "";
  /* A header block over the cap. */
  const size_t big = WD_MULTIPART_MAX_HEADER + 100;
  char *body = malloc(big + 256);
  size_t n = (size_t)sprintf(body, "--XyZ\r\nX-Pad: ");
  memset(body + n, 'a', big);
  n += big;
  n += (size_t)sprintf(body + n, "\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n--XyZ--");
  WD_CHECK_EQ_INT(parse_err(CT, body, n, err, sizeof err), WD_ERANGE);
  WD_CHECK(strstr(err, "header block") != NULL);
  free(body);
  /* Too many parts. */
  const char *one = "--XyZ\r\nContent-Disposition: form-data; name=k[]\r\n\r\nv\r\n";
  const size_t one_len = strlen(one), count = WD_MULTIPART_MAX_PARTS + 1;
  body = malloc(one_len * count + 16);
  n = 0;
  for (size_t i = 0; i < count; i++, n += one_len)
    memcpy(body + n, one, one_len);
  n += (size_t)sprintf(body + n, "--XyZ--");
  err[0] = '\0';
  WD_CHECK_EQ_INT(parse_err(CT, body, n, err, sizeof err), WD_ERANGE);
  WD_CHECK(strstr(err, "more than") != NULL);
  /* Exactly the maximum is fine. */
  wd_multipart_t *m = NULL;
  memcpy(body + one_len * (count - 1), "--XyZ--", 7);
  WD_CHECK_EQ_INT(wd_multipart_parse(CT, body, one_len * (count - 1) + 7, &m, err, sizeof err),
                  0);
  WD_CHECK_EQ_INT(wd_multipart_count(m), WD_MULTIPART_MAX_PARTS);
  wd_multipart_free(m);
  free(body);
}

static const char good_body[] =
    "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.wav\"\r\n"
    "Content-Type: audio/wav\r\n\r\n\x01\x02\r\n--\r\n\x03\r\n"
    "--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n"
    "--XyZ--\r\n";

/* Every prefix of a good body short of its close delimiter is an error. */
WD_TEST(every_truncation_fails_cleanly) {
  const size_t full = sizeof good_body - 1;
  const size_t close_end = (size_t)(strstr(good_body, "--XyZ--") - good_body) + 7;
  for (size_t n = 0; n <= full; n++) {
    char *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
    memcpy(copy, good_body, n);
    wd_multipart_t *m = NULL;
    char err[256] = "";
    int rc = wd_multipart_parse(CT, copy, n, &m, err, sizeof err);
    if (n < close_end) {
      if (rc == 0)
        fprintf(stderr, "prefix of %zu bytes parsed\n", n);
      WD_CHECK(rc == WD_ETRUNC || rc == WD_EFORMAT);
      WD_CHECK(m == NULL && err[0] != '\0');
    } else {
      WD_CHECK_EQ_INT(rc, 0);
      WD_CHECK_EQ_INT(wd_multipart_count(m), 3);
    }
    wd_multipart_free(m);
    free(copy);
  }
}

/* xorshift64*: a fixed sequence, so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

/* Random edits of a good body: no crash, and parts always lie in the body. */
WD_TEST(random_mutations_never_crash) {
  static const char *const snippets[] = { "\r\n", "\n", "--XyZ", "--XyZ--", "\r\n--XyZ\r\n",
                                          "\"", ";", ":", "=", "\0", "\r\n\r\n",
                                          "name=", "filename*=", "%" };
  const size_t base = sizeof good_body - 1;
  int ok = 0;
  for (int iter = 0; iter < 20000; iter++) {
    char buf[1024];
    size_t n = base;
    memcpy(buf, good_body, base);
    const int edits = 1 + (int)(rng() % 4);
    for (int e = 0; e < edits; e++) {
      const size_t at = n ? rng() % n : 0;
      switch (rng() % 4) {
      case 0: /* flip a byte */
        if (n)
          buf[at] = (char)rng();
        break;
      case 1: { /* delete a range */
        const size_t k = rng() % 16;
        const size_t del = at + k > n ? n - at : k;
        memmove(buf + at, buf + at + del, n - at - del);
        n -= del;
        break;
      }
      case 2: { /* insert a snippet */
        const char *s = snippets[rng() % (sizeof snippets / sizeof snippets[0])];
        const size_t k = s[0] ? strlen(s) : 1;
        if (n + k < sizeof buf) {
          memmove(buf + at + k, buf + at, n - at);
          memcpy(buf + at, s, k);
          n += k;
        }
        break;
      }
      default: /* truncate */
        n = at;
        break;
      }
    }
    char *copy = malloc(n ? n : 1);
    memcpy(copy, buf, n);
    wd_multipart_t *m = NULL;
    char err[128] = "";
    const int rc = wd_multipart_parse(CT, copy, n, &m, err, sizeof err);
    if (rc == 0) {
      ok++;
      for (int i = 0; i < wd_multipart_count(m); i++) {
        const wd_multipart_part_t *p = wd_multipart_part(m, i);
        WD_CHECK(p->name != NULL);
        WD_CHECK(p->data >= (const uint8_t *)copy && p->data + p->len <= (const uint8_t *)copy + n);
      }
    } else {
      WD_CHECK(m == NULL);
      WD_CHECK(err[0] != '\0');
    }
    wd_multipart_free(m);
    free(copy);
  }
  WD_CHECK(ok > 0); /* some edits (in content) keep the body valid */
}

int main(void) { return wd_test_main(); }
