// atomicMax / atomicMin on signed and unsigned words from every thread (order-independent results).
extern "C" __global__ void atomic_minmax(const int* in, int* smax, int* smin, unsigned int* umax,
                                         unsigned int* umin)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    atomicMax(smax, v);
    atomicMin(smin, v);
    atomicMax(umax, (unsigned int)v);
    atomicMin(umin, (unsigned int)v);
}
