/*
 * epoll_del_delay.c - an LD_PRELOAD shim for test_systemd.py's drain-race
 * test: epoll_ctl(EPOLL_CTL_DEL) called from a process's main thread waits
 * 200 ms first. The daemon quiesces its HTTP server from the main thread on
 * SIGTERM; with libmicrohttpd's epoll mode, a worker thread then removes the
 * listen socket from its own epoll set inside that window and the main
 * thread's removal fails with ENOENT, which MHD answers with MHD_PANIC
 * (abort). The shim makes a race of a few instructions happen every time;
 * it changes nothing else (the call still goes to libc's epoll_ctl).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*epoll_ctl_fn)(int, int, int, struct epoll_event *);

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  static epoll_ctl_fn real;
  if (!real)
    real = (epoll_ctl_fn)dlsym(RTLD_NEXT, "epoll_ctl");
  if (op == EPOLL_CTL_DEL && syscall(SYS_gettid) == getpid())
    nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
  return real(epfd, op, fd, ev);
}
