"""A figure's numbers beside its picture in a notebook's output.

A notebook shows a matplotlib figure as a PNG, which is all a reader needs on a wide screen. The
course's website also draws some figures again for a phone's column (``tools/site``), and for
that it needs the numbers the figure was drawn from, not the pixels. Here a figure can carry
those numbers (:func:`attach`), and where IPython displays it they go into the same output as
one more representation, of type :data:`MIMETYPE`, beside ``image/png`` and ``text/plain``.
A front end shows the richest type it can render, here the PNG, and leaves a vendor type it
does not know alone (checked for JupyterLab in Chromium, nbconvert's HTML and the site's
build); the numbers stay in the notebook file for the site to read (:func:`numbers`).

Plumbing only: which figures carry what is decided where they are drawn
(``attention_maps.plot_attention_grid``).
"""

from __future__ import annotations

#: The output type the numbers are stored under (a vendor type: no frontend renders it).
MIMETYPE = "application/vnd.convs2s.figure-data+json"
#: The figure attribute the numbers are kept in until the figure is displayed.
ATTRIBUTE = "convs2s_figure_data"
#: Decimals kept of every float (a weight's colour is 1 of 256 levels: 4 decimals is plenty).
DECIMALS = 4


def _rounded(value):
    if isinstance(value, float):
        return round(value, DECIMALS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def attach(fig, kind: str, **numbers) -> None:
    """Let ``fig`` carry ``numbers`` (JSON values: lists, strings, numbers) as a figure of
    ``kind``; where this runs under IPython, make sure its display shows them (:func:`register`).
    """
    setattr(fig, ATTRIBUTE, {"kind": kind, **_rounded(numbers)})
    register()


def payload(fig) -> dict | None:
    """What ``fig``'s output stores under :data:`MIMETYPE`: the numbers attached, with the
    figure's title as it is when displayed (``suptitle``, set after drawing); None for a figure
    that carries none."""
    data = getattr(fig, ATTRIBUTE, None)
    if data is None:
        return None
    title = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    return {**data, "title": title}


def numbers(output: dict, kind: str) -> dict | None:
    """The numbers a stored notebook ``output`` (its JSON) carries for a figure of ``kind``;
    None where it carries none, or of another kind."""
    data = output.get("data", {}).get(MIMETYPE)
    return data if isinstance(data, dict) and data.get("kind") == kind else None


def register(shell=None) -> bool:
    """Add the :data:`MIMETYPE` representation of figures to ``shell``'s display (by default
    the running IPython's); once per shell. False where there is no IPython shell."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    formatter = getattr(shell, "display_formatter", None)
    if formatter is None:
        return False
    if MIMETYPE not in formatter.formatters:
        from IPython.core.formatters import JSONFormatter
        from matplotlib.figure import Figure
        from traitlets import ObjectName, Unicode

        class FigureDataFormatter(JSONFormatter):
            format_type = Unicode(MIMETYPE)
            print_method = ObjectName("_repr_convs2s_figure_data_")  # no object's _repr_json_

        figure_data = FigureDataFormatter(parent=formatter)
        figure_data.for_type(Figure, payload)
        formatter.formatters[MIMETYPE] = figure_data
    return True
