"""Where the charts under test are: the checkout's ``charts/``."""

from pathlib import Path

CHARTS_DIR = Path(__file__).resolve().parents[2] / "charts"
CONTROLLER_CHART = CHARTS_DIR / "gha-runner-scale-set-controller"
SCALE_SET_CHART = CHARTS_DIR / "gha-runner-scale-set"
