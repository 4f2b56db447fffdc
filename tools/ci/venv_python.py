"""Run a tools/ci script with the repository's .venv when the Python that started it lacks its packages.

``python tools/ci/run_plan.py --tier tier1`` with the system python3 (no ansible-runner, jmespath or
ansible-core there): the script calls :func:`require` before its third-party imports, which re-executes
it with ``.venv/bin/python`` (make setup builds it) when that exists, or stops with a message naming it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
#: set in the re-executed process: a venv that lacks the modules too stops instead of looping
GUARD = "GPUCLUSTER_TOOLS_REEXEC"


def missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(script: str, modules: tuple[str, ...]) -> None:
    """Return when ``modules`` import here; else re-exec ``script`` under .venv/bin/python, or exit saying so."""
    lacking = missing(modules)
    if not lacking:
        return
    python = VENV / "bin" / "python"
    in_venv = Path(sys.prefix).resolve() == VENV.resolve()
    if python.exists() and not in_venv and not os.environ.get(GUARD):
        name = Path(script).name
        print(f"{name}: {sys.executable} lacks {', '.join(lacking)}; running with {python}", file=sys.stderr)
        os.execve(str(python), [str(python), script, *sys.argv[1:]], {**os.environ, GUARD: "1"})
    sys.exit(
        f"{Path(script).name}: {sys.executable} lacks {', '.join(lacking)} (ansible-runner, ansible-core and the "
        f"toolchain of pyproject.toml): run `make setup`, then `.venv/bin/python {Path(script).relative_to(ROOT)} ...`"
    )
