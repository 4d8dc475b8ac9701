"""The course layer: what serves the notebooks and nothing else, one module per idea.

- ``diagrams``: the architecture pictures every notebook opens with.
- ``stacks``: small conv + GLU stacks, and the one loop that runs them layer by layer.
- ``receptive_field``: how far a stack sees, path lengths between words, sequential steps.
- ``dependency``: what each output can see, measured with autograd; perturbations.
- ``gates``: GLU against GTU through a deep stack.
- ``normalisation``: §3.4-3.5 (variance through stacks, scaled gradients, initialisation) and
  weight normalisation, measured.
- ``readout``, ``worked_attention``, ``attention_maps``: the encoder's keys and values, attention
  by hand, and a model's attention per layer.
- ``analysis``, ``baselines``: measuring trained translators, and the recurrent baseline.
- ``length_sweep``: ConvS2S against the recurrent baseline over sentence length (notebook 07),
  from the shipped records (``reference``).
- ``widgets``: every notebook widget declared once (controls, labels, ranges, what it draws),
  the builder the notebooks make them with, and what the course's website reads.
- ``checks``: the exercises' checks.
- ``figure_data``: plumbing: a figure's numbers stored beside its PNG in a notebook's output
  (the website draws such figures again for a phone).
"""
