// texture.cu -- texture and surface objects: tex.2d, suld.b.2d, sust.b.2d.
// The object handles arrive as .u64 kernel parameters.

__global__ void k_tex(float4* out, cudaTextureObject_t tex, int w, float scale)
{
    int x = threadIdx.x + blockIdx.x * blockDim.x;
    int y = blockIdx.y;
    float u = (x + 0.5f) * scale, v = (y + 0.5f) * scale;
    float4 a = tex2D<float4>(tex, u, v);            // tex.2d.v4.f32.f32
    float4 b = tex2D<float4>(tex, u + 1.0f, v);
    out[y * w + x] = make_float4(a.x + b.x, a.y + b.y, a.z - b.z, a.w * b.w);
}

__global__ void k_surf(cudaSurfaceObject_t dst, cudaSurfaceObject_t src, int w, int h)
{
    int x = threadIdx.x + blockIdx.x * blockDim.x;
    int y = threadIdx.y + blockIdx.y * blockDim.y;
    if (x >= w || y >= h) return;
    float v = surf2Dread<float>(src, x * 4, y);                       // suld.b.2d.b32
    float n = surf2Dread<float>(src, ((x + 1) % w) * 4, y, cudaBoundaryModeClamp);
    surf2Dwrite(0.5f * (v + n), dst, x * 4, y);                       // sust.b.2d.b32
    uchar4 c = surf2Dread<uchar4>(src, x * 4, y, cudaBoundaryModeZero);  // suld.b.2d.v4.b8
    surf2Dwrite(make_uchar4(c.w, c.z, c.y, c.x), dst, x * 4, (y + 1) % h);
}
