// Nested loops with break: each thread counts the primes in [lo, lo + 16) by trial division.
extern "C" __global__ void prime_count(const int* lo, int* count, int* largest)
{
    int t = threadIdx.x;
    int base = lo[t];
    int c = 0, big = 0;
    for (int n = base; n < base + 16; ++n) {
        if (n < 2) continue;
        bool prime = true;
        for (int d = 2; d * d <= n; ++d) {
            if (n % d == 0) {
                prime = false;
                break;
            }
        }
        if (prime) {
            ++c;
            big = n;
        }
    }
    count[t] = c;
    largest[t] = big;
}
