/*
 * Source: zjin-lcf/HeCBench, src/popcount-cuda/main.cu, pc3()
 * License: BSD-3-Clause (HeCBench LICENSE, Copyright (c) 2020 Argonne National Laboratory, 2020- Oak Ridge National Laboratory)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - launch: 12 64-bit words with 0..16 set bits (the loop runs once per set bit), 1 block of 16 threads
 *     (was BLOCK_SIZE 256); the last 4 threads return early
 */
extern "C" __global__ void pc3(const unsigned long *__restrict__ data, int *__restrict__ r, const int length)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= length) return;
    char          count;
    unsigned long x = data[i];
    for (count = 0; x; count++) x &= x - 1;
    r[i] = count;
}
