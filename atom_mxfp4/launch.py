"""Pre-bound kernel launches: a Triton / Gluon JIT kernel launched with nothing left to decide (issue 39).

``kernel[grid](*args, **constexprs)`` on a ``JITFunction`` runs Triton's binder over every argument, builds its cache
key, checks the kernel's globals and packs launch metadata on every call: tens of microseconds of Python per launch,
paid again in every layer of every step that runs eagerly (prefill chunks, large decode batches, graphs off).
``Launcher(kernel)[grid](*args, **constexprs)`` takes the same arguments and launches the same compiled kernel
through its own launcher (``CompiledKernel.run``, the call ``JITFunction.run`` ends in), keyed by what Triton
specialises a launch on (``launcher(kernel)`` is the one ``Launcher`` of a kernel):

- every tensor argument's dtype, whether its address is a multiple of 16 bytes and whether it is a CUDA tensor;
- every int argument's value being 1, a multiple of 16, inside int32 (and its type: an int, a float, a bool, None);
  where the kernel does not specialise on it (``do_not_specialize``: the integers that change with the batch, so that
  a server's batches do not multiply its compiles; tests/test_specialisation.py), a new kind of value here finds the
  kernel Triton already compiled, in its in-memory cache;
- the constexpr and option keywords (``num_warps``, ``maxnreg``, ``enable_fp_fusion``, ...), by value.

That key is at least as fine as Triton's own (two launches with one key get one compiled kernel from Triton too), so
a miss costs one ``warmup`` (Triton's own compile or cache lookup) and every later launch of that specialisation is
a dict lookup and the C launch, given each tensor as its address (the C launcher's own ``data_ptr()`` call and
driver query per pointer skipped; a tensor off the GPU is refused by name instead of by Triton's "cpu tensor?").
Launch hooks (``triton.knobs.runtime.launch_enter_hook``, set by profilers) still see every launch, with the tensors
themselves. Under ``TRITON_INTERPRET=1`` (an ``InterpretedFunction``, no compiled kernel) a launch is the plain
``kernel[grid](...)``.

``recording()`` replaces every launch of every ``Launcher`` by a record of it (tests on the CPU: the host path of a
backend runs to its launches, nothing is compiled; tests/test_host_path.py).

``tracing()`` keeps, beside running them, what every launch inside the block was finally given (the compiled kernel,
the grid, the C launcher's values, the arguments, the launch metadata); ``replay`` launches such a trace again with
some addresses replaced (atom_mxfp4.replay: a layer's step replayed for the next layer of the batch).

Ground floor: imports torch and the errors; triton is imported on the first compile.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass

import torch

from .errors import expect

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
PLAIN_ENV = "ATOM_MXFP4_PLAIN_LAUNCH"  # "1": every launch through kernel[grid](...) (Triton's own path), for A/B runs
# Each specialisation a Launcher compiles (or finds in Triton's caches) in 0.5 s or more is logged at DEBUG; with
# ATOM_MXFP4_LOG_COMPILES set, at INFO: "1" every one (not "1 s"), another number those of at least that many
# seconds, "0" none; anything else is refused by name at the first compile. In a server a compile stalls every
# request (SGLang names the kernel); the line says which specialisation it was
LOG_COMPILES_ENV = "ATOM_MXFP4_LOG_COMPILES"
_log = logging.getLogger("atom_mxfp4.launch")


def _log_rule() -> tuple[int, float] | None:
    """(logging level, the least seconds of a compile logged) from ``LOG_COMPILES_ENV``; None: not logged."""
    value = os.environ.get(LOG_COMPILES_ENV, "").strip()
    if value == "":
        return logging.DEBUG, 0.5
    if value == "0":
        return None
    if value == "1":
        return logging.INFO, 0.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    expect(seconds >= 0, LOG_COMPILES_ENV, "unset, 0 (off), 1 (every compile) or the least seconds logged", repr(value))
    return logging.INFO, seconds


@dataclass(frozen=True)
class Launch:
    """One launch as ``recording()`` keeps it: the kernel's name, the grid, the arguments, the keywords, the cluster,
    the kernel itself (its ``params`` say what Triton specialises on: tests/test_specialisation.py)."""

    kernel: str
    grid: tuple
    args: tuple
    constexprs: dict
    cluster: int = 1
    function: object = None


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for a grid: plain Python (``triton.cdiv`` is a constexpr function: microseconds a call)."""
    return -(-a // b)


def pow2_at_least(n: int) -> int:
    """The smallest power of 2 >= ``n`` (>= 1): ``triton.next_power_of_2`` for n >= 1, in plain Python."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_recorded: list[Launch] | None = None  # not None inside ``recording()``: launches are appended, not run
_traced: list | None = None  # not None inside ``tracing()``: a ``Traced`` per launch (None: one that cannot replay)


@dataclass(frozen=True)
class Traced:
    """One launch as ``tracing()`` keeps it. ``target``: the ``_Compiled`` it ran (under ``recording()``: the kernel's
    name); ``grid``: three dimensions; ``values``: what the C launcher got (tensors as addresses); ``args``: the same
    with the tensors themselves; ``metadata``: the launch metadata (under ``recording()``: the constexprs)."""

    target: object
    grid: tuple
    values: tuple
    args: tuple
    metadata: object
    cluster: int = 1


@contextlib.contextmanager
def recording():
    """Every ``Launcher`` launch inside the block is recorded (the list yielded), not compiled or run."""
    global _recorded
    saved, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = saved


@contextlib.contextmanager
def tracing():
    """Every ``Launcher`` launch inside the block runs (or is recorded) and is kept (the list yielded): a ``Traced``,
    or None for one that went through Triton's own launch path (``PLAIN_ENV``, the interpreter: nothing to replay)."""
    global _traced
    saved, _traced = _traced, []
    try:
        yield _traced
    finally:
        _traced = saved


def replay(launches: tuple, addresses: tuple, stream: int) -> bool:
    """Launch ``launches`` again on ``stream``: each ``(target, grid, values, substitutions, metadata, cluster)``
    (atom_mxfp4.replay builds them from a trace) with ``values[position] = addresses[which] + offset`` for every
    ``(position, which, offset)`` of its substitutions. False, launching nothing, while a launch hook is set (a hook
    sees the tensors, which a replay does not have: the caller takes its ordinary path)."""
    if _recorded is not None:
        for name, grid, values, substitutions, constexprs, cluster in launches:
            values = list(values)
            for position, which, offset in substitutions:
                values[position] = addresses[which] + offset
            _recorded.append(Launch(name, grid, tuple(values), constexprs, cluster))
        return True
    hooks = launches[0][0].hooks
    if _hook(hooks.launch_enter_hook) is not None or _hook(hooks.launch_exit_hook) is not None:
        return False
    for entry, (x, y, z), values, substitutions, metadata, _ in launches:
        values = list(values)
        for position, which, offset in substitutions:
            values[position] = addresses[which] + offset
        if entry.direct is not None:
            c_launch, cooperative, pdl = entry.direct
            c_launch(x, y, z, stream, entry.function, cooperative, pdl, None, None, metadata, None, None, None, *values)
        else:
            entry.launch(x, y, z, stream, entry.function, metadata, None, None, None, *values)
    return True


def _bind(args: tuple) -> tuple[tuple, tuple]:
    """(what Triton specialises the launch on, the values the C launcher gets) per positional argument (module
    docstring). A tensor goes to the C launcher as its address, an int: Triton's launcher then neither calls its
    ``data_ptr()`` again nor asks the driver about the pointer (``cuPointerGetAttribute``, once per pointer and
    launch); whether it is a CUDA tensor is part of the key, refused by name when a launch is first bound
    (``Launcher.compiled``). One pass with the appends bound once: of the forms timed on the CPU the fastest (this
    runs on every launch)."""
    key, values = [], []
    add_key, add_value = key.append, values.append
    for arg in args:
        if type(arg) is int:
            add_value(arg)
            add_key((arg == 1, arg & 15 == 0, INT32_MIN <= arg <= INT32_MAX))
        elif isinstance(arg, _Tensor):
            address = arg.data_ptr()
            add_value(address)
            add_key((arg.dtype, address & 15 == 0, arg.is_cuda))
        else:
            add_value(arg)
            add_key(type(arg))
    return tuple(key), tuple(values)


_Tensor = torch.Tensor
_LAUNCHERS: dict = {}  # id(kernel) -> (kernel, its Launcher)


def launcher(kernel) -> "Launcher":
    """The ``Launcher`` of ``kernel`` (one per kernel object, made on first use; a launch site looks it up by the
    kernel it names, so a stand-in kernel put in a module's namespace is launched as itself)."""
    found = _LAUNCHERS.get(id(kernel))
    if found is None or found[0] is not kernel:
        found = _LAUNCHERS[id(kernel)] = (kernel, Launcher(kernel))
    return found[1]


class Launcher:
    """A JIT kernel's launches through its compiled kernels (module docstring). ``launcher[grid](*args, **kw)``: as
    ``kernel[grid](*args, **kw)``; ``launcher.cluster(grid, cluster, extra_shared, fits)(*args, **kw)``: a launch of
    ``grid[0]`` clusters of ``cluster`` CTAs each (one grid dimension: the driver launches ``grid[0] * cluster``
    programs) with ``extra_shared`` bytes of shared memory past the kernel's own, when ``fits(function, cluster,
    shared)`` says the device holds such a cluster (the call returns False and launches nothing otherwise)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel")
        self._compiled: dict = {}  # specialisation key -> _Compiled
        # the interpreter's function (TRITON_INTERPRET=1) or a test's stand-in: no compiled kernel to bind
        self._interpreted = not hasattr(kernel, "warmup") or type(kernel).__name__ == "InterpretedFunction"
        # PLAIN_ENV: single-CTA launches through Triton's own path (a cluster launch has no such path: still bound)
        self._plain = self._interpreted or os.environ.get(PLAIN_ENV) == "1"

    def __getitem__(self, grid):
        return lambda *args, **constexprs: self._launch(grid, 1, 0, None, args, constexprs)

    def cluster(self, grid, cluster: int, extra_shared: int, fits):
        return lambda *args, **constexprs: self._launch(grid, cluster, extra_shared, fits, args, constexprs)

    def compiled(self, grid, args: tuple, constexprs: dict, spec: tuple | None = None):
        """The compiled kernel of this launch's specialisation (compiled or found by Triton on the first one; a
        tensor that is not on a CUDA device is refused then, naming the kernel's parameter). ``spec``: the first half
        of ``_bind(args)`` when the caller has it."""
        key = (_device(), len(args), tuple(constexprs.items()), _bind(args)[0] if spec is None else spec)
        entry = self._compiled.get(key)
        if entry is None:
            _refuse_host_tensors(self, args)
            started = time.perf_counter()
            entry = self._compiled[key] = _Compiled.of(self.kernel, grid, args, constexprs, key[0])
            seconds, rule = time.perf_counter() - started, _log_rule()
            if rule is not None and seconds >= rule[1] and _log.isEnabledFor(rule[0]):
                # distinct compiled kernels: keys that differ only in an integer the kernel does not specialise on
                # share one (found in Triton's cache, not compiled)
                compiled = len({id(e.kernel) for e in self._compiled.values()})
                _log.log(rule[0], "atom_mxfp4 compiled %s in %.2f s (%d specialisations of it in this process): %s",
                         self.name, seconds, compiled, describe(self.kernel, args, constexprs))
        return entry

    def _launch(self, grid, cluster: int, extra_shared: int, fits, args: tuple, constexprs: dict):
        if _recorded is not None:
            _recorded.append(Launch(self.name, tuple(grid), args, constexprs, cluster, self.kernel))
            if _traced is not None:
                _traced.append(Traced(self.name, tuple(grid), _bind(args)[1], args, constexprs, cluster))
            return True
        if self._plain and (cluster == 1 or self._interpreted):
            expect(cluster == 1, "cluster", "1 under TRITON_INTERPRET=1", cluster)
            self.kernel[grid](*args, **constexprs)
            if _traced is not None:
                _traced.append(None)
            return True
        spec, values = _bind(args)
        entry = self.compiled(grid, args, constexprs, spec)
        tail = tuple([constexprs[name] for name in entry.tail(len(args))])
        metadata = entry.packed
        if cluster > 1:
            shared = entry.cluster_shared(extra_shared)
            if not fits(entry.function, cluster, shared):
                return False
            metadata = (entry.num_warps, cluster, shared)
        if _traced is not None:
            _traced.append(Traced(entry, (tuple(grid) + (1, 1))[:3], values + tail, args + tail, metadata, cluster))
        return entry.run(grid, values + tail, args + tail, metadata)


def not_specialised(kernel) -> frozenset:
    """The names of the arguments ``kernel`` does not specialise on (its ``do_not_specialize``), compiled or
    interpreted (TRITON_INTERPRET=1 keeps the decorator's keywords); empty for a stand-in."""
    params = getattr(kernel, "params", None)
    if params is not None:
        return frozenset(p.name for p in params if p.do_not_specialize)
    names = list(getattr(kernel, "arg_names", None) or [])
    given = (getattr(kernel, "kwargs", None) or {}).get("do_not_specialize") or ()
    return frozenset(names[g] if isinstance(g, int) else g for g in given)


def describe(kernel, args: tuple, constexprs: dict) -> str:
    """A launch's specialisation in words: each integer argument that is 1 (``name=1``) or a multiple of 16
    (``name%16``) where the kernel specialises on it, each tensor's dtype and whether its address is off 16 bytes,
    then the constexprs by value."""
    names = list(getattr(kernel, "arg_names", None) or [])
    names += [f"argument {i}" for i in range(len(names), len(args))]
    loose = not_specialised(kernel)
    parts = []
    for name, arg in zip(names, args):
        if type(arg) is int:
            if name not in loose:
                if arg == 1:
                    parts.append(f"{name}=1")
                elif arg % 16 == 0:
                    parts.append(f"{name}%16")
            if not INT32_MIN <= arg <= INT32_MAX:
                parts.append(f"{name}>int32")
        elif isinstance(arg, _Tensor):
            off = "" if arg.data_ptr() % 16 == 0 else " off 16 B"
            parts.append(f"{name}:{str(arg.dtype).replace('torch.', '')}{off}")
    parts += [f"{name}={value}" for name, value in constexprs.items()]
    return " ".join(parts)


def _refuse_host_tensors(launch: Launcher, args: tuple) -> None:
    """A compiled kernel is given its tensors by address: one not on a CUDA device is refused, naming the kernel's
    parameter (tests on the CPU, with a stand-in compiled kernel, replace this)."""
    names = getattr(launch.kernel, "arg_names", None) or [f"argument {i}" for i in range(len(args))]
    for name, arg in zip(names, args):
        expect(not isinstance(arg, _Tensor) or arg.is_cuda, f"{launch.name} {name}",
               "a CUDA tensor (the kernel reads it by its address)", f"a tensor on {getattr(arg, 'device', None)}")


class _Compiled:
    """One compiled kernel and what its launches need, bound once."""

    __slots__ = ("kernel", "function", "packed", "num_warps", "shared", "names", "device", "_tails", "launch",
                 "hooks", "direct")

    @classmethod
    def of(cls, kernel, grid, args, constexprs, device: int):
        import triton

        compiled = kernel.warmup(*args, grid=grid, **constexprs)  # Triton compiles or finds it; nothing launched
        compiled = compiled.result() if hasattr(compiled, "result") else compiled
        self = cls()
        self.kernel = compiled
        self.launch = compiled.run  # loads the module on the current device on first use
        self.direct = _direct(self.launch)
        self.function = compiled.function
        self.packed = compiled.packed_metadata
        self.num_warps = compiled.metadata.num_warps
        self.shared = compiled.metadata.shared
        self.names = tuple(kernel.arg_names)
        self._tails = {}
        self.device = device
        self.hooks = triton.knobs.runtime
        return self

    def tail(self, positional: int) -> tuple:
        """The parameter names after the first ``positional`` ones (given as keywords), in the kernel's order."""
        names = self._tails.get(positional)
        if names is None:
            names = self._tails[positional] = self.names[positional:]
        return names

    def cluster_shared(self, extra: int) -> int:
        return -(-self.shared // 16) * 16 + extra

    def run(self, grid, values, args, metadata):
        """Launch with ``values`` (tensors as their addresses); under a launch hook with ``args`` (the tensors
        themselves, as Triton's own launch passes them: a profiler's hook reads their shapes)."""
        stream = _raw_stream(self.device)
        enter, leave = _hook(self.hooks.launch_enter_hook), _hook(self.hooks.launch_exit_hook)
        grid = tuple(grid) + (1, 1)
        if self.direct is not None and enter is None and leave is None:
            c_launch, cooperative, pdl = self.direct
            c_launch(grid[0], grid[1], grid[2], stream, self.function, cooperative, pdl, None, None, metadata, None,
                     None, None, *values)
            return True
        launch_metadata = None
        if enter is not None or leave is not None:
            launch_metadata, values = self.kernel.launch_metadata(grid[:3], stream, *args), args
        self.launch(grid[0], grid[1], grid[2], stream, self.function, metadata, launch_metadata, enter, leave, *values)
        return True


def _direct(run) -> tuple | None:
    """(the C launch, cooperative grid, PDL) of Triton's CUDA launcher ``run`` when a launch needs no scratch memory:
    ``CudaLauncher.__call__`` then only adds those four arguments (and two None scratch pointers) before calling the
    C launch; a launch calls it directly. None where the launcher is not of that shape (another Triton, a scratch
    buffer, a stand-in): launched through ``run`` itself."""
    c_launch = getattr(run, "launch", None)
    if (c_launch is None or getattr(run, "global_scratch_size", None) != 0
            or getattr(run, "profile_scratch_size", None) != 0 or not hasattr(run, "launch_cooperative_grid")
            or not hasattr(run, "launch_pdl")):
        return None
    return c_launch, run.launch_cooperative_grid, run.launch_pdl


def _hook(hook):
    """A launch hook, or None where it would do nothing (triton 3.6+ keeps an empty ``HookChain`` there: the C
    launcher then skips the call, and no launch metadata is built for it)."""
    return None if hook is None or not getattr(hook, "calls", True) else hook


# the current device (Triton compiles for it, loads and launches the kernel there): torch's C getter, without
# torch.cuda.current_device's lazy-init check (a launch has CUDA tensors: CUDA is initialised)
_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the current stream, as Triton's driver asks it

