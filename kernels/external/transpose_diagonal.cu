/*
 * Source: NVIDIA/cuda-samples, Samples/6_Performance/transpose/transpose.cu, transposeDiagonal()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added
 *   - cooperative groups: cg::thread_block cta removed, cg::sync(cta) -> __syncthreads()
 *   - TILE_DIM 32 -> 4 and BLOCK_ROWS 16 -> 2 (blocks of 4 x 2 = 8 threads; tile 4 x 5 floats)
 *   - host code, #include <cooperative_groups.h> and <helper_*.h> removed
 *   - launch: a 12 x 8 matrix (width 12, height 8: not square, so the bid % gridDim.y reordering runs),
 *     2-D grid (3, 2) of 2-D blocks (4, 2)
 */
#define TILE_DIM   4
#define BLOCK_ROWS 2

extern "C" __global__ void transposeDiagonal(float *odata, float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int blockIdx_x, blockIdx_y;

    // do diagonal reordering
    if (width == height) {
        blockIdx_y = blockIdx.x;
        blockIdx_x = (blockIdx.x + blockIdx.y) % gridDim.x;
    }
    else {
        int bid    = blockIdx.x + gridDim.x * blockIdx.y;
        blockIdx_y = bid % gridDim.y;
        blockIdx_x = ((bid / gridDim.y) + blockIdx_y) % gridDim.x;
    }

    // from here on the code is same as previous kernel except blockIdx_x replaces
    // blockIdx.x and similarly for y

    int xIndex   = blockIdx_x * TILE_DIM + threadIdx.x;
    int yIndex   = blockIdx_y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + (yIndex)*width;

    xIndex        = blockIdx_y * TILE_DIM + threadIdx.x;
    yIndex        = blockIdx_x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + (yIndex)*height;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    }

    __syncthreads();

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
    }
}
