"""Errors of the format library: each names the problem so an operator on call can act on it."""


class PaimonError(Exception):
    """Base class of every error the format library raises on purpose."""


class TableNotFoundError(PaimonError):
    """The table (or database) does not exist in the warehouse."""


class TableAlreadyExistsError(PaimonError):
    """create_table was asked to create a table that is already there."""


class UnsupportedTableError(PaimonError):
    """The table uses a Paimon feature this library does not implement; its reads or writes are refused before any
    I/O (its metadata stays usable)."""


class SchemaMismatchError(PaimonError):
    """Data handed to a write does not fit the table's schema."""


class InvalidOptionError(PaimonError, ValueError):
    """A table option or an argument that stands for one has a bad value."""


class InvalidValueError(InvalidOptionError):
    """A value given by a person (an argument, a flag, a table option) is not in any accepted form: the message
    names the argument, the forms accepted and the value given (see values.py)."""


class SnapshotNotFoundError(PaimonError):
    """The asked-for snapshot does not exist (never committed, or expired)."""


class SnapshotExpiredError(SnapshotNotFoundError):
    """The snapshot current at the asked-for time has expired and no tag provably holds it."""


class TagNotFoundError(PaimonError):
    """The asked-for tag does not exist."""


class CorruptFileError(PaimonError):
    """A metadata file (snapshot, tag, manifest, manifest list) exists but cannot be parsed."""


class CommitConflictError(PaimonError):
    """A concurrent commit changed what this commit depends on; nothing was committed."""


class InvalidDataError(PaimonError, ValueError):
    """Rows handed to a write break a table invariant (null or duplicate keys, bad value kinds)."""


class DuplicateKeyError(InvalidDataError):
    """Several rows of one write (or one merge source) carry the same primary key where each may appear once."""


class TagAlreadyExistsError(PaimonError):
    """A tag of that name already exists and points at another snapshot (and replacing was not asked for)."""


class SchemaChangeError(PaimonError, ValueError):
    """A schema change cannot be applied as asked; the table's schema is unchanged."""


class PeriodMismatchError(PaimonError, ValueError):
    """A run's data interval is not one period of the table's calendar."""


class MergeClauseError(PaimonError, ValueError):
    """The MERGE clauses (or the ``on`` columns) cannot be executed as given; nothing was changed."""


class UnsafeStoreError(PaimonError):
    """The warehouse's store cannot create a file only if it is absent, so two concurrent commits could both
    believe they landed; nothing is committed until a lock serialises the commits (``lock.enabled``)."""
