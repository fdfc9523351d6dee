"""A ``gs://`` warehouse's file IO against fake-gcs-server, as far as the emulator goes.

Data files stream through pyarrow's GCS filesystem and metadata goes through obstore, both built from the same
options under the GCS connector's names (``fs.gs.storage.root.url``, ``fs.gs.auth.type``). fake-gcs-server
serves what pyarrow sends and obstore's GET, DELETE and listing, but refuses the XML-API ``PUT`` obstore writes
every metadata file with (400 "invalid uploadType"), so no commit can land there and create-if-absent cannot be
tried: the library then raises instead of committing, never reports a create it did not make. The conditional
writes themselves are tested on S3 (moto) and Azure (Azurite).
"""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_paimon.format.fileio import FileIO
from airflow_paimon.format.object_store import ConditionalStore

pytestmark = pytest.mark.objectstore


@pytest.fixture
def gcs_io(gcs_server):
    warehouse = f"gs://{gcs_server.new_bucket()}/warehouse"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # every option is one the library reads
        return warehouse, FileIO(warehouse, gcs_server.options())


def test_data_files_stream_list_read_and_delete_through_the_emulator(gcs_io):
    warehouse, io = gcs_io
    rows = pa.table({"id": pa.array(range(100), pa.int64()), "name": [f"n{i}" for i in range(100)]})
    paths = [f"{warehouse}/db.db/t/bucket-{b}/data-{b}.parquet" for b in range(2)]
    for path in paths:
        io.make_parent(path)
        with io.fs.open_output_stream(io.fs_path(path)) as out:
            pq.write_table(rows, out)

    assert sorted(f.path for f in io.walk(f"{warehouse}/db.db/t")) == paths
    assert [f.path for f in io.list_dir(f"{warehouse}/db.db/t/bucket-0")] == paths[:1]
    assert io.list_subdirs(f"{warehouse}/db.db/t") == ["bucket-0", "bucket-1"]
    assert io.exists(paths[0]) and io.size(paths[0]) == len(io.read_bytes(paths[0]))   # obstore's GET
    assert pq.read_table(io.fs_path(paths[1]), filesystem=io.fs).equals(rows)

    io.delete(paths[0])                     # obstore's DELETE
    io.delete(paths[0])                     # absent: no error
    assert [f.path for f in io.walk(f"{warehouse}/db.db/t")] == paths[1:]


def test_a_commit_fails_loudly_where_the_emulator_refuses_the_write(gcs_io):
    warehouse, io = gcs_io
    snapshot = f"{warehouse}/db.db/t/snapshot/snapshot-1"
    with pytest.raises(Exception, match="invalid uploadType"):
        io.create_exclusive(snapshot, b"{}")
    assert not io.exists(snapshot)


def test_a_refused_create_whose_url_holds_a_conflict_status_is_no_lost_race(gcs_server):
    # The emulator's 400 names the object's URL: digits there (snapshot-412, a uuid's "409") are not the status of
    # a create that lost its race, so the create raises rather than answer "exists".
    bucket = gcs_server.new_bucket()
    store = ConditionalStore("gs", bucket, gcs_server.options())
    with pytest.raises(Exception, match="invalid uploadType") as refused:
        store.create(f"gs://{bucket}/db.db/t/snapshot/snapshot-412-409", b"{}")
    assert "412" in str(refused.value) and "409" in str(refused.value)
