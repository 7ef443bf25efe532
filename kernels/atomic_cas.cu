// A compare-and-swap retry loop implementing an atomic wrapping multiply (commutative, so the
// final product is order-independent), plus a CAS that only one thread can win.
extern "C" __global__ void atomic_cas(const unsigned int* in, unsigned int* prod, int* owner, int* wins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int v = in[i];
    unsigned int old = *prod, assumed;
    do {
        assumed = old;
        old = atomicCAS(prod, assumed, assumed * v);
    } while (old != assumed);
    if (atomicCAS(owner, -1, 7) == -1) {
        atomicAdd(wins, 1);
    }
}
