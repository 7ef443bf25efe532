// Needleman-Wunsch anti-diagonal step on a 2-D shared tile (after Rodinia's needle kernel):
// temp[m - tx + 1][tx + 1]; NVRTC forms a 32-bit shared base below zero plus an immediate
// offset, which PTX computes modulo 2^32
#define B 4
__device__ int maxi(int a, int b, int c) { int k = a > b ? a : b; return k > c ? k : c; }
extern "C" __global__ void nw(const int* ref, int* score, int penalty) {
    __shared__ int temp[B + 1][B + 1];
    __shared__ int rf[B][B];
    int tx = threadIdx.x;
    for (int i = 0; i < B; i++) rf[i][tx] = ref[i * B + tx];
    temp[tx + 1][0] = -(tx + 1) * penalty;
    temp[0][tx + 1] = -(tx + 1) * penalty;
    if (tx == 0) temp[0][0] = 0;
    __syncthreads();
    for (int m = 0; m < B; m++) {
        if (tx <= m) {
            int x = tx + 1, y = m - tx + 1;
            temp[y][x] = maxi(temp[y - 1][x - 1] + rf[y - 1][x - 1], temp[y][x - 1] - penalty,
                              temp[y - 1][x] - penalty);
        }
        __syncthreads();
    }
    for (int m = B - 2; m >= 0; m--) {
        if (tx <= m) {
            int x = tx + B - m, y = B - tx;
            temp[y][x] = maxi(temp[y - 1][x - 1] + rf[y - 1][x - 1], temp[y][x - 1] - penalty,
                              temp[y - 1][x] - penalty);
        }
        __syncthreads();
    }
    for (int i = 0; i < B + 1; i++) if (tx == 0) { for (int j = 0; j < B + 1; j++) score[i * (B + 1) + j] = temp[i][j]; }
}
