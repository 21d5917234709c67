/*
 * enc_attn_simde.h - the blocked attention's kernels under SIMDe
 * (enc_attn_simde.c), for the tests.
 */
#ifndef WD_TEST_ENC_ATTN_SIMDE_H
#define WD_TEST_ENC_ATTN_SIMDE_H

#include "cpu_enc_attn.h"
#include "cpu_features.h" /* CPU_X86 */

/* The block kernel as SIMDe runs it, or NULL where that file was built
 * without SIMDe or the AVX2 flags. */
wd_cpu_enc_attn_block_fn enc_attn_simde_block(void);

#endif
