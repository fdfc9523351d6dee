"""Upkeep: deleting what nothing live needs (snapshot expiry, tag deletion and expiry, rollback, orphan files).

Every operation here follows one plan, stricter than Paimon's neighbour-based skipping sets:

1. **Roots.** The table's roots are its snapshot files, its tag files and its long-lived changelog files. An
   operation removes some roots (expired snapshots, deleted tags, rolled-back snapshots) and keeps the rest.
2. **Live set.** From *every* kept root: the data files it reads (its manifests merged: ADD minus DELETE), its
   changelog files, and its metadata (manifest lists, manifests, index manifest and index files, statistics).
   Manifests are immutable, so each is read once per operation (cached by file name), and the union over all
   roots is one pass over the distinct manifests with a bit per root (not roots x files).
3. **Candidates.** Every file the removed roots mention (data, extra, changelog and metadata files), minus the
   live set. Data files are compared by file name (Paimon names them with UUIDs), so a file a kept root reads
   under any path is never deleted.
4. **Order.** Inputs are checked and the plan is computed before anything is touched. Then the removed root
   files go first (expiry: snapshots oldest first; rollback: newer tags, then newer snapshots newest first),
   so nothing can reach the candidates any more; the live set is re-checked against roots that appeared
   meanwhile; only then are data and changelog files deleted, then manifests, then manifest lists and
   index/statistics files. A crash at any point leaves at worst unreferenced files (removed later by
   `remove_orphan_files`), never a retained snapshot or tag that points at a deleted file.

`dry_run=True` computes the same plan and deletes nothing.

Modules: the shared core is `roots` (what keeps files alive), `file_index` (what a root references), `plan` (the
live set over all kept roots, the plan and the ordered executor with its re-plan) and `results`; one module per
rule: `snapshot_expiry`, `changelog_expiry`, `tag_cleanup`, `rollback`, `orphans`; `expire_policy` holds
expiry's limits (table options plus overrides), `changelog_policy` the changelog's (and whether it outlives the
snapshots, as Paimon decides), `long_lived_changelogs` the `changelog/changelog-<id>` files and their hints, and
`progress` reports long operations on a terminal. `expiry_preview` is the one exception to the plan above: a
bounded dry run for the tables view that reads the first retained snapshot instead of every retained one
(Paimon's own rule; it never lists a file the expiry keeps on a table Paimon's commit protocol wrote).

A long-lived changelog is a root that keeps alive only what a changelog read needs (`roots.changelog_keeps`: its
changelog manifest list, or without one its delta list and the files that commit added); snapshot expiry of a
table whose changelog outlives its snapshots adds the expired snapshots as such roots before planning, so their
changelog files are never candidates. Arguments are read by
`airflow_paimon.format.values`.
"""
