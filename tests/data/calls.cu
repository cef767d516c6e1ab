// calls.cu -- device-function calls, for the ABI / call-clobber paths of ptxalloc.
// Every helper is __noinline__ so that nvcc keeps a real `call` in the PTX;
// compile with -rdc=true so the helpers stay as .func (not internalised away).

struct Big {            // 16 bytes > 64 bits: returned through a .param .align 8 .b8 array
    long long a;
    int b;
    float c;
};

// leaf function: no calls inside
__device__ __noinline__ int leaf(int x) { return x * 3 + 1; }

// eight 32-bit arguments
__device__ __noinline__ int sum8(int a, int b, int c, int d, int e, int f, int g, int h)
{
    return a * 1 + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8;
}

// nine 32-bit arguments (one more than sum8)
__device__ __noinline__ int sum9(int a, int b, int c, int d, int e, int f, int g, int h, int i)
{
    return (a ^ b) + (c ^ d) + (e ^ f) + (g ^ h) - i;
}

// 64-bit arguments (double, long long, pointer) and a 64-bit result
__device__ __noinline__ long long mix64(double d, long long l, const long long* p)
{
    return (long long)(d * 2.0) + l * p[0] + p[1];
}

// struct result wider than 64 bits
__device__ __noinline__ Big make_big(long long a, int b, float c)
{
    Big r;
    r.a = a * 7;
    r.b = b + 1;
    r.c = c * 0.5f;
    return r;
}

// recursion
__device__ __noinline__ int fib(int n)
{
    if (n < 2) return n;
    return fib(n - 1) + fib(n - 2);
}

// tail call
__device__ __noinline__ int tail_g(int x) { return leaf(x) ^ 0x55; }
__device__ __noinline__ int tail_f(int x) { return tail_g(x + 1); }

// function-pointer targets for an indirect call
__device__ __noinline__ float op_add(float a, float b) { return a + b; }
__device__ __noinline__ float op_mul(float a, float b) { return a * b; }
typedef float (*binop_t)(float, float);
__device__ binop_t g_ops[2] = { op_add, op_mul };

__global__ void k_calls(int* out, const int* in, const long long* p64, double d)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int a = in[t];
    int b = in[t + 1];
    int live = a * b + 17;                    // live across every call below
    int s8 = sum8(a, b, a + 1, b + 1, a + 2, b + 2, a + 3, b + 3);
    int s9 = sum9(a, b, a + 1, b + 1, a + 2, b + 2, a + 3, b + 3, live);
    long long m = mix64(d, (long long)a, p64 + t);
    Big big = make_big(m, s8, (float)s9);
    int f = fib(a & 15);
    int tc = tail_f(b);
    out[t] = live + s8 + s9 + (int)m + (int)big.a + big.b + (int)big.c + f + tc;
}

__global__ void k_indirect(float* out, const float* x, const float* y, int which)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    binop_t op = g_ops[which & 1];
    float before = x[t] * 2.0f;              // computed before, used after the call
    float r = op(x[t], y[t]);
    out[t] = r + before;
}
