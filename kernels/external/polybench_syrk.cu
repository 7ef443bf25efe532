/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/linear-algebra/kernels/syrk/syrk.cu, syrk_kernel()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines (polybench.h, syrk.cuh) removed
 *   - NI 1024 -> 4, NJ 1024 -> 4; _PB_* -> the compile-time sizes; DATA_TYPE float
 *   - launch: 2-D grid (1, 2) of 2-D blocks (4, 3) (was 32 x 8): threads outside (i < NI) && (j < NI) do
 *     nothing; alpha 32412 and beta 2123 as the original's init()
 */
#define NI 4
#define NJ 4
#define _PB_NI NI
#define _PB_NJ NJ
#define DATA_TYPE float

extern "C" __global__ void syrk_kernel(int ni, int nj, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *c)
{
    /*  C := alpha*A*A' + beta*C */
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < _PB_NI) && (j < _PB_NI)) {
        c[i * NI + j] *= beta;
        int k;
        for (k = 0; k < _PB_NJ; k++) {
            c[i * NI + j] += alpha * a[i * NJ + k] * a[j * NJ + k];
        }
    }
}
