"""The paired gate: false DRIFTs, detection and cost of `--compile-paired`'s statistic.

    python benchmarks/paired_gate.py [--sessions 20] [--large-sessions 2] [--pairs 20]
        [--max-pairs 60] [--tolerance 0.03] [--floor 0.25] [--only NAME,NAME] [--all-busy]
        [--json PATH]
    python benchmarks/paired_gate.py --report PATH [PATH ...] [--tolerance 0.03] [--floor 0.25]

Real modules are lowered here: the four example modules of examples/jaxmodels.py (the MLP
and the attention block, loss and gradient), attention blocks of two widths, and models
built to scale: a "rich" MLP gradient (tanh and sine per layer) of 4, 10, 20, 44 and 68
layers, 40 layers at width 256, and a stack of 10 transformer blocks (attention and an MLP
per block); and, where herculens is installed (real_suites.py's lensing venv), the value and
gradient of the strong-lensing chi-square of `benchmarks/suites/lensing_test.py`, a real
scientific model, at its size and at a galaxy cluster's (18 member masses), and the curvature
its second-derivative test compiles. On an idle 2-core machine rich68, the cluster lens and the
curvature compile in 4.5-5.7 s, rich44, rich40w256 and the lensing model in about 2 s (twice that
with both cores busy). For each base module its variants are lowered beside it:

equal
    the same computation lowered again under another function name: a new fingerprint,
    the same compile work. Every DRIFT it gets is a false DRIFT.
+10%
    (the scalable models) 10 % more layers or blocks (at least one more); for the lensing
    model two satellite masses and one source profile more (the cluster: two and one more;
    the curvature: one satellite more), 12-13 % more plain compile seconds.
+5%, +20%
    (the 20-layer rich MLP) one layer more and four layers more: the smallest changes.

A session pairs every variant with its base exactly as a pytest session with
`--compile-paired` does: staged as JAX hands them to its backend, paired in the plugin's
own pairing child (`backends/jax/paired.py`, `--pairs` pairs each, then a second round for
the rows those leave not decided, up to `--max-pairs` in all, as `session/paired.py` does),
and judged by the plugin's own `PairedComparison` at `--tolerance` and `--floor`; the
defaults are the plugin's. Sessions alternate idle and busy (every core kept busy by
busy-loop processes this script starts and stops), or are all busy with ``--all-busy``. The
large modules get ``--large-sessions`` sessions (each costs minutes). Printed per module
and variant: sessions DRIFT / ok / improved / not decided, idle and busy; the median
paired ratio's range; the row's pairing cost next to one plain compile.

``--json`` appends each session's rows as JSON lines, and ``--report`` prints the tables
from such files alone, running nothing: sessions of several runs add up, so the large
modules' twenty sessions (minutes each) can be gathered a few at a time, on the same machine,
e.g. ``--only rich44_grad --sessions 0 --large-sessions 4 --json large.jsonl`` again and
again, then ``--report large.jsonl``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import multiprocessing
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))

from pytest_jaxcompile._constants import (  # noqa: E402 (after the path is set)
    DEFAULT_MAX_PAIRS,
    DEFAULT_PAIRED_TOLERANCE,
    DEFAULT_PAIRS,
)

LARGE = (
    "rich44_grad",
    "rich68_grad",
    "rich40w256_grad",
    "transformer10_grad",
    "lensing_grad",
    "lensing18_grad",
    "lensing_curvature",
)


def _rich(depth: int, width: int = 128, name: str = "loss") -> Callable[[], Any]:
    def lower() -> Any:
        import jax
        import jax.numpy as jnp

        def loss(ws: Any, x: Any) -> Any:
            for i, w in enumerate(ws):
                x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
            return jnp.sum(x)

        loss.__name__ = name
        ws = [jnp.ones((width, width)) * 0.01 for _ in range(depth)]
        return jax.jit(jax.grad(loss)).lower(ws, jnp.ones((16, width)))

    return lower


def _transformer(blocks: int, dim: int = 64, name: str = "loss") -> Callable[[], Any]:
    def lower() -> Any:
        import jax
        import jax.numpy as jnp
        import jaxmodels as m

        def loss(params: Any, x: Any) -> Any:
            for attention, (w1, w2) in params:
                x = m.attention_apply(attention, x)
                x = x + jnp.tanh(x @ w1) @ w2
            return jnp.mean(x**2)

        loss.__name__ = name
        params = [
            (m.attention_init(i, dim), (jnp.ones((dim, 4 * dim)) * 0.01, jnp.ones((4 * dim, dim))))
            for i in range(blocks)
        ]
        return jax.jit(jax.grad(loss)).lower(params, jnp.ones((4, 16, dim)))

    return lower


def _lensing(satellites: int, extra_sources: int, name: str = "loss") -> Callable[[], Any]:
    """The chi-square's value and gradient of `real_suites.py --suite lensing` (herculens from
    PyPI): a lens of `satellites` satellite masses, a source of `extra_sources` more profiles."""

    def lower() -> Any:
        import jax
        import lensing_test as lensing

        kw_lens = lensing.kw_lens(satellites)
        kw_source = lensing.kw_source(extra_sources)
        image = lensing.lens_image(satellites=satellites, extra_sources=extra_sources)
        chi_square = lensing.chi_square(image, lensing.observed(image, 1.01, kw_lens, kw_source))

        def renamed(*a: Any) -> Any:
            return chi_square(*a)

        renamed.__name__ = name
        return jax.jit(jax.value_and_grad(renamed, argnums=(0, 1, 2))).lower(
            kw_lens, kw_source, lensing.KW_LENS_LIGHT
        )

    return lower


def _lensing_curvature(
    satellites: int, extra_sources: int, name: str = "loss"
) -> Callable[[], Any]:
    """The second-derivative test of `real_suites.py --suite lensing`: the chi-square's
    curvature in the lens masses (a gradient of a gradient), on its 50-pixel image."""

    def lower() -> Any:
        import jax
        import lensing_test as lensing

        kw_lens = lensing.kw_lens(satellites)
        kw_source = lensing.kw_source(extra_sources)
        image = lensing.lens_image(
            npix=50, supersampling=2, satellites=satellites, extra_sources=extra_sources
        )
        loss = lensing.chi_square(image, lensing.observed(image, 0.99, kw_lens, kw_source))
        gradient = lensing.radius_gradient_of(loss, kw_source)
        gradient.__name__ = name
        return jax.jit(jax.grad(gradient)).lower(kw_lens)

    return lower


def _example(which: str, name: str = "") -> Callable[[], Any]:
    def lower() -> Any:
        import jax
        import jaxmodels as m

        fn, args = {
            "mlp_loss": (m.mlp_loss, m.mlp_example_args),
            "mlp_grad": (jax.grad(m.mlp_loss), m.mlp_example_args),
            "attention_loss": (m.attention_loss, m.attention_example_args),
            "attention_grad": (jax.grad(m.attention_loss), m.attention_example_args),
        }[which]

        def renamed(*a: Any) -> Any:
            return fn(*a)

        renamed.__name__ = name or which
        return jax.jit(renamed if name else fn).lower(*args())

    return lower


def _attention(dim: int, name: str = "loss") -> Callable[[], Any]:
    def lower() -> Any:
        import jax
        import jax.numpy as jnp
        import jaxmodels as m

        def loss(params: Any, x: Any) -> Any:
            return m.attention_loss(params, x)

        loss.__name__ = name
        return jax.jit(jax.grad(loss)).lower(m.attention_init(0, dim), jnp.ones((4, 16, dim)))

    return lower


def variants() -> dict[str, dict[str, Callable[[], Any]]]:
    """Base module name -> variant name ("base", "equal", "+10%", ...) -> its lowering."""
    table: dict[str, dict[str, Callable[[], Any]]] = {}
    for which in ("mlp_loss", "mlp_grad", "attention_loss", "attention_grad"):
        table[f"example_{which}"] = {
            "base": _example(which),
            "equal": _example(which, name=f"{which}_again"),
        }
    for dim in (32, 128):
        table[f"attention{dim}_grad"] = {
            "base": _attention(dim),
            "equal": _attention(dim, name="again"),
        }
    for depth, width in ((4, 128), (10, 128), (20, 128), (44, 128), (68, 128), (40, 256)):
        name = f"rich{depth}_grad" if width == 128 else f"rich{depth}w{width}_grad"
        more = max(round(depth * 0.1), 1)
        table[name] = {
            "base": _rich(depth, width),
            "equal": _rich(depth, width, name="again"),
            "+10%": _rich(depth + more, width),
        }
    table["rich20_grad"]["+5%"] = _rich(21)
    table["rich20_grad"]["+20%"] = _rich(24)
    table["transformer10_grad"] = {
        "base": _transformer(10),
        "equal": _transformer(10, name="again"),
        "+10%": _transformer(11),
    }
    if importlib.util.find_spec("herculens") is not None:  # real_suites.py's lensing venv
        table["lensing_grad"] = {
            "base": _lensing(6, 4),
            "equal": _lensing(6, 4, name="again"),
            "+10%": _lensing(8, 5),
        }
        # A cluster-scale lens (18 member masses): about 6 s to compile on the idle machine.
        table["lensing18_grad"] = {
            "base": _lensing(18, 12),
            "equal": _lensing(18, 12, name="again"),
            "+10%": _lensing(20, 13),
        }
        table["lensing_curvature"] = {
            "base": _lensing_curvature(6, 4),
            "equal": _lensing_curvature(6, 4, name="again"),
            "+10%": _lensing_curvature(7, 4),
        }
    return table


def stage(lowering: Callable[[], Any]) -> tuple[Any, float]:
    """The module as `--compile-paired` stages it, and one plain compile's seconds."""
    from pytest_jaxcompile.backends import StagedModule
    from pytest_jaxcompile.backends.jax.instructions import capture
    from pytest_jaxcompile.backends.jax.residue import clear_in_process_caches

    lowered = lowering()
    with capture() as captured:
        lowered.compile()
    backend, _, devices, (options, _) = captured.calls[-1]
    clear_in_process_caches()
    start = time.perf_counter()
    lowered.compile(compiler_options={})
    plain = time.perf_counter() - start
    module = StagedModule(
        lowered.as_text(),
        bytes(options.SerializeAsString()),
        int(getattr(devices, "size", 1) or 1),
        str(getattr(backend, "platform", "cpu")),
    )
    return module, plain


def _busy() -> None:
    while True:
        pass


def session(
    staged: dict[tuple[str, str], Any], args: argparse.Namespace, busy: bool
) -> dict[tuple[str, str], dict[str, Any]]:
    """One pairing session over every (base, variant): the records' paired figures, paired
    as a session does (`pair_until_decided`: the first pairs, then a second round for the
    rows they leave not decided at `--tolerance` and `--floor`)."""
    from pytest_jaxcompile.backends import PairJob
    from pytest_jaxcompile.backends.jax.paired import pair_modules
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.records import CompileRecord
    from pytest_jaxcompile.session.paired import pair_until_decided

    jobs, records = [], {}
    for (base, variant), module in staged.items():
        if variant == "base":
            continue
        record = CompileRecord(base, variant, "bench", "", "", False, "none", 0.0)
        records[(base, variant)] = record
        jobs.append(PairJob(record, staged[(base, "base")], module, f"{base} base"))
    workers = []
    if busy:
        context = multiprocessing.get_context("spawn")
        workers = [context.Process(target=_busy, daemon=True) for _ in range(os.cpu_count() or 2)]
        for worker in workers:
            worker.start()
    try:
        thresholds = Thresholds(paired_tolerance=args.tolerance, floor_s=args.floor)
        pair_until_decided(pair_modules, jobs, thresholds, args.pairs, args.max_pairs, args.timeout)
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()
    return {name: record.to_dict() for name, record in records.items()}


def judged(record: dict[str, Any], tolerance: float, floor_s: float) -> tuple[str, float | None]:
    from pytest_jaxcompile.gate.paired import PairedComparison
    from pytest_jaxcompile.records import CompileRecord

    comparison = PairedComparison.of(CompileRecord.from_dict(record))
    if comparison is None:
        return f"not paired: {record.get('paired_note')}", None
    status = comparison.status(tolerance, floor_s)
    return ("not decided" if status is None else status.value), comparison.ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions of the small modules")
    parser.add_argument("--large-sessions", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help="first round's pairs")
    parser.add_argument(
        "--max-pairs", type=int, default=DEFAULT_MAX_PAIRS, help="pairs in all, both rounds"
    )
    parser.add_argument("--tolerance", type=float, default=DEFAULT_PAIRED_TOLERANCE)
    parser.add_argument("--floor", type=float, default=0.25)
    parser.add_argument("--only", default="", help="base modules, comma-separated")
    parser.add_argument(
        "--all-busy",
        action="store_true",
        help="keep every core busy in every session (detection is judged on the busy machine)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", type=Path, help="append each session's figures (JSON lines)")
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        help="print the tables of these JSON-lines files (several runs add up); run nothing",
    )
    args = parser.parse_args(argv)
    if args.report:
        results, plain = read_sessions(args.report)
        for floor in sorted({args.floor, 0.0}, reverse=True):
            _print_table(results, plain, args, floor)
        return 0
    # A SIGTERM unwinds like Ctrl-C, so `session` stops its busy-loop processes (they are
    # daemons, which a parent killed by a signal would leave running).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    table = variants()
    chosen = [name for name in args.only.split(",") if name] or list(table)
    unknown = sorted(set(chosen) - set(table))
    if unknown:
        parser.error(
            f"--only: no base module {', '.join(unknown)} here (lensing_grad needs herculens: "
            f"real_suites.py's lensing venv); the modules are {', '.join(table)}"
        )
    staged: dict[tuple[str, str], Any] = {}
    plain: dict[tuple[str, str], float] = {}
    for base in chosen:
        for variant, lowering in table[base].items():
            staged[(base, variant)], plain[(base, variant)] = stage(lowering)
        print(f"staged {base}: plain compile {plain[(base, 'base')]:.3f} s", flush=True)
    small = {key: module for key, module in staged.items() if key[0] not in LARGE}
    large = {key: module for key, module in staged.items() if key[0] in LARGE}
    results: dict[tuple[str, str], list[tuple[bool, dict[str, Any]]]] = {}
    plan = [(small, args.sessions), (large, args.large_sessions)]
    for group, sessions in plan:
        for index in range(sessions if group else 0):
            busy = args.all_busy or index % 2 == 1
            started = time.perf_counter()
            records = session(group, args, busy)
            for key, record in records.items():
                results.setdefault(key, []).append((busy, record))
            if args.json is not None:
                with args.json.open("a") as stream:
                    for (base, variant), record in records.items():
                        row = {**record, "base": base, "variant": variant, "busy": busy}
                        row["plain_s"] = plain[(base, variant)]
                        row["base_plain_s"] = plain[(base, "base")]
                        stream.write(json.dumps(row) + "\n")
            print(
                f"session {index + 1}/{sessions} ({'busy' if busy else 'idle'}, "
                f"{len(group) - sum(1 for k in group if k[1] == 'base')} rows): "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
    bases = {base: [seconds] for (base, variant), seconds in plain.items() if variant == "base"}
    for floor in sorted({args.floor, 0.0}, reverse=True):
        _print_table(results, bases, args, floor)
    return 0


def read_sessions(
    paths: list[Path],
) -> tuple[dict[tuple[str, str], list[tuple[bool, dict[str, Any]]]], dict[str, list[float]]]:
    """The sessions `--json` wrote, over every file, and each base module's plain compile
    seconds, one figure per run that staged it (a row written before `base_plain_s` was kept
    gives its base the equal variant's: the same computation lowered again)."""
    results: dict[tuple[str, str], list[tuple[bool, dict[str, Any]]]] = {}
    plain: dict[str, set[float]] = {}
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = (row.pop("base"), row.pop("variant"))
                busy = bool(row.pop("busy"))
                variant_plain = float(row.pop("plain_s"))
                base_plain = float(row.pop("base_plain_s", variant_plain))
                if not all(math.isfinite(s) and s > 0 for s in (variant_plain, base_plain)):
                    raise ValueError(f"plain seconds {variant_plain!r}, {base_plain!r}")
            except (ValueError, KeyError, TypeError) as error:
                where = f"{path}:{number}"
                raise SystemExit(f"{where}: not a session row of --json ({error})") from None
            if key[1] == "equal":
                # A run's sessions repeat its one staged figure: the set keeps it once.
                plain.setdefault(key[0], set()).add(base_plain)
            results.setdefault(key, []).append((busy, row))
    return results, {base: sorted(figures) for base, figures in plain.items()}


def _print_table(
    sessions: dict[tuple[str, str], list[tuple[bool, dict[str, Any]]]],
    plain: dict[str, list[float]],
    args: argparse.Namespace,
    floor: float,
) -> None:
    """The sessions judged at `floor` (the default's and 0: the statistic alone). A base
    staged by several runs shows its plain compile's range, and the cost is set against
    the median of its plain figures."""
    results = {
        key: [
            (
                busy,
                *judged(record, args.tolerance, floor),
                record["paired_cost_s"],
                len(record.get("paired_new_wall_s") or ()),
            )
            for busy, record in runs
        ]
        for key, runs in sessions.items()
    }
    print(
        f"\n{args.pairs} pairs (up to {args.max_pairs}), tolerance {args.tolerance:g}, "
        f"floor {floor:g} s (the second round decided at floor {args.floor:g} s)\n"
        "| module | plain compile | variant | idle: DRIFT/ok/improved/not decided | "
        "busy: DRIFT/ok/improved/not decided | median ratio range | pairs | cost per row |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (base, variant), runs in results.items():
        cells = []
        for busy in (False, True):
            statuses = [status for was_busy, status, *_ in runs if was_busy == busy]
            counts = [statuses.count(name) for name in ("DRIFT", "ok", "improved", "not decided")]
            cells.append("/".join(map(str, counts)) if statuses else "-")
        ratios = [ratio for _, _, ratio, _, _ in runs if ratio is not None]
        costs = sorted(cost for _, _, _, cost, _ in runs if cost is not None)
        counts_made = sorted(made for *_, made in runs)
        made = f"{counts_made[0]}-{counts_made[-1]}" if counts_made else "-"
        span = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
        # A base is staged with its equal variant; a file without that row has no figure.
        figures = plain.get(base, [])
        if not figures:
            plain_cell = "-"
        elif len(figures) > 1:
            plain_cell = f"{figures[0]:.3f}-{figures[-1]:.3f} s"
        else:
            plain_cell = f"{figures[0]:.3f} s"
        median_cost = costs[len(costs) // 2] if costs else None
        if median_cost is None:
            cost = "-"
        elif figures:
            cost = f"{median_cost:.1f} s ({median_cost / statistics.median(figures):.0f}x)"
        else:
            cost = f"{median_cost:.1f} s"
        print(
            f"| {base} | {plain_cell} | {variant} | {cells[0]} | {cells[1]} | {span} | "
            f"{made} | {cost} |"
        )


if __name__ == "__main__":
    sys.exit(main())
