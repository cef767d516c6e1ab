// loops.cu -- control flow for liveness: nested loops, back-edge-live values,
// non-unrolled loops, a big dense switch (jump table -> brx.idx?), early exits.

// depth-3 loop nest
__global__ void k_nest3(float* out, const float* a, int n0, int n1, int n2)
{
    float acc = 0.0f;
    for (int i = 0; i < n0; ++i)
        for (int j = 0; j < n1; ++j)
            for (int k = 0; k < n2; ++k)
                acc += a[(i * n1 + j) * n2 + k] * (float)(i + j - k);
    out[threadIdx.x] = acc;
}

// values carried around the back edge (fibonacci-like recurrence, not unrollable)
__global__ void k_backedge(unsigned* out, const unsigned* seed, int n)
{
    unsigned x = seed[threadIdx.x], y = x ^ 0x9e3779b9u;
    #pragma unroll 1
    for (int i = 0; i < n; ++i) {
        unsigned t = x + y;
        x = y;
        y = (t << 7) | (t >> 25);
    }
    out[threadIdx.x] = x ^ y;
}

// big dense switch: a candidate for a jump table
__device__ __noinline__ int dense_switch(int v, int w)
{
    switch (v) {
    case 0:  return w + 11;      case 1:  return w * 13;
    case 2:  return w - 17;      case 3:  return w ^ 19;
    case 4:  return w << 3;      case 5:  return w >> 2;
    case 6:  return w | 0x100;   case 7:  return w & 0xff;
    case 8:  return w * w;       case 9:  return w + w * 5;
    case 10: return ~w;          case 11: return -w;
    case 12: return w / 7;       case 13: return w % 9;
    case 14: return w * 3 + 1;   case 15: return w * 5 - 2;
    case 16: return w + 101;     case 17: return w * 103;
    case 18: return w - 107;     case 19: return w ^ 109;
    case 20: return w << 5;      case 21: return w >> 4;
    case 22: return w | 0x2000;  case 23: return w & 0xfff;
    default: return 0;
    }
}

__global__ void k_switch(int* out, const int* sel, const int* val)
{
    int t = threadIdx.x;
    out[t] = dense_switch(sel[t], val[t]);
}

// early exits: return and break inside loops
__global__ void k_early(int* out, const int* a, int n, int key)
{
    int t = threadIdx.x;
    int found = -1;
    for (int i = 0; i < n; ++i) {
        int v = a[i * 32 + t];
        if (v == key) { found = i; break; }
        if (v < 0) { out[t] = -2; return; }     // early return from the kernel
        for (int j = 0; j < 4; ++j) {
            if (a[v + j] == key + j) { out[t] = 1000 + i; return; }
        }
    }
    out[t] = found;
}
