"""What a server's batches make Triton compile (issue 40's capacity run: 7.0 s of compiles inside one timed run).

Triton compiles a kernel once per specialisation: per constexpr value, and, unless a parameter is marked
``do_not_specialize``, per integer argument being 1 or a multiple of 16. An integer that changes with the batch (its
rows, its widest table, its split) then multiplies the compiles a server meets at run time: each new combination
stalls every request for a second or more. Under ``launch.recording()`` the layer's steps run on the CPU for decode
and extend batches of many sizes, on the Hopper and Triton backends, and every integer argument whose kind (1, a
multiple of 16, neither) changed between two launches of one kernel must be one its JIT function does not specialise
on. The constexprs left (the split policy's few launch forms) are counted and bounded.
"""

from __future__ import annotations

import collections

import pytest
import torch


from atom_mxfp4 import launch
from atom_mxfp4.layer import AttentionMetadata, LayerCaches, LayerConfig, SparseMXFP4Attention

pytest.importorskip("triton.experimental.gluon", reason="needs triton >= 3.6 (Gluon)")

PAGE = 128
# (prefix tokens, new tokens) per request of each batch: decode batches of 1 to 33 rows at contexts of 1 to 70 pages,
# and extend batches (chunked prefill: a prefix and a chunk) of 1 to 5 requests
DECODE = [(rows, context) for rows in (1, 3, 16, 17, 33) for context in (100, 128, 2048, 2049, 8960)]
EXTEND = [[(0, 300)], [(0, 16)], [(2048, 512)], [(100, 29), (4000, 1)], [(0, 1), (130, 17), (0, 64), (5, 5), (1, 3)]]


def _run_batch(layers, config, requests):
    pages = max(-(-(prefix + new) // PAGE) for prefix, new in requests)
    caches = {sparse: LayerCaches.allocate(LayerConfig(sparse=sparse), len(requests) * pages + 1)
              for sparse in (True, False)}
    table = torch.arange(1, len(requests) * pages + 1, dtype=torch.int32).view(len(requests), pages)
    meta = AttentionMetadata.for_requests(table, [p for p, _ in requests], [n for _, n in requests])
    tokens = sum(n for _, n in requests)
    for sparse, layer in layers.items():
        qkv = torch.zeros(tokens, LayerConfig(sparse=sparse).qkv_width, dtype=torch.bfloat16)
        layer(qkv, meta, caches[sparse], check=False, return_topk=True)  # return_topk: the ordinary path, launched


@pytest.mark.parametrize("backend", ["hopper", "triton"])
def test_integers_that_change_with_the_batch_are_not_specialised_on(compiled_backends_on_cpu, backend):
    config = LayerConfig()
    weights = {name: torch.zeros(128) for name in ("q_norm", "k_norm", "idx_q_norm", "idx_k_norm")}
    layers = {True: SparseMXFP4Attention(config, weights, backend=backend),
              False: SparseMXFP4Attention(LayerConfig(sparse=False), {k: weights[k] for k in ("q_norm", "k_norm")},
                                          backend=backend)}
    for rows, context in DECODE:
        _run_batch(layers, config, [(context - 1, 1)] * rows)
    for requests in EXTEND:
        _run_batch(layers, config, requests)

    kinds = collections.defaultdict(lambda: collections.defaultdict(set))  # kernel -> argument -> kinds seen
    forms = collections.defaultdict(set)  # kernel -> the constexpr keywords it was launched with
    functions = {}
    for record in compiled_backends_on_cpu:  # kernels by module and name: each backend has a _pa_decode_kernel
        module = getattr(record.function, "fn", record.function).__module__  # interpreted: the function in .fn
        name = f"{module.rsplit('.', 2)[-2]}.{record.kernel}"
        functions[name] = record.function
        forms[name].add(tuple(sorted(record.constexprs.items())))
        for position, value in enumerate(record.args):
            if type(value) is int:
                kinds[name][position].add((value == 1, value % 16 == 0))
    launched = {name.split(".")[1] for name in kinds}
    assert {"_qknorm_rope_write_kernel", "_pa_decode_kernel", "_sparse_tables_kernel", "_select_kernel"} <= launched \
        and launched & {"_score_kernel", "_score_tiled_kernel"}, sorted(kinds)
    specialised = []
    for name, arguments in kinds.items():
        names, loose = list(functions[name].arg_names), launch.not_specialised(functions[name])
        for position, seen in arguments.items():
            if len(seen) > 1 and names[position] not in loose:
                specialised.append(f"{name}.{names[position]} ({sorted(seen)})")
    assert specialised == [], f"{backend}: integers that change with the batch and are specialised on: {specialised}"
    # what is left is the launch forms the policies choose (source, split, cluster, warps, tile): a handful per kernel,
    # none of them a count of the batch (here Hopper's decode: 10 over its three sources)
    assert max(len(f) for f in forms.values()) <= 12, {name: len(f) for name, f in forms.items()}


def test_the_kernels_a_server_launches_keep_specialising_on_model_constants():
    """The head counts, the group, top-k and eps-free strides of the model stay specialised (one value per model:
    no extra compile, and the kernels may fold them)."""
    import importlib

    hopper = importlib.import_module("atom_mxfp4.kernels.hopper.pa_decode")
    triton_decode = importlib.import_module("atom_mxfp4.kernels.triton.pa_decode")
    for kernel in (hopper._pa_decode_kernel, triton_decode._pa_decode_kernel):
        loose = launch.not_specialised(kernel)
        assert "group" not in loose and "pages_per_split" in loose and "num_splits" in loose, loose
    # the compile log names only what the kernel specialises on
    args = [None] * len(hopper._pa_decode_kernel.arg_names)
    names = list(hopper._pa_decode_kernel.arg_names)
    args[names.index("group")], args[names.index("num_splits")] = 16, 32
    words = launch.describe(hopper._pa_decode_kernel, tuple(args), {})
    assert "group%16" in words and "num_splits" not in words, words
