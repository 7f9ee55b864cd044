"""What a kernel is and how big its problem is: classes, families and tiles from made-up
kernel names, and the FLOP and byte formulas from made-up shapes."""

from __future__ import annotations

import math

import pytest

from traces.atrace.analysis.kernel_sizes import (
    classify,
    gemm_tile,
    kernel_family,
    kernel_size,
    launch_key,
    launch_threads,
    tile_work,
)
from traces.atrace.model.trace import Kind


@pytest.mark.parametrize(("name", "library", "tile"), [
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1_AFC1", "hipblaslt", (128, 256, 32)),
    ("Cijk_Ailk_Bjlk_SB_MT64x16x16_MI16x16x1_SN", "hipblaslt", (64, 16, 16)),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x32x8_stage3",
     "cudnn", (64, 32, 8)),
    ("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8>(Params)",
     "cutlass", (256, 128, 32)),
    ("ampere_sgemm_64x32_sliced1x4_nn", "cublas", (64, 32)),
    ("volta_hgemm_256x128_tn", "cublas", (256, 128)),
    ("triton_tem_fused_mm_7", "triton", None),
    ("_ZN7ck_tile6kentryILi2ENS_13FmhaFwdKernel", "ck", None),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)", "flash", None),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)", "pytorch", None),
    ("my_custom_kernel", "other", None),
])
def test_library_and_tile_from_made_up_kernel_names(name, library, tile):
    assert kernel_family(name)[0] == library
    assert gemm_tile(name) == tile


def test_a_family_drops_arguments_and_instance_numbers_but_keeps_template_and_tile():
    a = kernel_family("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, x)")
    b = kernel_family("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, y)")
    c = kernel_family("void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<float>>(int, y)")
    assert a == b != c  # call arguments do not count; the vector width does
    assert kernel_family("triton_poi_fused_add_3") == kernel_family("triton_poi_fused_add_12") == \
        ("triton", "triton_poi_fused_add")
    assert kernel_family("Cijk_A_MT128x128x32_X")[1] != kernel_family("Cijk_A_MT256x128x32_X")[1]
    assert kernel_family("void (anonymous namespace)::k<int>(int)")[1] == "k<int>"
    # the views Inductor fused into a kernel are not part of its algorithm; a copy (clone) is
    assert kernel_family("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1") == \
        kernel_family("triton_red_fused_add_mean_mul_pow_rsqrt_0")
    assert kernel_family("triton_poi_fused_permute_view_add_2")[1] == "triton_poi_fused_add"
    assert kernel_family("triton_poi_fused_clone_view_5")[1] == "triton_poi_fused_clone"
    # a copy's memories are part of its family: pageable and pinned copies differ several-fold
    assert kernel_family("Memcpy HtoD (Pageable -> Device)") != kernel_family("Memcpy HtoD (Pinned -> Device)")
    assert kernel_family("Memset (Device)") == ("copy", "Memset (Device)")


@pytest.mark.parametrize(("name", "cls"), [
    ("triton_poi_fused_mul_silu_2", "elementwise"),
    ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "reduction"),
    ("triton_per_fused_softmax_1", "reduction"),
    ("triton_tem_fused_mm_0", "gemm"),
])
def test_triton_kernels_are_classed_by_their_generated_names(name, cls):
    assert classify(name, Kind.KERNEL, None) == cls


def test_launch_key_is_what_the_device_recorded():
    args = {"grid": [3, 169, 1], "block": [128, 1, 1], "registers per thread": 252, "shared memory": 67584}
    assert launch_key(args) == "[3, 169, 1]|[128, 1, 1]|252|67584"
    assert launch_key({}) == launch_key(None) == ""
    assert launch_threads(args) == 3 * 169 * 128
    assert math.isnan(launch_threads({"kind": "Dispatch Task"}))  # a graph's kernels record no launch


def test_tile_work_is_the_macro_tile_times_the_tiles_launched():
    cuda = {"grid": [3, 169, 1], "block": [128, 1, 1]}  # CUPTI: grid in thread blocks
    name = "sm80_xmma_fprop_implicit_gemm_tf32_tilesize128x128x16_stage4"
    assert tile_work(name, cuda) == 3 * 169 * 128 * 128
    rocm = {"grid": [350208, 1, 1], "block": [256, 1, 1], "kind": "Dispatch Kernel"}  # work-items
    assert tile_work("Cijk_Alik_Bljk_BBS_MT256x192x64_MI16x16x1", rocm) == 350208 // 256 * 256 * 192
    assert math.isnan(tile_work("fft2d_r2c_32x32<float>", cuda))  # no GEMM tile in its name
    assert math.isnan(tile_work(name, {}))  # no grid recorded


def _args(dims, types, concrete=None):
    out = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        out["Concrete Inputs"] = concrete
    return out


def test_gemm_formulas_for_mm_bmm_and_linear():
    mm = _args([[64, 128], [128, 32]], ["float", "float"])
    assert kernel_size("gemm", "k", None, "aten::mm", mm) == (2 * 64 * 128 * 32, 4 * (64 * 128 + 128 * 32 + 64 * 32))
    bmm = _args([[8, 16, 32], [8, 32, 64]], ["c10::Half", "c10::Half"])
    assert kernel_size("gemm", "k", None, "aten::bmm", bmm) == (
        2 * 8 * 16 * 32 * 64, 2 * (8 * 16 * 32 + 8 * 32 * 64 + 8 * 16 * 64))
    linear = _args([[4, 10, 256], [512, 256], [512]], ["c10::BFloat16"] * 3)  # weight [N, K]
    flops, nbytes = kernel_size("gemm", "k", None, "aten::linear", linear)
    assert flops == 2 * 40 * 256 * 512
    assert nbytes == 2 * (4 * 10 * 256 + 512 * 256 + 512 + 40 * 512)


def test_a_matrix_product_with_an_out_tensor_multiplies_its_first_two_inputs():
    # aten::mm.out records the output as a third input: [M, K] @ [K, N] -> [M, N]
    mm_out = _args([[32768, 2048], [2048, 8192], [32768, 8192]], ["c10::BFloat16"] * 3)
    flops, nbytes = kernel_size("gemm", "k", None, "aten::mm", mm_out)
    assert flops == 2 * 32768 * 2048 * 8192
    assert nbytes == 2 * (32768 * 2048 + 2048 * 8192 + 32768 * 8192)
    # addmm's first input is the bias, also when it is a matrix
    addmm = _args([[64, 32], [64, 128], [128, 32], [], []], ["float"] * 3 + ["Scalar"] * 2)
    assert kernel_size("gemm", "k", None, "aten::addmm", addmm)[0] == 2 * 64 * 128 * 32


def test_convolution_formula_reads_the_stride():
    conv = _args([[2, 3, 32, 32], [16, 3, 3, 3], [16]], ["float"] * 3, ["", "", "", "[2, 2]", "[1, 1]"])
    flops, nbytes = kernel_size("conv", "k", None, "aten::convolution", conv)
    assert flops == 2 * 2 * 16 * (16 * 16) * (3 * 3 * 3)
    assert nbytes == 4 * (2 * 3 * 32 * 32 + 16 * 27 + 16 + 2 * 16 * 16 * 16)
    unit = _args([[2, 3, 32, 32], [16, 3, 3, 3]], ["float"] * 2)
    assert kernel_size("conv", "k", None, "aten::convolution", unit)[0] == 4 * flops


def test_attention_formula_dense_causal_and_varlen():
    q = [2, 1024, 8, 64]  # [batch, seq, heads, dim]
    dense = _args([q, q, q], ["c10::BFloat16"] * 3, ["", "", "", "", "", "1024", "1024", "0.", "False"])
    flops, nbytes = kernel_size("attention", "k", None, "aten::_flash_attention_forward", dense)
    assert flops == 4 * 2 * 1024 * 8 * 1024 * 64
    assert nbytes == 2 * 4 * math.prod(q)
    causal = _args([q, q, q], ["c10::BFloat16"] * 3, ["", "", "", "", "", "1024", "1024", "0.", "True"])
    assert kernel_size("attention", "k", None, "aten::_flash_attention_forward", causal)[0] == flops / 2
    varlen = _args([[3000, 8, 64], [3000, 8, 64], [3000, 8, 64]], ["c10::Half"] * 3)
    assert kernel_size("attention", "k", None, "flash_attn::varlen_fwd", varlen)[0] == 4 * 3000 * 8 * 3000 * 64


def test_norms_elementwise_and_reductions_count_elements_and_tensors():
    norm = _args([[32, 4096], [4096], [4096], []], ["c10::BFloat16"] * 3 + ["Scalar"])
    assert kernel_size("reduction", "k", None, "aten::native_layer_norm", norm) == (
        32 * 4096, 2 * (32 * 4096 + 4096 + 4096 + 32 * 4096))
    total = _args([[1000, 10]], ["float"])
    assert kernel_size("reduction", "k", None, "aten::sum", total) == (10000, 4 * 2 * 10000)


def test_copies_take_bytes_or_size_and_unsized_compute_kernels_are_unknown():
    assert kernel_size("memory", "Memcpy DtoD", {"bytes": 1 << 20}, None, None) == (0.0, float(1 << 20))
    assert kernel_size("memory", "dma_request", {"size": 163840}, None, None) == (0.0, 163840.0)
    assert all(math.isnan(v) for v in kernel_size("memory", "Memcpy HtoD", {}, None, None))
    launch = {"grid": [3025, 1, 1], "block": [128, 1, 1]}
    assert all(math.isnan(v) for v in kernel_size("conv", "cudnn_ampere_scudnn_128x64", launch, None, None))
    # an elementwise kernel without shapes is sized by its launch: one element per thread
    assert kernel_size("elementwise", "k", launch, None, None) == (3025 * 128, 3025 * 128 * 8)
