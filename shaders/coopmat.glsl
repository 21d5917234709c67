// coopmat.glsl - the cooperative-matrix types and calls of the matrix-unit
// kernels (gemm_cm.comp, attn_cm.comp), for either extension.
//
// GL_NV_cooperative_matrix (Debian 12's glslang compiles it; NVIDIA drivers
// from Turing on) by default; WD_CM_KHR=1 selects GL_KHR_cooperative_matrix
// (needs glslang >= 13; NVIDIA, AMD RDNA3, Intel Arc). CM_A and CM_B are
// CM x CM f16 operands, CM_C a CM x CM f32 accumulator, one per subgroup
// of SG invocations; loads and stores take an element offset and a stride
// in elements of the array they read. CM and SG are 16 and 32 (what NVIDIA
// lists, and AMD and Intel in wave32); CM=8 SG=8 builds the kernels for
// lavapipe (Mesa 26.2 lists 8x8x8 on 8-wide subgroups), to test them on a
// CPU.
#ifndef WD_COOPMAT_GLSL
#define WD_COOPMAT_GLSL
#ifndef CM
#define CM 16u
#endif
#ifndef SG
#define SG 32u
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#if defined(WD_CM_KHR) && WD_CM_KHR != 0
#extension GL_KHR_cooperative_matrix : require
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, CM, CM, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, CM, CM, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, CM, CM, gl_MatrixUseAccumulator>
#define CM_LOAD_ROWS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_COLS(m, buf, off, st) coopMatLoad(m, buf, off, st, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_STORE_ROWS(m, buf, off, st) coopMatStore(m, buf, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MAD(a, b, c) coopMatMulAdd(a, b, c)
#else
#extension GL_NV_cooperative_matrix : require
#define CM_A fcoopmatNV<16, gl_ScopeSubgroup, CM, CM>
#define CM_B fcoopmatNV<16, gl_ScopeSubgroup, CM, CM>
#define CM_C fcoopmatNV<32, gl_ScopeSubgroup, CM, CM>
#define CM_LOAD_ROWS(m, buf, off, st) coopMatLoadNV(m, buf, off, st, false)
#define CM_LOAD_COLS(m, buf, off, st) coopMatLoadNV(m, buf, off, st, true)
#define CM_STORE_ROWS(m, buf, off, st) coopMatStoreNV(m, buf, off, st, false)
#define CM_MAD(a, b, c) coopMatMulAddNV(a, b, c)
#endif
#endif
