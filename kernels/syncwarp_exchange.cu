// __syncwarp orders shared-memory traffic inside a warp: lanes publish, sync, read a neighbour,
// sync, and overwrite.
extern "C" __global__ void syncwarp_exchange(const int* in, int* out)
{
    __shared__ int s[32];
    int lane = threadIdx.x;
    s[lane] = in[lane] * 2;
    __syncwarp();
    int n = s[(lane + 1) & 31] + s[(lane + 31) & 31];
    __syncwarp();
    s[lane] = n;
    __syncwarp();
    out[lane] = s[31 - lane] - lane;
}
