"""Run the merge application (as spark-submit would: the script with its arguments) and stop this process with
SIGSTOP when it first enters the function named by the first argument (``Class.method``), so that a test can
SIGKILL it at exactly that point: ``python stop_at.py Transaction.commit --spec-file spec.json``.

The application runs unchanged: a profile hook watches the calls; nothing is replaced."""

from __future__ import annotations

import os
import runpy
import signal
import sys

import airflow_paimon.spark.merge  # noqa: F401 - imported before the hook is installed, so imports run at speed
from airflow_paimon.spark.common import application_path


def main() -> None:
    target, args = sys.argv[1], sys.argv[2:]

    def stop_on_entry(frame, event, arg):  # noqa: ARG001 - the profile hook's signature
        if event == "call" and frame.f_code.co_qualname == target:
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGSTOP)

    app = application_path("merge_app")
    sys.argv = [app] + args
    sys.setprofile(stop_on_entry)
    runpy.run_path(app, run_name="__main__")


if __name__ == "__main__":
    main()
