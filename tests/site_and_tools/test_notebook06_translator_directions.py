"""Notebook 06's translator widget offers both shipped directions (JupyterLab, quick mode, in
headless Chromium): it starts German → English on the model the notebook studies; choosing
English → German relabels the box "English", gives it the English starting sentence and
translates it with the shipped en-de model (the package's translation, as the kernel prints
it); typed English is translated too; choosing German → English again brings the German box
and its sentence back."""

from types import SimpleNamespace

import pytest
from test_browser import _assert_clean, lab  # noqa: F401 (lab: the JupyterLab fixture)

from convs2s.course import analysis

NOTEBOOK = "06_inference_beam_search_bleu.ipynb"
#: The widget's box, found by the labels that stay whatever the direction.
WIDGET = SimpleNamespace(box=".widget-vbox", labels=("direction", "beam size"))
#: ipywidgets shows a dropdown's option labels with non-breaking spaces.
NBSP = "\u00a0"


def _option(label: str) -> str:
    return label.replace(" ", NBSP)


@pytest.mark.browser
@pytest.mark.slow
def test_notebook_06s_translator_widget_offers_both_directions(lab):  # noqa: F811
    import convs2s

    server, browser = lab
    en_de = convs2s.pretrained("en-de", device="cpu")
    with browser.notebook(server, NOTEBOOK) as nb:
        nb.run_all()
        _assert_clean(nb)
        w = nb.widget(WIDGET)
        nb.figure_src(w)
        assert nb.selected(w, "direction") == _option("German → English")
        assert nb.text_value(w, "German") == analysis.WIDGET_SENTENCES["de-en"]
        assert "English: " in w.inner_text()

        nb.mark_figure(w)
        nb.select(w, "direction", _option("English → German"))
        nb.wait_redrawn(w)
        assert nb.text_value(w, "English") == analysis.WIDGET_SENTENCES["en-de"]
        expected = en_de.translate(analysis.WIDGET_SENTENCES["en-de"], beam_size=5)
        assert f"German: {expected}" in w.inner_text()

        typed = "Two dogs are running on the beach."
        nb.mark_figure(w)
        nb.enter_text(w, "English", typed)
        nb.wait_redrawn(w)
        assert f"German: {en_de.translate(typed, beam_size=5)}" in w.inner_text()

        nb.mark_figure(w)
        nb.select(w, "direction", _option("German → English"))
        nb.wait_redrawn(w)
        assert nb.text_value(w, "German") == analysis.WIDGET_SENTENCES["de-en"]
        assert "English: " in w.inner_text() and "German: " not in w.inner_text()
        _assert_clean(nb)
