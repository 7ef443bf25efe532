__device__ __noinline__ int fib(int x) { return x < 2 ? x : fib(x - 1) + fib(x - 2); }
extern "C" __global__ void fibk(const int* in, int* out) { out[threadIdx.x] = fib(in[threadIdx.x]); }
