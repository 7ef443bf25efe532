// Fast-math intrinsics: __fdividef (div.approx.f32) and exp2f (ex2.approx.f32). Expected values
// are the exact results correctly rounded; the launch allows a small ULP tolerance.
extern "C" __global__ void fast_intrinsics(const float* a, const float* b, float* q, float* e)
{
    int i = threadIdx.x;
    q[i] = __fdividef(a[i], b[i]);
    e[i] = exp2f(b[i]);
}
