/*
 * test_error.c - the WD_ERRNO_MAP table and its lookups.
 */
#include "error.h"
#include "wd_test.h"

WD_TEST(every_code_has_name_message_status) {
  static const int codes[] = {
#define XX(name, val, http, type, msg) WD_##name,
    WD_ERRNO_MAP(XX)
#undef XX
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    WD_CHECK(codes[i] < 0);
    WD_CHECK(strncmp(wd_err_name(codes[i]), "WD_E", 4) == 0);
    WD_CHECK(strcmp(wd_strerror(codes[i]), "unknown error") != 0);
    WD_CHECK(wd_err_http_status(codes[i]) >= 400 && wd_err_http_status(codes[i]) < 600);
    WD_CHECK(wd_err_openai_type(codes[i])[0] != '\0');
    for (size_t j = 0; j < i; j++) /* values are unique */
      WD_CHECK(codes[i] != codes[j]);
  }
}

WD_TEST(known_mappings) {
  WD_CHECK_EQ_STR(wd_err_name(WD_EMODEL), "WD_EMODEL");
  WD_CHECK_EQ_INT(wd_err_http_status(WD_ETOOBIG), 413);
  WD_CHECK_EQ_INT(wd_err_http_status(WD_EBUSY), 429);
  WD_CHECK_EQ_INT(wd_err_http_status(WD_EAUTH), 401);
  WD_CHECK_EQ_STR(wd_err_openai_type(WD_EINVAL), "invalid_request_error");
  WD_CHECK_EQ_STR(wd_err_openai_type(WD_EVULKAN), "server_error");
  WD_CHECK_EQ_STR(wd_strerror(WD_OK), "success");
}

WD_TEST(unknown_codes) {
  WD_CHECK_EQ_STR(wd_strerror(-9999), "unknown error");
  WD_CHECK_EQ_STR(wd_err_name(12345), "WD_EUNKNOWN");
  WD_CHECK_EQ_INT(wd_err_http_status(-9999), 500);
  WD_CHECK_EQ_STR(wd_err_openai_type(-9999), "server_error");
}

int main(void) { return wd_test_main(); }
