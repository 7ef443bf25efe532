// Round-to-nearest-even on exact ties (and near-ties) of float addition and subtraction.
extern "C" __global__ void add_ties(const float* a, const float* b, float* sum, float* diff)
{
    int i = threadIdx.x;
    sum[i] = a[i] + b[i];
    diff[i] = a[i] - b[i];
}
