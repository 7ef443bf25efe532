extern "C" __global__ void bitops(const unsigned* a, const int* b, unsigned* out, unsigned k) {
    unsigned i = threadIdx.x;
    unsigned x = a[i];
    int y = b[i];
    out[i] = __popc(x);
    out[i + 4] = __clz(x);
    out[i + 8] = __brev(x);
    out[i + 12] = __popc(x ^ k) + __clz(x >> 4);
    out[i + 16] = (unsigned)(y < (int)k - 100 ? y : (int)k - 100);
    out[i + 20] = (unsigned)(y > -5 ? y : -5);
    out[i + 24] = x > k ? x : k;
    out[i + 28] = (i & 1) ? 7u : 0xdeadbeefu;
}
