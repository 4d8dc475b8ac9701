"""The model layer: ConvS2S itself and how it is searched and trained (torch only).

- :mod:`~convs2s.model.layers`: ``ConvGLUBlock`` (convolution + gated linear unit), init,
  weight norm
- :mod:`~convs2s.model.encoder` / :mod:`~convs2s.model.attention` / :mod:`~convs2s.model.decoder`:
  the model's three parts
- :mod:`~convs2s.model.convs2s`: ``ConvS2S``, the whole translator, and ``ConvS2SConfig``, its
  options
- :mod:`~convs2s.model.search`: ``greedy_decode`` and ``beam_search`` (incremental)
- :mod:`~convs2s.model.loss`: the next-token loss the trainer minimises
- :mod:`~convs2s.model.rnn` / :mod:`~convs2s.model.variants`: the recurrent baseline (notebook 07)
  and ConvS2S's variants (notebook 08)

Nothing here knows the data, the run folders or the notebooks.
"""

from convs2s.model.attention import Attention
from convs2s.model.convs2s import ConvS2S, ConvS2SConfig, count_parameters
from convs2s.model.decoder import Decoder
from convs2s.model.encoder import Encoder, EncoderOut
from convs2s.model.layers import ConvGLUBlock
from convs2s.model.search import beam_search, greedy_decode

__all__ = ["Attention", "ConvGLUBlock", "ConvS2S", "ConvS2SConfig", "Decoder", "Encoder",
           "EncoderOut", "beam_search", "count_parameters", "greedy_decode"]
