extern "C" __global__ void mul(const unsigned* a, unsigned* out, unsigned k) {
    unsigned i = threadIdx.x;
    out[i] = a[i] * k + a[i] * a[(i + 1) & 3];
}
