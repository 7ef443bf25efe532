/*
 * Source: vetter/shoc, src/cuda/level1/spmv/Spmv.cu, spmv_csr_scalar_kernel<fpType, texReader>() and
 *         struct texReaderSP
 * License: BSD-3-Clause (SHOC LICENSE.md, Copyright (c) 2011 UT-Battelle, LLC)
 * Changes:
 *   - texture<float, 1> vecTex and tex1Dfetch() -> a reader functor over a global pointer: struct
 *     globalReaderSP { const float *vec; operator()(idx) returns vec[idx] } (texture references need the
 *     runtime headers and a texture binding the launch spec cannot make); the reader is built from a new
 *     kernel parameter vec instead of being default-constructed
 *   - the template is instantiated by hand: extern "C" wrapper spmv_csr_scalar_float() calls
 *     spmv_csr_scalar_kernel<float, globalReaderSP>() (which became a __device__ template)
 *   - launch: a 12 x 12 CSR matrix with 40 nonzeros (rows of 0..7 entries), 1 block of 16 threads (was
 *     BLOCK_SIZE 128); the last 4 threads fail myRow < dim
 */
struct globalReaderSP {
    const float *vec;
    __device__ __forceinline__ float operator()(const int idx) const { return vec[idx]; }
};

template <typename fpType, typename texReader>
__device__ void spmv_csr_scalar_kernel(const fpType *__restrict__ val, const int *__restrict__ cols,
                                       const int *__restrict__ rowDelimiters, const int dim,
                                       fpType *__restrict__ out, texReader vecTexReader)
{
    int myRow = blockIdx.x * blockDim.x + threadIdx.x;

    if (myRow < dim) {
        fpType t     = 0.0f;
        int    start = rowDelimiters[myRow];
        int    end   = rowDelimiters[myRow + 1];
        for (int j = start; j < end; j++) {
            int col = cols[j];
            t += val[j] * vecTexReader(col);
        }
        out[myRow] = t;
    }
}

extern "C" __global__ void spmv_csr_scalar_float(const float *__restrict__ val, const int *__restrict__ cols,
                                                 const int *__restrict__ rowDelimiters, const int dim,
                                                 float *__restrict__ out, const float *__restrict__ vec)
{
    globalReaderSP reader = {vec};
    spmv_csr_scalar_kernel<float, globalReaderSP>(val, cols, rowDelimiters, dim, out, reader);
}
