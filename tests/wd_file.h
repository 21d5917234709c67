/*
 * wd_file.h - reads a whole file into memory, for tests and benchmarks that
 * feed uploads to the decoders the way the daemon will (from a buffer).
 */
#ifndef WD_FILE_H
#define WD_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* Returns a malloc'd copy of the file at path and its size in *ret_len, or
 * NULL (with *ret_len = 0) when it cannot be opened, is empty or fails to read. */
static inline unsigned char *wd_read_file(const char *path, size_t *ret_len) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  *ret_len = 0;
  if (!f)
    return NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    rewind(f);
    buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
    *ret_len = buf ? (size_t)n : 0;
  }
  fclose(f);
  return buf;
}

#endif
