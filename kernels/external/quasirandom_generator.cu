/*
 * Source: NVIDIA/cuda-samples, Samples/5_Domain_Specific/quasirandomGenerator/quasirandomGenerator_kernel.cu,
 *         quasirandomGeneratorKernel(), and quasirandomGenerator_common.h (QRNG_DIMENSIONS, QRNG_RESOLUTION,
 *         INT_SCALE)
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - "static" dropped and extern "C" added (the launch spec names the kernel)
 *   - __constant__ unsigned int c_Table[QRNG_DIMENSIONS][QRNG_RESOLUTION] -> a kernel parameter
 *     const unsigned int *c_Table indexed [dim * QRNG_RESOLUTION + bit] (the launch spec has no
 *     constant-memory upload); the table is a seeded table of 31-bit words, not the Niederreiter
 *     polynomial table the host code computes
 *   - #include <helper_cuda.h> and the common header removed (their defines are written here)
 *   - launch: N = 24 points, 1 block of (8, 3) threads (threadIdx.y is the dimension; was (128, 3) and
 *     N = 2^20; here each thread makes 3 passes of the grid-stride loop), seed 5
 */
#define QRNG_DIMENSIONS 3
#define QRNG_RESOLUTION 31
#define INT_SCALE (1.0f / (float)0x80000001U)
#define MUL(a, b) __umul24(a, b)

extern "C" __global__ void quasirandomGeneratorKernel(float *d_Output, const unsigned int *c_Table, unsigned int seed,
                                                      unsigned int N)
{
    const unsigned int *dimBase = &c_Table[threadIdx.y * QRNG_RESOLUTION];
    unsigned int        tid     = MUL(blockDim.x, blockIdx.x) + threadIdx.x;
    unsigned int        threadN = MUL(blockDim.x, gridDim.x);

    for (unsigned int pos = tid; pos < N; pos += threadN) {
        unsigned int result = 0;
        unsigned int data   = seed + pos;

        for (int bit = 0; bit < QRNG_RESOLUTION; bit++, data >>= 1)
            if (data & 1) {
                result ^= dimBase[bit];
            }

        d_Output[MUL(threadIdx.y, N) + pos] = (float)(result + 1) * INT_SCALE;
    }
}
