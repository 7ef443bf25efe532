/*
 * Source: vetter/shoc, src/cuda/level1/triad/Triad.cu, triad()
 * License: BSD-3-Clause (SHOC LICENSE.md, Copyright (c) 2011 UT-Battelle, LLC)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - launch: 48 floats, 3 blocks of 16 threads (was blocks of 128..16384 threads over MBs), s = 1.75
 */
extern "C" __global__ void triad(float *A, float *B, float *C, float s)
{
    int gid = threadIdx.x + (blockIdx.x * blockDim.x);
    C[gid]  = A[gid] + s * B[gid];
}
