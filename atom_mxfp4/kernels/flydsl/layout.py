"""Every index map of the gfx950 pa_decode kernel, as plain integer functions.

The kernel (``pa_decode_kernel.py``) calls these same functions while it is traced, with FlyDSL ``Int32``
values for ``lane`` / ``token``; the host emulator (``emulate.py``) and the CPU tests call them with Python
ints. Only ``+ * & >> <<`` and Python-int constants are used, so both readings are the same arithmetic: what
the tests check on the host is what the kernel computes on the device.

Record (DESIGN §4): per (page, head) 8704 B = ``[128 tokens x 64 B e2m1 codes][128 tokens x 4 B e8m0 scales]``;
code byte ``b`` of a token holds elements ``2b`` (low nibble) and ``2b + 1`` (high nibble); scale byte ``k``
covers elements ``32k .. 32k + 31``.

Work split: one workgroup = 4 waves x 64 lanes per (row, KV split). Wave ``w`` takes the 64-token tiles
``w, w + 4, w + 8, ...`` of its split; a tile never crosses a page (128 = 2 tiles). Per lane, ``c = lane & 15``
and ``g = lane >> 4``.

MFMA operand conventions assumed (CDNA4, wave64; ``e`` = element index inside the lane's operand registers):
  v_mfma_scale_f32_16x16x128_f8f6f4: A row / B column ``c``; result register i = D[4 g + i][c]. The k of an
    element depends on its format (``mfma_k_fp4`` / ``mfma_k_fp8``): e2m1 lanes hold 32 contiguous k
    (``32 g + e``), e4m3 lanes hold two 16-element chunks (``64 (e >> 4) + 16 g + (e & 15)``), the layout the
    Triton gfx950 backend uses for e4m3 x e2m1 scaled dots (dot operand kWidth 16). Lane group g supplies the
    e8m0 scale of k-block g (k 32 g .. 32 g + 31), which for e2m1 A is exactly the lane's own 32 codes.
  v_mfma_f32_16x16x32_bf16:          A row ``c``, B column ``c``, both k = ``8 g + e`` (e < 8); D as above.
The bf16 product only needs A's and B's k to agree, so the token order inside a PV step is free: we pick the
one that lets each lane feed P straight from its own QK result registers (``pv_token``).
"""

from __future__ import annotations

import math

# the record geometry (DESIGN §4) from the ground floor; what follows is this kernel's own work split
from atom_mxfp4.layout import (DATA_BYTES, E8M0_ONE, HEAD_DIM, MAX_GROUP, PAGE_SIZE,  # noqa: F401
                               RECORD_BYTES, SCALE_BYTES, SCALE_OFFSET, data_view, scale_view)

WAVE = 64
WAVES = 4
THREADS = WAVE * WAVES
TILE = 64  # tokens per wave iteration
QK_SUBTILES = TILE // 16  # 4 scaled MFMAs (16 tokens x 16 heads x k=128) per tile
PV_STEPS = TILE // 32  # 2 bf16 MFMA k-steps (32 tokens) per tile
D_TILES = HEAD_DIM // 16  # 8 output tiles of 16 dims
E4M3_MAX = 448.0
LOG2E = 1.4426950408889634

# Wave-private LDS: V of one tile widened to bf16 and transposed, [128 d][64 tokens], rows padded to 136 B
# (8 B aligned for ds_write_b64/ds_read_b64). After the loop the same bytes hold the wave's partial O [16 h][128 d]
# fp32 (8192 B), then m [16] and l [16] fp32.
VT_STRIDE = TILE * 2 + 8  # 136
WAVE_LDS_BYTES = HEAD_DIM * VT_STRIDE  # 17408
LDS_BYTES = WAVES * WAVE_LDS_BYTES  # 69632
O_PART_BYTES = MAX_GROUP * HEAD_DIM * 4  # 8192
M_OFFSET = O_PART_BYTES
L_OFFSET = O_PART_BYTES + MAX_GROUP * 4
assert L_OFFSET + MAX_GROUP * 4 <= WAVE_LDS_BYTES

# fp4 (e2m1) element order inside one 32-bit word fed to v_cvt_scalef32_pk_bf16_fp4 with byte select k:
# result bf16 [0] = element 2k (low nibble), [1] = element 2k + 1 (high nibble).


# ---- lanes ---------------------------------------------------------------------------------------------------
def lane_c(lane):
    return lane & 15


def lane_g(lane):
    return lane >> 4


# ---- scaled MFMA k of each operand element ------------------------------------------------------------------
def mfma_k_fp4(lane, e):
    """k of e2m1 element ``e`` (0..31: nibble e of the lane's 4 dwords, low nibble first) of a scaled-MFMA operand."""
    return 32 * lane_g(lane) + e


def mfma_k_fp8(lane, e):
    """k of e4m3 byte ``e`` (0..31 of the lane's 8 dwords) of a scaled-MFMA operand."""
    return 64 * (e >> 4) + 16 * lane_g(lane) + (e & 15)


# ---- QK: A = K tile (fp4 + e8m0), B = Q^T (e4m3) ---------------------------------------------------------------
def k_token(j, lane):
    """Tile-relative token whose K row lane ``lane`` feeds as A row for QK sub-tile ``j`` (0..3)."""
    return 16 * j + lane_c(lane)


def k_data_offset(token_in_page, lane):
    """Byte offset in the record of the 16 code bytes the lane loads for one token: elements (head dims)
    ``mfma_k_fp4(lane, 0 .. 31)`` = 32 g .. 32 g + 31, i.e. code bytes 16 g .. 16 g + 15 of the token's row."""
    return token_in_page * DATA_BYTES + 16 * lane_g(lane)


def k_scale_offset(token_in_page, lane):
    """Byte offset in the record of the e8m0 scale of that 32-element block."""
    return SCALE_OFFSET + token_in_page * SCALE_BYTES + lane_g(lane)


def q_head(lane):
    """Query head (B column) of the lane; heads >= group feed zeros and are never stored."""
    return lane_c(lane)


def q_chunk_dim0(lane, chunk):
    """First head dim of chunk ``chunk`` (0, 1) of the lane's Q operand: 16 contiguous dims per chunk, which are
    bytes ``16 chunk .. 16 chunk + 15`` of the operand (``mfma_k_fp8``)."""
    return 64 * chunk + 16 * lane_g(lane)


def s_token(j, lane, i):
    """Tile-relative token of result register ``i`` of QK sub-tile ``j`` (head = q_head(lane))."""
    return 16 * j + 4 * lane_g(lane) + i


# ---- V: loaded 4 tokens x 32 dims per lane, widened to bf16, stored transposed -------------------------------
def v_block(lane):
    """Scale block (32 dims: 32 cb .. 32 cb + 31) the lane loads."""
    return lane & 3


def v_token(lane, u):
    """Tile-relative token of the lane's ``u``-th (0..3) V load."""
    return 4 * (lane >> 2) + u


def v_data_offset(token_in_page, lane):
    return token_in_page * DATA_BYTES + 16 * v_block(lane)


def v_scale_offset(token_in_page, lane):
    return SCALE_OFFSET + token_in_page * SCALE_BYTES + v_block(lane)


def vt_offset(dim, token):
    """Byte offset of V^T[dim][token] (bf16) in the wave's LDS region."""
    return dim * VT_STRIDE + 2 * token


# ---- PV: A = V^T (bf16, from LDS), B = P^T (bf16, from the lane's own QK registers) --------------------------
def pv_token(step, lane, e):
    """Tile-relative token in k-slot ``e`` (0..7) of PV step ``step`` for this lane.

    Slots 0..3 are QK sub-tile 2*step, registers 0..3; slots 4..7 are sub-tile 2*step + 1: the same lane's
    registers, so P needs no cross-lane move.
    """
    return 32 * step + 4 * lane_g(lane) + (e & 3) + 16 * (e >> 2)


def pv_dim(d_tile, lane):
    """Head dim (A row) the lane reads from V^T for output tile ``d_tile``."""
    return 16 * d_tile + lane_c(lane)


def o_dim(d_tile, lane, i):
    """Head dim of result register ``i`` of output tile ``d_tile`` (head = q_head(lane))."""
    return 16 * d_tile + 4 * lane_g(lane) + i


# ---- epilogue: thread t of the workgroup combines 8 dims of one head -----------------------------------------
def epilogue_head(thread):
    return thread >> 4


def epilogue_dim0(thread):
    return 8 * (thread & 15)


# ---- host-side planning ------------------------------------------------------------------------------------
def max_splits(max_table_width: int) -> int:
    """One split per workgroup step (4 x 64 tokens) of the table at most."""
    return math.ceil(max(1, max_table_width) * PAGE_SIZE / (WAVES * TILE))


def wanted_splits(num_rows: int, max_table_width: int, num_cus: int = 256, waves_per_cu: int = 2) -> int:
    """The split policy: enough splits to fill about ``num_cus * waves_per_cu`` workgroups, at most
    ``max_splits``. Never falls when the table widens or the rows get fewer."""
    wanted = math.ceil(num_cus * waves_per_cu / max(1, num_rows))
    return max(1, min(max_splits(max_table_width), wanted))


def partition(max_table_width: int, splits: int) -> tuple[int, int]:
    """(num_splits, partition_tokens) for ``splits`` asked over tables ``max_table_width`` wide: a partition is a
    multiple of the workgroup's 4 x 64-token step, so every wave of a full partition has work; as many splits as
    the partition leaves non-empty (never more than asked); one split is the direct path (no workspace, no merge)."""
    step = WAVES * TILE
    max_tokens = max(1, max_table_width) * PAGE_SIZE
    tokens = math.ceil(math.ceil(max_tokens / max(1, splits)) / step) * step
    return math.ceil(max_tokens / tokens), tokens


def row_tokens(ctx, num_splits, partition_tokens, minimum=min, maximum=max):
    """Tokens per split of a row of ``ctx`` >= 0 tokens: its own tokens divided over the launch's ``num_splits``, a
    multiple of the workgroup's step (WAVES x TILE), at least one step and at most ``partition_tokens`` (the launch's
    partition of the table's width: a full row splits as the width does). So a short row in a wide table (a dense
    layer's whole block table) spreads over every split instead of sitting on the first ones; its split s holds tokens
    [s x row_tokens, ...) and the merge reads its first ceil(ctx / row_tokens) splits. Python ints (the emulator) or
    the kernels' fx.Int32 values (``minimum`` / ``maximum``: their min / max; ``maximum`` takes the step as an int)."""
    step = WAVES * TILE
    share = (ctx + num_splits - 1) // num_splits
    return minimum(partition_tokens, maximum((share + step - 1) // step * step, step))


def choose_splits(num_rows: int, max_table_width: int, num_cus: int = 256, waves_per_cu: int = 2):
    """(num_splits, partition_tokens) of a launch: the policy's count, partitioned."""
    return partition(max_table_width, wanted_splits(num_rows, max_table_width, num_cus, waves_per_cu))
