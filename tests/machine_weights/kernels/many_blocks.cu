// Every block of a 1-D grid of 530 blocks (one thread each) adds (its index + 1) into one of 64
// words: the result depends on every block index, past the 512th block, where the model writes
// BLOCKHI (the high part of the 16-bit block index) before BLOCK.
extern "C" __global__ void many_blocks(unsigned *out) {
    atomicAdd(&out[blockIdx.x & 63], blockIdx.x + 1);
}
