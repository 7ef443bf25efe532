/*
 * Source: NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu, reduce2<T>()
 *         and its struct SharedMemory<T>
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - cooperative groups: cg::thread_block cta = cg::this_thread_block() removed, cg::sync(cta) -> __syncthreads()
 *   - #include <cooperative_groups.h> removed (NVRTC runs without headers)
 *   - the template is instantiated by hand for float: extern "C" wrapper reduce2_float() calls reduce2<float>()
 *     (reduce2 became a __device__ template)
 *   - SharedMemory<T>: only the generic operator T*() kept
 *   - launch: 40 floats, 2 blocks of 32 threads (the last block is partial), dynamic shared memory 32 floats
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

/*
    This version uses sequential addressing -- no divergence or bank conflicts.
*/
template <class T> __device__ void reduce2(T *g_idata, T *g_odata, unsigned int n)
{
    T *sdata = SharedMemory<T>();

    // load shared mem
    unsigned int tid = threadIdx.x;
    unsigned int i   = blockIdx.x * blockDim.x + threadIdx.x;

    sdata[tid] = (i < n) ? g_idata[i] : 0;

    __syncthreads();

    // do reduction in shared mem
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }

        __syncthreads();
    }

    // write result for this block to global mem
    if (tid == 0)
        g_odata[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce2_float(float *g_idata, float *g_odata, unsigned int n)
{
    reduce2<float>(g_idata, g_odata, n);
}
