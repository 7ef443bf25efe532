/*
 * Source: NVIDIA/cuda-samples, Samples/5_Domain_Specific/fastWalshTransform/fastWalshTransform_kernel.cuh,
 *         modulateKernel()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added
 *   - launch: N = 48, 2 blocks of 16 threads (a grid-stride loop: 32 threads, so some take 2 elements);
 *     was 128 blocks of 256
 */
extern "C" __global__ void modulateKernel(float *d_A, float *d_B, int N)
{
    int   tid        = blockIdx.x * blockDim.x + threadIdx.x;
    int   numThreads = blockDim.x * gridDim.x;
    float rcpN       = 1.0f / (float)N;

    for (int pos = tid; pos < N; pos += numThreads) {
        d_A[pos] *= d_B[pos] * rcpN;
    }
}
