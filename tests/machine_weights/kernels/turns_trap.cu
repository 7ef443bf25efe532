// A 128-thread block with a barrier (taken in turns by the machine's 64 threads) whose thread 69
// traps after the barrier: the fault names the kernel's thread (the interpreter words the model's fault).
extern "C" __global__ void turns_trap(int* out) {
    __shared__ int s[128];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 69) __trap();
    out[threadIdx.x] = s[127 - threadIdx.x];
}
