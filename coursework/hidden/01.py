"""Hidden tests of notebook 01's exercises (autograding runs them after the visible checks).

One function per exercise id; its parameters are the names the learner's answer defines. The
course builder puts the function into the exercise's test cell as ``_hidden_test`` and calls it
with the answer. Grading runs it in a fresh process, in a namespace of its own that holds only
the answer's names (``coursework/fresh_process_grading.py``), so it imports what it uses inside
the function. ``_variant`` holds the values of this copy's version of the exercise
(``tools/variants.py``: the notebook's own numbers, or a class's variant).

Every comparison is the checks' own (``convs2s.course.checks``): the same tolerances, exact
types, the expected value known to the test, not read from the answer. The ``explain`` exercise
(``glu_vs_gtu``) is graded by hand and has none.
"""


def my_glu(my_glu):
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import _core, guarded

    fn = guarded("my_glu", my_glu)
    g = torch.Generator().manual_seed(101)
    for shape, dim in [((3, 10, 2, 4), 1), ((2, 2), -2), ((1, 12), 1), ((2, 4, 6), -1)]:
        h = torch.randn(shape, generator=g)
        _core._assert_close(fn(h, dim), F.glu(h, dim=dim), ref=f"F.glu(h, dim={dim})")
    try:
        fn(torch.randn(3, 7, 4, generator=g), -2)
    except ValueError:
        pass
    else:
        raise AssertionError("an odd size along dim must raise ValueError")


def same_padding_moves(moved_outputs):
    from convs2s.course.checks import nb01

    nb01.accept_same_padding_moves(moved_outputs, _variant["expected"])  # noqa: F821


def my_receptive_field(my_receptive_field):
    from convs2s.course.checks import _core, guarded

    fn = guarded("my_receptive_field", my_receptive_field)
    convs = _variant["convs_per_layer"]  # noqa: F821 - convolutions per layer (1 in the notebook)
    for k, layers in [(9, 6), (4, 10), (2, 15), (13, 1), (3, 20), (3, 1), (5, 2), (1, 4)]:
        _core._assert_equal(_core._assert_int(fn(k, layers)), 1 + convs * layers * (k - 1),
                            name=f"my_receptive_field({k}, {layers})")
