// pressure.cu -- kernels whose MaxLive exceeds the register budget of a small
// allocation: 64 and 128 float accumulators, 32 double accumulators (64-bit
// pairs), and a kernel with many predicates live at the same time.

// N accumulators all live around the back edge of the k loop.
template <int N>
__device__ __forceinline__ void accumulate(float* out, const float* x, const float* w, int n)
{
    float acc[N];
    #pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = w[i];
    #pragma unroll 1
    for (int k = 0; k < n; ++k) {
        float v = x[k * blockDim.x + threadIdx.x];
        #pragma unroll
        for (int i = 0; i < N; ++i)
            acc[i] = fmaf(acc[i], v, (float)i);   // N independent chains
    }
    #pragma unroll
    for (int i = 0; i < N; ++i) out[i * blockDim.x + threadIdx.x] = acc[i];
}

__global__ void k_acc64(float* out, const float* x, const float* w, int n)
{
    accumulate<64>(out, x, w, n);
}

__global__ void k_acc128(float* out, const float* x, const float* w, int n)
{
    accumulate<128>(out, x, w, n);
}

// 32 double accumulators = 64 32-bit registers' worth of 64-bit pairs
__global__ void k_acc_f64(double* out, const double* x, const double* w, int n)
{
    double acc[32];
    #pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = w[i];
    #pragma unroll 1
    for (int k = 0; k < n; ++k) {
        double v = x[k * blockDim.x + threadIdx.x];
        #pragma unroll
        for (int i = 0; i < 32; ++i) acc[i] = fma(acc[i], v, 1.0 / (i + 1));
    }
    #pragma unroll
    for (int i = 0; i < 32; ++i) out[i * blockDim.x + threadIdx.x] = acc[i];
}

// 20 comparisons computed up front, each one used later to guard a store.
// The barrier in between keeps the comparisons (and their inputs' loads) apart
// from their uses, so the predicates are live at the same time.
__global__ void k_preds(int* out, const int* a, int lim)
{
    int t = threadIdx.x;
    bool p[20];
    #pragma unroll
    for (int i = 0; i < 20; ++i) p[i] = a[i * 32 + t] > lim + i;
    __syncthreads();
    int base = a[640 + t];
    #pragma unroll
    for (int i = 0; i < 20; ++i)
        if (p[i]) out[i * 32 + t] = base + i;
}
