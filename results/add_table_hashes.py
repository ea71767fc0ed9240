"""Record the SHA-256 and row count of each stored table in its JSON, for results stored before the store
recorded them. Each CSV is first checked to parse and to have the columns and configurations its
parameters ask for (``rankcollapse.experiments.config.check_table``); results that already have them are left
alone. Run from anywhere: ``python results/add_table_hashes.py``.
"""

from pathlib import Path

from rankcollapse.experiments.config import check_table
from rankcollapse.experiments.store import ResultStore, add_table_hashes

if __name__ == "__main__":
    for path in add_table_hashes(ResultStore(Path(__file__).resolve().parent), check_table):
        print(f"added table_sha256 and table_rows to {path}")
