/*
 * Source: zjin-lcf/HeCBench, src/kiss-cuda/kiss.cuh, class kiss::Kiss<T> (constructor, next<std::uint64_t>()),
 *         src/kiss-cuda/hashers.cuh, class kiss::hashers::MurmurHash<K>, and src/kiss-cuda/main.cu,
 *         kernel<T, Rng>() (Christian Hundt's KISS generator, used there with T = std::uint64_t)
 * License: Apache-2.0 (src/kiss-cuda/LICENSE)
 * Changes:
 *   - the templates are instantiated by hand: extern "C" wrapper kiss_u64() calls
 *     kernel<uint64_t, kiss::Kiss<uint64_t>>() (which became a __device__ template), the main.cu's
 *     data_t / rng_t choice
 *   - #include <cassert>, <cstdint> and <type_traits> uses removed: std::uint32_t / std::uint64_t /
 *     std::uint8_t -> typedefs uint32_t / uint64_t / uint8_t written here; the static_asserts on
 *     std::is_same and the assert(y != 0 && z != 0 && w != 0) after seeding removed
 *   - __host__ dropped (no host code here); only the hash_() overloads of MurmurHash and the
 *     std::uint64_t next() of Kiss are kept (the others are unused with T = uint64_t)
 *   - launch: n = 10 numbers, 1 block of 4 threads (a grid-stride loop; was 4096 blocks of 256), seed 42
 */
typedef unsigned char      uint8_t;
typedef unsigned int       uint32_t;
typedef unsigned long long uint64_t;

namespace kiss
{
namespace hashers
{
/*! \brief murmur integer finalizer
 * \tparam K key type (\c std::uint32_t or std::uint64_t)
 */
template <class K> class MurmurHash
{
public:
    using key_type  = K;
    using hash_type = K;

    template <class T> __device__ inline static constexpr T hash(T x) noexcept { return hash_(x); }

private:
    __device__ inline static constexpr uint32_t hash_(uint32_t x) noexcept
    {
        x ^= x >> 16;
        x *= 0x85ebca6b;
        x ^= x >> 13;
        x *= 0xc2b2ae35;
        x ^= x >> 16;
        return x;
    }

    __device__ inline static constexpr uint64_t hash_(uint64_t x) noexcept
    {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccd;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53;
        x ^= x >> 33;
        return x;
    }
}; // class MurmurHash
} // namespace hashers

/*! \brief KISS random number generator for host and CUDA device
 * \tparam T base type of RNG state (\c std::uint32_t or \c std::uint64_t)
 */
template <class T> class Kiss
{
public:
    __device__ inline constexpr explicit Kiss(T seed) noexcept
    {
        using Hasher = hashers::MurmurHash<T>;

        w = !seed ? 4294967295 : seed;

        // scramble until the initial state looks good
        for (uint8_t iter = 0; iter < 8; iter++) {
            x = Hasher::hash(w);
            y = Hasher::hash(x);
            z = Hasher::hash(y);
            w = Hasher::hash(z);
        }
    }

    template <class Result> __device__ inline constexpr Result next() noexcept;

private:
    T x; //< partial state x
    T y; //< partial state y
    T z; //< partial state z
    T w; //< partial state w
}; // class Kiss

/*! \brief \c std::uint64_t generator
 * \return uniform random \c std::uint64_t
 */
template <> template <> __device__ inline constexpr uint64_t Kiss<uint64_t>::next<uint64_t>() noexcept
{
    // lcg
    x = 6906969069ULL * x + 1234567;

    // xorshift
    y ^= y << 13;
    y ^= y >> 17;
    y ^= y << 43;

    // carry and multiply
    uint64_t t = (z << 58) + w;
    w          = (z >> 6);
    z += t;
    w += (z < t);

    // combine
    return x + y + z;
}
} // namespace kiss

template <class T, class Rng> __device__ void kernel(T *const out, const uint64_t n, const uint32_t seed)
{
    const uint32_t tid = blockDim.x * blockIdx.x + threadIdx.x;

    // generate initial local seed per thread
    const uint32_t local_seed = kiss::hashers::MurmurHash<uint32_t>::hash(seed + tid);

    Rng rng{local_seed};

    // grid-stride loop
    const auto grid_stride = blockDim.x * gridDim.x;
    for (uint64_t i = tid; i < n; i += grid_stride) {
        // generate random element and write to output
        out[i] = rng.template next<T>();
    }
}

extern "C" __global__ void kiss_u64(uint64_t *const out, const uint64_t n, const uint32_t seed)
{
    kernel<uint64_t, kiss::Kiss<uint64_t>>(out, n, seed);
}
