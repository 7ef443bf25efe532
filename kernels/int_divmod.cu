// C division and remainder truncate toward zero: signed and unsigned 32-bit / and % (edge values included).
extern "C" __global__ void int_divmod(const int* a, const int* b, const int* c, int* q, int* r,
                                      unsigned int* uq, unsigned int* ur)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i], z = c[i];
    q[i] = x / y;
    r[i] = x % z;
    uq[i] = (unsigned int)x / (unsigned int)z;
    ur[i] = (unsigned int)x % (unsigned int)y;
}
