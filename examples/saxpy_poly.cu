// saxpy_poly.cu -- the example for `ptxalloc allocate examples/saxpy_poly.ptx`.
//
// y[i] = a * x[i] + y[i] + poly(c, x[i])   over a grid-stride loop.
// poly() is a separate (non-inlined) device function with its own loop, so the
// PTX has: a call inside a loop (a, n, stride and the pointers are live across
// the call), a loop-carried accumulator in poly(), and .param-based arguments.
//
// Regenerate:  nvcc -ptx -arch=sm_90 -O3 saxpy_poly.cu -o saxpy_poly.ptx

// Horner evaluation of c[0] + c[1] x + ... + c[n-1] x^(n-1)
__device__ __noinline__ float poly(const float* c, int n, float x)
{
    float r = 0.0f;
    #pragma unroll 1
    for (int k = n - 1; k >= 0; --k)
        r = fmaf(r, x, c[k]);
    return r;
}

__global__ void saxpy_poly(float* y, const float* x, const float* c, int n_coef,
                           float a, int n)
{
    int stride = blockDim.x * gridDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float xi = x[i];
        float p = poly(c, n_coef, xi);
        y[i] = fmaf(a, xi, y[i]) + p;
    }
}
