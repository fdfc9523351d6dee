"""How a data or changelog file is compressed: the codec Paimon's options give it and, for zstd, the level
(`file.compression.zstd-level`), in the form pyarrow's Parquet writer takes them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FileCodec"]


@dataclass(frozen=True)
class FileCodec:
    """A codec pyarrow names (`zstd`, `snappy`, `none`, ...) and Paimon's zstd level for it. Two files whose
    codecs are equal hold column chunks that one file can take from the other (a spliced changelog)."""

    name: str
    zstd_level: int = 1

    @property
    def level(self) -> int | None:
        """The level to give pyarrow: the zstd level for zstd; the codec's own default for the others, as Paimon's
        Parquet writer leaves them at theirs."""
        return self.zstd_level if self.name == "zstd" else None
