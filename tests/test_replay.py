"""The replayed layer step (atom_mxfp4.replay, issue 39) on the CPU, every launch recorded (nothing compiled).

Layers of one kind share a batch's metadata: the first runs its ordinary path, the second is traced (under the Guard),
the third is a replay; once a step of that layout was proven, the first layer of the next batch is traced (no Guard)
and the second replays. A replay must launch what the ordinary path launches for that layer: the same kernels, grids and
constexprs, the same scalars, the layer's own tensors at the same addresses; the batch's buffers (metadata, plan
workspace, the step's intermediates) at the traced step's addresses. The metadata refilled in place keeps the trace
for unchecked steps (the int32 positions and the dense tables made again in their buffers first). Anything else a
trace rests on that changes (a metadata tensor replaced or moved, another stream, a tensor of another shape, stride
or alignment, new weights) takes the ordinary path again; so do steps that run torch work on the host path,
return_topk, and check=True before a step with these signatures was validated (and after a refill). The bits of
replayed steps on the GPU: tests/gpu/test_replay_gpu.py.
"""

from __future__ import annotations

import pytest
import torch

import _helpers as H

from atom_mxfp4 import backends, launch, op_replay, replay
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention

pytest.importorskip("triton.experimental.gluon", reason="needs triton >= 3.6 (Gluon)")



@pytest.fixture
def recorded(monkeypatch):
    """The Hopper and Triton backends resolvable on the CPU; every launch recorded (the list yielded)."""
    H.compiled_backends_resolvable(monkeypatch)
    replay._proven.clear()  # no step proven yet: the first of a batch leaves a mark, the second is traced
    # the ordinary path as it launches the first time: its ops not replayed (tests/test_op_replay.py), so each
    # recorded launch names its tensors
    monkeypatch.setattr(op_replay, "ENABLED", False)
    with launch.recording() as launches:
        yield launches
    backends._resolve.cache_clear()
    replay._proven.clear()


def _meta(batch=6, context=700):
    pages = -(-context // 128)
    block_table = torch.arange(1, batch * pages + 1, dtype=torch.int32).view(batch, pages)
    return AttentionMetadata.for_requests(block_table, [context - 1] * batch, [1] * batch), batch * pages + 1


class _Layer:
    """One layer's own tensors: caches, norm weights, qkv and out (distinct storage per layer)."""

    def __init__(self, config, pages, tokens, backend, seed):
        gen = torch.Generator().manual_seed(seed)
        names = ("q_norm", "k_norm") + (("idx_q_norm", "idx_k_norm") if config.sparse else ())
        self.weights = {n: torch.rand(128, generator=gen) for n in names}
        self.caches = LayerCaches.allocate(config, pages)
        self.qkv = torch.randn(tokens, config.qkv_width, generator=gen).to(torch.bfloat16)
        self.out = torch.empty(tokens, config.num_q_heads * 128, dtype=torch.bfloat16)
        self.layer = SparseMXFP4Attention(config, self.weights, backend=backend)

    def __call__(self, meta, **kw):
        return self.layer(self.qkv, meta, self.caches, out=self.out, **kw)

    def spans(self):
        ts = [self.qkv, self.out, *[c.records for c in (self.caches.k, self.caches.v, self.caches.index_k)
                                    if c is not None], *self.weights.values(), self.layer.cos_sin_cache("cpu")]
        return [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in ts]


def _layers(config, backend, count=4):
    meta, pages = _meta()
    return meta, [_Layer(config, pages, meta.num_tokens, backend, seed) for seed in range(count)]


def _step(recorded, layer, meta, **kw):
    recorded.clear()
    layer(meta, **kw)
    return list(recorded)


def _replayed(records) -> bool:
    """A replay records the launcher's values (tensors as int addresses); an ordinary launch records the tensors."""
    return all(not any(isinstance(a, torch.Tensor) for a in r.args) for r in records)


def _address(arg):
    return arg.data_ptr() if isinstance(arg, torch.Tensor) else arg


@pytest.mark.parametrize("backend,sparse", [("hopper", True), ("hopper", False), ("triton", True)])
def test_a_replay_launches_what_the_ordinary_path_launches_for_that_layer(recorded, backend, sparse):
    config = LayerConfig(sparse=sparse)
    meta, layers = _layers(config, backend)
    first, second, third, fourth = layers
    assert not _replayed(_step(recorded, first, meta))
    traced = _step(recorded, second, meta)
    assert not _replayed(traced)
    replays = [_step(recorded, layer, meta) for layer in (third, fourth)]
    assert all(_replayed(r) and r for r in replays)
    # the next batch (new metadata, the same layout): proven, so its first layer is traced, the second replays
    after, _ = _meta()
    assert not _replayed(_step(recorded, first, after)) and _replayed(_step(recorded, second, after))
    # the ordinary path of the same layers, on metadata of their own (new intermediate buffers)
    for layer, replayed in zip((third, fourth), replays):
        own, _ = _meta()
        ordinary = _step(recorded, layer, own, return_topk=True)
        assert [(r.kernel, r.grid, r.constexprs, r.cluster) for r in replayed] == \
               [(r.kernel, r.grid, r.constexprs, r.cluster) for r in ordinary]
        spans = layer.spans()
        for got, want, was in zip(replayed, ordinary, traced):
            assert len(got.args) >= len(want.args)  # the replay's values: the arguments, then the constexprs
            for position, arg in enumerate(want.args):
                if not isinstance(arg, torch.Tensor):
                    assert got.args[position] == arg, (got.kernel, position)
                elif any(lo <= arg.data_ptr() < hi for lo, hi in spans):
                    assert got.args[position] == arg.data_ptr(), (got.kernel, position)  # the layer's own tensor
                else:
                    assert got.args[position] == _address(was.args[position]), (got.kernel, position)  # the batch's


def test_a_step_that_runs_torch_work_on_its_host_path_is_not_replayed(recorded, monkeypatch):
    """A step whose host path runs a torch operation besides allocations and views (here a fill of the output before
    the launches) is refused by the Guard: no layer replays, and after REFUSALS such refusals the layout is not
    traced again."""
    launches = SparseMXFP4Attention._launches

    def with_torch_work(self, qkv, meta, caches, w, out):
        out.zero_()
        return launches(self, qkv, meta, caches, w, out)

    monkeypatch.setattr(SparseMXFP4Attention, "_launches", with_torch_work)
    for _ in range(replay.REFUSALS):
        meta, layers = _layers(LayerConfig(sparse=False), "triton")
        for layer in layers:
            assert not _replayed(_step(recorded, layer, meta))
        assert meta.steps and all(not t.launches for t in meta.steps.values())
    assert replay.proven(next(iter(replay._proven))) is False


def test_the_triton_dense_step_reads_the_batch_tables_kept_by_the_metadata(recorded):
    """A composing backend's dense layers read ``AttentionMetadata.dense_tables`` (made once per batch, in the
    metadata's buffers): the step runs no torch work from its second layer on and replays; after a refill the
    tables are made again in the same buffers before the replay, which reads the new ones."""
    meta, (a, b, c, d) = _layers(LayerConfig(sparse=False), "triton")
    for layer in (a, b):
        layer(meta, check=False)
    tables, lens = meta.dense_tables(1)
    assert torch.equal(tables, meta.block_table.index_select(0, meta.token_request))
    assert torch.equal(lens, meta.positions.int() + 1)
    got = _step(recorded, c, meta, check=False)
    assert _replayed(got) and any(tables.data_ptr() in r.args for r in got)
    meta.block_table[0, 0] = meta.block_table[1, 0]  # another page for request 0: refilled in place
    _refill(meta)
    got = _step(recorded, d, meta, check=False)
    assert _replayed(got) and any(tables.data_ptr() in r.args for r in got)
    kept = meta._dense[1][1]
    assert kept[0] is tables and int(tables[0, 0]) == int(meta.block_table[1, 0])  # made again, same buffers
    assert torch.equal(kept[1], meta.positions.int() + 1)
    assert torch.equal(meta.dense_tables(1)[0], meta.block_table.index_select(0, meta.token_request))


def test_metadata_dense_tables_equal_the_ops_for_every_kv_head_count():
    meta, _ = _meta()
    for heads in (1, 2, 4):
        want = __import__("atom_mxfp4.ops", fromlist=["ops"]).dense_tables(
            meta.block_table, meta.token_request, meta.row_position, num_kv_heads=heads)
        got = meta.dense_tables(heads)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), heads
        assert meta.dense_tables(heads) is got  # once per batch


def test_a_trace_reading_a_derived_buffer_does_not_outlive_a_refill():
    """``replay.derived``: a buffer torch made from the metadata's values on a step's host path, which a replay would
    not make again (ops.dense_tables' tables, as the flash path's decode rows read them): a trace reading it is not
    replayed after a refill; a freed one no longer counts."""
    meta, _ = _meta()
    made = torch.zeros(8, dtype=torch.int32)
    replay.derived(made)
    assert replay.reads_derived([made[2:]]) and not replay.reads_derived([torch.zeros(8)])
    assert not replay.Trace(meta, launches=("a launch",), keep=(made,)).refillable
    assert replay.Trace(meta, launches=("a launch",), keep=(torch.zeros(8),)).refillable
    address = made.data_ptr()
    del made
    __import__("gc").collect()
    assert not any(ref() is not None and ref().data_ptr() == address for ref in replay._derived)


def test_dense_tables_are_made_once_per_batch():
    from atom_mxfp4 import ops

    meta, _ = _meta()
    rows = meta.row_position
    first = ops.dense_tables(meta.block_table, meta.token_request, rows, num_kv_heads=1)
    assert ops.dense_tables(meta.block_table, meta.token_request, rows, num_kv_heads=1) is first
    two = ops.dense_tables(meta.block_table, meta.token_request, rows, num_kv_heads=2)
    assert two is not first and two[0].shape[0] == 2 * first[0].shape[0]
    meta.block_table[0, 0] = 5  # an in-place write: a new version, new tables
    after = ops.dense_tables(meta.block_table, meta.token_request, rows, num_kv_heads=1)
    assert after is not first and int(after[0][0, 0]) == 5
    want = meta.block_table.index_select(0, meta.token_request.int())
    assert torch.equal(after[0], want) and torch.equal(after[1], rows + 1)
    after[0].zero_()  # a caller writing into what it got: not returned again
    fresh = ops.dense_tables(meta.block_table, meta.token_request, rows, num_kv_heads=1)
    assert fresh is not after and torch.equal(fresh[0], want)


def test_what_a_trace_rests_on_changing_takes_the_ordinary_path(recorded):
    config = LayerConfig()
    meta, (a, b, c, d) = _layers(config, "hopper")
    for layer in (a, b):
        layer(meta)
    assert _replayed(_step(recorded, c, meta))
    meta.positions.add_(0)  # refilled in place: its version moves
    assert not _replayed(_step(recorded, c, meta))  # a new batch: traced again (its layout proven),
    assert _replayed(_step(recorded, d, meta))  # replayed
    # a tensor of another stride, alignment or shape than the traced one
    strided = torch.empty(b.qkv.shape[0], b.qkv.shape[1] + 8, dtype=torch.bfloat16)[:, :b.qkv.shape[1]]
    strided.copy_(b.qkv)
    for qkv in (strided, torch.empty(b.qkv.numel() + 1, dtype=torch.bfloat16)[1:].view_as(b.qkv)):
        recorded.clear()
        b.layer(qkv, meta, b.caches, out=b.out, check=False)
        assert not _replayed(recorded)
    # new weights (a replaced entry, an in-place update moving elsewhere): the replay reads the new addresses
    a.layer.weights["q_norm"] = torch.rand(128)
    got = _step(recorded, a, meta)
    assert _replayed(got)
    assert any(a.layer.weights["q_norm"].data_ptr() in r.args for r in got)
    # return_topk: the ordinary path, its own top-k ids
    assert not _replayed(_step(recorded, a, meta, return_topk=True))


def test_check_true_replays_only_a_validated_trace(recorded):
    meta, (a, b, c, _) = _layers(LayerConfig(), "hopper")
    a(meta, check=True)
    b(meta, check=False)  # traced unchecked
    assert not _replayed(_step(recorded, c, meta, check=True))  # validated now, on the ordinary path
    assert _replayed(_step(recorded, c, meta, check=True))
    assert _replayed(_step(recorded, a, meta, check=True))


def test_a_bad_argument_is_still_refused_by_name_after_a_trace(recorded):
    meta, (a, b, c, _) = _layers(LayerConfig(), "hopper")
    for layer in (a, b, c):
        layer(meta)
    with pytest.raises(ValueError, match="qkv"):
        c.layer(c.qkv[:, :-8], meta, c.caches, check=True)
    with pytest.raises(TypeError, match="caches"):
        c.layer(c.qkv, meta, {"k": c.caches.k}, check=True)
    with pytest.raises(ValueError, match="out"):
        c.layer(c.qkv, meta, c.caches, out=c.out[:-1], check=True)


def test_no_trace_is_made_or_replayed_where_a_launch_bypasses_the_launcher(recorded, monkeypatch):
    """Triton's own launch path (ATOM_MXFP4_PLAIN_LAUNCH=1, the interpreter) keeps nothing to replay."""
    meta, layers = _layers(LayerConfig(), "hopper")

    def plain(self, grid, cluster, extra_shared, fits, args, constexprs):
        if launch._traced is not None:
            launch._traced.append(None)
        return True

    monkeypatch.setattr(launch.Launcher, "_launch", plain)
    for layer in layers:
        layer(meta)
    assert all(t.launches == () for t in meta.steps.values())


class _Entry:
    """A compiled kernel as launch.replay sees it."""

    def __init__(self, hooks):
        self.function, self.hooks, self.calls, self.direct = "fn", hooks, [], None

    def launch(self, *args):
        self.calls.append(args)


def test_launch_replay_puts_each_address_in_and_steps_aside_for_launch_hooks():
    from types import SimpleNamespace

    hooks = SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    entry = _Entry(hooks)
    launches = ((entry, (3, 1, 1), (100, 7, 200, 0.5), ((0, 1, 16), (2, 0, 0)), ("meta",), 1),)
    assert launch.replay(launches, (5000, 9000), stream=42)
    assert entry.calls == [(3, 1, 1, 42, "fn", ("meta",), None, None, None, 9016, 7, 5000, 0.5)]
    hooks.launch_enter_hook = lambda *a: None
    assert not launch.replay(launches, (5000, 9000), stream=42)
    assert len(entry.calls) == 1


class _CudaLauncher:
    """Triton 3.6's CudaLauncher as launch._direct reads it: its C launch and the launch's four fixed arguments."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self):
        self.c_calls, self.py_calls = [], []
        self.launch = lambda *args: self.c_calls.append(args)

    def __call__(self, *args):
        self.py_calls.append(args)


def test_a_launch_without_scratch_memory_calls_the_c_launch_with_what_cudalauncher_would_add():
    run = _CudaLauncher()
    c_launch, cooperative, pdl = launch._direct(run)
    assert (cooperative, pdl) == (False, True)
    run.global_scratch_size = 256  # a kernel with scratch memory: through CudaLauncher.__call__, which allocates it
    assert launch._direct(run) is None
    assert launch._direct(lambda *args: None) is None  # a launcher of another shape
    from types import SimpleNamespace

    entry = _Entry(SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None))
    run.global_scratch_size = 0
    entry.direct = launch._direct(run)
    assert launch.replay(((entry, (2, 1, 1), (10, 3), ((0, 0, 8),), ("meta",), 1),), (4000,), stream=9)
    assert run.c_calls == [(2, 1, 1, 9, "fn", False, True, None, None, ("meta",), None, None, None, 4008, 3)]
    assert entry.calls == [] and run.py_calls == []


def test_at_most_retained_traces_hold_their_buffers(recorded, monkeypatch):
    """A runner keeps metadata per decode batch size: the oldest traces let go of their buffers (and are traced again
    at their next step), so only the newest RETAINED hold a step's intermediates."""
    monkeypatch.setattr(replay, "RETAINED", 2)
    monkeypatch.setattr(replay, "_retained", __import__("collections").deque())
    config = LayerConfig()
    _, pages = _meta()
    metas = [_meta()[0] for _ in range(3)]
    layers = [_Layer(config, pages, metas[0].num_tokens, "hopper", seed) for seed in range(3)]
    for meta in metas:
        for layer in layers:
            layer(meta)
    held = [bool(next(iter(m.steps.values())).launches) for m in metas]
    assert held == [False, True, True]
    assert next(iter(metas[0].steps.values())).keep == ()
    assert not _replayed(_step(recorded, layers[2], metas[0]))  # traced again,
    assert _replayed(_step(recorded, layers[1], metas[0]))  # then replayed


def _refill(meta):
    """Another decode batch in the same tensors, as a runner's per-batch-size buffers get it: new positions and
    slots (one token earlier in the same page), the table written again, all in place (their versions move)."""
    meta.positions.sub_(1)
    meta.slot_mapping.sub_(1)
    meta.block_table.add_(0)


@pytest.mark.parametrize("backend,sparse", [("hopper", True), ("hopper", False), ("triton", True)])
def test_a_batch_refilled_in_place_replays_unchecked_from_its_first_layer(recorded, backend, sparse):
    """The server's decode batches: the same metadata tensors refilled for each batch. With check=False the first
    layer of the next batch replays the trace (no ordinary path, no new trace), after refreshing the int32 positions
    the launches read; the replay launches what the batch's own ordinary path launches."""
    meta, (a, b, c, d) = _layers(LayerConfig(sparse=sparse), backend)
    for layer in (a, b, c):
        layer(meta, check=False)
    trace = meta.steps[a.layer._kind]
    rows = meta.row_position
    _refill(meta)
    assert not torch.equal(rows, meta.positions.int())
    assert _replayed(_step(recorded, d, meta, check=False))
    assert meta.steps[a.layer._kind] is trace  # kept, not traced again
    assert meta._rows[1] is rows and torch.equal(rows, meta.positions.int())  # refreshed in its buffer by the replay
    replayed = _step(recorded, a, meta, check=False)
    assert _replayed(replayed)
    ordinary = _step(recorded, a, meta, check=False, return_topk=True)
    assert [(r.kernel, r.grid, r.constexprs) for r in replayed] == [(r.kernel, r.grid, r.constexprs) for r in ordinary]
    for got, want in zip(replayed, ordinary):
        for position, arg in enumerate(want.args):
            if not isinstance(arg, torch.Tensor):
                assert got.args[position] == arg, (got.kernel, position)
            elif any(arg is t for t in (meta.positions, meta.slot_mapping, meta.token_request, meta.block_table,
                                         rows)):
                assert got.args[position] == arg.data_ptr(), (got.kernel, position)  # the refilled metadata


def test_a_refill_is_not_replayed_where_a_check_or_the_metadata_layout_asks_for_the_ordinary_path(recorded):
    meta, (a, b, c, d) = _layers(LayerConfig(), "hopper")
    for layer in (a, b):
        layer(meta, check=False)
    _refill(meta)
    assert not _replayed(_step(recorded, c, meta, check=True))  # new values: validated on the ordinary path
    assert _replayed(_step(recorded, d, meta, check=True))  # (traced anew, validated)
    # refilled after a metadata tensor was replaced by another (same shape, another address) or segments were
    # reassigned: traced anew
    for change in (lambda m: setattr(m, "slot_mapping", m.slot_mapping.clone()),
                   lambda m: setattr(m, "block_table", m.block_table.clone()),
                   lambda m: m.block_table.set_(m.block_table.clone()),  # the same object, other storage
                   lambda m: setattr(m, "segments", m.segments[:1] + m.segments[1:])):  # equal, not the same
        change(meta)
        _refill(meta)
        assert not _replayed(_step(recorded, a, meta, check=False))
        assert _replayed(_step(recorded, b, meta, check=False))
        _refill(meta)
        assert _replayed(_step(recorded, c, meta, check=False))  # and its refills replay again
