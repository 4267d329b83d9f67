"""The Hopper pa_decode's host side that picks how a launch runs: the tuning config (``HopperConfig``), the split
policy (splits per row, warps per program, clusters, the split tail), all fitted on the H200 (docs/hopper.md "Split
policy", "8 warps per program", "The split merge over a cluster", "The split tail"), and the plan (atom_mxfp4.plan's
protocol: the split-KV workspace, made once per batch). Every choice depends only on (rows, table width) and the
config, so a plan made once is valid for every replay of a CUDA graph. The kernel and its launcher: pa_decode.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from atom_mxfp4.errors import expect
from atom_mxfp4.plan import DecodePlan, check_forced_splits, checked_split, plan_device, sm_count, split_pages

from . import NAME
from . import _cluster
from . import layout as L

# where a row's pages come from (the kernel's SOURCE constexpr): pa_decode's tables, or attend's block table (+ top-k
# ids)
SOURCE_TABLES, SOURCE_DENSE, SOURCE_SPARSE = 0, 1, 2


# ---- tuning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HopperConfig:
    # Chosen before any GPU run (docs/hopper.md): 4 warps (one 32-token quarter of the page each), 4 ring stages
    # (4 x 17408 B = 68 KB of records in flight per program), no register cap. programs_per_sm is what the split
    # policy counts as one wave per SM: 3 from the sm_90 compile (168 registers x 128 threads -> 3 programs in the
    # 64K-register file; 3 x 72 KB shared fits the 228 KB), not yet measured on the H200.
    stages: int = 4
    programs_per_sm: int = 3
    maxnreg: int | None = 168  # the direct kernel's own count: keeps the query_scale variant (191 uncapped) at 3
    # programs per SM without spills (atom_mxfp4/evals/bench/hopper_sass.py; a 128 cap spills 120 B of stack)
    warps: int | None = None  # None: the policy (``warps_for``: 8 where each SM holds at most one program of >= 8
    # pages, else 4); 4 (32 tokens of each page per warp) or 8 (16 per warp: about half the per-page chain) forced
    fast_decode: bool = True  # the one-multiply decode with its exact fallback (layout.WINDOW_*); False: the exact
    # decode only (same bits; tests compare the two, benchmarks measure the difference)
    cluster: bool | None = None  # the split merge over thread-block clusters (``cluster_for``): None the policy, True
    # wherever the split count allows it (2, 4, 8, 16 splits: one cluster; 32, 48, 64: 2-4), False never (the row's
    # last split merges through L2; the split policy then gives no clustered split counts)
    tail_splits: int = 3  # the split tail (``tail_for``): 0 off; 2..16: a direct launch of more rows than one wave
    # runs the rows past its last full wave as that many splits each, where those rows are at most one program per SM
    # (3: faster there on the H200 and the H100; ledger rows "hopper tail_splits=3", docs/hopper.md "The split tail")
    overlap: bool = False  # the in-warp page overlap (``overlap_for``, _loop._stream; issue 42 item 3): each warp
    # loads the next page's K code and scale words from shared memory at the end of a page's trip, so the next
    # page's decode and Q.K^T can run before its barrier; the copies keep one trip less of lead. Off by default (not
    # yet measured on a GPU: hopper_bench.py --overlap); same output bits; needs stages >= 3

    def __post_init__(self):
        expect(self.warps is None or (type(self.warps) is int and self.warps in L.PROGRAM_WARPS), "HopperConfig.warps",
               f"None or one of {L.PROGRAM_WARPS}", self.warps)
        expect(self.cluster is None or type(self.cluster) is bool, "HopperConfig.cluster", "None, True or False",
               self.cluster)
        expect(type(self.tail_splits) is int and (self.tail_splits == 0 or 2 <= self.tail_splits <= MAX_TAIL_SPLITS),
               "HopperConfig.tail_splits", f"0 (off) or an int in [2, {MAX_TAIL_SPLITS}]", repr(self.tail_splits))
        expect(type(self.overlap) is bool, "HopperConfig.overlap", "True or False", repr(self.overlap))
        expect(not self.overlap or self.stages >= 3, "HopperConfig.overlap",
               "False with stages < 3 (the overlap reads one page ahead in the ring)",
               f"{self.overlap!r} with stages {self.stages}")


MAX_TAIL_SPLITS = 16
DEFAULT_CONFIG = HopperConfig()
MIN_PAGES_PER_SPLIT = 2  # a split of one page would spend its time in the prologue / epilogue
FILL_PAGES_PER_SPLIT = 8  # splits beyond one program per SM (up to a wave) only while each keeps this many pages
EIGHT_WARP_MIN_PAGES = 8  # the 8-warp program only for splits this long (``warps_for``)
MAX_SPLITS = 64  # the row's last split merges the partials, MERGE_TRIP a trip: hundreds of partials cost more than
# the splits save (docs/hopper.md "Split policy"; 1 x 131K: ledger row "pa_decode" / "hopper 342 splits")
ONE_PAGE_SPLIT_WIDTH = 16  # tables this narrow split one page per program when rows x width <= SMs: measured faster
# on the H200 at 1-8 rows x 16 pages, slower at 16 rows x 16 pages and 1 row x 64 pages (docs/hopper.md "Split
# policy"; the sweep's figures: ledger rows "pa_decode" / "hopper 16 one-page splits" against "hopper 8 splits")


CLUSTER_SIZES = _cluster.CLUSTER_SIZES  # split counts whose merge can run over a cluster (``cluster_for``)
POLICY_CLUSTER_SIZES = (4, 8, 16)  # the policy's: at 2 splits the cluster merge measured 0-2% slower on the H200,
# at 4-16 up to 17% faster while the launch fills at most half the SMs, and slower beyond (``cluster_for``;
# docs/hopper.md "The split merge over a cluster")
CLUSTER_PAGES_PER_SPLIT = 4  # clustered splits replace more L2-merged ones up to this many pages each
CLUSTERED_SPLITS = (64, 48, 32, 16)  # the split counts the policy gives clustered launches, most first


H200_SMS = 132  # the SM count planned with off-GPU: the H200 the policy was measured on


def _sms(device: torch.device) -> int:
    return sm_count(device.index, H200_SMS) if device.type == "cuda" else H200_SMS


def _most_splits(num_rows: int, width: int, sms: int) -> int:
    """One page per split for narrow tables whose pages fit one program per SM; else MIN_PAGES_PER_SPLIT pages per
    split, at most MAX_SPLITS."""
    if width <= ONE_PAGE_SPLIT_WIDTH and num_rows * width <= sms:
        return max(1, width)
    return min(MAX_SPLITS, max(1, width // MIN_PAGES_PER_SPLIT))


def num_splits_for(num_rows: int, max_table_width: int, device: torch.device, programs_per_sm: int,
                   clusters: bool = True) -> int:
    """Splits per row; depends only on (rows, table width), so a plan stays valid for every graph replay.

    Fitted to the forced-split sweep on the H200 (docs/hopper.md "Split policy"): programs of one SM share its issue
    slots, so splitting rows that already occupy the SMs only adds partial stores and merges (512 rows x 16 pages:
    direct faster than the previous policy's 3 splits; ledger row "pa_decode" / "hopper 1 split"). The most splits of:
    one program
    per SM (SMs // rows), and one wave (``programs_per_sm`` x SMs) // rows while each split keeps FILL_PAGES_PER_SPLIT
    pages; at least 1, at most MAX_SPLITS and width // MIN_PAGES_PER_SPLIT; tables of <= ONE_PAGE_SPLIT_WIDTH pages
    whose rows x width fit one program per SM split one page per program (the sweep's small-batch best).
    ``clusters`` (the config does not turn clusters off): where a row's splits can merge over clusters
    (``cluster_for``: rows x splits <= SMs // 2), splitting is cheap, so a launch takes the most clustered splits
    (``_clustered_splits``: 64, 48, 32 or 16, every split non-empty) when they are at least as many as the above, or
    keep <= CLUSTER_PAGES_PER_SPLIT pages each: more clustered splits measured faster where each keeps few pages
    (docs/hopper.md "The split merge over a cluster"; 1 x 64 pages at 64 clustered splits against the previous 32
    through L2, 4 x 64 at 16 clustered against 32: ledger rows "pa_decode" / "hopper 64 splits clustered" and "hopper
    16 splits clustered"; 4 x 256 keeps 32, 16 pages a split at 16 being slower).
    """
    if num_rows == 0:
        return 1
    sms = _sms(device)
    most = _most_splits(num_rows, max_table_width, sms)
    per_sm = sms // num_rows
    wave = min(programs_per_sm * sms // num_rows, max_table_width // FILL_PAGES_PER_SPLIT)
    splits = max(1, min(max(per_sm, wave), most))
    clustered = _clustered_splits(num_rows, max_table_width, sms) if clusters else 0
    if clustered and (clustered >= splits or max_table_width <= clustered * CLUSTER_PAGES_PER_SPLIT):
        return clustered
    return splits


def _clustered_splits(num_rows: int, width: int, sms: int) -> int:
    """The most splits of CLUSTERED_SPLITS (one or 2-4 clusters of 16 per row) that fit half the SMs with every split
    of a ``width``-page table non-empty (``split_pages`` keeps the count); 0 if none does."""
    for splits in CLUSTERED_SPLITS:
        if num_rows * splits <= sms // 2 and split_pages(width, splits)[0] == splits:
            return splits
    return 0


def warps_for(config: HopperConfig, programs: int, pages_per_split: int, device: torch.device) -> int:
    """The program's warp count for a launch of ``programs`` programs (rows x splits) of ``pages_per_split`` pages:
    ``config.warps`` when forced; else SMALL_BATCH_WARPS (8 x 16 tokens of each page) where the programs fit one per
    SM and each streams at least EIGHT_WARP_MIN_PAGES pages, WARPS (4 x 32 tokens) otherwise.

    Measured on the H200 (docs/hopper.md "8 warps per program" and its ledger rows, docs/results/ledger.csv; forced
    warp counts at every split count, same run: ledger rows "pa_decode" / "hopper warps=8" against "hopper warps=4"
    at the shapes named here): at one program per SM the 8-warp program streams pages 10-18% faster (1 row x 1024
    pages, 64 splits of 16 pages; 4 x 256, 32 splits of 8), but a program of 1-4 pages is slower with 8 warps (1 x 16
    pages, 16 splits; its once-per-program combine and merge cost more than the halved page chain saves), and where
    programs share SMs the 4-warp program's fewer instructions per element win (128 x 16 pages, 2 splits)."""
    if config.warps is not None:
        return config.warps
    if programs <= _sms(device) and pages_per_split >= EIGHT_WARP_MIN_PAGES:
        return L.SMALL_BATCH_WARPS
    return L.WARPS


def cluster_for(config: HopperConfig, rows: int, splits: int, device: torch.device, warps: int = L.WARPS) -> int:
    """The cluster size of a launch of ``rows`` x ``splits`` programs: ``splits`` where the row's splits merge over
    one cluster (``_cluster``), 16 where they are G x 16 (G <= MAX_GROUPS: G clusters per row, whose merges meet
    through L2, "grouped"), else 1 (the row's last split merges from L2). One cluster only for split counts that
    divide the 16 heads (2, 4, 8, 16); ``config.cluster`` True / False forces clusters on / off where the split
    count allows. None (the policy): 4, 8, 16 or G x 16 splits of the 4-warp program (``warps``, ``warps_for``)
    while rows x splits <= SMs // 2; not the 8-warp program: it takes a whole SM, so a cluster of 16 needs 16 SMs of
    one GPC (smaller sm_90 parts may not hold one; forced on the H200, 0.94x to 1.63x of its L2 merge: ledger rows
    "pa_decode" / "hopper warps=8 cluster merge"). Measured on the H200 (docs/hopper.md "The split merge over a
    cluster", forced on / off, same run; ledger rows "pa_decode" / "hopper cluster merge" against "hopper L2 merge"):
    faster at 1 x 16 pages with 16 splits, 1 x 64 with 16, 8 x 16 with 8 and 16 x 16 with 4; but at 128 programs and
    more slower (8 x 16 with 16 splits, 16 x 16 with 8, 16 x 64 at 8 warps with 8): a cluster's CTAs must be
    co-scheduled in one GPC, which a launch that fills the SMs cannot always do."""
    biggest = CLUSTER_SIZES[-1]
    if splits in CLUSTER_SIZES:
        size = splits
    elif splits % biggest == 0 and splits // biggest <= _cluster.MAX_GROUPS:
        size = biggest
    else:
        return 1
    if config.cluster is not None:
        return size if config.cluster else 1
    policy = size in POLICY_CLUSTER_SIZES and warps == L.WARPS and rows * splits <= _sms(device) // 2
    return size if policy else 1


def overlap_for(config: HopperConfig, source: int) -> bool:
    """The kernel's OVERLAP constexpr for a launch from ``source`` under ``config``: the configured in-warp page
    overlap, except in a sparse attend's one launch (1-2 pages per program, little to overlap; with it on, that loop
    spilled 24 B of stack at the 168-register cap under triton 3.6)."""
    return config.overlap and source != SOURCE_SPARSE


def tail_for(config: HopperConfig, rows: int, width: int, splits: int, source: int,
             device: torch.device) -> tuple[int, int, int]:
    """(tail_begin, tail splits, pages per tail split) of a launch of ``rows`` x ``width`` with ``splits`` splits:
    ``(rows, 0, 0)`` (no tail) unless ``config.tail_splits`` is on, the launch is direct (one split; a sparse attend's
    one launch never is past one program per SM) and its rows fill more than one wave (``programs_per_sm`` x SMs)
    without filling the last, and the last wave's rows are at most one program per SM. Then those rows, from
    ``tail_begin`` on, run as the configured splits each (fewer where the table is narrower: ``split_pages``), merged
    in the launch; the rows before stay one program each. Programs start in id order, so the tail's splits fill the
    SMs the full waves free, where one program per row would leave each SM with at most one program (docs/hopper.md
    "The final profile": 512 rows are 1.29 waves of 396). A longer tail already holds most SMs with two programs:
    there the splits measured slower (600 and 1024 rows x 2048 tokens, both GPUs) and the launch stays direct.
    Depends only on (rows, width), like the split, so a plan stays valid for graphs."""
    sms = _sms(device)
    wave = config.programs_per_sm * sms
    tail = rows % wave
    if (config.tail_splits == 0 or splits != 1 or source == SOURCE_SPARSE or rows <= wave or tail == 0
            or tail > sms):
        return rows, 0, 0
    tail_splits, pages_per_split = split_pages(width, config.tail_splits)
    if tail_splits < 2:
        return rows, 0, 0
    return rows - tail, tail_splits, pages_per_split


# ---- plan -------------------------------------------------------------------------------------------------------
def _split(rows: int, width: int, device: torch.device, config: HopperConfig, forced: int | None) -> tuple[int, int]:
    """(splits, pages_per_split) of a launch of ``rows`` x ``width``: the forced count, else the policy under this
    config (clustered split counts unless it turns clusters off)."""
    wanted = (forced if forced is not None
              else num_splits_for(rows, width, device, config.programs_per_sm, config.cluster is not False))
    return split_pages(width, wanted)


def partial_slots(num_rows: int, max_table_width: int, device: torch.device, config: HopperConfig,
                  num_splits: int | None) -> int:
    """Partial (row, split) slots enough for every launch of <= num_rows rows over tables <= max_table_width wide (0:
    none of them splits). Forced splits: rows x splits. The policy (``num_splits_for``): a launch of r rows splits at
    most max(SMs, wave) // r ways (r x splits <= one wave) and at most MAX_SPLITS, width // MIN_PAGES_PER_SPLIT ways;
    a narrow table (one-page splits) at most r x w <= SMs ways; clustered splits r x splits <= SMs // 2; the split
    tail (``tail_for``, policy splits only) min(wave - 1, SMs) rows x tail_splits."""
    if num_splits is not None:
        wanted = split_pages(max_table_width, num_splits)[0]
        return num_rows * wanted if wanted > 1 else 0
    if num_rows == 0:
        return 0
    sms = _sms(device)
    # one-page splits: a launch of r rows x w <= ONE_PAGE_SPLIT_WIDTH pages with r x w <= SMs takes r x w slots
    one_page = min(num_rows * min(max_table_width, ONE_PAGE_SPLIT_WIDTH), sms) if max_table_width >= 2 else 0
    most = min(MAX_SPLITS, max(1, max_table_width // MIN_PAGES_PER_SPLIT))
    wave = max(1, config.programs_per_sm) * sms
    wide = min(num_rows * most, wave) if most > 1 else 0
    # clustered splits (``_clustered_splits``): r x splits <= SMs // 2, at most CLUSTERED_SPLITS[0] per row (a launch
    # over clusters needs fewer, but the plan protocol counts rows x splits)
    clustered = (min(num_rows * min(max_table_width, CLUSTERED_SPLITS[0]), sms // 2)
                 if max_table_width >= CLUSTERED_SPLITS[-1] and config.cluster is not False else 0)
    # the split tail (``tail_for``): at most one row per SM (and fewer than a wave), each at most tail_splits slots
    tail = min(wave - 1, sms) * config.tail_splits if config.tail_splits and num_rows > wave else 0
    return max(one_page, wide, clustered, tail)


@dataclass(frozen=True, eq=False)
class HopperDecodePlan(DecodePlan):
    """The Hopper backend's plan (the protocol of atom_mxfp4.plan): tuning + split-KV workspace.

    part_out [slots, 16, 128] fp32 and part_lse [slots, 16] fp32: slot ``row * splits + split`` of a split launch
    (``partial_slots``: enough for every launch the plan covers; a grouped cluster launch uses ``row * groups +
    group``); counters [rows x 16] int32, zero between launches: counter ``row`` how many splits of the row have
    stored their partial (the last one merges the row, then resets it to 0), or in a grouped cluster launch counter
    ``row * 16 + rank`` how many of its clusters have stored head slice ``rank``. None when no launch it covers
    splits.
    ``num_splits`` / ``pages_per_split``: what a launch of the plan's own shape does (benchmarks report them).
    """

    config: HopperConfig
    forced_splits: int | None  # None: each launch takes num_splits_for(its rows, its width); an int: every launch
    num_splits: int
    pages_per_split: int
    part_out: torch.Tensor | None
    part_lse: torch.Tensor | None
    counters: torch.Tensor | None
    shapes: dict = field(default_factory=dict, init=False, repr=False)  # the plan's launch decisions, each made on
    # the first launch that asks: (rows, width, source) -> LaunchShape (``launch_shape``), its constexprs, whether a
    # sparse attend fuses; ``with_config`` starts a new one

    def splits_for(self, rows: int, width: int) -> tuple[int, int]:
        """(splits, pages_per_split) of a launch of ``rows`` x ``width``: the same for every plan that covers it."""
        return _split(rows, width, self.device, self.config, self.forced_splits)


@dataclass(frozen=True)
class LaunchShape:
    """How a launch of one (rows, width, source) runs under a plan (``launch_shape``): its split, split tail, warps
    and cluster. ``splits`` / ``pages_per_split`` are the tail's when ``tail`` > 0 (module docstring of pa_decode)."""

    splits: int
    pages_per_split: int
    tail_begin: int  # 0 without a tail (one JIT specialisation whatever the rows)
    tail: int
    programs: int
    warps: int
    cluster: int


def launch_shape(plan: HopperDecodePlan, rows: int, width: int, source: int) -> LaunchShape:
    """The launch of ``rows`` x ``width`` from ``source`` under ``plan``, decided once per shape and plan (every layer
    of a batch and every later batch of that shape reuse it: no policy runs on the launch path). Refuses a plan whose
    workspace holds fewer partial slots than the launch needs (``checked_split``)."""
    key = (rows, width, source)
    shape = plan.shapes.get(key)
    if shape is None:
        shape = plan.shapes[key] = _decide(plan, rows, width, source)
    return shape


def _decide(plan: HopperDecodePlan, rows: int, width: int, source: int) -> LaunchShape:
    cfg, device = plan.config, plan.device
    splits, pages_per_split = checked_split(plan, rows, width)
    tail_begin, tail, tail_pages = (tail_for(cfg, rows, width, splits, source, device) if plan.forced_splits is None
                                    else (rows, 0, 0))
    if tail:  # the split tail: rows before tail_begin direct, each later row ``tail`` splits, one grid dimension
        expect(plan.part_out is not None and plan.part_out.shape[0] >= (rows - tail_begin) * tail,
               "plan workspace (part_out slots)", f">= {(rows - tail_begin) * tail} for the split tail",
               None if plan.part_out is None else plan.part_out.shape[0])
        splits, pages_per_split = tail, tail_pages
    programs = tail_begin + (rows - tail_begin) * tail if tail else rows * splits
    warps = warps_for(cfg, programs, pages_per_split, device)
    cluster = 1 if tail else cluster_for(cfg, rows, splits, device, warps)
    return LaunchShape(splits, pages_per_split, tail_begin if tail else 0, tail, programs, warps, cluster)


def make_plan(num_rows, max_table_width, group, device, *, num_splits=None, config=None) -> HopperDecodePlan:
    """A plan for calls of <= num_rows rows and tables <= max_table_width wide (atom_mxfp4.plan). ``config``: the
    tuning (None: DEFAULT_CONFIG); ``num_splits``: None (the split policy, per launch) or a forced split count."""
    device = plan_device(device)
    config = DEFAULT_CONFIG if config is None else config
    check_forced_splits(num_splits)
    own = _split(num_rows, max_table_width, device, config, num_splits)
    slots = partial_slots(num_rows, max_table_width, device, config, num_splits)
    part_out = part_lse = counters = None
    if slots > 0:
        part_out = torch.empty(slots, L.BLOCK_H, L.HEAD_DIM, dtype=torch.float32, device=device)
        part_lse = torch.empty(slots, L.BLOCK_H, dtype=torch.float32, device=device)
        counters = torch.zeros(num_rows * L.BLOCK_H, dtype=torch.int32, device=device)
    return HopperDecodePlan(NAME, num_rows, max_table_width, group, device, config, num_splits, *own, part_out,
                            part_lse, counters)


def with_config(plan: HopperDecodePlan, config: HopperConfig) -> HopperDecodePlan:
    """The same plan with another tuning config (benchmarks and tests override tuning this way)."""
    return replace(plan, config=config)
