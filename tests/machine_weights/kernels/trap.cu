// __trap() in one thread (PTX trap): the model writes FAULT for that lane and the host reports it
// as the interpreter does (tests/machine_weights/test_machine_weights.py).
extern "C" __global__ void trapk(int *out, int n) {
    int i = threadIdx.x;
    if (i == n) __trap();
    out[i] = i;
}
