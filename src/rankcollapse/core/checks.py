"""Parameter checks shared by the configuration dataclasses: one rule per kind of parameter, one error each.

Every error names the parameter and what is allowed, so a reader who mistypes a page parameter learns
the fix from one line. Used by: :mod:`rankcollapse.theory.dynamics`, :mod:`rankcollapse.engine` (layers, run),
:mod:`rankcollapse.experiments.config`, :mod:`rankcollapse.book.cli` and the page modules' configs
(:mod:`rankcollapse.book.pages`).
"""

from __future__ import annotations

import math


def check_int(name: str, value: object, low: int, high: int) -> None:
    """An integer (not a bool) in ``[low, high]``.

    >>> check_int("n_layers", 0, 1, 4096)
    Traceback (most recent call last):
    ...
    ValueError: n_layers must be an integer in [1, 4096], got 0
    """
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def check_choice(name: str, value: object, allowed: tuple) -> None:
    """One of ``allowed``."""
    if isinstance(value, bool) != any(isinstance(a, bool) for a in allowed) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


def check_choices(name: str, values: object, allowed: tuple) -> None:
    """A non-empty tuple of values from ``allowed``, without repeats."""
    if (not isinstance(values, tuple) or not values or len(set(values)) != len(values)
            or any(isinstance(v, bool) != isinstance(allowed[0], bool) or v not in allowed for v in values)):
        raise ValueError(f"{name} must be a non-empty tuple of distinct values from "
                         f"{', '.join(map(repr, allowed))}; got {values!r}")


def check_temperature(name: str, value: object, allow_none: bool = False) -> None:
    """The attention temperature d_QK: a finite number > 0 (or None, the layer's own scaling, where allowed).

    >>> check_temperature("temperature", -1.0)
    Traceback (most recent call last):
    ...
    ValueError: temperature must be a finite number > 0, got -1.0
    """
    if value is None and allow_none:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not (math.isfinite(value) and value > 0)):
        what = "a finite number > 0" + (" or None (the layer's own scaling)" if allow_none else "")
        raise ValueError(f"{name} must be {what}, got {value!r}")


def check_number(name: str, value: object, low: float, high: float, *, open_low: bool = False,
                 open_high: bool = False) -> None:
    """A finite real number (int or float, not a bool) in the interval from ``low`` to ``high``.

    >>> check_number("a", 1.0, 0.0, 1.0, open_low=True, open_high=True)
    Traceback (most recent call last):
    ...
    ValueError: a must be a number in (0.0, 1.0), got 1.0
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (low < value if open_low else low <= value) and (value < high if open_high else value <= high)
    if not ok:
        interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")


def freeze_lists(config: object, *names: str) -> None:
    """Lists from a page's parameters cell become tuples (hashable, frozen)."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, list):
            object.__setattr__(config, name, tuple(value))


def check_ints(name: str, values: object, low: int, high: int) -> None:
    """A non-empty tuple of distinct integers in ``[low, high]``."""
    if not isinstance(values, tuple) or not values or len(set(values)) != len(values):
        raise ValueError(f"{name} must be a non-empty list of distinct integers in [{low}, {high}], "
                         f"got {values!r}")
    for value in values:
        check_int(f"every entry of {name}", value, low, high)


def check_numbers(name: str, values: object, low: float, high: float) -> None:
    """A non-empty tuple of distinct numbers in ``(low, high]``."""
    if not isinstance(values, tuple) or not values or len(set(values)) != len(values):
        raise ValueError(f"{name} must be a non-empty list of distinct numbers in ({low}, {high}], "
                         f"got {values!r}")
    for value in values:
        check_number(f"every entry of {name}", value, low, high, open_low=True)
