/*
 * Source: cavazos-lab/PolyBench-ACC, CUDA/stencils/fdtd-2d/fdtd2d.cu, fdtd_step3_kernel()
 * License: PolyBench/GPU (PolyBench-ACC LICENSE, Copyright (C) 2013-2016 University of Delaware; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - NX 2048 -> 6, NY 2048 -> 10; _PB_NX / _PB_NY -> NX / NY; DATA_TYPE float
 *   - launch: 2-D grid (2, 1) of 2-D blocks (8, 8) (was 32 x 8): threads outside (i < NX-1) && (j < NY-1) do nothing
 */
#define NX 6
#define NY 10
#define _PB_NX NX
#define _PB_NY NY
#define DATA_TYPE float

extern "C" __global__ void fdtd_step3_kernel(int nx, int ny, DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, int t)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < (_PB_NX - 1)) && (j < (_PB_NY - 1))) {
        hz[i * NY + j] = hz[i * NY + j] - 0.7f * (ex[i * NY + (j + 1)] - ex[i * NY + j] + ey[(i + 1) * NY + j] - ey[i * NY + j]);
    }
}
