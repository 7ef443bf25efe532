/*
 * Source: NVIDIA/cuda-samples, Samples/6_Performance/transpose/transpose.cu, transposeNoBankConflicts()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added
 *   - cooperative groups: cg::thread_block cta removed, cg::sync(cta) -> __syncthreads()
 *   - TILE_DIM 32 -> 8 and BLOCK_ROWS 16 -> 4 (blocks of 8 x 4 = 32 threads; tile 8 x 9 floats)
 *   - host code, #include <cooperative_groups.h> and <helper_*.h> removed
 *   - launch: a 16 x 8 matrix (width 16, height 8), 2-D grid (2, 1) of 2-D blocks (8, 4)
 */
#define TILE_DIM   8
#define BLOCK_ROWS 4

extern "C" __global__ void transposeNoBankConflicts(float *odata, float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int xIndex   = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex   = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + (yIndex)*width;

    xIndex        = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex        = blockIdx.x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + (yIndex)*height;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    }

    __syncthreads();

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
    }
}
