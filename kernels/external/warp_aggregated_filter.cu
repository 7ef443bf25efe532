/*
 * Source: NVIDIA/cuda-samples, Samples/3_CUDA_Features/warpAggregatedAtomicsCG/warpAggregatedAtomicsCG.cu,
 *         filter_arr() and atomicAggInc()
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - extern "C" added; host code, #include <cooperative_groups.h> and <helper_*.h> removed
 *   - cooperative groups rewritten with warp intrinsics in atomicAggInc(): cg::coalesced_threads() ->
 *     mask = __activemask(); active.thread_rank() -> __popc(mask & lanemask_lt) with lane = threadIdx.x %
 *     warpSize; active.size() -> __popc(mask); active.shfl(res, 0) -> __shfl_sync(mask, res, __ffs(mask) - 1)
 *     (rank 0 of a coalesced group is its lowest active lane)
 *   - launch: 1 block of 32 threads (one warp, so the order of the aggregated atomics is fixed and dst is
 *     in input order; was many blocks of 256) over n = 80 ints (3 trips of the loop, the last partial)
 */
__device__ int atomicAggInc(int *counter)
{
    unsigned int mask = __activemask();
    int lane = threadIdx.x % warpSize;
    int rank = __popc(mask & ((1u << lane) - 1));

    // leader does the update
    int res = 0;
    if (rank == 0) {
        res = atomicAdd(counter, __popc(mask));
    }

    // broadcast result
    res = __shfl_sync(mask, res, __ffs(mask) - 1);

    // each thread computes its own value
    return res + rank;
}

extern "C" __global__ void filter_arr(int *dst, int *nres, const int *src, int n)
{
    int id = threadIdx.x + blockIdx.x * blockDim.x;

    for (int i = id; i < n; i += gridDim.x * blockDim.x) {
        if (src[i] > 0)
            dst[atomicAggInc(nres)] = src[i];
    }
}
