"""The ``atom_mxfp4`` SGLang attention backend: runs ``atom_mxfp4.layer.SparseMXFP4Attention`` per layer.

Metadata (one ``AttentionMetadata`` per forward, shared by every layer):
- extend (prefill, chunked prefill, prefix-cache hits): built in ``init_forward_metadata_out_graph`` (dynamic shapes);
  rows are the new tokens, ``positions`` = ``forward_batch.positions`` [T] i64, ``slot_mapping`` = ``out_cache_loc``
  [T] i64 with SGLang's padding slot 0 as -1, ``token_request`` [T] i32 = the batch row of each token,
  ``block_table`` [B, max_pages] i32 = page ids
  ``req_to_token[req_pool_indices, 0::128] // 128`` (entries past a request's length are never read).
- decode: built in ``init_forward_metadata_in_graph`` into per-batch-size buffers allocated outside the graph
  (``init_cuda_graph_state`` / ``out_graph``), with static-shape device work only (torch ops, or with
  ``DECODE_FILL_ENV`` "kernel" one Triton launch on a GPU with the Triton or Hopper kernels:
  atom_mxfp4.runner_metadata), so a CUDA graph that captured it recomputes it from the runner's static inputs at
  replay.
- the pa_decode plan (atom_mxfp4.plan) is built beside the metadata, once per batch, and every layer of the step
  reuses it (``AttentionMetadata.pa_decode_plan``): per extend batch in ``out_graph``; for decode one plan for the
  largest batch size, shared by every decode buffer (a plan covers fewer rows) and built in ``init_cuda_graph_state``
  before any capture, so capture allocates no workspace and every replay reuses it.
The model's attention module reaches the backend through ``forward_layer`` (hooks.py routes
``MiniMaxM3Attention.forward`` here): the layer gets the *raw* fused projection ``[q | k | v | idx_q | idx_k]`` and
does QK-norm, RoPE and the MXFP4 write itself.
"""

from __future__ import annotations

import logging
import os

import torch
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph import eager_on_graph

from atom_mxfp4 import prefill
from atom_mxfp4.backends import BACKENDS, resolve_backend
from atom_mxfp4.errors import expect, fail
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, SparseMXFP4Attention
from atom_mxfp4.layout import HEAD_DIM, pages_for
from atom_mxfp4.runner_metadata import decode_filler, page_table, slots

from . import meter
from .geometry import check_model
from .pool import MXFP4MiniMaxKVPool
from .targets import T_ATTENTION_FORWARD, T_BACKEND_WRAPPER, attn_tp_size, hook_applied

logger = logging.getLogger(__name__)

KERNEL_BACKEND_ENV = "ATOM_MXFP4_BACKEND"  # a registered name (atom_mxfp4.backends.BACKENDS); unset: its choice
# dense layers' prefill segments of at least this many tokens as flash attention (LayerConfig.flash_prefill_rows;
# unset: LayerConfig's default)
FLASH_PREFILL_ENV = "ATOM_MXFP4_FLASH_PREFILL_ROWS"
# which batches' first layer of each kind validates the step (its arguments, and the metadata's values: a host sync,
# which also stalls SGLang's overlap scheduler until the GPU has finished the batch before). "extend" (the default):
# extend batches; decode batches run unchecked in eager mode as they do inside their CUDA graphs (the same metadata,
# made by the same static-shape ops). "all": decode batches too (one sync per decode step); "none": no batch
CHECKS_ENV = "ATOM_MXFP4_SERVER_CHECKS"
CHECKS = ("extend", "all", "none")
CHECKS_SAID = {"extend": "extend batches validated once per batch, decode batches not (as inside their CUDA graphs)",
               "all": "every batch validated once (a host sync per decode step)", "none": "no batch validated"}
# how a decode batch's metadata is filled: "torch" (the default until the kernel has run in a server on a GPU: six torch
# ops) or "kernel" (one Triton launch where the layers' kernels are compiled ones on a GPU; the same
# bits: atom_mxfp4.runner_metadata)
DECODE_FILL_ENV = "ATOM_MXFP4_DECODE_FILL"
DECODE_FILLS = ("torch", "kernel")
# SGLang's allocators never hand out slot 0: padded rows and the dummy batches of graph warm-up and capture put every
# token there, which our ops would refuse as a duplicate slot; our slot_mapping has NO_SLOT (-1, no write) instead
PADDING_SLOT = 0


def _choice(env: str, choices: tuple) -> str:
    """The setting ``env`` names: unset or empty is the first of ``choices``; a value not among them is refused."""
    value = os.environ.get(env, "").strip() or choices[0]
    expect(value in choices, env, f"unset or one of {list(choices)}", repr(value))
    return value


def _attend_capture_stub(backend, module, qkv, out) -> None:
    out.zero_()  # breakable-graph capture: the outputs only need addresses; no cache write for the dummy batch


@eager_on_graph(capture_stub=_attend_capture_stub)
def _attend(backend, module, qkv, out) -> None:
    backend.attend(module, qkv, out)


class AtomMXFP4AttnBackend(AttentionBackend):
    def __init__(self, runner, kernel_backend: str | None = None):
        missing = [t for t in (T_ATTENTION_FORWARD, T_BACKEND_WRAPPER) if not hook_applied(t)]
        expect(not missing, "the atom_mxfp4 plugin's SGLang hooks", "applied by sglang.srt.plugins.load_plugins()",
               f"not applied: {missing} (see the SGLang log for why)", RuntimeError)
        pool = runner.token_to_kv_pool
        expect(isinstance(pool, MXFP4MiniMaxKVPool), "token_to_kv_pool", "an MXFP4MiniMaxKVPool "
               "(--kv-cache-dtype mxfp4 builds it)", type(pool).__name__, TypeError)
        self.pool = self.token_to_kv_pool = pool
        self.req_to_token = runner.req_to_token_pool.req_to_token  # [max_reqs, max_context] i32 slot ids
        self.geometry = check_model(runner.model_config.hf_config, attn_tp_size=attn_tp_size())
        self.kernel_backend = kernel_backend or os.environ.get(KERNEL_BACKEND_ENV) or None
        expect(self.kernel_backend is None or self.kernel_backend in BACKENDS,
               "kernel_backend" if kernel_backend else KERNEL_BACKEND_ENV, f"unset or one of {list(BACKENDS)}",
               repr(self.kernel_backend))
        device = self.req_to_token.device
        logger.info("atom_mxfp4: kernel backend %s on %s (%s)", resolve_backend(self.kernel_backend, device).name,
                    device, f"{KERNEL_BACKEND_ENV}={self.kernel_backend}" if self.kernel_backend else "backend=None")
        self.max_pages = pages_for(self.req_to_token.shape[1])
        # a decode batch's metadata: torch ops, or one Triton launch where the kernels are compiled ones on a GPU
        self._fill_decode = decode_filler(self.kernel_backend, device,
                                          kernel=_choice(DECODE_FILL_ENV, DECODE_FILLS) == "kernel")
        # the index-K dtype is the pool's (ATOM_MXFP4_INDEX_K_DTYPE when it was built): one source for both
        flash_rows = os.environ.get(FLASH_PREFILL_ENV, "").strip() or None
        expect(flash_rows is None or flash_rows.isdigit(), FLASH_PREFILL_ENV,
               "unset or a whole number of rows >= 0 (0: off)", repr(flash_rows))
        extra = {} if flash_rows is None else {"flash_prefill_rows": int(flash_rows)}
        self.checks = _choice(CHECKS_ENV, CHECKS)
        logger.info("atom_mxfp4: %s (%s)", CHECKS_SAID[self.checks],
                    f"{CHECKS_ENV}={self.checks}" if os.environ.get(CHECKS_ENV, "").strip() else "the default")
        self.configs = {sparse: self.geometry.layer_config(sparse, index_k_dtype=pool.index_k_dtype, **extra)
                        for sparse in (False, True)}
        self.layers: dict[int, SparseMXFP4Attention] = {}
        self._cos_sin: dict = {}  # shared by every layer: one RoPE table per device
        self.forward_metadata: AttentionMetadata | None = None
        # the layer kinds (sparse or not) whose first layer of this batch validated it, or that are not validated
        self._checked: set = set()
        self._caches: dict[int, LayerCaches] = {}  # layer id -> its cache views (the pool's records never move)
        self._decode_buffers: dict[int, AttentionMetadata] = {}
        self._decode_plans: dict = {}  # AttentionMetadata.plans of every decode buffer: one plan for all sizes
        batches = meter.every()  # ATOM_MXFP4_HOST_METER: our host time per batch, logged (meter.py)
        if batches:
            meter.HostMeter(batches).install(self)

    # ---- metadata ----
    def _with_plan(self, meta: AttentionMetadata) -> AttentionMetadata:
        """Build the batch's pa_decode plan beside its metadata (a no-op when one covers it): dense and sparse layers
        share it (``LayerConfig.pa_decode_shape``), and the layers find it in ``meta.plans``."""
        for config in self.configs.values():
            meta.pa_decode_plan(config, meta.positions.device, self.kernel_backend)
        return meta

    def _decode_buffer(self, bs: int, device) -> AttentionMetadata:
        if bs not in self._decode_buffers:
            self._decode_buffers[bs] = AttentionMetadata(
                positions=torch.zeros(bs, dtype=torch.int64, device=device),
                slot_mapping=torch.full((bs,), -1, dtype=torch.int64, device=device),
                token_request=torch.arange(bs, dtype=torch.int32, device=device),
                block_table=torch.zeros(bs, self.max_pages, dtype=torch.int32, device=device),
                plans=self._decode_plans)
        return self._with_plan(self._decode_buffers[bs])

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
        # small tensors and the one decode plan (made for max_bs: it covers every smaller batch), all before capture,
        # so capture never allocates
        self._decode_buffer(max_bs, self.req_to_token.device)
        for bs in range(1, max_bs):
            self._decode_buffer(bs, self.req_to_token.device)

    def get_cuda_graph_seq_len_fill_value(self):
        return 1

    def init_forward_metadata_out_graph(self, forward_batch, in_capture: bool = False):
        mode = forward_batch.forward_mode
        if mode.is_decode_or_idle():
            self.forward_metadata = self._decode_buffer(forward_batch.batch_size, forward_batch.seq_lens.device)
            self._checked = self._unchecked(decode=True)
            return
        expect(mode.is_extend(), "forward_mode", "EXTEND, DECODE or IDLE (speculative modes are refused at start-up)",
               mode)
        extend_lens = forward_batch.extend_seq_lens
        bs = forward_batch.batch_size
        prefix_cpu, new_cpu = forward_batch.extend_prefix_lens_cpu, forward_batch.extend_seq_lens_cpu
        # the rows' requests; their count from SGLang's host list where it keeps one for this batch (SGLang pads it
        # with the device list), else from the device (a sync)
        counted = new_cpu is not None and len(new_cpu) == bs == extend_lens.shape[0]
        rows = torch.repeat_interleave(torch.arange(bs, dtype=torch.int32, device=extend_lens.device),
                                       extend_lens.long(), output_size=sum(new_cpu) if counted else None)
        max_len = int(forward_batch.seq_lens_cpu.max()) if forward_batch.seq_lens_cpu is not None \
            else int(forward_batch.seq_lens.max())
        pages = min(self.max_pages, pages_for(max_len))
        # the rows as runs of one request's new tokens (host lists SGLang keeps; absent: every row a decode row)
        segments = () if prefix_cpu is None or new_cpu is None else prefill.segments_for(prefix_cpu, new_cpu)
        if sum(s.rows for s in segments) != forward_batch.positions.shape[0]:
            segments = ()  # lists that do not describe these rows (a padded batch): no flash, nothing refused
        block_table = page_table(self.req_to_token, forward_batch.req_pool_indices, pages).contiguous()
        self.forward_metadata = self._with_plan(AttentionMetadata(
            positions=forward_batch.positions.long(), slot_mapping=slots(forward_batch.out_cache_loc, PADDING_SLOT),
            token_request=rows, block_table=block_table, segments=segments))
        self._checked = self._unchecked(decode=False)

    def init_forward_metadata_in_graph(self, forward_batch):
        """Decode: static-shape device ops into the per-batch-size buffers (recorded by a CUDA graph)."""
        if not forward_batch.forward_mode.is_decode_or_idle() or forward_batch.batch_size == 0:
            return
        meta = self._decode_buffer(forward_batch.batch_size, forward_batch.seq_lens.device)
        self._fill_decode(forward_batch.seq_lens, forward_batch.out_cache_loc, forward_batch.req_pool_indices,
                          self.req_to_token, meta.positions, meta.slot_mapping, meta.block_table, PADDING_SLOT)
        self.forward_metadata = meta
        self._checked = self._unchecked(decode=True)

    def _unchecked(self, decode: bool) -> set:
        """The layer kinds a new batch starts with as not to be validated (``CHECKS_ENV``): none, or both."""
        return set() if self.checks == "all" or (self.checks == "extend" and not decode) else {False, True}

    # ---- the layer ----
    def layer_for(self, module) -> SparseMXFP4Attention:
        """One ``SparseMXFP4Attention`` per model layer; weights are the module's own norm parameters."""
        layer_id = module.attn.layer_id
        if layer_id not in self.layers:
            sparse = bool(module.is_sparse_attention_layer)
            weights = {"q_norm": module.q_norm.weight, "k_norm": module.k_norm.weight}
            if sparse:
                weights.update(idx_q_norm=module.index_q_norm.weight, idx_k_norm=module.index_k_norm.weight)
            # RoPE tables shared by all layers (keyed by device and RoPE geometry), not one per layer
            layer = SparseMXFP4Attention(self.configs[sparse], weights, backend=self.kernel_backend,
                                         rope_tables=self._cos_sin)
            self.layers[layer_id] = layer
        return self.layers[layer_id]

    @staticmethod
    def fused_projection(module, hidden_states: torch.Tensor) -> torch.Tensor:
        """``[q | k | v | idx_q | idx_k]`` [T, W] of this rank, before QK-norm and RoPE (idx_v is never produced:
        start-up refuses models with an index value branch)."""
        if getattr(module, "_fused_qkv_index", None) is not None:
            return module.fused_qkv_index_proj(hidden_states)
        qkv, _ = module.qkv_proj(hidden_states)
        if not module.is_sparse_attention_layer:
            return qkv
        idx_qk, _ = module.index_qkv_proj(hidden_states)
        return torch.cat([qkv, idx_qk], dim=-1)

    def forward_layer(self, module, positions, hidden_states, forward_batch) -> torch.Tensor:
        """``MiniMaxM3Attention.forward`` with our layer: fused projection -> SparseMXFP4Attention -> o_proj.

        The attention itself (``_attend``) is an eager break of SGLang's breakable prefill CUDA graphs: the
        projections and o_proj are captured, the attention runs eagerly at replay on the metadata of the batch being
        served (``self.forward_metadata``, built from the real, unpadded batch). Inside a full decode graph it is
        captured like any other code (its metadata buffers are graph-stable)."""
        if forward_batch.forward_mode.is_idle() or hidden_states.shape[0] == 0:
            return hidden_states.new_empty(0, hidden_states.shape[-1])
        qkv = self.fused_projection(module, hidden_states)
        out = torch.empty(qkv.shape[0], self.configs[bool(module.is_sparse_attention_layer)].num_q_heads * HEAD_DIM,
                          dtype=torch.bfloat16, device=qkv.device)
        _attend(self, module, qkv, out)
        output, _ = module.o_proj(out.to(hidden_states.dtype))
        return output

    def layer_caches(self, layer_id: int) -> LayerCaches:
        """The layer's cache views, made once (the pool's records never move); the pool's per-layer wait each call."""
        caches = self._caches.get(layer_id)
        if caches is None:
            caches = self._caches[layer_id] = LayerCaches(*self.pool.layer_caches(layer_id))
        else:
            self.pool.wait_for_layer(layer_id)
        return caches

    def attend(self, module, qkv: torch.Tensor, out: torch.Tensor) -> None:
        """``out[:n] = layer(qkv[:n])`` for the ``n`` tokens of the current metadata, written in place; rows past
        ``n`` (a padded prefill-graph bucket) are zeroed.

        Validation once per batch: the first dense and the first sparse layer of an extend batch run with check=True
        (the step's arguments and the metadata's values: one host sync per batch, atom_mxfp4.checked), every later
        layer with check=False, doing no Python work beyond its launches. Decode batches are not validated, in eager
        mode as under CUDA-graph capture (the metadata is ours, made by static-shape ops; a sync per decode step
        would stall SGLang's overlap scheduler): ``CHECKS_ENV`` "all" validates them too, "none" no batch."""
        meta = self.forward_metadata
        rows = qkv.shape[0]
        if meta is None or meta.num_tokens > rows:
            fail("forward metadata", f"built for this batch (at most {rows} tokens)",
                 None if meta is None else meta.num_tokens)
        n = meta.num_tokens
        layer = self.layer_for(module)
        sparse = layer.config.sparse
        check = sparse not in self._checked and not (qkv.is_cuda and torch.cuda.is_current_stream_capturing())
        if check:
            self._checked.add(sparse)
        padded = n < rows  # (no views to make otherwise: each costs host time on every layer)
        layer(qkv[:n] if padded else qkv, meta, self.layer_caches(module.attn.layer_id), check=check,
              out=out[:n] if padded else out)
        if padded:
            out[n:].zero_()

    def forward(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        raise RuntimeError(
            "the atom_mxfp4 attention backend runs whole MiniMaxM3Attention layers (forward_layer); RadixAttention "
            f"layer {getattr(layer, 'layer_id', '?')} reached it directly, so the model hook is not installed "
            "(load the plugin: pip install atom-mxfp4[sglang])")
