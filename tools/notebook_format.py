"""The shape of a notebook that the course's tools read, checked before they act on it.

``tools.strip_solutions``, ``tools.site`` and ``tools.coursework`` read a notebook's JSON with
plain dict and list access. :func:`read_notebook` (or :func:`check_notebook` on JSON already
loaded) checks first that it has the nbformat 4 shape those reads rely on, and raises
:class:`NotebookFormatError`, one line naming the file, the cell and what is wrong, instead of a
traceback halfway through the tool's work:

- the notebook is a JSON object whose ``cells`` is a list and whose ``metadata`` (if any) is an
  object;
- every cell is an object with a string ``cell_type``, a ``source`` that is a string or a list
  of strings, and (if any) ``metadata`` that is an object, ``outputs`` that is a list of objects
  (each output's ``data`` and ``metadata``, if any, objects) and an ``execution_count`` that is
  a whole number or null;
- in a cell's metadata, ``convs2s``, ``jupyter`` and ``mystnb`` (if any) are objects and
  ``tags`` a list of strings;
- the saved widget state (``metadata.widgets``), if any, is an object of objects, and an
  output area's saved outputs are outputs as above.

Anything else in a notebook is left to the tool that reads it.
"""

from __future__ import annotations

from pathlib import Path

from convs2s.system.local_files import FileRefused, json_value, read_small

#: The largest notebook the tools read (the course's are under 1 MB).
MAX_NOTEBOOK_BYTES = 64 << 20
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class NotebookFormatError(ValueError):
    """A notebook that is not one: one line naming the file and what is wrong."""


def _kind(value: object) -> str:
    """What a JSON value is, in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def _object(value: object, where: str, what: str) -> None:
    if not isinstance(value, dict):
        raise NotebookFormatError(f"{where}: {what} must be an object, not {_kind(value)}")


def _optional_object(container: dict, key: str, where: str, what: str) -> None:
    if key in container:
        _object(container[key], where, what)


def _outputs(outputs: object, where: str, what: str) -> None:
    """A list of output objects, each one's ``data`` and ``metadata`` (if any) objects."""
    if not isinstance(outputs, list):
        raise NotebookFormatError(f"{where}: {what} must be a list, not {_kind(outputs)}")
    for j, out in enumerate(outputs):
        _object(out, where, f"{what}[{j}]")
        for key in ("data", "metadata"):
            _optional_object(out, key, where, f"{what}[{j}].{key}")
        _optional_object(out.get("data", {}), WIDGET_VIEW, where, f"{what}[{j}]'s widget view")


def _name(value: object) -> str:
    """A cell id or model id for a message: as it is if it is a short printable string."""
    ok = isinstance(value, str) and value.isprintable() and len(value) <= 40
    return value if ok else repr(value)[:40]


def _check_cell(cell: object, where: str) -> None:
    _object(cell, where, "a cell")
    if not isinstance(cell.get("cell_type"), str):
        raise NotebookFormatError(f"{where}: its cell_type must be a string, not "
                                  f"{_kind(cell.get('cell_type'))}")
    source = cell.get("source", "")
    if not isinstance(source, str) and not (
            isinstance(source, list) and all(isinstance(line, str) for line in source)):
        bad = next((s for s in source if not isinstance(s, str)), None) \
            if isinstance(source, list) else source
        raise NotebookFormatError(f"{where}: its source must be a string or a list of strings "
                                  f"(it holds {_kind(bad)})")
    _optional_object(cell, "metadata", where, "its metadata")
    meta = cell.get("metadata", {})
    for key in ("convs2s", "jupyter", "mystnb"):
        _optional_object(meta, key, where, f"its metadata.{key}")
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise NotebookFormatError(f"{where}: its metadata.tags must be a list of strings")
    _outputs(cell.get("outputs", []), where, "its outputs")
    count = cell.get("execution_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
        raise NotebookFormatError(f"{where}: its execution_count must be a whole number or "
                                  f"null, not {_kind(count)}")


def check_notebook(nb: object, path: str | Path) -> dict:
    """``nb`` (a notebook's loaded JSON) if it has the shape the tools read (see the module
    docstring); :class:`NotebookFormatError` naming ``path`` otherwise."""
    if not isinstance(nb, dict):
        raise NotebookFormatError(f"{path}: not a Jupyter notebook (its JSON is {_kind(nb)}, "
                                  "not an object)")
    if not isinstance(nb.get("cells"), list):
        raise NotebookFormatError(f"{path}: not a Jupyter notebook (its cells must be a list, "
                                  f"not {_kind(nb.get('cells'))})")
    _optional_object(nb, "metadata", str(path), "its metadata")
    widgets = nb.get("metadata", {}).get("widgets")
    if widgets is not None:
        where = f"{path}: metadata.widgets"
        _object(widgets, where, "the saved widget state")
        state = widgets.get(WIDGET_STATE, {})
        _object(state, where, WIDGET_STATE)
        models = state.get("state", {})
        _object(models, where, "its state")
        for model_id, model in models.items():
            what = f"model {_name(model_id)}"
            _object(model, where, what)
            _optional_object(model, "state", where, f"{what}'s state")
            if "outputs" in model.get("state", {}):
                _outputs(model["state"]["outputs"], where, f"{what}'s outputs")
    for i, cell in enumerate(nb["cells"]):
        has_id = isinstance(cell, dict) and "id" in cell
        _check_cell(cell, f"{path}: cell {i}" + (f" (id {_name(cell['id'])})" if has_id else ""))
    return nb


def read_notebook(path: str | Path, data: bytes | None = None) -> dict:
    """The notebook at ``path`` (or its bytes ``data``, read once), checked
    (:func:`check_notebook`); :class:`NotebookFormatError` for a file that cannot be read, is
    not a regular file of at most :data:`MAX_NOTEBOOK_BYTES`, or is not JSON, too."""
    try:
        nb = json_value(read_small(path, MAX_NOTEBOOK_BYTES, "notebook") if data is None
                        else data)
    except FileRefused as e:
        raise NotebookFormatError(str(e)) from None
    except (OSError, ValueError) as e:
        raise NotebookFormatError(f"{path}: cannot read it as a notebook ({e})") from None
    return check_notebook(nb, path)
