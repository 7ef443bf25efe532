/*
 * Source: zjin-lcf/HeCBench, src/pnpoly-cuda/kernel.h, pnpoly_opt<tile_size>() and is_between()
 *         (from the Kernel Tuner pnpoly example)
 * License: Apache-2.0 (src/pnpoly-cuda/LICENSE)
 * Changes:
 *   - the template is instantiated by hand: extern "C" wrapper pnpoly_opt_2() calls pnpoly_opt<2>()
 *     (which became a __device__ template)
 *   - VERTICES 600 -> 6, BLOCK_SIZE_X 256 -> 16
 *   - host code and #include lines removed
 *   - launch: 40 points (float2), a 6-vertex polygon with a horizontal edge (slope = x / 0 = inf),
 *     2 blocks of 16 threads, 2 points per thread (tile_size 2); the last block's second tile is partial
 */
#define VERTICES 6
#define BLOCK_SIZE_X 16

__device__ __forceinline__ int is_between(float a, float b, float c) { return (b > a) != (c > a); }

template <int tile_size>
__device__ void pnpoly_opt(int *__restrict__ bitmap, const float2 *__restrict__ point, const float2 *__restrict__ vertex,
                           int n)
{
    int i = blockIdx.x * BLOCK_SIZE_X * tile_size + threadIdx.x;
    if (i < n) {
        int    c[tile_size];
        float2 lpoint[tile_size];
#pragma unroll
        for (int ti = 0; ti < tile_size; ti++) {
            c[ti] = 0;
            if (i + BLOCK_SIZE_X * ti < n) {
                lpoint[ti] = point[i + BLOCK_SIZE_X * ti];
            }
        }

        int k = VERTICES - 1;

        for (int j = 0; j < VERTICES; k = j++) { // edge from vj to vk
            float2 vj = vertex[j];
            float2 vk = vertex[k];

            float slope = (vk.x - vj.x) / (vk.y - vj.y);

#pragma unroll
            for (int ti = 0; ti < tile_size; ti++) {
                float2 p = lpoint[ti];

                if (is_between(p.y, vj.y, vk.y) &&       // if p is between vj and vk vertically
                    (p.x < slope * (p.y - vj.y) + vj.x)) { // if p.x crosses the line vj-vk when moved in positive x-direction
                    c[ti] = !c[ti];
                }
            }
        }

#pragma unroll
        for (int ti = 0; ti < tile_size; ti++) {
            // could do an if statement here if 1s are expected to be rare
            if (i + BLOCK_SIZE_X * ti < n)
                bitmap[i + BLOCK_SIZE_X * ti] = c[ti];
        }
    }
}

extern "C" __global__ void pnpoly_opt_2(int *__restrict__ bitmap, const float2 *__restrict__ point,
                                        const float2 *__restrict__ vertex, int n)
{
    pnpoly_opt<2>(bitmap, point, vertex, n);
}
