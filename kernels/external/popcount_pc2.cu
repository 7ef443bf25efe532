/*
 * Source: zjin-lcf/HeCBench, src/popcount-cuda/main.cu, pc2()
 * License: BSD-3-Clause (HeCBench LICENSE, Copyright (c) 2020 Argonne National Laboratory, 2020- Oak Ridge National Laboratory)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - launch: 20 64-bit words, 2 blocks of 16 threads (was BLOCK_SIZE 256); the last block is partial
 */
#define m1  0x5555555555555555
#define m2  0x3333333333333333
#define m4  0x0f0f0f0f0f0f0f0f
#define h01 0x0101010101010101

extern "C" __global__ void pc2(const unsigned long *__restrict__ data, int *__restrict__ r, const int length)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= length) return;
    unsigned long x = data[i];
    x -= (x >> 1) & m1;             // put count of each 2 bits into those 2 bits
    x = (x & m2) + ((x >> 2) & m2); // put count of each 4 bits into those 4 bits
    x = (x + (x >> 4)) & m4;        // put count of each 8 bits into those 8 bits
    r[i] = (x * h01) >> 56;         // returns left 8 bits of x + (x<<8) + (x<<16) + (x<<24) + ...
}
