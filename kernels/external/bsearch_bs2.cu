/*
 * Source: zjin-lcf/HeCBench, src/bsearch-cuda/main.cu, kernel_BS2<T>()
 * License: BSD-3-Clause (HeCBench LICENSE, Copyright (c) 2020 Argonne National Laboratory, 2020- Oak Ridge National Laboratory)
 * Changes:
 *   - the template is instantiated by hand for T = Real_t = float (the original's #define Real_t float):
 *     extern "C" wrapper kernel_BS2_float() calls kernel_BS2<float>() (which became a __device__ template)
 *   - host code and #include lines removed
 *   - launch: a sorted array of n = 12 floats (not a power of two: the r < n test matters), zSize = 20 keys,
 *     2 blocks of 16 threads (was 256); the last block is partial
 */
template <typename T>
__device__ void kernel_BS2(const T *__restrict__ acc_a, const T *__restrict__ acc_z, size_t *__restrict__ acc_r,
                           const size_t zSize, const size_t n)
{
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= zSize) return;
    unsigned nbits = 0;
    while (n >> nbits) nbits++;
    size_t k   = 1ULL << (nbits - 1);
    T      z   = acc_z[i];
    size_t idx = (acc_a[k] <= z) ? k : 0;
    while (k >>= 1) {
        size_t r = idx | k;
        if (r < n && z >= acc_a[r]) {
            idx = r;
        }
    }
    acc_r[i] = idx;
}

extern "C" __global__ void kernel_BS2_float(const float *__restrict__ acc_a, const float *__restrict__ acc_z,
                                            size_t *__restrict__ acc_r, const size_t zSize, const size_t n)
{
    kernel_BS2<float>(acc_a, acc_z, acc_r, zSize, n);
}
