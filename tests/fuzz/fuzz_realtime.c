/*
 * fuzz_realtime.c - what a realtime client sends (GET /v1/realtime): the
 * WebSocket frame parser (api/ws.c) over the input as a byte stream, fed in
 * pieces whose sizes come from the input itself, and every text message it
 * gives through the client-event parser (api/realtime_event.c) against a
 * session configuration that the accepted session.updates change, as the
 * session does.
 *
 * Input: byte 0 sets the piece size (1 .. 256); the rest is the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fuzz_common.h"
#include "languages.h"
#include "realtime_event.h"
#include "ws.h"

static wd_rt_config_t g_cfg;

static int on_message(void *ud, int op, const unsigned char *data, size_t n) {
  (void)ud;
  FUZZ_CHECK(op == WD_WS_TEXT || op == WD_WS_BINARY || op == WD_WS_CLOSE || op == WD_WS_PING ||
             op == WD_WS_PONG);
  FUZZ_CHECK(op < 0x8 || n <= 125);
  if (op == WD_WS_CLOSE && n > 0) { /* a close given holds a code an endpoint may send */
    const int code = n >= 2 ? data[0] << 8 | data[1] : 0;
    FUZZ_CHECK((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
               (code >= 3000 && code <= 4999));
  }
  if (op != WD_WS_TEXT)
    return 0;
  wd_rt_event_t ev;
  wd_rt_error_t err = { 0 };
  const int rc = wd_rt_event_parse((const char *)data, n, &g_cfg, &ev, &err);
  if (rc < 0) {
    FUZZ_CHECK(memchr(err.message, '\0', sizeof err.message) != NULL && err.message[0]);
    FUZZ_CHECK(ev.audio == NULL);
  } else if (ev.type == WD_RT_SESSION_UPDATE) {
    FUZZ_CHECK(ev.cfg.threshold >= 0.0f && ev.cfg.threshold <= 1.0f);
    FUZZ_CHECK(memchr(ev.cfg.model, '\0', sizeof ev.cfg.model) != NULL && ev.cfg.model[0]);
    FUZZ_CHECK(!ev.cfg.language[0] || wd_languages_index(ev.cfg.language) >= 0);
    json_t *j = wd_rt_config_json(&ev.cfg);
    FUZZ_CHECK(j != NULL);
    json_decref(j);
    wd_rt_config_free(&g_cfg);
    g_cfg = ev.cfg; /* the session takes it */
    ev.cfg.prompt = NULL;
  } else if (ev.type == WD_RT_APPEND) {
    FUZZ_CHECK(ev.audio != NULL);
  }
  wd_rt_event_clear(&ev);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const size_t piece = (size_t)data[0] + 1;
  wd_rt_config_default(&g_cfg);
  wd_ws_parser_t p;
  wd_ws_parser_init(&p, 1 << 20);
  int close = 0, rc = 0;
  for (size_t i = 1; i < size && rc == 0; i += piece) {
    const size_t n = size - i < piece ? size - i : piece;
    rc = wd_ws_feed(&p, data + i, n, on_message, NULL, &close);
  }
  if (rc < 0)
    FUZZ_CHECK(close >= 1000 && close < 1100);
  wd_ws_parser_free(&p);
  wd_rt_config_free(&g_cfg);
  return 0;
}
