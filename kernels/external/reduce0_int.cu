/*
 * Source: NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu, reduce0<T>()
 *         and its struct SharedMemory<T>
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - cooperative groups: cg::thread_block cta = cg::this_thread_block() removed, cg::sync(cta) -> __syncthreads()
 *   - #include <cooperative_groups.h> removed (NVRTC runs without headers)
 *   - the template is instantiated by hand for int: extern "C" wrapper reduce0_int() calls reduce0<int>()
 *     (reduce0 became a __device__ template)
 *   - SharedMemory<T>: only the generic operator T*() kept (the double specialisation is unused here)
 *   - launch: 60 ints, 2 blocks of 32 threads (the last block is partial: (i < n) ? g_idata[i] : 0),
 *     dynamic shared memory 32 ints
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

/* This reduction interleaves which threads are active by using the modulo
   operator. */
template <class T> __device__ void reduce0(T *g_idata, T *g_odata, unsigned int n)
{
    T *sdata = SharedMemory<T>();

    // load shared mem
    unsigned int tid = threadIdx.x;
    unsigned int i   = blockIdx.x * blockDim.x + threadIdx.x;

    sdata[tid] = (i < n) ? g_idata[i] : 0;

    __syncthreads();

    // do reduction in shared mem
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        // modulo arithmetic is slow!
        if ((tid % (2 * s)) == 0) {
            sdata[tid] += sdata[tid + s];
        }

        __syncthreads();
    }

    // write result for this block to global mem
    if (tid == 0)
        g_odata[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce0_int(int *g_idata, int *g_odata, unsigned int n) { reduce0<int>(g_idata, g_odata, n); }
