// 8- and 16-bit buffers: sign-extending loads, byte and short stores, 16-bit compares.
extern "C" __global__ void char_short(const signed char* sc, const unsigned char* uc, const short* ss,
                                      unsigned char* bytes_out, short* shorts_out, int* ints_out)
{
    int i = threadIdx.x;
    int a = sc[i];            // sign-extended byte
    int b = uc[i];            // zero-extended byte
    int c = ss[i];            // sign-extended short
    ints_out[i] = a * 1000 + b - c;
    signed char x = sc[i];
    short y = ss[i];
    unsigned char r;
    if (x == 0) {
        r = (unsigned char)(y & 0xff);
    } else if (y != 5) {
        r = (unsigned char)(x + y);
    } else {
        r = 7;
    }
    bytes_out[i] = r;
    shorts_out[i] = (short)(x * y);
}
