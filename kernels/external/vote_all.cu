/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/simpleVoteIntrinsics/simpleVote_kernel.cuh, VoteAllKernel2()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; host code and #include guards removed
 *   - launch: 64 threads in 1 block (2 warps): the input is one all-nonzero warp and one warp with a
 *     single zero lane (the original's genVoteTestPattern writes other patterns)
 */
extern "C" __global__ void VoteAllKernel2(unsigned int *input, unsigned int *result, int size)
{
    int tx = threadIdx.x;

    int mask   = 0xffffffff;
    result[tx] = __all_sync(mask, input[tx]);
}
