// __byte_perm (prmt.b32) with several selectors, including sign-replicate-free nibbles and a swap.
extern "C" __global__ void byte_perm(const unsigned int* a, const unsigned int* b, const unsigned int* sel,
                                     unsigned int* out)
{
    int i = threadIdx.x;
    unsigned int x = a[i], y = b[i];
    out[3 * i + 0] = __byte_perm(x, y, sel[i]);
    out[3 * i + 1] = __byte_perm(x, 0, 0x0123);     // byte swap
    out[3 * i + 2] = __byte_perm(x, y, 0x7531);
}
