/*
 * Source: NVIDIA/cuda-samples, Samples/2_Concepts_and_Techniques/histogram/histogram256.cu,
 *         histogram256Kernel(), addByte(), addWord(), and histogram_common.h (its defines)
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; cooperative groups: cg::thread_block cta removed, cg::sync(cta) -> __syncthreads()
 *   - #include <cooperative_groups.h>, <helper_cuda.h> and histogram_common.h removed (its defines are
 *     written here; "typedef unsigned int uint" too)
 *   - HISTOGRAM256_BIN_COUNT 256 -> 64 and WARP_COUNT 6 -> 2 (2 warps x 64 bins = 128 words of shared
 *     memory); every input byte is below 64, so addByte's s_WarpHist + data stays inside a warp's bins
 *   - launch: 2 blocks of 64 threads (HISTOGRAM256_THREADBLOCK_SIZE = WARP_COUNT * WARP_SIZE) over 80 words
 *     (320 bytes; was 240 blocks over 64 MB): the grid-stride loop's one pass is partial; one 64-bin
 *     partial histogram per block
 */
typedef unsigned int uint;

#define HISTOGRAM256_BIN_COUNT 64
#define UINT_BITS 32
#define LOG2_WARP_SIZE 5U
#define WARP_SIZE (1U << LOG2_WARP_SIZE)
#define WARP_COUNT 2
#define HISTOGRAM256_THREADBLOCK_SIZE (WARP_COUNT * WARP_SIZE)
#define HISTOGRAM256_THREADBLOCK_MEMORY (WARP_COUNT * HISTOGRAM256_BIN_COUNT)
#define UMUL(a, b) ((a) * (b))
#define UMAD(a, b, c) (UMUL((a), (b)) + (c))
#define TAG_MASK 0xFFFFFFFFU

inline __device__ void addByte(uint *s_WarpHist, uint data, uint threadTag) { atomicAdd(s_WarpHist + data, 1); }

inline __device__ void addWord(uint *s_WarpHist, uint data, uint tag)
{
    addByte(s_WarpHist, (data >> 0) & 0xFFU, tag);
    addByte(s_WarpHist, (data >> 8) & 0xFFU, tag);
    addByte(s_WarpHist, (data >> 16) & 0xFFU, tag);
    addByte(s_WarpHist, (data >> 24) & 0xFFU, tag);
}

extern "C" __global__ void histogram256Kernel(uint *d_PartialHistograms, uint *d_Data, uint dataCount)
{
    // Per-warp subhistogram storage
    __shared__ uint s_Hist[HISTOGRAM256_THREADBLOCK_MEMORY];
    uint           *s_WarpHist = s_Hist + (threadIdx.x >> LOG2_WARP_SIZE) * HISTOGRAM256_BIN_COUNT;

// Clear shared memory storage for current threadblock before processing
#pragma unroll

    for (uint i = 0; i < (HISTOGRAM256_THREADBLOCK_MEMORY / HISTOGRAM256_THREADBLOCK_SIZE); i++) {
        s_Hist[threadIdx.x + i * HISTOGRAM256_THREADBLOCK_SIZE] = 0;
    }

    // Cycle through the entire data set, update subhistograms for each warp
    const uint tag = threadIdx.x << (UINT_BITS - LOG2_WARP_SIZE);

    __syncthreads();

    for (uint pos = UMAD(blockIdx.x, blockDim.x, threadIdx.x); pos < dataCount; pos += UMUL(blockDim.x, gridDim.x)) {
        uint data = d_Data[pos];
        addWord(s_WarpHist, data, tag);
    }

    // Merge per-warp histograms into per-block and write to global memory
    __syncthreads();

    for (uint bin = threadIdx.x; bin < HISTOGRAM256_BIN_COUNT; bin += HISTOGRAM256_THREADBLOCK_SIZE) {
        uint sum = 0;

        for (uint i = 0; i < WARP_COUNT; i++) {
            sum += s_Hist[bin + i * HISTOGRAM256_BIN_COUNT] & TAG_MASK;
        }

        d_PartialHistograms[blockIdx.x * HISTOGRAM256_BIN_COUNT + bin] = sum;
    }
}
