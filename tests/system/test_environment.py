"""convs2s.system.environment: quick mode, data folder and device choice."""

import os
from pathlib import Path

import pytest
import torch

from convs2s.system import environment


@pytest.mark.parametrize(
    "value, expected",
    [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("off", False)],
)
def test_quick_mode_reads_env(monkeypatch, value, expected):
    monkeypatch.setenv("CONVS2S_QUICK", value)
    assert environment.quick_mode() is expected


def test_quick_mode_unset_is_full_mode(monkeypatch):
    monkeypatch.delenv("CONVS2S_QUICK", raising=False)
    assert environment.quick_mode() is False


def test_quick_mode_rejects_garbage(monkeypatch):
    monkeypatch.setenv("CONVS2S_QUICK", "maybe")
    with pytest.raises(ValueError, match="CONVS2S_QUICK='maybe'.*set it to 1"):
        environment.quick_mode()


def test_data_dir_prefers_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/else")
    assert environment.data_dir() == tmp_path.resolve()


def test_data_dir_falls_back_to_xdg_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("CONVS2S_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert environment.data_dir() == tmp_path / "convs2s" / "multi30k"
    assert not (tmp_path / "convs2s").exists(), "data_dir() must not create folders"


def test_data_dir_default_is_home_cache(monkeypatch):
    monkeypatch.delenv("CONVS2S_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert environment.data_dir() == Path.home() / ".cache" / "convs2s" / "multi30k"


def test_device_auto_and_verbose(monkeypatch, capsys):
    monkeypatch.delenv("CONVS2S_DEVICE", raising=False)
    dev = environment.device(verbose=True)
    expected = "cuda" if torch.cuda.is_available() else None
    if expected:
        assert dev.type == expected
    assert f"device: {dev}" in capsys.readouterr().out


def test_device_forced(monkeypatch):
    monkeypatch.setenv("CONVS2S_DEVICE", "cpu")
    assert environment.device() == torch.device("cpu")


def test_device_forced_garbage_is_clear(monkeypatch):
    monkeypatch.setenv("CONVS2S_DEVICE", "gpu please")
    with pytest.raises(ValueError,
                       match="CONVS2S_DEVICE='gpu please'.*use cpu, cuda.*Unset CONVS2S_DEVICE"):
        environment.device()


def test_describe_device_cpu():
    described = environment.describe_device("cpu")
    assert described.startswith("CPU") and f"{os.cpu_count()} cores" in described


def test_cpu_model_is_read_from_cpuinfo():
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7B13\n\n"
    assert environment.cpu_model(cpuinfo) == "AMD EPYC 7B13"
    # a cpuinfo without a model name (some ARM kernels) names no model rather than guessing
    assert environment.cpu_model("processor\t: 0\nBogoMIPS\t: 50.00\n") == ""


@pytest.mark.parametrize("where", ["two links", "a link to itself, inside the path"])
def test_a_data_dir_on_a_symlink_loop_is_one_line(monkeypatch, tmp_path, where):
    a, b = tmp_path / "a", tmp_path / "b"
    if where == "two links":
        a.symlink_to(b)
        b.symlink_to(a)
        value = str(a)
    else:
        a.symlink_to(a)
        value = str(a / "multi30k")
    monkeypatch.setenv("CONVS2S_DATA_DIR", value)
    with pytest.raises(ValueError) as e:
        environment.data_dir()
    assert str(e.value) == (f"CONVS2S_DATA_DIR={value!r} is a symbolic link loop (following "
                            "its links leads back to one of them); set it to a folder.")


def test_a_data_dir_that_does_not_exist_yet_is_named_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVS2S_DATA_DIR", "later/multi30k")
    assert environment.data_dir() == tmp_path.resolve() / "later" / "multi30k"
