"""What ``torch.compile`` needs, shared by the compiled training step
(``convs2s.run.compiled_training``, ``--compile``) and compiled greedy decoding
(``convs2s.run.compiled_decoding``): its modes, the ones that replay CUDA graphs, and a one-line
refusal where the machine cannot build kernels.
"""

from __future__ import annotations

import torch

from convs2s.system.arguments import brief

#: torch.compile's modes this package accepts (None, not a mode, means eager).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
#: The modes that replay CUDA graphs on a GPU. A graph is recorded once per input shape, and a
#: replay overwrites the previous replay's outputs.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def check_compiler(device: torch.device | str, instead: str) -> None:
    """A ``ValueError`` line where torch.compile cannot build kernels for ``device``: no C++
    compiler for a CPU, no Triton for a CUDA GPU. ``instead`` ends the line: what to do
    without compiling (e.g. ``"train without --compile"``)."""
    device = torch.device(device)
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            raise ValueError("compile on a CUDA GPU needs Triton (pip install triton), which "
                             f"this environment lacks; {instead}.")
    elif device.type == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler
        except ImportError:  # another torch: its own error, if any, comes at the first step
            return
        try:
            get_cpp_compiler()
        except Exception as e:  # torch's InvalidCxxCompiler and kin
            raise ValueError("compile on a CPU needs a C++ compiler (g++ or clang++) on the "
                             f"PATH ({type(e).__name__}); install one or {instead}.") from None


def check_mode(mode) -> str:
    """``mode`` if it is one of :data:`COMPILE_MODES` (a plain ``str``: a NumPy array or
    string compares equal to one but is not one), else a ``ValueError`` line that echoes at
    most 40 characters of it."""
    if type(mode) is not str or mode not in COMPILE_MODES:
        raise ValueError(f"compile must be None or one of {', '.join(COMPILE_MODES)}, not "
                         f"{brief(mode, 40)}.")
    return mode
