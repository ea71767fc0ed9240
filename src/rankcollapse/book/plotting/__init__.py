"""The book's figures: ``common`` (theme, export, glue, layer-curve grids, floors), ``theory`` (the theorem
pages' figures), ``beyond`` (the mask-design figure and sortable tables) and ``drawn`` (the points a figure
draws, its CSV download)."""

__all__ = ["beyond", "common", "drawn", "theory"]
