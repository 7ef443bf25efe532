// Divergence: if/else on the lane's parity with a nested if/else inside each side and a
// reconvergence point before a common tail.
extern "C" __global__ void branch_nested(const int* in, int* out)
{
    int i = threadIdx.x;
    int v = in[i];
    int r;
    if ((i & 1) == 0) {
        if (v > 10) {
            r = v * 2;
        } else {
            r = v - 100;
        }
    } else {
        if (v < 0) {
            r = -v;
        } else if (v == 7) {
            r = 777;
        } else {
            r = v ^ i;
        }
    }
    out[i] = r + i;   // common tail after reconvergence
}
