/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/simpleCooperativeGroups/simpleCooperativeGroups.cu,
 *         cgkernel() and sumReduction()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; #include <stdio.h> and <cooperative_groups.h> removed
 *   - cooperative groups rewritten: the thread_group g argument of sumReduction() -> its rank and size
 *     (int lane, int size); g.sync() -> __syncthreads() (every thread of the block calls sumReduction
 *     at the same time, for the whole block and for the 16-thread tiles alike);
 *     threadBlockGroup.thread_rank() -> threadIdx.x, .size() -> blockDim.x;
 *     tiled_partition<16>: tile rank -> threadIdx.x % 16
 *   - printf() of the sums -> stores into out[] (out[0]: the block's sum, out[1 + tile]: each tile's sum,
 *     out[5], out[6]: the two expected values the original prints beside them)
 *   - launch: 1 block of 64 threads (was 64), dynamic shared memory 64 ints, as the original
 */
__device__ int sumReduction(int lane, int size, int *x, int val)
{
    // each iteration halves the number of active threads
    // each thread adds its partial sum[i] to sum[lane+i]
    for (int i = size / 2; i > 0; i /= 2) {
        x[lane] = val;

        __syncthreads();

        if (lane < i)
            val += x[lane + i];

        __syncthreads();
    }

    // note: only thread 0 will return full sum
    if (lane == 0)
        return val;
    else
        return -1;
}

extern "C" __global__ void cgkernel(int *out)
{
    int threadBlockGroupSize = blockDim.x;

    // workspace array in shared memory required for reduction
    extern __shared__ int workspace[];

    int input, output, expectedOutput;

    // input to reduction, for each thread, is its' rank in the group
    input = threadIdx.x;

    // expected output from reduction
    expectedOutput = (threadBlockGroupSize - 1) * threadBlockGroupSize / 2;

    // perform reduction
    output = sumReduction(threadIdx.x, blockDim.x, workspace, input);

    // master thread in group prints out result
    if (threadIdx.x == 0) {
        out[0] = output;
        out[5] = expectedOutput;
    }

    __syncthreads();

    // each tiledPartition16 group includes 16 threads
    int tileRank = threadIdx.x % 16;

    // This offset allows each group to have its own unique area in the workspace array
    int workspaceOffset = threadIdx.x - tileRank;

    // input to reduction, for each thread, is its' rank in the group
    input = tileRank;

    // expected output from reduction
    expectedOutput = 15 * 16 / 2;

    // Perform reduction
    output = sumReduction(tileRank, 16, workspace + workspaceOffset, input);

    // each master thread prints out result
    if (tileRank == 0) {
        out[1 + threadIdx.x / 16] = output;
        if (threadIdx.x == 0)
            out[6] = expectedOutput;
    }

    return;
}
