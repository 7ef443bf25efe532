// Funnel shifts and rotates: __funnelshift_l/_r (wrap), _lc/_rc (clamp), and a C rotate idiom.
extern "C" __global__ void funnel_shift(const unsigned int* lo, const unsigned int* hi, const unsigned int* sh,
                                        unsigned int* out)
{
    int i = threadIdx.x;
    unsigned int l = lo[i], h = hi[i], s = sh[i];
    out[5 * i + 0] = __funnelshift_l(l, h, s);
    out[5 * i + 1] = __funnelshift_r(l, h, s);
    out[5 * i + 2] = __funnelshift_lc(l, h, s);
    out[5 * i + 3] = __funnelshift_rc(l, h, s);
    unsigned int r = s & 31;
    out[5 * i + 4] = (l << r) | (l >> ((32 - r) & 31));
}
