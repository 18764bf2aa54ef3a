"""The one table of options: `Option` and `OPTIONS`.

Each entry names its ini key (``compile_*``), its pytest flag (``--compile-*``) where it
has one (`on_command_line`: the few options users reach for; the rest are ini keys only), an
environment variable where there is one, its kind, default and help. pytest's flags and ini
keys (`options.pytest_options`) and the subcommands' options (`options.subcommands`) are all
made from it; `options.values` holds the one validator of their values.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pytest_jaxcompile._constants import (
    CLEAR_AUTO,
    CLEAR_MODES,
    DEFAULT_FLOOR_S,
    DEFAULT_INSTRUCTIONS_TIMEOUT_S,
    DEFAULT_INSTRUCTIONS_TOLERANCE,
    DEFAULT_LOADED_ACCELERATOR_TOLERANCE,
    DEFAULT_MAX_LOAD,
    DEFAULT_MAX_PAIRS,
    DEFAULT_MAX_SPEEDUP,
    DEFAULT_PAIRED_FLOOR_S,
    DEFAULT_PAIRED_TIMEOUT_S,
    DEFAULT_PAIRED_TOLERANCE,
    DEFAULT_RSS_FLOOR_MIB,
    DEFAULT_TOLERANCE,
    DEFAULT_UNDECIDED_BAND,
    METRICS,
    PAIRED_LOOKS,
    PLATFORM_ALIASES,
    REPRODUCER_FAILING,
    REPRODUCER_MODES,
)

if TYPE_CHECKING:
    Kind = Literal["number", "count", "flag", "choice", "path", "text", "lines"]

GITHUB_MODES = ("auto", "off")


class Option:
    """One setting, as pytest's command line, the ini file and the subcommands know it.

    A plain class, read-only by convention: a frozen dataclass compiles six generated methods
    when the plugin loads, a named tuple one and a ``compile()`` of each field's annotation
    (`benchmarks/startup.py`)."""

    __slots__ = (
        "choices",
        "cli_name",
        "default",
        "default_text",
        "env",
        "help",
        "implausible_above",
        "in_ini",
        "kind",
        "maximum",
        "metavar",
        "minimum",
        "name",
        "on_command_line",
        "threshold",
    )

    def __init__(
        self,
        name: str,  # the ini key and pytest's dest: compile_tolerance
        kind: Kind,
        help: str,  # what it does; the default is appended from `default`
        default: Any = None,
        metavar: str | None = None,
        choices: tuple[str, ...] = (),
        env: str | None = None,
        # pytest offers --compile-...: only the options users reach for (at most 15, so that
        # `pytest --help` stays short: tests/test_docs.py); every other one is an ini key.
        on_command_line: bool = False,
        in_ini: bool = True,  # pytest reads compile_... from the ini file
        threshold: str | None = None,  # the Thresholds field it sets (the verdict options)
        minimum: int = 1,  # the least a "count" may be
        maximum: int | None = None,  # the most a "count" may be; None: no most
        default_text: str | None = None,  # how the default reads in help, where not the value
        cli_name: str | None = None,  # the flags' name where not the ini key's (no unit suffix)
        # Above this a value is accepted but almost surely a mistake (a percent typed as a
        # fraction): a configuration warning names the option (`implausible`).
        implausible_above: float | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.help = help
        self.default = default
        self.metavar = metavar
        self.choices = choices
        self.env = env
        self.on_command_line = on_command_line
        self.in_ini = in_ini
        self.threshold = threshold
        self.minimum = minimum
        self.maximum = maximum
        self.default_text = default_text
        self.cli_name = cli_name
        self.implausible_above = implausible_above

    def __repr__(self) -> str:
        return f"Option({self.name!r})"

    @property
    def flag(self) -> str:
        """pytest's flag: ``--compile-tolerance``."""
        return "--" + (self.cli_name or self.name).replace("_", "-")

    @property
    def short_flag(self) -> str:
        """The subcommands' spelling of the same option: ``--tolerance``."""
        return "--" + (self.cli_name or self.name).removeprefix("compile_").replace("_", "-")

    def help_text(self, for_argparse: bool = True) -> str:
        if self.default_text is not None:
            default = self.default_text
        elif self.kind == "flag":
            default = "off"
        elif self.default is None:
            default = "none"
        else:
            default = f"{self.default:g}" if isinstance(self.default, float) else str(self.default)
        text = f"{self.help} (default: {default})"
        return text.replace("%", "%%") if for_argparse else text


OPTIONS: tuple[Option, ...] = (
    Option(
        "compile_pin_update",
        "flag",
        "write this session's measured compile rows into the pins; never fails on drift",
        in_ini=False,
        on_command_line=True,
    ),
    Option(
        "compile_pins_dir",
        "path",
        "directory of pin files",
        default="pins",
        metavar="DIR",
        default_text="pins in the rootdir",
    ),
    Option(
        "compile_tolerance",
        "number",
        "relative slowdown over the pin that counts as DRIFT (0.75 = +75%)",
        default=DEFAULT_TOLERANCE,
        metavar="FRACTION",
        threshold="tolerance",
        implausible_above=10.0,
        on_command_line=True,
    ),  # +1000%: 50 meant 50%, not 51x
    Option(
        "compile_floor",
        "number",
        "absolute slowdown in seconds a row must also exceed to be DRIFT or improved",
        default=DEFAULT_FLOOR_S,
        metavar="SECONDS",
        threshold="floor_s",
        on_command_line=True,
    ),
    Option(
        "compile_undecided_band",
        "number",
        "factor either side of the tolerance within which a row's seconds are not decided "
        "on one compile against one pinned compile: noisy, never ok on one run and DRIFT "
        "on the next (0.35: 1.30x-2.36x at the default tolerance); "
        "0: every row decided on its single sample",
        default=DEFAULT_UNDECIDED_BAND,
        metavar="FRACTION",
        threshold="undecided_band",
        implausible_above=10.0,
    ),
    Option(
        "compile_max_load",
        "number",
        "rows measured above this 1-minute load per core are "
        "judged on CPU seconds, their wall seconds not judged",
        default=DEFAULT_MAX_LOAD,
        metavar="LOAD",
        threshold="max_load",
    ),
    Option(
        "compile_strict",
        "flag",
        "judge the wall seconds of rows measured above the max load too, and fail a row "
        "faster than its pin by more than compile_max_speedup (its pin no longer judges it)",
        threshold="strict",
        on_command_line=True,
    ),
    Option(
        "compile_metric",
        "choice",
        "what verdicts compare: wall seconds or process CPU seconds",
        default="wall",
        choices=METRICS,
        threshold="metric",
    ),
    Option(
        "compile_max_ops_growth",
        "number",
        "rows whose module grew beyond this fraction "
        "over the pinned op count are GREW (deterministic; e.g. 0.1)",
        metavar="FRACTION",
        threshold="max_ops_growth",
        default_text="no gate",
    ),
    Option(
        "compile_max_memory_growth",
        "number",
        "rows whose compiled temp bytes "
        "(memory_analysis()) grew beyond this fraction over the pin are GREW "
        "(deterministic; e.g. 0.5)",
        metavar="FRACTION",
        threshold="max_memory_growth",
        default_text="no gate",
    ),
    Option(
        "compile_max_flops_growth",
        "number",
        "rows whose compiled flops (cost_analysis()) "
        "grew beyond this fraction over the pin are GREW (deterministic)",
        metavar="FRACTION",
        threshold="max_flops_growth",
        default_text="no gate",
    ),
    Option(
        "compile_rss_floor_mib",
        "number",
        "growth of the process's resident memory during "
        "a compile, in MiB, that a row must exceed beyond its pin (and the tolerance) to be "
        "DRIFT on memory",
        default=DEFAULT_RSS_FLOOR_MIB,
        metavar="MIB",
        threshold="rss_floor_mib",
        cli_name="compile_rss_floor",
    ),
    Option(
        "compile_time_advisory",
        "flag",
        "time DRIFT (and improvement) is reported but does "
        "not fail; GREW, MISS and budgets still do",
        threshold="time_advisory",
    ),
    Option(
        "compile_accept",
        "flag",
        "accept this session's failing rows: each is reported as accepted and the session "
        "passes (CI: set by the pull request's accept label; the merge makes the change "
        "the baseline)",
        env="JAXCOMPILE_ACCEPT",
        threshold="accept",
    ),
    Option(
        "compile_accept_label",
        "text",
        "the pull-request label that accepts a change in CI (the example gate workflow's): "
        "under GitHub Actions a failing session names it as the way back",
        metavar="LABEL",
        env="JAXCOMPILE_ACCEPT_LABEL",
    ),
    Option(
        "compile_expect_warm",
        "flag",
        "for jobs that restore a compilation cache: a cold row "
        "of a module unchanged since its warm pin is a MISS and fails",
        threshold="expect_warm",
        on_command_line=True,
    ),
    Option(
        "compile_fail_on_improvement",
        "flag",
        "also fail when a row compiles faster than its pin beyond the tolerance",
        threshold="fail_on_improvement",
    ),
    Option(
        "compile_max_speedup",
        "number",
        "a row faster than its pin by more than this factor (10 = a tenth of the pin's "
        "seconds) is told that its pin no longer judges it and to re-pin; "
        "--compile-strict fails it",
        default=DEFAULT_MAX_SPEEDUP,
        metavar="FACTOR",
        threshold="max_speedup",
    ),
    Option(
        "compile_require_pinned",
        "flag",
        "an unpinned row fails the session (its nearest pin under another key is named)",
        threshold="require_pinned",
    ),
    Option(
        "compile_max_upgrade_slowdown",
        "number",
        "when rows under a new jax version are "
        "compared with their pins under the previous one, fail if the median slowed down by "
        "more than this fraction (0.5 = +50%)",
        metavar="FRACTION",
        threshold="max_upgrade_slowdown",
        default_text="report only",
    ),
    Option(
        "compile_loaded_accelerator_tolerance",
        "number",
        "GPU and TPU rows measured above "
        "the max load are judged on wall seconds with this tolerance (their CPU seconds miss "
        "the compiler's device work)",
        default=DEFAULT_LOADED_ACCELERATOR_TOLERANCE,
        metavar="FRACTION",
        threshold="loaded_accelerator_tolerance",
        implausible_above=10.0,
    ),
    Option(
        "compile_instructions",
        "flag",
        "also count the XLA compiler's instructions for "
        "each jax_compile row under valgrind (one child process per session; CPU "
        "compiles; docs/instructions.md), pin them, and judge them: deterministic, "
        "whatever the load",
        on_command_line=True,
    ),
    Option(
        "compile_instructions_recount",
        "flag",
        "with --compile-instructions, count every row under valgrind, also those whose "
        "module, compile options and instrument equal their pin's (by default judged "
        "from the pin: 'module unchanged: count carried'); for a scheduled job",
    ),
    Option(
        "compile_instructions_required",
        "flag",
        "with --compile-instructions, fail the session when a row was not counted "
        "(by default a warning naming each such row and why)",
        on_command_line=True,
    ),
    Option(
        "compile_instructions_tolerance",
        "number",
        "relative growth of a row's compile "
        "instructions over its pin that counts as DRIFT, whatever the load",
        default=DEFAULT_INSTRUCTIONS_TOLERANCE,
        metavar="FRACTION",
        threshold="instructions_tolerance",
    ),
    Option(
        "compile_instructions_timeout",
        "number",
        "seconds the instruction-counting child "
        "may run; rows it did not count by then say so, their seconds are still judged",
        default=DEFAULT_INSTRUCTIONS_TIMEOUT_S,
        metavar="SECONDS",
    ),
    Option(
        "compile_paired",
        "flag",
        "compile each row whose module changed since its pin again beside its pin's stored "
        "module, alternately on this machine at the session's end, and judge the paired "
        "ratio (docs/paired.md); a pin update also stores each pinned module",
        on_command_line=True,
    ),
    Option(
        "compile_paired_max_pairs",
        "count",
        "pairs a row may get: it is judged after 6, 8, 10, 12, 16, 20, 30, 45 and 60 pairs "
        "and stops at the first of these looks that decides it, or that finds the looks "
        "left up to this many cannot (at most 60, the last look)",
        default=DEFAULT_MAX_PAIRS,
        metavar="N",
        minimum=PAIRED_LOOKS[0],
        maximum=PAIRED_LOOKS[-1],
        threshold="paired_max_pairs",
    ),
    Option(
        "compile_paired_required",
        "flag",
        "with --compile-paired, fail the session when a paired row was not decided (this "
        "runner's noise too large for compile_paired_tolerance within the pairs allowed; "
        "by default such a row passes as noisy, saying so)",
        threshold="paired_required",
    ),
    Option(
        "compile_paired_budget",
        "number",
        "seconds the whole pairing may take: the rows likeliest to have regressed are "
        "paired first, and each row the budget does not reach says so and is judged on "
        "its seconds",
        metavar="SECONDS",
        default_text="no budget",
    ),
    Option(
        "compile_paired_floor",
        "number",
        "seconds a paired row may be slower and still be ok, whatever its ratio: ok only "
        "where its whole interval is under this many seconds slower, DRIFT only where it "
        "is wholly over",
        default=DEFAULT_PAIRED_FLOOR_S,
        metavar="SECONDS",
        threshold="paired_floor_s",
    ),
    Option(
        "compile_paired_tolerance",
        "number",
        "paired ratio over 1 that counts as DRIFT once its interval clears it, and ok once "
        "its interval lies under it (0.04 = +4%)",
        default=DEFAULT_PAIRED_TOLERANCE,
        metavar="FRACTION",
        threshold="paired_tolerance",
        implausible_above=10.0,
    ),
    Option(
        "compile_paired_timeout",
        "number",
        "seconds the pairing child may run in all, and the profiling child too; rows it "
        "did not pair by then say so, their seconds are still judged",
        default=DEFAULT_PAIRED_TIMEOUT_S,
        metavar="SECONDS",
    ),
    Option(
        "compile_profile",
        "flag",
        "profile every row's compile by XLA pass beside its pin's stored module's, not only "
        "the failing rows' (docs/profile.md); a pin update also stores each pinned module",
        on_command_line=True,
    ),
    Option(
        "compile_profile_failing",
        "choice",
        "profile each failing row's compile by XLA pass after the tests (two compiles and a "
        "child process a row: the summary says what it cost), or 'never'",
        default="always",
        choices=("always", "never"),
    ),
    Option(
        "compile_modules_dir",
        "path",
        "directory of the pinned modules --compile-paired compiles again (commit it, or "
        "cache it in CI as the compilation cache is)",
        metavar="DIR",
        default_text="modules in the pins dir",
    ),
    Option(
        "compile_hardware",
        "text",
        "hardware name for the comparability key, for a pool of identical runners",
        metavar="NAME",
        env="JAXCOMPILE_HARDWARE",
        default_text="detected",
        on_command_line=True,
    ),
    Option(
        "compile_report",
        "path",
        "write the session's compile records and verdicts as JSON to PATH",
        metavar="PATH",
        on_command_line=True,
    ),
    Option(
        "compile_artifacts_dir",
        "path",
        "save the lowered module text of every failing "
        "row in DIR, named by test and transform, for diffing",
        metavar="DIR",
    ),
    Option(
        "compile_reproducer",
        "choice",
        "write a reproducer bundle (the row's and its pinned module, their compile options, "
        "the environment, the verdict's figures and a script that needs only jax) for each "
        "failing row, for every row ('always'), or 'never'",
        default=REPRODUCER_FAILING,
        choices=REPRODUCER_MODES,
    ),
    Option(
        "compile_reproducer_dir",
        "path",
        "directory of the reproducer bundles, one folder per row (replaced each session)",
        default="jaxcompile-reproducers",
        metavar="DIR",
        default_text="jaxcompile-reproducers in the rootdir",
    ),
    Option(
        "compile_record_dir",
        "path",
        "append this session's compile records to DIR as a "
        "new JSON lines file (the results corpus)",
        metavar="DIR",
        on_command_line=True,
    ),
    Option(
        "compile_durations",
        "count",
        "list the N most expensive compiles and the N tests with the most compile time (0: all)",
        default=5,
        metavar="N",
        minimum=0,
        on_command_line=True,
    ),
    Option(
        "compile_census",
        "flag",
        "record every compile of every test (tests marked compile_budget always are)",
        on_command_line=True,
    ),
    Option(
        "compile_suggest_budgets",
        "flag",
        "at the end of the session, print each census'd "
        "test's observed compile count as the compile_budget(max_compiles=N) marker line "
        "to paste (see also: pytest-jaxcompile budgets REPORT.json)",
        in_ini=False,
        on_command_line=True,
    ),
    Option(
        "compile_count_eager",
        "flag",
        "JAX's eager dispatch of operations outside jit "
        "(jnp.ones, x + 1) counts against compile_budget(max_compiles=N); a marker's "
        "count_eager overrides",
    ),
    Option(
        "compile_clear_caches",
        "choice",
        "when a census'd test starts with JAX's "
        "in-process caches cleared: 'auto' when a function an earlier test traced or "
        "compiled is still in memory, 'always', or 'never' (faster, but a test's compile "
        "count then depends on the tests before it in the same process)",
        default=CLEAR_AUTO,
        choices=CLEAR_MODES,
    ),
    Option(
        "compile_trace_profile",
        "flag",
        "attribute each measured function's trace time to "
        "JAX, stdlib/numpy, the project and other packages (one extra profiled trace)",
    ),
    Option(
        "compile_repeat",
        "count",
        "compile each measured transform N times, caches "
        "cleared in between; the fastest is the figure",
        default=1,
        metavar="N",
    ),
    Option(
        "compile_github",
        "choice",
        "GitHub Actions output: 'auto' writes the step summary "
        "and annotations when $GITHUB_ACTIONS is 'true'; 'off' never",
        default="auto",
        choices=GITHUB_MODES,
    ),
    Option(
        "compile_mixed_precision",
        "flag",
        "default mixed_precision of compile rows whose test declares none",
    ),
    Option(
        "compile_required_xla_flags",
        "lines",
        "XLA flags every compile must run with, e.g. --xla_gpu_autotune_level=0",
    ),
    Option(
        "compile_require_cache",
        "flag",
        "every compile must use a persistent cache",
    ),
    Option(
        "compile_require_cacheable",
        "flag",
        "every compiled module must be persistent-cacheable",
    ),
    Option(
        "compile_expected_platform",
        "choice",
        "gpu, tpu or cpu: fail on a silent fallback to another backend",
        choices=tuple(PLATFORM_ALIASES),
    ),
)
BY_NAME: Mapping[str, Option] = {option.name: option for option in OPTIONS}
THRESHOLD_OPTIONS = tuple(option for option in OPTIONS if option.threshold is not None)
