// a float expression with a double literal: cvt.f64.f32 + fma.rn.f64 + cvt.rn.f32.f64
extern "C" __global__ void halfx(const float* x, float* out) {
    int t = threadIdx.x;
    out[t] = x[t] * 0.5 + 1.25;
}
