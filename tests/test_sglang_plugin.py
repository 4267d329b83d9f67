"""The SGLang plugin at start-up (CPU): entry-point loading through SGLang's own loader, `--kv-cache-dtype mxfp4`
parsing and resolution, the documented refusals, and SGLang's KV-cache configurator building our MXFP4 pools with
the true bytes per token."""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest
import torch

if importlib.util.find_spec("sglang") is None:  # only a missing SGLang skips; a broken install fails loudly
    pytest.skip("SGLang is not installed (scripts/install.d/30-sglang.sh installs it)", allow_module_level=True)
from sglang_env import torchvision_stand_in
from sglang_env import tiny_m3
from sglang_env.tiny_m3 import TINY_M3

with torchvision_stand_in.torchvision_stand_in():  # SGLang imports torchvision; no CPU wheel fits torch 2.13
    import sglang.srt.configs  # noqa: F401
    import sglang.srt.layers.attention.attention_registry  # noqa: F401
    import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401
    import sglang.srt.model_executor.pool_configurator  # noqa: F401
    import sglang.srt.models.minimax_m3  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    from sglang.srt.plugins import load_plugins

    load_plugins()  # SGLang's own loader: importlib.metadata entry points, then HookRegistry.apply_hooks()

from sglang.srt.plugins.hook_registry import HookRegistry

from atom_mxfp4.cache import capacity_ratio
from atom_mxfp4.layout import RECORD_BYTES
from atom_mxfp4.model_patches.sglang import hooks
from atom_mxfp4.model_patches.sglang.geometry import BACKEND_NAME
from atom_mxfp4.model_patches.sglang.targets import hook_applied



def model_dir(tmp_path, **changes):
    return tiny_m3.write(tmp_path, serve=False, **changes)


def resolve(argv):
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.server_args import prepare_server_args
    args = prepare_server_args(argv)
    args.resolve_once()
    return resolved_view(args)


def test_torchvision_stand_in_is_gone_after_the_imports():
    """Other tests in this process still see torchvision as absent (sglang_env.torchvision_stand_in)."""
    assert not any(isinstance(f, torchvision_stand_in._Finder) for f in sys.meta_path)
    assert not any(isinstance(m, torchvision_stand_in._InertModule) for m in list(sys.modules.values()))


def test_entry_point_is_declared_and_loaded():
    (ep,) = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "atom_mxfp4"]
    assert ep.value == "atom_mxfp4.model_patches.sglang:register"
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
    from sglang.srt.server_args import ATTENTION_BACKEND_CHOICES
    assert ATTENTION_BACKENDS[BACKEND_NAME] is hooks.create_backend
    assert BACKEND_NAME in ATTENTION_BACKEND_CHOICES
    targets = {hooks.T_ADD_CLI_ARGS, hooks.T_CONFIGURE_DTYPE, hooks.T_CELL_SIZE, hooks.T_BUILD_POOL,
               hooks.T_ATTENTION_FORWARD, hooks.T_BACKEND_WRAPPER, hooks.T_QUARK_KV_VALIDATE}
    assert targets <= HookRegistry._patched, f"hooks not applied: {targets - HookRegistry._patched}"
    assert all(hook_applied(t) for t in targets)  # what the backend checks at start-up
    assert not hook_applied("sglang.srt.server_args.prepare_server_args")  # a function nobody hooked


@pytest.mark.parametrize("tp", [1, 2])
def test_cli_parses_and_resolves_mxfp4(tmp_path, tp):
    view = resolve(["--model-path", model_dir(tmp_path), "--kv-cache-dtype", "mxfp4", "--device", "cpu",
                    "--tp", str(tp)])
    assert (view.kv_cache_dtype, view.attention_backend, view.page_size) == ("mxfp4", BACKEND_NAME, 128)


def test_other_dtypes_untouched(tmp_path):
    view = resolve(["--model-path", model_dir(tmp_path), "--kv-cache-dtype", "bf16", "--device", "cpu"])
    assert view.kv_cache_dtype == "bf16" and view.attention_backend != BACKEND_NAME


REFUSALS = [
    (dict(architectures=["LlamaForCausalLM"]), [], "model architecture must be one of ['MiniMaxM3SparseForCausalLM']"
     ", got LlamaForCausalLM"),
    (dict(head_dim=64), [], "head_dim must be 128 (the only head_dim of the MXFP4 kernels), got 64"),
    (dict(num_attention_heads=64, num_key_value_heads=2), [],
     "GQA group (num_attention_heads / num_key_value_heads) must be a whole group <= 16, got 64 / 2"),
    ({}, ["--page-size", "64"], "--page-size must be 128 (or unset), got 64"),
    ({}, ["--speculative-algorithm", "EAGLE"], "--speculative-algorithm must be unset (no speculative draft model is "
     "covered by the MXFP4 pools), got EAGLE"),
    (dict(sparse_disable_index_value=[0, 0, 1, 1]), [], "sparse layers with an index value branch"),
    ({}, ["--enable-hierarchical-cache"], "--enable-hierarchical-cache must be off (host offload of the MXFP4 "
     "records is not implemented), got True"),
    ({}, ["--attention-backend", "triton"], "attention backend must be 'atom_mxfp4' (or unset), got ['triton']"),
    # at TP 4 the 2 KV heads are replicated (1 per rank) but the 8 index heads split to 2 per rank
    (dict(sparse_num_index_heads=8), ["--tp", "4"], "index heads per rank (sparse_num_index_heads / TP) must be = KV "
     "heads per rank (1), got 2"),
]


@pytest.mark.parametrize("changes, extra, message", REFUSALS,
                         ids=["arch", "head_dim", "gqa", "page", "spec", "idx_v", "hicache", "backend",
                              "idx_heads_tp4"])
def test_refusals_at_start_up(tmp_path, changes, extra, message):
    argv = ["--model-path", model_dir(tmp_path, **changes), "--kv-cache-dtype", "mxfp4", "--device", "cpu"] + extra
    with pytest.raises(ValueError) as error:
        resolve(argv)
    assert "--kv-cache-dtype mxfp4: " + message in str(error.value)


def test_kv_cache_dtype_resolves_to_uint8_records():
    from sglang.srt.mem_cache import kv_cache_dtype
    resolved = kv_cache_dtype.configure_kv_cache_dtype(
        server_args_kv_cache_dtype="mxfp4", model=None, model_dtype=torch.bfloat16, is_draft_worker=False,
        is_dflash=False, speculative_draft_attention_backend=None)
    assert resolved == ("mxfp4", torch.uint8)
    assert kv_cache_dtype.configure_kv_cache_dtype(
        server_args_kv_cache_dtype="bf16", model=None, model_dtype=torch.bfloat16, is_draft_worker=False,
        is_dflash=False, speculative_draft_attention_backend=None)[1] == torch.bfloat16


def fake_configurator(hf_config, kv_cache_dtype_str="mxfp4", start=0, end=4):
    """The fields of SGLang's KVCacheConfigurator that the two hooked methods read."""
    total = hf_config.num_key_value_heads
    model_config = SimpleNamespace(hf_config=hf_config, get_num_kv_heads=lambda tp, *rest: max(1, total // tp))
    return SimpleNamespace(kv_cache_dtype_str=kv_cache_dtype_str, model_config=model_config, page_size=128,
                           device="cpu", layer_info=SimpleNamespace(start_layer=start, end_layer=end))


def tiny_hf_config():
    from transformers import PretrainedConfig
    return PretrainedConfig(**TINY_M3)


@pytest.fixture
def attn_tp():
    """SGLang's own way to state the attention TP width without launching ranks."""
    from sglang.srt.runtime_context import get_parallel
    return lambda size: get_parallel().override(attn_tp_size=size)


@pytest.mark.parametrize("tp, nkv, expected_cell", [(1, 2, 1292), (2, 1, 748)])
def test_cell_size_is_the_true_mxfp4_bytes_per_token(attn_tp, monkeypatch, tp, nkv, expected_cell):
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "mxfp4")  # every record MXFP4 (the fp8 index-K: below)
    from sglang.srt.model_executor.pool_configurator import DefaultPoolConfigurator
    layers, sparse = 4, 3
    with attn_tp(tp):
        cell = DefaultPoolConfigurator._compute_cell_size(object.__new__(DefaultPoolConfigurator),
                                                          fake_configurator(tiny_hf_config()), layers)
    assert cell == (2 * nkv * layers + sparse) * RECORD_BYTES // 128 == expected_cell


def test_configurator_builds_mxfp4_pools_with_true_bytes_per_token(attn_tp, monkeypatch):
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "mxfp4")  # every record MXFP4 (the fp8 index-K: below)
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    kvc = fake_configurator(tiny_hf_config())
    nkv, layers, sparse = 2, 4, 3
    cell = (2 * nkv * layers + sparse) * RECORD_BYTES // 128
    bf16_main = 2 * nkv * layers * 128 * 2  # what a bf16 main K/V costs per token
    assert bf16_main / (2 * nkv * layers * RECORD_BYTES / 128) == pytest.approx(capacity_ratio("bf16"))

    tokens = 1000
    with attn_tp(1):
        pool = KVCacheConfigurator._build_minimax_sparse_kv_pool(kvc, max_total_num_tokens=tokens)
    pages = tokens // 128 + 1  # + SGLang's padding page 0
    assert sorted(pool.k_records) == sorted(pool.v_records) == [0, 1, 2, 3]
    assert sorted(pool.index_k_records) == [1, 2, 3]  # index-K on sparse layers only
    for layer in range(4):
        for records in (pool.k_records[layer], pool.v_records[layer]):
            assert records.shape == (pages, nkv, RECORD_BYTES) and records.dtype == torch.uint8
            assert not records.any()
    assert all(r.shape == (pages, 1, RECORD_BYTES) for r in pool.index_k_records.values())
    assert sum(pool.get_kv_size_bytes()) == cell * pages * 128

    staged = fake_configurator(tiny_hf_config(), start=2, end=4)  # a pipeline stage holding layers 2 and 3
    with attn_tp(2):  # and attention TP 2: one KV head per rank
        pool = KVCacheConfigurator._build_minimax_sparse_kv_pool(staged, max_total_num_tokens=tokens)
    assert sorted(pool.k_records) == sorted(pool.index_k_records) == [2, 3]
    assert pool.k_records[2].shape == (pages, 1, RECORD_BYTES)


def random_pool(attn_tp, seed: int):
    """A tiny pool of 512 tokens whose every record byte is random (the index-K dtype from the environment)."""
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    with attn_tp(1):
        pool = KVCacheConfigurator._build_minimax_sparse_kv_pool(fake_configurator(tiny_hf_config()),
                                                                 max_total_num_tokens=512)
    gen = torch.Generator().manual_seed(seed)
    for records in pool.all_records():
        records.copy_(torch.randint(0, 256, records.shape, generator=gen, dtype=torch.uint8))
    return pool


def test_move_kv_cache_moves_every_byte_of_a_token(attn_tp, monkeypatch):
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "mxfp4")  # every record MXFP4 (the fp8 index-K: below)
    pool = random_pool(attn_tp, 0)
    before = [r.clone() for r in pool.all_records()]
    src, tgt = torch.tensor([130, 5, 300]), torch.tensor([400, 131, 6])
    pool.move_kv_cache(tgt, src)
    for old, new in zip(before, pool.all_records()):
        old_tok = torch.cat([old[:, :, : 128 * 64].view(-1, old.shape[1], 128, 64),
                             old[:, :, 128 * 64:].view(-1, old.shape[1], 128, 4)], dim=-1)  # [pages, h, 128, 68]
        new_tok = torch.cat([new[:, :, : 128 * 64].view(-1, new.shape[1], 128, 64),
                             new[:, :, 128 * 64:].view(-1, new.shape[1], 128, 4)], dim=-1)
        expected = old_tok.clone()
        for s, t in zip(src.tolist(), tgt.tolist()):
            expected[t // 128, :, t % 128] = old_tok[s // 128, :, s % 128]
        assert torch.equal(new_tok, expected)


def test_serve_wrapper_adds_mxfp4_and_passes_the_rest(capsys):
    import shlex

    from atom_mxfp4.cli import main
    assert main(["serve", "--dry-run", "--", "--model-path", "m", "--tp", "4"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[-7:] == ["serve", "--model-path", "m", "--tp", "4", "--kv-cache-dtype", "mxfp4"]
    assert main(["serve", "--dry-run", "m", "--kv-cache-dtype=mxfp4"]) == 0
    assert shlex.split(capsys.readouterr().out)[-3:] == ["serve", "m", "--kv-cache-dtype=mxfp4"]
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--dry-run", "--", "--kv-cache-dtype", "bf16"])
    assert exit_info.value.code == 2
    assert "--kv-cache-dtype must be mxfp4 (or left out), got bf16" in capsys.readouterr().err


def test_engine_style_server_args_resolve_mxfp4(tmp_path):
    """``Engine(kv_cache_dtype="mxfp4")`` builds ServerArgs from keywords (no argparse): same resolution."""
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.server_args import ServerArgs
    args = ServerArgs(model_path=model_dir(tmp_path), kv_cache_dtype="mxfp4", device="cpu")
    args.resolve_once()
    view = resolved_view(args)
    assert (view.kv_cache_dtype, view.attention_backend, view.page_size) == ("mxfp4", BACKEND_NAME, 128)


@pytest.mark.parametrize("tp, per_rank", [(1, (16, 4, 4)), (2, (8, 2, 2)), (4, (4, 1, 1))])
def test_tiny_tp_variant_splits_like_minimax_m3(tp, per_rank):
    """The checkpoint of scripts/serve_run.sh's tp mode (tiny_m3.py --tp): at TP4 one KV and one index head per rank,
    GQA 4, as the real M3; start-up accepts it at TP1 / TP2 / TP4."""
    from transformers import PretrainedConfig

    from atom_mxfp4.model_patches.sglang.geometry import check_model
    g = check_model(PretrainedConfig(**tiny_m3.config(True, **tiny_m3.TP_CHANGES)), attn_tp_size=tp)
    assert (g.num_q_heads, g.num_kv_heads, g.num_index_heads) == per_rank


def test_minimax_m3_geometry_per_rank():
    """MiniMax-M3 (64 q / 4 KV / 4 index heads, 60 layers, 3 dense) at TP4 is DESIGN §2's [16 / 1 / 1] per rank."""
    from transformers import PretrainedConfig

    from atom_mxfp4.model_patches.sglang.geometry import check_model
    sparse = dict(TINY_M3["sparse_attention_config"], sparse_attention_freq=[0] * 3 + [1] * 57,
                  sparse_disable_index_value=[1] * 60, sparse_num_index_heads=4, sparse_topk_blocks=16)
    config = PretrainedConfig(**dict(TINY_M3, num_attention_heads=64, num_key_value_heads=4, num_hidden_layers=60,
                                     sparse_attention_config=sparse))
    g = check_model(config, attn_tp_size=4)
    assert (g.num_q_heads, g.num_kv_heads, g.num_index_heads, g.topk) == (16, 1, 1, 16)
    assert g.dense_layer_ids == (0, 1, 2) and len(g.sparse_layer_ids) == 57
    assert (g.rotary_dim, g.rope_theta, g.init_blocks, g.local_blocks) == (64, 5e6, 0, 1)
    assert check_model(config, attn_tp_size=8).num_kv_heads == 1  # KV heads replicated past TP4
    with pytest.raises(ValueError, match="index heads per rank .* must be = KV heads per rank \\(4\\), got 1"):
        check_model(PretrainedConfig(**dict(TINY_M3, num_attention_heads=64, num_key_value_heads=4,
                                            sparse_attention_config=dict(sparse, sparse_num_index_heads=1))))


# ---- the index-K dtype (ATOM_MXFP4_INDEX_K_DTYPE) -------------------------------------------------------------
@pytest.mark.parametrize("index_k_dtype, index_bytes", [(None, 132), ("mxfp4", 68), ("fp8", 132)])
def test_cell_size_and_pool_follow_the_index_k_dtype(attn_tp, monkeypatch, index_k_dtype, index_bytes):
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.pool_configurator import DefaultPoolConfigurator

    from atom_mxfp4.cache import FP8IndexKCache
    from atom_mxfp4.model_patches.sglang.options import INDEX_K_DTYPE_ENV
    if index_k_dtype is None:
        monkeypatch.delenv(INDEX_K_DTYPE_ENV, raising=False)
    else:
        monkeypatch.setenv(INDEX_K_DTYPE_ENV, index_k_dtype)
    nkv, layers, sparse, tokens = 2, 4, 3, 1000
    want = 2 * nkv * layers * 68 + sparse * index_bytes  # 1292 (mxfp4 index-K) / 1484 (fp8)
    kvc = fake_configurator(tiny_hf_config())
    with attn_tp(1):
        cell = DefaultPoolConfigurator._compute_cell_size(object.__new__(DefaultPoolConfigurator), kvc, layers)
        pool = KVCacheConfigurator._build_minimax_sparse_kv_pool(kvc, max_total_num_tokens=tokens)
    assert cell == want
    pages = tokens // 128 + 1
    assert sum(pool.get_kv_size_bytes()) == cell * pages * 128  # the budget buys exactly the bytes allocated
    assert all(r.shape == (pages, 1, index_bytes * 128) for r in pool.index_k_records.values())
    index_cache = pool.layer_caches(1)[2]
    assert isinstance(index_cache, FP8IndexKCache) == (index_bytes == 132)  # None: the default, fp8
    assert pool.layer_caches(0)[2] is None  # the dense layer has no index-K


def test_move_kv_cache_moves_fp8_index_k_tokens(attn_tp, monkeypatch):
    from atom_mxfp4.index_k import fp8_data_view, fp8_scale_view
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "fp8")
    pool = random_pool(attn_tp, 1)
    before = {i: r.clone() for i, r in pool.index_k_records.items()}
    src, tgt = torch.tensor([130, 5, 300]), torch.tensor([400, 131, 6])
    pool.move_kv_cache(tgt, src)
    for i, new in pool.index_k_records.items():
        old = before[i]
        expected = old.clone()
        for view in (fp8_data_view, fp8_scale_view):
            view(expected)[tgt // 128, :, tgt % 128] = view(old)[src // 128, :, src % 128]
        assert torch.equal(new, expected)
        assert not torch.equal(new, old)


def test_a_bad_index_k_dtype_is_refused_naming_the_variable(attn_tp, monkeypatch):
    from sglang.srt.model_executor.pool_configurator import DefaultPoolConfigurator
    monkeypatch.setenv("ATOM_MXFP4_INDEX_K_DTYPE", "int4")
    with attn_tp(1), pytest.raises(ValueError, match=r"ATOM_MXFP4_INDEX_K_DTYPE \(the index-K cache dtype\) must be "
                                   r"one of \['mxfp4', 'fp8'\], got 'int4'"):
        DefaultPoolConfigurator._compute_cell_size(object.__new__(DefaultPoolConfigurator),
                                                   fake_configurator(tiny_hf_config()), 4)
