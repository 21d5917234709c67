/*
 * error.h - whisperd's error codes.
 *
 * Every fallible function returns int: 0 on success or a negative WD_E* code.
 * The codes, their messages, the HTTP status an API response uses for them and
 * the OpenAI error `type` all come from one X-macro table, so adding a code is
 * one line and every mapping stays complete.
 */
#ifndef WD_ERROR_H
#define WD_ERROR_H

/* XX(name, value, http_status, openai_type, message) */
#define WD_ERRNO_MAP(XX)                                                                  \
  XX(EINVAL,      -1,  400, "invalid_request_error", "invalid argument")                  \
  XX(ENOMEM,      -2,  500, "server_error",          "out of memory")                     \
  XX(EIO,         -3,  500, "server_error",          "input/output error")                \
  XX(ENOENT,      -4,  404, "invalid_request_error", "no such file or object")            \
  XX(ERANGE,      -5,  400, "invalid_request_error", "value out of range")                \
  XX(EFORMAT,     -6,  400, "invalid_request_error", "malformed or unsupported data")     \
  XX(ETRUNC,      -7,  400, "invalid_request_error", "data is truncated")                 \
  XX(EMODEL,      -8,  500, "server_error",          "invalid model file")                \
  XX(EAUDIO,      -9,  400, "invalid_request_error", "audio could not be decoded")        \
  XX(ETOOBIG,     -10, 413, "invalid_request_error", "input too large")                   \
  XX(EUNSUP,      -11, 400, "invalid_request_error", "not supported")                     \
  XX(EVULKAN,     -12, 500, "server_error",          "Vulkan error")                      \
  XX(ENODEVICE,   -13, 503, "server_error",          "no usable Vulkan device")           \
  XX(EDEVLOST,    -14, 503, "server_error",          "GPU device lost")                   \
  XX(EBUSY,       -15, 429, "rate_limit_error",      "server busy, queue full")           \
  XX(ECANCELED,   -16, 499, "server_error",          "operation canceled")                \
  XX(ECONFIG,     -17, 500, "server_error",          "invalid configuration")             \
  XX(EAUTH,       -18, 401, "invalid_request_error", "invalid API key")                   \
  XX(ETIMEDOUT,   -19, 504, "server_error",          "operation timed out")               \
  XX(ESHUTDOWN,   -20, 503, "server_error",          "server is shutting down")           \
  XX(EINTERNAL,   -21, 500, "server_error",          "internal error")

typedef enum {
  WD_OK = 0,
#define WD__ERR_ENUM(name, val, http, type, msg) WD_##name = (val),
  WD_ERRNO_MAP(WD__ERR_ENUM)
#undef WD__ERR_ENUM
} wd_err_t;

/* Human-readable message for a code; never NULL ("unknown error" if unknown). */
const char *wd_strerror(int err);
/* Symbolic name such as "WD_EMODEL"; never NULL. */
const char *wd_err_name(int err);
/* HTTP status an API response should carry for err (500 if unknown). */
int wd_err_http_status(int err);
/* OpenAI error `type` string for err ("server_error" if unknown). */
const char *wd_err_openai_type(int err);

#endif
