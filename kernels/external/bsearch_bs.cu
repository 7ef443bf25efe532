/*
 * Source: zjin-lcf/HeCBench, src/bsearch-cuda/main.cu, kernel_BS<T>()
 * License: BSD-3-Clause (HeCBench LICENSE, Copyright (c) 2020 Argonne National Laboratory, 2020- Oak Ridge National Laboratory)
 * Changes:
 *   - the template is instantiated by hand for T = Real_t = float (the original's #define Real_t float):
 *     extern "C" wrapper kernel_BS_float() calls kernel_BS<float>() (which became a __device__ template)
 *   - host code and #include lines removed
 *   - launch: a sorted array of n = 16 floats, zSize = 20 keys (below, between, equal to and above the
 *     elements), 2 blocks of 16 threads (was 256); the last block is partial
 */
template <typename T>
__device__ void kernel_BS(const T *__restrict__ acc_a, const T *__restrict__ acc_z, size_t *__restrict__ acc_r,
                          const size_t zSize, const size_t n)
{
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= zSize) return;
    T      z    = acc_z[i];
    size_t low  = 0;
    size_t high = n;
    while (high - low > 1) {
        size_t mid = low + (high - low) / 2;
        if (z < acc_a[mid])
            high = mid;
        else
            low = mid;
    }
    acc_r[i] = low;
}

extern "C" __global__ void kernel_BS_float(const float *__restrict__ acc_a, const float *__restrict__ acc_z,
                                           size_t *__restrict__ acc_r, const size_t zSize, const size_t n)
{
    kernel_BS<float>(acc_a, acc_z, acc_r, zSize, n);
}
