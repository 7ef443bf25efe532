__device__ int sq(int x) { return x * x + 1; }
extern "C" __global__ void devsq(const int* in, int* out) { out[threadIdx.x] = sq(in[threadIdx.x]); }
