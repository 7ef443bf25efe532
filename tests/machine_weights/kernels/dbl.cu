// double arithmetic: a float expression with a double literal, and real double math
extern "C" __global__ void dbl(const float* x, const double* y, float* out, double* dout, int* iout) {
    int t = threadIdx.x;
    float a = x[t];
    out[t] = a * 0.5 + 1.25;                      // cvt.f64.f32, fma/mul.f64, cvt.rn.f32.f64
    double v = y[t];
    double s = sqrt(fabs(v)) + v / (v + 3.0) - fmin(v, 2.0) * fmax(v, -1.0);
    dout[t] = s;
    iout[t] = (int)(v * 1000.0) + (v < 0.25 ? 1 : 0) + (int)floor(v) * 7;
}
