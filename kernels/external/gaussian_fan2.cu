/*
 * Source: yuhc/gpu-rodinia (Rodinia 3.1), cuda/gaussian/gaussian.cu, Fan2()
 * License: Rodinia license (cuda LICENSE, Copyright (c) 2008-2011 University of Virginia; BSD-style)
 * Changes:
 *   - extern "C" added; the commented-out printf lines removed
 *   - launch: Size 6, step t = 1, 2-D grid (2, 2) of 2-D blocks (4, 4) (was BLOCK_SIZE_XY 4 too); threads
 *     outside the (Size-1-t) x (Size-t) update region return early
 */
extern "C" __global__ void Fan2(float *m_cuda, float *a_cuda, float *b_cuda, int Size, int j1, int t)
{
    if (threadIdx.x + blockIdx.x * blockDim.x >= Size - 1 - t)
        return;
    if (threadIdx.y + blockIdx.y * blockDim.y >= Size - t)
        return;

    int xidx = blockIdx.x * blockDim.x + threadIdx.x;
    int yidx = blockIdx.y * blockDim.y + threadIdx.y;

    a_cuda[Size * (xidx + 1 + t) + (yidx + t)] -= m_cuda[Size * (xidx + 1 + t) + t] * a_cuda[Size * t + (yidx + t)];
    if (yidx == 0) {
        b_cuda[xidx + 1 + t] -= m_cuda[Size * (xidx + 1 + t) + (yidx + t)] * b_cuda[t];
    }
}
