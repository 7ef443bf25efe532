/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/simpleVoteIntrinsics/simpleVote_kernel.cuh, VoteAnyKernel1()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; host code and #include guards removed
 *   - launch: 64 threads in 1 block (2 warps): the input is one all-zero warp and one warp with a
 *     single nonzero lane (the original's genVoteTestPattern writes other patterns)
 */
extern "C" __global__ void VoteAnyKernel1(unsigned int *input, unsigned int *result, int size)
{
    int tx = threadIdx.x;

    int mask   = 0xffffffff;
    result[tx] = __any_sync(mask, input[tx]);
}
