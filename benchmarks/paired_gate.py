"""The paired gate: false DRIFTs, detection and cost of `--compile-paired`'s statistic.

    python benchmarks/paired_gate.py [--sessions 20] [--large-sessions 2] [--max-pairs 20]
        [--tolerance 0.04] [--floor 0.05] [--only NAME,NAME] [--all-busy] [--json PATH]
        [--fixed-pairs N] [--warm-up-each] [--variants NAME,NAME]
    python benchmarks/paired_gate.py --report PATH [PATH ...] [--tolerance 0.04] [--floor 0.05]

Real modules are lowered here: the four example modules of examples/jaxmodels.py (the MLP
and the attention block, loss and gradient), attention blocks of two widths, and models
built to scale: a "rich" MLP gradient (tanh and sine per layer) of 4, 10, 20, 44 and 68
layers, 40 layers at width 256, and a stack of 10 transformer blocks (attention and an MLP
per block); and, where herculens is installed (real_suites.py's lensing venv), the value and
gradient of the strong-lensing chi-square of `benchmarks/suites/lensing_test.py`, a real
scientific model, at its size and at a galaxy cluster's (18 member masses), and the curvature
its second-derivative test compiles. On an idle 2-core machine rich68, the cluster lens and the
curvature compile in 4.5-5.7 s, rich44, rich40w256 and the lensing model in 2-5 s (the
machine's speed varied from day to day; twice that with both cores busy). For each base
module its variants are lowered beside it:

equal
    the same computation lowered again under another function name: a new fingerprint,
    the same compile work. Every DRIFT it gets is a false DRIFT.
+10%
    (the scalable models) 10 % more layers or blocks (at least one more); for the lensing
    model two satellite masses and one source profile more (the cluster: two and one more;
    the curvature: one satellite more), 12-13 % more plain compile seconds.
+5%, +20%
    (the 20-layer rich MLP) one layer more and four layers more: the smallest changes.
+30%
    (the 44-layer rich MLP) 13 layers more: with its equal row, the two changed rows of
    about 2 s each whose pairing cost docs/paired.md states.

A session pairs every variant with its base exactly as a pytest session with
`--compile-paired` does: staged as JAX hands them to its backend, paired in the plugin's
own pairing child (`backends/jax/paired.py`), each row until a look of the sequential rule
(gate/sequential.py) decides it, up to `--max-pairs`, at `--tolerance` and `--floor`; the
defaults are the plugin's. Sessions alternate idle and busy (every core kept busy by
busy-loop processes this script starts and stops), or are all busy with ``--all-busy``. The
large modules get ``--large-sessions`` sessions (each costs minutes). Printed per module
and variant: sessions DRIFT / ok / improved / not decided, idle and busy; the median
paired ratio's range; the pairs the rule used; the row's pairing cost next to one plain
compile. ``--fixed-pairs N`` makes exactly N pairs a row instead (nothing decided early)
and prints the warm-up study: whether each module's first compile in the child, with or
without an untimed compile of it before (``--warm-up-each``), is as fast as its others.

``--json`` appends each session's rows as JSON lines, and ``--report`` prints the tables
from such files alone, running nothing: every recorded session is replayed through the
sequential rule in its recorded order (sessions recorded before the rule, with 20 pairs
and more, stop where the rule would have stopped), so sessions of several runs add up,
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
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))

from pytest_jaxcompile._constants import (  # noqa: E402 (after the path is set)
    DEFAULT_MAX_PAIRS,
    DEFAULT_PAIRED_FLOOR_S,
    DEFAULT_PAIRED_TOLERANCE,
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
    table["rich44_grad"]["+30%"] = _rich(57)  # the pair: an equal row and a deeper one
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
    as a session does (`pair_in_order`: each row until a look of the sequential rule decides
    it, up to `--max-pairs`, at `--tolerance` and `--floor`). ``--fixed-pairs N`` instead
    makes exactly N pairs a row (one look at N: the warm-up study); ``--warm-up-each``
    compiles each module once untimed before its pairs, as the plugin did before."""
    from pytest_jaxcompile.backends import PairingPlan, PairJob
    from pytest_jaxcompile.backends.jax.paired import pair_modules
    from pytest_jaxcompile.gate.sequential import looks_up_to
    from pytest_jaxcompile.records import CompileRecord

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
        if args.fixed_pairs:
            looks: tuple[tuple[int, int], ...] = ((args.fixed_pairs, 1),)
            plan = PairingPlan(looks, 1000.0, 0.0, warm_up_each=args.warm_up_each)
        else:
            looks = tuple(looks_up_to(args.max_pairs))
            plan = PairingPlan(looks, args.tolerance, args.floor, warm_up_each=args.warm_up_each)
        pair_modules(jobs, plan, args.timeout)
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()
    return {name: record.to_dict() for name, record in records.items()}


def judged(
    record: dict[str, Any], tolerance: float, floor_s: float, max_pairs: int = DEFAULT_MAX_PAIRS
) -> dict[str, Any]:
    """A recorded session's row replayed through the sequential rule in its recorded order:
    its status, ratio, the pairs the rule used (the look that decided it, else the last the
    pairs reached) and those pairs' compile seconds (both sides' wall seconds)."""
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.gate.paired import PairedComparison
    from pytest_jaxcompile.records import CompileRecord

    thresholds = Thresholds(
        paired_tolerance=tolerance, paired_floor_s=floor_s, paired_max_pairs=max_pairs
    )
    comparison = PairedComparison.of(CompileRecord.from_dict(record), thresholds)
    if comparison is None:
        return {"status": f"not paired: {record.get('paired_note')}", "ratio": None, "used": 0}
    used = comparison.pairs
    seconds = sum(record["paired_base_wall_s"][:used]) + sum(record["paired_new_wall_s"][:used])
    status = comparison.status
    return {
        "status": "not decided" if status is None else status.value,
        "ratio": comparison.ratio,
        "used": used,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions of the small modules")
    parser.add_argument("--large-sessions", type=int, default=2)
    parser.add_argument(
        "--max-pairs", type=int, default=DEFAULT_MAX_PAIRS, help="a row's last look"
    )
    parser.add_argument("--tolerance", type=float, default=DEFAULT_PAIRED_TOLERANCE)
    parser.add_argument("--floor", type=float, default=DEFAULT_PAIRED_FLOOR_S)
    parser.add_argument(
        "--fixed-pairs",
        type=int,
        default=0,
        help="make exactly this many pairs a row, deciding nothing early (the warm-up study)",
    )
    parser.add_argument(
        "--warm-up-each",
        action="store_true",
        help="compile each module once untimed before its pairs (the plugin's earlier child)",
    )
    parser.add_argument("--only", default="", help="base modules, comma-separated")
    parser.add_argument(
        "--variants", default="", help="variants paired with each base, comma-separated"
    )
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
        sequential = {
            key: [run for run in runs if not run[1].get("fixed_pairs")]
            for key, runs in results.items()
        }
        for floor in sorted({args.floor, 0.0}, reverse=True):
            _print_table(
                {key: runs for key, runs in sequential.items() if runs}, plain, args, floor
            )
        _print_warm_up_study(results)
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
        wanted = {"base", *(name for name in args.variants.split(",") if name)}
        for variant, lowering in table[base].items():
            if args.variants and variant not in wanted:
                continue
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
                # How the row was paired travels with it: the warm-up study printed below
                # and `--report` read the same fields.
                record["warm_up_each"] = args.warm_up_each
                record["fixed_pairs"] = args.fixed_pairs or None
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
    if args.fixed_pairs:
        _print_warm_up_study(results)
        return 0
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
    """The sessions replayed through the sequential rule at `floor` (the default's and 0:
    the statistic alone), in each session's recorded order. A base staged by several runs
    shows its plain compile's range; costs are set against the median of its plain
    figures. Then the rule's figures over every row: false DRIFTs, changes caught, pairs
    used, compiles a row against the fixed 20 pairs (and their two warm-ups)."""
    results = {
        key: [
            (busy, judged(record, args.tolerance, floor, args.max_pairs), record)
            for busy, record in runs
        ]
        for key, runs in sessions.items()
    }
    print(
        f"\nsequential looks up to {args.max_pairs} pairs, tolerance {args.tolerance:g}, "
        f"floor {floor:g} s\n"
        "| module | plain compile | variant | idle: DRIFT/ok/improved/not decided | "
        "busy: DRIFT/ok/improved/not decided | median ratio range | pairs used: median "
        "(90th) | cost a row: sequential (as recorded) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    used_by_kind: dict[str, list[int]] = {"equal": [], "changed": []}
    outcomes: dict[str, list[str]] = {"equal": [], "changed": []}
    recorded_compiles: list[int] = []
    for (base, variant), runs in _in_module_order(results):
        cells = []
        for busy in (False, True):
            statuses = [row["status"] for was_busy, row, _ in runs if was_busy == busy]
            counts = [statuses.count(name) for name in ("DRIFT", "ok", "improved", "not decided")]
            cells.append("/".join(map(str, counts)) if statuses else "-")
        ratios = [row["ratio"] for _, row, _ in runs if row["ratio"] is not None]
        used = sorted(row["used"] for _, row, _ in runs if row["used"])
        kind = "equal" if variant == "equal" else "changed"
        used_by_kind[kind] += used
        outcomes[kind] += [row["status"] for _, row, _ in runs]
        recorded_compiles += [
            2 * len(record.get("paired_new_wall_s") or ())
            + (2 if record.get("warm_up_each", True) else 0)  # rows before the key: warmed up
            for *_, record in runs
        ]
        span = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
        pairs = f"{_median(used)} ({_percentile(used, 0.9)})" if used else "-"
        figures = plain.get(base, [])  # staged with the equal variant: else no figure
        if not figures:
            plain_cell = "-"
        elif len(figures) > 1:
            plain_cell = f"{figures[0]:.3f}-{figures[-1]:.3f} s"
        else:
            plain_cell = f"{figures[0]:.3f} s"
        replayed = sorted(row["seconds"] for _, row, _ in runs if row.get("seconds"))
        costs = sorted(r["paired_cost_s"] for *_, r in runs if r.get("paired_cost_s") is not None)
        cost = "-"
        if replayed and costs:
            one = statistics.median(figures) if figures else None
            now, then = replayed[len(replayed) // 2], costs[len(costs) // 2]
            cost = (
                f"{now:.1f} s, {now / one:.0f}x ({then:.1f} s, {then / one:.0f}x)"
                if one
                else f"{now:.1f} s ({then:.1f} s)"
            )
        print(
            f"| {base} | {plain_cell} | {variant} | {cells[0]} | {cells[1]} | {span} | "
            f"{pairs} | {cost} |"
        )
    for kind in ("equal", "changed"):
        statuses, used = outcomes[kind], sorted(used_by_kind[kind])
        if not statuses:
            continue
        verdicts = ", ".join(
            f"{statuses.count(name)} {name}"
            for name in ("DRIFT", "ok", "improved", "not decided")
            if statuses.count(name)
        )
        print(
            f"- {kind} rows: {len(statuses)} sessions: {verdicts}; pairs used median "
            f"{_median(used)}, 90th percentile {_percentile(used, 0.9)}; "
            f"{2 * _median(used)} compiles a row (median) against "
            f"{_median(sorted(recorded_compiles))} as recorded"
        )


Keyed = TypeVar("Keyed")


def _in_module_order(rows: dict[tuple[Any, ...], Keyed]) -> list[tuple[tuple[Any, ...], Keyed]]:
    """Rows keyed (base, variant, ...): by module in the order first recorded, then by the
    change's size, then by the rest of the key."""
    bases = list(dict.fromkeys(key[0] for key in rows))
    return sorted(
        rows.items(), key=lambda item: (bases.index(item[0][0]), _size(item[0][1]), item[0][2:])
    )


def _size(variant: str) -> float:
    """A variant's place in its module's rows: equal first, then by the change's size."""
    return 0.0 if variant == "equal" else float(variant.strip("+%"))


def _median(values: list[int]) -> int:
    return values[(len(values) - 1) // 2] if values else 0


def _percentile(values: list[int], share: float) -> int:
    return values[min(len(values) - 1, math.ceil(share * len(values)) - 1)] if values else 0


def _print_warm_up_study(
    sessions: dict[tuple[str, str], list[tuple[bool, dict[str, Any]]]],
) -> None:
    """Sessions of ``--fixed-pairs`` (no decision early): whether a module's first compile
    in the child, with or without an untimed compile of it before (``--warm-up-each``),
    is as fast as its later ones, and whether the first pair's ratio is the others'."""
    rows = [
        (key, record)
        for key, runs in sessions.items()
        for _, record in runs
        if record.get("fixed_pairs")
    ]
    if not rows:
        return
    print(
        "\nwarm-up study: each side's first timed compile over the median of its others, and "
        "the first pair's ratio over the median ratio of the others (mean over sessions, "
        "and their range where there are several)\n| module | variant | warm-up each | "
        "sessions | base's first | new's first | first pair's ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    for (base, variant), record in rows:
        groups.setdefault((base, variant, bool(record.get("warm_up_each"))), []).append(record)
    for (base, variant, each), records in _in_module_order(groups):
        firsts: dict[str, list[float]] = {"base": [], "new": [], "ratio": []}
        for record in records:
            base_s, new_s = record["paired_base_cpu_s"], record["paired_new_cpu_s"]
            firsts["base"].append(base_s[0] / statistics.median(base_s[1:]))
            firsts["new"].append(new_s[0] / statistics.median(new_s[1:]))
            ratios = [n / b for b, n in zip(base_s, new_s, strict=True)]
            firsts["ratio"].append(ratios[0] / statistics.median(ratios[1:]))
        cells = [
            f"{statistics.mean(values):.3f}"
            + (f" ({min(values):.3f}-{max(values):.3f})" if len(values) > 1 else "")
            for values in firsts.values()
        ]
        print(
            f"| {base} | {variant} | {'yes' if each else 'no'} | {len(records)} | "
            + " | ".join(cells)
            + " |"
        )


if __name__ == "__main__":
    sys.exit(main())
