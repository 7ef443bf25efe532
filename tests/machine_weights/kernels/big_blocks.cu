// Blocks of more than the 64 threads the machine holds at once: kernels without block barriers
// run as parts of a block one after another (codegen.softmem.block_parts). Expected values in
// the JSON files come from Python over the kernels' meaning.

// 128 threads per block (2 parts), 2 blocks: c[i] = a[i] + 3 b[i] + i for i < n
extern "C" __global__ void vadd(const int* a, const int* b, int* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + 3 * b[i] + i;
}

// 1,024 threads (16 parts) adding into 16 counters: atomics across the parts
extern "C" __global__ void hist(unsigned* h) {
    unsigned t = threadIdx.x;
    atomicAdd(&h[t % 16], t * 7 + blockIdx.x);
}

// a 16 x 16 block (256 threads, 4 parts) of a 2 x 1 grid: out[y][x] over a 32 x 16 array
extern "C" __global__ void tile2d(int* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * 32 + x] = x * 1000 + y * 7 + threadIdx.y * threadIdx.x;
}

// 96 threads (3 parts of one warp each): a warp sum by shuffles, lane 0 stores it
extern "C" __global__ void warpsum(const int* v, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int s = v[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) out[blockIdx.x * 3 + threadIdx.x / 32] = s;
}

// 100 threads (no warp operations: 2 parts of 50) over 3 blocks
extern "C" __global__ void odd(int* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x * 5 + blockIdx.x * blockDim.x;
}
