"""Listing a folder that other writers are creating files in, as a fresh table's first writers do: each creates
`snapshot-N` through a temporary file that is linked and removed a moment later. pyarrow's local listing fails
(FileNotFoundError) when an entry goes away while it is listed; a writer looking for the latest snapshot lists
that folder, so the race made a write fail. The library lists again instead."""

from __future__ import annotations

import threading

from airflow_paimon.format.fileio import FileIO


def test_a_folder_listed_while_writers_create_files_in_it_never_fails(tmp_path):
    io = FileIO(str(tmp_path))
    failures: list[BaseException] = []
    for round_ in range(60):
        folder = f"{tmp_path}/t{round_}/snapshot"
        start = threading.Barrier(3)

        def create(first: int) -> None:
            start.wait()
            for n in range(first, first + 5):
                io.create_exclusive(f"{folder}/snapshot-{n}", b"{}")

        writers = [threading.Thread(target=create, args=(k * 5 + 1,)) for k in range(2)]
        for w in writers:
            w.start()
        start.wait()
        while any(w.is_alive() for w in writers):   # listing for as long as the files are being created
            try:
                io.list_dir(folder)
            except FileNotFoundError as e:
                failures.append(e)
        for w in writers:
            w.join()
        assert sorted(i.path.rsplit("/", 1)[1] for i in io.list_dir(folder)) == \
            sorted(f"snapshot-{n}" for n in range(1, 11))
    assert failures == []
