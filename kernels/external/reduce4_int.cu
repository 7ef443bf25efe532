/*
 * Source: NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu,
 *         reduce4<T, blockSize>() and its struct SharedMemory<T>
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - cooperative groups: cg::sync(cta) -> __syncthreads(); cta.thread_rank() -> threadIdx.x (a 1-D block);
 *     cg::thread_block_tile<32> tile32: tile32.size() -> warpSize, tile32.shfl_down(v, o) ->
 *     __shfl_down_sync(0xffffffff, v, o) (the whole first warp takes that branch)
 *   - #include <cooperative_groups.h> removed (NVRTC runs without headers)
 *   - the template is instantiated by hand: extern "C" wrapper reduce4_int_64() calls reduce4<int, 64>()
 *     (reduce4 became a __device__ template)
 *   - launch: 200 ints, 2 blocks of 64 threads (each thread adds two elements; the second block is
 *     partial), dynamic shared memory 64 ints
 */
template <class T> struct SharedMemory
{
    __device__ inline operator T *()
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }

    __device__ inline operator const T *() const
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
};

template <class T, unsigned int blockSize> __device__ void reduce4(T *g_idata, T *g_odata, unsigned int n)
{
    T *sdata = SharedMemory<T>();

    // perform first level of reduction,
    // reading from global memory, writing to shared memory
    unsigned int tid = threadIdx.x;
    unsigned int i   = blockIdx.x * (blockDim.x * 2) + threadIdx.x;

    T mySum = (i < n) ? g_idata[i] : 0;

    if (i + blockSize < n)
        mySum += g_idata[i + blockSize];

    sdata[tid] = mySum;
    __syncthreads();

    // do reduction in shared mem
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) {
            sdata[tid] = mySum = mySum + sdata[tid + s];
        }

        __syncthreads();
    }

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

extern "C" __global__ void reduce4_int_64(int *g_idata, int *g_odata, unsigned int n)
{
    reduce4<int, 64>(g_idata, g_odata, n);
}
