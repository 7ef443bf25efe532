// dp4a, match.any and sad on the machine (issue 26: every instruction the interpreter runs runs
// inside the model, or is refused by name). Expected values: plain Python,
// tests/machine_weights/test_machine_weights.py::dpmatch_expected.
extern "C" __global__ void dpmatch(const int *a, const int *b, int *dot, unsigned *grp, unsigned *sad) {
    int i = threadIdx.x;
    dot[i] = __dp4a(a[i], b[i], i);
    grp[i] = __match_any_sync(0xffu, a[i] & 3);
    sad[i] = __sad(a[i], b[i], 1u);
}
