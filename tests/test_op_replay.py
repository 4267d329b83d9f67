"""Op replay (atom_mxfp4.op_replay, issue 39) on the CPU, every launch recorded (nothing compiled or run).

A public op called again with the same key (its scalars, backend, plan, stream and each tensor's shape, strides,
dtype, device and address mod 16) replays its launches: the first call leaves a mark, the second is traced, the third
and later replay with this call's addresses and fresh allocations. Proven here, per op and backend:

- a replay launches what the ordinary path launches for the same call: kernels, grids, constexprs, clusters and
  scalars equal; each tensor argument at the same offset into the same input, into the returned tensor, or (the
  plan's workspace) at the same address; its returned tensors are new, as the ordinary path makes them;
- mark, trace, replay; another scalar, dtype, stride, alignment or plan is another key (the ordinary path);
- a trace is refused where the backend runs torch work or launches a tensor the call neither got nor made (the
  Triton dense attend's tables, made by torch, are given to a pa_decode replay as its arguments), never made or
  replayed when off or inside a layer's trace; ``clear()`` forgets;
- under check=True the checks run before a replay: a bad argument is still refused by name.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import _helpers as H

from atom_mxfp4 import backends, launch, op_replay, ops
from atom_mxfp4.backends import resolve_backend
from atom_mxfp4.evals.bench.host_overhead import _case

pytest.importorskip("triton.experimental.gluon", reason="needs triton >= 3.6 (Gluon)")


CPU = torch.device("cpu")
OPS = ("write", "index_topk", "pa_decode", "attend_sparse", "attend_dense")  # (build_sparse_tables: never, below)
CASES = [(b, op) for b in ("hopper", "triton") for op in OPS]


@pytest.fixture
def resolvable(monkeypatch):
    """The Hopper and Triton backends resolvable on the CPU."""
    H.compiled_backends_resolvable(monkeypatch)
    yield
    backends._resolve.cache_clear()


@pytest.fixture
def recorded(resolvable):
    """Every launch recorded (the list yielded), not compiled or run."""
    with launch.recording() as launches:
        yield launches


class Call:
    """One op call: the ops function, its positional and keyword arguments (the tensors among them: its inputs)."""

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs)

    def inputs(self) -> list:
        return [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, torch.Tensor)]

    def fresh(self, *, arg: tuple | None = None, **changes) -> "Call":
        """The same call on clones of its tensors (same signatures, new addresses); ``arg``: (position, value) of a
        positional argument replaced; ``changes``: keywords replaced."""
        clone = lambda a: a.clone() if isinstance(a, torch.Tensor) else a  # noqa: E731
        args = [clone(a) for a in self.args]
        if arg is not None:
            args[arg[0]] = arg[1]
        return Call(self.fn, args, {**{k: clone(v) for k, v in self.kwargs.items()}, **changes})

    def __call__(self, recorded, **extra) -> tuple:
        """(the op's result, the launches it recorded)."""
        recorded.clear()
        result = self.fn(*self.args, **{**self.kwargs, **extra})
        return result, list(recorded)


def _calls(backend: str, batch: int = 1, context: int = 1024) -> dict:
    """op name -> Call of that op on the backend, MiniMax-M3 rank geometry (host_overhead's case), check=False."""
    cfg, caches, meta, w, layers, qkv = _case(backend, batch, context, CPU)
    c, d = caches[True], caches[False]
    rows = (meta.block_table, meta.token_request, meta.positions.to(torch.int32))
    q = torch.randn(batch, cfg.group, 128).to(torch.bfloat16)
    idx_q = torch.randn(batch, 1, 128).to(torch.bfloat16)
    topk = ops.index_topk(idx_q, c.index_k, *rows, topk=cfg.topk, backend="torch")
    tables, lens = ops.build_sparse_tables(topk, *rows, num_kv_heads=1, backend="torch")
    common = dict(backend=backend, check=False)
    attention = dict(softmax_scale=cfg.softmax_scale, plan=meta.pa_decode_plan(cfg, CPU, backend), **common)
    write_in = (qkv[True], meta.positions, w["q_norm"], w["k_norm"], w["idx_q_norm"], w["idx_k_norm"],
                layers[True].cos_sin_cache(CPU), meta.slot_mapping, c.k.records, c.v.records, c.index_k.records)
    return {
        "write": Call(ops.fused_qknorm_rope_write, write_in,
                      dict(num_q_heads=16, num_kv_heads=1, num_index_heads=1, **common)),
        "index_topk": Call(ops.index_topk, (idx_q, c.index_k.records, *rows), dict(topk=cfg.topk, **common)),
        "sparse_tables": Call(ops.build_sparse_tables, (topk, *rows), dict(num_kv_heads=1, **common)),
        "pa_decode": Call(ops.pa_decode, (torch.empty_like(q), q, c.k.records, c.v.records, tables, lens), attention),
        "attend_sparse": Call(ops.attend, (torch.empty_like(q), q, c.k.records, c.v.records, *rows),
                              dict(num_kv_heads=1, topk_blocks=topk, **attention)),
        "attend_dense": Call(ops.attend, (torch.empty_like(q), q, d.k.records, d.v.records, *rows),
                             dict(num_kv_heads=1, **attention)),
    }


def _kind(launches: list) -> str:
    """"replay" (every tensor position an int address), "ordinary" (the tensors themselves), else "none"/"mixed"."""
    tensors = [any(isinstance(a, torch.Tensor) for a in r.args) for r in launches]
    return "none" if not tensors else "ordinary" if all(tensors) else "replay" if not any(tensors) else "mixed"


def _ordinary(recorded, call: Call) -> tuple:
    """The call on the ordinary path (op replay off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(op_replay, "ENABLED", False)
        return call(recorded)


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _locate(address: int, tensors: list):
    """(index, byte offset from its first element) of the tensor of ``tensors`` whose storage holds ``address``."""
    for i, t in enumerate(tensors):
        lo, hi = _storage(t)
        if lo <= address < hi:
            return i, address - t.data_ptr()
    return None


def _flat(result) -> list:
    return [t for t in (result if isinstance(result, tuple) else (result,)) if isinstance(t, torch.Tensor)]


def _workspace(plan) -> list:
    return [] if plan is None else [t for t in vars(plan).values() if isinstance(t, torch.Tensor)]


def assert_same_launches(ordinary: tuple, call_o: Call, replayed: tuple, call_r: Call) -> None:
    """``replayed`` (a replay of ``call_r``: result, launches) launches what ``ordinary`` (``call_o`` on the
    ordinary path, inputs of the same signatures) launches, with ``call_r``'s addresses (module docstring)."""
    (result_o, want), (result_r, got) = ordinary, replayed
    assert _kind(want) == "ordinary" and _kind(got) == "replay"
    assert [(r.kernel, r.grid, r.constexprs, r.cluster) for r in got] == \
           [(r.kernel, r.grid, r.constexprs, r.cluster) for r in want]
    workspace, moved = _workspace(call_o.kwargs.get("plan")), {}
    for w, g in zip(want, got):
        assert len(g.args) >= len(w.args)  # (a replay may record the constexpr tail after the arguments)
        for position, arg in enumerate(w.args):
            value, where = g.args[position], (w.kernel, position)
            if not isinstance(arg, torch.Tensor):
                assert value == arg and type(value) is type(arg), where
                continue
            assert type(value) is int, where
            address = arg.data_ptr()
            for mine, theirs in ((call_o.inputs(), call_r.inputs()), (_flat(result_o), _flat(result_r))):
                found = _locate(address, mine)
                if found is not None:
                    assert value == theirs[found[0]].data_ptr() + found[1], where
                    break
            else:
                if _locate(address, workspace) is not None:
                    assert value == address, where  # the plan's workspace: the same buffer
                    continue
                # an intermediate the call allocated: one new buffer per replay, used alike by its launches
                assert moved.setdefault(_storage(arg)[0], value - address) == value - address, where
                assert _locate(value, call_r.inputs() + workspace) is None, where


def _three(recorded, call: Call) -> list:
    """Three calls of ``call``'s signatures on fresh tensors: [(call, result, launches)], the third a replay."""
    runs = [(c, *c(recorded)) for c in (call.fresh() for _ in range(3))]
    assert [_kind(launches) for _, _, launches in runs] == ["ordinary", "ordinary", "replay"]
    return runs


@pytest.mark.parametrize("backend,op", CASES)
def test_mark_then_trace_then_replay(recorded, backend, op):
    call, states = _calls(backend)[op], []
    for _ in range(4):
        kind = _kind(call.fresh()(recorded)[1])
        states.append((kind, op_replay.marked(), [type(t).__name__ for _, t in op_replay.traces()]))
    assert states == [("ordinary", 1, []), ("ordinary", 0, ["OpTrace"]), ("replay", 0, ["OpTrace"]),
                      ("replay", 0, ["OpTrace"])]


@pytest.mark.parametrize("backend,op", CASES)
def test_a_replay_launches_what_the_ordinary_path_launches(recorded, backend, op):
    call = _calls(backend)[op]
    replay_call, result, launches = _three(recorded, call)[2]
    other = call.fresh()  # the ordinary path on inputs of its own: offsets, not addresses, must agree
    assert_same_launches(_ordinary(recorded, other), other, (result, launches), replay_call)


@pytest.mark.parametrize("backend,op", CASES)
def test_a_replay_returns_new_tensors(recorded, backend, op):
    call = _calls(backend)[op]
    runs = _three(recorded, call)[2:] + [(c, *c(recorded)) for c in [call.fresh()]]  # two replays, results kept
    if op.startswith(("pa_decode", "attend")):  # these write and return the caller's out
        assert all(result is c.args[0] for c, result, _ in runs)
        return
    signature = lambda ts: [(t.shape, t.stride(), t.dtype, t.device) for t in ts]  # noqa: E731
    want = signature(_flat(_ordinary(recorded, call.fresh())[0]))
    for c, result, _ in runs:
        assert signature(_flat(result)) == want
        assert all(_locate(t.data_ptr(), c.inputs()) is None for t in _flat(result)), "a view of an input"
    third, fourth = ({t.data_ptr() for t in _flat(result)} for _, result, _ in runs)
    assert not third & fourth


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values one element past a 16-byte boundary (address mod 16 != 0)."""
    view = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view_as(t)
    return view.copy_(t)


def _strided(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values as a column slice of a wider buffer (rows strided, each contiguous)."""
    return torch.empty(t.shape[0], t.shape[1] + 8, dtype=t.dtype)[:, :t.shape[1]].copy_(t)


VARIANTS = {  # another key than the base call's: (op, how the call differs)
    "softmax_scale": ("pa_decode", lambda c: c.fresh(softmax_scale=c.kwargs["softmax_scale"] * 2)),
    "query_scale": ("attend_sparse", lambda c: c.fresh(query_scale=0.5)),
    "topk": ("index_topk", lambda c: c.fresh(topk=8)),
    "q dtype": ("pa_decode", lambda c: c.fresh(arg=(1, c.args[1].to(torch.float8_e4m3fn)))),
    "qkv dtype": ("write", lambda c: c.fresh(arg=(0, c.args[0].float()))),
    "qkv stride": ("write", lambda c: c.fresh(arg=(0, _strided(c.args[0])))),
    "qkv alignment": ("write", lambda c: c.fresh(arg=(0, _misaligned(c.args[0])))),
    "table width": ("attend_sparse", lambda c: c.fresh(topk_blocks=c.kwargs["topk_blocks"][:, :, :8].contiguous())),
}


@pytest.mark.parametrize("backend", ("hopper", "triton"))
@pytest.mark.parametrize("variant", VARIANTS)
def test_another_key_takes_the_ordinary_path(recorded, backend, variant):
    op, change = VARIANTS[variant]
    call = _calls(backend)[op]
    _three(recorded, call)
    assert _kind(change(call)(recorded)[1]) == "ordinary"
    assert op_replay.marked() == 1 and len(op_replay.traces()) == 1  # marked as a key of its own
    assert _kind(call.fresh()(recorded)[1]) == "replay"  # the old trace still serves its own key


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_python_guard_tells_keys_apart_as_torchs_does(recorded, monkeypatch, variant):
    """Where torch has no ``TensorGuards`` the key's tensors are compared in Python (``op_replay._Signatures``)."""
    monkeypatch.setattr(op_replay, "_guard", lambda tensors: op_replay._Signatures(*tensors))
    op, change = VARIANTS[variant]
    call = _calls("hopper")[op]
    _three(recorded, call)
    assert _kind(change(call)(recorded)[1]) == "ordinary"
    assert _kind(call.fresh()(recorded)[1]) == "replay"


def test_a_head_keeps_its_most_recently_replayed_traces(recorded, monkeypatch):
    """Traces under one head (the same op, scalars and first tensor's shape; here qkv's strides and alignment
    differ) are at most PER_HEAD: the least recently replayed one goes first."""
    monkeypatch.setattr(op_replay, "PER_HEAD", 2)
    call = _calls("hopper")["write"]
    strided, misaligned = VARIANTS["qkv stride"][1], VARIANTS["qkv alignment"][1]
    _three(recorded, call)
    for _ in range(3):
        strided(call)(recorded)
    assert len(op_replay.traces()) == 2
    assert _kind(call.fresh()(recorded)[1]) == "replay"  # the base trace is now the head's most recent
    for _ in range(3):
        misaligned(call)(recorded)  # a third trace: the strided one, least recently replayed, is forgotten
    assert len(op_replay.traces()) == 2
    assert _kind(call.fresh()(recorded)[1]) == "replay"
    assert _kind(strided(call)(recorded)[1]) == "ordinary"


def test_a_mark_or_trace_another_thread_took_is_not_an_error():
    """Two threads making the second call of one key both match its mark; the one that finds it gone takes the
    ordinary path (``_forget`` says False) instead of raising from ``list.remove``."""
    table, item = {"head": []}, ["guard", ()]
    table["head"].append(item)
    assert op_replay._forget(table, "head", table["head"], item) and "head" not in table
    assert not op_replay._forget(table, "head", [], item)


def test_this_torch_has_the_cpp_guard():
    """torch 2.13 (CI) has ``TensorGuards``: a change of torch that loses it shows here, not as a slower replay."""
    assert op_replay.GUARD == "TensorGuards" and not isinstance(op_replay._guard([torch.zeros(1)]),
                                                                 op_replay._Signatures)


def test_both_guards_accept_and_refuse_the_same_tensors():
    base = torch.zeros(4, 8, dtype=torch.bfloat16)
    others = {"same": torch.ones(4, 8, dtype=torch.bfloat16), "shape": torch.zeros(4, 9, dtype=torch.bfloat16),
              "stride": torch.zeros(4, 16, dtype=torch.bfloat16)[:, :8],
              "dtype": torch.zeros(4, 8, dtype=torch.float16),
              "requires_grad": torch.zeros(4, 8, requires_grad=True).bfloat16().detach().requires_grad_()}
    want = {"same": True, "shape": False, "stride": False, "dtype": False, "requires_grad": False}
    for guard in (op_replay._guard([base]), op_replay._Signatures(base)):
        assert {name: guard.check(t) for name, t in others.items()} == want, type(guard).__name__


def test_the_triton_dense_attend_replays_its_decode_over_the_batch_tables(recorded):
    """The Triton dense attend: the batch's tables by torch (ops.dense_tables: made once per batch, kept), then
    pa_decode over them, which replays as the op does. A replay reads the tables of the metadata it is given: after
    an in-place write of the block table, new ones."""
    call = _calls("triton")["attend_dense"]
    kinds = [_kind(call(recorded)[1]) for _ in range(4)]
    assert kinds == ["ordinary", "ordinary", "replay", "replay"]
    assert [head[0][0] for head, _ in op_replay.traces()] == ["pa_decode"]
    block_table, row_request, row_position = call.args[4:7]
    tables, _ = ops.dense_tables(block_table, row_request, row_position, num_kv_heads=1)
    assert tables.data_ptr() in call(recorded)[1][0].args
    block_table[0, 0] = block_table[0, 1]
    fresh, _ = ops.dense_tables(block_table, row_request, row_position, num_kv_heads=1)
    assert fresh is not tables and int(fresh[0, 0]) == int(block_table[0, 1])
    result, launches = call(recorded)
    assert _kind(launches) == "replay" and fresh.data_ptr() in launches[0].args


def test_a_call_that_launches_nothing_and_runs_torch_work_is_refused(recorded):
    """The Hopper attend over a block table of width 0 launches nothing and zeroes ``out`` (out.zero_()): refused,
    and every later call takes the ordinary path (out zeroed each time)."""
    base = _calls("hopper")["attend_dense"]
    empty = base.args[4][:, :0].contiguous()
    call = base.fresh(arg=(4, empty), plan=None)
    for i in range(4):
        this = call.fresh()
        this.args[0].fill_(1)
        assert _kind(this(recorded)[1]) == "none"
        assert not this.args[0].any(), f"call {i + 1}: out not zeroed (a replay skipped the ordinary path)"
    assert [t for _, t in op_replay.traces()] == [op_replay.REFUSED]


@pytest.mark.parametrize("backend", ("hopper", "triton"))
def test_a_table_built_by_torch_is_refused(recorded, backend):
    """index_topk's tiled scorer builds its tile starts with torch ops (tile_starts): refused, never replayed."""
    call = _calls(backend)["index_topk"].fresh(tile_rows=16)
    assert [_kind(call.fresh()(recorded)[1]) for _ in range(4)] == ["ordinary"] * 4
    assert [t for _, t in op_replay.traces()] == [op_replay.REFUSED]


@pytest.mark.parametrize("backend", ("hopper", "triton"))
@pytest.mark.parametrize("how", ("torch work", "a kept tensor"))
def test_a_backend_that_launches_with_torch_work_or_a_kept_tensor_is_refused(recorded, monkeypatch, backend, how):
    call = _calls(backend)["index_topk"]
    table = resolve_backend(backend, CPU)
    inner, kept = table.index_topk, call.args[2].clone()

    def patched(idx_q, records, block_table, *args, **kwargs):
        if how == "torch work":
            block_table.sum()  # a reduction on the host path: not an allocation or a view
        return inner(idx_q, records, kept if how == "a kept tensor" else block_table, *args, **kwargs)

    monkeypatch.setattr(table, "index_topk", patched)
    assert [_kind(call.fresh()(recorded)[1]) for _ in range(4)] == ["ordinary"] * 4
    assert [t for _, t in op_replay.traces()] == [op_replay.REFUSED]


@pytest.mark.parametrize("backend", ("hopper", "triton"))
def test_off_switches(recorded, monkeypatch, backend):
    call = _calls(backend)["index_topk"]
    with monkeypatch.context() as patch:  # ATOM_MXFP4_OP_REPLAY=0
        patch.setattr(op_replay, "ENABLED", False)
        assert [_kind(call.fresh()(recorded)[1]) for _ in range(4)] == ["ordinary"] * 4
        assert not op_replay.traces() and not op_replay.marked()
    _three(recorded, call)
    with launch.tracing():  # a layer step being traced sees every launch: no replay, no new mark or trace
        other = call.fresh(topk=8)
        assert [_kind(c(recorded)[1]) for c in (call.fresh(), other, other, other)] == ["ordinary"] * 4
    assert len(op_replay.traces()) == 1 and not op_replay.marked()
    op_replay.clear()
    assert not op_replay.traces() and not op_replay.marked()
    assert _kind(call.fresh()(recorded)[1]) == "ordinary" and op_replay.marked() == 1


@pytest.mark.parametrize("backend", ("hopper", "triton"))
def test_another_plan_is_another_key(recorded, backend):
    call = _calls(backend, batch=2)["pa_decode"]
    first = call.kwargs["plan"]
    _three(recorded, call)
    plan = ops.plan_pa_decode(first.num_rows, first.max_table_width, first.group, CPU, backend=backend)
    with_plan = call.fresh(plan=plan)
    runs = _three(recorded, with_plan)
    assert len(op_replay.traces()) == 2
    other = with_plan.fresh()
    ordinary = _ordinary(recorded, other)
    assert_same_launches(ordinary, other, runs[2][1:], runs[2][0])
    given = {a for r in runs[2][2] for a in r.args if type(a) is int}  # the second plan's workspace, not the first's
    assert given & {t.data_ptr() for t in _workspace(plan)} and not given & {t.data_ptr() for t in _workspace(first)}


@pytest.mark.parametrize("backend", ("hopper", "triton"))
def test_check_true_replays_after_its_checks_and_still_refuses_by_name(recorded, backend):
    calls = _calls(backend)
    for op, bad, error, name in (
            ("pa_decode", lambda c: c.fresh(arg=(1, c.args[1].float())), TypeError, "q"),
            ("pa_decode", lambda c: c.fresh(arg=(5, c.args[5] + 10**6)), ValueError, "context_lens"),
            ("write", lambda c: c.fresh(arg=(1, c.args[1] + 10**6)), ValueError, "positions")):
        call = calls[op].fresh(check=True)
        runs = _three(recorded, call)  # values checked on each call (new tensors), then traced / replayed
        assert _kind(runs[2][0](recorded)[1]) == "replay"  # the same tensors: checked once, replayed
        recorded.clear()
        with pytest.raises(error, match=name):
            bad(call)(recorded)
        assert not recorded, f"{op}: launched before refusing {name}"
        op_replay.clear()


def test_a_plan_used_once_is_not_kept_alive(recorded):
    """A key seen once only leaves a mark; its plan (and the plan's workspace) must not outlive the caller's use. A
    runner makes a plan per batch (AttentionMetadata.plans, e.g. the SGLang backend's extend batches)."""
    base = _calls("hopper")["pa_decode"].kwargs["plan"]
    plan = ops.plan_pa_decode(base.num_rows, base.max_table_width, base.group, CPU, backend="hopper")
    alive, size = weakref.ref(plan), sum(t.nbytes for t in _workspace(plan))
    _calls("hopper")["pa_decode"].fresh(plan=plan)(recorded)
    del plan
    recorded.clear()
    gc.collect()
    assert alive() is None, (
        f"BUG: op_replay._marks holds the plan of a key seen once ({size / 2**20:.1f} MiB of workspace): the key "
        f"(op_replay.run) keeps the plan object itself, and up to MARKS = {op_replay.MARKS} marks (LIMIT = "
        f"{op_replay.LIMIT} traces) keep a plan per batch alive")


def test_a_trace_made_while_recording_is_not_replayed_by_real_launches(resolvable):
    """Launches recorded (launch.recording) and launches run (the interpreter here) are different keys: a trace of
    recorded launches holds kernel names, not compiled kernels."""
    call = _calls("triton")["index_topk"]
    with launch.recording() as launches:
        _three(launches, call)
    fresh = call.fresh()
    try:
        got = fresh.fn(*fresh.args, **fresh.kwargs)
    except AttributeError as error:
        pytest.fail(f"BUG: a trace made under launch.recording() was replayed outside it ({error}): op_replay.run's "
                    "key does not say whether launches are recorded")
    want = ops.index_topk(*fresh.args, **{**fresh.kwargs, "backend": "torch"})
    assert torch.equal(got, want)


@pytest.mark.parametrize("backend", ("hopper", "triton"))
def test_build_sparse_tables_is_never_replayed(recorded, backend):
    """One launch behind a short host path: called directly, it takes the ordinary path every time (docs/api.md)."""
    call = _calls(backend)["sparse_tables"]
    assert [_kind(call.fresh()(recorded)[1]) for _ in range(4)] == ["ordinary"] * 4
    assert not op_replay.traces() and not op_replay.marked()
