// Euclid's algorithm with unsigned remainder in a data-dependent loop; also the lcm via division.
extern "C" __global__ void gcd(const unsigned int* a, const unsigned int* b, unsigned int* g, unsigned int* l)
{
    int i = threadIdx.x;
    unsigned int x = a[i], y = b[i];
    while (y != 0u) {
        unsigned int t = x % y;
        x = y;
        y = t;
    }
    g[i] = x;
    l[i] = (x == 0u) ? 0u : (a[i] / x) * b[i];
}
