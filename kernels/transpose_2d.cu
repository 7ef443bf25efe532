// Naive transpose with a 2-D grid and 2-D blocks (uses blockDim.y): out[x][y] = in[y][x] for a
// rows x cols matrix; threads outside the matrix return early.
extern "C" __global__ void transpose_2d(const int* in, int* out, int rows, int cols)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= (unsigned int)cols || y >= (unsigned int)rows) return;
    out[x * rows + y] = in[y * cols + x];
}
