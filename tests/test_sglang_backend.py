"""The atom_mxfp4 SGLang attention backend on hand-built ForwardBatches (CPU, torch kernels) against the oracle.

A batch of two requests goes prefill -> chunked prefill over a cached prefix (mixed with a one-token extend) ->
two decode steps, through the installed ``MiniMaxM3Attention.forward`` hook, for a dense and a sparse layer. The
module is a stand-in with identity projections (so the layer input is the fused row the oracle takes) and an
identity o_proj (so the output is the attention output the oracle returns).

Tolerance ``ROUNDED_TOL`` (as tests/test_layer.py derives it): against the oracle whose K, V and index-K are
rounded through the same MXFP4 codec, what is left is the bf16 rounding of q (2**-9 relative) and of the
output (2**-9), with a 2x band -> rel-L2 <= 2**-7.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

if importlib.util.find_spec("sglang") is None:  # only a missing SGLang skips; a broken install fails loudly
    pytest.skip("SGLang is not installed (scripts/install.d/30-sglang.sh installs it)", allow_module_level=True)
from sglang_env import torchvision_stand_in

with torchvision_stand_in.torchvision_stand_in():  # SGLang imports torchvision; no CPU wheel fits torch 2.13
    import sglang.srt.configs  # noqa: F401
    import sglang.srt.layers.attention.attention_registry  # noqa: F401
    import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401
    import sglang.srt.model_executor.pool_configurator  # noqa: F401
    import sglang.srt.models.minimax_m3  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    from sglang.srt.plugins import load_plugins

    load_plugins()  # SGLang's own loader: importlib.metadata entry points, then HookRegistry.apply_hooks()

from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

from atom_mxfp4.format import ScaleMode, dequantize_mxfp4, quantize_mxfp4
from atom_mxfp4.layer import SparseMXFP4Attention
from atom_mxfp4.model_patches.sglang.backend import AtomMXFP4AttnBackend
from atom_mxfp4.model_patches.sglang.pool import MXFP4MiniMaxKVPool
from atom_mxfp4.reference import attention_oracle

import _helpers as H

ROUNDED_TOL = 2.0 ** -7
SPARSE = {"sparse_attention_freq": [0, 1], "sparse_disable_index_value": [0, 1], "sparse_num_index_heads": 2,
          "sparse_index_dim": 128, "sparse_block_size": 128, "sparse_topk_blocks": 2, "sparse_init_block": 0,
          "sparse_local_block": 1, "sparse_score_type": "max"}
PAGES = {0: [3, 1, 4, 2], 1: [6, 5]}  # request -> its page ids, out of order on purpose (page 0: SGLang padding)
REQ_POOL_INDEX = {0: 2, 1: 0}  # request -> its row in req_to_token


def hf_config():
    from transformers import PretrainedConfig
    return PretrainedConfig(architectures=["MiniMaxM3SparseForCausalLM"], hidden_size=256, num_attention_heads=8,
                            num_key_value_heads=2, head_dim=128, rotary_dim=64, rope_theta=5e6, rms_norm_eps=1e-6,
                            max_position_embeddings=1024, qk_norm_type="per_head", use_gemma_norm=True,
                            sparse_attention_config=SPARSE)


class StandInAttention:
    """The attributes of SGLang's MiniMaxM3Attention that the backend reads; projections are column slices."""

    def __init__(self, layer_id, sparse, width_main, gen):
        self.attn = SimpleNamespace(layer_id=layer_id)
        self.is_sparse_attention_layer = sparse
        names = ["q_norm", "k_norm"] + (["index_q_norm", "index_k_norm"] if sparse else [])
        for name in names:
            setattr(self, name, SimpleNamespace(weight=(torch.randn(128, generator=gen) * 0.2).bfloat16()))
        self.qkv_proj = lambda h: (h[:, :width_main], None)
        self.index_qkv_proj = lambda h: (h[:, width_main:], None)
        self.o_proj = lambda x: (x, None)

    def weights(self):
        w = {"q_norm": self.q_norm.weight, "k_norm": self.k_norm.weight}
        if self.is_sparse_attention_layer:
            w.update(idx_q_norm=self.index_q_norm.weight, idx_k_norm=self.index_k_norm.weight)
        return w


def mxfp4_round(mode: ScaleMode):
    """The oracle's K / V / index-K rounded through the codec with the layer's scale mode (bit-exact to the cache)."""
    def round_trip(t):
        return dequantize_mxfp4(*quantize_mxfp4(t.float(), mode), dtype=torch.float64).to(t.dtype)
    return round_trip


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def make_setup(index_k_dtype="mxfp4", width=1024):
    """``width``: req_to_token's tokens per request (SGLang's: the context length + 4)."""
    req_to_token = torch.zeros(4, width, dtype=torch.int32)  # [max_reqs, max_context] slot ids
    for r, pages in PAGES.items():
        positions = torch.arange(len(pages) * 128)
        req_to_token[REQ_POOL_INDEX[r], : positions.numel()] = (
            torch.tensor(pages)[positions // 128] * 128 + positions % 128).int()
    pool = MXFP4MiniMaxKVPool(size=6 * 128, page_size=128, head_num=2, dense_layer_ids=[0], sparse_layer_ids=[1],
                              device="cpu", start_layer=0, end_layer=2, index_k_dtype=index_k_dtype)
    runner = SimpleNamespace(token_to_kv_pool=pool, req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
                             model_config=SimpleNamespace(hf_config=hf_config()))
    from sglang.srt.runtime_context import get_parallel
    with get_parallel().override(attn_tp_size=1):  # SGLang's own way to state the width without a launch
        backend = AtomMXFP4AttnBackend(runner, kernel_backend="torch")
    return backend, req_to_token


@pytest.fixture(scope="module")
def setup():
    return make_setup()


def forward_batch(backend, req_to_token, done, new):
    """Requests with ``done[r]`` cached tokens get ``new[r]`` tokens each (decode when all are 1)."""
    decode = all(n == 1 for n in new.values()) and any(d > 0 for d in done.values())
    rows = sorted(REQ_POOL_INDEX)
    pool_idx = torch.tensor([REQ_POOL_INDEX[r] for r in rows])
    positions = torch.cat([torch.arange(done[r], done[r] + new[r]) for r in rows])
    owner = torch.cat([torch.full((new[r],), REQ_POOL_INDEX[r]) for r in rows])
    seq_lens = torch.tensor([done[r] + new[r] for r in rows])
    kwargs = dict(forward_mode=ForwardMode.DECODE if decode else ForwardMode.EXTEND, batch_size=len(rows),
                  input_ids=torch.zeros(positions.numel(), dtype=torch.int64), req_pool_indices=pool_idx,
                  seq_lens=seq_lens, out_cache_loc=req_to_token[owner, positions].long(),
                  seq_lens_sum=int(seq_lens.sum()), positions=positions, seq_lens_cpu=seq_lens.clone())
    if not decode:
        kwargs.update(extend_seq_lens=torch.tensor([new[r] for r in rows], dtype=torch.int32),
                      extend_prefix_lens=torch.tensor([done[r] for r in rows], dtype=torch.int32),
                      extend_seq_lens_cpu=[new[r] for r in rows], extend_prefix_lens_cpu=[done[r] for r in rows],
                      extend_num_tokens=int(positions.numel()))
    return ForwardBatch(**kwargs)


def test_prefill_chunked_prefix_then_decode_match_the_oracle(setup):
    run_steps(*setup)


def test_decode_metadata_in_one_triton_launch_matches_the_oracle():
    """The fill a GPU server uses (runner_metadata.decode_filler: one Triton launch, here interpreted) through the
    same steps, on a map as SGLang sizes it (context + 4 tokens, not a multiple of 128): two decode steps refill one
    batch-size buffer in place, and each layer must see the new positions (torch's version counters bumped)."""
    import os

    from atom_mxfp4.kernels.triton.decode_metadata import decode_metadata
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton kernel on the CPU needs TRITON_INTERPRET=1")
    backend, req_to_token = make_setup(width=1028)
    backend._fill_decode = decode_metadata
    run_steps(backend, req_to_token)


def test_fp8_index_k_pool_prefill_then_decode_match_the_oracle():
    """A pool built with index_k_dtype fp8 (what ATOM_MXFP4_INDEX_K_DTYPE=fp8 asks for): the backend's layers take
    the pool's dtype and the output matches the oracle whose index-K goes through the fp8 codec."""
    from atom_mxfp4.cache import FP8IndexKCache
    from atom_mxfp4.index_k import IndexKDtype
    backend, req_to_token = make_setup("fp8")
    assert backend.configs[True].index_k_dtype is IndexKDtype.FP8
    assert isinstance(backend.pool.layer_caches(1)[2], FP8IndexKCache)
    run_steps(backend, req_to_token, index_round=H.index_k_round("fp8"))
    assert backend.pool.index_k_records[1].any()  # the fp8 records were written


def run_steps(backend, req_to_token, index_round=None):
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention  # the hooked class: forward is our AROUND hook
    gen = torch.Generator().manual_seed(7)
    lens = {0: 430, 1: 133}  # 4 blocks with a partial last page; 2 blocks
    modules, requests = {}, {}
    for layer_id, sparse in ((0, False), (1, True)):
        config = backend.configs[sparse]
        width_main = (config.num_q_heads + 2 * config.num_kv_heads) * 128
        modules[layer_id] = StandInAttention(layer_id, sparse, width_main, gen)
        spread = torch.exp(torch.randn(config.qkv_width, generator=gen) * 0.7)
        requests[layer_id] = {r: (torch.randn(n, config.qkv_width, generator=gen) * spread).bfloat16()
                              for r, n in lens.items()}
    steps = [{0: 300, 1: 130}, {0: 128, 1: 1}, {0: 1, 1: 1}, {0: 1, 1: 1}]  # prefill, chunk + extend-1, 2 decodes
    done = {0: 0, 1: 0}
    for step, new in enumerate(steps):
        fb = forward_batch(backend, req_to_token, done, new)
        backend.init_forward_metadata(fb)
        for layer_id, module in modules.items():
            config = backend.configs[module.is_sparse_attention_layer]
            hidden = torch.cat([requests[layer_id][r][done[r]: done[r] + new[r]] for r in sorted(new)])
            with forward_context(ForwardContext(attn_backend=backend)):  # what ModelRunner publishes per forward
                out = MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
            assert out.shape == (hidden.shape[0], config.num_q_heads * 128) and torch.isfinite(out.float()).all()
            refs = [attention_oracle(requests[layer_id][r][: done[r] + new[r]], module.weights(), config,
                                     query_positions=torch.arange(done[r], done[r] + new[r]),
                                     kv_round=mxfp4_round(config.scale_mode), index_k_round=index_round).out
                    for r in sorted(new)]
            ref = torch.cat(refs)
            if index_round is None or not module.is_sparse_attention_layer:
                err = rel_l2(out, ref)
                assert err <= ROUNDED_TOL, f"step {step} layer {layer_id}: rel-L2 {err:.3e} > {ROUNDED_TOL:.3e}"
            else:
                # the fp8 grid is fine enough that the oracle's fp64 idx_q / idx_k and the layer's bf16 idx_q /
                # fp32 idx_k round a near-tied block score differently for a few rows (2 of 128 here: a whole block
                # differs there); every other row is within the tolerance
                row_err = (out.double() - ref).norm(dim=-1) / ref.norm(dim=-1)
                off = int((row_err > ROUNDED_TOL).sum())
                assert off <= max(1, row_err.numel() // 25), f"step {step}: {off} of {row_err.numel()} rows off"
        done = {r: done[r] + new[r] for r in done}


def test_dense_prefill_as_flash_attention_matches_the_oracle(monkeypatch):
    """ATOM_MXFP4_FLASH_PREFILL_ROWS: the dense layer's prefill runs of >= 64 tokens by SDPA over the dequantized
    prefix (atom_mxfp4.prefill; segments from SGLang's host lists), decode rows by the decode kernel; the oracle's
    tolerance as every step."""
    from atom_mxfp4 import prefill
    from atom_mxfp4.model_patches.sglang.backend import FLASH_PREFILL_ENV

    calls, real = [], prefill._sdpa
    monkeypatch.setattr(prefill, "_sdpa", lambda *a: calls.append(a[0].shape[2]) or real(*a))
    monkeypatch.setenv(FLASH_PREFILL_ENV, "64")
    backend, req_to_token = make_setup()
    assert backend.configs[False].flash_prefill_rows == 64
    run_steps(backend, req_to_token)
    assert calls == [300, 130, 128]  # the dense layer's runs of the prefill and the chunk; not the 1-token extend


def test_a_bad_flash_prefill_setting_is_refused(monkeypatch):
    from atom_mxfp4.model_patches.sglang.backend import FLASH_PREFILL_ENV

    monkeypatch.setenv(FLASH_PREFILL_ENV, "-5")
    with pytest.raises(ValueError, match=f"{FLASH_PREFILL_ENV} must be unset or a whole number"):
        make_setup()


def test_decode_metadata_is_graph_stable(setup):
    """CUDA-graph contract: decode metadata lives in per-batch-size buffers allocated before capture and is
    refreshed in place by the static-shape ops of ``init_forward_metadata_in_graph``."""
    backend, req_to_token = setup
    backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4)
    fb = forward_batch(backend, req_to_token, {0: 200, 1: 150}, {0: 1, 1: 1})
    backend.init_forward_metadata_out_graph(fb, in_capture=True)
    captured = backend.forward_metadata
    pointers = [t.data_ptr() for t in (captured.positions, captured.slot_mapping, captured.block_table)]
    backend.init_forward_metadata_in_graph(fb)
    fb2 = forward_batch(backend, req_to_token, {0: 401, 1: 200}, {0: 1, 1: 1})  # "replay" with longer requests
    backend.init_forward_metadata_out_graph(fb2)
    backend.init_forward_metadata_in_graph(fb2)
    meta = backend.forward_metadata
    assert meta is captured
    assert pointers == [t.data_ptr() for t in (meta.positions, meta.slot_mapping, meta.block_table)]
    assert meta.positions.tolist() == [401, 200]
    assert meta.slot_mapping.tolist() == fb2.out_cache_loc.tolist()
    assert meta.block_table[0, :4].tolist() == PAGES[0] and meta.block_table[1, :2].tolist() == PAGES[1]


def _counting_make_plan(monkeypatch, backend):
    """Count the kernel backend's make_plan calls (its op table's: what ops.plan_pa_decode calls)."""
    from atom_mxfp4.backends import resolve_backend
    table = resolve_backend(backend.kernel_backend, "cpu")
    made, make_plan = [], table.make_plan
    monkeypatch.setattr(table, "make_plan", lambda *a, **k: made.append(make_plan(*a, **k)) or made[-1])
    return made


def test_one_plan_per_batch_beside_the_metadata(monkeypatch):
    """The pa_decode plan is built with the metadata, once per batch: an extend batch gets its own, built in
    init_forward_metadata; every layer of the step (dense and sparse) reuses it; no layer plans again."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention
    backend, req_to_token = make_setup()
    made = _counting_make_plan(monkeypatch, backend)
    gen = torch.Generator().manual_seed(13)
    modules = []
    for layer_id, sparse in ((0, False), (1, True)):
        config = backend.configs[sparse]
        modules.append(StandInAttention(layer_id, sparse, (config.num_q_heads + 2 * config.num_kv_heads) * 128, gen))
    for step, (done, new) in enumerate([({0: 0, 1: 0}, {0: 40, 1: 3}), ({0: 40, 1: 3}, {0: 2, 1: 1})]):
        fb = forward_batch(backend, req_to_token, done, new)
        backend.init_forward_metadata(fb)
        meta = backend.forward_metadata
        assert len(made) == step + 1 and list(meta.plans.values()) == [made[-1]]
        with forward_context(ForwardContext(attn_backend=backend)):
            for module in modules * 2:  # four layer calls: dense, sparse, dense, sparse
                config = backend.configs[module.is_sparse_attention_layer]
                hidden = torch.randn(fb.positions.numel(), config.qkv_width, generator=gen).bfloat16()
                MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
        assert len(made) == step + 1, f"step {step}: the layers planned again ({len(made)} plans)"
        plan = made[-1]
        assert plan.num_rows == fb.positions.numel() * backend.configs[True].num_kv_heads
        assert plan.max_table_width == max(meta.block_table.shape[1], backend.configs[True].topk)


def test_decode_buffers_share_one_plan_built_before_capture(monkeypatch):
    """CUDA-graph contract for the plan: init_cuda_graph_state builds one decode plan for the largest batch size (it
    covers every smaller one); the capture and replay paths (out_graph, in_graph) and the layers allocate none; a
    replay on the same buffers with new contents gives the output of fresh metadata (a plan of its own)."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    from atom_mxfp4.layer import AttentionMetadata
    backend, req_to_token = make_setup()
    made = _counting_make_plan(monkeypatch, backend)
    backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4)
    assert len(made) == 1 and made[0].num_rows == 4 * backend.configs[True].num_kv_heads
    assert all(meta.plans is backend._decode_plans for meta in backend._decode_buffers.values())
    gen = torch.Generator().manual_seed(14)
    config = backend.configs[True]
    module = StandInAttention(1, True, (config.num_q_heads + 2 * config.num_kv_heads) * 128, gen)
    # the prefix both requests decode after (an extend batch, its own plan)
    fb = forward_batch(backend, req_to_token, {0: 0, 1: 0}, {0: 300, 1: 150})
    backend.init_forward_metadata(fb)
    with forward_context(ForwardContext(attn_backend=backend)):
        MiniMaxM3Attention.forward(module, fb.positions, torch.randn(450, config.qkv_width, generator=gen).bfloat16(),
                                   fb)
    made.clear()
    for step in range(2):  # "capture" then "replay": the same decode buffers, new contents
        fb = forward_batch(backend, req_to_token, {0: 300 + step, 1: 150 + step}, {0: 1, 1: 1})
        backend.init_forward_metadata_out_graph(fb, in_capture=step == 0)
        backend.init_forward_metadata_in_graph(fb)
        graph_meta = backend.forward_metadata
        hidden = torch.randn(2, config.qkv_width, generator=gen).bfloat16()
        fresh = AttentionMetadata(*(t.clone() for t in (graph_meta.positions, graph_meta.slot_mapping,
                                                         graph_meta.token_request, graph_meta.block_table)))
        records = [cache.records.clone() for cache in backend.pool.layer_caches(1)]
        with forward_context(ForwardContext(attn_backend=backend)):
            out = MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
        assert len(made) == 0, "the capture / replay path or a layer made a plan"
        for cache, before in zip(backend.pool.layer_caches(1), records):  # the same step again, planned afresh
            cache.records.copy_(before)
        backend.forward_metadata = fresh
        with forward_context(ForwardContext(attn_backend=backend)):
            again = MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
        assert len(made) == 1 and list(fresh.plans.values()) == [made.pop()]  # fresh metadata planned for itself
        assert torch.equal(out.view(torch.int16), again.view(torch.int16)), f"step {step}"


def test_sglang_does_not_wrap_our_backend_in_its_minimax_hybrid(setup):
    from sglang.srt.layers.attention import attention_registry
    backend, _ = setup
    runner = SimpleNamespace(model_config=SimpleNamespace(hf_config=hf_config(), hf_text_config=hf_config()),
                             use_mla_backend=False)
    assert attention_registry.attn_backend_wrapper(runner, backend) is backend


def test_radixattention_path_is_refused(setup):
    backend, _ = setup
    with pytest.raises(RuntimeError, match="runs whole MiniMaxM3Attention layers"):
        backend.forward(None, None, None, SimpleNamespace(layer_id=3), None)


def test_backend_needs_the_mxfp4_pool(setup):
    runner = SimpleNamespace(token_to_kv_pool=object(), req_to_token_pool=None, model_config=None)
    with pytest.raises(TypeError, match="token_to_kv_pool must be an MXFP4MiniMaxKVPool"):
        AtomMXFP4AttnBackend(runner)


def test_attention_hook_passes_other_backends_through(setup):
    """Without our backend in the forward context, MiniMaxM3Attention.forward is SGLang's own."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention
    calls = []

    class Module:
        def forward_prepare(self, positions, hidden_states, forward_batch):
            calls.append("prepare")
            return "state"

        def forward_core(self, state):
            calls.append(state)
            return "sglang's output"

    assert MiniMaxM3Attention.forward(Module(), None, None, None) == "sglang's output"  # no forward context
    with forward_context(ForwardContext(attn_backend=SimpleNamespace())):
        assert MiniMaxM3Attention.forward(Module(), None, None, None) == "sglang's output"
    assert calls == ["prepare", "state"] * 2


def test_backend_refuses_to_start_without_its_hooks(setup, monkeypatch):
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention
    backend, _ = setup
    monkeypatch.setattr(MiniMaxM3Attention, "forward", MiniMaxM3Attention.forward.__wrapped__)  # SGLang's own
    runner = SimpleNamespace(token_to_kv_pool=backend.pool, req_to_token_pool=None, model_config=None)
    with pytest.raises(RuntimeError, match="hooks must be applied by sglang.srt.plugins.load_plugins.*minimax_m3"):
        AtomMXFP4AttnBackend(runner)


def test_attention_is_an_eager_break_of_prefill_graphs_and_padding_rows_stay_out(setup):
    """Regression (the H200 'serve for real' run): with SGLang's breakable prefill CUDA graphs the whole attention
    module was captured, so a replay read the capture batch's metadata (index out of bounds at the first prompt).
    The layer's attention is now an ``eager_on_graph`` break: at replay it runs eagerly on the metadata of the
    served batch, whose ``n`` real tokens come first in a bucket padded to the captured size; the padding rows get
    zeros and write no cache slot."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    from atom_mxfp4.model_patches.sglang import backend as backend_module
    assert callable(getattr(backend_module._attend, "run_eager", None))  # what eager_on_graph adds to a break
    backend, req_to_token = setup
    gen = torch.Generator().manual_seed(11)
    config = backend.configs[True]
    module = StandInAttention(1, True, (config.num_q_heads + 2 * config.num_kv_heads) * 128, gen)
    new = {0: 37, 1: 20}
    fb = forward_batch(backend, req_to_token, {0: 0, 1: 0}, new)
    hidden = (torch.randn(57, config.qkv_width, generator=gen)).bfloat16()
    padded = torch.cat([hidden, torch.full((7, config.qkv_width), float("nan"), dtype=torch.bfloat16)])
    records = [cache.records.clone() for cache in backend.pool.layer_caches(1)[:2]]
    backend.init_forward_metadata(fb)  # the served batch (57 tokens), as the replay path builds it
    with forward_context(ForwardContext(attn_backend=backend)):
        out_padded = MiniMaxM3Attention.forward(module, fb.positions, padded, fb)
        written_padded = [cache.records.clone() for cache in backend.pool.layer_caches(1)[:2]]
        for cache, before in zip(backend.pool.layer_caches(1)[:2], records):
            cache.records.copy_(before)
        out = MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
    written = [cache.records for cache in backend.pool.layer_caches(1)[:2]]
    assert all(torch.equal(a, b) for a, b in zip(written_padded, written))  # the same slots, the same bytes
    assert torch.equal(out_padded[:57], out)
    assert torch.equal(out_padded[57:], torch.zeros_like(out_padded[57:]))
    backend.forward_metadata = None
    with forward_context(ForwardContext(attn_backend=backend)), pytest.raises(ValueError, match="forward metadata"):
        MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)


def test_dummy_batches_write_nothing_and_are_not_refused(setup):
    """Regression (H200 run 5): the warm-up of SGLang's prefill CUDA graphs runs the attention break eagerly on a
    dummy batch whose ``out_cache_loc`` is all 0 (SGLang's padding slot, never allocated to a request); the layer
    refused it as 8192 tokens writing one slot and the scheduler died at start-up. Slot 0 is now -1 (no write):
    the dummy batch runs and leaves every cache byte as it was; padded decode rows (slot 0) write nothing either."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention
    backend, req_to_token = setup
    gen = torch.Generator().manual_seed(12)
    config = backend.configs[True]
    module = StandInAttention(1, True, (config.num_q_heads + 2 * config.num_kv_heads) * 128, gen)
    per_request = 300
    positions = torch.arange(per_request).repeat(2)
    seq_lens = torch.tensor([per_request, per_request])
    fb = ForwardBatch(forward_mode=ForwardMode.EXTEND, batch_size=2, input_ids=torch.zeros(600, dtype=torch.int64),
                      req_pool_indices=torch.tensor([3, 3]), seq_lens=seq_lens, seq_lens_cpu=seq_lens.clone(),
                      out_cache_loc=torch.zeros(600, dtype=torch.int64), seq_lens_sum=600, positions=positions,
                      extend_seq_lens=seq_lens.int(), extend_prefix_lens=torch.zeros(2, dtype=torch.int32),
                      extend_seq_lens_cpu=[per_request] * 2, extend_num_tokens=600)
    hidden = torch.randn(600, config.qkv_width, generator=gen).bfloat16()
    before = [cache.records.clone() for cache in backend.pool.layer_caches(1)]
    backend.init_forward_metadata(fb)
    assert backend.forward_metadata.slot_mapping.tolist() == [-1] * 600
    with forward_context(ForwardContext(attn_backend=backend)):
        out = MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
    assert out.shape == (600, config.num_q_heads * 128) and bool(torch.isfinite(out.float()).all())
    assert all(torch.equal(c.records, b) for c, b in zip(backend.pool.layer_caches(1), before))
    # a decode batch padded to a captured size: the padding row's slot 0 becomes -1 inside the graph buffers
    backend.init_cuda_graph_state(max_bs=4, max_num_tokens=4)
    decode = forward_batch(backend, req_to_token, {0: 200, 1: 150}, {0: 1, 1: 1})
    decode.out_cache_loc = torch.cat([decode.out_cache_loc, torch.zeros(1, dtype=torch.int64)])
    decode.req_pool_indices = torch.cat([decode.req_pool_indices, torch.tensor([3])])
    decode.seq_lens = torch.cat([decode.seq_lens, torch.tensor([1])])
    decode.batch_size = 3
    backend.init_forward_metadata_out_graph(decode)
    backend.init_forward_metadata_in_graph(decode)
    assert backend.forward_metadata.slot_mapping.tolist()[2] == -1


def test_duplicate_slot_message_stays_short():
    from atom_mxfp4.ops import _distinct_slots
    with pytest.raises(ValueError) as info:
        _distinct_slots(torch.zeros(8192, dtype=torch.int64) + 5)
    assert "(8192 tokens)" in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize("new, expected", [
    ({0: 20, 1: 3}, [False, False, True, True]),  # marked (first checked), traced, replayed
    ({0: 40, 1: 3}, [False] * 4),  # a run of >= 32 rows: the tiled index scorer (torch work on the tiles), not traced
])
def test_the_layers_of_a_batch_replay_their_kinds_traced_step(monkeypatch, new, expected):
    """In the backend as SGLang drives it (one AttentionMetadata per forward, the layers' configs shared per kind), the
    third sparse layer call of a batch on the Hopper backend is a replay of the traced one (atom_mxfp4.replay), the
    launches recorded on the CPU (tests/test_replay.py checks what a replay launches); a prefill batch whose index
    runs the tiled scorer (LayerConfig.index_tile_rows) takes the ordinary path every time."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    from atom_mxfp4 import backends, checked, launch, replay
    from atom_mxfp4.kernels.hopper import HopperBackend
    from atom_mxfp4.kernels.triton import TritonBackend

    for kind in (HopperBackend, TritonBackend):
        monkeypatch.setattr(kind, "unavailable", classmethod(lambda cls, device: None))
    backends._resolve.cache_clear()
    checked.clear()
    replay._proven.clear()
    try:
        backend, req_to_token = make_setup()
        backend.kernel_backend = "hopper"
        backend.layers.clear()
        gen = torch.Generator().manual_seed(13)
        sparse_module = StandInAttention(1, True, (backend.configs[True].num_q_heads
                                                   + 2 * backend.configs[True].num_kv_heads) * 128, gen)
        fb = forward_batch(backend, req_to_token, {0: 0, 1: 0}, new)
        backend.init_forward_metadata(fb)
        replayed = []
        with launch.recording() as launches, forward_context(ForwardContext(attn_backend=backend)):
            for _ in range(4):
                launches.clear()
                hidden = torch.randn(fb.positions.numel(), backend.configs[True].qkv_width, generator=gen).bfloat16()
                MiniMaxM3Attention.forward(sparse_module, fb.positions, hidden, fb)
                assert launches, "nothing launched"
                replayed.append(all(not isinstance(a, torch.Tensor) for r in launches for a in r.args))
        assert replayed == expected
    finally:
        backends._resolve.cache_clear()
        replay._proven.clear()


def _hopper_setup(seed: int):
    """The test pool's backend on the Hopper kernels (resolvable on the CPU; the caller records the launches), a
    stand-in module for its dense layer 0 and its sparse layer 1, and a generator for their inputs."""
    backend, req_to_token = make_setup()
    backend.kernel_backend = "hopper"
    gen = torch.Generator().manual_seed(seed)
    modules = [StandInAttention(layer, sparse, (backend.configs[sparse].num_q_heads
                                                + 2 * backend.configs[sparse].num_kv_heads) * 128, gen)
               for layer, sparse in ((0, False), (1, True))]
    return backend, req_to_token, modules, gen


def test_decode_batches_in_the_same_buffers_replay_from_their_first_layer(monkeypatch):
    """The server's eager decode: each batch size has its metadata buffers, refilled in place for every batch
    (unchecked under the default check policy). The pool's one dense and one sparse layer: the first decode batch
    leaves a mark per kind, the second is traced, and from the third on every layer, the first of its kind included,
    replays the trace (atom_mxfp4.replay) on the Hopper backend, its launches recorded on the CPU."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    from atom_mxfp4 import backends, launch, replay
    from atom_mxfp4.model_patches.sglang.backend import CHECKS_ENV

    monkeypatch.delenv(CHECKS_ENV, raising=False)
    H.compiled_backends_resolvable(monkeypatch)
    replay._proven.clear()
    try:
        backend, req_to_token, modules, gen = _hopper_setup(seed=7)
        replayed, metas = [], []
        with launch.recording() as launches, forward_context(ForwardContext(attn_backend=backend)):
            for step in range(5):
                done = {0: 200 + step, 1: 100 + step} if step else {0: 0, 1: 0}
                new = {0: 1, 1: 1} if step else {0: 200, 1: 100}
                fb = forward_batch(backend, req_to_token, done, new)
                backend.init_forward_metadata(fb)
                metas.append(backend.forward_metadata)
                per_layer = []
                for module in modules:
                    launches.clear()
                    hidden = torch.randn(fb.positions.numel(), backend.configs[module.is_sparse_attention_layer]
                                         .qkv_width, generator=gen).bfloat16()
                    MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
                    per_layer.append(bool(launches) and all(not isinstance(a, torch.Tensor)
                                                            for r in launches for a in r.args))
                replayed.append(per_layer)
                if step:  # the int32 positions the launches read, refreshed (read without the property, which would)
                    assert torch.equal(backend.forward_metadata._rows[1], fb.positions.int())
        assert all(m is metas[1] for m in metas[1:])  # one decode buffer, refilled
        assert replayed == [[False, False], [False, False], [False, False], [True, True], [True, True]]
    finally:
        backends._resolve.cache_clear()
        replay._proven.clear()


@pytest.mark.parametrize("policy, decode_reads", [(None, False), ("all", True), ("none", False)])
def test_decode_batches_are_not_validated_unless_asked(monkeypatch, policy, decode_reads):
    """The server's check policy (backend.CHECKS_ENV): an extend batch's first layer of each kind validates the step,
    reading the metadata's values on the host (a device sync) once per batch; a decode batch, eager, runs unchecked
    as inside its CUDA graph (a sync there would stall SGLang's overlap scheduler for the GPU's whole step) unless
    "all" is asked; "none" validates no batch. The layers run on the Hopper backend, their launches recorded."""
    from sglang.srt.models.minimax_m3 import MiniMaxM3Attention

    from atom_mxfp4 import backends, launch
    from atom_mxfp4.model_patches.sglang.backend import CHECKS_ENV

    if policy is None:
        monkeypatch.delenv(CHECKS_ENV, raising=False)
    else:
        monkeypatch.setenv(CHECKS_ENV, policy)
    H.compiled_backends_resolvable(monkeypatch)
    try:
        backend, req_to_token, modules, gen = _hopper_setup(seed=5)
        reads, checks = {}, []
        real_call = SparseMXFP4Attention.__call__
        monkeypatch.setattr(SparseMXFP4Attention, "__call__", lambda layer, *a, check=True, **k: checks.append(
            (name, layer.config.sparse, check)) or real_call(layer, *a, check=check, **k))
        with launch.recording(), forward_context(ForwardContext(attn_backend=backend)):
            for name, done, new in (("extend", {0: 0, 1: 0}, {0: 200, 1: 100}),
                                    ("decode", {0: 200, 1: 100}, {0: 1, 1: 1})):
                fb = forward_batch(backend, req_to_token, done, new)
                backend.init_forward_metadata(fb)
                with H.HostReads() as mode:
                    for module in modules:
                        hidden = torch.randn(fb.positions.numel(), backend.configs[module.is_sparse_attention_layer]
                                             .qkv_width, generator=gen).bfloat16()
                        MiniMaxM3Attention.forward(module, fb.positions, hidden, fb)
                reads[name] = bool(mode.reads)
        assert reads == {"extend": policy != "none", "decode": decode_reads}
        # the first layer of each kind of a batch runs check=True where the policy validates that batch
        assert checks == [("extend", False, policy != "none"), ("extend", True, policy != "none"),
                          ("decode", False, decode_reads), ("decode", True, decode_reads)]
    finally:
        backends._resolve.cache_clear()


def test_an_extend_batch_counts_its_rows_from_sglangs_host_list(setup, monkeypatch):
    """The rows' requests of an extend batch (repeat_interleave of each request's new-token count) get their count
    from SGLang's host list: without ``output_size`` torch would sync with the device to learn it, once per extend
    batch, whatever the check policy (on the CPU there is nothing to sync, so the call itself is checked)."""
    from atom_mxfp4.model_patches.sglang import backend as module

    backend, req_to_token = setup
    calls = []
    real = torch.repeat_interleave
    monkeypatch.setattr(module.torch, "repeat_interleave",
                        lambda *a, **k: calls.append(k.get("output_size")) or real(*a, **k))
    fb = forward_batch(backend, req_to_token, {0: 0, 1: 0}, {0: 200, 1: 100})
    backend.init_forward_metadata(fb)
    assert calls == [300] and backend.forward_metadata.token_request.tolist() == [0] * 200 + [1] * 100


def test_a_bad_server_check_policy_is_refused(monkeypatch):
    from atom_mxfp4.model_patches.sglang.backend import CHECKS_ENV
    monkeypatch.setenv(CHECKS_ENV, "decode")
    with pytest.raises(ValueError, match=f"{CHECKS_ENV}.*'extend', 'all', 'none'.*'decode'"):
        make_setup()


def test_the_decode_fill_is_the_torch_twin_unless_the_kernel_is_asked(monkeypatch):
    """ATOM_MXFP4_DECODE_FILL: "torch" by default; "kernel" picks the Triton launch only where the layers' kernels
    are compiled ones on a GPU (runner_metadata.decode_filler; on this CPU the twin either way); a bad value is
    refused by name."""
    from atom_mxfp4 import runner_metadata
    from atom_mxfp4.kernels.torch.decode_metadata import decode_metadata as twin
    from atom_mxfp4.model_patches.sglang.backend import DECODE_FILL_ENV

    asked = []
    monkeypatch.setattr(runner_metadata, "decode_filler",
                        lambda backend, device, kernel=True: asked.append(kernel) or twin)
    monkeypatch.setattr("atom_mxfp4.model_patches.sglang.backend.decode_filler", runner_metadata.decode_filler)
    monkeypatch.delenv(DECODE_FILL_ENV, raising=False)
    make_setup()
    monkeypatch.setenv(DECODE_FILL_ENV, "kernel")
    make_setup()
    assert asked == [False, True]
    monkeypatch.setenv(DECODE_FILL_ENV, "triton")
    with pytest.raises(ValueError, match=f"{DECODE_FILL_ENV}.*'torch', 'kernel'.*'triton'"):
        make_setup()
    monkeypatch.undo()
    assert runner_metadata.decode_filler("triton", "cpu", kernel=True) is twin  # no GPU: the twin
