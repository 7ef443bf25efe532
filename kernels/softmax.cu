// Row softmax over 8 columns, one thread per row: subtract the row max, expf (approximate:
// ex2.approx inside), sum in column order, divide. Expected values are the exact softmax
// correctly rounded; the launch allows a small ULP tolerance. Loops kept rolled (small program).
extern "C" __global__ void softmax(const float* x, float* y, int cols)
{
    int r = threadIdx.x;
    const float* row = x + r * cols;
    float m = row[0];
#pragma unroll 1
    for (int c = 1; c < cols; ++c) m = fmaxf(m, row[c]);
    float s = 0.0f;
#pragma unroll 1
    for (int c = 0; c < cols; ++c) s += expf(row[c] - m);
#pragma unroll 1
    for (int c = 0; c < cols; ++c) y[r * cols + c] = expf(row[c] - m) / s;
}
