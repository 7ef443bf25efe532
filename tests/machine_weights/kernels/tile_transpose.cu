// The CUDA samples' transpose without bank conflicts at its classic tile: a 16x16 tile padded to
// 16x17 (272 words of shared memory; the machine mapped at most 256 before), 16x4 threads each
// moving four rows.
#define TILE 16
#define ROWS 4
extern "C" __global__ void tile_transpose(int* odata, const int* idata, int width, int height) {
    __shared__ int tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < width && y + j < height) tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < height && y + j < width) odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}
