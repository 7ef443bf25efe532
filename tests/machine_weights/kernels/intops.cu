extern "C" __global__ void intops(const unsigned* a, unsigned* out, unsigned k) {
    unsigned i = threadIdx.x;
    unsigned x = a[i];
    unsigned y = (x >> (i + 1)) | (x << k);
    int s = (int)x >> 3;
    out[i] = (i & 1) ? (y - (unsigned)s) : (y ^ 0x5a5a5a5au);
    out[i + 4] = x < k ? x : k;
}
