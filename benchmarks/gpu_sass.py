"""The GPU kernel's registers and instruction mix, from its compiled SASS: no GPU needed.

Usage: ``python benchmarks/gpu_sass.py [--json] [--revision REV] [--case NAME ...]``.

For each case of :data:`CASES` (a model, a mechanism, d and whether A is kept in full),
numba-cuda compiles the GPU kernel (:func:`ldpsim.tasks.gpu.kernel.compile_gpu_kernel`)
to PTX for compute capability 9.0 (H100, H200), ptxas assembles it as the launch does
(``-maxrregcount`` the kernel's :data:`~ldpsim.tasks.gpu.kernel.MAX_REGISTERS`, where
it has one) and nvdisasm lists its SASS. A record holds ptxas's register count, spills
and stack, the instructions of the whole kernel by kind, and those of the step loop:
the innermost loop that holds the Philox rounds (the instructions one replicate runs
per SGD step, once each; a branch's two sides both counted).

``--revision REV`` compiles the kernel of a git revision of this repository instead
(its tasks/gpu/ and tasks/streams/philox.py, read with ``git show``; a template of
tasks/gpu/kernel_loop.py is compiled through this tree's tasks/kernel/cache.py, into a
temporary cache folder): the figures before a change, by the same tool.

Needs numba-cuda and, from PyPI, nvidia-cuda-nvcc-cu12 (NVVM, ptxas),
nvidia-cuda-nvrtc-cu12 (numba-cuda asks it for the architectures) and
nvidia-cuda-nvdisasm; not a GPU, not a CUDA driver. Runs where numba's CUDA simulator is
off (``NUMBA_ENABLE_CUDASIM`` unset or 0). Prints one line and exits with 2 where the
toolchain is missing.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

#: Model, mechanism, d, parameter vector lengths, full A: the issue's case (quantile with
#: randomized response) first, then a Gaussian-noise mean in d = 4 (Box-Muller).
CASES = {
    "quantile-rr": ("quantile", "randomized_response", 1, 4, 6, False),
    "mean-gaussian-d4": ("mean", "gaussian", 4, 3, 1, False),
}
#: Compute capability compiled for (sm_90: H100, H200).
CC = (9, 0)
#: JSON fields and their units (benchmarks/README.md lists the same).
JSON_FIELDS = {
    "kind": "name",
    "case": "name",
    "revision": "name",
    "registers": "count",
    "max_registers": "count",
    "spill_bytes": "count",
    "stack_bytes": "count",
    "instructions": "count",
    "fp64": "count",
    "loop_instructions": "count",
    "loop_fp64": "count",
    "loop_fp32": "count",
    "loop_integer": "count",
    "loop_uniform": "count",
    "loop_conversions": "count",
    "loop_branches": "count",
    "loop_calls": "count",
    "loop_local": "count",
}
#: Opcodes by kind (SASS of compute capability 9.0); fp64 also takes the 64-bit forms of
#: MUFU (see :func:`is_fp64`), fp32 the others.
KINDS = {
    "fp32": {"FADD", "FMUL", "FFMA", "FSETP", "FMNMX"},
    "integer": {"IMAD", "IADD3", "LOP3", "SHF", "IMUL", "LEA", "VIADD", "ISETP", "IABS"},
    "conversions": {"I2F", "F2F", "F2I", "FRND"},
    "branches": {"BRA", "BSSY", "BSYNC"},
    "calls": {"CALL"},
    "local": {"LDL", "STL"},
}
#: The first Philox multiplier as SASS writes it (unsigned, or as a negative 32-bit
#: immediate): it marks the step loop.
PHILOX_MARKS = ("0xd2511f53", "-0x2daee0ad")
REPO = Path(__file__).resolve().parents[1]


class ToolchainMissing(RuntimeError):
    """numba-cuda, NVVM, ptxas or nvdisasm is not installed."""


def tool(name: str) -> str:
    """The path of ``ptxas`` or ``nvdisasm``: from the nvidia-* wheels, else on PATH."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for found in sorted(Path(root).glob(f"*/bin/{name}")):
            return str(found)
    found = shutil.which(name)
    if found is None:
        raise ToolchainMissing(f"{name} not found (pip install nvidia-cuda-nvcc-cu12 etc.)")
    return found


def offline_cuda():
    """numba.cuda, set to compile for :data:`CC` without a device.

    numba-cuda compiles a kernel's device functions for the current device's compute
    capability, and asks the driver for it; here there is none. Its dispatcher module
    looks the device up by the name ``get_current_device``, which is pointed at a
    stand-in of compute capability :data:`CC` for this process (a tool that never
    launches anything).
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        raise ToolchainMissing("numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM)")
    try:
        from numba import cuda
        from numba.cuda import dispatcher
    except ImportError as exc:
        raise ToolchainMissing(f"numba-cuda is not installed ({exc})") from exc
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=CC)
    return cuda


def kernel_module(revision: str | None) -> types.ModuleType:
    """ldpsim's GPU kernel module, or that of git revision ``revision``.

    A revision's tasks/gpu/kernel.py, tasks/gpu/units.py, tasks/streams/philox.py and,
    where it has one, the kernel's template tasks/gpu/kernel_loop.py are loaded as
    modules of their own (their imports of each other pointed at them).
    """
    if revision is None:
        from ldpsim.tasks.gpu import kernel

        return kernel
    from ldpsim.tasks.compile_lock import CACHE_DIR_VARIABLE

    folder = Path(tempfile.mkdtemp(prefix="gpu-sass-"))
    # The revision's generated kernel modules import its modules loaded here: they go to a
    # cache folder of their own, not the user's.
    os.environ[CACHE_DIR_VARIABLE] = str(folder / "cache")
    names = {"philox": "tasks/streams/philox.py", "units": "tasks/gpu/units.py"}
    names["kernel_loop"] = "tasks/gpu/kernel_loop.py"  # since the kernels' disk cache
    names["kernel"] = "tasks/gpu/kernel.py"
    prefix = f"gpu_sass_{re.sub(r'[^0-9A-Za-z]', '_', revision)}"
    modules = {}
    for name, path in names.items():
        where = f"{revision}:{path}"
        present = ["git", "-C", str(REPO), "cat-file", "-e", where]
        if name == "kernel_loop" and subprocess.run(present, capture_output=True).returncode:
            continue  # a revision whose kernel has no template
        show = ["git", "-C", str(REPO), "show", where]
        text = subprocess.run(show, capture_output=True, text=True, check=True).stdout
        text = text.replace(
            "from ldpsim.tasks.streams import philox", f"import {prefix}_philox as philox"
        )
        text = text.replace(
            "from ldpsim.tasks.streams.philox import", f"from {prefix}_philox import"
        )
        text = text.replace("from ldpsim.tasks.gpu.units import", f"from {prefix}_units import")
        text = text.replace(
            "from ldpsim.tasks.gpu import kernel_loop",
            f"import {prefix}_kernel_loop as kernel_loop",
        )
        file = folder / f"{prefix}_{name}.py"
        file.write_text(text)
        spec = importlib.util.spec_from_file_location(f"{prefix}_{name}", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["kernel"]


def argument_types(function) -> tuple:
    """numba types of the kernel's arguments, by their names (the kernels of every
    revision name them so)."""
    from numba import types as nt

    def array(dtype, ndim):
        return nt.Array(dtype, ndim, "C")

    by_name = {
        "model_in": array(nt.float64, 1),
        "mech_in": array(nt.float64, 1),
        "theta0": array(nt.float64, 1),
        "c": nt.float64,
        "gamma": nt.float64,
        "batch": nt.int64,
        "cuts": array(nt.int64, 1),
        "point_of": array(nt.int64, 1),
        "key0": nt.uint64,
        "key1": nt.uint64,
        "reps": array(nt.int64, 1),
        "out": array(nt.float64, 2),
        "streams": array(nt.uint64, 2),
        "theta_out": array(nt.float64, 2),
        "seg_dev": array(nt.float64, 3),
        "seg_shift": array(nt.float64, 3),
        "snap_t": array(nt.float64, 3),
        "snap_b": array(nt.float64, 3),
        "snap_a": array(nt.float64, 4),
        "snap_theta": array(nt.float64, 3),
    }
    return tuple(by_name[name] for name in inspect.signature(function).parameters)


def instruction_lines(sass: str) -> list[tuple[int, str]]:
    """(address, text) of each SASS instruction, and ``(address, ".L_x_N:")`` of labels."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in sass.splitlines():
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            pending.append(label.group(1))
            continue
        found = re.match(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if found:
            address = int(found.group(1), 16)
            out.extend((address, f"{name}:") for name in pending)
            pending = []
            out.append((address, found.group(2).strip()))
    return out


def opcode(text: str) -> str:
    """The opcode of an instruction, without its predicate and modifiers."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def is_fp64(text: str) -> bool:
    op = opcode(text)
    head = text.split()[1] if text.startswith("@") else text.split()[0]
    return op in {"DADD", "DMUL", "DFMA", "DSETP", "DMNMX"} or (
        op in {"MUFU", "F2F", "I2F", "F2I", "FRND"} and ("64" in head)
    )


def step_loop(lines: list[tuple[int, str]]) -> list[str]:
    """The instructions of the innermost loop (a backward branch's span) that holds the
    Philox multiplier; empty if none does."""
    labels = {text[:-1]: address for address, text in lines if text.endswith(":")}
    code = [(address, text) for address, text in lines if not text.endswith(":")]
    spans = []
    for address, text in code:
        target = re.search(r"BRA\s.*`\((\.L_x_\d+)\)", text)
        if target and labels.get(target.group(1), address + 1) <= address:
            spans.append((labels[target.group(1)], address))
    marked = [a for a, text in code if any(mark in text.lower() for mark in PHILOX_MARKS)]
    holding = [(lo, hi) for lo, hi in spans if any(lo <= a <= hi for a in marked)]
    if not holding:
        return []
    lo, hi = min(holding, key=lambda span: span[1] - span[0])
    return [text for address, text in code if lo <= address <= hi]


def measure(case: str, module: types.ModuleType, revision: str) -> dict[str, Any]:
    """One record: ptxas's figures and the SASS's mix for ``case``."""
    cuda = offline_cuda()
    kernel = module.compile_gpu_kernel(*CASES[case])
    function = kernel.py_func
    ptx, _ = cuda.compile_ptx(function, argument_types(function), cc=CC)
    if hasattr(module, "register_budget"):
        budget = module.register_budget(CASES[case][2])
    else:
        budget = getattr(module, "MAX_REGISTERS", None)
    with tempfile.TemporaryDirectory() as folder:
        source, cubin = Path(folder) / "kernel.ptx", Path(folder) / "kernel.cubin"
        source.write_text(ptx)
        command = [tool("ptxas"), f"-arch=sm_{CC[0]}{CC[1]}", "-v", str(source), "-o", str(cubin)]
        if budget:
            command.insert(2, f"-maxrregcount={budget}")
        report = subprocess.run(command, capture_output=True, text=True, check=True).stderr
        sass = subprocess.run(
            [tool("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True, check=True
        ).stdout
    entry = report[report.index("Compiling entry function") :]
    registers = int(re.search(r"Used (\d+) registers", entry).group(1))
    spills = sum(int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", entry))
    stack = re.search(r"(\d+) bytes stack frame", entry)
    lines = [text for _, text in instruction_lines(sass) if not text.endswith(":")]
    loop = step_loop(instruction_lines(sass))
    mix = collections.Counter(opcode(text) for text in loop)
    fp32_mufu = sum(opcode(text) == "MUFU" and not is_fp64(text) for text in loop)

    def kind(name: str) -> int:
        return sum(mix[op] for op in KINDS[name])

    return {
        "kind": "sass",
        "case": case,
        "revision": revision,
        "registers": registers,
        "max_registers": budget or 0,
        "spill_bytes": spills,
        "stack_bytes": int(stack.group(1)) if stack else 0,
        "instructions": len(lines),
        "fp64": sum(is_fp64(text) for text in lines),
        "loop_instructions": len(loop),
        "loop_fp64": sum(is_fp64(text) for text in loop),
        "loop_fp32": kind("fp32") + fp32_mufu,
        "loop_integer": kind("integer"),
        "loop_uniform": sum(count for op, count in mix.items() if op.startswith("U")),
        "loop_conversions": kind("conversions"),
        "loop_branches": kind("branches"),
        "loop_calls": kind("calls"),
        "loop_local": kind("local"),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure the cases with the command-line arguments ``argv``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON records on stdout")
    parser.add_argument("--revision", help="a git revision's kernel instead of this tree's")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these")
    args = parser.parse_args(argv)
    try:
        offline_cuda()
        tool("ptxas"), tool("nvdisasm")
        module = kernel_module(args.revision)
        records = [measure(case, module, args.revision or "tree") for case in args.case or CASES]
    except (ToolchainMissing, ImportError, OSError) as exc:
        print(f"gpu_sass: the offline CUDA toolchain is missing: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(records, sys.stdout, indent=1)
        print()
    else:
        for record in records:
            print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
