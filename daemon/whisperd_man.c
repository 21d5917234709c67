/*
 * whisperd_man.c - the build-time tool that writes whisperd(8):
 *   whisperd-man OUT.8 VERSION DATE
 * It is not installed; cmake/packaging.cmake runs it and installs OUT.8.
 * A failed write removes OUT.8 so that no half page is installed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config_man.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s OUT.8 VERSION DATE\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "w");
  if (!f) {
    fprintf(stderr, "whisperd-man: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  int rc = wd_config_man(f, argv[2], argv[3]);
  if (fclose(f) != 0 || rc < 0) {
    fprintf(stderr, "whisperd-man: %s: write failed\n", argv[1]);
    remove(argv[1]);
    return 1;
  }
  return 0;
}
