"""Prepacked (oneDNN) linears: the same products as F.linear, refused where they are not, and an
engine that prepacks decodes exactly what the plain lean forward decodes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from goose.engine.core.decode import generate
from goose.engine.core.drafter import ARDrafter
from goose.engine.forward.choose import verification_engine
from goose.engine.forward.packed_linear import (
    EMULATED_BF16_MAX_ROWS,
    PackedLinear,
    PlainLinear,
    make_linear,
    native_bf16,
    prepack_unavailable,
)
from tests.tiny_models import tiny_model

AVAILABLE = prepack_unavailable(torch.zeros(2, 2)) is None
needs_prepack = pytest.mark.skipif(not AVAILABLE, reason="no oneDNN prepacking in this torch build")


@needs_prepack
@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_product_equals_f_linear_fp32(rows, bias):
    gen = torch.Generator().manual_seed(rows)
    w = torch.randn(96, 40, generator=gen)
    b = torch.randn(96, generator=gen) if bias else None
    x = torch.randn(1, rows, 40, generator=gen)
    got = PackedLinear.build(w, b)(x)
    assert got.shape == (1, rows, 96)
    assert torch.allclose(got, F.linear(x, w, b), rtol=1e-5, atol=1e-5)


@needs_prepack
def test_packed_product_bf16_close_to_f_linear():
    if prepack_unavailable(torch.zeros(2, 2, dtype=torch.bfloat16)):
        pytest.skip("no oneDNN bf16 on this CPU")
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(64, 32, generator=gen).bfloat16()
    x = torch.randn(1, 5, 32, generator=gen).bfloat16()
    want = F.linear(x, w).float()
    assert torch.allclose(PackedLinear.build(w)(x).float(), want, rtol=2e-2, atol=2e-2)


@needs_prepack
@pytest.mark.parametrize("rows", [1, 2, 3, 17])
def test_bf16_weight_packed_for_fp32_compute_rounds_like_a_bf16_product(rows):
    """The AVX2 path (forced here, so that it is tested on every CPU): few rows go to F.linear on
    the bf16 weight itself; more rows are the fp32 product of the upcast bf16 values rounded to
    bf16, i.e. a bf16 product with fp32 sums: within one bf16 rounding of the exact product."""
    gen = torch.Generator().manual_seed(rows)
    w = torch.randn(96, 40, generator=gen).bfloat16()
    b = torch.randn(96, generator=gen).bfloat16()
    x = torch.randn(1, rows, 40, generator=gen).bfloat16()
    linear = PackedLinear.build(w, b, fp32_compute=True)
    assert linear.fp32_compute and linear.packed.dtype == torch.float32
    got = linear(x)
    assert got.dtype == torch.bfloat16 and got.shape == (1, rows, 96)
    if rows <= EMULATED_BF16_MAX_ROWS:
        assert torch.equal(got, F.linear(x, w, b))
    else:
        exact = F.linear(x.double(), w.double(), b.double())
        ulp = exact.abs().float() * 2**-7  # bf16 keeps 8 significant bits
        assert bool(((got.double() - exact).abs() <= ulp.double() + 1e-6).all())
        # and not a product of truncated inputs: rounding x to 4 bits misses the bound somewhere
        crude = F.linear(x.double().mul(16).round().div(16), w.double(), b.double())
        assert not bool(((crude - exact).abs() <= ulp.double() + 1e-6).all())


def test_bf16_fp32_compute_is_automatic_only_without_bf16_kernels():
    if prepack_unavailable(torch.zeros(2, 2, dtype=torch.bfloat16)):
        pytest.skip("no oneDNN prepacking in this torch build")
    w = torch.randn(8, 4).bfloat16()
    assert PackedLinear.build(w).fp32_compute is (not native_bf16())
    assert not PackedLinear.build(w.float()).fp32_compute
    with pytest.raises(RuntimeError, match="fp32_compute is for bfloat16 weights"):
        PackedLinear.build(w.float(), fp32_compute=True)


@needs_prepack
@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
def test_bf16_engine_with_fp32_compute_decodes_like_the_plain_lean_forward(arch, monkeypatch):
    """A bf16 tiny model whose packed weights run as fp32 (as on an AVX2 CPU): every projection
    and the LM head take that path, AR decodes what the plain lean forward decodes, and the
    16-row prefill (fp32 products) gives its logits within bf16 rounding."""
    import goose.engine.forward.packed_linear as pl

    monkeypatch.setattr(pl, "native_bf16", lambda: False)
    model = tiny_model(arch, seed=5, dtype=torch.bfloat16)
    engine = verification_engine(model, eos_token_ids=(), prepack=True)
    assert engine.forward_name == "lean+prepack"
    layer = engine.lean.layers[0]
    linears = [engine.lean.lm_head, layer.qkv_proj, layer.o_proj, layer.gate_up_proj, layer.down_proj]
    assert all(isinstance(lin, PackedLinear) for lin in linears)
    assert len(linears) == 5 and all(lin.fp32_compute for lin in linears)
    prompt = list(range(3, 19))
    a = generate(engine, ARDrafter(), prompt, max_new_tokens=12)
    plain = verification_engine(model, eos_token_ids=(), prepack=False)
    b = generate(plain, ARDrafter(), prompt, max_new_tokens=12)
    assert a.output_ids == b.output_ids  # one-row steps take F.linear on the bf16 weights either way
    wide = engine.prefill(prompt).float()  # 16 rows: the fp32-compute products
    ref = plain.prefill(prompt).float()
    assert torch.allclose(wide, ref, rtol=3e-2, atol=3e-2)


def test_unavailable_reasons_name_the_cause():
    assert "float16" in prepack_unavailable(torch.zeros(2, 2, dtype=torch.float16))
    assert "meta" in prepack_unavailable(torch.zeros(2, 2, device="meta"))
    assert isinstance(make_linear(torch.zeros(3, 2), None, prepack=False), PlainLinear)
    with pytest.raises(RuntimeError, match="cannot prepack: dtype torch.float16"):
        PackedLinear.build(torch.zeros(3, 2, dtype=torch.float16))


@needs_prepack
def test_a_pack_that_disagrees_with_f_linear_is_refused(monkeypatch):
    real = PackedLinear.__call__
    monkeypatch.setattr(PackedLinear, "__call__", lambda self, x: real(self, x) * 1.01)
    with pytest.raises(RuntimeError, match="disagrees with F.linear"):
        PackedLinear.build(torch.randn(16, 8))


@needs_prepack
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_prepacked_engine_decodes_like_the_plain_lean_forward(arch):
    model = tiny_model(arch, seed=4)
    packed = verification_engine(model, eos_token_ids=(), prepack=True)
    plain = verification_engine(model, eos_token_ids=(), prepack=False)
    assert packed.forward_name == "lean+prepack" and plain.forward_name == "lean"
    assert verification_engine(model, eos_token_ids=(), lean=False).forward_name == "transformers"
    prompt = list(range(3, 19))
    assert torch.allclose(packed.prefill(prompt), plain.prefill(prompt), atol=1e-4)
    a = generate(packed, ARDrafter(), prompt, max_new_tokens=16)
    b = generate(plain, ARDrafter(), prompt, max_new_tokens=16)
    assert a.output_ids == b.output_ids


def test_prepack_required_where_it_cannot_run_is_a_clear_error():
    model = tiny_model("llama", dtype=torch.float16)
    with pytest.raises(ValueError, match="prepack=true: dtype torch.float16"):
        verification_engine(model, eos_token_ids=(), prepack=True)
    auto = verification_engine(model, eos_token_ids=())  # auto falls back to the plain lean forward
    assert auto.forward_name == "lean"
