// Mixed widths: 32-bit ints summed into a 64-bit accumulator (sign-extending loads), and a byte loop
// driven by a 64-bit counter (the byte written is the low 8 bits of byte + index).
extern "C" __global__ void mixed_width(const int* v, const unsigned char* bytes, long long* sums,
                                       unsigned char* out, unsigned long long n)
{
    int t = threadIdx.x;
    long long s = 0;
    for (int k = 0; k < 4; ++k) {
        s += v[4 * t + k];
    }
    sums[t] = s * 1000003;
    for (unsigned long long k = t; k < n; k += blockDim.x) {
        out[k] = (unsigned char)(bytes[k] + k);
    }
}
