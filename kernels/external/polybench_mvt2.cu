/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/mvt/mvt.cu, mvt_kernel2()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, mvt.cuh) removed
 *   - N 4096 -> 10; _PB_N -> N (POLYBENCH_LOOP_BOUND's default); DATA_TYPE float
 *   - launch: 1 block of 16 threads (was 256); the last 6 threads fail i < _PB_N
 */
#define N 10
#define _PB_N N
#define DATA_TYPE float

extern "C" __global__ void mvt_kernel2(int n, DATA_TYPE *a, DATA_TYPE *x2, DATA_TYPE *y_2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < _PB_N) {
        int j;
        for (j = 0; j < _PB_N; j++) {
            x2[i] += a[j * N + i] * y_2[j];
        }
    }
}
