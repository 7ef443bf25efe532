/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/matrixMul/matrixMul.cu, MatrixMulCUDA<BLOCK_SIZE>()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - the template is instantiated by hand: extern "C" wrapper MatrixMulCUDA_4() calls MatrixMulCUDA<4>()
 *     (MatrixMulCUDA became a __device__ template; BLOCK_SIZE 4 instead of 16 or 32)
 *   - host code, #include <cuda_runtime.h>, <cooperative_groups.h> and <helper_*.h> removed
 *   - launch: C (4 x 8) = A (4 x 4, wA 4) * B (4 x 8, wB 8), 2-D grid (2, 1) of 2-D blocks (4, 4)
 */
template <int BLOCK_SIZE> __device__ void MatrixMulCUDA(float *C, float *A, float *B, int wA, int wB)
{
    // Block index
    int bx = blockIdx.x;
    int by = blockIdx.y;

    // Thread index
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    // Index of the first sub-matrix of A processed by the block
    int aBegin = wA * BLOCK_SIZE * by;

    // Index of the last sub-matrix of A processed by the block
    int aEnd = aBegin + wA - 1;

    // Step size used to iterate through the sub-matrices of A
    int aStep = BLOCK_SIZE;

    // Index of the first sub-matrix of B processed by the block
    int bBegin = BLOCK_SIZE * bx;

    // Step size used to iterate through the sub-matrices of B
    int bStep = BLOCK_SIZE * wB;

    // Csub is used to store the element of the block sub-matrix
    // that is computed by the thread
    float Csub = 0;

    // Loop over all the sub-matrices of A and B
    // required to compute the block sub-matrix
    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
        // Declaration of the shared memory array As used to
        // store the sub-matrix of A
        __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];

        // Declaration of the shared memory array Bs used to
        // store the sub-matrix of B
        __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];

        // Load the matrices from device memory
        // to shared memory; each thread loads
        // one element of each matrix
        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[b + wB * ty + tx];

        // Synchronize to make sure the matrices are loaded
        __syncthreads();

        // Multiply the two matrices together;
        // each thread computes one element
        // of the block sub-matrix
#pragma unroll

        for (int k = 0; k < BLOCK_SIZE; ++k) {
            Csub += As[ty][k] * Bs[k][tx];
        }

        // Synchronize to make sure that the preceding
        // computation is done before loading two new
        // sub-matrices of A and B in the next iteration
        __syncthreads();
    }

    // Write the block sub-matrix to device memory;
    // each thread writes one element
    int c               = wB * BLOCK_SIZE * by + BLOCK_SIZE * bx;
    C[c + wB * ty + tx] = Csub;
}

extern "C" __global__ void MatrixMulCUDA_4(float *C, float *A, float *B, int wA, int wB)
{
    MatrixMulCUDA<4>(C, A, B, wA, wB);
}
