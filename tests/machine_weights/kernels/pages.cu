// Global memory past one page (1,024 words): the output spans words 0..1,099 (its dump crosses
// into page 1), the input lies in page 1; each thread stores in both pages and loads from page 1.
extern "C" __global__ void pages(const int *in, int *out) {
    int t = threadIdx.x;
    out[1024 + 70 + t] = in[t] * 3 + 1;  // page 1: a load and a store there
    out[t * 300] = in[t + 4] + t;        // page 0: words 0, 300, 600, 900
}
