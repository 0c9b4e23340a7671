"""The backend-aware code is chosen once, in `keras_privacy.backend`; nowhere else branches."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from keras_privacy import backend

PACKAGE = Path(__file__).resolve().parents[1] / "keras_privacy"
PARTS = ("step", "distribution", "export")
BRANCH = re.compile(r"backend\.backend\(\)\s*[!=]=|[!=]=\s*keras\.backend\.backend\(\)")
SELECTION = PACKAGE / "flags.py"
"""`select_backend` compares the chosen backend with the one Keras runs: that is the choice."""


def public_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
    }


def test_each_part_is_the_module_of_the_running_backend():
    name = keras.backend.backend()
    assert backend.distribution().__name__ == f"keras_privacy.backend.{name}_distribution"
    assert backend.export().__name__ == f"keras_privacy.backend.{name}_export"
    assert backend._chosen("step").__name__ == f"keras_privacy.backend.{name}_step"


@pytest.mark.parametrize("part", PARTS)
def test_both_modules_of_a_part_offer_the_same_functions(part):
    jax_functions = public_functions(PACKAGE / "backend" / f"jax_{part}.py")
    assert jax_functions == public_functions(PACKAGE / "backend" / f"tensorflow_{part}.py")
    assert jax_functions


def test_no_backend_branch_outside_the_backend_package():
    sources = [p for p in PACKAGE.rglob("*.py") if "backend" not in p.relative_to(PACKAGE).parts]
    assert SELECTION in sources
    branches = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sources
        if path != SELECTION
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCH.search(line)
    ]
    assert branches == []
    assert BRANCH.search('if keras.backend.backend() != "jax":')
    assert BRANCH.search('if "tensorflow" == keras.backend.backend():')
    assert not BRANCH.search('f"backend {keras.backend.backend()}"')


def test_hessian_vector_product_matches_the_analytic_one():
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=5).astype("float32")
    u, w = rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=5).astype("float32")

    def cubic(params):  # sum(p^3) + p0[0, 0] * p1[0]: a cross term between the two
        first, second = params
        return keras.ops.sum(first**3) + keras.ops.sum(second**3) + first[0, 0] * second[0]

    first, second = backend.hessian_vector_product(cubic, [a, b], [u, w])
    expected_first, expected_second = 6 * a * u, 6 * b * w
    expected_first[0, 0] += w[0]
    expected_second[0] += u[0, 0]
    np.testing.assert_allclose(np.asarray(first), expected_first, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(second), expected_second, rtol=1e-5, atol=1e-5)


MEMORY_SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler"


@pytest.mark.parametrize(
    "given, expected",
    [
        (None, f"{MEMORY_SCHEDULER}=false"),
        ("--xla_dump_to=/tmp/x", f"--xla_dump_to=/tmp/x {MEMORY_SCHEDULER}=false"),
        (f"{MEMORY_SCHEDULER}=true", f"{MEMORY_SCHEDULER}=true"),
    ],
)
def test_importing_the_package_picks_xla_cpu_memory_scheduler_unless_told(given, expected):
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    if given is not None:
        env["XLA_FLAGS"] = given
    code = "import os, keras_privacy; print(os.environ['XLA_FLAGS'])"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == expected
