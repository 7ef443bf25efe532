// A program of more than 3,072 machine rows on the 2B shape that no shared routine can shorten:
// a fully unrolled integer hash (a few rows per step, every step its own constants), run straight
// through all eight 512-row banks of the ROM.
extern "C" __global__ void rom4k(const unsigned *seed, unsigned *out) {
    unsigned h = seed[threadIdx.x];
#pragma unroll
    for (unsigned k = 0; k < 640; ++k) {
        h ^= h >> 13;
        h = (h + (k * 0x9E3779B9u)) ^ (h << 5);
    }
    out[threadIdx.x] = h;
}
