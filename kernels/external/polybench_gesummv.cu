/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/gesummv/gesummv.cu, gesummv_kernel()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, gesummv.cuh) removed
 *   - N 4096 -> 8; _PB_N -> N (POLYBENCH_LOOP_BOUND's default); DATA_TYPE float
 *   - launch: 1 block of 16 threads (was 256); alpha 43532 and beta 12313 as the original's init()
 */
#define N 8
#define _PB_N N
#define DATA_TYPE float

extern "C" __global__ void gesummv_kernel(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *A, DATA_TYPE *B,
                                          DATA_TYPE *tmp, DATA_TYPE *x, DATA_TYPE *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < _PB_N) {
        int j;
        for (j = 0; j < _PB_N; j++) {
            tmp[i] += A[i * N + j] * x[j];
            y[i] += B[i * N + j] * x[j];
        }
        y[i] = alpha * tmp[i] + beta * y[i];
    }
}
