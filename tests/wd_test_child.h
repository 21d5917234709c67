/*
 * wd_test_child.h - a test binary that runs itself again as a child, with
 * an environment of its choosing, and reads the line the child prints: for
 * what a process settles once, at load or at its first query (OpenBLAS's
 * kernels, the CPU's features and their overrides), which only a fresh
 * process shows. The binary's main answers "--child" by printing that line.
 */
#ifndef WD_TEST_CHILD_H
#define WD_TEST_CHILD_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Runs `env <env> <this binary> --child` (env: env(1)'s arguments, e.g.
 * "-u NAME NAME2=value", or "") and puts the first line the child writes to
 * stdout, newline removed, in line. 0 when the child wrote a line and
 * exited 0, else -1. */
static inline int wd_test_child_line(const char *env, char *line, size_t size) {
  char self[512], cmd[1024];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return -1;
  self[n] = 0;
  const int len = snprintf(cmd, sizeof cmd, "env %s '%s' --child", env, self);
  if (len < 0 || (size_t)len >= sizeof cmd)
    return -1;
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  const int got = fgets(line, (int)size, p) != NULL;
  if (pclose(p) != 0 || !got)
    return -1;
  line[strcspn(line, "\n")] = 0;
  return 0;
}

#endif
