/*
 * Source: zjin-lcf/HeCBench, src/mandelbrot-cuda/mandel.hpp, mandel() and struct MandelParameters
 *         (ScaleRow(), ScaleCol(), Point()), typedef ComplexF (from Intel's oneAPI Mandelbrot sample)
 * License: MIT (the file's header: Copyright (c) 2019 Intel Corporation, SPDX-License-Identifier: MIT)
 * Changes:
 *   - extern "C" added; __host__ dropped from the member functions (no host code here); the constructor
 *     and accessors of MandelParameters removed (the host fills the struct: row_count_, col_count_,
 *     max_iterations_ as three ints)
 *   - #include lines (<exception>, <iomanip>, <iostream>, <cuda.h>) removed
 *   - "auto r = z.real" -> "float r = z.real" (same type, spelled out)
 *   - launch: a 4 x 3 image (row_count 4, col_count 3), max_iterations 6 (was 1080 x 1920 and 100),
 *     2-D grid (1, 2) of 2-D blocks (4, 2) (was THREADS_PER_BLOCK_X/Y 16); 4 threads fail j < cols
 */
// define a type of floating-point complex number
typedef struct {
    float real;
    float imag;
} ComplexF;

struct MandelParameters {
    int row_count_;
    int col_count_;
    int max_iterations_;

    // scale from 0..row_count to -1.5..0.5
    __device__ float ScaleRow(int i) const { return -1.5f + (i * (2.0f / row_count_)); }

    // scale from 0..col_count to -1..1
    __device__ float ScaleCol(int i) const { return -1.0f + (i * (2.0f / col_count_)); }

    // mandelbrot set are points that do not diverge within max_iterations
    __device__ int Point(const ComplexF &c) const
    {
        int      count = 0;
        ComplexF z     = {0, 0};
        for (int i = 0; i < max_iterations_; ++i) {
            float r  = z.real;
            float im = z.imag;
            // leave loop if diverging
            if (((r * r) + (im * im)) >= 4.0f) {
                break;
            }
            // z = z * z + c;
            z.real = r * r - im * im + c.real;
            z.imag = 2 * r * im + c.imag;

            count++;
        }
        return count;
    }
};

extern "C" __global__ void mandel(int *b, const MandelParameters *p, const int rows, const int cols)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    int j = blockDim.y * blockIdx.y + threadIdx.y;
    if (i < rows && j < cols)
        b[i * cols + j] = p->Point({p->ScaleRow(i), p->ScaleCol(j)});
}
