// A loop whose unrolled body (~600 machine instructions) spans both halves of the 1024-row ROM:
// every trip crosses from bank 0 into bank 1 and the back edge returns to bank 0; the trip count
// depends on the thread (1 or 2), so lanes of one group sit in different banks (min-PC runs the
// lanes at the loop top first, then the exited ones reconverge).
extern "C" __global__ void banks(const unsigned* x, unsigned* y)
{
    unsigned v = x[threadIdx.x];
    int trips = 1 + (threadIdx.x & 1);
#pragma unroll 1
    for (int k = 0; k < trips; ++k) {
#pragma unroll
        for (unsigned i = 0; i < 200; ++i) v = (v ^ (v >> 3)) + (0x9E3779B9u ^ (i * 7u));
    }
    y[threadIdx.x] = v;
}
