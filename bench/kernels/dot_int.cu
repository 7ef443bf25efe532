// The integer dot product of issue 14's table (the seeds' demo with int): 4 threads, thread 3 idle.
// [1, 2, 3] . [4, 5, 6] = 32.
extern "C" __global__ void dot_int(const int* a, const int* b, int n, int* out)
{
    int i = threadIdx.x;
    int p = i < n ? a[i] * b[i] : 0;
    atomicAdd(out, p);
}
