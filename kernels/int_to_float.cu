// Integer -> float conversions: (float)int and (float)unsigned round to nearest even;
// __uint2float_rz / __int2float_rd / __int2float_ru round as named.
extern "C" __global__ void int_to_float(const int* a, float* out)
{
    int i = threadIdx.x;
    int x = a[i];
    out[5 * i + 0] = (float)x;
    out[5 * i + 1] = (float)(unsigned int)x;
    out[5 * i + 2] = __uint2float_rz((unsigned int)x);
    out[5 * i + 3] = __int2float_rd(x);
    out[5 * i + 4] = __int2float_ru(x);
}
