// Float -> integer conversions saturate and send NaN to 0 (to 64 bits: LLONG_MIN, PTX ISA 9.0): __float2int_{rn,rz,rd,ru},
// __float2uint_rz (negatives -> 0), C casts, __float2ll_rz.
extern "C" __global__ void float_to_int(const float* a, int* si, unsigned int* ui, long long* sl)
{
    int i = threadIdx.x;
    float x = a[i];
    si[5 * i + 0] = __float2int_rn(x);
    si[5 * i + 1] = __float2int_rz(x);
    si[5 * i + 2] = __float2int_rd(x);
    si[5 * i + 3] = __float2int_ru(x);
    si[5 * i + 4] = (int)x;
    ui[2 * i + 0] = __float2uint_rz(x);
    ui[2 * i + 1] = __float2uint_rn(x);
    sl[i] = __float2ll_rz(x);
}
