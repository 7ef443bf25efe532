// A switch on data, with fall-through and a default: several divergent paths per warp.
extern "C" __global__ void switch_case(const int* in, int* out)
{
    int i = threadIdx.x;
    int v = in[i];
    int r = 0;
    switch (v & 7) {
    case 0:
        r = 10;
        break;
    case 1:
        r = v * 3;
        // fall through
    case 2:
        r += 5;
        break;
    case 5:
        r = -v;
        break;
    case 6:
        r = v >> 1;
        break;
    default:
        r = v + 1000;
        break;
    }
    out[i] = r;
}
