// Bitwise and boolean logic: and/or/xor/not on words and on predicates.
extern "C" __global__ void logic_ops(const unsigned int* a, const unsigned int* b, unsigned int* out)
{
    int i = threadIdx.x;
    unsigned int x = a[i], y = b[i];
    bool p = x > y, q = (x & 1u) != 0, r = (int)y < 0;
    out[5 * i + 0] = (x & y) ^ ~x;
    out[5 * i + 1] = (x | y) & ~(x ^ y);
    out[5 * i + 2] = (unsigned int)((p && !q) || (r != p));
    out[5 * i + 3] = (p ^ q) ? x : y;
    out[5 * i + 4] = (!r && q) ? ~y : (x ^ 0xdeadbeefu);
}
