"""convs2s.course.length_sweep: the shipped length-sweep records read, put into words and drawn
(every record, each labelled with its device), a prediction compared with them, and the small
sweep measured on this machine in the records' shape."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course import length_sweep, reference  # noqa: E402
from convs2s.course.baselines import RNNAttentionSeq2Seq  # noqa: E402
from convs2s.model import ConvS2S  # noqa: E402


def made_up(device="CPU, 4 cores (x86_64)", device_type="cpu", ratios=(0.9, 1.2, 1.6, 2.5),
            lengths=(8, 16, 32, 64)) -> dict:
    rows = [{"length": n, "sentences": 1024 // n, "convs2s": 1000.0 * r, "rnn": 1000.0,
             "ratio": r} for n, r in zip(lengths, ratios, strict=True)]
    return {"benchmark": "length_sweep", "device": device, "device_type": device_type,
            "threads": 4, "date": "2030-01-02", "tokens_per_batch": 1024, "repeats": 3,
            "training": rows[::-1]}  # out of order on purpose


def test_the_shipped_cpu_record_is_read_and_consistent():
    found = length_sweep.records()
    assert found, "no length_sweep_*.json ships with the package"
    cpu = [r for r in found if r["device_type"] == "cpu"]
    assert cpu, "the CPU record"
    for record in found:
        rows = length_sweep.training_rows(record)
        assert [r["length"] for r in rows] == sorted(r["length"] for r in rows)
        for row in rows:
            assert row["ratio"] == pytest.approx(row["convs2s"] / row["rnn"])
        first = length_sweep.first_length_at(record, 1.5)
        shorter = [r["ratio"] for r in rows if first is None or r["length"] < first]
        assert all(ratio < 1.5 for ratio in shorter)
        if first is not None:
            assert next(r["ratio"] for r in rows if r["length"] == first) >= 1.5


def test_records_reads_every_matching_report_and_leaves_out_other_benchmarks(tmp_path,
                                                                             monkeypatch):
    (tmp_path / "length_sweep_cpu.json").write_text(json.dumps(made_up()))
    (tmp_path / "length_sweep_gpu_h100.json").write_text(json.dumps(made_up(
        "NVIDIA H100 (CUDA 12.4)", "cuda")))
    (tmp_path / "length_sweep_notes.json").write_text(json.dumps({"benchmark": "speed"}))
    monkeypatch.setattr(reference, "RESULTS_DIR", tmp_path)
    found = length_sweep.records()
    assert [r["device_type"] for r in found] == ["cpu", "cuda"]
    assert length_sweep.not_measured_lines(found) == []
    assert length_sweep.not_measured_lines(found[:1]) == [
        "GPU (CUDA): not yet measured"]


@pytest.mark.parametrize("bad", [{}, {"training": []}, {"training": [{"length": 8}]},
                                 {"training": [{"length": 8, "convs2s": 0.0, "rnn": 1.0,
                                                "ratio": 0.0}]}])
def test_a_record_without_usable_training_rows_is_refused(bad):
    with pytest.raises(ValueError, match="training row"):
        length_sweep.training_rows(bad)


def test_label_names_device_threads_and_date():
    assert length_sweep.label(made_up()) == "CPU, 4 cores (x86_64), 4 threads, 2030-01-02"
    assert length_sweep.label({"device_type": "cuda", "threads": 1}) == "cuda, 1 thread"


def test_first_length_at_is_the_shortest_length_reaching_the_factor():
    record = made_up(ratios=(0.9, 1.6, 1.4, 2.5))  # not monotone: the first one counts
    assert length_sweep.first_length_at(record, 1.5) == 16
    assert length_sweep.first_length_at(record, 1.0) == 16
    assert length_sweep.first_length_at(record, 0.5) == 8
    assert length_sweep.first_length_at(record, 3.0) is None


def test_summary_lines_give_every_length_and_the_first_length_at_the_factor():
    lines = length_sweep.summary_lines(made_up(), factor=1.5)
    assert lines[0] == "CPU, 4 cores (x86_64), 4 threads, 2030-01-02:"
    assert lines[1] == "  machine: machine not recorded"
    assert "1,024 target tokens per batch" in lines[2] and "median of 3" in lines[2]
    assert [line.split(" tokens")[0].strip() for line in lines[3:7]] == ["8", "16", "32", "64"]
    assert "ratio 1.60x" in lines[5]
    assert lines[-1].endswith("at least 1.5x the RNN's tokens/s at 32 tokens")
    never = length_sweep.summary_lines(made_up(), factor=9)
    assert never[-1].endswith("at no length from 8 to 64")


def test_compare_words_a_prediction_against_each_record():
    records = [made_up(), made_up("NVIDIA H100", "cuda", ratios=(1.0, 1.7, 3.0, 5.0))]
    assert length_sweep.compare(32, records[:1])[0].endswith(
        "you predicted 32 tokens; ConvS2S first reaches 1.5x at 32 tokens, as you predicted")
    later, sooner = length_sweep.compare(8, records[:1])[0], length_sweep.compare(64, records)
    assert "at 32 tokens (1.60x), a longer length than you predicted; at 8 tokens the ratio is " \
           "0.90x" in later
    assert "a shorter length than you predicted; at 64 tokens the ratio is 2.50x" in sooner[0]
    assert sooner[1].startswith("NVIDIA H100, 4 threads") and "at 16 tokens" in sooner[1]
    assert "reaches 1.5x at no length measured" in length_sweep.compare(
        16, [made_up(ratios=(1, 1, 1, 1))])[0]
    assert length_sweep.compare(None, records) == [
        "no prediction checked yet: write yours into crossover_prediction (Exercise 5), run its "
        "check, then run this cell again"]
    assert "should be a whole number" in length_sweep.compare("64", records)[0]
    assert "should be a whole number" in length_sweep.compare(True, records)[0]


def test_plot_draws_each_record_in_a_row_titled_with_its_device():
    records = [made_up(), made_up("NVIDIA H100 (CUDA 12.4)", "cuda")]
    fig = length_sweep.plot(records, factor=1.5, mark=(13.5, "Multi30k"))
    axes = fig.axes
    assert len(axes) == 4
    for row, record in zip((axes[0:2], axes[2:4]), records, strict=True):
        rate, ratio = row
        for ax in row:
            assert ax.get_title().startswith(length_sweep.label(record))
            assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
            assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32", "64"]
            assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 9
        names = [text.get_text() for text in rate.get_legend().get_texts()]
        assert {"ConvS2S", "GRU + attention", "Multi30k"} <= set(names)
        assert list(rate.containers[0].lines[0].get_ydata()) == [900.0, 1200.0, 1600.0, 2500.0]
        assert list(ratio.containers[0].lines[0].get_ydata()) == [0.9, 1.2, 1.6, 2.5]
        levels = {line.get_label(): line.get_ydata()[0] for line in ratio.lines
                  if line.get_label() in ("1x: equally fast", "1.5x")}
        assert levels == {"1x: equally fast": 1.0, "1.5x": 1.5}
    assert "1,024 target tokens per batch" in fig._suptitle.get_text()
    assert "bars" not in fig._suptitle.get_text()  # medians only: no bars claimed
    plt.close("all")
    with_steps = made_up()
    for row in with_steps["training"]:
        row["convs2s_steps"] = [row["convs2s"] * 0.9, row["convs2s"], row["convs2s"] * 1.2]
        row["rnn_steps"] = [row["rnn"] * 1.1, row["rnn"], row["rnn"]]
    fig = length_sweep.plot([with_steps])
    rate, ratio = fig.axes
    bars = rate.containers[0].lines[2][0].get_segments()  # ConvS2S's: lowest to highest step
    assert [y for seg in bars for y in (seg[0][1], seg[1][1])] == pytest.approx(
        [y for r in (0.9, 1.2, 1.6, 2.5) for y in (900 * r, 1200 * r)])
    ratio_bars = ratio.containers[0].lines[2][0].get_segments()
    assert [y for seg in ratio_bars for y in (seg[0][1], seg[1][1])] == pytest.approx(
        [y for r in (0.9, 1.2, 1.6, 2.5) for y in (0.9 * r / 1.1, 1.2 * r)])
    assert "bars: lowest to highest timed step" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="no length-sweep record"):
        length_sweep.plot([])
    plt.close("all")


def test_measure_runs_the_sweep_on_copies_and_returns_a_record():
    torch.manual_seed(0)
    conv = ConvS2S(30, 30, emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1, max_positions=40,
                   src_pad_idx=1, trg_pad_idx=1)
    rnn = RNNAttentionSeq2Seq(30, 30, emb_dim=8, enc_hid_dim=8, dec_hid_dim=8, src_pad_idx=1,
                              trg_pad_idx=1)
    before = [p.detach().clone() for p in [*conv.parameters(), *rnn.parameters()]]
    record = length_sweep.measure(conv, rnn, [4, 16], tokens=64, src_vocab_size=30,
                                  trg_vocab_size=30, repeats=1, warmup=1)
    after = [*conv.parameters(), *rnn.parameters()]
    assert all(torch.equal(b, a) for b, a in zip(before, after, strict=True))
    rows = length_sweep.training_rows(record)
    assert [(r["length"], r["sentences"]) for r in rows] == [(4, 16), (16, 4)]
    for row in rows:
        assert row["ratio"] == pytest.approx(row["convs2s"] / row["rnn"])
    assert record["device_type"] == "cpu" and record["threads"] == torch.get_num_threads()
    assert record["parameters"]["convs2s"] == sum(p.numel() for p in conv.parameters())
    assert length_sweep.summary_lines(record)[2].startswith("  64 target tokens per batch")
    assert "median (lowest-highest) of 1 timed training steps" in \
        length_sweep.summary_lines(record)[2]
    for row in rows:  # every timed step kept: the spread
        assert row["convs2s_steps"] == [row["convs2s"]] and row["rnn_steps"] == [row["rnn"]]
    machine = record["machine"]
    assert machine["cores"] >= 1 and machine["threads"] == torch.get_num_threads()
    assert machine["seconds"] > 0 and machine["cpu"]
    assert length_sweep.summary_lines(record)[1] == \
        f"  machine: {length_sweep.machine_line(machine)}"
    with pytest.raises(ValueError, match="lengths"):
        length_sweep.measure(conv, rnn, [128], tokens=64, src_vocab_size=30, trg_vocab_size=30)


def test_the_readme_does_not_answer_notebook_07s_crossover_exercise():
    """Notebook 07's Exercise 5 asks where ConvS2S overtakes the RNN: the README (read before the
    notebooks) states the stored sweep's ratio at its longest length only."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    record = json.loads((root / "src/convs2s/course/results/length_sweep_cpu.json").read_text())
    readme = (root / "README.md").read_text(encoding="utf-8")
    rows = sorted(record["training"], key=lambda r: r["length"])
    sweep = [line for line in readme.splitlines() if f"{rows[-1]['ratio']:.2f}×" in line]
    assert sweep  # the headline stays
    for row in rows[:-1]:
        assert not any(f"{row['ratio']:.2f}×" in line for line in sweep), row["length"]
