// What configs/bench/paged_attention_decode_baseline.cu (PAD_SPLIT = 1) needs of CUDA on the
// host, beyond bench/hopper/emu/emu.h: vector types, __half, conversions, cache-hinted loads.
#pragma once
#include "emu.h"
#ifndef PAD_EMU_CL
inline unsigned char* emu_block_smem() {  // (stub_cl/emu.h: the running block's memory)
  return smem;
}
#endif

struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) {
  return {x, y};
}
struct __half {
  _Float16 h;
};
inline float __half2float(__half v) {
  return static_cast<float>(v.h);
}
inline __half __float2half_rn(float f) {
  return {static_cast<_Float16>(f)};
}  // IEEE RNE
inline float __bfloat162float(__nv_bfloat16 v) {
  return bf2f(v.v);
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return {f2bf(f)};
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcg(const T* p) {  // the merge's loads of other blocks' records
  return *p;  // blocks run one after another here: every earlier block's stores are visible
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
