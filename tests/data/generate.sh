#!/usr/bin/env bash
# Regenerate every tests/data/*.ptx from its .cu with the exact nvcc commands
# used for the checked-in files (CUDA 13.0, nvcc V13.0.88).
# Usage: tests/data/generate.sh   (from anywhere)
set -e
cd "$(dirname "$0")"

# calls: -rdc=true keeps the __noinline__ helpers as (visible) .func with real calls
nvcc -ptx -arch=sm_75 -O3 -rdc=true calls.cu -o calls_sm75.ptx
nvcc -ptx -arch=sm_80 -O3 -rdc=true calls.cu -o calls_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 -rdc=true calls.cu -o calls_sm90.ptx

nvcc -ptx -arch=sm_80 -O3 -rdc=true loops.cu -o loops_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 -rdc=true loops.cu -o loops_sm90.ptx

nvcc -ptx -arch=sm_80 -O3 pressure.cu -o pressure_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 pressure.cu -o pressure_sm90.ptx

nvcc -ptx -arch=sm_80 -O3 vectors.cu -o vectors_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 vectors.cu -o vectors_sm90.ptx

nvcc -ptx -arch=sm_80 -O3 tensor.cu -o tensor_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 tensor.cu -o tensor_sm90.ptx

nvcc -ptx -arch=sm_80 -O3 texture.cu -o texture_sm80.ptx

nvcc -ptx -arch=sm_75 -O3 misc.cu -o misc_sm75.ptx
nvcc -ptx -arch=sm_80 -O3 misc.cu -o misc_sm80.ptx
nvcc -ptx -arch=sm_90 -O3 misc.cu -o misc_sm90.ptx

# the README example (whole-program mode: __noinline__ alone keeps poly() a .func)
nvcc -ptx -arch=sm_90 -O3 ../../examples/saxpy_poly.cu -o ../../examples/saxpy_poly.ptx

# diff: two builds of one module, the second with more accumulators live (more pressure)
nvcc -ptx -arch=sm_90 -O3 -DACC=16 diff/acc.cu -o diff/acc16_sm90.ptx
nvcc -ptx -arch=sm_90 -O3 -DACC=24 diff/acc.cu -o diff/acc24_sm90.ptx

# locals: small local arrays for the memory-to-register pre-pass; -G keeps them in memory
nvcc -ptx -arch=sm_80 -G locals.cu -o locals_G_sm80.ptx
nvcc -ptx -arch=sm_80 -O3 locals.cu -o locals_sm80.ptx
