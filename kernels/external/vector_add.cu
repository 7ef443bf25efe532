/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/vectorAdd/vectorAdd.cu, vectorAdd()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added (the launch spec names the kernel, not a mangled name)
 *   - host code, #include <cuda_runtime.h> and <helper_cuda.h> removed
 *   - launch: 50 elements in 4 blocks of 16 threads (was 50000 in blocks of 256): the last block
 *     is partial, so the original's if (i < numElements) guard is exercised
 */
extern "C" __global__ void vectorAdd(const float *A, const float *B, float *C, int numElements)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;

    if (i < numElements) {
        C[i] = A[i] + B[i] + 0.0f;
    }
}
