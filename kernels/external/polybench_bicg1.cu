/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/bicg/bicg.cu, bicg_kernel1()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, bicg.cuh) removed
 *   - NX 4096 -> 8, NY 4096 -> 12; _PB_NX / _PB_NY -> NX / NY (POLYBENCH_LOOP_BOUND's default); DATA_TYPE float
 *   - launch: 1 block of 16 threads (was 256); the last 4 threads fail j < _PB_NY
 */
#define NX 8
#define NY 12
#define _PB_NX NX
#define _PB_NY NY
#define DATA_TYPE float

extern "C" __global__ void bicg_kernel1(int nx, int ny, DATA_TYPE *A, DATA_TYPE *r, DATA_TYPE *s)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;

    if (j < _PB_NY) {
        s[j] = 0.0f;

        int i;
        for (i = 0; i < _PB_NX; i++) {
            s[j] += r[i] * A[i * NY + j];
        }
    }
}
