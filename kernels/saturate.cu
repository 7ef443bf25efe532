// __saturatef clamps to [0, 1] (cvt.sat.f32.f32); NaN saturates to +0.
extern "C" __global__ void saturate(const float* a, float* out)
{
    int i = threadIdx.x;
    out[i] = __saturatef(a[i]);
}
