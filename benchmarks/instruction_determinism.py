"""The counting child's determinism settings: the spread of repeated counts with and without.

    python benchmarks/instruction_determinism.py [--sessions 5] [--module example_mlp_loss]
        [--json PATH] [--report PATH [PATH ...]]

CodSpeed runs its valgrind measurements with address space randomisation off (``setarch
-R``), ``PYTHONHASHSEED=0`` and ``PYTHONMALLOC=malloc``. This stages one small module of
benchmarks/instruction_gate.py as ``--compile-instructions`` does and counts it in
``--sessions`` fresh counting children (the plugin's own `run_child`) with none of those
settings, and in as many with all of them (`instructions.SETTINGS`), alternately so that the
machine's load falls on both alike; per configuration: the smallest and largest count and
their spread in percent of the smallest. The plugin's child uses `instructions.DETERMINISM`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import instruction_gate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--module", default="example_mlp_loss")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path, default=None, help="counts written here")
    parser.add_argument(
        "--report", type=Path, nargs="+", default=None, help="only report these --json files"
    )
    args = parser.parse_args(argv)
    if args.report is not None:
        merged: dict[str, list[int]] = {}
        for path in args.report:
            for name, values in json.loads(path.read_text()).items():
                merged.setdefault(name, []).extend(values)
        _report(args.module, merged)
        return 0

    from pytest_jaxcompile.backends.jax.instructions import run_child
    from pytest_jaxcompile.backends.jax.instrument import SETTINGS

    staged, _ = instruction_gate._stage([args.module])
    configurations: dict[str, tuple[str, ...]] = {"none": (), "all": SETTINGS}
    counts: dict[str, list[int]] = {name: [] for name in configurations}
    for number in range(args.sessions):
        for name, settings in configurations.items():
            with tempfile.TemporaryDirectory() as directory:
                results = run_child(Path(directory), staged, args.timeout, settings=settings)
            if -1 in results or "instructions" not in results.get(0, {}):
                raise SystemExit(f"counting child failed: {results}")
            counts[name].append(int(results[0]["instructions"]))
            print(f"session {number + 1} {name}: {counts[name][-1]:,}", file=sys.stderr, flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(counts, indent=1))
    _report(args.module, counts)
    return 0


def _report(module: str, counts: dict[str, list[Any]]) -> None:
    print(f"{module}: counts in fresh children, per configuration")
    print("settings   sessions  smallest         largest          spread   stdev/mean")
    for name, values in counts.items():
        spread = (max(values) - min(values)) / min(values)
        deviation = statistics.pstdev(values) / statistics.fmean(values)
        print(
            f"{name:<10} {len(values):8d}  {min(values):>15,}  {max(values):>15,}  "
            f"{spread:7.4%}  {deviation:7.4%}"
        )


if __name__ == "__main__":
    sys.exit(main())
