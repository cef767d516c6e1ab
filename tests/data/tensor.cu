// tensor.cu -- tensor-core code: WMMA fragments (wmma.load/mma/store with long
// register lists) and, for sm_80+, inline-asm ldmatrix + mma.sync m16n8k16.
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

// one 16x16x16 tile per warp: half inputs, float accumulator
__global__ void k_wmma(float* c, const half* a, const half* b, int k_tiles)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    for (int k = 0; k < k_tiles; ++k) {     // accumulator live around the back edge
        wmma::load_matrix_sync(fa, a + k * 16, 16 * k_tiles);
        wmma::load_matrix_sync(fb, b + k * 16, 16 * k_tiles);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

#if __CUDA_ARCH__ >= 800
// ldmatrix.x4 from shared memory, then one mma.sync.m16n8k16 (f16 x f16 -> f32)
__global__ void k_mma(float* d, const half* a, const half* b)
{
    __shared__ __align__(16) half sa[16 * 16];
    __shared__ __align__(16) half sb[16 * 8];
    int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) sa[i] = a[i];
    for (int i = lane; i < 128; i += 32) sb[i] = b[i];
    __syncwarp();

    unsigned ra[4], rb[2];
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]);
    unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(lane % 8) * 16 + ((lane / 8) % 2) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(ra[0]), "=r"(ra[1]), "=r"(ra[2]), "=r"(ra[3]) : "r"(pa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(rb[0]), "=r"(rb[1]) : "r"(pb));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(acc[0]), "=f"(acc[1]), "=f"(acc[2]), "=f"(acc[3])
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                   "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
    int row = lane / 4, col = (lane % 4) * 2;
    d[row * 8 + col] = acc[0];
    d[row * 8 + col + 1] = acc[1];
    d[(row + 8) * 8 + col] = acc[2];
    d[(row + 8) * 8 + col + 1] = acc[3];
}
#endif
