// Warp votes over two warps: __ballot_sync, __any_sync, __all_sync, a popcount rank from the ballot,
// and a ballot inside a divergent branch whose mask names exactly the odd lanes.
extern "C" __global__ void vote(const int* in, unsigned int* ballot, int* any, int* all,
                                unsigned int* odd_ballot, int* rank)
{
    int t = threadIdx.x;
    int lane = t & 31;
    int w = t >> 5;
    int v = in[t];
    unsigned int b = __ballot_sync(0xffffffffu, v > 0);
    int an = __any_sync(0xffffffffu, v > 100);
    int al = __all_sync(0xffffffffu, v != 0);
    if (lane & 1) {
        unsigned int ob = __ballot_sync(0xaaaaaaaau, v < 0);
        if (lane == 1) odd_ballot[w] = ob;
    }
    if (lane == 0) {
        ballot[w] = b;
        any[w] = an ? 1 : 0;
        all[w] = al ? 1 : 0;
    }
    rank[t] = __popc(b & ((1u << lane) - 1u));   // positive values in lower lanes of this warp
}
