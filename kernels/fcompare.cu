// Every float comparison, ordered and unordered, packed into a bit mask per pair (NaN pairs included).
extern "C" __global__ void fcompare(const float* a, const float* b, unsigned int* out)
{
    int i = threadIdx.x;
    float x = a[i], y = b[i];
    unsigned int m = 0;
    if (x == y) m |= 1u;
    if (x != y) m |= 2u;
    if (x < y) m |= 4u;
    if (x <= y) m |= 8u;
    if (x > y) m |= 16u;
    if (x >= y) m |= 32u;
    if (!(x < y)) m |= 64u;      // unordered or >=
    if (!(x <= y)) m |= 128u;    // unordered or >
    if (!(x > y)) m |= 256u;     // unordered or <=
    if (!(x >= y)) m |= 512u;    // unordered or <
    if (!(x == y)) m |= 1024u;   // unordered or !=
    if (x != x) m |= 2048u;      // isnan
    if (x < y || x > y) m |= 4096u;              // ordered and !=
    if (x == x && y == y) m |= 8192u;            // both numbers
    if (x == y || x != x || y != y) m |= 16384u; // unordered or ==
    out[i] = m;
}
