/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/gemm/gemm.cu, gemm_kernel()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, gemm.cuh) removed
 *   - NI 512 -> 4, NJ 512 -> 6, NK 512 -> 4; _PB_* -> the compile-time sizes (POLYBENCH_LOOP_BOUND's
 *     default); DATA_TYPE float
 *   - launch: 2-D grid (2, 1) of 2-D blocks (4, 4) (was DIM_THREAD_BLOCK 32 x 8): threads outside
 *     (i < NI) && (j < NJ) do nothing; alpha 32412 and beta 2123 as the original's init()
 */
#define NI 4
#define NJ 6
#define NK 4
#define _PB_NI NI
#define _PB_NJ NJ
#define _PB_NK NK
#define DATA_TYPE float

extern "C" __global__ void gemm_kernel(int ni, int nj, int nk, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a,
                                       DATA_TYPE *b, DATA_TYPE *c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < _PB_NI) && (j < _PB_NJ)) {
        c[i * NJ + j] *= beta;
        int k;
        for (k = 0; k < _PB_NK; k++) {
            c[i * NJ + j] += alpha * a[i * NK + k] * b[k * NJ + j];
        }
    }
}
