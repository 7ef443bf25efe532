/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/stencils/convolution-2d/2DConvolution.cu, convolution2D_kernel()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - NI 4096 -> 5, NJ 4096 -> 6; _PB_NI / _PB_NJ -> NI / NJ; DATA_TYPE float
 *   - launch: 2-D grid (2, 1) of 2-D blocks (4, 5) (was 32 x 8): the border and the threads past NJ fail the test
 */
#define NI 5
#define NJ 6
#define _PB_NI NI
#define _PB_NJ NJ
#define DATA_TYPE float

extern "C" __global__ void convolution2D_kernel(int ni, int nj, DATA_TYPE *A, DATA_TYPE *B)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    DATA_TYPE c11, c12, c13, c21, c22, c23, c31, c32, c33;

    c11 = +0.2;  c21 = +0.5;  c31 = -0.8;
    c12 = -0.3;  c22 = +0.6;  c32 = -0.9;
    c13 = +0.4;  c23 = +0.7;  c33 = +0.10;

    if ((i < _PB_NI - 1) && (j < _PB_NJ - 1) && (i > 0) && (j > 0)) {
        B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c21 * A[(i - 1) * NJ + (j + 0)] + c31 * A[(i - 1) * NJ + (j + 1)]
            + c12 * A[(i + 0) * NJ + (j - 1)] + c22 * A[(i + 0) * NJ + (j + 0)] + c32 * A[(i + 0) * NJ + (j + 1)]
            + c13 * A[(i + 1) * NJ + (j - 1)] + c23 * A[(i + 1) * NJ + (j + 0)] + c33 * A[(i + 1) * NJ + (j + 1)];
    }
}
