/*
 * Source: zjin-lcf/HeCBench, src/ntt-cuda/modP.h, ntt8(), _add_modP(), _sub_modP(), _ls_modP() and
 *         _uint96_modP() .. _uint224_modP() (Wei Dai's CUDA NTT over the prime 2^64 - 2^32 + 1)
 * License: MIT (src/ntt-cuda/LICENSE, Copyright (c) 2015 Wei Dai)
 * Changes:
 *   - a kernel written around ntt8() (main.cu's kernels run 64k-point transforms in 512-word shared
 *     buffers): extern "C" ntt8_kernel() loads 8 residues per thread, runs ntt8() in registers, stores them
 *   - ESS (__inline__ __device__) kept; the #ifdef _OPENMP / omp declare target lines removed;
 *     _mul_modP() removed (unused by ntt8)
 *   - "typedef unsigned long int uint64" -> "typedef unsigned long long uint64" (the same 64 bits on
 *     the Linux targets the original builds for; the launch spec's u64)
 *   - launch: 4 transforms, 1 block of 4 threads (was a 64k-point NTT)
 * Note: the word reductions are kept exactly as written, including the borrow _uint96_modP and
 *   _uint128_modP skip when x[0] < x[2] (x[3]) and x[1] >= 1; with such words _ls_modP(x, l) is not
 *   x * 2^l mod p, so two of the four transforms here are not the exact DFT mod p (the expected values
 *   follow the code, tools/external/k_hecbench.py)
 */
#define ESS __inline__ __device__

#define valP 0xffffffff00000001UL // special prime number for NTT conversions
#define uint32Max 0xffffffffU     // maximum value of an unsigned integer

typedef unsigned int       uint32; // 32-bit unsigned integer
typedef unsigned long long uint64; // 64-bit unsigned integer

ESS
void _uint96_modP (uint32 *x) {
  uint64 s = (uint64)x[1] + (uint64)x[2];
  int b = (s > 4294967295UL) ? 1 : 0;
  x[1] = (uint32) s; 
  if (x[0] < x[2]) {
    if (x[1] < 1) {
      x[1]--;
      b--;
    }
  }
  x[0] -= x[2];
  if (b == 1) {
    s = (uint64)x[0] + 4294967295UL;
    if (s > 4294967295UL) x[1]++;
    x[0] = (uint32) s; 
  }
}

ESS
void _uint128_modP (uint32 *x) {
  _uint96_modP (x);
  int b = 0;
  if (x[0] < x[3])  {
    if (x[1] < 1) {
      x[1]--;
      b = -1;
    }
  }
  x[0] -= x[3];
  if (b == -1) {
    if (x[0] < 4294967295U) x[1]--;
    x[0] -= 4294967295U;
  }
}

ESS
void _uint160_modP (uint32 *x) {
  _uint128_modP (x);
  int b = (x[1] < x[4]) ? -1 : 0;
  x[1] -= x[4];
  if (b == -1) {
    if (x[0] < 4294967295U) x[1]--;
    x[0] -= 4294967295U;
  }
}

ESS
void _uint192_modP (uint32 *x) {
  _uint160_modP (x);
  uint64 s = (uint64)x[0] + (uint64)x[5];
  x[0] = (uint32) s; 
  int c = (s > 4294967295UL) ? 1 : 0;
  s = (uint64)x[1] + (uint64)c;
  int b = (s > 4294967295UL) ? 1 : 0;
  x[1] = (uint32)s;
  if (x[1] < x[5]) b--;
  x[1] -= x[5];
  if (b == -1) {
    if (x[0] < 4294967295U) x[1]--;
    x[0] -= 4294967295U;
  }
}

ESS
void _uint224_modP (uint32 *x) {
  _uint192_modP (x);
  uint64 s = (uint64)x[0] + (uint64)x[6];
  int c = (s > 4294967295UL) ? 1 : 0;
  x[0] = (uint32) s; 
  s = (uint64)x[1] + (uint64)c;
  x[1] = (uint32) s;
  c = (s > 4294967295UL) ? 1 : 0;
  if (c == 1) {
    s = (uint64)x[0] + 4294967295UL; 
    if (s > 4294967295UL) x[1]++;
    x[0] = (uint32) s;
  }
}

ESS
uint64 _ls_modP(uint64 x, int l) {
  uint64 tx = x;
  uint32 buff[7];
  switch(l){
    // 2 words
    case (0):
      buff[0] = (uint32)tx;
      buff[1] = (uint32)(tx>>32);
      break;
      // 3 words
    case (3):
    case (6):
    case (9):
    case (12):
    case (15):
    case (18):
    case (21):
    case (24):
    case (27):
    case (30):
      buff[2] = (uint32)(tx>>(64-l));
      buff[1] = (uint32)(tx>>(32-l));
      buff[0] = (uint32)(tx<<l);
      _uint96_modP(buff);
      break;
      // 4 words
    case (36):
    case (42):
    case (45):
    case (48):
    case (54):
    case (60):
    case (63):
      buff[3] = (uint32)(tx>>(96-l));
      buff[2] = (uint32)(tx>>(64-l));
      buff[1] = (uint32)(tx<<(l-32));
      buff[0] = 0;
      _uint128_modP(buff);
      break;
      // 5 words
    case (72):
    case (75):
    case (84):
    case (90):
      buff[4] = (uint32)(tx>>(128-l));
      buff[3] = (uint32)(tx>>(96-l));
      buff[2] = (uint32)(tx<<(l-64));
      buff[1] = 0;
      buff[0] = 0;
      _uint160_modP(buff);
      break;
      // 6 words
    case (105):
    case (108):
    case (126):
      buff[5] = (uint32)(tx>>(160-l));
      buff[4] = (uint32)(tx>>(128-l));
      buff[3] = (uint32)(tx<<(l-96));
      buff[2] = 0;
      buff[1] = 0;
      buff[0] = 0;
      _uint192_modP(buff);
      break;
      // 7 words
    case (147):
      buff[6] = (uint32)(tx>>(192-l));
      buff[5] = (uint32)(tx>>(160-l));
      buff[4] = (uint32)(tx<<(l-128));
      buff[3] = 0;
      buff[2] = 0;
      buff[1] = 0;
      buff[0] = 0;
      _uint224_modP(buff);
      break;
  }
  if (*(uint64 *)buff > valP)
    *(uint64 *)buff -= valP;
  return *(uint64 *)buff;
}

ESS
uint64 _add_modP(uint64 x, uint64 y) {
  uint64 ret;
  ret = x+y;
  if (ret < x) ret += uint32Max;
  if (ret >= valP) ret -= valP;
  return ret;
}

ESS
uint64 _sub_modP(uint64 x, uint64 y) {
   uint64 ret;
  ret = x-y;
  if (ret > x) ret -= uint32Max;
  return ret;
}

// 8-point NTT
ESS
void ntt8(uint64 *x) {
  uint64 s[8], temp;
  s[0] = _add_modP(x[0], x[4]);
  s[1] = _sub_modP(x[0], x[4]);
  s[2] = _add_modP(x[2], x[6]);
  s[3] = _sub_modP(x[2], x[6]);
  s[4] = _add_modP(x[1], x[5]);
  s[5] = _sub_modP(x[1], x[5]);
  s[6] = _add_modP(x[3], x[7]);
  s[7] = _sub_modP(x[3], x[7]);
  x[0] = _add_modP(s[0], s[2]);
  x[2] = _sub_modP(s[0], s[2]);
  temp = _ls_modP(s[3], 48);
  x[1] = _add_modP(s[1], temp);
  x[3] = _sub_modP(s[1], temp);
  x[4] = _add_modP(s[4], s[6]);
  x[6] = _sub_modP(s[4], s[6]);
  temp = _ls_modP(s[7], 48);
  x[5] = _add_modP(s[5], temp);
  x[7] = _sub_modP(s[5], temp);
  s[0] = _add_modP(x[0], x[4]);
  s[4] = _sub_modP(x[0], x[4]);
  temp = _ls_modP(x[5], 24);
  s[1] = _add_modP(x[1], temp);
  s[5] = _sub_modP(x[1], temp);
  temp = _ls_modP(x[6], 48);
  s[2] = _add_modP(x[2], temp);
  s[6] = _sub_modP(x[2], temp);
  temp = _ls_modP(x[7], 72);
  s[3] = _add_modP(x[3], temp);
  s[7] = _sub_modP(x[3], temp);
  x[0] = s[0];
  x[1] = s[1];
  x[2] = s[2];
  x[3] = s[3];
  x[4] = s[4];
  x[5] = s[5];
  x[6] = s[6];
  x[7] = s[7];
}

extern "C" __global__ void ntt8_kernel(const uint64 *__restrict__ src, uint64 *__restrict__ dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint64 samples[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            samples[k] = src[8 * i + k];
        ntt8(samples);
#pragma unroll
        for (int k = 0; k < 8; k++)
            dst[8 * i + k] = samples[k];
    }
}
