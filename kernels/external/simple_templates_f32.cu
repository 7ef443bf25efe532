/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/simpleTemplates/simpleTemplates.cu, testKernel<T>()
 *         and Samples/0_Introduction/simpleTemplates/sharedmem.cuh, struct SharedMemory<T>
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - the template is instantiated by hand for float: extern "C" wrapper testKernel_float() calls
 *     testKernel<float>() (the launch spec names an unmangled kernel); testKernel became a __device__ template
 *   - SharedMemory<T>: only the float specialisation kept (the others are unused here); the
 *     unspecialised template's "extern __device__ void error(void)" trap removed with them
 *   - host code, #include <helper_cuda.h> and "sharedmem.cuh" removed (the struct is inlined here)
 *   - launch: 32 threads, 1 block (was 256 threads); dynamic shared memory 32 floats, as the original
 */
template <typename T> struct SharedMemory;

template <> struct SharedMemory<float>
{
    __device__ float *getPointer()
    {
        extern __shared__ float s_float[];
        return s_float;
    }
};

template <class T> __device__ void testKernel(T *g_idata, T *g_odata)
{
    // Shared mem size is determined by the host app at run time
    SharedMemory<T> smem;
    T              *sdata = smem.getPointer();

    // access thread id
    const unsigned int tid = threadIdx.x;
    // access number of threads in this block
    const unsigned int num_threads = blockDim.x;

    // read in input data from global memory
    sdata[tid] = g_idata[tid];
    __syncthreads();

    // perform some computations
    sdata[tid] = (T)num_threads * sdata[tid];
    __syncthreads();

    // write data to global memory
    g_odata[tid] = sdata[tid];
}

extern "C" __global__ void testKernel_float(float *g_idata, float *g_odata) { testKernel<float>(g_idata, g_odata); }
