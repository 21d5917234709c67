/*
 * cpu_pick_cache.h - the kernels that measurement chose (cpu_tune.h), kept
 * on disk per CPU model and model shape, so that a restart does not
 * measure again (issue #40).
 *
 * One small text file per key in the cache directory, named for a hash of
 * the key and holding the key itself, so that two keys never share a
 * choice even where their hashes collide:
 *
 *   whisperd-kernels 1
 *   key <the key: kernel version, CPU model, model shape, batch, threads, BLAS>
 *   <name> <value>            (one line per entry, at most WD_PICK_MAX)
 *   end <FNV-1a 64 of every byte above, hex>
 *
 * The cache is never required: no directory, a read-only one, a missing,
 * truncated, corrupt or foreign file all just mean "measure" (and a
 * failed write means "measure again next time"). Writes go to a temporary
 * file renamed over the old one, so a reader sees the old file or the new
 * one, never half of one; there is no fsync (a file that a crash left
 * short fails its checksum and is measured again).
 */
#ifndef WD_CPU_PICK_CACHE_H
#define WD_CPU_PICK_CACHE_H

#include <stddef.h>

/* Bump when a kernel changes speed or a candidate is added or dropped:
 * every cached choice then reads as foreign and is measured again. */
#define WD_KERNEL_VERSION 2

#define WD_PICK_MAX 8      /* entries in one file */
#define WD_PICK_NAME 24    /* an entry's name: [a-z0-9_], at most 23, not "end" */
#define WD_PICK_VALUE 320  /* an entry's value: printable ASCII, at most 319 */
#define WD_PICK_KEY 512    /* the key, as wd_cpu_pick_cache_* take it */
#define WD_PICK_PATH 4096

typedef struct {
  char name[WD_PICK_NAME];
  char value[WD_PICK_VALUE];
} wd_pick_entry_t;

typedef struct {
  int n;
  wd_pick_entry_t e[WD_PICK_MAX];
} wd_pick_set_t;

/* The cache directory: $WHISPERD_CACHE_DIR, else $CACHE_DIRECTORY (systemd's
 * CacheDirectory=, its first path), else $XDG_CACHE_HOME/whisperd, else
 * $HOME/.cache/whisperd (absolute paths only; the others are passed over
 * when relative). 0, or WD_ENOENT where none is set (no cache), WD_EINVAL
 * where WHISPERD_CACHE_DIR is relative (no cache: the setting is wrong),
 * WD_ERANGE where it does not fit in len. */
int wd_pick_cache_dir(char *dir, size_t len);

/* The file for key in dir: dir/cpu-kernels-<16 hex digits>.txt. */
int wd_pick_cache_path(const char *dir, const char *key, char *path, size_t len);

/* Reads path into *out when it is well-formed and holds key: 0; WD_ENOENT
 * where there is no file or it holds another key (a foreign file);
 * WD_EFORMAT where it is malformed in any way (too long, a bad line, a
 * checksum that does not match). *out is emptied on any error. */
int wd_pick_cache_read(const char *path, const char *key, wd_pick_set_t *out);

/* Writes s under key to path (temp file + rename), creating path's
 * directory and its parent where missing. WD_EINVAL for a name or value
 * the format cannot hold, WD_EIO where the directory is not writable. */
int wd_pick_cache_write(const char *path, const char *key, const wd_pick_set_t *s);

/* Adds (or replaces) name's value: WD_EINVAL where it would not round-trip
 * (bad characters, too long), WD_ERANGE where the set is full. */
int wd_pick_set_put(wd_pick_set_t *s, const char *name, const char *value);
/* name's value, or NULL. */
const char *wd_pick_set_get(const wd_pick_set_t *s, const char *name);

#endif
