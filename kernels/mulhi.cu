// High halves of products: __mulhi, __umulhi, __mul64hi, __umul64hi and the widening 32x32->64 multiply.
extern "C" __global__ void mulhi(const int* a, const int* b, int* hi_s, unsigned int* hi_u,
                                 long long* wide, long long* hi64_s, unsigned long long* hi64_u)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    hi_s[i] = __mulhi(x, y);
    hi_u[i] = __umulhi((unsigned int)x, (unsigned int)y);
    wide[i] = (long long)x * (long long)y;
    unsigned long long X = ((unsigned long long)(unsigned int)x << 32) | (unsigned int)y;
    unsigned long long Y = ((unsigned long long)(unsigned int)y << 32) | (unsigned int)(x ^ 0x5bd1e995);
    hi64_s[i] = __mul64hi((long long)X, (long long)Y);
    hi64_u[i] = __umul64hi(X, Y);
}
