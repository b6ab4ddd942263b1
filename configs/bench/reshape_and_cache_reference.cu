// reshape_and_cache reference, out of place: first copy every cache row
// (one block per cache row), then one block per token copies the token's
// key and value rows (heads * head_dim elements) into the row named by
// slot_mapping. Negative slots (padding) are skipped.
#include <cuda_bf16.h>

extern "C" __global__ void cache_copy_ref(const __nv_bfloat16* key_cache, const __nv_bfloat16* value_cache,
                                          __nv_bfloat16* key_cache_out, __nv_bfloat16* value_cache_out,
                                          int row_elems) {
  const long long row = blockIdx.x;
  for (int i = threadIdx.x; i < row_elems; i += blockDim.x) {
    key_cache_out[row * row_elems + i] = key_cache[row * row_elems + i];
    value_cache_out[row * row_elems + i] = value_cache[row * row_elems + i];
  }
}

extern "C" __global__ void reshape_and_cache_ref(const __nv_bfloat16* key, const __nv_bfloat16* value,
                                                 __nv_bfloat16* key_cache_out, __nv_bfloat16* value_cache_out,
                                                 const long long* slot_mapping, int row_elems) {
  const long long t = blockIdx.x;
  const long long slot = slot_mapping[t];
  if (slot < 0) return;
  for (int i = threadIdx.x; i < row_elems; i += blockDim.x) {
    key_cache_out[slot * row_elems + i] = key[t * row_elems + i];
    value_cache_out[slot * row_elems + i] = value[t * row_elems + i];
  }
}
