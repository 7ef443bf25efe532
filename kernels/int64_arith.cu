// 64-bit integer arithmetic: wrapping add/sub/mul, carries across bit 32, rotates, shifts, compares.
extern "C" __global__ void int64_arith(const unsigned long long* a, const unsigned long long* b,
                                       const long long* s, unsigned long long* out, long long* sout)
{
    int i = threadIdx.x;
    unsigned long long x = a[i], y = b[i];
    int sh = (int)(y & 63);
    out[6 * i + 0] = x + y;
    out[6 * i + 1] = x - y;
    out[6 * i + 2] = x * y;
    out[6 * i + 3] = (x << sh) | (x >> ((64 - sh) & 63));
    out[6 * i + 4] = (x >> 7) ^ (y << 3);
    out[6 * i + 5] = (x < y) ? 1ull : (x == y ? 2ull : 3ull);
    long long z = s[i];
    sout[2 * i + 0] = z >> 5;                    // arithmetic shift
    sout[2 * i + 1] = (long long)((unsigned long long)z * (unsigned long long)(long long)(i - 3)
                                  + (unsigned int)x);
}
