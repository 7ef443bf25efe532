/*
 * Source: vetter/shoc, src/cuda/level1/spmv/Spmv.cu, spmv_csr_vector_kernel<fpType, texReader>() and
 *         struct texReaderSP
 * License: BSD-3-Clause (SHOC LICENSE.md, Copyright (c) 2011 UT-Battelle, LLC)
 * Changes:
 *   - texture<float, 1> vecTex and tex1Dfetch() -> a reader functor over a global pointer: struct
 *     globalReaderSP { const float *vec; operator()(idx) returns vec[idx] } (texture references need the
 *     runtime headers and a texture binding the launch spec cannot make); the reader is built from a new
 *     kernel parameter vec instead of being default-constructed
 *   - the template is instantiated by hand: extern "C" wrapper spmv_csr_vector_float() calls
 *     spmv_csr_vector_kernel<float, globalReaderSP>() (which became a __device__ template)
 *   - BLOCK_SIZE 128 -> 64 (the shared partialSums array; 2 warps, one row each)
 *   - the warp-synchronous reduction over the volatile partialSums is kept as written (no __syncwarp,
 *     as the original; it relies on a warp's lanes running in step, which both qwenGPU engines do)
 *   - launch: a 4 x 48 CSR matrix (rows of 3, 33, 0 and 20 entries: a row longer than a warp and an empty
 *     one), 2 blocks of 64 threads
 */
#define BLOCK_SIZE 64

struct globalReaderSP {
    const float *vec;
    __device__ __forceinline__ float operator()(const int idx) const { return vec[idx]; }
};

template <typename fpType, typename texReader>
__device__ void spmv_csr_vector_kernel(const fpType *__restrict__ val, const int *__restrict__ cols,
                                       const int *__restrict__ rowDelimiters, const int dim,
                                       fpType *__restrict__ out, texReader vecTexReader)
{
    // Thread ID in block
    int t = threadIdx.x;
    // Thread ID within warp
    int id = t & (warpSize - 1);
    int warpsPerBlock = blockDim.x / warpSize;
    // One row per warp
    int myRow = (blockIdx.x * warpsPerBlock) + (t / warpSize);

    __shared__ volatile fpType partialSums[BLOCK_SIZE];

    if (myRow < dim) {
        int    warpStart = rowDelimiters[myRow];
        int    warpEnd   = rowDelimiters[myRow + 1];
        fpType mySum     = 0;
        for (int j = warpStart + id; j < warpEnd; j += warpSize) {
            int col = cols[j];
            mySum += val[j] * vecTexReader(col);
        }
        partialSums[t] = mySum;

        // Reduce partial sums
        if (id < 16) partialSums[t] += partialSums[t + 16];
        if (id < 8) partialSums[t] += partialSums[t + 8];
        if (id < 4) partialSums[t] += partialSums[t + 4];
        if (id < 2) partialSums[t] += partialSums[t + 2];
        if (id < 1) partialSums[t] += partialSums[t + 1];

        // Write result
        if (id == 0) {
            out[myRow] = partialSums[t];
        }
    }
}

extern "C" __global__ void spmv_csr_vector_float(const float *__restrict__ val, const int *__restrict__ cols,
                                                 const int *__restrict__ rowDelimiters, const int dim,
                                                 float *__restrict__ out, const float *__restrict__ vec)
{
    globalReaderSP reader = {vec};
    spmv_csr_vector_kernel<float, globalReaderSP>(val, cols, rowDelimiters, dim, out, reader);
}
