from tests.s3_server import s3_server, s3_warehouse  # noqa: F401  (fixtures of this folder)
