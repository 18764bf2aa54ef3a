"""Runs a job of an example workflow here, as GitHub Actions would, for the lifecycle tests.

The job's own `run:` steps are what runs (bash or python, in the workspace, with the job's
and the step's `env:` and GitHub's variables); `${{ }}` expressions and `if:` conditions are
evaluated for the subset the examples use (contexts `github`, `env`, `steps`; `==`, `!=`,
`&&`, `||`, `!`; `always()`, `success()`, `failure()`, `contains()`, `hashFiles()`,
`format()`), and anything else raises rather than being guessed. `actions/cache/restore` and
`actions/cache/save` are played by `ActionsCache`, a local directory with GitHub's rules
(an exact key, else the newest entry under the first restore key that matches; an entry is
never overwritten). Checkout, setup-python and artifact steps do nothing here: the test's
project is the checkout, its Python the runner's.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][\w.*-]*))"
)
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
FUNCTIONS = ("always", "success", "failure", "contains", "hashFiles", "format")


class ActionsCache:
    """A directory standing in for the Actions cache: one folder per key, in save order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.index = root / "index.json"

    def saved_keys(self) -> list[str]:
        """The keys saved, oldest first."""
        return json.loads(self.index.read_text()) if self.index.exists() else []

    def _folder(self, key: str) -> Path:
        return self.root / hashlib.sha256(key.encode()).hexdigest()[:16]

    def restore(self, path: Path, key: str, restore_keys: list[str]) -> str:
        """The key restored into `path` ('' when none matched)."""
        keys = self.saved_keys()
        matched = key if key in keys else ""
        for prefix in restore_keys if not matched else ():
            found = [saved for saved in keys if saved.startswith(prefix)]
            if found:
                matched = found[-1]
                break
        if matched:
            shutil.copytree(self._folder(matched), path, dirs_exist_ok=True)
        return matched

    def save(self, path: Path, key: str) -> bool:
        keys = self.saved_keys()
        if key in keys or not path.exists():
            return False  # immutable, as GitHub's: a second save of a key is refused
        shutil.copytree(path, self._folder(key))
        self.index.write_text(json.dumps([*keys, key]))
        return True


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure, skipped
    output: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class JobRun:
    steps: list[StepRun]

    @property
    def succeeded(self) -> bool:
        return all(step.outcome != "failure" for step in self.steps)

    def step(self, name: str) -> StepRun:
        (found,) = (step for step in self.steps if step.name == name)
        return found

    @property
    def output(self) -> str:
        return "\n".join(f"--- {step.name} ({step.outcome})\n{step.output}" for step in self.steps)


class Expressions:
    """GitHub's expression language, for the subset the example workflows use."""

    def __init__(self, contexts: Mapping[str, Any], workspace: Path) -> None:
        self.contexts = contexts
        self.workspace = workspace
        self.failed = False

    def get(self, path: str) -> Any:
        value: Any = self.contexts
        for part in path.split("."):
            if part == "*":
                value = list(value or [])
                continue
            if isinstance(value, list):
                value = [item.get(part) for item in value]
            elif isinstance(value, Mapping):
                value = value.get(part)
            else:
                return None
        return value

    def hash_files(self, pattern: str) -> str:
        files = sorted(
            path
            for path in self.workspace.rglob("*")
            if path.is_file()
            and fnmatch.fnmatch(str(path.relative_to(self.workspace)), pattern.replace("**", "*"))
        )
        if not files:
            return ""
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.read_bytes())
        return digest.hexdigest()

    def evaluate(self, expression: str) -> Any:
        python, position = [], 0
        expression = expression.strip()
        while position < len(expression):
            match = _TOKEN.match(expression, position)
            if match is None or match.end() == position:
                raise ValueError(f"unsupported expression: {expression!r}")
            position = match.end()
            if match["string"] is not None:
                python.append(repr(match["string"][1:-1].replace("''", "'")))
            elif match["op"] is not None:
                python.append(
                    {"&&": " and ", "||": " or ", "!": " not "}.get(match["op"], match["op"])
                )
            elif match["name"] in ("true", "false", "null"):
                python.append({"true": "True", "false": "False", "null": "None"}[match["name"]])
            elif expression[position:].lstrip().startswith("("):
                if match["name"] not in FUNCTIONS:
                    raise ValueError(f"unsupported function {match['name']} in {expression!r}")
                python.append(match["name"])
            else:
                python.append(f"get({match['name']!r})")
        functions: dict[str, Callable[..., Any]] = {
            "always": lambda: True,
            "success": lambda: not self.failed,
            "failure": lambda: self.failed,
            "contains": lambda items, item: item in (items or []),
            "hashFiles": self.hash_files,
            "format": lambda text, *args: text.format(*args),
            "get": self.get,
        }
        return eval("".join(python), {"__builtins__": {}}, functions)

    def substitute(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            result = self.evaluate(match[1])
            if isinstance(result, bool):
                return "true" if result else "false"
            return "" if result is None else str(result)

        return _EXPRESSION.sub(value, str(text))

    def condition(self, text: str | None) -> bool:
        if text is None:
            return not self.failed
        expression = _EXPRESSION.fullmatch(text.strip())
        result = self.evaluate(expression[1] if expression else text)
        uses_status = any(f"{name}()" in text for name in ("always", "success", "failure"))
        return bool(result) and (uses_status or not self.failed)


def run_job(
    workflow: Path,
    job_name: str,
    workspace: Path,
    cache: ActionsCache,
    github: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    skip: tuple[str, ...] = (),
) -> JobRun:
    """Run `job_name` of `workflow` in `workspace`. `github`: the `github` context (event_name,
    sha, ref, event); `env`: the process environment beneath the job's; `skip`: steps by name
    that cannot run here (the install steps: the test's Python has the project)."""
    job = yaml.safe_load(workflow.read_text())["jobs"][job_name]
    steps: dict[str, dict[str, Any]] = {}
    contexts: dict[str, Any] = {"github": {**github, "workspace": str(workspace)}, "steps": steps}
    expressions = Expressions(contexts, workspace)
    contexts["env"] = job_env = {
        key: expressions.substitute(value) for key, value in job.get("env", {}).items()
    }
    runs: list[StepRun] = []
    for index, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses", f"step {index}")
        if name in skip or not expressions.condition(step.get("if")):
            runs.append(StepRun(name, "skipped"))
            continue
        step_env = {key: expressions.substitute(v) for key, v in step.get("env", {}).items()}
        inputs = {key: expressions.substitute(v) for key, v in step.get("with", {}).items()}
        uses = str(step.get("uses", "")).split("@")[0]
        if uses:
            run = _action(uses, inputs, workspace, cache, name)
        else:
            run = _script(step, name, workspace, {**env, **job_env, **step_env}, github)
        runs.append(run)
        expressions.failed = expressions.failed or run.outcome == "failure"
        if "id" in step:
            steps[step["id"]] = {"outputs": run.outputs, "outcome": run.outcome}
    return JobRun(runs)


def _action(
    uses: str, inputs: Mapping[str, str], workspace: Path, cache: ActionsCache, name: str
) -> StepRun:
    if uses == "actions/cache/restore":
        restore_keys = [line.strip() for line in inputs.get("restore-keys", "").splitlines()]
        matched = cache.restore(
            workspace / inputs["path"], inputs["key"], [key for key in restore_keys if key]
        )
        outputs = {"cache-matched-key": matched, "cache-hit": str(matched == inputs["key"])}
        return StepRun(name, "success", f"restored: {matched or 'nothing'}", outputs)
    if uses == "actions/cache/save":
        saved = cache.save(workspace / inputs["path"], inputs["key"])
        return StepRun(name, "success", f"saved {inputs['key']}: {saved}")
    if uses in (
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/download-artifact",
    ):
        return StepRun(name, "success", "(not run here)")
    raise ValueError(f"no stand-in for the action {uses}")


def _script(
    step: Mapping[str, Any],
    name: str,
    workspace: Path,
    env: Mapping[str, str],
    github: Mapping[str, Any],
) -> StepRun:
    output_file = workspace / ".github-output"
    output_file.write_text("")
    script = workspace / ".github-step"
    script.write_text(step["run"])
    shell = step.get("shell", "bash")
    command = {
        "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        "python": [sys.executable, str(script)],
    }[shell]
    variables = {
        **env,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_EVENT_NAME": str(github["event_name"]),
        "GITHUB_SHA": str(github["sha"]),
        "GITHUB_REF": str(github["ref"]),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(output_file),
        "GITHUB_STEP_SUMMARY": str(workspace / ".github-step-summary.md"),
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
    }
    done = subprocess.run(
        command, cwd=workspace, env=variables, capture_output=True, text=True, timeout=900
    )
    outputs = dict(
        line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line
    )
    return StepRun(
        name, "success" if done.returncode == 0 else "failure", done.stdout + done.stderr, outputs
    )
