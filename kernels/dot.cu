// Dot-product demo: out[0] += a[i] * (n + 1 + i) for i < n, so a = [1, 2, 3] gives
// [1, 2, 3] . [4, 5, 6] = 32. Launched with 4 threads: thread 3 does nothing.
// Float atomicAdd of small integers: every partial sum is exact, so the order does not matter.
extern "C" __global__ void dot(const float* a, int n, float* out)
{
    int i = threadIdx.x;
    if (i < n) {
        atomicAdd(out, a[i] * (float)(n + 1 + i));
    }
}
