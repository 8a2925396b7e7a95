"""The wording features a head may read beside the embedding."""

from __future__ import annotations

import math

from system1.core import lexical
from system1.core.command_traits import traits
from system1.providers.base import plain_text


def test_the_same_context_gets_the_same_features_of_unit_length():
    first = lexical.features({"note": "git push --force origin main"})
    assert first == lexical.features({"note": "git push --force origin main"})
    assert math.isclose(sum(v * v for v in first.values()), 1.0)
    assert all(0 <= bucket < lexical.DIM for bucket in first)


def test_a_command_field_adds_its_traits_at_full_weight_beside_the_words():
    as_note = lexical.features({"note": "rm -rf ./src"})
    as_command = lexical.features({"command": "rm -rf ./src"})
    full = [value for value in as_command.values() if value == 1.0]
    assert len(full) == len(traits("rm -rf ./src")) == 3  # deletes, recursive, forced
    assert math.isclose(sum(v * v for v in as_command.values()), 1.0 + len(full))
    assert 1.0 not in as_note.values()


def test_flags_and_case_are_read_and_a_flag_changes_the_features():
    assert lexical.features("RM -RF build") == lexical.features("rm -rf build")
    assert lexical.features("rm -rf build") != lexical.features("rm -i build")


def test_no_text_has_no_features():
    assert lexical.features(None) == {} and lexical.features("") == {} and lexical.features({}) == {}


def test_an_object_is_read_as_key_value_lines():
    assert plain_text({"prompt": "hi", "n": [1, "ü"]}) == 'prompt: hi\nn: [1, "ü"]'
