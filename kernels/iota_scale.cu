// C++ linkage on purpose (mangled _Z10iota_scalePjjj): out[i] = base + i * stride, wrapping mod 2^32.
__global__ void iota_scale(unsigned int* out, unsigned int base, unsigned int stride)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = base + i * stride;
}
