"""The page's app runs in this process against Airflow's configuration: keep it off ~/airflow."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

if "AIRFLOW_HOME" not in os.environ:  # read when Airflow is first imported (the app's settings import it)
    _HOME = tempfile.mkdtemp(prefix="ij-pytest-ui-")
    os.environ["AIRFLOW_HOME"] = _HOME
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    atexit.register(shutil.rmtree, _HOME, True)
