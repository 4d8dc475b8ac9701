"""The run layer: training, checkpoints, the final choices, translating and evaluating.

- :mod:`~convs2s.run.presets`: ``Preset`` (one training configuration) and ``PRESETS``
- :mod:`~convs2s.run.train`: the training loop (``python -m convs2s.train`` / ``convs2s-train``);
  what it is built from: :mod:`~convs2s.run.prepare` (data, model, optimizer),
  :mod:`~convs2s.run.run_folder` (the ``--out`` folder), :mod:`~convs2s.run.resume`
  (``--resume``), :mod:`~convs2s.run.distributed` (``torchrun``)
- :mod:`~convs2s.run.checkpoint`: ``Checkpoint``, the one place that reads and checks a file
- :mod:`~convs2s.run.final_choices`: checkpoint averaging and the length penalty, chosen on
  validation
- :mod:`~convs2s.run.translator`: ``Translator`` (text in, text out);
  :mod:`~convs2s.run.translate_cli` its command line
- :mod:`~convs2s.run.evaluate`: BLEU and perplexity of a checkpoint on a split;
  :mod:`~convs2s.run.metrics`: the BLEU scores
- :mod:`~convs2s.run.precision`: mixed precision on a GPU, and the optimizer step
"""
