from tests.cloud_servers import azure_server, gcs_server  # noqa: F401  (fixtures of this folder)
from tests.s3_server import s3_server, s3_warehouse  # noqa: F401  (fixtures of this folder)
