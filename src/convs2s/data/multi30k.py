"""Multi30k's files: which files a direction needs, their sha256 sums, download, reading.

:func:`load_multi30k` reads (and, when they are missing, downloads and sha256-checks) the raw
Multi30k task-1 files of one direction (any two of English, German, French and Czech; German
to English by default) and returns ``{"train", "valid", "test"}`` lists of ``(source, target)``
string pairs. :func:`load_pairs` reads any parallel pair of files, :func:`load_lines` one file.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
import shutil
import stat
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Sequence
from pathlib import Path

from convs2s.data.tokenizers import nfc
from convs2s.system.atomic_files import atomic_write, remove_stale_temps
from convs2s.system.environment import data_dir


class DataError(RuntimeError):
    """A data file is missing, cannot be downloaded, or is corrupted or malformed.

    Its message is one line naming the file and what to do. In IPython (Jupyter, Colab) it shows
    as that line alone, ``DataError: <message>``, not as a traceback through the loader (and the
    network error under it) that ends in it; the cell still fails, so "Run All" stops there.
    """

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of the traceback (its hook for exceptions that say it all)."""
        return [f"{type(self).__name__}: {self}"]


# --------------------------------------------------------------------------------------------
# Multi30k files
# --------------------------------------------------------------------------------------------

#: Where the raw Multi30k task-1 files are downloaded from; ``CONVS2S_DATA_URL`` overrides it
#: (any URL ``urllib`` opens, including ``file:///some/folder/``).
DEFAULT_DATA_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"

#: split name -> file stem. ``test`` is ``test_2016_flickr``, the test set of published results.
MULTI30K_FILES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}

#: The languages of Multi30k task 1; every line of one split's four files is the same caption.
LANGUAGES = ("en", "de", "fr", "cs")
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}

#: sha256 of every file the loader reads; a file that does not match is never used.
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}


#: The largest file a download may bring: each Multi30k file is under 1 MB, so a server sending
#: more is not sending the file.
MAX_DOWNLOAD_BYTES = 32 << 20
#: A download that receives nothing for this long has stalled (urllib's socket timeout) ...
DOWNLOAD_STALL_SECONDS = 60.0
#: ... and one that takes longer than this in all is given up (a server dripping bytes).
DOWNLOAD_DEADLINE_SECONDS = 600.0


def _offline_hint(names) -> str:
    return (
        "If this machine cannot download, copy the Multi30k files ("
        + ", ".join(names)
        + ") into a folder and set CONVS2S_DATA_DIR to it: in a notebook (on Colab, e.g. for "
        "files uploaded to /content/multi30k) run `%env CONVS2S_DATA_DIR=/content/multi30k` or "
        "`os.environ[\"CONVS2S_DATA_DIR\"] = \"/content/multi30k\"` in a cell, then run this "
        "cell again; in a shell, `export CONVS2S_DATA_DIR=/path/to/folder`."
    )


def multi30k_files(src: str = "de", trg: str = "en") -> list[str]:
    """The six file names one direction needs (three splits, two languages), checked."""
    check_direction(src, trg)
    return [f"{stem}.{lang}.gz" for stem in MULTI30K_FILES.values() for lang in (src, trg)]


# (resolved path, size, mtime_ns) -> sha256 of files already checked in this process.
_VERIFIED: dict[tuple[str, int, int], str] = {}


def data_url() -> str:
    """The base URL downloads come from: ``CONVS2S_DATA_URL`` if set, else the Multi30k repo."""
    url = os.environ.get("CONVS2S_DATA_URL", "").strip() or DEFAULT_DATA_URL
    return url if url.endswith("/") else url + "/"


def _sha256_file(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def _check_sha256(path: Path, expected: str) -> None:
    actual = _sha256_file(path)
    if actual != expected:
        raise DataError(
            f"{path} is corrupted or not the expected Multi30k file (truncated download?): "
            f"its sha256 is {actual}, expected {expected}. Delete it so the loader downloads it "
            f"again, or set CONVS2S_DATA_DIR to a folder that has the correct files."
        )


def _download(name: str, root: Path, expected: str, names: list[str]) -> None:
    """Download ``name`` into ``root``; nothing is created there unless the download succeeds.

    The bytes first go to an unnamed temporary file (it vanishes with the process, whatever
    happens) and are sha256-checked; only then is ``root`` created if needed and the file
    written into it atomically (a ``.<name>.<random>.part`` file, renamed once complete).
    """
    from tqdm.auto import tqdm

    url = data_url() + name

    def failed(reason) -> DataError:
        reason = " ".join(str(reason).split())  # one line, whatever the network layer said
        return DataError(f"Could not download Multi30k file {name} from {url} into {root}: "
                         f"{reason}. {_offline_hint(names)}")

    too_big = (f"the server sends more than {MAX_DOWNLOAD_BYTES:,} bytes, far more than the "
               "file has (each Multi30k file is under 1 MB); nothing was saved")
    with tempfile.TemporaryFile() as spool:
        h = hashlib.sha256()
        start, size = time.monotonic(), 0
        try:
            with urllib.request.urlopen(url, timeout=DOWNLOAD_STALL_SECONDS) as resp:
                total = resp.headers.get("Content-Length")
                total = int(total) if total and total.isdigit() else None
                if total is not None and total > MAX_DOWNLOAD_BYTES:
                    raise failed(too_big)
                with tqdm(
                    total=total,
                    unit="B",
                    unit_scale=True,
                    desc=f"downloading {name}",
                    leave=False,
                ) as bar:
                    read = getattr(resp, "read1", resp.read)  # what has come, so far
                    for block in iter(lambda: read(1 << 16), b""):
                        size += len(block)
                        if size > MAX_DOWNLOAD_BYTES:
                            raise failed(too_big)
                        if time.monotonic() - start > DOWNLOAD_DEADLINE_SECONDS:
                            raise failed(f"it took more than {DOWNLOAD_DEADLINE_SECONDS:g} s "
                                         "(a very slow connection?)")
                        spool.write(block)
                        h.update(block)
                        bar.update(len(block))
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            if isinstance(reason, TimeoutError):
                reason = (f"nothing arrived for {DOWNLOAD_STALL_SECONDS:g} s (the download "
                          "stalled)")
            raise failed(reason) from e
        actual = h.hexdigest()
        if actual != expected:
            raise DataError(
                f"The download of Multi30k file {name} from {url} has sha256 {actual}, expected "
                f"{expected}; it was not saved in {root}. Try again later, or set "
                f"CONVS2S_DATA_DIR to a folder that already has the correct files."
            )
        try:
            root.mkdir(parents=True, exist_ok=True)
            spool.seek(0)
            atomic_write(root / name, lambda out: shutil.copyfileobj(spool, out), suffix=".part")
        except OSError as e:
            raise DataError(
                f"Cannot write the downloaded {name} into the data folder {root}: {e}. Free some "
                f"space or make the folder writable, or set CONVS2S_DATA_DIR to another folder."
            ) from e


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when it exists but is no readable regular file ("a folder", ...)."""
    try:
        mode = path.stat().st_mode  # follows symbolic links
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop (following its links leads back to one of them)"
        return None  # not there (a dangling link too): a download replaces it
    if stat.S_ISDIR(mode):
        return "a folder"
    if not stat.S_ISREG(mode):
        return "not a regular file (a device, FIFO or socket)"
    return None


def _ensure_file(name: str, root: Path, download: bool, names: list[str] | None = None) -> Path:
    path = root / name
    expected = MULTI30K_SHA256[name]
    odd = _not_a_file(path)
    if odd is not None:
        raise DataError(f"{path} is {odd}, not the Multi30k file {name}. Remove it (the loader "
                        "then downloads the file), or set CONVS2S_DATA_DIR to a folder that has "
                        "the files.")
    if not path.is_file():
        if not download:
            raise DataError(
                f"Multi30k file {name} is not in {root} and download=False. Set CONVS2S_DATA_DIR "
                f"to a folder that has the files, or call load_multi30k(download=True)."
            )
        _download(name, root, expected, names or [name])
    _check_sha256(path, expected)
    return path


def check_direction(src: str, trg: str) -> tuple[str, str]:
    """``(src, trg)`` if both are Multi30k languages and differ, else one-line ``ValueError``."""
    for side, lang in (("source", src), ("target", trg)):
        if lang not in LANGUAGES:
            raise ValueError(
                f"Multi30k has no {side} language {lang!r}; choose one of "
                f"{', '.join(LANGUAGES)} (e.g. --src de --trg en)."
            )
    if src == trg:
        raise ValueError(f"The source and target language are both {src!r}; choose two "
                         f"different languages of {', '.join(LANGUAGES)}.")
    return src, trg


def load_multi30k(
    root: str | os.PathLike | None = None, *, download: bool = True, src: str = "de",
    trg: str = "en"
) -> dict[str, list[tuple[str, str]]]:
    """The Multi30k task-1 splits of one direction as raw ``(source, target)`` string pairs.

    ``src`` and ``trg`` are two different languages of :data:`LANGUAGES` (``en``, ``de``,
    ``fr``, ``cs``); the default is German to English, ``(german, english)`` pairs. An unknown
    language raises ``ValueError``. Swapping ``src`` and ``trg`` swaps every pair.

    Returns ``{"train": ..., "valid": ..., "test": ...}`` with 29,000 / 1,014 / 1,000 pairs
    (``test`` is ``test_2016_flickr``). Only the six files of the direction are read (and, if
    missing, downloaded). ``root`` defaults to :func:`convs2s.system.environment.data_dir`
    (``CONVS2S_DATA_DIR`` when set). Files missing there are downloaded from
    ``CONVS2S_DATA_URL`` (default :data:`DEFAULT_DATA_URL`) unless ``download=False``. Every
    file, downloaded or already there, must match its sha256 in :data:`MULTI30K_SHA256`;
    anything wrong raises :class:`DataError` naming the file (its absolute path) and what to do.
    A relative ``root`` is taken relative to the current folder. The folder is created only
    when a download into it succeeded; half-written downloads a killed run left there are
    removed first.
    """
    names = multi30k_files(src, trg)
    root = _absolute(root) if root is not None else _absolute(data_dir())
    if root.exists() and not root.is_dir():
        raise DataError(f"The Multi30k data folder {root} exists but is not a folder.")
    # downloads an earlier, killed run left half-written (.<file>.<random>.part), any language
    remove_stale_temps(root, targets=list(MULTI30K_SHA256), suffixes=(".part",))
    splits = {}
    for split, stem in MULTI30K_FILES.items():
        source = _ensure_file(f"{stem}.{src}.gz", root, download, names)
        target = _ensure_file(f"{stem}.{trg}.gz", root, download, names)
        splits[split] = load_pairs(source, target)
    return splits


def fetch_multi30k(
    root: str | os.PathLike | None = None, *, languages: Sequence[str] = LANGUAGES,
    download: bool = True
) -> list[Path]:
    """Make sure the files of ``languages`` (default: all four, twelve files) are in ``root``.

    Each file is downloaded if missing (unless ``download=False``) and sha256-checked, as
    :func:`load_multi30k` does; returns their paths. ``ValueError`` for an unknown language.
    """
    for lang in languages:
        if lang not in LANGUAGES:
            raise ValueError(f"Multi30k has no language {lang!r}; choose from "
                             f"{', '.join(LANGUAGES)}.")
    names = [f"{stem}.{lang}.gz" for stem in MULTI30K_FILES.values() for lang in languages]
    root = _absolute(root) if root is not None else _absolute(data_dir())
    if root.exists() and not root.is_dir():
        raise DataError(f"The Multi30k data folder {root} exists but is not a folder.")
    remove_stale_temps(root, targets=list(MULTI30K_SHA256), suffixes=(".part",))
    return [_ensure_file(name, root, download, names) for name in names]


def _absolute(path: str | os.PathLike) -> Path:
    """``path`` made absolute (``~`` expanded, ``..`` resolved), so messages name one folder;
    :class:`DataError` for a symbolic link loop."""
    path = Path(path).expanduser()
    try:
        return path.resolve(strict=True)
    except (RuntimeError, OSError) as e:  # RuntimeError: a link loop, before Python 3.13
        if isinstance(e, RuntimeError) or e.errno == errno.ELOOP:
            raise DataError(f"{path.absolute()} is a symbolic link loop (following its links "
                            "leads back to one of them).") from None
    return path.resolve()  # not there (yet)


def _read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file (plain or gzip), without their line endings."""
    path = _absolute(path)
    odd = _not_a_file(path)
    if odd is not None:
        raise DataError(f"Cannot read {path}: it is {odd}, not a text file.")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"Cannot read {path}: {e}") from e
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise DataError(
                f"{path} is a truncated or corrupted gzip file ({e}). Delete it and download it "
                f"again, or set CONVS2S_DATA_DIR to a folder that has intact files."
            ) from e
    elif path.suffix == ".gz":
        raise DataError(f"{path} ends in .gz but is not a gzip file.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path} is not valid UTF-8 text: byte {raw[e.start : e.start + 1]!r} on line {line} "
            f"({e.reason})."
        ) from e
    if text.startswith("\ufeff"):  # a byte order mark is encoding, not text
        text = text[1:]
    # split on "\n" only: str.splitlines() would also split inside a sentence on \x0b, \x1c,
    # \u2028 and friends, and break the line-by-line alignment of the two languages.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [nfc(line[:-1] if line.endswith("\r") else line) for line in lines]


def load_lines(path: str | os.PathLike) -> list[str]:
    """The lines of one UTF-8 text file (plain or .gz), read as :func:`load_pairs` reads each
    side: line endings stripped, NFC; :class:`DataError` (one line) for a missing or unreadable
    file, bad gzip or non-UTF-8 text."""
    return _read_lines(path)


def load_pairs(de_path: str | os.PathLike, en_path: str | os.PathLike) -> list[tuple[str, str]]:
    """Line-aligned ``(german, english)`` pairs from two parallel UTF-8 files (plain or .gz).

    Line endings are stripped and the text is normalised to NFC (see :func:`nfc`); it is
    otherwise kept as it is (no lowercasing, no whitespace stripping). Different line counts,
    bad gzip or non-UTF-8 raise :class:`DataError`.
    """
    de_path, en_path = _absolute(de_path), _absolute(en_path)
    de, en = _read_lines(de_path), _read_lines(en_path)
    if len(de) != len(en):
        raise DataError(
            f"{de_path} has {len(de)} lines but {en_path} has {len(en)}; the two sides of a "
            f"parallel corpus must have one line per sentence pair."
        )
    return list(zip(de, en, strict=True))


