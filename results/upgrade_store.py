"""Upgrade a results store written by an earlier version, in place: compress each table ``<key>.csv`` to
``<key>.csv.gz`` (after checking its SHA-256 against its record) and record the SHA-256 and row count of
tables stored before the store recorded them (after checking each parses and has the columns and
configurations its parameters ask for, ``rankcollapse.experiments.table.check_table``), rewrite tables
stored with more digits than the store keeps today (``rankcollapse.experiments.store.TABLE_DIGITS``) and
per-sample values stored in an earlier encoding (``rankcollapse.experiments.sample_values.ENCODING``) in
today's form. Results already upgraded are left alone. With ``--article-groups``, also give per-sample
values stored before each sample's article was recorded their groups (the samples drawn again: the models'
tokenizers must be installed). Run from anywhere: ``python results/upgrade_store.py [--article-groups]
[STORE]`` (default: this folder).
"""

import sys
from pathlib import Path

from rankcollapse.experiments.table import check_table
from rankcollapse.experiments.store import ResultStore
from rankcollapse.experiments.store_upgrade import (compact_samples, compact_tables, record_article_groups,
                                                    upgrade_store)

if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--article-groups"]
    root = Path(arguments[0]) if arguments else Path(__file__).resolve().parent
    for path in upgrade_store(ResultStore(root), check_table):
        print(f"upgraded {path}")
    for path in compact_tables(ResultStore(root)):
        print(f"compacted {path}")
    for path in compact_samples(ResultStore(root)):
        print(f"compacted {path}")
    if "--article-groups" in sys.argv[1:]:
        for path in record_article_groups(ResultStore(root)):
            print(f"recorded each sample's article in {path}")
