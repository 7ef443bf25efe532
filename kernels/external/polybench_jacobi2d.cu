/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/stencils/jacobi-2d-imper/jacobi2D.cu, runJacobiCUDA_kernel1()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - renamed runJacobiCUDA_kernel1 -> jacobi2d_kernel1 and extern "C" added (jacobi1D.cu has a kernel of the
 *     same name); host code and #include lines removed
 *   - N 1024 -> 6; _PB_N -> N; DATA_TYPE float
 *   - launch: 2-D grid (2, 2) of 2-D blocks (4, 4) (was 32 x 8): the border and the threads past N fail the test
 */
#define N 6
#define _PB_N N
#define DATA_TYPE float

extern "C" __global__ void jacobi2d_kernel1(int n, DATA_TYPE *A, DATA_TYPE *B)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;

    if ((i >= 1) && (i < (_PB_N - 1)) && (j >= 1) && (j < (_PB_N - 1))) {
        B[i * N + j] = 0.2f * (A[i * N + j] + A[i * N + (j - 1)] + A[i * N + (1 + j)] + A[(1 + i) * N + j] + A[(i - 1) * N + j]);
    }
}
