"""The course's trained translators, shipped inside the package: translate with no data and no
training.

    >>> import convs2s
    >>> t = convs2s.pretrained("de-en")                              # doctest: +SKIP
    >>> t.translate("Ein kleiner Hund spielt im Schnee.")            # doctest: +SKIP
    'A little dog is playing in the snow.'
    >>> convs2s.pretrained("en-de").translate("Two dogs play in the snow.")  # doctest: +SKIP

One model per direction, as the manifest lists them (:func:`available`): German→English
``"de-en"`` and English→German ``"en-de"``. Each is one checkpoint file in
``convs2s/run/models/`` (the ``cpu_subword`` architecture trained by ``python -m convs2s.train``,
its weights stored as float16 to halve the file; the model computes in float32 as always), with
its vocabularies, its sentencepiece model and its final choices (averaged weights, length
penalty, both chosen on validation) inside it.
``models/manifest.json`` records for each one the file's sha256, how it was trained (command,
epochs, hours, machine) and what it scores; a file whose bytes differ from the record is refused
with one line, as is a missing one. ``tools/export_pretrained.py`` writes both from a training
run's ``final.pt``. Made for notebook 06 (a trained model to study, without hours of training);
every translator widget uses it where the learner has no run of their own, and notebook 06's
widget and the website's translator offer every direction shipped.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.system.local_files import FileRefused, json_value, read_small

__all__ = ["MODELS_DIR", "PretrainedError", "available", "pretrained", "pretrained_checkpoint",
           "pretrained_path", "record"]

#: Where the shipped models and their manifest are (package data).
MODELS_DIR = Path(__file__).resolve().parent / "models"
MANIFEST = "manifest.json"
#: The largest manifest read (the shipped one is a few kB).
MAX_MANIFEST_BYTES = 1 << 20


class PretrainedError(RuntimeError):
    """A shipped model that cannot be used: one line saying which, why and what to do."""


def _manifest(models_dir: Path) -> dict[str, dict]:
    """The manifest's models, each entry an object (read as a regular file of at most
    :data:`MAX_MANIFEST_BYTES`); :class:`PretrainedError` (one line) otherwise."""
    path = models_dir / MANIFEST
    try:
        data = json_value(read_small(path, MAX_MANIFEST_BYTES, "manifest"), "JSON")
    except FileNotFoundError:
        raise PretrainedError(f"this installation of convs2s has no shipped models ({path} is "
                              "missing): reinstall the package (pip install --force-reinstall "
                              "convs2s, or from the course's repository)") from None
    except FileRefused as e:
        raise PretrainedError(f"{e} Reinstall the package.") from None
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise PretrainedError(f"{path} cannot be read ({why}): reinstall the package") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not all(isinstance(m, dict) for m in models.values()):
        raise PretrainedError(f"{path} is not a manifest of models (an object of one object "
                              "per direction): reinstall the package")
    return models


def available(models_dir: str | os.PathLike = MODELS_DIR) -> list[str]:
    """The directions of the shipped models ("de-en", ...), as the manifest lists them."""
    return sorted(_manifest(Path(models_dir)))


def record(direction: str = "de-en", models_dir: str | os.PathLike = MODELS_DIR) -> dict:
    """What the manifest records of a shipped model: its file and sha256, how it was trained
    (command, epochs, hours, machine) and its scores."""
    models = _manifest(Path(models_dir))
    if not isinstance(direction, str) or direction not in models:
        listed = ", ".join(_echo(m, quote=False) for m in sorted(models))
        raise PretrainedError(f"no shipped model for {_echo(direction)}: the package has "
                              f"{listed or 'none'}")
    return dict(models[direction])


def _echo(value, quote: bool = True) -> str:
    """``value`` as a message shows it: a str of printable ASCII as it is (quoted with
    ``quote``), anything else as ``ascii()`` writes it (a NUL, a lone surrogate or a terminal
    escape as ``\\x00``, ``\\udce4``, ``\\x1b``: printing never fails, nor colours the
    terminal); cut to 60 characters."""
    if isinstance(value, str) and value.isascii() and value.isprintable():
        text = repr(value) if quote else value
    else:
        text = ascii(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pretrained_path(direction: str = "de-en",
                    models_dir: str | os.PathLike = MODELS_DIR) -> Path:
    """The checkpoint file of a shipped model, checked against the manifest's sha256."""
    models_dir = Path(models_dir)
    entry = record(direction, models_dir)
    name = entry.get("file")
    if not isinstance(name, str) or not name or Path(name).name != name or \
            name in (".", "..") or not name.isprintable():
        raise PretrainedError(f"the manifest names no file for the shipped {direction} model "
                              f"(its file is {_echo(name)}, not a plain file name): reinstall "
                              "the package (pip install --force-reinstall convs2s)")
    path = models_dir / name
    if not path.is_file():
        raise PretrainedError(f"the shipped {direction} model's file {path} is missing: "
                              "reinstall the package (pip install --force-reinstall convs2s)")
    try:
        digest = _sha256(path)
    except OSError as e:
        raise PretrainedError(f"the shipped {direction} model's file {path} cannot be read "
                              f"({e.strerror or e}): reinstall the package") from None
    if digest != entry.get("sha256"):
        raise PretrainedError(f"the shipped {direction} model's file {path} is damaged (its "
                              "sha256 is not the one recorded in the manifest): reinstall the "
                              "package (pip install --force-reinstall convs2s)")
    return path


#: What a shipped model's user does about a damaged one: the package brought it, so the
#: package brings it back (never "train again": it is not the user's run).
_REINSTALL = "reinstall the package (pip install --force-reinstall convs2s)"
#: The advice a checkpoint's own error gives a run's owner ("delete it and train again, or use
#: the other checkpoint"), which does not fit a shipped model.
_RUN_ADVICE = re.compile(r"delete it|train again|the other checkpoint|an earlier checkpoint|"
                         r"Pass a |Use a checkpoint|Choose another", re.IGNORECASE)


def _damaged(direction: str, e: Exception) -> PretrainedError:
    """One line for a shipped model's file that cannot be used: what is wrong (the first
    sentences of ``e``, without its advice to a run's owner) and how to get the file back."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(str(e).split()))
    what = " ".join(s for s in sentences if not _RUN_ADVICE.search(s)).rstrip(". ")
    return PretrainedError(f"the shipped {direction} model's file is damaged ({what}): "
                           f"{_REINSTALL}")


def pretrained_checkpoint(direction: str = "de-en",
                          models_dir: str | os.PathLike = MODELS_DIR) -> Checkpoint:
    """A shipped model as a :class:`Checkpoint` (float16 weights, as stored), checked to
    translate the direction its manifest entry is listed under."""
    path = pretrained_path(direction, models_dir)
    try:
        checkpoint = Checkpoint.load(path)
    except CheckpointError as e:
        raise _damaged(direction, e) from None
    pipeline = getattr(checkpoint, "pipeline", None)
    holds = f"{getattr(pipeline, 'src_lang', '?')}-{getattr(pipeline, 'trg_lang', '?')}"
    if holds != direction:
        raise PretrainedError(f"the manifest's {_echo(direction)} entry names {_echo(path.name)}, "
                              f"a model that translates {_echo(holds, quote=False)}, not "
                              f"{_echo(direction, quote=False)}: {_REINSTALL}")
    return checkpoint


def pretrained(direction: str = "de-en", device=None,
               models_dir: str | os.PathLike = MODELS_DIR):
    """A ready :class:`convs2s.run.translator.Translator` for a shipped model ("de-en",
    "en-de": :func:`available`): its model in float32 on ``device`` (the best available by
    default), beam search's length penalty as chosen on validation. :class:`PretrainedError`
    (one line) for a direction the package has no model for, or a missing or damaged file."""
    from convs2s.run.translator import Translator

    checkpoint = pretrained_checkpoint(direction, models_dir)
    try:
        return Translator.from_checkpoint(checkpoint, device=device)
    except CheckpointError as e:  # parts that load but do not fit together
        raise _damaged(direction, e) from None
