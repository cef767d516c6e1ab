// Small local arrays for the memory-to-register pre-pass (issue 17, passes/promote.py).
// Built with -G (no optimization: every local array stays in local memory) and with -O3.
struct Pair { float x; int n; };

// constant indices only: promotable
__global__ void k_const(float *out, const float *in, int n) {
    float a[3];
    a[0] = in[0]; a[1] = in[1]; a[2] = in[2];
    float s = 0;
    for (int i = 0; i < n; i++) s += a[0] * in[i] + a[1] - a[2];
    out[threadIdx.x] = s;
}

// a dynamic index: stays in memory
__global__ void k_dynamic(float *out, const float *in, int n) {
    float acc[4];
    for (int j = 0; j < 4; j++) acc[j] = in[j];
    for (int i = 0; i < n; i++) acc[i & 3] += in[i];
    out[threadIdx.x] = acc[0] + acc[1];
}

// a struct and a double: mixed widths at distinct offsets, promotable
__global__ void k_struct(double *out, const float *in) {
    Pair p[2];
    double d[1];
    p[0].x = in[0]; p[0].n = 3;
    p[1].x = in[1]; p[1].n = 4;
    d[0] = p[0].x * p[1].n + p[1].x * p[0].n;
    out[threadIdx.x] = d[0];
}
