// Shifts with amounts masked to the legal range: shl, logical and arithmetic shr, 64-bit shifts.
extern "C" __global__ void shifts(const int* a, const unsigned int* s, int* out, unsigned int* uout,
                                  long long* out64)
{
    int i = threadIdx.x;
    int x = a[i];
    unsigned int k = s[i] & 31u;
    out[2 * i + 0] = x >> k;                                  // arithmetic
    out[2 * i + 1] = (int)((unsigned int)x << k);
    uout[i] = (unsigned int)x >> k;                           // logical
    long long w = (long long)x * 1048576 - 12345;
    unsigned int k64 = s[i] & 63u;
    out64[i] = (w >> k64) + (long long)((unsigned long long)w >> (63u - k64));
}
