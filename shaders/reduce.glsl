// reduce.glsl - workgroup-wide sum and max of one float per invocation.
//
// Include after defining WD_RED_N (the workgroup size, a power of two) and,
// for the subgroup form, WD_RED_SUBGROUP. Every invocation of the workgroup
// must call these in uniform control flow (they contain barriers), and every
// invocation gets the result. Each call ends with a barrier, so shared-memory
// writes made before the call are visible to everyone after it.
//
// Two forms, chosen per device when the pipeline is created:
//   WD_RED_SUBGROUP: subgroupAdd/Max inside each subgroup, then one shared
//     slot per subgroup (lavapipe, most GPUs: needs subgroup arithmetic).
//   otherwise: the classic shared-memory tree, log2(WD_RED_N) barriers.
#ifndef WD_REDUCE_GLSL
#define WD_REDUCE_GLSL

#ifdef WD_RED_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

shared float wd_red[WD_RED_N];

#ifdef WD_RED_SUBGROUP
float wd_wg_sum(float v) {
  v = subgroupAdd(v);
  barrier(); // the previous call's readers are done with wd_red
  if (subgroupElect()) wd_red[gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; i++) s += wd_red[i];
  barrier();
  return s;
}
float wd_wg_max(float v) {
  v = subgroupMax(v);
  barrier();
  if (subgroupElect()) wd_red[gl_SubgroupID] = v;
  barrier();
  float s = wd_red[0];
  for (uint i = 1; i < gl_NumSubgroups; i++) s = max(s, wd_red[i]);
  barrier();
  return s;
}
#else
float wd_wg_sum(float v) {
  const uint l = gl_LocalInvocationIndex;
  wd_red[l] = v;
  barrier();
  for (uint s = WD_RED_N / 2u; s > 0u; s >>= 1) {
    if (l < s) wd_red[l] += wd_red[l + s];
    barrier();
  }
  const float r = wd_red[0];
  barrier();
  return r;
}
float wd_wg_max(float v) {
  const uint l = gl_LocalInvocationIndex;
  wd_red[l] = v;
  barrier();
  for (uint s = WD_RED_N / 2u; s > 0u; s >>= 1) {
    if (l < s) wd_red[l] = max(wd_red[l], wd_red[l + s]);
    barrier();
  }
  const float r = wd_red[0];
  barrier();
  return r;
}
#endif

#endif
