// Select and early return: threads leave at different points; the buffer keeps what each wrote.
extern "C" __global__ void early_return(const float* in, float* out, int n)
{
    int i = threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    if (x < 0.0f) {
        out[i] = -1.0f;
        return;
    }
    float y = x > 100.0f ? 100.0f : x;          // select
    if (y == 0.0f) return;                     // out[i] keeps its old value
    out[i] = y * 0.5f;
}
