// Bit-field extract and insert written with shifts and masks (32- and 64-bit).
extern "C" __global__ void bitfield(const unsigned int* a, const unsigned int* b, const unsigned long long* c,
                                    unsigned int* out, unsigned long long* out64)
{
    int i = threadIdx.x;
    unsigned int x = a[i], y = b[i];
    unsigned int pos = i & 15, len = 1 + (i % 12);
    unsigned int mask = (1u << len) - 1u;
    out[3 * i + 0] = (x >> pos) & mask;                               // extract
    out[3 * i + 1] = (x & ~(mask << pos)) | ((y & mask) << pos);      // insert
    out[3 * i + 2] = (x & 0xffff00ffu) | ((y & 0xffu) << 8);          // insert a constant field
    unsigned long long z = c[i];
    out64[i] = (z & ~(0xffffull << 24)) | ((unsigned long long)(y & 0xffffu) << 24);
}
