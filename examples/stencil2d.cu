// stencil2d: the 5-point Laplacian of a w x h int grid (row-major), edges clamped;
// one thread per cell, the 2-D index computed from a 1-D launch.
__global__ void stencil2d(const int* in, int* out, int w, int h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= w * h) return;
    int x = i % w, y = i / w;
    int l = x > 0 ? in[i - 1] : in[i];
    int r = x < w - 1 ? in[i + 1] : in[i];
    int u = y > 0 ? in[i - w] : in[i];
    int d = y < h - 1 ? in[i + w] : in[i];
    out[i] = l + r + u + d - 4 * in[i];
}
