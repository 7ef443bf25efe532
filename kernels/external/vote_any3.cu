/*
 * Source: NVIDIA/cuda-samples, Samples/0_Introduction/simpleVoteIntrinsics/simpleVote_kernel.cuh, VoteAnyKernel3()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; host code and #include guards removed
 *   - launch: 64 threads in 1 block (2 warps) with warp_size 32, as the original (warp_size * 2 threads)
 */
extern "C" __global__ void VoteAnyKernel3(bool *info, int warp_size)
{
    int          tx   = threadIdx.x;
    unsigned int mask = 0xffffffff;
    bool        *offs = info + (tx * 3);

    // The following should hold true for the second and third warp
    *offs = __any_sync(mask, (tx >= (warp_size * 3) / 2));
    // The following should hold true for the "upper half" of the second warp,
    // and all of the third warp
    *(offs + 1) = (tx >= (warp_size * 3) / 2 ? true : false);

    // The following should hold true for the third warp only
    if (__all_sync(mask, (tx >= (warp_size * 3) / 2))) {
        *(offs + 2) = true;
    }
}
