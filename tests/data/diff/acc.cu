// acc.cu -- two builds of one module for `ptxalloc diff` (tests/unit/test_diff.py):
// k_acc keeps ACC float accumulators live around its loop, so the build with the larger ACC
// has more register pressure; k_copy is the same in both builds.
#ifndef ACC
#define ACC 16
#endif

__global__ void k_acc(float* out, const float* x, const float* w, int n)
{
    float acc[ACC];
    #pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = w[i];
    #pragma unroll 1
    for (int k = 0; k < n; ++k) {
        float v = x[k * blockDim.x + threadIdx.x];
        #pragma unroll
        for (int i = 0; i < ACC; ++i)
            acc[i] = fmaf(acc[i], v, (float)i);
    }
    #pragma unroll
    for (int i = 0; i < ACC; ++i) out[i * blockDim.x + threadIdx.x] = acc[i];
}

__global__ void k_copy(float* out, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * 2.0f;
}
