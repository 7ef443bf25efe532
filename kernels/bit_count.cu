// popc / clz / brev / ffs on 32 bits and popc / clz / ffs on 64 bits.
extern "C" __global__ void bit_count(const unsigned int* a, const unsigned long long* w, int* out,
                                     unsigned int* rev)
{
    int i = threadIdx.x;
    unsigned int x = a[i];
    unsigned long long y = w[i];
    out[6 * i + 0] = __popc(x);
    out[6 * i + 1] = __clz((int)x);
    out[6 * i + 2] = __ffs((int)x);
    out[6 * i + 3] = __popcll(y);
    out[6 * i + 4] = __clzll((long long)y);
    out[6 * i + 5] = __ffsll((long long)y);
    rev[i] = __brev(x);
}
