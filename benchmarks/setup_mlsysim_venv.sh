#!/usr/bin/env bash
# Build a throwaway virtualenv that holds mlsysim 0.1.1, the peer tool the
# "mlsysim" preset of roofline is checked against and timed against.
#
# mlsysim is a yardstick only: it is NOT a dependency of roofline, and the
# venv should live outside the repository.
#
# Usage:  benchmarks/setup_mlsysim_venv.sh
#   MLSYSIM_VENV  where to create the venv   (default: /tmp/mlsysim-venv)
#   PYTHON        interpreter used to make it (default: python3)
# Then:   "$MLSYSIM_VENV/bin/python" benchmarks/mlsysim_yardstick.py
set -euo pipefail

VENV="${MLSYSIM_VENV:-/tmp/mlsysim-venv}"
PYTHON="${PYTHON:-python3}"

# Reuse an existing venv; otherwise create one.
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi

# mlsysim 0.1.1 only pulls light packages (pint, numpy, pydantic, typer, rich, pyyaml).
"$VENV/bin/python" -m pip install --quiet "mlsysim==0.1.1"

# Fail loudly if a different version ended up installed.
"$VENV/bin/python" - <<'PY'
import mlsysim
assert mlsysim.__version__ == "0.1.1", mlsysim.__version__
print("mlsysim", mlsysim.__version__, "ready")
PY
echo "yardstick: $VENV/bin/python benchmarks/mlsysim_yardstick.py"
