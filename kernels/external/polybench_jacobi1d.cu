/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/stencils/jacobi-1d-imper/jacobi1D.cu, runJacobiCUDA_kernel1()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - renamed runJacobiCUDA_kernel1 -> jacobi1d_kernel1 and extern "C" added (jacobi2D.cu has a kernel of the
 *     same name); host code and #include lines removed
 *   - N 4096 -> 40; _PB_N -> N; DATA_TYPE float
 *   - launch: 3 blocks of 16 threads (was 256): the edges and the last 8 threads fail (i > 1) && (i < N-1)
 */
#define N 40
#define _PB_N N
#define DATA_TYPE float

extern "C" __global__ void jacobi1d_kernel1(int n, DATA_TYPE *A, DATA_TYPE *B)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if ((i > 1) && (i < (_PB_N - 1))) {
        B[i] = 0.33333f * (A[i - 1] + A[i] + A[i + 1]);
    }
}
