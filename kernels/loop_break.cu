// Data-dependent loop with break and continue: index of the first element > threshold in each
// thread's row, skipping negative entries; -1 when none.
extern "C" __global__ void loop_break(const int* data, const int* threshold, int* found, int* skipped,
                                      int row_len)
{
    int t = threadIdx.x;
    const int* row = data + t * row_len;
    int th = threshold[t];
    int idx = -1;
    int skip = 0;
    for (int k = 0; k < row_len; ++k) {
        int v = row[k];
        if (v < 0) {
            ++skip;
            continue;
        }
        if (v > th) {
            idx = k;
            break;
        }
    }
    found[t] = idx;
    skipped[t] = skip;
}
