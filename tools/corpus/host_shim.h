// Host stand-ins for the CUDA built-ins the corpus uses (see hostcheck.py). Not a GPU model:
// integer and IEEE semantics only, one std::thread per GPU thread, condvar barriers.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
struct Dim3 { unsigned int x, y, z; };
static thread_local Dim3 threadIdx;
static Dim3 blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __shared__ static
typedef unsigned long long u64_t;

// ---- a block runs one std::thread per GPU thread; barriers are generation-counting condvars
struct Barrier {
    std::mutex m; std::condition_variable cv; int count = 0; long gen = 0;
    void wait(int n) {
        std::unique_lock<std::mutex> l(m); long g = gen;
        if (++count == n) { count = 0; ++gen; cv.notify_all(); } else cv.wait(l, [&] { return gen != g; });
    }
};
static Barrier g_block_bar;
static int g_block_threads = 0;
static std::mutex g_atomic;
static inline void __syncthreads() { g_block_bar.wait(g_block_threads); }
static inline int linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
struct Warp { std::mutex m; std::map<unsigned, Barrier> bars; unsigned long long slot[32]; };
static Warp g_warps[2];
static inline Warp& my_warp() { return g_warps[linear_tid() / 32]; }
static inline int my_lane() { return linear_tid() % 32; }
static inline void warp_wait(unsigned mask) {
    Warp& w = my_warp(); Barrier* b; { std::lock_guard<std::mutex> l(w.m); b = &w.bars[mask]; }
    b->wait(__builtin_popcount(mask));
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) { warp_wait(mask); }
// exchange one 64-bit value among the lanes of mask; returns the value lane src published
static inline unsigned long long exchange(unsigned mask, unsigned long long v, int src) {
    Warp& w = my_warp(); w.slot[my_lane()] = v; warp_wait(mask);
    unsigned long long r = w.slot[src]; warp_wait(mask); return r;
}
// PTX shfl.sync source-lane rules with CUDA's c operand; out-of-segment sources read their own lane
static inline int shfl_src(int mode, int b, int width) {
    int lane = my_lane(); int seg = (32 - width) & 31; int cval = mode == 0 ? 0 : 31;
    int maxl = (lane & seg) | (cval & ~seg & 31), minl = lane & seg; b &= 31; int j; bool ok;
    if (mode == 0) { j = lane - b; ok = j >= maxl; }
    else if (mode == 1) { j = lane + b; ok = j <= maxl; }
    else if (mode == 2) { j = lane ^ b; ok = j <= maxl; }
    else { j = minl | (b & ~seg & 31); ok = j <= maxl; }
    return ok ? j : lane;
}
template <class T> static inline T shfl_generic(unsigned mask, T v, int mode, int b, int width) {
    unsigned long long bits = 0; std::memcpy(&bits, &v, sizeof(T));
    int src = shfl_src(mode, b, width);
    unsigned long long got = exchange(mask, bits, src);
    T r; std::memcpy(&r, &got, sizeof(T)); return r;
}
template <class T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return shfl_generic(m, v, 0, d, w); }
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return shfl_generic(m, v, 1, d, w); }
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int d, int w = 32) { return shfl_generic(m, v, 2, d, w); }
template <class T> static inline T __shfl_sync(unsigned m, T v, int s, int w = 32) { return shfl_generic(m, v, 3, s, w); }
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    Warp& w = my_warp(); w.slot[my_lane()] = pred ? 1 : 0; warp_wait(mask);
    unsigned r = 0; for (int k = 0; k < 32; ++k) if ((mask >> k) & 1u) if (w.slot[k]) r |= 1u << k;
    warp_wait(mask); return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

static inline float bitsf(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }

static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(u64_t x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((u64_t)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0; for (int k = 0; k < 32; ++k) if (x & (1u << k)) r |= 1u << (31 - k); return r; }
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    u64_t v = ((u64_t)y << 32) | x; unsigned int r = 0;
    for (int k = 0; k < 4; ++k) { unsigned sel = (s >> (4 * k)) & 7; r |= (unsigned)((v >> (8 * sel)) & 0xff) << (8 * k); }
    return r; }
static inline unsigned int __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    u64_t v = ((u64_t)hi << 32) | lo; return (unsigned)((v << (s & 31)) >> 32); }
static inline unsigned int __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
    u64_t v = ((u64_t)hi << 32) | lo; unsigned c = s < 32 ? s : 32; return (unsigned)((v << c) >> 32); }
static inline unsigned int __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    u64_t v = ((u64_t)hi << 32) | lo; return (unsigned)(v >> (s & 31)); }
static inline unsigned int __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
    u64_t v = ((u64_t)hi << 32) | lo; unsigned c = s < 32 ? s : 32; return (unsigned)(v >> c); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned a, unsigned b) { return (unsigned)(((u64_t)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline u64_t __umul64hi(u64_t a, u64_t b) { return (u64_t)(((unsigned __int128)a * b) >> 64); }

// GCC may move float ops across fesetround (bug 34678): fence each rounded op with asm barriers
#define RND(mode, expr) ({ int _old = fegetround(); fesetround(mode); asm volatile("" ::: "memory"); \
                           float _r = (expr); asm volatile("" : "+x"(_r) :: "memory"); fesetround(_old); _r; })
#define DEFOPS(sfx, mode) \
  __attribute__((noinline)) static float __fadd_##sfx(volatile float a, volatile float b) { return RND(mode, a + b); } \
  __attribute__((noinline)) static float __fsub_##sfx(volatile float a, volatile float b) { return RND(mode, a - b); } \
  __attribute__((noinline)) static float __fmul_##sfx(volatile float a, volatile float b) { return RND(mode, a * b); } \
  __attribute__((noinline)) static float __fdiv_##sfx(volatile float a, volatile float b) { return RND(mode, a / b); } \
  __attribute__((noinline)) static float __frcp_##sfx(volatile float a) { return RND(mode, 1.0f / a); } \
  __attribute__((noinline)) static float __fsqrt_##sfx(volatile float a) { return RND(mode, sqrtf(a)); } \
  __attribute__((noinline)) static float __fmaf_##sfx(volatile float a, volatile float b, volatile float c) { \
      return RND(mode, fmaf(a, b, c)); }
DEFOPS(rn, FE_TONEAREST) DEFOPS(rz, FE_TOWARDZERO) DEFOPS(rd, FE_DOWNWARD) DEFOPS(ru, FE_UPWARD)

static inline long long sat_ll(double r, double lo, double hi, long long ilo, long long ihi) {
    if (r != r) return 0; if (r <= lo) return ilo; if (r >= hi) return ihi; return (long long)r; }
static inline int __float2int_rn(float x) { return (int)sat_ll(nearbyint((double)x), -2147483648.0, 2147483647.0, -2147483647 - 1, 2147483647); }
static inline int __float2int_rz(float x) { return (int)sat_ll(trunc((double)x), -2147483648.0, 2147483647.0, -2147483647 - 1, 2147483647); }
static inline int __float2int_rd(float x) { return (int)sat_ll(floor((double)x), -2147483648.0, 2147483647.0, -2147483647 - 1, 2147483647); }
static inline int __float2int_ru(float x) { return (int)sat_ll(ceil((double)x), -2147483648.0, 2147483647.0, -2147483647 - 1, 2147483647); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)sat_ll(trunc((double)x), 0.0, 4294967295.0, 0, 4294967295LL); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)sat_ll(nearbyint((double)x), 0.0, 4294967295.0, 0, 4294967295LL); }
static inline long long __float2ll_rz(float x) {
    double r = trunc((double)x); if (r != r) return -9223372036854775807LL - 1;  /* PTX ISA 9.0 */
    if (r >= 9223372036854775807.0) return 9223372036854775807LL;
    if (r <= -9223372036854775808.0) return -9223372036854775807LL - 1; return (long long)r; }
__attribute__((noinline)) static float __uint2float_rz(volatile unsigned x) { return RND(FE_TOWARDZERO, (float)x); }
__attribute__((noinline)) static float __int2float_rd(volatile int x) { return RND(FE_DOWNWARD, (float)x); }
__attribute__((noinline)) static float __int2float_ru(volatile int x) { return RND(FE_UPWARD, (float)x); }
static inline float __saturatef(float x) { if (x != x) return 0.0f; if (x < 0.0f) return 0.0f; if (x > 1.0f) return 1.0f; return x; }
static inline float gpu_fminf(float a, float b) {
    if (a != a) return b; if (b != b) return a;
    if (a == b) return std::signbit(a) ? a : b; return a < b ? a : b; }
static inline float gpu_fmaxf(float a, float b) {
    if (a != a) return b; if (b != b) return a;
    if (a == b) return std::signbit(a) ? b : a; return a > b ? a : b; }
#define fminf gpu_fminf
#define fmaxf gpu_fmaxf

#define ATOMIC(body) { std::lock_guard<std::mutex> _l(g_atomic); body }
template <class T> static inline T atomicAdd(T* p, T v) { ATOMIC(T o = *p; *p = o + v; return o;) }
static inline int atomicAdd(int* p, int v) { ATOMIC(int o = *p; *p = (int)((unsigned)o + (unsigned)v); return o;) }
static inline int atomicSub(int* p, int v) { ATOMIC(int o = *p; *p = (int)((unsigned)o - (unsigned)v); return o;) }
static inline int atomicMax(int* p, int v) { ATOMIC(int o = *p; if (v > o) *p = v; return o;) }
static inline int atomicMin(int* p, int v) { ATOMIC(int o = *p; if (v < o) *p = v; return o;) }
static inline unsigned atomicMax(unsigned* p, unsigned v) { ATOMIC(unsigned o = *p; if (v > o) *p = v; return o;) }
static inline unsigned atomicMin(unsigned* p, unsigned v) { ATOMIC(unsigned o = *p; if (v < o) *p = v; return o;) }
static inline unsigned atomicInc(unsigned* p, unsigned lim) { ATOMIC(unsigned o = *p; *p = (o >= lim) ? 0 : o + 1; return o;) }
static inline unsigned atomicDec(unsigned* p, unsigned lim) { ATOMIC(unsigned o = *p; *p = (o == 0 || o > lim) ? lim : o - 1; return o;) }
template <class T> static inline T atomicCAS(T* p, T cmp, T v) { ATOMIC(T o = *p; if (o == cmp) *p = v; return o;) }
template <class T> static inline T atomicExch(T* p, T v) { ATOMIC(T o = *p; *p = v; return o;) }
static inline unsigned atomicAnd(unsigned* p, unsigned v) { ATOMIC(unsigned o = *p; *p = o & v; return o;) }
static inline unsigned atomicOr(unsigned* p, unsigned v) { ATOMIC(unsigned o = *p; *p = o | v; return o;) }
static inline unsigned atomicXor(unsigned* p, unsigned v) { ATOMIC(unsigned o = *p; *p = o ^ v; return o;) }

static void print_f32(const char* k, const char* o, const float* p, int n) {
    for (int i = 0; i < n; ++i) { uint32_t b; std::memcpy(&b, p + i, 4); std::printf("%s %s %d x%08x\n", k, o, i, b); } }
template <class T> static void print_int(const char* k, const char* o, const T* p, int n) {
    for (int i = 0; i < n; ++i) std::printf("%s %s %d %lld %llu\n", k, o, i, (long long)p[i], (u64_t)p[i]); }
