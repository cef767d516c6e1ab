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

// 20 comparisons computed up front and consumed in reverse order by a chain
// of selects in the same basic block: all 20 predicates are live at once.
// (NVVM sinks a comparison into the block of its use and turns predicates
// that cross a block boundary into .u16 values, so straight-line code is the
// way to get many simultaneously live %p registers out of nvcc.)
__global__ void k_preds(int* out, const int* a, const int* x, int lim)
{
    int t = threadIdx.x;
    bool p[20];
    #pragma unroll
    for (int i = 0; i < 20; ++i) p[i] = a[i * 32 + t] > lim + i;
    int s = x[t];
    #pragma unroll
    for (int i = 19; i >= 0; --i) s = p[i] ? (s * 3 + i) : (s ^ (i << 4));
    out[t] = s;
}

// the same comparisons guarding stores: NVVM sinks each setp next to its
// guarded store (one predicate live at a time) and keeps the loaded values
// live instead -- 20 ints live across a barrier, and a chain of 20 diamonds.
__global__ void k_guarded_stores(int* out, const int* a, int lim)
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
