/*
 * Source: NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu,
 *         reduce6<T, blockSize, nIsPow2>(), its struct SharedMemory<T> and SharedMemory<double>
 *         (the sample runs it with -type=double)
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - cooperative groups: cg::sync(cta) -> __syncthreads(); cta.thread_rank() -> threadIdx.x (a 1-D block);
 *     cg::thread_block_tile<32> tile32: tile32.size() -> warpSize, tile32.shfl_down(v, o) ->
 *     __shfl_down_sync(0xffffffff, v, o) (the whole first warp takes that branch)
 *   - #include <cooperative_groups.h> removed (NVRTC runs without headers)
 *   - the template is instantiated by hand: extern "C" wrapper reduce6_double_32() calls
 *     reduce6<double, 32, false>() (reduce6 became a __device__ template)
 *   - SharedMemory<T>: only the double specialisation kept
 *   - launch: 40 doubles (not a power of two: nIsPow2 = false), 1 block of 32 threads (blockSize 32, so
 *     the unrolled shared-memory steps are skipped and the shuffle loop does all the work); dynamic
 *     shared memory 32 doubles
 */
template <class T> struct SharedMemory;

template <> struct SharedMemory<double>
{
    __device__ inline operator double *()
    {
        extern __shared__ double __smem_d[];
        return (double *)__smem_d;
    }

    __device__ inline operator const double *() const
    {
        extern __shared__ double __smem_d[];
        return (double *)__smem_d;
    }
};

template <class T, unsigned int blockSize, bool nIsPow2> __device__ void reduce6(T *g_idata, T *g_odata, unsigned int n)
{
    T *sdata = SharedMemory<T>();

    // perform first level of reduction,
    // reading from global memory, writing to shared memory
    unsigned int tid      = threadIdx.x;
    unsigned int gridSize = blockSize * gridDim.x;

    T mySum = 0;

    // we reduce multiple elements per thread.  The number is determined by the
    // number of active thread blocks (via gridDim).  More blocks will result
    // in a larger gridSize and therefore fewer elements per thread
    if (nIsPow2) {
        unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
        gridSize       = gridSize << 1;

        while (i < n) {
            mySum += g_idata[i];
            // ensure we don't read out of bounds -- this is optimized away for
            // powerOf2 sized arrays
            if ((i + blockSize) < n) {
                mySum += g_idata[i + blockSize];
            }
            i += gridSize;
        }
    }
    else {
        unsigned int i = blockIdx.x * blockSize + threadIdx.x;
        while (i < n) {
            mySum += g_idata[i];
            i += gridSize;
        }
    }

    // each thread puts its local sum into shared memory
    sdata[tid] = mySum;
    __syncthreads();

    // do reduction in shared mem
    if ((blockSize >= 512) && (tid < 256)) {
        sdata[tid] = mySum = mySum + sdata[tid + 256];
    }

    __syncthreads();

    if ((blockSize >= 256) && (tid < 128)) {
        sdata[tid] = mySum = mySum + sdata[tid + 128];
    }

    __syncthreads();

    if ((blockSize >= 128) && (tid < 64)) {
        sdata[tid] = mySum = mySum + sdata[tid + 64];
    }

    __syncthreads();

    if (threadIdx.x < 32) {
        // Fetch final intermediate sum from 2nd warp
        if (blockSize >= 64)
            mySum += sdata[tid + 32];
        // Reduce final warp using shuffle
        for (int offset = warpSize / 2; offset > 0; offset /= 2) {
            mySum += __shfl_down_sync(0xffffffff, mySum, offset);
        }
    }

    // write result for this block to global mem
    if (threadIdx.x == 0)
        g_odata[blockIdx.x] = mySum;
}

extern "C" __global__ void reduce6_double_32(double *g_idata, double *g_odata, unsigned int n)
{
    reduce6<double, 32, false>(g_idata, g_odata, n);
}
