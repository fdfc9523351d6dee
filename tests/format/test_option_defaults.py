"""Every option default this library applies is Paimon's (CoreOptions.java, `ConfigOption ... defaultValue(...)`).

Each expected value below was read from org.apache.paimon.CoreOptions; the option name is the first item of each
case, so a mismatch names the option.
"""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_paimon.format.compact import max_level
from airflow_paimon.format.options import TableOptions
from airflow_paimon.format.periods import PeriodSpec

PK = TableOptions.parse({}, has_primary_key=True)
APPEND = TableOptions.parse({}, has_primary_key=False)


@pytest.mark.parametrize("option, ours, paimons", [
    ("bucket", APPEND.bucket, -1),                                         # defaultValue(-1)
    ("bucket-key", APPEND.bucket_key, None),                                # noDefaultValue()
    ("merge-engine", PK.merge_engine, "deduplicate"),                       # MergeEngine.DEDUPLICATE
    ("file.format", PK.file_format, "parquet"),                             # FILE_FORMAT_PARQUET
    ("file.compression", PK.file_compression, "zstd"),                      # defaultValue("zstd")
    ("file.compression.zstd-level", PK.zstd_level, 1),                      # defaultValue(1)
    ("file.compression.per.level", dict(PK.compression_per_level), {}),     # defaultValue(new HashMap<>())
    ("sequence.field", PK.sequence_fields, ()),                             # noDefaultValue()
    ("changelog-producer", PK.changelog_producer, "none"),                  # ChangelogProducer.NONE
    ("partition.default-name", PK.partition_default_name, "__DEFAULT_PARTITION__"),
    ("partition.legacy-name", PK.partition_legacy_name, True),              # defaultValue(true)
    ("snapshot.num-retained.min", PK.snapshot_num_retained_min, 10),        # defaultValue(10)
    ("snapshot.num-retained.max", PK.snapshot_num_retained_max, 2**31 - 1),  # Integer.MAX_VALUE
    ("snapshot.time-retained", PK.snapshot_time_retained, dt.timedelta(hours=1)),  # Duration.ofHours(1)
    ("snapshot.expire.limit", PK.snapshot_expire_limit, 50),                # defaultValue(50)
    # target-file-size: noDefaultValue(); targetFileSize(hasPrimaryKey) falls back to 128 MB / 256 MB.
    ("target-file-size (primary key)", PK.target_file_size, 128 * 1024 * 1024),
    ("target-file-size (append)", APPEND.target_file_size, 256 * 1024 * 1024),
    ("deletion-vectors.enabled", PK.read_refusal, None),                    # defaultValue(false)
    ("metadata.stats-mode", (PK.stats.default.kind, PK.stats.default.length), ("truncate", 16)),  # "truncate(16)"
    ("metadata.stats-mode.per.level", dict(PK.stats.per_level), {}),          # defaultValue(new HashMap<>())
    ("changelog-file.stats-mode", PK.stats.changelog, None),                # noDefaultValue()
    ("metadata.stats-keep-first-n-columns", PK.stats.keep_first, -1),       # defaultValue(-1)
    ("metadata.stats-dense-store", PK.stats.dense, True),                   # defaultValue(true)
])
def test_table_option_defaults_are_paimons(option, ours, paimons):
    assert ours == paimons, option


def test_manifest_compression_default_is_paimons(catalog):
    import pyarrow as pa
    # manifest.compression: defaultValue("zstd"); fastavro calls the codec "zstandard".
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    assert t.manifest_io.codec == "zstandard"


def test_num_levels_default_is_paimons(catalog):
    import pyarrow as pa
    # num-levels: noDefaultValue(), Paimon uses num-sorted-run.compaction-trigger (defaultValue(5)) + 1 levels.
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]), primary_keys=["id"])
    assert max_level(t) == 5


def test_tag_option_defaults_are_paimons():
    spec = PeriodSpec.from_options({})
    assert spec.formatter == PeriodSpec.from_options({"tag.period-formatter": "with_dashes"}).formatter
    assert spec.num_retained_max is None          # tag.num-retained-max: noDefaultValue()
    assert spec.default_time_retained is None     # tag.default-time-retained: noDefaultValue()
    # tag.automatic-creation = watermark: sink.watermark-time-zone defaultValue("UTC"),
    # tag.creation-period defaultValue(DAILY), tag.creation-delay defaultValue(Duration.ofMillis(0)).
    watermark = PeriodSpec.from_options({"tag.automatic-creation": "watermark"})
    assert watermark.interval_days == 1 and watermark.create_time == dt.time(0, 0)
    assert watermark.timezone.utcoffset(dt.datetime(2026, 7, 1)) == dt.timedelta(0)
