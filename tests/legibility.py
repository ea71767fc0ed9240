"""How large a figure's smallest text reads on screen, from its exported record (``legibility`` of
:func:`rankcollapse.book.plotting.common.legibility`): what the unit, notebook and site tests hold against
``MIN_TEXT_PX``."""


def screen_text_px(min_font_pt: float, dpi: float, natural_px: float, shown_px: float) -> float:
    """On-screen px of ``min_font_pt`` text in a PNG at ``dpi``, ``natural_px`` wide, shown ``shown_px``
    wide."""
    if min(min_font_pt, dpi, natural_px, shown_px) <= 0:
        raise ValueError(f"min_font_pt, dpi, natural_px and shown_px must be > 0, got "
                         f"{min_font_pt}, {dpi}, {natural_px}, {shown_px}")
    return min_font_pt * dpi / 72 * shown_px / natural_px
