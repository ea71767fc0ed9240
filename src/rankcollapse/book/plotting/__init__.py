"""The book's figures: ``common`` (theme, export, glue, layer-curve grids, floors), ``theory`` (the theorem
pages' figures) and ``beyond`` (the mask-design figure and sortable tables)."""

__all__ = ["beyond", "common", "theory"]
