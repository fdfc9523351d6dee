"""``python -m airflow_paimon.cli``: the same as the ``airflow-paimon`` command."""

import sys

from airflow_paimon.cli import main

sys.exit(main())
