"""Calibration maths, the fits file format, and which fit applies."""

from __future__ import annotations

import json
import math
import random

import pytest

from system1.core.calibration import Calibrator, FitsFile, temper


def test_temperature_one_changes_nothing():
    probabilities = {"a": 0.7, "b": 0.2, "c": 0.1}
    assert temper(probabilities, 1.0) == pytest.approx(probabilities)


def test_temperature_rescales_by_power_and_renormalises():
    # T = 0.5 squares: .8^2 / (.8^2 + .2^2) = .64 / .68
    assert temper({"a": 0.8, "b": 0.2}, 0.5)["a"] == pytest.approx(0.64 / 0.68)
    # T = 2 takes square roots: sqrt(.9) / (sqrt(.9) + sqrt(.1)) = 0.75
    assert temper({"a": 0.9, "b": 0.1}, 2.0)["a"] == pytest.approx(0.75)


def test_zero_probabilities_stay_zero():
    assert temper({"a": 1.0, "b": 0.0}, 3.0) == {"a": 1.0, "b": 0.0}


def test_a_temperature_never_changes_the_winner():
    rng = random.Random(7)
    for _ in range(500):
        raw = [rng.random() for _ in range(rng.randint(2, 12))]
        probabilities = {f"o{i}": p / sum(raw) for i, p in enumerate(raw)}
        temperature = math.exp(rng.uniform(-3, 3))
        rescaled = temper(probabilities, temperature)
        assert max(rescaled, key=rescaled.get) == max(probabilities, key=probabilities.get)
        assert sum(rescaled.values()) == pytest.approx(1.0)


def write_fits(path, fits, version=1):
    path.write_text(json.dumps({"format": "system1-calibration", "version": version, "fits": fits}))
    return path


def test_a_question_fit_wins_over_an_option_count_fit(tmp_path):
    shipped = write_fits(tmp_path / "shipped.json", [
        {"provider": "laya", "model": "typed-decisions", "question": "Q", "temperature": 0.3},
        {"provider": "laya", "model": "typed-decisions", "n_options": 3, "temperature": 0.9},
    ])
    calibrator = Calibrator.load(None, shipped)
    assert calibrator.lookup("laya", "typed-decisions", "Q", 3).temperature == 0.3
    assert calibrator.lookup("laya", "typed-decisions", "other", 3).temperature == 0.9
    assert calibrator.lookup("laya", "typed-decisions", "other", 4) is None


def test_an_option_count_range_serves_every_count_it_holds_and_no_other(tmp_path):
    shipped = write_fits(tmp_path / "s.json", [
        {"provider": "p", "model": "m", "n_options": 2, "n_options_max": 3, "temperature": 6.0},
        {"provider": "p", "model": "m", "n_options": 4, "n_options_max": 12, "temperature": 1.2},
        {"provider": "p", "model": "m", "unseen": True, "temperature": 1.6},
    ], version=4)
    calibrator = Calibrator.load(None, shipped)
    assert [calibrator.lookup("p", "m", "new", n).temperature for n in (2, 3, 4, 12, 13)] == [6.0, 6.0, 1.2, 1.2, 1.6]
    assert calibrator.coverage("p")["m"]["option_counts"] == [[2, 3], [4, 12]]


def test_an_older_file_fits_one_option_count_only(tmp_path):
    shipped = write_fits(tmp_path / "s.json", [{"provider": "p", "model": "m", "n_options": 3, "temperature": 0.9}], version=3)
    calibrator = Calibrator.load(None, shipped)
    assert calibrator.lookup("p", "m", "new", 3).temperature == 0.9
    assert calibrator.lookup("p", "m", "new", 4) is None


def test_local_option_count_ranges_replace_the_shipped_ones_for_that_engine(tmp_path):
    shipped = write_fits(tmp_path / "s.json", [{"provider": "p", "model": "m", "n_options": 2, "n_options_max": 12, "temperature": 2.0}], version=4)
    local = write_fits(tmp_path / "l.json", [{"provider": "p", "model": "m", "n_options": 2, "n_options_max": 3, "temperature": 5.0}], version=4)
    calibrator = Calibrator.load(local, shipped)
    assert calibrator.lookup("p", "m", "new", 3).temperature == 5.0
    assert calibrator.lookup("p", "m", "new", 8) is None  # the local set has no range for eight


def test_local_fits_take_precedence_over_shipped_ones(tmp_path):
    shipped = write_fits(tmp_path / "shipped.json", [
        {"provider": "laya", "model": "m", "question": "Q", "temperature": 0.3},
        {"provider": "laya", "model": "m", "n_options": 2, "temperature": 0.4},
    ])
    local = write_fits(tmp_path / "local.json", [{"provider": "laya", "model": "m", "question": "Q", "temperature": 2.0}])
    calibrator = Calibrator.load(local, shipped)
    assert calibrator.lookup("laya", "m", "Q", 2).temperature == 2.0
    assert calibrator.lookup("laya", "m", "R", 2).temperature == 0.4
    assert [s["source"] for s in calibrator.summary()] == ["local", "shipped"]


def test_a_fit_for_another_provider_or_model_is_ignored(tmp_path):
    shipped = write_fits(tmp_path / "s.json", [{"provider": "laya", "model": "english", "n_options": 2, "temperature": 0.3}])
    calibrator = Calibrator.load(None, shipped)
    assert calibrator.lookup("laya", "typed-decisions", "Q", 2) is None
    assert calibrator.lookup("von", "english", "Q", 2) is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "calibration fits ignored"),
        ('{"format": "other", "version": 1, "fits": []}', "format"),
        ('{"format": "system1-calibration", "version": 5, "fits": []}', "version 5"),
        ('{"format": "system1-calibration", "version": 4, "fits": [{"provider": "a", "model": "b", "n_options": 4, "n_options_max": 3, "temperature": 1}]}', "below"),
        ('{"format": "system1-calibration", "version": 1, "fits": [{"provider": "a", "model": "b", "temperature": 1}]}', "exactly one"),
        ('{"format": "system1-calibration", "version": 1, "fits": [{"provider": "a", "model": "b", "n_options": 2, "temperature": 0}]}', "temperature"),
    ],
)
def test_a_broken_fits_file_is_reported_and_ignored(tmp_path, content, why):
    local = tmp_path / "local.json"
    local.write_text(content)
    calibrator = Calibrator.load(local, tmp_path / "missing.json")
    assert calibrator.sources == []
    assert len(calibrator.errors) == 1 and why in calibrator.errors[0] and str(local) in calibrator.errors[0]


def test_extra_fields_are_kept_for_people():
    parsed = FitsFile.model_validate({"fits": [{"provider": "a", "model": "b", "n_options": 2, "temperature": 1.5, "n": 45, "ece_after": 0.1}]})
    assert parsed.fits[0].model_extra == {"n": 45, "ece_after": 0.1}


def test_the_shipped_fits_file_is_read_by_default():
    calibrator = Calibrator.load(None)
    assert calibrator.errors == []
    assert [source.name for source in calibrator.sources] == ["shipped"]


def test_a_fit_with_a_yes_shift_can_turn_a_leaning_yes_into_a_no_and_leaves_other_answers_alone():
    from system1.core.calibration import Fit

    fit = Fit(provider="p", model="m", unseen=True, temperature=1.0, yes_shift=-1.0)
    assert fit.apply({"yes": 0.6, "no": 0.4})["no"] == pytest.approx(1 / (1 + 1.5 * math.exp(-1.0)))
    assert fit.apply({"a": 0.6, "b": 0.4}) == pytest.approx({"a": 0.6, "b": 0.4})
    assert fit.apply({"yes": 1.0, "no": 0.0}) == {"yes": 1.0, "no": 0.0}
