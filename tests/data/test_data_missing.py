"""Without its data (a download that fails, as on a machine without internet), a notebook says in
one line what to do, Colab included, and stops at its data cell.

Before, notebook 06 showed a 30-line chained traceback (urllib's, then the loader's) whose last
line was the useful one, and a run that went on failed in 14 later cells with NameError.
"""

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from convs2s.data import DataError, load_multi30k, multi30k

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_06 = ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb"


def _assert_says_what_to_do(msg: str) -> None:
    assert "\n" not in msg, msg
    assert msg.startswith("Could not download Multi30k file train.de.gz"), msg
    assert "set CONVS2S_DATA_DIR to it" in msg and "Colab" in msg, msg
    assert "`%env CONVS2S_DATA_DIR=" in msg and '`os.environ["CONVS2S_DATA_DIR"] = ' in msg, msg


def test_no_network_and_an_empty_data_folder_give_one_line_naming_the_variable_and_colab(
        tmp_path, monkeypatch):
    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(empty))

    def offline(url, *args, **kwargs):  # what urllib raises on a machine without internet
        raise urllib.error.URLError(OSError(-3, "Temporary failure\nin name resolution"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(DataError) as err:
        load_multi30k()
    msg = str(err.value)
    _assert_says_what_to_do(msg)
    assert "Temporary failure in name resolution" in msg  # the reason, on the same line
    assert str(empty) in msg and list(empty.iterdir()) == []
    # IPython (Jupyter, Colab) shows this one line instead of the chained traceback
    assert err.value._render_traceback_() == [f"DataError: {msg}"]


def test_every_data_error_shows_as_its_one_line_in_ipython():
    err = multi30k.DataError("x.gz is not in /data and download=False. Set CONVS2S_DATA_DIR ...")
    assert err._render_traceback_() == [f"DataError: {err}"]


def test_notebook_06_s_data_cell_without_data_shows_one_line_and_run_all_stops_there(
        tmp_path, monkeypatch):
    """The notebook's own data cell in a real kernel: downloads come from an empty folder (no
    network is touched), the data folder is empty."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = json.loads(NOTEBOOK_06.read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells
                  if c["cell_type"] == "code" and "load_multi30k(" in "".join(c["source"]))
    mirror, data = tmp_path / "empty_mirror", tmp_path / "data"
    mirror.mkdir()
    data.mkdir()
    monkeypatch.setenv("CONVS2S_DATA_URL", mirror.as_uri())
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(data))
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from convs2s.data import load_multi30k"),
        nbformat.v4.new_code_cell(source),
        nbformat.v4.new_code_cell("print('a later cell ran')")])
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        client.execute()
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "DataError"
    assert errors[0].traceback == [f"DataError: {errors[0].evalue}"]  # one line, no traceback
    _assert_says_what_to_do(errors[0].evalue)
    assert nb.cells[2].outputs == [] and nb.cells[2].execution_count is None  # stopped there
    assert list(data.iterdir()) == []
