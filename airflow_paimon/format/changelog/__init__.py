"""Changelog producers (Paimon's `changelog-producer`): changelog files beside the data files, listed by the
snapshot's `changelogManifestList`.

- `input` (input.py): a write's own rows with their kinds are its changelog, in the write's snapshot.
- `lookup` (lookup.py): a write looks up the keys it touches in the table as it was and commits the exact
  changes, then moves its level-0 files above level 0 in a COMPACT snapshot that carries the changelog, so that
  a later lookup compaction (Paimon's or this library's) does not produce it again.
- `full-compaction` (full_compaction.py): a full compaction writes the changes between the previous top level
  and its result; `full-compaction.delta-commits` says when one is due.

rows.py holds the rule shared by all of them: which changelog rows turn a key's value before into its value after.
"""
