"""What the plugin's load reads, fixed: names, words and the gate's default figures.

A leaf module (nothing of the package, nothing heavy), one for all of them, since each module
imported at load costs every pytest start (`benchmarks/startup.py`): the option table is
built at plugin load from the choices and defaults below, a pytest-xdist controller that has
not started the session recognises a worker's rows by their key, and `gate.limits` builds
the session's `Thresholds` from the defaults.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import pytest

PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "tpu": "tpu", "cpu": "cpu"}

# compile_clear_caches: when a census'd test starts with the framework's in-process caches
# cleared.
CLEAR_AUTO = "auto"
CLEAR_ALWAYS = "always"
CLEAR_NEVER = "never"
CLEAR_MODES = (CLEAR_AUTO, CLEAR_ALWAYS, CLEAR_NEVER)

# compile_reproducer: which rows get a reproducer bundle (gate/reproducer.py).
REPRODUCER_FAILING = "failing"
REPRODUCER_ALWAYS = "always"
REPRODUCER_NEVER = "never"
REPRODUCER_MODES = (REPRODUCER_FAILING, REPRODUCER_ALWAYS, REPRODUCER_NEVER)

# The measuring fixtures: a test that requests one uses the plugin, and asks for seconds.
FIXTURES = frozenset({"jax_compile", "torch_compile"})

# What each pytest-xdist worker sends the controller (its rows), under this key.
WORKER_OUTPUT_KEY = "jaxcompile"
# What the controller tells each xdist worker: the tests with a pinned compile count.
WORKER_INPUT_COUNTED_KEY = "jaxcompile_counted_cells"

# XLA_FLAGS before anything of the session could change them (the settings guard's
# baseline, `activation.xla_flags_baseline`), kept where the session's machinery starts
# later: (the baseline, since when, each change seen before the watch: (where, value)).
XLA_FLAGS_ENV = "XLA_FLAGS"
XLA_FLAGS_AT_LOAD_KEY = pytest.StashKey[
    "tuple[str | None, str, tuple[tuple[str, str | None], ...]]"
]()
XLA_FLAGS_AT_REGISTRATION_KEY = pytest.StashKey["str | None"]()  # when the plugin registered
XLA_FLAGS_SINCE_PROCESS_START = "process start (before any plugin)"
XLA_FLAGS_SINCE_PLUGIN_LOAD = "plugin load (before any conftest.py)"

# The marker (its arguments are parsed by gate/budget.py).
MARKER_NAME = "compile_budget"
MARKER_HELP = (
    "compile_budget(seconds=None, *, tolerance=None, mixed_precision=None, max_compiles=None, "
    "max_ops_growth=None, max_memory_growth=None, max_flops_growth=None, cacheable=None, "
    "count_eager=None): a ceiling on any transform's compile_s in this test, a drift "
    "tolerance for its pins, whether it runs in mixed precision (part of the comparability "
    "key), a ceiling on its backend compiles, how much its modules may grow over their "
    "pinned op counts, compiled temp bytes and flops, whether every module must be "
    "persistent-cacheable, and whether JAX's eager dispatch of operations outside jit counts "
    "against max_compiles. The marker also turns on the census of every compile in the test."
)


# Defaults, chosen from benchmarks/gate_quality.py (docs/benchmarks.md#gate-quality).
# With a core kept busy on a 2-core host, unchanged modules measured up to 3.2x their
# pins in wall seconds at a load of 1.3-1.5 per core, and up to 1.63x in CPU seconds
# (above the floor); its regressions measured 2.5x and more. Above the max load a row is judged
# on its CPU seconds; the tolerance (1.75x) clears the CPU noise and still catches 2x;
# the floor keeps sub-second jitter of small modules from ever failing a run.
DEFAULT_TOLERANCE = 0.75
DEFAULT_FLOOR_S = 0.25
# The undecided band around the seconds tolerance (gate/band.py): a row within this factor
# either side of 1 + tolerance is not decided on one compile against one pinned compile.
# One single-compile ratio's run-to-run noise measured 0.093 as a log standard deviation
# (a 12-block forward pass against its fixed pin, 1.73x-2.03x: 0.066, times the square root
# of 2 for the pin's own sample), and 0.106-0.139 between busy sessions of the same day. At
# 0.35 (log 0.30) ten runs of a row at its tolerance got both ok and DRIFT in at most 0.03 %
# of simulated series at noise up to 0.14 (1.3 % at a band of 0.25), and a 3.3x regression
# stayed DRIFT in 99 % of runs (benchmarks/undecided_band.py,
# docs/benchmarks.md#the-undecided-band).
DEFAULT_UNDECIDED_BAND = 0.35
DEFAULT_MAX_LOAD = 1.0  # load per core above which wall seconds are not judged, CPU seconds are
DEFAULT_LOADED_ACCELERATOR_TOLERANCE = 2.0  # +200%: host load inflates an accelerator's compile
# A row faster than its pin by more than this factor is told its pin no longer judges it
# (a regression back to many times its seconds would pass): the noise measured is far
# inside it (unchanged modules up to 3.2x their pins under load, docs/benchmarks.md#gate-
# quality; one compile's seconds across days on an idle machine up to 2x).
DEFAULT_MAX_SPEEDUP = 10.0
# MiB of RSS growth during a compile that a row must also exceed to be DRIFT on memory: a
# process's first compile alone grows it by tens of MiB (docs/benchmarks.md#compile-memory).
DEFAULT_RSS_FLOOR_MIB = 128.0
# Compile instructions counted under valgrind (docs/instructions.md): an unchanged module's
# count moved by up to 0.6 % between sessions, idle or with both cores busy, and some MLP
# modules' counts now and then dropped by about 19 M instructions (3-3.8 % of them); the
# tolerance stays above both (docs/benchmarks.md#instruction-gate).
DEFAULT_INSTRUCTIONS_TOLERANCE = 0.015
# --compile-paired (docs/paired.md): the paired ratio's interval must clear 1 + tolerance
# for a DRIFT, and lie under it for an ok. From benchmarks/paired_noise.py (the rule on
# simulated noise, docs/benchmarks.md#the-paired-gate-on-a-noisy-runner): within the
# default pairs, at 3 % noise per compile a +10 % change is DRIFT in >= 95 % of rows, and
# an equal row ok in most (the rest not decided); a 3 % tolerance left most equal rows
# there not decided.
DEFAULT_PAIRED_TOLERANCE = 0.04
# The sequential rule's looks: after this many pairs a paired row may be decided
# (gate/sequential.py holds each look's rank). A row gets at most the last look's pairs.
PAIRED_LOOKS = (6, 8, 10, 12, 16, 20, 30, 45, 60)
# By default a row ends by 20 pairs (40 compiles): decided, or not decided where this
# runner's noise is too large for the tolerance (benchmarks/paired_noise.py).
DEFAULT_MAX_PAIRS = 20
# The paired rows' floor: a row is ok by it only when its whole interval is under this
# many seconds slower (and DRIFT only when wholly over it): far below the seconds gate's
# floor, since the pairs measure the difference directly.
DEFAULT_PAIRED_FLOOR_S = 0.05
DEFAULT_PAIRED_TIMEOUT_S = 3600.0
DEFAULT_INSTRUCTIONS_TIMEOUT_S = 3600.0
METRIC_WALL = "wall"
METRIC_CPU = "cpu"
METRIC_INSTRUCTIONS = "instructions"  # the compile's instructions, counted under valgrind
INSTRUCTIONS_PHASE = "compile_instructions"  # the record and pin field a verdict compares
PAIRED_PHASE = "paired"  # a verdict the pairs decided (gate/paired.py)
METRICS = (METRIC_WALL, METRIC_CPU)
