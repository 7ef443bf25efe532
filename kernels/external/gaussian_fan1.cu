/*
 * Source: yuhc/gpu-rodinia (Rodinia 3.1), cuda/gaussian/gaussian.cu, Fan1()
 * License: Rodinia license (cuda LICENSE, Copyright (c) 2008-2011 University of Virginia; BSD-style)
 * Changes:
 *   - extern "C" added; the commented-out printf lines removed
 *   - launch: Size 6, step t = 1, 1 block of 8 threads (Size-1-t = 4 rows work; the others return early)
 */
extern "C" __global__ void Fan1(float *m_cuda, float *a_cuda, int Size, int t)
{
    if (threadIdx.x + blockIdx.x * blockDim.x >= Size - 1 - t)
        return;
    *(m_cuda + Size * (blockDim.x * blockIdx.x + threadIdx.x + t + 1) + t) =
        *(a_cuda + Size * (blockDim.x * blockIdx.x + threadIdx.x + t + 1) + t) / *(a_cuda + Size * t + t);
}
