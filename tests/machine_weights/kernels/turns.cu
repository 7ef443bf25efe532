// Blocks of more than 64 threads that wait at block barriers: the machine's 64 threads take the
// block's threads in turns (codegen/turns.py). Expected values in turns_*.json come from Python.

// a tree sum through shared memory (one result per block)
extern "C" __global__ void tree_sum(const int* in, int n, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x;
    int acc = 0;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) acc += in[i];
    s[t] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// the CUDA samples' transpose through a padded 16 x 17 tile (2-D blocks of 16 x 16)
extern "C" __global__ void tile_transpose(const float* in, float* out, int w, int h) {
    __shared__ float tile[16][17];
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    x = blockIdx.y * 16 + threadIdx.x;
    y = blockIdx.x * 16 + threadIdx.y;
    if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}

// warp shuffles, then the warps' sums through shared memory, then warp 0 again
extern "C" __global__ void warp_sum(const int* in, int* out) {
    __shared__ int part[32];
    int t = threadIdx.x, lane = t & 31, w = t >> 5;
    int v = in[blockIdx.x * blockDim.x + t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < blockDim.x / 32 ? part[lane] : 0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

// atomics in the order threads reach them, a barrier, then every thread reads the final count;
// threads past n leave before the barrier; a local array lives across it; __syncthreads_count
extern "C" __global__ void tickets(int n, int* ticket, int* total, int* count, int* local_out) {
    __shared__ int c;
    int t = threadIdx.x;
    if (t == 0) c = 0;
    __syncthreads();
    if (t >= n) return;
    int mine = atomicAdd(&c, t + 1);
    int a[4];
    for (int k = 0; k < 4; k++) a[k] = t * (k + 1);
    int odd = __syncthreads_count(t & 1);
    ticket[t] = mine;
    total[t] = c;
    if (t == 0) count[0] = odd;
    local_out[t] = a[t & 3];
}

// the smallest: 128 threads reverse an array through shared memory across one barrier
extern "C" __global__ void reverse(const int* in, int* out) {
    __shared__ int s[128];
    int t = threadIdx.x;
    s[t] = in[t] * 3;
    __syncthreads();
    out[t] = s[blockDim.x - 1 - t] + t;
}
