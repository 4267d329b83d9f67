"""Compile-only probe (sm_90, no GPU): the skeleton of a swap-AB wgmma page loop for the Hopper decode.

S^T [128 tokens, 16 heads] = K [128 tokens, 128 dims] . Q^T [128 dims, 16 heads]: tokens in M (wgmma's M >= 64),
the 16 heads in N; K from registers (where the MXFP4 decode would leave it), Q^T in shared memory once per program.
O^T [128 dims, 16 heads] += V^T [128 dims, 128 tokens] . P^T [128 tokens, 16 heads]: V^T from registers, P^T
through shared memory each page (wgmma's B is shared memory only). The decode is stood in for by bf16 loads from
global memory straight into the operand layouts (its cost is known: 2.25-2.75 instructions per element); the probe
counts what the skeleton costs around it: wgmma, the softmax over tokens (a reduction over M: across the warpgroup's
warps), P^T's store and fence, the O^T rescale, registers.

    python3 probe.py          # SASS counts of the loop and the kernel's registers
    python3 probe.py --run    # on an H200 (atom_mxfp4 importable): the shared-memory variants against torch, their
                              # time per page at 1-3 programs per SM, beside the shipped Hopper pa_decode's
"""
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, warpgroup_mma,  # noqa: E402
                                                            warpgroup_mma_wait)

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "evals" / "bench"))
from sass_counts import cubin_sass, loops, opcodes, resource_usage  # noqa: E402

TOKENS, DIMS, HEADS = gl.constexpr(128), gl.constexpr(128), gl.constexpr(16)


@gluon.jit
def _probe_kernel(q_ptr, k_ptr, v_ptr, out_ptr, pages, scale, ASYNC: gl.constexpr, FROM_SHARED: gl.constexpr,
                  CHUNKED: gl.constexpr):
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16])
    A_OP: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=ACC, k_width=2)
    SMEM: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2)
    # Q^T [dims, heads] once per program into shared memory
    pid = gl.program_id(0)
    q_ptr += pid * HEADS * DIMS
    out_ptr += pid * HEADS * DIMS
    d = gl.arange(0, DIMS, layout=gl.SliceLayout(1, gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])))
    h = gl.arange(0, HEADS, layout=gl.SliceLayout(0, gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])))
    qt = gl.load(q_ptr + h[None, :] * DIMS + d[:, None])
    qt_smem = gl.allocate_shared_memory(gl.bfloat16, [DIMS, HEADS], SMEM, qt)
    pt_smem = gl.allocate_shared_memory(gl.bfloat16, [TOKENS, HEADS], SMEM)
    fence_async_shared()
    rows = gl.arange(0, TOKENS, layout=gl.SliceLayout(1, A_OP))
    cols = gl.arange(0, DIMS, layout=gl.SliceLayout(0, A_OP))
    if FROM_SHARED:  # operands staged once (a stand-in for decoding from the ring: ldmatrix-shaped reads per page)
        k_smem = gl.allocate_shared_memory(gl.bfloat16, [TOKENS, DIMS], SMEM,
                                           gl.load(k_ptr + rows[:, None] * DIMS + cols[None, :]))
        vt_smem = gl.allocate_shared_memory(gl.bfloat16, [DIMS, TOKENS], SMEM,
                                            gl.load(v_ptr + cols[None, :] * DIMS + rows[:, None]))
    m_i = gl.full([HEADS], float("-inf"), gl.float32, gl.SliceLayout(0, ACC))
    l_t = gl.zeros([TOKENS, HEADS], gl.float32, ACC)  # per-thread partial sums, reduced once after the loop
    o_t = gl.zeros([DIMS, HEADS], gl.float32, ACC)
    for page in range(pages):
        base = page * TOKENS * DIMS
        if CHUNKED:  # 8 wgmma a product on 16-wide slices of K: only a slice of each operand live at a time
            s_t = gl.zeros([TOKENS, HEADS], gl.float32, ACC)
            for c in gl.static_range(DIMS // 16):
                k_c = k_smem.slice(16 * c, 16, dim=1).load(A_OP)
                s_t = warpgroup_mma(k_c, qt_smem.slice(16 * c, 16, dim=0), s_t, is_async=True)
            s_t = warpgroup_mma_wait(num_outstanding=0, deps=[s_t])
        elif FROM_SHARED:
            k = k_smem.load(A_OP)
            vt = vt_smem.load(A_OP)
        else:
            k = gl.load(k_ptr + base + rows[:, None] * DIMS + cols[None, :])  # stands in for the decoded K
            vt = gl.load(v_ptr + base + cols[None, :] * DIMS + rows[:, None])  # V^T [dims, tokens]
        if not CHUNKED:
            s_t = warpgroup_mma(k, qt_smem, gl.zeros([TOKENS, HEADS], gl.float32, ACC), is_async=ASYNC)
            if ASYNC:
                s_t = warpgroup_mma_wait(num_outstanding=0, deps=[s_t])
        s_t = s_t * scale
        m_new = gl.maximum(m_i, gl.max(s_t, axis=0))  # over tokens: across the warpgroup's warps
        alpha = gl.exp2(m_i - m_new)
        p_t = gl.exp2(s_t - m_new[None, :])
        l_t = l_t * alpha[None, :] + p_t
        pt_smem.store(p_t.to(gl.bfloat16))
        fence_async_shared()
        if CHUNKED:
            o_t = o_t * alpha[None, :]
            for c in gl.static_range(TOKENS // 16):
                v_c = vt_smem.slice(16 * c, 16, dim=1).load(A_OP)
                o_t = warpgroup_mma(v_c, pt_smem.slice(16 * c, 16, dim=0), o_t, is_async=True)
            o_t = warpgroup_mma_wait(num_outstanding=0, deps=[o_t])
        else:
            o_t = warpgroup_mma(vt, pt_smem, o_t * alpha[None, :], is_async=ASYNC)
            if ASYNC:
                o_t = warpgroup_mma_wait(num_outstanding=0, deps=[o_t])
        m_i = m_new
    l_i = gl.sum(l_t, axis=0)
    o_t = o_t / l_i[None, :]
    od = gl.arange(0, DIMS, layout=gl.SliceLayout(1, ACC))
    oh = gl.arange(0, HEADS, layout=gl.SliceLayout(0, ACC))
    gl.store(out_ptr + oh[None, :] * DIMS + od[:, None], o_t.to(gl.bfloat16))


def compile_probe(is_async: bool, from_shared: bool, chunked: bool = False):
    signature = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "out_ptr": "*bf16", "pages": "i32",
                 "scale": "fp32"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    constants = {"ASYNC": is_async, "FROM_SHARED": from_shared, "CHUNKED": chunked}
    return triton.compile(GluonASTSource(_probe_kernel, signature, constants, attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def main():
    print(f"triton {triton.__version__}, sm_90, 4 warps (one warpgroup), one loop trip = one page of 128 tokens")
    for is_async, from_shared, chunked in ((False, False, False), (True, False, False), (False, True, False),
                                           (True, True, False), (True, True, True)):
        kernel = compile_probe(is_async, from_shared, chunked)
        sass = cubin_sass(kernel.asm["cubin"])
        loop = max(loops(sass), key=len)
        ops = opcodes(loop)
        usage = resource_usage(kernel.asm["cubin"])
        shown = {k: ops[k] for k in ("HGMMA", "WARPGROUP", "BAR", "STS", "LDS", "SHFL", "FMUL", "FFMA", "FADD",
                                      "FMNMX", "MUFU", "F2FP", "LDG", "FENCE")}
        print(f"async={is_async} operands from {'shared memory' if from_shared else 'global loads'}"
              f"{', 8 wgmma of K = 16 a product' if chunked else ''}: registers {usage}, loop {len(loop)} "
              f"instructions, {shown}")
        print("  all loop opcodes:", dict(ops.most_common(30)))


def _time_us(fn, reps=20):
    import torch
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def run_on_gpu():
    """Each program streams `pages` copies of one staged page (operands from shared memory: no decode, no copies),
    so its time per page is the skeleton's latency chain alone; checked against torch (the same page repeated gives
    that page's attention)."""
    import torch
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    gen = torch.Generator(device=dev).manual_seed(0)
    k = torch.randn(TOKENS, DIMS, generator=gen, device=dev).bfloat16()
    v = torch.randn(TOKENS, DIMS, generator=gen, device=dev).bfloat16()
    scale = 0.125
    print(f"{torch.cuda.get_device_name(dev)}, {sms} SMs, torch {torch.__version__}, triton {triton.__version__}")
    for chunked in (False, True):
        for per_sm in (1, 2, 3):
            programs, pages = per_sm * sms, 256
            q = torch.randn(programs, HEADS, DIMS, generator=gen, device=dev).bfloat16()
            out = torch.full_like(q, float("nan"))

            def launch():
                _probe_kernel[(programs,)](q, k, v, out, pages, scale, ASYNC=True, FROM_SHARED=True, CHUNKED=chunked,
                                           num_warps=4)
            try:
                us = _time_us(launch)
            except Exception as exc:  # a probe: report and go on
                print(f"chunked={chunked} {per_sm}/SM: failed: {type(exc).__name__}: {exc}"[:400])
                continue
            ref = torch.softmax(q.float() @ k.float().T * scale * 0.6931471805599453, dim=-1) @ v.float()
            rel = float((out.float() - ref).norm() / ref.norm())
            print(f"chunked={chunked} {per_sm} program(s)/SM: {us:.1f} us for {pages} pages, "
                  f"{us / pages * 1e3:.0f} ns a page per program, {programs * pages / us / sms:.2f} pages/us/SM, "
                  f"rel err vs torch {rel:.1e}")
    try:  # the shipped kernel in the same call: real pages (records streamed from memory, decoded)
        from atom_mxfp4.kernels import hopper
        rows, width = 3 * sms, 64
        pages_total = rows * width
        kc = torch.randint(0, 256, (pages_total, 1, 8704), dtype=torch.uint8, device=dev, generator=gen)
        kc[:, :, 8192:] = 127  # scale bytes 1.0
        vc = kc.clone()
        tables = torch.arange(pages_total, dtype=torch.int32, device=dev).view(rows, width)
        lens = torch.full((rows,), width * 128, dtype=torch.int32, device=dev)
        q = torch.randn(rows, int(HEADS), int(DIMS), generator=gen, device=dev).bfloat16()
        out = torch.empty_like(q)
        plan = hopper.make_plan(rows, width, int(HEADS), dev)
        us = _time_us(lambda: hopper.pa_decode(out, q, kc, vc, tables, lens, softmax_scale=scale, query_scale=None,
                                               plan=plan))
        print(f"shipped Hopper pa_decode {rows} x {width} pages ({plan.num_splits} split(s)): {us:.1f} us, "
              f"{pages_total / us / sms:.2f} pages/us/SM, {pages_total * 2 * 8704 / us / 1e6:.2f} TB/s")
    except Exception as exc:
        print(f"shipped kernel: failed: {type(exc).__name__}: {exc}"[:400])


if __name__ == "__main__":
    run_on_gpu() if "--run" in sys.argv else main()
