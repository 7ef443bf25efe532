/*
 * Source: yuhc/gpu-rodinia (Rodinia 3.1), cuda/bfs/kernel.cu, Kernel(), and cuda/bfs/bfs.cu, struct Node
 * License: Rodinia license (cuda LICENSE, Copyright (c) 2008-2011 University of Virginia; BSD-style)
 * Changes:
 *   - renamed Kernel -> bfs_kernel1 and extern "C" added (a unique, unmangled name for the launch spec)
 *   - MAX_THREADS_PER_BLOCK 512 -> 16 (the blocks of this launch)
 *   - #include guards removed; struct Node written here (it came from bfs.cu)
 *   - launch: one BFS level on a 24-node graph (frontier: nodes 0 and 5), 2 blocks of 16 threads (the
 *     last block is partial: tid < no_of_nodes)
 */
#define MAX_THREADS_PER_BLOCK 16

struct Node {
    int starting;
    int no_of_edges;
};

extern "C" __global__ void bfs_kernel1(Node *g_graph_nodes, int *g_graph_edges, bool *g_graph_mask,
                                       bool *g_updating_graph_mask, bool *g_graph_visited, int *g_cost,
                                       int no_of_nodes)
{
    int tid = blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x;
    if (tid < no_of_nodes && g_graph_mask[tid]) {
        g_graph_mask[tid] = false;
        for (int i = g_graph_nodes[tid].starting; i < (g_graph_nodes[tid].no_of_edges + g_graph_nodes[tid].starting);
             i++) {
            int id = g_graph_edges[i];
            if (!g_graph_visited[id]) {
                g_cost[id]                = g_cost[tid] + 1;
                g_updating_graph_mask[id] = true;
            }
        }
    }
}
