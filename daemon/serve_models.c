/*
 * serve_models.c - the models `serve` runs (see serve_models.h).
 *
 * Each load is a loaded_t on the heap: its runtime and everything the
 * server is handed for it (names, decoding defaults, the model record), so
 * a replaced load stays whole for the requests still on it, however the
 * slot changes meanwhile. A slot's current load is cur[k]; a retired one
 * waits on `retired` until reap closes it.
 */
#include "serve_models.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "error.h"
#include "fault.h"
#include "log.h"
#include "model.h"
#include "runtime.h"

#define WD_SERVE_MAX_NAMES 16

typedef struct loaded {
  struct wd_serve_models *sv;
  int slot;
  wd_runtime_t *rt;
  wd_config_t cfg;          /* serve's, with .model this slot's path */
  wd_decode_opts_t dopts;   /* the defaults with this model's alignment heads */
  const char *names[WD_SERVE_MAX_NAMES];
  wd_server_model_t sm;
  struct stat st;           /* the file as loaded (st_mode 0: unknown) */
  char name[64];            /* the model's name (names[] and label point here) */
  /* offered after a failed load: why (sm.load_error points here), and the
   * file as it was then; on_demand answers WD_EMODEL until it changes */
  int failed;
  int failed_found;         /* the file was there (failed_st), or missing */
  struct stat failed_st;
  char load_err[512];
  struct loaded *next;      /* on the retired list */
} loaded_t;

struct wd_serve_models {
  wd_server_t *srv;
  wd_decode_opts_t dopts;
  int n;
  loaded_t *cur[WD_SERVER_MAX_MODELS];
  char *path[WD_SERVER_MAX_MODELS];     /* each slot's file */
  const char *aliases[WD_SERVE_MAX_NAMES]; /* --model-alias, split (into alias_buf) */
  int n_aliases;
  char *alias_buf;
  pthread_mutex_t mu;       /* guards retired: the retire callback runs on any thread */
  loaded_t *retired;
  wd_runtime_vad_t vad;     /* one Silero VAD, lent to every load */
  wd_runtime_diar_t diar;   /* one diarization, lent to every load */
  /* loading on demand (--models-memory, --models-idle-s); a slot whose
   * cur has no runtime is offered, not loaded */
  double budget_mib, idle_s;
  double est_mib[WD_SERVER_MAX_MODELS];  /* what a slot's model takes, estimated */
  double retiring_mib;      /* unloaded models still finishing their requests */
  double last_used[WD_SERVER_MAX_MODELS];
  uint64_t seen_jobs[WD_SERVER_MAX_MODELS];
  atomic_int demand[WD_SERVER_MAX_MODELS];      /* a request asked for it (any thread) */
  atomic_int over_budget[WD_SERVER_MAX_MODELS]; /* its last load did not fit */
};

/* Seconds a client waiting for a model's load is asked to wait. */
#define WD_SERVE_LOAD_RETRY_S 5

/* Names: whisper-1, the model's own name and --model-alias for slot 0;
 * the model's own name for the others. */
static int slot_names(const wd_serve_models_t *sv, int slot, const char *model_name,
                      const char **names) {
  int n = 0;
  if (slot == 0)
    names[n++] = "whisper-1";
  names[n++] = model_name;
  for (int i = 0; slot == 0 && i < sv->n_aliases && n < WD_SERVE_MAX_NAMES; i++)
    names[n++] = sv->aliases[i];
  return n;
}

/* Whether l (slot l->slot's model, loaded or offered) answers to a name
 * another slot's model already has: a request goes to the first model whose
 * names hold its `model`, so the later one would never be reached (and
 * /v1/models would list the name twice). err then names the two files, the
 * name and what to do. */
static int name_taken(const wd_serve_models_t *sv, const loaded_t *l, char *err,
                      size_t err_len) {
  for (int j = 0; j < sv->n; j++) {
    const loaded_t *o = sv->cur[j];
    if (j == l->slot)
      continue;
    for (int a = 0; a < l->sm.n_names; a++)
      for (int b = 0; b < o->sm.n_names; b++) {
        const char *name = l->names[a];
        if (strcmp(name, o->names[b]) != 0)
          continue;
        const int own_l = strcmp(name, l->name) == 0, own_o = strcmp(name, o->name) == 0;
        if (own_l && own_o) {
          snprintf(err, err_len,
                   "'%s' (%s) is model %s, as '%s' (%s) is: two models cannot share a name (a "
                   "request for it would reach only one of them); serve one of the two (a "
                   "model's name comes from its shape, so copies and quantized files of one "
                   "model have the same)",
                   sv->path[l->slot], l->slot == 0 ? "--model" : "--models", name, sv->path[j],
                   j == 0 ? "--model" : "--models");
          return 1;
        }
        /* Otherwise one of --model-alias (a model's own name is never
         * whisper-1, and only --model has aliases) is the other's name. */
        const int k = own_l ? l->slot : j, k0 = own_l ? j : l->slot;
        snprintf(err, err_len,
                 "'%s' (--models) is model %s, a name that --model-alias gives '%s' (--model): "
                 "two models cannot share a name (a request for it would reach only one of "
                 "them); drop %s from --model-alias, or serve one of the two",
                 sv->path[k], name, sv->path[k0], name);
        return 1;
      }
  }
  return 0;
}

/* The server's callback: the load's last request ended. Any thread. */
static void on_retire(void *ud) {
  loaded_t *l = ud;
  pthread_mutex_lock(&l->sv->mu);
  l->next = l->sv->retired;
  l->sv->retired = l;
  pthread_mutex_unlock(&l->sv->mu);
}

static void loaded_free(loaded_t *l) {
  if (!l)
    return;
  wd_runtime_close(l->rt); /* drains its workers first */
  free(l);
}

/* What identifies a model file's version: the file itself, or a
 * CTranslate2 directory's model.bin (its weights). */
static int file_sig(const char *path, struct stat *st) {
  char bin[4096];
  if (stat(path, st) != 0)
    return -1;
  if (!S_ISDIR(st->st_mode))
    return 0;
  snprintf(bin, sizeof bin, "%s/model.bin", path);
  return stat(bin, st);
}

static int same_sig(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The server's callback for an offered slot: note the demand for the
 * controlling thread. Any thread, never blocks (a stat at most). A slot
 * whose last load failed is not tried again until its file changes. */
static int on_demand(void *ud) {
  loaded_t *l = ud;
  struct stat st;
  if (l->failed) {
    const int found = file_sig(l->cfg.model, &st) == 0;
    if (found == l->failed_found && (!found || same_sig(&st, &l->failed_st)))
      return WD_EMODEL;
  }
  atomic_store(&l->sv->demand[l->slot], 1);
  return atomic_load(&l->sv->over_budget[l->slot]) ? WD_EBUSY : WD_SERVE_LOAD_RETRY_S;
}

/* An offered slot: the server knows its names and what it can do, and
 * asks for it on the first request (on_demand); nothing is loaded. */
static loaded_t *offered(wd_serve_models_t *sv, const wd_config_t *cfg, int slot,
                         const char *name, int multilingual, int no_translate,
                         const struct stat *st) {
  loaded_t *l = calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->sv = sv;
  l->slot = slot;
  l->cfg = *cfg;
  l->cfg.model = sv->path[slot];
  l->dopts = sv->dopts;
  l->st = *st;
  snprintf(l->name, sizeof l->name, "%s", name);
  l->sm = (wd_server_model_t){
    .multilingual = multilingual, .no_translate = no_translate, .names = l->names,
    .n_names = slot_names(sv, slot, l->name, l->names), .decode = &l->dopts,
    .label = l->name, .created = (long long)st->st_mtime, .on_retire = on_retire,
    .retire_ud = l, .on_demand = on_demand, .demand_ud = l,
  };
  return l;
}

/* MiB a model file takes loaded, estimated: its size (a CTranslate2
 * directory's model.bin) plus a quarter for caches and scratch. */
static double model_mib(const char *path) {
  struct stat st;
  char bin[4096];
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(bin, sizeof bin, "%s/model.bin", path);
    if (stat(bin, &st) != 0)
      return 0.0;
  } else if (stat(path, &st) != 0) {
    return 0.0;
  }
  return (double)st.st_size * 1.25 / 1048576.0;
}

/* Loads slot's file into a new runtime; NULL with err set on failure. */
static loaded_t *load(wd_serve_models_t *sv, const wd_config_t *cfg, int slot, char *err,
                      size_t err_len) {
  loaded_t *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  l->sv = sv;
  l->slot = slot;
  l->cfg = *cfg;
  l->cfg.model = sv->path[slot];
  sd_notifyf(0, "STATUS=Loading model: %s", l->cfg.model);
  const double t0 = wd_now_s();
  const long delay_ms = wd__fault_load_delay_ms(); /* testing only (core/fault.h) */
  if (delay_ms > 0)
    nanosleep(&(struct timespec){ delay_ms / 1000, (delay_ms % 1000) * 1000000L }, NULL);
  if (wd_runtime_open(&l->cfg, cfg->max_batch, cfg->queue_max, 1, &sv->vad, &l->rt, err,
                      err_len) < 0) {
    free(l);
    return NULL;
  }
  const wd_model_t *m = wd_runtime_model(l->rt);
  snprintf(l->name, sizeof l->name, "%s", wd_model_name(m));
  l->dopts = sv->dopts;
  l->dopts.align_heads = wd_runtime_align_heads(l->rt, &l->dopts.n_align_heads);
  struct stat *st = &l->st;
  if (stat(l->cfg.model, st) != 0)
    memset(st, 0, sizeof *st);
  l->sm = (wd_server_model_t){
    .workers = wd_runtime_workers(l->rt), .tok = wd_runtime_tokenizer(l->rt),
    .multilingual = wd_model_is_multilingual(m), .names = l->names,
    .n_names = slot_names(sv, slot, l->name, l->names),
    .no_translate = wd_model_is_multilingual(m) && !wd_model_can_translate(m),
    .decode = &l->dopts, .label = l->name,
    .created = (long long)st->st_mtime,
    .on_retire = on_retire, .retire_ud = l,
  };
  l->sm.vad = wd_runtime_vad(l->rt, &l->sm.vad_params, &l->sm.vad_default);
  l->sm.diar = sv->diar.model;
  l->sm.diar_params = &sv->diar.params;
  wd_log_info("serve: model %s on %s loaded in %.0f ms", wd_model_name(m),
              wd_runtime_device(l->rt), (wd_now_s() - t0) * 1e3);
  return l;
}

/* Slot's file offered without loading it: its header read for the names
 * and abilities (the weights are mapped, never read); NULL with err set. */
static loaded_t *offer(wd_serve_models_t *sv, const wd_config_t *cfg, int slot, char *err,
                       size_t err_len) {
  wd_model_t *m = NULL;
  char msg[512] = "";
  struct stat st;
  if (wd_model_load(sv->path[slot], &m, msg, sizeof msg) < 0 || stat(sv->path[slot], &st) != 0) {
    snprintf(err, err_len, "cannot load model '%s': %s", sv->path[slot], msg[0] ? msg : "stat");
    wd_model_free(m);
    return NULL;
  }
  loaded_t *l = offered(sv, cfg, slot, wd_model_name(m), wd_model_is_multilingual(m),
                        wd_model_is_multilingual(m) && !wd_model_can_translate(m), &st);
  if (l)
    wd_log_info("serve: model %s (%s, about %.0f MiB) offered: loaded on its first request",
                l->name, sv->path[slot], sv->est_mib[slot]);
  else
    snprintf(err, err_len, "out of memory");
  wd_model_free(m);
  return l;
}

/* Splits a comma list in place into out[] (spaces trimmed, empties
 * skipped); how many, at most max. */
static int split_list(char *s, const char **out, int max) {
  int n = 0;
  for (char *save = NULL, *a = strtok_r(s, ",", &save); a && n < max;
       a = strtok_r(NULL, ",", &save)) {
    while (*a == ' ')
      a++;
    char *e = a + strlen(a);
    while (e > a && e[-1] == ' ')
      *--e = '\0';
    if (*a)
      out[n++] = a;
  }
  return n;
}

int wd_serve_models_open(const wd_config_t *cfg, const wd_decode_opts_t *dopts, wd_server_t *srv,
                         wd_serve_models_t **ret, char *err, size_t err_len) {
  *ret = NULL;
  wd_serve_models_t *sv = calloc(1, sizeof *sv);
  char *paths = strdup(cfg->models ? cfg->models : "");
  if (!sv || !paths || !(sv->alias_buf = strdup(cfg->model_alias ? cfg->model_alias : ""))) {
    free(paths);
    if (sv)
      free(sv->alias_buf);
    free(sv);
    snprintf(err, err_len, "out of memory");
    return WD_ENOMEM;
  }
  pthread_mutex_init(&sv->mu, NULL);
  sv->srv = srv;
  sv->dopts = *dopts;
  sv->budget_mib = cfg->models_memory_mb;
  sv->idle_s = cfg->models_idle_s;
  sv->n_aliases = split_list(sv->alias_buf, sv->aliases, WD_SERVE_MAX_NAMES - 2);
  *ret = sv;
  const char *more[WD_SERVER_MAX_MODELS + 1];
  const int n_more = split_list(paths, more, WD_SERVER_MAX_MODELS);
  int rc = wd_runtime_vad_load(cfg, &sv->vad, err, err_len);
  if (rc == 0)
    rc = wd_runtime_diar_load(cfg, &sv->diar, err, err_len);
  if (rc == 0 && n_more >= WD_SERVER_MAX_MODELS) {
    snprintf(err, err_len, "--models: at most %d models beside --model",
             WD_SERVER_MAX_MODELS - 1);
    rc = WD_EINVAL;
  }
  for (int k = 0; k <= n_more && !rc; k++) {
    if (!(sv->path[k] = strdup(k == 0 ? cfg->model : more[k - 1]))) {
      snprintf(err, err_len, "out of memory");
      rc = WD_ENOMEM;
      break;
    }
    sv->est_mib[k] = model_mib(sv->path[k]);
    sv->last_used[k] = wd_now_s();
    /* with a budget, --models wait for their first request */
    loaded_t *l = k > 0 && sv->budget_mib > 0 ? offer(sv, cfg, k, err, err_len)
                                              : load(sv, cfg, k, err, err_len);
    if (!l) {
      rc = WD_EIO;
      break;
    }
    if (name_taken(sv, l, err, err_len)) {
      loaded_free(l);
      rc = WD_ECONFIG;
      break;
    }
    if (k == 0 && sv->budget_mib > 0 && sv->est_mib[0] > sv->budget_mib)
      wd_log_warning("serve: --models-memory %.0f MiB is less than --model's %.0f MiB: it is "
                     "loaded anyway, and the others only while it fits", sv->budget_mib,
                     sv->est_mib[0]);
    sv->cur[sv->n++] = l;
    wd_server_attach(srv, &l->sm);
  }
  free(paths);
  return rc;
}

int wd_serve_models_warmup(wd_serve_models_t *sv, char *err, size_t err_len) {
  for (int k = 0; k < sv->n; k++) {
    char e[512] = "";
    if (sv->cur[k]->rt && wd_runtime_warmup(sv->cur[k]->rt, e, sizeof e) < 0) {
      snprintf(err, err_len, "%s: %s", sv->cur[k]->sm.label, e);
      return WD_EIO;
    }
  }
  return 0;
}

const char *wd_serve_models_first(const wd_serve_models_t *sv) {
  return sv && sv->n > 0 ? sv->cur[0]->sm.label : "?";
}

int wd_serve_models_count(const wd_serve_models_t *sv) { return sv ? sv->n : 0; }

/* Whether path is still the regular file l loaded: the same inode on the
 * same device, size and modification time (a file replaced by rename, or
 * rewritten, differs; a directory, CTranslate2's, is always loaded again:
 * its files can change under an unchanged directory). */
static int unchanged(const loaded_t *l, const char *path) {
  struct stat st;
  return S_ISREG(l->st.st_mode) && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         st.st_dev == l->st.st_dev && st.st_ino == l->st.st_ino &&
         st.st_size == l->st.st_size && st.st_mtim.tv_sec == l->st.st_mtim.tv_sec &&
         st.st_mtim.tv_nsec == l->st.st_mtim.tv_nsec;
}

int wd_serve_models_reload(wd_serve_models_t *sv) {
  int n = 0;
  for (int k = 0; k < sv->n; k++) {
    char err[1024] = "";
    if (!sv->cur[k]->rt)
      continue; /* offered: its next load reads the file as it is then */
    if (unchanged(sv->cur[k], sv->path[k])) {
      /* loading it again would hold two copies until the old one's last
       * request ends, for nothing */
      wd_log_info("serve: SIGHUP: %s unchanged (%s): kept", sv->path[k], sv->cur[k]->sm.label);
      continue;
    }
    loaded_t *l = load(sv, &sv->cur[k]->cfg, k, err, sizeof err);
    if (l && (name_taken(sv, l, err, sizeof err) ||
              wd_runtime_warmup(l->rt, err, sizeof err) < 0)) {
      loaded_free(l);
      l = NULL;
    }
    if (!l) {
      wd_log_error("serve: SIGHUP: %s stays as it was: %s", sv->path[k], err);
      continue;
    }
    const char *was = sv->cur[k]->sm.label;
    wd_log_notice("serve: SIGHUP: %s reloaded (%s, was %s); requests already on the old one "
                  "finish there", sv->path[k], l->sm.label, was);
    if (wd_server_replace(sv->srv, k, &l->sm) < 0) { /* out of memory: keep the old */
      loaded_free(l);
      continue;
    }
    sv->retiring_mib += sv->est_mib[k];
    sv->cur[k] = l; /* the old one is on its way to the retired list */
    n++;
  }
  return n;
}

void wd_serve_models_reap(wd_serve_models_t *sv) {
  if (!sv)
    return;
  pthread_mutex_lock(&sv->mu);
  loaded_t *l = sv->retired;
  sv->retired = NULL;
  pthread_mutex_unlock(&sv->mu);
  while (l) {
    loaded_t *next = l->next;
    if (l->rt) {
      wd_log_info("serve: the old %s (%s) is no longer used: closed", sv->path[l->slot],
                  l->sm.label);
      sv->retiring_mib -= sv->est_mib[l->slot]; /* its memory is free now */
      if (sv->retiring_mib < 0.5)
        sv->retiring_mib = 0.0;
    }
    loaded_free(l);
    l = next;
  }
}

/* Memory the loaded models hold, estimated: every current load, and the
 * unloaded ones still finishing requests. */
static double used_mib(const wd_serve_models_t *sv) {
  double u = sv->retiring_mib;
  for (int k = 0; k < sv->n; k++)
    if (sv->cur[k]->rt)
      u += sv->est_mib[k];
  return u;
}

/* Slot k's model out: an offered slot takes its place in the server; the
 * load closes once its last request has ended (at once when idle: reap). */
static int unload(wd_serve_models_t *sv, int k, const char *why) {
  loaded_t *cur = sv->cur[k];
  loaded_t *ph = offered(sv, &cur->cfg, k, cur->name, cur->sm.multilingual,
                         cur->sm.no_translate, &cur->st);
  if (!ph || wd_server_replace(sv->srv, k, &ph->sm) < 0) {
    free(ph);
    return WD_ENOMEM;
  }
  wd_log_notice("serve: model %s unloaded (%s)", cur->name, why);
  sv->retiring_mib += sv->est_mib[k];
  sv->cur[k] = ph;
  wd_serve_models_reap(sv);
  return 0;
}

/* Whether slot k has jobs queued or running now. */
static int busy(const wd_serve_models_t *sv, int k) {
  wd_worker_stats_t st;
  wd_workers_stats(wd_runtime_workers(sv->cur[k]->rt), &st);
  return st.queued + st.running > 0;
}

/* Slot k's load failed with err: an offered record that remembers why
 * takes its place (the requests parked for it are answered 503 with err
 * at once, and so are the next ones until the file changes from st, the
 * file as the load found it; NULL: it was missing, and is tried again once
 * it is there). */
static void load_failed(wd_serve_models_t *sv, int k, const char *err, const struct stat *st) {
  loaded_t *cur = sv->cur[k];
  loaded_t *ph = offered(sv, &cur->cfg, k, cur->name, cur->sm.multilingual,
                         cur->sm.no_translate, &cur->st);
  if (ph) {
    ph->failed = 1;
    ph->failed_found = st != NULL;
    if (st)
      ph->failed_st = *st;
    snprintf(ph->load_err, sizeof ph->load_err, "%s", err);
    ph->sm.load_error = ph->load_err;
  }
  if (!ph || wd_server_replace(sv->srv, k, &ph->sm) < 0) {
    free(ph);
    wd_server_model_changed(sv->srv, k); /* parked requests look again: 503 */
    return;
  }
  sv->cur[k] = ph; /* the one before retires */
  wd_serve_models_reap(sv);
}

/* A request asked for offered slot k: make room (idle --models, least
 * recently used first), load it, warm it up and swap it in; or, when it
 * cannot fit while the others are busy, mark it over budget (its requests
 * get 503 until room is made). */
static void load_on_demand(wd_serve_models_t *sv, int k) {
  while (sv->budget_mib > 0 && used_mib(sv) + sv->est_mib[k] > sv->budget_mib) {
    int lru = -1;
    for (int j = 1; j < sv->n; j++)
      if (j != k && sv->cur[j]->rt && !busy(sv, j) &&
          (lru < 0 || sv->last_used[j] < sv->last_used[lru]))
        lru = j;
    if (lru < 0 || unload(sv, lru, "room for another model under --models-memory") < 0) {
      if (!atomic_exchange(&sv->over_budget[k], 1))
        wd_log_warning("serve: model %s (about %.0f MiB) does not fit in --models-memory %.0f "
                       "MiB beside the models in use (%.0f MiB): its requests get 503",
                       sv->cur[k]->name, sv->est_mib[k], sv->budget_mib, used_mib(sv));
      wd_server_model_changed(sv->srv, k); /* requests parked for it: 503 now */
      return;
    }
  }
  char err[1024] = "";
  struct stat st0; /* the file as this load found it: a change after it is tried again */
  const int have_st0 = file_sig(sv->path[k], &st0) == 0;
  loaded_t *l = load(sv, &sv->cur[k]->cfg, k, err, sizeof err);
  if (l && (name_taken(sv, l, err, sizeof err) || /* the file changed since it was offered */
            wd_runtime_warmup(l->rt, err, sizeof err) < 0)) {
    loaded_free(l);
    l = NULL;
  }
  if (!l || wd_server_replace(sv->srv, k, &l->sm) < 0) {
    wd_log_error("serve: model %s could not be loaded: %s; its requests get 503 until the file "
                 "changes", sv->path[k], err[0] ? err : "no memory");
    loaded_free(l);
    load_failed(sv, k, err[0] ? err : "out of memory", have_st0 ? &st0 : NULL);
    return;
  }
  atomic_store(&sv->over_budget[k], 0);
  sv->cur[k] = l; /* the offered one retires */
  sv->last_used[k] = wd_now_s();
  sv->seen_jobs[k] = 0;
  wd_serve_models_reap(sv);
}

void wd_serve_models_tick(wd_serve_models_t *sv) {
  const double now = wd_now_s();
  for (int k = 0; k < sv->n; k++) {
    if (!sv->cur[k]->rt)
      continue;
    wd_worker_stats_t st;
    wd_workers_stats(wd_runtime_workers(sv->cur[k]->rt), &st);
    const uint64_t jobs = st.jobs_done + st.jobs_failed;
    if (st.queued + st.running > 0 || jobs != sv->seen_jobs[k])
      sv->last_used[k] = now;
    sv->seen_jobs[k] = jobs;
  }
  for (int k = 1; sv->idle_s > 0 && k < sv->n; k++)
    if (sv->cur[k]->rt && now - sv->last_used[k] >= sv->idle_s && !busy(sv, k))
      unload(sv, k, "idle for --models-idle-s");
  for (int k = 0; k < sv->n; k++)
    if (atomic_exchange(&sv->demand[k], 0) && !sv->cur[k]->rt)
      load_on_demand(sv, k);
}

void wd_serve_models_stats(wd_serve_models_t *sv, wd_worker_stats_t *ret, double *ret_heartbeat) {
  *ret = (wd_worker_stats_t){ 0 };
  double oldest = wd_now_s();
  for (int k = 0; k < sv->n; k++) {
    if (!sv->cur[k]->rt)
      continue;
    wd_workers_t *g = wd_runtime_workers(sv->cur[k]->rt);
    wd_worker_stats_t one;
    wd_workers_stats(g, &one);
    wd_worker_stats_add(ret, &one);
    const double hb = wd_workers_heartbeat(g);
    oldest = hb < oldest ? hb : oldest;
  }
  *ret_heartbeat = oldest;
}

void wd_serve_models_drain(wd_serve_models_t *sv, int grace_s) {
  wd_workers_t *g[WD_SERVER_MAX_MODELS];
  int n = 0;
  for (int k = 0; sv && k < sv->n; k++)
    if (sv->cur[k]->rt)
      g[n++] = wd_runtime_workers(sv->cur[k]->rt);
  if (n > 0) /* side by side: the drain takes one grace, however many models */
    wd_workers_drain_many(g, n, grace_s);
}

void wd_serve_models_close(wd_serve_models_t *sv) {
  if (!sv)
    return;
  wd_serve_models_reap(sv);
  for (int k = 0; k < sv->n; k++)
    loaded_free(sv->cur[k]);
  for (int k = 0; k < WD_SERVER_MAX_MODELS; k++)
    free(sv->path[k]);
  wd_runtime_vad_free(&sv->vad); /* after every load that borrowed it */
  wd_runtime_diar_free(&sv->diar);
  free(sv->alias_buf);
  pthread_mutex_destroy(&sv->mu);
  free(sv);
}
