/* A host simulation of the CUDA runtime subset the embedding kernels use: each
 * CUDA thread is an OS thread, blocks run one after another, warp primitives
 * go through per-warp barriers. For checking kernel logic without a GPU. */
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>

typedef int cudaError_t;
enum { cudaSuccess = 0 };
typedef struct CUstream_st *cudaStream_t;
inline const char *cudaGetErrorString(cudaError_t) { return "sim error"; }
inline cudaError_t cudaGetLastError() { return 0; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return 0; }

struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

template <class T> inline T __ldg(const T *p) { return *p; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
inline float __double2float_rn(double a) { return (float)a; }
inline double __ull2double_rn(unsigned long long a) { return (double)a; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
[[noreturn]] inline void __trap() { fprintf(stderr, "sim: __trap\n"); abort(); }

void __syncwarp(unsigned mask = 0xffffffffu);
unsigned __ballot_sync(unsigned mask, int pred);
unsigned long long sim_shfl_bits(unsigned mask, unsigned long long v, int src, int width);
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    static_assert(sizeof(T) <= 8);
    unsigned long long b = 0;
    memcpy(&b, &v, sizeof v);
    b = sim_shfl_bits(mask, b, src, width);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
void *sim_dyn_smem();
void *sim_shared(size_t bytes, int key);
void sim_run(const std::function<void()> &f, dim3 grid, dim3 block, size_t smem = 0,
             cudaStream_t st = 0);
