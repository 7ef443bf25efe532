/*
 * Source: yuhc/gpu-rodinia (Rodinia 3.1), cuda/bfs/kernel2.cu, Kernel2()
 * License: Rodinia license (cuda LICENSE, Copyright (c) 2008-2011 University of Virginia; BSD-style)
 * Changes:
 *   - renamed Kernel2 -> bfs_kernel2 and extern "C" added (a unique, unmangled name for the launch spec)
 *   - MAX_THREADS_PER_BLOCK 512 -> 16 (the blocks of this launch)
 *   - #include guards removed
 *   - launch: 24 nodes, 2 blocks of 16 threads (the last block is partial: tid < no_of_nodes)
 */
#define MAX_THREADS_PER_BLOCK 16

extern "C" __global__ void bfs_kernel2(bool *g_graph_mask, bool *g_updating_graph_mask, bool *g_graph_visited,
                                       bool *g_over, int no_of_nodes)
{
    int tid = blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x;
    if (tid < no_of_nodes && g_updating_graph_mask[tid]) {
        g_graph_mask[tid]          = true;
        g_graph_visited[tid]       = true;
        *g_over                    = true;
        g_updating_graph_mask[tid] = false;
    }
}
