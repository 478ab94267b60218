"""A measurement taken again on a later day supersedes the older one without a change word (issue 16, branch
``more16``). Held-out cases in original wording are in bench/supersession_heldout.py (rule ``remeasure``)."""

from __future__ import annotations

from support.sqlite_memory import local_search

from symi_memory.supersession import remeasured, salient, split_lines

FILLER = {
    "memory/2026-01-06.md": "# 2026-01-06\n\n- Paid the council tax; the second instalment is due in March.\n",
    "memory/2026-02-19.md": "# 2026-02-19\n\n- Swapped the winter tyres for all-season ones at the garage.\n",
    "memory/2026-03-27.md": "# 2026-03-27\n\n- Book club: we read the lighthouse novel; next time it is Ines's pick.\n",
    "memory/2026-04-30.md": "# 2026-04-30\n\n- Booked the ferry to the island for the long weekend.\n",
}


def _line(path: str, text: str):  # type: ignore[no-untyped-def]
    return split_lines(path, 1, text, None)[0]


def test_a_later_day_measuring_the_same_quantity_again_is_a_remeasurement() -> None:
    old = _line("memory/2026-02-01.md", "- Weighed Mochi on the scale: 9.8 kg.")
    assert remeasured(old, _line("memory/2026-04-10.md", "- Mochi at the vet: ears clean, 10.1 kg."))
    # The same day, the same value, a far-off value of the unit, or a clock time: not a remeasurement.
    assert not remeasured(old, _line("memory/2026-02-01.md", "- Mochi after his walk: 9.6 kg."))
    assert not remeasured(old, _line("memory/2026-04-10.md", "- Mochi at the vet: ears clean, 9.8 kg."))
    assert not remeasured(old, _line("memory/2026-04-10.md", "- Mochi's food: a bag of 14.5 kg."))
    assert not remeasured(_line("memory/2026-02-01.md", "- Walk Mochi at 07:15."),
                          _line("memory/2026-04-10.md", "- Walk Mochi at 07:45."))
    # The newer line must name the question's subject when the older one does.
    assert remeasured(old, _line("memory/2026-04-10.md", "- Mochi at the vet: 10.1 kg."), names=frozenset({"mochi"}))
    assert not remeasured(old, _line("memory/2026-04-10.md", "- Kuro at the vet: 10.1 kg."), names=frozenset({"mochi"}))


def test_a_value_labelled_as_another_thing_measured_is_no_remeasurement() -> None:
    old = _line("memory/2026-01-10.md", "- Measured Fenna against the hallway door: 112 cm tall.")
    asked = salient("How tall is Fenna?")
    # The newer value's own label (the word before it in its clause, or right after its unit) names another thing.
    assert not remeasured(old, _line("memory/2026-05-02.md", "- School games: Fenna jumped 117 cm in the long jump."),
                          asked=asked)
    assert not remeasured(old, _line("memory/2026-05-02.md", "- Fenna's new bunk bed is 118 cm wide."), asked=asked)
    # Alone in its clause, or labelled by the older line's or the question's words or a reading verb: measured again.
    assert remeasured(old, _line("memory/2026-05-02.md", "- Fenna at the GP: ears fine, 117 cm, growing fast."),
                      asked=asked)
    assert remeasured(old, _line("memory/2026-05-02.md", "- Fenna is 117 cm tall at the GP."), asked=asked)
    assert remeasured(old, _line("memory/2026-05-02.md", "- The GP measured Fenna: height 117 cm."),
                      asked=salient("What is Fenna's height?"))
    assert remeasured(old, _line("memory/2026-05-02.md", "- The school nurse measured 117 cm for Fenna."),
                      asked=asked)


def _marked(tmp_path, notes: dict[str, str], query: str, old: str):  # type: ignore[no-untyped-def]
    hits = [h for h in local_search(tmp_path, {**FILLER, **notes}, query) if h["path"] == old]
    assert hits
    return hits[0].get("supersededBy")


OLD = "# 2026-02-01\n\n- Weighed Mochi (our shiba) on the bathroom scale: 9.8 kg.\n"


def test_a_later_vet_check_with_another_weight_marks_the_old_weight_replaced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # No change word and no "weigh" in the newer line: the value in the same unit, on a later day, is what says so.
    got = _marked(tmp_path, {"memory/2026-02-01.md": OLD,
                             "memory/2026-04-10.md": "# 2026-04-10\n\n- Mochi at the vet for his booster: ears clean, "
                                                     "10.1 kg, claws trimmed.\n"},
                  "How much does Mochi weigh?", "memory/2026-02-01.md")
    assert got == {"path": "memory/2026-04-10.md", "startLine": 3, "endLine": 3}


def test_another_dog_weighed_on_the_same_scale_leaves_the_old_weight_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/2026-02-01.md": OLD,
                             "memory/2026-04-10.md": "# 2026-04-10\n\n- Weighed Kuro (the neighbours' shiba) on our "
                                                     "bathroom scale: 10.1 kg.\n"},
                  "How much does Mochi weigh?", "memory/2026-02-01.md")
    assert got is None


def test_a_jump_in_the_same_unit_leaves_the_old_height_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Same unit, a close value, a later day, the child named: but the newer value is a jump, not a height.
    got = _marked(tmp_path, {"memory/2026-01-10.md": "# 2026-01-10\n\n- Measured Fenna against the hallway door: "
                                                     "112 cm tall.\n",
                             "memory/2026-05-02.md": "# 2026-05-02\n\n- School games: Fenna jumped 117 cm in the "
                                                     "long jump, third of her class.\n"},
                  "How tall is Fenna?", "memory/2026-01-10.md")
    assert got is None


def test_the_same_value_written_with_another_decimal_is_no_remeasurement() -> None:
    # "12.90 kg" has the shape of "12.9 kg" (digit runs are one shape) and is not the same string: it restates it.
    old = _line("memory/2026-02-01.md", "- Weighed Biscuit on the scale: 12.9 kg.")
    assert not remeasured(old, _line("memory/2026-04-10.md", "- Biscuit at the vet: ears clean, 12.90 kg."))
    assert remeasured(old, _line("memory/2026-04-10.md", "- Biscuit at the vet: ears clean, 13.20 kg."))


def test_a_restated_weight_leaves_the_old_weight_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/2026-02-01.md": "# 2026-02-01\n\n- Weighed Biscuit (our beagle) on the bathroom "
                                                     "scale: 12.9 kg.\n",
                             "memory/2026-04-10.md": "# 2026-04-10\n\n- Biscuit at the vet for his booster: ears "
                                                     "clean, 12.90 kg, claws trimmed.\n"},
                  "How much does Biscuit weigh?", "memory/2026-02-01.md")
    assert got is None


def test_another_animal_weighed_leaves_the_unnamed_subjects_weight_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The question names its subject in lower case (no name guard): the two lines share only "weighed", a word that
    # reads a value off, not the puppy the question and the older line are about.
    got = _marked(tmp_path, {"memory/2026-02-01.md": "# 2026-02-01\n\n- Weighed the puppy on the bathroom scale: "
                                                     "8.1 kg.\n",
                             "memory/2026-04-10.md": "# 2026-04-10\n\n- Weighed the neighbours' old labrador on our "
                                                     "scale, for their vet: 9.4 kg.\n"},
                  "How much does the puppy weigh?", "memory/2026-02-01.md")
    assert got is None


def test_a_value_after_a_colon_is_labelled_by_the_words_before_it() -> None:
    old = _line("memory/2026-01-10.md", "- Measured Fenna against the hallway door: 112 cm tall.")
    asked = salient("How tall is Fenna?")
    # "the desk height:" names another thing measured; "Fenna at the GP:" names the child.
    assert not remeasured(old, _line("memory/2026-05-02.md", "- Built Fenna's new desk; the desk height: 115 cm."),
                          asked=asked)
    assert remeasured(old, _line("memory/2026-05-02.md", "- Fenna at the GP: 115 cm."), asked=asked)


def test_a_desks_height_leaves_the_childs_height_unmarked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    got = _marked(tmp_path, {"memory/2026-01-10.md": "# 2026-01-10\n\n- Measured Fenna against the hallway door: "
                                                     "112 cm tall.\n",
                             "memory/2026-05-02.md": "# 2026-05-02\n\n- Built Fenna's new desk; the desk height: "
                                                     "115 cm, adjustable later.\n"},
                  "How tall is Fenna?", "memory/2026-01-10.md")
    assert got is None
