// Tiled matrix transpose through shared memory: 2-D grid of 2x2 blocks of 8x8 threads, 16x16 matrix;
// the tile is padded to 9 columns.
extern "C" __global__ void smem_transpose(const float* in, float* out, int width)
{
    __shared__ float tile[8][9];
    int x = blockIdx.x * 8 + threadIdx.x;
    int y = blockIdx.y * 8 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * width + x];
    __syncthreads();
    int tx = blockIdx.y * 8 + threadIdx.x;
    int ty = blockIdx.x * 8 + threadIdx.y;
    out[ty * width + tx] = tile[threadIdx.x][threadIdx.y];
}
