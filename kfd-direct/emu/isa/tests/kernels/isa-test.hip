// Kernels compiled at test time (tests/llvm_objdump.rs `compiled_kernels`) to reach encodings
// and modifiers the repository's fixtures do not: MFMA with AGPRs, DPP, swizzles, packed math,
// f16/f64, atomics, LDS, scratch, hostcall printf, clocks.
#include <hip/hip_runtime.h>

typedef float f4 __attribute__((ext_vector_type(4)));
typedef float f16v __attribute__((ext_vector_type(16)));
typedef double d4 __attribute__((ext_vector_type(4)));
typedef _Float16 h4 __attribute__((ext_vector_type(4)));
typedef short s2 __attribute__((ext_vector_type(2)));
typedef int i4 __attribute__((ext_vector_type(4)));
typedef short bf4 __attribute__((ext_vector_type(4)));

extern "C" __global__ void mfma(const float* a, const float* b, float* c) {
  int t = threadIdx.x;
  f16v acc = {};
  acc = __builtin_amdgcn_mfma_f32_32x32x2f32(a[t], b[t], acc, 0, 0, 0);
  f4 q = {c[t], c[t + 1], c[t + 2], c[t + 3]};
  q = __builtin_amdgcn_mfma_f32_4x4x1f32(a[t], b[t], q, 4, 1, 2);
  for (int i = 0; i < 16; i++) c[t * 16 + i] = acc[i] + q[i & 3];
}

extern "C" __global__ void mfma_types(const _Float16* h, const int* i8, const double* d, float* o, int* oi, double* od) {
  int t = threadIdx.x;
  h4 a = {h[t], h[t + 1], h[t + 2], h[t + 3]};
  f16v acc = {};
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(a, a, acc, 0, 0, 0);
  i4 ia = {};
  ia = __builtin_amdgcn_mfma_i32_4x4x4i8(i8[t], i8[t + 1], ia, 0, 0, 0);
  d4 da = {};
  da = __builtin_amdgcn_mfma_f64_4x4x4f64(d[t], d[t + 1], 0.0, 0, 0, 0)  + da[0];
  f4 bacc = {};
  bf4 b = {(short)t, 1, 2, 3};
  bacc = __builtin_amdgcn_mfma_f32_4x4x4bf16_1k(b, b, bacc, 0, 0, 0);
  for (int i = 0; i < 16; i++) o[t * 16 + i] = acc[i] + bacc[i & 3];
  oi[t] = ia[0] + ia[3];
  od[t] = da[0];
}

extern "C" __global__ void lanes(int* x, float* f) {
  int t = threadIdx.x;
  int v = x[t];
  v += __shfl_xor(v, 1);
  v += __shfl_down(v, 2);
  v += __shfl_up(v, 4);
  v += __builtin_amdgcn_update_dpp(0, v, 0x111, 0xf, 0xf, false);
  v += __builtin_amdgcn_mov_dpp(v, 0x142, 0xa, 0xf, true);
  v += __builtin_amdgcn_update_dpp(v, v, 0x1b, 0xf, 0x3, false);
  v += __builtin_amdgcn_ds_swizzle(v, 0x041f);
  v += __builtin_amdgcn_ds_bpermute(t * 4, v);
  v += __builtin_amdgcn_readlane(v, 5) + __builtin_amdgcn_readfirstlane(v);
  f[t] = __builtin_amdgcn_fmed3f(f[t], 0.0f, 1.0f) + __builtin_amdgcn_update_dpp(0, (int)f[t], 0x150, 0xf, 0xf, false);
  x[t] = v + (int)__ballot(v > 3) + __popcll(__ballot(v & 1));
}

extern "C" __global__ void atomics(float* f, double* d, unsigned* u, unsigned long long* l) {
  atomicAdd(f, 1.0f);
  atomicAdd(d, 2.0);
  atomicMax(u, threadIdx.x);
  atomicMin(u + 2, threadIdx.x);
  atomicCAS(u + 1, 3u, 4u);
  atomicExch(l, 5ull);
  atomicAdd(l + 1, 7ull);
  u[3] = atomicOr(u + 4, 1u) + atomicXor(u + 5, 2u) + atomicInc(u + 6, 9u);
}

extern "C" __global__ void lds(float* out, double* dout) {
  __shared__ float t[256];
  __shared__ double dt[256];
  int i = threadIdx.x;
  t[i] = out[i];
  dt[i] = dout[i];
  __syncthreads();
  out[i] = t[255 - i] * 2.0f + t[(i + 1) & 255] + t[(i + 64) & 255];
  dout[i] = dt[(i + 2) & 255] + dt[(i + 130) & 255];
  atomicAdd(&t[0], 1.0f);
}

extern "C" __global__ void packed(float2* a, const float2* b, _Float16* h, s2* s, int n) {
  int i = threadIdx.x;
  float2 x = a[i], y = b[i];
  x.x = x.x * y.x + 1.0f;
  x.y = x.y * y.y + 1.0f;
  a[i] = x;
  _Float16 p = h[i], q = h[i + n];
  h[i] = p * q + (_Float16)0.5f;
  h[i + 1] = __builtin_fmaf16(p, q, (_Float16)2.0f);
  s[i] = s[i] + s[i + 1];
  a[i + n].x = __builtin_amdgcn_sdot2(s[i], s[i + 1], 3, false);
}

extern "C" __global__ void dbl(double* d, int n) {
  int i = threadIdx.x;
  double x = d[i];
  d[i] = sqrt(x) / (double)n + exp(x) + sin(x) + floor(x * 0.25) + fma(x, x, 3.0) + rint(x);
}

extern "C" __global__ void conv(const double* d, float* f, long long* l, unsigned short* us, signed char* c) {
  int i = threadIdx.x;
  f[i] = (float)d[i] + (float)l[i] + (float)us[i] + (float)c[i];
  l[i] = (long long)d[i] * 3 / (l[i] | 1);
  us[i] = (unsigned short)(f[i] * 3.0f);
  c[i] = (signed char)(us[i] >> 3);
}

extern "C" __global__ void priv(int* o, int n) {
  int a[64];
  for (int k = 0; k < 64; k++) a[k] = o[k] * n;
  o[threadIdx.x] = a[(threadIdx.x * 7 + n) & 63];
}

extern "C" __global__ void clocks(long long* t) {
  long long a = clock64();
  __builtin_amdgcn_s_sleep(2);
  t[threadIdx.x] = wall_clock64() - a + __smid();
}

extern "C" __global__ void hello(int n) { printf("hello %d %f\n", n, 1.5); }
