/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/atax/atax.cu, atax_kernel1()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, atax.cuh) removed
 *   - NX 4096 -> 12, NY 4096 -> 8; _PB_NX / _PB_NY -> NX / NY (POLYBENCH_LOOP_BOUND's default, compile-time
 *     bounds); DATA_TYPE float as the default
 *   - launch: 1 block of 16 threads (was DIM_THREAD_BLOCK_X 256); the last 4 threads fail i < _PB_NX
 */
#define NX 12
#define NY 8
#define _PB_NX NX
#define _PB_NY NY
#define DATA_TYPE float

extern "C" __global__ void atax_kernel1(int nx, int ny, DATA_TYPE *A, DATA_TYPE *x, DATA_TYPE *tmp)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < _PB_NX) {
        tmp[i] = 0;
        int j;
        for (j = 0; j < _PB_NY; j++) {
            tmp[i] += A[i * NY + j] * x[j];
        }
    }
}
