// A bug a user makes: a stride of 600 words stores thread 1 past the end of y (and thread 2
// beyond the machine's 1024-word memory, where the weights' addressing would wrap around).
extern "C" __global__ void oob_store(int* y) { y[threadIdx.x * 600] = threadIdx.x; }
