// Read-only loads through const __restrict__ pointers (ld.global.nc): out[i] = 0.5 * in[i] + in[i ^ 1].
extern "C" __global__ void copy_nc(const float* __restrict__ in, float* __restrict__ out)
{
    int i = threadIdx.x;
    out[i] = 0.5f * in[i] + in[i ^ 1];
}
