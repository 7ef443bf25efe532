/*
 * Source: NVIDIA/cuda-samples, Samples/5_Domain_Specific/fastWalshTransform/fastWalshTransform_kernel.cuh,
 *         fwtBatch1Kernel()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; #include <cooperative_groups.h> removed
 *   - cooperative groups: cg::thread_block cta removed, cg::sync(cta) -> __syncthreads()
 *   - launch: 2 blocks (a batch of 2 vectors) of 8 threads, log2N = 5 (N = 32: odd, so the final radix-2
 *     stage runs), dynamic shared memory 32 floats (was N = 2^ELEMENTARY_LOG2SIZE = 2048 per block)
 */
extern "C" __global__ void fwtBatch1Kernel(float *d_Output, float *d_Input, int log2N)
{
    const int N    = 1 << log2N;
    const int base = blockIdx.x << log2N;

    //(2 ** 11) * 4 bytes == 8KB -- maximum s_data[] size for G80
    extern __shared__ float s_data[];
    float                  *d_Src = d_Input + base;
    float                  *d_Dst = d_Output + base;

    for (int pos = threadIdx.x; pos < N; pos += blockDim.x) {
        s_data[pos] = d_Src[pos];
    }

    // Main radix-4 stages
    const int pos = threadIdx.x;

    for (int stride = N >> 2; stride > 0; stride >>= 2) {
        int lo = pos & (stride - 1);
        int i0 = ((pos - lo) << 2) + lo;
        int i1 = i0 + stride;
        int i2 = i1 + stride;
        int i3 = i2 + stride;

        __syncthreads();
        float D0 = s_data[i0];
        float D1 = s_data[i1];
        float D2 = s_data[i2];
        float D3 = s_data[i3];

        float T;
        T          = D0;
        D0         = D0 + D2;
        D2         = T - D2;
        T          = D1;
        D1         = D1 + D3;
        D3         = T - D3;
        T          = D0;
        s_data[i0] = D0 + D1;
        s_data[i1] = T - D1;
        T          = D2;
        s_data[i2] = D2 + D3;
        s_data[i3] = T - D3;
    }

    // Do single radix-2 stage for odd power of two
    if (log2N & 1) {
        __syncthreads();

        for (int pos = threadIdx.x; pos < N / 2; pos += blockDim.x) {
            int i0 = pos << 1;
            int i1 = i0 + 1;

            float D0   = s_data[i0];
            float D1   = s_data[i1];
            s_data[i0] = D0 + D1;
            s_data[i1] = D0 - D1;
        }
    }

    __syncthreads();

    for (int pos = threadIdx.x; pos < N; pos += blockDim.x) {
        d_Dst[pos] = s_data[pos];
    }
}
