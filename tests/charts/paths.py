"""Where the charts under test are: the checkout's ``charts/``."""

from tests.paths import REPO_ROOT

CHARTS_DIR = REPO_ROOT / "charts"
CONTROLLER_CHART = CHARTS_DIR / "gha-runner-scale-set-controller"
SCALE_SET_CHART = CHARTS_DIR / "gha-runner-scale-set"
