// 64-bit signed and unsigned division / remainder (truncating).
extern "C" __global__ void div_s64(const long long* a, const long long* b, long long* q, long long* r,
                                   unsigned long long* uq)
{
    int i = threadIdx.x;
    long long x = a[i], y = b[i];
    q[i] = x / y;
    r[i] = x % y;
    uq[i] = (unsigned long long)x / (unsigned long long)y;
}
