// misc.cu -- odds and ends the allocator must carry through unchanged: trap,
// exit, inline PTX with its own { .reg } scope, printf (vprintf call + .local
// buffer), assert (__assertfail), nanosleep, clock64, bit intrinsics, math.
#include <cstdio>
#include <cassert>

__global__ void k_trap_exit(int* out, const int* in)
{
    int t = threadIdx.x;
    int v = in[t];
    if (v == -1) __trap();                  // trap
    if (v == -2) asm volatile("exit;");     // exit
    int r;
    // inline PTX with a nested scope and its own register declarations
    asm("{\n\t"
        ".reg .u32 tmp;\n\t"
        ".reg .pred p;\n\t"
        "mul.lo.u32 tmp, %1, 3;\n\t"
        "setp.gt.u32 p, tmp, 100;\n\t"
        "selp.u32 %0, tmp, 100, p;\n\t"
        "}" : "=r"(r) : "r"(v));
    out[t] = r;
}

__global__ void k_printf_assert(const int* in, int n)
{
    int t = threadIdx.x;
    int v = in[t];
    assert(v < n);                          // call __assertfail
    if (v == 7)
        printf("thread %d saw %d (n=%d, f=%f)\n", t, v, n, (double)v * 0.5);  // call vprintf
}

__global__ void k_time(long long* out, int ns)
{
    long long t0 = clock64();               // mov %clock64
    __nanosleep(ns);                        // nanosleep.u32
    long long t1 = clock64();
    out[threadIdx.x] = t1 - t0;
}

__global__ void k_bits(unsigned* out, const unsigned* in)
{
    int t = threadIdx.x;
    unsigned a = in[t], b = in[t + 32];
    unsigned r = __popc(a) + __brev(b);                         // popc, brev
    r ^= __funnelshift_l(a, b, t & 31);                         // shf.l.wrap
    r += __byte_perm(a, b, 0x5140);                             // prmt
    r += min(a, b) * max((int)a, (int)b);                       // min.u32, max.s32
    r += (unsigned)__clz(a) + (unsigned)__ffs(b);
    out[t] = r;
}

__global__ void k_math(float* of, double* od, int* oi, const float* f, const double* d, const int* i)
{
    int t = threadIdx.x;
    float x = f[t], y = f[t + 32];
    of[t] = fmaf(x, y, 1.0f) + __fdividef(x, y) + rsqrtf(y) + fminf(x, y) + fmaxf(x, y);
    od[t] = sqrt(d[t]) + fma(d[t], d[t + 32], 2.0);
    int p = i[t], q = i[t + 32] | 1;
    unsigned up = (unsigned)p, uq = (unsigned)q;
    oi[t] = p / q + p % q + (int)(up / uq) + (int)(up % uq);    // div/rem s32 and u32
}
