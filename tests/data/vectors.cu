// vectors.cu -- register classes and data types beyond .b32: vector loads and
// stores, f16 / f16x2 / bf16, 8- and 16-bit integers, 64-bit integer math,
// warp shuffles and votes, atomics with results, bar.red, shared arrays,
// a dynamically indexed local array (.local), and __ldg.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void k_vec(float4* o4, const float4* i4, int4* oi4, const int4* ii4,
                      double2* od2, const double2* id2)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    float4 f = i4[t];                       // ld.global.v4.f32
    int4 q = __ldg(&ii4[t]);                // ld.global.nc.v4.s32
    double2 d = id2[t];                     // ld.global.v2.f64
    o4[t] = make_float4(f.w, f.z * 2.0f, f.y + 1.0f, f.x);
    oi4[t] = make_int4(q.x + q.y, q.y - q.z, q.z * q.w, q.w ^ q.x);
    od2[t] = make_double2(d.x * d.y, d.x + d.y);   // st.global.v2.f64
}

__global__ void k_half(__half* oh, __half2* oh2, __nv_bfloat16* ob,
                       const __half* ih, const __half2* ih2, const __nv_bfloat16* ib)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    __half h = ih[t];
    __half2 h2 = ih2[t];
    __nv_bfloat16 b = ib[t];
    h = __hfma(h, __float2half(1.5f), __hadd(h, __float2half(0.25f)));
    h2 = __hfma2(h2, h2, __halves2half2(h, h));           // f16x2 arithmetic
    b = __hmul(b, __float2bfloat16(3.0f)) + ib[t + 1];
    oh[t] = h;
    oh2[t] = h2;
    ob[t] = b;
}

__global__ void k_small_int(char* oc, short* os, const char* ic, const short* is, int n)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    char c = ic[t];
    short s = is[t];
    for (int i = 0; i < n; ++i) {           // 8/16-bit values carried around a loop
        c = (char)(c * 3 + 1);
        s = (short)(s ^ (s << 1));
    }
    oc[t] = c;
    os[t] = s;
}

__global__ void k_int64(unsigned long long* out, const unsigned long long* in, long long k)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    unsigned long long x = in[t];
    unsigned long long y = x * 0x9E3779B97F4A7C15ull + (unsigned long long)k;
    y ^= y >> 31;
    y = y * (x | 1) + __umul64hi(x, y);
    out[t] = y / (x + 1) + y % 1000003ull;
}

__global__ void k_warp(int* out, const int* in)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int v = in[t];
    int s = v;
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, off);      // shfl.sync.down
    int b = __shfl_sync(0xffffffffu, v, 0);              // shfl.sync.idx
    unsigned bal = __ballot_sync(0xffffffffu, v > 0);    // vote.sync.ballot
    int any = __any_sync(0xffffffffu, v == 42);          // vote.sync.any
    out[t] = s + b + (int)bal + any;
}

__global__ void k_atomics(int* out, int* counter, int* lock, unsigned* slot, float* fsum, const int* in)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int v = in[t];
    int old_add = atomicAdd(counter, v);                 // atom.global.add (result used)
    int old_cas = atomicCAS(lock, 0, t + 1);             // atom.global.cas
    unsigned old_exch = atomicExch(slot + (t & 7), (unsigned)v);   // atom.global.exch
    float old_f = atomicAdd(fsum, (float)v);             // atom.global.add.f32
    out[t] = old_add + old_cas + (int)old_exch + (int)old_f;
}

__global__ void k_shared(int* out, const int* in)
{
    __shared__ int tile[256];
    __shared__ float ftile[16][17];
    int t = threadIdx.x;
    tile[t] = in[blockIdx.x * 256 + t];
    ftile[t & 15][t >> 4] = (float)t;
    __syncthreads();
    int c = __syncthreads_count(tile[t] > 0);            // bar.red.popc
    int r = tile[255 - t] + (int)ftile[t >> 4][t & 15];
    out[blockIdx.x * 256 + t] = r + c;
}

__global__ void k_local(int* out, const int* in, const int* idx)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int buf[16];                                         // dynamic index -> .local
    #pragma unroll
    for (int i = 0; i < 16; ++i) buf[i] = in[t * 16 + i];
    int j = idx[t] & 15;
    buf[j] += 7;
    out[t] = buf[(j * 5) & 15] + buf[idx[t + 1] & 15];
}
