"""Report files: JUnit XML properties of each test's rows; an unwritable JSON report."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from conftest import JaxProject

SUITE = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_passes(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_fails_after_measuring(jax_compile):
        args = mlp_example_args()
        jax_compile(jax.jit(mlp_loss), *args, transform="jit")
        jax_compile(jax.value_and_grad(mlp_loss), *args, transform="vag")
        assert False, "the model is wrong"

    def test_measures_nothing():
        pass
"""


def _properties(path: str) -> dict[str, dict[str, str]]:
    tree = ET.parse(path)
    return {
        case.attrib["name"]: {
            prop.attrib["name"]: prop.attrib["value"] for prop in case.iter("property")
        }
        for case in tree.iter("testcase")
    }


@pytest.mark.parametrize("workers", ["0", "2"])
def test_rows_are_testcase_properties_also_of_a_failing_test(
    project: JaxProject, workers: str
) -> None:
    project.conftest(cache=False)
    project.tests(SUITE)
    xml = str(project.path / "junit.xml")
    result = project.run("-n", workers, f"--junitxml={xml}")
    result.assert_outcomes(passed=2, failed=1)
    properties = _properties(xml)
    assert properties["test_measures_nothing"] == {}
    rows = project.rows()
    for test, transforms in (
        ("test_passes", ["jit"]),
        ("test_fails_after_measuring", ["jit", "vag"]),
    ):
        props = properties[test]
        assert sorted({name.split(".")[1] for name in props}) == transforms
        for transform in transforms:
            row = rows[(test, transform)]
            prefix = f"jaxcompile.{transform}."
            assert props[prefix + "compile_s"] == str(row["compile_s"])
            assert props[prefix + "trace_s"] == str(row["trace_s"])
            assert props[prefix + "lower_s"] == str(row["lower_s"])
            assert props[prefix + "cache_state"] == "none"
            assert props[prefix + "hardware"] == row["hardware"]
            assert props[prefix + "jax_version"] == row["jax_version"]
            assert props[prefix + "mixed_precision"] == "false"
            # The verdict, as the gate's view has it: no pins yet.
            assert props[prefix + "status"] == "unpinned"
            assert props[prefix + "fails"] == "false"
            assert props[prefix + "metric"] == "wall"
            assert props[prefix + "measured"] == f"{row['compile_s']:.3f} s"


def test_an_unwritable_report_fails_the_session_with_a_message(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_passes():\n    pass\n")
    target = pytester.path / "reports"
    target.mkdir()  # a directory where the report file should be
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--compile-report={target}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"compile report NOT written to {target}: *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # CI would have nothing to upload
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
