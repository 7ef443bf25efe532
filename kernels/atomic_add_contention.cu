// Heavy contention: every thread of 2 blocks x 64 adds to one word (atomicAdd) and subtracts from
// another (atomicSub); the old values returned are a permutation, so their sum is order-independent.
extern "C" __global__ void atomic_add_contention(const int* in, int* counters, unsigned int* old_sum)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    atomicAdd(&counters[0], v);
    atomicSub(&counters[1], v);
    unsigned int ticket = atomicAdd((unsigned int*)&counters[2], 1u);
    atomicAdd(old_sum, ticket);
}
