// atomicAnd / atomicOr / atomicXor from every thread (order-independent results).
extern "C" __global__ void atomic_bitwise(const unsigned int* in, unsigned int* acc)
{
    int i = threadIdx.x;
    unsigned int v = in[i];
    atomicAnd(&acc[0], v | 0x80000000u);
    atomicOr(&acc[1], v & 0x0f0f0f0fu);
    atomicXor(&acc[2], v);
}
