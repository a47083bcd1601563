__kernel void vec(__global float4* a, __global const float4* b, float s) {
  size_t i = get_global_id(0);
  a[i] = mad(a[i], (float4)(s), b[i]);
}
__kernel void dbl(__global double* a, int n) {
  size_t i = get_global_id(0);
  a[i] = fma(a[i], 3.0, (double)n) + rsqrt(a[i]);
}
__kernel void red(__global int* out, __local int* tmp) {
  int l = get_local_id(0);
  tmp[l] = l;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) { if (l < s) tmp[l] += tmp[l + s]; barrier(CLK_LOCAL_MEM_FENCE); }
  if (l == 0) atomic_add(out, tmp[0]);
}
__kernel void conv(__global uchar* c, __global short* s, __global half* h, __global float* f) {
  size_t i = get_global_id(0);
  f[i] = (float)c[i] + (float)s[i] + vload_half(i, h);
  vstore_half(f[i] * 0.5f, i, h);
  c[i] = convert_uchar_sat(f[i]);
}
__kernel void bits(__global uint* u, __global ulong* l) {
  size_t i = get_global_id(0);
  u[i] = popcount(u[i]) + clz(u[i]) + rotate(u[i], 5u) + mul_hi(u[i], 77u) + (u[i] >> 3) * 0x12345;
  l[i] = l[i] / (ulong)(u[i] | 1) + (l[i] << 7);
}
// gfx940 has no image instructions (llvm_objdump's gfx940 corpus defines AQUEDUCT_NO_IMAGES).
#ifndef AQUEDUCT_NO_IMAGES
__kernel void img(read_only image2d_t im, sampler_t smp, __global float4* o, write_only image2d_t out) {
  int i = get_global_id(0);
  float4 v = read_imagef(im, smp, (float2)(i, 0.5f)) + read_imagef(im, (int2)(i, 1));
  o[i] = v + (float4)(get_image_width(im));
  write_imagef(out, (int2)(i, 2), v);
}
#endif
