/*
 * cmd_devices.c - `whisperd devices`: what Vulkan devices are visible and
 * which one the engine would pick, and the native CPU engine (--device cpu);
 * and whether speaker diarization (CPU only) is available.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "cpu_engine.h"
#include "device.h"
#include "error.h"
#include "log.h"
#include "vk_device.h"
#include "vk_gemm.h"

/* Exit 0 whenever some engine can run: the CPU engine always can. */
int wd_cmd_devices(const wd_config_t *cfg, FILE *out) {
  wd_vk_device_info_t *infos = NULL;
  uint32_t n = 0;
  wd_vk_limits_t lim;
  char err[256];
  if (wd_device_vk_limits(cfg->vk_limits, &lim, err, sizeof err) < 0) {
    wd_log_error("devices: %s", err);
    return 1;
  }
  int rc = wd_vk_device_list(&lim, &infos, &n);
  if (rc < 0) /* the CPU engine below still runs: a warning, and exit 0 */
    wd_log_warning("devices: cannot enumerate Vulkan devices: %s (is a Vulkan loader and driver "
                   "installed? On Debian: mesa-vulkan-drivers); the CPU engine serves",
                   wd_strerror(rc));
  else if (n == 0)
    fprintf(out, "no Vulkan devices found (install mesa-vulkan-drivers for lavapipe)\n");
  for (uint32_t i = 0; i < n; i++) {
    const wd_vk_device_info_t *d = &infos[i];
    fprintf(out, "device %u: %s\n", d->index, d->name);
    fprintf(out, "  type:          %s\n", wd_vk_class_name(d->device_class));
    fprintf(out, "  driver:        %s (%s)\n", d->driver_name[0] ? d->driver_name : "?",
            d->driver_info[0] ? d->driver_info : "?");
    fprintf(out, "  vulkan:        %u.%u.%u\n", (d->api_version >> 22) & 0x7f,
            (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
    fprintf(out, "  memory:        %.0f MiB device-local\n",
            (double)d->device_local_bytes / (1024.0 * 1024.0));
    fprintf(out, "  subgroup size: %u%s\n", d->subgroup_size,
            d->subgroup_arithmetic ? " (arithmetic ops)" : "");
    fprintf(out, "  float16:       %s arithmetic, %s 16-bit storage\n",
            d->shader_float16 ? "yes" : "no", d->storage_16bit ? "yes" : "no");
    fprintf(out, "  limits:        %u invocations/workgroup, %u KiB shared, %llu MiB storage "
                 "range, %u M texels\n",
            d->max_workgroup_invocations, d->max_shared_bytes / 1024,
            (unsigned long long)(d->max_storage_range >> 20), d->max_texel_elements >> 20);
    fprintf(out, "  matrix units:  %s%s%s%s\n", wd_vk_cm_ext_name(d->matrix_ext),
            d->matrix_ext == WD_VK_CM_KHR8 ? " (8x8x8, tests)" : "",
            d->coopmat.nv_ext ? ", lists VK_NV_cooperative_matrix" : "",
            d->coopmat.khr_ext ? ", lists VK_KHR_cooperative_matrix" : "");
    wd_vk_coopmat_print(out, "    ", &d->coopmat);
    fprintf(out, "  GEMM:          %s (encoder Linear layers), %s (attention), %s (prefill)\n",
            wd_vk_gemm_family_name(wd_vk_gemm_auto(d, WD_VK_GEMM_B_F16, false)),
            wd_vk_gemm_family_name(wd_vk_gemm_auto(d, WD_VK_GEMM_B_F32, false)),
            wd_vk_gemm_family_name(wd_vk_gemm_auto_rows(d, false)));
    fprintf(out, "  usable:        %s\n", d->usable ? "yes" : "no (needs Vulkan 1.2 + compute)");
  }
  free(infos);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  fprintf(out, "device cpu: the native CPU engine (--device cpu)\n");
  if (cfg->threads > 0)
    fprintf(out, "  threads:       %d (--threads)\n", cfg->threads);
  else
    fprintf(out, "  threads:       %ld (online cores; --threads sets it)\n", cores > 0 ? cores : 1);
  fprintf(out, "  encoder GEMM:  %s\n", wd_cpu_engine_gemm());
  const char *warn = wd_cpu_engine_gemm_warning();
  if (warn)
    fprintf(out, "  warning:       %s\n", warn);
  fprintf(out, "  decoder GEMV:  batched, %s\n", wd_cpu_engine_kernel());
  /* Measured choices (issue #40): which kernels have candidates here, and
   * where a load keeps what it measured. */
  char cache[512];
  wd_cpu_engine_cache_dir(cache, sizeof cache);
  fprintf(out, "  kernel choice: %s\n",
          strncmp(wd_cpu_engine_kernel(), "avx512", 6) == 0
              ? "measured at load (GEMV AVX-512 vs AVX2 by batch rows, encoder attention "
                "blocked vs sgemm), cached per CPU and model shape"
              : "one candidate per kernel on this CPU (no AVX-512), nothing measured");
  fprintf(out, "  kernel cache:  %s\n", cache);
  /* --compute-type: what each runs on here, or why not. */
  for (int c = WD_CPU_COMPUTE_BF16; c <= WD_CPU_COMPUTE_INT8; c++) {
    const char *no = wd_cpu_compute_refusal((wd_cpu_compute_t)c);
    fprintf(out, "  compute %-5s  %s\n", wd_cpu_compute_name((wd_cpu_compute_t)c),
            no ? no : wd_cpu_compute_path((wd_cpu_compute_t)c));
  }
  wd_device_choice_t dc;
  wd_device_choose(WD_DEVICE_AUTO, &dc);
  fprintf(out, "default: %s\n", dc.why);
  /* --device all: every GPU, else the CPU engine alone. */
  const int all = WD_DEVICE_ALL;
  wd_device_choice_t dcs[WD_DEVICES_MAX];
  char summary[256];
  const int n_all = wd_device_choose_list(&all, 1, dcs, WD_DEVICES_MAX, summary, sizeof summary);
  fprintf(out, "all: %s\n", n_all == 1 ? dcs[0].why : summary);
  wd_cmd_print_diarization(cfg, out); /* on the CPU, beside any engine */
  return 0;
}
