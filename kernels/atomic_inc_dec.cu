// atomicInc wraps to 0 once the old value reaches the limit; atomicDec wraps to the limit at 0 or
// above it. Every thread applies both; the final values do not depend on the order.
extern "C" __global__ void atomic_inc_dec(unsigned int* ctr, unsigned int limit)
{
    atomicInc(&ctr[0], limit);
    atomicDec(&ctr[1], limit);
    atomicInc(&ctr[2], 0xffffffffu);
}
