/*
 * Source: NVIDIA/cuda-samples, Samples/5_Domain_Specific/nbody/bodysystemcuda.cu, integrateBodies<T>(),
 *         computeBodyAccel<T>(), bodyBodyInteraction<T>(), rsqrt_T<T>(), getSofteningSquared<T>(),
 *         struct SharedMemory<T>, and bodysystem.h, vec3<T> / vec4<T>
 * License: BSD-3-Clause (cuda-samples LICENSE, Copyright (c) 2022 NVIDIA Corporation)
 * Changes:
 *   - the templates are instantiated by hand for float: extern "C" wrapper integrateBodies_float() calls
 *     integrateBodies<float>() (which became a __device__ template)
 *   - rsqrt_T<float>: rsqrtf(x) -> 1.0f / sqrtf(x) (rsqrt.approx's bits are not published, and the suite's
 *     expected values are exact; 1.0f / sqrtf is two correctly rounded operations)
 *   - __constant__ float softeningSquared gets its value by an initializer, 0.00125f * 0.00125f (the
 *     host's setSoftening(0.00125f) squares it and copies it with cudaMemcpyToSymbol); the double
 *     specialisations of rsqrt_T / getSofteningSquared / vec3 / vec4 removed (unused here)
 *   - the tile loop's "#pragma unroll 128" -> "#pragma unroll 4" (128 copies of the interaction do not fit the
 *     machine's 1024-row program ROM)
 *   - cooperative groups: the cg::thread_block argument of computeBodyAccel removed, cg::sync(cta) ->
 *     __syncthreads(); #include <cooperative_groups.h>, <helper_cuda.h> and the headers removed
 *   - launch: 8 bodies, 2 blocks of 4 threads (numTiles 2: each block walks both tiles of 4 bodies
 *     through shared memory), deltaTime 0.016, damping 0.995 (the sample's demo values are similar);
 *     dynamic shared memory 4 float4 = 64 bytes
 */
template <typename T> struct vec3
{
    typedef float Type;
}; // dummy
template <> struct vec3<float>
{
    typedef float3 Type;
};

template <typename T> struct vec4
{
    typedef float Type;
}; // dummy
template <> struct vec4<float>
{
    typedef float4 Type;
};

template <class T> struct SharedMemory
{
    __device__ inline operator T *()
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }

    __device__ inline operator const T *() const
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
};

__constant__ float softeningSquared = 0.00125f * 0.00125f;

template <typename T> __device__ T rsqrt_T(T x);
template <> __device__ float rsqrt_T<float>(float x) { return 1.0f / sqrtf(x); }

template <typename T> __device__ T getSofteningSquared() { return softeningSquared; }

template <typename T>
__device__ typename vec3<T>::Type
bodyBodyInteraction(typename vec3<T>::Type ai, typename vec4<T>::Type bi, typename vec4<T>::Type bj)
{
    typename vec3<T>::Type r;

    // r_ij  [3 FLOPS]
    r.x = bj.x - bi.x;
    r.y = bj.y - bi.y;
    r.z = bj.z - bi.z;

    // distSqr = dot(r_ij, r_ij) + EPS^2  [6 FLOPS]
    T distSqr = r.x * r.x + r.y * r.y + r.z * r.z;
    distSqr += getSofteningSquared<T>();

    // invDistCube =1/distSqr^(3/2)  [4 FLOPS (2 mul, 1 sqrt, 1 inv)]
    T invDist     = rsqrt_T(distSqr);
    T invDistCube = invDist * invDist * invDist;

    // s = m_j * invDistCube [1 FLOP]
    T s = bj.w * invDistCube;

    // a_i =  a_i + s * r_ij [6 FLOPS]
    ai.x += r.x * s;
    ai.y += r.y * s;
    ai.z += r.z * s;

    return ai;
}

template <typename T>
__device__ typename vec3<T>::Type
computeBodyAccel(typename vec4<T>::Type bodyPos, typename vec4<T>::Type *positions, int numTiles)
{
    typename vec4<T>::Type *sharedPos = SharedMemory<typename vec4<T>::Type>();

    typename vec3<T>::Type acc = {0.0f, 0.0f, 0.0f};

    for (int tile = 0; tile < numTiles; tile++) {
        sharedPos[threadIdx.x] = positions[tile * blockDim.x + threadIdx.x];

        __syncthreads();

        // This is the "tile_calculation" from the GPUG3 article.
#pragma unroll 4

        for (unsigned int counter = 0; counter < blockDim.x; counter++) {
            acc = bodyBodyInteraction<T>(acc, bodyPos, sharedPos[counter]);
        }

        __syncthreads();
    }

    return acc;
}

template <typename T>
__device__ void integrateBodies(typename vec4<T>::Type *__restrict__ newPos, typename vec4<T>::Type *__restrict__ oldPos,
                                typename vec4<T>::Type *vel, unsigned int deviceOffset, unsigned int deviceNumBodies,
                                float deltaTime, float damping, int numTiles)
{
    int index = blockIdx.x * blockDim.x + threadIdx.x;

    if (index >= deviceNumBodies) {
        return;
    }

    typename vec4<T>::Type position = oldPos[deviceOffset + index];

    typename vec3<T>::Type accel = computeBodyAccel<T>(position, oldPos, numTiles);

    // acceleration = force / mass;
    // new velocity = old velocity + acceleration * deltaTime
    // note we factor out the body's mass from the equation, here and in
    // bodyBodyInteraction (because they cancel out).  Thus here force ==
    // acceleration
    typename vec4<T>::Type velocity = vel[deviceOffset + index];

    velocity.x += accel.x * deltaTime;
    velocity.y += accel.y * deltaTime;
    velocity.z += accel.z * deltaTime;

    velocity.x *= damping;
    velocity.y *= damping;
    velocity.z *= damping;

    // new position = old position + velocity * deltaTime
    position.x += velocity.x * deltaTime;
    position.y += velocity.y * deltaTime;
    position.z += velocity.z * deltaTime;

    // store new position and velocity
    newPos[deviceOffset + index] = position;
    vel[deviceOffset + index]    = velocity;
}

extern "C" __global__ void integrateBodies_float(float4 *__restrict__ newPos, float4 *__restrict__ oldPos,
                                                 float4 *vel, unsigned int deviceOffset,
                                                 unsigned int deviceNumBodies, float deltaTime, float damping,
                                                 int numTiles)
{
    integrateBodies<float>(newPos, oldPos, vel, deviceOffset, deviceNumBodies, deltaTime, damping, numTiles);
}
