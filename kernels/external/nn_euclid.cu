/*
 * Source: yuhc/gpu-rodinia (Rodinia 3.1), cuda/nn/nn_cuda.cu, euclid() and typedef struct latLong
 * License: Rodinia license (cuda LICENSE, Copyright (c) 2008-2011 University of Virginia; BSD-style)
 * Changes:
 *   - extern "C" added; host code and #include lines removed
 *   - launch: 24 records, 2-D grid (2, 2) of 8 threads (globalId = blockDim.x * (gridDim.x * blockIdx.y +
 *     blockIdx.x) + threadIdx.x as the original; the last block is partial), target (lat, lng) = (30, 90)
 */
typedef struct latLong {
    float lat;
    float lng;
} LatLong;

extern "C" __global__ void euclid(LatLong *d_locations, float *d_distances, int numRecords, float lat, float lng)
{
    // int globalId = gridDim.x * blockDim.x * blockIdx.y + blockDim.x * blockIdx.x + threadIdx.x;
    int      globalId = blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x; // more efficient
    LatLong *latLong  = d_locations + globalId;
    if (globalId < numRecords) {
        float *dist = d_distances + globalId;
        *dist = (float)sqrt((lat - latLong->lat) * (lat - latLong->lat) + (lng - latLong->lng) * (lng - latLong->lng));
    }
}
