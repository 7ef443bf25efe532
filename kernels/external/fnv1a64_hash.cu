/*
 * Source: Tritonn204/tnn-miner, include/fnv1a_cuda.cuh, hash_64_fnv1a_cuda() (FNV-1a, 64-bit;
 *         the file says "code license: public domain or equivalent", after
 *         https://notes.underscorediscovery.com/constexpr-fnv1a/)
 * License: public domain (as stated in the source file)
 * Changes:
 *   - a kernel written around the device function (the file has none): extern "C" fnv1a64_kernel() hashes
 *     key i (bytes keys[offsets[i] .. offsets[i] + lengths[i])) into out[i]
 *   - #include <cuda.h>, <cuda_runtime.h>, <stdint.h> removed: typedefs for uint8_t, uint32_t, uint64_t
 *     written here
 *   - launch: 10 keys of 0..23 bytes, 1 block of 16 threads (6 fail i < numKeys)
 */
typedef unsigned char      uint8_t;
typedef unsigned int       uint32_t;
typedef unsigned long long uint64_t;

__device__ __forceinline__ void hash_64_fnv1a_cuda(const void *key, const uint64_t len, uint64_t *output)
{
    const char *data  = (char *)key;
    uint64_t    hash  = 0xcbf29ce484222325;
    uint64_t    prime = 0x100000001b3;

    for (int i = 0; i < len; i++) {
        uint8_t value = data[i];
        hash          = hash ^ value;
        hash *= prime;
    }

    *output = hash;
}

extern "C" __global__ void fnv1a64_kernel(const uint8_t *keys, const uint32_t *offsets, const uint32_t *lengths,
                                          uint64_t *out, int numKeys)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < numKeys)
        hash_64_fnv1a_cuda(keys + offsets[i], lengths[i], out + i);
}
