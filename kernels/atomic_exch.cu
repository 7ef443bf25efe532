// atomicExch: many threads swap 1 into a flag and exactly one sees the old 0 (counted in winners);
// each thread also swaps a value into its own slot and writes back the old one (no contention).
extern "C" __global__ void atomic_exch(int* flag, int* winners, int* slots, int* old_vals)
{
    int i = threadIdx.x;
    if (atomicExch(flag, 1) == 0) {
        atomicAdd(winners, 1);
    }
    old_vals[i] = atomicExch(&slots[i], 3 * i + 1);
}
