/*
 * Source: NVIDIA/cuda-samples, Samples/6_Performance/transpose/transpose.cu, transposeNaive()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added
 *   - TILE_DIM 32 -> 8 and BLOCK_ROWS 16 -> 4 (blocks of 8 x 4 = 32 threads; each thread copies 2 elements)
 *   - host code, #include <cooperative_groups.h> and <helper_*.h> removed
 *   - launch: a 16 x 8 matrix (width 16, height 8), 2-D grid (2, 1) of 2-D blocks (8, 4)
 */
#define TILE_DIM   8
#define BLOCK_ROWS 4

extern "C" __global__ void transposeNaive(float *odata, float *idata, int width, int height)
{
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;

    int index_in  = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        odata[index_out + i] = idata[index_in + i * width];
    }
}
