"""The split merge over a thread-block cluster (Gluon + PTX, sm_90): the S splits of a row are one cluster of S CTAs,
and each merges 16 / S of the row's heads from the others' shared memory (DSMEM) instead of the row's last split
reading every partial back from L2. A row of G x 16 splits (G <= MAX_GROUPS: "grouped") is G clusters of 16: each
CTA stores its cluster's merge of its head slice as a partial in the plan's workspace, and the last of the G CTAs of
that slice to arrive (an acq_rel counter per row and slice) merges the G partials from L2.

Why (docs/hopper.md "The split merge over a cluster"): at one program per SM a one-page split spends more on the
global merge than on its page: the partial stores, a gpu-scope acq_rel arrival, then one program reading all S
partials (16 x 8 KB at batch 1) back through one SM. Here a split stores its partial (out [16, 128] and lse [16],
fp32) into its own shared memory, one cluster barrier (release / acquire) publishes it, and CTA ``r`` reads heads
``r * 16 / S ..`` of every split with ``ld.shared::cluster`` (``mapa``): 2048 floats per CTA, all in flight together.
A second cluster barrier keeps every CTA's shared memory alive until the others have read it: a relaxed arrive
once a CTA's sums hold every value it read (no fence: it publishes nothing), the wait after its output store.

The exchange region is XCHG_BYTES past everything the compiler allocated: the launcher asks for the kernel's shared
memory + XCHG_BYTES (rounded to 16 B), and the region's address is ``global_smem + %dynamic_smem_size - XCHG_BYTES``
(``global_smem``: the dynamic shared memory Triton's PTX declares), so no buffer the compiler places can alias it.
Gluon 3.6 has no cluster or DSMEM operations (docs/hopper.md "What Gluon 3.6 could not express"); the loads, stores
and barriers are ``inline_asm_elementwise`` with side effects (kept in program order by LLVM, which never reorders
volatile asm statements).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import layout as L
from ._gluon import cta_barrier

BLOCK_H = gl.constexpr(L.BLOCK_H)
HEAD_DIM = gl.constexpr(L.HEAD_DIM)
OUT_BYTES = L.BLOCK_H * L.HEAD_DIM * 4  # out [16, 128] fp32, then lse [16] fp32
XCHG_BYTES = OUT_BYTES + L.BLOCK_H * 4  # 8256: a multiple of 16
CLUSTER_SIZES = (2, 4, 8, 16)  # a split count that divides the 16 heads (16: a non-portable cluster size, sm_90 ok)
MAX_GROUPS = 4  # clusters per row of a grouped launch (16 x 4 = 64 splits, pa_decode.MAX_SPLITS)
GROUPS_TRIP = gl.constexpr(MAX_GROUPS)
LSE_AT = gl.constexpr(OUT_BYTES)
XCHG = gl.constexpr(XCHG_BYTES)

# the region's address + $1 (a byte offset from the region's end: negative), as register `a`
_ADDRESS = ("mov.u32 a, global_smem;", "mov.u32 s, %dynamic_smem_size;", "add.u32 a, a, s;", "add.u32 a, a, $1;")
STORE_ASM = gl.constexpr("\n".join(("{", ".reg .u32 a, s;") + _ADDRESS
                                   + ("st.shared.f32 [a], $2;", "mov.u32 $0, 0;", "}")))
LOAD_ASM = gl.constexpr("\n".join(("{", ".reg .u32 a, s;") + _ADDRESS
                                  + ("mapa.shared::cluster.u32 a, a, $2;", "ld.shared::cluster.f32 $0, [a];", "}")))
SYNC_ASM = gl.constexpr("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                        "mov.u32 $0, 0;")
WAIT_ASM = gl.constexpr("barrier.cluster.wait.aligned;\nmov.u32 $0, 0;")


@gluon.constexpr_function
def _arrive_asm(pack):
    """A relaxed arrive on the cluster barrier that takes ``pack`` values as inputs (``$pack ..``), so that it issues
    only once they are computed; its ``pack`` outputs are zeros."""
    return "\n".join(["barrier.cluster.arrive.relaxed.aligned;"] + [f"mov.u32 ${i}, 0;" for i in range(pack)])


@gluon.constexpr_function
def _arrive_constraints(pack):
    return ",".join(["=r"] * pack + ["f"] * pack)


@gluon.constexpr_function
def _per_thread(warps):  # one element per thread: an asm call over it runs once per thread
    return gl.BlockedLayout([1], [32], [warps], [0])


@gluon.constexpr_function
def _gather(n, heads, warps):
    """[n partials, heads, 128 dims]: every partial and head of one head-dim column in each thread's registers (the
    sums over partials are register-only); a warp reads 32 consecutive floats per load (no bank conflict). 8 warps
    repeat 4 warps' columns (the same values, loaded twice)."""
    return gl.BlockedLayout([n, heads, 1], [1, 1, 32], [1, 1, warps], [2, 1, 0])


@gluon.jit
def _weigh(lse, part):
    """(m, l, acc) of partials (out [n, heads, 128] normalised, lse [n, heads]): m the largest lse, l = sum_s w_s,
    acc = sum_s w_s * out_s with w_s = 2**(lse_s - m) (m -inf: 0 for every s, not NaN; a NaN lse: w NaN)."""
    m = gl.max(lse, axis=0)  # [heads]; a NaN lse: its weight is NaN below whatever the maximum is
    m_safe = gl.where(m == float("-inf"), 0.0, m)
    weight = gl.exp2(lse - m_safe[None, :])  # [n, heads]
    return m, gl.sum(weight, axis=0), gl.sum(part * weight[:, :, None], axis=0)


@gluon.jit
def lse_of(m, l_sum):
    """A split's or a cluster's partial lse (log2 units) from its maximum m and weight sum l: -inf (weight 0) when
    l == 0, NaN when l is NaN (every merge reads it so: ``_weigh``)."""
    has = l_sum > 0.0
    return gl.where(has, m + gl.log2(gl.where(has, l_sum, 1.0)), gl.where(l_sum == 0.0, float("-inf"), float("nan")))


@gluon.jit
def store_rows(out_ptr, row, head, dim, l_sum, acc, has_context, group, GATHER: gl.constexpr):
    """out[row, head] (bf16) = acc / l; l == 0: zeros when the row has no token, NaN when it has tokens whose logits
    are all -inf; l NaN: NaN. The last step of every split merge (_merge.py's ``_merge_row`` too): ``head`` [n] and
    ``dim`` [128] sliced from ``GATHER`` ([partials, n, 128]) as the loads index them, l [n], acc [n, 128] the sums
    over the partials."""
    rows_layout: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(0, GATHER))
    l_sum = gl.convert_layout(l_sum, rows_layout, assert_trivial=True)
    head = gl.convert_layout(head, rows_layout, assert_trivial=True)
    dim = gl.convert_layout(dim, gl.SliceLayout(0, gl.SliceLayout(0, GATHER)), assert_trivial=True)
    out = acc / gl.where(l_sum > 0.0, l_sum, 1.0)[:, None]
    out = gl.where((l_sum > 0.0)[:, None], out, gl.where(has_context, float("nan"), 0.0))
    gl.store(out_ptr + (row * group + head[:, None]) * HEAD_DIM + dim[None, :], out.to(gl.bfloat16),
             mask=(head < group)[:, None])


@gluon.jit
def _once_per_thread(asm: gl.constexpr):
    WARPS: gl.constexpr = gl.num_warps()
    lane = gl.arange(0, 32 * WARPS, layout=_per_thread(WARPS))
    gl.inline_asm_elementwise(asm, "=r,r", [lane], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _arrive_after(values):
    """The relaxed arrive, once per thread, after every value of ``values`` (all of a thread's registers in one call)
    is computed: a CTA that passes the matching wait may exit, so every remote load behind ``values`` has returned."""
    linear: gl.constexpr = gl.to_linear_layout(values.type.layout, values.shape)
    pack: gl.constexpr = 2 ** len(linear.reg_bases)
    gl.inline_asm_elementwise(_arrive_asm(pack), _arrive_constraints(pack), [values], dtype=gl.int32,
                              is_pure=False, pack=pack)


@gluon.jit
def publish(out, lse, head, dim):
    """Store this split's partial (out [16, 128], lse [16] fp32; ``head`` / ``dim`` their index vectors, sliced from
    out's layout) into the exchange region, then the cluster barrier that makes every split's partial visible."""
    offset = (head[:, None] * HEAD_DIM + dim[None, :]) * 4 - XCHG
    gl.inline_asm_elementwise(STORE_ASM, "=r,r,f", [offset, out], dtype=gl.int32, is_pure=False, pack=1)
    gl.inline_asm_elementwise(STORE_ASM, "=r,r,f", [LSE_AT + head * 4 - XCHG, lse], dtype=gl.int32,
                              is_pure=False, pack=1)
    _once_per_thread(SYNC_ASM)  # release / acquire: the stores above are visible to every CTA's loads below


@gluon.jit
def merge(out_ptr, part_out_ptr, part_lse_ptr, counters_ptr, row, split, num_splits, has_context, group,
          CLUSTER: gl.constexpr, GROUPED: gl.constexpr):
    """out[row, heads rank * 16 / S ..] (bf16) = sum_s w_s * part_s, w_s = 2**(lse_s - max lse) / sum, over the S
    splits' partials in the cluster's shared memory (rank = split % S); the same rules as the global merge
    (_merge.py's ``_merge_row``): a NaN lse makes the head NaN; all -inf: zeros when the row has no token, NaN when it
    has tokens whose logits are all -inf. GROUPED (num_splits = G x S, G >= 2): the cluster's merge of the slice is
    stored as partial (row, split // S) in the workspace, and the slice's last CTA of the row's G to arrive merges them.
    Ends with the cluster barrier that lets every CTA exit (its partial has been read)."""
    HPC: gl.constexpr = BLOCK_H // CLUSTER  # heads per CTA
    GATHER: gl.constexpr = _gather(CLUSTER, HPC, gl.num_warps())
    rank = split % CLUSTER
    source = gl.arange(0, CLUSTER, layout=gl.SliceLayout(1, gl.SliceLayout(2, GATHER)))
    local = gl.arange(0, HPC, layout=gl.SliceLayout(0, gl.SliceLayout(2, GATHER)))
    dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, GATHER)))
    head = rank * HPC + local  # [HPC]
    rank_2d = source[:, None] + local[None, :] * 0  # [S, HPC]: the CTA each value is read from
    lse = gl.inline_asm_elementwise(LOAD_ASM, "=f,r,r", [LSE_AT + head[None, :] * 4 - XCHG + rank_2d * 0, rank_2d],
                                    dtype=gl.float32, is_pure=False, pack=1)
    offset = (head[None, :, None] * HEAD_DIM + dim[None, None, :]) * 4 - XCHG + rank_2d[:, :, None] * 0
    part = gl.inline_asm_elementwise(LOAD_ASM, "=f,r,r", [offset, gl.broadcast(rank_2d[:, :, None], offset)[0]],
                                     dtype=gl.float32, is_pure=False, pack=1)  # [S, HPC, 128]
    m, l_sum, acc = _weigh(lse, part)  # [HPC], [HPC], [HPC, 128]
    _arrive_after(acc)  # done reading the cluster's shared memory (relaxed: nothing of ours is published)
    if GROUPED:
        groups = num_splits // CLUSTER
        has = l_sum > 0.0
        slot = row * groups + split // CLUSTER
        rows_layout: gl.constexpr = gl.SliceLayout(1, gl.SliceLayout(0, GATHER))
        out = acc / gl.convert_layout(gl.where(has, l_sum, 1.0), rows_layout, assert_trivial=True)[:, None]
        gl.store(part_out_ptr + ((slot * BLOCK_H + gl.convert_layout(head, rows_layout, assert_trivial=True))[:, None]
                                 * HEAD_DIM + gl.convert_layout(dim, gl.SliceLayout(0, gl.SliceLayout(0, GATHER)),
                                                                assert_trivial=True)[None, :]), out)
        gl.store(part_lse_ptr + slot * BLOCK_H + head, lse_of(m, l_sum))
        cta_barrier()  # every thread's partial is stored; the release below covers them (cumulative)
        counter = counters_ptr + row * BLOCK_H + rank
        if gl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == groups - 1:  # every group's slice is visible
            GROUPS: gl.constexpr = _gather(GROUPS_TRIP, HPC, gl.num_warps())
            g = gl.arange(0, GROUPS_TRIP, layout=gl.SliceLayout(1, gl.SliceLayout(2, GROUPS)))
            g_local = gl.arange(0, HPC, layout=gl.SliceLayout(0, gl.SliceLayout(2, GROUPS)))
            g_dim = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, GROUPS)))
            g_head = rank * HPC + g_local
            slots = (row * groups + g)[:, None] * BLOCK_H + g_head[None, :]  # [trip, HPC]
            present = (g < groups)[:, None] & (g_head < BLOCK_H)[None, :]
            g_lse = gl.load(part_lse_ptr + slots, mask=present, other=float("-inf"), cache_modifier=".cg")
            g_part = gl.load(part_out_ptr + slots[:, :, None] * HEAD_DIM + g_dim[None, None, :],
                             mask=present[:, :, None], other=0.0, cache_modifier=".cg")
            _, g_l, g_acc = _weigh(g_lse, g_part)
            store_rows(out_ptr, row, g_head, g_dim, g_l, g_acc, has_context, group, GROUPS)
            gl.store(counter, 0)  # the next launch (a graph replay) starts from 0
    else:
        store_rows(out_ptr, row, head, dim, l_sum, acc, has_context, group, GATHER)
    _once_per_thread(WAIT_ASM)  # no CTA exits (freeing its shared memory) before every CTA has read it
